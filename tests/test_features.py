"""Feature extraction, the member-batched wrapper, the VGG/ResNet models and the probe metrics in a training run."""
import pytest
import torch

import nhtlib as nht
from nhtlib.analysis.metrics.dlr import dlr
from nhtlib.analysis.metrics.features import extract, richness_probe
from nhtlib.models.base import init_under_seed


def tiny(name, **kw):
    defaults = {"vgg16": dict(width=1 / 16), "resnet18": dict(width=1 / 16), "feature_mlp": dict(hidden=(12, 8))}
    return nht.models.config(name, **{**defaults[name], **kw})


SHAPES = {"vgg16": (3, 8, 8), "resnet18": (3, 8, 8), "feature_mlp": (1, 6, 6)}
CASES = [("vgg16", {"batchnorm": False}), ("vgg16", {"batchnorm": True}), ("resnet18", {"norm": "batch"}),
         ("resnet18", {"norm": "group"}), ("resnet18", {"norm": "none"}), ("feature_mlp", {})]


@pytest.mark.parametrize("name,kw", CASES)
def test_stacked_members_match_single_models(name, kw):
    cfg = tiny(name, **kw)
    shape = SHAPES[name]
    seeds = [3, 5]
    model = cfg.build(shape, 4, seeds).eval()
    x = torch.randn(2, 7, *shape)
    out = model(x)
    assert out.shape == (2, 7, 4)
    for k, s in enumerate(seeds):
        single = init_under_seed(s, lambda: cfg.single(shape, 4)).eval()
        torch.testing.assert_close(out[k], single(x[k]), rtol=1e-5, atol=1e-5)
    phi, f = extract(model, x[0])
    assert phi.shape[:2] == (2, 7) and f.shape == (2, 7, 4) and phi.dtype == torch.float64
    head = dict(model.named_parameters())
    torch.testing.assert_close(f[1], (phi[1] @ head["net.head.weight"][1].double().T + head["net.head.bias"][1]),
                               rtol=1e-5, atol=1e-5)


def test_k1_and_batchnorm_training_updates_running_stats_and_grads():
    model = tiny("vgg16", batchnorm=True).build((3, 8, 8), 4, [0])
    x = torch.randn(1, 16, 3, 8, 8)
    before = dict(model.named_buffers())["net.body.1.running_mean"].clone()
    model.train()
    model(x).sum().backward()
    assert not torch.equal(before, dict(model.named_buffers())["net.body.1.running_mean"])
    assert all(p.grad is not None for p in model.parameters())


def test_head_only_and_centred_scaled_output():
    model = tiny("feature_mlp", trainable="head", centred=True, output_scale=10.0).build((1, 6, 6), 3, [0, 1])
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["net.head.weight", "net.head.bias"]
    x = torch.randn(2, 5, 1, 6, 6)
    out = model(x)
    assert torch.allclose(out, torch.zeros(2, 5, 3), atol=1e-6)  # f_theta0 - f_theta0 = 0 at init
    out.sum().backward()
    assert model.net.head.weight.grad is not None and model.net.body[1].weight.grad is None


def test_extract_with_hooks_on_other_models():
    batched = nht.models.config("mlp", hidden=(9,)).build((5,), 3, [0, 1])
    x = torch.randn(11, 5)
    phi, f = extract(batched, x)
    assert phi.shape == (2, 11, 9) and f.shape == (2, 11, 3)
    torch.testing.assert_close(f.float(), batched(x.expand(2, 11, 5)))
    single = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    phi, f = extract(single, x, member_batched=False, batch_size=4)
    assert phi.shape == (1, 11, 6) and f.shape == (1, 11, 3)
    assert single.training  # the mode is restored


def test_richness_probe_in_a_training_run():
    task = nht.data.sparse_parity.SparseParityTask(n_bits=6, relevant_bits=2, n_train=64, n_test=32)
    cfg = nht.RunConfig(task=task, model=tiny("feature_mlp", hidden=(16,)),
                        train=nht.TrainConfig(lr=1e-2, steps=20, n_logs=2))
    table = nht.run(nht.grid(cfg, seeds=[0, 1]), progress=False, extra_metrics=richness_probe(64, eigen_k=3))
    for col in ("dlr", "dlr_centred", "dlr_null", "nc1", "nc2_equinorm", "s_init", "theta_dist_rel", "pi_hat:3",
                "rho_rel:1"):
        assert col in table and table[col].notna().all(), col
    first = table[table.step == 0]
    assert (first.s_init - 1).abs().max() < 1e-9 and first.theta_dist_rel.abs().max() < 1e-12
    assert table.dlr.between(0, 1).all()
    last = table[table.step == 20]
    assert (last.theta_dist_rel > 0).all()
    # the probe's D_LR is the metric on the extracted features
    model = cfg.model.build((6,), 2, [0])
    phi, f = extract(model, task.build(0).splits["train"].inputs()[:64])
    assert dlr(phi[0], f[0]) == pytest.approx(first[first.seed == 0].dlr.iloc[0], abs=1e-9)


def test_stacked_modular_mlp_matches_the_grokking_model():
    stacked = nht.models.config("modular_mlp_stacked", d_embed=8, hidden=16).build((2,), 7, [0, 1])
    batched = nht.models.config("modular_mlp", d_embed=8, hidden=16).build((2,), 7, [0, 1])
    x = torch.randint(0, 7, (2, 5, 2))
    torch.testing.assert_close(stacked(x), batched(x), rtol=1e-5, atol=1e-5)
    phi, f = extract(stacked, x[0])
    assert phi.shape == (2, 5, 16) and f.shape == (2, 5, 7)


def test_richness_probe_with_per_member_splits():
    task = nht.data.modular.ModularTask(p=7, train_frac=0.5)
    cfg = nht.RunConfig(task=task, model=nht.models.config("modular_mlp_stacked", d_embed=4, hidden=8),
                        train=nht.TrainConfig(lr=1e-2, steps=3, n_logs=1))
    table = nht.run(nht.grid(cfg, seeds=[0, 1]), progress=False, extra_metrics=richness_probe(100))
    assert table.dlr.notna().all() and table.nc1.notna().all()
    assert table[table.step == 0].dlr.nunique() == 2  # each member probed on its own split
