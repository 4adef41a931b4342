"""nhtlib: the shared library of the nht-book (norm-hierarchy transitions and dynamical richness).

The layers, from the ground up (`import nhtlib as nht`; every name below is imported on first use):

* ground — `nht.config` (validated configs), `nht.paths` (where things live, atomic writes);
* `nht.data`, `nht.models` — data sets with their shortcuts, models by name;
* `nht.engine` — what a run executes: optimisers, precision, the training step and loop, sweeps, memory fitting, the
  run cache, the compute planner. Only this code (with the data, models and the metrics it logs) keys a run;
* `nht.analysis` — pure functions on logged tables and features: norms, regimes, the delay law, separation, the
  forecaster, model-side metrics (`nht.metrics`) and one statistics module (`nht.statistics`);
* `nht.report` — claims and verdict rules, NHT's predictions P1–P6, the verdicts' stability across seed blocks,
  tables, plots, provenance;
* `nht.chapters` — one module per chapter page, registered in `nht.chapters.CHAPTERS`;
* `nht.cli` — the commands (`python -m nhtlib build | run | list | plan`).

Short names for the modules used on every page (`nht.run`, `nht.plots`, `nht.regimes` ...) stay at the top.
"""
from nhtlib.paths import __version__, lazy_attributes

_NAMES = {
    **{name: f"nhtlib.{name}" for name in ("config", "paths", "data", "models", "engine", "analysis", "report",
                                          "chapters", "cli")},
    **{name: f"nhtlib.engine.{name}" for name in ("cache", "optim", "precision", "step", "train", "sweep", "memory",
                                                 "plan", "source")},
    **{name: f"nhtlib.analysis.{name}" for name in ("regimes", "divergence", "delay_law", "separation", "forecast",
                                                   "statistics", "metrics", "vision", "grok_times", "groups",
                                                   "generalisation")},
    "norms": "nhtlib.analysis.metrics.norms",
    **{name: f"nhtlib.report.{name}" for name in ("verdicts", "predictions", "claims", "tables", "plots",
                                                 "provenance", "manifest", "exports", "stability")},
    "RunCache": "nhtlib.engine.cache:RunCache",
    "Claims": "nhtlib.report.claims:Claims",
    **{name: f"nhtlib.config:{name}" for name in ("ChapterParams", "TrainConfig", "resolve_device", "resolve_scale")},
    **{name: f"nhtlib.engine.sweep:{name}" for name in ("RunConfig", "grid", "run")},
}
__getattr__ = lazy_attributes(__name__, _NAMES)
__all__ = ["__version__", *_NAMES]


def __dir__():
    return __all__
