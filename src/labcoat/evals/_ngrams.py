"""Text normalization and vectorized word n-gram hashing for the contamination scanner.

Normalization (the same for eval items and training text), in this order:
1. Unicode NFKC (full-width letters, ligatures and the like become plain ones);
2. lowercase (`str.lower`);
3. punctuation deleted: every character of Unicode category P* or S*
   (punctuation and symbols; on ASCII exactly `string.punctuation`), so
   "don't" -> "dont" and "state-of-the-art" -> "stateoftheart", as
   lm-eval-harness's janitor does;
4. whitespace (any Unicode whitespace) collapsed; words are what remains
   between whitespace.

`normalize_text` is the reference: `normalize_text(t).split()` are the words.
The scanner gets the same words without per-word Python work: steps 1-2 run on
whole strings in C (and are skipped for ASCII text, where a byte table
lowercases); steps 3-4 classify every character with one table lookup in
numpy (`codepoint_kinds`, built from the same Unicode data).

Hashes are uint64 (numpy wraps overflow: arithmetic mod 2^64). A word's hash
folds its bytes 8 at a time through the splitmix64 finalizer (words over 64
bytes: blake2b); an n-gram's hash is a polynomial in its words' hashes,
hash(w_i..w_{i+n-1}) = sum_j h(w_{i+j}) Q^j, computed for every position at once
from prefix sums (a rolling hash without a Python loop). Collisions are
possible, so every hash hit is verified against the text.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import unicodedata

import numpy as np

# Odd multipliers (invertible mod 2^64): golden ratio, splitmix64 (Steele et al. 2014).
_Q = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: word-level base
_Q_INV = pow(_Q, -1, 1 << 64)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64 finalizer (Steele et al. 2014)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LEN = np.uint64(0xC2B2AE3D27D4EB4F)

KEEP, DELETE, SEPARATOR = 0, 1, 2
_LONG_WORD = 64  # longer words (URLs, base64) are hashed one by one (blake2b)
_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


@functools.cache
def codepoint_kinds() -> np.ndarray:
    """(0x110000,) uint8: SEPARATOR for whitespace, DELETE for categories P* and S*, else KEEP."""
    kinds = np.zeros(sys.maxunicode + 1, dtype=np.uint8)
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if c.isspace():
            kinds[code] = SEPARATOR
        elif unicodedata.category(c)[0] in "PS":
            kinds[code] = DELETE
    return kinds


@functools.cache
def _deletions() -> dict[int, None]:
    return dict.fromkeys(np.flatnonzero(codepoint_kinds() == DELETE).tolist())


def normalize_text(text: str) -> str:
    """NFKC, lowercase, punctuation and symbols deleted, whitespace collapsed to one space.

    The reference definition: `normalize_text(t).split()` are the words of t.
    """
    return " ".join(prepare(text).translate(_deletions()).split())


def prepare(text: str) -> str:
    """The steps that need whole strings (context-dependent): NFKC, then lowercase."""
    return unicodedata.normalize("NFKC", text).lower()


@functools.cache
def _ascii_translation() -> tuple[bytes, bytes]:
    """`bytes.translate` arguments: ASCII lowercased and whitespace made spaces (32);
    P*/S* ASCII bytes deleted. Bytes >= 0x80 map to themselves (their characters
    are classified by `normalize_utf8`)."""
    table = np.arange(256, dtype=np.uint8)
    table[65:91] += 32
    kinds = codepoint_kinds()[:128]
    table[:128][kinds == SEPARATOR] = 32
    return table.tobytes(), bytes(np.flatnonzero(kinds == DELETE).tolist())


def normalize_ascii(raw: bytes) -> np.ndarray:
    """raw: ASCII bytes -> (k,) uint8 normalized bytes: letters lowercased, punctuation
    deleted, whitespace made spaces (not collapsed: the word splitter treats a run of
    spaces as one). One C-level `bytes.translate`: no per-byte Python work."""
    return np.frombuffer(translate_ascii(raw), dtype=np.uint8)


def translate_ascii(raw: bytes) -> bytes:
    """`normalize_ascii` as bytes."""
    table, delete = _ascii_translation()
    return raw.translate(table, delete)


def ascii_kept(raw: bytes) -> np.ndarray:
    """(k,) positions in raw of the bytes `normalize_ascii` keeps (to locate matches)."""
    keep = np.ones(256, dtype=bool)
    keep[list(_ascii_translation()[1])] = False
    return np.flatnonzero(keep[np.frombuffer(raw, dtype=np.uint8)])


def normalize_prepared(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """parts: UTF-8 of `prepare`d texts -> (normalized bytes of the parts joined by
    spaces, (len(parts),) start of each part in them).

    ASCII bytes go through `bytes.translate`; only the (usually few) non-ASCII
    characters are decoded, in numpy, and classified with `codepoint_kinds`:
    no per-character Python work.
    """
    translated = [translate_ascii(p) for p in parts]
    starts = np.zeros(len(parts), dtype=np.int64)
    if len(parts) > 1:
        np.cumsum([len(t) + 1 for t in translated[:-1]], out=starts[1:])
    data = np.frombuffer(b" ".join(translated), dtype=np.uint8)
    data, deleted = _non_ascii(data)
    return data, starts - np.searchsorted(deleted, starts)


def _non_ascii(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Delete the bytes of non-ASCII P*/S* characters and make those of non-ASCII
    whitespace spaces; data: valid UTF-8. Returns (bytes, sorted deleted positions)."""
    high = np.flatnonzero(data >= 0x80)
    if high.size == 0:
        return data, high
    leads = high[(data[high] & 0xC0) != 0x80]  # first byte of each non-ASCII character
    last = data.size - 1
    b0 = data[leads].astype(np.uint32)
    b1, b2, b3 = (data[np.minimum(leads + k, last)].astype(np.uint32) & 0x3F for k in (1, 2, 3))
    length = np.where(b0 < 0xE0, 2, np.where(b0 < 0xF0, 3, 4))
    code = np.where(length == 2, ((b0 & 0x1F) << 6) | b1, np.where(
        length == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2,
        ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3))
    kinds = codepoint_kinds()[np.minimum(code, sys.maxunicode)]

    def byte_positions(which: np.ndarray) -> np.ndarray:
        first, size = leads[which], length[which]
        ramp = np.arange(size.sum()) - np.repeat(np.cumsum(size) - size, size)
        return np.repeat(first, size) + ramp

    separators = kinds == SEPARATOR
    if separators.any():
        data = data.copy()
        data[byte_positions(separators)] = 32
    deleted = byte_positions(kinds == DELETE)
    if deleted.size:
        keep = np.ones(data.size, dtype=bool)
        keep[deleted] = False
        data = data[keep]
    return data, deleted


def normalize_string(text: str) -> np.ndarray:
    """Any text -> its normalized UTF-8 bytes (words separated by runs of spaces)."""
    if text.isascii():
        return normalize_ascii(text.encode("ascii"))
    return normalize_prepared([prepare(text).encode("utf-8")])[0]


class Hasher:
    """Word and n-gram hashes of normalized byte buffers; keeps power tables between calls."""

    def __init__(self) -> None:
        self._q_pow = np.ones(1, dtype=np.uint64)
        self._q_inv = np.ones(1, dtype=np.uint64)

    @staticmethod
    def _powers(table: np.ndarray, base: int, size: int) -> np.ndarray:
        """base^0 .. base^(size-1) mod 2^64 (at least), reusing `table` when big enough."""
        if table.size >= size:
            return table
        size = max(size, 2 * table.size)
        # Blocks of 4096: base^(4096 i + j) = (base^4096)^i * base^j, an outer product
        # (vectorized) instead of one long cumprod.
        small = np.full(4096, base, dtype=np.uint64)
        small[0] = 1
        small = np.cumprod(small, dtype=np.uint64)  # wraps mod 2^64: the intended modulus
        big = np.full(-(-size // 4096), pow(base, 4096, 1 << 64), dtype=np.uint64)
        big[0] = 1
        big = np.cumprod(big, dtype=np.uint64)
        return np.multiply.outer(big, small).ravel()

    def words(self, buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """buf: (m,) uint8 normalized bytes -> (starts, ends, hashes), each (w,), one per word.

        A word is a maximal run of bytes other than the space (32); normalization has
        made every whitespace character spaces.
        """
        m = buf.size
        if m == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0, dtype=np.uint64)
        inword = np.empty(m + 2, dtype=bool)
        inword[0] = inword[-1] = False
        np.not_equal(buf, 32, out=inword[1:-1])
        edges = np.flatnonzero(inword[1:] != inword[:-1])
        starts, ends = edges[0::2], edges[1::2]
        lengths = ends - starts
        # Words as 8-byte little-endian chunks read in place (a byte-strided uint64
        # view), folded with the splitmix finalizer: one gather per 8 bytes of word.
        padded = np.zeros(m + 8, dtype=np.uint8)
        padded[:m] = buf
        view = np.ndarray((m + 1,), dtype="<u8", buffer=padded, strides=(1,))
        h = lengths.astype(np.uint64) * _LEN
        long_words = np.flatnonzero(lengths > _LONG_WORD)
        index = np.flatnonzero(lengths <= _LONG_WORD) if long_words.size else \
            np.arange(lengths.size)
        rest = lengths[index]
        chunk = 0
        while index.size:
            piece = view[starts[index] + chunk] & _MASKS[np.minimum(rest, 8)]
            h[index] = _mix(h[index] ^ piece)
            chunk += 8
            longer = rest > 8
            index, rest = index[longer], rest[longer] - 8
        # Rare very long words (URLs, base64): a digest each, so that no block needs
        # thousands of rounds above.
        data = memoryview(buf)
        for w in long_words.tolist():
            digest = hashlib.blake2b(data[starts[w]:ends[w]], digest_size=8).digest()
            h[w] = int.from_bytes(digest, "little")
        return starts, ends, h

    def ngrams(self, word_hashes: np.ndarray, n: int) -> np.ndarray:
        """word_hashes: (w,) -> (w - n + 1,) hashes of each run of n consecutive words."""
        w = word_hashes.size
        if w < n:
            return np.zeros(0, dtype=np.uint64)
        self._q_pow = self._powers(self._q_pow, _Q, w + 1)
        self._q_inv = self._powers(self._q_inv, _Q_INV, w + 1)
        prefix = np.zeros(w + 1, dtype=np.uint64)
        np.cumsum(word_hashes * self._q_pow[:w], out=prefix[1:])
        return (prefix[n:] - prefix[: w - n + 1]) * self._q_inv[: w - n + 1]


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(30))
    h *= _MIX1
    h ^= h >> np.uint64(27)
    h *= _MIX2
    return h ^ (h >> np.uint64(31))


def text_ngram_hashes(hasher: Hasher, words: list[str], n: int) -> np.ndarray:
    """Hashes (len(words) - n + 1,) of the n-grams of already-normalized `words`."""
    buf = np.frombuffer(" ".join(words).encode("utf-8"), dtype=np.uint8)
    _, _, hashes = hasher.words(buf)
    return hasher.ngrams(hashes, n)
