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
files it reads) and keeps the tensors in ``results_root()/data_cache/<tag>-<key>.pt`` (a corrupt file is decoded
again). The tag carries everything else the decode depends on (data set, image size, ...).

**Errors that name the file.** `reading(path, what)` wraps the reading / parsing of one file: any failure other
than "missing" or "no permission" becomes a `DataFileError` whose message holds the path (the original exception is
chained). `read_image(path)` decodes a JPEG / PNG with ``torchvision.io.decode_image`` (bytes read here so the error
can name the file) to uint8 RGB (3, H, W). A set of files with some missing is refused by `file_digests` (and
`require_files`) with one error naming how many are missing, the first few, and where.

**Resampling.** `resample(image, size, kind, box)` resizes a decoded uint8 (C, H, W) image with Pillow's own
``Image.resize`` ("box", "bilinear", "bicubic"). The loaders decode with torchvision and resize with Pillow, so their
pixels are those of the former all-PIL path (both decoders use libjpeg-turbo: identical pixels on the book's
CIFAR-10, CelebA and CUB JPEGs that were compared).
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
DECODE_VERSION = 2  # part of every decode-cache key; bump when a decoder's output changes (2: torchvision decoders)
FINGERPRINT_HEX = 16
TORCHVISION_DEPRECATION = "The image decoding and encoding capabilities of TorchVision are deprecated"


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


def cached_decode(tag: str, fingerprint: str, decode: Callable[[], Arrays]) -> Arrays:
    """decode() once per (tag, fingerprint of the files it reads); later calls load the cached tensors from
    results_root()/data_cache/<tag>-<key>.pt. tag: everything else the result depends on (data set, size, ...)."""
    key = stable_hash({"tag": tag, "data": fingerprint, "version": DECODE_VERSION})
    path = results_root() / "data_cache" / f"{tag}-{key}.pt"
    if path.exists():
        try:
            return torch.load(path, weights_only=True)
        except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError):
            pass  # a truncated or corrupt cache file: decode again and replace it
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


def read_image(path: Path) -> torch.Tensor:
    """A JPEG / PNG file as uint8 RGB (3, H, W), decoded by torchvision.io.decode_image (grey and palette images
    are expanded to RGB, alpha is dropped, EXIF orientation is ignored: as PIL's Image.open(...).convert("RGB"))."""
    from torchvision.io import ImageReadMode, decode_image

    with reading(path, "image"):
        data = torch.frombuffer(bytearray(Path(path).read_bytes()), dtype=torch.uint8)
        with warnings.catch_warnings():  # torchvision 0.29 announces its decoders' move to TorchCodec on every call
            warnings.filterwarnings("ignore", TORCHVISION_DEPRECATION, DeprecationWarning)
            image = decode_image(data, mode=ImageReadMode.RGB)
        if image.dtype != torch.uint8:  # 16-bit PNG: scale to 8 bits
            image = ((image.to(torch.int64) * 255 + 32767) // 65535).to(torch.uint8)
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
