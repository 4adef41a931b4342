"""Chapter 1 (ours): a toy norm-hierarchy model — sparse parity (XOR of 2 of 40 sign bits) learnt by a 2-layer
ReLU MLP whose output layer starts `alpha` times larger than PyTorch's default, trained by AdamW with decoupled
weight decay. The lazy (shortcut) interpolant is reached first; decay drags the network to the XOR rule.

What the notebook uses: `PRESETS` (one `ToyPreset` per scale), `configs` (the grid; `sweeps` names it for the
planner), `analyse` (the run table -> one summary row per run, with the delay-law and separation columns),
`CHAPTER.claims` (each `Claim` reads that summary: `CHAPTER.judge(summary)` gives every claims row, in the order of
the chapter's sections, and `nhtlib.report.claims.overview_markdown` the opening table), the tables, and
`narrative_numbers` (the measured numbers the chapter's prose quotes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from nhtlib.chapters.base import Chapter
from nhtlib.analysis import delay_law, regimes, separation
from nhtlib.report import predictions, tables
from nhtlib.config import PRECISIONS, Config, ConfigError, TrainConfig, check_choice, check_range
from nhtlib.data.sparse_parity import SparseParityTask
from nhtlib.analysis.generalisation import memorisation_score
from nhtlib.models import config as model_config
from nhtlib.engine.sweep import RunConfig, Sweep, grid
from nhtlib.chapters.probes import with_dlr
from nhtlib.report.claims import Claim
from nhtlib.report.verdicts import AllOf, AtLeast, ClaimSpec, Estimate, Within
from nhtlib.analysis.statistics import interval

NAME = "01_toy_norm_hierarchy"
GRID = "toy grid"  # the chapter's one sweep (seeds × λ × α), by name: chapter 6 reads it
SUMMARY = " ".join(r"""
A small model of our own (a lazy, memorising shortcut against a low-norm XOR rule) in which the three regimes,
the delay law $T \approx \gamma_{eff}^{-1}\log(V_{sc}/V_{st})$ and the output-layer-first ordering can be tested
directly (NHT).
""".split())  # what the chapter reproduces: the book's introduction lists it (`nhtlib.cli.build`)
DOMAIN = "toy (XOR, ours)"
HEAD, BODY = "layers.output", "layers.input"  # the layers P4 compares


@dataclass(frozen=True)
class ToyPreset(Config):
    """What one scale of chapter 1 runs."""

    steps: int  # AdamW steps: long enough for the slowest intermediate λ to transition (predicted delay < budget)
    n_logs: int  # logged points; T is measured on this grid (steps / n_logs steps apart)
    seeds: int  # seeds per (λ, α) cell; a verdict needs >= 3
    weight_decays: tuple[float, ...]  # the λ grid: weak (censored by the budget) through strong (nothing learned)
    output_scales: tuple[float, ...]  # α: the shortcut's strength, V_sc / V_st grows as α²
    lr: float = 1e-3  # AdamW η, fixed: the law's rate is η·λ, so λ alone sweeps it
    n_bits: int = 40  # input dimension; the 38 irrelevant bits give the lookup table room to interpolate
    n_train: int = 300  # few training points: a lazy interpolant exists and is reached within ~100 steps
    n_test: int = 1000  # fresh points: the rule scores ~1, the lookup table ~0.5
    hidden: int = 64  # hidden units; 4 suffice for the XOR rule
    precision: str = "fp32"  # TrainConfig.precision; fp32 at every scale: a 64-unit MLP is launch-bound on a GPU

    def validate(self) -> None:
        check_range("steps", self.steps, 1, None, integer=True)
        check_range("n_logs", self.n_logs, 1, self.steps, integer=True)
        check_range("seeds", self.seeds, 1, None, integer=True)
        for name in ("weight_decays", "output_scales"):
            values = getattr(self, name)
            if not values or any(v <= 0 for v in values) or list(values) != sorted(set(values)):
                raise ConfigError(f"{name}={values!r} must be positive, distinct and increasing")
        check_range("lr", self.lr, 0.0, None, low_inclusive=False)
        check_choice("precision", self.precision, PRECISIONS)


PRESETS = {
    "smoke": ToyPreset(steps=1200, n_logs=24, seeds=1, weight_decays=(0.01, 3.0, 10.0, 30.0),
                       output_scales=(30.0, 100.0, 300.0)),
    "cpu": ToyPreset(steps=8000, n_logs=160, seeds=3, weight_decays=(0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
                     output_scales=(30.0, 100.0, 300.0)),
    "paper": ToyPreset(steps=30000, n_logs=300, seeds=10,
                       weight_decays=(0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0),
                       output_scales=(30.0, 100.0, 300.0, 1000.0)),
}


def configs(preset: ToyPreset, first_seed: int = 0) -> list[RunConfig]:
    """Every member of the grid: seeds x λ x α."""
    base = RunConfig(
        task=SparseParityTask(n_bits=preset.n_bits, relevant_bits=2, n_train=preset.n_train, n_test=preset.n_test),
        model=model_config("mlp", hidden=(preset.hidden,), activation="relu"),
        train=TrainConfig(optimizer="adamw", lr=preset.lr, steps=preset.steps, n_logs=preset.n_logs,
                          precision=preset.precision))
    return grid(base, seeds=range(first_seed, first_seed + preset.seeds), weight_decays=preset.weight_decays,
                output_init_scale=preset.output_scales)


def sweeps(preset: ToyPreset, data_root: str | None = None, first_seed: int = 0) -> list[Sweep]:
    """The chapter's one sweep (what the compute planner plans; data_root is unused: the data are generated)."""
    return [with_dlr(GRID, configs(preset, first_seed))]


def run(preset: ToyPreset, *, first_seed: int = 0, device: str = "auto", progress: bool = True) -> pd.DataFrame:
    """Train (or read back from the cache) the toy grid, with D_LR logged along every run for chapter 6."""
    return sweeps(preset, first_seed=first_seed)[0].run(device=device, progress=progress)


def analyse(runs: pd.DataFrame, preset: ToyPreset, *, transition_threshold: float,
            fit_threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs with alpha / lam / memorisation columns, one summary row per run).

    Summary columns: those of `nht.regimes.summarise_runs` (T_fit, T_struct, delay, V_fit, V_final, regime, per-layer
    peak / decay / contraction) plus T_pred = log(V_fit / V_final) / (2ηλ) (steps), c_fit = γ/(ηλ) of ‖θ‖² during
    the escape (T_fit to T_struct), S (S_traj with φ = the memorisation score) and pooled (the runs S is read on)."""
    if not 0.5 < transition_threshold <= 1 or not 0.5 < fit_threshold <= 1:
        raise ConfigError(f"transition_threshold={transition_threshold!r} and fit_threshold={fit_threshold!r} "
                          "must lie in (0.5, 1]")
    runs = runs.rename(columns={"output_init_scale": "alpha", "weight_decay": "lam"})
    runs["memorisation"] = memorisation_score(runs.train_acc, runs.test_acc, chance=0.5)
    keys = ["alpha", "lam", "seed"]
    summary = regimes.summarise_runs(runs, by=keys, structured_threshold=transition_threshold,
                                     learned_threshold=fit_threshold, layers=[BODY, HEAD],
                                     rule=regimes.RegimeRule(structured_min=transition_threshold))
    usable = summary.V_fit.notna() & (summary.V_fit > 0) & (summary.V_final > 0)
    summary["T_pred"] = np.nan
    summary.loc[usable, "T_pred"] = delay_law.predicted_delay(summary.V_fit[usable], summary.V_final[usable],
                                                              preset.lr, summary.lam[usable])
    summary["c_fit"] = [escape_factor(runs, row, preset.lr) for row in summary.itertuples()]
    indexed = summary.set_index(keys)
    summary["S"] = separation.per_run(runs, keys, "memorisation").reindex(indexed.index).to_numpy()
    summary["pooled"] = separation.pooled(summary.regime, summary.decay_pct).to_numpy()
    return runs, summary


def escape_factor(runs: pd.DataFrame, row, lr: float) -> float:
    """c = γ_fit / (ηλ) of one intermediate run: the contraction rate of ‖θ‖² fitted from T_fit to T_struct, in units
    of ηλ (2 for pure decoupled decay); NaN outside the intermediate regime or with fewer than 4 points."""
    if row.regime != "intermediate":
        return float("nan")
    g = runs[(runs.alpha == row.alpha) & (runs.lam == row.lam) & (runs.seed == row.seed)]
    return delay_law.contraction_between(g.step, g.norm_sq, row.T_fit, row.T_struct)[1] / (lr * row.lam)


def middle_alpha(summary: pd.DataFrame) -> float:
    """The middle output scale: the figures' and the per-α claims' view."""
    alphas = sorted(summary.alpha.unique())
    return alphas[len(alphas) // 2]


# ------------------------------------------------------------------------------------------------------ claims
# Every claim reads the summary `analyse` returns (its second item): `CHAPTER.judge(summary)`.

def _per_seed_line(summary: pd.DataFrame, x: str, y: str) -> tuple[list[float], list[float]]:
    """Per seed: (slopes, R²s) of the least-squares line y ~ x over that seed's rows with finite x and y (>= 3;
    NaN otherwise), one fit each."""
    slopes, r2s = [], []
    for _, g in summary.groupby("seed"):
        g = g[np.isfinite(g[x]) & np.isfinite(g[y])]
        fit = delay_law.fit_linear(g[x], g[y], n_boot=0) if len(g) >= 3 and np.ptp(g[x]) > 0 else None
        slopes.append(fit.slope if fit else float("nan"))
        r2s.append(fit.r2 if fit else float("nan"))
    return slopes, r2s


def _at_middle(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary.alpha == middle_alpha(summary)]


def _intermediate(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary.regime == "intermediate"]


def delay_law_fit(summary: pd.DataFrame) -> dict[str, Estimate]:
    """T2: the per-seed R² and slope of the measured delay against T_pred over the intermediate runs."""
    slopes, r2s = _per_seed_line(_intermediate(summary), "T_pred", "delay")
    return {"R²": interval(r2s, bounds=(-np.inf, 1.0)), "slope": interval(slopes)}


def contraction_factor(summary: pd.DataFrame) -> Estimate:
    """C1: per seed, the median c = γ/(ηλ) of its intermediate runs (c_fit is NaN outside them)."""
    return interval([g.c_fit.median() for _, g in summary.groupby("seed")])


def output_layer_first(summary: pd.DataFrame) -> Estimate:
    """P4: per seed, the share of its intermediate runs whose output layer peaks no later and contracts more."""
    return predictions.head_first_share(summary, head_peak=f"peak_step:{HEAD}", body_peak=f"peak_step:{BODY}",
                                        head_decay=f"decay_pct:{HEAD}", body_decay=f"decay_pct:{BODY}",
                                        runs=summary.regime == "intermediate")


DELAY_LAW = ClaimSpec(
    "T2", "Delay law (NHT eq. 1): the measured delay T_struct − T_fit grows as log(V_sc/V_st)/(2ηλ) across λ and α",
    "Θ(·) with the constant unspecified [paper]; R² = 0.971 for T = a/λ + b on modular arithmetic [companion]",
    "book", AllOf((("R²", AtLeast("the per-seed R² of measured against predicted delay", 0.9)),
                   ("slope", Within("the per-seed slope of measured against predicted delay", 0.5, 2.0)))))
CONTRACTION = ClaimSpec(
    "C1", "The squared norm contracts during the escape at c·ηλ with NSDL's c under AdamW",
    "c = γ/(ηλ) = 1.41 measured on modular arithmetic [companion]; 2 for pure decoupled decay [ours]", "book",
    Within("the per-seed median c = γ/(ηλ) of the intermediate runs", 1.2, 1.7))


def narrative_numbers(summary: pd.DataFrame) -> dict[str, float]:
    """Measured numbers the chapter's prose quotes (medians over intermediate runs)."""
    inter = _intermediate(summary)
    return {"n_intermediate": float(len(inter)), "c_median": float(inter.c_fit.median()),
            "V_st_median": float(inter.V_final.median()), "V_sc_median": float(inter.V_fit.median())}


def regime_table(summary: pd.DataFrame):
    """Table 1.1 (for people, `nhtlib.report.tables.for_people`): one row per (α, λ) with the majority regime, seeds per
    regime, and means over seeds of the decay from the peak, the final norm and test accuracy, and T_struct as
    mean ± sd over the seeds that reached the transition threshold (— where none did)."""
    by_cell = summary.groupby(["alpha", "lam"])
    t = by_cell.T_struct
    out = pd.DataFrame({
        "regime": by_cell.regime.agg(regimes.majority_regime),
        "seeds": by_cell.regime.agg(regimes.regime_counts),
        "decay_pct": by_cell.decay_pct.mean(),
        "V_final": by_cell.V_final.mean(),
        "final_test_acc": by_cell.final_test_acc.mean(),
        "T_struct": [tables.mean_sd(m, sd, ",.0f") for m, sd in zip(t.mean(), t.std())],
    })
    return tables.for_people(out, {"seeds": "w/i/s", "decay_pct": "decay %", "final_test_acc": "test acc",
                                   "T_struct": "T_struct"},
                             {"decay_pct": ".1f", "V_final": ",.1f", "final_test_acc": ".3f"})


def layer_table(summary: pd.DataFrame, columns: Sequence[str] = ("peak_step", "decay_pct", "contraction_step")):
    """Table 1.2 (for people): per (α, λ) of the intermediate runs and per layer (output, then input), the layer's
    peak step, decay % from its peak and contraction step T_tr (means over seeds)."""
    inter = summary[summary.regime == "intermediate"]
    rows = []
    for (alpha, lam), g in inter.groupby(["alpha", "lam"]):
        for layer in (HEAD, BODY):
            rows.append({"alpha": alpha, "lam": lam, "layer": layer.split(".")[-1],
                         **{q: g[f"{q}:{layer}"].mean() for q in columns}})
    out = pd.DataFrame(rows, columns=["alpha", "lam", "layer", *columns]).set_index(["alpha", "lam", "layer"])
    return tables.for_people(out, formats={"peak_step": ",.0f", "decay_pct": ".1f", "contraction_step": ",.0f"})


# ------------------------------------------------------------------------------------------------------ chapter

CHAPTER = Chapter(
    NAME, "1. A toy norm-hierarchy model", __name__, summary=SUMMARY, presets=PRESETS, sweeps_of=sweeps,
    claims=(  # in the order of the chapter's sections; each reads the summary `analyse` returns
        Claim(predictions.spec("P1", DOMAIN), lambda summary: predictions.grid_spearman(summary, "V_final"),
              where="§1.3", test="Spearman ρ(λ, final ‖θ‖²)"),
        Claim(predictions.spec("P2", DOMAIN), lambda summary: predictions.regime_order(_at_middle(summary)),
              where="§1.3, {ref}`Fig. 1.1 <fig-1-1>`–{ref}`1.2 <fig-1-2>`, Table 1.1",
              test="all three occur, in order of λ"),
        Claim(DELAY_LAW, delay_law_fit, where="§1.4, {ref}`Fig. 1.3a <fig-1-3>`",
              test="R² and slope of measured vs predicted delay"),
        Claim(predictions.spec("P6", DOMAIN),
              lambda summary: predictions.inverse_lambda_r2(_intermediate(_at_middle(summary)), "T_struct"),
              where="§1.4, {ref}`Fig. 1.3b <fig-1-3>`", test=r"R² of $T=a/\lambda+b$"),
        Claim(CONTRACTION, contraction_factor, where="§1.4", test="median fitted $c$"),
        Claim(predictions.spec("P4", DOMAIN), output_layer_first, where="§1.5, {ref}`Fig. 1.4 <fig-1-4>`",
              test="share of intermediate runs with the output layer first"),
        Claim(predictions.spec("P5", DOMAIN), predictions.separation_estimate, where="§1.5",
              test=r"$S_{\rm traj}$ of the intermediate runs"),
    ))
