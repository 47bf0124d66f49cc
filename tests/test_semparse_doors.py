"""The doors of the semantic-parsing data (issue 52, items 6 and 8): a damaged or hostile GEO/ATIS file, reached through
`semparse_splits` (the tasks' `data=`), is one `ValueError` that names the file, the entry or line, and what is wrong;
a logical form is refused past its budgets (`max_form_chars`, `max_form_depth`) before anything large is built."""
import json
import os
import subprocess
import sys

import pytest

from treepe_nb.semparse import atis_form, geo_form, read_atis_tsv, semparse_splits
from treepe_nb.tasks import make_task

GOOD = {"logic": ["( A , _capital ( A , _stateid ( var0 ) ) )"], "query-split": "train",
        "sentences": [{"question-split": "train", "text": "capital of var0", "variables": {"var0": "texas"}}]}
DEEP_GEO = "( A , " + "_f ( " * 100_000 + "A" + " )" * 100_000 + " )"
DEEP_ATIS = "( f " * 100_000 + "a" + " )" * 100_000
LONG_GEO = "( A , " + "a " * 5_000_000 + ")"                       # 10 MB, one constant
LONG_ATIS = "( f " + "a " * 5_000_000 + ")"


def entry(**changes):
    "Entry 1 of the file (after a good entry 0), with fields changed; None drops a field."
    return [GOOD, {k: v for k, v in {**GOOD, **changes}.items() if v is not None}]


def asked(**changes):
    "Entry 1 with its one question's fields changed; None drops a field."
    q = {k: v for k, v in {**GOOD["sentences"][0], **changes}.items() if v is not None}
    return entry(sentences=[q])


# case -> (file content: JSON-able, str or bytes; where the message points; what it says)
GEO = {
    "not UTF-8": (b'[{"logic": ["\xff"]}]', None, "not UTF-8 text"),
    "not JSON": ("[{'logic': 1}]", None, "not JSON"),
    "empty file": ("", None, "not JSON"),
    "JSON 100,000 deep": ("[" * 100_000 + "]" * 100_000, None, "nested too deeply"),
    "a 5,000-digit number": ("[" + "1" * 5000 + "]", None, "not JSON"),
    "top level a mapping": ({"entries": [GOOD]}, None, "the top level must be a list of entries, got a mapping"),
    "top level a number": (5, None, "the top level must be a list of entries, got a number"),
    "top level null": (None, None, "the top level must be a list of entries, got null"),
    "an entry that is a number": ([GOOD, 5], "entry 1", "an entry must be a mapping"),
    "an entry that is a string": ([GOOD, "logic"], "entry 1", "an entry must be a mapping"),
    "an entry that is a list": ([GOOD, [GOOD]], "entry 1", "an entry must be a mapping"),
    "an entry that is null": ([GOOD, None], "entry 1", "got null"),
    "no 'logic'": (entry(logic=None), "entry 1", "no 'logic'"),
    "'logic': []": (entry(logic=[]), "entry 1", "'logic' is empty"),
    "'logic': [null]": (entry(logic=[None]), "entry 1", "logic[0] must be a form (a string), got null"),
    "'logic': [5]": (entry(logic=[5]), "entry 1", "logic[0] must be a form (a string), got a number (5)"),
    "'logic': a string": (entry(logic="( A , _state ( A ) )"), "entry 1", "'logic' must be a list of forms"),
    "'logic': a mapping": (entry(logic={"0": "( A )"}), "entry 1", "'logic' must be a list of forms"),
    "'logic': ['']": (entry(logic=[""]), "entry 1, logic[0]", "an empty GeoQuery form"),
    "a form left open": (entry(logic=["( A , _state ( A )"]), "entry 1, logic[0]", "1 parentheses left open"),
    "a form with text after its end": (entry(logic=["( A , _state ( A ) ) )"]), "entry 1, logic[0]", "text after the form's end"),
    "no 'sentences'": (entry(sentences=None), "entry 1", "no 'sentences'"),
    "'sentences': []": (entry(sentences=[]), "entry 1", "'sentences' is empty"),
    "'sentences': a string": (entry(sentences="capital of texas"), "entry 1", "'sentences' must be a list of questions"),
    "a question that is a number": (entry(sentences=[5]), "entry 1, sentences[0]", "a question must be a mapping"),
    "a question that is null": (entry(sentences=[None]), "entry 1, sentences[0]", "a question must be a mapping"),
    "no 'question-split'": (asked(**{"question-split": None}), "entry 1, sentences[0]", "no 'question-split'"),
    "'question-split': 5": (asked(**{"question-split": 5}), "entry 1, sentences[0]", "'question-split' must be one of"),
    "'question-split': ''": (asked(**{"question-split": ""}), "entry 1, sentences[0]", "'question-split' is empty"),
    "an unknown split": (asked(**{"question-split": "validation"}), "entry 1, sentences[0]", "unknown split 'validation'"),
    "no 'text'": (asked(text=None), "entry 1, sentences[0]", "no 'text'"),
    "'text': 5": (asked(text=5), "entry 1, sentences[0]", "'text' must be the question (a string), got a number (5)"),
    "'text': ' '": (asked(text=" "), "entry 1, sentences[0]", "'text' is empty"),
    "'text': a list": (asked(text=["capital"]), "entry 1, sentences[0]", "'text' must be the question (a string), got a list"),
    "no 'variables'": (asked(variables=None), "entry 1, sentences[0]", "no 'variables'"),
    "'variables': a list": (asked(variables=["texas"]), "entry 1, sentences[0]", "'variables' must be a mapping"),
    "'variables': {var0: 5}": (asked(variables={"var0": 5}), "entry 1, sentences[0]", "variables['var0'] must be the name it stands for"),
    "'variables': {var0: null}": (asked(variables={"var0": None}), "entry 1, sentences[0]", "variables['var0'] must be the name"),
    "'variables': {var0: ''}": (asked(variables={"var0": ""}), "entry 1, sentences[0]", "variables['var0'] is empty"),
    "a name holding ')'": (asked(variables={"var0": "texas ) , _f ( x"}), "entry 1, sentences[0]", "a token of the forms' syntax"),
    "a placeholder '('": (asked(variables={"(": "x"}), "entry 1, sentences[0]", "the placeholder '(' is a token of the forms' syntax"),
    "a name 12,000 characters long": (asked(variables={"var0": "a " * 6000}), "entry 1, sentences[0]",
                                      "logic[0] with its variables filled in: the form has"),
    "a form 10 MB long": (entry(logic=[LONG_GEO]), "entry 1, logic[0]",
                          f"the form has {len(LONG_GEO):,} characters, over max_form_chars=10,000"),
    "a form 100,000 deep": (entry(logic=[DEEP_GEO]), "entry 1, logic[0]", "over max_form_chars=10,000"),
    "a form 200 deep": (entry(logic=["( A , " + "\\+ " * 200 + "_state ( A ) )"]), "entry 1, logic[0]",
                        "token 103 opens a node at depth 101, deeper than max_form_depth=100"),
}


def _write(path, content):
    if isinstance(content, bytes): path.write_bytes(content)
    elif isinstance(content, str): path.write_text(content)
    else: path.write_text(json.dumps(content))
    return path


def _refused(call, path, where, what):
    "The call raises one plain ValueError, one line, naming the file, the entry or line, and what was wrong."
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert type(info.value) is ValueError, type(info.value)
    assert "\n" not in message and len(message) < 400, message
    assert message.startswith(str(path)), message
    if where: assert f"{path}, {where}:" in message, message
    assert what in message, message
    return message


@pytest.mark.parametrize("case", GEO)
def test_damaged_geo_file(case, tmp_path):
    content, where, what = GEO[case]
    path = _write(tmp_path / "geography-logic.txt", content)
    _refused(lambda: semparse_splits("geo", tmp_path), path, where, what)
    if case != "a name 12,000 characters long":                    # the one case that is the names' alone (next test)
        _refused(lambda: semparse_splits("geo", tmp_path, entities="placeholders"), path, where, what)


def test_placeholders_skip_the_names_but_not_their_checks(tmp_path):
    "With entities='placeholders' the names are not filled in, so a long name is no longer part of the form."
    _write(tmp_path / "geography-logic.txt", asked(variables={"var0": "a " * 6000}))
    splits, _ = semparse_splits("geo", tmp_path, entities="placeholders")
    assert len(splits["train"]) == 2


def test_geo_through_the_task(tmp_path):
    path = _write(tmp_path / "geography-logic.txt", entry(logic=[None]))
    _refused(lambda: make_task("geo", data=str(tmp_path)), path, "entry 1", "logic[0] must be a form")


def test_geo_through_the_command(tmp_path):
    path = _write(tmp_path / "geography-logic.txt", entry(logic=[DEEP_GEO]))
    command = os.path.join(os.path.dirname(sys.executable), "treepe-train")
    run = subprocess.run([command, "--task", "geo", "--task-option", f"data={tmp_path}",
                          "--steps", "1", "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    err = run.stderr.strip().splitlines()
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert f"{path}, entry 1, logic[0]: the form has" in err[-1], run.stderr[-2000:]


UW = {s: f"flights {s} one ||| SELECT 1\nflights {s} two ||| SELECT 2\n" for s in ("train", "dev", "test")}
LOGIC = "flights train one ||| ( lambda $0 e ( flight $0 ) )\n"


# case -> (file, line 2 of it (atis-logic.txt: after a good line 1; a UW file: replaces its line 2), line, what)
ATIS = {
    "no '|||'": ("atis-logic.txt", "flights dev one ( lambda $0 e ( flight $0 ) )", 2, "no '|||'"),
    "two '|||'": ("atis-logic.txt", "flights dev one ||| ( flight $0 ) ||| ( flight $1 )", 2, "more than one '|||'"),
    "an empty question": ("atis-logic.txt", " ||| ( lambda $0 e ( flight $0 ) )", 2, "an empty question"),
    "an empty form": ("atis-logic.txt", "flights dev one ||| ", 2, "an empty ATIS form"),
    "a ')' that closes nothing": ("atis-logic.txt", "flights dev one ||| ( flight $0 ) )", 2, "')' closes nothing"),
    "a ':' without a type": ("atis-logic.txt", "flights dev one ||| ( from $0 denver : )", 2, "':' must be followed by a type"),
    "a form 10 MB long": ("atis-logic.txt", "flights dev one ||| " + LONG_ATIS, 2, "over max_form_chars=10,000"),
    "a form 100,000 deep": ("atis-logic.txt", "flights dev one ||| " + DEEP_ATIS, 2, "over max_form_chars=10,000"),
    "a form 150 deep": ("atis-logic.txt", "flights dev one ||| " + "( f " * 150 + "a" + " )" * 150, 2,
                        "token 202 opens a node at depth 101, deeper than max_form_depth=100"),
    "a UW line without '|||'": ("atis.uw.dev.txt", "flights dev two SELECT 2", 2, "no '|||'"),
}


def _atis_folder(tmp_path, name, line):
    for s, text in UW.items(): (tmp_path / f"atis.uw.{s}.txt").write_text(text)
    (tmp_path / "atis-logic.txt").write_text(LOGIC)
    path = tmp_path / name
    if name == "atis-logic.txt": path.write_text(LOGIC + line + "\n")
    else: path.write_text(path.read_text().splitlines()[0] + "\n" + line + "\n")
    return path


@pytest.mark.parametrize("case", ATIS)
def test_damaged_atis_file(case, tmp_path):
    name, line, n, what = ATIS[case]
    path = _atis_folder(tmp_path, name, line)
    _refused(lambda: semparse_splits("atis", tmp_path), path, f"line {n}", what)


def test_atis_files_that_are_not_text(tmp_path):
    path = _atis_folder(tmp_path, "atis-logic.txt", "flights dev one ||| ( flight $0 )")
    path.write_bytes(LOGIC.encode() + b"flights \xff ||| ( flight $0 )\n")
    _refused(lambda: semparse_splits("atis", tmp_path), path, None, "not UTF-8 text")
    path.unlink(); path.mkdir()                                   # a folder where the file should be
    _refused(lambda: semparse_splits("atis", tmp_path), path, None, "not a regular file")


TSV = {                                  # case -> (line 2 of atis_dev.tsv, what)
    "no tab": ("what is fb0 fb0", "no tab between the question and its form"),
    "two tabs": ("what is fb0\tfb0\tfb1", "more than one tab"),
    "three tabs": ("a\tb\tc\td", "more than one tab (3;"),
    "an empty question": (" \tfb0", "an empty question"),
    "an empty form": ("what is fb0\t ", "an empty ATIS form"),
    "a form left open": ("flights from ci0\t( lambda $0 e ( from $0 ci0 )", "1 parentheses left open"),
    "two forms": ("flights\t( flight $0 ) ( flight $1 )", "more than one form"),
    "a form 10 MB long": ("what\t" + LONG_ATIS, f"the form has {len(LONG_ATIS):,} characters, over max_form_chars=10,000"),
    "a form 100,000 deep": ("what\t" + DEEP_ATIS, "over max_form_chars=10,000"),
    "a form 150 deep": ("what\t" + "( f " * 150 + "a" + " )" * 150, "token 202 opens a node at depth 101"),
}


def _tsv_folder(tmp_path, line):
    for s in ("train", "dev", "test"): (tmp_path / f"atis_{s}.tsv").write_text("what is fb0\tfb0\n")
    path = tmp_path / "atis_dev.tsv"
    path.write_text("what is fb0\tfb0\n" + line + "\n")
    return path


@pytest.mark.parametrize("case", TSV)
def test_damaged_tsv_file(case, tmp_path):
    line, what = TSV[case]
    path = _tsv_folder(tmp_path, line)
    _refused(lambda: semparse_splits("atis", tmp_path, source="dong-lapata"), path, "line 2", what)
    _refused(lambda: read_atis_tsv(path), path, "line 2", what)


def test_tsv_files_that_are_not_text(tmp_path):
    path = _tsv_folder(tmp_path, "what is fb0\tfb0")
    path.write_bytes(b"what is fb0\tfb0\n\xc3(\tfb0\n")
    _refused(lambda: read_atis_tsv(path), path, None, "not UTF-8 text")
    path.unlink(); path.mkdir()
    _refused(lambda: read_atis_tsv(path), path, None, "not a regular file")
    _refused(lambda: semparse_splits("atis", tmp_path, source="dong-lapata"), path, None, "not a regular file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_is_refused_not_read(tmp_path):
    "A FIFO would block a reader forever: it is refused before it is opened."
    path = tmp_path / "atis_dev.tsv"
    _tsv_folder(tmp_path, "what is fb0\tfb0")
    path.unlink(); os.mkfifo(path)
    _refused(lambda: read_atis_tsv(path), path, None, "not a regular file")
    _refused(lambda: semparse_splits("atis", tmp_path, source="dong-lapata"), path, None, "not a regular file")
    geo = tmp_path / "geo"; geo.mkdir(); os.mkfifo(geo / "geography-logic.txt")
    _refused(lambda: semparse_splits("geo", geo), geo / "geography-logic.txt", None, "not a regular file")


@pytest.mark.parametrize("parse,deep", [(geo_form, DEEP_GEO), (atis_form, DEEP_ATIS)], ids=["geo", "atis"])
def test_budgets_of_a_form(parse, deep):
    with pytest.raises(ValueError, match=f"the form has {len(deep):,} characters, over max_form_chars=10,000"):
        parse(deep)
    with pytest.raises(ValueError, match="opens a node at depth 101, deeper than max_form_depth=100"):
        parse(deep, max_form_chars=10**7)                          # cut off at the limit, nothing large built
    tree = parse(deep, max_form_chars=10**7, max_form_depth=10**6)  # read without recursion when the user allows it
    assert len(tree) == (100_003 if parse is geo_form else 100_001)
    assert int(tree.parent[-1]) == len(tree) - 2                    # a chain: the leaf under the innermost node


@pytest.mark.parametrize("name,value", [("max_form_chars", 0), ("max_form_chars", True), ("max_form_chars", "10"),
                                        ("max_form_depth", -1), ("max_form_depth", 1.5), ("max_form_depth", None)])
def test_budgets_are_checked(name, value, tmp_path):
    for call in (lambda: geo_form("( A , _state ( A ) )", **{name: value}), lambda: atis_form("fb0", **{name: value}),
                 lambda: semparse_splits("geo", **{name: value}), lambda: read_atis_tsv(tmp_path / "x.tsv", **{name: value})):
        with pytest.raises(ValueError, match=f"{name} must be an int >="):
            call()


def test_the_vendored_data_reads_as_before():
    splits, report = semparse_splits("geo")
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [549, 49, 279]
    assert report == {}
