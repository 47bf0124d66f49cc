"""Every stored experiment record is traceable (the code it ran at, its data), and every resolved verdict in
verdicts.json is resolved by its seed-level interval too."""
import json
import math
import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parent.parent / "nbs" / "results" / "experiments"
RECORDS = sorted(RESULTS.glob("*/*.json"))


def test_records_are_found():
    assert len(RECORDS) > 200


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_record_names_its_code_and_data(path):
    r = json.loads(path.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", r["code"]["commit"] or ""), f"{path}: no commit"
    assert r["code"].get("dirty") in (True, False) or "inferred" in r["code"]
    sizes = r["data"]["sizes"]
    assert len(sizes) == 3 and all(isinstance(n, int) and n > 0 for n in sizes)
    if "exact_matches" in r["test"]: assert len(r["test"]["exact_matches"]) == sizes[2]
    assert r["data"]["duplicates_removed"] is None or {"dev", "test"} <= set(r["data"]["duplicates_removed"])


def test_verdicts_hold_by_both_intervals():
    data = json.loads((RESULTS / "verdicts.json").read_text())
    assert {"10_experiments", "10a_for2lam_experiment"} <= set(data)
    rows = [r for chapter in data.values() for r in chapter]
    assert rows
    keys = {"comparison", "metric", "estimate", "example_interval", "seed_interval", "seeds", "examples", "verdict", "resolved"}
    for r in rows:
        assert keys <= set(r), r
        if r["resolved"] and r["seed_interval"] is not None:
            lo, hi = r["seed_interval"]
            assert lo is not None and hi is not None and (lo > 0 or hi < 0), r
        if r["resolved"] and r["example_interval"] is not None:
            lo, hi = r["example_interval"]
            assert lo > 0 or hi < 0, r
        if r["resolved"] and r["seed_interval"] is None and r["example_interval"] is None:
            assert r["p"] < 0.05, r
        if r["seeds"] == 1 and r["seed_interval"] is not None: assert not r["resolved"], r
