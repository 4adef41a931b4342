"""benchmarks/seed_blocks.py: the two blocks of seeds it compares must be independent replications."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from nhtlib.chapters import CHAPTERS, grokking

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "seed_blocks.py"


@pytest.fixture(scope="module")
def seed_blocks():
    spec = importlib.util.spec_from_file_location("seed_blocks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("chapter", [name for name, c in CHAPTERS.items() if c.claims])
def test_blocks_0_and_10_share_no_seed_at_cpu_scale(seed_blocks, chapter):
    assert seed_blocks.shared_seeds(chapter, "cpu", 10) == []


def test_a_design_with_more_seeds_than_the_block_offset_shares_them(seed_blocks, monkeypatch):
    cpu = grokking.PRESETS["cpu"]
    assert CHAPTERS["02_grokking"].presets is grokking.PRESETS  # the registry reads the module's presets
    monkeypatch.setitem(grokking.PRESETS, "cpu", cpu.replace(nsdl=cpu.nsdl.replace(table2_seeds=16)))
    assert seed_blocks.shared_seeds("02_grokking", "cpu", 10) == list(range(10, 16))
    assert seed_blocks.shared_seeds("02_grokking", "cpu", 16) == []
    with pytest.raises(SystemExit):
        seed_blocks.main(["02_grokking", "--seed", "10", "--record", "/nonexistent/never-written.json"])
