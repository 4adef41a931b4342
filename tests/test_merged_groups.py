"""Merged batched groups: members that differ only in init-only model fields (`ModelConfig.INIT_ONLY`, e.g. the
MLP's output_init_scale α) or in λ train in one batched call, each member equal to the same member trained in
today's per-α batch; chapter 3's ρ and phase sweeps of one ρ train in one call, their tables unchanged."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib.chapters import border_cifar as borders
from nhtlib.config import ConfigError
from nhtlib.engine import plan
from nhtlib.engine.sweep import Sweep, batch_groups
from nhtlib.models import MODELS
from nhtlib.models.base import ModelConfig, init_under_seed

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
MLP = nht.models.config("mlp", hidden=(16,))
TRAIN = nht.TrainConfig(steps=40, n_logs=4, batch_size=16, lr=1e-2)
ALPHAS = (3.0, 30.0)


def _calls(monkeypatch) -> list[tuple[str, int]]:
    """(desc, members) of every batched training call from now on."""
    calls: list[tuple[str, int]] = []
    orig = nht.sweep._train_batch

    def counting(configs, keys, cache, device, progress, extra_metrics, desc, *a, **k):
        calls.append((desc, len(configs)))
        return orig(configs, keys, cache, device, progress, extra_metrics, desc, *a, **k)

    monkeypatch.setattr(nht.sweep, "_train_batch", counting)
    return calls


def _stored(cache: nht.RunCache, keys) -> list[pd.DataFrame]:
    return [cache.load(key).drop(columns=["wall_s"], errors="ignore") for key in keys]


def test_init_only_fields_are_fields_of_models_that_build_such_members():
    assert MODELS["mlp"].INIT_ONLY == ("output_init_scale",)
    for name, kind in MODELS.items():
        fields = {f.name for f in dataclasses.fields(kind)}
        assert set(kind.INIT_ONLY) <= fields, name
        if kind.INIT_ONLY:  # the default build_members refuses members that differ: such a model overrides it
            assert kind.build_members is not ModelConfig.build_members, name


def test_signature_ignores_init_only_fields_not_the_architecture_and_keys_stay_apart():
    base = nht.RunConfig(TASK, MLP, TRAIN)
    lazy = base.replace(model=MLP.replace(output_init_scale=30.0))
    wider = base.replace(model=MLP.replace(hidden=(32,)))
    assert lazy.batch_signature() == base.batch_signature() != wider.batch_signature()
    assert lazy.digest() != base.digest()  # configs (and so cache keys) keep α
    assert len(set(nht.sweep.member_keys([base, lazy]))) == 2
    assert batch_groups([base, wider, lazy]) == [[0, 2], [1]]


def test_members_are_initialised_from_their_own_configs():
    members = [(MLP.replace(output_init_scale=a), seed) for a, seed in ((3.0, 0), (30.0, 1), (3.0, 1))]
    model = MLP.build_members((8,), 2, members)
    for k, (config, seed) in enumerate(members):
        single = init_under_seed(seed, lambda: config.single(8, 2))
        assert torch.equal(model.layers["output"].weight[k], single[-1].weight)
        assert torch.equal(model.layers["input"].weight[k], single[0].weight)
        alone = config.build((8,), 2, [seed])  # K = 1 through `build`
        for name, p in alone.named_parameters():
            assert torch.equal(dict(model.named_parameters())[name][k], p[0])
    with pytest.raises(ConfigError, match="init-only"):
        MLP.build_members((8,), 2, [(MLP, 0), (MLP.replace(hidden=(32,)), 1)])


def test_a_model_without_init_only_fields_builds_members_as_build():
    cfg = nht.models.config("feature_mlp", hidden=(8,))
    a, b = cfg.build_members((6,), 3, [(cfg, 4), (cfg, 5)]), cfg.build((6,), 3, [4, 5])
    for (name, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(p, q), name
    with pytest.raises(ConfigError):
        cfg.build_members((6,), 3, [(cfg, 4), (cfg.replace(hidden=(16,)), 5)])


def test_two_alphas_train_in_one_call_equal_to_per_alpha_calls(tmp_path, monkeypatch):
    """2 α × 2 λ × 2 seeds: one merged call of 8 == the two per-α calls of 4 (today's batches), bitwise."""
    calls = _calls(monkeypatch)
    configs = nht.grid(nht.RunConfig(TASK, MLP, TRAIN), seeds=[0, 1], weight_decays=[0.1, 1.0],
                       output_init_scale=ALPHAS)
    keys = nht.sweep.member_keys(configs)
    merged = nht.RunCache(tmp_path / "merged")
    table = nht.run(configs, cache=merged, progress=False)
    assert calls == [("training", 8)]
    assert sorted(table.output_init_scale.unique()) == list(ALPHAS)  # the table is as before: α a column
    split = nht.RunCache(tmp_path / "per_alpha")
    for alpha in ALPHAS:
        nht.run([c for c in configs if c.model.output_init_scale == alpha], cache=split, progress=False)
    assert calls[1:] == [("training", 4), ("training", 4)]
    for key, ours, ref in zip(keys, _stored(merged, keys), _stored(split, keys)):
        pd.testing.assert_frame_equal(ours, ref, check_exact=True, obj=key)
    finals = [t.norm_sq.iloc[-1] for t in _stored(merged, keys)]
    assert len(set(np.round(finals, 6))) == len(finals)  # every member is its own run (no α silently shared)


# ------------------------------------------------------------------------------ chapter 3: ρ and phase sweeps

TINY = borders.PRESETS["smoke"].replace(n_train=40, n_test=20, epochs=1, batch_size=20, seeds=1, lambdas=(0.1,),
                                        rhos=(0.5, 0.95), phase_lambdas=(0.01, 1.0), phase_seeds=1,
                                        ablation_seeds=1, ablation_epochs=1)
TOGETHER = borders.RHO_PHASE_SWEEP.format(rho=0.5)
PARTS = (borders.RHO_SWEEP.format(rho=0.5), borders.PHASE_SWEEP.format(rho=0.5))


def _fake_cifar(root, per_class=6):
    from PIL import Image

    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        for label in range(10):
            folder = root / "cifar10" / split / f"c{label}"
            folder.mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(folder / f"{i:04d}.png")
    return str(root)


def test_rho_and_phase_sweeps_are_declared_together_and_planned_as_one_group(monkeypatch):
    declared = {s.name: s for s in borders.sweeps(TINY, None)}
    together, rho, phase = declared[TOGETHER], *(declared[name] for name in PARTS)
    assert together.configs == rho.configs + phase.configs and together.extra_metrics is None
    assert [c.train.weight_decay for c in rho.configs] == [borders.LAMBDA_B]  # the parts are as before
    assert sorted({c.train.weight_decay for c in phase.configs}) == [0.01, 1.0] and len(phase.configs) == 2
    names = list(declared)
    assert names.index(TOGETHER) < min(names.index(name) for name in PARTS)  # trained before they are read
    assert borders.RHO_PHASE_SWEEP.format(rho=0.95) not in declared  # ρ = 0.95's phase cells are the λ sweep's
    no_phase = [s.name for s in borders.sweeps(TINY.replace(phase_lambdas=()), None)]
    assert not any("phase" in name for name in no_phase)

    planned: list[tuple[str, int]] = []
    monkeypatch.setattr(plan, "plan_group", lambda sweep, members, *a, **k: planned.append((sweep.name,
                                                                                            len(members))))
    plan.plan_sweeps(borders.NAME, "smoke", list(declared.values()), plan.H200, time_here=False)
    assert (TOGETHER, 3) in planned and not any(name in PARTS for name, _ in planned)
    with pytest.raises(ConfigError, match="extra metrics"):
        borders.trained_together("mixed", [declared[borders.LAMBDA_SWEEP], rho])


def test_the_chapter_trains_the_merged_sweep_before_reading_its_parts(monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(borders, "_load", lambda sweep, preset, **k: order.append(sweep.name) or _table(sweep))
    monkeypatch.setattr(Sweep, "run", lambda self, **k: order.append(self.name))
    monkeypatch.setattr(borders.plan, "check_data", lambda *a, **k: None)
    borders.run(TINY, None, progress=False)
    assert order.index(TOGETHER) < min(order.index(name) for name in PARTS)
    assert order.count(TOGETHER) == 1


def _table(sweep: Sweep) -> pd.DataFrame:
    """A run table with a norm peak and a decay per member, for the chapter's summaries (not under test here)."""
    rows = [{"step": e, "epoch": e, "norm_sq": 100.0 + 25 * min(e, 4) - 10.0 * max(e - 4, 0), "clean_acc": 0.1,
             "coloured_acc": 0.9, "shortcut_acc": 1.0, "train_acc": 0.9, "diverged_step": np.nan,
             "lam": c.train.weight_decay, "seed": c.seed,
             **{f"norm_sq:{layer}": 10.0 for layer in (*borders.LAYERS, "net.head")}}
            for c in sweep.configs for e in range(9)]
    return pd.DataFrame(rows)


def test_merged_rho_and_phase_call_equals_the_separate_calls(tmp_path, monkeypatch):
    """ρ = 0.5's sweeps trained in one call of 3, then read back: the same tables as two separate calls (1 + 2),
    within test_train's batched-vs-alone tolerance (the grouped convolutions of 3 members round otherwise than those
    of 1 or 2: about 1e-8 relative in the norms and losses on this CPU)."""
    root = _fake_cifar(tmp_path / "data")
    declared = {s.name: s for s in borders.sweeps(TINY, root)}
    calls = _calls(monkeypatch)
    separate = nht.RunCache(tmp_path / "separate")
    tables_separate = [declared[name].run(cache=separate, progress=False, device="cpu") for name in PARTS]
    assert calls == [(PARTS[0], 1), (PARTS[1], 2)]
    merged = nht.RunCache(tmp_path / "merged")
    declared[TOGETHER].run(cache=merged, progress=False, device="cpu")
    tables_merged = [declared[name].run(cache=merged, progress=False, device="cpu") for name in PARTS]
    assert calls[2:] == [(TOGETHER, 3)]  # the parts were read back, not trained
    for ours, ref in zip(tables_merged, tables_separate):
        pd.testing.assert_frame_equal(ours.drop(columns=["wall_s"]), ref.drop(columns=["wall_s"]), rtol=1e-5)
        exact = [c for c in ref.columns if c.endswith("_acc")]  # as test_train's: accuracies to 1e-9
        pd.testing.assert_frame_equal(ours[exact], ref[exact], check_exact=True)
