from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn

from nhtlib.config import Config


class ModelConfig(Config):
    """Builds a member-batched model: `build(input_shape, n_classes, seeds) -> nn.Module`."""

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> nn.Module:
        raise NotImplementedError


def init_under_seed(seed: int, make: Callable[[], nn.Module]) -> nn.Module:
    """Build a module with the global RNG seeded to `seed`, without disturbing the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()
