"""Property tests of `treepe_nb.trees`: round trips and root paths on random trees (hypothesis)."""
from collections import deque

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.trees import Tree, TreePositions, batch_positions, collate_positions

labels = st.one_of(st.integers(-5, 5), st.text(max_size=4))


@st.composite
def nested_trees(draw, max_nodes=40, max_children=5):
    "Random nested (label, [children]) trees, built breadth-first with an explicit budget."
    budget = draw(st.integers(1, max_nodes))
    root = [draw(labels), []]
    frontier, made = deque([root]), 1
    while frontier and made < budget:
        node = frontier.popleft()
        for _ in range(draw(st.integers(0, min(max_children, budget - made)))):
            child = [draw(labels), []]
            node[1].append(child); frontier.append(child); made += 1

    def freeze(node):  # tiny trees only: recursion is fine in a test helper
        label, kids = node
        return (label, [freeze(k) for k in kids]) if kids else label
    return freeze(root)


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
        Tree("abcd", [-1, 0, 0, 1], [-1, 0, 1, 0])     # d's parent b is separated from it by c


def test_positions_move_to_a_device():
    pos = Tree.from_sexpr("(a b (c d))").positions()
    assert isinstance(pos.to("cpu"), TreePositions) and pos.to("cpu") == pos
    if torch.cuda.is_available():
        assert pos.to("cuda").paths.device.type == "cuda"
