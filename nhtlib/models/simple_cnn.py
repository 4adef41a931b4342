"""The NHT paper's SimpleCNN: six bias-free 3x3 convolutions 3->32->32->64->64->128->128, global pooling and a
linear head, member-batched natively with grouped convolutions.

Only the widths and the parameter count are published (287,850 for 10 classes, 286,818 for 2; shared/papers/nht.md
§3.2); the rest of the layout is the book's default (§7.2): [conv3x3 (padding 1, no bias) -> ReLU] x 2 -> MaxPool2
-> x 2 -> MaxPool2 -> x 2 -> global *average* pool -> Linear(128, C) (with bias); no normalisation; PyTorch's default
init. Pooling does not change the parameter count, so the layout is free for the count to match.

`SimpleCNNNet` is the single PyTorch model (input (B, C_in, H, W) -> logits (B, C)). `GroupedSimpleCNN` holds K of
them with parameters stacked along a leading member dimension (conv weights (K, out, in, 3, 3), head (K, C, 128))
and runs all K at once: the K members' channels are stacked and each convolution is one `conv2d(groups=K)`. Measured
on 2 shared CPU cores (16 x 16 inputs, batch 128, K = 8) it trains about as fast as the torch.func wrapper
(`StackedSimpleCNNConfig`, 237 vs 247 images/s), so it is no speed-up; it keeps the layer names flat. On a CPU the
stacked activations are laid out channels-last (memory order B, H, W, K*C): oneDNN's grouped convolution is faster
there (`benchmarks/bench_channels_last.py`, fp32 matmul ≈ 310 GFLOP/s: a training step of the half-width model,
K = 63 members, 1.25-1.39x at chapter 3's 16 x 16 px and batch 64, 1.3x at chapter 4's 24 x 24 px and batch 32; the
logits agree to about 1e-8). Member k is initialised exactly like `SimpleCNNNet` built
under `torch.manual_seed(seed_k)`. Layers are named conv1..conv6 and head (the per-layer norm columns
`norm_sq:conv1` ... `norm_sq:head`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from nhtlib.config import check_range
from nhtlib.models.base import ModelConfig, init_under_seed
from nhtlib.models.stacked import StackedConfig

WIDTHS = (32, 32, 64, 64, 128, 128)
POOL_AFTER = (2, 4)  # max-pool (2x2) after conv2 and conv4
CONV_NAMES = tuple(f"conv{i}" for i in range(1, 7))


def _pool(x: torch.Tensor) -> torch.Tensor:
    return nn.functional.max_pool2d(x, 2) if min(x.shape[-2:]) >= 2 else x


class SimpleCNNNet(nn.Module):
    """One SimpleCNN; `width` multiplies the channel counts (1 = the paper's 287,850-parameter model)."""

    def __init__(self, in_channels: int, n_classes: int, width: float = 1.0):
        super().__init__()
        c = in_channels
        for name, w in zip(CONV_NAMES, WIDTHS):
            c_out = max(1, int(round(w * width)))
            setattr(self, name, nn.Conv2d(c, c_out, 3, padding=1, bias=False))
            c = c_out
        self.head = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, name in enumerate(CONV_NAMES, start=1):
            x = torch.relu(getattr(self, name)(x))
            if i in POOL_AFTER:
                x = _pool(x)
        return self.head(x.mean(dim=(-2, -1)))


class BatchedConv(nn.Module):
    """K bias-free 3x3 convolutions: weight (K, out, in, 3, 3); x (B, K*in, H, W) -> (B, K*out, H, W)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, c_out = self.weight.shape[:2]
        return nn.functional.conv2d(x, self.weight.reshape(k * c_out, *self.weight.shape[2:]), padding=1, groups=k)


class GroupedSimpleCNN(nn.Module):
    """K SimpleCNNs at once: (K, B, C_in, H, W) -> (K, B, n_classes) with grouped convolutions."""

    def __init__(self, singles: Sequence[SimpleCNNNet]):
        super().__init__()
        for name in CONV_NAMES:
            setattr(self, name, BatchedConv(torch.stack([getattr(s, name).weight.detach() for s in singles]).clone()))
        from nhtlib.models.mlp import BatchedLinear

        self.head = BatchedLinear(torch.stack([s.head.weight.detach() for s in singles]).clone(),
                                  torch.stack([s.head.bias.detach() for s in singles]).clone())
        # the activations' layout: None = channels-last on a CPU (measured faster there, see the module docstring),
        # contiguous on CUDA (not measured there); True / False force one (the benchmark times both)
        self.channels_last: bool | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, b, c, height, width = x.shape
        channels_last = x.device.type == "cpu" if self.channels_last is None else self.channels_last
        if channels_last:
            # memory order (B, H, W, K, C): the logical (B, K*C, H, W) tensor is channels-last in one copy, and the
            # convolutions, ReLUs and max-pools keep that layout
            h = x.permute(1, 3, 4, 0, 2).reshape(b, height, width, k * c).permute(0, 3, 1, 2)
        else:
            h = x.transpose(0, 1).reshape(b, k * c, height, width)  # members' channels side by side
        for i, name in enumerate(CONV_NAMES, start=1):
            h = torch.relu(getattr(self, name)(h))
            if i in POOL_AFTER:
                h = _pool(h)
        feats = h.mean(dim=(-2, -1)).view(b, k, -1).transpose(0, 1)  # (K, B, 128)
        return self.head(feats)


@dataclass(frozen=True)
class SimpleCNNConfig(ModelConfig):
    """The paper's SimpleCNN (see the module docstring), member-batched with grouped convolutions."""

    width: float = 1.0

    def validate(self) -> None:
        check_range("width", self.width, 0.0, None, low_inclusive=False)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> SimpleCNNNet:
        return SimpleCNNNet(input_shape[0], n_classes, self.width)

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> GroupedSimpleCNN:
        singles = [init_under_seed(s, lambda: self.single(tuple(input_shape), n_classes)) for s in seeds]
        return GroupedSimpleCNN(singles)


@dataclass(frozen=True)
class StackedSimpleCNNConfig(StackedConfig):
    """The same SimpleCNN through the generic torch.func wrapper (`nhtlib.models.stacked`), for comparison and for
    the wrapper's extras (features, centred output scaling, head-only training)."""

    width: float = 1.0

    def validate(self) -> None:
        super().validate()
        check_range("width", self.width, 0.0, None, low_inclusive=False)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> SimpleCNNNet:
        return SimpleCNNNet(input_shape[0], n_classes, self.width)
