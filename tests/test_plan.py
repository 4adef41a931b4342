"""The compute planner (`nhtlib.engine.plan`): FLOPs against a direct count of one plain model, layouts against real
builds, paper sizes from the full data sets, memory fitting and refusal, the data guard, records of measured rates,
kernel launches, the time model, and every chapter planned at every scale."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

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


class OneMember(torch.nn.Module):
    """The batched implementation built with K = 1, (B, ...) -> (B, C)."""

    def __init__(self, batched: torch.nn.Module):
        super().__init__()
        self.batched = batched

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.batched(x.unsqueeze(0))[0]


def plain_model(config: RunConfig) -> torch.nn.Module:
    """One member alone, (B, ...) -> (B, C): the model's own single-member torch.nn factory; for the modular MLP
    and the Transformer, whose batched implementations compute less than their torch.nn single models (the MLP's
    first layer once per table row instead of per example; the Transformer's query, attention output and MLP at the
    last position only, all the logits read), the batched implementation with one member."""
    from nhtlib.models.mlp import MLPConfig
    from nhtlib.models.modular_mlp import ModularMLPConfig
    from nhtlib.models.transformer import ModularTransformerConfig

    shape, model = layout(config.task), config.model
    if isinstance(model, (ModularMLPConfig, ModularTransformerConfig)):
        return OneMember(model.build(shape.input_shape, shape.n_classes, [config.seed]))
    if isinstance(model, MLPConfig):
        return torch.nn.Sequential(torch.nn.Flatten(), model.single(math.prod(shape.input_shape), shape.n_classes))
    return model.single(shape.input_shape, shape.n_classes)  # SimpleCNN, VGG, ResNet


def one_model_step_flops(config: RunConfig, batch: int) -> float:
    """FLOPs of one training step of one plain model at `batch` examples, counted by torch's own FlopCounterMode
    (its rules are right for an ungrouped convolution)."""
    from torch.utils.flop_counter import FlopCounterMode

    shape = layout(config.task)
    x = memory.random_inputs(shape, batch)[0]
    y = torch.randint(0, shape.n_classes, (batch,))
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(plain_model(config)(x), y).backward()
    return counter.get_total_flops()


def batched_step_flops(config: RunConfig, k_members: int, batch: int, counter=None) -> float:
    """FLOPs of one training step of `k_members` batched members at `batch` examples, counted by `counter`
    (default: the planner's, `memory.count_flops`)."""
    from nhtlib.engine.step import member_loss

    shape = layout(config.task)
    model = config.model.build(shape.input_shape, shape.n_classes, [config.seed + i for i in range(k_members)])
    x = memory.random_inputs(shape, batch, k_members)
    y = torch.randint(0, shape.n_classes, (k_members, batch))
    with counter or memory.count_flops() as counted:
        member_loss(model(x), y).sum().backward()
    return counted.get_total_flops()


IMAGES = BorderCIFARTask(image_size=16, border_width=1, n_train=100, n_test=20)
CASES = {  # name: (config, members K, batch); K = 3, not the probe's 2
    "toy MLP, full batch": (_config(SparseParityTask(n_bits=40, n_train=300, n_test=100),
                                    model_config("mlp", hidden=(64,))), 3, 300),
    "modular MLP (fixed per-step table projection)": (_config(ModularTask(p=31), model_config("modular_mlp")), 3,
                                                      480),
    "NSDL Transformer": (_config(ModularTask(p=31), model_config("transformer"), batch_size=64), 3, 64),
    "SimpleCNN 16 px": (_config(IMAGES, model_config("simple_cnn"), batch_size=32), 3, 32),
    "VGG-16 + BN": (_config(IMAGES, model_config("vgg16", batchnorm=True, width=0.125), batch_size=16), 3, 16),
    "ResNet18 + BN": (_config(IMAGES, model_config("resnet18", norm="batch", width=0.125), batch_size=16), 3, 16),
}
CONVOLUTIONAL = ("SimpleCNN 16 px", "VGG-16 + BN", "ResNet18 + BN")


@pytest.mark.parametrize("name", list(CASES))
def test_the_flops_of_k_batched_members_are_k_times_one_plain_models(name):
    """Planned (`measure_step`, probed on 2 members) and counted on a real batched step of 3 members, the FLOPs
    equal 3 × a direct count of one plain torch.nn model within ±5 %. The planted fault this catches: torch's own
    rule counts the weight gradient of a grouped convolution (K members batched) K times over, so 3 batched conv
    members would read about 5/3 of 3 plain models."""
    from torch.utils.flop_counter import FlopCounterMode

    config, k, batch = CASES[name]
    one = one_model_step_flops(config, batch)
    assert one > 0
    cost = memory.measure_step(config)
    planned = cost.step_flops(batch) * k
    assert planned / (k * one) == pytest.approx(1.0, abs=0.05), (planned, k * one)
    batched = batched_step_flops(config, k, batch)
    assert batched / (k * one) == pytest.approx(1.0, abs=0.05), (batched, k * one)
    assert cost.convolutional == (name in CONVOLUTIONAL)
    if name in CONVOLUTIONAL:
        assert batched_step_flops(config, k, batch, FlopCounterMode(display=False)) / (k * one) > 1.3


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
    assert naive > 2 * k * one_model_step_flops(config, batch)


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


def _cost(parameters=1000, saved=1e4, live=1e3, convolutional=False):
    return memory.StepCost(train_flops=1e6, forward_flops=3e5, saved_bytes=saved, live_bytes=live,
                           parameters=parameters, convolutional=convolutional)


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


TOY = SparseParityTask(n_bits=40, n_train=300, n_test=100)
TOY_WORKLOAD = plan.workload_key("01_toy_norm_hierarchy", "MLP")


def _write_record(folder: Path, stamp: str, fp32: float, **fields) -> None:
    record = {"device_key": "h200", "workloads": {TOY_WORKLOAD: {"fp32": fp32}}, **fields}
    (folder / f"gpu_check-h200-{stamp}.json").write_text(json.dumps(record))


def test_only_the_newest_complete_record_of_the_current_code_is_trusted(tmp_path):
    now = "current-source"
    assert plan.rate_record("h200", folder=tmp_path, source_hash=now).source == "no gpu_check record"
    _write_record(tmp_path, "20261201T000000Z", 1e12, source_hash=now, complete=True)
    _write_record(tmp_path, "20261202T000000Z", 2e12, source_hash=now, complete=False)  # a stopped check
    found = plan.rate_record("h200", folder=tmp_path, source_hash=now)
    assert found.trusted and found.workloads[TOY_WORKLOAD]["fp32"] == 1e12
    assert found.source == "gpu_check-h200-20261201T000000Z.json"
    assert plan.rate_record("h200", folder=tmp_path, source_hash="edited-code").source == \
        "record stale: code changed since"
    incomplete = tmp_path / "incomplete"
    incomplete.mkdir()
    _write_record(incomplete, "20261202T000000Z", 2e12, source_hash=now, complete=False)
    assert plan.rate_record("h200", folder=incomplete, source_hash=now).source == "record incomplete"
    assert plan.measured_rates("h200", folder=incomplete) == {}


def test_the_real_source_hash_decides_whether_a_record_is_stale(tmp_path):
    from nhtlib.engine.source import run_source_hash

    _write_record(tmp_path, "20261201T000000Z", 1e12, source_hash=run_source_hash(), complete=True)
    assert plan.measured_rates("h200", folder=tmp_path) == {TOY_WORKLOAD: {"fp32": 1e12}}
    _write_record(tmp_path, "20261201T000000Z", 1e12, source_hash="0" * 16, complete=True)
    assert plan.measured_rates("h200", folder=tmp_path) == {}


def test_a_measured_rate_replaces_the_assumption_and_its_launch_term():
    sweep = Sweep("toy", tuple(grid(_config(TOY, model_config("mlp", hidden=(64,)), steps=100), seeds=range(2))))
    record = plan.RateRecord({TOY_WORKLOAD: {"fp32": 1e12}}, "gpu_check-h200-20261201T000000Z.json")
    measured = plan.plan_group(sweep, list(sweep.configs), plan.H200, record=record, chapter="01_toy_norm_hierarchy")
    assert measured.time_source == "measured: gpu_check-h200-20261201T000000Z.json"
    assert measured.seconds == pytest.approx((measured.train_flops + measured.eval_flops) / 1e12)  # nothing added
    other = plan.plan_group(sweep, list(sweep.configs), plan.H200, record=record, chapter="02_grokking")
    assert other.time_source.startswith("assumed") and other.launches > 0  # the rate is per group, not per device


def test_a_tiny_model_is_launch_bound_and_a_large_convnet_compute_bound():
    """The assumed time of a step is the longer of its FLOPs at the family's efficiency and its launches."""
    toy = Sweep("toy", tuple(grid(_config(TOY, model_config("mlp", hidden=(64,)), steps=1000), seeds=range(4))))
    tiny = plan.plan_group(toy, list(toy.configs), plan.H200)
    assert tiny.time_source.startswith("assumed: launch-bound, ")
    assert tiny.seconds >= tiny.steps * tiny.launches * plan.H200.launch_s
    cnn = Sweep("cnn", tuple(grid(_config(BorderCIFARTask(border_width=3, n_train=50_000, n_test=10_000),
                                          model_config("simple_cnn"), batch_size=128, steps=1000, precision="bf16"),
                                  seeds=range(8))))
    large = plan.plan_group(cnn, list(cnn.configs), plan.H200)
    assert large.time_source.startswith(f"assumed: conv net, {plan.H200.efficiency['conv net']:.0%} of bf16 peak")
    rate = plan.H200.peak_flops["bf16"] * plan.H200.efficiency["conv net"]
    assert large.seconds == pytest.approx((large.train_flops + large.eval_flops) / rate, rel=1e-6)


def test_every_family_states_its_efficiency():
    assert set(plan.H200.efficiency) == set(plan.FAMILIES)
    assert all(0 < share <= 1 for share in plan.H200.efficiency.values())
    assert plan.model_family("ResNet", _cost(convolutional=True)) == "conv net"
    assert plan.model_family("ModularTransformer", _cost()) == "Transformer"
    assert plan.model_family("FeatureMLP", _cost()) == "MLP"
    with pytest.raises(Exception, match="one share per family"):
        plan.Device("x", "x", "cuda", 1e9, {"fp32": 1e12}, {"conv net": 0.1}, 0.0)


def test_launches_are_counted_on_real_operations_views_excepted():
    x = torch.ones(8, 8)
    assert plan.count_launches(lambda: x.view(64).t()) == 0  # views launch nothing
    assert plan.count_launches(lambda: x.add(1)) == 1
    assert plan.count_launches(lambda: x.add(1).mul(2).sum()) == 3
    params = [torch.ones(3), torch.ones(4, 4)]
    assert plan.count_launches(lambda: torch._foreach_add_(params, 1.0)) == 1  # one fused kernel on a GPU


def test_a_steps_launches_include_its_optimiser_step():
    """A training step launches more than its forward and backward: the optimiser's update, one foreach kernel
    per operation of its rule (AdamW's has more than SGD's)."""
    from nhtlib.engine.step import member_loss

    base = _config(IMAGES, model_config("resnet18", norm="batch", width=0.125), batch_size=4)
    shape = layout(base.task)
    model = base.model.build(shape.input_shape, shape.n_classes, [0, 1])
    x, y = memory.random_inputs(shape, 2, 2), torch.randint(0, shape.n_classes, (2, 2))
    forward_backward = plan.count_launches(lambda: member_loss(model(x), y).sum().backward())
    sgd = base.replace(train=base.train.replace(optimizer="sgd", momentum=0.9))
    adamw = base.replace(train=base.train.replace(optimizer="adamw"))
    sgd_step = plan.step_launches([sgd, sgd.replace(seed=1)], shape)[0]
    adamw_step = plan.step_launches([adamw, adamw.replace(seed=1)], shape)[0]
    assert forward_backward < sgd_step < adamw_step
    assert adamw_step - forward_backward >= 8  # AdamW's rule: at least eight foreach operations


def test_paper_scale_is_sized_at_the_full_data_sets_whatever_is_on_disk(monkeypatch):
    """layout(full=True) ignores the files: a machine holding 1 % of CelebA plans (and sizes) paper scale at
    162,770 training images; layout() still reads the files."""
    from nhtlib.data import layout as layout_module
    from nhtlib.data.celeba import CelebATask
    from nhtlib.data.cifar import CIFARTask
    from nhtlib.data.inventory import FULL_SIZES

    subset = {name: {split: n // 100 for split, n in sizes.items()} for name, sizes in FULL_SIZES.items()}
    monkeypatch.setattr(layout_module, "inventory", lambda task: SimpleNamespace(
        present=True, found=subset[getattr(task, "dataset", type(task).__name__.removesuffix("Task").lower())]))
    cifar, celeba = CIFARTask(dataset="cifar10", n_train=None, n_test=None), CelebATask(split="official", n_train=None)
    assert layout(cifar).n_train == subset["cifar10"]["train"]
    assert layout(cifar, full=True).n_train == FULL_SIZES["cifar10"]["train"]
    assert layout(celeba, full=True).n_train == FULL_SIZES["celeba"]["train"]
    assert layout(celeba).n_train == subset["celeba"]["train"]


def _steps(chapter: str, scale: str, root: str) -> dict[str, list[int]]:
    return {s.name: [c.train.steps for c in s.configs] for s in CHAPTERS[chapter].sweeps(scale, root)}


def _digests(scale: str, root: str) -> dict[str, list[str]]:
    return {f"{name}/{s.name}": [c.digest() for c in s.configs]
            for name in CHAPTERS if name != "06_synthesis" for s in CHAPTERS[name].sweeps(scale, root)}


def test_paper_steps_come_from_the_full_data_and_smaller_scales_from_the_files(monkeypatch, tmp_path):
    """With the files on disk changed, the paper-scale CelebA and shuffled-label runs keep their full-size steps
    (100 epochs of 162,770 images at 256; 200 epochs of CIFAR-10's 50,000 at 128), while the cpu scale sizes what
    it leaves to the data (Waterbirds' training split) from the files, and no cpu or smoke config of any chapter
    depends on the full sizes."""
    from nhtlib.chapters import celeba_waterbirds as domains
    from nhtlib.chapters import dlr_batchnorm as richness
    from nhtlib.data import layout as layout_module
    from nhtlib.data.inventory import FULL_SIZES

    root = str(SHARED) if SHARED.is_dir() else str(tmp_path)
    celeba, vision = domains.PRESETS["paper"].celeba, richness.PRESETS["paper"].vision
    want_celeba = celeba.epochs * math.ceil(FULL_SIZES["celeba"]["train"] / celeba.batch_size)
    want_shuffle = vision.shuffle_epochs * FULL_SIZES[vision.shuffle_dataset]["train"] // vision.batch_size
    paper = {name: _steps(name, "paper", root) for name in ("04_celeba_waterbirds", "05_dlr_batchnorm")}
    assert set(paper["04_celeba_waterbirds"]["celeba"]) == {want_celeba}
    assert set(paper["05_dlr_batchnorm"]["ResNet18 shuffled labels"]) == {want_shuffle}

    subset = {name: {split: max(1, n // 7) for split, n in sizes.items()} for name, sizes in FULL_SIZES.items()}
    monkeypatch.setattr(layout_module, "inventory", lambda task: SimpleNamespace(
        present=True, found=subset[getattr(task, "dataset", type(task).__name__.removesuffix("Task").lower())]))
    assert {name: _steps(name, "paper", root) for name in paper} == paper  # the disk does not size paper runs
    birds = domains.PRESETS["cpu"].waterbirds
    assert birds.n_train is None  # left to the data: sized from the files at this scale
    assert set(_steps("04_celeba_waterbirds", "cpu", root)["waterbirds"]) == \
        {birds.epochs * math.ceil(subset["waterbirds"]["train"] / birds.batch_size)}
    small = {"smoke": _digests("smoke", root), "cpu": _digests("cpu", root)}
    for name, sizes in FULL_SIZES.items():  # the full sizes do not size the smaller scales when files are there
        monkeypatch.setitem(FULL_SIZES, name, {split: 3 * n for split, n in sizes.items()})
    assert {"smoke": _digests("smoke", root), "cpu": _digests("cpu", root)} == small
    assert _steps("04_celeba_waterbirds", "paper", root)["celeba"] != paper["04_celeba_waterbirds"]["celeba"]


def test_the_memory_plan_counts_workspace_norm_copies_and_decoded_evaluation_batches():
    shape = layout(BorderCIFARTask(image_size=16, border_width=1, n_train=200, n_test=50))
    cfg = TrainConfig(steps=10, batch_size=32, eval_batch_size=256)
    cost = _cost(parameters=10_000)
    without = memory.member_bytes(cost, cfg, shape, 32, 0)
    with_eval = memory.member_bytes(cost, cfg, shape, 32, 256)
    assert with_eval - without == 256 * (2 * cost.live_bytes + 4 * 3 * 16 * 16)  # float32 decoded inputs
    bare = memory.member_bytes(cost.__class__(**{**cost.__dict__, "parameters": 0}), cfg, shape, 32, 0)
    assert without - bare == 10_000 * (4 * memory.OPTIMISER_COPIES["adamw"] + memory.NORM_COPY_BYTES)
    conv = _cost(convolutional=True)
    assert memory.workspace_bytes(conv, "cuda") == memory.CUDNN_WORKSPACE_BYTES
    assert memory.workspace_bytes(conv, "cpu") == memory.workspace_bytes(_cost(), "cuda") == 0.0
    plain = memory.fit(conv, cfg, shape, 4, 100e9, reserve=0)
    spaced = memory.fit(conv, cfg, shape, 4, 100e9, reserve=0, workspace=memory.CUDNN_WORKSPACE_BYTES)
    assert spaced[2] - plain[2] == pytest.approx(memory.CUDNN_WORKSPACE_BYTES)


def test_a_chapter_plan_names_its_groups_for_the_job_planner(tmp_path, monkeypatch):
    monkeypatch.setenv("NHT_RESULTS", str(tmp_path))
    planned = plan_chapter("02_grokking", "smoke", "h200")
    assert [g.index for g in planned.groups] == list(range(len(planned.groups)))
    assert all(g.chapter == "02_grokking" and len(g.configs) == g.members and g.seconds > 0 for g in planned.groups)
    members = [c.digest() for g in planned.groups for c in g.configs]
    assert len(members) == len(set(members))  # a member two sweeps share is planned once


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
    # launches are not counted here (an H200 without its launch term): counting them at paper size takes long on
    # 2 cores and is tested on small models above
    paper = plan.plan_sweeps(chapter, "paper", CHAPTERS[chapter].sweeps("paper", root), replace(plan.H200, launch_s=0.0))
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
