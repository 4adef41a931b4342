"""Sphinx extension: how the book's pages look, beyond the theme.

* **One figure number.** Captions carry their chapter's number, typed ("Fig. 2.1 — …", referenced as
  {ref}`Fig. 2.1 <fig-2-1>`). Jupyter Book turns Sphinx's ``numfig`` on whatever ``_config.yml`` says, which put a
  book-wide "Fig. 5" before every caption; this turns it off again once the configuration is read.
* **The page's stylesheet and script** (``book/_static``): a tap on a figure opens it full size; long API signatures
  and code wrap on a phone; claims tables keep their verdict in view.
"""
from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config

STATIC = Path(__file__).resolve().parent.parent / "_static"


def _one_figure_number(app: Sphinx, config: Config) -> None:
    config.numfig = False
    config.html_static_path = [*config.html_static_path, str(STATIC)]


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _one_figure_number, priority=900)
    app.add_css_file("nht.css")
    app.add_js_file("nht.js")
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
