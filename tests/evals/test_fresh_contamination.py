"""The contamination gap catches leaked eval items: two short tinylm runs on recall and
count, one with the 200 eval items (100 per task) in 3/4 of every batch, one clean; each
model scored on the originals and on 4 fresh isomorphic twins per item (never trained on).
The leaked run's gap is >= 0.2 with a CI above 0; the clean run's CI holds 0.

This is the full measurement of issue 35 (500 steps of batch 32, width 64: about 12 s of
CPU for both runs); benchmarks/contamination_gap.py repeats it over seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labcoat.evals import EvalEngine, contamination_gap
from labcoat.workloads import tinylm
from labcoat.workloads.tinylm import LeakConfig, leaked_run

TASKS = ("recall", "count")
TWINS = 4


@pytest.fixture(scope="module")
def gaps() -> dict[str, object]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        eval_set = tinylm.make_eval_set(100, TASKS)
        twins = tinylm.fresh_twins(eval_set, TWINS, seed=0)
        held = eval_set.held_out() | {(t.example.task, t.example.input) for t in twins}
        leaked = [ex for xs in eval_set.items.values() for ex in xs]
        out = {}
        for name, share in (("leaked", 0.75), ("clean", 0.0)):
            model = leaked_run(leaked if share else [], held, TASKS,
                               LeakConfig(steps=500, leak_share=share))
            original = EvalEngine(model, tinylm.TOKENIZER, tinylm.eval_suite(eval_set)).score()
            fresh = EvalEngine(model, tinylm.TOKENIZER, tinylm.fresh_suite(twins)).score()
            assert [i.rsplit("~", 1)[0] for i in fresh.items[::TWINS]] == original.items
            out[name] = contamination_gap(original.scores,
                                          fresh.scores.reshape(-1, TWINS),
                                          tasks=original.tasks)
        return out
    finally:
        torch.set_num_threads(threads)


def test_leaked_items_show_a_gap_of_at_least_0_2(gaps):
    gap = gaps["leaked"]
    assert gap.items == 200 and gap.twins == TWINS
    assert gap.difference.estimate >= 0.2, gap.line
    assert gap.difference.low > 0 and gap.decision == "gap", gap.line
    assert gap.line.startswith("contamination gap:")


def test_a_clean_run_has_no_gap(gaps):
    gap = gaps["clean"]
    assert gap.difference.low <= 0 <= gap.difference.high, gap.line
    assert gap.decision == "no-gap"


def test_the_gap_is_the_mean_paired_difference_with_its_normal_interval(gaps):
    """Independent arithmetic: with 4 twins the per-item differences are not 0/1, so the
    interval is the CLT one, mean +- 1.96 sd / sqrt(n)."""
    from scipy import stats

    for gap in gaps.values():
        d = gap.difference
        assert gap.original - gap.fresh == pytest.approx(d.estimate, abs=1e-12)
        half = stats.norm.ppf(0.975) * d.se
        assert (d.low, d.high) == pytest.approx((d.estimate - half, d.estimate + half))
        assert [t.task for t in gap.tasks] == list(TASKS)
        assert np.mean([t.original for t in gap.tasks]) == pytest.approx(gap.original)
