"""K > 1 members with BatchNorm go through vmap (not a loop) and equal the K single models called one by one."""
import warnings

import pandas as pd
import pytest
import torch
from torch import nn

import nhtlib as nht
from nhtlib.data import Dataset, Split
from nhtlib.models.base import init_under_seed
from nhtlib.engine.train import member_loss, train

SHAPE, N_CLASSES, SEEDS = (3, 16, 16), 5, [0, 1, 2]
CASES = {"vgg16_bn": ("vgg16", dict(batchnorm=True, width=0.0625)),
         "resnet18_bn": ("resnet18", dict(norm="batch", width=0.125))}
TOL = dict(rtol=1e-5, atol=1e-5)


def model_config(case, **kw):
    name, defaults = CASES[case]
    return nht.models.config(name, **{**defaults, **kw})


def stacked_and_singles(case, **kw):
    cfg = model_config(case, **kw)
    model = cfg.build(SHAPE, N_CLASSES, SEEDS)
    singles = [init_under_seed(s, lambda: cfg.single(SHAPE, N_CLASSES)) for s in SEEDS]
    return model, singles


def count_head_calls(model):
    """How often the member function runs per forward: once under vmap, K times member by member."""
    calls = []
    model.net.head.register_forward_pre_hook(lambda module, inputs: calls.append(1))
    return calls


def inputs(seed=0, batch=8):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(len(SEEDS), batch, *SHAPE, generator=g),
            torch.randint(0, N_CLASSES, (len(SEEDS), batch), generator=g))


def assert_buffers_equal(model, singles):
    stacked = dict(model.net.named_buffers())
    for k, single in enumerate(singles):
        for name, ref in single.named_buffers():
            if ref.dtype == torch.int64:  # num_batches_tracked
                assert torch.equal(stacked[name][k], ref), (name, k)
            else:
                torch.testing.assert_close(stacked[name][k], ref, **TOL, msg=f"{name}, member {k}")


@pytest.mark.parametrize("case", CASES)
def test_train_mode_forward_is_batched_and_equals_single_models(case):
    model, singles = stacked_and_singles(case)
    model.train()
    calls = count_head_calls(model)
    x, _ = inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model(x)
        out = model(x + 1.0)  # a second batch: running stats move again, num_batches_tracked = 2
    assert len(calls) == 2, "BatchNorm members should go through vmap (one member-function call per forward)"
    assert not [w for w in caught if "performance drop" in str(w.message)], "a vmap batching rule is missing"
    for k, single in enumerate(singles):
        single.train()
        single(x[k])
        torch.testing.assert_close(out[k], single(x[k] + 1.0), **TOL)
    assert_buffers_equal(model, singles)
    nbt = [b for n, b in model.net.named_buffers() if n.endswith("num_batches_tracked")]
    assert nbt and all(b.dtype == torch.int64 and b.tolist() == [2] * len(SEEDS) for b in nbt)
    first_bn = next(m for m in singles[0].modules() if isinstance(m, nn.BatchNorm2d))
    assert not torch.equal(first_bn.running_mean, torch.zeros_like(first_bn.running_mean))


@pytest.mark.parametrize("case", CASES)
def test_gradients_of_summed_member_losses_equal_single_gradients(case):
    model, singles = stacked_and_singles(case)
    model.train()
    x, y = inputs(1)
    member_loss(model(x), y).sum().backward()
    grads = {n: p.grad for n, p in model.net.named_parameters()}
    for k, single in enumerate(singles):
        single.train()
        nn.functional.cross_entropy(single(x[k]), y[k]).backward()
        for name, p in single.named_parameters():
            torch.testing.assert_close(grads[name][k], p.grad, **TOL, msg=f"{name}, member {k}")


@pytest.mark.parametrize("case", CASES)
def test_eval_mode_uses_each_members_running_stats(case):
    model, singles = stacked_and_singles(case)
    x, _ = inputs(2)
    model.train()
    model(x * 2.0 + 0.5)  # non-trivial, member-specific running statistics
    for k, single in enumerate(singles):
        single.train()
        single(x[k] * 2.0 + 0.5)
    model.eval()
    calls = count_head_calls(model)
    before = {n: b.clone() for n, b in model.net.named_buffers()}
    out = model(x)
    phi, logits = model.features_and_outputs(x)
    assert len(calls) == 2
    for name, b in model.net.named_buffers():  # eval mode leaves the running statistics alone
        assert torch.equal(b, before[name]), name
    for k, single in enumerate(singles):
        single.eval()
        seen = []
        single.head.register_forward_hook(lambda module, inp, output: seen.append(inp[0]))
        ref = single(x[k])
        torch.testing.assert_close(out[k], ref, **TOL)
        torch.testing.assert_close(logits[k], ref, **TOL)
        torch.testing.assert_close(phi[k], seen[0], **TOL)


@pytest.mark.parametrize("case", CASES)
def test_features_and_outputs_in_train_mode(case):
    # in float64: in float32 the features of 13 conv + BatchNorm layers differ by ~2e-5 (relative 1e-5) between
    # vmap's grouped convolution and the plain one (rounding, renormalised by every BatchNorm); the small head
    # weights hide that in the logits
    model, singles = stacked_and_singles(case)
    model.double().train()
    x, _ = inputs(3)
    x = x.double()
    phi, logits = model.features_and_outputs(x)
    assert phi.shape[:2] == (len(SEEDS), x.shape[1]) and phi.dtype == torch.float64
    for k, single in enumerate(singles):
        single.double().train()
        seen = []
        single.head.register_forward_hook(lambda module, inp, output: seen.append(inp[0]))
        torch.testing.assert_close(logits[k], single(x[k]), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(phi[k], seen[0], rtol=1e-10, atol=1e-10)
    assert_buffers_equal(model, singles)


def assert_same_buffers(model, reference):
    ref = dict(reference.named_buffers())
    for name, b in model.named_buffers():
        if b.is_floating_point():
            torch.testing.assert_close(b, ref[name], **TOL, msg=name)
        else:
            assert torch.equal(b, ref[name]), name


def perturbed_pair(case, **kw):
    """The batched model and the same model forced through the member loop, parameters moved off the init."""
    pair = []
    for loop in (False, True):
        model, _ = stacked_and_singles(case, **kw)
        model._loop_batchnorm = loop
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=g))
        pair.append(model)
    return pair


@pytest.mark.parametrize("case", CASES)
def test_centred_output_equals_the_loop_including_the_initial_buffers(case):
    batched, looped = perturbed_pair(case, centred=True, output_scale=3.0)
    x, y = inputs(4)
    for model in (batched, looped):
        model.train()
    out_b, out_l = batched(x), looped(x)
    assert out_b.abs().max() > 1e-3  # the perturbation moved f away from f_0
    torch.testing.assert_close(out_b, out_l, **TOL)
    assert_same_buffers(batched, looped)  # net.* and init.*
    # the forward on the initial members updated the stored initial running stats (as the loop always did):
    # row k equals the freshly initialised single model k after one train-mode call on x[k]
    _, singles = stacked_and_singles(case)
    init = dict(batched.init.named_buffers())
    for k, single in enumerate(singles):
        single.train()
        single(x[k])
        for name, ref in single.named_buffers():
            stored = init[name.replace(".", "__")][k]
            if ref.dtype == torch.int64:
                assert torch.equal(stored, ref), name
            else:
                torch.testing.assert_close(stored, ref, **TOL, msg=name)
    for model in (batched, looped):
        model.eval()
    torch.testing.assert_close(batched(x), looped(x), **TOL)
    phi_b, f_b = batched.features_and_outputs(x, initial=True)
    phi_l, f_l = looped.features_and_outputs(x, initial=True)
    torch.testing.assert_close(phi_b, phi_l, **TOL)
    torch.testing.assert_close(f_b, f_l, **TOL)


def test_momentum_none_in_train_mode_falls_back_to_the_loop():
    model, singles = stacked_and_singles("vgg16_bn")
    for m in [*model.modules(), *(m for s in singles for m in s.modules())]:
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average: vmap cannot read num_batches_tracked as a number
    calls = count_head_calls(model)
    x, _ = inputs(5)
    model.train()
    out = model(x)
    assert len(calls) == len(SEEDS)
    for k, single in enumerate(singles):
        single.train()
        torch.testing.assert_close(out[k], single(x[k]), **TOL)
    assert_buffers_equal(model, singles)
    model.eval()
    out = model(x)
    assert len(calls) == len(SEEDS) + 1  # eval mode reads the statistics only: vmap again
    for k, single in enumerate(singles):
        single.eval()
        torch.testing.assert_close(out[k], single(x[k]), **TOL)


def tiny_dataset():
    g = torch.Generator().manual_seed(11)
    def split(n):
        return Split(torch.randn(n, *SHAPE, generator=g), torch.randint(0, N_CLASSES, (n,), generator=g))

    return Dataset({"train": split(24), "test": split(10)}, N_CLASSES)


@pytest.mark.parametrize("case,dtype,optimizer", [(c, torch.float64, "adamw") for c in CASES]
                         + [("vgg16_bn", torch.float32, "sgd")])
def test_short_training_run_batched_equals_the_loop(case, dtype, optimizer):
    # AdamW in float32 would turn the ~1e-7 rounding differences of gradients near 0 into +-lr steps (m / sqrt(v)
    # takes the sign of the noise), so the AdamW runs are in float64; SGD (momentum 0.9) is compared in float32
    cfg = nht.TrainConfig(optimizer=optimizer, momentum=0.9, steps=5, n_logs=5, batch_size=8, lr=3e-3,
                          weight_decay=0.1, eval_batch_size=7)
    data = tiny_dataset()
    data = Dataset({name: Split(sp.x.to(dtype), sp.y) for name, sp in data.splits.items()}, data.n_classes)
    tables, models = [], []
    for loop in (False, True):
        model = model_config(case).build(SHAPE, N_CLASSES, SEEDS).to(dtype)
        model._loop_batchnorm = loop
        tables.append(train(model, data, cfg, seeds=SEEDS, lrs=[3e-3, 1e-3, 1e-2], progress=False))
        models.append(model)
    for batched, looped in zip(*tables):
        assert list(batched["step"]) == [0, 1, 2, 3, 4, 5]
        cols = [c for c in batched.columns if c != "wall_s"]
        pd.testing.assert_frame_equal(batched[cols], looped[cols], check_exact=False, rtol=1e-5, atol=1e-5)
    assert tables[0][0]["train_loss"].iloc[-1] != tables[0][0]["train_loss"].iloc[0]  # it did train
    assert_same_buffers(*models)
    nbt = dict(models[0].net.named_buffers())["body.1.num_batches_tracked"]
    assert nbt.tolist() == [5] * len(SEEDS)
