"""``nht-book <command>`` (or ``python -m nhtlib <command>``): the book's commands, one entry point.

    nht-book build [--scale cpu] [--chapters ...] [--no-site]     # the book (nhtlib.cli.build)
    nht-book run 01_toy_norm_hierarchy -p scale cpu -p seed 1     # one chapter (nhtlib.cli.runner)
    nht-book list                                                 # the chapters and their parameters
    nht-book plan all -p scale cpu [--device h200]                # what a chapter costs; trains nothing
    nht-book train-group 03_border_cifar 12 -p scale paper        # one batched group into the cache (a job)
    nht-book jobs plan|submit -p scale paper ...                  # every group as a job (nhtlib.cli.jobs)

``nht-book`` is the console script that ``pip install .`` puts on the PATH; ``python -m nhtlib`` is the same
function. The commands read the book's checkout (its notebooks/, results/, benchmarks/records/). An editable
install (``pip install -e .``, what ``make venv`` does) knows its checkout. A regular install does not: run inside a
checkout, ``nht-book`` re-executes itself as ``python -m nhtlib`` on that checkout's ``nhtlib`` (the code the
book's pages and run keys are made of, not an installed copy that may be older); run elsewhere, a command that needs
the book says so and exits with status 2.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from nhtlib.cli.program import CHECKOUT_ENV, program_name

COMMANDS = {"build": "make the book: every chapter that is out of date, then the site",
            "run": "execute one chapter with papermill", "list": "the chapters and their parameters",
            "plan": "what a chapter will cost, and whether it fits (trains nothing)",
            "train-group": "train one batched group of a chapter into the run cache (one job)",
            "jobs": "plan or submit every batched group as a job (submitit: SLURM or local processes)"}


def _usage() -> str:
    prog = program_name()
    width = max(map(len, COMMANDS))
    listed = "\n".join(f"  {name:<{width}} {what}" for name, what in COMMANDS.items())
    return (f"usage: {prog} <command> [options]\n\ncommands:\n{listed}\n\n"
            f"`{prog} <command> --help` tells each command's options, `{prog} --version` the version.")


def checkout_around(folder: Path) -> Path | None:
    """The checkout of the book holding `folder`: `folder` or its nearest parent with pyproject.toml, _toc.yml (what
    `nhtlib.paths.repo_root` looks for) and the nhtlib package; None when there is none."""
    for candidate in (folder, *folder.parents):
        if all((candidate / name).exists() for name in ("pyproject.toml", "_toc.yml", "nhtlib/__init__.py")):
            return candidate
    return None


def _exec_in_checkout(checkout: Path, argv: list[str]) -> None:
    """Replace this process by ``python -m nhtlib <argv>`` importing nhtlib from `checkout` first (PYTHONPATH, so
    the chapter kernels that papermill starts import the same code). Never returns."""
    python_path = os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": python_path, CHECKOUT_ENV: str(checkout)}
    os.execve(sys.executable, [sys.executable, "-m", "nhtlib", *argv], env)


def _needs_checkout(argv: list[str]) -> bool:
    """Whether the command reads the book's checkout: all do, except list/run pointed elsewhere by --notebooks."""
    return not (argv[0] in ("list", "run") and any(a == "--notebooks" or a.startswith("--notebooks=") for a in argv))


def _no_checkout_error() -> str | None:
    """The runner's own message when no checkout of the book is known (None when one is)."""
    from nhtlib.cli.runner import ChapterError, notebooks_dir

    try:
        notebooks_dir()
    except ChapterError as err:
        return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``build | run | plan | list | train-group | jobs`` to `nhtlib.cli.build.main` /
    `nhtlib.cli.runner.main` / `nhtlib.cli.jobs.main`; the exit status
    (0 ok, 1 a chapter failed, 2 a usage error or no checkout of the book)."""
    from nhtlib.paths import __version__, repo_root

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--version":
        print(f"nht-book (nhtlib {__version__})")
        return 0
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        asked = bool(argv) and argv[0] in ("-h", "--help")
        print(_usage(), file=sys.stdout if asked or not argv else sys.stderr)
        return 0 if asked else 2
    if repo_root() is None and _needs_checkout(argv):
        checkout = checkout_around(Path.cwd())
        if checkout is not None and os.environ.get(CHECKOUT_ENV) is None:
            _exec_in_checkout(checkout, argv)  # this process ends here
        message = _no_checkout_error()
        if message is not None:
            print(f"error: {message}; or run `{program_name()} {argv[0]}` inside a checkout of the book "
                  "(a folder with pyproject.toml, _toc.yml and notebooks/)", file=sys.stderr)
            return 2
    if argv[0] == "build":
        from nhtlib.cli import build

        return build.main(argv[1:])
    if argv[0] in ("train-group", "jobs"):
        from nhtlib.cli import jobs

        return jobs.main(argv)
    from nhtlib.cli import runner

    return runner.main(argv)
