"""Near-duplicate removal of harvested items: labcoat's MinHash LSH against exact all-pairs
Jaccard (issue 35).

Items (--kind): templated arithmetic word problems (siblings share most of their words;
their numbers tell them apart) or free text without numbers (random 14-word sentences over
a 400-word vocabulary: every pair needs its Jaccard); a fifth of them get a near copy (a
clause added or removed, "Question:" in front, recased) and a tenth an exact copy.
labcoat: `evals.find_duplicates` (character 5-gram shingles, 128 MinHash functions in 32
LSH bands, every candidate checked with its exact Jaccard). Baseline: the exact Jaccard
of every pair of shingle sets (Python sets), O(n^2). Both use threshold 0.7 and the
same-numbers rule, so they must find the same groups; the figures are the times and the
agreement on planted pairs.

Run: nice -n 10 .venv/bin/python benchmarks/harvest_dedup.py [--items N] [--quick]
"""

from __future__ import annotations

import itertools
import re

import _harness as bench
import numpy as np

from labcoat.evals import find_duplicates, normalize_text

TEMPLATES = (
    "{name} has {a} {obj}s and buys {b} more. How many {obj}s does {name} have now?",
    "A box holds {a} {obj}s. {name} takes {b} of them out. How many {obj}s are left?",
    "Each of {b} shelves holds {a} {obj}s. How many {obj}s does {name} keep on them?",
)
EDITS = (lambda t: "Question: " + t, lambda t: t + " Answer with a number.",
         lambda t: t.replace(" now?", "?"), lambda t: t.upper())


def items(n: int, kind: str = "templated", seed: int = 0
          ) -> tuple[list[str], set[frozenset[int]]]:
    rng = np.random.default_rng(seed)
    names, objects = ["Ann", "Bob", "Chen", "Dara", "Eli"], ["apple", "pear", "coin", "card"]
    vocabulary = ["".join(rng.choice(list("abcdefghij"), size=5)) for _ in range(400)]
    texts: list[str] = []
    planted: set[frozenset[int]] = set()
    while len(texts) < n:
        t = TEMPLATES[rng.integers(len(TEMPLATES))].format(
            name=names[rng.integers(5)], obj=objects[rng.integers(4)],
            a=int(rng.integers(10, 999)), b=int(rng.integers(2, 99))) if kind == "templated" \
            else " ".join(rng.choice(vocabulary, size=14)) + " now?"
        texts.append(t)
        if rng.random() < 0.2:
            texts.append(EDITS[rng.integers(len(EDITS))](t))
            planted.add(frozenset((len(texts) - 2, len(texts) - 1)))
        elif rng.random() < 0.1:
            texts.append(t)
            planted.add(frozenset((len(texts) - 2, len(texts) - 1)))
    return texts, planted


def all_pairs(texts: list[str], threshold: float = 0.7) -> set[frozenset[int]]:
    """Exact Jaccard of every pair (the same shingles and numbers rule as labcoat)."""
    normalized = [normalize_text(t) for t in texts]
    grams = [{s.encode()[i:i + 5] for i in range(max(1, len(s.encode()) - 4))}
             for s in normalized]
    numbers = [sorted(re.findall(r"\d+", s)) for s in normalized]
    found = set()
    for i, j in itertools.combinations(range(len(texts)), 2):
        if numbers[i] != numbers[j]:
            continue
        both = len(grams[i] & grams[j])
        if both / (len(grams[i]) + len(grams[j]) - both) >= threshold:
            found.add(frozenset((i, j)))
    return found


def grouped(groups: np.ndarray) -> set[frozenset[int]]:
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups.tolist()):
        members.setdefault(g, []).append(i)
    return {frozenset(p) for m in members.values() for p in itertools.combinations(m, 2)}


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--kind", choices=("templated", "free"), default="templated",
                        help="templated word problems (numbers tell siblings apart) or free "
                             "text without numbers (every pair needs its Jaccard)")
    args = bench.shrink(parser.parse_args(), items=300)
    texts, planted = items(args.items, args.kind)
    normalize_text("warm")  # the Unicode table is built once per process
    ours, found = bench.timed(lambda: find_duplicates(texts), rounds=3)
    theirs, pairs = bench.timed(lambda: all_pairs(texts), rounds=1)
    labcoat_pairs = grouped(found.group)
    exact_groups = {frozenset(p) for p in pairs}
    results = {
        "kind": args.kind, "items": len(texts), "planted_pairs": len(planted),
        "labcoat_s": ours.min, "all_pairs_s": theirs.min, "speedup": theirs.min / ours.min,
        "lsh_candidates": found.candidates,
        "planted_recall": len(planted & labcoat_pairs) / len(planted),
        "pairs_all_pairs_found": len(exact_groups),
        "all_pairs_missed_by_labcoat": len(exact_groups - labcoat_pairs),
    }
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    bench.save(args, results)


if __name__ == "__main__":
    main()
