import torch

from nhtlib.analysis.metrics.norms import layer_of, layer_squared_norms, norm_columns, squared_norm, total_squared_norm


def test_known_tensors():
    assert squared_norm(torch.tensor([3.0, 4.0])).item() == 25.0
    assert squared_norm(torch.ones(2, 3)).item() == 6.0


def test_member_dim_gives_one_value_per_member():
    t = torch.stack([torch.full((2, 2), 1.0), torch.full((2, 2), 2.0)])  # K=2
    assert squared_norm(t, member_dim=True).tolist() == [4.0, 16.0]


def test_layers_group_weight_and_bias():
    params = [("enc.0.weight", torch.tensor([[1.0, 2.0]])), ("enc.0.bias", torch.tensor([2.0])),
              ("head.weight", torch.tensor([[3.0]]))]
    layers = layer_squared_norms(params)
    assert list(layers) == ["enc.0", "head"]
    assert layers["enc.0"].item() == 9.0 and layers["head"].item() == 9.0
    assert total_squared_norm(params).item() == 18.0
    cols = norm_columns(layers)
    assert cols["norm_sq"].item() == 18.0 and cols["norm_sq:head"].item() == 9.0
    assert layer_of("weight") == "weight"


def test_module_norm_matches_manual_sum():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    manual = sum(float((p.detach().double() ** 2).sum()) for p in net.parameters())
    assert abs(total_squared_norm(net.named_parameters()).item() - manual) < 1e-12
