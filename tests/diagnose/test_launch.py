"""`labcoat diagnose` on trials whose command never started (issue 30 point 4): a command
that is not installed, a script or module that does not exist. The runner knew; the
diagnosis must say it, with the fix, rather than "cause unknown"."""

import json

import pytest

from helpers import cli
from labcoat.diagnose import AttemptEnd, diagnose, match_cause


def _run(tmp_path, name, command):
    design = tmp_path / f"{name}.yaml"
    design.write_text(f"""name: {name}
command: "{command} --seed {{seed}}"
params: {{x: 0}}
arms:
  a: {{control: true}}
  b: {{params: {{x: 1}}}}
seeds: 1
restart: {{retries: 0}}
""", encoding="utf-8")
    result = cli("run", str(design), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # every trial failed
    return json.loads(cli("diagnose", name, "--json", check=True).stdout)["diagnoses"]


def test_a_command_that_is_not_installed(home, tmp_path):
    found = _run(tmp_path, "nocmd", "no-such-trainer-xyz")
    assert len(found) == 2
    for d in found:
        assert d["cause"] == "command_not_found"
        assert d["happened"] == "command not found: no-such-trainer-xyz"
        assert "install it" in d["fix"] and "command:" in d["fix"]
        assert d["phase"] == "startup"
    text = cli("diagnose", "nocmd/a-s0", check=True).stdout
    assert "command not found: no-such-trainer-xyz" in text
    assert "cause  unknown" not in text and "fix" in text


def test_a_script_that_does_not_exist(home, tmp_path):
    found = _run(tmp_path, "noscript", "{python} missing_train.py")
    for d in found:
        assert d["cause"] == "script_missing"
        # Python names the script by its absolute path: the one the user must check
        assert d["happened"] == f"script missing: {tmp_path / 'missing_train.py'}"
        assert "relative path resolves" in d["fix"]


def test_a_module_that_does_not_exist(home, tmp_path):
    found = _run(tmp_path, "nomodule", "{python} -m no_such_module_xyz")
    assert {d["happened"] for d in found} == {"module missing: no_such_module_xyz"}


@pytest.mark.parametrize(("line", "cause", "what"), [
    ("bash: line 1: trainr: command not found", "command_not_found", "trainr"),
    ("/bin/sh: 1: trainr: not found", "command_not_found", "trainr"),
    ("bash: ./train.sh: No such file or directory", "script_missing", "./train.sh"),
    ("/usr/bin/env: 'python4': No such file or directory", "command_not_found", "python4"),
    ("could not start './run.sh': Permission denied; check the design's `command:`",
     "command_not_found", "./run.sh"),
    ("could not start 'x/y.sh' on node7: No such file or directory; check", "script_missing",
     "x/y.sh"),
])
def test_shell_and_launcher_messages(line, cause, what):
    hit = match_cause(line)
    assert (hit.cause, hit.what) == (cause, what)


def test_exit_127_alone_is_a_command_not_found():
    d = diagnose([], end=AttemptEnd(cause="exit 127", exit_code=127))
    assert d.cause == "command_not_found" and d.happened == "command not found"


def test_a_missing_tool_the_run_survived_is_not_the_cause():
    """`nvidia-smi: command not found` printed by a script that then trained on and died
    of an out-of-memory error: the OOM is the cause."""
    lines = ["bash: nvidia-smi: command not found"]
    lines += [f"step {i} loss 2.0" for i in range(1, 8)]
    lines += ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    d = diagnose(lines, end=AttemptEnd(cause="exit 1: torch.OutOfMemoryError: CUDA out of "
                                       "memory", exit_code=1))
    assert d.cause == "out_of_memory" and d.happened is None
