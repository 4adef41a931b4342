"""VGG-16 for CIFAR-size images, with or without BatchNorm, and a width multiplier for CPU-scale runs.

The CIFAR variant: 13 3x3 convolutions (64, 64, M, 128, 128, M, 256 x3, M, 512 x3, M, 512 x3, M; channel counts
times `width`, at least 1), global average pooling, and one linear head, so the penultimate width is p = 512 * width.
A max-pool is skipped once the feature map is 1 x 1 (small images). Initialisation as torchvision's VGG: convolutions
Kaiming-normal (fan_out, ReLU gain) with zero bias, BatchNorm weight 1 / bias 0, the head N(0, 0.01^2) with zero
bias. (PyTorch's default init shrinks the signal through 13 layers: without BatchNorm the CPU-scale net then stays
at chance.)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from nhtlib.config import check_range
from nhtlib.models.stacked import StackedConfig

VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def scaled(channels: int, width: float) -> int:
    return max(1, int(round(channels * width)))


class VGGNet(nn.Module):
    def __init__(self, in_channels: int, image_size: int, n_classes: int, width: float, batchnorm: bool):
        super().__init__()
        layers: list[nn.Module] = []
        size, c_in = image_size, in_channels
        for item in VGG16:
            if item == "M":
                if size > 1:
                    layers.append(nn.MaxPool2d(2))
                    size //= 2
                continue
            c_out = scaled(item, width)
            layers.append(nn.Conv2d(c_in, c_out, 3, padding=1, bias=not batchnorm))
            if batchnorm:
                layers.append(nn.BatchNorm2d(c_out))
            layers.append(nn.ReLU())
            c_in = c_out
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(c_in, n_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.head.weight, 0, 0.01)
        nn.init.zeros_(self.head.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@dataclass(frozen=True)
class VGGConfig(StackedConfig):
    """VGG-16 (CIFAR form). batchnorm: BN after every convolution. width: channel multiplier (1 = 64..512)."""

    batchnorm: bool = False
    width: float = 1.0

    def validate(self) -> None:
        super().validate()
        check_range("width", self.width, 0.0, None, low_inclusive=False)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        return VGGNet(input_shape[0], input_shape[-1], n_classes, self.width, self.batchnorm)
