"""Norm-dynamics summary of vision runs (NHT's CIFAR-10 chapter): the §1.4 regime thresholds and the transition
times the paper leaves undefined (shared/papers/nht.md §1.4 and §7.1).

* regime from the norm trajectory **and what the model did** (`classify_vision_regime`): decay D = 100 (V_peak −
  V_final) / V_peak over epochs ≥ 1. strong when the norm never rises above its initial value (suppressed from the
  first log on); weak when D < weak_max_decay (2 %: the norm still grows); intermediate (a delayed transition) when
  the norm peaks after the first `early_peak_fraction` (10 %) of the epochs and contracts **and** the model leaves
  the shortcut between the norm's peak and the end (`left_shortcut`: the clean, structured accuracy ends at least
  `improve_min` above its best up to the peak without the reliance growing, or the shortcut reliance falls by at
  least `reliance_drop_min`); strong when the peak is that early (suppressed from the start) or, without a
  transition, D ≥ strong_min_decay (35 %); weak otherwise (the norm contracts but the shortcut persists). A shortcut the model cannot leave (ρ = 1) therefore never reads
  intermediate. `classify_norm_regime` keeps the norm-only labels; `VisionRegimeRule` holds the thresholds.
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

from nhtlib.config import Config, check_range
from nhtlib.analysis.regimes import DECAY_MIN_PCT, decay_percent, diverged_row, diverged_step, layer_contraction_step, majority_regime, peak_step, peak_value, regime_counts, transition_step

TRANSITION_TIMES = ("head_peak", "head_contraction", "clean_acc")


@dataclass(frozen=True)
class VisionRegimeRule(Config):
    """Thresholds of the norm-only regime rule (book defaults of shared/papers/nht.md §1.4)."""

    weak_max_decay: float = DECAY_MIN_PCT  # % from the peak: less is a norm that still grows (nht.md §1.4)
    strong_min_decay: float = 35.0  # % from the peak: more, without a transition, is suppression (§1.4)
    early_peak_fraction: float = 0.1  # a peak this early in the budget, without a transition, is suppression
    below_init_is_strong: bool = True  # a norm that never rises above init was suppressed from the first log
    improve_min: float = 0.05  # a transition: the clean accuracy rises ≥ 5 points after the norm peak (as the toy)
    reliance_drop_min: float = 0.2  # ... or the shortcut reliance falls ≥ 0.2 (two of CIFAR's ten gray images)

    def validate(self) -> None:
        check_range("weak_max_decay", self.weak_max_decay, 0.0, 100.0)
        check_range("strong_min_decay", self.strong_min_decay, self.weak_max_decay, 100.0)
        check_range("early_peak_fraction", self.early_peak_fraction, 0.0, 1.0)
        check_range("improve_min", self.improve_min, 0.0, 1.0)
        check_range("reliance_drop_min", self.reliance_drop_min, 0.0, 1.0)


def classify_norm_regime(steps: Sequence[float], norm: Sequence[float], rule: VisionRegimeRule = VisionRegimeRule()
                         ) -> str:
    """'weak' | 'intermediate' | 'strong' from one ||theta||^2 trajectory (step 0 = init is excluded from the peak).

    With `rule.below_init_is_strong`, a run whose norm never rises above its value at step 0 is 'strong' whatever its
    decay: the decay suppressed it from the first log on (a collapse to a tiny, flat norm would otherwise read as
    "no decay", i.e. weak)."""
    s = np.asarray(steps, dtype=float)
    v = np.asarray(norm, dtype=float)
    if rule.below_init_is_strong and s[0] == 0 and len(s) > 1 and peak_value(s, v) < v[0]:
        return "strong"
    d = decay_percent(s, norm)
    if d < rule.weak_max_decay:
        return "weak"
    early = peak_step(s, norm) < rule.early_peak_fraction * s[-1]
    return "intermediate" if d < rule.strong_min_decay and not early else "strong"


def left_shortcut(steps: Sequence[float], norm: Sequence[float], clean: Sequence[float] | None = None,
                  reliance: Sequence[float] | None = None, rule: VisionRegimeRule = VisionRegimeRule()) -> bool:
    """Did the model leave the shortcut after the norm's peak? Either the clean accuracy ends ≥ rule.improve_min
    above the best it reached up to the peak (a dip and its recovery is no transition) while the shortcut reliance
    did not grow by rule.reliance_drop_min or more (a model moving onto the shortcut is not leaving it), or the
    shortcut reliance ends ≥ rule.reliance_drop_min below its value at the peak."""
    s = np.asarray(steps, dtype=float)
    upto = s <= peak_step(s, norm)
    at_peak = np.flatnonzero(upto)[-1]
    r = None if reliance is None else np.asarray(reliance, dtype=float)
    if r is not None and r[at_peak] - r[-1] >= rule.reliance_drop_min:
        return True
    if clean is not None:
        c = np.asarray(clean, dtype=float)
        onto_shortcut = r is not None and r[-1] - r[at_peak] >= rule.reliance_drop_min
        if c[-1] - c[upto].max() >= rule.improve_min and not onto_shortcut:
            return True
    return False


def classify_vision_regime(steps: Sequence[float], norm: Sequence[float], clean: Sequence[float] | None = None,
                           reliance: Sequence[float] | None = None, rule: VisionRegimeRule = VisionRegimeRule()
                           ) -> str:
    """'weak' | 'intermediate' | 'strong' from one run: its ‖θ‖² trajectory and what the model did (the clean
    accuracy and/or the shortcut reliance per logged epoch; see the module docstring). Intermediate needs both a
    norm that peaks and contracts and a model that leaves the shortcut."""
    s = np.asarray(steps, dtype=float)
    v = np.asarray(norm, dtype=float)
    if rule.below_init_is_strong and s[0] == 0 and len(s) > 1 and peak_value(s, v) < v[0]:
        return "strong"
    if decay_percent(s, v) < rule.weak_max_decay:
        return "weak"
    if peak_step(s, v) < rule.early_peak_fraction * s[-1]:
        return "strong"  # suppressed from the start: a change right after an early peak is no *delayed* transition
    if left_shortcut(s, v, clean, reliance, rule):
        return "intermediate"
    return "strong" if decay_percent(s, v) >= rule.strong_min_decay else "weak"


def summarise(table: pd.DataFrame, by: Sequence[str], *, time: str = "epoch", layers: Sequence[str] = (),
              head: str = "head", clean: str = "clean_acc", clean_threshold: float = 0.5,
              reliance: str | None = None, contraction_fraction: float = 0.1,
              rule: VisionRegimeRule = VisionRegimeRule()) -> pd.DataFrame:
    """One row per run, in the column schema of `nht.regimes.summarise_runs`: V_peak, peak_step (time of the total
    norm's maximum, in the `time` unit), decay_pct, regime (`classify_vision_regime` on the norm, the `clean`
    accuracy and, when given, the shortcut-reliance column `reliance`), norm_regime (NHT's norm-only label),
    the final value of every accuracy column, per layer L
    peak_step:L / decay_pct:L, and the three transition times T_head_peak,
    T_head_contraction, T_clean_acc (NaN when never reached), diverged_step (a diverged run: regime "diverged",
    NaN elsewhere)."""
    rows = []
    acc_cols = [c for c in table.columns if c.endswith("_acc")]
    for key, g in table.sort_values(time).groupby(list(by), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        diverged = diverged_step(g)
        if np.isfinite(diverged):  # a diverged run is not a regime: NaN quantities, regime "diverged"
            rows.append(diverged_row(dict(zip(by, key)), diverged))
            continue
        t = g[time].to_numpy(float)
        v = g["norm_sq"].to_numpy(float)
        hv = g[f"norm_sq:{head}"].to_numpy(float)
        row = dict(zip(by, key))
        row.update({"V_peak": peak_value(t, v), "V_final": float(v[-1]), "peak_step": peak_step(t, v),
                    "decay_pct": decay_percent(t, v),
                    "regime": classify_vision_regime(t, v, g[clean].to_numpy(float),
                                                     g[reliance].to_numpy(float) if reliance else None, rule),
                    "norm_regime": classify_norm_regime(t, v, rule)})
        row.update({f"final_{c}": float(g[c].iloc[-1]) for c in acc_cols})
        for layer in dict.fromkeys([head, *layers]):
            lv = g[f"norm_sq:{layer}"].to_numpy(float)
            row[f"peak_step:{layer}"] = peak_step(t, lv)
            row[f"decay_pct:{layer}"] = decay_percent(t, lv)
        # the head's peak counts as a transition only when the head norm then contracts (else the run is censored)
        row["T_head_peak"] = peak_step(t, hv) if decay_percent(t, hv) >= rule.weak_max_decay else float("nan")
        row["T_head_contraction"] = layer_contraction_step(t, hv, contraction_fraction)
        row["T_clean_acc"] = transition_step(t, g[clean], clean_threshold, after=t[t > 0].min() if (t > 0).any()
                                             else None)
        rows.append({**row, "diverged_step": float("nan")})
    columns = [*by, "V_peak", "V_final", "peak_step", "decay_pct", "regime", "norm_regime", *[f"final_{c}" for c in acc_cols],
               *[f"{q}:{layer}" for layer in dict.fromkeys([head, *layers]) for q in ("peak_step", "decay_pct")],
               "T_head_peak", "T_head_contraction", "T_clean_acc", "diverged_step"]
    return pd.DataFrame(rows).reindex(columns=columns)  # every column, also when every run diverged


def regime_table(summary: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """One row per cell of `by` (e.g. per λ) from a `summarise` table (one row per run): the majority regime, the
    seeds per regime ("w/i/s"), and the means of the peak time, decay % (with its sd over seeds), V_peak and V_final
    (with its sd). A chapter joins its own accuracy columns to it."""
    g = summary.groupby(by)
    return pd.DataFrame({
        "regime": g.regime.agg(majority_regime), "seeds (w/i/s)": g.regime.agg(regime_counts),
        "peak epoch": g.peak_step.mean().round(1), "decay %": g.decay_pct.mean().round(1),
        "decay % sd": g.decay_pct.std().round(1), "V_peak": g.V_peak.mean().round(0),
        "V_final": g.V_final.mean().round(0), "V_final sd": g.V_final.std().round(0),
    })


def left_shortcut_runs(summary: pd.DataFrame, table: pd.DataFrame, *, clean: str, reliance: str,
                       clean_label: str = "clean", keys: Sequence[str] = ("lam", "seed"),
                       time: str = "epoch") -> pd.DataFrame:
    """The runs of a `summarise` table that left the shortcut (regime intermediate: the norm peaked after the first
    10 % of the budget and contracted while the model left the shortcut, `left_shortcut`), one row each: the run's
    keys (λ as "λ"), its peak time (in `time` units, e.g. epochs) and decay %, the best `clean` accuracy up to the
    peak and the final one (%, named "<clean_label> % up to the peak" / "… final"), the `reliance` at the peak and at
    the end. `table` is the run table the summary was made from (one row per log)."""
    keys = list(keys)
    names = ["λ" if k == "lam" else k for k in keys]
    columns = names + [f"peak {time}", "decay %", f"{clean_label} % up to the peak", f"{clean_label} % final",
                       "reliance at the peak", "reliance final"]
    rows = []
    for r in summary[summary.regime == "intermediate"].itertuples(index=False):
        run = np.logical_and.reduce([table[k] == getattr(r, k) for k in keys])
        g = table[run].sort_values(time)
        upto = g[g[time] <= r.peak_step]
        rows.append(dict(zip(names, (getattr(r, k) for k in keys))) | {
            f"peak {time}": r.peak_step, "decay %": r.decay_pct,
            f"{clean_label} % up to the peak": 100 * upto[clean].max(), f"{clean_label} % final": 100 * g[clean].iloc[-1],
            "reliance at the peak": upto[reliance].iloc[-1], "reliance final": g[reliance].iloc[-1]})
    out = pd.DataFrame(rows, columns=columns)
    if "seed" in out:
        out["seed"] = out["seed"].astype(int)
    return out
