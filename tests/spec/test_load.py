"""Design files: the packaged example loads; every bad input is one LabcoatError at file:line."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from labcoat.errors import LabcoatError
from labcoat.spec import Design, load_design, parse_design

GOOD = """\
name: demo
hypothesis:
  claim: warmup helps
  metric: exact_match
  direction: increase
command: "{python} train.py --warmup {warmup} --seed {seed}"
params:
  warmup: 0
arms:
  control:
    control: true
  warmup:
    params: {warmup: 60}
seeds: 3
"""


def _line(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based number of the line holding the `occurrence`-th match of `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[occurrence - 1]


def _edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def _error(tmp_path: Path, text: str) -> tuple[Path, str]:
    """Write `text` to a design file, load it, return (path, the one LabcoatError message)."""
    path = tmp_path / "design.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LabcoatError) as info:
        load_design(path)
    return path, str(info.value)


def test_packaged_example_loads() -> None:
    """src/labcoat/examples/warmup.yaml is shipped with the package and is valid."""
    resource = importlib.resources.files("labcoat") / "examples" / "warmup.yaml"
    with importlib.resources.as_file(resource) as path:
        design = load_design(path)
    assert design.name == "warmup-demo"
    assert design.control == "control"
    assert list(design.arms) == ["control", "warmup"]
    assert design.seeds == [0, 1, 2]
    assert design.hypothesis.source == "items"
    assert design.hypothesis.direction == "increase"
    assert design.arms["warmup"].params == {"warmup": 500}


def test_good_design_loads_with_defaults(tmp_path: Path) -> None:
    """The reference design is valid; omitted fields take their documented defaults."""
    path = tmp_path / "design.yaml"
    path.write_text(GOOD, encoding="utf-8")
    design = load_design(path)
    assert isinstance(design, Design)
    assert design.hypothesis.source == "scalar" and design.hypothesis.alpha == 0.05
    assert design.parallelism is None and design.description == ""


def test_parse_design_equals_load_design(tmp_path: Path) -> None:
    """Parsing the text gives the same Design as loading the file."""
    path = tmp_path / "design.yaml"
    path.write_text(GOOD, encoding="utf-8")
    assert parse_design(GOOD, "stored") == load_design(path)


def test_parse_design_names_the_given_source() -> None:
    """Errors from parse_design use the name passed in place of a path."""
    with pytest.raises(LabcoatError, match=r"^db:experiment-3:1: "):
        parse_design(GOOD.replace("name: demo", "name: my demo"), "db:experiment-3")


def test_misspelt_top_level_key_suggests_the_right_one(tmp_path: Path) -> None:
    """`hypotesis:` is reported at its line with "did you mean 'hypothesis'"."""
    text = _edit("hypothesis:", "hypotesis:")
    path, message = _error(tmp_path, text)
    line = _line(text, "hypotesis:")
    assert f"{path}:{line}: unknown key 'hypotesis'; did you mean 'hypothesis'?" in message


def test_misspelt_nested_key_suggests_the_right_one(tmp_path: Path) -> None:
    """`metirc:` inside hypothesis is reported at its line, suggesting 'metric'."""
    text = _edit("  metric:", "  metirc:")
    path, message = _error(tmp_path, text)
    line = _line(text, "metirc:")
    assert f"{path}:{line}: unknown key 'metirc'; did you mean 'metric'?" in message
    assert "Valid keys here: claim, metric" in message


def test_misspelt_arm_key_suggests_params(tmp_path: Path) -> None:
    """`parms:` inside an arm is reported at its line, suggesting 'params'."""
    text = _edit("    params: {warmup: 60}", "    parms: {warmup: 60}")
    path, message = _error(tmp_path, text)
    assert f"{path}:{_line(text, 'parms:')}: unknown key 'parms'; did you mean 'params'?" in message


def test_missing_command(tmp_path: Path) -> None:
    """No `command:`: reported at the top-level mapping (line 1) with what to write."""
    text = _edit('command: "{python} train.py --warmup {warmup} --seed {seed}"\n', "")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:1: missing required key 'command'")
    assert "program to run" in message


def test_missing_control_arm(tmp_path: Path) -> None:
    """No arm with `control: true`: reported at `arms:` with the fix."""
    text = _edit("    control: true\n", "    params: {}\n")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'arms:')}: exactly one arm must be the control")
    assert "found none" in message and "`control: true`" in message


def test_two_control_arms(tmp_path: Path) -> None:
    """Two control arms: reported at the second `control: true`, naming both arms."""
    text = _edit("    params: {warmup: 60}", "    control: true\n    params: {warmup: 60}")
    path, message = _error(tmp_path, text)
    line = _line(text, "control: true", occurrence=2)
    assert message.startswith(f"{path}:{line}: exactly one arm must be the control")
    assert "found 2 (control, warmup)" in message


def test_arm_overrides_undeclared_param(tmp_path: Path) -> None:
    """An arm setting `warmpu` (not under params:) is reported at its line with the fix."""
    text = _edit("{warmup: 60}", "{warmpu: 60}")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'warmpu')}: arm 'warmup' sets 'warmpu'")
    assert "known: warmup" in message and "declare it under `params:`" in message


def test_unknown_command_placeholder(tmp_path: Path) -> None:
    """`{foo}` in the command is reported at the command line, listing the valid names."""
    text = _edit("--seed {seed}", "--seed {seed} --x {foo}")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'command:')}: command uses {{foo}}")
    assert "add `foo` under `params:`" in message and "python" in message and "seed" in message


@pytest.mark.parametrize(
    ("seeds", "hint"),
    [
        ("three", "a count (3 means seeds 0, 1, 2) or a list of integer seeds"),
        ("0", "seeds must be at least 1"),
        ("-2", "seeds must be at least 1"),
        ("[1, 2, 1]", "repeat a seed; list each seed once"),
        ("[]", "a count (3 means seeds 0, 1, 2)"),
    ],
)
def test_bad_seeds(tmp_path: Path, seeds: str, hint: str) -> None:
    """Wrong type, zero/negative count, repeats or an empty list: reported at `seeds:`."""
    text = _edit("seeds: 3", f"seeds: {seeds}")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'seeds:')}: seeds: ")
    assert hint in message


def test_experiment_name_with_space(tmp_path: Path) -> None:
    """A name with a space is reported at `name:` with the allowed characters."""
    text = _edit("name: demo", "name: my demo")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:1: name: ")
    assert "'my demo'" in message and "letters, digits, '.', '_', '-'" in message


def test_invalid_direction(tmp_path: Path) -> None:
    """`direction: up` is reported at its line, listing increase and decrease."""
    text = _edit("direction: increase", "direction: up")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'direction:')}: hypothesis.direction")
    assert "'increase' or 'decrease'" in message and "'up'" in message


def test_single_problem_has_no_summary_header(tmp_path: Path) -> None:
    """One problem gives one line; two problems are gathered in one error with a count."""
    _, one = _error(tmp_path, _edit("direction: increase", "direction: up"))
    assert "\n" not in one
    _, two = _error(tmp_path, _edit("direction: increase", "direction: up").replace(
        "name: demo", "name: my demo"))
    assert "the design has 2 problem(s)" in two


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    """A YAML syntax error is a LabcoatError at the offending line:column."""
    text = _edit("  claim: warmup helps", "  claim: warmup: helps")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'claim:')}:")
    assert "YAML syntax error" in message


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("{warmup: 60}", "{warmup: 60", "{warmup: 60"),
        ("seeds: 3", "seeds: [0, 1", "seeds:"),
    ],
    ids=["unclosed-brace", "unclosed-bracket-on-last-line"],
)
def test_unclosed_bracket_names_its_line(tmp_path: Path, old: str, new: str, needle: str) -> None:
    """An unclosed `{` or `[` is reported at the line where it opens."""
    text = _edit(old, new)
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, needle)}:")


def test_command_with_unbalanced_quote_is_rejected_at_load(tmp_path: Path) -> None:
    """`--name 'x` in the command is a design error at the command line, caught when loading."""
    text = _edit("--seed {seed}", "--seed {seed} --name 'x")
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, 'command:')}:")


@pytest.mark.parametrize("text", ["- name: demo\n- seeds: 3\n", "", "just a string\n"])
def test_design_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    """A YAML list, an empty file or a bare scalar is rejected, naming the file."""
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}: a design file is a YAML mapping")
    assert "labcoat init" in message


@pytest.mark.parametrize(("old", "new", "key", "first", "again"), [
    ("seeds: 3", "seeds: 3\nseeds: 5", "seeds", "seeds: 3", "seeds: 5"),
    ("    control: true", "    control: true\n    control: false", "control", "control: true",
     "control: false"),
])
def test_a_key_given_twice_is_an_error_not_the_last_one(home: Path, tmp_path: Path, old: str,
                                                         new: str, key: str, first: str,
                                                         again: str) -> None:
    """`seeds:` twice would silently keep the last (issue 22, point 6): lint and run say
    where, in one line."""
    from helpers import cli

    text = _edit(old, new)
    path, message = _error(tmp_path, text)
    assert message.startswith(f"{path}:{_line(text, again)}: '{key}' appears twice (first at line "
                              f"{_line(text, first)})")
    for verb in ("lint", "run"):
        done = cli(verb, str(path))
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert f"'{key}' appears twice" in done.stdout + done.stderr


def test_missing_file(tmp_path: Path) -> None:
    """A path that does not exist is a LabcoatError naming it, not FileNotFoundError."""
    path = tmp_path / "nope.yaml"
    with pytest.raises(LabcoatError) as info:
        load_design(path)
    assert str(info.value).startswith(f"{path}: no such design file")


def test_hypothesis_bounds_must_be_ordered(tmp_path: Path) -> None:
    text = _edit("  direction: increase\n", "  direction: increase\n  bounds: [1, 0]\n")
    path, message = _error(tmp_path, text)
    assert f"{path}:{_line(text, 'bounds')}" in message
    assert "low < high" in message
    good = _edit("  direction: increase\n", "  direction: increase\n  bounds: [0, 1]\n")
    assert parse_design(good).hypothesis.bounds == (0.0, 1.0)
