"""Sphinx configuration of the dpcausal documentation site (built by ``./dev docs``)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the orchestration project (cli/, conf/, ...) runs from the checkout
os.environ.setdefault("MPLBACKEND", "Agg")

import dpcausal  # noqa: E402

project = "dpcausal"
author = "the dpcausal authors"
copyright = "the dpcausal authors"
release = version = dpcausal.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinx_click",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "examples/README.rst", "examples/GALLERY_HEADER.rst",
                    "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.md5", "auto_examples/*.json"]
root_doc = "index"

# MyST: the guide is markdown; `$...$` maths and `{include}` of files outside docs/.
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# API reference from the numpydoc docstrings: members listed on the page, no autosummary stubs.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"undoc-members": False, "show-inheritance": False}
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

intersphinx_mapping: dict[str, tuple[str, None]] = {}

# The executed gallery: small, fast versions of the papers' experiments and public-data examples
# (the full experiments are `dpcausal reproduce`). Each example runs at every build.
sphinx_gallery_conf = {
    "examples_dirs": ["examples"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "show_memory": False,
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "min_reported_time": 0,
}

html_theme = "pydata_sphinx_theme"
html_title = "dpcausal"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False


def _skip_inherited_plumbing(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods are routing plumbing, not dpcausal's
    API (their docstrings point into scikit-learn's own glossary)."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


_RST_ACTIVE = re.compile(r"[*|`]|(?<=\w)_(?=\W|$)")


def _click_text_as_plain(app, ctx, lines):
    """The commands' help is plain text for a terminal (``runner.*``, ``a|b``, a quoted
    `command`), not reStructuredText: escape what docutils would read as markup, in place."""
    lines[:] = [line if line.lstrip().startswith(".. ") else
                _RST_ACTIVE.sub(lambda m: "\\" + m.group(0), line) for line in lines]


def setup(app):
    app.connect("autodoc-skip-member", _skip_inherited_plumbing)
    for part in ("description", "options", "arguments", "epilog"):
        app.connect(f"sphinx-click-process-{part}", _click_text_as_plain)
