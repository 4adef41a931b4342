"""The shape of a task's data, read from its config and the data's inventory (no image is decoded): what the
compute planner needs.

`layout(task)` gives the input shape and dtype one model example has, the number of classes, the training
examples and the examples evaluated at every log step besides the training split. Sizes a config leaves to the data
(``n_train=None``: "all of it") are what `nhtlib.data.inventory` counts when the data are there, else the full data
set's (`nhtlib.data.inventory.FULL_SIZES`): a plan is made for the data the run will read, and the planner's data
check says separately whether they are complete. ``layout(task, full=True)`` takes the full data set's sizes whatever
is on disk: paper scale trains only on complete data (its data check refuses anything less), so its runs are sized
and planned at the paper's data sizes even on a machine that holds a subset. CelebA's identity split is estimated
from its test fraction; elsewhere the sizes are exact (tested against real builds in tests/test_plan.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from nhtlib.data import TaskConfig
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.celeba import CelebATask
from nhtlib.data.cifar import N_CLASSES, CIFARTask
from nhtlib.data.inventory import FULL_SIZES, inventory
from nhtlib.data.mnist import MNISTTask
from nhtlib.data.modular import ModularTask
from nhtlib.data.sparse_parity import SparseParityTask
from nhtlib.data.waterbirds import WaterbirdsTask


def _sizes(task: TaskConfig, dataset: str, full: bool) -> dict[str, int]:
    """Examples per split of what the task will read: the full set's when `full`, else the inventory's counts when
    present, else the full set's."""
    found = None if full else inventory(task)
    return dict(found.found) if found is not None and found.present else dict(FULL_SIZES[dataset])


UINT8_CIFAR = 3 * 32 * 32  # CIFAR images are kept at 32 px as uint8 and down-sampled when a batch is decoded
LABEL = 8  # an int64 label


@dataclass(frozen=True)
class DataLayout:
    """What one member's data look like to the model and the training loop.

    input_shape: one example's shape as the model sees it (e.g. (3, 32, 32)); input_dtype: "float32" or "int64"
    (token ids). shared_bytes_per_example: resident bytes of an example that every member of a batch shares (uint8
    images decoded batch by batch: 1 per pixel value; float32 inputs: 4 per element); member_bytes_per_example: the
    bytes each member adds per example (its own labels, border colours, or its own inputs when every seed draws its
    own data). n_train: training examples; n_eval: examples of the other splits evaluated at each log step;
    per_member_train: whether each seed draws its own training set.
    """

    input_shape: tuple[int, ...]
    n_classes: int
    n_train: int
    n_eval: int
    input_dtype: str = "float32"
    shared_bytes_per_example: float = -1.0  # -1: float32 inputs of input_shape (shared) plus an int64 label
    member_bytes_per_example: float = 0.0
    per_member_train: bool = False

    def __post_init__(self) -> None:
        if self.shared_bytes_per_example < 0:
            object.__setattr__(self, "shared_bytes_per_example", 4 * math.prod(self.input_shape) + LABEL)

    def data_bytes(self, members: int) -> float:
        """Resident bytes of the data of `members` members trained together (train and evaluation splits)."""
        n = self.n_train + self.n_eval
        return n * (self.shared_bytes_per_example + members * self.member_bytes_per_example)


def _cifar(task: CIFARTask, full: bool) -> DataLayout:
    sizes = _sizes(task, task.dataset, full)
    return DataLayout((3, task.image_size, task.image_size), N_CLASSES[task.dataset], task.n_train or sizes["train"],
                      task.n_test or sizes["test"], shared_bytes_per_example=UINT8_CIFAR + LABEL)


def _borders(task: BorderCIFARTask, full: bool) -> DataLayout:
    sizes = _sizes(task, task.dataset, full)
    n_test = task.n_test or sizes["test"]
    # coloured and clean test sets, plus the gray shortcut images; every seed draws its own border colours
    return DataLayout((3, task.image_size, task.image_size), N_CLASSES[task.dataset], task.n_train or sizes["train"],
                      2 * n_test + task.shortcut_per_class * N_CLASSES[task.dataset],
                      shared_bytes_per_example=UINT8_CIFAR + LABEL, member_bytes_per_example=2 * LABEL,
                      per_member_train=True)  # the images shared, each member's labels and border colours its own


def _mnist(task: MNISTTask, full: bool) -> DataLayout:  # sizes from the config: `full` changes nothing
    extra = task.n_test if task.shortcut == "patch" else 0  # the clean copy of the test set
    return DataLayout((1, 28, 28), 10, task.n_train, task.n_test + extra)


def _modular(task: ModularTask, full: bool) -> DataLayout:  # sizes from the config: `full` changes nothing
    pairs = task.p ** 2
    # every seed draws its own split of the p² pairs
    return DataLayout((2,), task.p, task.n_train, pairs - task.n_train, input_dtype="int64",
                      shared_bytes_per_example=0, member_bytes_per_example=3 * 8, per_member_train=True)


def _toy(task: SparseParityTask, full: bool) -> DataLayout:  # sizes from the config: `full` changes nothing
    return DataLayout((task.n_bits,), 2, task.n_train, task.n_test, shared_bytes_per_example=0,
                      member_bytes_per_example=4 * task.n_bits + LABEL, per_member_train=True)


def _celeba(task: CelebATask, full: bool) -> DataLayout:
    sizes = _sizes(task, "celeba", full)
    if task.split == "official":
        n_train, n_eval = sizes.get("train", 0), sizes.get("test", 0)
    else:  # identity-disjoint: test_fraction of every group
        total = sizes.get("images") or sum(sizes.get(k, 0) for k in ("train", "val", "test"))
        n_train, n_eval = round(total * (1 - task.test_fraction)), round(total * task.test_fraction)
    return DataLayout((3, task.image_size, task.image_size), 2, task.n_train or n_train, n_eval,
                      shared_bytes_per_example=3 * task.image_size ** 2 + LABEL)  # uint8, resized at load


def _waterbirds(task: WaterbirdsTask, full: bool) -> DataLayout:
    sizes = _sizes(task, "waterbirds", full)
    pixel = 1 if task.source == "waterbirds" else 4  # real images uint8; the stand-in is composited in float
    return DataLayout((3, task.image_size, task.image_size), 2, task.n_train or sizes["train"],
                      sizes[task.eval_split], shared_bytes_per_example=pixel * 3 * task.image_size ** 2 + LABEL)


LAYOUTS = {CIFARTask: _cifar, BorderCIFARTask: _borders, MNISTTask: _mnist, ModularTask: _modular,
           SparseParityTask: _toy, CelebATask: _celeba, WaterbirdsTask: _waterbirds}


def layout(task: TaskConfig, *, full: bool = False) -> DataLayout:
    """The `DataLayout` of `task` (TypeError for a task kind without a rule: add one to `LAYOUTS`). full: size what
    the config leaves to the data at the full data set's sizes (`FULL_SIZES`) instead of the files on disk (paper
    scale)."""
    for kind, rule in LAYOUTS.items():
        if type(task) is kind:
            return rule(task, full)
    raise TypeError(f"no data layout rule for {type(task).__name__}; add one to nhtlib.data.layout.LAYOUTS")
