"""MNIST from the four original gzipped IDX files (never downloaded), and "Shortcut MNIST".

`load_mnist(data_root)` reads ``<root>/mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` (also
``<root>/mnist/raw/`` or ``<root>/MNIST/raw/``, torchvision's layout; uncompressed files work too) and caches the
uint8 tensors under results_root()/data_cache/.

`MNISTTask` builds a Dataset from the first n_train / n_test images, standardised. With ``shortcut="patch"`` it is
the book's **Shortcut MNIST** (ours; the D_LR paper's Fig. 1 construction is unknown, shared/papers/dlr.md §4.1):
every training image carries a ``patch_size`` square of intensity ``patch_value`` (pixel scale [0, 1]) at one of 10 fixed positions along the image border,
one position per class, so the patch encodes the label perfectly. The split "test" carries the patch at the position
of a *random* class (drawn independently of the digit): a model that reads only the patch scores chance (10 %) on it,
a model that reads the digit is unaffected. The split "test_clean" has no patch.
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import check_choice, check_range, not_identity
from ..paths import data_root as resolve_data_root
from . import Dataset, Split, TaskConfig
from .cifar import cached_decode

FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
MEAN, STD = 0.1307, 0.3081
SHORTCUTS = ("none", "patch")


def _read_idx(path: Path) -> torch.Tensor:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def find_mnist(data_root: str | None = None) -> Path:
    root = resolve_data_root(data_root)
    for folder in (root / "mnist", root / "mnist" / "raw", root / "MNIST" / "raw", root):
        name = FILES["train"][0]
        if (folder / f"{name}.gz").exists() or (folder / name).exists():
            return folder
    raise FileNotFoundError(f"no MNIST under data_root={str(root)!r}: expected {root / 'mnist'}/"
                            "train-images-idx3-ubyte.gz (and the other three IDX files; or torchvision's "
                            "MNIST/raw/). Nothing is downloaded.")


def load_mnist(data_root: str | None = None) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{"train": (x uint8 (60000, 28, 28), y int64), "test": (x (10000, 28, 28), y)} (cached)."""
    folder = find_mnist(data_root)

    def path(name: str) -> Path:
        return folder / f"{name}.gz" if (folder / f"{name}.gz").exists() else folder / name

    def decode():
        return {split: (_read_idx(path(img)), _read_idx(path(lab)).long()) for split, (img, lab) in FILES.items()}

    return cached_decode(path(FILES["train"][0]), "mnist", decode)


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

    def build(self, seed: int) -> Dataset:
        arrays = load_mnist(self.data_root)
        splits = {}
        bright = (self.patch_value - MEAN) / STD
        for split, n in (("train", self.n_train), ("test", self.n_test)):
            x, y = arrays[split]
            x = (x[:n].float().unsqueeze(1) / 255.0 - MEAN) / STD
            y = y[:n]
            if self.shortcut == "patch" and split == "train":
                x = add_patch(x, y, self.patch_size, bright)
            if self.shortcut == "patch" and split == "test":
                splits["test_clean"] = Split(x, y)
                wrong = torch.randint(0, 10, y.shape, generator=torch.Generator().manual_seed(12345))
                x = add_patch(x, wrong, self.patch_size, bright)
            splits[split] = Split(x, y)
        return Dataset(splits, n_classes=10, meta={"chance": 0.1})
