import errno
import io
import json
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib import paths
from nhtlib.engine.cache import CHECKPOINT_KEYS, CacheNotWritableError, RunCache, load_checkpoint, run_key, run_source_hash, save_checkpoint

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=6, n_train=32, n_test=32)
CFG = nht.RunConfig(TASK, nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=4))


def entry_key(cache: RunCache) -> str:
    """The key of the cache's only entry (the sweep's key recipe is the sweep's business)."""
    keys = [p.stem for p in cache.runs.glob("*.json")]
    assert len(keys) == 1, keys
    return keys[0]


def cached_entry(tmp_path) -> tuple[RunCache, str]:
    cache = RunCache(tmp_path)
    nht.run([CFG], cache=cache, progress=False)
    return cache, entry_key(cache)


def test_hit_and_miss(tmp_path):
    cache = RunCache(tmp_path)
    first = nht.run([CFG], cache=cache, progress=False)
    key = entry_key(cache)
    meta = cache.meta(key)
    for field in ("config", "table_sha256", "nhtlib_version", "nhtlib_source_hash", "git_commit", "device",
                  "wall_time_s"):
        assert field in meta
    assert meta["config"] == CFG.to_dict()
    # a hit does not train: poison the training function and run again
    orig = nht.sweep._train_batch
    nht.sweep._train_batch = lambda *a, **k: pytest.fail("a cached run was retrained")
    try:
        second = nht.run([CFG], cache=cache, progress=False)
    finally:
        nht.sweep._train_batch = orig
    pd.testing.assert_frame_equal(first, second)
    # another config is a miss
    other = CFG.replace(seed=1)
    assert cache.load(run_key(other.to_dict())) is None


def test_key_depends_on_config_and_source(monkeypatch):
    k1 = run_key(CFG.to_dict())
    assert k1 == run_key(CFG.to_dict())
    assert k1 != run_key(CFG.replace(seed=3).to_dict())
    monkeypatch.setattr(nht.cache, "run_source_hash", lambda: "edited-library")
    assert run_key(CFG.to_dict()) != k1
    assert len(run_source_hash()) == 16


def test_corrupted_entry_is_recomputed(tmp_path):
    cache, key = cached_entry(tmp_path)
    cache.table_file(key).write_bytes(b"not a parquet file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    assert any("corrupted" in str(w.message) for w in caught)
    assert not (tmp_path / "runs" / f"{key}.json").exists()
    table = nht.run([CFG], cache=cache, progress=False)
    assert len(table) == 5 and cache.load(key) is not None


def test_metadata_mismatch_counts_as_corrupted(tmp_path):
    cache, key = cached_entry(tmp_path)
    meta_path = tmp_path / "runs" / f"{key}.json"
    meta = json.loads(meta_path.read_text())
    meta["rows"] = 999
    meta_path.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="corrupted"):
        assert cache.load(key) is None


def test_read_error_is_raised_not_treated_as_corruption(tmp_path, monkeypatch):
    """Defect 1: a process out of file handles (EMFILE) deleted every valid entry as 'corrupted'."""
    cache, key = cached_entry(tmp_path)
    files = sorted(cache.runs.glob(f"{key}.*"))

    def no_handles(self):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Path, "read_bytes", no_handles)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'corrupted' warning either
        with pytest.raises(OSError, match="Too many open files") as info:
            cache.load(key)
    assert info.value.errno == errno.EMFILE and key in info.value.filename
    assert sorted(cache.runs.glob(f"{key}.*")) == files
    monkeypatch.undo()
    assert len(cache.load(key)) == 5


def silent_bit_flip(data: bytes, table: pd.DataFrame) -> bytes:
    """The parquet bytes with one bit flipped where the file still parses, with changed values: what a cache
    without a checksum served as a valid result."""
    for pos in range(len(data) // 4, len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x40
        try:
            parsed = pd.read_parquet(io.BytesIO(bytes(damaged)))
        except Exception:  # noqa: BLE001 - this bit breaks the file: an old cache noticed that one
            continue
        if parsed.shape == table.shape and not parsed.equals(table):
            return bytes(damaged)
    raise AssertionError("no silent bit flip found")


def test_flipped_bit_in_table_is_detected_and_recomputed(tmp_path):
    """Defect 2: one flipped bit in a cached parquet file was served with changed values."""
    cache, key = cached_entry(tmp_path)
    original = cache.load(key)
    table_path = cache.table_file(key)
    table_path.write_bytes(silent_bit_flip(table_path.read_bytes(), original))
    with pytest.warns(UserWarning, match=f"entry {key} .*corrupted.*sha256"):
        assert cache.load(key) is None
    assert not list(cache.runs.glob(f"{key}.*"))  # that entry only, and completely
    table = nht.run([CFG], cache=cache, progress=False)
    pd.testing.assert_frame_equal(cache.load(key).drop(columns="wall_s"), original.drop(columns="wall_s"))
    assert len(table) == 5


def test_entry_without_checksum_counts_as_corrupt(tmp_path):
    cache, key = cached_entry(tmp_path)
    meta_path = cache.runs / f"{key}.json"
    meta = json.loads(meta_path.read_text())
    del meta["table_sha256"]
    meta_path.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="corrupted.*older nhtlib"):
        assert cache.load(key) is None
    assert not meta_path.exists()


def test_duplicate_configs_train_once(tmp_path):
    cache = RunCache(tmp_path)
    table = nht.run([CFG, CFG], cache=cache, progress=False)
    assert sorted(table.run.unique()) == [0, 1]
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1


def test_extra_metrics_are_part_of_the_key(tmp_path):
    cache = RunCache(tmp_path)

    def weight_count(model, data):
        n = sum(p[0].numel() for p in model.parameters())
        return {"n_params": torch.full((1,), float(n))}

    plain = nht.run([CFG], cache=cache, progress=False)
    with_metric = nht.run([CFG], cache=cache, progress=False, extra_metrics=weight_count)
    assert "n_params" not in plain.columns and "n_params" in with_metric.columns
    assert (with_metric.n_params == 6 * 8 + 8 + 8 * 2 + 2).all()
    renamed = nht.run([CFG], cache=cache, progress=False, extra_metrics=weight_count, extra_metrics_key="v2")
    assert len(list((tmp_path / "runs").glob("*.json"))) == 3 and "n_params" in renamed.columns


# checkpoints (defect 3: a corrupt checkpoint blocked every re-run with an OSError naming no path)

def a_state() -> dict:
    return {"params": [torch.arange(6.0)], "buffers": [], "optimizer": {"state": {}}, "sampler": {"seed": 1},
            "rows": [[{"step": 0}]], "step": 7, "elapsed": 1.5}


def test_checkpoint_roundtrip_and_missing(tmp_path):
    path = tmp_path / "ck.pt"
    assert load_checkpoint(path) is None
    save_checkpoint(a_state(), path)
    state = load_checkpoint(path, map_location="cpu")
    assert set(state) == CHECKPOINT_KEYS and state["step"] == 7 and torch.equal(state["params"][0], torch.arange(6.0))
    with pytest.raises(ValueError, match="lacks.*'step'"):
        save_checkpoint({k: v for k, v in a_state().items() if k != "step"}, path)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing keys"])
def test_corrupt_checkpoint_is_discarded(tmp_path, damage):
    path = tmp_path / "ck.pt"
    save_checkpoint(a_state(), path)
    if damage == "garbage":
        path.write_bytes(os.urandom(256))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-40])
    else:
        torch.save({"params": []}, path)
    with pytest.warns(UserWarning, match=f"discarding corrupt checkpoint {path}.*restarts from step 0"):
        assert load_checkpoint(path) is None
    assert not path.exists()


def test_unreadable_checkpoint_is_raised_and_kept(tmp_path, monkeypatch):
    path = tmp_path / "ck.pt"
    save_checkpoint(a_state(), path)
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match="checkpoint") as info:
        load_checkpoint(path)
    assert info.value.filename == str(path) and path.exists()


def test_resume_from_a_corrupt_checkpoint_restarts(tmp_path):
    """The training loop (via the cache's checkpoint path) warns and trains from step 0 instead of failing."""
    cache = RunCache(tmp_path)
    reference = nht.run([CFG], cache=RunCache(tmp_path / "ref"), progress=False)
    real_path = cache.checkpoint_path
    written = []

    def corrupt_checkpoint_path(batch_key):
        path = real_path(batch_key)
        path.write_bytes(b"\x00" * 64)  # what a crash mid-write on some filesystems leaves
        written.append(path)
        return path

    cache.checkpoint_path = corrupt_checkpoint_path
    with pytest.warns(UserWarning, match="discarding corrupt checkpoint"):
        table = nht.run([CFG], cache=cache, progress=False)
    assert written
    pd.testing.assert_frame_equal(table.drop(columns="wall_s"), reference.drop(columns="wall_s"))


# writability (defect 4: a read-only cache failed only after training; NHT_RESULTS errors did not name it)

def test_unwritable_cache_is_reported_before_training(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("a regular file, not a folder")
    cache = RunCache(tmp_path / "file" / "cache")  # fails for root too, unlike chmod
    with pytest.raises(CacheNotWritableError, match="file/cache/runs.*NHT_RESULTS to a writable folder") as info:
        cache.check_writable()
    assert isinstance(info.value, OSError)
    monkeypatch.setattr(nht.sweep, "_train_batch", lambda *a, **k: pytest.fail("trained into an unwritable cache"))
    with pytest.raises(CacheNotWritableError):
        nht.run([CFG], cache=cache, progress=False)


def test_read_only_cache_folder(tmp_path):
    cache = RunCache(tmp_path / "cache")
    cache.check_writable()  # creates runs/ and checkpoints/, leaves no probe behind
    assert not list(cache.runs.iterdir()) and not list(cache.checkpoints.iterdir())
    cache.runs.chmod(0o555)
    try:
        if os.access(cache.runs, os.W_OK):
            pytest.skip("running as root: chmod does not make a folder read-only")
        with pytest.raises(CacheNotWritableError, match=str(cache.runs)):
            cache.check_writable()
    finally:
        cache.runs.chmod(0o755)


def test_unwritable_results_root_names_the_variable(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("NHT_RESULTS", str(tmp_path / "file" / "results"))
    with pytest.raises(paths.NotWritableError, match=r"NHT_RESULTS=.*file/results.*set NHT_RESULTS to a writable"):
        paths.results_root()
    with pytest.raises(OSError, match="NHT_RESULTS"):
        RunCache()
