"""What data a task needs, what is there, and a guard that refuses paper scale on partial data.

The compute planner and the paper-scale guard ask this module before anything is trained: `inventory(task)`
says which folder a file-reading task reads (the loaders' own finders decide: `nhtlib.data.cifar.find_cifar`,
`nhtlib.data.mnist.find_mnist`, `nhtlib.data.celeba.find_celeba`, `nhtlib.data.waterbirds.find_waterbirds`,
`nhtlib.data.waterbirds.find_cub`), how many examples of each split are there, and how many the official data set
has (`FULL_SIZES`). It never decodes an image and never hashes a file: it counts image files, reads the label lists
of pickle batches (with the package's restricted unpickler, `nhtlib.data.files.load_pickle`) and the IDX headers,
and counts the rows of the annotation files, so it takes about a second even on the full data sets. Generated tasks (sparse parity, modular arithmetic) have no inventory (None).

Two guards raise `IncompleteDataError` (a FileNotFoundError) with a message that says what is missing, what was
found, where the full data set must go and why it is needed:

* `require_present(task)`: nothing is there (used by the planner before anything is built);
* `require_complete(task, why)`: nothing is there, or only part of the data set (e.g. the book's offline CIFAR-10
  holds 30,000 of the 50,000 training images), e.g. with ``why="scale='paper' trains on the full data set"``.

The CUB stand-in for Waterbirds (``WaterbirdsTask(source="cub_standin")``) is never complete: its full sizes are
those of the real Waterbirds data set.
"""
from __future__ import annotations

import csv
import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nhtlib.paths import data_root as resolve_data_root
from nhtlib.data import TaskConfig
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.celeba import IDENTITY_FILE, IMAGE_DIR, PARTITION_FILE, CelebATask, find_celeba
from nhtlib.data.files import DataSchemaError, load_pickle
from nhtlib.data.cifar import IMAGE_SUFFIXES, N_CLASSES, PICKLE_DIRS, PICKLE_FILES, CIFARTask, cifar_source, find_cifar
from nhtlib.data.mnist import MNISTTask, mnist_files
from nhtlib.data.waterbirds import CUB_DIR, CUB_IMAGES, STANDARD_DIRS, STANDIN_CSV, WaterbirdsTask, find_cub, find_waterbirds

# Official sizes (examples per split).
# CIFAR-10 / CIFAR-100: Krizhevsky, "Learning Multiple Layers of Features from Tiny Images" (2009), and
#   https://www.cs.toronto.edu/~kriz/cifar.html: 50,000 training and 10,000 test images each.
# MNIST: LeCun, Cortes, Burges, http://yann.lecun.com/exdb/mnist/: 60,000 training and 10,000 test images.
# CelebA: Liu et al., "Deep Learning Face Attributes in the Wild" (ICCV 2015): 202,599 aligned images
#   (img_align_celeba), official partition list_eval_partition.txt train 162,770 / val 19,867 / test 19,962
#   (counted in shared/data/README.md from the official file).
# Waterbirds: Sagawa et al., "Distributionally Robust Neural Networks" (ICLR 2020), folder
#   waterbird_complete95_forest2water2/ with metadata.csv: 11,788 images (= CUB-200-2011), split train 4,795 /
#   val 1,199 / test 5,794.
FULL_SIZES: dict[str, dict[str, int]] = {
    "cifar10": {"train": 50_000, "test": 10_000},
    "cifar100": {"train": 50_000, "test": 10_000},
    "mnist": {"train": 60_000, "test": 10_000},
    "celeba": {"images": 202_599, "train": 162_770, "val": 19_867, "test": 19_962},
    "waterbirds": {"images": 11_788, "train": 4_795, "val": 1_199, "test": 5_794},
}
WATERBIRDS_DIR = STANDARD_DIRS[1]  # "waterbird_complete95_forest2water2", the folder name of the released data set
CELEBA_SPLITS = {"0": "train", "1": "val", "2": "test"}  # list_eval_partition.txt codes
WATERBIRDS_SPLITS = {"0": "train", "1": "val", "2": "test"}  # metadata.csv "split" codes
NO_ROOT = Path("<data_root>")  # stands for the data root in messages when none is set


@dataclass(frozen=True)
class DataInventory:
    """What one data set holds on this machine, against its official size.

    ``dataset``: the data set's name ("cifar10", "cifar100", "mnist", "celeba", "waterbirds", "cub_standin").
    ``where``: the folder the loader reads, or the folder it expects when nothing is there. ``found``: examples
    per split that are there (empty when nothing is). ``full``: examples per split of the official data set.
    ``layout``: which layout was found ("pickle", "folder", "idx", "official", "csv"; None when absent).
    ``problems``: what makes the data incomplete besides the counts (missing or unreadable files, ...).
    ``notes``: remarks that do not make it incomplete. ``target``: where the full data set must go and in which
    layout (used by the guards' messages). ``stand_in``: True for the CUB stand-in for Waterbirds, which is never
    complete. ``present`` and ``complete`` are computed from these.
    """

    dataset: str
    where: Path
    found: dict[str, int]
    full: dict[str, int]
    layout: str | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    target: str = ""
    stand_in: bool = False

    @property
    def name(self) -> str:
        """The data set's name (= ``dataset``)."""
        return self.dataset

    @property
    def present(self) -> bool:
        """Whether any example is there."""
        return any(n > 0 for n in self.found.values())

    @property
    def complete(self) -> bool:
        """Whether every split holds at least its official count, with no problem (never for a stand-in)."""
        return (self.present and not self.problems and not self.stand_in
                and all(self.found.get(split, 0) >= n for split, n in self.full.items()))

    def missing(self) -> dict[str, int]:
        """{split: examples missing} for every split short of its official count."""
        return {split: n - self.found.get(split, 0) for split, n in self.full.items()
                if self.found.get(split, 0) < n}

    def counts_text(self) -> str:
        """E.g. "train 30,000 of 50,000, test 10,000 of 10,000"."""
        return ", ".join(f"{split} {self.found.get(split, 0):,} of {n:,}" for split, n in self.full.items())

    def status(self) -> str:
        """One word or phrase: "complete", "absent", "a subset", "a CUB stand-in for Waterbirds, never
        complete", "incomplete" (every split is there in full, but something else is wrong: see problems)."""
        if not self.present:
            return "absent"
        if self.stand_in:
            return "a CUB stand-in for Waterbirds, never complete"
        if self.complete:
            return "complete"
        return "a subset" if self.missing() else "incomplete"

    def describe(self) -> str:
        """One human line, e.g. "cifar10 at /x/cifar10: train 30,000 of 50,000, test 10,000 of 10,000 (a subset)"."""
        if not self.present:
            full = ", ".join(f"{split} {n:,}" for split, n in self.full.items())
            return f"{self.dataset} expected at {self.where}: nothing there (absent; full: {full})"
        extra = "; ".join(self.problems)
        return f"{self.dataset} at {self.where}: {self.counts_text()} ({self.status()}{'; ' + extra if extra else ''})"


class IncompleteDataError(FileNotFoundError):
    """The data a task reads are absent or only part of the data set. ``inventory`` holds what was found; the
    message names what is missing, what was found, where the full data set must go, and why it is needed."""

    def __init__(self, message: str, inventory: DataInventory | None = None):
        super().__init__(message)
        self.inventory = inventory


# -------------------------------------------------------------------------------------------- the data root

def _root(data_root: str | os.PathLike | None) -> tuple[Path | None, str | None]:
    """(the resolved data root, None) or (the root asked for, or None when there is none; why it is not there)."""
    try:
        return resolve_data_root(data_root), None
    except FileNotFoundError:
        if data_root:
            return Path(data_root).expanduser(), f"the data root {Path(data_root).expanduser()} does not exist"
        return None, "no data root is set (pass data_root or set NHT_DATA_ROOT)"


def _absent(dataset: str, root: Path | None, folder: str, full: dict[str, int], target: str,
            why: str | None, stand_in: bool = False) -> DataInventory:
    return DataInventory(dataset, (root or NO_ROOT) / folder, {}, dict(full), None, (), (why,) if why else (),
                         target, stand_in)


def _count_files(folder: Path, suffixes: tuple[str, ...]) -> int:
    try:
        with os.scandir(folder) as entries:
            return sum(1 for e in entries if e.name.lower().endswith(suffixes) and e.is_file())
    except OSError:
        return 0


def _per_class_text(split: str, counts: list[int]) -> str:
    low, high = min(counts), max(counts)
    each = f"{low:,} images each" if low == high else f"{low:,} to {high:,} images"
    return f"{split}/ holds {len(counts)} class folders of {each}"


# ------------------------------------------------------------------------------------------------------ CIFAR

def _cifar_target(name: str, root: Path | None) -> str:
    full = FULL_SIZES[name]
    files = ", ".join(f for split in ("train", "test") for f in PICKLE_FILES[name][split])
    return (f"Put torchvision's {PICKLE_DIRS[name]}/ ({files}) or an ImageFolder train/<class>/, test/<class>/ tree "
            f"with all {full['train']:,} training and {full['test']:,} test images "
            f"({N_CLASSES[name]} class folders) in {(root or NO_ROOT) / name}, or pass data_root.")


def _pickle_count(path: Path) -> int:
    """Examples in one CIFAR pickle batch: the length of its label list. Read by the package's restricted unpickler
    (`files.load_pickle`): a planted global is refused by name, and nothing in the file runs."""
    entry = load_pickle(path)
    if not isinstance(entry, dict):
        raise ValueError(f"holds a {type(entry).__name__}, not a dict")
    entry = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}
    labels = entry.get("labels", entry.get("fine_labels"))
    if not isinstance(labels, (list, tuple)):
        raise ValueError("has no 'labels' / 'fine_labels' list")
    return len(labels)


def cifar_inventory(name: str = "cifar10", data_root: str | None = None) -> DataInventory:
    """The inventory of CIFAR-10 or CIFAR-100 (name) under data_root, in the layout `find_cifar` picks."""
    full = FULL_SIZES[name]
    root, why = _root(data_root)
    target = _cifar_target(name, root)
    if root is None or why:
        return _absent(name, root, name, full, target, why)
    try:
        layout, folder = find_cifar(name, str(root))
    except FileNotFoundError:
        return _absent(name, root, name, full, target, None)
    problems, notes, found = [], [], {}
    if layout == "pickle":
        for split, names in PICKLE_FILES[name].items():
            found[split] = 0
            for f in names:
                path = folder / f
                if not path.is_file():
                    problems.append(f"{f} is missing")
                    continue
                try:
                    found[split] += _pickle_count(path)
                except Exception as err:  # noqa: BLE001 - any unreadable batch counts as missing, named
                    problems.append(f"{f} cannot be read ({type(err).__name__}: {err})")
        return DataInventory(name, folder, found, dict(full), layout, tuple(problems), (), target)
    try:
        listing = cifar_source(name, str(root)).listing
    except (FileNotFoundError, DataSchemaError) as err:  # class folders wrong: count what is there anyway, say why
        problems.append(str(err))
        for split in ("train", "test"):
            classes = [d for d in (folder / split).iterdir() if d.is_dir()]
            found[split] = sum(_count_files(d, IMAGE_SUFFIXES) for d in classes)
        return DataInventory(name, folder, found, dict(full), layout, tuple(problems), (), target)
    for split, items in listing.items():
        found[split] = len(items)
        per_class = [0] * N_CLASSES[name]
        for _, label in items:
            per_class[label] += 1
        notes.append(_per_class_text(split, per_class))
    return DataInventory(name, folder, found, dict(full), layout, (), tuple(notes), target)


# ------------------------------------------------------------------------------------------------------ MNIST

def _mnist_target(root: Path | None) -> str:
    return ("Put the four MNIST IDX files train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
            "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (60,000 training and 10,000 test images; "
            f"or uncompressed, or torchvision's MNIST/raw/) in {(root or NO_ROOT) / 'mnist'}, or pass data_root.")


def _idx_count(path: Path) -> int:
    """The first dimension of an IDX file (its example count), from its header; ValueError when the file's size
    does not match the header (the uncompressed size of a .gz file is its last 4 bytes, the gzip ISIZE field)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        head = fh.read(4)
        if len(head) < 4 or head[0] or head[1] or head[2] != 0x08 or head[3] < 1:
            raise ValueError(f"not an IDX file of unsigned bytes (magic {head.hex() or 'missing'})")
        dims = fh.read(4 * head[3])
    if len(dims) < 4 * head[3]:
        raise ValueError("the header is cut short")
    dims = [int.from_bytes(dims[i:i + 4], "big") for i in range(0, len(dims), 4)]
    expected = 4 + 4 * len(dims) + math.prod(dims)
    if path.suffix == ".gz":
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            size, expected = int.from_bytes(fh.read(4), "little"), expected % 2 ** 32
    else:
        size = path.stat().st_size
    if size != expected:
        raise ValueError(f"the header announces {dims[0]:,} examples ({expected:,} bytes) but the file holds "
                         f"{size:,} bytes: it is truncated")
    return dims[0]


def mnist_inventory(data_root: str | None = None) -> DataInventory:
    """The inventory of MNIST under data_root (the folder `find_mnist` picks; counts from the IDX headers)."""
    full = FULL_SIZES["mnist"]
    root, why = _root(data_root)
    target = _mnist_target(root)
    if root is None or why:
        return _absent("mnist", root, "mnist", full, target, why)
    try:
        folder, names = mnist_files(str(root))  # the folder find_mnist picks, the files load_mnist reads
    except FileNotFoundError:
        return _absent("mnist", root, "mnist", full, target, None)
    problems, found = [], {}
    for split, (images, labels) in zip(("train", "test"), (names[:2], names[2:])):
        counts = []
        for f in (images, labels):
            try:
                counts.append(_idx_count(folder / f))
            except FileNotFoundError:
                problems.append(f"{f} is missing")
                counts.append(0)
            except Exception as err:  # noqa: BLE001 - an unreadable header counts as missing, named
                problems.append(f"{f} cannot be read ({type(err).__name__}: {err})")
                counts.append(0)
        if counts[0] != counts[1] and all(counts):
            problems.append(f"{images} holds {counts[0]:,} images but {labels} {counts[1]:,} labels")
        found[split] = min(counts)
    return DataInventory("mnist", folder, found, dict(full), "idx", tuple(problems), (), target)


# ----------------------------------------------------------------------------------------------------- CelebA

def _celeba_target(root: Path | None) -> str:
    return (f"Put all 202,599 aligned images {IMAGE_DIR}/<6-digit id>.jpg with list_attr_celeba.txt, "
            f"{PARTITION_FILE} and {IDENTITY_FILE} (the official layout) in {(root or NO_ROOT) / 'celeba'}, "
            "or pass data_root.")


def celeba_inventory(data_root: str | None = None, need_identity: bool = True) -> DataInventory:
    """The inventory of CelebA under data_root: the .jpg files of img_align_celeba/ ("images") and, per official
    partition, those of them listed in list_eval_partition.txt. need_identity: a missing identity_CelebA.txt is a
    problem (the identity split needs it) rather than a note."""
    full = FULL_SIZES["celeba"]
    root, why = _root(data_root)
    target = _celeba_target(root)
    if root is None or why:
        return _absent("celeba", root, "celeba", full, target, why)
    try:
        folder = find_celeba(str(root))
    except FileNotFoundError:
        return _absent("celeba", root, "celeba", full, target, None)
    with os.scandir(folder / IMAGE_DIR) as entries:
        present = {e.name for e in entries if e.name.lower().endswith(".jpg")}
    tokens = (folder / PARTITION_FILE).read_text(encoding="latin1").split()
    found = {"images": len(present), "train": 0, "val": 0, "test": 0}
    unlisted = len(present)
    for name, code in zip(tokens[0::2], tokens[1::2]):
        if name in present and code in CELEBA_SPLITS:
            found[CELEBA_SPLITS[code]] += 1
            unlisted -= 1
    problems, notes = [], []
    if unlisted:
        notes.append(f"{unlisted:,} images are not in {PARTITION_FILE}")
    if not (folder / IDENTITY_FILE).is_file():
        (problems if need_identity else notes).append(f"{IDENTITY_FILE} is missing (split='identity' needs it)")
    return DataInventory("celeba", folder, found, dict(full), "official", tuple(problems), tuple(notes), target)


# ------------------------------------------------------------------------------------------------- Waterbirds

def _waterbirds_target(root: Path | None) -> str:
    base = root or NO_ROOT
    return (f"Put the Waterbirds data set (Sagawa et al. 2020): its folder {WATERBIRDS_DIR}/ with metadata.csv and "
            f"all 11,788 images it lists, in {base / WATERBIRDS_DIR} (or {base / STANDARD_DIRS[0]}), "
            "or pass data_root.")


def _listed(folder: Path, csv_path: Path, image_dir: Path, split_column: str,
            splits: dict[str, str]) -> tuple[dict[str, int], int, int]:
    """({"images": n, split: n...} of the listed images that exist, rows listed, rows with an unknown split)."""
    found = {"images": 0, **{s: 0 for s in splits.values()}}
    rows = odd = 0
    prefix = f"{folder / image_dir}{os.sep}"
    with open(csv_path, newline="") as fh:
        for row in csv.DictReader(fh):
            rows += 1
            if not os.path.isfile(prefix + (row.get("img_filename") or "")):
                continue
            found["images"] += 1
            split = splits.get((row.get(split_column) or "").strip())
            if split is None:
                odd += 1
            else:
                found[split] += 1
    return found, rows, odd


def waterbirds_inventory(data_root: str | None = None) -> DataInventory:
    """The inventory of the real Waterbirds data set under data_root: the images metadata.csv lists that exist,
    per split (0 train, 1 val, 2 test)."""
    full = FULL_SIZES["waterbirds"]
    root, why = _root(data_root)
    target = _waterbirds_target(root)
    if root is None or why:
        return _absent("waterbirds", root, WATERBIRDS_DIR, full, target, why)
    try:
        folder = find_waterbirds(str(root))
    except FileNotFoundError:
        return _absent("waterbirds", root, WATERBIRDS_DIR, full, target, None)
    found, rows, odd = _listed(folder, folder / "metadata.csv", Path(), "split", WATERBIRDS_SPLITS)
    problems = []
    if found["images"] < rows:
        problems.append(f"{rows - found['images']:,} of the {rows:,} images metadata.csv lists are missing")
    if odd:
        problems.append(f"{odd:,} rows of metadata.csv have a split other than 0, 1, 2")
    return DataInventory("waterbirds", folder, found, dict(full), "csv", tuple(problems), (), target)


def cub_standin_inventory(data_root: str | None = None) -> DataInventory:
    """The inventory of the CUB stand-in for Waterbirds under data_root (<data_root>/cub/): the photos
    waterbirds_standin.csv lists that exist, per CUB split (train, test; no val). It is never complete: its full
    sizes are the real Waterbirds data set's."""
    full = FULL_SIZES["waterbirds"]
    root, why = _root(data_root)
    target = ("The CUB stand-in is not the Waterbirds data set and is never complete: use "
              "WaterbirdsTask(source='waterbirds') with the real data set. " + _waterbirds_target(root))
    if root is None or why:
        return _absent("cub_standin", root, CUB_DIR, full, target, why, stand_in=True)
    try:
        folder = find_cub(str(root))
    except FileNotFoundError:
        return _absent("cub_standin", root, CUB_DIR, full, target, None, stand_in=True)
    found, rows, _ = _listed(folder, folder / STANDIN_CSV, CUB_IMAGES, "cub_is_training_image",
                             {"1": "train", "0": "test"})
    found = {"images": found["images"], "train": found["train"], "val": 0, "test": found["test"]}
    problems = []
    if found["images"] < rows:
        problems.append(f"{rows - found['images']:,} of the {rows:,} photos {STANDIN_CSV} lists are missing")
    return DataInventory("cub_standin", folder, found, dict(full), "csv", tuple(problems), (), target, True)


# --------------------------------------------------------------------------------------------- by task / name

DATASETS: dict[str, Callable[..., DataInventory]] = {
    "cifar10": lambda data_root=None: cifar_inventory("cifar10", data_root),
    "cifar100": lambda data_root=None: cifar_inventory("cifar100", data_root),
    "mnist": mnist_inventory,
    "celeba": celeba_inventory,
    "waterbirds": waterbirds_inventory,
    "cub_standin": cub_standin_inventory,
}


def dataset_inventory(name: str, data_root: str | None = None) -> DataInventory:
    """The inventory of one data set by name (a key of `DATASETS`) under data_root."""
    if name not in DATASETS:
        raise ValueError(f"dataset={name!r}: choose one of {sorted(DATASETS)}")
    return DATASETS[name](data_root=data_root)


def all_inventories(data_root: str | None = None) -> list[DataInventory]:
    """The inventory of every data set the book can read, under data_root."""
    return [DATASETS[name](data_root=data_root) for name in DATASETS]


def _waterbirds_task(task: WaterbirdsTask) -> DataInventory:
    return (waterbirds_inventory if task.source == "waterbirds" else cub_standin_inventory)(task.data_root)


# the file-reading tasks of nhtlib (every TaskConfig subclass that overrides data_fingerprint)
BY_TASK: tuple[tuple[type, Callable[..., DataInventory]], ...] = (
    (CIFARTask, lambda t: cifar_inventory(t.dataset, t.data_root)),
    (BorderCIFARTask, lambda t: inventory(t.image_task())),
    (MNISTTask, lambda t: mnist_inventory(t.data_root)),
    (CelebATask, lambda t: celeba_inventory(t.data_root, need_identity=t.split == "identity")),
    (WaterbirdsTask, _waterbirds_task),
)


def inventory(task: TaskConfig) -> DataInventory | None:
    """What data `task` reads and what is there; None for a task whose data are generated in code.

    A task may answer for itself with a ``data_inventory()`` method; otherwise its type decides (`BY_TASK`).
    Raises TypeError for a file-reading task (one with its own ``data_fingerprint``) that has no inventory."""
    own = getattr(task, "data_inventory", None)
    if callable(own):
        return own()
    for kind, make in BY_TASK:
        if isinstance(task, kind):
            return make(task)
    if not isinstance(task, TaskConfig):
        raise TypeError(f"inventory() takes a TaskConfig, not {type(task).__name__}")
    if type(task).data_fingerprint is TaskConfig.data_fingerprint:
        return None
    raise TypeError(f"{type(task).__name__} reads files but nhtlib.data.inventory has no inventory for it: add it "
                    "to BY_TASK or give the task a data_inventory() method")


# ------------------------------------------------------------------------------------------------------ guards

def _images(split: str, n: int) -> str:
    return f"{n:,} images" if split == "images" else f"{n:,} {split} images"


def _message(inv: DataInventory, why: str | None) -> str:
    """What is missing, what was found, where the full data set must go (inv.target) and why it is needed."""
    if not inv.present:
        full = ", ".join(f"{split} {n:,}" for split, n in inv.full.items())
        text = f"no {inv.dataset} data: nothing at {inv.where} (the full data set: {full})"
    else:
        missing = inv.missing()
        text = f"{inv.dataset} at {inv.where} is {inv.status()}: found {inv.counts_text()}"
        if missing:
            text += "; missing " + ", ".join(f"{n:,} of the {_images(split, inv.full[split])}"
                                             for split, n in missing.items())
    text = "; ".join([text, *(e.rstrip(".") for e in (*inv.problems, *inv.notes))])
    return (f"{why}, but " if why else "") + f"{text}. {inv.target}"


def require_present(task: TaskConfig) -> DataInventory | None:
    """Raise `IncompleteDataError` (a FileNotFoundError) when nothing of the data `task` reads is there; return
    the inventory otherwise (None for generated data). Cheap: used by the planner before anything is built."""
    inv = inventory(task)
    if inv is not None and not inv.present:
        raise IncompleteDataError(_message(inv, None), inv)
    return inv


def require_complete(task: TaskConfig, why: str) -> DataInventory | None:
    """Raise `IncompleteDataError` unless the data `task` reads are there in full; return the inventory otherwise
    (None for generated data, which are always complete). why: what needs the full data set, said in the message
    (e.g. "scale='paper' trains on the full data set")."""
    inv = inventory(task)
    if inv is not None and not inv.complete:
        raise IncompleteDataError(_message(inv, why), inv)
    return inv
