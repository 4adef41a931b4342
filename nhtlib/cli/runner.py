"""Run one chapter notebook of the book with papermill, with its parameters checked first.

Command line::

    python -m nhtlib list
    python -m nhtlib run 01_toy_norm_hierarchy -p scale cpu -p seed 1 [--out PATH]
    python -m nhtlib plan 03_border_cifar -p scale paper --device h200   (or: plan all)

``plan`` trains nothing: it prints the compute planner's table (`nhtlib.engine.plan`) — per batched group the runs,
members per call, FLOPs, peak memory, estimated time and the data it reads — and whether the data check that
runs before training would pass.

`-p NAME VALUE` is parsed like papermill's `-p` (``True``/``False``/``None``, int, float, else a string).
Parameter *names* are checked against the notebook's cell tagged ``parameters`` before anything runs; an unknown
name fails with a message naming it and the allowed ones. Parameter *values* are checked by the notebook itself
(its first cell builds ``nht.ChapterParams``), and its error (e.g. ``ConfigError: scale='huge' is not allowed``)
is reported as the reason the run failed.

Where results go (no run ever leaves a mixture of old and new, or replaces good results by a failure):

- The notebook runs with its outputs redirected (``$NHT_CHAPTER_OUT``, see :func:`nhtlib.paths.chapter_dir`) into a
  staging area ``results/.staging/<unique>/<scale>/<chapter>/`` (`open_staging`). A notebook executed without it
  (plain papermill, Jupyter) writes to ``results/<scale>/unstaged/<chapter>/``, which the book never reads.
- On success the runner adds the run tables (`nhtlib.report.exports.write_tables`), ``executed.ipynb`` with its
  provenance box and ``run.json`` (parameters passed, those that differ from the parameters cell's defaults, seed,
  scale, git commit, nhtlib source hash, page identity, runs trained and cached as counted from the cache, the
  runs' environments, times, and the manifest: the sha256 of every file, `nhtlib.report.manifest`), then swaps the
  staging folder in place of the chapter's results folder (`swap_in`: two renames on one filesystem, journalled in
  the staging area's ``swap.json``; a kill between any two steps is finished by the next run or build,
  `recover_staging`). So ``claims.csv`` always matches ``executed.ipynb`` and its run.json, and anything written
  into the folder afterwards makes it "foreign" (`nhtlib.report.manifest.check_folder`).
- On failure the results folder keeps its last good contents; the failed executed notebook is written beside them
  as ``failed.ipynb`` (removed by the next successful run) and the ChapterError names it. Every failure outside a
  cell (a dead kernel, a full disk, a bad ``--out``) is one line: what failed, the file, the fix; the staging area
  is always removed.
- The results folder depends on the seed and the settings: the book's own run (seed 0, every chapter's default, and
  the notebook's defaults for every parameter but `BOOK_SETTINGS`) uses ``results/<scale>/<chapter>/``, which the
  Scoreboard reads; any other seed ``s`` uses ``results/<scale>/seed-<s>/<chapter>/``, and other settings (e.g.
  ``-p clean_threshold 0.3``) ``results/<scale>/variant-<hash>/<chapter>/`` (see
  :func:`nhtlib.paths.final_chapter_dir`), so neither ever replaces the book's results.
- ``--out PATH`` writes a copy of the executed (or failed) notebook to PATH as well: its folder must exist and be
  writable (checked before the run; the copy is made after the swap, so it never costs the run its results).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import errno
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator
from unittest import mock

from nhtlib.config import SCALES, ConfigError
from nhtlib.paths import (CHAPTER_OUT_ENV, __version__, atomic_write_bytes, final_chapter_dir, git_commit,
                          holder_alive, repo_root, results_root, source_hash, writable_dir)

KERNEL_NAME = "python3"


class ChapterError(RuntimeError):
    """A chapter could not be run: the notebook raised an error (or see :class:`ChapterUsageError`)."""


class ChapterUsageError(ChapterError):
    """Unknown chapter or unknown parameter name: nothing was executed."""


def notebooks_dir() -> Path:
    """The book's ``notebooks/`` folder (requires nhtlib to be used from a checkout of the book)."""
    root = repo_root()
    if root is None:
        raise ChapterError("nhtlib is not installed from a checkout of the book (no notebooks/ folder found); "
                           "install it with `pip install -e .` from the repository")
    return root / "notebooks"


def list_chapters(notebook_dir: str | os.PathLike | None = None) -> list[str]:
    """Names of the chapter notebooks (file stems of ``notebooks/*.ipynb``), sorted."""
    folder = Path(notebook_dir) if notebook_dir is not None else notebooks_dir()
    return sorted(p.stem for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def notebook_path(name: str, notebook_dir: str | os.PathLike | None = None) -> Path:
    """The notebook of chapter `name` (with or without the ``.ipynb`` suffix)."""
    folder = Path(notebook_dir) if notebook_dir is not None else notebooks_dir()
    stem = name[:-len(".ipynb")] if name.endswith(".ipynb") else name
    path = folder / f"{stem}.ipynb"
    if not path.exists():
        available = list_chapters(folder)
        raise ChapterUsageError(f"unknown chapter {stem!r}; available: {', '.join(available) or '(none)'} "
                           f"(in {folder})")
    return path


def _parameters_cell_names(path: Path) -> list[str]:
    """Names assigned in the cell tagged ``parameters`` (also those papermill's parser misses, e.g. ``x: A | B``)."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    names: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            for node in tree.body:
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AnnAssign) else [])
                for target in targets:
                    if isinstance(target, ast.Name) and target.id not in names:
                        names.append(target.id)
            break
    return names


def notebook_parameters(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The parameters a notebook accepts: name -> {'default', 'inferred_type_name', 'help'} (papermill's view)."""
    import papermill as pm

    path = Path(path)
    inspected = dict(pm.inspect_notebook(str(path)))
    found = {}
    for name in _parameters_cell_names(path):  # cell order; papermill skips e.g. `data_root: str | None = None`
        found[name] = inspected.get(name, {"name": name, "inferred_type_name": "None", "default": None, "help": ""})
    for name, info in inspected.items():
        found.setdefault(name, info)
    return found


class _KnownParameterFilter(logging.Filter):
    """Drop papermill's 'Passed unknown parameter' warning for names checked against the parameters cell."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        prefix = "Passed unknown parameter: "
        return not (message.startswith(prefix) and message[len(prefix):] in self.names)


def parse_value(text: str) -> Any:
    """Parse a command-line value like papermill's ``-p``: True/False/None, int, float, else str."""
    if text == "True":
        return True
    if text == "False":
        return False
    if text == "None":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def check_parameters(path: Path, parameters: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Raise ChapterUsageError naming every parameter the notebook does not declare; return the declared ones
    (see notebook_parameters)."""
    allowed = notebook_parameters(path)
    if not allowed:
        raise ChapterUsageError(f"{path.name} has no cell tagged 'parameters'; it cannot be run with parameters")
    unknown = [name for name in parameters if name not in allowed]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        names = ", ".join(map(repr, unknown))
        raise ChapterUsageError(f"unknown parameter{plural} {names} for chapter {path.stem!r}; "
                                f"allowed: {', '.join(allowed)}")
    return allowed


def _scale_of(parameters: dict[str, Any]) -> str:
    scale = parameters.get("scale")
    return str(scale) if scale is not None else os.environ.get("NHT_SCALE", "cpu")


def _seed_of(parameters: dict[str, Any], declared: dict[str, dict[str, Any]]) -> Any:
    """The run's seed: the one passed, else the parameters cell's default when it is a literal, else None."""
    if "seed" in parameters:
        return parameters["seed"]
    try:
        return ast.literal_eval(str(declared["seed"]["default"])) if "seed" in declared else None
    except (ValueError, SyntaxError):
        return None


def _chapter_out(folder: Path):
    """$NHT_CHAPTER_OUT set for the kernel papermill starts (it inherits os.environ; not thread-safe), as it was
    after (unset too): a context manager."""
    return mock.patch.dict(os.environ, {CHAPTER_OUT_ENV: str(folder)})


@contextlib.contextmanager
def _quiet_known_parameters(names: set[str]) -> Iterator[None]:
    log_filter = _KnownParameterFilter(names)
    pm_logger = logging.getLogger("papermill")
    pm_logger.addFilter(log_filter)
    try:
        yield
    finally:
        pm_logger.removeFilter(log_filter)


# The staged swap ---------------------------------------------------------------------------------------------
# A run writes into results/.staging/<unique>/<scale>/<chapter>/ and swaps it in at the end. The staging folder's
# journal (swap.json: state, paths, owner pid and host) lets the next run or build finish a swap that a crash cut
# short: "running" (the notebook had not finished: discard), "swapping" (the new results are complete: move them
# in, from wherever the two renames stopped), "done" (only the clean-up was left).

STAGING = ".staging"
JOURNAL = "swap.json"
STALE_STAGING_S = 3600  # a staging folder without a journal (an older runner's) is removed once this old


@dataclasses.dataclass(frozen=True)
class Staging:
    """One run's staging area: `scratch` (results/.staging/<unique>/, removed at the end), `staged` (the folder
    the notebook writes, $NHT_CHAPTER_OUT: scratch/<scale>/<chapter>/) and `final` (the results folder it
    replaces)."""

    scratch: Path
    staged: Path
    final: Path

    @property
    def previous(self) -> Path:
        return self.scratch / "previous"  # the old results, between the two renames of the swap

    @property
    def journal(self) -> Path:
        return self.scratch / JOURNAL


def open_staging(chapter: str, scale: str, final: Path) -> Staging:
    """A fresh staging area (journal state "running") for a run of `chapter` whose results go to `final`; under
    results/, so that the swap's renames stay on one filesystem."""
    root = results_root() / STAGING
    root.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=root, prefix=f"{chapter}-"))
    staging = Staging(scratch, scratch / scale / chapter, final)
    try:
        _write_journal(staging, "running")
        staging.staged.mkdir(parents=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return staging


def _write_journal(staging: Staging, state: str) -> None:
    import socket

    journal = {"state": state, "staged": str(staging.staged), "final": str(staging.final), "pid": os.getpid(),
               "host": socket.gethostname()}
    atomic_write_bytes(staging.journal, json.dumps(journal, indent=1).encode())


def swap_in(staging: Staging) -> None:
    """Replace the folder `staging.final` by `staging.staged`: journal "swapping", rename the old folder aside,
    rename the new one in, journal "done". Killed between any two steps, `recover_staging` finishes the job; an
    error (e.g. a full disk) puts the old folder back and is raised. The caller removes the staging area."""
    staging.final.parent.mkdir(parents=True, exist_ok=True)
    _write_journal(staging, "swapping")  # from here on the new results are complete: recovery moves them in
    _finish_swap(staging)


def _finish_swap(staging: Staging) -> None:
    """Carry a swap on from wherever it stopped (idempotent), then journal "done"."""
    final, staged, previous = staging.final, staging.staged, staging.previous
    if staged.exists():
        if final.exists():
            if previous.exists():  # an older copy aside already (a swap retried): the one in place is newer
                shutil.rmtree(previous)
            os.replace(final, previous)
        try:
            os.replace(staged, final)
        except BaseException:
            if previous.exists() and not final.exists():
                os.replace(previous, final)
            raise
    elif not final.exists() and previous.exists():  # the new results are gone: the old ones go back
        os.replace(previous, final)
    _write_journal(staging, "done")


def discard(staging: Staging) -> None:
    """Remove the staging area (whatever it still holds)."""
    shutil.rmtree(staging.scratch, ignore_errors=True)


def _journal_staging(scratch: Path, journal: dict[str, Any]) -> Staging | None:
    """The staging area a journal describes, when its paths are where a journal may point (its staged folder in
    its scratch folder, its final folder under the results folder; never elsewhere: a planted journal moves
    nothing outside results/); else None."""
    try:
        staged, final = Path(journal["staged"]).resolve(), Path(journal["final"]).resolve()
    except (KeyError, TypeError, OSError):
        return None
    root = results_root().resolve()
    if not staged.is_relative_to(scratch.resolve()) or not final.is_relative_to(root) or final == root:
        return None
    if final.is_relative_to(root / STAGING):
        return None
    return Staging(scratch, staged, final)


def recover_staging() -> list[str]:
    """Finish or undo what crashed runs left in results/.staging/ and remove it: a swap cut short is completed
    (its new results moved in, or the old ones put back), a run that died before its swap is discarded, a folder
    without a journal older than STALE_STAGING_S is removed; areas of live runs are left alone. Returns one line
    per folder handled (also printed to stderr)."""
    root = results_root() / STAGING
    done = []
    for scratch in sorted(root.iterdir()) if root.is_dir() else []:
        if not scratch.is_dir():
            continue
        try:
            journal = json.loads((scratch / JOURNAL).read_text())
        except FileNotFoundError:
            journal = None
        except (OSError, ValueError):
            journal = {}  # damaged: the run wrote it atomically, so only a foreign hand did this
        if journal is None:
            if time.time() - scratch.stat().st_mtime > STALE_STAGING_S:
                shutil.rmtree(scratch, ignore_errors=True)
                done.append(f"removed {scratch} (an old staging folder without a journal)")
            continue
        if not isinstance(journal, dict) or holder_alive(journal):
            continue
        staging = _journal_staging(scratch, journal)
        state = journal.get("state")
        if staging is not None and state == "swapping":
            _finish_swap(staging)
            done.append(f"finished the swap of {staging.final} that a crash interrupted")
        elif staging is not None and state == "running":
            done.append(f"removed {scratch} (a run of {staging.final.name} that died before its swap)")
        else:
            done.append(f"removed {scratch} ({'done' if state == 'done' else 'an unusable journal'})")
        shutil.rmtree(scratch, ignore_errors=True)
    for line in done:
        print(f"recovered: {line}", file=sys.stderr)
    return done


def _keep_failed(executed: Path, final: Path, scale: str, output: Path | None) -> Path | None:
    """Store the failed executed notebook as <results folder>/failed.ipynb (beside, not over, the last good results;
    a temporary folder for a scale the notebook rejects, to keep results/ free of it) and at `output` when given."""
    if not executed.exists():
        return None
    failed = (final if scale in SCALES else Path(tempfile.mkdtemp(prefix="nht-chapter-"))) / "failed.ipynb"
    for target in filter(None, (failed, output)):
        atomic_write_bytes(target, executed.read_bytes())
    return failed


def _run_record(path: Path, parameters: dict[str, Any], declared: dict[str, dict[str, Any]], scale: str, seed: Any,
                started: float, wall_s: float) -> dict[str, Any]:
    """What run.json records about one successful chapter run (times: ISO 8601 local time; wall time in seconds;
    deterministic: whether $NHT_DETERMINISTIC=1 asked for deterministic algorithms, which no run key includes)."""
    from nhtlib.config import deterministic_mode

    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))

    return {"chapter": path.stem, "notebook": str(path), "scale": scale, "seed": seed, "parameters": parameters,
            "deterministic": deterministic_mode(),
            "defaults": {name: info.get("default") for name, info in declared.items()},
            "git_commit": git_commit(), "nhtlib_version": __version__, "nhtlib_source_hash": source_hash(),
            "page_source_hash": page_source_hash(path.stem),
            "started_at": stamp(started), "finished_at": stamp(started + wall_s), "wall_time_s": round(wall_s, 3)}


def sweeps_of(chapter: str, scale: str, data_root: str | None = None, first_seed: int = 0) -> list | None:
    """The chapter's declared sweeps (`nhtlib.chapters.CHAPTERS`) at `scale`, or None for a page that is no
    registered chapter (it reads no runs)."""
    from nhtlib.chapters import CHAPTERS

    if chapter not in CHAPTERS:
        return None
    return CHAPTERS[chapter].sweeps(scale, data_root, first_seed)


def runs_of(sweeps: list | None) -> dict[str, Any]:
    """The runs a chapter reads: their distinct cache keys (sorted) and seeds."""
    if not sweeps:
        return {"keys": [], "seeds": []}
    keys = sorted({key for sweep in sweeps for key in sweep.member_keys()})
    seeds = sorted({config.seed for sweep in sweeps for config in sweep.configs})
    return {"keys": keys, "seeds": seeds}


PAGE_LAYERS = ("report", "analysis")  # what every page calls through `nht.*` besides its chapter module


def page_source_hash(chapter: str) -> str:
    """The hash of the code a chapter page executes: its chapter module's import closure (the engine and the data it
    runs, and for chapter 6 the chapters it reads) with the report and analysis layers its cells call; for a page
    that is no registered chapter, the whole library's source. A caption or a rule of one chapter re-executes that
    page (and the pages that import its module), not the others."""
    from nhtlib.engine.source import closure_hash

    files = page_source_files(chapter)
    return source_hash() if files is None else closure_hash(files)


def page_source_files(chapter: str) -> list[Path] | None:
    """The files behind `page_source_hash` (None for a page that is no registered chapter)."""
    from nhtlib.chapters import CHAPTERS
    from nhtlib.engine.source import module_closure, package_modules

    if chapter not in CHAPTERS:
        return None
    return module_closure([CHAPTERS[chapter].module, *(m for layer in PAGE_LAYERS for m in package_modules(layer))])


@dataclasses.dataclass(frozen=True)
class ChapterRuns:
    """The runs a chapter reads (its declared sweeps, `nhtlib.chapters.CHAPTERS`) and what makes its page: `identity`
    (`nhtlib.report.provenance.chapter_identity`), the distinct run keys, the seeds, and how many runs are cached now."""

    identity: str
    keys: tuple[str, ...]
    seeds: tuple[int, ...]
    cached: int

    @property
    def missing(self) -> int:
        return len(self.keys) - self.cached


def chapter_runs(name: str, parameters: dict[str, Any] | None = None, *,
                 notebook_dir: str | os.PathLike | None = None) -> ChapterRuns:
    """The chapter's runs and page identity for these parameters (scale, seed and data_root as the notebook reads
    them; a chapter without declared sweeps has no runs and its identity is its cells, parameters and library)."""
    from nhtlib.report import provenance
    from nhtlib.report.stability import entry_at
    from nhtlib.engine.cache import RunCache

    parameters = dict(parameters or {})
    path = notebook_path(name, notebook_dir)
    declared = notebook_parameters(path)
    scale, seed = _scale_of(parameters), _seed_of(parameters, declared)
    data_root = parameters.get("data_root")
    sweeps = sweeps_of(path.stem, scale, data_root, int(seed or 0)) if scale in SCALES else None
    runs = runs_of(sweeps)
    cache = RunCache()
    cached = sum(cache.meta(key) is not None for key in runs["keys"])
    identity = provenance.chapter_identity(path, {"scale": scale, **parameters}, runs["keys"],
                                           page_source_hash(path.stem), entry_at(path.stem, scale))
    return ChapterRuns(identity, tuple(runs["keys"]), tuple(runs["seeds"]), cached)


def cache_snapshot(keys: Iterable[str]) -> dict[str, str | None]:
    """key -> its cache metadata as JSON text (None when the run is not cached): taken before and after a run, it
    says which runs were trained meanwhile (`trained_since`), a retrained one included (its metadata changes)."""
    from nhtlib.engine.cache import RunCache

    cache = RunCache()
    snapshot = {}
    for key in keys:
        meta = cache.meta(key)
        snapshot[key] = None if meta is None else json.dumps(meta, sort_keys=True, default=str)
    return snapshot


def trained_since(before: dict[str, str | None]) -> set[str]:
    """The keys of `before` (`cache_snapshot`) whose cache entry was written since: new or rewritten."""
    after = cache_snapshot(before)
    return {key for key, meta in after.items() if meta is not None and meta != before[key]}


KERNEL_FIXES = {
    "DeadKernelError": "the kernel died (often: out of memory; try a smaller scale or free memory), re-run it",
    "CellTimeoutError": "a cell ran past papermill's time limit, re-run it",
    "NoSuchKernel": f"install the Jupyter kernel {KERNEL_NAME!r} in this environment "
                    "(`python -m ipykernel install --user`)",
}


def _execution_error(chapter: str, err: BaseException, failed: Path | None, final: Path) -> ChapterError:
    """The ChapterError for a notebook that could not be executed for a reason outside its cells (a dead kernel,
    a timeout, no kernel, a file that cannot be written): what failed, where, and the fix, in one line."""
    kind = type(err).__name__
    if isinstance(err, OSError):
        where = f" ({err.filename})" if err.filename else ""
        fix = ("free disk space (or set NHT_RESULTS to a folder with room)" if err.errno == errno.ENOSPC
               else "check that the results folder (NHT_RESULTS) is writable")
        what = f"writing its results failed{where}: {err.strerror or err}"
    else:
        fix = KERNEL_FIXES.get(kind, "see the message; re-run with --log-output to see the notebook's output")
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
        what = f"the notebook could not be executed: {kind}: {first_line}"
    kept = f"; failed notebook: {failed}" if failed else ""
    return ChapterError(f"chapter {chapter!r}: {what}; {fix} (results in {final} left as they were{kept})")


def check_output(output: str | os.PathLike | None) -> Path | None:
    """--out checked before anything runs (so that a bad path never throws a good run away): a file path in an
    existing folder where files can be created. Raises ChapterUsageError naming the path and the fix."""
    if output is None:
        return None
    path = Path(output).expanduser()
    if path.is_dir():
        raise ChapterUsageError(f"--out {path} is a folder; give a file path, e.g. {path / 'executed.ipynb'}")
    if not path.parent.is_dir():
        raise ChapterUsageError(f"--out {path}: the folder {path.parent} does not exist; create it or choose another")
    try:
        writable_dir(path.parent, probe=True)
    except OSError as err:
        raise ChapterUsageError(f"--out {path}: files cannot be created in {path.parent} ({err.strerror or err}); "
                                "choose a writable folder") from err
    return path


def run_chapter(name: str, parameters: dict[str, Any] | None = None, output: str | os.PathLike | None = None, *,
                notebook_dir: str | os.PathLike | None = None, progress: bool | None = None,
                log_output: bool = False, trained_keys: Collection[str] = (), train_time_s: float = 0.0) -> Path:
    """Execute chapter `name` with papermill into a staging area; on success swap it in as the chapter's results
    folder (see the module docstring) and return the path of the executed notebook.

    parameters: papermill parameters (names are checked against the notebook's ``parameters`` cell).
    output: also write the executed notebook here (and return this path; checked before the run, written after
    the swap); default: only ``results/<scale>/<chapter>/executed.ipynb`` (``results/<scale>/seed-<s>/<chapter>/``
    for a seed s != 0, ``results/<scale>/variant-<hash>/<chapter>/`` for other settings: `results_variant`).
    notebook_dir: the folder holding the chapter notebooks; default the book's ``notebooks/``.
    progress: papermill's progress bar; default on, except at smoke scale (tests) and for an invalid scale.
    trained_keys, train_time_s: the runs of this chapter the caller trained just before (the book builder trains a
    chapter's sweeps with progress bars first) and how long that took; run.json counts them as trained.

    The executed notebook opens with a provenance box (`nhtlib.report.provenance.box_markdown`) and run.json records the
    page's identity (`chapter_runs`), the device, torch, the seeds, the runs trained and read from the cache, and the
    manifest of the folder's files (`nhtlib.report.manifest`). Crashed runs' staging areas are recovered first
    (`recover_staging`).

    Raises ChapterError (one line: what failed, the file, the fix) when the notebook fails, its kernel dies or its
    results cannot be written; the chapter's results folder is then left as it was.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    parameters = dict(parameters or {})
    path = notebook_path(name, notebook_dir)
    declared = check_parameters(path, parameters)
    scale, seed = _scale_of(parameters), _seed_of(parameters, declared)
    final = final_chapter_dir(path.stem, scale, seed, results_variant(parameters, declared))
    output = check_output(output)
    if progress is None:
        progress = scale in SCALES and scale != "smoke"
    try:
        recover_staging()
        staging = open_staging(path.stem, scale, final)
    except OSError as err:
        raise _execution_error(path.stem, err, None, final) from err
    executed = staging.staged / "executed.ipynb"
    try:
        # a scale the notebook rejects fails in its first cell, before any record is made
        runs = chapter_runs(path.stem, parameters, notebook_dir=notebook_dir) if scale in SCALES else None
        before = cache_snapshot(runs.keys if runs else ())
        started, t0 = time.time(), time.perf_counter()
        try:
            with _chapter_out(staging.staged), _quiet_known_parameters(set(parameters)):
                pm.execute_notebook(str(path), str(executed), parameters=parameters, kernel_name=KERNEL_NAME,
                                    cwd=str(path.parent), progress_bar=progress, log_output=log_output)
        except PapermillExecutionError as err:
            failed = _keep_failed(executed, final, scale, output)
            raise ChapterError(f"chapter {path.stem!r} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                               f"(failed notebook: {failed}; results in {final} left as they were)") from err
        except Exception as err:  # outside the cells: a dead kernel, a timeout, no kernel, a full disk
            raise _execution_error(path.stem, err, _keep_failed_quietly(executed, final, scale), final) from err
        trained = trained_since(before) | set(trained_keys)
        finish_run(path, executed, parameters, runs, started, time.perf_counter() - t0, trained=trained,
                   train_time_s=train_time_s)
        swap_in(staging)
    except OSError as err:
        raise _execution_error(path.stem, err, None, final) from err
    finally:
        discard(staging)
    if output is None:
        return final / "executed.ipynb"
    try:
        atomic_write_bytes(output, (final / "executed.ipynb").read_bytes())
    except OSError as err:
        raise ChapterError(f"chapter {path.stem!r} ran and its results are in {final}, but the copy to --out "
                           f"{output} failed: {err.strerror or err}; copy {final / 'executed.ipynb'} by hand") from err
    return output


def _keep_failed_quietly(executed: Path, final: Path, scale: str) -> Path | None:
    """`_keep_failed` when the run already failed for another reason: a second error is not the one to report."""
    try:
        return _keep_failed(executed, final, scale, None)
    except OSError:
        return None


def non_default_parameters(parameters: dict[str, Any], declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The parameters passed whose value differs from the parameters cell's default (a default that is no literal,
    such as scale's ``os.environ.get(...)``, counts as differing from any value passed)."""
    out = {}
    for name, value in parameters.items():
        try:
            default = ast.literal_eval(str(declared.get(name, {}).get("default")))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out[name] = value
            continue
        if value != default or type(value) is not type(default):
            out[name] = value
    return out


# Where and how a run executes, not what its page says: scale and seed have folders of their own; the device and the
# data folder leave the page's numbers as they are (the data is fingerprinted into every run key).
BOOK_SETTINGS = ("scale", "seed", "device", "data_root")


def results_variant(parameters: dict[str, Any], declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The parameters of a run that make it another page than the book's own (non-default, other than
    `BOOK_SETTINGS`): a non-empty variant is filed in its own folder (`nhtlib.paths.final_chapter_dir`)."""
    return {k: v for k, v in non_default_parameters(parameters, declared).items() if k not in BOOK_SETTINGS}


def finish_run(path: Path, executed: Path, parameters: dict[str, Any], runs: ChapterRuns | None, started: float,
               wall_s: float, *, trained: Collection[str] | None = None,
               train_time_s: float = 0.0) -> dict[str, Any]:
    """Complete a successful execution of the chapter notebook `path` whose executed copy is `executed` (in the
    chapter's staging folder): write the chapter's run tables, open it with the provenance box and write run.json
    beside it with the manifest of the folder (`nhtlib.report.manifest.write_manifest`); returns the record.
    `runs`: `chapter_runs` taken before the notebook ran; `trained`: the keys of its runs trained for this page (by
    the notebook or by the caller just before: `trained_since`); None: those missing before the run."""
    from nhtlib.engine.cache import RunCache
    from nhtlib.report import exports, manifest

    declared = notebook_parameters(path)
    scale, seed = _scale_of(parameters), _seed_of(parameters, declared)
    folder = executed.parent
    keys = list(runs.keys) if runs else []
    record = _run_record(path, parameters, declared, scale, seed, started, wall_s)
    record["non_default_parameters"] = non_default_parameters(parameters, declared)
    record["variant"] = results_variant(parameters, declared)
    record.update(_provenance(runs, parameters, trained, train_time_s))
    record["wall_time_s"] = round(wall_s + train_time_s, 3)
    cache = RunCache()
    exports.write_tables(folder, keys, cache)  # before the manifest: the tables are results files of the run
    record["run_environments"] = exports.run_environments(keys, cache)
    record["files"] = manifest.manifest(folder)  # what the box links (the notebook itself is rewritten below)
    _add_box(executed, record, folder)
    return manifest.write_manifest(folder, {k: v for k, v in record.items() if k != "files"})


def _provenance(runs: ChapterRuns | None, parameters: dict[str, Any], trained: Collection[str] | None,
                train_time_s: float) -> dict[str, Any]:
    """The provenance part of run.json: the page identity, device, torch, seeds and runs, counted from what
    happened: `trained` (keys written for this page), the rest of the runs cached now read from the cache."""
    import torch

    from nhtlib.config import resolve_device
    from nhtlib.report.provenance import device_description

    device = resolve_device(str(parameters.get("device", "auto")))
    keys = list(runs.keys) if runs else []
    if trained is None:  # no snapshot: the runs missing before the run were trained by it
        n_trained = runs.missing if runs else 0
        n_cached = len(keys) - n_trained
    else:
        present = cache_snapshot(keys)
        n_trained = sum(key in trained and present[key] is not None for key in keys)
        n_cached = sum(key not in trained and present[key] is not None for key in keys)
    return {"identity": runs.identity if runs else None, "device": device_description(device),
            "torch_version": torch.__version__, "seeds": list(runs.seeds) if runs else [], "runs": len(keys),
            "runs_trained": n_trained, "runs_cached": n_cached, "train_time_s": round(train_time_s, 3)}


def _add_box(executed: Path, record: dict[str, Any], folder: Path) -> None:
    """Open the executed notebook with its provenance box (the verdicts from the claims.csv it wrote, if any)."""
    import pandas as pd

    from nhtlib.report.provenance import box_markdown, insert_box, label_sections

    claims_csv = folder / "claims.csv"
    claims = pd.read_csv(claims_csv) if claims_csv.exists() else None
    sections = label_sections(executed, record["chapter"])  # the verdicts at a glance link to their sections
    insert_box(executed, box_markdown(record, claims, download=f"{record['chapter']}.ipynb", sections=sections,
                                      reads_data=_reads_data(record["chapter"])))


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    from nhtlib.cli.program import program_name

    parser = argparse.ArgumentParser(prog=program_name(),
                                     description="List or run the chapter notebooks of nht-book.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list the chapters and their parameters")
    p_list.add_argument("--notebooks", default=None, help="folder of chapter notebooks (default: notebooks/)")
    p_run = sub.add_parser("run", help="execute one chapter with papermill")
    p_run.add_argument("chapter", help="chapter name, e.g. 01_toy_norm_hierarchy")
    p_run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                       help="a papermill parameter, parsed like papermill's -p (repeatable)")
    p_run.add_argument("--out", default=None, help="also write the executed notebook here "
                                                   "(it always goes to results/<scale>/<chapter>/executed.ipynb)")
    p_run.add_argument("--notebooks", default=None, help="folder of chapter notebooks (default: notebooks/)")
    p_run.add_argument("--log-output", action="store_true", help="stream the notebook's output to the terminal")
    p_plan = sub.add_parser("plan", help="what a chapter will cost, and whether it fits (trains nothing)")
    p_plan.add_argument("chapter", help="chapter name, or 'all'")
    p_plan.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="scale and data_root, as for run")
    p_plan.add_argument("--device", default="cpu", help="'cpu' (this machine, small groups timed here) or 'h200'")
    return parser.parse_args(argv)


def plan_text(chapter: str, scale: str, device: str, data_root: str | None) -> str:
    """The planner's table of one chapter, its summary line and the data check's verdict, as text."""
    import pandas as pd

    from nhtlib.chapters import plan_chapter

    planned = plan_chapter(chapter, scale, device, data_root=data_root)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        return "\n".join([planned.summary(), planned.table().drop(columns=["data"]).to_string(index=False),
                           f"data check: {planned.data_check}"])


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        if args.command == "list":
            folder = Path(args.notebooks) if args.notebooks else notebooks_dir()
            for chapter in list_chapters(folder):
                params = notebook_parameters(folder / f"{chapter}.ipynb")
                described = ", ".join(f"{k}={v.get('default')}" for k, v in params.items())
                print(f"{chapter}: {described or '(no parameters cell)'}")
            return 0
        parameters = {name: parse_value(value) for name, value in args.parameter}
        if args.command == "plan":
            unknown = sorted(set(parameters) - {"scale", "data_root"})
            if unknown:
                raise ChapterUsageError(f"plan takes the parameters scale and data_root; got {', '.join(unknown)}")
            scale = _scale_of(parameters)
            from nhtlib.chapters import CHAPTERS, trains_own

            chapters = list_chapters() if args.chapter == "all" else [notebook_path(args.chapter).stem]
            if args.chapter == "all":
                for chapter in (c for c in chapters if c in CHAPTERS and not trains_own(c)):
                    print(f"{chapter}: trains nothing of its own (it reads the runs of the chapters before it)")
                chapters = [c for c in chapters if c not in CHAPTERS or trains_own(c)]
            for chapter in chapters:
                print(plan_text(chapter, scale, args.device, parameters.get("data_root")), flush=True)
            return 0
        out = run_chapter(args.chapter, parameters, args.out, notebook_dir=args.notebooks,
                          log_output=args.log_output)
        print(f"executed notebook: {out}")
        return 0
    except (ChapterError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, ChapterUsageError) else 1
    except Exception as err:  # outside a notebook cell: one line, never a traceback
        print(f"error: {failure_line(err)}", file=sys.stderr)
        return 1


def failure_line(err: BaseException) -> str:
    """An unexpected error in one line: its type, message, the file (for an OSError) and where it was raised
    (set NHT_TRACEBACK=1 to see the whole traceback)."""
    import traceback

    if os.environ.get("NHT_TRACEBACK"):
        traceback.print_exception(err)
    frames = traceback.extract_tb(err.__traceback__)
    where = f" (raised at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    if isinstance(err, OSError):
        target = f": {err.filename}" if err.filename else ""
        fix = ("free disk space or set NHT_RESULTS to a folder with room" if err.errno == errno.ENOSPC
               else "check the path and its permissions")
        return f"{type(err).__name__}: {err.strerror or err}{target}; {fix}{where}"
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {message}{where}; set NHT_TRACEBACK=1 to see the traceback"


if __name__ == "__main__":
    sys.exit(main())


def _reads_data(chapter: str) -> bool:
    """Whether `chapter` reads data files (its own, `Chapter.data`, or another chapter's runs); True for a notebook
    that is not a registered chapter (its re-run command then says where data would go)."""
    from nhtlib.chapters.registry import CHAPTERS

    found = CHAPTERS.get(chapter)
    return True if found is None else bool(found.data or found.reads)
