"""Wall time of D_LR (feature form) against p and C, and against the empirical-NTK change metric on one model.

    .venv/bin/python benchmarks/bench_dlr.py [--quick]

Prints two tables: D_LR time for n = 4p samples over p x C (median of repeats, float64, after features are
extracted) with the kernel-form oracle for comparison where it fits; and, on one small MLP, the time of D_LR from one
forward pass against the eNTK kernel distance (Jacobian J (nC x D), Theta = J J^T, at two parameter points).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from nhtlib.analysis.metrics import baselines
from nhtlib.analysis.metrics.dlr import dlr, dlr_kernel
from nhtlib.analysis.metrics.features import extract
from nhtlib.models.stacked import MLPNet


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_dlr(ps, cs, repeats):
    print("D_LR wall time (n = 4p samples, float64; kernel form only up to n = 2048)")
    print(f"{'p':>6} {'C':>5} {'n':>6} {'feature form [ms]':>18} {'kernel form [ms]':>17}")
    g = torch.Generator().manual_seed(0)
    for p in ps:
        for c in cs:
            n = 4 * p
            phi = torch.randn(n, p, generator=g, dtype=torch.float64)
            f = phi @ torch.randn(p, c, generator=g, dtype=torch.float64)
            t_feat = timed(lambda: dlr(phi, f), repeats)
            t_kern = timed(lambda: dlr_kernel(phi, f), 1) if n <= 2048 else float("nan")
            print(f"{p:>6} {c:>5} {n:>6} {1e3 * t_feat:>18.2f} {1e3 * t_kern:>17.1f}")


def bench_vs_ntk(n, width, repeats):
    torch.manual_seed(0)
    net = MLPNet(784, (width, width), 10)
    x = torch.randn(n, 1, 28, 28)
    params = sum(p.numel() for p in net.parameters())

    def run_dlr():
        phi, f = extract(net, x, member_batched=False)
        return dlr(phi[0], f[0])

    def run_ntk():
        k0 = baselines.module_ntk(net, x)
        return baselines.ntk_distance(k0, baselines.module_ntk(net, x))

    t_dlr = timed(run_dlr, repeats)
    t_ntk = timed(run_ntk, 1)
    print(f"\nMLP 784-{width}-{width}-10 ({params:,} parameters), n = {n} probe inputs, C = 10")
    print(f"  D_LR (forward pass + metric): {1e3 * t_dlr:.1f} ms")
    print(f"  eNTK kernel distance (2 Jacobians of size {n * 10} x {params:,}, Theta = J J^T): {1e3 * t_ntk:.0f} ms")
    print(f"  ratio eNTK / D_LR: {t_ntk / t_dlr:,.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    if args.quick:
        bench_dlr([64, 256], [10, 100], repeats=3)
        bench_vs_ntk(n=50, width=64, repeats=3)
    else:
        bench_dlr([64, 256, 512, 1024, 2048], [1, 10, 100], repeats=3)
        bench_vs_ntk(n=200, width=128, repeats=3)


if __name__ == "__main__":
    main()
