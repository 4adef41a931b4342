"""Every batched group a job (nhtlib/cli/jobs.py, issue 24 item 6): the jobs name the members the notebooks read, a
lease keeps two workers off one job, the job plan's LPT assignment, and two submitit LocalExecutor workers filling
a run cache equal to a one-process build's, at smoke scale on chapter 1 (its one group split into parts)."""
from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import threading
import time

import pandas as pd
import pytest
import torch

from nhtlib.chapters import CHAPTERS, registry
from nhtlib.chapters.base import Chapter
from nhtlib.cli import jobs
from nhtlib.cli.main import main
from nhtlib.config import ConfigError
from nhtlib.engine.cache import RunCache
from nhtlib.engine.sweep import Sweep

TOY = "01_toy_norm_hierarchy"  # the cheapest chapter at smoke scale (one group of generated data)


def toy_parts(n: int = 3) -> list[jobs.Job]:
    """Chapter 1's smoke groups, each split into (at most) n parts: several small jobs."""
    return [part for job in jobs.groups(TOY, "smoke") for part in job.pieces(min(n, len(job.configs)))]


@pytest.fixture
def one_thread():
    """torch on one CPU thread, as each of two workers on a two-core machine (and no oversubscribed spinning)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def table(cache: RunCache, key: str) -> pd.DataFrame:
    return cache.load(key).drop(columns="wall_s")


# ------------------------------------------------------------------------------------------------ the jobs

def test_jobs_name_the_members_the_notebook_reads_in_a_stable_order():
    first, again = jobs.groups(TOY, "smoke"), jobs.groups(TOY, "smoke")
    assert [(j.index, j.member_keys) for j in first] == [(j.index, j.member_keys) for j in again]
    assert [j.index for j in first] == list(range(len(first)))
    read = {key for sweep in CHAPTERS[TOY].sweeps("smoke") for key in sweep.member_keys()}
    listed = [key for job in first for key in job.member_keys]
    assert sorted(listed) == sorted(read)  # every member once, under the notebook's key
    sweep, found = jobs.resolve(first[0])
    assert found == first[0] and sweep.name == first[0].sweep
    tampered = dataclasses.replace(first[0], member_keys=("0" * 24, *first[0].member_keys[1:]))
    with pytest.raises(jobs.JobMismatch, match="other members"):
        jobs.resolve(tampered)


def test_a_member_two_sweeps_share_is_a_job_of_the_first(monkeypatch):
    configs = CHAPTERS[TOY].sweeps("smoke")[0].configs
    sweeps = [Sweep("first", configs[:8]), Sweep("second", configs[4:])]  # configs 4..7 in both
    fake = Chapter("99_shared", "Shared", __name__, {}, lambda scale, data_root, seed: sweeps, ())
    monkeypatch.setitem(registry.CHAPTERS, fake.name, fake)
    found = jobs.groups(fake.name, "smoke")
    keys = [key for job in found for key in job.member_keys]
    assert len(keys) == len(set(keys)) == len(configs)
    assert [(j.sweep, len(j.configs)) for j in found] == [("first", 8), ("second", len(configs) - 8)]


def test_parts_of_a_group_cover_it_in_order_with_their_share_of_the_time():
    whole = dataclasses.replace(jobs.groups(TOY, "smoke")[0], estimate_s=1200.0)
    n = len(whole.configs)
    parts = whole.pieces(5)
    assert [len(p.configs) for p in parts] == [n // 5 + (i < n % 5) for i in range(5)]
    assert [k for p in parts for k in p.member_keys] == list(whole.member_keys)
    assert sum(p.estimate_s for p in parts) == pytest.approx(1200.0)
    assert len({p.lease_name for p in parts} | {whole.lease_name}) == 6
    split = jobs.split_long([whole], limit_s=500.0)  # 1200 s in parts of at most 500 s: three
    assert [(p.part, p.parts) for p in split] == [(0, 3), (1, 3), (2, 3)]
    assert all(p.estimate_s <= 500.0 for p in split)
    assert jobs.split_long([whole], limit_s=1200.0) == [whole]
    with pytest.raises(ConfigError):
        whole.pieces(n + 1)


# ---------------------------------------------------------------------------------------------- job plan

def test_lpt_assigns_longest_first_to_the_least_loaded_worker():
    schedule = jobs.lpt([10, 9, 8, 1], 2)
    assert schedule.loads == (11, 17) and schedule.assignment == ((0, 3), (1, 2))
    assert schedule.makespan == 17  # also the best split of 28 into two: {10, 1} and {9, 8}
    assert jobs.lpt([3, 3, 2, 2, 2], 2).makespan == 7  # LPT, not the optimum (6: 3 + 3 | 2 + 2 + 2)
    assert jobs.lpt([10, 9, 8, 1], 1).makespan == 28
    assert jobs.lpt([10, 9, 8, 1], 8).makespan == 10
    with pytest.raises(ConfigError):
        jobs.lpt([1.0], 0)


def test_the_job_plan_command_prints_the_plan_and_trains_nothing(capsys):
    assert main(["jobs", "plan", "-p", "scale", "smoke", "--chapters", TOY, "--device", "h200", "--gpus", "1,2"]) == 0
    out = capsys.readouterr().out
    assert "job plan at scale='smoke' on NVIDIA H200" in out and "makespan min" in out
    assert f"{TOY} #0" in out
    assert RunCache().keys() == []
    assert main(["train-group", TOY, "99", "-p", "scale", "smoke"]) == 2
    assert "has groups 0 .." in capsys.readouterr().err


FAKE_SBATCH = """#!/bin/sh
n=$(cat "$FAKE_SLURM/count" 2>/dev/null || echo 100); n=$((n + 1)); echo $n > "$FAKE_SLURM/count"
cp "$1" "$FAKE_SLURM/sbatch-$n.sh"
echo "Submitted batch job $n"
"""


def test_slurm_gets_an_array_longest_first_then_the_notebooks_after_it(tmp_path, monkeypatch):
    """Through submitit's real SLURM executor, with sbatch (and srun, which it looks for) stood in for by scripts
    that keep the batch scripts they are given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(tmp_path))
    parts = [dataclasses.replace(p, estimate_s=s) for p, s in zip(toy_parts(3), (600.0, 1800.0, 1200.0))]
    launch = jobs.Launch("slurm", workers=2, partition="gpu", folder=str(tmp_path / "submitit"))
    submitted = jobs.submit(parts, launch, scale="smoke", cache_root=tmp_path / "cache")
    assert [s.job_id for s in submitted] == ["101_0", "101_1", "101_2", "102"]
    assert [s.submission().args[0] for s in submitted[:3]] == [parts[1], parts[2], parts[0]]  # longest first
    array, book = (tmp_path / "sbatch-101.sh").read_text(), (tmp_path / "sbatch-102.sh").read_text()
    for line in ("--array=0-2%2", "--partition=gpu", "--gpus-per-node=1", "--time=55"):  # 1.5 × 30 min + 10
        assert f"#SBATCH {line}\n" in array, line
    assert "#SBATCH --dependency=afterok:101\n" in book and "gpus" not in book
    assert jobs.task_minutes(dataclasses.replace(launch, time_min=90), parts) == 90
    with pytest.raises(ConfigError):
        jobs.Launch("pbs")


def test_the_notebooks_job_refuses_while_a_job_is_missing_from_the_cache(tmp_path):
    with pytest.raises(RuntimeError, match="missing from the cache"):
        jobs.build_book("smoke", None, tmp_path / "cache", toy_parts(3))


# ------------------------------------------------------------------------------------------------- leases

def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def plant(path, host: str, pid: int, age_s: float = 0.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{"token": "planted", "host": "{host}", "pid": {pid}}}')
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_lease_is_exclusive_while_its_holder_lives_and_taken_over_when_stale(tmp_path):
    path = tmp_path / "leases" / "job.lease"
    held = jobs.acquire_lease(path, "job")
    assert held is not None and held.ours()
    assert jobs.acquire_lease(path, "job") is None  # a live holder (this process)
    held.release()
    assert not path.exists()
    here = socket.gethostname()
    for host, pid, age, taken in [(here, dead_pid(), 0, True),  # its holder is dead
                                  (here, os.getpid(), 0, False),  # alive
                                  ("another-host", 1, 0, False),  # elsewhere, renewed just now
                                  ("another-host", 1, 2 * jobs.LEASE_EXPIRY_S, True)]:  # elsewhere, not renewed
        plant(path, host, pid, age)
        lease = jobs.acquire_lease(path, "job")
        assert (lease is not None) == taken, (host, pid, age)
        if lease is not None:
            assert lease.ours() and jobs.read_lease(path)["pid"] == os.getpid()
            lease.release()
    path.write_text("")  # a lease being written: judged by its age
    assert jobs.acquire_lease(path, "job") is None
    os.utime(path, (time.time() - 2 * jobs.LEASE_EXPIRY_S,) * 2)
    lease = jobs.acquire_lease(path, "job")
    assert lease is not None
    plant(path, "another-host", 1)  # taken over meanwhile: the old holder neither renews nor removes it
    assert not lease.renew()
    lease.release()
    assert jobs.read_lease(path)["token"] == "planted"
    assert list(path.parent.iterdir()) == [path]  # no takeover link left behind


def test_a_worker_skips_a_job_another_holds_and_comes_back_to_wait_for_it(tmp_path, one_thread):
    cache = RunCache(tmp_path / "cache")
    held_job, free_job = toy_parts(6)[:2]
    lease = jobs.acquire_lease(jobs.lease_path(cache, held_job), "the other worker")  # the other worker's
    outcomes, failures = [], []

    def run() -> None:
        try:
            outcomes.extend(jobs.work([held_job, free_job], device="cpu", cache_root=cache.root, poll_s=0.1,
                                      progress=False))
        except Exception as err:  # noqa: BLE001 - reported by the test
            failures.append(err)

    worker = threading.Thread(target=run)
    worker.start()
    while jobs.missing_members(free_job, cache) and worker.is_alive():
        time.sleep(0.1)
    assert not failures and not jobs.missing_members(free_job, cache), failures
    assert jobs.missing_members(held_job, cache) == list(held_job.member_keys)  # skipped, not trained
    assert worker.is_alive()  # waiting for the held job
    sweep, _ = jobs.resolve(held_job)
    with jobs.holding(lease):
        jobs.train_job(sweep, held_job, device="cpu", cache=cache, progress=False)  # the other worker trains it
    worker.join()
    assert [(o.job, o.outcome, o.waited) for o in outcomes] == [(free_job.name, "trained", False),
                                                                 (held_job.name, "cached", True)]
    assert list((cache.root / "leases").iterdir()) == []


def test_train_group_trains_exactly_one_part_into_the_cache(tmp_path, monkeypatch, capsys, one_thread):
    monkeypatch.setenv("NHT_CACHE", str(tmp_path / "cache"))
    part = jobs.groups(TOY, "smoke")[0].pieces(6)[5]
    assert main(["train-group", TOY, "0", "--part", "6/6", "-p", "scale", "smoke", "--device", "cpu"]) == 0
    assert RunCache().keys() == sorted(part.member_keys)
    assert f"{part.name}: trained" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- local executor build

def test_two_local_executor_workers_fill_the_cache_a_one_process_build_does(tmp_path):
    parts = toy_parts(2)  # a worker's batched call costs about as much for 6 small members as for 12: two parts
    threads = max(1, (os.cpu_count() or 1) // 2)  # what each of the two workers gets
    launch = jobs.Launch("local", workers=2, device="cpu", folder=str(tmp_path / "submitit"), book=False)
    submitted = jobs.submit(parts, launch, scale="smoke", cache_root=tmp_path / "workers", poll_s=0.5)
    outcomes = [o for worker in submitted for o in worker.result()]
    trained = sorted(o.job for o in outcomes if o.outcome == "trained")
    assert trained == sorted(p.name for p in parts)  # each job trained once, by one of the workers
    assert len({o.pid for o in outcomes}) == 2

    alone = RunCache(tmp_path / "alone")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for sweep in CHAPTERS[TOY].sweeps("smoke"):  # as `nht-book build` trains a chapter: one process
            sweep.run(device="cpu", progress=False, cache=alone)
    finally:
        torch.set_num_threads(before)
    workers = RunCache(tmp_path / "workers")
    assert workers.keys() == alone.keys() == sorted(k for p in parts for k in p.member_keys)
    for key in alone.keys():
        pd.testing.assert_frame_equal(table(workers, key), table(alone, key))
    assert list((workers.root / "leases").iterdir()) == []
