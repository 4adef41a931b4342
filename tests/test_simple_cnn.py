"""The paper's SimpleCNN: parameter counts and member-batched == single."""
import torch

import nhtlib as nht
from nhtlib.models.simple_cnn import SimpleCNNNet


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def test_parameter_counts():
    assert n_params(SimpleCNNNet(3, 10)) == 287_850
    assert n_params(SimpleCNNNet(3, 2)) == 286_818
    model = nht.models.config("simple_cnn").build((3, 16, 16), 10, [0, 1, 2])
    assert n_params(model) == 3 * 287_850
    names = {n.rsplit(".", 1)[0] for n, _ in model.named_parameters()}
    assert names == {"conv1", "conv2", "conv3", "conv4", "conv5", "conv6", "head"}


def test_init_matches_single_under_seed():
    model = nht.models.config("simple_cnn").build((3, 8, 8), 10, [5, 7])
    torch.manual_seed(7)
    single = SimpleCNNNet(3, 10)
    assert torch.equal(model.conv3.weight[1], single.conv3.weight)
    assert torch.equal(model.head.bias[1], single.head.bias)


def test_batched_equals_single_over_training_steps():
    """Three AdamW steps of 2 batched members (own lr and weight decay) == two single models with torch.optim."""
    seeds, lrs, wds = [0, 1], [1e-3, 3e-3], [0.1, 1.0]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 6, 3, 8, 8, generator=g)
    y = torch.randint(0, 10, (2, 6), generator=g)
    for kind in ("simple_cnn", "simple_cnn_stacked"):
        model = nht.models.config(kind).build((3, 8, 8), 10, seeds)
        opt = nht.train.make_optimizer(model, nht.TrainConfig(), torch.tensor(lrs, dtype=torch.float64),
                                       torch.tensor(wds, dtype=torch.float64))
        singles = []
        for s in seeds:
            torch.manual_seed(s)
            singles.append(SimpleCNNNet(3, 10))
        opts = [torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=wd) for m, lr, wd in zip(singles, lrs, wds)]
        for _ in range(3):
            loss = nht.train.member_loss(model(x), y).sum()
            opt.zero_grad()
            loss.backward()
            opt.step(1.0)
            for k, (m, o) in enumerate(zip(singles, opts)):
                single_loss = torch.nn.functional.cross_entropy(m(x[k]), y[k])
                o.zero_grad()
                single_loss.backward()
                o.step()
        with torch.no_grad():
            out = model(x)
            for k, m in enumerate(singles):
                assert torch.allclose(out[k], m(x[k]), atol=1e-5), kind
        params = dict(model.named_parameters())
        key = "conv6.weight" if kind == "simple_cnn" else "net.conv6.weight"
        assert torch.allclose(params[key][1], singles[1].conv6.weight, atol=1e-4)  # Adam: sign-level noise


def test_channels_last_layout_gives_the_contiguous_outputs_and_gradients():
    """The CPU's default layout (channels-last) is a speed choice only: the logits and every gradient match the
    contiguous layout's; the activations really are channels-last (else the test would compare one path twice)."""
    model = nht.models.config("simple_cnn").build((3, 8, 8), 10, [0, 1, 2])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 3, 8, 8, generator=g)
    y = torch.randint(0, 10, (3, 4), generator=g)
    seen = []
    hook = model.conv2.register_forward_hook(lambda m, inp, out: seen.append(
        out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()))
    results = {}
    for flag in (False, True):
        model.channels_last = flag
        model.zero_grad()
        out = model(x)
        nht.train.member_loss(out, y).sum().backward()
        results[flag] = (out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    model.channels_last = None  # the default: channels-last on a CPU
    with torch.no_grad():
        model(x)
    hook.remove()
    assert seen == [False, True, True]
    assert torch.allclose(results[False][0], results[True][0], atol=1e-6)
    for name, grad in results[False][1].items():
        assert torch.allclose(grad, results[True][1][name], atol=1e-6), name
