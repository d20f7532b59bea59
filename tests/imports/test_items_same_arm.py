"""Issue 30: `labcoat import` of a second results file as the same --arm used to replace the
first import's scores without a word. Now the same scores again change nothing, different
ones are refused (naming --replace, --seed and merging), and --replace replaces them."""

from __future__ import annotations

import json

from helpers import cli


def _inspect_log(path, values):
    samples = [{"id": i, "epoch": 1, "scores": {"match": {"value": v}}}
               for i, v in enumerate(values, start=1)]
    path.write_text(json.dumps({"version": 2, "status": "success",
                                "eval": {"task": "addition", "model": "m"}, "samples": samples}))
    return path


def _scores(experiment):
    out = cli("export", experiment, "--items", check=True).stdout
    return sorted((r["trial"], r["item"], r["score"]) for r in map(json.loads, out.splitlines()))


def test_a_second_file_for_the_same_arm_is_refused_not_silently_replacing(home, tmp_path):
    first = _inspect_log(tmp_path / "a.json", ["C", "I", "C"])
    second = _inspect_log(tmp_path / "b.json", ["I", "I", "C"])
    cli("import", str(first), "--experiment", "ext", "--arm", "model-a", check=True)
    before = _scores("ext")
    again = cli("import", "inspect", str(first), "--experiment", "ext", "--arm", "model-a")
    assert again.returncode == 0 and _scores("ext") == before  # the same scores: idempotent
    refused = cli("import", str(second), "--experiment", "ext", "--arm", "model-a")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"already holds 3 item scores (from {first})" in refused.stderr
    assert "Nothing was imported. Pass --replace" in refused.stderr
    assert "--seed N to add this file as another seed" in refused.stderr
    assert _scores("ext") == before
    cli("import", str(second), "--experiment", "ext", "--arm", "model-a", "--replace",
        check=True)
    assert [s for _, _, s in _scores("ext")] == [0.0, 0.0, 1.0]
