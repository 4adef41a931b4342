"""The run cache: a finished run is never trained twice, and a killed one resumes.

Each *member* run (one seed, one lambda, one lr ...) is stored under a key that hashes its full config together
with nhtlib's version **and a hash of the code the run executes** (`nhtlib.engine.source`: the engine, data, models
and the metrics it logs, found from their imports), so an edit of that code invalidates old results while an edit of
a plot, a rule or a page does not (jupyter-book's own cache would not notice either). Entries are written atomically (temporary file + rename).

No silent wrong results: every read of a table checks it against the sha256 stored in its metadata. An entry that
fails to parse or validate (checksum, key, row count; an entry without a checksum is from an older format) is
reported, deleted and recomputed. A failure to *read* (an OSError: too many open files, permissions, I/O error) is
raised with the path and deletes nothing: the entry may be perfectly good. A corrupt checkpoint is discarded the
same way (warning naming its path; training restarts from step 0). `RunCache.check_writable()` lets a sweep fail
before training when results could not be stored.

Two processes may train the same member at once (two notebooks, a chapter and a test). Their tables differ (wall
times), so an entry is written and read as a pair under a lock on the runs folder (`runs/.lock`, POSIX flock:
exclusive to write, shared to read), and each table is named by its content (`<key>.<sha>.parquet`) with the
metadata naming it: one process's metadata never meets the other's table, and even where flock is unavailable a
reader sees a consistent pair (superseded tables are then left behind, never a wrong one served).

Layout under results_root()/cache/::

    runs/<key>.<sha16>.parquet  the member's logged table (sha16: the first 16 hex digits of its sha256)
    runs/<key>.json             metadata: config, row count, table (the parquet file's name), table_sha256 (sha256
                                of its bytes), library version, source hash, git commit, device, wall time
    runs/.lock                  the lock that pairs each entry's table and metadata
    checkpoints/<key>.pt        in-progress training state of a batch of members (deleted when it finishes)
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from nhtlib.config import stable_hash
from nhtlib.engine.source import run_source_hash
from nhtlib.paths import NotWritableError, __version__, atomic_torch_save, atomic_write_bytes, git_commit, results_root, writable_dir  # noqa: F401

# what train.py stores in a checkpoint; a state without any of these cannot resume a run
CHECKPOINT_KEYS = frozenset({"params", "buffers", "optimizer", "sampler", "rows", "step", "elapsed"})


class CacheNotWritableError(NotWritableError):
    """The run cache cannot store results (raised before training, so no training time is lost)."""


class _Corrupt(Exception):
    """An entry's bytes were read but are not a valid entry (the reason is the message)."""


def read_bytes_or_none(path: Path, what: str) -> bytes | None:
    """The file's bytes, or None when it does not exist. Any other OSError is raised with the path and `what` it is:
    a file that cannot be read (too many open files, permissions ...) is not a corrupt file and must not be deleted."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # no such file (ENOTDIR: a parent is a regular file)
        return None
    except OSError as err:
        raise OSError(err.errno, f"cannot read {what} ({err.strerror or err}); nothing was deleted, "
                      "fix the cause and re-run", str(path)) from err


def run_key(config: dict[str, Any], source: str | None = None) -> str:
    """The cache key of one member: its config (with its data fingerprint and metrics identity), nhtlib's version and
    `source`, the hash of the code the run executes (`nhtlib.engine.source.run_source_hash`, its default)."""
    return stable_hash({"config": config, "nhtlib": __version__, "source": source or run_source_hash()}, length=24)


class RunCache:
    """Store and load member runs by key. `root` defaults to results_root()/cache."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else results_root() / "cache"
        self.runs = self.root / "runs"
        self.checkpoints = self.root / "checkpoints"

    def _meta_path(self, key: str) -> Path:
        return self.runs / f"{key}.json"

    def _table_path(self, key: str, sha256: str) -> Path:
        return self.runs / f"{key}.{sha256[:16]}.parquet"

    @contextmanager
    def _locked(self, exclusive: bool):
        """Hold the runs folder's lock (exclusive: writing or deleting an entry; shared: reading one). Without
        fcntl (Windows) or a runs folder yet, nothing is locked: the content-named tables keep readers consistent."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        if not self.runs.is_dir():
            if not exclusive:
                yield
                return
            self.runs.mkdir(parents=True, exist_ok=True)
        with open(self.runs / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def load(self, key: str) -> pd.DataFrame | None:
        """The cached table, or None on a miss. A corrupt entry is deleted (with a warning) and counts as a miss;
        an OSError while reading is raised (see read_bytes_or_none) and deletes nothing."""
        try:
            with self._locked(exclusive=False):
                return self._read(key)
        except _Corrupt as err:
            warnings.warn(f"run cache entry {key} in {self.runs} is corrupted ({err}); deleting it and recomputing",
                          stacklevel=2)
            self.delete(key)
            return None

    def _read(self, key: str) -> pd.DataFrame | None:
        """Read and verify one entry: None on a miss, _Corrupt when its bytes are not a valid entry."""
        meta_bytes = read_bytes_or_none(self._meta_path(key), f"run cache metadata of entry {key}")
        if meta_bytes is None:
            return None
        try:
            meta = json.loads(meta_bytes)
        except ValueError as err:  # includes UnicodeDecodeError
            raise _Corrupt(f"metadata is not JSON: {err}") from err
        if not isinstance(meta, dict) or meta.get("key") != key:
            raise _Corrupt(f"metadata key {meta.get('key') if isinstance(meta, dict) else meta!r} != {key!r}")
        expected = meta.get("table_sha256")
        if not expected or not isinstance(expected, str):
            raise _Corrupt("metadata has no table_sha256: written by an older nhtlib")
        table_path = self._table_path(key, expected)
        data = read_bytes_or_none(table_path, f"run cache table of entry {key}")
        if data is None:
            raise _Corrupt(f"metadata without its table {table_path.name}")
        found = hashlib.sha256(data).hexdigest()
        if found != expected:
            raise _Corrupt(f"table sha256 {found[:12]}... != {expected[:12]}... in the metadata")
        try:
            table = pd.read_parquet(io.BytesIO(data))
        except Exception as err:  # noqa: BLE001 - in-memory bytes: any failure is a parse failure
            raise _Corrupt(f"table does not parse: {type(err).__name__}: {err}") from err
        if len(table) != meta.get("rows"):
            raise _Corrupt(f"table has {len(table)} rows, metadata says {meta.get('rows')}")
        return table

    def meta(self, key: str) -> dict[str, Any] | None:
        meta_path = self._meta_path(key)
        return json.loads(meta_path.read_text()) if meta_path.exists() else None

    def table_file(self, key: str) -> Path | None:
        """The table file that the entry's metadata names (None without metadata); for tools and tests."""
        meta = self.meta(key)
        return self.runs / meta["table"] if meta and "table" in meta else None

    def keys(self) -> list[str]:
        """The keys of every entry on disk (those with metadata), sorted."""
        return sorted(p.stem for p in self.runs.glob("*.json")) if self.runs.is_dir() else []

    def save(self, key: str, table: pd.DataFrame, config: dict[str, Any], *, device: str, wall_time_s: float,
             extra: dict[str, Any] | None = None) -> None:
        """Store one member's table (parquet) and its metadata (JSON, with the table's sha256), both atomically."""
        import torch

        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        data = buffer.getvalue()
        sha256 = hashlib.sha256(data).hexdigest()
        table_path = self._table_path(key, sha256)
        meta = {
            "key": key, "config": config, "rows": len(table), "table": table_path.name, "table_sha256": sha256,
            "nhtlib_version": __version__, "nhtlib_source_hash": run_source_hash(), "git_commit": git_commit(),
            "device": device, "torch_version": torch.__version__, "wall_time_s": round(wall_time_s, 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(extra or {}),
        }
        with self._locked(exclusive=True):
            atomic_write_bytes(table_path, data)
            # metadata last: an entry only counts once its metadata exists
            atomic_write_bytes(self._meta_path(key), json.dumps(meta, indent=1, default=str).encode())
            self._remove_tables(key, keep=table_path)  # another process's table of this key, now superseded

    def delete(self, key: str) -> None:
        """Remove an entry: its metadata and every table file of its key."""
        with self._locked(exclusive=True):
            self._meta_path(key).unlink(missing_ok=True)
            self._remove_tables(key)

    def _remove_tables(self, key: str, keep: Path | None = None) -> None:
        for path in self.runs.glob(f"{key}.*parquet"):
            if path != keep:
                path.unlink(missing_ok=True)

    def checkpoint_path(self, batch_key: str) -> Path:
        return self._ensure(self.checkpoints) / f"{batch_key}.pt"

    def check_writable(self) -> None:
        """Create and remove a probe file in runs/ and checkpoints/; raise CacheNotWritableError naming the folder,
        the OS error and the fix. Call it before training: a read-only cache would otherwise fail only after it."""
        for folder in (self.runs, self.checkpoints):
            try:
                writable_dir(folder, probe=True)
            except OSError as err:
                raise CacheNotWritableError(
                    f"the run cache folder {folder} is not writable ({err}), so trained runs could not be stored; "
                    f"set NHT_RESULTS to a writable folder (the cache is $NHT_RESULTS/cache) "
                    f"or pass RunCache(root=<writable folder>)") from err

    @staticmethod
    def _ensure(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path


# Checkpoints: train.py writes one every few seconds; a corrupt one must not block every re-run.

def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write a training state atomically (a reader never sees half a checkpoint). state must hold CHECKPOINT_KEYS."""
    missing = CHECKPOINT_KEYS - set(state)
    if missing:
        raise ValueError(f"checkpoint state lacks {sorted(missing)}; it needs {sorted(CHECKPOINT_KEYS)}")
    atomic_torch_save(state, Path(path))


def load_checkpoint(path: Path, map_location: Any = None) -> dict[str, Any] | None:
    """The training state saved at `path`, or None when there is none.

    A file that does not parse, or a state without CHECKPOINT_KEYS, is discarded: warning naming the path and the
    reason, file deleted, None (training restarts from step 0). An OSError while reading is raised with the path.
    """
    import torch

    path = Path(path)
    data = read_bytes_or_none(path, "training checkpoint")
    if data is None:
        return None
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=False)
    except Exception as err:  # noqa: BLE001 - in-memory bytes: any failure is a parse failure
        reason = f"{type(err).__name__}: {err}"
    else:
        missing = CHECKPOINT_KEYS - set(state) if isinstance(state, dict) else CHECKPOINT_KEYS
        reason = f"state lacks {sorted(missing)}" if missing else None
    if reason is None:
        return state
    warnings.warn(f"discarding corrupt checkpoint {path} ({reason}); training restarts from step 0", stacklevel=2)
    path.unlink(missing_ok=True)
    return None
