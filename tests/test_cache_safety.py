"""The run cache runs no planted code, skips and names damaged files, waits for its lock a bounded time, records
the environment of each entry, and can be shared by a group (issue 26 items 1, 3, 6; issue 25 item 5).

Before (commit 102c415): a pickle planted at a checkpoint path ran its payload (torch.load(weights_only=False)); a
truncated metadata file made `RunCache.meta` raise a JSON error naming no file; a held lock made every other process
hang without a word; entries were written 0600, so no other user could read them; no entry said what it ran on.
"""
import json
import os
from copy import deepcopy
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib import RunCache, paths
from nhtlib.config import stable_hash

# by their short names, which the library had before its layers (so that this file runs at the old commit too)
cache_module, train_module = nht.cache, nht.train
load_checkpoint, save_checkpoint = cache_module.load_checkpoint, cache_module.save_checkpoint

# (nht.data.toy at the old commit)
TASK = getattr(nht.data, "sparse_parity", None) or nht.data.toy
TASK = TASK.SparseParityTask(n_bits=6, n_train=32, n_test=32)
CFG = nht.RunConfig(TASK, nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=4))
NOBODY = 65534  # the second user of the sharing test (uid and gid of 'nobody' / 'nogroup')


def a_state(**changes) -> dict:
    state = {"params": [torch.arange(6.0)], "buffers": [], "optimizer": {"step": 3, "exp_avg": [torch.zeros(2)]},
             "sampler": {"generators": [torch.Generator().get_state()], "perms": [None], "positions": [0]},
             "rows": [[{"step": 0, "train_loss": 0.5}]], "step": 7, "elapsed": 1.5}
    return {**state, **changes}


class Payload:
    """What an attacker plants: unpickling it calls exec, which creates `marker`."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


def plant(path: Path, marker: Path, form: str) -> None:
    """A checkpoint at `path` whose payload creates `marker` when unpickled: a torch.save zip of a state with every
    checkpoint key (so the old loader accepted it), or a bare pickle."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = a_state(rows=[[{"step": 0, "x": Payload(marker)}]])
    if form == "torch.save":
        torch.save(state, path)
    else:
        import pickle
        path.write_bytes(pickle.dumps(state))


# ------------------------------------------------------------------------------------------ planted checkpoints

@pytest.mark.parametrize("form", ["torch.save", "bare pickle"])
def test_planted_checkpoint_is_refused_by_name_and_never_runs(tmp_path, form):
    path, marker = tmp_path / "ck.pt", tmp_path / "payload-ran"
    plant(path, marker, form)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = load_checkpoint(path)
    assert not marker.exists(), "the planted payload ran"
    assert state is None and not path.exists()
    messages = [str(w.message) for w in caught]
    named = re.compile(f"refusing checkpoint {re.escape(str(path))}: it holds [^:]*builtins.exec[^:]*, "
                       "not plain tensors")
    assert any(named.match(m) for m in messages), messages


def test_planted_checkpoint_at_the_path_a_run_computes_is_refused(tmp_path):
    """The attack of the issue: the checkpoint path follows from the config; the next run must refuse the file,
    train from step 0 and give the result of a clean run."""
    cache, marker = RunCache(tmp_path / "cache"), tmp_path / "payload-ran"
    # the sweep's recipe, with the source hash it uses (the library had no source hash at the old commit)
    source = {"source": nht.sweep.run_code()} if hasattr(nht.sweep, "run_code") else {}
    keys = nht.sweep.member_keys([CFG], **source)
    batch_key = stable_hash(sorted(keys), length=24)
    path = cache.checkpoint_path(batch_key)
    plant(path, marker, "torch.save")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            table = nht.run([CFG], cache=cache, progress=False)
        finally:  # checked first: a loader that ran the payload may then fail on the planted state
            assert not marker.exists(), "the planted payload ran during the run"
    messages = [str(w.message) for w in caught]
    assert any(m.startswith(f"refusing checkpoint {path}: it holds builtins.exec") for m in messages), messages
    reference = nht.run([CFG], cache=RunCache(tmp_path / "clean"), progress=False)
    pd.testing.assert_frame_equal(table.drop(columns="wall_s"), reference.drop(columns="wall_s"))


def test_checkpoints_the_loop_writes_load_with_weights_only(tmp_path, monkeypatch):
    """Every checkpoint train() writes (AdamW and SGD with momentum states, sampler RNG, rows) reads back under
    weights_only=True with no warning and equal to what was saved."""
    saved = []

    def keep_a_copy(state, path):
        save_checkpoint(state, path)
        copy = tmp_path / f"copy-{len(saved)}.pt"
        shutil.copyfile(path, copy)
        saved.append((deepcopy(state), copy))  # the loop goes on appending to its rows

    monkeypatch.setattr(train_module, "save_checkpoint", keep_a_copy)
    for train_cfg in (nht.TrainConfig(steps=30, n_logs=6, batch_size=8, sampling="epoch", checkpoint_every=10),
                      nht.TrainConfig(steps=30, n_logs=6, optimizer="sgd", momentum=0.9, checkpoint_every=10)):
        nht.run([CFG.replace(train=train_cfg)], cache=RunCache(tmp_path / train_cfg.optimizer), progress=False)
    assert len(saved) == 4
    for state, copy in saved:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loaded = load_checkpoint(copy)
        assert loaded["step"] in (10, 20) and loaded["rows"] == state["rows"]
        assert torch.equal(loaded["sampler"]["generators"][0], state["sampler"]["generators"][0])
        torch.load(copy, weights_only=True)


@pytest.mark.parametrize("value, named", [(np.float64(1.5), "state['elapsed'] is a numpy.float64"),
                                          (np.zeros(2), "state['elapsed'] is a numpy.ndarray"),
                                          (pd.DataFrame({"a": [1]}), "state['elapsed'] is a pandas")])
def test_a_value_weights_only_cannot_read_is_refused_when_saving(tmp_path, value, named):
    with pytest.raises(TypeError, match=re.escape(named) + ".*weights_only=True"):
        save_checkpoint(a_state(elapsed=value), tmp_path / "ck.pt")
    with pytest.raises(TypeError, match=r"state\['rows'\]\[0\]\[0\]\['step'\] is a numpy.int64"):
        save_checkpoint(a_state(rows=[[{"step": np.int64(3)}]]), tmp_path / "ck.pt")
    assert not (tmp_path / "ck.pt").exists()


# ---------------------------------------------------------------------------------------------- damaged files

def stored_entry(cache: RunCache, key: str = "k" * 24, rows: int = 3) -> tuple[str, pd.DataFrame]:
    table = pd.DataFrame({"step": range(rows), "train_loss": np.linspace(1.0, 0.1, rows)})
    cache.save(key, table, {"what": "a fixture"}, device="cpu", wall_time_s=0.5)
    return key, table


@pytest.mark.parametrize("damage", ["truncated", "not an object", "other key"])
def test_damaged_metadata_is_a_miss_naming_the_file(tmp_path, damage):
    cache = RunCache(tmp_path)
    key, _ = stored_entry(cache)
    meta_path = cache.runs / f"{key}.json"
    text = meta_path.read_text()
    meta_path.write_text({"truncated": text[: len(text) // 2], "not an object": "[1, 2]",
                          "other key": json.dumps({**json.loads(text), "key": "x" * 24})}[damage])
    with pytest.warns(UserWarning, match=f"ignoring the run cache metadata {re.escape(str(meta_path))}"):
        assert cache.meta(key) is None
    with pytest.warns(UserWarning):
        assert cache.table_file(key) is None
    with pytest.warns(UserWarning, match=f"entry {key} in {re.escape(str(meta_path))} is corrupted"):
        assert cache.load(key) is None  # load repairs: the entry is deleted
    assert not list(cache.runs.glob(f"{key}.*"))


def test_a_truncated_metadata_file_neither_stops_counting_nor_running(tmp_path):
    """What the chapter runner and the build do (`Sweep.cached` counts with `RunCache.meta`), then a run."""
    cache = RunCache(tmp_path)
    nht.run([CFG], cache=cache, progress=False)
    (key,) = cache.keys()
    meta_path = cache.runs / f"{key}.json"
    meta_path.write_bytes(meta_path.read_bytes()[:40])
    sweep = nht.sweep.Sweep("one", (CFG,))
    with pytest.warns(UserWarning, match=re.escape(str(meta_path))):
        assert sweep.cached(cache) == (1, 0)
    with pytest.warns(UserWarning, match=re.escape(str(meta_path))):
        table = sweep.run(cache=cache, progress=False)
    assert len(table) == 5 and cache.meta(key) is not None


# ------------------------------------------------------------------------------------------------- the lock

HOLDER_SCRIPT = textwrap.dedent("""
    import pathlib, sys, time
    import nhtlib as nht
    cache = nht.RunCache(sys.argv[1])
    with cache._locked(exclusive=True):
        pathlib.Path(sys.argv[2]).touch()
        time.sleep(120)
""")


def bounded(call, seconds: float = 60.0):
    """call() in a thread, waited for `seconds`: (returned, raised). A call still blocked fails the test (the old
    lock waited forever); the thread ends when the holder is stopped."""
    outcome = {}

    def target():
        try:
            outcome["returned"] = call()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            outcome["raised"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still waiting for the cache lock after {seconds:g} s: the lock has no timeout")
    return outcome.get("returned"), outcome.get("raised")


def test_a_held_lock_times_out_naming_the_lock_file_and_its_holder(tmp_path, monkeypatch):
    cache = RunCache(tmp_path / "cache")
    key, _ = stored_entry(cache)
    script, ready = tmp_path / "hold.py", tmp_path / "holding"
    script.write_text(HOLDER_SCRIPT)
    holder = subprocess.Popen([sys.executable, str(script), str(cache.root), str(ready)])
    try:
        deadline = time.time() + 60
        while not ready.exists() and holder.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "the holder never took the lock"
        monkeypatch.setenv("NHT_LOCK_TIMEOUT", "0.5")
        for call in (lambda: cache.load(key), lambda: stored_entry(cache, "n" * 24)):
            _, raised = bounded(call)
            assert isinstance(raised, cache_module.CacheLockTimeout), raised
            message = str(raised)
            assert str(cache.runs / ".lock") in message and "within 0.5 s" in message
            assert f"pid {holder.pid} on host" in message and str(script) in message, message
            assert "NHT_LOCK_TIMEOUT" in message
    finally:
        holder.kill()
        holder.wait()
    monkeypatch.delenv("NHT_LOCK_TIMEOUT")
    assert len(cache.load(key)) == 3  # the killed holder's lock is gone with it; its stale record does no harm


def test_a_writer_blocked_by_a_reader_names_the_reader(tmp_path, monkeypatch):
    import fcntl

    cache = RunCache(tmp_path / "cache")
    stored_entry(cache)
    monkeypatch.setenv("NHT_LOCK_TIMEOUT", "0.3")
    with open(cache.runs / ".lock", "rb") as reader:  # another open file: it conflicts like another process
        fcntl.flock(reader, fcntl.LOCK_SH)
        _, raised = bounded(lambda: stored_entry(cache, "n" * 24))
    assert isinstance(raised, cache_module.CacheLockTimeout), raised
    message = str(raised)
    assert str(cache.runs / ".lock") in message and "exclusive, to store an entry" in message
    if Path("/proc/locks").exists():  # Linux lists flock holders: ours
        assert f"held by pid {os.getpid()} (readers" in message, message
    assert not (cache.runs / ".lock.holder").exists(), "a timed-out writer must not leave a holder record"


def test_lock_timeout_setting_is_checked(monkeypatch):
    monkeypatch.setenv("NHT_LOCK_TIMEOUT", "ten minutes")
    with pytest.raises(ValueError, match="NHT_LOCK_TIMEOUT='ten minutes' is not a number of seconds"):
        cache_module.lock_timeout(True)
    monkeypatch.delenv("NHT_LOCK_TIMEOUT")
    assert cache_module.lock_timeout(True) >= cache_module.lock_timeout(False) > 0


# --------------------------------------------------------------------------------------- environment, NHT_CACHE

def test_each_entry_records_its_environment(tmp_path):
    cache = RunCache(tmp_path)
    nht.run([CFG], cache=cache, progress=False)
    (key,) = cache.keys()
    env = cache.meta(key)["environment"]
    assert env == {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                   "cuda": None, "cudnn": None, "device": "cpu", "device_name": platform.processor() or "cpu"}


def test_nht_cache_names_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("NHT_CACHE", str(tmp_path / "shared-cache"))
    assert RunCache().root == tmp_path / "shared-cache"
    nht.run([CFG], progress=False)
    assert len(RunCache(tmp_path / "shared-cache").keys()) == 1
    assert not (paths.results_root() / "cache").exists()
    monkeypatch.delenv("NHT_CACHE")
    assert RunCache().root == paths.results_root() / "cache"


# --------------------------------------------------------------------------------------------- a shared cache

def as_another_user(work) -> str:
    """Run work() in a forked child as uid/gid NOBODY with umask 0002 (no other groups); '' on success, else the
    child's traceback. The child imports nothing new: the interpreter's files are not readable by that user."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.umask(0o002)
            work()
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else report or f"child exited with {status}"


@pytest.fixture
def group_folder():
    """A setgid folder of group NOBODY, writable by the group, outside pytest's root-only tmp folders."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the test switches to a second uid")
    folder = Path(tempfile.mkdtemp(prefix="nht-shared-cache-"))
    os.chown(folder, 0, NOBODY)
    folder.chmod(0o2775)
    old_umask = os.umask(0o002)  # the parent is a group member working the documented way
    try:
        yield folder
    finally:
        os.umask(old_umask)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("lock_mode", [None, 0o644])
def test_a_second_user_reads_and_adds_entries(group_folder, lock_mode):
    """lock_mode 0o644: a lock file the other user may not write (an older nhtlib's, or a umask-022 user's)."""
    cache = RunCache(group_folder / "cache")
    cache.check_writable()
    key, table = stored_entry(cache)
    assert len(cache.load(key)) == 3  # everything the child needs is imported now
    for path in (cache.runs / f"{key}.json", cache.table_file(key)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o664 and path.stat().st_gid == NOBODY, path
    if lock_mode is not None:
        (cache.runs / ".lock").chmod(lock_mode)
    theirs = pd.DataFrame({"step": [0, 5], "train_loss": [2.0, 1.0]})

    def second_user():
        assert os.getuid() == NOBODY
        pd.testing.assert_frame_equal(cache.load(key), table)
        assert cache.meta(key)["rows"] == 3
        cache.check_writable()
        cache.save("t" * 24, theirs, {"by": "nobody"}, device="cpu", wall_time_s=0.1)
        save_checkpoint(a_state(), cache.checkpoints / "theirs.pt")

    report = as_another_user(second_user)
    assert not report, report
    pd.testing.assert_frame_equal(cache.load("t" * 24), theirs)
    assert (cache.runs / f"{'t' * 24}.json").stat().st_uid == NOBODY
    assert load_checkpoint(cache.checkpoints / "theirs.pt")["step"] == 7
    assert sorted(cache.keys()) == sorted([key, "t" * 24])
