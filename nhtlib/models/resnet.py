"""ResNet18 with the CIFAR stem (3x3 conv, stride 1, no max-pool), a normalisation option and a width multiplier.

Stages of 2 BasicBlocks with 64, 128, 256, 512 channels (times `width`, at least 1), strides 1, 2, 2, 2; global
average pooling; one linear head (penultimate width p = 512 * width). `norm`: "batch" (BatchNorm2d), "group"
(GroupNorm with min(32, max(1, channels // 4)) groups) or "none" (identity; the convolutions then carry a bias).
PyTorch's default init.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nhtlib.config import check_choice, check_range
from nhtlib.models.stacked import StackedConfig
from nhtlib.models.vgg import scaled

NORMS = ("batch", "group", "none")


def make_norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "group":
        return nn.GroupNorm(min(32, max(1, channels // 4)), channels)
    return nn.Identity()


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, norm: str):
        super().__init__()
        bias = norm == "none"
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=bias)
        self.norm1 = make_norm(norm, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=bias)
        self.norm2 = make_norm(norm, c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=bias), make_norm(norm, c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18Net(nn.Module):
    def __init__(self, in_channels: int, n_classes: int, width: float, norm: str):
        super().__init__()
        c = scaled(64, width)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, c, 3, 1, 1, bias=norm == "none"), make_norm(norm, c),
                                   nn.ReLU()]
        for i, channels in enumerate((64, 128, 256, 512)):
            c_out = scaled(channels, width)
            for j in range(2):
                layers.append(BasicBlock(c, c_out, 2 if (i > 0 and j == 0) else 1, norm))
                c = c_out
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@dataclass(frozen=True)
class ResNetConfig(StackedConfig):
    """CIFAR ResNet18. norm: "batch" | "group" | "none". width: channel multiplier (1 = 64..512)."""

    norm: str = "batch"
    width: float = 1.0

    def validate(self) -> None:
        super().validate()
        check_choice("norm", self.norm, NORMS)
        check_range("width", self.width, 0.0, None, low_inclusive=False)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        return ResNet18Net(input_shape[0], n_classes, self.width, self.norm)
