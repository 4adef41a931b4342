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
  staging folder ``results/.staging/<unique>/<scale>/<chapter>/``.
- On success the runner adds ``executed.ipynb`` and ``run.json`` (parameters passed, the parameters cell's defaults,
  seed, scale, git commit, nhtlib source hash, start/end time, wall time) and swaps the staging folder in place of the
  chapter's results folder in one rename (same filesystem), so ``claims.csv`` always matches ``executed.ipynb``.
- On failure the results folder keeps its last good contents; the failed executed notebook is written beside them
  as ``failed.ipynb`` (removed by the next successful run) and the ChapterError names it.
- The results folder depends on the seed: the book's seed (0, every chapter's default) uses
  ``results/<scale>/<chapter>/``, which the Scoreboard reads; any other seed ``s`` uses
  ``results/<scale>/seed-<s>/<chapter>/`` (see :func:`nhtlib.paths.final_chapter_dir`), so it never replaces the
  book's results.
- ``--out PATH`` writes a copy of the executed (or failed) notebook to PATH as well.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from nhtlib.config import SCALES, ConfigError
from nhtlib.paths import CHAPTER_OUT_ENV, __version__, atomic_write_bytes, final_chapter_dir, git_commit, repo_root, results_root, source_hash

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


@contextlib.contextmanager
def _chapter_out(folder: Path) -> Iterator[None]:
    """Set $NHT_CHAPTER_OUT for the kernel papermill starts (it inherits os.environ; not thread-safe)."""
    before = os.environ.get(CHAPTER_OUT_ENV)
    os.environ[CHAPTER_OUT_ENV] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CHAPTER_OUT_ENV, None)
        else:
            os.environ[CHAPTER_OUT_ENV] = before


@contextlib.contextmanager
def _quiet_known_parameters(names: set[str]) -> Iterator[None]:
    log_filter = _KnownParameterFilter(names)
    pm_logger = logging.getLogger("papermill")
    pm_logger.addFilter(log_filter)
    try:
        yield
    finally:
        pm_logger.removeFilter(log_filter)


def _swap_in(staged: Path, final: Path, scratch: Path) -> None:
    """Replace the folder `final` by `staged` (both on one filesystem): the old one is renamed aside into `scratch`,
    the new one renamed in (the old one is put back if that fails); the caller removes `scratch`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    previous = scratch / "previous"
    had_previous = final.exists()
    if had_previous:
        os.replace(final, previous)
    try:
        os.replace(staged, final)
    except BaseException:
        if had_previous:
            os.replace(previous, final)
        raise


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
    """What run.json records about one successful chapter run (times: ISO 8601 local time; wall time in seconds)."""

    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))

    return {"chapter": path.stem, "notebook": str(path), "scale": scale, "seed": seed, "parameters": parameters,
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
                                           page_source_hash(path.stem))
    return ChapterRuns(identity, tuple(runs["keys"]), tuple(runs["seeds"]), cached)


def run_chapter(name: str, parameters: dict[str, Any] | None = None, output: str | os.PathLike | None = None, *,
                notebook_dir: str | os.PathLike | None = None, progress: bool | None = None,
                log_output: bool = False, trained_before: int = 0, train_time_s: float = 0.0) -> Path:
    """Execute chapter `name` with papermill into a staging folder; on success swap it in as the chapter's results
    folder (see the module docstring) and return the path of the executed notebook.

    parameters: papermill parameters (names are checked against the notebook's ``parameters`` cell).
    output: also write the executed notebook here (and return this path); default: only
    ``results/<scale>/<chapter>/executed.ipynb`` (``results/<scale>/seed-<s>/<chapter>/`` for a seed s != 0).
    notebook_dir: the folder holding the chapter notebooks; default the book's ``notebooks/``.
    progress: papermill's progress bar; default on, except at smoke scale (tests) and for an invalid scale.
    trained_before, train_time_s: runs of this chapter the caller trained just before (the book builder trains a
    chapter's sweeps with progress bars first) and how long that took; the page's provenance box counts them as
    trained for this page.

    The executed notebook opens with a provenance box (`nhtlib.report.provenance.box_markdown`) and run.json records the
    page's identity (`chapter_runs`), the device, torch, the seeds and the runs trained and read from the cache.

    Raises ChapterError (with the notebook's exception name and message, and the failed notebook's path) when the
    notebook fails; the chapter's results folder is then left as it was.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    parameters = dict(parameters or {})
    path = notebook_path(name, notebook_dir)
    declared = check_parameters(path, parameters)
    scale, seed = _scale_of(parameters), _seed_of(parameters, declared)
    final = final_chapter_dir(path.stem, scale, seed)
    output = Path(output) if output is not None else None
    if progress is None:
        progress = scale in SCALES and scale != "smoke"
    staging = results_root() / ".staging"
    staging.mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=staging, prefix=f"{path.stem}-"))  # under results/: renames stay on one fs
    staged = scratch / scale / path.stem
    staged.mkdir(parents=True)
    executed = staged / "executed.ipynb"
    # a scale the notebook rejects fails in its first cell, before any record is made
    runs = chapter_runs(path.stem, parameters, notebook_dir=notebook_dir) if scale in SCALES else None
    try:
        started, t0 = time.time(), time.perf_counter()
        try:
            with _chapter_out(staged), _quiet_known_parameters(set(parameters)):
                pm.execute_notebook(str(path), str(executed), parameters=parameters, kernel_name=KERNEL_NAME,
                                    cwd=str(path.parent), progress_bar=progress, log_output=log_output)
        except PapermillExecutionError as err:
            failed = _keep_failed(executed, final, scale, output)
            raise ChapterError(f"chapter {path.stem!r} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                               f"(failed notebook: {failed}; results in {final} left as they were)") from err
        finish_run(path, executed, parameters, runs, started, time.perf_counter() - t0,
                   trained_before=trained_before, train_time_s=train_time_s)
        if output is not None:
            atomic_write_bytes(output, executed.read_bytes())
        _swap_in(staged, final, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return output if output is not None else final / "executed.ipynb"


def finish_run(path: Path, executed: Path, parameters: dict[str, Any], runs: ChapterRuns, started: float,
               wall_s: float, *, trained_before: int = 0, train_time_s: float = 0.0) -> dict[str, Any]:
    """Complete a successful execution of the chapter notebook `path` whose executed copy is `executed` (in the
    chapter's results or staging folder): open it with the provenance box and write run.json beside it (returned).
    `runs`: `chapter_runs` taken before the notebook ran (its missing runs were trained by it)."""
    declared = notebook_parameters(path)
    scale, seed = _scale_of(parameters), _seed_of(parameters, declared)
    record = _run_record(path, parameters, declared, scale, seed, started, wall_s)
    record.update(_provenance(runs, parameters, trained_before, train_time_s))
    record["wall_time_s"] = round(wall_s + train_time_s, 3)
    _add_box(executed, record, executed.parent)
    atomic_write_bytes(executed.parent / "run.json", json.dumps(record, indent=1, default=str).encode())
    return record


def _provenance(runs: ChapterRuns, parameters: dict[str, Any], trained_before: int,
                train_time_s: float) -> dict[str, Any]:
    """The provenance part of run.json: the page identity, device, torch, seeds and runs (those missing from the
    cache before the notebook ran were trained by it; `trained_before` by the caller just before)."""
    import torch

    from nhtlib.config import resolve_device
    from nhtlib.report.provenance import device_description

    device = resolve_device(str(parameters.get("device", "auto")))
    return {"identity": runs.identity, "device": device_description(device), "torch_version": torch.__version__,
            "seeds": list(runs.seeds), "runs": len(runs.keys),
            "runs_trained": min(len(runs.keys), runs.missing + trained_before), "train_time_s": round(train_time_s, 3)}


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
    parser = argparse.ArgumentParser(prog="python -m nhtlib",
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


if __name__ == "__main__":
    sys.exit(main())


def _reads_data(chapter: str) -> bool:
    """Whether `chapter` reads data files (its own, `Chapter.data`, or another chapter's runs); True for a notebook
    that is not a registered chapter (its re-run command then says where data would go)."""
    from nhtlib.chapters.registry import CHAPTERS

    found = CHAPTERS.get(chapter)
    return True if found is None else bool(found.data or found.reads)
