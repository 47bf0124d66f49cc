"""The throughput paths (issue 'Throughput') give what the plain ones give: padded attention keys, the fused AdamW of
`train`, and the encoding's generators shared by encoder and decoder; values only, never timings."""
import pytest
import torch

from treepe_nb.attention import MultiHeadAttention, attention_mask
from treepe_nb.model import ModelConfig, Transformer
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import TrainConfig, batch_loss, build


pytestmark = pytest.mark.usefixtures("one_thread")      # conftest.py


@pytest.mark.parametrize("lk", [1, 5, 13, 16, 17, 40])
@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_equal_the_explicit_attention(lk, causal):
    torch.manual_seed(lk)
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(3, lk, 32)
    mask = torch.ones(3, lk, dtype=torch.bool)
    mask[1, lk // 2 + 1:] = False                   # a padded row
    mask[2] = False                                 # a row of padding only (it attends to everything)
    fused = mha(x, None, mask, causal=causal)       # the fused kernel, its keys padded to a multiple of 16
    explicit, _ = mha(x, None, mask, causal=causal, need_weights=True)   # scores, softmax and product written out
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    plain = torch.nn.functional.scaled_dot_product_attention   # and the kernel on the unpadded keys
    q = mha.q(x).unflatten(-1, (4, 8)).transpose(1, 2)
    k, v = mha.kv(x).unflatten(-1, (2, 4, 8)).permute(2, 0, 3, 1, 4)
    o = plain(q, k, v, attn_mask=attention_mask(mask, lk, lk, causal))
    torch.testing.assert_close(fused, mha.out(o.transpose(1, 2).flatten(-2)), atol=1e-6, rtol=1e-6)


def _losses(pe, fused, steps=8):
    cfg = TrainConfig(TaskConfig("tree-copy", sizes=(64, 4, 4), seed=0), ModelConfig(pe=pe, d_model=16, num_heads=2),
                      batch_size=16)
    task, model = build(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, **({"fused": True} if fused else {}))
    out = []
    for s in range(steps):
        batch = task.collate([task.train[i] for i in range(16 * (s % 4), 16 * (s % 4 + 1))])
        loss, count, _ = batch_loss(model, batch)
        opt.zero_grad(); (loss / count).backward(); opt.step()
        out.append(float(loss.detach() / count))
    return torch.tensor(out)


@pytest.mark.parametrize("pe", ["ape-tree", "stack"])
def test_fused_adamw_follows_the_same_loss_curve(pe):
    torch.testing.assert_close(_losses(pe, True), _losses(pe, False), atol=1e-4, rtol=1e-4)


def test_shared_generators_change_no_gradient():
    cfg = TrainConfig(TaskConfig("tree-copy", sizes=(8, 2, 2), seed=0), ModelConfig(pe="ape-tree", d_model=16, num_heads=2))
    task, model = build(cfg)
    assert model.cfg.cross_positions and model.src_encoding is model.tgt_encoding
    batch = task.collate(list(task.train))
    grads = []
    for shared in (True, False):
        model.zero_grad()
        if shared: loss = batch_loss(model, batch)[0]           # forward opens `shared_generators`
        else:                                                   # encode and decode called apart: two matrix_exp
            memory, mask, prep = model.encode(batch.src_ids, batch.src_pos)
            logits = model.decode(batch.tgt_ids, batch.tgt_pos, memory, mask, prep).float()
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), reduction="sum")
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)


def test_decoding_carries_tree_maps_forward():
    # decode_step's ape-tree path (each node's map from its parent's, kept in the state's `TreeMapCache`) gives the
    # logits of the encoding's own prepare (state.maps=None), with padding rows, greedy and beam search alike
    import torch
    from treepe_nb.model import Transformer, TransformerConfig
    from treepe_nb.tracking import ArityVocab
    from treepe_nb.trees import Tree, batch_positions
    trees = [Tree.from_sexpr(s) for s in ["(f (f a b) (g a))", "(g (f a b))", "a"]]
    vocab = ArityVocab.from_trees(trees)
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(len(vocab), len(vocab), d_model=16, num_heads=2, enc_layers=1, dec_layers=1,
                                      dropout=0.0, src_pe="ape-tree", tgt_pe="ape-tree", n=vocab.n)).eval()
    ids = torch.nn.utils.rnn.pad_sequence([vocab.encode(t) for t in trees], batch_first=True)
    pos = batch_positions(trees, "dfs", max_depth=m.cfg.max_depth)
    with torch.no_grad():
        memory = m.encode(ids, pos)
        fast, slow = m.start_decoding(*memory), m.start_decoding(*memory)
        slow.maps = None
        assert type(fast.maps).__name__ == "TreeMapCache" and len(fast.maps) == 1   # the root's, the identity
        for t in range(ids.shape[1]):
            a, b = m.decode_step(fast, ids[:, t], pos[:, t]), m.decode_step(slow, ids[:, t], pos[:, t])
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    distinct = {tuple(p[:d].tolist()) for p, d in zip(pos.paths.reshape(-1, pos.max_depth), pos.depth.reshape(-1)) if d >= 0}
    assert set(fast.maps.paths()) == distinct and len(fast.maps) == len(distinct)   # one map per distinct node, none twice
    for beam in (None, 2):
        out = m.generate(ids, pos, vocab, beam=beam, max_output_nodes=9)
        start = Transformer.start_decoding
        def no_memo(self, *a):
            state = start(self, *a); state.maps = None; return state
        Transformer.start_decoding = no_memo
        try: ref = m.generate(ids, pos, vocab, beam=beam, max_output_nodes=9)
        finally: Transformer.start_decoding = start
        assert out == ref
