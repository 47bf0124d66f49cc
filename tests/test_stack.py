"""Property tests of `treepe_nb.stack`: the encoding against the affine maps, on random trees (hypothesis), one-node
trees and mixed batches, and the errors bad input gets."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.stack import TreePositionalEncoding, apply, compose, down, path_map, stack_encode, up
from strategies import cuda, random_trees
from treepe_nb.trees import Tree, TreePositions, batch_positions, collate_positions


def by_maps(path, n, k):
    "The encoding of a root path by applying D for each step to the zero vector (eq. 2)."
    v = torch.zeros(n * k, dtype=torch.float64)
    for s in path: v = apply(down(s, n, k), v)
    return v


@settings(max_examples=40, deadline=None)
@given(tree=random_trees(), k=st.integers(1, 8), order=st.sampled_from(["dfs", "bfs"]))
def test_encoding_equals_the_affine_maps(tree, k, order):
    pos = tree.positions(order, max_depth=max(k, int(tree.depth.max())))
    pe = stack_encode(pos, 3, k, overflow="truncate", dtype=torch.float64)
    for v in range(len(tree)):
        path = [s for s in pos.paths[v].tolist() if s >= 0]
        torch.testing.assert_close(pe[v], by_maps(path, 3, k), atol=0, rtol=0)


@settings(max_examples=40, deadline=None)
@given(tree=random_trees(max_branching=2), k=st.integers(2, 7), data=st.data())
def test_every_path_within_depth_k_is_an_exact_affine_map(tree, k, data):
    pe = stack_encode(tree.positions(max_depth=max(k, int(tree.depth.max()))), 2, k,
                      overflow="truncate", dtype=torch.float64)
    inside = np.flatnonzero(tree.depth <= k).tolist()
    for _ in range(10):
        a, b = data.draw(st.sampled_from(inside)), data.draw(st.sampled_from(inside))
        torch.testing.assert_close(apply(path_map(*tree.path(a, b), 2, k), pe[a]), pe[b], atol=0, rtol=0)


@settings(max_examples=20, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=20), min_size=1, max_size=5), k=st.integers(1, 6))
def test_batches_match_single_trees_and_padding_is_zero(trees, k):
    batch = batch_positions(trees, max_depth=max(k, max(int(t.depth.max()) for t in trees)))
    pe = stack_encode(batch, 3, k, overflow="truncate")
    for b, t in enumerate(trees):
        single = t.positions(max_depth=max(k, int(t.depth.max())))
        torch.testing.assert_close(pe[b, :len(t)], stack_encode(single, 3, k, overflow="truncate"))
        assert (pe[b, len(t):] == 0).all()


def test_one_node_tree_is_the_zero_vector():
    "Defect: paths of width 0 (a one-node tree) made the reshape fail."
    pos = Tree.from_sexpr("a").positions("dfs")
    assert pos.paths.shape == (1, 0)
    assert torch.equal(stack_encode(pos, 2, 4), torch.zeros(1, 8))
    assert torch.equal(stack_encode(Tree.from_sexpr("a").positions("bfs", max_depth=3), 3, 2), torch.zeros(1, 6))
    module = TreePositionalEncoding(16, n=2, max_depth=4)
    assert torch.equal(module(pos), torch.zeros(1, 16))


@settings(max_examples=30, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=15), min_size=1, max_size=4), leaves=st.integers(1, 3),
       k=st.integers(1, 5), order=st.sampled_from(["dfs", "bfs"]), data=st.data())
def test_batches_mixing_one_node_and_deep_trees(trees, leaves, k, order, data):
    mixed = list(trees)
    for _ in range(leaves): mixed.insert(data.draw(st.integers(0, len(mixed))), Tree.from_sexpr("x"))
    deepest = max(int(t.depth.max()) for t in mixed)
    for pos in (batch_positions(mixed, order), collate_positions([t.positions(order, deepest) for t in mixed])):
        pe = stack_encode(pos, 3, k, overflow="truncate")
        assert pe.shape == (len(mixed), max(len(t) for t in mixed), 3 * k)
        for b, t in enumerate(mixed):
            single = stack_encode(t.positions(order), 3, k, overflow="truncate")
            torch.testing.assert_close(pe[b, :len(t)], single, atol=0, rtol=0)
            assert (pe[b, len(t):] == 0).all()
            if len(t) == 1: assert (pe[b] == 0).all()
    # collated items of different widths (a one-node tree has width 0)
    pe = stack_encode(collate_positions([Tree.from_sexpr("x").positions(), mixed[0].positions()]), 3, k,
                      overflow="truncate")
    assert (pe[0] == 0).all()


def test_down_then_up_is_identity_until_depth_k():
    n, k = 3, 4
    UD = [(up(n, k)[0] @ down(i, n, k)[0]) for i in range(n)]
    for depth in range(k + 1):
        x = by_maps([depth % n] * depth, n, k)
        for A in UD: assert torch.equal(A @ x, x) == (depth <= k - 1)


def test_limits_are_errors_unless_asked():
    wide = Tree.from_sexpr("(a b c d)").positions()
    with pytest.raises(ValueError, match=r"index \(3,\) takes slot 2 at depth 1, but n=2 allows slots 0..1"):
        stack_encode(wide, 2, 4)
    chain = Tree.from_sexpr("(a (b (c (d e))))").positions()
    with pytest.raises(ValueError, match=r"index \(4,\) has depth 4 > max_depth=3"): stack_encode(chain, 2, 3)
    assert stack_encode(chain, 2, 3, overflow="truncate")[4].tolist() == [1, 0] * 3
    for old in ("clamp", "keep_last"):
        with pytest.raises(ValueError, match="overflow must be 'raise' or 'truncate'"):
            stack_encode(chain, 2, 3, overflow=old)
    short = Tree.from_sexpr("(a (b (c (d e))))").positions(max_depth=2, overflow="truncate")
    with pytest.raises(ValueError, match="keeps only 2 steps"): stack_encode(short, 2, 3, overflow="truncate")


def test_empty_batch_is_a_value_error():
    for shape in ((0,), (2, 0), (0, 5)):
        empty = TreePositions(torch.zeros(*shape, 3, dtype=torch.long), torch.zeros(*shape, dtype=torch.long))
        with pytest.raises(ValueError, match="positions is an empty batch"): stack_encode(empty, 2, 3)


def test_bad_positions_are_type_or_value_errors_naming_the_argument():
    # float paths: a NaN or 0.5 slot used to drop its one-hot silently
    for bad in (torch.tensor([[0., 0.5]]), torch.tensor([[0., float("nan")]]), torch.tensor([[True, False]])):
        with pytest.raises(TypeError, match="TreePositions.paths must hold integers"):
            stack_encode(TreePositions(bad, torch.tensor([2])), 2, 3)
    with pytest.raises(TypeError, match="TreePositions.depth must hold integers"):
        TreePositions(torch.tensor([[0, 1]]), torch.tensor([2.0]))
    # paths [2, 4, K] with depth [4, 2] used to encode as [4, 2, 8]
    with pytest.raises(ValueError, match=r"paths must be \[\*batch, K\] for depth \[\*batch\]"):
        TreePositions(torch.zeros(2, 4, 3, dtype=torch.long), torch.zeros(4, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"paths must be \[\*batch, K\]"):        # mismatched lengths
        TreePositions(torch.zeros(3, 2, dtype=torch.long), torch.zeros(4, dtype=torch.long))
    pos = Tree.from_sexpr("(a b)").positions()
    with pytest.raises(TypeError, match="positions must be a TreePositions"): stack_encode((pos.paths, pos.depth), 2, 3)
    with pytest.raises(TypeError, match="positions must be a TreePositions"): stack_encode(pos.paths, 2, 3)
    with pytest.raises(ValueError, match=r"index \(0,\) has slot -5 at depth 2"):
        stack_encode(TreePositions(torch.tensor([[0, -5]]), torch.tensor([2])), 2, 3)
    with pytest.raises(ValueError, match="entries past a node's depth must be -1"):
        stack_encode(TreePositions(torch.tensor([[0, 1]]), torch.tensor([1])), 2, 3)
    with pytest.raises(ValueError, match="has depth -3; depths are >= 0"):
        stack_encode(TreePositions(torch.tensor([[0, 1]]), torch.tensor([-3])), 2, 3)


def test_bad_limits_are_errors_naming_the_argument():
    pos = Tree.from_sexpr("(a b)").positions()
    with pytest.raises(TypeError, match="max_depth must be an int, got float"): stack_encode(pos, 2, 3.0)
    with pytest.raises(TypeError, match="max_depth must be an int, got bool"): stack_encode(pos, 2, True)
    with pytest.raises(ValueError, match="max_depth must be >= 1, got 0"): stack_encode(pos, 2, 0)
    with pytest.raises(TypeError, match="the branching factor n must be an int"): stack_encode(pos, 2.0, 3)
    with pytest.raises(ValueError, match="the branching factor n must be >= 1, got 0"): stack_encode(pos, 0, 3)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"): stack_encode(pos, 2, 3, dtype="float32")
    with pytest.raises(ValueError, match="the depth limit k .* must be >= 1"): down(0, 2, 0)
    with pytest.raises(ValueError, match="child slot 2 does not exist"): down(2, 2, 3)
    with pytest.raises(ValueError, match="the child slot i must be >= 0"): down(-1, 2, 3)
    with pytest.raises(TypeError, match="the branching factor n must be an int"): up(2.5, 3)
    with pytest.raises(ValueError, match="up_steps must be >= 0"): path_map(-1, [], 2, 3)
    with pytest.raises(ValueError, match="compose needs at least one affine map"): compose()


def test_compose_and_path_map_agree_with_single_steps():
    x = by_maps([1, 0], 2, 4)
    A = compose(up(2, 4), down(1, 2, 4))
    torch.testing.assert_close(apply(A, x), apply(down(1, 2, 4), apply(up(2, 4), x)))
    torch.testing.assert_close(apply(path_map(1, [1], 2, 4), x), by_maps([1, 1], 2, 4))
    torch.testing.assert_close(apply(path_map(0, [], 2, 4), x), x)


def test_learnable_module_weights_chunks_by_powers_of_p():
    pe = TreePositionalEncoding(d_model=64, n=2, max_depth=8, num_p=4)
    pos = Tree.from_sexpr("(a (b (c d)) e)").lcrs().positions()
    out = pe(pos).detach()
    base = stack_encode(pos, 2, 8).view(-1, 8, 2)
    p = pe.p.detach()
    for c in range(4):      # the authors' scale sqrt((1 - p^2) d_model / 2), d_model = 64
        expected = base * (p[c] ** torch.arange(8.0))[:, None] * torch.sqrt((1 - p[c] ** 2) * 64 / 2)
        torch.testing.assert_close(out[:, c * 16:(c + 1) * 16], expected.flatten(1))


def test_scale_default_is_sqrt_half_d_model_and_can_be_set():
    pos = Tree.from_sexpr("(a (b (c d)) e)").lcrs().positions()
    code, typeset = TreePositionalEncoding(256), TreePositionalEncoding(256, scale=math.sqrt(256) / 2)
    assert code.scale == pytest.approx(math.sqrt(128))
    torch.testing.assert_close(code(pos) / math.sqrt(2), typeset(pos))
    # one copy of a deep node (all steps kept, p small) has the sinusoidal norm sqrt(d_model / 2)
    one = TreePositionalEncoding(64, n=2, max_depth=32, num_p=1, p_init=(0.3, 0.3), overflow="truncate")
    chain = Tree.from_parents(list(range(41)), [-1] + list(range(40))).positions(max_depth=40)
    assert one(chain)[-1].norm().item() == pytest.approx(math.sqrt(32), rel=1e-5)


def test_learnable_module_rejects_bad_sizes():
    for kwargs, err, msg in [(dict(d_model=0), ValueError, "d_model must be >= 1"),
                             (dict(d_model=-4), ValueError, "d_model must be >= 1"),
                             (dict(d_model=64.0), TypeError, "d_model must be an int"),
                             (dict(d_model=64, n=0), ValueError, "the branching factor n must be >= 1"),
                             (dict(d_model=64, max_depth=0), ValueError, "max_depth must be >= 1"),
                             (dict(d_model=64, num_p=0), ValueError, "num_p must be >= 1"),
                             (dict(d_model=64, num_p=1.5), TypeError, "num_p must be an int"),
                             (dict(d_model=64, p_init=(0.5, 1.0)), ValueError, "p_init must lie in"),
                             (dict(d_model=64, p_init=(-1.0, 0.5)), ValueError, "p_init must lie in"),
                             (dict(d_model=64, p_init=(0.8, 0.2)), ValueError, "lo <= hi"),
                             (dict(d_model=64, p_init=(float("nan"), 0.5)), ValueError, "p_init must lie in"),
                             (dict(d_model=64, p_init=0.5), TypeError, "p_init must be a pair"),
                             (dict(d_model=64, p_init=(0.1, 0.2, 0.3)), TypeError, "p_init must be a pair"),
                             (dict(d_model=64, p_init=("a", 0.5)), TypeError, "p_init must be a pair"),
                             (dict(d_model=64, overflow="keep_last"), ValueError, "overflow must be"),
                             (dict(d_model=64, scale=-1.0), ValueError, "scale must be a positive"),
                             (dict(d_model=64, scale=float("inf")), ValueError, "scale must be a positive")]:
        with pytest.raises(err, match=msg): TreePositionalEncoding(**kwargs)


@cuda
def test_cuda_matches_cpu():
    trees = [Tree.from_sexpr("(a (b c (d e f)) (g (h i j) k))").lcrs(), Tree.from_sexpr("(x y)"),
             Tree.from_sexpr("z")]
    pos = batch_positions(trees)
    torch.testing.assert_close(stack_encode(pos.to("cuda"), 2, 8).cpu(), stack_encode(pos, 2, 8))
    leaf = Tree.from_sexpr("z").positions()
    torch.testing.assert_close(stack_encode(leaf.to("cuda"), 2, 8).cpu(), torch.zeros(1, 16))
    module = TreePositionalEncoding(64, n=2, max_depth=8)
    torch.testing.assert_close(module.cuda()(pos.to("cuda")).cpu(), module.cpu()(pos))


def test_compiles_to_one_graph():
    "torch.compile friendly: no graph break (dynamo with the eager backend, so no C++ toolchain is needed)."
    torch._dynamo.reset()
    pos = batch_positions([Tree.from_sexpr("(a (b c) d)").lcrs(), Tree.from_sexpr("a")])
    module = TreePositionalEncoding(64, max_depth=8)
    torch.testing.assert_close(torch.compile(module, backend="eager", fullgraph=True)(pos), module(pos))
    encode = torch.compile(lambda p: stack_encode(p, 2, 8), backend="eager", fullgraph=True)
    torch.testing.assert_close(encode(pos), stack_encode(pos, 2, 8))
