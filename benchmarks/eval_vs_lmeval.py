"""Evaluation: labcoat's eval engine vs lm-evaluation-harness on the same local model and task.

Built once into --work (default /tmp/evl; reused when present): a byte-level BPE
tokenizer trained locally with `tokenizers` on the generated item text (wrapped as
`transformers.PreTrainedTokenizerFast`, eos ``<|endoftext|>``, pad ``<pad>``), a
GPT-2 (2 layers, width 128, 4 heads, 64 positions) initialised with seed 0 and then
trained for 300 steps on the items, so that its answers are a mix of right and
wrong (a purely random model scores 0 on every generation item, which would make
"identical scores" trivial), both ``save_pretrained`` to disk; three lm-eval task
YAMLs on local JSON lines (1000 documents each), in the subset labcoat's reader takes:

- ``evl_mc`` (multiple_choice, acc): "Q: what kind of thing is a WORD? A:" with 4
  one-token choices (" fruit", " animal", ...; target_delimiter " ");
- ``evl_mc_long``: the same question with 4 multi-token choices ("small fruit
  from WORD");
- ``evl_gen`` (generate_until, exact_match): "A+B=" with the sum as target;
  target_delimiter "" and ``generation_kwargs: {until: [<|endoftext|>],
  max_gen_toks: 8}`` (labcoat ignores generation_kwargs; the README says why these
  settings make both tools score the same thing).

Each arm x task is its own subprocess in lm-eval's virtualenv (/tmp/lmeval-venv:
lm-eval 0.4.13 with accelerate, torch 2.13 CPU, transformers 5.25), with
HF_HUB_OFFLINE, HF_DATASETS_OFFLINE and TRANSFORMERS_OFFLINE set and OMP/MKL threads
and torch.set_num_threads = --threads. lm-eval: ``HFLM(pretrained=DIR,
dtype=float32, device=cpu, batch_size=N)``, ``TaskManager(include_path=...)``,
``get_task_dict`` and ``evaluator.evaluate(log_samples=True, bootstrap_iters=0)``
(what ``lm_eval --model hf ... --include_path ... --log_samples`` runs; the command
itself also runs once at the end, untimed, and its sample files are compared item
by item too). labcoat (PYTHONPATH=src): the same directory loaded with
transformers, ``model(tokens, use_cache=False).logits``, ``load_lm_eval_task`` on
the same YAML and ``EvalEngine(...).score()``: cold (the first call, tokenization
included) and warm (best of 3 later calls: the cached tokens every in-training
evaluation after the first reuses). items/s is over the evaluation only (lm-eval:
``evaluate``, which tokenizes too; labcoat: the cold ``score``); imports, model
loading, task building and each process's wall time are printed apart, with the
number of model forwards and rows. Arms alternate order over --rounds rounds;
per-item scores must be identical (mismatches are counted and printed).
--profile first prints a cProfile of labcoat's cold score() per task (untimed).

    nice .venv/bin/python benchmarks/eval_vs_lmeval.py [--rounds 3] [--threads 1]
        [--batch-size 64] [--batch-tokens 2048] [--profile] [--work /tmp/evl] [--quick]

lm-eval's interpreter is $LMEVAL_PYTHON, else /tmp/lmeval-venv/bin/python; --quick (20
items, one round, work folder /tmp/evl-quick) skips cleanly when it is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _harness as bench  # stdlib only: it also loads in lm-eval's venv (the roles)

LMEVAL_PY = "/tmp/lmeval-venv/bin/python"  # or $LMEVAL_PYTHON (main() sets it)
LMEVAL_SETUP = ("python3 -m venv /tmp/lmeval-venv && /tmp/lmeval-venv/bin/pip install "
                "torch==2.13.0 lm-eval")
SRC = str(Path(__file__).resolve().parent.parent / "src")
TASKS = ("evl_mc", "evl_mc_long", "evl_gen")
EOS, PAD = "<|endoftext|>", "<pad>"
KINDS = ("fruit", "animal", "tool", "color", "river", "city", "metal", "dance", "stone",
         "bird", "tree", "dish")
ADJECTIVES = ("small", "old", "red", "wild", "sweet", "heavy", "bright", "quiet")
SYLLABLES = ("ka", "lo", "mi", "ru", "te", "zo", "pa", "ne", "vi", "su", "do", "ba", "fi",
             "gu", "ho", "ja", "ly", "wo")


# --- build (runs in lm-eval's venv: tokenizers, transformers, torch) --------------------

def make_docs(n: int) -> tuple[list[dict], list[dict], list[dict]]:
    import random

    rng = random.Random(0)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    mc = []
    for w in words:
        gold = rng.choice(KINDS)
        options = [gold] + rng.sample([k for k in KINDS if k != gold], 3)
        rng.shuffle(options)
        mc.append({"word": w, "choices": options, "label": options.index(gold)})
    mc_long = []
    for w in words:
        options = [f"{rng.choice(ADJECTIVES)} {rng.choice(KINDS)} from {rng.choice(words)}"
                   for _ in range(4)]
        mc_long.append({"word": w, "choices": options, "label": rng.randrange(4)})
    gen = []
    for _ in range(n):
        a, b = rng.randint(0, 199), rng.randint(0, 199)
        gen.append({"a": a, "b": b, "answer": str(a + b)})
    return mc, mc_long, gen


MC_TEXT = "Q: what kind of thing is a {{word}}? A:"
GEN_TEXT = "{{a}}+{{b}}="


def build(work: Path, n: int) -> None:
    import random

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    torch.set_num_threads(2)
    mc, mc_long, gen = make_docs(n)
    data = work / "tasks"
    data.mkdir(parents=True, exist_ok=True)
    for name, docs in (("mc", mc), ("mc_long", mc_long), ("gen", gen)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (data / "evl_mc.yaml").write_text(
        "task: evl_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data / 'mc.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        f'doc_to_text: "{MC_TEXT}"\ndoc_to_choice: choices\ndoc_to_target: label\n'
        "metric_list:\n  - metric: acc\n")
    (data / "evl_mc_long.yaml").write_text(
        "task: evl_mc_long\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data / 'mc_long.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        f'doc_to_text: "{MC_TEXT}"\ndoc_to_choice: choices\ndoc_to_target: label\n'
        "metric_list:\n  - metric: acc\n")
    (data / "evl_gen.yaml").write_text(
        "task: evl_gen\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {data / 'gen.jsonl'}\ntest_split: test\noutput_type: generate_until\n"
        f'doc_to_text: "{GEN_TEXT}"\ndoc_to_target: answer\ntarget_delimiter: ""\n'
        f'generation_kwargs:\n  until: ["{EOS}"]\n  max_gen_toks: 8\n  do_sample: false\n'
        "metric_list:\n  - metric: exact_match\n")
    mc_texts = [(MC_TEXT.replace("{{word}}", d["word"]), " " + d["choices"][d["label"]])
                for d in mc + mc_long]
    gen_texts = [(f"{d['a']}+{d['b']}=", d["answer"]) for d in gen]
    corpus = [c + t for c, t in mc_texts + gen_texts]
    corpus += [MC_TEXT.replace("{{word}}", d["word"]) + " " + c for d in mc + mc_long
               for c in d["choices"]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1024, special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS,
                                     pad_token=PAD, unk_token=EOS)
    # contexts and continuations tokenize apart as they do together (lm-eval encodes the
    # whole and splits; labcoat encodes the two and joins): asserted, not assumed
    for ctx, cont in mc_texts + gen_texts:
        assert hf_tok.encode(ctx) + hf_tok.encode(cont) == hf_tok.encode(ctx + cont), (ctx, cont)
    # evl_mc's choices are one token each (lm-eval then runs one forward per item, see the
    # README), evl_mc_long's several
    assert all(len(hf_tok.encode(" " + c)) == 1 for d in mc for c in d["choices"])
    assert all(len(hf_tok.encode(" " + c)) > 1 for d in mc_long for c in d["choices"])
    config = GPT2Config(vocab_size=len(hf_tok), n_positions=64, n_embd=128, n_layer=2,
                        n_head=4, bos_token_id=hf_tok.eos_token_id,
                        eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id)
    model = GPT2LMHeadModel(config)
    seqs = [hf_tok.encode(c + t) + [hf_tok.eos_token_id] for c, t in mc_texts + gen_texts]
    rng = random.Random(1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    steps = int(os.environ.get("EVL_TRAIN_STEPS", "300"))
    for step in range(steps):
        batch = rng.sample(seqs, 64)
        width = max(map(len, batch))
        ids = torch.full((64, width), hf_tok.pad_token_id)
        labels = torch.full((64, width), -100)
        for i, s in enumerate(batch):
            ids[i, :len(s)] = torch.tensor(s)
            labels[i, :len(s)] = torch.tensor(s)
        loss = model(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"build: step {step} loss {loss.item():.3f}", flush=True)
    model.eval()
    model.save_pretrained(work / "model")
    hf_tok.save_pretrained(work / "model")
    (work / "built.json").write_text(json.dumps({"items": n, "steps": steps,
                                                 "vocab": len(hf_tok)}))


# --- arms (each its own process in lm-eval's venv) ------------------------------------

def run_lmeval(work: Path, task: str, batch_size: int) -> dict:
    t0 = time.perf_counter()
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager, get_task_dict

    t_import = time.perf_counter()
    lm = HFLM(pretrained=str(work / "model"), dtype="float32", device="cpu",
              batch_size=batch_size)
    calls = count_forwards(lm.model)
    t_model = time.perf_counter()
    task_dict = get_task_dict([task], TaskManager(include_path=str(work / "tasks")))
    t_task = time.perf_counter()
    results = evaluate(lm, task_dict, log_samples=True, bootstrap_iters=0, verbosity="ERROR")
    t_eval = time.perf_counter()
    metric = "exact_match" if task == "evl_gen" else "acc"
    scores = {str(s["doc_id"]): float(s[metric]) for s in results["samples"][task]}
    return {"import": t_import - t0, "model": t_model - t_import, "task": t_task - t_model,
            "eval": t_eval - t_task, "scores": scores, **calls}


def count_forwards(model) -> dict[str, int]:
    """Count the model's forward calls and the rows they get (a forward pre-hook, so that
    generate() sees the model's own forward signature)."""
    counts = {"forwards": 0, "rows": 0}

    def hook(module, args, kwargs):
        ids = args[0] if args else kwargs.get("input_ids")
        counts["forwards"] += 1
        counts["rows"] += int(ids.shape[0])

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return counts


def run_labcoat(work: Path, task: str, batch_tokens: int, profile: bool) -> dict:
    t0 = time.perf_counter()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from labcoat.evals import EvalEngine, load_lm_eval_task

    t_import = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(work / "model")
    t_model = time.perf_counter()
    suite = load_lm_eval_task(work / "tasks" / f"{task}.yaml")
    t_task = time.perf_counter()
    calls = {"forwards": 0, "rows": 0}

    def forward(tokens):
        calls["forwards"] += 1
        calls["rows"] += int(tokens.shape[0])
        return model(tokens, use_cache=False).logits

    engine = EvalEngine(forward, tok, suite, batch_tokens=batch_tokens,
                        max_len=model.config.n_positions)
    if profile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    cold = engine.score()
    if profile:
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue(), file=sys.stderr)
    cold_calls = dict(calls)
    warm = min(engine.score().seconds for _ in range(3))
    scores = {i: float(s) for i, s in zip(cold.items, cold.scores, strict=True)}
    return {"import": t_import - t0, "model": t_model - t_import, "task": t_task - t_model,
            "eval": cold.seconds, "warm": warm, "scores": scores, **cold_calls}


# --- driver (any Python: stdlib only) ---------------------------------------------------

def env(threads: int) -> dict[str, str]:
    out = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=SRC, EVL_THREADS=str(threads))
    out.pop("HF_TOKEN", None)
    return out


def role(args: argparse.Namespace, *extra: str) -> tuple[dict, float]:
    cmd = [LMEVAL_PY, str(Path(__file__).resolve()), "--work", str(args.work),
           "--threads", str(args.threads), "--batch-size", str(args.batch_size),
           "--batch-tokens", str(args.batch_tokens), *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(args.threads),
                          cwd=args.work)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    if "--profile" in extra:
        print(proc.stderr[proc.stderr.find("   Ordered by"):], flush=True)
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def fmt3(values: list[float], spec: str = ".2f") -> str:
    return " ".join(format(v, spec) for v in (min(values), statistics.median(values),
                                              max(values)))


def main() -> None:
    global LMEVAL_PY
    parser = bench.parser(__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/evl"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64, help="lm-eval's batch_size")
    parser.add_argument("--batch-tokens", type=int, default=2048,
                        help="labcoat's batch_tokens (its default is 8192; see the README)")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile of labcoat's cold score() per task")
    parser.add_argument("--role", choices=("build", "lmeval", "labcoat"), help=argparse.SUPPRESS)
    parser.add_argument("--task", choices=TASKS, help=argparse.SUPPRESS)
    args = bench.shrink(parser.parse_args(), items=20, rounds=1, work=Path("/tmp/evl-quick"))
    args.work = args.work.resolve()
    if args.role:
        import torch

        torch.set_num_threads(args.threads)
        if args.role == "build":
            build(args.work, args.items)
            print(json.dumps({"ok": True}))
            return
        if args.role == "lmeval":
            out = run_lmeval(args.work, args.task, args.batch_size)
        else:
            out = run_labcoat(args.work, args.task, args.batch_tokens, args.profile)
        print(json.dumps(out))
        return

    LMEVAL_PY = bench.need_peer(args, "LMEVAL_PYTHON", LMEVAL_PY, "lm-eval", LMEVAL_SETUP)
    args.work.mkdir(parents=True, exist_ok=True)
    built = args.work / "built.json"
    if not built.exists() or json.loads(built.read_text())["items"] != args.items:
        start = time.perf_counter()
        role(args, "--role", "build", "--items", str(args.items))
        print(f"built model, tokenizer and tasks in {args.work} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    info = json.loads(built.read_text())
    version = subprocess.run([LMEVAL_PY, "-c", "import importlib.metadata as m; print("
                              "*(m.version(p) for p in ('lm_eval', 'torch', 'transformers')))"],
                             capture_output=True, text=True).stdout.strip()
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    scores: dict[tuple[str, str], dict[str, float]] = {}
    if args.profile:  # its own untimed runs, before the rounds
        for task in TASKS:
            print(f"cProfile of labcoat's cold score() on {task}:", flush=True)
            role(args, "--role", "labcoat", "--task", task, "--profile")
    for r in range(args.rounds):
        arms = ["labcoat", "lmeval"] if r % 2 == 0 else ["lmeval", "labcoat"]
        for task in TASKS:
            for arm in arms:
                out, wall = role(args, "--role", arm, "--task", task)
                slot = times.setdefault((arm, task), {})
                for key in ("import", "model", "task", "eval", "warm", "forwards", "rows"):
                    if key in out:
                        slot.setdefault(key, []).append(out[key])
                slot.setdefault("wall", []).append(wall)
                scores[(arm, task)] = out["scores"]
        print(f"round {r}: " + ", ".join(
            f"{arm} {task} {times[(arm, task)]['eval'][-1]:.2f} s"
            for task in TASKS for arm in ("labcoat", "lmeval"))
            + f"; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"\nlm-eval, torch, transformers: {version}; {args.rounds} interleaved rounds, "
          f"{args.threads} thread(s) per arm; model GPT-2 2x128, vocab {info['vocab']}, "
          f"trained {info['steps']} steps; lm-eval batch_size {args.batch_size}, labcoat "
          f"batch_tokens {args.batch_tokens}")
    print(f"{'task':11} {'items':>5} {'lm-eval it/s':>14} {'labcoat cold':>14} "
          f"{'labcoat warm':>14} {'cold/lm-eval min med max':>26} {'warm/lm-eval':>14} "
          f"{'score lm-eval':>13} {'labcoat':>8} {'mismatch':>8}")
    for task in TASKS:
        n = len(scores[("labcoat", task)])
        peer = [n / t for t in times[("lmeval", task)]["eval"]]
        cold = [n / t for t in times[("labcoat", task)]["eval"]]
        warm = [n / t for t in times[("labcoat", task)]["warm"]]
        ratio = sorted(c / p for c, p in zip(cold, peer, strict=True))
        ratio_w = sorted(w / p for w, p in zip(warm, peer, strict=True))
        ours, theirs = scores[("labcoat", task)], scores[("lmeval", task)]
        assert set(ours) == set(theirs), f"{task}: the two tools scored different item ids"
        bad = sorted((i for i in ours if ours[i] != theirs[i]), key=int)
        mean_o = sum(ours.values()) / n
        mean_t = sum(theirs.values()) / n
        print(f"{task:11} {n:5d} {statistics.median(peer):14.0f} {statistics.median(cold):14.0f}"
              f" {statistics.median(warm):14.0f} {fmt3(ratio):>26} "
              f"{statistics.median(ratio_w):14.1f} {mean_t:13.3f} {mean_o:8.3f} "
              f"{len(bad):8d}")
        if bad:
            print(f"  mismatched ids (first 20): {bad[:20]}")
    print("\nseconds, median over rounds (import / model load / task build / evaluation / "
          "process wall); model forwards and rows in the evaluation:")
    for task in TASKS:
        for arm in ("lmeval", "labcoat"):
            t = times[(arm, task)]
            print(f"  {task:11} {arm:8} " + " / ".join(
                f"{statistics.median(t[k]):.2f}" for k in ("import", "model", "task", "eval",
                                                            "wall"))
                + f"; {t['forwards'][-1]:.0f} forwards, {t['rows'][-1]:.0f} rows")
    cli_check(args, scores)
    print(f"load average at the end {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    bench.save(args, {"versions": version, "eval_s": {
        f"{arm}/{task}": bench.Timing(t["eval"]) for (arm, task), t in times.items()}})


def cli_check(args: argparse.Namespace, scores: dict[tuple[str, str], dict[str, float]]) -> None:
    """The `lm_eval` command itself (once, untimed): its --log_samples files vs labcoat."""
    out = args.work / "cli"
    cmd = [str(Path(LMEVAL_PY).parent / "lm_eval"), "--model", "hf", "--model_args",
           f"pretrained={args.work / 'model'},dtype=float32", "--device", "cpu", "--tasks",
           ",".join(TASKS), "--batch_size", str(args.batch_size), "--include_path",
           str(args.work / "tasks"), "--log_samples", "--output_path", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env(args.threads),
                          cwd=args.work)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    wall = time.perf_counter() - start
    parts = []
    for task in TASKS:
        newest = max(out.rglob(f"samples_{task}_2*.jsonl"), key=lambda p: p.stat().st_mtime)
        metric = "exact_match" if task == "evl_gen" else "acc"
        cli = {str(s["doc_id"]): float(s[metric])
               for s in map(json.loads, newest.read_text().splitlines())}
        ours = scores[("labcoat", task)]
        bad = sum(cli.get(i) != v for i, v in ours.items()) + len(set(cli) - set(ours))
        parts.append(f"{task} {bad} mismatches")
    print(f"lm_eval CLI (all 3 tasks in one process, {wall:.1f} s wall) --log_samples vs "
          f"labcoat per item: {', '.join(parts)}")


if __name__ == "__main__":
    main()
