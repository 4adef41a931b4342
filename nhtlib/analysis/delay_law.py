"""The NHT delay law and the fits that test it.

Law (NHT eq. 1, Thm 3.5):  T = log(V_sc / V_st) / gamma_eff.

Rate convention used throughout the book (shared/papers/nht.md §1.3): gamma is the per-step contraction rate of the
*squared* norm V = ||theta||^2. Decoupled weight decay alone multiplies theta by (1 - lr*wd) per step, hence V by
(1 - lr*wd)^2 ~= 1 - 2*lr*wd: the pure-decay rate is gamma_V = 2 * lr * wd (factor 2). The papers write
gamma_eff = lr*wd (factor 1) and NSDL measures ~1.41 * lr*wd under AdamW; every function here takes the factor as a
parameter and the chapters print the fitted factor c = gamma_fit / (lr*wd) beside the prediction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

PURE_DECAY_FACTOR = 2.0


def contraction_rate(lr: float | np.ndarray, weight_decay: float | np.ndarray,
                     factor: float = PURE_DECAY_FACTOR) -> np.ndarray | float:
    """gamma_V = factor * lr * wd (per step). factor=2: pure decoupled decay of ||theta||^2."""
    return factor * np.asarray(lr, dtype=float) * np.asarray(weight_decay, dtype=float)


def predicted_delay(v_sc: float | np.ndarray, v_st: float | np.ndarray, lr: float | np.ndarray,
                    weight_decay: float | np.ndarray, factor: float = PURE_DECAY_FACTOR) -> np.ndarray | float:
    """T = log(V_sc / V_st) / (factor * lr * wd), in optimiser steps. V's are squared norms."""
    v_sc, v_st = np.asarray(v_sc, dtype=float), np.asarray(v_st, dtype=float)
    if np.any(v_sc <= 0) or np.any(v_st <= 0):
        raise ValueError("V_sc and V_st must be positive squared norms")
    return np.log(v_sc / v_st) / contraction_rate(lr, weight_decay, factor)


@dataclass(frozen=True)
class LinearFit:
    """y = slope * x + intercept, with R^2, Pearson r and the t-interval of the slope (normal residuals)."""

    slope: float
    intercept: float
    r2: float
    pearson_r: float
    slope_ci: tuple[float, float]
    n: int

    def __str__(self) -> str:
        lo, hi = self.slope_ci
        return (f"slope {self.slope:.3g} (95% CI [{lo:.3g}, {hi:.3g}]), intercept {self.intercept:.3g}, "
                f"R² = {self.r2:.3f}, n = {self.n}")


def fit_linear(x: Sequence[float], y: Sequence[float], *, through_origin: bool = False,
               ci: float = 0.95) -> LinearFit:
    """Least-squares line with the classical t-interval on the slope: slope ± t(n − p) · SE, SE from the residual
    variance (p = 2 parameters, 1 through the origin). Exact for normal residuals, so its coverage is the nominal
    one at every n (a percentile bootstrap of the points under-covers at the 3–10 points a fit here has). NaNs are
    dropped."""
    from scipy.stats import t

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3:
        raise ValueError(f"need at least 3 finite points to fit a line, got {len(x)}")
    n, params = len(x), 1 if through_origin else 2
    if through_origin:
        sxx = float(x @ x)
        slope, intercept = (float(x @ y) / sxx if sxx > 0 else np.nan), 0.0
    elif np.ptp(x) == 0:
        sxx, slope, intercept = 0.0, np.nan, np.nan
    else:
        sxx = float(((x - x.mean()) ** 2).sum())
        slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    resid = y - (slope * x + intercept)
    total = y - (0.0 if through_origin else y.mean())
    r2 = 1.0 - float(resid @ resid) / float(total @ total) if float(total @ total) > 0 else np.nan
    pearson = float(np.corrcoef(x, y)[0, 1]) if np.ptp(x) > 0 and np.ptp(y) > 0 else np.nan
    if sxx > 0 and np.isfinite(slope):
        se = math.sqrt(float(resid @ resid) / (n - params) / sxx)
        lo, hi = t.interval(ci, n - params, loc=slope, scale=se) if se > 0 else (slope, slope)
    else:
        lo, hi = np.nan, np.nan
    return LinearFit(slope, intercept, r2, pearson, (float(lo), float(hi)), n)


def fit_delay_law(predicted: Sequence[float], measured: Sequence[float], **kw) -> LinearFit:
    """Regress measured transition times on the law's prediction. The law holds when slope ~ 1 (if the rate
    convention is right), the intercept is small against the delays, and R^2 is high."""
    return fit_linear(predicted, measured, **kw)


def fit_inverse_lambda(weight_decays: Sequence[float], times: Sequence[float], **kw) -> LinearFit:
    """T = a / lambda + b (the companion paper's fit; its slope is `a`)."""
    lam = np.asarray(weight_decays, dtype=float)
    if np.any(lam <= 0):
        raise ValueError("weight decays must be positive for a 1/lambda fit")
    return fit_linear(1.0 / lam, times, **kw)


@dataclass(frozen=True)
class ContractionFit:
    """V_t = A * r^t + C fitted on t >= t0 (t re-zeroed at t0); gamma = 1 - r is the per-step rate."""

    rate: float
    amplitude: float
    offset: float
    r2: float

    @property
    def gamma(self) -> float:
        return 1.0 - self.rate


def fit_contraction(steps: Sequence[float], values: Sequence[float], start: float | None = None) -> ContractionFit:
    """Fit V_t = A r^t + C to the points at steps >= start (default: the first step), like NSDL's fit_exp_decay:
    A in [0, 1e7 * max V], ln r in [-1, 0], C in [0, 1.1 * V(start)]."""
    from scipy.optimize import curve_fit

    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    t0 = s[0] if start is None else start
    keep = (s >= t0) & np.isfinite(v)
    t, y = s[keep] - t0, v[keep]
    if len(t) < 4:
        raise ValueError(f"need at least 4 points after step {t0} to fit a contraction, got {len(t)}")

    def model(tt, a, log_r, c):
        return a * np.exp(log_r * tt) + c

    span = max(t[-1], 1.0)
    guess = (max(y[0] - y[-1], 1e-12), -1.0 / span, max(min(y[-1], 1.1 * y[0]), 0.0))
    bounds = ([0.0, -1.0, 0.0], [1e7 * max(float(np.max(y)), 1.0), 0.0, 1.1 * float(y[0]) + 1e-12])
    guess = tuple(np.clip(guess, bounds[0], bounds[1]))
    params, _ = curve_fit(model, t, y, p0=guess, bounds=bounds, maxfev=20000)
    a, log_r, c = (float(p) for p in params)
    resid = y - model(t, a, log_r, c)
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss if ss > 0 else np.nan
    return ContractionFit(rate=float(np.exp(log_r)), amplitude=a, offset=c, r2=r2)


def contraction_between(steps: Sequence[float], values: Sequence[float], start: float, end: float
                        ) -> tuple[float, float, float]:
    """(rate r, gamma = 1 - r per step, R²) of V_t = A r^t + C fitted on the logged points start <= t <= end (e.g.
    from T_mem to the end of the run, or over an escape); NaNs with fewer than 4 points or when the fit fails."""
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = (steps >= start) & (steps <= end)
    if not (np.isfinite(start) and np.isfinite(end)) or keep.sum() < 4:
        return np.nan, np.nan, np.nan
    try:
        fit = fit_contraction(steps[keep], values[keep])
    except (RuntimeError, ValueError):
        return np.nan, np.nan, np.nan
    return fit.rate, fit.gamma, fit.r2
