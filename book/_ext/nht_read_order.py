"""Sphinx extension: read (and so execute) the Scoreboard page after every chapter.

Sphinx reads documents in sorted docname order (``sphinx/builders/__init__.py``, ``Builder.read``:
``docnames = sorted(added | changed)``, then emits ``env-before-read-docs`` with that list, which handlers may
reorder in place). myst-nb executes a notebook while reading it, so ``book/scoreboard`` would run before
``notebooks/01_...`` and find no claims. This extension moves the scoreboard to the end of the list, and makes
Sphinx re-read it whenever any other document is re-read (so an incremental build never shows stale claims).
"""
from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

LAST_DOCS = ("book/scoreboard",)


def _read_last(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    for docname in LAST_DOCS:
        if docname in docnames:
            docnames.remove(docname)
            docnames.append(docname)


def _reread_scoreboard(app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str],
                       removed: set[str]) -> list[str]:
    if added or changed or removed:
        return [d for d in LAST_DOCS if d in env.found_docs]
    return []


def setup(app: Sphinx) -> dict:
    app.connect("env-get-outdated", _reread_scoreboard)
    app.connect("env-before-read-docs", _read_last)
    return {"version": "1.0", "parallel_read_safe": False, "parallel_write_safe": True}
