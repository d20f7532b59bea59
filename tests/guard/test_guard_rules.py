"""Guard rules come from one registry (issue 36, point 2, the guard half).

Each check declares its rules' severities and what they catch; the alerts it raises
must carry the declared severity, docs/guard.md's rule table is built from the
declarations (so no rule goes undocumented), ``disable=`` takes rules and families
(a bare rule prefix still works, with a deprecation naming what to write instead), and
a rule named ``<prefix>.*`` is declared and raised in ``_checks_<prefix>.py`` only, so
the file a rule lives in is known from its name.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest
import torch

from labcoat.torch import GuardError, guard_rules, watch
from labcoat.torch.guard import guard_rule_table
from labcoat.torch.guard._guard import CHECKS

ROOT = Path(__file__).resolve().parents[2]
GUARD_SRC = ROOT / "src" / "labcoat" / "torch" / "guard"


def test_every_alert_in_the_source_carries_its_declared_severity() -> None:
    declared = {r["rule"]: r["severity"] for r in guard_rule_table()}
    raised: dict[str, set[str]] = {}
    for path in GUARD_SRC.glob("*.py"):
        for rule, severity in re.findall(r'"([a-z_]+\.[a-z_]+)",\s*"(warning|error|critical)"',
                                         path.read_text()):
            raised.setdefault(rule, set()).add(severity)
    assert set(raised) <= set(declared)  # no alert for an undeclared rule
    assert len(raised) >= 50  # the scan sees the alert calls
    wrong = {rule: s for rule, s in raised.items() if s != {declared[rule]}}
    assert not wrong, wrong


def test_each_rule_prefix_has_one_module_named_for_it() -> None:
    modules: dict[str, set[str]] = {}  # rule prefix -> modules of the checks declaring its rules
    for cls in CHECKS:
        for rule in cls.rules:
            modules.setdefault(rule.split(".")[0], set()).add(cls.__module__.rsplit(".", 1)[1])
    assert sum(len(cls.rules) for cls in CHECKS) == len(guard_rules())  # no rule twice
    wrong = {prefix: found for prefix, found in modules.items()
             if found != {f"_checks_{prefix}"}}
    assert not wrong, f"rules declared outside their prefix's _checks_<prefix>.py: {wrong}"
    # and no other module holds checks: every _checks_*.py is some prefix's
    assert {p.stem for p in GUARD_SRC.glob("_checks_*.py")} == {
        f"_checks_{prefix}" for prefix in modules}


def test_each_alert_is_raised_in_its_rules_module() -> None:
    raised: dict[str, set[str]] = {}  # rule -> files whose source raises it
    for path in GUARD_SRC.glob("*.py"):
        for rule in re.findall(r'"([a-z_]+\.[a-z_]+)",\s*"(?:warning|error|critical)"',
                               path.read_text()):
            raised.setdefault(rule, set()).add(path.stem)
    assert len(raised) >= 50  # the scan sees the alert calls
    wrong = {rule: files for rule, files in raised.items()
             if files != {f"_checks_{rule.split('.')[0]}"}}
    assert not wrong, wrong


def test_an_alert_raised_with_another_severity_is_refused() -> None:
    model = torch.nn.Linear(2, 1)
    guard = watch(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="update.lost raised as 'warning', declared 'error'"):
        guard._ctx.alert("update.lost", "warning", "x", step=1)


def test_the_docs_rule_table_is_generated_from_the_declarations() -> None:
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import generated
    finally:
        sys.path.pop(0)
    page = (ROOT / "docs" / "guard.md").read_text()
    assert generated.RULES_MARK in page
    table = generated.on_page_markdown(page, None, None, None)
    rows = dict(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| `[a-z]+` \| (\w+) \|", table, re.M))
    assert rows == {r["rule"]: r["severity"] for r in guard_rule_table()}
    assert {"dist.step_mismatch", "dist.batch_mismatch"} <= set(rows)  # once missing
    assert set(rows) == set(guard_rules())


def test_disable_takes_rules_and_families_and_deprecates_prefixes() -> None:
    model = torch.nn.Linear(2, 1)

    def guard(*names: str):
        return watch(model, torch.optim.SGD(model.parameters(), lr=0.1), disable=list(names))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning for rules and families
        assert not guard("distributed").enabled("dist.param_drift")
        assert not guard("lr.mismatch").enabled("lr.mismatch")
    with pytest.warns(FutureWarning, match="'dist' is a rule prefix.*use the family "
                                           "'distributed'"):
        g = guard("dist")
    assert not g.enabled("dist.straggler")  # still works while deprecated
    with pytest.warns(FutureWarning, match="use the rules 'lr.mismatch', "
                                           "'lr.scheduler_stalled'"):
        assert not guard("lr").enabled("lr.scheduler_stalled")
    with pytest.raises(GuardError, match="unknown rule or family 'modez'; families: .*modes"):
        guard("modez")
