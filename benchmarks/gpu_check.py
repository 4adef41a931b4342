"""The prepared GPU check: the book's real training loop on the device at paper shapes, with no data on the machine,
what its workloads achieve per precision, and whether NSDL's grokking run reproduces there — one command, at most 8
minutes on an NVIDIA H200 (`--budget-s`, default 420 s), one JSON record that the compute planner reads
(`nhtlib.engine.plan.measured_rates`).

    python benchmarks/gpu_check.py                   # on the lent GPU: benchmarks/records/gpu_check-h200-<time>.json
    python benchmarks/gpu_check.py --out "$OUT"      # on a copied tree: write the record where it comes back
    .venv/bin/python benchmarks/gpu_check.py --tiny --out /tmp/records   # the same code on this CPU, about a minute

No data file is read: for the whole run NHT_DATA_ROOT points at a folder that does not exist (restored on return),
the chapters' configs name it, the plans size paper scale at the full data sets (`nhtlib.data.layout`), and every
data set is synthetic (`nhtlib.data.synthetic`: the task's own build on random raw arrays of the real formats).

What is checked and measured:

1. **The real loop, per workload.** A workload is one model class on one task kind of a chapter at scale "paper"
   (tiny: "smoke"), its heaviest batched group (FLOPs per step × members × steps over `nhtlib.engine.plan.groups` of
   all the chapter's sweeps; the planner's `StepCost`, measured on the CPU). Chapter 6 reads chapters 1–4's groups:
   a group already checked is not run again (its entry says `same_run_as`). For each workload, K members (as many as
   `nhtlib.engine.memory.fit` says fit the free memory at the full data sizes, capped: `Mode.real_member_cap`) are
   trained by `nhtlib.engine.train.train` itself on synthetic data of the real shapes and dtypes, made for their
   seeds and stacked as the sweep stacks them (uint8 images decoded — and borders drawn — batch by batch on the
   device, unless the real run would decode the whole set up front: `nhtlib.engine.sweep.DECODE_UP_FRONT_BYTES` at
   the full sizes), with the group's own TrainConfig except: `Mode.real_steps` steps, logged on a linear grid of
   `Mode.real_logs` (evaluation of every split in chunks — K-fold expanded for shared splits — norms, and the sweep's
   extra metrics), a checkpoint at half the steps. Then a fresh model resumes from that checkpoint to the end: its
   tables must equal the unbroken run's (`resume_equal`; the largest difference of any logged value is recorded).
   The memory plan of that call (`memory.fit` at the synthetic sizes) is recorded beside the measured peak
   (`torch.cuda.max_memory_allocated` above what was allocated before; None on a CPU) and `torch.cuda.mem_get_info`.
2. **Achieved FLOP/s per chapter × model × precision.** The heaviest workload of every model class of a chapter,
   built with K members (memory permitting; tiny: 2 members at 8 examples a step) and trained on random inputs of
   the real shapes by `nhtlib.engine.plan.synthetic_step` (the real optimiser with the members' η and λ, the forward
   under the precision's autocast, the fp32 loss), the TF32 flags of the precision and the loop's backend switches
   (`nhtlib.engine.train.backend_flags`: cuDNN autotuning for a convolutional model on CUDA) held as in training.
   Steps are timed after warm-up between `torch.cuda.synchronize()` calls, their number fitted to a few seconds.
   Achieved FLOP/s = `cost.step_flops(batch) × K / seconds per step` (the planner's FLOPs: matmuls and convolutions
   of forward and backward), and its share of the device's dense peak (`nhtlib.engine.plan.H200.peak_flops`; null
   off an H200).
3. **NSDL Table 2 at λ = 1 on the device.** NSDL's Transformer at its settings (p = 97, AdamW η = 1e-3, batch 512
   with replacement, 10 seeds 42–51 batched, 4,400 steps: T_grok ≈ 1,840 plus NSDL's 2,000-step window, logged every
   200 steps — NSDL's grid) trained by `nhtlib.engine.sweep.run` into a fresh run cache at fp32, then, when the budget
   allows, at the fastest precision of part 2 (the grokking chapter's, whose heaviest group is this Transformer);
   `analyse_nsdl` reads T_mem and T_grok on NSDL's grid, compared with `NSDL_TABLE2` (T_mem ≈ 800, T_grok =
   1,840 ± 215), with the wall time and member-steps/s. Tiny: p = 31, 3 seeds, 200 steps, then tf32.
4. **The record** `gpu_check-<device>-<UTC time>.json` in `--out` (default benchmarks/records/; tiny mode: a
   temporary folder unless `--out` is given, so that a CPU record never lands where the planner looks): device,
   versions, commit, `source_hash` (`nhtlib.engine.source.run_source_hash`: the code a run executes),
   `real_loop` {workload: entry}, `workloads` {"<chapter>:<Model>": {precision: FLOP/s}}, `rates` {chapter:
   {precision: FLOP/s}} (the chapter's heaviest workload), per-entry details and skip reasons, the NSDL comparison,
   the total wall time, and `complete` (true only when every part ran to its end: nothing skipped, failed or
   interrupted; `incomplete` lists what did not). It is written after every entry and at the end (also on SIGTERM),
   so a killed run still leaves what it measured.

The machine: the lent NVIDIA H200 (141 GB, dense peaks 67 / 494.5 / 989.5 TFLOP/s at fp32 / tf32 / bf16, as
`nhtlib.engine.plan.H200` states them); any other CUDA device works, recorded under a slug of its name, without a share
of peak. Not yet run on one: estimated at ≈ 5–6 minutes (planning ≈ 1 min on the host's CPU: every group's step
cost, as the planner measures it; part 1 ≈ 1.5 min for 12 workloads, part 2 ≈ 1.5 min, each NSDL run under a
minute). Parts 1 and 2 stop starting entries when less than 2 minutes of the budget are left, and an NSDL run starts
only when its estimate (its batched step timed on the device × its steps) fits what is left. Tiny mode runs at one
torch thread (on a busy shared CPU two spinning threads were ten times slower).

Every entry catches its own failure (out of memory: K is halved and the entry retried) and records it instead of
stopping; progress lines are flushed as they happen.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import torch

try:
    import nhtlib  # noqa: F401 - an editable install (`make venv`)
except ImportError:  # a bare machine (the lent GPU): the checkout itself
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nhtlib.engine import plan  # noqa: E402 - after the path fallback
from nhtlib.engine import memory  # noqa: E402
from nhtlib.chapters import CHAPTERS  # noqa: E402
from nhtlib.chapters import grokking as grok  # noqa: E402
from nhtlib.engine.cache import RunCache  # noqa: E402
from nhtlib.config import PRECISIONS  # noqa: E402
from nhtlib.data import Dataset  # noqa: E402
from nhtlib.data.layout import DataLayout, layout  # noqa: E402
from nhtlib.data.synthetic import synthetic_members  # noqa: E402
from nhtlib.engine.source import run_source_hash  # noqa: E402
from nhtlib.paths import atomic_write_bytes, git_commit  # noqa: E402
from nhtlib.engine.precision import tf32_flags  # noqa: E402
from nhtlib.engine.sweep import DECODE_UP_FRONT_BYTES, RunConfig, Sweep, is_out_of_memory  # noqa: E402
from nhtlib.engine.sweep import run as run_configs  # noqa: E402
from nhtlib.engine.train import backend_flags, train  # noqa: E402

NSDL_FIRST_SEED = 42  # NSDL's seeds 42–51
FASTER_BY = 1.05  # a precision is "faster" than fp32 when its rate is at least this many times fp32's
NO_DATA = "gpu_check-no-data"  # the data root of the whole run: a folder that does not exist


@dataclass(frozen=True)
class Mode:
    """How hard the check works: the GPU run, or the CPU run of the test suite at tiny shapes."""

    name: str
    scale: str  # the chapters' scale
    member_cap: int | None  # part 2: at most this many members per batched group (None: as many as fit)
    warmup_steps: int
    timed_s: float  # the timed window of one (workload, precision)
    entry_limit_s: float  # one (workload, precision) never runs longer than this (warm-up included)
    max_steps: int  # timed steps at most
    nsdl: grok.NSDLPreset
    nsdl_reserve_s: float  # parts 1 and 2 start no entry once less than this is left of the budget
    second_run_always: bool  # run the second NSDL precision even when it is not faster (tiny: exercise the path)
    real_member_cap: int  # part 1: members of the real loop at most (fewer when fewer fit)
    real_steps: int  # part 1: training steps of the unbroken run (the checkpoint is at half of them)
    real_logs: int  # part 1: log steps after step 0 (linear grid; must hold real_steps / 2)
    eval_examples: int  # part 1: examples of a task's synthetic evaluation set (`nhtlib.data.synthetic`)
    full_batch_cap: int  # part 1: training examples of a full-batch file task at most
    rate_batch_cap: int | None  # part 2: examples of a timed step at most (None: the group's batch)
    second_precision: str | None  # part 3's second run (None: the fastest of part 2 when it is faster than fp32)


GPU = Mode("gpu", "paper", None, warmup_steps=3, timed_s=2.0, entry_limit_s=12.0, max_steps=10_000,
           # NSDL Table 2: λ = 1 only, 10 seeds, stopped 2,000 steps after T_grok ≈ 1,840 (4,400 covers the latest
           # seed's 2,200 + 2,000), logged on NSDL's 200-step grid
           nsdl=grok.NSDLPreset(p=97, lr=1e-3, batch_size=512, seeds=10, lambdas=(1.0,), steps_low=4400, steps=4400,
                                log_every=200, paper_grid=200, post_window=2000),
           nsdl_reserve_s=120.0, second_run_always=False,
           real_member_cap=32, real_steps=8, real_logs=2, eval_examples=1024, full_batch_cap=4096,
           rate_batch_cap=None, second_precision=None)
# Tiny mode checks the code paths, not the numbers: NSDL's Transformer at p = 31, 5 × η, batch 32, λ = 1 only, 200
# steps (the seeds need not memorise or grok), its second run at tf32 (on a CPU the same arithmetic as fp32: the
# test asks for equal results); rates of two members at 8 examples per step without warm-up (bf16 convolutions on a
# CPU take seconds a step)
TINY = Mode("tiny", "smoke", 2, warmup_steps=0, timed_s=0.1, entry_limit_s=1.0, max_steps=200,
            nsdl=grok.NSDLPreset(p=31, lr=5e-3, batch_size=32, seeds=3, lambdas=(1.0,), steps_low=200, steps=200,
                                 log_every=25, paper_grid=50, post_window=50),
            nsdl_reserve_s=30.0, second_run_always=True,
            real_member_cap=2, real_steps=4, real_logs=2, eval_examples=40, full_batch_cap=256,
            rate_batch_cap=8, second_precision="tf32")


class Clock:
    """Seconds since the start, the budget's deadline, and flushed progress lines."""

    def __init__(self, budget_s: float):
        self.start = time.perf_counter()
        self.budget_s = budget_s

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def left(self) -> float:
        return self.budget_s - self.elapsed

    def say(self, message: str) -> None:
        print(f"[gpu_check {self.elapsed:6.1f} s] {message}", flush=True)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return f"CPU ({n} torch thread{'s' if n != 1 else ''}, {os.cpu_count()} cores)"


def device_key(name: str, tiny: bool) -> str:
    """'cpu-tiny' in tiny mode, 'h200' for an H200 (the planner's key, `nhtlib.engine.plan.DEVICES`), else a slug of the
    name."""
    if tiny:
        return "cpu-tiny"
    if "H200" in name.upper():
        return "h200"
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def peak_flops(name: str, precision: str) -> float | None:
    """The device's dense peak at `precision` when the planner knows it (an H200), else None."""
    return plan.H200.peak_flops.get(precision) if "H200" in name.upper() else None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clean(value):
    """JSON-safe: NaN / inf as null, numpy scalars as Python numbers, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def short_error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".replace("\n", " ")
    return text[:400]


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def budget_reason(clock: Clock, mode: Mode) -> str | None:
    """Why no further entry may start (the NSDL part's reserve would be eaten), or None."""
    if clock.left >= mode.nsdl_reserve_s:
        return None
    return f"time budget: {clock.left:.0f} s left of {clock.budget_s:.0f} s, {mode.nsdl_reserve_s:.0f} s kept for " \
           "the NSDL run"


# ----------------------------------------------------------------------------------------------- workloads

@dataclass
class Workload:
    """One model class on one task kind of a chapter: its heaviest batched group, planned at the chapter's scale."""

    chapter: str
    key: str  # "<chapter>:<Model>", with "/<Task>" when the chapter trains that model on several task kinds
    model: str  # the model config's class name without "Config"
    task: str  # the task config's class name without "Task"
    members: list[RunConfig]
    sweep: Sweep
    cost: memory.StepCost
    shape: DataLayout
    batch: int
    train_flops: float  # step × members × steps

    @property
    def rate_key(self) -> str:
        """The record's `workloads` key: "<chapter>:<Model>"."""
        return f"{self.chapter}:{self.model}"

    @property
    def signature(self) -> str:
        """The group's batch signature: two chapters declaring the same group train it once (chapter 6 reads)."""
        return self.members[0].batch_signature()

    def describe(self) -> dict:
        first = self.members[0]
        return {"sweep": self.sweep.name, "model": self.model, "task": self.task,
                "input_shape": list(self.shape.input_shape), "group_members": len(self.members),
                "batch": self.batch, "steps": first.train.steps, "optimizer": first.train.optimizer,
                "precision": first.train.precision, "full_n_train": self.shape.n_train,
                "full_n_eval": self.shape.n_eval, "step_flops_per_member": self.cost.step_flops(self.batch),
                "group_train_flops": self.train_flops}


def _short(config, suffix: str) -> str:
    return type(config).__name__.removesuffix(suffix)


def chapter_workloads(chapter: str, scale: str, costs: dict) -> list[Workload]:
    """The chapter's workloads at `scale` in first-declared order: per (model class, task kind) its heaviest group,
    sized at the full data sets at paper scale (as the planner does). `costs` memoises `StepCost`s by (model digest,
    layout) across chapters."""
    sweeps = CHAPTERS[chapter].sweeps(scale)
    sweep_of: dict[str, Sweep] = {}
    for s in sweeps:
        for c in s.configs:
            sweep_of.setdefault(c.digest(), s)
    best: dict[tuple[str, str], Workload] = {}
    for members in plan.groups([c for s in sweeps for c in s.configs]):
        first = members[0]
        shape = layout(first.task, full=scale == "paper")
        key = (first.model.digest(), shape)
        if key not in costs:
            costs[key] = memory.measure_step(first, shape)
        cost, batch = costs[key], memory.step_batch(first.train, shape)
        total = cost.step_flops(batch) * len(members) * first.train.steps
        kind = (_short(first.model, "Config"), _short(first.task, "Task"))
        if kind not in best or total > best[kind].train_flops:
            best[kind] = Workload(chapter, "", kind[0], kind[1], members, sweep_of[first.digest()], cost, shape, batch,
                                  total)
    if not best:
        raise ValueError(f"{chapter} declares no members at scale {scale!r}")
    tasks_per_model: dict[str, int] = {}
    for model, _ in best:
        tasks_per_model[model] = tasks_per_model.get(model, 0) + 1
    for (model, task), w in best.items():
        w.key = f"{chapter}:{model}" + (f"/{task}" if tasks_per_model[model] > 1 else "")
    return list(best.values())


def heaviest(workloads: list[Workload]) -> Workload:
    return max(workloads, key=lambda w: w.train_flops)


# ------------------------------------------------------------------------------------------ part 1: real loop

def fit_here(cost: memory.StepCost, cfg, shape: DataLayout, members: int, device: torch.device
             ) -> tuple[int, int, float, float]:
    """(members per call, evaluation batch, planned peak bytes, free bytes): `memory.fit` on the device's free
    memory now, with the workspace the sweep plans for (as `memory.fit_members`); MemoryPlanError when one member
    does not fit."""
    free, reserve = memory.device_memory(str(device))
    fitted = memory.fit(cost, cfg, shape, members, free, reserve=reserve,
                        workspace=memory.workspace_bytes(cost, device.type))
    return (*fitted, free)


def real_members(w: Workload, device: torch.device, mode: Mode) -> tuple[int, dict]:
    """(K for the real loop, the memory plan at the full data sizes): the members per call `memory.fit` gives on
    the free memory, at most mode.real_member_cap (MemoryPlanError when one member does not fit)."""
    per_call, eval_batch, peak, free = fit_here(w.cost, w.members[0].train, w.shape, len(w.members), device)
    return min(per_call, mode.real_member_cap), {"free_bytes": free, "members_per_call": per_call,
                                                 "eval_batch": eval_batch, "peak_bytes": peak}


def synthetic_sizes(w: Workload, mode: Mode) -> tuple[int, int]:
    """(training, evaluation) examples of the workload's synthetic data: two batches of training examples (every
    epoch-drawn run turns its permutation over within the steps), all of them for full-batch training (up to
    mode.full_batch_cap), never more than the full split; mode.eval_examples for evaluation."""
    cfg = w.members[0].train
    n_train = w.shape.n_train if cfg.batch_size is None else 2 * cfg.batch_size
    cap = mode.full_batch_cap if cfg.batch_size is None else n_train
    return max(1, min(n_train, cap, w.shape.n_train)), mode.eval_examples


def decodes_up_front(data: Dataset, w: Workload) -> bool:
    """Whether the real run decodes its image splits once up front (`Dataset.decoded_if_small` in the sweep): their
    floats at the full data sizes fit DECODE_UP_FRONT_BYTES (scaled from the synthetic splits' decoded bytes)."""
    decoded = sum(split.decoded_nbytes for split in data.splits.values())
    examples = sum(split.size for split in data.splits.values())
    return decoded * (w.shape.n_train + w.shape.n_eval) / max(1, examples) <= DECODE_UP_FRONT_BYTES


def check_config(w: Workload, mode: Mode, eval_batch: int):
    """The group's TrainConfig, shortened: mode.real_steps steps, mode.real_logs linear log steps, a checkpoint at
    half the steps (one of the log steps), the evaluation batch `eval_batch` (not part of any result)."""
    steps, logs = mode.real_steps, mode.real_logs
    cfg = w.members[0].train.replace(steps=steps, n_logs=logs, log_grid="linear", checkpoint_every=steps // 2,
                                     eval_batch_size=eval_batch)
    if steps // 2 not in cfg.log_steps():
        raise ValueError(f"the checkpoint step {steps // 2} is not a log step of {cfg.log_steps()}")
    return cfg


def table_difference(a: list[pd.DataFrame], b: list[pd.DataFrame]) -> tuple[bool, float]:
    """(every member's tables equal exactly — values, dtypes, NaN where NaN — wall time aside; the largest absolute
    difference of a logged value, 0 where both are NaN, inf where only one is or the shapes differ)."""
    equal, worst = len(a) == len(b), 0.0 if len(a) == len(b) else math.inf
    for x, y in zip(a, b):
        x, y = x.drop(columns="wall_s"), y.drop(columns="wall_s")
        equal = equal and x.equals(y)
        if x.shape != y.shape or list(x.columns) != list(y.columns):
            worst = math.inf
            continue
        u, v = x.to_numpy(np.float64), y.to_numpy(np.float64)
        both_nan = np.isnan(u) & np.isnan(v)
        diff = np.where(both_nan, 0.0, np.abs(u - v))
        worst = max(worst, float(np.nan_to_num(diff, nan=math.inf).max(initial=0.0)))
    return equal, worst


def split_shapes(data: Dataset) -> dict:
    """{split: stored x shape and dtype, labels shape, border shape or None}: what the check trained on."""
    return {name: {"x": [list(s.x.shape), str(s.x.dtype).removeprefix("torch.")], "y": list(s.y.shape),
                   "border": None if s.border is None else list(s.border.shape), "codec": s.codec is not None}
            for name, s in data.splits.items()}


def seeds_first(members: list[RunConfig]) -> list[RunConfig]:
    """The members reordered so that the first ones have different seeds (round robin over the seeds, in order):
    K of them then hold per-seed data (labels, border colours) wherever the group has several seeds."""
    by_seed: dict[int, list[RunConfig]] = {}
    for c in members:
        by_seed.setdefault(c.seed, []).append(c)
    rounds = max(len(v) for v in by_seed.values())
    return [v[i] for i in range(rounds) for v in by_seed.values() if i < len(v)]


def build_model(configs: list[RunConfig], data: Dataset, device: torch.device) -> torch.nn.Module:
    """The batched model of `configs` on `device`, as the sweep builds it (each member from its own config and
    seed: `ModelConfig.build_members`)."""
    first = configs[0].model
    return first.build_members(data.input_shape, data.n_classes, [(c.model, c.seed) for c in configs]).to(device)


def run_real_loop(w: Workload, k: int, device: torch.device, mode: Mode) -> dict:
    """Train K members of the workload through `train` on synthetic data: unbroken with a checkpoint at half the
    steps, then a fresh model resumed from it; the tables compared, the memory plan beside the measured peak."""
    configs = seeds_first(w.members)[:k]
    first, seeds = configs[0], [c.seed for c in configs]
    n_train, n_eval = synthetic_sizes(w, mode)
    cuda = device.type == "cuda"
    if cuda:
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        allocated_before = torch.cuda.memory_allocated(device)
        free_before, total = torch.cuda.mem_get_info(device)
    data = synthetic_members(first.task, seeds, n_train=n_train, n_eval=n_eval, device=device)
    stored = split_shapes(data)
    up_front = decodes_up_front(data, w)
    if up_front:  # as the sweep would: the whole set decoded once
        data = data.decoded_if_small(math.inf)
    shape = dataclasses.replace(w.shape, n_train=data.splits["train"].size,
                                n_eval=sum(s.size for name, s in data.splits.items() if name != "train"))
    largest_eval = max(s.size for s in data.splits.values())
    cfg = check_config(w, mode, eval_batch=min(first.train.eval_batch_size, max(2, largest_eval // 4)))
    planned_k, planned_eval_batch, planned_peak, _ = fit_here(w.cost, cfg, shape, k, device)
    kw = dict(seeds=seeds, lrs=[c.train.lr for c in configs], weight_decays=[c.train.weight_decay for c in configs],
              checkpoint_seconds=math.inf, extra_metrics=w.sweep.extra_metrics, progress=False)
    with tempfile.TemporaryDirectory(prefix="gpu_check-checkpoint-") as folder:
        # one file per member, as the sweep checkpoints (`RunCache.member_checkpoint_path`)
        checkpoints = [Path(folder) / f"member-{i}.pt" for i in range(k)]
        model = build_model(configs, data, device)
        t0 = time.perf_counter()
        unbroken = train(model, data, cfg, checkpoint_path=checkpoints, desc=f"{w.key} unbroken", **kw)
        sync(device)
        unbroken_s = time.perf_counter() - t0
        measured_peak = torch.cuda.max_memory_allocated(device) - allocated_before if cuda else None
        if not all(c.is_file() for c in checkpoints):
            raise RuntimeError(f"no checkpoint was written at step {cfg.checkpoint_every} of {cfg.steps}")
        checkpoint_bytes = sum(c.stat().st_size for c in checkpoints)
        del model
        model = build_model(configs, data, device)
        t0 = time.perf_counter()
        resumed = train(model, data, cfg, checkpoint_path=checkpoints, desc=f"{w.key} resumed", **kw)
        sync(device)
        resumed_s = time.perf_counter() - t0
    equal, worst = table_difference(unbroken, resumed)
    del model, data
    return {"k": k, "steps": cfg.steps, "log_steps": cfg.log_steps(), "checkpoint_step": cfg.checkpoint_every,
            "checkpoint_bytes": checkpoint_bytes, "synthetic_n_train": shape.n_train, "synthetic_n_eval": shape.n_eval,
            "eval_batch": cfg.eval_batch_size, "decoded_up_front": up_front, "splits": stored,
            "extra_metrics": w.sweep.extra_metrics_key or (None if w.sweep.extra_metrics is None
                                                           else w.sweep.extra_metrics.__qualname__),
            "columns": list(unbroken[0].columns), "rows": len(unbroken[0]),
            "unbroken_s": unbroken_s, "resumed_s": resumed_s, "resume_equal": equal, "resume_max_abs_diff": worst,
            "memory": {"planned_members": planned_k, "planned_eval_batch": planned_eval_batch,
                       "planned_peak_bytes": planned_peak, "measured_peak_bytes": measured_peak,
                       "measured_over_planned": measured_peak / planned_peak if measured_peak else None,
                       "free_bytes_before": free_before if cuda else None, "total_bytes": total if cuda else None}}


def real_loop_entry(w: Workload, device: torch.device, mode: Mode, clock: Clock) -> dict:
    """Part 1's entry of one workload: the run's numbers, or `skipped` with the reason (OOM: K halved, retried)."""
    entry: dict = {"workload": w.describe()}
    reason = budget_reason(clock, mode)
    if reason:
        entry["skipped"] = reason
        return entry
    try:
        k, entry["full_size_plan"] = real_members(w, device, mode)
    except memory.MemoryPlanError as err:
        entry["skipped"] = f"does not fit: {short_error(err)}"
        return entry
    while True:
        try:
            entry.update(run_real_loop(w, k, device, mode))
            break
        except Exception as err:  # noqa: BLE001 - recorded per entry
            release(device)
            if is_out_of_memory(err) and k > 1:
                clock.say(f"{w.key}: out of memory at K = {k}; retrying at K = {k // 2}")
                entry.setdefault("notes", []).append(f"out of memory at K = {k}")
                k //= 2
                continue
            entry["skipped"] = f"error: {short_error(err)}"
            traceback.print_exc(limit=5)
            break
    release(device)
    if "skipped" in entry:
        clock.say(f"{w.key}: {entry['skipped']}")
    else:
        m = entry["memory"]
        peak = f", peak {m['measured_peak_bytes'] / 1e9:.2f} GB of {m['planned_peak_bytes'] / 1e9:.2f} planned" \
            if m["measured_peak_bytes"] else ""
        diff = "" if entry["resume_equal"] else f" (max diff {entry['resume_max_abs_diff']:.3g})"
        clock.say(f"{w.key}: real loop K = {entry['k']}, {entry['steps']} steps in {entry['unbroken_s']:.1f} s, "
                  f"resumed from step {entry['checkpoint_step']} {'equal' if entry['resume_equal'] else 'DIFFERENT'}"
                  f"{diff}{peak}")
    return entry


# ------------------------------------------------------------------------------------------------ part 2: rates

def time_training_steps(step, precision: str, device: torch.device, mode: Mode) -> tuple[float, int]:
    """(seconds per training step, steps timed) of `step(precision)` (`nhtlib.engine.plan.synthetic_step`), after
    warm-up; the whole call stays under mode.entry_limit_s (the steps are fitted to mode.timed_s from one
    calibration step)."""
    started = time.perf_counter()
    with tf32_flags(precision == "tf32"):
        for i in range(mode.warmup_steps):  # fewer when the steps are slow: the entry keeps to its limit
            step(precision)
            if i + 1 < mode.warmup_steps:
                sync(device)
                if time.perf_counter() - started > 0.3 * mode.entry_limit_s:
                    break
        sync(device)
        t0 = time.perf_counter()
        step(precision)
        sync(device)
        one = max(time.perf_counter() - t0, 1e-7)
        left = mode.entry_limit_s - (time.perf_counter() - started)
        n = min(mode.max_steps, max(1, int(mode.timed_s / one)), max(0, int(0.8 * left / one)))
        if n < 1:  # warm-up and calibration already spent the entry's time: the calibration step is the timing
            return one, 1
        t0 = time.perf_counter()
        for _ in range(n):
            step(precision)
        sync(device)
        return (time.perf_counter() - t0) / n, n


def members_that_fit(w: Workload, device: torch.device, mode: Mode) -> int:
    """All of the group's members when they fit the free memory (`memory.fit`), else as many as do; mode's cap."""
    members = len(w.members)
    if mode.member_cap is not None:
        return min(members, mode.member_cap)
    return fit_here(w.cost, w.members[0].train, w.shape, members, device)[0]


def timed_group(w: Workload, k: int, mode: Mode) -> tuple[list[RunConfig], DataLayout, int]:
    """(members, layout, examples per step) of the timed step: the group's first K members at its batch, or at
    most mode.rate_batch_cap examples (a smaller training split and batch)."""
    members, shape = w.members[:k], w.shape
    cap = mode.rate_batch_cap
    if cap is not None and w.batch > cap:
        shape = dataclasses.replace(shape, n_train=min(shape.n_train, cap))
        members = [c.replace(train=c.train.replace(batch_size=None if c.train.batch_size is None else cap))
                   for c in members]
    return members, shape, memory.step_batch(members[0].train, shape)


def measure_rates(w: Workload, device: torch.device, name: str, mode: Mode, clock: Clock) -> dict:
    """{precision: entry} of one workload: FLOP/s and timings, or `skipped` with the reason."""
    entries: dict = {}
    try:
        k = members_that_fit(w, device, mode)
    except memory.MemoryPlanError as err:
        reason = f"does not fit: {short_error(err)}"
        clock.say(f"{w.rate_key}: {reason}")
        return {p: {"skipped": reason} for p in PRECISIONS}
    built, built_model, built_k = None, None, 0
    for precision in PRECISIONS:
        entry: dict = {}
        entries[precision] = entry
        while True:
            reason = budget_reason(clock, mode)
            if reason:
                entry["skipped"] = reason
                break
            try:
                if built is None or built_k != k:
                    built = None
                    release(device)
                    members, shape, batch = timed_group(w, k, mode)
                    built, built_model = plan.synthetic_step(members, shape, device)
                    built_k = k
                with backend_flags(built_model, device.type):  # the loop's own switches (cuDNN autotuning)
                    seconds, n = time_training_steps(built, precision, device, mode)
            except Exception as err:  # noqa: BLE001 - recorded per entry
                built = built_model = None
                release(device)
                if is_out_of_memory(err) and k > 1:
                    clock.say(f"{w.rate_key} {precision}: out of memory at K = {k}; retrying at K = {k // 2}")
                    entry.setdefault("notes", []).append(f"out of memory at K = {k}")
                    k //= 2
                    continue
                entry["skipped"] = f"error: {short_error(err)}"
                clock.say(f"{w.rate_key} {precision}: {entry['skipped']}")
                traceback.print_exc(limit=3)
                break
            flops = w.cost.step_flops(batch) * k / seconds
            peak = peak_flops(name, precision)
            entry.update({"flops_per_s": flops, "k": k, "batch": batch, "seconds_per_step": seconds,
                          "steps_timed": n, "member_steps_per_s": k / seconds,
                          "share_of_peak": flops / peak if peak else None})
            share = f", {flops / peak:.1%} of peak" if peak else ""
            clock.say(f"{w.rate_key} {precision}: {flops / 1e12:.4f} TFLOP/s ({1e3 * seconds:.2f} ms/step over {n} "
                      f"steps, K = {k}{share})")
            break
    built = built_model = None
    release(device)
    return entries


def rated(entries: dict) -> dict[str, float]:
    """{precision: FLOP/s} of the entries that were measured."""
    return {p: e["flops_per_s"] for p, e in entries.items() if "flops_per_s" in e}


# --------------------------------------------------------------------------------------------- part 2: NSDL

def nsdl_paper() -> dict:
    """NSDL Table 2's T_mem and T_grok over its 10 released seeds: mean, sd, n [companion-data]."""
    t = grok.NSDL_TABLE2
    return {col: {"mean": float(t[col].mean()), "sd": float(t[col].std(ddof=1)), "n": int(t[col].notna().sum())}
            for col in ("T_mem", "T_grok")}


def stats(values) -> dict:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    return {"mean": float(v.mean()) if len(v) else None, "sd": float(v.std(ddof=1)) if len(v) > 1 else None,
            "n": int(len(v))}


def nsdl_estimate_s(configs, device: torch.device, mode: Mode) -> float:
    """Seconds the NSDL run is expected to take: its batched step timed here (fp32, random inputs) × its steps,
    plus half for the loop's sampling and log steps and ten seconds of set-up."""
    shape = layout(configs[0].task)
    built = plan.synthetic_step(configs, shape, device)[0]
    probe = dataclasses.replace(mode, timed_s=min(mode.timed_s, 1.0), entry_limit_s=min(mode.entry_limit_s, 5.0))
    seconds, _ = time_training_steps(built, "fp32", device, probe)
    del built
    release(device)
    return 1.5 * seconds * configs[0].train.steps + 10.0


def nsdl_run(preset: grok.NSDLPreset, precision: str, device: torch.device, clock: Clock,
             comparable: bool = True, progress: bool = False) -> dict:
    """Train NSDL's λ = 1 members at `precision` into a fresh run cache; T_mem and T_grok on NSDL's grid (compared
    with NSDL's in units of its sd when `comparable`)."""
    configs = [c.replace(train=c.train.replace(precision=precision))
               for c in grok.nsdl_configs(preset, first_seed=NSDL_FIRST_SEED)]
    steps = configs[0].train.steps
    clock.say(f"NSDL {precision}: {len(configs)} members × {steps:,} steps, p = {preset.p}")
    with tempfile.TemporaryDirectory(prefix="gpu_check-cache-") as folder:
        t0 = time.perf_counter()
        table = run_configs(configs, device=str(device), cache=RunCache(folder), progress=progress,
                            desc=f"NSDL {precision}")
        wall = time.perf_counter() - t0
    _, fine, on_grid = grok.analyse_nsdl(table, preset)
    last = table.sort_values("step").groupby("seed").last()  # each seed's last logged row
    at_one = on_grid[on_grid.lam == grok.LAM_ONE].sort_values("seed")
    out = {"precision": precision, "members": len(configs), "steps": steps, "wall_s": wall,
           "train_wall_s": float(table.groupby("run").wall_s.max().max()),
           "member_steps_per_s": len(configs) * steps / wall, "grid": preset.paper_grid,
           "T_mem": stats(at_one.T_mem), "T_grok": stats(at_one.T_grok),
           "grokked": f"{int(at_one.grokked.sum())}/{len(at_one)}",
           "per_seed": [{"seed": int(r.seed), "T_mem": r.T_mem, "T_grok": r.T_grok,
                         "final_train_acc": float(last.train_acc[r.seed]),
                         "final_test_acc": float(last.test_acc[r.seed])}
                        for r in at_one.itertuples()],
           "T_grok_fine_grid": stats(fine[fine.lam == grok.LAM_ONE].T_grok), "fine_grid": preset.log_every}
    paper = nsdl_paper()
    for col in ("T_mem", "T_grok"):
        mine = out[col]["mean"]
        out[f"{col}_minus_paper_in_paper_sd"] = (mine - paper[col]["mean"]) / paper[col]["sd"] \
            if mine is not None and comparable else None
    clock.say(f"NSDL {precision}: T_mem {_pm(out['T_mem'])}, T_grok {_pm(out['T_grok'])} ({out['grokked']} "
              f"grokked) in {wall:.1f} s, {out['member_steps_per_s']:.0f} member-steps/s")
    return out


def _pm(s: dict) -> str:
    if s.get("mean") is None:
        return "— (none)"
    sd = f" ± {s['sd']:,.0f}" if s.get("sd") is not None else ""
    return f"{s['mean']:,.0f}{sd} (n = {s['n']})"


def fastest_precision(rates: dict[str, float], device: torch.device) -> str | None:
    """The precision with the highest rate other than fp32 (tf32 is fp32 on a CPU), or None."""
    others = {p: r for p, r in rates.items() if p != "fp32" and not (p == "tf32" and device.type == "cpu")}
    return max(others, key=others.get) if others else None


def nsdl_part(rates: dict[str, dict[str, float]], device: torch.device, mode: Mode, clock: Clock,
              save=lambda part: None) -> dict:
    """Part 2: NSDL at fp32, then at the grokking chapter's fastest precision when it is faster and the budget allows
    (`save(part)` after the first run, so that a run killed in the second keeps the first)."""
    preset = mode.nsdl
    settings = dict(comparable=mode.name != "tiny", progress=mode.name != "tiny")
    out: dict = {"preset": preset.to_dict(), "seeds": [NSDL_FIRST_SEED, NSDL_FIRST_SEED + preset.seeds - 1],
                 "paper": {**nsdl_paper(), "grid": 200,
                           "source": "NSDL Table 2, its 10 released seeds 42–51 (nhtlib.chapters.grokking.NSDL_TABLE2)",
                           "printed": "T_mem = 800 in 9 of 10 seeds (seed 49: 1,200); T_grok = 1,840 ± 215"},
                 "runs": {}}
    if mode.name == "tiny":
        out["note"] = "tiny mode: p = 31 at 5 × NSDL's η and batch 64, not NSDL's settings; not comparable to Table 2"
    configs = grok.nsdl_configs(preset, first_seed=NSDL_FIRST_SEED)
    try:
        estimate = nsdl_estimate_s(configs, device, mode)
    except Exception as err:  # noqa: BLE001
        estimate = None
        clock.say(f"NSDL: could not time a step ({short_error(err)}); running anyway")
        release(device)
    out["estimate_s"] = estimate
    if estimate is not None and estimate > clock.left:
        out["runs"]["fp32"] = {"skipped": f"estimated {estimate:.0f} s, {clock.left:.0f} s left of the budget"}
        clock.say(f"NSDL fp32: skipped ({out['runs']['fp32']['skipped']})")
        return out
    try:
        out["runs"]["fp32"] = nsdl_run(preset, "fp32", device, clock, **settings)
        save(out)
    except Exception as err:  # noqa: BLE001
        out["runs"]["fp32"] = {"skipped": f"error: {short_error(err)}"}
        clock.say(f"NSDL fp32: {out['runs']['fp32']['skipped']}")
        traceback.print_exc(limit=5)
        release(device)
        return out
    chapter_rates = rates.get(grok.NAME, {})
    second = mode.second_precision or fastest_precision(chapter_rates, device)
    fp32_rate = chapter_rates.get("fp32")
    if second is None:
        out["second_precision"] = {"skipped": f"no rate of {grok.NAME} other than fp32 was measured"}
    elif not mode.second_run_always and (fp32_rate is None or chapter_rates.get(second, 0) < FASTER_BY * fp32_rate):
        out["second_precision"] = {"skipped": f"{second} is not {FASTER_BY:g} × faster than fp32 on {grok.NAME}"}
    elif out["runs"]["fp32"]["wall_s"] > clock.left:
        out["second_precision"] = {"skipped": f"the fp32 run took {out['runs']['fp32']['wall_s']:.0f} s, "
                                              f"{clock.left:.0f} s left of the budget"}
    else:
        out["second_precision"] = {"precision": second}
        try:
            run = nsdl_run(preset, second, device, clock, **settings)
            first_t = {r["seed"]: r for r in out["runs"]["fp32"]["per_seed"]}
            for col in ("T_mem", "T_grok"):  # same seeds, same initialisation: how far the precision moves them
                diffs = [r[col] - first_t[r["seed"]][col] for r in run["per_seed"]
                         if r[col] is not None and first_t[r["seed"]][col] is not None
                         and np.isfinite(r[col]) and np.isfinite(first_t[r["seed"]][col])]
                run[f"{col}_minus_fp32_per_seed"] = stats(diffs)
            run["speedup_over_fp32"] = out["runs"]["fp32"]["wall_s"] / run["wall_s"]
            out["runs"][second] = run
        except Exception as err:  # noqa: BLE001
            out["runs"][second] = {"skipped": f"error: {short_error(err)}"}
            clock.say(f"NSDL {second}: {out['runs'][second]['skipped']}")
            traceback.print_exc(limit=5)
            release(device)
    if "skipped" in out["second_precision"]:
        clock.say(f"NSDL second precision: skipped ({out['second_precision']['skipped']})")
    return out


# -------------------------------------------------------------------------------------------- the record

def record_path(out: Path, key: str, stamp: str) -> Path:
    return out / f"gpu_check-{key}-{stamp}.json"


def write(record: dict, path: Path) -> None:
    atomic_write_bytes(path, (json.dumps(clean(record), indent=1, allow_nan=False) + "\n").encode())


def incomplete_parts(record: dict) -> list[str]:
    """What did not run to its end: a chapter not planned, a real-loop or rate entry skipped or failed, an NSDL run
    skipped (the second precision only when the budget stopped it), an interruption."""
    out = [f"planning {c}: {why}" for c, why in record["planning_failed"].items()]
    out += [f"real loop {key}: {e['skipped']}" for key, e in record["real_loop"].items() if "skipped" in e]
    out += [f"rate {key} {p}: {e['skipped']}" for key, d in record["details"].items()
            for p, e in d.get("precisions", {}).items() if "skipped" in e]
    nsdl = record.get("nsdl", {})
    if "skipped" in nsdl:
        out.append(f"NSDL: {nsdl['skipped']}")
    out += [f"NSDL {p}: {run['skipped']}" for p, run in nsdl.get("runs", {}).items() if "skipped" in run]
    if "fp32" not in nsdl.get("runs", {}):
        out.append("NSDL fp32: not run")
    second = nsdl.get("second_precision", {}).get("skipped", "")
    if "budget" in second:
        out.append(f"NSDL second precision: {second}")
    if "interrupted" in record:
        out.append(record["interrupted"])
    return out


def summary(record: dict) -> str:
    """A few lines for people: the real loop per workload, FLOP/s per workload and precision (share of peak), the
    NSDL comparison."""
    unit, scale = ("TFLOP/s", 1e12) if record["mode"] == "gpu" else ("GFLOP/s", 1e9)
    lines = [f"{record['device']} ({record['device_key']}), torch {record['torch']}, {record['mode']} mode, "
             f"{record['total_wall_s']:.0f} s of a {record['budget_s']:.0f} s budget, "
             f"{'complete' if record['complete'] else 'INCOMPLETE'}", "real loop (K members, resumed = unbroken?, "
             "peak measured / planned):"]
    for key, e in record["real_loop"].items():
        if "skipped" in e:
            lines.append(f"  {key:44s} skipped — {e['skipped']}")
            continue
        m = e["memory"]
        ratio = f"{m['measured_over_planned']:.2f}" if m.get("measured_over_planned") else "n/a"
        same = f" (= {e['same_run_as']})" if "same_run_as" in e else ""
        lines.append(f"  {key:44s} K = {e['k']:3d}, resume {'equal' if e['resume_equal'] else 'DIFFERENT'} "
                     f"(max diff {e['resume_max_abs_diff']:.3g}), peak {ratio}{same}")
    lines.append(f"achieved {unit}:")
    lines.append(f"  {'workload':44s}" + "".join(f"{p:>16s}" for p in PRECISIONS))
    for key, detail in record["details"].items():
        cells = []
        for p in PRECISIONS:
            e = detail.get("precisions", {}).get(p, {})
            if "flops_per_s" in e:
                share = f" ({e['share_of_peak']:.0%})" if e.get("share_of_peak") else ""
                cells.append(f"{e['flops_per_s'] / scale:.3g}{share}")
            else:
                cells.append("skipped")
        lines.append(f"  {key:44s}" + "".join(f"{c:>16s}" for c in cells))
    nsdl = record.get("nsdl", {})
    paper = nsdl.get("paper", {})
    for precision, run in nsdl.get("runs", {}).items():
        if "skipped" in run:
            lines.append(f"NSDL λ = 1 {precision}: skipped — {run['skipped']}")
            continue
        lines.append(f"NSDL λ = 1 {precision} ({run['members']} seeds × {run['steps']:,} steps, "
                     f"{run['wall_s']:.0f} s, {run['member_steps_per_s']:.0f} member-steps/s): "
                     f"T_mem {_pm(run['T_mem'])}, T_grok {_pm(run['T_grok'])} [{run['grokked']} grokked]; "
                     f"NSDL: T_mem {_pm(paper.get('T_mem', {}))}, T_grok {_pm(paper.get('T_grok', {}))}")
    for item in record.get("incomplete", []):
        lines.append(f"incomplete: {item}")
    lines.append(f"record: {record.get('path', '?')}")
    return "\n".join(lines)


def check_workloads(chapters: list[str], device: torch.device, name: str, mode: Mode, clock: Clock, record: dict,
                    save) -> None:
    """Parts 1 and 2 into `record` (`save()` after every entry): the real loop of every workload of every chapter,
    then the rates of every chapter's model classes (a group another chapter declared too is run once)."""
    costs: dict = {}
    planned: dict[str, list[Workload]] = {}
    for chapter in chapters:
        try:
            planned[chapter] = chapter_workloads(chapter, mode.scale, costs)
        except Exception as err:  # noqa: BLE001 - recorded, the other chapters go on
            record["planning_failed"][chapter] = short_error(err)
            clock.say(f"{chapter}: planning failed: {short_error(err)}")
            traceback.print_exc(limit=5)
    run_of: dict[str, str] = {}  # group signature -> the real-loop key that ran it
    for workloads in planned.values():
        for w in workloads:
            if w.signature in run_of:
                record["real_loop"][w.key] = {**record["real_loop"][run_of[w.signature]],
                                              "workload": w.describe(), "same_run_as": run_of[w.signature]}
                continue
            clock.say(f"{w.key}: {w.sweep.name!r}, {len(w.members)} members, input {tuple(w.shape.input_shape)}, "
                      f"batch {w.batch}")
            record["real_loop"][w.key] = real_loop_entry(w, device, mode, clock)
            run_of[w.signature] = w.key
            save()
    rated_as: dict[str, str] = {}  # group signature -> the rate key that timed it
    for chapter, workloads in planned.items():
        by_model: dict[str, Workload] = {}
        for w in workloads:
            if w.model not in by_model or w.train_flops > by_model[w.model].train_flops:
                by_model[w.model] = w
        for w in by_model.values():
            if w.signature in rated_as:
                entries = record["details"][rated_as[w.signature]]["precisions"]
                record["details"][w.rate_key] = {"workload": w.describe(), "precisions": entries,
                                                 "same_run_as": rated_as[w.signature]}
            else:
                entries = measure_rates(w, device, name, mode, clock)
                record["details"][w.rate_key] = {"workload": w.describe(), "precisions": entries}
                rated_as[w.signature] = w.rate_key
            record["workloads"][w.rate_key] = rated(entries)
            save()
        record["rates"][chapter] = record["workloads"][heaviest(list(by_model.values())).rate_key]
        save()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="the CPU check of the test suite: smoke shapes, a minute")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the record (default benchmarks/records/; tiny mode: a temporary folder)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget in seconds (default 420)")
    parser.add_argument("--device", default=None, help="default: cuda, or cpu in tiny mode")
    parser.add_argument("--commit", default=None,
                        help="the checkout's commit, recorded when git cannot tell (a copied tree without .git)")
    parser.add_argument("--chapters", nargs="*", default=None, help="only these chapters (default: all)")
    return parser.parse_args(argv)


class _Terminated(BaseException):
    pass


def _raise_terminated(signum, frame):  # SIGTERM (a timeout) -> unwind, so that the partial record is written
    raise _Terminated(f"signal {signum}")


def no_data_root() -> Path:
    """A data root that does not exist (a fresh name in the temporary folder): nothing can be read from it."""
    path = Path(tempfile.gettempdir()) / f"{NO_DATA}-{os.getpid()}"
    if path.exists():
        raise RuntimeError(f"{path} exists: the check needs a data root with nothing in it")
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    mode = TINY if args.tiny else GPU
    clock = Clock(args.budget_s)
    device = torch.device(args.device or ("cpu" if args.tiny else "cuda"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device is visible; on a CPU run `--tiny` (the test suite's check)", flush=True)
        return 2
    if args.out is not None:
        out = args.out
    elif args.tiny or device.type != "cuda":  # only a GPU's record goes where the planner reads
        out = Path(tempfile.gettempdir()) / "nhtlib-gpu-check"
    else:
        out = plan.records_dir() or Path("benchmarks") / "records"
    unknown = sorted(set(args.chapters or ()) - set(CHAPTERS))
    if unknown:
        print(f"gpu_check: unknown chapter(s) {', '.join(unknown)}; the chapters are {', '.join(CHAPTERS)}", flush=True)
        return 2
    chapters = [c for c in CHAPTERS if not args.chapters or c in args.chapters]
    threads = torch.get_num_threads()
    if args.tiny:  # one thread: on a shared, busy CPU two spinning threads are many times slower than one
        torch.set_num_threads(1)
    name = device_name(device)
    key = device_key(name, args.tiny)
    now = datetime.now(timezone.utc)
    path = record_path(out, key, now.strftime("%Y%m%dT%H%M%SZ"))
    data_root, previous_root = no_data_root(), os.environ.get("NHT_DATA_ROOT")
    os.environ["NHT_DATA_ROOT"] = str(data_root)  # the chapters' configs name it; nothing is there to read
    record: dict = {
        "script": "benchmarks/gpu_check.py", "device": name, "device_key": key, "mode": mode.name,
        "scale": mode.scale, "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": sys.version.split()[0], "source_hash": run_source_hash(),
        "git_commit": git_commit() if git_commit() != "unknown" or not args.commit else f"{args.commit} (given)",
        "date": now.isoformat(timespec="seconds"), "budget_s": args.budget_s, "precisions": list(PRECISIONS),
        "data_root": str(data_root), "data": "synthetic (nhtlib.data.synthetic); the data root does not exist",
        "flops": "matmul and convolution FLOPs of forward + backward (torch.utils.flop_counter, "
                 "nhtlib.engine.memory.StepCost)",
        "planning_failed": {}, "real_loop": {}, "workloads": {}, "rates": {}, "details": {}, "nsdl": {},
        "total_wall_s": None, "complete": False, "path": str(path)}

    def save() -> None:
        record["total_wall_s"] = clock.elapsed
        write(record, path)

    handler_set = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if handler_set else None
    clock.say(f"{name} → {path} (budget {args.budget_s:.0f} s, {mode.name} mode, scale {mode.scale!r}, "
              f"data root {data_root}, absent)")
    try:
        check_workloads(chapters, device, name, mode, clock, record, save)
        try:
            record["nsdl"] = nsdl_part(record["rates"], device, mode, clock,
                                       save=lambda part: (record.update(nsdl=part), save()))
        except Exception as err:  # noqa: BLE001
            record["nsdl"] = {"skipped": f"error: {short_error(err)}"}
            traceback.print_exc(limit=5)
    except (_Terminated, KeyboardInterrupt) as err:
        record["interrupted"] = f"stopped at {clock.elapsed:.0f} s: {err!r}"
        clock.say(record["interrupted"])
    finally:
        if handler_set:
            signal.signal(signal.SIGTERM, previous)
        torch.set_num_threads(threads)
        if previous_root is None:
            os.environ.pop("NHT_DATA_ROOT", None)
        else:
            os.environ["NHT_DATA_ROOT"] = previous_root
        record["incomplete"] = incomplete_parts(record)
        record["complete"] = not record["incomplete"]
        save()
    print(summary(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
