"""Diverged runs: a member whose loss or norm became non-finite, or whose loss blew up, is recorded as diverged,
never as a result.

Two rules, both applied by the training loop (`nhtlib.engine.train`), which stops such a member and writes the step
in its table's `diverged_step` column:

* non-finite: the training loss (at any step) or the squared norm (at a log step) is NaN or infinite;
* blow-up (`blew_up`): the logged training loss is finite but both above `BLOW_UP_FACTOR` x its running minimum
  and above its first logged value (worse than at initialisation). The ratio alone would flag healthy runs:
  grokking drives the training loss to ~1e-6 and then spikes it 1000x (slingshots) while learning fine; no run
  that learns ends up worse than where it started.

The sweep reads `diverged_step` to report and store the member as diverged, and every summary
(`nhtlib.analysis.regimes`) labels such a run DIVERGED and leaves its measured quantities NaN. It lives apart from
the regime rules so that the code a run executes (the sweep imports this) does not hold them.
"""
from __future__ import annotations

from typing import Sequence

DIVERGED = "diverged"  # the label of a diverged run in every summary (never one of REGIMES)
# A finite blow-up: the loss rose this many times above its running minimum. 1e3 is far beyond the noise of a
# minibatch curve (a 10x spike is ordinary) and, with the first-loss condition, can only be met after the loss fell
# 1000-fold and then rose above its initial value.
BLOW_UP_FACTOR = 1e3
# logged points before the rule applies (the step-0 point and one more): the running minimum of a single point says
# nothing about the trend.
BLOW_UP_WARMUP_LOGS = 2


def blew_up(loss, running_min, first_loss, n_before: int):
    """Whether a logged training loss is a finite blow-up: above BLOW_UP_FACTOR x `running_min` (the minimum of the
    `n_before` losses logged before it) and above `first_loss` (the first of them), once n_before reaches
    BLOW_UP_WARMUP_LOGS. Elementwise: floats give a bool, (K,) tensors or arrays (one value per member) a (K,) bool
    mask; a NaN anywhere compares False (the non-finite rule handles NaN)."""
    exceeded = (loss > BLOW_UP_FACTOR * running_min) & (loss > first_loss)
    return exceeded if n_before >= BLOW_UP_WARMUP_LOGS else exceeded & False


def blow_up_index(losses: Sequence[float]) -> int | None:
    """The position in one run's logged training-loss series where it first blew up (`blew_up`), None if never."""
    running_min = float("inf")
    for i, loss in enumerate(losses):
        if i and bool(blew_up(loss, running_min, losses[0], i)):
            return i
        running_min = min(running_min, loss)
    return None


def diverged_step(run_table) -> float:
    """The step at which one run's table (rows of one member) diverged, NaN when it did not (or when the table
    predates divergence tracking and has no `diverged_step` column)."""
    if "diverged_step" not in run_table or not run_table["diverged_step"].notna().any():
        return float("nan")
    return float(run_table["diverged_step"].dropna().iloc[0])


def diverged_row(keys: dict, step: float) -> dict:
    """The summary row of a diverged run: its keys, regime DIVERGED and the step; every other column is NaN."""
    return {**keys, "regime": DIVERGED, "diverged_step": step}
