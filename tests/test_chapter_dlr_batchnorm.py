"""Chapter 5's module (nhtlib.chapters.dlr_batchnorm): presets, experiments, and the per-seed estimates behind its claims,
on synthetic run tables with known answers."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.chapters import dlr_batchnorm as richness
from nhtlib.config import ConfigError
from nhtlib.report.verdicts import INCONCLUSIVE, MIN_UNITS, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED, SOURCES

IDS = ["R1", "G2", "G1", "A1", "A2", "A3", "B1", "L1", "L2", "E1"]  # the order of the notebook's sections
EXPERIMENT_OF = {"R1": "shortcut", "E1": "shortcut", "G1": "grokking", "G2": "grokking", "A1": "alpha", "A2": "alpha",
                 "A3": "alpha", "B1": "batchnorm", "L1": "lr", "L2": "shuffle"}  # the runs each claim reads


# ------------------------------------------------------------------------------------------- presets, claims

def test_presets_give_every_verdict_enough_seeds():
    assert set(richness.PRESETS) == {"smoke", "cpu", "paper"}
    for scale in ("cpu", "paper"):
        assert richness.PRESETS[scale].seeds >= MIN_UNITS


def test_presets_reject_bad_values():
    cpu = richness.PRESETS["cpu"]
    with pytest.raises(ConfigError):
        cpu.alpha.replace(alphas=(4.0, 1.0))
    with pytest.raises(ConfigError):
        cpu.shortcut.replace(hidden=())
    with pytest.raises(ConfigError):
        cpu.grok.replace(n_logs=cpu.grok.steps + 1)
    with pytest.raises(ConfigError):
        cpu.replace(vision=cpu.alpha)


def test_experiments_run_every_seed_of_every_arm():
    plan = richness.experiments(richness.PRESETS["cpu"], first_seed=5)
    members = {name: len(e.configs) for name, e in plan.items()}
    assert members == {"shortcut": 6, "grokking": 3, "alpha": 12, "batchnorm": 6, "lr": 9, "shuffle": 6}
    for e in plan.values():
        assert {c.seed for c in e.configs} == {5, 6, 7}
    with pytest.raises(ConfigError):
        richness.experiments(richness.PRESETS["cpu"], dataset="imagenet")


def test_claims_are_declared_once_with_stable_ids():
    claims = richness.CHAPTER.claims
    assert [c.id for c in claims] == IDS and set(EXPERIMENT_OF) == set(IDS)
    for c in claims:
        assert c.spec.source in SOURCES and c.where and c.test
    assert {c.id for c in claims if c.spec.rule.null} == {"A2", "L2"}
    assert {c.id for c in claims if c.spec.source == "book"} == {"R1", "G2"}
    assert {c.id for c in claims if c.control} == {"A2", "L2"}  # a null claim has its positive control
    assert set(richness.EXPERIMENTS) == set(EXPERIMENT_OF.values())


# ------------------------------------------------------------------------------------------ synthetic tables

def final_table(experiment, arms, seeds=3, noise=0.01, chance=0.1, dataset="synthetic"):
    """One logged row per run (step 0 and a last step): arms = {arm column value tuple: {metric: value}}."""
    rng = np.random.default_rng(0)
    rows, run = [], 0
    for seed in range(seeds):
        for key, metrics in arms.items():
            for step in (0, 10):
                row = {"experiment": experiment, "run": run, "seed": seed, "step": step, "chance": chance,
                       "dataset": dataset, **dict(key)}
                row.update({m: v + (noise * rng.standard_normal() if step else 0.0) for m, v in metrics.items()})
                rows.append(row)
            run += 1
    return pd.DataFrame(rows)


def verdict(table, cid):
    """Claim `cid` judged on one experiment's run table, filed under the experiment the claim reads."""
    return richness.CHAPTER.claim(cid).judge(richness.analyse({EXPERIMENT_OF[cid]: table}))


def test_r1_richer_and_worse():
    arms = {(("trainable", "all"),): {"dlr": 0.1, "test_acc": 0.3},
            (("trainable", "head"),): {"dlr": 0.6, "test_acc": 0.8}}
    assert verdict(final_table("shortcut", arms), "R1").verdict == REPRODUCED
    arms[(("trainable", "head"),)]["test_acc"] = 0.1  # lazier but also worse: one part holds
    assert verdict(final_table("shortcut", arms), "R1").verdict == PARTLY
    assert verdict(final_table("shortcut", arms, seeds=1), "R1").verdict == INCONCLUSIVE


def test_b1_reads_the_batchnorm_pairs():
    arms = {(("batchnorm", False),): {"dlr": 0.7, "test_acc": 0.2},
            (("batchnorm", True),): {"dlr": 0.1, "test_acc": 0.7}}
    row = verdict(final_table("batchnorm", arms, dataset="cifar10"), "B1")
    assert row.verdict == REPRODUCED and "cifar10" in row.note
    arms[(("batchnorm", True),)].update(dlr=0.9, test_acc=0.1)
    assert verdict(final_table("batchnorm", arms), "B1").verdict == NOT_REPRODUCED


def grokking_table(groks=True, seeds=3):
    rows = []
    for seed in range(seeds):
        for step in range(0, 11):
            train = 1.0 if step >= 2 else 0.3
            test = 1.0 if (groks and step >= 6) else 0.05
            dlr = (0.2 if step >= 6 else 0.6) + 0.01 * seed if groks else 0.6
            rows.append({"experiment": "grokking", "run": seed, "seed": seed, "step": step, "train_acc": train,
                         "test_acc": test, "dlr": dlr, "dlr_null": 0.1, "chance": 0.1, "dataset": "mod p"})
    return pd.DataFrame(rows)


def test_grokking_points_and_verdicts():
    points = richness.grok_points(grokking_table())
    assert list(points.T_mem) == [2, 2, 2] and list(points.T_grok) == [6, 6, 6]
    assert points.fall.to_numpy() == pytest.approx([0.4, 0.4, 0.4])
    assert verdict(grokking_table(), "G2").verdict == REPRODUCED
    assert verdict(grokking_table(), "G1").verdict == REPRODUCED
    never = grokking_table(groks=False)
    assert verdict(never, "G2").verdict == NOT_REPRODUCED
    assert verdict(never, "G1").verdict == NOT_TESTABLE  # no fall from memorisation exists without grokking


def alpha_table(test_acc=0.9, theta_slope=0.0, seeds=3):
    arms = {}
    for i, alpha in enumerate((1.0, 4.0, 16.0, 64.0)):
        arms[(("alpha", alpha),)] = {"dlr": 0.2 + 0.1 * i, "nc1": 2.0 - 0.4 * i, "s_init": 0.5, "test_acc": test_acc,
                                    "theta_sq": 100.0 * (1 + theta_slope * i)}
    return final_table("alpha", arms, seeds=seeds, noise=0.002)


def test_alpha_claims():
    table = alpha_table()
    assert verdict(table, "A1").verdict == REPRODUCED
    assert verdict(table, "A3").verdict == REPRODUCED  # NC1 falls while D_LR rises
    assert verdict(table, "A2").verdict == REPRODUCED  # flat ‖θ‖² and S_init, nets that learned
    assert verdict(alpha_table(theta_slope=0.2), "A2").verdict == PARTLY  # ‖θ‖² grows by 60 %, S_init flat
    dead = verdict(alpha_table(test_acc=0.1), "A2")  # a net at chance cannot show "no change"
    assert dead.verdict == INCONCLUSIVE and "FAILED" in dead.note


def test_l1_per_seed_and_ties():
    arms = {(("lr", 0.005),): {"dlr": 0.5, "test_acc": 0.5}, (("lr", 0.05),): {"dlr": 0.2, "test_acc": 0.8},
            (("lr", 0.2),): {"dlr": 0.3, "test_acc": 0.7}}
    assert verdict(final_table("lr", arms, noise=0.0), "L1").verdict == REPRODUCED
    tied = {k: {**v, "test_acc": 0.1} for k, v in arms.items()}  # every lr at chance: no best lr
    row = verdict(final_table("lr", tied, noise=0.0), "L1")
    assert row.verdict == INCONCLUSIVE and row.n == 0


def test_l2_null_claim_needs_fitted_random_labels():
    arms = {(("shuffle_labels", False),): {"dlr": 0.30, "train_acc": 1.0},
            (("shuffle_labels", True),): {"dlr": 0.31, "train_acc": 1.0}}
    assert verdict(final_table("shuffle", arms), "L2").verdict == REPRODUCED
    arms[(("shuffle_labels", True),)]["train_acc"] = 0.2  # random labels not fitted: the control fails
    assert verdict(final_table("shuffle", arms), "L2").verdict == INCONCLUSIVE
    arms[(("shuffle_labels", True),)].update(dlr=0.6, train_acc=1.0)
    assert verdict(final_table("shuffle", arms), "L2").verdict == NOT_REPRODUCED


def test_eigen_summary_censors_unreached_utilisation():
    ks = range(1, 6)
    spectra = pd.DataFrame(
        [{"training": t, "seed": 0, "panel": "pi_hat", "k": k, "value": min(1.0, k / (2 if t == "rich" else 50))}
         for t in ("rich", "lazy") for k in ks]
        + [{"training": t, "seed": 0, "panel": "rho_rel", "k": k, "value": 1.0 / k} for t in ("rich", "lazy")
           for k in ks])
    summary = richness.eigen_summary(spectra)
    assert summary.loc[("rich", 0), "k where Π̂ ≥ 0.9"] == 2
    assert summary.loc[("lazy", 0), "k where Π̂ ≥ 0.9"] == 6  # not reached within 5 kept directions


def test_judge_refuses_another_experiments_table():
    with pytest.raises(ConfigError):
        verdict(grokking_table(), "R1")  # the grokking runs filed as the shortcut runs
    with pytest.raises(ConfigError):  # a claim on runs that were not analysed
        richness.CHAPTER.claim("R1").judge(richness.analyse({"grokking": grokking_table()}))
    with pytest.raises(ConfigError):
        richness.analyse({"imagenet": grokking_table()})
    with pytest.raises(KeyError):
        richness.CHAPTER.claim("Z9")
