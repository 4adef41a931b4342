"""NHT's six predictions P1–P6, declared once: one definition, one statistic and one threshold each (nht.md §2,
§1.5), used by chapters 1–4 under the same ids; and NHT Table 3 (nht.md §3.6) as data, so the book's Table 3 is a
query over the claims, not a hand-kept map.

Every statistic is computed **per seed** (the unit of replication) from a chapter's run summary — one row per run
with a seed column, the weight decay, and the analysed quantities — then summarised with its 95 % interval by
`nhtlib.report.statistics.interval`. The paper's cell decides the direction of the test:

* ✓ (the paper claims the prediction holds): the prediction itself is tested (e.g. P5: S_traj ≥ 0.5);
* × where the paper measured a failure (CIFAR-10 P6: "T ∝ 1/λ does not hold", CelebA / Waterbirds P5: S ≤ 0): the
  failure is tested (P6: R² below 0.9; P5: S_traj below 0.5); where the failure is a "no effect" (Waterbirds P3: no λ
  orders the worst group; P4: no layer hierarchy) it is a null claim with a margin and a positive control;
* × or ✓ without any evidence in the paper (CelebA / Waterbirds P6 "not tested"; modular arithmetic P3, where no
  groups exist): *not testable here (the paper gives no evidence)*.

The statistics per seed and their thresholds:

* P1: Spearman ρ(λ, final ‖θ‖²) over the λ grid; CI below −0.8 (strictly decreasing is −1; −0.8 allows about two
  swapped neighbours on a 7-point grid).
* P2: all three regimes occur (1/0); they appear in the order weak → intermediate → strong as λ grows (1/0); the
  CI of each share above 0.5.
* P3: Spearman ρ(λ, bias-conflicting metric) (P3a, as the paper scores it: monotone, falling for CIFAR-10 and
  CelebA); CI below −0.5.
* P4: the share of the seed's intermediate runs whose head peaks no later and contracts more than the first layer;
  CI above 0.5.
* P5: the mean S_traj over the seed's pooled runs (`separation.pooled`); CI above 0.5 (✓) or below 0.5 (×).
* P6: R² of T = a/λ + b over the λ's with a measured transition (at least 3); CI above 0.9 (✓) or below 0.9 (×).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nhtlib.analysis.delay_law import fit_inverse_lambda
from nhtlib.analysis.regimes import REGIMES
from nhtlib.report.verdicts import AllOf, AtLeast, AtMost, ClaimSpec, Equivalent, Estimate, NotTested, PositiveControl, Rule
from nhtlib.analysis.statistics import interval, per_seed, spearman

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
        "P1": "✓ [paper, Table 3], resting on NSDL, whose V_post falls with λ over its Table 3 [companion]",
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
P3_NULL_MARGIN = 0.5  # "no ordering": |ρ(λ, WG)| below 0.5
P4_MIN_SHARE = 0.5
P4_NULL_MARGIN = 0.25  # "no hierarchy": the head-first share within 0.5 ± 0.25 (no better than a coin)
P5_MIN_S = 0.5  # the paper ticks S ≥ 0.5 and crosses S ≤ 0 (nht.md §2); "clean" per §1.5 needs ≥ 0.8 and sharpness
P6_MIN_R2 = 0.9
CONTROL_MIN_ACC_ABOVE_CHANCE = 0.10  # a null claim needs a model that learned: accuracy ≥ chance + 10 points
CONTROL_MIN_DECAY_PCT = 2.0  # a "no hierarchy" claim needs norms that contract (≥ 2 % from their peak)
CORRELATION, SHARE = (-1.0, 1.0), (0.0, 1.0)  # the ranges intervals of these statistics are clipped to


def rule(pid: str, domain: str) -> Rule:
    """The one rule of prediction `pid` for the paper's cell in `domain` (see the module docstring)."""
    cell = CELLS[domain][pid]
    if (domain, pid) in NO_EVIDENCE:
        why = "the paper gives no evidence" if domain in TABLE3 else "no such measurement in this construction"
        return NotTested(f"{why}: {NO_EVIDENCE[(domain, pid)]}")
    holds = cell == "✓"
    if pid == "P1":
        return AtMost("the per-seed Spearman ρ(λ, final ‖θ‖²)", P1_MAX_RHO)
    if pid == "P2":
        return AllOf((("all three occur", AtLeast("the share of seeds with weak, intermediate and strong λ's",
                                                  P2_MIN_SHARE)),
                      ("in order", AtLeast("the share of seeds whose regimes follow weak → intermediate → strong in λ",
                                           P2_MIN_SHARE))))
    if pid == "P3":
        if holds:
            return AtMost("the per-seed Spearman ρ(λ, bias-conflicting accuracy)", P3_MAX_RHO)
        return Equivalent("the per-seed Spearman ρ(λ, worst-group accuracy)", P3_NULL_MARGIN,
                          PositiveControl("mean accuracy minus chance", CONTROL_MIN_ACC_ABOVE_CHANCE))
    if pid == "P4":
        if holds:
            return AtLeast("the per-seed share of intermediate runs with the head first", P4_MIN_SHARE)
        return Equivalent("the per-seed share of decaying runs with the head first, minus 0.5", P4_NULL_MARGIN,
                          PositiveControl("the norm's decay from its peak (%)", CONTROL_MIN_DECAY_PCT))
    if pid == "P5":
        quantity = "the per-seed mean S_traj over the pooled runs"
        return AtLeast(quantity, P5_MIN_S) if holds else AtMost(quantity, P5_MIN_S)
    if pid == "P6":
        quantity = "the per-seed R² of T = a/λ + b"
        return AtLeast(quantity, P6_MIN_R2) if holds else AtMost(quantity, P6_MIN_R2)
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
    return ClaimSpec(prefix + pid, statement, PAPER_VALUES[domain][pid], source, rule(pid, domain))


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
    majority regime of each λ never steps back from weak → intermediate → strong as λ grows; diverged runs are
    left out)."""
    from nhtlib.analysis.regimes import majority_regime

    def per_lambda(g: pd.DataFrame) -> list[str]:
        found = g[g[regime].isin(REGIMES)].groupby(lam)[regime].agg(majority_regime)
        return [r for r in found.sort_index().tolist() if r in REGIMES]

    def three(g):
        return float(set(per_lambda(g)) == set(REGIMES))

    def ordered(g):
        order = [REGIMES.index(r) for r in per_lambda(g)]
        return float(bool(order) and order == sorted(order))

    return {"all three occur": interval(per_seed(summary, three, seed), bounds=SHARE),
            "in order": interval(per_seed(summary, ordered, seed), bounds=SHARE)}


def head_first_share(summary: pd.DataFrame, *, head_peak: str, body_peak: str, head_decay: str, body_decay: str,
                     runs: pd.Series | None = None, seed: str = "seed", minus: float = 0.0) -> Estimate:
    """P4 per seed: the share of the selected runs (`runs`, a boolean mask such as regime == 'intermediate'; default
    all) whose head peaks no later than the first layer and contracts more (decay % from its peak); `minus` is
    subtracted (0.5 for the null form). NaN for a seed without selected runs."""
    chosen = summary if runs is None else summary[runs.reindex(summary.index, fill_value=False)]

    def share(g):
        if not len(g):
            return float("nan")
        first = (g[head_peak] <= g[body_peak]) & (g[head_decay] > g[body_decay])
        return float(first.mean()) - minus

    seeds = summary[seed].unique()
    return interval([share(chosen[chosen[seed] == s]) for s in sorted(seeds)], bounds=(-minus, 1.0 - minus))


def seed_mean(summary: pd.DataFrame, value: str, *, runs: pd.Series | None = None, seed: str = "seed",
              bounds: tuple[float, float] | None = None) -> Estimate:
    """Per seed: the mean of `value` over the selected runs (P5 with value = S over the pooled runs; a positive
    control such as accuracy minus chance); summarised over seeds, the interval clipped to `bounds` (the value's own
    range, e.g. CORRELATION for S_traj)."""
    chosen = summary if runs is None else summary[runs.reindex(summary.index, fill_value=False)]
    seeds = sorted(summary[seed].unique())
    return interval([float(chosen.loc[chosen[seed] == s, value].mean()) if (chosen[seed] == s).any()
                     else float("nan") for s in seeds], bounds=bounds)


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
        return fit_inverse_lambda(x, t, n_boot=0).r2  # NaN for a constant T

    return interval(per_seed(summary, r2, seed), bounds=(-math.inf, 1.0))


def table3(claims: pd.DataFrame, where: dict[str, str | tuple[str, str]]) -> pd.DataFrame:
    """NHT Table 3, the paper's ticks beside our verdicts: one row per domain, for each prediction the paper's cell
    and ours ("✓ | reproduced"). claims: the Scoreboard's table (columns chapter, id, verdict); where: for each
    Table 3 domain, the chapter whose P-rows stand for it, or (chapter, id prefix) when a chapter holds two domains
    (("04_celeba_waterbirds", "C-") for CelebA); a domain without its rows shows "not run"."""
    rows = []
    for domain, place in where.items():
        chapter, prefix = (place, "") if isinstance(place, str) else place
        mine = claims[(claims.chapter == chapter) & claims.id.str.startswith(prefix)]
        ours = dict(zip(mine.id.str.slice(len(prefix)), mine.verdict))
        row = {"domain": domain}
        for pid in PREDICTIONS:
            row[pid] = f"{TABLE3[domain][pid]} | {ours.get(pid, 'not run')}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("domain")
