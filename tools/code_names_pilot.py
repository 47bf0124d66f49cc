"""The pilot of the function-names grids (`code-names-py`, `code-names-js`, chapter 9h): what one training step of a
cell costs on this machine for each kind of source encoding, so that the grids' budget is chosen from a measurement.

    python tools/code_names_pilot.py                 # writes nbs/results/experiments/code_names_pilot.json

Each encoding trains its grid cell (every setting as the grid has it, one thread, one dev example scored at the end)
for a few steps, twice, in turns with the others (machines are shared: ratios within one run, the median of both
bursts); the record keeps the training loop's seconds per step, the tokens per second after the first two steps, and
what the grid's step budget would take per cell and per seed of both grids. The `none` cell also trains with random
batches (`length_groups=0`), so that what drawing batches of similar length saves is measured in the same run.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from treepe_nb.benchmarks import machine_info  # noqa: E402
from treepe_nb.evidence import clean_code  # noqa: E402
from treepe_nb.grids import CODE_NAMES, CODE_SOURCES, grid_configs  # noqa: E402
from treepe_nb.runs import read_metrics  # noqa: E402
from treepe_nb.train import train  # noqa: E402

STEPS, BURSTS, GRID = 40, 2, "code-names-py"
RANDOM = "none, random batches"   # the `none` cell without length groups: what grouping saves, measured in the same run
ENCODINGS = (*CODE_SOURCES, RANDOM)


def burst(name: str, out: Path) -> tuple[float, list[float]]:
    "Train `STEPS` steps of the grid's cell for `name`: the loop's seconds per step, tokens per second after two steps."
    src = "none" if name == RANDOM else name
    label = f"code-names-dfs-{src}+sinusoidal-s0" if src != "sinusoidal" else "code-names-dfs-sinusoidal-s0"
    cfg = replace(grid_configs(GRID, work=str(out))[label], steps=STEPS, eval_every=0, eval_examples=1, test=False,
                  min_steps=0, patience=0, out=str(out), threads=1)
    if name == RANDOM: cfg = replace(cfg, length_groups=0)
    summary = train(cfg, progress=False)
    return summary["seconds"] / STEPS, [r["tokens_per_s"] for r in read_metrics(out)[0][2:]]


def main():
    torch.set_num_threads(1)
    seconds, tps = {e: [] for e in ENCODINGS}, {e: [] for e in ENCODINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for b in range(BURSTS):
            for e in ENCODINGS:
                s, t = burst(e, Path(tmp) / f"{e.replace(', ', '-').replace(' ', '-')}-{b}")
                seconds[e].append(s); tps[e] += t
    rows = {}
    for e in ENCODINGS:
        per_step = statistics.median(seconds[e])
        rows[e] = {"seconds_per_step": per_step, "tokens_per_s": statistics.median(tps[e]), "bursts": BURSTS,
                   "steps_per_burst": STEPS, "budget_hours": per_step * CODE_NAMES["steps"] / 3600}
    random = rows.pop(RANDOM)
    hours = statistics.mean(r["budget_hours"] for r in rows.values())
    record = {"grid": GRID, "encodings": rows, "random_batches": {"source": "none", **random},
              "budget_steps": CODE_NAMES["steps"], "sources": list(CODE_SOURCES),
              "cells_per_seed": 2 * len(CODE_SOURCES), "thread_hours_per_seed_at_budget": hours * 2 * len(CODE_SOURCES),
              "machine": machine_info(), "threads": 1, "code": clean_code()}
    out = ROOT / "nbs" / "results" / "experiments" / "code_names_pilot.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(rows, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
