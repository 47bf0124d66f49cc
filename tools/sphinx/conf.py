# Sphinx configuration for the offline documentation site built by `python tools/docs.py`.
# The sources are the nbdev-processed notebooks that tools/docs.py writes to build/docs/src/; nothing is executed.
# Site metadata comes from settings.ini, like everything else in this nbdev 2 project.
import json
from configparser import ConfigParser
from pathlib import Path

_root = Path(__file__).resolve().parents[2]
_cfg = ConfigParser(delimiters=["="])
_cfg.read(_root / "settings.ini", encoding="utf-8")
_s = _cfg["DEFAULT"]

project = _s["title"]
author = _s["author"]
copyright = _s["copyright"]
release = version = _s["version"]

extensions = ["myst_nb"]

# Notebooks keep their outputs: render them as stored (fast, no kernel); plots are the stored PNGs.
nb_execution_mode = "off"
# Markdown outputs (nbdev's show_doc) are parsed as MyST, so their math and `{...}` link attributes render too.
nb_render_markdown_format = "myst"
myst_enable_extensions = ["dollarmath", "amsmath", "attrs_inline"]
myst_heading_anchors = 3
# Links are written out as given: tools/docs.py links API names to `page.html#anchor` itself (anchors MyST does not
# know, so it would warn), and `#section` links keep their target; tests/test_docs.py follows every one of them.
myst_all_links_external = True
# No widget manager from a CDN: tools/docs.py has already replaced widgets by their static output.
nb_ipywidgets_js = {}

# MathJax 3 from this site's own _static folder (tools/docs.py copies it there), never from a CDN.
mathjax_path = "mathjax/tex-mml-chtml.js"

html_theme = "sphinx_book_theme"
html_title = _s["title"]
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navbar_persistent": [],
}
# The repository button only where settings.ini's `repo_url` names a published repository (empty by default: nbdev's
# `git_url` is a placeholder that nobody has set up, and the site links to no host it does not need).
if _s.get("repo_url", "").strip():
    html_theme_options.update(repository_url=_s["repo_url"].strip(), repository_branch=_s["branch"],
                              path_to_docs=_s["nbs_path"], use_repository_button=True)
html_static_path = ["_static"]
html_css_files = ["showdoc.css"]
html_js_files = ["tables.js"]   # long names in tables may break after their punctuation
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
exclude_patterns = ["**.ipynb_checkpoints"]


def _download_the_notebook(app, pagename, templatename, context, doctree):
    """The theme's download button links to `_sources/<sourcename>`: make that the page's notebook as it is in
    `nbs/` (tools/docs.py copies the notebooks there and writes the page -> notebook map beside the sources)."""
    notebooks = json.loads((Path(app.srcdir) / "notebooks.json").read_text(encoding="utf-8"))
    if pagename in notebooks: context["sourcename"] = notebooks[pagename]


def setup(app):
    app.connect("html-page-context", _download_the_notebook, priority=400)  # before the theme's buttons (501)
