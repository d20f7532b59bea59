"""Whole metric series (`metric_series`, written by imports) read exactly as the same points
stored one row each: every metric query is run on two stores holding the same points, one
as rows (the reference, through the row path the rest of the suite checks) and one with
some metrics as series, on SQLite and PostgreSQL."""

import math

import numpy as np
import pytest
from sqlalchemy import text

from labcoat import store
from labcoat.store import SeriesColumns

INF = math.inf
# trial key -> metric -> {step: (value, time)}; NaN and infinities included, steps 64-bit
POINTS = {
    "a-s0": {"loss": {0: (2.5, 100.0), 10: (1.25, 101.5), 20: (math.nan, None)},
             "acc": {5: (0.1, None), 15: (0.30000000000000004, 103.0)}},
    "a-s1": {"loss": {0: (2.0, 200.0), 3: (INF, 201.0), 2**40: (1e-300, 202.0)}},
    "b-s0": {"loss": {1: (-0.0, 300.0), 7: (5e-324, None)},
             "acc": {1: (1.0, 300.0)}, "zeta": {0: (-INF, None)}},
}
AS_SERIES = {("a-s0", "loss"), ("a-s1", "loss"), ("b-s0", "acc"), ("b-s0", "zeta")}


def _fill(session, series: set[tuple[str, str]]) -> dict[str, int]:
    exp, _ = store.import_experiment(session, "e")
    trials = {key: store.Trial(key=key, arm=key[0], seed=int(key[-1]), params={},
                               status="done") for key in POINTS}
    exp.trials.extend(trials.values())
    session.flush()
    for key, metrics in POINTS.items():
        trial_id = trials[key].id
        store.insert_metric_series(session, trial_id, None,
                                   {n: p for n, p in metrics.items() if (key, n) in series})
        store.upsert_metric_points(session, [
            {"trial_id": trial_id, "attempt_id": None, "name": n, "step": s, "value": v,
             "time": t} for n, p in metrics.items() if (key, n) not in series
            for s, (v, t) in p.items()])
    session.commit()
    return {key: t.id for key, t in trials.items()}


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN, -0.0 told from 0.0: what a reader would see."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _answers(session, ids: dict[str, int]) -> dict:
    """Every metric query's answer, with trial ids replaced by keys."""
    key = {v: k for k, v in ids.items()}
    every = sorted(ids.values())
    some = [ids["a-s0"], ids["b-s0"]]
    return {
        "points": [(key[p.trial_id], p.name, p.step, p.value, p.time)
                   for p in store.metric_points(session, every)],
        "points loss": [(key[p.trial_id], p.step, p.value)
                        for p in store.metric_points(session, some, "loss")],
        "rows": [(key[t], n, s, v) for t, n, s, v in store.metric_rows(session, every)],
        "rows acc": [(key[t], n, s, v) for t, n, s, v in store.metric_rows(session, every, "acc")],
        "last": {key[t]: v for t, v in store.last_values(session, every, "loss").items()},
        "names": store.metric_names(session, every),
        "names b": store.metric_names(session, [ids["b-s0"]]),
        "non-finite": {key[t]: s for t, s in store.first_non_finite(session, every, None)
                       .items()},
        "non-finite loss": {key[t]: s for t, s in
                            store.first_non_finite(session, every, "loss").items()},
        "series": [(key[t], s) for t, s in store.metric_series(session, every, "loss").items()],
        "at steps": [(key[t], s, v) for t, s, v in
                     store.metric_at_steps(session, every, "loss", [0, 3, 20, 2**40, 99])],
    }


def test_every_metric_query_reads_series_as_it_reads_rows(db_backend, tmp_path):
    reference_url = (f"sqlite:///{tmp_path / 'rows.db'}" if db_backend == "sqlite"
                     else None)
    db = store.open_store()
    with db.session() as session:
        ids = _fill(session, AS_SERIES)
        got = _answers(session, ids)
        held = session.execute(text("SELECT count(*) FROM metric_series")).scalar()
    db.close()
    assert held == len(AS_SERIES)
    if reference_url is None:  # PostgreSQL: the reference in the same database, after
        db = store.open_store()
        with db.session() as session:
            session.execute(text("DELETE FROM experiment"))
            session.commit()
    else:
        db = store.open_store(reference_url)
    with db.session() as session:
        want = _answers(session, _fill(session, set()))
        assert session.execute(text("SELECT count(*) FROM metric_series")).scalar() == 0
    db.close()
    assert want["names"] == ["acc", "loss", "zeta"] and want["last"]["a-s1"] == 1e-300
    for query in want:
        assert _same(got[query], want[query]), query


def test_a_point_logged_to_a_metric_held_as_a_series_joins_it(db_backend):
    db = store.open_store()
    with db.session() as session:
        ids = _fill(session, AS_SERIES)
        store.upsert_metric_points(session, [
            {"trial_id": ids["a-s0"], "attempt_id": None, "name": "loss", "step": s,
             "value": v, "time": None} for s, v in ((10, 9.0), (30, 3.0))])
        session.commit()
        steps, values = store.metric_series(session, [ids["a-s0"]], "loss")[ids["a-s0"]]
        left = session.execute(text("SELECT trial_id, name FROM metric_series "
                                    "ORDER BY trial_id, name")).all()
    db.close()
    assert steps == [0, 10, 20, 30]
    assert _same(values, [2.5, 9.0, math.nan, 3.0])
    assert left == [(ids["a-s1"], "loss"), (ids["b-s0"], "acc"), (ids["b-s0"], "zeta")]


def test_deleting_a_trials_metrics_deletes_rows_and_series(db_backend):
    db = store.open_store()
    with db.session() as session:
        ids = _fill(session, AS_SERIES)
        store.delete_metrics(session, ids["b-s0"], ["acc", "zeta", "absent"])
        session.commit()
        assert store.metric_names(session, [ids["b-s0"]]) == ["loss"]
        assert store.metric_names(session, [ids["a-s0"]]) == ["acc", "loss"]
    db.close()


def test_columns_from_a_mapping_are_sorted_and_read_back_alike():
    mapping = {5: (0.5, None), -1: (1.5, 10.0), 2**62: (math.nan, 11.0)}
    columns = SeriesColumns.of(mapping)
    assert columns.steps.tolist() == [-1, 5, 2**62]
    assert _same(dict(columns.items()), {-1: (1.5, 10.0), 5: (0.5, None),
                                         2**62: (math.nan, 11.0)})
    assert columns[5] == (0.5, None) and 6 not in columns and len(columns) == 3
    again = SeriesColumns.from_bytes(*columns.to_bytes())
    assert again.steps.tolist() == columns.steps.tolist()
    assert np.array_equal(again.values, columns.values, equal_nan=True)
    assert SeriesColumns.of({1: (1.0, None)}).times is None
    with pytest.raises(ValueError, match="strictly increasing"):
        SeriesColumns(np.array([1, 1]), np.array([0.0, 0.0]))
    with pytest.raises(ValueError, match="one entry per point"):
        SeriesColumns(np.array([1, 2]), np.array([0.0]))


def test_downgrading_below_the_series_table_keeps_every_point_as_a_row(db_backend):
    from alembic import command
    from alembic.config import Config

    from labcoat.store._db import MIGRATIONS

    db = store.open_store()
    with db.session() as session:
        ids = _fill(session, AS_SERIES)
        want = _answers(session, ids)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0006")
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM metric_point")).scalar()
    db.close()
    assert rows == sum(len(p) for m in POINTS.values() for p in m.values())
    db = store.open_store()  # upgrades again: the table is back, empty
    with db.session() as session:
        got = _answers(session, ids)
    db.close()
    for query in want:
        assert _same(got[query], want[query]), query
