"""Property tests of the exported `treepe_nb.sequence` module (the notebook has the worked examples)."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.sequence import (LearnedPE, ShawRelativeAttention, SinusoidalPE, apply_rotary, relative_attention,
                                relative_positions, sinusoidal, sinusoidal_shift)

from strategies import cuda

even_dims = st.integers(1, 32).map(lambda h: 2 * h)


@settings(max_examples=40, deadline=None)
@given(d=even_dims, k=st.integers(-5000, 5000), start=st.integers(0, 10_000))
def test_shift_is_a_rotation_for_any_offset(d, k, start):
    pos = torch.arange(start, start + 50)
    R = sinusoidal_shift(k, d)
    torch.testing.assert_close(sinusoidal(pos, d, dtype=torch.float64) @ R.T,
                               sinusoidal(pos + k, d, dtype=torch.float64), atol=1e-9, rtol=0)


@settings(max_examples=40, deadline=None)
@given(dim=even_dims, length=st.integers(1, 40), shift=st.integers(0, 10_000),
       interleaved=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_rope_scores_depend_on_offsets_only(dim, length, shift, interleaved, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 2, length, dim, dtype=torch.float64, generator=g).unbind(0)
    pos = torch.arange(length)
    def scores(p):
        return apply_rotary(q, p, interleaved=interleaved) @ apply_rotary(k, p, interleaved=interleaved).mT
    torch.testing.assert_close(scores(pos + shift), scores(pos), atol=1e-8, rtol=1e-8)
    # a rotation keeps every vector's length
    torch.testing.assert_close(apply_rotary(q, pos + shift, interleaved=interleaved).norm(dim=-1), q.norm(dim=-1))


@settings(max_examples=25, deadline=None)
@given(q_len=st.integers(1, 12), k_len=st.integers(1, 12), max_distance=st.integers(0, 6))
def test_relative_positions_match_the_definition(q_len, k_len, max_distance):
    rel = relative_positions(q_len, k_len, max_distance)
    for i in range(q_len):
        for j in range(k_len):
            assert rel[i, j] == max(-max_distance, min(max_distance, j - i)) + max_distance


@settings(max_examples=15, deadline=None)
@given(length=st.integers(1, 9), max_distance=st.integers(0, 4), seed=st.integers(0, 2**31 - 1))
def test_relative_attention_equals_materialised_relations(length, max_distance, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(3, 2, 3, length, 4, dtype=torch.float64, generator=g).unbind(0)
    wk, wv = torch.randn(2, 2 * max_distance + 1, 4, dtype=torch.float64, generator=g).unbind(0)
    rel = relative_positions(length, length, max_distance)
    a_k, a_v = wk[rel], wv[rel]                                      # [L, L, d]: every a_ij, the costly way
    scores = (q @ k.mT + torch.einsum("bhid,ijd->bhij", q, a_k)) / math.sqrt(4)
    weights = scores.softmax(-1)
    expected = weights @ v + torch.einsum("bhij,ijd->bhid", weights, a_v)
    torch.testing.assert_close(relative_attention(q, k, v, wk, wv), expected)


def test_modules_follow_dtype_and_state_dict():
    pe = SinusoidalPE(8, max_len=16).double()
    assert pe(torch.tensor([3])).dtype == torch.float64
    assert "table" not in pe.state_dict()                            # rebuilt from the formula, not stored
    lpe = LearnedPE(16, 8)
    assert set(lpe.state_dict()) == {"embedding.weight"}
    with pytest.raises(ValueError, match=r"position 16 at index \(2,\)"):
        lpe(torch.tensor([0, 1, 16]))


def test_shaw_module_gradcheck():
    attn = ShawRelativeAttention(8, 2, max_distance=2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: attn(t), (x,))


@cuda
def test_everything_runs_on_cuda():
    dev = torch.device("cuda")
    x = torch.randn(2, 4, 33, 16, device=dev, dtype=torch.float16)
    out = apply_rotary(x)
    assert out.device.type == "cuda" and out.dtype == torch.float16
    torch.testing.assert_close(out.cpu().float(), apply_rotary(x.cpu().float()), atol=2e-3, rtol=2e-3)
    pe = SinusoidalPE(16).to(dev)
    assert pe(torch.arange(5, device=dev)).device.type == "cuda"
    attn = ShawRelativeAttention(16, 2, 3).to(dev)
    assert attn(torch.randn(2, 7, 16, device=dev)).device.type == "cuda"
