"""Analysis: pure functions on logged tables and features — they never train, plot or judge.

Table analyses: `regimes` (peaks, decay, transition steps, the three regimes), `divergence` (diverged runs),
`delay_law` (the delay law's fits), `separation` (S_traj), `forecast` (the transition forecaster), `vision`,
`grok_times`, `groups` and `generalisation` (per-domain summaries), `statistics` (intervals over seeds, Spearman,
paired differences: the one statistics module). Model-side metrics (norms, D_LR, features, eigenspectra) live in
`metrics`."""
from nhtlib.paths import lazy_attributes

__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{name}" for name in (
    "regimes", "divergence", "delay_law", "separation", "forecast", "statistics", "vision", "grok_times", "groups",
    "generalisation", "metrics")})
