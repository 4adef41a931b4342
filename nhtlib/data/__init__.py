"""Data sets as tensors: every task builds a `Dataset` of named splits.

A split holds inputs x and integer labels y. They are either *shared* by all K members of a batch
(x: (N, ...), y: (N,)) or *per member* (x: (K, N, ...), y: (K, N)), e.g. when each seed draws its own data.
The split called "train" is the one optimised; every split is evaluated at each log step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..config import Config


@dataclass
class Split:
    x: torch.Tensor
    y: torch.Tensor
    per_member: bool = False

    def __post_init__(self) -> None:
        n_lead = 2 if self.per_member else 1
        if self.y.dim() != n_lead or self.x.shape[:n_lead] != self.y.shape:
            raise ValueError(f"split shapes do not match: x {tuple(self.x.shape)}, y {tuple(self.y.shape)}, "
                             f"per_member={self.per_member}")

    @property
    def size(self) -> int:
        return self.y.shape[-1]

    def to(self, device) -> "Split":
        return Split(self.x.to(device), self.y.to(device), self.per_member)


@dataclass
class Dataset:
    splits: dict[str, Split]
    n_classes: int
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "train" not in self.splits:
            raise ValueError(f"a Dataset needs a 'train' split; got {sorted(self.splits)}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        split = self.splits["train"]
        return tuple(split.x.shape[2:] if split.per_member else split.x.shape[1:])

    def to(self, device) -> "Dataset":
        return Dataset({k: v.to(device) for k, v in self.splits.items()}, self.n_classes, self.meta)


def stack_members(datasets: list[Dataset]) -> Dataset:
    """One Dataset for K members from K per-seed Datasets (shared splits stay shared when identical)."""
    first = datasets[0]
    splits = {}
    for name, split in first.splits.items():
        parts = [d.splits[name] for d in datasets]
        if len(parts) > 1 and all(p.x.shape == split.x.shape for p in parts) and all(
                torch.equal(p.x, split.x) and torch.equal(p.y, split.y) for p in parts[1:]) and not split.per_member:
            splits[name] = split
        else:
            splits[name] = Split(torch.stack([p.x for p in parts]), torch.stack([p.y for p in parts]), per_member=True)
    return Dataset(splits, first.n_classes, first.meta)


class TaskConfig(Config):
    """A task builds its Dataset from a seed: `build(seed) -> Dataset` (data are generated on the CPU)."""

    def build(self, seed: int) -> Dataset:  # pragma: no cover - interface
        raise NotImplementedError

    def data_fingerprint(self) -> str | None:
        """A hash of the files this task reads (None: the data are generated in code from the config alone).

        It is part of every run's identity in the run cache, so a run trained on one copy of a data set is never
        served for another. Raises the loader's FileNotFoundError when the data are not where the task looks.
        File-reading tasks compute it with `nhtlib.data.files` (content hash, memoised by stat signature)."""
        return None

# one module per data set (grouped: the layout shared by the group-labelled ones)
from . import borders, celeba, cifar, files, grouped, mnist, modular, toy, waterbirds  # noqa: E402,F401
