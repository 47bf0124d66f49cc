"""The pilot of chapter 10aa: what one training step of a CoffeeScript <-> JavaScript cell costs on this machine, at
Shiv & Quirk's size and at the size the `sq-cs2js` grids run, so that the grid's size and budget are chosen from a
measurement.

    python tools/cs2js_pilot.py                 # writes nbs/results/experiments/cs2js_pilot.json

Each size trains the long JS -> CS direction (the stack encoding, batch 64, one thread) for a few steps, twice,
alternating with the other size (machines are shared: a ratio measured in one run, the median of both bursts); the
record keeps the training tokens per second, the seconds per step, and what a grid cell's step budget would take.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from treepe_nb.benchmarks import machine_info  # noqa: E402
from treepe_nb.evidence import code_version  # noqa: E402
from treepe_nb.grids import SQ_CS2JS  # noqa: E402
from treepe_nb.runs import read_metrics  # noqa: E402
from treepe_nb.train import TrainConfig, train  # noqa: E402

SIZES = {"Shiv & Quirk (d_model 256, 4 + 4 layers, d_ff 512)":
             {"d_model": 256, "num_heads": 8, "enc_layers": 4, "dec_layers": 4, "d_ff": 512},
         "the grid's (d_model 64, 2 + 2 layers, d_ff 256)": {"d_model": 64, "num_heads": 4, "enc_layers": 2, "dec_layers": 2}}
STEPS, BURSTS = 12, 2


def burst(model: dict, out: Path) -> tuple[list[float], float]:
    "Train `STEPS` steps; the tokens per second of the steps after the first two, and the seconds of the loop."
    cfg = TrainConfig.from_dict({"task": {"name": "js2cs", "order": "dfs", "sizes": [2000, 50, 50],
                                          "options": {"vocab": "B", "length": "long"}},
                                 "model": {**model, "pe": "stack", "dropout": 0.1}, "steps": STEPS, "batch_size": 64,
                                 "eval_every": 0, "eval_examples": 1, "threads": 1, "out": str(out), "test": False})
    t0 = time.perf_counter()
    train(cfg, progress=False)
    seconds = time.perf_counter() - t0
    rows = read_metrics(out)[0]
    return [r["tokens_per_s"] for r in rows[2:]], seconds


def main():
    torch.set_num_threads(1)
    tps = {name: [] for name in SIZES}
    with tempfile.TemporaryDirectory() as tmp:
        for b in range(BURSTS):
            for i, (name, model) in enumerate(SIZES.items()):
                tps[name] += burst(model, Path(tmp) / f"{i}-{b}")[0]
    rows = {}
    for name, values in tps.items():
        rate = statistics.median(values)
        rows[name] = {"tokens_per_s": rate, "bursts": BURSTS, "steps_per_burst": STEPS}
    small, big = (statistics.median(tps[n]) for n in list(SIZES)[::-1])
    record = {"sizes": rows, "ratio": small / big, "budget_steps": SQ_CS2JS["steps"], "machine": machine_info(),
              "threads": 1, "code": code_version()}
    out = ROOT / "nbs" / "results" / "experiments" / "cs2js_pilot.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(rows, indent=1), f"ratio {record['ratio']:.1f}x", file=sys.stderr)


if __name__ == "__main__":
    main()
