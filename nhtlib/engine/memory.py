"""Memory fitting: how many members of a batched group fit the device per call, measured before training.

A member's cost is measured on one real training step of the real batched model (`measure_step`: FLOPs with
`torch.utils.flop_counter.FlopCounterMode`, a batched grouped convolution counted as its members' single
convolutions (`count_flops`), the activations a step saves for its backward pass with
`torch.autograd.graph.saved_tensors_hooks`, the largest activation of a forward pass). `fit` chooses the members per
batched call and the evaluation batch size so that the group fits the device's free memory — per member the
parameter copies, the saved activations, an evaluation batch (its decoded inputs and largest activation) and the
float64 copies the norms are taken from; per call the data and, on CUDA for convolutional models, cuDNN's
workspace — and refuses (`MemoryPlanError`) before training when one member does not fit. The sweep (`nhtlib.engine.sweep`) asks
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


NORM_COPY_BYTES = 8  # per parameter: the float64 copy `nhtlib.analysis.metrics.norms` squares at a log step (counted
# whole, an upper bound: it frees one tensor's copy before the next)


# An allowance, not a measurement: cuDNN's convolution workspace on CUDA (algorithm search with
# torch.backends.cudnn.benchmark asks for workspaces up to about this much; cuBLAS's few MB are in the reserve)
CUDNN_WORKSPACE_BYTES = 1.0 * GB


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


def _convolution_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                                _output_padding, _groups, output_mask, out_shape=None, **kwargs) -> int:
    """FLOPs of ``aten.convolution_backward`` as its groups' convolutions: each requested gradient (input, weight)
    costs what the forward convolution does, 2 × batch × positions × prod(weight shape) (the weight holds one group's
    input channels). torch's own rule counts the weight gradient of a grouped convolution `groups` times over (it
    multiplies the full input by the full output channels), so a batched step of K members (one convolution with
    groups = K) would read ≈ 4/3 too high."""
    positions = math.prod((x_shape if transposed else grad_out_shape)[2:])  # the side the kernel slides over
    per_gradient = 2 * grad_out_shape[0] * positions * math.prod(w_shape)
    return per_gradient * (int(output_mask[0]) + int(output_mask[1]))


GROUPED_CONVOLUTION_RULE = {torch.ops.aten.convolution_backward: _convolution_backward_flops}


def count_flops() -> FlopCounterMode:
    """A `FlopCounterMode` (torch.utils.flop_counter's conventions: matmuls and convolutions, 2 FLOPs per
    multiply-add) that counts a grouped convolution's backward as its groups' (`_convolution_backward_flops`):
    the FLOPs of K members batched equal K single members'."""
    return FlopCounterMode(display=False, custom_mapping=GROUPED_CONVOLUTION_RULE)


def convolutional(counter: FlopCounterMode) -> bool:
    """Whether the counted step ran a convolution (its model then needs cuDNN's workspace on CUDA)."""
    return any("convolution" in str(op) for op in counter.get_flop_counts().get("Global", {}))


@dataclass(frozen=True)
class StepCost:
    """What one member's training step costs: a part per example and a part per step (measured at 2 and 4 examples
    on PROBE_MEMBERS members: e.g. the grokking MLP projects its whole embedding table once per step, whatever the
    batch).

    train_flops / forward_flops: FLOPs per example of forward + backward and of the forward pass alone;
    train_fixed / forward_fixed: FLOPs per step (per evaluation chunk) that do not grow with the batch;
    saved_bytes: activation bytes a training step keeps for its backward pass, per example; live_bytes: the largest
    single activation of a forward pass, per example (what an evaluation batch holds at once, ×2 for in and out);
    parameters: one member's parameter count; convolutional: whether the step runs convolutions (cuDNN's
    workspace on CUDA).
    """

    train_flops: float
    forward_flops: float
    saved_bytes: float
    live_bytes: float
    parameters: int
    train_fixed: float = 0.0
    forward_fixed: float = 0.0
    convolutional: bool = False

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


def _one_step(model: nn.Module, shape: DataLayout, batch: int) -> tuple[float, float, float, float, bool]:
    """(step FLOPs, forward FLOPs, saved bytes, largest activation bytes, convolutional) of one member at `batch`:
    measured on the model's PROBE_MEMBERS members together (the batched code path's memory; its FLOPs counted as
    the members' single steps, `count_flops`), divided by their number."""
    x = random_inputs(shape, batch, PROBE_MEMBERS)
    y = torch.randint(0, shape.n_classes, (PROBE_MEMBERS, batch))
    live = [0]

    def track(module, inputs, output):
        if isinstance(output, torch.Tensor):
            live[0] = max(live[0], output.numel() * output.element_size())

    hooks = [m.register_forward_hook(track) for m in model.modules()]
    try:
        with torch.no_grad(), count_flops() as forward:
            model(x)
    finally:
        for h in hooks:
            h.remove()
    saved = [0]

    def pack(t: torch.Tensor):
        saved[0] += t.numel() * t.element_size()
        return t

    with count_flops() as step:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = member_loss(model(x), y).sum()
        loss.backward()
    model.zero_grad(set_to_none=True)
    m = PROBE_MEMBERS
    return step.get_total_flops() / m, forward.get_total_flops() / m, saved[0] / m, live[0] / m, convolutional(step)


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
    return StepCost(per[0], per[1], per[2], max(per[3], two[3] / large), params, train_fixed=fixed[0],
                    forward_fixed=fixed[1], convolutional=two[4])


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


def decoded_input_bytes(shape: DataLayout) -> float:
    """Bytes of one example's input as the model reads it: uint8 images decoded to float32, int64 token ids."""
    return (8 if shape.input_dtype == "int64" else 4) * math.prod(shape.input_shape)


def member_bytes(cost: StepCost, cfg: TrainConfig, shape: DataLayout, batch: int, eval_batch: int) -> float:
    """Bytes one member adds to a batched call: parameter copies, saved activations of a step, an evaluation
    batch (its decoded inputs: the K members' copies of a shared batch are expanded into the batched model's input,
    and its largest activation, in and out), and the float64 parameter copies of the norms at a log step."""
    copies = OPTIMISER_COPIES.get(cfg.optimizer, 5)
    evaluation = eval_batch * (2 * cost.live_bytes + decoded_input_bytes(shape))
    return 4 * cost.parameters * copies + cost.saved_bytes * batch + evaluation + NORM_COPY_BYTES * cost.parameters


def workspace_bytes(cost: StepCost, device_type: str) -> float:
    """What a batched call needs besides its members and data: cuDNN's workspace for a convolutional model on
    CUDA (`CUDNN_WORKSPACE_BYTES`, an allowance), else nothing."""
    return CUDNN_WORKSPACE_BYTES if device_type == "cuda" and cost.convolutional else 0.0


def fit(cost: StepCost, cfg: TrainConfig, shape: DataLayout, members: int, memory_bytes: float, *,
        max_members: int = 256, reserve: float = CPU_RESERVE_BYTES, workspace: float = 0.0) -> tuple[int, int, float]:
    """(members per batched call, evaluation batch size, peak bytes of one call) that fit `memory_bytes`.

    workspace: bytes a call needs besides its members and data (`workspace_bytes`), part of the peak. The
    evaluation batch is lowered first (down to 64 examples, in halvings), then the members per call. Raises
    MemoryPlanError, saying how much is needed, when one member does not fit."""
    budget = MEMORY_SHARE * memory_bytes - reserve
    batch = step_batch(cfg, shape)
    eval_batch = cfg.eval_batch_size
    want = min(members, max_members)
    while True:
        peak = workspace + shape.data_bytes(want) + want * member_bytes(cost, cfg, shape, batch, eval_batch)
        if peak <= budget or eval_batch <= 64:
            break
        eval_batch //= 2
    shared = workspace + shape.data_bytes(0)
    per_member = member_bytes(cost, cfg, shape, batch, eval_batch) + shape.data_bytes(1) - shape.data_bytes(0)
    fits = int((budget - shared) // per_member) if budget > shared else 0
    if fits < 1:
        need = shared + per_member + reserve
        raise MemoryPlanError(
            f"one member needs {need / GB:.1f} GB ({shape.data_bytes(0) / GB:.2f} GB of data, {workspace / GB:.2f} GB "
            f"of workspace, {per_member / GB:.2f} GB per member at batch {batch} and evaluation batch {eval_batch}); "
            f"the device has {memory_bytes / GB:.1f} GB (planned use ≤ {MEMORY_SHARE:.0%} of it less "
            f"{reserve / GB:.1f} GB). Use a smaller batch_size or image size, or a device with more memory")
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
    cost = measure_step(first, shape)
    per_call, eval_batch, _ = fit(cost, first.train, shape, len(configs), memory, max_members=max_members,
                                  reserve=reserve, workspace=workspace_bytes(cost, torch.device(device).type))
    return per_call, eval_batch
