"""`labcoat import tensorboard`: runs torch's SummaryWriter wrote, read back point for point
against TensorBoard's EventAccumulator (float32 values kept exactly), the report's per-arm
means against the accumulator's last values, and a damaged file refused whole."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import cli

pytest.importorskip("tensorboard")
pytest.importorskip("torch")

ARMS, SEEDS, STEPS = ("base", "wide"), (0, 1, 2), 50


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory):
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("tb") / "runs"
    rng = np.random.default_rng(1)
    for arm in ARMS:
        for seed in SEEDS:
            with SummaryWriter(str(root / f"model={arm},seed={seed}")) as w:
                shift = 0.0 if arm == "base" else 0.02
                for step in range(STEPS):
                    w.add_scalar("eval/acc", 0.5 + shift + rng.normal(0, 0.01) + step / 1000,
                                 step)
                    w.add_scalar("train/loss", float(rng.lognormal()), step)
                if seed == 1:
                    w.add_scalar("train/loss", 0.125, STEPS - 1)  # a step written twice
                if seed == 0:  # events of another layout (two values in one summary)
                    from tensorboard.compat.proto.summary_pb2 import Summary

                    for step in range(0, STEPS, 7):
                        two = Summary(value=[Summary.Value(tag="extra/a", simple_value=step / 3),
                                             Summary.Value(tag="extra/b", simple_value=-1.5)])
                        w._get_file_writer().add_summary(two, step)
    return root


def _accumulated(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    return {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}


def _import(path, experiment="tb", *extra):
    return cli("import", "tensorboard", str(path), "--experiment", experiment, "--arm-by",
               "model", "--seed-by", "seed", "--metric", "eval/acc", "--direction",
               "increase", "--control", "base", *extra)


def test_every_point_and_each_arms_mean_equal_the_accumulators(home, logdir, stored,
                                                               report_means, equal_points):
    done = _import(logdir)
    assert done.returncode == 0, done.stderr
    assert "imported 6 tensorboard runs" in done.stdout
    assert "train/loss was logged 1 more time(s)" in done.stdout
    held = stored("tb")
    last: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for arm in ARMS:
        for seed in SEEDS:
            scalars = _accumulated(logdir / f"model={arm},seed={seed}")
            extra = {"extra/a", "extra/b"} if seed == 0 else set()
            assert set(scalars) == {"eval/acc", "train/loss"} | extra
            for tag, events in scalars.items():
                want = {e.step: e.value for e in events}  # the later event at a step
                equal_points(held[f"{arm}-s{seed}"][tag], want)
                # float32 on disk: every stored value is exactly a float32
                assert all(np.float32(v) == v for v in want.values())
            last[arm].append(scalars["eval/acc"][-1].value)
    assert held["base-s1"]["train/loss"][STEPS - 1] == 0.125
    assert report_means("tb") == pytest.approx({a: float(np.mean(v)) for a, v in last.items()},
                                               rel=1e-12)
    again = _import(logdir)
    assert again.returncode == 0 and "6 again" in again.stdout
    assert stored("tb") == held


def test_a_damaged_event_file_is_named_and_nothing_is_imported(home, logdir, tmp_path):
    import shutil

    broken = tmp_path / "runs"
    shutil.copytree(logdir, broken)
    victim = next((broken / "model=wide,seed=2").glob("*tfevents*"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x40  # one flipped bit inside a record
    victim.write_bytes(bytes(data))
    # TensorBoard's accumulator stops silently at the damage and returns a shorter run
    assert len(_accumulated(victim.parent)["eval/acc"]) < STEPS
    done = _import(broken)
    assert done.returncode != 0
    assert f"{victim}: damaged TensorBoard event file at byte" in done.stderr
    assert "Traceback" not in done.stderr
    assert "no experiment named 'tb'" in cli("show", "tb").stderr


def test_a_file_cut_short_is_read_to_its_last_whole_record_as_tensorboard_reads_it(
        home, logdir, tmp_path, stored, equal_points):
    """A run killed mid-write (or still writing): the records before the torn one are
    imported, as TensorBoard's accumulator reads them, and the import says so."""
    import shutil

    cut = tmp_path / "runs"
    shutil.copytree(logdir, cut)
    victim = next((cut / "model=wide,seed=2").glob("*tfevents*"))
    whole = victim.read_bytes()
    victim.write_bytes(whole[: len(whole) - 7])  # a torn last record
    done = _import(cut)
    assert done.returncode == 0, done.stderr
    assert f"{victim}: the last record is cut short at byte" in done.stdout
    want = _accumulated(victim.parent)
    assert sum(map(len, want.values())) == 2 * STEPS - 1  # the torn record's point is gone
    held = stored("tb")["wide-s2"]
    for tag, points in want.items():
        equal_points(held[tag], {p.step: p.value for p in points})


def test_a_missing_mapping_lists_the_directory_keys(home, logdir):
    done = cli("import", "tensorboard", str(logdir), "--experiment", "tb", "--arm-by", "arm",
               "--seed-by", "seed")
    assert done.returncode != 0
    assert "has no key 'arm'" in done.stderr
    assert "path.model (2 values: 'base', 'wide')" in done.stderr


def test_the_import_writes_the_same_points_on_sqlite_and_postgresql(db_backend, tmp_path,
                                                                   stored, equal_points):
    """The store's two backends: SQLite inserts tuples, PostgreSQL upserts rows."""
    from torch.utils.tensorboard import SummaryWriter

    from labcoat.runner import ImportHypothesis, import_runs

    for arm in ARMS:
        for seed in (0, 1):
            with SummaryWriter(str(tmp_path / "runs" / arm / f"seed{seed}")) as w:
                for step in range(20):
                    w.add_scalar("acc", 0.5 + step / 100 + (arm == "wide") / 10 + seed / 50,
                                 step)
                w.add_scalar("acc", float("nan"), 20)  # a diverged last point is kept as NaN
    flags = ImportHypothesis(metric="acc", direction="increase", control="base")
    for outcome in ("new", "same"):
        done = import_runs("tensorboard", [tmp_path / "runs"], experiment="tb-db",
                           arm_by="path.0", seed_by="path.1", hypothesis=flags)
        assert done.outcomes == {outcome: 4}
    held = stored("tb-db")
    assert sorted(held) == ["base-s0", "base-s1", "wide-s0", "wide-s1"]
    for arm in ARMS:
        for seed in (0, 1):
            want = {e.step: e.value for e in
                    _accumulated(tmp_path / "runs" / arm / f"seed{seed}")["acc"]}
            equal_points(held[f"{arm}-s{seed}"]["acc"], want)


def test_a_short_design_file_states_the_hypothesis(home, logdir, tmp_path):
    import json

    design = tmp_path / "design.yaml"
    design.write_text("hypothesis:\n  claim: wide helps\n  metric: eval/acc\n"
                      "  direction: increase\n  smallest_effect: 0.001\n  bounds: [0, 1]\n"
                      "control: base\nsecondary_metrics: [train/loss]\n")
    done = cli("import", "tensorboard", str(logdir), "--experiment", "tbd", "--arm-by", "model",
               "--seed-by", "seed", "--design", str(design))
    assert done.returncode == 0, done.stderr
    data = json.loads(cli("report", "tbd", "--json", check=True).stdout)
    result = data["results"][0]
    assert result["hypothesis"]["claim"] == "wide helps" and result["control"] == "base"
    # the verdict's numbers against scipy on the accumulator's last values
    from scipy import stats as sps

    last = {arm: [_accumulated(logdir / f"model={arm},seed={s}")["eval/acc"][-1].value
                  for s in SEEDS] for arm in ARMS}
    seeds = result["comparisons"][0]["seeds"]
    assert seeds["estimate"] == pytest.approx(np.mean(last["wide"]) - np.mean(last["base"]),
                                              rel=1e-9)
    welch = sps.ttest_ind(last["wide"], last["base"], equal_var=False)
    assert seeds["p_value"] == pytest.approx(welch.pvalue, rel=1e-6)
    assert set(data["secondary"]["train/loss"]) == {"base", "wide"}
    design.write_text("seeds: 3\n")
    refused = cli("import", "tensorboard", str(logdir), "--experiment", "tbd2", "--arm-by",
                  "model", "--seed-by", "seed", "--design", str(design))
    assert refused.returncode != 0 and "seeds cannot be set for an import" in refused.stderr


def test_scalar_tensors_read_as_tensorboards_scalars_plugin_reads_them(tmp_path, equal_points):
    """TF2's `tf.summary.scalar` and Keras write a scalar as a one-element tensor whose
    metadata names the scalars plugin, on the tag's first value only; torch writes the
    same with `new_style=True`. Both are read as EventAccumulator.Tensors gives them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.util.tensor_util import make_ndarray, make_tensor_proto
    from torch.utils.tensorboard import SummaryWriter

    from labcoat.runner._import_tensorboard import read_tensorboard

    run = tmp_path / "runs" / "tf2"
    with SummaryWriter(str(run), filename_suffix=".a") as w:
        for step in range(6):
            w.add_scalar("torch/new_style", 1 / (step + 3), step, new_style=True)
        plugin = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        for step in range(6):  # as TF2 writes it: the metadata with the first value only
            value = Summary.Value(tag="epoch_loss",
                                  tensor=make_tensor_proto(np.float32(0.1 * step + 1 / 7)))
            if step == 0:
                value.metadata.CopyFrom(plugin)
            w._get_file_writer().add_summary(Summary(value=[value]), step)
        other = Summary.Value(tag="not_a_scalar", tensor=make_tensor_proto(np.ones(3)))
        w._get_file_writer().add_summary(Summary(value=[other]), 0)
    accumulator = EventAccumulator(str(run), size_guidance={"tensors": 0})
    accumulator.Reload()
    runs = read_tensorboard(tmp_path / "runs")
    assert set(runs[0].metrics) == {"torch/new_style", "epoch_loss"}
    for tag in runs[0].metrics:
        want = {e.step: float(make_ndarray(e.tensor_proto)) for e in accumulator.Tensors(tag)}
        equal_points({s: v for s, (v, _) in runs[0].metrics[tag].items()}, want)
