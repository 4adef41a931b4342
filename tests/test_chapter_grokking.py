"""Chapter 2's module (nhtlib.chapters.grokking): presets, NSDL's digitised numbers, the regime mapping, the Table 2
claims, the 200-step grid and the 1/λ fit — on hand-built run tables with known answers (no training)."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import predictions
from nhtlib.chapters import grokking
from nhtlib.config import ConfigError
from nhtlib.analysis.grok_times import grokking_summary, on_grid
from nhtlib.report.verdicts import (INCONCLUSIVE, MIN_UNITS, NO_EVIDENCE, NOT_AT_THIS_SCALE, NOT_REPRODUCED,
                                    NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES)

CPU = grokking.PRESETS["cpu"]
STEPS = np.arange(0, 5201, 100)
GROUPS = {"embedding": 0.9, "attention": 0.04, "ffn": 0.04, "norms": 0.001, "head": 0.019}


def trajectory(lam=1.0, seed=0, *, t_mem=750, t_grok=1750, v_mem=3900.0, c_inf=245.0, rho=0.9986, lr=1e-3,
               steps=STEPS, head_peak=None):
    """One run: train accuracy ≥ 0.99 from t_mem on, test accuracy from t_grok on (None: never); ‖θ‖² falls linearly
    from 13,500 to v_mem at t_mem, then as (v_mem − c_inf)·ρ^(t − t_mem) + c_inf (from 13,500 when it never memorises);
    per-group norms are fixed shares of it, except a head that peaks at `head_peak` when given."""
    s = steps.astype(float)
    if t_mem is None:  # never memorises: the norm decays from its initial value
        norm = (13500 - c_inf) * rho ** s + c_inf
    else:
        norm = np.where(s < t_mem, 13500 - (13500 - v_mem) * s / max(t_mem, 1),
                        (v_mem - c_inf) * rho ** (s - t_mem) + c_inf)
    table = pd.DataFrame({"weight_decay": lam, "lr": lr, "seed": seed, "step": steps, "norm_sq": norm,
                          "train_acc": np.where(t_mem is not None and s >= (t_mem or 0), 1.0, 0.3),
                          "test_acc": np.where(t_grok is not None and s >= (t_grok or 0), 0.995, 0.01),
                          "diverged_step": np.nan})
    for group, share in GROUPS.items():
        table[f"norm_sq:{group}"] = share * norm
    if head_peak is not None:
        table["norm_sq:head"] = 100 * np.exp(-np.abs(s - head_peak) / 100)
    return table


def nsdl_runs(times, preset=CPU.nsdl, **kw):
    """The runs at NSDL's settings from {(λ, seed): (t_mem, t_grok)}, analysed as the chapter does."""
    table = pd.concat([trajectory(lam, seed, t_mem=tm, t_grok=tg, **kw) for (lam, seed), (tm, tg) in times.items()],
                      ignore_index=True)
    return grokking.analyse_nsdl(table, preset)


def verdict(cid, runs, preset=CPU):
    return grokking.CHAPTER.claim(cid).judge(grokking.analyse(runs, preset)).verdict


def grok_runs(nsdl=None, summary=None, sgd_summary=None):
    empty = pd.DataFrame()
    nsdl_table, nsdl_summary, nsdl_grid = nsdl if nsdl is not None else (empty, empty, empty)
    return grokking.GrokRuns(empty, pd.Series(dtype=float), empty, summary if summary is not None else empty, empty,
                             sgd_summary if sgd_summary is not None else empty, nsdl_table, nsdl_summary, nsdl_grid)


# ------------------------------------------------------------------------------------------------ presets

def test_presets_follow_nsdl_and_give_every_verdict_enough_seeds():
    assert set(grokking.PRESETS) == {"smoke", "cpu", "paper"}
    for scale in ("cpu", "paper"):
        p = grokking.PRESETS[scale]
        assert p.stand_in.seeds >= MIN_UNITS and p.stand_in.sgd_seeds >= MIN_UNITS and p.nsdl.seeds >= MIN_UNITS
        assert p.stand_in.lambdas == grokking.PAPER_LAMBDAS
        assert (p.nsdl.p, p.nsdl.lr, p.nsdl.batch_size, p.nsdl.train_frac) == (97, 1e-3, 512, 0.5)
    paper = grokking.PRESETS["paper"].nsdl
    assert paper.lambdas == grokking.PAPER_LAMBDAS and paper.seeds == 10
    assert (paper.steps_low, paper.steps, paper.paper_grid, paper.post_window) == (15_000, 80_000, 200, 2000)
    assert grokking.parameter_count("transformer", 97) == 223_713  # NSDL's model, nht.md §3.1


def test_sgd_sweep_runs_o1s_w0_control_beside_w_lambda_and_2_lambda():
    sgd = grokking.sweeps(CPU)[2]
    arms = {(c.train.optimizer, c.train.weight_decay) for c in sgd.configs}
    assert arms == {("sgd", 0.0), ("sgd", grokking.LAM_ONE), ("sgd", 2 * grokking.LAM_ONE)}
    assert len(sgd.configs) == 3 * CPU.stand_in.sgd_seeds == grokking.member_steps(CPU)["SGD"] // CPU.stand_in.sgd_steps
    assert f"SGD, w = {0.0:g}" == grokking.O1_CONTROL_ARM  # the label `_sgd` gives that arm


def test_cpu_runs_nsdl_settings_as_one_batched_call():
    configs = grokking.nsdl_configs(CPU.nsdl)
    assert len(configs) == 26 and len({c.batch_signature() for c in configs}) == 1
    train = configs[0].train
    assert (train.optimizer, train.lr, train.batch_size, train.sampling, train.decay) == (
        "adamw", 1e-3, 512, "with_replacement", "all")
    assert train.log_steps() == list(range(0, 5201, 100))
    assert grokking.member_steps(CPU)["NSDL settings"] == 26 * 5200


def test_table2_seeds_run_at_lambda_one_alone():
    """NSDL Table 2's λ = 1 runs its own seed count (NSDL: 10), the first `seeds` of them shared with the others."""
    seeds = {}
    for c in grokking.nsdl_configs(CPU.nsdl, first_seed=10):
        seeds.setdefault(c.train.weight_decay, set()).add(c.seed)
    assert seeds == {0.5: set(range(10, 18)), 1.0: set(range(10, 20)), 2.0: set(range(10, 18))}
    assert grokking.seeds_text(CPU.nsdl) == "8 seeds (10 at λ = 1)"
    plain = CPU.nsdl.replace(table2_seeds=None)
    assert len(grokking.nsdl_configs(plain)) == 24 and grokking.seeds_text(plain) == "8 seeds"
    with pytest.raises(ConfigError):
        CPU.nsdl.replace(table2_seeds=2)  # fewer than the seeds every λ runs


def test_claims_across_lambda_read_only_the_seeds_that_ran_every_lambda():
    """Seeds 3-9 run λ = 1 alone: N-R1's per-seed share over λ's must not count them (1 of 1 λ would match), while
    Table 2's claims at λ = 1 read all ten."""
    times = {(lam, seed): (800, 1800) for seed in range(3) for lam in (0.5, 1.0)}
    times.update({(2.0, seed): (800, 1800) for seed in range(3)})  # λ = 2 groks: against NSDL's regime III
    times.update({(1.0, seed): (800, 1800) for seed in range(3, 10)})
    runs = grok_runs(nsdl_runs(times))
    analysed = grokking.analyse(runs, CPU)
    assert grokking.every_lambda(analysed.nsdl).seed.nunique() == 3
    estimate = grokking.CHAPTER.claim("N-R1").estimate(analysed)
    assert estimate.n == 3 and estimate.value == pytest.approx(2 / 3)  # 2 of 3 λ's as NSDL's in every seed
    assert grokking.CHAPTER.claim("N-TG").estimate(analysed).n == 10


def test_presets_refuse_bad_values():
    with pytest.raises(ConfigError):
        CPU.nsdl.replace(lambdas=(0.5, 2.0))  # λ = 1 is NSDL's Table 2
    with pytest.raises(ConfigError):
        CPU.nsdl.replace(lambdas=(1.0, 0.5))
    with pytest.raises(ConfigError):
        CPU.nsdl.replace(paper_grid=150)  # not a multiple of the 100-step log: cannot be read from it
    with pytest.raises(ConfigError):
        CPU.nsdl.replace(steps=5250)
    with pytest.raises(ConfigError):
        CPU.stand_in.replace(sgd_seeds=CPU.stand_in.seeds + 1)  # AdamW's side of O1 is the sweep's runs of those seeds
    with pytest.raises(ConfigError):
        CPU.stand_in.replace(lr=0.0)
    with pytest.raises(ConfigError):
        grokking.GrokPreset(CPU.nsdl, CPU.stand_in)


# ---------------------------------------------------------------------------------------- NSDL as data

def test_digitised_nsdl_data_give_the_printed_numbers():
    t2 = grokking.NSDL_TABLE2
    assert t2.T_grok.mean() == 1840 and t2.T_grok.std(ddof=0) == pytest.approx(215.4, abs=0.1)
    assert t2.T_mem.mean() == 840 and (t2.T_mem == 800).sum() == 9
    assert t2.V_mem.mean() == pytest.approx(3716, abs=1) and t2.V_post.mean() == pytest.approx(302, abs=1)
    assert t2.rho.mean() == pytest.approx(0.99860, abs=1e-5) and t2.rho.std(ddof=0) == pytest.approx(7e-5, abs=1e-5)
    assert t2.delay.mean() == 1000 and t2.T_pred_decay.mean() == pytest.approx(1251, abs=1)  # T_esc^th printed
    sweep = grokking.nsdl_sweep_long()
    assert sweep.groupby("lam").T_grok.mean().to_dict() == {0.1: 12700, 0.3: 4900, 0.5: 3150, 1.0: 2100}
    # with every seed at every λ the mean per-seed slope is the pooled least-squares slope, NSDL's 1182
    assert np.mean(grokking.slopes_per_seed(sweep, (0.1, 0.3, 0.5, 1.0))) == pytest.approx(1182.4, abs=0.1)
    assert np.mean(grokking.slopes_per_seed(sweep, (0.5, 1.0))) == pytest.approx(1050)


CLAIM_ORDER = ("P2", "P1", "R1", "P6", "D1", "C1", "P4", "O1", "N-TM", "N-TG", "N-VM", "N-VP", "N-C1", "N-R1", "N-F1",
               "N-P6", "N-D1", "N-P4", "N-V1", "N-TT", "N-T6", "N-MOD", "N-ETA", "N-MUL", "N-PAR", "N-SPC", "N-MAE",
               "P5", "P3")  # the order of the notebook's sections
BOOK_IDS = ("R1", "D1", "C1", "O1", "N-P4")  # claims read on the book's own set-up or per-layer log
UNTESTED_NSDL = ("N-MOD", "N-ETA", "N-MUL", "N-PAR", "N-SPC", "N-MAE")  # NSDL experiments the book does not run


def test_claims_are_declared_once_without_bare_p_ids_at_nsdl_settings():
    assert tuple(c.id for c in grokking.CHAPTER.claims) == CLAIM_ORDER
    specs = {c.id: c.spec for c in grokking.CHAPTER.claims}
    for pid in set(predictions.PREDICTIONS) - {"P4"}:
        assert specs[pid] == predictions.spec(pid, grokking.DOMAIN)  # NHT Table 3's row: the stand-in
    nsdl_ids = [cid for cid in specs if cid.startswith("N-")]
    assert {"N-TM", "N-TG", "N-VM", "N-VP", "N-C1", "N-F1", "N-D1", "N-P4", "N-P6"} <= set(nsdl_ids)
    for cid, spec in specs.items():
        assert spec.source in SOURCES and "[" in spec.paper, cid  # the paper's value keeps its source tag
        expected = "NHT" if cid in predictions.PREDICTIONS else ("book" if cid in BOOK_IDS else "NSDL")
        assert spec.source == expected, cid
    for cid in BOOK_IDS[:4]:
        assert "book's stand-in" in specs[cid].statement, cid
    assert specs["P3"].judge(None).verdict == NOT_TESTABLE
    assert "±15%" in specs["N-TG"].rule.words() and "±276" in specs["N-TG"].rule.words()  # the margin in words
    assert all(c.where and c.test for c in grokking.CHAPTER.claims)  # the opening table's columns
    # N-F1 is judged as declared for the preset's λ's (its row names them)
    runs = fit_runs(1050, 1050)
    assert grokking.CHAPTER.claim("N-F1").judge(grokking.analyse(runs, CPU)).statement == (
        grokking.slope_claim(CPU.nsdl).statement)
    assert "{0.5, 1}" in grokking.slope_claim(CPU.nsdl).statement


def test_each_table3_cell_is_owned_by_one_row():
    cells = [c.spec.cell for c in grokking.CHAPTER.claims if c.spec.cell]
    assert sorted(cells) == sorted(f"{grokking.DOMAIN}/{pid}" for pid in predictions.PREDICTIONS)
    p4 = grokking.CHAPTER.claim("P4").judge(grokking.analyse(grok_runs(), CPU))
    assert (p4.verdict, p4.untested, p4.cell) == (NOT_TESTABLE, NO_EVIDENCE, f"{grokking.DOMAIN}/P4")
    assert grokking.CHAPTER.claim("N-P6").spec.cell == grokking.CHAPTER.claim("N-P4").spec.cell == ""


def test_nsdl_claims_without_runs_are_not_testable_at_this_scale():
    analysed = grokking.analyse(fit_runs(1050, 1050), CPU)
    for cid in UNTESTED_NSDL + ("N-T6", "N-F1", "N-P6"):
        row = grokking.CHAPTER.claim(cid).judge(analysed)
        assert (row.verdict, row.untested) == (NOT_TESTABLE, NOT_AT_THIS_SCALE), cid
        assert row.source == "NSDL" and row.rule, cid
    assert "needs" in grokking.CHAPTER.claim("N-MOD").spec.rule.words()  # says what would test it


# --------------------------------------------------------------------------------------- the 200-step grid

def test_times_on_the_paper_grid_round_up():
    table = pd.concat([trajectory(seed=0, t_mem=850, t_grok=1800), trajectory(seed=1, t_mem=800, t_grok=1750)])
    fine = grokking_summary(table, by=["seed"]).set_index("seed")
    coarse = grokking_summary(on_grid(table, 200), by=["seed"]).set_index("seed")
    assert fine.T_mem.tolist() == [900, 800] and coarse.T_mem.tolist() == [1000, 800]
    assert fine.T_grok.tolist() == [1800, 1800] and coarse.T_grok.tolist() == [1800, 1800]
    assert coarse.V_mem[0] == pytest.approx(table[(table.seed == 0) & (table.step == 1000)].norm_sq.iloc[0])
    with pytest.raises(ValueError):
        on_grid(table, 150)  # 150, 450, ... were never logged


def test_post_window_reads_v_post_two_thousand_steps_after_t_grok():
    _, summary, grid = nsdl_runs({(1.0, 0): (750, 1750)})
    assert summary.T_end.iloc[0] == 3800 and grid.T_end.iloc[0] == 3800
    assert summary.V_post.iloc[0] == pytest.approx((3900 - 245) * 0.9986 ** 3050 + 245)


# ------------------------------------------------------------------------------------------ Table 2 claims

TABLE2_IDS = ("N-TM", "N-TG", "N-VM", "N-VP", "N-C1", "N-D1")


def test_table2_claims_inside_nsdl_intervals_are_reproduced():
    runs = grok_runs(nsdl_runs({(1.0, s): (750, t) for s, t in enumerate((1700, 1800, 1800))}))
    for cid in TABLE2_IDS:
        assert verdict(cid, runs) == REPRODUCED, cid
    claim, analysed = grokking.CHAPTER.claim("N-TG"), grokking.analyse(runs, CPU)
    value, note = claim.estimate(analysed), claim.note(analysed)
    assert value.values == (1800.0, 1800.0, 1800.0) and "1,767" in note  # NSDL's grid; ours (1,700 …) beside it


def test_table2_claims_far_outside_are_not_reproduced():
    far = grok_runs(nsdl_runs({(1.0, s): (2950, t) for s, t in enumerate((4400, 4500, 4600))}, v_mem=9000.0,
                              c_inf=900.0, rho=0.9995))
    for cid in ("N-TM", "N-TG", "N-VM", "N-VP", "N-C1"):
        assert verdict(cid, far) == NOT_REPRODUCED, cid


def test_table2_claims_with_two_seeds_are_inconclusive():
    two = grok_runs(nsdl_runs({(1.0, s): (750, t) for s, t in enumerate((1700, 1800))}))
    for cid in TABLE2_IDS:
        assert verdict(cid, two) == INCONCLUSIVE, cid


def test_a_wide_interval_does_not_agree():
    spread = grok_runs(nsdl_runs({(1.0, s): (750, t) for s, t in enumerate((1100, 1900, 2900))}))
    assert verdict("N-TG", spread) == INCONCLUSIVE  # overlaps NSDL's, but wider than ±15 % of its mean


def test_an_interval_off_by_a_fifth_does_not_agree():
    # T_grok 2,200 in every seed: NSDL's 1,840 + 20 %; the old overlap rule would have accepted 2,200/2,200/2,400
    off = grok_runs(nsdl_runs({(1.0, s): (750, 2150) for s in range(3)}))
    assert verdict("N-TG", off) == NOT_REPRODUCED
    near = grok_runs(nsdl_runs({(1.0, s): (750, t) for s, t in enumerate((1950, 2150, 2150))}))
    assert verdict("N-TG", near) == INCONCLUSIVE  # mean +13 %, but the interval reaches past +15 %


# ------------------------------------------------------------------------------------------- the 1/λ fit

def fit_runs(a, b, noise=(0.0, 40.0, -40.0)):
    times = {}
    for seed, e in enumerate(noise):
        for lam in (0.5, 1.0):
            times[(lam, seed)] = (500, int(round((a / lam + b + e) / 100) * 100))
        times[(2.0, seed)] = (None, None)  # regime III: nothing within the budget
    return grok_runs(nsdl_runs(times))


LONG = np.arange(0, 16001, 100)  # long enough for λ = 0.1 (NSDL T_grok 12,700) plus the post window


def paper_fit_runs(a, b, noise=(0.0, 40.0, -40.0)):
    """Runs at NSDL's four regime-II λ's (the paper scale's), T_grok = a/λ + b + noise per seed."""
    times = {(lam, seed): (500, int(round((a / lam + b + e) / 100) * 100))
             for seed, e in enumerate(noise) for lam in (0.1, 0.3, 0.5, 1.0)}
    return grok_runs(nsdl_runs(times, steps=LONG))


def test_inverse_lambda_slope_claim():
    assert verdict("N-F1", fit_runs(1050, 1050)) == NOT_TESTABLE  # a 2-point slope at cpu scale is no fit
    assert verdict("N-R1", fit_runs(1050, 1050)) == REPRODUCED  # 0.5 and 1 grok, 2 does not, in every seed
    assert verdict("N-P6", fit_runs(1050, 1050)) == NOT_TESTABLE  # two regime-II λ's make no R²
    paper = grokking.PRESETS["paper"]
    assert grokking.fit_lambdas(paper.nsdl) == (0.1, 0.3, 0.5, 1.0)
    assert grokking.slope_claim(paper.nsdl).rule.paper == pytest.approx(1182, abs=1)  # NSDL's mean per-seed slope
    assert verdict("N-F1", paper_fit_runs(1182, 884), paper) == REPRODUCED
    assert verdict("N-F1", paper_fit_runs(400, 1500), paper) == NOT_REPRODUCED  # T barely depends on 1/λ
    assert verdict("N-P6", paper_fit_runs(1182, 884), paper) == REPRODUCED
    assert verdict("N-T6", paper_fit_runs(1182, 884), paper) == REPRODUCED  # (11,820 + 884)/2,066 ≈ 6.1
    assert verdict("N-T6", paper_fit_runs(1182, 0), paper) == NOT_REPRODUCED  # pure 1/λ: T_grok(0.1)/T_grok(1) = 10


# ----------------------------------------------------------------------------------- the stand-in sweep

def stand_in(pattern):
    """A stand-in sweep over NSDL's λ grid, 3 seeds: pattern[λ] = 'I' (memorises, never groks), 'II' (groks) or
    'III' (never memorises); the final norm falls with λ."""
    steps = np.arange(0, 2501, 25)
    parts = []
    for seed in range(3):
        for i, lam in enumerate(grokking.PAPER_LAMBDAS):
            kind = pattern[lam]
            t_mem, t_grok = {"I": (50, None), "II": (50, 300 + 100 * i + 25 * seed), "III": (None, None)}[kind]
            parts.append(trajectory(lam, seed, t_mem=t_mem, t_grok=t_grok, steps=steps, lr=1e-2, rho=0.995,
                                    v_mem=4000.0 / (1 + i), c_inf=100.0 / (1 + i), head_peak=25.0))
    return grokking.summarise(pd.concat(parts, ignore_index=True), mem_threshold=0.99, grok_threshold=0.99,
                              post_window=None)[1]


NSDL_PATTERN = dict(grokking.PAPER_REGIME)


def test_regimes_map_onto_nht_and_carry_p2():
    summary = stand_in(NSDL_PATTERN)
    assert summary.groupby("lam").nsdl_regime.first().to_dict() == grokking.PAPER_REGIME
    assert set(summary.regime) == {"weak", "intermediate", "strong"}
    runs = grok_runs(summary=summary)
    for cid in ("P1", "P2", "R1"):
        assert verdict(cid, runs) == REPRODUCED, cid
    no_strong = stand_in({**NSDL_PATTERN, 2.0: "II", 5.0: "II"})  # every λ from 0.1 on groks: no regime III
    assert verdict("P2", grok_runs(summary=no_strong)) == NOT_REPRODUCED  # no strong regime in any seed
    assert verdict("R1", grok_runs(summary=no_strong)) == REPRODUCED  # 6 of 8 λ's as NSDL's: a step off each side
    shifted = stand_in({**NSDL_PATTERN, 0.01: "II", 2.0: "II", 5.0: "II"})
    assert verdict("R1", grok_runs(summary=shifted)) == NOT_REPRODUCED


def test_regimes_are_read_from_behaviour_not_from_the_grid():
    # λ = 5 memorises and does not grok: weak (the shortcut persists), not 'III' by its place above the grokking λ's
    late_weak = stand_in({**NSDL_PATTERN, 2.0: "II", 5.0: "I"})
    assert late_weak[late_weak.lam == 5.0].regime.eq("weak").all()
    assert late_weak[late_weak.lam == 5.0].nsdl_regime.eq("III").all()  # the positional label, kept for reference
    parts = verdicts_of("P2", grok_runs(summary=late_weak))
    assert parts["all three occur"] == NOT_REPRODUCED  # no λ suppresses learning
    # a λ between grokking ones that does not grok (memorises) breaks the order instead of being dropped
    gap = stand_in({**NSDL_PATTERN, 0.5: "I"})
    assert gap[gap.lam == 0.5].regime.eq("weak").all()
    assert verdicts_of("P2", grok_runs(summary=gap))["in order"] == NOT_REPRODUCED
    assert verdict("P2", grok_runs(summary=gap)) == PARTLY  # all three occur, out of order


def verdicts_of(cid, runs, preset=CPU):
    claim = grokking.CHAPTER.claim(cid)
    return claim.spec.rule.part_verdicts(claim.estimate(grokking.analyse(runs, preset)))


def test_separation_and_delay_scaling_on_the_stand_in():
    runs = grok_runs(summary=stand_in(NSDL_PATTERN))
    assert verdict("P4", runs) == NOT_TESTABLE  # NHT gives no per-layer evidence on modular arithmetic
    assert verdict("P5", runs) == REPRODUCED  # the test error falls as the norm falls
    assert verdict("P6", runs) == NOT_REPRODUCED  # T_grok grows with λ here: no 1/λ law
    # P5 pools the runs that contract, grokked or not: a memorising run whose test error falls while the norm
    # rises counts against S
    summary = stand_in(NSDL_PATTERN)
    assert summary[(summary.lam == 0.01)].S.isna().all()  # test error flat: S undefined, left out
    flipped = summary.assign(S=np.where(summary.grokked, summary.S, -1.0))
    assert verdict("P5", grok_runs(summary=flipped)) != REPRODUCED


def layer_runs(head_peak_after_mem):
    """Runs at NSDL's settings at λ = 0.5 and 1, 3 seeds (6 grokked runs), whose head norm peaks
    `head_peak_after_mem` steps after T_mem = 700 (the hidden layers contract from T_mem on)."""
    times = {(lam, seed): (700, 1500 if lam == 1.0 else 2500) for seed in range(3) for lam in (0.5, 1.0)}
    return grok_runs(nsdl_runs(times, head_peak=700 + head_peak_after_mem))


def test_layer_order_at_nsdl_settings_is_read_from_t_mem_on():
    assert verdict("N-P4", layer_runs(0)) == REPRODUCED  # head peaks at T_mem, then contracts to ~0: first
    assert verdict("N-P4", layer_runs(1500)) == NOT_REPRODUCED  # head peaks long after the hidden layers
    few = grok_runs(nsdl_runs({(1.0, s): (700, 1500) for s in range(3)}, head_peak=700))
    assert verdict("N-P4", few) == INCONCLUSIVE  # 3 of 3 runs: the Wilson interval reaches below one half


def test_norm_separation_necessity_and_t_tilde():
    runs = grok_runs(nsdl_runs({(lam, s): (750, 750 + 1000 / lam) for s in range(3) for lam in (0.5, 1.0)}))
    assert verdict("N-V1", runs) == REPRODUCED  # V_mem = 3,900 > V_post ≈ 260–300 in every run
    assert verdict("N-TT", runs) == REPRODUCED  # delay ∝ 1/λ at an almost equal log ratio: T̃ nearly constant
    flat = grok_runs(nsdl_runs({(lam, s): (750, 1750) for s in range(3) for lam in (0.5, 1.0)}))
    assert verdict("N-TT", flat) == NOT_REPRODUCED  # equal delays: T̃ halves from λ = 1 to 0.5
    rising = grok_runs(nsdl_runs({(1.0, s): (750, 1750) for s in range(3)}, v_mem=300.0, c_inf=900.0))
    assert verdict("N-V1", rising) == NOT_REPRODUCED  # the norm grows after T_mem: V_post > V_mem


def sgd_rows(seeds, *, sgd_memorises=False, control=None):
    rows = [{"optimiser": "AdamW, λ = 1", "seed": s, "memorised": True, "grokked": True} for s in range(seeds)]
    rows += [{"optimiser": f"SGD, w = {w}", "seed": s, "memorised": sgd_memorises, "grokked": False}
             for s in range(seeds) for w in (1, 2)]
    if control is not None:  # the control arm: SGD without decay, same η and budget
        rows += [{"optimiser": grokking.O1_CONTROL_ARM, "seed": s, "memorised": control, "grokked": False}
                 for s in range(seeds)]
    return grok_runs(sgd_summary=pd.DataFrame(rows))


def test_sgd_claim_needs_the_w0_control_and_a_share_near_zero():
    assert verdict("O1", sgd_rows(3)) == INCONCLUSIVE  # no w = 0 arm; 0 of 6 runs: Wilson bound 0.39 > 0.2
    assert verdict("O1", sgd_rows(8)) == INCONCLUSIVE  # 0 of 16 runs, but still no control arm
    assert verdict("O1", sgd_rows(8, control=True)) == REPRODUCED  # w = 0 memorises: SGD could have
    assert verdict("O1", sgd_rows(8, control=False)) == INCONCLUSIVE  # a dead control decides nothing
    assert verdict("O1", sgd_rows(3, control=True)) == INCONCLUSIVE  # 6 runs cannot show a share below 0.2
    assert verdict("O1", sgd_rows(3, sgd_memorises=True, control=True)) == PARTLY  # SGD memorised; AdamW grokked
    row = grokking.CHAPTER.claim("O1").judge(grokking.analyse(sgd_rows(3), CPU))
    assert "w = 0" in row.note and "0.2" in row.rule
