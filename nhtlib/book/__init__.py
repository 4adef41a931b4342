"""The chapters' own library: one module per chapter, holding what a chapter notebook configures and judges but a
reader need not study on the page — its presets (frozen, validated dataclasses, a why-comment per field), the
paper's values it is held against, its claim declarations (`nhtlib.verdicts.ClaimSpec`, NHT's P1–P6 from
`nhtlib.predictions`), and the analysis that turns its run tables into per-seed estimates. The notebook then reads
like the paper: the claim, the set-up in a few lines, the run (cached), the figure, the verdict.

* `toy` — chapter 1, the toy norm-hierarchy model (ours).
* `grokking` — chapter 2, grokking on modular arithmetic (NSDL): the MLP stand-in's λ sweep and NSDL's own settings.
* `borders` — chapter 3, CIFAR-10 with class-coloured borders (NHT §5.1–5.2, §5.8): λ and ρ sweeps, layers, ablation, S.
* `celeba_waterbirds` — chapter 4, CelebA and Waterbirds (NHT §5.9–5.10): two λ sweeps, the S spectrum, Table 3.
* `richness` — chapter 5, dynamical richness D_LR (Nam et al.): Shortcut MNIST (ours), grokking, α, BatchNorm, ResNet18.
"""
from . import toy  # noqa: F401
from . import grokking  # noqa: F401
from . import richness  # noqa: F401
from . import borders  # noqa: F401
from . import celeba_waterbirds  # noqa: F401
