"""The reference every batched-training test compares against: one model trained alone with plain PyTorch
(torch.optim, the same data order as member `seed` of a batch), logging norm and test metrics on the log grid."""
from __future__ import annotations

import pandas as pd
import torch
from torch import nn

import nhtlib as nht


def train_alone(net: nn.Module, data: nht.data.Dataset, cfg: nht.TrainConfig, seed: int, lr: float,
                wd: float) -> pd.DataFrame:
    params = list(net.parameters())
    if cfg.decay == "matrices":
        groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": wd},
                  {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    else:
        groups = [{"params": params, "weight_decay": wd}]
    opt = (torch.optim.AdamW(groups, lr=lr, betas=cfg.betas, eps=cfg.eps) if cfg.optimizer == "adamw"
           else torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum))
    x, y = data.splits["train"].inputs(), data.splits["train"].y
    g = torch.Generator().manual_seed(seed + nht.train.DATA_SEED_OFFSET)
    log_steps = set(cfg.log_steps())
    rows = []
    for step in range(cfg.steps + 1):
        if step in log_steps:
            with torch.no_grad():
                logits = net(data.splits["test"].inputs())
                rows.append({"step": step, "norm_sq": sum(float((q.double() ** 2).sum()) for q in params),
                             "test_loss": float(nn.functional.cross_entropy(logits, data.splits["test"].y)),
                             "test_acc": float((logits.argmax(1) == data.splits["test"].y).double().mean())})
        if step == cfg.steps:
            break
        idx = torch.randint(0, len(y), (cfg.batch_size,), generator=g) if cfg.batch_size else slice(None)
        loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pd.DataFrame(rows)
