"""D_LR with known answers (shared/papers/dlr.md §1.6), its eigen view and the baselines."""
import math

import pytest
import torch

from nhtlib.analysis.metrics import baselines, eigen
from nhtlib.analysis.metrics.dlr import dlr, dlr_kernel, linear_cka, null_value

VARIANTS = ("literal", "centred_span")


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def random_case(n=120, p=16, c=5, seed=0):
    g = gen(seed)
    phi = torch.randn(n, p, generator=g, dtype=torch.float64) * torch.linspace(0.2, 3, p, dtype=torch.float64) + 2.0
    w = torch.randn(p, c, generator=g, dtype=torch.float64)
    b = torch.randn(c, generator=g, dtype=torch.float64)
    return phi, phi @ w + b


def centred_orthonormal(n, k, g):
    x = torch.randn(n, k, generator=g, dtype=torch.float64)
    x = x - x.mean(0)
    return torch.linalg.qr(x).Q


def etf_collapse(c=10, m=20, p=32, seed=0, sizes=None):
    g = gen(seed)
    q = torch.linalg.qr(torch.randn(p, c, generator=g, dtype=torch.float64)).Q
    means = math.sqrt(c / (c - 1)) * (torch.eye(c, dtype=torch.float64) - 1.0 / c) @ q.T
    sizes = sizes or [m] * c
    labels = torch.cat([torch.full((s,), i) for i, s in enumerate(sizes)])
    phi = means[labels] + torch.randn(p, generator=g, dtype=torch.float64)  # global offset
    return phi, labels


@pytest.mark.parametrize("variant", VARIANTS)
def test_range_and_kernel_form(variant):
    for seed in range(5):
        phi, f = random_case(seed=seed)
        value = dlr(phi, f, variant)
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(dlr_kernel(phi, f, variant), abs=1e-9)
        assert value == pytest.approx(dlr_kernel(phi, f, variant, a1=3.7, a2=0.2), abs=1e-9)  # a1, a2 drop out


def test_independent_outputs_close_to_one():
    g = gen(1)
    phi = torch.randn(400, 64, generator=g, dtype=torch.float64)
    f = torch.randn(400, 10, generator=g, dtype=torch.float64)
    assert 0.8 < dlr(phi, f) < 1.0


@pytest.mark.parametrize("variant", VARIANTS)
def test_exact_neural_collapse_is_zero(variant):
    phi, labels = etf_collapse()
    f_random = phi @ torch.randn(32, 10, generator=gen(2), dtype=torch.float64) + 1.0
    f_onehot = eigen.one_hot(labels, 10)
    for f in (f_random, f_onehot):
        assert dlr(phi, f, variant) == pytest.approx(0.0, abs=1e-10)
    assert dlr(phi, f_onehot, "centred_span", detail=True).rank == 9


def test_collapse_through_invertible_map_gives_participation_ratio_formula():
    phi, labels = etf_collapse()
    a = torch.randn(32, 32, generator=gen(3), dtype=torch.float64)
    phi_a = phi @ a
    lam = torch.linalg.eigvalsh((phi_a - phi_a.mean(0)).T @ (phi_a - phi_a.mean(0)))
    lam = lam[lam > 1e-9 * lam.max()]
    pr = lam.sum() ** 2 / (lam ** 2).sum()
    f = eigen.one_hot(labels, 10)
    assert dlr(phi_a, f) == pytest.approx(1 - math.sqrt(pr / 9), abs=1e-10)
    assert dlr(phi_a, f) > 0.01


def test_imbalanced_collapse_is_positive():
    phi, labels = etf_collapse(sizes=[10 * (i + 1) for i in range(10)])
    assert dlr(phi, eigen.one_hot(labels, 10)) > 0.05


@pytest.mark.parametrize("ratio,expected", [(1.0, 0.29289), (0.5, 0.10557), (2.0, 0.55279)])
def test_extra_directions_outside_output_span(ratio, expected):
    g = gen(4)
    n, c = 200, 10
    labels = torch.arange(n) % c
    y = eigen.one_hot(labels, c)
    u_y = torch.linalg.qr(y - y.mean(0)).Q[:, : c - 1]
    z = torch.randn(n, c - 1, generator=g, dtype=torch.float64)
    z = z - y @ torch.linalg.lstsq(y, z).solution  # orthogonal to span(Y) (which contains 1)
    u_z = torch.linalg.qr(z).Q
    a = 2.0
    phi = torch.cat([math.sqrt(a) * u_y, math.sqrt(ratio * a) * u_z], 1)
    f = phi[:, : c - 1] @ torch.randn(c - 1, c, generator=g, dtype=torch.float64)
    for variant in VARIANTS:
        assert dlr(phi, f, variant) == pytest.approx(expected, abs=1e-5)
    assert dlr(phi, f) > 0


def test_lazy_null_value():
    g = gen(5)
    n, p, r = 600, 200, 10
    phi = 3.0 * centred_orthonormal(n, p, g)
    f = phi @ torch.randn(p, r, generator=g, dtype=torch.float64)
    assert null_value(r, p) == pytest.approx(0.77639, abs=1e-5)
    for variant in VARIANTS:
        assert dlr(phi, f, variant) == pytest.approx(null_value(r, p), abs=1e-10)
    assert dlr(phi, f, detail=True).null == pytest.approx(0.77639, abs=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_invariances(variant):
    phi, f = random_case(seed=6)
    base = dlr(phi, f, variant)
    q = torch.linalg.qr(torch.randn(16, 16, generator=gen(7), dtype=torch.float64)).Q
    b = torch.randn(5, 5, generator=gen(8), dtype=torch.float64)
    for phi2, f2 in ((7.5 * phi, f), (phi @ q, f), (phi + 3.0, f), (phi, 0.01 * f), (phi, f @ b)):
        assert dlr(phi2, f2, variant) == pytest.approx(base, abs=1e-10)
    shifted = dlr(phi, f + 4.0, variant)
    if variant == "centred_span":
        assert shifted == pytest.approx(base, abs=1e-10)
    else:
        assert shifted == pytest.approx(base, abs=0.05)
    a = torch.randn(16, 16, generator=gen(9), dtype=torch.float64)
    assert abs(dlr(phi @ a, f @ torch.eye(5, dtype=torch.float64), variant) - base) > 1e-3  # not invariant


def test_float32_input_is_promoted():
    phi, f = random_case(seed=10)
    assert dlr(phi.float(), f.float()) == pytest.approx(dlr(phi, f), abs=1e-5)


def test_regression_single_output():
    g = gen(11)
    phi, _ = random_case(seed=11)
    f = phi @ torch.randn(16, generator=g, dtype=torch.float64)
    u = (f - f.mean()) / (f - f.mean()).norm()
    kc = (phi - phi.mean(0)) @ (phi - phi.mean(0)).T
    expected = 1 - float(u @ kc @ u / torch.linalg.matrix_norm(kc))
    assert dlr(phi, f) == pytest.approx(expected, abs=1e-10)
    assert dlr(phi, f, "centred_span") == pytest.approx(expected, abs=1e-10)
    line = 2.0 + f[:, None] * torch.randn(1, 16, generator=g, dtype=torch.float64)
    assert dlr(line, f) == pytest.approx(0.0, abs=1e-10)


def test_rank_deficient_outputs_use_numerical_rank():
    phi, f = random_case(c=4, seed=12)
    f10 = torch.cat([f, f[:, :3] * 2, f[:, :3] - f[:, 3:4]], 1)
    for variant in VARIANTS:
        assert dlr(phi, f10, variant) == pytest.approx(dlr_kernel(phi, f10, variant), abs=1e-8)
        assert dlr(phi, f10, variant) == pytest.approx(dlr(phi, f, variant), abs=1e-10)
    assert dlr(phi, f10, detail=True).rank == 4


def test_constant_outputs_give_nan_with_warning():
    phi, _ = random_case()
    with pytest.warns(UserWarning):
        assert math.isnan(dlr(phi, torch.zeros(120, 3)))


def test_near_collapse_literal_is_continuous_centred_span_jumps():
    g = gen(13)
    c, m, p = 10, 50, 64
    q = torch.linalg.qr(torch.randn(p, c, generator=g, dtype=torch.float64)).Q
    means = 4 * math.sqrt(c / (c - 1)) * (torch.eye(c, dtype=torch.float64) - 1.0 / c) @ q.T
    labels = torch.arange(c).repeat_interleave(m)
    phi = means[labels] + torch.randn(p, generator=g, dtype=torch.float64) + 0.05 * torch.randn(
        c * m, p, generator=g, dtype=torch.float64)
    x = torch.cat([torch.ones(c * m, 1, dtype=torch.float64), phi], 1)
    wb = torch.linalg.lstsq(x, eigen.one_hot(labels, c)).solution
    wb = wb + 1e-4 * torch.randn(wb.shape, generator=g, dtype=torch.float64)
    f = x @ wb
    assert dlr(phi, f) < 0.01
    assert dlr(phi, f, "centred_span") >= 1 - math.sqrt((c - 1) / c) - 1e-3


def test_spectrum_links_to_dlr_and_sums():
    phi, f = random_case(n=300, p=20, seed=14)
    labels = torch.arange(300) % 5
    spec = eigen.spectrum(phi, f, eigen.one_hot(labels, 5))
    assert spec.pi_hat[-1] == pytest.approx(1.0, abs=1e-10)
    assert float(spec.u.sum()) == pytest.approx(spec.rank, abs=1e-8)
    assert spec.cka_centred_span() == pytest.approx(1 - dlr(phi, f, "centred_span"), abs=1e-10)
    x = torch.cat([torch.ones(300, 1, dtype=torch.float64), phi], 1)
    y = eigen.one_hot(labels, 5)
    resid = y - x @ torch.linalg.lstsq(x, y).solution
    r2 = 1 - resid.pow(2).sum() / (y - y.mean(0)).pow(2).sum()
    assert spec.pi_star[-1] == pytest.approx(float(r2), abs=1e-8)
    assert torch.all(spec.rho_rel <= 1) and spec.rho_rel[0] == 1
    cols = eigen.spectrum_columns(spec, 25)
    assert len(cols) == 100 and math.isnan(cols["rho_rel:25"])


def test_neural_collapse_baselines():
    phi, labels = etf_collapse()
    noisy = phi + 0.1 * torch.randn(phi.shape, generator=gen(15), dtype=torch.float64)
    assert baselines.nc1(phi, labels)["nc1"] == pytest.approx(0.0, abs=1e-12)
    assert baselines.nc1(noisy, labels)["nc1"] > 0
    assert 0 < baselines.nc1(noisy, labels)["nc1_bounded"] < 1
    for key, value in baselines.nc2(phi, labels).items():
        assert value == pytest.approx(0.0, abs=1e-10), key


def test_s_init_and_linear_cka():
    phi, _ = random_case()
    q = torch.linalg.qr(torch.randn(16, 16, generator=gen(16), dtype=torch.float64)).Q
    assert baselines.s_init(2 * phi @ q, phi) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(phi, torch.randn(120, 8, generator=gen(17), dtype=torch.float64)) < 0.5


def test_ntk_distance_zero_for_same_model_and_positive_after_change():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.randn(6, 4)
    k0 = baselines.module_ntk(net, x)
    assert k0.shape == (18, 18)
    assert baselines.ntk_distance(k0, k0) == pytest.approx(0.0, abs=1e-12)
    with torch.no_grad():
        net[0].weight.mul_(3)
    assert baselines.ntk_distance(k0, baselines.module_ntk(net, x)) > 1e-3


def test_participation_ratio_and_first_k_known_answers():
    from nhtlib.analysis.metrics.eigen import first_k_reaching, participation_ratio

    assert participation_ratio([1.0, 0, 0]) == pytest.approx(1.0)
    assert participation_ratio([2.0, 2.0, 2.0, 2.0]) == pytest.approx(4.0)
    assert first_k_reaching([3, 1, 2], [0.95, 0.5, 0.8], 0.9) == 3
    assert first_k_reaching([1, 2], [0.1, 0.2], 0.9) != first_k_reaching([1, 2], [0.1, 0.2], 0.9)  # NaN
