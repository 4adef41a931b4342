"""Chapter 4's module (nhtlib.chapters.celeba_waterbirds): presets, claim declarations and the per-seed estimates behind
its verdicts, on synthetic summary tables with known answers (nothing is trained). The S spectrum and NHT's Table 3
moved to chapter 6 (tests/test_book_synthesis.py)."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.analysis import statistics
from nhtlib.report import claims, predictions
from nhtlib.chapters import celeba_waterbirds as cw
from nhtlib.config import ConfigError
from nhtlib.report.verdicts import INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES, NotTested

SEEDS = (0, 1, 2)
C_LAMS = (0.001, 0.1, 1.0, 3.0)
W_LAMS = (1e-4, 1e-3, 0.01, 0.1, 0.3, 1.0, 3.0)


# ------------------------------------------------------------------------------------------- presets, claims

def test_presets_give_every_verdict_enough_seeds():
    assert set(cw.PRESETS) == {"smoke", "cpu", "paper"}
    for scale in ("cpu", "paper"):
        for p in (cw.PRESETS[scale].celeba, cw.PRESETS[scale].waterbirds):
            assert p.seeds >= MIN_UNITS
    cpu, paper = cw.PRESETS["cpu"], cw.PRESETS["paper"]
    assert set(cw.PAPER_CELEBA_LAMBDAS) <= set(cpu.celeba.lambdas) and set(cw.PAPER_WB_LAMBDAS) <= set(
        cpu.waterbirds.lambdas)
    assert paper.celeba.lambdas == cw.PAPER_CELEBA_LAMBDAS and paper.waterbirds.lambdas == cw.PAPER_WB_LAMBDAS
    assert paper.celeba_split == "official" and paper.real_waterbirds and paper.full_data


def test_presets_reject_bad_values():
    cpu = cw.PRESETS["cpu"]
    for bad in (dict(lambdas=(1.0, 0.1, 0.01)), dict(lambdas=(0.1, 1.0)), dict(lambdas=(0.0, 0.1, 1.0)),
                dict(seeds=0), dict(lr=0.0), dict(n_train=0), dict(image_size=2)):
        with pytest.raises(ConfigError):
            cpu.celeba.replace(**bad)
    with pytest.raises(ConfigError):
        cpu.replace(celeba_split="random")
    with pytest.raises(ConfigError):
        cpu.replace(waterbirds=cpu)


ORDER = ["C-P1", "C-P2", "C-P3", "C-P4", "C-L1", "C-P5", "C-P6", "W-P1", "W-P2", "W-D1", "W-P3", "W-P4", "W-P5",
         "W-P6"]  # the order the notebook records them in


def test_claims_are_declared_once_with_the_shared_predictions():
    specs = {c.id: c.spec for c in cw.CHAPTER.claims}
    assert list(specs) == ORDER and cw.CHAPTER.claims == cw.CLAIMS
    for cid, spec in specs.items():
        assert spec.id == cid and spec.source in SOURCES
    for pid in predictions.PREDICTIONS:
        assert specs[f"C-{pid}"] == predictions.spec(pid, "CelebA", prefix="C-")
        assert specs[f"W-{pid}"] == predictions.spec(pid, "Waterbirds", prefix="W-")
    assert {cid for cid, s in specs.items() if s.rule.null} == {"W-P3", "W-P4"}
    assert {cid for cid, s in specs.items() if isinstance(s.rule, NotTested)} == {"C-P6", "W-P6"}
    for cid in ("C-L1", "W-D1"):
        assert "[paper" in specs[cid].paper  # the paper's value keeps its source tag
    for c in cw.CHAPTER.claims:  # the opening table is made from the declarations: every row says where and how
        assert c.where and c.test
    overview = claims.overview_markdown(cw.CHAPTER.claims)
    assert all(f"**{cid}**" in overview for cid in ORDER)


def test_waterbirds_source(tmp_path):
    cpu, paper = cw.PRESETS["cpu"], cw.PRESETS["paper"]
    assert cw.resolve_waterbirds_source("auto", tmp_path, cpu) == "cub_standin"
    assert cw.resolve_waterbirds_source("auto", tmp_path, paper) == "waterbirds"  # its loader names what is missing
    (tmp_path / "waterbirds").mkdir()
    (tmp_path / "waterbirds" / "metadata.csv").write_text("img_id\n")
    assert cw.resolve_waterbirds_source("auto", tmp_path, cpu) == "waterbirds"
    assert cw.resolve_waterbirds_source("cub_standin", tmp_path, cpu) == "cub_standin"
    with pytest.raises(ConfigError):
        cw.resolve_waterbirds_source("places", tmp_path, cpu)


# ------------------------------------------------------------------------------------- synthetic summaries

def summary(lams, seeds=SEEDS, **columns):
    """One row per (λ, seed); columns: {name: value or f(i, lam, seed)} (i: the λ's index) over the defaults."""
    default = {
        "V_final": lambda i, lam, s: 1000.0 / (1 + i) + s, "V_peak": 1100.0, "peak_step": 5.0, "decay_pct": 0.0,
        "regime": "weak", "final_test_worst_group_acc": 0.6, "final_test_mean_group_acc": 0.75,
        "final_test_acc": 0.8, "final_reliance": 0.1, "peak_step:head": 3.0, "peak_step:conv1": 6.0,
        "decay_pct:head": 20.0, "decay_pct:conv1": 5.0, "T_head_peak": np.nan, "S": np.nan, "pooled": False,
        "head_conv1_ratio": lambda i, lam, s: 0.5 + i + 0.01 * s, "learned": True}
    default.update(columns)
    rows = [{"lam": lam, "seed": s, **{k: v(i, lam, s) if callable(v) else v for k, v in default.items()}}
            for s in seeds for i, lam in enumerate(lams)]
    return pd.DataFrame(rows)


def runs_of(c=None, w=None, wb_name=cw.STANDIN):
    def domain_runs(name, table3, s):
        preset = cw.PRESETS["cpu"].celeba if table3 == cw.CELEBA else cw.PRESETS["cpu"].waterbirds
        domain = cw.Domain(name, table3, preset, None, None, ("y0", "y1"), ("a0", "a1"))
        return cw.DomainRuns(domain, pd.DataFrame(), s, 10, 0.5)

    return cw.ChapterRuns(domain_runs(cw.CELEBA, cw.CELEBA, summary(C_LAMS) if c is None else c),
                          domain_runs(wb_name, cw.WATERBIRDS, summary(W_LAMS) if w is None else w))


def judge(cid, runs):
    return cw.CHAPTER.claim(cid).judge(cw.analyse(runs))


def verdict(cid, runs):
    return judge(cid, runs).verdict


def estimate(cid, runs):
    """(estimate, positive control or None, note) of claim `cid` on `runs`."""
    claim, analysed = cw.CHAPTER.claim(cid), cw.analyse(runs)
    return (claim.estimate(analysed), claim.control(analysed) if claim.control else None,
            claim.note(analysed) if claim.note else "")


def test_the_chapter_judges_every_claim_in_order():
    rows = cw.CHAPTER.judge(cw.analyse(runs_of()))
    assert [r.id for r in rows] == ORDER
    assert rows[ORDER.index("C-P5")].note.endswith(cw.UNVERIFIED)  # P5's note says its S is ours


def test_p1_per_seed_and_at_least_three_seeds():
    assert verdict("C-P1", runs_of()) == REPRODUCED
    rising = summary(C_LAMS, V_final=lambda i, lam, s: 100.0 * (1 + i))
    assert verdict("C-P1", runs_of(c=rising)) == NOT_REPRODUCED
    two = summary(C_LAMS, seeds=(0, 1))  # a perfect fall on two seeds decides nothing
    assert verdict("C-P1", runs_of(c=two)) == INCONCLUSIVE
    assert estimate("C-P1", runs_of(c=two))[0].n == 2


def test_c_p3_needs_a_falling_worst_group():
    falling = summary(C_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.9 - 0.05 * i + 0.001 * s)
    assert verdict("C-P3", runs_of(c=falling)) == REPRODUCED
    rising = summary(C_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.6 + 0.05 * i + 0.001 * s)
    assert verdict("C-P3", runs_of(c=rising)) == NOT_REPRODUCED


FLAT = {0: (0.60, 0.62, 0.59, 0.61, 0.58, 0.62, 0.60), 1: (0.61, 0.60, 0.62, 0.59, 0.61, 0.60, 0.62),
        2: (0.62, 0.59, 0.60, 0.62, 0.60, 0.59, 0.61)}  # per-seed Spearman ρ(λ, WG) of −0.04, 0.15, −0.17


def test_w_p3_is_a_null_claim_with_a_positive_control():
    flat = {"final_test_worst_group_acc": lambda i, lam, s: FLAT[s][i]}
    value, control, _ = estimate("W-P3", runs_of(w=summary(W_LAMS, **flat)))
    assert value.values == pytest.approx([statistics.spearman(W_LAMS, FLAT[s]) for s in SEEDS])
    assert control.value == pytest.approx(0.25)  # mean-over-groups accuracy 0.75 minus chance
    assert verdict("W-P3", runs_of(w=summary(W_LAMS, **flat))) == REPRODUCED
    # the same flat worst group on models that learned nothing (every group-mean at chance): no reproduction
    dead = summary(W_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.001 * FLAT[s][i],
                   final_test_mean_group_acc=lambda i, lam, s: 0.5 + 0.001 * s, final_test_acc=0.72)
    assert verdict("W-P3", runs_of(w=dead)) == INCONCLUSIVE
    ordered = summary(W_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.3 + 0.05 * i + 0.001 * s)
    assert verdict("W-P3", runs_of(w=ordered)) == NOT_REPRODUCED  # a λ that orders the worst group refutes it


def test_w_p4_needs_contracting_norms():
    half = summary(W_LAMS, decay_pct=lambda i, lam, s: 10.0 if i >= 5 else 0.0,  # two decaying runs per seed
                   **{"peak_step:head": lambda i, lam, s: 3.0 if i == 5 else 8.0})  # one of them head-first
    value, control, _ = estimate("W-P4", runs_of(w=half))
    assert value.value == pytest.approx(0.0) and control.value == pytest.approx(10.0)
    assert verdict("W-P4", runs_of(w=half)) == REPRODUCED
    assert verdict("W-P4", runs_of(w=summary(W_LAMS))) == INCONCLUSIVE  # nothing decays: no hierarchy to look for
    first = half.assign(**{"peak_step:head": 1.0})  # every decaying run head-first: a hierarchy, the null fails
    assert verdict("W-P4", runs_of(w=first)) == NOT_REPRODUCED


def test_c_p4_and_the_layer_ratio():
    inter = summary(C_LAMS, regime=lambda i, lam, s: "intermediate" if i in (1, 2) else "weak", decay_pct=5.0)
    assert verdict("C-P4", runs_of(c=inter)) == REPRODUCED  # head peaks first and contracts more
    assert verdict("C-P4", runs_of()) == INCONCLUSIVE  # no intermediate run: no value
    assert verdict("C-L1", runs_of()) == REPRODUCED
    # the largest λ collapsed (not learned) with a tiny ratio: left out, the learned runs still rise
    collapsed = summary(C_LAMS, learned=lambda i, lam, s: i < 3,
                        head_conv1_ratio=lambda i, lam, s: 0.01 if i == 3 else 0.5 + i)
    value, _, note = estimate("C-L1", runs_of(c=collapsed))
    assert value.value == pytest.approx(1.0) and value.n == 3 and note.startswith("3 run(s) left out")
    falling = summary(C_LAMS, head_conv1_ratio=lambda i, lam, s: 3.0 - i + 0.01 * s)
    assert verdict("C-L1", runs_of(c=falling)) == NOT_REPRODUCED


def test_w_d1_weak_then_decaying():
    paper_like = summary(W_LAMS, decay_pct=lambda i, lam, s: 0.0 if lam <= 0.1 else 10.0 * i,
                         regime=lambda i, lam, s: "weak" if lam <= 0.1 else "intermediate")
    parts = estimate("W-D1", runs_of(w=paper_like))[0]
    assert parts["weak for λ ≤ 0.1"].value == 1.0 and parts["decays for λ ≥ 0.3"].value == 1.0
    assert verdict("W-D1", runs_of(w=paper_like)) == REPRODUCED
    assert verdict("W-D1", runs_of()) == PARTLY  # weak everywhere: nothing decays


def test_p5_reads_the_pooled_runs():
    scored = summary(C_LAMS, S=lambda i, lam, s: -0.1 + 0.01 * s, pooled=lambda i, lam, s: i in (1, 2))
    value = estimate("C-P5", runs_of(c=scored))[0]
    assert value.value == pytest.approx(-0.09) and value.n == 3
    assert verdict("C-P5", runs_of(c=scored)) == REPRODUCED  # S well below 0.5: the paper's ×
    clean = scored.assign(S=lambda d: 0.9 + 0.01 * d.seed)
    assert verdict("C-P5", runs_of(c=clean)) == NOT_REPRODUCED


def test_p6_is_not_testable_even_where_the_law_fits():
    law = summary(W_LAMS, T_head_peak=lambda i, lam, s: 5.0 / lam + 1.0 + 0.01 * s)
    for cid, runs in (("C-P6", runs_of()), ("W-P6", runs_of(w=law))):
        row = judge(cid, runs)
        assert row.verdict == NOT_TESTABLE and "not tested" in row.rule
    assert estimate("W-P6", runs_of(w=law))[0].value == pytest.approx(1.0)  # measured, for information


def test_domain_table_sets_the_paper_beside_ours():
    runs = runs_of()
    table = cw.domain_table(runs.celeba)
    assert list(table.index) == list(C_LAMS) and (table.seeds == 3).all()
    assert table.loc[0.001, "paper V_final"] == 20198 and np.isnan(table.loc[3.0, "paper V_final"])
    assert table.loc[0.1, "λΣη"] == pytest.approx(0.05) and table.loc[0.1, "WG %"] == pytest.approx(60.0)
    assert cw.domain_table(runs.waterbirds).loc[1.0, "paper decay %"] == pytest.approx(56.3)
