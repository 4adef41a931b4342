"""The engine: what a run executes — optimisers (`optim`), precision (`precision`), the one training step (`step`),
the training loop (`train`), sweeps (`sweep`), memory fitting (`memory`), the run cache (`cache`) and the compute
planner (`plan`). A run's cache key hashes the source its imports reach (`source`), with the config and the data
fingerprint; nothing above this layer enters a key. The engine never imports the report, chapters or commands."""
from nhtlib.paths import lazy_attributes

__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in (
    "cache", "optim", "precision", "step", "train", "sweep", "memory", "plan", "source")})
