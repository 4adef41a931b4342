"""The foreach batched optimisers (`nhtlib.engine.optim`) against the per-tensor loop they replaced.

Equality is bitwise (`torch.equal`): on the CPU every `torch._foreach_*` op runs the plain op's per-tensor kernel, and
the new step applies the same ops to the same operands in the same order per element (only products swap their
operands, which IEEE multiplication does not see), so nothing may differ, not even in the last bit. Cutting a
tensor into column blocks moves elements between a kernel's vectorised body and its scalar tail; the two agree on
this build (the tests below would see it if not: the small-block layout puts tails everywhere).
"""
from __future__ import annotations

import io
import math
from typing import Sequence

import pytest
import torch

import nhtlib as nht
from nhtlib.engine.optim import BatchedAdamW, BatchedSGD, StepLayout, chunks, lr_factor
from nhtlib.engine.step import make_optimizer, member_loss


# ------------------------------------------------------------------ the per-tensor loop before foreach (verbatim)

def _per_member(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Reshape (K,) to (K, 1, 1, ...) so it broadcasts against a parameter of shape (K, ...)."""
    return values.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))


class _ReferenceOptimizer:
    def __init__(self, params: Sequence[torch.nn.Parameter], lr: torch.Tensor, weight_decay: torch.Tensor,
                 decay_mask: Sequence[bool]):
        self.params = list(params)
        self.lr = lr
        self.weight_decay = weight_decay
        self.decay_mask = list(decay_mask)
        if len(self.decay_mask) != len(self.params):
            raise ValueError("decay_mask must have one entry per parameter")
        self.step_count = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError


class _ReferenceAdamW(_ReferenceOptimizer):
    def __init__(self, params, lr, weight_decay, decay_mask, betas=(0.9, 0.999), eps=1e-8):
        super().__init__(params, lr, weight_decay, decay_mask)
        self.betas, self.eps = betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        beta1, beta2 = self.betas
        bc1 = 1 - beta1 ** self.step_count
        bc2_sqrt = math.sqrt(1 - beta2 ** self.step_count)
        for p, m, v, decays in zip(self.params, self.exp_avg, self.exp_avg_sq, self.decay_mask):
            if p.grad is None:
                continue
            lr = _per_member(self.lr * lr_factor, p)
            if decays:
                p.mul_(1 - lr * _per_member(self.weight_decay, p))
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            p.sub_((lr / bc1) * (m / denom))

    def state_dict(self) -> dict:
        return {"step": self.step_count, "exp_avg": self.exp_avg, "exp_avg_sq": self.exp_avg_sq}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            dst.copy_(src)


class _ReferenceSGD(_ReferenceOptimizer):
    def __init__(self, params, lr, weight_decay, decay_mask, momentum=0.0):
        super().__init__(params, lr, weight_decay, decay_mask)
        self.momentum = momentum
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        self.step_count += 1
        for i, (p, decays) in enumerate(zip(self.params, self.decay_mask)):
            if p.grad is None:
                continue
            g = p.grad
            if decays:
                g = g + _per_member(self.weight_decay, p) * p
            if self.momentum:
                if self.buffers[i] is None:
                    self.buffers[i] = g.clone()
                else:
                    self.buffers[i].mul_(self.momentum).add_(g)
                g = self.buffers[i]
            p.sub_(_per_member(self.lr * lr_factor, p) * g)

    def state_dict(self) -> dict:
        return {"step": self.step_count, "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step"]
        self.buffers = [None if b is None else b.clone() for b in state["buffers"]]


REFERENCE = {BatchedAdamW: _ReferenceAdamW, BatchedSGD: _ReferenceSGD}

# ------------------------------------------------------------------------------------------------ set-up

K = 3
LRS = torch.tensor([3e-3, 1e-2, 5e-2], dtype=torch.float64)
WDS = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
STEPS = 20

# (name, model config, input shape, classes); small widths, the chapters' architectures
MODELS = {
    "resnet18": (nht.models.config("resnet18", norm="batch", width=1 / 16), (3, 4, 4), 10),
    "transformer": (nht.models.config("transformer", d_model=16, heads=2, ffn=32), (2,), 7),
}
OPTIMIZERS = {  # TrainConfig of each optimiser case
    "adamw": nht.TrainConfig(optimizer="adamw", decay="matrices"),
    "sgd": nht.TrainConfig(optimizer="sgd", decay="matrices"),
    "sgd_momentum": nht.TrainConfig(optimizer="sgd", momentum=0.9, decay="matrices"),
}


def inputs(name: str, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed batch (x, y) of 6 examples per member for `step`."""
    _, shape, classes = MODELS[name]
    g = torch.Generator().manual_seed(step)
    x = (torch.randint(0, classes, (K, 6, *shape), generator=g) if name == "transformer"
         else torch.randn(K, 6, *shape, generator=g))
    return x, torch.randint(0, classes, (K, 6), generator=g)


def build(name: str) -> torch.nn.Module:
    cfg, shape, classes = MODELS[name]
    return cfg.build(shape, classes, list(range(K)))


LAYOUTS = {  # the CPU's own; column blocks of 1000 numbers in chunks of 3000; whole tensors in one chunk
    "default": None,
    "small_blocks": StepLayout(block_numel=1000, chunk_numel=3000),
    "whole_tensors": StepLayout(block_numel=None, chunk_numel=10**9),
}


def optimizer_kwargs(cfg: nht.TrainConfig) -> dict:
    return {"betas": tuple(cfg.betas), "eps": cfg.eps} if cfg.optimizer == "adamw" else {"momentum": cfg.momentum}


def reference_optimizer(model: torch.nn.Module, cfg: nht.TrainConfig):
    new = make_optimizer(model, cfg, LRS, WDS)  # the book's parameter list and decay mask
    return REFERENCE[type(new)](new.params, LRS, WDS, new.decay_mask, **optimizer_kwargs(cfg))


def foreach_optimizer(model: torch.nn.Module, cfg: nht.TrainConfig, layout: StepLayout | None):
    book = make_optimizer(model, cfg, LRS, WDS)
    return type(book)(book.params, LRS, WDS, book.decay_mask, layout=layout, **optimizer_kwargs(cfg))


def train_steps(model, opt, name: str, steps: range) -> None:
    """Real forward/backward steps with a cosine lr factor."""
    for step in steps:
        x, y = inputs(name, step)
        opt.zero_grad()
        member_loss(model(x), y).sum().backward()
        opt.step(lr_factor("cosine", step, STEPS))


def state_tensors(opt) -> list[torch.Tensor]:
    state = opt.state_dict()
    return [t for key in sorted(state) if key != "step" for t in state[key] if t is not None]


def assert_same(opt_a, opt_b) -> None:
    """Same parameters and optimiser state, bit for bit."""
    for i, (p, q) in enumerate(zip(opt_a.params, opt_b.params, strict=True)):
        assert torch.equal(p, q), f"parameter {i}"
    for ta, tb in zip(state_tensors(opt_a), state_tensors(opt_b), strict=True):
        assert torch.equal(ta, tb)
    assert [b is None for b in getattr(opt_a, "buffers", [])] == [b is None for b in getattr(opt_b, "buffers", [])]


# ------------------------------------------------------------------------------------------------ tests

@pytest.mark.parametrize("model_name", list(MODELS))
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_foreach_step_equals_the_per_tensor_loop_bitwise(model_name, opt_name):
    """20 real steps, per-member lr and wd, decay on the matrices only, a cosine factor; some parameters get no
    gradient at some steps (a member whose p.grad is None is skipped, its state untouched); every layout.

    The reference model trains; the foreach optimisers step copies of its parameters with copies of its gradients,
    and must hold the same parameters after every step (so their gradients would be the same too)."""
    cfg = OPTIMIZERS[opt_name]
    ref_model = build(model_name)
    ref_opt = reference_optimizer(ref_model, cfg)
    assert any(ref_opt.decay_mask) and not all(ref_opt.decay_mask)
    others = [foreach_optimizer(build(model_name), cfg, layout) for layout in LAYOUTS.values()]
    assert any(piece.cols is not None for g in others[1].groups for piece in g.pieces)  # small blocks cut tensors
    for step in range(STEPS):
        x, y = inputs(model_name, step)
        ref_opt.zero_grad()
        member_loss(ref_model(x), y).sum().backward()
        for i, p in enumerate(ref_opt.params):  # tensor 1 gets no gradient before step 5, others now and then
            if (i == 1 and step < 5) or (i + step) % 7 == 0:
                p.grad = None
        for opt in [ref_opt] + others:
            for p, q in zip(ref_opt.params, opt.params):
                q.grad = None if p.grad is None else p.grad.clone()
            opt.step(lr_factor("cosine", step, STEPS))
        for opt in others:
            assert_same(opt, ref_opt)
    assert not torch.equal(ref_opt.params[0], next(build(model_name).parameters()))  # it trained


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_resume_from_state_dict_equals_an_unbroken_run(opt_name):
    """Stop after 8 steps, save the optimiser state through torch.save, load it into a fresh optimiser over the
    saved parameters, finish: equal to 20 unbroken steps. The checkpoint keys and tensors are those of the per-tensor
    loop: a checkpoint it wrote resumes here."""
    cfg, name = OPTIMIZERS[opt_name], "transformer"
    unbroken = build(name)
    unbroken_opt = make_optimizer(unbroken, cfg, LRS, WDS)
    train_steps(unbroken, unbroken_opt, name, range(STEPS))

    for writer in (make_optimizer, None):  # written by the foreach optimiser, then by the reference loop
        first = build(name)
        first_opt = make_optimizer(first, cfg, LRS, WDS) if writer else reference_optimizer(first, cfg)
        train_steps(first, first_opt, name, range(8))
        buffer = io.BytesIO()
        torch.save({"params": [p.detach() for p in first.parameters()], "optimizer": first_opt.state_dict()}, buffer)
        buffer.seek(0)
        saved = torch.load(buffer, weights_only=True)
        assert set(saved["optimizer"]) == set(unbroken_opt.state_dict())

        resumed = build(name)
        with torch.no_grad():
            for p, q in zip(resumed.parameters(), saved["params"]):
                p.copy_(q)
        resumed_opt = make_optimizer(resumed, cfg, LRS, WDS)
        resumed_opt.load_state_dict(saved["optimizer"])
        train_steps(resumed, resumed_opt, name, range(8, STEPS))
        assert_same(resumed_opt, unbroken_opt)


@pytest.mark.parametrize("cls", [BatchedAdamW, BatchedSGD])
def test_layouts_dtypes_strides_and_a_returning_lr_factor(cls):
    """Tensors of two dtypes (two foreach groups), a non-contiguous parameter (stepped whole), a gradient of another
    layout than its parameter, every layout from one column per block to whole tensors, and a schedule factor that
    changes and comes back: all equal the per-tensor loop."""
    shapes = [(K, 40, 50), (K, 5), (K, 2, 3, 3, 3), (K, 7), (K, 30, 20)]
    dtypes = [torch.float32, torch.float64, torch.float32, torch.float64, torch.float32]
    mask = [True, False, True, True, True]
    kwargs = {"momentum": 0.9} if cls is BatchedSGD else {}
    layouts = [None, StepLayout(1, 1), StepLayout(7, 7), StepLayout(500, 2000), StepLayout(None, 1),
               StepLayout(None, 10**9), StepLayout(300, 10**9)]

    def params():
        g = torch.Generator().manual_seed(0)
        ps = [torch.randn(s, generator=g, dtype=d) for s, d in zip(shapes, dtypes)]
        ps[4] = ps[4].transpose(1, 2).contiguous().transpose(1, 2)  # (K, 30, 20) with column-major members
        return [torch.nn.Parameter(p) for p in ps]

    runs = [(p := params(), cls(p, LRS, WDS, mask, layout=layout, **kwargs)) for layout in layouts]
    runs.append((p := params(), REFERENCE[cls](p, LRS, WDS, mask, **kwargs)))
    assert not runs[-1][0][4].is_contiguous() and len(runs[0][1].groups) == 2
    for step, factor in enumerate([1.0, 0.5, 0.5, 1.0, 0.25, 1.0]):
        for ps, opt in runs:
            for i, p in enumerate(ps):
                g = torch.Generator().manual_seed(10 * step + i)
                p.grad = torch.randn(p.shape, generator=g, dtype=p.dtype)
            ps[0].grad = ps[0].grad.transpose(1, 2).contiguous().transpose(1, 2)  # not the parameter's layout
            opt.step(factor)
    for ps, opt in runs[:-1]:
        for p, q in zip(ps, runs[-1][0]):
            assert p.dtype == q.dtype and torch.equal(p, q), opt.groups[0].layout


def test_chunks_cover_every_tensor_once_within_the_limit():
    sizes = [5, 3, 9, 1, 1, 20, 2]
    for limit in (1, 4, 6, 10, 100):
        cut = chunks(sizes, limit)
        assert [i for s in cut for i in range(len(sizes))[s]] == list(range(len(sizes)))
        for s in cut:
            assert sum(sizes[s]) <= limit or s.stop - s.start == 1
        # greedy: no chunk could have taken the next tensor
        for s, nxt in zip(cut, cut[1:]):
            assert sum(sizes[s]) + sizes[nxt.start] > limit
    assert chunks([], 4) == []


@pytest.mark.parametrize("opt_name", ["adamw", "sgd_momentum"])
def test_one_member_follows_torch_optim(opt_name):
    """Member k trained here follows torch.optim (AdamW / SGD with L2 and momentum) at lr_k * factor: equal to
    float rounding (torch.optim writes the last op as addcdiv, and forms 1 - lr*wd in float64)."""
    cfg = OPTIMIZERS[opt_name]
    g = torch.Generator().manual_seed(1)
    weight = torch.nn.Parameter(torch.randn(K, 6, 4, generator=g))
    bias = torch.nn.Parameter(torch.randn(K, 6, generator=g))
    ours = make_optimizer(torch.nn.ParameterList([weight, bias]), cfg, LRS, WDS)
    singles, theirs = [], []
    for k in range(K):
        w, b = (torch.nn.Parameter(t[k].detach().clone()) for t in (weight, bias))
        groups = [{"params": [w], "weight_decay": float(WDS[k])}, {"params": [b], "weight_decay": 0.0}]
        theirs.append(torch.optim.AdamW(groups, lr=float(LRS[k]), betas=cfg.betas, eps=cfg.eps)
                      if cfg.optimizer == "adamw" else torch.optim.SGD(groups, lr=float(LRS[k]), momentum=cfg.momentum))
        singles.append((w, b))
    for step in range(STEPS):
        factor = lr_factor("cosine", step, STEPS)
        grads = [torch.randn(t.shape, generator=g) for t in (weight, bias)]
        weight.grad, bias.grad = grads
        ours.step(factor)
        for k, ((w, b), opt) in enumerate(zip(singles, theirs)):
            w.grad, b.grad = grads[0][k].clone(), grads[1][k].clone()
            for group in opt.param_groups:
                group["lr"] = float(LRS[k]) * factor
            opt.step()
    for k, (w, b) in enumerate(singles):
        torch.testing.assert_close(weight[k].detach(), w.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(bias[k].detach(), b.detach(), rtol=1e-5, atol=1e-6)
