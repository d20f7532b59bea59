"""MkDocs hook: pages generated from their one definition, at build time.

- ``<!-- generated: cli-reference -->`` becomes every command of the Typer app
  ``labcoat.cli:app``: usage, help, arguments and options, walked from
  ``typer.main.get_command(app)`` (sub-groups such as ``labcoat scaling`` too).
- ``<!-- generated: guard-rules -->`` becomes the guard's rule table (rule, family,
  severity, what it catches), from the rules each check declares
  (``labcoat.torch.guard.guard_rule_table()``): a rule cannot go undocumented.
- ``<!-- generated: environment -->`` becomes the table of environment
  variables in the docstring of ``labcoat.environment``; a ``LABCOAT_*``
  constant of that module missing from the docstring fails the build.

Nothing is written to the repository, so neither page can go stale.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any

from mkdocs.exceptions import PluginError

CLI_MARK = "<!-- generated: cli-reference -->"
ENV_MARK = "<!-- generated: environment -->"
RULES_MARK = "<!-- generated: guard-rules -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if ENV_MARK in markdown:
        markdown = markdown.replace(ENV_MARK, environment_table())
    if RULES_MARK in markdown:
        markdown = markdown.replace(RULES_MARK, guard_rules_table())
    return markdown


# --- the CLI ------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text for one markdown table cell: one line, pipes and angle brackets escaped."""
    return html.escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def _walk(command: Any, ctx: Any, path: list[str]) -> list[tuple[list[str], Any, Any]]:
    found = [(path, command, ctx)]
    for name in sorted(getattr(command, "commands", {}) or {}):
        sub = command.commands[name]
        if getattr(sub, "hidden", False):
            continue
        found += _walk(sub, type(ctx)(sub, info_name=name, parent=ctx), [*path, name])
    return found


def cli_reference() -> str:
    import typer

    cli = importlib.import_module("labcoat.cli")
    root = typer.main.get_command(cli.app)
    out: list[str] = []
    for path, command, ctx in _walk(root, typer.Context(root, info_name="labcoat"), ["labcoat"]):
        title = " ".join(path)
        level = "##" if len(path) <= 2 else "###"
        out += [f"{level} `{title}`", ""]
        out += ["```text", command.get_usage(ctx).strip(), "```", ""]
        if command.help:
            # Typer/click help: paragraphs; \b marks a block click keeps unwrapped.
            text = inspect.cleandoc(command.help).replace("\b\n", "")
            out += [html.escape(text, quote=False), ""]
        subs = sorted(getattr(command, "commands", {}) or {})
        if subs:
            out += ["| command | what it does |", "| --- | --- |"]
            for name in subs:
                sub = command.commands[name]
                short = sub.get_short_help_str(limit=300) if hasattr(sub, "get_short_help_str") \
                    else (sub.help or "").split("\n")[0]
                out.append(f"| `{title} {name}` | {_cell(short)} |")
            out.append("")
        rows = []
        for param in command.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None or param.name == "help":
                continue
            names, help_text = record
            kind = param.param_type_name
            rows.append(f"| {kind} | `{_cell(names).replace('`', '')}` | {_cell(help_text)} |")
        if rows:
            out += ["| | name | help |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(out)


# --- environment variables -------------------------------------------------------------

_ENTRY = re.compile(r"^(?P<names>[A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*)\s+\((?P<who>[\w-]+)\)\s+"
                    r"(?P<text>.*)$")


def environment_entries() -> list[tuple[str, str, str]]:
    """(names, who sets it, description) for every variable in labcoat.environment's docstring."""
    module = importlib.import_module("labcoat.environment")
    entries: list[list[str]] = []
    for line in (module.__doc__ or "").splitlines():
        match = _ENTRY.match(line)
        if match:
            entries.append([match["names"], match["who"], match["text"].strip()])
        elif entries and line.startswith(" ") and line.strip():
            entries[-1][2] += " " + line.strip()
        elif entries and not line.strip():
            break  # the table ends at the first blank line after it
    documented = {name for names, _, _ in entries for name in names.split(", ")}
    constants = {value for name, value in vars(module).items()
                 if name.isupper() and isinstance(value, str) and value.startswith("LABCOAT_")}
    missing = sorted(constants - documented)
    if not entries or missing:
        raise PluginError(
            "labcoat/environment.py: its docstring must list every variable as "
            f"'NAME  (who)  description'; not documented there: {', '.join(missing) or 'any'}")
    return [(names, who, text) for names, who, text in entries]


def environment_table() -> str:
    rows = ["| variable | set by | what it does |", "| --- | --- | --- |"]
    for names, who, text in environment_entries():
        code = ", ".join(f"`{name}`" for name in names.split(", "))
        rows.append(f"| {code} | {who} | {_cell(text).replace('``', '`')} |")
    return "\n".join(rows) + "\n"


# --- guard rules --------------------------------------------------------------------------


def guard_rules_table() -> str:
    guard = importlib.import_module("labcoat.torch.guard")
    rows = ["| rule | family | severity | catches |", "| --- | --- | --- | --- |"]
    for r in guard.guard_rule_table():
        catches = " ".join(r["catches"].split()).replace("|", "\\|")  # backticks stay code
        rows.append(f"| `{r['rule']}` | `{r['family']}` | {r['severity']} | {catches} |")
    return "\n".join(rows) + "\n"
