"""pytest plugin of the book: the chapter notebooks as nbval items (``pytest --nbval-lax notebooks``, as ``make
test`` runs them), one item per cell, at smoke scale.

Every chapter is executed once in ``make test``: the executed cells' outputs are kept and, when every cell of a
chapter passed, written as that chapter's results (``executed.ipynb`` with its provenance box, ``run.json``; as
the chapter runner writes them, `nhtlib.cli.runner.finish_run`) into a results folder shared with the book test
(``$NHT_BOOK_RESULTS``), whose site build then finds every chapter up to date and executes none again.
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

BOOK_RESULTS_ENV = "NHT_BOOK_RESULTS"


def _nbval_on(config) -> bool:
    return bool(getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False))


def pytest_configure(config):
    if not _nbval_on(config):
        return
    # the kernels inherit this environment: smoke scale, results in one folder for the whole session
    os.environ.setdefault("NHT_SCALE", "smoke")
    if BOOK_RESULTS_ENV not in os.environ:
        os.environ[BOOK_RESULTS_ENV] = config._nht_made = tempfile.mkdtemp(prefix="nht-book-results-")
    os.environ["NHT_RESULTS"] = os.environ[BOOK_RESULTS_ENV]
    config._nht_chapters = {}


def pytest_unconfigure(config):
    made = getattr(config, "_nht_made", None)
    if made:  # the session's own results folder (one named by $NHT_BOOK_RESULTS is the caller's)
        import shutil

        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(BOOK_RESULTS_ENV, None)


def _is_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if not _is_cell(item):
        return
    chapters = item.config._nht_chapters
    path = Path(str(item.parent.fspath))
    if path.stem not in chapters:
        from nhtlib.cli.runner import chapter_runs

        os.environ["NHT_RESULTS"] = os.environ[BOOK_RESULTS_ENV]  # tests in between may have changed it
        chapters[path.stem] = {"runs": chapter_runs(path.stem, {}, notebook_dir=path.parent), "failed": False,
                               "started": time.time(), "t0": time.perf_counter()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if not _is_cell(item) or call.when != "call":
        return
    state = item.config._nht_chapters.get(Path(str(item.parent.fspath)).stem)
    if state is None:
        return
    if outcome.get_result().failed:
        state["failed"] = True
    elif item.test_outputs is not None:
        item.cell.outputs = item.test_outputs  # the notebook nbval read, now with this cell's outputs


def pytest_runtest_teardown(item, nextitem):
    if not _is_cell(item) or (nextitem is not None and nextitem.parent is item.parent):
        return
    path = Path(str(item.parent.fspath))
    state = item.config._nht_chapters.get(path.stem)
    if state is None or state["failed"]:
        return
    import nbformat

    from nhtlib.cli.runner import finish_run
    from nhtlib.paths import final_chapter_dir

    wall = time.perf_counter() - state["t0"]
    folder = final_chapter_dir(path.stem, os.environ.get("NHT_SCALE", "smoke"))
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(item.parent.nb, str(folder / "executed.ipynb"))
    finish_run(path, folder / "executed.ipynb", {}, state["runs"], state["started"], wall)
