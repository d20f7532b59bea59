"""`labcoat lint`: review a design file, with pilot variances from the store when available."""

from __future__ import annotations

from pathlib import Path

from labcoat import spec
from labcoat.errors import LabcoatError
from labcoat.review._findings import SEVERITIES, Finding
from labcoat.review._pilot import Pilot
from labcoat.review._rules import RULES, Context


def lint(path: str | Path, *, pilots: dict[str, Pilot] | None = None) -> list[Finding]:
    """Every finding for the design at `path`, errors first, then by line.

    pilots: variances per hypothesis id (see `pilots_from_store`); without them,
    power is checked from the hypotheses' `sd:` guesses.
    """
    path = Path(path)
    try:
        check = spec.check_design_file(path)
    except LabcoatError as e:  # unreadable file, YAML syntax
        return [Finding("unreadable", "error", str(path), None, str(e))]
    findings = [Finding(p.rule, "error", p.file, p.line, p.message) for p in check.problems]
    if check.design is not None and not check.problems:
        ctx = Context(check.design, str(path), check.lines, pilots)
        for rule in RULES:
            findings.extend(rule(ctx))
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.line or 0))


def pilots_from_store(design_path: str | Path, pilot: str | None) -> dict[str, Pilot]:
    """Pilot variances for each hypothesis: from experiment `pilot`, else from an earlier
    run of this design's experiment, if the store has one."""
    from labcoat import store
    from labcoat.review._pilot import pilot_for

    try:
        design = spec.load_design(design_path)
    except LabcoatError:
        return {}
    db = store.open_store(create=False)  # linting reads; it never leaves a new ./.labcoat
    try:
        with db.session() as session:
            names = [pilot] if pilot else [design.name]
            found = {e.name: e for e in store.list_experiments(session) if e.name in names}
            if pilot and pilot not in found:
                store.find_experiment(session, pilot)  # raises, listing what exists
            if not found:
                return {}
            experiment = store.find_experiment(session, names[0])
            return {h.id: pilot_for(session, experiment, h) for h in design.all_hypotheses}
    finally:
        db.close()
