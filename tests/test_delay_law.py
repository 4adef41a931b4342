import numpy as np
import pytest

from nhtlib.analysis.delay_law import contraction_rate, fit_contraction, fit_delay_law, fit_inverse_lambda, predicted_delay


def test_predicted_delay_convention():
    # pure decoupled decay: V_t = V_0 (1 - lr*wd)^(2t) ~ V_0 exp(-2 lr wd t)
    assert contraction_rate(1e-3, 1.0) == pytest.approx(2e-3)
    t = predicted_delay(100.0, 100.0 / np.e ** 2, 1e-3, 1.0)
    assert t == pytest.approx(1000.0)
    assert predicted_delay(100.0, 100.0 / np.e, 1e-3, 1.0, factor=1.0) == pytest.approx(1000.0)
    with pytest.raises(ValueError):
        predicted_delay(-1.0, 1.0, 1e-3, 1.0)


def test_pure_decay_simulation_matches_prediction():
    lr, wd, v0, v_st = 1e-2, 0.5, 1000.0, 10.0
    v, t = v0, 0
    while v > v_st:
        v *= (1 - lr * wd) ** 2
        t += 1
    assert abs(t - predicted_delay(v0, v_st, lr, wd)) / t < 0.01


def test_delay_fit_recovers_planted_parameters():
    rng = np.random.default_rng(0)
    predicted = rng.uniform(100, 5000, 60)
    measured = 0.7 * predicted + 150 + rng.normal(0, 20, 60)
    fit = fit_delay_law(predicted, measured)
    assert fit.slope == pytest.approx(0.7, abs=0.01)
    assert fit.intercept == pytest.approx(150, abs=20)
    assert fit.r2 > 0.99 and fit.slope_ci[0] < 0.7 < fit.slope_ci[1]
    assert fit.n == 60


def test_inverse_lambda_fit_recovers_companion_numbers():
    lam = np.repeat([0.1, 0.3, 0.5, 1.0], 10)
    rng = np.random.default_rng(1)
    t = 1182 / lam + 884 + rng.normal(0, 50, len(lam))
    fit = fit_inverse_lambda(lam, t)
    assert fit.slope == pytest.approx(1182, rel=0.02)
    assert fit.intercept == pytest.approx(884, abs=60)


def test_fit_drops_nans_and_needs_three_points():
    fit = fit_delay_law([1, 2, 3, np.nan], [2, 4, 6, 5])
    assert fit.n == 3 and fit.slope == pytest.approx(2)
    with pytest.raises(ValueError):
        fit_delay_law([1, 2], [1, 2])


def test_contraction_fit_recovers_rate():
    t = np.arange(0, 3000, 100.0)
    v = 3000 * 0.9986 ** t + 300
    fit = fit_contraction(t, v)
    assert fit.rate == pytest.approx(0.9986, abs=2e-5)
    assert fit.offset == pytest.approx(300, rel=0.02)
    assert fit.r2 > 0.999
    assert fit.gamma == pytest.approx(0.0014, abs=2e-5)
