"""Log templates: Drain3's fixed-depth parse tree on generically masked lines.

A template is a line with its variable parts replaced, e.g. ``step <NUM>/<NUM>
loss <NUM> lr <NUM> (<DUR>)``; lines of one template are "the same message".
Drain (He et al. 2017, ICWS) routes a tokenized line down a tree keyed by its
token count and first tokens (`depth` - 2 of them) and joins the most similar
template in that leaf if at least `sim_th` of the tokens agree; otherwise it
starts a new template. The implementation is IBM's Drain3 library, in memory,
with no persistence (Drain3's state files are jsonpickle: never loaded here).

Defaults (`sim_th`, `depth`) were chosen once, for all log sources, by grouping
accuracy (Zhu et al. 2019) on the generated benchmark in `benchmarks/diagnose.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labcoat.diagnose._errors import DiagnoseError
from labcoat.diagnose._masking import mask, strip_header

# Chosen on benchmarks/diagnose.py: grid sim_th 0.2-0.8 x depth 3-7, mean grouping accuracy
# over five generated source styles, message content and raw lines alike. Depth 5 wins at
# every sim_th in 0.2-0.5 (a plateau; 0.6 and up splits templates with word parameters):
# 0.4, mid-plateau, is also Drain3's own default. See benchmarks/README.md.
DEFAULT_SIM_TH = 0.4
DEFAULT_DEPTH = 5


@dataclass(kw_only=True, frozen=True)
class TemplateConfig:
    """Settings of the template miner.

    sim_th: fraction of a line's tokens that must equal a template's (placeholders
        excluded) for the line to join it; higher splits more. In (0, 1].
    depth: depth of Drain's parse tree (root and token-count levels included): a line
        is compared only with templates sharing its first ``depth - 2`` tokens. >= 3.
    max_children: children per tree node before further tokens go to a wildcard child.
    max_templates: keep at most this many templates, least recently used evicted first
        (None: unlimited).
    masking: apply labcoat's generic masking (`mask`) before Drain.
    strip_headers: also drop a leading logging header (timestamp, level, logger name;
        see `strip_header`) from what Drain compares; needs `masking`.
    """

    sim_th: float = DEFAULT_SIM_TH
    depth: int = DEFAULT_DEPTH
    max_children: int = 100
    max_templates: int | None = None
    masking: bool = True
    strip_headers: bool = True

    def __post_init__(self) -> None:
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
    in the same order give the same ids. A line never changes template once added
    (Drain only generalizes a template's text), so an id returned by `add` stays
    valid; `template(id)` returns the template's current text. Identical masked
    lines always share an id (a cache in front of Drain; Drain itself could route a
    repeated line to a later, more general template).

        >>> t = Templates()
        >>> t.add("step 1 loss 2.5") == t.add("step 2 loss 2.4")
        True
    """

    def __init__(self, config: TemplateConfig | None = None) -> None:
        if config is not None and not isinstance(config, TemplateConfig):
            raise DiagnoseError(f"config must be a TemplateConfig, not {type(config).__name__}")
        self.config = config or TemplateConfig()
        self._miner = _miner(self.config)
        self._by_masked: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def masked(self, line: str) -> str:
        """`line` masked (unless ``config.masking`` is off), header included: lines that
        mask alike are "the same line" (see `collapse_ranks`)."""
        return mask(line) if self.config.masking else " ".join(line.split())

    def content(self, line: str) -> str:
        """What Drain compares: the masked line without its logging header."""
        masked = self.masked(line)
        return strip_header(masked) if self.config.strip_headers else masked

    def add(self, line: str) -> str:
        """Learn from `line` and return its template id."""
        if not isinstance(line, str):
            raise DiagnoseError(f"a log line must be text (str), not {type(line).__name__}")
        masked = self.content(line)
        tid = self._by_masked.get(masked)
        if tid is not None and self.config.max_templates is not None and (
            int(tid[1:]) not in self._miner.drain.id_to_cluster
        ):
            tid = None  # evicted (least recently used): Drain starts it afresh
        if tid is None:
            cluster_id = self._miner.add_log_message(masked)["cluster_id"]
            tid = f"T{cluster_id}"
            self._by_masked[masked] = tid
        self._counts[tid] = self._counts.get(tid, 0) + 1
        return tid

    def match(self, line: str) -> str | None:
        """The id of an existing template that covers `line` exactly, without learning
        (None if none does)."""
        if not isinstance(line, str):
            raise DiagnoseError(f"a log line must be text (str), not {type(line).__name__}")
        masked = self.content(line)
        tid = self._by_masked.get(masked)
        if tid is not None:
            return tid
        cluster = self._miner.match(masked, full_search_strategy="fallback")
        return None if cluster is None else f"T{cluster.cluster_id}"

    def template(self, tid: str) -> str:
        """The current text of template `tid` (Drain's ``<*>`` marks generalized tokens)."""
        cluster = self._cluster(tid)
        return cluster.get_template()

    def count(self, tid: str) -> int:
        """How many added lines have template `tid`."""
        self._cluster(tid)
        return self._counts.get(tid, 0)

    def ids(self) -> list[str]:
        """Every template id, in order of first appearance."""
        return [f"T{c.cluster_id}" for c in sorted(self._miner.drain.clusters,
                                                   key=lambda c: c.cluster_id)]

    def __len__(self) -> int:
        return len(self._miner.drain.clusters)

    def _cluster(self, tid: str) -> Any:
        number = tid[1:] if isinstance(tid, str) and tid.startswith("T") else ""
        cluster = self._miner.drain.id_to_cluster.get(int(number)) if number.isdigit() else None
        if cluster is None:
            raise DiagnoseError(f"no template {tid!r} in this miner (ids look like 'T1')")
        return cluster


def mine_templates(lines: Sequence[str], *, config: TemplateConfig | None = None) -> list[str]:
    """One template id per line (``"T1"``, ``"T2"``, ...), mined together with Drain3.

    lines: the log lines, in order (a list, not one string). The same input always
    gives the same ids. For the template texts, use a `Templates` miner directly.
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
    return ids


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
