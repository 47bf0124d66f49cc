"""The adversarial run's failures, one parametrised case per input: every example of the "Hardening" issue (silent
wrong results, resource exhaustion, unclear errors) and the "one tree-position contract" defects, each with the
exception type and the words its message must contain. Before the fixes each of these returned a wrong result,
ran out of memory or time, or raised an internal error (IndexError, RuntimeError, AttributeError, KeyError, ...)."""
import math

import pytest
import torch

from treepe_nb.additive import AdditiveTreePE, YamlVocab, yaml_nodes
from treepe_nb.algebraic import SequenceAPE, TreeAPE, ape_to_rope
from treepe_nb.sequence import LearnedPE, ShawRelativeAttention, SinusoidalPE, apply_rotary, frequencies, relative_attention
from treepe_nb.stack import TreePositionalEncoding, compose, stack_encode
from treepe_nb.tracking import ArityVocab, TreeTracker
from treepe_nb.trees import Tree, TreePositions, batch_positions, collate_positions
from treepe_nb.readers import python_functions
from treepe_nb.yaml_reader import read_yaml

LONG = dict(dtype=torch.long)
DEEP = Tree.from_sexpr("(a (b (c d)) e)")
VOCAB = ArityVocab.from_trees([DEEP])
ONE = Tree.from_sexpr("a")


def laughs(levels=9, width=9):
    "A YAML 'billion laughs': `width ** levels` scalars through aliases, in a few hundred bytes."
    return "a: &a [" + ", ".join(["lol"] * width) + "]\n" + "".join(
        f"{c}: &{c} [" + ", ".join([f"*{p}"] * width) + "]\n" for p, c in zip("abcdefghij", "bcdefghijk"[:levels - 1]))


def merge_bomb(keys=2000, copies=2000):
    "A mapping of `keys` entries merged 10 times into each of `copies` list items (about 100 KB of text)."
    body = ", ".join(f"k{i}: {i}" for i in range(keys))
    item = "  - <<: [" + ", ".join(["*a"] * 10) + "]\n"
    return f"a: &a {{{body}}}\nb:\n" + item * copies


def shared_nested(levels=30):
    node = ("n", ["x", "x"])
    for _ in range(levels): node = ("n", [node, node])
    return node


def shared_json(levels=30):
    d = ["x", "x"]
    for _ in range(levels): d = [d, d]
    return d


CASES = {
    # ---- the contract issue's defect: one-node trees and empty batches
    "empty batch stack_encode": (lambda: stack_encode(TreePositions(torch.zeros(0, 3, **LONG), torch.zeros(0, **LONG)), 2, 4),
                                 ValueError, "empty batch"),
    "empty batch TreeAPE": (lambda: TreeAPE(8).rotate(torch.randn(1, 0, 8), TreePositions(torch.zeros(0, 3, **LONG),
                                                                                            torch.zeros(0, **LONG))),
                            ValueError, "empty batch"),
    "empty batch AdditiveTreePE": (lambda: AdditiveTreePE(8, 4, 4)(TreePositions(torch.zeros(0, 1, **LONG), torch.zeros(0, **LONG)),
                                                                    torch.zeros(0, **LONG)), ValueError, "empty batch"),
    "empty collate_positions": (lambda: collate_positions([]), ValueError, "at least one"),
    "empty batch_positions": (lambda: batch_positions([]), ValueError, "at least one tree"),
    "empty decode_batch": (lambda: VOCAB.decode_batch(torch.zeros(0, 3, **LONG)), ValueError, "empty batch"),
    # ---- 1. large positions
    "apply_rotary 2^40": (lambda: apply_rotary(torch.randn(1, 1, 2, 8), torch.tensor([2**40, 2**40 + 1])),
                          ValueError, "outside [-2^31, 2^31)"),
    "SequenceAPE -2^63": (lambda: SequenceAPE(8).prepare(torch.tensor([-2**63])), ValueError, "-(2**63 - 1)"),
    # ---- 3. stack_encode validates
    "stack float paths": (lambda: stack_encode(TreePositions(torch.tensor([[0.5]]), torch.tensor([1])), 2, 4),
                          TypeError, "paths must hold integers"),
    "stack NaN slot": (lambda: stack_encode(TreePositions(torch.tensor([[math.nan]]), torch.tensor([1])), 2, 4),
                       TypeError, "paths must hold integers"),
    "stack paths [2,4,K] depth [4,2]": (lambda: TreePositions(torch.zeros(2, 4, 3, **LONG), torch.zeros(4, 2, **LONG)),
                                        ValueError, "[*batch, K]"),
    # ---- 4. integer arrays only
    "Tree float parent": (lambda: Tree(["a", "b"], [-1, 0.9], [-1, 1]), TypeError, "parent must hold integers"),
    "Tree float slot": (lambda: Tree(["a", "b"], [-1, 0], [-1, 1.7]), TypeError, "slot must hold integers"),
    "from_parents float": (lambda: Tree.from_parents(["a", "b"], [-1, 0.6]), TypeError, "parents must hold integers"),
    "from_parents 2-D": (lambda: Tree.from_parents(["a", "b"], [[-1, 0]]), ValueError, "one-dimensional"),
    # ---- 5. from_python_ast of non-text
    "from_python_ast bytes": (lambda: Tree.from_python_ast(b"x = 1 + 2"), TypeError, "as a str, got bytes"),
    "from_python_ast None": (lambda: Tree.from_python_ast(None), TypeError, "as a str, got NoneType"),
    "from_python_ast int": (lambda: Tree.from_python_ast(123), TypeError, "as a str, got int"),
    # ---- 6. duplicate YAML keys
    "from_yaml duplicate key": (lambda: Tree.from_yaml("a: 1\na: 2"), ValueError, "duplicate key 'a'"),
    # ---- 7. out-of-range or wrongly typed indices
    "child_slots -1": (lambda: VOCAB.child_slots(torch.tensor([-1])), ValueError, "id -1 at index (0,) is outside"),
    "SinusoidalPE bool positions": (lambda: SinusoidalPE(8, 16)(torch.zeros(16, dtype=torch.bool)), TypeError, "torch.bool"),
    # ---- 8. sibling indices of zero-width paths
    "sibling of max_depth=0 paths": (lambda: Tree.from_sexpr("(r a b c)").positions(max_depth=0, overflow="truncate").sibling(),
                                     ValueError, "keep no step of the root paths"),
    "keep_last is not an overflow value": (lambda: DEEP.positions(max_depth=1, overflow="keep_last"), ValueError,
                                           "'raise' or 'truncate'"),
    "clamp is not an overflow value": (lambda: TreePositionalEncoding(16, overflow="clamp"), ValueError, "'raise' or 'truncate'"),
    # ---- 9. smaller silent acceptances
    "from_conllu None": (lambda: Tree.from_conllu(None), TypeError, "reads a str"),
    "from_conllu unknown label": (lambda: Tree.from_conllu("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n", label="feats"),
                                  ValueError, "label must be one of"),
    "TreePositionalEncoding d_model=0": (lambda: TreePositionalEncoding(d_model=0), ValueError, "d_model must be >= 1"),
    "ArityVocab.from_trees n=0": (lambda: ArityVocab.from_trees([DEEP], n=0), ValueError, "n must be >= 1"),
    "tracker NaN child_slots": (lambda: TreeTracker().step(torch.tensor([[math.nan, 0.0]])), TypeError, "torch.bool"),
    "tracker float child_slots": (lambda: TreeTracker().step(torch.tensor([[0.5, 0.0]])), TypeError, "torch.bool"),
    "yaml_nodes !!set value": (lambda: yaml_nodes("a: !!set"), ValueError, "builds a set"),
    "apply_rotary integer x": (lambda: apply_rotary(torch.ones(1, 1, 2, 8, **LONG)), TypeError, "x must be a floating-point"),
    "SequenceAPE integer x": (lambda: SequenceAPE(8).rotate(torch.ones(1, 2, 8, **LONG), torch.arange(2)),
                              TypeError, "x must be a floating-point"),
    "frequencies base=0": (lambda: frequencies(8, base=0), ValueError, "base must be finite and > 0"),
    "Tree unhashable label": (lambda: Tree(["a", ["b"]], [-1, 0], [-1, 0]), ValueError, "label of node 1 is unhashable"),
    "from_parents unhashable label": (lambda: Tree.from_parents(["a", {"b": 1}], [-1, 0]), ValueError, "unhashable"),
    "from_nested tuple leaf": (lambda: Tree.from_nested(("a", [("b", "c")])), ValueError, "a leaf label may not be a tuple"),
    # ---- 10-14. resource exhaustion: refused quickly with a ValueError
    "10. billion laughs from_yaml": (lambda: Tree.from_yaml(laughs()), ValueError, "max_nodes=1000000"),
    "10. billion laughs yaml_nodes": (lambda: yaml_nodes(laughs()), ValueError, "max_nodes=1000000"),
    "11. merge-key amplification": (lambda: yaml_nodes(merge_bomb()), ValueError, "copy more than max_nodes"),
    "12. 100k flow nesting": (lambda: yaml_nodes("[" * 100_000 + "]" * 100_000), ValueError, "max_nesting=5000"),
    "12. 20k nested mappings": (lambda: Tree.from_yaml("{k: " * 20_000 + "x" + "}" * 20_000), ValueError, "max_nesting=5000"),
    "13. bfs tracker 100k x 100k": (lambda: TreeTracker("bfs", 1, 2, max_depth=100_000, max_nodes=100_000),
                                    ValueError, "GiB of state"),
    "13. dfs tracker n=127, 10^6 deep": (lambda: TreeTracker("dfs", 8, 127, max_depth=1_000_000), ValueError, "GiB of state"),
    "14. from_nested 2^31 shared leaves": (lambda: Tree.from_nested(shared_nested()), ValueError, "max_nodes=10000000"),
    "14. from_json 2^31 shared leaves": (lambda: Tree.from_json(shared_json()), ValueError, "max_nodes=10000000"),
    # ---- unclear errors: wrong exception types or internal errors before
    "python_functions deep nesting": (lambda: python_functions("def f():\n x = " + "-" * 1_000_000 + "1"),
                                      ValueError, "nested too deeply"),
    "yaml_nodes !!set key": (lambda: yaml_nodes("!!set : 1"), ValueError, "builds a set"),
    "CoNLL-U missing column": (lambda: Tree.from_conllu("1\tThe\tthe\tDET\tDT\t_\t0\n"), ValueError, "has no deprel column"),
    "from_yaml None": (lambda: Tree.from_yaml(None), TypeError, "expected YAML text"),
    "stack_encode float depth": (lambda: stack_encode(TreePositions(torch.zeros(2, 3, **LONG), torch.zeros(2)), 2, 4),
                                 TypeError, "depth must hold integers"),
    "stack_encode mismatched lengths": (lambda: stack_encode(TreePositions(torch.zeros(2, 3, **LONG), torch.zeros(3, **LONG)), 2, 4),
                                        ValueError, "[*batch, K]"),
    "stack_encode bool paths": (lambda: stack_encode(TreePositions(torch.zeros(2, 3, dtype=torch.bool), torch.zeros(2, **LONG)), 2, 4),
                                TypeError, "torch.bool"),
    "stack_encode tuple": (lambda: stack_encode((torch.zeros(2, 3, **LONG), torch.zeros(2, **LONG)), 2, 4),
                           TypeError, "positions must be a TreePositions"),
    "ape_to_rope NaN": (lambda: ape_to_rope(torch.full((4, 4), math.nan)), ValueError, "not orthogonal"),
    "SinusoidalPE d_model=-1": (lambda: SinusoidalPE(-1), ValueError, "d_model must be >= 1"),
    "SinusoidalPE max_len=0": (lambda: SinusoidalPE(8, 0), ValueError, "max_len must be >= 1"),
    "LearnedPE d_model=0": (lambda: LearnedPE(0, 4), ValueError, "d_model must be >= 1"),
    "Shaw num_heads=0": (lambda: ShawRelativeAttention(8, 0, 2), ValueError, "num_heads must be >= 1"),
    "Shaw max_distance=-1": (lambda: ShawRelativeAttention(8, 2, -1), ValueError, "max_distance must be >= 0"),
    "AdditiveTreePE d_model=8.0": (lambda: AdditiveTreePE(8.0, 4, 4), TypeError, "d_model must be an int"),
    "relative_attention shapes": (lambda: relative_attention(*[torch.randn(1, 2, 3, 4)] * 3, torch.randn(4, 4), torch.randn(4, 4)),
                                  ValueError, "rel_keys and rel_values must"),
    "apply_rotary positions shape": (lambda: apply_rotary(torch.randn(1, 2, 3, 4), torch.arange(5)), ValueError,
                                     "positions must be [length]"),
    "parent 2^63": (lambda: Tree(["a", "b"], [-1, 2**63], [-1, 0]), ValueError, "outside the int64 range"),
    "batch_positions of strings": (lambda: batch_positions(["(a b)", "c"]), TypeError, "item 0 of trees is a str"),
    "Tree.path(0, 1.5)": (lambda: DEEP.path(0, 1.5), TypeError, "node indices (integers)"),
    "decode float ids": (lambda: VOCAB.decode(torch.tensor([3.0, 4.0])), TypeError, "integer token ids"),
    "YamlVocab.decode float ids": (lambda: YamlVocab(["a"], ["b"]).decode(torch.tensor([1.5])), TypeError, "integer tensor"),
    "tracker.step(list)": (lambda: TreeTracker().step([True, False]), TypeError, "child_slots must be a torch.Tensor"),
    "compose()": (lambda: compose(), ValueError, "at least one affine map"),
    "read_yaml max_nodes=1.5": (lambda: read_yaml("a: 1", max_nodes=1.5), TypeError, "max_nodes must be an int"),
    "positions max_depth=1.5": (lambda: DEEP.positions(max_depth=1.5), TypeError, "max_depth must be an int"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_adversarial_input_gets_a_clear_error(name):
    call, error, words = CASES[name]
    with pytest.raises(error) as e: call()
    assert words in str(e.value), f"{type(e.value).__name__}({str(e.value)!r}) lacks {words!r}"


def test_one_node_trees_and_zero_width_paths_through_every_encoding():
    one, deep = ONE.positions(), DEEP.lcrs()
    assert one.paths.shape == (1, 0)
    mixed = batch_positions([ONE, deep, Tree.from_sexpr("b")])             # one-node trees beside a deep one
    only = batch_positions([ONE, ONE])                                      # a whole batch of width 0
    assert only.paths.shape == (2, 1, 0)
    assert collate_positions([one, deep.positions()]) == batch_positions([ONE, deep])
    for pos in (one, mixed, only):
        kinds = torch.zeros(pos.shape, **LONG)
        assert stack_encode(pos, 2, 4).shape == (*pos.shape, 8)
        assert TreePositionalEncoding(16, 2, 4)(pos).shape == (*pos.shape, 16)
        assert AdditiveTreePE(8, 4, 4)(pos, kinds).shape == (*pos.shape, 8)
        x = torch.randn(*pos.shape[:-1], 1, pos.shape[-1], 8)
        assert TreeAPE(8, 2).rotate(x, pos).shape == x.shape
    assert (stack_encode(mixed, 2, 4)[[0, 2], 0] == 0).all()              # a root encodes to zeros
    tracker = TreeTracker("dfs", 2, 2, max_depth=4)
    tracker.step(torch.tensor([[False, False], [True, False]]))            # row 0 is a one-node tree
    assert tracker.done.tolist() == [True, False] and tracker.position.depth.tolist() == [-1, 1]
    leaf_vocab = ArityVocab.from_trees([ONE])
    assert leaf_vocab.decode(leaf_vocab.encode(ONE)) == ONE


@pytest.mark.parametrize("p", [2**28, 2**32, 2**40, 2**62, 2**63 - 1, -(2**63 - 1)])
def test_sequence_ape_stays_orthogonal_at_huge_positions(p):
    ape = SequenceAPE(8, num_heads=2, init="rope_mixed")
    with torch.no_grad(): W = ape.powers(torch.tensor([p]))[0]            # [heads, 8, 8], float32
    assert torch.isfinite(W).all()
    assert (W.mT @ W - torch.eye(8)).abs().max() < 1e-5


def test_sequence_ape_dense_table_and_rotary_limit():
    ape = SequenceAPE(8, num_heads=1, init="random", std=0.5)
    with torch.no_grad(): W = ape.powers(torch.arange(2**14))[:, 0]
    assert (W.mT @ W - torch.eye(8)).abs().max() < 1e-5
    x = torch.randn(1, 1, 1, 8).expand(1, 1, 2, 8)                          # one vector at two positions
    out = apply_rotary(x, torch.tensor([2**31 - 2, 2**31 - 1]))            # the top of the documented range
    assert not torch.allclose(out[..., 0, :], out[..., 1, :])              # still told apart (2^40 is refused)


@pytest.mark.parametrize("make", [lambda: SequenceAPE(8, init="random", std=0.5),
                                  lambda: TreeAPE(8, 2, init="random", std=0.5)], ids=["SequenceAPE", "TreeAPE"])
@pytest.mark.parametrize("update", ["data", "copy_"])
def test_eval_cache_follows_in_place_parameter_updates(make, update):
    "EMA / weight averaging write through `p.data` (or `copy_` under no_grad): the cached generators must follow."
    ape = make().eval()
    positions = torch.tensor([3, 5]) if isinstance(ape, SequenceAPE) else DEEP.lcrs().positions()
    with torch.no_grad():
        before = ape.maps(positions).clone()
        if update == "data": ape.entries.data.mul_(0.5)
        else: ape.entries.copy_(ape.entries * 0.5)
        after = ape.maps(positions)
        fresh = make().eval(); fresh.load_state_dict(ape.state_dict())
        torch.testing.assert_close(after, fresh.maps(positions))
    assert not torch.allclose(before, after)


def test_truncated_positions_keep_sibling_indices():
    "Item 8: truncated paths keep each node's own slot, so sibling indices survive truncation to one step."
    t = Tree.from_sexpr("(r a b c)")
    assert t.positions(max_depth=1, overflow="truncate").sibling().tolist() == [0, 0, 1, 2]
    deep = Tree.from_sexpr("(r (x a b c))")
    assert deep.positions(max_depth=1, overflow="truncate").sibling().tolist() == [0, 0, 0, 1, 2]
