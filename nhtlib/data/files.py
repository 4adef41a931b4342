"""Reading data files without silent mistakes; every loader of `nhtlib.data` goes through here.

**Fingerprints** (the data part of a run's identity, `TaskConfig.data_fingerprint`, and the key of the decode cache).
`file_digests(base, rel_paths)` gives the SHA-256 of each file's bytes (and with ``md5=True`` also its MD5, the
checksum data sets publish, e.g. torchvision's ``train_list``). Cost on one core: SHA-256 about 2 GB/s, MD5 about
0.8 GB/s (both in the same read pass), plus one open + read per file (tens of microseconds; it dominates for
many small JPEGs). Digests are memoised in ``results_root()/data_cache/fingerprints/<hash of the base folder>.json``
keyed by each file's stat signature (relative path, size in bytes, mtime_ns, ctime_ns, inode): a file whose
signature is unchanged is not read again, so a repeated call costs one ``stat`` per file (a few microseconds) plus
reading the memo (JSON, about 150 bytes per file; parsed once per process while unchanged). Overwriting a file
changes its mtime and ctime even when the size stays the same, so it is read again. A missing or corrupt memo is
rebuilt; an unwritable one only costs re-hashing.
Racy writes: file timestamps come from the kernel's coarse clock (a few ms; 2 s on FAT), so a file changed less than
`RACY_NS` (2 s) before it was hashed is not memoised, since it could change again within the same timestamp tick
without changing its signature (git's "racily clean" problem).

`fingerprint(digests)`: 16 hex digits (64 bits) of SHA-256 over the sorted lines "relative path, size, SHA-256". It
depends on the relative paths and the bytes only: the same data moved to another folder keep their fingerprint;
``cp dog/0000.jpg cat/0000.jpg`` changes it.

**Decode cache.** `cached_decode(tag, fingerprint, decode)` runs ``decode()`` once per (tag, fingerprint of the
files it reads) and keeps the tensors in ``results_root()/data_cache/<tag>-<key>.pt``, read back with
``torch.load(weights_only=True)`` (tensors and containers only, never code). A cache file that cannot be parsed
(truncated, corrupt) is a miss: a warning names it, it is removed and the data are decoded again. The tag carries
everything else the decode depends on (data set, image size, ...).

**Errors that name the file.** `reading(path, what)` wraps the reading / parsing of one file: any failure other
than "missing" or "no permission" becomes a `DataFileError` whose message holds the path (the original exception is
chained). An input file whose content does not follow its schema (an attribute header that is not the expected
list, a label or split value outside its set, an unexpected class folder) raises `DataSchemaError`, naming the file,
the line, what was expected and what was found: a mismatch refuses, it never shifts columns or labels.
`read_image(path)` decodes a JPEG / PNG with Pillow (bytes read here so the error can name the file) to uint8 RGB
(3, H, W). A set of files with some missing is refused by `file_digests` (and `require_files`) with one error
naming how many are missing, the first few, and where.

**Pickles.** `load_pickle(path)` reads a pickle with `RestrictedUnpickler`, which admits only what a CIFAR
python-version batch holds: dicts, lists, str, bytes, numbers and numpy arrays (numpy's array-reconstruction
globals, ``ndarray`` and ``dtype``). Any other global (``os.system``, ``builtins.exec``, a class of some module) is
refused by name with `pickle.UnpicklingError` before it can run; nothing else in the package unpickles data files.

**Resampling.** `resample(image, size, kind, box)` resizes a decoded uint8 (C, H, W) image with Pillow's own
``Image.resize`` ("box", "bilinear", "bicubic"). Decoding moved from ``torchvision.io.decode_image`` (deprecated in
torchvision 0.29, which points to TorchCodec, not a dependency) back to Pillow: both use libjpeg-turbo and libpng,
and give identical pixels on the book's CIFAR-10, CelebA and CUB JPEGs (compared file by file).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping, NamedTuple, Sequence

import torch

from nhtlib.config import stable_hash
from nhtlib.paths import atomic_torch_save, atomic_write_bytes, results_root

MEMO_VERSION = 1
RACY_NS = 2_000_000_000  # a file changed less than 2 s before hashing is not memoised (see the module docstring)
CHUNK_BYTES = 1 << 20
DECODE_VERSION = 3  # part of every decode-cache key; bump when a decoder's output changes (2: torchvision decoders;
# 3: numbered CIFAR class folders labelled by their number, so a CIFAR-100 tree c0..c99 is no longer shifted)
FINGERPRINT_HEX = 16


# ------------------------------------------------------------------------------------------------ fingerprints

class FileDigest(NamedTuple):
    size: int  # bytes
    sha256: str  # hex
    md5: str | None  # hex, or None when not asked for


def _memo_path(base: Path) -> Path:
    return results_root() / "data_cache" / "fingerprints" / f"{stable_hash(str(Path(base).resolve()))}.json"


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


_MEMOS: dict[str, tuple[list[int], dict]] = {}  # memo path -> (the memo file's stat signature, its entries)


def _load_memo(path: Path) -> dict[str, list]:
    """{relative path: [size, mtime_ns, ctime_ns, inode, sha256, md5 | None]}; {} when missing or corrupt. Parsed
    once per process while the memo file is unchanged (entries are checked against each file anyway)."""
    try:
        signature = _signature(os.stat(path))
    except OSError:
        return {}
    cached = _MEMOS.get(str(path))
    if cached is not None and cached[0] == signature:
        return cached[1]
    try:
        memo = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    files = memo.get("files") if isinstance(memo, dict) and memo.get("version") == MEMO_VERSION else None
    files = files if isinstance(files, dict) else {}
    _MEMOS[str(path)] = (signature, files)
    return files


def _memo_hit(entry, signature: list[int], md5: bool) -> bool:
    return (isinstance(entry, list) and len(entry) == 6 and entry[:4] == signature and isinstance(entry[4], str)
            and (not md5 or isinstance(entry[5], str)))


def _write_memo(path: Path, base: Path, files: dict[str, list]) -> None:
    blob = json.dumps({"version": MEMO_VERSION, "base": str(base), "files": files}, separators=(",", ":"))
    try:
        atomic_write_bytes(path, blob.encode())
        _MEMOS[str(path)] = (_signature(os.stat(path)), files)
    except OSError as err:  # a read-only results folder: the digests are still right, only the memo is lost
        warnings.warn(f"could not write the fingerprint memo {path} ({err}); the files will be hashed again")


def _hash_file(path: Path, md5: bool) -> tuple[str, str | None]:
    """(SHA-256 hex, MD5 hex or None) of the file's bytes, read once in 1 MiB chunks."""
    sha = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False) if md5 else None
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            sha.update(chunk)
            if m is not None:
                m.update(chunk)
    return sha.hexdigest(), (m.hexdigest() if m is not None else None)


def file_digests(base: Path, rel_paths: Sequence[str], md5: bool = False, *, what: str = "the data files",
                 hint: str = "") -> dict[str, FileDigest]:
    """{relative path: FileDigest} of the files base/rel (memoised by stat signature; see the module docstring).
    Missing files raise one FileNotFoundError naming how many of the expected ones are missing, the first few,
    and where (`what` names the set, `hint` says what to do)."""
    base = Path(base)
    prefix = f"{base}{os.sep}"
    memo_path = _memo_path(base)
    memo = _load_memo(memo_path)
    out: dict[str, FileDigest] = {}
    missing = []
    changed = False
    for rel in rel_paths:
        try:
            st = os.stat(prefix + rel)  # a string join: pathlib would cost more than the stat itself
        except FileNotFoundError:
            missing.append(rel)
            continue
        signature = _signature(st)
        entry = memo.get(rel)
        if _memo_hit(entry, signature, md5):
            out[rel] = FileDigest(st.st_size, entry[4], entry[5])
            continue
        started = time.time_ns()
        sha, m = _hash_file(base / rel, md5)
        out[rel] = FileDigest(st.st_size, sha, m)
        settled = max(st.st_mtime_ns, st.st_ctime_ns) < started - RACY_NS
        if settled and _signature(os.stat(prefix + rel)) == signature:
            memo[rel] = [*signature, sha, m]
            changed = True
        elif memo.pop(rel, None) is not None:
            changed = True
    if changed:
        _write_memo(memo_path, base, memo)
    if missing:
        raise _missing(base, missing, len(rel_paths), what, hint)
    return out


def fingerprint(digests: Mapping[str, FileDigest]) -> str:
    """FINGERPRINT_HEX hex digits of SHA-256 over the sorted "relative path, size, SHA-256" lines."""
    lines = "".join(f"{rel}\t{d.size}\t{d.sha256}\n" for rel, d in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:FINGERPRINT_HEX]


def fingerprint_files(base: Path, rel_paths: Sequence[str]) -> str:
    """The fingerprint of the files base/rel (see `file_digests` for the cost)."""
    return fingerprint(file_digests(base, rel_paths))


def matches_md5(digests: Mapping[str, FileDigest], reference: Mapping[str, str]) -> bool:
    """Whether every file of `reference` ({relative path: md5 hex}, e.g. a data set's official sums) is among the
    digests (computed with md5=True) with that MD5."""
    return all(name in digests and digests[name].md5 == md5 for name, md5 in reference.items())


def describe(base: Path, digests: Mapping[str, FileDigest], reference_md5: Mapping[str, str] | None = None) -> dict:
    """What a Dataset's meta["data"] records about the files it was built from: folder, file count, bytes,
    fingerprint and official_md5 (True / False against `reference_md5`, None when there is no reference)."""
    return {"folder": str(base), "files": len(digests), "bytes": sum(d.size for d in digests.values()),
            "fingerprint": fingerprint(digests),
            "official_md5": None if reference_md5 is None else matches_md5(digests, reference_md5)}


# ------------------------------------------------------------------------------------------------ decode cache

Arrays = dict[str, tuple[torch.Tensor, ...]]


class DecodeCacheWarning(UserWarning):
    """A decode-cache file could not be parsed: it was removed and the data are decoded again."""


def _is_arrays(obj) -> bool:
    return isinstance(obj, dict) and all(isinstance(k, str) and isinstance(v, (tuple, list))
                                         and all(isinstance(t, torch.Tensor) for t in v) for k, v in obj.items())


def _read_decode_cache(path: Path) -> Arrays | None:
    """The cached tensors, or None (a miss) when the file is absent or cannot be parsed; an unparsable file is
    removed, with a DecodeCacheWarning naming it (tensors only: weights_only=True never runs code)."""
    if not path.exists():
        return None
    try:
        arrays = torch.load(path, weights_only=True)
        if not _is_arrays(arrays):
            raise ValueError(f"holds a {type(arrays).__name__}, not {{split: tensors}}")
        return arrays
    except Exception as err:  # noqa: BLE001 - whatever the parse failure (zip, pickle, content), it is a miss
        warnings.warn(f"the decode cache {path} cannot be read ({type(err).__name__}: {_first_reason(err)}); it is "
                      "removed and the data are decoded again", DecodeCacheWarning, stacklevel=3)
        path.unlink(missing_ok=True)
        return None


def _first_reason(err: BaseException) -> str:
    """The line of an error message that says what was wrong (torch.load's weights-only refusal is a page of
    advice with the reason, "WeightsUnpickler error: ...", further down)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    named = [line for line in lines if line.startswith("WeightsUnpickler error:")]
    return (named or lines or [""])[0][:300]


def cached_decode(tag: str, fingerprint: str, decode: Callable[[], Arrays]) -> Arrays:
    """decode() once per (tag, fingerprint of the files it reads); later calls load the cached tensors from
    results_root()/data_cache/<tag>-<key>.pt (an unparsable cache file is a miss, see `_read_decode_cache`).
    tag: everything else the result depends on (data set, size, ...)."""
    key = stable_hash({"tag": tag, "data": fingerprint, "version": DECODE_VERSION})
    path = results_root() / "data_cache" / f"{tag}-{key}.pt"
    arrays = _read_decode_cache(path)
    if arrays is not None:
        return arrays
    arrays = decode()
    atomic_torch_save(arrays, path)
    return arrays


# ----------------------------------------------------------------------------------------- errors naming files

class DataFileError(ValueError):
    """A data file that exists but cannot be read or parsed (truncated, corrupt, wrong format). `path` names it."""

    def __init__(self, path: Path, what: str, cause: BaseException | str):
        self.path = Path(path)
        reason = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"cannot read {what} {path}: {reason}. The file is truncated or corrupt (or not a {what}): "
                         "replace it with a good copy of the data set.")


@contextmanager
def reading(path: Path, what: str = "data file") -> Iterator[None]:
    """Wrap the reading and parsing of one file: any error becomes a DataFileError naming `path` (chained).
    Missing files and permission errors pass unchanged (they already name the file and mean something else)."""
    try:
        yield
    except (DataFileError, FileNotFoundError, PermissionError):
        raise
    except Exception as err:
        raise DataFileError(path, what, err) from err


class DataSchemaError(DataFileError):
    """An input file (or folder) whose content does not follow its schema: an annotation header that is not the
    expected list, a label / split / attribute value outside its set, a class folder of another name. `path` names
    it, `line` the 1-based line (None for a whole file or folder). A ValueError (through DataFileError)."""

    def __init__(self, path: Path, line: int | None, expected: str, found: str, hint: str = ""):
        self.path, self.line = Path(path), line
        where = f"{path}" + (f", line {line}" if line is not None else "")
        ValueError.__init__(self, f"{where}: expected {expected}; found {found}. The file does not follow the data "
                                  "set's format and is refused rather than read with shifted labels or values. "
                                  f"{hint or 'Replace it with a genuine copy of the data set.'}")


def check_values(path: Path, values: Sequence, allowed: Sequence, what: str, first_line: int = 1) -> None:
    """DataSchemaError unless every entry of `values` (one per line, the first on line `first_line`) is one of
    `allowed` (compared by value and type family: 1.5 is not 1, "1" is not 1); the error names the first
    offending line and value, and how many there are."""
    allowed_set = set(allowed)
    bad = [i for i, v in enumerate(values) if not _admitted(v, allowed_set)]
    if bad:
        i = bad[0]
        raise DataSchemaError(path, first_line + i, f"{what} one of {', '.join(map(repr, allowed))}",
                              f"{values[i]!r} ({len(bad):,} line(s) with a value outside that set)")


def _admitted(value, allowed: set) -> bool:
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        return False  # True == 1 and 2.0 == 2 in Python: neither is a label value here
    try:
        return value in allowed
    except TypeError:  # unhashable
        return False


# ------------------------------------------------------------------------------------------------ pickles

# What a CIFAR python-version batch names: numpy's array reconstruction (numpy 1 writes numpy.core, numpy 2
# numpy._core; protocols <= 4 use _reconstruct, protocol 5 _frombuffer), ndarray and dtype. Dicts, lists, str,
# bytes and numbers need no global. Everything else is refused.
PICKLE_GLOBALS = frozenset({
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
})


def _latin1_bytes(text, encoding="latin1"):
    """What protocol 2 writes for bytes from Python 3: _codecs.encode(str, "latin1"); any other use is refused."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r}): only the "
                                     "latin1 encoding of a str (how protocol 2 writes bytes) is admitted")
    return text.encode("latin1")


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler whose find_class admits only `PICKLE_GLOBALS` (and protocol 2's bytes): a planted global
    (os.system, builtins.exec, any class) raises UnpicklingError naming it and `path` before anything runs.
    encoding="latin1": Python 2 str become str, and numpy's Python 2 array payloads decode as numpy expects."""

    def __init__(self, file, path: Path):
        super().__init__(file, encoding="latin1")
        self.path = Path(path)

    def find_class(self, module: str, name: str):
        if (module, name) == ("_codecs", "encode"):
            return _latin1_bytes
        if (module, name) in PICKLE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing {module}.{name} in {self.path}: a data pickle may hold only dicts, lists, str, bytes, numbers "
            "and numpy arrays, and this one names other code, which was not run")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError(f"refusing a persistent id in {self.path}: data pickles have none")


def load_pickle(path: Path):
    """The object in pickle file `path`, read by `RestrictedUnpickler` (no code runs). Errors propagate: wrap the
    call in `reading` to have them name the file."""
    with open(path, "rb") as fh:
        return RestrictedUnpickler(fh, path).load()


# ------------------------------------------------------------------------------------------------ images

_SIXTEEN_BIT_GREY = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def read_image(path: Path) -> torch.Tensor:
    """A JPEG / PNG file as uint8 RGB (3, H, W), decoded by Pillow: grey and palette images are expanded to RGB,
    alpha is dropped, EXIF orientation is ignored (Image.open(...).convert("RGB")); 16-bit grey PNGs are scaled to
    8 bits by rounding v * 255 / 65535 (as torchvision's decoder, used before, did)."""
    import io

    import numpy as np
    from PIL import Image

    with reading(path, "image"):
        with Image.open(io.BytesIO(Path(path).read_bytes())) as im:
            if im.mode in _SIXTEEN_BIT_GREY:
                grey = np.asarray(im, dtype=np.int64)
                rgb = np.repeat(((grey * 255 + 32767) // 65535).astype(np.uint8)[..., None], 3, axis=2)
            else:
                rgb = np.array(im.convert("RGB"), dtype=np.uint8)  # a writable copy: torch warns on read-only arrays
        image = torch.from_numpy(rgb).permute(2, 0, 1).contiguous()
    return image


def require_files(folder: Path, rel_paths: Sequence[str], what: str, hint: str = "") -> None:
    """FileNotFoundError unless every folder/rel is a file, naming how many are missing, the first few, and where."""
    missing = [rel for rel in rel_paths if not (Path(folder) / rel).is_file()]
    if missing:
        raise _missing(Path(folder), missing, len(rel_paths), what, hint)


def _missing(folder: Path, missing: list[str], expected: int, what: str, hint: str, show: int = 8) -> FileNotFoundError:
    listed = ", ".join(missing[:show]) + (f" and {len(missing) - show} more" if len(missing) > show else "")
    return FileNotFoundError(f"{what}: {len(missing)} of the {expected} expected files are missing from {folder}: "
                             f"{listed}. {hint or 'Put the complete data set there.'}")


# ------------------------------------------------------------------------------------------------ resampling

PIL_FILTERS = {"box": "BOX", "bilinear": "BILINEAR", "bicubic": "BICUBIC"}


def resample(image: torch.Tensor, size: tuple[int, int], kind: str = "bilinear",
             box: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """uint8 (C, H, W) -> uint8 (C, size[0], size[1]) by Pillow's Image.resize((size[1], size[0]), kind, box=box):
    the loaders' resizes stay Pillow's own (anti-aliased "box" area averaging, "bilinear", "bicubic"), pixel for
    pixel, whichever decoder produced the image. box: (left, top, right, bottom) source region in pixels."""
    import numpy as np
    from PIL import Image

    pil = Image.fromarray(np.ascontiguousarray(image.permute(1, 2, 0).numpy()))
    out = pil.resize((size[1], size[0]), getattr(Image.Resampling, PIL_FILTERS[kind]), box=box)
    return torch.from_numpy(np.asarray(out, dtype=np.uint8).copy()).permute(2, 0, 1)
