"""Modular arithmetic, the grokking task of chapter 2 (the companion paper NSDL, shared/papers/nht.md §3.1).

All p² ordered pairs (a, b) ∈ {0..p-1}² are labelled c = (a ∘ b) mod p for ∘ ∈ {+, −, ×}. A seeded shuffle
(Python's `random.Random(seed)`, as in the NSDL code) splits them into a training set of round(train_frac · p²)
pairs and a test (validation) set of the rest; inputs are token pairs x = [a, b] (shape (N, 2), long), there is
no "=" token. Every seed draws its own split, so a batch of seeds gets per-member splits (`stack_members`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from nhtlib.config import check_choice, check_range
from nhtlib.data import Dataset, Split, TaskConfig

OPERATIONS = ("+", "-", "*")


def modular_labels(a: torch.Tensor, b: torch.Tensor, p: int, op: str = "+") -> torch.Tensor:
    """(a ∘ b) mod p, elementwise, for ∘ in OPERATIONS (Python-style mod: the result is in [0, p))."""
    check_choice("op", op, OPERATIONS)
    if op == "+":
        return (a + b) % p
    if op == "-":
        return (a - b) % p
    return (a * b) % p


def all_pairs(p: int) -> torch.Tensor:
    """Every ordered pair (a, b), row r = (r // p, r % p): shape (p², 2), long."""
    r = torch.arange(p * p)
    return torch.stack([r // p, r % p], dim=1)


@dataclass(frozen=True)
class ModularTask(TaskConfig):
    """(a ∘ b) mod p with a seeded train/test split of all p² pairs.

    p: the modulus (NSDL: 97; the book's cpu scale: 59). op: '+', '-' or '*'. train_frac: fraction of the p² pairs
    in the training split (NSDL: 0.5; Power et al. and the book's cpu scale: 0.4).
    """

    p: int = 97
    op: str = "+"
    train_frac: float = 0.5

    def validate(self) -> None:
        check_range("p", self.p, 2, None, integer=True)
        check_choice("op", self.op, OPERATIONS)
        check_range("train_frac", self.train_frac, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        if not 1 <= self.n_train < self.p ** 2:
            raise ValueError(f"train_frac={self.train_frac} leaves an empty train or test split at p={self.p}")

    @property
    def n_train(self) -> int:
        return int(self.train_frac * self.p ** 2)  # floor, as NSDL's int(len(pairs) * frac)

    def split_indices(self, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Indices into all_pairs(p) of the train and test pairs for this seed (disjoint, together all p²)."""
        order = list(range(self.p ** 2))
        random.Random(int(seed)).shuffle(order)
        order_t = torch.tensor(order)
        return order_t[:self.n_train], order_t[self.n_train:]

    def build(self, seed: int) -> Dataset:
        pairs = all_pairs(self.p)
        labels = modular_labels(pairs[:, 0], pairs[:, 1], self.p, self.op)
        train, test = self.split_indices(seed)
        return Dataset({"train": Split(pairs[train], labels[train]), "test": Split(pairs[test], labels[test])},
                       n_classes=self.p, meta={"chance": 1.0 / self.p, "p": self.p, "op": self.op})
