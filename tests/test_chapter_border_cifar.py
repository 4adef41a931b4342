"""Chapter 3's module (nhtlib.chapters.border_cifar): presets, claim declarations, and the per-seed estimates behind its
verdicts, on synthetic summary tables with known answers."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import predictions
from nhtlib.chapters import border_cifar as borders
from nhtlib.config import ConfigError
from nhtlib.models.simple_cnn import SimpleCNNConfig
from nhtlib.report.verdicts import (INCONCLUSIVE, MIN_UNITS, NOT_AT_THIS_SCALE, NOT_REPRODUCED, NOT_TESTABLE, PARTLY,
                                    REPRODUCED, SOURCES)
from nhtlib.analysis import statistics

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


def test_the_simplecnn_runs_at_the_presets_width_and_the_paper_at_the_papers_model():
    # Catches: cnn_width not reaching the model (every sweep would train the full-width net), the paper scale
    # training a narrower net than the paper's 287,850 parameters.
    assert borders.PRESETS["paper"].cnn_width == 1.0
    for scale in ("cpu", "paper"):
        p = borders.PRESETS[scale]
        simple = [c.model for s in borders.sweeps(p, None) for c in s.configs if isinstance(c.model, SimpleCNNConfig)]
        assert simple and {m.width for m in simple} == {p.cnn_width}
    with pytest.raises(ConfigError):
        borders.PRESETS["cpu"].replace(cnn_width=0.0)


def test_presets_reject_bad_values():
    cpu = borders.PRESETS["cpu"]
    with pytest.raises(ConfigError):
        cpu.replace(lambdas=(1.0, 0.1))
    with pytest.raises(ConfigError):
        cpu.replace(lambdas=(0.01, 1.0))  # λ = 0.1 is needed by T2-5
    with pytest.raises(ConfigError):
        cpu.replace(seeds=0)
    with pytest.raises(ConfigError):
        cpu.replace(rho_lambda=0.2)  # Experiment B's ρ = 0.95 cell is read from A: its λ must be on A's grid
    with pytest.raises(ConfigError):
        cpu.replace(ablation_lambda=-1.0)


@pytest.mark.parametrize("scale", list(borders.PRESETS))
def test_the_ablation_runs_at_experiment_bs_decay_budget(scale):
    # Catches: an ablation shorter than Experiment A left at B's λ (at cpu scale λ = 0.1 over 6 epochs had a decay
    # budget 55x below the paper's and no model's norm decayed), or a preset whose ablation λ drifts from the rule
    # its comment states: λ × ablation epochs = rho_lambda × epochs (η and batch shared), the paper's 0.1 at 200 / 200
    p = borders.PRESETS[scale]
    assert p.ablation_lambda * p.ablation_epochs == pytest.approx(p.rho_lambda * p.epochs)
    declared = {s.name: s for s in borders.sweeps(p, None)}
    for name in borders.MODELS:
        assert {c.train.weight_decay for c in declared[name].configs} == {p.ablation_lambda}


def test_experiment_b_runs_at_rho_lambda_and_reads_its_rho_095_cell_from_a(monkeypatch):
    # Catches: the ρ sweep trained at the paper's 0.1 whatever the preset says, the ρ = 0.95 cell read from A's
    # λ = 0.1 runs while the other ρ's ran at rho_lambda (a sweep mixing two λ's), the phase table labelling the ρ
    # sweep's runs λ = 0.1, the ablation moving with Experiment B.
    paper = borders.PRESETS["paper"]
    assert paper.rho_lambda == paper.ablation_lambda == borders.LAMBDA_B == 0.1  # the paper's protocol [ours: ablation]
    preset = borders.PRESETS["smoke"].replace(rho_lambda=1.0)
    declared = {s.name: s for s in borders.sweeps(preset, None)}
    for rho in preset.rhos:
        if rho != borders.RHO_A:
            assert {c.train.weight_decay for c in declared[borders.RHO_SWEEP.format(rho=rho)].configs} == {1.0}
    for name in borders.MODELS:
        assert {c.train.weight_decay for c in declared[name].configs} == {preset.ablation_lambda}

    def load(sweep, preset, *, device, progress):  # every run's final clean accuracy tells its λ and ρ apart
        lams = preset.lambdas if sweep.name == borders.LAMBDA_SWEEP else (
            (preset.ablation_lambda,) if sweep.name in borders.MODELS else (preset.rho_lambda,))
        return pd.DataFrame([{**r, "lam": lam, "seed": s, "clean_acc": lam / 10} for lam in lams for s in SEEDS
                             for r in _trajectory(preset.epochs * 3, True)])

    monkeypatch.setattr(borders, "_load", load)
    monkeypatch.setattr(borders.plan, "check_data", lambda *a, **k: None)
    runs = borders.run(preset, None, progress=False)
    assert set(runs.sum_b.lam) == {1.0}  # every ρ's cell ran at rho_lambda, the ρ = 0.95 one read from A's λ = 1 runs
    assert set(runs.sum_b.rho) == set(preset.rhos) and (runs.sum_b.final_clean_acc == 0.1).all()
    cells = borders.phase(runs).set_index(["rho", "lam"]).index
    assert (borders.RHO_A, 1.0) in cells and (0.5, 1.0) in cells and (0.5, borders.LAMBDA_B) not in cells


def test_claims_are_declared_once_with_the_shared_predictions():
    claims = borders.CHAPTER.claims
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids))
    assert ids == ["P1", "P2", "T2-2", "T2-3", "P3", "P3b", "T2-4", "B1", "F2", "P4", "F4b", "F4c", "VH", "PH1",
                   "AB1", "AB2", "AB3", "P6", "P5", "T2-5", "A5", "F1m", "PH2", "HW", "BN-σ"]
    assert "T2-1" not in ids and "T2-6" not in ids  # they are P2 and P6
    for pid in predictions.PREDICTIONS:
        ours, shared = borders.CHAPTER.claim(pid).spec, predictions.spec(pid, borders.DOMAIN)
        assert ours == shared  # P4 too: the shared rule counts runs as the unit
    assert sum(bool(c.spec.cell) for c in claims) == len(predictions.PREDICTIONS)  # one row per Table 3 cell
    for c in claims:
        assert c.spec.source in SOURCES and "[" in c.spec.paper  # the paper's value keeps its source tag
        assert c.where and c.test  # the chapter's opening table (`overview_markdown`) shows both
    assert borders.CHAPTER.claim("T2-5").spec.rule.null


def test_sweeps_are_named_by_the_module_constants():
    preset = borders.PRESETS["smoke"]
    names = [s.name for s in borders.CHAPTER.sweeps("smoke")]
    # no phase-diagram extras at smoke scale; ρ = 0.95 at λ = 0.1 is the λ sweep's cell, read there
    assert names == ([borders.LAMBDA_SWEEP] + [borders.RHO_SWEEP.format(rho=rho) for rho in preset.rhos
                                               if rho != borders.RHO_A] + list(borders.MODELS))
    # the labels the planner and the progress bars show
    assert borders.LAMBDA_SWEEP == "λ sweep" and borders.RHO_SWEEP.format(rho=0.5) == "ρ = 0.5"


# ------------------------------------------------------------------------------------- synthetic summaries

def _sum_a(clean_slope=-0.05, decay=lambda lam: 10 * np.log10(lam) + 30, seeds=SEEDS):
    rows = []
    for s in seeds:
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
             "final_shortcut_acc": 0.4 + 0.6 * j / 3, "regime": "intermediate", "lam": 0.1,
             "V_peak": 1000.0, "V_final": 1000.0 / (1.2 + j)}
            for s in SEEDS for j, rho in enumerate(RHOS)]
    return pd.DataFrame(rows)


PAPER_DECAY = {"SimpleCNN": 10.0, "ResNet18 + BN": 66.0, "ResNet18 + GN": 67.0, "ResNet18 (no norm)": 20.0}
PAPER_PEAK = {"SimpleCNN": 55.0, "ResNet18 + BN": 50.0, "ResNet18 + GN": 55.0, "ResNet18 (no norm)": 60.0}


def _sum_abl(order=("ResNet18 + BN", "ResNet18 (no norm)", "SimpleCNN", "ResNet18 + GN"), decay=None, peak=None):
    acc = dict(zip(order, (0.78, 0.70, 0.62, 0.50)))
    decay, peak = decay or PAPER_DECAY, peak or PAPER_PEAK
    return pd.DataFrame([{"model": m, "seed": s, "final_clean_acc": acc[m] + 0.01 * s, "decay_pct": decay[m] + s,
                          "peak_step": peak[m] + s} for m in borders.MODELS for s in SEEDS])


CPU_BUDGET = 1.134  # Σₛηₛ of a 12-epoch, 63-step cpu design (an earlier preset): the band then holds λ = 3, 10, 30


def _runs(sum_a=None, sum_b=None, sum_abl=None, runs_a=None, budget=CPU_BUDGET):
    empty = pd.DataFrame()
    return borders.BorderRuns(empty if runs_a is None else runs_a, _sum_a() if sum_a is None else sum_a, empty,
                              _sum_b() if sum_b is None else sum_b, empty,
                              _sum_abl() if sum_abl is None else sum_abl, budget=budget)


def _verdict(cid, runs):
    return borders.CHAPTER.claim(cid).judge(runs).verdict


def test_lambda_sweep_claims_on_a_paper_like_table():
    runs = _runs()
    for cid in ("P1", "P2", "T2-3", "P3", "P4"):
        assert _verdict(cid, runs) == REPRODUCED, cid


def test_peak_then_decay_is_read_in_decay_budget_units():
    # λΣη of the paper's λ = 0.05 … 1 (≈ 2 … 39): at the cpu budget the band is λ = 3, 10, 30
    assert borders.T22_BAND == pytest.approx((0.05 * 39.1, 39.1), rel=1e-3)
    band = borders.t22_band(_runs())
    assert sorted(_sum_a().lam[band].unique()) == [3.0, 10.0, 30.0]
    # every band run decays: 18 runs (6 seeds) put the Wilson interval above 0.8; 9 runs (3 seeds) cannot
    six = _sum_a(seeds=range(6))
    assert _verdict("T2-2", _runs(sum_a=six)) == REPRODUCED
    assert _verdict("T2-2", _runs()) == INCONCLUSIVE
    assert statistics.runs_needed(borders.T22_MIN_SHARE) == 16
    # a λ below the band (here 1: the paper's ≈ 0.03) that does not decay does not count ...
    below = six.assign(decay_pct=lambda d: d.decay_pct.where(d.lam != 1.0, 0.0))
    assert _verdict("T2-2", _runs(sum_a=below)) == REPRODUCED
    # ... but two band λ's without decay are a failure ("for λ ≥ 0.05" means every such λ)
    two = six.assign(decay_pct=lambda d: d.decay_pct.where(~d.lam.isin((10.0, 30.0)), 0.0))
    assert _verdict("T2-2", _runs(sum_a=two)) == NOT_REPRODUCED
    # without a λ in the band (the budget unknown) the claim is not testable here
    row = borders.CHAPTER.claim("T2-2").judge(_runs(budget=float("nan")))
    assert row.verdict == NOT_TESTABLE and row.untested == NOT_AT_THIS_SCALE


def test_p3b_asks_for_an_intermediate_optimum():
    # the paper-like table (clean accuracy falls with λ) has its optimum at the weakest λ, as NHT's own Fig. 1
    assert _verdict("P3b", _runs()) == NOT_REPRODUCED
    peaked = _sum_a().assign(final_clean_acc=lambda d: np.where(d.regime == "intermediate", 0.6, 0.4) + 0.01 * d.seed)
    assert _verdict("P3b", _runs(sum_a=peaked)) == REPRODUCED
    none = peaked.assign(regime=lambda d: np.where(d.lam < 3, "weak", "strong"))
    assert _verdict("P3b", _runs(sum_a=none)) == INCONCLUSIVE  # no intermediate run: no optimum to read


def test_p3_needs_a_falling_clean_accuracy():
    assert _verdict("P3", _runs(sum_a=_sum_a(clean_slope=+0.05))) == NOT_REPRODUCED  # the sign matters


def test_no_decay_is_not_a_peak_then_decay():
    flat = _sum_a(decay=lambda lam: 0.0).assign(decay_pct=0.0)
    assert _verdict("T2-2", _runs(sum_a=flat)) == NOT_REPRODUCED


def test_p4_takes_the_run_as_unit_and_needs_intermediate_runs():
    assert borders.CHAPTER.claim("P4").estimate(_runs()).unit == "runs"
    swapped = _sum_a().assign(**{"decay_pct:head": 5.0, "decay_pct:conv1": 20.0})  # conv1 contracts more
    assert _verdict("P4", _runs(sum_a=swapped)) == NOT_REPRODUCED
    two_of_three = _sum_a().assign(**{"decay_pct:head": lambda d: np.where(d.lam == 10.0, 1.0, 20.0)})
    assert _verdict("P4", _runs(sum_a=two_of_three)) == INCONCLUSIVE  # 6 of 9 runs: [0.35, 0.88]
    none = _sum_a().assign(regime=lambda d: np.where(d.lam < 3, "weak", "strong"))
    row = borders.CHAPTER.claim("P4").judge(_runs(sum_a=none))
    assert row.verdict == INCONCLUSIVE and row.n == 0 and "no intermediate run" in row.note


def _layer_runs_a(total_slope=+5.0, ratio_slope=-0.1):
    """Run tables of A for λ = 1, 3, 10 × 3 seeds: the head peaks at epoch 3 and contracts; the total norm changes by
    `total_slope` per epoch after it; conv1 grows, so head / conv1 falls when ratio_slope < 0."""
    rows = []
    for s in SEEDS:
        for lam in (1.0, 3.0, 10.0):
            for e in range(0, 13):
                head = 3.0 + e if e <= 3 else 6.0 - 0.2 * (e - 3)
                conv1 = head / (1.0 + ratio_slope * (e - 3)) if e >= 3 else head
                rows.append({"lam": lam, "seed": s, "epoch": e, "norm_sq": 100.0 + total_slope * e,
                             "norm_sq:head": head, "norm_sq:conv1": conv1})
    return pd.DataFrame(rows)


def test_fig4_total_norm_and_head_ratio():
    runs_a = _layer_runs_a()
    summary = _sum_a().assign(T_head_peak=3.0)
    summary = summary[summary.lam.isin((1.0, 3.0, 10.0))]
    assert _verdict("F4b", _runs(sum_a=summary, runs_a=runs_a)) == REPRODUCED  # 9 of 9 runs: [0.70, 1]
    assert _verdict("F4c", _runs(sum_a=summary, runs_a=runs_a)) == REPRODUCED
    shrinking = _layer_runs_a(total_slope=-5.0, ratio_slope=+0.1)  # the total falls with the head, the ratio rises
    assert _verdict("F4b", _runs(sum_a=summary, runs_a=shrinking)) == NOT_REPRODUCED
    assert _verdict("F4c", _runs(sum_a=summary, runs_a=shrinking)) == NOT_REPRODUCED
    suppressed = summary.assign(regime="strong")  # a norm suppressed from the first epoch is not Fig. 4's run
    assert borders.CHAPTER.claim("F4b").judge(_runs(sum_a=suppressed, runs_a=runs_a)).n == 0


def test_norm_gap_grows_with_rho_on_transitioned_runs():
    assert _verdict("F2", _runs()) == REPRODUCED  # log V_peak/V_final rises with ρ in every seed
    falling = _sum_b().assign(V_final=lambda d: 1000.0 / (5.0 - d.rho * 3))
    assert _verdict("F2", _runs(sum_b=falling)) == NOT_REPRODUCED
    stuck = _sum_b().assign(regime="weak")  # no ρ transitions: no V_sc / V_st to read
    assert _verdict("F2", _runs(sum_b=stuck)) == INCONCLUSIVE


def test_the_norm_hierarchy_needs_an_arm_this_book_lacks():
    row = borders.CHAPTER.claim("VH").judge(_runs())
    assert row.verdict == NOT_TESTABLE and row.untested == NOT_AT_THIS_SCALE and "without borders" in row.rule


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


def test_ablation_decay_needs_the_printed_strength_for_bn_and_gn():
    weak = {m: 30.0 for m in borders.MODELS}  # every model peaks and decays, BN and GN far below 66–67 %
    assert _verdict("AB2", _runs(sum_abl=_sum_abl(decay=weak))) == PARTLY
    none = {m: 0.0 for m in borders.MODELS}
    assert _verdict("AB2", _runs(sum_abl=_sum_abl(decay=none))) == NOT_REPRODUCED


def test_bn_peaks_earlier_only_where_both_norms_peak():
    assert _verdict("AB3", _runs()) == REPRODUCED  # 60 vs 50 in every seed
    later = {**PAPER_PEAK, "ResNet18 + BN": 70.0}
    assert _verdict("AB3", _runs(sum_abl=_sum_abl(peak=later))) == NOT_REPRODUCED
    growing = _sum_abl().assign(decay_pct=lambda d: d.decay_pct.where(d.model != "ResNet18 (no norm)", 0.0))
    row = borders.CHAPTER.claim("AB3").judge(_runs(sum_abl=growing))  # a norm that never decays has no peak
    assert row.verdict == INCONCLUSIVE and row.n == 0


def test_phase_claim_not_testable_without_the_full_grid():
    row = borders.CHAPTER.claim("PH1").judge(_runs())
    assert row.verdict == NOT_TESTABLE and row.untested == NOT_AT_THIS_SCALE and "7 × 4" in row.note


def test_p6_is_a_measured_failure():
    linear = _sum_a()  # T grows linearly in the grid index, not in 1/λ: the law fails
    assert _verdict("P6", _runs(sum_a=linear)) == REPRODUCED
    law = linear.assign(T_head_peak=lambda d: 5.0 / d.lam + 1.0 + 0.001 * d.seed)
    assert _verdict("P6", _runs(sum_a=law)) == NOT_REPRODUCED
    at_chance = linear.assign(final_clean_acc=lambda d: 0.1 + 0.01 * d.seed)  # nothing learned: no power
    row = borders.CHAPTER.claim("P6").judge(_runs(sum_a=at_chance))
    assert row.verdict == INCONCLUSIVE and "FAILED" in row.note and "integer epoch" in row.note


def test_reproducibility_is_a_null_claim_with_a_control():
    close = _sum_a().assign(final_clean_acc=lambda d: 0.45 + 0.002 * d.seed)  # far above chance, sd 0.2 points
    assert _verdict("T2-5", _runs(sum_a=close)) == REPRODUCED  # CI of the sd up to 1.3 points: inside ±5
    one_point = _runs()  # sd 1 point: with 3 seeds its chi-square CI reaches 6.3 points, beyond the margin
    assert _verdict("T2-5", one_point) == INCONCLUSIVE
    at_chance = _runs(sum_a=_sum_a().assign(final_clean_acc=lambda d: 0.1 + 0.001 * d.seed))
    assert _verdict("T2-5", at_chance) == INCONCLUSIVE  # seeds at chance agree trivially: the control fails
    spread = _runs(sum_a=_sum_a().assign(final_clean_acc=lambda d: 0.5 + 0.1 * d.seed))
    # seeds 10 points apart: the chi-square interval of the sd (0.052 to 0.63) lies beyond the 5-point limit
    assert _verdict("T2-5", spread) == NOT_REPRODUCED
    assert statistics.seeds_needed(borders.PAPER_T25_SD, borders.T25_LIMIT) == 8  # the paper's sd 2.3 needs 8 seeds to pass the limit
    assert "8 at the paper's" in borders.CHAPTER.claim("T2-5").judge(one_point).note


# -------------------------------------------------------------------------- regimes read the behaviour too

def _trajectory(epochs, reliance_falls):
    """A run whose norm peaks at epoch 4 and decays 10 %; clean accuracy flat at chance; the shortcut reliance stays
    1 (ρ = 1: a shortcut the model cannot leave) or falls to 0.5 after the peak."""
    rows = []
    for e in range(epochs + 1):
        norm = 100.0 + 25 * e if e <= 4 else 200.0 - 20.0 * (e - 4) / (epochs - 4)
        reliance = 1.0 if not reliance_falls or e <= 4 else 0.5
        rows.append({"step": e, "epoch": e, "norm_sq": norm, "clean_acc": 0.1, "coloured_acc": 0.9,
                     "shortcut_acc": reliance, "train_acc": 0.9, "diverged_step": np.nan,
                     **{f"norm_sq:{layer}": norm / 7 for layer in (*borders.LAYERS, "net.head")}})
    return rows


@pytest.mark.parametrize("reliance_falls", [False, True])
def test_every_summary_of_run_classifies_by_norm_and_behaviour(monkeypatch, reliance_falls):
    preset = borders.PRESETS["smoke"]

    def load(sweep, preset, *, device, progress):
        lams = preset.lambdas if sweep.name == borders.LAMBDA_SWEEP else (borders.LAMBDA_B,)
        rows = [{**r, "lam": lam, "seed": s} for lam in lams for s in SEEDS
                for r in _trajectory(preset.epochs * 3, reliance_falls)]
        return pd.DataFrame(rows)

    monkeypatch.setattr(borders, "_load", load)
    monkeypatch.setattr(borders.plan, "check_data", lambda *a, **k: None)
    runs = borders.run(preset, None, progress=False)
    for summary in (runs.sum_a, runs.sum_b, runs.sum_abl):
        assert (summary.norm_regime == "intermediate").all()  # the norm alone peaks and decays 10 %
        # ρ = 1's negative control never reads intermediate; a run that leaves the border does
        assert (summary.regime == "intermediate").all() == reliance_falls
        assert not (summary.regime == "intermediate").any() or reliance_falls
    assert runs.budget == borders.decay_budget(preset)
