"""Norm-dynamics analysis of one trajectory: peak, decay from the peak, transition time, regime.

A trajectory is a 1-D sequence of values (usually ||theta||^2) logged at increasing steps. Definitions follow the
book's defaults (shared/papers/nht.md §1.4, §7.1):

* peak step: argmax over logged steps, *excluding* step 0 (the initialisation) unless `include_init`;
* decay % : 100 * (V_peak - V_final) / V_peak;
* transition step: the first logged step at which a metric crosses a threshold (operational definition, a
  parameter of every chapter);
* regime: weak (norm grows, shortcut persists), intermediate (peak then decay *and* the structured metric
  improves), strong (nothing is learned), classified by `classify_regime` with documented thresholds;
* diverged: a run whose loss or norm became non-finite (the training loop's `diverged_step` column) is *not* a
  regime: every summary labels it DIVERGED, leaves its measured quantities NaN, and the regime counts list it apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nhtlib.config import Config, check_range
from nhtlib.analysis.divergence import DIVERGED, diverged_row, diverged_step  # noqa: F401  (every summary labels them)

REGIMES = ("weak", "intermediate", "strong")
# A norm "decays" when it falls at least this many % from its peak (nht.md §1.4's weak bound): less is a norm that
# still grows. Every regime rule, the pooled runs of S and the chapters' "decaying run" read this one number.
DECAY_MIN_PCT = 2.0


def _as_arrays(steps: Sequence[float], values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if s.shape != v.shape or s.ndim != 1 or len(s) == 0:
        raise ValueError(f"steps and values must be 1-D of equal, non-zero length; got {s.shape} and {v.shape}")
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    return s, v


def peak_step(steps: Sequence[float], values: Sequence[float], include_init: bool = False) -> float:
    """Step of the maximum value. Step 0 is excluded unless include_init (or it is the only point)."""
    s, v = _as_arrays(steps, values)
    mask = np.ones_like(s, bool) if include_init else s > 0
    if not mask.any():
        mask[:] = True
    idx = np.flatnonzero(mask)[np.argmax(v[mask])]
    return float(s[idx])


def peak_value(steps: Sequence[float], values: Sequence[float], include_init: bool = False) -> float:
    s, v = _as_arrays(steps, values)
    return float(v[s == peak_step(s, v, include_init)][0])


def decay_percent(steps: Sequence[float], values: Sequence[float], include_init: bool = False) -> float:
    """100 * (peak - final) / peak; 0 when the trajectory ends at its peak."""
    s, v = _as_arrays(steps, values)
    peak = peak_value(s, v, include_init)
    if peak <= 0:
        raise ValueError(f"peak value {peak} must be positive to compute a decay percentage")
    return float(100.0 * (peak - v[-1]) / peak)


def value_at(steps: Sequence[float], values: Sequence[float], t: float) -> float:
    """`values` linearly interpolated at step t; NaN outside the logged range of the finite values (a censored
    point) or with fewer than two of them."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    if ok.sum() < 2 or t < s[ok][0] or t > s[ok][-1]:
        return float("nan")
    return float(np.interp(t, s[ok], v[ok]))


def window_values(steps: Sequence[float], values: Sequence[float], t: float, h: float) -> tuple[float, float, float]:
    """The curve at t − 3h, t − h and t + h (`value_at`): its change across a transition at t, (t + h) − (t − h),
    against its change over an equal window before, (t − h) − (t − 3h). NaN where a point was not logged."""
    return tuple(value_at(steps, values, t + k * h) for k in (-3, -1, 1))  # type: ignore[return-value]


def transition_step(steps: Sequence[float], values: Sequence[float], threshold: float, *,
                    direction: str = "above", after: float | None = None) -> float:
    """First logged step (>= `after`) at which values >= threshold ('above') or <= threshold ('below').

    Returns NaN when the threshold is never crossed within the logged steps (the run did not transition within its
    budget). This is the book's operational transition time; chapters choose metric and threshold as parameters.
    """
    s, v = _as_arrays(steps, values)
    if direction not in ("above", "below"):
        raise ValueError(f"direction={direction!r}; choose 'above' or 'below'")
    hit = v >= threshold if direction == "above" else v <= threshold
    if after is not None:
        hit &= s >= after
    idx = np.flatnonzero(hit)
    return float(s[idx[0]]) if len(idx) else float("nan")


@dataclass(frozen=True)
class RegimeRule(Config):
    """Thresholds of the regime classifier, one field each:

    * ``weak_max_decay_percent``: a norm that decays less than this from its peak counts as 'still growing'
      (weak).
    * ``learned_min``: the final value of the *learned* metric (e.g. train accuracy) below which nothing was
      learned (strong regime), whatever the norm does.
    * ``improve_min``: how much the structured metric must rise from its value at the norm peak to its final
      value for an intermediate (transitioning) run.
    * ``structured_min``: after the norm peak the structured metric must also reach this value for an
      intermediate run (e.g. the transition threshold, so that a run counts as transitioned only if it did);
      0 disables it.
    * ``strong_max_decay_percent``: a decay at least this large that does *not* come with an improving
      structured metric is classified strong (learning suppressed), otherwise weak.
    """

    weak_max_decay_percent: float = DECAY_MIN_PCT
    learned_min: float = 0.9
    improve_min: float = 0.05
    structured_min: float = 0.0
    strong_max_decay_percent: float = 100.0

    def validate(self) -> None:
        check_range("weak_max_decay_percent", self.weak_max_decay_percent, 0.0, 100.0)
        check_range("learned_min", self.learned_min, 0.0, 1.0)
        check_range("improve_min", self.improve_min, 0.0, 1.0)
        check_range("structured_min", self.structured_min, 0.0, None)
        check_range("strong_max_decay_percent", self.strong_max_decay_percent, 0.0, 100.0)


def classify_regime(steps: Sequence[float], norm: Sequence[float], learned: Sequence[float],
                    structured: Sequence[float], rule: RegimeRule = RegimeRule()) -> str:
    """Classify one run as 'weak', 'intermediate' or 'strong'.

    norm: ||theta||^2 trajectory; learned: a metric of fitting the training data (e.g. train accuracy in [0, 1]);
    structured: the metric of the structured solution (e.g. accuracy on a shortcut-free test set).

    * strong: the final `learned` value is below rule.learned_min (nothing is learned);
    * weak: the norm decays less than rule.weak_max_decay_percent from its peak (it keeps growing), or it decays
      but the structured metric does not improve (the shortcut persists);
    * intermediate: the norm peaks then decays and the structured metric improves by >= rule.improve_min between
      the norm peak and the end (and reaches rule.structured_min after the peak).
    """
    s, v = _as_arrays(steps, norm)
    _, fit = _as_arrays(steps, learned)
    _, st = _as_arrays(steps, structured)
    if fit[-1] < rule.learned_min:
        return "strong"
    if decay_percent(s, v) < rule.weak_max_decay_percent:
        return "weak"
    at_peak = st[s == peak_step(s, v)][0]
    reached = st[s >= peak_step(s, v)].max()
    if st[-1] - at_peak >= rule.improve_min and reached >= rule.structured_min:
        return "intermediate"
    return "strong" if decay_percent(s, v) >= rule.strong_max_decay_percent else "weak"


def layer_contraction_step(steps: Sequence[float], values: Sequence[float], fraction: float = 0.1) -> float:
    """The book's T_tr for one layer: first logged step after the layer's norm peak at which the norm is at most
    (1 - fraction) x its peak (default 0.9 x peak). NaN when it never contracts that much."""
    s, v = _as_arrays(steps, values)
    peak_at = peak_step(s, v)
    return transition_step(s, v, (1 - fraction) * float(v[s == peak_at][0]), direction="below", after=peak_at)


def summarise_runs(table, by: Sequence[str] = ("run",), *, norm: str = "norm_sq", learned: str = "train_acc",
                   structured: str = "test_acc", structured_threshold: float = 0.9, learned_threshold: float = 0.99,
                   layers: Sequence[str] = (), contraction_fraction: float = 0.1, rule: RegimeRule = RegimeRule()):
    """One row per run of a training table (as returned by nht.run) with the norm-dynamics quantities.

    Columns: T_fit (first step with `learned` >= learned_threshold, the end of shortcut learning; NSDL's T_mem),
    T_struct (first step with `structured` >= structured_threshold: the transition time), delay = T_struct - T_fit,
    V_fit (norm at T_fit: the shortcut solution's V_sc), V_final (norm at the last step: V_st as NSDL's V_post),
    V_peak, peak_step, decay_pct, regime, and for each layer L: peak_step:L, decay_pct:L, contraction_step:L
    (see layer_contraction_step), diverged_step. Times are NaN when a threshold is never reached. A diverged run
    has regime DIVERGED and NaN everywhere else (see `diverged_row`).
    """
    import pandas as pd

    rows = []
    for key, g in table.sort_values("step").groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        diverged = diverged_step(g)
        if np.isfinite(diverged):
            rows.append(diverged_row(dict(zip(by, key)), diverged))
            continue
        s = g["step"].to_numpy(float)
        v = g[norm].to_numpy(float)
        t_fit = transition_step(s, g[learned], learned_threshold)
        t_struct = transition_step(s, g[structured], structured_threshold)
        row = dict(zip(by, key))
        row.update({
            "T_fit": t_fit, "T_struct": t_struct, "delay": t_struct - t_fit,
            "V_fit": float(v[s == t_fit][0]) if np.isfinite(t_fit) else float("nan"),
            "V_final": float(v[-1]), "V_peak": peak_value(s, v), "peak_step": peak_step(s, v),
            "decay_pct": decay_percent(s, v),
            "regime": classify_regime(s, v, g[learned], g[structured], rule),
            f"final_{learned}": float(g[learned].iloc[-1]), f"final_{structured}": float(g[structured].iloc[-1]),
        })
        for layer in layers:
            lv = g[f"{norm}:{layer}"].to_numpy(float)
            row[f"peak_step:{layer}"] = peak_step(s, lv)
            row[f"decay_pct:{layer}"] = decay_percent(s, lv)
            row[f"contraction_step:{layer}"] = layer_contraction_step(s, lv, contraction_fraction)
        rows.append({**row, "diverged_step": float("nan")})
    columns = [*by, "T_fit", "T_struct", "delay", "V_fit", "V_final", "V_peak", "peak_step", "decay_pct", "regime",
               f"final_{learned}", f"final_{structured}",
               *[f"{q}:{layer}" for layer in layers for q in ("peak_step", "decay_pct", "contraction_step")],
               "diverged_step"]
    return pd.DataFrame(rows).reindex(columns=columns)  # every column, also when every run diverged


def regime_counts(regimes: Sequence[str]) -> str:
    """How many seeds fell in each regime, as "weak/intermediate/strong" counts, e.g. "0/2/1"; diverged seeds are
    counted apart, e.g. "0/1/1 (+1 diverged)"."""
    regimes = list(regimes)
    counts = "/".join(str(regimes.count(r)) for r in REGIMES)
    n_diverged = regimes.count(DIVERGED)
    return counts + (f" (+{n_diverged} diverged)" if n_diverged else "")


def majority_regime(regimes: Sequence[str]) -> str:
    """The most common regime among the seeds that did not diverge (ties broken towards 'intermediate', then
    'weak'); DIVERGED only when every seed diverged."""
    regimes = [r for r in regimes if r != DIVERGED]
    if not regimes:
        return DIVERGED
    counts = {r: regimes.count(r) for r in REGIMES}
    best = max(counts.values())
    for r in ("intermediate", "weak", "strong"):
        if counts[r] == best:
            return r
    raise AssertionError
