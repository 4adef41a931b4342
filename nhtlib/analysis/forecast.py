"""A transition forecaster: the step T of a run's transition predicted from the first part of its norm trajectory.

Method. The NHT delay law (`nhtlib.analysis.delay_law`) says that after the squared norm V = ||θ||² peaks at the shortcut
value V_sc it contracts at a rate γ_eff ≈ c·η·λ towards the structured value V_st, and that the transition comes
after T ≈ log(V_sc / V_st) / γ_eff. From the logged points with step <= ``observed_until`` only:

1. `norm_features`: the peak step t_peak and V_sc = V there (`nhtlib.analysis.regimes.peak_step` / `peak_value` on the
   observed prefix, step 0 excluded); the contraction V(t) = A·r^(t − t_peak) + C fitted on the observed post-peak
   window by `nhtlib.analysis.delay_law.fit_contraction` (the book's contraction fit), which gives the rate γ̂ = 1 − r (per
   step, the book's convention) and V_st = C, the asymptote the norm is approaching (clipped to the smallest
   observed post-peak V). It is None when that is not identifiable: fewer than `MIN_POST_PEAK_POINTS` points after
   the peak, a norm that has not started to fall, a failed fit, or V_st at the fit's bound 0 (below
   `V_ST_MIN_RATIO` × V_sc: no floor seen yet).
   c_hat = γ̂ / (η λ) is reported beside it (2 for pure decoupled decay).
2. `law_forecast`: the raw forecast T̂ = t_peak + log(V_sc / V_st) / γ̂ (`nhtlib.analysis.delay_law.predicted_delay` with the
   measured factor c_hat), in steps.
3. `TransitionForecaster`: calibrated on training runs at one observed fraction f of their realised T: the
   log-ratios r = log(T / T̂) give the constant k = exp(median r) (value = k·T̂) and the prediction interval, the
   10 % / 90 % quantiles of r from `QUANTILE_MIN_RUNS` calibration runs on, below that median ± t·sd·√(1 + 1/n)
   (the 80 % t prediction interval for one new run).
4. `InverseLambdaBaseline`: the naive T = a/λ + b fitted on the training runs (`nhtlib.analysis.delay_law.fit_inverse_lambda`;
   the mean T with one distinct λ or fewer than 3 runs), interval from its residuals in the same way; it does not
   look at the trajectory.
5. `evaluate`: leave-one-group-out (a group is the unit held out together, e.g. a seed): both models are fitted on
   the other groups and predict each held-out run with a realised T at ``observed_until = fraction × T``; a forecast
   is *within* when abs(predicted / realised − 1) <= tolerance (±25 % by default). `earliest_fraction` and
   `forecast_summary` read off how early each method gets (and stays) within. This horizon is a fraction of the
   run's own realised T, so it tells the forecaster when to look: use it to study the law, not to compare methods.
6. `evaluate_pending`: the fair comparison (chapter 6's claim): the same observation time t = fraction × budget for
   every run; only the runs still pending at t (finite T > t) are forecast and fitted on; the baseline is fitted on
   the same pending runs (T conditional on T > t) and both forecasts are raised to at least t.

Shapes and units: a `Trajectory` holds 1-D float arrays ``steps`` (optimisation steps, strictly increasing) and
``norm_sq`` (V at those steps, same length); η (``lr``) and λ (``weight_decay``) are scalars; every time (t_peak,
T, predictions, ``observed_until``) is in optimisation steps; γ̂ is per step; V's are squared norms. In `evaluate` fractions are
of the *realised* T of the run being predicted (in `evaluate_pending`, of the budget) (the evaluation's time axis; a run that never transitioned,
T = NaN, is not scored and not used for calibration).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Iterable, Sequence

import numpy as np
import pandas as pd

from nhtlib.config import ConfigError, check_range
from nhtlib.analysis.delay_law import fit_contraction, fit_inverse_lambda, predicted_delay
from nhtlib.analysis.regimes import peak_step, peak_value
from nhtlib.analysis.statistics import t_quantile

MIN_POST_PEAK_POINTS = 3  # logged points after the peak needed to identify V_st and γ (with the peak: 4 to fit)
V_ST_MIN_RATIO = 1e-6  # a fitted V_st below this × V_sc is the fit's lower bound 0: no floor identified yet
PREDICTION_LEVEL = 0.8  # the prediction interval: 10 % to 90 % of the calibration residuals
QUANTILE_MIN_RUNS = 10  # from this many calibration runs on, empirical quantiles; below, a t prediction interval
TOLERANCE = 0.25  # a forecast is "within" when |predicted / realised - 1| <= this
DEFAULT_FRACTIONS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)  # with the summary's 0.25, 0.75
SUMMARY_FRACTIONS = (0.25, 0.5, 0.75)
FORECASTER, BASELINE = "forecaster", "1/λ baseline"  # the `method` column of `evaluate`
METHODS = (FORECASTER, BASELINE)


# ------------------------------------------------------------------------------------------------ trajectories

@dataclass(frozen=True, eq=False)
class Trajectory:
    """One run's norm trajectory and its realised transition step.

    * ``run``: the run's id (hashable);
    * ``group``: the unit held out together in `evaluate` (hashable, e.g. the seed);
    * ``steps``: 1-D float array of optimisation steps, strictly increasing;
    * ``norm_sq``: V = ||θ||² at those steps (same length, finite);
    * ``lr``: the learning rate η (> 0);
    * ``weight_decay``: the weight decay λ (> 0);
    * ``transition_step``: the realised T in steps (> 0), NaN when the run never transitioned (not scored).

    Validated on construction (`nhtlib.config.ConfigError`); the arrays are stored as read-only float copies.
    Two trajectories compare equal only when they are the same object.
    """

    run: Hashable
    group: Hashable
    steps: np.ndarray
    norm_sq: np.ndarray
    lr: float
    weight_decay: float
    transition_step: float = float("nan")

    def __post_init__(self) -> None:
        for name in ("run", "group"):
            try:
                hash(getattr(self, name))
            except TypeError:
                raise ConfigError(f"{name}={getattr(self, name)!r} must be hashable") from None
        steps, norm_sq = np.array(self.steps, dtype=float), np.array(self.norm_sq, dtype=float)
        if steps.ndim != 1 or steps.shape != norm_sq.shape or len(steps) == 0:
            raise ConfigError(f"run {self.run!r}: steps and norm_sq must be 1-D of equal, non-zero length; got "
                              f"{steps.shape} and {norm_sq.shape}")
        if not (np.all(np.isfinite(steps)) and np.all(np.isfinite(norm_sq))):
            raise ConfigError(f"run {self.run!r}: steps and norm_sq must be finite")
        if np.any(np.diff(steps) <= 0):
            raise ConfigError(f"run {self.run!r}: steps must be strictly increasing")
        steps.setflags(write=False)
        norm_sq.setflags(write=False)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "norm_sq", norm_sq)
        for name in ("lr", "weight_decay"):
            value = _as_float(name, getattr(self, name))
            check_range(name, value, 0.0, None, low_inclusive=False)
            object.__setattr__(self, name, value)
        t = _as_float("transition_step", self.transition_step)
        if not math.isnan(t):
            check_range("transition_step", t, 0.0, None, low_inclusive=False)
        object.__setattr__(self, "transition_step", t)

    @property
    def transitioned(self) -> bool:
        """True when the run has a finite realised transition step (it is scored and may calibrate)."""
        return math.isfinite(self.transition_step)


def _as_float(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={value!r} must be a number") from None


# ---------------------------------------------------------------------------------------------------- features

@dataclass(frozen=True)
class NormFeatures:
    """What `norm_features` reads off the observed prefix of a trajectory (times in steps, V's squared norms):

    * ``observed_until``: the last step that could be used;
    * ``t_peak``: the step of the norm peak; ``v_sc``: V there (the shortcut's squared norm);
    * ``gamma``: the contraction rate γ̂ = 1 − r of V after the peak, per step;
    * ``v_st``: the fitted asymptote of V (the structured solution's squared norm), at most the smallest observed
      post-peak V;
    * ``c_hat``: γ̂ / (η λ), the measured factor (2 for pure decoupled decay);
    * ``lr``, ``weight_decay``: η and λ of the run;
    * ``n_post``: the number of logged points after the peak used by the fit; ``r2``: the fit's R².
    """

    observed_until: float
    t_peak: float
    v_sc: float
    gamma: float
    v_st: float
    c_hat: float
    lr: float
    weight_decay: float
    n_post: int
    r2: float


def norm_features(traj: Trajectory, observed_until: float) -> NormFeatures | None:
    """The peak, the contraction rate and V_sc / V_st of `traj` from its logged points with step <= observed_until.

    None when they are not identifiable from that prefix: fewer than `MIN_POST_PEAK_POINTS` logged points after the
    peak (in particular before the peak), a norm that has not fallen below its peak, a contraction fit that fails
    or finds no contraction, or an asymptote at 0 (below `V_ST_MIN_RATIO` × V_sc: no floor in sight yet). See the
    module docstring for the fit.
    """
    observed_until = float(observed_until)
    keep = traj.steps <= observed_until
    if not np.any(keep):
        return None
    s, v = traj.steps[keep], traj.norm_sq[keep]
    t_peak, v_sc = peak_step(s, v), peak_value(s, v)
    post = s > t_peak
    if post.sum() < MIN_POST_PEAK_POINTS or not np.min(v[post]) < v_sc:
        return None
    try:
        fit = fit_contraction(s, v, start=t_peak)
    except (RuntimeError, ValueError):
        return None
    v_st = min(fit.offset, float(np.min(v[post])))
    contracting = math.isfinite(fit.gamma) and fit.gamma > 0 and fit.amplitude > 0
    if not (contracting and v_st > V_ST_MIN_RATIO * v_sc):
        return None
    return NormFeatures(observed_until=observed_until, t_peak=t_peak, v_sc=v_sc, gamma=fit.gamma, v_st=v_st,
                        c_hat=fit.gamma / (traj.lr * traj.weight_decay), lr=traj.lr,
                        weight_decay=traj.weight_decay, n_post=int(post.sum()), r2=fit.r2)


def law_forecast(features: NormFeatures) -> float:
    """The raw NHT forecast T̂ = t_peak + log(V_sc / V_st) / γ̂ in steps: the delay law with the measured factor."""
    delay = predicted_delay(features.v_sc, features.v_st, features.lr, features.weight_decay,
                            factor=features.c_hat)
    return features.t_peak + float(delay)


# --------------------------------------------------------------------------------------------------- forecasts

@dataclass(frozen=True)
class Forecast:
    """A predicted transition step ``value`` with its prediction interval [``low``, ``high``] (steps; NaN when no
    forecast could be made) and the `NormFeatures` it came from (None for the baseline or when not identifiable)."""

    value: float
    low: float
    high: float
    features: NormFeatures | None = None

    @property
    def available(self) -> bool:
        """True when a finite forecast was made."""
        return math.isfinite(self.value)


def _band(residuals: np.ndarray, center: float, level: float) -> tuple[float, float, str]:
    """(low, high, method) of the prediction interval of one new residual around `center`: the empirical
    (1 − level)/2 and (1 + level)/2 quantiles from QUANTILE_MIN_RUNS residuals on, else center ± t·sd·√(1 + 1/n);
    widened to contain `center`. NaN with fewer than 2 residuals."""
    n = len(residuals)
    if n < 2:
        return float("nan"), float("nan"), "none"
    if n >= QUANTILE_MIN_RUNS:
        low, high = np.quantile(residuals, [(1 - level) / 2, (1 + level) / 2])
        method = "quantile"
    else:
        half = t_quantile(n, level) * float(np.std(residuals, ddof=1)) * math.sqrt(1 + 1 / n)
        low, high = center - half, center + half
        method = "t"
    return min(float(low), center), max(float(high), center), method


class TransitionForecaster:
    """The NHT law forecast calibrated on training runs (see the module docstring).

    After `fit`: ``fraction`` (of T, the calibration's observed fraction), ``log_ratios`` (r = log(T / T̂) of the
    calibration runs), ``n_calibration``, ``k`` = exp(median r), ``band`` (the interval of r, log units) and
    ``band_method`` ('quantile', 't' or 'none'). Without a usable calibration run, every prediction is NaN.
    """

    def __init__(self, level: float = PREDICTION_LEVEL) -> None:
        check_range("level", level, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        self.level = level
        self.fraction = float("nan")
        self.log_ratios: tuple[float, ...] = ()
        self.k = float("nan")
        self.band = (float("nan"), float("nan"))
        self.band_method = "none"

    @property
    def n_calibration(self) -> int:
        """The number of training runs the calibration used."""
        return len(self.log_ratios)

    def fit(self, trajectories: Iterable[Trajectory], fraction: float) -> TransitionForecaster:
        """Calibrate on every run with a finite T, observed until fraction × T (runs whose features are not
        identifiable there are left out)."""
        fraction = _fraction(fraction)
        raws = [(t.transition_step, _raw_at(t, fraction * t.transition_step)[1])
                for t in trajectories if t.transitioned]
        return self.fit_raw(raws, fraction)

    def fit_raw(self, pairs: Iterable[tuple[float, float]], fraction: float) -> TransitionForecaster:
        """Calibrate on (realised T, raw law forecast T̂) pairs already computed at `fraction`; pairs with a
        non-finite or non-positive member are left out. `fit` is this on the pairs it computes."""
        self.fraction = _fraction(fraction)
        ratios = [math.log(t / raw) for t, raw in pairs
                  if math.isfinite(t) and math.isfinite(raw) and t > 0 and raw > 0]
        self.log_ratios = tuple(ratios)
        if not ratios:
            self.k, self.band, self.band_method = float("nan"), (float("nan"), float("nan")), "none"
            return self
        r = np.asarray(ratios)
        center = float(np.median(r))
        low, high, self.band_method = _band(r, center, self.level)
        self.k, self.band = math.exp(center), (low, high)
        return self

    def predict(self, traj: Trajectory, observed_until: float) -> Forecast:
        """The calibrated forecast of `traj`'s transition step from its points with step <= observed_until."""
        return self.predict_features(norm_features(traj, observed_until))

    def predict_features(self, features: NormFeatures | None) -> Forecast:
        """The calibrated forecast from features already computed (NaN when they are None or not calibrated)."""
        if features is None or not math.isfinite(self.k):
            return Forecast(float("nan"), float("nan"), float("nan"), features)
        raw = law_forecast(features)
        low, high = (raw * math.exp(b) if math.isfinite(b) else float("nan") for b in self.band)
        return Forecast(self.k * raw, low, high, features)


def _fraction(fraction: float) -> float:
    fraction = _as_float("fraction", fraction)
    check_range("fraction", fraction, 0.0, None, low_inclusive=False)
    return fraction


def _raw_at(traj: Trajectory, observed_until: float) -> tuple[NormFeatures | None, float]:
    features = norm_features(traj, observed_until)
    return features, (law_forecast(features) if features is not None else float("nan"))


class InverseLambdaBaseline:
    """The naive baseline T = a/λ + b fitted on training runs; it ignores the trajectory.

    After `fit`: ``a``, ``b`` (a = 0 and b = mean T with a single distinct λ or fewer than 3 runs), ``n`` (runs
    used), ``band`` (the interval of the residual T − prediction, steps) and ``band_method``.
    """

    def __init__(self, level: float = PREDICTION_LEVEL) -> None:
        check_range("level", level, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        self.level = level
        self.a, self.b, self.n = float("nan"), float("nan"), 0
        self.band = (float("nan"), float("nan"))
        self.band_method = "none"

    def fit(self, trajectories: Iterable[Trajectory]) -> InverseLambdaBaseline:
        """Fit on every run with a finite T."""
        runs = [t for t in trajectories if t.transitioned]
        self.n = len(runs)
        if not runs:
            self.a, self.b, self.band, self.band_method = float("nan"), float("nan"), (float("nan"),) * 2, "none"
            return self
        lam = np.array([t.weight_decay for t in runs])
        times = np.array([t.transition_step for t in runs])
        if len(runs) >= 3 and len(np.unique(lam)) >= 2:
            line = fit_inverse_lambda(lam, times)
            self.a, self.b = line.slope, line.intercept
        else:
            self.a, self.b = 0.0, float(times.mean())
        low, high, self.band_method = _band(times - (self.a / lam + self.b), 0.0, self.level)
        self.band = (low, high)
        return self

    def predict(self, traj: Trajectory) -> Forecast:
        """a/λ + b for `traj`'s λ, with the residual interval (NaN before a fit on at least one run)."""
        value = self.a / traj.weight_decay + self.b
        return Forecast(value, value + self.band[0], value + self.band[1], None)


# -------------------------------------------------------------------------------------------------- evaluation

EVALUATION_COLUMNS = ["run", "group", "method", "fraction", "realised", "predicted", "low", "high",
                      "relative_error", "within"]


def _leave_one_group_out(name: str, trajectories, fractions, tolerance) -> tuple[list, tuple[float, ...], list]:
    """The checked inputs of a leave-one-group-out evaluation: the trajectories as a list, the fractions, the groups
    in order of appearance (at least two, and at least one fraction, else `nhtlib.config.ConfigError`)."""
    trajectories = list(trajectories)
    fractions = tuple(_fraction(f) for f in fractions)
    if not fractions:
        raise ConfigError(f"{name} needs at least one fraction")
    check_range("tolerance", _as_float("tolerance", tolerance), 0.0, None, low_inclusive=False)
    groups = list(dict.fromkeys(t.group for t in trajectories))
    if len(groups) < 2:
        raise ConfigError(f"leave-one-group-out needs at least 2 groups, got {len(groups)}")
    return trajectories, fractions, groups


def evaluate(trajectories: Sequence[Trajectory], fractions: Sequence[float] = DEFAULT_FRACTIONS,
             tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Leave-one-group-out evaluation of the forecaster against the 1/λ baseline.

    For each group g both models are fitted on the runs of the other groups (the forecaster once per fraction, at
    that fraction of each training run's T) and predict every run of g with a finite T, observed until
    fraction × T. One row per (run, group, method, fraction), columns `EVALUATION_COLUMNS`: realised T,
    predicted, low, high (steps), relative_error = predicted / realised − 1 and within = abs(relative_error) <=
    tolerance (False when there is no prediction). The method column is `FORECASTER` or `BASELINE`. Needs at least
    two groups (`nhtlib.config.ConfigError` otherwise).
    """
    trajectories, fractions, groups = _leave_one_group_out("evaluate", trajectories, fractions, tolerance)
    scored = [i for i, t in enumerate(trajectories) if t.transitioned]
    # the features of a run at a fraction of its own T do not depend on which group is held out: compute them once
    at = {(i, f): _raw_at(trajectories[i], f * trajectories[i].transition_step) for i in scored for f in fractions}
    rows = []
    for g in groups:
        train = [i for i in scored if trajectories[i].group != g]
        test = [i for i in scored if trajectories[i].group == g]
        if not test:
            continue
        baseline = InverseLambdaBaseline().fit(trajectories[i] for i in train)
        for f in fractions:
            forecaster = TransitionForecaster().fit_raw(
                [(trajectories[i].transition_step, at[i, f][1]) for i in train], f)
            for i in test:
                traj = trajectories[i]
                for method, forecast in ((FORECASTER, forecaster.predict_features(at[i, f][0])),
                                         (BASELINE, baseline.predict(traj))):
                    rows.append(_row(traj, method, f, forecast, tolerance))
    table = pd.DataFrame(rows, columns=EVALUATION_COLUMNS)
    return table.astype({"within": bool})


def _row(traj: Trajectory, method: str, fraction: float, forecast: Forecast, tolerance: float) -> dict:
    error = forecast.value / traj.transition_step - 1.0
    return {"run": traj.run, "group": traj.group, "method": method, "fraction": fraction,
            "realised": traj.transition_step, "predicted": forecast.value, "low": forecast.low,
            "high": forecast.high, "relative_error": error, "within": bool(math.isfinite(error) and
                                                                           abs(error) <= tolerance)}


def earliest_fraction(evaluation: pd.DataFrame) -> pd.DataFrame:
    """Per (run, group, method) of an `evaluate` table: ``earliest_fraction``, the smallest fraction f at which the
    forecast is within tolerance at f *and at every larger fraction evaluated* (NaN when it is not within at the
    largest one), and ``relative_error_at_1``, the relative error at fraction 1.0 (NaN when 1.0 was not
    evaluated or there was no prediction)."""
    rows = []
    for (group, run, method), g in evaluation.groupby(["group", "run", "method"], sort=False):
        g = g.sort_values("fraction")
        fractions, within = g["fraction"].to_numpy(float), g["within"].to_numpy(bool)
        first = len(within)
        while first > 0 and within[first - 1]:
            first -= 1
        at_one = g.loc[np.isclose(fractions, 1.0), "relative_error"]
        rows.append({"run": run, "group": group, "method": method,
                     "earliest_fraction": float(fractions[first]) if first < len(within) else float("nan"),
                     "relative_error_at_1": float(at_one.iloc[0]) if len(at_one) else float("nan")})
    return pd.DataFrame(rows, columns=["run", "group", "method", "earliest_fraction", "relative_error_at_1"])


def forecast_summary(evaluation: pd.DataFrame, at: Sequence[float] = SUMMARY_FRACTIONS) -> pd.DataFrame:
    """One row per method of an `evaluate` table:

    * ``runs``: the runs scored;
    * ``ever_within``: the share of them within tolerance at some fraction evaluated;
    * ``settled``: how many are within from some fraction on (a finite `earliest_fraction`), and
      ``median_earliest_fraction`` over those (NaN when none);
    * ``median_abs_error_at_F`` for each F in `at`: the median over runs of abs(relative error) at fraction F, a
      missing forecast counting as infinitely wrong (NaN when F was not evaluated).
    """
    earliest = earliest_fraction(evaluation)
    rows = []
    for method in dict.fromkeys(evaluation["method"]):
        table = evaluation[evaluation["method"] == method]
        runs = table.groupby(["group", "run"], sort=False)
        e = earliest.loc[earliest["method"] == method, "earliest_fraction"]
        row = {"method": method, "runs": runs.ngroups, "ever_within": float(runs["within"].any().mean()),
               "settled": int(e.notna().sum()),
               "median_earliest_fraction": float(e.median()) if e.notna().any() else float("nan")}
        for f in at:
            errors = table.loc[np.isclose(table["fraction"].to_numpy(float), f), "relative_error"].abs()
            row[f"median_abs_error_at_{f:g}"] = (float(errors.fillna(np.inf).median()) if len(errors)
                                                 else float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------ evaluation at fixed points of the budget

BUDGET_FRACTIONS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)  # of the budget; with the summary's
MIN_OBSERVED_POINTS = MIN_POST_PEAK_POINTS + 1  # logged points after step 0 the forecaster needs: a peak, 3 after it
PENDING_COLUMNS = ["run", "group", "method", "fraction", "observed_until", "n_observed", "realised", "predicted",
                   "low", "high", "relative_error", "within"]


def observed_points(traj: Trajectory, observed_until: float) -> int:
    """How many logged points of `traj` lie in (0, observed_until] (step 0 is never a peak, `norm_features`)."""
    return int(np.sum((traj.steps > 0) & (traj.steps <= observed_until)))


def evaluate_pending(trajectories: Sequence[Trajectory], budget: float,
                     fractions: Sequence[float] = BUDGET_FRACTIONS, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Leave-one-group-out evaluation at fixed observation times t = fraction × budget (steps), the same t for
    every run, so the horizon does not encode the answer (as a fraction of the realised T would).

    At each t only the runs still *pending* are forecast and used for fitting: those with a finite T > t (a run
    that has transitioned by t needs no forecast; one that never transitions is not scored). Both methods get the
    same information: the forecaster is calibrated on the other groups' runs pending at t, each observed until t;
    the 1/λ baseline is fitted on the same runs (T conditional on T > t); and both forecasts are raised to at least
    t (the run is known not to have transitioned yet). One row per (run, group, method, fraction), columns
    `PENDING_COLUMNS` (`evaluate`'s, plus observed_until and n_observed, `observed_points` at t); a missing
    forecast is not within. Needs at least two groups (`nhtlib.config.ConfigError` otherwise)."""
    budget = _as_float("budget", budget)
    check_range("budget", budget, 0.0, None, low_inclusive=False)
    trajectories, fractions, groups = _leave_one_group_out("evaluate_pending", trajectories, fractions, tolerance)
    rows = []
    for f in fractions:
        t = f * budget
        pending = [i for i, traj in enumerate(trajectories) if traj.transitioned and traj.transition_step > t]
        at = {i: _raw_at(trajectories[i], t) for i in pending}  # the same for every held-out group
        for g in groups:
            train = [i for i in pending if trajectories[i].group != g]
            test = [i for i in pending if trajectories[i].group == g]
            if not test:
                continue
            baseline = InverseLambdaBaseline().fit(trajectories[i] for i in train)
            forecaster = TransitionForecaster().fit_raw([(trajectories[i].transition_step, at[i][1]) for i in train],
                                                        f)
            for i in test:
                traj = trajectories[i]
                for method, fc in ((FORECASTER, forecaster.predict_features(at[i][0])),
                                   (BASELINE, baseline.predict(traj))):
                    row = _row(traj, method, f, _not_before(fc, t), tolerance)
                    rows.append({**row, "observed_until": t, "n_observed": observed_points(traj, t)})
    return pd.DataFrame(rows, columns=PENDING_COLUMNS).astype({"within": bool})


def _not_before(fc: Forecast, t: float) -> Forecast:
    """The forecast raised to at least t (steps): the run has not transitioned by t. NaN stays NaN."""
    if not fc.available:
        return fc
    low = max(fc.low, t) if math.isfinite(fc.low) else fc.low
    high = max(fc.high, t) if math.isfinite(fc.high) else fc.high
    return Forecast(max(fc.value, t), low, high, fc.features)
