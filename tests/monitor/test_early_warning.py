"""Early warning: a running trial against the band of reference trials (real runner, real
store, the fake trial)."""

import json

import numpy as np
import pytest

from helpers import FAKE_TRIAL, cli

COMMAND = (f'"{{python}} {FAKE_TRIAL} --steps 30 --quality {{quality}} --seed {{seed}} '
           '--loss-scale {loss_scale} --eval-every 5"')


def _design(directory, name, arms, seeds, reference=""):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "design.yaml"
    path.write_text(f"""name: {name}
command: {COMMAND}
params: {{quality: 0.8, loss_scale: 1.0}}
arms:
{arms}
seeds: {seeds}
parallelism: 2
{reference}
""", encoding="utf-8")
    return path


TWINS = "  base: {control: true}\n  twin: {params: {quality: 0.8}}"  # a design needs 2 arms


def _alerts(name):
    trials = json.loads(cli("status", name, "--json", check=True).stdout)["trials"]
    return {t["key"]: [a for a in t["alerts"] if a["rule"] == "reference.behind"]
            for t in trials}


def test_trials_behind_their_references_are_flagged_and_clean_seeds_are_not(home, tmp_path):
    # 1. Same design: trials run arm by arm in seed order, two at a time, so seed 6 of an
    # arm starts when five or six of its seeds have finished: they are its band. Only
    # seed 6 runs behind (its loss is 1.5x); the clean seeds, watched from the time three
    # of their arm have finished, are not flagged.
    reference = _design(tmp_path / "ref", "ref", TWINS, "7")
    text = reference.read_text().replace("--eval-every 5", "--eval-every 5 --scale-seed 6")
    reference.write_text(text.replace("loss_scale: 1.0", "loss_scale: 1.5"))
    cli("run", str(reference), "--plain", check=True)
    flagged = {key for key, alerts in _alerts("ref").items() if alerts}
    assert flagged == {"base-s6", "twin-s6"}
    # 2. A named reference experiment: ref's clean base seeds (six: the flagged seed 6 is
    # left out) are the band for base here, and for bad, which has no match in ref.
    watched = _design(tmp_path / "watched", "watched",
                      "  base: {control: true}\n"
                      "  bad: {params: {quality: 0.1}}",
                      "[10, 11, 12, 13]", reference="reference: ref")
    out = cli("run", str(watched), "--plain", check=True).stdout
    alerts = _alerts("watched")
    # Four clean seeds, none flagged (the rule's false-alarm rate is at most 5% per trial).
    assert all(alerts[f"base-s{s}"] == [] for s in range(10, 14)), alerts
    for seed in range(10, 14):
        (alert,) = alerts[f"bad-s{seed}"]  # once per attempt
        # same loss, but its eval score falls far below the references' as they learn
        assert alert["evidence"]["signal"] == "eval"
        assert alert["evidence"]["value"] < alert["evidence"]["low"]
        assert alert["evidence"]["references"] == 6  # ref's control arm, base
    assert "reference.behind: eval score" in out and "behind the reference beyond seed noise" in out
    report = cli("report", "watched", check=True).stdout
    assert report.count("reference.behind") == 4


def test_an_unknown_reference_experiment_is_one_clear_error(home, tmp_path):
    design = _design(tmp_path, "orphan", TWINS, "1",
                     reference="reference: nosuch")
    result = cli("run", str(design), "--plain")
    assert result.returncode == 2
    assert "no experiment named 'nosuch'" in result.stderr
    assert "Traceback" not in result.stderr
    # nothing was registered, so fixing the typo is not "a different design" under one name
    assert "orphan" not in cli("status", "--json", check=True).stdout


def _curves_in_store(curves):
    """An experiment (no design) whose trials of arm `a` logged these loss curves; the
    last one is running. Returns (session, db, early warning, running trial, attempt)."""
    from labcoat import store
    from labcoat.monitor import EarlyWarning
    from labcoat.store import Trial

    db = store.open_store()
    session = db.session()
    exp, _ = store.get_or_create_experiment(session, name="curves", design_yaml="",
                                            design_hash="x")
    attempts = []
    for k, curve in enumerate(curves):
        trial = Trial(key=f"a-s{k}", arm="a", seed=k, params={}, status="pending")
        exp.trials.append(trial)
        session.flush()
        attempt = store.start_attempt(session, trial, run_dir="", host="h")
        store.upsert_metric_points(session, [
            {"trial_id": trial.id, "attempt_id": attempt.id, "name": "loss", "step": s,
             "value": v, "time": 0.0} for s, v in enumerate(curve, start=1)])
        attempts.append(attempt)
        if k < len(curves) - 1:
            store.end_attempt(session, attempt, exit_code=0, cause="exit 0",
                              trial_status="done")
    return db, session, EarlyWarning(exp), exp.trials[-1], attempts[-1]


def test_a_lag_within_the_noise_of_many_looks_is_a_note_not_an_alert(home):
    # Five references at steps 1..10: loss 1/step plus a per-seed offset (sd 0.0112).
    # A trial 0.06 above the mean at step 1 is outside one look's 95% band
    # (t(0.975, 4) = 2.776: +-0.034 with sqrt(1 + 1/5)) but inside the band over 10 looks
    # (t(1 - 0.0025, 4) = 5.598: +-0.069): noted, not alerted.
    offsets = [-0.015, -0.005, 0.0, 0.005, 0.015]
    refs = [[1 / s + o for s in range(1, 11)] for o in offsets]
    lagging = [1 / s + (0.06 if s == 1 else 0.0) for s in range(1, 11)]
    db, session, warning, trial, attempt = _curves_in_store([*refs, lagging])
    try:
        alerts, note = warning.check(session, trial, attempt, final=True)
        assert alerts == []
        assert "expected early underperformance" in note and "step 1" in note
    finally:
        session.close()
        db.close()


def test_a_lag_beyond_the_band_of_all_looks_is_one_alert(home):
    offsets = [-0.015, -0.005, 0.0, 0.005, 0.015]
    refs = [[1 / s + o for s in range(1, 11)] for o in offsets]
    behind = [1 / s + (0.1 if s >= 4 else 0.0) for s in range(1, 11)]  # +0.1 > 0.069
    db, session, warning, trial, attempt = _curves_in_store([*refs, behind])
    try:
        (alert,), _ = warning.check(session, trial, attempt, final=True)
        assert alert["step"] == 4 and alert["rule"] == "reference.behind"
        half = alert["evidence"]["high"] - alert["evidence"]["mean"]
        from scipy import stats as sps

        sd = float(np.std(offsets, ddof=1))
        assert half == pytest.approx(sps.t.ppf(1 - 0.05 / 10 / 2, 4) * sd * (1.2 ** 0.5))
        assert warning.check(session, trial, attempt, final=True) == ([], None)  # once
    finally:
        session.close()
        db.close()
