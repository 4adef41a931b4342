"""How much faster is the foreach batched optimiser? ms per `optimizer.step()` of the per-tensor loop it replaced
(`_ReferenceAdamW` / `_ReferenceSGD`, kept verbatim in tests/test_optim.py) and of `nhtlib.engine.optim`, on the
parameter lists the chapters train, with random gradients, timed in one run and printed as a ratio beside this
machine's fp32 matmul rate.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_optimizer.py          # both models, ~2 min on 2 cores
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_optimizer.py --only transformer --repeats 9

Workloads:

* ResNet18 (chapter 5's lr sweep at paper scale: `resnet18`, norm="batch", width 1, CIFAR-100 32 x 32), K = 4:
  62 tensors, 44.9 M numbers; SGD with momentum 0.9 and L2 5e-4 (the chapter's), AdamW beside it;
* NSDL Transformer (chapter 2, `transformer` at p = 97), K = 10: 18 tensors, 2.2 M numbers; AdamW with decay on
  every parameter (NSDL's), SGD beside it; and its whole training step (forward, backward, optimiser) at batch 512.

Each optimiser gets its own copy of the parameters and the same gradients; the two are timed in alternating blocks
(`--repeats` blocks of `--steps` steps each) and the median block is reported, as wall time and as this process's CPU
time (which leaves out the time other processes hold the cores), so a load that comes and goes on a shared machine
hits both alike. lr factor: a cosine schedule, so the foreach optimiser refills its lr every step as in a real run.
The last line times the optimiser's step() inside the training step: the allocator and caches as a run has them.

Result (AMD EPYC, 2 vCPUs of a shared VM, L2 512 KB per core, L3 32 MB; torch 2.14.1 CPU, OMP_NUM_THREADS=1; median
of 9 blocks of 5 steps; fp32 matmul 60 GFLOP/s at the start, 46 at the end of the run), old / new:

    resnet18    K=4  sgd    step   480 ms / 133 ms   3.6x      (all runs of this code: 3.5x - 3.8x)
    resnet18    K=4  adamw  step   800 ms / 256 ms   3.1x      (3.1x - 3.2x)
    transformer K=10 adamw  step  20.4 ms / 14.9 ms  1.37x     (1.23x - 1.37x; 2.6x - 2.9x with --only transformer,
                                                                where the old loop's temporaries fault in new pages)
    transformer K=10 sgd    step  12.1 ms / 10.4 ms  1.16x     (0.94x - 1.18x)
    transformer whole training step at batch 512: 1.02x (0.94x - 1.13x: the step is ~5 % of it, within the noise);
    its AdamW step inside the training step: 18.2 ms / 15.0 ms  1.21x  (1.21x - 1.31x)

The transformer is compute-bound here: its step is ~10 elementwise passes (two divisions and a square root among
them) over 2.2 M numbers at ~0.35 ns per number and pass even in cache, which the bitwise equality with the old
loop fixes; the old loop already kept each of its small tensors in cache, so blocking gains little there. ResNet18's
tensors (up to 9.4 M numbers) do not fit in cache: the old loop streamed each from memory once per op.
With OMP_NUM_THREADS=2 (fp32 matmul 121 GFLOP/s): resnet18 3.5x (sgd and adamw), transformer adamw 1.24x.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

import nhtlib as nht
from nhtlib.engine import plan
from nhtlib.engine.optim import lr_factor
from nhtlib.engine.step import make_optimizer, training_step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_optim import REFERENCE  # noqa: E402  (the per-tensor loop, verbatim)

WORKLOADS = {  # name: (model config, input shape, classes, K, {optimiser: TrainConfig})
    "resnet18": (nht.models.config("resnet18", norm="batch", width=1.0), (3, 32, 32), 100, 4, {
        "sgd": nht.TrainConfig(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=5e-4, lr_schedule="cosine"),
        "adamw": nht.TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.1, decay="matrices",
                                 lr_schedule="cosine")}),
    "transformer": (nht.models.config("transformer"), (2,), 97, 10, {
        "adamw": nht.TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=1.0, decay="all", lr_schedule="cosine"),
        "sgd": nht.TrainConfig(optimizer="sgd", lr=1e-2, momentum=0.9, weight_decay=1.0, lr_schedule="cosine")}),
}
TOTAL_STEPS = 1000  # of the cosine schedule


def optimizer(model: torch.nn.Module, cfg: nht.TrainConfig, k: int, foreach: bool):
    """The book's optimiser of `model` (foreach) or the per-tensor loop over the same parameter list and mask; the
    members' lr and wd spread over [0.5, 1.5] x the config's."""
    lrs = torch.linspace(0.5, 1.5, k, dtype=torch.float64) * cfg.lr
    wds = torch.linspace(0.5, 1.5, k, dtype=torch.float64) * cfg.weight_decay
    opt = make_optimizer(model, cfg, lrs, wds)
    if foreach:
        return opt
    kwargs = {"betas": tuple(cfg.betas), "eps": cfg.eps} if cfg.optimizer == "adamw" else {"momentum": cfg.momentum}
    return REFERENCE[type(opt)](opt.params, lrs, wds, opt.decay_mask, **kwargs)


def with_random_grads(opt):
    g = torch.Generator().manual_seed(0)
    for p in opt.params:
        p.grad = torch.randn(p.shape, generator=g) * 1e-2
    return opt


def time_blocks(runs: dict, steps: int, repeats: int) -> dict[str, tuple[float, float]]:
    """(median wall ms, median CPU ms) per call of each `runs[name](step)`, timed in alternating blocks of `steps`
    calls. CPU time (this process's, all threads) leaves out the time other processes hold the cores."""
    blocks: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    counter = {name: 0 for name in runs}
    for name, fn in runs.items():  # warm-up: first steps allocate state (momentum buffers)
        for _ in range(2):
            fn(counter[name])
            counter[name] += 1
    for _ in range(repeats):
        for name, fn in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                fn(counter[name])
                counter[name] += 1
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            blocks[name].append((wall / steps * 1e3, cpu / steps * 1e3))
    return {name: (statistics.median(w for w, _ in b), statistics.median(c for _, c in b)) for name, b in blocks.items()}


def line(label: str, ms: dict[str, tuple[float, float]]) -> str:
    (old_wall, old_cpu), (new_wall, new_cpu) = ms["old"], ms["new"]
    return (f"{label}  old {old_wall:8.2f} ms (cpu {old_cpu:8.2f})   new {new_wall:8.2f} ms (cpu {new_cpu:8.2f})   "
            f"old/new {old_wall / new_wall:5.2f}x (cpu {old_cpu / new_cpu:5.2f}x)")


def bench_steps(name: str, steps: int, repeats: int) -> None:
    model_cfg, shape, classes, k, cfgs = WORKLOADS[name]
    for opt_name, cfg in cfgs.items():
        # each optimiser over its own copy of the parameters, with the same gradients
        old, new = (with_random_grads(optimizer(model_cfg.build(shape, classes, list(range(k))), cfg, k, foreach))
                    for foreach in (False, True))
        n = sum(p.numel() for p in new.params)
        ms = time_blocks({"old": lambda s: old.step(lr_factor("cosine", s, TOTAL_STEPS)),
                          "new": lambda s: new.step(lr_factor("cosine", s, TOTAL_STEPS))}, steps, repeats)
        print(line(f"{name:11s} K={k:<2d} {opt_name:5s} step ({len(new.params)} tensors, {n / 1e6:.2f} M)", ms),
              flush=True)
        del old, new


class TimedStep:
    """Wraps an optimiser: its step() as before, with the CPU time spent in it added up."""

    def __init__(self, opt):
        self.opt, self.cpu_s, self.calls = opt, 0.0, 0

    def zero_grad(self) -> None:
        self.opt.zero_grad()

    def step(self, factor: float) -> None:
        t0 = time.process_time()
        self.opt.step(factor)
        self.cpu_s += time.process_time() - t0
        self.calls += 1


def bench_training_step(steps: int, repeats: int, batch: int = 512) -> None:
    """The NSDL Transformer's whole training step (forward + backward + AdamW) at its batch, old vs new, and the
    optimiser's share of it (its step() timed inside the training step: the allocator and caches as a run has them)."""
    model_cfg, shape, classes, k, cfgs = WORKLOADS["transformer"]
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, classes, (k, batch, *shape), generator=g)
    y = torch.randint(0, classes, (k, batch), generator=g)
    timed = {}

    def run(label: str, foreach: bool):
        model = model_cfg.build(shape, classes, list(range(k)))
        opt = timed[label] = TimedStep(optimizer(model, cfgs["adamw"], k, foreach))
        return lambda s: training_step(model, opt, x, y, lr_factor=lr_factor("cosine", s, TOTAL_STEPS))

    ms = time_blocks({"old": run("old", False), "new": run("new", True)}, steps, repeats)
    print(line(f"transformer K={k:<2d} adamw whole training step, batch {batch}", ms), flush=True)
    old, new = (timed[label].cpu_s / timed[label].calls * 1e3 for label in ("old", "new"))
    print(f"transformer K={k:<2d} adamw step inside the training step (mean cpu)  old {old:8.2f} ms   "
          f"new {new:8.2f} ms   old/new {old / new:5.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=list(WORKLOADS))
    parser.add_argument("--steps", type=int, default=5, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="timed blocks per optimiser (median reported)")
    parser.add_argument("--no-training-step", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32 matmul "
          f"{plan.matmul_rate() / 1e9:.1f} GFLOP/s", flush=True)
    for name in [args.only] if args.only else list(WORKLOADS):
        bench_steps(name, args.steps, args.repeats)
    if not args.no_training_step and args.only in (None, "transformer"):
        bench_training_step(args.steps, args.repeats)
    print(f"fp32 matmul after: {plan.matmul_rate() / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
