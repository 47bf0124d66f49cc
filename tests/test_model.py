"""Property tests of `treepe_nb.model` over random trees and every encoding: relative encodings are relative on the
encoder, the decoder is causal, padding never changes a real token, incremental decoding equals the full forward,
beam 1 equals greedy, beams come back best first, generated trees are complete and legal; bf16 autocast, CUDA,
torch.compile (with --slow)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.attention import ENCODINGS
from treepe_nb.batching import decoder_batch, encoder_batch
from treepe_nb.model import Transformer, TransformerConfig, exact_match
from treepe_nb.tracking import ArityVocab
from treepe_nb.trees import Tree, TreePositions

from strategies import cuda, random_trees

TREE_PES = sorted(set(ENCODINGS) - {"ape-grid"})
LABELS = list("abcde")
MAX_DEPTH = 24


def tree_model(src_pe, tgt_pe, vocab, decay=None, dtype=torch.float64, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = TransformerConfig(src_vocab=len(vocab), tgt_vocab=len(vocab), d_model=16, num_heads=2, enc_layers=1,
                            dec_layers=2, dropout=0.0, src_pe=src_pe, tgt_pe=tgt_pe, n=3, max_depth=MAX_DEPTH,
                            max_distance=3, decay=decay, **kw)
    return Transformer(cfg).to(dtype).eval()


def batch(trees, vocab):
    src = encoder_batch(trees, vocab, "bfs", MAX_DEPTH)
    tgt = decoder_batch(trees, vocab, "dfs", MAX_DEPTH)
    return src, tgt


trees_st = st.lists(random_trees(max_nodes=12, labels=LABELS), min_size=1, max_size=3)


@settings(max_examples=10, deadline=None)
@given(trees=trees_st, prefix=st.lists(st.integers(0, 2), min_size=1, max_size=3))
def test_ape_tree_encoder_ignores_a_common_prefix(trees, prefix):
    vocab = ArityVocab.from_trees(trees, n=3)
    (ids, pos), _ = batch(trees, vocab)
    P, K = len(prefix), pos.paths.shape[-1]
    real = pos.mask
    paths = torch.cat([torch.tensor(prefix).expand(*real.shape, P), pos.paths[..., :K - P]], -1)
    moved = TreePositions(torch.where(real[..., None], paths, -1), torch.where(real, pos.depth + P, -1))
    for pe, relative in (("ape-tree", True), ("stack", False)):
        m = tree_model(pe, "none", vocab)
        with torch.no_grad(): a, b = m.encode(ids, pos)[0], m.encode(ids, moved)[0]
        diff = (a[real] - b[real]).abs().max().item()
        assert (diff < 1e-9) if relative else (diff > 1e-6)


@pytest.mark.parametrize("pe", ["rotary", "ape-seq", "relative", "sinusoidal"])
@settings(max_examples=8, deadline=None)
@given(seqs=st.lists(st.lists(st.integers(3, 9), min_size=2, max_size=10), min_size=1, max_size=3), offset=st.integers(1, 40))
def test_sequence_encoder_offsets(pe, seqs, offset):
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=16, num_heads=2, dropout=0.0, src_pe=pe,
                                      max_distance=3)).double().eval()
    ids, pos = encoder_batch(seqs)
    real = ids != 0
    with torch.no_grad(): a, b = m.encode(ids, pos)[0], m.encode(ids, pos + offset)[0]
    diff = (a[real] - b[real]).abs().max().item()
    assert (diff > 1e-6) if pe == "sinusoidal" else (diff < 1e-9)


@pytest.mark.parametrize("pe", TREE_PES)
@settings(max_examples=5, deadline=None)
@given(trees=trees_st, data=st.data())
def test_causal_padding_and_cache(pe, trees, data):
    vocab = ArityVocab.from_trees(trees, n=3)
    (ids, pos), (inp, tpos, _) = batch(trees, vocab)
    decay = data.draw(st.sampled_from([None, 0.9]))
    m = tree_model(pe, pe, vocab, decay=decay)
    with torch.no_grad():
        full = m(ids, pos, inp, tpos)
        # causal: changing the last real target token of row 0 changes no earlier logit
        T0 = int((inp[0] != 0).sum())
        if T0 > 1:
            changed = inp.clone(); changed[0, T0 - 1] = 3 + (int(inp[0, T0 - 1]) - 2) % (len(vocab) - 3)
            torch.testing.assert_close(m(ids, pos, changed, tpos)[0, :T0 - 1], full[0, :T0 - 1], atol=1e-10, rtol=0)
        # padding: each input alone gives its rows of the batch
        for b, t in enumerate(trees):
            (i1, p1), (n1, q1, _) = batch([t], vocab)
            torch.testing.assert_close(m(i1, p1, n1, q1)[0], full[b, :len(t) + 1], atol=1e-10, rtol=0)
    # incremental decoding with the cache, in float32, gives the full forward's logits
    m = m.float()
    with torch.no_grad():
        full = m(ids, pos, inp, tpos)
        state = m.start_decoding(*m.encode(ids, pos))
        steps = torch.stack([m.decode_step(state, inp[:, t], tpos[:, t]) for t in range(inp.shape[1])], 1)
    real = inp != 0
    torch.testing.assert_close(steps[real], full[real], atol=1e-5, rtol=0)


def legal(tree, vocab, max_nodes):
    assert isinstance(tree, Tree) and 1 <= len(tree) <= max_nodes
    assert int(tree.depth.max()) <= MAX_DEPTH
    vocab.encode(tree)                                                   # every (label, child slots) is a token


@pytest.mark.parametrize("pe", ["ape-tree", "stack", "relative", "rotary"])
@settings(max_examples=4, deadline=None)
@given(trees=trees_st, order=st.sampled_from(["dfs", "bfs"]), max_nodes=st.integers(1, 20), seed=st.integers(0, 100))
def test_generation_greedy_beam_legal(pe, trees, order, max_nodes, seed):
    vocab = ArityVocab.from_trees(trees, n=3)
    (ids, pos), _ = batch(trees, vocab)
    m = tree_model(pe, pe, vocab, dtype=torch.float32, seed=seed)
    greedy = m.generate(ids, pos, vocab, order, max_output_nodes=max_nodes)
    one = m.generate(ids, pos, vocab, order, beam=1, max_output_nodes=max_nodes)
    assert exact_match(greedy, one).all()
    beams = m.generate(ids, pos, vocab, order, beam=3, max_output_nodes=max_nodes, return_all=True)
    for g, per_input in zip(greedy, beams):
        legal(g, vocab, max_nodes)
        scores = [s for _, s in per_input]
        assert scores == sorted(scores, reverse=True) and len(per_input) >= 1
        for t, _ in per_input: legal(t, vocab, max_nodes)


def test_beam_scores_are_the_normalised_log_likelihood():
    trees = [Tree.from_sexpr("(a (b c) d)"), Tree.from_sexpr("(a c)")]
    vocab = ArityVocab.from_trees(trees, n=2)
    (ids, pos), _ = batch(trees, vocab)
    m = tree_model("ape-tree", "ape-tree", vocab, dtype=torch.float32)
    for per_input, i in zip(m.generate(ids, pos, vocab, beam=2, return_all=True), range(2)):
        for tree, score in per_input:
            inp, tpos, lab = decoder_batch([tree], vocab, "dfs", MAX_DEPTH)
            with torch.no_grad(): logp = m(ids[i:i + 1], pos[i:i + 1], inp, tpos).log_softmax(-1)
            total = logp.gather(-1, lab[..., None]).sum().item()
            assert abs(total / lab.shape[1] - score) < 1e-4


def test_sequence_targets_generate_and_cache():
    torch.manual_seed(0)
    for pe in ("sinusoidal", "relative", "ape-seq"):
        m = Transformer(TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=16, num_heads=2, dropout=0.0, src_pe=pe,
                                          tgt_pe=pe, max_len=64, max_distance=3, decay=0.98)).eval()
        ids, pos = encoder_batch([[3, 4, 5], [6, 7]])
        out = m.generate(ids, pos, max_len=12)
        assert all(isinstance(o, list) and len(o) <= 12 and all(3 <= x < 10 for x in o) for o in out)
        assert exact_match(m.generate(ids, pos, beam=1, max_len=12), out).all()
        inp, tpos, _ = decoder_batch([[3, 4, 5, 6], [7]])
        with torch.no_grad():
            full = m(ids, pos, inp, tpos)
            state = m.start_decoding(*m.encode(ids, pos))
            steps = torch.stack([m.decode_step(state, inp[:, t], tpos[:, t]) for t in range(inp.shape[1])], 1)
        torch.testing.assert_close(steps[inp != 0], full[inp != 0], atol=1e-5, rtol=0)


def test_errors():
    with pytest.raises(ValueError, match="valid names"): TransformerConfig(10, 10, tgt_pe="tree")
    m = Transformer(TransformerConfig(10, 10, d_model=16, num_heads=2, src_pe="ape-tree"))
    with pytest.raises(ValueError, match="needs tree positions"): m(*encoder_batch([[3, 4]]), *decoder_batch([[5]])[:2])
    m = Transformer(TransformerConfig(10, 10, d_model=16, num_heads=2, tgt_pe="ape-tree"))
    with pytest.raises(ValueError, match="reads tree positions only: pass the targets. ArityVocab"): m.generate(*encoder_batch([[3]]))
    with pytest.raises(ValueError, match=r"src_ids\[0, 1\] = 12 is outside 0..9"):
        m(torch.tensor([[3, 12]]), torch.arange(2)[None])
    enc = Transformer(TransformerConfig(10, d_model=16, num_heads=2))
    assert enc(*encoder_batch([[3, 4, 5]])).shape == (1, 3, 10)
    with pytest.raises(ValueError, match="no decoder"): enc.generate(*encoder_batch([[3]]))


def test_tied_embeddings_and_bf16_autocast():
    trees = [Tree.from_sexpr("(a (b c) d)"), Tree.from_sexpr("(a c)")]
    vocab = ArityVocab.from_trees(trees, n=2)
    (ids, pos), (inp, tpos, lab) = batch(trees, vocab)
    for pe in ("ape-tree", "relative", "stack", "rotary"):
        m = tree_model(pe, pe, vocab, dtype=torch.float32, tie_embeddings=True, decay=0.98)
        assert m.generator.weight is m.tgt_embed.weight
        m.train()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(ids, pos, inp, tpos)
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), lab.flatten(), ignore_index=0)
        loss.backward()
        assert logits.dtype == torch.bfloat16 and torch.isfinite(loss)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m.generate(ids, pos, vocab, beam=2, max_output_nodes=8)
        assert all(isinstance(t, Tree) for t in out)


@cuda
def test_cuda_forward_and_generate():
    trees = [Tree.from_sexpr("(a (b c) d)"), Tree.from_sexpr("(a c)")]
    vocab = ArityVocab.from_trees(trees, n=2)
    (ids, pos), (inp, tpos, _) = batch(trees, vocab)
    m = tree_model("ape-tree", "ape-tree", vocab, dtype=torch.float32)
    with torch.no_grad(): ref = m(ids, pos, inp, tpos)
    mc = m.cuda()
    with torch.no_grad(): got = mc(ids.cuda(), pos.to("cuda"), inp.cuda(), tpos.to("cuda"))
    torch.testing.assert_close(got.cpu()[inp != 0], ref[inp != 0], atol=1e-4, rtol=1e-4)
    assert all(isinstance(t, Tree) for t in mc.generate(ids.cuda(), pos.to("cuda"), vocab, beam=2, max_output_nodes=8))


def test_torch_compile(request):
    if not request.config.getoption("--slow"): pytest.skip("torch.compile takes minutes on 2 cores: run with --slow")
    trees = [Tree.from_sexpr("(a (b c) d)"), Tree.from_sexpr("(a c)")]
    vocab = ArityVocab.from_trees(trees, n=2)
    (ids, pos), (inp, tpos, lab) = batch(trees, vocab)
    for pe in ("rotary", "ape-tree"):
        m = tree_model(pe, pe, vocab, dtype=torch.float32)
        ref = m(ids, pos, inp, tpos)
        compiled = torch.compile(m)
        got = compiled(ids, pos, inp, tpos)
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
        got.float().sum().backward()


def test_grid_targets_cache_equals_full_forward():
    "A decoder with `ape-grid` (grid positions [B, T, 2]): the cached steps give the full forward's logits."
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(src_vocab=10, tgt_vocab=10, d_model=16, num_heads=2, dropout=0.0, src_pe="ape-grid",
                                      tgt_pe="ape-grid", decay=0.98)).eval()
    grid = torch.stack(torch.meshgrid(torch.arange(3), torch.arange(4), indexing="ij"), -1).reshape(1, 12, 2)
    src = torch.randint(3, 10, (2, 12))
    tgt = torch.cat([torch.ones(2, 1, dtype=torch.long), torch.randint(3, 10, (2, 11))], 1); tgt[1, 8:] = 0
    pos = grid.expand(2, 12, 2).clone()
    with torch.no_grad():
        full = m(src, pos, tgt, pos)
        state = m.start_decoding(*m.encode(src, pos))
        steps = torch.stack([m.decode_step(state, tgt[:, t], pos[:, t]) for t in range(12)], 1)
    torch.testing.assert_close(steps[tgt != 0], full[tgt != 0], atol=1e-5, rtol=0)


def favour_big_arity(m, vocab, bonus=20.0):
    "Push the output layer towards the tokens with the most children, so trees grow until the tracker stops them."
    bias = bonus * (vocab.arity == vocab.arity.max()).float()
    return m.generator.register_forward_hook(lambda mod, args, out: out + bias.to(out.dtype))


@pytest.mark.parametrize("order", ["dfs", "bfs"])
@pytest.mark.parametrize("beam", [None, 3])
def test_generated_trees_stay_within_max_depth_and_budget(order, beam):
    """With an output layer that always prefers binary nodes, only the tracker's masks end a tree: every output is
    the full binary tree of depth max_depth (when the budget allows), or a tree of exactly max_nodes nodes."""
    trees = [Tree.from_sexpr("(a (b c d) e)"), Tree.from_sexpr("(a c)"), Tree.from_sexpr("(b (a d e) (a c d))")]
    vocab = ArityVocab.from_trees(trees, n=2)
    for max_depth, max_nodes in ((2, 40), (3, 40), (5, 9)):
        torch.manual_seed(0)
        m = Transformer(TransformerConfig(len(vocab), len(vocab), d_model=16, num_heads=2, dropout=0.0, src_pe="ape-tree",
                                          tgt_pe="ape-tree", max_depth=max_depth)).eval()
        src = encoder_batch(trees, vocab, "bfs", max_depth)
        hook = favour_big_arity(m, vocab)
        try: out = m.generate(*src, vocab, order, beam=beam, max_output_nodes=max_nodes)
        finally: hook.remove()
        full = 2 ** (max_depth + 1) - 1
        for t in out:
            assert isinstance(t, Tree) and int(t.depth.max()) <= max_depth and len(t) <= max_nodes
            vocab.encode(t)                                                          # complete and legal
            assert len(t) == min(full, max_nodes if max_nodes % 2 else max_nodes - 1)  # binary trees have odd sizes


@pytest.mark.parametrize("pe", ["ape-tree", "relative", "sinusoidal"])
@settings(max_examples=3, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=10, labels=LABELS), min_size=2, max_size=4), seed=st.integers(0, 100),
       beam=st.sampled_from([None, 2]))
def test_batched_generation_equals_one_at_a_time(pe, trees, seed, beam):
    "Per-sequence stopping: an input decodes the same alone as in a batch whose other inputs stop earlier or later."
    vocab = ArityVocab.from_trees(trees, n=3)
    (ids, pos), _ = batch(trees, vocab)
    m = tree_model(pe, pe, vocab, dtype=torch.float32, seed=seed)
    together = m.generate(ids, pos, vocab, "dfs", beam=beam, max_output_nodes=15, return_all=True)
    for b, t in enumerate(trees):
        (i1, p1), _ = batch([t], vocab)
        alone = m.generate(i1, p1, vocab, "dfs", beam=beam, max_output_nodes=15, return_all=True)[0]
        assert [o for o, _ in alone] == [o for o, _ in together[b]]
        for (_, s1), (_, s2) in zip(alone, together[b]): assert abs(s1 - s2) < 1e-4


# ---- generation and model inputs refuse bad arguments up front, with one line naming them ----

def seq_model(pe="learned", max_len=64, **kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(10, 10, d_model=16, num_heads=2, enc_layers=1, dec_layers=1, pe=pe,
                                         max_len=max_len, **kw)).eval()


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(max_len=0), ValueError, "max_len must be an integer >= 1"),
    (dict(max_len=2.5), TypeError, "max_len must be an integer"),
    (dict(max_len=65), ValueError, r"max_len=65 .* 64 positions .*max_len <= 64"),
    (dict(beam=1.5), TypeError, "beam must be None .* or an integer"),
    (dict(beam=True), TypeError, "beam must be None"),
    (dict(beam=0), ValueError, "beam must be None"),
    (dict(beam=2, length_penalty=float("nan")), ValueError, "length_penalty must be a finite number"),
    (dict(length_penalty="1"), TypeError, "length_penalty must be a finite number"),
    (dict(start_id=99), ValueError, r"start_id=99 is outside 0..9 \(tgt_vocab=10\)"),
    (dict(end_id=-1), ValueError, r"end_id=-1 is outside 0..9"),
    (dict(start_id=1.0), TypeError, "start_id must be an integer"),
    (dict(max_output_nodes=0), ValueError, "max_output_nodes must be an integer >= 1"),
])
def test_generate_argument_errors(kwargs, error, match):
    m = seq_model()
    with pytest.raises(error, match=match): m.generate(*encoder_batch([[3, 4]]), **kwargs)


def test_generate_max_len_is_exact_and_fits_the_table():
    m = seq_model()
    favour = torch.zeros(10); favour[5] = 50.0                    # never <end>: the output is max_len tokens long
    with torch.no_grad(): m.generator.weight.zero_(); m.dec_norm.bias.copy_(torch.ones(16)); m.generator.weight[5] = 1.0
    assert [len(o) for o in m.generate(*encoder_batch([[3, 4]]), max_len=1)] == [1]
    assert [len(o) for o in m.generate(*encoder_batch([[3, 4]]), max_len=64)] == [64]   # positions 0..63 of 64 rows
    assert [len(o) for o in m.generate(*encoder_batch([[3, 4]]))] == [63]                # default: cfg.max_len - 1
    assert len(seq_model(pe="rotary").generate(*encoder_batch([[3]]), max_len=200)[0]) <= 200   # no table: no limit


def test_generate_tree_budget_must_fit_the_table():
    vocab = ArityVocab([("a", ()), ("b", (0, 1))], n=2)
    m = Transformer(TransformerConfig(5, len(vocab), d_model=16, num_heads=2, src_pe="ape-seq", tgt_pe="sinusoidal",
                                      max_len=32)).eval()
    with pytest.raises(ValueError, match=r"max_output_nodes=40 .* 32 positions"):
        m.generate(*encoder_batch([[3]]), vocab=vocab, max_output_nodes=40)
    assert isinstance(m.generate(*encoder_batch([[3]]), vocab=vocab, max_output_nodes=31)[0], Tree)


def test_generate_with_non_finite_weights_says_so():
    for beam in (None, 2):
        m = seq_model()
        with torch.no_grad(): m.generator.weight.fill_(float("nan"))
        with pytest.raises(ValueError, match="not finite .*NaN or infinite weights"):
            m.generate(*encoder_batch([[3, 4]]), beam=beam, max_len=4)


def test_model_input_errors():
    m = seq_model()
    src, pos = encoder_batch([[3, 4]])
    tgt, tpos, _ = decoder_batch([[5], [6]])
    with pytest.raises(ValueError, match=r"tgt_ids has 2 rows but the source 1"): m(src, pos, tgt, tpos)
    with pytest.raises(ValueError, match=r"src_pos .*batch and length"): m(src, pos[:, :1], tgt[:1], tpos[:1])
    # any integer dtype is accepted (converted to int64); floats and bools are refused
    ref = m(src, pos, tgt[:1], tpos[:1])
    for dtype in (torch.int16, torch.int8, torch.uint8, torch.int32):
        torch.testing.assert_close(m(src.to(dtype), pos, tgt[:1].to(dtype), tpos[:1]), ref)
    with pytest.raises(TypeError, match="src_ids must be an integer tensor"): m(src.float(), pos)


def test_kinds_of_the_wrong_shape_are_refused():
    vocab = ArityVocab([("a", ()), ("b", (0, 1))], n=2)
    t = Tree(["b", "a", "a"], [-1, 0, 0], [-1, 0, 1])
    m = Transformer(TransformerConfig(len(vocab), len(vocab), d_model=16, num_heads=2, pe="additive", n=2)).eval()
    ids, pos = encoder_batch([t], vocab, "bfs", 4)
    for kinds in (torch.zeros(2, 5, dtype=torch.long), torch.zeros(1, 3, 2, dtype=torch.long)):
        with pytest.raises(ValueError, match=r"kinds has shape .* but the positions \(1, 3\)"): m.encode(ids, pos, kinds)
    with pytest.raises(TypeError, match="kinds must hold integers"): m.encode(ids, pos, torch.zeros(1, 3))


@pytest.mark.parametrize("kwargs, match", [
    (dict(pad_id=20), r"pad_id must be in \[0, 9\]"),
    (dict(pad_id=-1), r"pad_id must be in \[0, 9\]"),
    (dict(num_labels=-1), r"num_labels must be in \[1, inf\]"),
    (dict(num_labels=0), r"num_labels must be in \[1, inf\]"),
    (dict(max_sibling=-1), r"max_sibling must be in \[0, inf\]"),
    (dict(d_ff=-5), r"d_ff must be in \[1, inf\]"),
    (dict(max_depth=2.5), "max_depth must be an integer"),
])
def test_transformer_config_closes_the_gaps(kwargs, match):
    with pytest.raises(ValueError, match=match): TransformerConfig(10, 10, **kwargs)
    with pytest.raises(ValueError, match=r"pad_id must be in \[0, 4\]"): TransformerConfig(10, 5, pad_id=7)
