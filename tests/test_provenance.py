"""Records name code someone can check out (Evidence, round 3, item 2): the grid runner refuses to store a record while
the package has uncommitted changes, unless `--dirty REASON` says why, and the record then keeps the reason."""
import json

import pytest

import treepe_nb.evidence as evidence
from treepe_nb.evidence import clean_code
from treepe_nb.experiments import experiments_cli, run_cell
from treepe_nb.grids import grid_configs

DIRTY = {"commit": "0" * 40, "dirty": True, "version": "test"}
CELL = "seq-copy-dfs-sinusoidal-s0"


@pytest.fixture
def dirty_tree(monkeypatch):
    monkeypatch.setattr(evidence, "code_version", lambda: dict(DIRTY))


def test_clean_code_refuses_a_dirty_tree_without_a_reason(dirty_tree):
    for reason in (None, "", "  "):
        with pytest.raises(ValueError, match="has uncommitted changes.*dirty=REASON"): clean_code(reason)
    assert clean_code("a pilot rung") == {**DIRTY, "dirty_reason": "a pilot rung"}


def test_clean_code_of_a_clean_tree_is_its_version(monkeypatch):
    clean = {"commit": "1" * 40, "dirty": False, "version": "test"}
    monkeypatch.setattr(evidence, "code_version", lambda: dict(clean))
    assert clean_code() == clean == clean_code("ignored: nothing is dirty")


def test_the_grid_command_refuses_a_dirty_tree_before_training(dirty_tree, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        experiments_cli(["run", "table2a", "--only", CELL, "--results", str(tmp_path / "res"), "--work", str(tmp_path / "w")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "has uncommitted changes" in err and "--dirty REASON" in err, err
    assert not list((tmp_path / "res").rglob("*.json")) and not list((tmp_path / "w").rglob("*"))


def test_a_record_keeps_the_reason_it_was_allowed(dirty_tree, tmp_path):
    cfg = grid_configs("table2a", (0,), tmp_path / "w", steps=2, eval_every=0, batch_size=4)[CELL]
    record = run_cell(cfg, tmp_path / "cell.json", clean_code("a test of provenance"))
    stored = json.loads((tmp_path / "cell.json").read_text())
    assert record["code"]["dirty_reason"] == stored["code"]["dirty_reason"] == "a test of provenance"
