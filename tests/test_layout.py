"""The layout of the package, read with `ast` from `treepe_nb/*.py` (nbdev's `_modidx.py` skipped): no module imports a
private name (leading underscore) from another module of the package, the modules' imports (module level and inside
functions) form no cycle, no module imports one of a later chapter beyond the listed exceptions, no module is
longer than 600 lines, and a module's `python -m` guard comes after its last module-level statement. Each rule is a
small function over a dict of module sources, checked on synthetic examples first (so that the rule can fail), then
on the package itself."""
from __future__ import annotations

import ast, re
from pathlib import Path

import pytest

PACKAGE = "treepe_nb"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_LINES = 600
INIT = "__init__"


def package_sources(root:Path=ROOT) -> dict[str, str]:
    "Module name -> source of every module of the package (`__init__` included, `_modidx` skipped)."
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(root.glob("*.py")) if p.name != "_modidx.py"}


def package_imports(source:str, modules:set[str]) -> list[tuple[str, str|None, int]]:
    """(module imported, name imported from it or None for the module itself, line) for every import of a module of
    the package, at any depth (module level, functions, methods): `from .x import n`, `from treepe_nb.x import n`,
    `from . import x`, `from treepe_nb import x`, `import treepe_nb.x`. A name imported from the package itself that
    is not a module counts as imported from `__init__`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == PACKAGE and len(parts) > 1 and parts[1] in modules: out.append((parts[1], None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 1: parts = (node.module or "").split(".") if node.module else []
            elif node.level == 0 and node.module and node.module.split(".")[0] == PACKAGE: parts = node.module.split(".")[1:]
            else: continue
            if parts:                                                  # from .x import n / from treepe_nb.x import n
                if parts[0] in modules: out.extend((parts[0], a.name, node.lineno) for a in node.names)
            else:                                                      # from . import x / from treepe_nb import x
                out.extend((a.name, None, node.lineno) if a.name in modules else (INIT, a.name, node.lineno)
                           for a in node.names)
    return out


def private_imports(sources:dict[str, str]) -> dict[str, list[str]]:
    "Per module, the private names it imports from another module of the package (dunder names are not private)."
    modules, bad = set(sources), {}
    for name, src in sources.items():
        for target, imported, line in package_imports(src, modules):
            if target == name or imported is None: continue
            if imported.startswith("_") and not (imported.startswith("__") and imported.endswith("__")):
                bad.setdefault(name, []).append(f"line {line}: {imported} from {target}")
    return bad


def import_cycle(sources:dict[str, str]) -> list[str]|None:
    "One cycle of the graph 'module -> modules it imports' (as `[a, b, ..., a]`), or None if there is none."
    modules = set(sources)
    graph = {m: sorted({t for t, _, _ in package_imports(src, modules) if t != m}) for m, src in sources.items()}
    state, path = {}, []                                               # state: 1 on the current path, 2 finished
    def visit(m):                                                      # the graph has a dozen nodes: recursion is fine
        state[m] = 1; path.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1: return path[path.index(t):] + [t]
            if t not in state and (found := visit(t)): return found
        state[m] = 2; path.pop()
        return None
    for m in sorted(graph):
        if m not in state and (found := visit(m)): return found
    return None


def chapters(sources:dict[str, str]) -> dict[str, str]:
    "Module name -> the notebook it is exported from (`02_stack` for `stack`), read from nbdev's header line."
    out = {}
    for m, src in sources.items():
        found = re.search(r"File to edit: \.\./nbs/(\S+)\.ipynb", src)
        if found: out[m] = found.group(1)
    return out


def against_chapter_order(sources:dict[str, str]) -> set[tuple[str, str]]:
    "(importer, imported) for every import of a module whose chapter comes later than the importer's."
    order, modules = chapters(sources), set(sources)
    return {(m, t) for m, src in sources.items() for t, _, _ in package_imports(src, modules)
            if m in order and t in order and order[t] > order[m]}


def long_modules(sources:dict[str, str], limit:int=MAX_LINES) -> dict[str, int]:
    "Modules with more than `limit` lines, and their line counts."
    return {m: n for m, src in sources.items() if (n := len(src.splitlines())) > limit}


# The rules on synthetic packages: each must be able to fail.

@pytest.mark.parametrize("source, expected", [
    ("from .trees import Tree, _limit", ["line 1: _limit from trees"]),
    ("from treepe_nb.readers import _chain", ["line 1: _chain from readers"]),
    ("def f():\n    from .trees import _first\n    return _first", ["line 2: _first from trees"]),
    ("class A:\n    def m(self):\n        from treepe_nb.trees import _x, y", ["line 3: _x from trees"]),
    ("from treepe_nb import _private", [f"line 1: _private from {INIT}"]),
    ("from .trees import Tree, check_limit\nfrom . import trees\nimport treepe_nb.trees", []),
    ("from ._vendored import _x\nfrom numpy import _NoValue\nfrom .trees import __doc__", []),   # not modules of ours
])
def test_private_import_rule(source, expected):
    sources = {"trees": "def _limit(): pass", "readers": "", "user": source}
    assert private_imports(sources).get("user", []) == expected


@pytest.mark.parametrize("sources, cycle", [
    ({"a": "from .b import x", "b": "import numpy"}, None),
    ({"a": "from .b import x", "b": "from .a import y"}, ["a", "b", "a"]),
    ({"a": "from .b import x", "b": "def f():\n    from treepe_nb.c import z", "c": "from . import a"}, ["a", "b", "c", "a"]),
    ({"a": "import treepe_nb.b", "b": "class K:\n    def m(self):\n        import treepe_nb.a"}, ["a", "b", "a"]),
    ({INIT: "from . import b", "b": "from .c import x", "c": ""}, None),            # the package importing a module
    ({"a": "from .a import x"}, None),                                               # a module's own name: no edge
])
def test_import_cycle_rule(sources, cycle):
    assert import_cycle(sources) == cycle


def test_chapter_order_rule():
    head = lambda nb: f"# AUTOGENERATED! DO NOT EDIT! File to edit: ../nbs/{nb}.ipynb.\n"
    sources = {"trees": head("01_trees"), "stack": head("02_stack") + "from .trees import Tree",
               "positions": head("01b_positions"), INIT: "from . import stack"}
    assert against_chapter_order(sources) == set()
    sources["trees"] += "from .positions import TreePositions\nfrom .stack import StackPE"
    assert against_chapter_order(sources) == {("trees", "positions"), ("trees", "stack")}


def test_long_module_rule():
    assert long_modules({"short": "x = 1\n" * MAX_LINES, "long": "x = 1\n" * (MAX_LINES + 1)}) == {"long": MAX_LINES + 1}


# The package itself.

SOURCES = package_sources()


def test_the_package_is_read():
    assert {"trees", "positions", "readers", "sequence", "stack", "tracking", "algebraic", "additive", INIT} <= set(SOURCES)
    assert "_modidx" not in SOURCES


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_no_private_name_crosses_a_module_boundary(module):
    assert private_imports(SOURCES).get(module, []) == []


def test_no_import_cycle():
    assert import_cycle(SOURCES) is None


# Imports that run against the chapter order today, each with why; the list must shrink, never grow (a pair that
# is fixed must leave it too, so that it stays true).
AGAINST_ORDER = {
    ("trees", "positions"): "Tree.positions returns TreePositions (01b): the tree model and its positions",
    ("readers", "positions"): "check_limit, a bound checker that lives with the positions",
}
MAX_AGAINST_ORDER = 2   # 8 before the data and training chapters were renumbered (tasks after its data, runs before train),
# 4 before the YAML probes (9f, 9g) came before the grids that store them (chapter 10; their results: 10b, 10c)


def test_imports_follow_the_chapter_order():
    found = against_chapter_order(SOURCES)
    assert len(AGAINST_ORDER) <= MAX_AGAINST_ORDER
    assert found - set(AGAINST_ORDER) == set(), f"new imports against the chapter order: {sorted(found - set(AGAINST_ORDER))}"
    assert set(AGAINST_ORDER) - found == set(), f"fixed, so take them off AGAINST_ORDER: {sorted(set(AGAINST_ORDER) - found)}"


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_module_length(module):
    assert long_modules({module: SOURCES[module]}) == {}, f"{module}.py is longer than {MAX_LINES} lines"


def shared_numbers(names:list[str]) -> dict[str, list[str]]:
    "Chapter numbers (`01d`) that more than one notebook carries, and those notebooks."
    by = {}
    for n in names:
        if (m := re.match(r"(\d+[a-z]?)_", n)): by.setdefault(m.group(1), []).append(n)
    return {k: v for k, v in by.items() if len(v) > 1}


def test_shared_number_rule_can_fail():
    assert shared_numbers(["01d_kernels", "01d_maps", "01e_yaml", "index"]) == {"01d": ["01d_kernels", "01d_maps"]}


def test_every_notebook_has_its_own_number():
    assert shared_numbers(sorted(p.stem for p in (ROOT.parent / "nbs").glob("*.ipynb"))) == {}


def early_main_guards(sources:dict[str, str]) -> dict[str, int]:
    """Module -> line of its `if __name__ == "__main__"` guard, where a module-level statement follows it: under
    `python -m` the guard runs the command line before those statements do (a name they import is then missing)."""
    out = {}
    for module, source in sources.items():
        body = ast.parse(source).body
        for i, node in enumerate(body):
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and i < len(body) - 1:
                out[module] = node.lineno
    return out


def test_early_main_guard_rule_can_fail():
    early = 'import sys\nif __name__ == "__main__": main()\nfrom .x import y\n'
    late = 'import sys\nfrom .x import y\nif __name__ == "__main__": main()\n'
    assert early_main_guards({"a": early, "b": late}) == {"a": 2}


def test_main_guards_come_last():
    assert early_main_guards(SOURCES) == {}


def test_model_and_train_test_no_encoding_by_class_or_name():
    """The encoding record (`attention.Encoding`) holds every fact about an encoding: the model and the training loop
    never test an encoding's class (`isinstance(m, TreeAPE)`) or compare with its name (`pe == "relative"`)."""
    from treepe_nb import attention
    classes = {"OrthogonalPE", "SequenceAPE", "TreeAPE", "GridAPE", "TreePositionalEncoding", "AdditiveTreePE",
               "SinusoidalPE", "LearnedPE", "Rotations"}
    names = set(attention.ENCODINGS)                                   # "none" and "relative" are families too:
    found = []
    for module in ("model", "train"):
        for node in ast.walk(ast.parse(SOURCES[module])):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                found += [f"{module}.py:{node.lineno} isinstance(..., {k.id})" for k in kinds
                          if isinstance(k, ast.Name) and k.id in classes]
            if isinstance(node, ast.Compare) and not any(getattr(c, "attr", None) == "family"   # `.family == "relative"`: a fact
                                                         for c in [node.left, *node.comparators]):
                found += [f"{module}.py:{node.lineno} compares with {c.value!r}" for c in [node.left, *node.comparators]
                          if isinstance(c, ast.Constant) and c.value in names]
    assert not found, found


# Limits of #56: one home for a run folder's file names, no long functions (the training recipe is a class of short
# methods, not one 158-line function), and export cells of three or more definitions that may shrink, never grow.

RUN_FILE_NAMES = {"best.pt", "last.pt", "config.yaml", "vocab.json", "metrics.jsonl", "summary.json"}
RUN_FILE_HOMES = {
    "runs": "RunFolder: the one class that knows a run folder's layout",
    "config": "checkpoint_config reads config.yaml beside a checkpoint when its caller passes none (chapter 8g, before runs)",
}
MAX_FUNCTION_LINES = 80
MAX_CROWDED_CELLS = 78      # export cells with three or more definitions (77 of 265 when issue 56 was filed)


def run_file_literals(sources:dict[str, str]) -> dict[str, list[str]]:
    "Per module, where a run file's name is written as a string of its own (`\"best.pt\"`), by line."
    out = {}
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and node.value in RUN_FILE_NAMES:
                out.setdefault(module, []).append(f"line {node.lineno}: {node.value}")
    return out


def long_functions(sources:dict[str, str], limit:int=MAX_FUNCTION_LINES) -> list[str]:
    "Functions and methods longer than `limit` lines, as `module.name (lines)`."
    return [f"{m}.{n.name} ({n.end_lineno - n.lineno + 1})" for m, src in sources.items() for n in ast.walk(ast.parse(src))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def crowded_cells(notebooks:dict[str, list[str]]) -> list[str]:
    "Export cells (`#| export`) that hold three or more top-level definitions, as `notebook#cell`."
    out = []
    for nb, cells in notebooks.items():
        for i, source in enumerate(cells):
            if not re.match(r"#\|\s*export\b", source): continue
            try: body = ast.parse(source).body
            except SyntaxError: continue
            if sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in body) >= 3:
                out.append(f"{nb}#{i}")
    return out


def test_run_file_rule_can_fail():
    assert run_file_literals({"a": 'p = d / "best.pt"\nf"no best.pt in {d}"', "b": "x = 'best'"}) == {"a": ["line 1: best.pt"]}


def test_long_function_rule_can_fail():
    assert long_functions({"m": "def f():\n" + "    x = 1\n" * 3}, limit=3) == ["m.f (4)"]


def test_crowded_cell_rule_can_fail():
    cells = {"nb": ["#| export\ndef a(): pass\ndef b(): pass\nclass C: pass", "def a(): pass\ndef b(): pass\ndef c(): pass",
                    "#| export\ndef a(): pass\ndef b(): pass"]}
    assert crowded_cells(cells) == ["nb#0"]


def test_run_file_names_have_one_home():
    assert set(run_file_literals(SOURCES)) <= set(RUN_FILE_HOMES), run_file_literals(SOURCES)


def test_no_function_is_long():
    assert long_functions(SOURCES) == []


def test_crowded_export_cells_do_not_grow():
    import json
    notebooks = {p.stem: ["".join(c["source"]) for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code"]
                 for p in sorted((ROOT.parent / "nbs").glob("*.ipynb"))}
    assert len(crowded_cells(notebooks)) <= MAX_CROWDED_CELLS


def show_docs_without_output(notebooks:dict[str, list[dict]]) -> list[str]:
    """`notebook: show_doc(name)` for every `show_doc` cell with no stored output: the site's API reference is rendered
    from that output, so the docs build (tests/test_docs.py, which needs a browser) refuses such a notebook."""
    return [f"{nb}: {c['source'].strip()}" for nb, cells in notebooks.items() for c in cells
            if c["cell_type"] == "code" and re.match(r"\s*show_doc\(", c["source"]) and not c.get("outputs")]


def test_show_doc_rule_can_fail():
    cells = [{"cell_type": "code", "source": "show_doc(f)", "outputs": []},
             {"cell_type": "code", "source": "show_doc(g)", "outputs": [{"data": {}}]},
             {"cell_type": "markdown", "source": "show_doc(h)"}]
    assert show_docs_without_output({"nb": cells}) == ["nb: show_doc(f)"]


def test_every_show_doc_has_its_output():
    import json
    notebooks = {}
    for p in sorted((ROOT.parent / "nbs").glob("*.ipynb")):
        cells = json.loads(p.read_text())["cells"]
        notebooks[p.stem] = [{**c, "source": "".join(c["source"])} for c in cells]
    assert show_docs_without_output(notebooks) == []
