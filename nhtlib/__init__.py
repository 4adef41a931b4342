"""nhtlib: the shared library of the nht-book (norm-hierarchy transitions and dynamical richness)."""
from .paths import __version__  # noqa: E402  (defined in paths: Ground, importable by every part)

from . import cache, claims, config, delay_law, norms, optim, paths, plots, regimes, separation  # noqa: E402
from . import tables  # noqa: E402
from . import sweep, train  # noqa: E402
from . import data, metrics, models  # noqa: E402
from . import forecast, predictions, verdicts  # noqa: E402
from . import book  # noqa: E402  (the chapters' own modules: presets, claims, analyses)
from . import provenance  # noqa: E402  (what made a chapter page: its identity and provenance box)
from .cache import RunCache  # noqa: E402
from .claims import Claims  # noqa: E402
from .config import ChapterParams, TrainConfig, resolve_device, resolve_scale  # noqa: E402
from .sweep import RunConfig, grid, run  # noqa: E402

__all__ = ["cache", "claims", "config", "delay_law", "norms", "optim", "paths", "plots", "regimes", "separation", "tables",
           "sweep", "train", "data", "metrics", "models", "forecast", "predictions", "verdicts", "book", "provenance", "RunCache", "Claims",
           "ChapterParams", "TrainConfig", "resolve_device", "resolve_scale", "RunConfig", "grid", "run"]
