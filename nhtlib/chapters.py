"""Run one chapter notebook of the book with papermill, with its parameters checked first.

Command line::

    python -m nhtlib.chapters list
    python -m nhtlib.chapters run 01_toy_norm_hierarchy -p scale cpu -p seed 1 [--out PATH]

`-p NAME VALUE` is parsed like papermill's `-p` (``True``/``False``/``None``, int, float, else a string).
Parameter *names* are checked against the notebook's cell tagged ``parameters`` before anything runs; an unknown
name fails with a message naming it and the allowed ones. Parameter *values* are checked by the notebook itself
(its first cell builds ``nht.ChapterParams``), and its error (e.g. ``ConfigError: scale='huge' is not allowed``)
is reported as the reason the run failed.

The executed notebook goes to ``results/<scale>/<chapter>/executed.ipynb`` (see :func:`nhtlib.paths.chapter_dir`)
unless ``--out`` says otherwise.
"""
from __future__ import annotations

import argparse
import ast
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .config import SCALES, ConfigError
from .paths import chapter_dir, repo_root

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


def check_parameters(path: Path, parameters: dict[str, Any]) -> None:
    """Raise ChapterUsageError naming every parameter the notebook does not declare."""
    allowed = notebook_parameters(path)
    if not allowed:
        raise ChapterUsageError(f"{path.name} has no cell tagged 'parameters'; it cannot be run with parameters")
    unknown = [name for name in parameters if name not in allowed]
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        names = ", ".join(map(repr, unknown))
        raise ChapterUsageError(f"unknown parameter{plural} {names} for chapter {path.stem!r}; "
                                f"allowed: {', '.join(allowed)}")


def _scale_of(parameters: dict[str, Any]) -> str:
    scale = parameters.get("scale")
    return str(scale) if scale is not None else os.environ.get("NHT_SCALE", "cpu")


def run_chapter(name: str, parameters: dict[str, Any] | None = None, output: str | os.PathLike | None = None, *,
                notebook_dir: str | os.PathLike | None = None, progress: bool | None = None,
                log_output: bool = False) -> Path:
    """Execute chapter `name` with papermill and return the path of the executed notebook.

    parameters: papermill parameters (names are checked against the notebook's ``parameters`` cell).
    output: where to write the executed notebook; default ``results/<scale>/<chapter>/executed.ipynb``.
    notebook_dir: the folder holding the chapter notebooks; default the book's ``notebooks/``.
    progress: papermill's progress bar; default on, except at smoke scale (tests) and for an invalid scale.

    Raises ChapterError (with the notebook's exception name and message) when the notebook fails.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    parameters = dict(parameters or {})
    path = notebook_path(name, notebook_dir)
    check_parameters(path, parameters)
    scale = _scale_of(parameters)
    if output is None:
        if scale in SCALES:
            output = chapter_dir(path.stem, scale) / "executed.ipynb"
        else:  # the notebook will reject this scale; keep results/ free of a folder for it
            output = Path(tempfile.mkdtemp(prefix="nht-chapter-")) / f"{path.stem}.ipynb"
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    if progress is None:
        progress = scale in SCALES and scale != "smoke"
    log_filter = _KnownParameterFilter(set(parameters))
    pm_logger = logging.getLogger("papermill")
    pm_logger.addFilter(log_filter)
    try:
        pm.execute_notebook(str(path), str(output), parameters=parameters, kernel_name=KERNEL_NAME,
                            cwd=str(path.parent), progress_bar=progress, log_output=log_output)
    except PapermillExecutionError as err:
        raise ChapterError(f"chapter {path.stem!r} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                           f"(executed notebook: {output})") from err
    finally:
        pm_logger.removeFilter(log_filter)
    return output


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m nhtlib.chapters",
                                     description="List or run the chapter notebooks of nht-book.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="list the chapters and their parameters")
    p_list.add_argument("--notebooks", default=None, help="folder of chapter notebooks (default: notebooks/)")
    p_run = sub.add_parser("run", help="execute one chapter with papermill")
    p_run.add_argument("chapter", help="chapter name, e.g. 01_toy_norm_hierarchy")
    p_run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                       help="a papermill parameter, parsed like papermill's -p (repeatable)")
    p_run.add_argument("--out", default=None, help="executed notebook path "
                                                   "(default: results/<scale>/<chapter>/executed.ipynb)")
    p_run.add_argument("--notebooks", default=None, help="folder of chapter notebooks (default: notebooks/)")
    p_run.add_argument("--log-output", action="store_true", help="stream the notebook's output to the terminal")
    return parser.parse_args(argv)


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
        out = run_chapter(args.chapter, parameters, args.out, notebook_dir=args.notebooks,
                          log_output=args.log_output)
        print(f"executed notebook: {out}")
        return 0
    except (ChapterError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, ChapterUsageError) else 1


if __name__ == "__main__":
    sys.exit(main())
