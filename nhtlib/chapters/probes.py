"""What the NHT chapters' transition runs log besides the defaults: D_LR along the run.

Chapter 6 reads D_LR (chapter 5's metric, label-free and cheap) along the norm transitions of chapters 1–4, so their
main sweeps (the toy grid, the grokking stand-in's λ sweep, the borders λ sweep, both λ sweeps of chapter 4) log it
at every log step on a fixed probe of the first `PROBE_EXAMPLES` training examples
(`nhtlib.analysis.metrics.features.dlr_probe`: columns dlr and dlr_null). The probe is part of each run's cache key.
"""
from __future__ import annotations

from typing import Iterable

from nhtlib.analysis.metrics.features import dlr_probe
from nhtlib.engine.sweep import RunConfig, Sweep

PROBE_EXAMPLES = 256  # D_LR's sample: a 256 x p feature matrix costs one small forward pass per log step
PROBE_KEY = f"dlr_probe(n_probe={PROBE_EXAMPLES})"  # the probe's identity in the run-cache key


def with_dlr(name: str, configs: Iterable[RunConfig]) -> Sweep:
    """The sweep `name` of `configs` with D_LR logged along every run."""
    return Sweep(name, tuple(configs), extra_metrics=dlr_probe(PROBE_EXAMPLES), extra_metrics_key=PROBE_KEY,
                 probe_examples=PROBE_EXAMPLES)
