"""Build the documentation site and README.md from the notebooks, offline (no Quarto, no kernel, no network).

    python tools/docs.py            # README.md, then the whole site in _docs/
    python tools/docs.py readme     # README.md only
    python tools/docs.py check      # exit 1 if README.md is not what nbs/index.ipynb renders to

The pipeline:
1. nbdev's own notebook processors (the ones `nbdev_docs` runs before Quarto): front matter from the first
   `# Title` / `> description` cell, `#| hide` and `#| export` cells removed, `show_doc` input hidden.
   The two processors that *execute* code (`add_show_docs`, `exec_show_docs`) are left out: pages use the
   outputs stored in the notebooks, so the API reference is the stored `show_doc` output. nbdev's `add_links` is
   replaced by `link_api`: a backticked name links to the `show_doc` heading that documents it, with a relative
   link (`trees.html#treepe_nb.trees.TreePositions.check`) to an anchor this build puts on that heading, so every
   link has a target, and names with no heading on the site (private ones among them) get no link. A Markdown link
   to another notebook (`[the guide](13_which_encoding.ipynb)`, which JupyterLab follows as written) becomes that
   notebook's page (`which_encoding.html`).
2. Quarto cell options that nbdev leaves for Quarto (`#| echo: false`, `#| code-fold: ...`) become MyST-NB cell
   tags; ipywidgets outputs become their stored static output plus a note that they are live in JupyterLab. The code
   of a cell whose output is a result (a table, a figure, Markdown) is folded under a "show code" toggle, so a page
   reads as its answers (`fold_results`; `#| code-fold: false` keeps a cell's code open).
3. Sphinx with MyST-NB and sphinx-book-theme renders the processed notebooks (never executing them) into `_docs/`,
   with MathJax copied from the `django-static-mathjax` wheel so no page loads anything from another host. Each
   page's download button offers its notebook, as in `nbs/` (copied to `_sources/`).
README.md is steps 1 and 2 on `nbs/index.ipynb`, written as Markdown by nbconvert, without the folded code and the
figures (`_readme_cells`). Its API links go to the published
site only when `docs_url` in settings.ini names it; with `docs_url` empty (the default) names stay plain code, and
links to notebooks go to the notebooks in the repository (`nbs/13_which_encoding.ipynb`).
Nothing links to nbdev's `doc_host` or `git_url` (placeholders nbdev needs); the site's repository button
appears only when `repo_url` is set.

The pages follow the notebooks in `nbs/`: index first, then every other notebook sorted by file name, each titled
by its first `# Heading`. A notebook added to `nbs/` appears in the sidebar with no list to edit.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import shutil
import sys
import time
from configparser import ConfigParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPHINX_CONF = Path(__file__).resolve().parent / "sphinx"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SHOWN = "show-input"   # our tag for a cell marked `#| code-fold: false`: `fold_results` leaves its code open
RESULT_MIMES = ("text/markdown", "text/html", "image/")   # outputs that are results: tables, figures, prose
NOTEBOOK_MAP = "notebooks.json"  # written by `stage` beside the Sphinx sources, read by tools/sphinx/conf.py


def settings(root: Path = ROOT) -> dict:
    "The `[DEFAULT]` section of settings.ini (nbdev 2's single source of metadata)."
    cfg = ConfigParser(delimiters=["="])
    cfg.read(root / "settings.ini", encoding="utf-8")
    return dict(cfg["DEFAULT"])


def notebooks(root: Path = ROOT) -> list[Path]:
    "The notebooks that become pages: `index` first, then the rest sorted by file name (nbdev skips `_*` and `.*`)."
    nbs = root / settings(root)["nbs_path"]
    found = sorted(p for p in nbs.rglob("*.ipynb")
                   if not any(part.startswith(("_", ".")) for part in p.relative_to(nbs).parts))
    nested = [str(p.relative_to(nbs)) for p in found if p.parent != nbs]
    if nested: raise ValueError(f"notebooks in subfolders of {nbs} are not supported by the docs build: {nested}")
    return sorted(found, key=lambda p: p.stem != "index")


def page_name(nb_path: Path) -> str:
    "The page's file stem, as `nbdev_docs` names it: `02_stack.ipynb` -> `stack` (so URLs match the Quarto site)."
    return re.sub(r"^\d+[a-zA-Z0-9]*_", "", nb_path.stem.lower())


# ---------------------------------------------------------------------------------------------------------------
# 1. nbdev's processing, without the processors that execute code

def _procs():
    from nbdev.processors import FilterDefaults, add_links, add_show_docs, exec_show_docs, insert_warning

    class StoredOutputs(FilterDefaults):
        "nbdev's default processors, minus those that run code, add text meant for Quarto, or link (`link_api` does)."
        def base_procs(self):
            return [p for p in super().base_procs()
                    if p not in (add_show_docs, exec_show_docs, insert_warning, add_links)]

    return StoredOutputs().procs()


_re_quarto_opt = re.compile(r"^#\|\s*([\w-]+)\s*:\s*(.*?)\s*$")
_quarto_tags = {("echo", "false"): "remove-input", ("output", "false"): "remove-output",
                ("include", "false"): "remove-cell", ("code-fold", "true"): "hide-input",
                ("code-fold", "show"): "hide-input", ("code-fold", "false"): SHOWN}


def _quarto_options_to_tags(cell):
    "Turn the Quarto `#| key: value` lines nbdev leaves at the top of a code cell into MyST-NB tags."
    if cell.cell_type != "code": return
    lines = cell.source.splitlines(keepends=True)
    opts = []
    while lines and _re_quarto_opt.match(lines[0]):
        opts.append(_re_quarto_opt.match(lines.pop(0)).groups())
    cell.source = "".join(lines)
    tags = [_quarto_tags[(k, v.strip("\"'").lower())] for k, v in opts if (k, v.strip("\"'").lower()) in _quarto_tags]
    if tags: cell.setdefault("metadata", {})["tags"] = sorted(set(cell.metadata.get("tags", [])) | set(tags))


def _widget_outputs(state: dict, model_id: str) -> tuple[list, list]:
    "The outputs stored in a widget's `Output` descendants, and `description = value` of its controls."
    outputs, controls, todo = [], [], [model_id]
    while todo:
        model = state.get(todo.pop(0), {}).get("state", {})
        outputs += model.get("outputs", [])
        if model.get("description") and "value" in model:
            controls.append(f"{model['description']} = {model['value']}")
        todo += [c.removeprefix("IPY_MODEL_") for c in model.get("children", [])]
    return outputs, controls


def static_widgets(nb):
    "Replace every ipywidgets view by its stored static output, after a note that the widget is live in JupyterLab."
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        new = []
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                new.append(out)
                continue
            stored, controls = _widget_outputs(state, view["model_id"])
            at = f" Shown here as stored, at {', '.join(controls)}." if controls else ""
            if not stored: at = " Its output is not stored in the notebook; run it in JupyterLab to see it."
            note = f"*Interactive widget: it is live when you run this notebook in JupyterLab.{at}*"
            new.append({"output_type": "display_data", "metadata": {},
                        "data": {"text/markdown": note, "text/plain": note}})
            new += copy.deepcopy(stored)
        if "outputs" in cell: cell.outputs = new
    nb.metadata.pop("widgets", None)  # the widget state would make MyST-NB add widget scripts from a CDN


def is_result(out) -> bool:
    "Whether an output is a result the prose reads (a table or sentence in Markdown or HTML, a figure), not text."
    return any(k.startswith(RESULT_MIMES) for k in out.get("data", {}))


def fold_results(nb):
    """The rule for what the site collapses: a code cell whose stored output is a result (a table, a figure, Markdown;
    `is_result`) shows it with its code behind a "show code" toggle (MyST-NB's `hide-input` tag), so a chapter reads
    as its answers; a cell marked `#| code-fold: false` keeps its code open. Cells whose output is text (an example's
    value, a print) or that have none stay open: that code is the example. `#| code-fold: true` folds any cell, and
    `show_doc` cells (`#| echo: false`, from nbdev) show no code at all. README.md leaves folded code out."""
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type != "code" or tags & {SHOWN, "hide-input", "remove-input", "remove-cell"}: continue
        if any(is_result(out) for out in cell.get("outputs", [])):
            cell.setdefault("metadata", {})["tags"] = sorted(tags | {"hide-input"})


def chapter_label(stem: str) -> str | None:
    "How the prose names a notebook's chapter: `06a_own_transformer` -> `6a`, `13_which_encoding` -> `13`; None: unnumbered."
    m = re.match(r"^(\d+)([a-z]*)_", stem)
    return f"{int(m.group(1))}{m.group(2)}" if m else None


def page_title(stem: str, heading: str) -> str:
    "A page's title (and sidebar entry): the chapter label the prose uses, then the notebook's first heading."
    label = chapter_label(stem)
    return f"{label} · {heading}" if label else heading


def _title_cell(nb, stem: str):
    """Put the title (with its chapter label) and description (front matter, taken from the first `# Heading` cell)
    back as Markdown, and the notebook's file name, so that searching the site for `06a_own_transformer` finds it."""
    from execnb.nbio import mk_cell
    from nbdev.frontmatter import _fm2dict
    first = nb.cells[0] if nb.cells else None
    fm = _fm2dict(first.source) if first is not None and first.cell_type == "raw" else {}
    if not fm.get("title"): raise ValueError(f"{nb.path_}: the first cell must be a '# Title' Markdown cell")
    source = f"Notebook `nbs/{stem}.ipynb`" + (f", chapter {chapter_label(stem)}" if chapter_label(stem) else "") + "."
    nb.cells[0] = mk_cell(f"# {page_title(stem, fm['title'])}" + (f"\n\n> {fm['description']}" if fm.get("description")
                          else "") + (f"\n\n{source}" if chapter_label(stem) else ""), "markdown")


_re_show_doc = re.compile(r"\s*show_doc\(")
_re_api_heading = re.compile(r"^#+[ \t]+([A-Za-z_][\w.]*)[ \t]*$", re.MULTILINE)


def _md(out) -> str | None:
    "An output's `text/markdown`, as one string (None if it has none)."
    md = out.get("data", {}).get("text/markdown")
    return "".join(md) if isinstance(md, list) else md


def _module(cells, root: Path = ROOT) -> str:
    "The module a notebook exports to (`treepe_nb.trees` for `#| default_exp trees`), or the package's name."
    lib = settings(root)["lib_name"]
    for cell in cells:
        m = re.search(r"^#\|\s*default_exp\s+(\S+)", "".join(cell["source"]), re.MULTILINE)
        if cell["cell_type"] == "code" and m: return f"{lib}.{m.group(1)}"
    return lib


def api_anchor(module: str, name: str) -> str:
    """The HTML id of the `show_doc` heading of `name` on its page: the qualified name, `treepe_nb.trees.Tree.lcrs`,
    as Sphinx's autodoc would name it. Ids that docutils makes are lower case, `[a-z0-9-]`, so these never clash."""
    return f"{module}.{name}"


def _private(name: str) -> bool: return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))


def api_targets(root: Path = ROOT) -> dict[str, tuple[str, str]]:
    """Every name the site documents: `{name: (page, anchor)}`, from the headings of the `show_doc` outputs stored
    in the notebooks, under its heading (`TreePositions.check`) and its qualified name
    (`treepe_nb.trees.TreePositions.check`). A heading on two pages keeps only its qualified names; private names
    (a part starting with one `_`) are left out, so no link to them is ever made."""
    found = []
    for nb_path in notebooks(root):
        cells = json.loads(nb_path.read_text(encoding="utf-8"))["cells"]
        module, page = _module(cells, root), page_name(nb_path)
        for cell in cells:
            if cell["cell_type"] != "code" or not _re_show_doc.match("".join(cell["source"])): continue
            for out in cell.get("outputs", []):
                m = _re_api_heading.search(_md(out) or "")
                if m and not _private(m.group(1)):
                    found.append((m.group(1), module, page))
    targets, bare = {}, [name for name, _, _ in found]
    for name, module, page in found:
        anchor = api_anchor(module, name)
        targets[f"{module}.{name}"] = (page, anchor)
        if bare.count(name) == 1: targets[name] = (page, anchor)
    return targets


_re_code_name = re.compile(r"(?<![`\[\w])`([A-Za-z_][\w.]*?)(\(\))?`(?![`\]])")
_re_fence_line = re.compile(r"^ {0,3}(```|~~~)")


def link_names(md: str, targets: dict, base: str) -> str:
    """Link each backticked name in Markdown that `targets` knows (`TreePositions.check` or `TreePositions.check()`)
    to `{base}{page}.html#{anchor}`; code blocks and names already inside a link are left alone."""
    def link(m):
        hit = targets.get(m.group(1))
        return m.group(0) if hit is None else f"[{m.group(0)}]({base}{hit[0]}.html#{hit[1]})"
    lines, fence = md.split("\n"), None
    for i, line in enumerate(lines):
        opened = _re_fence_line.match(line)
        if fence is None and opened: fence = opened.group(1)
        elif fence is not None:
            if line.lstrip().startswith(fence): fence = None
        else: lines[i] = _re_code_name.sub(link, line)
    return "\n".join(lines)


def link_api(nb, targets: dict, base: str | None):
    "Link the API names in a notebook's Markdown cells and Markdown outputs (`base`: prefix of the pages; None: none)."
    if base is None: return
    for cell in nb.cells:
        if cell.cell_type == "markdown": cell.source = link_names(cell.source, targets, base)
        for out in cell.get("outputs", []):
            md = _md(out)
            if md is not None: out["data"]["text/markdown"] = link_names(md, targets, base)


_re_chapter_link = re.compile(r"\]\((?P<stem>\d+[a-zA-Z0-9]*_\w+|index)\.ipynb(?P<frag>#[^)\s]*)?\)")


def link_chapters(nb, to, nbs: Path):
    """Rewrite the Markdown links to a notebook beside this one (`[the guide](13_which_encoding.ipynb)`, which JupyterLab
    follows as written) to `to(stem, fragment)`: the site's page, or, in README.md, the notebook's path in the repository
    or its page on `docs_url`. A link to a notebook that is not in `nbs` is an error that names it."""
    def link(m):
        if not (nbs / f"{m['stem']}.ipynb").exists():
            raise ValueError(f"{nb.path_}: a link to {m['stem']}.ipynb, which is not in {nbs}")
        return f"]({to(m['stem'], m['frag'] or '')})"
    for cell in nb.cells:
        if cell.cell_type == "markdown": cell.source = _re_chapter_link.sub(link, cell.source)


def _show_docs(nb, module: str):
    """Check every `show_doc` cell has a stored output (the API reference is rendered from it), drop the `---` rule
    nbdev starts it with (docutils cannot put a rule inside an output), and put the anchor `api_anchor` names just
    before its heading, as an empty `<div>` (a raw HTML block, which MyST passes through)."""
    for cell in nb.cells:
        if cell.cell_type != "code" or not _re_show_doc.match(cell.source): continue
        if not cell.get("outputs"):
            raise ValueError(f"{nb.path_}: `{cell.source.strip()}` has no stored output; "
                             f"execute the notebook and commit it with its outputs")
        for out in cell.outputs:
            md = _md(out)
            if md is None: continue
            md = re.sub(r"\A\s*---\s*\n", "", md)
            out.data["text/markdown"] = _re_api_heading.sub(
                lambda m: f'<div class="api-anchor" id="{api_anchor(module, m.group(1))}"></div>\n\n{m.group(0)}',
                md, count=1)


_re_display_math = re.compile(r"\n*^(\$\$[^$]+?\$\$)[ \t]*$\n*", re.MULTILINE)


def _display_math(nb):
    """Give each `$$ ... $$` line(s) a paragraph of its own. JupyterLab renders display math inside a paragraph, but
    MyST's dollar-math pairs the `$` signs wrongly there and leaves the rest of the paragraph as raw TeX."""
    for cell in nb.cells:
        if cell.cell_type == "markdown": cell.source = _re_display_math.sub(r"\n\n\1\n\n", cell.source).strip("\n")


_re_math_or_code = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$"  # a fenced block
                              r"|(`+).*?(?<!`)\2(?!`)"                   # a code span
                              r"|\\\$|\$\$.*?\$\$"                       # an escaped dollar, display math
                              r"|\$([^$]+?)\$", re.MULTILINE | re.DOTALL)  # inline math


def _inline_math(nb):
    """Put each `$...$` on one line. JupyterLab takes math out before it parses the Markdown, MyST after: there, a
    line break inside inline math followed by `- 1$` starts a list item and the math swallows the paragraph."""
    def join(m):
        tex = m.group(3)
        if tex is None or "\n" not in tex or re.search(r"\n\s*\n", tex): return m.group(0)
        return "$" + re.sub(r"\s*\n\s*", " ", tex) + "$"
    for cell in nb.cells:
        if cell.cell_type == "markdown": cell.source = _re_math_or_code.sub(join, cell.source)


@contextlib.contextmanager
def _cwd(path: Path):
    "nbdev finds settings.ini from the working directory: work in the notebook's project."
    old = Path.cwd()
    os.chdir(path)
    try: yield
    finally: os.chdir(old)


def process(nb_path: Path, links: str | None = "", targets: dict | None = None, root: Path = ROOT, chapters=None):
    """A notebook as the docs show it: nbdev-processed, Quarto options as tags, widgets static, the code of results
    folded (`fold_results`), title on top, API
    names linked to `{links}{page}.html#{anchor}` (`links=""`: the site's relative links; None: no links) for the
    names in `targets` (default: `api_targets(root)`), and links to other notebooks sent to `chapters(stem, fragment)`
    (default: the site's page, `which_encoding.html`: MyST-NB leaves a link to a notebook as it is)."""
    from execnb.nbio import read_nb
    from nbdev.process import NBProcessor
    nb_path = Path(nb_path).resolve()
    nb = read_nb(nb_path)
    module = _module(nb.cells, root)
    with _cwd(nb_path.parent): NBProcessor(nb=nb, procs=_procs(), process=True)
    _title_cell(nb, nb_path.stem)
    for cell in nb.cells: _quarto_options_to_tags(cell)
    static_widgets(nb)
    fold_results(nb)
    _show_docs(nb, module)
    link_api(nb, api_targets(root) if targets is None else targets, links)
    link_chapters(nb, chapters or (lambda stem, frag: f"{page_name(Path(stem))}.html{frag}"), nb_path.parent)
    _display_math(nb)
    _inline_math(nb)
    for cell in nb.cells:
        if cell.cell_type == "code": cell.metadata.pop("language", None)
    nb.metadata.setdefault("language_info", {"name": "python"})
    return nb


def _to_nbformat(nb):
    "An execnb notebook as an nbformat node (what nbconvert reads)."
    import nbformat
    from execnb.nbio import nb2str
    return nbformat.reads(nb2str(nb), as_version=4)


# ---------------------------------------------------------------------------------------------------------------
# 2. README.md

def docs_url(root: Path = ROOT) -> str | None:
    """Where the site is published, from `docs_url` in settings.ini, ending in `/` (None while it is empty, the
    default: nothing links to a site that nobody has published)."""
    url = settings(root).get("docs_url", "").strip()
    return url.rstrip("/") + "/" if url else None


def _readme_cells(nb):
    """What README.md keeps of a processed notebook: the code the site folds or hides is left out (a README has no
    "show code" toggle), and so are figures (nbconvert would link them to image files that no one writes); the
    Markdown and text that a folded cell outputs stay."""
    for cell in nb.cells:
        if cell.cell_type != "code": continue
        figure = lambda out: any(k.startswith("image/") for k in out.get("data", {}))
        cell.outputs = [out for out in cell.get("outputs", []) if not figure(out)]
        if {"hide-input", "remove-input"} & set(cell.metadata.get("tags", [])):
            cell.source = "" if cell.outputs else None   # None: nothing left of the cell
    nb.cells = [c for c in nb.cells if c.source is not None]
    return nb


def render_readme(root: Path = ROOT) -> str:
    """README.md's text: `nbs/index.ipynb`, processed as for the site, written as Markdown by nbconvert, less what
    `_readme_cells` leaves out. API names link to the published site when `docs_url` is set, and are plain code
    otherwise; links to chapters go to their page on that site, or else to the notebook in the repository."""
    from nbconvert import MarkdownExporter
    index = notebooks(root)[0]
    if index.stem != "index": raise FileNotFoundError(f"no index.ipynb in {index.parent}")
    url, nbs = docs_url(root), settings(root)["nbs_path"]
    chapter = lambda stem, frag: f"{url}{page_name(Path(stem))}.html{frag}" if url else f"{nbs}/{stem}.ipynb{frag}"
    nb = _to_nbformat(_readme_cells(process(index, url, root=root, chapters=chapter)))
    for cell in nb.cells:
        if cell.cell_type == "code" and not cell.source:
            cell.metadata.transient = {"remove_source": True}   # the flag nbconvert's templates read
    body, _ = MarkdownExporter().from_notebook_node(nb)
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return body


def write_readme(root: Path = ROOT) -> bool:
    "Write README.md from nbs/index.ipynb; True if it changed."
    text, readme = render_readme(root), root / "README.md"
    if readme.exists() and readme.read_text(encoding="utf-8") == text: return False
    readme.write_text(text, encoding="utf-8")
    return True


# ---------------------------------------------------------------------------------------------------------------
# 3. The site

PARTS = {0: "Sequences", 1: "Trees and positions", 2: "Tree encodings", 3: "Tree encodings", 4: "Tree encodings",
         5: "Tree encodings", 6: "Models", 7: "Models", 8: "Data", 9: "Training and use", 10: "Experiments",
         11: "Performance", 12: "Development", 13: "Guide"}   # a chapter's number -> its part of the sidebar


def part(nb_path: Path) -> str:
    "The sidebar part of a notebook, by its number (`04_algebraic` -> Tree encodings); unnumbered pages: More."
    number = re.match(r"^(\d+)", nb_path.stem)
    return PARTS.get(int(number.group(1)), "More") if number else "More"


def _toctree(pages: list[str], caption: str) -> str:
    return f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n:caption: {caption}\n\n" + "\n".join(pages) + "\n```"


def _toctrees(nbs: list[Path], names: list[str]) -> str:
    "One toctree per part, in the order of the pages (which follows the chapter numbers)."
    groups: dict[str, list[str]] = {}
    for nb_path, name in zip(nbs, names): groups.setdefault(part(nb_path), []).append(name)
    return "\n\n".join(_toctree(pages, caption) for caption, pages in groups.items())


def stage(src: Path, root: Path = ROOT) -> list[str]:
    """Write the processed notebooks to `src` as Sphinx sources; the index gets a toctree of the other pages.
    `src/notebooks.json` maps each page to its notebook's file name (the download button offers that notebook)."""
    from execnb.nbio import mk_cell, write_nb
    if src.exists(): shutil.rmtree(src)
    src.mkdir(parents=True)
    nbs = notebooks(root)
    if not nbs or nbs[0].stem != "index": raise FileNotFoundError(f"no index.ipynb among {nbs}")
    names = [page_name(p) for p in nbs]
    clash = {n for n in names if names.count(n) > 1}
    if clash: raise ValueError(f"notebooks {[p.name for p in nbs if page_name(p) in clash]} give the same page name")
    targets = api_targets(root)
    for nb_path, name in zip(nbs, names):
        nb = process(nb_path, "", targets, root)
        if name == "index": nb.cells.append(mk_cell(_toctrees(nbs[1:], names[1:]), "markdown"))
        write_nb(nb, src / f"{name}.ipynb")
    (src / NOTEBOOK_MAP).write_text(json.dumps({n: p.name for n, p in zip(names, nbs)}, indent=1), encoding="utf-8")
    return names


def _mathjax_dir() -> Path:
    import mathjax  # the django-static-mathjax wheel: MathJax 3's files, with no Django dependency
    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


def build_site(out: Path | None = None, root: Path = ROOT, quiet: bool = True, strict: bool = False) -> Path:
    "Build the whole site into `out` (default `_docs/`) and return its path; `strict`: Sphinx warnings are errors."
    from sphinx.cmd.build import build_main
    out = Path(out) if out else root / settings(root)["doc_path"]
    work = root / "build" / "docs"
    stage(work / "src", root)
    html = work / "html"  # MyST-NB writes images beside Sphinx's output folder, so build in build/ and copy
    if html.exists(): shutil.rmtree(html)  # Sphinx keeps the pages of notebooks that are gone
    args = ["-b", "html", "-c", str(SPHINX_CONF), "-d", str(work / "doctrees"), "-E", "--keep-going"]
    if quiet: args.append("-q")
    if strict: args.append("-W")
    if build_main(args + [str(work / "src"), str(html)]) != 0:
        raise RuntimeError("Sphinx failed" + (" or warned" if strict else "") + " (its messages are above)")
    if out.exists(): shutil.rmtree(out)
    shutil.copytree(html, out, ignore=shutil.ignore_patterns(".doctrees", ".buildinfo", "_sources"))
    shutil.copytree(_mathjax_dir(), out / "_static" / "mathjax", ignore=shutil.ignore_patterns("sre", "*svg*"))
    (out / "_sources").mkdir()
    for nb_path in notebooks(root): shutil.copy2(nb_path, out / "_sources" / nb_path.name)  # the download button
    (out / ".nojekyll").touch()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", choices=["site", "readme", "check"], default="site",
                    help="site: README.md and the site in _docs/ (default); readme: README.md only; "
                         "check: fail if README.md is out of date")
    ap.add_argument("--out", type=Path, help="folder for the site (default: doc_path in settings.ini, _docs)")
    ap.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    ap.add_argument("--strict", action="store_true", help="fail on Sphinx warnings (as tests/test_docs.py does)")
    a = ap.parse_args(argv)
    if a.what == "check":
        if (ROOT / "README.md").read_text(encoding="utf-8") != render_readme():
            sys.exit("README.md is out of date with nbs/index.ipynb: run `python tools/docs.py readme`")
        print("README.md matches nbs/index.ipynb")
        return
    print("README.md", "rewritten from nbs/index.ipynb" if write_readme() else "already matches nbs/index.ipynb")
    if a.what == "readme": return
    t0 = time.perf_counter()
    out = build_site(a.out, quiet=not a.verbose, strict=a.strict)
    print(f"site built in {time.perf_counter() - t0:.1f} s: {out}/index.html "
          f"(serve it with `python -m http.server -d {_shown(out)}`)")


def _shown(path: Path) -> str:
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


if __name__ == "__main__":
    main()
