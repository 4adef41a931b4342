"""No silent wrong results: behaviours under faults that already hold and must keep holding.

Concurrent runs of one config, Ctrl-C then re-run, bitwise reproducibility (fresh caches, thread counts, member
counts), a deleted or corrupted cache table, and clear messages for bad parameters and missing data.
(kill -9 then resume is tested in test_train.py.)
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib.config import ConfigError

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
MODEL = nht.models.config("mlp", hidden=(16,))

# A short single-member batch (seed 2, 20 steps) followed by a longer batch of two members (seeds 0, 1): two
# batches, so a run interrupted in the second one has finished members and unfinished ones.
# argv: mode (slow|fast) out.parquet threads [barrier_dir ident]
FAULT_SCRIPT = textwrap.dedent("""
    import json, pathlib, sys, time, torch
    import nhtlib as nht
    mode, out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads
    task = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
    model = nht.models.config("mlp", hidden=(16,))
    cfg = nht.TrainConfig(steps=300, n_logs=30, batch_size=16, lr=1e-2, checkpoint_every=10)
    configs = [nht.RunConfig(task, model, cfg.replace(steps=20, n_logs=4, weight_decay=0.1), seed=2)]
    configs += nht.grid(nht.RunConfig(task, model, cfg), seeds=[0, 1], weight_decays=[0.5])
    if mode == "slow":  # slow each step down so the parent can interrupt us mid-run
        orig = nht.optim.BatchedAdamW.step
        def step(self, *a, **k):
            time.sleep(0.01)
            return orig(self, *a, **k)
        nht.optim.BatchedAdamW.step = step
    if len(sys.argv) > 4:  # start training together with the other process
        barrier, ident = pathlib.Path(sys.argv[4]), sys.argv[5]
        (barrier / f"ready-{ident}").touch()
        deadline = time.time() + 60
        while len(list(barrier.glob("ready-*"))) < 2 and time.time() < deadline:
            time.sleep(0.01)
    started = time.time()
    table = nht.run(configs, progress=False)
    ended = time.time()
    table.to_parquet(out)
    pathlib.Path(out + ".times.json").write_text(json.dumps({"start": started, "end": ended}))
""")
N_MEMBERS = 3
SHORT_SEED, SHORT_STEPS = 2, 20


def _script(folder: Path) -> Path:
    path = folder / "faults.py"
    if not path.exists():
        path.write_text(FAULT_SCRIPT)
    return path


def _env(results: Path) -> dict:
    return {**os.environ, "NHT_RESULTS": str(results), "OMP_NUM_THREADS": "1"}


def _run_script(folder: Path, results: Path, out: Path, *, mode: str = "fast", threads: int = 1) -> pd.DataFrame:
    subprocess.run([sys.executable, str(_script(folder)), mode, str(out), str(threads)], env=_env(results),
                   check=True, timeout=120)
    return pd.read_parquet(out)


def _strip(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=["wall_s"]).reset_index(drop=True)


def _stray_files(cache_root: Path) -> list[Path]:
    """Temporary or half-written files anywhere in the cache (the runs folder's lock file is not one)."""
    return [p for p in cache_root.rglob("*") if p.is_file() and p.name != ".lock"
            and (p.name.startswith(".") or ".tmp" in p.name)]


@pytest.fixture(scope="module")
def clean_table(tmp_path_factory) -> pd.DataFrame:
    """FAULT_SCRIPT run uninterrupted, alone, with one thread, in a clean results folder."""
    folder = tmp_path_factory.mktemp("clean")
    return _run_script(folder, folder / "results", folder / "clean.parquet")


def test_two_concurrent_runs_of_one_config_both_finish_correctly(tmp_path, clean_table):
    """Two processes running the same configs in one results folder both finish with the clean result."""
    results, barrier = tmp_path / "shared", tmp_path / "barrier"
    barrier.mkdir()
    script = _script(tmp_path)
    procs = [subprocess.Popen([sys.executable, str(script), "slow", str(tmp_path / f"out{i}.parquet"), "1",
                               str(barrier), str(i)], env=_env(results)) for i in range(2)]
    try:
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0]
    times = [json.loads((tmp_path / f"out{i}.parquet.times.json").read_text()) for i in range(2)]
    assert max(t["start"] for t in times) < min(t["end"] for t in times), "the two runs did not overlap"
    for i in range(2):
        pd.testing.assert_frame_equal(_strip(pd.read_parquet(tmp_path / f"out{i}.parquet")), _strip(clean_table),
                                      check_exact=True)
    cache = results / "cache"
    jsons, parquets = sorted((cache / "runs").glob("*.json")), sorted((cache / "runs").glob("*.parquet"))
    assert len(jsons) == N_MEMBERS and [p.name.split(".")[0] for p in parquets] == [p.stem for p in jsons]
    assert not list((cache / "checkpoints").glob("*")), "a checkpoint was left behind"
    assert not _stray_files(cache), _stray_files(cache)


def test_ctrl_c_then_rerun_recovers(tmp_path, clean_table):
    """SIGINT mid-run exits non-zero, leaves no entry for unfinished members and no temp files; a re-run recovers."""
    results = tmp_path / "interrupted"
    cache = results / "cache"
    # the child starts with SIGINT at its default, as from a terminal: a test runner started in the background by a
    # non-interactive shell ignores SIGINT, and an ignored signal is inherited (the child would then run to the end)
    proc = subprocess.Popen([sys.executable, str(_script(tmp_path)), "slow", str(tmp_path / "never.parquet"), "1"],
                            env=_env(results), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list((cache / "runs").glob("*.json")):
            time.sleep(0.05)  # the short batch has finished
        while time.time() < deadline and not list((cache / "checkpoints").glob("*.pt")):
            time.sleep(0.05)  # the long batch has written its first checkpoint
        time.sleep(0.5)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code != 0
    assert not (tmp_path / "never.parquet").exists()
    jsons, parquets = sorted((cache / "runs").glob("*.json")), sorted((cache / "runs").glob("*.parquet"))
    assert len(jsons) == 1, "only the finished member (the short batch) may be cached"
    assert nht.RunCache(cache).load(jsons[0].stem).step.max() == SHORT_STEPS
    assert [p.name.split(".")[0] for p in parquets] == [p.stem for p in jsons], \
        "a table without metadata was left behind"
    assert not _stray_files(cache), _stray_files(cache)
    for checkpoint in (cache / "checkpoints").glob("*.pt"):  # what is left must be readable
        torch.load(checkpoint, weights_only=True)
    rerun = _run_script(tmp_path, results, tmp_path / "rerun.parquet")
    pd.testing.assert_frame_equal(_strip(rerun), _strip(clean_table), check_exact=True)
    assert len(list((cache / "runs").glob("*.json"))) == N_MEMBERS
    assert not list((cache / "checkpoints").glob("*")) and not _stray_files(cache)


DET_CFG = nht.TrainConfig(steps=100, n_logs=10, batch_size=16, lr=1e-2)


def test_same_seed_is_bitwise_identical_in_fresh_caches(tmp_path):
    """The same configs trained twice in fresh caches give bitwise-identical tables."""
    configs = nht.grid(nht.RunConfig(TASK, MODEL, DET_CFG), seeds=[0, 1], weight_decays=[0.5])
    first = nht.run(configs, cache=nht.RunCache(tmp_path / "a"), progress=False)
    second = nht.run(configs, cache=nht.RunCache(tmp_path / "b"), progress=False)
    pd.testing.assert_frame_equal(_strip(first), _strip(second), check_exact=True)


def test_same_seed_is_bitwise_identical_across_thread_counts(tmp_path, clean_table):
    """torch.set_num_threads(2) gives the same bitwise table as one thread (clean_table)."""
    two = _run_script(tmp_path, tmp_path / "results2", tmp_path / "two.parquet", threads=2)
    pd.testing.assert_frame_equal(_strip(two), _strip(clean_table), check_exact=True)


@pytest.mark.parametrize("cfg", [DET_CFG, DET_CFG.replace(optimizer="sgd", momentum=0.9, batch_size=None)],
                         ids=["adamw-minibatch", "sgd-fullbatch"])
def test_member_alone_equals_member_in_a_batch(tmp_path, monkeypatch, cfg):
    """A member trained alone is bitwise identical to the same member trained in a batch of 3."""
    member = nht.RunConfig(TASK, MODEL, cfg.replace(weight_decay=0.5), seed=0)
    others = [member.replace(seed=1, train=cfg.replace(weight_decay=0.1)),
              member.replace(seed=2, train=cfg.replace(weight_decay=2.0))]
    batches: list[int] = []
    orig = nht.sweep._train_batch

    def counting(batch_configs, *a, **k):
        batches.append(len(batch_configs))
        return orig(batch_configs, *a, **k)

    monkeypatch.setattr(nht.sweep, "_train_batch", counting)
    alone = nht.run([member], cache=nht.RunCache(tmp_path / "alone"), progress=False)
    batch = nht.run([member, *others], cache=nht.RunCache(tmp_path / "batch"), progress=False)
    assert batches == [1, 3], "the three members must be trained as one batch"
    in_batch = batch[batch.run == 0][list(alone.columns)]
    pd.testing.assert_frame_equal(_strip(in_batch), _strip(alone), check_exact=True)


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated"])
def test_damaged_cache_table_is_detected_and_recomputed(monkeypatch, damage):
    """A deleted or corrupted runs/<key>.<sha>.parquet is detected; the next run recomputes it to the same table."""
    configs = nht.grid(nht.RunConfig(TASK, MODEL, DET_CFG.replace(steps=40, n_logs=4)), seeds=[0, 1])
    runs = nht.RunCache().runs
    nht.run(configs[:1], progress=False)
    first_entry = set(runs.glob("*.json"))
    before = nht.run(configs, progress=False)
    (meta_path,) = set(runs.glob("*.json")) - first_entry  # the entry of member 1 (seed 1)
    table_path = nht.RunCache().table_file(meta_path.stem)
    assert table_path.exists()
    if damage == "deleted":
        table_path.unlink()
    elif damage == "garbage":
        table_path.write_bytes(b"these bytes are not a parquet file" * 10)
    else:
        table_path.write_bytes(table_path.read_bytes()[: table_path.stat().st_size // 2])
    trained: list[int] = []
    orig = nht.sweep._train_batch

    def counting(batch_configs, *a, **k):
        trained.extend(c.seed for c in batch_configs)
        return orig(batch_configs, *a, **k)

    monkeypatch.setattr(nht.sweep, "_train_batch", counting)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*corrupt", category=UserWarning)
        after = nht.run(configs, progress=False)
    assert trained == [1], "exactly the damaged member must be retrained"
    pd.testing.assert_frame_equal(_strip(after), _strip(before), check_exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = nht.run(configs, progress=False)  # the entry is whole again: read back without warning or training
    assert trained == [1] and meta_path.exists() and nht.RunCache().table_file(meta_path.stem).exists()
    pd.testing.assert_frame_equal(again, after, check_exact=True)


def test_bad_chapter_params_fail_with_clear_messages():
    """Bad seed, scale, device and unknown parameters fail with messages naming the field and what is allowed."""
    with pytest.raises(ConfigError, match="seed"):
        nht.ChapterParams(seed=-1)
    with pytest.raises(ConfigError, match="scale") as err:
        nht.ChapterParams(scale="huge")
    for scale in ("smoke", "cpu", "paper"):
        assert scale in str(err.value)
    with pytest.raises(ConfigError, match="device") as err:
        nht.resolve_device("tpu")
    for device in ("cpu", "cuda"):
        assert device in str(err.value)
    with pytest.raises(TypeError, match="sede"):
        nht.ChapterParams(sede=1)


def test_missing_data_folders_fail_with_clear_messages(tmp_path):
    """A missing data root, data set folder or CIFAR layout raises FileNotFoundError saying where to put the data."""
    with pytest.raises(FileNotFoundError, match="data_root") as err:
        nht.paths.data_root("/no/such/folder")
    assert "NHT_DATA_ROOT" in str(err.value)
    with pytest.raises(FileNotFoundError, match="cifar10"):
        nht.paths.data_root(str(tmp_path), need="cifar10")
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py") as err:
        nht.data.cifar.CIFARTask(data_root=str(tmp_path)).build(0)
    assert "train" in str(err.value) and "test" in str(err.value)  # the ImageFolder layout
