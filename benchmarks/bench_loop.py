"""How close is the compute planner's timed step to a step of the real loop? Both timed in one run, per group.

For a chapter's batched groups at cpu scale, three timings of the same members on this machine, in one process:
the planner's (`plan.time_locally`: `synthetic_step`, the loop's `training_step` on fixed random inputs), a bare
loop of `training_step` on the real data (the group's own `BatchSampler` and `select`, no logging), and the real
`train` (sampler, select, divergence bookkeeping, the schedule), cut to `--steps` steps with one log at the end. Ratios
to the planner's step say where a chapter's measured time leaves its plan.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/bench_loop.py 05_dlr_batchnorm --sweep "VGG-16 ± BN"

Hardware: this CPU (its fp32 matmul rate is printed before and after). n: one timing each; run it alone.

Measured (AMD EPYC, 2 threads, fp32 matmul 174-193 GFLOP/s; issue 27, part 12), ms a step, planner / bare loop /
train: chapter 5's VGG-16 ± BN (K = 6, 60 steps) 106.8 / 84.5 / 113.6 and 106.0 / 119.6 / 130.0; chapter 2's NSDL
batch (K = 26, bf16) 173.4 / 169.1 / 212.9 at 40 steps, then 252.1 / 172.2 / 172.6 at 120 steps. The loop adds
nothing measurable to its step (the 1.23x at 40 steps did not come back at 120). What moves is the machine: the
same step took 150-252 ms (NSDL) and 70-120 ms (VGG) at different moments of one session, while six planner samples
taken back to back agreed within 10 % (NSDL 150-165 ms, VGG 70-78 ms). So a chapter's plan here can miss its
measured time by that much either way (chapter 5 took 1,063 s against a plan of 10.4 min in this session), and
timing more steps would not steady it.
"""
from __future__ import annotations

import argparse
import time

import torch

from nhtlib.chapters import CHAPTERS
from nhtlib.data import stack_members
from nhtlib.engine import plan
from nhtlib.engine.optim import lr_factor
from nhtlib.engine.step import make_optimizer, training_step
from nhtlib.engine.train import BatchSampler, select, train


def build(configs):
    """The group's data and model as `sweep._train_batch` builds them."""
    from nhtlib.engine.sweep import DECODE_UP_FRONT_BYTES

    data = stack_members([c.task.build(c.seed) for c in configs]).decoded_if_small(DECODE_UP_FRONT_BYTES)
    model = configs[0].model.build_members(data.input_shape, data.n_classes, [(c.model, c.seed) for c in configs])
    return data, model


def bare_loop(configs, steps: int) -> float:
    """Seconds per step of `training_step` on the real data, sampled and selected as the loop does."""
    cfg, k = configs[0].train, len(configs)
    data, model = build(configs)
    opt = make_optimizer(model, cfg, torch.tensor([c.train.lr for c in configs], dtype=torch.float64),
                         torch.tensor([c.train.weight_decay for c in configs], dtype=torch.float64))
    split = data.splits["train"]
    sampler = BatchSampler(split.size, cfg.batch_size, cfg.sampling, [c.seed for c in configs])
    model.train()

    def one(step: int) -> None:
        x, y = select(split, sampler.next(), k)
        training_step(model, opt, x, y, precision=cfg.precision, lr_factor=lr_factor(cfg.lr_schedule, step, cfg.steps))

    one(0)
    t0 = time.perf_counter()
    for s in range(1, steps + 1):
        one(s)
    return (time.perf_counter() - t0) / steps


def real_train(configs, steps: int) -> float:
    """Seconds per step of `train` itself, cut to `steps` steps with one log at the end (the log's time removed by
    a second, 1-step run)."""
    data, model = build(configs)
    cut = configs[0].train.replace(steps=steps, n_logs=1)
    kw = dict(seeds=[c.seed for c in configs], lrs=[c.train.lr for c in configs],
              weight_decays=[c.train.weight_decay for c in configs], progress=False)
    t0 = time.perf_counter()
    train(model, data, cut, **kw)
    long = time.perf_counter() - t0
    data, model = build(configs)
    t0 = time.perf_counter()
    train(model, data, configs[0].train.replace(steps=1, n_logs=1), **kw)
    short = time.perf_counter() - t0
    return (long - short) / (steps - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapter")
    ap.add_argument("--sweep", default=None, help="only this sweep (its name in the plan)")
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    torch.set_num_threads(2)
    chapter = CHAPTERS[args.chapter]
    print(f"fp32 matmul before: {plan.matmul_rate() / 1e9:.0f} GFLOP/s")
    print(f"{'sweep':28s} {'K':>4s} {'planner ms':>11s} {'bare loop':>10s} {'train':>10s}  ratios to the planner")
    for sweep in chapter.sweeps("cpu"):
        if args.sweep and sweep.name != args.sweep:
            continue
        for group in plan.groups(sweep.configs):
            shape = plan.layout(group[0].task, full=False)
            planned, _ = plan.time_locally(group, shape, sweep)
            bare = bare_loop(group, args.steps)
            real = real_train(group, args.steps)
            print(f"{sweep.name[:28]:28s} {len(group):4d} {planned * 1e3:11.1f} {bare * 1e3:10.1f} {real * 1e3:10.1f}"
                  f"  {bare / planned:.2f}x  {real / planned:.2f}x")
    print(f"fp32 matmul after: {plan.matmul_rate() / 1e9:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
