"""YAML loading that remembers where every key came from (file:line for errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from labcoat.errors import LabcoatError

Path_ = tuple[str | int, ...]


def load_yaml(path: Path) -> tuple[Any, dict[Path_, int]]:
    """Parse `path`; return (data, lines) where lines maps a key path to its 1-based line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LabcoatError(
            f"{path}: no such design file; `labcoat init DIR` writes an example"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise LabcoatError(f"{path}: cannot read design file ({e})") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, name: str) -> tuple[Any, dict[Path_, int]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        raise LabcoatError(_syntax_message(e, name)) from None
    except yaml.YAMLError as e:
        raise LabcoatError(f"{name}: YAML error: {e}") from None
    lines: dict[Path_, int] = {}
    if node is not None:
        try:
            _collect_lines(node, (), lines)
        except _DuplicateKey as e:
            raise LabcoatError(f"{name}:{e.line}: {e}") from None
    return data, lines


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(f"{key!r} appears twice (first at line {first}); YAML would keep "
                         "the last one silently: keep the one you mean and delete the other")
        self.line = line


def _syntax_message(e: yaml.MarkedYAMLError, name: str) -> str:
    """Name the line where the broken construct starts (an unclosed bracket's line),
    and where the parser gave up."""
    start, found = e.context_mark, e.problem_mark
    mark = start or found
    where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
    detail = f"{e.context}: " if e.context else ""
    detail += e.problem or ""
    if start and found and found.line != start.line:
        detail += f" (at line {found.line + 1})"
    return f"{where}: YAML syntax error: {detail}; check brackets, quotes and indentation"


def _collect_lines(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":  # "<<" merges: it may repeat
                raise _DuplicateKey(key, line, seen[key])
            seen[key] = line
            lines[path + (key,)] = line
            _collect_lines(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _collect_lines(item, path + (i,), lines)


def line_of(lines: dict[Path_, int], path: Path_) -> int | None:
    """The line of `path`, or of its nearest ancestor that appears in the file."""
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]
