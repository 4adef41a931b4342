"""The richness baselines the D_LR paper compares against (shared/papers/dlr.md §3, §4.6).

* ||theta||^2 and ||theta - theta_0||^2 (and relative to ||theta_0||^2): over trainable parameters only.
* NC1 = Tr(Sigma_W Sigma_B^+) / C (Papyan, Han & Donoho 2020), Sigma_B inverted on its top C - 1 eigen-directions
  only, in float64 (the library pinv cutoffs differ and blow NC1 up); plus the bounded Tr Sigma_W / Tr Sigma_T.
* NC2: equinorm (sd/mean of the centred class-mean norms), equiangularity (sd of the pairwise cosines) and the
  distance to the simplex angle (``mean |cos + 1/(C-1)|``).
* S_init = CKA(Phi_t Phi_t^T, Phi_0 Phi_0^T) on a fixed sample, centred linear CKA: high = features unchanged (lazy).
* eNTK kernel distance 1 - <Theta_0, Theta_t>_F / (||Theta_0|| ||Theta_t||) of the empirical NTK Theta = J J^T
  (n C x n C) on a small probe: memory O(n C D), time O(n^2 C^2 D) -- the cost gap to D_LR is the point.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import nn

from nhtlib.analysis.metrics.dlr import as_float64, eigh_desc, linear_cka


def param_norm_sq(params: Iterable[torch.Tensor]) -> float:
    return float(sum(p.detach().to(torch.float64).pow(2).sum() for p in params))


def _class_stats(features, labels):
    phi = as_float64(features)
    y = torch.as_tensor(labels).long()
    classes = torch.unique(y)
    mu_g = phi.mean(0)
    means = torch.stack([phi[y == c].mean(0) for c in classes])
    within = phi - means[torch.searchsorted(classes, y)]
    sigma_w = within.T @ within / phi.shape[0]
    centred_means = means - mu_g
    sigma_b = centred_means.T @ centred_means / len(classes)
    return phi, mu_g, centred_means, sigma_w, sigma_b, len(classes)


def nc1(features, labels) -> dict[str, float]:
    """NC1 = Tr(Sigma_W Sigma_B^+)/C with Sigma_B^+ on its top C-1 eigen-directions; 'nc1_bounded' =
    Tr Sigma_W / Tr Sigma_T in [0, 1]; 'nc1_min_eig' = the smallest Sigma_B eigenvalue that was inverted."""
    phi, mu_g, _, sigma_w, sigma_b, c = _class_stats(features, labels)
    evals, evecs = eigh_desc(sigma_b)
    top = max(c - 1, 1)
    evals, evecs = evals[:top], evecs[:, :top]
    positive = evals > 0
    inv = (evecs[:, positive] / evals[positive]) @ evecs[:, positive].T
    total = (phi - mu_g).pow(2).sum() / phi.shape[0]
    return {"nc1": float(torch.trace(sigma_w @ inv) / c),
            "nc1_bounded": float(torch.trace(sigma_w) / total) if total > 0 else float("nan"),
            "nc1_min_eig": float(evals[positive].min()) if positive.any() else float("nan")}


def nc2(features, labels) -> dict[str, float]:
    """NC2: 'nc2_equinorm', 'nc2_equiangular', 'nc2_simplex' (all -> 0 at a simplex ETF)."""
    _, _, m, _, _, c = _class_stats(features, labels)
    norms = m.norm(dim=1)
    cos = (m @ m.T) / (norms[:, None] * norms[None, :])
    off = cos[~torch.eye(c, dtype=torch.bool)]
    return {"nc2_equinorm": float(norms.std() / norms.mean()), "nc2_equiangular": float(off.std()),
            "nc2_simplex": float((off + 1.0 / (c - 1)).abs().mean())}


def s_init(features, features_init) -> float:
    """S_init: centred linear CKA between the current and the initial feature kernels on the same sample."""
    return linear_cka(features, features_init)


def empirical_ntk(fn: Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor],
                  params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Empirical NTK Theta = J J^T (n C x n C) of fn(params, x) -> (n, C), J = d vec(f) / d theta (full Jacobian)."""
    jac = torch.func.jacrev(fn)(params, x)
    flat = torch.cat([j.reshape(j.shape[0] * j.shape[1], -1) for j in jac.values()], dim=1).double()
    return flat @ flat.T


def ntk_distance(theta_0: torch.Tensor, theta_t: torch.Tensor) -> float:
    """Kernel distance 1 - <Theta_0, Theta_t>_F / (||Theta_0||_F ||Theta_t||_F) (Fort et al. 2020)."""
    return float(1 - (theta_0 * theta_t).sum() / (theta_0.norm() * theta_t.norm()))


def module_ntk(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Empirical NTK of a single (not member-batched) module on inputs x, over its trainable parameters."""
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = dict(model.named_buffers())

    def fn(p, inputs):
        return torch.func.functional_call(model, {**p, **buffers}, (inputs,))

    return empirical_ntk(fn, params, x)
