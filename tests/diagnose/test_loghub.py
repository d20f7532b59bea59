"""Templates on real logs: the labelled LogHub 2k samples beside the repository.

The reference is Drain3 itself (the library, run here with its defaults) and the
ground-truth events LogHub's authors labelled by hand; `benchmarks/loghub.py`
prints the full table. Skipped where ``../shared/data/loghub`` is absent.
"""

import csv
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from loghub import DEFAULT_DATA, PUBLISHED_DRAIN, drain3, grouping_accuracy  # noqa: E402

from labcoat.diagnose import mine_templates  # noqa: E402

FILES = sorted(DEFAULT_DATA.glob("*_2k.log_structured.csv"))
pytestmark = pytest.mark.skipif(not FILES, reason=f"no LogHub samples under {DEFAULT_DATA}")


def _system(path: Path) -> tuple[list[str], list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r["Content"] for r in rows], [r["EventId"] for r in rows]


def test_defaults_beat_drain3_on_every_system_and_its_published_figures_on_most():
    ours, plain = {}, {}
    for path in FILES:
        name = path.name.split("_2k")[0]
        content, events = _system(path)
        ours[name] = grouping_accuracy(events, mine_templates(content))
        plain[name] = grouping_accuracy(events, drain3(content, [], 0.4, 4)[0])
    assert all(ours[n] >= plain[n] for n in ours), (ours, plain)
    assert statistics.mean(ours.values()) > statistics.mean(plain.values()) + 0.15
    above = [n for n in ours if n in PUBLISHED_DRAIN and ours[n] > PUBLISHED_DRAIN[n]]
    assert len(above) > len(ours) / 2, (ours, above)


def test_lines_of_distinct_events_that_differ_in_one_word_stay_apart():
    """The merges an outside tester found in LogHub: one differing constant word."""
    lines = ["Failed to get next element [HRESULT = 0x800f080d - CBS_E_MANIFEST_INVALID_ITEM]",
             "Failed to internally open package. [HRESULT = 0x800f0805 - CBS_E_INVALID_PACKAGE]",
             "ciod: Error reading message prefix after LOGIN_MESSAGE on CioStream socket to "
             "172.16.96.116:33370: Link has been severed",
             "ciod: Error reading message prefix after LOGIN_MESSAGE on CioStream socket to "
             "172.16.96.116:33569: Connection reset by peer",
             "program interrupt: unimplemented operation..0",
             "program interrupt: imprecise exception......0"]
    ids = mine_templates(lines)
    assert len(set(ids)) == len(lines)
