"""The first training step in an environment that has never built the CPU kernels, twice: the first run builds them
(with the notice and its seconds), the second finds them built. Each run is `treepe-train` with its default encoding
(ape-tree) for 2 steps, in a fresh extensions folder, on one thread; writes nbs/results/first_step.json.

    python tools/first_step.py
"""
from __future__ import annotations

import json, os, re, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "nbs/results/first_step.json"


def one_run(ext: Path, out: Path) -> dict:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(ext), "OMP_NUM_THREADS": "1"}
    start, load = time.perf_counter(), os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", "from treepe_nb.cli import train_cli; train_cli()", "--steps", "2",
                           "--eval-every", "0", "--no-test", "--no-progress", "--threads", "1", "--out", str(out),
                           "--overwrite"], env=env, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode: raise SystemExit(done.stderr[-2000:])
    built = re.search(r"built the CPU kernels in (\d+) s", done.stderr)
    return {"seconds": round(seconds, 1), "build_seconds": int(built.group(1)) if built else None,
            "notice": "building the CPU kernels" in done.stderr, "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        ext, out = Path(tmp, "extensions"), Path(tmp, "run")
        runs = [one_run(ext, out), one_run(ext, out)]
    record = {"runs": runs, "cpus": os.cpu_count(), "python": sys.version.split()[0],
              "date": time.strftime("%Y-%m-%d"), "what": "treepe-train, 2 steps, default encoding (ape-tree), 1 thread"}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__": main()
