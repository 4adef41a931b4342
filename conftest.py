"""pytest plugin of the book: the chapter notebooks as nbval items (``pytest --nbval-lax notebooks``, as ``make
test`` runs them), one item per cell, at smoke scale.

Every chapter is executed once in ``make test``, staged as the chapter runner stages it (`nhtlib.cli.runner`):
before nbval starts a notebook's kernel (its first cell's setup, `pytest_runtest_setup` tryfirst, runs before
pytest sets up the notebook item, whose setup starts the kernel), $NHT_CHAPTER_OUT points at a fresh staging area,
so the kernel writes its results there; when every cell of the chapter passed, the executed cells' outputs are
written there as ``executed.ipynb``, `finish_run` adds the provenance box and ``run.json`` (with its manifest), and
the runner's `swap_in` moves it into the results folder shared with the book test (``$NHT_BOOK_RESULTS``), whose
site build then finds every chapter up to date and executes none again. A chapter with a failed cell is discarded:
its results folder keeps what it had.
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
    open_areas = [s["staging"] for s in getattr(config, "_nht_chapters", {}).values() if s.get("staging")]
    if open_areas:  # a session stopped inside a chapter: its staging area goes
        from nhtlib.cli.runner import discard

        for staging in open_areas:
            discard(staging)
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
    if path.stem not in chapters:  # the notebook's first cell: its kernel is not started yet
        from nhtlib.cli.runner import cache_snapshot, chapter_runs, open_staging
        from nhtlib.paths import CHAPTER_OUT_ENV, final_chapter_dir

        os.environ["NHT_RESULTS"] = os.environ[BOOK_RESULTS_ENV]  # tests in between may have changed it
        scale = os.environ.get("NHT_SCALE", "smoke")
        runs = chapter_runs(path.stem, {}, notebook_dir=path.parent)
        staging = open_staging(path.stem, scale, final_chapter_dir(path.stem, scale))
        os.environ[CHAPTER_OUT_ENV] = str(staging.staged)  # the kernel nbval starts next inherits it
        chapters[path.stem] = {"runs": runs, "staging": staging, "before": cache_snapshot(runs.keys),
                               "failed": False, "started": time.time(), "t0": time.perf_counter()}


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
    if state is None or state.get("staging") is None:
        return
    from nhtlib.cli.runner import discard, finish_run, swap_in, trained_since
    from nhtlib.paths import CHAPTER_OUT_ENV

    staging, state["staging"] = state["staging"], None
    os.environ.pop(CHAPTER_OUT_ENV, None)
    try:
        if not state["failed"]:
            import nbformat

            wall = time.perf_counter() - state["t0"]
            executed = staging.staged / "executed.ipynb"
            nbformat.write(item.parent.nb, str(executed))
            finish_run(path, executed, {}, state["runs"], state["started"], wall,
                       trained=trained_since(state["before"]))
            swap_in(staging)
    finally:
        discard(staging)
