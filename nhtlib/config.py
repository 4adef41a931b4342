"""Frozen, validated configuration objects.

Every experiment in the book is described by small frozen dataclasses. They are validated when they are
constructed, so a typo or an out-of-range value fails *before* any training starts, with a message that names
the field, the value and what is allowed. Their `to_dict()` is what the run cache hashes.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

SCALES = ("smoke", "cpu", "paper")
OPTIMIZERS = ("adamw", "sgd")
LR_SCHEDULES = ("constant", "cosine")
LOG_GRIDS = ("linear", "log")
SAMPLINGS = ("with_replacement", "epoch")
DECAY_GROUPS = ("all", "matrices")
PRECISIONS = ("fp32", "tf32", "bf16")  # numeric precision of a training step (see TrainConfig and nhtlib.engine.precision)


class ConfigError(ValueError):
    """A configuration value is unknown or out of range."""


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of {', '.join(map(repr, allowed))}")


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                *, low_inclusive: bool = True, high_inclusive: bool = True, integer: bool = False) -> None:
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{name}={value!r} must be an integer")
    if not integer and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ConfigError(f"{name}={value!r} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be finite")
    ok_low = low is None or (value >= low if low_inclusive else value > low)
    ok_high = high is None or (value <= high if high_inclusive else value < high)
    if not (ok_low and ok_high):
        lo = "-inf" if low is None else ("[" if low_inclusive else "(") + repr(low)
        hi = "inf" if high is None else repr(high) + ("]" if high_inclusive else ")")
        if low is None:
            lo = "(-inf"
        if high is None:
            hi = "inf)"
        raise ConfigError(f"{name}={value!r} is out of range; allowed: {lo}, {hi}")


class Config:
    """Mixin for frozen config dataclasses: validation hook, plain-dict form and a stable hash."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:  # overridden by subclasses
        pass

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able dict including the class name (so two configs of different kinds never collide)."""
        out: dict[str, Any] = {"kind": type(self).__name__}
        for f in dataclasses.fields(self):
            if f.metadata.get("identity", True):
                out[f.name] = _plain(getattr(self, f.name))
        return out

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)

    def digest(self) -> str:
        return stable_hash(self.to_dict())


def _plain(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return value  # keep floats as floats: 1.0 and 1 hash differently only if the types differ in the config
    return value


def flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """A nested dict (e.g. `RunConfig.to_dict`) on one level: nested names joined by '.' after `prefix`
    ("train.lr"); a list becomes a tuple (hashable, so a column of configs can be grouped)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = tuple(v) if isinstance(v, list) else v
    return out


def stable_hash(obj: Any, length: int = 16) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def not_identity(default: Any = None, **kw: Any) -> Any:
    """A field that does not change the result (e.g. how often to checkpoint); excluded from the hash."""
    return field(default=default, metadata={"identity": False}, **kw)


@dataclass(frozen=True)
class TrainConfig(Config):
    """How one member is optimised.

    steps: optimiser steps. batch_size: None = full batch. lr and weight_decay are per member and may be
    overridden by a sweep. train_eval_size: the train split is evaluated on its first N examples only (None = all;
    evaluating a large training set every epoch can cost as much as training on it). Weight decay is *decoupled*
    for AdamW (PyTorch convention: theta <- (1 - lr*wd) theta before the Adam step) and an L2 gradient term for SGD
    (g <- g + wd * theta).

    precision: the numeric precision of the training and evaluation forward passes (`nhtlib.engine.precision`):

    * "fp32": plain fp32. On CUDA TF32 is switched *off* for matmuls and cuDNN convolutions (PyTorch's cuDNN
      default allows it), so fp32 means IEEE fp32 on every device.
    * "tf32": fp32 storage, TF32 tensor-core matmuls and convolutions on CUDA (inputs rounded to 10 mantissa bits);
      identical to "fp32" on the CPU.
    * "bf16": forward passes (training step and evaluation) under bf16 autocast; weights, gradients and optimiser
      state stay fp32 (autocast casts only inside ops) and the loss is computed in fp32.

    Extra metrics (`extra_metrics(model, data)` of `nhtlib.engine.train.train`) are always evaluated in plain fp32.
    The global TF32 flags are restored when training returns. compile: wrap the training forward in
    `torch.compile` (evaluation stays eager); it changes results only by float rounding (fused kernels), so it is
    not part of the cache key.
    """

    optimizer: str = "adamw"
    lr: float = 1e-3
    weight_decay: float = 0.0
    steps: int = 1000
    batch_size: int | None = None
    sampling: str = "with_replacement"
    lr_schedule: str = "constant"
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    momentum: float = 0.0
    decay: str = "all"
    log_grid: str = "linear"
    n_logs: int = 50
    train_eval_size: int | None = None
    # precision changes the numbers (bf16 keeps 8 significant bits, TF32 11), so it is part of the cache key
    precision: str = "fp32"
    # compile changes only float rounding and speed, not the experiment: excluded from the cache key
    compile: bool = not_identity(default=False)
    checkpoint_every: int = not_identity(default=0)
    eval_batch_size: int = not_identity(default=4096)

    def validate(self) -> None:
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)
        check_range("weight_decay", self.weight_decay, 0.0, None)
        check_range("steps", self.steps, 1, None, integer=True)
        if self.batch_size is not None:
            check_range("batch_size", self.batch_size, 1, None, integer=True)
        check_choice("sampling", self.sampling, SAMPLINGS)
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if len(self.betas) != 2:
            raise ConfigError(f"betas={self.betas!r} must be a pair")
        for i, b in enumerate(self.betas):
            check_range(f"betas[{i}]", float(b), 0.0, 1.0, high_inclusive=False)
        check_range("eps", self.eps, 0.0, None, low_inclusive=False)
        check_range("momentum", self.momentum, 0.0, 1.0, high_inclusive=False)
        check_choice("decay", self.decay, DECAY_GROUPS)
        check_choice("log_grid", self.log_grid, LOG_GRIDS)
        check_range("n_logs", self.n_logs, 1, None, integer=True)
        if self.train_eval_size is not None:
            check_range("train_eval_size", self.train_eval_size, 1, None, integer=True)
        check_range("checkpoint_every", self.checkpoint_every, 0, None, integer=True)
        check_range("eval_batch_size", self.eval_batch_size, 1, None, integer=True)
        check_choice("precision", self.precision, PRECISIONS)
        if not isinstance(self.compile, bool):
            raise ConfigError(f"compile={self.compile!r} must be True or False")

    def log_steps(self) -> list[int]:
        """The steps at which metrics are logged: always 0 and the last step."""
        import numpy as np

        if self.log_grid == "linear":
            grid = np.linspace(0, self.steps, self.n_logs + 1)
        else:
            grid = np.concatenate([[0], np.geomspace(1, self.steps, self.n_logs)])
        return sorted({int(round(s)) for s in grid} | {0, self.steps})


def resolve_scale(scale: str | None = None) -> str:
    """The chapter scale: the given value, else env NHT_SCALE, else 'cpu'. Raises ConfigError when unknown."""
    value = scale if scale is not None else os.environ.get("NHT_SCALE", "cpu")
    check_choice("scale", value, SCALES)
    return value


DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:(0|[1-9][0-9]*))?")  # the only device strings accepted
DEVICE_CHOICES = "'auto', 'cpu', 'cuda', 'cuda:N' (N = 0, 1, ...) or 'mps'"


def check_device(device: Any) -> str:
    """`device` if it is exactly one of auto, cpu, cuda, cuda:N (N a non-negative integer without sign or leading
    zeros), mps; ConfigError otherwise, with the value repr()'d (the message is plain text: a hostile value such
    as "cpu:<img src=x onerror=...>" is quoted, never passed on to a page as markup)."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ConfigError(f"device={device!r} is not allowed; choose one of {DEVICE_CHOICES}")
    return device


def resolve_device(device: str = "auto") -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'. Only the values `check_device` admits are accepted; an
    explicit device that this machine lacks ('cuda' without a GPU, 'cuda:3' on a one-GPU machine, 'mps' off Apple
    silicon) raises ConfigError naming it."""
    import torch

    check_device(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device={device!r} was asked for but no CUDA GPU is visible "
                              f"({cuda_unavailable_reason()}); use 'auto' or 'cpu'")
        index = device.partition(":")[2]
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                              f"(cuda:0 .. cuda:{torch.cuda.device_count() - 1})")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ConfigError(f"device={device!r} was asked for but Apple's MPS backend is not available on this machine "
                          f"(torch {torch.__version__}); use 'auto' or 'cpu'")
    return device


PAPER_ON_CPU_ENV = "NHT_PAPER_ON_CPU"  # "1" (with device="cpu"): train a paper-scale chapter on the CPU all the same
DETERMINISTIC_ENV = "NHT_DETERMINISTIC"  # "1": deterministic algorithms on CUDA (`nhtlib.engine.train.backend_flags`)
NVIDIA_DRIVER_FILE = "/proc/driver/nvidia/version"  # Linux: present while an NVIDIA kernel driver is loaded


def env_switch(name: str) -> bool:
    """An on/off environment variable: "1" on; unset, "" or "0" off; anything else a ConfigError naming it."""
    value = os.environ.get(name, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigError(f"{name}={value!r} is not allowed; set it to 1 (on) or 0 (off), or unset it")
    return value == "1"


def deterministic_mode() -> bool:
    """Whether $NHT_DETERMINISTIC=1 asks for deterministic algorithms (recorded with every run; not part of any
    result's identity: it changes float rounding on CUDA only, and speed)."""
    return env_switch(DETERMINISTIC_ENV)


def nvidia_driver_version() -> str | None:
    """The loaded NVIDIA kernel driver's version ("unknown" when its file does not say), None when none is loaded."""
    try:
        text = Path(NVIDIA_DRIVER_FILE).read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return found.group(1) if found else "unknown"


def cuda_unavailable_reason() -> str | None:
    """None when torch can use a CUDA device; else why not, in words: a CPU-only torch, a driver too old for the
    CUDA this torch was built for (torch's own "CUDA initialization" warning, caught, when it says so; else a
    driver that is loaded while torch finds no device), devices hidden by $CUDA_VISIBLE_DEVICES, or no driver."""
    import torch

    with warnings.catch_warnings(record=True) as caught:  # torch warns (once per process) why CUDA did not start
        warnings.simplefilter("always")
        if torch.cuda.is_available():
            return None
    if not torch.version.cuda:
        return f"this torch is a CPU-only build (torch {torch.__version__})"
    build = f"torch {torch.__version__} built for CUDA {torch.version.cuda}"
    said = " ".join(str(w.message).split(" Please")[0] for w in caught  # its first sentence: what went wrong
                    if "CUDA" in str(w.message) or "driver" in str(w.message))
    driver = nvidia_driver_version()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if "too old" in said:
        return f"the NVIDIA driver{f' {driver}' if driver else ''} is too old for this torch ({build}): {said}"
    if driver is not None and visible is not None:
        return f"no CUDA device visible (CUDA_VISIBLE_DEVICES={visible!r} hides driver {driver}'s devices; {build})"
    if driver is not None:
        return (f"the NVIDIA driver {driver} is loaded but torch finds no device: the driver is probably too old for "
                f"this torch ({build}){f'; torch said: {said}' if said else ''}")
    return f"no CUDA device visible (no NVIDIA driver is loaded; {build})"


def check_scale_device(scale: str, device: str = "auto") -> str:
    """The device a chapter at `scale` trains on (`resolve_device`), refusing to train scale="paper" on a CPU: hours
    of GPU work would take days there, so a machine without a usable CUDA device raises ConfigError naming why
    (`cuda_unavailable_reason`) unless asked explicitly, with device="cpu" and $NHT_PAPER_ON_CPU=1."""
    check_choice("scale", scale, SCALES)
    # asked before resolve_device: torch says why its CUDA did not start at the first call only
    reason = cuda_unavailable_reason() if scale == "paper" else None
    resolved = resolve_device(device)
    if scale != "paper" or resolved != "cpu" or (device == "cpu" and env_switch(PAPER_ON_CPU_ENV)):
        return resolved
    reason = reason or "device='cpu' was asked for"
    raise ConfigError(f"scale='paper' refuses to train on the CPU: {reason}. Run it on a machine with a usable CUDA "
                      f"GPU (device='auto' or 'cuda'); to train it on the CPU all the same, pass device='cpu' and set "
                      f"{PAPER_ON_CPU_ENV}=1")


@dataclass(frozen=True)
class ChapterParams(Config):
    """The parameters every chapter notebook takes (its papermill `parameters` cell)."""

    scale: str = "cpu"
    device: str = "auto"
    seed: int = 0
    data_root: str | None = None

    def validate(self) -> None:
        check_choice("scale", self.scale, SCALES)
        check_device(self.device)  # the format; whether this machine has that device is resolve_device's
        if self.scale == "paper":  # a paper-scale page refuses a machine without a usable GPU, before any cell runs
            check_scale_device(self.scale, self.device)
        check_range("seed", self.seed, 0, None, integer=True)
        if self.data_root is not None and not isinstance(self.data_root, str):
            raise ConfigError(f"data_root={self.data_root!r} must be a path string or None")

    @property
    def quiet(self) -> bool:
        """Progress bars stay quiet at smoke scale (tests and CI)."""
        return self.scale == "smoke"
