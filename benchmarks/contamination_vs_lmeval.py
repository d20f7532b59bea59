"""Contamination scan: labcoat vs lm-eval-harness's own decontamination code.

Same generated corpus and items as benchmarks/contamination.py (Zipf words, 300
items, 40 planted with changed case and punctuation). The lm-eval side runs in
its own virtualenv (/tmp/lmeval-venv, ``pip install torch==2.13.0 lm-eval``) as
a subprocess and uses ``lm_eval.decontamination.janitor``: ``Janitor`` (its
``normalize_string`` and ``register_contaminant``, which fills ``dirt_ngrams``)
and ``word_ngrams``; an item is contaminated when one of its 13-grams is in a
document. Janitor's own ``clean`` only removes text and does not say which item
matched, so the per-gram item map is built with lm-eval's same functions.
labcoat: ``scan_contamination`` (the engine behind ``labcoat contamination``).

    nice .venv/bin/python benchmarks/contamination_vs_lmeval.py [--mb 100] [--rounds 3] [--quick]

The lm-eval interpreter is $LMEVAL_PYTHON, else /tmp/lmeval-venv/bin/python; --quick skips
cleanly when it is absent.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import _harness as bench
from contamination import ITEMS, PLANTED, N, generate

from labcoat.evals import normalize_text, scan_contamination

LMEVAL_PY = "/tmp/lmeval-venv/bin/python"  # or $LMEVAL_PYTHON
LMEVAL_SETUP = ("python3 -m venv /tmp/lmeval-venv && /tmp/lmeval-venv/bin/pip install "
                "torch==2.13.0 lm-eval")
PEER = r'''
import json, sys, time
from lm_eval.decontamination.janitor import Janitor, word_ngrams
items = [json.loads(l) for l in open(sys.argv[1])]
paths = sys.argv[2:]
start = time.perf_counter()
jan = Janitor(ngram_n=13)
owner = {}
for it in items:
    jan.register_contaminant_python(it["input"])
    for g in word_ngrams(jan.normalize_string(it["input"]), 13):
        owner.setdefault(g, set()).add(it["id"])
dirt = jan.dirt_ngrams
found = set()
for p in paths:
    with open(p, encoding="utf-8") as f:
        for line in f:
            for g in word_ngrams(jan.normalize_string(line), 13):
                if g in dirt:
                    found |= owner[g]
print(json.dumps({"s": time.perf_counter() - start, "ids": sorted(found)}))
'''


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = bench.shrink(parser.parse_args(), mb=0.3, rounds=1)
    peer_py = bench.need_peer(args, "LMEVAL_PYTHON", LMEVAL_PY, "lm-eval", LMEVAL_SETUP)
    version = subprocess.run([peer_py, "-c", "import importlib.metadata as m;"
                              "print(m.version('lm_eval'))"], capture_output=True, text=True
                             ).stdout.strip()
    normalize_text("warm up")
    with tempfile.TemporaryDirectory() as tmp:
        plain, _, items = generate(Path(tmp), args.mb)
        size = sum(p.stat().st_size for p in plain)
        items_path = Path(tmp) / "items.jsonl"
        items_path.write_text("".join(json.dumps({"id": i.id, "input": i.input}) + "\n"
                                      for i in items))
        ours_t, peer_t = [], []
        for r in range(args.rounds):
            for arm in (["labcoat", "lm-eval"] if r % 2 == 0 else ["lm-eval", "labcoat"]):
                if arm == "labcoat":
                    start = time.perf_counter()
                    report = scan_contamination(plain, items, n=N, min_n=N)
                    ours_t.append(time.perf_counter() - start)
                    ours = {x.id for x in report.contaminated}
                else:
                    out = subprocess.run([peer_py, "-c", PEER, str(items_path),
                                          *map(str, plain)], capture_output=True, text=True,
                                         check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    peer_t.append(res["s"])
                    peer = set(res["ids"])
            print(f"round {r}: labcoat {ours_t[-1]:.2f} s, lm-eval {peer_t[-1]:.2f} s, "
                  f"load {os.getloadavg()}", flush=True)
    ratios = sorted(p / o for p, o in zip(peer_t, ours_t, strict=True))
    print(f"lm-eval {version}; corpus {size / 1e6:.1f} MB plain text, {ITEMS} items "
          f"({PLANTED} planted), n = {N}")
    print(f"labcoat s min/med/max: {min(ours_t):.2f} {statistics.median(ours_t):.2f} "
          f"{max(ours_t):.2f}; lm-eval janitor: {min(peer_t):.2f} "
          f"{statistics.median(peer_t):.2f} {max(peer_t):.2f}")
    print(f"speedup lm-eval/labcoat: min {ratios[0]:.1f}x median {statistics.median(ratios):.1f}x"
          f" max {ratios[-1]:.1f}x (goal >= 4x)")
    print(f"contaminated: labcoat {len(ours)}, lm-eval {len(peer)}, same items: "
          f"{'yes' if ours == peer else 'NO'}; only labcoat {sorted(ours - peer)}, "
          f"only lm-eval {sorted(peer - ours)}")
    bench.save(args, {"lm_eval": version, "megabytes": size / 1e6,
                      "labcoat": bench.Timing(ours_t), "lm-eval": bench.Timing(peer_t),
                      "same_items": ours == peer})


if __name__ == "__main__":
    main()
