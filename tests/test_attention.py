"""Property tests of `treepe_nb.attention`: relative encodings are relative (tree prefixes, sequence offsets), the
sinusoidal control is not, the fused and explicit paths agree, Shaw's terms match chapter 0, the cache equals the
full forward, masks (hypothesis over random trees)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.attention import (ENCODINGS, KVCache, MultiHeadAttention, PositionEncoding, PreparedPositions,
                                 attention_mask, check_encoding, position_distance, positions_modality)
from treepe_nb.sequence import relative_attention
from treepe_nb.trees import Tree, TreePositions, batch_positions

from strategies import cuda, random_trees

F64 = torch.float64
D, H = 16, 2


def prefixed(pos: TreePositions, prefix: list[int]) -> TreePositions:
    "Every real node's root path with `prefix` in front (padding stays padding)."
    P, K = len(prefix), pos.paths.shape[-1]
    head = torch.tensor(prefix).expand(*pos.depth.shape, P)
    paths = torch.cat([head, pos.paths[..., :K - P]], -1)
    real = pos.depth >= 0
    return TreePositions(torch.where(real[..., None], paths, -1), torch.where(real, pos.depth + P, -1))


def layer_output(name, x, positions, mask, seed=0, decay=None, causal=False):
    torch.manual_seed(seed)
    enc = PositionEncoding(name, D, H, n=3, max_depth=24).double()
    att = MultiHeadAttention(D, H, max_distance=3 if name == "relative" else None, decay=decay).double()
    y, prep = enc(x, positions, mask)
    return att(y, prep, mask, causal=causal)


@settings(max_examples=15, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=20), min_size=1, max_size=3),
       prefix=st.lists(st.integers(0, 2), min_size=1, max_size=3), decay=st.sampled_from([None, 0.9]))
def test_ape_tree_ignores_a_common_prefix(trees, prefix, decay):
    pos = batch_positions(trees, "bfs", max_depth=24)
    mask = pos.mask
    x = torch.randn(*mask.shape, D, dtype=F64)
    a = layer_output("ape-tree", x, pos, mask, decay=decay)
    b = layer_output("ape-tree", x, prefixed(pos, prefix), mask, decay=decay)
    torch.testing.assert_close(a[mask], b[mask], atol=1e-9, rtol=0)
    # the control: an absolute tree encoding sees the prefix
    s = layer_output("stack", x, pos, mask), layer_output("stack", x, prefixed(pos, prefix), mask)
    assert (s[0][mask] - s[1][mask]).abs().max() > 1e-6


@pytest.mark.parametrize("name", ["rotary", "ape-seq", "relative", "sinusoidal"])
@settings(max_examples=10, deadline=None)
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=3), offset=st.integers(1, 50),
       decay=st.sampled_from([None, 0.98]))
def test_sequence_offsets(name, lengths, offset, decay):
    L = max(lengths)
    mask = torch.arange(L)[None] < torch.tensor(lengths)[:, None]
    pos = torch.arange(L).expand(len(lengths), L)
    x = torch.randn(len(lengths), L, D, dtype=F64)
    a = layer_output(name, x, pos, mask, decay=decay, causal=True)
    b = layer_output(name, x, pos + offset, mask, decay=decay, causal=True)
    diff = (a[mask] - b[mask]).abs().max().item()
    if name == "sinusoidal": assert diff > 1e-6 or L == 1 and diff >= 0        # the control changes
    else: assert diff < 1e-9


@settings(max_examples=10, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=15), min_size=1, max_size=3), name=st.sampled_from(sorted(set(ENCODINGS) - {"ape-grid"})),
       decay=st.sampled_from([None, 0.9]))
def test_padding_never_changes_a_real_token(trees, name, decay):
    pos = batch_positions(trees, "dfs", max_depth=24)
    x = torch.randn(*pos.depth.shape, D, dtype=F64)
    batched = layer_output(name, x, pos, pos.mask, decay=decay, causal=True)
    for b, t in enumerate(trees):
        alone = layer_output(name, x[b:b + 1, :len(t)], pos[b:b + 1, :len(t)], pos.mask[b:b + 1, :len(t)], decay=decay, causal=True)
        torch.testing.assert_close(batched[b, :len(t)], alone[0], atol=1e-10, rtol=0)


@settings(max_examples=10, deadline=None)
@given(tree=random_trees(max_nodes=15), name=st.sampled_from(sorted(set(ENCODINGS) - {"ape-grid"})),
       decay=st.sampled_from([None, 0.9]))
def test_cache_equals_full_forward(tree, name, decay):
    torch.manual_seed(0)
    pos = batch_positions([tree], "dfs", max_depth=24)
    mask = pos.mask
    enc = PositionEncoding(name, D, H, n=3, max_depth=24)
    att = MultiHeadAttention(D, H, max_distance=3 if name == "relative" else None, decay=decay)
    x = torch.randn(1, len(tree), D)
    with torch.no_grad():
        y, prep = enc(x, pos, mask)
        full = att(y, prep, mask, causal=True)
        cache, keys, outs = KVCache(), None, []
        for t in range(len(tree)):
            yt, p = enc(x[:, t:t + 1], pos[:, t:t + 1], mask[:, t:t + 1], offset=t)
            keys = p if keys is None else keys.cat(p)
            outs.append(att(yt, p, mask[:, :t + 1], causal=True, cache=cache, key_positions=keys))
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=0)


def test_fused_and_explicit_paths_agree_and_shaw_matches_chapter_0():
    torch.manual_seed(0)
    x = torch.randn(3, 9, D, dtype=F64)
    mask = torch.ones(3, 9, dtype=torch.bool); mask[2, 4:] = False
    att = MultiHeadAttention(D, H).double()
    torch.testing.assert_close(att(x, key_mask=mask, causal=True), att(x, key_mask=mask, causal=True, need_weights=True)[0])
    rel = MultiHeadAttention(D, H, max_distance=2).double()
    idx = torch.arange(9).expand(3, 9)
    q = rel.q(x).unflatten(-1, (H, D // H)).transpose(1, 2)
    k, v = rel.kv(x).unflatten(-1, (2, H, D // H)).permute(2, 0, 3, 1, 4)
    ref = rel.out(relative_attention(q, k, v, rel.rel_keys, rel.rel_values).transpose(1, 2).flatten(-2))
    torch.testing.assert_close(rel(x, PreparedPositions("sequence", idx)), ref)


def test_tree_distance_is_symmetric_and_zero_on_the_diagonal():
    from treepe_nb.trees import Tree
    t = Tree.from_sexpr("(a (b (c d)) e (f g h))")
    pos = t.positions(max_depth=4)[None]
    p = PreparedPositions("tree", torch.arange(len(t))[None], tree=pos)
    d = position_distance(p, p)[0]
    torch.testing.assert_close(d, d.T)
    assert d.diagonal().abs().sum() == 0
    for a in range(len(t)):
        for c in range(len(t)):
            up, down = t.path(a, c)
            assert d[a, c] == up + len(down)


def test_masks_and_errors():
    m = attention_mask(torch.tensor([[True, False, True]]), 2, 3, causal=True)
    assert m[0, 0].tolist() == [[True, False, False], [True, False, True]]
    with pytest.raises(ValueError, match="valid names"): check_encoding("alibi")
    with pytest.raises(ValueError, match="needs tree positions"):
        PositionEncoding("ape-tree", D, H)(torch.zeros(1, 3, D), torch.arange(3)[None], torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs grid positions"):
        PositionEncoding("ape-grid", D, H)(torch.zeros(1, 3, D), torch.arange(3)[None], torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(TypeError): positions_modality([0, 1])
    with pytest.raises(ValueError, match="decay"): MultiHeadAttention(D, H, decay=1.5)


def test_grid_rotation_is_relative():
    torch.manual_seed(0)
    g = torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij"), -1).reshape(1, 12, 2)
    mask = torch.ones(1, 12, dtype=torch.bool)
    x = torch.randn(1, 12, D, dtype=F64)
    a = layer_output("ape-grid", x, g, mask, decay=0.9)
    b = layer_output("ape-grid", x, g + torch.tensor([5, 2]), mask, decay=0.9)
    torch.testing.assert_close(a, b, atol=1e-9, rtol=0)


@cuda
def test_cuda_matches_cpu():
    from treepe_nb.trees import Tree
    trees = [Tree.from_sexpr("(a (b c) d)"), Tree.from_sexpr("(a b)")]
    pos = batch_positions(trees, max_depth=4)
    for name in ("ape-tree", "relative", "stack", "rotary"):
        torch.manual_seed(0)
        enc, att = PositionEncoding(name, D, H, max_depth=4), MultiHeadAttention(D, H, max_distance=2 if name == "relative" else None)
        x = torch.randn(2, pos.depth.shape[1], D)
        with torch.no_grad():
            ref = att(*enc(x, pos, pos.mask), pos.mask)
            enc, att = enc.cuda(), att.cuda()
            got = att(*enc(x.cuda(), pos.to("cuda"), pos.mask.cuda()), pos.mask.cuda())
        torch.testing.assert_close(got.cpu()[pos.mask], ref[pos.mask], atol=1e-4, rtol=1e-4)


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), batch=st.integers(1, 2), decay=st.sampled_from([None, 0.9]),
       seed=st.integers(0, 1000))
def test_grid_cache_equals_full_forward(rows, cols, batch, decay, seed):
    "ape-grid, the one encoding the tree tests leave out: token by token through the cache = the full causal forward."
    torch.manual_seed(seed)
    g = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(1, -1, 2)
    g = (g + torch.randint(0, 5, (batch, 1, 2))).contiguous()                  # each row of the batch somewhere else
    L = rows * cols
    mask = torch.ones(batch, L, dtype=torch.bool)
    enc, att = PositionEncoding("ape-grid", D, H), MultiHeadAttention(D, H, decay=decay)
    x = torch.randn(batch, L, D)
    with torch.no_grad():
        y, prep = enc(x, g, mask)
        full = att(y, prep, mask, causal=True)
        cache, keys, outs = KVCache(), None, []
        for t in range(L):
            yt, p = enc(x[:, t:t + 1], g[:, t:t + 1], mask[:, t:t + 1], offset=t)
            keys = p if keys is None else keys.cat(p)
            outs.append(att(yt, p, mask[:, :t + 1], causal=True, cache=cache, key_positions=keys))
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("decay", [None, 0.98])
def test_fused_kernel_for_every_family_but_shaw(decay):
    """`scaled_dot_product_attention` runs for every encoding; only Shaw's relative terms (the value term needs the
    weights) and the multiplicative decay take the explicit path."""
    from unittest import mock
    torch.manual_seed(0)
    tree_pos = batch_positions([Tree.from_sexpr("(a (b c) (d e f))")], max_depth=4)
    grid_pos = torch.stack([torch.arange(6) // 3, torch.arange(6) % 3], -1)[None]
    mask = torch.ones(1, 6, dtype=torch.bool)
    x = torch.randn(1, 6, D)
    for name, family in ((k, e.family) for k, e in ENCODINGS.items()):
        enc = PositionEncoding(name, D, H, max_depth=4)
        att = MultiHeadAttention(D, H, max_distance=2 if family == "relative" else None, decay=decay)
        with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention",
                               wraps=torch.nn.functional.scaled_dot_product_attention) as sdpa, torch.no_grad():
            att(*enc(x, grid_pos if name == "ape-grid" else tree_pos, mask), mask, causal=True)
        explicit = family == "relative" or decay is not None
        assert sdpa.call_count == (0 if explicit else 1), (name, decay, sdpa.call_count)


@pytest.mark.parametrize("kwargs, match", [
    (dict(axes=0), r"axes must be an integer >= 1, got 0"),
    (dict(axes=1.5), r"axes must be an integer >= 1"),
    (dict(n=0), r"n must be an integer >= 1"),
    (dict(max_depth=-1), r"max_depth must be an integer >= 0"),
    (dict(max_len=0), r"max_len must be an integer >= 1"),
    (dict(num_kinds=0), r"num_kinds must be an integer >= 1"),
    (dict(max_sibling=-2), r"max_sibling must be an integer >= 0"),
])
@pytest.mark.parametrize("name", ["ape-grid", "none"])
def test_position_encoding_sizes_are_checked_up_front(name, kwargs, match):
    with pytest.raises(ValueError, match=match): PositionEncoding(name, 16, 2, **kwargs)
