"""Where things live: the repository, the results folder, the data root.

Nothing here depends on the current working directory. Defaults can be overridden by environment variables:
NHT_RESULTS (results and run cache), NHT_DATA_ROOT (real data sets).
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent


def repo_root() -> Path | None:
    """The book's checkout when nhtlib is used from one (editable install), else None."""
    candidate = PACKAGE_DIR.parent
    if (candidate / "pyproject.toml").exists() and (candidate / "_toc.yml").exists():
        return candidate
    return None


def results_root() -> Path:
    """Folder for run caches, claims and executed chapters: $NHT_RESULTS, else <repo>/results, else ~/.cache/nht-book."""
    env = os.environ.get("NHT_RESULTS")
    if env:
        path = Path(env).expanduser()
    elif repo_root() is not None:
        path = repo_root() / "results"
    else:
        path = Path.home() / ".cache" / "nht-book"
    path.mkdir(parents=True, exist_ok=True)
    return path


def chapter_dir(chapter: str, scale: str) -> Path:
    """Outputs of one chapter at one scale: results/<scale>/<chapter>/ (claims.csv, executed notebook, figures)."""
    path = results_root() / scale / chapter
    path.mkdir(parents=True, exist_ok=True)
    return path


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

def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
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
