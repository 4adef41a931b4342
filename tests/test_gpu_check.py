"""benchmarks/gpu_check.py, the prepared GPU check, run on the CPU at tiny shapes (`--tiny`) with no data root
(NHT_DATA_ROOT names a folder that does not exist): every chapter's workloads go through the real training loop on
synthetic data (`nhtlib.data.synthetic`) and resume from a checkpoint to the unbroken run's tables, every workload
and precision has a rate, the NSDL part has numbers or a reason, and the planner reads the rates back. The check
itself is what the lent GPU will run: this keeps it from rotting between loans."""
import dataclasses
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from nhtlib.chapters import CHAPTERS
from nhtlib.chapters import celeba_waterbirds as cw
from nhtlib.config import PRECISIONS, SCALES, ConfigError
from nhtlib.data import ImageCodec, TaskConfig
from nhtlib.data.celeba import CelebATask
from nhtlib.data.cifar import CIFARTask
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.layout import layout
from nhtlib.data.mnist import MNISTTask
from nhtlib.data.modular import ModularTask
from nhtlib.data.synthetic import SyntheticTask, synthetic_dataset, synthetic_members
from nhtlib.data.waterbirds import WaterbirdsTask
from nhtlib.engine import plan
from nhtlib.engine.cache import RunCache
from nhtlib.engine.source import run_source_hash
from nhtlib.engine.sweep import RunConfig, run
from nhtlib.models import config as model_config
from nhtlib.config import TrainConfig
from nhtlib.paths import default_data_root

BUDGET_S = 900  # generous: on a busy machine nothing is skipped (a skip makes the record incomplete)
SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"
NO_DATA = "/nonexistent"


def load_script():
    """benchmarks/gpu_check.py as a module (registered before it runs: its dataclasses look their module up)."""
    if "gpu_check" in sys.modules:
        return sys.modules["gpu_check"]
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gpu_check"]
        raise
    return module


@pytest.fixture(scope="module")
def tiny_record(tmp_path_factory):
    out = tmp_path_factory.mktemp("records")
    gpu_check = load_script()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NHT_DATA_ROOT", NO_DATA)  # no data anywhere: a lent GPU has no ../shared
        mp.setenv("NHT_RESULTS", str(tmp_path_factory.mktemp("results")))
        assert gpu_check.main(["--tiny", "--out", str(out), "--budget-s", str(BUDGET_S)]) == 0
        assert os.environ["NHT_DATA_ROOT"] == NO_DATA  # the script's own data root is restored
    files = sorted(out.glob("gpu_check-cpu-tiny-*.json"))
    assert len(files) == 1, files
    return out, json.loads(files[0].read_text())


def _number(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_record_fields(tiny_record):
    _, record = tiny_record
    for field in ("device", "device_key", "torch", "cuda", "cudnn", "git_commit", "source_hash", "date", "mode",
                  "real_loop", "workloads", "rates", "details", "nsdl", "total_wall_s", "data_root"):
        assert field in record, field
    assert record["device_key"] == "cpu-tiny" and record["mode"] == "tiny"
    assert record["source_hash"] == run_source_hash()
    assert not Path(record["data_root"]).exists()
    assert record["incomplete"] == [] and record["complete"] is True


def test_every_chapter_runs_the_real_loop_and_resumes_exactly(tiny_record):
    _, record = tiny_record
    loops = record["real_loop"]
    for chapter in CHAPTERS:
        mine = {k: e for k, e in loops.items() if k.startswith(f"{chapter}:")}
        assert mine, f"{chapter} has no real-loop entry"
        for key, e in mine.items():
            assert "skipped" not in e, (key, e.get("skipped"))
            # on the CPU the resumed run equals the unbroken one bit for bit
            assert e["resume_equal"] is True and e["resume_max_abs_diff"] == 0, key
            assert e["k"] >= 1 and e["checkpoint_bytes"] > 0 and e["checkpoint_step"] == e["steps"] // 2
            assert e["rows"] == len(e["log_steps"]) and e["checkpoint_step"] in e["log_steps"]
            for split in e["splits"]:  # every split is evaluated at every log step
                assert f"{split}_loss" in e["columns"] and f"{split}_acc" in e["columns"], (key, split)
            assert "norm_sq" in e["columns"]
            if e["extra_metrics"]:  # the chapter's own probe ran too
                assert {"dlr", "dlr_null"} & set(e["columns"]), (key, e["columns"])
            assert e["memory"]["planned_peak_bytes"] > 0 and e["memory"]["measured_peak_bytes"] is None  # a CPU
    # the conv chapters' data paths: per-member border colours on shared uint8 images, grouped uint8 splits
    borders = loops["03_border_cifar:SimpleCNN"]["splits"]
    assert borders["train"]["x"][1] == "uint8" and borders["train"]["x"][0][0] == borders["train"]["y"][1]  # shared
    assert len(borders["train"]["border"]) == 2  # (K, N): each seed its own border colours
    assert set(borders) == {"train", "coloured", "clean", "shortcut"}
    celeba = loops["04_celeba_waterbirds:SimpleCNN/CelebA"]["splits"]
    assert set(celeba) == {"train"} | {f"test_y{y}a{a}" for y in (0, 1) for a in (0, 1)}
    assert celeba["train"]["x"][1] == "uint8"
    # chapter 6 reads chapters 1-4's groups: checked once, named as the same run
    assert all("same_run_as" in e for k, e in loops.items() if k.startswith("06_synthesis:"))


def test_every_workload_and_precision_has_a_rate(tiny_record):
    _, record = tiny_record
    assert set(record["workloads"]) == set(record["details"])
    for chapter in CHAPTERS:
        keys = [k for k in record["workloads"] if k.startswith(f"{chapter}:")]
        assert keys, chapter
        assert record["rates"][chapter] in [record["workloads"][k] for k in keys]
    for key, detail in record["details"].items():
        assert set(detail["precisions"]) == set(PRECISIONS), key
        for precision, entry in detail["precisions"].items():
            assert _number(entry["flops_per_s"]) and entry["k"] >= 1 and entry["seconds_per_step"] > 0
            assert entry["share_of_peak"] is None  # no dense peak is known for a CPU
            assert record["workloads"][key][precision] == entry["flops_per_s"]


def test_nsdl_part_has_numbers_or_a_reason(tiny_record):
    _, record = tiny_record
    nsdl = record["nsdl"]
    assert nsdl["paper"]["T_grok"]["mean"] == pytest.approx(1840) and nsdl["paper"]["T_mem"]["n"] == 10
    fp32 = nsdl["runs"]["fp32"]
    assert fp32["members"] == 3 and fp32["wall_s"] > 0 and fp32["member_steps_per_s"] > 0
    assert [s["seed"] for s in fp32["per_seed"]] == [42, 43, 44]
    for col in ("T_mem", "T_grok"):  # a mean when some seed reached it (grokking is not required here)
        assert fp32[col]["n"] == sum(s[col] is not None for s in fp32["per_seed"])
        assert (fp32[col]["mean"] is None) == (fp32[col]["n"] == 0)
    # tiny mode's second run is at tf32: on a CPU the same arithmetic as fp32, so every seed ends the same
    assert nsdl["second_precision"] == {"precision": "tf32"}
    assert nsdl["runs"]["tf32"]["per_seed"] == fp32["per_seed"]
    assert 0 < fp32["per_seed"][0]["final_train_acc"] <= 1


def test_planner_reads_the_rates(tiny_record):
    out, record = tiny_record  # complete and made by the code that runs now: trusted
    assert plan.measured_rates("cpu-tiny", folder=out) == record["workloads"]


def test_device_keys():
    gpu_check = load_script()
    assert gpu_check.device_key("NVIDIA H200", tiny=False) == "h200"
    assert gpu_check.device_key("NVIDIA A100-SXM4-80GB", tiny=False) == "nvidia-a100-sxm4-80gb"
    assert gpu_check.device_key("NVIDIA H200", tiny=True) == "cpu-tiny"
    assert gpu_check.peak_flops("NVIDIA H200", "bf16") == plan.H200.peak_flops["bf16"]
    assert gpu_check.peak_flops("NVIDIA A100", "bf16") is None


# ------------------------------------------------------------------------------ the resume comparison can fail

def test_table_difference_sees_one_changed_value():
    gpu_check = load_script()
    a = pd.DataFrame({"step": [0, 2], "train_loss": [1.0, float("nan")], "wall_s": [0.0, 1.0]})
    b = a.assign(wall_s=[5.0, 6.0])  # wall time aside
    assert gpu_check.table_difference([a], [b]) == (True, 0.0)
    c = b.copy()
    c.loc[0, "train_loss"] = 1.0 + 1e-12
    equal, worst = gpu_check.table_difference([a], [c])
    assert not equal and worst == pytest.approx(1e-12)


def test_a_lossy_resume_is_caught(monkeypatch):
    """A planted fault: the checkpoint's weights come back nudged; the check must report the resume as different."""
    import nhtlib.engine.train as train_module

    gpu_check = load_script()
    monkeypatch.setenv("NHT_DATA_ROOT", NO_DATA)
    w = gpu_check.chapter_workloads("01_toy_norm_hierarchy", "smoke", {})[0]
    clean = gpu_check.run_real_loop(w, 2, torch.device("cpu"), gpu_check.TINY)
    assert clean["resume_equal"] and clean["resume_max_abs_diff"] == 0
    real_load = train_module.load_checkpoint

    def nudged(*args, **kwargs):
        state = real_load(*args, **kwargs)
        if state is not None:
            state["params"][0] = state["params"][0] + 1e-3
        return state

    monkeypatch.setattr(train_module, "load_checkpoint", nudged)
    faulty = gpu_check.run_real_loop(w, 2, torch.device("cpu"), gpu_check.TINY)
    assert not faulty["resume_equal"] and faulty["resume_max_abs_diff"] > 0


# ------------------------------------------------------------------------------------- configs without data

@pytest.mark.parametrize("scale", SCALES)
def test_every_chapter_declares_its_sweeps_without_data(scale, monkeypatch):
    monkeypatch.setenv("NHT_DATA_ROOT", NO_DATA)
    for chapter in CHAPTERS.values():
        assert chapter.sweeps(scale), chapter.name
    tasks = cw.domain_tasks(cw.PRESETS[scale], None)
    assert {t.data_root for t in tasks.values()} == {NO_DATA}
    # no real Waterbirds under an absent root: the stand-in, unless the preset requires the real data
    assert tasks["waterbirds"].source == ("waterbirds" if cw.PRESETS[scale].real_waterbirds else "cub_standin")


def test_domain_tasks_with_no_data_folder_at_all(monkeypatch):
    monkeypatch.setattr(cw, "default_data_root", lambda: None)
    tasks = cw.domain_tasks(cw.PRESETS["cpu"], None)
    assert {t.data_root for t in tasks.values()} == {None} and tasks["waterbirds"].source == "cub_standin"


# ---------------------------------------------------------------------------------------- synthetic data

SMOKE_TASKS = {
    "cifar": CIFARTask(n_train=100, n_test=50, image_size=8, shuffle_labels=True),
    "borders": BorderCIFARTask(n_train=100, n_test=50, image_size=8, border_width=1),
    "mnist": MNISTTask(n_train=100, n_test=50, shortcut="patch"),
    "celeba_identity": CelebATask(image_size=8, n_train=20),
    "celeba_official": CelebATask(image_size=8, split="official"),
    "waterbirds": WaterbirdsTask(source="waterbirds", image_size=8),
    "standin": WaterbirdsTask(source="cub_standin", image_size=8),
}


@pytest.mark.parametrize("name", sorted(SMOKE_TASKS))
def test_synthetic_data_have_the_tasks_shapes(name, monkeypatch):
    monkeypatch.setenv("NHT_DATA_ROOT", NO_DATA)
    task = SMOKE_TASKS[name].replace(data_root=NO_DATA)
    data = synthetic_dataset(task, seed=3, n_train=64, n_eval=32)
    shape = layout(task)
    assert data.input_shape == shape.input_shape and data.n_classes == shape.n_classes
    assert data.meta["data"]["synthetic"] is True
    train = data.splits["train"]
    uint8 = name not in ("mnist", "standin")  # MNIST is standardised at build, the stand-in composited in float
    assert (train.x.dtype == torch.uint8) == uint8 and isinstance(train.codec, ImageCodec) == (name != "mnist")
    expected = {"cifar": {"train", "test"}, "borders": {"train", "coloured", "clean", "shortcut"},
                "mnist": {"train", "test", "test_clean"}}.get(name, {"train"} | {f"test_y{y}a{a}" for y in (0, 1)
                                                                               for a in (0, 1)})
    assert set(data.splits) == expected
    copies = ("train", "clean", "shortcut", "test_clean")  # the evaluation set is n_eval; these are not it
    if name in ("cifar", "borders", "mnist", "waterbirds", "standin", "celeba_official"):
        assert train.size == 64 and sum(s.size for k, s in data.splits.items() if k not in copies) == 32
    if name == "celeba_identity":  # the task's own identity split of all 96 images: about test_fraction to test
        n_test = sum(s.size for k, s in data.splits.items() if k != "train")
        assert train.size + n_test == 96 and abs(n_test - 0.25 * 96) <= 4


def test_synthetic_members_stack_like_real_ones():
    task = BorderCIFARTask(n_train=40, n_test=20, image_size=8, border_width=1, data_root=NO_DATA)
    data = synthetic_members(task, [0, 1, 2], n_train=40, n_eval=20)
    train = data.splits["train"]
    # one copy of the images for every member, each member its own border colours (drawn by the task per seed)
    assert train.shared_x and train.x.shape == (40, 3, 32, 32) and train.border.shape == (3, 40)
    assert not torch.equal(train.border[0], train.border[1])
    again = synthetic_members(task, [0, 1, 2], n_train=40, n_eval=20)
    assert torch.equal(again.splits["train"].x, train.x) and torch.equal(again.splits["train"].border, train.border)
    assert synthetic_dataset(ModularTask(p=11), seed=1).splits["train"].size == ModularTask(p=11).n_train  # as is


def test_synthetic_data_match_a_real_build_where_the_data_are():
    """Against the real build of the same config (where the data are on this machine): the same splits, stored
    dtypes, shapes past the example count, per-member structure and codecs."""
    root = default_data_root()
    if root is None or not (root / "cifar10").exists() or not (root / "mnist").exists():
        pytest.skip("CIFAR-10 and MNIST are not on this machine")
    for task in (BorderCIFARTask(n_train=30, n_test=20, image_size=8, border_width=1, data_root=str(root)),
                 MNISTTask(n_train=30, n_test=20, shortcut="patch", data_root=str(root))):
        real, fake = task.build(2), synthetic_dataset(task, 2, n_train=30, n_eval=20)
        assert set(real.splits) == set(fake.splits) and real.n_classes == fake.n_classes
        for name, r in real.splits.items():
            f = fake.splits[name]
            assert (r.x.dtype, r.x.shape, r.y.shape, r.per_member) == (f.x.dtype, f.x.shape, f.y.shape, f.per_member)
            assert (r.border is None) == (f.border is None)
            assert (r.codec is None and f.codec is None) or r.codec.matches(f.codec)


def test_synthetic_task_trains_through_the_sweep_and_never_poses_as_real(tmp_path):
    task = SyntheticTask(CelebATask(image_size=8, split="official", data_root=NO_DATA), n_train=32, n_eval=16)
    real = CelebATask(image_size=8, split="official", data_root=NO_DATA)
    assert task.data_fingerprint() is None  # reads no file
    assert task.digest() != real.digest() and task.to_dict()["kind"] == "SyntheticTask"  # never a real task's key
    configs = [RunConfig(task, model_config("simple_cnn"), TrainConfig(steps=2, batch_size=16, n_logs=1), seed=s)
               for s in (0, 1)]
    table = run(configs, device="cpu", cache=RunCache(tmp_path / "cache"), progress=False)
    assert set(table.run) == {0, 1} and "test_y1a1_acc" in table.columns
    with pytest.raises(ConfigError, match="real task"):
        SyntheticTask(task)  # a synthetic task of a synthetic task
    with pytest.raises(ConfigError, match="no synthetic data for Unlisted"):
        SyntheticTask(Unlisted())  # a task kind the module does not know


@dataclasses.dataclass(frozen=True)
class Unlisted(TaskConfig):
    pass
