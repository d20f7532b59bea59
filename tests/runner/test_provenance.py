"""Provenance recorded at launch, and `labcoat rerun` from it, on a small stdlib training
script kept in a real git repository (no torch: fast).

References are independent of labcoat: git itself (rev-parse, apply), hashlib on the
file's bytes, importlib.metadata / platform / torch for the environment, and the
script's own formula for the values a diverging rerun must report.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import cli
from labcoat.errors import LabcoatError
from labcoat.reproduce import replay_trial, rerun_trial
from labcoat.reproduce._worktree import recorded_code
from labcoat.runner._provenance import code_state

SCRIPT = '''import sys
import labcoat

run = labcoat.init()
seed, data = int(sys.argv[1]), sys.argv[2]
loss = 2.0 + seed
for step in range(1, 7):
    if step >= 4:  # the data file counts from step 4 on
        loss += len(open(data).read()) / 1000
    loss = loss * 0.75 + 0.125
    run.log(step, loss=loss)
run.finish()
'''


DATA = "abc" * 10
BAD = [
    (("show", "prov", "--provenance"), "'prov' does not name a trial; use EXPERIMENT/TRIAL"),
    (("rerun", "prov/nope"), "experiment 'prov' has no trial 'nope' (trials: a-s0, b-s0)"),
    (("show", "prov/a-s0"), "'prov/a-s0' names a trial; `labcoat show prov/a-s0 --provenance`"),
    (("rerun", "ghost/a-s0"), "no experiment named 'ghost'"),
    (("replay", "prov/a-s0", "--from", "3", "--to", "9"),
     "--to 9 is past the last recorded step of prov/a-s0 (6)"),
    (("replay", "prov/a-s0", "--from", "3", "--to", "2"), "--to 2 is before --from 3"),
    (("replay", "prov/a-s0", "--from", "1", "--to", "2", "--verify", "acc"),
     "no recorded 'acc' to verify a replay against; choose --verify METRIC (recorded: loss)"),
    (("replay", "prov/a-s0", "--from", "1", "--to", "2", "--probe", "grads"),
     "--probe 'grads' is neither a built-in probe"),
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def _expected_losses(seed: int, data_len: int) -> list[float]:
    """The script's formula, written again (the reference for the divergence values)."""
    loss, out = 2.0 + seed, []
    for step in range(1, 7):
        if step >= 4:
            loss += data_len / 1000
        loss = loss * 0.75 + 0.125
        out.append(loss)
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A git repo with a committed script, then an uncommitted edit and an untracked file;
    its data file lives outside the repository. One run, shared by this module's tests
    (the rerun test changes the data file last)."""
    tmp_path = tmp_path_factory.mktemp("provenance")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LABCOAT_HOME", str(tmp_path / "home"))
        patch.delenv("LABCOAT_DB", raising=False)
        yield _project(tmp_path)


def _project(tmp_path: Path) -> dict[str, Path]:
    repo, data = tmp_path / "proj", tmp_path / "data" / "corpus.txt"
    repo.mkdir()
    data.parent.mkdir()
    data.write_text(DATA)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "train.py").write_text(SCRIPT.replace("0.75", "0.5"))
    (repo / "design.yaml").write_text(f"""name: prov
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} train.py {{seed}} {{data}}"
params: {{data: "{data}"}}
arms: {{a: {{control: true}}, b: {{params: {{data: "{data}"}}}}}}
seeds: 1
data: {{train: [corpus.txt]}}
""")
    (repo / "corpus.txt").write_text("declared training text\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    (repo / "train.py").write_text(SCRIPT)  # uncommitted: the run uses 0.75
    (repo / "helper.py").write_text("X = 1\n")  # untracked
    cli("run", "design.yaml", "--plain", cwd=repo, check=True)
    return {"tmp": tmp_path, "repo": repo, "data": data}


def _provenance(ref: str) -> dict:
    return json.loads(cli("show", ref, "--provenance", "--json", check=True).stdout)


def test_provenance_names_commit_diff_environment_and_data(project):
    repo, tmp_path = project["repo"], project["tmp"]
    found = _provenance("prov/a-s0")["provenance"]
    code = found["code"]
    assert code["git"] and code["commit"] == _git(repo, "rev-parse", "HEAD")
    assert code["dirty"] and code["untracked"] == ["helper.py"]
    # The recorded diff recreates the working tree exactly, by git's own hand.
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    (tmp_path / "p.diff").write_text(code["diff"])
    _git(clone, "apply", str(tmp_path / "p.diff"))
    for name in ("train.py", "helper.py", "design.yaml"):
        assert (clone / name).read_text() == (repo / name).read_text(), name

    experiment = json.loads(cli("show", "prov", "--json", check=True).stdout)["experiment"]
    assert found["design"]["hash"] == experiment["design_hash"]
    assert found["command"][0] == sys.executable and found["command"][1:] == [
        "train.py", "0", str(project["data"])]
    assert found["seeds"]["seed"] == 0 and found["params"]["data"] == str(project["data"])
    declared = {d["path"]: d for d in found["data"]}
    for path, content, source in ((repo / "corpus.txt", "declared training text\n",
                                   "data.train"), (project["data"], DATA, "params.data"),
                                  (repo / "train.py", SCRIPT, "command")):
        entry = declared[str(path)]
        assert entry["sha256"] == hashlib.sha256(content.encode()).hexdigest()
        assert (entry["bytes"], entry["declared_as"]) == (len(content), source)

    env = found["environment"]
    assert env["python"] == platform.python_version()
    assert env["packages"]["numpy"] == importlib.metadata.version("numpy")
    from conftest import EXTRAS

    if EXTRAS["torch"][0]:
        import torch

        assert env["torch"]["version"] == torch.__version__
        assert env["torch"]["cuda"] == torch.version.cuda
    else:  # a bare install: provenance says torch is absent
        assert env["torch"] is None
    assert env["cpu"]["count"] == os.cpu_count()
    assert env["variables"]["OMP_NUM_THREADS"] == "1"  # 2 trials share the CPUs

    text = cli("show", "prov/a-s0", "--provenance", check=True).stdout
    assert code["commit"][:12] in text and "uncommitted changes recorded" in text


def test_bad_references_and_flags_end_in_one_message(project):
    for args, message in BAD[:3]:  # through the CLI: one line, exit 2, no traceback
        result = cli(*args, cwd=project["repo"])
        assert result.returncode == 2, args
        assert message in " ".join(result.stderr.split()), (args, result.stderr)
        assert "Traceback" not in result.stderr
    for args, message in BAD[3:]:  # the same errors, raised before anything starts
        with pytest.raises(LabcoatError) as caught:
            if args[0] == "rerun":
                rerun_trial(args[1])
            else:
                options = dict(zip(args[2::2], args[3::2], strict=True))
                replay_trial(args[1], start=int(options["--from"]), end=int(options["--to"]),
                             verify=options.get("--verify", "loss"),
                             probes=[options["--probe"]] if "--probe" in options else None)
        assert message in str(caught.value), args


def test_rerun_uses_recorded_code_and_finds_the_first_divergence(project):
    repo, data = project["repo"], project["data"]
    # Code edited and committed after the run: the rerun still runs the recorded code.
    (repo / "train.py").write_text(SCRIPT.replace("0.125", "0.5"))
    _git(repo, "commit", "-qam", "later")
    result = cli("rerun", "prov/a-s0", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bit-identical: 6 metric points over 6 steps" in " ".join(result.stdout.split())
    assert _git(repo, "worktree", "list").count("\n") == 0  # the temporary worktree is gone

    data.write_text("abcd" * 10)  # the data changed: steps 4+ must diverge
    result = cli("rerun", "prov/a-s0", cwd=repo)
    assert result.returncode == 1
    assert "diverged first at step 4, metric 'loss'" in " ".join(result.stdout.split())
    found = rerun_trial("prov/a-s0").as_dict()
    recorded, now = _expected_losses(0, 30), _expected_losses(0, 40)
    assert found["divergence"] == {"step": 4, "metric": "loss", "recorded": recorded[3],
                                   "new": now[3]}
    assert recorded[:3] == now[:3]
    assert any("corpus.txt changed since the run" in c for c in found["changed"])


def test_outside_git_the_provenance_says_so(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    code = code_state(plain)
    assert code["git"] is False and "not a git repository" in code["note"]
    with recorded_code(code, tmp_path) as copy:  # a rerun runs the code as it is now
        assert copy.map(str(plain / "train.py")) == str(plain / "train.py")
        assert "not a git repository" in copy.notes[0]


def test_the_package_list_equals_importlib_metadatas():
    """Names and versions read from METADATA headers alone equal those of importlib.metadata's
    own (e-mail) parse, for every installed distribution."""
    from labcoat.runner._provenance import environment_state

    expected = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()
                if d.metadata["Name"]}
    assert environment_state()["packages"] == dict(sorted(expected.items(),
                                                          key=lambda kv: kv[0].lower()))
    assert len(expected) > 20
