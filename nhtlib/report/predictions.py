"""NHT's six predictions P1–P6, declared once: one definition, one statistic and one threshold each (nht.md §2,
§1.5), used by chapters 1–4 under the same ids; and NHT Table 3 (nht.md §3.6) as data, so the book's Table 3 is a
query over the claims, not a hand-kept map.

Every statistic is computed **per seed** (the unit of replication) from a chapter's run summary — one row per run
with a seed column, the weight decay, and the analysed quantities — then summarised with its 95 % interval by
`nhtlib.report.statistics.interval`. The paper's cell decides the direction of the test:

* ✓ (the paper claims the prediction holds): the prediction itself is tested (e.g. P5: S_traj ≥ 0.5);
* × where the paper measured a failure (CIFAR-10 P6: "T ∝ 1/λ does not hold", CelebA / Waterbirds P5: S ≤ 0,
  Waterbirds P3: "no λ improves the worst group", P4: "no layer hierarchy"): the failure is tested one-sided, in the
  paper's direction (P6: R² below 0.9; P5: S_traj below 0.2; P3: the largest worst-group gain over the smallest λ
  below 3 points; P4: the head-first share at most one half), and *reproduced* only with a positive control showing
  the same measurement could have seen the effect (the models learned; S_traj is defined; the layers contract);
* × or ✓ without any evidence in the paper (CelebA / Waterbirds P6 "not tested"; modular arithmetic P3, where no
  groups exist): *not testable here (the paper gives no evidence)*.

The statistics per seed and their thresholds:

* P1: Spearman ρ(λ, final ‖θ‖²) over the λ grid; CI below −0.8 (strictly decreasing is −1; −0.8 allows about two
  swapped neighbours on a 7-point grid).
* P2: all three regimes occur (1/0); they appear in the order weak → intermediate → strong as λ grows (1/0, read
  only on seeds where all three occur — with fewer the order says nothing — and a λ whose runs disagree counts
  against it); the CI of each share above 0.5.
* P3: Spearman ρ(λ, bias-conflicting metric) (P3a, as the paper scores it: monotone, falling for CIFAR-10 and
  CelebA); CI below −0.5.
* P4: the share of intermediate runs whose head peaks no later and contracts more than the first layer, runs as the
  unit (a clustered Wilson interval); CI above 0.5.
* P5: the mean S_traj over the seed's pooled runs (`separation.pooled`); CI above 0.5 (✓, the paper's tick) or
  below 0.2 (×: the paper prints S = −0.11 and ≈ 0; 0.2 leaves room for the estimator's noise on a flat φ).
* P6: R² of T = a/λ + b over the λ's with a measured transition (at least 3); CI above 0.9 (✓) or below 0.9 (×,
  with the control that the fitted runs learned: accuracy ≥ chance + 10 points).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nhtlib.analysis.delay_law import fit_inverse_lambda
from nhtlib.analysis.regimes import REGIMES
from nhtlib.report import verdicts
from nhtlib.report.verdicts import AllOf, AtLeast, AtMost, ClaimSpec, Estimate, NotTested, PositiveControl, Rule
from nhtlib.analysis.statistics import interval, per_seed, run_share, spearman

PREDICTIONS = {  # NHT Table 3 caption, verbatim names
    "P1": "norm ordering", "P2": "three regimes", "P3": "WG-acc ordering", "P4": "layer hierarchy",
    "P5": "clean norm separation", "P6": "delay scaling"}
DOMAINS = ("modular arithmetic", "CIFAR-10 borders", "CelebA", "Waterbirds")

# NHT Table 3 [paper] (nht.md §3.6): the paper's mark per (domain, prediction), as printed; the cells it marks
# without any evidence (NO_EVIDENCE below, nht.md §3.6 audit) are not testable here.
TABLE3 = {
    "modular arithmetic": {"P1": "✓", "P2": "✓", "P3": "✓", "P4": "✓", "P5": "✓", "P6": "✓"},
    "CIFAR-10 borders": {"P1": "✓", "P2": "✓", "P3": "✓", "P4": "✓", "P5": "✓", "P6": "×"},
    "CelebA": {"P1": "✓", "P2": "✓", "P3": "✓", "P4": "✓", "P5": "×", "P6": "×"},
    "Waterbirds": {"P1": "✓", "P2": "✓", "P3": "×", "P4": "×", "P5": "×", "P6": "×"},
}
# The book's own domains, where NHT's theory is expected to apply in full (source "book", not the paper's claim);
# "—": no such measurement in the construction
BOOK_DOMAINS = {
    "toy (XOR, ours)": {"P1": "✓", "P2": "✓", "P3": "—", "P4": "✓", "P5": "✓", "P6": "✓"},
}
CELLS = {**TABLE3, **BOOK_DOMAINS}
NO_EVIDENCE = {  # why a cell is not testable: a mark without evidence in the paper, or "—" in ours (nht.md §3.6)
    ("toy (XOR, ours)", "P3"): "the toy has no groups (its shortcut is memorisation, measured in P5)",
    ("modular arithmetic", "P3"): "NHT ticks P3 for modular arithmetic, which has no groups to order",
    ("CelebA", "P6"): "NHT's × for CelebA P6 means 'not tested'",
    ("Waterbirds", "P6"): "NHT's × for Waterbirds P6 means 'not tested'",
}
PAPER_VALUES = {  # what the paper prints for each prediction on each domain, with its source tag (nht.md §2, §3.3–3.6)
    "modular arithmetic": {
        "P1": "✓ [paper, Table 3], resting on NSDL's Table 3, where V_post falls with λ except at λ = 2 (602 > 266 at "
              "λ = 1; Spearman −0.93) [companion]",
        "P2": "I at λ ≤ 0.01, II at 0.1 ≤ λ ≤ 1, III at λ ≥ 2 (NSDL Table 3) [companion]",
        "P3": "✓ [paper, Table 3]; no groups, no measurement [paper-ed]",
        "P4": "✓ [paper, Table 3] without any per-layer measurement on this domain: NSDL's norms are totals [paper-ed]",
        "P5": "S ≈ 1.0 [paper, Table 3]; no formula (nht.md §1.5)",
        "P6": "T_grok = 1182/λ + 884, R² = 0.971 over 40 regime-II runs [companion]",
    },
    "CIFAR-10 borders": {
        "P1": "final ‖θ‖² strictly decreasing in λ over 7 values [paper, Fig. 1]",
        "P2": "weak 0.001–0.01, intermediate 0.05–0.3, strong 0.5–1.0 [paper]",
        "P3": "clean accuracy 69 → 26 % as λ grows (a monotone fall, scored ✓) [paper]",
        "P4": "head −45 % from its peak vs conv1 −31 % [paper]",
        "P5": "S = 0.5–0.7 [paper, Table 3]; no formula (nht.md §1.5)",
        "P6": "× : T ∝ 1/λ fails, r = −0.43 [paper]",
    },
    "CelebA": {
        "P1": "final ‖θ‖² 20,198 ≫ 2,971 ≫ 546 at λ = 0.001 / 0.1 / 1 [paper]",
        "P2": "✓ [paper]: monotone growth at 0.001, a plateau near 3,000 at 0.1, suppressed at 1 [paper]",
        "P3": "worst-group accuracy 89.1 > 88.0 > 87.0 % (a monotone fall, scored ✓) [paper]",
        "P4": "fc / conv1 norm ratio 0.65× → 2.21× → 2.33× [paper]",
        "P5": "× : S = −0.11 [paper, Table 3]",
        "P6": "× meaning 'not tested' [paper]",
    },
    "Waterbirds": {
        "P1": "✓ [paper]; no numbers printed",
        "P2": "✓ [paper, Table 3] although no intermediate regime was seen: weak for λ ≤ 0.1, decay 6.7 % at 0.3 and "
              "56.3 % at 1.0 [paper]",
        "P3": "× : no λ improves the worst group [paper]; no accuracy printed",
        "P4": "× : no layer hierarchy [paper]",
        "P5": "× : S ≈ 0.0 [paper, Table 3]",
        "P6": "× meaning 'not tested' [paper]",
    },
    "toy (XOR, ours)": {
        "P1": "the paper has no toy; the theory predicts the final norm to fall with λ [ours]",
        "P2": "three regimes in λ (NHT Thm 3.5) [paper]; here by construction [ours]",
        "P3": "no groups in the toy [ours]",
        "P4": "the output layer escapes first (NHT Prop. 4.2) [paper]",
        "P5": "clean separation by construction (NHT Def. 4.1) [ours]",
        "P6": "T ∝ 1/λ (NHT eq. 1 at fixed V_sc/V_st) [paper]; R² = 0.971 on modular arithmetic [companion]",
    },
}

P1_MAX_RHO = -0.8
P2_MIN_SHARE = 0.5
P3_MAX_RHO = -0.5
P4_MIN_SHARE = 0.5
P5_MIN_S = 0.5  # the paper ticks S ≥ 0.5 and crosses S ≤ 0 (nht.md §2); "clean" per §1.5 needs ≥ 0.8 and sharpness
P5_FAIL_MAX_S = 0.2  # ×: S = −0.11 / ≈ 0 printed; below 0.2 = no separation beyond a flat φ's noise (one-sided)
P3_FAIL_MAX_GAIN = 0.03  # ×: "no λ improves the worst group": the largest gain over the smallest λ below 3 points
P4_FAIL_MAX_SHARE = 0.5  # ×: "no layer hierarchy": the head is first in at most half of the decaying runs
CONTROL_MIN_DEFINED = 0.5  # P5 ×: S_traj defined (a contraction phase with a moving φ) in at least half the runs
CONTROL_MIN_LAYER_DECAY_PCT = 5.0  # P4 ×: the layers contract measurably, so an order between them could be read
P6_MIN_R2 = 0.9
CONTROL_MIN_ACC_ABOVE_CHANCE = 0.10  # a null claim needs a model that learned: accuracy ≥ chance + 10 points
CORRELATION, SHARE = (-1.0, 1.0), (0.0, 1.0)  # the ranges intervals of these statistics are clipped to
RUNS_UNIT = "runs as the unit, clustered by seed"  # how a share of runs is counted (`head_first_share`)


def rule(pid: str, domain: str) -> Rule:
    """The one rule of prediction `pid` for the paper's cell in `domain` (see the module docstring)."""
    cell = CELLS[domain][pid]
    if (domain, pid) in NO_EVIDENCE:
        kind = verdicts.NO_EVIDENCE if domain in TABLE3 else verdicts.NOT_IN_CONSTRUCTION
        return NotTested(NO_EVIDENCE[(domain, pid)], kind)
    holds = cell == "✓"
    if pid == "P1":
        return AtMost("the per-seed Spearman ρ(λ, final ‖θ‖²)", P1_MAX_RHO)
    if pid == "P2":
        return AllOf((("all three occur", AtLeast("the share of seeds with weak, intermediate and strong λ's",
                                                  P2_MIN_SHARE)),
                      ("in order", AtLeast("the share of seeds with all three regimes whose regimes follow weak → "
                                           "intermediate → strong in λ (a λ whose runs disagree breaks the order)",
                                           P2_MIN_SHARE))))
    if pid == "P3":
        if holds:
            return AtMost("the per-seed Spearman ρ(λ, bias-conflicting accuracy)", P3_MAX_RHO)
        return AtMost("the per-seed largest worst-group accuracy gain of any λ over the smallest λ", P3_FAIL_MAX_GAIN,
                      control=PositiveControl("the per-seed mean accuracy minus chance", CONTROL_MIN_ACC_ABOVE_CHANCE))
    if pid == "P4":
        if holds:
            return AtLeast(f"the share of intermediate runs with the head first (peaks no later, contracts more; "
                           f"{RUNS_UNIT})", P4_MIN_SHARE)
        return AtMost(f"the share of decaying runs with the head first (peaks no later, contracts more; {RUNS_UNIT})",
                      P4_FAIL_MAX_SHARE,
                      control=PositiveControl("the per-seed mean of the runs' largest layer decay (%)",
                                              CONTROL_MIN_LAYER_DECAY_PCT))
    if pid == "P5":
        quantity = "the per-seed mean S_traj over the pooled runs"
        if holds:
            return AtLeast(quantity, P5_MIN_S)
        return AtMost(quantity, P5_FAIL_MAX_S,
                      control=PositiveControl("the per-seed share of pooled runs with a defined S_traj",
                                              CONTROL_MIN_DEFINED))
    if pid == "P6":
        quantity = "the per-seed R² of T = a/λ + b"
        if holds:
            return AtLeast(quantity, P6_MIN_R2)
        return AtMost(quantity, P6_MIN_R2,
                      control=PositiveControl("the per-seed mean accuracy minus chance of the fitted runs",
                                              CONTROL_MIN_ACC_ABOVE_CHANCE))
    raise KeyError(f"unknown prediction {pid!r}; NHT's are {', '.join(PREDICTIONS)}")


def spec(pid: str, domain: str, prefix: str = "") -> ClaimSpec:
    """The declared claim of prediction `pid` in `domain`: id = pid in every chapter, NHT's name and the cell in the
    statement, the paper's values with their source tags. Source "NHT" on Table 3's domains, "book" on ours.
    `prefix` tells domains of one chapter apart (chapter 4: "C-P1" on CelebA, "W-P1" on Waterbirds)."""
    if domain not in CELLS:
        raise KeyError(f"unknown domain {domain!r}; NHT Table 3 has {', '.join(DOMAINS)}, the book adds "
                       f"{', '.join(BOOK_DOMAINS)}")
    cell = CELLS[domain][pid]
    if domain in TABLE3:
        verb = {"✓": "holds", "×": "fails"}[cell] if (domain, pid) not in NO_EVIDENCE else "is marked without evidence"
        statement = f"NHT's prediction {pid} ({PREDICTIONS[pid]}) {verb} on {domain} (Table 3: {cell})"
    else:
        statement = (f"NHT's prediction {pid} ({PREDICTIONS[pid]}) holds on the book's {domain}, built to meet its "
                     "assumptions")
    source = "NHT" if domain in TABLE3 else "book"
    return ClaimSpec(prefix + pid, statement, PAPER_VALUES[domain][pid], source, rule(pid, domain),
                     cell=f"{domain}/{pid}" if domain in TABLE3 else "")


# --------------------------------------------------------------------------------- per-seed statistics (Analysis)

def grid_note(summary: pd.DataFrame, lam: str = "lam") -> str:
    """The row note of a claim read over a grid: "Over this scale's λ grid (0.01, 0.1, 1)"."""
    return "Over this scale's λ grid (" + ", ".join(f"{v:g}" for v in sorted(summary[lam].unique())) + ")"


def grid_spearman(summary: pd.DataFrame, value: str, *, lam: str = "lam", seed: str = "seed") -> Estimate:
    """Per seed: Spearman ρ between λ and `value` over the grid (rows of one λ averaged first, e.g. over a second
    axis), NaN with fewer than 3 λ's; summarised over seeds. P1 (value = final norm) and P3 (a group metric)."""
    return interval(per_seed(summary, lambda g: spearman(*_by_lambda(g, value, lam)), seed), bounds=CORRELATION)


def _by_lambda(g: pd.DataFrame, value: str, lam: str) -> tuple[np.ndarray, np.ndarray]:
    m = g.groupby(lam)[value].mean()
    return m.index.to_numpy(float), m.to_numpy(float)


def regime_order(summary: pd.DataFrame, *, regime: str = "regime", lam: str = "lam", seed: str = "seed"
                 ) -> dict[str, Estimate]:
    """P2's two parts per seed (1 / 0): 'all three occur' (weak, intermediate and strong λ's), 'in order' (the
    majority regime of each λ never steps back from weak → intermediate → strong as λ grows, and no λ's runs fall in
    two regimes; read only on seeds where all three occur, NaN elsewhere; diverged runs are left out). A chapter
    that reads P2 on one slice (the toy's middle α) passes that slice."""
    from nhtlib.analysis.regimes import majority_regime

    def per_lambda(g: pd.DataFrame) -> list[str]:
        found = g[g[regime].isin(REGIMES)].groupby(lam)[regime].agg(majority_regime)
        return [r for r in found.sort_index().tolist() if r in REGIMES]

    def three(g):
        return float(set(per_lambda(g)) == set(REGIMES))

    def mixed(g) -> bool:  # a λ whose (non-diverged) runs fall in more than one regime
        kept = g[g[regime].isin(REGIMES)]
        return bool((kept.groupby(lam)[regime].nunique() > 1).any())

    def ordered(g):
        if not three(g):  # with fewer than three regimes the order says nothing
            return float("nan")
        order = [REGIMES.index(r) for r in per_lambda(g)]
        return float(order == sorted(order) and not mixed(g))

    return {"all three occur": interval(per_seed(summary, three, seed), bounds=SHARE),
            "in order": interval(per_seed(summary, ordered, seed), bounds=SHARE)}


def head_first(summary: pd.DataFrame, *, head_peak: str, body_peak: str, head_decay: str, body_decay: str
               ) -> pd.Series:
    """P4 per run (a boolean mask): the head peaks no later than the first layer and contracts more (decay % from
    each layer's own peak). Two peaks at the same logged step count as "no later"."""
    return (summary[head_peak] <= summary[body_peak]) & (summary[head_decay] > summary[body_decay])


def head_first_share(summary: pd.DataFrame, *, head_peak: str, body_peak: str, head_decay: str, body_decay: str,
                     runs: pd.Series | None = None, seed: str = "seed") -> Estimate:
    """P4: the share of the selected runs (`runs`, a boolean mask such as regime == 'intermediate'; default all)
    with the head first (`head_first`), runs as the unit (`statistics.run_share`: a clustered Wilson interval;
    a seed holds only the few runs of the regime, so a per-seed share would need every seed to agree). n = 0 without
    selected runs."""
    first = head_first(summary, head_peak=head_peak, body_peak=body_peak, head_decay=head_decay,
                       body_decay=body_decay)
    return run_share(summary, first, runs=runs, seed=seed)


def seed_mean(summary: pd.DataFrame, value: str, *, runs: pd.Series | None = None, seed: str = "seed",
              bounds: tuple[float, float] | None = None) -> Estimate:
    """Per seed: the mean of `value` over the selected runs (P5 with value = S over the pooled runs; a positive
    control such as accuracy minus chance); summarised over seeds, the interval clipped to `bounds` (the value's own
    range, e.g. CORRELATION for S_traj)."""
    chosen = summary if runs is None else summary[runs.reindex(summary.index, fill_value=False)]
    seeds = sorted(summary[seed].unique())
    return interval([float(chosen.loc[chosen[seed] == s, value].mean()) if (chosen[seed] == s).any()
                     else float("nan") for s in seeds], bounds=bounds)


def largest_gain(summary: pd.DataFrame, value: str, *, runs: pd.Series | None = None, lam: str = "lam",
                 seed: str = "seed") -> Estimate:
    """P3 × per seed: the largest gain of `value` (e.g. worst-group accuracy) of any λ over the smallest λ of the
    grid (rows of one λ averaged first; `runs` selects rows, e.g. the runs that learned); NaN with fewer than two
    λ's. The one-sided statistic of "no λ improves the worst group"."""
    chosen = summary if runs is None else summary[runs.reindex(summary.index, fill_value=False).astype(bool)]

    def gain(g: pd.DataFrame) -> float:
        x, y = _by_lambda(g, value, lam)
        return float(np.nanmax(y[1:] - y[0])) if len(x) >= 2 else float("nan")

    return interval([gain(chosen[chosen[seed] == s]) if (chosen[seed] == s).any() else float("nan")
                     for s in sorted(summary[seed].unique())])


def defined_share(summary: pd.DataFrame, score: str = "S", *, runs: pd.Series | None = None,
                  seed: str = "seed") -> Estimate:
    """P5 ×'s positive control per seed: the share of the selected runs whose `score` (S_traj) is defined (finite:
    a contraction phase with enough logs and a φ that moves); 0 for a seed without selected runs."""
    chosen = summary if runs is None else summary[runs.reindex(summary.index, fill_value=False).astype(bool)]
    return interval([float(np.isfinite(chosen.loc[chosen[seed] == s, score].to_numpy(float)).mean())
                     if (chosen[seed] == s).any() else 0.0 for s in sorted(summary[seed].unique())], bounds=SHARE)


def separation_estimate(summary: pd.DataFrame, *, score: str = "S", pooled: str = "pooled",
                        seed: str = "seed") -> Estimate:
    """P5 per seed: the mean S_traj (`score`, a Spearman correlation) over the seed's pooled runs (`pooled`, see
    `separation.pooled`), with its interval within [−1, 1]."""
    return seed_mean(summary, score, runs=summary[pooled].astype(bool), seed=seed, bounds=CORRELATION)


def inverse_lambda_r2(summary: pd.DataFrame, time: str, *, lam: str = "lam", seed: str = "seed",
                      min_points: int = 3) -> Estimate:
    """P6 per seed: R² of the least-squares fit T = a/λ + b over the λ's where the seed has a finite transition time
    `time` (rows of one λ averaged first); NaN with fewer than `min_points` λ's."""
    def r2(g: pd.DataFrame) -> float:
        x, t = _by_lambda(g.dropna(subset=[time]), time, lam)
        if len(x) < min_points:
            return float("nan")
        return fit_inverse_lambda(x, t).r2  # NaN for a constant T

    return interval(per_seed(summary, r2, seed), bounds=(-math.inf, 1.0))


AGREES, DISAGREES, UNDECIDED = "agrees", "disagrees", "undecided"  # our verdict against the paper's mark
UNTESTED_SHORT = {verdicts.NO_EVIDENCE: "no evidence", verdicts.NOT_AT_THIS_SCALE: "scale",
                  verdicts.NOT_IN_CONSTRUCTION: "construction"}  # a Table 3 cell's short reason


def agreement(verdict: str) -> str:
    """Our verdict on a Table 3 cell against the paper's mark: every cell's rule tests the paper's mark (✓ the
    prediction holds, × it fails), so *reproduced* agrees with the mark, *not reproduced* disagrees, *inconclusive*
    and *partly* are undecided; "not testable here" and "not run" stay as they are."""
    return {"reproduced": AGREES, "not reproduced": DISAGREES, "inconclusive": UNDECIDED,
            "partly": UNDECIDED}.get(verdict, verdict)


def table3(claims: pd.DataFrame) -> pd.DataFrame:
    """NHT Table 3, the paper's marks beside ours: one row per domain, for each prediction the paper's mark and
    whether our verdict agrees with it ("✓ agrees", "× disagrees", "✓ undecided", "× untested (no evidence)",
    "✓ untested (scale)": not testable here, not run at this scale; "✓ not run": no claim recorded). claims: the Scoreboard's table; each cell is read from the one claim whose `cell` column names
    it ("CelebA/P3"; the book declares at most one per cell, so no mark is counted twice). Columns agrees /
    disagrees / undecided count the domain's cells."""
    cells = claims.get("cell", pd.Series("", index=claims.index)).fillna("")
    untested = claims.get("untested", pd.Series("", index=claims.index)).fillna("")
    by_cell = {cell: (v if v != verdicts.NOT_TESTABLE else f"untested ({UNTESTED_SHORT.get(why, why or '?')})")
               for cell, v, why in zip(cells, claims.verdict, untested)}
    rows = []
    for domain, marks in TABLE3.items():
        row = {"domain": domain}
        for pid in PREDICTIONS:
            verdict = by_cell.get(f"{domain}/{pid}")
            row[pid] = f"{marks[pid]} {agreement(verdict) if verdict else 'not run'}"
        for word in (AGREES, DISAGREES, UNDECIDED):
            row[word] = sum(row[pid].endswith(f" {word}") for pid in PREDICTIONS)
        rows.append(row)
    return pd.DataFrame(rows).set_index("domain")
