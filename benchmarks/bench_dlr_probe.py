"""What logging D_LR along chapters 1–4's runs costs (chapter 6's probe, `nhtlib.chapters.probes`): for each probed sweep,
its first batched group trained for a stretch of its own schedule with and without the probe, at the sweep's own
density of log steps, in one run, with the machine's fp32 matmul rate beside it.

    .venv/bin/python benchmarks/bench_dlr_probe.py                 # cpu scale, 300 steps per sweep
    .venv/bin/python benchmarks/bench_dlr_probe.py --scale smoke --steps 50

Overhead = (time with the probe − time without) / time without: the share the probe adds to that group's training.
Run it on an idle machine: the numbers scale with whatever CPU time other processes leave.
"""
from __future__ import annotations

import argparse
import math
import time

import torch

from nhtlib.engine import plan
from nhtlib.chapters import probes, synthesis
from nhtlib.data import stack_members
from nhtlib.engine.sweep import batch_groups
from nhtlib.engine.train import train


def _timed(configs, cfg, extra_metrics) -> float:
    data = stack_members([c.task.build(c.seed) for c in configs]).decoded_if_small(10 ** 9)
    model = configs[0].model.build(data.input_shape, data.n_classes, [c.seed for c in configs])
    t0 = time.perf_counter()
    train(model, data, cfg, seeds=[c.seed for c in configs], lrs=[c.train.lr for c in configs],
          weight_decays=[c.train.weight_decay for c in configs], extra_metrics=extra_metrics, progress=False)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--steps", type=int, default=300, help="training steps timed per sweep")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    torch.set_num_threads(2)
    print(f"fp32 matmul 1024³: {plan.matmul_rate(torch.float32) / 1e9:.0f} GFLOP/s")
    probe = probes.with_dlr("probe", ()).extra_metrics
    for sweep in synthesis.sweeps(args.scale, args.data_root):
        if sweep.extra_metrics_key != probes.PROBE_KEY:
            continue
        group = [sweep.configs[i] for i in batch_groups(sweep.configs)[0]]
        cfg = group[0].train
        steps = min(args.steps, cfg.steps)
        logs = max(1, math.ceil(len(cfg.log_steps()) * steps / cfg.steps))  # the sweep's own log density
        short = cfg.replace(steps=steps, n_logs=logs, log_grid="linear")
        plain = _timed(group, short, None)
        probed = _timed(group, short, probe)
        print(f"{sweep.name:<16} {len(group):>3} members, {steps} steps, {logs} logs: {plain:6.1f} s without, "
              f"{probed:6.1f} s with the probe: +{(probed - plain) / plain:.0%}")


if __name__ == "__main__":
    main()
