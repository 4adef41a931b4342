"""bf16 where native, and only where measured equal: `nhtlib.engine.native_bf16`: its detection, resolution and gate.

A chapter preset may ask for "bf16-if-native"; `design_problems` lets it only when benchmarks/records/bf16_claims.json
measured that very design at fp32 and at bf16 with every verdict equal. The last test holds every chapter's presets
to the committed record."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from nhtlib.config import SCALES, Config, ConfigError
from nhtlib.engine import native_bf16 as precision
from nhtlib.engine.native_bf16 import IF_NATIVE, NATIVE_BF16_ENV

RECORD = Path(__file__).resolve().parents[1] / "benchmarks" / "records" / "bf16_claims.json"


@dataclasses.dataclass(frozen=True)
class Inner(Config):
    precision: str = IF_NATIVE
    lr: float = 1e-3


@dataclasses.dataclass(frozen=True)
class Outer(Config):
    a: Inner = Inner()
    b: Inner = Inner(precision="fp32")
    seeds: int = 3


def test_native_bf16_follows_the_override(monkeypatch):
    monkeypatch.setenv(NATIVE_BF16_ENV, "1")
    assert precision.native_bf16("cpu") and precision.resolve_precision(IF_NATIVE, "cpu") == "bf16"
    monkeypatch.setenv(NATIVE_BF16_ENV, "0")
    assert not precision.native_bf16("cpu") and precision.resolve_precision(IF_NATIVE, "cpu") == "fp32"
    monkeypatch.setenv(NATIVE_BF16_ENV, "yes")
    with pytest.raises(ConfigError):
        precision.native_bf16("cpu")


def test_detection_reads_the_cpu_flags(monkeypatch):
    monkeypatch.delenv(NATIVE_BF16_ENV, raising=False)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert precision.native_bf16("cpu")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512f", "amx_bf16"}))
    assert precision.native_bf16("cpu")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    assert not precision.native_bf16("cpu")
    assert precision.resolve_precision(IF_NATIVE, "cpu") == "fp32"


def test_other_choices_resolve_to_themselves(monkeypatch):
    monkeypatch.setenv(NATIVE_BF16_ENV, "1")
    for choice in ("fp32", "tf32", "bf16"):
        assert precision.resolve_precision(choice) == choice
    with pytest.raises(ConfigError):
        precision.resolve_precision("fp16")


def test_nested_fields_are_found_and_replaced():
    outer = Outer()
    assert precision.uses_native_bf16(outer) and not precision.uses_native_bf16(Outer(a=Inner(precision="fp32")))
    fp32 = precision.with_precision(outer, "fp32")
    assert (fp32.a.precision, fp32.b.precision) == ("fp32", "fp32") and not precision.uses_native_bf16(fp32)
    # the digest is the preset's as it states it: asking for bf16-if-native in one more part, or another seed
    # count, is another design; the machine does not enter
    assert precision.design_digest(outer) != precision.design_digest(fp32)
    assert precision.design_digest(outer) != precision.design_digest(Outer(a=Inner(precision="fp32")))
    assert precision.design_digest(outer) != precision.design_digest(Outer(seeds=4))
    assert precision.design_digest(outer) == precision.design_digest(Outer())


def _entry(preset, verdicts: dict, **kw) -> dict:
    return {"design": precision.design_digest(preset), "native_bf16": True,
            "verdicts": {cid: {"fp32": a, "bf16": b} for cid, (a, b) in verdicts.items()}, **kw}


def _problems(preset, record: dict | None) -> list[str]:
    return precision.design_problems("ch", precision.uses_native_bf16(preset), precision.design_digest(preset), record)


def test_the_gate_on_records_with_known_answers():
    outer = Outer()
    equal = _entry(outer, {"P1": ("reproduced", "reproduced"), "P2": ("inconclusive", "inconclusive")})
    assert _problems(outer, equal) == []
    assert _problems(Outer(a=Inner(precision="fp32")), None) == []  # asks for no bf16
    assert "no bf16-equality record" in _problems(outer, None)[0]
    differ = _entry(outer, {"P1": ("reproduced", "inconclusive"), "P2": ("partly", "partly")})
    assert _problems(outer, differ) == ["ch: verdicts differ at bf16 for P1"]
    other_design = _entry(Outer(seeds=4), {"P1": ("reproduced", "reproduced")})
    assert "another design" in _problems(outer, other_design)[0]
    emulated = {**equal, "native_bf16": False}
    assert "native" in _problems(outer, emulated)[0]
    assert "no verdicts" in _problems(outer, _entry(outer, {}))[0]


def test_every_chapter_preset_that_takes_bf16_was_measured_equal():
    """... and every chapter that reads such runs (chapter 6 reads chapters 1-4's sweeps)."""
    from nhtlib.chapters import CHAPTERS

    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    problems = [p for name, chapter in CHAPTERS.items() for scale in (chapter.presets or SCALES)
                for p in precision.design_problems(f"{name} at {scale}", *chapter.bf16_design(scale),
                                                   record.get(name, {}).get(scale))]
    assert problems == []


def test_a_chapter_that_reads_bf16_runs_is_gated_too(monkeypatch):
    """Chapter 6 trains nothing but reads chapter 2's stand-in: when that asks for bf16-if-native, chapter 6's runs
    depend on the machine, its design is another one (whatever this machine is), and it needs its own record."""
    from nhtlib.chapters import CHAPTERS, grokking

    synthesis, cpu = CHAPTERS["06_synthesis"], grokking.PRESETS["cpu"]
    designs = {}
    for choice in ("fp32", IF_NATIVE):
        monkeypatch.setitem(grokking.PRESETS, "cpu", cpu.replace(stand_in=cpu.stand_in.replace(precision=choice)))
        designs[choice] = synthesis.bf16_design("cpu")
        with precision.native_override("0"):  # another machine, the same design
            assert synthesis.bf16_design("cpu") == designs[choice]
    assert designs["fp32"][0] is False and designs[IF_NATIVE][0] is True  # NSDL's batch is no run chapter 6 reads
    assert designs["fp32"][1] != designs[IF_NATIVE][1]
    assert "no bf16-equality record" in precision.design_problems("06 at cpu", *designs[IF_NATIVE], None)[0]
    assert precision.design_problems("06 at cpu", *designs["fp32"], None) == []
    assert CHAPTERS["01_toy_norm_hierarchy"].bf16_design("cpu")[0] is False


def test_smoke_scale_never_depends_on_the_machine():
    """The test suite's own runs (smoke) are the same on every CPU: no smoke preset asks for bf16-if-native."""
    from nhtlib.chapters import CHAPTERS

    assert [n for n, c in CHAPTERS.items() if "smoke" in c.presets and precision.uses_native_bf16(c.preset("smoke"))
            ] == []


def test_the_benchmark_compares_verdicts_claim_by_claim():
    import pandas as pd

    spec = importlib.util.spec_from_file_location("bf16_claims", RECORD.parents[1] / "bf16_claims.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    a = pd.DataFrame({"id": ["P1", "P2"], "verdict": ["reproduced", "inconclusive"], "ours": ["0.9", "0.1"]})
    b = pd.DataFrame({"id": ["P1", "P3"], "verdict": ["reproduced", "partly"], "ours": ["0.8", "x"]})
    out = bench.compare(a, b)
    assert out["P1"]["fp32"] == out["P1"]["bf16"] == "reproduced"
    assert (out["P2"]["bf16"], out["P3"]["fp32"]) == ("missing", "missing")


def test_chapter_2_takes_bf16_where_native_at_cpu_scale_only(monkeypatch):
    """Chapter 2's cpu preset asks for bf16-if-native on both models: it reaches every member of every sweep (bf16
    on a CPU that has it, fp32 on one that has not); its paper preset stays fp32 on any machine."""
    from nhtlib.chapters import CHAPTERS, grokking

    chapter = CHAPTERS[grokking.NAME]
    for native, expected in (("1", "bf16"), ("0", "fp32")):
        monkeypatch.setenv(NATIVE_BF16_ENV, native)
        by_sweep = {s.name: {c.train.precision for c in s.configs} for s in grokking.sweeps(chapter.preset("cpu"))}
        assert set(by_sweep) == {"one run", grokking.STAND_IN_SWEEP, "SGD", "NSDL settings"}
        assert set().union(*by_sweep.values()) == {expected}
        assert {c.train.precision for s in grokking.sweeps(chapter.preset("paper")) for c in s.configs} == {"fp32"}
    assert precision.precision_text(IF_NATIVE) != IF_NATIVE and precision.precision_text("fp32") == "fp32"
    table = grokking.scale_table().data
    assert (table.loc["NSDL: precision", "cpu"] == table.loc["stand-in: precision", "cpu"]
            == precision.precision_text(IF_NATIVE))
