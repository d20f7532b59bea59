"""Helpers for the tracker-import tests: what the store holds after an import, and what
`labcoat report --json` says per arm."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from helpers import cli


def _stored(experiment: str) -> dict[str, dict[str, dict[int, float]]]:
    """trial key -> metric -> step -> value, read back from the store; NaN as the one
    `math.nan`, so two reads of the same points compare equal with ==."""
    from labcoat import store

    db = store.open_store()
    try:
        with db.session() as session:
            exp = store.find_experiment(session, experiment)
            keys = {t.id: t.key for t in exp.trials}
            out: dict[str, dict[str, dict[int, float]]] = {k: {} for k in keys.values()}
            for trial_id, name, step, value in store.metric_rows(session, list(keys)):
                out[keys[trial_id]].setdefault(name, {})[step] = \
                    math.nan if value != value else value
            return out
    finally:
        db.close()


def _report_means(experiment: str) -> dict[str, float]:
    data = json.loads(cli("report", experiment, "--json", check=True).stdout)
    return {a["arm"]: a["overall"]["point"] for a in data["results"][0]["arms"]}


@pytest.fixture
def stored() -> Callable[[str], dict[str, dict[str, dict[int, float]]]]:
    return _stored


@pytest.fixture
def report_means() -> Callable[[str], dict[str, float]]:
    return _report_means


def same(a: float, b: float) -> bool:
    """Equal as stored values: bit for bit, NaN equal to NaN."""
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.fixture
def equal_points() -> Callable[[dict, dict], None]:
    def check(got: dict[int, float], want: dict[int, float]) -> None:
        assert got.keys() == want.keys()
        bad = [s for s in want if not same(got[s], want[s])]
        assert not bad, f"steps {bad[:5]}: stored {[got[s] for s in bad[:5]]}, " \
                        f"tool {[want[s] for s in bad[:5]]}"
    return check
