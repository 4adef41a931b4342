"""Synthetic data of a task's real shapes and dtypes: the training loop checked where no data set is (a lent GPU).

`synthetic_dataset(task, seed, n_train=..., n_eval=...)` builds `task`'s Dataset through the task's own `build`, with
its file loader replaced, for the duration of that call only, by random raw arrays in the loader's own format: uint8
CIFAR images (N, 3, 32, 32) and labels, uint8 MNIST digits (N, 28, 28), CelebA's uint8 images at image_size with
attribute, partition and identity columns, real Waterbirds' uint8 images with y / place / split, the CUB stand-in's
float images in [0, 1] with y / a / train. Everything after the load is the task's real code: class-balanced subsets,
label shuffling, border colours per seed, the Shortcut-MNIST patch and its clean copy, CelebA's identity or official
split, the grouped evaluation splits, and the codecs that turn uint8 into standardised floats and draw the borders
where a batch is decoded (on the device in training). Generated tasks (modular arithmetic, sparse parity) are built
as they are (`GENERATED`): their data are already made in code, at their real sizes.

Sizes: n_train training examples; n_eval examples of the evaluation set (CIFAR's and MNIST's test split, which the
border and patch tasks copy into their coloured / clean splits; the grouped tasks' evaluation groups together,
balanced over the four groups; CelebA's identity split draws about test_fraction of the n_train + n_eval images for
its test groups instead). The grouped tasks' own n_train subset is not drawn: the synthetic training split is it.
The raw arrays come from a CPU generator seeded by `data_seed` (the same for every training seed, as real files are;
what a seed changes, e.g. the border draw, is the task's code), as the loaders hand their tensors over;
`synthetic_members` stacks the members' Datasets and moves them to the device, where training decodes them.

`SyntheticTask` wraps a task as a `TaskConfig` (for `nhtlib.engine.sweep.run` into a scratch cache): its config
(kind "SyntheticTask") is in every run key, so a run on it can never be served for the real data.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence
from unittest import mock

import numpy as np
import pandas as pd
import torch

from nhtlib.config import ConfigError, check_range
from nhtlib.data import Dataset, TaskConfig, celeba, cifar, mnist, stack_members, waterbirds
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.modular import ModularTask
from nhtlib.data.sparse_parity import SparseParityTask

GENERATED = (ModularTask, SparseParityTask)  # tasks whose data are made in code: built as they are
FOLDER = Path("<synthetic>")  # what a synthetic Dataset's meta["data"]["folder"] and error messages name


def _info(task: TaskConfig, data_seed: int, **extra) -> dict:
    """meta["data"] of a synthetic build: no folder, no file; a fingerprint that says synthetic."""
    return {"folder": str(FOLDER), "files": 0, "bytes": 0, "official_md5": None, "synthetic": True,
            "fingerprint": f"synthetic-{task.digest()}-{data_seed}", **extra}


def _balanced_labels(n: int, n_classes: int, g: torch.Generator) -> torch.Tensor:
    """int64 (n,): every class floor(n / C) or ceil(n / C) times, in random order (what a class-balanced subset of
    the first n needs)."""
    return (torch.arange(n) % n_classes)[torch.randperm(n, generator=g)]


def _groups(n: int, g: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(y, a) int64 arrays (n,) with the four groups g = 2y + a equally often, in random order."""
    groups = _balanced_labels(n, 4, g).numpy()
    return groups // 2, groups % 2


def _uint8_images(n: int, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)


def _cifar_loader(task: cifar.CIFARTask, n_train: int, n_eval: int, g: torch.Generator, data_seed: int):
    """`load_cifar_checked`'s (arrays, info): n_train / n_eval uint8 images (N, 3, 32, 32), balanced labels."""
    c = cifar.N_CLASSES[task.dataset]
    arrays = {split: (_uint8_images(n, (3, 32, 32), g), _balanced_labels(n, c, g))
              for split, n in (("train", n_train), ("test", n_eval))}
    return arrays, _info(task, data_seed, layout="synthetic")


def _mnist_loader(task: mnist.MNISTTask, n_train: int, n_eval: int, g: torch.Generator, data_seed: int):
    """`load_mnist_checked`'s (arrays, info): uint8 digits (N, 28, 28) and labels 0..9."""
    arrays = {split: (_uint8_images(n, mnist.IMAGE_SHAPE, g), _balanced_labels(n, 10, g))
              for split, n in (("train", n_train), ("test", n_eval))}
    return arrays, _info(task, data_seed)


def _celeba_loader(task: celeba.CelebATask, n_train: int, n_eval: int, g: torch.Generator, data_seed: int):
    """`load_celeba`'s dict: uint8 images (N, 3, S, S) at the task's image_size, the 40 attributes (target and
    spurious in balanced groups, the others random), the official partition (train 0 for the first n_train, test 2
    after) and identities of four images each, one per group (so the identity split can stratify)."""
    n = n_train + n_eval
    y, a = _groups(n, g)
    attrs = pd.DataFrame(torch.randint(0, 2, (n, len(celeba.ATTRIBUTES)), generator=g).numpy(),
                         columns=list(celeba.ATTRIBUTES), index=[f"{i + 1:06d}.jpg" for i in range(n)])
    attrs[task.target], attrs[task.spurious] = y, a
    partition = np.where(np.arange(n) < n_train, 0, 2).astype(np.int64)
    identity = np.zeros(n, dtype=np.int64)
    for group in range(4):  # the i-th image of every group belongs to identity i
        identity[2 * y + a == group] = np.arange(int((2 * y + a == group).sum()))
    return {"x": _uint8_images(n, (3, task.image_size, task.image_size), g), "ids": list(attrs.index),
            "attrs": attrs, "partition": partition, "identity": identity, "folder": FOLDER,
            "data": _info(task, data_seed)}


def _waterbirds_loader(task: waterbirds.WaterbirdsTask, n_train: int, n_eval: int, g: torch.Generator,
                       data_seed: int):
    """`load_waterbirds`'s dict (uint8 images, y, place, split: train 0, then the evaluation split's code)."""
    n = n_train + n_eval
    y, a = _groups(n, g)
    split = np.where(np.arange(n) < n_train, 0, waterbirds.EVAL_SPLITS[task.eval_split]).astype(np.int64)
    return {"x": _uint8_images(n, (3, task.image_size, task.image_size), g), "y": y, "place": a, "split": split,
            "folder": FOLDER, "data": _info(task, data_seed)}


def _standin_loader(task: waterbirds.WaterbirdsTask, n_train: int, n_eval: int, g: torch.Generator,
                    data_seed: int):
    """`build_standin`'s dict: float32 images in [0, 1] (the stand-in is composited in float), y, a, train."""
    n = n_train + n_eval
    y, a = _groups(n, g)
    train = np.arange(n) < n_train
    return {"x": torch.rand((n, 3, task.image_size, task.image_size), generator=g), "y": y, "a": a,
            "donor": np.arange(n), "train": train, "table": pd.DataFrame({"y": y, "train": train.astype(int)}),
            "data": _info(task, data_seed)}


@dataclass(frozen=True)
class _Source:
    """Where a task kind loads its raw arrays (module, function name), what replaces them, and the task with the
    synthetic sizes (so the real build keeps all of them: no subset drops any)."""

    module: object
    loader: str
    make: Callable  # (task, n_train, n_eval, generator, data_seed) -> what `loader` returns
    sized: Callable[[TaskConfig, int, int], TaskConfig]


def _source(task: TaskConfig) -> _Source:
    """The `_Source` of `task` (ConfigError for a task kind this module does not know)."""
    kind = type(task)
    if kind is cifar.CIFARTask or kind is BorderCIFARTask:  # the border task builds its images with CIFARTask
        return _Source(cifar, "load_cifar_checked", lambda t, *rest: _cifar_loader(_images_of(t), *rest),
                       lambda t, n, m: t.replace(n_train=n, n_test=m))
    if kind is mnist.MNISTTask:
        return _Source(mnist, "load_mnist_checked", _mnist_loader, lambda t, n, m: t.replace(n_train=n, n_test=m))
    if kind is celeba.CelebATask:
        return _Source(celeba, "load_celeba", _celeba_loader, lambda t, n, m: t.replace(n_train=None))
    if kind is waterbirds.WaterbirdsTask:
        real = task.source == "waterbirds"
        return _Source(waterbirds, "load_waterbirds" if real else "build_standin",
                       _waterbirds_loader if real else _standin_loader, lambda t, n, m: t.replace(n_train=None))
    raise ConfigError(f"no synthetic data for {kind.__name__}; supported: CIFARTask, BorderCIFARTask, MNISTTask, "
                      f"CelebATask, WaterbirdsTask and the generated {', '.join(k.__name__ for k in GENERATED)}")


def _images_of(task: TaskConfig) -> cifar.CIFARTask:
    return task.image_task() if isinstance(task, BorderCIFARTask) else task


def synthetic_dataset(task: TaskConfig, seed: int, *, n_train: int = 256, n_eval: int = 256,
                      data_seed: int = 0) -> Dataset:
    """`task`'s Dataset for training seed `seed`, built by `task.build` on random raw arrays of its loader's format
    (see the module docstring): the splits, shapes, dtypes, codecs and per-member structure of the real one, at
    n_train training / n_eval evaluation examples. Generated tasks are built as they are (their own sizes)."""
    if isinstance(task, GENERATED):
        return task.build(seed)
    check_range("n_train", n_train, 1, None, integer=True)
    check_range("n_eval", n_eval, 1, None, integer=True)
    source = _source(task)
    sized = source.sized(task, n_train, n_eval)
    raw = source.make(sized, n_train, n_eval, torch.Generator().manual_seed(int(data_seed)), data_seed)
    # the loader answers with the raw arrays during this build only; the rest of `build` is the task's own code
    with mock.patch.object(source.module, source.loader, lambda *args, **kwargs: raw):
        return sized.build(seed)


def synthetic_members(task: TaskConfig, seeds: Sequence[int], *, n_train: int = 256, n_eval: int = 256,
                      data_seed: int = 0, device: str | torch.device = "cpu") -> Dataset:
    """The Dataset of K members (one per seed) on `device`, as the sweep stacks real ones (`stack_members`): shared
    images stay one copy, per-seed labels and border colours are stacked."""
    return stack_members([synthetic_dataset(task, s, n_train=n_train, n_eval=n_eval, data_seed=data_seed)
                          for s in seeds]).to(device)


@dataclass(frozen=True)
class SyntheticTask(TaskConfig):
    """`task` on synthetic data (`synthetic_dataset`) at n_train / n_eval examples: reads no file, so it has no
    data fingerprint (like any generated task); its config (kind "SyntheticTask", wrapping the real task's) is part
    of every run key, so a cache entry trained on it is never taken for one of the real data."""

    task: TaskConfig
    n_train: int = 256
    n_eval: int = 256
    data_seed: int = 0

    def validate(self) -> None:
        if not isinstance(self.task, TaskConfig) or isinstance(self.task, SyntheticTask):
            raise ConfigError(f"task={self.task!r} must be a real task's TaskConfig")
        if not isinstance(self.task, GENERATED):
            _source(self.task)  # ConfigError now for a task kind without synthetic data
        check_range("n_train", self.n_train, 1, None, integer=True)
        check_range("n_eval", self.n_eval, 1, None, integer=True)
        check_range("data_seed", self.data_seed, 0, None, integer=True)

    def build(self, seed: int) -> Dataset:
        return synthetic_dataset(self.task, seed, n_train=self.n_train, n_eval=self.n_eval, data_seed=self.data_seed)
