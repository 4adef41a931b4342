"""The registry of the book's chapters: every `Chapter` by its notebook's name, in the book's order. The builder,
the runner, the compute planner and the tests read the chapters here; adding a chapter adds one line below."""
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
