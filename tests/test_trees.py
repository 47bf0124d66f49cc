"""Property tests of `treepe_nb.trees`: round trips and root paths on random trees (hypothesis)."""
from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from strategies import cuda, nested_trees
from treepe_nb.trees import Tree, TreePositions, batch_positions, collate_positions

def naive_paths(tree):
    "Root path of every node by walking up parents one node at a time."
    out = []
    for v in range(len(tree)):
        path = []
        while tree.parent[v] >= 0:
            path.append(int(tree.slot[v])); v = int(tree.parent[v])
        out.append(path[::-1])
    return out


def naive_bfs(tree):
    kids = [[] for _ in range(len(tree))]
    for v in range(1, len(tree)): kids[tree.parent[v]].append(v)
    order, queue = [], deque([0])
    while queue:
        v = queue.popleft(); order.append(v); queue.extend(kids[v])
    return order


@settings(max_examples=60, deadline=None)
@given(nested_trees())
def test_nested_and_lcrs_round_trips(nested):
    t = Tree.from_nested(nested)
    assert t.to_nested() == nested
    b = t.lcrs()
    assert (b.slot[1:] <= 1).all() and b.labels == t.labels
    assert b.unlcrs() == t
    Tree(b.labels, b.parent, b.slot)             # the binarized arrays pass full validation
    Tree(t.labels, t.parent, t.slot)


@settings(max_examples=60, deadline=None)
@given(nested_trees(), st.sampled_from(["dfs", "bfs"]))
def test_positions_are_root_paths_in_order(nested, order):
    t = Tree.from_nested(nested)
    paths = naive_paths(t)
    idx = list(t.order(order))
    assert idx == (naive_bfs(t) if order == "bfs" else list(range(len(t))))
    pos = t.positions(order)
    K = max(len(p) for p in paths)
    assert pos.paths.shape == (len(t), K)
    for row, v in enumerate(idx):
        assert pos.paths[row].tolist() == paths[v] + [-1] * (K - len(paths[v]))
        assert pos.depth[row] == len(paths[v])
        assert t.path(0, v) == (0, paths[v])


@settings(max_examples=40, deadline=None)
@given(st.lists(nested_trees(max_nodes=25), min_size=1, max_size=5), st.sampled_from(["dfs", "bfs"]),
       st.integers(1, 4))
def test_batches_match_single_trees(nesteds, order, max_depth):
    trees = [Tree.from_nested(n) for n in nesteds]
    assert batch_positions(trees, order) == collate_positions([t.positions(order) for t in trees])
    kept = batch_positions(trees, order, max_depth=max_depth, overflow="truncate")
    for b, t in enumerate(trees):
        paths = naive_paths(t)
        for row, v in enumerate(t.order(order)):
            last = paths[v][-max_depth:]
            assert kept.paths[b, row].tolist() == last + [-1] * (max_depth - len(last))
            assert kept.depth[b, row] == len(paths[v])
        assert not kept.mask[b, len(t):].any()


@settings(max_examples=60, deadline=None)
@given(nested_trees(), st.lists(st.text(min_size=0, max_size=6), min_size=40, max_size=40))
def test_sexpr_round_trip_with_any_text_labels(nested, texts):
    t = Tree.from_nested(nested)
    t = Tree(texts[:len(t)], t.parent, t.slot)   # arbitrary strings: spaces, quotes, parentheses, unicode
    assert Tree.from_sexpr(t.to_sexpr()) == t


@settings(max_examples=40, deadline=None)
@given(nested_trees(), st.randoms(use_true_random=False))
def test_from_parents_accepts_any_node_order(nested, rnd):
    t = Tree.from_nested(nested)
    perm = list(range(len(t))); rnd.shuffle(perm)      # new node k is old node perm[k]
    inv = np.argsort(perm)
    parents = [int(inv[t.parent[v]]) if t.parent[v] >= 0 else -1 for v in perm]
    rebuilt = Tree.from_parents(perm, parents)         # label every node by its old index
    Tree(rebuilt.labels, rebuilt.parent, rebuilt.slot)  # a valid preorder
    for v in range(1, len(rebuilt)):                   # the same parent relation
        assert rebuilt.labels[rebuilt.parent[v]] == t.parent[rebuilt.labels[v]]
    for v in range(1, len(rebuilt)):                   # children ordered by their (new) index
        same = np.flatnonzero(rebuilt.parent == rebuilt.parent[v])
        assert list(np.argsort([inv[rebuilt.labels[c]] for c in same])) == list(range(len(same)))


def test_validation_rejects_non_preorder():
    with pytest.raises(ValueError, match=r"node 3 \('d'\) is not in depth-first preorder"):
        Tree(list("abcd"), [-1, 0, 0, 1], [-1, 0, 1, 0])     # d's parent b is separated from it by c


@pytest.mark.parametrize("labels", ["abc", b"abc", bytearray(b"abc")])
def test_a_string_is_not_a_sequence_of_labels(labels):
    "Issue 26: `Tree('abc', ...)` split the string into three labels (and `from_parents` did the same)."
    with pytest.raises(TypeError, match=r"labels must be a sequence of labels \(one per node\), got a "):
        Tree(labels, [-1, 0, 0], [-1, 0, 1])
    with pytest.raises(TypeError, match=r"labels must be a sequence of labels \(one per node\), got a "):
        Tree.from_parents(labels, [-1, 0, 0])
    assert Tree(["abc"], [-1], [-1]).labels == ["abc"] and Tree(list("abc"), [-1, 0, 0], [-1, 0, 1]).labels == ["a", "b", "c"]


def test_positions_move_to_a_device():
    pos = Tree.from_sexpr("(a b (c d))").positions()
    assert isinstance(pos.to("cpu"), TreePositions) and pos.to("cpu") == pos


@cuda
def test_positions_move_to_cuda():
    pos = Tree.from_sexpr("(a b (c d))").positions()
    assert pos.to("cuda").paths.device.type == "cuda" and pos.to("cuda").to("cpu") == pos


# ---- hardening: each of these was accepted silently, crashed with a raw error, or ran for minutes before ----

def test_integer_arrays_only():
    with pytest.raises(TypeError, match="parent must hold integers"): Tree(["a", "b"], [-1, 0.9], [-1, 1.7])
    with pytest.raises(TypeError, match="slot must hold integers"): Tree(["a", "b"], [-1, 0], [-1, 1.7])
    with pytest.raises(TypeError, match="parents must hold integers"): Tree.from_parents(["a", "b"], [-1, 0.6])
    with pytest.raises(ValueError, match="one-dimensional"): Tree.from_parents(["a", "b"], np.array([[-1, 0]]))
    with pytest.raises(ValueError, match="outside the int64 range"): Tree.from_parents(["a", "b"], [-1, 2**63])


@pytest.mark.parametrize("source", [b"x = 1 + 2", None, 123])
def test_python_ast_needs_text(source):
    with pytest.raises(TypeError, match="expected Python source as a str"): Tree.from_python_ast(source)


def test_readers_refuse_wrong_types():
    from treepe_nb.readers import python_functions
    with pytest.raises(TypeError): Tree.from_sexpr(["(a b)"])
    with pytest.raises(TypeError): Tree.from_json(object())
    with pytest.raises(TypeError): Tree.from_yaml(None)
    with pytest.raises(TypeError): Tree.from_conllu(None)
    with pytest.raises(TypeError, match="node indices"): Tree.from_sexpr("(a b)").path(0, 1.5)
    with pytest.raises(TypeError, match="item 0 of trees is a str"): batch_positions(["(a b)"])
    with pytest.raises(ValueError, match="nested too deeply"): python_functions("x = " + "-" * 100_000 + "1")


def test_conllu_errors_name_the_problem():
    text = "1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    assert Tree.from_conllu(text)[0].labels == ["cat", "The"]
    with pytest.raises(ValueError, match="label must be one of form, lemma"): Tree.from_conllu(text, label="nope")
    with pytest.raises(ValueError, match="column"): Tree.from_conllu("1\tThe\tthe\n\n")


def test_tuples_and_unhashable_labels():
    with pytest.raises(ValueError, match="not \\(label, \\[children\\]\\)"): Tree.from_nested(("a", [("b", "c")]))
    assert Tree.from_json([(1, 2), {"a": (3,)}]) == Tree.from_json([[1, 2], {"a": [3]}])
    with pytest.raises(ValueError, match="unhashable"): Tree.from_nested(("a", [{"x": 1}]))
    with pytest.raises(ValueError, match="unhashable"): Tree.from_parents([["a"]], [-1])


def test_sharing_bombs_are_refused_fast():
    dag = ["x", "x"]
    for _ in range(30): dag = [("n", dag), ("n", dag)]          # 2**31 nodes through shared child lists
    with pytest.raises(ValueError, match="max_nodes=10000000"): Tree.from_nested(("root", dag))
    doc = [1, 2]
    for _ in range(40): doc = {"a": doc, "b": doc}
    with pytest.raises(ValueError, match="max_nodes"): Tree.from_json(doc)


def _laughs(levels, width):
    text = "a0: &a0 [" + ", ".join(["lol"] * width) + "]\n"
    for k in range(1, levels):
        text += f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]\n"
    return text


def test_yaml_alias_bombs_are_refused_while_composing():
    bomb = _laughs(9, 9)                                        # about 430 bytes, 9**9 = 387 million nodes
    assert len(bomb) < 500
    with pytest.raises(ValueError, match="max_nodes=1000000"): Tree.from_yaml(bomb)
    six = _laughs(6, 14)                                        # 14**6 = 7.5 million nodes
    with pytest.raises(ValueError, match="max_nodes"): Tree.from_yaml(six)
    assert len(Tree.from_yaml(_laughs(3, 4))) > 4 ** 3


def test_yaml_merge_amplification_is_bounded():
    base = "a: &a {" + ", ".join(f"k{i}: {i}" for i in range(2000)) + "}\n"
    text = base + "b: {<<: [" + ", ".join(["*a"] * 20_000) + "]}\n"  # about 100 KB
    with pytest.raises(ValueError, match="max_nodes"): Tree.from_yaml(text)
    text = base + "".join(f"b{j}: {{<<: *a}}\n" for j in range(600))
    with pytest.raises(ValueError, match="copy more than max_nodes=1000000 entries"): Tree.from_yaml(text)


def test_yaml_nesting_is_bounded():
    with pytest.raises(ValueError, match="max_nesting=5000"): Tree.from_yaml("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="max_nesting=50"): Tree.from_yaml("{k: " * 100 + "x" + "}" * 100, max_nesting=50)


@pytest.mark.parametrize("text, message", [("a: 1\na: 2", "duplicate key 'a' at line 2, column 1"),
                                           ("a: !!set", "not a plain scalar"), ("!!set : 1", "not a plain scalar")])
def test_yaml_refusals(text, message):
    with pytest.raises(ValueError, match=message): Tree.from_yaml(text)
