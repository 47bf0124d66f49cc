"""Chapter 08cb (function names from real code): name subtokens, masking, trivial bodies and duplicates counted, the
split by file, the tokenizer trained on the training split only and refused when a received file is bad, each token's
tree position, and batches of token sources with tree positions."""
from __future__ import annotations

import gzip, hashlib, json, os, re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("tokenizers")
pytest.importorskip("tree_sitter_python")
from treepe_nb.batching import Example, SeqVocab
from treepe_nb.runs import save_tokenizer
from treepe_nb.code_names import (JS_BUNDLE, MASK, SPLIT_NAMES, TokenCollator, code_corpus, code_name_examples,
                                  code_names_data, file_functions, function_tree, load_tokenizer, mask_name,
                                  name_subtokens, read_bundle, split_of, stdlib_corpus, stdlib_files,
                                  train_tokenizer)

MODULES = ["json/decoder.py", "json/encoder.py", "json/scanner.py", "textwrap.py", "shlex.py", "fnmatch.py", "glob.py",
           "heapq.py", "bisect.py", "colorsys.py", "difflib.py", "string.py", "ast.py", "calendar.py", "csv.py"]


@pytest.fixture(scope="module")
def small_corpus():
    return stdlib_corpus(MODULES, percent=(60, 20, 20))


@pytest.mark.parametrize("name, parts", [
    ("get_file_name", ["get", "file", "name"]), ("getFileName", ["get", "file", "name"]),
    ("HTTPServer", ["http", "server"]), ("parseJSON2Dict", ["parse", "json", "2", "dict"]),
    ("__init__", ["init"]), ("_$privateThing", ["private", "thing"]), ("x", ["x"]), ("__", [])])
def test_subtokens(name, parts):
    assert name_subtokens(name) == parts


def test_the_name_is_masked_everywhere_and_only_as_a_whole_word():
    text = 'def walk(t):\n    "walk it"\n    walk_all = [walk(c) for c in t]  # walk the children\n    return walk_all'
    found, dropped = file_functions(text, "python", "w.py")
    (fn,) = found
    assert fn.name == "walk" and fn.subtokens == ["walk"]
    assert "walk_all = [FUNCTION_NAME(c) for c in t]" in fn.text
    assert re.search(r"\bwalk\b", fn.text) is None and "#" not in fn.text and '"walk it"' not in fn.text
    kept = file_functions(text, "python", "w.py", docs=True)[0][0].text
    assert '"FUNCTION_NAME it"' in kept and "# FUNCTION_NAME the children" in kept
    assert mask_name("a.walker = walk", "walk") == f"a.walker = {MASK}"


def test_trivial_bodies_and_constructors_are_counted():
    text = ("class A:\n    def __init__(self): self.x = 1\n    def p(self): pass\n    def e(self): ...\n"
            "    def r(self): return 1\n    def d(self):\n        'doc'\n    def keep(self):\n        y = 1\n        return y\n")
    found, dropped = file_functions(text, "python")
    assert [f.name for f in found] == ["keep"]
    assert dropped == Counter({"a constructor": 1, "pass or ... only": 2, "a single return": 1, "docstring only": 1})
    found, _ = file_functions(text, "python", constructors=True)
    assert [f.name for f in found] == ["__init__", "keep"]


def test_duplicates_are_counted_within_and_across_splits():
    body = "def {}(x):\n    y = x * 2\n    return y\n"
    paths = [f"m{i}.py" for i in range(40)]
    texts = {p: body.format(f"f{i}") for i, p in enumerate(paths)}
    corpus = code_corpus(texts, "python")
    first = sorted(paths)[0]
    assert [fn.path for s in corpus.splits.values() for fn in s] == [first]
    across = sum(split_of(p) != split_of(first) for p in paths)
    assert corpus.dropped["duplicate body (in another split)"] == across
    assert corpus.dropped["duplicate body"] == len(paths) - 1 - across
    assert corpus.info["definitions"] == len(paths)


def test_split_by_file_is_disjoint_and_deterministic(small_corpus):
    paths = {s: {fn.path for fn in fns} for s, fns in small_corpus.splits.items()}
    assert all(paths[a].isdisjoint(paths[b]) for a in SPLIT_NAMES for b in SPLIT_NAMES if a < b)
    assert all(split_of(p, (60, 20, 20)) == s for s, ps in paths.items() for p in ps)
    assert all(paths.values()), {s: len(p) for s, p in paths.items()}
    again = stdlib_corpus(MODULES, percent=(60, 20, 20))
    assert again.fingerprint == small_corpus.fingerprint and small_corpus.fingerprint.startswith("sha256:")
    assert [fn.text for fn in again.splits["test"]] == [fn.text for fn in small_corpus.splits["test"]]


def test_stdlib_files_skip_the_tests():
    root, files, skipped = stdlib_files()
    assert files and not any(set(Path(f).parts[:-1]) & {"test", "tests", "idle_test", "site-packages"} for f in files)
    assert not any(Path(f).name.startswith("test_") for f in files)
    with pytest.raises(ValueError, match="is not a file stdlib_files reads"):
        stdlib_corpus(["test/test_json.py"])


def test_the_tokenizer_learns_from_the_training_split_only():
    word = "zyxwvutsrqzyxwvutsrq"                       # a word only the test file has, many times
    texts = {p: f"def f{i}(a):\n    b = a + {i}\n    return b * 3\n" for i, p in enumerate(f"m{i}.py" for i in range(60))}
    test_file = next(p for p in sorted(texts) if split_of(p) == "test")
    texts[test_file] = "def g(a):\n" + "".join(f"    {word}{i} = {word} + a\n" for i in range(50)) + "    return a\n"
    corpus = code_corpus(texts, "python")
    built, tokenizer = code_names_data(corpus, vocab_size=400, min_frequency=1)
    assert not any("zyxw" in t for t in tokenizer.get_vocab()), "a merge was learnt from the test split"
    leaky = train_tokenizer([fn.text for s in corpus.splits.values() for fn in s], 400, 1)
    assert any("zyxw" in t for t in leaky.get_vocab())   # the same training on every split would learn it
    assert len(tokenizer.encode(MASK).ids) == 1


def test_positions_match_the_tokens(small_corpus):
    tokenizer = train_tokenizer((fn.text for fn in small_corpus.splits["train"]), 1000)
    vocab = SeqVocab.from_counts(Counter(w for fn in small_corpus.splits["train"] for w in fn.subtokens))
    functions = small_corpus.splits["dev"][:40]
    examples, dropped = code_name_examples(functions, tokenizer, vocab, max_depth=48)
    assert len(examples) + sum(dropped.values()) == len(functions) and len(examples) > 20
    for e in examples:
        fn = next(f for f in functions if (f.path, f.line) == (e.meta["path"], e.meta["line"]))
        enc = tokenizer.encode(fn.text)
        assert len(e.src_pos) == len(e.src_ids) == len(enc.ids)
        assert (e.src_ids == np.asarray(enc.ids) + 4).all() and list(e.tgt) == fn.subtokens
        assert (e.src_pos.depth >= 1).all() and int(e.src_pos.paths.max()) <= 1 and e.src_pos.max_depth <= 48
    plain, _ = code_name_examples(functions[:5], tokenizer, vocab, lcrs=False)
    tree = function_tree(functions[0])
    assert plain[0].src_pos.depth.max() <= tree.depth.max() + 1


def test_a_batch_of_token_sources_carries_their_tree_positions(small_corpus):
    built, tokenizer = code_names_data(small_corpus, sizes=(30, 10, 10), vocab_size=600, kinds=True)
    examples = built["splits"][0][:6]
    batch = TokenCollator("tree", "sequence", max_depth=64)(examples)
    B, S = batch.src_ids.shape
    assert batch.src_pos.paths.shape == (B, S, 64) and batch.src_pos.plan is not None
    for b, e in enumerate(examples):
        L, K = e.src_pos.paths.shape
        assert (batch.src_pos.depth[b, :L] == e.src_pos.depth).all() and (batch.src_pos.depth[b, L:] == -1).all()
        assert (batch.src_pos.paths[b, :L, :K] == e.src_pos.paths).all() and (batch.src_kinds[b, :L] == torch.as_tensor(e.kinds)).all()
    assert (batch.src_pos.mask == (batch.src_ids != 0)).all()
    with pytest.raises(TypeError, match="TokenExamples with src_pos"):
        TokenCollator("tree", "sequence")([Example(examples[0].src, examples[0].tgt, examples[0].src_ids, examples[0].tgt_ids)])
    with pytest.raises(ValueError, match="over max_depth=2"):
        TokenCollator("tree", "sequence", max_depth=2)(examples)


def test_a_bad_or_oversized_tokenizer_is_refused(tmp_path):
    tokenizer = train_tokenizer(["def FUNCTION_NAME(x):\n    return x + 1\n"] * 5, 300, 1)
    path = save_tokenizer(tokenizer, tmp_path)
    assert load_tokenizer(tmp_path).encode("x + 1").ids == tokenizer.encode("x + 1").ids
    with pytest.raises(ValueError, match="over max_bytes=100"):
        load_tokenizer(path, max_bytes=100)
    with pytest.raises(ValueError, match="over max_vocab=10"):
        load_tokenizer(path, max_vocab=10)
    data = json.loads(path.read_text())
    for broken, message in ((b"\x00not json", "not JSON"), (json.dumps({"model": {"type": "Unigram", "vocab": {}}}), "not a BPE"),
                            (json.dumps({**data, "pre_tokenizer": None}), "pre-tokenizer must be ByteLevel")):
        path.write_bytes(broken if isinstance(broken, bytes) else broken.encode())
        with pytest.raises(ValueError, match=message): load_tokenizer(path)
    path.unlink(); os.symlink(tmp_path / "other.json", path)
    with pytest.raises(ValueError, match="not a plain file"): load_tokenizer(path)
    with pytest.raises(ValueError, match="symbolic link"): save_tokenizer(tokenizer, tmp_path)


def test_the_vendored_javascript_is_the_recorded_one():
    source = (JS_BUNDLE.parent / "SOURCE.md").read_text()
    assert hashlib.sha256(JS_BUNDLE.read_bytes()).hexdigest() in source
    files, packages = read_bundle()
    assert set(packages) == {"lodash", "three"} and all(p["licence"] == "MIT" for p in packages.values())
    assert all(p["tarball_sha256"] in source and p["integrity"] in source for p in packages.values())
    lodash = {k: v for k, v in files.items() if k.startswith("lodash/_base")}
    corpus = code_corpus(lodash, "javascript")
    names = {fn.name for s in corpus.splits.values() for fn in s}
    assert "baseSlice" in names and all(MASK in fn.text for s in corpus.splits.values() for fn in s)
    with pytest.raises(ValueError, match="max_bytes"): read_bundle(max_bytes=1000)


def test_the_builder_gives_a_task_dict_and_its_tokenizer():
    from treepe_nb.code_names import code_names_builder
    build = code_names_builder()
    built = build(3, (25, 5, 5), "dfs", language="javascript", vocab_size=400, max_depth=40)
    assert [len(s) for s in built["splits"]] == [25, 5, 5] and built["source"] == "tree" and built["target"] == "sequence"
    assert built["info"]["data_fingerprint"].startswith("sha256:") and built["info"]["max_depth"] == 40
    assert built["tokenizer"].get_vocab_size() == 400 and len(built["src_vocab"]) == 404
    assert all(e.src_pos.max_depth <= 40 for s in built["splits"] for e in s)
    with pytest.raises(ValueError, match="language must be one of"):
        build(0, None, "dfs", language="go")


def test_the_seed_draws_the_sample_and_nothing_else(small_corpus):
    a, tok_a = code_names_data(small_corpus, seed=0, sizes=(20, 5, 5), vocab_size=500)
    b, _ = code_names_data(small_corpus, seed=0, sizes=(20, 5, 5), vocab_size=500)
    c, tok_c = code_names_data(small_corpus, seed=1, sizes=(20, 5, 5), vocab_size=500)
    meta = lambda built: [e.meta for e in built["splits"][0]]
    assert meta(a) == meta(b) and meta(a) != meta(c)
    assert tok_a.to_str() == tok_c.to_str()             # the tokenizer comes from the whole training split


def test_a_users_file_gives_every_named_function(small_corpus):
    from treepe_nb.code_names import file_examples
    tokenizer = train_tokenizer((fn.text for fn in small_corpus.splits["train"]), 500)
    vocab = SeqVocab(["get", "size"])
    text = "class A:\n    def __init__(self): self.x = 1\n    def get_size(self): return self.x\n    def p(self): pass\n"
    functions, examples = file_examples(text, "python", tokenizer, vocab)
    assert [fn.name for fn in functions] == ["__init__", "get_size", "p"]
    assert [len(e.src_pos) for e in examples] == [len(tokenizer.encode(fn.text).ids) for fn in functions]
    assert list(examples[1].tgt_ids) == [vocab.encode(["get"])[0], vocab.encode(["size"])[0]]
    with pytest.raises(ValueError, match="cannot be read"):
        file_examples(text, "python", tokenizer, vocab, max_tokens=3)
