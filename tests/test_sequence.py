"""Property tests of the exported `treepe_nb.sequence` module (the notebook has the worked examples)."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.sequence import (LearnedPE, ShawRelativeAttention, SinusoidalPE, apply_rotary, check_range, frequencies,
                                relative_attention, relative_positions, sinusoidal, sinusoidal_shift)

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


def test_a_query_with_no_key_to_attend_attends_to_every_key():
    "Issue 26: an all-False mask row gave NaN; as `attention.attention_mask` does, such a row may attend everywhere."
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 3, 5, 4, dtype=torch.float64, generator=g).unbind(0)
    wk, wv = torch.randn(2, 5, 4, dtype=torch.float64, generator=g).unbind(0)
    mask = torch.rand(2, 1, 5, 5, generator=g) > 0.5
    mask[:, :, 0] = False                                              # query 0 sees no key, in every batch item
    mask[:, :, 1] = True
    out, w = relative_attention(q, k, v, wk, wv, mask=mask, return_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    full = relative_attention(q, k, v, wk, wv)
    torch.testing.assert_close(out[..., 0, :], full[..., 0, :])        # the same output as with no mask at all
    everywhere = mask.clone()
    everywhere[:, :, 0] = True                                         # what the convention makes of it
    torch.testing.assert_close(out, relative_attention(q, k, v, wk, wv, mask=everywhere))
    # the module, through a mask that hides every key from one query
    attn = ShawRelativeAttention(8, 2, max_distance=2)
    x, m = torch.randn(1, 4, 8), torch.ones(4, 4, dtype=torch.bool)
    m[2] = False
    assert torch.isfinite(attn(x, mask=m)).all()


def test_modules_follow_dtype_and_state_dict():
    pe = SinusoidalPE(8, max_len=16).double()
    assert pe(torch.tensor([3])).dtype == torch.float64
    assert "table" not in pe.state_dict()                            # rebuilt from the formula, not stored
    lpe = LearnedPE(8, 16)                                           # (d_model, max_len)
    assert lpe.embedding.weight.shape == (16, 8)
    assert set(lpe.state_dict()) == {"embedding.weight"}
    with pytest.raises(ValueError, match=r"position 16 at index \(2,\)"):
        lpe(torch.tensor([0, 1, 16]))


def test_shaw_module_gradcheck():
    attn = ShawRelativeAttention(8, 2, max_distance=2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: attn(t), (x,))



# --- hardening (issue 13): each case failed (wrong result, silent acceptance or a bare torch error) before ---
BOOL = torch.zeros(4, dtype=torch.bool)
FLOAT = torch.tensor([0.0, 1.0, 2.0, 3.0])
x4 = torch.randn(2, 3, 4, 8)


@pytest.mark.parametrize("call, arg", [
    (lambda: SinusoidalPE(8, 16)(BOOL), "positions"),          # was: bool read as a mask, 0 rows returned
    (lambda: SinusoidalPE(8, 16)(FLOAT), "positions"),
    (lambda: LearnedPE(8, 16)(BOOL), "positions"),              # was: a mask
    (lambda: LearnedPE(8, 16)(FLOAT), "positions"),
    (lambda: check_range(BOOL, 8), "positions"),                # was: accepted
    (lambda: check_range([0, 1], 8), "positions"),              # was: AttributeError
    (lambda: apply_rotary(x4, BOOL), "positions"),              # was: bool rotated as 0/1
    (lambda: apply_rotary(x4, FLOAT), "positions"),             # was: accepted, rounded nowhere
    (lambda: apply_rotary(x4.long()), "x"),                     # was: integer x truncated
    (lambda: sinusoidal(BOOL, 8), "positions"),                 # was: bool read as 0/1
    (lambda: relative_attention(x4, x4, x4, torch.randn(3, 8), torch.randn(3, 8), mask=torch.ones(4, 4)), "mask"),
])
def test_wrong_types_are_type_errors_naming_the_argument(call, arg):
    with pytest.raises(TypeError, match=arg):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: frequencies(8, base=0), "base must be finite and > 0"),        # was: inf / NaN frequencies
    (lambda: frequencies(8, base=-2.0), "base must be finite and > 0"),
    (lambda: frequencies(8, base=float("inf")), "base must be finite and > 0"),
    (lambda: apply_rotary(x4, base=0), "base must be finite and > 0"),
    (lambda: frequencies(0), "d must be >= 1"),
    (lambda: SinusoidalPE(0), "d_model must be >= 1"),                     # was: an empty table
    (lambda: SinusoidalPE(7), "d_model must be even"),
    (lambda: SinusoidalPE(8, max_len=0), "max_len must be >= 1"),
    (lambda: SinusoidalPE(8, max_len=-3), "max_len must be >= 1"),         # was: a torch error from arange
    (lambda: LearnedPE(-1, 16), "d_model must be >= 1"),
    (lambda: LearnedPE(8, 0), "max_len must be >= 1"),
    (lambda: ShawRelativeAttention(0, 1, 2), "d_model must be >= 1"),      # was: ZeroDivisionError
    (lambda: ShawRelativeAttention(8, 0, 2), "num_heads must be >= 1"),
    (lambda: ShawRelativeAttention(8, -2, 2), "num_heads must be >= 1"),   # was: a module with heads=-2
    (lambda: ShawRelativeAttention(8, 2, -1), "max_distance must be >= 0"),
    (lambda: relative_positions(-1, 2, 1), "q_len must be >= 0"),
])
def test_bad_sizes_are_value_errors_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


wk = torch.randn(5, 8)
@pytest.mark.parametrize("call, match", [
    (lambda: relative_attention(x4, x4[..., :3, :], x4, wk, wk), r"k \(2, 3, 3, 8\)"),        # k_len != v's k_len
    (lambda: relative_attention(x4, x4, x4[..., :6], wk, wk), r"v \(2, 3, 4, 6\)"),
    (lambda: relative_attention(x4, x4[:1], x4[:1], wk, wk), r"k \(1, 3, 4, 8\)"),            # batch differs
    (lambda: relative_attention(x4, x4, x4, torch.randn(5, 6), torch.randn(5, 6)), r"rel_keys \(5, 6\)"),
    (lambda: relative_attention(x4, x4, x4, torch.randn(2, 5, 8), torch.randn(2, 5, 8)), r"rel_keys \(2, 5, 8\)"),
    (lambda: relative_attention(x4, x4, x4, wk, wk, mask=torch.ones(3, 4, dtype=torch.bool)), r"mask \(3, 4\)"),
    (lambda: apply_rotary(x4, torch.arange(5)), r"positions \(5,\) and x \(2, 3, 4, 8\)"),
    (lambda: apply_rotary(x4, torch.zeros(3, 4, dtype=torch.long)), r"positions \(3, 4\)"),
    (lambda: apply_rotary(x4[0, 0], torch.zeros(2, 4, dtype=torch.long)), r"positions \(2, 4\)"),  # was: broadcast
    (lambda: apply_rotary(torch.randn(2, 4, 7)), "last dimension of x must be even"),
    (lambda: apply_rotary(torch.randn(2, 4, 0)), "last dimension of x must be even and > 0"),
    (lambda: apply_rotary(torch.randn(8)), r"x must be \[\.\.\., length, dim\]"),
])
def test_mismatched_shapes_are_value_errors_naming_the_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("cls", [SinusoidalPE, LearnedPE])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_small_integer_positions_are_indices(cls, dtype):
    # was: uint8 indexed the table as a mask (IndexError), nn.Embedding refused uint8/int8/int16 (RuntimeError)
    pe = cls(8, 16)
    torch.testing.assert_close(pe(torch.tensor([3, 1, 0], dtype=dtype)), pe(torch.tensor([3, 1, 0])))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_sinusoidal_refuses_non_finite_positions(bad):
    with pytest.raises(ValueError, match="positions must be finite"):         # was: NaN rows
        sinusoidal(torch.tensor([0.0, bad]), 8)
    torch.testing.assert_close(sinusoidal(torch.tensor([0.5]), 2)[0], torch.tensor([math.sin(0.5), math.cos(0.5)]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("interleaved", [True, False])
def test_rotary_large_positions_stay_exact(dtype, interleaved):
    # was: positions went through float32, so 2^40 and 2^40 + 1 (and every pair above 2^24) rotated alike
    x = torch.randn(1, 1, 1, 8, dtype=torch.float64).expand(1, 1, 2, 8)
    far = torch.tensor([2**30 + 1, 2**31 - 1])
    out = apply_rotary(x.to(dtype), far, interleaved=interleaved)
    assert out.dtype == dtype
    # compare with the rotation computed from 40-digit angles
    import mpmath
    mpmath.mp.dps = 40
    expect = torch.empty_like(x)
    for j, m in enumerate(far.tolist()):
        for i in range(4):
            a = m * mpmath.power(10000, mpmath.mpf(-2 * i) / 8)
            c, s = float(mpmath.cos(a)), float(mpmath.sin(a))
            i0, i1 = (2 * i, 2 * i + 1) if interleaved else (i, i + 4)
            x0, x1 = x[0, 0, j, i0], x[0, 0, j, i1]
            expect[0, 0, j, i0], expect[0, 0, j, i1] = x0 * c - x1 * s, x0 * s + x1 * c
    tol = {torch.float64: 1e-6, torch.float32: 1e-5, torch.bfloat16: 3e-2}[dtype]
    torch.testing.assert_close(out.double(), expect.to(dtype).double(), atol=tol, rtol=0)
    with pytest.raises(ValueError, match=r"outside \[-2\^31, 2\^31\)"):
        apply_rotary(x, torch.tensor([0, 2**40]))
    with pytest.raises(ValueError, match=r"position -2147483649"):
        apply_rotary(x, torch.tensor([0, -2**31 - 1]))


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
