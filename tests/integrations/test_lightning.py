"""The Lightning callback, on a real lightning.Trainer and a 2-layer causal transformer."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402

import labcoat  # noqa: E402
from labcoat.errors import LabcoatError  # noqa: E402
from labcoat.integrations.lightning import LabcoatCallback  # noqa: E402
from labcoat.torch import GuardStop, verify_file  # noqa: E402

SCRIPT = Path(__file__).with_name("pl_chars.py")  # the docs' example, imported as a module
_spec = importlib.util.spec_from_file_location("pl_chars", SCRIPT)
chars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chars)


def module(seed: int = 0) -> pl.LightningModule:
    pl.seed_everything(seed, verbose=False)
    return chars.TinyLM(3e-3)


def loaders(train_rows=None, batch_size: int = 16):
    train = torch.utils.data.DataLoader(train_rows or chars.Rows(chars.letter_runs(96, seed=1)),
                                        batch_size=batch_size, shuffle=True)
    val = torch.utils.data.DataLoader(chars.Rows(chars.letter_runs(16, seed=2)), batch_size=8)
    return train, val


def fit(root, callbacks, *, steps=12, model=None, train_rows=None, every=None, logger=False,
        val_every=6):
    trainer = pl.Trainer(
        max_steps=steps, default_root_dir=str(root), accelerator="cpu", logger=logger,
        log_every_n_steps=1, val_check_interval=val_every, check_val_every_n_epoch=None,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        enable_checkpointing=every is not None,
        callbacks=[*callbacks, *([pl.callbacks.ModelCheckpoint(
            every_n_train_steps=every, save_top_k=-1)] if every else [])])
    trainer.fit(model or module(), *loaders(train_rows))
    return trainer


def journal(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def test_journal_equals_what_lightning_gives_its_loggers_and_items_are_recorded(home, tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    run = labcoat.init(experiment="pl-log", seed=0)
    csv_logger = CSVLogger(str(tmp_path / "csv"), name="ref")
    callback = LabcoatCallback(run, eval_items=chars.next_letter_accuracy)
    trainer = fit(tmp_path, [callback], logger=csv_logger, every=6)
    run.finish()
    records = journal(run.journal)
    found = {(r["step"], k, v) for r in records if r["kind"] == "log"
             for k, v in r["metrics"].items()}
    rows = list(csv.DictReader(open(Path(csv_logger.log_dir) / "metrics.csv")))
    expected = {(int(row["step"]), k, float(v)) for row in rows for k, v in row.items()
                if k != "step" and v != ""}
    assert found == expected and len(expected) >= 12 * 2
    items = [r for r in records if r["kind"] == "items"]
    assert [(r["step"], r["task"], len(r["items"])) for r in items] == [
        (6, "letter_runs", 16), (12, "letter_runs", 16)]
    model = trainer.lightning_module.eval()
    x, y, _ = next(iter(loaders()[1]))
    with torch.no_grad():
        expected_scores = [s for x, y, _ in loaders()[1] for s in
                           (model(x).argmax(-1)[:, 1:] == y[:, 1:]).double().mean(dim=1).tolist()]
    assert items[-1]["scores"] == pytest.approx(expected_scores, abs=1e-12)
    saved = [r for r in records if r.get("event") == "checkpoint.saved"]
    assert [r["step"] for r in saved] == [6, 12]
    assert all(verify_file(r["data"]["path"]) is None for r in saved)
    assert not [r for r in records if r.get("event") == "guard.alert"]


class Crash(pl.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == 14:
            raise RuntimeError("crash")


def test_resume_skips_a_corrupt_and_a_partial_checkpoint_to_the_uninterrupted_run(
        home, tmp_path):
    def losses(run):
        return [(r["step"], r["metrics"]["loss"]) for r in journal(run.journal)
                if r["kind"] == "log" and "loss" in r["metrics"]]

    clean_run = labcoat.init(experiment="pl-resume", seed=0)
    # checkpoints at the ends of epochs (6 batches each): Lightning restarts a plain
    # DataLoader's epoch from its start, so only there is a resume exact (see the docs)
    clean = fit(tmp_path / "clean", [LabcoatCallback(clean_run)], every=6, steps=18)
    clean_run.finish()
    first_run = labcoat.init(experiment="pl-resume", seed=0)
    with pytest.raises(RuntimeError, match="crash"):
        fit(tmp_path / "out", [LabcoatCallback(first_run), Crash()], every=6, steps=18)
    first_run.finish()
    directory = tmp_path / "out" / "checkpoints"
    newest = directory / "epoch=1-step=12.ckpt"
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte
    newest.write_bytes(bytes(data))
    partial = directory / "epoch=2-step=18.ckpt"  # a save a crash cut short: no manifest
    partial.write_bytes(b"\x80half")

    run = labcoat.init(experiment="pl-resume", seed=0)
    callback = LabcoatCallback(run)
    resumed = fit(tmp_path / "out", [callback], every=6, steps=18, model=module(seed=99))
    run.finish()
    assert callback.resumed_from == directory / "epoch=0-step=6.ckpt"
    events = [r for r in journal(run.journal) if r["kind"] == "event"]
    corrupt = [e for e in events if e["event"] == "checkpoint.corrupt"]
    assert {e["data"]["path"] for e in corrupt} == {str(newest), str(partial)}
    assert next(e for e in events if e["event"] == "checkpoint.restored")["step"] == 6
    assert resumed.global_step == clean.global_step == 18
    # steps 7-18 again from step 6's weights, optimizer, loops and RNG states
    expected = [(s, v) for s, v in losses(clean_run) if s >= 6]
    assert losses(run) == expected
    for name, value in clean.lightning_module.state_dict().items():
        assert torch.equal(resumed.lightning_module.state_dict()[name], value), name


def test_guard_alerts_on_a_frozen_layer_and_stop_on_ends_training(home, tmp_path):
    class StagedFreezing(pl.Callback):
        """The planted bug: meant to unfreeze a block after warmup, it freezes block 0."""

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.global_step == 4:
                pl_module.blocks.layers[0].requires_grad_(False)

    run = labcoat.init(experiment="pl-frozen", seed=0)
    callback = LabcoatCallback(run, stop_on="error")
    with pytest.raises(GuardStop, match="trainable.frozen"):
        fit(tmp_path, [StagedFreezing(), callback], steps=30)
    (alert,) = [a for a in callback.guard.alerts if a.rule == "trainable.frozen"]
    assert 5 <= alert.step <= 7
    events = [r["event"] for r in journal(run.journal) if r["kind"] == "event"]
    assert "guard.alert" in events and "guard.stopped" in events
    logged = [r["step"] for r in journal(run.journal) if r["kind"] == "log"]
    assert max(logged) == alert.step - 1  # Lightning logs batch k's loss at step k - 1


def test_guard_alerts_on_labels_not_shifted(home, tmp_path):
    """The model's loss expects labels shifted by the data; rows whose labels are their own
    inputs let it read the answer."""
    class Unshifted(chars.Rows):
        def __getitem__(self, i):
            return self.ids[i, :-1], self.ids[i, :-1], i

    run = labcoat.init(experiment="pl-labels", seed=0)
    callback = LabcoatCallback(run, guard={"labels_shifted": True})
    fit(tmp_path, [callback], steps=3, train_rows=Unshifted(chars.letter_runs(96, seed=1)))
    rules = {a.rule: a.step for a in callback.guard.alerts}
    assert rules.get("data.label_leak") == 1


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(LabcoatError, match="stop_on='fatal'"):
        LabcoatCallback(stop_on="fatal")
    with pytest.raises(LabcoatError, match="eval_items"):
        LabcoatCallback(eval_items="scores")


def test_the_guard_sees_each_steps_own_gradients(home, tmp_path):
    """Lightning runs forward and backward inside optimizer.step(closure); the callback runs
    the closure first, so the guard's pre-step hook reads this step's gradients: a NaN
    planted in step 5's gradient is named at step 5, not one step late."""
    class Flip(pl.Callback):
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            if trainer.global_step == 4:  # optimizer step 5
                pl_module.head.weight.grad[0, 0] = float("nan")

    callback = LabcoatCallback(labcoat.init(experiment="pl-nan", seed=0),
                               guard={"grad_norm_every": 1})
    fit(tmp_path, [Flip(), callback], steps=7)
    first = {}
    for alert in callback.guard.alerts:
        first.setdefault(alert.rule, alert.step)
    assert first["nonfinite.grad"] == 5


def test_a_kill_right_after_a_seal_loses_no_metric_and_no_validation(
        home, tmp_path, monkeypatch):
    """Lightning writes a checkpoint in on_train_batch_end, then logs that batch's metrics
    and runs the validation due at that step; a resumed run starts after that batch, so
    the callback seals the checkpoint only at the next batch's start (found by the SIGKILL
    test of test_lightning_runner: a step's loss and a validation went missing)."""
    import labcoat.integrations.lightning as integration

    real = integration.seal_file

    def seal_then_die(path, *, step, extra=None):
        real(path, step=step, extra=extra)
        if step == 6:
            raise RuntimeError("killed right after the seal")

    monkeypatch.setattr(integration, "seal_file", seal_then_die)
    run = labcoat.init(experiment="pl-window", seed=0)
    callback = LabcoatCallback(run, eval_items=chars.next_letter_accuracy)
    with pytest.raises(RuntimeError, match="killed"):
        fit(tmp_path, [callback], every=6, steps=12, val_every=6)
    run.finish()
    records = journal(run.journal)
    steps = sorted({r["step"] for r in records if r["kind"] == "log" and "loss" in r["metrics"]})
    assert steps == [0, 1, 2, 3, 4, 5]  # batch 6's loss, logged at step 5
    assert [r["step"] for r in records if r["kind"] == "items"] == [6]
    assert any("val_loss" in r["metrics"] for r in records if r["kind"] == "log")
