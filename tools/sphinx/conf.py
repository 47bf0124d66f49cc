# Sphinx configuration for the offline documentation site built by `python tools/docs.py`.
# The sources are the nbdev-processed notebooks that tools/docs.py writes to build/docs/src/; nothing is executed.
# Site metadata comes from settings.ini, like everything else in this nbdev 2 project.
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
# No widget manager from a CDN: tools/docs.py has already replaced widgets by their static output.
nb_ipywidgets_js = {}

# MathJax 3 from this site's own _static folder (tools/docs.py copies it there), never from a CDN.
mathjax_path = "mathjax/tex-mml-chtml.js"

html_theme = "sphinx_book_theme"
html_title = _s["title"]
html_theme_options = {
    "repository_url": _s["git_url"],
    "repository_branch": _s["branch"],
    "path_to_docs": _s["nbs_path"],
    "use_repository_button": True,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navbar_persistent": [],
}
html_static_path = ["_static"]
html_css_files = ["showdoc.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
exclude_patterns = ["**.ipynb_checkpoints"]
