"""Contamination scan throughput against an lm-eval-harness-style Python n-gram index.

Corpus: generated English-like text (Zipf-distributed words from a 20,000-word
vocabulary, with capitals and punctuation), one document per line, written as
plain text and as JSONL; 300 eval items of 20-60 words, 40 of them planted in
the corpus with changed case and punctuation.

Baseline: lm-eval-harness's pure-Python decontamination (`decontamination/
janitor.py`: lowercase, delete punctuation with str.translate, split, build
every 13-gram string with a sliding join and look it up in a set of the eval
13-grams), one document at a time. Both must find the same contaminated items.

Run: nice -n 10 .venv/bin/python benchmarks/contamination.py [megabytes] [--quick]
"""

from __future__ import annotations

import json
import string
import tempfile
import time
from pathlib import Path

import _harness as bench
import numpy as np

from labcoat.evals import EvalItem, normalize_text, scan_contamination

N = 13
ITEMS, PLANTED = 300, 40


def generate(directory: Path, megabytes: float, seed: int = 0
             ) -> tuple[list[Path], list[Path], list[EvalItem]]:
    rng = np.random.default_rng(seed)
    letters = np.array(list(string.ascii_lowercase))
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 10))) for _ in range(20_000)]
    decorated = np.array(vocab + [w.capitalize() for w in vocab[:2000]]
                         + [w + "," for w in vocab[:3000]] + [w + "." for w in vocab[:3000]]
                         + ["it's", "state-of-the-art", "(see", "below)", "--", "U.S."])
    weights = 1.0 / np.arange(1, decorated.size + 1) ** 1.05
    weights /= weights.sum()

    def words(count: int) -> list[str]:
        return decorated[rng.choice(decorated.size, size=count, p=weights)].tolist()

    items = [EvalItem(task=f"task{k % 3}", id=f"q{k}", input=" ".join(words(int(rng.integers(
        20, 61))))) for k in range(ITEMS)]
    planted = rng.choice(ITEMS, size=PLANTED, replace=False)
    files = max(1, int(megabytes // 25))
    per_file = int(megabytes * 1e6 / files)
    plain, jsonl = [], []
    for f in range(files):
        lines: list[str] = []
        size = 0
        batch = words(2_000_000)
        position = 0
        while size < per_file:
            length = int(rng.integers(50, 400))
            if position + length > len(batch):
                batch, position = words(2_000_000), 0
            line = " ".join(batch[position:position + length])
            position += length
            lines.append(line)
            size += len(line) + 1
        for k in planted[f::files]:  # planted items: shouted, extra punctuation, mid-line
            text = items[int(k)].input.upper().replace(" ", ", ", 3)
            row = int(rng.integers(len(lines)))
            lines[row] = lines[row][:200] + " " + text + " " + lines[row][200:]
        plain.append(directory / f"train{f}.txt")
        plain[-1].write_text("\n".join(lines) + "\n", encoding="utf-8")
        jsonl.append(directory / f"train{f}.jsonl")
        with open(jsonl[-1], "w", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps({"text": line, "meta": {"source": "bench"}}) + "\n")
    return plain, jsonl, items


class Janitor:
    """lm-eval-harness's Python decontamination path, reduced to what we compare."""

    def __init__(self, items: list[EvalItem], n: int) -> None:
        self.n = n
        self.table = str.maketrans("", "", string.punctuation)
        self.index: dict[str, set[str]] = {}
        for item in items:
            for gram in self.ngrams(item.input):
                self.index.setdefault(gram, set()).add(item.id)

    def normalize(self, text: str) -> str:
        return text.lower().translate(self.table)

    def ngrams(self, text: str) -> list[str]:
        words = self.normalize(text).split()
        return [" ".join(g) for g in zip(*[words[i:] for i in range(self.n)], strict=False)]

    def scan(self, paths: list[Path], jsonl: bool) -> set[str]:
        dirty: set[str] = set()
        for path in paths:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    text = json.loads(line)["text"] if jsonl else line
                    for gram in self.ngrams(text):
                        ids = self.index.get(gram)
                        if ids:
                            dirty |= ids
        return dirty


def measure(label: str, paths: list[Path], items: list[EvalItem], jsonl: bool) -> float:
    size = sum(p.stat().st_size for p in paths)
    start = time.perf_counter()
    report = scan_contamination(paths, items, n=N, min_n=N)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    baseline = Janitor(items, N).scan(paths, jsonl)
    base_s = time.perf_counter() - start
    ours = {r.id for r in report.contaminated}
    same = ours == baseline
    print(f"{label:6} {size / 1e6:7.1f} MB   labcoat {size / 1e6 / ours_s:7.1f} MB/s "
          f"({ours_s:6.2f} s)   janitor {size / 1e6 / base_s:6.1f} MB/s ({base_s:6.2f} s)   "
          f"speedup {base_s / ours_s:5.1f}x   contaminated {len(ours)}/{len(items)} "
          f"(planted {PLANTED}); same items: {'yes' if same else 'NO'}")
    if not same:
        print("  only labcoat:", sorted(ours - baseline), " only janitor:",
              sorted(baseline - ours))
    return base_s / ours_s


def main() -> None:
    parser = bench.parser(__doc__)
    parser.add_argument("megabytes", type=float, nargs="?", default=100.0)
    args = parser.parse_args()
    megabytes = 0.3 if args.quick else args.megabytes
    start = time.perf_counter()
    normalize_text("warm up")  # one-time: the Unicode character table (not throughput)
    print(f"one-time setup (Unicode table): {time.perf_counter() - start:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        plain, jsonl, items = generate(Path(tmp), megabytes)
        print(f"generated {megabytes:.0f} MB (plain text and JSONL) in "
              f"{time.perf_counter() - start:.1f} s; {ITEMS} eval items, n = {N}")
        speedups = [measure("plain", plain, items, jsonl=False),
                    measure("jsonl", jsonl, items, jsonl=True)]
        non_ascii = Path(tmp) / "unicode.txt"  # our slower path: any non-ASCII character
        text = plain[0].read_text(encoding="utf-8").replace("\n", "\ncafé ")
        non_ascii.write_text(text, encoding="utf-8")
        speedups.append(measure("utf-8", [non_ascii], items, jsonl=False))
    print(f"target >= 4x: {'met' if min(speedups) >= 4 else 'NOT met'} "
          f"(lowest {min(speedups):.1f}x)")
    bench.save(args, {"megabytes": megabytes, "speedups": dict(zip(
        ("plain", "jsonl", "utf-8"), speedups, strict=True))})


if __name__ == "__main__":
    main()
