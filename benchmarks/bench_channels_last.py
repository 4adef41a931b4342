"""Channels-last against contiguous activations for the member-batched SimpleCNN (`GroupedSimpleCNN`) on a CPU: the
time of a training step (forward, backward, batched AdamW) and of an evaluation pass, both layouts timed in one run,
with the machine's fp32 matmul rate measured in the same run.

    .venv/bin/python benchmarks/bench_channels_last.py        # chapters 3 and 4's cpu groups (half width, K = 63)

Measured (Intel Xeon with AMX, 2 threads, fp32 matmul ≈ 310 GFLOP/s by `plan.matmul_rate`, 3-5 timed steps each,
two runs in one session): training step 1.25-1.39x at chapter 3's shape (16 x 16 px, batch 64, K = 63) and
1.30-1.32x at chapter 4's (24 x 24 px, batch 32, K = 63); evaluation 1.39x and 1.26-1.39x. A later run with
`--repeats 2` (matmul ≈ 355): 1.13x and 1.37x a step (2 timed steps are noisy). The logits of the two
layouts agree to about 1e-8. The book trains the SimpleCNN channels-last on a CPU (`GroupedSimpleCNN.channels_last`);
on CUDA it keeps the contiguous layout, which has not been measured there. Each timing is `plan.seconds_per_call`
(one warm-up call, then `--repeats` calls). On a shared machine, run it when the cores are idle.
"""
from __future__ import annotations

import argparse

import torch

from nhtlib.config import TrainConfig
from nhtlib.engine import plan
from nhtlib.engine.train import make_optimizer, member_loss
from nhtlib.models.simple_cnn import SimpleCNNConfig

# (what, image size, training batch, evaluation batch, members, classes): the cpu presets' biggest SimpleCNN groups
SHAPES = (("chapter 3, λ sweep", 16, 64, 512, 63, 5), ("chapter 4, Waterbirds stand-in", 24, 32, 256, 63, 2))


def compare(size: int, batch: int, eval_batch: int, k: int, n_classes: int, width: float = 0.5,
            repeats: int = 5) -> dict[str, float]:
    """Seconds per training step and per evaluation pass in both layouts, and the logits' largest difference."""
    model = SimpleCNNConfig(width=width).build((3, size, size), n_classes, list(range(k)))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(k, batch, 3, size, size, generator=g)
    y = torch.randint(0, n_classes, (k, batch), generator=g)
    x_eval = torch.randn(k, eval_batch, 3, size, size, generator=g)
    opt = make_optimizer(model, TrainConfig(), torch.full((k,), 1e-3, dtype=torch.float64),
                         torch.full((k,), 0.1, dtype=torch.float64))

    def step() -> None:
        loss = member_loss(model(x), y).sum()
        opt.zero_grad()
        loss.backward()
        opt.step(1.0)

    def evaluate() -> None:
        with torch.no_grad():
            model(x_eval)

    layouts = (("contiguous", False), ("channels_last", True))
    logits = {}
    for name, flag in layouts:  # before any step: the same weights
        model.channels_last = flag
        with torch.no_grad():
            logits[name] = model(x)
    out: dict[str, float] = {}
    for name, flag in layouts:
        model.channels_last = flag
        out[f"step_s {name}"] = plan.seconds_per_call(step, min_s=60.0, max_repeats=repeats)
        out[f"eval_s {name}"] = plan.seconds_per_call(evaluate, min_s=60.0, max_repeats=max(1, repeats // 2))
    out["max_logit_difference"] = float((logits["contiguous"] - logits["channels_last"]).abs().max())
    model.channels_last = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(f"fp32 matmul: {plan.matmul_rate() / 1e9:.0f} GFLOP/s, {torch.get_num_threads()} threads")
    for what, size, batch, eval_batch, k, n_classes in SHAPES:
        r = compare(size, batch, eval_batch, k, n_classes, repeats=args.repeats)
        print(f"{what} ({size} x {size} px, batch {batch}, K = {k}): training step "
              f"{r['step_s contiguous'] * 1e3:.0f} -> {r['step_s channels_last'] * 1e3:.0f} ms "
              f"({r['step_s contiguous'] / r['step_s channels_last']:.2f}x); evaluation of {eval_batch} "
              f"{r['eval_s contiguous'] * 1e3:.0f} -> {r['eval_s channels_last'] * 1e3:.0f} ms "
              f"({r['eval_s contiguous'] / r['eval_s channels_last']:.2f}x); logits differ by at most "
              f"{r['max_logit_difference']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
