"""The compute planner (`nhtlib.engine.plan`): FLOPs against a direct count, layouts against real builds, memory fitting and
refusal, the data guard, records of measured rates, and every chapter planned at every scale."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from nhtlib.engine import plan
from nhtlib.engine import memory
from nhtlib.chapters import CHAPTERS, plan_chapter
from nhtlib.config import TrainConfig
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.inventory import IncompleteDataError
from nhtlib.data.layout import layout
from nhtlib.data.modular import ModularTask
from nhtlib.data.sparse_parity import SparseParityTask
from nhtlib.models import config as model_config
from nhtlib.engine.sweep import RunConfig, Sweep, grid
from nhtlib.engine.sweep import run as run_members

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _config(task, model, batch_size=None, steps=10, **train):
    return RunConfig(task, model, TrainConfig(steps=steps, batch_size=batch_size, n_logs=2, **train))


def direct_step_flops(config: RunConfig, k_members: int, batch: int) -> float:
    """FLOPs of one training step of `k_members` members at `batch` examples, counted directly."""
    from torch.utils.flop_counter import FlopCounterMode

    from nhtlib.engine.train import member_loss

    shape = layout(config.task)
    model = config.model.build(shape.input_shape, shape.n_classes, [config.seed + i for i in range(k_members)])
    x = memory.random_inputs(shape, batch, k_members)
    y = torch.randint(0, shape.n_classes, (k_members, batch))
    with FlopCounterMode(display=False) as counter:
        member_loss(model(x), y).sum().backward()
    return counter.get_total_flops()


CASES = {
    "toy MLP, full batch": (_config(SparseParityTask(n_bits=40, n_train=300, n_test=100),
                                    model_config("mlp", hidden=(64,))), 3, 300),
    "modular MLP (fixed per-step table projection)": (_config(ModularTask(p=31), model_config("modular_mlp")), 2,
                                                      480),
    "NSDL Transformer": (_config(ModularTask(p=31), model_config("transformer"), batch_size=64), 2, 64),
    "SimpleCNN 16 px": (_config(BorderCIFARTask(image_size=16, border_width=1, n_train=100, n_test=20),
                                model_config("simple_cnn"), batch_size=32), 2, 32),
    "VGG-16 + BN": (_config(BorderCIFARTask(image_size=16, border_width=1, n_train=100, n_test=20),
                            model_config("vgg16", batchnorm=True, width=0.125), batch_size=16), 2, 16),
}


@pytest.mark.parametrize("name", list(CASES))
def test_planned_flops_match_a_direct_count_of_one_training_step(name):
    config, k, batch = CASES[name]
    cost = memory.measure_step(config)
    planned = cost.step_flops(batch) * k
    direct = direct_step_flops(config, k, batch)
    assert direct > 0
    assert 0.75 <= planned / direct <= 1.25, (planned, direct)


def test_a_step_cost_counts_one_members_parameters():
    """Known counts: NSDL's Transformer at p = 97 has 223,713 parameters, NHT's SimpleCNN 287,850 at 10 classes."""
    transformer = _config(ModularTask(p=97), model_config("transformer"), batch_size=64)
    cnn = _config(BorderCIFARTask(image_size=16, border_width=1, n_train=100, n_test=20), model_config("simple_cnn"),
                  batch_size=32)
    assert memory.measure_step(transformer).parameters == 223_713
    assert memory.measure_step(cnn).parameters == 287_850


def test_the_fixed_part_of_a_step_is_not_scaled_by_the_batch():
    """The modular MLP projects its whole embedding table once per step: a per-example count from one small batch
    would be many times too high at the real batch."""
    config, k, batch = CASES["modular MLP (fixed per-step table projection)"]
    cost = memory.measure_step(config)
    assert cost.train_fixed > 10 * cost.train_flops  # the table projection dominates one example's cost
    naive = (cost.train_fixed + 2 * cost.train_flops) / 2 * batch * k
    assert naive > 2 * direct_step_flops(config, k, batch)


@pytest.mark.parametrize("task", [SparseParityTask(n_bits=12, n_train=50, n_test=30), ModularTask(p=13)],
                         ids=["toy", "modular"])
def test_layout_matches_the_built_data(task):
    shape, data = layout(task), task.build(0)
    assert shape.input_shape == data.input_shape
    assert shape.n_classes == data.n_classes
    assert shape.n_train == data.splits["train"].size
    assert shape.n_eval == sum(s.size for name, s in data.splits.items() if name != "train")


@pytest.mark.skipif(not (SHARED / "cifar10").is_dir(), reason="the book's offline CIFAR-10 is not here")
def test_layout_of_the_border_task_matches_its_build_and_counts_shared_images_once():
    task = BorderCIFARTask(image_size=16, border_width=1, n_train=200, n_test=50, data_root=str(SHARED))
    shape, data = layout(task), task.build(0)
    assert shape.input_shape == data.input_shape == (3, 16, 16)
    assert (shape.n_train, shape.n_eval) == (200, sum(s.size for n, s in data.splits.items() if n != "train"))
    # four members share one uint8 copy of the images; each adds its labels and border colours only
    assert shape.data_bytes(4) < 1.1 * shape.data_bytes(1)


def _cost(parameters=1000, saved=1e4, live=1e3):
    return memory.StepCost(train_flops=1e6, forward_flops=3e5, saved_bytes=saved, live_bytes=live,
                         parameters=parameters, kernels=10)


def test_fit_lowers_the_evaluation_batch_then_the_members_per_call():
    shape = layout(SparseParityTask(n_bits=40, n_train=300, n_test=100))
    cfg = TrainConfig(steps=10, eval_batch_size=4096)
    cost = _cost(live=1e5)  # 100 kB per example at evaluation: 4096 examples × 10 members = 8 GB
    roomy = memory.fit(cost, cfg, shape, 10, 100e9, reserve=0)
    assert roomy[:2] == (10, 4096)
    tight = memory.fit(cost, cfg, shape, 10, 2e9, reserve=0)
    assert tight[1] < 4096 and tight[0] <= 10
    assert tight[2] <= memory.MEMORY_SHARE * 2e9
    tighter = memory.fit(cost, cfg, shape, 10, 0.1e9, reserve=0)
    assert tighter[0] < tight[0] and tighter[1] == 64


def test_fit_refuses_when_one_member_does_not_fit_and_says_how_much_it_needs():
    shape = layout(SparseParityTask(n_bits=40, n_train=300, n_test=100))
    with pytest.raises(memory.MemoryPlanError, match=r"one member needs .* GB .* the device has 0\.0 GB"):
        memory.fit(_cost(parameters=10 ** 8), TrainConfig(steps=10), shape, 4, 1e6, reserve=0)


def test_a_run_that_cannot_fit_refuses_before_training(tmp_path, monkeypatch):
    from nhtlib.engine.cache import RunCache

    monkeypatch.setattr(memory, "device_memory", lambda device: (2e6, 0.0))  # 2 MB
    configs = grid(_config(SparseParityTask(n_bits=40, n_train=300, n_test=100), model_config("mlp", hidden=(512,)),
                           steps=5), seeds=range(3))
    cache = RunCache(tmp_path / "cache")
    with pytest.raises(memory.MemoryPlanError):
        run_members(configs, cache=cache, progress=False)
    assert cache.keys() == []


def test_a_run_that_fits_only_in_parts_trains_in_several_calls(tmp_path, monkeypatch):
    from nhtlib.engine.cache import RunCache

    configs = grid(_config(SparseParityTask(n_bits=40, n_train=300, n_test=100), model_config("mlp", hidden=(16,)),
                           steps=5), seeds=range(4))
    whole = run_members(configs, cache=RunCache(tmp_path / "a"), progress=False)
    monkeypatch.setattr(memory, "fit_members", lambda configs, device, max_members=256: (1, 64))
    parts = run_members(configs, cache=RunCache(tmp_path / "b"), progress=False)
    cache_b = RunCache(tmp_path / "b")
    assert {cache_b.meta(k)["batch_members"] for k in cache_b.keys()} == {1}
    columns = [c for c in whole.columns if c != "wall_s"]  # one member per call: equal up to float rounding
    pd.testing.assert_frame_equal(whole[columns], parts[columns], rtol=1e-5, atol=1e-6)


def test_measured_rates_replace_the_assumption(tmp_path):
    record = {"device_key": "h200", "rates": {"01_toy_norm_hierarchy": {"fp32": 1e12}}}
    (tmp_path / "gpu_check-h200-2026-12-01T00-00-00.json").write_text(json.dumps(record))
    assert plan.measured_rates("h200", folder=tmp_path) == record["rates"]
    sweep = Sweep("toy", tuple(grid(_config(SparseParityTask(n_bits=40, n_train=300, n_test=100),
                                            model_config("mlp", hidden=(64,)), steps=100), seeds=range(2))))
    measured = plan.plan_group(sweep, list(sweep.configs), plan.H200, rates=record["rates"],
                               workload="01_toy_norm_hierarchy")
    assumed = plan.plan_group(sweep, list(sweep.configs), plan.H200)
    assert measured.time_source.startswith("measured") and assumed.time_source.startswith("assumed")
    flops = measured.train_flops + measured.eval_flops
    assert measured.seconds == pytest.approx(flops / 1e12 + (assumed.seconds - flops / (
        plan.H200.peak_flops["fp32"] * plan.H200.efficiency)))


def test_the_paper_guard_names_what_is_missing_what_was_found_and_where_it_goes(tmp_path):
    for i in range(10):  # an ImageFolder CIFAR-10 with one image per class: present, far from complete
        for split in ("train", "test"):
            folder = tmp_path / "cifar10" / split / f"class{i}"
            folder.mkdir(parents=True)
            from PIL import Image

            Image.new("RGB", (32, 32)).save(folder / "0000.png")
    sweeps = CHAPTERS["03_border_cifar"].sweeps("smoke", str(tmp_path))
    plan.check_data(sweeps, full=False)  # present: the cpu and smoke scales start
    with pytest.raises(IncompleteDataError) as err:
        plan.check_data(sweeps, full=True)
    text = str(err.value)
    assert "scale='paper' trains on the full data sets" in text
    assert "found train 10 of 50,000" in text and str(tmp_path / "cifar10") in text
    from nhtlib.chapters import border_cifar as borders

    with pytest.raises(IncompleteDataError, match="found train 10 of 50,000"):
        borders.run(borders.PRESETS["paper"], str(tmp_path), progress=False)  # refuses before building anything


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_every_chapter_is_planned_at_every_scale_without_training(chapter, tmp_path, monkeypatch):
    monkeypatch.setenv("NHT_RESULTS", str(tmp_path))  # nothing may be written to the real cache
    root = str(SHARED) if SHARED.is_dir() else str(tmp_path)
    smoke = plan_chapter(chapter, "smoke", "cpu", data_root=root, time_here=chapter == "01_toy_norm_hierarchy")
    paper = plan_chapter(chapter, "paper", "h200", data_root=root)
    for planned in (smoke, paper):
        assert planned.groups and planned.flops > 0 and planned.seconds > 0
        assert all(g.members_per_call >= 1 and g.peak_bytes <= plan.H200.memory_bytes for g in planned.groups)
    assert paper.flops > smoke.flops
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache" / "runs").glob("*"))


def test_the_planned_runs_are_the_runs_the_chapter_trains():
    """The toy chapter's notebook trains `toy.configs`; the planner reads `toy.sweeps`: the same members."""
    from nhtlib.chapters import toy_norm_hierarchy as toy

    preset = toy.PRESETS["smoke"]
    assert list(CHAPTERS[toy.NAME].sweeps("smoke")[0].configs) == toy.configs(preset)


def test_the_command_line_prints_a_plan(capsys):
    from nhtlib.cli.runner import main

    assert main(["plan", "01_toy_norm_hierarchy", "-p", "scale", "smoke", "--device", "h200"]) == 0
    out = capsys.readouterr().out
    assert "01_toy_norm_hierarchy at scale='smoke' on NVIDIA H200" in out and "data check: passes" in out
    assert main(["plan", "01_toy_norm_hierarchy", "-p", "seed", "3"]) == 2


def test_cpu_device_reports_this_machines_memory_and_rate(monkeypatch):
    here = plan.local_cpu()
    assert here.memory_bytes > 0 and here.peak_flops["fp32"] > 1e8
    import resource

    limit = 3 * 10 ** 9  # a prlimit --as below the free RAM is what the plan may use
    monkeypatch.setattr(resource, "getrlimit", lambda which: (limit, resource.RLIM_INFINITY))
    assert plan.local_cpu().memory_bytes <= limit
