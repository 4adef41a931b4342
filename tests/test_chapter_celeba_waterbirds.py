"""Chapter 4's module (nhtlib.chapters.celeba_waterbirds): presets, claim declarations and the per-seed estimates behind
its verdicts, on synthetic summary tables with known answers (nothing is trained). The S spectrum and NHT's Table 3
moved to chapter 6 (tests/test_book_synthesis.py)."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import claims, predictions
from nhtlib.chapters import celeba_waterbirds as cw
from nhtlib.config import ConfigError
from nhtlib.report import verdicts
from nhtlib.report.verdicts import (INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES,
                                    NotTested)

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


def test_the_simplecnn_runs_at_the_presets_width_and_the_paper_at_the_papers_model():
    # Catches: cnn_width not reaching the model, the paper scale training a narrower net than the paper's.
    paper = cw.PRESETS["paper"]
    assert paper.celeba.cnn_width == paper.waterbirds.cnn_width == 1.0
    for p in (cw.PRESETS["cpu"].celeba, cw.PRESETS["cpu"].waterbirds):
        sweep = cw.domain_sweep("x", cw.domain_tasks(cw.PRESETS["smoke"], None)["celeba"], p, 100)
        assert {c.model.width for c in sweep.configs} == {p.cnn_width}
    with pytest.raises(ConfigError):
        cw.PRESETS["cpu"].celeba.replace(cnn_width=-1.0)


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


ORDER = ["C-P1", "C-P2", "C-P3", "C-P4", "C-L1", "C-V1", "C-A1", "C-A2", "C-A3", "C-P5", "C-P6", "W-P1", "W-P2",
         "W-D1", "W-G1", "W-P3", "W-P4", "W-P5", "W-P6"]  # the order the notebook records them in
STRICTER = {"C-P3"}  # the chapter replaces the shared rule (learned runs and a paired drop), keeping the paper's cell


def test_claims_are_declared_once_with_the_shared_predictions():
    specs = {c.id: c.spec for c in cw.CHAPTER.claims}
    assert list(specs) == ORDER and cw.CHAPTER.claims == cw.CLAIMS
    for cid, spec in specs.items():
        assert spec.id == cid and spec.source in SOURCES
    for pid in predictions.PREDICTIONS:
        for prefix, domain in (("C-", "CelebA"), ("W-", "Waterbirds")):
            shared = predictions.spec(pid, domain, prefix=prefix)
            if prefix + pid in STRICTER:  # the same claim and cell, a stricter rule
                assert specs[prefix + pid].replace(rule=shared.rule) == shared
            else:
                assert specs[prefix + pid] == shared
    assert {cid for cid, s in specs.items() if s.rule.null} == {"W-P3", "W-P4", "C-P5", "W-P5", "C-A3"}
    assert {cid for cid, s in specs.items() if isinstance(s.rule, NotTested)} == {"C-P6", "W-P6", "W-G1"}
    cells = [s.cell for s in specs.values() if s.cell]
    assert len(cells) == len(set(cells)) == 12  # one row per Table 3 cell
    for cid in ("C-L1", "W-D1", "C-V1", "C-A1", "C-A2", "C-A3", "W-G1"):
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
        "final_test_acc": 0.8, "final_test_conflicting_acc": 0.7, "final_reliance": 0.1, "peak_step:head": 3.0,
        "peak_step:conv1": 6.0, "epochs": 10.0, "wg_min_late": np.nan, "acc_jump_late": np.nan,
        "decay_pct:head": 20.0, "decay_pct:conv1": 5.0, "T_head_peak": np.nan, "S": np.nan, "pooled": False,
        "head_conv1_ratio": lambda i, lam, s: 0.5 + i + 0.01 * s, "learned": True}
    default.update(columns)
    rows = [{"lam": lam, "seed": s, **{k: v(i, lam, s) if callable(v) else v for k, v in default.items()}}
            for s in seeds for i, lam in enumerate(lams)]
    return pd.DataFrame(rows)


def runs_of(c=None, w=None, wb_name=cw.STANDIN, budget=0.5):
    """Both sweeps from their summaries (defaults: `summary`), every run with the decay budget Σηₛ = `budget`."""
    def domain_runs(name, table3, s):
        preset = cw.PRESETS["cpu"].celeba if table3 == cw.CELEBA else cw.PRESETS["cpu"].waterbirds
        domain = cw.Domain(name, table3, preset, None, None, ("y0", "y1"), ("a0", "a1"))
        return cw.DomainRuns(domain, pd.DataFrame(), s, 10, budget)

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
    assert cw.UNVERIFIED in rows[ORDER.index("C-P5")].note  # P5's note says its S is ours


def test_p1_per_seed_and_at_least_three_seeds():
    assert verdict("C-P1", runs_of()) == REPRODUCED
    rising = summary(C_LAMS, V_final=lambda i, lam, s: 100.0 * (1 + i))
    assert verdict("C-P1", runs_of(c=rising)) == NOT_REPRODUCED
    two = summary(C_LAMS, seeds=(0, 1))  # a perfect fall on two seeds decides nothing
    assert verdict("C-P1", runs_of(c=two)) == INCONCLUSIVE
    assert estimate("C-P1", runs_of(c=two))[0].n == 2


def test_c_p3_needs_a_falling_worst_group_beyond_seed_noise_on_runs_that_learned():
    falling = summary(C_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.9 - 0.05 * i + 0.001 * s)
    assert verdict("C-P3", runs_of(c=falling)) == REPRODUCED
    rising = summary(C_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.6 + 0.05 * i + 0.001 * s)
    assert verdict("C-P3", runs_of(c=rising)) == NOT_REPRODUCED
    # a monotone fall in every seed whose size (0.1 to 20 points) is within the seeds' noise: not decided
    noisy = summary(C_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.9 - (0.0003, 0.0006, 0.07)[s] * i)
    parts = estimate("C-P3", runs_of(c=noisy))[0]
    assert parts["falls"].value == pytest.approx(-1.0)
    assert verdict("C-P3", runs_of(c=noisy)) == INCONCLUSIVE
    # the largest λ collapsed (did not learn): left out, so its low worst group cannot make the fall
    collapsed = summary(C_LAMS, learned=lambda i, lam, s: i < 3,
                        final_test_worst_group_acc=lambda i, lam, s: 0.0 if i == 3 else 0.8 + 0.01 * ((i + s) % 3))
    parts, _, note = estimate("C-P3", runs_of(c=collapsed))
    assert parts["drop beyond seed noise"].values == pytest.approx([-0.02, 0.01, 0.01])  # to λ = 1, not λ = 3
    assert verdict("C-P3", runs_of(c=collapsed)) != REPRODUCED and "3 run(s) left out" in note


def test_w_p3_is_a_one_sided_null_with_a_positive_control():
    flat = summary(W_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.6 + 0.01 * (i % 2) + 0.001 * s)
    value, control, _ = estimate("W-P3", runs_of(w=flat))
    assert value.values == pytest.approx([0.01, 0.01, 0.01])  # the largest gain over the smallest λ, per seed
    assert control.value == pytest.approx(0.25)  # mean-over-groups accuracy 0.75 minus chance
    assert verdict("W-P3", runs_of(w=flat)) == REPRODUCED
    # one-sided: a worst group that falls with λ (suppression) agrees with "no λ improves it"
    falling = summary(W_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.6 - 0.05 * i + 0.001 * s)
    assert verdict("W-P3", runs_of(w=falling)) == REPRODUCED
    # the same flat worst group on models that learned nothing (every group-mean at chance): no reproduction
    dead = flat.assign(final_test_mean_group_acc=lambda d: 0.5 + 0.001 * d.seed, learned=False)
    assert verdict("W-P3", runs_of(w=dead)) == INCONCLUSIVE
    gain = summary(W_LAMS, final_test_worst_group_acc=lambda i, lam, s: 0.3 + (0.08 if i == 3 else 0.0) + 0.001 * s)
    assert verdict("W-P3", runs_of(w=gain)) == NOT_REPRODUCED  # a λ that lifts the worst group 8 points refutes it
    # the smallest λ did not learn (worst group 0): it is no baseline, so its "gain" is not counted
    base_dead = flat.assign(learned=lambda d: d.lam > W_LAMS[0],
                            final_test_worst_group_acc=lambda d: d.final_test_worst_group_acc.where(d.lam > W_LAMS[0],
                                                                                                   0.0))
    assert verdict("W-P3", runs_of(w=base_dead)) == REPRODUCED


def test_w_p4_is_one_sided_with_runs_as_the_unit_and_a_layer_control():
    # two decaying runs per seed, conv1 contracting more than the head in both: no head first, P4 fails as the paper says
    conv1_first = summary(W_LAMS, decay_pct=lambda i, lam, s: 10.0 if i >= 5 else 0.0,
                          **{"decay_pct:head": 10.0, "decay_pct:conv1": 30.0})
    value, control, note = estimate("W-P4", runs_of(w=conv1_first))
    assert value.value == 0.0 and value.n == 6 and value.unit == "runs" and control.value == pytest.approx(30.0)
    assert verdict("W-P4", runs_of(w=conv1_first)) == REPRODUCED and "6 runs" in note
    # the head first in every decaying run (ties at the same epoch count as "no later"): a hierarchy, P4 holds
    head_first = conv1_first.assign(**{"decay_pct:head": 40.0, "peak_step:head": 1.0, "peak_step:conv1": 1.0})
    assert verdict("W-P4", runs_of(w=head_first)) == NOT_REPRODUCED
    # layers that barely contract (≤ 2 %): no order can be read, the control fails
    still = conv1_first.assign(**{"decay_pct:head": 1.0, "decay_pct:conv1": 2.0})
    assert verdict("W-P4", runs_of(w=still)) == INCONCLUSIVE
    assert verdict("W-P4", runs_of(w=summary(W_LAMS))) == INCONCLUSIVE  # nothing decays: no hierarchy to look for


def test_c_p4_and_the_layer_ratio():
    inter = summary(C_LAMS, regime=lambda i, lam, s: "intermediate" if i in (1, 2) else "weak", decay_pct=5.0)
    value = estimate("C-P4", runs_of(c=inter))[0]
    assert value.value == 1.0 and value.n == 6 and value.unit == "runs"
    assert verdict("C-P4", runs_of(c=inter)) == REPRODUCED  # head peaks first and contracts more
    row = judge("C-P4", runs_of())  # no intermediate run: P4 has nothing to read at this scale
    assert row.verdict == NOT_TESTABLE and row.untested == verdicts.NOT_AT_THIS_SCALE and "intermediate" in row.note
    assert verdict("C-L1", runs_of()) == REPRODUCED
    # the largest λ collapsed (not learned) with a tiny ratio: left out, the learned runs still rise
    collapsed = summary(C_LAMS, learned=lambda i, lam, s: i < 3,
                        head_conv1_ratio=lambda i, lam, s: 0.01 if i == 3 else 0.5 + i)
    value, _, note = estimate("C-L1", runs_of(c=collapsed))
    assert value.value == pytest.approx(1.0) and value.n == 3 and note.startswith("3 run(s) left out")
    falling = summary(C_LAMS, head_conv1_ratio=lambda i, lam, s: 3.0 - i + 0.01 * s)
    assert verdict("C-L1", runs_of(c=falling)) == NOT_REPRODUCED


def test_w_d1_reads_the_paper_lambdas_as_decay_budgets_and_all_as_nearly_every_run():
    paper = cw.paper_budget(cw.WATERBIRDS)
    five = tuple(range(5))  # 15 runs in a band: without an exception the share's 95 % CI starts at 0.80
    paper_like = summary(W_LAMS, seeds=five, decay_pct=lambda i, lam, s: 0.0 if lam <= 0.1 else 10.0 * i)
    parts = estimate("W-D1", runs_of(w=paper_like, budget=paper))[0]  # the paper's budget: its λ's as they are
    grows, decays = parts["grows (paper λ ≤ 0.1)"], parts["decays (paper λ ≥ 0.3)"]
    assert (grows.value, grows.n, decays.value, decays.n) == (1.0, 20, 1.0, 15) and grows.unit == "runs"
    assert verdict("W-D1", runs_of(w=paper_like, budget=paper)) == REPRODUCED
    # a sixth of the budget: the paper's λ = 0.3 is λ ≈ 1.8 here, so λ = 0.3 must still grow, and only λ = 3 decays
    small = runs_of(w=paper_like, budget=paper / 6)
    parts, _, note = estimate("W-D1", small)
    assert parts["grows (paper λ ≤ 0.1)"].n == 25 and parts["decays (paper λ ≥ 0.3)"].n == 5
    assert parts["grows (paper λ ≤ 0.1)"].value == pytest.approx(20 / 25) and "λ ∈ {3}" in note
    assert verdict("W-D1", small) != REPRODUCED  # "all" read strictly: the λ = 0.3 runs decay
    # one λ = 1 run whose norm does not decay: one exception among the 15 decaying-band runs is not "all"
    one_off = paper_like.assign(decay_pct=lambda d: d.decay_pct.where(~((d.lam == 1.0) & (d.seed == 0)), 1.0))
    assert estimate("W-D1", runs_of(w=one_off, budget=paper))[0]["decays (paper λ ≥ 0.3)"].low < cw.ALL_SHARE
    assert verdict("W-D1", runs_of(w=one_off, budget=paper)) == INCONCLUSIVE
    assert verdict("W-D1", runs_of(budget=paper)) == PARTLY  # every norm grows: nothing decays


def test_p5_reads_the_pooled_runs_with_a_control_that_s_is_defined():
    scored = summary(C_LAMS, S=lambda i, lam, s: -0.1 + 0.01 * s, pooled=lambda i, lam, s: i in (1, 2))
    value, control, _ = estimate("C-P5", runs_of(c=scored))
    assert value.value == pytest.approx(-0.09) and value.n == 3 and control.value == 1.0
    assert verdict("C-P5", runs_of(c=scored)) == REPRODUCED  # S well below 0.2: the paper's ×
    positive = scored.assign(S=lambda d: 0.35 + 0.01 * d.seed)  # a positive separation is no "S ≈ 0"
    assert verdict("C-P5", runs_of(c=positive)) == NOT_REPRODUCED
    # S defined in only one of the two pooled runs of each seed: the control fails, whatever S reads
    sparse = scored.assign(S=lambda d: d.S.where(d.lam == C_LAMS[1]))
    assert estimate("C-P5", runs_of(c=sparse))[1].value == 0.5
    assert verdict("C-P5", runs_of(c=sparse)) == INCONCLUSIVE


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


# --------------------------------------------------------------------- regimes: behaviour plus norm

def run_table(reliance, clean, *, epochs=10, lam=0.3, seed=0):
    """A synthetic run table (one row per epoch) whose ‖θ‖² rises to a peak at epoch 5 and then contracts 10 % (the
    norm-only rule's intermediate), with the given per-epoch spurious reliance and bias-conflicting accuracy; average
    accuracy rises from 0.6 to 0.8 throughout (the shortcut being learned raises it)."""
    e = np.arange(epochs + 1, dtype=float)
    norm = np.where(e <= 5, 100 + 10 * e, 150 - 3 * (e - 5))
    table = pd.DataFrame({"lam": lam, "seed": seed, "epoch": e, "step": e * 10, "norm_sq": norm,
                          "test_acc": 0.6 + 0.02 * e, "test_worst_group_acc": clean(e) - 0.1,
                          "test_mean_group_acc": clean(e) + 0.05, "test_conflicting_acc": clean(e),
                          "test_aligned_acc": 0.9, "test_spurious_reliance": reliance(e), "train_acc": 0.9,
                          "head_conv1_ratio": 1.0})
    for layer in (cw.HEAD, *cw.CONVS):
        table[f"norm_sq:{layer}"] = norm / 7
    return table


def test_a_contracting_norm_without_leaving_the_shortcut_is_never_intermediate():
    flat = cw.summarise(run_table(lambda e: 0.3 + 0 * e, lambda e: 0.55 + 0 * e))
    assert flat.norm_regime.iloc[0] == "intermediate"  # the norm alone would call it a transition
    assert flat.regime.iloc[0] == "weak"  # the shortcut persists: average accuracy rising 20 points does not count
    left = cw.summarise(run_table(lambda e: np.where(e <= 5, 0.5, 0.5 - 0.08 * (e - 5)), lambda e: 0.55 + 0 * e))
    assert left.regime.iloc[0] == "intermediate"  # reliance falls 0.4 after the norm peak
    gains = cw.summarise(run_table(lambda e: 0.3 + 0 * e, lambda e: np.where(e <= 5, 0.5, 0.5 + 0.03 * (e - 5))))
    assert gains.regime.iloc[0] == "intermediate"  # the bias-conflicting groups gain 15 points after the peak


def test_stand_in_rows_name_the_data_they_read():
    rows = {r.id: r for r in cw.CHAPTER.judge(cw.analyse(runs_of()))}
    for cid, row in rows.items():
        named = cw.STANDIN in row.statement and cw.STANDIN in row.note
        assert named == cid.startswith("W-")  # every Waterbirds row says it read the CUB stand-in
        if cid.startswith("W-") and row.cell:
            assert row.cell.startswith("Waterbirds/")  # ... and keeps NHT's Table 3 cell
    real = {r.id: r for r in cw.CHAPTER.judge(cw.analyse(runs_of(wb_name=cw.WATERBIRDS)))}
    assert "stand-in" not in real["W-P1"].statement and "stand-in" not in real["W-P1"].note


def test_paper_scale_claims_are_not_testable_in_a_short_run_and_tested_in_a_long_one():
    for cid in ("C-V1", "C-A1", "C-A2", "C-A3"):  # 10 epochs on Σηₛ = 0.5: none of them is at the paper's scale
        row = judge(cid, runs_of())
        assert row.verdict == NOT_TESTABLE and row.untested == verdicts.NOT_AT_THIS_SCALE and "paper" in row.note
    assert judge("W-G1", runs_of()).untested == verdicts.NO_EVIDENCE
    paper = cw.paper_budget(cw.CELEBA)
    lams = cw.PAPER_CELEBA_LAMBDAS
    long = summary(lams, epochs=100.0, V_final=lambda i, lam, s: (20198.0, 2971.0, 546.0)[i] * (1 + 0.01 * s),
                   final_test_acc=lambda i, lam, s: (0.909, 0.905, 0.902)[i] + 0.001 * s,
                   wg_min_late=lambda i, lam, s: 0.87 + 0.001 * s, acc_jump_late=lambda i, lam, s: 0.01 + 0.001 * s)
    runs = runs_of(c=long, budget=paper)
    assert estimate("C-V1", runs)[0].value == pytest.approx(20198 / 546)
    for cid in ("C-V1", "C-A1", "C-A2", "C-A3"):
        assert verdict(cid, runs) == REPRODUCED, cid
    jump = runs_of(c=long.assign(acc_jump_late=0.2), budget=paper)
    assert verdict("C-A3", jump) == NOT_REPRODUCED  # a sharp jump after epoch 20 at λ = 0.1: a delayed transition
    dead = runs_of(c=long.assign(final_test_mean_group_acc=0.5), budget=paper)
    assert verdict("C-A3", dead) == INCONCLUSIVE  # no jump on a model at chance says nothing
    assert verdict("C-A1", runs_of(c=long.assign(wg_min_late=0.80), budget=paper)) == NOT_REPRODUCED


def test_the_runs_that_left_the_shortcut_are_named_per_data_set():
    # Catches: Table 4.0 / the opening's line counting a run that kept its shortcut, or putting it on the wrong data set.
    stuck = run_table(lambda e: 0.3 + 0 * e, lambda e: 0.55 + 0 * e, seed=0)
    leaving = run_table(lambda e: np.where(e <= 5, 0.5, 0.5 - 0.08 * (e - 5)), lambda e: 0.55 + 0 * e, seed=1)

    def domain_runs(name, table3, table):
        preset = cw.PRESETS["cpu"].celeba if table3 == cw.CELEBA else cw.PRESETS["cpu"].waterbirds
        domain = cw.Domain(name, table3, preset, None, None, ("y0", "y1"), ("a0", "a1"))
        return cw.DomainRuns(domain, table, cw.summarise(table), 10, 0.5)

    runs = cw.ChapterRuns(domain_runs(cw.CELEBA, cw.CELEBA, stuck),
                          domain_runs(cw.STANDIN, cw.WATERBIRDS, pd.concat([stuck, leaving], ignore_index=True)))
    assert cw.left_table(runs.celeba).empty
    left = cw.left_tables(runs)
    assert list(left.index) == [(cw.STANDIN, 0.3, 1)]
    assert left["reliance at the peak"].iloc[0] == 0.5 and left["reliance final"].iloc[0] == pytest.approx(0.1)
    assert cw.left_line(runs).endswith(f"0 of 1 on {cw.CELEBA} and 1 of 2 on {cw.STANDIN} (λ = 0.3) (Table 4.0).")
    assert cw.left_line(cw.ChapterRuns(runs.celeba, runs.celeba)).startswith("No run leaves")
    assert cw.early_reliance(runs.waterbirds) == 0.4  # epoch 2: 0.3 and 0.5
