"""Diverged runs: a member whose loss or norm became non-finite is recorded as diverged, never as a result.

The training loop writes a `diverged_step` column; the sweep reads it to report and store the member as diverged, and
every summary (`nhtlib.analysis.regimes`) labels such a run DIVERGED and leaves its measured quantities NaN. It lives
apart from the regime rules so that the code a run executes (the sweep imports this) does not hold them.
"""
from __future__ import annotations

DIVERGED = "diverged"  # the label of a diverged run in every summary (never one of REGIMES)


def diverged_step(run_table) -> float:
    """The step at which one run's table (rows of one member) diverged, NaN when it did not (or when the table
    predates divergence tracking and has no `diverged_step` column)."""
    if "diverged_step" not in run_table or not run_table["diverged_step"].notna().any():
        return float("nan")
    return float(run_table["diverged_step"].dropna().iloc[0])


def diverged_row(keys: dict, step: float) -> dict:
    """The summary row of a diverged run: its keys, regime DIVERGED and the step; every other column is NaN."""
    return {**keys, "regime": DIVERGED, "diverged_step": step}
