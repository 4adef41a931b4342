"""Multi-layer perceptron for K members at once (batched matmuls, no vmap)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Sequence

import torch
from torch import nn

from nhtlib.config import check_choice, check_range
from nhtlib.models.base import ModelConfig, init_under_seed

ACTIVATIONS = {"relu": nn.functional.relu, "gelu": nn.functional.gelu, "tanh": torch.tanh,
               "identity": lambda x: x}


class BatchedLinear(nn.Module):
    """K independent Linear layers: weight (K, out, in), bias (K, out); x (K, B, in) -> (K, B, out)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.bias = nn.Parameter(bias) if bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bias is None:
            return torch.bmm(x, self.weight.transpose(1, 2))
        return torch.baddbmm(self.bias.unsqueeze(1), x, self.weight.transpose(1, 2))


class BatchedMLP(nn.Module):
    """Layers named 'input', 'hidden1', ..., 'output' (the per-layer norm columns use these names)."""

    def __init__(self, singles: list[nn.Sequential], activation: str):
        super().__init__()
        names = layer_names(sum(isinstance(m, nn.Linear) for m in singles[0]))
        linears = [[m for m in s if isinstance(m, nn.Linear)] for s in singles]
        self.layers = nn.ModuleDict()
        for i, name in enumerate(names):
            w = torch.stack([lin[i].weight.detach() for lin in linears])
            b = torch.stack([lin[i].bias.detach() for lin in linears]) if linears[0][i].bias is not None else None
            self.layers[name] = BatchedLinear(w.clone(), None if b is None else b.clone())
        self.activation = activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(2)
        act = ACTIVATIONS[self.activation]
        layers = list(self.layers.values())
        for layer in layers[:-1]:
            x = act(layer(x))
        return layers[-1](x)


def layer_names(n_linear: int) -> list[str]:
    return ["input"] + [f"hidden{i}" for i in range(1, n_linear - 1)] + ["output"] if n_linear > 1 else ["output"]


@dataclass(frozen=True)
class MLPConfig(ModelConfig):
    """MLP with PyTorch's default Linear init; `output_init_scale` multiplies the output layer's initial weights
    and bias (a large value puts the network in the lazy regime, cf. Chizat et al. 2019). It changes only the
    initial weights, so members of different scales train in one batch (`ModelConfig.INIT_ONLY`)."""

    INIT_ONLY = ("output_init_scale",)

    hidden: tuple[int, ...] = (64,)
    activation: str = "relu"
    bias: bool = True
    output_init_scale: float = 1.0

    def validate(self) -> None:
        for i, h in enumerate(self.hidden):
            check_range(f"hidden[{i}]", h, 1, None, integer=True)
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        check_range("output_init_scale", self.output_init_scale, 0.0, None, low_inclusive=False)

    def single(self, in_features: int, n_classes: int) -> nn.Sequential:
        widths = [in_features, *self.hidden, n_classes]
        mods: list[nn.Module] = []
        for i in range(len(widths) - 1):
            mods.append(nn.Linear(widths[i], widths[i + 1], bias=self.bias))
            if i < len(widths) - 2:
                mods.append(nn.ReLU())  # placeholder; BatchedMLP applies self.activation
        with torch.no_grad():
            mods[-1].weight.mul_(self.output_init_scale)
            if mods[-1].bias is not None:
                mods[-1].bias.mul_(self.output_init_scale)
        return nn.Sequential(*mods)

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> BatchedMLP:
        return self.build_members(input_shape, n_classes, [(self, seed) for seed in seeds])

    def build_members(self, input_shape: tuple[int, ...], n_classes: int,
                      members: Sequence[tuple[MLPConfig, int]]) -> BatchedMLP:
        """Member k: the single MLP of its own config (its own output_init_scale) under its own seed."""
        self.check_members([config for config, _ in members])
        in_features = math.prod(input_shape)
        singles = [init_under_seed(seed, partial(config.single, in_features, n_classes)) for config, seed in members]
        return BatchedMLP(singles, self.activation)
