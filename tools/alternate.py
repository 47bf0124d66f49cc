"""What `tools/throughput.py` and `tools/ape_cost.py` share: measurements of older commits of the package, each run
in a fresh process with one torch thread that prints one JSON line, the sides alternated so that the machine's load
hits them alike."""
from __future__ import annotations

import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def extract(commit: str, dest: Path) -> Path:
    "The `treepe_nb` package of `commit`, extracted into `dest` (made) with `git archive`; returns `dest`."
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "treepe_nb"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def options(ap: argparse.ArgumentParser, workers: dict, measurements, out: Path, repeat: int):
    "The options both scripts take: the hidden --worker, rounds, repeats, the cell's steps, --only and --out."
    ap.add_argument("--worker", choices=list(workers), help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2, help="alternated rounds (one process per side each)")
    ap.add_argument("--repeat", type=int, default=repeat, help="timed repeats inside a process (the best is kept)")
    ap.add_argument("--cell-steps", type=int, default=1000, help="training steps of the chapter-10 cell")
    ap.add_argument("--only", nargs="+", choices=list(measurements), help="run only these measurements")
    ap.add_argument("--out", type=Path, default=out)


def as_worker(args, workers: dict) -> bool:
    "In a worker process (--worker NAME): run that measurement with one torch thread and print its JSON; True."
    if not args.worker: return False
    import torch
    torch.set_num_threads(1)
    print(json.dumps(workers[args.worker](args)))
    return True


def run_worker(script: str, root: Path, name: str, args, *extra: str) -> dict:
    "Run measurement `name` of `script` in a fresh process that imports `treepe_nb` from `root`; its JSON result."
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(script).resolve()), "--worker", name, "--cell-steps", str(args.cell_steps),
           "--repeat", str(args.repeat), *extra]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode: sys.exit(f"worker {name} in {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
