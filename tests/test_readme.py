"""The README as a newcomer meets it: short, the own-model quick start near the top, every Python snippet valid when
pasted into a plain `python` prompt (line by line, as the REPL reads it) and the quick start run both ways, and its
table of encodings the registry's own facts."""
import code, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SNIPPETS = re.findall(r"```python\n(.*?)```", README, re.S)


class PastedConsole(code.InteractiveConsole):
    "A REPL fed one line at a time, as a paste is; `run=False` compiles every statement without running it."
    def __init__(self, run:bool):
        super().__init__({"__name__": "__console__"}); self.run, self.errors = run, []
    def runcode(self, compiled):
        if self.run: super().runcode(compiled)
    def showsyntaxerror(self, filename=None, **kw): self.errors.append(f"SyntaxError: {sys.exc_info()[1]}")
    def showtraceback(self): self.errors.append(f"{sys.exc_info()[0].__name__}: {sys.exc_info()[1]}")


def paste(snippet:str, run:bool) -> PastedConsole:
    console, more = PastedConsole(run), False
    for line in snippet.splitlines(): more = console.push(line)
    if more: console.push("")                                  # the Enter after a paste that ends in a block
    return console


def test_the_readme_is_short_and_starts_with_your_own_model():
    lines = README.splitlines()
    assert len(lines) <= 245, len(lines)          # 220 before the real-code example and the two extras (issue 71)
    first = next(i for i, l in enumerate(lines, 1) if l.startswith("```python"))
    assert first < 80 and "rotate_queries_and_keys" in SNIPPETS[0], (first, SNIPPETS[0][:200])


def test_every_python_snippet_pastes_into_a_prompt():
    assert len(SNIPPETS) >= 2
    for snippet in SNIPPETS: assert paste(snippet, run=False).errors == [], snippet


def test_the_quick_start_runs_pasted_and_as_a_script(tmp_path):
    console = paste(SNIPPETS[0], run=True)
    assert console.errors == [], console.errors
    out, x = console.locals["out"], console.locals["x"]
    assert tuple(out.shape) == (2, 4, 13, 32) and tuple(x.shape) == (2, 13, 128)
    (tmp_path / "quick.py").write_text(SNIPPETS[0])
    done = subprocess.run([sys.executable, "quick.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_table_of_encodings_is_the_registry():
    "The built-in encodings, read in a fresh process (tests and notebooks of this one register their own)."
    import json
    done = subprocess.run([sys.executable, "-c", "import json; from treepe_nb import ENCODINGS; print(json.dumps("
                           "{e.name: [e.family, list(e.reads)] for e in ENCODINGS.values()}))"], capture_output=True, text=True)
    builtin = {k: (f, tuple(r)) for k, (f, r) in json.loads(done.stdout).items()}
    table = README[README.index("| name | family | reads |"):]
    rows = [l.split("|")[1:4] for l in table.splitlines()[2:] if l.startswith("| `")]
    got = {n.strip().strip("`"): (f.strip(), tuple(r.strip() for r in reads.split(","))) for n, f, reads in rows}
    assert got == builtin


def test_the_sidebar_groups_the_chapters_by_part():
    "The site's sidebar: one captioned toctree per part, in chapter order, every page in exactly one (tools/docs.py)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("docs", ROOT / "tools" / "docs.py")
    docs = importlib.util.module_from_spec(spec); spec.loader.exec_module(docs)
    nbs = docs.notebooks()[1:]
    names = [docs.page_name(p) for p in nbs]
    trees = docs._toctrees(nbs, names)
    captions = re.findall(r":caption: (.*)", trees)
    assert captions == list(dict.fromkeys(docs.part(p) for p in nbs)) and "More" not in captions, captions
    assert captions[:3] == ["Sequences", "Trees and positions", "Tree encodings"] and captions[-2:] == ["Development", "Guide"]
    listed = [l for l in trees.splitlines() if l and not l.startswith(("```", ":"))]
    assert listed == names
    assert docs.part(next(p for p in nbs if p.stem == "06a_own_transformer")) == "Models"
    assert docs.part(next(p for p in nbs if p.stem == "13_which_encoding")) == "Guide"


def test_the_real_code_example_runs(tmp_path):
    "The README's real-code example (tree-sitter, a tokenizer's offsets, a RoBERTa with the stack encoding) as a script, offline."
    import os
    snippet = next(s for s in SNIPPETS if "Tree.from_code" in s)
    (tmp_path / "real_code.py").write_text(snippet + "print((tuple(pos.shape), tuple(out.shape)))\n")
    done = subprocess.run([sys.executable, "real_code.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    (b, l), shape = eval(done.stdout.strip().splitlines()[-1])
    assert b == 1 and shape == (1, l, 64) and l > 5, done.stdout
