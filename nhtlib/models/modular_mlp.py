"""The 2-layer MLP for modular arithmetic (the book's cpu-scale grokking model, shared/papers/nht.md §7.4).

Single model: one embedding table per operand (p × d_embed each, N(0, 1) init), the two embeddings concatenated
(2·d_embed = 256), Linear(256, hidden) + GELU, Linear(hidden, p); PyTorch default initialisation.

Member-batched (`BatchedModularMLP`): every parameter carries a leading member dim K. The first layer is computed
without materialising the concatenated embeddings: Linear(cat(E_a[a], E_b[b])) = (E_a W_a^T + b)[a] + (E_b W_b^T)[b]
with W = [W_a | W_b], i.e. the 2p rows of the two small products E W^T are computed once per step (2·p·d·hidden
multiply-adds per member instead of B·2d·hidden) and each example sums its two rows (one `embedding_bag`). Same function, same gradients
(to float rounding); `fused_embedding=False` uses the plain gather-then-matmul order (the benchmark compares both).

Parameter names give the per-layer norm columns: `embedding` (both tables), `hidden`, `head`.

Weight decay: the book trains this model with TrainConfig(decay="matrices"), which decays every tensor with ndim ≥ 2
once the member dim is removed: the two embedding tables (p × d) and both Linear weights; the biases are not
decayed. This is what "weight matrices only" means here — the embedding tables *are* weight matrices (an embedding
is a Linear layer on one-hot inputs) and the cpu calibration of nht.md §7.4 decays them too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from nhtlib.config import check_range
from nhtlib.models.base import ModelConfig, init_under_seed


class ModularMLP(nn.Module):
    """The single (un-batched) model: x (B, 2) long -> logits (B, p)."""

    def __init__(self, p: int, d_embed: int = 128, hidden: int = 256):
        super().__init__()
        self.embed_a = nn.Embedding(p, d_embed)
        self.embed_b = nn.Embedding(p, d_embed)
        self.hidden = nn.Linear(2 * d_embed, hidden)
        self.head = nn.Linear(hidden, p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.cat([self.embed_a(x[..., 0]), self.embed_b(x[..., 1])], dim=-1)
        return self.head(nn.functional.gelu(self.hidden(e)))


class ParameterGroup(nn.Module):
    """A named container of parameters (its name is the layer name of the norm columns)."""

    def __init__(self, **params: torch.Tensor):
        super().__init__()
        for name, value in params.items():
            setattr(self, name, nn.Parameter(value.detach().clone()))


def gather_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """table (K, n, d), idx (K, B) long -> table[k, idx[k]] of shape (K, B, d) (one flat embedding lookup)."""
    k, n, d = table.shape
    offsets = (torch.arange(k, device=idx.device) * n).view(k, 1)
    return nn.functional.embedding(idx + offsets, table.reshape(k * n, d))


class BatchedModularMLP(nn.Module):
    def __init__(self, singles: Sequence[ModularMLP], fused_embedding: bool = True):
        super().__init__()
        stack = lambda get: torch.stack([get(s).detach() for s in singles])  # noqa: E731
        self.embedding = ParameterGroup(a=stack(lambda s: s.embed_a.weight), b=stack(lambda s: s.embed_b.weight))
        self.hidden = ParameterGroup(weight=stack(lambda s: s.hidden.weight), bias=stack(lambda s: s.hidden.bias))
        self.head = ParameterGroup(weight=stack(lambda s: s.head.weight), bias=stack(lambda s: s.head.bias))
        self.fused_embedding = fused_embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (K, B, 2) long -> logits (K, B, p)."""
        return self._head(self._features(x))

    def features_and_outputs(self, x: torch.Tensor, initial: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(penultimate features (K, B, hidden), logits (K, B, p)) of x (K, B, 2): what D_LR reads
        (`nhtlib.analysis.metrics.features.extract`); the initial parameters are not kept (initial must be False)."""
        if initial:
            raise ValueError("BatchedModularMLP keeps no initial parameters (initial=True needs a StackedModel)")
        h = self._features(x)
        return h, self._head(h)

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.head.bias.unsqueeze(1), h, self.head.weight.transpose(1, 2))

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x[..., 0], x[..., 1]
        ea, eb = self.embedding.a, self.embedding.b
        d = ea.shape[-1]
        w = self.hidden.weight
        if self.fused_embedding:
            # rows of (E_a W_a^T + bias) and (E_b W_b^T), stacked into one (K·2p, hidden) table; each example sums
            # its two rows in one embedding_bag (gather + add in one kernel, and a scatter-add backward)
            k, p, _ = ea.shape
            proj = torch.cat([torch.baddbmm(self.hidden.bias.unsqueeze(1), ea, w[:, :, :d].transpose(1, 2)),
                              torch.bmm(eb, w[:, :, d:].transpose(1, 2))], dim=1)
            offsets = (torch.arange(k, device=x.device) * 2 * p).view(k, 1, 1)
            rows = torch.stack([a, b + p], dim=-1) + offsets  # (K, B, 2)
            pre = nn.functional.embedding_bag(rows.reshape(-1, 2), proj.reshape(k * 2 * p, -1), mode="sum")
            pre = pre.view(k, a.shape[1], -1)
        else:
            e = torch.cat([gather_rows(ea, a), gather_rows(eb, b)], dim=-1)
            pre = torch.baddbmm(self.hidden.bias.unsqueeze(1), e, w.transpose(1, 2))
        return nn.functional.gelu(pre)


@dataclass(frozen=True)
class ModularMLPConfig(ModelConfig):
    """2-layer MLP on two token embeddings. d_embed: per-operand embedding width (128); hidden: width of the hidden
    layer (256); fused_embedding: compute the first layer via the p-row products (same function, faster)."""

    d_embed: int = 128
    hidden: int = 256
    fused_embedding: bool = True

    def validate(self) -> None:
        check_range("d_embed", self.d_embed, 1, None, integer=True)
        check_range("hidden", self.hidden, 1, None, integer=True)

    def single(self, p: int) -> ModularMLP:
        return ModularMLP(p, self.d_embed, self.hidden)

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> BatchedModularMLP:
        if tuple(input_shape) != (2,):
            raise ValueError(f"the modular MLP takes token pairs (input shape (2,)); got {tuple(input_shape)}")
        singles = [init_under_seed(s, lambda: self.single(n_classes)) for s in seeds]
        return BatchedModularMLP(singles, self.fused_embedding)
