"The training step compiles whole (`fullgraph=True`) for every built-in encoding that reads trees, and a second batch of the same padded shapes reuses the graph (issue: ape-tree at the cost of none)."
import random
import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters
from treepe_nb.attention import ENCODINGS
from treepe_nb.model import ModelConfig
from treepe_nb.tasks import TaskConfig
from treepe_nb.train import TrainConfig, batch_loss, build

TREE_ENCODINGS = [name for name, e in ENCODINGS.items() if "tree" in e.reads]


def _shapes(batch):
    "What a traced graph is specialised on: the padded sizes of the batch and of its plans."
    out = [tuple(batch.src_ids.shape), tuple(batch.tgt_ids.shape)]
    for pos in (batch.src_pos, batch.tgt_pos):
        out += [tuple(pos.paths.shape), tuple(sorted(pos.plan.shapes.items()))]
    return out


def _two_batches(task, size=8, tries=400):
    "Two different batches whose padded shapes (plans included) are equal: one bucket."
    rng = random.Random(0)
    first = task.collate(list(task.train)[:size])
    for _ in range(tries):
        other = task.collate(rng.sample(list(task.train), size))
        if _shapes(other) == _shapes(first) and not torch.equal(other.src_ids, first.src_ids): return first, other
    pytest.skip("no second batch of the same bucket found")


@pytest.mark.parametrize("pe", TREE_ENCODINGS)
def test_training_step_compiles_whole_and_once_per_bucket(pe, one_thread):
    cfg = TrainConfig(TaskConfig("tree-copy", order="dfs", sizes=(300, 2, 2), seed=0),
                      ModelConfig(pe=pe, d_model=16, num_heads=2, enc_layers=1, dec_layers=1), batch_size=8)
    task, model = build(cfg)
    first, second = _two_batches(task)
    torch._dynamo.reset(); counters.clear()
    step = torch.compile(lambda b: batch_loss(model, b)[0], backend="eager", fullgraph=True)   # a graph break raises
    eager = batch_loss(model, first)[0]
    loss = step(first)
    loss.backward()
    torch.testing.assert_close(loss, eager)                          # the traced step computes the same loss
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == 1
    step(second).backward()                                         # same bucket: no recompilation
    assert counters["stats"]["unique_graphs"] == graphs
    assert not counters["recompiles"] and not counters["graph_break"]
    torch._dynamo.reset()


def test_bucketed_batches_repeat_shapes_and_keep_the_loss(one_thread):
    "`Collator(bucket=True)` (what `train` uses with `compile`) pads lengths to `plans.bucket` sizes; the loss is unchanged."
    import dataclasses
    from treepe_nb.plans import bucket
    cfg = TrainConfig(TaskConfig("tree-rotate", order="dfs", sizes=(200, 2, 2), seed=0),
                      ModelConfig(pe="ape-tree", d_model=16, num_heads=2, enc_layers=1, dec_layers=1), batch_size=8)
    task, model = build(cfg)
    bucketed = dataclasses.replace(task.collate, bucket=True)
    rng = random.Random(0)
    shapes = set()
    for _ in range(20):
        examples = rng.sample(list(task.train), 8)
        plain, padded = task.collate(examples), bucketed(examples)
        for a, b in ((plain.src_ids, padded.src_ids), (plain.tgt_ids, padded.tgt_ids)):
            assert b.shape[1] == bucket(a.shape[1]) and torch.equal(b[:, :a.shape[1]], a)
        torch.testing.assert_close(batch_loss(model, padded), batch_loss(model, plain))
        shapes.add(tuple(_shapes(padded)[:2]))
    assert len(shapes) < 20                                           # sizes repeat


def test_planned_positions_are_checked_without_reading_the_device():
    "A trusted batch with its plan: `check` and the ape-tree maps and rotation read no tensor value on the host (no sync)."
    from torch.utils._python_dispatch import TorchDispatchMode
    from treepe_nb.algebraic import TreeAPE
    from treepe_nb.trees import Tree, batch_positions
    pos = batch_positions([Tree.from_sexpr("(a (b c) (d e f))").lcrs(), Tree.from_sexpr("(x y)")]).with_plan()
    ape = TreeAPE(8, 2, num_heads=2)
    x = torch.randn(2, 2, pos.shape[1], 8)
    class Reads(TorchDispatchMode):
        calls = []
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default: Reads.calls.append(func)
            return func(*args, **(kwargs or {}))
    with Reads():
        pos.check(n=2, max_depth=8)
        ape.rotate(x, pos).sum().backward()
    assert Reads.calls == []
    with Reads(): batch_positions([Tree.from_sexpr("(a b)")]).check(n=2)   # without a plan: read from the tensors
    assert Reads.calls


def test_batches_without_plans_give_the_same_loss(one_thread):
    "`Collator(plans=False)` (what `train` uses when no encoding reads plans) skips the host work; ape-tree then plans itself."
    import dataclasses
    cfg = TrainConfig(TaskConfig("tree-rotate", order="dfs", sizes=(50, 2, 2), seed=0),
                      ModelConfig(pe="ape-tree", d_model=16, num_heads=2, enc_layers=1, dec_layers=1), batch_size=8)
    task, model = build(cfg)
    examples = list(task.train)[:8]
    plain = dataclasses.replace(task.collate, plans=False)(examples)
    assert plain.src_pos.plan is None and plain.tgt_pos.plan is None
    torch.testing.assert_close(batch_loss(model, plain), batch_loss(model, task.collate(examples)))


@pytest.mark.parametrize("pe", TREE_ENCODINGS)
def test_batches_of_one_bucket_with_other_chunk_counts_reuse_the_graph(pe, one_thread):
    """Reliability round 4, item 4: a plan's real chunk count (`plan.chunks`, which eager mode uses to skip padding
    chunks) differs between batches of one bucket; the compiled step must not guard on it (it recompiled per batch)."""
    import dataclasses
    cfg = TrainConfig(TaskConfig("tree-copy", order="dfs", sizes=(300, 2, 2), seed=0),
                      ModelConfig(pe=pe, d_model=16, num_heads=2, enc_layers=1, dec_layers=1), batch_size=8)
    task, model = build(cfg)
    collate = dataclasses.replace(task.collate, bucket=True)
    rng, first = random.Random(0), collate(list(task.train)[:8])
    chunks = lambda b: (b.src_pos.plan.chunks, b.tgt_pos.plan.chunks)
    others = {}
    for _ in range(400):
        b = collate(rng.sample(list(task.train), 8))
        if _shapes(b) == _shapes(first) and chunks(b) != chunks(first): others.setdefault(chunks(b), b)
        if len(others) == 3: break
    if not others: pytest.skip("no batch of the same bucket with another chunk count found")
    torch._dynamo.reset(); counters.clear()
    step = torch.compile(lambda b: batch_loss(model, b)[0], backend="eager", fullgraph=True)
    step(first).backward()
    for b in others.values():
        torch.testing.assert_close(step(b), batch_loss(model, b)[0])
    assert counters["stats"]["unique_graphs"] == 1 and not counters["recompiles"], (len(others), dict(counters["recompiles"]))
    torch._dynamo.reset()
