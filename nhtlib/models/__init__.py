"""Models, built by name: `nht.models.config("mlp", hidden=(64,))` then `.build(...)`.

Every model is *member-batched*: built for K seeds at once, its parameters carry a leading member dimension K,
and it maps inputs (K, B, ...) to logits (K, B, C). K = 1 is the ordinary single model. Member k is initialised
exactly as the single PyTorch model built under torch.manual_seed(seed_k).
"""
from __future__ import annotations

from nhtlib.config import ConfigError
from nhtlib.models.base import ModelConfig
from nhtlib.models.mlp import MLPConfig
from nhtlib.models.modular_mlp import ModularMLPConfig
from nhtlib.models.resnet import ResNetConfig
from nhtlib.models.simple_cnn import SimpleCNNConfig, StackedSimpleCNNConfig
from nhtlib.models.stacked import FeatureMLPConfig, StackedModularConfig
from nhtlib.models.transformer import ModularTransformerConfig
from nhtlib.models.vgg import VGGConfig

MODELS: dict[str, type[ModelConfig]] = {
    "mlp": MLPConfig,                          # chapter 1 (toy), chapter 5
    "modular_mlp": ModularMLPConfig,           # chapter 2 (grokking), hand-batched
    "modular_mlp_stacked": StackedModularConfig,  # the same MLP through the generic stacked wrapper (feature probes)
    "transformer": ModularTransformerConfig,   # chapter 2, NSDL's 1-layer transformer
    "feature_mlp": FeatureMLPConfig,           # chapter 5 (MNIST)
    "simple_cnn": SimpleCNNConfig,             # chapter 3, NHT's SimpleCNN (grouped convolutions)
    "simple_cnn_stacked": StackedSimpleCNNConfig,
    "vgg16": VGGConfig,                        # chapter 5
    "resnet18": ResNetConfig,                  # chapters 3 and 5 (BatchNorm / GroupNorm / none)
}


def config(name: str, **kwargs) -> ModelConfig:
    """The config of model `name` (see MODELS) with the given hyper-parameters."""
    if name not in MODELS:
        raise ConfigError(f"model={name!r} is unknown; choose one of {', '.join(sorted(MODELS))}")
    return MODELS[name](**kwargs)
