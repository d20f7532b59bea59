"""What every tracker reader returns: runs with the keys they can be mapped by and their
metric series, one value per (metric, step)."""

from __future__ import annotations

from dataclasses import dataclass, field

Series = dict[int, tuple[float, float | None]]  # step -> (value, unix time or None)


@dataclass
class ExternalRun:
    """One run another tool recorded.

    keys: what `--arm-by` / `--seed-by` / `--where` may name, qualified by where the tool
    keeps them (`params.lr`, `tags.team`, `config.optimizer.name`, `path.1`, ...), values as
    text. metrics: name -> step -> (value, time); a step logged twice keeps the later value
    and counts in `repeated[name]` (the import says so).
    """

    tool: str
    id: str
    path: str
    keys: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, Series] = field(default_factory=dict)
    repeated: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, step: int, value: float, time: float | None) -> None:
        """Record a point; a later point at a logged step replaces the earlier one."""
        series = self.metrics.get(name)
        if series is None:
            series = self.metrics[name] = {}
        elif step in series:
            self.repeated[name] = self.repeated.get(name, 0) + 1
        series[step] = (value, time)

    def points(self) -> list[tuple[str, int, float, float | None]]:
        return [(name, step, value, time) for name, series in self.metrics.items()
                for step, (value, time) in series.items()]

    def count(self) -> int:
        return sum(len(s) for s in self.metrics.values())


def flat(prefix: str, value: object, out: dict[str, str]) -> None:
    """Nested config dicts as dotted keys: {"opt": {"lr": 0.1}} -> config.opt.lr = "0.1"."""
    if isinstance(value, dict):
        for k, v in value.items():
            flat(f"{prefix}.{k}", v, out)
    else:
        out[prefix] = text(value)


def text(value: object) -> str:
    """A key's value as text (JSON's words for booleans and null)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)
