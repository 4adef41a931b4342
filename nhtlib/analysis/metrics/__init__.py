"""Model-side metrics, one module each: `norms` (per-layer squared norms, logged by the training loop), `dlr` (D_LR
and linear CKA), `features` (penultimate features and the probes a run logs), `eigen` (feature spectra), `baselines`
(the reference kernels D_LR is held against)."""
from nhtlib.paths import lazy_attributes

__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in (
    "norms", "dlr", "features", "eigen", "baselines")})
