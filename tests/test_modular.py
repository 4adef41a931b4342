"""Modular arithmetic: the task (splits, labels, seeds), the two models (sizes, shapes, init) and the batched loop
(member k of a batch == the same model trained alone with torch.optim.AdamW)."""
import random

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nhtlib as nht
from nhtlib.data import stack_members
from nhtlib.data.modular import ModularTask, all_pairs, modular_labels
from reference import train_alone


@pytest.mark.parametrize("p,frac", [(7, 0.5), (59, 0.4), (97, 0.5)])
def test_split_sizes_disjoint_and_complete(p, frac):
    task = ModularTask(p=p, train_frac=frac)
    data = task.build(3)
    train, test = data.splits["train"], data.splits["test"]
    assert train.size == int(frac * p * p) and train.size + test.size == p * p
    codes = lambda s: set((s.x[:, 0] * p + s.x[:, 1]).tolist())  # noqa: E731
    assert not codes(train) & codes(test)
    assert codes(train) | codes(test) == set(range(p * p))
    assert train.x.shape == (train.size, 2) and train.x.dtype == torch.long and data.n_classes == p


@pytest.mark.parametrize("op,fn", [("+", lambda a, b, p: (a + b) % p), ("-", lambda a, b, p: (a - b) % p),
                                   ("*", lambda a, b, p: (a * b) % p)])
def test_labels(op, fn):
    p = 13
    data = ModularTask(p=p, op=op, train_frac=0.3).build(0)
    for split in data.splits.values():
        for (a, b), y in zip(split.x.tolist(), split.y.tolist()):
            assert y == fn(a, b, p) and 0 <= y < p
    assert modular_labels(torch.tensor([2]), torch.tensor([5]), 7, "-").item() == 4


def test_split_is_seeded_and_matches_the_companion_code():
    task = ModularTask(p=11, train_frac=0.5)
    a, b, c = task.build(42), task.build(42), task.build(43)
    assert torch.equal(a.splits["train"].x, b.splits["train"].x)
    assert not torch.equal(a.splits["train"].x, c.splits["train"].x)
    pairs = [(i, j) for i in range(11) for j in range(11)]  # NSDL's build_data
    random.Random(42).shuffle(pairs)
    assert a.splits["train"].x.tolist() == [list(q) for q in pairs[:int(len(pairs) * 0.5)]]
    assert all_pairs(3).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0], [2, 1], [2, 2]]


def test_members_get_their_own_splits():
    task = ModularTask(p=7, train_frac=0.5)
    data = stack_members([task.build(s) for s in (0, 1, 2)])
    assert data.splits["train"].per_member and data.splits["train"].x.shape == (3, 24, 2)
    for k, s in enumerate((0, 1, 2)):
        assert torch.equal(data.splits["train"].x[k], task.build(s).splits["train"].x)


def test_config_validation():
    with pytest.raises(nht.config.ConfigError, match="op"):
        ModularTask(op="/")
    with pytest.raises(nht.config.ConfigError, match="train_frac"):
        ModularTask(train_frac=1.0)


def test_parameter_counts_and_shapes():
    tf = nht.models.config("transformer")
    assert sum(q.numel() for q in tf.single(97).parameters()) == 223_713  # nht.md §3.1
    batched = tf.build((2,), 97, seeds=[0, 1, 2])
    assert sum(q.numel() for q in batched.parameters()) == 3 * 223_713
    mlp = nht.models.config("modular_mlp")
    p = 59
    assert sum(q.numel() for q in mlp.single(p).parameters()) == 2 * p * 128 + 256 * 256 + 256 + 256 * p + p
    x = torch.randint(0, 59, (3, 10, 2))
    assert mlp.build((2,), 59, seeds=[0, 1, 2])(x).shape == (3, 10, 59)
    assert tf.build((2,), 59, seeds=[0, 1, 2])(x).shape == (3, 10, 59)
    layers = {nht.norms.layer_of(n) for n, _ in batched.named_parameters()}
    assert {"embedding", "head"} <= layers


@pytest.mark.parametrize("name,kw", [("modular_mlp", {}), ("modular_mlp", {"fused_embedding": False}),
                                     ("transformer", {})])
def test_batched_forward_equals_single_models(name, kw):
    cfg = nht.models.config(name, **kw)
    seeds = [4, 9]
    batched = cfg.build((2,), 23, seeds)
    x = torch.randint(0, 23, (2, 50, 2))
    out = batched(x)
    for k, s in enumerate(seeds):
        torch.manual_seed(s)
        single = cfg.single(23)
        torch.testing.assert_close(out[k], single(x[k]), rtol=1e-5, atol=1e-5)


def reference_run(task, model_cfg, cfg, seed, lr, wd):
    """One member trained alone: the plain PyTorch model and torch.optim.AdamW."""
    torch.manual_seed(seed)
    return train_alone(model_cfg.single(task.p), task.build(seed), cfg, seed, lr, wd)


@pytest.mark.parametrize("name,train_cfg", [
    ("modular_mlp", nht.TrainConfig(steps=25, n_logs=5, decay="matrices")),
    ("transformer", nht.TrainConfig(steps=25, n_logs=5, batch_size=64, decay="all")),
])
def test_batched_member_equals_model_trained_alone(name, train_cfg):
    task = ModularTask(p=13, train_frac=0.5)
    model_cfg = nht.models.config(name)
    seeds, lrs, wds = [0, 1, 2], [3e-3, 1e-3, 5e-3], [1.0, 0.1, 2.0]
    configs = [nht.RunConfig(task, model_cfg, train_cfg.replace(lr=lr, weight_decay=wd), seed=s)
               for s, lr, wd in zip(seeds, lrs, wds)]
    batched = nht.run(configs, progress=False)
    for i, (s, lr, wd) in enumerate(zip(seeds, lrs, wds)):
        ref = reference_run(task, model_cfg, train_cfg, s, lr, wd)
        ours = batched[batched.run == i].reset_index(drop=True)
        assert list(ours.step) == list(ref.step)
        for col in ("norm_sq", "test_loss"):
            np.testing.assert_allclose(ours[col], ref[col], rtol=2e-4, err_msg=col)
        np.testing.assert_allclose(ours.test_acc, ref.test_acc, atol=2 / 85)  # at most a near-tie or two flips
