"""The documentation site (`python tools/docs.py`): README.md in sync with nbs/index.ipynb and linking to no host
nobody set up, pages derived from the notebooks, widgets made static, API names linked to their `show_doc` heading,
and the built site checked in headless Chromium (every page loads, math is typeset, images load, wide blocks scroll
instead of being cut, nothing is fetched from another host, every internal link lands on its target, every
external link is one the notebooks' own Markdown makes, search finds "LCRS"). Screenshots of two pages are saved
under build/screenshots/ for people to look at.

The browser tests need Chromium (Debian package `chromium`) and Playwright for Python; without Chromium they are
skipped with a reason, except under CI (`CI` set), where they must run and fail instead."""
import functools
import http.server
import importlib.util
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

# sphinx-book-theme 1.4 uses an API that Sphinx 9 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:.*Check CHANGES for Sphinx API modifications")

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "screenshots"

_spec = importlib.util.spec_from_file_location("treepe_docs", ROOT / "tools" / "docs.py")
docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs)

NOTEBOOKS = docs.notebooks()
PAGES = [docs.page_name(p) for p in NOTEBOOKS]
SETTINGS = docs.settings()
_re_url = re.compile(r"""https?://[^\s<>()\[\]`'"]+""")


def _markdown_urls() -> set[str]:
    """The allow-list of links to other hosts: the URLs written in the notebooks' own Markdown cells (the references'
    arXiv and DOI links, the PyTorch selector...). The site and README may link to these and to nothing else outside
    themselves, except `docs_url` and `repo_url` from settings.ini once someone sets them."""
    urls = set()
    for nb_path in NOTEBOOKS:
        for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "markdown": continue
            urls |= {u.rstrip(".,;:") for u in _re_url.findall("".join(cell["source"]))}
    return urls


ALLOWED_URLS = _markdown_urls()
PUBLISHED = tuple(u.strip() for u in (SETTINGS.get("docs_url", ""), SETTINGS.get("repo_url", "")) if u.strip())
# nbdev's placeholders (settings.ini's doc_host, git_url), unless docs_url or repo_url says one of them is published
UNSET_HOSTS = [h for h in (re.sub(r"^https?://", "", SETTINGS[k]).rstrip("/") for k in ("doc_host", "git_url"))
               if not any(h in u for u in PUBLISHED)]


def first_heading(nb_path: Path) -> str:
    "The title a page must show: the notebook's first `# Heading`, its apostrophes typeset (Sphinx's smart quotes)."
    for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
        m = re.search(r"^#\s+(\S.*?)\s*$", "".join(cell["source"]), re.MULTILINE)
        if cell["cell_type"] == "markdown" and m: return m.group(1).replace("'", "\u2019")
    raise AssertionError(f"{nb_path.name} has no '# Heading'")


# ---------------------------------------------------------------------------------------------------------------
# Without a browser

def test_readme_matches_index():
    assert (ROOT / "README.md").read_text(encoding="utf-8") == docs.render_readme(), \
        "README.md and nbs/index.ipynb have drifted apart: run `python tools/docs.py readme` and commit README.md"


def _github_slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_links_only_where_something_is():
    """README.md names no placeholder host of settings.ini (nbdev's `doc_host`, `git_url`), and links only to its own
    headings, to URLs of the allow-list, and (once set) to `docs_url`: with `docs_url` empty, API names are code."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for host in UNSET_HOSTS:
        assert host not in text, f"README.md links to {host}, which nothing in the repository publishes"
    urls = {u.rstrip(".,;:") for u in _re_url.findall(text)}
    stray = sorted(u for u in urls if u not in ALLOWED_URLS and not u.startswith(PUBLISHED))
    assert not stray, f"README.md links to URLs that no notebook's Markdown writes: {stray}"
    headings = {_github_slug(h) for h in re.findall(r"^#+\s+(.*)$", text, re.MULTILINE)}
    anchors = re.findall(r"\]\(#([^)]*)\)", text)
    assert all(a in headings for a in anchors), f"README.md's #links {anchors} vs its headings {sorted(headings)}"
    relative = [u for u in re.findall(r"\]\(([^)#][^)]*)\)", text) if not _re_url.match(u)]
    missing = [u for u in relative if not (ROOT / u).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_readme_links_api_names_to_docs_url(tmp_path):
    "With `docs_url` set, README.md's API names link to their anchors on that site (the site test checks the ids)."
    shutil.copytree(ROOT / "nbs", tmp_path / "nbs", ignore=shutil.ignore_patterns("results", "data", ".*"))
    ini = (ROOT / "settings.ini").read_text(encoding="utf-8")
    ini = re.sub(r"^docs_url\s*=.*$", "docs_url = https://example.org/treepe_nb", ini, flags=re.MULTILINE)
    (tmp_path / "settings.ini").write_text(ini, encoding="utf-8")
    readme, targets = docs.render_readme(tmp_path), docs.api_targets(tmp_path)
    links = re.findall(r"\[`([^`]+)`\]\((https://example\.org/treepe_nb/[^)]+)\)", readme)
    assert links, "README.md links no API name to docs_url"
    for name, url in links:
        if (ROOT / "nbs" / f"{name}.ipynb").exists():           # a chapter's name: its page
            assert url == f"https://example.org/treepe_nb/{docs.page_name(Path(name))}.html", (name, url)
            continue
        page, anchor = targets[name.removesuffix("()")]
        assert url == f"https://example.org/treepe_nb/{page}.html#{anchor}"
    assert "(https://example.org/treepe_nb/which_encoding.html)" in readme     # the guide, on the site


def test_chapter_links():
    """A link to a notebook beside the index (as JupyterLab follows it) becomes the chapter's page on the site and its
    path in the repository in README.md (the guide is linked from both); a link to a notebook that is not there is an
    error that names it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[Which encoding when](nbs/13_which_encoding.ipynb)" in readme
    site_index = docs.process(NOTEBOOKS[0])
    text = "".join(c.source for c in site_index.cells if c.cell_type == "markdown")
    assert "[Which encoding when](which_encoding.html)" in text and "13_which_encoding.ipynb" not in text
    from execnb.nbio import mk_cell
    nb = type("NB", (), {"cells": [mk_cell("see [x](99_missing.ipynb#top)", "markdown")], "path_": "demo.ipynb"})()
    with pytest.raises(ValueError, match="99_missing.ipynb"): docs.link_chapters(nb, lambda s, f: s, ROOT / "nbs")
    nb.cells[0].source = "see [x](12_development.ipynb#tests) and [y](other.ipynb)"
    docs.link_chapters(nb, lambda s, f: f"{s}.page{f}", ROOT / "nbs")
    assert nb.cells[0].source == "see [x](12_development.page#tests) and [y](other.ipynb)"
    stems = [p.stem for p in NOTEBOOKS]                                  # every notebook, with and without an anchor
    nb.cells[0].source = " ".join(f"[{s}]({s}.ipynb) [{s}]({s}.ipynb#a-{i})" for i, s in enumerate(stems))
    docs.link_chapters(nb, lambda s, f: f"{docs.page_name(Path(s))}.html{f}", ROOT / "nbs")
    assert nb.cells[0].source == " ".join(f"[{s}]({p}.html) [{s}]({p}.html#a-{i})"
                                          for i, (s, p) in enumerate(zip(stems, PAGES)))


def _show_doc_nb(path: Path, module: str, headings: list[str]):
    cells = [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": [f"# {module}"]},
             {"cell_type": "code", "id": "e", "metadata": {}, "source": [f"#| default_exp {module}"],
              "outputs": [], "execution_count": None}]
    for i, h in enumerate(headings):
        out = {"output_type": "execute_result", "metadata": {}, "execution_count": None,
               "data": {"text/markdown": f"---\n\n### {h}\n\n```python\ndef f()\n```"}}
        cells.append({"cell_type": "code", "id": f"s{i}", "metadata": {}, "source": [f"show_doc({h})"],
                      "execution_count": None, "outputs": [out]})
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")


def test_api_targets_are_the_public_show_doc_headings(tmp_path):
    shutil.copy(ROOT / "settings.ini", tmp_path / "settings.ini")
    _show_doc_nb(tmp_path / "nbs" / "01_trees.ipynb", "trees",
                 ["Tree", "Tree.lcrs", "_Rows", "_Rows.forward", "forward"])
    _show_doc_nb(tmp_path / "nbs" / "02_stack.ipynb", "stack", ["Tree.__len__", "forward"])
    lib = SETTINGS["lib_name"]
    assert docs.api_targets(tmp_path) == {
        "Tree": ("trees", f"{lib}.trees.Tree"), f"{lib}.trees.Tree": ("trees", f"{lib}.trees.Tree"),
        "Tree.lcrs": ("trees", f"{lib}.trees.Tree.lcrs"),
        f"{lib}.trees.Tree.lcrs": ("trees", f"{lib}.trees.Tree.lcrs"),
        "Tree.__len__": ("stack", f"{lib}.stack.Tree.__len__"),
        f"{lib}.stack.Tree.__len__": ("stack", f"{lib}.stack.Tree.__len__"),
        f"{lib}.trees.forward": ("trees", f"{lib}.trees.forward"),  # `forward` is on two pages: only qualified
        f"{lib}.stack.forward": ("stack", f"{lib}.stack.forward")}


def test_link_names():
    targets = {"Tree": ("trees", "m.Tree"), "Tree.lcrs": ("trees", "m.Tree.lcrs")}
    md = ("`Tree`, `Tree.lcrs()`, `tree`, `_Rows`, ``Tree``, [`Tree`](elsewhere.html)\n"
          "```python\nx = `Tree`\n```\n~~~\n`Tree`\n~~~\nand `Tree.lcrs`.")
    assert docs.link_names(md, targets, "") == (
        "[`Tree`](trees.html#m.Tree), [`Tree.lcrs()`](trees.html#m.Tree.lcrs), `tree`, `_Rows`, ``Tree``, "
        "[`Tree`](elsewhere.html)\n```python\nx = `Tree`\n```\n~~~\n`Tree`\n~~~\n"
        "and [`Tree.lcrs`](trees.html#m.Tree.lcrs).")
    assert docs.link_names("`Tree`", targets, "https://x.org/") == "[`Tree`](https://x.org/trees.html#m.Tree)"


def test_inline_math_is_put_on_one_line():
    "A line break inside `$...$` followed by `- 1$` would start a list item in MyST (JupyterLab takes math out first)."
    from execnb.nbio import dict2nb
    src = "column $d\n- 1$, code `$x\ny$`, $$a\nb$$ and\n\n$5 and\n\n$6"
    nb = dict2nb({"cells": [{"cell_type": "markdown", "source": src, "metadata": {}}], "metadata": {}})
    docs._inline_math(nb)
    assert nb.cells[0].source == "column $d - 1$, code `$x\ny$`, $$a\nb$$ and\n\n$5 and\n\n$6"


def test_api_headings_have_no_private_names():
    "Every `show_doc` heading stored in a notebook (what the site shows) names a public object: `Tree.lcrs`, not `_Generators.rotate`."
    private = re.compile(r"(^|[\s.(`])_[A-Za-z]")
    for nb_path in NOTEBOOKS:
        for cell in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code": continue
            for call in re.findall(r"show_doc\(([^,)]+)", "".join(cell["source"])):
                assert not private.search(call), f"{nb_path.name}: show_doc({call}) documents a private name"
            for out in cell.get("outputs", []):
                md = "".join(out.get("data", {}).get("text/markdown", ""))
                for heading in re.findall(r"^#+\s+(.*)$", md, re.MULTILINE):
                    assert not private.search(heading), f"{nb_path.name}: API heading {heading!r} shows a private name"


def _write_nb(path: Path, title: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "id": "t", "metadata": {}, "source": [title]}],
                                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}), encoding="utf-8")


def test_pages_follow_the_notebooks_present(tmp_path):
    shutil.copy(ROOT / "settings.ini", tmp_path / "settings.ini")
    for name in ["10_model", "index", "03_tracking", "00_sequence", "_draft", ".ipynb_checkpoints/00_sequence"]:
        _write_nb(tmp_path / "nbs" / f"{name}.ipynb", f"# {name}")
    found = docs.notebooks(tmp_path)
    assert [p.stem for p in found] == ["index", "00_sequence", "03_tracking", "10_model"]
    assert [docs.page_name(p) for p in found] == ["index", "sequence", "tracking", "model"]
    _write_nb(tmp_path / "nbs" / "extra" / "04_more.ipynb", "# more")
    with pytest.raises(ValueError, match="extra/04_more.ipynb"): docs.notebooks(tmp_path)


def test_widgets_become_their_stored_output():
    from execnb.nbio import dict2nb
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Fig>"}}
    state = {"box": {"state": {"children": ["IPY_MODEL_slider", "IPY_MODEL_out"]}},
             "slider": {"state": {"description": "p", "value": 0.7}},
             "out": {"state": {"outputs": [png]}}}
    nb = dict2nb({"cells": [{"cell_type": "code", "source": "interact(f)", "metadata": {}, "execution_count": 1,
                             "outputs": [{"output_type": "display_data", "metadata": {},
                                          "data": {docs.WIDGET_VIEW: {"model_id": "box"}, "text/plain": "w"}}]}],
                  "metadata": {"widgets": {docs.WIDGET_STATE: {"state": state}}}})
    docs.static_widgets(nb)
    note, picture = nb.cells[0].outputs
    assert "live when you run this notebook in JupyterLab" in note["data"]["text/markdown"]
    assert "p = 0.7" in note["data"]["text/markdown"]
    assert picture["data"]["image/png"] == png["data"]["image/png"]
    assert "widgets" not in nb.metadata


def test_fold_results_rule():
    """The site folds the code of a cell whose output is a result (Markdown, HTML, a figure) behind a "show code"
    toggle, leaves open a cell whose output is text or that has none and one marked `#| code-fold: false`, and never
    touches `show_doc` cells; README.md leaves folded code and figures out and keeps the Markdown they output."""
    from execnb.nbio import dict2nb
    def out(**data): return {"output_type": "display_data", "metadata": {}, "data": data}
    def cell(src, *outs): return {"cell_type": "code", "source": src, "metadata": {}, "outputs": list(outs)}
    nb = dict2nb({"cells": [cell("Markdown(table)", out(**{"text/markdown": "| a |\n|---|\n| 1 |"})),
                            cell("plt.plot(x)", out(**{"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})),
                            cell("t.positions()", out(**{"text/plain": "TreePositions(...)"})),
                            cell("test_eq(1, 1)"),
                            cell("#| code-fold: false\nMarkdown(x)", out(**{"text/markdown": "shown"})),
                            cell("#| echo: false\nshow_doc(f)", out(**{"text/markdown": "### f"}))], "metadata": {}})
    for c in nb.cells: docs._quarto_options_to_tags(c)
    docs.fold_results(nb)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert tags == [["hide-input"], ["hide-input"], [], [], [docs.SHOWN], ["remove-input"]], tags
    readme = docs._readme_cells(nb)
    assert [(c.source, len(c.outputs)) for c in readme.cells] == [
        ("", 1), ("t.positions()", 1), ("test_eq(1, 1)", 0), ("Markdown(x)", 1), ("", 1)]


CODE_WIDTH = 100   # characters a line of shown code may take: what the site's text column holds at 1280 px
_re_fenced = re.compile(r"^ {0,3}(```|~~~)[^\n]*\n(.*?)^ {0,3}\1", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("stem", ["index", "06a_own_transformer"])
def test_shown_code_fits_the_page(stem):
    """The code the home page and "Your own transformer" show (code cells the site does not fold, and the code blocks
    of their Markdown) keeps to `CODE_WIDTH` characters a line, so it reads without sideways scrolling (issue 74)."""
    nb = docs.process(ROOT / "nbs" / f"{stem}.ipynb")
    blocks = [c.source for c in nb.cells if c.cell_type == "code"
              and not {"hide-input", "remove-input", "remove-cell"} & set(c.metadata.get("tags", []))]
    blocks += [m.group(2) for c in nb.cells if c.cell_type == "markdown" for m in _re_fenced.finditer(c.source)]
    long = [line for b in blocks for line in b.splitlines() if len(line) > CODE_WIDTH]
    assert not long, f"{stem}: {len(long)} lines of shown code over {CODE_WIDTH} characters: {long[:3]}"


# ---------------------------------------------------------------------------------------------------------------
# In a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _need_browser():
    why = None
    if CHROMIUM is None: why = "Chromium is not installed (Debian: apt-get install chromium)"
    elif importlib.util.find_spec("playwright") is None: why = "Playwright is not installed (pip install -e '.[dev]')"
    if why and os.environ.get("CI"): pytest.fail(f"the browser test must run in CI, but {why}")
    if why: pytest.skip(why)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args): pass


@pytest.fixture(scope="module")
def site():
    "Build the site with the README's command (its function; Sphinx warnings fail it), serve it on 127.0.0.1."
    _need_browser()
    t0 = time.perf_counter()
    out = docs.build_site(strict=True)
    print(f"\nsite built in {time.perf_counter() - t0:.1f} s")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser(site):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)  # a fresh temporary profile
        yield b
        b.close()


@pytest.fixture
def page(browser, site):
    "A page that records every request, and every failed response, the site makes."
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.requests, pg.errors = [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("response", lambda r: r.status >= 400 and pg.errors.append(f"{r.status} {r.url}"))
    pg.on("requestfailed", lambda r: pg.errors.append(f"failed {r.url}"))
    yield pg
    external = [u for u in pg.requests if not u.startswith(site) and not u.startswith(("data:", "blob:", "about:"))]
    assert not external, f"the page requested URLs outside the local site: {external}"
    errors = [e for e in pg.errors if not e.endswith("/favicon.ico")]
    assert not errors, f"requests that failed: {errors}"
    context.close()


def _open(pg, url):
    response = pg.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url} did not load: {response and response.status}"
    from playwright.sync_api import TimeoutError
    try:
        pg.wait_for_function("() => !document.querySelector('.math') || (window.MathJax && MathJax.startup"
                             " && MathJax.startup.promise)", timeout=10_000)
    except TimeoutError:
        pytest.fail(f"{url} has math but MathJax did not start (failed requests: {pg.errors})")
    pg.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")


_WIDE = """() => {
  // Every block wider than its box: cut (its box hides the overflow, or it sticks out of the text column), or in a
  // box that scrolls sideways, whose scrollbar must be drawn always (a styled ::-webkit-scrollbar), not overlaid.
  const article = document.querySelector('article'), cut = [], hidden = new Set();
  for (const el of article.querySelectorAll('*')) {
    if (el.closest('mjx-assistive-mml')) continue;  // MathJax's copy for screen readers, invisible by design
    const r = el.getBoundingClientRect();
    if (!r.width) continue;
    let box = el.parentElement;
    while (box !== article && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    if (r.right <= box.getBoundingClientRect().right + 1) continue;
    const ox = getComputedStyle(box).overflowX;
    if (box === article || ox === 'hidden' || ox === 'clip')
      cut.push(`<${el.tagName.toLowerCase()}> ${(el.textContent || '').trim().slice(0, 60)}`);
    else if (getComputedStyle(box, '::-webkit-scrollbar').height === 'auto') hidden.add(box);
  }
  return {cut: cut.slice(0, 5), hidden: Array.from(hidden).slice(0, 5)
          .map(b => `<${b.tagName.toLowerCase()}> ${b.textContent.trim().slice(0, 60)}`)};
}"""


_ARTICLE_TEXT = """() => {
  const copy = (document.querySelector('article') || document.body).cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container').forEach(e => e.remove());
  return copy.textContent;
}"""


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=PAGES)
def test_page(page, site, nb_path):
    _open(page, site + docs.page_name(nb_path) + ".html")
    assert page.locator("article h1").first.inner_text().strip() == docs.page_title(nb_path.stem, first_heading(nb_path))

    sidebar = page.evaluate("""() => Array.from(document.querySelectorAll('.bd-sidebar-primary nav a.reference'))
        .map(a => [a.textContent.trim(), a.getAttribute('href')])""")
    assert [t for t, _ in sidebar] == [docs.page_title(p.stem, first_heading(p)) for p in NOTEBOOKS], \
        "sidebar: every notebook, in order, with the chapter label the prose uses"
    this = docs.page_name(nb_path)
    assert [h for _, h in sidebar] == ["#" if n == this else f"{n}.html" for n in PAGES], "sidebar links"

    untypeset = page.evaluate("""() => Array.from(document.querySelectorAll('.math'))
        .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80))""")
    assert not untypeset, f"math MathJax did not typeset: {untypeset[:5]}"
    tex_errors = page.evaluate("() => Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent)")
    assert not tex_errors, f"TeX errors: {tex_errors[:5]}"
    text = page.evaluate(_ARTICLE_TEXT)
    raw = re.findall(r"\$[^$\n]{1,80}\$|\\\(|\\\[", text)
    assert not raw, f"raw TeX left in the page's text: {raw[:5]}"

    wide = page.evaluate(_WIDE)
    assert not wide["cut"], f"content cut at the right edge instead of scrolling: {wide['cut']}"
    assert not wide["hidden"], f"wide blocks that scroll with a scrollbar that can be hidden: {wide['hidden']}"

    images = page.evaluate("""() => Array.from(document.querySelectorAll('article img'))
        .map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}))""")
    broken = [i["src"] for i in images if not i["ok"]]
    assert not broken, f"images that did not load: {broken}"
    stored = sum(any(k.startswith("image/") for k in o.get("data", {}))
                 for c in docs.process(nb_path).cells for o in c.get("outputs", []))
    assert len(images) >= stored, f"{len(images)} images on the page, {stored} image outputs in {nb_path.name}"


def test_site_has_one_page_per_notebook(site):
    pages = {p.stem for p in (ROOT / docs.settings()["doc_path"]).glob("*.html")}
    assert pages == set(PAGES) | {"search", "genindex"}, "pages that match no notebook, or notebooks with no page"


_LINKS = """() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"""
_LANDS = """id => {
  const el = document.getElementById(id);
  if (!el) return false;
  const r = el.getBoundingClientRect();
  return r.top >= -2 && r.top < window.innerHeight;
}"""


def test_links(page, site):
    """Follow every link of every page. A link into the site (another page, an anchor, a file) must find its target:
    the page or file exists, and the browser, sent to `page.html#id`, shows the element with that id. A link out of
    the site must be on the allow-list (the URLs the notebooks' Markdown writes), never to nbdev's placeholder hosts."""
    from urllib.parse import unquote, urldefrag
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    links = {}  # target URL -> a page that links to it
    for name in PAGES + ["genindex", "search"]:
        _open(page, site + name + ".html")
        for url in page.evaluate(_LINKS): links.setdefault(url, name)
    outside = sorted(u for u in links if not u.startswith(site))
    unset = [u for u in outside if any(h in u for h in UNSET_HOSTS)]
    assert not unset, f"links to hosts nobody set up: {unset}"
    stray = [f"{u} (on {links[u]}.html)" for u in outside if u not in ALLOWED_URLS and not u.startswith(PUBLISHED)]
    assert not stray, f"links out of the site that no notebook's Markdown makes: {stray}"

    inside = {}  # page or file -> the ids links want on it
    for url in links:
        if url.startswith(site):
            target, frag = urldefrag(url)
            inside.setdefault(target, set()).update([unquote(frag)] if frag else [])
    missed = []
    for target, ids in sorted(inside.items()):
        if not target.endswith(".html"):
            response = page.request.get(target)
            if not response.ok: missed.append(f"{target}: {response.status}")
            elif target.endswith(".ipynb"): assert "cells" in response.json(), target
            continue
        response = page.goto(target, wait_until="load")
        if response is None or not response.ok:
            missed.append(f"{target}: {response and response.status}")
            continue
        for id_ in sorted(ids):
            if not page.evaluate("id => !!document.getElementById(id)", id_):
                missed.append(f"{target}#{id_} (no such id)")
                continue
            page.evaluate("id => { location.hash = '#' + id }", id_)
            try: page.wait_for_function(_LANDS, arg=id_, timeout=3_000)
            except PlaywrightTimeout: missed.append(f"{target}#{id_} (not scrolled into view)")
    n_links = sum(len(ids) or 1 for ids in inside.values())
    print(f"\n{len(links)} distinct links on {len(PAGES) + 2} pages: {n_links} targets in the site "
          f"({len(inside)} pages and files), {len(outside)} outside it")
    assert not missed, f"{len(missed)} links that miss their target (first 20): {missed[:20]}"


def test_search_finds_lcrs(page, site):
    _open(page, site + "search.html?q=LCRS")
    # Sphinx adds the hits one by one and then writes its summary: wait for the summary, not the first hit
    page.wait_for_function("""() => /found|did not match/.test(
        document.querySelector('#search-results .search-summary')?.textContent || '')""")
    hits = page.evaluate("() => Array.from(document.querySelectorAll('#search-results ul.search li a'))"
                         ".map(a => a.getAttribute('href'))")
    assert hits, 'searching for "LCRS" found nothing'
    assert any(h.startswith("trees.html") for h in hits), hits


def test_search_finds_a_notebook_by_its_file_name(page, site):
    "The README names chapters by file (`06a_own_transformer`): searching the site for one finds its page."
    _open(page, site + "search.html?q=06a_own_transformer")
    page.wait_for_function("""() => /found|did not match/.test(
        document.querySelector('#search-results .search-summary')?.textContent || '')""")
    hits = page.evaluate("() => Array.from(document.querySelectorAll('#search-results ul.search li a'))"
                         ".map(a => a.getAttribute('href'))")
    assert any(h.startswith("own_transformer.html") for h in hits), hits


def test_screenshots(page, site):
    "Two pages for people to look at: the top of the stack chapter, and the first plot of the sequence chapter."
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    _open(page, site + "stack.html")
    page.screenshot(path=SCREENSHOTS / "stack.png")
    _open(page, site + "sequence.html")
    page.locator("article img").first.scroll_into_view_if_needed()
    page.evaluate("() => window.scrollBy(0, -250)")
    page.screenshot(path=SCREENSHOTS / "sequence-plot.png")
    for name in ("stack.png", "sequence-plot.png"):
        assert (SCREENSHOTS / name).stat().st_size > 10_000, f"{name} looks empty"


_FIT = """() => {
  // The page is no wider than the window, no shown code block or table is wider than its box (folded code, inside
  // a closed <details>, is not shown), and no entry of the page's outline sticks out of it.
  const wide = [];
  for (const el of document.querySelectorAll('article pre, article table')) {
    if (!el.getClientRects().length || el.closest('details:not([open])')) continue;
    const r = el.getBoundingClientRect(), box = el.parentElement.getBoundingClientRect();
    const parent = el.parentElement;
    if (el.scrollWidth > el.clientWidth + 1 || r.right > box.right + 1 || parent.scrollWidth > parent.clientWidth + 1)
      wide.push(`<${el.tagName.toLowerCase()}> ${el.textContent.trim().slice(0, 60)}`);
  }
  const outline = document.querySelector('.bd-sidebar-secondary');
  const right = outline ? outline.getBoundingClientRect().right : 0;
  for (const a of outline ? outline.querySelectorAll('nav a') : [])
    if (a.getBoundingClientRect().right > right + 1) wide.push(`outline: ${a.textContent.trim().slice(0, 60)}`);
  return {page: document.documentElement.scrollWidth, window: innerWidth, wide: wide,
          height: document.documentElement.scrollHeight};
}"""
FIT_PAGES = ["index", "own_transformer", "which_encoding"]


@pytest.mark.parametrize("width", [1280, 1366, 1440])
@pytest.mark.parametrize("name", FIT_PAGES)
def test_pages_fit_a_laptop_window(browser, site, name, width):
    """The home page, "Your own transformer" and "Which encoding when" read without sideways scrolling in a laptop's
    window (issue 74): tables wrap their cells and inline code (those folded in an output too, once opened), shown
    code keeps to 100 characters a line. A screenshot of each at 1366x768, the first screen, goes to
    build/screenshots/ (before anything is opened)."""
    context = browser.new_context(viewport={"width": width, "height": 768})
    pg = context.new_page()
    _open(pg, site + name + ".html")
    if width == 1366:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=SCREENSHOTS / f"{name}-1366x768.png")
    pg.evaluate("() => document.querySelectorAll('.cell_output details').forEach(d => { d.open = true; })")
    pg.wait_for_timeout(300)                                # results folded in an output (13's rows): open
    fit = pg.evaluate(_FIT)
    print(f"\n{name} at {width} px: {fit['height']} px tall")
    assert fit["page"] <= fit["window"], f"{name} scrolls sideways at {width} px: {fit['page']} px wide"
    assert not fit["wide"], f"{name} at {width} px: blocks wider than their box: {fit['wide'][:5]}"
    context.close()


_ANSWER_FIRST = """() => {
  const article = document.querySelector('article'), top = e => e ? e.getBoundingClientRect().top + scrollY : null;
  const short = Array.from(article.querySelectorAll('h2')).find(h => h.textContent.trim().startsWith('In short'));
  const table = article.querySelector('table');
  const code = Array.from(article.querySelectorAll('.cell_input pre'))
    .find(p => p.getClientRects().length && !p.closest('details:not([open])'));
  let answer = short && short.closest('section').querySelector('.cell_output ul');
  return {short: top(short), table: top(table), code: top(code), answer: top(answer),
          items: answer ? Array.from(answer.children).map(li => li.textContent.trim()) : [], screen: innerHeight};
}"""


def test_which_encoding_answers_first(browser, site):
    """"Which encoding when" opens with its answer: the "In short" heading on the first screen, then the computed
    answer (a line per family of tasks), before the chapter's first table and before any code the page shows."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    pg = context.new_page()
    _open(pg, site + "which_encoding.html")
    at = pg.evaluate(_ANSWER_FIRST)
    assert at["short"] is not None and at["short"] < at["screen"], f"no 'In short' on the first screen: {at}"
    assert at["answer"] is not None and at["answer"] < at["table"], f"the answer comes after the first table: {at}"
    assert at["code"] is None or at["answer"] < at["code"], f"code is shown before the answer: {at}"
    assert len(at["items"]) >= 5 and all(":" in i for i in at["items"]), at["items"]
    context.close()
