"""The default template miner: constant words must agree; a word becomes a parameter by count.

Drain joins a line to the most similar template of its length when enough tokens
agree, so two events that differ in one word (``VM Started`` / ``VM Stopped``,
``Failed to get next element`` / ``Failed to open package``) become one template
whatever the threshold, while a host name in the first token splits one event
across leaves of its tree. On the 13 labelled LogHub systems that cost Drain3
(defaults, no masking) a mean grouping accuracy of 0.70 (``benchmarks/loghub.py``).

Here a masked line (see `mask`) becomes a *signature*: its tokens, with every
token that holds a placeholder reduced to ``<*>`` (``port <NUM>`` and ``port
<HEX>`` alike; ``uid=<NUM>`` to ``uid=<*>``, keeping its key) and empty brackets
``()`` treated as an empty value. Lines with equal signatures are one template:
constant words never differ inside a template. A word becomes a parameter only by
statistics over templates (after the "same template, one position differs"
grouping that LogHub's corrected labels use, Khan et al. 2022): when templates
that are equal except at one position hold `vary_at` (default 4) or more distinct
words there, that position is a parameter for all of them and they merge (user
names in ``Invalid user admin from <IP>``). Event names that come in threes stay
apart; a fourth distinct word merges them (a trade-off measured in
``benchmarks/README.md``: 4 beat 3, 5 and 6 on the mean, and on 5 of the 13
systems every value does the same).

The miner is online: a line's template id is final when `add` returns it *or* is
later merged into an earlier template, which `resolve` follows.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

WILD = "<*>"
_PLACEHOLDER = re.compile(r"<[A-Z]+>")
_EMPTY = frozenset({"()", "[]", "{}", '""', "''"})
_KEY = re.compile(r"[A-Za-z_][\w.\-]*[=:]")
# "loss nan" is "loss 2.31" with a diverged value (masking keeps the word, so the
# rank-collapsed view still tells nan from inf).
_NON_FINITE = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity"})
_VALUE_EDGE = ",;:()[]'\""

Signature = tuple[str, ...]
_Slot = tuple[int, Signature, Signature]  # (position, tokens before it, tokens after it)


def signature_token(token: str) -> str:
    """A masked token as a signature compares it: placeholders, empty brackets and
    nan/inf reduce to ``<*>``, keeping a leading ``key=`` or ``key:``."""
    if token in _EMPTY or (len(token) <= 11 and token.lower().strip(_VALUE_EDGE) in _NON_FINITE):
        return WILD
    if "<" not in token or not _PLACEHOLDER.search(token):
        return token
    key = _KEY.match(token)
    if key and not _PLACEHOLDER.search(key.group()):
        return key.group() + WILD
    return WILD


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
        return tuple(signature_token(t) for t in tokens)

    def _generalize(self, signature: Signature) -> Signature:
        changed = True
        while changed:
            changed = False
            for slot in _slots(signature):
                j = slot[0]
                if slot in self._variable and signature[j] != WILD:
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

    def _merge_slot(self, slot: _Slot, values: set[str]) -> None:
        """Position `slot` is a parameter: its templates join one with ``<*>`` there."""
        self._variable.add(slot)
        del self._values[slot]
        j, before, after = slot
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
    constants = sum(t != WILD for t in signature)
    if constants < 2:
        return
    for j, token in enumerate(signature):
        if token != WILD:
            yield j, signature[:j], signature[j + 1:]


def _widen(shape: list[str], tokens: list[str]) -> None:
    for j, token in enumerate(tokens):
        if shape[j] != token:
            shape[j] = WILD
