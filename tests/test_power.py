"""The power read-out (issue 27): for an inconclusive claim, the seeds (or runs) at which its interval would clear the
rule's bound at the spread measured — `statistics.units_to_clear` / `units_to_decide`, `Rule.gap`, `Rule.to_decide`,
the claims row, its paragraph and table cell, and the Scoreboard's list — on synthetic per-seed statistics.

Hand-computed (t_{0.975,2} = 4.303, t_{0.975,3} = 3.182, t_{0.975,4} = 2.776): values with mean .3, sd .2 at n = 3
against AtLeast(0): half-width 4.303·.2/√3 = .497 > .3 (inconclusive); at 4 seeds 3.182·.2/√4 = .318 > .3; at 5 seeds
2.776·.2/√5 = .248 < .3, so 5 seeds would decide it (reproduced). A z-interval would say 1.96·.2/√3 = .226 < .3:
3 seeds, and a scaling by 1/√m alone (z instead of t) .497·√(3/m) < .3: 9 seeds.
"""
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import nhtlib as nht
from nhtlib.analysis import statistics
from nhtlib.analysis.statistics import (MIN_UNITS, MOST_UNITS, Estimate, interval, interval_at, sd_interval,
                                        seeds_needed, share_interval, units_to_clear, units_to_decide,
                                        units_to_decide_if_wider)
from nhtlib.report.claims import Claims, style_claims, to_decide_markdown, verdict_markdown
from nhtlib.report.verdicts import (INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, AllOf, ArmComparison, AtLeast, AtMost,
                                    ClaimSpec, Equivalent, Matches, NotTested, PositiveControl, Within)

CONTROL = PositiveControl("clean accuracy − chance", 0.2)
ALIVE = interval([0.60, 0.62, 0.61])
DEAD = interval([0.0, 0.01, 0.0])


def shaped(mean: float, sd: float, n: int, seed: int = 0) -> list[float]:
    """n values whose mean and sample sd (ddof = 1) are exactly `mean` and `sd`."""
    z = np.random.default_rng(seed).standard_normal(n)
    z = (z - z.mean()) / z.std(ddof=1)
    return list(mean + sd * z)


def t_half(sd: float, m: int) -> float:
    return float(stats.t.ppf(0.975, m - 1)) * sd / math.sqrt(m)


def expected_units(sd: float, distance: float) -> int | None:
    """The smallest m ≥ 3 with t(m − 1)·sd/√m < distance, straight from scipy (not from the code under test)."""
    return next((m for m in range(MIN_UNITS, MOST_UNITS + 1) if t_half(sd, m) < distance), None)


# ------------------------------------------------------------------------------------------ units_to_clear

def test_the_hand_computed_case_needs_five_seeds():
    # Catches: a z quantile (3 seeds), a 1/√m scaling with t fixed at n (9 seeds), df = m instead of m − 1 (4 seeds).
    e = interval(shaped(0.3, 0.2, 3))
    assert e.high - e.value == pytest.approx(4.303 * 0.2 / math.sqrt(3), abs=1e-3)  # .497
    assert units_to_clear(e.high - e.value, 3, 0.3) == 5
    # the sd's upper 95 % bound at n = 3 is .2·√(2/χ²₀.₀₂₅(2)) = .2·√(2/.0506) = 1.257: t(m−1)·1.257/√m < .3 first
    # at m = 70 (t(69) = 1.995: .2998 against t(68)/√69 ·1.257 = .3019 at 69)
    assert AtLeast("gain", 0.0).to_decide(e) == ("≈ 5 seeds would decide it (reproduced), at the spread measured "
                                                 "(n = 3); ≈ 70 if the spread is at its 95% upper bound")


@pytest.mark.parametrize("sd, distance", [(0.2, 0.3), (0.2, 0.1), (1.0, 0.5), (0.05, 0.2), (0.3, 0.04)])
def test_units_to_clear_is_the_first_m_whose_t_interval_clears(sd, distance):
    # Catches: an off-by-one in the search (m − 1 or m + 1), a non-strict comparison, a z quantile.
    assert units_to_clear(t_half(sd, 3), 3, distance) == expected_units(sd, distance)


def test_units_to_clear_no_n_none_beyond_most_and_a_floor_of_three():
    # Catches: a centre on the bound given a number; no ceiling; a read-out below MIN_UNITS.
    assert units_to_clear(0.5, 3, 0.0) is None and units_to_clear(0.5, 3, -0.1) is None
    assert units_to_clear(0.5, 3, 0.01) is None  # would need thousands of seeds
    assert expected_units(t_half(0.5, 3) / t_half(1, 3), 0.01) is None
    assert units_to_clear(0.0, 2, 0.1) == MIN_UNITS  # a constant statistic on 2 seeds: the third decides
    assert units_to_clear(1e-6, 10, 0.5) == 10  # never fewer units than measured


def test_a_planted_z_quantile_fails_the_known_answer(monkeypatch):
    # The test above can fail: scale the half-width by √(n/m) (z, not t) and the read-out says 9 seeds, not 5.
    monkeypatch.setattr(statistics, "_t_shrink", lambda n, m, level=0.95: np.sqrt(n / np.asarray(m, float)))
    with pytest.raises(AssertionError):
        test_the_hand_computed_case_needs_five_seeds()


# --------------------------------------------------------------------- the read-out decides at its m, not at m − 1

CASES = [  # (rule, mean, sd): centres on either side of each rule's bounds, read-outs from 4 to ~60 seeds
    (AtLeast("x", 0.0), 0.3, 0.2),
    (AtLeast("x", 0.0), -0.1, 0.2),
    (AtMost("x", 0.5), 0.2, 0.4),
    (Within("x", 0.0, 1.0), 0.8, 0.3),
    (Within("x", 0.0, 1.0), 1.1, 0.3),
    (Within("x", 0.0, 1.0), -0.15, 0.35),
    (Matches("x", 2.0, 0.1), 2.05, 0.3),  # margin ±0.2: inside
    (Matches("x", 2.0, 0.1), 2.6, 0.5),  # outside
    (Matches("x", 2.0, 0.3, relative=False), 1.5, 0.4),
    (Equivalent("x", 0.3, CONTROL), 0.05, 0.3),
    (Equivalent("x", 0.3, CONTROL), -0.45, 0.2),
]


@pytest.mark.parametrize("rule, mean, sd", CASES, ids=[f"{type(r).__name__}-{m:g}" for r, m, _ in CASES])
def test_at_its_m_the_read_out_decides_and_at_m_minus_one_it_does_not(rule, mean, sd):
    # Catches: a gap measured to the wrong bound (the far one of a range), the wrong side of an equivalence margin,
    # a `then` that is not the verdict the rule gives.
    e = interval(shaped(mean, sd, 3))
    assert rule.judge(e, ALIVE) == INCONCLUSIVE
    gap = rule.gap(e)
    m = units_to_decide(e, gap.bounds)
    assert m is not None and m > 3
    assert m == expected_units(sd, gap.distance)
    assert rule.judge(interval(shaped(mean, sd, m, seed=1)), ALIVE) == gap.then
    assert rule.judge(interval(shaped(mean, sd, m - 1, seed=2)), ALIVE) == INCONCLUSIVE
    assert rule.to_decide(e, ALIVE).startswith(f"≈ {m} seeds would decide it ({gap.then}), at the spread measured "
                                               "(n = 3); ")


def test_gaps_name_the_bound_and_the_verdict_on_the_centres_side():
    # Catches: Within's nearest bound taken as the far one; an equivalence centre outside the margin read as inside.
    e = interval(shaped(0.8, 0.3, 3))
    gap = Within("x", 0.0, 1.0).gap(e)
    assert gap.then == REPRODUCED and gap.distance == pytest.approx(0.2) and gap.bounds == (0.0, 1.0)
    assert gap.side == pytest.approx(t_half(0.3, 3))
    outside = Matches("x", 2.0, 0.1).gap(interval(shaped(2.6, 0.5, 3)))
    assert outside.then == NOT_REPRODUCED and outside.distance == pytest.approx(0.4) and outside.bounds == (2.2,)
    assert AtMost("x", 0.5).gap(interval(shaped(0.9, 0.4, 3))).then == NOT_REPRODUCED
    assert AtLeast("x", 0.0).gap(interval([1.0])) is None  # no interval, no gap


def test_a_centre_on_the_bound_has_no_n_and_a_tiny_effect_more_than_a_hundred():
    on = interval(shaped(0.0, 0.2, 3))
    assert AtLeast("x", 0.0).to_decide(on) == "no n: the estimate lies on the bound"
    assert Equivalent("x", 0.3, CONTROL).to_decide(interval(shaped(0.3, 0.2, 3)), ALIVE) == (
        "no n: the estimate lies on the bound")
    tiny = interval(shaped(0.01, 0.5, 3))
    assert AtLeast("x", 0.0).to_decide(tiny) == (
        f"more than {MOST_UNITS} seeds: the effect is too small for the spread measured")


def test_too_few_seeds_compute_from_what_is_there_or_ask_for_three():
    # Catches: two seeds refused a read-out although they carry a spread; one seed given a number.
    two = interval(shaped(0.3, 0.1, 2))
    assert not two.decided and AtLeast("x", 0.0).judge(two) == INCONCLUSIVE
    # t(1) = 12.7: the half-width at 2 seeds is 0.898; scaled to 3 seeds it is 4.303·.1/√3 = .248 < .3
    # the sd's upper bound at n = 2 is 31.9 × the measured one: no m ≤ 100 clears .3
    assert AtLeast("x", 0.0).to_decide(two) == ("≈ 3 seeds would decide it (reproduced), at the spread measured (n = 2); "
                                                f"more than {MOST_UNITS} if the spread is at its 95% upper bound")
    assert AtLeast("x", 0.0).to_decide(interval([0.4])) == "at least 3 seeds (n = 1)"
    assert AtLeast("x", 0.0).to_decide(Estimate(0.4, 0.1, 0.7, 1)) == "at least 3 seeds (n = 1)"  # no spread
    assert AtLeast("share", 0.5).to_decide(share_interval([1], [1])).startswith("≈ ")  # one run: Wilson, scalable
    assert AtLeast("x", 0.0).to_decide(interval([0.4, 0.4])).startswith("≈ 3 seeds")  # constant on 2 seeds
    assert AtLeast("x", 0.0).to_decide(None) == "nothing measured"
    # Catches: "at least 3 seeds (n = 0)" where every seed run lacked what the statistic reads (chapter 3's F2: no
    # transitioned run in the ρ sweep): more seeds of the same design need not give one value
    assert AtLeast("x", 0.0).to_decide(interval([])) == (
        "no seed gave a value at this design (the note says what each lacks): the design must change before more "
        "of them can decide it")
    unfit = Estimate(float("nan"), float("nan"), float("nan"), 5, "seeds", "none")  # a bootstrap that could not fit
    assert AtLeast("x", 0.0).to_decide(unfit) == "no interval at n = 5 seeds: the statistic could not be estimated"


def test_decided_and_untested_rules_read_nothing():
    # Catches: a read-out on a decided row (it would say "≈ 3 seeds" of a result already decided).
    assert AtLeast("x", 0.0).to_decide(interval([0.9, 1.0, 1.1])) == ""
    assert AtLeast("x", 0.0).to_decide(interval([-0.9, -1.0, -1.1])) == ""
    assert NotTested("needs ImageNet").to_decide(None) == ""


def test_a_clipped_interval_is_scaled_from_its_values():
    # Catches: the half-width read off a clipped interval ([0, 1] for a 0/1 statistic: 2 of 3 seeds), which is
    # narrower than the t-interval the verdict scales (4.303·0.577/√3 = 1.43).
    values = [1.0, 1.0, 0.0]
    clipped, free = interval(values, bounds=(0.0, 1.0)), interval(values)
    assert (clipped.low, clipped.high) == (0.0, 1.0)
    rule = AtLeast("share of seeds", 0.5)
    assert rule.to_decide(clipped) == rule.to_decide(free)
    assert rule.gap(clipped).side == pytest.approx(t_half(np.std(values, ddof=1), 3))


# ---------------------------------------------------------------------- controls and parts

def test_a_null_claim_with_a_dead_or_missing_control_waits_for_the_control():
    rule = Equivalent("worst-group gain", 0.03, CONTROL)
    e = interval([0.01, -0.02, 0.03])
    words = CONTROL.words()
    assert rule.to_decide(e, None) == f"the positive control must pass first ({words}; measured: not measured)"
    assert rule.to_decide(e, DEAD) == f"the positive control must pass first ({words}; measured: {DEAD.text()})"
    assert rule.to_decide(e, ALIVE).startswith("≈ ")
    # a failure the paper marks ×: the control stands only between the estimate and *reproduced*
    law_fails = AtMost("R²", 0.9, control=CONTROL)
    assert law_fails.to_decide(interval(shaped(0.7, 0.2, 3)), DEAD).startswith("the positive control must pass")
    assert law_fails.to_decide(interval(shaped(1.0, 0.1, 3)), DEAD).startswith(
        "≈ 7 seeds would decide it (not reproduced), at the spread measured (n = 3); ")
    # a comparison of two arms: either way
    arms = ArmComparison("Δ accuracy", 0.0, control=CONTROL)
    assert arms.to_decide(interval(shaped(-0.2, 0.3, 3)), DEAD).startswith("the positive control must pass")


def test_all_of_lists_the_undecided_parts():
    rule = AllOf((("falls", AtMost("ρ", -0.5)), ("fast", AtLeast("speed", 1.0)), ("peaks", AtLeast("peak", 0.0))))
    estimates = {"falls": interval([-0.9, -0.95, -1.0]),  # reproduced: not listed
                 "fast": interval(shaped(1.3, 0.2, 3)), "peaks": interval([2.0])}
    assert rule.judge(estimates) == INCONCLUSIVE
    fast = AtLeast("speed", 1.0).to_decide(estimates["fast"])
    assert rule.to_decide(estimates) == f"fast: {fast}; peaks: at least 3 seeds (n = 1)"
    assert rule.to_decide({**estimates, "peaks": interval([-3.0, -2.9, -3.1])}) == ""  # partly: decided
    assert AllOf((("a", AtLeast("x", 0.0)), ("b", NotTested("no groups")))).to_decide(
        {"a": interval([1.0, 1.1, 0.9])}) == "b: not testable here (the paper gives no evidence): no groups"


# ------------------------------------------------------------------ shares (Wilson) and spreads (chi-square)

def test_a_share_keeps_its_wilson_interval_and_design_effect():
    # share_interval is a Wilson interval (not a t/Wald one), so a share's read-out projects the Wilson interval
    # with the share and design effect measured. Catches: a t-scaling of a share; a design effect lost on the way.
    one_seed = share_interval([4], [6])
    assert one_seed.method == "Wilson"
    assert interval_at(one_seed, 12) == pytest.approx((share_interval([8], [12]).low, share_interval([8], [12]).high))
    clustered = share_interval([3, 0, 3], [3, 3, 3])  # seeds disagree: deff > 1
    assert "deff" in clustered.method
    assert interval_at(clustered, clustered.n) == pytest.approx((clustered.low, clustered.high), abs=1e-9)
    assert interval_at(clustered, 30)[0] < share_interval([20], [30]).low  # clustered: wider than 30 free runs


def test_a_share_read_out_decides_at_its_m():
    rule = AtLeast("share of runs", 0.3)
    share = share_interval([2, 1, 2], [3, 3, 3])  # 5 of 9 runs
    assert rule.judge(share) == INCONCLUSIVE
    text = rule.to_decide(share)
    m = int(re.match(r"≈ (\d+) runs would decide it \(reproduced\)", text).group(1))
    at = lambda k: Estimate(share.value, *interval_at(share, k), k, "runs", share.method)  # noqa: E731
    assert rule.judge(at(m)) == REPRODUCED and rule.judge(at(m - 1)) == INCONCLUSIVE
    every = share_interval([3], [3])  # all 3 runs: the Wilson lower end 3/(3 + z²) = 0.44
    assert AtLeast("share", 0.8).to_decide(every) == (
        f"≈ {statistics.runs_needed(0.8)} runs would decide it (reproduced), at the spread measured (n = 3)")


def test_a_spread_keeps_its_chi_square_interval():
    sd = sd_interval(shaped(1.0, 0.5, 3))
    assert interval_at(sd, 10) == pytest.approx((sd_interval(shaped(1.0, 0.5, 10)).low,
                                                sd_interval(shaped(1.0, 0.5, 10)).high))
    assert AtMost("seed sd", 0.8).to_decide(sd) == (
        f"≈ {seeds_needed(0.5, 0.8)} seeds would decide it (reproduced), at the spread measured (n = 3)")


# ------------------------------------------------------------------ the row, its paragraph, table and Scoreboard

def spec(rule, id="P1"):
    return ClaimSpec(id, "the gain is positive", "gain > 0 [paper, Table 1]", "NHT", rule)


def test_the_row_carries_the_read_out_only_when_inconclusive():
    row = spec(AtLeast("gain", 0.0)).judge(interval(shaped(0.3, 0.2, 3)))
    assert row.verdict == INCONCLUSIVE and row.to_decide.startswith("≈ 5 seeds")
    assert spec(AtLeast("gain", 0.0)).judge(interval([1.0, 1.1, 0.9])).to_decide == ""
    assert spec(AtLeast("gain", 0.0)).judge(None).to_decide == ""  # not run at this scale
    parts = spec(AllOf((("a", AtLeast("x", 0.0)), ("b", AtLeast("y", 0.0)))))
    assert parts.judge({"a": interval([1.0, 1.1, 0.9]), "b": interval(shaped(0.3, 0.2, 3))}).to_decide == (
        "b: ≈ 5 seeds would decide it (reproduced), at the spread measured (n = 3); ≈ 70 if the spread is at its "
        "95% upper bound")


HOSTILE = "<img src=x onerror=alert(1)> $x$ a|b **fake**"


def test_paragraph_table_and_scoreboard_show_the_read_out_escaped(tmp_path):
    claims = Claims("01_a", "smoke")
    undecided = claims.record(spec(AtLeast("gain", 0.0), "P1").judge(interval(shaped(0.3, 0.2, 3))))
    decided = claims.record(spec(AtLeast("gain", 0.0), "P2").judge(interval([1.0, 1.1, 0.9])))
    assert "*What would decide it:* ≈ 5 seeds would decide it (reproduced)" in verdict_markdown(undecided)
    assert "What would decide it" not in verdict_markdown(decided)
    html = claims.table().to_html()
    assert html.count("What would decide it") == 1 and "≈ 5 seeds would decide it" in html
    assert "<th" in html and "to_decide" not in html  # in the rule's cell, not a column of its own
    hostile = style_claims(pd.DataFrame({"id": ["P1"], "verdict": [INCONCLUSIVE], "rule": ["r"],
                                         "to_decide": [HOSTILE]})).to_html()
    assert "<img" not in hostile and "&lt;img src=x" in hostile
    frame = pd.concat([claims.frame(), pd.DataFrame([{"chapter": "02_b", "id": "Q`1", "verdict": INCONCLUSIVE,
                                                       "ours": HOSTILE, "to_decide": HOSTILE}])], ignore_index=True)
    board = to_decide_markdown(frame, {"01_a": "1. A"}, {"01_a": {"P1": "01_a-claims-1"}})
    assert "**1\\. A** — 1 inconclusive:" in board
    assert "- {ref}`P1 <01_a-claims-1>` (0.30 \\[−0.20, 0.80\\], n = 3 seeds): ≈ 5 seeds" in board
    assert "P2" not in board  # decided: not listed
    assert "\\<img src=x" in board and not re.search(r"(?<!\\)<img", board)
    assert "- Q\\`1 (" in board  # an id that cannot be a safe link is shown, unlinked
    assert to_decide_markdown(claims.frame().iloc[1:], {}) == "No claim is inconclusive."


def test_claims_csv_keeps_the_read_out_and_old_files_load_without_it():
    claims = Claims("01_toy_norm_hierarchy", "smoke")
    claims.record(spec(AtLeast("gain", 0.0)).judge(interval(shaped(0.3, 0.2, 3))))
    path = claims.save()
    assert pd.read_csv(path).to_decide.iloc[0].startswith("≈ 5 seeds")
    old = nht.paths.chapter_dir("02_grokking", "smoke") / "claims.csv"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text("chapter,id,verdict\n02_grokking,G1,inconclusive\n")
    board = nht.claims.load_claims("smoke")
    assert list(board.to_decide) == [claims.frame().to_decide.iloc[0], ""]
    assert "not recorded" in to_decide_markdown(board, {})


def test_every_declared_rule_of_the_book_reads_out_on_an_undecided_estimate():
    # Catches: a rule class without a gap (NotImplementedError on the book's own claims) or a read-out that raises.
    from nhtlib.chapters.registry import CHAPTERS

    wide = interval(shaped(0.0, 10.0, 3, seed=3))  # straddles every bound of the book
    for chapter in CHAPTERS.values():
        for claim in chapter.claims:
            rule = claim.spec.rule
            estimate = {name: wide for name, _ in rule.parts} if isinstance(rule, AllOf) else wide
            verdict = rule.judge(estimate, ALIVE)
            text = rule.to_decide(estimate, ALIVE)
            assert isinstance(text, str) and (bool(text) == (verdict == INCONCLUSIVE)), (chapter.name, claim.id)


@pytest.mark.parametrize("n, sd, distance", [(3, 0.2, 0.3), (3, 0.05, 0.3), (6, 0.2, 0.3), (10, 0.3, 0.25)])
def test_the_read_out_at_the_spreads_upper_bound_scales_the_sd_by_its_chi_square_bound(n, sd, distance):
    # Catches: the lower chi-square quantile swapped for the upper (a narrower spread: fewer seeds than measured),
    # n degrees of freedom instead of n − 1, a read-out that does not grow as the measured spread's bound loosens.
    e = interval(shaped(distance, sd, n))
    upper_sd = sd * math.sqrt((n - 1) / stats.chi2.ppf(0.025, n - 1))
    expected = next((m for m in range(max(n, MIN_UNITS), MOST_UNITS + 1) if t_half(upper_sd, m) < distance), None)
    assert units_to_decide_if_wider(e, (0.0,)) == expected
    measured = units_to_decide(e, (0.0,))
    assert expected is None or measured <= expected


def test_the_wider_read_out_is_said_only_for_t_intervals_and_only_when_it_differs():
    # Catches: a Wilson share given a t-scaled pessimism; a clause repeating the same count.
    assert units_to_decide_if_wider(share_interval([2, 3], [3, 3]), (0.5,)) is None
    assert units_to_decide_if_wider(interval(shaped(0.0, 0.2, 3)), (0.0,)) is None  # centre on the bound
    many = interval(shaped(0.3, 0.01, 40))  # 40 seeds measure the spread well: both read-outs say 40 (decided)
    assert units_to_decide_if_wider(many, (0.0,)) == 40
    assert "upper bound" not in AtLeast("x", 0.0).to_decide(share_interval([2, 3, 3], [3, 3, 3]))
