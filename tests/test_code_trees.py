"""Syntax trees of real code (`Tree.from_code`, chapter 1g), spans of `Tree.from_python_ast` (chapter 1a) and tree
positions for a tokenizer's tokens (`token_positions`, chapter 1h): properties on random offsets (against a brute
force), and the errors for bad input. Tests that read code through tree-sitter skip when the optional extra
`code` is not installed; the placement itself is also tested on `ast` trees, which need nothing."""
import sys
from functools import lru_cache

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from treepe_nb.trees import Tree
from treepe_nb import code_trees                                   # attaches Tree.from_code, Tree.subtree
from treepe_nb.token_positions import token_kinds, token_nodes, token_positions

torch.set_num_threads(1)

SOURCES = {
    "python": "import os\n\n@cache\ndef get_value(self, key='é'):\n    \"\"\"Docs: naïve 𝄞.\"\"\"\n"
              "    return self.cache.get(key, None) or [x ** 2 for x in range(3)]  # done\n",
    "javascript": "const f = (a, b) => { return a?.b ?? `t${b}`; };\nclass A { m(x) { return x + 1; } }\n",
    "java": "class A {\n  int f(int[] xs) {\n    int s = 0;\n    for (int x : xs) s += x; // sum\n"
            "    return s;\n  }\n}\n",
    "go": "package p\n\nfunc Sum(xs []int) (s int) {\n\tfor _, x := range xs {\n\t\ts += x\n\t}\n\treturn\n}\n",
}
PY_AST = ("def f(a, *b, c=1, **d):\n    g = lambda y: y + a  # ü\n"
          "    return {k: v for k, v in d.items() if k}, f'{a!r:>{c}}'\n")


@lru_cache(maxsize=None)
def code_tree(language:str) -> Tree:
    pytest.importorskip("tree_sitter")
    return Tree.from_code(SOURCES[language], language)


@lru_cache(maxsize=None)
def ast_tree() -> Tree:
    return Tree.from_python_ast(PY_AST)


def brute_force(tree, offsets, trim=True):
    "The narrowest node covering each (trimmed) token, ties to the deeper one, comparing every token with every node."
    from treepe_nb.token_positions import _trimmed
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    s, e = (_trimmed(tree.source, off[:, 0], off[:, 1]) if trim else (off[:, 0], off[:, 1]))
    sp = tree.spans
    covers = (sp[None, :, 0] <= s[:, None]) & (e[:, None] <= sp[None, :, 1]) & (sp[None, :, 1] > sp[None, :, 0])
    key = np.where(covers, (sp[:, 1] - sp[:, 0]) * (len(tree) + 1) - tree.depth, np.iinfo(np.int64).max)
    return np.where(off[:, 0] < off[:, 1], key.argmin(1), -1)


@st.composite
def offsets_for(draw, length:int, max_tokens:int=30):
    "Random (start, end) pairs inside a text of `length` characters, empty ones included."
    pairs = []
    for _ in range(draw(st.integers(0, max_tokens))):
        s = draw(st.integers(0, length)); pairs.append((s, draw(st.integers(s, min(length, s + 12)))))
    return pairs


def check_placement(tree, offsets):
    node = token_nodes(tree, offsets)
    assert node.tolist() == brute_force(tree, offsets).tolist()
    p = token_positions(tree, offsets)
    real = torch.from_numpy(node >= 0)
    assert (p.depth[~real] == 0).all() and (p.paths[~real] == -1).all()          # special tokens: the root
    rows = torch.cat([p.depth[:, None], p.paths], 1)[real]
    assert len(torch.unique(rows, dim=0)) == len(rows)                            # distinct tokens, distinct positions
    b = token_positions(tree, offsets, lcrs=True, n=2, special="mask")
    assert (b.depth[real] >= 0).all() and (b.depth[~real] == -1).all() and (b.paths <= 1).all()
    rows = torch.cat([b.depth[:, None], b.paths], 1)[real]
    assert len(torch.unique(rows, dim=0)) == len(rows)


@pytest.mark.parametrize("language", sorted(SOURCES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_tokens_sit_on_the_smallest_covering_node(language, data):
    tree = code_tree(language)
    check_placement(tree, data.draw(offsets_for(len(tree.source))))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_placement_on_ast_trees(data):
    tree = ast_tree()
    check_placement(tree, data.draw(offsets_for(len(tree.source))))


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_batch_is_its_items_padded(data):
    trees = [code_tree("python"), code_tree("go"), ast_tree()]
    offsets = [data.draw(offsets_for(len(t.source), 12)) for t in trees]
    batch = token_positions(trees, offsets, special="mask")
    for b, (t, o) in enumerate(zip(trees, offsets)):
        one = token_positions(t, o, special="mask", max_depth=batch.max_depth)
        assert batch[b, :len(o)] == one
        assert (batch.depth[b, len(o):] == -1).all()
    kinds = token_kinds(trees, offsets, {}, unknown_kind=3, special_kind=1)
    assert kinds.shape == batch.shape
    assert ((kinds == 1) == ~batch.mask).all() and ((kinds == 3) == batch.mask).all()


def test_pieces_of_one_leaf_are_its_children_in_order():
    tree = code_tree("python")
    start = tree.source.index("get_value")
    pieces = [(start, start + 3), (start + 3, start + 4), (start + 4, start + 9)]
    p = token_positions(tree, pieces)
    leaf = int(token_nodes(tree, [(start, start + 9)])[0])
    assert tree.labels[leaf] == "get_value" and tree.labels[tree.parent[leaf]] == "identifier"
    d = int(tree.depth[leaf])
    assert p.depth.tolist() == [d + 1] * 3
    assert p.paths[:, d].tolist() == [0, 1, 2]
    assert (p.paths[:, :d] == tree.positions().paths[leaf, :d]).all()
    with pytest.raises(ValueError, match=r"token 2 takes slot 2 at depth \d+, but n=2 allows slots 0..1 "
                                         r"\(it is token 2 of the 3 on node \d+ \('get_value'\)\); pass lcrs=True"):
        token_positions(tree, pieces, n=2)
    assert token_positions(tree, pieces, n=3).depth.tolist() == [d + 1] * 3


def test_leaf_spans_slice_back_and_nest():
    for language in SOURCES:
        tree = code_tree(language)
        s, par = tree.spans, tree.parent
        assert (s[1:, 0] >= s[par[1:], 0]).all() and (s[1:, 1] <= s[par[1:], 1]).all()
        leaves = np.flatnonzero(np.bincount(par[1:], minlength=len(tree)) == 0)
        assert all(tree.source[s[i, 0]:s[i, 1]] == tree.labels[i] for i in leaves)
    t = ast_tree()
    names = [i for i, label in enumerate(t.labels) if label in ("a", "b", "c", "d", "g", "y", "k", "v", "items")]
    assert names and all(PY_AST[t.spans[i, 0]:t.spans[i, 1]] == t.labels[i] for i in names)


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab1 ()[]{}=+:;,.\n\t'\"é#")), max_size=40),
       language=st.sampled_from(sorted(SOURCES)))
def test_any_text_reads_or_fails_cleanly(text, language):
    pytest.importorskip("tree_sitter")
    tree = Tree.from_code(text, language, errors="keep")
    s, par = tree.spans, tree.parent
    assert s[0].tolist() == [0, len(text)]
    assert (s[1:, 0] >= s[par[1:], 0]).all() and (s[1:, 1] <= s[par[1:], 1]).all()
    leaves = np.flatnonzero((np.bincount(par[1:], minlength=len(tree)) == 0) & (s[:, 1] > s[:, 0]))
    assert all(text[s[i, 0]:s[i, 1]] == tree.labels[i] for i in leaves if i > 0)   # the root covers the whole text
    try: Tree.from_code(text, language)
    except ValueError as e: assert f"invalid {language} at line " in str(e) and "errors='keep'" in str(e)
    check_placement(tree, [(i, min(len(text), i + 3)) for i in range(0, len(text), 2)])


def test_bad_inputs_name_what_is_wrong():
    tree = code_tree("python")
    n = len(tree.source)
    with pytest.raises(ValueError, match="unknown language 'cobol': supported are go, java, javascript, python"):
        Tree.from_code("x", "cobol")
    with pytest.raises(ValueError, match=rf"token 1 has offsets \(0, {n + 1}\): the source has {n} characters"):
        token_nodes(tree, [(0, 1), (0, n + 1)])
    with pytest.raises(ValueError, match=r"token 0 has offsets \(4, 2\): its start is after its end"):
        token_positions(tree, [(4, 2)])
    with pytest.raises(ValueError, match=r"token 0 has offsets \(-1, 2\)"):
        token_positions(tree, np.array([[-1, 2]]))
    with pytest.raises(TypeError, match="offsets must be integers"):
        token_positions(tree, torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="shaped \\[L, 2\\]"):
        token_positions(tree, [(0, 1, 2)])
    with pytest.raises(ValueError, match="tree 1: token 0 has offsets"):
        token_positions([tree, tree], [[(0, 1)], [(0, n + 5)]])
    with pytest.raises(ValueError, match="the tree has no spans"):
        token_positions(Tree.from_sexpr("(a b)"), [(0, 1)])
    with pytest.raises(ValueError, match="outside the tree's text"):
        fn = __import__("ast").parse(PY_AST).body[0].body[0]
        token_nodes(Tree.from_python_ast(fn, text=PY_AST), [(0, 3)])
    with pytest.raises(ValueError, match=r"max_depth=1; raise max_depth, or pass overflow='truncate'"):
        token_positions(tree, [(0, 6)], max_depth=1)
    with pytest.raises(TypeError, match="max_depth must be an int"):
        token_positions(tree, [(0, 6)], max_depth=1.5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        token_positions(tree, [(0, 6)], n=0)
    with pytest.raises(ValueError, match="overflow must be 'raise' or 'truncate'"):
        token_positions(tree, [(0, 6)], overflow="wrap")


def test_missing_packages_say_what_to_install(monkeypatch):
    pytest.importorskip("tree_sitter")
    monkeypatch.setitem(code_trees.CODE_LANGUAGES, "nosuch", "tree_sitter_nosuch_grammar")
    with pytest.raises(ModuleNotFoundError, match="pip install tree-sitter-nosuch-grammar"):
        Tree.from_code("x", "nosuch")
    monkeypatch.setitem(sys.modules, "tree_sitter", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install -e '\.\[code\]'"):
        Tree.from_code("x", "python")


def test_deep_code_and_budgets():
    pytest.importorskip("tree_sitter")
    deep = Tree.from_code("x = " + "(" * 3000 + "1" + ")" * 3000, "python")
    assert int(deep.depth.max()) > 3000
    one = deep.source.index("1")
    p = token_positions(deep, [(one, one + 1)])                                    # the innermost `1`
    assert int(p.depth[0]) == int(deep.depth.max())
    with pytest.raises(ValueError, match="is at depth 11 > max_depth=10; pass a larger max_depth"):
        Tree.from_code("x = " + "(" * 20 + "1" + ")" * 20, "python", max_depth=10)
    with pytest.raises(ValueError, match="the source has more than max_nodes=3 nodes"):
        Tree.from_code("x = 1 + 2", "python", max_nodes=3)
