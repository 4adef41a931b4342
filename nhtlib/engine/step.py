"""The one training step of the book: the loop (`nhtlib.engine.train`), the compute planner's timing
(`nhtlib.engine.plan.synthetic_step`) and `benchmarks/gpu_check.py` all take their steps through `training_step`.

A step of K batched members: the forward under the precision's autocast (`nhtlib.engine.precision`), the mean
cross-entropy per member in fp32 (`member_loss`), the sum over members (members share no parameters, so
d(sum)/d(θ_k) = d(loss_k)/d(θ_k)), backward outside autocast (PyTorch's advice), and the optimiser's step with each
member's η and λ (`make_optimizer`).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from nhtlib.config import TrainConfig
from nhtlib.engine.optim import BatchedAdamW, BatchedSGD, StepLayout
from nhtlib.engine.precision import forward_autocast


def make_optimizer(model: nn.Module, cfg: TrainConfig, lrs: torch.Tensor, wds: torch.Tensor,
                   layout: StepLayout | None = None):
    """The batched optimiser of `cfg` over the model's parameters, each member with its η (lrs, (K,)) and λ (wds,
    (K,)). layout: how a step walks the parameters (`nhtlib.engine.optim.StepLayout`; None: the device's own, what
    training uses; the planner passes CUDA's to count a GPU step's launches on the CPU)."""
    params = [p for p in model.parameters() if p.requires_grad]
    # "matrices": decay only weight matrices / conv kernels (ndim >= 2 once the member dim is removed)
    mask = [True if cfg.decay == "all" else p.dim() - 1 >= 2 for p in params]
    if cfg.optimizer == "adamw":
        return BatchedAdamW(params, lrs, wds, mask, betas=tuple(cfg.betas), eps=cfg.eps, layout=layout)
    return BatchedSGD(params, lrs, wds, mask, momentum=cfg.momentum, layout=layout)


def member_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy per member: logits (K, B, C), y (K, B) -> (K,), always in fp32 (bf16 logits are cast up
    first: a bf16 log-softmax would round the loss to 8 significant bits)."""
    k, b, c = logits.shape
    logits = logits.float()  # a no-op (same tensor) for fp32 logits
    return nn.functional.cross_entropy(logits.reshape(k * b, c), y.reshape(k * b), reduction="none").view(k, b).mean(1)


def training_step(model: nn.Module, optimizer, x: torch.Tensor, y: torch.Tensor, *, precision: str = "fp32",
                  device_type: str = "cpu", lr_factor: float = 1.0,
                  keep: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """One optimiser step of the K members on inputs x (K, B, ...) and labels y (K, B); returns the summed loss (a
    0-d tensor, not synchronised with the host).

    keep: fn(losses (K,), detached) -> bool mask (K,) of the members whose loss enters the backward pass (the loop
    leaves a diverged member out); None keeps every member. lr_factor: the schedule's factor at this step."""
    with forward_autocast(precision, device_type):
        logits = model(x)
    losses = member_loss(logits, y)  # fp32
    if keep is not None:
        losses = torch.where(keep(losses.detach()), losses, torch.zeros_like(losses))
    loss = losses.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step(lr_factor)
    return loss
