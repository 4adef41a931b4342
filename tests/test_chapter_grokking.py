"""Chapter 2's module (nhtlib.chapters.grokking): presets, NSDL's digitised numbers, the regime mapping, the Table 2
claims, the 200-step grid and the 1/λ fit — on hand-built run tables with known answers (no training)."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.report import predictions
from nhtlib.chapters import grokking
from nhtlib.config import ConfigError
from nhtlib.analysis.grok_times import grokking_summary, on_grid
from nhtlib.report.verdicts import INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, SOURCES

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


def test_cpu_runs_nsdl_settings_as_one_batched_call():
    configs = grokking.nsdl_configs(CPU.nsdl)
    assert len(configs) == 9 and len({c.batch_signature() for c in configs}) == 1
    train = configs[0].train
    assert (train.optimizer, train.lr, train.batch_size, train.sampling, train.decay) == (
        "adamw", 1e-3, 512, "with_replacement", "all")
    assert train.log_steps() == list(range(0, 5201, 100))
    assert grokking.member_steps(CPU)["NSDL settings"] == 9 * 5200


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
        CPU.stand_in.replace(sgd_seeds=4)  # AdamW's side of O1 is the sweep's 3 seeds
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
               "N-P6", "N-D1", "N-P4", "P5", "P3")  # the order of the notebook's sections


def test_claims_are_declared_once_without_bare_p_ids_at_nsdl_settings():
    assert tuple(c.id for c in grokking.CHAPTER.claims) == CLAIM_ORDER
    specs = {c.id: c.spec for c in grokking.CHAPTER.claims}
    for pid in predictions.PREDICTIONS:
        assert specs[pid] == predictions.spec(pid, grokking.DOMAIN)  # NHT Table 3's row: the stand-in
    nsdl_ids = [cid for cid in specs if cid.startswith("N-")]
    assert {"N-TM", "N-TG", "N-VM", "N-VP", "N-C1", "N-F1", "N-D1", "N-P4", "N-P6"} <= set(nsdl_ids)
    assert specs["N-P4"].rule == specs["P4"].rule and specs["N-P4"].statement != specs["P4"].statement
    for cid, spec in specs.items():
        assert spec.source in SOURCES and "[" in spec.paper, cid  # the paper's value keeps its source tag
        assert spec.source == ("NHT" if cid.lstrip("N-") in predictions.PREDICTIONS else "NSDL"), cid
    assert specs["P3"].judge(None).verdict == NOT_TESTABLE
    assert all(c.where and c.test for c in grokking.CHAPTER.claims)  # the opening table's columns
    # N-F1 is judged as declared for the preset's λ's (its row names them)
    runs = fit_runs(1050, 1050)
    assert grokking.CHAPTER.claim("N-F1").judge(grokking.analyse(runs, CPU)).statement == (
        grokking.slope_claim(CPU.nsdl).statement)
    assert "{0.5, 1}" in grokking.slope_claim(CPU.nsdl).statement


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
    assert verdict("N-TG", spread) == INCONCLUSIVE  # overlaps NSDL's, but wider than half its mean


# ------------------------------------------------------------------------------------------- the 1/λ fit

def fit_runs(a, b, noise=(0.0, 40.0, -40.0)):
    times = {}
    for seed, e in enumerate(noise):
        for lam in (0.5, 1.0):
            times[(lam, seed)] = (500, int(round((a / lam + b + e) / 100) * 100))
        times[(2.0, seed)] = (None, None)  # regime III: nothing within the budget
    return grok_runs(nsdl_runs(times))


def test_inverse_lambda_slope_claim():
    assert verdict("N-F1", fit_runs(1050, 1050)) == REPRODUCED
    assert verdict("N-F1", fit_runs(200, 2000)) == NOT_REPRODUCED  # T barely depends on 1/λ
    assert verdict("N-R1", fit_runs(1050, 1050)) == REPRODUCED  # 0.5 and 1 grok, 2 does not, in every seed
    assert verdict("N-P6", fit_runs(1050, 1050)) == NOT_TESTABLE  # two regime-II λ's make no R²
    paper = grokking.PRESETS["paper"]
    assert grokking.fit_lambdas(paper.nsdl) == (0.1, 0.3, 0.5, 1.0)
    low, high = grokking.slope_claim(paper.nsdl).rule.paper_low, grokking.slope_claim(paper.nsdl).rule.paper_high
    assert low < 1182 < high  # over NSDL's four regime-II λ's its interval holds its printed slope


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
    assert verdict("P2", grok_runs(summary=no_strong)) != REPRODUCED
    assert verdict("R1", grok_runs(summary=no_strong)) == REPRODUCED  # 6 of 8 λ's as NSDL's: a step off each side
    shifted = stand_in({**NSDL_PATTERN, 0.01: "II", 2.0: "II", 5.0: "II"})
    assert verdict("R1", grok_runs(summary=shifted)) == NOT_REPRODUCED


def test_layer_order_and_separation_on_the_stand_in():
    runs = grok_runs(summary=stand_in(NSDL_PATTERN))
    assert verdict("P4", runs) == REPRODUCED  # the head peaks at the first log and contracts more than the embedding
    assert verdict("P5", runs) == REPRODUCED  # the test error falls as the norm falls
    assert verdict("P6", runs) == NOT_REPRODUCED  # T_grok grows with λ here: no 1/λ law


def test_sgd_claim():
    rows = [{"optimiser": "AdamW, λ = 1", "seed": s, "memorised": True, "grokked": True} for s in range(3)]
    sgd = [{"optimiser": f"SGD, w = {w}", "seed": s, "memorised": False, "grokked": False}
           for s in range(3) for w in (1, 2)]
    assert verdict("O1", grok_runs(sgd_summary=pd.DataFrame(rows + sgd))) == REPRODUCED
    memorising = [dict(r, memorised=True) for r in sgd]
    assert verdict("O1", grok_runs(sgd_summary=pd.DataFrame(rows + memorising))) != REPRODUCED
