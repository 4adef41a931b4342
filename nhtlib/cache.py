"""The run cache: a finished run is never trained twice, and a killed one resumes.

Each *member* run (one seed, one lambda, one lr ...) is stored under a key that hashes its full config together
with nhtlib's version **and a hash of nhtlib's source code**, so an edit of the library invalidates old results
(jupyter-book's own cache would not notice). Entries are written atomically (temporary file + rename); an entry
that cannot be read back is reported, deleted and recomputed.

Layout under results_root()/cache/:
    runs/<key>.parquet      the member's logged table
    runs/<key>.json         metadata: config, library version, source hash, git commit, device, wall time
    checkpoints/<key>.pt    in-progress training state of a batch of members (deleted when the batch finishes)
"""
from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

import hashlib

import pandas as pd

from . import __version__
from .config import stable_hash
from .paths import PACKAGE_DIR, atomic_torch_save, atomic_write_bytes, git_commit, results_root  # noqa: F401


@lru_cache(maxsize=1)
def source_hash() -> str:
    """sha256 over every .py file of nhtlib (path + bytes): changes whenever the library's code changes."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run_key(config: dict[str, Any]) -> str:
    return stable_hash({"config": config, "nhtlib": __version__, "source": source_hash()}, length=24)


class RunCache:
    """Store and load member runs by key. `root` defaults to results_root()/cache."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else results_root() / "cache"
        self.runs = self.root / "runs"
        self.checkpoints = self.root / "checkpoints"

    def _paths(self, key: str) -> tuple[Path, Path]:
        return self.runs / f"{key}.parquet", self.runs / f"{key}.json"

    def load(self, key: str) -> pd.DataFrame | None:
        """The cached table, or None on a miss. A corrupted entry is deleted (with a warning) and counts as a miss."""
        table_path, meta_path = self._paths(key)
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("key") != key:
                raise ValueError(f"metadata key {meta.get('key')!r} != {key!r}")
            table = pd.read_parquet(table_path)
            if len(table) != meta.get("rows"):
                raise ValueError(f"table has {len(table)} rows, metadata says {meta.get('rows')}")
            return table
        except Exception as err:  # noqa: BLE001 - any unreadable entry is recomputed
            warnings.warn(f"run cache entry {key} is corrupted ({err}); deleting it and recomputing", stacklevel=2)
            self.delete(key)
            return None

    def meta(self, key: str) -> dict[str, Any] | None:
        _, meta_path = self._paths(key)
        return json.loads(meta_path.read_text()) if meta_path.exists() else None

    def save(self, key: str, table: pd.DataFrame, config: dict[str, Any], *, device: str, wall_time_s: float,
             extra: dict[str, Any] | None = None) -> None:
        import torch

        table_path, meta_path = self._paths(key)
        fd, tmp = tempfile.mkstemp(dir=self._ensure(self.runs), prefix=f".{key}.", suffix=".parquet.tmp")
        os.close(fd)
        try:
            table.to_parquet(tmp, index=False)
            os.replace(tmp, table_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        meta = {
            "key": key, "config": config, "rows": len(table), "nhtlib_version": __version__,
            "nhtlib_source_hash": source_hash(), "git_commit": git_commit(), "device": device,
            "torch_version": torch.__version__, "wall_time_s": round(wall_time_s, 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(extra or {}),
        }
        # metadata last: an entry only counts once its metadata exists
        atomic_write_bytes(meta_path, json.dumps(meta, indent=1, default=str).encode())

    def delete(self, key: str) -> None:
        for path in self._paths(key):
            path.unlink(missing_ok=True)

    def checkpoint_path(self, batch_key: str) -> Path:
        return self._ensure(self.checkpoints) / f"{batch_key}.pt"

    @staticmethod
    def _ensure(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path
