"""The S spectrum: NHT's clean-norm-separation score, one value per domain, gathered across chapters.

NHT reports S ≈ 1.0 (modular arithmetic), 0.5–0.7 (CIFAR-10 borders), −0.11 (CelebA) and ≈ 0 (Waterbirds) without a
formula (shared/papers/nht.md §1.5). The book's estimator is ours: S_traj (`s_traj`; `per_run` for every run of a table), the Spearman
correlation between ‖θ‖² and a shortcut-reliance signal φ over one run's contraction phase, averaged over the
runs of a domain's intermediate regime. `sharpness` adds Def. 4.1 (iii): W, the time φ̂ takes to fall from 0.8 to
0.2 in units of the escape time (the book calls a separation "clean" when S_traj ≥ 0.8 and W ≤ 0.5, nht.md §1.5).

Every chapter that has such runs records its per-run scores with `record(...)` (results/<scale>/<chapter>/
separation-<domain>.csv, next to its claims; one file per domain); chapter 4 gathers them with `load(scale)` and
`spectrum(...)` and sets them beside `PAPER_S`. A domain whose chapter has not been run at that scale simply has no rows.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from nhtlib.analysis import regimes
from nhtlib.config import ConfigError
from nhtlib.paths import chapter_dir, chapter_files

COLUMNS = ["domain", "chapter", "weight_decay", "seed", "regime", "pooled", "S", "signal", "scale"]
# the paper's values (Table 3, §5.9): domain -> (number for plots, as printed)
PAPER_S = {"modular arithmetic": (1.0, "≈ 1.0"), "CIFAR-10 borders": (0.6, "0.5–0.7"), "CelebA": (-0.11, "−0.11"),
           "Waterbirds": (0.0, "≈ 0.0")}
# Def. 4.1 (iii)'s sharpness W times the fall of φ̂ between these two levels (nht.md §1.5 item 3: from 0.8 to 0.2,
# i.e. the central 60 % of the fall, so a slow start or tail does not count)
SHARP_HIGH, SHARP_LOW = 0.8, 0.2


def _file_name(domain: str) -> str:
    slug = "".join(ch if ch.isalnum() else "-" for ch in domain.lower()).strip("-")
    return f"separation-{slug}.csv"


def s_traj(steps: Sequence[float], norm: Sequence[float], reliance: Sequence[float], *,
                     start: float | None = None, min_points: int = 3) -> float:
    """The book's trajectory estimator S_traj of NHT's clean norm separation (shared/papers/nht.md §1.5): the Spearman
    correlation between ‖θ‖² and a shortcut-reliance signal over the logged points from `start` (default: the
    norm's peak step, i.e. the contraction phase) to the end. S ~ 1: reliance falls exactly as the norm falls.
    NaN with fewer than `min_points` points or a constant series."""
    from scipy.stats import spearmanr

    s, v = np.asarray(steps, dtype=float), np.asarray(norm, dtype=float)
    r = np.asarray(reliance, dtype=float)
    t0 = regimes.peak_step(s, v) if start is None else start
    keep = s >= t0 if np.isfinite(t0) else np.zeros_like(s, bool)
    if keep.sum() < min_points or np.ptp(v[keep]) == 0 or np.ptp(r[keep]) == 0:
        return float("nan")
    return float(spearmanr(v[keep], r[keep]).statistic)


def sharpness(steps: Sequence[float], norm: Sequence[float], reliance: Sequence[float], *, rate: float,
              high: float = SHARP_HIGH, low: float = SHARP_LOW) -> float:
    """The sharpness W of Def. 4.1 (iii) for one run (shared/papers/nht.md §1.5, item 3): how long the shortcut
    signal takes to fall, in units of the escape time,

        W = (e_{φ̂=low} − e_{φ̂=high}) / T_escape,   T_escape = log(V_peak / V_final) / rate,

    dimensionless (steps / steps). φ̂ is `reliance` min–max normalised over the run; e_{φ̂=high} is the first logged
    step at or after φ̂'s maximum with φ̂ ≤ `high`, e_{φ̂=low} the first logged step from there on with φ̂ ≤ `low`
    (so the resolution is one logging interval). V = `norm` (‖θ‖², squared norm); V_peak its maximum after step 0,
    V_final its last value; `rate` is γ_V, the per-step contraction rate of V (2ηλ for pure decoupled decay).
    W ≤ 0.5 with S_traj ≥ 0.8 is the book's "clean" separation. NaN when φ̂ is constant, when it does not complete
    its fall within the run (a censored transition: nothing to time), or when the norm does not contract."""
    s, v = np.asarray(steps, dtype=float), np.asarray(norm, dtype=float)
    r = np.asarray(reliance, dtype=float)
    order = np.argsort(s, kind="stable")
    s, v, r = s[order], v[order], r[order]
    if len(s) < 2 or not (np.isfinite(r).all() and np.isfinite(v).all()) or np.ptp(r) == 0 or not rate > 0:
        return float("nan")
    phi = (r - r.min()) / np.ptp(r)
    top = int(np.argmax(phi))
    below_high = np.flatnonzero((np.arange(len(s)) >= top) & (phi <= high))
    if not len(below_high):
        return float("nan")
    below_low = np.flatnonzero((np.arange(len(s)) >= below_high[0]) & (phi <= low))
    v_peak, v_final = regimes.peak_value(s, v), float(v[-1])
    if not len(below_low) or not (v_peak > v_final > 0):
        return float("nan")
    t_escape = float(np.log(v_peak / v_final)) / rate
    return float(s[below_low[0]] - s[below_high[0]]) / t_escape


def per_run(table: pd.DataFrame, by: Sequence[str], reliance: str, *, time: str = "step", norm: str = "norm_sq",
            start: pd.Series | None = None, min_points: int = 3) -> pd.Series:
    """S_traj of every run of a training table (one row per logged step): the Spearman correlation of `norm` and the
    shortcut-reliance column `reliance` over the run's points from `start` on (a Series indexed like the runs, e.g.
    T_mem; default: the norm's peak). Indexed by the `by` columns, named "S"; NaN where a run has too few points
    or diverged."""
    by = list(by)
    keys, values = [], []
    for key, g in table.sort_values(time).groupby(by, sort=True):
        key = key[0] if len(by) == 1 else key
        t0 = start.get(key, np.nan) if start is not None else None
        keys.append(key)
        if np.isfinite(regimes.diverged_step(g)):  # a diverged run has no contraction phase to score
            values.append(np.nan)
            continue
        values.append(s_traj(g[time], g[norm], g[reliance], start=t0, min_points=min_points))
    index = pd.MultiIndex.from_tuples(keys, names=by) if len(by) > 1 else pd.Index(keys, name=by[0])
    return pd.Series(values, index=index, name="S", dtype=float)


def paper_value(domain: str) -> tuple[float, str]:
    """The paper's S for a domain (a stand-in such as "Waterbirds (CUB stand-in)" maps to its data set), or
    (NaN, "—") where the paper gives none."""
    return PAPER_S.get(domain.split(" (")[0], (float("nan"), "—"))


def pooled(regime: pd.Series, decay_pct: pd.Series, min_decay: float = regimes.DECAY_MIN_PCT) -> pd.Series:
    """Which runs enter a domain's S: its intermediate-regime runs, or, when it has none, every run whose norm
    decays by at least `min_decay` % from its peak (S_traj needs a contraction phase). Boolean, indexed like the
    inputs (one entry per run)."""
    if (regime == "intermediate").any():
        return regime == "intermediate"
    return decay_pct >= min_decay


def record(chapter: str, scale: str, domain: str, scores: pd.DataFrame, *, signal: str) -> Path:
    """Save one chapter's per-run scores.

    scores: one row per run with columns weight_decay, seed, S (NaN allowed: too few points), regime and pooled
    (bool: the run enters the domain's S, normally the intermediate-regime runs). signal: what φ is, in words.
    """
    missing = {"weight_decay", "seed", "S", "regime", "pooled"} - set(scores.columns)
    if missing:
        raise ConfigError(f"separation scores need columns {sorted(missing)}; got {sorted(scores.columns)}")
    frame = scores.assign(domain=domain, chapter=chapter, signal=signal, scale=scale)[COLUMNS]
    frame = frame.astype({"seed": int, "pooled": bool})
    from nhtlib.paths import atomic_write_bytes

    path = chapter_dir(chapter, scale) / _file_name(domain)
    atomic_write_bytes(path, frame.to_csv(index=False).encode())
    return path


def load(scale: str) -> pd.DataFrame:
    """Every chapter's recorded scores at this scale (one row per run), from the default (book-seed) folders; while
    the chapter runner stages a chapter, that chapter's fresh files (see `nht.paths.chapter_files`)."""
    files = chapter_files(scale, "separation-*.csv")
    frames = [pd.read_csv(f) for f in files]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["pooled"] = out.pooled.astype(bool)
    return out


def spectrum(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per domain from the pooled runs: n runs (and seeds), mean S, sd, standard error, min, max, the
    λ's pooled, and the paper's value where it gives one."""
    rows = []
    for domain, g in scores.groupby("domain", sort=False):
        s = g[g.pooled].S.dropna().to_numpy(float)
        rows.append({
            "domain": domain, "chapter": g.chapter.iloc[0], "signal φ": g.signal.iloc[0], "runs": len(s),
            "seeds": g[g.pooled & g.S.notna()].seed.nunique(),
            "λ pooled": ", ".join(f"{v:g}" for v in sorted(g[g.pooled].weight_decay.unique())),
            "S (mean)": float(np.mean(s)) if len(s) else np.nan,
            "sd": float(np.std(s, ddof=1)) if len(s) > 1 else np.nan,
            "sem": float(np.std(s, ddof=1) / np.sqrt(len(s))) if len(s) > 1 else np.nan,
            "min": float(np.min(s)) if len(s) else np.nan, "max": float(np.max(s)) if len(s) else np.nan,
            "paper S": paper_value(domain)[1],
        })
    return pd.DataFrame(rows)
