"""The Hugging Face Trainer callback, on a real Trainer and a 2-layer GPT-2 built locally."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

import labcoat  # noqa: E402
from labcoat.errors import LabcoatError  # noqa: E402
from labcoat.integrations.transformers import LabcoatCallback  # noqa: E402
from labcoat.torch import GuardStop  # noqa: E402

SCRIPT = Path(__file__).with_name("hf_chars.py")  # the docs' example, imported as a module
_spec = importlib.util.spec_from_file_location("hf_chars", SCRIPT)
chars = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chars)
WALL_CLOCK = ("_runtime", "_per_second")  # timings: never equal between two runs


def gpt2(seed: int = 0, dropout: float = 0.1) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=26, n_positions=chars.LENGTH, n_embd=32,
                                      n_layer=2, n_head=2, bos_token_id=None,
                                      eos_token_id=None, resid_pdrop=dropout,
                                      embd_pdrop=dropout, attn_pdrop=dropout))


def trainer(out, model, *, callbacks=(), steps=12, seed=0, optimizers=(None, None),
            train=None, **options) -> Trainer:
    options = {"save_strategy": "no", **options}
    args = TrainingArguments(
        output_dir=str(out), max_steps=steps, learning_rate=3e-3, seed=seed,
        per_device_train_batch_size=8, logging_steps=1, report_to="none", use_cpu=True,
        disable_tqdm=True, **options)
    return Trainer(model=model, args=args, optimizers=optimizers,
                   train_dataset=train or chars.Rows(chars.letter_runs(128, seed=1)),
                   eval_dataset=chars.Rows(chars.letter_runs(16, seed=2)),
                   preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1),
                   callbacks=list(callbacks))


def journal(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def points(records) -> set[tuple[int, str, float]]:
    return {(r["step"], k, v) for r in records if r["kind"] == "log"
            for k, v in r["metrics"].items()}


def test_journal_equals_log_history_and_items_and_checkpoints_are_recorded(home, tmp_path):
    run = labcoat.init(experiment="hf-log", seed=0)
    callback = LabcoatCallback(run, eval_items=chars.next_letter_accuracy)
    t = trainer(tmp_path / "out", gpt2(), callbacks=[callback], steps=12, eval_strategy="steps",
                eval_steps=6, save_strategy="steps", save_steps=6)
    t.train()
    run.finish()
    records = journal(run.journal)
    history = {(entry["step"], k, float(v)) for entry in t.state.log_history
               for k, v in entry.items() if k != "step"}
    assert points(records) == history
    assert len(history) > 12 * 4  # loss, grad_norm, learning_rate, epoch at every step
    items = [r for r in records if r["kind"] == "items"]
    assert [(r["step"], r["task"], len(r["items"])) for r in items] == [
        (6, "letter_runs", 16), (12, "letter_runs", 16)]
    # the scores are the eval set's, recomputed here from the trained model
    with torch.no_grad():
        ids = t.eval_dataset.ids
        guess = t.model(input_ids=ids).logits.argmax(-1)
    expected = (guess[:, 1:-1] == ids[:, 2:]).double().mean(dim=1).tolist()
    assert items[-1]["scores"] == pytest.approx(expected, abs=1e-12)
    saved = [r for r in records if r["kind"] == "event" and r["event"] == "checkpoint.saved"]
    assert [r["step"] for r in saved] == [6, 12]
    from labcoat.torch import verify_directory
    assert verify_directory(tmp_path / "out" / "checkpoint-12") is None
    assert not [r for r in records if r["kind"] == "event" and r["event"] == "guard.alert"]


def test_args_seed_follows_the_trial_seed(tmp_path, monkeypatch):
    """Trainer(args.seed=42) in a trial of seed 3 trains exactly as Trainer(args.seed=3)."""
    def losses(seed, callbacks=()):
        t = trainer(tmp_path / f"out{len(callbacks)}{seed}", gpt2(), callbacks=callbacks,
                    steps=6, seed=seed)
        t.train()
        return [e["loss"] for e in t.state.log_history if "loss" in e]

    reference = losses(3)
    assert losses(42) != reference  # the seed matters here: data order and dropout
    monkeypatch.setenv("LABCOAT_JOURNAL", str(tmp_path / "trial" / "journal.jsonl"))
    monkeypatch.setenv("LABCOAT_SEED", "3")
    monkeypatch.setenv("LABCOAT_TRIAL", "a-s3")
    monkeypatch.setenv("LABCOAT_CHECKPOINT_DIR", str(tmp_path / "trial" / "checkpoints"))
    callback = LabcoatCallback()
    assert losses(42, [callback]) == reference
    events = [r for r in journal(tmp_path / "trial" / "journal.jsonl") if r["kind"] == "event"]
    seed_event = next(e for e in events if e["event"] == "integration.seed")
    assert seed_event["data"] == {"before": 42, "after": 3}


def test_resume_skips_a_corrupt_and_a_partial_checkpoint(home, tmp_path):
    out = tmp_path / "out"
    options = dict(save_strategy="steps", save_steps=4, save_total_limit=3)
    clean = trainer(tmp_path / "clean", gpt2(), callbacks=[LabcoatCallback(
        labcoat.init(experiment="hf-resume", seed=0))], **options)
    clean.train()
    from transformers import TrainerCallback

    class Crash(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 8:
                raise RuntimeError("crash")

    first = trainer(out, gpt2(), callbacks=[LabcoatCallback(
        labcoat.init(experiment="hf-resume", seed=0)), Crash()], **options)
    with pytest.raises(RuntimeError, match="crash"):
        first.train()  # checkpoints 4 and 8, sealed
    weights = out / "checkpoint-8" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped byte
    weights.write_bytes(bytes(data))
    (out / "checkpoint-12").mkdir()  # a save a crash cut short: no manifest
    (out / "checkpoint-12" / "config.json").write_text("{}")

    run = labcoat.init(experiment="hf-resume", seed=0)
    callback = LabcoatCallback(run)
    resumed = trainer(out, gpt2(seed=99), callbacks=[callback], **options)
    resumed.train()
    run.finish()
    assert callback.resumed_from == out / "checkpoint-4"
    events = {r["event"]: r for r in journal(run.journal) if r["kind"] == "event"}
    assert "SHA-256" in events["checkpoint.corrupt"]["message"] or "bytes" in events[
        "checkpoint.corrupt"]["message"]
    assert events["checkpoint.restored"]["step"] == 4
    corrupt = [r for r in journal(run.journal) if r.get("event") == "checkpoint.corrupt"]
    assert {r["step"] for r in corrupt} == {8, 12}
    assert (out / "checkpoint-12" / "labcoat-manifest.json").exists()  # removed, saved again
    # steps 5-12 again, from step 4's weights, optimizer, schedule, RNG and data position
    after = [e for e in resumed.state.log_history if "loss" in e]
    before = [e for e in clean.state.log_history if "loss" in e]
    assert after == before


def test_guard_alerts_on_a_frozen_layer_and_stop_on_ends_training(home, tmp_path):
    from transformers import TrainerCallback

    class StagedFreezing(TrainerCallback):
        """The planted bug: meant to unfreeze block 1 after warmup, it freezes block 0."""

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step == 4:
                model.transformer.h[0].requires_grad_(False)

    run = labcoat.init(experiment="hf-frozen", seed=0)
    callback = LabcoatCallback(run, stop_on="error")
    t = trainer(tmp_path / "out", gpt2(), callbacks=[StagedFreezing(), callback], steps=30)
    with pytest.raises(GuardStop, match="trainable.frozen"):
        t.train()
    (alert,) = [a for a in callback.guard.alerts if a.rule == "trainable.frozen"]
    assert 5 <= alert.step <= 7  # the guard's default full steps: every 3rd
    assert t.state.global_step == alert.step  # stopped at the end of that step, not at 30
    events = [r["event"] for r in journal(run.journal) if r["kind"] == "event"]
    assert "guard.alert" in events and "guard.stopped" in events


def test_guard_alerts_on_labels_shifted_twice(home, tmp_path):
    """GPT-2 shifts labels == input_ids itself; a dataset that shifts them too trains the model
    to predict two tokens ahead."""
    class PreShifted(torch.utils.data.Dataset):
        def __init__(self, ids):
            self.ids = ids

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i, :-1], "labels": self.ids[i, 1:]}

    run = labcoat.init(experiment="hf-labels", seed=0)
    callback = LabcoatCallback(run)
    t = trainer(tmp_path / "out", gpt2(), callbacks=[callback], steps=3,
                train=PreShifted(chars.letter_runs(128, seed=1)))
    t.train()
    rules = {a.rule: a.step for a in callback.guard.alerts}
    assert rules.get("data.label_offset") == 1


def test_guard_alerts_on_labels_not_shifted(home, tmp_path):
    """A causal LM of the script's own whose loss does not shift (it expects labels shifted by
    the data, labels_shifted=True), fed labels == input_ids: it learns to copy its input."""
    class NoShiftLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = gpt2()

        def forward(self, input_ids, labels):
            logits = self.lm(input_ids=input_ids).logits
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            return {"loss": loss, "logits": logits}

    run = labcoat.init(experiment="hf-noshift", seed=0)
    callback = LabcoatCallback(run, guard={"labels_shifted": True})
    t = trainer(tmp_path / "out", NoShiftLM(), callbacks=[callback], steps=3)
    t.train()
    rules = {a.rule: a.step for a in callback.guard.alerts}
    assert rules.get("data.label_leak") == 1


def test_a_callback_added_after_the_trainer_was_built_refuses_to_train(home, tmp_path):
    t = trainer(tmp_path / "out", gpt2(), steps=2)
    t.add_callback(LabcoatCallback(labcoat.init(experiment="hf-late", seed=0)))
    with pytest.raises(LabcoatError, match="callbacks=\\[LabcoatCallback"):
        t.train()


def test_bad_arguments_are_one_clear_error():
    with pytest.raises(LabcoatError, match="stop_on='fatal'"):
        LabcoatCallback(stop_on="fatal")
    with pytest.raises(LabcoatError, match="give stop_on= to the callback"):
        LabcoatCallback(guard={"stop_on": "error"})
    with pytest.raises(LabcoatError, match="eval_items"):
        LabcoatCallback(eval_items=3)
    assert math.isfinite(1.0)
