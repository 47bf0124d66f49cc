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


def test_paper_effects_name_their_source_and_point_to_the_claim():
    """A row that carries the paper's own effect (chapter 10a: claim (d) at the paper's size, Table 1) names where the
    paper states it, and the effect is a finite number; rows without one simply lack both keys (older readers)."""
    data = json.loads((RESULTS / "verdicts.json").read_text())
    carried = [r for chapter in data.values() for r in chapter if "paper_effect" in r]
    assert carried, "no row carries a paper's effect (chapter 10a writes them for claim (d))"
    for r in carried:
        assert isinstance(r["paper_effect"], float) and math.isfinite(r["paper_effect"]), r
        assert r.get("paper_source"), r
    for r in (r for chapter in data.values() for r in chapter if "paper_effect" not in r):
        assert "paper_source" not in r, r
    d = {r["comparison"].split(":")[0]: r for r in data["10a_for2lam_experiment"] if "paper_effect" in r}
    assert abs(d["atis (paper size, r7)"]["paper_effect"] - (86.4 - 84.4) / 100) < 1e-12      # Table 1: stack − seq2seq
    assert abs(d["geo (paper size, r9)"]["paper_effect"] - (84.6 - 81.1) / 100) < 1e-12


def test_no_resolved_verdict_rests_on_a_zero_width_interval():
    "An interval of zero width (every seed the same value) is no verdict (chapter 9e's `zero_width`)."
    data = json.loads((RESULTS / "verdicts.json").read_text())
    for r in (r for chapter in data.values() for r in chapter if r["resolved"]):
        for iv in (r["example_interval"], r["seed_interval"]):
            if iv is not None and None not in iv:
                assert abs(iv[1] - iv[0]) > 1e-9 * max(1.0, abs(iv[0]), abs(iv[1])), r
