"""Chapter 5: dynamical richness D_LR (Nam et al., "Decoupling Dynamical Richness from Representation Learning",
arXiv:2410.04264, ICLR 2026) — Shortcut MNIST (ours), grokking, target down-scaling α, BatchNorm in VGG-16,
ResNet18's learning rate and shuffled labels, and the eigen-decomposition view.

What the notebook uses: `PRESETS` (one `RichnessPreset` per scale), `experiments` (the six experiments of the chapter
as `Experiment`s: configs and probe), `run` (train or read back one experiment: a tidy run table with an
`experiment` and a `chance` column and readable arm labels), the tables and numbers its figures and prose show
(`arm_table`, `grok_points`, `alpha_numbers`, `spectra`, `eigen_summary`, `batchnorm_caveat`, `probe_classes`,
`scale_note`), `analyse` (the six run tables, checked, as one `RichnessRuns`) and `CHAPTER.claims` (the claims, each
judged on that `RichnessRuns`, per seed with 95 % intervals; last, `UNTESTED_CLAIMS`: the paper's claims no run here
tests, each saying what would test it).

Every statistic a verdict reads is computed per seed — a paired difference between the arms of one seed, a Spearman
ρ over one seed's α grid, a 1/0 per seed — then summarised by `nhtlib.analysis.statistics.interval`. The paper's
numbers come from a secondary summary of the paper (`shared/papers/dlr.md` §0, §4: tag [sec]); none was verified
against the paper's body, and every `paper` field says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from nhtlib.chapters.base import Chapter
from nhtlib.analysis import statistics
from nhtlib.analysis.regimes import window_values
from nhtlib.engine import plan
from nhtlib.report import predictions, tables
from nhtlib.engine.native_bf16 import PRESET_PRECISIONS, resolve_precision
from nhtlib.config import DECAY_GROUPS, Config, ConfigError, TrainConfig, check_choice, check_range
from nhtlib.data.cifar import N_CLASSES, CIFARTask
from nhtlib.data.layout import layout
from nhtlib.data.mnist import MNISTTask
from nhtlib.data.modular import ModularTask
from nhtlib.analysis.metrics import eigen
from nhtlib.analysis.metrics.features import richness_probe
from nhtlib.models import config as model_config
from nhtlib.engine.sweep import RunConfig, Sweep, grid
from nhtlib.report.claims import Claim, not_tested
from nhtlib.report.verdicts import (ArmComparison, AllOf, AtLeast, AtMost,
                                    ClaimSpec, Equivalent, Estimate, PositiveControl)
from nhtlib.analysis.statistics import interval

NAME = "05_dlr_batchnorm"
SUMMARY = " ".join(r"""
The metric $\mathcal{D}_{LR}=1-\mathrm{CKA}(T,T_{MP})$, rich ≠ better on MNIST, $\mathcal{D}_{LR}$ along
grokking, output-scale sweep, BatchNorm in VGG, learning rates in ResNet18, eigen-plots (D_LR).
""".split())  # what the chapter reproduces: the book's introduction lists it (`nhtlib.cli.build`)
SHARE = predictions.SHARE  # the range an interval of a share of seeds is clipped to
UNVERIFIED = "[sec; not verified against the paper's body]"  # dlr.md §0: every number of §4 is from a summary


# ------------------------------------------------------------------------------------------------------ presets

@dataclass(frozen=True)
class ShortcutPreset(Config):
    """§5.2 Shortcut MNIST (ours, dlr.md §4.1): rich (every layer trained) against lazy (the head alone on frozen
    random features) on MNIST images whose training copies carry a square coding their label."""

    n_train: int  # training images (MNIST's first, every class present); the square codes each one's label
    n_test: int  # test images: with the square of a random class (test_acc) and without it (test_clean_acc)
    hidden: tuple[int, ...]  # ReLU MLP hidden widths; the last is p, the width D_LR reads
    steps: int  # AdamW steps at batch 128: long enough for the rich net to fit the square
    probe: int  # training images the richness probe reads (a fixed prefix; n >= 2p preferred, dlr.md §1.5)
    eigen_k: int = 50  # eigen-directions kept for Fig. 5.6 (a few times C = 10)
    patch_size: int = 3  # side of the class-coding square, pixels
    patch_value: float = 0.6  # its intensity on the [0, 1] pixel scale: faint, yet a perfect predictor
    rich_lr: float = 1e-3  # AdamW lr with every layer trained
    lazy_lr: float = 1e-2  # AdamW lr of the head alone: a convex problem on fixed features takes a larger step
    batch_size: int = 128  # the book's default mini-batch

    def validate(self) -> None:
        for name in ("n_train", "n_test", "steps", "probe", "eigen_k", "batch_size"):
            check_range(name, getattr(self, name), 1, None, integer=True)
        _check_widths("hidden", self.hidden)
        check_range("patch_value", self.patch_value, 0.0, 1.0)
        for name in ("rich_lr", "lazy_lr"):
            check_range(name, getattr(self, name), 0.0, None, low_inclusive=False)


@dataclass(frozen=True)
class DLRGrokPreset(Config):
    """§5.3 grokking: (a + b) mod p with the grokking chapter's MLP on two token embeddings (its calibration,
    nht.md §7.4), full-batch AdamW with weight decay 1 on the matrices."""

    p: int  # the modulus: C = p classes (97 in the paper; smaller groks sooner)
    steps: int  # full-batch AdamW steps: memorisation, then the grokking transition, within the budget
    n_logs: int  # logged points: D_LR is probed on the whole training split at each
    train_frac: float = 0.4  # share of the p² pairs used for training (dlr.md §4.3 book default)
    d_embed: int = 128  # token embedding width
    hidden: int = 256  # GELU hidden layer: the features Φ (p_features = 256)
    lr: float = 4e-3  # AdamW lr of the calibration
    weight_decay: float = 1.0  # decoupled decay on the matrices: what makes the net grok
    model: str = "modular_mlp_stacked"  # the MLP (cpu); "transformer": NSDL's Transformer (paper scale)
    batch_size: int | None = None  # None: full batch (the MLP); NSDL's Transformer draws 512 with replacement
    decay: str = "matrices"  # the MLP decays its matrices; NSDL decays every parameter ("all")

    def validate(self) -> None:
        check_range("p", self.p, 3, None, integer=True)
        check_range("steps", self.steps, 1, None, integer=True)
        check_range("n_logs", self.n_logs, 1, self.steps, integer=True)
        check_range("train_frac", self.train_frac, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        for name in ("d_embed", "hidden"):
            check_range(name, getattr(self, name), 1, None, integer=True)
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)
        check_choice("model", self.model, ("modular_mlp_stacked", "transformer"))
        if self.batch_size is not None:
            check_range("batch_size", self.batch_size, 1, None, integer=True)
        check_choice("decay", self.decay, DECAY_GROUPS)

    def model_config(self):
        """The member model: the stacked MLP (its GELU hidden layer is Φ) or NSDL's Transformer (Φ: the final
        LayerNorm's output at the last position)."""
        if self.model == "transformer":
            return model_config("transformer")
        return model_config("modular_mlp_stacked", d_embed=self.d_embed, hidden=self.hidden)


@dataclass(frozen=True)
class AlphaPreset(Config):
    """§5.4 target down-scaling α (ours, dlr.md §4.2): the centred model α(f_θ − f_θ₀) with SGD at lr η/α², so the
    function moves at one speed while the weights move ∝ 1/α: α → ∞ is Chizat's lazy limit."""

    alphas: tuple[float, ...]  # output scales, increasing; a Spearman ρ per seed needs at least 3
    n_train: int  # MNIST training images (no square)
    hidden: tuple[int, ...]  # ReLU MLP hidden widths (p = the last)
    steps: int  # SGD steps at batch 256
    probe: int  # training images the richness probe reads
    n_test: int = 1000  # MNIST test images
    lr: float = 0.05  # η; member lr = η / α²
    momentum: float = 0.9  # SGD momentum
    batch_size: int = 256  # mini-batch

    def validate(self) -> None:
        _check_increasing("alphas", self.alphas)
        for name in ("n_train", "steps", "probe", "n_test", "batch_size"):
            check_range(name, getattr(self, name), 1, None, integer=True)
        _check_widths("hidden", self.hidden)
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)


@dataclass(frozen=True)
class VisionPreset(Config):
    """§5.5–5.6 CIFAR: VGG-16 with and without BatchNorm, ResNet18 at three learning rates, ResNet18 on true and
    shuffled labels; one SGD recipe for all (dlr.md §4.4–4.5 book defaults, without augmentation)."""

    n_train: int | None  # class-balanced training images (None = all); the probe reads a balanced prefix
    n_test: int | None  # class-balanced test images (None = all)
    image_size: int  # side after area down-sampling (32 = CIFAR's own)
    width: float  # channel multiplier (1 = 64..512 channels, p = 512; 1/8 gives p = 64)
    epochs: int  # SGD epochs over n_train (the lr sweep, and VGG ± BN unless batchnorm_epochs says otherwise)
    probe: int  # training images the richness probe reads
    shuffle_n: int | None  # training images of the true / shuffled pair: few enough to fit random labels
    shuffle_epochs: int  # epochs of that pair: fitting random labels takes long
    lrs: tuple[float, ...]  # ResNet18 learning rates (the paper's 0.005 / 0.05 / 0.2)
    lr: float = 0.05  # the lr of VGG ± BN and of the shuffled pair (the middle of `lrs`)
    momentum: float = 0.9  # SGD momentum
    weight_decay: float = 5e-4  # L2 on every parameter
    batch_size: int = 128  # mini-batch
    dataset: str = "cifar10"  # VGG ± BN and the lr sweep: the paper's CIFAR-100 at paper scale (dlr.md §4.4–4.5)
    shuffle_dataset: str = "cifar10"  # the true / shuffled pair: CIFAR-10 in the paper too (dlr.md §4.5)
    # TrainConfig.precision of the CIFAR runs: bf16 autocast at paper scale; fp32 at cpu scale, where bf16 buys
    # almost nothing (benchmarks/bench_precision.py, AMD EPYC with AVX512-BF16: VGG-16 + BN 0.97x, ResNet18
    # 1.00-1.08x a step at width 1/8 and 16 px), so no bf16-equality gate was run for this chapter
    precision: str = "fp32"
    # seeds of the true / shuffled pair (None: the chapter's `seeds`): its small subset makes a seed cheap, and L2's
    # null claim needs its interval inside the margin (or outside it) to decide
    shuffle_seeds: int | None = None
    # epochs of VGG ± BN (None: `epochs`): the VGG-16 without BN starts slowly (13 convolutions, no normalisation), so
    # B1's positive control — that arm trained at all — needs a longer schedule than the lr sweep's
    batchnorm_epochs: int | None = None
    # seeds of VGG ± BN (None: the chapter's `seeds`): B1 is a paired comparison whose "better" part is a few points
    batchnorm_seeds: int | None = None

    def validate(self) -> None:
        check_choice("precision", self.precision, PRESET_PRECISIONS)
        for name in ("dataset", "shuffle_dataset"):
            check_choice(name, getattr(self, name), tuple(N_CLASSES))
        for name in ("n_train", "n_test", "shuffle_n", "shuffle_seeds", "batchnorm_epochs", "batchnorm_seeds"):
            if getattr(self, name) is not None:  # None: all images / the chapter's seeds or epochs
                check_range(name, getattr(self, name), 1, None, integer=True)
        check_range("image_size", self.image_size, 1, 32, integer=True)
        check_range("width", self.width, 0.0, None, low_inclusive=False)
        for name in ("epochs", "probe", "shuffle_epochs", "batch_size"):
            check_range(name, getattr(self, name), 1, None, integer=True)
        _check_increasing("lrs", self.lrs)
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)


@dataclass(frozen=True)
class RichnessPreset(Config):
    """What one scale of chapter 5 runs."""

    seeds: int  # seeds of every experiment; a verdict needs >= 3 (nhtlib.report.verdicts.MIN_UNITS)
    n_logs: int  # logged points of the MNIST and CIFAR runs (the probe runs at each)
    shortcut: ShortcutPreset
    grok: DLRGrokPreset
    alpha: AlphaPreset
    vision: VisionPreset
    full_data: bool = False  # refuse to start unless MNIST and the CIFARs are complete (paper scale)

    def validate(self) -> None:
        check_range("seeds", self.seeds, 1, None, integer=True)
        check_range("n_logs", self.n_logs, 1, None, integer=True)
        for name, kind in (("shortcut", ShortcutPreset), ("grok", DLRGrokPreset), ("alpha", AlphaPreset),
                           ("vision", VisionPreset)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a {kind.__name__}")


def _check_widths(name: str, widths: tuple[int, ...]) -> None:
    if not widths:
        raise ConfigError(f"{name}={widths!r} needs at least one hidden layer")
    for i, h in enumerate(widths):
        check_range(f"{name}[{i}]", h, 1, None, integer=True)


def _check_increasing(name: str, values: tuple[float, ...]) -> None:
    if not values or any(v <= 0 for v in values) or list(values) != sorted(set(values)):
        raise ConfigError(f"{name}={values!r} must be positive, distinct and increasing")


PRESETS = {
    "smoke": RichnessPreset(
        seeds=1, n_logs=1,
        shortcut=ShortcutPreset(n_train=300, n_test=200, hidden=(32, 32), steps=15, probe=200),
        grok=DLRGrokPreset(p=13, steps=20, n_logs=2),
        alpha=AlphaPreset(alphas=(1.0, 16.0), n_train=200, hidden=(32, 32), steps=10, probe=200),
        vision=VisionPreset(n_train=100, n_test=100, image_size=8, width=1 / 16, epochs=1, probe=100, shuffle_n=100,
                            shuffle_epochs=1, lrs=(0.05, 0.2))),
    "cpu": RichnessPreset(
        seeds=3, n_logs=6,
        shortcut=ShortcutPreset(n_train=3000, n_test=2000, hidden=(256, 256), steps=400, probe=1000),
        grok=DLRGrokPreset(p=59, steps=4000, n_logs=40),
        alpha=AlphaPreset(alphas=(1.0, 4.0, 16.0, 64.0), n_train=2000, hidden=(256, 256), steps=300, probe=1000),
        # the shuffled pair at 6 seeds (+46 s for 3 × 2 runs; matmul ≈ 310 GFLOP/s): at 3 the power read-out asked ≈ 5
        # for L2 (−0.33 [−0.50, −0.17]); at 6 the spread grew (−0.33 [−0.55, −0.10]) and L2 stays undecided
        # VGG ± BN for 100 epochs (B1's positive control; the lr sweep keeps 6): without BN the VGG-16 stays at chance
        # for 6 epochs (train accuracy 0.10-0.14, seeds 0-2) at lr 0.05, and at 0.01, 0.02 or 0.1 too; the notes'
        # fallback, a lower lr for both arms (dlr.md §4.4), does not help. Longer it trains: train accuracy at 40, 60,
        # 80 epochs 0.46 / 0.20 / 0.35, 0.88 / 0.30 / 0.68, 0.99 / 0.57 / 0.96 (seeds 0-2); at 80 and 100 epochs
        # 0.96 / 0.78 / 0.82 and 1.00 / 0.99 / 1.00 (seeds 10-12). 100 epochs: the six runs take 235 s (91 s
        # without BN, 144 s with; 28 s at 6 epochs; matmul ≈ 350 GFLOP/s); B1 then decided: richer 0.41 [0.26,
        # 0.55], better 0.12 [0.02, 0.23], the control 0.88 [0.81, 0.96] (seeds 0-2); seeds 10-12: richer 0.47
        # [0.26, 0.68], better 0.13 [−0.02, 0.27] (inconclusive at 3 seeds), the control 0.90 [0.88, 0.91]. So the
        # pair runs 6 seeds (+235 s): richer 0.45 [0.36, 0.53], better 0.16 [0.07, 0.25] (seeds 0-5), the same
        # verdicts at seeds 10-15
        vision=VisionPreset(n_train=3000, n_test=1000, image_size=16, width=1 / 8, epochs=6, probe=1000,
                            shuffle_n=500, shuffle_epochs=30, lrs=(0.005, 0.05, 0.2), shuffle_seeds=6,
                            batchnorm_epochs=100, batchnorm_seeds=6)),
    "paper": RichnessPreset(
        seeds=3, n_logs=20,
        shortcut=ShortcutPreset(n_train=60000, n_test=10000, hidden=(512, 512), steps=10000, probe=5000),
        # NSDL's Transformer at NSDL's settings (η = 1e-3, batch 512, λ = 1 on every parameter, 50 % split), probed
        # every 100 steps as dlr.md §4.3 asks; the paper's own model is a 2-layer Transformer [unknown details]
        grok=DLRGrokPreset(p=97, steps=10000, n_logs=100, train_frac=0.5, lr=1e-3, model="transformer",
                        batch_size=512, decay="all"),
        alpha=AlphaPreset(alphas=(0.25, 1.0, 4.0, 16.0, 64.0), n_train=10000, hidden=(512, 512), steps=5000,
                          probe=5000),
        vision=VisionPreset(n_train=None, n_test=None, image_size=32, width=1.0, epochs=100, probe=5000,
                            shuffle_n=None, shuffle_epochs=200, lrs=(0.005, 0.05, 0.2), dataset="cifar100",
                            precision="bf16"),
        full_data=True),
}


# -------------------------------------------------------------------------------------------------- experiments

@dataclass(frozen=True)
class Experiment:
    """One experiment of the chapter: its members, the probe they are measured with, and its chance accuracy."""

    name: str  # "shortcut", "grokking", "alpha", "batchnorm", "lr", "shuffle"
    desc: str  # the progress bar's label
    configs: tuple[RunConfig, ...]
    probe: int  # examples of the training split the richness probe reads (a prefix)
    chance: float  # 1 / C
    dataset: str  # what the members are trained on, as the notes name it
    eigen_k: int = 0  # eigen-directions the probe keeps (0 = none)


def experiments(preset: RichnessPreset, *, first_seed: int = 0, dataset: str | None = None,
                data_root: str | None = None, check_data: bool = True) -> dict[str, Experiment]:
    """The chapter's six experiments at this scale, every one over seeds first_seed .. first_seed + seeds − 1.
    dataset: the CIFAR of VGG ± BN and the lr sweep (default: the preset's; the shuffled-label pair always reads
    `VisionPreset.shuffle_dataset`, CIFAR-10 as in the paper). check_data: refuse now (`nhtlib.engine.plan.check_tasks`)
    when a data set is missing, or not complete where the preset asks for the full data (the planner passes False:
    it reports instead)."""
    dataset = dataset or preset.vision.dataset
    if dataset not in N_CLASSES:
        raise ConfigError(f"dataset={dataset!r} is not allowed; choose one of {', '.join(map(repr, N_CLASSES))}")
    seeds = range(first_seed, first_seed + preset.seeds)
    own_seeds = lambda n: range(first_seed, first_seed + (n or preset.seeds))  # noqa: E731 (None: the chapter's)
    s, g, a, v = preset.shortcut, preset.grok, preset.alpha, preset.vision
    mnist = MNISTTask(n_train=s.n_train, n_test=s.n_test, shortcut="patch", patch_size=s.patch_size,
                      patch_value=s.patch_value, data_root=data_root)
    shortcut = []
    for trainable, lr in (("all", s.rich_lr), ("head", s.lazy_lr)):
        shortcut += grid(RunConfig(mnist, model_config("feature_mlp", hidden=s.hidden, trainable=trainable),
                                   TrainConfig(optimizer="adamw", lr=lr, steps=s.steps, batch_size=s.batch_size,
                                               n_logs=preset.n_logs)), seeds=seeds)
    grok = grid(RunConfig(ModularTask(p=g.p, op="+", train_frac=g.train_frac), g.model_config(),
                          TrainConfig(optimizer="adamw", lr=g.lr, weight_decay=g.weight_decay, decay=g.decay,
                                      batch_size=g.batch_size, steps=g.steps, n_logs=g.n_logs)), seeds=seeds)
    plain = MNISTTask(n_train=a.n_train, n_test=a.n_test, data_root=data_root)
    alpha = []
    for scale in a.alphas:
        alpha += grid(RunConfig(plain, model_config("feature_mlp", hidden=a.hidden, centred=True, output_scale=scale),
                                TrainConfig(optimizer="sgd", lr=a.lr / scale ** 2, momentum=a.momentum,
                                            steps=a.steps, batch_size=a.batch_size, n_logs=preset.n_logs)),
                      seeds=seeds)
    cifar = CIFARTask(dataset=dataset, n_train=v.n_train, n_test=v.n_test, image_size=v.image_size,
                      data_root=data_root)
    # all of the training split when n_train is None: the files' count, or the full set's at paper scale (which
    # trains on complete data only), so a paper run is sized, and planned, at the paper's data sizes
    n_images = layout(cifar, full=preset.full_data).n_train
    n_small = v.shuffle_n or layout(cifar.replace(dataset=v.shuffle_dataset), full=preset.full_data).n_train
    resnet = model_config("resnet18", norm="batch", width=v.width)
    batchnorm = []
    for bn in (False, True):
        batchnorm += grid(RunConfig(cifar, model_config("vgg16", batchnorm=bn, width=v.width),
                                    _sgd(v, v.lr, v.batchnorm_epochs or v.epochs, n_images, preset.n_logs)),
                          seeds=own_seeds(v.batchnorm_seeds))
    lrs = grid(RunConfig(cifar, resnet, _sgd(v, v.lr, v.epochs, n_images, preset.n_logs)), seeds=seeds, lrs=v.lrs)
    small = cifar.replace(dataset=v.shuffle_dataset, n_train=v.shuffle_n)
    shuffle_seeds = own_seeds(v.shuffle_seeds)
    shuffle = [RunConfig(small.replace(shuffle_labels=shuffled), resnet,
                         _sgd(v, v.lr, v.shuffle_epochs, n_small, preset.n_logs), seed=seed)
               for shuffled in (False, True) for seed in shuffle_seeds]
    chance_images = 1.0 / N_CLASSES[dataset]
    out = {
        "shortcut": Experiment("shortcut", "shortcut MNIST", tuple(shortcut), s.probe, 0.1, "Shortcut MNIST",
                               s.eigen_k),
        "grokking": Experiment("grokking", "grokking", tuple(grok), 10 ** 6, 1.0 / g.p, f"(a + b) mod {g.p}"),
        "alpha": Experiment("alpha", "alpha sweep", tuple(alpha), a.probe, 0.1, "MNIST"),
        "batchnorm": Experiment("batchnorm", "VGG-16 ± BN", tuple(batchnorm), v.probe, chance_images, dataset),
        "lr": Experiment("lr", "ResNet18 lr", tuple(lrs), v.probe, chance_images, dataset),
        "shuffle": Experiment("shuffle", "ResNet18 shuffled labels", tuple(shuffle), v.probe,
                              1.0 / N_CLASSES[v.shuffle_dataset], f"{v.shuffle_dataset} ({n_small} images)"),
    }
    if check_data:
        plan.check_tasks([c.task for e in out.values() for c in e.configs], full=preset.full_data)
    return out


def _sgd(v: VisionPreset, lr: float, epochs: int, n_images: int, n_logs: int) -> TrainConfig:
    return TrainConfig(optimizer="sgd", lr=lr, momentum=v.momentum, weight_decay=v.weight_decay, lr_schedule="cosine",
                       batch_size=v.batch_size, sampling="epoch", steps=max(1, epochs * n_images // v.batch_size),
                       n_logs=n_logs, precision=resolve_precision(v.precision))


ARMS = {  # readable labels of each experiment's arms (column -> {value: label}), added by `run`
    "shortcut": ("trainable", "training", {"all": "rich (all layers)", "head": "lazy (last layer only)"}),
    "batchnorm": ("batchnorm", "arm", {False: "without BN", True: "with BN"}),
    "shuffle": ("shuffle_labels", "labels", {False: "true", True: "shuffled"}),
}


def sweep(experiment: Experiment) -> Sweep:
    """The experiment as a `Sweep`: its members, probed by `richness_probe` at every log step."""
    return Sweep(experiment.desc, experiment.configs, extra_metrics=richness_probe(experiment.probe,
                                                                                  eigen_k=experiment.eigen_k),
                 extra_metrics_key=f"richness_probe(n_probe={experiment.probe}, eigen_k={experiment.eigen_k})",
                 probe_examples=experiment.probe)


def sweeps(preset: RichnessPreset, data_root: str | None = None, first_seed: int = 0, *,
           dataset: str | None = None) -> list[Sweep]:
    """The chapter's six experiments as sweeps (what the compute planner plans); dataset: the vision experiments'
    CIFAR (default: the preset's)."""
    declared = experiments(preset, first_seed=first_seed, dataset=dataset, data_root=data_root, check_data=False)
    return [sweep(e) for e in declared.values()]


def run(experiment: Experiment, *, device: str = "auto", progress: bool = True) -> pd.DataFrame:
    """Train (or read back from the run cache) every member of `experiment`, probed at every log step; the run table
    with `experiment`, `chance` and `dataset` columns, `alpha` for the output scale and the arm labels of `ARMS`."""
    table = sweep(experiment).run(device=device, progress=progress)
    table = table.rename(columns={"output_scale": "alpha"})
    table.insert(0, "experiment", experiment.name)
    table["chance"], table["dataset"] = experiment.chance, experiment.dataset
    if experiment.name in ARMS:
        column, label, names = ARMS[experiment.name]
        table[label] = table[column].map(names)
    return table


def last(table: pd.DataFrame) -> pd.DataFrame:
    """The last logged row of every run."""
    return table.loc[table.groupby("run").step.idxmax()].reset_index(drop=True)


def probe_classes(declared: Mapping[str, Experiment]) -> pd.DataFrame:
    """Class counts of the sample every probe reads (the first `probe` training examples of the first seed's data;
    the true labels for the shuffled pair): one row per experiment — every class must be present."""
    rows, built = [], {}
    for name, exp in declared.items():
        config = exp.configs[0]
        task = config.task.replace(shuffle_labels=False) if hasattr(config.task, "shuffle_labels") else config.task
        key = (task.digest(), config.seed)
        if key not in built:
            built[key] = task.build(config.seed)
        data = built[key]
        y = data.splits["train"].y[:exp.probe]
        counts = np.bincount(y.numpy(), minlength=data.n_classes)
        rows.append({"experiment": name, "probe examples": len(y), "classes": data.n_classes,
                     "classes present": int((counts > 0).sum()), "fewest per class": int(counts.min()),
                     "most per class": int(counts.max())})
    return pd.DataFrame(rows).set_index("experiment")


# ----------------------------------------------------------------------------------------- tables and numbers

MEASURES = {"dlr": "D_LR", "dlr_centred": "D_LR, centred span", "dlr_null": "D_LR null value 1 − √(r/p)",
            "test_acc": "test accuracy", "test_clean_acc": "clean test accuracy", "train_acc": "train accuracy",
            "s_init": "S_init", "nc1": "NC1", "nc1_bounded": "NC1 bounded (Tr Σ_W / Tr Σ_T)", "theta_sq": "‖θ‖²",
            "theta_dist_rel": "‖θ − θ₀‖² / ‖θ₀‖²"}  # the rows of `arm_table`


def arm_table(table: pd.DataFrame, by: str, columns: list[str]):
    """The last step of every run, for people (`nhtlib.report.tables.for_people`): one row per measure of `columns` (named
    by `MEASURES`) and one column per value of `by` (an arm, a learning rate, an α), each cell mean ± sd over seeds
    (the mean alone for a single seed); the last row counts the seeds."""
    final = last(table)
    stats = final.groupby(by)[columns].agg(["mean", "std"])
    out = pd.DataFrame({MEASURES.get(c, c): [tables.mean_sd(m, v, ".3f") for m, v in
                                             zip(stats[c]["mean"], stats[c]["std"])] for c in columns},
                       index=stats.index)
    out["seeds"] = final.groupby(by).seed.nunique().astype(str)
    out = out.T
    out.columns = [f"{tables.human_name(by)} = {tables.index_value(v)}" if not isinstance(v, str) else v
                   for v in out.columns]
    return tables.for_people(out.rename_axis("at the last step"))


def arm_means(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Last step of every run, mean over seeds per value of `by` (the numbers the prose quotes)."""
    return last(table).groupby(by).mean(numeric_only=True)


GROKKING_QUANTITIES = {"train_acc": "train accuracy", "test_acc": "test accuracy", "dlr": "D_LR",
                       "dlr_null": "D_LR null value"}  # Fig. 5.2's lines


def grokking_long(grok: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5.2's long table: train / test accuracy, D_LR and its null value against step, one row per seed
    (quantity: the readable names of `GROKKING_QUANTITIES`)."""
    long = grok.melt(id_vars=["step", "seed"], value_vars=list(GROKKING_QUANTITIES), var_name="quantity",
                     value_name="value")
    return long.assign(quantity=long.quantity.map(GROKKING_QUANTITIES))


MEMORISED_TRAIN, MEMORISED_TEST, GROKKED_TEST = 0.99, 0.5, 0.95  # memorised: train ≥ 99 % while test < 50 %
GROK_WINDOW = 0.25  # G1: h = 0.25 T_grok, chapter 6's window (synthesis.WINDOW): across [T − h, T + h], before [T − 3h, T − h]


def _fall_at_grok(g: pd.DataFrame, t_mem: float, t_grok: float) -> tuple[float, float]:
    """D_LR's fall across T_grok ± h and over the equal window before, [T_grok − 3h, T_grok − h] (h = GROK_WINDOW ×
    T_grok): (fall across, fall before); NaN when a window end was not logged or the window before starts before
    T_mem (it must read the memorised net)."""
    h = GROK_WINDOW * t_grok
    if t_grok - 3 * h < t_mem:
        return float("nan"), float("nan")
    steps, dlr = g.step.to_numpy(float), g.dlr.to_numpy(float)
    early, before, after = window_values(steps, dlr, t_grok, h)
    return before - after, early - before


def grok_points(grok: pd.DataFrame) -> pd.DataFrame:
    """Per seed: T_mem (first logged step with train acc ≥ 0.99 and test acc < 0.5), D_LR and test acc there;
    T_grok (first step after T_mem with test acc ≥ 0.95); the last step's D_LR, test acc and null value; grokked
    (memorised, then test acc ≥ 0.95 at the last step); fall = D_LR(T_mem) − D_LR(last) of a seed that grokked;
    fall_across / fall_before = D_LR's fall across T_grok ± h / over the window before (`_fall_at_grok`) and
    fall_at_grok = fall_across − fall_before, of a seed that grokked (NaN where a window is censored)."""
    rows = []
    for seed, g in grok.sort_values("step").groupby("seed"):
        memo = g[(g.train_acc >= MEMORISED_TRAIN) & (g.test_acc < MEMORISED_TEST)]
        end = g.iloc[-1]
        row = {"seed": int(seed), "T_mem": np.nan, "dlr_mem": np.nan, "test_mem": np.nan, "T_grok": np.nan,
               "dlr_last": end.dlr, "test_last": end.test_acc, "null_last": end.dlr_null, "step_last": end.step}
        if len(memo):
            first = memo.iloc[0]
            row.update(T_mem=first.step, dlr_mem=first.dlr, test_mem=first.test_acc)
            later = g[(g.step > first.step) & (g.test_acc >= GROKKED_TEST)]
            row["T_grok"] = later.step.iloc[0] if len(later) else np.nan
        row["grokked"] = float(bool(len(memo)) and end.test_acc >= GROKKED_TEST)
        row["fall"] = row["dlr_mem"] - row["dlr_last"] if row["grokked"] else np.nan
        across, before = _fall_at_grok(g, row["T_mem"], row["T_grok"]) if row["grokked"] else (np.nan, np.nan)
        row.update(fall_across=across, fall_before=before, fall_at_grok=across - before)
        rows.append(row)
    return pd.DataFrame(rows).set_index("seed")


def grok_table(grok: pd.DataFrame):
    """Table 5.3 (for people): `grok_points` with one column per seed and one row per quantity."""
    points = grok_points(grok)
    rows = {"T_mem (steps)": ("T_mem", ",.0f"), "D_LR at T_mem": ("dlr_mem", ".3f"),
            "test accuracy at T_mem": ("test_mem", ".3f"), "T_grok (steps)": ("T_grok", ",.0f"),
            "last step": ("step_last", ",.0f"), "D_LR at the last step": ("dlr_last", ".3f"),
            "test accuracy at the last step": ("test_last", ".3f"), "D_LR null value": ("null_last", ".3f"),
            "grokked": ("grokked", None), "fall of D_LR": ("fall", ".3f"),
            "fall of D_LR across T_grok ± h": ("fall_across", ".3f"),
            "fall of D_LR over [T_grok − 3h, T_grok − h]": ("fall_before", ".3f")}
    out = pd.DataFrame({f"seed {seed}": [("yes" if row.grokked else "no") if spec is None else
                                         tables.number(row[column], spec) for column, spec in rows.values()]
                        for seed, row in points.iterrows()}, index=list(rows))
    return tables.for_people(out.rename_axis("per seed"))


def paper_values(experiment: str, column: str) -> dict:
    """The paper's value of `column` (dlr, test_acc) per arm of `experiment` [sec], keyed by the arm labels the
    figures use (`ARMS`; the learning rate itself for "lr"), for `nhtlib.report.plots` `paper=` arguments; for "grokking",
    the paper's values before and after grokking (a tuple)."""
    values = PAPER[experiment]
    if experiment == "grokking":
        return values[column]
    if experiment in ARMS:
        _, _, names = ARMS[experiment]
        return {names[arm]: v[column] for arm, v in values.items() if column in v}
    return {arm: v[column] for arm, v in values.items() if column in v}


ALPHA_MEASURES = {"dlr": "D_LR", "theta_sq": "‖θ‖²", "theta_dist_rel": "‖θ−θ₀‖²/‖θ₀‖²", "s_init": "S_init",
                  "nc1": "NC1", "nc1_bounded": "Tr Σ_W / Tr Σ_T", "test_acc": "test accuracy"}


def alpha_numbers(sweep: pd.DataFrame) -> dict[str, float]:
    """Means over seeds at the smallest (lo) and largest (hi) α of the measures of Fig. 5.3, and theta_sq_init: the
    mean ‖θ₀‖² at the first logged step (every α starts from the same weights)."""
    means = arm_means(sweep, "alpha")
    out = {"alpha_lo": float(means.index[0]), "alpha_hi": float(means.index[-1]),
           "theta_sq_init": float(sweep.loc[sweep.step == sweep.step.min(), "theta_sq"].mean())}
    for column in ALPHA_MEASURES:
        out[f"{column}_lo"], out[f"{column}_hi"] = float(means[column].iloc[0]), float(means[column].iloc[-1])
    return out


SPECTRA = {"rho_rel": ("eigenvalue ρ_k / ρ_1", True), "pi_star": ("quality Π*(k)", False),
           "pi_hat": ("utilisation Π̂(k)", False)}  # Fig. 5.6's panels: (y label, log scale)
UTILISATION_LEVEL = 0.9  # E1 reads the first k with Π̂(k) ≥ 0.9


def spectra(table: pd.DataFrame) -> pd.DataFrame:
    """The eigen view at the last step, long: training, seed, panel (rho_rel / pi_star / pi_hat), k, value."""
    final = last(table)
    parts = []
    for name in SPECTRA:
        columns = [c for c in final.columns if c.startswith(f"{name}:")]
        part = final.melt(id_vars=["training", "seed"], value_vars=columns, var_name="k", value_name="value")
        part["k"] = part.k.str.split(":").str[1].astype(int)
        part["panel"] = name
        parts.append(part)
    return pd.concat(parts, ignore_index=True).dropna(subset=["value"])


def eigen_table(spectra_table: pd.DataFrame):
    """Table 5.7 (for people): `eigen_summary`, per training and seed."""
    return tables.for_people(eigen_summary(spectra_table), formats={"k where Π̂ ≥ 0.9": ",.0f",
                                                                      "participation ratio of ρ": ".2f",
                                                                      "Π*(9)": ".2f"})


def eigen_summary(spectra_table: pd.DataFrame) -> pd.DataFrame:
    """Per (training, seed): k where Π̂ first reaches 0.9 (k_max + 1 when it does not within the kept directions:
    censored, a lower bound), the participation ratio of ρ over the kept directions, and Π*(C − 1)."""
    rows = []
    for (training, seed), g in spectra_table.groupby(["training", "seed"]):
        hat, rho, star = (g[g.panel == p] for p in ("pi_hat", "rho_rel", "pi_star"))
        k = eigen.first_k_reaching(hat.k, hat.value, UTILISATION_LEVEL)
        rows.append({"training": training, "seed": seed,
                     "k where Π̂ ≥ 0.9": k if np.isfinite(k) else float(hat.k.max() + 1),
                     "participation ratio of ρ": eigen.participation_ratio(rho.value),
                     "Π*(9)": float(star.loc[star.k == 9, "value"].mean())})
    return pd.DataFrame(rows).set_index(["training", "seed"])


def no_bn_trained(bn: pd.DataFrame) -> Estimate:
    """B1's positive control, per seed: the last-step train accuracy of the VGG-16 without BN minus chance."""
    off = last(bn)
    off = off[~off.batchnorm.astype(bool)].sort_values("seed")
    return interval((off.train_acc - off.chance).tolist())


def batchnorm_caveat(bn: pd.DataFrame) -> str:
    """The caveat to print when B1's positive control fails (the arm without BatchNorm did not train: its train
    accuracy is not above chance + 10 points in every seed's interval): its D_LR is then that of its initial random
    features. Empty otherwise."""
    means = arm_means(bn, "batchnorm")
    if False not in means.index or NO_BN_TRAINED.passes(no_bn_trained(bn)):
        return ""
    off = means.loc[False]
    return (f"**Caveat.** Without BatchNorm the network does not train within this budget (train accuracy "
            f"{100 * off.train_acc:.1f} %, chance {100 * off.chance:.0f} %) and its features barely move (S_init = "
            f"{off.s_init:.2f}): its D_LR is that of its initial random features. An arm that never trained can "
            "neither win nor lose a comparison, so B1 is inconclusive here; more epochs, or a learning rate that lets "
            "the VGG-16 without BN train, would decide it (the paper's no-BN net reached 21.7 % [sec]).")


def scale_note(preset: RichnessPreset, dataset: str) -> str:
    """What this scale runs, in one paragraph (the chapter's closing section quotes it)."""
    s, g, a, v = preset.shortcut, preset.grok, preset.alpha, preset.vision
    images = "all" if v.n_train is None else f"{v.n_train:,}"
    shuffled = "all" if v.shuffle_n is None else f"{v.shuffle_n:,}"
    alphas = ", ".join(f"{x:g}" for x in a.alphas)
    return (f"At this scale: Shortcut MNIST on {s.n_train:,} training images with an MLP of widths "
            f"{'–'.join(map(str, s.hidden))} ({s.steps:,} steps); grokking at p = {g.p} ({g.steps:,} steps), "
            + ("NSDL's 1-layer Transformer (the paper's is a 2-layer one)" if g.model == "transformer" else
               "the book's MLP, not the paper's Transformer at 97")
            + f"; the α sweep over α ∈ {{{alphas}}} "
            f"on {a.n_train:,} MNIST images; VGG-16 and ResNet18 at width × {v.width:g} on {v.image_size} × "
            f"{v.image_size} {dataset} images ({images} training images, {_plural(v.epochs, 'epoch')}"
            + (f", VGG ± BN {v.batchnorm_epochs}" if v.batchnorm_epochs not in (None, v.epochs) else "")
            + f"; the shuffled pair {shuffled} images, {_plural(v.shuffle_epochs, 'epoch')}"
            + (f", {_plural(v.shuffle_seeds, 'seed')}" if v.shuffle_seeds not in (None, preset.seeds) else "")
            + (f"; VGG ± BN {_plural(v.batchnorm_seeds, 'seed')}" if v.batchnorm_seeds not in (None, preset.seeds)
               else "")
            + f"); **{_plural(preset.seeds, 'seed')}** behind every other verdict.")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


# ------------------------------------------------------------------------------------------------------- claims

DIRECTION = 0.0  # a direction claim: the whole interval of the per-seed paired difference lies above 0
SEED_SHARE = 0.5  # a per-seed 1/0: the interval of the share of seeds above one half
GROK_MIN_FALL = 0.1  # G1: D_LR falls by more than 0.1 (the paper's fall is 0.40 [sec])
GROK_CONTROL_ARM = ("the same set-up at weight decay ≤ 0.01 (memorises, does not grok: NSDL's regime I), which would "
                    "show how far weight decay alone moves D_LR after memorisation")  # G1's missing control arm
ALPHA_MIN_RHO = 0.5  # A1: per-seed ρ(α, D_LR) above 0.5 (a consistent rise; 1 is strictly increasing)
NC1_MAX_RHO = -0.5  # A3: per-seed ρ(α, NC1), signed by that seed's D_LR trend, below −0.5
FLAT_THETA = 0.05  # A2: "no change": |relative change of ‖θ‖² from the smallest to the largest α| < 5 %
FLAT_S_INIT = 0.05  # A2: |change of S_init (a CKA in [0, 1]) from the smallest to the largest α| < 0.05
LEARNED = predictions.CONTROL_MIN_ACC_ABOVE_CHANCE  # a null claim's control: accuracy ≥ chance + 10 points
LEARNED_AT_EVERY_ALPHA = PositiveControl("the per-seed lowest test accuracy over α minus chance", LEARNED)  # A2
# L2: |D_LR(shuffled) − D_LR(true)| < 25 % of D_LR(true): wider than the paper's own gap (0.034 vs 0.031, +10 %)
# and narrower than the smallest difference the paper reads as meaningful (lr 0.05 vs 0.2: 0.025 vs 0.039, +56 %)
SHUFFLE_MARGIN = 0.25
SHUFFLE_FITTED = 0.8  # L2's control: train accuracy on the random labels ≥ chance + 80 points (≥ 90 % at C = 10)
NO_BN_TRAINED = PositiveControl("the per-seed train accuracy of the VGG-16 without BN minus chance", LEARNED)  # B1
RICH_MAX_PER_CLASS = 2.0  # E1 "about C eigenfunctions": the rich arm's k(Π̂ ≥ 0.9) is at most 2 C

# The paper's values of what the figures plot, per arm [sec] (the numbers the paper texts of `CHAPTER.claims` quote)
PAPER = {
    "shortcut": {"all": {"dlr": 0.0087, "test_acc": 0.100}, "head": {"dlr": 0.63, "test_acc": 0.744}},  # Fig. 1, MNIST
    "grokking": {"dlr": (0.51, 0.11), "test_acc": (0.052, 0.998), "steps": (200, 3000)},  # mod 97, before / after
    "batchnorm": {False: {"dlr": 0.66, "test_acc": 0.217}, True: {"dlr": 0.073, "test_acc": 0.720}},  # VGG-16, C-100
    "lr": {0.005: {"dlr": 0.053, "test_acc": 0.663}, 0.05: {"dlr": 0.025, "test_acc": 0.783},
           0.2: {"dlr": 0.039, "test_acc": 0.745}},  # ResNet18, CIFAR-100
    "shuffle": {False: {"dlr": 0.031, "test_acc": 0.950}, True: {"dlr": 0.034, "test_acc": 0.095}},  # CIFAR-10
}

EXPERIMENTS = ("shortcut", "grokking", "alpha", "batchnorm", "lr", "shuffle")  # the names `experiments` gives


@dataclass(frozen=True, eq=False)
class RichnessRuns:
    """What chapter 5's claims are judged on (`analyse`): the run table of each experiment, as `run` returns it;
    None for an experiment that was not given (a claim that reads it refuses)."""

    shortcut: pd.DataFrame | None = None
    grokking: pd.DataFrame | None = None
    alpha: pd.DataFrame | None = None
    batchnorm: pd.DataFrame | None = None
    lr: pd.DataFrame | None = None
    shuffle: pd.DataFrame | None = None

    def of(self, experiment: str) -> pd.DataFrame:
        """The run table of `experiment` (ConfigError when it was not analysed)."""
        table = getattr(self, experiment)
        if table is None:
            raise ConfigError(f"the {experiment!r} runs were not analysed; a claim on them cannot be judged")
        return table


def analyse(runs: Mapping[str, pd.DataFrame]) -> RichnessRuns:
    """The chapter's run tables (from `run`) keyed by experiment name (`EXPERIMENTS`), checked: every table holds
    the runs of the experiment it is filed under, so no claim is judged on another experiment's runs."""
    unknown = sorted(set(runs) - set(EXPERIMENTS))
    if unknown:
        raise ConfigError(f"unknown experiments {unknown}; chapter 5 runs {', '.join(EXPERIMENTS)}")
    for name, table in runs.items():
        found = set(table.experiment)
        if found != {name}:
            raise ConfigError(f"the {name!r} runs must hold that experiment's runs, not {sorted(found)}")
    return RichnessRuns(**runs)


def _end_change(final: pd.DataFrame, value: str, relative: bool) -> list[float]:
    """Per seed: `value` at the largest α minus at the smallest (relative to the smallest when `relative`)."""
    out = []
    for _, g in final.sort_values("alpha").groupby("seed"):
        lo, hi = g[value].iloc[0], g[value].iloc[-1]
        out.append(float("nan") if len(g) < 2 else float((hi - lo) / abs(lo) if relative else hi - lo))
    return out


def _nc1_against_dlr(final: pd.DataFrame) -> list[float]:
    """Per seed: ρ(α, NC1) times the sign of ρ(α, D_LR) (NaN when either ρ does not exist)."""
    out = []
    for _, g in final.groupby("seed"):
        x = g.groupby("alpha")[["nc1", "dlr"]].mean()
        out.append(statistics.spearman(x.index, x.nc1) * np.sign(statistics.spearman(x.index, x.dlr)))
    return out


def _best_is_richest(final: pd.DataFrame) -> list[float]:
    """Per seed: 1 when the lr with the best test accuracy also has the lowest D_LR, else 0; NaN when the best
    test accuracy is tied between lrs (no best lr) or a value is missing."""
    out = []
    for _, g in final.groupby("seed"):
        by_lr = g.groupby("lr")[["test_acc", "dlr"]].mean()
        if by_lr.isna().any().any() or (by_lr.test_acc == by_lr.test_acc.max()).sum() > 1:
            out.append(float("nan"))
            continue
        out.append(float(by_lr.test_acc.idxmax() == by_lr.dlr.idxmin()))
    return out


def _measured_on(experiment: str):
    """The note of a claim on CIFAR runs: which data set they read."""
    return lambda runs: f"Measured on {last(runs.of(experiment)).dataset.iloc[0]}"


def _r1(runs: RichnessRuns) -> dict[str, Estimate]:
    final = last(runs.of("shortcut"))
    return {"richer": statistics.paired_difference(final, "trainable", "head", "all", "dlr"),
            "worse": statistics.paired_difference(final, "trainable", "head", "all", "test_acc")}


def _g2(runs: RichnessRuns) -> Estimate:
    return interval(grok_points(runs.of("grokking")).grokked, bounds=SHARE)


def _none_grokked(runs: RichnessRuns) -> bool:
    return not grok_points(runs.of("grokking")).grokked.any()


def _g1(runs: RichnessRuns) -> dict[str, Estimate] | None:
    """G1's parts over the seeds that grokked: the fall from memorisation to the last step, and the fall across
    T_grok ± h beyond the fall over the window before; None when no seed grokked (neither exists at this scale)."""
    points = grok_points(runs.of("grokking"))
    if not points.grokked.any():
        return None
    return {"falls": interval(points.fall), "at T_grok": interval(points.fall_at_grok)}


def _g1_note(runs: RichnessRuns) -> str:
    if _none_grokked(runs):
        return "No seed memorised, then grokked within this scale's budget"
    points = grok_points(runs.of("grokking"))
    scored = int(points.fall_at_grok.notna().sum())
    return (f"h = {GROK_WINDOW:g} T_grok; {scored} of {int(points.grokked.sum())} grokked seeds logged from "
            f"T_grok − 3h (after T_mem) to T_grok + h. No memorise-only control arm: {GROK_CONTROL_ARM}; without it "
            "the 'falls' part cannot tell grokking from weight decay, which the 'at T_grok' part guards against")


def _g1_ours(runs: RichnessRuns) -> str | None:
    return "no seed grokked: the fall from memorisation does not exist here" if _none_grokked(runs) else None


def _a1(runs: RichnessRuns) -> Estimate:
    return predictions.grid_spearman(last(runs.of("alpha")), "dlr", lam="alpha")


def _a2(runs: RichnessRuns) -> dict[str, Estimate]:
    final = last(runs.of("alpha"))
    return {"‖θ‖²": interval(_end_change(final, "theta_sq", relative=True)),
            "S_init": interval(_end_change(final, "s_init", relative=False))}


def _a2_control(runs: RichnessRuns) -> Estimate:
    """Per seed: the lowest test accuracy over α minus chance (the nets learned)."""
    final = last(runs.of("alpha"))
    return interval([float(g.test_acc.min() - g.chance.iloc[0]) for _, g in final.groupby("seed")])


def _a3(runs: RichnessRuns) -> Estimate:
    return interval(_nc1_against_dlr(last(runs.of("alpha"))), bounds=predictions.CORRELATION)


def _b1(runs: RichnessRuns) -> dict[str, Estimate]:
    final = last(runs.of("batchnorm"))
    return {"richer": statistics.paired_difference(final, "batchnorm", False, True, "dlr"),
            "better": statistics.paired_difference(final, "batchnorm", True, False, "test_acc")}


def _b1_note(runs: RichnessRuns) -> str:
    """Which data set; and, when the control fails, that the no-BN arm never trained and what would decide B1."""
    bn = runs.of("batchnorm")
    note = _measured_on("batchnorm")(runs)
    if NO_BN_TRAINED.passes(no_bn_trained(bn)):
        return note
    return (f"{note}; the VGG-16 without BN never trained (its train accuracy is not above chance + "
            f"{100 * LEARNED:.0f} points), so neither part can be decided: more epochs or a learning rate that lets "
            "the no-BN VGG-16 train would")


def _l1(runs: RichnessRuns) -> Estimate:
    return interval(_best_is_richest(last(runs.of("lr"))), bounds=SHARE)


def _l2(runs: RichnessRuns) -> Estimate:
    """Per seed: (D_LR(shuffled) − D_LR(true)) / D_LR(true), the gap relative to the true-label value."""
    wide = last(runs.of("shuffle")).pivot_table(index="seed", columns="shuffle_labels", values="dlr", aggfunc="mean")
    if True not in wide.columns or False not in wide.columns:
        return interval([])
    return interval(((wide[True] - wide[False]) / wide[False]).tolist())


def _l2_control(runs: RichnessRuns) -> Estimate:
    """Per seed: the train accuracy on the shuffled labels minus chance (the random labels were fitted)."""
    final = last(runs.of("shuffle"))
    fitted = final[final.shuffle_labels.astype(bool)]
    return interval((fitted.sort_values("seed").train_acc - fitted.chance).tolist())


def _e1(runs: RichnessRuns) -> dict[str, Estimate]:
    table = runs.of("shortcut")
    summary = eigen_summary(spectra(table)).reset_index()
    lazy, rich = "lazy (last layer only)", "rich (all layers)"
    classes = round(1.0 / float(table.chance.iloc[0]))  # C
    k_rich = summary[summary.training == rich].sort_values("seed")["k where Π̂ ≥ 0.9"]
    return {"utilisation": statistics.paired_difference(summary, "training", lazy, rich, "k where Π̂ ≥ 0.9"),
            "spectrum": statistics.paired_difference(summary, "training", lazy, rich, "participation ratio of ρ"),
            "about C": interval((k_rich / classes).tolist())}


def _not_tested(cid: str, statement: str, paper: str, reason: str, where: str, test: str) -> Claim:
    """A claim of the paper this book does not test (not run at this scale): the reason says what would test it."""
    return not_tested(cid, statement, paper, "D_LR", reason, where=where, test=test)


UNTESTED_CLAIMS = (  # "Paper claims the book does not test" (shared/reviews/verdict-audit.md), D_LR's part
    _not_tested(
        "U-NC", "D_LR = 0 exactly when the features show neural collapse NC1 + NC2 (Propositions 1–2)",
        "Propositions 1–2 connect T_MP to NC1 and NC2 [rev][sec]; exact statements [unknown]; the book's "
        "reconstruction D_LR = 0 ⇔ NC1 + NC2 [derived]",
        "a proposition: the book checks it only in unit tests on constructed features (tests/test_dlr.py, exact "
        "neural collapse gives D_LR = 0); no trained net here reaches D_LR = 0. What would test it on runs: nets "
        "trained long past zero training loss (paper scale), per seed D_LR against NC1 and the NC2 measures as both "
        "approach 0", "§5.1", "unit tests only (tests/test_dlr.py)"),
    _not_tested(
        "U-ST", "D_LR is empirically more stable than the existing alternatives (‖θ‖², S_init, NC1)",
        "'empirically more stable than existing alternatives' [paper, v3 abstract]; what 'stable' measures and "
        "the values [unknown]",
        "the sources do not say what 'stable' measures (across seeds, probe samples, output scaling?). What would "
        "test it: that measure stated, e.g. the spread of each metric over probe resamples and seeds at a fixed "
        "set-up, compared between D_LR and each alternative per seed", "§5.4", "not tested (measure unknown)"),
    _not_tested(
        "U-WD", "When weight decay changes the kernel without rich dynamics, ‖θ‖² and S_init misjudge the regime and "
                "NC1's magnitude is unstable, while D_LR is correct",
        "‖θ‖² and S_init 'misjudge', NC1 has 'unstable magnitude' [sec][seed] (likely Table 1); set-up and values "
        "[unknown]",
        "no arm runs the paper's (unknown) weight-decay comparison. What would test it: a lazy arm (head only, or "
        "a large α) over a weight-decay sweep, on which D_LR should stay at its lazy value while ‖θ‖² and S_init "
        "move", "§5.4", "not tested (no weight-decay arm)"),
    _not_tested(
        "U-N", "The training-set size influences lazy / rich dynamics (VGG-16 and ResNet18 on CIFAR-10/100)",
        "'how batch normalization and training set size influence lazy/rich dynamics' [paper, v2 abstract]; the "
        "direction and the values [unknown]",
        "the sources give no direction to test and no arm varies the training-set size. What would test it: "
        "VGG-16 and ResNet18 at several training-set sizes at paper scale, D_LR per seed, once the paper's direction "
        "is known", "§5.5", "not tested (no training-set-size sweep)"),
    _not_tested(
        "U-I", "The last layer has the strongest low-rank bias (intermediate layers, Appendix I)",
        "'the last layer has the strongest low-rank bias' [rev, quoting App. I]; values [unknown]",
        "the probe reads D_LR of the penultimate features only; no per-layer D_LR is logged in these runs. What "
        "would test it: D_LR of every layer's features against the same outputs F, per seed, in the VGG-16 and "
        "ResNet18 runs", "§5.5–5.6", "not tested (no per-layer D_LR logged)"),
    _not_tested(
        "U-J", "The Nyström eigen-plots are accurate once the probe holds enough samples (Appendix J)",
        "Nyström approximation accuracy against sample size [rev, App. J]; values [unknown]",
        "every run is probed at one sample size. What would test it: the eigen-plots of one trained net at "
        "several probe sizes (below and above p) against a large held-out probe, per seed",
        "§5.7", "not tested (one probe size per run)"),
    _not_tested(
        "U-F5", "During training, feature quality correlates with feature intensity: larger eigen-directions improve "
                "faster (Fig. 5)",
        "'feature quality correlates with feature intensity during training, with larger features improving "
        "faster' [rev, quoting the paper's Fig. 5]; the paper's formulas (Eq. 5) [unknown]",
        "the rich Shortcut-MNIST arm has done most of its feature learning by its first logged step, and eigen-"
        "directions are not matched across checkpoints. What would test it: the rich arm logged densely over its "
        "first steps, each direction's quality and eigenvalue tracked across checkpoints, and a per-seed Spearman "
        "of the eigenvalue against the growth of quality", "§5.7", "not tested (no dense early checkpoints)"),
    _not_tested(
        "U-GT", "D_LR registers the grokking transition without relying on accuracy: it drops when the model starts "
                "to generalise",
        "'captures known lazy-to-rich transitions (e.g., grokking) without relying on accuracy' [paper, v3 "
        "abstract]; 'drops exactly when the model starts to generalize' [seed]; 'before accuracy improves' "
        "[seed, unverified]",
        "G1's 'at T_grok' part tests whether D_LR falls at T_grok more than before it; whether the fall comes "
        "with or before the accuracy's rise needs a set-up whose D_LR falls through grokking. What would test it: "
        "the paper's Transformer at mod 97 (paper scale), per seed the step of D_LR's steepest fall against the "
        "first step of the test accuracy's rise", "§5.3", "not tested (timing of the fall)"),
    _not_tested(
        "U-C", "D_LR is cheap: O(p²C) after the forward passes for p ≈ 10³ features, n = O(p) samples",
        "'O(npC)' after the forward passes, 'O(p²C)' for p ≈ 10³ and n = O(p) [sec]; the exact self-term costs "
        "O(np²) [derived]",
        "a cost claim, not a claim about learning: the book times no D_LR computation against its size. What "
        "would test it: a benchmark script timing `dlr` at growing p (and n = p) with the matmul rate beside it, "
        "the fitted exponent of time against p", "§5.1", "not tested (a benchmark would)"),
)


# ------------------------------------------------------------------------------------------------------ chapter

CHAPTER = Chapter(NAME, "5. Dynamical richness D_LR", __name__, summary=SUMMARY, presets=PRESETS, sweeps_of=sweeps,
                  data=("mnist", "cifar10"), claims=(
    Claim(ClaimSpec(
        "R1", "On Shortcut MNIST (ours) rich training (all layers) is richer (lower D_LR) yet generalises worse "
              "than last-layer-only training — the book's stand-in for the paper's Fig. 1",
        f"MNIST, construction unknown: rich 10.0 % test, D_LR 0.0087; lazy 74.4 %, 0.63 {UNVERIFIED}", "book",
        AllOf((("richer", AtLeast("the per-seed D_LR(lazy) − D_LR(rich)", DIRECTION)),
               ("worse", AtLeast("the per-seed test acc(lazy) − test acc(rich)", DIRECTION))))),
        _r1, where="§5.2, {numref}`fig-ch5-shortcut-mnist`",
        test=r"lazy − rich differences of $\mathcal D_{LR}$ and test accuracy on Shortcut MNIST (ours)"),
    Claim(ClaimSpec(
        "G2", "The book's grokking set-up groks: the training set is memorised (train ≥ 99 %, test < 50 %), then the "
              "test accuracy reaches 95 % within the budget",
        "the paper's Transformer on mod 97 groks (5.2 % test at step 200, 99.8 % at step 3000) [sec]; the MLP set-up "
        "here is ours (nht.md §7.4 calibration)", "book",
        AtLeast("the share of seeds that memorise, then grok", SEED_SHARE)),
        _g2, where="§5.3, {numref}`fig-ch5-grokking`", test="share of seeds that memorise, then generalise"),
    Claim(ClaimSpec(
        "G1", "Grokking is a lazy → rich transition: D_LR falls from memorisation to after grokking",
        f"D_LR 0.51 at step 200 (5.2 % test) → 0.11 at step 3000 (99.8 %), 2-layer Transformer, mod 97 {UNVERIFIED}",
        "D_LR",
        AllOf((("falls", AtLeast("the per-seed fall D_LR(T_mem) − D_LR(last step) of the seeds that grokked",
                                 GROK_MIN_FALL)),
               ("at T_grok", AtLeast(f"the per-seed fall of D_LR across T_grok ± h minus its fall over "
                                     f"[T_grok − 3h, T_grok − h] (h = {GROK_WINDOW:g} T_grok) of the seeds that "
                                     "grokked", DIRECTION))))),
        _g1, note=_g1_note, ours=_g1_ours, where="§5.3, {numref}`fig-ch5-grokking`",
        test=r"fall of $\mathcal D_{LR}$ from memorisation to the end, and its fall across $T_{grok}$ beyond the "
             "fall before"),
    Claim(ClaimSpec(
        "A1", "D_LR rises with the target down-scaling α (lazier)",
        "D_LR 'changes consistently with α' [sec][seed]; qualitative, no values [unknown]", "D_LR",
        AtLeast("the per-seed Spearman ρ(α, final D_LR)", ALPHA_MIN_RHO)),
        _a1, where="§5.4, {numref}`fig-ch5-alpha-sweep`", test=r"Spearman ρ(α, $\mathcal D_{LR}$)"),
    Claim(ClaimSpec(
        "A2", "‖θ‖² and S_init do not change with α",
        "‖θ‖_F² and S_init show 'no change with α' [sec][seed]; qualitative, no values [unknown]", "D_LR",
        AllOf((("‖θ‖²", Equivalent("the per-seed relative change of final ‖θ‖² from the smallest to the largest α",
                                   FLAT_THETA, LEARNED_AT_EVERY_ALPHA)),
               ("S_init", Equivalent("the per-seed change of final S_init from the smallest to the largest α",
                                     FLAT_S_INIT, LEARNED_AT_EVERY_ALPHA))))),
        _a2, control=_a2_control, where="§5.4",
        test="change across α inside a margin (null claim, with a positive control)"),
    Claim(ClaimSpec(
        "A3", "NC1 moves in the opposite direction to D_LR across α",
        "NC1 moves in the 'opposite direction' [sec][seed]; qualitative, no values [unknown]", "D_LR",
        AtMost("the per-seed Spearman ρ(α, final NC1) times the sign of that seed's ρ(α, final D_LR)", NC1_MAX_RHO)),
        _a3, where="§5.4", test=r"ρ(α, NC1) signed by the trend of $\mathcal D_{LR}$"),
    Claim(ClaimSpec(
        "B1", "BatchNorm makes VGG-16 richer (lower D_LR) and better (higher test accuracy)",
        f"VGG-16 on CIFAR-100: without BN D_LR 0.66, 21.7 % test; with BN 0.073, 72.0 % {UNVERIFIED}", "D_LR",
        AllOf((("richer", ArmComparison("the per-seed D_LR(no BN) − D_LR(BN)", DIRECTION, NO_BN_TRAINED)),
               ("better", ArmComparison("the per-seed test acc(BN) − test acc(no BN)", DIRECTION,
                                            NO_BN_TRAINED))))),
        _b1, control=lambda runs: no_bn_trained(runs.of("batchnorm")), note=_b1_note,
        where="§5.5, {numref}`fig-ch5-batchnorm`",
        test=r"no BN − BN differences of $\mathcal D_{LR}$, BN − no BN of test accuracy, if the no-BN arm trained"),
    Claim(ClaimSpec(
        "L1", "The best learning rate is also the richest (ResNet18)",
        f"ResNet18 on CIFAR-100, lr 0.005 / 0.05 / 0.2: D_LR 0.053 / 0.025 / 0.039, test 66.3 / 78.3 / 74.5 % "
        f"{UNVERIFIED}", "D_LR",
        AtLeast("the share of seeds whose best-test-accuracy lr is also their lowest-D_LR lr", SEED_SHARE)),
        _l1, note=_measured_on("lr"), where="§5.6, {numref}`fig-ch5-resnet18`",
        test="share of seeds whose best lr is their richest"),
    Claim(ClaimSpec(
        "L2", "Fitting shuffled labels is as rich as fitting true labels (rich without generalising)",
        f"CIFAR-10: true labels D_LR 0.031, 95.0 % test; fully shuffled 0.034, 9.5 % {UNVERIFIED}", "D_LR",
        Equivalent("the per-seed relative gap (D_LR(shuffled) − D_LR(true)) / D_LR(true)", SHUFFLE_MARGIN,
                   PositiveControl("the per-seed train accuracy on the shuffled labels minus chance",
                                   SHUFFLE_FITTED))),
        _l2, control=_l2_control, note=_measured_on("shuffle"), where="§5.6, {numref}`fig-ch5-resnet18`",
        test=r"shuffled − true $\mathcal D_{LR}$, relative to the true one, inside ±25 % (null claim, with a "
             "positive control)"),
    Claim(ClaimSpec(
        "E1", "Rich features concentrate on about C eigen-directions that the head uses; lazy ones keep a long tail "
              "(MF vs EF regime)",
        "qualitative: the MF regime is 'dominated by a number of eigenfunctions equal to the number of classes' "
        "[paper, v1 abstract]; the eigen-plot formulas are ours [ours]", "D_LR",
        AllOf((("utilisation", AtLeast("the per-seed k(Π̂ ≥ 0.9) of lazy minus rich", DIRECTION)),
               ("spectrum", AtLeast("the per-seed participation ratio of ρ, lazy minus rich", DIRECTION)),
               ("about C", AtMost("the per-seed k(Π̂ ≥ 0.9) of the rich arm divided by C", RICH_MAX_PER_CLASS))))),
        _e1, where="§5.7, {numref}`fig-ch5-eigen`",
        test="lazy − rich of k(Π̂ ≥ 0.9) and of the participation ratio; the rich k(Π̂ ≥ 0.9) at most 2 C"),
) + UNTESTED_CLAIMS)  # the order in which the notebook's sections discuss them; the untested ones last (§5.8)
