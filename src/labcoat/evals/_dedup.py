"""Exact and near-duplicate eval items: MinHash signatures, LSH candidates, exact Jaccard.

An item's text is its input, choices and target, normalized as the contamination scanner
normalizes text (`_ngrams.normalize_text`: NFKC, lowercase, punctuation deleted, whitespace
collapsed). Exact duplicates share that normalized text. Near duplicates share a Jaccard
similarity of at least `threshold` between their sets of character `shingle`-grams (5 by
default: one changed word of a 15-word question changes about a sixth of the shingles;
word 3-grams would change a third and miss it).

Why character shingles and our own MinHash rather than datasketch: the normalization must
be the one labcoat's contamination scan uses (the same text is "the same item" in both),
and numpy does the whole signature matrix at once (datasketch hashes shingle by shingle in
Python). MinHash (Broder 1997) only proposes candidates: LSH with `bands` bands of
`permutations / bands` rows (Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets",
ch. 3.4) makes a pair with Jaccard J a candidate with probability 1 - (1 - J^r)^b
(r = 4, b = 32: 0.9999 at J = 0.7, 0.03 at J = 0.3); every candidate is then checked with
its exact Jaccard, so the estimate's error costs recall only below the threshold's
shoulder, never precision.

Numbers: with `numbers_must_match`, two items are near duplicates only if they hold the
same numbers. Templated items ("Ann has 12 apples..." / "Ann has 31 apples...") differ in
little else, and they are different questions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from labcoat.evals._ngrams import _mix, normalize_text

NUMBER = re.compile(r"\d+")
MAX_SHINGLE = 8  # bytes of one shingle packed into a uint64


@dataclass(frozen=True)
class DuplicateGroups:
    """What `find_duplicates` found among n texts.

    group: (n,) the index of each text's representative (itself if kept).
    kind: (n,) "" for representatives, "exact" or "near" for duplicates.
    matched: (n,) the index a duplicate matched (its neighbour in the group), -1 if kept.
    jaccard: (n,) Jaccard similarity with `matched` (1.0 for exact), nan if kept.
    candidates: pairs LSH proposed and the exact check judged.
    """

    group: np.ndarray
    kind: list[str]
    matched: np.ndarray
    jaccard: np.ndarray
    candidates: int


def content_key(normalized: str) -> str:
    """sha256 hex of a normalized text: the identity of exact duplicates, and the hash the
    holdout split is drawn from."""
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def shingles(normalized: str, size: int) -> np.ndarray:
    """Sorted unique uint64 hashes of the byte `size`-grams (size <= 8) of a normalized
    text's UTF-8 (the whole text, padded, when shorter): (m,)."""
    raw = np.frombuffer(normalized.encode("utf-8"), dtype=np.uint8).astype(np.uint64)
    if raw.size < size:
        raw = np.concatenate([raw, np.zeros(size - raw.size, dtype=np.uint64)])
    count = raw.size - size + 1
    packed = raw[:count].copy()
    for j in range(1, size):  # up to 8 bytes pack into one uint64 exactly
        packed |= raw[j:j + count] << np.uint64(8 * j)
    return np.unique(_mix(packed ^ np.uint64(size)))


def minhash(sets: Sequence[np.ndarray], permutations: int, seed: int) -> np.ndarray:
    """(n, permutations) uint64 MinHash signatures of non-empty shingle sets: for each of
    `permutations` seeded hash functions h(x) = a x + b mod 2^64 (a odd), the minimum over
    the set. Equal minima estimate the Jaccard similarity (Broder 1997). All sets at once:
    one concatenated array, minima per set by `np.minimum.reduceat`."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**63, size=permutations, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=permutations, dtype=np.uint64)
    values = np.concatenate(sets)
    starts = np.zeros(len(sets), dtype=np.int64)
    np.cumsum([s.size for s in sets[:-1]], out=starts[1:])
    out = np.empty((len(sets), permutations), dtype=np.uint64)
    chunk = max(1, (1 << 22) // max(values.size, 1))  # ~32 MB of hashes at a time
    for p in range(0, permutations, chunk):
        # a x + b mod 2^64 (a odd) permutes the already mixed shingle hashes: the
        # multiply-shift family MinHash implementations use; no second mixing needed
        hashed = np.multiply.outer(values, a[p:p + chunk]) + b[p:p + chunk]
        out[:, p:p + chunk] = np.minimum.reduceat(hashed, starts, axis=0)
    return out


def lsh_pairs(signatures: np.ndarray, bands: int, blocking: np.ndarray) -> set[tuple[int, int]]:
    """Candidate pairs (u < v): rows that agree on every value of at least one band
    (and on `blocking`, an (n,) int label)."""
    n, width = signatures.shape
    rows = width // bands
    pairs: set[tuple[int, int]] = set()
    for band in range(bands):
        keys = np.column_stack([signatures[:, band * rows:(band + 1) * rows],
                                blocking.astype(np.uint64)])
        _, labels = np.unique(keys, axis=0, return_inverse=True)
        labels = labels.ravel()
        shared = np.flatnonzero(np.bincount(labels)[labels] > 1)  # rows not alone in a bucket
        if shared.size == 0:
            continue
        order = shared[np.argsort(labels[shared], kind="stable")]
        edges = np.flatnonzero(np.diff(labels[order])) + 1
        for members in np.split(order, edges):
            listed = members.tolist()
            pairs.update((x, y) for i, x in enumerate(listed) for y in listed[i + 1:])
    return pairs


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique arrays."""
    both = np.intersect1d(a, b, assume_unique=True).size
    return both / (a.size + b.size - both)


def find_duplicates(texts: Sequence[str], *, threshold: float = 0.7, shingle: int = 5,
                    numbers_must_match: bool = True, permutations: int = 128,
                    bands: int = 32, seed: int = 0, prefer: Sequence[int] | None = None
                    ) -> DuplicateGroups:
    """Group exact and near duplicates among `texts` (raw; normalized here).

    prefer: an order of preference for representatives (indices, best first; default
    0..n-1): each group keeps its most preferred member.
    """
    n = len(texts)
    normalized = [normalize_text(t) for t in texts]
    rank = np.empty(n, dtype=np.int64)
    rank[np.asarray(list(prefer) if prefer is not None else range(n), dtype=np.int64)] = \
        np.arange(n)
    parent = list(range(n))
    kind = [""] * n
    matched = np.full(n, -1, dtype=np.int64)
    score = np.full(n, np.nan)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> bool:
        a, b = root(i), root(j)
        if a == b:
            return False
        keep, drop = (a, b) if rank[a] < rank[b] else (b, a)
        parent[drop] = keep
        return True

    exact: dict[str, int] = {}
    for i in sorted(range(n), key=lambda i: rank[i]):
        first = exact.setdefault(normalized[i], i)
        if first != i:
            join(first, i)
            kind[i], matched[i], score[i] = "exact", first, 1.0
    unique = sorted(set(exact.values()))
    sets = [shingles(normalized[i], shingle) for i in unique]
    numbers = [sorted(NUMBER.findall(normalized[i])) for i in unique]
    checked = 0
    if len(unique) > 1 and threshold <= 1.0:
        rows = permutations // bands
        signatures = minhash(sets, rows * bands, seed)
        # With the numbers rule, items with other numbers never share a bucket: templated
        # siblings (Jaccard ~0.5, candidates 87% of the time at r = 4, b = 32) are never
        # proposed, which cut candidates 700,000 -> a few hundred on 3,000 such items.
        labels: dict[str, int] = {}
        blocking = np.array([labels.setdefault(" ".join(x), len(labels))
                             if numbers_must_match else 0 for x in numbers], dtype=np.int64)
        pairs = lsh_pairs(signatures, bands, blocking)
        checked = len(pairs)
        for u, v in sorted(pairs, key=lambda p: (rank[unique[p[0]]], rank[unique[p[1]]])):
            if numbers_must_match and numbers[u] != numbers[v]:
                continue
            similarity = jaccard(sets[u], sets[v])
            if similarity >= threshold:
                i, j = unique[u], unique[v]
                later = j if rank[j] > rank[i] else i
                if join(i, j) and kind[later] == "":
                    kind[later] = "near"
                    matched[later], score[later] = (i if later == j else j), similarity
    group = np.array([root(i) for i in range(n)], dtype=np.int64)
    for i in range(n):  # a group's representative is kept even if it was marked on the way
        if group[i] == i:
            kind[i], matched[i], score[i] = "", -1, np.nan
        elif kind[i] == "":  # joined through another member: name the representative
            kind[i], matched[i] = "near", group[i]
            score[i] = jaccard(shingles(normalized[i], shingle),
                               shingles(normalized[group[i]], shingle))
    return DuplicateGroups(group, kind, matched, score, checked)
