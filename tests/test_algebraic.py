"""Property tests of `treepe_nb.algebraic`: tree maps against path products on random trees, rotations against
one matrix per token, RoPE equivalence and the RoPE <-> APE round trip, grids, dtypes, caching (hypothesis)."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.algebraic import (GridAPE, SequenceAPE, TreeAPE, ape_to_rope, orthogonal, rope_matrix, rope_to_ape, skew,
                                 skew_entries)
from treepe_nb.maps import PositionMaps
from treepe_nb.sequence import apply_rotary, frequencies
from treepe_nb.trees import Tree, TreePositions, batch_positions

from strategies import cuda, random_trees

F64 = torch.float64


def root_steps(positions, v):
    return [s for s in positions.paths[v].tolist() if s >= 0]


def path_product(tree, positions, a, c, G):
    "The product of the generators along the path a -> c: transposes up to the common ancestor, then down."
    up, down = tree.path(a, c)
    steps = root_steps(positions, a)
    out = torch.eye(G.shape[-1], dtype=G.dtype).expand(G.shape[1], -1, -1)
    for s in reversed(steps[len(steps) - up:]): out = out @ G[s].mT
    for s in down: out = out @ G[s]
    return out


@settings(max_examples=25, deadline=None)
@given(data=st.data(), n=st.sampled_from([2, 3]), init=st.sampled_from(["rope", "rope_mixed", "random"]),
       seed=st.integers(0, 2**31 - 1))
def test_relative_maps_are_path_products_for_all_pairs(data, n, init, seed):
    tree = data.draw(random_trees(max_branching=n))
    torch.manual_seed(seed)
    ape = TreeAPE(6, n, num_heads=2, init=init, std=0.5, dtype=F64)
    order = data.draw(st.sampled_from(["dfs", "bfs"]))
    pos = tree.positions(order)
    with torch.no_grad():
        M, G = ape.maps(pos), ape.generators()
    node_at = tree.order(order)                                   # row r of pos is node node_at[r]
    dfs = tree.positions()
    for ra in range(len(tree)):
        for rc in range(len(tree)):
            a, c = int(node_at[ra]), int(node_at[rc])
            torch.testing.assert_close(M[ra].mT @ M[rc], path_product(tree, dfs, a, c, G), atol=1e-10, rtol=0)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), n=st.sampled_from([2, 3]), seed=st.integers(0, 2**31 - 1))
def test_child_map_is_parent_map_times_generator(data, n, seed):
    tree = data.draw(random_trees(max_branching=n))
    torch.manual_seed(seed)
    ape = TreeAPE(4, n=n, num_heads=3, init="random", std=0.7, dtype=F64)
    with torch.no_grad():
        M, G = ape.maps(tree.positions()), ape.generators()
    torch.testing.assert_close(M[0], torch.eye(4, dtype=F64).expand(3, 4, 4))
    for v in range(1, len(tree)):
        torch.testing.assert_close(M[v], M[tree.parent[v]] @ G[tree.slot[v]], atol=1e-12, rtol=0)


@settings(max_examples=20, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=20, max_branching=3), min_size=1, max_size=4),
       order=st.sampled_from(["dfs", "bfs"]), seed=st.integers(0, 2**31 - 1))
def test_rotate_gives_the_bilinear_scores_and_zero_padding(trees, order, seed):
    torch.manual_seed(seed)
    pos = batch_positions(trees, order=order)
    ape = TreeAPE(6, 3, num_heads=2, init="rope_mixed", dtype=F64)
    B, L = pos.shape
    q, k = torch.randn(2, B, 2, L, 6, dtype=F64).unbind(0)
    with torch.no_grad():
        M = ape.maps(pos)                                         # [B, L, heads, d, d]
        maps = ape.prepare(pos)
        rq, rk = maps.rotate(q, k)
        expected = torch.einsum("bhai,bahji,bchjk,bhck->bhac", q, M, M, k)   # q_a^T M_a^T M_c k_c
    torch.testing.assert_close(rq @ rk.mT, expected, atol=1e-10, rtol=0)
    pad = ~pos.mask
    assert (rq.transpose(1, 2)[pad] == 0).all() and (M[pad] == 0).all()
    torch.testing.assert_close(ape.rotate(q, pos).detach(), rq)   # one at a time = together


@settings(max_examples=10, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=15, max_branching=2), min_size=1, max_size=3), seed=st.integers(0, 2**31 - 1))
def test_a_trees_maps_do_not_depend_on_its_batch(trees, seed):
    torch.manual_seed(seed)
    ape = TreeAPE(4, 2, num_heads=2)
    with torch.no_grad():
        together = ape.maps(batch_positions(trees))
        for b, tree in enumerate(trees):
            torch.testing.assert_close(together[b, :len(tree)], ape.maps(tree.positions()))


def test_gradients_match_one_matrix_per_token():
    torch.manual_seed(0)      # unseeded, finite differences of W^7000 fail gradcheck's tolerance for some draws
    trees = [Tree.from_sexpr("(a (b c (d e f)) (g (h i j) k))").lcrs(), Tree.from_sexpr("(x y)")]
    pos = batch_positions(trees)
    ape = TreeAPE(4, 2, num_heads=2, init="random", std=0.5, dtype=F64)
    x = torch.randn(2, 2, pos.shape[1], 4, dtype=F64, requires_grad=True)
    entries = ape.entries.detach().clone().requires_grad_()
    rotate = lambda e, x: torch.func.functional_call(ape, {"entries": e}, (x, pos))
    assert torch.autograd.gradcheck(rotate, (entries, x))
    seq = SequenceAPE(6, 2, init="random", std=0.5, dtype=F64)
    e = seq.entries.detach().clone().requires_grad_()
    y = torch.randn(2, 2, 5, 6, dtype=F64)
    for p in (torch.tensor([[0, 3, -2, 7, 1], [2, 2, 2, 9, 0]]), torch.tensor([0, 300, -2, 7000, 1])):
        assert torch.autograd.gradcheck(lambda e: torch.func.functional_call(seq, {"entries": e}, (y, p)), (e,))


def test_every_parameter_is_used():
    ape = TreeAPE(8, 3, num_heads=4)
    tree = Tree.from_sexpr("(a (b c d e) (f g h i) (j k l m))")
    (ape.rotate(torch.randn(1, 4, len(tree), 8), tree.positions()[None]) ** 2).sum().backward()
    assert ape.entries.shape == (3, 4, 28) and (ape.entries.grad != 0).all()


@pytest.mark.parametrize("init", ["rope", "rope_mixed", "random"])
def test_orthogonal_at_depth_64_in_float32(init):
    torch.manual_seed(0)
    deep = TreePositions(torch.randint(0, 3, (8, 64)), torch.full((8,), 64))
    with torch.no_grad():
        M = TreeAPE(64, 3, num_heads=4, init=init, std=0.3).maps(deep)
    assert M.dtype == torch.float32
    assert (M.mT @ M - torch.eye(64)).abs().max() <= 1e-4


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_are_computed_in_float32_and_returned_in_their_dtype(dtype):
    tree = Tree.from_sexpr("(a (b c) (d e f))").lcrs()
    ape = TreeAPE(16, 2, num_heads=2)
    x = torch.randn(1, 2, len(tree), 16)
    with torch.no_grad():
        y = ape.rotate(x.to(dtype), tree.positions()[None])
        assert ape.maps(tree.positions()).dtype == torch.float32
        assert y.dtype == dtype
        torch.testing.assert_close(y.float(), ape.rotate(x.to(dtype).float(), tree.positions()[None]), atol=3e-2, rtol=3e-2)
    ape_half = TreeAPE(16, 2, num_heads=2).half()                     # half parameters: still float32 maps
    with torch.no_grad():
        assert ape_half.generators().dtype == torch.float32


@pytest.mark.parametrize("dense_limit", [0, 2**30])               # the grouped path and the per-token one
def test_backward_inside_autocast_stays_float32(dense_limit):
    "A backward pass run inside a bf16 autocast block (a FLOP counter's, say) gives the float32 gradients of the maps."
    trees = [Tree.from_sexpr("(a (b c) (d e f))").lcrs(), Tree.from_sexpr("(a (b (c d)) e)").lcrs()] * 8
    pos = batch_positions(trees)
    x = torch.randn(len(trees), 2, pos.depth.shape[-1], 16)
    grads = []
    for autocast in (False, True):
        torch.manual_seed(0)
        ape = TreeAPE(16, 2, num_heads=2)
        maps = ape.prepare(pos)
        maps.dense_limit = dense_limit
        with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
            maps.rotate(x).sum().backward()
        grads.append(ape.entries.grad)
    assert grads[0].dtype == grads[1].dtype == torch.float32
    torch.testing.assert_close(grads[1], grads[0])


def test_tree_errors_name_the_node_and_limit():
    ape = TreeAPE(4, 2)
    with pytest.raises(ValueError, match=r"positions: the node at index \(3,\) takes slot 2 at depth 1, but n=2 allows slots 0..1"):
        ape.maps(Tree.from_sexpr("(f a b c)").positions())
    deep = Tree.from_sexpr("(a (b (c (d e))))")
    with pytest.raises(ValueError, match=r"index \(3,\) has depth 3 but its root path keeps only 2 steps"):
        ape.maps(deep.positions(max_depth=2, overflow="truncate"))     # truncated paths: APE needs whole root paths
    with pytest.raises(ValueError, match="depths are >= 0, or -1 for padding"):
        ape.maps(TreePositions(torch.tensor([[-1]]), torch.tensor([-2])))
    with pytest.raises(TypeError, match="TreePositions.paths must hold integers"):
        ape.maps(TreePositions(torch.tensor([[0.0]]), torch.tensor([1])))
    with pytest.raises(TypeError, match="positions must be TreePositions, got Tensor"):
        ape.maps(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        TreeAPE(4, 0)
    with pytest.raises(ValueError, match="head_dim must be even"):
        TreeAPE(5, 2, init="rope")
    assert TreeAPE(5, 2, init="random").maps(deep.positions()).shape == (5, 1, 5, 5)


def test_tree_ape_keyword_is_n():
    ape = TreeAPE(8, n=3, num_heads=2)
    assert ape.n == 3 and ape.generators().shape == (3, 2, 8, 8) and not hasattr(ape, "branching")
    with pytest.raises(TypeError):
        TreeAPE(8, branching=3)


def test_one_node_trees_alone_and_mixed_with_deep_trees():
    ape = TreeAPE(4, 2, num_heads=2, dtype=F64)
    one = Tree.from_sexpr("a").positions()
    assert one.paths.shape == (1, 0)
    with torch.no_grad():
        torch.testing.assert_close(ape.maps(one), torch.eye(4, dtype=F64).expand(1, 2, 4, 4))
        deep = Tree.from_sexpr("(a (b (c d) e) (f g))").lcrs()
        mixed = batch_positions([Tree.from_sexpr("x"), deep, Tree.from_sexpr("y")])
        M = ape.maps(mixed)
        torch.testing.assert_close(M[1], ape.maps(deep.positions()))
        for b in (0, 2):
            torch.testing.assert_close(M[b, 0], torch.eye(4, dtype=F64).expand(2, 4, 4))
            assert (M[b, 1:] == 0).all()
        x = torch.randn(3, 2, mixed.shape[1], 4, dtype=F64)
        torch.testing.assert_close(ape.rotate(x, mixed), torch.einsum("blhij,bhlj->bhli", M, x))


def test_empty_tree_batch_is_a_value_error():
    ape = TreeAPE(4, 2)
    for shape in ((0,), (2, 0)):
        empty = TreePositions(torch.zeros(*shape, 3, dtype=torch.long), torch.zeros(*shape, dtype=torch.long))
        with pytest.raises(ValueError, match="positions is an empty batch"):
            ape.maps(empty)


def test_one_branch_tree_is_rope():
    chain = TreePositions(torch.where(torch.arange(20) < torch.arange(20)[:, None], 0, -1), torch.arange(20))
    with torch.no_grad():
        torch.testing.assert_close(TreeAPE(8, 1, num_heads=2, init="rope", dtype=F64).maps(chain),
                                   SequenceAPE.from_rope(8, num_heads=2, dtype=F64).maps(torch.arange(20)))


@settings(max_examples=30, deadline=None)
@given(dim=st.integers(1, 16).map(lambda h: 2 * h), length=st.integers(1, 40), batch=st.integers(1, 3),
       spread=st.sampled_from([10, 100_000]), shared=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_from_rope_is_apply_rotary(dim, length, batch, spread, shared, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 2, length, dim, dtype=F64, generator=g)
    pos = torch.randint(-spread, spread, (length,) if shared else (batch, length), generator=g)
    with torch.no_grad():
        ours = SequenceAPE.from_rope(dim, num_heads=2, dtype=F64).rotate(x, pos)
    torch.testing.assert_close(ours, apply_rotary(x, pos), atol=1e-8, rtol=0)


def test_from_rope_matches_rotary_embedding_torch_scores():
    from rotary_embedding_torch import RotaryEmbedding
    torch.manual_seed(0)
    ref = RotaryEmbedding(32)
    q, k = torch.randn(2, 2, 4, 64, 32).unbind(0)
    ape = SequenceAPE.from_rope(32, num_heads=4)
    with torch.no_grad():
        ours = ape.rotate(q, torch.arange(64)) @ ape.rotate(k, torch.arange(64)).mT
    torch.testing.assert_close(ours, ref.rotate_queries_or_keys(q) @ ref.rotate_queries_or_keys(k).mT, atol=2e-4, rtol=1e-4)


@settings(max_examples=30, deadline=None)
@given(p=st.lists(st.integers(-300, 300), min_size=1, max_size=12, unique=True), seed=st.integers(0, 2**31 - 1))
def test_powers_are_repeated_products(p, seed):
    torch.manual_seed(seed)
    ape = SequenceAPE(4, num_heads=2, init="random", std=0.5, dtype=F64)
    p = torch.tensor(sorted(p))
    with torch.no_grad():
        W = ape.generator()
        got = ape.powers(p)
    for i, n in enumerate(p.tolist()):
        torch.testing.assert_close(got[i], torch.linalg.matrix_power(W, n), atol=1e-9, rtol=0)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 6), seed=st.integers(0, 2**31 - 1), special=st.sampled_from(["none", "repeat", "zero", "pi"]))
def test_rope_ape_round_trip(m, seed, special):
    g = torch.Generator().manual_seed(seed)
    d = 2 * m
    angles = torch.rand(m, dtype=F64, generator=g) * math.pi
    if special == "repeat": angles[:] = angles[0]
    if special == "zero": angles[: (m + 1) // 2] = 0
    if special == "pi": angles[0] = math.pi
    P, _ = torch.linalg.qr(torch.randn(d, d, dtype=F64, generator=g))
    W = torch.linalg.matrix_exp(rope_to_ape(angles, P))
    got, B = ape_to_rope(W)
    torch.testing.assert_close(got, angles.sort(descending=True).values, atol=1e-7, rtol=0)
    torch.testing.assert_close(B @ rope_matrix(got) @ B.mT, W, atol=1e-9, rtol=0)
    torch.testing.assert_close(B.mT @ B, torch.eye(d, dtype=F64), atol=1e-9, rtol=0)
    torch.testing.assert_close(torch.linalg.matrix_exp(rope_to_ape(got, B)), W, atol=1e-9, rtol=0)


def test_ape_to_rope_of_learned_generators_gives_the_same_scores():
    torch.manual_seed(0)
    ape = SequenceAPE(8, num_heads=3, init="random", std=0.4, dtype=F64)
    with torch.no_grad():
        angles, P = ape.to_rope()
        x = torch.randn(1, 3, 10, 8, dtype=F64)
        pos = torch.arange(10)
        ours = ape.rotate(x, pos)
    R = rope_matrix(pos[:, None, None].double() * angles)        # [length, heads, d, d]
    via_rope = torch.einsum("hij,lhjk,hlk->hli", P, R, torch.einsum("hji,bhlj->hli", P, x))[None]
    torch.testing.assert_close(ours, via_rope, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="contains a reflection"):
        ape_to_rope(torch.diag(torch.tensor([-1.0, 1.0])))


@settings(max_examples=20, deadline=None)
@given(axes=st.integers(1, 3), length=st.integers(1, 30), shift=st.lists(st.integers(-50, 50), min_size=3, max_size=3),
       init=st.sampled_from(["rope", "rope_mixed", "random"]), seed=st.integers(0, 2**31 - 1))
def test_grid_scores_depend_on_coordinate_differences_only(axes, length, shift, init, seed):
    torch.manual_seed(seed)
    grid = GridAPE(4 * axes, num_heads=2, axes=axes, init=init, std=0.5, dtype=F64)
    coords = torch.randint(0, 20, (2, length, axes))
    q, k = torch.randn(2, 2, 2, length, 4 * axes, dtype=F64).unbind(0)
    with torch.no_grad():
        def scores(c): return grid.rotate(q, c) @ grid.rotate(k, c).mT
        torch.testing.assert_close(scores(coords + torch.tensor(shift[:axes])), scores(coords), atol=1e-9, rtol=0)
        M = grid.maps(coords)
        blocks = torch.stack([torch.stack([a.maps(coords[..., i]) for i, a in enumerate(grid.per_axis)])])
    for i in range(axes):
        s = slice(4 * i, 4 * i + 4)
        torch.testing.assert_close(M[..., s, s], blocks[0, i])


def test_skew_entries_round_trip_and_orthogonal():
    e = torch.randn(5, 10)
    torch.testing.assert_close(skew_entries(skew(e, 5)), e)
    W = orthogonal(e, 5)
    torch.testing.assert_close(W.mT @ W, torch.eye(5).expand(5, 5, 5), atol=1e-6, rtol=0)


def test_generators_once_per_forward_and_cached_in_eval(monkeypatch):
    calls = []
    exp = torch.linalg.matrix_exp
    monkeypatch.setattr(torch.linalg, "matrix_exp", lambda A: calls.append(A.shape) or exp(A))
    tree = Tree.from_sexpr("(a (b c) (d e f))").lcrs()
    pos = batch_positions([tree, tree])
    ape = TreeAPE(8, 2, num_heads=2)
    x = torch.randn(2, 2, len(tree), 8, requires_grad=True)
    maps = ape.prepare(pos)
    sum(y.sum() for _ in range(3) for y in maps.rotate(x, 2 * x)).backward()
    assert len(calls) == 1
    ape.eval()
    with torch.no_grad():
        for _ in range(3): ape.rotate(x, pos)
    assert len(calls) == 2
    with torch.no_grad(): ape.entries.mul_(0.5)
    with torch.no_grad(): ape.rotate(x, pos)
    assert len(calls) == 3
    ape.rotate(x, pos)                                            # eval but with autograd: not cached
    assert len(calls) == 4
    assert "_cache" not in ape.state_dict() and "_cache" in dict(ape.named_buffers())


def test_position_maps_errors_and_empty_batches():
    pm = PositionMaps(torch.eye(4).expand(2, 1, 4, 4), torch.tensor([0, 1, -1]))
    with pytest.raises(ValueError, match="has length 2"):
        pm.rotate(torch.randn(1, 1, 2, 4))
    with pytest.raises(ValueError, match="must have one shape"):
        pm.rotate(torch.randn(1, 1, 3, 4), torch.randn(2, 1, 3, 4))
    empty = TreePositions(torch.full((2, 3, 2), -1), torch.full((2, 3), -1))
    ape = TreeAPE(4, 2, num_heads=1)
    y = ape.rotate(torch.randn(2, 1, 3, 4, requires_grad=True), empty)
    assert (y == 0).all()
    y.sum().backward()


@cuda
def test_everything_runs_on_cuda():
    dev = torch.device("cuda")
    trees = [Tree.from_sexpr("(a (b c) (d e f))").lcrs(), Tree.from_sexpr("(x y)")]
    pos = batch_positions(trees)
    ape = TreeAPE(16, 2, num_heads=2)
    x = torch.randn(2, 2, pos.shape[1], 16)
    expected = ape.rotate(x, pos).detach()
    ape_gpu = ape.to(dev)
    y = ape_gpu.rotate(x.to(dev, torch.float16), pos.to(dev))
    assert y.device.type == "cuda" and y.dtype == torch.float16
    torch.testing.assert_close(y.float().cpu(), expected, atol=2e-2, rtol=2e-2)
    seq = SequenceAPE.from_rope(16, num_heads=2).to(dev)
    torch.testing.assert_close(seq.rotate(x.to(dev), torch.arange(pos.shape[1], device=dev)).cpu().detach(),
                               apply_rotary(x), atol=1e-4, rtol=1e-4)
    grid = GridAPE(16, num_heads=2).to(dev)
    assert grid.rotate(x.to(dev), torch.zeros(2, pos.shape[1], 2, dtype=torch.long, device=dev)).device.type == "cuda"


# ---------------------------------------------------------------------------------------------------------------
# Hardening


def _ortho_err(M):
    return (M.mT.double() @ M.double() - torch.eye(M.shape[-1], dtype=F64)).abs().max().item()


@pytest.mark.parametrize("init", ["rope", "random"])
def test_sequence_maps_stay_orthogonal_at_huge_positions_in_float32(init):
    torch.manual_seed(0)
    ape = SequenceAPE(32, num_heads=2, init=init, std=0.5)
    p = torch.tensor([2**28, 2**32, 2**40, -2**40 - 7, 2**62 + 3, 2**63 - 1, -(2**63 - 1)])
    with torch.no_grad():
        M = ape.maps(p)                                           # sparse: the binary-digit path
        assert M.dtype == torch.float32 and torch.isfinite(M).all()
        assert _ortho_err(M) < 1e-5
        torch.testing.assert_close(ape.maps(torch.tensor([-(2**63 - 1)]))[0], M[5].mT)


def test_dense_table_stays_orthogonal_in_float32():
    with torch.no_grad():
        M = SequenceAPE.from_rope(8).powers(torch.arange(2**16))  # the doubling table
    assert _ortho_err(M) < 1e-5


def test_position_limits_are_named():
    ape = SequenceAPE(8)
    with pytest.raises(ValueError, match=r"sequence positions: the position at index \(1, 0\) is -9223372036854775808, "
                                         r"below the limit -\(2\*\*63 - 1\)"):
        ape.prepare(torch.tensor([[0, 1], [-2**63, 3]]))
    with pytest.raises(ValueError, match="below the limit"):
        ape.powers(torch.tensor([-2**63]))
    with torch.no_grad():                                        # int32 positions are widened, not wrapped
        torch.testing.assert_close(ape.powers(torch.tensor([-2**31], dtype=torch.int32)),
                                   ape.powers(torch.tensor([2**31])).mT)
    with pytest.raises(TypeError, match="sequence positions must be an integer tensor"):
        ape.prepare(torch.tensor([1.0]))


def test_integer_inputs_to_rotate_are_refused():
    x = torch.arange(2 * 8, dtype=torch.long).view(1, 1, 2, 8)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        SequenceAPE(8).rotate(x, torch.arange(2))
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        TreeAPE(8).rotate(x, Tree.from_sexpr("(a b)").positions())
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        GridAPE(8).rotate(x, torch.zeros(1, 2, 2, dtype=torch.long))


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_ape_to_rope_refuses_nan_and_inf(bad):
    W = torch.eye(4, dtype=F64).repeat(2, 1, 1)
    W[1, 2, 3] = bad
    with pytest.raises(ValueError, match=r"W\[1\] is not orthogonal"):
        ape_to_rope(W)


@pytest.mark.parametrize("make", [lambda: SequenceAPE(0), lambda: SequenceAPE(8, num_heads=0), lambda: TreeAPE(-2, 2),
                                  lambda: TreeAPE(8, n=-1), lambda: GridAPE(0), lambda: GridAPE(8, num_heads=0),
                                  lambda: GridAPE(8, axes=0)])
def test_non_positive_sizes_are_value_errors_naming_the_argument(make):
    with pytest.raises(ValueError, match=r"(head_dim|num_heads|n|axes) must be >= 1, got -?\d"):
        make()


def test_sizes_must_be_integers_and_even_where_pairs_are_rotated():
    with pytest.raises(TypeError, match="head_dim must be an int, got float"):
        SequenceAPE(8.0)
    with pytest.raises(TypeError, match="n must be an int, got str"):
        TreeAPE(8, n="2")
    with pytest.raises(ValueError, match=r"head_dim // axes = 3 coordinates \(head_dim=6, axes=2\), which must be even"):
        GridAPE(6, axes=2)
    with pytest.raises(ValueError, match="head_dim=10 must split evenly over axes=3"):
        GridAPE(10, axes=3)
    assert GridAPE(6, axes=2, init="random").maps(torch.zeros(1, 3, 2, dtype=torch.long)).shape == (1, 3, 1, 6, 6)
    assert SequenceAPE(np.int64(4)).head_dim == 4


def test_grid_coordinates_are_validated():
    grid = GridAPE(8, num_heads=1, axes=2)
    with pytest.raises(TypeError, match="grid coordinates must be an integer tensor, got torch.float32"):
        grid.prepare(torch.zeros(1, 3, 2))
    with pytest.raises(TypeError, match="grid coordinates must be an integer tensor, got torch.bool"):
        grid.prepare(torch.zeros(1, 3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"grid coordinates must be \[\*batch, length, axes=2\], got \(1, 3, 3\)"):
        grid.prepare(torch.zeros(1, 3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"grid coordinates must be \[\*batch, length, axes=2\], got \(2,\)"):
        grid.prepare(torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"grid coordinates: the position at index \(0, 1, 1\) is -9223372036854775808"):
        grid.prepare(torch.tensor([[[0, 0], [5, -2**63]]]))
    x = torch.randn(2, 1, 3, 8)
    with pytest.raises(ValueError, match=r"x must be \[..., length=4, head_dim=8\] for these coordinates, got \(2, 1, 3, 8\)"):
        grid.rotate(x, torch.zeros(2, 4, 2, dtype=torch.long))


def _update_data_mul(ape): ape.entries.data.mul_(0.5)
def _update_data_assign(ape): ape.entries.data = ape.entries.data * 2 + 0.01
def _update_load_state_dict(ape): ape.load_state_dict({"entries": ape.entries.detach() * 0.9})
def _update_ema_in_place(ape): ape.entries.data.lerp_(torch.zeros_like(ape.entries), 0.1)


@pytest.mark.parametrize("update", [_update_data_mul, _update_data_assign, _update_load_state_dict, _update_ema_in_place])
@pytest.mark.parametrize("kind", ["tree", "sequence"])
def test_eval_cache_sees_every_parameter_update(update, kind):
    torch.manual_seed(0)
    ape = TreeAPE(8, 2, num_heads=2, init="random", std=0.3) if kind == "tree" else SequenceAPE(8, 2, init="random", std=0.3)
    pos = Tree.from_sexpr("(a (b c) (d e))").positions() if kind == "tree" else torch.arange(5)
    ape.eval()
    with torch.no_grad():
        before = ape.maps(pos)
        torch.testing.assert_close(ape.maps(pos), before)         # cached
        update(ape)
        fresh = orthogonal(ape.entries.detach(), 8)
        torch.testing.assert_close(ape.generators(), fresh)
        assert not torch.allclose(ape.maps(pos), before)
    with torch.inference_mode():
        torch.testing.assert_close(ape.generators(), fresh)


def test_eval_cache_follows_device_and_dtype_changes():
    ape = TreeAPE(8, 2, num_heads=2).eval()
    with torch.no_grad():
        g32 = ape.generators()
        ape.double()
        g64 = ape.generators()
        assert g64.dtype == F64
        torch.testing.assert_close(g64.float(), g32)
        ape.half()
        assert ape.generators().dtype == torch.float32
        torch.testing.assert_close(ape.generators(), orthogonal(ape.entries.detach(), 8))
