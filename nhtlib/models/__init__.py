"""Models, built by name: `nht.models.config("mlp", hidden=(64,))` then `.build(...)`.

Every model is *member-batched*: built for K seeds at once, its parameters carry a leading member dimension K,
and it maps inputs (K, B, ...) to logits (K, B, C). K = 1 is the ordinary single model. Member k is initialised
exactly as the single PyTorch model built under torch.manual_seed(seed_k).
"""
from __future__ import annotations

from ..config import ConfigError
from .base import ModelConfig
from .mlp import MLPConfig

MODELS: dict[str, type[ModelConfig]] = {"mlp": MLPConfig}


def config(name: str, **kwargs) -> ModelConfig:
    """The config of model `name` (see MODELS) with the given hyper-parameters."""
    if name not in MODELS:
        raise ConfigError(f"model={name!r} is unknown; choose one of {', '.join(sorted(MODELS))}")
    return MODELS[name](**kwargs)


def register(name: str, cls: type[ModelConfig]) -> None:
    MODELS[name] = cls
