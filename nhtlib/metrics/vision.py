"""Norm-dynamics summary of vision runs (NHT's CIFAR-10 chapter): the §1.4 regime thresholds and the transition
times the paper leaves undefined (shared/papers/nht.md §1.4 and §7.1).

* regime from the *norm trajectory alone* (NHT's Fig. 1 labels): decay D = 100 (V_peak - V_final) / V_peak over
  epochs >= 1; weak if D < weak_max_decay (2%); intermediate if D < strong_min_decay (35%) and the peak is not in
  the first `early_peak_fraction` (10%) of the epochs; strong otherwise (large decay, or a decay from an early peak:
  the norm is suppressed from the start). `VisionRegimeRule` holds the thresholds.
* transition times (in the trajectory's step unit, e.g. epochs), one of which a chapter picks as a parameter:
  ``head_peak`` (T_peak: epoch of the head norm's maximum, NaN unless the head norm then decays by at least
  `weak_max_decay` %), ``head_contraction`` (T_tr: first epoch after that peak
  with head norm <= (1 - fraction) x peak) and ``clean_acc`` (first epoch with clean accuracy >= a threshold).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..config import Config, check_range
from ..regimes import decay_percent, layer_contraction_step, peak_step, peak_value, transition_step
from ..regimes import separation_score  # noqa: F401  (S_traj: one implementation, in regimes)

TRANSITION_TIMES = ("head_peak", "head_contraction", "clean_acc")


@dataclass(frozen=True)
class VisionRegimeRule(Config):
    """Thresholds of the norm-only regime rule (book defaults of shared/papers/nht.md §1.4)."""

    weak_max_decay: float = 2.0
    strong_min_decay: float = 35.0
    early_peak_fraction: float = 0.1

    def validate(self) -> None:
        check_range("weak_max_decay", self.weak_max_decay, 0.0, 100.0)
        check_range("strong_min_decay", self.strong_min_decay, self.weak_max_decay, 100.0)
        check_range("early_peak_fraction", self.early_peak_fraction, 0.0, 1.0)


def classify_norm_regime(steps: Sequence[float], norm: Sequence[float], rule: VisionRegimeRule = VisionRegimeRule()
                         ) -> str:
    """'weak' | 'intermediate' | 'strong' from one ||theta||^2 trajectory (step 0 = init is excluded from the peak)."""
    s = np.asarray(steps, dtype=float)
    d = decay_percent(s, norm)
    if d < rule.weak_max_decay:
        return "weak"
    early = peak_step(s, norm) < rule.early_peak_fraction * s[-1]
    return "intermediate" if d < rule.strong_min_decay and not early else "strong"


def summarise(table: pd.DataFrame, by: Sequence[str], *, time: str = "epoch", layers: Sequence[str] = (),
              head: str = "head", clean: str = "clean_acc", clean_threshold: float = 0.5,
              contraction_fraction: float = 0.1, rule: VisionRegimeRule = VisionRegimeRule()) -> pd.DataFrame:
    """One row per run: V_peak, peak (time of the total norm's maximum), decay_pct, regime, the final value of every
    accuracy column, per layer L peak:L / decay_pct:L, and the three transition times T_head_peak,
    T_head_contraction, T_clean_acc (NaN when never reached)."""
    rows = []
    acc_cols = [c for c in table.columns if c.endswith("_acc")]
    for key, g in table.sort_values(time).groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        t = g[time].to_numpy(float)
        v = g["norm_sq"].to_numpy(float)
        hv = g[f"norm_sq:{head}"].to_numpy(float)
        row = dict(zip(by, key))
        row.update({"V_peak": peak_value(t, v), "V_final": float(v[-1]), "peak": peak_step(t, v),
                    "decay_pct": decay_percent(t, v), "regime": classify_norm_regime(t, v, rule)})
        row.update({f"final_{c}": float(g[c].iloc[-1]) for c in acc_cols})
        for layer in dict.fromkeys([head, *layers]):
            lv = g[f"norm_sq:{layer}"].to_numpy(float)
            row[f"peak:{layer}"] = peak_step(t, lv)
            row[f"decay_pct:{layer}"] = decay_percent(t, lv)
        # the head's peak counts as a transition only when the head norm then contracts (else the run is censored)
        row["T_head_peak"] = peak_step(t, hv) if decay_percent(t, hv) >= rule.weak_max_decay else float("nan")
        row["T_head_contraction"] = layer_contraction_step(t, hv, contraction_fraction)
        row["T_clean_acc"] = transition_step(t, g[clean], clean_threshold, after=t[t > 0].min() if (t > 0).any()
                                             else None)
        rows.append(row)
    return pd.DataFrame(rows)

