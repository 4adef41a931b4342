"""One generic wrapper that turns a single-model factory into the book's member-batched interface.

`StackedModel(singles)` holds the K members' parameters and buffers stacked along a leading member dimension
(`torch.func.stack_module_state`), in a copy of the single module's tree, so parameter names (hence the per-layer
norm columns) are those of the single model. Its forward maps (K, B, ...) -> (K, B, C):

* K = 1: a plain call of the single module on the member's parameter views (gradients and in-place BatchNorm
  running-statistic updates reach the stacked storage);
* K > 1: `torch.func.vmap` over `functional_call`, with BatchNorm too. The buffers go through vmap batched
  (``in_dims=0``) like the parameters, so BatchNorm's in-place update of ``running_mean``, ``running_var`` and
  ``num_batches_tracked`` writes member k's statistics into row k of the stacked buffers; train and eval mode
  match the K single modules called one by one.
* K > 1, the fallback: one member after the other, only when a BatchNorm in training mode has ``momentum=None``
  (a cumulative average, whose factor ``1 / num_batches_tracked`` PyTorch reads as a Python number, which vmap
  refuses). ``StackedModel._loop_batchnorm = True`` forces this path for every BatchNorm model (the tests compare
  the two).

A single module maps x (B, ...) to logits (B, C) through a final linear layer named ``head``; the penultimate
features Phi are that layer's input (captured by a forward hook inside the member function, so it works under vmap). The wrapper also keeps the initial
parameters (as buffers, for S_init and ||theta - theta_0||^2) and offers two switches used by the D_LR chapter:

* ``output_scale`` alpha and ``centred``: the model outputs alpha * (f_theta(x) - f_theta0(x)) (Chizat et al. 2019's
  lazy scaling; alpha -> infinity is the lazy limit when the lr is scaled by 1/alpha^2);
* ``trainable="head"``: only the final linear layer is trained (the "lazy", last-layer-only model).

The centred output evaluates the initial members on the initial buffers (under ``torch.no_grad``); in training
mode that updates the *stored initial* running statistics in place, on both paths alike (the initial network's
eval-mode output thus uses running statistics of the batches it has been shown).

Channels-last memory format (faster convolutions on CUDA) is not offered. Inside the member function the input is a
vmap BatchedTensor of logical shape (B, C, H, W) over a 5-D physical tensor: ``contiguous`` and ``clone`` with
``memory_format=torch.channels_last`` raise "NYI" (functorch's batching rules support only the contiguous and
preserve formats) and ``.to(memory_format=...)`` rejects the rank-5 physical tensor. Laying out the stacked input
outside vmap in memory order (B, H, W, K, C) does make vmap's grouped convolution (the member dimension folded into
the channels) run channels-last, but the layout is lost at the first max-pool (its rule folds the members into the
batch and copies), the channels-last adaptive average pool falls back to a slow per-member loop (no batching rule
for ``as_strided_``), and the logits differ by up to about 4e-6 (torch 2.14, CPU; not measured on CUDA).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from nhtlib.config import check_choice, check_range
from nhtlib.models.base import ModelConfig, init_under_seed

TRAINABLE = ("all", "head")


def _set_tensor(root: nn.Module, name: str, value: torch.Tensor, as_parameter: bool) -> None:
    *path, leaf = name.split(".")
    module = root
    for part in path:
        module = getattr(module, part)
    if as_parameter:
        module._parameters[leaf] = nn.Parameter(value)
    else:
        module._buffers[leaf] = value


def has_batchnorm(module: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in module.modules())


def vmap_refuses_batchnorm(module: nn.Module) -> bool:
    """Whether a BatchNorm of `module` would update a cumulative average (``momentum=None``) in this forward: its
    factor is read with ``float(num_batches_tracked)``, which vmap refuses (eval mode and
    ``track_running_stats=False`` are fine under vmap)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats
               and m.momentum is None for m in module.modules())


class StackedModel(nn.Module):
    """K members of one architecture, parameters stacked (K, ...); see the module docstring."""

    _loop_batchnorm: bool = False  # True: BatchNorm members one after the other (the reference the tests compare to)

    def __init__(self, singles: Sequence[nn.Module], *, output_scale: float = 1.0, centred: bool = False,
                 trainable: str = "all"):
        super().__init__()
        check_choice("trainable", trainable, TRAINABLE)
        params, buffers = stack_module_state(list(singles))
        self.net = copy.deepcopy(singles[0])
        for name, value in params.items():
            _set_tensor(self.net, name, value.detach().clone(), as_parameter=True)
        for name, value in buffers.items():
            _set_tensor(self.net, name, value.detach().clone(), as_parameter=False)
        self.init = nn.Module()  # initial parameters and buffers, for theta_0-based metrics and the centred output
        for name, value in {**params, **buffers}.items():
            self.init.register_buffer(name.replace(".", "__"), value.detach().clone())
        if trainable == "head":
            for name, p in self.net.named_parameters():
                p.requires_grad_(name.startswith("head."))
        self.output_scale, self.centred = float(output_scale), bool(centred)
        self.k_members = len(singles)
        self.batchnorm = has_batchnorm(self.net)

    def member_tensors(self, initial: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(parameters, buffers) of all members, stacked (K, ...), current or initial."""
        params = dict(self.net.named_parameters())
        buffers = dict(self.net.named_buffers())
        if initial:
            stored = dict(self.init.named_buffers())
            params = {n: stored[n.replace(".", "__")] for n in params}
            buffers = {n: stored[n.replace(".", "__")] for n in buffers}
        return params, buffers

    def _map(self, x: torch.Tensor, initial: bool, return_features: bool):
        params, buffers = self.member_tensors(initial)

        def one(p, b, xk):
            if not return_features:
                return functional_call(self.net, {**p, **b}, (xk,))
            seen: list[torch.Tensor] = []
            hook = self.net.head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
            try:
                logits = functional_call(self.net, {**p, **b}, (xk,))
            finally:
                hook.remove()
            return seen[-1], logits

        k = x.shape[0]
        if k != self.k_members:
            raise ValueError(f"input has {k} members, the model {self.k_members}")
        loop = self.batchnorm and (self._loop_batchnorm or vmap_refuses_batchnorm(self.net))
        if k > 1 and not loop:
            return vmap(one)(params, buffers, x)  # buffers batched too: BatchNorm updates row k of each in place
        outs = [one({n: t[i] for n, t in params.items()}, {n: t[i] for n, t in buffers.items()}, x[i])
                for i in range(k)]
        if return_features:
            return torch.stack([o[0] for o in outs]), torch.stack([o[1] for o in outs])
        return torch.stack(outs)

    def _scaled(self, logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.centred:
            with torch.no_grad():
                initial = self._map(x, initial=True, return_features=False)
            logits = logits - initial
        return logits * self.output_scale if self.output_scale != 1.0 else logits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._scaled(self._map(x, initial=False, return_features=False), x)

    def features_and_outputs(self, x: torch.Tensor, initial: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Penultimate features (K, B, p) and the head's logits (K, B, C) (before centring and output scaling)."""
        return self._map(x, initial=initial, return_features=True)


@dataclass(frozen=True)
class StackedConfig(ModelConfig):
    """Base config of models built from a single-module factory `single(input_shape, n_classes)`.

    output_scale, centred: the model outputs output_scale * (f - f_0) when centred (else output_scale * f).
    trainable: "all" layers, or only the final linear "head" (last-layer-only training on frozen features).
    """

    output_scale: float = 1.0
    centred: bool = False
    trainable: str = "all"

    def validate(self) -> None:
        check_range("output_scale", self.output_scale, 0.0, None, low_inclusive=False)
        check_choice("trainable", self.trainable, TRAINABLE)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        raise NotImplementedError

    def build(self, input_shape: tuple[int, ...], n_classes: int, seeds: Sequence[int]) -> StackedModel:
        singles = [init_under_seed(s, lambda: self.single(tuple(input_shape), n_classes)) for s in seeds]
        return StackedModel(singles, output_scale=self.output_scale, centred=self.centred, trainable=self.trainable)


class MLPNet(nn.Module):
    """ReLU MLP with PyTorch's default init; `features` = post-activations of the last hidden layer."""

    def __init__(self, in_features: int, hidden: Sequence[int], n_classes: int):
        super().__init__()
        widths = [in_features, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(nn.Flatten(), *layers)
        self.head = nn.Linear(widths[-1], n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@dataclass(frozen=True)
class FeatureMLPConfig(StackedConfig):
    """ReLU MLP in the stacked form (feature extraction, last-layer-only training, centred alpha-scaling)."""

    hidden: tuple[int, ...] = (256, 256)

    def validate(self) -> None:
        super().validate()
        for i, h in enumerate(self.hidden):
            check_range(f"hidden[{i}]", h, 1, None, integer=True)

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        return MLPNet(math.prod(input_shape), self.hidden, n_classes)


@dataclass(frozen=True)
class StackedModularConfig(StackedConfig):
    """The grokking chapter's 2-layer modular-arithmetic MLP (`nhtlib.models.modular_mlp.ModularMLP`, same class and
    init) in the stacked form, so its features (the GELU hidden layer) can be probed."""

    d_embed: int = 128
    hidden: int = 256

    def single(self, input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
        from nhtlib.models.modular_mlp import ModularMLP

        return ModularMLP(n_classes, self.d_embed, self.hidden)
