"""One `labcoat import` verb, two forms: tracked runs (a source first) and per-item results
(the old form, or with lm-eval|inspect|items first). Flags of one form given to the other,
and a missing --arm, end in one line that says what to do."""

from __future__ import annotations

from helpers import cli


def test_flags_of_the_other_form_are_named_with_the_fix(home, tmp_path):
    done = cli("import", str(tmp_path), "--experiment", "x", "--arm-by", "lr")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--arm-by does not apply to importing per-item results" in done.stderr
    assert "labcoat import mlflow|wandb|tensorboard PATH" in done.stderr
    done = cli("import", "tensorboard", str(tmp_path), "--experiment", "x", "--arm", "a",
               "--seed", "1")
    assert "--arm, --seed do not apply to importing tensorboard runs" in done.stderr
    done = cli("import", "lm-eval", str(tmp_path), "--experiment", "x")
    assert "--arm is missing" in done.stderr
