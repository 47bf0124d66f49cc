"""Tests of `treepe_nb.for2lam`: every generated translation checked by running both programs (the oracle), the
For interpreter checked against Python itself, determinism, the limits, and programs far deeper than Python's
recursion limit. `pytest --slow` runs a ten times larger oracle."""
import numpy as np
import pytest

from treepe_nb.for2lam import (KINDS, VARIABLES, for2lam_pairs, for_source, for_to_lambda, lambda_source, random_for,
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
    pairs = for2lam_pairs(np.random.default_rng(11), 400, kind)
    assert disagreements(pairs, np.random.default_rng(12)) == []


@pytest.mark.parametrize("kind", ["short", "long"])
def test_oracle_large(request, kind):
    if not request.config.getoption("--slow"): pytest.skip("the large oracle runs with --slow")
    pairs = for2lam_pairs(np.random.default_rng(21), 5000, kind)
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
    pairs, caught, total = for2lam_pairs(np.random.default_rng(5), 200, "short"), 0, 0
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
    short = for2lam_pairs(np.random.default_rng(1), 200, "short")
    assert np.mean([len(s) for s, _ in a]) > 2 * np.mean([len(s) for s, _ in short])
    assert all(t == for_to_lambda(s) for s, t in short)
    assert set(KINDS) == {"short", "long"}


def test_generated_programs_terminate_quickly():
    "Loops count between constants (at most 9 steps) and nest at most twice: a small step budget suffices."
    rng = np.random.default_rng(8)
    for source, target in for2lam_pairs(rng, 200, "long"):
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
