"""Tests of `treepe_nb.for2lam`: every generated translation checked by running both programs (the oracle), the
For interpreter checked against Python itself, determinism, the limits, and programs far deeper than Python's
recursion limit. `pytest --slow` runs a ten times larger oracle."""
import numpy as np
import pytest

from treepe_nb.for2lam import (KINDS, VARIABLES, chen_translation, for2lam_pairs, for_source, for_to_lambda, lambda_source, random_for,
                               run_for, run_lambda)
from treepe_nb.trees import Tree


def random_inputs(rng):
    return dict(zip(VARIABLES, rng.integers(-9, 10, len(VARIABLES)).tolist()))


def disagreements(pairs, rng, inputs=5):
    "The (source, target, inputs) where the For and the Lambda program end in different states."
    bad = []
    for source, target in pairs:
        for _ in range(inputs):
            values = random_inputs(rng)
            if run_for(source, values) != run_lambda(target, values): bad.append((source, target, values))
    return bad


@pytest.mark.parametrize("kind", ["short", "long"])
def test_oracle(kind):
    pairs = for2lam_pairs(np.random.default_rng(11), 400, kind, translation="cps")
    assert disagreements(pairs, np.random.default_rng(12)) == []


@pytest.mark.parametrize("kind", ["short", "long"])
def test_oracle_large(request, kind):
    if not request.config.getoption("--slow"): pytest.skip("the large oracle runs with --slow")
    pairs = for2lam_pairs(np.random.default_rng(21), 5000, kind, translation="cps")
    assert disagreements(pairs, np.random.default_rng(22), inputs=8) == []


# ---- a third semantics: For compiled to Python and run by Python itself (recursive: small programs only) ----
def python_source(node, pad=""):
    label, kids = node if isinstance(node, tuple) else (node, [])
    if not kids: return label
    if label in ("+", "-", "==", "<", ">"): return f"({python_source(kids[0])} {label} {python_source(kids[1])})"
    if label == "seq": return python_source(kids[0], pad) + "\n" + python_source(kids[1], pad)
    if label == "assign": return f"{pad}{kids[0]} = {python_source(kids[1])}"
    if label == "if":
        return (f"{pad}if {python_source(kids[0])}:\n{python_source(kids[1], pad + '    ')}\n"
                f"{pad}else:\n{python_source(kids[2], pad + '    ')}")
    v, start, test, update, body = kids
    return (f"{pad}{v} = {python_source(start)}\n{pad}while {python_source(test)}:\n"
            f"{python_source(body, pad + '    ')}\n{pad}    {v} = {python_source(update)}")


def test_run_for_agrees_with_python():
    rng = np.random.default_rng(3)
    programs = [random_for(rng, "short") for _ in range(300)] + [random_for(rng, "long") for _ in range(100)]
    for program in programs:
        code = compile(python_source(program.to_nested()), "for-program", "exec")
        for _ in range(3):
            values = random_inputs(rng)
            scope = dict(values)
            exec(code, {}, scope)
            assert run_for(program, values) == scope, for_source(program)


def test_oracle_can_fail():
    "A translation broken in one place (first < or > flipped) is exposed on most programs."
    pairs, caught, total = for2lam_pairs(np.random.default_rng(5), 200, "short", translation="cps"), 0, 0
    for source, target in pairs:
        labels = list(target.labels)
        flip = next((i for i, l in enumerate(labels) if l in ("<", ">")), None)
        if flip is None: continue
        labels[flip] = "<" if labels[flip] == ">" else ">"
        total += 1
        caught += bool(disagreements([(source, Tree(labels, target.parent, target.slot))], np.random.default_rng(6), 8))
    assert total > 50 and caught > 0.6 * total


def test_seeded_and_sized():
    a = for2lam_pairs(np.random.default_rng(1), 50, "long")
    assert a == for2lam_pairs(np.random.default_rng(1), 50, "long")
    assert a != for2lam_pairs(np.random.default_rng(2), 50, "long")
    short = for2lam_pairs(np.random.default_rng(1), 200, "short", translation="cps")
    assert np.mean([len(s) for s, _ in a]) > 2 * np.mean([len(s) for s, _ in short])
    assert all(t == for_to_lambda(s) for s, t in short)
    assert all(t == chen_translation(s) for s, t in for2lam_pairs(np.random.default_rng(1), 200, "short"))
    assert set(KINDS) == {"short", "long"}


def test_generated_programs_terminate_quickly():
    "Loops count between constants (at most 9 steps) and nest at most twice: a small step budget suffices."
    rng = np.random.default_rng(8)
    for source, target in for2lam_pairs(rng, 200, "long", translation="cps"):
        values = random_inputs(rng)
        assert run_for(source, values, max_steps=50_000) == run_lambda(target, values, max_steps=50_000)


def test_step_budget():
    loop = Tree.from_sexpr("(for x 0 (< x 1) (- x 1) (assign y x))")
    with pytest.raises(ValueError, match="max_steps=100"): run_for(loop, {"x": 0, "y": 0}, max_steps=100)
    with pytest.raises(ValueError, match="max_steps=100"):
        run_lambda(for_to_lambda(loop, ["x", "y"]), {"x": 0, "y": 0}, max_steps=100)


def test_deep_programs_need_no_recursion():
    program = ("assign", ["y", ("+", ["y", "x"])])
    for _ in range(29_999): program = ("seq", [("assign", ["y", ("+", ["y", "x"])]), program])
    program = Tree.from_nested(("seq", [("assign", ["x", "2"]), program]))
    target = for_to_lambda(program)
    start = {"x": 0, "y": 0, "z": 0}
    assert run_for(program, start) == run_lambda(target, start) == {"x": 2, "y": 60_000, "z": 0}
    assert for_source(program).count("\n") == 30_000 and lambda_source(target).count("\n") == 30_001   # and ()


# ---- the tasks for2lam-short and for2lam-long (built here, registered by treepe_nb.tasks) ----
from treepe_nb.for2lam import for2lam_builder, for2lam_vocabularies
from treepe_nb.tasks import TASKS, TaskConfig, make_task


def sources(split):
    return [e.src.unlcrs().to_sexpr() for e in split]


@pytest.mark.parametrize("kind", ["short", "long"])
def test_task_is_registered_binary_and_lcrs(kind):
    assert f"for2lam-{kind}" in TASKS
    task = make_task(f"for2lam-{kind}", sizes=(40, 10, 10), order="bfs")
    cps = make_task(f"for2lam-{kind}", sizes=(40, 10, 10), order="bfs", translation="cps")
    assert all(e.tgt.unlcrs() == for_to_lambda(e.src.unlcrs()) for e in cps.train)
    assert (task.source, task.target, task.n, task.src_order, task.tgt_order) == ("tree", "tree", 2, "dfs", "bfs")
    for e in task.train:
        assert int(e.src.slot.max()) <= 1 and int(e.tgt.slot.max()) <= 1
        assert e.tgt.unlcrs() == chen_translation(e.src.unlcrs())       # the target is the source's translation
        assert np.array_equal(e.tgt_ids, task.tgt_vocab.encode(e.tgt).numpy())


def test_splits_are_disjoint_and_the_removed_are_counted():
    # two-statement programs repeat often: 400 of them force duplicates across the splits
    task = make_task("for2lam-short", sizes=(400, 150, 150), options={"expr_depth": 0, "max_const": 2})
    keys = [set(sources(split)) for split in task.splits.values()]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    assert [len(s) for s in task.splits.values()] == [400, 150, 150]     # topped up to the sizes asked for
    removed = task.info["duplicates_removed"]
    assert removed["train"] == 0 and removed["dev"] > 0 and removed["test"] > 0
    assert len(sources(task.train)) - len(set(sources(task.train))) > 0   # repeats inside a split are kept


def test_too_small_a_program_space_is_a_clear_error(monkeypatch):
    import treepe_nb.for2lam as f2l
    one = Tree.from_sexpr("(seq (assign x 1) (assign y x))")
    monkeypatch.setattr(f2l, "for2lam_pairs", lambda rng, count, *args, **kw: [(one, for_to_lambda(one))] * count)
    with pytest.raises(ValueError, match="the dev split has only 0 programs unseen in earlier splits after 100 draws"):
        make_task("for2lam-short", sizes=(3, 3, 3))


def test_task_is_deterministic_per_seed():
    ids = lambda t: [(e.src_ids.tolist(), e.tgt_ids.tolist()) for d in t.splits.values() for e in d]
    a, b, c = (make_task(TaskConfig("for2lam-long", seed=s, sizes=(20, 5, 5))) for s in (3, 3, 4))
    assert ids(a) == ids(b) and ids(a) != ids(c)
    bigger = make_task(TaskConfig("for2lam-long", seed=3, sizes=(20, 5, 9)))  # each split its own stream
    assert ids(bigger)[:25] == ids(a)[:25]


def test_vocabularies_cover_the_grammar_and_check_their_arguments():
    src, tgt = for2lam_vocabularies("long")
    assert len(src) == 4 + 4 + 5 + 3 + 10 and len(tgt) == 3 + 4 * (5 + 5 + 3 + 10 + 2)     # chen: functions f, blank _
    assert len(for2lam_vocabularies("long", translation="cps")[1]) == 3 + 4 * (5 + 5 + 3 + 10 + 20)   # f0 ... f19
    with pytest.raises(ValueError, match="translation must be one of"): for2lam_vocabularies("long", translation="x")
    with pytest.raises(ValueError, match="kind must be one of"): for2lam_builder("medium")
    with pytest.raises(ValueError, match="kind must be one of"): for2lam_vocabularies("medium")
    with pytest.raises(ValueError, match="has no setting 'depth_mean'"): TaskConfig("for2lam-short", options={"depth_mean": 3})


def test_trains_from_the_command_line(tmp_path):
    import json
    from treepe_nb.cli import train_cli
    run = tmp_path / "run"
    train_cli(["--task", "for2lam-short", "--pe", "stack", "--sizes", "64", "8", "8", "--steps", "20", "--d-model", "16",
               "--eval-examples", "4", "--out", str(run), "--device", "cpu"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["step"] == 20 and 0 <= summary["exact_match"] <= 1
    losses = [json.loads(l)["loss"] for l in (run / "metrics.jsonl").read_text().splitlines() if '"train"' in l]
    assert losses[-1] < losses[0]
