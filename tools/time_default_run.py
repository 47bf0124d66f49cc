"""Time the README's default training run (`treepe-train` with no options, into a temporary `--out`) and write a
record to `nbs/results/default_run.json`: wall time, what it reached (steps, dev exact match, why it stopped early)
and the machine (CPU threads, load average before and after). `nbs/index.ipynb` reads the record into the README.

    python tools/time_default_run.py [--out-json nbs/results/default_run.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def command() -> list[str]:
    "The installed `treepe-train` console script, or the same entry point through this Python."
    exe = shutil.which("treepe-train")
    if exe: return [exe]
    return [sys.executable, "-c", "import sys; from treepe_nb.cli import train_cli; sys.exit(train_cli())"]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-json", type=Path, default=ROOT / "nbs/results/default_run.json")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TREEPE_BENCHMARKS"): env.pop(k, None)   # the default, as a user runs it
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "default"
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        done = subprocess.run(command() + ["--out", str(run)], env=env, cwd=tmp,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        load_after = os.getloadavg()
        if done.returncode != 0:
            sys.exit(f"treepe-train failed ({done.returncode}):\n{done.stderr[-3000:]}")
        summary = json.loads((run / "summary.json").read_text())
        planned = yaml.safe_load((run / "config.yaml").read_text())["steps"]
    record = {"command": "treepe-train", "seconds": round(seconds, 1), "steps": summary["step"], "steps_planned": planned,
              "best_step": summary["best_step"], "stopped_early": summary["stopped_early"],
              "dev_exact_match": summary["dev"]["exact_match"] if summary["dev"] else None,
              "measured": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": {"cpu_threads": os.cpu_count(), "python": platform.python_version(),
                          "load_average_1min_before": round(load_before[0], 2),
                          "load_average_1min_after": round(load_after[0], 2)}}
    args.out_json.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
