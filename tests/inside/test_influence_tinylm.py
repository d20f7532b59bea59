"""Training-data attribution on tinylm: self-influence finds 20 planted mislabeled training
examples (AUC from scikit-learn), tinylm's TRAINING_DATA gives back exactly what training
consumed, and `attribute_flips` explains the items that flipped between two stored trials
(its scores checked against a plain autograd loop, not its own torch.func path)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from labcoat import store
from labcoat.errors import LabcoatError
from labcoat.inside._influence import InfluenceConfig, attribute_flips
from labcoat.inside._tracin import CheckpointWeights, chunks, self_influence
from labcoat.torch import Checkpointer, load_checkpoint
from labcoat.workloads.tinylm import (
    INSIDE,
    TRAINING_DATA,
    Config,
    Example,
    TrainStream,
    build_model,
    build_optimizer,
    collate,
    make_eval_set,
    masked_loss,
    train,
)
from torch_threads import one_thread  # noqa: F401  (one torch thread per test)

MODULE = "labcoat.workloads.tinylm"


def test_self_influence_flags_planted_mislabeled_examples() -> None:
    """A single pass over tinylm's stream (as tinylm trains) with 20 of 200 scored examples
    given another example's answer; the loop is tinylm's model, optimizer and collate."""
    tasks = ("agree", "majority")  # answers tinylm learns within a few hundred steps
    cfg = Config(width=32, depth=2, heads=2, lr=1e-2, weight_decay=0.0, tasks=tasks,
                 steps=450, batch_size=32)
    stream = TrainStream(7, make_eval_set(5, tasks).held_out(), tasks)
    examples = [stream.example() for _ in range(cfg.steps * cfg.batch_size)]
    rng = random.Random(0)
    pool = sorted(rng.sample(range(len(examples)), 200))
    planted = set(rng.sample(pool, 20))
    for i in planted:
        ex = examples[i]
        while (other := examples[rng.randrange(len(examples))]).task != ex.task or \
                other.target == ex.target:
            pass
        examples[i] = Example(ex.task, ex.input, other.target)
    model = build_model(cfg)
    opt = build_optimizer(model, cfg)
    checkpoints = []
    for step in range(1, cfg.steps + 1):
        inputs, labels = collate(examples[(step - 1) * 32: step * 32])
        opt.zero_grad()
        masked_loss(model(inputs), labels).backward()
        opt.step()
        if step % 150 == 0:
            checkpoints.append(CheckpointWeights(
                step=step, lr=cfg.lr, state={k: v.clone() for k, v in model.state_dict().items()}))
    scored = collate([examples[i] for i in pool])
    scores = self_influence(model, checkpoints, TRAINING_DATA.loss, chunks(scored, 50))
    auc = roc_auc_score([i in planted for i in pool], scores)
    assert auc >= 0.9, auc  # measured: 0.95


def test_training_data_replays_what_training_consumed() -> None:
    """Step 1's loss as training logged it equals the loss of examples 0..B-1 that
    TRAINING_DATA gives back, under the initial weights; indices come back in any order."""
    cfg = Config(width=16, depth=1, heads=2, steps=2, batch_size=8, eval_items=5,
                 eval_every=0, eval_budget=0, threads=1)
    result = train(cfg)
    batch = TRAINING_DATA.training_examples(cfg, list(range(8)))
    with torch.no_grad():
        first = masked_loss(build_model(cfg)(batch[0]), batch[1]).item()
    assert first == pytest.approx(result.losses[0], rel=1e-6)
    stream = TrainStream(cfg.seed_for("data"), make_eval_set(5).held_out())
    drawn = [stream.example() for _ in range(16)]
    assert TRAINING_DATA.examples(cfg, [15, 3]) == [drawn[15], drawn[3]]
    assert TRAINING_DATA.describe(cfg, [3])[0].startswith(f"{drawn[3].task}: ")
    with pytest.raises(LabcoatError, match="outside 0..15"):
        TRAINING_DATA.examples(cfg, [16])


def _flags(cfg: Config) -> list[str]:
    return ["--width", str(cfg.width), "--depth", str(cfg.depth), "--heads", str(cfg.heads),
            "--steps", str(cfg.steps), "--batch-size", str(cfg.batch_size), "--lr", str(cfg.lr),
            "--warmup", str(cfg.warmup), "--eval-items", str(cfg.eval_items),
            "--tasks", ",".join(cfg.tasks), "--seed", str(cfg.seed)]


@pytest.fixture(scope="module")
def two_trials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tinylm trials (warmup 0 vs 40) trained here with checkpoints along training,
    stored as ingestion leaves them: command, params, final per-item scores, checkpoints."""
    home = tmp_path_factory.mktemp("home")
    import os

    old = os.environ.get("LABCOAT_HOME")
    os.environ["LABCOAT_HOME"] = str(home)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        db = store.open_store(create=True)
        with db.session() as session:
            exp = store.Experiment(name="why", design_yaml="", design_hash="0" * 64)
            session.add(exp)
            session.flush()
            for arm, warmup in (("control", 0), ("variant", 40)):
                cfg = Config(width=32, depth=1, heads=2, steps=120, batch_size=16, lr=1e-2,
                             warmup=warmup, eval_items=8, eval_every=0, eval_budget=0,
                             tasks=("agree", "majority", "brackets"), seed=3, threads=1)
                with Checkpointer(home / arm, keep_last=1, keep_every=40, every=40) as ck:
                    result = train(cfg, checkpointer=ck)
                trial = store.Trial(key=f"{arm}-s3", arm=arm, seed=3, params=cfg.to_dict(),
                                    command=["python", "-m", MODULE, *_flags(cfg)],
                                    status="pending")
                exp.trials.append(trial)
                session.flush()
                attempt = store.start_attempt(session, trial, run_dir="/nonexistent",
                                              host="test")
                store.upsert_eval_items(session, [
                    {"trial_id": trial.id, "attempt_id": attempt.id, "step": cfg.steps,
                     "task": task, "item": item, "variant": "", "score": score}
                    for task in result.scores
                    for item, score in zip(result.item_ids[task], result.scores[task],
                                           strict=True)])
                store.upsert_checkpoints(session, [
                    {"trial_id": trial.id, "attempt_id": attempt.id, "step": int(p.name[5:]),
                     "path": str(p), "verified": True}
                    for p in sorted((home / arm).glob("step-*"))])
                store.end_attempt(session, attempt, exit_code=0, cause="exit 0",
                                  trial_status="done")
            session.commit()
        db.close()
    finally:
        torch.set_num_threads(threads)
        if old is None:
            os.environ.pop("LABCOAT_HOME", None)
        else:
            os.environ["LABCOAT_HOME"] = old
    return home


def test_attribute_flips_explains_flipped_items(two_trials: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABCOAT_HOME", str(two_trials))
    db = store.open_store()
    with db.session() as session:
        exp = store.find_experiment(session, "why")
        c, v = sorted(exp.trials, key=lambda t: t.arm)
        scores = {t.key: {r.item: r.score for r in store.final_eval_items(session, [t.id])}
                  for t in (c, v)}
        flipped = sorted(i for i in scores[c.key] if scores[c.key][i] != scores[v.key][i])
        assert flipped, "the two arms should disagree on some items"
        result = attribute_flips(session, "why", "control", "variant",
                                 config=InfluenceConfig(pool=64, top=3, max_items=4,
                                                        checkpoints=3))
        ckpt_paths = {t.key: [ck.path for ck in store.verified_checkpoints(session, t)]
                      for t in (c, v)}
    db.close()
    assert result.flipped == len(flipped)
    assert [t.role for t in result.trials] == ["control", "variant"]
    variant = result.trials[1]
    assert variant.checkpoints == [40, 80, 120] and variant.pool == 64
    assert [a.item for a in variant.items] == flipped[:4]
    assert all(a.control != a.variant for a in variant.items)
    # The top proponent's score, recomputed with plain autograd per checkpoint.
    item = variant.items[0]
    top = item.proponents["tracin"][0]
    cfg = INSIDE.configure(v.params, v.command)
    ids, batches = INSIDE.eval_items(cfg, 1)
    test = batches[ids.index(item.item)]
    example = TRAINING_DATA.training_examples(cfg, [top.index])
    expected = 0.0
    for path in ckpt_paths[v.key]:
        state = load_checkpoint(path)
        model = build_model(cfg)
        model.load_state_dict(state["tracked"]["model"])
        model.eval()
        grads = []
        for batch in (example, test):
            model.zero_grad()
            TRAINING_DATA.loss(model, batch).sum().backward()
            grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        expected += TRAINING_DATA.learning_rate(cfg, state["step"]) * float(grads[0] @ grads[1])
    assert top.score == pytest.approx(expected, rel=1e-3)
    assert top.text == TRAINING_DATA.describe(cfg, [top.index])[0]
    assert item.proponents["tracin"][0].score >= item.proponents["tracin"][-1].score
    assert len(variant.flagged) == 10 and variant.flagged[0].score >= variant.flagged[1].score
    data = result.as_dict()
    assert data["format"] == "labcoat.inside.influence" and data["version"] == 1
    np.testing.assert_equal(len(data["trials"][1]["items"][0]["proponents"]["tracin"]), 3)


def test_attribute_flips_errors(two_trials: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABCOAT_HOME", str(two_trials))
    with pytest.raises(LabcoatError, match="methods"):
        InfluenceConfig(methods=("loo",))
    with pytest.raises(LabcoatError, match="pool=-1"):
        InfluenceConfig(pool=-1)
    db = store.open_store()
    with db.session() as session, pytest.raises(LabcoatError, match="neither a trial nor"):
        attribute_flips(session, "why", "nope", "variant")
    with db.session() as session, pytest.raises(LabcoatError, match="exposes no NOPE"):
        attribute_flips(session, "why", "control", "variant",
                        training_data=f"{MODULE}:NOPE")
    db.close()


def test_saved_attribution_reaches_the_report(two_trials: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A real result saved as `labcoat inside --influence` saves it, in the HTML report."""
    pytest.importorskip("plotly", reason="needs the ui extra")
    from labcoat import analysis, report

    monkeypatch.setenv("LABCOAT_HOME", str(two_trials))
    db = store.open_store()
    with db.session() as session:
        result = attribute_flips(session, "why", "control-s3", "variant-s3",
                                 config=InfluenceConfig(pool=32, top=2, max_items=2,
                                                        checkpoints=2))
        analysis.save_why("why", "influence", result.as_dict(), control="control-s3",
                          variant="variant-s3")
        html = report.render_html(analysis.report_page(
            session, store.find_experiment(session, "why")), plotly_src="plotly.js")
    db.close()
    section = html[html.index("<section id='why'>"):]
    section = section[:section.index("</section>")]
    top = result.trials[1].items[0].proponents["tracin"][0]
    assert result.trials[1].items[0].item in section
    assert f"#{top.index} " in section and f"({top.score:.3g})" in section
    assert "checkpoints at steps 40, 120;" in section and "32 of 1920 training" in section


def test_cli_influence_saves_for_the_report(two_trials: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`labcoat inside --influence --no-patching` (a real subprocess): the JSON, the saved
    file the report reads, and one-line errors for flags that leave nothing to do."""
    import json

    from helpers import cli, use_home

    use_home(monkeypatch, two_trials)
    done = cli("inside", "why", "--control", "control", "--variant", "variant",
               "--influence", "--no-patching", "--pool", "16", "--top", "2", "--json",
               check=True)
    out = json.loads(done.stdout)
    assert set(out) == {"influence"}
    assert [t["role"] for t in out["influence"]["trials"]] == ["control", "variant"]
    assert len(out["influence"]["trials"][1]["items"][0]["proponents"]["tracin"]) == 2
    saved = json.loads((two_trials / "runs" / "why" / "inside.json").read_text())
    assert saved["influence"]["result"] == out["influence"]
    assert saved["influence"]["control"] == "control" and "patching" not in saved
    bad = cli("inside", "why", "--control", "control", "--variant", "variant",
              "--no-patching")
    assert bad.returncode != 0 and "nothing to do" in bad.stderr + bad.stdout
    assert "Traceback" not in bad.stderr
