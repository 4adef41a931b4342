"""The toy task of chapter 1: sparse parity on random sign vectors.

Inputs x in {-1, +1}^n_bits, label y = 1 if x_1 * x_2 * ... * x_k = +1 else 0 (k = `relevant_bits`; k = 2 is
XOR). The training set is small (n_train points), the test set fresh points from the same distribution.

Two interpolants of the training set exist (chapter 1 explains why):

* a *structured* one: a handful of hidden units compute the parity of the k relevant bits — small ||theta||^2,
  perfect test accuracy;
* a *memorising* (shortcut) one: a kernel-like fit of the n_train points using all n_bits directions, as a network
  in the lazy regime finds it — large ||theta||^2, test accuracy near chance.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from nhtlib.config import check_range
from nhtlib.data import Dataset, Split, TaskConfig


@dataclass(frozen=True)
class SparseParityTask(TaskConfig):
    n_bits: int = 40
    relevant_bits: int = 2
    n_train: int = 300
    n_test: int = 2000

    def validate(self) -> None:
        check_range("n_bits", self.n_bits, 1, None, integer=True)
        check_range("relevant_bits", self.relevant_bits, 1, self.n_bits, integer=True)
        check_range("n_train", self.n_train, 1, None, integer=True)
        check_range("n_test", self.n_test, 1, None, integer=True)

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randint(0, 2, (n, self.n_bits), generator=generator).float() * 2 - 1
        y = (x[:, : self.relevant_bits].prod(dim=1) > 0).long()
        return x, y

    def build(self, seed: int) -> Dataset:
        g = torch.Generator().manual_seed(int(seed))
        x_train, y_train = self.sample(self.n_train, g)
        x_test, y_test = self.sample(self.n_test, g)
        return Dataset({"train": Split(x_train, y_train), "test": Split(x_test, y_test)}, n_classes=2,
                       meta={"chance": 0.5})
