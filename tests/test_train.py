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
