"""The chapters' own library: one module per chapter, holding what a chapter notebook configures and judges but a
reader need not study on the page — its presets (frozen, validated dataclasses, a why-comment per field), the
paper's values it is held against, its claim declarations (`nhtlib.report.verdicts.ClaimSpec`, NHT's P1–P6 from
`nhtlib.report.predictions`), and the analysis that turns its run tables into per-seed estimates. The notebook then reads
like the paper: the claim, the set-up in a few lines, the run (cached), the figure, the verdict.

* `toy` — chapter 1, the toy norm-hierarchy model (ours).
* `grokking` — chapter 2, grokking on modular arithmetic (NSDL): the MLP stand-in's λ sweep and NSDL's own settings.
* `borders` — chapter 3, CIFAR-10 with class-coloured borders (NHT §5.1–5.2, §5.8): λ and ρ sweeps, layers, ablation, S.
* `celeba_waterbirds` — chapter 4, CelebA and Waterbirds (NHT §5.9–5.10): two λ sweeps, the S spectrum, Table 3.
* `richness` — chapter 5, dynamical richness D_LR (Nam et al.): Shortcut MNIST (ours), grokking, α, BatchNorm, ResNet18.
* `synthesis` — chapter 6, the papers read together: D_LR along chapters 1–4's transitions, a transition forecaster,
  NHT Table 3 and the S spectrum. It trains nothing of its own (it reads chapters 1–4's D_LR-logged sweeps,
  `probes`).

Every module declares its sweeps (`sweeps(preset, data_root, first_seed)`: the members it trains, as
`nhtlib.engine.sweep.Sweep`); `SWEEPS` maps each chapter to them at a scale, and `plan_chapter` plans one with the
compute planner (`nhtlib.engine.plan`).
"""
from nhtlib.chapters import toy_norm_hierarchy as toy  # noqa: F401
from nhtlib.chapters import grokking  # noqa: F401
from nhtlib.chapters import dlr_batchnorm as richness  # noqa: F401
from nhtlib.chapters import border_cifar as borders  # noqa: F401
from nhtlib.chapters import celeba_waterbirds  # noqa: F401
from nhtlib.chapters import synthesis  # noqa: F401


def _sweeps_of(module):
    def at_scale(scale: str, data_root: str | None = None, first_seed: int = 0):
        return module.sweeps(module.PRESETS[scale], data_root, first_seed)

    at_scale.__doc__ = f"The sweeps of {module.CHAPTER} at `scale` (its `sweeps` on `PRESETS[scale]`)."
    return at_scale


# chapter -> fn(scale, data_root=None, first_seed=0) -> [Sweep]: what the compute planner plans (`nhtlib.engine.plan`)
SWEEPS = {m.CHAPTER: _sweeps_of(m) for m in (toy, grokking, borders, celeba_waterbirds, richness)}
SWEEPS[synthesis.CHAPTER] = synthesis.sweeps  # the sweeps it reads, at a scale (no preset of its own)
# chapters that read other chapters' runs and train none of their own: a plan of the whole book leaves them out
READS_OTHERS = (synthesis.CHAPTER,)


def plan_chapter(chapter: str, scale: str = "cpu", device: str = "cpu", *, data_root: str | None = None,
                 time_here: bool = True):
    """The compute plan (`nhtlib.engine.plan.ChapterPlan`) of chapter `chapter` (a notebook name, e.g. '03_border_cifar')
    at `scale` on `device` ('cpu' = here, or a name of `nhtlib.engine.plan.DEVICES`). It lives here, not in
    `nhtlib.engine.plan`, so that the training side never imports the chapters."""
    from nhtlib.engine import plan
    from nhtlib.config import ConfigError

    if chapter not in SWEEPS:
        raise ConfigError(f"chapter={chapter!r} has no declared sweeps; choose one of {', '.join(SWEEPS)}")
    return plan.plan_sweeps(chapter, scale, SWEEPS[chapter](scale, data_root), plan.device_spec(device),
                            time_here=time_here)
