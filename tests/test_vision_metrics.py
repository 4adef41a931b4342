"""Norm-only regime rule, transition times and S_traj of nhtlib.analysis.vision on hand-made trajectories."""
import math

import numpy as np
import pandas as pd

from nhtlib.analysis import vision

EPOCHS = np.arange(0, 11)


def test_norm_regimes():
    growing = 100 + 10 * EPOCHS
    peaked = np.array([100, 120, 140, 160, 170, 165, 160, 155, 150, 150, 150])  # peak 170 at 4, -11.8%
    early = np.array([100, 300, 250, 200, 180, 170, 160, 150, 140, 130, 120])  # peak at epoch 1 of 10 (>= 10%)
    suppressed = np.array([100, 90, 80, 70, 60, 50, 45, 40, 35, 30, 25])  # peak at epoch 1, then -72%
    assert vision.classify_norm_regime(EPOCHS, growing) == "weak"
    assert vision.classify_norm_regime(EPOCHS, peaked) == "intermediate"
    assert vision.classify_norm_regime(EPOCHS, early) == "strong"  # decay 60% >= 35%
    assert vision.classify_norm_regime(EPOCHS, suppressed) == "strong"
    rule = vision.VisionRegimeRule(early_peak_fraction=0.2)
    assert vision.classify_norm_regime(EPOCHS, 0.5 * early + 0.5 * early.max(), rule) == "strong"  # peak in first 20%
    collapsed = np.array([100, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])  # flat after collapsing: no decay
    assert vision.classify_norm_regime(EPOCHS, collapsed) == "strong"
    assert vision.classify_norm_regime(EPOCHS, collapsed, vision.VisionRegimeRule(below_init_is_strong=False)) == "weak"


def test_summarise_transition_times():
    head = np.array([1, 2, 4, 8, 10, 9.5, 9.2, 8.8, 8.5, 8.4, 8.3])  # peak at 4, <= 9 first at 7
    table = pd.DataFrame({"epoch": EPOCHS, "run": 0, "norm_sq": 100 + EPOCHS, "norm_sq:head": head,
                          "norm_sq:conv1": 1 + EPOCHS, "clean_acc": np.linspace(0.1, 0.6, 11),
                          "shortcut_acc": np.linspace(1, 0.5, 11)})
    row = vision.summarise(table, ["run"], layers=["conv1"], clean_threshold=0.35).iloc[0]
    assert row.T_head_peak == 4 and row.T_head_contraction == 7 and row.T_clean_acc == 5
    assert row.regime == "weak" and row["peak_step:conv1"] == 10 and math.isclose(row["decay_pct:head"], 17.0)
    growing = table.assign(**{"norm_sq:head": 1.0 + EPOCHS})
    assert math.isnan(vision.summarise(growing, ["run"]).iloc[0].T_head_peak)  # censored: the head never contracts


def test_regime_table_counts_and_means():
    summary = pd.DataFrame({"lam": [0.1, 0.1, 0.1, 1.0], "regime": ["weak", "intermediate", "intermediate", "strong"],
                            "peak_step": [10, 6, 8, 1], "decay_pct": [1.0, 10.0, 20.0, 50.0],
                            "V_peak": [100, 80, 60, 10], "V_final": [99, 72, 48, 5]})
    table = vision.regime_table(summary, "lam")
    assert table.loc[0.1, "regime"] == "intermediate" and table.loc[0.1, "seeds (w/i/s)"] == "1/2/0"
    assert table.loc[1.0, "seeds (w/i/s)"] == "0/0/1"
    assert table.loc[0.1, "peak epoch"] == 8.0 and table.loc[0.1, "decay %"] == 10.3
    assert table.loc[0.1, "V_final"] == 73 and table.loc[0.1, "V_final sd"] == round(np.std([99, 72, 48], ddof=1))


PEAKED = np.array([100, 120, 140, 160, 170, 165, 160, 155, 150, 150, 150])  # peak at epoch 4, then −11.8 %


def test_a_transition_needs_the_model_to_leave_the_shortcut():
    # Catches: the norm-only rule ("intermediate" = a peak and a 2–35 % decay) standing in for a delayed transition.
    flat_clean, rising_clean = np.full(11, 0.15), np.r_[np.full(5, 0.15), np.linspace(0.17, 0.40, 6)]
    stuck, leaving = np.full(11, 1.0), np.r_[np.full(5, 1.0), np.linspace(0.9, 0.3, 6)]
    assert vision.classify_norm_regime(EPOCHS, PEAKED) == "intermediate"
    assert vision.classify_vision_regime(EPOCHS, PEAKED, flat_clean, stuck) == "weak"  # the shortcut persists
    assert vision.classify_vision_regime(EPOCHS, PEAKED, rising_clean, stuck) == "intermediate"
    assert vision.classify_vision_regime(EPOCHS, PEAKED, flat_clean, leaving) == "intermediate"
    # a rise before the norm's peak is not a transition after it
    early_rise = np.r_[np.linspace(0.1, 0.4, 5), np.full(6, 0.4)]
    assert vision.classify_vision_regime(EPOCHS, PEAKED, early_rise, stuck) == "weak"
    # suppression stays strong without a transition; a growing norm stays weak whatever the accuracy does
    suppressed = np.array([100, 90, 80, 70, 60, 50, 45, 40, 35, 30, 25])
    assert vision.classify_vision_regime(EPOCHS, suppressed, flat_clean, stuck) == "strong"
    assert vision.classify_vision_regime(EPOCHS, 100 + 10 * EPOCHS, rising_clean, leaving) == "weak"


def test_a_shortcut_the_model_cannot_leave_never_reads_intermediate():
    # The ρ = 1 negative control: every image carries its class border, so the model never leaves it; its norm can
    # peak and contract (decay 3–10 % at cpu scale) and its clean accuracy wobbles by a point or two.
    rng = np.random.default_rng(0)
    for seed in range(20):
        decay = rng.uniform(0.02, 0.3)
        peak = int(rng.integers(2, 8))
        norm = np.r_[np.linspace(100, 200, peak + 1), np.linspace(200, 200 * (1 - decay), 11 - peak)[1:]]
        clean = 0.12 + rng.uniform(-0.02, 0.02, 11)  # chance-level clean accuracy, noisy by ±2 points
        reliance = np.clip(1.0 - rng.choice([0.0, 0.1], 11), 0, 1)  # one gray image of ten may flip
        table = pd.DataFrame({"epoch": EPOCHS, "run": seed, "norm_sq": norm, "norm_sq:head": norm,
                              "clean_acc": clean, "shortcut_acc": reliance})
        row = vision.summarise(table, ["run"], reliance="shortcut_acc").iloc[0]
        assert row.regime != "intermediate", (seed, decay, peak)
        assert row.norm_regime in ("intermediate", "strong")  # what the norm-only rule would have said


def test_left_shortcut_runs_lists_the_runs_that_left_and_only_those():
    # Catches: a table of "runs that left the shortcut" that lists a run stuck on it, or reads its numbers off
    # another run. Two runs peak at epoch 5 and contract; only seed 1's clean accuracy then rises.
    rising = np.r_[np.full(6, 0.15), np.linspace(0.2, 0.40, 5)]
    rows = []
    for seed, clean in ((0, np.full(11, 0.15)), (1, rising)):
        rows.append(pd.DataFrame({"epoch": EPOCHS, "lam": 0.5, "seed": seed, "norm_sq": PEAKED,
                                  "norm_sq:head": PEAKED, "clean_acc": clean, "reliance": np.full(11, 0.9)}))
    table = pd.concat(rows, ignore_index=True)
    summary = vision.summarise(table, ["lam", "seed"], reliance="reliance")
    left = vision.left_shortcut_runs(summary, table, clean="clean_acc", reliance="reliance")
    assert list(left.seed) == [1] and list(left["λ"]) == [0.5]
    row = left.iloc[0]
    assert row["peak epoch"] == EPOCHS[np.argmax(PEAKED)]
    assert math.isclose(row["clean % up to the peak"], 15.0) and math.isclose(row["clean % final"], 40.0)
    assert row["reliance at the peak"] == row["reliance final"] == 0.9
    # no run that left: an empty table with the same columns
    none = vision.left_shortcut_runs(summary[summary.seed == 0], table, clean="clean_acc", reliance="reliance",
                                     clean_label="conflicting")
    assert none.empty and "conflicting % final" in none.columns
