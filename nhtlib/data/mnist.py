"""MNIST from the four original IDX files (never downloaded), and "Shortcut MNIST".

`load_mnist(data_root)` reads ``<root>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` (also
``<root>/mnist/raw/`` or ``<root>/MNIST/raw/``, torchvision's layout) and caches the uint8 tensors under
results_root()/data_cache/, keyed by the content fingerprint of the four files (`files.cached_decode`).
Both the gzipped files (the book's ``mnist/`` layout) and uncompressed ones (torchvision's ``MNIST/raw/`` layout)
are parsed here (the same tensors torchvision's ``read_image_file`` / ``read_label_file`` give; its ``MNIST`` class
extracts .gz files only as part of ``download=True``, into the data folder, which may be read-only). All four files
must be there; each is checked against the IDX schema: magic number 00000803 for images and 00000801 for labels
(a swapped or foreign file is refused), the payload length against the product of the header's dimensions (a
truncated file), 28 x 28 images, as many labels as images, labels 0..9. A mismatch raises an error naming the
file. Dataset.meta["data"]["official_md5"] records whether the .gz files are the official ones (torchvision's
``MNIST.resources``; None for uncompressed files).

`MNISTTask` builds a Dataset from the first n_train / n_test images, standardised. With ``shortcut="patch"`` it is
the book's **Shortcut MNIST** (ours; the D_LR paper's Fig. 1 construction is unknown, shared/papers/dlr.md §4.1):
every training image carries a ``patch_size`` square of intensity ``patch_value`` (pixel scale [0, 1]) at one of 10 fixed positions along the image border,
one position per class, so the patch encodes the label perfectly. The split "test" carries the patch at the position
of a *random* class (drawn independently of the digit): a model that reads only the patch scores chance (10 %) on it,
a model that reads the digit is unaffected. The split "test_clean" has no patch.
"""
from __future__ import annotations

import gzip
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from nhtlib.config import check_choice, check_range, not_identity
from nhtlib.paths import data_root as resolve_data_root
from nhtlib.data import Dataset, Split, TaskConfig
from nhtlib.data.files import DataSchemaError, cached_decode, describe, file_digests, fingerprint, reading

FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
MEAN, STD = 0.1307, 0.3081
SHORTCUTS = ("none", "patch")
IMAGE_SHAPE = (28, 28)


MAGIC = {3: "00000803", 1: "00000801"}  # IDX of unsigned bytes with 3 (images) / 1 (labels) dimensions


def _idx_header(data: bytes) -> tuple[tuple[int, ...], int]:
    """(dims, header length in bytes) of an IDX file of unsigned bytes (magic 0x0000 08 <ndim>, big-endian dims)."""
    if len(data) < 4 or data[0] or data[1] or data[2] != 0x08:
        raise ValueError(f"not an IDX file of unsigned bytes (magic {data[:4].hex() or 'missing'}, expected 000008nn)")
    header = 4 + 4 * data[3]
    if len(data) < header:
        raise ValueError(f"the header is cut short ({len(data)} of {header} bytes)")
    return tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(data[3])), header


def _check_payload(dims: tuple[int, ...], payload: int) -> None:
    if payload != math.prod(dims):
        raise ValueError(f"the header announces {dims} = {math.prod(dims):,} bytes of data but {payload:,} follow it: "
                         "the file is truncated (or has trailing bytes)")


def _read_idx(path: Path, ndim: int) -> torch.Tensor:
    """uint8 tensor of an IDX file with `ndim` dimensions (3: images, 1: labels), .gz or uncompressed, parsed here
    (the header's magic number and dimensions against the payload); errors name the file (a magic number for
    another kind of file is a DataSchemaError)."""
    with reading(path, "MNIST IDX file"):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        if data[:4].hex() != MAGIC[ndim] and len(data) >= 4 and data[:3] == b"\0\0\x08":
            kind = "images" if ndim == 3 else "labels"
            raise DataSchemaError(path, None, f"the magic number {MAGIC[ndim]} of an IDX file of {kind} "
                                  f"({ndim} dimension{'s' if ndim > 1 else ''})", data[:4].hex(),
                                  "Check that the images and labels files are not swapped or replaced.")
        dims, header = _idx_header(data)
        _check_payload(dims, len(data) - header)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=header).reshape(dims)


def find_mnist(data_root: str | None = None) -> Path:
    """The folder holding the MNIST IDX files (the first of <root>/mnist, <root>/mnist/raw, <root>/MNIST/raw,
    <root> that has the training images)."""
    root = resolve_data_root(data_root)
    for folder in (root / "mnist", root / "mnist" / "raw", root / "MNIST" / "raw", root):
        name = FILES["train"][0]
        if (folder / f"{name}.gz").exists() or (folder / name).exists():
            return folder
    raise FileNotFoundError(f"no MNIST under data_root={str(root)!r}: expected {root / 'mnist'}/"
                            "train-images-idx3-ubyte.gz (and the other three IDX files; or torchvision's "
                            "MNIST/raw/). Nothing is downloaded.")


def mnist_files(data_root: str | None = None) -> tuple[Path, list[str]]:
    """(folder, the four file names read: images and labels of train and test, each uncompressed if present, else
    .gz). Their presence is checked when they are fingerprinted (`_digests`)."""
    folder = find_mnist(data_root)
    names = [name if (folder / name).is_file() else f"{name}.gz" for pair in FILES.values() for name in pair]
    return folder, names


def _digests(data_root: str | None) -> tuple[Path, list[str], dict]:
    folder, names = mnist_files(data_root)
    hint = ("Put all four IDX files there (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
            "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz; or uncompressed).")
    return folder, names, file_digests(folder, names, md5=True, what="MNIST", hint=hint)


def mnist_fingerprint(data_root: str | None = None) -> str:
    """Content fingerprint of the four files load_mnist reads (see nhtlib.data.files)."""
    return fingerprint(_digests(data_root)[2])


def _decode(folder: Path, names: list[str]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    out = {}
    for split, (images, labels) in zip(FILES, (names[:2], names[2:])):
        x, y = _read_idx(folder / images, 3), _read_idx(folder / labels, 1).long()
        if tuple(x.shape[1:]) != IMAGE_SHAPE:
            raise DataSchemaError(folder / images, None, f"images of {IMAGE_SHAPE} pixels", f"{tuple(x.shape[1:])}")
        if len(x) != len(y):
            raise DataSchemaError(folder / labels, None, f"one label per image of {images} ({len(x):,})",
                                  f"{len(y):,} labels")
        if len(y) and not (0 <= int(y.min()) and int(y.max()) <= 9):
            first = int(torch.nonzero(y > 9)[0])
            raise DataSchemaError(folder / labels, None, "labels 0..9",
                                  f"label {int(y[first])} at example {first} ({int((y > 9).sum())} outside 0..9)")
        out[split] = (x, y)
    return out


def load_mnist_checked(data_root: str | None = None) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], dict]:
    """(load_mnist's arrays, what meta["data"] records: folder, files, bytes, fingerprint, official_md5)."""
    from torchvision.datasets import MNIST

    folder, names, digests = _digests(data_root)
    official = dict(MNIST.resources) if all(n.endswith(".gz") for n in names) else None
    info = describe(folder, digests, official)
    return cached_decode("mnist", info["fingerprint"], lambda: _decode(folder, names)), info


def load_mnist(data_root: str | None = None) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{"train": (x uint8 (60000, 28, 28), y int64), "test": (x (10000, 28, 28), y)} (cached)."""
    return load_mnist_checked(data_root)[0]


def patch_positions(image_size: int = 28, patch_size: int = 4) -> list[tuple[int, int]]:
    """Top-left corners of the 10 class patches: 5 along the top border, 5 along the bottom border."""
    cols = torch.linspace(1, image_size - patch_size - 1, 5).round().long().tolist()
    return [(1, c) for c in cols] + [(image_size - patch_size - 1, c) for c in cols]


def add_patch(x: torch.Tensor, classes: torch.Tensor, patch_size: int, value: float) -> torch.Tensor:
    """Copy of images x (N, 1, H, W) with a value-filled square at the position of `classes` (N,)."""
    out = x.clone()
    for cls, (r, c) in enumerate(patch_positions(x.shape[-1], patch_size)):
        rows = classes == cls
        out[rows, :, r:r + patch_size, c:c + patch_size] = value
    return out


@dataclass(frozen=True)
class MNISTTask(TaskConfig):
    """The first n_train training / n_test test images, standardised, shape (N, 1, 28, 28).
    shortcut: "none" or "patch" (Shortcut MNIST, see the module docstring); patch_size (pixels) and patch_value
    (intensity on the [0, 1] pixel scale) set how strong the spurious code is."""

    n_train: int = 5000
    n_test: int = 2000
    shortcut: str = "none"
    patch_size: int = 4
    patch_value: float = 1.0
    data_root: str | None = not_identity(default=None)

    def validate(self) -> None:
        check_range("n_train", self.n_train, 1, 60000, integer=True)
        check_range("n_test", self.n_test, 1, 10000, integer=True)
        check_choice("shortcut", self.shortcut, SHORTCUTS)
        check_range("patch_size", self.patch_size, 1, 8, integer=True)
        check_range("patch_value", self.patch_value, 0.0, 1.0)

    def data_fingerprint(self) -> str:
        return mnist_fingerprint(self.data_root)

    def build(self, seed: int) -> Dataset:
        arrays, info = load_mnist_checked(self.data_root)
        splits = {}
        bright = (self.patch_value - MEAN) / STD
        for split, n in (("train", self.n_train), ("test", self.n_test)):
            x, y = arrays[split]
            if n > len(y):
                raise ValueError(f"n_{split}={n} but the MNIST {split} file in {info['folder']} holds only {len(y)} "
                                 "images; use a smaller value or put the complete files there")
            x = (x[:n].float().unsqueeze(1) / 255.0 - MEAN) / STD
            y = y[:n]
            if self.shortcut == "patch" and split == "train":
                x = add_patch(x, y, self.patch_size, bright)
            if self.shortcut == "patch" and split == "test":
                splits["test_clean"] = Split(x, y)
                wrong = torch.randint(0, 10, y.shape, generator=torch.Generator().manual_seed(12345))
                x = add_patch(x, wrong, self.patch_size, bright)
            splits[split] = Split(x, y)
        return Dataset(splits, n_classes=10, meta={"chance": 0.1, "data": info})
