"""Chapter 5's module (nhtlib.chapters.dlr_batchnorm): presets, experiments, and the per-seed estimates behind its claims,
on synthetic run tables with known answers."""
import numpy as np
import pandas as pd
import pytest

from nhtlib.chapters import dlr_batchnorm as richness
from nhtlib.config import ConfigError
from nhtlib.report.verdicts import (ArmComparison, INCONCLUSIVE, MIN_UNITS, NOT_AT_THIS_SCALE, NOT_REPRODUCED, NOT_TESTABLE, PARTLY,
                                    REPRODUCED, SOURCES, PositiveControl)

TESTED = ["R1", "G2", "G1", "A1", "A2", "A3", "B1", "L1", "L2", "E1"]  # the order of the notebook's sections
UNTESTED = ["U-NC", "U-ST", "U-WD", "U-N", "U-I", "U-J", "U-F5", "U-GT", "U-C"]  # the paper's claims no run tests (§5.8)
IDS = TESTED + UNTESTED
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
    assert members == {"shortcut": 6, "grokking": 3, "alpha": 12, "batchnorm": 12, "lr": 9, "shuffle": 12}
    for name, e in plan.items():
        own_seeds = name in ("shuffle", "batchnorm")  # the two pairs with seeds of their own
        assert {c.seed for c in e.configs} == (set(range(5, 11)) if own_seeds else {5, 6, 7}), name
    # B1's pair runs its own seeds too, both arms on every one
    assert sorted(c.seed for c in plan["batchnorm"].configs if c.model.batchnorm) == list(range(5, 11))
    pair = richness.PRESETS["cpu"].replace(vision=richness.PRESETS["cpu"].vision.replace(batchnorm_seeds=None))
    assert len(richness.experiments(pair)["batchnorm"].configs) == 6
    assert "VGG ± BN 6 seeds" in richness.scale_note(richness.PRESETS["cpu"], "cifar10")
    with pytest.raises(ConfigError):
        richness.PRESETS["cpu"].vision.replace(batchnorm_seeds=0)
    # the true / shuffled pair runs its own seeds (cheap: a small subset), both arms on every one
    assert sorted(c.seed for c in plan["shuffle"].configs if c.task.shuffle_labels) == list(range(5, 11))
    default = richness.PRESETS["cpu"].replace(vision=richness.PRESETS["cpu"].vision.replace(shuffle_seeds=None))
    assert len(richness.experiments(default)["shuffle"].configs) == 6
    with pytest.raises(ConfigError):
        richness.PRESETS["cpu"].vision.replace(shuffle_seeds=0)
    with pytest.raises(ConfigError):
        richness.experiments(richness.PRESETS["cpu"], dataset="imagenet")


def test_batchnorm_pair_trains_its_own_epochs_the_lr_sweep_keeps_the_presets():
    """B1's arms run `batchnorm_epochs` (the no-BN VGG-16 needs them to train at all); the lr sweep `epochs`."""
    cpu = richness.PRESETS["cpu"]
    plan = richness.experiments(cpu)
    steps = lambda name: {c.train.steps for c in plan[name].configs}  # noqa: E731
    v = cpu.vision
    assert steps("batchnorm") == {v.batchnorm_epochs * v.n_train // v.batch_size}
    assert steps("lr") == {v.epochs * v.n_train // v.batch_size}
    assert cpu.vision.batchnorm_epochs > cpu.vision.epochs
    same = richness.experiments(cpu.replace(vision=cpu.vision.replace(batchnorm_epochs=None)))
    assert {c.train.steps for c in same["batchnorm"].configs} == steps("lr")
    assert f"VGG ± BN {cpu.vision.batchnorm_epochs}" in richness.scale_note(cpu, "cifar10")
    with pytest.raises(ConfigError):
        cpu.vision.replace(batchnorm_epochs=0)


def test_claims_are_declared_once_with_stable_ids():
    claims = richness.CHAPTER.claims
    assert [c.id for c in claims] == IDS and set(EXPERIMENT_OF) == set(TESTED)
    for c in claims:
        assert c.spec.source in SOURCES and c.where and c.test
    assert {c.id for c in claims if c.spec.rule.null} == {"A2", "L2"}  # B1 compares two arms: not a null claim
    assert {c.id for c in claims if c.spec.source == "book"} == {"R1", "G2"}
    assert {c.id for c in claims if c.control} == {"A2", "L2", "B1"}  # each has its positive control
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


def bn_arms(off_train=0.5, on_dlr=0.1, on_test=0.7):
    return {(("batchnorm", False),): {"dlr": 0.7, "test_acc": 0.2, "train_acc": off_train, "s_init": 0.99},
            (("batchnorm", True),): {"dlr": on_dlr, "test_acc": on_test, "train_acc": 0.9, "s_init": 0.2}}


def test_b1_reads_the_batchnorm_pairs():
    table = final_table("batchnorm", bn_arms(), dataset="cifar10")
    row = verdict(table, "B1")
    assert row.verdict == REPRODUCED and "cifar10" in row.note and "passed" in row.note
    assert richness.batchnorm_caveat(table) == ""
    assert verdict(final_table("batchnorm", bn_arms(on_dlr=0.9, on_test=0.1)), "B1").verdict == NOT_REPRODUCED


def test_b1_a_dead_arm_neither_wins_nor_loses():
    dead = final_table("batchnorm", bn_arms(off_train=0.1))  # the no-BN arm at chance: random features, lazy
    row = verdict(dead, "B1")
    assert row.verdict == INCONCLUSIVE and "never trained" in row.note and "FAILED" in row.note
    assert "more epochs" in row.note and "Caveat" in richness.batchnorm_caveat(dead)
    worse = verdict(final_table("batchnorm", bn_arms(off_train=0.1, on_dlr=0.9, on_test=0.1)), "B1")
    assert worse.verdict == INCONCLUSIVE  # nor can it lose
    with pytest.raises(ConfigError):
        ArmComparison("a comparison", 0.0)  # a comparison of two arms needs its control
    assert ArmComparison("x", 0.0, PositiveControl("y", 0.1)).judge(None, None) == INCONCLUSIVE


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


def fine_grokking_table(dlr, t_grok=60, seeds=3, last=100):
    """Steps 0, 5, .., last: memorised from step 10, test ≥ 95 % from t_grok; dlr(step, seed) gives D_LR."""
    rows = []
    for seed in range(seeds):
        for step in range(0, last + 1, 5):
            rows.append({"experiment": "grokking", "run": seed, "seed": seed, "step": step,
                         "train_acc": 1.0 if step >= 10 else 0.3, "test_acc": 1.0 if step >= t_grok else 0.05,
                         "dlr": dlr(step, seed), "dlr_null": 0.1, "chance": 0.1, "dataset": "mod p"})
    return pd.DataFrame(rows)


def drop_at_grok(step, seed):
    """D_LR flat at 0.6 after memorisation, falling to 0.2 over steps 50–70 (T_grok = 60)."""
    return 0.6 - 0.4 * min(max((step - 50) / 20, 0.0), 1.0) + 0.01 * seed


def test_grokking_points_and_verdicts():
    points = richness.grok_points(grokking_table())
    assert list(points.T_mem) == [2, 2, 2] and list(points.T_grok) == [6, 6, 6]
    assert points.fall.to_numpy() == pytest.approx([0.4, 0.4, 0.4])
    assert points.fall_at_grok.isna().all()  # T_grok − 3h = 1.5 lies before T_mem = 2: no window before
    assert verdict(grokking_table(), "G2").verdict == REPRODUCED
    never = grokking_table(groks=False)
    assert verdict(never, "G2").verdict == NOT_REPRODUCED
    assert verdict(never, "G1").verdict == NOT_TESTABLE  # no fall from memorisation exists without grokking


def test_g1_needs_the_fall_at_t_grok():
    table = fine_grokking_table(drop_at_grok)
    points = richness.grok_points(table)  # h = 15: across [45, 75], before [15, 45]
    assert points.fall_across.to_numpy() == pytest.approx([0.4] * 3) and points.fall_before.to_numpy() == \
        pytest.approx([0.0] * 3)
    row = verdict(table, "G1")
    assert row.verdict == REPRODUCED and "weight decay ≤ 0.01" in row.note  # the missing control arm is named
    drift = fine_grokking_table(lambda step, seed: 0.6 - 0.4 * max(step - 10, 0) / 90)  # weight decay alone
    assert richness.grok_points(drift).fall.to_numpy() == pytest.approx([0.4] * 3)  # falls by 0.4 ...
    assert verdict(drift, "G1").verdict == INCONCLUSIVE  # ... but no faster at T_grok than before: never reproduced
    rises = fine_grokking_table(lambda step, seed: 0.3 + 0.001 * step + 0.01 * seed)
    assert verdict(rises, "G1").verdict == NOT_REPRODUCED  # D_LR rises through grokking
    late = fine_grokking_table(drop_at_grok, t_grok=90)  # T_grok + h = 112.5 is past the last step: censored
    assert richness.grok_points(late).fall_at_grok.isna().all()
    assert verdict(late, "G1").verdict == INCONCLUSIVE


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


def shuffle_arms(true, shuffled, fitted=1.0):
    return {(("shuffle_labels", False),): {"dlr": true, "train_acc": 1.0},
            (("shuffle_labels", True),): {"dlr": shuffled, "train_acc": fitted}}


def test_l2_null_claim_needs_fitted_random_labels():
    assert verdict(final_table("shuffle", shuffle_arms(0.30, 0.31)), "L2").verdict == REPRODUCED
    assert verdict(final_table("shuffle", shuffle_arms(0.031, 0.034), noise=0.0005), "L2").verdict == REPRODUCED
    unfitted = verdict(final_table("shuffle", shuffle_arms(0.30, 0.31, fitted=0.2)), "L2")  # control fails
    assert unfitted.verdict == INCONCLUSIVE
    assert verdict(final_table("shuffle", shuffle_arms(0.30, 0.6)), "L2").verdict == NOT_REPRODUCED


def test_l2_margin_is_relative_to_the_true_labels_value():
    # 0.03 against 0.07: inside an absolute ±0.05, yet more than twice as lazy: not "as rich"
    row = verdict(final_table("shuffle", shuffle_arms(0.03, 0.07), noise=0.0005), "L2")
    assert row.verdict == NOT_REPRODUCED and row.low > 1.0


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


def eigen_table(rich_k, lazy_k, seeds=3, kept=50):
    """A Shortcut-MNIST run table with eigen columns: Π̂(k) = min(1, k / k_arm), ρ_k flat over the first k_arm."""
    arms = {}
    for label, k_arm in (("rich (all layers)", rich_k), ("lazy (last layer only)", lazy_k)):
        metrics = {}
        for k in range(1, kept + 1):
            metrics[f"pi_hat:{k}"] = min(1.0, k / k_arm)
            metrics[f"pi_star:{k}"] = min(1.0, k / k_arm)
            metrics[f"rho_rel:{k}"] = 1.0 if k <= k_arm else 1e-3
        arms[(("training", label), ("trainable", "all" if label.startswith("rich") else "head"))] = metrics
    return final_table("shortcut", arms, seeds=seeds, noise=0.0)


def test_e1_needs_about_c_rich_directions():
    row = verdict(eigen_table(rich_k=7, lazy_k=25), "E1")  # rich k(Π̂ ≥ 0.9) = 7 for C = 10
    assert row.verdict == REPRODUCED and "about C: all 3 seeds: 0.70" in row.ours
    wide = verdict(eigen_table(rich_k=40, lazy_k=60), "E1")  # lazy > rich, yet rich uses 36 ≫ 2 C directions
    assert wide.verdict == PARTLY and "about C: all 3 seeds: 3.60" in wide.ours


def test_untested_claims_say_what_would_test_them():
    rows = {c.id: c.judge(richness.analyse({})) for c in richness.CHAPTER.claims if c.id in UNTESTED}
    for cid, row in rows.items():
        assert row.verdict == NOT_TESTABLE and row.untested == NOT_AT_THIS_SCALE, cid
        assert row.source == "D_LR" and "What would test it" in row.rule and "[" in row.paper, cid


def test_judge_refuses_another_experiments_table():
    with pytest.raises(ConfigError):
        verdict(grokking_table(), "R1")  # the grokking runs filed as the shortcut runs
    with pytest.raises(ConfigError):  # a claim on runs that were not analysed
        richness.CHAPTER.claim("R1").judge(richness.analyse({"grokking": grokking_table()}))
    with pytest.raises(ConfigError):
        richness.analyse({"imagenet": grokking_table()})
    with pytest.raises(KeyError):
        richness.CHAPTER.claim("Z9")
