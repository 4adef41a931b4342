"""Metrics computed from models or from logged tables, one module each."""
from . import baselines, eigen, features, grokking, groups, vision  # noqa: F401
from .dlr import DLRResult, dlr, dlr_kernel, dlr_members, linear_cka, null_value  # noqa: F401
from .eigen import spectrum  # noqa: F401
from .features import dlr_probe, extract, richness_probe  # noqa: F401
from .generalisation import memorisation_score  # noqa: F401
