"""The one training loop of the book.

It trains K independent members at once (K = 1 is a single run): each member has its own seed (init and data
order), learning rate and weight decay; the model's parameters carry a leading member dimension and the optimisers
in `optim` apply PyTorch's update rules per member. At every step of the log grid it evaluates every split
(loss and accuracy), the total and per-layer squared norms, and any extra metrics; it returns one tidy table per
member (one row per logged step).

A checkpoint (parameters, buffers such as BatchNorm statistics, optimiser state, data-order RNG, rows so far) is
written atomically at log steps when `checkpoint_path` is given, so a killed run resumes where it stopped and produces
the same table as an unkilled one. Given one path per member, each member's part of the state (its rows along the
member dimension of every tensor, its sampler state, its logged rows) is a file of its own, exactly what a batch of
that member alone would save: a batch of any composition resumes every member it holds (`member_part`, `joined_parts`). A
checkpoint that cannot be parsed is discarded with a warning naming its path (training restarts from step 0).
Checkpoints are written every `checkpoint_every` steps and, between those, at most every `checkpoint_interval`
seconds, sized to the checkpoint: at most 5 % of the wall time goes to writing them, and a kill loses at most 10 min.

Backends (`backend_flags`): a convolutional model on CUDA trains with cuDNN's autotuner on
(``torch.backends.cudnn.benchmark``); $NHT_DETERMINISTIC=1 asks for deterministic algorithms instead
(``torch.use_deterministic_algorithms``, warning by name about an op that has no deterministic CUDA kernel; cuDNN
deterministic, no autotuning, ``CUBLAS_WORKSPACE_CONFIG``). Both are restored when training returns; neither is part
of a result's identity (the sweep records the mode with each run).

Divergence (`nhtlib.analysis.divergence`): a member whose training loss (checked at every step, on the device,
without a host synchronisation) or squared norm (checked at every log step) is not finite, or whose logged training
loss blew up (`blew_up`: above 1000x its running minimum and above its first logged value), is *diverged*: it is
stopped (its loss no longer enters the backward pass, its rows end at the last sound log) and its table carries the
step in the column `diverged_step` (NaN for members that did not diverge). The other members go on unaffected:
members share no parameters.

Precision (`TrainConfig.precision`, `nhtlib.engine.precision`): the TF32 flags hold for the whole run (and are restored
when it returns); under "bf16" the training forward and the evaluation forwards run under bf16 autocast, the loss in
fp32, weights and optimiser state stay fp32; extra metrics run in plain fp32. `TrainConfig.compile` wraps the
training forward in `torch.compile` (evaluation stays eager).

Between log steps the loop never waits for the device: minibatch indices are drawn on the CPU and copied
asynchronously (from pinned memory on CUDA), divergence is tracked on the device, and every value that needs the
host (losses for the progress bar, divergence, checkpoints, the rows) is read at log steps only, the rows' values in
one transfer.
"""
from __future__ import annotations

import contextlib
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, Union

import pandas as pd
import torch
from torch import nn
from tqdm import tqdm  # plain text bars: no widget dependency in notebooks

from nhtlib.engine.cache import load_checkpoint, save_checkpoint
from nhtlib.config import TrainConfig, deterministic_mode
from nhtlib.data import Dataset, Split
from nhtlib.analysis.divergence import blew_up
from nhtlib.analysis.metrics.norms import layer_squared_norms, norm_columns
from nhtlib.engine.optim import lr_factor
from nhtlib.engine.precision import precision_context, tf32_flags
from nhtlib.engine.step import make_optimizer, member_loss, training_step  # noqa: F401  (make_optimizer: the loop's)

ExtraMetrics = Callable[[nn.Module, Dataset], dict[str, torch.Tensor]]
CheckpointPaths = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], None]  # one file, or one per member
DATA_SEED_OFFSET = 7_919  # data-order RNG of a member = seed + offset (kept apart from the init RNG)

# Time-based checkpoints: a write may take at most WRITE_SHARE of the wall time (the interval is its measured duration
# / WRITE_SHARE), but they come at least every MAX_INTERVAL_S (what a kill may lose) and at most every MIN_INTERVAL_S
# (a short run is not slowed down); before the first write its duration is estimated at ASSUMED_WRITE_RATE.
CHECKPOINT_WRITE_SHARE = 0.05
CHECKPOINT_MIN_INTERVAL_S, CHECKPOINT_MAX_INTERVAL_S = 30.0, 600.0
ASSUMED_WRITE_RATE = 200e6  # bytes per second: a local disk through torch.save, conservatively
CUBLAS_DETERMINISTIC = ":4096:8"  # CUBLAS_WORKSPACE_CONFIG for deterministic cuBLAS (PyTorch's reproducibility notes)


class BatchSampler:
    """Minibatch indices per member: with replacement, or epochs of a fresh permutation. State is checkpointable."""

    def __init__(self, n: int, batch_size: int | None, sampling: str, seeds: Sequence[int]):
        self.n, self.batch_size, self.sampling = n, batch_size, sampling
        self.generators = [torch.Generator().manual_seed(int(s) + DATA_SEED_OFFSET) for s in seeds]
        self.perms: list[torch.Tensor | None] = [None] * len(seeds)
        self.positions = [0] * len(seeds)

    def next(self) -> torch.Tensor | None:
        """(K, B) indices, or None for full batch."""
        if self.batch_size is None or self.batch_size >= self.n and self.sampling == "epoch":
            return None
        rows = []
        for k, g in enumerate(self.generators):
            if self.sampling == "with_replacement":
                rows.append(torch.randint(0, self.n, (self.batch_size,), generator=g))
                continue
            take: list[torch.Tensor] = []
            need = self.batch_size
            while need > 0:
                if self.perms[k] is None or self.positions[k] >= self.n:
                    self.perms[k] = torch.randperm(self.n, generator=g)
                    self.positions[k] = 0
                chunk = self.perms[k][self.positions[k]:self.positions[k] + need]
                self.positions[k] += len(chunk)
                need -= len(chunk)
                take.append(chunk)
            rows.append(torch.cat(take))
        return torch.stack(rows)

    def state_dict(self) -> dict:
        return {"generators": [g.get_state() for g in self.generators], "perms": self.perms,
                "positions": list(self.positions)}

    def load_state_dict(self, state: dict) -> None:
        for g, s in zip(self.generators, state["generators"]):
            g.set_state(s)
        self.perms, self.positions = list(state["perms"]), list(state["positions"])


class LossWatch:
    """The running minimum and first value of each member's logged training loss, what `blew_up` compares a new
    one with. Built from the rows logged so far, so a resumed run flags exactly what an unkilled one does."""

    def __init__(self, rows: Sequence[Sequence[dict]], device: torch.device):
        losses = [[row["train_loss"] for row in member] for member in rows]
        self.n_logged = max((len(member) for member in losses), default=0)
        self.first = torch.tensor([m[0] if m else float("nan") for m in losses], dtype=torch.float64, device=device)
        # NaN losses are left out of the minimum, here as in `add` (fmin), so a resumed run keeps the same one
        self.floor = torch.tensor([min((x for x in m if x == x), default=float("inf")) for m in losses],
                                  dtype=torch.float64, device=device)

    def blew_up(self, loss: torch.Tensor) -> torch.Tensor:
        """(K,) bool: which members' logged training loss `loss` (K,) is a finite blow-up."""
        return blew_up(loss, self.floor, self.first, self.n_logged)

    def add(self, loss: torch.Tensor) -> None:
        if self.n_logged == 0:
            self.first = loss.clone()
        self.floor = torch.fmin(self.floor, loss)
        self.n_logged += 1


def checkpoint_interval(write_s: float) -> float:
    """Seconds between time-based checkpoints whose write takes `write_s` (see CHECKPOINT_WRITE_SHARE)."""
    return min(CHECKPOINT_MAX_INTERVAL_S, max(CHECKPOINT_MIN_INTERVAL_S, write_s / CHECKPOINT_WRITE_SHARE))


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor in `value` (tensors, and lists, tuples and dicts of them)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


MEMBER_TENSORS = ("params", "buffers", "optimizer", "diverged_at")  # state whose tensors all lead with the member dim
PER_MEMBER_LISTS = ("rows",)  # state that is a list with one entry per member (and the sampler's lists)


def _member_rows(value: Any, members: Sequence[int], k_members: int) -> Any:
    """`value` with every tensor in it cut to the rows `members` of its member dimension (the first, of size
    `k_members`; a copy: a saved view would carry its whole storage); lists, tuples and dicts element by element;
    anything else (a step count) as it is."""
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 or value.shape[0] != k_members:
            raise ValueError(f"a training-state tensor of shape {tuple(value.shape)} has no member dimension of "
                             f"{k_members}: it cannot be split into members' checkpoints")
        return value[list(members)]
    if isinstance(value, (list, tuple)):
        return type(value)(_member_rows(v, members, k_members) for v in value)
    if isinstance(value, dict):
        return {name: _member_rows(v, members, k_members) for name, v in value.items()}
    return value


def _joined_rows(parts: Sequence[Any]) -> Any:
    """The inverse of `_member_rows` over parts in member order: tensors concatenated along the member dimension; a
    value without one (a step count, None) must be equal in every part."""
    first = parts[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(list(parts))
    if isinstance(first, (list, tuple)):
        return type(first)(_joined_rows(list(items)) for items in zip(*parts))
    if isinstance(first, dict):
        return {name: _joined_rows([p[name] for p in parts]) for name in first}
    if any(p != first for p in parts):
        raise ValueError(f"members' checkpoints disagree on a shared value: {parts!r}")
    return first


def member_part(state: dict, members: Sequence[int]) -> dict:
    """The part of a batch's training state that belongs to `members` (positions in the batch): what a batch of just
    those members would have saved."""
    part = {name: _member_rows(state[name], members, len(state["rows"])) for name in MEMBER_TENSORS}
    part["sampler"] = {name: [values[k] for k in members] for name, values in state["sampler"].items()}
    part.update({name: [state[name][k] for k in members] for name in PER_MEMBER_LISTS})
    part.update(step=state["step"], elapsed=state["elapsed"])
    return part


def joined_parts(parts: Sequence[dict]) -> dict:
    """One batch's training state from its members' parts (`member_part`), in order; all at the same step."""
    state = {name: _joined_rows([p[name] for p in parts]) for name in MEMBER_TENSORS}
    state["sampler"] = {name: [v for p in parts for v in p["sampler"][name]] for name in parts[0]["sampler"]}
    state.update({name: [v for p in parts for v in p[name]] for name in PER_MEMBER_LISTS})
    state.update(step=parts[0]["step"], elapsed=max(p["elapsed"] for p in parts))
    return state


def checkpoint_parts(checkpoint_path: CheckpointPaths, k_members: int) -> list[tuple[Path, list[int]]]:
    """(file, the batch positions it holds) for every checkpoint file of a batch: one path holds all K members, a
    sequence of K paths one member each."""
    if checkpoint_path is None:
        return []
    if isinstance(checkpoint_path, (str, os.PathLike)):
        return [(Path(checkpoint_path), list(range(k_members)))]
    paths = [Path(p) for p in checkpoint_path]
    if len(paths) != k_members:
        raise ValueError(f"need one checkpoint path per member ({k_members}); got {len(paths)}")
    return [(path, [k]) for k, path in enumerate(paths)]


def save_state(state: dict, parts: Sequence[tuple[Path, list[int]]]) -> None:
    """Write each file of `parts` with its members' part of `state` (tensors copied to the host once, then cut)."""
    host = {name: _on_host(value) if name in MEMBER_TENSORS else value for name, value in state.items()}
    for path, members in parts:
        save_checkpoint(member_part(host, members), path)


def _on_host(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(_on_host(v) for v in value)
    if isinstance(value, dict):
        return {name: _on_host(v) for name, v in value.items()}
    return value


def load_state(parts: Sequence[tuple[Path, list[int]]], device: torch.device) -> dict | None:
    """The batch's training state joined from its files (`joined_parts`), or None to start from step 0: when no file
    exists, or (with a warning) when the files are not all of the same step or do not hold their members."""
    loaded = [load_checkpoint(path, map_location=device) for path, _ in parts]
    if not loaded or all(state is None for state in loaded):
        return None
    for state, (_, members) in zip(loaded, parts):
        if state is not None and "diverged_at" not in state:  # an older checkpoint: nobody had diverged
            state["diverged_at"] = torch.full((len(members),), -1, dtype=torch.int64, device=device)
    steps = [state["step"] if state is not None else 0 for state in loaded]
    fits = all(state is not None and len(state["rows"]) == len(members) for state, (_, members) in zip(loaded, parts))
    if len(set(steps)) > 1 or not fits:
        warnings.warn(f"the checkpoints of this batch's members are at different steps ({sorted(set(steps))}) or do "
                      f"not hold one member each; training them from step 0 (the sweep trains members of different "
                      f"steps in separate calls)", stacklevel=3)
        return None
    return joined_parts(loaded)


def is_convolutional(model: nn.Module) -> bool:
    """Whether `model` has a convolution: a parameter of at least 4 dimensions (member, out, in, kernel ...), as every
    model here is member-batched (a linear layer's weight has 3)."""
    return any(p.dim() >= 4 for p in model.parameters())


@contextlib.contextmanager
def backend_flags(model: nn.Module, device_type: str) -> Iterator[bool]:
    """The backend switches of a training run (see the module docstring), restored on exit; yields whether the
    deterministic mode ($NHT_DETERMINISTIC=1) is on."""
    deterministic = deterministic_mode()
    autotune = device_type == "cuda" and is_convolutional(model)
    cudnn = torch.backends.cudnn
    saved = (cudnn.benchmark, cudnn.deterministic, torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        if deterministic:
            # cuBLAS reads it when it first makes a workspace: it stays set for the rest of the process
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
            # warn_only: an op without a deterministic CUDA kernel (torch lists them) warns by name, not fails hours in
            torch.use_deterministic_algorithms(True, warn_only=True)
            cudnn.deterministic, cudnn.benchmark = True, False
        elif autotune:  # convolutions of fixed shapes: autotuning pays after the first steps
            cudnn.benchmark = True
        yield deterministic
    finally:
        cudnn.benchmark, cudnn.deterministic = saved[0], saved[1]
        torch.use_deterministic_algorithms(saved[2], warn_only=saved[3])


def indices_to(idx: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Indices on `device` without blocking the host: a CPU tensor bound for CUDA is pinned first, so the copy is
    asynchronous (the pinned block is not reused before the copy has run)."""
    if idx.device == device:
        return idx
    if device.type == "cuda" and idx.device.type == "cpu":
        idx = idx.pin_memory()
    return idx.to(device, non_blocking=True)


def select(split: Split, idx: torch.Tensor | None, k_members: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (K, B, ...) and labels (K, B) for the given per-member indices (None = the whole split), decoded on
    the split's device (`Split.take`). CPU indices reach the device asynchronously (`indices_to`)."""
    return split.take(None if idx is None else indices_to(idx, split.x.device), k_members)


def first_examples(split: Split, n: int) -> Split:
    """The first n examples of a split (all of them if it has fewer; `Split.head`)."""
    return split.head(n)


@torch.no_grad()
def evaluate(model: nn.Module, split: Split, k_members: int, batch_size: int,
             precision: str = "fp32") -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss and accuracy per member, each (K,) float64, on a whole split, in chunks of batch_size examples;
    the forward passes at `precision` (see `nhtlib.engine.precision`), the loss in fp32."""
    n = split.size
    loss_sum = torch.zeros(k_members, dtype=torch.float64, device=split.y.device)
    correct = torch.zeros(k_members, dtype=torch.float64, device=split.y.device)
    for start in range(0, n, batch_size):
        idx = torch.arange(start, min(start + batch_size, n), device=split.y.device)
        x, y = select(split, idx.expand(k_members, -1), k_members) if split.per_member else select(split, idx, 0)
        if not split.per_member:
            x = x.unsqueeze(0).expand(k_members, *x.shape)
            y = y.unsqueeze(0).expand(k_members, *y.shape)
        with precision_context(precision, split.y.device.type):
            logits = model(x)
        loss_sum += member_loss(logits, y).double() * len(idx)
        correct += (logits.argmax(-1) == y).double().sum(1)
    return loss_sum / n, correct / n


def train(model: nn.Module, data: Dataset, cfg: TrainConfig, *, seeds: Sequence[int],
          lrs: Sequence[float] | None = None, weight_decays: Sequence[float] | None = None,
          checkpoint_path: CheckpointPaths = None, checkpoint_seconds: float | None = None,
          extra_metrics: ExtraMetrics | None = None, progress: bool = True,
          desc: str = "training") -> list[pd.DataFrame]:
    """Train the K members of `model` on `data`; return one table per member.

    lrs / weight_decays: one value per member (default: cfg.lr / cfg.weight_decay for all). extra_metrics:
    fn(model, data) -> {name: (K,) tensor}, called at every log step in plain fp32 (outside autocast, TF32 off)
    whatever cfg.precision. cfg.precision sets the forward passes' precision (`nhtlib.engine.precision`); cfg.compile
    compiles the training forward. checkpoint_path: one file for the whole batch, or K files, one per member (each
    resumable by a batch of any composition); checkpoint_seconds: a fixed interval between time-based checkpoints
    instead of `checkpoint_interval`'s.
    Columns of each table: step, lr_now (scheduled lr), <split>_loss, <split>_acc for every split, norm_sq,
    norm_sq:<layer>, extra metrics, wall_s, diverged_step (the first step with a non-finite training loss or norm,
    or the log step where the training loss blew up; NaN unless the member diverged, in which case its rows stop at
    the last sound log step; a member that is not finite at initialisation keeps its step-0 row).
    """
    k_members = len(seeds)
    device = next(model.parameters()).device
    lrs_t = torch.tensor(list(lrs) if lrs is not None else [cfg.lr] * k_members, dtype=torch.float64, device=device)
    wds_t = torch.tensor(list(weight_decays) if weight_decays is not None else [cfg.weight_decay] * k_members,
                         dtype=torch.float64, device=device)
    if len(lrs_t) != k_members or len(wds_t) != k_members:
        raise ValueError(f"need one lr and one weight decay per member ({k_members}); "
                         f"got {len(lrs_t)} and {len(wds_t)}")
    optimizer = make_optimizer(model, cfg, lrs_t, wds_t)
    train_split = data.splits["train"]
    sampler = BatchSampler(train_split.size, cfg.batch_size, cfg.sampling, seeds)
    log_steps = cfg.log_steps()
    rows: list[list[dict]] = [[] for _ in range(k_members)]
    start_step, elapsed_before = 0, 0.0

    # diverged_at: first step with a non-finite loss or norm, per member (-1 = finite so far); kept on the device
    diverged_at = torch.full((k_members,), -1, dtype=torch.int64, device=device)

    parts = checkpoint_parts(checkpoint_path, k_members)
    state = load_state(parts, device)
    if state is not None:
        with torch.no_grad():
            for p, saved in zip(model.parameters(), state["params"]):
                p.copy_(saved)
            for b, saved in zip(model.buffers(), state["buffers"]):  # e.g. BatchNorm running statistics
                b.copy_(saved)
        optimizer.load_state_dict(state["optimizer"])
        sampler.load_state_dict(state["sampler"])
        rows, start_step, elapsed_before = state["rows"], state["step"], state["elapsed"]
        diverged_at.copy_(state["diverged_at"])
    losses = LossWatch(rows, device)  # after a resume: rebuilt from the rows logged before the kill

    def log(step: int, elapsed: float) -> list[bool]:
        """Evaluate, log one row per sound member; returns which members have diverged (read on the host)."""
        model.eval()
        values: dict[str, torch.Tensor] = {}
        for name, split in data.splits.items():
            if name == "train" and cfg.train_eval_size is not None:
                split = first_examples(split, cfg.train_eval_size)
            values[f"{name}_loss"], values[f"{name}_acc"] = evaluate(model, split, k_members, cfg.eval_batch_size,
                                                                     cfg.precision)
        values.update(norm_columns(layer_squared_norms(model.named_parameters(), member_dim=True)))
        if extra_metrics is not None:
            with precision_context("fp32", device.type):  # extra metrics are always plain fp32
                values.update(extra_metrics(model, data))
        model.train()
        # a non-finite norm or a blow-up of the logged loss diverges the member at this log step (if its loss had
        # not already)
        train_loss = values["train_loss"].to(device)
        newly = (diverged_at < 0) & (~torch.isfinite(values["norm_sq"]).to(device) | losses.blew_up(train_loss))
        diverged_at.masked_fill_(newly, step)
        losses.add(train_loss)
        # one transfer to the host for the whole row set: every value (K,), the lrs and the diverged flags, as float64
        # (exact for fp32 values, bools and the step counts logged here)
        stacked = [v.detach().to(device=device, dtype=torch.float64).reshape(k_members) for v in values.values()]
        host = torch.stack([*stacked, lrs_t, (diverged_at >= 0).double()]).cpu().tolist()
        *columns, lrs_now, dead = host
        factor = lr_factor(cfg.lr_schedule, min(step, cfg.steps - 1), cfg.steps)
        for k in range(k_members):
            if dead[k] and rows[k]:  # rows stop at the last sound log: NaN logits still "predict" class 0
                continue
            row = {"step": step, "lr_now": lrs_now[k] * factor}
            row.update({name: column[k] for name, column in zip(values, columns)})
            row["wall_s"] = elapsed
            rows[k].append(row)
        return [bool(d) for d in dead]

    def save(done: int) -> float:
        """Write the checkpoint of step `done`; returns the seconds it took."""
        began = time.perf_counter()
        save_state({"params": list(model.parameters()), "buffers": list(model.buffers()),
                    "optimizer": optimizer.state_dict(), "sampler": sampler.state_dict(), "rows": rows,
                    "step": done, "elapsed": time.perf_counter() - t0, "diverged_at": diverged_at}, parts)
        return time.perf_counter() - began

    step_model = torch.compile(model) if cfg.compile else model  # the training forward only: evaluation stays eager
    t0 = time.perf_counter() - elapsed_before
    last_save = time.perf_counter()
    # before the first write its duration is estimated from the checkpoint's size
    interval = checkpoint_seconds if checkpoint_seconds is not None else checkpoint_interval(
        tensor_bytes([list(model.parameters()), list(model.buffers()), optimizer.state_dict()]) / ASSUMED_WRITE_RATE)
    next_logs = [s for s in log_steps if s >= start_step]
    bar = tqdm(total=cfg.steps, initial=start_step, desc=desc, disable=not progress, leave=False, mininterval=5.0)
    # the TF32 flags of cfg.precision and the backend switches hold for the whole run; restored on return
    with tf32_flags(cfg.precision == "tf32"), backend_flags(model, device.type), contextlib.closing(bar):
        if start_step == 0 and (not rows[0] or rows[0][-1]["step"] != 0):
            log(0, 0.0)
        model.train()
        for step in range(start_step, cfg.steps):
            idx = sampler.next()
            x, y = select(train_split, idx, k_members)

            def still_alive(losses: torch.Tensor, step: int = step) -> torch.Tensor:
                diverged_at.masked_fill_((diverged_at < 0) & ~torch.isfinite(losses), step)
                return diverged_at < 0

            loss = training_step(step_model, optimizer, x, y, precision=cfg.precision, device_type=device.type,
                                 lr_factor=lr_factor(cfg.lr_schedule, step, cfg.steps), keep=still_alive)
            done = step + 1
            bar.update(1)
            if done not in next_logs:
                continue
            # a log step: the only place the host reads device values
            n_alive = k_members - sum(log(done, time.perf_counter() - t0))
            if progress:
                bar.set_postfix(loss=f"{loss.item() / max(1, n_alive):.3g}")
            if n_alive == 0:  # every member diverged: nothing left to train
                break
            due = cfg.checkpoint_every and done % cfg.checkpoint_every == 0
            if parts and done < cfg.steps and (due or time.perf_counter() - last_save >= interval):
                took = save(done)
                last_save = time.perf_counter()
                if checkpoint_seconds is None:
                    interval = checkpoint_interval(took)
    diverged = [float(d) if d >= 0 else float("nan") for d in diverged_at.tolist()]
    return [pd.DataFrame(r).assign(diverged_step=d) for r, d in zip(rows, diverged)]
