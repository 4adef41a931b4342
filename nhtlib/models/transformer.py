"""The companion paper's 1-layer Transformer for modular arithmetic (NSDL `Model`, shared/papers/nht.md §3.1).

Single model (`ModularTransformer`, exactly NSDL's code): token embedding Embedding(p, d) shared by both positions +
learned positional embedding Embedding(2, d), one post-LN `nn.TransformerEncoderLayer(d, heads, ffn, dropout=0,
activation="gelu")`, a final LayerNorm(d), and a Linear(d, p) head on the last position; PyTorch default init
(embeddings N(0, 1)). At p = 97 it has 223,713 parameters.

Member-batched (`BatchedModularTransformer`): hand-batched with bmm over the member dim K (parameters (K, ...)).
Because only the last position reaches the head, the queries, attention output, the first residual LayerNorm, the
feed-forward block and the final LayerNorm are computed for the last position only (keys and values for both):
the same function as the single model, at about half the FLOPs.

Parameter names give the per-layer norm columns: `embedding` (token + position tables), `attention` (in/out
projections), `ffn` (the two feed-forward Linears), `norms` (the three LayerNorms' gains and biases), `head`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from nhtlib.config import check_range
from nhtlib.models.base import ModelConfig, init_under_seed
from nhtlib.models.modular_mlp import ParameterGroup, gather_rows


class ModularTransformer(nn.Module):
    """NSDL's model: x (B, 2) long -> logits (B, p)."""

    def __init__(self, p: int, d: int = 128, heads: int = 4, ff: int = 512):
        super().__init__()
        self.tok = nn.Embedding(p, d)
        self.pos = nn.Embedding(2, d)
        enc = nn.TransformerEncoderLayer(d, heads, ff, 0.0, activation="gelu", batch_first=True)
        self.tf = nn.TransformerEncoder(enc, 1, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok(x) + self.pos(torch.arange(2, device=x.device).unsqueeze(0).expand(x.size(0), -1))
        return self.head(self.norm(self.tf(h)[:, -1, :]))


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dim with per-member affine: x (K, ..., d), weight/bias (K, d)."""
    shape = (weight.shape[0],) + (1,) * (x.dim() - 2) + (weight.shape[1],)
    return nn.functional.layer_norm(x, x.shape[-1:], eps=eps) * weight.view(shape) + bias.view(shape)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x (K, B, in) @ weight (K, out, in)^T + bias (K, out)."""
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class BatchedModularTransformer(nn.Module):
    def __init__(self, singles: Sequence[ModularTransformer]):
        super().__init__()
        stack = lambda get: torch.stack([get(s).detach() for s in singles])  # noqa: E731
        layer = lambda s: s.tf.layers[0]  # noqa: E731
        first = layer(singles[0])
        self.heads = first.self_attn.num_heads
        self.eps = first.norm1.eps
        self.embedding = ParameterGroup(token=stack(lambda s: s.tok.weight), position=stack(lambda s: s.pos.weight))
        self.attention = ParameterGroup(
            in_weight=stack(lambda s: layer(s).self_attn.in_proj_weight),
            in_bias=stack(lambda s: layer(s).self_attn.in_proj_bias),
            out_weight=stack(lambda s: layer(s).self_attn.out_proj.weight),
            out_bias=stack(lambda s: layer(s).self_attn.out_proj.bias))
        self.ffn = ParameterGroup(w1=stack(lambda s: layer(s).linear1.weight), b1=stack(lambda s: layer(s).linear1.bias),
                          w2=stack(lambda s: layer(s).linear2.weight), b2=stack(lambda s: layer(s).linear2.bias))
        self.norms = ParameterGroup(
            ln1_weight=stack(lambda s: layer(s).norm1.weight), ln1_bias=stack(lambda s: layer(s).norm1.bias),
            ln2_weight=stack(lambda s: layer(s).norm2.weight), ln2_bias=stack(lambda s: layer(s).norm2.bias),
            final_weight=stack(lambda s: s.norm.weight), final_bias=stack(lambda s: s.norm.bias))
        self.head = ParameterGroup(weight=stack(lambda s: s.head.weight), bias=stack(lambda s: s.head.bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (K, B, 2) long -> logits (K, B, p)."""
        return _linear(self.features(x), self.head.weight, self.head.bias)

    def features_and_outputs(self, x: torch.Tensor, initial: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """The penultimate features Phi (K, B, d) (the residual stream at the last position after the final
        LayerNorm, the head's input) and the logits (K, B, p): what the richness probe reads. The initial
        parameters are not kept (initial=True raises ValueError)."""
        if initial:
            raise ValueError("the modular Transformer does not keep its initial parameters")
        phi = self.features(x)
        return phi, _linear(phi, self.head.weight, self.head.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """x (K, B, 2) long -> the final LayerNorm's output at the last position (K, B, d)."""
        k, b, t = x.shape
        emb, att, ffn, nrm = self.embedding, self.attention, self.ffn, self.norms
        d = emb.token.shape[-1]
        hd = d // self.heads
        h = gather_rows(emb.token, x.reshape(k, b * t)).view(k, b, t, d) + emb.position.unsqueeze(1)
        w_in, b_in = att.in_weight, att.in_bias
        # keys and values for every position, the query for the last one only
        kv = _linear(h.reshape(k, b * t, d), w_in[:, d:], b_in[:, d:]).view(k, b, t, 2, self.heads, hd)
        last = h[:, :, -1]  # (K, B, d)
        q = _linear(last, w_in[:, :d], b_in[:, :d]).view(k, b, self.heads, hd)
        scores = torch.einsum("kbhe,kbthe->kbht", q, kv[..., 0, :, :]) / math.sqrt(hd)
        attn = torch.einsum("kbht,kbthe->kbhe", scores.softmax(-1), kv[..., 1, :, :]).reshape(k, b, d)
        y = _layer_norm(last + _linear(attn, att.out_weight, att.out_bias), nrm.ln1_weight, nrm.ln1_bias, self.eps)
        ff = _linear(nn.functional.gelu(_linear(y, ffn.w1, ffn.b1)), ffn.w2, ffn.b2)
        y = _layer_norm(y + ff, nrm.ln2_weight, nrm.ln2_bias, self.eps)
        return _layer_norm(y, nrm.final_weight, nrm.final_bias, self.eps)


@dataclass(frozen=True)
class ModularTransformerConfig(ModelConfig):
    """NSDL's 1-layer post-LN Transformer: d_model 128, 4 heads, FFN 512, GELU, no dropout, final LayerNorm,
    linear head on the last position. The book trains it like NSDL: AdamW on all parameters (decay="all"),
    batch 512 sampled with replacement."""

    d_model: int = 128
    heads: int = 4
    ffn: int = 512

    def validate(self) -> None:
        check_range("d_model", self.d_model, 1, None, integer=True)
        check_range("heads", self.heads, 1, None, integer=True)
        check_range("ffn", self.ffn, 1, None, integer=True)
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by heads={self.heads}")

    def single(self, p: int) -> ModularTransformer:
        return ModularTransformer(p, self.d_model, self.heads, self.ffn)

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> BatchedModularTransformer:
        if tuple(input_shape) != (2,):
            raise ValueError(f"the modular Transformer takes token pairs (input shape (2,)); got {tuple(input_shape)}")
        singles = [init_under_seed(s, lambda: self.single(n_classes)) for s in seeds]
        return BatchedModularTransformer(singles)
