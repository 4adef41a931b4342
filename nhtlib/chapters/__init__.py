"""The chapters: one module per chapter page, named like its notebook, each building one `Chapter`
(`nhtlib.chapters.base`: its presets, its sweeps, its runs by name, its claims), registered in `CHAPTERS` (`nhtlib.chapters.registry`).

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
of contents and one line of `registry` (the book's page "How to add a chapter").
"""
from nhtlib.paths import lazy_attributes

# lazy: importing one chapter module runs no other chapter's code (a page's identity is the code it executes)
__getattr__ = lazy_attributes(__name__, {
    **{name: f"{__name__}.registry:{name}" for name in ("CHAPTERS", "chapter", "trains_own", "plan_chapter")},
    **{name: f"{__name__}.{name}" for name in ("base", "registry", "probes", "toy_norm_hierarchy", "grokking",
                                              "border_cifar", "celeba_waterbirds", "dlr_batchnorm", "synthesis")}})
