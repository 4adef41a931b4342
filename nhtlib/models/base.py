from __future__ import annotations

from typing import Callable, ClassVar, Sequence

import torch
from torch import nn

from nhtlib.config import Config, ConfigError


class ModelConfig(Config):
    """Builds a member-batched model: `build(input_shape, n_classes, seeds) -> nn.Module` (K members of this config),
    or `build_members(input_shape, n_classes, [(config, seed), ...])` (member k of its own config).

    INIT_ONLY: the fields that change only the initial weights, neither the architecture nor the forward pass (e.g.
    `MLPConfig.output_init_scale`). Members whose configs differ in them alone train in one batch
    (`batch_identity`), each initialised from its own config; a model that declares any overrides `build_members`.
    """

    INIT_ONLY: ClassVar[tuple[str, ...]] = ()

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> nn.Module:
        raise NotImplementedError

    def batch_identity(self) -> dict:
        """`to_dict` without the INIT_ONLY fields: what the members of one batch share (`RunConfig.batch_signature`)."""
        return {name: value for name, value in self.to_dict().items() if name not in self.INIT_ONLY}

    def check_members(self, configs: Sequence[ModelConfig]) -> None:
        """ConfigError unless every config shares this one's `batch_identity` (differs in INIT_ONLY fields at most)."""
        for config in configs:
            if not isinstance(config, ModelConfig) or config.batch_identity() != self.batch_identity():
                raise ConfigError(f"{config!r} cannot be built in one batch with {self!r}: members may differ only in "
                                  f"{type(self).__name__}'s init-only fields {self.INIT_ONLY}")

    def build_members(self, input_shape: tuple[int, ...], n_classes: int,
                      members: Sequence[tuple[ModelConfig, int]]) -> nn.Module:
        """K members, member k built from members[k] = (its config, its seed): exactly as that config's single model
        under torch.manual_seed(seed). The default builds this config's `build` (the configs all equal it)."""
        configs = [config for config, _ in members]
        self.check_members(configs)
        if any(config.to_dict() != self.to_dict() for config in configs):
            raise NotImplementedError(f"{type(self).__name__} declares INIT_ONLY={self.INIT_ONLY} but does not build "
                                      "members that differ in them (override build_members)")
        return self.build(input_shape, n_classes, [seed for _, seed in members])


def init_under_seed(seed: int, make: Callable[[], nn.Module]) -> nn.Module:
    """Build a module with the global RNG seeded to `seed`, without disturbing the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()
