"""The tracker's LCRS mode (`TreeTracker(..., lcrs=True)`, chapter 3) on a real LCRS-binarised task: as the logits
mask of a plain greedy loop every finished tree un-binarises, without the mode some do not, the mode accepts every
true target, and its mask is the plain mask less the root's slot-1 tokens (hypothesis), on every backend."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from strategies import cuda, random_trees
from treepe_nb.tasks import TaskConfig, make_task
from treepe_nb.tracking import ArityVocab, TreeTracker

BACKENDS = ("python", "numpy", "torch")


@pytest.fixture(scope="module")
def task():
    "for2lam-short: source and target trees binarised with `Tree.lcrs` (its `TaskSpec` says `tgt_binary`)."
    t = make_task(TaskConfig("for2lam-short", sizes=(60, 10, 10)))
    assert t.spec.tgt_binary and t.tgt_vocab.n == 2
    return t


def greedy(vocab, order, batch, lcrs, backend=None, seed=0, max_depth=16, max_nodes=48, device=None):
    "A plain greedy loop of one's own: random logits masked by `allowed`, argmax, `step`; the finished trees."
    g = torch.Generator().manual_seed(seed)
    tracker = TreeTracker(order, batch, vocab.n, max_depth, max_nodes, lcrs=lcrs, backend=backend, device=device)
    tokens = []
    while not bool(tracker.done.all()):
        logits = torch.randn(batch, len(vocab), generator=g).to(device or "cpu")     # [B, V]
        nxt = logits.masked_fill(~tracker.allowed(vocab).to(logits.device), float("-inf")).argmax(-1)
        tokens.append(nxt); tracker.step(vocab.child_slots(nxt))
    return vocab.decode_batch(torch.stack(tokens, 1).cpu(), order, max_depth)


def unbinarises(tree):
    try: tree.unlcrs(); return True
    except ValueError as e:
        assert "the root of an LCRS tree has no right child" in str(e)       # the only way a binary tree fails
        return False


@pytest.mark.parametrize("order", ["dfs", "bfs"])
def test_greedy_loop_with_the_mode_always_unbinarises(task, order):
    vocab, counts = task.tgt_vocab, {}
    for lcrs in (False, True):
        trees = {b: greedy(vocab, order, 200, lcrs, b, max_depth=task.max_depth) for b in BACKENDS}
        assert trees["python"] == trees["numpy"] == trees["torch"]          # the same trees from every backend
        counts[lcrs] = sum(map(unbinarises, trees["numpy"]))
    assert counts[True] == 200                                               # (1) every finished tree un-binarises
    assert counts[False] < 200, counts                                       # (2) without the mode some do not


def test_the_mode_accepts_every_true_target(task):
    "Teacher forcing the task's own targets: the same positions as without the mode, and no error."
    trees, vocab = [e.tgt for e in task.train], task.tgt_vocab
    assert all(t.unlcrs().lcrs() == t for t in trees)                        # true LCRS trees
    for order in ("dfs", "bfs"):
        for backend in BACKENDS:
            ids = [vocab.encode(t, order) for t in trees]
            T = max(map(len, ids))
            ids = torch.stack([torch.cat([i, i.new_full((T - len(i),), vocab.pad)]) for i in ids])
            plain = TreeTracker(order, len(trees), 2, task.max_depth, T, backend=backend)
            lcrs = TreeTracker(order, len(trees), 2, task.max_depth, T, backend=backend, lcrs=True)
            for t in range(T):
                assert lcrs.position == plain.position
                ok = lcrs.allowed(vocab)
                assert bool(ok.gather(1, ids[:, t:t + 1]).all())               # every true token is allowed
                lcrs.step(vocab.child_slots(ids[:, t])); plain.step(vocab.child_slots(ids[:, t]))
            assert bool(lcrs.done.all())


VOCAB = ArityVocab([("f", (0, 1)), ("g", (1,)), ("h", (0,)), ("x", ())], n=2)


@settings(max_examples=30, deadline=None)
@given(order=st.sampled_from(["dfs", "bfs"]), max_depth=st.integers(0, 4), max_nodes=st.integers(1, 16),
       seed=st.integers(0, 2**31 - 1), backend=st.sampled_from(BACKENDS))
def test_mask_is_the_plain_mask_less_the_roots_slot_one(order, max_depth, max_nodes, seed, backend):
    "Sampling within the plain mask, flagged: the LCRS mask differs only at the root, and only rows whose root took a slot-1 child fail."
    g = torch.Generator().manual_seed(seed)
    plain = TreeTracker(order, 8, 2, max_depth, max_nodes, backend=backend)
    lcrs = TreeTracker(order, 8, 2, max_depth, max_nodes, backend=backend, lcrs=True, errors="flag")
    root_sibling = None
    while not bool(plain.done.all()):
        at_root = (plain.position.depth == 0)[:, None]
        expect = plain.allowed(VOCAB) & ~(at_root & VOCAB.child_slot_table[:, 1])
        live = ~lcrs.done
        assert torch.equal(lcrs.allowed(VOCAB)[live], expect[live])
        assert bool(lcrs.allowed(VOCAB).any(-1).all())                        # never a dead end
        token = torch.multinomial(plain.allowed(VOCAB).float(), 1, generator=g).squeeze(1)
        slots = VOCAB.child_slots(token)
        if root_sibling is None: root_sibling = slots[:, 1].clone()
        plain.step(slots); lcrs.step(slots)
    assert torch.equal(lcrs.failed, root_sibling)


@settings(max_examples=30, deadline=None)
@given(trees=st.lists(random_trees(max_nodes=30, labels="abc"), min_size=1, max_size=5),
       order=st.sampled_from(["dfs", "bfs"]), backend=st.sampled_from(BACKENDS))
def test_random_lcrs_trees_pass_and_a_sibling_of_the_root_does_not(trees, order, backend):
    "Any binarised tree is accepted; the same tree given a sibling of the root is refused at its first step."
    binary = [t.lcrs() for t in trees]
    vocab = ArityVocab.from_trees(binary, n=2)
    for t in binary:
        ids = vocab.encode(t, order)
        tracker = TreeTracker(order, 1, 2, max(1, int(t.depth.max())), len(t), backend=backend, lcrs=True)
        for i in ids: tracker.step(vocab.child_slots(i[None]))
        assert bool(tracker.done.all())
    bad = TreeTracker(order, 1, 2, 4, backend=backend, lcrs=True)
    with pytest.raises(ValueError, match="root of an LCRS tree"): bad.step(torch.tensor([[False, True]]))


def test_arguments():
    with pytest.raises(ValueError, match="n must be 1 or 2, got n=3"): TreeTracker(n=3, lcrs=True)
    with pytest.raises(TypeError, match="lcrs must be True or False"): TreeTracker(lcrs=1)
    assert TreeTracker(n=3).lcrs is False and TreeTracker(lcrs=True, backend="numpy").lcrs is True
    one = ArityVocab([("a", ()), ("b", (0,))], n=1)                        # n=1: no slot 1, nothing changes
    for b in BACKENDS:
        assert torch.equal(TreeTracker("dfs", 3, 1, 2, lcrs=True, backend=b).allowed(one),
                           TreeTracker("dfs", 3, 1, 2, backend=b).allowed(one))


def test_beam_reorder_keeps_the_rule():
    "`reorder` (beam search) carries the rule with each row: roots stay masked, rows past the root are not."
    slot1 = VOCAB.child_slot_table[:, 1]
    for b in BACKENDS:
        tr = TreeTracker("dfs", 2, 2, 4, lcrs=True, backend=b).reorder(torch.tensor([1, 0]))
        assert not bool(tr.allowed(VOCAB)[:, slot1].any())                  # both rows at their root
        tr.step(torch.tensor([[True, False], [False, False]]))              # row 0 at depth 1, row 1 done
        tr.reorder(torch.tensor([0, 0]))
        assert bool(tr.allowed(VOCAB)[:, slot1].all())                      # past the root: slot 1 allowed again


@cuda
def test_cuda_greedy_matches_cpu(task):
    vocab = task.tgt_vocab
    for order in ("dfs", "bfs"):
        gpu = greedy(vocab, order, 200, True, "torch", max_depth=task.max_depth, device="cuda")
        assert gpu == greedy(vocab, order, 200, True, "numpy", max_depth=task.max_depth)
        assert all(map(unbinarises, gpu))


@pytest.mark.parametrize("beam", [None, 3])
def test_the_package_decoder_uses_the_rule(task, beam):
    "`Transformer.generate(..., lcrs=True)` (what `evaluate` and `predict` pass for a binarised target): an untrained model's outputs all un-binarise."
    from treepe_nb.model import ModelConfig, Transformer
    torch.manual_seed(0)
    model = Transformer.from_task(ModelConfig(d_model=16, num_heads=2, enc_layers=1, dec_layers=1, pe="stack"), task).eval()
    b = task.collate(list(task.train)[:8])
    outs = model.generate(b.src_ids, b.src_pos, task.tgt_vocab, task.tgt_order, beam=beam, max_output_nodes=40,
                          lcrs=task.tgt_binary)
    assert len(outs) == 8 and all(unbinarises(t) for t in outs)
