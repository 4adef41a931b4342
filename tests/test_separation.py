"""The S spectrum: per-run separation scores recorded by chapters, gathered and summarised per domain."""
import math

import numpy as np
import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.analysis import separation


def scores(values, regimes=None, lams=(0.1, 0.3, 1.0)):
    regimes = regimes or ["intermediate"] * len(values)
    rows = [{"weight_decay": lams[i % len(lams)], "seed": i, "S": v, "regime": r} for i, (v, r) in
            enumerate(zip(values, regimes))]
    frame = pd.DataFrame(rows)
    return frame.assign(pooled=frame.regime == "intermediate")


def test_record_load_and_spectrum_known_values():
    separation.record("02_grokking", "smoke", "modular arithmetic", scores([1.0, 0.8, 0.9]), signal="1 − test acc")
    separation.record("04_x", "smoke", "CelebA", scores([0.2, -0.2, 0.5, 0.9], regimes=["intermediate"] * 3 + ["weak"]),
                      signal="reliance")
    separation.record("04_x", "smoke", "Waterbirds (CUB stand-in)", scores([np.nan, 0.1, 0.3]), signal="reliance")
    loaded = separation.load("smoke")
    assert len(loaded) == 10 and set(loaded.chapter) == {"02_grokking", "04_x"}  # two domains of one chapter both kept
    spec = separation.spectrum(loaded).set_index("domain")
    assert spec.loc["modular arithmetic", "S (mean)"] == pytest.approx(0.9)
    assert spec.loc["modular arithmetic", "sd"] == pytest.approx(0.1)
    assert spec.loc["modular arithmetic", "sem"] == pytest.approx(0.1 / np.sqrt(3))
    assert spec.loc["CelebA", "runs"] == 3 and spec.loc["CelebA", "S (mean)"] == pytest.approx(0.5 / 3)  # weak run out
    assert spec.loc["Waterbirds (CUB stand-in)", "runs"] == 2  # NaN scores do not count
    assert spec.loc["Waterbirds (CUB stand-in)", "paper S"] == "≈ 0.0"  # a stand-in maps to its data set
    assert spec.loc["CelebA", "paper S"] == "−0.11"
    assert separation.load("cpu").empty  # another scale: nothing recorded


def test_record_rejects_missing_columns():
    with pytest.raises(nht.config.ConfigError, match="pooled"):
        separation.record("01_x", "smoke", "toy", scores([0.5]).drop(columns="pooled"), signal="s")


def test_pooled_prefers_intermediate_runs_else_contracting_ones():
    regime = pd.Series(["weak", "intermediate", "strong"])
    decay = pd.Series([0.5, 10.0, 60.0])
    assert separation.pooled(regime, decay).tolist() == [False, True, False]
    regime = pd.Series(["weak", "weak", "strong"])
    assert separation.pooled(regime, decay).tolist() == [False, True, True]
    assert np.isnan(separation.paper_value("toy (XOR, ours)")[0])


def test_s_traj_signs():
    steps = np.arange(10)
    norm = np.r_[np.arange(5), np.arange(5, 0, -1)].astype(float)  # peak at step 5, then contracts
    falling = np.r_[np.ones(5), np.linspace(1, 0, 5)]  # reliance falls with the norm after the peak
    assert separation.s_traj(steps, norm, falling) == pytest.approx(1.0)
    assert separation.s_traj(steps, norm, 1 - falling) == pytest.approx(-1.0)


def test_per_run_scores_every_run_from_its_norm_peak():
    steps = np.arange(10.0)
    norm = np.r_[np.arange(5), np.arange(5, 0, -1)].astype(float)  # peak at step 5
    falling = np.r_[np.ones(5), np.linspace(1, 0, 5)]
    rows = [pd.DataFrame({"step": steps, "norm_sq": norm, "phi": phi, "lam": lam, "seed": 0})
            for lam, phi in ((0.1, falling), (1.0, 1 - falling))]
    table = pd.concat(rows, ignore_index=True).sample(frac=1, random_state=0)  # order does not matter
    s = separation.per_run(table, ["lam", "seed"], "phi")
    assert s.index.names == ["lam", "seed"] and s.name == "S"
    assert s.loc[(0.1, 0)] == pytest.approx(1.0) and s.loc[(1.0, 0)] == pytest.approx(-1.0)
    late = separation.per_run(table, ["lam"], "phi", start=pd.Series({0.1: 8.0, 1.0: 8.0}))  # only 2 points left
    assert list(late.index) == [0.1, 1.0] and late.isna().all()


def test_s_traj_known_answers():
    t = np.arange(6.0)
    v = np.array([1, 5, 4, 3, 2, 1.0])  # peak at step 1
    assert separation.s_traj(t, v, v / 5) == pytest.approx(1.0)
    assert separation.s_traj(t, v, -v) == pytest.approx(-1.0)
    assert math.isnan(separation.s_traj(t, v, np.ones(6)))
    assert math.isnan(separation.s_traj(t, v, v, start=4.0))  # two points < min_points
