"""Squared parameter norms, total and per layer.

V(theta) = ||theta||^2 = sum_i theta_i^2 over *all* trainable parameters (biases and normalisation gains
included), as in the papers. For a batch of K members every parameter tensor has a leading member dimension and
every norm is a tensor of shape (K,).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable, Mapping

import torch


def layer_of(param_name: str) -> str:
    """Layer a parameter belongs to: its module path ('encoder.0.weight' -> 'encoder.0')."""
    return param_name.rsplit(".", 1)[0] if "." in param_name else param_name


def squared_norm(tensor: torch.Tensor, member_dim: bool = False) -> torch.Tensor:
    """||t||^2 as float64; with member_dim, one value per leading index (shape (K,))."""
    t = tensor.detach().to(torch.float64)
    if member_dim:
        return t.reshape(t.shape[0], -1).pow(2).sum(dim=1)
    return t.pow(2).sum()


def layer_squared_norms(named_params: Iterable[tuple[str, torch.Tensor]], member_dim: bool = False
                        ) -> "OrderedDict[str, torch.Tensor]":
    """Per-layer ||theta^(l)||^2 (weights + bias of the same module), in model order."""
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for name, p in named_params:
        layer = layer_of(name)
        value = squared_norm(p, member_dim)
        out[layer] = out[layer] + value if layer in out else value
    return out


def total_squared_norm(named_params: Iterable[tuple[str, torch.Tensor]], member_dim: bool = False) -> torch.Tensor:
    layers = layer_squared_norms(named_params, member_dim)
    return sum(layers.values()) if layers else torch.tensor(0.0, dtype=torch.float64)


def norm_columns(layer_norms: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Column names used in every training table: 'norm_sq' (total) and 'norm_sq:<layer>'."""
    cols = {f"norm_sq:{layer}": v for layer, v in layer_norms.items()}
    cols["norm_sq"] = sum(layer_norms.values())
    return cols
