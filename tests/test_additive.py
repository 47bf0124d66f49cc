"""Property tests of `treepe_nb.additive`: the YAML linearisation against `yaml.safe_load` on random documents
(hypothesis), deep nesting, refused input, and the additive encoding against its tables."""
import functools
import operator
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import given, settings, strategies as st

from treepe_nb.additive import AdditiveTreePE, YamlVocab, yaml_documents, yaml_nodes
from treepe_nb.trees import Tree, TreePositions, batch_positions
from treepe_nb.yaml_reader import NodeKind, read_yaml

from strategies import cuda

DATA = Path(__file__).resolve().parents[1] / "nbs" / "data" / "k8s"
KEYS = (NodeKind.KEY, NodeKind.LIST_KEY)

# Random JSON-like documents: string keys (including ones that need quoting in a path), plain scalars.
keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, width=32) | \
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=10)
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                         max_leaves=25)


def walk(doc):
    """Expected (kind, depth, sibling, steps) of every token of a plain document, by the rules, recursively (small
    docs): a token hangs below the nearest key above it; depth = keys above; sibling = rank below that key (0 at the
    top level); list items add no level."""
    out, count = [], {}
    def emit(kind, parent, depth, steps):
        sibling = 0 if parent is None else count[parent]
        if parent is not None: count[parent] += 1
        out.append((kind, depth, sibling, steps)); count[len(out) - 1] = 0
        return len(out) - 1
    def visit(v, steps, parent, depth, role):
        if isinstance(v, (dict, list)) and v:
            if isinstance(v, dict):
                for k, x in v.items():
                    i = emit(NodeKind.LIST_KEY if role == "item" else NodeKind.KEY, parent, depth, steps + (k,))
                    visit(x, steps + (k,), i, depth + 1, "value")
            else:
                for j, x in enumerate(v): visit(x, steps + (j,), parent, depth, "item")
        else: emit(NodeKind.LIST_VALUE if role == "item" else NodeKind.VALUE, parent, depth, steps)
    if doc is not None: visit(doc, (), None, 0, "root")
    return out


def reach(doc, steps): return functools.reduce(operator.getitem, steps, doc)


@settings(max_examples=150, deadline=None)
@given(doc=documents, flow=st.booleans())
def test_nodes_follow_the_rules_and_lead_back_to_the_values(doc, flow):
    text = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    loaded = yaml.safe_load(text)
    nodes = yaml_nodes(text)
    expected = walk(loaded)
    if loaded is None and text.strip() not in ("", "..."):                # `null` written out is one VALUE token
        expected = [(NodeKind.VALUE, 0, 0, ())]
    assert [(n.kind, n.depth, n.sibling, n.steps) for n in nodes] == expected
    for n in nodes:
        if n.kind in KEYS:
            assert n.steps[-1] == n.value and n.value in reach(loaded, n.steps[:-1])
        else:
            assert reach(loaded, n.steps) == n.value
        assert n.doc == 0 and n.line >= 1 and n.column >= 1
    # the path text names the steps: keys in order, indices as [i]
    for n in nodes:
        assert n.path.count("[") >= sum(isinstance(s, int) for s in n.steps)


@settings(max_examples=40, deadline=None)
@given(docs=st.lists(documents, min_size=1, max_size=4))
def test_streams_keep_document_indices(docs):
    text = yaml.safe_dump_all(docs, allow_unicode=True, sort_keys=False, explicit_start=True)
    loaded = list(yaml.safe_load_all(text))
    grouped = yaml_documents(text)
    assert len(grouped) == len(loaded)
    for i, nodes in enumerate(grouped):
        assert all(n.doc == i for n in nodes)
        for n in nodes:
            if n.kind not in KEYS: assert reach(loaded[i], n.steps) == n.value
    assert [(n.token, n.doc, n.path) for d in grouped for n in d] == [(n.token, n.doc, n.path) for n in yaml_nodes(text)]


@settings(max_examples=30, deadline=None)
@given(doc=documents)
def test_flow_and_block_styles_give_the_same_tokens(doc):
    a = yaml_nodes(yaml.safe_dump(doc, default_flow_style=True, sort_keys=False))
    b = yaml_nodes(yaml.safe_dump(doc, default_flow_style=False, sort_keys=False))
    assert [(n.token, n.kind, n.depth, n.sibling, n.path) for n in a] == \
           [(n.token, n.kind, n.depth, n.sibling, n.path) for n in b]


def test_5000_levels_do_not_recurse():
    nested_maps = "{k: " * 5000 + "leaf" + "}" * 5000
    block_maps = "".join("  " * i + "k:\n" for i in range(5000)) + "  " * 5000 + "leaf\n"
    for text in (nested_maps, block_maps):
        with pytest.raises(RecursionError): yaml.safe_load(text)       # PyYAML's own composer cannot
        nodes = yaml_nodes(text)
        assert len(nodes) == 5001 and nodes[-1].depth == 5000 and nodes[-1].kind == NodeKind.VALUE
        assert nodes[-1].steps == ("k",) * 5000 and nodes[-1].path == ".".join(["k"] * 5000)
        assert [n.depth for n in nodes[:-1]] == list(range(5000))
    nested_lists = "- " * 5000 + "leaf\n"
    leaf, = yaml_nodes(nested_lists)
    assert (leaf.kind, leaf.depth, leaf.steps) == (NodeKind.LIST_VALUE, 0, (0,) * 5000)
    mixed = "{k: [" * 2500 + "leaf" + "]}" * 2500
    nodes = yaml_nodes(mixed)
    assert nodes[-1].depth == 2500 and len(nodes[-1].steps) == 5000


@pytest.mark.parametrize("text, message", [
    ("!!python/object/apply:os.system [echo hi]", "would construct an object"),
    ("a: !!python/object:collections.OrderedDict {}", "would construct an object"),
    ("a: !!python/name:os.system ''", "not a safe YAML type"),
    ("a: !!omap [x: 1]", "!!omap"),
    ("a: 1\n  b: 2", "invalid YAML at line 2"),
    ("a: 'open", "invalid YAML at line 1"),
    ("a: 1\na: 2", "duplicate key 'a' at line 2, column 1"),
    ("{? {x: 1} : y}", "a mapping used as a key"),
    ("b: *a", "undefined alias *a"),
    ("a: &r {b: *r}", "makes the document recursive"),
    ("a: &r {<<: *r}", "makes the document recursive"),
    ("a: !!set", "not a plain scalar"),
    ("!!set : 1", "not a plain scalar"),
    ("a: {<<: [1, 2]}", "needs a mapping or a list of mappings"),
])
def test_refused_input_names_what_and_where(text, message):
    with pytest.raises(ValueError) as e: yaml_nodes(text)
    assert message in str(e.value)


def test_aliases_merge_keys_and_non_string_keys_match_safe_load():
    text = ("base: &b {x: 1, y: [1, 2]}\nother: &o {y: 0, z: 3}\n"
            "m: {<<: [*b, *o], w: 4, x: 9}\nalias: *b\n"
            "keys: {1: a, 2.5: b, null: c, false: d, 2020-01-02: e, '=': f}\n")
    loaded, nodes = yaml.safe_load(text), yaml_nodes(text)
    for n in nodes:
        if n.kind in KEYS: assert n.value in reach(loaded, n.steps[:-1]) and n.steps[-1] == n.value
        else: assert reach(loaded, n.steps) == n.value
    assert [n.token for n in nodes if n.kind == NodeKind.KEY and n.depth == 1 and n.steps[0] == "m"] == list(loaded["m"])
    assert [n.path for n in nodes if n.steps[:1] == ("keys",) and n.depth == 1 and n.kind == NodeKind.KEY] == \
        ["keys[!!int 1]", "keys[!!float 2.5]", "keys[!!null null]", "keys[!!bool false]", "keys[!!timestamp 2020-01-02]", 'keys["="]']
    laughs = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n"
    assert len(yaml_nodes(laughs)) == 3 + 4 + 16 + 64
    with pytest.raises(ValueError, match="more than max_nodes=50"): yaml_nodes(laughs, max_nodes=50)


def test_quoted_brackets_stay_strings():
    "Issue 26: a quoted `'[]'` or `'{}'` came back as an empty list or dict (the property test above found it)."
    text = "a: '[]'\nb: \"{}\"\nc: []\nd: {}\ne: [[], '[]', {}, '{}']\n"
    loaded = yaml.safe_load(text)
    values = {n.path: n.value for n in yaml_nodes(text) if n.kind not in KEYS}
    assert values == {"a": "[]", "b": "{}", "c": [], "d": {}, "e[0]": [], "e[1]": "[]", "e[2]": {}, "e[3]": "{}"}
    assert all(reach(loaded, n.steps) == n.value and type(reach(loaded, n.steps)) is type(n.value)
               for n in yaml_nodes(text) if n.kind not in KEYS)
    for note in (False, True):
        y, = read_yaml(text, note=note)
        assert [t for t, c in zip(y.tokens, y.containers) if c] == (["{}", "[]", "{}", "[]", "[]", "{}"] if not note
                                                                     else ["[]", "{}", "[]", "{}"])
    assert read_yaml("'[]'")[0].containers == [False] and read_yaml("[]")[0].containers == [True]


def test_empty_documents_keep_their_place():
    text = "---\n---\n# just a comment\n--- ''\n--- a\n--- {}\n--- []\n"
    grouped = yaml_documents(text)
    assert len(grouped) == len(list(yaml.safe_load_all(text))) == 6
    assert [[(n.token, n.kind) for n in d] for d in grouped] == \
        [[], [], [("", NodeKind.VALUE)], [("a", NodeKind.VALUE)], [("{}", NodeKind.VALUE)], [("[]", NodeKind.VALUE)]]
    assert yaml_nodes("") == [] and yaml_documents("# nothing\n") == []


def test_real_manifests_round_trip():
    files = sorted(DATA.rglob("*.y*ml"))
    assert len(files) >= 4, f"the manifests are missing from {DATA}"
    for f in files:
        text = f.read_text()
        loaded = list(yaml.safe_load_all(text))
        for n in yaml_nodes(text):
            if n.kind in KEYS: assert n.value in reach(loaded[n.doc], n.steps[:-1])
            else: assert reach(loaded[n.doc], n.steps) == n.value


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 2**31 - 1),
       max_depth=st.integers(0, 12), max_sibling=st.integers(0, 12), num_kinds=st.integers(1, 5))
def test_encoding_is_the_sum_of_three_rows(shape, seed, max_depth, max_sibling, num_kinds):
    g = torch.Generator().manual_seed(seed)
    pe = AdditiveTreePE(8, max_depth, max_sibling, num_kinds).double()
    assert pe.depth_emb.num_embeddings == max_depth + 1 and pe.sibling_emb.num_embeddings == max_sibling + 1
    depth = torch.randint(-1, max_depth + 1, shape, generator=g)
    sibling = torch.randint(0, max_sibling + 1, shape, generator=g)
    kind = torch.randint(0, num_kinds, shape, generator=g)
    with torch.no_grad():
        out = pe.embed(depth, sibling, kind)
        want = pe.depth_emb.weight[depth.clamp(min=0)] + pe.sibling_emb.weight[sibling] + pe.type_emb.weight[kind]
        want[depth < 0] = 0
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(0, 40), sibling=st.integers(0, 40))
def test_overflow_policies(depth, sibling):
    raising, truncating = AdditiveTreePE(4, 9, 7), AdditiveTreePE(4, 9, 7, overflow="truncate")
    truncating.load_state_dict(raising.state_dict())
    d, s, k = torch.tensor([depth]), torch.tensor([sibling]), torch.tensor([1])
    with torch.no_grad():
        inside = truncating.embed(d.clamp(max=9), s.clamp(max=7), k)
        torch.testing.assert_close(truncating.embed(d, s, k), inside)
        if depth <= 9 and sibling <= 7: torch.testing.assert_close(raising.embed(d, s, k), inside)
        else:
            what = f"depth {depth} at index (0,)" if depth > 9 else f"sibling index {sibling} at index (0,)"
            with pytest.raises(ValueError, match=r"overflow='truncate'") as e: raising.embed(d, s, k)
            assert what in str(e.value)


def test_module_checks_and_sinusoidal_init():
    with pytest.raises(ValueError, match="overflow must be"): AdditiveTreePE(8, 4, 4, overflow="clamp")
    with pytest.raises(ValueError, match="depth_init must be"): AdditiveTreePE(8, 4, 4, depth_init="zeros")
    with pytest.raises(ValueError, match="max_sibling must be >= 0"): AdditiveTreePE(8, 4, -1)
    pe = AdditiveTreePE(16, 5, 4, depth_init="sinusoidal", init_std=0.5)
    from treepe_nb.sequence import sinusoidal
    torch.testing.assert_close(pe.depth_emb.weight.detach(), sinusoidal(6, 16) * 2 ** 0.5 * 0.5)
    assert pe.depth_emb.weight.requires_grad                            # a starting point, still trained
    with pytest.raises(ValueError, match="node kind 4"): pe.embed(torch.tensor([0]), torch.tensor([0]), torch.tensor([4]))
    with pytest.raises(ValueError, match="depth -3"): pe.embed(torch.tensor([-3]), torch.tensor([0]), torch.tensor([0]))
    pos = Tree.from_sexpr("(a b c)").positions()
    with pytest.raises(TypeError, match="positions must be TreePositions"): pe(pos.depth, torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="kinds must be a tensor shaped like"): pe(pos, torch.zeros(2, dtype=torch.long))


def test_positions_from_any_tree_and_truncated_paths():
    """The module reads depth and sibling from TreePositions; truncated paths keep the node's own slot (before, the
    coordinates read on truncated positions could come out as [0, 0, 0, 0] instead of [0, 0, 1, 2])."""
    t = Tree.from_sexpr("(r (a x y z))")
    pe = AdditiveTreePE(8, 1, 4, num_kinds=1, overflow="truncate")
    kinds = torch.zeros(len(t), dtype=torch.long)
    kept = t.positions(max_depth=1, overflow="truncate")
    assert kept.sibling().tolist() == [0, 0, 0, 1, 2]
    with torch.no_grad():
        torch.testing.assert_close(pe(kept, kinds), pe.embed(torch.tensor([0, 1, 1, 1, 1]), torch.tensor([0, 0, 0, 1, 2]), kinds))
    with pytest.raises(ValueError, match="keep no step"): AdditiveTreePE(8, 0, 4, num_kinds=1, overflow="truncate")(
        t.positions(max_depth=0, overflow="truncate"), kinds)
    trees = [Tree.from_sexpr("(a (b c d) (e f (g h)))"), Tree.from_sexpr("(x y)")]
    batch = batch_positions(trees)
    out = AdditiveTreePE(8, 4, 4, num_kinds=1)(batch, torch.zeros(batch.shape, dtype=torch.long))
    assert out.shape == (2, len(trees[0]), 8) and (out[1, 2:] == 0).all()
    with pytest.raises(ValueError, match="max_depth=2"): AdditiveTreePE(8, 2, 4, num_kinds=1)(batch, torch.zeros(batch.shape, dtype=torch.long))


def test_vocabulary_round_trip_and_unknown_tokens():
    docs = read_yaml("a: x\nb: [x, y]\nc: {a: z}\n", note=True)
    vocab = YamlVocab.from_documents(docs)
    assert (vocab.pad, vocab.start, vocab.end) == (0, 1, 2) and vocab.specials[:3] == ("<pad>", "<start>", "<end>")
    assert vocab.keys == ["a", "b", "c"] and vocab.values == ["x", "y", "z"]      # by count, then by token
    ids = vocab.encode(docs[0])
    assert vocab.decode(ids) == docs[0].tokens
    assert vocab.encode(docs[0], special=True).tolist() == [vocab.start, *ids.tolist(), vocab.end]
    other = read_yaml("a: q\nd: x\n", note=True)
    assert vocab.encode(other[0]).tolist() == [vocab.key_ids["a"], vocab.unk_value, vocab.unk_key, vocab.value_ids["x"]]
    with pytest.raises(ValueError, match=r"token 1 \(VALUE at a, line 1\) has the value token 'q'"):
        vocab.encode(other[0], unknown="raise")
    assert YamlVocab.from_documents(docs, min_count=2).values == ["x"]
    batch = vocab.encode_batch([docs[0], other[0]])
    assert batch.tokens.shape == (2, len(docs[0])) and not batch.mask[1, len(other[0]):].any()
    assert (batch.tokens[1, len(other[0]):] == vocab.pad).all()
    assert batch.positions.depth[0].tolist() == docs[0].positions().depth.tolist()
    out = AdditiveTreePE(8, 4, 4)(batch.positions, batch.kinds)
    assert (out[1, len(other[0]):] == 0).all()
    with pytest.raises(ValueError, match="more than once"): YamlVocab(["a", "a"], [])
    with pytest.raises(TypeError, match="not a YamlTree"): vocab.encode_batch([None])


@cuda
def test_runs_on_cuda():
    dev = torch.device("cuda")
    pe = AdditiveTreePE(32, 8, 8).to(dev)
    doc, = read_yaml("a: [1, 2]\nb: {c: d}\n", note=True)
    pos, kinds = doc.positions(), doc.kinds
    out = pe(pos.to(dev), kinds.to(dev))
    assert out.device.type == "cuda"
    torch.testing.assert_close(out.cpu(), pe.cpu()(pos, kinds))


def test_compiles_as_one_graph():
    pe = AdditiveTreePE(16, 8, 8, overflow="truncate")
    args = (torch.tensor([[0, 3, 9, -1]]), torch.tensor([[0, 1, 12, 0]]), torch.tensor([[0, 1, 3, 0]]))
    compiled = torch.compile(pe.embed, fullgraph=True, backend="aot_eager")   # the checks are skipped while compiling
    torch.testing.assert_close(compiled(*args), pe.embed(*args))
    doc, = read_yaml("a: [1, 2]\nb: {c: d}\n", note=True)
    compiled = torch.compile(pe, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(doc.positions(), doc.kinds), pe(doc.positions(), doc.kinds))
