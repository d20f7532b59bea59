"""Inferred invariants: profiles of clean tinylm runs catch faults no built-in check names.

The guard here is told nothing about tinylm (no lr schedule, no label shift),
so the built-in lr and label checks have nothing to hold the run to; the
relations learned from three clean reference runs (other seeds) do.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from labcoat.torch import GuardError, read_reference_file, watch, write_reference_file
from labcoat.torch.guard._checks_invariant import MIN_RANGE_REFERENCES, _ranges
from labcoat.workloads.tinylm import Config, Fault, build_model, build_optimizer, train

BASE = Config(width=32, depth=2, heads=4, steps=120, batch_size=16, eval_every=40,
              eval_items=3, dropout=0.1, warmup=20, threads=1)
UNDECLARED = {"lr_schedule": None, "labels_shifted": None, "check_every": 5}


def run(seed: int, *, fault: Fault | None = None, **options: Any) -> Any:
    return train(dataclasses.replace(BASE, seed=seed), guard={**UNDECLARED, **options},
                 fault=fault)


@pytest.fixture(scope="module")
def references() -> list[dict[str, Any]]:
    profiles = [run(seed).profile for seed in (0, 1, 2)]
    assert all(p is not None for p in profiles)
    return profiles  # type: ignore[return-value]


def test_profile_is_plain_json_and_round_trips(tmp_path: Path,
                                               references: list[dict[str, Any]]) -> None:
    profile = references[0]
    assert profile["format"] == "labcoat.guard.profile" and profile["version"] == 1
    assert profile["steps"] == [1, BASE.steps] and profile["alignment"] == "next"
    assert profile["lr"]["steps"][:3] == [1, 5, 10]  # check steps
    assert [ph["start"] for ph in profile["phases"]] == [1, 17, 33, 65]
    assert set(profile["phases"][0]) == {"start", "end", "loss", "grad_norm", "examples"}
    assert profile["modes"]["eval"] == [[]]  # every module in eval mode at evaluation
    path = tmp_path / "reference.json"
    write_reference_file(path, references)
    assert read_reference_file(path) == json.loads(json.dumps(references))


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_clean_seeds_keep_the_invariants_of_other_clean_seeds(
        seed: int, references: list[dict[str, Any]]) -> None:
    assert run(seed, reference=references).alerts == []


def test_one_or_two_references_give_no_noisy_range(references: list[dict[str, Any]]) -> None:
    """With fewer than 3 references only exact relations (a constant batch size) hold."""
    for count in (1, 2, 3):
        by_phase: dict[tuple[int, int], list[dict[str, float]]] = {}
        for p in references[:count]:
            for ph in p["phases"]:
                for q in ("loss", "examples"):
                    by_phase.setdefault((q, ph["start"], ph["end"]), []).append(ph[q])
        loss = _ranges({k[1:]: v for k, v in by_phase.items() if k[0] == "loss"}, count, 1.0)
        examples = _ranges({k[1:]: v for k, v in by_phase.items() if k[0] == "examples"},
                           count, 1.0)
        assert set(examples.values()) == {(16.0, 16.0, False)}  # batch_size, exact
        assert bool(loss) == (count >= MIN_RANGE_REFERENCES)


def test_a_range_is_widened_by_the_between_run_spread() -> None:
    def stats(median: float) -> dict[str, float]:  # constant within the run: no within spread
        return {"n": 4, "min": median, "q05": median, "q50": median, "q95": median,
                "max": median}

    ranges = _ranges({(1, 16): [stats(1.0), stats(2.0), stats(4.0)]}, 3, 1.0)
    low, high, log = ranges[(1, 16)]
    assert log and low == pytest.approx(math.log(1 / 4)) and high == pytest.approx(math.log(16))


def test_a_gradient_norm_no_clean_run_had_trips_the_inferred_range(
        references: list[dict[str, Any]]) -> None:
    # the loss scaled by 2^16 and never unscaled from step 60: with the numerics family off,
    # only the gradient-norm range learned from the clean runs can tell
    alerts = run(3, fault=Fault("loss_scale", 60), reference=references,
                 disable=["numerics"]).alerts
    assert alerts and alerts[0].rule == "invariant.grad_norm_range", [str(a) for a in alerts]
    # two measurements running, every grad_norm_every (3) steps: the second by step 65
    assert 60 <= alerts[0].step <= 65 and "above the range" in alerts[0].message
    assert alerts[0].evidence["references"] == 3


def test_stuck_lr_is_caught_only_by_the_invariant(references: list[dict[str, Any]]) -> None:
    fault = Fault("lr_stuck", 60)
    assert run(3, fault=fault).alerts == []  # nothing declared: no built-in rule applies
    alerts = run(3, fault=fault, reference=references).alerts
    assert alerts and alerts[0].rule == "invariant.lr_schedule" and alerts[0].step == 60


def test_labels_never_shifted_are_caught_by_the_reference(
        references: list[dict[str, Any]]) -> None:
    fault = Fault("labels_unshifted", 1)  # wrong from the first step: nothing to learn from
    assert "data.label_leak" not in {a.rule for a in run(3, fault=fault).alerts}
    alerts = run(3, fault=fault, reference=references).alerts
    assert alerts[0].rule == "invariant.label_alignment" and alerts[0].step == 1
    assert alerts[0].evidence == {"found": "same", "reference": "next"}


def test_a_frozen_block_breaks_the_learned_update_relation(
        references: list[dict[str, Any]]) -> None:
    alerts = run(3, fault=Fault("frozen_block", 60), reference=references,
                 disable=["trainable.frozen", "trainable.unfrozen"]).alerts
    assert [a.rule for a in alerts] == ["invariant.param_updates"]
    assert alerts[0].step <= 70 and "blocks.0" in alerts[0].message


def test_the_reference_comes_from_the_environment(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  references: list[dict[str, Any]]) -> None:
    path = tmp_path / "reference.json"
    write_reference_file(path, references)
    monkeypatch.setenv("LABCOAT_GUARD_REFERENCE", str(path))
    alerts = run(3, fault=Fault("lr_stuck", 60)).alerts
    assert alerts and alerts[0].rule == "invariant.lr_schedule"


def test_bad_reference_files_name_the_problem(tmp_path: Path) -> None:
    model = build_model(BASE)
    opt = build_optimizer(model, BASE)
    missing = tmp_path / "nope.json"
    with pytest.raises(GuardError, match=f"guard reference file {missing} does not exist"):
        watch(model, opt, reference_path=missing)
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(GuardError, match="is not readable JSON"):
        watch(model, opt, reference_path=broken)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "labcoat.guard.reference", "version": 99,
                                 "profiles": []}), encoding="utf-8")
    with pytest.raises(GuardError, match="has version 99; this labcoat reads version 1"):
        watch(model, opt, reference_path=newer)
    with pytest.raises(GuardError, match="reference profile 0 is not a guard profile"):
        watch(model, opt, reference=[{"format": "something else"}])


@pytest.mark.parametrize(("fault", "family", "rule"), [
    ("batch_collapse", "data", "invariant.examples_range"),
    ("step_skipped", "updates", "invariant.backwards"),
    ("eval_mode_stuck", "modes", "invariant.modes"),
])
def test_with_the_built_in_family_off_an_invariant_still_names_the_bug(
        fault: str, family: str, rule: str, references: list[dict[str, Any]]) -> None:
    alerts = run(3, fault=Fault(fault, 60), reference=references, disable=[family]).alerts
    assert alerts and alerts[0].rule == rule, [str(a) for a in alerts]
    onset = 80 if fault == "eval_mode_stuck" else 60  # the first evaluation at or after 60
    assert onset <= alerts[0].step <= onset + UNDECLARED["check_every"]
