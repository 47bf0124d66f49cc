"""Regenerate the stored CoffeeScript / JavaScript sets of chapter 08ca_coffee (Chen et al.'s translation benchmark).

    npm ci --prefix tools/coffee                       # once: the pinned coffeescript and acorn
    python tools/build_coffee_corpus.py                # every set at its stored size, into treepe_nb/data/coffee
    python tools/build_coffee_corpus.py --vocab B --length long --sizes 100000 10000 10000 --out DIR

The rules:

* Programs: `treepe_nb.coffee.coffee_set(vocab, length, sizes, seed)`: seeded draws of Chen et al.'s CoffeeScript
  grammar, compiled by CoffeeScript and parsed by acorn (`tools/coffee/translate.js`), no two programs of a set
  sharing their CoffeeScript tree, JavaScript tree or tokens. The same seed, sizes and toolchain give the same
  bytes (the test suite checks it on a small set).
* Output: `{out}/{NAME}.bin.gz` per set (`NAME` is Chen et al.'s: `BL` = vocabulary B, long programs), written by
  `write_coffee_set` with the seed, sizes and toolchain versions in its header, and `{out}/SETS.json`: per set its
  file, sha256, sizes, seed and versions (entries of sets not rebuilt are kept).
* Default sizes (`STORED`): the long B set at Chen et al.'s full size (100,000 / 10,000 / 10,000), the three others
  at 10,000 / 1,000 / 1,000 (package data stays small; build them larger with `--sizes`).

The script stops (exit status 1, a message) when Node or the toolchain is missing, or a program does not compile.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from treepe_nb.coffee import (COFFEE_DATA, ToolchainMissing, coffee_set, set_name,  # noqa: E402
                              toolchain_versions, write_coffee_set)

STORED = {("B", "long"): (100_000, 10_000, 10_000), ("B", "short"): (10_000, 1_000, 1_000),
          ("A", "long"): (10_000, 1_000, 1_000), ("A", "short"): (10_000, 1_000, 1_000)}


def build(vocab: str, length: str, sizes, seed: int, out: Path) -> dict:
    "Generate one set, write it, return its entry of SETS.json."
    start = time.perf_counter()
    versions = toolchain_versions()
    splits = coffee_set(vocab, length, sizes, seed)
    name = set_name(vocab, length)
    meta = dict(set=name, vocab=vocab, length=length, sizes=list(sizes), seed=seed, toolchain=versions)
    sha = write_coffee_set(splits, out / f"{name}.bin.gz", meta)
    seconds = time.perf_counter() - start
    print(f"{name}: {sum(sizes)} programs in {seconds:.0f} s ({sum(sizes) / seconds:.0f} programs/s), "
          f"{(out / f'{name}.bin.gz').stat().st_size / 1e6:.2f} MB, sha256 {sha}")
    return dict(meta, file=f"{name}.bin.gz", sha256=sha, bytes=(out / f"{name}.bin.gz").stat().st_size)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", choices=("A", "B"), help="one vocabulary (default: both)")
    p.add_argument("--length", choices=("short", "long"), help="one length (default: both)")
    p.add_argument("--sizes", type=int, nargs=3, metavar=("TRAIN", "DEV", "TEST"), help="default: STORED")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=COFFEE_DATA)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    index = args.out / "SETS.json"
    sets = json.loads(index.read_text()) if index.is_file() else {}
    try:
        for (vocab, length), sizes in STORED.items():
            if args.vocab not in (None, vocab) or args.length not in (None, length): continue
            sets[set_name(vocab, length)] = build(vocab, length, args.sizes or sizes, args.seed, args.out)
    except (ToolchainMissing, ValueError) as e:
        print(f"build_coffee_corpus: {e}", file=sys.stderr)
        return 1
    index.write_text(json.dumps(dict(sorted(sets.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
