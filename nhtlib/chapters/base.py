"""The one interface every chapter implements: its presets, its sweeps, its runs by name, its claims.

A chapter module (``nhtlib.chapters.<page name>``, named like its notebook without the number) builds one `Chapter`
at its end and `nhtlib.chapters.CHAPTERS` registers it. The builder, the runner, the compute planner, chapter 6 and
the tests read chapters only through this object:

* ``chapter.preset(scale)`` — the frozen, validated preset of a scale (``smoke``, ``cpu``, ``paper``);
* ``chapter.sweeps(scale, data_root, first_seed)`` — the sweeps it trains (`nhtlib.engine.sweep.Sweep`), which the
  builder trains with progress bars and the planner plans; ``chapter.runs(NAME, scale, ...)`` — one sweep's run table
  by its name (the module's constant for that name: another chapter never types the string);
* ``chapter.bf16_design(scale)`` — whether what it trains or reads there depends on native bf16, and that design's
  digest: what the bf16-equality gate holds to its record (`nhtlib.engine.native_bf16.design_problems`);
* ``chapter.page_claims(scale, seed)`` — the claims book its page records its verdicts in
  (`nhtlib.report.claims.Claims`), told which of them moved between the seed-block record's blocks of seeds;
* ``chapter.claims`` — its claims, in the order of its sections (`nhtlib.report.claims.Claim`: statement, the paper's
  value with its source tag, the estimate it computes from the chapter's analysed runs, and its rule), and
  ``chapter.judge(analysed)`` — every claims row, from whatever the chapter's ``analyse`` returns.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from nhtlib.config import SCALES, ConfigError, stable_hash
from nhtlib.engine.native_bf16 import design_digest, native_override, uses_native_bf16
from nhtlib.engine.sweep import Sweep
from nhtlib.report.claims import Claim, Claims
from nhtlib.report.stability import entry_at, other_block
from nhtlib.report.verdicts import ClaimResult

# (preset, data_root, first_seed) -> the chapter's sweeps; a chapter without presets gets the scale's name instead
SweepsOf = Callable[[Any, "str | None", int], list[Sweep]]


@dataclass(frozen=True)
class Chapter:
    """The library side of one chapter page."""

    name: str  # the notebook's file stem, e.g. '01_toy_norm_hierarchy': results, claims and pages are filed by it
    title: str  # the page's title, for the registry's listings and links between chapters
    module: str  # the chapter module's dotted name: its source (with the report's) is what the page executes
    presets: Mapping[str, Any]  # scale -> preset; empty for a chapter that trains nothing of its own
    sweeps_of: SweepsOf  # the module's `sweeps`: what it trains (or reads) for a preset: the planner's, builder's view
    claims: tuple[Claim, ...]  # in the order of the chapter's sections; ids unique
    reads: tuple[str, ...] = ()  # names of the chapters whose runs it reads instead of training its own
    data: tuple[str, ...] = field(default=())  # data set folders under data_root it reads (() = generated data)
    summary: str = ""  # what the chapter reproduces, in a sentence or two: the book's introduction lists it

    def __post_init__(self) -> None:
        ids = [c.id for c in self.claims]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"chapter {self.name}: claim ids must be unique; got {ids}")
        unknown = set(self.presets) - set(SCALES)
        if unknown:
            raise ConfigError(f"chapter {self.name}: presets for unknown scales {sorted(unknown)}")

    def preset(self, scale: str) -> Any:
        """The preset of `scale` (ConfigError naming the scales it has)."""
        if scale not in self.presets:
            raise ConfigError(f"chapter {self.name} has no preset for scale={scale!r}; choose one of "
                              f"{', '.join(self.presets) or '(none: it trains nothing of its own)'}")
        return self.presets[scale]

    def sweeps(self, scale: str, data_root: str | None = None, first_seed: int = 0) -> list[Sweep]:
        """Every sweep the chapter trains (or, with `reads`, reads) at `scale`: `sweeps_of` on the scale's preset (on
        the scale's name for a chapter without presets of its own), each told its scale (a paper-scale sweep refuses
        to train on a CPU: `nhtlib.config.check_scale_device`)."""
        found = self.sweeps_of(self.preset(scale) if self.presets else scale, data_root, first_seed)
        return [dataclasses.replace(sweep, scale=scale) for sweep in found]

    def sweep(self, name: str, scale: str, data_root: str | None = None, first_seed: int = 0) -> Sweep:
        """The sweep called `name` (ConfigError listing the chapter's sweeps when there is none)."""
        sweeps = self.sweeps(scale, data_root, first_seed)
        for sweep in sweeps:
            if sweep.name == name:
                return sweep
        raise ConfigError(f"chapter {self.name} has no sweep {name!r}; it has {', '.join(s.name for s in sweeps)}")

    def runs(self, name: str, scale: str, *, data_root: str | None = None, first_seed: int = 0,
             device: str = "auto", progress: bool = True) -> pd.DataFrame:
        """The run table of the sweep `name` at `scale`: trained, or read back from the run cache."""
        return self.sweep(name, scale, data_root, first_seed).run(device=device, progress=progress)

    def bf16_design(self, scale: str) -> tuple[bool, str]:
        """(whether the runs the chapter trains or reads at `scale` depend on native bf16, the digest of that
        design): its preset's (`design_digest`) for a chapter with presets; for one that reads others' runs (chapter
        6 reads chapter 2's stand-in), the configs it reads on a machine with and on one without native bf16 (the
        digest holds both: it does not depend on this machine)."""
        if self.presets:
            preset = self.preset(scale)
            return uses_native_bf16(preset), design_digest(preset)
        configs = {}
        for value in ("1", "0"):
            with native_override(value):
                configs[value] = [c.to_dict() for sweep in self.sweeps(scale) for c in sweep.configs]
        return configs["1"] != configs["0"], stable_hash(configs)

    def page_claims(self, scale: str, seed: int = 0) -> Claims:
        """The claims book of the chapter's page at `scale` and first seed `seed`: a claim whose verdict moved between
        the blocks of seeds of its seed-block record (benchmarks/records/seed_blocks.json) says so on the page
        (`Claims.moved`), when the record measured this design (`stability.other_block`)."""
        entry, design = entry_at(self.name, scale), self.bf16_design(scale)[1]
        return Claims(self.name, scale, moved_of=lambda frame: other_block(entry, seed, design, frame))

    def claim(self, claim_id: str) -> Claim:
        for c in self.claims:
            if c.id == claim_id:
                return c
        raise KeyError(f"chapter {self.name} declares no claim {claim_id!r}")

    def judge(self, analysed: Any) -> list[ClaimResult]:
        """Every claims row of the chapter, in order, from what its `analyse` returned."""
        return [claim.judge(analysed) for claim in self.claims]
