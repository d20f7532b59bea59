"""The default template miner: constant words must agree; a word becomes a parameter by count.

Drain joins a line to the most similar template of its length when enough tokens
agree, so two events that differ in one word (``VM Started`` / ``VM Stopped``,
``Failed to get next element`` / ``Failed to internally open package.``) become one
template at any usable threshold, while a host name in a first token splits one
event across leaves of its tree. On the 13 labelled LogHub systems Drain3 (its
defaults, no masking) groups 0.70 of the lines right (``benchmarks/loghub.py``).

Here a masked line (see `mask`) becomes a *signature*, one entry per token:

- a token holding a placeholder is ``<*>`` (``port <NUM>`` and ``port <HEX>``
  alike), keeping a leading key (``uid=<NUM>`` is ``uid=<*>``);
- the value of ``key=value`` is ``<*>`` even without a digit (``backend=nccl``),
  and so is the value of a line ending in ``key: value``;
- a single quoted token (``'sparkDriver'``), empty brackets, ``nan`` and ``inf``
  are values (``<*>``);
- a value restated in brackets right after a value is dropped (``1190 bytes
  (1.16 KB)``, an address and its host name), so lines with and without it agree.

Lines with equal signatures are one template: constant words never differ inside
a template. A word becomes a parameter only by counting: when templates equal
except at one position (not a ``key:`` token, and with another constant word in
the line) hold `vary_at` distinct words there, that position is a parameter for
them all and they merge (user names in ``Invalid user admin from <IP>``); two
positions whose words form a full cross product of `vary_at` or more pairs (every
word of one seen with every word of the other: ``Loading dataset X split Y``)
are both parameters, as independent variation is what a parameter is. Event
names that come in threes stay apart and a fourth distinct word merges them: on
the LogHub mean 4, 5 and 6 are within 0.001 (0.956-0.957) above 3 and 8, and 4
scores best on this project's generated logs (``benchmarks/README.md``).

The miner is online: a template id `add` returns stays valid, and `resolve` gives
the earlier template it was merged into, if any.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

WILD = "<*>"
_PLACEHOLDER = re.compile(r"<[A-Z]+>")
_QUOTED = re.compile(r"(['\"])[^'\"\s]+\1[,.;:)]?")
_EMPTY = frozenset({"()", "[]", "{}", '""', "''"})
_KEY = re.compile(r"[A-Za-z_][\w\-]*[=:]")
# "loss nan" is "loss 2.31" with a diverged value (masking keeps the word, so the
# rank-collapsed view still tells nan from inf).
_NON_FINITE = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity"})
_VALUE_EDGE = ",;:()[]'\""
_RESTATED = re.compile(r"\((?:<[A-Z]+>)?\)[,.;:]?")
_HOST = re.compile(r"\((?:[\w\-]+(?:\.[\w\-]+)*|<[A-Z]+>)?\)[,.;:]?")

# Pairs of positions are counted in lines of up to 20 candidate words, and while fewer
# than 200,000 (position pair, rest of the line) keys are held: a bound on memory for
# logs with very many distinct templates (not measured beyond the benchmarks).
_PAIR_SLOTS = 20
_PAIRS = 200_000

Signature = tuple[str, ...]
_Slot = tuple[int, Signature, Signature]  # (position, tokens before it, tokens after it)


def tokens_of(content: str) -> list[str]:
    """The tokens a template is made of: a value restated in brackets right after a
    value (``<SIZE> (<SIZE>)`` for "1190 bytes (1.16 KB)") is dropped, so a line with
    the restatement and one without are one template."""
    tokens = content.split()
    if "(" not in content:
        return tokens
    kept = tokens[:1]
    for token in tokens[1:]:
        if not (token[0] == "(" and _restates(kept[-1], token)):
            kept.append(token)
        elif token[-1] != ")":
            kept[-1] += token[-1]  # keep the punctuation that followed it
    return kept


def _restates(value: str, bracketed: str) -> bool:
    """Whether `bracketed` restates `value`: the same kind of value, nothing, or (after
    an address) a host name, as in "from 10.0.0.1 (host-10-0-0-1.example.net)"."""
    if "<IP>" in value:
        return bool(_HOST.fullmatch(bracketed))
    kinds = _PLACEHOLDER.findall(bracketed)
    return bool(_PLACEHOLDER.search(value)) and bool(_RESTATED.fullmatch(bracketed)) and (
        not kinds or kinds[0] in value)


def signature_token(token: str) -> str:
    """A masked token as a signature compares it (see the module doc)."""
    if token in _EMPTY or (len(token) <= 11 and token.lower().strip(_VALUE_EDGE) in _NON_FINITE):
        return WILD
    if _QUOTED.fullmatch(token):
        return WILD
    key = _KEY.match(token)
    if key and key.end() < len(token) and key.group()[-1] == "=":
        return key.group() + WILD
    if "<" not in token or not _PLACEHOLDER.search(token):
        return token
    return key.group() + WILD if key and key.end() < len(token) else WILD


@dataclass
class _Group:
    shape: list[str]  # the masked tokens, "<*>" where lines of the group differ
    count: int = 0
    members: list[Signature] = field(default_factory=list)  # signatures mapped here


class WordMiner:
    """Templates keyed by signature, merged where one position's words vary `vary_at` times."""

    def __init__(self, vary_at: int, max_groups: int | None = None) -> None:
        self.vary_at = vary_at
        self.max_groups = max_groups
        self._used: OrderedDict[int, None] = OrderedDict()  # live groups, least recent first
        self._by_signature: dict[Signature, int] = {}
        self._groups: dict[int, _Group] = {}  # live groups only
        self._parent: dict[int, int] = {}  # merged group -> group it joined
        self._values: dict[_Slot, set[str]] = {}
        self._variable: set[_Slot] = set()
        self._pairs: dict[tuple[int, int, int], set[tuple[str, str]]] = {}
        self._positions: dict[int, set[int]] = {}  # line length -> positions in _variable
        self._next = 1

    def add(self, tokens: list[str]) -> int:
        """Learn one masked, tokenized line (not yet counted: see `seen`); its group number
        (see `resolve`)."""
        number = self._find(tokens)
        if number is None:
            number = self._new(self._generalize(self._signature(tokens)), tokens)
            self._evict(keep=number)
        _widen(self._groups[number].shape, tokens)
        return number

    def seen(self, number: int) -> None:
        """Count one line of group `number`."""
        number = self.resolve(number)
        self._groups[number].count += 1
        self._touch(number)

    def match(self, tokens: list[str]) -> int | None:
        """The group a line belongs to, without learning (None if it has none)."""
        return self._find(tokens)

    def resolve(self, number: int) -> int:
        """The live group `number` was merged into (itself if it was not)."""
        while number in self._parent:
            number = self._parent[number]
        return number

    def group(self, number: int) -> _Group | None:
        return self._groups.get(self.resolve(number))

    def numbers(self) -> Iterator[int]:
        return iter(sorted(self._groups))

    def _find(self, tokens: list[str]) -> int | None:
        signature = self._generalize(self._signature(tokens))
        number = self._by_signature.get(signature)
        if number is None:
            return None
        number = self.resolve(number)
        self._touch(number)
        return number

    @staticmethod
    def _signature(tokens: list[str]) -> Signature:
        signature = [signature_token(t) for t in tokens]
        if len(tokens) > 1 and _KEY.fullmatch(tokens[-2]) and tokens[-2][-1] == ":":
            signature[-1] = WILD  # "key: value" ends the line: the value
        return tuple(signature)

    def _generalize(self, signature: Signature) -> Signature:
        """`signature` with ``<*>`` at every position known to be a parameter."""
        changed = True
        while changed:
            changed = False
            for j in self._positions.get(len(signature), ()):
                if signature[j] != WILD and (j, signature[:j], signature[j + 1:]) \
                        in self._variable and _slots_at(signature, j):
                    signature = signature[:j] + (WILD,) + signature[j + 1:]
                    changed = True
        return signature

    def _new(self, signature: Signature, tokens: list[str]) -> int:
        number = self._next
        self._next += 1
        self._groups[number] = _Group(list(tokens), members=[signature])
        self._by_signature[signature] = number
        self._touch(number)
        self._count_words(signature)
        return self.resolve(number)

    def _touch(self, number: int) -> None:
        self._used[number] = None
        self._used.move_to_end(number)

    def _evict(self, keep: int) -> None:
        """Forget least recently used groups beyond `max_groups` (their ids stop resolving)."""
        while self.max_groups is not None and len(self._groups) > self.max_groups:
            number = next(n for n in self._used if n != keep)
            del self._used[number]
            for signature in self._groups.pop(number).members:
                del self._by_signature[signature]

    def _count_words(self, signature: Signature) -> None:
        for slot in _slots(signature):
            if slot in self._variable:
                continue
            values = self._values.setdefault(slot, set())
            values.add(signature[slot[0]])
            if len(values) >= self.vary_at:
                self._merge_slot(slot, values)
        self._count_pairs(signature)

    def _count_pairs(self, signature: Signature) -> None:
        """Two positions whose words form a full cross product (every word of one seen with
        every word of the other, `vary_at` or more pairs) vary independently: both are
        parameters ("Loading dataset X split Y", "X is deprecated; use Y")."""
        slots = [slot[0] for slot in _slots(signature)]
        if len(slots) > _PAIR_SLOTS or len(self._pairs) > _PAIRS:
            return  # memory stays bounded on logs with very many distinct templates
        for a, j in enumerate(slots):
            for k in slots[a + 1:]:
                rest = signature[:j] + (WILD,) + signature[j + 1:k] + (WILD,) + signature[k + 1:]
                if all(t == WILD for t in rest):
                    continue
                key = (j, k, hash(rest))  # a hash, not the tuple: 64 bits, no copy
                combos = self._pairs.setdefault(key, set())
                combos.add((signature[j], signature[k]))
                first, second = {c[0] for c in combos}, {c[1] for c in combos}
                if len(combos) >= self.vary_at and len(first) > 1 and len(second) > 1 \
                        and len(combos) == len(first) * len(second):
                    del self._pairs[key]
                    self._merge_pair(j, k, rest, combos)
                    return

    def _merge_pair(self, j: int, k: int, rest: Signature, combos: set[tuple[str, str]]) -> None:
        def at(vj: str, vk: str) -> Signature:
            return rest[:j] + (vj,) + rest[j + 1:k] + (vk,) + rest[k + 1:]
        for vk in sorted({c[1] for c in combos}):
            slot = (j, rest[:j], at(WILD, vk)[j + 1:])
            if slot not in self._variable:
                self._values.setdefault(slot, set()).update(c[0] for c in combos if c[1] == vk)
                self._merge_slot(slot, self._values[slot])
        slot = (k, at(WILD, WILD)[:k], rest[k + 1:])
        if slot not in self._variable:
            self._values.setdefault(slot, set()).update(c[1] for c in combos)
            self._merge_slot(slot, self._values[slot])

    def _merge_slot(self, slot: _Slot, values: set[str]) -> None:
        """Position `slot` is a parameter: its templates join one with ``<*>`` there."""
        self._variable.add(slot)
        del self._values[slot]
        j, before, after = slot
        self._positions.setdefault(len(before) + 1 + len(after), set()).add(j)
        general = before + (WILD,) + after
        signatures = [before + (v,) + after for v in values] + [general]
        numbers = {self.resolve(self._by_signature[s]) for s in signatures
                   if s in self._by_signature}  # (an evicted template's are gone)
        target = min(numbers)
        for number in sorted(numbers - {target}):
            self._join(number, target)
        group = self._groups[target]
        if general not in self._by_signature:
            self._by_signature[general] = target
            group.members.append(general)
        group.shape[j] = WILD
        self._count_words(general)  # the merged template may complete another position

    def _join(self, number: int, target: int) -> None:
        source, group = self._groups.pop(number), self._groups[target]
        self._used.pop(number, None)
        self._parent[number] = target
        group.count += source.count
        for signature in source.members:
            self._by_signature[signature] = target
        group.members.extend(source.members)
        _widen(group.shape, source.shape)


def _slots(signature: Signature) -> Iterator[_Slot]:
    """Positions a word could vary at: a constant token with another constant beside it
    in the line (a line of placeholders and one word keeps that word)."""
    for j, token in enumerate(signature):
        if token != WILD and not _KEY.fullmatch(token) and _slots_at(signature, j):
            yield j, signature[:j], signature[j + 1:]


def _slots_at(signature: Signature, j: int) -> bool:
    return any(t != WILD for i, t in enumerate(signature) if i != j)


def _widen(shape: list[str], tokens: list[str]) -> None:
    for j, token in enumerate(tokens):
        if shape[j] != token:
            shape[j] = WILD
