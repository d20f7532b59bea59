"""Every lint rule fires on a design that has its flaw and stays quiet on one that has not."""

import json
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import cli
from labcoat import review

GOOD = """\
name: good
hypothesis:
  claim: warmup helps
  metric: exact_match
  source: items
  direction: increase
  smallest_effect: 0.05
  sd: 0.01
command: "python train.py --warmup {warmup} --steps {steps} --seed {seed} --every {eval_every}"
params: {warmup: 0, steps: 2000}
arms:
  control: {control: true}
  warmup: {params: {warmup: 500}}
seeds: 5
seed_analysis: paired
eval: {every: 200}
"""


def _lint(tmp_path, text):
    path = tmp_path / "design.yaml"
    path.write_text(text)
    return {f.rule: f for f in review.lint(path)}


def _edit(old, new, text=GOOD):
    assert old in text, old
    return text.replace(old, new)


def test_a_sound_design_has_no_findings(tmp_path):
    assert _lint(tmp_path, GOOD) == {}


@pytest.mark.parametrize(("rule", "severity", "old", "new", "at"), [
    ("single-seed", "error", "seeds: 5", "seeds: 1", "seeds:"),
    ("few-seeds", "warning", "seeds: 5", "seeds: 3", "seeds:"),
    ("no-control", "error", "control: {control: true}", "control: {}", "arms:"),
    ("confounded-arm", "warning", "warmup: {params: {warmup: 500}}",
     "warmup: {params: {warmup: 500, steps: 3000}}", "  warmup: {params"),
    ("no-primary-metric", "warning", GOOD[GOOD.index("hypothesis:"):GOOD.index("command:")], "",
     None),
    ("uncorrected-family", "warning", "seeds: 5", "seeds: 5\ncorrection: none\n"
     "hypotheses: [{claim: c, metric: loss, direction: decrease}]", "correction:"),
    ("no-smallest-effect", "info", "  smallest_effect: 0.05\n", "", "hypothesis:"),
    ("underpowered", "warning", "  sd: 0.01", "  sd: 0.2", "hypothesis:"),
    ("power-unknown", "info", "  sd: 0.01\n", "", "hypothesis:"),
    ("eval-only-at-end", "warning", "eval: {every: 200}", "eval: {every: 1500}", "eval:"),
    ("seeds-not-paired-in-analysis", "info", "seed_analysis: paired", "seed_analysis: welch",
     "seed_analysis:"),
    ("paired-without-shared-seeds", "error", "seeds: 5", "seeds: 5\npaired_seeds: false",
     "seed_analysis:"),
    ("seed-streams", "info", "seeds: 5", "seeds: 5\nseed_streams: [data]", "seed_streams:"),
    ("budget-exceeded", "error", "seeds: 5", "seeds: 5\nbudget: {max_trials: 8}", "budget:"),
    ("budget-exceeded", "error", "seeds: 5",
     "seeds: 5\nbudget: {max_cpu_hours: 1, trial_minutes: 10}", "budget:"),
    ("undeclared-param", "error", "{warmup: 500}", "{warmpu: 500}", "  warmup: {params"),
    ("unknown-key", "error", "seeds: 5", "seeds: 5\nseedz: 3", "seedz:"),
    ("unused-eval-budget", "error", "eval: {every: 200}", "eval: {every: 200, budget: 0}",
     "eval:"),
])
def test_each_rule_fires_on_its_flaw(tmp_path, rule, severity, old, new, at):
    text = _edit(old, new)
    findings = _lint(tmp_path, text)
    assert rule in findings, sorted(findings)
    finding = findings[rule]
    assert finding.severity == severity
    expected = None if at is None else next(
        i for i, line in enumerate(text.splitlines(), start=1) if line.startswith(at))
    assert finding.line == expected
    assert finding.message and (finding.fix or severity == "error")


def test_eval_only_at_end_when_no_eval_plan(tmp_path):
    text = _edit("eval: {every: 200}\n", "", _edit(" --every {eval_every}", ""))
    assert "eval-only-at-end" in _lint(tmp_path, text)


def test_factorial_designs_check_aliasing(tmp_path):
    factorial = textwrap.dedent("""\
        name: fact
        hypothesis: {claim: c, metric: loss, direction: decrease, smallest_effect: 0.1, sd: 0.01}
        command: "python t.py {a} {b} {c} {seed}"
        params: {a: 0, b: 0, c: 0}
        factors:
          a: {levels: [0, 1]}
          b: {levels: [0, 1]}
          c: {levels: [0, 1]}
        fraction: ["c = a*b"]
        interactions: [[a, b]]
        seeds: 5
        seed_analysis: paired
        """)
    findings = _lint(tmp_path, factorial)
    assert findings["aliased-effects"].severity == "warning"  # resolution III
    assert "aliased with c" in findings["aliased-interaction"].message
    full = _lint(tmp_path, factorial.replace('fraction: ["c = a*b"]\n', ""))
    assert "aliased-effects" not in full and "aliased-interaction" not in full


def test_cli_exit_status_and_json(tmp_path):
    path = tmp_path / "design.yaml"
    path.write_text(GOOD)
    assert cli("lint", str(path)).returncode == 0
    path.write_text(_edit("seeds: 5", "seeds: 3"))
    warned = cli("lint", str(path))
    assert warned.returncode == 0 and "few-seeds" in warned.stdout
    assert cli("lint", str(path), "--strict").returncode == 1
    path.write_text(_edit("seeds: 5", "seeds: 1"))
    failed = cli("lint", str(path), "--json")
    assert failed.returncode == 1
    (finding,) = [f for f in json.loads(failed.stdout) if f["rule"] == "single-seed"]
    assert finding["where"] == f"{path}:14" and finding["fix"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzzed_design_files_never_raise(tmp_path, data):
    """Random edits and random YAML: findings or a clear error, never a traceback."""
    lines = GOOD.splitlines()
    choice = data.draw(st.sampled_from(["delete", "duplicate", "replace", "garbage"]))
    i = data.draw(st.integers(0, len(lines) - 1))
    if choice == "delete":
        del lines[i]
    elif choice == "duplicate":
        lines.insert(i, lines[i])
    elif choice == "replace":
        lines[i] = data.draw(st.text(max_size=40))
    else:
        lines = [data.draw(st.text(max_size=200))]
    path = tmp_path / "fuzz.yaml"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    for finding in review.lint(path):
        assert finding.message and finding.severity in ("error", "warning", "info")
