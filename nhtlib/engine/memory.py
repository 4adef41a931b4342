"""Memory fitting: how many members of a batched group fit the device per call, measured before training.

A member's cost is measured on one real training step of the real batched model (`measure_step`: FLOPs with
`torch.utils.flop_counter.FlopCounterMode`, the activations a step saves for its backward pass with
`torch.autograd.graph.saved_tensors_hooks`, the largest activation of a forward pass). `fit` chooses the members per
batched call and the evaluation batch size so that the group fits the device's free memory, and refuses
(`MemoryPlanError`) before training when one member does not fit. The sweep (`nhtlib.engine.sweep`) asks
`fit_members` before every batched call; the compute planner (`nhtlib.engine.plan`) builds its plans on the same
measurements. Neither choice changes a result: the members per call and the evaluation batch only split the work.
"""
from __future__ import annotations

import math
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from nhtlib.config import TrainConfig
from nhtlib.data.layout import DataLayout, layout
from nhtlib.engine.step import member_loss

GB = 1e9


PROBE_MEMBERS = 2  # members of the measured step: the batched code path (K = 1 may take a plain module call)


PROBE_BATCHES = (2, 4)  # examples of the two measured steps (BatchNorm needs 2); cost = per step + per example × B


CPU_RESERVE_BYTES = 1.5 * GB  # the Python process, torch and the notebook kernel before any tensor is made


GPU_RESERVE_BYTES = 1.0 * GB  # the CUDA context and the caching allocator's slack


MEMORY_SHARE = 0.85  # plan to use at most this share of what is free: fragmentation, temporaries of the optimiser


OPTIMISER_COPIES = {"adamw": 5, "sgd": 4}  # fp32 copies per parameter: weights, gradient, θ₀, AdamW's m and v / momentum


class MemoryPlanError(MemoryError):
    """A batched group does not fit the device even with one member per call (nothing was trained)."""


def available_ram() -> float:
    """Bytes this process may still allocate: MemAvailable, or the address-space limit when one is set (prlimit)."""
    available = float("inf")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = float(line.split()[1]) * 1024
    except OSError:
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        available = min(available, float(soft))
    return available if math.isfinite(available) else 8 * GB


@dataclass(frozen=True)
class StepCost:
    """What one member's training step costs: a part per example and a part per step (measured at 2 and 4 examples
    on PROBE_MEMBERS members: e.g. the grokking MLP projects its whole embedding table once per step, whatever the
    batch).

    train_flops / forward_flops: FLOPs per example of forward + backward and of the forward pass alone;
    train_fixed / forward_fixed: FLOPs per step (per evaluation chunk) that do not grow with the batch;
    saved_bytes: activation bytes a training step keeps for its backward pass, per example; live_bytes: the largest
    single activation of a forward pass, per example (what an evaluation batch holds at once, ×2 for in and out);
    parameters: one member's parameter count; kernels: operations of one training step (`step_operations`: about
    its kernel launches on a GPU).
    """

    train_flops: float
    forward_flops: float
    saved_bytes: float
    live_bytes: float
    parameters: int
    kernels: int
    train_fixed: float = 0.0
    forward_fixed: float = 0.0

    def step_flops(self, batch: int) -> float:
        """FLOPs of one member's training step at `batch` examples."""
        return self.train_fixed + self.train_flops * batch

    def forward_pass_flops(self, examples: int, chunk: int) -> float:
        """FLOPs of one member's forward passes over `examples` in chunks of `chunk`."""
        return self.forward_fixed * math.ceil(examples / max(1, chunk)) + self.forward_flops * examples


def step_operations(loss: torch.Tensor) -> int:
    """Operations of the training step that produced `loss` (its kernel launches on a GPU, roughly), counted on its
    autograd graph through public API only (``Tensor.grad_fn``, ``Node.next_functions``): each differentiable
    forward operation twice (its forward and its backward, one graph node) and each parameter's gradient
    accumulation once (its AccumulateGrad node, a leaf of the graph). Operations on tensors that need no gradient
    (input reshapes before the first weight) are not counted. Call it before ``loss.backward()``."""
    seen, stack, leaves = set(), [loss.grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        leaves += hasattr(node, "variable")  # AccumulateGrad: the parameter whose gradient it accumulates
        stack.extend(child for child, _ in node.next_functions)
    return 2 * (len(seen) - leaves) + leaves


def random_inputs(shape: DataLayout, n: int, k: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
    """Random inputs of shape ``(k, n, *input_shape)`` of the layout's dtype (int64 inputs: token ids below
    n_classes)."""
    if shape.input_dtype == "int64":
        return torch.randint(0, shape.n_classes, (k, n, *shape.input_shape), generator=generator)
    return torch.randn(k, n, *shape.input_shape, generator=generator)


def _one_step(model: nn.Module, shape: DataLayout, batch: int) -> tuple[float, float, float, float, int]:
    """(step FLOPs, forward FLOPs, saved bytes, largest activation bytes, operations) of one member at `batch`:
    measured on the model's PROBE_MEMBERS members together (a batched implementation, e.g. grouped convolutions,
    may count differently from one member alone), divided by their number (operations, `step_operations`: not
    divided, a batched call launches them once for all its members)."""
    x = random_inputs(shape, batch, PROBE_MEMBERS)
    y = torch.randint(0, shape.n_classes, (PROBE_MEMBERS, batch))
    live = [0]

    def track(module, inputs, output):
        if isinstance(output, torch.Tensor):
            live[0] = max(live[0], output.numel() * output.element_size())

    hooks = [m.register_forward_hook(track) for m in model.modules()]
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as forward:
            model(x)
    finally:
        for h in hooks:
            h.remove()
    saved = [0]

    def pack(t: torch.Tensor):
        saved[0] += t.numel() * t.element_size()
        return t

    with FlopCounterMode(display=False) as step:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = member_loss(model(x), y).sum()
        ops = step_operations(loss)
        loss.backward()
    model.zero_grad(set_to_none=True)
    m = PROBE_MEMBERS
    return step.get_total_flops() / m, forward.get_total_flops() / m, saved[0] / m, live[0] / m, ops


def measure_step(config: Any, shape: DataLayout | None = None) -> StepCost:
    """The `StepCost` of one member of `config`'s model: a training step of PROBE_MEMBERS members on random inputs
    at 2 and at 4 examples (CPU, fp32), divided by the members; per example = the slope, per step = the
    intercept."""
    shape = shape or layout(config.task)
    model = config.model.build(shape.input_shape, shape.n_classes, [config.seed + i for i in range(PROBE_MEMBERS)])
    small, large = PROBE_BATCHES
    one, two = _one_step(model, shape, small), _one_step(model, shape, large)
    per = [max(0.0, (b - a) / (large - small)) for a, b in zip(one[:4], two[:4])]
    fixed = [max(0.0, a - p * small) for a, p in zip(one[:2], per[:2])]
    params = sum(p.numel() for p in model.parameters() if p.requires_grad) // PROBE_MEMBERS
    return StepCost(per[0], per[1], per[2], max(per[3], two[3] / large), params, two[4],
                    train_fixed=fixed[0], forward_fixed=fixed[1])


def step_batch(cfg: TrainConfig, shape: DataLayout) -> int:
    """Examples one member reads per training step: the batch size (at most the split when drawn by epochs), or
    the whole split for full-batch training."""
    return shape.n_train if cfg.batch_size is None else min(cfg.batch_size, shape.n_train) \
        if cfg.sampling == "epoch" else cfg.batch_size


def evaluated_examples(cfg: TrainConfig, shape: DataLayout, probe_examples: int) -> int:
    """Examples one member forwards at one log step: the training split (or its evaluated prefix), the other
    splits, and the extra metrics' probe."""
    train = shape.n_train if cfg.train_eval_size is None else min(cfg.train_eval_size, shape.n_train)
    return train + shape.n_eval + min(probe_examples, shape.n_train)


def member_bytes(cost: StepCost, cfg: TrainConfig, batch: int, eval_batch: int) -> float:
    """Bytes one member adds to a batched call: parameter copies, saved activations of a step, an evaluation
    batch's largest activation (in and out)."""
    copies = OPTIMISER_COPIES.get(cfg.optimizer, 5)
    return 4 * cost.parameters * copies + cost.saved_bytes * batch + 2 * cost.live_bytes * eval_batch


def fit(cost: StepCost, cfg: TrainConfig, shape: DataLayout, members: int, memory_bytes: float, *,
        max_members: int = 256, reserve: float = CPU_RESERVE_BYTES) -> tuple[int, int, float]:
    """(members per batched call, evaluation batch size, peak bytes of one call) that fit `memory_bytes`.

    The evaluation batch is lowered first (down to 64 examples, in halvings), then the members per call. Raises
    MemoryPlanError, saying how much is needed, when one member does not fit."""
    budget = MEMORY_SHARE * memory_bytes - reserve
    batch = step_batch(cfg, shape)
    eval_batch = cfg.eval_batch_size
    want = min(members, max_members)
    while True:
        peak = shape.data_bytes(want) + want * member_bytes(cost, cfg, batch, eval_batch)
        if peak <= budget or eval_batch <= 64:
            break
        eval_batch //= 2
    shared = shape.data_bytes(0)
    per_member = member_bytes(cost, cfg, batch, eval_batch) + shape.data_bytes(1) - shared
    fits = int((budget - shared) // per_member) if budget > shared else 0
    if fits < 1:
        need = shared + per_member + reserve
        raise MemoryPlanError(
            f"one member needs {need / GB:.1f} GB ({shared / GB:.2f} GB of data, {per_member / GB:.2f} GB per member at "
            f"batch {batch} and evaluation batch {eval_batch}); the device has {memory_bytes / GB:.1f} GB "
            f"(planned use ≤ {MEMORY_SHARE:.0%} of it less {reserve / GB:.1f} GB). Use a smaller batch_size or "
            "image size, or a device with more memory")
    per_call = min(want, fits)
    return per_call, eval_batch, shared + per_call * per_member


def device_memory(device: str) -> tuple[float, float]:
    """(bytes a run may use on `device`, bytes reserved for what is not planned): free CUDA memory, or this
    machine's available RAM (its address-space limit when one is set)."""
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return float(free), GPU_RESERVE_BYTES
    return available_ram(), CPU_RESERVE_BYTES


def fit_members(configs: Sequence[Any], device: str, max_members: int = 256) -> tuple[int, int] | None:
    """(members per batched call, evaluation batch size) for members that train together on `device`, from their
    measured step cost and layout (`fit`); None when the task has no layout rule (the caller's defaults stand).
    Raises MemoryPlanError when one member does not fit: the run refuses before training."""
    first = configs[0]
    try:
        shape = layout(first.task)
    except TypeError:
        return None
    memory, reserve = device_memory(device)
    per_call, eval_batch, _ = fit(measure_step(first, shape), first.train, shape, len(configs), memory,
                                  max_members=max_members, reserve=reserve)
    return per_call, eval_batch
