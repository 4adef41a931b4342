import json
import warnings

import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.cache import RunCache, run_key, source_hash

TASK = nht.data.toy.SparseParityTask(n_bits=6, n_train=32, n_test=32)
CFG = nht.RunConfig(TASK, nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=4))


def test_hit_and_miss(tmp_path):
    cache = RunCache(tmp_path)
    key = run_key(CFG.to_dict())
    assert cache.load(key) is None
    first = nht.run([CFG], cache=cache, progress=False)
    meta = cache.meta(key)
    for field in ("config", "nhtlib_version", "nhtlib_source_hash", "git_commit", "device", "wall_time_s"):
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
    monkeypatch.setattr(nht.cache, "source_hash", lambda: "edited-library")
    assert run_key(CFG.to_dict()) != k1
    assert len(source_hash()) == 16


def test_corrupted_entry_is_recomputed(tmp_path):
    cache = RunCache(tmp_path)
    key = run_key(CFG.to_dict())
    nht.run([CFG], cache=cache, progress=False)
    (tmp_path / "runs" / f"{key}.parquet").write_bytes(b"not a parquet file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    assert any("corrupted" in str(w.message) for w in caught)
    assert not (tmp_path / "runs" / f"{key}.json").exists()
    table = nht.run([CFG], cache=cache, progress=False)
    assert len(table) == 5 and cache.load(key) is not None


def test_metadata_mismatch_counts_as_corrupted(tmp_path):
    cache = RunCache(tmp_path)
    key = run_key(CFG.to_dict())
    nht.run([CFG], cache=cache, progress=False)
    meta_path = tmp_path / "runs" / f"{key}.json"
    meta = json.loads(meta_path.read_text())
    meta["rows"] = 999
    meta_path.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="corrupted"):
        assert cache.load(key) is None


def test_duplicate_configs_train_once(tmp_path):
    cache = RunCache(tmp_path)
    table = nht.run([CFG, CFG], cache=cache, progress=False)
    assert sorted(table.run.unique()) == [0, 1]
    assert len(list((tmp_path / "runs").glob("*.json"))) == 1


def test_extra_metrics_are_part_of_the_key(tmp_path):
    import torch

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
