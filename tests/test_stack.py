"""Property tests of `treepe_nb.stack`: the encoding against the affine maps, on random trees (hypothesis)."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.stack import TreePositionalEncoding, apply, down, path_map, stack_encode, up
from strategies import cuda, random_trees
from treepe_nb.trees import Tree, batch_positions



def by_maps(path, n, k):
    "The encoding of a root path by applying D for each step to the zero vector (eq. 2)."
    v = torch.zeros(n * k, dtype=torch.float64)
    for s in path: v = apply(down(s, n, k), v)
    return v


@settings(max_examples=40, deadline=None)
@given(tree=random_trees(), k=st.integers(1, 8), order=st.sampled_from(["dfs", "bfs"]))
def test_encoding_equals_the_affine_maps(tree, k, order):
    pos = tree.positions(order, max_depth=max(k, int(tree.depth.max())), overflow="keep_last")
    pe = stack_encode(pos, 3, k, overflow="truncate", dtype=torch.float64)
    for v in range(len(tree)):
        path = [s for s in pos.paths[v].tolist() if s >= 0]
        torch.testing.assert_close(pe[v], by_maps(path, 3, k), atol=0, rtol=0)


@settings(max_examples=40, deadline=None)
@given(tree=random_trees(max_branching=2), k=st.integers(2, 7), data=st.data())
def test_every_path_within_depth_k_is_an_exact_affine_map(tree, k, data):
    pe = stack_encode(tree.positions(max_depth=max(k, int(tree.depth.max())), overflow="keep_last"), 2, k,
                      overflow="truncate", dtype=torch.float64)
    inside = np.flatnonzero(tree.depth <= k).tolist()
    for _ in range(10):
        a, b = data.draw(st.sampled_from(inside)), data.draw(st.sampled_from(inside))
        torch.testing.assert_close(apply(path_map(*tree.path(a, b), 2, k), pe[a]), pe[b], atol=0, rtol=0)


@settings(max_examples=20, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=20), min_size=1, max_size=5), k=st.integers(1, 6))
def test_batches_match_single_trees_and_padding_is_zero(trees, k):
    batch = batch_positions(trees, max_depth=max(k, max(int(t.depth.max()) for t in trees)), overflow="keep_last")
    pe = stack_encode(batch, 3, k, overflow="truncate")
    for b, t in enumerate(trees):
        single = t.positions(max_depth=max(k, int(t.depth.max())), overflow="keep_last")
        torch.testing.assert_close(pe[b, :len(t)], stack_encode(single, 3, k, overflow="truncate"))
        assert (pe[b, len(t):] == 0).all()


def test_down_then_up_is_identity_until_depth_k():
    n, k = 3, 4
    UD = [(up(n, k)[0] @ down(i, n, k)[0]) for i in range(n)]
    for depth in range(k + 1):
        x = by_maps([depth % n] * depth, n, k)
        for A in UD: assert torch.equal(A @ x, x) == (depth <= k - 1)


def test_limits_are_errors_unless_asked():
    wide = Tree.from_sexpr("(a b c d)").positions()
    with pytest.raises(ValueError, match=r"slot 2 at depth 1 of the node at index \(3,\) is >= n=2"): stack_encode(wide, 2, 4)
    chain = Tree.from_sexpr("(a (b (c (d e))))").positions()
    with pytest.raises(ValueError, match=r"index \(4,\) has depth 4 > k=3"): stack_encode(chain, 2, 3)
    assert stack_encode(chain, 2, 3, overflow="truncate")[4].tolist() == [1, 0] * 3
    with pytest.raises(ValueError, match="overflow must be"): stack_encode(chain, 2, 3, overflow="clamp")


def test_learnable_module_weights_chunks_by_powers_of_p():
    pe = TreePositionalEncoding(d_model=64, n=2, k=8, num_p=4)
    pos = Tree.from_sexpr("(a (b (c d)) e)").lcrs().positions()
    out = pe(pos).detach()
    base = stack_encode(pos, 2, 8).view(-1, 8, 2)
    p = pe.p.detach()
    for c in range(4):
        expected = base * (p[c] ** torch.arange(8.0))[:, None] * torch.sqrt(1 - p[c] ** 2) * 4
        torch.testing.assert_close(out[:, c * 16:(c + 1) * 16], expected.flatten(1))


@cuda
def test_cuda_matches_cpu():
    trees = [Tree.from_sexpr("(a (b c (d e f)) (g (h i j) k))").lcrs(), Tree.from_sexpr("(x y)")]
    pos = batch_positions(trees)
    torch.testing.assert_close(stack_encode(pos.to("cuda"), 2, 8).cpu(), stack_encode(pos, 2, 8))
    module = TreePositionalEncoding(64, n=2, k=8)
    torch.testing.assert_close(module.cuda()(pos.to("cuda")).cpu(), module.cpu()(pos))
