"""Guard rules come from one registry (issue 36, point 2, the guard half).

Each check declares its rules' severities and what they catch; the alerts it raises
must carry the declared severity, docs/guard.md's rule table is built from the
declarations (so no rule goes undocumented), and ``disable=`` takes rules and families
(a bare rule prefix still works, with a deprecation naming what to write instead).
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
