"""Rerun and replay on real tinylm trials (CPU, 16 steps, width 16).

One experiment recorded for replay (every checkpoint kept) is shared by the tests.
References: straight in-process tinylm runs of 6, 9 and 10 steps (the replayed
probe values must equal what those runs' weights give), the checkpoint steps the
fixed interval implies, and the step right after a probe that perturbs the weights.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from helpers import cli
from labcoat.reproduce import ReplayMismatch, replay_trial, rerun_trial
from labcoat.reproduce._compare import Divergence, first_divergence
from labcoat.reproduce._replay import plan_segments
from labcoat.workloads.tinylm import MAX_LEN, Config, train

CONFIG = Config(width=16, heads=2, batch_size=8, steps=16, dropout=0.1, eval_every=0,
                eval_items=2, schedule="constant", lr=0.01, seed=0, threads=1)
PROBES = '''import torch


def weight_norm(ctx):
    """Global L2 norm of the weights after the step (never logged by tinylm)."""
    model = ctx.modules["model"]
    return {"total": sum(p.detach().double().square().sum() for p in model.parameters()) ** 0.5}


def perturb(ctx):
    """A probe that wrongly writes to the model: the replay must refuse to trust it."""
    with torch.no_grad():
        ctx.modules["model"].tok_emb.weight.mul_(1.01)
    return {}
'''


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """tinylm trials recorded for replay (checkpoint every 4 steps, all kept); the probe
    module sits in the directory `labcoat replay` runs from, outside the recorded code."""
    tmp = tmp_path_factory.mktemp("replay")
    repo = tmp / "proj"
    repo.mkdir()
    (tmp / "tlprobes.py").write_text(PROBES)
    (repo / "design.yaml").write_text("""name: tl
hypothesis: {claim: c, metric: loss, direction: decrease}
command: "{python} -m labcoat.workloads.tinylm --steps 16 --width 16 --heads 2 --batch-size 8
  --dropout 0.1 --eval-every 0 --eval-items 2 --schedule constant --no-guard
  --checkpoint-every 4 --replay-budget 0.5 --seed {seed} --lr {lr}"
params: {lr: 0.01}
arms: {a: {control: true}, b: {params: {lr: 0.02}}}
seeds: 1
""")
    for args in (["init", "-q"], ["add", "."],
                 ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LABCOAT_HOME", str(tmp / "home"))
        patch.delenv("LABCOAT_DB", raising=False)
        patch.chdir(tmp)
        cli("run", str(repo / "design.yaml"), "--plain", check=True, cwd=tmp)
        yield tmp


def _weights(steps: int) -> dict[str, torch.Tensor]:
    model = train(dataclasses.replace(CONFIG, steps=steps)).model
    return {name: p.detach().double().clone() for name, p in model.named_parameters()}


def test_recording_for_replay_keeps_every_checkpoint(recorded):
    directory = recorded / "home" / "runs" / "tl" / "a-s0" / "checkpoints"
    assert sorted(p.name for p in directory.iterdir()) == [
        "step-00000004", "step-00000008", "step-00000012", "step-00000016"]


def test_rerun_of_tinylm_is_bit_identical(recorded):
    result = rerun_trial("tl/a-s0")
    assert result.identical, result.as_dict()
    assert result.steps == 16 and result.points > 16  # loss, lr and the final evals


def test_replay_probes_equal_a_straight_run(recorded):
    result = cli("replay", "tl/a-s0", "--from", "6", "--to", "10", "--segments", "2",
                 "--probe", "grad_norms", "--probe", "update_ratios", "--probe",
                 "attention_entropy", "--probe", "activations", "--probe",
                 "tlprobes:weight_norm", "--json", cwd=recorded)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert [(s["start"], s["end"], s["restore_step"]) for s in found["segments"]] == [
        (6, 8, 4), (9, 10, 8)]
    assert found["verified_steps"] == (8 - 4) + (10 - 8)
    values = {(r["step"], r["probe"]): r["values"] for r in found["records"]}
    assert sorted({step for step, _ in values}) == [6, 7, 8, 9, 10]
    assert Path(found["output"]).read_text().count("\n") == len(found["records"]) == 25
    # the two segments ran side by side: the second started before the first ended
    journals = [[json.loads(line) for line in
                 (Path(s["run_dir"]) / "journal.jsonl").read_text().splitlines()]
                for s in found["segments"]]
    assert journals[1][0]["time"] < journals[0][-1]["time"]

    w6, w9, w10 = _weights(6), _weights(9), _weights(10)
    for step, weights in ((6, w6), (10, w10)):  # one step of each segment
        total = math.sqrt(sum(float(w.square().sum()) for w in weights.values()))
        assert values[(step, "tlprobes:weight_norm")]["total"] == pytest.approx(total, rel=1e-6)
    name = "blocks.0.attn.qkv.weight"
    ratio = float((w10[name] - w9[name]).norm() / w9[name].norm())
    assert values[(10, "update_ratios")][name] == pytest.approx(ratio, rel=1e-6)
    grads = values[(7, "grad_norms")]
    per_param = [v for k, v in grads.items() if k != "total"]
    assert grads["total"] == pytest.approx(math.sqrt(sum(v * v for v in per_param)))
    entropy = values[(8, "attention_entropy")]
    assert sorted(entropy) == [f"blocks.{b}.attn/head{h}" for b in (0, 1) for h in (0, 1)]
    assert all(0 < h < math.log(MAX_LEN) for h in entropy.values())
    assert values[(9, "activations")]["ln_f/std"] == pytest.approx(1.0, abs=0.2)


def test_a_probe_that_changes_the_run_is_caught_at_the_next_step(recorded):
    with pytest.raises(ReplayMismatch, match="diverged at step 7: loss replayed"):
        replay_trial("tl/a-s0", start=6, end=8, probes=["tlprobes:perturb"])


def test_segments_split_the_range_and_start_from_the_checkpoint_before_them():
    kept = [(4, "c4"), (8, "c8"), (12, "c12")]
    plan = [(s.start, s.end, s.restore_step, s.checkpoint)
            for s in plan_segments(3, 13, 3, kept)]
    assert plan == [(3, 6, 0, None), (7, 10, 4, "c4"), (11, 13, 8, "c8")]
    assert [(s.start, s.end) for s in plan_segments(5, 6, 4, kept)] == [(5, 5), (6, 6)]


def test_divergence_is_bitwise_and_ordered_by_step():
    nan = float("nan")
    same = {"loss": {1: 1.0, 2: nan}, "acc": {2: 0.0}}
    assert first_divergence(same, {"loss": {1: 1.0, 2: nan}, "acc": {2: 0.0}}) is None
    assert first_divergence(same, {"loss": {1: 1.0, 2: nan}, "acc": {2: -0.0}}) == Divergence(
        2, "acc", 0.0, -0.0)
    assert first_divergence(same, {"loss": {1: 1.0 + 2**-52, 2: nan}}) == Divergence(
        1, "loss", 1.0, 1.0 + 2**-52)
    assert first_divergence(same, {"loss": {1: 1.0, 2: nan}}) == Divergence(2, "acc", 0.0, None)
