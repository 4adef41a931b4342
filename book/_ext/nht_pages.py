"""Sphinx extension: how the book's pages look, beyond the theme.

* **The page's stylesheet and script** (``book/_static``): a tap on a figure opens it full size; long API signatures
  and code wrap on a phone; claims tables keep their verdict in view.

Figures are numbered by Sphinx (``numfig`` in ``_config.yml``, per chapter through the numbered part of ``_toc.yml``)
and referred to with {numref}; nothing here touches the numbering.
"""
from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

STATIC = Path(__file__).resolve().parent.parent / "_static"


def _add_static_path(app: Sphinx, config: Config) -> None:
    config.html_static_path = [*config.html_static_path, str(STATIC)]


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _add_static_path, priority=900)
    app.add_css_file("nht.css")
    app.add_js_file("nht.js")
    return {"version": "1.1", "parallel_read_safe": True, "parallel_write_safe": True}
