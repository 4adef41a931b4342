"""Runs and sweeps: configure members, train the missing ones batched, read everything else from the cache.

A `RunConfig` fully determines one member's result (task, model, training, seed). `run(configs)` looks every
member up in the run cache; the missing ones are grouped into batches of members that differ only in seed, lr and
weight decay (the batched loop trains them together, each with its own values), trained with checkpoints, stored
member by member, and everything is returned as one tidy table with the varying config fields as columns.

A member's cache key is its config, the hash of the code the run executes (`nhtlib.engine.source`: the training
code's import closure and the logged metrics' module, never a plot, a rule or a page), and the fingerprint of the data files its task reads
(`TaskConfig.data_fingerprint`): a run trained on one copy of a data set is never served for another. Before anything
is trained the cache is checked to be writable, so a read-only cache fails in seconds, not after hours of training.
Members that diverge (non-finite loss or norm, or a blow-up of the loss: `nhtlib.analysis.divergence`) are stored as
diverged (`diverged_step`) and reported.

Robust on a GPU: a sweep told its scale (`Sweep.scale`, set by `nhtlib.chapters.base.Chapter.sweeps`) refuses to
train scale="paper" on a CPU (`nhtlib.config.check_scale_device`). Every member checkpoints under its own key
(`nhtlib.engine.cache.member_checkpoint_key`), so the members per call may change between runs: an out of memory
during a batched call (`is_out_of_memory`) halves the members per call (down to 1), then the evaluation batch, and
trains again from the members' checkpoints. Members whose checkpoints are at different steps train in separate
calls. Each member's metadata records whether it ran in the deterministic mode ($NHT_DETERMINISTIC, not part of its
key).
"""
from __future__ import annotations

import gc
import itertools
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pandas as pd
import torch

from nhtlib.engine import memory
from nhtlib.engine.cache import RunCache, checkpoint_step, run_key
from nhtlib.engine.source import run_source_hash
from nhtlib.config import (Config, ConfigError, TrainConfig, check_range, check_scale_device, deterministic_mode, flatten,
                            resolve_device, stable_hash)
from nhtlib.data import TaskConfig, stack_members
from nhtlib.models.base import ModelConfig
from nhtlib.analysis.divergence import diverged_step
from nhtlib.engine.train import ExtraMetrics, train


DECODE_UP_FRONT_BYTES = 10 ** 9  # image data whose floats fit in this are decoded once, not at every step


@dataclass(frozen=True)
class RunConfig(Config):
    task: TaskConfig
    model: ModelConfig
    train: TrainConfig
    seed: int = 0

    def validate(self) -> None:
        for name, kind in (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a {kind.__name__}")
        check_range("seed", self.seed, 0, None, integer=True)

    def batch_signature(self) -> str:
        """Members with equal signatures can be trained in one batch: they differ in seed, lr, weight decay and the
        model's init-only fields (`ModelConfig.INIT_ONLY`, e.g. the MLP's output_init_scale) only."""
        d = self.to_dict()
        d.pop("seed")
        d["model"] = self.model.batch_identity()
        d["train"] = {k: v for k, v in d["train"].items() if k not in ("lr", "weight_decay")}
        return stable_hash(d)


@dataclass(frozen=True)
class Sweep:
    """One named experiment of a chapter: the members it trains and what is logged besides the defaults. A chapter
    declares its sweeps once (``nhtlib.chapters.<chapter>.CHAPTER``); its run and the compute planner both read them, so
    the plan is of what will run.

    probe_examples: examples the extra metrics read at each log step (their forward passes are the planner's cost).
    scale: the scale of the chapter that declares it (`Chapter.sweeps` sets it; None: not told), which `run` checks
    before training (`nhtlib.config.check_scale_device`).
    """

    name: str  # the progress bar's label and the planner's row
    configs: tuple[RunConfig, ...]
    extra_metrics: ExtraMetrics | None = None
    extra_metrics_key: str | None = None
    probe_examples: int = 0
    scale: str | None = None

    def member_keys(self) -> list[str]:
        """The distinct run-cache keys of the sweep's members (first-seen order)."""
        return list(dict.fromkeys(member_keys(self.configs, metrics_identity(self.extra_metrics, self.extra_metrics_key),
                                              source=run_code(self.extra_metrics))))

    def cached(self, cache: RunCache | None = None) -> tuple[int, int]:
        """(distinct members, how many of them are in the run cache now): what a run would read, not train."""
        cache = cache or RunCache()
        keys = self.member_keys()
        return len(keys), sum(cache.meta(key) is not None for key in keys)

    def run(self, *, device: str = "auto", progress: bool = True, cache: RunCache | None = None) -> pd.DataFrame:
        """Every member's table, trained or read from the cache (`run`)."""
        return run(list(self.configs), device=device, cache=cache, progress=progress, desc=self.name,
                   extra_metrics=self.extra_metrics, extra_metrics_key=self.extra_metrics_key, scale=self.scale)


def grid(base: RunConfig, *, seeds: Iterable[int] = (0,), lrs: Iterable[float] | None = None,
         weight_decays: Iterable[float] | None = None, **task_or_model: Iterable[Any]) -> list[RunConfig]:
    """Cartesian product of configs: seeds x lrs x weight decays x any task/model field given as a list,
    e.g. grid(base, seeds=range(3), weight_decays=[0.1, 1.0], output_init_scale=[10, 100])."""
    axes: dict[str, list[Any]] = {"seed": list(seeds)}
    axes["lr"] = list(lrs) if lrs is not None else [base.train.lr]
    axes["weight_decay"] = list(weight_decays) if weight_decays is not None else [base.train.weight_decay]
    for name, values in task_or_model.items():
        axes[name] = list(values)
    out = []
    for combo in itertools.product(*axes.values()):
        values = dict(zip(axes, combo))
        task, model = base.task, base.model
        for name in task_or_model:
            if hasattr(task, name):
                task = task.replace(**{name: values[name]})
            elif hasattr(model, name):
                model = model.replace(**{name: values[name]})
            else:
                raise ConfigError(f"sweep axis {name!r} is neither a field of {type(task).__name__} nor of "
                                  f"{type(model).__name__}")
        train_cfg = base.train.replace(lr=values["lr"], weight_decay=values["weight_decay"])
        out.append(RunConfig(task, model, train_cfg, seed=values["seed"]))
    return out


def varying_columns(configs: Sequence[RunConfig]) -> pd.DataFrame:
    """One row per config with the fields that differ between configs (leaf names when unambiguous)."""
    flat = [flatten(c.to_dict()) for c in configs]
    keys = [k for k in flat[0] if not k.endswith("kind") and len({str(f.get(k)) for f in flat}) > 1]
    for must in ("seed", "train.lr", "train.weight_decay"):
        if must not in keys:
            keys.append(must)
    leaves = [k.rsplit(".", 1)[-1] for k in keys]
    names = [leaf if leaves.count(leaf) == 1 else k for k, leaf in zip(keys, leaves)]
    return pd.DataFrame([{n: f.get(k) for n, k in zip(names, keys)} for f in flat])


def member_key(config: RunConfig, data_fingerprint: str | None, extra_metrics_key: str | None = None,
               source: str | None = None) -> str:
    """The run-cache key of one member: its config, the fingerprint of the data its task reads
    (`TaskConfig.data_fingerprint`, None for generated data), the identity of its extra metrics, and (through
    `run_key`) nhtlib's version and `source`, the hash of the code the run executes (default: the training code's,
    `run_code`)."""
    identity = {**config.to_dict(), "data": data_fingerprint}
    if extra_metrics_key:
        identity["extra_metrics"] = extra_metrics_key
    return run_key(identity, source)


def run_code(extra_metrics: ExtraMetrics | None = None) -> str:
    """The hash of the code a run executes (`nhtlib.engine.source.run_source_hash`): the training code's import
    closure and, for extra metrics defined in nhtlib, their module's."""
    module = getattr(extra_metrics, "__module__", None) or ""
    return run_source_hash((module,) if module.startswith("nhtlib.") else ())


def data_identity(task: TaskConfig) -> tuple[str, str]:
    """What tells two data copies apart: the task's digest and its data_root (which the digest leaves out, while the
    files there are part of a run's identity)."""
    return task.digest(), str(getattr(task, "data_root", None))


def data_fingerprints(configs: Sequence[RunConfig]) -> dict[tuple[str, str], str | None]:
    """One data fingerprint (`TaskConfig.data_fingerprint`) per distinct task and data copy among `configs`, keyed
    by `data_identity` (data_root is not in the task's digest, but its files are)."""
    fingerprints: dict[tuple[str, str], str | None] = {}
    for c in configs:
        if data_identity(c.task) not in fingerprints:
            fingerprints[data_identity(c.task)] = c.task.data_fingerprint()
    return fingerprints


def metrics_identity(extra_metrics: ExtraMetrics | None, extra_metrics_key: str | None = None) -> str | None:
    """What names a run's extra metrics in its cache key: `extra_metrics_key`, else the function's module and
    qualified name (None without extra metrics)."""
    if extra_metrics is None:
        return None
    return extra_metrics_key or f"{extra_metrics.__module__}.{extra_metrics.__qualname__}"


def member_keys(configs: Sequence[RunConfig], metrics_id: str | None = None,
                fingerprints: dict[tuple[str, str], str | None] | None = None, source: str | None = None) -> list[str]:
    """The run-cache key of every config (`member_key`), in order; `fingerprints` as from `data_fingerprints`
    (computed when not given); `source` as from `run_code` (the training code's when not given)."""
    fingerprints = fingerprints if fingerprints is not None else data_fingerprints(configs)
    return [member_key(c, fingerprints[data_identity(c.task)], metrics_id, source) for c in configs]


def batch_groups(configs: Sequence[RunConfig]) -> list[list[int]]:
    """Positions in `configs` of the members trained together (equal `RunConfig.batch_signature`: they differ in
    seed, lr, weight decay and the model's init-only fields only), groups in first-seen order. The run and the
    compute planner both group so."""
    groups: dict[str, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(config.batch_signature(), []).append(i)
    return list(groups.values())


def run(configs: Sequence[RunConfig], *, device: str = "auto", cache: RunCache | None = None,
        max_members: int = 256, progress: bool = True, extra_metrics: ExtraMetrics | None = None,
        extra_metrics_key: str | None = None, desc: str = "training", scale: str | None = None) -> pd.DataFrame:
    """Results of every config (cached or freshly trained) as one table: a `run` column (index into configs),
    the varying config fields, and the logged metrics.

    extra_metrics: fn(model, data) -> {name: tensor (K,)} logged at every log step. Its identity is part of the cache
    key: by default the function's module and qualified name; pass `extra_metrics_key` when the same function is used
    with different settings (e.g. a closure over a probe set). scale: the chapter's scale, when known: with anything
    to train, scale="paper" refuses a CPU (`nhtlib.config.check_scale_device`; reading the cache needs no GPU).
    """
    if not configs:
        raise ValueError("run() needs at least one RunConfig")
    cache = cache or RunCache()
    asked, device = device, resolve_device(device)
    fingerprints = data_fingerprints(configs)
    source = run_code(extra_metrics)
    keys = member_keys(configs, metrics_identity(extra_metrics, extra_metrics_key), fingerprints, source)
    tables: dict[str, pd.DataFrame] = {}
    todo: list[int] = []  # indices of the configs to train (one per distinct key)
    queued: set[str] = set()
    for i, key in enumerate(keys):
        if key in tables or key in queued:
            continue
        cached = cache.load(key)
        if cached is not None:
            tables[key] = cached
        else:
            queued.add(key)
            todo.append(i)
    if todo:
        if scale is not None:
            check_scale_device(scale, asked)  # before anything is trained
        cache.check_writable()  # fail now, not after the training
    for group in batch_groups([configs[i] for i in todo]):
        indices = [todo[j] for j in group]
        per_call, eval_batch = _fitted([configs[i] for i in indices], device, max_members)
        eval_batch = eval_batch if eval_batch is not None else configs[indices[0]].train.eval_batch_size
        steps = {i: checkpoint_step(cache.member_checkpoint_path(keys[i])) for i in indices}
        pending = list(indices)
        while pending:
            chunk = next_chunk(pending, steps, per_call)
            try:
                trained = _train_batch([configs[i] for i in chunk], [keys[i] for i in chunk], cache, device, progress,
                                       extra_metrics, desc, fingerprints[data_identity(configs[chunk[0]].task)],
                                       eval_batch)
            except Exception as err:  # noqa: BLE001 - only an out of memory is handled, anything else is raised
                if not is_out_of_memory(err) or (len(chunk) == 1 and eval_batch == 1):  # nothing left to halve
                    raise
                per_call, eval_batch = backed_off(per_call, eval_batch, len(chunk), err)
                trained = None
            if trained is None:  # out of the except block: the failed call's tensors are unreachable now
                release_memory(device)
                steps.update({i: checkpoint_step(cache.member_checkpoint_path(keys[i])) for i in chunk})
                continue
            for i in chunk:
                # read back what was stored (the same dtypes as any later cache hit); another process training the
                # same member may have stored its own equal table meanwhile, which is as good
                stored = cache.load(keys[i])
                tables[keys[i]] = stored if stored is not None else trained[keys[i]]
            pending = [i for i in pending if i not in chunk]
    columns = varying_columns(configs)
    frames = []
    for i, key in enumerate(keys):
        table = tables[key].copy()
        for name, value in columns.iloc[i].items():
            table.insert(0, name, value)
        table.insert(0, "run", i)
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def next_chunk(pending: Sequence[int], steps: dict[int, int], per_call: int) -> list[int]:
    """The members of the next batched call: up to `per_call` of `pending`, all resuming from the same step (their
    checkpoints' `steps`, 0 without one; the most advanced first): one call trains its members in lockstep."""
    order = sorted(pending, key=lambda i: -steps[i])  # stable: otherwise in the configs' order
    return [i for i in order if steps[i] == steps[order[0]]][:per_call]


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` says the device ran out of memory during a call: CUDA's OutOfMemoryError, a RuntimeError that
    says "out of memory" (cuDNN, cuBLAS, other backends), a MemoryError on the CPU; not the planner's refusal
    (`memory.MemoryPlanError`: one member does not fit, which no back-off mends)."""
    if isinstance(err, memory.MemoryPlanError):
        return False
    if isinstance(err, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err).lower()


def backed_off(per_call: int, eval_batch: int, tried: int, err: BaseException) -> tuple[int, int]:
    """(members per call, evaluation batch) after an out of memory in a call of `tried` members: half the members
    (down to 1), then half the evaluation batch (down to 1); warns what it does."""
    if tried > 1:
        per_call = max(1, min(per_call, tried) // 2)
    else:
        eval_batch = max(1, eval_batch // 2)
    warnings.warn(f"out of memory in a call of {tried} members ({type(err).__name__}: {str(err)[:200]}); training "
                  f"again with {per_call} members per call and evaluation batches of {eval_batch}, from the members' "
                  "checkpoints", stacklevel=3)
    return per_call, eval_batch


def release_memory(device: str) -> None:
    """Return what a failed call held to the device before the next one. Its tensors were freed as it unwound
    (reference counting), which is all the CPU needs; on CUDA a collection also frees any held in reference cycles
    (about a second, once per out of memory), then the caching allocator gives its blocks back."""
    if device.startswith("cuda"):
        gc.collect()
        torch.cuda.empty_cache()


def _fitted(configs: list[RunConfig], device: str, max_members: int) -> tuple[int, int | None]:
    """(members per batched call, evaluation batch size or None) for members that train together: what fits the
    device's memory by the compute planner (`nhtlib.engine.memory.fit_members`, which refuses before training when one
    member does not fit), or max_members and the config's evaluation batch for tasks the planner cannot lay out."""
    fitted = memory.fit_members(configs, device, max_members)
    return fitted if fitted is not None else (max_members, None)


def _train_batch(configs: list[RunConfig], keys: list[str], cache: RunCache, device: str, progress: bool,
                 extra_metrics: ExtraMetrics | None, desc: str, fingerprint: str | None,
                 eval_batch_size: int | None = None) -> dict[str, pd.DataFrame]:
    """Train one batch of members (they read the same data, whose `fingerprint` their metadata records), store each
    in the cache, return {key: table}. eval_batch_size: the planner's evaluation batch (not part of any result)."""
    first = configs[0]
    if eval_batch_size is not None and eval_batch_size != first.train.eval_batch_size:
        first = first.replace(train=first.train.replace(eval_batch_size=eval_batch_size))
    seeds = [c.seed for c in configs]
    data = stack_members([c.task.build(c.seed) for c in configs]).to(device).decoded_if_small(DECODE_UP_FRONT_BYTES)
    model = first.model.build_members(data.input_shape, data.n_classes, [(c.model, c.seed) for c in configs]).to(device)
    checkpoints = [cache.member_checkpoint_path(key) for key in keys]  # one per member: any chunking resumes them
    started = time.perf_counter()
    tables = train(model, data, first.train, seeds=seeds, lrs=[c.train.lr for c in configs],
                   weight_decays=[c.train.weight_decay for c in configs], checkpoint_path=checkpoints,
                   extra_metrics=extra_metrics, progress=progress, desc=f"{desc} ({len(configs)} members)")
    wall = time.perf_counter() - started
    steps = [diverged_step(table) for table in tables]  # NaN for a member that did not diverge
    for config, key, table, step in zip(configs, keys, tables, steps):
        cache.save(key, table, config.to_dict(), device=str(device), wall_time_s=wall,
                   extra={"batch_members": len(configs), "data_fingerprint": fingerprint,
                          "nhtlib_source_hash": run_code(extra_metrics), "deterministic": deterministic_mode(),
                          "diverged_step": None if math.isnan(step) else int(step)})
    diverged = [(c, step) for c, step in zip(configs, steps) if not math.isnan(step)]
    if diverged:
        listed = ", ".join(f"seed {c.seed} lr {c.train.lr:g} wd {c.train.weight_decay:g} at step {int(d)}"
                           for c, d in diverged[:5])
        warnings.warn(f"{len(diverged)} of {len(configs)} members diverged (non-finite loss or norm, or a loss "
                      f"blow-up) and are recorded as diverged, not as results: {listed}"
                      f"{' ...' if len(diverged) > 5 else ''}", stacklevel=3)
    for checkpoint in checkpoints:
        checkpoint.unlink(missing_ok=True)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return dict(zip(keys, tables))
