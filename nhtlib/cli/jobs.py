"""Many GPUs through an existing engine: every batched group of every chapter is a job, launched by submitit.

Command line::

    python -m nhtlib train-group 03_border_cifar 12 -p scale paper --device cuda [--part 2/3]
    python -m nhtlib jobs plan -p scale paper --device h200 --gpus 1,4,8 [--limit-min 40]
    python -m nhtlib jobs submit -p scale paper --executor slurm --partition gpu --workers 8
    python -m nhtlib jobs submit -p scale paper --executor local --workers 4 --device cuda

* **A job** (`Job`) is one batched group of one chapter's sweep at a scale: the members `nhtlib.engine.sweep.run`
  trains together (`batch_groups`), numbered in the chapter's order (its sweeps in turn, groups first-seen), so
  that a number names the same members in every process (`groups`). A member two sweeps share is the first
  sweep's. ``train-group`` trains exactly one job's missing members into the run cache through `sweep.run` with the
  sweep's extra metrics, so their keys are the ones the chapter's notebook reads, and exits.
* **A lease** (`acquire_lease`) keeps two workers from training one job: an exclusive file per job in the cache
  folder (``<cache>/leases/``, created with O_CREAT | O_EXCL, holding its holder's host, pid and start), renewed by
  its holder every `LEASE_RENEW_S` (its mtime) while it trains. A lease whose holder is gone (on this host: its pid
  is dead) or that was not renewed for `LEASE_EXPIRY_S` (a holder on another host that died) is stale and taken
  over. The run cache's own lock (``runs/.lock``, `nhtlib.engine.cache`) cannot do this: it is held while one entry
  is written, well under a second, never for a training, and a flock dies with the host's view of the process. A
  lease saves GPU time; it is not what keeps results right: two processes that train one member store equal
  tables, which the cache pairs safely.
* **A worker** (`work`) walks a list of jobs, longest first: a job whose members are all cached is done; one whose
  lease it gets it trains; one leased by a live holder it skips, and comes back at the end to wait for it (so that
  when a worker returns, each of its jobs is in the cache).
* **The job plan** (`JobPlan`): the planner's time of every job (`nhtlib.engine.plan.plan_sweeps` with
  ``time_here=False``: FLOPs ÷ a rate; nothing is trained or timed), a job longer than a limit split by members into
  parts that fit it (the sweep trains any subset of a group's members; a part's time is its share of the group's,
  the planner's time being FLOPs ÷ a rate), and the longest-processing-time-first assignment of the jobs to G
  workers (`lpt`): the makespan and the longest job.
* **Launching** (`submit`): submitit's `LocalExecutor` on one machine (``--workers N`` processes, each walking every
  job, the leases deciding who trains what; with CUDA each process sees one GPU), or SLURM through
  `submitit.AutoExecutor` (an array of one task per job, longest first, ``--workers`` of them at once). Then the
  notebooks run as a last job, ``nht-book build``, which finds every run in the cache and trains nothing (it is
  refused while any job's members are missing).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import heapq
import json
import math
import os
import socket
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from nhtlib.config import (SCALES, Config, ConfigError, check_choice, check_device, check_range, resolve_scale,
                           stable_hash)
from nhtlib.engine.cache import RunCache
from nhtlib.paths import holder_alive
from nhtlib.engine.sweep import RunConfig, Sweep, batch_groups, data_identity, member_keys, metrics_identity, run_code

LEASE_RENEW_S = 30.0  # a holder touches its lease this often while it trains
LEASE_EXPIRY_S = 600.0  # a lease untouched this long is stale, whoever holds it (20 missed renewals; clock skew)
POLL_S = 10.0  # how often a worker looks again at a job another worker holds
SPLIT_LIMIT_MIN = 40.0  # a job planned longer than this is split by members into parts that fit it


# ---------------------------------------------------------------------------------------------------------- jobs

@dataclass(frozen=True)
class Job(Config):
    """One batched group of a chapter's sweep (or a part of one, `pieces`): what one worker trains at a time.

    index: the group's position among the chapter's groups (`groups`); member_keys, configs: its members, in the
    sweep's order (member_keys empty for a job listed only to be planned, whose data need not be here);
    estimate_s: the planner's seconds for them (None: not planned); scale, data_root, first_seed: what the
    chapter's sweeps were made of; part, parts: the part (0-based) of a group split into `parts`."""

    chapter: str
    sweep: str
    index: int
    member_keys: tuple[str, ...]
    configs: tuple[RunConfig, ...]
    estimate_s: float | None = None
    scale: str = "cpu"
    data_root: str | None = None
    first_seed: int = 0
    part: int = 0
    parts: int = 1

    def validate(self) -> None:
        check_range("index", self.index, 0, None, integer=True)
        check_choice("scale", self.scale, SCALES)
        check_range("parts", self.parts, 1, None, integer=True)
        check_range("part", self.part, 0, self.parts - 1, integer=True)
        if not self.configs or (self.member_keys and len(self.configs) != len(self.member_keys)):
            raise ConfigError(f"job {self.name}: {len(self.configs)} configs for {len(self.member_keys)} member keys")
        if self.estimate_s is not None:
            check_range("estimate_s", self.estimate_s, 0.0, None)

    @property
    def name(self) -> str:
        """'03_border_cifar #12', or '03_border_cifar #12 part 2/3'."""
        return f"{self.chapter} #{self.index}" + (f" part {self.part + 1}/{self.parts}" if self.parts > 1 else "")

    @property
    def lease_name(self) -> str:
        """Name of the job's lease file, made of the job's name and a hash of its members (so another scale or
        another code version gives another lease)."""
        members = stable_hash(list(self.member_keys), 12)
        return f"{self.chapter}.{self.index:03d}.{self.part + 1}-of-{self.parts}.{members}"

    def pieces(self, n: int) -> list[Job]:
        """The group split by members into `n` consecutive parts of sizes that differ by at most one, each with its
        share of the estimate."""
        if self.parts != 1:
            raise ConfigError(f"{self.name} is a part already; split the whole group")
        check_range("parts", n, 1, len(self.configs), integer=True)
        out, start = [], 0
        for i in range(n):
            stop = start + len(self.configs) // n + (i < len(self.configs) % n)
            share = None if self.estimate_s is None else self.estimate_s * (stop - start) / len(self.configs)
            out.append(dataclasses.replace(self, member_keys=self.member_keys[start:stop],
                                           configs=self.configs[start:stop], estimate_s=share, part=i, parts=n))
            start = stop
        return out


class JobMismatch(RuntimeError):
    """A job no longer names the members it was made with (the code, the data or the chapter changed since)."""


def _enumerate(chapter: str, scale: str, data_root: str | None, first_seed: int, keyed: bool = True
               ) -> list[tuple[Sweep, Job]]:
    """(sweep, job) per batched group of the chapter's sweeps, in the chapter's order: what `groups` lists. A
    member is the first sweep's that has its key; without `keyed` (no data read) its key's parts stand in for it:
    its config, its data copy (whose files make the key's data fingerprint), its metrics and its code."""
    from nhtlib.chapters import chapter as registered

    sweeps = registered(chapter).sweeps(scale, data_root, first_seed)
    seen: set[str] = set()
    out: list[tuple[Sweep, Job]] = []
    for sweep in sweeps:
        metrics, source = metrics_identity(sweep.extra_metrics, sweep.extra_metrics_key), run_code(sweep.extra_metrics)
        keys = member_keys(sweep.configs, metrics, source=source) if keyed else []
        identities = keys or [stable_hash([c.digest(), data_identity(c.task), metrics, source]) for c in sweep.configs]
        fresh = [i for i, one in enumerate(identities) if not (one in seen or seen.add(one))]  # first sweep wins
        for group in batch_groups([sweep.configs[i] for i in fresh]):
            members = [fresh[j] for j in group]
            out.append((sweep, Job(chapter, sweep.name, len(out), tuple(keys[i] for i in members if keys),
                                   tuple(sweep.configs[i] for i in members), scale=scale, data_root=data_root,
                                   first_seed=first_seed)))
    return out


def groups(chapter: str, scale: str, data_root: str | None = None, first_seed: int = 0, *,
           plan_device: str | None = None, keyed: bool = True) -> list[Job]:
    """Every batched group of the chapter's sweeps at `scale` as a `Job`, in the chapter's order (index = position).
    plan_device: a planner device ('h200', 'cpu': `nhtlib.engine.plan.device_spec`) to estimate each job's time on
    (None: estimate_s stays None, and nothing is planned). keyed: with the members' cache keys (which read the
    data's fingerprints); without, the jobs are for a plan only (the same groups; the data need not be here)."""
    pairs = _enumerate(chapter, resolve_scale(scale), data_root, first_seed, keyed)
    return [job for _, job in pairs] if plan_device is None else _with_estimates(pairs, plan_device)


def _with_estimates(pairs: list[tuple[Sweep, Job]], plan_device: str) -> list[Job]:
    """The jobs with the planner's time of each: `nhtlib.engine.plan.plan_sweeps` (time_here=False: nothing is
    trained or timed) of the job's members as a sweep of their own, so that each job is planned as what it trains
    (the planner plans a config once per chapter, while a member whose extra metrics differ between two sweeps is
    trained in each)."""
    from nhtlib.engine import plan

    device = plan.device_spec(plan_device)
    out = []
    for sweep, job in pairs:
        alone = dataclasses.replace(sweep, configs=job.configs)
        planned = plan.plan_sweeps(job.chapter, job.scale, [alone], device, time_here=False).groups
        if len(planned) != 1:
            raise RuntimeError(f"the planner splits {job.name} into {len(planned)} groups, the run trains it as one")
        out.append(dataclasses.replace(job, estimate_s=planned[0].seconds))
    return out


def book_jobs(scale: str, data_root: str | None = None, *, chapters: Sequence[str] | None = None,
              plan_device: str | None = None, keyed: bool = True) -> list[Job]:
    """The jobs (`groups`) of every chapter that trains runs of its own (default), or of `chapters`."""
    from nhtlib.chapters import CHAPTERS, trains_own

    names = list(chapters) if chapters else [name for name in CHAPTERS if trains_own(name)]
    return [job for name in names for job in groups(name, scale, data_root, plan_device=plan_device, keyed=keyed)]


def resolve(job: Job, known: dict[tuple, list[tuple[Sweep, Job]]] | None = None) -> tuple[Sweep, Job]:
    """(the sweep the job belongs to, the job as this process enumerates it); JobMismatch when it names other
    members here than where it was made. `known`: the chapters' enumerations already made by this process."""
    if not job.member_keys:
        raise JobMismatch(f"{job.name} was listed for a plan only (without its members' keys); list it with keyed=True")
    where = (job.chapter, job.scale, job.data_root, job.first_seed)
    known = {} if known is None else known
    if where not in known:
        known[where] = _enumerate(*where)
    pairs = known[where]
    if job.index >= len(pairs):
        raise JobMismatch(f"{job.name}: {job.chapter} has {len(pairs)} groups at scale {job.scale!r} here; make the "
                          "job list again (the code or the chapter changed since it was made)")
    sweep, whole = pairs[job.index]
    found = whole if job.parts == 1 else whole.pieces(job.parts)[job.part]
    if found.member_keys != job.member_keys:
        raise JobMismatch(f"{job.name} names other members here than where it was made (the code, the data or the "
                          "chapter's sweeps changed since): make the job list again")
    return sweep, found


def missing_members(job: Job, cache: RunCache) -> list[str]:
    """The keys of the job's members that the run cache does not hold."""
    return [key for key in job.member_keys if cache.meta(key) is None]


# -------------------------------------------------------------------------------------------------------- leases

def lease_path(cache: RunCache, job: Job) -> Path:
    return cache.root / "leases" / f"{job.lease_name}.lease"


def read_lease(path: Path) -> dict[str, Any] | None:
    """The lease's record; None when there is no lease, {} when it does not parse (being written, or damaged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(data)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def lease_is_stale(record: dict[str, Any], mtime: float, expiry_s: float = LEASE_EXPIRY_S) -> bool:
    """A lease not renewed for `expiry_s`, or whose holder on this host is gone. One that does not parse yet is
    judged by its age alone (its holder may be writing it)."""
    return time.time() - mtime > expiry_s or (bool(record) and not holder_alive(record))


@dataclass(frozen=True)
class Lease:
    """A lease this process holds: its file and the token its record carries."""

    path: Path
    token: str

    def ours(self) -> bool:
        return (read_lease(self.path) or {}).get("token") == self.token

    def renew(self) -> bool:
        """Touch the lease (its mtime is its heartbeat); False when it is no longer ours (taken over as stale)."""
        if not self.ours():
            return False
        os.utime(self.path)
        return True

    def release(self) -> None:
        if self.ours():
            self.path.unlink(missing_ok=True)


def acquire_lease(path: Path, what: str, *, expiry_s: float = LEASE_EXPIRY_S) -> Lease | None:
    """The lease at `path` for this process (created with O_CREAT | O_EXCL; a stale one is taken over,
    `lease_is_stale`), or None while a live holder has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    record = {"token": token, "host": socket.gethostname(), "pid": os.getpid(), "job": what,
              "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join(sys.argv)[:300]}
    for _ in range(3):  # a stale lease removed, then created anew (unless another process was quicker)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            try:
                judged = os.stat(path)
            except FileNotFoundError:
                continue  # released meanwhile
            if not lease_is_stale(read_lease(path) or {}, judged.st_mtime, expiry_s) or not _break(path, judged):
                return None
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(record).encode())
        return Lease(path, token)
    return None


def _break(path: Path, judged: os.stat_result) -> bool:
    """Remove the stale lease at `path` whose stat was `judged`; False when another process is taking it over or it
    is another lease by now. Among several takers the first to hard-link it to a name made of its inode and mtime
    wins; the link is checked to be the judged file (not a new lease put in its place) before it is removed."""
    tomb = path.with_name(f"{path.name}.stale-{judged.st_ino}-{judged.st_mtime_ns}")
    try:
        os.link(path, tomb)
    except FileExistsError:
        try:
            if time.time() - os.stat(tomb).st_mtime > LEASE_EXPIRY_S:
                tomb.unlink()  # left by a taker that died halfway: the next attempt is free to take over
        except FileNotFoundError:
            pass
        return False
    except FileNotFoundError:
        return True  # gone meanwhile: free to create
    try:
        linked = os.stat(tomb)
        if (linked.st_ino, linked.st_mtime_ns) != (judged.st_ino, judged.st_mtime_ns):
            return False
        os.unlink(path)
        return True
    finally:
        tomb.unlink(missing_ok=True)


@contextmanager
def holding(lease: Lease, renew_s: float = LEASE_RENEW_S) -> Iterator[Lease]:
    """Renew the lease every `renew_s` from a thread while the block runs; release it after."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(renew_s):
            try:
                if not lease.renew():
                    return  # taken over as stale: nothing left to renew
            except OSError:
                pass  # a hiccup of the file system: the next renewal tries again

    thread = threading.Thread(target=renew, name=f"lease {lease.path.name}", daemon=True)
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join()
        lease.release()


# ------------------------------------------------------------------------------------------------------- workers

@dataclass(frozen=True)
class Outcome:
    """What a worker did with one job: 'trained' it, or found it 'cached' (trained by another, or before)."""

    job: str
    outcome: str
    waited: bool  # it came back for the job after another worker's lease
    seconds: float
    host: str
    pid: int


def work(jobs: Sequence[Job], *, device: str = "auto", cache_root: str | os.PathLike | None = None,
         poll_s: float = POLL_S, expiry_s: float = LEASE_EXPIRY_S, renew_s: float = LEASE_RENEW_S,
         threads: int | None = None, progress: bool = True) -> list[Outcome]:
    """Train every job of `jobs` that is not in the run cache (at `cache_root`; default $NHT_CACHE or results/cache)
    and whose lease this worker gets, in the order given; jobs leased by a live holder are skipped and waited for at
    the end. Every job is checked first to name the same members here as where it was made (`resolve`). threads:
    torch's CPU threads (workers sharing a CPU). Returns one `Outcome` per job, in the order they were done."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    cache = RunCache(cache_root)
    known: dict[tuple, list[tuple[Sweep, Job]]] = {}
    resolved = [resolve(job, known) for job in jobs]  # before any training: a stale job list fails in seconds
    done, later = [], []
    for sweep, job in resolved:
        outcome = _attempt(sweep, job, cache, device, expiry_s, renew_s, progress, waited=False)
        (done if outcome else later).append(outcome or (sweep, job))
    for sweep, job in later:
        while (outcome := _attempt(sweep, job, cache, device, expiry_s, renew_s, progress, waited=True)) is None:
            time.sleep(poll_s)
        done.append(outcome)
    return done


def _attempt(sweep: Sweep, job: Job, cache: RunCache, device: str, expiry_s: float, renew_s: float,
             progress: bool, *, waited: bool) -> Outcome | None:
    """The job done (trained under its lease, or found cached), or None while another worker holds its lease."""
    t0 = time.perf_counter()

    def outcome(what: str) -> Outcome:
        return Outcome(job.name, what, waited, round(time.perf_counter() - t0, 3), socket.gethostname(), os.getpid())

    if not missing_members(job, cache):
        return outcome("cached")
    lease = acquire_lease(lease_path(cache, job), job.name, expiry_s=expiry_s)
    if lease is None:
        return None
    with holding(lease, renew_s):
        if not missing_members(job, cache):  # finished by the holder before us
            return outcome("cached")
        train_job(sweep, job, device=device, cache=cache, progress=progress)
    return outcome("trained")


def train_job(sweep: Sweep, job: Job, *, device: str = "auto", cache: RunCache | None = None,
              progress: bool = True) -> None:
    """Train the job's missing members into the cache through `nhtlib.engine.sweep.run` with the sweep's extra
    metrics (so their keys are those the chapter's notebook reads); checked after: every member is stored."""
    from nhtlib.engine.sweep import run

    cache = cache or RunCache()
    run(list(job.configs), device=device, cache=cache, progress=progress, desc=f"{job.name} {sweep.name!r}",
        extra_metrics=sweep.extra_metrics, extra_metrics_key=sweep.extra_metrics_key)
    unstored = missing_members(job, cache)
    if unstored:
        raise RuntimeError(f"{job.name}: {len(unstored)} members are not in the cache after training (first key "
                           f"{unstored[0]}): the job's keys are not the ones the run stores")


# ----------------------------------------------------------------------------------------------------- job plan

@dataclass(frozen=True)
class Schedule:
    """Jobs' times assigned to workers: each worker's load and the positions of its jobs."""

    loads: tuple[float, ...]
    assignment: tuple[tuple[int, ...], ...]

    @property
    def workers(self) -> int:
        return len(self.loads)

    @property
    def makespan(self) -> float:
        return max(self.loads, default=0.0)


def lpt(times: Sequence[float], workers: int) -> Schedule:
    """Longest processing time first: each time, longest first (ties: first given), to the least loaded worker
    (ties: the lowest numbered). Within 4/3 of the best makespan; what workers that take the next longest job
    whenever they are free achieve."""
    check_range("workers", workers, 1, None, integer=True)
    loads, assignment = [0.0] * workers, [[] for _ in range(workers)]
    free = [(0.0, w) for w in range(workers)]
    for i in sorted(range(len(times)), key=lambda i: (-times[i], i)):
        load, w = heapq.heappop(free)
        loads[w] = load + times[i]
        assignment[w].append(i)
        heapq.heappush(free, (loads[w], w))
    return Schedule(tuple(loads), tuple(map(tuple, assignment)))


def longest_first(jobs: Sequence[Job]) -> list[Job]:
    """The jobs by estimated time, longest first (ties in the chapters' order)."""
    return sorted(jobs, key=lambda j: (-(j.estimate_s or 0.0), j.chapter, j.index, j.part))


def split_long(jobs: Sequence[Job], limit_s: float) -> list[Job]:
    """Every job planned longer than `limit_s` split by members into the fewest parts that fit it (`Job.pieces`;
    a group of fewer members than that gets one part per member)."""
    check_range("limit_s", limit_s, 0.0, None, low_inclusive=False)
    out = []
    for job in jobs:
        if job.estimate_s is None:
            raise ConfigError(f"{job.name} has no estimate: make the jobs with a plan_device")
        parts = min(len(job.configs), math.ceil(job.estimate_s / limit_s))
        out += job.pieces(parts) if parts > 1 else [job]
    return out


@dataclass(frozen=True)
class JobPlan:
    """The jobs of a book at a scale as planned on a device: split to fit `limit_s`, longest first."""

    scale: str
    device: str  # the planner's device, in words
    jobs: tuple[Job, ...]
    limit_s: float

    def schedule(self, workers: int) -> Schedule:
        return lpt([job.estimate_s or 0.0 for job in self.jobs], workers)

    @property
    def seconds(self) -> float:
        return sum(job.estimate_s or 0.0 for job in self.jobs)

    @property
    def longest(self) -> Job | None:
        return self.jobs[0] if self.jobs else None

    def text(self, gpus: Sequence[int] = (1, 4, 8)) -> str:
        """The plan for people: the jobs, what was split, and per number of GPUs the makespan (the planner's
        estimates; `nhtlib.engine.plan`)."""
        groups_ = {(j.chapter, j.index) for j in self.jobs}
        split = sorted({(j.chapter, j.index, j.parts, j.sweep) for j in self.jobs if j.parts > 1})
        lines = [f"job plan at scale={self.scale!r} on {self.device}: {len(self.jobs)} jobs from {len(groups_)} "
                 f"batched groups, {self.seconds / 60:.1f} min of training in all (the planner's estimates)"]
        lines += [f"split (longer than {self.limit_s / 60:g} min): {c} #{i} {s!r} into {n} parts"
                  for c, i, n, s in split] or [f"split: none (every job fits {self.limit_s / 60:g} min)"]
        too_long = [j for j in self.jobs if (j.estimate_s or 0.0) > self.limit_s]
        lines += [f"still longer than {self.limit_s / 60:g} min (one member each, cannot be split): "
                  + ", ".join(j.name for j in too_long)] if too_long else []
        if self.longest is not None:
            lines.append(f"longest job: {self.longest.name} {self.longest.sweep!r} "
                         f"({_members(self.longest)}), {self.longest.estimate_s / 60:.1f} min")
        lines.append(f"{'GPUs':>5} {'makespan min':>13} {'least loaded min':>17}")
        for g in gpus:
            schedule = self.schedule(g)
            lines.append(f"{g:>5} {schedule.makespan / 60:>13.1f} {min(schedule.loads) / 60:>17.1f}")
        lines.append("jobs, longest first:")
        lines += [f"  {j.estimate_s / 60:7.1f} min  {j.name:<32} {j.sweep!r} ({_members(j)})" for j in self.jobs]
        return "\n".join(lines)


def _members(job: Job) -> str:
    return f"{len(job.configs)} member{'s' if len(job.configs) != 1 else ''}"


def make_plan(scale: str, plan_device: str = "h200", data_root: str | None = None, *,
              chapters: Sequence[str] | None = None, limit_min: float = SPLIT_LIMIT_MIN, keyed: bool = True) -> JobPlan:
    """The `JobPlan` of the book (or `chapters`) at `scale` on the planner's device `plan_device` (trains nothing;
    `keyed` as for `groups`: without, no data file is read)."""
    from nhtlib.engine import plan

    jobs = book_jobs(scale, data_root, chapters=chapters, plan_device=plan_device, keyed=keyed)
    split = split_long(jobs, limit_min * 60)
    return JobPlan(resolve_scale(scale), plan.device_spec(plan_device).name, tuple(longest_first(split)),
                   limit_min * 60)


# ---------------------------------------------------------------------------------------------------- launching

EXECUTORS = ("local", "slurm")


@dataclass(frozen=True)
class Launch(Config):
    """How jobs are launched: `executor` 'local' (submitit's LocalExecutor: `workers` processes here) or 'slurm'
    (an array of one task per job, `workers` at once, on `partition` with `gpus_per_node`); `time_min` per worker
    (local) or task (slurm; None: 1.5 × the longest job + 10 min); `folder`: submitit's logs and pickles; `book`:
    run the notebooks as a last job once every job is done."""

    executor: str = "local"
    workers: int = 1
    device: str = "auto"
    folder: str = "jobs"
    partition: str | None = None
    gpus_per_node: int = 1
    time_min: int | None = None
    book: bool = True

    def validate(self) -> None:
        check_choice("executor", self.executor, EXECUTORS)
        check_range("workers", self.workers, 1, None, integer=True)
        check_device(self.device)
        check_range("gpus_per_node", self.gpus_per_node, 0, None, integer=True)
        if self.time_min is not None:
            check_range("time_min", self.time_min, 1, None, integer=True)


LOCAL_TIME_MIN = 7 * 24 * 60  # a local worker is not limited in time (submitit's default is 2 minutes)
BOOK_TIME_MIN = 180  # the last job: six notebooks reading the cache, then the site


def task_minutes(launch: Launch, jobs: Sequence[Job]) -> int:
    """The time limit of one SLURM task: `launch.time_min`, else 1.5 × the longest job's estimate + 10 minutes."""
    if launch.time_min is not None:
        return launch.time_min
    longest = max((job.estimate_s or 0.0 for job in jobs), default=0.0)
    return math.ceil(1.5 * longest / 60 + 10)


def slurm_parameters(launch: Launch, jobs: Sequence[Job], scale: str) -> dict[str, Any]:
    """`submitit.AutoExecutor.update_parameters` of the array of jobs on SLURM."""
    return {"name": f"nht-{scale}", "timeout_min": task_minutes(launch, jobs), "gpus_per_node": launch.gpus_per_node,
            "tasks_per_node": 1, "slurm_array_parallelism": launch.workers,
            **({"slurm_partition": launch.partition} if launch.partition else {})}


def book_parameters(launch: Launch, scale: str, array_id: str) -> dict[str, Any]:
    """`submitit.AutoExecutor.update_parameters` of the last SLURM job: the notebooks, once every task of the array
    `array_id` has succeeded (afterok), on the CPU, for at most BOOK_TIME_MIN."""
    return {"name": f"nht-{scale}-book", "timeout_min": BOOK_TIME_MIN, "tasks_per_node": 1,
            "slurm_additional_parameters": {"dependency": f"afterok:{array_id}"},
            **({"slurm_partition": launch.partition} if launch.partition else {})}


def _uses_cuda(device: str) -> bool:
    if device == "auto":
        import torch

        return torch.cuda.is_available()
    return device.startswith("cuda")


def submit(jobs: Sequence[Job], launch: Launch, *, scale: str, data_root: str | None = None,
           cache_root: str | os.PathLike | None = None, poll_s: float = POLL_S) -> list[Any]:
    """Launch the jobs (longest first) and then, with `launch.book`, the notebooks as a last job (`build_book`);
    returns the submitit jobs. Local: waits for every worker and the last job, raising the first failure (poll_s:
    how often a worker looks again at a job another holds). SLURM: the array and the last job (afterok on the
    array) are queued, and this returns at once."""
    import submitit

    jobs = longest_first(jobs)
    cache_root = str(Path(cache_root or RunCache().root).resolve())
    cuda = _uses_cuda(launch.device)
    if launch.executor == "slurm":
        executor = submitit.AutoExecutor(folder=launch.folder, cluster="slurm")
        executor.update_parameters(**slurm_parameters(launch, jobs, scale))
        task = functools.partial(_work_one, device="cuda" if cuda else launch.device, cache_root=cache_root)
        array = executor.map_array(task, jobs)
        if not launch.book or not array:
            return array
        last = submitit.AutoExecutor(folder=launch.folder, cluster="slurm")  # no GPU asked for: a fresh executor
        last.update_parameters(**book_parameters(launch, scale, array[0].job_id.split("_")[0]))
        return [*array, last.submit(build_book, scale, data_root, cache_root, jobs)]
    executor = submitit.LocalExecutor(folder=launch.folder)
    if cuda:
        import torch

        if torch.cuda.device_count() < launch.workers:
            raise ConfigError(f"workers={launch.workers} local CUDA workers need as many GPUs; this machine has "
                              f"{torch.cuda.device_count()}")
    threads = None if cuda else max(1, (os.cpu_count() or 1) // launch.workers)  # workers share the CPU
    submitted = []
    for w in range(launch.workers):
        executor.update_parameters(timeout_min=launch.time_min or LOCAL_TIME_MIN, gpus_per_node=1 if cuda else 0,
                                   **({"visible_gpus": (w,)} if cuda else {}))
        submitted.append(executor.submit(work, jobs, device="cuda" if cuda else launch.device, cache_root=cache_root,
                                         threads=threads, progress=False, poll_s=poll_s))
    for worker in submitted:
        worker.result()  # raises the worker's failure, with its log's tail
    if launch.book:
        executor.update_parameters(gpus_per_node=0, timeout_min=launch.time_min or LOCAL_TIME_MIN)
        book = executor.submit(build_book, scale, data_root, cache_root, jobs)
        book.result()
        submitted.append(book)
    return submitted


def _work_one(job: Job, *, device: str, cache_root: str) -> list[Outcome]:
    """One SLURM array task: one job (`work`)."""
    return work([job], device=device, cache_root=cache_root)


def build_book(scale: str, data_root: str | None, cache_root: str | os.PathLike | None,
               jobs: Sequence[Job] = ()) -> int:
    """The last job: ``nht-book build`` at `scale` on the run cache at `cache_root`, refused while any of `jobs`
    has members missing from it (the notebooks then read every run and train nothing)."""
    from nhtlib.cli import build
    from nhtlib.paths import CACHE_ENV

    cache = RunCache(cache_root)
    unfinished = [job.name for job in jobs if missing_members(job, cache)]
    if unfinished:
        raise RuntimeError(f"{len(unfinished)} jobs have members missing from the cache {cache.root} (first: "
                           f"{unfinished[0]}): run them (jobs submit) before the notebooks, which would train them")
    if cache_root is not None:
        os.environ[CACHE_ENV] = str(cache_root)  # the notebooks' kernels inherit it
    code = build.main(["--scale", scale, *(["--data-root", data_root] if data_root else [])])
    if code:
        raise RuntimeError(f"nht-book build --scale {scale} exited with status {code}; see this job's log")
    return code


# ------------------------------------------------------------------------------------------------- command line

def _parameters(pairs: list[list[str]]) -> tuple[str, str | None]:
    """(scale, data_root) from `-p NAME VALUE` pairs (only those two are taken)."""
    given = dict(pairs)
    unknown = sorted(set(given) - {"scale", "data_root"})
    if unknown:
        raise ConfigError(f"the parameters are scale and data_root; got {', '.join(unknown)}")
    return resolve_scale(given.get("scale")), given.get("data_root")


def _add_parameters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="scale (default $NHT_SCALE, else cpu) and data_root, as for `run`")
    parser.add_argument("--chapters", default=None, help="comma-separated chapters (default: every one that trains)")


def _parse_args(argv: list[str]) -> argparse.Namespace:
    from nhtlib.cli.program import program_name

    parser = argparse.ArgumentParser(prog=program_name(), description="Every batched group as a job.")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("train-group", help="train one batched group's missing members into the run cache")
    one.add_argument("chapter", help="chapter name, e.g. 03_border_cifar")
    one.add_argument("group", type=int, help="the group's number (`jobs plan` lists them)")
    one.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="scale and data_root, as for `run`")
    one.add_argument("--part", default=None, metavar="I/N", help="only part I of the group split in N (1-based)")
    one.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    jobs = sub.add_parser("jobs", help="plan or submit every batched group as a job")
    what = jobs.add_subparsers(dest="action", required=True)
    plan = what.add_parser("plan", help="the job plan for 1, 4, 8 GPUs (trains nothing)")
    _add_parameters(plan)
    plan.add_argument("--device", default="h200", help="the planner's device: h200, or cpu (this machine)")
    plan.add_argument("--gpus", default="1,4,8", help="numbers of GPUs to plan for (default: %(default)s)")
    plan.add_argument("--limit-min", type=float, default=SPLIT_LIMIT_MIN, help="split jobs longer than this")
    launch = what.add_parser("submit", help="launch the jobs with submitit, then the notebooks")
    _add_parameters(launch)
    launch.add_argument("--executor", choices=EXECUTORS, default="local")
    launch.add_argument("--workers", type=int, default=1, help="processes here (local), tasks at once (slurm)")
    launch.add_argument("--device", default="auto", help="the training device: auto, cpu or cuda")
    launch.add_argument("--plan-device", default="h200", help="the planner's device for the order and the split")
    launch.add_argument("--limit-min", type=float, default=SPLIT_LIMIT_MIN, help="split jobs longer than this")
    launch.add_argument("--partition", default=None, help="SLURM partition")
    launch.add_argument("--gpus-per-node", type=int, default=1, help="SLURM GPUs per task (default 1)")
    launch.add_argument("--time", type=int, default=None, dest="time_min",
                        help="minutes per task (slurm; default 1.5 × the longest job + 10) or worker (local)")
    launch.add_argument("--folder", default=None, help="submitit's logs (default: results/jobs/<scale>)")
    launch.add_argument("--no-book", action="store_true", help="train the jobs only; no notebooks after them")
    return parser.parse_args(argv)


def _train_group(args: argparse.Namespace) -> int:
    scale, data_root = _parameters(args.parameter)
    found = groups(args.chapter, scale, data_root)
    if not 0 <= args.group < len(found):
        raise ConfigError(f"{args.chapter} has groups 0 .. {len(found) - 1} at scale {scale!r}; got {args.group}")
    job = found[args.group]
    if args.part:
        part, _, parts = args.part.partition("/")
        if not (part.isdigit() and parts.isdigit() and 1 <= int(part) <= int(parts)):
            raise ConfigError(f"--part {args.part!r}: give I/N with 1 ≤ I ≤ N, e.g. 2/3")
        job = job.pieces(int(parts))[int(part) - 1]
    print(f"{job.name} {job.sweep!r}: {len(job.configs)} members, {len(missing_members(job, RunCache()))} to train",
          flush=True)
    for outcome in work([job], device=args.device):
        print(f"{outcome.job}: {outcome.outcome} in {outcome.seconds:,.0f} s", flush=True)
    return 0


def _jobs(args: argparse.Namespace) -> int:
    from nhtlib.paths import results_root

    scale, data_root = _parameters(args.parameter)
    chapters = args.chapters.split(",") if args.chapters else None
    planned = make_plan(scale, args.device if args.action == "plan" else args.plan_device, data_root,
                        chapters=chapters, limit_min=args.limit_min, keyed=args.action == "submit")
    if args.action == "plan":
        print(planned.text([int(g) for g in args.gpus.split(",")]))
        return 0
    launch = Launch(args.executor, args.workers, args.device, args.folder or str(results_root() / "jobs" / scale),
                    args.partition, args.gpus_per_node, args.time_min, not args.no_book)
    print(planned.text([launch.workers]), flush=True)
    submitted = submit(planned.jobs, launch, scale=scale, data_root=data_root)
    where = f"logs in {launch.folder}"
    if launch.executor == "slurm":
        print(f"queued {len(submitted)} SLURM jobs (array {submitted[0].job_id.split('_')[0]}"
              f"{', then the notebooks as ' + submitted[-1].job_id if launch.book else ''}); {where}")
    else:
        trained = sum(o.outcome == "trained" for w in submitted[:launch.workers] for o in w.result())
        print(f"{launch.workers} local workers trained {trained} of {len(planned.jobs)} jobs"
              f"{'; the notebooks ran' if launch.book else ''}; {where}")
    return 0


def main(argv: list[str]) -> int:
    """``train-group ...`` or ``jobs plan|submit ...`` (argv starts with the command); the exit status."""
    from nhtlib.cli.runner import failure_line

    args = _parse_args(argv)
    try:
        return _train_group(args) if args.command == "train-group" else _jobs(args)
    except (ConfigError, JobMismatch) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, ConfigError) else 1
    except Exception as err:  # one line, never a traceback (NHT_TRACEBACK=1 shows it)
        print(f"error: {failure_line(err)}", file=sys.stderr)
        return 1
