"""D_LR, the low-rank measure of dynamical richness (Nam et al., arXiv 2410.04264), exact and fast.

    D_LR = 1 - CKA(T, T_MP)

T is the feature kernel operator of the penultimate features Phi (n x p) on a fixed sample, T_MP the "minimum
projection" operator ``a1 |1><1| + a2 P_H``, where P_H projects onto the span H of the learned outputs F (n x C,
*logits* or raw regression outputs, never probabilities). CKA is Kornblith et al.'s linear CKA with the biased HSIC;
centring removes the a1 term and the scale invariance removes a2, so D_LR does not depend on (a1, a2).
0 = rich (features are exactly the minimum projection), near 1 = lazy (many feature directions the output ignores).

Two finite-sample readings of P_H (shared/papers/dlr.md §1.5), both exposed:

* ``variant="literal"`` (L, the book's reported D_LR): Q = orthonormal basis of span(F) (raw outputs), then the
  CKA centring H Q Q^T H.  D = 1 - ||Q^T Phi_c||_F^2 / (||Phi_c^T Phi_c||_F * sqrt((r - 1) + (1 - gamma)^2)),
  gamma = ||Q^T 1||^2 / n.
* ``variant="centred_span"`` (A): U = orthonormal basis of span(F_c), the centred outputs.
  D = 1 - ||U^T Phi_c||_F^2 / (sqrt(r) ||Phi_c^T Phi_c||_F).

The two coincide whenever 1 lies in span(F) (and for C = 1); A jumps to >= 1 - sqrt((C-1)/C) near collapse when some
output combination is almost constant, L does not (dlr.md §1.5, test 11).

**Numerical-rank rule.** r = #{singular values s_i of the output matrix with s_i > rtol * s_1}, rtol = 1e-6 by
default, computed in float64 (s_i^2 from the C x C Gram, basis re-orthonormalised by QR); the normalisation uses this r, never C. Constant outputs (s_1 = 0, or for A a zero
centred output) give NaN with a warning.

**Cost.** Feature form (the implementation): O(n C^2 + n p r + n p^2) time (the p x p Gram; the n x n one when
p > n), O(n (p + C) + p^2) memory. :func:`dlr_kernel` is the O(n^2 (p + C)) kernel form, kept as the test oracle.

**Null value.** Isotropic structureless features of rank p with the outputs in their span give 1 - sqrt(r/p)
(:func:`null_value`); print it next to every D_LR: "lazy ~ 1" only holds when p >> C.
"""
from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import torch

VARIANTS = ("literal", "centred_span")
RANK_RTOL = 1e-6


@dataclass(frozen=True)
class DLRResult:
    """D_LR and what it was computed from: numerical rank r of the output basis, gamma (literal variant: share of
    the constant function inside span(F)), feature width p, sample size n and the null value 1 - sqrt(r_c / p)."""

    value: float
    variant: str
    rank: int
    gamma: float
    p: int
    n: int
    null: float

    def __float__(self) -> float:
        return self.value


def as_float64(x) -> torch.Tensor:
    t = torch.as_tensor(x)
    t = t.detach().to(device="cpu", dtype=torch.float64)
    return t.unsqueeze(1) if t.dim() == 1 else t


def output_basis(outputs: torch.Tensor, variant: str = "literal", rtol: float = RANK_RTOL
                 ) -> tuple[torch.Tensor | None, int]:
    """Orthonormal basis (n x r) of span(F) (literal) or span(F_c) (centred_span), with the numerical-rank rule
    s_i > rtol * s_1; (None, 0) when the outputs are constant."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}; choose one of {VARIANTS}")
    f = as_float64(outputs)
    if variant == "centred_span":
        f = f - f.mean(0, keepdim=True)
    # singular values s_i = sqrt(eigenvalues of the C x C Gram): O(n C^2 + C^3), much faster than an SVD of F
    evals, evecs = eigh_desc(f.T @ f)
    top = float(evals[0]) if evals.numel() else 0.0
    if top <= 0 or not math.isfinite(top):
        return None, 0
    keep = evals > (rtol ** 2) * top
    r = int(keep.sum())
    basis = f @ (evecs[:, keep] / evals[keep].sqrt())
    with single_thread():
        return torch.linalg.qr(basis).Q, r  # re-orthonormalise (the Gram squares cond(F))


@contextmanager
def single_thread():
    """The metrics run on one thread: on a shared, loaded 2-core CPU, multi-threaded eigh/qr of a 100 x 100 matrix
    and small matmuls were measured 100-500x slower (threads waiting on each other) than single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def eigh_desc(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (descending) and eigenvectors of a symmetric float64 matrix (single-threaded)."""
    with single_thread():
        evals, evecs = torch.linalg.eigh(matrix)
    return evals.flip(0), evecs.flip(1)


def _feature_self_term(phi_c: torch.Tensor) -> torch.Tensor:
    """||Phi_c Phi_c^T||_F = ||Phi_c^T Phi_c||_F, from the smaller Gram."""
    n, p = phi_c.shape
    gram = phi_c.T @ phi_c if p <= n else phi_c @ phi_c.T
    return torch.linalg.matrix_norm(gram)


def null_value(rank: int, p: int) -> float:
    """D_LR of isotropic, structureless features of rank p whose span contains the outputs: 1 - sqrt(r / p)."""
    return float("nan") if p <= 0 else 1.0 - math.sqrt(min(rank, p) / p)


def dlr(features, outputs, variant: str = "literal", rtol: float = RANK_RTOL, *, detail: bool = False):
    """D_LR of features Phi (n x p) and outputs F (n x C, or (n,) for scalar regression), feature form.

    Returns a float, or a :class:`DLRResult` when ``detail=True``. NaN (with a warning) for constant outputs or
    constant features.
    """
    with single_thread():
        return _dlr(features, outputs, variant, rtol, detail)


def _dlr(features, outputs, variant: str, rtol: float, detail: bool):
    phi, f = as_float64(features), as_float64(outputs)
    n, p = phi.shape
    if f.shape[0] != n:
        raise ValueError(f"features have {n} rows but outputs have {f.shape[0]}")
    phi_c = phi - phi.mean(0, keepdim=True)
    basis, r = output_basis(f, variant, rtol)
    self_term = _feature_self_term(phi_c)
    gamma = float("nan")
    if basis is None or float(self_term) == 0.0:
        warnings.warn("D_LR is undefined for constant outputs or constant features; returning NaN", stacklevel=2)
        value = float("nan")
    else:
        cross = (basis.T @ phi_c).pow(2).sum()
        if variant == "literal":
            gamma = float(basis.sum(0).pow(2).sum() / n)
            out_norm = math.sqrt(max(r - 1 + (1 - gamma) ** 2, 0.0))
        else:
            out_norm = math.sqrt(r)
        value = float("nan") if out_norm == 0 else float(1.0 - cross / (self_term * out_norm))
        value = min(max(value, 0.0), 1.0) if math.isfinite(value) else value
    if not detail:
        return value
    r_centred = r - 1 if variant == "literal" and math.isfinite(gamma) and gamma > 1 - 1e-9 else r
    return DLRResult(value, variant, r, gamma, p, n, null_value(r_centred, p))


def cka_kernel(k: torch.Tensor, l: torch.Tensor) -> float:
    """Kornblith's CKA of two n x n Gram matrices (biased HSIC, centring H K H)."""
    k, l = as_float64(k), as_float64(l)
    n = k.shape[0]
    h = torch.eye(n, dtype=torch.float64) - 1.0 / n
    kc, lc = h @ k @ h, h @ l @ h
    return float((kc * lc).sum() / (torch.linalg.matrix_norm(kc) * torch.linalg.matrix_norm(lc)))


def dlr_kernel(features, outputs, variant: str = "literal", a1: float = 1.0, a2: float = 1.0,
               rtol: float = RANK_RTOL) -> float:
    """Kernel (n x n) form of D_LR: 1 - CKA(Phi Phi^T, a1/n 11^T + a2 P), P the pseudo-inverse projector
    F (F^T F)^+ F^T (literal) or onto span(F_c) (centred_span). O(n^2 (p + C)): a test oracle, not for use."""
    phi, f = as_float64(features), as_float64(outputs)
    n = phi.shape[0]
    if variant == "centred_span":
        f = f - f.mean(0, keepdim=True)
    gram_f = f.T @ f
    evals = torch.linalg.eigvalsh(gram_f)
    proj = f @ torch.linalg.pinv(gram_f, rtol=rtol ** 2 * 10, hermitian=True) @ f.T
    if float(evals.max()) <= 0:
        return float("nan")
    t_mp = a1 / n * torch.ones(n, n, dtype=torch.float64) + a2 * proj
    return 1.0 - cka_kernel(phi @ phi.T, t_mp)


def linear_cka(x, y) -> float:
    """Linear CKA of two representations (n x p, n x q), columns centred: ||Y_c^T X_c||_F^2 / (||X_c^T X_c|| ||Y_c^T Y_c||)."""
    x, y = as_float64(x), as_float64(y)
    x, y = x - x.mean(0, keepdim=True), y - y.mean(0, keepdim=True)
    num = (y.T @ x).pow(2).sum()
    den = _feature_self_term(x) * _feature_self_term(y)
    return float("nan") if float(den) == 0 else float(num / den)


def dlr_members(features: torch.Tensor, outputs: torch.Tensor, variant: str = "literal",
                rtol: float = RANK_RTOL) -> torch.Tensor:
    """D_LR per member of member-batched features (K, n, p) and outputs (K, n, C): a (K,) float64 tensor."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.tensor([dlr(features[k], outputs[k], variant, rtol) for k in range(features.shape[0])],
                            dtype=torch.float64)
