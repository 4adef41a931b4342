"""Statistics over seeds, in one home: per-seed values to an interval, Spearman correlations, paired differences.

The design note (shared/design/verdicts.md): **the unit of replication is a seed.** A claim's statistic is computed per
seed (`per_seed`), then summarised by `interval` into an `Estimate` — the mean and its 95 % t-interval over seeds at
every n (`scipy.stats.t`: a percentile bootstrap over 6–10 seeds covers only 88–90 % of the time for a nominal 95 %;
`tests/test_interval_coverage.py` holds the coverage at n = 3, 6, 10). A statistic that exists only across runs (one
fit over a whole grid) gets its interval from `seed_bootstrap`: seeds drawn with replacement and refitted, the
spread of the refits as a standard error, with a t quantile on n − 1 degrees of freedom (a percentile interval of
the refits under-covers at these n; the coverage is tested too); a spread across seeds (a standard deviation) gets
the chi-square interval of `sd_interval`; a share of exchangeable runs (runs as the unit) gets the Wilson interval of
`share_interval`, widened by the design effect of runs clustered in seeds. Fewer than `MIN_UNITS` units decide
nothing (`Estimate.decided`). Power: `units_to_decide` (`units_to_clear` for a t-interval) gives the units at which an
interval, its centre and spread as measured (`interval_at`), would clear a rule's bound — the read-out an undecided
claim shows — and `units_to_decide_if_wider` the same at the upper confidence bound of the spread (few seeds
measure a spread poorly: the first count is the optimistic one). The verdict rules (`nhtlib.report.verdicts`) and
the forecaster's prediction interval (`nhtlib.analysis.forecast`) read these.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

LEVEL = 0.95  # every interval of the book is a 95 % interval
MIN_UNITS = 3  # fewer seeds (or runs, where runs are the unit) decide nothing
MOST_UNITS = 100  # a power read-out stops here: an effect that needs more units is too small to chase
N_BOOT = 4000  # seed resamples of `seed_bootstrap` (its standard error moves by < 2 % beyond ~2,000)
BOOT_SEED = 0  # fixed, so a re-run of the same table gives the same interval


@dataclass(frozen=True)
class Estimate:
    """A measured statistic: its point value (mean over units), the 95 % interval [low, high], the number of units
    n, what the units are ('seeds', 'runs'), the method ('t'; 'bootstrap-se': a seed bootstrap's standard error with a
    t quantile; 'chi-square', 'exact', 'none') and the per-unit values.
    low = high = value for a constant statistic (a decided result); NaN interval with fewer than 2 units."""

    value: float
    low: float
    high: float
    n: int
    unit: str = "seeds"
    method: str = "t"
    values: tuple[float, ...] = ()

    @property
    def decided(self) -> bool:
        """True when there are enough units and a finite interval, so that a rule may decide on it."""
        return self.n >= MIN_UNITS and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def width(self) -> float:
        return self.high - self.low

    def text(self, digits: int = 2) -> str:
        """e.g. "−0.97 [−1.00, −0.91], n = 3 seeds" (the form every claims row shows); a statistic every unit gave
        alike reads "all 3 seeds: −1.00" (its interval is that one value)."""
        units = self.unit[:-1] if self.n == 1 and self.unit.endswith("s") else self.unit  # "1 seed", "3 seeds"
        if not math.isfinite(self.value):
            return f"no value (n = {self.n} {units})"
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{_num(self.value, digits)} (no interval), n = {self.n} {units}"
        if self.method == "exact":
            return f"all {self.n} {units}: {_num(self.value, digits)}"
        return f"{_num(self.value, digits)} [{_num(self.low, digits)}, {_num(self.high, digits)}], n = {self.n} {units}"

    def __str__(self) -> str:
        return self.text()


def _num(x: float, digits: int) -> str:
    if abs(x) >= 1000:
        return f"{x:,.0f}".replace("-", "−")
    return f"{x:.{digits}f}".replace("-", "−")


def t_quantile(n: int, level: float = LEVEL) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, n - 1))


def interval(values: Sequence[float], unit: str = "seeds", level: float = LEVEL,
             bounds: tuple[float, float] | None = None) -> Estimate:
    """The mean of per-unit statistics with its `level` interval (see the module docstring). NaN values are left
    out (a seed whose statistic does not exist, e.g. no transition, is not a unit of evidence). bounds: the
    statistic's own range (e.g. (−1, 1) for a correlation, (0, 1) for a share): a t-interval is clipped to it."""
    estimate = _interval(values, unit, level)
    if bounds is None or not math.isfinite(estimate.low):
        return estimate
    low, high = max(estimate.low, bounds[0]), min(estimate.high, bounds[1])
    return Estimate(estimate.value, low, high, estimate.n, estimate.unit, estimate.method, estimate.values)


def _interval(values: Sequence[float], unit: str, level: float) -> Estimate:
    from scipy.stats import t

    x = np.asarray([v for v in values if v is not None and math.isfinite(float(v))], dtype=float)
    n = len(x)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, unit, "none")
    mean = float(x.mean())
    if n == 1:
        return Estimate(mean, float("nan"), float("nan"), 1, unit, "none", tuple(x))
    if np.ptp(x) == 0:
        return Estimate(mean, mean, mean, n, unit, "exact", tuple(x))
    low, high = t.interval(level, n - 1, loc=mean, scale=float(x.std(ddof=1)) / math.sqrt(n))
    return Estimate(mean, float(low), float(high), n, unit, "t", tuple(x))


def sd_interval(values: Sequence[float], unit: str = "seeds", level: float = LEVEL) -> Estimate:
    """The sample standard deviation (ddof = 1) of per-unit values with its chi-square `level` interval,
    s·√((n−1)/χ²₁₋α/₂) to s·√((n−1)/χ²α/₂) for normal values — the spread of a result across seeds (NHT Table 2 #5).
    A bootstrap cannot stand in here: with 3 seeds some resamples repeat one seed three times, so its lower end is
    always 0. With 3 seeds the interval runs from 0.52 s to 6.3 s; NaN values are left out."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(float(v))], dtype=float)
    n = len(x)
    if n < 2:
        return Estimate(float("nan"), float("nan"), float("nan"), n, unit, "none", tuple(x))
    sd = float(x.std(ddof=1))
    low, high = chi_square_bounds(sd, n, level)
    return Estimate(sd, low, high, n, unit, "chi-square", tuple(x))


def chi_square_bounds(sd: float, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The chi-square `level` interval (low, high) of a standard deviation `sd` measured on n normal values."""
    from scipy.stats import chi2

    return (sd * math.sqrt((n - 1) / chi2.ppf(0.5 + level / 2, n - 1)),
            sd * math.sqrt((n - 1) / chi2.ppf(0.5 - level / 2, n - 1)))


def seed_bootstrap(groups: Mapping[Any, Any], statistic: Callable[[list], float], *, level: float = LEVEL,
                   n_boot: int = N_BOOT, seed: int = BOOT_SEED, unit: str = "seeds") -> Estimate:
    """A statistic that exists only across seeds (one fit over the whole grid): the value on all seeds, and a
    bootstrap-standard-error t-interval: value ± t(n − 1) · √(n / (n − 1)) · sd of `statistic` over seed-level
    resamples (draw seeds with replacement, refit). The √(n / (n − 1)) undoes the bootstrap's n-divisor, so for the mean
    of per-seed values this is the t-interval of `interval`; the percentile interval of the refits would cover only
    ~88 % at 6–10 seeds (coverage tested at n = 3, 6, 10 on a pooled slope).

    groups: {seed: that seed's data (e.g. its rows of a table)}; statistic(list of group data) -> float (NaN when
    the resample cannot be fitted; such resamples are dropped)."""
    keys = list(groups)
    n = len(keys)
    value = float(statistic([groups[k] for k in keys])) if n else float("nan")
    if n < 2 or not math.isfinite(value):
        return Estimate(value, float("nan"), float("nan"), n, unit, "none")
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        pick = rng.integers(0, n, n)
        s = statistic([groups[keys[i]] for i in pick])
        if s is not None and math.isfinite(s):
            draws.append(s)
    if len(draws) < 2:
        return Estimate(value, float("nan"), float("nan"), n, unit, "none")
    half = t_quantile(n, level) * math.sqrt(n / (n - 1)) * float(np.std(draws, ddof=1))
    return Estimate(value, value - half, value + half, n, unit, "bootstrap-se")


def share_interval(successes: Sequence[int], trials: Sequence[int], level: float = LEVEL) -> Estimate:
    """A share of runs with the run as the unit: successes / trials summed over seeds, with its Wilson `level`
    interval. successes[i], trials[i]: the counts of seed i (runs of one seed may not be independent, so the
    Wilson interval uses the effective number of runs n / deff, where the design effect deff ≥ 1 is the ratio of
    the between-seed (cluster) variance of the share to the binomial one; one seed, or seeds that agree, give
    deff = 1). The estimate's unit is 'runs' and n the number of runs; fewer than MIN_UNITS runs decide nothing."""
    y, m = np.asarray(successes, float), np.asarray(trials, float)
    keep = m > 0
    y, m = y[keep], m[keep]
    n = int(m.sum())
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, "runs", "none")
    p = float(y.sum() / n)
    k = len(m)
    deff = 1.0
    if k > 1 and 0 < p < 1:
        cluster_var = k / (k - 1) * float(((y - p * m) ** 2).sum()) / n ** 2
        deff = max(1.0, cluster_var / (p * (1 - p) / n))
    low, high = wilson(p, n / deff, level)
    method = "Wilson" if deff == 1.0 else f"Wilson, clustered by seed (deff {deff:.2f})"
    return Estimate(p, low, high, n, "runs", method)


def wilson(p: float, n_eff: float, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson `level` interval (low, high) of a share p over n_eff effective runs (runs / design effect)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff ** 2))
    return max(0.0, centre - half), min(1.0, centre + half)


def runs_needed(bound: float, level: float = LEVEL) -> int:
    """The runs, all successes, that put a Wilson `level` interval's lower end above `bound` (n / (n + z²) > bound):
    how many runs a share claim "all runs" needs before it can be decided."""
    from scipy.stats import norm

    z2 = float(norm.ppf(0.5 + level / 2)) ** 2
    return int(math.floor(bound * z2 / (1 - bound))) + 1


def seeds_needed(sd: float, limit: float, most: int = 100, level: float = LEVEL) -> int | None:
    """The seeds that put the chi-square `level` upper bound of a measured standard deviation `sd` (`sd_interval`)
    below `limit`; None beyond `most` seeds."""
    for n in range(2, most + 1):
        if chi_square_bounds(sd, n, level)[1] < limit:
            return n
    return None


# ----------------------------------------------------------------------------------------- power: units to decide

T_SCALED = ("t", "bootstrap-se", "welch")  # intervals centre ± t(n − 1)·se, se ∝ 1/√n: they shrink as t(m − 1)/√m


def _t_shrink(n: int, m, level: float = LEVEL):
    """(t(m − 1)/√m) / (t(n − 1)/√n): the factor by which a t-interval's half-width measured at n units shrinks at m
    units when the spread stays; m an int or an array of them."""
    from scipy.stats import t

    m = np.asarray(m, dtype=float)
    return t.ppf(0.5 + level / 2, m - 1) / np.sqrt(m) / (t_quantile(n, level) / math.sqrt(n))


def units_to_clear(side: float, n: int, distance: float, level: float = LEVEL) -> int | None:
    """The smallest m ≥ max(n, MIN_UNITS) units at which a t-interval clears a bound: side·(t(m−1)/√m)/(t(n−1)/√n)
    < distance, where `side` is the interval's half-width measured at n units and `distance` the distance from its
    centre to the bound it must clear (both in the statistic's units). None when more than MOST_UNITS would be
    needed, or distance ≤ 0 (the centre lies on the bound: no n clears it). It assumes that the spread measured
    stays, and the centre too: a read-out of power at the effect observed, not a promise."""
    if not distance > 0:
        return None
    start = max(n, MIN_UNITS)
    if start > MOST_UNITS:
        return None
    if side == 0:  # a constant statistic: its interval is its value at every n
        return start
    if n < 2 or not math.isfinite(side):
        raise ValueError(f"a half-width measured at n = {n} units ({side}) cannot be scaled")
    m = np.arange(start, MOST_UNITS + 1)
    clears = side * _t_shrink(n, m, level) < distance
    return int(m[np.argmax(clears)]) if clears.any() else None


def half_width(estimate: Estimate, toward: float | None = None, level: float = LEVEL) -> float:
    """The estimate's interval half-width at its n, on the side facing `toward` (the upper side when toward lies
    above the centre; both sides when None: the larger). A t-interval with its per-unit values is measured from them,
    t(n − 1)·sd/√n, so that clipping to the statistic's range (`interval(bounds=...)`) does not shrink it; a
    constant statistic has 0; an estimate without an interval NaN."""
    if estimate.method == "exact":
        return 0.0
    if estimate.method == "t" and len(estimate.values) >= 2:
        return t_quantile(len(estimate.values), level) * float(np.std(estimate.values, ddof=1)) / math.sqrt(
            len(estimate.values))
    below, above = estimate.value - estimate.low, estimate.high - estimate.value
    if toward is None:
        return max(below, above)
    return above if toward > estimate.value else below


def interval_at(estimate: Estimate, m: int, level: float = LEVEL) -> tuple[float, float]:
    """The `level` interval (low, high) the estimate would have at m units, its centre and spread staying as
    measured: a t-scaled interval (`T_SCALED`; a Welch interval approximated with n − 1 degrees of freedom) shrinks
    as t(m − 1)/√m; a Wilson share keeps its share and design effect (recovered from the measured interval) over m
    runs; a standard deviation keeps its value with the chi-square interval of m units; a constant statistic keeps
    its zero width. NaN for an estimate without an interval."""
    if estimate.method == "exact":
        return estimate.value, estimate.value
    if estimate.method in T_SCALED:
        half = half_width(estimate, level=level) * float(_t_shrink(estimate.n, m, level))
        return estimate.value - half, estimate.value + half
    if estimate.method == "chi-square":
        return chi_square_bounds(estimate.value, m, level)
    if estimate.method.startswith("Wilson"):
        return wilson(estimate.value, m * _effective_share(estimate, level), level)
    return float("nan"), float("nan")


def _effective_share(estimate: Estimate, level: float) -> float:
    """n_eff / n of a Wilson share (1 / its design effect), solved from the width of its measured interval: the
    Wilson width falls as n_eff grows, and deff ≥ 1 puts n_eff in (0, n]."""
    from scipy.optimize import brentq

    p, n = estimate.value, estimate.n

    def excess(n_eff: float) -> float:
        low, high = wilson(p, n_eff, level)
        return (high - low) - estimate.width

    if excess(n) >= -1e-12:  # deff = 1 (also every share of 0 or 1)
        return 1.0
    tiny = 1e-9 * n
    return brentq(excess, tiny, n, xtol=1e-12 * n) / n if excess(tiny) > 0 else tiny / n


def units_to_decide(estimate: Estimate, bounds: Sequence[float], level: float = LEVEL) -> int | None:
    """The smallest m ≥ max(n, MIN_UNITS) units at which the estimate's interval (`interval_at`, centre and spread
    as measured) lies strictly beyond every bound in `bounds` on its centre's side (a bound below the centre: the
    lower end above it; above: the upper end below it; two bounds: the interval fits between them). A t-scaled
    interval in closed form (`units_to_clear`, at the nearest bound); a Wilson share or a standard deviation, whose
    intervals are not symmetric, by trying every m. None beyond MOST_UNITS, or when the centre lies on a bound."""
    if not bounds or any(b == estimate.value for b in bounds):
        return None
    if estimate.method in T_SCALED or estimate.method == "exact":
        return _units_to_clear_nearest(estimate, bounds, level)
    for m in range(max(estimate.n, MIN_UNITS), MOST_UNITS + 1):
        low, high = interval_at(estimate, m, level)
        if all(low > b if b < estimate.value else high < b for b in bounds):
            return m
    return None


def units_to_decide_if_wider(estimate: Estimate, bounds: Sequence[float], level: float = LEVEL) -> int | None:
    """`units_to_decide` with the spread at the upper end of its chi-square `level` interval (`chi_square_bounds`):
    a standard deviation measured on few seeds is itself uncertain (at n = 3 its upper 95 % bound is 6.3 × the
    measured sd), so the read-out at the measured spread is the optimistic end. Only for a t-scaled interval (its
    half-width is t·sd/√n); None for any other, beyond MOST_UNITS, or when the centre lies on a bound."""
    if estimate.method not in T_SCALED or estimate.n < 2 or not bounds or any(b == estimate.value for b in bounds):
        return None
    widen = chi_square_bounds(1.0, estimate.n, level)[1]  # the sd's upper bound per unit of measured sd
    return _units_to_clear_nearest(estimate, bounds, level, widen)


def _units_to_clear_nearest(estimate: Estimate, bounds: Sequence[float], level: float, widen: float = 1.0
                            ) -> int | None:
    """`units_to_clear` of a t-scaled (or exact) estimate at the bound nearest its centre, its measured half-width
    times `widen`."""
    nearest = min(bounds, key=lambda b: abs(estimate.value - b))
    return units_to_clear(half_width(estimate, nearest, level) * widen, estimate.n, abs(estimate.value - nearest),
                          level)


def run_share(summary: pd.DataFrame, success: pd.Series, *, runs: pd.Series | None = None,
              seed: str = "seed") -> Estimate:
    """The share of the selected runs (`runs`, a boolean mask; default all) for which `success` (a boolean mask) holds,
    runs as the unit, with `share_interval`'s clustered Wilson interval."""
    chosen = summary.index if runs is None else summary.index[runs.reindex(summary.index, fill_value=False)
                                                              .astype(bool).to_numpy()]
    hit = success.reindex(summary.index, fill_value=False).astype(bool)
    counts = [(int(hit.loc[idx].sum()), len(idx)) for _, idx in
              summary.loc[chosen].groupby(seed, sort=True).groups.items()]
    return share_interval([c[0] for c in counts], [c[1] for c in counts])


def per_seed(summary: pd.DataFrame, fn, seed: str = "seed") -> list[float]:
    """fn(rows of one seed) -> float, for every seed in seed order: the per-seed statistics `interval` summarises."""
    return [float(fn(g)) for _, g in summary.groupby(seed, sort=True)]


def paired_difference(summary: pd.DataFrame, arm: str, a, b, value: str, seed: str = "seed") -> Estimate:
    """Per seed: `value` of arm a minus `value` of arm b (rows of one seed and arm averaged; NaN where a seed lacks
    one of them, and so no estimate when an arm is missing), summarised over seeds: the paired comparison of two
    set-ups trained on the same seeds."""
    wide = summary.pivot_table(index=seed, columns=arm, values=value, aggfunc="mean")
    if a not in wide.columns or b not in wide.columns:
        return interval([float("nan")] * summary[seed].nunique())
    return interval((wide[a] - wide[b]).tolist())


def welch_difference(a, b, bounds: tuple[float, float] | None = None, level: float = 0.95) -> Estimate:
    """mean(a) − mean(b) of two independent samples of per-seed values with its Welch `level` interval
    (t with Welch–Satterthwaite degrees of freedom): for arms whose seeds are not paired. n is the smaller sample
    (the rule's n ≥ 3 then holds for both); NaN interval when either has fewer than 2 values; a zero-spread pair
    has a zero-width interval. bounds clip the interval (the statistic's own range)."""
    from scipy.stats import t as student

    x, y = (np.asarray([v for v in arm if math.isfinite(float(v))], dtype=float) for arm in (a, b))
    n = min(len(x), len(y))
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, "seeds", "none")
    diff = float(x.mean() - y.mean())
    if n < 2:
        return Estimate(diff, float("nan"), float("nan"), n, "seeds", "none")
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = math.sqrt(vx + vy)
    if se == 0:
        return Estimate(diff, diff, diff, n, "seeds", "exact")
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    half = float(student.ppf(0.5 + level / 2, df)) * se
    low, high = diff - half, diff + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Estimate(diff, low, high, n, "seeds", "welch")


def spearman(x, y) -> float:
    """Spearman ρ of y against x over the finite pairs; NaN with fewer than 3 pairs or a constant side."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3 or np.ptp(x[keep]) == 0 or np.ptp(y[keep]) == 0:
        return float("nan")
    return float(spearmanr(x[keep], y[keep]).statistic)
