"""Expanding designs into trials, the design hash, and shell-free command rendering."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import subprocess
import sys
from pathlib import Path

import pytest

from labcoat.spec import (
    Design,
    design_hash,
    expand,
    load_design,
    parse_design,
    render_command,
)

GOOD = """\
name: demo
hypothesis:
  claim: warmup helps
  metric: exact_match
  direction: increase
command: "{python} train.py --warmup {warmup} --lr {lr} --seed {seed}"
params:
  warmup: 0
  lr: 0.003
arms:
  control:
    control: true
  warmup:
    params: {warmup: 60}
seeds: 3
"""

# GOOD with a comment, blank lines, other indentation, flow style and keys in another order.
REFORMATTED = """\
# the same experiment, written differently
seeds: 3
arms:
    control: {control: true}   # the baseline

    warmup:
        params:
            warmup: 60
params: {lr: 0.003, warmup: 0}
command: "{python} train.py --warmup {warmup} --lr {lr} --seed {seed}"
hypothesis: {direction: increase, metric: exact_match, claim: warmup helps}
name: demo
"""


def _example_design() -> Design:
    resource = importlib.resources.files("labcoat") / "examples" / "warmup.yaml"
    with importlib.resources.as_file(resource) as path:
        return load_design(path)


def test_packaged_example_expands_arms_times_seeds() -> None:
    """warmup.yaml: 2 arms x 3 seeds = 6 trials, control first, keys like control-s0."""
    trials = expand(_example_design(), python="py")
    assert [t.key for t in trials] == [
        "control-s0", "control-s1", "control-s2", "warmup-s0", "warmup-s1", "warmup-s2",
    ]
    assert [(t.arm, t.seed) for t in trials[:2]] == [("control", 0), ("control", 1)]
    assert trials[4].params == {"steps": 3000, "lr": 0.02, "warmup": 500, "seed": 1}
    assert trials[4].command == [
        "py", "-m", "labcoat.workloads.tinylm",
        "--steps", "3000", "--lr", "0.02", "--warmup", "500", "--seed", "1",
        "--eval-every", "300", "--eval-items", "100", "--eval-budget", "0.05",
    ]


def test_control_arm_first_even_when_listed_last() -> None:
    """The control arm's trials come first; the other arms keep their file order."""
    text = GOOD.replace(
        "arms:\n  control:\n    control: true\n  warmup:\n    params: {warmup: 60}\n",
        "arms:\n  b: {params: {warmup: 1}}\n  a: {params: {warmup: 2}}\n  base: {control: true}\n",
    )
    arms = [t.arm for t in expand(parse_design(text), python="py")]
    assert arms == ["base"] * 3 + ["b"] * 3 + ["a"] * 3


def test_explicit_seed_list_is_used_in_order() -> None:
    """`seeds: [7, 3]` gives keys control-s7, control-s3 and --seed 7, --seed 3."""
    trials = expand(parse_design(GOOD.replace("seeds: 3", "seeds: [7, 3]")), python="py")
    assert [t.key for t in trials] == ["control-s7", "control-s3", "warmup-s7", "warmup-s3"]
    assert trials[1].command[-2:] == ["--seed", "3"]


def test_seed_count_equals_seed_list() -> None:
    """`seeds: 3` is the same design (and hash) as `seeds: [0, 1, 2]`."""
    counted = parse_design(GOOD)
    listed = parse_design(GOOD.replace("seeds: 3", "seeds: [0, 1, 2]"))
    assert counted.seeds == [0, 1, 2]
    assert counted == listed
    assert design_hash(counted) == design_hash(listed)
    assert expand(counted, python="py") == expand(listed, python="py")


def test_arm_params_override_defaults() -> None:
    """Trial params are the design params, then the arm's overrides, then the seed."""
    trials = expand(parse_design(GOOD), python="py")
    assert trials[0].params == {"warmup": 0, "lr": 0.003, "seed": 0}
    assert trials[3].params == {"warmup": 60, "lr": 0.003, "seed": 0}


def test_expand_is_deterministic() -> None:
    """The same design expands to the same trials every time."""
    assert expand(parse_design(GOOD), python="py") == expand(parse_design(GOOD), python="py")


def test_python_placeholder_comes_from_argument_or_this_interpreter() -> None:
    """{python} is the `python=` argument (kept whole even with spaces), else sys.executable."""
    design = parse_design(GOOD)
    assert expand(design, python="/opt/my env/bin/python")[0].command[0] == "/opt/my env/bin/python"
    assert expand(design)[0].command[0] == sys.executable


def test_builtin_placeholders_are_filled() -> None:
    """{arm}, {trial} and {experiment} are filled per trial."""
    text = GOOD.replace("--seed {seed}", "--seed {seed} --tag {experiment}/{arm}/{trial}")
    trial = expand(parse_design(text), python="py")[4]
    assert trial.command[-1] == "demo/warmup/warmup-s1"


def test_design_hash_ignores_comments_key_order_and_whitespace() -> None:
    """Two spellings of the same design have the same hash."""
    assert parse_design(GOOD) == parse_design(REFORMATTED)
    assert design_hash(parse_design(GOOD)) == design_hash(parse_design(REFORMATTED))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  lr: 0.003", "  lr: 0.001"),
        ("{warmup: 60}", "{warmup: 61}"),
        ("seeds: 3", "seeds: 4"),
        ("claim: warmup helps", "claim: warmup hurts"),
    ],
)
def test_design_hash_changes_with_content(old: str, new: str) -> None:
    """Changing a param, an arm override, the seeds or the claim changes the hash."""
    assert design_hash(parse_design(GOOD)) != design_hash(parse_design(GOOD.replace(old, new)))


def test_design_hash_is_a_sha256_hex_digest() -> None:
    """The hash is 64 lowercase hex characters and stable across calls."""
    digest = design_hash(parse_design(GOOD))
    assert len(digest) == 64 and set(digest) <= set("0123456789abcdef")
    assert digest == design_hash(parse_design(GOOD))


def test_render_keeps_a_value_with_spaces_as_one_argument() -> None:
    """A value with spaces fills one argv element; it is not split again."""
    assert render_command("run --name {name} --n {n}", {"name": "two words", "n": 3}) == [
        "run", "--name", "two words", "--n", "3",
    ]


def test_render_keeps_shell_syntax_literal() -> None:
    """`a; rm -rf /` stays a single literal argument."""
    assert render_command("echo {x}", {"x": "a; rm -rf /"}) == ["echo", "a; rm -rf /"]


def test_render_splits_the_template_with_shell_quoting() -> None:
    """Quotes in the template group words; `{{ }}` gives literal braces."""
    argv = render_command("""prog --msg "hello {who}" '{{raw}}'""", {"who": "you all"})
    assert argv == ["prog", "--msg", "hello you all", "{raw}"]


def test_render_writes_booleans_as_true_false() -> None:
    """Booleans render as lowercase `true` / `false`, numbers with str()."""
    assert render_command("p {a} {b} {c}", {"a": True, "b": False, "c": 0.5}) == [
        "p", "true", "false", "0.5",
    ]


def test_rendered_command_runs_without_a_shell(tmp_path: Path) -> None:
    """Running the argv passes the injected text to the program verbatim; no shell runs it."""
    marker = tmp_path / "pwned"
    payload = f"a; touch {marker}"
    argv = render_command(
        '{python} -c "import sys; print(repr(sys.argv[1:]))" {x}',
        {"python": sys.executable, "x": payload},
    )
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    assert out.strip() == repr([payload])
    assert not marker.exists()


def test_eval_budget_placeholder_and_a_hash_unchanged_without_it() -> None:
    """{eval_budget} is eval.budget, else 5%; designs that leave budget out keep their hash."""
    text = GOOD.replace("--seed {seed}", "--seed {seed} --eval-budget {eval_budget}")
    assert expand(parse_design(text), python="py")[0].command[-1] == "0.05"
    with_eval = text + "eval: {every: 100}\n"
    declared = with_eval.replace("{every: 100}", "{every: 100, budget: 0.02}")
    assert expand(parse_design(declared), python="py")[0].command[-1] == "0.02"
    design = parse_design(with_eval)
    later = {"data": True, "resources": True, "ranks": True, "reference": True,
             "shrink": True}
    legacy = json.dumps(design.model_dump(mode="json", exclude={
        **later, "eval": {"budget"}, "hypothesis": {"bounds", "predict"}}),
        sort_keys=True, separators=(",", ":"))
    assert design_hash(design) == hashlib.sha256(legacy.encode()).hexdigest()
    assert design_hash(parse_design(declared)) != design_hash(design)
