"""Argument checks shared by the statistics functions (invalid input raises, never guesses)."""

from __future__ import annotations


def check_ci(ci: float) -> None:
    if not 0 < ci < 1:
        raise ValueError(f"ci={ci!r} must be a probability in (0, 1), e.g. 0.95")


class StatsWarning(UserWarning):
    """An analysis that may mislead: too few runs for its interval, a Bernoulli
    formula on non-binary scores, different item sets compared, steps of one run
    treated as independent samples. Emitted with `warnings.warn`; reports collect
    and show them next to the numbers they qualify.

    kind: a stable tag ("few-runs", ...) so a report can merge repeats of one
    problem into one line; `n_runs` carries the count for "few-runs".
    """

    def __init__(self, message: str, kind: str = "general", n_runs: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.n_runs = n_runs
