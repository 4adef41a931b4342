"""Chapter 3's module (nhtlib.chapters.border_cifar): presets, claim declarations, and the per-seed estimates behind its
verdicts, on synthetic summary tables with known answers."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import predictions
from nhtlib.chapters import border_cifar as borders
from nhtlib.config import ConfigError
from nhtlib.report.verdicts import INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES

SEEDS = (0, 1, 2)
LAMS = (0.01, 0.1, 1.0, 3.0, 10.0, 30.0)
RHOS = (0.5, 0.8, 0.95, 1.0)


# ------------------------------------------------------------------------------------------- presets, claims

def test_presets_give_every_verdict_enough_seeds():
    assert set(borders.PRESETS) == {"smoke", "cpu", "paper"}
    for scale in ("cpu", "paper"):
        p = borders.PRESETS[scale]
        assert p.seeds >= MIN_UNITS and p.ablation_seeds >= MIN_UNITS
    assert borders.PRESETS["paper"].lambdas == borders.PAPER_LAMBDAS


def test_presets_reject_bad_values():
    cpu = borders.PRESETS["cpu"]
    with pytest.raises(ConfigError):
        cpu.replace(lambdas=(1.0, 0.1))
    with pytest.raises(ConfigError):
        cpu.replace(lambdas=(0.01, 1.0))  # λ = 0.1 is needed by Experiment B and the ablation
    with pytest.raises(ConfigError):
        cpu.replace(seeds=0)


def test_claims_are_declared_once_with_the_shared_predictions():
    claims = borders.CHAPTER.claims
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids))
    assert ids == ["P1", "P2", "T2-2", "T2-3", "P3", "T2-4", "B1", "P4", "PH1", "AB1", "AB2", "P6", "P5", "T2-5"]
    assert "T2-1" not in ids and "T2-6" not in ids  # they are P2 and P6
    for pid in predictions.PREDICTIONS:
        assert borders.CHAPTER.claim(pid).spec == predictions.spec(pid, borders.DOMAIN)
    for c in claims:
        assert c.spec.source in SOURCES and "[" in c.spec.paper  # the paper's value keeps its source tag
        assert c.where and c.test  # the chapter's opening table (`overview_markdown`) shows both
    assert borders.CHAPTER.claim("T2-5").spec.rule.null


def test_sweeps_are_named_by_the_module_constants():
    preset = borders.PRESETS["smoke"]
    names = [s.name for s in borders.CHAPTER.sweeps("smoke")]
    assert names == ([borders.LAMBDA_SWEEP] + [borders.RHO_SWEEP.format(rho=rho) for rho in preset.rhos]
                     + list(borders.MODELS))  # no phase-diagram extras at smoke scale
    # the labels the planner and the progress bars show
    assert borders.LAMBDA_SWEEP == "λ sweep" and borders.RHO_SWEEP.format(rho=0.5) == "ρ = 0.5"


# ------------------------------------------------------------------------------------- synthetic summaries

def _sum_a(clean_slope=-0.05, decay=lambda lam: 10 * np.log10(lam) + 30):
    rows = []
    for s in SEEDS:
        for i, lam in enumerate(LAMS):
            regime = "weak" if lam < 1 else ("intermediate" if lam < 30 else "strong")
            rows.append({"lam": lam, "seed": s, "V_final": 1000 / (1 + lam) + s, "decay_pct": decay(lam) + s,
                         "regime": regime, "final_clean_acc": 0.5 + clean_slope * i + 0.01 * s,
                         "final_coloured_acc": 0.9, "final_shortcut_acc": 0.9, "V_peak": 1100.0, "peak_step": 5.0,
                         "peak_step:head": 3.0, "peak_step:conv1": 6.0, "decay_pct:head": 20.0,
                         "decay_pct:conv1": 5.0, "T_head_peak": 2.0 + 3 * i + (s % 2) * 1.5,
                         "T_head_contraction": np.nan, "T_clean_acc": np.nan})
    return pd.DataFrame(rows)


def _sum_b():
    rows = [{"rho": rho, "seed": s, "final_clean_acc": 0.8 - 0.6 * j / 3 + 0.01 * s, "decay_pct": 5.0,
             "final_shortcut_acc": 0.4 + 0.6 * j / 3, "regime": "intermediate", "lam": 0.1}
            for s in SEEDS for j, rho in enumerate(RHOS)]
    return pd.DataFrame(rows)


def _sum_abl(order=("ResNet18 + BN", "ResNet18 (no norm)", "SimpleCNN", "ResNet18 + GN")):
    acc = dict(zip(order, (0.78, 0.70, 0.62, 0.50)))
    return pd.DataFrame([{"model": m, "seed": s, "final_clean_acc": acc[m] + 0.01 * s, "decay_pct": 30.0 + s}
                         for m in borders.MODELS for s in SEEDS])


def _runs(sum_a=None, sum_b=None, sum_abl=None):
    empty = pd.DataFrame()
    return borders.BorderRuns(empty, _sum_a() if sum_a is None else sum_a, empty,
                              _sum_b() if sum_b is None else sum_b, empty,
                              _sum_abl() if sum_abl is None else sum_abl)


def _verdict(cid, runs):
    return borders.CHAPTER.claim(cid).judge(runs).verdict


def test_lambda_sweep_claims_on_a_paper_like_table():
    runs = _runs()
    for cid in ("P1", "P2", "T2-2", "T2-3", "P3", "P4"):
        assert _verdict(cid, runs) == REPRODUCED, cid


def test_p3_needs_a_falling_clean_accuracy():
    assert _verdict("P3", _runs(sum_a=_sum_a(clean_slope=+0.05))) == NOT_REPRODUCED  # the sign matters


def test_no_decay_is_not_a_peak_then_decay():
    flat = _sum_a(decay=lambda lam: 0.0).assign(decay_pct=0.0)
    assert _verdict("T2-2", _runs(sum_a=flat)) == NOT_REPRODUCED


def test_rho_sweep_claims():
    runs = _runs()
    assert _verdict("T2-4", runs) == REPRODUCED
    assert _verdict("B1", runs) == REPRODUCED
    half = _sum_b().assign(final_shortcut_acc=lambda d: 0.3 + 0.2 * (d.rho > 0.6))  # rises, never complete
    assert _verdict("B1", _runs(sum_b=half)) == PARTLY


def test_ablation_ranks_part_by_part():
    assert _verdict("AB1", _runs()) == REPRODUCED
    swapped = _runs(sum_abl=_sum_abl(order=("ResNet18 + BN", "SimpleCNN", "ResNet18 (no norm)", "ResNet18 + GN")))
    assert _verdict("AB1", swapped) == PARTLY
    assert _verdict("AB2", _runs()) == REPRODUCED


def test_phase_claim_not_testable_without_the_full_grid():
    assert _verdict("PH1", _runs()) == NOT_TESTABLE


def test_p6_is_a_measured_failure():
    linear = _sum_a()  # T grows linearly in the grid index, not in 1/λ: the law fails
    assert _verdict("P6", _runs(sum_a=linear)) == REPRODUCED
    law = linear.assign(T_head_peak=lambda d: 5.0 / d.lam + 1.0 + 0.001 * d.seed)
    assert _verdict("P6", _runs(sum_a=law)) == NOT_REPRODUCED


def test_reproducibility_is_a_null_claim_with_a_control():
    close = _sum_a().assign(final_clean_acc=lambda d: 0.45 + 0.002 * d.seed)  # far above chance, sd 0.2 points
    assert _verdict("T2-5", _runs(sum_a=close)) == REPRODUCED  # CI of the sd up to 1.3 points: inside ±5
    one_point = _runs()  # sd 1 point: with 3 seeds its chi-square CI reaches 6.3 points, beyond the margin
    assert _verdict("T2-5", one_point) == INCONCLUSIVE
    at_chance = _runs(sum_a=_sum_a().assign(final_clean_acc=lambda d: 0.1 + 0.001 * d.seed))
    assert _verdict("T2-5", at_chance) == INCONCLUSIVE  # seeds at chance agree trivially: the control fails
    spread = _runs(sum_a=_sum_a().assign(final_clean_acc=lambda d: 0.5 + 0.1 * d.seed))
    # seeds 10 points apart: the chi-square interval of the sd (0.052 to 0.63) lies beyond the 5-point margin
    assert _verdict("T2-5", spread) == NOT_REPRODUCED
