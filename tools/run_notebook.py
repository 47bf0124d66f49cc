"""Execute notebooks in place and store their outputs, leaving cells flagged `#| slow` (settings.ini `tst_flags`)
with the outputs they already have, unless `--slow` is given.

    python tools/run_notebook.py nbs/02_stack.ipynb [more.ipynb ...] [--slow] [--timeout 600]

With `--slow`, the environment variable `TREEPE_BENCHMARKS=1` also turns on the benchmarks that notebooks gate
behind their `BENCHMARKS` flag. Use it after changing a notebook so that the docs site and readers see fresh outputs without re-running long
benchmarks; run with `--slow` (or `jupyter nbconvert --execute`) to re-measure them. Cells run in order in one
kernel started in the notebook's folder, as in JupyterLab. Stops at the first error.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from configparser import ConfigParser
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def flags() -> list[str]:
    cfg = ConfigParser(delimiters=["="]); cfg.read(ROOT / "settings.ini")
    return cfg["DEFAULT"].get("tst_flags", "").split()


def is_flagged(source: str, names: list[str]) -> bool:
    return any(re.match(rf"^#\|\s*{re.escape(f)}\s*$", line.strip()) for line in source.splitlines() for f in names)


def run(path: Path, slow: bool = False, timeout: int = 600) -> None:
    nb = nbformat.read(path, as_version=4)
    skip = [] if slow else flags()
    if slow: os.environ["TREEPE_BENCHMARKS"] = "1"        # the notebooks' benchmark flag (see their first cells)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or is_flagged(cell.source, skip): continue
            client.execute_cell(cell, i)
    nbformat.write(nb, path)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--slow", action="store_true", help="also run the flagged cells")
    ap.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    args = ap.parse_args()
    for p in args.notebooks:
        print(f"running {p} ...", flush=True); run(p, args.slow, args.timeout)
