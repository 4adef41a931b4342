"""Metrics computed from models or from logged tables."""
from .generalisation import memorisation_score  # noqa: F401
