"""The search alone, on failure predicates over small grids: its answer is checked against a
brute-force enumeration of every configuration the halving can reach (one of the true
minima, when failing is monotone in size), and its candidate count stays small."""

import itertools

import pytest

from labcoat.shrink import Search

START = {"steps": 64, "width": 32, "depth": 4, "batch": 8}
FLOORS = {"steps": 4, "width": 4, "depth": 1, "batch": 1}
OFF = {"dropout": 0.0, "clip": False}

PREDICATES = {  # name -> fails(params): thresholds like the planted tinylm bugs
    "depth >= 2": lambda p: p["depth"] >= 2,
    "steps >= 16 and width >= 8": lambda p: p["steps"] >= 16 and p["width"] >= 8,
    "depth * width >= 32": lambda p: p["depth"] * p["width"] >= 32,
    "batch >= 4 and dropout on": lambda p: p["batch"] >= 4 and p["dropout"] > 0,
    "steps * batch >= 64 and clip on": lambda p: p["steps"] * p["batch"] >= 64 and p["clip"],
}


def _ladder(start, floor):
    values = [start]
    while values[-1] > floor:
        values.append(max(floor, values[-1] // 2))
    return values


def _grid():
    axes = {k: _ladder(v, FLOORS[k]) for k, v in START.items()}
    axes |= {"dropout": [0.1, 0.0], "clip": [True, False]}
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def _smaller_or_equal(a, b):
    sizes = all(a[k] <= b[k] for k in START)
    features = all(a[f] == OFF[f] or a[f] == b[f] for f in OFF)
    return sizes and features


def true_minima(fails):
    """Brute force: the failing configurations with no failing configuration below them."""
    failing = [p for p in _grid() if fails(p)]
    return [p for p in failing
            if not any(q != p and _smaller_or_equal(q, p) for q in failing)]


@pytest.mark.parametrize("name", PREDICATES)
def test_the_answer_is_one_of_the_true_minima(name):
    fails = PREDICATES[name]
    calls = []

    def judge(params, why):
        calls.append(params)
        return "fails" if fails(params) else "passes"

    start = {**START, "dropout": 0.1, "clip": True}
    search = Search(judge=judge, params=start, floors=FLOORS, off=OFF)
    assert search.fails(start, "original")
    best = search.run()
    assert search.complete
    assert best in true_minima(fails)
    assert len(calls) <= 40
    assert len(calls) == len({tuple(sorted(p.items())) for p in calls})  # none run twice
    # every one-step-smaller neighbour was run and passes
    assert all(outcome == "passes" for _, outcome in search.neighbours)


def test_a_slip_is_never_accepted():
    def judge(params, why):
        if params["depth"] == 1:
            return "slip"  # fails another way below depth 2
        return "fails"

    search = Search(judge=judge, params=dict(START), floors=FLOORS)
    best = search.run()
    assert best["depth"] == 2 and best == {"steps": 4, "width": 4, "depth": 2, "batch": 1}
    assert ("depth 2 -> 1", "slip") in search.neighbours


def test_the_candidate_budget_stops_the_search_with_what_it_found():
    from labcoat.shrink import Exhausted

    calls = []

    def judge(params, why):
        if len(calls) == 3:
            raise Exhausted("budget")
        calls.append(params)
        return "fails"

    search = Search(judge=judge, params=dict(START), floors=FLOORS)
    best = search.run()
    # three candidates: steps, width and depth each jumped to its floor
    assert not search.complete and best == {**START, "steps": 4, "width": 4, "depth": 1}
    assert search.untried_neighbours() == ["batch 8 -> 4"]


def test_a_param_that_does_not_matter_costs_one_candidate():
    """Each param jumps to its floor first; only a param the bug needs walks the ladder."""
    calls = []

    def judge(params, why):
        calls.append(why)
        return "fails" if params["depth"] >= 2 else "passes"

    search = Search(judge=judge, params=dict(START), floors=FLOORS)
    assert search.run() == {"steps": 4, "width": 4, "depth": 2, "batch": 1}
    assert calls == ["steps 64 -> 4 (its floor)", "width 32 -> 4 (its floor)",
                     "depth 4 -> 1 (its floor)", "depth 4 -> 2", "batch 8 -> 1 (its floor)",
                     "depth 2 -> 1"]  # the second pass; the minimality check reuses it
    assert search.complete and search.neighbours == [("depth 2 -> 1", "passes")]
