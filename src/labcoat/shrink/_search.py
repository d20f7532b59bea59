"""The search: halve each shrinkable param toward its floor while the failure persists, then
delta debugging over features, then check that every one-step-smaller neighbour passes.

Each param climbs its ladder of halvings from the bottom: its floor first (most params of
a size bug do not matter, and one candidate then replaces the whole ladder: 1000 steps -> 8
is one trial, not seven), then each rung above it, up to one halving below the current
value; the first rung that still fails is kept. Walking up, the candidates that pass are
the cheap small ones; walking down from the top, every failing rung would cost a large run.
The rung below the one kept was tried and did not fail, so the param is 1-minimal. When
other params shrank since, a later pass tries that one halving first and climbs the ladder
again only if it now fails.

It knows nothing of trials: `judge(params)` runs one candidate and says how it ended.
Candidates are remembered by their params, so a neighbour tried during the halving is not
run again by the minimality check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Outcome = Literal["fails", "passes", "slip"]
Params = dict[str, Any]


class Exhausted(Exception):
    """The candidate budget is spent, or the user stopped the search."""


@dataclass
class Search:
    """One shrink's state. judge(params, why) -> outcome; it raises Exhausted to stop.

    params: the original settings (every param of the trial); floors: shrinkable param ->
    floor, in halving order; off: feature -> the value that switches it off.
    """

    judge: Callable[[Params, str], Outcome]
    params: Params
    floors: Mapping[str, float]
    off: Mapping[str, Any] = field(default_factory=dict)
    tried: dict[tuple, Outcome] = field(default_factory=dict)
    best: Params = field(default_factory=dict)
    neighbours: list[tuple[str, Outcome]] = field(default_factory=list)  # of `best`
    complete: bool = False  # the search ended by itself (not by budget or Ctrl-C)

    def __post_init__(self) -> None:
        self.best = dict(self.params)

    def run(self) -> Params:
        """Shrink from `params`; returns the smallest failing settings found (also `best`)."""
        try:
            while True:
                self._halve_all()
                self._ddmin()
                smaller = self._check_neighbours()
                if smaller is None:
                    self.complete = True
                    return self.best
                self.best = smaller  # a smaller neighbour still fails: go on from it
        except Exhausted:
            return self.best

    def fails(self, params: Params, why: str) -> bool:
        key = _key(params)
        if key not in self.tried:
            self.tried[key] = self.judge(params, why)
        return self.tried[key] == "fails"

    # --- halving ----------------------------------------------------------------------------

    def _halve_all(self) -> None:
        changed, again = True, False
        while changed:
            changed = False
            for name in self.floors:
                rungs = self.ladder(self.best, name)
                if again and rungs and not self.fails(
                        rungs[0], f"{name} {self.best[name]} -> {rungs[0][name]}"):
                    continue  # kept last pass, and one halving still does not fail: done
                for i, rung in enumerate(reversed(rungs)):  # the floor first, then up
                    floor = " (its floor)" if i == 0 and len(rungs) > 1 else ""
                    if self.fails(rung, f"{name} {self.best[name]} -> {rung[name]}{floor}"):
                        self.best, changed = rung, True
                        break
            again = True

    def ladder(self, params: Params, name: str) -> list[Params]:
        """params with `name` halved once, twice, ... down to its floor."""
        rungs: list[Params] = []
        while (smaller := self.halved(rungs[-1] if rungs else params, name)) is not None:
            rungs.append(smaller)
        return rungs

    def halved(self, params: Params, name: str) -> Params | None:
        """params with `name` halved toward its floor; None at the floor."""
        value, floor = params[name], self.floors[name]
        if value <= floor:
            return None
        if isinstance(value, int):  # an integer param stays an integer (e.g. --width 8)
            half = max(math.ceil(floor), value // 2)
            return None if half >= value else {**params, name: half}
        half = max(floor, value / 2)
        return {**params, name: half}

    # --- delta debugging over features -------------------------------------------------------

    def on(self, params: Params) -> list[str]:
        return [f for f, off in self.off.items() if params.get(f) != off]

    def with_features(self, keep: list[str]) -> Params:
        """best with every feature off except `keep`."""
        return {**self.best, **{f: self.off[f] for f in self.on(self.best) if f not in keep}}

    def _ddmin(self) -> None:
        """Zeller & Hildebrandt's ddmin (2002) over the features on in `best`: a 1-minimal set
        of them that still fails."""
        features = self.on(self.best)
        if not features:
            return
        if self.fails(self.with_features([]), "every feature off"):
            self.best = self.with_features([])
            return
        n = 2
        while len(features) >= 2:
            chunks = [features[i * len(features) // n:(i + 1) * len(features) // n]
                      for i in range(n)]
            for chunk in chunks:
                if self.fails(self.with_features(chunk), f"only {', '.join(chunk)} on"):
                    features, n = chunk, 2
                    break
            else:
                for chunk in chunks:
                    rest = [f for f in features if f not in chunk]
                    if self.fails(self.with_features(rest), f"{', '.join(chunk)} off"):
                        features, n = rest, max(n - 1, 2)
                        break
                else:
                    if n >= len(features):
                        break
                    n = min(len(features), 2 * n)
        self.best = self.with_features(features)

    # --- 1-minimality ------------------------------------------------------------------------

    def _check_neighbours(self) -> Params | None:
        """Try every one-step-smaller neighbour of `best` (each param halved, each feature
        off); the first that still fails, else None (then `best` is 1-minimal)."""
        self.neighbours = []
        for label, params in self.neighbours_of(self.best):
            if self.fails(params, f"minimality: {label}"):
                return params
            self.neighbours.append((label, self.tried[_key(params)]))
        return None

    def neighbours_of(self, params: Params) -> list[tuple[str, Params]]:
        out = []
        for name in self.floors:
            smaller = self.halved(params, name)
            if smaller is not None:
                out.append((f"{name} {params[name]} -> {smaller[name]}", smaller))
        for feature in self.on(params):
            out.append((f"{feature} off", {**params, feature: self.off[feature]}))
        return out

    def untried_neighbours(self) -> list[str]:
        """Neighbours of `best` never run (the search was stopped before checking them)."""
        return [label for label, p in self.neighbours_of(self.best) if _key(p) not in self.tried]


def _key(params: Params) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
