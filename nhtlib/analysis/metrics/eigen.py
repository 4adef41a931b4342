"""The eigen-decomposition view of the feature kernel (the paper's three panels; its exact formulas, "Eq. 5", are
unknown, so these are the book's, shared/papers/dlr.md §2).

With the centred covariance Sigma = Phi_c^T Phi_c / n = sum_k rho_k v_k v_k^T (rho_1 >= rho_2 >= ...), the Nystrom
eigenfunctions e_k(x) = (Phi(x) - m)^T v_k / sqrt(rho_k) are orthonormal on the sample. For a vector-valued g
(the target f*, one-hot, or the learned outputs f^) with centred components g~_c, beta_kc = <e_k | g~_c>_n and

    Pi*(k)   = sum_{j<=k} sum_c beta_jc(f*)^2 / sum_c ||f*~_c||_n^2      cumulative quality (target)
    Pi^(k)   = sum_{j<=k} sum_c beta_jc(f^)^2 / sum_c ||f^~_c||_n^2      cumulative utilisation (learned outputs)
    rho_k / rho_1                                                          relative eigenvalues

Pi^(p) = 1 on the fitting sample (a linear head lives in the feature span); Pi*(p) is the R^2 of a least-squares fit
of the centred target on [1, Phi]. u_k = ||P_{span F_c} e_k||_n^2 (share of eigenfunction k inside the learned
space, invariant to F -> F B) links the spectrum to D_LR (variant A): CKA_A = sum_k rho_k u_k / (sqrt(r) ||rho||_2).
Cost O(n p^2 + p^3) (p x p eigendecomposition).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nhtlib.analysis.metrics.dlr import RANK_RTOL, as_float64, eigh_desc, output_basis


@dataclass(frozen=True)
class Spectrum:
    rho: torch.Tensor  # (p',) eigenvalues of the centred covariance, descending, rho > tol * rho_1
    rho_rel: torch.Tensor  # rho_k / rho_1
    pi_star: torch.Tensor | None  # cumulative quality Pi*(k) (None without a target)
    pi_hat: torch.Tensor  # cumulative utilisation Pi^(k)
    u: torch.Tensor  # share of e_k in span(F_c)
    rank: int  # r = rank of the centred outputs

    def cka_centred_span(self) -> float:
        """CKA of variant A from the spectrum (equals 1 - dlr(..., variant='centred_span') up to the dropped tail)."""
        return float((self.rho * self.u).sum() / (self.rank ** 0.5 * self.rho.norm()))


def one_hot(labels: torch.Tensor, n_classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.as_tensor(labels).long(), n_classes).to(torch.float64)


def _cumulative_share(e: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    g = g - g.mean(0, keepdim=True)
    n = g.shape[0]
    beta = e.T @ g / n  # (k, C): <e_k | g_c>_n
    total = g.pow(2).sum() / n
    return torch.cumsum(beta.pow(2).sum(1), 0) / total


def spectrum(features, outputs, target=None, tol: float = 1e-10, rtol: float = RANK_RTOL) -> Spectrum:
    """Eigenvalues, cumulative quality (against `target`, (n, C) or (n,)), cumulative utilisation (against the
    learned `outputs`) and the learned-space shares u_k; eigen-directions with rho_k <= tol * rho_1 are dropped."""
    phi, f = as_float64(features), as_float64(outputs)
    n = phi.shape[0]
    phi_c = phi - phi.mean(0, keepdim=True)
    rho, v = eigh_desc(phi_c.T @ phi_c / n)
    keep = rho > tol * rho[0].clamp_min(1e-300)
    rho, v = rho[keep], v[:, keep]
    e = phi_c @ v / rho.sqrt()  # (n, k) Nystrom eigenfunctions on the sample, orthonormal under <.,.>_n
    basis, r = output_basis(f, "centred_span", rtol)
    u = (basis.T @ e).pow(2).sum(0) / n if basis is not None else torch.full_like(rho, float("nan"))
    pi_star = _cumulative_share(e, as_float64(target)) if target is not None else None
    return Spectrum(rho, rho / rho[0], pi_star, _cumulative_share(e, f), u, r)


def spectrum_columns(spec: Spectrum, k_max: int) -> dict[str, float]:
    """Flat {name:k: value} for k = 1..k_max (NaN past the kept rank), for logging in a run table."""
    out: dict[str, float] = {}
    for name, values in (("rho_rel", spec.rho_rel), ("pi_star", spec.pi_star), ("pi_hat", spec.pi_hat),
                         ("u", spec.u)):
        for k in range(k_max):
            out[f"{name}:{k + 1}"] = float(values[k]) if values is not None and k < len(values) else float("nan")
    return out


def participation_ratio(eigenvalues) -> float:
    """Effective number of eigen-directions, (sum rho)^2 / sum rho^2: 1 for one direction, k for k equal ones."""
    rho = np.asarray(eigenvalues, dtype=float)
    rho = rho[np.isfinite(rho)]
    return float(rho.sum() ** 2 / (rho ** 2).sum()) if rho.size and (rho ** 2).sum() > 0 else float("nan")


def first_k_reaching(ks, cumulative_share, level: float) -> float:
    """Smallest k whose cumulative share (Pi* or Pi-hat, in [0, 1]) reaches `level`; NaN when none does."""
    ks, share = np.asarray(ks, dtype=float), np.asarray(cumulative_share, dtype=float)
    order = np.argsort(ks)
    hit = np.flatnonzero(share[order] >= level)
    return float(ks[order][hit[0]]) if hit.size else float("nan")
