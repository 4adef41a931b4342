"""Verdict rules: from per-seed statistics to an interval, and from an interval to a verdict a reader can trust.

The design note (shared/design/verdicts.md) in code:

* **The unit of replication is a seed.** A claim's statistic is computed per seed (e.g. the Spearman ρ of the final
  norm against λ within one seed), then summarised by `interval` into an `Estimate`: the mean and its 95 % interval
  over seeds — a t-interval at every n (a percentile bootstrap over 6–10 seeds covers only ~88 % for a nominal
  95 %). A statistic that exists only across runs (one fit over a whole grid) gets its interval from
  `seed_bootstrap` (resample seeds, refit, a t-interval on the refits' spread); a spread across seeds (a standard
  deviation) gets the chi-square interval of `sd_interval`. Fewer than `MIN_UNITS` units
  decide nothing: the verdict is *inconclusive*, never a one-seed *reproduced*.
* **A rule turns an interval into a verdict**, and says so in words (`Rule.words`), from the same object that
  decides, so the sentence a reader sees cannot disagree with the code:
  `AtLeast` / `AtMost` (direction / threshold; with a `PositiveControl` for a failure the paper marks ×, or a
  one-sided null such as "no λ improves the worst group by more than 3 points"), `Within` (a stated range),
  `ArmComparison` (a paired comparison of two arms: decided either way only when every arm trained), `Matches` (agreement with a paper number: an equivalence test on ours − paper with a stated margin, not an
  overlap of intervals), `Equivalent` (a two-sided null claim: inside a margin, with a `PositiveControl` showing
  the measurement was alive), `AllOf` (several parts: the only source of *partly*; a failed part is never hidden),
  `NotTested` (the paper gives no evidence, or this scale cannot test the claim: `UNTESTED` names the reasons).
* **An undecided claim says what would decide it** (`Rule.to_decide`, issue 27): the rule's `Gap` (the bound its
  interval must clear, on the side of the estimate's centre, and the verdict it then gets) and
  `statistics.units_to_decide` give the seeds (or runs) at which the interval would clear it at the spread measured —
  or "no n" (the estimate lies on the bound), "more than 100" (too small an effect for the spread), or the positive
  control that must pass first.
* `ClaimSpec` declares a claim once (id, statement, the paper's value with its source tag, where it comes from, its
  rule); `ClaimSpec.judge(estimate)` gives the `ClaimResult` row that `nhtlib.report.claims.Claims.record` stores.

Verdicts: reproduced (the whole interval lies beyond the threshold), not reproduced (the whole interval lies on the
other side), inconclusive (the interval straddles it, or too few seeds, or a null claim on a dead model), partly
(a claim with several parts, some reproduced and some not), not testable here (no runs at this scale, or the paper
itself gives no evidence — the row's `untested` field says which, one of `UNTESTED`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from nhtlib.analysis.statistics import LEVEL, MIN_UNITS, MOST_UNITS, Estimate  # noqa: F401  (re-exported)
from nhtlib.analysis.statistics import T_SCALED, half_width, units_to_decide, units_to_decide_if_wider
from nhtlib.config import Config, ConfigError, check_choice, check_range

REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE = (
    "reproduced", "partly", "not reproduced", "inconclusive", "not testable here")
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE)
SOURCES = ("NHT", "NSDL", "D_LR", "book")  # where a claim comes from: the two papers, NHT's companion, or ours
# Why a claim is not testable here (the Scoreboard counts them apart): the paper marks a cell without evidence;
# the claim needs runs this scale does not make (the row says what would test it); the book's own construction
# has no such measurement (the toy has no groups).
NO_EVIDENCE, NOT_AT_THIS_SCALE, NOT_IN_CONSTRUCTION = (
    "the paper gives no evidence", "not run at this scale", "no such measurement in the construction")
UNTESTED = (NO_EVIDENCE, NOT_AT_THIS_SCALE, NOT_IN_CONSTRUCTION)



# ----------------------------------------------------------------------------------------------------- rules

@dataclass(frozen=True)
class Gap:
    """What stands between an undecided interval and a verdict (`Rule.gap`): side, the interval's half-width at its
    n facing the nearest bound; distance, from the estimate's centre to that bound (0: the centre lies on it, and no
    n decides); then, the verdict the rule gives once the interval clears; bounds, every bound the interval must
    clear on its centre's side (two where it must fit inside a range). All in the statistic's units."""

    side: float
    distance: float
    then: str
    bounds: tuple[float, ...]


def _gap(estimate: Estimate, bounds: tuple[float, ...], then: str) -> Gap:
    nearest = min(bounds, key=lambda b: abs(estimate.value - b))
    distance = abs(estimate.value - nearest)
    if distance <= 1e-12 * max(1.0, abs(nearest)):  # a mean on the bound, but for the rounding of its sum
        distance = 0.0
    return Gap(half_width(estimate, nearest), distance, then, bounds)


def _measured(estimate) -> bool:
    """An Estimate with a value and a finite interval (a t-scaled one from 2 units on): one a power read-out can
    scale."""
    return (isinstance(estimate, Estimate) and math.isfinite(estimate.value) and math.isfinite(estimate.low)
            and math.isfinite(estimate.high) and (estimate.n >= 2 or estimate.method not in T_SCALED))


class Rule(Config):
    """Interval -> verdict, and the same rule in words. `quantity` names what is measured, as the row shows it.
    For an undecided claim, `to_decide` says what would decide it (the power read-out), from `gap`."""

    null = False  # a null claim ("no effect"): needs a positive control

    def judge(self, estimate: Estimate | Mapping[str, Estimate] | None, control: Estimate | None = None) -> str:
        raise NotImplementedError  # pragma: no cover - interface

    def words(self) -> str:
        raise NotImplementedError  # pragma: no cover - interface

    def gap(self, estimate: Estimate) -> Gap | None:
        """The bound(s) the estimate's interval must clear and the verdict it then gets, on the side of its centre;
        None for an estimate without a value and a finite interval."""
        raise NotImplementedError  # pragma: no cover - interface

    def blocked(self, then: str | None, control: Estimate | None) -> bool:
        """True when the positive control, not the interval, stands between the estimate and `then`."""
        return False

    def to_decide(self, estimate: Estimate | Mapping[str, Estimate] | None, control: Estimate | None = None) -> str:
        """What would decide an inconclusive verdict, in words ("" when the rule decides): the units (the
        estimate's own: seeds, runs) at which the interval would clear the rule's bound at the spread measured
        (`statistics.units_to_decide`) and, for a t-interval, at the upper confidence bound of the spread
        (`statistics.units_to_decide_if_wider`, when it differs), "no n" when the estimate lies on the bound,
        "more than MOST_UNITS" when the effect is too small for the spread, the units still missing when there is no
        spread to scale (the design itself when no unit gave a value), or the positive control that must pass first."""
        if self.judge(estimate, control) != INCONCLUSIVE:
            return ""
        if not isinstance(estimate, Estimate):
            return "nothing measured"
        unit, n = estimate.unit, estimate.n
        gap = self.gap(estimate) if _measured(estimate) else None
        if self.blocked(gap.then if gap else None, control):
            measured = control.text() if control is not None else "not measured"
            return f"the positive control must pass first ({self.control.words()}; measured: {measured})"
        if gap is None and n >= MIN_UNITS:
            return f"no interval at n = {n} {unit}: the statistic could not be estimated"
        if gap is None and n == 0:  # every unit run lacked what the statistic reads: more of them need not help
            return (f"no {unit.rstrip('s')} gave a value at this design (the note says what each lacks): the design "
                    "must change before more of them can decide it")
        if gap is None:
            return f"at least {MIN_UNITS} {unit} (n = {n})"
        if not gap.distance > 0:
            return "no n: the estimate lies on the bound"
        m = units_to_decide(estimate, gap.bounds)
        if m is None:
            return f"more than {MOST_UNITS} {unit}: the effect is too small for the spread measured"
        said = f"≈ {m} {unit} would decide it ({gap.then}), at the spread measured (n = {n})"
        wider = units_to_decide_if_wider(estimate, gap.bounds)
        if estimate.method not in T_SCALED or wider == m:
            return said
        # a spread measured on few seeds may be the lucky end of its own interval: say what the unlucky end asks
        then = f"≈ {wider}" if wider is not None else f"more than {MOST_UNITS}"
        return f"{said}; {then} if the spread is at its {_pct()} upper bound"


def _pct(level: float = LEVEL) -> str:
    return f"{level:.0%}"


def _fmt(x: float) -> str:
    return f"{x:g}".replace("-", "−")


@dataclass(frozen=True)
class Threshold(Rule):
    """The interval of `quantity` against one threshold; `beyond` says on which side the claim lies.

    With a `control` the claim is a failure the paper marks × ("the law fails": R² below 0.9) or a one-sided null
    ("no λ improves the worst group by 3 points or more"): *reproduced* then also needs the positive control to
    pass — a model at chance fails every law and improves nothing — while an interval on the other side is *not
    reproduced* whatever the control (the effect was seen)."""

    quantity: str
    threshold: float
    control: "PositiveControl | None" = None
    beyond = "above"  # "above" (AtLeast) or "below" (AtMost)

    def validate(self) -> None:
        if self.control is not None and not isinstance(self.control, PositiveControl):
            raise ConfigError(f"control={self.control!r} must be a PositiveControl")

    @property
    def null(self) -> bool:  # type: ignore[override]
        return self.control is not None

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided:
            return INCONCLUSIVE
        above, below = estimate.low > self.threshold, estimate.high < self.threshold
        if not (above or below):
            return INCONCLUSIVE
        if above if self.beyond == "above" else below:
            return REPRODUCED if self.control is None or self.control.passes(control) else INCONCLUSIVE
        return NOT_REPRODUCED

    def gap(self, estimate):
        if not _measured(estimate):
            return None
        on_claim_side = estimate.value > self.threshold if self.beyond == "above" else estimate.value < self.threshold
        return _gap(estimate, (self.threshold,), REPRODUCED if on_claim_side else NOT_REPRODUCED)

    def blocked(self, then, control):  # the control stands only between the estimate and *reproduced*
        return self.control is not None and then == REPRODUCED and not self.control.passes(control)

    def words(self):
        other = "below" if self.beyond == "above" else "above"
        control = f" and {self.control.words()} (positive control)" if self.control is not None else ""
        return (f"reproduced if the {_pct()} CI of {self.quantity} lies {self.beyond} {_fmt(self.threshold)}{control}, "
                f"not reproduced if it lies {other}, else inconclusive (n ≥ {MIN_UNITS})")


@dataclass(frozen=True)
class AtLeast(Threshold):
    """The effect is at least `threshold`: reproduced when the whole interval lies above it, not reproduced when the
    whole interval lies below it, inconclusive when it straddles it (or n < MIN_UNITS)."""

    beyond = "above"


@dataclass(frozen=True)
class AtMost(Threshold):
    """The effect is at most `threshold` (a falling curve, a negative correlation): the mirror of AtLeast."""

    beyond = "below"


@dataclass(frozen=True)
class ArmComparison(AtLeast):
    """A paired comparison of two arms ("BN is richer than no BN"): AtLeast on the paired difference, with a
    `control` showing that the arm that may not train did train. Without it the verdict is inconclusive on *either*
    side: an arm that never trained can neither win nor lose a comparison (shared/design/verdicts.md). (AtLeast with
    a control decides the other side whatever the control, which is right for a failure the paper marks ×, not for
    a comparison of two arms.)"""

    def validate(self) -> None:
        super().validate()
        if self.control is None:
            raise ConfigError("a comparison of two arms needs the positive control that both arms trained")

    def judge(self, estimate, control=None):
        return super().judge(estimate, control) if self.control.passes(control) else INCONCLUSIVE

    def blocked(self, then, control):  # either way
        return not self.control.passes(control)

    @property
    def null(self) -> bool:  # type: ignore[override]
        return False  # a comparison with a control, not a claim of no effect: its row still names the control

    def words(self):
        return (f"reproduced if the {_pct()} CI of {self.quantity} lies above {_fmt(self.threshold)}, not reproduced "
                f"if it lies below, else inconclusive (n ≥ {MIN_UNITS}); either way only if {self.control.words()} "
                "(positive control: an arm that never trained can neither win nor lose), else inconclusive")


@dataclass(frozen=True)
class Within(Rule):
    """The quantity lies in the paper's range [low, high]: reproduced when the whole interval lies inside it, not
    reproduced when the interval misses the range entirely, else inconclusive."""

    quantity: str
    low: float
    high: float

    def validate(self) -> None:
        if not self.low < self.high:
            raise ConfigError(f"Within range [{self.low}, {self.high}] must have low < high")

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided:
            return INCONCLUSIVE
        if self.low <= estimate.low and estimate.high <= self.high:
            return REPRODUCED
        if estimate.high < self.low or estimate.low > self.high:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def gap(self, estimate):
        if not _measured(estimate):
            return None
        if estimate.value > self.high:
            return _gap(estimate, (self.high,), NOT_REPRODUCED)
        if estimate.value < self.low:
            return _gap(estimate, (self.low,), NOT_REPRODUCED)
        return _gap(estimate, (self.low, self.high), REPRODUCED)  # inside: the nearer bound binds

    def words(self):
        return (f"reproduced if the {_pct()} CI of {self.quantity} lies inside [{_fmt(self.low)}, {_fmt(self.high)}], "
                f"not reproduced if it misses that range, else inconclusive (n ≥ {MIN_UNITS})")


@dataclass(frozen=True)
class Matches(Rule):
    """Ours agrees with the paper's number `paper`: an equivalence test on the difference ours − paper with the
    margin stated in the claim (`margin`, a fraction of the paper's value when `relative`, else in the quantity's units).
    Reproduced when the whole 95 % interval of the difference lies inside (−margin, margin); not reproduced when it
    lies wholly outside (beyond +margin or below −margin); inconclusive otherwise (in particular when our interval
    is too wide to tell). Two overlapping intervals are not agreement (shared/design/verdicts.md)."""

    quantity: str
    paper: float
    margin: float
    relative: bool = True

    def validate(self) -> None:
        check_range("margin", self.margin, 0.0, None, low_inclusive=False)
        if self.relative and self.paper == 0:
            raise ConfigError("a relative margin needs a non-zero paper value")

    @property
    def half_width(self) -> float:
        """The margin in the quantity's units."""
        return self.margin * abs(self.paper) if self.relative else self.margin

    def difference(self, estimate: Estimate) -> tuple[float, float]:
        """The 95 % interval of ours − paper (the paper's number is taken as exact)."""
        return estimate.low - self.paper, estimate.high - self.paper

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided:
            return INCONCLUSIVE
        low, high = self.difference(estimate)
        m = self.half_width
        if -m < low and high < m:
            return REPRODUCED
        if low >= m or high <= -m:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def gap(self, estimate):
        return _equivalence_gap(estimate, self.paper, self.half_width)

    def words(self):
        margin = (f"±{self.margin:.0%} of the paper's {_fmt(self.paper)} (±{_fmt(round(self.half_width, 6))})"
                  if self.relative else f"±{_fmt(self.margin)}")
        return (f"reproduced (equivalence) if the {_pct()} CI of {self.quantity} minus the paper's {_fmt(self.paper)} "
                f"lies inside {margin}; not reproduced if it lies wholly outside; else inconclusive (n ≥ {MIN_UNITS})")


def _equivalence_gap(estimate: Estimate, centre: float, margin: float) -> Gap | None:
    """An equivalence test's gap: with the estimate's centre inside (centre − margin, centre + margin) the interval
    must fit inside it (reproduced; distance margin − |offset|), else clear the margin on the far side (not
    reproduced; distance |offset| − margin)."""
    if not _measured(estimate):
        return None
    offset = estimate.value - centre
    if abs(offset) < margin:
        return _gap(estimate, (centre - margin, centre + margin), REPRODUCED)
    return _gap(estimate, (centre + margin if offset > 0 else centre - margin,), NOT_REPRODUCED)


@dataclass(frozen=True)
class PositiveControl(Config):
    """Evidence that a measurement could have seen an effect: `quantity` (e.g. clean accuracy minus chance) must
    reach `threshold` with its whole interval. A model that learned nothing fails it."""

    quantity: str
    threshold: float

    def passes(self, estimate: Estimate | None) -> bool:
        return estimate is not None and estimate.decided and estimate.low > self.threshold

    def words(self) -> str:
        return f"the {_pct()} CI of {self.quantity} lies above {_fmt(self.threshold)}"


@dataclass(frozen=True)
class Equivalent(Rule):
    """A null claim ("no effect", "no λ helps", "the law fails"): reproduced only when the interval of the effect lies
    inside (−margin, margin) **and** the positive control passes; not reproduced when the interval lies beyond the
    margin on one side; inconclusive otherwise — in particular whenever the control fails (a model at chance cannot
    reproduce a null claim)."""

    quantity: str
    margin: float
    control: PositiveControl
    null = True

    def validate(self) -> None:
        check_range("margin", self.margin, 0.0, None, low_inclusive=False)
        if not isinstance(self.control, PositiveControl):
            raise ConfigError("an Equivalent (null) rule needs a PositiveControl")

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided or not self.control.passes(control):
            return INCONCLUSIVE
        if -self.margin < estimate.low and estimate.high < self.margin:
            return REPRODUCED
        if estimate.low >= self.margin or estimate.high <= -self.margin:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def gap(self, estimate):
        return _equivalence_gap(estimate, 0.0, self.margin)

    def blocked(self, then, control):  # a null claim on a dead measurement decides nothing, either way
        return not self.control.passes(control)

    def words(self):
        return (f"reproduced (null claim) if the {_pct()} CI of {self.quantity} lies inside ±{_fmt(self.margin)} and "
                f"{self.control.words()}; not reproduced if the CI lies beyond ±{_fmt(self.margin)}; else inconclusive")


@dataclass(frozen=True)
class AllOf(Rule):
    """A claim with several named parts, each with its rule; judged on {part name: Estimate}: reproduced when every
    part is; when any part is not reproduced, partly if some other part is reproduced and not reproduced if none is
    (a clear failure is never hidden behind an undecided part); inconclusive only when no part failed and some part
    is undecided. The only rule that says *partly*."""

    parts: tuple[tuple[str, Rule], ...]

    def validate(self) -> None:
        if len(self.parts) < 2 or not all(isinstance(r, Rule) for _, r in self.parts):
            raise ConfigError("AllOf needs at least two (name, Rule) parts")

    @property
    def null(self) -> bool:  # type: ignore[override]
        return any(r.null for _, r in self.parts)

    def part_verdicts(self, estimates: Mapping[str, Estimate], control: Estimate | None = None) -> dict[str, str]:
        return {name: rule.judge(estimates.get(name), control) for name, rule in self.parts}

    def judge(self, estimate, control=None):
        verdicts = list(self.part_verdicts(estimate or {}, control).values())
        if all(v == REPRODUCED for v in verdicts):
            return REPRODUCED
        if NOT_REPRODUCED in verdicts:
            return PARTLY if REPRODUCED in verdicts else NOT_REPRODUCED
        return INCONCLUSIVE

    def to_decide(self, estimate, control=None):
        """The read-out of every part still undecided, "part A: …; part B: …" ("" when the claim is decided)."""
        if self.judge(estimate, control) != INCONCLUSIVE:
            return ""
        estimates = estimate or {}
        verdicts = self.part_verdicts(estimates, control)
        return "; ".join(f"{name}: {rule.to_decide(estimates.get(name), control) or rule.words()}"
                         for name, rule in self.parts if verdicts[name] != REPRODUCED)

    def words(self):
        inner = "; ".join(f"({name}) {rule.words()}" for name, rule in self.parts)
        return (f"every part: {inner}. Partly when some parts are reproduced and another is not; not reproduced when a "
                "part is not reproduced and none is")


@dataclass(frozen=True)
class NotTested(Rule):
    """A claim this book cannot test: always *not testable here*, with the reason in words and its kind (one of
    `UNTESTED`): the paper itself gives no evidence for the cell (NHT Table 3 ticks P3 for modular arithmetic, where
    no groups exist), the claim needs runs this scale does not make (the reason says what would test it), or the
    book's construction has no such measurement."""

    reason: str
    kind: str = NO_EVIDENCE

    def validate(self) -> None:
        check_choice("kind", self.kind, UNTESTED)

    def judge(self, estimate=None, control=None):
        return NOT_TESTABLE

    def to_decide(self, estimate=None, control=None):
        return ""

    def words(self):
        return f"not testable here ({self.kind}): {self.reason}"


# ---------------------------------------------------------------------------------------------------- claims

@dataclass(frozen=True)
class ClaimResult:
    """One claims row (see shared/design/verdicts.md "What a row shows"). n, low and high are None for a row whose
    verdict was decided without a declared rule (a claims.csv written before every claim was declared)."""

    id: str
    statement: str
    paper: str
    source: str
    ours: str
    n: int | None
    low: float | None
    high: float | None
    rule: str
    verdict: str
    null: bool
    note: str = ""
    untested: str = ""  # for a "not testable here" row: why (one of UNTESTED)
    cell: str = ""  # the NHT Table 3 cell the row stands for ("CelebA/P3"), "" for every other claim
    to_decide: str = ""  # for an inconclusive row: what would decide it (`Rule.to_decide`), "" for every other row


@dataclass(frozen=True)
class ClaimSpec(Config):
    """A claim declared once: id (e.g. "P1"), statement, the paper's value as printed with its source tag (e.g.
    "Spearman −1 [paper, Table 3]"), source (one of SOURCES: who makes the claim), and the rule that decides it.
    cell: the NHT Table 3 cell ("domain/P3") this claim stands for — at most one claim per cell in the book, so the
    Scoreboard's Table 3 counts each of the paper's marks once."""

    id: str
    statement: str
    paper: str
    source: str
    rule: Rule
    cell: str = ""

    def validate(self) -> None:
        for name in ("id", "statement", "paper"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ConfigError(f"claim {name}={getattr(self, name)!r} must be a non-empty string")
        check_choice("source", self.source, SOURCES)
        if not isinstance(self.rule, Rule):
            raise ConfigError(f"claim {self.id}: rule={self.rule!r} must be a Rule")

    def judge(self, estimate: Estimate | Mapping[str, Estimate] | None, *, control: Estimate | None = None,
              note: str = "", ours: str | None = None) -> ClaimResult:
        """The claims row for what the runs measured. estimate: an Estimate (a dict of them for AllOf; None when
        nothing was run at this scale -> not testable here). control: the positive control's Estimate (null
        claims). ours: the text to show instead of the estimate (the estimate's interval and n still fill the row).
        An inconclusive row also says what would decide it (`Rule.to_decide`)."""
        if estimate is None and not isinstance(self.rule, NotTested):
            return self._row(NOT_TESTABLE, ours or "no runs at this scale", 0, float("nan"), float("nan"),
                             note or "no runs at this scale", NOT_AT_THIS_SCALE)
        verdict = self.rule.judge(estimate, control)
        if isinstance(estimate, Estimate):
            text = ours or estimate.text()
            n, low, high = estimate.n, estimate.low, estimate.high
        elif isinstance(estimate, Mapping):
            parts = self.rule.part_verdicts(estimate, control) if isinstance(self.rule, AllOf) else {}
            text = ours or "; ".join(f"{k}: {e.text()}" + (f" ({parts[k]})" if k in parts else "")
                                     for k, e in estimate.items())
            n = min((e.n for e in estimate.values()), default=0)
            low = high = float("nan")
        else:
            text, n, low, high = ours or "—", 0, float("nan"), float("nan")
        note = "; ".join(filter(None, [note, _control_note(self.rule, control)]))  # "" for a rule without a control
        to_decide = self.rule.to_decide(estimate, control) if verdict == INCONCLUSIVE else ""
        return self._row(verdict, text, n, low, high, note, to_decide=to_decide)

    def _row(self, verdict: str, ours: str, n: int, low: float, high: float, note: str,
             untested: str | None = None, to_decide: str = "") -> ClaimResult:
        if verdict == NOT_TESTABLE and untested is None:
            untested = self.rule.kind if isinstance(self.rule, NotTested) else NOT_AT_THIS_SCALE
        return ClaimResult(self.id, self.statement, self.paper, self.source, ours, n, low, high, self.rule.words(),
                           verdict, self.rule.null, note, untested or "", self.cell, to_decide)


def _control_note(rule: Rule, control: Estimate | None) -> str:
    """What the row of a claim with a positive control says about it: its value, and whether it passed (a failed or
    missing control is why such a claim is inconclusive); "" for a rule without one."""
    rules = [r for _, r in getattr(rule, "parts", ())] or [rule]
    controls = [r.control for r in rules if getattr(r, "control", None) is not None]
    if not controls:
        return ""
    if control is None:
        return f"no positive control measured ({controls[0].words()} is required)"
    passed = all(c.passes(control) for c in controls)
    return (f"positive control {'passed' if passed else 'FAILED'}: {control.text()} "
            f"({controls[0].words()} is required)")
