"""Chapter 1's module (nhtlib.chapters.toy_norm_hierarchy): its claims, declared once as `Claim` objects in
`CHAPTER.claims`, judged on a hand-built summary with known answers (nothing is trained). The expected rows are
those the chapter's former `judge(summary)` gave on the same summary."""
import numpy as np
import pandas as pd

from nhtlib.chapters import CHAPTERS, toy_norm_hierarchy as toy
from nhtlib.report import claims, predictions
from nhtlib.report.verdicts import NOT_REPRODUCED, PARTLY, REPRODUCED

SEEDS = (0, 1, 2)
ALPHAS = (30.0, 100.0, 300.0)
REGIME = {0.01: "weak", 0.1: "intermediate", 0.3: "intermediate", 1.0: "intermediate", 10.0: "strong"}


def summary() -> pd.DataFrame:
    """One row per (seed, α, λ), with the columns the claims read. By construction: the final norm falls with λ, the
    three regimes occur in order of λ, the delay is 0.4 × T_pred plus an offset (R² ≈ 1, slope 0.4), T_struct =
    500/λ plus an offset, V_sc = 100 α, c = 1.9–2.0, the output layer goes first only at α = 300 (1 run in 3), S = 0.7–0.8."""
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
                    "S": 0.7 + 0.05 * seed if inter else np.nan, "pooled": inter})
    return pd.DataFrame(rows)


def test_claims_in_the_order_of_the_sections_and_registered():
    assert [c.id for c in toy.CHAPTER.claims] == ["P1", "P2", "T2", "P6", "C1", "P4", "P5"]
    assert CHAPTERS[toy.NAME] is toy.CHAPTER
    for pid in ("P1", "P2", "P6", "P4", "P5"):
        assert toy.CHAPTER.claim(pid).spec == predictions.spec(pid, toy.DOMAIN)
    assert toy.CHAPTER.claim("T2").spec == toy.DELAY_LAW and toy.CHAPTER.claim("C1").spec == toy.CONTRACTION
    assert all(c.spec.source == "book" for c in toy.CHAPTER.claims)  # the toy is ours


def test_the_opening_table_is_made_from_the_claims():
    table = claims.overview_markdown(toy.CHAPTER.claims).splitlines()
    assert len(table) == 2 + len(toy.CHAPTER.claims)
    for line, claim in zip(table[2:], toy.CHAPTER.claims):
        assert claim.where and claim.test
        assert line.startswith(f"| **{claim.id}** |") and claim.where in line and claim.test in line
    assert "{ref}`Fig. 1.3a <fig-1-3>`" in toy.CHAPTER.claim("T2").where


def test_judge_on_a_known_summary():
    rows = toy.CHAPTER.judge(summary())
    assert [r.id for r in rows] == [c.id for c in toy.CHAPTER.claims]
    got = {r.id: r for r in rows}
    assert {cid: r.verdict for cid, r in got.items()} == {
        "P1": REPRODUCED, "P2": REPRODUCED, "T2": PARTLY, "P6": REPRODUCED, "C1": NOT_REPRODUCED,
        "P4": NOT_REPRODUCED, "P5": REPRODUCED}
    assert all(r.n == len(SEEDS) for r in rows)
    assert got["P1"].ours == "−1.00 [−1.00, −1.00], n = 3 seeds"
    assert got["T2"].ours == ("R²: 1.00 [1.00, 1.00], n = 3 seeds (reproduced); "
                              "slope: 0.40 [0.40, 0.40], n = 3 seeds (not reproduced)")
    assert got["P6"].ours == "1.00 [1.00, 1.00], n = 3 seeds"
    assert got["C1"].ours == "1.95 [1.83, 2.08], n = 3 seeds"
    assert got["P4"].ours == "0.33 [0.33, 0.33], n = 3 seeds"
    assert got["P5"].ours == "0.75 [0.63, 0.87], n = 3 seeds"
    assert np.isclose(got["C1"].low, 1.8287931144124832) and np.isclose(got["P5"].high, 0.8742068855875165)


def test_claims_judge_records_the_chapters_rows():
    recorded = claims.Claims(toy.NAME, "smoke").judge(toy.CHAPTER.claims, summary())
    assert list(recorded) == [c.id for c in toy.CHAPTER.claims]
    assert [r.verdict for r in recorded.values()] == [r.verdict for r in toy.CHAPTER.judge(summary())]


def test_narrative_numbers_are_medians_over_the_intermediate_runs():
    numbers = toy.narrative_numbers(summary())
    assert numbers["n_intermediate"] == 27.0  # 3 seeds x 3 α x 3 intermediate λ
    assert np.isclose(numbers["c_median"], 1.953)
    assert numbers["V_sc_median"] == 10_000.0 and np.isclose(numbers["V_st_median"], 1000 / 0.3 + 1)
