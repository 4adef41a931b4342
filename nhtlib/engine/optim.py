"""Optimisers for a batch of K independent members, each with its own learning rate and weight decay.

Every parameter tensor carries a leading member dimension K; lr and weight_decay are tensors of shape (K,).
The update rules are those of PyTorch, element for element, so member k trained here equals the same model trained
alone with torch.optim (tests check this):

* AdamW (decoupled decay): theta <- theta * (1 - lr*wd); m, v moments; theta <- theta - lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
* SGD with L2:             g <- g + wd*theta; optional momentum buffer (dampening 0); theta <- theta - lr*g

How a step runs. Each op of the rule is one `torch._foreach_*` call over a list of tensors, not one call per
tensor (the foreach ops are public enough: torch.optim's own foreach implementations are built on them). A list
holds one device and dtype (`ParamGroup`), as foreach kernels need, and is worked through in chunks
(`ParamGroup.step_chunks`, as `StepLayout.for_device` says):

* on the CPU, in blocks of CPU_BLOCK_NUMEL numbers: a parameter of more is cut into column blocks of its (K, n)
  view (`Piece`), small ones share a block, and every op of the rule runs on one block before the next, whose
  operands thus stay in cache from op to op (on ResNet18 K = 4 twice the speed of the same ops over whole tensors,
  over 3x that of the old loop: benchmarks/bench_optimizer.py);
* on CUDA, whole tensors (column blocks would keep foreach kernels off their fast path) in chunks of at most
  max(CUDA_CHUNK_NUMEL, largest parameter) numbers.

Either way a step's two temporaries (sqrt(v)/... and the update) hold one chunk at a time: at most 2 x max(chunk,
largest piece) numbers (the loop over tensors this replaced held three copies of its largest tensor).

The per-member factors (lr, 1 - lr*wd, lr/bc1, wd) live in small (K,) tensors in the parameters' dtype on their
device (`MemberFactors`), with one view per piece built once, (K, 1) for a column block and (K, 1, ..., 1) for a
whole tensor, aliasing them: a new factor is a refill in place, and the lr is converted from float64 only when the
schedule's factor changes. lr and weight_decay are read once, at construction.

On the CPU every foreach op runs the plain op's per-tensor kernel on the same operands, so a step equals, bit for
bit, the per-tensor loop this replaced (tests/test_optim.py keeps it as its reference). On CUDA foreach kernels
may round an op differently (a division by a Python number is a true division there, a multiplication by the
reciprocal in the plain kernel), and the ops that broadcast a per-member factor take foreach's per-tensor path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from nhtlib.config import Config, check_range

CPU_BLOCK_NUMEL = 1 << 18  # 1 MB per fp32 operand: a block's 7 operands stay in L3 (smaller blocks: more calls)
CUDA_CHUNK_NUMEL = 1 << 24  # bounds the temporaries (2 x 64 MB in fp32) at a handful of launches per op


@dataclass(frozen=True)
class StepLayout(Config):
    """How a step walks through the parameters of one device (see the module docstring); `for_device` gives the
    book's choice, tests pass others (every layout gives the same numbers)."""

    block_numel: int | None  # cut a contiguous parameter into column blocks of at most this many numbers; None: whole
    chunk_numel: int  # numbers per chunk of pieces (a bigger piece is a chunk of its own)

    def validate(self) -> None:
        if self.block_numel is not None:
            check_range("block_numel", self.block_numel, 1, None, integer=True)
        check_range("chunk_numel", self.chunk_numel, 1, None, integer=True)

    @classmethod
    def for_device(cls, device: torch.device) -> "StepLayout":
        if device.type == "cpu":
            return cls(CPU_BLOCK_NUMEL, CPU_BLOCK_NUMEL)
        return cls(None, CUDA_CHUNK_NUMEL)


def chunks(sizes: Sequence[int], chunk_numel: int) -> list[slice]:
    """Consecutive slices of a list of tensors with `sizes` elements, each of at most chunk_numel elements in all
    (a tensor bigger than that is a slice of its own)."""
    out, start, total = [], 0, 0
    for i, n in enumerate(sizes):
        if i > start and total + n > chunk_numel:
            out.append(slice(start, i))
            start, total = i, 0
        total += n
    if sizes:
        out.append(slice(start, len(sizes)))
    return out


@dataclass(frozen=True)
class Piece:
    """What the step treats as one tensor: columns `cols` of parameter `position` (in its group) viewed (K, n), or
    the whole parameter (cols None)."""

    position: int
    cols: slice | None
    numel: int
    shape: tuple[int, ...]  # of the piece

    def of(self, t: torch.Tensor) -> torch.Tensor:
        """This piece of t (the parameter or a tensor written in place with its layout): a view."""
        return t if self.cols is None else t.view(t.shape[0], -1)[:, self.cols]

    def read(self, t: torch.Tensor) -> torch.Tensor:
        """This piece of t, only read (a gradient of any layout)."""
        return t if self.cols is None else t.reshape(t.shape[0], -1)[:, self.cols]

    def factor_view(self, values: torch.Tensor) -> torch.Tensor:
        """A view of per-member values (K,) that broadcasts against this piece: (K, 1) or (K, 1, ..., 1)."""
        return values.view(-1, 1) if self.cols is not None else values.view(-1, *([1] * (len(self.shape) - 1)))


def cut(position: int, p: torch.Tensor, block_numel: int | None) -> list[Piece]:
    """Parameter p as pieces: column blocks of at most block_numel numbers (at least one column each) when
    block_numel is given and p is contiguous (so its (K, n) view exists), else p whole."""
    if block_numel is None or not p.is_contiguous() or p.dim() == 0 or p.numel() <= block_numel:
        return [Piece(position, None, p.numel(), tuple(p.shape))]
    k = p.shape[0]
    n = p.numel() // k
    cols = max(1, block_numel // k)
    return [Piece(position, slice(a, min(n, a + cols)), k * (min(n, a + cols) - a), (k, min(n, a + cols) - a))
            for a in range(0, n, cols)]


class MemberFactors:
    """Named per-member factors (K,) of one group, each with one view per piece; `set` refills a factor in place,
    so its views stay valid."""

    def __init__(self, pieces: Sequence[Piece], like: torch.Tensor, names: Sequence[str]):
        self.values = {n: torch.zeros(like.shape[0], dtype=like.dtype, device=like.device) for n in names}
        self.views = {n: [piece.factor_view(v) for piece in pieces] for n, v in self.values.items()}

    def set(self, name: str, values: torch.Tensor) -> None:
        self.values[name].copy_(values)  # casts like .to(dtype): the float64 -> dtype rounding of the old loop


class ParamGroup:
    """The parameters of one (device, dtype): their positions in the optimiser's list, their pieces and per-member
    factors."""

    def __init__(self, index: list[int], params: Sequence[torch.Tensor], decay_mask: Sequence[bool],
                 factor_names: Sequence[str], layout: StepLayout | None):
        self.index = index
        self.params = [params[i] for i in index]
        self.decays = [decay_mask[i] for i in index]
        like = self.params[0]
        self.layout = layout or StepLayout.for_device(like.device)
        self.pieces = [piece for j, p in enumerate(self.params) for piece in cut(j, p, self.layout.block_numel)]
        self.param_views = [piece.of(self.params[piece.position]) for piece in self.pieces]
        self.factors = MemberFactors(self.pieces, like, factor_names)

    def views_of(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Every piece of `tensors` (one per parameter of the group, written in place): views."""
        return [piece.of(tensors[piece.position]) for piece in self.pieces]

    def step_chunks(self) -> list[list[int]]:
        """The chunks of this step: lists of pieces (indices into self.pieces) of the parameters that have a
        gradient (a parameter whose grad is None is skipped, its state untouched)."""
        live = [i for i, piece in enumerate(self.pieces) if self.params[piece.position].grad is not None]
        return [live[s] for s in chunks([self.pieces[i].numel for i in live], self.layout.chunk_numel)]

    def grads(self, chunk: Sequence[int]) -> list[torch.Tensor]:
        return [self.pieces[i].read(self.params[self.pieces[i].position].grad) for i in chunk]


def group_by_device_and_dtype(params: Sequence[torch.Tensor]) -> list[list[int]]:
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(params):
        groups.setdefault((p.device, p.dtype), []).append(i)
    return list(groups.values())


def _pick(values: Sequence, positions: Sequence[int]) -> list:
    return [values[j] for j in positions]


class BatchedOptimizer:
    """Shared by the optimisers: the parameter list, one ParamGroup per (device, dtype), lr and weight decay as
    per-member factors. Subclasses name their extra factors (FACTORS) and refill the lr-dependent ones in
    `set_lr_factors`, which runs only when the schedule's factor changes. layout: None = `StepLayout.for_device`."""

    FACTORS: tuple[str, ...] = ()

    def __init__(self, params: Sequence[torch.nn.Parameter], lr: torch.Tensor, weight_decay: torch.Tensor,
                 decay_mask: Sequence[bool], layout: StepLayout | None = None):
        self.params = list(params)
        self.lr = lr
        self.weight_decay = weight_decay
        self.decay_mask = list(decay_mask)
        if len(self.decay_mask) != len(self.params):
            raise ValueError("decay_mask must have one entry per parameter")
        self.step_count = 0
        self.groups = [ParamGroup(index, self.params, self.decay_mask, ("lr", "wd") + self.FACTORS, layout)
                       for index in group_by_device_and_dtype(self.params)]
        for g in self.groups:
            g.factors.set("wd", weight_decay.to(g.params[0].device))
        self._lr_factor: float | None = None  # the schedule factor the "lr" factors hold

    def _update_lr(self, lr_factor: float) -> None:
        if lr_factor == self._lr_factor:
            return
        for g in self.groups:
            # (lr * factor) in float64, then rounded once to the parameters' dtype, as the per-tensor loop did
            g.factors.set("lr", (self.lr * lr_factor).to(g.params[0].device))
            self.set_lr_factors(g)
        self._lr_factor = lr_factor

    def set_lr_factors(self, group: ParamGroup) -> None:
        """Refill the group's factors that depend on the lr (its "lr" factor is already set)."""

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError


class BatchedAdamW(BatchedOptimizer):
    FACTORS = ("keep", "step_size")  # keep = 1 - lr*wd (decoupled decay), step_size = lr / bc1

    def __init__(self, params, lr, weight_decay, decay_mask, betas=(0.9, 0.999), eps=1e-8, layout=None):
        super().__init__(params, lr, weight_decay, decay_mask, layout)
        self.betas, self.eps = betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        # pieces of the moments, per group (load_state_dict copies into the same tensors, so these stay valid)
        self._moment_views = [(g.views_of(_pick(self.exp_avg, g.index)), g.views_of(_pick(self.exp_avg_sq, g.index)))
                              for g in self.groups]

    def set_lr_factors(self, group: ParamGroup) -> None:
        f = group.factors.values
        group.factors.set("keep", 1 - f["lr"] * f["wd"])

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        bc1 = 1 - self.betas[0] ** self.step_count
        bc2_sqrt = math.sqrt(1 - self.betas[1] ** self.step_count)
        self._update_lr(lr_factor)
        for g, moments in zip(self.groups, self._moment_views):
            torch.div(g.factors.values["lr"], bc1, out=g.factors.values["step_size"])
            for chunk in g.step_chunks():
                self._step_chunk(g, chunk, moments, bc2_sqrt)

    def _step_chunk(self, g: ParamGroup, chunk: list[int], moments: tuple[list, list], bc2_sqrt: float) -> None:
        """One chunk's update (its temporaries are freed on return, before the next chunk's)."""
        beta1, beta2 = self.betas
        views = g.factors.views
        params, grads = _pick(g.param_views, chunk), g.grads(chunk)
        m, v = _pick(moments[0], chunk), _pick(moments[1], chunk)
        # the ops of the rule, ordered so that each reads what the one before wrote (still in cache)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, bc2_sqrt)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_lerp_(m, grads, 1 - beta1)
        update = torch._foreach_div(m, denom)
        torch._foreach_mul_(update, _pick(views["step_size"], chunk))
        decayed = [i for i in chunk if g.decays[g.pieces[i].position]]
        if decayed:  # theta * (1 - lr*wd) before theta - update, as in the rule
            torch._foreach_mul_(_pick(g.param_views, decayed), _pick(views["keep"], decayed))
        torch._foreach_sub_(params, update)

    def state_dict(self) -> dict:
        return {"step": self.step_count, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            dst.copy_(src)


class BatchedSGD(BatchedOptimizer):
    def __init__(self, params, lr, weight_decay, decay_mask, momentum=0.0, layout=None):
        super().__init__(params, lr, weight_decay, decay_mask, layout)
        self.momentum = momentum
        # momentum buffers, made at a parameter's first step with a gradient; contiguous whatever the gradient's
        # layout, so that their column blocks are views
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        self._update_lr(lr_factor)
        for g in self.groups:
            fresh = self._new_buffers(g) if self.momentum else set()
            for chunk in g.step_chunks():
                self._step_chunk(g, chunk, fresh)

    def _step_chunk(self, g: ParamGroup, chunk: list[int], fresh: set[int]) -> None:
        """One chunk's update (its temporaries are freed on return, before the next chunk's)."""
        views = g.factors.views
        params, grads = _pick(g.param_views, chunk), g.grads(chunk)
        decayed = [c for c, i in enumerate(chunk) if g.decays[g.pieces[i].position]]
        if decayed:  # g + wd*theta, as new values: p.grad is left as backward wrote it
            l2 = torch._foreach_mul(_pick(params, decayed), _pick(views["wd"], _pick(chunk, decayed)))
            torch._foreach_add_(l2, _pick(grads, decayed))
            for c, t in zip(decayed, l2):
                grads[c] = t
        if self.momentum:
            pieces = _pick(g.pieces, chunk)
            grads = self._accumulate([piece.of(self.buffers[g.index[piece.position]]) for piece in pieces],
                                     grads, [piece.position in fresh for piece in pieces])
        update = torch._foreach_mul(grads, _pick(views["lr"], chunk))
        torch._foreach_sub_(params, update)

    def _new_buffers(self, g: ParamGroup) -> set[int]:
        """Make the momentum buffer of each parameter of g at its first step with a gradient; returns their
        positions in g (their buffers are then set to g, not accumulated)."""
        fresh = set()
        for j, (i, p) in enumerate(zip(g.index, g.params)):
            if p.grad is not None and self.buffers[i] is None:
                self.buffers[i] = torch.empty_like(p, memory_format=torch.contiguous_format)
                fresh.add(j)
        return fresh

    def _accumulate(self, buffers: list[torch.Tensor], grads: list[torch.Tensor],
                    fresh: list[bool]) -> list[torch.Tensor]:
        """buf <- momentum*buf + g, or buf <- g where fresh (a first step); returns the buffers."""
        old = [c for c, f in enumerate(fresh) if not f]
        new = [c for c, f in enumerate(fresh) if f]
        if old:
            torch._foreach_mul_(_pick(buffers, old), self.momentum)
            torch._foreach_add_(_pick(buffers, old), _pick(grads, old))
        if new:
            torch._foreach_copy_(_pick(buffers, new), _pick(grads, new))
        return buffers

    def state_dict(self) -> dict:
        return {"step": self.step_count, "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        self.buffers = [None if b is None else b.clone(memory_format=torch.contiguous_format)
                        for b in state["buffers"]]


def lr_factor(schedule: str, step: int, total_steps: int) -> float:
    """Multiplier of the base lr at (0-based) optimiser step `step`: constant, or cosine annealing to 0."""
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * step / total_steps))
    raise ValueError(f"lr_schedule={schedule!r}; choose 'constant' or 'cosine'")
