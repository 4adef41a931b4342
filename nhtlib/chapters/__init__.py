"""The chapters: one module per chapter page, named like its notebook, each building one `Chapter`
(`nhtlib.chapters.base`: its presets, its sweeps, its runs by name, its claims), registered here in `CHAPTERS`.

* `toy_norm_hierarchy` — chapter 1, the toy norm-hierarchy model (ours).
* `grokking` — chapter 2, grokking on modular arithmetic (NSDL): the MLP stand-in's λ sweep and NSDL's own settings.
* `border_cifar` — chapter 3, CIFAR-10 with class-coloured borders (NHT §5.1–5.2, §5.8): λ and ρ sweeps, layers,
  ablation, S.
* `celeba_waterbirds` — chapter 4, CelebA and Waterbirds (NHT §5.9–5.10): two λ sweeps, the S spectrum.
* `dlr_batchnorm` — chapter 5, dynamical richness D_LR (Nam et al.): Shortcut MNIST (ours), grokking, α, BatchNorm,
  ResNet18.
* `synthesis` — chapter 6, the papers read together: D_LR along chapters 1–4's transitions, a transition
  forecaster, NHT Table 3 and the S spectrum. It trains nothing of its own: it reads chapters 1–4's D_LR-logged
  sweeps (`probes`) through their `Chapter` objects.

The builder, the runner, the compute planner (`plan_chapter`), chapter 6 and the tests read the chapters through
`CHAPTERS` only. Adding a chapter: its notebook, its module (ending in ``CHAPTER = Chapter(...)``), its test, the table
of contents and one line below (the book's page "How to add a chapter").
"""
from __future__ import annotations

from nhtlib.chapters import border_cifar, celeba_waterbirds, dlr_batchnorm, grokking, synthesis, toy_norm_hierarchy
from nhtlib.chapters.base import Chapter

CHAPTERS: dict[str, Chapter] = {m.CHAPTER.name: m.CHAPTER for m in (
    toy_norm_hierarchy, grokking, border_cifar, celeba_waterbirds, dlr_batchnorm, synthesis)}


def chapter(name: str) -> Chapter:
    """The registered chapter `name` (a notebook's stem, e.g. '03_border_cifar')."""
    from nhtlib.config import ConfigError

    if name not in CHAPTERS:
        raise ConfigError(f"chapter={name!r} is not registered; choose one of {', '.join(CHAPTERS)}")
    return CHAPTERS[name]


def trains_own(name: str) -> bool:
    """Whether the chapter trains runs of its own (chapter 6 reads the others'): a plan of the book counts these."""
    return not chapter(name).reads


def plan_chapter(name: str, scale: str = "cpu", device: str = "cpu", *, data_root: str | None = None,
                 time_here: bool = True):
    """The compute plan (`nhtlib.engine.plan.ChapterPlan`) of chapter `name` at `scale` on `device` ('cpu' = here, or
    a name of `nhtlib.engine.plan.DEVICES`). It lives here, not in the engine, so that the engine never imports the
    chapters."""
    from nhtlib.engine import plan

    return plan.plan_sweeps(name, scale, chapter(name).sweeps(scale, data_root), plan.device_spec(device),
                            time_here=time_here)
