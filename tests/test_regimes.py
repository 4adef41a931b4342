import math

import numpy as np
import pytest

from nhtlib.analysis.regimes import RegimeRule, classify_regime, decay_percent, peak_step, transition_step

steps = np.arange(0, 101, 10)


def test_peak_excludes_init():
    v = np.array([10, 1, 2, 3, 4, 5, 4, 3, 2, 1, 1.0])
    assert peak_step(steps, v) == 50
    assert peak_step(steps, v, include_init=True) == 0


def test_decay_percent_known_answer():
    v = np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 2.5, 2.5])
    assert decay_percent(steps, v) == pytest.approx(50.0)
    assert decay_percent(steps, np.arange(11.0)) == 0.0
    assert decay_percent(steps, v) >= 2.0 and decay_percent(steps, np.arange(11.0)) < 2.0  # peak, then decay


def test_transition_step_first_crossing_and_never():
    acc = np.array([.5, .5, .55, .6, .8, .95, .99, 1, 1, 1, 1])
    assert transition_step(steps, acc, 0.9) == 50
    assert transition_step(steps, 1 - acc, 0.1, direction="below") == 50
    assert transition_step(steps, acc, 0.9, after=60) == 60
    assert math.isnan(transition_step(steps, acc, 1.1))
    with pytest.raises(ValueError):
        transition_step(steps, acc, 0.5, direction="up")


def synthetic(kind):
    t = steps.astype(float)
    if kind == "weak":  # norm keeps growing, train fit, test stays at chance
        return 10 + t, np.ones(11), np.full(11, 0.5)
    if kind == "intermediate":  # peak at 20 then decay, test jumps
        norm = np.where(t <= 20, 10 + t, 30 * np.exp(-(t - 20) / 30))
        return norm, np.ones(11), np.where(t < 60, 0.5, 1.0)
    if kind == "strong":  # nothing is learned
        return 10 * np.exp(-t / 10) + 0.1, np.full(11, 0.6), np.full(11, 0.5)
    if kind == "decay_no_improvement":  # norm decays but the shortcut persists -> weak
        return np.where(t <= 20, 10 + t, 30 - 0.05 * (t - 20)), np.ones(11), np.full(11, 0.5)


@pytest.mark.parametrize("kind,expected", [("weak", "weak"), ("intermediate", "intermediate"),
                                           ("strong", "strong"), ("decay_no_improvement", "weak")])
def test_classifier_on_synthetic_trajectories(kind, expected):
    norm, learned, structured = synthetic(kind)
    assert classify_regime(steps, norm, learned, structured) == expected


def test_classifier_thresholds_are_parameters():
    norm, learned, structured = synthetic("decay_no_improvement")
    assert classify_regime(steps, norm, learned, structured, RegimeRule(strong_max_decay_percent=5.0)) == "strong"
    norm, learned, structured = synthetic("strong")
    assert classify_regime(steps, norm, learned, structured, RegimeRule(learned_min=0.5)) != "strong"


def test_bad_inputs():
    with pytest.raises(ValueError, match="strictly increasing"):
        peak_step([0, 2, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="equal, non-zero length"):
        peak_step([0, 1], [1, 2, 3])


def test_layer_contraction_step_known_answer():
    from nhtlib.analysis.regimes import layer_contraction_step

    t = np.arange(0, 101, 10.0)
    small = np.where(t <= 50, 1 + t / 50, 2 - (t - 50) / 100)  # peak 2 at step 50, 1.8 (= 0.9 x peak) at step 70
    assert layer_contraction_step(t, small) == 70
    assert layer_contraction_step(t, 10 * small) == 70
    assert layer_contraction_step(t, small, fraction=0.25) == 100
    assert np.isnan(layer_contraction_step(t, 1 + t))


def test_structured_min_requires_an_actual_transition():
    norm, learned, structured = synthetic("intermediate")
    assert classify_regime(steps, norm, learned, structured, RegimeRule(structured_min=0.99)) == "intermediate"
    partial = np.where(steps < 60, 0.5, 0.6)
    assert classify_regime(steps, norm, learned, partial) == "intermediate"
    assert classify_regime(steps, norm, learned, partial, RegimeRule(structured_min=0.9)) == "weak"
