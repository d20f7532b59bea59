"""Lines that mislead, through `labcoat report` as a user reads it (issue 22, point 5): the
across-tasks verdict agrees with the per-task counts; seeds without any spread are not
SUPPORTED at p=0; goodput blames startup, not a restore, for a script without checkpoints.
(Seed CIs outside a bounded metric's range: tests/report/test_bounded_plots.py and
tests/report/test_verdicts.py.)"""

import json
import sys

from helpers import cli, stored_experiment

DESIGN = """name: {name}
hypothesis: {{claim: c, metric: {metric}, direction: increase}}
command: "python train.py --seed {{seed}} --q {{q}}"
params: {{q: 0}}
arms:
  base: {{control: true}}
  hot: {{params: {{q: 1}}}}
seeds: 5
"""
ITEMS_PER_TASK = 20


def _text(result) -> str:
    return " ".join(result.stdout.split())


def _items(task: str, correct: int) -> dict[str, float]:
    return {f"{task}-{i}": float(i < correct) for i in range(ITEMS_PER_TASK)}


def test_one_task_won_and_nine_tied_is_not_helps_broadly(home):
    # t0: +3 items of 20 on every seed (a clear win); t1..t9: +1 item under seed noise of
    # +-2 (ties). The pooled effect excludes 0, but the effects differ by task.
    trials = []
    for arm in ("base", "hot"):
        for seed in range(5):
            tasks = {"t0": _items("t0", (8 if arm == "base" else 11) + seed % 2)}
            for k in range(1, 10):
                noise = (0, 1, -1, 2, -2)[(seed + k) % 5]
                tasks[f"t{k}"] = _items(f"t{k}", 10 + noise + (arm == "hot"))
            trials.append({"key": f"{arm}-s{seed}", "arm": arm, "seed": seed, "items": tasks})
    stored_experiment("tasks", DESIGN.format(name="tasks", metric="exact_match").replace(
        "direction: increase", "source: items, direction: increase"), trials)
    found = json.loads(cli("report", "tasks", "--json", check=True).stdout)
    g = found["results"][0]["comparisons"][0]["generalization"]
    assert (len(g["wins"]), len(g["losses"]), len(g["ties"])) == (1, 0, 9)
    assert g["pooled"]["low"] > 0  # the pooled effect alone would have said "helps broadly"
    text = _text(cli("report", "tasks", check=True))
    across = text[text.index("Across tasks"):]
    assert "helps broadly" not in text
    assert across.startswith("Across tasks, hot vs base: helps some tasks (the pooled effect "
                             "helps, but only 1 of 10 tasks win and the effects differ by task")
    assert "1 won, 0 lost, 9 tied" in across


def test_seeds_without_any_spread_are_not_supported(home):
    # every seed of an arm gives the same value (the script ignores its seed): Welch's SE
    # is 0 and its p 0, which is no evidence at all
    values = {"base": [0.5] * 5, "hot": [0.6] * 5}
    stored_experiment("flat", DESIGN.format(name="flat", metric="score"), [
        {"key": f"{arm}-s{s}", "arm": arm, "seed": s, "metrics": {"score": [(1, v)]}}
        for arm, vs in values.items() for s, v in enumerate(vs)])
    text = _text(cli("report", "flat", check=True))
    verdict = text[text.index("Verdict for hot vs base"):]
    assert verdict.startswith("Verdict for hot vs base: INCONCLUSIVE")
    assert "the seeds show no variation at all" in verdict and "does the script use its seed" \
        in verdict
    assert "SUPPORTED" not in text
    found = json.loads(cli("report", "flat", "--json", check=True).stdout)
    assert found["results"][0]["comparisons"][0]["verdict"] == "inconclusive"


SCRIPT = """import time
import labcoat
run = labcoat.init()
time.sleep(0.3)  # what `import torch` costs a real script before its first step
for step in range(1, 4):
    run.log(step, loss=1.0 / step + 0.01 * run.seed)
run.finish()
"""


def test_goodput_of_a_script_without_checkpoints_blames_startup(home, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    design = tmp_path / "design.yaml"
    design.write_text(DESIGN.format(name="plain", metric="loss")
                      .replace('"python train.py --seed {seed} --q {q}"',
                               f'"{sys.executable} {script}"').replace("seeds: 5", "seeds: 2"))
    cli("run", str(design), "--plain", check=True)
    for verb in ("report", "status"):
        line = next(line for line in cli(verb, "plain", check=True).stdout.splitlines()
                    if line.startswith("goodput"))
        assert "lost: startup " in line and "restore" not in line, line
