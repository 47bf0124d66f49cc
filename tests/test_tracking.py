"""Property tests of `treepe_nb.tracking`: teacher-forced tracking reproduces `Tree.positions`, and decoding inverts
encoding, for random trees (n-ary and LCRS-binarized), both orders and both backends (hypothesis)."""
import numpy as np
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
       order=st.sampled_from(["dfs", "bfs"]), backend=st.sampled_from(["numpy", "torch", "python"]))
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
       seed=st.integers(0, 2**31 - 1), backend=st.sampled_from(["numpy", "torch", "python"]))
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


def state_bytes(tracker):
    return sum(v.nbytes for v in vars(tracker).values() if isinstance(v, (np.ndarray, torch.Tensor)))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_deep_limit_state_is_linear_in_max_depth(backend):
    # issue 13: a stack of root paths made TreeTracker("dfs", 1, 2, max_depth=100_000) allocate 9.3 GiB
    K = 100_000
    tracker = TreeTracker("dfs", 1, 2, max_depth=K, backend=backend)
    small = TreeTracker("dfs", 1, 2, max_depth=1000, backend=backend)
    assert state_bytes(tracker) < 64 * (K + 2)                           # a few integers per level, not K per level
    assert state_bytes(tracker) < 110 * state_bytes(small)               # linear: 100x the limit, ~100x the state
    for step in range(200): pos = tracker.step(torch.tensor([[True, False]]))
    assert int(pos.depth[0]) == 200 and pos.paths.shape == (1, K)
    assert pos.paths[0, :201].tolist() == [0] * 200 + [-1] and int(pos.paths[0].max()) == 0
    bfs = TreeTracker("bfs", 2, 2, max_depth=K, max_nodes=64, backend=backend)
    assert state_bytes(bfs) < 64 * (K + 2) * 2 + 2 * 65 * 65             # the path table is no wider than max_nodes
    pos = bfs.step(torch.tensor([[True, True], [False, True]]))
    assert pos.paths.shape == (2, K) and pos.depth.tolist() == [1, 1] and pos.paths[:, :2].tolist() == [[0, -1], [1, -1]]


@settings(max_examples=40, deadline=None)
@given(order=st.sampled_from(["dfs", "bfs"]), n=st.integers(1, 4), max_depth=st.integers(0, 5),
       max_nodes=st.integers(1, 40), seed=st.integers(0, 2**31 - 1), backend=st.sampled_from(["numpy", "torch", "python"]))
def test_generated_positions_equal_tree_positions(order, n, max_depth, max_nodes, seed, backend):
    # random vocabulary over every child-slot pattern, tokens sampled under `allowed`: every announced position is
    # the decoded tree's own position (Tree.positions), in generation order, for every row of the batch
    g = torch.Generator().manual_seed(seed)
    patterns = [tuple(s for s in range(n) if m >> s & 1) for m in range(2 ** n)]
    vocab = ArityVocab([(f"t{i}", p) for i, p in enumerate(patterns)], n=n)
    tracker = TreeTracker(order, 6, n, max_depth, max_nodes, backend=backend)
    tokens, positions = [], []
    while not bool(tracker.done.all()):
        token = torch.multinomial(tracker.allowed(vocab).float(), 1, generator=g).squeeze(1)
        pos = tracker.position
        assert pos.trusted and pos.check(n, max_depth) is pos
        tokens.append(token); positions.append(pos)
        tracker.step(vocab.child_slots(token))
    ids = torch.stack(tokens, 1)
    for b, tree in enumerate(vocab.decode_batch(ids, order, max_depth)):
        truth = tree.positions(order, max_depth=max_depth)
        got = [p[b] for p in positions[:len(tree)]]
        assert torch.equal(torch.stack([p.paths for p in got]), truth.paths)
        assert torch.equal(torch.stack([p.depth for p in got]), truth.depth)
        assert all(int(p[b].depth) == -1 for p in positions[len(tree):])


def test_hardening_bad_ids_and_bad_steps():
    t = Tree.from_sexpr("(f (f a) (g a b))")
    vocab = ArityVocab.from_trees([t])
    with pytest.raises(ValueError, match=r"id -1 at index \(0,\) is outside the vocabulary \(size 8"):
        vocab.child_slots(torch.tensor([-1]))                            # used to wrap to the last token
    with pytest.raises(ValueError, match="id 8 at index"):
        vocab.child_slots(torch.tensor([8]))
    with pytest.raises(TypeError, match="integer token ids, got dtype torch.float32"):
        vocab.child_slots(torch.tensor([3.0]))
    with pytest.raises(TypeError, match="integer token ids, got dtype torch.float64"):
        vocab.decode(vocab.encode(t).double())
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        ArityVocab.from_trees([t], n=0)                                  # used to infer n=2 silently
    with pytest.raises(ValueError, match="n=1, but the trees have a node 'f' with a child in slot 1"):
        ArityVocab.from_trees([t], n=1)
    tracker = TreeTracker("dfs", 2, n=2, max_depth=3)
    with pytest.raises(TypeError, match=r"child_slots must be a torch.Tensor of dtype bool, shape \[batch_size=2, n=2\]"):
        tracker.step([[True, False], [False, False]])
    with pytest.raises(TypeError, match="child_slots must have dtype torch.bool"):
        tracker.step(torch.tensor([[float("nan"), 0.0], [0.0, 0.0]]))   # NaN used to count as a child
    with pytest.raises(TypeError, match="child_slots must have dtype torch.bool"):
        tracker.step(torch.tensor([[0.5, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match=r"child_slots must have shape \[batch_size=2, n=2\], got \[2\]"):
        tracker.step(torch.tensor([True, False]))
    assert tracker.emitted.tolist() == [0, 0]                            # nothing recorded by the refused steps


def test_one_node_trees():
    leaf, deep = Tree.from_sexpr("a"), Tree.from_sexpr("(f " * 30 + "a" + ")" * 30)
    leaf_vocab = ArityVocab.from_trees([leaf])
    assert leaf_vocab.n == 1 and leaf_vocab.encode(leaf).tolist() == [3]
    assert leaf_vocab.decode(torch.tensor([3])) == leaf
    assert leaf_vocab.decode(torch.tensor([1, 3, 2]), "bfs", max_depth=0) == leaf
    for order in ("dfs", "bfs"):
        tracker = TreeTracker(order, 2, n=1, max_depth=0)
        tracker.step(torch.zeros(2, 1, dtype=torch.bool))                # a root with no children finishes at once
        assert tracker.done.tolist() == [True, True] and tracker.position.depth.tolist() == [-1, -1]
    trees = [leaf, deep, leaf, Tree.from_sexpr("(f a)")]
    vocab = ArityVocab.from_trees(trees)
    for order in ("dfs", "bfs"):
        assert vocab.decode_batch(padded_ids(vocab, trees, order), order) == trees


def tracker_state(tr, vocab):
    "Everything a tracker tells its caller, as plain data."
    pos = tr.position
    return (pos.paths.tolist(), pos.depth.tolist(), pos.paths.dtype, pos.depth.dtype, tr.done.tolist(),
            tr.failed.tolist(), tr.emitted.tolist(), tr.parent_index.tolist(), tr.open.tolist(),
            tr.allowed(vocab).tolist())


@settings(max_examples=60, deadline=None)
@given(order=st.sampled_from(["dfs", "bfs"]), n=st.integers(1, 3), max_depth=st.integers(0, 4),
       max_nodes=st.integers(1, 25), batch=st.integers(1, 5), errors=st.sampled_from(["raise", "flag"]),
       seed=st.integers(0, 2**31 - 1))
def test_python_state_equals_array_state(order, n, max_depth, max_nodes, batch, errors, seed):
    # the plain-Python small-batch path and the numpy path, fed the same random steps (mostly allowed tokens, some
    # not, beam reorders): the same positions, masks, counters and errors after every step
    g = torch.Generator().manual_seed(seed)
    patterns = [tuple(s for s in range(n) if m >> s & 1) for m in range(2 ** n)]
    vocab = ArityVocab([(f"t{i}", p) for i, p in enumerate(patterns)], n=n)
    args = (order, batch, n, max_depth, max_nodes, errors)
    rows, arrays = TreeTracker(*args, backend="python"), TreeTracker(*args, backend="numpy")
    assert type(rows) is not type(arrays) and isinstance(rows, TreeTracker)
    for _ in range(max_nodes + 3):
        assert tracker_state(rows, vocab) == tracker_state(arrays, vocab)
        if torch.rand((), generator=g) < 0.2:
            index = torch.randint(0, batch, (batch,), generator=g)
            rows.reorder(index); arrays.reorder(index)
            assert tracker_state(rows, vocab) == tracker_state(arrays, vocab)
        mask = arrays.allowed(vocab) if torch.rand((), generator=g) < 0.85 else torch.ones(batch, len(vocab), dtype=torch.bool)
        token = torch.multinomial(mask.float(), 1, generator=g).squeeze(1)
        slots = vocab.child_slots(token)
        results = []
        for tr in (rows, arrays):
            try: results.append(tr.step(slots))
            except ValueError as e: results.append(str(e))
        if isinstance(results[0], str): assert results[0] == results[1]
        else: assert results[0] == results[1] and results[0] is rows.position


def test_small_batch_picks_the_python_state():
    small, big = TreeTracker("dfs", TreeTracker.small_batch), TreeTracker("dfs", TreeTracker.small_batch + 1)
    assert type(small) is not TreeTracker and type(big) is TreeTracker
    assert type(TreeTracker("dfs", 1, backend="numpy")) is TreeTracker
    with pytest.raises(ValueError, match="backend must be None, 'numpy', 'torch' or 'python'"):
        TreeTracker(backend="list")
    with pytest.raises(ValueError, match="would hold 9.3 GiB of state"):          # the same limits, checked up front
        TreeTracker("bfs", 1, 2, max_depth=100_000, max_nodes=100_000)


def test_copies_keep_their_kind_of_state():
    import copy, pickle
    for backend in ("python", "numpy", "torch"):
        tr = TreeTracker("bfs", 2, 2, 4, backend=backend)
        tr.step(torch.tensor([[True, True], [False, True]]))
        for twin in (copy.deepcopy(tr), pickle.loads(pickle.dumps(tr))):
            assert type(twin) is type(tr) and twin.position == tr.position
            twin.step(torch.tensor([[False, False], [False, False]]))
            assert twin.emitted.tolist() == [2, 2] and tr.emitted.tolist() == [1, 1]
