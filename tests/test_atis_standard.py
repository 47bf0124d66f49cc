"""Dong & Lapata's argument-identified ATIS (issue 54): the vendored files are the ones SOURCE.md names, byte for byte,
and they give the standard split, every form read, through `semparse_splits` and the task `atis`."""
import hashlib
import re

import pytest

from treepe_nb.semparse import default_data, read_atis_tsv, semparse_splits
from treepe_nb.trees import Tree

FILES = {"train": 4433, "dev": 491, "test": 448}


def _listed_sha256():
    "file name -> sha256, from the tables of the Dong & Lapata section of nbs/data/semparse/SOURCE.md (ATIS, and GEO's split)."
    text = (default_data() / "SOURCE.md").read_text()
    section = text[text.index("## Dong & Lapata"):]
    return dict(re.findall(r"^\| `((?:atis|geo)_\w+\.tsv)` \|.*\| `([0-9a-f]{64})` \|$", section, flags=re.M))


def test_vendored_files_match_their_provenance():
    listed = _listed_sha256()
    assert set(listed) == {f"{d}_{s}.tsv" for d in ("atis", "geo") for s in FILES}
    for name, sha in listed.items():
        assert hashlib.sha256((default_data() / name).read_bytes()).hexdigest() == sha, name
    assert "bd419acf391a9f5fe9eeedbcf7799b350138a6da" in (default_data() / "SOURCE.md").read_text()


@pytest.mark.parametrize("split", FILES)
def test_every_line_reads_and_round_trips(split):
    path = default_data() / f"atis_{split}.tsv"
    pairs = read_atis_tsv(path)
    lines = path.read_text().splitlines()
    assert len(pairs) == len(lines) == FILES[split]
    for (words, tree), line in zip(pairs, lines):
        question, form = line.split("\t")
        assert words == question.split()
        assert Tree.from_sexpr(form) == tree                 # the library's S-expression reader agrees
        assert Tree.from_sexpr(tree.to_sexpr()) == tree      # and the tree goes to text and back


def test_standard_split_sizes_and_defaults():
    splits, report = semparse_splits("atis", source="dong-lapata")
    assert {s: len(v) for s, v in splits.items()} == FILES
    assert report == {"forms whose variables were renamed": 0}
    old, _ = semparse_splits("atis")                          # the default source is unchanged (stored records)
    assert [len(v) for v in old.values()] == [4012, 434, 403]


def test_text2sql_files_match_their_provenance():
    "The text2sql-data section's files (GEO, ATIS placed by the UW splits, the GeoQuery database) are the ones it names."
    text = (default_data() / "SOURCE.md").read_text()
    section = text[text.index("## text2sql-data"):text.index("## Dong & Lapata")]
    listed = dict(re.findall(r"^\| `([\w.-]+\.txt)` \| `data/[\w/.-]+` \| `([0-9a-f]{64})` \|$", section, flags=re.M))
    assert set(listed) == {"geography-logic.txt", "atis-logic.txt", "geography-db.txt",
                           *(f"atis.uw.{s}.txt" for s in FILES)}
    for name, sha in listed.items():
        assert hashlib.sha256((default_data() / name).read_bytes()).hexdigest() == sha, name
