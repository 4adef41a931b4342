"""The prepared GPU check: what the book's workloads achieve on a device, per precision, and whether NSDL's grokking
run reproduces there — one command, at most 8 minutes on an NVIDIA H200 (`--budget-s`, default 420 s), one JSON
record that the compute planner reads (`nhtlib.engine.plan.measured_rates`).

    python benchmarks/gpu_check.py                   # on the lent GPU: benchmarks/records/gpu_check-h200-<time>.json
    python benchmarks/gpu_check.py --out "$OUT"      # on a copied tree: write the record where it comes back
    .venv/bin/python benchmarks/gpu_check.py --tiny --out /tmp/records   # the same code on this CPU, ~30 s

What is measured:

1. **Achieved FLOP/s per chapter and precision.** For every chapter of `nhtlib.chapters.CHAPTERS` at scale "paper" (tiny:
   "smoke") its heaviest batched group — the largest FLOPs per step × members × steps over `nhtlib.engine.plan.groups` of
   all its sweeps (the planner's `StepCost`, shapes from `nhtlib.data.layout`: no data file is read). Its batched
   model is built on the device with K members (all of the group's when `nhtlib.engine.memory.fit` says they fit the free
   device memory; tiny: at most 16) and trained on random inputs of the real shapes by `nhtlib.engine.plan.synthetic_step`
   (the real optimiser with the members' own η and λ, the forward under the precision's autocast, the fp32 loss),
   with the TF32 flags of the precision held for the whole step, as the training loop does. Steps are timed after warm-up between `torch.cuda.synchronize()` calls,
   their number chosen to fill a few seconds (every (chapter, precision) stays under ~15 s).
   Achieved FLOP/s = `cost.step_flops(batch) × K / seconds per step` (matmul / convolution FLOPs, the planner's
   convention; data loading, sampling and evaluation are not in the timed step), and its share of the device's dense
   peak (`nhtlib.engine.plan.H200.peak_flops`; null off an H200). Report ratios (bf16 / fp32, achieved / peak): they are
   what the planner's time estimates rest on.
2. **NSDL Table 2 at λ = 1 on the device.** NSDL's Transformer at its settings (p = 97, AdamW η = 1e-3, batch 512
   with replacement, 10 seeds 42–51 batched, 4,400 steps: T_grok ≈ 1,840 plus NSDL's 2,000-step window, logged every
   200 steps — NSDL's grid) trained by `nhtlib.engine.sweep.run` into a fresh run cache at fp32, then, when the budget
   allows, at the fastest precision of part 1 (the grokking chapter's, whose heaviest group is this Transformer);
   `analyse_nsdl` reads T_mem and T_grok on NSDL's grid, compared with `NSDL_TABLE2` (T_mem ≈ 800, T_grok =
   1,840 ± 215), with the wall time and member-steps/s. Tiny: p = 31, 3 seeds, 800 steps.
3. **The record** `gpu_check-<device>-<UTC time>.json` in `--out` (default benchmarks/records/; tiny mode: a
   temporary folder unless `--out` is given, so that a CPU record never lands where the planner looks): device,
   versions, commit, source hash, `{"rates": {chapter: {precision: FLOP/s}}}`, per-entry details and skip reasons,
   the NSDL comparison, the total wall time. It is written after every chapter and at the end (also on SIGTERM), so
   a killed run still leaves the rates it measured.

The machine: the lent NVIDIA H200 (141 GB, dense peaks 67 / 494.5 / 989.5 TFLOP/s at fp32 / tf32 / bf16, as
`nhtlib.engine.plan.H200` states them); any other CUDA device works, recorded under a slug of its name, without a share of
peak. Not yet run on one: estimated at ≈ 3 minutes (part 1 ≈ 1.5 min, each NSDL run under a minute). Part 1 stops
starting entries when less than 2 minutes of the budget are left, and an NSDL run starts only when its estimate (its
batched step timed on the device × its steps) fits what is left. Tiny mode runs at one torch thread (on a busy shared
CPU two spinning threads were ten times slower).

Every part catches its own failure (out of memory: K is halved and the entry retried) and records it instead of
stopping; progress lines are flushed as they happen; a part that would not finish inside the budget is skipped with
the reason recorded.
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
import torch

try:
    import nhtlib  # noqa: F401 - an editable install (`make venv`)
except ImportError:  # a bare machine (the lent GPU): the checkout itself
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nhtlib.engine import plan  # noqa: E402 - after the path fallback
from nhtlib.engine import memory
from nhtlib.chapters import CHAPTERS  # noqa: E402
from nhtlib.chapters import grokking as grok  # noqa: E402
from nhtlib.engine.cache import RunCache  # noqa: E402
from nhtlib.config import PRECISIONS  # noqa: E402
from nhtlib.data.layout import layout  # noqa: E402
from nhtlib.paths import atomic_write_bytes, git_commit, source_hash  # noqa: E402
from nhtlib.engine.precision import tf32_flags  # noqa: E402
from nhtlib.engine.sweep import run as run_configs  # noqa: E402

NSDL_FIRST_SEED = 42  # NSDL's seeds 42–51
FASTER_BY = 1.05  # a precision is "faster" than fp32 when its rate is at least this many times fp32's


@dataclass(frozen=True)
class Mode:
    """How hard the check works: the GPU run, or the CPU run of the test suite at tiny shapes."""

    name: str
    scale: str  # the chapters' scale of part 1
    member_cap: int | None  # at most this many members per batched group (None: as many as fit)
    warmup_steps: int
    timed_s: float  # the timed window of one (chapter, precision)
    entry_limit_s: float  # one (chapter, precision) never runs longer than this (warm-up included)
    max_steps: int  # timed steps at most
    nsdl: grok.NSDLPreset
    nsdl_reserve_s: float  # part 1 starts no entry once less than this is left of the budget
    second_run_always: bool  # run the second NSDL precision even when it is not faster (tiny: exercise the path)


GPU = Mode("gpu", "paper", None, warmup_steps=3, timed_s=3.0, entry_limit_s=15.0, max_steps=10_000,
           # NSDL Table 2: λ = 1 only, 10 seeds, stopped 2,000 steps after T_grok ≈ 1,840 (4,400 covers the latest
           # seed's 2,200 + 2,000), logged on NSDL's 200-step grid
           nsdl=grok.NSDLPreset(p=97, lr=1e-3, batch_size=512, seeds=10, lambdas=(1.0,), steps_low=4400, steps=4400,
                                log_every=200, paper_grid=200, post_window=2000),
           nsdl_reserve_s=120.0, second_run_always=False)
# the smoke preset's Transformer (p = 31, 5 × η, batch 64) at λ = 1 only: all three seeds grok within 800 steps on
# this CPU (≈ 10 s); the test does not depend on it
TINY = Mode("tiny", "smoke", 16, warmup_steps=1, timed_s=0.15, entry_limit_s=2.0, max_steps=200,
            nsdl=grok.NSDLPreset(p=31, lr=5e-3, batch_size=64, seeds=3, lambdas=(1.0,), steps_low=800, steps=800,
                                 log_every=25, paper_grid=50, post_window=100),
            nsdl_reserve_s=30.0, second_run_always=True)


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


def is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.cuda.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and "out of memory" in str(err).lower())


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------ part 1: rates

def heaviest_group(chapter: str, scale: str, data_root: str | None) -> dict:
    """The chapter's batched group with the most training FLOPs (step × members × steps): its members, sweep,
    `StepCost`, layout and batch. Step costs are measured once per (model, layout)."""
    sweeps = CHAPTERS[chapter].sweeps(scale, data_root)
    sweep_of: dict[str, str] = {}
    for s in sweeps:
        for c in s.configs:
            sweep_of.setdefault(c.digest(), s.name)
    costs: dict[tuple, memory.StepCost] = {}
    best: dict | None = None
    for members in plan.groups([c for s in sweeps for c in s.configs]):
        first = members[0]
        shape = layout(first.task)
        key = (first.model.digest(), shape)
        if key not in costs:
            costs[key] = memory.measure_step(first, shape)
        cost, batch = costs[key], memory.step_batch(first.train, shape)
        total = cost.step_flops(batch) * len(members) * first.train.steps
        if best is None or total > best["train_flops"]:
            best = {"members": members, "sweep": sweep_of[first.digest()], "cost": cost, "shape": shape,
                    "batch": batch, "train_flops": total}
    if best is None:
        raise ValueError(f"{chapter} declares no members at scale {scale!r}")
    return best


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


def members_that_fit(group: dict, device: torch.device, mode: Mode) -> int:
    """All of the group's members when they fit the free memory (`memory.fit`), else as many as do; mode's cap."""
    members = len(group["members"])
    if mode.member_cap is not None:
        return min(members, mode.member_cap)
    free, reserve = memory.device_memory(str(device))
    k, _, _ = memory.fit(group["cost"], group["members"][0].train, group["shape"], members, free, reserve=reserve)
    return k


def measure_chapter(chapter: str, device: torch.device, name: str, mode: Mode, clock: Clock,
                    data_root: str | None, deadline_left: float) -> tuple[dict, dict]:
    """({precision: FLOP/s} measured, details: the group and one entry per precision — numbers or `skipped`)."""
    rates: dict[str, float] = {}
    details: dict = {"precisions": {}}
    try:
        group = heaviest_group(chapter, mode.scale, data_root)
    except Exception as err:  # noqa: BLE001 - recorded, the other chapters go on
        reason = f"planning failed: {short_error(err)}"
        clock.say(f"{chapter}: {reason}")
        details["precisions"] = {p: {"skipped": reason} for p in PRECISIONS}
        return rates, details
    first = group["members"][0]
    details.update({"sweep": group["sweep"], "model": type(first.model).__name__.removesuffix("Config"),
                    "task": type(first.task).__name__, "input_shape": list(group["shape"].input_shape),
                    "group_members": len(group["members"]), "batch": group["batch"], "steps": first.train.steps,
                    "optimizer": first.train.optimizer,
                    "step_flops_per_member": group["cost"].step_flops(group["batch"]),
                    "group_train_flops": group["train_flops"]})
    try:
        k = members_that_fit(group, device, mode)
    except memory.MemoryPlanError as err:
        reason = f"does not fit: {short_error(err)}"
        details["precisions"] = {p: {"skipped": reason} for p in PRECISIONS}
        clock.say(f"{chapter}: {reason}")
        return rates, details
    clock.say(f"{chapter}: {details['sweep']!r}, {details['model']} on {details['task']} "
              f"{tuple(group['shape'].input_shape)}, batch {group['batch']}, {k} of {len(group['members'])} members")
    built, built_k = None, 0
    for precision in PRECISIONS:
        entry: dict = {}
        details["precisions"][precision] = entry
        while True:
            if clock.left < deadline_left:
                entry["skipped"] = f"time budget: {clock.left:.0f} s left of {clock.budget_s:.0f} s, " \
                                   f"{deadline_left:.0f} s kept for the NSDL run"
                break
            try:
                if built is None or built_k != k:
                    built = None
                    release(device)
                    built, built_k = plan.synthetic_step(group["members"][:k], group["shape"], device)[0], k
                seconds, n = time_training_steps(built, precision, device, mode)
            except Exception as err:  # noqa: BLE001 - recorded per entry
                built = None
                release(device)
                if is_oom(err) and k > 1:
                    clock.say(f"{chapter} {precision}: out of memory at K = {k}; retrying at K = {k // 2}")
                    entry.setdefault("notes", []).append(f"out of memory at K = {k}")
                    k //= 2
                    continue
                entry["skipped"] = f"error: {short_error(err)}"
                clock.say(f"{chapter} {precision}: {entry['skipped']}")
                traceback.print_exc(limit=3)
                break
            flops = group["cost"].step_flops(group["batch"]) * k / seconds
            peak = peak_flops(name, precision)
            entry.update({"flops_per_s": flops, "k": k, "batch": group["batch"], "seconds_per_step": seconds,
                          "steps_timed": n, "member_steps_per_s": k / seconds,
                          "share_of_peak": flops / peak if peak else None})
            rates[precision] = flops
            share = f", {flops / peak:.1%} of peak" if peak else ""
            clock.say(f"{chapter} {precision}: {flops / 1e12:.3f} TFLOP/s ({1e3 * seconds:.2f} ms/step over {n} "
                      f"steps, K = {k}{share})")
            break
    built = None
    release(device)
    return rates, details


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
    at_one = on_grid[on_grid.lam == grok.LAM_ONE].sort_values("seed")
    out = {"precision": precision, "members": len(configs), "steps": steps, "wall_s": wall,
           "train_wall_s": float(table.groupby("run").wall_s.max().max()),
           "member_steps_per_s": len(configs) * steps / wall, "grid": preset.paper_grid,
           "T_mem": stats(at_one.T_mem), "T_grok": stats(at_one.T_grok),
           "grokked": f"{int(at_one.grokked.sum())}/{len(at_one)}",
           "per_seed": [{"seed": int(r.seed), "T_mem": r.T_mem, "T_grok": r.T_grok} for r in at_one.itertuples()],
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
    second = fastest_precision(chapter_rates, device)
    fp32_rate = chapter_rates.get("fp32")
    if second is None:
        out["second_precision"] = {"skipped": f"no rate of {grok.NAME} other than fp32 was measured"}
    elif not mode.second_run_always and (fp32_rate is None or chapter_rates[second] < FASTER_BY * fp32_rate):
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


def summary(record: dict) -> str:
    """A few lines for people: FLOP/s per chapter and precision (share of peak), the NSDL comparison."""
    unit, scale = ("TFLOP/s", 1e12) if record["mode"] == "gpu" else ("GFLOP/s", 1e9)
    lines = [f"{record['device']} ({record['device_key']}), torch {record['torch']}, {record['mode']} mode, "
             f"{record['total_wall_s']:.0f} s of a {record['budget_s']:.0f} s budget", f"achieved {unit}:"]
    lines.append(f"  {'chapter':24s}" + "".join(f"{p:>18s}" for p in PRECISIONS))
    for chapter, detail in record["details"].items():
        cells = []
        for p in PRECISIONS:
            e = detail.get("precisions", {}).get(p, {})
            if "flops_per_s" in e:
                share = f" ({e['share_of_peak']:.0%})" if e.get("share_of_peak") else ""
                cells.append(f"{e['flops_per_s'] / scale:.3g}{share}")
            else:
                cells.append("skipped")
        lines.append(f"  {chapter:24s}" + "".join(f"{c:>18s}" for c in cells))
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
    lines.append(f"record: {record.get('path', '?')}")
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="the CPU check of the test suite: smoke shapes, seconds")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the record (default benchmarks/records/; tiny mode: a temporary folder)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-clock budget in seconds (default 420)")
    parser.add_argument("--data-root", default=None, help="data root for the chapters' sweeps (none is read)")
    parser.add_argument("--device", default=None, help="default: cuda, or cpu in tiny mode")
    parser.add_argument("--commit", default=None,
                        help="the checkout's commit, recorded when git cannot tell (a copied tree without .git)")
    parser.add_argument("--chapters", nargs="*", default=None, help="only these chapters (default: all)")
    return parser.parse_args(argv)


class _Terminated(BaseException):
    pass


def _raise_terminated(signum, frame):  # SIGTERM (a timeout) -> unwind, so that the partial record is written
    raise _Terminated(f"signal {signum}")


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
    threads = torch.get_num_threads()
    if args.tiny:  # one thread: on a shared, busy CPU two spinning threads are many times slower than one
        torch.set_num_threads(1)
    name = device_name(device)
    key = device_key(name, args.tiny)
    now = datetime.now(timezone.utc)
    path = record_path(out, key, now.strftime("%Y%m%dT%H%M%SZ"))
    unknown = sorted(set(args.chapters or ()) - set(CHAPTERS))
    if unknown:
        print(f"gpu_check: unknown chapter(s) {', '.join(unknown)}; the chapters are {', '.join(CHAPTERS)}", flush=True)
        return 2
    chapters = [c for c in CHAPTERS if not args.chapters or c in args.chapters]
    record: dict = {
        "script": "benchmarks/gpu_check.py", "device": name, "device_key": key, "mode": mode.name,
        "scale": mode.scale, "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": sys.version.split()[0], "source_hash": source_hash(),
        "git_commit": git_commit() if git_commit() != "unknown" or not args.commit else f"{args.commit} (given)",
        "date": now.isoformat(timespec="seconds"), "budget_s": args.budget_s, "precisions": list(PRECISIONS),
        "flops": "matmul and convolution FLOPs of forward + backward (torch.utils.flop_counter, nhtlib.engine.memory.StepCost)",
        "rates": {}, "details": {}, "nsdl": {}, "total_wall_s": None, "complete": False, "path": str(path)}
    handler_set = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if handler_set else None
    clock.say(f"{name} → {path} (budget {args.budget_s:.0f} s, {mode.name} mode, scale {mode.scale!r})")
    try:
        for chapter in chapters:
            rates, details = measure_chapter(chapter, device, name, mode, clock, args.data_root,
                                             deadline_left=mode.nsdl_reserve_s)
            record["rates"][chapter] = rates
            record["details"][chapter] = details
            record["total_wall_s"] = clock.elapsed
            write(record, path)  # after every chapter: a run killed later still leaves its rates
        try:
            record["nsdl"] = nsdl_part(record["rates"], device, mode, clock,
                                       save=lambda part: (record.update(nsdl=part), write(record, path)))
        except Exception as err:  # noqa: BLE001
            record["nsdl"] = {"skipped": f"error: {short_error(err)}"}
            traceback.print_exc(limit=5)
        record["complete"] = True
    except (_Terminated, KeyboardInterrupt) as err:
        record["interrupted"] = f"stopped at {clock.elapsed:.0f} s: {err!r}"
        clock.say(record["interrupted"])
    finally:
        if handler_set:
            signal.signal(signal.SIGTERM, previous)
        torch.set_num_threads(threads)
        record["total_wall_s"] = clock.elapsed
        write(record, path)
    print(summary(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
