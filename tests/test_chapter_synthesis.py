"""Chapter 6's module (nhtlib.chapters.synthesis): D_LR at the transition, the forecaster's claim, the S spectrum and NHT
Table 3 (moved from chapter 4), on synthetic run tables with known answers (nothing is trained)."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.analysis import forecast, statistics
from nhtlib.chapters import celeba_waterbirds as cw
from nhtlib.chapters import synthesis as syn
from nhtlib.report.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES

SEEDS = (0, 1, 2)


def flat(t):
    """The control runs' D_LR: 0.8 throughout (early training does not move it)."""
    return 0.8


def domain(dlr_of, T_of=lambda seed, lam: 1000.0, seeds=SEEDS, lams=(0.1, 0.3), steps=2000, key="toy",
           name="toy (XOR, ours)", never=flat, never_lams=(0.001,)):
    """A domain whose runs log every 50 steps; D_LR(t) = dlr_of(t, T) and a norm that peaks at T / 2; per seed one
    run at each of `never_lams` never transitions (T = NaN, D_LR(t) = never(t), a flat norm): D2's control arm."""
    rows, summary = [], []
    run = 0
    for seed in seeds:
        for lam in (*lams, *never_lams):
            T = T_of(seed, lam) if lam in lams else float("nan")
            for t in np.arange(0, steps + 1, 50.0):
                if np.isfinite(T):
                    v = 100 + 900 * min(t, T / 2) / (T / 2) - (800 * (1 - np.exp(-(t - T / 2) / T)) if t > T / 2
                                                               else 0)
                    dlr = dlr_of(t, T)
                else:
                    v, dlr = 1000.0, never(t)
                rows.append({"run": run, "seed": seed, "lam": lam, "lr": 1e-3, "step": t, "norm_sq": v,
                             "dlr": dlr + 0.001 * seed, "dlr_null": 0.8, "reliance": 0.0})
            summary.append({"run": run, "seed": seed, "lam": lam, "T": T, "lr": 1e-3})
            run += 1
    return syn.DomainTrajectories(key, name, "01_toy_norm_hierarchy", pd.DataFrame(rows),
                                  pd.DataFrame(summary), "T_test", "none")


def drop_at_T(t, T):
    """0.8 until T − T/4, a linear fall to 0.4 at T + T/4, then flat: it moves only across the transition."""
    return float(np.interp(t, [0, 0.75 * T, 1.25 * T, 1e9], [0.8, 0.8, 0.4, 0.4]))


def test_dlr_change_across_and_before_the_transition():
    rows = syn.dlr_at_transition(domain(drop_at_T))
    assert len(rows) == 6
    assert rows.across.to_numpy() == pytest.approx(-0.4) and rows.before.to_numpy() == pytest.approx(0.0)
    assert rows.moved.to_numpy() == pytest.approx(0.4)
    # a steady drift moves as much before as across: |across| − |before| = 0
    drift = syn.dlr_at_transition(domain(lambda t, T: 0.9 - 0.2 * t / T))
    assert drift.moved.to_numpy() == pytest.approx(0.0, abs=1e-12)
    # a run logged only until T (< T + h) is censored
    short = syn.dlr_at_transition(domain(drop_at_T, steps=1000))
    assert short.across.isna().all()
    # the control: the same steps in the seed's non-transitioned run (flat: 0), so specific = across
    assert rows.control_across.to_numpy() == pytest.approx(0.0) and rows.specific.to_numpy() == pytest.approx(-0.4)
    # without a non-transitioned run there is no control
    assert syn.dlr_at_transition(domain(drop_at_T, never_lams=())).control_across.isna().all()


def early_fall(t):
    """D_LR falls over the first 1,500 steps in every run, transitioned or not: 0.8 → 0.4."""
    return float(np.interp(t, [0, 1500, 1e9], [0.8, 0.4, 0.4]))


NO_SCORES = pd.DataFrame(columns=["domain"])


def judged(domains, scores=NO_SCORES):
    """Every claims row of the chapter, by id, as the notebook records them."""
    return {r.id: r for r in syn.CHAPTER.judge(syn.analyse(domains, scores))}


def test_dlr_claims_decide_on_seeds():
    d = {"toy": domain(drop_at_T)}
    results = judged(d)
    assert results["D1-toy"].verdict == REPRODUCED and results["D2-toy"].verdict == REPRODUCED
    assert results["D1-toy"].n == 3 and results["D1-toy"].source == "book"
    rises = {"toy": domain(lambda t, T: 1.2 - drop_at_T(t, T))}  # the mirror image: D_LR rises across T
    r = judged(rises)
    assert r["D1-toy"].verdict == REPRODUCED and r["D2-toy"].verdict == NOT_REPRODUCED
    steady = {"toy": domain(lambda t, T: 0.5)}  # flat: no change either way
    r = judged(steady)
    assert r["D2-toy"].verdict == INCONCLUSIVE
    # a fall as large in the runs that never transition is early training, not the transition: never reproduced
    common = {"toy": domain(lambda t, T: early_fall(t), T_of=lambda s, lam: 1000.0 + 100 * s, never=early_fall)}
    r = judged(common)
    assert r["D2-toy"].verdict != REPRODUCED and r["D2-toy"].low <= 0 <= r["D2-toy"].high
    # ... while D2's old statistic (the change across T alone) would have called it a fall
    assert (syn.dlr_at_transition(common["toy"]).across < -0.1).all()
    # the control runs fall more than the transitioned ones: D2 not reproduced
    steeper = {"toy": domain(drop_at_T, never=lambda t: float(np.interp(t, [0, 700, 1300, 1e9], [0.9, 0.9, 0.0, 0.0])))}
    assert judged(steeper)["D2-toy"].verdict == NOT_REPRODUCED
    # no seed has a run that never transitioned: the control arm is missing, D2 is not testable (D1 still is)
    r = judged({"toy": domain(drop_at_T, never_lams=())})
    assert r["D2-toy"].verdict == NOT_TESTABLE and "control arm" in r["D2-toy"].ours
    assert r["D1-toy"].verdict == REPRODUCED
    # domains that were not loaded, and a domain without a transition, are not testable
    assert r["D1-celeba"].verdict == NOT_TESTABLE and r["F1-celeba"].verdict == NOT_TESTABLE
    never = {"toy": domain(drop_at_T, T_of=lambda s, lam: float("nan"))}
    r = judged(never)
    assert r["D1-toy"].verdict == NOT_TESTABLE and "no run transitioned" in r["D1-toy"].ours


def test_the_forecaster_claim_reads_held_out_seeds():
    rows = []
    for seed in SEEDS:
        for run, (f_within, b_within) in enumerate([(True, False), (True, False), (False, False)]):
            for method, within in ((forecast.FORECASTER, f_within), (forecast.BASELINE, b_within)):
                rows.append({"domain": "toy (XOR, ours)", "run": f"{seed}-{run}", "group": seed, "method": method,
                             "fraction": syn.AT_BUDGET, "within": within, "n_observed": 10})
    gain = syn._share_gain(pd.DataFrame(rows), "toy (XOR, ours)")
    assert gain.value == pytest.approx(2 / 3) and gain.n == 3
    assert syn._share_gain(pd.DataFrame(rows), "CelebA").n == 0
    # other fractions (e.g. half of the budget) are not F1's
    assert syn._share_gain(pd.DataFrame(rows).assign(fraction=0.5), "toy (XOR, ours)").n == 0
    assert syn.forecast_blind(pd.DataFrame(rows), "toy (XOR, ours)") is None
    # a logging grid with 2 points by the observation time leaves the forecaster nothing to read: not testable
    sparse = pd.DataFrame(rows).assign(n_observed=2)
    assert "logged point" in syn.forecast_blind(sparse, "toy (XOR, ours)")


def test_the_forecast_horizon_is_the_budget_not_the_answer():
    """Runs of one λ whose T differ: a fraction of the realised T would tell the forecaster T; at a fixed point of
    the budget it is the same t for every run, only pending runs are scored and both methods know T > t."""
    trajs = [forecast.Trajectory(f"{g}-{i}", g, np.arange(0.0, 2001.0, 50.0), np.full(41, 5.0), 1e-3, 0.1, T)
             for g in (0, 1, 2) for i, T in enumerate((300.0, 800.0, 1200.0, 1600.0))]
    e = forecast.evaluate_pending(trajs, budget=2000.0, fractions=(0.25,))
    assert set(e.run) == {f"{g}-{i}" for g in (0, 1, 2) for i in (1, 2, 3)}  # T = 300 is past at t = 500
    assert (e.observed_until == 500.0).all() and (e.n_observed == 10).all()
    base = e[e.method == forecast.BASELINE]
    # a flat norm: no forecast, every one a miss; the baseline is the mean T of the other seeds' pending runs
    assert not e[e.method == forecast.FORECASTER].within.any()
    assert base.predicted.to_numpy() == pytest.approx(1200.0)
    # the baseline is raised to the observation point when its fit would forecast a past transition
    late = forecast.evaluate_pending(trajs, budget=2000.0, fractions=(0.7,))
    assert (late[late.method == forecast.BASELINE].predicted >= 1400.0).all()


def test_forecaster_claim_is_not_testable_where_the_grid_is_blind():
    """All transitions before a quarter of the budget: no run is pending there, F1 is not testable (not a failure);
    with pending runs and a dense grid it is judged."""
    early = {"toy": domain(drop_at_T, T_of=lambda s, lam: 400.0, steps=2000)}
    r = judged(early)
    assert r["F1-toy"].verdict == NOT_TESTABLE and "pending" in r["F1-toy"].ours
    late = {"toy": domain(drop_at_T, T_of=lambda s, lam: 1000.0 + 200 * lam, steps=2000)}
    assert judged(late)["F1-toy"].verdict != NOT_TESTABLE


def test_claims_are_declared_once():
    ids = [c.id for c in syn.CHAPTER.claims]
    assert ids == [f"{kind}-{key}" for key in syn.DOMAIN_NAMES for kind in ("D1", "D2", "F1")] + ["S1", "EM"]
    for c in syn.CHAPTER.claims:
        assert c.spec.source in SOURCES and c.where and c.test
    assert {c.spec.source for c in syn.CHAPTER.claims if c.id not in ("S1", "EM")} == {"book"}
    assert "[paper" in syn.CHAPTER.claim("S1").spec.paper
    assert syn.CHAPTER.sweeps_of is syn.sweeps and set(syn._READ) == set(syn.DOMAIN_NAMES)


# ------------------------------------------------------------------------------------------ the S spectrum

def scores_frame(means, wb=cw.STANDIN, seeds=SEEDS):
    """Recorded separation scores: two pooled runs per (domain, seed) around the given mean S."""
    rows = []
    for name, mean in means.items():
        for s in seeds:
            for dv in (-0.02, 0.02):
                rows.append({"domain": wb if name == "Waterbirds" else name, "chapter": "any", "weight_decay": 0.1,
                             "seed": s, "regime": "intermediate", "pooled": True, "S": mean + dv + 0.01 * s,
                             "signal": "φ", "scale": "cpu"})
    return pd.DataFrame(rows)


PAPER_LIKE = {"modular arithmetic": 0.95, "CIFAR-10 borders": 0.6, "CelebA": -0.1, "Waterbirds": 0.0}


def s1(scores, waterbirds=cw.STANDIN):
    """S1's row with chapter 4's Waterbirds runs going by the name `waterbirds`."""
    domains = {"waterbirds": domain(drop_at_T, key="waterbirds", name=waterbirds)}
    return syn.CHAPTER.claim("S1").judge(syn.analyse(domains, scores))


def test_s1_orders_the_spectrum():
    assert s1(scores_frame(PAPER_LIKE)).verdict == REPRODUCED
    # without chapter 4's runs loaded, the Waterbirds scores are read under the stand-in's name
    assert syn.CHAPTER.claim("S1").judge(syn.analyse({}, scores_frame(PAPER_LIKE))).verdict == REPRODUCED
    swapped = {**PAPER_LIKE, "CelebA": 0.8}  # CelebA above CIFAR-10: one step of three fails
    assert s1(scores_frame(swapped)).verdict == PARTLY
    # the stand-in's scores are read under its own name, not the real data set's
    assert s1(scores_frame(PAPER_LIKE), waterbirds="Waterbirds").verdict == NOT_TESTABLE
    row = s1(scores_frame({k: v for k, v in PAPER_LIKE.items() if k != "modular arithmetic"}))
    assert row.verdict == NOT_TESTABLE and "modular arithmetic" in row.ours
    assert s1(scores_frame(PAPER_LIKE, seeds=(0, 1))).verdict == INCONCLUSIVE


def test_s1_gaps_are_unpaired():
    """Seed i of one chapter has nothing to do with seed i of another: the gap is a Welch difference of means, and
    domains recorded on different seeds (no seed in common) still compare."""
    gap = statistics.welch_difference([1.0, 1.1, 0.9], [0.5, 0.7, 0.6])
    assert gap.value == pytest.approx(0.4) and gap.n == 3 and gap.method == "welch"
    # sd 0.1 in each, n = 3: se = 0.1·√(2/3), df = 4, t = 2.776
    assert gap.high - gap.value == pytest.approx(2.776 * 0.1 * (2 / 3) ** 0.5, rel=1e-3)
    shifted = pd.concat([scores_frame({k: v}, seeds=(0, 1, 2) if k != "CelebA" else (5, 6, 7))
                         for k, v in PAPER_LIKE.items()])
    assert s1(shifted).verdict == REPRODUCED
    assert statistics.welch_difference([1.0], [0.0, 0.1]).n == 1


def test_spectrum_table_lists_every_domain():
    spec = syn.spectrum_table(scores_frame({"CIFAR-10 borders": 0.6, "CelebA": -0.1, "Waterbirds": 0.0}))
    assert list(spec.index) == ["toy (XOR, ours)", "modular arithmetic", "CIFAR-10 borders", "CelebA", cw.STANDIN]
    assert spec.loc["modular arithmetic", "runs"] == 0 and spec.loc["CelebA", "runs"] == 6
    assert spec.loc["CelebA", "S (mean)"] == pytest.approx(-0.09)
    assert spec.loc[cw.STANDIN, "paper S"] == "≈ 0.0" and spec.loc["CIFAR-10 borders", "chapter"] == "03_border_cifar"


def test_table3_query_puts_each_chapter_in_its_row():
    rows = [("02_grokking", "P1", INCONCLUSIVE, "modular arithmetic/P1"),
            ("03_border_cifar", "P1", REPRODUCED, "CIFAR-10 borders/P1"),
            ("03_border_cifar", "P6", NOT_REPRODUCED, "CIFAR-10 borders/P6"), (cw.NAME, "C-P1", REPRODUCED, "CelebA/P1"),
            (cw.NAME, "W-P1", NOT_REPRODUCED, "Waterbirds/P1"), (cw.NAME, "W-P3", INCONCLUSIVE, "Waterbirds/P3"),
            (cw.NAME, "C-P6", NOT_TESTABLE, "CelebA/P6"), (cw.NAME, "C-L1", REPRODUCED, ""),
            ("05_dlr_batchnorm", "C-P2", PARTLY, "")]
    recorded = pd.DataFrame(rows, columns=["chapter", "id", "verdict", "cell"])
    spectrum = syn.spectrum_table(scores_frame(PAPER_LIKE))
    table = syn.table3(recorded, spectrum)
    assert list(table.index) == ["modular arithmetic", "CIFAR-10 borders", "CelebA", cw.STANDIN]
    assert table.loc["modular arithmetic", "P1"] == "✓ undecided"
    assert table.loc["CIFAR-10 borders", "P6"] == "× disagrees"
    assert table.loc["CelebA", "P1"] == "✓ agrees" and table.loc["CelebA", "P6"] == "× untested (?)"
    assert table.loc["CelebA", "P2"] == "✓ not run"  # a row without CelebA's cell is not CelebA's
    assert table.loc[cw.STANDIN, "P1"] == "✓ disagrees" and table.loc[cw.STANDIN, "P3"] == "× undecided"
    assert table.loc["CelebA", "agrees"] == 1 and table.loc["CIFAR-10 borders", "agrees"] == 1
    assert table.loc["CIFAR-10 borders", "disagrees"] == 1 and table.loc["modular arithmetic", "undecided"] == 1
    assert table.loc["CelebA", "paper confirmed"] == "4/6" and table.loc[cw.STANDIN, "paper S"] == "≈ 0.0"
    assert table.loc["CelebA", "our S"] == "-0.09"
