"""Fuzz tests: random bytes, strings, nested structures and tensors (every dtype, empty and odd shapes, NaN, inf,
huge values) thrown at every public reader and encoder. A call must return a result or raise a `ValueError` /
`TypeError` with a non-empty message (for the encoders: one that names the offending argument). Anything else
(IndexError, RuntimeError from torch, RecursionError, a YAML or NumPy error, a crash) is a failure.

Few examples by default (the whole module takes well under a minute); `pytest --slow` runs many more.
The cases are grouped by module, so that a failure points at the module that owns it."""
import inspect
import math
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from strategies import random_trees

# ------------------------------------------------------------------------------------------------ the harness
CALL_ERRORS = re.compile(r"unexpected keyword argument|required positional argument|positional arguments? but"
                         r"|takes \d+ positional|missing \d+ required")


def accepts(call, names=()):
    "Run `call`: a result, or a ValueError/TypeError with a message (naming one of `names`, when given)."
    try:
        return call()
    except (ValueError, TypeError) as e:
        msg = str(e)
        assert msg.strip(), f"{type(e).__name__} with an empty message"
        assert not (isinstance(e, TypeError) and CALL_ERRORS.search(msg)), f"a signature mismatch, not a check: {msg}"
        if names: assert any(n in msg for n in names), f"{type(e).__name__}({msg!r}) names none of {names}"
        return None


@pytest.fixture
def fuzz(request):
    "`fuzz(strategy, check)`: run `check` on examples of `strategy` (more of them under `--slow`)."
    examples = 300 if request.config.getoption("--slow") else 12
    def run(strategy, check):
        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  derandomize=not request.config.getoption("--slow"))
        @given(strategy)
        def inner(value): check(value)
        inner()
    return run


INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
ALL_DTYPES = [torch.bool, *INT_DTYPES, *FLOAT_DTYPES, torch.complex64]
nasty_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -0.0, 1e300, -1e-300]), st.integers(-3, 12).map(float))


@st.composite
def tensors(draw, dtypes=ALL_DTYPES, max_ndim=4, max_side=4, shape=None):
    "A small tensor of a random dtype and shape (sides may be 0), with small, huge, NaN and infinite values."
    shape = tuple(draw(st.lists(st.integers(0, max_side), max_size=max_ndim))) if shape is None else tuple(shape)
    dtype = draw(st.sampled_from(dtypes))
    n = math.prod(shape)
    if dtype == torch.bool: values = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    elif dtype.is_floating_point or dtype.is_complex: values = draw(st.lists(nasty_floats, min_size=n, max_size=n))
    else:
        info = torch.iinfo(dtype)
        values = draw(st.lists(st.one_of(st.integers(max(info.min, -3), 12), st.integers(info.min, info.max)),
                               min_size=n, max_size=n))
    return torch.tensor(values, dtype=dtype).reshape(shape)


sizes = st.one_of(st.integers(-2, 9), st.sampled_from([2.0, 4.5, "4", True, None]))   # zero, negative, not ints
bases = st.sampled_from([10000.0, 2.0, 1.0, 0.0, -1.0, float("nan"), float("inf")])
labels = st.one_of(st.text(max_size=4), st.integers(), st.none(), st.booleans(), st.floats())
structures = st.recursive(labels, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.tuples(labels, st.lists(kids, max_size=3)),
    st.dictionaries(st.text(max_size=3), kids, max_size=3), st.tuples(kids), st.frozensets(st.integers(), max_size=3)),
    max_leaves=12)


def texts(alphabet):
    return st.one_of(st.text(max_size=60), st.text(alphabet=alphabet, max_size=60))


# ------------------------------------------------------------------------------------------------ sequence
from treepe_nb.sequence import (LearnedPE, ShawRelativeAttention, SinusoidalPE, apply_rotary, check_range, frequencies,
                                relative_attention, sinusoidal)


def test_fuzz_sinusoidal(fuzz):
    fuzz(st.tuples(st.one_of(tensors(), st.integers(-3, 9)), sizes, bases),
         lambda a: accepts(lambda: sinusoidal(*a), ("positions", "d", "base")))


def test_fuzz_frequencies_and_check_range(fuzz):
    fuzz(st.tuples(st.one_of(sizes, st.floats(), st.booleans()), bases),
         lambda a: accepts(lambda: frequencies(*a), ("d", "base")))
    fuzz(st.tuples(tensors(), st.integers(-2, 9)), lambda a: accepts(lambda: check_range(*a), ("position",)))


def test_fuzz_absolute_modules(fuzz):
    def check(a):
        cls, d_model, max_len, positions = a
        pe = accepts(lambda: cls(d_model, max_len), ("d_model", "max_len"))
        if pe is not None:
            out = accepts(lambda: pe(positions), ("position",))
            if out is not None: assert out.shape == (*positions.shape, d_model)
    fuzz(st.tuples(st.sampled_from([SinusoidalPE, LearnedPE]), sizes, sizes, tensors()), check)


def test_fuzz_apply_rotary(fuzz):
    def check(a):
        x, positions, base, interleaved = a
        out = accepts(lambda: apply_rotary(x, positions, base, interleaved), ("x", "positions", "base"))
        if out is not None: assert out.shape == x.shape and out.dtype == x.dtype
    fuzz(st.tuples(tensors(max_ndim=4), st.one_of(st.none(), tensors(max_ndim=2, max_side=5)), bases, st.booleans()),
         check)


@st.composite
def attention_args(draw):
    "Mostly consistent q, k, v and tables, each dimension perturbed now and then."
    B, H, Lq, Lk, D, K = (draw(st.integers(0, 3)) for _ in range(6))
    def side(v): return draw(st.one_of(st.just(v), st.integers(0, 3)))
    def t(*shape): return draw(tensors(dtypes=[torch.float32, torch.float64, torch.int64, torch.bool], shape=shape))
    q = t(side(B), side(H), side(Lq), side(D))
    k, v = t(side(B), side(H), side(Lk), side(D)), t(side(B), side(H), side(Lk), side(D))
    table = draw(st.sampled_from([(side(2 * K + 1), side(D)), (side(H), side(2 * K + 1), side(D))]))
    mask = draw(st.one_of(st.none(), tensors(dtypes=[torch.bool, torch.float32], shape=(side(Lq), side(Lk)))))
    return q, k, v, t(*table), t(*table), mask


def test_fuzz_relative_attention(fuzz):
    fuzz(attention_args(), lambda a: accepts(lambda: relative_attention(*a),
                                             ("q", "k", "v", "rel_keys", "rel_values", "mask")))
    def module(a):
        d_model, heads, max_distance, x = a
        m = accepts(lambda: ShawRelativeAttention(d_model, heads, max_distance), ("d_model", "num_heads", "max_distance"))
        if m is not None: accepts(lambda: m(x), ("x",))
    fuzz(st.tuples(sizes, sizes, sizes, tensors(dtypes=FLOAT_DTYPES[2:], max_ndim=3, max_side=8)), module)


# ------------------------------------------------------------------------------------------------ trees
# These run against the trees module (owned by the trees branch); failures there belong to that module.
from treepe_nb.trees import Tree, TreePositions

SEXPR = "()ab1 \"\\;\n"
JSON = '{}[]:,"0123456789.eE-+ abtrunlfs\\'
YAML = "-:?,[]{}&*!|>#'\"% \n\tab1<<~@`"
PY = "def():\n (x)=+1,'\"#@ \\\tclass lambda yield async"
CONLLU = "0123456789\t_-.#=\n abNOUNroot"


@pytest.mark.parametrize("reader, strategy", [
    (Tree.from_sexpr, texts(SEXPR)),
    (Tree.from_json, st.one_of(texts(JSON), structures, st.binary(max_size=20))),
    (Tree.from_yaml, st.one_of(texts(YAML), st.binary(max_size=30))),
    (Tree.from_nested, structures),
    (Tree.from_python_ast, st.one_of(texts(PY), st.binary(max_size=20), st.integers())),
    (Tree.from_conllu, st.one_of(texts(CONLLU), st.binary(max_size=20))),
], ids=["from_sexpr", "from_json", "from_yaml", "from_nested", "from_python_ast", "from_conllu"])
def test_fuzz_tree_readers(fuzz, reader, strategy):
    fuzz(strategy, lambda value: accepts(lambda: reader(value)))


def test_fuzz_from_parents(fuzz):
    fuzz(st.tuples(st.lists(labels, max_size=6), st.one_of(st.lists(st.integers(-3, 7), max_size=7),
                                                             st.lists(st.floats(), max_size=3), structures)),
         lambda a: accepts(lambda: Tree.from_parents(*a), ("parent", "label")))


def test_fuzz_tree_constructor_positions_and_limits(fuzz):
    "The constructor with any labels and arrays; positions, batches and read_yaml with any limits."
    from treepe_nb.trees import batch_positions
    from treepe_nb.yaml_reader import read_yaml
    def check(a):
        labels, parent, slot, order, max_depth, overflow, max_nodes = a
        t = accepts(lambda: Tree(labels, parent, slot), ("parent", "slot", "label", "node", "labels"))
        if t is not None:
            accepts(lambda: t.positions(order, max_depth, overflow), ("order", "max_depth", "overflow", "depth"))
            accepts(lambda: batch_positions([t, t], order, max_depth, overflow), ("order", "max_depth", "overflow", "depth"))
        accepts(lambda: read_yaml("a: [1, {b: 2}]", max_nodes=max_nodes, max_nesting=max_nodes), ("max_nodes", "max_nesting"))
    arrays = st.one_of(st.lists(st.integers(-2, 4), max_size=5), st.lists(st.floats(), max_size=3), structures)
    fuzz(st.tuples(st.lists(st.one_of(labels, structures), max_size=5), arrays, arrays,
                   st.sampled_from(["dfs", "bfs", "x", None]), st.one_of(st.none(), sizes),
                   st.sampled_from(["raise", "truncate", "keep_last", "clamp"]), sizes), check)


def test_fuzz_yaml_readers(fuzz):
    from treepe_nb.additive import yaml_documents, yaml_nodes
    def check(text):
        accepts(lambda: yaml_nodes(text, max_nodes=200))
        accepts(lambda: yaml_documents(text, max_nodes=200))
    fuzz(st.one_of(texts(YAML), st.binary(max_size=40), st.integers(), structures), check)


def test_fuzz_yaml_limits_and_plain_data(fuzz):
    "read_yaml with any stream limits and either oversize policy; load_yaml_data with any text and limits."
    from treepe_nb.yaml_reader import SkippedDocument, load_yaml_data, read_yaml
    limits = st.one_of(st.integers(-1, 40), st.sampled_from([1.5, "9", None, True]))
    def check(a):
        text, max_nodes, total, work, oversize = a
        docs = accepts(lambda: read_yaml(text, max_nodes=max_nodes, max_total_nodes=total, max_nesting_work=work,
                                         oversize=oversize),
                       ("max_nodes", "max_total_nodes", "max_nesting_work", "max_nesting", "oversize", "YAML", "key",
                        "alias", "tag", "merge", "scalar", "document", "mapping", "list"))
        for d in docs or []:
            if isinstance(d, SkippedDocument): assert "max_nodes" in d.reason and len(d) == 0
        accepts(lambda: load_yaml_data(text, max_nodes=max_nodes, max_nesting=total, max_nesting_work=work))
    fuzz(st.tuples(st.one_of(texts(YAML), st.binary(max_size=40), st.integers(), structures), limits, limits, limits,
                   st.sampled_from(["raise", "skip", "drop", None])), check)


@st.composite
def tree_positions(draw):
    "Valid positions of random trees, or raw random tensors (which the constructor must check)."
    if draw(st.booleans()):
        tree = draw(random_trees(max_nodes=12, max_branching=draw(st.integers(1, 4))))
        max_depth = draw(st.integers(0, 8))
        return accepts(lambda: tree.positions(max_depth=max_depth), ("max_depth",))
    paths = draw(tensors(dtypes=[torch.int64, torch.int32, torch.float32, torch.bool], max_ndim=3))
    depth = draw(tensors(dtypes=[torch.int64, torch.int32, torch.float32], shape=paths.shape[:-1]
                         if paths.ndim and draw(st.booleans()) else tuple(draw(st.lists(st.integers(0, 3), max_size=2)))))
    return accepts(lambda: TreePositions(paths, depth))


# ------------------------------------------------------------------------------------------------ stack
def test_fuzz_stack(fuzz):
    from treepe_nb.stack import TreePositionalEncoding, stack_encode
    def check(a):
        positions, n, max_depth, d_model = a
        if positions is None: return
        accepts(lambda: stack_encode(positions, n, max_depth), ("n", "max_depth", "positions", "depth", "slot"))
        pe = accepts(lambda: TreePositionalEncoding(d_model, n=n, max_depth=max_depth), ("d_model", "n", "max_depth"))
        if pe is not None: accepts(lambda: pe(positions), ("n", "max_depth", "positions", "depth", "slot"))
    fuzz(st.tuples(tree_positions(), sizes, sizes, sizes), check)


# ------------------------------------------------------------------------------------------------ algebraic
def test_fuzz_algebraic(fuzz):
    from treepe_nb.algebraic import GridAPE, SequenceAPE, TreeAPE
    def check(a):
        kind, dim, heads, extra, positions, x = a
        make = {"seq": lambda: SequenceAPE(dim, num_heads=heads), "tree": lambda: TreeAPE(dim, n=extra, num_heads=heads),
                "grid": lambda: GridAPE(dim, num_heads=heads, axes=extra)}[kind]
        ape = accepts(make, ("dim", "heads", "n", "axes"))
        if ape is None or positions is None: return
        names = ("positions", "coords", "x", "n", "depth", "slot", "max_depth", "dim", "heads")
        accepts(lambda: ape.maps(positions), names)
        accepts(lambda: ape.rotate(x, positions), names)
    seq_pos = tensors(dtypes=[torch.int64, torch.int32, torch.float32, torch.bool], max_ndim=3)
    fuzz(st.one_of(
        st.tuples(st.just("seq"), sizes, sizes, st.just(None), seq_pos, tensors(dtypes=ALL_DTYPES, max_ndim=4)),
        st.tuples(st.just("grid"), sizes, sizes, sizes, seq_pos, tensors(dtypes=ALL_DTYPES, max_ndim=4)),
        st.tuples(st.just("tree"), sizes, sizes, sizes, tree_positions(), tensors(dtypes=ALL_DTYPES, max_ndim=4))),
        check)


# ------------------------------------------------------------------------------------------------ additive
def test_fuzz_additive(fuzz):
    from treepe_nb.additive import AdditiveTreePE
    def check(a):
        d_model, max_depth, max_sibling, num_kinds, positions, kinds = a
        pe = accepts(lambda: AdditiveTreePE(d_model=d_model, max_depth=max_depth, max_sibling=max_sibling,
                                            num_kinds=num_kinds), ("d_model", "max_depth", "max_sibling", "num_kinds"))
        if pe is not None and positions is not None:
            accepts(lambda: pe(positions, kinds), ("positions", "kinds", "depth", "sibling", "max_depth", "num_kinds"))
    fuzz(st.tuples(sizes, sizes, sizes, sizes, tree_positions(), tensors(max_ndim=2)), check)


# ------------------------------------------------------------------------------------------------ tracking
def test_fuzz_tracking(fuzz):
    from treepe_nb.tracking import ArityVocab, TreeTracker
    def check(a):
        order, batch, n, max_depth, steps = a
        tracker = accepts(lambda: TreeTracker(order, batch_size=batch, n=n, max_depth=max_depth),
                          ("order", "batch_size", "n", "max_depth"))
        if tracker is None: return
        for child_slots in steps:
            if accepts(lambda: tracker.step(child_slots), ("child_slots", "n", "max_depth", "batch")) is None: break
    fuzz(st.tuples(st.sampled_from(["dfs", "bfs", "x"]), sizes, sizes, sizes,
                   st.lists(tensors(dtypes=[torch.bool, torch.int64, torch.float32], max_ndim=3), max_size=6)), check)
    def vocab(a):
        symbols, n, ids = a
        v = accepts(lambda: ArityVocab(symbols, n), ("n", "slot", "symbol"))
        if v is not None: accepts(lambda: v.child_slots(ids), ("ids",))
    fuzz(st.tuples(st.lists(st.tuples(labels, st.lists(st.integers(-2, 5), max_size=3)), max_size=5), sizes,
                   tensors(max_ndim=2)), vocab)


# ------------------------------------------------------------------------------------------------ signatures
def test_public_signatures_use_one_vocabulary():
    "The names the fuzz cases call with (a mismatch would otherwise hide as an accepted TypeError)."
    from treepe_nb.additive import AdditiveTreePE
    from treepe_nb.algebraic import GridAPE, SequenceAPE, TreeAPE
    from treepe_nb.stack import TreePositionalEncoding, stack_encode
    def params(f): return list(inspect.signature(f).parameters)
    assert params(SinusoidalPE)[:2] == params(LearnedPE)[:2] == ["d_model", "max_len"]
    assert params(stack_encode)[:3] == ["positions", "n", "max_depth"]
    assert params(TreePositionalEncoding)[:3] == ["d_model", "n", "max_depth"]
    assert params(TreeAPE)[:3] == ["head_dim", "n", "num_heads"]
    assert params(SequenceAPE)[:2] == params(GridAPE)[:2] == ["head_dim", "num_heads"]
    assert params(ShawRelativeAttention)[:2] == ["d_model", "num_heads"]
    assert params(AdditiveTreePE)[:4] == ["d_model", "max_depth", "max_sibling", "num_kinds"]
    assert params(AdditiveTreePE.forward)[1:3] == ["positions", "kinds"]


# ------------------------------------------------------------------------------------------------ model surfaces
# Settings, model inputs and generation of the model chapter; the generators, collator and task settings.
import numpy as np

from treepe_nb.attention import PositionEncoding
from treepe_nb.model import Transformer, TransformerConfig

anything = st.one_of(sizes, st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3), st.none())


def test_fuzz_position_encoding_sizes(fuzz):
    def check(a):
        name, n, max_depth, max_len, max_sibling, num_kinds, axes = a
        accepts(lambda: PositionEncoding(name, 16, 2, n, max_depth, max_len, max_sibling, num_kinds, axes),
                ("n", "max_depth", "max_len", "max_sibling", "num_kinds", "axes", "coordinates", "multiple"))
    fuzz(st.tuples(st.sampled_from(["ape-grid", "ape-tree", "additive", "stack", "learned", "none"]),
                   sizes, sizes, sizes, st.one_of(st.none(), sizes), sizes, sizes), check)


_MODEL = {}


def small_model(pe):
    if pe not in _MODEL:
        torch.manual_seed(0)
        _MODEL[pe] = Transformer(TransformerConfig(10, 10, d_model=8, num_heads=2, enc_layers=1, dec_layers=1, pe=pe,
                                                   max_len=16)).eval()
    return _MODEL[pe]


def test_fuzz_transformer_config(fuzz):
    fields = ("pad_id", "num_labels", "max_sibling", "d_ff", "tgt_vocab", "max_depth", "n", "axes", "num_kinds")
    def check(a):
        key, value = a
        cfg = accepts(lambda: TransformerConfig(10, 10, d_model=8, num_heads=2, **{key: value}), (key, "tgt_vocab"))
        if cfg is not None: accepts(lambda: Transformer(cfg), (key,))
    fuzz(st.tuples(st.sampled_from(fields), anything), check)


def test_fuzz_generate_arguments(fuzz):
    names = ("max_len", "beam", "length_penalty", "start_id", "end_id", "max_output_nodes")
    def check(a):
        pe, kwargs = a
        out = accepts(lambda: small_model(pe).generate(torch.tensor([[3, 4]]), torch.arange(2)[None], **kwargs), names)
        if out is not None:
            limit = kwargs.get("max_len") or 15
            assert len(out) == 1 and len(out[0]) <= limit
    values = st.one_of(st.integers(-2, 20), st.sampled_from([1.5, float("nan"), float("inf"), True, "2", None]))
    fuzz(st.tuples(st.sampled_from(["learned", "rotary"]),
                   st.dictionaries(st.sampled_from(names), values, max_size=3)), check)


def test_fuzz_model_inputs(fuzz):
    def check(a):
        src, tgt = a
        m = small_model("learned")
        pos = torch.arange(src.shape[-1])[None].expand(*src.shape[:1], -1) if src.ndim == 2 else src
        tpos = torch.arange(tgt.shape[-1])[None].expand(*tgt.shape[:1], -1) if tgt.ndim == 2 else tgt
        accepts(lambda: m(src, pos, tgt, tpos), ("src_ids", "tgt_ids", "src_pos", "tgt_pos", "positions", "position"))
    ids = tensors(dtypes=INT_DTYPES + [torch.float32, torch.bool], max_ndim=3, max_side=4)
    fuzz(st.tuples(ids, ids), check)


def test_fuzz_generators(fuzz):
    from treepe_nb.generators import random_binary_trees, random_words, task_rng, tree_depths
    def check(a):
        kind, x, y, z = a
        rng = task_rng(0)
        if kind == "words":
            accepts(lambda: random_words(rng, x, y, z, 5, max_tokens=10_000),
                    ("count", "length_mean", "length_std", "vocab_size", "max_tokens"))
        elif kind == "depths": accepts(lambda: tree_depths(rng, x, y, z), ("count", "mean", "std", "min_depth"))
        else:
            depths = [d for d in (x, y) if isinstance(d, int) and not isinstance(d, bool)]
            accepts(lambda: random_binary_trees(rng, depths, range(1, 6), range(6, 9), unique=bool(z), max_nodes=20_000),
                    ("depths", "unique", "max_nodes", "label"))
    num = st.one_of(st.integers(-2, 60), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([True, "3"]))
    fuzz(st.tuples(st.sampled_from(["words", "depths", "trees"]), num, num, num), check)


def test_fuzz_collator(fuzz):
    from treepe_nb.batching import Collator, Example
    t = Tree([11, 1, 2], [-1, 0, 0], [-1, 0, 1])
    def check(a):
        src_ids, tgt_ids = a
        accepts(lambda: Collator("tree", "tree")([Example(t, t, src_ids, tgt_ids)]), ("src_ids", "tgt_ids"))
    arrays = st.one_of(st.lists(st.integers(0, 30), max_size=5).map(np.array),
                       st.lists(st.floats(0, 30), min_size=1, max_size=4).map(np.array),
                       st.lists(st.text(max_size=2), min_size=1, max_size=3).map(lambda v: np.array(v, dtype=object)))
    fuzz(st.tuples(arrays, arrays), check)


def test_fuzz_task_settings(fuzz):
    from treepe_nb.tasks import make_task
    def check(a):
        name, key, value = a
        accepts(lambda: make_task(name, sizes=(3, 1, 1), **{key: value}),
                (key, "max_size", "depth", "sizes", "setting"))
    keys = st.sampled_from(["depth_mean", "depth_std", "min_depth", "length_mean", "length_std", "vocab_size", "max_size"])
    values = st.one_of(st.integers(-3, 70), st.sampled_from([10**9, 1e9, 200.0, float("nan"), -1.0, True, "4"]))
    fuzz(st.tuples(st.sampled_from(["seq-copy", "seq-repeat", "tree-copy", "tree-ops"]), keys, values), check)


def test_fuzz_docstring_modules(fuzz):
    from treepe_nb.corpora import docstring_functions
    path = st.one_of(st.sampled_from(["json/decoder.py", "../os.py", "/etc/passwd", "json/../../x.py", "", "json",
                                      "nope.py", "json/nope.py"]), st.text(max_size=8))
    fuzz(st.one_of(path, st.lists(path, max_size=2), st.integers(), st.none().map(lambda _: ["json/scanner.py"])),
         lambda modules: accepts(lambda: docstring_functions(modules, max_nodes=64),
                                 ("modules", "standard library", "max_nodes")))


# The training command's surfaces: the options of treepe-train and the mappings of config files and checkpoints.
option_values = st.one_of(st.integers(-5, 10**12).map(str), nasty_floats.map(str),
                          st.sampled_from(["none", "null", "true", "false", "", "abc", "-", "1e3", "{a: 1}", "[1, 2]"]),
                          st.text(max_size=6))


def _cli_options():
    from treepe_nb.cli import _train_parser
    return sorted({s for a in _train_parser()._actions for s in a.option_strings
                   if s.startswith("--") and s not in ("--help", "--version", "--resume", "--config")})


def test_fuzz_train_options(fuzz, tmp_path):
    "Any option with any value: a `TrainConfig`, or argparse's one-line error (exit 2), never a traceback."
    from treepe_nb.cli import config_from_args
    from treepe_nb.train import TrainConfig
    import contextlib, io
    names = _cli_options()
    argv_st = st.lists(st.tuples(st.sampled_from(names), option_values), max_size=4)
    def check(pairs):
        argv = [x for name, value in pairs for x in (name, value)] + ["--out", str(tmp_path / "r")]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try: cfg, _ = config_from_args(argv)
            except SystemExit as e:
                assert e.code == 2 and "error:" in err.getvalue() and "Traceback" not in err.getvalue(), err.getvalue()
                return
        assert isinstance(cfg, TrainConfig)
    fuzz(argv_st, check)


config_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10, 10**9), nasty_floats, st.text(max_size=5)),
                             lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)),
                             max_leaves=8)
config_keys = st.sampled_from(["task", "model", "steps", "lr", "pe", "d_model", "sizes", "order", "task_options",
                               "max_nodes", "seed", "clip", "out", "name", "decay", "options", "preset"])


def test_fuzz_config_mappings(fuzz):
    "Any mapping as a config file or a checkpoint's config: a `TrainConfig`, or a `ValueError`/`TypeError` naming a setting."
    from treepe_nb.train import TrainConfig
    mapping = st.dictionaries(config_keys, st.one_of(config_values, st.dictionaries(config_keys, config_values, max_size=3)),
                              max_size=4)
    fuzz(mapping, lambda d: accepts(lambda: TrainConfig.from_dict(d)))


# ------------------------------------------------------------------------------------------------ the doors of round 3
# For2Lam's options, the lines of a pairs file, the files of a run folder and the inputs of predict: any value is
# read, or refused with a ValueError/TypeError that names what was wrong (the option, the file, the line).
def test_fuzz_for2lam_options(fuzz):
    from treepe_nb.tasks import make_task
    keys = st.sampled_from(["max_loop_depth", "expr_depth", "max_const", "max_size"])
    values = st.one_of(st.integers(-3, 6), st.sampled_from([10**9, 10**6, 2**63, 1e9, float("nan"), True, "4", None]))
    fuzz(st.tuples(keys, values), lambda kv: accepts(lambda: make_task("for2lam-short", sizes=(3, 1, 1), **{kv[0]: kv[1]}),
                                                     (kv[0], "max_size", "budget", "variables")))


pair_lines = st.one_of(st.binary(max_size=80), st.text(max_size=60).map(str.encode),
                       st.tuples(st.sampled_from(["(a b)", "(a", "[1, [2]]", "{a: *x}", "a\u2028b", "\ufeff(x)", ""]),
                                 st.sampled_from(["(b a)", ")", "{}", "x" * 70])).map(
                           lambda st_: ('{"source": %s, "target": %s}' % tuple(map(repr, st_))).replace("'", '"').encode()))


def test_fuzz_pairs_lines(fuzz, tmp_path):
    from treepe_nb.pairs import read_pairs
    f = tmp_path / "p.jsonl"
    def check(lines):
        f.write_bytes(b"\n".join(lines))
        for fmt in ("sexpr", "yaml", "json"):
            try: read_pairs(f, fmt, "sexpr")
            except ValueError as e: assert "p.jsonl" in str(e), str(e)
    fuzz(st.lists(pair_lines, min_size=1, max_size=4), check)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from treepe_nb.train import TrainConfig, train
    from treepe_nb.tasks import TaskConfig
    from treepe_nb.model import ModelConfig
    out = tmp_path_factory.mktemp("fuzzrun") / "run"
    train(TrainConfig(TaskConfig(sizes=(16, 2, 2)), ModelConfig(pe="stack", d_model=16, num_heads=2), steps=2,
                      batch_size=8, eval_examples=1, threads=1, out=str(out)), progress=False)
    return out


def test_fuzz_run_folder_files(fuzz, tiny_run, tmp_path):
    import shutil
    from treepe_nb.predict import load_run
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    good = {n: (run / n).read_bytes() for n in ("vocab.json", "config.yaml")}
    content = st.one_of(st.binary(max_size=60), st.sampled_from([b"", b"[]", b"{}", b"null", b"!!python/name:os.system",
                                                                 b"a: &a [*a]", b"{" * 5000, b'{"name": 1}']),
                        st.sampled_from(list(good.values())).map(lambda g: g[: len(g) // 2]))
    def check(a):
        name, data = a
        (run / name).write_bytes(data)
        try: load_run(run)
        except (ValueError, FileNotFoundError) as e: assert name in str(e) or "config" in str(e), str(e)
        finally: (run / name).write_bytes(good[name])
    fuzz(st.tuples(st.sampled_from(list(good)), content), check)


def test_fuzz_predict_inputs(fuzz, tiny_run):
    from treepe_nb.predict import load_run, predict
    run = load_run(tiny_run)
    inputs = st.lists(st.one_of(st.text(max_size=30), st.sampled_from(["(1 2)", "(1 (2 3))", "((", "1", "(1 2) (3)"])),
                      min_size=1, max_size=3)
    fmt = st.sampled_from([None, "sexpr", "json", "yaml", "tokens", "python"])
    def check(a):
        xs, f = a
        names = [f"in.txt, line {k + 1}" for k in range(len(xs))]
        try: out = predict(run, xs, f, unknown="unk", names=names, max_output_nodes=8)
        except (ValueError, TypeError) as e: assert "line " in str(e) or "format" in str(e) or "labels" in str(e), str(e)
        else: assert len(out) == len(xs)
    fuzz(st.tuples(inputs, fmt), check)


# ------------------------------------------------------------------------------------------------ round 4's doors
for_words = "if then else endif for do endfor x y = == + - < > ; ( ) 0 1 10\n\t"


def test_fuzz_for_programs(fuzz):
    "For source text: parsed, or a ValueError/TypeError naming where (the nesting budget checked at the door)."
    from treepe_nb.pairs import parse_for
    words = st.lists(st.sampled_from(for_words.split(" ")), max_size=40).map(" ".join)
    deep = st.integers(1, 20_000).map(lambda d: "x = 1; " + "if x == 1 then " * d + "x = 2" + " else x = 3 endif" * d)
    fuzz(st.one_of(st.text(max_size=60), words, deep, labels), lambda t: accepts(lambda: parse_for(t, max_nesting=1000)))


def test_fuzz_semparse_files(fuzz, tmp_path):
    "A GEO data folder of random JSON-like structures, or ATIS TSV lines of random text: read, or a ValueError naming the file."
    import json
    from treepe_nb.semparse import read_atis_tsv, semparse_splits
    geo = tmp_path / "geo"; geo.mkdir()
    tsv = tmp_path / "atis_train.tsv"
    entry = st.fixed_dictionaries({"logic": st.one_of(st.lists(st.one_of(st.text(max_size=20), labels), max_size=2), labels),
                                   "sentences": st.one_of(st.lists(st.dictionaries(st.sampled_from(
                                       ["text", "variables", "question-split"]), st.one_of(labels, st.text(max_size=8)),
                                       max_size=3), max_size=2), labels)})
    def check_geo(entries):
        (geo / "geography-logic.txt").write_text(json.dumps(entries, default=str))
        try: semparse_splits("geo", data=geo)
        except ValueError as e: assert "geography" in str(e) or str(geo) in str(e), str(e)
    fuzz(st.one_of(st.lists(entry, max_size=3), structures), check_geo)
    def check_tsv(lines):
        tsv.write_text("\n".join(lines))
        try: read_atis_tsv(tsv)
        except ValueError as e: assert "atis_train.tsv" in str(e), str(e)
    fuzz(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["what flights\t( lambda $0 e ( flight $0 ) )",
                                                                    "a\t(", "a\tb\tc", "\t( x )"])), max_size=4), check_tsv)


def test_fuzz_run_configs_import_nothing(fuzz):
    "A run's configuration (any mapping, any `imports`) is read or refused, and never imports a module it names."
    import sys
    from treepe_nb.config import TrainConfig
    names = st.one_of(st.sampled_from(["this", "antigravity", "os", "no_such_module_x", "treepe_nb.tasks"]), labels)
    def check(d):
        before = set(sys.modules)
        accepts(lambda: TrainConfig.from_dict(d, "fuzz.yaml"))
        assert not (set(sys.modules) - before) & {"this", "antigravity", "no_such_module_x"}
    fuzz(st.one_of(st.fixed_dictionaries({"imports": st.one_of(st.lists(names, max_size=3), names)}), structures), check)
