"""`labcoat inside` on real tinylm trials (`labcoat run`, 20 steps, width 16, checkpoints):
the JSON's metric means equal tinylm's metric on models rebuilt here from the checkpoint
files, arms pair by seed, probes run, and bad input ends in one line (exit code 2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import cli, shared_home, stored_experiment, use_home
from labcoat.torch import load_checkpoint
from labcoat.workloads.tinylm import INSIDE

DESIGN = """name: ins
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} -m labcoat.workloads.tinylm --steps 20 --width 16 --heads 2 --batch-size 16
  --eval-every 0 --eval-items 4 --no-guard --checkpoint-every 10 --seed {seed} --lr {lr}"
params: {lr: 0.01}
arms: {a: {control: true}, b: {params: {lr: 0.05}}}
seeds: 1
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("inside")
    (tmp / "design.yaml").write_text(DESIGN)
    with shared_home(tmp / "home") as path:
        cli("run", str(tmp / "design.yaml"), "--plain", check=True, cwd=tmp)
        stored_experiment("nock", "name: nock", [
            {"key": "a-s0", "arm": "a", "command": ["python", "-m", "labcoat.workloads.tinylm"]},
            {"key": "b-s0", "arm": "b", "command": ["python", "-m", "labcoat.workloads.tinylm"]},
            {"key": "c-s0", "arm": "c", "command": ["python", "train.py"]}])
        yield path


@pytest.fixture
def here(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_home(monkeypatch, home)


def _model(home: Path, trial: str, command: list[str]):
    cfg = INSIDE.configure({}, command)
    model = INSIDE.build_model(cfg)
    directory = home / "runs" / "ins" / trial / "checkpoints"
    model.load_state_dict(load_checkpoint(directory)["tracked"]["model"])
    return cfg, model.eval()


def test_json_patches_rebuilt_models_and_its_means_match_the_checkpoints(here: Path):
    done = cli("inside", "ins", "--control", "a-s0", "--variant", "b-s0", "--json",
               "--reps", "200", "--ig-steps", "2", check=True)
    out = json.loads(done.stdout)
    pair = out["pairs"][0]
    assert pair["control"]["trial"] == "a-s0" and pair["variant"]["step"] == 20
    show = json.loads(cli("show", "ins", "--json", check=True).stdout)
    commands = {t["id"]: t for t in show["trials"]}
    assert commands  # the trials exist
    command = ["python", "-m", "labcoat.workloads.tinylm", "--steps", "20", "--width", "16",
               "--heads", "2", "--eval-items", "4"]
    means = {}
    for trial in ("a-s0", "b-s0"):
        cfg, model = _model(here, trial, command)
        _, batches = INSIDE.eval_items(cfg)
        with torch.no_grad():
            means[trial] = np.concatenate([INSIDE.metric(model, b).numpy()
                                           for b in batches]).mean()
    patching = out["patching"]
    assert patching["control"] == pytest.approx(means["a-s0"], abs=1e-5)
    assert patching["variant"] == pytest.approx(means["b-s0"], abs=1e-5)
    assert patching["items"] == out["items"] == 40
    names = [c["name"] for c in patching["components"]]
    assert "blocks.0.attn.head1" in names and "blocks.1.mlp" in names
    assert [c["rank"] for c in patching["components"]] == list(range(1, len(names) + 1))
    assert patching["correction"] == "holm" and -1 <= patching["agreement_spearman"] <= 1
    assert patching["ig_steps"] == 2 and patching["top"] == 3
    assert 0 <= patching["top_recall"] <= 1 and 3 <= patching["clear"] <= len(names)
    assert -1 <= patching["agreement_spearman_both"] <= 1


def test_arms_pair_by_seed_and_probes_and_the_table(here: Path, capsys):
    from labcoat import inside, store
    from labcoat.cli._inside import print_inside

    db = store.open_store()
    try:
        with db.session() as session:
            result = inside.compare_trials(
                session, "ins", "a", "b", probe="task",
                config=inside.PatchingConfig(components=["blocks.1.mlp", "blocks.0.attn.head0"],
                                             reps=200),
                probe_config=inside.ProbeConfig(reps=200))
    finally:
        db.close()
    assert [(c.key, v.key) for c, v in result.pairs] == [("a-s0", "b-s0")]
    out = result.as_dict()
    assert [layer["layer"] for layer in out["probes"]["layers"]] == ["blocks.0", "blocks.1"]
    assert out["probes"]["classes"] == 10
    json.dumps(out)  # JSON-ready
    print_inside(result)
    printed = capsys.readouterr().out
    assert "share of the difference" in printed and "probes for 'task'" in printed
    assert "blocks.0.attn.head0" in printed


def test_bad_input_ends_in_one_line(here: Path):
    for args, message in [(["ins", "--control", "zz", "--variant", "b"],
                           "neither a trial nor an arm"),
                          (["nock", "--control", "a-s0", "--variant", "b-s0"],
                           "no verified checkpoint")]:
        done = cli("inside", *args)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("args", "message"), [
    ({"experiment": "ins", "control": "a", "variant": "b", "config": {"components": ["b.9"]}},
     "unknown component"),
    ({"experiment": "ins", "control": "a", "variant": "b", "probe": "colour"},
     "unknown probe label 'colour'; the workload offers task, answer"),
    ({"experiment": "ins", "control": "a", "variant": "b", "config": {"correction": "fdr"}},
     "correction='fdr'"),
    ({"experiment": "nock", "control": "c-s0", "variant": "b-s0"}, "runs no module"),
    ({"experiment": "nock", "control": "a-s0", "variant": "b-s0", "workload": "nope.mod:X"},
     "cannot import"),
    ({"experiment": "nock", "control": "a-s0", "variant": "b-s0",
      "workload": "labcoat.workloads.tinylm:TinyLM"}, "lacks configure"),
])
def test_library_errors_name_the_fix(here: Path, args, message):
    from labcoat import inside, store
    from labcoat.errors import LabcoatError

    args = dict(args)
    db = store.open_store()
    try:
        with db.session() as session, pytest.raises(LabcoatError, match=message):
            config = args.pop("config", {})
            inside.compare_trials(session, config=inside.PatchingConfig(reps=200, **config),
                                  **args)
    finally:
        db.close()
