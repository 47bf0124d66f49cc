"""Estimate how long the README's example config (`my_run.yaml`, the first ```yaml block of `nbs/index.ipynb`) runs
on this machine: time its training steps (after the first, which builds caches) and one evaluation, then add them up
over its steps and evaluations. Writes `nbs/results/config_example.json`; `nbs/index.ipynb` reads it into the README.

    python tools/time_config_example.py [--steps 30] [--out-json nbs/results/config_example.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def example_config() -> dict:
    "The README's `my_run.yaml`: the first YAML block of the home page's notebook."
    cells = json.loads((ROOT / "nbs/index.ipynb").read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30, help="training steps timed after the first (default 30)")
    ap.add_argument("--out-json", type=Path, default=ROOT / "nbs/results/config_example.json")
    args = ap.parse_args(argv)
    from treepe_nb.config import TrainConfig, nested_settings
    from treepe_nb.train import evaluate, read_metrics, train
    from treepe_nb.runs import Run
    example = example_config()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(**{**nested_settings(example, flat=False), "out": f"{tmp}/run", "eval_every": 0})
        t0 = time.perf_counter()
        train(cfg, stop_at=1, progress=False, log_every=0)              # the first step: data, model, caches
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        train(TrainConfig.from_dict(cfg.to_dict()), resume=True, stop_at=1 + args.steps, progress=False, log_every=0)
        per_step = (time.perf_counter() - t0) / args.steps               # includes the resume's set-up: an upper bound
        run = Run(f"{tmp}/run", "last", data=True)
        t0 = time.perf_counter()
        evaluate(run.model, run.task, "dev", decode_examples=cfg.eval_examples or None,
                 max_output_nodes=cfg.max_output_nodes)
        per_eval = time.perf_counter() - t0
    full = TrainConfig(**nested_settings(example, flat=False))
    evaluations = full.steps // full.eval_every if full.eval_every else 1
    estimate = first + per_step * (full.steps - 1) + per_eval * (evaluations + 1)   # and best.pt on test at the end
    record = {"config": example, "steps": full.steps, "evaluations": evaluations, "first_step_seconds": round(first, 2),
              "seconds_per_step": round(per_step, 3), "steps_timed": args.steps, "seconds_per_evaluation": round(per_eval, 2),
              "estimate_seconds": round(estimate), "threads": cfg.threads or 1,
              "measured": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": {"cpu_threads": os.cpu_count(), "python": platform.python_version(),
                          "load_average_1min_before": round(load_before[0], 2),
                          "load_average_1min_after": round(os.getloadavg()[0], 2)}}
    args.out_json.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
