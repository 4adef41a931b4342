"""Optimisers for a batch of K independent members, each with its own learning rate and weight decay.

Every parameter tensor carries a leading member dimension K; lr and weight_decay are tensors of shape (K,).
The update rules are those of PyTorch, element for element, so member k trained here equals the same model trained
alone with torch.optim (tests check this):

* AdamW (decoupled decay): theta <- theta * (1 - lr*wd); m, v moments; theta <- theta - lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
* SGD with L2:             g <- g + wd*theta; optional momentum buffer (dampening 0); theta <- theta - lr*g
"""
from __future__ import annotations

import math
from typing import Sequence

import torch


def _per_member(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape (K,) to (K, 1, 1, ...) so it broadcasts against a parameter of shape (K, ...)."""
    return values.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))


class BatchedOptimizer:
    def __init__(self, params: Sequence[torch.nn.Parameter], lr: torch.Tensor, weight_decay: torch.Tensor,
                 decay_mask: Sequence[bool]):
        self.params = list(params)
        self.lr = lr
        self.weight_decay = weight_decay
        self.decay_mask = list(decay_mask)
        if len(self.decay_mask) != len(self.params):
            raise ValueError("decay_mask must have one entry per parameter")
        self.step_count = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError


class BatchedAdamW(BatchedOptimizer):
    def __init__(self, params, lr, weight_decay, decay_mask, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr, weight_decay, decay_mask)
        self.betas, self.eps = betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        beta1, beta2 = self.betas
        bc1 = 1 - beta1 ** self.step_count
        bc2_sqrt = math.sqrt(1 - beta2 ** self.step_count)
        for p, m, v, decays in zip(self.params, self.exp_avg, self.exp_avg_sq, self.decay_mask):
            if p.grad is None:
                continue
            lr = _per_member(self.lr * lr_factor, p)
            if decays:
                p.mul_(1 - lr * _per_member(self.weight_decay, p))
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_((lr / bc1) * (m / denom))

    def state_dict(self) -> dict:
        return {"step": self.step_count, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            dst.copy_(src)


class BatchedSGD(BatchedOptimizer):
    def __init__(self, params, lr, weight_decay, decay_mask, momentum=0.0):
        super().__init__(params, lr, weight_decay, decay_mask)
        self.momentum = momentum
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        for i, (p, decays) in enumerate(zip(self.params, self.decay_mask)):
            if p.grad is None:
                continue
            g = p.grad
            if decays:
                g = g + _per_member(self.weight_decay, p) * p
            if self.momentum:
                if self.buffers[i] is None:
                    self.buffers[i] = g.clone()
                else:
                    self.buffers[i].mul_(self.momentum).add_(g)
                g = self.buffers[i]
            p.sub_(_per_member(self.lr * lr_factor, p) * g)

    def state_dict(self) -> dict:
        return {"step": self.step_count, "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        self.buffers = [None if b is None else b.clone() for b in state["buffers"]]


def lr_factor(schedule: str, step: int, total_steps: int) -> float:
    """Multiplier of the base lr at (0-based) optimiser step `step`: constant, or cosine annealing to 0."""
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * step / total_steps))
    raise ValueError(f"lr_schedule={schedule!r}; choose 'constant' or 'cosine'")
