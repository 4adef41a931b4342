"""Penultimate features Phi and outputs F of any model on a probe set, and the richness metrics built on them.

`extract(model, x)` runs the model in eval mode (BatchNorm uses its running statistics) under `torch.no_grad`, in
batches, and returns Phi (K, n, p) and F (K, n, C) as float64 on the CPU:

* member-batched `StackedModel`s (VGG, ResNet, feature MLP): their own `features_and_outputs` (no hooks needed);
* any other module: a forward hook on its final linear layer (`head=` a module name, else the last `nn.Linear` or
  member-batched linear found in `named_modules()` order) captures the layer's input (Phi) and output (F).
  `member_batched=False` is for a plain single model taking (n, ...) inputs (K = 1 is added); for sequence models
  `position` picks the token whose features count (e.g. -1, the "=" token of a modular-arithmetic transformer).

`dlr_probe(...)` is its lean sibling: D_LR (the literal variant) and its null value only, cheap enough to log on
every run of chapters 1-4, whose norm transitions chapter 6 reads it along.

`richness_probe(...)` makes the `extra_metrics` function of `nht.run`: at every log step it evaluates, on a fixed
probe subset of the training split, D_LR (both variants), its rank and null value, NC1/NC2, ||theta||^2 and
||theta - theta_0||^2 over the trainable parameters, S_init, and optionally the spectrum columns of `eigen`.
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch import nn

from nhtlib.analysis.metrics import baselines, eigen
from nhtlib.analysis.metrics.dlr import dlr, null_value, output_basis, single_thread


def _final_linear(model: nn.Module, head: str | None) -> nn.Module:
    modules = dict(model.named_modules())
    if head is not None:
        if head not in modules:
            raise ValueError(f"head={head!r} is not a module of the model; some names: {list(modules)[-5:]}")
        return modules[head]
    linear = [m for m in modules.values() if isinstance(m, nn.Linear) or type(m).__name__ == "BatchedLinear"]
    if not linear:
        raise ValueError("no linear layer found; pass head='<module name>'")
    return linear[-1]


@torch.no_grad()
def extract(model: nn.Module, x: torch.Tensor, *, batch_size: int = 1024, member_batched: bool = True,
            head: str | None = None, position: int | None = None, initial: bool = False,
            per_member: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Phi (K, n, p) and F (K, n, C), float64 on the CPU; x is (n, ...) shared by the members, or (K, n, ...) with
    per_member=True. initial=True gives the features at initialisation (StackedModel only)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    k = getattr(model, "k_members", None)
    if member_batched and k is None:
        k = next(model.parameters()).shape[0]
    captured: list[tuple[torch.Tensor, torch.Tensor]] = []
    hook = None
    if not hasattr(model, "features_and_outputs"):
        if initial:
            raise ValueError("initial=True needs a StackedModel (it keeps its initial parameters)")
        layer = _final_linear(model, head)
        hook = layer.register_forward_hook(lambda m, inp, out: captured.append((inp[0], out)))
    phis, outs = [], []
    try:
        n = x.shape[1] if per_member else x.shape[0]
        for start in range(0, n, batch_size):
            xb = (x[:, start:start + batch_size] if per_member else x[start:start + batch_size]).to(device)
            if member_batched and not per_member:
                xb = xb.unsqueeze(0).expand(k, *xb.shape)
            if hook is None:
                phi, f = model.features_and_outputs(xb, initial=initial)
            else:
                captured.clear()
                model(xb)
                phi, f = captured[-1]
                if not member_batched:
                    phi, f = phi.unsqueeze(0), f.unsqueeze(0)
                if position is not None and phi.dim() == 4:
                    phi, f = phi[:, :, position], f[:, :, position]
            phis.append(phi.detach().double().cpu())
            outs.append(f.detach().double().cpu())
    finally:
        if hook is not None:
            hook.remove()
        model.train(was_training)
    return torch.cat(phis, 1), torch.cat(outs, 1)


def _trainable_norms(model: nn.Module) -> dict[str, torch.Tensor]:
    """||theta||^2 and ||theta - theta_0||^2 / ||theta_0||^2 per member over trainable parameters (NaN without theta_0)."""
    stacked = hasattr(model, "member_tensors")
    params = dict((model.net if stacked else model).named_parameters())
    names = [n for n, p in params.items() if p.requires_grad]
    k = next(model.parameters()).shape[0]
    norm = sum(params[n].detach().double().reshape(k, -1).pow(2).sum(1) for n in names)
    if not stacked:
        return {"theta_sq": norm.cpu(), "theta_dist_rel": torch.full((k,), float("nan"), dtype=torch.float64)}
    init, _ = model.member_tensors(initial=True)
    dist = sum((params[n].detach().double() - init[n].double()).reshape(k, -1).pow(2).sum(1) for n in names)
    init_sq = sum(init[n].double().reshape(k, -1).pow(2).sum(1) for n in names)
    return {"theta_sq": norm.cpu(), "theta_dist_rel": (dist / init_sq).cpu()}


def dlr_with_null(phi: torch.Tensor, f: torch.Tensor):
    """(the literal D_LR result of one member's Phi (n, p) and F (n, C), its null value `null_value` for the rank of
    the centred outputs and the feature width p): what every probe logs as dlr and dlr_null."""
    lit = dlr(phi, f, "literal", detail=True)
    _, centred_rank = output_basis(f, "centred_span")
    return lit, null_value(min(centred_rank, lit.rank), phi.shape[1])


def member_metrics(phi: torch.Tensor, f: torch.Tensor, labels: torch.Tensor | None, n_classes: int,
                   phi_init: torch.Tensor | None = None, eigen_k: int = 0) -> dict[str, float]:
    """All probe metrics of one member from its Phi (n, p), F (n, C), labels (n,) and initial Phi."""
    with warnings.catch_warnings(), single_thread():
        warnings.simplefilter("ignore")
        lit, null = dlr_with_null(phi, f)
        out = {"dlr": lit.value, "dlr_centred": dlr(phi, f, "centred_span"), "dlr_rank": float(lit.rank),
               "dlr_null": null, "feature_dim": float(phi.shape[1])}
        if labels is not None:
            out.update(baselines.nc1(phi, labels))
            out.update(baselines.nc2(phi, labels))
        out["s_init"] = baselines.s_init(phi, phi_init) if phi_init is not None else float("nan")
        if eigen_k:
            target = eigen.one_hot(labels, n_classes) if labels is not None else None
            out.update(eigen.spectrum_columns(eigen.spectrum(phi, f, target), eigen_k))
    return out


def dlr_probe(n_probe: int = 256, *, split: str = "train", batch_size: int = 1024
              ) -> Callable[[nn.Module, object], dict[str, torch.Tensor]]:
    """The `extra_metrics` function for `nht.run` that logs D_LR along a run: columns dlr (the literal variant) and
    dlr_null (`null_value` for the rank of the centred outputs and the feature width) per member, on the first
    `n_probe` examples of `split` (a fixed sample, no augmentation)."""

    def metrics(model: nn.Module, data) -> dict[str, torch.Tensor]:
        part = data.splits[split].head(n_probe)
        phi, f = extract(model, part.inputs(), batch_size=batch_size, per_member=part.per_member)
        with warnings.catch_warnings(), single_thread():
            warnings.simplefilter("ignore")  # constant outputs (a dead member) give NaN, already a warning in dlr
            rows = [dlr_with_null(phi[k], f[k]) for k in range(phi.shape[0])]
        return {"dlr": torch.tensor([lit.value for lit, _ in rows], dtype=torch.float64),
                "dlr_null": torch.tensor([null for _, null in rows], dtype=torch.float64)}

    return metrics


def richness_probe(n_probe: int = 1000, *, split: str = "train", eigen_k: int = 0, batch_size: int = 1024,
                   head: str | None = None) -> Callable[[nn.Module, object], dict[str, torch.Tensor]]:
    """The `extra_metrics` function for `nht.run`: richness metrics per member on the first `n_probe` examples of
    `split` (a fixed sample, no augmentation). Columns: dlr, dlr_centred, dlr_rank, dlr_null, feature_dim, nc1,
    nc1_bounded, nc1_min_eig, nc2_equinorm, nc2_equiangular, nc2_simplex, s_init, theta_sq, theta_dist_rel, and
    rho_rel:k, pi_star:k, pi_hat:k, u:k for k <= eigen_k."""

    def metrics(model: nn.Module, data) -> dict[str, torch.Tensor]:
        part = data.splits[split].head(n_probe)
        x, y = part.inputs(), part.y  # decoded model inputs (n, ...) or, per member, (K, n, ...)
        kw = dict(batch_size=batch_size, per_member=part.per_member)
        phi, f = extract(model, x, head=head, **kw)
        phi0 = extract(model, x, initial=True, **kw)[0] if hasattr(model, "member_tensors") else None
        rows = [member_metrics(phi[k], f[k], (y[k] if part.per_member else y).cpu(), data.n_classes,
                               None if phi0 is None else phi0[k], eigen_k) for k in range(phi.shape[0])]
        out = {name: torch.tensor([r[name] for r in rows], dtype=torch.float64) for name in rows[0]}
        out.update(_trainable_norms(model))
        return out

    return metrics
