"""Numeric precision of a training step: "fp32", "tf32" or "bf16" (`TrainConfig.precision`).

* TF32 is a pair of *global* PyTorch switches (CUDA matmuls, cuDNN convolutions). `tf32_flags` sets both for the
  code inside it and restores them on exit, also when that code raises, so nothing leaks to other code. "fp32"
  switches TF32 *off* (PyTorch's cuDNN default allows it); on the CPU the switches have no effect.
* bf16 is autocast: `forward_autocast` runs the matmuls and convolutions inside it in bfloat16; parameters,
  gradients and optimiser state stay fp32 (autocast casts copies inside ops). It wraps forward passes only:
  PyTorch advises running backward() outside autocast (backward ops then run in the dtype their forward used).

`precision_context` is both at once, for a forward pass. The training loop holds `tf32_flags` for the whole run
(forward, backward, evaluation) and enters `forward_autocast` around each training forward.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

from nhtlib.config import PRECISIONS, check_choice

# PyTorch >= 2.9 also keeps per-op precision strings ("ieee", "tf32", "none"); the legacy switches write them, but
# restoring the switches alone would lose a value a user set through the new API, so those are saved as well
_PER_OP_SETTINGS = (("cuda", "matmul"), ("cudnn", "conv"), ("cudnn", "rnn"))


def _per_op_objects() -> list:
    """The `torch.backends` objects holding a per-op `fp32_precision` string (empty on PyTorch < 2.9)."""
    objects = [getattr(getattr(torch.backends, backend), op, None) for backend, op in _PER_OP_SETTINGS]
    return [o for o in objects if o is not None and hasattr(o, "fp32_precision")]


def _read_switch(read):
    """A legacy switch, or None when PyTorch refuses to read it (cuDNN conv and RNN set apart via the new API)."""
    try:
        return read()
    except RuntimeError:
        return None


def _saved_tf32_state() -> tuple:
    return (_read_switch(lambda: torch.backends.cuda.matmul.allow_tf32),
            _read_switch(lambda: torch.backends.cudnn.allow_tf32),
            [o.fp32_precision for o in _per_op_objects()])


def _set_tf32_switches(matmul: bool | None, cudnn: bool | None) -> None:
    if matmul is not None:
        torch.backends.cuda.matmul.allow_tf32 = matmul
    if cudnn is not None:
        torch.backends.cudnn.allow_tf32 = cudnn


@contextlib.contextmanager
def tf32_flags(enabled: bool) -> Iterator[None]:
    """TF32 for CUDA matmuls and cuDNN convolutions on (True) or off (False) inside; the previous flags after."""
    matmul, cudnn, per_op = _saved_tf32_state()
    _set_tf32_switches(enabled, enabled)
    try:
        yield
    finally:
        _set_tf32_switches(matmul, cudnn)
        for obj, value in zip(_per_op_objects(), per_op):
            obj.fp32_precision = value


def forward_autocast(precision: str, device_type: str) -> torch.autocast:
    """bf16 autocast on `device_type` ("cpu", "cuda") when precision is "bf16", else a *disabled* autocast (which
    also switches off an enclosing one, so an "fp32" forward nested in a "bf16" one is plain fp32)."""
    check_choice("precision", precision, PRECISIONS)
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16")


@contextlib.contextmanager
def precision_context(precision: str, device_type: str) -> Iterator[None]:
    """Run the forward passes inside at `precision` (one of PRECISIONS): its TF32 flags and its autocast."""
    with tf32_flags(precision == "tf32"), forward_autocast(precision, device_type):
        yield
