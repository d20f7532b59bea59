"""tinylm: data correctness, held-out eval, RNG streams, masking, decoding and the CLI.

Expected values are computed independently of the code under test (by hand,
or by brute force), so a wrong generator, mask or decoder fails here.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from labcoat.errors import LabcoatError
from labcoat.sdk import read_journal
from labcoat.torch import Checkpointer
from labcoat.torch.checkpoint import _layout
from labcoat.workloads.tinylm import (
    MAX_LEN,
    TASKS,
    VOCAB,
    Config,
    Example,
    TrainStream,
    build_model,
    collate,
    encode,
    exact_match,
    greedy_decode,
    learning_rate,
    make_eval_set,
    masked_loss,
    train,
)

IGNORE = -100
TINY = dict(width=16, depth=1, heads=2, batch_size=8, eval_items=3, eval_every=0)


def samples(task: str, n: int = 300, seed: int = 0) -> list[Example]:
    stream = TrainStream(seed, set(), tasks=(task,))
    return [stream.example() for _ in range(n)]


# --- the tasks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_yields_well_formed_sequences(task: str) -> None:
    for ex in samples(task):
        toks = ex.tokens
        assert toks[0] == f"<{task}>" and toks[-1] == "<eos>"
        assert toks.count("<sep>") == 1 and toks.index("<sep>") == len(ex.input) + 1
        assert set(toks) <= set(VOCAB) and "<pad>" not in toks
        assert len(toks) <= MAX_LEN and ex.input and ex.target


def brute_balanced(xs: tuple[str, ...]) -> bool:
    s = "".join(xs)
    while "()" in s or "[]" in s:
        s = s.replace("()", "").replace("[]", "")
    return s == ""


NOUNS = {"cat": "sg", "dog": "sg", "bird": "sg", "fox": "sg",
         "cats": "pl", "dogs": "pl", "birds": "pl", "foxes": "pl"}
TRANSITIVE = {"sees": "sg", "likes": "sg", "chases": "sg", "see": "pl", "like": "pl", "chase": "pl"}


def parse_noun_phrase(words: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Recursive-descent parse of NP -> the N [P NP | that NP V]: (head number, rest).

    Fails on ungrammatical input, including a relative-clause verb that does
    not agree with its own subject.
    """
    assert words[0] == "the" and words[1] in NOUNS, words
    number, rest = NOUNS[words[1]], words[2:]
    if rest and rest[0] in ("near", "behind", "with"):
        _, rest = parse_noun_phrase(rest[1:])
    elif rest and rest[0] == "that":
        inner, rest = parse_noun_phrase(rest[1:])
        assert TRANSITIVE[rest[0]] == inner, f"{rest[0]!r} does not agree with its subject"
        rest = rest[1:]
    return number, rest


def expected_target(ex: Example) -> tuple[str, ...]:
    """Each task's answer, recomputed from the input by a different route than the generator."""
    x = ex.input
    if ex.task == "copy":
        return x
    if ex.task == "reverse":
        return tuple(x[i] for i in range(len(x) - 1, -1, -1))
    if ex.task == "sort":
        return tuple(str(d) for d in range(10) for _ in range(x.count(str(d))))
    if ex.task == "add":
        plus = x.index("+")
        return tuple(str(int("".join(x[:plus])) + int("".join(x[plus + 1:]))))
    if ex.task == "parity":
        return ("1" if sum(map(int, x)) % 2 else "0",)
    if ex.task == "count":
        assert x[-2] == "?"
        return (str(sum(1 for c in x[:-2] if c == x[-1])),)
    if ex.task == "majority":
        counts = {c: x.count(c) for c in "abc"}
        winners = [c for c, n in counts.items() if n == max(counts.values())]
        assert len(winners) == 1, "the majority task must have a unique winner"
        return (winners[0],)
    if ex.task == "recall":
        pairs = dict(zip(x[:-2:2], x[1:-2:2], strict=True))
        assert len(pairs) == len(x[:-2]) // 2, "keys must be distinct"
        return (pairs[x[-1]],)
    if ex.task == "brackets":
        return ("yes",) if brute_balanced(x) else ("no",)
    if ex.task == "agree":
        number, rest = parse_noun_phrase(x)
        assert not rest, f"trailing words {rest}"
        return ("is",) if number == "sg" else ("are",)
    raise AssertionError(f"no reference for task {ex.task}")


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_has_correct_targets(task: str) -> None:
    for ex in samples(task):
        assert ex.target == expected_target(ex), ex


def test_hand_checked_reference_answers() -> None:
    # The references above, on inputs worked out by hand.
    assert expected_target(Example("add", ("4", "7", "+", "8"), ())) == ("5", "5")
    assert expected_target(Example("add", ("9", "9", "+", "9", "9"), ())) == ("1", "9", "8")
    assert expected_target(Example("sort", tuple("3193"), ())) == tuple("1339")
    assert expected_target(Example("parity", tuple("10110"), ())) == ("1",)
    assert expected_target(Example("brackets", tuple("([)]"), ())) == ("no",)
    assert expected_target(Example("brackets", tuple("([])[]"), ())) == ("yes",)
    assert expected_target(Example("recall", tuple("a3c5?c"), ())) == ("5",)
    sentence = "the dog that the cats near the fox chase".split()
    assert expected_target(Example("agree", tuple(sentence), ())) == ("is",)


def test_tasks_are_not_degenerate() -> None:
    """Binary tasks are roughly balanced and agreement has attractors, so chance is chance."""
    brackets = Counter(ex.target for ex in samples("brackets", 1000))
    assert 400 < brackets[("yes",)] < 600
    parity = Counter(ex.target for ex in samples("parity", 1000))
    assert 400 < parity[("1",)] < 600
    agree = samples("agree", 1000)
    # the last noun disagrees with the head noun often enough to mislead a shortcut
    nouns = {"cat", "dog", "bird", "fox", "cats", "dogs", "birds", "foxes"}
    misleading = sum(1 for ex in agree if expected_target(Example(
        "agree", ("the", [w for w in ex.input if w in nouns][-1]), ())) != ex.target)
    assert misleading > 100
    assert len({ex.input for ex in samples("add", 1000)}) > 900  # no tiny input spaces


# --- eval set and training stream -----------------------------------------------------------------


def test_eval_set_is_fixed_whatever_the_global_rng_or_process() -> None:
    random.seed(1)
    torch.manual_seed(1)
    first = make_eval_set(20)
    random.seed(2)
    torch.manual_seed(2)
    assert make_eval_set(20) == first
    # a larger set extends a smaller one, so item ids keep their meaning
    small = make_eval_set(7)
    assert all(small.items[t] == first.items[t][:7] for t in TASKS)
    assert first.ids["copy"][17] == "copy/0017"
    # another process with another hash seed builds the same set (no use of hash())
    code = ("from labcoat.workloads.tinylm import make_eval_set as m;"
            "print(repr(sorted((t, [e.tokens for e in xs]) for t, xs in m(20).items.items())))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": h}).stdout
            for h in ("1", "2")}
    assert outs == {repr(sorted((t, [e.tokens for e in xs]) for t, xs in first.items.items()))
                    + "\n"}


def test_eval_items_are_distinct_and_held_out_of_training() -> None:
    eval_set = make_eval_set(50)
    keys = {(ex.task, ex.input) for xs in eval_set.items.values() for ex in xs}
    assert len(keys) == 50 * len(TASKS)
    for seed in (0, 1, 2):
        stream = TrainStream(seed, eval_set.held_out())
        drawn = [stream.example() for _ in range(3000)]
        assert not {(ex.task, ex.input) for ex in drawn} & keys
        assert stream.skipped > 0  # short parity strings do collide; they were dropped
    # without the exclusion the same stream does produce eval items (the check is live)
    unfiltered = TrainStream(0, set())
    assert {(ex.task, ex.input) for ex in (unfiltered.example() for _ in range(3000))} & keys


def test_data_order_follows_the_data_seed_only() -> None:
    random.seed(0)
    torch.manual_seed(0)
    one = [ex for s in [TrainStream(5, set())] for ex in (s.example() for _ in range(200))]
    random.seed(1)  # global RNGs must not matter
    torch.manual_seed(1)
    two = [ex for s in [TrainStream(5, set())] for ex in (s.example() for _ in range(200))]
    three = [ex for s in [TrainStream(6, set())] for ex in (s.example() for _ in range(200))]
    assert one == two
    assert one != three
    assert {ex.task for ex in one} == set(TASKS)  # the mixture covers every task


# --- loss masking and schedule ------------------------------------------------------------------


def test_collate_masks_everything_but_the_answer() -> None:
    ids = {t: VOCAB.index(t) for t in VOCAB}
    long = Example("copy", ("a", "b"), ("a", "b"))  # <copy> a b <sep> a b <eos>
    short = Example("parity", ("1",), ("1",))  # <parity> 1 <sep> 1 <eos>
    inputs, labels = collate([long, short])
    pad = ids["<pad>"]
    assert inputs.tolist() == [
        [ids["<copy>"], ids["a"], ids["b"], ids["<sep>"], ids["a"], ids["b"]],
        [ids["<parity>"], ids["1"], ids["<sep>"], ids["1"], pad, pad],
    ]
    assert labels.tolist() == [
        [IGNORE, IGNORE, IGNORE, ids["a"], ids["b"], ids["<eos>"]],
        [IGNORE, IGNORE, ids["1"], ids["<eos>"], IGNORE, IGNORE],
    ]


def test_loss_only_sees_target_positions() -> None:
    torch.manual_seed(0)
    inputs, labels = collate(samples("add", 6))
    logits = torch.randn(*labels.shape, len(VOCAB), requires_grad=True)
    loss = masked_loss(logits, labels)
    # reference: mean of -log p(label) over target positions, written out by hand
    logp = logits.detach().log_softmax(-1)
    terms = [-logp[b, t, labels[b, t]] for b in range(labels.shape[0])
             for t in range(labels.shape[1]) if labels[b, t] != IGNORE]
    assert loss.item() == pytest.approx(float(sum(terms) / len(terms)), rel=1e-6)
    loss.backward()
    grad_norm = logits.grad.norm(dim=-1)  # (B, T)
    assert torch.all(grad_norm[labels == IGNORE] == 0)
    assert torch.all(grad_norm[labels != IGNORE] > 0)


def test_learning_rate_schedule_by_hand() -> None:
    cfg = Config(steps=110, warmup=10, lr=1.0, min_lr_ratio=0.1, schedule="cosine")
    assert learning_rate(1, cfg) == pytest.approx(0.1)
    assert learning_rate(5, cfg) == pytest.approx(0.5)
    assert learning_rate(10, cfg) == pytest.approx(1.0)
    assert learning_rate(60, cfg) == pytest.approx(0.55)  # halfway: (1 + 0.1) / 2
    assert learning_rate(110, cfg) == pytest.approx(0.1)
    flat = Config(steps=110, warmup=0, lr=0.5, schedule="constant")
    assert {learning_rate(s, flat) for s in (1, 50, 110)} == {0.5}


# --- decoding and scoring ----------------------------------------------------------------------


def test_exact_match_requires_the_whole_answer_and_its_eos() -> None:
    eos, pad = VOCAB.index("<eos>"), VOCAB.index("<pad>")
    a, b, c = encode("abc")
    generated = torch.tensor([[a, b, eos, c], [a, b, c, eos], [a, eos, pad, pad], [a, eos, c, c]])
    answers = [[a, b, eos], [a, b, eos], [a, b, eos], [a, eos]]
    assert exact_match(generated, answers).tolist() == [1.0, 0.0, 0.0, 1.0]


def test_batched_greedy_decode_matches_one_item_at_a_time() -> None:
    model = build_model(Config(width=32, depth=2, heads=4, seed=3)).eval()
    prompts = [encode(ex.prompt) for ex in make_eval_set(4).items["sort"]]
    prompts += [encode(ex.prompt) for ex in make_eval_set(4).items["agree"]]
    batched = greedy_decode(model, prompts, 5)
    with torch.no_grad():
        for row, prompt in enumerate(prompts):  # the obvious per-item loop, as reference
            seq = list(prompt)
            for _ in range(5):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
            assert batched[row].tolist() == seq[len(prompt):]


# --- determinism and RNG streams ---------------------------------------------------------------


def test_same_seed_gives_bit_identical_training() -> None:
    cfg = Config(**TINY, steps=4, dropout=0.1, seed=7, threads=1)
    first, second = train(cfg), train(cfg)
    assert first.losses == second.losses
    for (name, p), q in zip(first.model.state_dict().items(),
                            second.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_each_seed_moves_only_its_stream() -> None:
    def config(**seeds: int) -> Config:
        return Config(**TINY, steps=3, dropout=0.2, seed=1, threads=1,
                      **{f"{k}_seed": v for k, v in seeds.items()})

    def params(cfg: Config) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in build_model(cfg).parameters()])

    base = config()
    ref = train(base)
    for stream in ("init", "data", "dropout"):
        other = config(**{stream: 12345})
        for name in ("init", "data", "dropout"):
            assert (other.seed_for(name) == base.seed_for(name)) == (name != stream)
        assert torch.equal(params(other), params(base)) == (stream != "init")
        assert train(other).losses != ref.losses, f"{stream} seed had no effect"
    # changing only the data seed changes which examples come first
    assert (TrainStream(base.seed_for("data"), set()).example()
            != TrainStream(config(data=12345).seed_for("data"), set()).example())
    assert not torch.equal(params(Config(**TINY, seed=2)), params(base))


def test_training_leaves_global_state_alone() -> None:
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    threads = torch.get_num_threads()
    train(Config(**TINY, steps=2, dropout=0.5, threads=1))
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_a_short_run_learns_an_easy_task() -> None:
    result = train(Config(width=32, depth=2, heads=2, steps=150, lr=1e-2, warmup=20,
                          eval_items=50, eval_every=0, tasks=("majority",), threads=1))
    assert result.accuracy["majority"] >= 0.9  # always answering one letter scores about 1/3
    assert result.losses[-1] < result.losses[0] / 2


def test_config_rejects_bad_values_with_the_fix() -> None:
    with pytest.raises(LabcoatError, match="width=30 must be divisible by heads=4"):
        Config(width=30, heads=4)
    with pytest.raises(LabcoatError, match="warmup=20 must be between 0 and steps=10"):
        Config(steps=10, warmup=20)
    with pytest.raises(LabcoatError, match="choose from copy"):
        Config(tasks=("copy", "nope"))


# --- command line --------------------------------------------------------------------------------


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LABCOAT_JOURNAL": str(tmp_path / "journal.jsonl"),
           "LABCOAT_EXPERIMENT": "e", "LABCOAT_TRIAL": "t", "LABCOAT_ATTEMPT": "1",
           "LABCOAT_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "labcoat.workloads.tinylm", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_reports_every_step_and_every_item(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--steps", "5", "--eval-every", "5", "--eval-items", "4",
                   "--width", "16", "--depth", "1", "--heads", "2", "--batch-size", "8",
                   "--threads", "1", "--seed", "3", "--warmup", "2")
    assert proc.returncode == 0, proc.stderr
    assert "final exact_match" in proc.stdout
    records = [r for _, r in read_journal(tmp_path / "journal.jsonl").records]
    assert records[0]["kind"] == "start" and records[0]["total_steps"] == 5
    assert records[-1] == {**records[-1], "kind": "finish", "status": "done"}
    logs = [r for r in records if r["kind"] == "log"]
    losses = {r["step"]: r["metrics"] for r in logs if "loss" in r["metrics"]}
    assert sorted(losses) == [1, 2, 3, 4, 5]
    # default peak 2e-2, warmup 2, then cosine to 2e-3 over steps 3-5, worked out by hand
    assert [m["lr"] for m in losses.values()] == pytest.approx(
        [0.01, 0.02, 0.002 + 0.018 * 0.75, 0.002 + 0.018 * 0.25, 0.002])
    items = [r for r in records if r["kind"] == "items"]
    assert {r["task"] for r in items} == set(TASKS) and len(items) == len(TASKS)
    for r in items:
        assert r["step"] == 5
        assert r["items"] == [f"{r['task']}/{i:04d}" for i in range(4)]
        assert set(r["scores"]) <= {0.0, 1.0}
    (summary,) = [r["metrics"] for r in logs if "exact_match" in r["metrics"]]
    per_task = [summary[f"exact_match/{t}"] for t in TASKS]
    means = [sum(r["scores"]) / 4 for r in sorted(items, key=lambda r: list(TASKS).index(
        r["task"]))]
    assert per_task == pytest.approx(means)
    assert summary["exact_match"] == pytest.approx(sum(means) / len(means))


def test_cli_bad_flag_is_one_clear_line(tmp_path: Path) -> None:
    proc = run_cli(tmp_path, "--width", "30", "--heads", "4")
    assert proc.returncode == 2
    assert "width=30 must be divisible by heads=4" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "journal.jsonl").exists()


def test_importing_workloads_does_not_import_torch() -> None:
    code = "import sys, labcoat, labcoat.workloads; print(json.dumps('torch' in sys.modules))"
    out = subprocess.run([sys.executable, "-c", "import json;" + code],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) is False


# --- checkpoints and exact resume (subprocess kill tests: tests/checkpoint/test_resume.py) ---


def test_resuming_in_process_ends_where_an_uninterrupted_run_ends(tmp_path: Path) -> None:
    # eval_budget=0: a budget sizes the eval subset from measured speed, which may differ
    # between the reference run and the checkpointed one.
    cfg = Config(**{**TINY, "eval_every": 5}, steps=20, dropout=0.2, seed=2, threads=1,
                 eval_budget=0)
    reference = train(cfg)
    with Checkpointer(tmp_path, every=5, keep_last=10) as ckpt:
        train(cfg, checkpointer=ckpt)
    for step, path in _layout.list_steps(tmp_path):
        if step > 10:  # as if the run had died after saving step 10
            _layout.delete(path)
    random.seed(7)
    expected_random = random.random()
    random.seed(7)
    with Checkpointer(tmp_path, every=5) as ckpt:
        resumed = train(cfg, checkpointer=ckpt)
        assert ckpt.restored_step == 10
    assert random.random() == expected_random  # restoring RNGs left the caller's alone
    assert resumed.losses == reference.losses and resumed.history == reference.history
    assert resumed.scores == reference.scores
    for (name, p), q in zip(reference.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_resuming_a_finished_run_only_evaluates_again(tmp_path: Path) -> None:
    cfg = Config(**TINY, steps=4, threads=1)
    with Checkpointer(tmp_path, every=2) as ckpt:
        first = train(cfg, checkpointer=ckpt)
    with Checkpointer(tmp_path, every=2) as ckpt:
        again = train(cfg, checkpointer=ckpt)
        assert ckpt.restored_step == 4
    assert again.losses == first.losses and again.exact_match == first.exact_match


def test_cli_checkpoint_flags(tmp_path: Path) -> None:
    small = ["--steps", "4", "--width", "16", "--depth", "1", "--heads", "2",
             "--batch-size", "8", "--threads", "1", "--eval-items", "2"]
    proc = run_cli(tmp_path, *small, "--checkpoint-every", "-1")
    assert proc.returncode == 2 and "--checkpoint-every -1 must be >= 0" in proc.stderr
    ckpt = tmp_path / "ckpt"
    proc = run_cli(tmp_path, *small, "--checkpoint-dir", str(ckpt), "--checkpoint-every", "2")
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in sorted(ckpt.iterdir())] == ["step-00000002", "step-00000004"]
    # the same directory with another model: one clear line, no traceback, nothing overwritten
    proc = run_cli(tmp_path, *[a if a != "16" else "32" for a in small],
                   "--checkpoint-dir", str(ckpt))
    assert proc.returncode == 1
    assert "cannot restore 'model' from checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert [p.name for p in sorted(ckpt.iterdir())] == ["step-00000002", "step-00000004"]
