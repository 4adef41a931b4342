"""The compute planner: what a chapter will cost, and whether it fits, before anything is trained.

For every sweep of a chapter (``nhtlib.chapters.<chapter>.sweeps``) the planner groups the members as the run will
(members that differ only in seed, λ and η train together, `RunConfig.batch_signature`), and for each group:

* **FLOPs** — one real training step of the real batched model (two members) at the real input shape, counted by
  `torch.utils.flop_counter.FlopCounterMode` on the CPU at batches of 2 and 4 examples (a part per step and a part
  per example), then scaled by the batch size, the members and the steps (matmuls and convolutions: the convention
  of the FLOP counter); evaluation is a forward pass over every evaluated example at every log step;
* **memory** — the peak of one batched group: per member the parameters with their gradient, initial copy and
  optimiser state, the activations a training step saves for its backward pass (measured with
  `torch.autograd.graph.saved_tensors_hooks`), the largest activation of an evaluation batch, plus the data resident
  on the device. The number of members per batched call and the evaluation batch size are chosen so that the group
  fits the device (`fit`); a group of which one member does not fit is refused (`MemoryPlanError`), before training;
* **time** — FLOPs ÷ an achieved rate plus a kernel-launch term: the rate `benchmarks/gpu_check.py` measured on the
  device for the chapter's heaviest group when a record exists under ``benchmarks/records/``, otherwise the
  device's dense peak × a stated efficiency, labelled as an assumption. On this machine (``device="cpu"``) small
  groups are timed directly instead (`time_locally`): training steps of the real batched model and optimiser
  (`synthetic_step`), one evaluation chunk and the extra metrics, on random inputs of the real shapes (nothing is
  stored);
* **data** — the data sets the group reads, whether they are present and complete (`nhtlib.data.inventory`).

A plan trains nothing and takes seconds.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import torch
from torch import nn

from nhtlib.config import ConfigError
from nhtlib.data import Dataset, Split
from nhtlib.data.layout import DataLayout, layout
from nhtlib.paths import repo_root
from nhtlib.engine.memory import (CPU_RESERVE_BYTES, GB, GPU_RESERVE_BYTES, StepCost, available_ram, evaluated_examples,
                                  fit, measure_step, random_inputs, step_batch)
from nhtlib.engine.step import make_optimizer, training_step
from nhtlib.engine.sweep import RunConfig, Sweep, batch_groups, data_identity

TIMED_EVAL_EXAMPLES = 512  # examples per member of the timed evaluation chunk (the cost per example is flat)
LOCAL_TIMING_LIMIT_S = 3.0  # a group is timed here only when a few of its steps are estimated to take less


# --------------------------------------------------------------------------------------------------- devices

@dataclass(frozen=True)
class Device:
    """A device to plan for. peak_flops: dense FLOP/s per precision (from the vendor's data sheet, no sparsity);
    efficiency: the share of the peak assumed to be achieved when no measured record exists; launch_s: seconds per
    kernel launch (tiny models are launch-bound on a GPU); memory_bytes: what a run may use."""

    key: str  # the name gpu_check records it under ("h200", "cpu")
    name: str
    kind: str  # "cuda" or "cpu"
    memory_bytes: float
    peak_flops: dict[str, float]
    efficiency: float
    launch_s: float

    @property
    def reserve_bytes(self) -> float:
        """Memory the plan leaves to what it does not count (the process; a CUDA context)."""
        return CPU_RESERVE_BYTES if self.kind == "cpu" else GPU_RESERVE_BYTES


# NVIDIA H200 SXM data sheet: 67 TFLOP/s fp32, 989 TFLOP/s tf32 and 1,979 TFLOP/s bf16 *with sparsity* (half dense)
H200 = Device("h200", "NVIDIA H200 (141 GB)", "cuda", 141 * GB, {"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12},
              efficiency=0.25, launch_s=6e-6)
DEVICES = {"h200": H200}


def matmul_rate(dtype: torch.dtype = torch.float32, n: int = 1024, repeats: int = 5) -> float:
    """This machine's achieved FLOP/s of an n × n × n matmul (best of `repeats`)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def local_cpu() -> Device:
    """This machine as a device: its free memory and its measured fp32 / bf16 matmul rates (efficiency 1: the CPU's
    groups are timed directly when small, and the matmul rate is what the large ones get at best)."""
    fp32 = matmul_rate(torch.float32)
    return Device("cpu", f"this CPU ({os.cpu_count()} threads)", "cpu", available_ram(),
                  {"fp32": fp32, "tf32": fp32, "bf16": matmul_rate(torch.bfloat16)}, efficiency=1.0, launch_s=0.0)


def device_spec(name: str) -> Device:
    """'cpu' (this machine), or a named device of `DEVICES` (e.g. 'h200')."""
    if name == "cpu":
        return local_cpu()
    if name not in DEVICES:
        raise ConfigError(f"device={name!r} is unknown to the planner; choose 'cpu' or one of {', '.join(DEVICES)}")
    return DEVICES[name]


def records_dir() -> Path | None:
    root = repo_root()
    return None if root is None else root / "benchmarks" / "records"


def measured_rates(device: str, folder: Path | None = None) -> dict[str, dict[str, float]]:
    """{workload: {precision: FLOP/s}} from the newest gpu_check record of `device` (empty when none exists)."""
    folder = folder or records_dir()
    if folder is None or not folder.is_dir():
        return {}
    records = sorted(folder.glob(f"gpu_check-{device}-[0-9]*.json"))  # the key exactly: "cpu" is not "cpu-tiny"
    if not records:
        return {}
    return json.loads(records[-1].read_text()).get("rates", {})


# ------------------------------------------------------------------------------------------------- step cost


# ------------------------------------------------------------------------------------------------------ groups

@dataclass(frozen=True)
class GroupPlan:
    """One batched group of a sweep: its members, cost, memory, chunking and estimated time (all members)."""

    sweep: str
    model: str
    members: int
    members_per_call: int
    steps: int
    logs: int
    batch: int
    precision: str
    cost: StepCost
    train_flops: float  # all members, all steps
    eval_flops: float  # all members, all log steps (splits and the extra metrics' probe)
    peak_bytes: float  # one batched call of members_per_call members
    eval_batch_size: int
    seconds: float
    time_source: str  # "timed here", "measured rate (gpu_check record)" or "assumed: peak × efficiency"
    data: str = ""

    @property
    def calls(self) -> int:
        return math.ceil(self.members / self.members_per_call)


def _fake_dataset(shape: DataLayout, k: int, n_train: int, n_eval: int) -> Dataset:
    """Random data of the layout's shapes: a training split of n_train (per member when the seeds' data differ)
    and one evaluation split of n_eval."""
    g = torch.Generator().manual_seed(0)
    lead = (k,) if shape.per_member_train else ()
    x = random_inputs(shape, n_train, k if shape.per_member_train else 1, g)
    x = x if shape.per_member_train else x[0]
    y = torch.randint(0, shape.n_classes, (*lead, n_train), generator=g)
    splits = {"train": Split(x, y, per_member=shape.per_member_train)}
    if n_eval:
        splits["test"] = Split(random_inputs(shape, n_eval, 1, g)[0], torch.randint(0, shape.n_classes, (n_eval,),
                                                                                   generator=g))
    return Dataset(splits, shape.n_classes, {"chance": 1.0 / shape.n_classes})


def _timed(fn, min_s: float = 0.3, max_repeats: int = 10) -> float:
    """Seconds per call of fn() after one warm-up call: repeated until min_s have passed (at most max_repeats)."""
    fn()
    t0, n = time.perf_counter(), 0
    while n < max_repeats and (n == 0 or time.perf_counter() - t0 < min_s):
        fn()
        n += 1
    return (time.perf_counter() - t0) / n


def synthetic_step(configs: Sequence[RunConfig], shape: DataLayout, device: str | torch.device = "cpu"
                   ) -> tuple[Callable[[str], None], nn.Module]:
    """(step, model): `step(precision)` takes one training step of the batched members through the loop's own
    `nhtlib.engine.step.training_step` — the real optimiser with each member's η and λ — on fixed random inputs and
    labels of the real shapes (no sampler, no logging). Hold
    `nhtlib.engine.precision.tf32_flags` around the calls for TF32. For timing: the planner here, gpu_check on a GPU."""
    first, k = configs[0], len(configs)
    torch.manual_seed(0)
    model = first.model.build(shape.input_shape, shape.n_classes, [c.seed for c in configs]).to(device)
    model.train()
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64, device=device)  # noqa: E731
    optimizer = make_optimizer(model, first.train, as_tensor([c.train.lr for c in configs]),
                               as_tensor([c.train.weight_decay for c in configs]))
    batch = step_batch(first.train, shape)
    g = torch.Generator().manual_seed(0)
    x = random_inputs(shape, batch, k, g).to(device)
    y = torch.randint(0, shape.n_classes, (k, batch), generator=g).to(device)
    device_type = torch.device(device).type

    def step(precision: str = "fp32") -> None:
        training_step(model, optimizer, x, y, precision=precision, device_type=device_type)

    return step, model


def time_locally(configs: Sequence[RunConfig], shape: DataLayout, sweep: Sweep) -> tuple[float, float]:
    """(seconds per training step, seconds per log step) of the batched members on this machine at their
    precision, timed on random inputs of the real shapes: training steps (`synthetic_step`), one evaluation chunk
    (scaled to every example a log step evaluates), and one call of the sweep's extra metrics. Nothing is stored."""
    from nhtlib.engine.precision import tf32_flags
    from nhtlib.engine.train import evaluate

    cfg, k = configs[0].train, len(configs)
    step, model = synthetic_step(configs, shape)
    with tf32_flags(cfg.precision == "tf32"):
        per_step = _timed(lambda: step(cfg.precision))
        chunk = min(cfg.eval_batch_size, evaluated_examples(cfg, shape, 0), TIMED_EVAL_EXAMPLES)
        model.eval()
        per_chunk = _timed(lambda: evaluate(model, _fake_dataset(shape, k, chunk, 0).splits["train"], k, chunk,
                                            cfg.precision), min_s=0.0, max_repeats=1)
    per_log = per_chunk * evaluated_examples(cfg, shape, 0) / chunk
    if sweep.extra_metrics is not None:
        data = _fake_dataset(shape, k, max(1, min(sweep.probe_examples, shape.n_train)), 0)
        per_log += _timed(lambda: sweep.extra_metrics(model, data), min_s=0.0, max_repeats=1)
    return per_step, per_log


def plan_group(sweep: Sweep, configs: Sequence[RunConfig], device: Device, *, max_members: int = 256,
               rates: dict[str, dict[str, float]] | None = None, workload: str = "",
               time_here: bool = True) -> GroupPlan:
    """The `GroupPlan` of members that train together (equal batch signatures)."""
    first = configs[0]
    cfg, shape = first.train, layout(first.task)
    cost = measure_step(first, shape)
    precision = cfg.precision
    batch = step_batch(cfg, shape)
    logs = len(cfg.log_steps())
    k = len(configs)
    train_flops = cost.step_flops(batch) * cfg.steps * k
    eval_flops = cost.forward_pass_flops(evaluated_examples(cfg, shape, sweep.probe_examples), cfg.eval_batch_size) * logs * k
    per_call, eval_batch, peak = fit(cost, cfg, shape, k, device.memory_bytes, max_members=max_members,
                                     reserve=device.reserve_bytes)
    calls = math.ceil(k / per_call)
    rate = (rates or {}).get(workload, {}).get(precision)
    source = "measured rate (gpu_check record)" if rate else f"assumed: peak × {device.efficiency:g}"
    rate = rate or device.peak_flops[precision] * device.efficiency
    seconds = (train_flops + eval_flops) / rate + calls * (cfg.steps + logs) * cost.kernels * device.launch_s
    if device.kind == "cpu" and time_here and 3 * cost.step_flops(batch) * min(k, per_call) / rate < \
            LOCAL_TIMING_LIMIT_S:
        # time one call's members when a few of its steps are cheap; the FLOP estimate otherwise
        per_step, per_log = time_locally(list(configs[:per_call]), shape, sweep)
        seconds = calls * (cfg.steps * per_step + logs * per_log)
        source = "timed here"
    return GroupPlan(sweep.name, type(first.model).__name__.removesuffix("Config"), k, per_call, cfg.steps, logs,
                     batch, precision, cost, train_flops, eval_flops, peak, eval_batch, seconds, source,
                     data_status(first.task))


def groups(configs: Sequence[RunConfig]) -> list[list[RunConfig]]:
    """The members of `configs` in the batched groups the run trains together (`nhtlib.engine.sweep.batch_groups`;
    a config given twice is planned once)."""
    unique = list({c.digest(): c for c in configs}.values())
    return [[unique[i] for i in group] for group in batch_groups(unique)]


def check_tasks(tasks, *, full: bool, why: str = "scale='paper' trains on the full data sets") -> None:
    """The data check every chapter runs before training (and the planner reports): each data set the tasks read
    must be there (`nhtlib.data.inventory.require_present`) and, when `full`, complete (`require_complete`, e.g. at
    paper scale: CIFAR-10's 50,000 training images, CIFAR-100, the full CelebA, the real Waterbirds). Raises
    IncompleteDataError naming what is missing, what was found and where it must go; nothing is read but listings."""
    from nhtlib.data.inventory import require_complete, require_present

    seen: set[tuple[str, str]] = set()
    for task in tasks:
        if data_identity(task) in seen:
            continue
        seen.add(data_identity(task))
        if full:
            require_complete(task, why)
        else:
            require_present(task)


def check_data(sweeps: Sequence[Sweep], *, full: bool, why: str = "scale='paper' trains on the full data sets"
               ) -> None:
    """`check_tasks` on the tasks of every member of `sweeps`."""
    check_tasks([c.task for sweep in sweeps for c in sweep.configs], full=full, why=why)


def data_status(task) -> str:
    """'generated', or the inventory's line for the data the task reads ('present', 'a subset', 'missing' …)."""
    from nhtlib.data.inventory import inventory

    found = inventory(task)
    return "generated" if found is None else found.describe()


@dataclass
class ChapterPlan:
    """The plan of one chapter at one scale on one device: a row per batched group."""

    chapter: str
    scale: str
    device: Device
    groups: list[GroupPlan] = field(default_factory=list)
    planning_s: float = 0.0
    data_check: str = "not run"  # "passes", or why the chapter would refuse to start (`check_data`)

    def table(self) -> pd.DataFrame:
        """One row per group, for people: runs, members per call, FLOPs, peak memory, time, data."""
        rows = []
        for g in self.groups:
            rows.append({"sweep": g.sweep, "model": g.model, "runs": g.members,
                         "calls × members": f"{g.calls} × {g.members_per_call}", "steps": g.steps,
                         "batch": g.batch, "precision": g.precision,
                         "MFLOP / example": round(g.cost.train_flops / 1e6, 3),
                         "train FLOPs": f"{g.train_flops:.2e}", "eval FLOPs": f"{g.eval_flops:.2e}",
                         "peak GB": round(g.peak_bytes / GB, 2), "eval batch": g.eval_batch_size,
                         "minutes": round(g.seconds / 60, 1), "time from": g.time_source, "data": g.data})
        return pd.DataFrame(rows)

    @property
    def flops(self) -> float:
        return sum(g.train_flops + g.eval_flops for g in self.groups)

    @property
    def seconds(self) -> float:
        return sum(g.seconds for g in self.groups)

    @property
    def peak_bytes(self) -> float:
        return max((g.peak_bytes for g in self.groups), default=0.0)

    def summary(self) -> str:
        return (f"{self.chapter} at scale={self.scale!r} on {self.device.name}: {sum(g.members for g in self.groups)} "
                f"runs in {sum(g.calls for g in self.groups)} batched calls, {self.flops:.2e} FLOPs, peak "
                f"{self.peak_bytes / GB:.2f} GB, ≈ {self.seconds / 60:.1f} min (planned in {self.planning_s:.1f} s)")


def plan_sweeps(chapter: str, scale: str, sweeps: Sequence[Sweep], device: Device, *,
                time_here: bool = True) -> ChapterPlan:
    """The `ChapterPlan` of a chapter's sweeps (members already cached are planned too: a plan is of the whole
    chapter), with the data check the chapter runs before training (full data sets at paper scale)."""
    t0 = time.perf_counter()
    rates = measured_rates(device.key)
    out = ChapterPlan(chapter, scale, device)
    planned: set[str] = set()  # a member two sweeps share (e.g. chapter 3's ρ = 0.95, λ = 0.1) is trained once
    for sweep in sweeps:
        fresh = [c for c in sweep.configs if c.digest() not in planned]
        planned.update(c.digest() for c in fresh)
        for members in groups(fresh):
            out.groups.append(plan_group(sweep, members, device, rates=rates, workload=chapter,
                                         time_here=time_here))
    try:
        check_data(sweeps, full=scale == "paper")
        out.data_check = "passes"
    except FileNotFoundError as err:
        out.data_check = f"the run would refuse to start — {err}"
    out.planning_s = time.perf_counter() - t0
    return out
