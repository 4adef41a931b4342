"""NHT's P1–P6, declared once (nhtlib.report.predictions): the per-seed statistics on tables with known answers, the rule
of every Table 3 cell, and Table 3 as a query over the claims."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import predictions as pred
from nhtlib.report import verdicts as v
from nhtlib.analysis import statistics

LAMS = [0.001, 0.01, 0.1, 1.0]


def grid(seeds=(0, 1, 2), **columns):
    """One row per (seed, λ); each column is a function (seed, λ) -> value."""
    rows = [{"seed": s, "lam": lam, **{k: f(s, lam) for k, f in columns.items()}} for s in seeds for lam in LAMS]
    return pd.DataFrame(rows)


def test_p1_norm_ordering_per_seed():
    falling = grid(V_final=lambda s, lam: 100.0 / (lam + 0.01 * (s + 1)))
    est = pred.grid_spearman(falling, "V_final")
    assert est.n == 3 and est.value == -1.0 and est.method == "exact"
    assert pred.spec("P1", "CelebA").judge(est).verdict == v.REPRODUCED
    rising = grid(V_final=lambda s, lam: lam * (s + 1))
    assert pred.spec("P1", "CelebA").judge(pred.grid_spearman(rising, "V_final")).verdict == v.NOT_REPRODUCED


def test_p1_averages_a_second_axis_before_ranking():
    rows = grid(V_final=lambda s, lam: 10.0 / lam)
    other = rows.assign(V_final=rows.V_final * 3)  # a second output scale: same ordering
    assert pred.grid_spearman(pd.concat([rows, other]), "V_final").value == -1.0


def test_p3_sign_matters():
    """A rising bias-conflicting accuracy never reproduces the paper's fall (the old chapter-3 rule used |ρ|)."""
    rising = grid(acc=lambda s, lam: 0.2 + lam * 0.5 + 0.01 * s)
    est = pred.grid_spearman(rising, "acc")
    assert est.value == 1.0
    assert pred.spec("P3", "CIFAR-10 borders").judge(est).verdict == v.NOT_REPRODUCED
    falling = grid(acc=lambda s, lam: 0.8 - lam * 0.5)
    assert pred.spec("P3", "CIFAR-10 borders").judge(pred.grid_spearman(falling, "acc")).verdict == v.REPRODUCED


def test_p2_regime_order_parts():
    names = {0.001: "weak", 0.01: "weak", 0.1: "intermediate", 1.0: "strong"}
    ordered = grid(regime=lambda s, lam: names[lam])
    parts = pred.regime_order(ordered)
    assert parts["all three occur"].value == 1.0 and parts["in order"].value == 1.0
    assert pred.spec("P2", "CIFAR-10 borders").judge(parts).verdict == v.REPRODUCED
    shuffled = {0.001: "strong", 0.01: "weak", 0.1: "intermediate", 1.0: "weak"}
    parts = pred.regime_order(grid(regime=lambda s, lam: shuffled[lam]))
    assert parts["all three occur"].value == 1.0 and parts["in order"].value == 0.0
    assert pred.spec("P2", "CIFAR-10 borders").judge(parts).verdict == v.PARTLY
    diverged = grid(regime=lambda s, lam: "diverged" if lam == 1.0 else names[lam])
    assert pred.regime_order(diverged)["all three occur"].value == 0.0  # a diverged λ is no strong regime


def test_p4_head_first_share():
    # runs as the unit: 10 seeds x 4 λ, the head first at every λ but the largest (30 of 40 runs, every seed alike)
    table = grid(seeds=range(10), head_peak=lambda s, lam: 10.0, body_peak=lambda s, lam: 20.0 if lam < 1 else 5.0,
                 head_decay=lambda s, lam: 40.0, body_decay=lambda s, lam: 30.0,
                 regime=lambda s, lam: "intermediate")
    est = pred.head_first_share(table, head_peak="head_peak", body_peak="body_peak", head_decay="head_decay",
                                body_decay="body_decay", runs=table.regime == "intermediate")
    assert est.value == pytest.approx(0.75) and (est.n, est.unit, est.method) == (40, "runs", "Wilson")
    assert pred.spec("P4", "CIFAR-10 borders").judge(est).verdict == v.REPRODUCED
    none = pred.head_first_share(table, head_peak="head_peak", body_peak="body_peak", head_decay="head_decay",
                                 body_decay="body_decay", runs=table.regime == "weak")
    assert none.n == 0 and pred.spec("P4", "CIFAR-10 borders").judge(none).verdict == v.INCONCLUSIVE


def test_p6_inverse_lambda_r2():
    exact = grid(T=lambda s, lam: 100.0 / lam + 50 + s)
    est = pred.inverse_lambda_r2(exact, "T")
    assert est.value == pytest.approx(1.0) and est.n == 3
    assert pred.spec("P6", "modular arithmetic").judge(est).verdict == v.REPRODUCED
    # CIFAR-10's × is a measured failure: the law holding means the failure is not reproduced
    assert pred.spec("P6", "CIFAR-10 borders").judge(est).verdict == v.NOT_REPRODUCED
    rng = np.random.default_rng(0)
    noise = grid(T=lambda s, lam: float(rng.uniform(0, 100)))
    assert pred.inverse_lambda_r2(noise, "T").value < 0.9
    no_transition = grid(T=lambda s, lam: np.nan)
    est = pred.inverse_lambda_r2(no_transition, "T")
    assert est.n == 0 and pred.spec("P6", "CIFAR-10 borders").judge(est).verdict == v.INCONCLUSIVE


def test_every_table3_cell_has_one_rule():
    for domain in pred.DOMAINS:
        for pid in pred.PREDICTIONS:
            spec = pred.spec(domain=domain, pid=pid)
            assert spec.id == pid and spec.source == "NHT"
            if (domain, pid) in pred.NO_EVIDENCE:
                assert isinstance(spec.rule, v.NotTested)
                assert spec.judge(None).verdict == v.NOT_TESTABLE
                assert spec.judge(statistics.interval([1.0, 1.0, 1.0])).verdict == v.NOT_TESTABLE
    assert [cell for cell in pred.NO_EVIDENCE if cell[0] in pred.DOMAINS] == [
        ("modular arithmetic", "P3"), ("CelebA", "P6"), ("Waterbirds", "P6")]
    assert pred.TABLE3["CelebA"]["P6"] == "×"  # as printed: the paper's × means "not tested" here
    assert pred.rule("P5", "CIFAR-10 borders") == v.AtLeast(pred.rule("P5", "CIFAR-10 borders").quantity, 0.5)
    assert isinstance(pred.rule("P5", "CelebA"), v.AtMost)
    assert pred.rule("P3", "Waterbirds").null and pred.rule("P4", "Waterbirds").null
    with pytest.raises(KeyError):
        pred.spec("P7", "CelebA")
    with pytest.raises(KeyError):
        pred.spec("P1", "ImageNet")


def test_null_p3_on_a_dead_model_is_inconclusive():
    """Waterbirds P3 (× "no λ improves the worst group") read 'reproduced' at smoke scale with WG accuracy 0.0 at every
    λ: the one-sided test needs a live model; a consistent fall of WG with λ satisfies the paper's sentence."""
    no_gain = statistics.interval([0.0, 0.004, 0.002])  # no λ beats the smallest by more than half a point
    dead = statistics.interval([0.0, 0.01, -0.01])
    alive = statistics.interval([0.3, 0.28, 0.33])
    spec = pred.spec("P3", "Waterbirds")
    assert spec.judge(no_gain, control=dead).verdict == v.INCONCLUSIVE
    assert spec.judge(no_gain, control=alive).verdict == v.REPRODUCED
    helps = statistics.interval([0.08, 0.1, 0.12])  # some λ helps by ~10 points: the × is refuted
    assert spec.judge(helps, control=alive).verdict == v.NOT_REPRODUCED


def test_largest_gain_is_one_sided():
    # A worst-group accuracy that falls with λ has no gain (≤ 0), one that peaks at an intermediate λ has its peak gain.
    falls = grid(wg=lambda s, lam: 0.9 - 0.1 * LAMS.index(lam))
    assert pred.largest_gain(falls, "wg").value == pytest.approx(-0.1)
    peak = grid(wg=lambda s, lam: 0.5 + (0.2 if lam == 0.1 else 0.0))
    assert pred.largest_gain(peak, "wg").value == pytest.approx(0.2)


def test_p2_order_is_read_only_where_all_three_regimes_occur():
    # Catches: "in order" passing vacuously with two regimes; a λ whose runs disagree dropped instead of counted.
    two = grid(regime=lambda s, lam: "weak" if lam < 0.1 else "strong")
    parts = pred.regime_order(two)
    assert parts["all three occur"].value == 0.0 and parts["in order"].n == 0
    assert pred.spec("P2", "CIFAR-10 borders").judge(parts).verdict == v.NOT_REPRODUCED
    ordered = grid(regime=lambda s, lam: {0.001: "weak", 0.01: "weak", 0.1: "intermediate", 1.0: "strong"}[lam])
    assert pred.regime_order(ordered)["in order"].value == 1.0
    mixed = pd.concat([ordered, ordered.assign(regime=ordered.regime.where(ordered.lam != 0.1, "weak"))])
    assert pred.regime_order(mixed)["in order"].value == 0.0  # λ = 0.1 is weak in one run, intermediate in the other
    backwards = grid(regime=lambda s, lam: {0.001: "intermediate", 0.01: "weak", 0.1: "strong", 1.0: "strong"}[lam])
    assert pred.regime_order(backwards)["in order"].value == 0.0


def test_table3_reads_each_cell_from_the_one_claim_that_stands_for_it():
    claims = pd.DataFrame({"chapter": ["03", "03", "04", "04", "04", "02"],
                           "id": ["P1", "P6", "C-P1", "W-P1", "W-P3", "X9"],
                           "verdict": [v.REPRODUCED, v.NOT_REPRODUCED, v.INCONCLUSIVE, v.REPRODUCED, v.NOT_REPRODUCED,
                                       v.REPRODUCED],
                           "cell": ["CIFAR-10 borders/P1", "CIFAR-10 borders/P6", "CelebA/P1", "Waterbirds/P1",
                                    "Waterbirds/P3", ""]})
    table = pred.table3(claims)
    assert table.loc["CIFAR-10 borders", "P1"] == "✓ agrees"
    assert table.loc["CIFAR-10 borders", "P6"] == "× disagrees"  # the law was seen to hold where the paper says ×
    assert table.loc["CIFAR-10 borders", "P2"] == "✓ not run"
    assert table.loc["CelebA", "P1"] == "✓ undecided"
    assert table.loc["CelebA", "P3"] == "✓ not run"  # W-P3 is Waterbirds' row, not CelebA's
    assert table.loc["Waterbirds", "P3"] == "× disagrees"
    assert table.loc["CIFAR-10 borders", ["agrees", "disagrees", "undecided"]].tolist() == [1, 1, 0]
    assert table.loc["modular arithmetic", "P1"] == "✓ not run"  # a row without a cell counts nowhere
    assert pred.spec("P1", "CelebA", prefix="C-").id == "C-P1" and pred.spec("P1", "CelebA").cell == "CelebA/P1"
    reasons = pd.DataFrame({"verdict": [v.NOT_TESTABLE, v.NOT_TESTABLE], "cell": ["CelebA/P6", "CelebA/P4"],
                            "untested": [v.NO_EVIDENCE, v.NOT_AT_THIS_SCALE]})
    assert pred.table3(reasons).loc["CelebA", "P6"] == "× untested (no evidence)"
    assert pred.table3(reasons).loc["CelebA", "P4"] == "✓ untested (scale)"
    assert pred.spec("P1", "toy (XOR, ours)").cell == ""


def test_paper_values_are_the_domains_own():
    """A chapter's P-row quotes what the paper says of its own domain, not another domain's numbers."""
    assert "CIFAR" not in pred.spec("P2", "modular arithmetic").paper
    assert "20,198" in pred.spec("P1", "CelebA").paper and "20,198" not in pred.spec("P1", "CIFAR-10 borders").paper
    assert set(pred.PAPER_VALUES) == set(pred.CELLS)
    assert all(set(values) == set(pred.PREDICTIONS) for values in pred.PAPER_VALUES.values())


def test_paired_difference_and_grid_note():
    table = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "arm": ["a", "b"] * 3, "acc": [0.9, 0.5, 0.8, 0.6, 0.7, 0.7]})
    e = statistics.paired_difference(table, "arm", "a", "b", "acc")
    assert e.values == pytest.approx((0.4, 0.2, 0.0)) and e.n == 3
    assert statistics.paired_difference(table, "arm", "a", "c", "acc").n == 0  # a missing arm: no estimate
    assert pred.grid_note(pd.DataFrame({"lam": [1.0, 0.01, 0.1, 1.0]})) == "Over this scale's λ grid (0.01, 0.1, 1)"
