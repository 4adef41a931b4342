"""Grokking metrics on synthetic trajectories with known answers."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.analysis import separation
from nhtlib.analysis import grok_times as grokking

STEPS = np.arange(0, 5001, 100)


def trajectory(run=0, lam=1.0, lr=1e-3, t_mem=300, t_grok=2000, v_mem=4000.0, r=0.998, c=200.0, grok=True,
               memorise=True):
    """Train acc jumps to 1 at t_mem, test acc to 1 at t_grok; after t_mem the norm is A r^(t - t_mem) + C."""
    s = STEPS.astype(float)
    norm = np.where(s < t_mem, v_mem * (0.5 + 0.5 * s / t_mem), (v_mem - c) * r ** (s - t_mem) + c)
    return pd.DataFrame({
        "run": run, "weight_decay": lam, "lr": lr, "seed": run, "step": STEPS,
        "train_acc": np.where((s >= t_mem) & memorise, 1.0, 0.5),
        "test_acc": np.where((s >= t_grok) & grok, 0.995, 0.02),
        "norm_sq": norm, "norm_sq:embedding": 0.5 * norm, "norm_sq:attention": 0.3 * norm,
        "norm_sq:ffn": 0.1 * norm, "norm_sq:head": 0.1 * norm,
    })


def test_times_norms_and_contraction_fit():
    out = grokking.grokking_summary(trajectory()).iloc[0]
    assert out.T_mem == 300 and out.T_grok == 2000 and out.delay == 1700
    assert out.V_mem == pytest.approx(4000.0)
    v_end = 3800 * 0.998 ** 4700 + 200
    assert out.V_post == pytest.approx(v_end) and out.log_ratio == pytest.approx(np.log(4000 / v_end))
    assert out.r_fit == pytest.approx(0.998, abs=1e-6) and out.fit_r2 > 0.9999
    assert out.gamma_fit == pytest.approx(0.002, rel=1e-3)
    assert out.c_fit == pytest.approx(2.0, rel=1e-3)  # gamma / (eta * lambda), eta * lambda = 1e-3
    assert out.T_pred_fit == pytest.approx(out.log_ratio / out.gamma_fit)
    assert out.T_pred_decay == pytest.approx(out.log_ratio / 2e-3)
    assert out.T_tilde == pytest.approx(1700 * 1.0 / out.log_ratio)
    assert out.grokked and out.memorised


def test_threshold_and_post_window():
    t = trajectory()
    assert np.isnan(grokking.grokking_summary(t, grok_threshold=0.999).iloc[0].T_grok)
    out = grokking.grokking_summary(t, post_window=500).iloc[0]
    assert out.T_end == 2500 and out.V_post == pytest.approx(3800 * 0.998 ** 2200 + 200)


def test_no_grokking_and_no_memorisation_give_nan():
    out = grokking.grokking_summary(trajectory(grok=False, memorise=False)).iloc[0]
    assert np.isnan(out.T_mem) and np.isnan(out.T_grok) and np.isnan(out.delay) and np.isnan(out.gamma_fit)
    assert not out.grokked and not out.memorised


def test_hidden_group_and_layer_columns():
    t = grokking.add_hidden_norm(trajectory())
    np.testing.assert_allclose(t["norm_sq:hidden"], 0.4 * t.norm_sq)
    out = grokking.grokking_summary(t, layers=grokking.GROUPS)
    assert {"peak_step:head", "decay_pct:hidden", "contraction_step:embedding"} <= set(out.columns)


def test_regimes_and_table():
    runs = []
    for lam, grok, mem in [(0.01, False, True), (0.1, True, True), (1.0, True, True), (5.0, False, False)]:
        for seed in range(2):
            runs.append(trajectory(run=len(runs), lam=lam, grok=grok, memorise=mem))
    table = pd.concat(runs)
    summary = grokking.grokking_summary(table)
    assert dict(grokking.classify_lambdas(summary)) == {0.01: "I", 0.1: "II", 1.0: "II", 5.0: "III"}
    t3 = grokking.regime_table(summary)
    assert list(t3.regime) == ["I", "II", "II", "III"]
    assert list(t3.grokked) == ["0/2", "2/2", "2/2", "0/2"] and list(t3.memorised) == ["2/2", "2/2", "2/2", "0/2"]
    assert t3.loc[1.0, "T_grok"] == "2,000 ± 0"
    # without any regime-II lambda: memorising lambdas are I, the others III
    no_ii = summary[summary.weight_decay.isin([0.01, 5.0])]
    assert dict(grokking.classify_lambdas(no_ii)) == {0.01: "I", 5.0: "III"}


def test_separation_of_a_grokking_run():
    t = trajectory()
    s = t.step.to_numpy(float)
    t["test_acc"] = np.clip((s - 300) / 5000, 0, 1)  # reliance 1 - acc falls while the norm falls: S = +1
    start = pd.Series({0: 300.0})
    score = separation.per_run(t.assign(reliance=1 - t.test_acc), ["run"], "reliance", start=start)
    assert score[0] == pytest.approx(1.0)
    t["test_acc"] = 1 - t["test_acc"]  # reliance rises while the norm falls: S = -1
    assert separation.per_run(t.assign(reliance=1 - t.test_acc), ["run"], "reliance", start=start)[0] == \
        pytest.approx(-1.0)
