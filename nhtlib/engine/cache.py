"""The run cache: a finished run is never trained twice, and a killed one resumes.

Each *member* run (one seed, one lambda, one lr ...) is stored under a key that hashes its full config together
with nhtlib's version **and a hash of the code the run executes** (`nhtlib.engine.source`: the engine, data, models
and the metrics it logs, found from their imports), so an edit of that code invalidates old results while an edit of
a plot, a rule or a page does not (jupyter-book's own cache would not notice either). Entries are written atomically (temporary file + rename).

No silent wrong results: every read of a table checks it against the sha256 stored in its metadata. An entry that
fails to parse or validate (checksum, key, row count; an entry without a checksum is from an older format) is
reported, deleted and recomputed. A failure to *read* (an OSError: too many open files, permissions, I/O error) is
raised with the path and deletes nothing: the entry may be perfectly good. `RunCache.meta` (what the chapter runner
and the build count entries with) treats damaged metadata as a miss with a warning naming the file, never an error.
`RunCache.check_writable()` lets a sweep fail before training when results could not be stored.

No code from the cache is ever run: a checkpoint holds only tensors and plain values (str, int, float, bool, None,
lists, tuples and dicts of them; `save_checkpoint` refuses anything else) and is read with
``torch.load(weights_only=True)``. A checkpoint that names any other global (a planted pickle) is refused by name,
deleted without being loaded, and training restarts from step 0; so is a corrupt one.

Two processes may train the same member at once (two notebooks, a chapter and a test). Their tables differ (wall
times), so an entry is written and read as a pair under a lock on the runs folder (`runs/.lock`, POSIX flock:
exclusive to write, shared to read), and each table is named by its content (`<key>.<sha>.parquet`) with the
metadata naming it: one process's metadata never meets the other's table, and even where flock is unavailable a
reader sees a consistent pair (superseded tables are then left behind, never a wrong one served). The lock is waited
for at most $NHT_LOCK_TIMEOUT seconds (default 120 to read, 600 to write; it is held for the time of writing or
reading one entry); then `CacheLockTimeout` names the lock file and its holder, which the exclusive holder records
in `runs/.lock.holder` (pid, host, command, since).

Sharing a cache: $NHT_CACHE names the cache folder (default results_root()/cache, `nhtlib.paths.cache_root`). Files
and folders are created with the modes open() and mkdir give (0o666 / 0o777 & ~umask), and a lock file that is not
writable is opened read-only (flock needs no write access on a local file system), so a group shares one cache
with a setgid, group-writable folder and umask 0002::

    mkdir -p /shared/nht-cache && chgrp mygroup /shared/nht-cache && chmod 2775 /shared/nht-cache
    export NHT_CACHE=/shared/nht-cache; umask 0002

Layout under the cache folder::

    runs/<key>.<sha16>.parquet  the member's logged table (sha16: the first 16 hex digits of its sha256)
    runs/<key>.json             metadata: config, row count, table (the parquet file's name), table_sha256 (sha256
                                of its bytes), library version, source hash, git commit, device, wall time,
                                environment (Python, numpy, torch, CUDA and cuDNN versions, device name)
    runs/.lock                  the lock that pairs each entry's table and metadata
    runs/.lock.holder           who holds the lock exclusively (JSON; present only while it is held)
    checkpoints/<key>.pt        in-progress training state of one member, whatever batch trains it (key:
                                `member_checkpoint_key`; deleted when the member finishes)
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import platform
import re
import socket
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from nhtlib.config import stable_hash
from nhtlib.engine.source import run_source_hash
from nhtlib.paths import NotWritableError, __version__, atomic_torch_save, atomic_write_bytes, cache_root, git_commit, results_root, writable_dir  # noqa: F401

# what train.py stores in a checkpoint; a state without any of these cannot resume a run
CHECKPOINT_KEYS = frozenset({"params", "buffers", "optimizer", "sampler", "rows", "step", "elapsed"})
PLAIN_TYPES = (str, int, float, bool, type(None))  # exact types: numpy's float64 subclasses float but is no plain float
_PLAIN_SET = frozenset(PLAIN_TYPES)

LOCK_TIMEOUT_ENV = "NHT_LOCK_TIMEOUT"
# The lock is held for one entry's write or read (well under a second), so a long wait means a stuck holder: readers
# give up after 2 minutes, writers (whose result would otherwise be lost) after 10.
READ_LOCK_TIMEOUT_S, WRITE_LOCK_TIMEOUT_S = 120.0, 600.0
LOCK_POLL_S = 0.1


class CacheNotWritableError(NotWritableError):
    """The run cache cannot store results (raised before training, so no training time is lost)."""


class CacheLockTimeout(TimeoutError):
    """The run cache's lock was not obtained in time; the message names the lock file and its holder."""


class _Corrupt(Exception):
    """An entry's bytes were read but are not a valid entry: `path` is the damaged file, the message the reason."""

    def __init__(self, path: Path, reason: str):
        super().__init__(reason)
        self.path = path


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


def run_environment(device: str) -> dict[str, Any]:
    """What a run ran on, stored with each cache entry: Python, numpy and torch versions, CUDA and cuDNN versions
    (None unless `device` is a CUDA device), the device string and the device's name (GPU name, else the CPU's)."""
    import numpy
    import torch

    cuda = str(device).startswith("cuda")
    return {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None,
            "cudnn": torch.backends.cudnn.version() if cuda else None, "device": str(device),
            "device_name": torch.cuda.get_device_name(torch.device(device)) if cuda else platform.processor() or "cpu"}


def lock_timeout(exclusive: bool) -> float:
    """Seconds to wait for the runs lock: $NHT_LOCK_TIMEOUT, else WRITE_LOCK_TIMEOUT_S / READ_LOCK_TIMEOUT_S."""
    env = os.environ.get(LOCK_TIMEOUT_ENV)
    if not env:
        return WRITE_LOCK_TIMEOUT_S if exclusive else READ_LOCK_TIMEOUT_S
    try:
        return float(env)
    except ValueError:
        raise ValueError(f"{LOCK_TIMEOUT_ENV}={env!r} is not a number of seconds; set it to e.g. 600 or unset it")


def _lock_holders(lock: Path) -> list[int]:
    """Pids that hold a flock on `lock` by /proc/locks (Linux; empty elsewhere or when none is found)."""
    try:
        inode, lines = os.stat(lock).st_ino, Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    fields = [line.split() for line in lines]
    # "1: FLOCK  ADVISORY  WRITE 1234 00:2f:56789 0 EOF": the fifth field is the pid, the sixth ends in the inode
    return sorted({int(f[4]) for f in fields if len(f) > 5 and f[1] == "FLOCK" and f[4].isdigit()
                   and f[5].rsplit(":", 1)[-1] == str(inode)})


class RunCache:
    """Store and load member runs by key. `root` defaults to $NHT_CACHE, else results_root()/cache."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else cache_root()
        self.runs = self.root / "runs"
        self.checkpoints = self.root / "checkpoints"

    def _meta_path(self, key: str) -> Path:
        return self.runs / f"{key}.json"

    def _table_path(self, key: str, sha256: str) -> Path:
        return self.runs / f"{key}.{sha256[:16]}.parquet"

    @property
    def lock_path(self) -> Path:
        return self.runs / ".lock"

    @property
    def holder_path(self) -> Path:
        return self.runs / ".lock.holder"

    @contextmanager
    def _locked(self, exclusive: bool):
        """Hold the runs folder's lock (exclusive: writing or deleting an entry; shared: reading one), waiting at
        most `lock_timeout` seconds (then CacheLockTimeout). Without fcntl (Windows), a runs folder yet, or a lock
        file this user can create, nothing is locked: the content-named tables keep readers consistent."""
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
        handle = self._open_lock()
        if handle is None:
            yield
            return
        with handle:
            self._acquire(handle, fcntl, exclusive)
            try:
                if exclusive:
                    self._record_holder()
                yield
            finally:
                if exclusive:  # before unlocking: the next holder's record must not be removed
                    self.holder_path.unlink(missing_ok=True)
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _open_lock(self):
        """The lock file opened for writing (created with 0o666 & ~umask), else read-only when it exists but is not
        writable by this user (another user's, e.g. 0644): flock works on either. None when it cannot be created."""
        try:
            return open(self.lock_path, "a+b")
        except PermissionError:
            try:
                return open(self.lock_path, "rb")
            except FileNotFoundError:  # a folder this user may not write, and no lock in it: nobody writes here
                return None
            except PermissionError as err:
                raise PermissionError(err.errno, "cannot open the run cache lock for reading; make it readable "
                                      "by every user of the cache (chmod g+rw)", str(self.lock_path)) from err

    def _acquire(self, handle, fcntl, exclusive: bool) -> None:
        """flock without blocking, polled every LOCK_POLL_S up to `lock_timeout` (CacheLockTimeout naming the
        holder): a stuck holder must not make every other process hang without a word."""
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        timeout = lock_timeout(exclusive)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, mode)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(LOCK_POLL_S)
        raise CacheLockTimeout(
            f"the run cache lock {self.lock_path} was not obtained within {timeout:g} s "
            f"({'exclusive, to store an entry' if exclusive else 'shared, to read an entry'}): it is held by "
            f"{self._holder_description()}. If that process is stuck, stop it; to wait longer set "
            f"{LOCK_TIMEOUT_ENV}=<seconds>")

    def _record_holder(self) -> None:
        """Write runs/.lock.holder (pid, host, command, since) for whoever times out waiting. A courtesy: a cache
        where it cannot be written still works."""
        record = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:300],
                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        try:
            atomic_write_bytes(self.holder_path, json.dumps(record).encode())
        except OSError:
            pass

    def _holder_description(self) -> str:
        """Who holds the lock: the exclusive holder's record, else (readers hold it shared, unrecorded) the pids
        /proc/locks lists."""
        try:
            record = json.loads(self.holder_path.read_bytes())
            pid, host = int(record["pid"]), str(record["host"])
        except (OSError, ValueError, KeyError, TypeError):
            pids = _lock_holders(self.lock_path)
            return (f"pid {', '.join(map(str, pids))} (readers or an unrecorded writer; see /proc/<pid>/cmdline)"
                    if pids else "another process (readers are not recorded; see `fuser -v` on the lock file)")
        gone = ""
        if host == socket.gethostname():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                gone = "; that process is gone, so the record is stale and readers hold the lock"
            except PermissionError:
                pass  # alive, another user's
        return (f"pid {pid} on host {host} (command: {record.get('command', '?')}), since "
                f"{record.get('since', '?')}, by {self.holder_path}{gone}")

    def load(self, key: str) -> pd.DataFrame | None:
        """The cached table, or None on a miss. A corrupt entry is deleted (with a warning naming the damaged file)
        and counts as a miss; an OSError while reading is raised (see read_bytes_or_none) and deletes nothing."""
        try:
            with self._locked(exclusive=False):
                return self._read(key)
        except _Corrupt as err:
            warnings.warn(f"run cache entry {key} in {err.path} is corrupted ({err}); deleting it and recomputing",
                          stacklevel=2)
            self.delete(key)
            return None

    def _parse_meta(self, key: str, meta_bytes: bytes) -> dict[str, Any]:
        """An entry's metadata from its bytes; _Corrupt (naming the file) unless it is a JSON object of this key."""
        path = self._meta_path(key)
        try:
            meta = json.loads(meta_bytes)
        except ValueError as err:  # includes UnicodeDecodeError
            raise _Corrupt(path, f"metadata is not JSON: {err}") from err
        if not isinstance(meta, dict) or meta.get("key") != key:
            raise _Corrupt(path, f"metadata key {meta.get('key') if isinstance(meta, dict) else meta!r} != {key!r}")
        return meta

    def _read(self, key: str) -> pd.DataFrame | None:
        """Read and verify one entry: None on a miss, _Corrupt when its bytes are not a valid entry."""
        meta_bytes = read_bytes_or_none(self._meta_path(key), f"run cache metadata of entry {key}")
        if meta_bytes is None:
            return None
        meta = self._parse_meta(key, meta_bytes)
        expected = meta.get("table_sha256")
        if not expected or not isinstance(expected, str):
            raise _Corrupt(self._meta_path(key), "metadata has no table_sha256: written by an older nhtlib")
        table_path = self._table_path(key, expected)
        data = read_bytes_or_none(table_path, f"run cache table of entry {key}")
        if data is None:
            raise _Corrupt(self._meta_path(key), f"metadata without its table {table_path.name}")
        found = hashlib.sha256(data).hexdigest()
        if found != expected:
            raise _Corrupt(table_path, f"table sha256 {found[:12]}... != {expected[:12]}... in the metadata")
        try:
            table = pd.read_parquet(io.BytesIO(data))
        except Exception as err:  # noqa: BLE001 - in-memory bytes: any failure is a parse failure
            raise _Corrupt(table_path, f"table does not parse: {type(err).__name__}: {err}") from err
        if len(table) != meta.get("rows"):
            raise _Corrupt(table_path, f"table has {len(table)} rows, metadata says {meta.get('rows')}")
        return table

    def meta(self, key: str) -> dict[str, Any] | None:
        """The entry's metadata, or None on a miss. Damaged metadata (not JSON, not this key's) is a miss too, with a
        warning naming the file, never an error: one bad file must not stop every chapter and build that counts
        entries (`load` then deletes and recomputes it). An OSError while reading is raised with the path."""
        path = self._meta_path(key)
        data = read_bytes_or_none(path, f"run cache metadata of entry {key}")
        if data is None:
            return None
        try:
            return self._parse_meta(key, data)
        except _Corrupt as err:
            warnings.warn(f"ignoring the run cache metadata {path}: {err}; entry {key} counts as missing "
                          "(the run that needs it recomputes it)", stacklevel=2)
            return None

    def table_file(self, key: str) -> Path | None:
        """The table file that the entry's metadata names (None without metadata); for tools and tests."""
        meta = self.meta(key)
        return self.runs / meta["table"] if meta and "table" in meta else None

    def keys(self) -> list[str]:
        """The keys of every entry on disk (those with metadata), sorted."""
        return sorted(p.stem for p in self.runs.glob("*.json")) if self.runs.is_dir() else []

    def save(self, key: str, table: pd.DataFrame, config: dict[str, Any], *, device: str, wall_time_s: float,
             extra: dict[str, Any] | None = None) -> None:
        """Store one member's table (parquet) and its metadata (JSON, with the table's sha256 and the run's
        `run_environment`), both atomically."""
        import torch

        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        data = buffer.getvalue()
        sha256 = hashlib.sha256(data).hexdigest()
        table_path = self._table_path(key, sha256)
        meta = {
            "key": key, "config": config, "rows": len(table), "table": table_path.name, "table_sha256": sha256,
            "nhtlib_version": __version__, "nhtlib_source_hash": run_source_hash(), "git_commit": git_commit(),
            "device": device, "torch_version": torch.__version__, "environment": run_environment(device),
            "wall_time_s": round(wall_time_s, 3), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            **(extra or {}),
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

    def member_checkpoint_path(self, key: str) -> Path:
        """Where the member of run key `key` resumes from, whatever batch it trains in (`member_checkpoint_key`)."""
        return self.checkpoint_path(member_checkpoint_key(key))

    def check_writable(self) -> None:
        """Create and remove a probe file in runs/ and checkpoints/; raise CacheNotWritableError naming the folder,
        the OS error and the fix. Call it before training: a read-only cache would otherwise fail only after it."""
        for folder in (self.runs, self.checkpoints):
            try:
                writable_dir(folder, probe=True)
            except OSError as err:
                raise CacheNotWritableError(
                    f"the run cache folder {folder} is not writable ({err}), so trained runs could not be stored; "
                    f"set NHT_CACHE to a writable folder for the run cache, or NHT_RESULTS to a writable folder "
                    f"(the cache is then $NHT_RESULTS/cache), or pass RunCache(root=<writable folder>)") from err

    @staticmethod
    def _ensure(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path


# Checkpoints: train.py writes one every few seconds; a corrupt one must not block every re-run, and a planted one
# must never run its code.

def check_plain(value: Any, where: str = "state") -> None:
    """TypeError naming the first value under `value` that torch.load(weights_only=True) would not read back as it
    was: only tensors, PLAIN_TYPES and lists, tuples and dicts (str or int keys) of them are allowed."""
    import torch

    if isinstance(value, torch.Tensor) or type(value) in PLAIN_TYPES:
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
        return
    if type(value) is dict:
        if {type(item) for item in value.values()} <= _PLAIN_SET and {type(name) for name in value} <= {str, int}:
            return  # the common case (a logged row of floats), checked without a call per value
        for name, item in value.items():
            if type(name) not in (str, int):
                raise TypeError(f"checkpoint key {where}[{name!r}] is a {type(name).__name__}; keys must be str or int")
            check_plain(item, f"{where}[{name!r}]")
        return
    raise TypeError(f"checkpoint value {where} is a {type(value).__module__}.{type(value).__qualname__}; a checkpoint "
                    "holds only tensors, str, int, float, bool, None and lists, tuples and dicts of them (it is read "
                    "with torch.load(weights_only=True), which runs no code): convert it, e.g. with .tolist() or "
                    "torch.as_tensor, and back on load")


def member_checkpoint_key(key: str) -> str:
    """The checkpoint key of one member (run key `key`): the key a batch of that member alone is saved under, the hash
    of its sorted member keys. A batch saves each member's part of its state under the member's own key, so a batch of
    any size (after an out-of-memory back-off, or on a device with other free memory) resumes every member it holds."""
    return stable_hash([key], length=24)


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint was saved at, read without loading its tensors (memory-mapped, weights_only: no code
    runs); 0 when there is none or it does not load (`load_checkpoint` then says why, and training restarts)."""
    import torch

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = torch.load(Path(path), map_location="cpu", weights_only=True, mmap=True)
        step = state.get("step", 0) if isinstance(state, dict) else 0
        return step if type(step) is int else 0
    except Exception:  # noqa: BLE001 - missing, corrupt or planted: the loader decides what to do with it
        return 0


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write a training state atomically (a reader never sees half a checkpoint). state must hold CHECKPOINT_KEYS
    and only plain values (`check_plain`), so that `load_checkpoint` reads it back without unpickling any code."""
    missing = CHECKPOINT_KEYS - set(state)
    if missing:
        raise ValueError(f"checkpoint state lacks {sorted(missing)}; it needs {sorted(CHECKPOINT_KEYS)}")
    check_plain(state)
    atomic_torch_save(state, Path(path))


# what a plain state's pickle names (tensors rebuilt by torch, ordered dicts): never the payload of a planted file
PLAIN_GLOBALS = ("torch.", "collections.OrderedDict")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def pickle_globals(data: bytes) -> list[str]:
    """'module.name' of every global that a pickle, or the pickle inside a torch.save zip, would import and call,
    in order; read with pickletools, so nothing is imported or run. A damaged pickle gives those before the damage."""
    import pickletools
    import zipfile

    if zipfile.is_zipfile(io.BytesIO(data)):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                return [g for name in archive.namelist() if name.endswith(".pkl")
                        for g in pickle_globals(archive.read(name))]
        except (zipfile.BadZipFile, OSError, EOFError, ValueError):
            return []
    found: list[str] = []
    pushed: list[str | None] = []  # what each opcode pushed (str or None): STACK_GLOBAL pops two strings
    memo: dict[int, str | None] = {}
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("GLOBAL", "INST"):
                found.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL" and len(pushed) >= 2:
                found.append(f"{pushed[-2]}.{pushed[-1]}")
            if op.name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = pushed[-1] if pushed else None
            elif op.name in ("GET", "BINGET", "LONG_BINGET"):
                pushed.append(memo.get(int(arg)))
            elif op.stack_after:
                pushed.append(arg if isinstance(arg, str) else None)
    except Exception:  # noqa: BLE001 - a damaged pickle: what was found so far
        pass
    return [name for name in found if _DOTTED_NAME.fullmatch(name)]  # random bytes rarely spell a global


def foreign_globals(data: bytes) -> list[str]:
    """The globals a checkpoint's pickle names that torch's weights-only loader does not allow (what a planted
    pickle would have run), distinct, in order."""
    import torch.serialization

    try:  # a torch.save zip (every checkpoint the loop writes): torch's own list of what its loader refuses
        return list(dict.fromkeys(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))))
    except Exception:  # noqa: BLE001 - a bare pickle, which the loop never writes: what it would import and call
        return [name for name in dict.fromkeys(pickle_globals(data)) if not name.startswith(PLAIN_GLOBALS)]


# the boilerplate of torch's weights-only errors: it advises weights_only=False, which is what a planted file wants
_TORCH_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation")


def _short_reason(err: Exception) -> str:
    """One line saying why a checkpoint did not load: torch's weights-only message without its boilerplate."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith(_TORCH_BOILERPLATE)]
    return "; ".join(kept or lines[:1]).replace("WeightsUnpickler error: ", "")


def load_checkpoint(path: Path, map_location: Any = None) -> dict[str, Any] | None:
    """The training state saved at `path`, or None when there is none.

    Read with torch.load(weights_only=True): no code in the file runs. A file that names any other global (a planted
    pickle) is refused by name ("refusing checkpoint <path>: it holds <global>, not plain tensors"); a file that does
    not parse, or a state without CHECKPOINT_KEYS, is discarded as corrupt. Either way: a warning naming the path,
    the file deleted, None (training restarts from step 0). An OSError while reading is raised with the path.
    """
    import torch

    path = Path(path)
    data = read_bytes_or_none(path, "training checkpoint")
    if data is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on pickle protocols: the verdict is ours, below
            state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as err:  # noqa: BLE001 - in-memory bytes: any failure is a parse failure
        foreign = foreign_globals(data) if isinstance(err, pickle.UnpicklingError) else []
        if foreign:
            warnings.warn(f"refusing checkpoint {path}: it holds {', '.join(foreign)}, not plain tensors (code that "
                          "loading it would have run); it is deleted without being loaded and training restarts "
                          "from step 0", stacklevel=2)
            path.unlink(missing_ok=True)
            return None
        reason = f"{type(err).__name__}: {_short_reason(err)}"
    else:
        missing = CHECKPOINT_KEYS - set(state) if isinstance(state, dict) else CHECKPOINT_KEYS
        reason = f"state lacks {sorted(missing)}" if missing else None
    if reason is None:
        return state
    warnings.warn(f"discarding corrupt checkpoint {path} ({reason}); training restarts from step 0", stacklevel=2)
    path.unlink(missing_ok=True)
    return None
