"""Unit tests of the verdict engine (nhtlib/report/verdicts.py) and its claims rows (nhtlib/report/claims.py).

Every test uses synthetic per-seed statistics whose verdict a reader can check by eye (see
shared/design/verdicts.md, "Tests every rule gets"). Each test says in a comment which mutation of the engine it
catches: an inverted rule (low/high swapped, AtLeast acting as AtMost), a loosened one (deciding on the point estimate
instead of the interval, deciding on fewer than 3 seeds, ignoring the positive control), or a wrong interval.

Hand-computed numbers used below (t_{0.975,2} = 4.303, t_{0.975,4} = 2.776):
  [1, 2, 3]            mean 2,      sd 1,       half = 4.303·1/√3       = 2.484  -> [−0.484, 4.484]
  [1, 2, 3, 4, 5]      mean 3,      sd √2.5,    half = 2.776·1.5811/√5  = 1.963  -> [1.037, 4.963]
  [0.9, 0.95, 1.0]     mean 0.95,   sd 0.05,    half = 4.303·0.05/√3    = 0.124  -> [0.826, 1.074]
  [−0.95, −0.97, −1.0] mean −0.973, sd 0.0252,  half = 0.0625                    -> [−1.036, −0.911]
  [0.1, 0.15, 0.2]     mean 0.15,   sd 0.05,    half = 0.124                     -> [0.026, 0.274]
  [0.45, 0.6, 0.75]    mean 0.6,    sd 0.15,    half = 0.373                     -> [0.227, 0.973]
"""
import math

import numpy as np
import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.report import verdicts as V
from nhtlib.config import ConfigError
from nhtlib.report.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, AllOf, ArmComparison, AtLeast, AtMost, ClaimSpec, Equivalent, Estimate, Matches, NotTested, PositiveControl, Within
from nhtlib.analysis.statistics import interval, sd_interval, seed_bootstrap
from nhtlib.report.claims import Claim, verdict_markdown

T_975_DF2 = 4.303  # from a t table, not from scipy: the test must not reuse the formula it checks
T_975_DF4 = 2.776

RISING = [0.9, 0.95, 1.0]  # per-seed Spearman ρ of a rising curve
FALLING = [-0.95, -0.97, -1.0]  # per-seed Spearman ρ of a falling curve

CONTROL = PositiveControl("clean accuracy − chance", 0.2)
ALIVE = [0.60, 0.62, 0.61]  # the model learned: 0.61 [0.585, 0.635] above chance
DEAD = [0.0, 0.0, 0.0]  # the model is at chance on every seed
NULL_EFFECT = [0.005, -0.004, 0.002]  # worst-group gain: 0.001 [−0.0104, 0.0124], inside ±0.03


def est(values):
    return interval(values)


# ------------------------------------------------------------------------------------------------- interval

def test_interval_n3_is_a_t_interval_with_hand_computed_half_width():
    # Catches: a z-interval (1.96 instead of 4.303), sd with ddof=0, dividing by n instead of √n, df = n instead of
    # n − 1 (t_{0.975,3} = 3.18), or a bootstrap at n = 3.
    e = interval([1.0, 2.0, 3.0])
    half = T_975_DF2 * 1.0 / math.sqrt(3)  # = 2.484
    assert e.method == "t" and e.n == 3 and e.unit == "seeds"
    assert e.value == pytest.approx(2.0)
    assert e.low == pytest.approx(2.0 - half, abs=1e-3)  # −0.484
    assert e.high == pytest.approx(2.0 + half, abs=1e-3)  # 4.484
    assert e.width == pytest.approx(2 * half, abs=2e-3)
    assert e.values == (1.0, 2.0, 3.0)
    assert e.decided


def test_interval_n5_is_still_a_t_interval():
    # Catches: BOOTSTRAP_MIN_UNITS lowered to 5 or less (bootstrap over 5 seeds), or a t quantile with wrong df.
    e = interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = T_975_DF4 * math.sqrt(2.5) / math.sqrt(5)  # = 1.963
    assert e.method == "t"
    assert (e.low, e.high) == (pytest.approx(3.0 - half, abs=1e-3), pytest.approx(3.0 + half, abs=1e-3))


def test_interval_is_a_t_interval_at_every_n():
    # Catches: a percentile bootstrap from 6 seeds on (it under-covers: ~0.88 at n = 6, see
    # tests/test_interval_coverage.py), or a t quantile with the wrong degrees of freedom.
    from scipy import stats

    for values in ([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], list(range(10))):
        e = interval(values)
        low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
        assert e.method == "t" and e.n == len(values)
        assert (e.low, e.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_constant_statistic_is_an_exact_decided_interval():
    # Catches: a constant statistic treated as an error / undecided (NaN interval or decided=False), which would turn
    # "ρ = −1 on every seed" into inconclusive.
    e = interval([-1.0, -1.0, -1.0])
    assert e.method == "exact" and (e.value, e.low, e.high, e.n) == (-1.0, -1.0, -1.0, 3)
    assert e.width == 0 and e.decided
    assert AtMost("ρ", -0.5).judge(e) == REPRODUCED
    assert AtLeast("ρ", 0.5).judge(e) == NOT_REPRODUCED
    assert Within("ρ", -1.05, -0.9).judge(e) == REPRODUCED
    assert Equivalent("gain", 0.03, CONTROL).judge(interval([0.0] * 3), est(ALIVE)) == REPRODUCED
    assert e.text() == "all 3 seeds: −1.00"


def test_nans_are_dropped_from_n():
    # Catches: NaN/None counted as units (n = 5) or propagated into the interval (NaN bounds -> inconclusive).
    e = interval([-0.95, float("nan"), -0.97, None, -1.0])
    assert e.n == 3 and e.values == (-0.95, -0.97, -1.0)
    assert (e.low, e.high) == (interval(FALLING).low, interval(FALLING).high)
    assert math.isfinite(e.low) and math.isfinite(e.high)


RULES_THAT_WOULD_DECIDE = [  # each would say reproduced on a decided estimate near 1.0 (control: alive)
    AtLeast("ρ", 0.5),
    AtMost("ρ", 1.5),
    Within("ρ", 0.5, 1.5),
    Matches("slope", 1.0, 0.15),
    Equivalent("gain", 2.0, CONTROL),
]


@pytest.mark.parametrize("rule", RULES_THAT_WOULD_DECIDE, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("values", [[], [float("nan"), float("nan")], [1.0]], ids=["n0", "n0-nan", "n1"])
def test_zero_or_one_seed_gives_no_interval_and_every_rule_is_inconclusive(rule, values):
    # Catches: a one-seed "reproduced" (the point value used when there is no interval), or n = 0 crashing a rule.
    e = interval(values)
    assert e.n == len([v for v in values if not math.isnan(v)])
    assert e.method == "none" and math.isnan(e.low) and math.isnan(e.high) and not e.decided
    assert rule.judge(e, est(ALIVE)) == INCONCLUSIVE
    assert rule.judge(interval([0.95, 1.0, 1.05]), est(ALIVE)) == REPRODUCED  # the same rule does decide with n = 3


@pytest.mark.parametrize("rule", RULES_THAT_WOULD_DECIDE, ids=lambda r: type(r).__name__)
def test_two_seeds_decide_nothing_even_with_a_finite_interval(rule):
    # Catches: MIN_UNITS lowered to 2 (a finite n = 2 interval, [0.98, 1.02], lies inside/above every threshold).
    two = Estimate(1.0, 0.98, 1.02, 2)
    assert rule.judge(two, est(ALIVE)) == INCONCLUSIVE
    assert rule.judge(Estimate(1.0, 0.98, 1.02, 3), est(ALIVE)) == REPRODUCED


def test_empty_estimate_text():
    assert interval([]).text() == "no value (n = 0 seeds)"
    assert interval([0.5]).text() == "0.50 (no interval), n = 1 seed"


# ------------------------------------------------------------------------------------------------- seed_bootstrap

SLOPES = {0: 1.8, 1: 1.9, 2: 2.0, 3: 2.1, 4: 2.2}  # per-seed slopes; same x design, so the pooled slope is 2.0
X = np.array([0.0, 1.0, 2.0, 3.0])


def pooled_slope(groups):
    x = np.concatenate([g["x"] for g in groups])
    y = np.concatenate([g["y"] for g in groups])
    return float(np.polyfit(x, y, 1)[0])


def slope_groups():
    return {s: {"seed": s, "x": X, "y": k * X + 0.1 * s} for s, k in SLOPES.items()}


def test_seed_bootstrap_value_on_all_seeds_interval_from_resampled_seeds():
    # Catches: the value taken as the bootstrap mean/median instead of the fit on all seeds; resampling points within
    # the fit (the points lie exactly on each seed's line, so the within-seed spread would be tiny); an interval
    # outside the range of the per-seed slopes.
    groups = slope_groups()
    e = seed_bootstrap(groups, pooled_slope)
    assert e.value == pytest.approx(pooled_slope(list(groups.values()))) and e.value == pytest.approx(2.0)
    assert e.method == "bootstrap-se" and e.n == 5 and e.unit == "seeds"
    assert 1.8 <= e.low < 2.0 < e.high <= 2.2
    assert e.width > 0.1  # seed-to-seed spread of slopes is 0.16 sd: a seed bootstrap of the mean is ~±0.14
    assert e.decided
    assert seed_bootstrap(groups, pooled_slope) == e  # fixed seed


def test_seed_bootstrap_drops_resamples_whose_statistic_is_nan():
    # Catches: NaN resamples kept (np.quantile then gives NaN bounds and the claim could never be decided).
    def needs_three_seeds(groups):
        if len({g["seed"] for g in groups}) < 3:
            return float("nan")  # the fit needs three distinct seeds
        return pooled_slope(groups)

    e = seed_bootstrap(slope_groups(), needs_three_seeds)
    assert math.isfinite(e.low) and math.isfinite(e.high)
    assert e.value == pytest.approx(2.0) and e.low < e.value < e.high
    assert AtLeast("slope", 1.5).judge(e) == REPRODUCED


def test_seed_bootstrap_undecidable_cases():
    # Catches: an interval made up when there is one seed, or when no resample can be fitted.
    one = seed_bootstrap({0: slope_groups()[0]}, pooled_slope)
    assert one.n == 1 and one.method == "none" and math.isnan(one.low) and not one.decided
    never = seed_bootstrap(slope_groups(), lambda groups: float("nan"))
    assert never.method == "none" and not never.decided
    assert AtLeast("slope", 1.5).judge(one) == INCONCLUSIVE == AtLeast("slope", 1.5).judge(never)


# ------------------------------------------------------------------------------------------------- AtLeast / AtMost

def test_at_least_beyond_against_straddling():
    # Catches: inverted rule (AtLeast acting as AtMost: the first two swap); low/high swapped (straddling [0.23, 0.97]
    # would then read reproduced since high > 0.5); the point estimate 0.6 > 0.5 used instead of the interval.
    rule = AtLeast("ρ", 0.5)
    assert rule.judge(est(RISING)) == REPRODUCED  # [0.83, 1.07] > 0.5
    assert rule.judge(est([0.1, 0.15, 0.2])) == NOT_REPRODUCED  # [0.03, 0.27] < 0.5
    straddling = est([0.45, 0.6, 0.75])  # mean 0.6 beyond 0.5, interval [0.23, 0.97] straddles it
    assert straddling.value > 0.5 and straddling.low < 0.5 < straddling.high
    assert rule.judge(straddling) == INCONCLUSIVE


def test_at_most_beyond_against_straddling():
    # Catches: the mirror mutations for AtMost (low/high swapped: straddling [−0.97, −0.23] would read reproduced since
    # low < −0.5; the point estimate −0.6 used; AtMost acting as AtLeast).
    rule = AtMost("ρ", -0.5)
    assert rule.judge(est(FALLING)) == REPRODUCED  # [−1.04, −0.91] < −0.5
    assert rule.judge(est([-0.1, -0.15, -0.2])) == NOT_REPRODUCED  # [−0.27, −0.03] > −0.5
    straddling = est([-0.45, -0.6, -0.75])
    assert straddling.value < -0.5 and straddling.low < -0.5 < straddling.high
    assert rule.judge(straddling) == INCONCLUSIVE


def test_sign_matters_rising_curve_never_reproduces_a_falling_claim():
    # Catches: a rule that compares |ρ| with |threshold| (a perfect rising curve has |ρ| ≈ 1 > 0.5), or AtMost/AtLeast
    # swapped. The wrong-sign curve must be *not reproduced*, not merely inconclusive.
    assert AtMost("ρ", -0.5).judge(est(RISING)) == NOT_REPRODUCED
    assert AtLeast("ρ", 0.5).judge(est(FALLING)) == NOT_REPRODUCED
    assert AtMost("ρ", -0.5).judge(interval([1.0, 1.0, 1.0])) == NOT_REPRODUCED  # a perfectly rising curve, exact
    assert AtLeast("ρ", 0.5).judge(interval([-1.0, -1.0, -1.0])) == NOT_REPRODUCED


def test_two_noisy_seeds_far_beyond_are_inconclusive():
    # Catches: MIN_UNITS lowered to 2. With two seeds the t-interval ([5.0, 5.2] -> 5.1 ± 12.71·0.141/√2 = [3.83, 6.37])
    # lies wholly above 0.5, so only the n ≥ 3 floor stops a "reproduced".
    e = interval([5.0, 5.2])
    assert e.n == 2 and math.isfinite(e.low) and e.low > 0.5
    assert AtLeast("ρ", 0.5).judge(e) == INCONCLUSIVE
    assert AtMost("ρ", 10.0).judge(e) == INCONCLUSIVE
    assert AtLeast("ρ", 0.5).judge(interval([5.0, 5.0])) == INCONCLUSIVE  # two equal seeds: exact but too few


def test_no_estimate_at_all_is_inconclusive_for_the_rule_itself():
    # Catches: a rule crashing on None (ClaimSpec.judge turns None into "not testable here" before the rule runs).
    for rule in RULES_THAT_WOULD_DECIDE:
        assert rule.judge(None, est(ALIVE)) == INCONCLUSIVE


# ------------------------------------------------------------------------------------------------- Within

def test_within_inside_disjoint_overlapping_an_edge():
    # Catches: "overlap" taken for "inside", or the point estimate used (the edge case, mean 19 inside the range but
    # interval [16.5, 21.5], would read reproduced); the disjoint test swapped (low/high), so a miss reads
    # inconclusive; a one-sided range check (below the range must also be a miss).
    rule = Within("T", 10.0, 20.0)
    assert rule.judge(est([14.0, 15.0, 16.0])) == REPRODUCED  # [12.5, 17.5] inside [10, 20]
    assert rule.judge(est([24.0, 25.0, 26.0])) == NOT_REPRODUCED  # [22.5, 27.5] above the range
    assert rule.judge(est([4.0, 5.0, 6.0])) == NOT_REPRODUCED  # [2.5, 7.5] below the range
    edge = est([18.0, 19.0, 20.0])  # [16.5, 21.5]: mean 19 inside, interval crosses 20
    assert edge.low < 20.0 < edge.high and rule.judge(edge) == INCONCLUSIVE
    assert rule.judge(est([1.0, 15.0, 29.0])) == INCONCLUSIVE  # [−19.8, 49.8] covers the whole range


@pytest.mark.parametrize("low, high", [(20.0, 10.0), (10.0, 10.0), (float("nan"), 1.0)])
def test_within_invalid_range_raises(low, high):
    # Catches: a reversed or empty range accepted (it could never reproduce, silently).
    with pytest.raises(ConfigError, match="low < high"):
        Within("T", low, high)


# ------------------------------------------------------------------------------------------------- Matches

def test_matches_is_an_equivalence_test_on_the_difference():
    # Catches: agreement read as an overlap of two intervals (a mean 20 % off with a wide interval overlapping the
    # paper's would pass); the margin taken absolute instead of relative; "not reproduced" for an undecided interval.
    rule = Matches("T_grok", 1840.0, 0.15)  # margin ±276
    assert rule.half_width == pytest.approx(276.0)
    assert rule.judge(est([1800.0, 1850.0, 1900.0])) == REPRODUCED  # diff [−164, 184] inside ±276
    # 20 % off, tight: diff [324, 412] wholly beyond +276 -> not reproduced under a ±15 % margin
    off = est([2190.0, 2208.0, 2226.0])
    assert off.value == pytest.approx(1.2 * 1840.0, rel=1e-3) and rule.judge(off) == NOT_REPRODUCED
    # 20 % off and wide: the interval reaches into the margin -> undecided, never reproduced
    assert rule.judge(est([1900.0, 2200.0, 2500.0])) == INCONCLUSIVE
    # the audit's case: seeds 2200/2200/2400 (+23 %) overlap NSDL's interval but are not equivalent
    assert rule.judge(est([2200.0, 2200.0, 2400.0])) != REPRODUCED
    assert rule.judge(est([1200.0, 1210.0, 1220.0])) == NOT_REPRODUCED  # below −276
    absolute = Matches("c", 1.4, 0.1, relative=False)
    assert absolute.judge(est([1.38, 1.42, 1.40])) == REPRODUCED and absolute.judge(est([1.7, 1.75, 1.8])) == NOT_REPRODUCED


def test_matches_invalid_config_raises():
    with pytest.raises(ConfigError):
        Matches("slope", 1.0, 0.0)
    with pytest.raises(ConfigError):
        Matches("slope", 0.0, 0.15)  # a relative margin of zero is no margin


# ------------------------------------------------------------------------------------------------- failures (×)

def test_a_failure_with_a_control_is_reproduced_only_when_the_control_passes():
    # Catches: a × cell ("the law fails": R² below 0.9) reproduced on models at chance; the control consulted on the
    # other side (a law that holds is seen whatever the control); the null flag lost.
    law_fails = AtMost("R² of T = a/λ + b", 0.9, control=CONTROL)
    low_r2, high_r2 = est([0.1, 0.2, 0.15]), est([0.97, 0.98, 0.99])
    assert law_fails.null is True and AtMost("ρ", 0.5).null is False
    assert law_fails.judge(low_r2, est(ALIVE)) == REPRODUCED
    assert law_fails.judge(low_r2, est(DEAD)) == INCONCLUSIVE  # a model at chance fails every law
    assert law_fails.judge(low_r2, None) == INCONCLUSIVE
    assert law_fails.judge(high_r2, est(DEAD)) == NOT_REPRODUCED  # the law was seen to hold
    row = ClaimSpec("P6", "T ∝ 1/λ fails", "× [paper]", "NHT", law_fails).judge(low_r2, control=est(DEAD))
    assert row.null and "positive control FAILED" in row.note and "positive control" in row.rule


def test_one_sided_null_reads_a_consistent_fall_as_the_paper_says():
    # Catches: a two-sided "no ordering" test where the paper's × is one-sided ("no λ improves the worst group"): a
    # worst-group accuracy that falls with λ satisfies the paper's sentence and must read reproduced.
    no_gain = AtMost("largest worst-group gain over the smallest λ", 0.03, control=CONTROL)
    falls = est([0.0, 0.005, 0.002])  # no λ gains more than half a point
    assert no_gain.judge(falls, est(ALIVE)) == REPRODUCED
    assert no_gain.judge(est([0.08, 0.1, 0.12]), est(ALIVE)) == NOT_REPRODUCED  # some λ helps by ~10 points


# ------------------------------------------------------------------------------------------------- Equivalent (null)

def test_equivalent_needs_a_live_positive_control():
    # Catches: the positive control ignored — the "W-P3 read reproduced with worst-group accuracy 0.0 at every λ" bug.
    # The SAME effect estimate is reproduced with a model that learned and inconclusive with one at chance.
    rule = Equivalent("worst-group gain of the best λ", 0.03, CONTROL)
    effect = est(NULL_EFFECT)  # [−0.0104, 0.0124] inside ±0.03
    assert rule.judge(effect, est(ALIVE)) == REPRODUCED
    assert rule.judge(effect, est(DEAD)) == INCONCLUSIVE  # control 0.0 exact, below 0.2
    assert rule.judge(effect, est([0.01, -0.02, 0.005])) == INCONCLUSIVE  # near chance, noisy
    assert rule.judge(effect, None) == INCONCLUSIVE  # control missing
    assert rule.judge(effect) == INCONCLUSIVE
    assert rule.judge(effect, est([0.6, 0.62])) == INCONCLUSIVE  # control on two seeds decides nothing
    assert rule.judge(effect, est([0.1, 0.3, 0.5])) == INCONCLUSIVE  # control mean 0.3 > 0.2 but CI [−0.20, 0.80]
    # the worst case of the W-P3 bug: every seed and λ at 0.0 -> effect exactly 0 — still not a reproduction
    assert rule.judge(interval([0.0, 0.0, 0.0]), est(DEAD)) == INCONCLUSIVE


def test_equivalent_beyond_and_straddling_the_margin():
    # Catches: a one-sided margin (the negative case would be missed); the point estimate inside ±m used instead of
    # the interval (the wide case, mean 0.0, would read reproduced); straddling read as not reproduced or reproduced.
    rule = Equivalent("gain", 0.03, CONTROL)
    alive = est(ALIVE)
    assert rule.judge(est([0.10, 0.12, 0.11]), alive) == NOT_REPRODUCED  # [0.085, 0.135] ≥ 0.03
    assert rule.judge(est([-0.10, -0.12, -0.11]), alive) == NOT_REPRODUCED  # [−0.135, −0.085] ≤ −0.03
    straddling = est([0.02, 0.03, 0.04])  # [0.005, 0.055] crosses 0.03
    assert rule.judge(straddling, alive) == INCONCLUSIVE
    wide = est([-0.2, 0.0, 0.2])  # mean 0.0 but [−0.50, 0.50]: too imprecise to show "no effect"
    assert wide.value == pytest.approx(0.0) and rule.judge(wide, alive) == INCONCLUSIVE
    assert rule.judge(Estimate(0.0, -0.01, 0.01, 2), alive) == INCONCLUSIVE  # two seeds


def test_control_exactly_at_chance_does_not_pass():
    # Catches: a control that accepts a model at chance when the stated margin above chance is 0.
    rule = Equivalent("gain", 0.03, PositiveControl("clean accuracy − chance", 0.0))
    assert rule.judge(interval([0.0, 0.0, 0.0]), interval(DEAD)) == INCONCLUSIVE


def test_a_comparison_of_two_arms_is_not_a_null_claim_but_its_row_names_the_control():
    # Catches: "BN is richer than no BN" printed as "(null claim)" because its rule carries a positive control; or the
    # control left out of the note once the row is not a null row.
    spec = ClaimSpec("B9", "BN is richer than no BN", "richer [paper]", "D_LR",
                     ArmComparison("D_LR(no BN) − D_LR(BN)", 0.0, control=CONTROL))
    assert spec.rule.null is False and AllOf((("a", spec.rule), ("b", spec.rule))).null is False
    row = spec.judge(est([0.3, 0.4, 0.35]), control=est(ALIVE))
    assert row.verdict == REPRODUCED and row.null is False
    assert "positive control passed" in row.note and "(null claim)" not in verdict_markdown(row)
    dead = spec.judge(est([0.3, 0.4, 0.35]), control=est(DEAD))
    assert dead.verdict == INCONCLUSIVE and "positive control FAILED" in dead.note


def test_equivalent_row_is_a_null_row_that_names_the_control():
    # Catches: ClaimResult.null not set from the rule (the row would not show that a control was needed); the control
    # left out of the note, so a reader cannot see why a null claim was (not) reproduced.
    spec = ClaimSpec("N1", "no λ improves the worst group by more than 3 points", "no gain [paper, Fig. 4]", "NHT",
                     Equivalent("worst-group gain", 0.03, CONTROL))
    assert spec.rule.null is True
    row = spec.judge(est(NULL_EFFECT), control=est(ALIVE))
    assert row.verdict == REPRODUCED and row.null is True
    assert "positive control" in row.note and est(ALIVE).text() in row.note
    dead = spec.judge(est(NULL_EFFECT), control=est(DEAD))
    assert dead.verdict == INCONCLUSIVE and dead.null is True and "positive control FAILED: all 3 seeds: 0.00" in dead.note
    missing = spec.judge(est(NULL_EFFECT))
    assert missing.verdict == INCONCLUSIVE and "no positive control measured" in missing.note
    assert spec.judge(est(NULL_EFFECT)).verdict == INCONCLUSIVE  # control missing
    assert AtLeast("ρ", 0.5).null is False


def test_equivalent_invalid_config_raises():
    with pytest.raises(ConfigError):
        Equivalent("gain", 0.0, CONTROL)  # a zero margin can never be met
    with pytest.raises(ConfigError):
        Equivalent("gain", -0.03, CONTROL)
    with pytest.raises(ConfigError, match="PositiveControl"):
        Equivalent("gain", 0.03, None)


# ------------------------------------------------------------------------------------------------- AllOf

PARTS = AllOf((("decays", AtMost("ρ", -0.5)), ("fast", AtLeast("speed", 0.5))))
DOWN_HOLDS, DOWN_FAILS, DOWN_UNSURE = est(FALLING), est(RISING), est([-0.45, -0.6, -0.75])
FAST_HOLDS, FAST_FAILS, FAST_UNSURE = est(RISING), est([0.1, 0.15, 0.2]), est([0.45, 0.6, 0.75])


@pytest.mark.parametrize("decays, fast, expected", [
    (DOWN_HOLDS, FAST_HOLDS, REPRODUCED),
    (DOWN_HOLDS, FAST_FAILS, PARTLY),
    (DOWN_FAILS, FAST_HOLDS, PARTLY),
    (DOWN_FAILS, FAST_FAILS, NOT_REPRODUCED),
    (DOWN_HOLDS, FAST_UNSURE, INCONCLUSIVE),
    (DOWN_UNSURE, FAST_HOLDS, INCONCLUSIVE),
    (DOWN_FAILS, FAST_UNSURE, NOT_REPRODUCED),
    (DOWN_UNSURE, FAST_UNSURE, INCONCLUSIVE),
], ids=["all-hold", "hold+fail", "fail+hold", "all-fail", "hold+unsure", "unsure+hold", "fail+unsure", "all-unsure"])
def test_all_of_combines_parts(decays, fast, expected):
    # Catches: "partly" used as a softer word for "one part unsure" (hold+unsure must be inconclusive, not partly);
    # "reproduced" when any part holds (any() for all()); "not reproduced" for a mix; a failed part hidden behind an
    # undecided one (fail+unsure must be not reproduced, never inconclusive).
    assert PARTS.judge({"decays": decays, "fast": fast}) == expected


def test_all_of_with_a_failed_part_is_never_inconclusive():
    # Catches: AllOf({'a': not reproduced, 'b': inconclusive}) read "inconclusive" (the audit's finding 2).
    three = AllOf((("a", AtLeast("x", 0.5)), ("b", AtLeast("y", 0.5)), ("c", AtLeast("z", 0.5))))
    fails, unsure, holds = est([0.1, 0.15, 0.2]), est([0.45, 0.6, 0.75]), est(RISING)
    for parts in ({"a": fails, "b": unsure, "c": unsure}, {"a": unsure, "b": fails, "c": unsure}):
        assert three.judge(parts) == NOT_REPRODUCED
    assert three.judge({"a": fails, "b": unsure, "c": holds}) == PARTLY
    assert three.judge({"a": unsure, "b": unsure, "c": holds}) == INCONCLUSIVE


def test_all_of_part_verdicts_and_missing_parts():
    # Catches: iterating over the given estimates instead of the declared parts (a missing part would be skipped and
    # the claim read reproduced on one part); part names lost.
    assert PARTS.part_verdicts({"decays": DOWN_HOLDS, "fast": FAST_FAILS}) == {"decays": REPRODUCED,
                                                                              "fast": NOT_REPRODUCED}
    assert PARTS.judge({"decays": DOWN_HOLDS}) == INCONCLUSIVE
    assert PARTS.part_verdicts({"decays": DOWN_HOLDS}) == {"decays": REPRODUCED, "fast": INCONCLUSIVE}
    spec = ClaimSpec("P2", "the norm decays, and fast", "yes [paper, §4]", "NSDL", PARTS)
    row = spec.judge({"decays": DOWN_HOLDS, "fast": FAST_FAILS})
    assert row.verdict == PARTLY and row.n == 3
    assert f"decays: {DOWN_HOLDS.text()} (reproduced)" in row.ours and "fast:" in row.ours
    assert "(not reproduced)" in row.ours


def test_all_of_null_and_validation():
    # Catches: a null part's control requirement lost when wrapped in AllOf; AllOf accepting one part or a non-rule.
    with_null = AllOf((("decays", AtMost("ρ", -0.5)), ("no gain", Equivalent("gain", 0.03, CONTROL))))
    assert with_null.null is True and PARTS.null is False
    both = {"decays": DOWN_HOLDS, "no gain": est(NULL_EFFECT)}
    assert with_null.judge(both, est(ALIVE)) == REPRODUCED
    assert with_null.judge(both, est(DEAD)) == INCONCLUSIVE
    with pytest.raises(ConfigError):
        AllOf((("only", AtLeast("ρ", 0.5)),))
    with pytest.raises(ConfigError):
        AllOf((("a", AtLeast("ρ", 0.5)), ("b", "AtMost")))


# ------------------------------------------------------------------------------------------------- NotTested

def test_not_tested_is_never_judged():
    # Catches: a NotTested cell judged on whatever estimate is passed (a paper cell without evidence must never read
    # reproduced), or its reason dropped from the row.
    rule = NotTested("NHT Table 3 ticks P3 for modular arithmetic, where no groups exist")
    assert rule.judge(None) == rule.judge(est(RISING)) == rule.judge(interval([])) == NOT_TESTABLE
    assert rule.words() == ("not testable here (the paper gives no evidence): NHT Table 3 ticks P3 for modular "
                            "arithmetic, where no groups exist")
    row = ClaimSpec("P3", "groups separate", "✓ [paper, Table 3]", "NHT", rule).judge(None)
    assert row.verdict == NOT_TESTABLE and "where no groups exist" in row.rule
    assert row.untested == V.NO_EVIDENCE


def test_not_testable_says_which_of_its_reasons():
    # Catches: "the paper gives no evidence" and "not run at this scale" merged into one count; an unknown reason.
    scale = NotTested("needs the 7 × 4 grid of paper scale", V.NOT_AT_THIS_SCALE)
    assert "(not run at this scale)" in scale.words()
    assert ClaimSpec("PH1", "a claim", "x [paper]", "NHT", scale).judge(None).untested == V.NOT_AT_THIS_SCALE
    assert ClaimSpec("C1", "a claim", "x [paper]", "NHT", AtLeast("ρ", 0.5)).judge(None).untested == V.NOT_AT_THIS_SCALE
    assert ClaimSpec("C1", "a claim", "x [paper]", "NHT", AtLeast("ρ", 0.5)).judge(est(RISING)).untested == ""
    with pytest.raises(ConfigError):
        NotTested("why", "because")


@pytest.mark.parametrize("rule", RULES_THAT_WOULD_DECIDE + [PARTS], ids=lambda r: type(r).__name__)
def test_no_runs_at_this_scale_is_not_testable(rule):
    # Catches: judge(None) turned into "inconclusive" (the reader could not tell "ran, undecided" from "never ran").
    row = ClaimSpec("C1", "a claim", "x [paper]", "book", rule).judge(None)
    assert row.verdict == NOT_TESTABLE
    assert row.ours == "no runs at this scale" and row.note == "no runs at this scale"
    assert row.n == 0 and math.isnan(row.low) and math.isnan(row.high)
    # ... while an estimate with too few seeds is a run that decided nothing, not "not testable"
    assert ClaimSpec("C1", "a claim", "x [paper]", "book", rule).judge(
        interval([1.0]) if not isinstance(rule, AllOf) else {"decays": interval([1.0])}).verdict == INCONCLUSIVE


# ------------------------------------------------------------------------------------------------- rule in words

WORDS = [
    (AtLeast("ρ", 0.5), ["95% CI of ρ", "above 0.5", "below", "n ≥ 3"]),
    (AtMost("ρ", -0.5), ["95% CI of ρ", "below −0.5", "above", "n ≥ 3"]),
    (Within("T", 10.0, 20.0), ["95% CI of T", "inside [10, 20]"]),
    (Matches("slope", 1.0, 0.15), ["equivalence", "95% CI of slope", "minus the paper's 1", "±15% of the paper's 1"]),
    (AtMost("R²", 0.9, control=CONTROL), ["below 0.9", "positive control", "clean accuracy − chance lies above 0.2"]),
    (Equivalent("gain", 0.03, CONTROL), ["null claim", "95% CI of gain", "inside ±0.03",
                                         "95% CI of clean accuracy − chance lies above 0.2"]),
    (PARTS, ["(decays)", "(fast)", "below −0.5", "above 0.5", "Partly", "not reproduced when a part"]),
    (NotTested("no groups in modular arithmetic"), ["not testable here", "no groups in modular arithmetic"]),
]


@pytest.mark.parametrize("rule, phrases", WORDS, ids=[type(r).__name__ for r, _ in WORDS])
def test_rule_words_state_numbers_and_level(rule, phrases):
    # Catches: hard-coded or stale words (a threshold, range, margin or control that the sentence does not state, or a
    # sign dropped: AtMost(−0.5) must say "−0.5"); the CI level missing.
    words = rule.words()
    for phrase in phrases:
        assert phrase in words, (phrase, words)


def test_words_follow_the_object_and_the_row_shows_the_deciding_rule():
    # Catches: words generated from something else than the rule that decides (changing the threshold must change the
    # sentence; AtLeast and AtMost must not read alike); a row whose rule text differs from the deciding rule.
    assert AtLeast("ρ", 0.7).words() != AtLeast("ρ", 0.5).words() and "0.7" in AtLeast("ρ", 0.7).words()
    assert AtLeast("ρ", 0.5).words() != AtMost("ρ", 0.5).words()
    cases = [(AtLeast("ρ", 0.5), est(RISING)), (AtMost("ρ", -0.5), est(FALLING)), (Within("T", 10.0, 20.0), est([15.0] * 3)),
             (Matches("slope", 1.0, 0.15), est([0.99, 1.0, 1.01])), (Equivalent("gain", 0.03, CONTROL), est(NULL_EFFECT)),
             (PARTS, {"decays": DOWN_HOLDS, "fast": FAST_HOLDS}), (NotTested("no evidence"), None)]
    for rule, e in cases:
        spec = ClaimSpec("C", "a claim", "x [paper]", "book", rule)
        row = spec.judge(e, control=est(ALIVE))
        assert row.rule == spec.rule.words() == rule.words()
        assert row.verdict == (NOT_TESTABLE if isinstance(rule, NotTested) else REPRODUCED)
        assert spec.judge(None).rule == rule.words()


def test_row_shows_estimate_interval_and_n():
    # Catches: the row's n / interval taken from somewhere else than the estimate that decided.
    e = est(FALLING)
    row = ClaimSpec("P1", "norm falls with λ", "Spearman −1 [paper, Table 3]", "NHT", AtMost("ρ", -0.5)).judge(e)
    assert (row.id, row.source, row.verdict, row.null) == ("P1", "NHT", REPRODUCED, False)
    assert row.ours == "−0.97 [−1.04, −0.91], n = 3 seeds" == e.text()
    assert (row.n, row.low, row.high) == (3, e.low, e.high)
    assert ClaimSpec("P1", "s", "p", "NHT", AtMost("ρ", -0.5)).judge(e, ours="ρ = −0.97").ours == "ρ = −0.97"


# ------------------------------------------------------------------------------------------------- ClaimSpec

def test_claim_spec_validation():
    # Catches: a claim whose source the scoreboard cannot count, an empty statement, or a rule that is not a Rule.
    good = dict(id="P1", statement="norm falls", paper="−1 [paper]", source="NHT", rule=AtMost("ρ", -0.5))
    ClaimSpec(**good)
    assert set(V.SOURCES) == {"NHT", "NSDL", "D_LR", "book"}
    for source in V.SOURCES:
        ClaimSpec(**{**good, "source": source})
    with pytest.raises(ConfigError, match="source"):
        ClaimSpec(**{**good, "source": "arXiv"})
    with pytest.raises(ConfigError, match="statement"):
        ClaimSpec(**{**good, "statement": "  "})
    with pytest.raises(ConfigError, match="id"):
        ClaimSpec(**{**good, "id": ""})
    with pytest.raises(ConfigError, match="paper"):
        ClaimSpec(**{**good, "paper": ""})
    with pytest.raises(ConfigError, match="must be a Rule"):
        ClaimSpec(**{**good, "rule": "AtMost(ρ, −0.5)"})
    with pytest.raises(ConfigError, match="must be a Rule"):
        ClaimSpec(**{**good, "rule": CONTROL})  # a PositiveControl is not a rule


# ------------------------------------------------------------------------------------------------- Claims

def specs():
    return (ClaimSpec("P1", "norm falls with λ", "Spearman −1 [paper, Table 3]", "NHT", AtMost("ρ", -0.5)),
            ClaimSpec("N1", "no λ helps the worst group", "no gain [paper, Fig. 4]", "NHT",
                      Equivalent("worst-group gain", 0.03, CONTROL)),
            ClaimSpec("L1", "delay law slope 1", "1.0 [0.9, 1.1] [paper, Eq. 3]", "NSDL", Matches("slope", 1.0, 0.15)))


def test_claims_record_frame_save_load_and_counts():
    # Catches: record dropping source / rule / n / interval / null from the stored row; a second row with the same id;
    # a save/load that loses the new columns (or writes n as a float); rows not counted under their source.
    p1, n1, l1 = specs()
    claims = nht.Claims("99_test", "smoke")
    r1 = claims.record(p1.judge(est(FALLING)))
    assert r1.verdict == REPRODUCED
    claims.record(n1.judge(est(NULL_EFFECT), control=est(DEAD)))  # dead model -> inconclusive
    claims.record(l1.judge(est([2.0, 2.1, 2.2])))  # 2.1 against 1.0 ± 15 % -> not reproduced
    x1 = Claim(ClaimSpec("X1", "the norm decays, and fast", "yes [ours]", "book", PARTS),
               estimate=lambda analysed: {"decays": analysed["down"], "fast": analysed["fast"]})
    assert claims.judge([x1], {"down": DOWN_HOLDS, "fast": FAST_FAILS})["X1"].verdict == PARTLY
    frame = claims.frame()
    for col in ("source", "rule", "n", "low", "high", "null", "verdict"):
        assert col in frame.columns
    rows = frame.set_index("id")
    assert list(rows.verdict) == [REPRODUCED, INCONCLUSIVE, NOT_REPRODUCED, PARTLY]
    assert list(rows.source) == ["NHT", "NHT", "NSDL", "book"]
    assert rows.loc["P1", "rule"] == p1.rule.words() and rows.loc["N1", "rule"] == n1.rule.words()
    assert rows.loc["P1", "n"] == 3 and rows.loc["P1", "low"] == est(FALLING).low
    assert rows.loc["P1", "high"] == est(FALLING).high
    assert bool(rows.loc["N1", "null"]) is True and bool(rows.loc["P1", "null"]) is False
    assert "positive control" in rows.loc["N1", "note"]
    assert (frame.chapter == "99_test").all() and (frame.scale == "smoke").all()

    with pytest.raises(ConfigError, match="recorded twice"):
        claims.record(p1.judge(est(FALLING)))
    with pytest.raises(ConfigError, match="recorded twice"):
        claims.judge([Claim(p1, estimate=lambda analysed: est(RISING))], None)

    path = claims.save()
    assert path.name == "claims.csv" and path.parent.name == "99_test"
    loaded = nht.claims.load_claims("smoke").set_index("id")
    assert list(loaded.index) == ["P1", "N1", "L1", "X1"]
    assert list(loaded.verdict) == list(rows.verdict) and list(loaded.source) == ["NHT", "NHT", "NSDL", "book"]
    assert list(loaded.rule) == list(rows.rule)
    assert loaded.loc["P1", "n"] == "3" and loaded.loc["X1", "n"] == "3"  # a count, written as one
    assert loaded.loc["X1", "low"] == "" == loaded.loc["X1", "high"]  # a rule with parts has no single interval
    assert float(loaded.loc["P1", "low"]) == pytest.approx(est(FALLING).low, rel=1e-12)
    assert float(loaded.loc["P1", "high"]) == pytest.approx(est(FALLING).high, rel=1e-12)
    assert loaded.loc["N1", "null"] == "True" and loaded.loc["P1", "null"] == "False"

    for counted in (frame, nht.claims.load_claims("smoke")):
        counts = nht.claims.verdict_counts(counted, by="source")
        assert counts.loc["NHT", REPRODUCED] == 1 and counts.loc["NHT", INCONCLUSIVE] == 1
        assert counts.loc["NHT", NOT_REPRODUCED] == 0 and counts.loc["NSDL", NOT_REPRODUCED] == 1
        assert counts.loc["book", PARTLY] == 1 and counts.loc["book"].sum() == 1
        assert counts.loc["total"].sum() == 4 and counts.loc["total", NOT_REPRODUCED] == 1
        assert "" not in counts.index
        assert list(counts.columns) == [v for v in nht.claims.COUNTED if v in counts.columns]
    by_chapter = nht.claims.verdict_counts(frame)
    assert by_chapter.loc["99_test"].sum() == 4 and by_chapter.loc["total"].sum() == 4


# ------------------------------------------------------------------------------------------------- sd_interval

def test_sd_interval_known_answer_and_coverage():
    e = sd_interval([1.0, 2.0, 3.0])  # s = 1, n = 3: [√(2/χ²₀.₉₇₅,₂), √(2/χ²₀.₀₂₅,₂)] = [0.521, 6.285]
    assert (e.value, e.n, e.method) == (1.0, 3, "chi-square")
    assert e.low == pytest.approx(0.5207, abs=1e-4) and e.high == pytest.approx(6.2847, abs=1e-4)
    assert sd_interval([1.0, float("nan"), 3.0]).n == 2 and math.isnan(sd_interval([2.0]).low)
    rng = np.random.default_rng(1)
    hits = [(lambda est: est.low <= 2.0 <= est.high)(sd_interval(rng.normal(0, 2.0, 3))) for _ in range(4000)]
    assert 0.93 < np.mean(hits) < 0.97  # a 95 % interval of the true sd 2.0


# ------------------------------------------------------------------------------------------------- shares of runs

def test_share_interval_is_wilson_with_runs_as_the_unit():
    # Known Wilson 95 % bounds (z = 1.95996): 0/13 -> [0, 0.2281]; 13/13 -> [0.7719, 1]; 7/10 -> [0.3968, 0.8922].
    from nhtlib.analysis.statistics import share_interval
    none = share_interval([0, 0, 0], [4, 4, 5])
    assert (none.value, none.n, none.unit) == (0.0, 13, "runs") and none.low == 0.0
    assert none.high == pytest.approx(0.2281, abs=1e-4) and none.decided
    assert share_interval([4, 4, 5], [4, 4, 5]).low == pytest.approx(0.7719, abs=1e-4)
    e = share_interval([7], [10])
    assert (e.low, e.high) == (pytest.approx(0.3968, abs=1e-4), pytest.approx(0.8922, abs=1e-4))
    assert "n = 13 runs" in none.text()
    # unanimity is not needed: 2 of 3 seeds all-in and one all-out is a share of 2/3 whose interval a t over 3 seeds
    # would make [0, 1]; clustered Wilson is narrower than that and wider than the unclustered one
    clustered = share_interval([5, 5, 0], [5, 5, 5])
    plain = share_interval([10], [15])
    assert clustered.value == pytest.approx(2 / 3) and clustered.high - clustered.low > plain.high - plain.low
    assert clustered.low > 0.0 or clustered.high < 1.0
    assert "clustered" in clustered.method and plain.method == "Wilson"
    assert share_interval([], []).n == 0 and not share_interval([1, 1], [1, 1]).decided  # 2 runs decide nothing


def test_run_share_counts_selected_runs_per_seed():
    from nhtlib.analysis.statistics import run_share
    summary = pd.DataFrame({"seed": [0, 0, 1, 1, 2, 2], "regime": ["intermediate"] * 5 + ["weak"],
                            "first": [True, True, True, False, True, True]})
    e = run_share(summary, summary["first"], runs=summary.regime == "intermediate")
    assert e.n == 5 and e.value == pytest.approx(4 / 5)


def test_counts_split_not_testable_by_reason():
    # Catches: "the paper gives no evidence" and "not run at this scale" counted as one verdict on the Scoreboard.
    frame = pd.DataFrame({"chapter": ["a", "a", "a", "b"], "verdict": [NOT_TESTABLE, NOT_TESTABLE, REPRODUCED,
                                                                       NOT_TESTABLE],
                          "untested": [V.NO_EVIDENCE, V.NOT_AT_THIS_SCALE, "", ""]})
    counts = nht.claims.verdict_counts(frame)
    assert counts.loc["a", f"not testable: {V.NO_EVIDENCE}"] == 1
    assert counts.loc["a", f"not testable: {V.NOT_AT_THIS_SCALE}"] == 1 and counts.loc["a", REPRODUCED] == 1
    assert counts.loc["b", "not testable: reason not recorded"] == 1 and counts.loc["total"].sum() == 4
