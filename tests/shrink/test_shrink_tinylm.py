"""labcoat shrink on tinylm (real trials, real torch): each planted size bug appears only
above its size, and shrinking a failed run finds one of the true minima of a brute-forced
grid, with no slip, every candidate a trial of EXP-shrink."""

import io
import itertools
import json

import pytest
from rich.console import Console

from helpers import cli
from labcoat import runner, shrink, store

pytestmark = pytest.mark.needs("torch")

TINY = dict(width=16, heads=2, batch_size=4, eval_items=2, eval_every=0, lr=2e-2)


def _alerts(fault: str, **config) -> set[str]:
    """The guard's error and critical rules on a tiny in-process run with `fault` at step 3."""
    from labcoat.workloads.tinylm import Config, Fault, train

    cfg = Config(**{**TINY, "steps": 8, "threads": 1, **config})
    result = train(cfg, fault=Fault(fault, 3),
                   guard={"check_every": 1, "causal_every": 1, "stop_on": None})
    return {a.rule for a in result.alerts if a.severity in ("error", "critical")}


@pytest.mark.parametrize(("fault", "above", "below", "rule"), [
    ("deep_overflow", {"depth": 2}, {"depth": 1}, "nonfinite"),
    # rows longer than 16 tokens come often enough in batches of 8
    ("long_mask_leak", {"seq_len": 32, "dropout": 0.1, "batch_size": 8},
     {"seq_len": 16, "dropout": 0.1, "batch_size": 8}, "model.causality"),
    ("accumulation_no_zero_grad", {"accumulation": 2}, {"accumulation": 1}, "grad.not_reset"),
])
def test_each_size_bug_appears_only_above_its_size(fault, above, below, rule):
    assert any(r.startswith(rule) for r in _alerts(fault, **above))
    assert not _alerts(fault, **below)


LEVELS = {"steps": [8, 4], "depth": [2, 1], "width": [16, 8]}  # baseline (the largest) first
PARENT = {k: v[0] for k, v in LEVELS.items()}


def _fails(steps: int, depth: int, width: int) -> bool:
    """Brute force, on its own: the run the design's command makes, trained in this process
    (a trial process would cost ~2.5 s of imports for 8 steps), fails when its first error or
    critical alert is a critical NaN/Inf, which is what stops the trial (stop_on error)."""
    from labcoat.workloads.tinylm import Config, Fault, train

    cfg = Config(steps=steps, depth=depth, width=width, heads=2, batch_size=4, eval_items=2,
                 eval_every=0, threads=1)
    result = train(cfg, fault=Fault("deep_overflow", max(1, round(0.5 * steps))),
                   guard={"check_every": 1, "causal_every": 1, "stop_on": None})
    first = next((a for a in result.alerts if a.severity in ("error", "critical")), None)
    return first is not None and first.severity == "critical" and \
        first.rule.startswith("nonfinite.")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Every configuration of a small grid, brute-forced; and the shrink of the largest's
    failed trial (beside a shallow arm), run as labcoat runs it."""
    from helpers import shared_home

    tmp = tmp_path_factory.mktemp("shrink-tinylm")
    with shared_home(tmp / "home"):
        path = tmp / "design.yaml"
        path.write_text(f"""name: deep
hypothesis: {{claim: the deep model overflows, metric: loss, direction: decrease}}
command: >-
  {{python}} -m labcoat.workloads.tinylm --steps {{steps}} --width {{width}} --depth {{depth}}
  --heads 2 --batch-size 4 --eval-items 2 --eval-every 0 --guard-stop-on error
  --guard-check-every 1 --guard-causal-every 1 --fault deep_overflow --fault-at 0.5
params: {{{", ".join(f"{k}: {v}" for k, v in PARENT.items())}}}
arms: {{deep: {{control: true}}, shallow: {{params: {{depth: 1}}}}}}
seeds: [0]
restart: {{retries: 0}}
shrink:
  params: {{steps: 4, depth: 1, width: 8}}
  budget: 20
""")
        runner.run_design(path, console=Console(file=io.StringIO()), plain=True, parallelism=2)
        db = store.open_store()
        with db.session() as session:
            trials = {t.arm: t for t in store.find_experiment(session, "deep").trials}
            assert trials["deep"].status == "failed"
            assert {k: trials["deep"].params[k] for k in PARENT} == PARENT
            assert trials["shallow"].status == "done"
            key = trials["deep"].key
        db.close()
        outcomes = {config: _fails(*config) for config in itertools.product(*LEVELS.values())}
        result = shrink.shrink_trial(f"deep/{key}", out=tmp / "min.yaml")
        yield outcomes, result, tmp / "home"


@pytest.mark.slow  # a trial, then a shrink
def test_the_answer_is_one_of_the_brute_forced_minima(grid):
    outcomes, result, _ = grid
    assert len(outcomes) == 8
    failing = [c for c, fails in outcomes.items() if fails]
    minima = [c for c in failing if not any(
        d != c and all(x <= y for x, y in zip(d, c, strict=True)) for d in failing)]
    assert minima == [(4, 2, 8)]  # the overflow needs depth 2, not more steps or width
    answer = tuple(result.minimal[k] for k in LEVELS)
    assert answer in minima
    assert result.reproduced and result.one_minimal and not result.slips
    assert len(result.candidates) <= 40
    assert result.time_to_failure.ratio is not None


@pytest.mark.slow
def test_the_candidates_are_trials_of_the_shrink_experiment(grid, monkeypatch):
    from helpers import use_home

    _, result, home = grid
    use_home(monkeypatch, home)
    shown = json.loads(cli("show", "deep-shrink", "--json", check=True).stdout)
    statuses = {t["key"]: t["status"] for t in shown["trials"]}
    for candidate in result.candidates:
        expected = "failed" if candidate.outcome == "fails" else "done"
        assert statuses[candidate.trial] == expected
