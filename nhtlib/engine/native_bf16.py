"""bf16 where the hardware computes it natively, and only where a chapter's verdicts were measured equal.

A chapter preset may ask for ``"bf16-if-native"`` (`IF_NATIVE`): bf16 autocast (`nhtlib.engine.precision`) where
the device computes bf16 natively (`native_bf16`: a CUDA GPU with bf16, or a CPU with AVX512-BF16 or AMX — where
bf16 matmuls run 2-5x faster than fp32; on a CPU without them PyTorch emulates bf16, ~100x slower), else fp32.
`resolve_precision` turns it into "bf16" or "fp32" when the chapter builds its `TrainConfig`, so what a run did is
in its config and its run key. A chapter asks for it only where its verdicts at that scale were measured equal at
both precisions on one machine: `benchmarks/bf16_claims.py` writes the record, `design_problems` holds a design to it
(tests/test_bf16_gate.py). No run imports this module: where the choice is made is not code a run executes.
"""
from __future__ import annotations

import dataclasses
import os
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

import torch

from nhtlib.config import PRECISIONS, check_choice, stable_hash

IF_NATIVE = "bf16-if-native"  # a preset's choice: bf16 where native (`native_bf16`), fp32 elsewhere
PRESET_PRECISIONS = PRECISIONS + (IF_NATIVE,)  # what a chapter preset's `precision` field may hold
NATIVE_BF16_ENV = "NHT_NATIVE_BF16"  # "0" / "1" overrides the detection (a fp32 twin of a run on a bf16 machine)
# /proc/cpuinfo flags of the x86 units that compute bf16 dot products natively (AVX512-BF16: Cooper Lake, Zen 4
# and later; AMX: Sapphire Rapids and later)
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none, e.g. macOS: bf16 is then not native)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_bf16(device_type: str | None = None) -> bool:
    """Whether `device_type` ("cpu", "cuda"; None: the device "auto" picks) computes bf16 natively.
    $NHT_NATIVE_BF16 ("0" or "1") overrides the detection."""
    forced = os.environ.get(NATIVE_BF16_ENV)
    if forced is not None:
        check_choice(NATIVE_BF16_ENV, forced, ("0", "1"))
        return forced == "1"
    if device_type is None:
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(cpu_flags() & set(NATIVE_BF16_CPU_FLAGS))


@contextmanager
def native_override(value: str) -> Iterator[None]:
    """$NHT_NATIVE_BF16 set to `value` ("0" or "1") inside the block, as it was after: the configs a chapter builds
    inside are those of a machine without (or with) native bf16."""
    check_choice(NATIVE_BF16_ENV, value, ("0", "1"))
    with mock.patch.dict(os.environ, {NATIVE_BF16_ENV: value}):  # restores the environment as it was, unset too
        yield


def resolve_precision(choice: str, device_type: str | None = None) -> str:
    """A preset's precision as a `TrainConfig.precision`: `IF_NATIVE` becomes "bf16" where `native_bf16`, else
    "fp32"; every other choice is itself."""
    check_choice("precision", choice, PRESET_PRECISIONS)
    if choice != IF_NATIVE:
        return choice
    return "bf16" if native_bf16(device_type) else "fp32"


def precision_text(choice: str) -> str:
    """A preset's precision as a page says it: `IF_NATIVE` spelled out, every other choice as it is."""
    return "bf16 autocast where native (AVX512-BF16, AMX, a GPU), else fp32" if choice == IF_NATIVE else choice


# --------------------------------------------------------------------------- the bf16-equality gate of a preset

def with_precision(preset: Any, precision: str) -> Any:
    """`preset` with every precision field that asks for `IF_NATIVE` set to `precision` (the others kept)."""
    changes = {}
    for f in dataclasses.fields(preset):
        value = getattr(preset, f.name)
        if f.name == "precision" and value == IF_NATIVE:
            changes[f.name] = precision
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = with_precision(value, precision)
    return dataclasses.replace(preset, **changes)


def uses_native_bf16(preset: Any) -> bool:
    """Whether any precision field of `preset` (nested ones included) asks for `IF_NATIVE`."""
    return with_precision(preset, "fp32") != preset


def design_digest(preset: Any) -> str:
    """The digest of `preset`'s design as measured by the equality check: every field as the preset states it, so
    a preset that asks for `IF_NATIVE` in one more part (chapter 2's stand-in beside its Transformer batch) is
    another design, measured again; the machine it runs on does not enter."""
    return stable_hash(preset.to_dict() if hasattr(preset, "to_dict") else dataclasses.asdict(preset))


def design_problems(chapter: str, uses: bool, design: str, record: dict | None) -> list[str]:
    """Why a chapter's design (`nhtlib.chapters.base.Chapter.bf16_design`: its preset's, or the runs it reads) may
    not take bf16 where native: [] when it does not depend on it (`uses` false), or when `record`
    (benchmarks/records/bf16_claims.json's entry for the chapter at that scale) measured this very design (`design`,
    its digest) at both precisions on a CPU with native bf16 and found every claim's verdict equal."""
    if not uses:
        return []
    if not record:
        return [f"{chapter}: asks for {IF_NATIVE} but no bf16-equality record measured it "
                "(python benchmarks/bf16_claims.py)"]
    problems = []
    if record.get("design") != design:
        problems.append(f"{chapter}: the bf16-equality record measured another design ({record.get('design')}; "
                        f"this one is {design}): measure it again")
    if not record.get("native_bf16"):
        problems.append(f"{chapter}: the bf16-equality record was not measured with native bf16")
    verdicts = record.get("verdicts") or {}
    if not verdicts:
        problems.append(f"{chapter}: the bf16-equality record holds no verdicts")
    differ = sorted(cid for cid, pair in verdicts.items() if pair["fp32"] != pair["bf16"])
    if differ:
        problems.append(f"{chapter}: verdicts differ at bf16 for {', '.join(differ)}")
    return problems
