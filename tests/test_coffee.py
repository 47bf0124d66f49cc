"""Chapter 08ca (CoffeeScript ↔ JavaScript): the generator's grammar, bounds and seeds; the stored sets read without
Node; the tasks build; and, where Node and the pinned toolchain are installed (`npm ci --prefix tools/coffee`),
Chen et al.'s 120 programs reproduced, the stored files regenerated from their programs, and a set regenerated
bit-identically from its seed."""
from __future__ import annotations

import gzip, json, re, string
from pathlib import Path

import numpy as np
import pytest

from treepe_nb.coffee import (COFFEE_DATA, LAYOUT, LENGTHS, SPLITS, VOCABULARIES, coffee_programs, coffee_record,
                              coffee_set, coffee_text, read_coffee_set, toolchain_problem, translate_coffee,
                              write_coffee_set)
from treepe_nb.generators import task_rng
from treepe_nb.tasks import make_task

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "nbs" / "data" / "coffee" / "chen_sample"
PROBLEM = toolchain_problem()
needs_node = pytest.mark.skipif(PROBLEM is not None, reason=f"the CoffeeScript toolchain cannot run: {PROBLEM}")

KEYWORDS = {"=", "+", "*", "==", "if", "while", "else", "then"}
# a line of a program: tabs, then a statement of the grammar (the one-line if-then-else, a block header, else, or a
# simple statement with a chain of one kind of postfix conditions)
EXPR = r"[a-z0-9]( (\+|\*|==) [a-z0-9])*"
SIMPLE = rf"([a-z] = )?{EXPR}"
SHORT = rf"{SIMPLE}(( if {EXPR})*|( while {EXPR})*)"
LINE = re.compile(rf"\t*(if {EXPR} then {SHORT} else {SHORT}|(if|while) {EXPR}|else|{SHORT})")


def layout_free(program: str) -> int:
    "Tokens without layout, counted from the text (`then` stands for layout)."
    return sum(w != "then" for w in program.split())


@pytest.mark.parametrize("vocab", sorted(VOCABULARIES))
@pytest.mark.parametrize("length", sorted(LENGTHS))
def test_generator_grammar_and_bounds(vocab, length):
    programs = coffee_programs(task_rng(5, vocab, length), 300, vocab, length)
    names, consts = VOCABULARIES[vocab]
    lo, hi = LENGTHS[length]
    for p in programs:
        assert p.endswith("\n") and not p.startswith(("\t", " ", "else"))
        for line in p.rstrip("\n").split("\n"):
            assert LINE.fullmatch(line), (line, p)
        assert set(p.split()) <= KEYWORDS | set(names) | set(consts), p
        assert lo <= layout_free(p) <= hi, p
        assert 1 <= sum(not line.startswith(("\t", "else")) for line in p.rstrip("\n").split("\n")) <= 4


def test_generator_seeds():
    a = coffee_programs(task_rng(1, "x"), 200)
    assert a == coffee_programs(task_rng(1, "x"), 200)
    assert a != coffee_programs(task_rng(2, "x"), 200)
    assert len(set(a)) > 190


def test_text_from_tokens():
    assert coffee_text(["x", "=", "1", "if", "a", "TERMINATOR"]) == "x = 1 if a\n"
    assert coffee_text(["if", "a", "INDENT 1", "b", "OUTDENT 1", "else", "INDENT 1", "c", "OUTDENT 1", "TERMINATOR"]) \
        == "if a\n\tb\nelse\n\tc\n"


def test_stored_sets_read_without_node():
    index = json.loads((COFFEE_DATA / "SETS.json").read_text())
    assert set(index) == {"AL", "AS", "BL", "BS"}
    for name, entry in index.items():
        splits, meta = read_coffee_set(COFFEE_DATA / entry["file"])
        assert [len(splits[k]) for k in SPLITS] == entry["sizes"] == meta["sizes"]
        lo, hi = LENGTHS[meta["length"]]
        for k in SPLITS:
            r = splits[k][0]
            assert lo <= sum(t.split(" ")[0] not in LAYOUT for t in r["cs_tokens"]) <= hi
            assert r["cs_tree"][0][0] == "Block" and r["js_tree"][0][0] == "BlockStatement"
        texts = [{r["cs"] for r in splits[k]} for k in SPLITS]
        assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])
    assert index["BL"]["sizes"] == [100_000, 10_000, 10_000]


def test_tasks_build():
    for direction in ("cs2js", "js2cs"):
        task = make_task(direction, sizes=(100, 10, 10), vocab="A", length="short")
        assert (task.source, task.target, task.n) == ("tree", "tree", 2)
        keys = [{e.meta["cs"] for e in d} for d in task.splits.values()]
        assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    seq = make_task("js2cs", sizes=(30, 5, 5), form="tokens")
    assert (seq.source, seq.target) == ("sequence", "sequence")
    assert make_task("cs2js", sizes=(20, 5, 5), seed=3).train[0].meta == make_task("cs2js", sizes=(20, 5, 5), seed=3).train[0].meta


def read_sample() -> list[dict]:
    out = []
    for split in ("train", "valid", "test"):
        out += json.loads(gzip.decompress((SAMPLE / f"preprocessed_progs_{split}.json.gz").read_bytes()))
    return out


def preorder(t: dict) -> tuple[list, list]:
    labels, parents, stack = [], [], [(t, -1)]
    while stack:
        node, p = stack.pop()
        labels.append(node["root"].rstrip("\n")); parents.append(p)
        stack.extend((c, len(labels) - 1) for c in reversed(node["children"]))
    return labels, parents


@needs_node
def test_chen_sample_reproduced():
    sample = read_sample()
    tokens = [[f"{t['type']} {t['value']}" if t["type"] in ("INDENT", "OUTDENT") else t["type"] if t["type"] == "TERMINATOR"
               else t["value"] for t in p["source_prog"]] for p in sample]
    ours = translate_coffee([coffee_text(t) for t in tokens])
    for p, t, r in zip(sample, tokens, ours):
        assert [[a, b] for a, b in r["cs_tokens"]] == [[x["type"], x["value"].replace("\\n", "\n")] for x in p["source_prog"]]
        assert coffee_record("", r)["cs_tokens"] == t
        assert [list(x) for x in r["cs_tree"]] == [list(x) for x in preorder(p["source_ast"])]
        assert [list(x) for x in r["js_tree"]] == [list(x) for x in preorder(p["target_ast"])]


@needs_node
def test_stored_files_match_node():
    splits, _ = read_coffee_set(COFFEE_DATA / "BL.bin.gz")
    some = [splits[k][i] for k in SPLITS for i in (0, 1, 2, 500)]
    for stored, r in zip(some, translate_coffee([s["cs"] for s in some])):
        fresh = coffee_record(stored["cs"], r)
        assert fresh["cs_tokens"] == stored["cs_tokens"] and fresh["js_tokens"] == stored["js_tokens"]
        for side in ("cs_tree", "js_tree"):
            assert [list(x) for x in fresh[side]] == [list(x) for x in stored[side]]


@needs_node
def test_regeneration_is_bit_identical(tmp_path):
    shas = [write_coffee_set(coffee_set("B", "short", (60, 10, 10), seed=7), tmp_path / f"{i}.bin.gz", {"seed": 7})
            for i in range(2)]
    assert shas[0] == shas[1]
    assert (tmp_path / "0.bin.gz").read_bytes() == (tmp_path / "1.bin.gz").read_bytes()


def test_missing_toolchain_is_named(tmp_path):
    problem = toolchain_problem(tmp_path)
    assert problem is not None and ("npm ci --prefix tools/coffee" in problem or "translate.js" in problem
                                    or "node" in problem)
    with pytest.raises(Exception, match="npm ci --prefix tools/coffee|translate.js|node"):
        translate_coffee(["x\n"], toolchain=tmp_path)


@pytest.mark.long   # most of a minute: run by --long (CI)
def test_predict_reads_programs_of_either_language(tmp_path):
    "`treepe-predict RUN --format js|coffee`: one output per program (blocks of lines), the language checked against the run."
    import subprocess, sys
    from treepe_nb.coffee import toolchain_problem
    if (problem := toolchain_problem()) is not None: pytest.skip(problem)
    from treepe_nb.model import ModelConfig
    from treepe_nb.tasks import TaskConfig
    from treepe_nb.train import TrainConfig, train
    for form, pe in (("tree", "stack"), ("tokens", "sinusoidal")):
        out = tmp_path / form
        train(TrainConfig(TaskConfig("js2cs", sizes=(32, 4, 4), options={"form": form}), ModelConfig(
              pe=pe, d_model=16, num_heads=2, enc_layers=1, dec_layers=1), steps=2, eval_every=0, eval_examples=1,
              threads=1, out=str(out)), progress=False)
        cli = [sys.executable, "-c", "from treepe_nb.predict import predict_cli; predict_cli()", str(out), "-"]
        done = subprocess.run([*cli, "--format", "js", "--jsonl"], capture_output=True, text=True, timeout=300,
                              input="var a;\na = 1 + 2;\n\nvar b;\nif (b === 3) {\n  b = 4;\n}\n")
        assert done.returncode == 0, done.stderr[-2000:]
        rows = [json.loads(l) for l in done.stdout.splitlines()]
        assert [(r["line"], r["last_line"]) for r in rows] == [(1, 2), (4, 7)] and all(r["output"] is not None for r in rows)
        done = subprocess.run([*cli, "--format", "coffee"], capture_output=True, text=True, timeout=300, input="a = 1\n")
        assert done.returncode == 2 and "a js2cs run translates JavaScript programs" in done.stderr, done.stderr[-2000:]


def test_predict_reads_all_programs_through_one_node_process(tmp_path, monkeypatch):
    "`predict` started one Node process per program; now one for all, and a refused program fails alone (errors='skip')."
    from treepe_nb import coffee
    if (problem := coffee.toolchain_problem()) is not None: pytest.skip(problem)
    from treepe_nb.model import ModelConfig
    from treepe_nb.tasks import TaskConfig
    from treepe_nb.train import TrainConfig, train
    from treepe_nb.predict import load_run, predict
    train(TrainConfig(TaskConfig("js2cs", sizes=(32, 4, 4)), ModelConfig(pe="stack", d_model=16, num_heads=2,
          enc_layers=1, dec_layers=1), steps=2, eval_every=0, eval_examples=1, threads=1, out=str(tmp_path / "r")),
          progress=False)
    calls, node = [], coffee._node
    monkeypatch.setattr(coffee, "_node", lambda *a: calls.append(a) or node(*a))
    programs = ["var a;\na = 1 + 2;", "var b = = 3;", "", "if (c === 3) {\n  c = 4;\n}"]
    got = predict(load_run(tmp_path / "r"), programs, format="js", errors="skip")
    assert len(calls) == 1, len(calls)
    assert [p.error is None for p in got] == [True, False, False, True], [p.error for p in got]
    assert "does not parse" in got[1].error and "expected a program's text" in got[2].error
