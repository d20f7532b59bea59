"""A large synthetic experiment in a store, for benchmarks/ui.py (and by hand:
`python benchmarks/ui_data.py 100 10000` fills $LABCOAT_HOME; `--quick` builds a small
one in a temporary home).

Trials, attempts, metric points and final eval items are written through the
store's own functions, as the runner's ingestion would.
"""

from __future__ import annotations

import time

import numpy as np

from labcoat import spec, store

DESIGN = """name: big
hypothesis:
  claim: the variant lowers the loss
  metric: exact_match
  source: items
  direction: increase
command: "{{python}} train.py --seed {{seed}} --lr {{lr}}"
params: {{lr: 0.01}}
arms:
  base: {{control: true}}
  variant: {{params: {{lr: 0.02}}}}
seeds: {seeds}
"""
METRICS = ("loss", "lr")


def build(trials: int = 100, points: int = 10_000, *, tasks: int = 5, items: int = 50,
          seed: int = 0) -> str:
    """Fill the store at $LABCOAT_HOME with experiment `big`: `trials` finished trials
    (two arms), each logging `points` steps of every metric in METRICS."""
    rng = np.random.default_rng(seed)
    design = spec.parse_design(DESIGN.format(seeds=trials // 2), "big.yaml")
    db = store.open_store()
    with db.session() as session:
        exp, _ = store.get_or_create_experiment(session, name=design.name,
                                                design_yaml=DESIGN.format(seeds=trials // 2),
                                                design_hash=spec.design_hash(design))
        store.add_missing_trials(session, exp, spec.expand(design, python="python"))
        steps = np.arange(1, points + 1)
        for trial in exp.trials:
            attempt = store.start_attempt(session, trial, run_dir="/nonexistent", host="bench")
            shift = 0.05 if trial.arm == "variant" else 0.0
            loss = 2.0 / np.sqrt(steps) + 0.5 - shift + rng.normal(0, 0.02, points)
            lr = np.minimum(1.0, steps / 500) * 0.01
            rows = [{"trial_id": trial.id, "attempt_id": attempt.id, "name": name, "step": int(s),
                     "value": float(v), "time": None}
                    for name, values in zip(METRICS, (loss, lr), strict=True)
                    for s, v in zip(steps, values, strict=True)]
            store.upsert_metric_points(session, rows)
            p = 0.6 + (0.05 if trial.arm == "variant" else 0.0)
            store.upsert_eval_items(session, [
                {"trial_id": trial.id, "attempt_id": attempt.id, "step": points,
                 "task": f"task{k}", "item": f"i{i}", "variant": "",
                 "score": float(rng.random() < p)}
                for k in range(tasks) for i in range(items)])
            attempt.last_step = points
            store.end_attempt(session, attempt, exit_code=0, cause="exit 0", trial_status="done")
        session.commit()
    db.close()
    return design.name


def main() -> None:
    import contextlib

    import _harness as bench

    parser = bench.parser(__doc__)
    parser.add_argument("trials", type=int, nargs="?", default=100)
    parser.add_argument("points", type=int, nargs="?", default=10_000)
    args = bench.shrink(parser.parse_args(), trials=4, points=200)
    with bench.temp_home() if args.quick else contextlib.nullcontext():
        started = time.perf_counter()
        n = build(args.trials, args.points)
        seconds = time.perf_counter() - started
    print(f"built {n} in {seconds:.1f} s")
    bench.save(args, {"trials": args.trials, "points": args.points, "build_s": seconds})


if __name__ == "__main__":
    main()
