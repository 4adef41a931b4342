"""benchmarks/gpu_check.py, the prepared GPU check, run on the CPU at tiny shapes (`--tiny`): it writes one record
with a rate or a recorded skip for every chapter and precision, an NSDL part with numbers or a reason, and the planner
reads its rates back. The check itself is what the lent GPU will run: this keeps it from rotting between loans."""
import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from nhtlib.engine import plan
from nhtlib.chapters import CHAPTERS
from nhtlib.config import PRECISIONS

BUDGET_S = 100
SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"


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
    # ~30 s on two idle cores; the budget bounds it on a busy machine (entries beyond it are skipped with a reason)
    assert gpu_check.main(["--tiny", "--out", str(out), "--budget-s", str(BUDGET_S)]) == 0
    files = sorted(out.glob("gpu_check-cpu-tiny-*.json"))
    assert len(files) == 1, files
    return out, json.loads(files[0].read_text())


def _number(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_record_fields(tiny_record):
    _, record = tiny_record
    for field in ("device", "device_key", "torch", "cuda", "cudnn", "git_commit", "source_hash", "date", "mode",
                  "rates", "details", "nsdl", "total_wall_s"):
        assert field in record, field
    assert record["device_key"] == "cpu-tiny" and record["mode"] == "tiny" and record["complete"] is True
    assert record["total_wall_s"] < BUDGET_S + 30  # the last entry started inside the budget may run past it


def test_every_chapter_and_precision_has_a_rate_or_a_reason(tiny_record):
    _, record = tiny_record
    assert set(record["details"]) == set(CHAPTERS)
    for chapter in CHAPTERS:
        entries = record["details"][chapter]["precisions"]
        assert set(entries) == set(PRECISIONS), chapter
        for precision, entry in entries.items():
            if "skipped" in entry:
                assert entry["skipped"], (chapter, precision)
                assert precision not in record["rates"].get(chapter, {})
            else:
                assert _number(entry["flops_per_s"]) and entry["k"] >= 1 and entry["seconds_per_step"] > 0
                assert entry["share_of_peak"] is None  # no dense peak is known for a CPU
                assert record["rates"][chapter][precision] == entry["flops_per_s"]
    # on a CPU every group fits and builds: the only admissible reason to skip is the time budget (a busy machine)
    reasons = [e["skipped"] for c in CHAPTERS for e in record["details"][c]["precisions"].values() if "skipped" in e]
    assert all(r.startswith("time budget") for r in reasons), reasons
    assert record["rates"][next(iter(CHAPTERS))], "not even the first chapter was measured"


def test_nsdl_part_has_numbers_or_a_reason(tiny_record):
    _, record = tiny_record
    nsdl = record["nsdl"]
    assert nsdl["paper"]["T_grok"]["mean"] == pytest.approx(1840) and nsdl["paper"]["T_mem"]["n"] == 10
    fp32 = nsdl["runs"]["fp32"]
    if "skipped" in fp32:
        assert fp32["skipped"]
        return
    assert fp32["members"] == 3 and fp32["wall_s"] > 0 and fp32["member_steps_per_s"] > 0
    assert [s["seed"] for s in fp32["per_seed"]] == [42, 43, 44]
    for col in ("T_mem", "T_grok"):  # a mean when some seed reached it (grokking is not required here)
        assert fp32[col]["n"] == sum(s[col] is not None for s in fp32["per_seed"])
        assert (fp32[col]["mean"] is None) == (fp32[col]["n"] == 0)
    assert "precision" in nsdl["second_precision"] or nsdl["second_precision"]["skipped"]


def test_planner_reads_the_rates(tiny_record):
    out, record = tiny_record
    assert plan.measured_rates("cpu-tiny", folder=out) == record["rates"]


def test_device_keys():
    gpu_check = load_script()
    assert gpu_check.device_key("NVIDIA H200", tiny=False) == "h200"
    assert gpu_check.device_key("NVIDIA A100-SXM4-80GB", tiny=False) == "nvidia-a100-sxm4-80gb"
    assert gpu_check.device_key("NVIDIA H200", tiny=True) == "cpu-tiny"
    assert gpu_check.peak_flops("NVIDIA H200", "bf16") == plan.H200.peak_flops["bf16"]
    assert gpu_check.peak_flops("NVIDIA A100", "bf16") is None
