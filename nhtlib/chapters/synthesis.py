"""Chapter 6, reading the papers together: D_LR along every NHT transition, a transition forecaster, NHT Table 3.

Neither paper asks what D_LR (Nam et al.'s richness) does along the norm transitions NHT describes, nor turns NHT's
"early warning" into a forecast a reader can use. This chapter trains nothing of its own: it reads the runs of
chapters 1–4 (whose main sweeps log D_LR, `nhtlib.chapters.probes`) from the run cache and asks, per domain —

* **D_LR at the transition** (`dlr_at_transition`): with T the domain's transition step (the chapter's own
  definition, `DomainTrajectories.definition`) and h = `WINDOW` × T, D_LR's change across T, D(T + h) − D(T − h),
  against its change over the equal window before, D(T − h) − D(T − 3h); per seed the mean over the runs that
  transitioned (and were logged until T + h), summarised over seeds (the unit of replication); D2 (it falls)
  against the same steps in the seed's runs that never transitioned (D_LR falls through early training anyway);
* **a transition forecaster** (`nhtlib.analysis.forecast`): T predicted from the norm trajectory observed until a
  fixed fraction of the training budget, against the naive T = a/λ + b given the same information (T later than
  the observation point), leave-one-seed-out, on the runs not yet transitioned there;
* **NHT Table 3 and the S spectrum** (moved here from chapter 4): the paper's ticks beside the verdicts the chapters
  recorded, and the book's S_traj per domain.

The D_LR and forecaster claims are the book's own (source "book"), not the papers'.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from nhtlib.chapters.base import Chapter
from nhtlib.analysis import forecast, separation, statistics
from nhtlib.analysis.regimes import value_at, window_values
from nhtlib.engine import plan
from nhtlib.engine.sweep import Sweep
from nhtlib.report import predictions
from nhtlib.report.claims import Claim, not_tested
from nhtlib.config import ChapterParams, check_range
from nhtlib.analysis import vision
from nhtlib.report import verdicts
from nhtlib.report.verdicts import AllOf, AtLeast, AtMost, ClaimSpec, Estimate
from nhtlib.analysis.statistics import interval
from nhtlib.chapters import border_cifar as borders, celeba_waterbirds as cw, grokking, toy_norm_hierarchy as toy

NAME = "06_synthesis"
SUMMARY = " ".join(r"""
What only the two papers together can ask, on the runs of chapters 1–4: does $\mathcal{D}_{LR}$ move at the norm
transitions, and which way; a forecaster of the transition step from the first part of the norm trajectory
against $T=a/\lambda+b$; the separation score $S$ of every domain (the "S spectrum") and NHT's Table 3 beside
our verdicts (ours).
""".split())  # what the chapter reproduces: the book's introduction lists it (`nhtlib.cli.build`)
WINDOW = 0.25  # h = WINDOW × T: the windows [T − h, T + h] across and [T − 3h, T − h] before the transition
GRID = np.linspace(0.0, 2.0, 41)  # t / T at which the figure shows every transitioned run
# F1 reads the forecasts made at a quarter of the training budget: the same observation time for every run (a
# fraction of the realised T would hand the answer to the forecaster), chosen a priori as the table's first column
AT_BUDGET = 0.25
NO_PAPER = "— (neither paper asks this; the book's question)"


@dataclass
class DomainTrajectories:
    """One domain's runs as chapter 6 reads them.

    runs: one row per logged point (run, seed, lam, lr, step, norm_sq, dlr, dlr_null, reliance); summary: one row per
    run (run, seed, lam, lr, T in steps, NaN when the run never transitioned); definition: what T is, in words;
    reliance: what the reliance column measures."""

    key: str  # short id used in claim ids: toy, grok, borders, celeba, waterbirds
    name: str  # the domain as the S spectrum names it
    chapter: str
    runs: pd.DataFrame
    summary: pd.DataFrame
    definition: str
    reliance: str

    @property
    def transitioned(self) -> pd.DataFrame:
        return self.summary[np.isfinite(self.summary["T"].to_numpy(float))]


def _tidy(runs: pd.DataFrame, summary: pd.DataFrame, keys: list[str], t_column: str, reliance: str,
          t_scale: float = 1.0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Number the runs (`run`, by `keys`), keep the columns chapter 6 reads; T = summary[t_column] × t_scale."""
    ids = {key: i for i, key in enumerate(summary[keys].itertuples(index=False, name=None))}
    runs = runs.assign(run=[ids.get(k, -1) for k in runs[keys].itertuples(index=False, name=None)])
    runs = runs[runs.run >= 0]
    lam = "lam" if "lam" in runs else "weight_decay"  # chapter 2's run table keeps weight_decay; its summary has lam
    table = pd.DataFrame({"run": runs.run, "seed": runs.seed, "lam": runs[lam], "lr": runs.lr, "step": runs.step,
                          "norm_sq": runs.norm_sq, "dlr": runs.get("dlr", np.nan),
                          "dlr_null": runs.get("dlr_null", np.nan), "reliance": runs[reliance]})
    per_run = pd.DataFrame({"run": list(ids.values()), "seed": summary.seed.to_numpy(),
                            "lam": summary.lam.to_numpy(float), "T": summary[t_column].to_numpy(float) * t_scale})
    per_run["lr"] = per_run.run.map(runs.groupby("run").lr.first())
    return table.sort_values(["run", "step"]).reset_index(drop=True), per_run


# What this chapter reads of chapters 1–4, per domain key: (the chapter's module, the name of its sweep), in the
# order of the S spectrum; `load` and `sweeps` reach the other chapters only through these (`<module>.CHAPTER`).
_READ = {"toy": (toy, toy.GRID), "grok": (grokking, grokking.STAND_IN_SWEEP), "borders": (borders, borders.LAMBDA_SWEEP),
         "celeba": (cw, cw.CELEBA_SWEEP), "waterbirds": (cw, cw.WATERBIRDS_SWEEP)}


def _sweep(key: str, scale: str, data_root: str | None, first_seed: int) -> Sweep:
    """The sweep of domain `key` that `_READ` names, from its chapter's `Chapter` object."""
    module, name = _READ[key]
    return module.CHAPTER.sweep(name, scale, data_root, first_seed)


def _runs(key: str, scale: str, data_root: str | None, first_seed: int, **load_kw) -> pd.DataFrame:
    """The run table of that sweep (read from the cache; trained when missing)."""
    module, name = _READ[key]
    return module.CHAPTER.runs(name, scale, data_root=data_root, first_seed=first_seed, **load_kw)


def load(scale: str, data_root: str | None = None, *, first_seed: int = 0, device: str = "auto",
         progress: bool = True) -> dict[str, DomainTrajectories]:
    """Every domain's D_LR-logged runs (chapters 1–4's main sweeps, read from the cache; trained when missing), in
    the order of the S spectrum."""
    load_kw = dict(device=device, progress=progress)
    read = dict(scale=scale, data_root=data_root, first_seed=first_seed)
    out: dict[str, DomainTrajectories] = {}
    # chapter 1: the toy grid; T = T_struct, the first step with structured test accuracy >= 0.9
    runs, summary = toy.analyse(_runs("toy", **read, **load_kw), toy.CHAPTER.preset(scale),
                                transition_threshold=0.9, fit_threshold=0.99)
    table, per_run = _tidy(runs, summary, ["alpha", "lam", "seed"], "T_struct", "memorisation")
    out["toy"] = DomainTrajectories("toy", "toy (XOR, ours)", toy.NAME, table, per_run,
                                    "T_struct: the first step with structured test accuracy ≥ 0.9", "memorisation")
    # chapter 2: the stand-in's λ sweep; T = T_grok, the first step with test accuracy >= 0.99
    runs, summary = grokking.summarise(_runs("grok", **read, **load_kw), mem_threshold=0.99, grok_threshold=0.99,
                                       post_window=None)
    table, per_run = _tidy(runs, summary, ["weight_decay", "seed"], "T_grok", "test_error")
    out["grok"] = DomainTrajectories("grok", "modular arithmetic", grokking.NAME, table, per_run,
                                     "T_grok: the first step with test accuracy ≥ 0.99", "test error")
    # chapter 3: the λ sweep at ρ = 0.95 (its data checked first, as chapter 3 does); T = the epoch of the head
    # norm's peak (counted where it then contracts)
    bp = borders.CHAPTER.preset(scale)
    plan.check_data([_sweep("borders", **read)], full=bp.full_data)
    runs = borders.epoch_table(_runs("borders", **read, **load_kw), bp)
    # the regime as chapter 3 classifies it (behaviour plus norm: `reliance`); T_head_peak, and so which runs count
    # as transitioned here (a finite T), does not depend on the regime
    summary = vision.summarise(runs, ["lam", "seed"], layers=borders.CONVS, reliance="shortcut_acc")
    table, per_run = _tidy(runs, summary, ["lam", "seed"], "T_head_peak", "shortcut_acc",
                           borders.steps_per_epoch(bp))
    out["borders"] = DomainTrajectories("borders", "CIFAR-10 borders", borders.NAME, table, per_run,
                                        "T_head_peak: the head norm's peak, where it then contracts",
                                        "shortcut accuracy")
    # chapter 4: both λ sweeps; T as in chapter 3. Its group metrics need the built data sets (`cw.domains`)
    params = ChapterParams(scale=scale, device=device, seed=first_seed, data_root=data_root)
    built = cw.domains(cw.CHAPTER.preset(scale), params)
    for key in ("celeba", "waterbirds"):
        dr = cw.domain_runs(built[key], _runs(key, scale, data_root, first_seed, **load_kw))
        table, per_run = _tidy(dr.runs, dr.summary, ["lam", "seed"], "T_head_peak", "test_spurious_reliance",
                               dr.steps_per_epoch)
        out[key] = DomainTrajectories(key, dr.domain.name, cw.NAME, table, per_run,
                                      "T_head_peak: the head norm's peak, where it then contracts",
                                      "spurious reliance")
    return out


def sweeps(scale: str, data_root: str | None = None, first_seed: int = 0) -> list[Sweep]:
    """The sweeps this chapter reads (the D_LR-logged main sweeps of chapters 1–4, `_READ`): what the book builder
    trains before the notebook runs and what the page's identity is made of."""
    return [_sweep(key, scale, data_root, first_seed) for key in _READ]


# ------------------------------------------------------------------------------------- D_LR at the transition

def dlr_at_transition(domain: DomainTrajectories, window: float = WINDOW) -> pd.DataFrame:
    """One row per transitioned run: seed, lam, T, D_LR at T − 3h, T − h, T + h (h = window × T, steps), the change
    across (D(T + h) − D(T − h)) and before (D(T − h) − D(T − 3h)), and moved = abs(across) − abs(before); the
    control: `control_across`, the mean change of D_LR over the same steps [T − h, T + h] in the seed's runs that
    never transitioned (NaN without such a run logged until T + h), and specific = across − control_across (D2's
    statistic: the fall that the transition adds to what early training does anyway). A run not logged until
    T + h (censored) has NaN changes."""
    check_range("window", window, 0.0, 1 / 3, low_inclusive=False)
    controls = _controls(domain)
    rows = []
    for run in domain.transitioned.itertuples():
        g = domain.runs[domain.runs.run == run.run]
        steps, d = g.step.to_numpy(float), g.dlr.to_numpy(float)
        h = window * run.T
        early, before, after = window_values(steps, d, run.T, h)
        across, prior = after - before, before - early
        control = _mean_change(controls.get(run.seed, []), run.T - h, run.T + h)
        rows.append({"run": run.run, "seed": run.seed, "lam": run.lam, "T": run.T, "D_early": early,
                     "D_before": before, "D_after": after, "across": across, "before": prior,
                     "moved": abs(across) - abs(prior), "control_across": control, "specific": across - control})
    return pd.DataFrame(rows, columns=DLR_COLUMNS)


DLR_COLUMNS = ["run", "seed", "lam", "T", "D_early", "D_before", "D_after", "across", "before", "moved",
               "control_across", "specific"]


def _controls(domain: DomainTrajectories) -> dict:
    """Per seed: the (steps, D_LR) arrays of its runs that never transitioned (T = NaN), D2's control arm."""
    never = domain.summary[~np.isfinite(domain.summary["T"].to_numpy(float))]
    out: dict = {}
    for run in never.itertuples():
        g = domain.runs[domain.runs.run == run.run]
        out.setdefault(run.seed, []).append((g.step.to_numpy(float), g.dlr.to_numpy(float)))
    return out


def _mean_change(curves: list, start: float, end: float) -> float:
    """The mean over `curves` ((steps, D_LR) pairs) of D(end) − D(start), steps; NaN when no curve covers both."""
    changes = [value_at(s, d, end) - value_at(s, d, start) for s, d in curves]
    changes = [c for c in changes if math.isfinite(c)]
    return float(np.mean(changes)) if changes else float("nan")


def _seed_estimate(rows: pd.DataFrame, value: str, bounds=(-1.0, 1.0)) -> Estimate:
    """Per seed the mean of `value` over its runs (NaN rows left out; a seed with none is no unit), summarised over
    seeds."""
    if rows.empty:
        return interval([])
    return interval([float(g[value].mean()) for _, g in rows.groupby("seed", sort=True) if g[value].notna().any()],
                    bounds=bounds)


def dlr_transition_table(domains: dict[str, DomainTrajectories], window: float = WINDOW) -> pd.DataFrame:
    """Table 6.1, per domain: the runs scored (transitioned and logged until T + h) of all, the median D_LR at T − h
    and at T + h, its change before and across T, the change across T minus that of the seed's non-transitioned
    runs over the same steps (per-seed means, 95 % interval over seeds) and the direction of the latter (D2)."""
    rows = []
    for d in domains.values():
        per_run = dlr_at_transition(d, window).dropna(subset=["across", "before"])
        across, before = (_seed_estimate(per_run, c) for c in ("across", "before"))
        specific = _seed_estimate(per_run, "specific", bounds=(-2.0, 2.0))
        rows.append({"domain": d.name,
                     "runs scored": f"{len(per_run)} of {len(d.summary)} ({per_run.seed.nunique()} seeds)",
                     "D_LR at T − h → T + h": (f"{per_run.D_before.median():.3f} → {per_run.D_after.median():.3f}"
                                               if len(per_run) else "—"),
                     "change before T": before.text(3), "change across T": across.text(3),
                     "across T minus non-transitioned runs": specific.text(3),
                     "direction": _direction(specific)})
    return pd.DataFrame(rows).set_index("domain")


def _direction(e: Estimate) -> str:
    if not e.decided:
        return "undecided"
    if e.high < 0:
        return "falls (richer)"
    if e.low > 0:
        return "rises (lazier)"
    return "no clear direction"


def aligned_curves(domain: DomainTrajectories, grid: np.ndarray = GRID) -> pd.DataFrame:
    """The figure's table: every transitioned run on the t / T grid (norm_sq / its peak, dlr, dlr_null,
    reliance), long format with columns run, u (= t / T), quantity, value."""
    rows = []
    for run in domain.transitioned.itertuples():
        g = domain.runs[domain.runs.run == run.run]
        steps = g.step.to_numpy(float)
        u = steps / run.T
        for quantity in ("norm_sq", "dlr", "dlr_null", "reliance"):
            values = g[quantity].to_numpy(float)
            if quantity == "norm_sq":
                values = values / np.nanmax(values)
            ok = np.isfinite(values)
            if ok.sum() < 2:
                continue
            inside = (grid >= u[ok][0]) & (grid <= u[ok][-1])
            rows += [{"run": run.run, "u": x, "quantity": quantity, "value": y}
                     for x, y in zip(grid[inside], np.interp(grid[inside], u[ok], values[ok]))]
    return pd.DataFrame(rows, columns=["run", "u", "quantity", "value"])


# ------------------------------------------------------------------------------------------------ forecaster

def trajectories(domain: DomainTrajectories) -> list[forecast.Trajectory]:
    """The forecaster's view of every run of the domain (its group is the seed: held out together)."""
    out = []
    for run in domain.summary.itertuples():
        g = domain.runs[domain.runs.run == run.run]
        g = g[np.isfinite(g.norm_sq.to_numpy(float))]
        steps = g.step.to_numpy(float)
        if len(steps) < 2 or not np.all(np.diff(steps) > 0) or not (run.lr > 0 and run.lam > 0):
            continue
        out.append(forecast.Trajectory(run.run, run.seed, steps, g.norm_sq.to_numpy(float), float(run.lr),
                                       float(run.lam), float(run.T)))
    return out


def budget(domain: DomainTrajectories) -> float:
    """The domain's training budget in steps: the last step logged in any of its runs (its sweep's length)."""
    return float(domain.runs.step.max()) if len(domain.runs) else float("nan")


def evaluate_forecasts(domains: dict[str, DomainTrajectories]) -> pd.DataFrame:
    """`nhtlib.analysis.forecast.evaluate_pending` per domain (leave-one-seed-out, at fixed fractions of the domain's
    `budget`), with a domain column; domains with fewer than two seeds that transitioned are left out."""
    frames = []
    for d in domains.values():
        trajs = trajectories(d)
        groups = {t.group for t in trajs if t.transitioned}
        if len(groups) >= 2:
            frames.append(forecast.evaluate_pending(trajs, budget(d)).assign(domain=d.name))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=[*forecast.PENDING_COLUMNS, "domain"])


def forecast_table(evaluation: pd.DataFrame, domains: dict[str, DomainTrajectories]) -> pd.DataFrame:
    """Table 6.2, per domain and method: at 25 / 50 / 75 % of the training budget, the share of the held-out runs
    still pending (finite T after that point) forecast within ±25 % of T, with the number of those runs."""
    rows = []
    for d in domains.values():
        e = evaluation[evaluation.domain == d.name] if len(evaluation) else evaluation
        for method in forecast.METHODS:
            m = e[e.method == method] if len(e) else e
            row = {"domain": d.name, "method": method}
            for f in forecast.SUMMARY_FRACTIONS:
                at = m[np.isclose(m.fraction.to_numpy(float), f)] if len(m) else m
                row[f"within at {f:.0%} of the budget"] = (f"{at.within.mean():.0%} of {len(at)}" if len(at)
                                                           else "no run pending")
            rows.append(row)
    return pd.DataFrame(rows).set_index(["domain", "method"])


def _at_fraction(evaluation: pd.DataFrame, domain: str, fraction: float) -> pd.DataFrame:
    if not len(evaluation):
        return evaluation
    return evaluation[(evaluation.domain == domain) & np.isclose(evaluation.fraction.to_numpy(float), fraction)]


def _share_gain(evaluation: pd.DataFrame, domain: str, fraction: float = AT_BUDGET) -> Estimate:
    """Per held-out seed: the share of its runs still pending at `fraction` of the budget that are forecast within
    ±25 %, forecaster minus baseline; summarised over seeds (a seed with no run pending is no unit)."""
    e = _at_fraction(evaluation, domain, fraction)
    if not len(e):
        return interval([])
    wide = e.pivot_table(index=["group", "run"], columns="method", values="within", aggfunc="mean")
    if not set(forecast.METHODS) <= set(wide.columns):
        return interval([])
    gain = (wide[forecast.FORECASTER] - wide[forecast.BASELINE]).groupby(level="group").mean()
    return interval(gain.tolist(), bounds=(-1.0, 1.0))


def forecast_blind(evaluation: pd.DataFrame, domain: str, fraction: float = AT_BUDGET) -> str | None:
    """Why F1 cannot be tested on `domain` at `fraction` of the budget, or None: no held-out run still pending
    there, or the logging grid gives every pending run fewer than `forecast.MIN_OBSERVED_POINTS` points by then
    (the forecaster cannot see a peak and a contraction by construction, whatever the runs do)."""
    e = _at_fraction(evaluation, domain, fraction)
    if not len(e):
        return (f"no held-out run is still pending (T after the observation point) at {fraction:.0%} of the budget: "
                "every transition comes earlier; a longer-delayed transition (smaller λ, larger scale) would test it")
    seen = int(e.n_observed.max())
    if seen < forecast.MIN_OBSERVED_POINTS:
        return (f"at {fraction:.0%} of the budget the pending runs have {seen} logged point(s) after step 0 and the "
                f"forecaster needs {forecast.MIN_OBSERVED_POINTS} (a peak and {forecast.MIN_POST_PEAK_POINTS} after "
                "it): denser logging or a longer run (the paper scale) would test it")
    return None


# -------------------------------------------------------------------- the S spectrum and NHT Table 3 (from ch. 4)

# NHT Table 3's "confirmed" column as printed [paper, Table 3] (Waterbirds' text says 1/4, P1 only)
PAPER_CONFIRMED = {"modular arithmetic": "6/6", "CIFAR-10 borders": "5/6", cw.CELEBA: "4/6", cw.WATERBIRDS: "2/6"}
S1_ORDER = (("modular arithmetic > CIFAR-10 borders", "modular arithmetic", "CIFAR-10 borders"),
            ("CIFAR-10 borders > CelebA", "CIFAR-10 borders", cw.CELEBA),
            ("CIFAR-10 borders > Waterbirds", "CIFAR-10 borders", cw.WATERBIRDS))
S_UNVERIFIED = ("Unverified: NHT's S has no formula (the papers' notes, NHT §1.5); the book's S_traj is ours, so "
                "values near the paper's are agreement of shape, not of a defined number")


def spectrum_domains(waterbirds: str = cw.STANDIN) -> dict[str, str]:
    """The S spectrum's domains in the order of the paper's S (toy first, ours), each with its chapter; waterbirds:
    the name chapter 4's Waterbirds runs go by (the real data or the CUB stand-in, `DomainTrajectories.name`)."""
    return {"toy (XOR, ours)": toy.NAME, "modular arithmetic": grokking.NAME,
            "CIFAR-10 borders": borders.NAME, cw.CELEBA: cw.NAME, waterbirds: cw.NAME}


def spectrum_table(scores: pd.DataFrame, waterbirds: str = cw.STANDIN) -> pd.DataFrame:
    """Table 6.3: one row per domain of the book (`separation.spectrum` over its pooled runs; 0 runs where its
    chapter has not been run at this scale), beside the paper's value. scores: `nht.separation.load(scale)`; a
    domain recorded by an earlier run with other data (e.g. the other Waterbirds source) is left out."""
    order = spectrum_domains(waterbirds)
    kept = scores[scores.domain.isin(order)]
    columns = ["runs", "seeds", "λ pooled", "S (mean)", "sd", "sem", "min", "max", "signal φ"]
    spec = separation.spectrum(kept).set_index("domain") if len(kept) else pd.DataFrame(columns=columns)
    spec = spec.reindex(index=list(order), columns=columns)
    spec[["runs", "seeds"]] = spec[["runs", "seeds"]].fillna(0).astype(int)
    spec[["signal φ", "λ pooled"]] = spec[["signal φ", "λ pooled"]].fillna("").replace("", "—")
    spec.insert(0, "chapter", list(order.values()))
    spec["paper S"] = [separation.paper_value(d)[1] for d in order]
    return spec.rename_axis("domain")


def spectrum_points(scores: pd.DataFrame, waterbirds: str = cw.STANDIN) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 6.3's tables: (every pooled run's S_traj per domain; the paper's value per domain with its range:
    columns domain, value, low, high — the CIFAR-10 range 0.5–0.7 [paper, Table 3])."""
    order = spectrum_domains(waterbirds)
    points = scores[scores.domain.isin(order) & scores.pooled.astype(bool)][["domain", "S"]].dropna()
    paper = []
    for domain in order:
        value, text = separation.paper_value(domain)
        if math.isfinite(value):
            low, high = (0.5, 0.7) if "–" in text else (value, value)
            paper.append({"domain": domain, "value": value, "low": low, "high": high})
    return points, pd.DataFrame(paper, columns=["domain", "value", "low", "high"])


def table3(recorded: pd.DataFrame, spectrum: pd.DataFrame, waterbirds: str = cw.STANDIN) -> pd.DataFrame:
    """Table 6.4: NHT Table 3 as a query of the claims the chapters recorded (`recorded`: `nht.claims.load_claims`
    at this scale; `predictions.table3` reads each cell from the claim whose `cell` names it): per domain the
    paper's mark and whether our verdict agrees with it for P1–P6, the counts of agreeing / disagreeing /
    undecided cells, the paper's ✓ count, and the paper's S beside ours (`spectrum`: `spectrum_table`). The
    Waterbirds row is named after the data actually run (`waterbirds`)."""
    out = predictions.table3(recorded)
    out["paper confirmed"] = [PAPER_CONFIRMED.get(d, "—") for d in out.index]
    names = {cw.WATERBIRDS: waterbirds}
    ours = spectrum["S (mean)"].reindex([names.get(d, d) for d in out.index]).to_numpy(float)
    out["paper S"] = [separation.paper_value(d)[1] for d in out.index]
    out["our S"] = [f"{v:.2f}" if math.isfinite(v) else "—" for v in ours]
    return out.rename(index=names)


def _seed_means(scores: pd.DataFrame, domain: str) -> pd.Series:
    """Per seed: the mean S_traj over the domain's pooled runs with a finite S (indexed by seed)."""
    rows = scores[(scores.domain == domain) & scores.pooled.astype(bool) & scores.S.notna()]
    return rows.groupby("seed").S.mean()


def spectrum_order(scores: pd.DataFrame, waterbirds: str = cw.STANDIN) -> tuple[dict[str, Estimate] | None, str]:
    """S1's parts: for each step of the paper's order the difference of the two domains' means of per-seed mean
    S_traj, with a Welch interval (`welch_difference`: seeds are not paired across chapters, seed i of one chapter
    has nothing in common with seed i of another); None (and what is missing) without pooled runs in one of them."""
    if scores.empty:
        return None, "no separation scores recorded at this scale (the chapters 1–4 record them)"
    names = {cw.WATERBIRDS: waterbirds}
    needed = ["modular arithmetic", "CIFAR-10 borders", cw.CELEBA, cw.WATERBIRDS]
    missing = [d for d in needed if not len(_seed_means(scores, names.get(d, d)))]
    if missing:
        return None, "no pooled run with an S_traj at this scale for " + ", ".join(missing)
    parts = {}
    for name, a, b in S1_ORDER:
        parts[name] = statistics.welch_difference(_seed_means(scores, names.get(a, a)).tolist(),
                                       _seed_means(scores, names.get(b, b)).tolist(), bounds=(-2.0, 2.0))
    return parts, (f"Waterbirds is {names[cw.WATERBIRDS]}; unpaired: the difference of the domains' means over "
                   "their own seeds, Welch interval, n = the smaller domain's seeds; a descriptive comparison: "
                   "S_traj reads a different shortcut signal φ in every domain (memorisation, test error, shortcut "
                   "accuracy, spurious reliance), so a gap is not like-for-like")


# ------------------------------------------------------------------------------------------------------ claims

DOMAIN_NAMES = {"toy": "the toy (chapter 1)", "grok": "modular arithmetic (chapter 2's stand-in)",
                "borders": "CIFAR-10 borders (chapter 3)", "celeba": "CelebA (chapter 4)",
                "waterbirds": "Waterbirds (chapter 4)"}


@dataclass(frozen=True)
class SynthesisAnalysis:
    """What chapter 6's claims are judged on (`analyse`): the domains, the forecasts' evaluation, the recorded S
    scores, the window of §6.2, and per domain key the runs scored at the transition."""

    domains: dict[str, DomainTrajectories]  # `load`
    evaluation: pd.DataFrame  # `evaluate_forecasts`
    scores: pd.DataFrame  # `nht.separation.load(scale)`
    window: float = WINDOW
    scored: dict[str, pd.DataFrame] = field(default_factory=dict)  # `dlr_at_transition` rows with both changes

    @property
    def waterbirds(self) -> str:
        """The name chapter 4's Waterbirds runs go by (the real data or the CUB stand-in)."""
        return self.domains["waterbirds"].name if "waterbirds" in self.domains else cw.STANDIN


def analyse(domains: dict[str, DomainTrajectories], scores: pd.DataFrame, window: float = WINDOW
            ) -> SynthesisAnalysis:
    """The chapter's analysis: the leave-one-seed-out forecasts of every domain (§6.3) and, per domain, the runs
    that transitioned and were logged until T + h (§6.2); scores: every chapter's S_traj at this scale (§6.4)."""
    scored = {key: dlr_at_transition(d, window).dropna(subset=["across", "before"]) for key, d in domains.items()}
    return SynthesisAnalysis(domains, evaluate_forecasts(domains), scores, window, scored)


def _dlr_estimate(value: str, key: str, a: SynthesisAnalysis) -> Estimate | None:
    """D1 (value "moved") and D2 ("specific"): per seed the mean over its scored runs; None when none was scored
    (or, for D2, when no scored run has a control: no seed has a non-transitioned run logged over its window)."""
    rows = a.scored.get(key)
    if rows is None or rows.empty or not rows[value].notna().any():
        return None
    return _seed_estimate(rows, value, bounds=(-2.0, 2.0) if value == "specific" else (-1.0, 1.0))


def _dlr_note(key: str, a: SynthesisAnalysis) -> str:
    d = a.domains.get(key)
    if d is None:
        return "no run transitioned at this scale"
    return (f"T is {d.definition}; h = {a.window:g} T; {len(a.scored[key])} of {len(d.summary)} runs transitioned "
            "and were logged until T + h")


def _d2_note(key: str, a: SynthesisAnalysis) -> str:
    d, rows = a.domains.get(key), a.scored.get(key)
    if d is None or rows is None:
        return _dlr_note(key, a)
    never = len(d.summary) - len(d.transitioned)
    return (f"{_dlr_note(key, a)}; control: D_LR's change over the same steps [T − h, T + h] in the seed's runs that "
            f"never transitioned ({never} runs; {int(rows.control_across.notna().sum())} of {len(rows)} scored runs "
            "have one), since D_LR falls through early training in every run")


def _dlr_ours(key: str, a: SynthesisAnalysis) -> str | None:
    return "no run transitioned (and was logged until T + h)" if _dlr_estimate("across", key, a) is None else None


def _d2_ours(key: str, a: SynthesisAnalysis) -> str | None:
    if _dlr_estimate("across", key, a) is None:
        return _dlr_ours(key, a)
    if _dlr_estimate("specific", key, a) is None:
        return ("no seed has a run that never transitioned logged over the scored runs' windows: the control arm "
                "(a λ that does not transition, in every seed) is missing")
    return None


def _forecast_blind(key: str, a: SynthesisAnalysis) -> str | None:
    """Why F1 is not testable on domain `key` (fewer than two seeds with a transition, `forecast_blind`), or None."""
    d = a.domains.get(key)
    if d is None or d.transitioned.seed.nunique() < 2:
        return "fewer than two seeds with a transition (leave-one-seed-out needs two)"
    return forecast_blind(a.evaluation, d.name)


def _forecast_gain(key: str, a: SynthesisAnalysis) -> Estimate | None:
    """F1: `_share_gain` of the domain at `AT_BUDGET`; None where `_forecast_blind` says why it is not testable."""
    if _forecast_blind(key, a) is not None:
        return None
    gain = _share_gain(a.evaluation, a.domains[key].name)
    return None if gain.n == 0 else gain


def _forecast_note(key: str, a: SynthesisAnalysis) -> str:
    d = a.domains.get(key)
    where = f" ({budget(d):,.0f} steps)" if d is not None and len(d.runs) else ""
    return (f"leave-one-seed-out at {AT_BUDGET:.0%} of the training budget{where}, on the held-out runs not yet "
            "transitioned there; both methods fitted on the other seeds' runs pending at that point and raised to "
            "at least it; a missing forecast (no norm peak and contraction seen yet) counts as a miss")


def _forecast_ours(key: str, a: SynthesisAnalysis) -> str | None:
    return _forecast_blind(key, a)


def _s1_note(a: SynthesisAnalysis) -> str:
    return "; ".join(filter(None, [spectrum_order(a.scores, a.waterbirds)[1], S_UNVERIFIED]))


def _s1_ours(a: SynthesisAnalysis) -> str | None:
    parts, note = spectrum_order(a.scores, a.waterbirds)
    return note if parts is None else None


def _claims() -> tuple[Claim, ...]:
    """Every claim of the chapter, in its order: per domain D1 (D_LR moves at T), D2 (it falls), F1 (the
    forecaster beats the baseline at a quarter of the budget), then S1 (the S spectrum's order)."""
    out = []
    for key, where in DOMAIN_NAMES.items():
        out.append(Claim(ClaimSpec(
            f"D1-{key}", f"D_LR moves at the norm transition on {where}: its change across T exceeds its change "
                         "over an equal window before", NO_PAPER, "book",
            AtLeast("the per-seed mean over transitioned runs of |ΔD_LR across T| − |ΔD_LR before|", 0.0)),
            partial(_dlr_estimate, "moved", key), note=partial(_dlr_note, key), ours=partial(_dlr_ours, key),
            where="§6.2, Fig. 6.1, Table 6.1",
            test="its change across $T$ exceeds its change over an equal window before"))
        out.append(Claim(ClaimSpec(
            f"D2-{key}", f"D_LR falls across the norm transition on {where} (the features get richer), more than "
                         "over the same steps in runs that do not transition", NO_PAPER, "book",
            AtMost("the per-seed mean of ΔD_LR across T, D(T + h) − D(T − h), minus the mean ΔD_LR over the same "
                   "steps in the seed's non-transitioned runs", 0.0)),
            partial(_dlr_estimate, "specific", key), note=partial(_d2_note, key), ours=partial(_d2_ours, key),
            where="§6.2", test="the change across $T$ is below that of non-transitioned runs (richer features)"))
        out.append(Claim(ClaimSpec(
            f"F1-{key}", f"At {AT_BUDGET:.0%} of the training budget, the norm forecaster is within ±25 % of T on "
                         f"more of the held-out runs of {where} not yet transitioned than the 1/λ baseline given "
                         "the same information (T > the observation point)", NO_PAPER, "book",
            AtLeast(f"the per-seed share of pending runs within ±25 % at {AT_BUDGET:.0%} of the budget, forecaster "
                    "minus baseline", 0.0)),
            partial(_forecast_gain, key), note=partial(_forecast_note, key), ours=partial(_forecast_ours, key),
            where="§6.3, Fig. 6.2, Table 6.2",
            test=(rf"share of held-out pending runs within ±25 % of $T$ at {AT_BUDGET:.0%} of the budget, against "
                  r"$T=a/\lambda+b$ fitted on runs with $T>t$")))
    out.append(Claim(ClaimSpec(
        "S1", "The S spectrum orders the domains: modular arithmetic > CIFAR-10 borders > CelebA, Waterbirds",
        "S ≈ 1.0 > 0.5–0.7 > −0.11, ≈ 0.0 [paper, Table 3 and §5.9; no formula given]", "NHT",
        AllOf(tuple((name, AtLeast(f"the mean over seeds of per-seed mean S_traj of {a} minus that of {b} "
                                   "(unpaired, Welch)", 0.0))
                    for name, a, b in S1_ORDER))),
        lambda a: spectrum_order(a.scores, a.waterbirds)[0], note=_s1_note, ours=_s1_ours,
        where="§6.4, Fig. 6.3, Table 6.3", test=r"the gaps of mean $S_{\rm traj}$ between domains (unpaired seeds)"))
    out.append(not_tested(
        "EM", "Emergent abilities as delayed norm-hierarchy transitions: above a critical model size N* the delay "
        "drops below the training budget (four predictions, §6)",
        "'a theoretical conjecture generating testable predictions; empirical verification at scale is left to "
        "future work' [paper, §6]; suggested scale 70M–1B parameters [paper]", "NHT",
        "a conjecture the paper runs no experiment for; testing it needs a model-size sweep (70M–1B parameters) "
        "with V_sc(N)/V_st(N) and the transition time per size", kind=verdicts.NO_EVIDENCE, where="§6.4"))
    return tuple(out)


# ----------------------------------------------------------------------------------------------------- figures

QUANTITIES = (("norm_sq", "‖θ‖² / its peak"), ("dlr", "D_LR"), ("reliance", "shortcut reliance"))


def transition_figure(domains: dict[str, DomainTrajectories], width: float = 7.6):
    """Fig. 6.1: per domain (rows) the norm, D_LR (with its null value, dashed) and the shortcut reliance
    (columns) of every transitioned run against t / T: the median over runs and its interquartile band; T at 1."""
    import matplotlib.pyplot as plt

    shown = [d for d in domains.values() if len(d.transitioned)]
    fig, axes = plt.subplots(max(1, len(shown)), 3, figsize=(width, 1.75 * max(1, len(shown)) + 0.6),
                             sharex=True, squeeze=False, constrained_layout=True)
    for i, (row, d) in enumerate(zip(axes, shown)):
        curves = aligned_curves(d)
        for ax, (quantity, label) in zip(row, QUANTITIES):
            c = curves[curves.quantity == quantity].groupby("u").value
            if len(c.size()):
                q = c.quantile([0.25, 0.5, 0.75]).unstack()
                ax.fill_between(q.index, q[0.25], q[0.75], alpha=0.25, color="C0", linewidth=0)
                ax.plot(q.index, q[0.5], color="C0", linewidth=1.6)
            if quantity == "dlr":
                null = curves[curves.quantity == "dlr_null"].value.median()
                if math.isfinite(null):
                    ax.axhline(null, color="grey", linestyle="--", linewidth=1.0)
            ax.axvline(1.0, color="C3", linewidth=0.9, alpha=0.7)
            ax.tick_params(labelsize=8)
            if i == 0:
                ax.set_title(label, fontsize=9.5)
        n = len(d.transitioned)
        row[0].set_ylabel(f"{d.name}\n({n} run{'s' if n != 1 else ''})", fontsize=8.5)
    for ax in axes[-1]:
        ax.set_xlabel("t / T", fontsize=9)
    return fig


MARKERS = ("o", "s", "^", "D", "v", "P")  # one marker shape per domain in Fig. 6.2 (the colour repeats it)
# Fig. 6.2 draws every line this far (share units) above or below the previous one: many shares are exactly 0 or 1,
# and lines that coincide there would hide one another; the caption says so
LINE_OFFSET = 0.01


def forecast_figure(evaluation: pd.DataFrame, width: float = 7.6):
    """Fig. 6.2: per domain the share of held-out runs still pending forecast within ±25 % of T against the
    fraction of the training budget observed, the forecaster (solid, filled markers) and the 1/λ baseline (dashed,
    hollow markers); one colour and marker shape per domain, each line offset by `LINE_OFFSET` from the previous
    one so that coinciding lines (at 0, at 1) stay visible."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    names = list(dict.fromkeys(evaluation.domain)) if len(evaluation) else []
    fig, ax = plt.subplots(figsize=(width, 3.4), constrained_layout=True)
    n_lines = len(names) * len(forecast.METHODS)
    handles = []
    for i, name in enumerate(names):
        e = evaluation[evaluation.domain == name]
        color, marker = f"C{i}", MARKERS[i % len(MARKERS)]
        for j, (method, style) in enumerate(zip(forecast.METHODS, ("-", "--"))):
            share = e[e.method == method].groupby("fraction").within.mean()
            offset = LINE_OFFSET * (i * len(forecast.METHODS) + j - (n_lines - 1) / 2)
            ax.plot(share.index, share.to_numpy() + offset, style, color=color, marker=marker,
                    markersize=4.5 if j == 0 else 6, markerfacecolor=color if j == 0 else "white",
                    markeredgewidth=1.0, linewidth=1.4)
        handles.append(Line2D([], [], color=color, marker=marker, markersize=4.5, label=name))
    handles += [Line2D([], [], color="grey", linestyle=style, marker="o", markersize=4.5 if j == 0 else 6,
                       markerfacecolor="grey" if j == 0 else "white", label=label)
                for j, (style, label) in enumerate((("-", "forecaster"), ("--", "1/λ baseline")))]
    ax.set_xlabel("fraction of the training budget observed")
    ax.set_ylabel("share of pending runs within ±25 %")
    ax.set_ylim(-0.03 - LINE_OFFSET * n_lines / 2, 1.03 + LINE_OFFSET * n_lines / 2)
    if names:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


# ------------------------------------------------------------------------------------------------------ chapter

CHAPTER = Chapter(NAME, "6. Reading the papers together", __name__, summary=SUMMARY, presets={}, sweeps_of=sweeps,
                  claims=_claims(), reads=(toy.NAME, grokking.NAME, borders.NAME, cw.NAME))
