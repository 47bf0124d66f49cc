"""The external test of chapter 10aa: the cells of the `sq-cs2js` and `sq-cs2js-seq` grids, trained on our regenerated
BL set, translate Chen et al.'s own 120 programs (the public sample of their CS->JS BL set, read in both directions).

    python tools/coffee_external.py                     # every stored cell whose run folder still holds its best.pt
    python tools/coffee_external.py --work runs/experiments --out nbs/results/experiments/chen120.json

For each stored record of the two grids whose run folder (the record's `out`) still holds its `best.pt`, the script
loads the run, builds the 120 programs as examples of the run's direction and form with the run's own vocabularies
(`coffee_examples`), decodes them as the grid decodes its test split (`test_metrics`: greedy, the run's
`max_output_nodes`), and stores per cell the exact matches, with the code version that made them. Entries of cells
whose run folder is gone are kept; a cell already stored is scored again only with `--again`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from treepe_nb.batching import TaskDataset  # noqa: E402
from treepe_nb.coffee import chen_sample, coffee_examples  # noqa: E402
from treepe_nb.evidence import code_version  # noqa: E402
from treepe_nb.experiments import load_results, test_metrics  # noqa: E402
from treepe_nb.runs import Run, RunFolder  # noqa: E402
from treepe_nb.tasks import Task  # noqa: E402

SAMPLE = ROOT / "nbs" / "data" / "coffee" / "chen_sample"
RESULTS = ROOT / "nbs" / "results" / "experiments"
GRIDS = ("sq-cs2js", "sq-cs2js-seq")


def external(folder: Path, programs: list[dict]) -> dict:
    "One trained cell on Chen et al.'s programs: its exact match, one bool per program, in the sample's order."
    run = Run(folder, "best")
    c = run.config.task
    examples = coffee_examples(programs, c.name, run.src_vocab, run.tgt_vocab, c.options.get("form", "tree"))
    task = Task(run.spec, TaskDataset([]), TaskDataset([]), TaskDataset(examples, "test"), run.src_vocab,
                run.tgt_vocab, run.info)
    m = test_metrics(run.model, task, max_output_nodes=run.config.max_output_nodes, beam=run.config.beam)
    return {"exact_match": m["exact_match"], "exact_matches": m["exact_matches"], "programs": len(examples),
            "step": run.step}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=RESULTS, help="where the grids' records are stored")
    p.add_argument("--out", type=Path, default=RESULTS / "chen120.json", help="the file of the external scores")
    p.add_argument("--again", action="store_true", help="score cells already stored again")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    programs = chen_sample(SAMPLE)
    stored = json.loads(a.out.read_text()) if a.out.exists() else {}
    for grid in GRIDS:
        for row in load_results(a.results, grid):
            key, folder = f"{grid}/{row['cell']}", Path(row["record"]["config"]["out"])
            if key in stored and not a.again: continue
            if not (folder / RunFolder.BEST).is_file():
                print(f"{key}: no best.pt in {folder} (trained elsewhere, or removed): skipped", file=sys.stderr)
                continue
            stored[key] = {**external(folder, programs), "code": code_version()}
            print(f"{key}: {stored[key]['exact_match']:.1%} of {stored[key]['programs']} programs", file=sys.stderr)
            a.out.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
