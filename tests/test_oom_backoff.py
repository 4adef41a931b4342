"""Out of memory during a batched call: the sweep halves the members per call, then the evaluation batch, and trains
again from the members' own checkpoints, to the tables of a run that never ran out of memory."""
import pandas as pd
import pytest
import torch

import nhtlib as nht
import nhtlib.engine.train as train_module
from nhtlib.engine.cache import RunCache
from nhtlib.engine.memory import MemoryPlanError
from nhtlib.engine.sweep import is_out_of_memory

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
CFG = nht.TrainConfig(steps=40, n_logs=4, batch_size=16, checkpoint_every=10)
CONFIGS = nht.grid(nht.RunConfig(TASK, nht.models.config("mlp", hidden=(16,)), CFG), seeds=range(4),
                   weight_decays=[0.5])


def clean_run(tmp_path, configs=CONFIGS) -> pd.DataFrame:
    return nht.run(configs, cache=RunCache(tmp_path / "clean"), progress=False).drop(columns="wall_s")


def limit_steps(monkeypatch, out_of_memory) -> list[int]:
    """Training steps fail with CUDA's OutOfMemoryError where out_of_memory(members, calls so far) says so; returns
    the members of every step taken (or tried)."""
    members, real = [], train_module.training_step

    def step(model, optimizer, x, y, **kwargs):
        members.append(x.shape[0])
        if out_of_memory(x.shape[0], len(members)):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
        return real(model, optimizer, x, y, **kwargs)

    monkeypatch.setattr(train_module, "training_step", step)
    return members


def test_out_of_memory_halves_the_members_and_resumes_from_their_checkpoints(tmp_path, monkeypatch):
    clean = clean_run(tmp_path)
    # more than 2 members fail at step 26, after the checkpoint of step 20
    members = limit_steps(monkeypatch, lambda k, calls: k > 2 and calls > 25)
    with pytest.warns(UserWarning, match="out of memory in a call of 4 members .*OutOfMemoryError.*again with 2 "
                                         "members per call"):
        limited = nht.run(CONFIGS, cache=RunCache(tmp_path / "limited"), progress=False).drop(columns="wall_s")
    pd.testing.assert_frame_equal(limited, clean, check_exact=True)
    # two calls of 2 members, each from step 20: the members' checkpoints were read across the change of chunking
    assert members.count(4) == 26 and members.count(2) == 2 * 20, members
    assert not list((tmp_path / "limited" / "checkpoints").glob("*.pt"))


def test_then_the_evaluation_batch_is_halved(tmp_path, monkeypatch):
    configs = [c.replace(train=c.train.replace(eval_batch_size=256)) for c in CONFIGS]  # fewer halvings to 32
    clean = clean_run(tmp_path, configs)
    real, tried = train_module.evaluate, []

    def evaluate(model, split, k_members, batch_size, precision="fp32"):
        tried.append((k_members, batch_size))
        if k_members * min(batch_size, split.size) > 40:  # the fake device holds 40 examples' activations
            raise MemoryError("simulated: the evaluation batch does not fit")
        return real(model, split, k_members, batch_size, precision)

    monkeypatch.setattr(train_module, "evaluate", evaluate)
    with pytest.warns(UserWarning, match="out of memory") as warned:
        limited = nht.run(configs, cache=RunCache(tmp_path / "limited"), progress=False).drop(columns="wall_s")
    assert [str(w.message).split("; ")[-1].split(",")[0] for w in warned] == [
        f"training again with {k} members per call and evaluation batches of {b}"
        for k, b in ((2, 256), (1, 256), (1, 128), (1, 64), (1, 32))]  # the members first, then the batch
    assert {k for k, b in tried if b == 32} == {1}
    # evaluated in chunks of 32 instead of all at once: each chunk's fp32 mean loss rounds differently
    pd.testing.assert_frame_equal(limited, clean, check_exact=False, rtol=1e-6)
    for column in ("train_acc", "test_acc", "norm_sq", "step"):
        assert limited[column].equals(clean[column]), column


def test_other_errors_and_a_last_out_of_memory_are_raised(tmp_path, monkeypatch):
    members = limit_steps(monkeypatch, lambda k, calls: True)
    one = CONFIGS[0].replace(train=CFG.replace(eval_batch_size=4))
    with pytest.warns(UserWarning, match="out of memory") as warned:
        with pytest.raises(torch.cuda.OutOfMemoryError, match="simulated"):  # nothing left to halve
            nht.run([one], cache=RunCache(tmp_path / "one"), progress=False)
    assert "evaluation batches of 1," in str(warned[-1].message)
    assert members == [1, 1, 1]  # evaluation batches of 4, 2 and 1

    def broken(*args, **kwargs):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(train_module, "training_step", broken)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        nht.run(CONFIGS, cache=RunCache(tmp_path / "broken"), progress=False)


def test_what_counts_as_out_of_memory():
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("CUDA error: out of memory")) and is_out_of_memory(MemoryError())
    assert not is_out_of_memory(MemoryPlanError("one member needs 300 GB"))  # the planner's refusal: no back-off
    assert not is_out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))
