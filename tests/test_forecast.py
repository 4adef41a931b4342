"""Known answers for nhtlib.analysis.forecast: trajectories generated exactly from the NHT law, hand-made evaluation tables."""
import math

import numpy as np
import pandas as pd
import pytest

from nhtlib.config import ConfigError
from nhtlib.analysis.forecast import BASELINE, FORECASTER, InverseLambdaBaseline, NormFeatures, Trajectory, TransitionForecaster, earliest_fraction, evaluate, forecast_summary, law_forecast, norm_features
from nhtlib.analysis.statistics import t_quantile

LR = 1e-3
K_TRUE = 0.6


def law_run(lam, ratio, *, v_sc=100.0, c=2.0, t_peak=200.0, k=K_TRUE, run=None, group=0, n_post=300,
            noise=0.0, seed=0, transition=None):
    """V rises linearly to v_sc at t_peak, then V = V_st + (V_sc − V_st) exp(−γ (t − t_peak)) with γ = c η λ,
    logged until the raw law forecast; T = k × (t_peak + log(V_sc/V_st)/γ) unless `transition` is given.
    Returns (trajectory, γ, V_st, raw forecast)."""
    gamma, v_st = c * LR * lam, v_sc / ratio
    raw = t_peak + math.log(ratio) / gamma
    steps = np.concatenate([np.linspace(0.0, t_peak, 21), t_peak + np.linspace(0.0, raw - t_peak, n_post + 1)[1:]])
    v = np.where(steps <= t_peak, v_sc * (0.3 + 0.7 * steps / t_peak),
                 v_st + (v_sc - v_st) * np.exp(-gamma * (steps - t_peak)))
    if noise:
        v = v * (1 + noise * np.random.default_rng(seed).standard_normal(len(v)))
    t = k * raw if transition is None else transition
    return Trajectory(run if run is not None else f"λ={lam},R={ratio}", group, steps, v, LR, lam, t), gamma, v_st, raw


# ---------------------------------------------------------------------------------------------- trajectories

def test_trajectory_validates():
    s, v = np.arange(5.0), np.ones(5)
    traj = Trajectory("a", 0, s, v, 1e-3, 0.1)
    assert not traj.transitioned and math.isnan(traj.transition_step)
    assert Trajectory("a", 0, s, v, 1e-3, 0.1, 3).transitioned
    with pytest.raises(ValueError):
        traj.norm_sq[0] = 2.0  # stored read-only
    bad = [dict(norm_sq=np.ones(4)), dict(steps=np.array([0.0, 1, 1, 2, 3])), dict(lr=0.0), dict(weight_decay=-1.0),
           dict(norm_sq=np.array([1.0, np.nan, 1, 1, 1])), dict(run=["unhashable"]), dict(transition_step=-5.0),
           dict(steps=np.array([]), norm_sq=np.array([]))]
    for change in bad:
        kw = dict(run="a", group=0, steps=s, norm_sq=v, lr=1e-3, weight_decay=0.1, transition_step=3.0)
        kw.update(change)
        with pytest.raises(ConfigError):
            Trajectory(**kw)


# -------------------------------------------------------------------------------------------------- features

@pytest.mark.parametrize("lam,ratio,c", [(0.1, 20.0, 2.0), (1.0, 200.0, 2.0), (0.3, 50.0, 1.41)])
def test_norm_features_recover_the_law_from_half_the_contraction(lam, ratio, c):
    traj, gamma, v_st, _ = law_run(lam, ratio, c=c)
    f = norm_features(traj, 200.0 + 0.5 * math.log(ratio) / gamma)  # half the log-contraction observed
    assert f is not None
    assert f.t_peak == pytest.approx(200.0, rel=0.02)
    assert f.v_sc == pytest.approx(100.0, rel=0.02)
    assert f.gamma == pytest.approx(gamma, rel=0.02)
    assert f.v_st == pytest.approx(v_st, rel=0.10)
    assert f.c_hat == pytest.approx(c, rel=0.02)
    assert f.n_post >= 3 and f.observed_until <= traj.steps[-1]


def test_norm_features_use_only_the_observed_prefix():
    traj, gamma, _, _ = law_run(0.3, 50.0)
    until = 200.0 + 0.5 * math.log(50.0) / gamma
    later = traj.steps > until
    garbage = np.where(later, 0.5 * traj.norm_sq, traj.norm_sq)  # a sudden drop after observed_until
    spoiled = Trajectory(traj.run, traj.group, traj.steps, garbage, traj.lr, traj.weight_decay,
                         traj.transition_step)
    assert norm_features(spoiled, until) == norm_features(traj, until)
    assert norm_features(spoiled, traj.steps[-1]) != norm_features(traj, traj.steps[-1])  # the drop is visible


def test_norm_features_none_when_not_identifiable():
    traj, _, _, _ = law_run(0.3, 50.0)
    post = traj.steps[traj.steps > 200.0]
    assert norm_features(traj, 150.0) is None  # still rising: the peak is the last point
    assert norm_features(traj, -1.0) is None  # nothing logged
    assert norm_features(traj, post[1]) is None  # 2 points after the peak
    assert norm_features(traj, post[2]) is not None  # 3 points: identifiable
    plateau = Trajectory("flat", 0, traj.steps, np.minimum(traj.steps, 200.0) + 1.0, LR, 0.3, 1000.0)
    assert norm_features(plateau, traj.steps[-1]) is None  # the norm never falls below its peak


def test_noise_of_one_percent_keeps_the_rate_within_ten_percent():
    for seed in range(5):
        for lam, ratio in [(0.1, 20.0), (1.0, 200.0)]:
            traj, gamma, _, raw = law_run(lam, ratio, noise=0.01, seed=seed)
            f = norm_features(traj, raw)
            assert f is not None and f.gamma == pytest.approx(gamma, rel=0.10)


def test_law_forecast_is_the_closed_form():
    f = NormFeatures(observed_until=900.0, t_peak=120.0, v_sc=80.0, gamma=4e-4, v_st=5.0, c_hat=4e-4 / (1e-3 * 0.2),
                     lr=1e-3, weight_decay=0.2, n_post=30, r2=1.0)
    assert law_forecast(f) == pytest.approx(120.0 + math.log(16.0) / 4e-4, rel=1e-12)
    traj, _, _, raw = law_run(0.5, 30.0)
    assert law_forecast(norm_features(traj, raw)) == pytest.approx(raw, rel=2e-3)  # 1 − r = γ to O(γ)


# ------------------------------------------------------------------------------------------ models and evaluation

def grid_runs():
    """3 seeds × 3 λ × 3 norm ratios; c and t_peak differ by seed, k jitters by ±1 %: T is not a function of λ."""
    runs = []
    for seed, (c, t_peak) in enumerate([(2.0, 200.0), (1.4, 300.0), (1.7, 150.0)]):
        for i, lam in enumerate((0.1, 0.3, 1.0)):
            for j, ratio in enumerate((10.0, 50.0, 300.0)):
                k = K_TRUE * (1 + 0.01 * ((seed + i + 2 * j) % 3 - 1))
                runs.append(law_run(lam, ratio, c=c, t_peak=t_peak, k=k, run=(seed, lam, ratio), group=seed)[0])
    return runs


@pytest.fixture(scope="module")
def grid_evaluation():
    return evaluate(grid_runs(), fractions=(0.005, 0.5, 0.8, 1.0))


def test_forecaster_is_within_five_percent_at_080_and_beats_the_baseline(grid_evaluation):
    at = grid_evaluation[grid_evaluation.fraction == 0.8]
    forecaster, baseline = at[at.method == FORECASTER], at[at.method == BASELINE]
    assert len(forecaster) == len(baseline) == 27
    assert forecaster.relative_error.abs().max() < 0.05
    assert forecaster.relative_error.abs().median() < baseline.relative_error.abs().median()
    assert baseline.relative_error.abs().max() > 0.25  # 1/λ alone cannot explain T here
    assert forecaster.within.all() and not baseline.within.all()


def test_evaluation_table_shape_and_nan_forecasts(grid_evaluation):
    runs = grid_runs() + [Trajectory("never", 0, np.arange(10.0), np.ones(10), LR, 0.1)]  # no T: not scored
    table = evaluate(runs, fractions=(0.05, 1.0))
    assert len(table) == 27 * 2 * 2 and "never" not in set(table.run)
    assert list(grid_evaluation.columns) == ["run", "group", "method", "fraction", "realised", "predicted", "low",
                                             "high", "relative_error", "within"]
    early = grid_evaluation[(grid_evaluation.fraction == 0.005) & (grid_evaluation.method == FORECASTER)]
    assert early.predicted.isna().all()  # before the peak: no forecast ...
    assert not early.within.any()  # ... and a missing forecast is never within
    assert grid_evaluation[grid_evaluation.method == BASELINE].predicted.notna().all()


def test_intervals_contain_the_value(grid_evaluation):
    ok = grid_evaluation.predicted.notna()
    rows = grid_evaluation[ok]
    assert (rows.low <= rows.predicted).all() and (rows.predicted <= rows.high).all()
    assert (rows.low < rows.high).any()  # not degenerate: the k jitter and the baseline's misfit show


def test_forecaster_calibration_constant_and_t_interval():
    ratios = np.log([0.5, 0.6, 0.8])
    model = TransitionForecaster().fit_raw([(math.exp(r) * 1000.0, 1000.0) for r in ratios], 0.5)
    assert model.k == pytest.approx(0.6) and model.n_calibration == 3 and model.band_method == "t"
    half = t_quantile(3, 0.8) * np.std(ratios, ddof=1) * math.sqrt(1 + 1 / 3)
    assert model.band == pytest.approx((math.log(0.6) - half, math.log(0.6) + half))
    traj, _, _, raw = law_run(0.3, 50.0)
    forecast = model.predict(traj, raw)
    assert forecast.value == pytest.approx(0.6 * law_forecast(forecast.features))
    assert forecast.low < forecast.value < forecast.high
    many = TransitionForecaster().fit_raw([(k * 100.0, 100.0) for k in np.linspace(0.5, 1.5, 21)], 0.5)
    assert many.band_method == "quantile" and many.k == pytest.approx(1.0)
    assert np.exp(many.band) == pytest.approx((0.6, 1.4))
    empty = TransitionForecaster().fit_raw([(1000.0, float("nan"))], 0.5)
    assert empty.n_calibration == 0 and not empty.predict(traj, raw).available


def test_forecaster_fit_on_trajectories_recovers_k():
    runs = [law_run(lam, ratio)[0] for lam in (0.1, 1.0) for ratio in (10.0, 100.0)]
    model = TransitionForecaster().fit(runs, 0.8)
    assert model.n_calibration == 4 and model.k == pytest.approx(K_TRUE, rel=2e-3)
    assert TransitionForecaster().fit(runs, 0.01).n_calibration == 0  # before every peak


def test_baseline_is_exact_when_t_is_inverse_lambda():
    a, b = 300.0, 500.0
    runs = [law_run(lam, 50.0, run=(seed, lam), group=seed, transition=a / lam + b)[0]
            for seed in range(3) for lam in (0.1, 0.2, 0.5, 1.0)]
    model = InverseLambdaBaseline().fit(runs)
    assert (model.a, model.b) == pytest.approx((a, b))
    table = evaluate(runs, fractions=(0.5, 1.0))
    baseline = table[table.method == BASELINE]
    assert len(baseline) == 24 and baseline.relative_error.abs().max() < 0.01
    single = InverseLambdaBaseline().fit([law_run(0.3, 50.0, transition=t)[0] for t in (900.0, 1000.0, 1100.0)])
    assert (single.a, single.b) == (0.0, 1000.0)
    forecast = single.predict(law_run(0.7, 10.0)[0])
    assert forecast.value == 1000.0 and forecast.low < 1000.0 < forecast.high


def test_evaluate_needs_two_groups():
    runs = [law_run(lam, 50.0, group="only")[0] for lam in (0.1, 0.3, 1.0)]
    with pytest.raises(ConfigError):
        evaluate(runs)
    with pytest.raises(ConfigError):
        evaluate(grid_runs()[:12], fractions=(0.0,))


# ------------------------------------------------------------------------------------------ reading the table

FRACTIONS = np.round(np.arange(1, 11) / 10, 1)


def hand_table():
    patterns = {  # run: within at fractions 0.1 ... 1.0
        "late": [False, False, True, False, True, True, True, True, True, True],  # within at 0.3, lost, back at 0.5
        "never": [False] * 10,
        "always": [True] * 10,
        "lost": [True] * 9 + [False],  # within until 0.9 only: never settled
    }
    rows = []
    for run, within in patterns.items():
        for f, w in zip(FRACTIONS, within):
            error = 0.1 if w else (float("nan") if run == "never" and f < 0.5 else 0.5)
            rows.append({"run": run, "group": 0, "method": FORECASTER, "fraction": f, "realised": 1000.0,
                         "predicted": 1000.0 * (1 + error), "low": np.nan, "high": np.nan,
                         "relative_error": error, "within": w})
    return pd.DataFrame(rows)


def test_earliest_fraction_on_a_hand_made_table():
    earliest = earliest_fraction(hand_table()).set_index("run")
    assert earliest.loc["late", "earliest_fraction"] == 0.5
    assert math.isnan(earliest.loc["never", "earliest_fraction"])
    assert earliest.loc["always", "earliest_fraction"] == 0.1
    assert math.isnan(earliest.loc["lost", "earliest_fraction"])
    assert earliest.loc["lost", "relative_error_at_1"] == 0.5 and earliest.loc["late", "relative_error_at_1"] == 0.1
    shuffled = hand_table().sample(frac=1.0, random_state=0)  # the row order must not matter
    assert earliest_fraction(shuffled).set_index("run").loc["late", "earliest_fraction"] == 0.5


def test_forecast_summary_on_a_hand_made_table():
    table = pd.concat([hand_table(), hand_table().assign(method=BASELINE, within=False, relative_error=0.4)])
    summary = forecast_summary(table, at=(0.3, 0.4, 0.25)).set_index("method")
    f, b = summary.loc[FORECASTER], summary.loc[BASELINE]
    assert f.runs == 4 and f.ever_within == 0.75 and f.settled == 2
    assert f.median_earliest_fraction == pytest.approx(0.3)  # median of 0.5 and 0.1
    assert f["median_abs_error_at_0.3"] == pytest.approx(0.1)  # |errors| 0.1, nan→inf, 0.1, 0.1
    assert f["median_abs_error_at_0.4"] == pytest.approx(0.5 / 2 + 0.1 / 2)  # 0.5, inf, 0.1, 0.1
    assert math.isnan(f["median_abs_error_at_0.25"])  # not evaluated
    assert b.ever_within == 0.0 and b.settled == 0 and math.isnan(b.median_earliest_fraction)
