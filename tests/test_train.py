"""The training loop: batched members equal single runs with torch.optim, and a killed run resumes exactly."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
import torch
from torch import nn

import nhtlib as nht
from nhtlib.data import Dataset, Split
from nhtlib.engine.train import train
from reference import train_alone

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
MODEL = nht.models.config("mlp", hidden=(16,))


def reference_run(seed: int, lr: float, wd: float, cfg: nht.TrainConfig) -> pd.DataFrame:
    """The same member trained alone with plain PyTorch modules and torch.optim."""
    torch.manual_seed(seed)
    return train_alone(MODEL.single(8, 2), TASK.build(seed), cfg, seed, lr, wd)


@pytest.mark.parametrize("cfg", [
    nht.TrainConfig(optimizer="adamw", steps=60, n_logs=6),
    nht.TrainConfig(optimizer="adamw", steps=60, n_logs=6, batch_size=16),
    nht.TrainConfig(optimizer="sgd", steps=60, n_logs=6, momentum=0.9),
])
def test_batched_members_equal_single_runs(cfg):
    seeds, lrs, wds = [0, 1, 2], [1e-2, 3e-3, 2e-2], [0.0, 0.5, 2.0]
    configs = [nht.RunConfig(TASK, MODEL, cfg.replace(lr=lr, weight_decay=wd), seed=s)
               for s, lr, wd in zip(seeds, lrs, wds)]
    batched = nht.run(configs, progress=False)
    for i, (s, lr, wd) in enumerate(zip(seeds, lrs, wds)):
        ref = reference_run(s, lr, wd, cfg)
        ours = batched[batched.run == i].reset_index(drop=True)
        assert list(ours.step) == list(ref.step)
        pd.testing.assert_series_equal(ours.norm_sq, ref.norm_sq, rtol=1e-5, check_names=False)
        pd.testing.assert_series_equal(ours.test_acc, ref.test_acc, atol=1e-9, check_names=False)


def test_weight_decay_on_all_parameters_or_only_matrices():
    """With zero gradients only weight decay acts: AdamW scales by (1 - lr*wd) per member, SGD likewise."""
    from nhtlib.engine.optim import BatchedAdamW, BatchedSGD

    for cls in (BatchedAdamW, BatchedSGD):
        weight = torch.nn.Parameter(torch.ones(2, 3, 3))  # K=2 members of a 3x3 matrix
        bias = torch.nn.Parameter(torch.ones(2, 3))
        lr, wd = torch.tensor([0.1, 0.2]), torch.tensor([1.0, 0.5])
        opt = cls([weight, bias], lr, wd, decay_mask=[True, False])
        weight.grad, bias.grad = torch.zeros_like(weight), torch.zeros_like(bias)
        opt.step()
        assert torch.allclose(weight[0], torch.full((3, 3), 0.9)) and torch.allclose(weight[1], torch.full((3, 3), 0.9))
        assert torch.equal(bias.detach(), torch.ones(2, 3))


def test_run_table_has_expected_columns():
    cfg = nht.TrainConfig(steps=10, n_logs=2)
    table = nht.run(nht.grid(nht.RunConfig(TASK, MODEL, cfg), seeds=[0, 1], weight_decays=[0.1, 1.0]),
                    progress=False)
    for col in ("run", "seed", "lr", "weight_decay", "step", "train_loss", "train_acc", "test_loss", "test_acc",
                "norm_sq", "norm_sq:layers.input", "norm_sq:layers.output", "lr_now", "wall_s"):
        assert col in table.columns, col
    assert sorted(table.weight_decay.unique()) == [0.1, 1.0]
    assert len(table) == 4 * 3


def test_train_eval_size_evaluates_only_the_first_training_examples():
    x, y = torch.randn(6, 4), torch.tensor([0, 0, 1, 1, 1, 1])
    data = Dataset({"train": Split(x, y), "head": Split(x[:2], y[:2])}, n_classes=2)
    model = nht.models.config("mlp", hidden=(3,)).build((4,), 2, [0, 1])
    cfg = nht.TrainConfig(steps=1, n_logs=1, lr=1e-9, train_eval_size=2)
    tables = train(model, data, cfg, seeds=[0, 1], progress=False)
    for t in tables:  # train evaluated on its first 2 examples = exactly the "head" split
        assert t.train_loss.tolist() == t.head_loss.tolist() and t.train_acc.tolist() == t.head_acc.tolist()
    with pytest.raises(nht.config.ConfigError, match="train_eval_size"):
        nht.TrainConfig(train_eval_size=0)


RESUME_SCRIPT = textwrap.dedent("""
    import sys, time, torch
    import nhtlib as nht
    torch.set_num_threads(1)
    task = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
    cfg = nht.TrainConfig(steps=400, n_logs=40, batch_size=16, checkpoint_every=10)
    configs = nht.grid(nht.RunConfig(task, nht.models.config("mlp", hidden=(16,)), cfg), seeds=[0, 1],
                       weight_decays=[0.5])
    slow = sys.argv[1] == "slow"
    if slow:  # slow each step down so the parent can kill us mid-run
        orig = nht.optim.BatchedAdamW.step
        def step(self, *a, **k):
            time.sleep(0.01)
            return orig(self, *a, **k)
        nht.optim.BatchedAdamW.step = step
    table = nht.run(configs, progress=False)
    table.to_parquet(sys.argv[2])
""")


def test_killed_run_resumes_to_the_same_result(tmp_path):
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    env = {**os.environ, "NHT_RESULTS": str(tmp_path / "killed")}
    proc = subprocess.Popen([sys.executable, str(script), "slow", str(tmp_path / "never.parquet")], env=env)
    checkpoints = tmp_path / "killed" / "cache" / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and not list(checkpoints.glob("*.pt")):
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list(checkpoints.glob("*.pt")), "no checkpoint was written before the kill"
    assert not (tmp_path / "never.parquet").exists()
    # resume (fast) in the same results folder, then an uninterrupted run elsewhere
    resume = subprocess.run([sys.executable, str(script), "fast", str(tmp_path / "resumed.parquet")], env=env,
                            check=True, capture_output=True, text=True)
    # the killed run's checkpoint is read (weights_only), not refused or discarded: training resumed from it
    assert "checkpoint" not in resume.stderr, resume.stderr
    env_clean = {**os.environ, "NHT_RESULTS": str(tmp_path / "clean")}
    subprocess.run([sys.executable, str(script), "fast", str(tmp_path / "clean.parquet")], env=env_clean, check=True)
    resumed = pd.read_parquet(tmp_path / "resumed.parquet").drop(columns=["wall_s"])
    clean = pd.read_parquet(tmp_path / "clean.parquet").drop(columns=["wall_s"])
    pd.testing.assert_frame_equal(resumed, clean)
    assert not list(checkpoints.glob("*.pt")), "the checkpoint must be removed once the batch finishes"


# resuming across a change of chunking, the backend switches, the checkpoint interval

class Killed(BaseException):
    """What a kill does to the run: no `except Exception` (the out-of-memory back-off) catches it."""


CHUNKED = nht.grid(nht.RunConfig(TASK, MODEL, nht.TrainConfig(steps=40, n_logs=4, batch_size=16, checkpoint_every=10)),
                   seeds=range(4), weight_decays=[0.5])


@pytest.fixture(scope="module")
def clean_chunked(tmp_path_factory) -> pd.DataFrame:
    """CHUNKED trained in one call, never killed."""
    from nhtlib.engine.cache import RunCache

    cache = RunCache(tmp_path_factory.mktemp("clean") / "cache")
    return nht.run(CHUNKED, cache=cache, progress=False).drop(columns="wall_s")


@pytest.mark.parametrize("files_before_kill, max_members, resumed_steps", [
    (8, 2, [2] * 40),  # 4 members killed after their checkpoints of step 20, resumed as 2 calls of 2, each from 20
    (6, 4, [2] * 50),  # killed while saving step 20: members 0-1 at 20, 2-3 at 10, which train apart (20 + 30 steps)
])
def test_a_killed_call_resumes_in_calls_of_another_size(tmp_path, monkeypatch, clean_chunked, files_before_kill,
                                                        max_members, resumed_steps):
    import nhtlib.engine.train as train_module
    from nhtlib.engine.cache import RunCache

    cache, written, save = RunCache(tmp_path / "killed"), [], train_module.save_checkpoint

    def save_then_kill(state, path):
        save(state, path)
        written.append(state["step"])
        if len(written) == files_before_kill:
            raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(train_module, "save_checkpoint", save_then_kill)
        with pytest.raises(Killed):
            nht.run(CHUNKED, cache=cache, progress=False)
    assert written[:4] == [10] * 4 and len(list(cache.checkpoints.glob("*.pt"))) == 4  # one file per member
    members, step = [], train_module.training_step

    def counted(model, optimizer, x, y, **kwargs):
        members.append(x.shape[0])
        return step(model, optimizer, x, y, **kwargs)

    monkeypatch.setattr(train_module, "training_step", counted)
    resumed = nht.run(CHUNKED, cache=cache, max_members=max_members, progress=False).drop(columns="wall_s")
    assert members == resumed_steps
    pd.testing.assert_frame_equal(resumed, clean_chunked, check_exact=True)
    assert not list(cache.checkpoints.glob("*.pt"))


def test_backend_switches_hold_during_training_only(monkeypatch):
    from nhtlib.engine.train import CUBLAS_DETERMINISTIC, backend_flags

    cudnn = torch.backends.cudnn
    conv = nht.models.config("simple_cnn", width=0.25).build((3, 8, 8), 2, [0, 1])
    mlp = MODEL.build((8,), 2, [0, 1])

    def switches():
        return cudnn.benchmark, cudnn.deterministic, torch.are_deterministic_algorithms_enabled()

    before = switches()
    monkeypatch.delenv("NHT_DETERMINISTIC", raising=False)
    with backend_flags(conv, "cuda") as deterministic:
        assert switches() == (True, before[1], before[2]) and not deterministic  # autotuned convolutions
    for model, device in ((conv, "cpu"), (mlp, "cuda")):
        with backend_flags(model, device):
            assert switches() == before
    monkeypatch.setenv("NHT_DETERMINISTIC", "1")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    with backend_flags(conv, "cuda") as deterministic:
        assert deterministic and switches() == (False, True, True)
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_DETERMINISTIC
    assert switches() == before


def test_the_deterministic_mode_is_recorded_but_not_in_the_key(tmp_path, monkeypatch):
    from nhtlib.cli import runner
    from nhtlib.engine.cache import RunCache

    cache, config = RunCache(tmp_path), nht.RunConfig(TASK, MODEL, nht.TrainConfig(steps=10, n_logs=2))
    monkeypatch.setenv("NHT_DETERMINISTIC", "1")
    table = nht.run([config], cache=cache, progress=False)
    assert cache.meta(nht.sweep.member_keys([config])[0])["deterministic"] is True
    record = runner._run_record(runner.notebooks_dir() / "01_toy_norm_hierarchy.ipynb", {}, {}, "smoke", 0,
                                time.time(), 1.0)
    assert record["deterministic"] is True
    monkeypatch.setenv("NHT_DETERMINISTIC", "0")
    monkeypatch.setattr(nht.sweep, "_train_batch", lambda *a, **k: pytest.fail("the mode changed the run key"))
    assert nht.run([config], cache=cache, progress=False).equals(table)


def test_checkpoints_are_spaced_by_their_write_time():
    from nhtlib.engine.train import checkpoint_interval

    assert checkpoint_interval(0.01) == 30.0  # small: every 30 s at most
    assert checkpoint_interval(10.0) == pytest.approx(200.0)  # 10 s writes: 5 % of the wall time
    assert checkpoint_interval(60.0) == 600.0  # huge: still every 10 min, what a kill may lose
