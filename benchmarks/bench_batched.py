"""How fast are batched sweeps? Steps/s of one model alone, of K models batched, and of the same K models trained one
after another, with the achieved matmul GFLOP/s against a plain fp32 matmul measured in the same run.

    .venv/bin/python benchmarks/bench_batched.py                      # the MLP at p = 59, full batch, K = 16
    .venv/bin/python benchmarks/bench_batched.py --model transformer --p 97 --batch-size 512 --k 8
    .venv/bin/python benchmarks/bench_batched.py --model simple_cnn --image-size 16 --batch-size 32 --k 8
                                                  # chapters 3-4: CIFAR-10 with borders (needs cifar10/ data)
    .venv/bin/python benchmarks/bench_batched.py --model vgg16_bn     # chapter 5: K = 4 VGG16-BN members batched
                                                  # (vmap) against the same model member by member (random images)

Every timing runs the training step of the book's loop (nhtlib.engine.train: batch sampler, select, member loss, backward,
batched AdamW), without logging. FLOPs are the matmul FLOPs of forward + backward counted by
torch.utils.flop_counter (elementwise work is not counted). On a shared machine, run it when the cores are idle:
the numbers scale with whatever CPU time the other processes leave.
"""
from __future__ import annotations

import argparse
import os
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

import nhtlib as nht
from nhtlib.engine import plan
from nhtlib.data import Dataset, Split, stack_members
from nhtlib.engine.train import BatchSampler, make_optimizer, member_loss, select


def setup(model_cfg, task, cfg, seeds, loop_batchnorm=False):
    data = stack_members([task.build(s) for s in seeds])
    model = model_cfg.build(data.input_shape, data.n_classes, seeds)
    model._loop_batchnorm = loop_batchnorm  # StackedModel: BatchNorm members one after the other (the old path)
    k = len(seeds)
    opt = make_optimizer(model, cfg, torch.full((k,), cfg.lr, dtype=torch.float64),
                         torch.full((k,), cfg.weight_decay, dtype=torch.float64))
    sampler = BatchSampler(data.splits["train"].size, cfg.batch_size, cfg.sampling, seeds)
    return model, data, opt, sampler


def step(model, data, opt, sampler, k):
    x, y = select(data.splits["train"], sampler.next(), k)
    loss = member_loss(model(x), y).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def steps_per_second(model_cfg, task, cfg, seeds, steps, warmup=3, loop_batchnorm=False):
    model, data, opt, sampler = setup(model_cfg, task, cfg, seeds, loop_batchnorm)
    for _ in range(warmup):
        step(model, data, opt, sampler, len(seeds))
    t0 = time.perf_counter()
    for _ in range(steps):
        step(model, data, opt, sampler, len(seeds))
    return steps / (time.perf_counter() - t0)


def single_net(model_cfg, task, data):
    """The plain single nn.Module of a model config (modular models take p, image models the input shape)."""
    return model_cfg.single(task.p) if hasattr(task, "p") else model_cfg.single(data.input_shape, data.n_classes)


def plain_steps_per_second(model_cfg, task, cfg, steps, warmup=3):
    """One model as a user would write it: the single nn.Module, torch.optim.AdamW, the same decay groups."""
    data = task.build(0)
    torch.manual_seed(0)
    net = single_net(model_cfg, task, data)
    params = list(net.parameters())
    decayed = [q for q in params if cfg.decay == "all" or q.dim() >= 2]
    rest = [q for q in params if not (cfg.decay == "all" or q.dim() >= 2)]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr)
    x, y = data.splits["train"].inputs(), data.splits["train"].y
    g = torch.Generator().manual_seed(0)

    def one_step():
        idx = torch.randint(0, len(y), (cfg.batch_size,), generator=g) if cfg.batch_size else slice(None)
        loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(warmup):
        one_step()
    t0 = time.perf_counter()
    for _ in range(steps):
        one_step()
    return steps / (time.perf_counter() - t0)


def matmul_flops_per_step(model_cfg, task, cfg, seeds):
    model, data, opt, sampler = setup(model_cfg, task, cfg, seeds)
    with FlopCounterMode(display=False) as counter:
        x, y = select(data.splits["train"], sampler.next(), len(seeds))
        member_loss(model(x), y).sum().backward()
    return counter.get_total_flops()


def plain_flops_per_step(model_cfg, task, cfg):
    data = task.build(0)
    net = single_net(model_cfg, task, data)
    x, y = data.splits["train"].inputs(), data.splits["train"].y
    n = cfg.batch_size or len(y)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(net(x[:n]), y[:n]).backward()
    return counter.get_total_flops()


def matmul_rate(n=1024, repeats=20):
    """GFLOP/s of a plain fp32 n×n×n matmul (the machine's attainable matmul rate; `nhtlib.engine.plan`'s)."""
    return plan.matmul_rate(torch.float32, n, repeats) / 1e9


class RandomImages:
    """A task of random images and labels (the timings do not depend on the pixels; no data files needed)."""

    def __init__(self, n_train, image_size, n_classes=10):
        self.n_train, self.image_size, self.n_classes = n_train, image_size, n_classes

    def build(self, seed):
        g = torch.Generator().manual_seed(0)  # the same images for every member: one shared split
        x = torch.randn(self.n_train, 3, self.image_size, self.image_size, generator=g)
        return Dataset({"train": Split(x, torch.randint(0, self.n_classes, (self.n_train,), generator=g))},
                       self.n_classes)


def batchnorm_main(args):
    """VGG16-BN, K members: batched through vmap (the buffers batched, BatchNorm updating each member's running
    statistics in place) against the same K-member model run member by member (StackedModel._loop_batchnorm)."""
    task = RandomImages(args.n_train, args.image_size)
    model_cfg = nht.models.config("vgg16", batchnorm=True, width=args.width)
    cfg = nht.TrainConfig(lr=1e-3, weight_decay=0.0, batch_size=args.batch_size or 32)
    seeds = list(range(args.k))
    peak = matmul_rate()
    batched = steps_per_second(model_cfg, task, cfg, seeds, args.steps)
    looped = steps_per_second(model_cfg, task, cfg, seeds, args.steps, loop_batchnorm=True)
    peak_after = matmul_rate()
    flops = matmul_flops_per_step(model_cfg, task, cfg, [0])
    print(f"vgg16 + BatchNorm, width = {args.width}, {args.image_size}×{args.image_size} px random images, "
          f"batch = {cfg.batch_size}, K = {args.k}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs visible")
    print(f"plain fp32 matmul 1024³: {peak:.1f} GFLOP/s (before), {peak_after:.1f} GFLOP/s (after)")
    print(f"matmul FLOPs per member-step (forward + backward): {flops / 1e6:.1f} MFLOP")
    print(f"{'':36s} {'steps/s':>9s} {'member-steps/s':>15s} {'GFLOP/s':>9s} {'% of matmul':>12s}")
    ref = (peak + peak_after) / 2
    for name, sps in [(f"K = {args.k} batched (vmap)", batched), (f"K = {args.k} member by member", looped)]:
        gflops = sps * args.k * flops / 1e9
        print(f"{name:36s} {sps:9.2f} {sps * args.k:15.1f} {gflops:9.1f} {100 * gflops / ref:11.0f}%")
    print(f"batched / member-by-member member-steps/s: {batched / looped:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="modular_mlp", choices=["modular_mlp", "transformer", "simple_cnn", "vgg16_bn"])
    ap.add_argument("--p", type=int, default=59)
    ap.add_argument("--train-frac", type=float, default=0.4)
    ap.add_argument("--batch-size", type=int, default=None, help="default: full batch")
    ap.add_argument("--k", type=int, default=None, help="default: 16 (vgg16_bn: 4)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per case; default: 40 (vgg16_bn: 10)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--unfused", action="store_true", help="MLP: gather the embeddings then matmul (no fusion)")
    ap.add_argument("--image-size", type=int, default=16, help="simple_cnn, vgg16_bn: side of the images")
    ap.add_argument("--n-train", type=int, default=2000, help="simple_cnn, vgg16_bn: training images")
    ap.add_argument("--data-root", default=None, help="simple_cnn: folder holding cifar10/")
    ap.add_argument("--width", type=float, default=0.125, help="vgg16_bn: channel multiplier")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.model == "vgg16_bn":
        args.k, args.steps = args.k or 4, args.steps or 10
        return batchnorm_main(args)
    args.k, args.steps = args.k or 16, args.steps or 40
    if args.model == "simple_cnn":  # chapters 3-4: border CIFAR-10, minibatches of 32 unless told otherwise
        args.batch_size = args.batch_size or 32
        task = nht.data.coloured_borders.BorderCIFARTask(n_train=args.n_train, n_test=10, image_size=args.image_size,
                                                border_width=1, data_root=args.data_root)
    else:
        task = nht.data.modular.ModularTask(p=args.p, train_frac=args.train_frac)
    kw = {"fused_embedding": not args.unfused} if args.model == "modular_mlp" else {}
    model_cfg = nht.models.config(args.model, **kw)
    cfg = nht.TrainConfig(lr=1e-3, weight_decay=1.0, batch_size=args.batch_size,
                          decay="matrices" if args.model == "modular_mlp" else "all")
    seeds = list(range(args.k))

    peak = matmul_rate()
    plain = plain_steps_per_second(model_cfg, task, cfg, args.steps)
    one = steps_per_second(model_cfg, task, cfg, [0], args.steps)
    batched = steps_per_second(model_cfg, task, cfg, seeds, args.steps)
    t0 = time.perf_counter()
    for s in seeds:  # the same K models, one after another
        steps_per_second(model_cfg, task, cfg, [s], args.steps, warmup=0)
    sequential_model_steps = args.k * args.steps / (time.perf_counter() - t0)
    peak_after = matmul_rate()
    flops_one = matmul_flops_per_step(model_cfg, task, cfg, [0])
    flops_plain = plain_flops_per_step(model_cfg, task, cfg)

    setting = (f"{args.image_size}×{args.image_size} px, {args.n_train} images" if args.model == "simple_cnn" else
               f"p = {args.p}, train_frac = {args.train_frac}")
    print(f"{args.model}{' (unfused)' if args.unfused else ''}, {setting}, "
          f"batch = {args.batch_size or 'full'}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs visible")
    print(f"plain fp32 matmul 1024³: {peak:.1f} GFLOP/s (before), {peak_after:.1f} GFLOP/s (after)")
    print(f"matmul FLOPs per model-step (forward + backward): {flops_one / 1e6:.1f} MFLOP "
          f"(plain nn.Module: {flops_plain / 1e6:.1f} MFLOP)")
    rows = [("1 model, plain nn.Module + AdamW", plain, plain, flops_plain),
            ("1 model alone (batched code, K = 1)", one, one, flops_one),
            (f"K = {args.k} batched", batched, batched * args.k, flops_one),
            (f"{args.k} models one after another", sequential_model_steps / args.k, sequential_model_steps, flops_one)]
    print(f"{'':36s} {'steps/s':>9s} {'model-steps/s':>14s} {'GFLOP/s':>9s} {'% of matmul':>12s}")
    ref = (peak + peak_after) / 2
    for name, sps, msps, flops in rows:
        gflops = msps * flops / 1e9
        print(f"{name:36s} {sps:9.2f} {msps:14.1f} {gflops:9.1f} {100 * gflops / ref:11.0f}%")
    print(f"batched / sequential model-steps/s: {batched * args.k / sequential_model_steps:.2f}x")


if __name__ == "__main__":
    main()
