"""How fast is bf16 on this CPU? Member-steps/s of the book's training step at precision "fp32" and "bf16"
(`TrainConfig.precision`) for six workloads, with the machine's plain fp32 (and bf16) matmul GFLOP/s measured in
the same run.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_precision.py            # all six, about a minute
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_precision.py --only transformer --steps-scale 3

Workloads (K members batched, as the chapters train them):

* toy MLP (chapter 1): hidden 64, sparse parity with 40 bits, 300 training examples, full batch, K = 24;
* stand-in MLP (chapter 2): `ModularTask(p=59, train_frac=0.5)`, the modular MLP, full batch, K = 42 (the
  stand-in sweep's largest group);
* NSDL transformer (chapter 2): `ModularTask(p=97, train_frac=0.5)`, batch 512, K = 3;
* SimpleCNN (chapters 3-4): 16 x 16 RGB inputs, 10 classes, batch 32, K = 6 (random images: the speed of a step
  does not depend on the pixels, and no data set has to be on disk);
* VGG-16 with BatchNorm and ResNet18 (chapter 5's CIFAR runs at cpu scale): width 1/8, 16 x 16 RGB inputs,
  batch 128, K = 3 (random images, as above). Measured (AMD EPYC with AVX512-BF16, 2 threads, fp32 matmul
  191-197 GFLOP/s, bf16 437, best of 2): 0.97x and 1.00x, 44.0 / 26.6 member-steps/s at fp32 (a later single
  timing of ResNet18: 1.08x): these narrow nets gain at most a few per cent, so chapter 5 stays fp32.

Every timing runs the training step of `nhtlib.engine.train` (batch sampler, select, forward under the precision's
autocast, fp32 member loss, backward, the batched optimiser: AdamW, SGD for chapter 5's nets), without logging, for
the workload's steps or at most --max-seconds (so a loaded machine does not stretch the run). "fp32" is also what "tf32" runs on a CPU. Read the
ratios (bf16 / fp32), not the absolute numbers: on a shared machine the numbers scale with whatever CPU time the
other processes leave. bf16 can only be fast on a CPU whose matmuls have bf16 hardware support (AVX512-BF16, AMX);
elsewhere expect it to be slower than fp32.
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Callable

import torch

import nhtlib as nht
from nhtlib.engine import plan
from nhtlib.data import Dataset, Split, stack_members
from nhtlib.engine.precision import forward_autocast
from nhtlib.engine.train import BatchSampler, make_optimizer, member_loss, select

PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class Workload:
    name: str
    model: nht.models.ModelConfig
    data: Callable[[list[int]], Dataset]  # seeds -> the members' Dataset
    train: nht.TrainConfig
    k: int
    steps: int  # timed steps (after warm-up)


def random_images(seeds: list[int], n: int = 512, side: int = 16, n_classes: int = 10) -> Dataset:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, side, side, generator=g)
    return Dataset({"train": Split(x, torch.randint(0, n_classes, (n,), generator=g))}, n_classes=n_classes)


# --only's names, in the order `workloads` gives them
WORKLOAD_KEYS = ("toy", "stand-in", "transformer", "cnn", "vgg", "resnet")


def workloads(steps_scale: float) -> list[Workload]:
    toy = nht.data.sparse_parity.SparseParityTask(n_bits=40, n_train=300, n_test=10)
    modular = nht.data.modular.ModularTask(p=97, train_frac=0.5)
    stand_in = nht.data.modular.ModularTask(p=59, train_frac=0.5)  # chapter 2's stand-in (cpu scale)
    scaled = lambda n: max(2, int(round(n * steps_scale)))  # noqa: E731
    return [
        Workload("toy MLP, K = 24, full batch", nht.models.config("mlp", hidden=(64,)),
                 lambda seeds: stack_members([toy.build(s) for s in seeds]), nht.TrainConfig(), 24, scaled(500)),
        Workload("stand-in MLP, K = 42, full batch", nht.models.config("modular_mlp"),
                 lambda seeds: stack_members([stand_in.build(s) for s in seeds]),
                 nht.TrainConfig(weight_decay=1.0, decay="matrices"), 42, scaled(100)),
        Workload("NSDL transformer, K = 3, batch 512", nht.models.config("transformer"),
                 lambda seeds: stack_members([modular.build(s) for s in seeds]),
                 nht.TrainConfig(batch_size=512, weight_decay=1.0), 3, scaled(50)),
        Workload("SimpleCNN 16x16, K = 6, batch 32", nht.models.config("simple_cnn"), random_images,
                 nht.TrainConfig(batch_size=32), 6, scaled(50)),
        Workload("VGG-16 + BN w 1/8 16x16, K = 3, b 128", nht.models.config("vgg16", batchnorm=True, width=1 / 8),
                 random_images, nht.TrainConfig(optimizer="sgd", momentum=0.9, batch_size=128), 3, scaled(30)),
        Workload("ResNet18 w 1/8 16x16, K = 3, b 128", nht.models.config("resnet18", norm="batch", width=1 / 8),
                 random_images, nht.TrainConfig(optimizer="sgd", momentum=0.9, batch_size=128), 3, scaled(20)),
    ]


def setup(w: Workload):
    seeds = list(range(w.k))
    data = w.data(seeds)
    model = w.model.build(data.input_shape, data.n_classes, seeds)
    opt = make_optimizer(model, w.train, torch.full((w.k,), w.train.lr, dtype=torch.float64),
                         torch.full((w.k,), w.train.weight_decay, dtype=torch.float64))
    sampler = BatchSampler(data.splits["train"].size, w.train.batch_size, w.train.sampling, seeds)
    return model, data, opt, sampler


def step(model, data, opt, sampler, k: int, precision: str) -> None:
    """One step of nhtlib.engine.train's loop (its divergence bookkeeping aside)."""
    x, y = select(data.splits["train"], sampler.next(), k)
    with forward_autocast(precision, "cpu"):
        logits = model(x)
    loss = member_loss(logits, y).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def member_steps_per_second(w: Workload, precision: str, max_seconds: float, warmup: int = 3) -> float:
    """Member-steps/s over w.steps timed steps, or fewer once max_seconds have passed (a loaded machine)."""
    model, data, opt, sampler = setup(w)
    for _ in range(warmup):
        step(model, data, opt, sampler, w.k, precision)
    t0 = time.perf_counter()
    done = 0
    while done < w.steps and (done == 0 or time.perf_counter() - t0 < max_seconds):
        step(model, data, opt, sampler, w.k, precision)
        done += 1
    return w.k * done / (time.perf_counter() - t0)


def best_rates(w: Workload, repeats: int, max_seconds: float) -> dict[str, float]:
    """The best member-steps/s of `repeats` alternating fp32 / bf16 timings (alternating, so a change in the
    machine's load hits both precisions alike)."""
    best = dict.fromkeys(PRECISIONS, 0.0)
    for _ in range(repeats):
        for precision in PRECISIONS:
            best[precision] = max(best[precision], member_steps_per_second(w, precision, max_seconds))
    return best


def matmul_rate(dtype: torch.dtype, n: int = 1024, repeats: int = 10) -> float:
    """GFLOP/s of a plain n x n x n matmul in `dtype` (the machine's attainable matmul rate; `nhtlib.engine.plan`'s)."""
    return plan.matmul_rate(dtype, n, repeats) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps-scale", type=float, default=1.0, help="multiply every workload's timed steps")
    ap.add_argument("--repeats", type=int, default=2, help="alternating timings per precision; the best counts")
    ap.add_argument("--max-seconds", type=float, default=2.5, help="cap on one timing (fewer steps when reached)")
    ap.add_argument("--only", choices=list(WORKLOAD_KEYS), default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    chosen = workloads(args.steps_scale)
    if args.only is not None:
        chosen = [chosen[WORKLOAD_KEYS.index(args.only)]]

    started = time.perf_counter()
    fp32_before, bf16_rate = matmul_rate(torch.float32), matmul_rate(torch.bfloat16)
    results = [(w, best_rates(w, args.repeats, args.max_seconds)) for w in chosen]
    fp32_after = matmul_rate(torch.float32)

    print(f"{torch.get_num_threads()} threads, torch {torch.__version__}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, {os.cpu_count()} CPUs visible")
    print(f"plain matmul 1024³: fp32 {fp32_before:.1f} GFLOP/s (before), {fp32_after:.1f} GFLOP/s (after); "
          f"bf16 {bf16_rate:.1f} GFLOP/s ({bf16_rate / ((fp32_before + fp32_after) / 2):.2f}x fp32)")
    header = f"(best of {args.repeats})"
    print(f"{header:38s} {'max steps':>9s} {'fp32 member-steps/s':>20s} {'bf16 member-steps/s':>20s} "
          f"{'bf16 / fp32':>12s}")
    for w, rate in results:
        print(f"{w.name:38s} {w.steps:9d} {rate['fp32']:20.1f} {rate['bf16']:20.1f} "
              f"{rate['bf16'] / rate['fp32']:11.2f}x")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
