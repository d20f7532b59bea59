"""Damaged checkpoints are said where the user looks and kept as evidence (issue 30, 2 and 3).

A script is run, its newest checkpoint is damaged (a truncated ``state.pt``, a manifest
that is not JSON), and the script is run again, as a user would: the fallback is one line
on stderr and in ``labcoat status``; the damaged checkpoint is moved to ``corrupt/``,
byte for byte; with every checkpoint damaged the run stops with one clear error instead of
training again from step 0, unless ``restore(on_corrupt="start_over")`` says so.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from labcoat.errors import LabcoatError
from labcoat.torch import Checkpointer, CheckpointError

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import labcoat
    from labcoat.torch import Checkpointer

    run = labcoat.init(experiment="damage", seed=0)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = Checkpointer("checkpoints", run=run, every=10)
    ckpt.track(model=model, optimizer=opt)
    start = ckpt.restore(**({"on_corrupt": sys.argv[1]} if len(sys.argv) > 1 else {}))
    print("start", start)
    for step in range(start + 1, 31):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.log(step, loss=loss.item())
        if ckpt.should_save(step):
            ckpt.save(step)
    ckpt.close()
    run.finish()
""")


def run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABCOAT_")}
    env["LABCOAT_HOME"] = str(tmp_path / "home")
    return subprocess.run([sys.executable, script.name, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def status(tmp_path: Path, verb: str = "status") -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABCOAT_")}
    env["LABCOAT_HOME"] = str(tmp_path / "home")
    labcoat = str(Path(sys.executable).parent / "labcoat")
    result = subprocess.run([labcoat, verb, "damage"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())  # rich may wrap: compare words


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_truncated_newest_checkpoint_is_said_and_kept(tmp_path: Path) -> None:
    first = run_script(tmp_path)
    assert first.returncode == 0, first.stderr
    state = tmp_path / "checkpoints" / "step-00000030" / "state.pt"
    state.write_bytes(state.read_bytes()[:200])
    damaged = digest(state)

    second = run_script(tmp_path)
    assert second.returncode == 0, second.stderr
    assert "start 20" in second.stdout
    aside = tmp_path / "checkpoints" / "corrupt" / "step-00000030"
    assert digest(aside / "state.pt") == damaged  # the evidence, untouched
    lines = [x for x in second.stderr.splitlines() if "step 30" in x]
    assert len(lines) == 1 and "truncated" in lines[0] and str(aside) in lines[0]
    assert "resuming from step 20" in second.stderr and "Traceback" not in second.stderr
    for verb in ("status", "report"):
        said = status(tmp_path, verb)
        assert "checkpoint problems (1)" in said and "truncated" in said and str(aside) in said


def test_a_manifest_that_is_not_json_is_moved_aside(tmp_path: Path) -> None:
    assert run_script(tmp_path).returncode == 0
    manifest = tmp_path / "checkpoints" / "step-00000030" / "manifest.json"
    manifest.write_text("{not json")
    second = run_script(tmp_path)
    assert second.returncode == 0 and "start 20" in second.stdout
    assert "not valid JSON" in second.stderr
    aside = tmp_path / "checkpoints" / "corrupt" / "step-00000030" / "manifest.json"
    assert aside.read_text() == "{not json"


def test_every_checkpoint_corrupt_stops_the_run_until_told_to_start_over(
        tmp_path: Path) -> None:
    assert run_script(tmp_path).returncode == 0
    checkpoints = tmp_path / "checkpoints"
    kept = {}
    for path in sorted(checkpoints.glob("step-*/state.pt")):
        path.write_bytes(path.read_bytes()[:100])
        kept[path.parent.name] = digest(path)
    assert len(kept) == 2  # keep_last

    for _ in range(2):  # the second time the damaged files are already set aside
        refused = run_script(tmp_path)
        assert refused.returncode != 0 and "start " not in refused.stdout
        assert "CheckpointError: no usable checkpoint" in refused.stderr
        assert 'on_corrupt="start_over"' in refused.stderr
        assert str(checkpoints / "corrupt") in refused.stderr
    for name, sha in kept.items():  # nothing deleted
        assert digest(checkpoints / "corrupt" / name / "state.pt") == sha
    assert "no usable checkpoint" not in status(tmp_path)  # refused, not a checkpoint event
    assert "checkpoint problems (2)" in status(tmp_path)

    fresh = run_script(tmp_path, "start_over")
    assert fresh.returncode == 0 and "start 0" in fresh.stdout
    assert "starting over at step 0 as asked" in fresh.stderr
    assert sorted(p.name for p in (checkpoints / "corrupt").iterdir()) == sorted(kept)
    assert "start 30" in run_script(tmp_path).stdout  # its own checkpoints resume normally


def test_restore_rejects_an_unknown_on_corrupt(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    ckpt.track(model=torch.nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match="choose 'raise' or 'start_over'"):
        ckpt.restore(on_corrupt="ignore")


def test_a_fallback_without_a_run_is_one_warning_line(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    model = torch.nn.Linear(2, 2)
    with Checkpointer(tmp_path, every=1) as ckpt:
        ckpt.track(model=model)
        ckpt.restore()
        ckpt.save(1)
        ckpt.save(2)
    (tmp_path / "step-00000002" / "manifest.json").write_text("[")
    ckpt = Checkpointer(tmp_path)
    ckpt.track(model=model)
    with caplog.at_level(logging.WARNING, logger="labcoat.torch"):
        assert ckpt.restore() == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("step 2" in m and "corrupt/step-00000002" in m for m in warned), warned


# --- point 3: an unwritable directory fails at construction ------------------------------------


def test_an_unwritable_directory_fails_when_the_checkpointer_is_built(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(LabcoatError) as caught:
        Checkpointer(blocker / "checkpoints")
    message = str(caught.value)
    assert str(blocker / "checkpoints") in message and "writable directory" in message
    assert caught.value.__cause__ is None and "\n" not in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_fails_when_the_checkpointer_is_built(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(CheckpointError, match="Permission denied"):
            Checkpointer(tmp_path / "checkpoints")
    finally:
        tmp_path.chmod(0o755)


def test_the_user_script_on_an_unwritable_directory_says_one_line(tmp_path: Path) -> None:
    (tmp_path / "checkpoints").write_text("a file where the directory should be")
    result = run_script(tmp_path)
    assert result.returncode != 0 and "start" not in result.stdout
    errors = [x for x in result.stderr.splitlines() if "Error" in x]
    assert errors[-1].startswith("labcoat.torch.checkpoint._errors.CheckpointError: cannot "
                                 f"write checkpoints to {tmp_path / 'checkpoints'}")
    assert "During handling" not in result.stderr  # no chained tracebacks
