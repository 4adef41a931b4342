"""scale="paper" refuses to train on a CPU unless asked explicitly, naming why there is no usable CUDA device."""
import warnings

import pytest
import torch

import nhtlib as nht
from nhtlib import config
from nhtlib.chapters import CHAPTERS
from nhtlib.config import ConfigError, check_scale_device
from nhtlib.engine.cache import RunCache

TINY = nht.RunConfig(nht.data.sparse_parity.SparseParityTask(n_bits=6, n_train=32, n_test=32),
                     nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=10, n_logs=2))
TOO_OLD = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 12020). Please update "
           "your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/")


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine where torch finds no CUDA device: torch built for CUDA 13.0, no driver loaded, nothing hidden."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(config, "nvidia_driver_version", lambda: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(config.PAPER_ON_CPU_ENV, raising=False)
    return monkeypatch


def refusal(device: str = "auto") -> str:
    with pytest.raises(ConfigError, match="scale='paper' refuses to train on the CPU") as info:
        check_scale_device("paper", device)
    return str(info.value)


def test_paper_scale_on_a_cpu_names_why_there_is_no_gpu(no_gpu):
    message = refusal()
    assert "no CUDA device visible (no NVIDIA driver is loaded" in message
    assert "pass device='cpu' and set NHT_PAPER_ON_CPU=1" in message
    with pytest.raises(ConfigError, match="no CUDA device visible"):  # the notebook's first cell refuses
        nht.ChapterParams(scale="paper")
    assert nht.ChapterParams(scale="cpu").scale == "cpu"  # the other scales run anywhere
    assert check_scale_device("cpu") == check_scale_device("smoke") == "cpu"


def test_a_driver_too_old_for_this_torch_is_named(no_gpu):
    warned = []

    def warns_then_fails():
        if not warned:  # what torch says, once per process, when its CUDA cannot start
            warned.append(True)
            warnings.warn(TOO_OLD)
        return False

    no_gpu.setattr(torch.cuda, "is_available", warns_then_fails)
    no_gpu.setattr(config, "nvidia_driver_version", lambda: "525.60.13")
    message = refusal()
    assert f"the NVIDIA driver 525.60.13 is too old for this torch (torch {torch.__version__} built for CUDA 13.0)" \
        in message and "found version 12020" in message and "Please update" not in message
    # torch warned earlier in the process: the loaded driver tells
    assert "driver 525.60.13 is loaded but torch finds no device: the driver is probably too old" in refusal()
    no_gpu.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "no CUDA device visible (CUDA_VISIBLE_DEVICES='' hides" in refusal()


def test_a_cpu_only_torch_is_named(no_gpu):
    no_gpu.setattr(torch.version, "cuda", None)
    assert "this torch is a CPU-only build" in refusal()


def test_the_cpu_is_used_only_when_asked_explicitly(no_gpu):
    assert "no NVIDIA driver is loaded" in refusal("cpu")  # device="cpu" alone is not enough: the flag says so
    no_gpu.setenv(config.PAPER_ON_CPU_ENV, "1")
    assert check_scale_device("paper", "cpu") == "cpu"
    assert nht.ChapterParams(scale="paper", device="cpu").device == "cpu"
    refusal("auto")  # the flag with device="auto" is no explicit choice of the CPU
    no_gpu.setenv(config.PAPER_ON_CPU_ENV, "yes")
    with pytest.raises(ConfigError, match="NHT_PAPER_ON_CPU='yes' is not allowed"):
        check_scale_device("paper", "cpu")


def test_a_gpu_machine_is_not_refused(no_gpu):
    no_gpu.setattr(torch.cuda, "is_available", lambda: True)
    assert check_scale_device("paper") == "cuda"


def test_the_driver_version_is_read_from_the_kernel_module(tmp_path, monkeypatch):
    path = tmp_path / "version"
    path.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder)"
                    "\nGCC version:  gcc version 12.2.0\n")
    monkeypatch.setattr(config, "NVIDIA_DRIVER_FILE", str(path))
    assert config.nvidia_driver_version() == "550.54.15"
    path.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
    assert config.nvidia_driver_version() == "535.104.05"
    monkeypatch.setattr(config, "NVIDIA_DRIVER_FILE", str(tmp_path / "absent"))
    assert config.nvidia_driver_version() is None


def test_a_paper_sweep_refuses_before_training_and_still_reads_the_cache(no_gpu, tmp_path):
    cache = RunCache(tmp_path / "cache")
    table = nht.sweep.Sweep("tiny", (TINY,), scale="cpu").run(device="cpu", cache=cache, progress=False)
    no_gpu.setattr(nht.sweep, "_train_batch", lambda *a, **k: pytest.fail("trained a paper sweep on the CPU"))
    cached = nht.sweep.Sweep("tiny", (TINY,), scale="paper").run(device="auto", cache=cache, progress=False)
    assert cached.equals(table)  # nothing to train: reading the cache needs no GPU
    untrained = nht.sweep.Sweep("tiny", (TINY, TINY.replace(seed=1)), scale="paper")
    with pytest.raises(ConfigError, match="refuses to train on the CPU: no CUDA device visible"):
        untrained.run(device="auto", cache=cache, progress=False)


def test_chapters_tell_their_sweeps_the_scale():
    for scale in ("smoke", "paper"):
        sweeps = CHAPTERS["01_toy_norm_hierarchy"].sweeps(scale)
        assert sweeps and all(s.scale == scale for s in sweeps)
