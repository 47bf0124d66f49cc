"""Measure what a reader's "Run All Cells" costs: every notebook run top to bottom in a fresh kernel, as JupyterLab
does (every cell, `#| slow` ones included, with the benchmark flag `TREEPE_BENCHMARKS` unset), timing the whole run
and recording the kernel's peak resident memory. The notebooks are executed in memory and never written back.

    python tools/runall.py                         # every notebook -> nbs/results/runall.json
    python tools/runall.py nbs/04_algebraic.ipynb  # some of them (their rows are replaced, the others kept)
    python tools/runall.py --benchmarks            # with TREEPE_BENCHMARKS=1: the gated benchmarks run too

Rows measured with `--benchmarks` go to the table's `with_benchmarks` section, which the notebooks' flag cell
(`treepe_nb.showdoc.benchmarks_flag`) reads to say what turning the benchmarks on costs.

Each row: `seconds` (wall time of all cells, kernel start excluded), `peak_rss_mb` (the kernel's own peak RSS,
`getrusage(RUSAGE_SELF).ru_maxrss`), `children_peak_rss_mb` (the largest peak RSS of a process the kernel started
and waited for, e.g. a training run), the three slowest cells, and the machine (CPU threads, torch threads, load
average) so that a row measured on a busy machine can be read as such. `tests/test_notebooks.py` checks the table
against the limits below.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / "nbs"
TABLE = NBS / "results" / "runall.json"
LIMIT_SECONDS = 90         # "about a minute" on a laptop CPU, with room for a busy machine
LIMIT_RSS_MB = 2048        # well under the memory of an 8 GB laptop

_PROBE = """import resource as _r, sys as _s, json as _j
_k = 1 if _s.platform == 'darwin' else 1024   # ru_maxrss is bytes on macOS, KiB on Linux
print(_j.dumps({'self': _r.getrusage(_r.RUSAGE_SELF).ru_maxrss * _k / 2**20,
                'children': _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss * _k / 2**20}))"""
_THREADS = "import torch as _t; print(_t.get_num_threads())"


def notebooks() -> list[Path]:
    "The notebooks a reader opens: every `nbs/*.ipynb` but `_*` drafts and checkpoints."
    return sorted(p for p in NBS.glob("*.ipynb") if not p.name.startswith(("_", ".")))


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def run_all(path: Path, timeout: int = 900, benchmarks: bool = False) -> dict:
    "Run every cell of `path` in a fresh kernel started in its folder; wall time, peak RSS and the slowest cells."
    nb = nbformat.read(path, as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "TREEPE_BENCHMARKS"}
    if benchmarks: env["TREEPE_BENCHMARKS"] = "1"
    # this checkout's code first (an editable install elsewhere would otherwise win)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    cells = []
    with client.setup_kernel(env=env):
        t0 = time.perf_counter()
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code": continue
            c0 = time.perf_counter()
            client.execute_cell(cell, i)
            cells.append((time.perf_counter() - c0, i, cell.source.splitlines()[0][:60] if cell.source else ""))
        seconds = time.perf_counter() - t0
        probe = nbformat.v4.new_code_cell(_PROBE)
        threads = nbformat.v4.new_code_cell(_THREADS)
        nb.cells += [probe, threads]
        client.execute_cell(probe, len(nb.cells) - 2)
        client.execute_cell(threads, len(nb.cells) - 1)
    rss = json.loads(_stdout(probe))
    slowest = sorted(cells, reverse=True)[:3]
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(rss["self"]),
            "children_peak_rss_mb": round(rss["children"]), "torch_threads": int(_stdout(threads)), "cells": len(cells),
            "slowest_cells": [{"cell": i, "seconds": round(s, 1), "first_line": line} for s, i, line in slowest]}


def machine() -> dict:
    return {"cpu_threads": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook in nbs/")
    ap.add_argument("--out", type=Path, default=TABLE, help=f"table to write (default {TABLE.relative_to(ROOT)})")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    ap.add_argument("--benchmarks", action="store_true", help="with TREEPE_BENCHMARKS=1 (gated benchmarks too)")
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or notebooks()
    table = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows = table.setdefault("with_benchmarks" if args.benchmarks else "notebooks", {})
    for p in paths:
        print(f"{p.name:24s} ...", end=" ", flush=True)
        before = machine()
        row = run_all(p, args.timeout, args.benchmarks)
        row |= {"machine": before, "measured": time.strftime("%Y-%m-%d %H:%M")}
        rows[p.name] = row
        table["limits"] = {"seconds": LIMIT_SECONDS, "peak_rss_mb": LIMIT_RSS_MB}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")   # after each: partial runs kept
        print(f"{row['seconds']:7.1f} s  {row['peak_rss_mb']:6d} MB  (children {row['children_peak_rss_mb']} MB, "
              f"load {before['load_average_1min']})", flush=True)


if __name__ == "__main__":
    main()
