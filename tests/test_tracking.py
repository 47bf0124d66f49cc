"""Property tests of `treepe_nb.tracking`: teacher-forced tracking reproduces `Tree.positions`, and decoding inverts
encoding, for random trees (n-ary and LCRS-binarized), both orders and both backends (hypothesis)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.tracking import ArityVocab, TreeTracker
from strategies import cuda, random_trees
from treepe_nb.trees import Tree, batch_positions



def padded_ids(vocab, trees, order):
    ids = [vocab.encode(t, order) for t in trees]
    T = max(len(i) for i in ids)
    return torch.stack([torch.cat([i, i.new_full((T - len(i),), vocab.pad)]) for i in ids])


@settings(max_examples=40, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=30, labels="abc"), min_size=1, max_size=5), binarize=st.booleans(),
       order=st.sampled_from(["dfs", "bfs"]), backend=st.sampled_from(["numpy", "torch"]))
def test_teacher_forcing_reproduces_positions_and_decoding_inverts_encoding(trees, binarize, order, backend):
    if binarize: trees = [t.lcrs() for t in trees]
    vocab = ArityVocab.from_trees(trees)
    ids = padded_ids(vocab, trees, order)
    K = max(int(t.depth.max()) for t in trees)
    truth = batch_positions(trees, order, max_depth=K)
    tracker = TreeTracker(order, len(trees), vocab.n, K, max_nodes=ids.shape[1], backend=backend)
    for step in range(ids.shape[1]):
        assert tracker.position == truth[:, step]
        assert torch.equal(tracker.done, truth.depth[:, step] < 0)       # done exactly after each tree's last node
        tracker.step(vocab.child_slots(ids[:, step]))
    assert bool(tracker.done.all()) and not bool(tracker.failed.any())
    assert vocab.decode_batch(ids, order) == trees
    for t in trees: assert vocab.decode(vocab.encode(t, order, special=True), order) == t


@settings(max_examples=30, deadline=None)
@given(order=st.sampled_from(["dfs", "bfs"]), max_depth=st.integers(1, 4), max_nodes=st.integers(1, 20),
       seed=st.integers(0, 2**31 - 1), backend=st.sampled_from(["numpy", "torch"]))
def test_sampling_within_allowed_always_completes_within_limits(order, max_depth, max_nodes, seed, backend):
    vocab = ArityVocab([("f", (0, 1)), ("g", (1,)), ("h", (0,)), ("x", ())], n=2)
    g = torch.Generator().manual_seed(seed)
    tracker = TreeTracker(order, 8, 2, max_depth, max_nodes, backend=backend)
    tokens = []
    while not bool(tracker.done.all()):
        mask = tracker.allowed(vocab)
        assert bool(mask.any(-1).all())                                    # never a dead end
        token = torch.multinomial(mask.float(), 1, generator=g).squeeze(1)
        tokens.append(token); tracker.step(vocab.child_slots(token))
        assert len(tokens) <= max_nodes + 1
    for t in vocab.decode_batch(torch.stack(tokens, 1), order, max_depth):
        assert len(t) <= max_nodes and int(t.depth.max()) <= max_depth


def test_bad_steps_raise_or_flag():
    tracker = TreeTracker("dfs", 2, n=2, max_depth=1)
    tracker.step(torch.tensor([[True, True], [False, False]]))
    with pytest.raises(ValueError, match=r"row 0, node 1 \(path \[0\]\) is at depth 1 = max_depth"):
        tracker.step(torch.tensor([[False, True], [False, False]]))
    with pytest.raises(ValueError, match="row 1: the tree is already complete"):
        tracker.step(torch.tensor([[False, False], [True, False]]))
    flagged = TreeTracker("dfs", 2, n=2, max_depth=1, errors="flag")
    flagged.step(torch.tensor([[True, True], [False, False]]))
    flagged.step(torch.tensor([[False, True], [True, False]]))
    # row 0 breaks the depth limit; row 1's tree was already complete, so its stray token is ignored, not a failure
    assert flagged.failed.tolist() == [True, False] and flagged.done.tolist() == [True, True]
    assert flagged.position.depth.tolist() == [-1, -1]                   # never a wrong position: padding


def test_decode_names_the_bad_token():
    t = Tree.from_sexpr("(f (f a) (g a b))")
    vocab = ArityVocab.from_trees([t])
    ids = vocab.encode(t)
    with pytest.raises(ValueError, match=r"row 0, token 6 \(b/00\) comes after the tree is complete"):
        vocab.decode(torch.cat([ids, ids[-1:]]))
    with pytest.raises(ValueError, match="ends before the tree is complete"):
        vocab.decode(ids[:-2])


@cuda
def test_cuda_tracker_matches_cpu():
    trees = [Tree.from_sexpr(s).lcrs() for s in ["(f (f a) (g a b))", "(g (f (f a)) b)", "a"]]
    vocab = ArityVocab.from_trees(trees)
    for order in ("dfs", "bfs"):
        ids = padded_ids(vocab, trees, order).cuda()
        gpu, cpu = TreeTracker(order, 3, 2, 8, device="cuda"), TreeTracker(order, 3, 2, 8)
        for step in range(ids.shape[1]):
            assert gpu.position.paths.is_cuda and gpu.position.to("cpu") == cpu.position
            gpu.step(vocab.child_slots(ids[:, step])); cpu.step(vocab.child_slots(ids[:, step].cpu()))
            assert bool((gpu.allowed(vocab).cpu() == cpu.allowed(vocab)).all())
        assert vocab.decode_batch(ids, order) == trees
