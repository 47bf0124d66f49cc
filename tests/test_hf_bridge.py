"""The Hugging Face bridge (`treepe_nb.hf`, chapter 06b) on tiny models built from configs (nothing from the hub):
the absolute bridge beside and in place of BERT-style positions (RoBERTa's own position ids kept), the algebraic tree
encoding in place of RoPE with cached decoding equal to the full forward, padding, save/reload, errors, dtype and
device."""
import copy, os, warnings

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
os.environ["HF_HUB_OFFLINE"] = "1"
torch.set_num_threads(1)
transformers.logging.disable_progress_bar()

from torch import nn
from treepe_nb import Tree, TreePositions, batch_positions
from treepe_nb.hf import ABSOLUTE, ROTARY, TreeEmbeddings, TreeRotary, add_tree_positions, add_tree_rotary, load_tree_model

T = transformers
SMALL = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
ENCODERS = {"bert": "Bert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta", "camembert": "Camembert", "electra": "Electra"}
DECODERS = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}


def random_trees(seed, sizes):
    rng = np.random.default_rng(seed)
    return [Tree.from_parents([f"n{i}" for i in range(s)], [-1] + [int(rng.integers(0, i)) for i in range(1, s)]).lcrs()
            for s in sizes]


@pytest.fixture(scope="module")
def batch():
    "Three trees, their positions `[3, L, K]` (padding depth -1), token ids (padding 1) and the attention mask."
    trees = random_trees(0, (12, 7, 15))
    positions = batch_positions(trees)
    ids = torch.randint(3, 64, positions.shape, generator=torch.Generator().manual_seed(0))
    return trees, positions, ids.masked_fill(~positions.mask, 1), positions.mask.long()


def encoder(kind="roberta", head="Model", **extra):
    torch.manual_seed(0)
    name = ENCODERS[kind]
    more = dict(embedding_size=16) if kind == "electra" else {}
    config = getattr(T, f"{name}Config")(max_position_embeddings=40, **SMALL, **more, **extra)
    return getattr(T, f"{name}{head}")(config).eval()


def decoder(kind="llama"):
    torch.manual_seed(0)
    name = DECODERS[kind]
    return getattr(T, f"{name}ForCausalLM")(getattr(T, f"{name}Config")(num_key_value_heads=2, **SMALL)).eval()


def first_tree(batch):
    "The first tree of the batch alone: ids `[1, n]`, positions `[1, n, K]`."
    trees, positions, ids, _ = batch
    return ids[:1, :len(trees[0])], positions[:1, :len(trees[0])]


def full_logits(batch, kind="llama"):
    "A decoder of `kind` with the tree rotation, the first tree alone, and the logits of one full forward."
    model = add_tree_rotary(decoder(kind))
    one, one_positions = first_tree(batch)
    with torch.no_grad(): return model, one, one_positions, model(one, tree_positions=one_positions).logits


CACHE = "cache" if "cache" in __import__("inspect").signature(T.LlamaForCausalLM.forward).parameters else "past_key_values"


def cached_logits(model, ids, positions, mask=None):
    "Logits computed one token at a time with the key/value cache, each step given its own tree position only."
    out_logits, cache = [], None
    for t in range(ids.shape[1]):
        kw = {} if mask is None else {"attention_mask": mask[:, :t + 1]}
        if cache is not None: kw[CACHE] = cache
        out = model(ids[:, t:t + 1], tree_positions=positions[:, t:t + 1], use_cache=True, **kw)
        out_logits.append(out.logits)
        cache = getattr(out, "cache", None) or out.past_key_values
    return torch.cat(out_logits, 1)


def test_supported_lists():
    assert set(ENCODERS) == set(ABSOLUTE) and set(DECODERS) == set(ROTARY)


def test_unknown_architecture_errors():
    gpt2 = T.GPT2Model(T.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=64, n_positions=64,
                                  bos_token_id=0, eos_token_id=0))
    with pytest.raises(ValueError, match=r"does not know GPT2Model \(model_type 'gpt2'\).*bert, roberta"):
        add_tree_positions(gpt2)
    with pytest.raises(ValueError, match=r"add_tree_rotary does not know GPT2Model.*llama, mistral"):
        add_tree_rotary(gpt2)
    with pytest.raises(ValueError, match="use add_tree_rotary"): add_tree_positions(decoder())
    with pytest.raises(ValueError, match="use add_tree_positions"): add_tree_rotary(encoder())
    with pytest.raises(TypeError, match="a Hugging Face model"): add_tree_positions(nn.Linear(2, 2))


@pytest.mark.parametrize("kind", list(ENCODERS))
def test_add_mode_starts_as_the_model(batch, kind):
    "Gate 0: the same outputs as before, padding included; the model's own position ids reach its table."
    _, positions, ids, mask = batch
    model = encoder(kind)
    ids = ids.masked_fill(~positions.mask, model.config.pad_token_id)
    with torch.no_grad(): plain = model(ids, attention_mask=mask).last_hidden_state
    expected = []
    hook = model.embeddings.position_embeddings.register_forward_hook(lambda m, a, o: expected.append(a[0]))
    with torch.no_grad(): model(ids, attention_mask=mask)
    hook.remove()
    add_tree_positions(model, "stack", mode="add", max_depth=16)
    seen = []
    hook = model.embeddings.position_embeddings.register_forward_hook(lambda m, a, o: seen.append(a[0]))
    with torch.no_grad(): out = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    hook.remove()
    assert torch.equal(out, plain)
    assert torch.equal(seen[0], expected[0])
    with torch.no_grad():
        model.tree_encoding.gate.fill_(1.0)
        assert not torch.allclose(model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state, plain,
                                  atol=1e-3)


def test_roberta_position_offset(batch):
    "RoBERTa's positions start at padding_idx + 1 and skip padding; 0-based ids (transformers #10736) differ."
    _, positions, ids, mask = batch
    model = add_tree_positions(encoder("roberta"), "stack", mode="add", max_depth=16)
    seen = []
    hook = model.embeddings.position_embeddings.register_forward_hook(lambda m, a, o: seen.append(a[0]))
    with torch.no_grad(): out = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    hook.remove()
    pad = model.config.pad_token_id
    own = T.models.roberta.modeling_roberta.RobertaEmbeddings.create_position_ids_from_input_ids(ids, pad)
    assert torch.equal(seen[0], own)
    lengths = positions.mask.sum(1)
    for b, n in enumerate(lengths.tolist()):
        assert seen[0][b, :n].tolist() == list(range(pad + 1, pad + 1 + n))
        assert set(seen[0][b, n:].tolist()) <= {pad}
    with torch.no_grad():
        zero = model(ids, attention_mask=mask, tree_positions=positions,
                     position_ids=torch.arange(ids.shape[1]).expand_as(ids)).last_hidden_state
    assert not torch.allclose(zero[positions.mask], out[positions.mask], atol=1e-3)


@pytest.mark.parametrize("kind, encoding", [("bert", "stack"), ("roberta", "additive"), ("roberta", "stack")])
def test_replace_mode_ignores_sequence_positions(batch, kind, encoding):
    _, positions, ids, mask = batch
    model = add_tree_positions(encoder(kind), encoding, mode="replace", n=2, max_depth=16)
    assert model.tree_encoding.gate is None
    with torch.no_grad():
        out = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
        shifted = model(ids, attention_mask=mask, tree_positions=positions,
                        position_ids=torch.arange(ids.shape[1])[None] + 7).last_hidden_state
        other = model(ids, attention_mask=mask, tree_positions=batch_positions(random_trees(5, (12, 7, 15)))
                      ).last_hidden_state
    torch.testing.assert_close(shifted, out)
    assert not torch.allclose(other[:, 1:], out[:, 1:], atol=1e-3)


def test_encoder_padding_changes_nothing(batch):
    trees, positions, ids, mask = batch
    model = add_tree_positions(encoder("roberta"), "stack", mode="add", max_depth=16, gate=1.0)
    with torch.no_grad():
        out = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
        for b, tree in enumerate(trees):
            alone = model(ids[b:b + 1, :len(tree)], tree_positions=batch_positions([tree])).last_hidden_state
            torch.testing.assert_close(alone[0], out[b, :len(tree)], atol=1e-5, rtol=1e-5)
    pe = model.tree_encoding(positions)                                     # [B, L, d]
    assert pe[~positions.mask].abs().max().item() == 0.0


def test_head_models_and_base_called_directly(batch):
    _, positions, ids, mask = batch
    model = add_tree_positions(encoder("roberta", "ForMaskedLM"), "additive", mode="replace")
    labels = ids.masked_fill(~positions.mask, -100)
    out = model(ids, attention_mask=mask, tree_positions=positions, labels=labels)
    assert out.logits.shape == (*ids.shape, 64) and torch.isfinite(out.loss)
    with torch.no_grad():
        direct = model.roberta(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    assert direct.shape == (*ids.shape, 32)
    with pytest.raises(ValueError, match="pass tree_positions="): model.roberta(ids)


@pytest.mark.parametrize("kind", list(DECODERS))
def test_cached_decoding_equals_full_forward(batch, kind):
    trees, positions, ids, mask = batch
    model, one, one_positions, full = full_logits(batch, kind)
    with torch.no_grad():
        torch.testing.assert_close(cached_logits(model, one, one_positions), full, atol=1e-5, rtol=0)
        batch_full = model(ids, attention_mask=mask, tree_positions=positions).logits
        batch_cached = cached_logits(model, ids, positions, mask)
    real = positions.mask
    torch.testing.assert_close(batch_cached[real], batch_full[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(batch_full[0, :len(trees[0])], full[0], atol=1e-5, rtol=0)   # padding changes nothing


def test_rope_off_tree_on(batch):
    trees = batch[0]
    model, one, one_positions, full = full_logits(batch)
    with torch.no_grad():
        moved = model(one, tree_positions=one_positions, position_ids=torch.arange(one.shape[1])[None] + 9).logits
        elsewhere = model(one, tree_positions=batch_positions(random_trees(3, (len(trees[0]),)))).logits
    torch.testing.assert_close(moved, full)
    assert not torch.allclose(elsewhere, full, atol=1e-4)


def test_cache_keys_are_stored_rotated(batch):
    "The cache holds the keys as the tree rotation left them: the k projection rotated by each node's map."
    model = add_tree_rotary(decoder())
    one, one_positions = first_tree(batch)
    with torch.no_grad():
        out = model(one, tree_positions=one_positions, use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        attn, bridge = model.model.layers[0].self_attn, model.model.tree_encoding
        x = model.model.layers[0].input_layernorm(model.model.embed_tokens(one))
        raw = nn.functional.linear(x, attn.k_proj.weight, attn.k_proj.bias)           # [1, L, kv_heads * D], unrotated
        expected = bridge.ape.rotate(raw.view(1, one.shape[1], 2, 8).transpose(1, 2), one_positions)   # [1, H, L, D]
    stored = cache.layers[0].keys if hasattr(cache, "layers") else cache.key_cache[0]
    torch.testing.assert_close(stored, expected, atol=1e-6, rtol=1e-6)


def test_tree_map_cache_maps(batch):
    model, one, one_positions, full = full_logits(batch)
    ape = model.model.tree_encoding.ape
    with torch.no_grad():
        prepared = model(one, tree_positions=ape.prepare(one_positions)).logits
        state, steps, cache = ape.decoding_maps(), [], None
        for t in range(one.shape[1]):
            kw = {CACHE: cache} if cache is not None else {}
            out = model(one[:, t:t + 1], tree_positions=state.maps(one_positions[:, t]), use_cache=True, **kw)
            steps.append(out.logits); cache = getattr(out, "cache", None) or out.past_key_values
    torch.testing.assert_close(prepared, full)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    other = T.LlamaForCausalLM(T.LlamaConfig(**SMALL))                      # 4 key/value heads, not 2
    add_tree_rotary(other)
    with pytest.raises(ValueError, match="make them with its `ape`"):
        other(one, tree_positions=ape.prepare(one_positions))


def test_gradients_and_checkpointing(batch):
    _, positions, ids, mask = batch
    model = add_tree_rotary(decoder())
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    model.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss = model(ids, attention_mask=mask, tree_positions=positions, labels=ids.masked_fill(mask == 0, -100)).loss
    loss.backward()
    assert model.model.tree_encoding.ape.entries.grad.abs().sum() > 0
    enc = add_tree_positions(encoder("roberta", "ForMaskedLM"), "stack", mode="add", max_depth=16)
    enc(ids, attention_mask=mask, tree_positions=positions, labels=ids).loss.backward()
    assert enc.roberta.tree_encoding.gate.grad is not None and enc.roberta.tree_encoding.gate.grad != 0


def test_round_trips(batch, tmp_path):
    _, positions, ids, mask = batch
    enc = add_tree_positions(encoder("roberta", "ForMaskedLM"), "stack", mode="add", max_depth=16, overflow="truncate")
    with torch.no_grad():
        enc.roberta.tree_encoding.gate.fill_(0.5); enc.roberta.tree_encoding.encoding.raw_p.add_(0.1)
        before = enc(ids, attention_mask=mask, tree_positions=positions).logits
    enc.save_pretrained(tmp_path / "enc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                      # no warning about other keys
        again = load_tree_model(T.RobertaForMaskedLM, tmp_path / "enc").eval()
    with torch.no_grad(): after = again(ids, attention_mask=mask, tree_positions=positions).logits
    assert torch.equal(after, before)
    assert again.config.tree_encoding["overflow"] == "truncate" and again.roberta.tree_encoding.gate.item() == 0.5

    dec = add_tree_rotary(decoder("qwen3"), init="random", std=0.3)
    with torch.no_grad(): before = dec(ids, attention_mask=mask, tree_positions=positions).logits
    dec.save_pretrained(tmp_path / "dec")
    again = load_tree_model(T.Qwen3ForCausalLM, tmp_path / "dec").eval()
    with torch.no_grad(): assert torch.equal(again(ids, attention_mask=mask, tree_positions=positions).logits, before)

    plain = T.RobertaModel.from_pretrained(tmp_path / "enc")                # the plain way: the tree weights are dropped
    with pytest.warns(UserWarning, match="load_tree_model"): add_tree_positions(plain)


def test_round_trip_own_encoding(batch, tmp_path):
    _, positions, ids, mask = batch
    class Depth(nn.Module):
        def __init__(self): super().__init__(); self.table = nn.Embedding(40, 32)
        def forward(self, p): return self.table(p.depth.clamp(min=0)) * p.mask[..., None]
    model = add_tree_positions(encoder("bert"), Depth(), mode="replace")
    with torch.no_grad(): before = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="pass it again as encoding="): load_tree_model(T.BertModel, tmp_path)
    again = load_tree_model(T.BertModel, tmp_path, encoding=Depth()).eval()
    with torch.no_grad():
        assert torch.equal(again(ids, attention_mask=mask, tree_positions=positions).last_hidden_state, before)


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"): load_tree_model(T.RobertaModel, tmp_path / "none")
    encoder("roberta").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="records no tree positions"): load_tree_model(T.RobertaModel, tmp_path)


def test_config_of_its_own():
    "The record goes into a config of the model's own: another model built from the same config stays plain."
    config = T.RobertaConfig(max_position_embeddings=40, **SMALL)
    model, other = T.RobertaModel(config), T.RobertaModel(config)
    add_tree_positions(model)
    assert model.config.tree_encoding["bridge"] == "add_tree_positions" and not hasattr(config, "tree_encoding")
    assert all(m.config is model.config for m in model.modules() if hasattr(m, "config"))
    assert not hasattr(other.config, "tree_encoding")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_tree_positions(other)                                           # no warning: its config is clean


def test_errors(batch):
    _, positions, ids, mask = batch
    model = add_tree_positions(encoder("roberta"))
    with pytest.raises(ValueError, match=r"RobertaModel has tree positions: pass tree_positions="): model(ids)
    with pytest.raises(ValueError, match=r"are for \(3, \d+\) tokens but the inputs of RobertaModel are \(3, 5\)"):
        model(ids[:, :5], tree_positions=positions)
    with pytest.raises(TypeError, match="must be TreePositions"): model(ids, tree_positions=positions.paths)
    with pytest.raises(ValueError, match="already"): add_tree_positions(model)
    with pytest.raises(ValueError, match="mode must be"): add_tree_positions(encoder(), mode="sum")
    with pytest.raises(ValueError, match="'stack', 'additive'"): add_tree_positions(encoder(), "sinusoidal")
    with pytest.raises(TypeError, match="gate must be a number"): add_tree_positions(encoder(), gate="open")
    with pytest.raises(TypeError, match="saved in the model's config as JSON"):
        add_tree_positions(encoder(), p_init=torch.tensor([0.5, 0.9]))
    fresh = encoder()
    with pytest.raises(ValueError, match="slot"):                           # a limit of the encoding, named by it
        add_tree_positions(fresh, n=1)(ids, tree_positions=positions)
    with pytest.raises(TypeError, match="ape must be a TreeAPE"): TreeRotary(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="mode must be"): TreeEmbeddings(nn.Linear(2, 2), mode="x")


def test_deepcopy_keeps_its_own_bridge(batch):
    _, positions, ids, mask = batch
    model = add_tree_positions(encoder("roberta"), gate=1.0)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.tree_encoding.gate.fill_(0.0)
        a = model(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
        b = twin(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    assert not torch.allclose(a, b, atol=1e-3)


def test_dtype_follows_the_model(batch):
    _, positions, ids, mask = batch
    dec, one, one_positions, full = full_logits(batch)
    with torch.no_grad():
        dec.to(torch.bfloat16)
        half = dec(one, tree_positions=one_positions).logits
    assert half.dtype == torch.bfloat16 and dec.model.tree_encoding.ape.entries.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), full, atol=0.05, rtol=0)
    enc = add_tree_positions(encoder("roberta"), gate=1.0).to(torch.float64)
    with torch.no_grad(): out = enc(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
    assert out.dtype == torch.float64 and enc.tree_encoding.encoding.raw_p.dtype == torch.float64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda(batch):
    _, positions, ids, mask = batch
    dec, one, one_positions, full = full_logits(batch)
    with torch.no_grad():
        dec.to("cuda")
        gpu = cached_logits(dec, one.cuda(), one_positions)                 # positions stay on the CPU
        torch.testing.assert_close(gpu.cpu(), full, atol=1e-4, rtol=0)
        enc = add_tree_positions(encoder("roberta"), gate=1.0)
        cpu = enc(ids, attention_mask=mask, tree_positions=positions).last_hidden_state
        enc.to("cuda", torch.bfloat16)
        out = enc(ids.cuda(), attention_mask=mask.cuda(), tree_positions=positions.to("cuda")).last_hidden_state
    assert out.device.type == "cuda" and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), cpu, atol=0.1, rtol=0)
