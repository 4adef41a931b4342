"""Where things live: the repository, the results folder, the data root.

Nothing here depends on the current working directory. Defaults can be overridden by environment variables:
NHT_RESULTS (results, and the run cache unless NHT_CACHE is set), NHT_CACHE (the run cache alone, e.g. a folder a
group shares), NHT_DATA_ROOT (real data sets), NHT_CHAPTER_OUT (set by the chapter runner `nhtlib.cli.runner`: a
staging folder ``.../<scale>/<chapter>/`` that receives that chapter's outputs instead of results/<scale>/<chapter>/;
the runner moves it into place only when the notebook succeeded).
"""
from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

__version__ = "0.1.0"  # nhtlib's version (pyproject.toml reads it here; part of every run-cache key)
PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The book's checkout when nhtlib is used from one (editable install), else None."""
    candidate = PACKAGE_DIR.parent
    if (candidate / "pyproject.toml").exists() and (candidate / "_toc.yml").exists():
        return candidate
    return None


class NotWritableError(OSError):
    """A results or cache folder cannot be created or written; the message names the folder and the fix."""


def writable_dir(folder: Path, *, probe: bool = False) -> Path:
    """Create `folder` (and parents, mode 0o777 & ~umask: with umask 0002 a group can share them) and check that
    files can be created in it; return it.

    probe=False checks with os.access (cheap, called often); probe=True creates and removes a file, which also
    catches what os.access cannot see (e.g. a full disk). Raises the OSError met.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if probe:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
        os.close(fd)
        os.unlink(name)
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "no permission to create files in it", str(folder))
    return folder


def results_root() -> Path:
    """Folder for run caches, claims and executed chapters: $NHT_RESULTS, else <repo>/results, else ~/.cache/nht-book.

    Raises NotWritableError (naming NHT_RESULTS when it is set) when the folder cannot be created or written.
    """
    env = os.environ.get("NHT_RESULTS")
    if env:
        path, source = Path(env).expanduser(), f"NHT_RESULTS={env!r}: "
    elif repo_root() is not None:
        path, source = repo_root() / "results", ""
    else:
        path, source = Path.home() / ".cache" / "nht-book", ""
    try:
        return writable_dir(path)
    except OSError as err:
        raise NotWritableError(f"{source}the results folder {path} cannot be created or written ({err}); "
                               "set NHT_RESULTS to a writable folder") from err


CACHE_ENV = "NHT_CACHE"


def cache_root() -> Path:
    """The run cache's folder: $NHT_CACHE when set (a folder of its own, e.g. one a group shares: make it setgid
    and group-writable and work with umask 0002), else results_root()/cache.

    $NHT_CACHE is not created or checked here: a cache that this user may only read still serves its entries
    (`RunCache.check_writable` fails before any training that would need to store one)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else results_root() / "cache"


CHAPTER_OUT_ENV = "NHT_CHAPTER_OUT"
DEFAULT_SEED = 0  # the seed of the book's own runs (the chapters' default): its results live in the default folders


def staged_dir(chapter: str, scale: str) -> Path | None:
    """The staging folder of $NHT_CHAPTER_OUT when it stands for this chapter at this scale (its path ends in
    <scale>/<chapter>), else None. Only the chapter being run is redirected: the others are read where they are."""
    env = os.environ.get(CHAPTER_OUT_ENV)
    path = Path(env) if env else None
    return path if path is not None and (path.parent.name, path.name) == (scale, chapter) else None


VARIANT_PREFIX = "variant-"  # results/<scale>/variant-<hash>/<chapter>/: a run with other settings than the book's


def final_chapter_dir(chapter: str, scale: str, seed: Any = None, variant: dict[str, Any] | None = None) -> Path:
    """Where a chapter's results live (not created): results/<scale>/<chapter>/ for the book's own run (seed None or
    DEFAULT_SEED, no variant), results/<scale>/seed-<seed>/<chapter>/ for any other seed, and
    results/<scale>/variant-<hash>/<chapter>/ when `variant` — the parameters that differ from the notebook's
    defaults other than scale and seed, e.g. a threshold — is not empty (hash over the seed and those parameters).
    So neither other seeds nor other settings ever replace the book's results."""
    if variant:
        from nhtlib.config import stable_hash

        return results_root() / scale / f"{VARIANT_PREFIX}{stable_hash({'seed': seed, **variant}, 10)}" / chapter
    if seed is None or seed == DEFAULT_SEED:
        return results_root() / scale / chapter
    return results_root() / scale / f"seed-{seed}" / chapter


UNSTAGED = "unstaged"  # results/<scale>/unstaged/<chapter>/: a notebook run outside the runner writes here
_TOLD_UNSTAGED: set[Path] = set()  # the unstaged folders already announced in this process


def unstaged_dir(chapter: str, scale: str) -> Path:
    """Where a chapter notebook executed outside the runner (plain papermill, Jupyter) writes its results (not
    created): results/<scale>/unstaged/<chapter>/. Neither the builder nor the Scoreboard ever reads it."""
    return results_root() / scale / UNSTAGED / chapter


def in_notebook_kernel() -> bool:
    """Whether this process is a Jupyter kernel (papermill, nbval, Jupyter all run notebooks in one)."""
    import sys

    if "ipykernel" not in sys.modules:  # not imported: surely no kernel (and nothing is imported here for it)
        return False
    from ipykernel.kernelapp import IPKernelApp

    return IPKernelApp.initialized()


def chapter_dir(chapter: str, scale: str) -> Path:
    """Outputs of one chapter at one scale (created): the runner's staging folder ($NHT_CHAPTER_OUT) while
    `nhtlib.cli.runner` runs this chapter; in a notebook kernel without it (plain papermill, Jupyter, other
    parameters) `unstaged_dir`, announced once, so that only the book's own run writes the book's results; else
    (library code called from a script or a test) results/<scale>/<chapter>/, whose files the builder and the
    Scoreboard then see as "foreign" (`nhtlib.report.manifest.check_folder`: not in its run.json)."""
    path = staged_dir(chapter, scale)
    if path is None and in_notebook_kernel():
        path = unstaged_dir(chapter, scale)
        if path not in _TOLD_UNSTAGED:
            _TOLD_UNSTAGED.add(path)
            import sys

            print(f"note: this notebook runs outside the book's runner, so its results go to {path} (the book and "
                  f"its Scoreboard never read them); `python -m nhtlib run {chapter}` makes the book's results",
                  file=sys.stderr)
    path = path or final_chapter_dir(chapter, scale)
    path.mkdir(parents=True, exist_ok=True)
    return path


RUN_RECORD = "run.json"  # the record a successful run leaves in its chapter folder (`nhtlib.cli.runner.finish_run`)


def is_stray_folder(folder: Path) -> bool:
    """Whether a results folder was made by a run of a notebook that is no longer the book's (a renamed or removed
    chapter, or a folder renamed by hand): its run.json names another chapter, or neither the notebook it records
    nor notebooks/<folder name>.ipynb exists. A folder without a readable run.json is not called stray here (its
    state, "not executed" or "foreign", is `nhtlib.report.manifest.check_folder`'s to say)."""
    import json

    try:
        record = json.loads((folder / RUN_RECORD).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict) or record.get("chapter", folder.name) != folder.name:
        return True
    notebooks = [Path(record["notebook"])] if record.get("notebook") else []
    if repo_root() is not None:
        notebooks.append(repo_root() / "notebooks" / f"{folder.name}.ipynb")
    return not any(p.exists() for p in notebooks)


def chapter_folders(scale: str) -> dict[str, Path]:
    """chapter -> the folder the book reads it from at this scale: every results/<scale>/<chapter>/ except
    seed-<s>/ (other seeds), variant-<hash>/ (other settings), unstaged/ (runs outside the runner), hidden folders
    and stray ones (`is_stray_folder`);
    while the runner runs a chapter, that chapter's staging folder takes the place of its default folder."""
    root = results_root() / scale
    folders = {p.name: p for p in (root.iterdir() if root.is_dir() else [])
               if p.is_dir() and p.name != UNSTAGED and not p.name.startswith(("seed-", VARIANT_PREFIX, "."))
               and not is_stray_folder(p)}
    env = os.environ.get(CHAPTER_OUT_ENV)
    staged = staged_dir(Path(env).name, scale) if env else None
    if staged is not None:
        folders[staged.name] = staged
    return dict(sorted(folders.items()))


def chapter_files(scale: str, pattern: str) -> list[Path]:
    """Files matching `pattern` (e.g. 'claims.csv') in the folder of every chapter the book reads
    (`chapter_folders`), sorted by chapter: a chapter being run reads its own fresh outputs, not the last run's."""
    return [f for folder in chapter_folders(scale).values() for f in sorted(folder.glob(pattern))]


def default_data_root() -> Path | None:
    env = os.environ.get("NHT_DATA_ROOT")
    if env:
        return Path(env).expanduser()
    root = repo_root()
    if root is not None and (root.parent / "shared" / "data").exists():
        return root.parent / "shared" / "data"
    return None


def data_root(value: str | os.PathLike | None = None, *, need: str | None = None) -> Path:
    """Resolve the data root (argument, else $NHT_DATA_ROOT, else ../shared/data beside the checkout).

    need: a sub-folder that must exist (e.g. 'cifar10'); the error says where to put it.
    """
    path = Path(value).expanduser() if value else default_data_root()
    if path is None or not path.exists():
        raise FileNotFoundError(
            f"data_root={str(value) if value else None!r}: no data folder found. Pass data_root='/path/to/data' "
            "(the chapter's parameter) or set NHT_DATA_ROOT; it must contain the data set folders "
            "(cifar10/, mnist/, celeba/, cub/ ...) as described in the book's introduction."
        )
    if need is not None and not (path / need).exists():
        raise FileNotFoundError(f"data_root={str(path)!r} has no {need!r} folder; put the data set at {path / need}")
    return path


@lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over every .py file of nhtlib (path + bytes), 16 hex digits: changes whenever the library's code
    changes (part of every run-cache key and of every chapter's run record)."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def git_commit() -> str:
    root = repo_root()
    if root is None:
        return "unknown"
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "nhtlib"], cwd=root, capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# Writing files: atomically (temporary file in the same folder + rename), so a reader never sees half a file.

def current_umask() -> int:
    """The process's umask, read from /proc/self/status (Linux) without changing it; elsewhere it is set and put
    back at once (racy between threads, which share it; only where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, with the mode open() gives a new file (0o666 & ~umask): mkstemp's 0600
    would keep every other user, a group sharing the folder included, from reading it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_torch_save(obj: Any, path: Path) -> None:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def lazy_attributes(package: str, names: dict[str, str]):
    """A module-level ``__getattr__`` for `package` that imports `names` on first use: name -> 'module' (the
    attribute is that module) or 'module:attribute'. A package's face then executes no code of its own parts until
    one is used, so the code a run executes is what its imports reach (`nhtlib.engine.source.run_source_hash`)."""
    import importlib

    def __getattr__(name: str):
        target = names.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attribute) if attribute else module

    return __getattr__


def holder_alive(record: dict[str, Any]) -> bool:
    """Whether the process a record names (its host and pid) may still run: on another host, or without a pid to
    test, it is assumed to (its lease then expires by time)."""
    import socket

    if record.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, TypeError, ValueError, OverflowError):
        return True  # another user's process, or no pid to test
    return True
