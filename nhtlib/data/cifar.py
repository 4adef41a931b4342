"""CIFAR-10 and CIFAR-100 from local files (never downloaded), decoded once and cached as uint8 tensors.

`load_cifar(name, data_root)` looks under the data root (see `nht.paths.data_root`) for, in this order:

* the standard python pickles: ``<root>/<name>/cifar-10-batches-py/`` (or ``<root>/cifar-10-batches-py/``) with
  ``data_batch_1..5`` and ``test_batch``; ``<root>/<name>/cifar-100-python/`` (or ``<root>/cifar-100-python/``)
  with ``train`` and ``test`` (fine labels);
* an ImageFolder tree of the same data: ``<root>/<name>/{train,test}/<class>/*.{png,jpg,jpeg}`` with classes in
  alphabetical order = label indices (the book's offline ``cifar10/`` is this: JPEG, 3,000 train images per class).

It returns {"train": (x, y), "test": (x, y)} with x uint8 (N, 3, 32, 32) and y int64 (N,). The decoded tensors
are cached under results_root()/data_cache/, keyed by the source path and its modification time.
`CIFARTask` turns them into a Dataset: a class-balanced subset, optional down-sampling (e.g. 16 x 16 for CPU
runs), per-channel standardisation, optional label shuffling. No augmentation.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..config import check_choice, check_range, not_identity, stable_hash
from ..paths import data_root as resolve_data_root
from ..paths import results_root
from . import Dataset, Split, TaskConfig

N_CLASSES = {"cifar10": 10, "cifar100": 100}
PICKLE_DIRS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
MEAN = {"cifar10": (0.4914, 0.4822, 0.4465), "cifar100": (0.5071, 0.4865, 0.4409)}
STD = {"cifar10": (0.2470, 0.2435, 0.2616), "cifar100": (0.2673, 0.2564, 0.2762)}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")

Arrays = dict[str, tuple[torch.Tensor, torch.Tensor]]


def cached_decode(source: Path, tag: str, decode: Callable[[], Arrays]) -> Arrays:
    """decode() once per (source path, mtime); later calls read the cached .pt from results_root()/data_cache."""
    key = stable_hash({"path": str(source.resolve()), "mtime": source.stat().st_mtime_ns, "tag": tag})
    path = results_root() / "data_cache" / f"{tag}-{key}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    arrays = decode()
    from ..paths import atomic_torch_save

    atomic_torch_save(arrays, path)
    return arrays


def _read_pickle(path: Path) -> dict:
    with open(path, "rb") as fh:
        return pickle.load(fh, encoding="bytes")


def _decode_pickles(folder: Path, name: str) -> Arrays:
    files = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
    if name == "cifar100":
        files = {"train": ["train"], "test": ["test"]}
    label_key = b"fine_labels" if name == "cifar100" else b"labels"
    out: Arrays = {}
    for split, names in files.items():
        batches = [_read_pickle(folder / f) for f in names if (folder / f).exists()]
        if not batches:
            raise FileNotFoundError(f"{folder} has none of {names}")
        x = torch.cat([torch.as_tensor(b[b"data"]).reshape(-1, 3, 32, 32) for b in batches]).to(torch.uint8)
        y = torch.cat([torch.as_tensor(b[label_key]) for b in batches]).long()
        out[split] = (x, y)
    return out


def _decode_image_folder(root: Path, max_per_class: int | None = None) -> Arrays:
    import numpy as np
    from PIL import Image

    out: Arrays = {}
    for split in ("train", "test"):
        classes = sorted(d.name for d in (root / split).iterdir() if d.is_dir())
        xs, ys = [], []
        for label, cls in enumerate(classes):
            files = [f for f in sorted((root / split / cls).iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES]
            for f in files[:max_per_class]:
                with Image.open(f) as im:
                    xs.append(np.asarray(im.convert("RGB").resize((32, 32)), dtype=np.uint8))
                ys.append(label)
        out[split] = (torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).contiguous(), torch.tensor(ys))
    return out


def find_cifar(name: str, data_root: str | None = None) -> tuple[str, Path]:
    """('pickle' | 'folder', path) of the first layout found; FileNotFoundError naming the expected layouts."""
    check_choice("dataset", name, tuple(N_CLASSES))
    root = resolve_data_root(data_root)
    pickle_dir = PICKLE_DIRS[name]
    for candidate in (root / name / pickle_dir, root / pickle_dir):
        if candidate.is_dir():
            return "pickle", candidate
    folder = root / name
    if (folder / "train").is_dir() and (folder / "test").is_dir():
        return "folder", folder
    raise FileNotFoundError(
        f"no {name} data under data_root={str(root)!r}. Expected one of: {root / name / pickle_dir}/ or "
        f"{root / pickle_dir}/ (the standard python pickles), or {folder}/{{train,test}}/<class>/*.png|jpg "
        "(ImageFolder). Nothing is downloaded: put the data there or pass data_root.")


def load_cifar(name: str = "cifar10", data_root: str | None = None, max_per_class: int | None = None) -> Arrays:
    """{"train": (x uint8 (N, 3, 32, 32), y int64), "test": ...} for 'cifar10' or 'cifar100' (cached).
    max_per_class: decode only the first files of every class of an ImageFolder tree (pickles are read whole)."""
    kind, path = find_cifar(name, data_root)
    if kind == "pickle":
        return cached_decode(path, f"{name}-pickle", lambda: _decode_pickles(path, name))
    return cached_decode(path, f"{name}-folder-{max_per_class or 'all'}",
                         lambda: _decode_image_folder(path, max_per_class))


def balanced_subset(y: torch.Tensor, n: int, n_classes: int) -> torch.Tensor:
    """Indices of the first ceil(n / C) examples of every class, interleaved by class and cut to n (sorted)."""
    per_class = -(-n // n_classes)
    idx = [torch.nonzero(y == c).flatten()[:per_class] for c in range(n_classes)]
    rows = torch.stack([torch.nn.functional.pad(i, (0, per_class - len(i)), value=-1) for i in idx], 1).flatten()
    rows = rows[rows >= 0][:n]
    return rows.sort().values


def to_float(x: torch.Tensor, image_size: int, mean, std) -> torch.Tensor:
    """uint8 (N, C, H, W) -> standardised float32, area-downsampled to image_size."""
    out = x.float() / 255.0
    if image_size != out.shape[-1]:
        out = torch.nn.functional.interpolate(out, size=(image_size, image_size), mode="area")
    m = torch.tensor(mean).view(1, -1, 1, 1)
    s = torch.tensor(std).view(1, -1, 1, 1)
    return (out - m) / s


@dataclass(frozen=True)
class CIFARTask(TaskConfig):
    """A class-balanced CIFAR subset. n_train / n_test: examples (None = all). image_size: side after area
    down-sampling (32 = original). shuffle_labels: replace every training label by a fixed random one (drawn with
    `shuffle_seed`, shared by all members). data_root does not enter the run's identity."""

    dataset: str = "cifar10"
    n_train: int | None = 5000
    n_test: int | None = 2000
    image_size: int = 32
    shuffle_labels: bool = False
    shuffle_seed: int = 0
    data_root: str | None = not_identity(default=None)

    def validate(self) -> None:
        check_choice("dataset", self.dataset, tuple(N_CLASSES))
        for name in ("n_train", "n_test"):
            if getattr(self, name) is not None:
                check_range(name, getattr(self, name), 1, None, integer=True)
        check_range("image_size", self.image_size, 1, 32, integer=True)

    def build(self, seed: int) -> Dataset:
        c = N_CLASSES[self.dataset]
        counts = [self.n_train, self.n_test]
        per_class = None if None in counts else -(-max(counts) // c)
        arrays = load_cifar(self.dataset, self.data_root, per_class)
        splits = {}
        for split, n in (("train", self.n_train), ("test", self.n_test)):
            x, y = arrays[split]
            idx = balanced_subset(y, n if n is not None else len(y), int(y.max()) + 1)
            x, y = to_float(x[idx], self.image_size, MEAN[self.dataset], STD[self.dataset]), y[idx]
            if split == "train" and self.shuffle_labels:
                y = torch.randint(0, c, y.shape, generator=torch.Generator().manual_seed(self.shuffle_seed))
            splits[split] = Split(x, y)
        return Dataset(splits, n_classes=c, meta={"chance": 1.0 / c, "dataset": self.dataset})
