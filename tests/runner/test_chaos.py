"""Chaos: kills, corrupt checkpoints, a full disk and torn journal writes lose nothing.

A real tinylm experiment runs twice, fault-free and under `--chaos`; every trial
must finish with bit-identical final parameters and identical metrics, each
metric point recorded once, and each fault recorded as an event.
"""

import json

import pytest
import torch

from helpers import cli
from labcoat.errors import LabcoatError
from labcoat.runner._chaos import parse_chaos

CHAOS = "kill@3s,corrupt@5s,kill-in-save@2,disk-full@3,torn-journal@40"


def _design(tmp_path, name):
    final = tmp_path / name / "final"
    final.mkdir(parents=True)
    path = tmp_path / name / "design.yaml"
    path.write_text(f"""name: {name}
hypothesis: {{claim: c, metric: loss, direction: decrease}}
command: "{{python}} -m labcoat.workloads.tinylm --steps 240 --width 32 --dropout 0.1
  --eval-every 80 --eval-items 10 --eval-budget 0 --checkpoint-every 20 --seed {{seed}} --lr {{lr}}
  --save-final {{final}}/{{trial}}.pt"
params: {{lr: 0.01, final: "{final}"}}
arms: {{a: {{control: true}}, b: {{params: {{lr: 0.005}}}}}}
seeds: 1
restart: {{retries: 1, backoff: 0.2}}
""")
    return path, final


def _export(name, *flags):
    rows = [json.loads(x) for x in cli("export", name, *flags, check=True).stdout.splitlines()]
    keys = [tuple(r[k] for k in r if k not in ("value", "score")) for r in rows]
    assert len(keys) == len(set(keys)), "a point was recorded twice"
    return {k: r.get("value", r.get("score")) for k, r in zip(keys, rows, strict=True)
            if not str(r.get("name", "")).startswith("phase_s/")}  # wall-clock phase times


@pytest.mark.slow
def test_chaos_run_equals_the_fault_free_run_bit_for_bit(home, tmp_path):
    clean, clean_final = _design(tmp_path, "clean")
    chaos, chaos_final = _design(tmp_path, "chaos")
    cli("run", str(clean), check=True)
    result = cli("run", str(chaos), "--chaos", CHAOS, "--plain", check=True)
    assert "2 trial(s) finished now" in result.stdout

    for trial in ("a-s0", "b-s0"):
        expected = torch.load(clean_final / f"{trial}.pt", weights_only=True)
        found = torch.load(chaos_final / f"{trial}.pt", weights_only=True)
        assert expected.keys() == found.keys()
        for name in expected:
            assert torch.equal(expected[name], found[name]), f"{trial}: {name} differs"
    assert _export("chaos") == _export("clean")
    assert _export("chaos", "--items") == _export("clean", "--items")

    from labcoat import store

    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "chaos")
        events = store.events(session, [t.id for t in exp.trials])
        causes = {a.id: a.cause for t in exp.trials for a in t.attempts}
    db.close()
    kinds = [e.kind for e in events]
    for fault in ("chaos.kill-in-save", "chaos.disk-full", "chaos.torn-journal"):
        assert kinds.count(fault) == 2, fault  # one attempt of each trial
    # each injected fault ended its attempt (unless a periodic kill came first)
    expected = {"chaos.kill-in-save": "exit 137", "chaos.torn-journal": "exit 137",
                "chaos.disk-full": "No space left on device"}
    for event in events:
        if event.kind in expected:
            cause = causes[event.attempt_id]
            assert expected[event.kind] in cause or "SIGKILL" in cause, (event.kind, cause)


def test_bad_chaos_spec_is_one_clear_error():
    with pytest.raises(LabcoatError, match=r"'explode@3' is not a fault; use kill@20s"):
        parse_chaos("kill@3s,explode@3")
    spec = parse_chaos("kill@20s, disk-full@2")
    assert spec.kill_every == 20 and spec.injected == [
        ("disk-full", "LABCOAT_CHECKPOINT_FAULT", "disk-full@save=2")]
