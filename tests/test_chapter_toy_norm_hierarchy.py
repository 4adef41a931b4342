"""Chapter 1's module (nhtlib.chapters.toy_norm_hierarchy): its claims, declared once as `Claim` objects in
`CHAPTER.claims`, judged on a hand-built summary with known answers (nothing is trained). The expected rows are
those the chapter's former `judge(summary)` gave on the same summary."""
import numpy as np
import pandas as pd

from nhtlib.analysis import separation
from nhtlib.chapters import CHAPTERS, toy_norm_hierarchy as toy
from nhtlib.report import claims, predictions
from nhtlib.report.verdicts import NOT_TESTABLE, INCONCLUSIVE, NOT_REPRODUCED, PARTLY, REPRODUCED

SEEDS = (0, 1, 2)
ALPHAS = (30.0, 100.0, 300.0)
REGIME = {0.01: "weak", 0.1: "intermediate", 0.3: "intermediate", 1.0: "intermediate", 10.0: "strong"}


def summary() -> pd.DataFrame:
    """One row per (seed, α, λ), with the columns the claims read. By construction: the final norm falls with λ, the
    three regimes occur in order of λ, the delay is 0.4 × T_pred plus an offset (R² ≈ 1, slope 0.4), T_struct =
    500/λ plus an offset, V_sc = 100 α, c = 1.9–2.0, the output layer goes first only at α = 300 (1 run in 3),
    S = 0.7–0.8 and W = 0.2 on every run that reached the shortcut (all but the strong ones) and decays."""
    rows = []
    for seed in SEEDS:
        for alpha in ALPHAS:
            for lam, regime in REGIME.items():
                inter = regime == "intermediate"
                t_pred = np.log(alpha) / (2e-3 * lam) if inter else np.nan
                offset = (seed + 1) * 10.0 + alpha / 10
                rows.append({
                    "alpha": alpha, "lam": lam, "seed": seed, "regime": regime, "V_final": 1000.0 / lam + seed,
                    "V_fit": 100.0 * alpha,
                    "T_pred": t_pred, "delay": 0.4 * t_pred + offset if inter else np.nan,
                    "T_struct": 500.0 / lam + offset if inter else np.nan,
                    "c_fit": 1.9 + 0.05 * seed + 0.01 * lam if inter else np.nan,
                    f"peak_step:{toy.HEAD}": 100.0, f"peak_step:{toy.BODY}": 100.0 if alpha < 300.0 else 200.0,
                    f"decay_pct:{toy.HEAD}": 60.0, f"decay_pct:{toy.BODY}": 70.0 if alpha < 300.0 else 10.0,
                    "T_fit": np.nan if regime == "strong" else 100.0, "decay_pct": 50.0,
                    "S": 0.7 + 0.05 * seed if inter else np.nan, "W": 0.2 if regime != "strong" else np.nan})
    out = pd.DataFrame(rows)
    out["pooled"] = toy.separation_runs(out)
    return out


def test_claims_in_the_order_of_the_sections_and_registered():
    assert [c.id for c in toy.CHAPTER.claims] == ["P1", "P2", "T2", "P6", "C1", "P4", "P5", "TH34"]
    assert CHAPTERS[toy.NAME] is toy.CHAPTER
    for pid in ("P1", "P2", "P6"):
        assert toy.CHAPTER.claim(pid).spec == predictions.spec(pid, toy.DOMAIN)
    assert toy.CHAPTER.claim("T2").spec == toy.DELAY_LAW and toy.CHAPTER.claim("C1").spec == toy.CONTRACTION
    assert toy.CHAPTER.claim("P4").spec == toy.HEAD_FIRST and toy.CHAPTER.claim("P5").spec == toy.CLEAN_SEPARATION
    assert all(c.spec.source == "book" for c in toy.CHAPTER.claims if c.id != "TH34")  # the toy is ours
    assert toy.CHAPTER.claim("TH34").spec.source == "NHT"  # ... NHT's bound is listed, untested, beside it


def test_the_opening_table_is_made_from_the_claims():
    table = claims.overview_markdown(toy.CHAPTER.claims).splitlines()
    assert len(table) == 2 + len(toy.CHAPTER.claims)
    for line, claim in zip(table[2:], toy.CHAPTER.claims):
        assert claim.where and claim.test
        assert line.startswith(f"| **{claim.id}** |") and claim.where in line and claim.test in line
    assert "{numref}`Fig. {number}a <fig-ch1-delay-law>`" in toy.CHAPTER.claim("T2").where


def test_judge_on_a_known_summary():
    rows = toy.CHAPTER.judge(summary())
    assert [r.id for r in rows] == [c.id for c in toy.CHAPTER.claims]
    got = {r.id: r for r in rows}
    assert {cid: r.verdict for cid, r in got.items()} == {
        "P1": REPRODUCED, "P2": REPRODUCED, "T2": PARTLY, "P6": REPRODUCED, "C1": REPRODUCED,
        "P4": INCONCLUSIVE, "P5": INCONCLUSIVE, "TH34": NOT_TESTABLE}
    assert all(r.n == len(SEEDS) for r in rows if r.id not in ("P4", "TH34"))
    assert got["P4"].n == 27  # runs as the unit: 3 seeds x 3 α x 3 intermediate λ
    assert got["P1"].ours == "all 3 seeds: −1.00"
    assert got["T2"].ours.startswith("R²: all 3 seeds: 1.00 (reproduced); "
                                     "slope: all 3 seeds: 0.40 (not reproduced); slope at fixed λ: ")
    assert got["P6"].ours == "all 3 seeds: 1.00"
    assert got["C1"].ours == "1.95 [1.83, 2.08], n = 3 seeds"  # inside [1, 2.2]: NSDL's 1.41 is not required
    assert got["P4"].ours.startswith("0.33 [") and got["P4"].low < 0.5 < got["P4"].high  # 9 of 27 runs
    assert got["P5"].ours == ("S: 0.75 [0.63, 0.87], n = 3 seeds (inconclusive); "
                              "sharpness: all 3 seeds: 0.20 (reproduced)")
    assert np.isclose(got["C1"].low, 1.8287931144124832)
    assert "construction check" in got["P4"].statement.lower() and "input layer" in got["P4"].note


def test_claims_judge_records_the_chapters_rows():
    recorded = claims.Claims(toy.NAME, "smoke").judge(toy.CHAPTER.claims, summary())
    assert list(recorded) == [c.id for c in toy.CHAPTER.claims]
    assert [r.verdict for r in recorded.values()] == [r.verdict for r in toy.CHAPTER.judge(summary())]


def test_narrative_numbers_are_medians_over_the_intermediate_runs():
    numbers = toy.narrative_numbers(summary())
    assert numbers["n_intermediate"] == 27.0  # 3 seeds x 3 α x 3 intermediate λ
    assert np.isclose(numbers["c_median"], 1.953)
    assert numbers["V_sc_median"] == 10_000.0 and np.isclose(numbers["V_st_median"], 1000 / 0.3 + 1)
    assert np.isclose(numbers["delay_slope"], 0.4, atol=1e-3)  # delay = 0.4 T_pred + offset (what §1.6 quotes)
    assert (numbers["alpha_min"], numbers["alpha_max"]) == (30.0, 300.0)
    assert np.isclose(numbers["r2_alpha_min"], 1.0) and np.isclose(numbers["r2_alpha_max"], 1.0)


# --------------------------------------------------------------------------------- P2: the middle-α slice

def test_p2_reads_one_run_per_lambda_and_seed_on_the_middle_alpha():
    sliced = toy._at_middle(summary())
    assert set(sliced.alpha) == {100.0}
    assert (sliced.groupby(["lam", "seed"]).size() == 1).all()  # no λ can be 'mixed' within a seed on the slice


def test_p2_is_not_broken_by_another_alpha_but_by_the_middle_one():
    table = summary()
    # at α = 30 the λ = 0.1 runs stay weak (the boundary moves with α): the whole grid would mix λ = 0.1
    table.loc[(table.alpha == 30.0) & (table.lam == 0.1), "regime"] = "weak"
    assert predictions.regime_order(table)["in order"].value == 0.0  # a mixed λ breaks the order on the grid
    assert toy.CHAPTER.claim("P2").judge(table).verdict == REPRODUCED  # the slice the claim reads is in order
    # at the middle α, λ = 0.3 strong between intermediate λ's in every seed: out of order
    table.loc[(table.alpha == 100.0) & (table.lam == 0.3), "regime"] = "strong"
    row = toy.CHAPTER.claim("P2").judge(table)
    assert row.verdict == PARTLY and "in order: all 3 seeds: 0.00" in row.ours


def test_p2_order_is_not_read_on_seeds_without_all_three_regimes():
    table = summary()
    table.loc[(table.alpha == 100.0) & (table.lam == 10.0), "regime"] = "intermediate"  # no strong λ
    row = toy.CHAPTER.claim("P2").judge(table)
    assert row.verdict == NOT_REPRODUCED and "in order: no value" in row.ours


# --------------------------------------------------------------------------------- T2: the log-ratio part

def _delay_table(delay_of) -> pd.DataFrame:
    """Intermediate runs on a λ × α grid with T_pred = log(α²)/(2ηλ); delay = delay_of(T_pred, λ, seed)."""
    rows = []
    for seed in SEEDS:
        for alpha in ALPHAS:
            for lam in (0.1, 0.3, 1.0, 3.0):
                t_pred = np.log(alpha ** 2) / (2e-3 * lam)
                rows.append({"seed": seed, "alpha": alpha, "lam": lam, "regime": "intermediate", "T_pred": t_pred,
                             "delay": delay_of(t_pred, lam, seed)})
    return pd.DataFrame(rows)


def test_within_lambda_slope_isolates_the_norm_ratio():
    exact = _delay_table(lambda t, lam, seed: 0.7 * t + 50.0 * (seed + 1))
    assert all(np.isclose(toy.within_lambda_slope(g), 0.7) for _, g in exact.groupby("seed"))
    # a delay that follows 1/λ alone (no log-ratio dependence): the fit across λ is good, the fixed-λ slope is 0
    inverse = _delay_table(lambda t, lam, seed: 900.0 / lam + 3.0 * seed)
    assert all(abs(toy.within_lambda_slope(g)) < 1e-9 for _, g in inverse.groupby("seed"))
    assert np.isnan(toy.within_lambda_slope(exact[exact.alpha == 100.0]))  # one run per λ: nothing to compare


def test_t2_needs_the_log_ratio_not_only_one_over_lambda():
    law = _delay_table(lambda t, lam, seed: (0.7 + 0.01 * seed) * t + 20.0)
    assert toy.CHAPTER.claim("T2").judge(law).verdict == REPRODUCED
    # 1/λ alone, with a slope of delay on T_pred inside [0.5, 2] across the grid: the fixed-λ part fails
    only_lambda = _delay_table(lambda t, lam, seed: (0.9 + 0.01 * seed) * np.log(100.0 ** 2) / (2e-3 * lam))
    row = toy.CHAPTER.claim("T2").judge(only_lambda)
    assert row.verdict == PARTLY and "slope at fixed λ: all 3 seeds: 0.00" in row.ours


# --------------------------------------------------------------------------------- P4: a construction check

def test_p4_share_takes_the_run_as_the_unit():
    table = summary()
    judge = toy.CHAPTER.claim("P4").judge
    table[f"decay_pct:{toy.BODY}"] = 10.0  # the output layer (60 %) contracts more in every run, peaks no later
    row = judge(table)
    assert row.verdict == REPRODUCED and row.n == 27 and "runs" in row.ours
    table[f"decay_pct:{toy.BODY}"] = 90.0  # the input layer contracts more everywhere
    assert judge(table).verdict == NOT_REPRODUCED


# --------------------------------------------------------------------------------- C1: the theory's range

def _with_c(values_by_seed) -> pd.DataFrame:
    return pd.DataFrame([{"seed": seed, "c_fit": c} for seed, cs in enumerate(values_by_seed) for c in cs])


def test_c1_reads_the_theorys_range_not_nsdls_constant():
    judge = toy.CHAPTER.claim("C1").judge
    assert judge(_with_c([[2.0, 2.01], [2.0, 2.02], [1.99, 2.0]])).verdict == REPRODUCED  # pure decay
    assert judge(_with_c([[1.40, 1.41], [1.42, 1.41], [1.40, 1.42]])).verdict == REPRODUCED  # NSDL's 1.41
    assert judge(_with_c([[3.0, 3.1], [3.2, 3.0], [2.9, 3.0]])).verdict == NOT_REPRODUCED  # faster than decay
    assert judge(_with_c([[0.5, 0.6], [0.55, 0.5], [0.6, 0.5]])).verdict == NOT_REPRODUCED  # below NSDL's bound 1
    assert judge(_with_c([[1.0, 2.4], [2.3, 2.4], [2.0, 2.2]])).verdict == INCONCLUSIVE  # straddles 2.2


# --------------------------------------------------------------------------------- P5: S and sharpness

def test_sharpness_in_units_of_the_escape_time():
    steps = np.arange(0.0, 1001.0, 10.0)
    norm = 100.0 * np.exp(-2e-3 * steps) + 1.0  # peak 101 at step 10, final ~1.14
    phi = np.where(steps < 400, 1.0, np.where(steps < 500, 0.5, 0.0))  # 0.8 crossed at 400, 0.2 at 500
    t_escape = np.log(norm[1] / norm[-1]) / 2e-3
    assert np.isclose(separation.sharpness(steps, norm, phi, rate=2e-3), 100.0 / t_escape)
    slow = np.clip(1.0 - steps / 1000.0, 0.0, 1.0)  # a linear fall over the whole run: not sharp
    assert separation.sharpness(steps, norm, slow, rate=2e-3) > 0.5
    assert np.isnan(separation.sharpness(steps, norm, np.ones_like(steps), rate=2e-3))  # φ constant
    stuck = np.where(steps == 0, 0.0, np.where(steps < 400, 1.0, 0.6))  # from 0 at init; never back below 0.2
    assert np.isnan(separation.sharpness(steps, norm, stuck, rate=2e-3))
    assert np.isnan(separation.sharpness(steps, np.linspace(1, 2, len(steps)), phi, rate=2e-3))  # no contraction


def test_separation_runs_are_chosen_before_the_escape():
    table = summary()
    pooled = toy.separation_runs(table)
    assert pooled[table.regime == "weak"].all()  # reached the shortcut and decay, though they never escaped
    assert not pooled[table.regime == "strong"].any()  # never reached the shortcut (no T_fit)
    table.loc[table.lam == 0.3, "decay_pct"] = 1.0
    assert not toy.separation_runs(table)[table.lam == 0.3].any()  # no contraction phase


def test_p5_needs_a_high_s_and_a_sharp_fall():
    table = summary()
    table["S"] = np.where(table.pooled, 0.95 + 0.01 * table.seed, np.nan)
    judge = toy.CHAPTER.claim("P5").judge
    assert judge(table).verdict == REPRODUCED
    table["W"] = np.where(table.pooled, 0.9 + 0.02 * table.seed, np.nan)  # S clean, the fall is slow
    assert judge(table).verdict == PARTLY
    table["S"] = np.where(table.pooled, 0.3 + 0.01 * table.seed, np.nan)  # neither
    assert judge(table).verdict == NOT_REPRODUCED

