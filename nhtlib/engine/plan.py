"""The compute planner: what a chapter will cost, and whether it fits, before anything is trained.

For every sweep of a chapter (``nhtlib.chapters.<chapter>.sweeps``) the planner groups the members as the run will
(members that differ only in seed, λ and η train together, `RunConfig.batch_signature`), and for each group:

* **sizes** — at paper scale the full data sets' (`nhtlib.data.layout.layout(task, full=True)`: the paper trains
  on complete data only), whatever is on this machine; at other scales the files'. The data check says separately
  what is missing;
* **FLOPs** — one real training step of the real batched model (two members) at the real input shape, counted by
  `torch.utils.flop_counter.FlopCounterMode` on the CPU at batches of 2 and 4 examples (a part per step and a part
  per example), a batched grouped convolution counted as its members' single convolutions
  (`nhtlib.engine.memory.count_flops`: a batched step of K members costs K single steps), then scaled by the batch
  size, the members and the steps (matmuls and convolutions: the convention of the FLOP counter); evaluation is a
  forward pass over every evaluated example at every log step;
* **memory** — the peak of one batched group: per member the parameters with their gradient, initial copy and
  optimiser state, the activations a training step saves for its backward pass (measured with
  `torch.autograd.graph.saved_tensors_hooks`), an evaluation batch (decoded inputs and largest activation), the
  float64 parameter copies of the norms, plus the data resident on the device and, on CUDA for convolutional
  models, an allowance for cuDNN's workspace (`nhtlib.engine.memory`). The number of members per batched call and
  the evaluation batch size are chosen so that the group fits the device (`fit`); a group of which one member does
  not fit is refused (`MemoryPlanError`), before training;
* **time** — per batched group: its FLOPs ÷ the rate `benchmarks/gpu_check.py` measured for that group's
  chapter, model and precision (`rate_record`: only the newest *complete* record of the device made by the
  *current* code is trusted); otherwise an assumption, said so in the table: each training and log step takes the
  longer of its FLOPs ÷ (the device's dense peak × the assumed efficiency of the model's family, `Device.efficiency`)
  and its kernel launches × the launch time (`step_launches`: counted on a real training step with the optimiser,
  and a real evaluation chunk). On this machine (``device="cpu"``) small groups are timed directly instead
  (`time_locally`): training steps of the real batched model and optimiser (`synthetic_step`), one evaluation chunk
  and the extra metrics, on random inputs of the real shapes (nothing is stored);
* **data** — the data sets the group reads, whether they are present and complete (`nhtlib.data.inventory`).

A plan trains nothing and takes seconds.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterator, Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from nhtlib.config import ConfigError
from nhtlib.data import Dataset, Split
from nhtlib.data.layout import DataLayout, layout
from nhtlib.paths import repo_root
from nhtlib.engine.memory import (CPU_RESERVE_BYTES, GB, GPU_RESERVE_BYTES, PROBE_BATCHES, PROBE_MEMBERS, StepCost,
                                  available_ram, evaluated_examples, fit, measure_step, random_inputs, step_batch,
                                  workspace_bytes)
from nhtlib.engine.optim import StepLayout
from nhtlib.engine.step import make_optimizer, training_step
from nhtlib.engine.sweep import RunConfig, Sweep, batch_groups, data_identity, metrics_identity

TIMED_EVAL_EXAMPLES = 512  # examples per member of the timed evaluation chunk (the cost per example is flat)
LOCAL_TIMING_LIMIT_S = 3.0  # a group is timed here only when a few of its steps are estimated to take less


# --------------------------------------------------------------------------------------------------- devices

FAMILIES = ("conv net", "Transformer", "MLP")  # what an assumed efficiency is stated for (`model_family`)


@dataclass(frozen=True)
class Device:
    """A device to plan for. peak_flops: dense FLOP/s per precision (from the vendor's data sheet, no sparsity);
    efficiency: per model family (`FAMILIES`), the share of the peak assumed to be achieved when no measured record
    exists; launch_s: seconds per kernel launch (tiny models are launch-bound on a GPU; 0: not counted);
    memory_bytes: what a run may use."""

    key: str  # the name gpu_check records it under ("h200", "cpu")
    name: str
    kind: str  # "cuda" or "cpu"
    memory_bytes: float
    peak_flops: dict[str, float]
    efficiency: Mapping[str, float]
    launch_s: float

    def __post_init__(self) -> None:
        if set(self.efficiency) != set(FAMILIES):
            raise ConfigError(f"Device.efficiency needs one share per family {FAMILIES}; got {tuple(self.efficiency)}")

    @property
    def reserve_bytes(self) -> float:
        """Memory the plan leaves to what it does not count (the process; a CUDA context)."""
        return CPU_RESERVE_BYTES if self.kind == "cpu" else GPU_RESERVE_BYTES


# Assumed shares of an H200's dense peak at a group's precision, per model family: assumptions, not measurements,
# until benchmarks/gpu_check.py measures each group's rate on the device (a record then replaces them)
H200_EFFICIENCY = MappingProxyType({
    # eager NCHW convolutions (no channels-last, no compile) on 32-224 px images, the members batched as grouped
    # convolutions or vmap: a reviewer's estimate for this code on an H200 is 8-12 % of bf16 peak
    "conv net": 0.10,
    # NSDL's 1-layer Transformer (d = 128, two tokens): batched fp32 matmuls too small to fill the device, with
    # softmax, GELU and LayerNorm kernels between them
    "Transformer": 0.15,
    # MLPs: one batched fp32 matmul per layer; the small ones are launch-bound (their launch term is the longer)
    "MLP": 0.25,
})
# NVIDIA H200 SXM data sheet: 67 TFLOP/s fp32, 989 TFLOP/s tf32 and 1,979 TFLOP/s bf16 *with sparsity* (half dense).
# launch_s: ~6 µs per kernel, the order of a CUDA launch from eager PyTorch (an assumption, like the efficiencies)
H200 = Device("h200", "NVIDIA H200 (141 GB)", "cuda", 141 * GB, {"fp32": 67e12, "tf32": 494.5e12, "bf16": 989.5e12},
              efficiency=H200_EFFICIENCY, launch_s=6e-6)
DEVICES = {"h200": H200}


def model_family(model: str, cost: StepCost) -> str:
    """The family an assumed efficiency is stated for (`FAMILIES`): "conv net" when the step runs convolutions,
    "Transformer" for the modular Transformer, else "MLP"."""
    if cost.convolutional:
        return "conv net"
    return "Transformer" if "Transformer" in model else "MLP"


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


@functools.lru_cache(maxsize=None)
def _cpu_rates() -> tuple[float, float]:
    """(fp32, bf16) matmul FLOP/s of this machine, measured once per process. bf16 at n = 512: on a CPU without
    bf16 matrix units it may run at ~1 % of fp32's rate (here: 2 cores, AVX-512), and 1024³ would then take seconds
    per repeat for the same rate."""
    return matmul_rate(torch.float32), matmul_rate(torch.bfloat16, n=512, repeats=3)


def local_cpu() -> Device:
    """This machine as a device: its free memory and its measured fp32 / bf16 matmul rates (efficiency 1: the CPU's
    groups are timed directly when small, and the matmul rate is what the large ones get at best)."""
    fp32, bf16 = _cpu_rates()
    return Device("cpu", f"this CPU ({os.cpu_count()} threads)", "cpu", available_ram(),
                  {"fp32": fp32, "tf32": fp32, "bf16": bf16},
                  efficiency=MappingProxyType({family: 1.0 for family in FAMILIES}),
                  launch_s=0.0)


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


def workload_key(chapter: str, model: str) -> str:
    """How a gpu_check record names a batched group's workload: "<chapter>:<Model>" (`GroupPlan.model`)."""
    return f"{chapter}:{model}"


@dataclass(frozen=True)
class RateRecord:
    """The measured rates the planner may use for a device, and what they are.

    workloads: {"<chapter>:<Model>": {precision: FLOP/s}} (`workload_key`), empty when no record is trusted;
    source: the trusted record's file name, or why none is ("no gpu_check record", "record stale: code changed
    since", "record incomplete")."""

    workloads: dict[str, dict[str, float]]
    source: str

    @property
    def trusted(self) -> bool:
        return bool(self.workloads)


def rate_record(device: str, folder: Path | None = None, source_hash: str | None = None) -> RateRecord:
    """The newest gpu_check record of `device` that is complete (``"complete": true``) and was made by the code that
    runs now (``"source_hash"`` = `nhtlib.engine.source.run_source_hash()`, or `source_hash`): a rate measured on
    other code, or by a stopped check, is not trusted, and the reason is said instead."""
    folder = folder or records_dir()
    records = [] if folder is None or not folder.is_dir() else \
        sorted(folder.glob(f"gpu_check-{device}-[0-9]*.json"))  # the key exactly: "cpu" is not "cpu-tiny"
    if not records:
        return RateRecord({}, "no gpu_check record")
    if source_hash is None:
        from nhtlib.engine.source import run_source_hash

        source_hash = run_source_hash()
    why = ""
    for path in reversed(records):  # newest first (the names sort by their UTC time stamp)
        record = json.loads(path.read_text())
        if record.get("source_hash") != source_hash:
            why = why or "record stale: code changed since"
        elif record.get("complete") is not True:
            why = why or "record incomplete"
        elif record.get("workloads"):
            return RateRecord(record["workloads"], path.name)
        else:
            why = why or "record holds no workload rates"
    return RateRecord({}, why)


def measured_rates(device: str, folder: Path | None = None) -> dict[str, dict[str, float]]:
    """{"<chapter>:<Model>": {precision: FLOP/s}} of the trusted gpu_check record of `device` (`rate_record`;
    empty when none is trusted)."""
    return rate_record(device, folder).workloads


# ----------------------------------------------------------------------------------------------- kernel launches

# aten operations that launch no kernel on a GPU: allocation, views and metadata (an operation that does launch one
# may call these; one that only calls these launches its own kernel)
NO_KERNEL_OPS = frozenset("aten::" + name for name in """
    empty empty_strided empty_like new_empty new_empty_strided view _unsafe_view _reshape_alias reshape as_strided
    t transpose permute expand expand_as unsqueeze squeeze select slice alias detach lift_fresh resolve_conj
    resolve_neg unbind split split_with_sizes chunk narrow movedim moveaxis view_as flatten unflatten contiguous to
    result_type _local_scalar_dense item set_ resize_ is_nonzero size stride dim numel""".split())


def _launches(event) -> int:
    """Kernels one profiled operation launches on a GPU: the kernels of the operations it calls when any does, else
    its own one (none for `NO_KERNEL_OPS` and for the autograd engine's own events). A ``_foreach_*`` operation
    counts once: on a GPU it is one fused multi-tensor kernel per operation (a few for very large parameter sets);
    on the CPU it loops over its tensors, which the profiler would show as one operation each."""
    name = event.name
    if name.startswith("aten::_foreach_"):
        return 1
    inner = sum(_launches(child) for child in event.cpu_children)
    if inner:
        return inner
    return int(name.startswith("aten::") and name not in NO_KERNEL_OPS)


@contextlib.contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the C++ side's stderr) for a moment: the profiler's start and stop write log lines
    there (kineto's "profiler_start" / "gpuGetDeviceCount failed" on a host without a GPU)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def count_launches(fn: Callable[[], object]) -> int:
    """GPU kernels `fn()` would launch, counted on the CPU from the aten operations it runs (the autograd profiler,
    public API; `_launches`): an estimate of a CUDA step's launches (a CUDA kernel may differ from the CPU's: e.g.
    cuDNN's convolutions launch one to three)."""
    profiler = torch.autograd.profiler.profile(use_kineto=False)
    with _quiet_native_stderr():
        profiler.__enter__()
    try:
        fn()
    finally:
        with _quiet_native_stderr():
            profiler.__exit__(None, None, None)
    return sum(_launches(event) for event in profiler.function_events if event.cpu_parent is None)


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
    time_source: str  # "timed here", "measured: <record>", "assumed: <family>, <share> of <precision> peak" or
    # "assumed: launch-bound, <kernels> kernels × <µs> per step"
    data: str = ""
    chapter: str = ""
    index: int = 0  # the group's position in its chapter's plan (`plan_sweeps`: stable for the same sweeps)
    configs: tuple[RunConfig, ...] = field(default=(), repr=False, compare=False)  # its members
    launches: int = 0  # kernels one training step of a call launches (`step_launches`; 0 where not counted)

    @property
    def calls(self) -> int:
        return math.ceil(self.members / self.members_per_call)

    @property
    def workload(self) -> str:
        """Its name in a gpu_check record (`workload_key`)."""
        return workload_key(self.chapter, self.model)


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


def seconds_per_call(fn, min_s: float = 0.3, max_repeats: int = 10) -> float:
    """Seconds per call of fn() after one warm-up call: repeated until min_s have passed (at most max_repeats)."""
    fn()
    t0, n = time.perf_counter(), 0
    while n < max_repeats and (n == 0 or time.perf_counter() - t0 < min_s):
        fn()
        n += 1
    return (time.perf_counter() - t0) / n


def synthetic_step(configs: Sequence[RunConfig], shape: DataLayout, device: str | torch.device = "cpu",
                   batch: int | None = None, layout: StepLayout | None = None
                   ) -> tuple[Callable[[str], None], nn.Module]:
    """(step, model): `step(precision)` takes one training step of the batched members through the loop's own
    `nhtlib.engine.step.training_step` — the real optimiser with each member's η and λ — on fixed random inputs and
    labels of the real shapes (no sampler, no logging), `batch` examples per member (default: the run's); `layout`: how
    the optimiser walks the parameters (default: the device's own, `nhtlib.engine.optim.StepLayout.for_device`). Hold
    `nhtlib.engine.precision.tf32_flags` around the calls for TF32. For timing: the planner here, gpu_check on a GPU."""
    first, k = configs[0], len(configs)
    torch.manual_seed(0)
    model = first.model.build(shape.input_shape, shape.n_classes, [c.seed for c in configs]).to(device)
    model.train()
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64, device=device)  # noqa: E731
    optimizer = make_optimizer(model, first.train, as_tensor([c.train.lr for c in configs]),
                               as_tensor([c.train.weight_decay for c in configs]), layout=layout)
    batch = batch or step_batch(first.train, shape)
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
        per_step = seconds_per_call(lambda: step(cfg.precision))
        chunk = min(cfg.eval_batch_size, evaluated_examples(cfg, shape, 0), TIMED_EVAL_EXAMPLES)
        model.eval()
        per_chunk = seconds_per_call(lambda: evaluate(model, _fake_dataset(shape, k, chunk, 0).splits["train"], k, chunk,
                                            cfg.precision), min_s=0.0, max_repeats=1)
    per_log = per_chunk * evaluated_examples(cfg, shape, 0) / chunk
    if sweep.extra_metrics is not None:
        data = _fake_dataset(shape, k, max(1, min(sweep.probe_examples, shape.n_train)), 0)
        per_log += seconds_per_call(lambda: sweep.extra_metrics(model, data), min_s=0.0, max_repeats=1)
    return per_step, per_log


LAUNCH_IMAGE_PX = 32  # images are cut to at most this size to count launches: the count does not depend on it


_LAUNCHES: dict[tuple, tuple[int, int]] = {}  # (model, layout, members, ...) -> step_launches' answer
_COSTS: dict[tuple, StepCost] = {}  # (model, layout) -> measure_step's answer (it does not depend on the seed)


def step_cost(config: RunConfig, shape: DataLayout) -> StepCost:
    """`nhtlib.engine.memory.measure_step`, memoised per model and layout: groups of one architecture are measured
    once per plan (e.g. chapter 3's four SimpleCNN groups)."""
    key = (config.model, shape)
    if key not in _COSTS:
        _COSTS[key] = measure_step(config, shape)
    return _COSTS[key]


def step_launches(configs: Sequence[RunConfig], shape: DataLayout, device_type: str = "cuda") -> tuple[int, int]:
    """(kernels of one training step, kernels of one evaluation chunk) of a batched call of these members on a
    `device_type` device, counted (`count_launches`) on the CPU on a real step of up to PROBE_MEMBERS of them — the
    loop's `training_step` with the real optimiser built as on that device (`synthetic_step`), at their precision —
    and a real evaluation chunk (`train.evaluate`), at a small batch and images of at most LAUNCH_IMAGE_PX: the count
    grows neither with the batch, nor with the image size, nor with the members of a batched call. The extra
    metrics, the decoding of uint8 images and the schedule's refill of the learning-rate factors are not counted,
    and the optimiser's chunks are those of PROBE_MEMBERS members. Memoised per model, layout and optimiser."""
    from nhtlib.engine.precision import tf32_flags
    from nhtlib.engine.train import evaluate

    first, k = configs[0], min(len(configs), PROBE_MEMBERS)
    if len(shape.input_shape) == 3:  # images (C, H, W)
        c, h, w = shape.input_shape
        shape = replace(shape, input_shape=(c, min(h, LAUNCH_IMAGE_PX), min(w, LAUNCH_IMAGE_PX)))
    train = first.train  # what changes the kernels a step launches (not η, λ nor the steps)
    key = (first.model, shape, k, device_type, train.optimizer, train.momentum != 0, train.decay, train.precision)
    if key not in _LAUNCHES:
        precision, batch = first.train.precision, min(PROBE_BATCHES[0], step_batch(first.train, shape))
        # the optimiser walks the parameters as it does on `device_type` (on CUDA whole tensors in a few chunks, on
        # the CPU cache-sized blocks), so that a CUDA step's launches are counted on the CPU
        step, model = synthetic_step(list(configs[:k]), shape, batch=batch,
                                     layout=StepLayout.for_device(torch.device(device_type)))
        with tf32_flags(precision == "tf32"):
            step(precision)  # the optimiser's first step creates its state: count a later one
            train = count_launches(lambda: step(precision))
            model.eval()
            split = _fake_dataset(shape, k, batch, 0).splits["train"]
            chunk = count_launches(lambda: evaluate(model, split, k, batch, precision))
        _LAUNCHES[key] = train, chunk
    return _LAUNCHES[key]


def plan_group(sweep: Sweep, configs: Sequence[RunConfig], device: Device, *, max_members: int = 256,
               record: RateRecord | None = None, chapter: str = "", index: int = 0, full: bool = False,
               time_here: bool = True) -> GroupPlan:
    """The `GroupPlan` of members that train together (equal batch signatures). record: the measured rates
    (`rate_record`; default: none); chapter: the chapter whose rates apply (`workload_key`); index: the group's
    position in the chapter's plan; full: size the data at the full data sets' (paper scale)."""
    first = configs[0]
    cfg, shape = first.train, layout(first.task, full=full)
    cost = step_cost(first, shape)
    model = type(first.model).__name__.removesuffix("Config")
    precision = cfg.precision
    batch = step_batch(cfg, shape)
    logs = len(cfg.log_steps())
    k = len(configs)
    evaluated = evaluated_examples(cfg, shape, sweep.probe_examples)
    step_flops, log_flops = cost.step_flops(batch), cost.forward_pass_flops(evaluated, cfg.eval_batch_size)
    train_flops, eval_flops = step_flops * cfg.steps * k, log_flops * logs * k
    per_call, eval_batch, peak = fit(cost, cfg, shape, k, device.memory_bytes, max_members=max_members,
                                     reserve=device.reserve_bytes, workspace=workspace_bytes(cost, device.kind))
    calls = math.ceil(k / per_call)
    record = record or RateRecord({}, "no gpu_check record")
    rate = record.workloads.get(workload_key(chapter, model), {}).get(precision)
    launches = 0
    if rate:  # measured on the device: launches, overlap and all are in the rate
        seconds, source = (train_flops + eval_flops) / rate, f"measured: {record.source}"
    else:
        family = model_family(model, cost)
        rate = device.peak_flops[precision] * device.efficiency[family]
        launches, chunk_launches = step_launches(configs, shape, device.kind) if device.launch_s else (0, 0)
        launch_s = launches * device.launch_s
        log_launch_s = math.ceil(evaluated / eval_batch) * chunk_launches * device.launch_s
        # the host queues kernels while the device computes: a step takes the longer of its FLOPs and its launches
        sizes = [per_call] * (k // per_call) + ([k % per_call] if k % per_call else [])
        seconds = sum(cfg.steps * max(m * step_flops / rate, launch_s) + logs * max(m * log_flops / rate, log_launch_s)
                      for m in sizes)
        why = f" ({record.source})" if record.source and not record.trusted else ""
        if device.kind == "cpu":
            source = f"estimated: FLOPs ÷ this CPU's {precision} matmul rate"
        elif launch_s > per_call * step_flops / rate:
            source = f"assumed: launch-bound, {launches:,} kernels × {device.launch_s * 1e6:g} µs per step{why}"
        else:
            source = f"assumed: {family}, {device.efficiency[family]:.0%} of {precision} peak{why}"
    if device.kind == "cpu" and time_here and 3 * step_flops * min(k, per_call) / rate < LOCAL_TIMING_LIMIT_S:
        # time one call's members when a few of its steps are cheap; the FLOP estimate otherwise
        per_step, per_log = time_locally(list(configs[:per_call]), shape, sweep)
        seconds = calls * (cfg.steps * per_step + logs * per_log)
        source = "timed here"
    return GroupPlan(sweep.name, model, k, per_call, cfg.steps, logs, batch, precision, cost, train_flops, eval_flops,
                     peak, eval_batch, seconds, source, data_status(first.task), chapter=chapter, index=index,
                     configs=tuple(configs), launches=launches)


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
    record = rate_record(device.key) if device.kind == "cuda" else RateRecord({}, "")  # the CPU: timed here
    out = ChapterPlan(chapter, scale, device)
    # a member two sweeps share is trained once: the same config logging the same metrics (the run's cache key less
    # the code and data, which all of a chapter's sweeps share); chapter 3's ρ = 0.95 sweep repeats λ sweep configs
    # but logs no D_LR, so it is trained (and planned) again
    planned: set[tuple[str, str | None]] = set()
    for sweep in sweeps:
        metrics = metrics_identity(sweep.extra_metrics, sweep.extra_metrics_key)
        fresh = [c for c in sweep.configs if (c.digest(), metrics) not in planned]
        planned.update((c.digest(), metrics) for c in fresh)
        for members in groups(fresh):
            out.groups.append(plan_group(sweep, members, device, record=record, chapter=chapter,
                                         index=len(out.groups), full=scale == "paper", time_here=time_here))
    try:
        check_data(sweeps, full=scale == "paper")
        out.data_check = "passes"
    except FileNotFoundError as err:
        out.data_check = f"the run would refuse to start — {err}"
    out.planning_s = time.perf_counter() - t0
    return out
