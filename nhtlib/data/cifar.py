"""CIFAR-10 and CIFAR-100 from local files (never downloaded), checked complete, decoded once and cached.

`load_cifar(name, data_root)` looks under the data root (see `nht.paths.data_root`) for, in this order:

* the standard python pickles: ``<root>/<name>/cifar-10-batches-py/`` (or ``<root>/cifar-10-batches-py/``) with
  all of ``data_batch_1..5`` and ``test_batch``; ``<root>/<name>/cifar-100-python/`` (or
  ``<root>/cifar-100-python/``) with ``train`` and ``test`` (fine labels). They are read here, one by one, with the
  package's restricted unpickler (`files.load_pickle`: numpy arrays, dicts, lists, str, bytes only; a planted
  global such as ``os.system`` is refused by name and never runs), not by torchvision's ``CIFAR10`` reader, which
  unpickles without restriction. Each batch is checked ("data" uint8 (n, 3072), n integer labels in 0..C-1) and a
  bad one is named; the arrays are those torchvision's reader gives, bit for bit. Batches with bytes keys (b"data",
  as Python 3 writes them) are read too. Copies that are not byte-identical to the official ones (re-pickled,
  fixtures) load; Dataset.meta["data"]["official_md5"] records whether they are the official files (the sums of
  torchvision's public ``CIFAR10.train_list`` / ``test_list``; the MD5 comes with the content fingerprint, in the
  same read). The optional ``batches.meta`` / ``meta`` file (class names) is not read.
* an ImageFolder tree of the same data: ``<root>/<name>/{train,test}/<class>/*.{png,jpg,jpeg}`` (the book's offline
  ``cifar10/`` is this: JPEG, 3,000 train images per class). The class folders must be named either exactly the C
  class names of the data set (`CLASS_NAMES`; label = the official index, which is their alphabetical order) or
  ``<prefix><k>`` for k = 0 .. C-1 with one common prefix ("3", "c3", "class3"; label = k): any other name, a
  missing or doubled number, is refused (`DataSchemaError`) rather than given a shifted label. Images are decoded
  by Pillow (`files.read_image`, which names a corrupt file); images that are not 32 x 32 are resized like PIL's
  default ``resize((32, 32))`` (bicubic, `files.resample`). The tree is listed here rather than by torchvision's
  ``ImageFolder`` because a task reads only the first files of every class and the same listing feeds the
  fingerprint.

It returns {"train": (x, y), "test": (x, y)} with x uint8 (N, 3, 32, 32) and y int64 (N,). Nothing is silently
dropped: missing pickles, a missing or empty class folder and labels missing a class are refused, naming what was
found, what was expected and where. The decoded tensors are cached under results_root()/data_cache/, keyed by the
content fingerprint of the files read (`files.cached_decode`), so an overwritten file is decoded again.

`CIFARTask` turns them into a Dataset: a class-balanced subset whose every prefix is class-balanced too
(`balanced_subset`), optional down-sampling (e.g. 16 x 16 for CPU runs), per-channel standardisation, optional label
shuffling. No augmentation. The images stay uint8 (N, 3, 32, 32) in the Dataset; down-sampling and standardisation
are done batch by batch on the device (`CIFARTask.codec`). Asking for more images per class than the data hold is an error, not a smaller set.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from nhtlib.config import check_choice, check_range, not_identity
from nhtlib.paths import data_root as resolve_data_root
from nhtlib.data import Dataset, ImageCodec, Split, TaskConfig
from nhtlib.data.files import cached_decode  # noqa: F401  (its home was this module; kept importable from here)
from nhtlib.data.files import Arrays, DataSchemaError, describe, file_digests, fingerprint, load_pickle, read_image, reading, resample

N_CLASSES = {"cifar10": 10, "cifar100": 100}
PICKLE_DIRS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
PICKLE_FILES = {"cifar10": {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]},
                "cifar100": {"train": ["train"], "test": ["test"]}}  # = torchvision's train_list / test_list names
MEAN = {"cifar10": (0.4914, 0.4822, 0.4465), "cifar100": (0.5071, 0.4865, 0.4409)}
STD = {"cifar10": (0.2470, 0.2435, 0.2616), "cifar100": (0.2673, 0.2564, 0.2762)}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
SPLITS = ("train", "test")
# class names in label order (= alphabetical order): batches.meta's label_names and meta's fine_label_names
CLASS_NAMES = {
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
    "cifar100": (
        "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl", "boy",
        "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock",
        "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish",
        "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
        "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom", "oak_tree", "orange",
        "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree", "plain", "plate", "poppy", "porcupine",
        "possum", "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk",
        "skyscraper", "snail", "snake", "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table",
        "tank", "telephone", "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe",
        "whale", "willow_tree", "wolf", "woman", "worm"),
}
NUMBERED_FOLDER = re.compile(r"(\D*)(\d+)")  # "<prefix><k>": "3", "c3", "class3"
SUBSET_SEED = 0  # shuffles the class order within each round of `class_interleaved_order` (fixed: not the run seed)
PICKLE_HINT = ("Put the complete python-version data set there (the folder torchvision's CIFAR10 / CIFAR100 "
               "download creates), or pass data_root.")


# ------------------------------------------------------------------------------------------- where the files are

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


@dataclass(frozen=True)
class Source:
    """The files load_cifar reads: layout ('pickle' | 'folder'), the folder, and per split the (relative path,
    label) pairs (label -1 for pickles, whose labels are inside)."""

    layout: str
    folder: Path
    listing: dict[str, list[tuple[str, int]]]

    @property
    def rel_paths(self) -> list[str]:
        return [rel for items in self.listing.values() for rel, _ in items]


def _list_class_folder(folder: Path) -> list[str]:
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries if e.name.lower().endswith(IMAGE_SUFFIXES) and e.is_file())


def class_labels(split_dir: Path, name: str) -> dict[str, int]:
    """{class folder name: label} of one split of an ImageFolder tree. The folders must be exactly the data set's
    C class names (label = official index) or "<prefix><k>" for k = 0 .. C-1 with one prefix (label = k).
    FileNotFoundError when classes are missing (fewer folders, all of a valid naming); DataSchemaError naming the
    folder, what was expected and the unexpected names otherwise (never a label shifted by a stray folder)."""
    found = sorted(d.name for d in split_dir.iterdir() if d.is_dir())
    expected = N_CLASSES[name]
    official = CLASS_NAMES[name]
    if set(found) <= set(official):
        labels = {cls: official.index(cls) for cls in found}
    else:
        labels = _numbered_labels(split_dir, found, name)
    if len(labels) < expected:
        missing = (sorted(set(official) - set(found)) if set(found) <= set(official)
                   else sorted(set(range(expected)) - set(labels.values())))
        raise FileNotFoundError(
            f"{split_dir} holds {len(found)} class folders, {name} has {expected}: found {_few(found)}; missing "
            f"{_few(missing)}. Put all {expected} class folders <class>/*.png|jpg there.")
    return labels


def _numbered_labels(split_dir: Path, found: list[str], name: str) -> dict[str, int]:
    """{folder: k} for folders "<prefix><k>" (one prefix, k = 0 .. C-1 each at most once); DataSchemaError else."""
    expected = N_CLASSES[name]
    matches = {cls: NUMBERED_FOLDER.fullmatch(cls) for cls in found}
    prefixes = {m.group(1) for m in matches.values() if m}
    numbers = [int(m.group(2)) for m in matches.values() if m]
    odd = [cls for cls, m in matches.items() if not m or int(m.group(2)) >= expected]
    odd += sorted(cls for cls, m in matches.items() if m and numbers.count(int(m.group(2))) > 1)
    if odd or len(prefixes) > 1:
        raise DataSchemaError(
            split_dir, None, f"class folders named exactly the {expected} {name} classes ({_few(CLASS_NAMES[name], 4)}"
            f") or numbered <prefix>0 .. <prefix>{expected - 1} with one prefix",
            f"{_few(odd) if odd else 'several prefixes: ' + _few(sorted(prefixes))} among {len(found)} folders",
            "Rename or remove the folders that are not classes of the data set.")
    return {cls: int(matches[cls].group(2)) for cls in found}


def _list_image_folder(root: Path, name: str, max_per_class: int | None) -> dict[str, list[tuple[str, int]]]:
    """{split: [(split/class/file, label)]}: the first max_per_class image files (sorted names) of every class, in
    label order. Both splits must hold the data set's C class folders (the same names, `class_labels`), each with
    at least one image."""
    expected = N_CLASSES[name]
    classes = {split: class_labels(root / split, name) for split in SPLITS}
    if classes["train"] != classes["test"]:
        odd = sorted(set(classes["train"]) ^ set(classes["test"]))
        raise FileNotFoundError(f"{root}/train and {root}/test hold different class folders (only in one: "
                                f"{_few(odd)}); both need the same {expected} classes")
    listing = {}
    for split in SPLITS:
        items = []
        for cls, label in sorted(classes[split].items(), key=lambda item: item[1]):
            names = _list_class_folder(root / split / cls)
            if not names:
                raise FileNotFoundError(f"class folder {root / split / cls} holds no image (*.png|jpg|jpeg): the "
                                        f"{split} split would have no example of class {label} ({cls!r})")
            items += [(f"{split}/{cls}/{f}", label) for f in names[:max_per_class]]
        listing[split] = items
    return listing


def _few(names, show: int = 12) -> str:
    names = list(names)
    return ", ".join(map(str, names[:show])) + (f" ... ({len(names)} in all)" if len(names) > show else "") or "none"


def cifar_source(name: str, data_root: str | None = None, max_per_class: int | None = None) -> Source:
    """The files load_cifar(name, data_root, max_per_class) reads, checked complete (FileNotFoundError naming what
    is missing and where)."""
    layout, folder = find_cifar(name, data_root)
    if layout == "pickle":
        return Source(layout, folder, {split: [(f, -1) for f in files] for split, files in PICKLE_FILES[name].items()})
    return Source(layout, folder, _list_image_folder(folder, name, max_per_class))


def _digests(source: Source) -> dict:
    """Content digests of the source's files (with MD5s for pickles, to compare with the official sums)."""
    return file_digests(source.folder, source.rel_paths, md5=source.layout == "pickle",
                        what=f"the {source.folder.name} pickles", hint=PICKLE_HINT)


def cifar_fingerprint(name: str, data_root: str | None = None, max_per_class: int | None = None) -> str:
    """Content fingerprint of the files load_cifar(name, data_root, max_per_class) reads (see nhtlib.data.files)."""
    return fingerprint(_digests(cifar_source(name, data_root, max_per_class)))


@lru_cache(maxsize=2)
def official_md5(name: str) -> dict[str, str]:
    """{file: md5} of the official pickles, from torchvision's train_list / test_list."""
    from torchvision.datasets import CIFAR10, CIFAR100

    reader = {"cifar10": CIFAR10, "cifar100": CIFAR100}[name]
    return dict(reader.train_list + reader.test_list)


# -------------------------------------------------------------------------------------------------- decoding

def _check_batch(entry: dict, n_classes: int) -> None:
    """ValueError unless a loaded pickle (str keys) is a CIFAR batch: "data" uint8 (n, 3072) and n integer
    "labels" (or "fine_labels") in 0 .. n_classes-1."""
    label_key = "labels" if "labels" in entry else "fine_labels"
    if "data" not in entry or label_key not in entry:
        raise ValueError(f"has keys {sorted(map(str, entry))}; a CIFAR batch has 'data' and 'labels' (or "
                         "'fine_labels')")
    data = entry["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        described = f"{data.dtype} {data.shape}" if isinstance(data, np.ndarray) else type(data).__name__
        raise ValueError(f"'data' is {described}; expected a uint8 array (n, 3072)")
    labels = entry[label_key]
    if not isinstance(labels, (list, np.ndarray)):
        raise ValueError(f"{label_key!r} is a {type(labels).__name__}; expected a list of integers")
    if len(labels) != len(data):
        raise ValueError(f"{len(data)} images but {len(labels)} labels")
    bad = [i for i, v in enumerate(labels) if isinstance(v, (bool, np.bool_))
           or not isinstance(v, (int, np.integer)) or not 0 <= v < n_classes]
    if bad:
        raise ValueError(f"{label_key}[{bad[0]}] is {labels[bad[0]]!r} ({len(bad)} label(s) outside the integers "
                         f"0..{n_classes - 1})")


def _load_batch(path: Path, n_classes: int) -> dict:
    """One pickle, read by the restricted unpickler, with str keys and checked. Errors name the file."""
    with reading(path, "CIFAR pickle"):
        entry = load_pickle(path)
        if not isinstance(entry, dict):
            raise ValueError(f"holds a {type(entry).__name__}, not a dict")
        entry = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}
        _check_batch(entry, n_classes)
    return entry


def _decode_pickles(folder: Path, name: str) -> Arrays:
    """{split: (x uint8 (N, 3, 32, 32), y int64 (N,))} of the batches, concatenated in torchvision's file order
    (the rows of "data" are the 3 x 32 x 32 planes in C, H, W order)."""
    out: Arrays = {}
    for split in SPLITS:
        batches = [_load_batch(folder / f, N_CLASSES[name]) for f in PICKLE_FILES[name][split]]
        x = torch.from_numpy(np.concatenate([b["data"] for b in batches])).reshape(-1, 3, 32, 32).contiguous()
        y = torch.as_tensor([int(v) for b in batches for v in b.get("labels", b.get("fine_labels"))],
                            dtype=torch.int64)
        out[split] = (x, y)
    return out


def _decode_image_folder(root: Path, listing: dict[str, list[tuple[str, int]]]) -> Arrays:
    out: Arrays = {}
    for split, items in listing.items():
        x = torch.empty((len(items), 3, 32, 32), dtype=torch.uint8)
        for i, (rel, _) in enumerate(items):
            image = read_image(root / rel)
            x[i] = image if image.shape[1:] == (32, 32) else resample(image, (32, 32), "bicubic")
        out[split] = (x, torch.tensor([label for _, label in items], dtype=torch.int64))
    return out


def _check_labels(arrays: Arrays, name: str, folder: Path) -> None:
    """ValueError unless every split's labels cover exactly the C classes 0 .. C-1."""
    c = N_CLASSES[name]
    for split, (_, y) in arrays.items():
        found = set(torch.unique(y).tolist())
        if found != set(range(c)):
            missing, extra = sorted(set(range(c)) - found), sorted(found - set(range(c)))
            raise ValueError(f"the {split} labels in {folder} cover {len(found & set(range(c)))} of the {c} {name} "
                             f"classes (missing: {_few(missing)}; outside 0..{c - 1}: {_few(extra)}). A data set "
                             "that lacks classes is not " + name + ": put the complete data set there.")


def load_cifar_checked(name: str = "cifar10", data_root: str | None = None,
                       max_per_class: int | None = None) -> tuple[Arrays, dict]:
    """(load_cifar's arrays, what meta["data"] records: layout, folder, files, bytes, fingerprint, official_md5)."""
    source = cifar_source(name, data_root, max_per_class)
    digests = _digests(source)
    if source.layout == "pickle":
        info = describe(source.folder, digests, official_md5(name))
        arrays = cached_decode(f"{name}-pickle", info["fingerprint"], lambda: _decode_pickles(source.folder, name))
    else:
        info = describe(source.folder, digests)
        arrays = cached_decode(f"{name}-folder", info["fingerprint"],
                               lambda: _decode_image_folder(source.folder, source.listing))
    _check_labels(arrays, name, source.folder)
    return arrays, {"layout": source.layout, **info}


def load_cifar(name: str = "cifar10", data_root: str | None = None, max_per_class: int | None = None) -> Arrays:
    """{"train": (x uint8 (N, 3, 32, 32), y int64), "test": ...} for 'cifar10' or 'cifar100' (cached).
    max_per_class: decode only the first files of every class of an ImageFolder tree (pickles are read whole)."""
    return load_cifar_checked(name, data_root, max_per_class)[0]


# -------------------------------------------------------------------------------------------------- subsets

def class_interleaved_order(y: torch.Tensor, n_classes: int, seed: int = SUBSET_SEED) -> torch.Tensor:
    """All indices of the examples with labels 0 .. n_classes-1, in rounds: round r holds the r-th example (file
    order) of every class that has more than r, in a seeded random class order. While every class has examples
    left, each prefix of length m therefore holds floor(m / C) or ceil(m / C) examples of every class."""
    keep = torch.nonzero((y >= 0) & (y < n_classes)).flatten()
    labels = y[keep]
    by_class = torch.argsort(labels, stable=True)
    counts = torch.bincount(labels, minlength=n_classes)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(labels)
    rank[by_class] = torch.arange(len(labels)) - starts[labels[by_class]]  # position within its class
    rounds = int(counts.max()) if len(labels) else 0
    g = torch.Generator().manual_seed(seed)
    place = torch.rand(rounds, n_classes, generator=g).argsort(1).argsort(1)  # class -> slot within each round
    key = rank * n_classes + place[rank, labels]
    return keep[torch.argsort(key)]


def balanced_shortfall(counts: torch.Tensor, n: int) -> str | None:
    """Why n examples cannot be class-balanced (floor(n/C) or ceil(n/C) of each of C classes) given the per-class
    counts (C,), or None when they can."""
    c = len(counts)
    k, r = divmod(n, c)
    smallest = int(counts.min())
    if smallest >= k and int((counts > k).sum()) >= r:
        return None
    need = f"{k} per class" if r == 0 else f"{k + 1} of {r} classes and {k} of the others"
    return (f"{n} examples balanced over {c} classes need {need}, but the smallest class (label "
            f"{int(counts.argmin())}) has {smallest}")


def balanced_subset(y: torch.Tensor, n: int, n_classes: int) -> torch.Tensor:
    """Indices of n examples, floor(n/C) or ceil(n/C) per class (the first ones of each class in file order), in
    class-interleaved order (`class_interleaved_order`): every prefix is class-balanced too. ValueError when the
    labels do not hold enough examples of some class (never fewer than n)."""
    why = balanced_shortfall(torch.bincount(y[(y >= 0) & (y < n_classes)], minlength=n_classes), n)
    if why is not None:
        raise ValueError(f"balanced_subset(n={n}): {why}")
    return class_interleaved_order(y, n_classes)[:n]


@dataclass(frozen=True)
class CIFARTask(TaskConfig):
    """A class-balanced CIFAR subset. n_train / n_test: examples (None = all), in class-interleaved order (every
    prefix, e.g. a probe set or train_eval_size, is class-balanced). image_size: side after area down-sampling
    (32 = original). shuffle_labels: replace every training label by a fixed random one (drawn with
    `shuffle_seed`, shared by all members). data_root does not enter the run's identity (the data fingerprint
    does). Asking for more images per class than the data hold raises ValueError."""

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

    def _per_class(self) -> int | None:
        """Files read per class of an ImageFolder tree (None = all)."""
        counts = [self.n_train, self.n_test]
        return None if None in counts else -(-max(counts) // N_CLASSES[self.dataset])

    def data_fingerprint(self) -> str:
        return cifar_fingerprint(self.dataset, self.data_root, self._per_class())

    def _subset(self, y: torch.Tensor, n: int | None, field: str, split: str, info: dict) -> torch.Tensor:
        c = N_CLASSES[self.dataset]
        if n is None:
            return class_interleaved_order(y, c)
        # an ImageFolder is read up to _per_class() files per class, at least what either split needs: a class
        # with fewer than needed is counted in full
        why = balanced_shortfall(torch.bincount(y, minlength=c), n)
        if why is not None:
            raise ValueError(f"{field}={n}: {why} in the {split} split of {info['folder']}. Use a smaller {field} or "
                             f"put the full {self.dataset} data set there (pass data_root).")
        return class_interleaved_order(y, c)[:n]

    def codec(self) -> ImageCodec:
        """How the stored uint8 images become model inputs: /255, area down-sampling, standardisation."""
        return ImageCodec(MEAN[self.dataset], STD[self.dataset], image_size=self.image_size)

    def build(self, seed: int) -> Dataset:
        """The Dataset: uint8 images (N, 3, 32, 32) with `codec`, decoded batch by batch (`Split.take`)."""
        c = N_CLASSES[self.dataset]
        arrays, info = load_cifar_checked(self.dataset, self.data_root, self._per_class())
        codec = self.codec()
        splits = {}
        for split, n, field in (("train", self.n_train, "n_train"), ("test", self.n_test, "n_test")):
            x, y = arrays[split]
            idx = self._subset(y, n, field, split, info)
            x, y = x[idx], y[idx]  # stored as uint8 (N, 3, 32, 32); `codec` decodes them batch by batch
            if split == "train" and self.shuffle_labels:
                y = torch.randint(0, c, y.shape, generator=torch.Generator().manual_seed(self.shuffle_seed))
            splits[split] = Split(x, y, codec=codec)
        return Dataset(splits, n_classes=c, meta={"chance": 1.0 / c, "dataset": self.dataset, "data": info})
