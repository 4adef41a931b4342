"""Chapter 4: CelebA and Waterbirds (NHT §5.9–5.10, their rows of Table 3) — the λ sweep on CelebA (Smiling against
Blond_Hair) and the λ sweep on Waterbirds (the real data set, or a stand-in built from CUB photos). The S spectrum of
every domain and NHT's whole Table 3 are chapter 6's (`nhtlib.chapters.synthesis`), which reads what this chapter records.

What the notebook uses: `PRESETS` (one `ChapterPreset` per scale), `domains` (the two data sets: tasks, built data,
their names in NHT's Table 3 and in the S spectrum), `group_counts` / `example_rows` (Figs. 4.2a–b), `run` (train or read
back both sweeps: a `ChapterRuns` of run tables and per-run summaries), `record_separation` (this chapter's S_traj
for chapter 6's S spectrum), the tables and views its figures show (`domain_table`, `numbers`), `analyse` (what the
claims read) and `CHAPTER.claims` (the claims, `CLAIMS`, judged per seed with 95 % intervals).

NHT's P1–P6 come from `nhtlib.report.predictions` under the ids C-P1 … C-P6 (CelebA) and W-P1 … W-P6 (Waterbirds); the
paper's Table 3 cell decides the direction of each test (the × cells — CelebA and Waterbirds P5, Waterbirds P3 and
P4 — are one-sided with a positive control, P6 is not testable on either: NHT's × there means "not tested"). The
chapter reads three cells more strictly than the shared rule: C-P3 on the runs that learned, with the fall paired
within each seed; C-P4 and W-P4 with runs as the unit (a seed holds one to three such runs). It adds the paper's own
CelebA evidence for P4 (C-L1, the head / conv1 norm ratio), CelebA's 37× norm ratio (C-V1), accuracies after epoch 20
and the absence of an accuracy jump (C-A1–A3, testable only at the paper's budget), what the paper saw of Waterbirds'
regimes (W-D1, in decay-budget units) and its γ_eff remark (W-G1, not testable: no evidence). Regimes are behaviour
plus norm (`summarise`). At smoke and cpu scale every Waterbirds row names the CUB stand-in it read (`DomainClaim`).
Every statistic is computed per seed (each seed has its own initialisation and batch order; the data are the same
for every seed), then summarised by `nhtlib.analysis.statistics.interval`, or per run (`statistics.run_share`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from nhtlib.chapters.base import Chapter
from nhtlib.analysis import statistics
from nhtlib.engine import plan
from nhtlib.report import predictions, tables, verdicts
from nhtlib.analysis import separation
from nhtlib.engine.native_bf16 import PRESET_PRECISIONS, resolve_precision
from nhtlib.config import ChapterParams, Config, ConfigError, TrainConfig, check_choice, check_range
from nhtlib.data import Dataset, TaskConfig
from nhtlib.data.celeba import CelebATask
from nhtlib.data.groups import parse_group_name
from nhtlib.data.layout import layout
from nhtlib.data.waterbirds import STANDARD_DIRS, WaterbirdsTask
from nhtlib.analysis import groups, vision
from nhtlib.models import config as model_config
from nhtlib.paths import default_data_root
from nhtlib.engine.sweep import RunConfig, Sweep, grid
from nhtlib.chapters.probes import with_dlr
from nhtlib.analysis.regimes import DECAY_MIN_PCT
from nhtlib.report.claims import Claim
from nhtlib.report.verdicts import (AllOf, AtLeast, AtMost, ClaimResult, ClaimSpec, Estimate, Matches, NotTested,
                                    PositiveControl)
from nhtlib.analysis.statistics import interval

NAME = "04_celeba_waterbirds"
CELEBA_SWEEP, WATERBIRDS_SWEEP = "celeba", "waterbirds"  # the two λ sweeps, by name (the keys of `domain_tasks`)
SUMMARY = " ".join(r"""
Where the norm hierarchy does not separate: CelebA (Smiling vs Blond_Hair) on a 5,732-image subset, a Waterbirds
stand-in built from real CUB photos, worst-group accuracy (NHT).
""".split())  # what the chapter reproduces: the book's introduction lists it (`nhtlib.cli.build`)
CELEBA, WATERBIRDS = "CelebA", "Waterbirds"  # NHT Table 3's rows
STANDIN = "Waterbirds (CUB stand-in)"  # the S spectrum's name for the stand-in: its numbers are not Waterbirds'
PREFIX = {CELEBA: "C-", WATERBIRDS: "W-"}
WATERBIRDS_SOURCES = ("auto", "waterbirds", "cub_standin")
PAPER_CELEBA_LAMBDAS = (0.001, 0.1, 1.0)  # [paper] nht.md §3.4 (NHT §5.10)
PAPER_WB_LAMBDAS = (1e-4, 1e-3, 0.01, 0.1, 0.3, 1.0)  # [paper] nht.md §3.5
CONVS = tuple(f"conv{i}" for i in range(1, 7))
HEAD, BODY = "head", "conv1"  # the layers P4 and C-L1 compare
CHANCE = 0.5  # two classes; also the mean-over-groups accuracy of a model that reads only one feature
# The structured ("clean") accuracy of the regime rule and of T_clean_acc: the accuracy on the bias-conflicting groups
# (the spurious attribute disagrees with its majority pairing), CIFAR's "accuracy without the border" here: only the
# target feature can raise it. Average test accuracy rises when the shortcut is learned; worst-group accuracy is 0 for
# a model that predicts one class, so any learning after an epoch-1 norm peak would read as a transition.
CLEAN = "test_conflicting_acc"
RELIANCE = "test_spurious_reliance"  # the shortcut reliance 1 − acc_conflicting / acc_aligned (vision.summarise)
CLEAN_THRESHOLD = 0.9  # T_clean_acc: first epoch with bias-conflicting accuracy >= 0.9 (the paper's runs sit near 90 %)
LATE_EPOCH = 20  # [paper] nht.md §3.4: "stable performance above 86 % after epoch 20"
SIGNAL = "spurious reliance 1 − acc_conflicting / acc_aligned"  # φ of S_traj here (nht.md §1.5)


# ------------------------------------------------------------------------------------------------------ presets

@dataclass(frozen=True)
class DomainPreset(Config):
    """What one scale runs on one data set (a SimpleCNN λ sweep, AdamW with a cosine schedule to 0)."""

    image_size: int  # side after resizing (paper: 64 for CelebA, 224 for Waterbirds)
    n_train: int | None  # group-stratified training images (None: the whole training split)
    epochs: int  # AdamW epochs, logged after every one (paper: 100)
    batch_size: int  # minibatch, drawn epoch by epoch
    lr: float  # AdamW η (paper 1e-3); the decay budget of a run is λΣη
    lambdas: tuple[float, ...]  # the λ grid; P1–P3 read a per-seed Spearman over it, so >= 3 values
    seeds: int  # seeds at every λ; a verdict needs >= 3 (nhtlib.report.verdicts.MIN_UNITS)
    train_eval_size: int = 500  # train accuracy on this many training images: evaluating all costs an epoch
    # SimpleCNN channel multiplier (1 = the paper's model): the claims are about the norm dynamics, not the accuracy
    # a width buys, so a narrower model of the same layout is a cheaper run
    cnn_width: float = 1.0
    precision: str = "fp32"  # TrainConfig.precision: bf16 autocast at paper scale (a GPU's tensor cores), fp32 here

    def validate(self) -> None:
        check_range("image_size", self.image_size, 4, 512, integer=True)
        if self.n_train is not None:
            check_range("n_train", self.n_train, 1, None, integer=True)
        check_choice("precision", self.precision, PRESET_PRECISIONS)
        for name in ("epochs", "batch_size", "seeds", "train_eval_size"):
            check_range(name, getattr(self, name), 1, None, integer=True)
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)
        check_range("cnn_width", self.cnn_width, 0.0, None, low_inclusive=False)
        if len(self.lambdas) < 3 or any(v <= 0 for v in self.lambdas) or list(self.lambdas) != sorted(
                set(self.lambdas)):
            raise ConfigError(f"lambdas={self.lambdas!r} must be at least 3 positive, distinct, increasing values")


@dataclass(frozen=True)
class ChapterPreset(Config):
    """What one scale of chapter 4 runs."""

    celeba_split: str  # "identity" (identity-disjoint, for a subset) or "official" (the full data set's partition)
    celeba: DomainPreset
    waterbirds: DomainPreset
    full_data: bool = False  # refuse to start unless CelebA is complete and Waterbirds real (paper scale)
    real_waterbirds: bool = False  # waterbirds_source="auto" must find the real data set (paper scale)

    def validate(self) -> None:
        check_choice("celeba_split", self.celeba_split, ("identity", "official"))
        for name in ("celeba", "waterbirds"):
            if not isinstance(getattr(self, name), DomainPreset):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a DomainPreset")


PRESETS = {
    # seconds: 8 × 8 px (the per-epoch test pass over ~2,000 CelebA images dominates), 200 images, 2 epochs; 3 seeds
    # only so that every rule is exercised on a real interval
    "smoke": ChapterPreset(
        celeba_split="identity",
        celeba=DomainPreset(image_size=8, n_train=200, epochs=2, batch_size=50, lr=1e-3,
                            lambdas=PAPER_CELEBA_LAMBDAS, seeds=3),
        waterbirds=DomainPreset(image_size=8, n_train=200, epochs=2, batch_size=50, lr=3e-3,
                                lambdas=(1e-4, 0.1, 1.0), seeds=3)),
    # measured: 962 s on an AMD EPYC (fp32 matmul ≈ 190 GFLOP/s), 1,110 s on an Intel Xeon (≈ 277). 3 seeds at
    # every λ (was 2 on CelebA; 1 per λ on Waterbirds plus 2 more at λ = 0.1). Training FLOPs ≈ 3 × forward FLOPs × images × epochs, with a SimpleCNN forward pass of
    # ≈ 43 MFLOP at 24 × 24 px, plus one forward pass per epoch over the test set and 500 training images:
    # CelebA 3 × 43e6 × 2,000 × 10 + 43e6 × 1,930 × 10 ≈ 3.4 TFLOP a run × 4 λ × 3 seeds ≈ 41 TFLOP; the
    # stand-in 3 × 43e6 × 909 × 15 + 43e6 × 1,266 × 15 ≈ 2.6 TFLOP a run × 7 λ × 3 seeds ≈ 55 TFLOP; 96 TFLOP in
    # all against the old 51 (348 s at ~115 GFLOP/s): ~11 min there, ~5 min at 300 GFLOP/s. The grids stay.
    # CelebA keeps the paper's η = 1e-3 (an earlier trial at 3e-3, not kept in the cache, left seeds at chance);
    # the stand-in takes chapter 3's 3e-3. Each grid gets λ = 3 on top of the paper's: the decay budget λΣη
    # is far below the paper's at this scale.
    # Does the design show what the paper says of these domains — models that learn, and no delayed transition? Screened
    # (issue 27; one seed, runs not kept, matmul ≈ 190 GFLOP/s): CelebA as here, λ = 0.001 / 0.1 / 1 / 3 (119 s): the
    # target is learned from epoch 2 (worst-group 0.67-0.81 at the end), the Blond_Hair reliance is 0.26 at epoch 1
    # (a near-constant prediction) and ≤ 0.05 from epoch 2 on: the training split's Smiling / Blond_Hair correlation
    # is weak (26 % of smiling and 17 % of non-smiling faces are blond), so there is no shortcut phase to leave —
    # the paper's "no delayed transition to observe". The stand-in as here (156 s): background and bird are read by
    # epoch 2 (reliance 0.3, bias-conflicting accuracy 0.53), and neither moves after the norm's peak at any λ; with
    # the bird at 0.9 of the image and 30 epochs (Σηₛ 1.3, the paper's 3.75; 179 s) the bird is read better
    # (conflicting 0.62, reliance 0.2), again by epoch 2, and moves ≤ 3 points after: Scenario C, as NHT says of
    # Waterbirds. Neither change would show a transition, so the design stays; the chapter tabulates the runs that
    # leave the shortcut (Table 4.0, `left_tables`) with chapter 3's rule, whose runs are the positive control.
    # fp32: bf16 autocast on a CPU with native bf16 ran the chapter in 682 s against 962 s (1.41x) but changed 4 of its
    # 19 verdicts (C-P1, C-P5, W-P1, W-P3: the per-seed intervals move across their thresholds, as between seed
    # blocks), so the bf16-equality gate keeps it at fp32 (benchmarks/records/bf16_claims.json). fp32 itself moves as
    # much between CPUs: the same design and seeds on an Intel Xeon (AMX; 1,097 s of training at ≈ 277 GFLOP/s fp32
    # matmul: convolutions gain less than matmul) changed 4 of the 19 verdicts of the AMD EPYC's fp32 run (C-P1,
    # C-P3, C-P5, W-P1), none between reproduced and not reproduced.
    # 6 seeds at every λ (was 3): at 3 the power read-out asked ≈ 6 seeds for C-L1 and W-P5, and ≈ 5-6 for chapter
    # 6's D1 / D2 on both domains. At 6 (1,182 s for the 33 members added, matmul ≈ 310 GFLOP/s): W-P3 decided
    # (−0.01 [−0.05, 0.02]) and chapter 6's D1 on CelebA (−0.07 [−0.13, −0.00], not reproduced); C-L1 (5 seeds) and
    # W-P5 (−0.07 [−0.43, 0.30]) are not.
    # The SimpleCNN at half width (cnn_width 0.5; issue 27, part 6): at full width and 6 seeds the chapter was ≈ 38
    # min (matmul ≈ 310 GFLOP/s); a step at 24 px is 3.9x faster at half width (62.6 against 16.1 steps/s at batch
    # 64, 2 threads, matmul ≈ 320 GFLOP/s). The chapter then took 798 s (nht-book run, matmul ≈ 328 GFLOP/s) and
    # decides 6 of 11 claims with runs, as at full width (C-P3 now decided, W-P3 now not).
    # The stand-in at 9 seeds (was 6; issue 27, part 8): the power read-out asked ≈ 9 for W-P3 (0.01 [−0.01, 0.03]
    # at seeds 0-5, 0.02 [−0.01, 0.04] at 10-15). CelebA stays at 6: its open claims ask ≥ 25 (C-L1) and ≈ 93 (C-P5).
    # Measured at 9 (1,205 s for the chapter from an empty cache, matmul ≈ 230 GFLOP/s): W-P3 decided at both blocks
    # (0.01 [−0.01, 0.03] at seeds 0-8, 0.01 [−0.00, 0.03] at 10-18); 7 of 11 claims decided at 0-8, 8 at 10-18.
    # The stand-in gets λ = 5 too (issue 27, part 9): W-D1's "decays (paper λ ≥ 0.3)" part reads the runs whose decay
    # budget λΣη is at least the paper's at λ = 0.3; here only λ = 3 reached it (9 runs, all decaying: 1.00 [0.70,
    # 1.00], and fewer than 12 runs can never clear ALL_SHARE; the read-out asked ≈ 12). λ = 5 has the budget of the
    # paper's λ ≈ 0.87, inside its evidence (6.7 % decay at 0.3, 56.3 % at 1.0), and adds 9 runs to that band.
    # Measured with λ = 5 and the SimpleCNN channels-last (993 s / 909 s for the chapter at seeds 0-8 / 10-18 from an
    # empty cache, matmul ≈ 310 GFLOP/s): W-D1 decided at both blocks (18 of 18 runs decay: 1.00 [0.82, 1.00]); W-P3,
    # the largest gain over the smallest λ, now a maximum over one more λ, is 0.02 [−0.00, 0.03] at 0-8 (inconclusive;
    # 0.01 [0.00, 0.03] at 10-18); 8 of 11 claims decided at each block
    "cpu": ChapterPreset(
        celeba_split="identity",
        celeba=DomainPreset(image_size=24, n_train=2000, epochs=10, batch_size=32, lr=1e-3,
                            lambdas=PAPER_CELEBA_LAMBDAS + (3.0,), seeds=6, cnn_width=0.5),
        waterbirds=DomainPreset(image_size=24, n_train=None, epochs=15, batch_size=32, lr=3e-3,
                                lambdas=PAPER_WB_LAMBDAS + (3.0, 5.0), seeds=9, cnn_width=0.5)),
    # the paper's protocol (nht.md §3.4–3.5, batch sizes the book's §7.3 defaults), seeds raised to the verdict
    # floor: 3 per λ on CelebA (paper 2) and on Waterbirds (paper 1, 3 at λ = 0.1: a subset of these runs)
    "paper": ChapterPreset(
        celeba_split="official",
        celeba=DomainPreset(image_size=64, n_train=None, epochs=100, batch_size=256, lr=1e-3,
                            lambdas=PAPER_CELEBA_LAMBDAS, seeds=3, precision="bf16"),
        waterbirds=DomainPreset(image_size=224, n_train=None, epochs=100, batch_size=64, lr=1e-3,
                                lambdas=PAPER_WB_LAMBDAS, seeds=3, precision="bf16"),
        full_data=True, real_waterbirds=True),
}

# The paper's values (nht.md §3.4, NHT §5.10 [paper]); CelebA's are means over 2 seeds at epoch 100
PAPER_CELEBA = pd.DataFrame({"paper V_final": [20198, 2971, 546], "paper WG %": [89.1, 88.0, 87.0],
                             "paper avg %": [90.9, 90.5, 90.2], "paper fc/conv1": [0.65, 2.21, 2.33]},
                            index=pd.Index(PAPER_CELEBA_LAMBDAS, name="lam"))
# nht.md §3.5 [paper]: "For λ ≤ 0.1 the norm grows monotonically … (decay 0 %)"; no accuracy is quoted [unknown]
PAPER_WATERBIRDS = pd.DataFrame({"paper regime": ["weak"] * 4 + ["decays", "decays"],
                                 "paper decay %": [0.0, 0.0, 0.0, 0.0, 6.7, 56.3]},
                                index=pd.Index(PAPER_WB_LAMBDAS, name="lam"))
# The paper's training sets, epochs, η and (the book's §7.3 defaults, not the paper's: unverified) batch sizes, for
# its decay budget Σₛηₛ = η × epochs × steps per epoch / 2 under the cosine schedule
PAPER_RUN = {CELEBA: {"n_train": 162_770, "epochs": 100, "lr": 1e-3, "batch_size": 256},
             WATERBIRDS: {"n_train": 4_795, "epochs": 100, "lr": 1e-3, "batch_size": 64}}


def paper_budget(table3_domain: str) -> float:
    """Σₛηₛ of one of the paper's runs (≈ 32 on CelebA, ≈ 3.75 on Waterbirds, with the book's batch sizes)."""
    r = PAPER_RUN[table3_domain]
    return r["lr"] * r["epochs"] * math.ceil(r["n_train"] / r["batch_size"]) / 2


# ------------------------------------------------------------------------------------------------------- data

@dataclass
class Domain:
    """One data set of the chapter: its task, the built data and its names."""

    name: str  # as the S spectrum and the figures name it ("CelebA", "Waterbirds", "Waterbirds (CUB stand-in)")
    table3: str  # NHT Table 3's row ("CelebA" or "Waterbirds")
    preset: DomainPreset
    task: TaskConfig
    data: Dataset
    y_names: tuple[str, str]  # what y = 0 / 1 mean
    a_names: tuple[str, str]  # what a = 0 / 1 mean


def resolve_waterbirds_source(choice: str, root: Path | None, preset: ChapterPreset) -> str:
    """The Waterbirds source for `waterbirds_source=choice`: "auto" reads the real data set when its metadata.csv is
    under `root` (or when the preset requires it: its loader then says where to put it), else the CUB stand-in
    (also when there is no data folder, `root` None or absent: configs are made without the data)."""
    check_choice("waterbirds_source", choice, WATERBIRDS_SOURCES)
    if choice != "auto":
        return choice
    real = root is not None and any((root / d / "metadata.csv").exists() for d in STANDARD_DIRS)
    return "waterbirds" if real or preset.real_waterbirds else "cub_standin"


def domain_tasks(preset: ChapterPreset, data_root: str | None, *, waterbirds_source: str = "auto",
                 target: str = "Smiling", spurious: str = "Blond_Hair") -> dict[str, TaskConfig]:
    """The chapter's two tasks (nothing is read but the folder listing that picks the Waterbirds source):
    {"celeba": CelebATask, "waterbirds": WaterbirdsTask}. Only configs are made, so the data need not be there (a
    task names its data_root; building its data is what needs the files, and the loaders say what is missing)."""
    root = Path(data_root).expanduser() if data_root else default_data_root()  # None: no data folder configured
    pc, pw = preset.celeba, preset.waterbirds
    source = resolve_waterbirds_source(waterbirds_source, root, preset)
    named = None if root is None else str(root)
    return {"celeba": CelebATask(target=target, spurious=spurious, image_size=pc.image_size,
                                 split=preset.celeba_split, n_train=pc.n_train, data_root=named),
            "waterbirds": WaterbirdsTask(source=source, image_size=pw.image_size, n_train=pw.n_train,
                                         data_root=named)}


def domains(preset: ChapterPreset, params: ChapterParams, *, waterbirds_source: str = "auto",
            target: str = "Smiling", spurious: str = "Blond_Hair") -> dict[str, Domain]:
    """The chapter's two data sets, built (the data are the same for every seed): {"celeba": …, "waterbirds": …}."""
    tasks = domain_tasks(preset, params.data_root, waterbirds_source=waterbirds_source, target=target,
                         spurious=spurious)
    celeba_task, wb_task = tasks["celeba"], tasks["waterbirds"]
    plan.check_tasks(tasks.values(), full=preset.full_data, why=f"scale={params.scale!r} trains on the full data sets")
    celeba = celeba_task.build(params.seed)
    pc, pw = preset.celeba, preset.waterbirds
    real = wb_task.source == "waterbirds"
    return {"celeba": Domain(CELEBA, CELEBA, pc, celeba_task, celeba, (f"not {target}", target),
                             (f"not {spurious}", spurious)),
            "waterbirds": Domain(WATERBIRDS if real else STANDIN, WATERBIRDS, pw, wb_task,
                                 wb_task.build(params.seed), ("landbird", "waterbird"),
                                 ("land background", "water background"))}


def group_counts(domain: Domain):
    """Figs. 4.2a–b's table (for people): one row per group (y, a, with what they mean), its images and share of the
    images in the training and the test split."""
    meta = domain.data.meta
    parts = []
    for split, counts in (("train", meta["train_groups"]), ("test", meta["groups"])):
        t = groups.group_table(counts).set_index(["y", "a"])[["count", "share"]]
        parts.append(t.rename(columns={"count": f"{split} images", "share": f"{split} share"}))
    out = pd.concat(parts, axis=1)
    out.index = pd.MultiIndex.from_tuples([(f"{y} {domain.y_names[y]}", f"{a} {domain.a_names[a]}")
                                           for y, a in out.index], names=["y", "a"])
    share = lambda v: tables.number(100 * v, ".1f") + " %" if pd.notna(v) else tables.MISSING  # noqa: E731
    return tables.for_people(out, formats={"train images": ",.0f", "test images": ",.0f", "train share": share,
                                           "test share": share})


def example_rows(domain: Domain, per_group: int = 6) -> dict:
    """Figs. 4.2a–b: a row of test images per group (inputs standardised to mean 0.5, sd 0.5 per channel; shown back in
    [0, 1]), labelled with the group and what y and a mean."""
    rows = {}
    for name, split in domain.data.splits.items():
        parsed = parse_group_name(name)
        if parsed is not None:
            _, y, a = parsed
            rows[f"y{y}a{a}\n{domain.y_names[y]}\n{domain.a_names[a]}"] = split.head(per_group).inputs() * 0.5 + 0.5
    return rows


# --------------------------------------------------------------------------------------------------------- runs

@dataclass
class DomainRuns:
    """One data set's λ sweep: the run table (one row per logged epoch, with the group metrics) and the per-run
    summary (`vision.summarise` plus S, final reliance, head / conv1 ratio, learned and pooled)."""

    domain: Domain
    runs: pd.DataFrame
    summary: pd.DataFrame
    steps_per_epoch: int
    budget: float  # Σₛηₛ of one run under the cosine schedule


@dataclass
class ChapterRuns:
    """Both sweeps of the chapter."""

    celeba: DomainRuns
    waterbirds: DomainRuns

    def of(self, table3_domain: str) -> DomainRuns:
        """The sweep standing for NHT Table 3's row `table3_domain` ("CelebA" or "Waterbirds")."""
        return self.celeba if table3_domain == CELEBA else self.waterbirds


def train_config(p: DomainPreset, n_train: int) -> TrainConfig:
    """AdamW with a cosine schedule to 0, minibatches drawn epoch by epoch, everything logged after every epoch."""
    return TrainConfig(optimizer="adamw", lr=p.lr, steps=p.epochs * math.ceil(n_train / p.batch_size),
                       batch_size=p.batch_size, sampling="epoch", lr_schedule="cosine", n_logs=p.epochs,
                       train_eval_size=p.train_eval_size, precision=resolve_precision(p.precision))


def run(data: dict[str, Domain], *, first_seed: int = 0, device: str = "auto", progress: bool = True) -> ChapterRuns:
    """Train (or read back from the cache) both λ sweeps (`data`: `domains`), every λ with seeds first_seed …
    first_seed + seeds − 1."""
    return ChapterRuns(**{key: _run_domain(d, first_seed, device, progress) for key, d in data.items()})


def domain_sweep(name: str, task: TaskConfig, p: DomainPreset, n_train: int, first_seed: int = 0) -> Sweep:
    """One data set's λ sweep: a SimpleCNN per seed and λ, `train_config(p, n_train)`."""
    base = RunConfig(task=task, model=model_config("simple_cnn", width=p.cnn_width), train=train_config(p, n_train))
    return with_dlr(name, grid(base, seeds=range(first_seed, first_seed + p.seeds), weight_decays=p.lambdas))


def sweeps(preset: ChapterPreset, data_root: str | None, first_seed: int = 0, *,
           waterbirds_source: str = "auto") -> list[Sweep]:
    """Both λ sweeps as the compute planner sees them, with the training-set sizes the configs imply
    (`nhtlib.data.layout`: the full split when n_train is None, at the full data set's size at paper scale, which
    trains on complete data only) — the run itself counts the images it built."""
    tasks = domain_tasks(preset, data_root, waterbirds_source=waterbirds_source)
    return [domain_sweep(key, task, getattr(preset, key), layout(task, full=preset.full_data).n_train, first_seed)
            for key, task in tasks.items()]


def _run_domain(d: Domain, first_seed: int, device: str, progress: bool) -> DomainRuns:
    n_train = d.data.splits["train"].size
    runs = domain_sweep(d.name, d.task, d.preset, n_train, first_seed).run(device=device, progress=progress)
    return domain_runs(d, runs)


def domain_runs(d: Domain, runs: pd.DataFrame) -> DomainRuns:
    """One data set's analysed runs from its λ sweep's run table (as `Sweep.run` returns it): epochs, the group
    metrics of the built data set (`d.data`), the head/conv1 norm ratio, and the per-run summary."""
    n_train = d.data.splits["train"].size
    train = train_config(d.preset, n_train)
    spe = math.ceil(n_train / d.preset.batch_size)
    runs["epoch"] = (runs.step / spe).round().astype(int)
    runs = groups.add_group_metrics(runs, d.data.meta["groups"], split="test",
                                    majority_pairing=d.data.meta["majority_pairing"])
    runs[f"{HEAD}_{BODY}_ratio"] = runs[f"norm_sq:{HEAD}"] / runs[f"norm_sq:{BODY}"]
    runs = runs.rename(columns={"weight_decay": "lam"})
    return DomainRuns(d, runs, summarise(runs), spe, d.preset.lr * train.steps / 2)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (λ, seed): the vision norm summary (peak, decay %, regime — behaviour plus norm: intermediate needs
    the norm to peak and contract and, after the peak, the bias-conflicting accuracy to rise ≥ 5 points or the
    spurious reliance to fall ≥ 0.2 — final accuracies, per-layer peaks and decays, transition times), S (S_traj with
    φ = the spurious reliance), the final reliance, the last epoch, after epoch 20 (NaN in a shorter run) the lowest
    worst-group accuracy and the largest rise of test accuracy between two logs, the final head / conv1 norm ratio,
    learned (final mean-over-groups accuracy at least 10 points above chance) and pooled (the runs the domain's S is
    read on, `separation.pooled`)."""
    keys = ["lam", "seed"]
    out = vision.summarise(runs, keys, layers=CONVS, head=HEAD, clean=CLEAN, clean_threshold=CLEAN_THRESHOLD,
                           reliance=RELIANCE)
    index = pd.MultiIndex.from_frame(out[keys])
    last = runs.loc[runs.groupby(keys).epoch.idxmax()].set_index(keys)
    out["S"] = separation.per_run(runs, keys, RELIANCE, time="epoch").reindex(index).to_numpy()
    out["final_reliance"] = last[RELIANCE].reindex(index).to_numpy()
    out["epochs"] = last.epoch.reindex(index).to_numpy(float)
    late = runs[runs.epoch >= LATE_EPOCH].sort_values("epoch").groupby(keys)
    out["wg_min_late"] = late.test_worst_group_acc.min().reindex(index).to_numpy()
    out["acc_jump_late"] = late.test_acc.agg(lambda v: v.diff().max()).reindex(index).to_numpy()
    out["head_conv1_ratio"] = last[f"{HEAD}_{BODY}_ratio"].reindex(index).to_numpy()
    out["learned"] = out.final_test_mean_group_acc >= CHANCE + predictions.CONTROL_MIN_ACC_ABOVE_CHANCE
    out["pooled"] = separation.pooled(out.regime, out.decay_pct).to_numpy()
    return out


def separation_frame(dr: DomainRuns) -> pd.DataFrame:
    """The per-run scores `nht.separation.record` stores for the S spectrum (weight_decay, seed, regime, pooled, S)."""
    return dr.summary[["lam", "seed", "regime", "pooled", "S"]].rename(columns={"lam": "weight_decay"})


def record_separation(runs: ChapterRuns, scale: str) -> list[Path]:
    """Save both data sets' per-run S_traj (results/<scale>/04_celeba_waterbirds/separation-<domain>.csv)."""
    return [separation.record(NAME, scale, dr.domain.name, separation_frame(dr), signal=SIGNAL)
            for dr in (runs.celeba, runs.waterbirds)]


# ------------------------------------------------------------------------------------------ tables and views

def domain_table(dr: DomainRuns) -> pd.DataFrame:
    """Tables 4.1 / 4.2: one row per λ — λΣη, seeds, the regime table of chapter 3 (`vision.regime_table`), the
    worst-group, average and mean-over-groups accuracies (%), the spurious reliance and the final head / conv1 norm
    ratio (means over seeds), then the paper's values where it gives them."""
    s = dr.summary
    by = s.groupby("lam")
    out = vision.regime_table(s, "lam").join(pd.DataFrame({
        "WG %": (100 * by.final_test_worst_group_acc.mean()).round(1),
        "WG % sd": (100 * by.final_test_worst_group_acc.std()).round(1),
        "avg %": (100 * by.final_test_acc.mean()).round(1),
        "group-mean %": (100 * by.final_test_mean_group_acc.mean()).round(1),
        "reliance": by.final_reliance.mean().round(3), "fc/conv1": by.head_conv1_ratio.mean().round(2)}))
    out.insert(0, "seeds", by.size())
    out.insert(0, "λΣη", (out.index * dr.budget).round(3))
    return out.join(PAPER_CELEBA if dr.domain.table3 == CELEBA else PAPER_WATERBIRDS, how="left")


def domain_tables(dr: DomainRuns):
    """Tables 4.2 / 4.3 for people, in two parts, one row per λ, the paper's values beside ours where it gives them:
    (the norm — λΣη, regime, seeds per regime (w/i/s), peak epoch, decay % and final ‖θ‖² (mean ± sd), head / conv1 ratio;
    the accuracies — worst-group (mean ± sd), average and mean-over-groups %, spurious reliance). The data:
    `domain_table`."""
    t = domain_table(dr)
    pm = lambda mean, sd, spec=".1f": [tables.mean_sd(m, v, spec) for m, v in zip(t[mean], t[sd])]  # noqa: E731
    norm = pd.DataFrame({"λΣη": t.index * dr.budget, "regime": t.regime, "w/i/s": t["seeds (w/i/s)"],
                         "peak epoch": t["peak epoch"], "decay %": pm("decay %", "decay % sd")}, index=t.index)
    for column in ("paper regime", "paper decay %"):
        if column in t:
            norm[column] = t[column]
    norm["final ‖θ‖²"] = pm("V_final", "V_final sd", ",.0f")
    for column in ("paper V_final", "fc/conv1", "paper fc/conv1"):
        if column in t:
            norm[column] = t[column]
    acc = pd.DataFrame({"WG %": pm("WG %", "WG % sd")}, index=t.index)
    for column in ("paper WG %", "avg %", "paper avg %", "group-mean %", "reliance"):
        if column in t:
            acc[column] = t[column]
    formats = {"λΣη": "sig2", "peak epoch": ".1f", "paper decay %": ".1f", "paper V_final": ",.0f", "fc/conv1": ".2f",
               "paper fc/conv1": ".2f", "paper WG %": ".1f", "avg %": ".1f", "paper avg %": ".1f",
               "group-mean %": ".1f", "reliance": ".3f"}
    return (tables.for_people(norm, {"paper V_final": "paper ‖θ‖²"}, formats),
            tables.for_people(acc, formats=formats))


def paper_trajectories(dr: DomainRuns) -> dict[str, dict[float, float]]:
    """Fig. 4.1's paper values: {run-table column: {λ: the paper's final value}} — CelebA's final ‖θ‖², worst-group
    and average accuracy (NHT §5.10, epoch 100); none for Waterbirds, where the paper quotes no such number."""
    if dr.domain.table3 != CELEBA:
        return {}
    return {"norm_sq": PAPER_CELEBA["paper V_final"].to_dict(),
            "test_worst_group_acc": (PAPER_CELEBA["paper WG %"] / 100).to_dict(),
            "test_acc": (PAPER_CELEBA["paper avg %"] / 100).to_dict()}


def left_table(dr: DomainRuns) -> pd.DataFrame:
    """One data set's runs that left the shortcut — chapter 3's rule (`vision.left_shortcut_runs`: the norm peaked
    after the first 10 % of the epochs and contracted while the bias-conflicting accuracy rose ≥ 5 points or the
    spurious reliance fell ≥ 0.2 after the peak), one row each: λ, seed, peak epoch, decay %, the bias-conflicting
    accuracy up to the peak and final (%), the reliance at the peak and at the end."""
    return vision.left_shortcut_runs(dr.summary, dr.runs, clean=CLEAN, reliance=RELIANCE, clean_label="conflicting")


def left_tables(runs: ChapterRuns) -> pd.DataFrame:
    """Table 4.0: the two data sets' `left_table` frames, one row per run that left the shortcut, indexed by data
    set, λ and seed (empty when no run did)."""
    parts = [left_table(dr).assign(data=dr.domain.name) for dr in (runs.celeba, runs.waterbirds)]
    return pd.concat(parts, ignore_index=True).set_index(["data", "λ", "seed"])


def left_line(runs: ChapterRuns) -> str:
    """The sentence of the chapter's opening on the runs that left the shortcut (`left_table`), both data sets, set
    against what NHT expects of them (none: Scenario C)."""
    parts, total = [], 0
    for dr in (runs.celeba, runs.waterbirds):
        left, n = left_table(dr), len(dr.summary)
        total += len(left)
        lams = ", ".join(f"{lam:g}" for lam in sorted(left["λ"].unique()))
        parts.append(f"{len(left)} of {n} on {dr.domain.name}" + (f" (λ = {lams})" if len(left) else ""))
    rule = ("by chapter 3's rule (the norm peaks after the first 10 % of the epochs and contracts while the "
            "bias-conflicting accuracy rises ≥ 5 points or the spurious reliance falls ≥ 0.2)")
    if not total:
        return (f"No run leaves a shortcut after its norm's peak, as the paper expects (Scenario C, \"no delayed "
                f"transition to observe\"), {rule}: {parts[0]} and {parts[1]} (Table 4.0).")
    return (f"Runs leave the shortcut after their norm's peak, which the paper does not expect (Scenario C), {rule}: "
            f"{parts[0]} and {parts[1]} (Table 4.0).")


def early_reliance(dr: DomainRuns, epoch: int = 2) -> float:
    """The mean over runs of the spurious reliance at `epoch` (the first epochs: what the model reads before weight
    decay has had time to act); NaN when no run logged that epoch."""
    at = dr.runs[dr.runs.epoch == epoch]
    return float(at[RELIANCE].mean()) if len(at) else float("nan")


# ------------------------------------------------------------------------------------------------------ claims

SHARE = predictions.SHARE
DECAYING = DECAY_MIN_PCT  # a run "decays" when ‖θ‖² falls ≥ 2 % from its peak (nht.md §1.4's weak bound)
L1_MIN_RHO = 0.8  # C-L1: the ratio rises with λ — the mirror of P1's −0.8 (0.65 → 2.21 → 2.33 is monotone)
# W-D1: "λ ≤ 0.1 … weak", "λ ≥ 0.3 decay becomes measurable" [paper], read in decay-budget units: the paper's λ times
# its Σηₛ (`paper_budget`), so that a cpu run with a smaller budget is held to the paper's λΣη, not its nominal λ
D1_WEAK_MAX_LAMBDA, D1_DECAY_MIN_LAMBDA = 0.1, 0.3
# "all these runs" [paper]: the share of runs (runs as the unit, `statistics.run_share`) with its 95 % CI above three
# quarters. 15 runs without an exception give a lower end of 0.80 and one exception among them 0.70 (inconclusive);
# fewer than 12 runs can never pass it (the paper preset's 6 runs at λ ∈ {0.3, 1} read inconclusive at best)
ALL_SHARE = 0.75
P3_MIN_DROP = 0.0  # C-P3: the worst-group drop from the smallest to the largest λ exceeds the seeds' noise: CI above 0
V1_PAPER_RATIO = 20198 / 546  # C-V1: "37×" [paper] nht.md §3.4, the ratio of two-seed means at λ = 0.001 and 1.0
V1_MARGIN = 0.25  # ±25 % of 37: the paper's ratio is of two-seed means whose spread it does not print
V1_LAMBDAS = (0.001, 1.0)  # the weak and strong λ of the paper's 37×
BUDGET_MATCH = 2.0  # a number set by the decay budget is compared only where Σₛηₛ is within 2× of the paper's
LATE_WG_MIN = 0.86  # C-A1: "stable performance above 86 % after epoch 20" [paper] nht.md §3.4
A2_MARGIN = 0.02  # C-A2: average accuracy within ±2 points of the paper's (its seed sd is 0.1–1.2 points)
JUMP_MAX = vision.VisionRegimeRule().improve_min  # C-A3: "no sharp jump": no rise ≥ 5 points between two logs
# (the regime rule's size of a transition) after epoch 20
INTERMEDIATE_LAMBDA = 0.1  # the paper's intermediate CelebA λ (its plateau), where C-A3 looks for a jump
UNVERIFIED = ("Unverified: NHT's S has no formula (nht.md §1.5); the book's S_traj is ours, so values near the "
              "paper's are not expected")
LAYERS = dict(head_peak=f"peak_step:{HEAD}", body_peak=f"peak_step:{BODY}", head_decay=f"decay_pct:{HEAD}",
              body_decay=f"decay_pct:{BODY}")  # the columns P4 compares


@dataclass(frozen=True)
class Analysed:
    """What every claim of the chapter reads: the per-run summaries (`summarise`: one row per λ and seed) of both
    sweeps, each with its decay budget (columns budget = Σₛηₛ and lam_budget = λΣₛηₛ), and the name of the data
    set that stood for Waterbirds ("Waterbirds (CUB stand-in)" at smoke and cpu scale)."""

    celeba: pd.DataFrame
    waterbirds: pd.DataFrame
    waterbirds_name: str = WATERBIRDS

    def of(self, table3_domain: str) -> pd.DataFrame:
        """The summary standing for NHT Table 3's row `table3_domain` ("CelebA" or "Waterbirds")."""
        return self.celeba if table3_domain == CELEBA else self.waterbirds

    def name_of(self, table3_domain: str) -> str:
        """The data set the runs of NHT Table 3's row `table3_domain` were trained on."""
        return CELEBA if table3_domain == CELEBA else self.waterbirds_name


def _with_budget(dr: DomainRuns) -> pd.DataFrame:
    return dr.summary.assign(budget=dr.budget, lam_budget=dr.summary.lam * dr.budget)


def analyse(runs: ChapterRuns) -> Analysed:
    """What the claims read from both sweeps (`run`): their per-run summaries with their decay budgets."""
    return Analysed(_with_budget(runs.celeba), _with_budget(runs.waterbirds), runs.waterbirds.domain.name)


def _alive(s: pd.DataFrame) -> Estimate:
    """The positive control of W-P3 and C-A3: per seed, the mean over the λ grid of the final mean-over-groups test
    accuracy minus chance (a model that reads one feature only, or predicts one class, scores chance)."""
    return interval(statistics.per_seed(s, lambda g: g.final_test_mean_group_acc.mean() - CHANCE))


def _decaying(s: pd.DataFrame) -> pd.Series:
    """The runs whose ‖θ‖² falls at least `DECAYING` % from its peak (a mask)."""
    return s.decay_pct >= DECAYING


def _layers_contract(s: pd.DataFrame) -> Estimate:
    """The positive control of W-P4: per seed, the mean over the decaying runs of the larger of the two compared
    layers' decays (head, conv1; % from each layer's own peak): an order can only be read between layers that
    contract."""
    larger = s[[LAYERS["head_decay"], LAYERS["body_decay"]]].max(axis=1)
    return predictions.seed_mean(s.assign(_layer=larger), "_layer", runs=_decaying(s))


def _head_first(s: pd.DataFrame, runs: pd.Series) -> Estimate:
    """P4's statistic on the selected runs (`runs`, a mask), runs as the unit (`predictions.head_first_share`: a
    seed holds one to three such runs, too few for a per-seed share). Two peaks at the same logged epoch (at cpu
    every decaying Waterbirds run's layers peak at epoch 1) count as "no later": the tie is read in the head's
    favour, so only the contraction decides, and a failure of P4 is the harder to reproduce."""
    return predictions.head_first_share(s, **LAYERS, runs=runs)


def _w_p4(s: pd.DataFrame) -> Estimate:
    """W-P4: the share of decaying runs with the head first (`_head_first`)."""
    return _head_first(s, _decaying(s))


def _w_p4_note(s: pd.DataFrame) -> str:
    chosen = s[_decaying(s)]
    ties = int((chosen[LAYERS["head_peak"]] == chosen[LAYERS["body_peak"]]).sum())
    return (f"Decaying runs: ‖θ‖² falls ≥ {DECAYING:g} % from its peak ({len(chosen)} runs, {ties} with head and conv1 "
            "peaking at the same epoch, counted as the head peaking no later)")


def _learned(s: pd.DataFrame) -> pd.DataFrame:
    return s[s.learned.astype(bool)]


def _learned_ratio(s: pd.DataFrame) -> Estimate:
    """C-L1: per seed, Spearman ρ(λ, final head / conv1 norm ratio) over the runs that learned."""
    return predictions.grid_spearman(_learned(s), "head_conv1_ratio")


def _left_out(s: pd.DataFrame) -> str:
    return (f"{int((~s.learned.astype(bool)).sum())} run(s) left out: final mean-over-groups accuracy below chance + "
            f"{predictions.CONTROL_MIN_ACC_ABOVE_CHANCE:g}")


def _end_drop(g: pd.DataFrame, value: str) -> float:
    """`value` at the smallest λ of one seed's rows minus at its largest (rows of one λ averaged); NaN below 2 λ's."""
    m = g.groupby("lam")[value].mean().sort_index()
    return float(m.iloc[0] - m.iloc[-1]) if len(m) >= 2 else float("nan")


def _c_p3(s: pd.DataFrame) -> dict[str, Estimate]:
    """C-P3's two parts on the runs that learned: per seed, Spearman ρ(λ, worst-group accuracy), and the worst-group
    accuracy at the smallest λ minus at the largest (the fall, paired within the seed)."""
    learned = _learned(s)
    return {"falls": predictions.grid_spearman(learned, "final_test_worst_group_acc"),
            "drop beyond seed noise": interval(statistics.per_seed(
                learned, lambda g: _end_drop(g, "final_test_worst_group_acc")))}


def _c_p4(s: pd.DataFrame) -> Estimate | None:
    """C-P4: the share of intermediate runs with the head first (`_head_first`); None (not testable here) without any
    intermediate run: P4 reads a delayed transition, and none happened at this scale."""
    inter = s.regime == "intermediate"
    return _head_first(s, inter) if inter.any() else None


def _c_p4_note(s: pd.DataFrame) -> str:
    n = int((s.regime == "intermediate").sum())
    return (f"{n} intermediate run(s)" if n else
            "No intermediate run at this scale (P4 is read on delayed transitions); runs with the paper's decay budget "
            "(scale='paper') would test it")


def _d1_masks(s: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """W-D1's two sets of runs, by decay budget: λΣη at most the paper's at λ = 0.1, at least the paper's at 0.3."""
    paper = paper_budget(WATERBIRDS)
    return s.lam_budget <= D1_WEAK_MAX_LAMBDA * paper, s.lam_budget >= D1_DECAY_MIN_LAMBDA * paper


def _weak_then_decaying(s: pd.DataFrame) -> dict[str, Estimate]:
    """W-D1's two parts, runs as the unit: the share of runs in the weak budget band whose norm grows (decays less
    than 2 %), the share of runs in the decaying band whose norm decays at least 2 %."""
    small, large = _d1_masks(s)
    return {"grows (paper λ ≤ 0.1)": statistics.run_share(s, s.decay_pct < DECAYING, runs=small),
            "decays (paper λ ≥ 0.3)": statistics.run_share(s, _decaying(s), runs=large)}


def _d1_note(s: pd.DataFrame) -> str:
    small, large = _d1_masks(s)
    paper = paper_budget(WATERBIRDS)
    lams = lambda m: ", ".join(f"{v:g}" for v in sorted(s.lam[m].unique())) or "none"  # noqa: E731
    return (f"In decay-budget units (the paper's Σηₛ ≈ {paper:.3g}, ours {float(s.budget.iloc[0]):.3g}; the paper's "
            f"depends on its unstated batch size): paper λ ≤ {D1_WEAK_MAX_LAMBDA:g} is λ ∈ {{{lams(small)}}} here, "
            f"paper λ ≥ {D1_DECAY_MIN_LAMBDA:g} is λ ∈ {{{lams(large)}}}")


def _budget_note(s: pd.DataFrame, table3_domain: str) -> str:
    ours, paper = float(s.budget.iloc[0]), paper_budget(table3_domain)
    return f"Σₛηₛ = {ours:.3g} here, ≈ {paper:.3g} in the paper ({paper / ours:.0f}× ours)"


def _at_paper_budget(s: pd.DataFrame, table3_domain: str) -> bool:
    """Does the run's decay budget come within `BUDGET_MATCH`× of the paper's?"""
    return float(s.budget.iloc[0]) * BUDGET_MATCH >= paper_budget(table3_domain)


def _norm_ratio(s: pd.DataFrame) -> Estimate:
    """Per seed: final ‖θ‖² at λ = 0.001 over final ‖θ‖² at λ = 1 (NaN where the grid lacks one of them)."""
    def ratio(g):
        m = g.groupby("lam").V_final.mean()
        weak, strong = V1_LAMBDAS
        return float(m[weak] / m[strong]) if weak in m.index and strong in m.index else float("nan")

    return interval(statistics.per_seed(s, ratio))


def _c_v1(s: pd.DataFrame) -> Estimate | None:
    """C-V1 (the paper's 37×): the per-seed ratio of final norms, only with the paper's decay budget (the ratio is
    set by it: ‖θ‖² contracts as exp(−λΣη)); None (not testable here) below it."""
    return _norm_ratio(s) if _at_paper_budget(s, CELEBA) else None


def _c_v1_note(s: pd.DataFrame) -> str:
    if _at_paper_budget(s, CELEBA):
        return _budget_note(s, CELEBA)
    return (f"Not at the paper's decay budget ({_budget_note(s, CELEBA)}): the ratio here, for information only, is "
            f"{_norm_ratio(s).text()}; scale='paper' (100 epochs on the full CelebA) would test it")


def _paper_lambdas(s: pd.DataFrame) -> pd.DataFrame:
    return s[s.lam.isin(PAPER_CELEBA_LAMBDAS)]


def _has_late(s: pd.DataFrame) -> bool:
    return bool(s.epochs.max() >= LATE_EPOCH)


def _late_note(s: pd.DataFrame) -> str:
    return ("" if _has_late(s) else f"The runs end at epoch {s.epochs.max():.0f}, before the paper's epoch "
            f"{LATE_EPOCH}; scale='paper' (100 epochs) would test it")


def _c_a1(s: pd.DataFrame) -> Estimate | None:
    """C-A1: per seed, the lowest worst-group accuracy after epoch 20 over the paper's λ's; None without epoch 20."""
    return interval(statistics.per_seed(_paper_lambdas(s), lambda g: g.wg_min_late.min())) if _has_late(s) else None


def _c_a2(s: pd.DataFrame) -> Estimate | None:
    """C-A2: per seed, the mean over the paper's λ's of our final average test accuracy minus the paper's; None
    below the paper's epochs (an accuracy level is a property of the paper's data, resolution and budget)."""
    if s.epochs.min() < PAPER_RUN[CELEBA]["epochs"]:
        return None
    paper = (PAPER_CELEBA["paper avg %"] / 100).to_dict()
    return interval(statistics.per_seed(_paper_lambdas(s), lambda g: float(
        (g.final_test_acc - g.lam.map(paper)).mean())))


def _c_a2_note(s: pd.DataFrame) -> str:
    return ("" if s.epochs.min() >= PAPER_RUN[CELEBA]["epochs"] else
            f"The runs train {s.epochs.min():.0f} epochs on a {s.budget.iloc[0]:.3g}-Σηₛ budget, not the paper's 100 "
            "on the full CelebA at 64 × 64 px: an accuracy level is not comparable; scale='paper' would test it")


def _c_a3(s: pd.DataFrame) -> Estimate | None:
    """C-A3: per seed, the largest rise of average test accuracy between two logs after epoch 20 at the paper's
    intermediate λ; None without epoch 20 (before it, the rise is the initial learning)."""
    if not _has_late(s):
        return None
    return interval(statistics.per_seed(s[s.lam == INTERMEDIATE_LAMBDA], lambda g: g.acc_jump_late.max()))


def _on(table3_domain: str, f):
    """`f(summary)` as a function of the analysed runs: read on the summary of NHT Table 3's row `table3_domain`."""
    return None if f is None else lambda analysed: f(analysed.of(table3_domain))


@dataclass(frozen=True)
class DomainClaim(Claim):
    """A claim of one of the chapter's data sets (`table3`, its NHT Table 3 row): its row's statement and note name
    the data set the runs were trained on — at smoke and cpu scale the CUB stand-in, whose numbers are not
    Waterbirds' (the Table 3 cell stays "Waterbirds/Pk")."""

    table3: str = CELEBA

    def judge(self, analysed) -> ClaimResult:
        row = super().judge(analysed)
        name = analysed.name_of(self.table3)
        if name == self.table3:
            return row
        return replace(row, statement=f"{row.statement} — read on {name}, built from CUB photos, not {self.table3}",
                       note="; ".join(filter(None, [f"Data: {name}, a stand-in (§4.1)", row.note])))


def _claim(spec: ClaimSpec, estimate, *, control=None, note=None, where: str, test: str) -> Claim:
    """A claim of one data set (its id's prefix, C- or W-, names it), its functions taking that data set's summary."""
    domain = CELEBA if spec.id.startswith(PREFIX[CELEBA]) else WATERBIRDS
    return DomainClaim(spec, _on(domain, estimate), control=_on(domain, control), note=_on(domain, note), where=where,
                       test=test, table3=domain)


def _prediction(pid: str, table3_domain: str, estimate, *, rule=None, **kw) -> Claim:
    """NHT's prediction `pid` on `table3_domain`, declared by `nhtlib.report.predictions` (ids C-P1 …, W-P1 …);
    `rule` replaces its rule where the chapter reads the cell more strictly (the cell is kept)."""
    spec = predictions.spec(pid, table3_domain, prefix=PREFIX[table3_domain])
    return _claim(spec if rule is None else spec.replace(rule=rule), estimate, **kw)


def _p1(s: pd.DataFrame) -> Estimate:
    return predictions.grid_spearman(s, "V_final")


def _p5_note(s: pd.DataFrame) -> str:
    return f"{int(s.pooled.sum())} pooled runs; {UNVERIFIED}"


def _p5_control(s: pd.DataFrame) -> Estimate:
    """P5 ×'s positive control: per seed, the share of pooled runs with a defined S_traj."""
    return predictions.defined_share(s, "S", runs=s.pooled.astype(bool))


def _p6(s: pd.DataFrame) -> Estimate:
    return predictions.inverse_lambda_r2(s, "T_head_peak")


P6_NOTE = "R² of T_head_peak = a/λ + b per seed, measured for information only"
C42, W43 = "§4.2, {numref}`fig-ch4-celeba`", "§4.3, {numref}`fig-ch4-waterbirds`"  # where the claims are shown
C_P3_RULE = AllOf((
    ("falls", AtMost("the per-seed Spearman ρ(λ, worst-group accuracy) over the runs that learned",
                     predictions.P3_MAX_RHO)),
    ("drop beyond seed noise", AtLeast("the per-seed worst-group accuracy at the smallest λ minus at the largest, "
                                       "over the runs that learned (paired within the seed)", P3_MIN_DROP))))

CLAIMS = (
    _prediction("P1", CELEBA, _p1, where=C42, test="Spearman ρ(λ, final ‖θ‖²)"),
    _prediction("P2", CELEBA, predictions.regime_order, note=predictions.grid_note, where=C42,
                test="all three regimes occur (intermediate: the norm contracts and the model leaves the shortcut), "
                     "in order of λ"),
    _prediction("P3", CELEBA, _c_p3, rule=C_P3_RULE, where=C42,
                note=lambda s: f"P3a (a monotone fall), as NHT scores it (nht.md §3.6); {_left_out(s)}",
                test="Spearman ρ(λ, worst-group accuracy) negative, and the fall smallest → largest λ above 0, "
                     "runs that learned"),
    _prediction("P4", CELEBA, _c_p4, note=_c_p4_note, where=C42, test="share of intermediate runs with the head first"),
    _claim(ClaimSpec(
        "C-L1", "CelebA: the head / conv1 norm ratio grows with λ (NHT's CelebA evidence for P4)",
        "fc/conv1 0.65× → 2.21× → 2.33× at λ = 0.001 / 0.1 / 1.0 [paper, NHT §5.10; nht.md §3.4]", "NHT",
        AtLeast("the per-seed Spearman ρ(λ, final ‖θ_head‖² / ‖θ_conv1‖²) over the runs that learned", L1_MIN_RHO)),
        _learned_ratio, note=_left_out, where=C42, test="Spearman ρ(λ, head / conv1 norm ratio), runs that learned"),
    _claim(ClaimSpec(
        "C-V1", "CelebA: the final norm at λ = 0.001 is 37× the final norm at λ = 1 (NHT §5.10, 'consistent with "
        "Theorem 3.1')", "final ‖θ‖² 20,198 / 546 = 37× [paper, nht.md §3.4]", "NHT",
        Matches("the per-seed ratio of final ‖θ‖² at λ = 0.001 to λ = 1", V1_PAPER_RATIO, V1_MARGIN)),
        _c_v1, note=_c_v1_note, where=C42, test="ratio of final norms, λ = 0.001 / λ = 1, at the paper's decay budget"),
    _claim(ClaimSpec(
        "C-A1", "CelebA: the worst-group accuracy of every λ stays above 86 % after epoch 20 (NHT §5.10)",
        "\"All three regimes show stable performance above 86% after epoch 20\" [paper, nht.md §3.4]", "NHT",
        AtLeast(f"the per-seed lowest worst-group accuracy after epoch {LATE_EPOCH} over λ = 0.001, 0.1, 1",
                LATE_WG_MIN)),
        _c_a1, note=_late_note, where=C42, test=f"lowest worst-group accuracy after epoch {LATE_EPOCH}"),
    _claim(ClaimSpec(
        "C-A2", "CelebA: average test accuracy 90.9 / 90.5 / 90.2 % at λ = 0.001 / 0.1 / 1 (NHT §5.10)",
        "average accuracy 90.9 / 90.5 / 90.2 % (sd 0.1–1.2 %) [paper, nht.md §3.4]", "NHT",
        Matches("the per-seed mean over λ = 0.001, 0.1, 1 of our final average test accuracy minus the paper's", 0.0,
                A2_MARGIN, relative=False)),
        _c_a2, note=_c_a2_note, where=C42, test="final average accuracy minus the paper's, at the paper's protocol"),
    _claim(ClaimSpec(
        "C-A3", "CelebA: no sharp accuracy jump at the intermediate λ — no delayed transition to observe (NHT §5.10)",
        "\"The absence of a sharp accuracy jump at intermediate λ is consistent with Scenario C … there is no "
        "delayed transition to observe.\" [paper, nht.md §3.4]", "NHT",
        AtMost(f"the per-seed largest rise of average test accuracy between two logs after epoch {LATE_EPOCH} at "
               f"λ = {INTERMEDIATE_LAMBDA:g}", JUMP_MAX,
               control=PositiveControl("the per-seed mean accuracy minus chance",
                                       predictions.CONTROL_MIN_ACC_ABOVE_CHANCE))),
        _c_a3, control=_alive, note=_late_note, where=C42,
        test=f"largest accuracy rise between two logs after epoch {LATE_EPOCH}, with a positive control"),
    _prediction("P5", CELEBA, predictions.separation_estimate, control=_p5_control, note=_p5_note, where="§4.4",
                test="mean $S_{\\rm traj}$ of the pooled runs below 0.2, where it is defined"),
    _prediction("P6", CELEBA, _p6, note=lambda s: P6_NOTE, where="§4.3 (delay scaling)", test="not testable here"),
    _prediction("P1", WATERBIRDS, _p1, where=W43, test="Spearman ρ(λ, final ‖θ‖²)"),
    _prediction("P2", WATERBIRDS, predictions.regime_order, where=W43,
                test="all three regimes occur (intermediate: the norm contracts and the model leaves the shortcut), "
                     "in order of λ",
                note=lambda s: (predictions.grid_note(s)
                                + "; NHT ticks P2 on Waterbirds without an intermediate regime (nht.md §3.6)")),
    _claim(ClaimSpec(
        "W-D1", "Waterbirds: the norm grows monotonically for λ ≤ 0.1 and decays measurably for λ ≥ 0.3 (NHT §5.9), "
        "λ read as the paper's decay budget λΣη",
        "\"For λ ≤ 0.1 the norm grows monotonically … (decay 0 %), placing all these runs in the weak regime\"; "
        "6.7 % at λ = 0.3, 56.3 % at λ = 1.0 [paper, nht.md §3.5]", "NHT",
        AllOf((("grows (paper λ ≤ 0.1)", AtLeast(
                    f"the share of runs with λΣη ≤ the paper's at λ = {D1_WEAK_MAX_LAMBDA:g} whose ‖θ‖² decays less "
                    f"than {DECAYING:g} % from its peak (runs as the unit)", ALL_SHARE)),
               ("decays (paper λ ≥ 0.3)", AtLeast(
                   f"the share of runs with λΣη ≥ the paper's at λ = {D1_DECAY_MIN_LAMBDA:g} whose ‖θ‖² decays "
                   f"≥ {DECAYING:g} % from its peak (runs as the unit)", ALL_SHARE))))),
        _weak_then_decaying, note=_d1_note, where=W43,
        test="share of runs that grow (paper λ ≤ 0.1) and that decay (paper λ ≥ 0.3), in λΣη units"),
    _claim(ClaimSpec(
        "W-G1", "Waterbirds: γ_eff is lower than on coloured CIFAR-10 at the same nominal λ (NHT §5.9)",
        "\"γ_eff is lower for Waterbirds than for Coloured CIFAR-10 at the same nominal λ\" [paper, nht.md §3.5]",
        "NHT",
        NotTested("NHT measures no γ_eff and defines no estimator of it; a test would compare the norm's contraction "
                  "rate per unit λΣη of this sweep with chapter 3's CIFAR-10 sweep at equal λ, a comparison across "
                  "chapters that belongs to chapter 6", verdicts.NO_EVIDENCE)),
        lambda s: None, where=W43, test="not testable here"),
    _prediction("P3", WATERBIRDS,
                lambda s: predictions.largest_gain(s, "final_test_worst_group_acc", runs=s.learned.astype(bool)),
                control=_alive, where=W43,
                test="one-sided null: the largest worst-group gain of any λ over the smallest below 3 points, runs "
                     "that learned, with a positive control",
                note=lambda s: (f"Runs that learned; {_left_out(s)}; the control: per seed, the mean over the λ grid "
                                f"of the final mean-over-groups test accuracy minus chance {CHANCE:g}")),
    _prediction("P4", WATERBIRDS, _w_p4, control=_layers_contract, where=W43, note=_w_p4_note,
                test="share of decaying runs with the head first at most one half, with a control that the layers "
                     "contract"),
    _prediction("P5", WATERBIRDS, predictions.separation_estimate, control=_p5_control, note=_p5_note, where="§4.4",
                test="mean $S_{\\rm traj}$ of the pooled runs below 0.2, where it is defined"),
    _prediction("P6", WATERBIRDS, _p6, note=lambda s: P6_NOTE, where="§4.3 (delay scaling)", test="not testable here"),
)  # in the order the notebook records them: CelebA's, then Waterbirds'


def numbers(runs: ChapterRuns) -> dict[str, float]:
    """Measured numbers the chapter's prose quotes, per data set (keys prefixed ``c_`` for CelebA, ``w_`` for
    Waterbirds): runs, training images, steps, Σηₛ (ours and the paper's), the budget ratio paper / ours, the
    paper's λ whose budget equals our largest λ's, the range of the mean worst-group accuracy over λ (%), the
    longest training wall time (s; 0 when read from the cache), the pooled runs and their mean S_traj, the runs that
    left the shortcut (`left_table`), the mean spurious reliance at epoch 2 (`early_reliance`) and at the end."""
    out = {}
    for key, dr in (("c", runs.celeba), ("w", runs.waterbirds)):
        s, paper = dr.summary, paper_budget(dr.domain.table3)
        wg = 100 * s.groupby("lam").final_test_worst_group_acc.mean()
        pooled = s[s.pooled.astype(bool)].S.dropna()
        out.update({f"{key}_runs": float(len(s)), f"{key}_n_train": float(dr.domain.data.splits["train"].size),
                    f"{key}_steps": float(dr.runs.step.max()), f"{key}_budget": dr.budget,
                    f"{key}_paper_budget": paper, f"{key}_budget_ratio": paper / dr.budget,
                    f"{key}_lam_equiv": float(s.lam.max()) * dr.budget / paper,
                    f"{key}_wg_min": float(wg.min()), f"{key}_wg_max": float(wg.max()),
                    f"{key}_wall_s": float(dr.runs.groupby("run").wall_s.max().max()),
                    f"{key}_n_pooled": float(len(pooled)), f"{key}_S": float(pooled.mean()) if len(pooled) else
                    float("nan"), f"{key}_n_left": float(len(left_table(dr))),
                    f"{key}_reliance_early": early_reliance(dr), f"{key}_reliance_final": float(s.final_reliance.mean())})
    return out


# ------------------------------------------------------------------------------------------------------ chapter

CHAPTER = Chapter(NAME, "4. CelebA and Waterbirds", __name__, summary=SUMMARY, presets=PRESETS, sweeps_of=sweeps, claims=CLAIMS,
                  data=("celeba", "cub"))
