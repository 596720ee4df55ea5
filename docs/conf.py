"""Sphinx configuration of tidemark's documentation (``make docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))  # document this checkout
sys.path.insert(0, str(HERE / "_ext"))

import tidemark  # noqa: E402

project = "tidemark"
author = "the tidemark authors"
copyright = "the tidemark authors, Apache-2.0"
version = release = tidemark.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "timelines",  # draws the concept pages' pictures by running docs/examples/concepts.py
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_generated", "_templates", "examples", "Thumbs.db", ".DS_Store"]
root_doc = "index"
templates_path = ["_templates"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
toc_object_entries_show_parents = "hide"  # "On this page" lists method names, not full paths
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

html_theme = "pydata_sphinx_theme"
html_title = "tidemark"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 5,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
# Pages without sub-pages get no left sidebar (it would be an empty "Section Navigation").
html_sidebars = {
    page: []
    for page in (
        "index",
        "getting-started",
        "modes",
        "panes",
        "streaming",
        "deploying",
        "testing",
        "watching",
        "flink-names",
        "errors",
        "internals",
    )
}
html_static_path = ["_static"]
html_css_files = ["tidemark.css"]


def _numpydoc_with_support_sections() -> None:
    """Render tidemark's "Supported" / "Not supported" docstring sections (STYLE.md).

    numpydoc drops sections it does not know; these two are kept and rendered as
    headed sections after "Warns" (where "Warnings" go), before "See Also" and "Notes".
    """
    from numpydoc import docscrape, docscrape_sphinx

    extra = ("Supported", "Not Supported")
    for name in extra:
        docscrape.NumpyDocString.sections.setdefault(name, [])
    plain_warnings = docscrape_sphinx.SphinxDocString._str_warnings

    def _str_warnings(self):  # type: ignore[no-untyped-def]
        out = []
        for name in extra:
            out += self._str_section(name)
        return out + plain_warnings(self)

    docscrape_sphinx.SphinxDocString._str_warnings = _str_warnings


_numpydoc_with_support_sections()


def _skip_class_aliases(app, what, name, obj, skip, options):  # type: ignore[no-untyped-def]
    """Classes set on another class as aliases (PyFlink's ``Trigger.TriggerContext``)
    are documented once, under their own name."""
    if what == "class" and isinstance(obj, type):
        return True
    return None


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-skip-member", _skip_class_aliases)
