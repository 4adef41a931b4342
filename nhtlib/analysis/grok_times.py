"""Grokking metrics (NSDL's definitions, shared/papers/nht.md §1.4) computed from a training table of `nht.run`.

Per run:

* T_mem  — first logged step with train accuracy >= mem_threshold (0.99);
* T_grok — first logged step with test accuracy >= grok_threshold (0.99, a parameter);
* delay = T_grok − T_mem; V_mem = ‖θ‖² at T_mem; V_post = ‖θ‖² at the end of the run, or, with `post_window`, at
  the first logged step >= T_grok + post_window (NSDL stops its runs 2,000 steps after T_grok and takes V there);
* the post-memorisation contraction fit V_t = A·r^t + C on the logged steps from T_mem to that end
  (`nht.delay_law.fit_contraction`, NSDL's fit_exp_decay): rate r, γ = 1 − r, R²;
* with lr and weight decay known: c_fit = γ/(ηλ), the predicted escape log(V_mem/V_post)/γ (from the fit) and
  log(V_mem/V_post)/(2ηλ) (pure decoupled decay of ‖θ‖², the book's default rate), and NSDL's
  T̃ = delay·λ/log(V_mem/V_post).

Per λ (`classify_lambdas`, NSDL's three regimes): II = every seed groks; I = not every seed groks at a λ below the
regime-II range (memorises, no grokking within the budget); III = not every seed groks at a λ above it
(over-regularised: memorisation is delayed or suppressed). Without any regime-II λ, a λ whose seeds mostly never
memorise is III, otherwise I.

Coarser logging (`on_grid`): the rows of a table logged at multiples of a coarser step, e.g. NSDL's 200-step grid
read from a 100-step log, so that T_mem, T_grok, V_mem and the fit are read exactly as on that grid (a time then
rounds up to the next grid step at which its threshold holds).

Per-layer norms: the models name their parameter groups so that the table has `norm_sq:embedding` and
`norm_sq:head`; `add_hidden_norm` adds `norm_sq:hidden` = everything else (the MLP's hidden layer, or the
Transformer's attention + FFN + LayerNorms).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from nhtlib.analysis.delay_law import contraction_between, contraction_rate
from nhtlib.analysis.regimes import DIVERGED, diverged_step, summarise_runs, transition_step

GROUPS = ("embedding", "hidden", "head")


def add_hidden_norm(table: pd.DataFrame, norm: str = "norm_sq") -> pd.DataFrame:
    """A copy of `table` with `norm_sq:hidden` (sum of every per-layer column except embedding and head)."""
    out = table.copy()
    if f"{norm}:hidden" in out:
        return out
    cols = [c for c in out.columns if c.startswith(f"{norm}:") and c not in (f"{norm}:embedding", f"{norm}:head")]
    out[f"{norm}:hidden"] = out[cols].sum(axis=1) if cols else np.nan
    return out


def on_grid(table: pd.DataFrame, every: int, step: str = "step") -> pd.DataFrame:
    """The rows of `table` logged at multiples of `every` steps (step 0 included): the table a log every `every`
    steps would have given. Raises ValueError when `table` lacks one of those steps (its own log is not a refinement
    of that grid)."""
    if not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"every={every!r} must be a positive integer number of steps")
    steps = table[step].to_numpy()
    wanted = np.arange(0, steps.max() + 1, every)
    missing = np.setdiff1d(wanted, steps)
    if len(missing):
        raise ValueError(f"the table has no row at step(s) {missing[:5].tolist()}: its log is not a refinement of a "
                         f"{every}-step grid")
    return table[table[step] % every == 0].reset_index(drop=True)


def grokking_summary(table: pd.DataFrame, by: Sequence[str] = ("run",), *, mem_threshold: float = 0.99,
                     grok_threshold: float = 0.99, post_window: float | None = None, train: str = "train_acc",
                     test: str = "test_acc", norm: str = "norm_sq", lr: str = "lr", weight_decay: str = "weight_decay",
                     layers: Sequence[str] = ()) -> pd.DataFrame:
    """One row per run (grouped by `by`) with T_mem, T_grok, delay, V_mem, V_post, log_ratio, grokked,
    memorised, the contraction fit (r_fit, gamma_fit, fit_r2) and, when the table has lr and weight-decay columns,
    eta_lam, c_fit, T_pred_fit, T_pred_decay, T_tilde. `layers`: per-layer peak / decay / contraction columns as in
    `nht.regimes.summarise_runs` (e.g. GROUPS after `add_hidden_norm`)."""
    by = list(by)
    base = summarise_runs(table, by, norm=norm, learned=train, structured=test, structured_threshold=grok_threshold,
                          learned_threshold=mem_threshold, layers=layers)
    base = base.rename(columns={"T_fit": "T_mem", "T_struct": "T_grok", "V_fit": "V_mem", "regime": "norm_regime"})
    extra = []
    for key, g in table.sort_values("step").groupby(by, sort=True):
        row = {col: float(g[col].iloc[0]) for col in (lr, weight_decay) if col in g and col not in by}
        if lr in g and weight_decay in g:
            row["eta_lam"] = float(g[lr].iloc[0]) * float(g[weight_decay].iloc[0])
        if np.isfinite(diverged_step(g)):  # a diverged run: NaN quantities (its row in `base` says "diverged")
            extra.append(row)
            continue
        s, v = g["step"].to_numpy(float), g[norm].to_numpy(float)
        t_mem = transition_step(s, g[train], mem_threshold)
        t_grok = transition_step(s, g[test], grok_threshold)
        end = s[-1]
        if post_window is not None and np.isfinite(t_grok):
            after = s[s >= t_grok + post_window]
            end = after[0] if len(after) else s[-1]
        v_post = float(v[s == end][0])
        r, gamma, r2 = contraction_between(s, v, t_mem, end)
        extra.append({**row, "V_post": v_post, "T_end": end, "r_fit": r, "gamma_fit": gamma, "fit_r2": r2})
    extra = pd.DataFrame(extra)
    for col in ("V_post", "T_end", "r_fit", "gamma_fit", "fit_r2"):  # absent when every run diverged
        if col not in extra:
            extra[col] = np.nan
    out = pd.concat([base.reset_index(drop=True), extra], axis=1)
    out["diverged"] = out.diverged_step.notna()
    out["grokked"] = out.T_grok.notna()  # NaN for a diverged run, so never grokked nor memorised
    out["memorised"] = out.T_mem.notna()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["log_ratio"] = np.log(out.V_mem / out.V_post)
        out["T_pred_fit"] = out.log_ratio / out.gamma_fit
        if "eta_lam" in out:
            out["c_fit"] = out.gamma_fit / out.eta_lam
            out["T_pred_decay"] = out.log_ratio / contraction_rate(out.eta_lam, 1.0)
            out["T_tilde"] = out.delay * out[weight_decay] / out.log_ratio
    return out


def classify_lambdas(summary: pd.DataFrame, weight_decay: str = "weight_decay") -> pd.Series:
    """NSDL's regime (I, II or III) of every λ in a grokking summary (see the module docstring). Diverged seeds are
    left out (a diverged run is no evidence of any regime); a λ whose seeds all diverged is DIVERGED."""
    lams = summary[weight_decay].unique()
    if "diverged" in summary:
        summary = summary[~summary.diverged]
    by_lam = summary.groupby(weight_decay)
    all_grok = by_lam.grokked.all()
    most_memorise = by_lam.memorised.mean() >= 0.5
    ii = all_grok[all_grok].index
    regimes = {}
    for lam in all_grok.index:
        if all_grok[lam]:
            regimes[lam] = "II"
        elif len(ii):
            regimes[lam] = "I" if lam < ii.min() else ("III" if lam > ii.max() else "I/III (mixed)")
        else:
            regimes[lam] = "I" if most_memorise[lam] else "III"
    regimes.update({lam: DIVERGED for lam in lams if lam not in regimes})
    return pd.Series(regimes, name="regime").rename_axis(weight_decay).sort_index()


def _mean_sd(values: pd.Series) -> str:
    values = values.dropna()
    if not len(values):
        return "—"
    return f"{values.mean():,.0f} ± {values.std(ddof=0):,.0f}"  # population sd, as NSDL (np.std)


def regime_table(summary: pd.DataFrame, weight_decay: str = "weight_decay") -> pd.DataFrame:
    """The shape of NSDL's Table 3, one row per λ: regime, grokked k/n, T_grok (mean ± sd over grokked seeds),
    V_mem and V_post (means over grokked seeds, all seeds where none grokked), mean log(V_mem/V_post), T̃, and
    memorised k/n with the mean T_mem."""
    regimes = classify_lambdas(summary, weight_decay)
    rows = []
    for lam, g in summary.groupby(weight_decay):
        n_diverged = int(g.diverged.sum()) if "diverged" in g else 0
        diverged_note = f" (+{n_diverged} diverged)" if n_diverged else ""
        g = g[~g.diverged] if n_diverged else g
        use = g[g.grokked] if g.grokked.any() else g
        rows.append({
            "λ": lam, "regime": regimes[lam], "grokked": f"{int(g.grokked.sum())}/{len(g)}{diverged_note}",
            "T_grok": _mean_sd(g.T_grok), "V_mem": round(float(use.V_mem.mean()), 1) if use.V_mem.notna().any() else np.nan,
            "V_post": round(float(use.V_post.mean()), 1),
            "log(V_mem/V_post)": round(float(use.log_ratio.mean()), 2) if use.grokked.any() else np.nan,
            "T̃": _mean_sd(use.T_tilde) if "T_tilde" in use and use.grokked.any() else "—",
            "memorised": f"{int(g.memorised.sum())}/{len(g)}", "T_mem (mean)": g.T_mem.mean(),
        })
    return pd.DataFrame(rows).set_index("λ")
