"""Property tests for `treepe_nb.tasks`: the tree tasks' semantics against independent recursive definitions,
determinism, and the collate conventions."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader, DistributedSampler

from treepe_nb.tasks import (Collator, SeqVocab, TASKS, arity_ids, c3_step, make_task, random_binary_trees, rotate,
                             task_rng, tree_depths, tree_op, tree_ops_source)
from treepe_nb.trees import Tree


# ---- independent recursive definitions on nested (label, [left, right]) tuples (fine for small trees) ----
def nested(t):
    return t.to_nested()

def leaf(x): return not isinstance(x, tuple)

def rot(x):
    if not leaf(x) and not leaf(x[1][0]):
        r, ((p, (l, m)), R) = x[0], x[1]
        return (p, [rot(l), (r, [rot(m), rot(R)])])
    return x

def c3(x):
    if leaf(x): return x
    a, b = x[1]
    if leaf(a) and leaf(b): return ((a - 1) + (b - 1)) % 3 + 1
    return (x[0], [c3(a), c3(b)])

def inorder(x):
    return [x] if leaf(x) else inorder(x[1][0]) + [x[0]] + inorder(x[1][1])

def as_lists(x):
    return x if leaf(x) else (x[0], [as_lists(c) for c in x[1]])


@st.composite
def binary_trees(draw, labels=range(1, 21), max_depth=6):
    seed = draw(st.integers(0, 2**32 - 1))
    depth = draw(st.integers(0, max_depth))
    labels = list(labels)
    return random_binary_trees(task_rng(seed), [depth], labels[: len(labels) // 2], labels[len(labels) // 2:])[0]


@settings(max_examples=60, deadline=None)
@given(binary_trees())
def test_rotate_matches_recursive_definition_and_keeps_inorder(t):
    r = rotate(t)
    Tree(r.labels, r.parent, r.slot)                   # a valid preorder tree
    assert as_lists(nested(r)) == as_lists(rot(nested(t)))
    assert inorder(nested(r)) == inorder(nested(t))


@settings(max_examples=30, deadline=None)
@given(st.lists(binary_trees(), min_size=1, max_size=6))
def test_rotate_many_equals_one_by_one(trees):
    assert rotate(trees) == [rotate(t) for t in trees]


@settings(max_examples=60, deadline=None)
@given(binary_trees(labels=[1, 2, 3, 4, 4, 4]))
def test_c3_is_one_simultaneous_step(t):
    # labels: leaves from [1, 2, 3], operator 4
    assert as_lists(nested(c3_step(t))) == as_lists(c3(nested(t)))


@settings(max_examples=40, deadline=None)
@given(binary_trees(), st.integers(0, 3), st.data())
def test_tree_ops(t, op, data):
    s = data.draw(st.integers(0, len(t) - 1))
    x = nested(t)
    # the subtree at s, found independently through the preorder of the nested form
    def subtrees(y):
        out, stack = [], [y]
        while stack:
            z = stack.pop(); out.append(z)
            if not leaf(z): stack.extend(reversed(z[1]))
        return out
    sub = subtrees(x)[s]
    out = as_lists(nested(tree_op(t, op, s)))
    if op == 0: assert out == as_lists(sub)
    elif op == 1: assert out == as_lists(sub if leaf(sub) else (sub[0], [sub[1][1], sub[1][0]]))
    elif op == 2:
        assert len(tree_op(t, op, s)) == len(t) - len(subtrees(sub)) + 1
        assert tree_op(t, op, s).labels[s] == t.labels[s]
    else: assert out == as_lists(x)
    src = tree_ops_source(t, op, s)
    assert as_lists(nested(src)) == (124 + op, [t.labels[s], as_lists(x)])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from([n for n in TASKS if n.startswith(("seq-", "tree-"))]))
def test_make_task_is_deterministic_and_encodes_consistently(seed, name):
    kw = dict(length_mean=8, length_std=2) if name.startswith("seq-") else dict(depth_mean=4, depth_std=1)
    a, b = (make_task(name, seed=seed, sizes=(5, 3, 2), **kw) for _ in range(2))
    for da, db in zip(a.splits.values(), b.splits.values()):
        for ea, eb in zip(da, db):
            assert np.array_equal(ea.src_ids, eb.src_ids) and np.array_equal(ea.tgt_ids, eb.tgt_ids)
            if a.target == "tree":
                assert np.array_equal(ea.tgt_ids, a.tgt_vocab.encode(ea.tgt).numpy())
                assert ea.tgt.depth.max() <= a.max_depth


def test_split_streams_are_independent():
    a = make_task("seq-copy", sizes=(4, 2, 2), length_mean=5)
    b = make_task("seq-copy", sizes=(4, 7, 2), length_mean=5)
    assert all(np.array_equal(x.src, y.src) for x, y in zip(a.train, b.train))
    assert all(np.array_equal(x.src, y.src) for x, y in zip(a.test, b.test))


def test_errors():
    with pytest.raises(ValueError, match="known tasks: seq-copy"): make_task("nope")
    with pytest.raises(ValueError, match="three positive integers"): make_task("seq-copy", sizes=(1, -1, 1))
    with pytest.raises(ValueError, match="> max_depth=2"): make_task("tree-copy", sizes=(3, 3, 3), max_depth=2)
    with pytest.raises(ValueError, match="order must be"): make_task("tree-copy", order="pre")


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["tree-copy", "tree-rotate", "tree-c3", "tree-ops"]), st.sampled_from(["bfs", "dfs"]),
       st.integers(1, 6), st.integers(0, 1000))
def test_collate_matches_per_example_positions(name, order, batch, seed):
    task = make_task(name, seed=seed, sizes=(6, 1, 1), order=order, depth_mean=4, depth_std=1)
    exs = [task.train[i] for i in range(batch)]
    b = task.collate(exs)
    K = task.max_depth
    assert b.src_pos.paths.shape[-1] == K and b.tgt_pos.paths.shape[-1] == K
    for i, e in enumerate(exs):
        n, m = len(e.src), len(e.tgt)
        sp = e.src.positions("bfs", max_depth=K)
        assert torch.equal(b.src_pos.paths[i, :n], sp.paths) and (b.src_pos.depth[i, n:] == -1).all()
        assert torch.equal(b.src_ids[i, :n], torch.from_numpy(e.src_ids[e.src.order("bfs")])) and (b.src_ids[i, n:] == 0).all()
        tp = e.tgt.positions(order, max_depth=K)
        ids = torch.from_numpy(e.tgt_ids[e.tgt.order(order)])
        assert b.tgt_ids[i, 0] == 1 and torch.equal(b.tgt_ids[i, 1:m + 1], ids) and (b.tgt_ids[i, m + 1:] == 0).all()
        assert torch.equal(b.labels[i, :m], ids) and b.labels[i, m] == 2 and (b.labels[i, m + 1:] == -100).all()
        assert b.tgt_pos.depth[i, 0] == 0 and (b.tgt_pos.paths[i, 0] == -1).all()          # <start> at the root
        assert torch.equal(b.tgt_pos.paths[i, 1:m + 1], tp.paths) and (b.tgt_pos.depth[i, m + 1:] == -1).all()
        assert torch.equal(b.tgt_index[i, :m + 1], torch.arange(m + 1))
    assert b.tgt_ids.shape == b.labels.shape == b.tgt_pos.depth.shape


def test_sequence_collate():
    task = make_task("seq-repeat", sizes=(3, 1, 1), length_mean=5, length_std=2)
    b = task.collate(list(task.train))
    for i, e in enumerate(task.train):
        n = len(e.src)
        assert torch.equal(b.src_ids[i, :n], torch.from_numpy(e.src + 3)) and torch.equal(b.src_pos[i, :n], torch.arange(n))
        assert torch.equal(b.labels[i, : 2 * n + 1], torch.from_numpy(np.r_[np.r_[e.src, e.src] + 3, 2]))


def test_dataloader_with_distributed_sampler():
    task = make_task("tree-c3", sizes=(11, 2, 2), depth_mean=4)
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(task.train, num_replicas=2, rank=rank, shuffle=True, seed=3)
        loader = task.loader("train", batch_size=4, sampler=sampler)
        for b in loader:
            assert b.src_ids.shape[0] == b.tgt_ids.shape[0] <= 4
        seen += list(sampler)
    assert len(seen) == 12 and set(seen) == set(range(11))      # padded to an even split, every example covered


def test_arity_ids_unknown_fallback():
    v = SeqVocab([1])
    from treepe_nb.tracking import ArityVocab
    av = ArityVocab([(1, ()), ("<unk>", ()), ("<unk>", (0, 1))], n=2)
    t = Tree.from_nested((7, [1, 9]))
    ids = arity_ids(av, [t], unknown="<unk>")[0]
    assert av.name(int(ids[0])) == "<unk>/11" and av.name(int(ids[2])) == "<unk>/00"
    with pytest.raises(ValueError, match="not in the vocabulary"): arity_ids(av, [t])


def test_tree_depths_distribution():
    d = tree_depths(task_rng(0), 20000)
    assert abs(d.mean() - 6.5) < 0.1 and d.min() >= 1
