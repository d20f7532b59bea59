"""Log templates: lines with their variable parts replaced, mined after generic masking.

A template is a line with its variable parts replaced, e.g. ``step <NUM>/<NUM>
loss <NUM> lr <NUM> (<DUR>)``; lines of one template are "the same message".
Two miners, chosen by `TemplateConfig.method`:

- ``"words"`` (default, `_words`): lines whose masked tokens agree except at
  placeholders are one template, and a word position becomes a parameter once it
  takes `vary_at` distinct words among otherwise equal templates. Constant words
  never differ inside a template.
- ``"drain"``: IBM's Drain3 library (He et al. 2017, ICWS), in memory with no
  persistence (its state files are jsonpickle: never loaded here). It routes a
  line down a tree keyed by its token count and first `depth` - 2 tokens and joins
  the most similar template there if at least `sim_th` of the tokens agree.

On the 13 labelled LogHub systems (``benchmarks/loghub.py``, grouping accuracy, Zhu
et al. 2019) the default scores a mean 0.96 where Drain3's defaults score 0.70 and
Drain3 tuned per dataset 0.84; on this project's generated logs 0.96 where
``method="drain"`` scores 0.95 (`benchmarks/README.md`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._masking import mask, strip_header
from labcoat.diagnose._words import WordMiner, tokens_of

# Drain: chosen on benchmarks/diagnose.py's generated logs (depth 5 wins at every sim_th in
# 0.2-0.5; 0.4 is also Drain3's own default). See benchmarks/README.md.
DEFAULT_SIM_TH = 0.4
DEFAULT_DEPTH = 5
# Words: 4 distinct words make a parameter (benchmarks/loghub.py: 4-6 tie on LogHub, 4 is best
# on the generated training logs of benchmarks/diagnose.py).
DEFAULT_VARY_AT = 4
METHODS = ("words", "drain")


@dataclass(kw_only=True, frozen=True)
class TemplateConfig:
    """Settings of the template miner.

    method: ``"words"`` or ``"drain"`` (Drain3); see the module doc. Default: words,
        or drain when a Drain setting (sim_th, depth, max_children) is given, as
        code written before the words miner expects.
    vary_at: (words) distinct words at one position of otherwise equal templates that
        make the position a parameter and merge them. >= 2.
    sim_th: (drain) fraction of a line's tokens that must equal a template's
        (placeholders excluded) for the line to join it; higher splits more. In (0, 1].
    depth: (drain) depth of Drain's parse tree (root and token-count levels included):
        a line is compared only with templates sharing its first ``depth - 2`` tokens.
    max_children: (drain) children per tree node before further tokens go to a
        wildcard child.
    max_templates: keep at most this many templates, least recently used evicted first
        (None: unlimited).
    masking: apply labcoat's generic masking (`mask`) first.
    strip_headers: also drop a leading logging header (timestamp, level, logger name;
        see `strip_header`) from what is compared; needs `masking`.
    """

    method: str | None = None
    vary_at: int = DEFAULT_VARY_AT
    sim_th: float = DEFAULT_SIM_TH
    depth: int = DEFAULT_DEPTH
    max_children: int = 100
    max_templates: int | None = None
    masking: bool = True
    strip_headers: bool = True

    def __post_init__(self) -> None:
        drain_settings = [f"{name}={getattr(self, name)!r}" for name, default in (
            ("sim_th", DEFAULT_SIM_TH), ("depth", DEFAULT_DEPTH), ("max_children", 100))
            if getattr(self, name) != default]
        if self.method is None:
            object.__setattr__(self, "method", "drain" if drain_settings else "words")
        elif self.method == "words" and drain_settings:
            raise DiagnoseError(f"{', '.join(drain_settings)} set Drain's parse tree, which "
                                "method='words' does not use; pass method='drain' or drop them")
        if self.method not in METHODS:
            raise DiagnoseError(f"method={self.method!r} must be one of {', '.join(METHODS)}")
        if not isinstance(self.vary_at, int) or isinstance(self.vary_at, bool) \
                or self.vary_at < 2:
            raise DiagnoseError(f"vary_at={self.vary_at!r} must be an integer >= 2 "
                                f"(default {DEFAULT_VARY_AT})")
        if not isinstance(self.sim_th, int | float) or not (
            math.isfinite(self.sim_th) and 0 < self.sim_th <= 1
        ):
            raise DiagnoseError(f"sim_th={self.sim_th!r} must be a number in (0, 1] "
                                f"(default {DEFAULT_SIM_TH})")
        if not isinstance(self.depth, int) or self.depth < 3:
            raise DiagnoseError(f"depth={self.depth!r} must be an integer >= 3 "
                                f"(default {DEFAULT_DEPTH})")
        if not isinstance(self.max_children, int) or self.max_children < 2:
            raise DiagnoseError(f"max_children={self.max_children!r} must be an integer >= 2")
        if self.strip_headers and not self.masking:
            raise DiagnoseError("strip_headers=True needs masking=True (headers are found "
                                "among masked tokens); set both or neither")
        if self.max_templates is not None and (
            not isinstance(self.max_templates, int) or self.max_templates < 1
        ):
            raise DiagnoseError(f"max_templates={self.max_templates!r} must be a positive "
                                "integer or None")


class Templates:
    """An incremental template miner: `add` a line, get its template id.

    Ids are ``"T1"``, ``"T2"``, ... in order of first appearance: the same lines added
    in the same order give the same ids. An id returned by `add` stays valid: the
    words miner may later merge its template into an earlier one (a word position
    turned out to be a parameter), and `resolve` (which `template`, `count` and
    `mine_templates` apply) gives the id it now has. Identical masked lines always
    share an id.

        >>> t = Templates()
        >>> t.add("step 1 loss 2.5") == t.add("step 2 loss 2.4")
        True
    """

    def __init__(self, config: TemplateConfig | None = None) -> None:
        if config is not None and not isinstance(config, TemplateConfig):
            raise DiagnoseError(f"config must be a TemplateConfig, not {type(config).__name__}")
        self.config = config or TemplateConfig()
        self._engine: _Drain | _Words = (
            _Drain(self.config) if self.config.method == "drain" else _Words(self.config))
        self._by_masked: dict[str, str] = {}

    def masked(self, line: str) -> str:
        """`line` masked (unless ``config.masking`` is off), header included: lines that
        mask alike are "the same line" (see `collapse_ranks`)."""
        return mask(line) if self.config.masking else " ".join(line.split())

    def content(self, line: str) -> str:
        """What the miner compares: the masked line without its logging header."""
        masked = self.masked(line)
        return strip_header(masked) if self.config.strip_headers else masked

    def add(self, line: str) -> str:
        """Learn from `line` and return its template id."""
        content = self.content(_checked(line))
        tid = self._by_masked.get(content)
        if tid is not None and not self._engine.alive(tid):
            tid = None  # evicted (least recently used): learnt afresh
        if tid is None:
            tid = self._by_masked[content] = self._engine.learn(content)
        self._engine.seen(tid)
        return self.resolve(tid)

    def match(self, line: str) -> str | None:
        """The id of an existing template that covers `line` exactly, without learning
        (None if none does)."""
        content = self.content(_checked(line))
        tid = self._by_masked.get(content)
        if tid is not None and self._engine.alive(tid):
            return self.resolve(tid)
        found = self._engine.match(content)
        return None if found is None else self.resolve(found)

    def resolve(self, tid: str) -> str:
        """The id template `tid` has now (itself unless the words miner merged it)."""
        return self._engine.resolve(tid)

    def template(self, tid: str) -> str:
        """The current text of template `tid` (``<*>`` marks tokens that vary)."""
        return self._engine.text(self._known(tid))

    def count(self, tid: str) -> int:
        """How many added lines have template `tid`."""
        return self._engine.count(self._known(tid))

    def ids(self) -> list[str]:
        """Every template id, in order of first appearance."""
        return self._engine.ids()

    def __len__(self) -> int:
        return len(self._engine.ids())

    def _known(self, tid: str) -> str:
        number = tid[1:] if isinstance(tid, str) and tid.startswith("T") else ""
        if not number.isdigit() or not self._engine.alive(tid):
            raise DiagnoseError(f"no template {tid!r} in this miner (ids look like 'T1')")
        return self.resolve(tid)


class _Words:
    """`Templates`' engine for ``method="words"`` (`WordMiner`)."""

    def __init__(self, config: TemplateConfig) -> None:
        self._miner = WordMiner(config.vary_at, config.max_templates)

    def learn(self, content: str) -> str:
        return f"T{self._miner.add(tokens_of(content))}"

    def seen(self, tid: str) -> None:
        self._miner.seen(int(tid[1:]))

    def match(self, content: str) -> str | None:
        number = self._miner.match(tokens_of(content))
        return None if number is None else f"T{number}"

    def alive(self, tid: str) -> bool:
        return self._miner.group(int(tid[1:])) is not None

    def resolve(self, tid: str) -> str:
        number = tid[1:] if isinstance(tid, str) and tid.startswith("T") else ""
        return f"T{self._miner.resolve(int(number))}" if number.isdigit() else tid

    def text(self, tid: str) -> str:
        return " ".join(self._miner.group(int(tid[1:])).shape)

    def count(self, tid: str) -> int:
        return self._miner.group(int(tid[1:])).count

    def ids(self) -> list[str]:
        return [f"T{n}" for n in self._miner.numbers()]


def mine_templates(lines: Sequence[str], *, config: TemplateConfig | None = None) -> list[str]:
    """One template id per line (``"T1"``, ``"T2"``, ...), mined together.

    lines: the log lines, in order (a list, not one string). The same input always
    gives the same ids; each is the template's id after every line was learnt (a
    later line can show that an earlier word was a parameter). For the template
    texts, use a `Templates` miner directly.
    """
    if isinstance(lines, str | bytes):
        raise DiagnoseError("mine_templates() takes a sequence of lines, not one string; "
                            "use text.splitlines()")
    miner = Templates(config)
    ids = []
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise DiagnoseError(f"line {i} is {type(line).__name__}, not text (str)")
        ids.append(miner.add(line))
    return [miner.resolve(tid) for tid in ids]


class _Drain:
    """`Templates`' engine for ``method="drain"`` (Drain3)."""

    def __init__(self, config: TemplateConfig) -> None:
        self._miner = _miner(config)
        self._counts: dict[str, int] = {}

    def learn(self, content: str) -> str:
        return f"T{self._miner.add_log_message(content)['cluster_id']}"

    def seen(self, tid: str) -> None:
        self._counts[tid] = self._counts.get(tid, 0) + 1

    def match(self, content: str) -> str | None:
        cluster = self._miner.match(content, full_search_strategy="fallback")
        return None if cluster is None else f"T{cluster.cluster_id}"

    def alive(self, tid: str) -> bool:
        number = tid[1:] if isinstance(tid, str) else ""
        return number.isdigit() and int(number) in self._miner.drain.id_to_cluster

    def resolve(self, tid: str) -> str:
        return tid  # Drain only generalizes a template's text, never merges two

    def text(self, tid: str) -> str:
        return self._miner.drain.id_to_cluster[int(tid[1:])].get_template()

    def count(self, tid: str) -> int:
        return self._counts.get(tid, 0)

    def ids(self) -> list[str]:
        return [f"T{c.cluster_id}" for c in sorted(self._miner.drain.clusters,
                                                   key=lambda c: c.cluster_id)]


def _checked(line: object) -> str:
    if not isinstance(line, str):
        raise DiagnoseError(f"a log line must be text (str), not {type(line).__name__}")
    return line


def _miner(config: TemplateConfig) -> Any:
    # Imported here: drain3 (and its jsonpickle/cachetools) load only when templates are
    # mined, not when labcoat.diagnose is imported (e.g. by the runner for noise flags).
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    settings = TemplateMinerConfig()  # never TemplateMiner(config=None): it reads drain3.ini
    settings.drain_sim_th = float(config.sim_th)
    settings.drain_depth = config.depth
    settings.drain_max_children = config.max_children
    settings.drain_max_clusters = config.max_templates
    settings.masking_instructions = []  # labcoat masks before Drain (see _masking)
    settings.parametrize_numeric_tokens = True
    settings.profiling_enabled = False
    return TemplateMiner(persistence_handler=None, config=settings)
