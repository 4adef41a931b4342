"""Verdict rules: from per-seed statistics to an interval, and from an interval to a verdict a reader can trust.

The design note (shared/design/verdicts.md) in code:

* **The unit of replication is a seed.** A claim's statistic is computed per seed (e.g. the Spearman ρ of the final
  norm against λ within one seed), then summarised by `interval` into an `Estimate`: the mean and its 95 % interval
  over seeds — a t-interval below `BOOTSTRAP_MIN_UNITS` units (a percentile bootstrap over 3 seeds has only 10
  distinct resamples), a percentile bootstrap from there on. A statistic that exists only across runs (one fit over
  a whole grid) gets its interval from `seed_bootstrap` (resample seeds, refit); a spread across seeds (a standard
  deviation) gets the chi-square interval of `sd_interval`. Fewer than `MIN_UNITS` units
  decide nothing: the verdict is *inconclusive*, never a one-seed *reproduced*.
* **A rule turns an interval into a verdict**, and says so in words (`Rule.words`), from the same object that
  decides, so the sentence a reader sees cannot disagree with the code:
  `AtLeast` / `AtMost` (direction / threshold), `Within` (a stated range), `Agrees` (a fit against the paper's
  interval), `Equivalent` (a null claim: inside a margin, with a `PositiveControl` showing the measurement was
  alive), `AllOf` (several parts: the only source of *partly*), `NotTested` (the paper gives no evidence).
* `ClaimSpec` declares a claim once (id, statement, the paper's value with its source tag, where it comes from, its
  rule); `ClaimSpec.judge(estimate)` gives the `ClaimResult` row that `nhtlib.report.claims.Claims.record` stores.

Verdicts: reproduced (the whole interval lies beyond the threshold), not reproduced (the whole interval lies on the
other side), inconclusive (the interval straddles it, or too few seeds, or a null claim on a dead model), partly
(a claim with several parts, some reproduced and some not), not testable here (no runs at this scale, or the paper
itself gives no evidence — the row says which).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from nhtlib.analysis.statistics import LEVEL, MIN_UNITS, Estimate  # noqa: F401  (re-exported: what a rule reads)
from nhtlib.config import Config, ConfigError, check_choice, check_range

REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE = (
    "reproduced", "partly", "not reproduced", "inconclusive", "not testable here")
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE)
SOURCES = ("NHT", "NSDL", "D_LR", "book")  # where a claim comes from: the two papers, NHT's companion, or ours



# ----------------------------------------------------------------------------------------------------- rules

class Rule(Config):
    """Interval -> verdict, and the same rule in words. `quantity` names what is measured, as the row shows it."""

    null = False  # a null claim ("no effect"): needs a positive control

    def judge(self, estimate: Estimate | Mapping[str, Estimate] | None, control: Estimate | None = None) -> str:
        raise NotImplementedError  # pragma: no cover - interface

    def words(self) -> str:
        raise NotImplementedError  # pragma: no cover - interface


def _pct(level: float = LEVEL) -> str:
    return f"{level:.0%}"


def _fmt(x: float) -> str:
    return f"{x:g}".replace("-", "−")


@dataclass(frozen=True)
class Threshold(Rule):
    """The interval of `quantity` against one threshold; `beyond` says on which side the claim lies."""

    quantity: str
    threshold: float
    beyond = "above"  # "above" (AtLeast) or "below" (AtMost)

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided:
            return INCONCLUSIVE
        above, below = estimate.low > self.threshold, estimate.high < self.threshold
        if above or below:
            return REPRODUCED if (above if self.beyond == "above" else below) else NOT_REPRODUCED
        return INCONCLUSIVE

    def words(self):
        other = "below" if self.beyond == "above" else "above"
        return (f"reproduced if the {_pct()} CI of {self.quantity} lies {self.beyond} {_fmt(self.threshold)}, not "
                f"reproduced if it lies {other}, else inconclusive (n ≥ {MIN_UNITS})")


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

    def words(self):
        return (f"reproduced if the {_pct()} CI of {self.quantity} lies inside [{_fmt(self.low)}, {_fmt(self.high)}], "
                f"not reproduced if it misses that range, else inconclusive (n ≥ {MIN_UNITS})")


@dataclass(frozen=True)
class Agrees(Rule):
    """A fitted value against the paper's value and interval [paper_low, paper_high]: reproduced when our interval
    overlaps the paper's and is no wider than `max_width` (precise enough to have disagreed), not reproduced when it
    excludes the paper's value and its whole interval, else inconclusive."""

    quantity: str
    paper_low: float
    paper_high: float
    max_width: float

    def validate(self) -> None:
        if not self.paper_low <= self.paper_high:
            raise ConfigError(f"paper interval [{self.paper_low}, {self.paper_high}] must have low <= high")
        check_range("max_width", self.max_width, 0.0, None, low_inclusive=False)

    def judge(self, estimate, control=None):
        if estimate is None or not estimate.decided:
            return INCONCLUSIVE
        if estimate.high < self.paper_low or estimate.low > self.paper_high:
            return NOT_REPRODUCED
        return REPRODUCED if estimate.width <= self.max_width else INCONCLUSIVE

    def words(self):
        return (f"reproduced if the {_pct()} CI of {self.quantity} overlaps the paper's "
                f"[{_fmt(self.paper_low)}, {_fmt(self.paper_high)}] and is at most {_fmt(self.max_width)} wide; "
                "not reproduced if it excludes the paper's interval; else inconclusive")


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

    def words(self):
        return (f"reproduced (null claim) if the {_pct()} CI of {self.quantity} lies inside ±{_fmt(self.margin)} and "
                f"{self.control.words()}; not reproduced if the CI lies beyond ±{_fmt(self.margin)}; else inconclusive")


@dataclass(frozen=True)
class AllOf(Rule):
    """A claim with several named parts, each with its rule; judged on {part name: Estimate}: reproduced when every
    part is, not reproduced when every part is decided and none is reproduced, partly when some parts are reproduced
    and some are not, inconclusive otherwise. The only rule that says *partly*."""

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
        if REPRODUCED in verdicts and NOT_REPRODUCED in verdicts:
            return PARTLY
        if REPRODUCED not in verdicts and NOT_REPRODUCED in verdicts and INCONCLUSIVE not in verdicts:
            return NOT_REPRODUCED
        return INCONCLUSIVE

    def words(self):
        inner = "; ".join(f"({name}) {rule.words()}" for name, rule in self.parts)
        return f"every part: {inner}. Partly when some parts are reproduced and others not"


@dataclass(frozen=True)
class NotTested(Rule):
    """The paper itself gives no evidence for this cell (e.g. NHT Table 3 ticks P3 for modular arithmetic, where no
    groups exist): always *not testable here*, with the reason."""

    reason: str

    def judge(self, estimate=None, control=None):
        return NOT_TESTABLE

    def words(self):
        return f"not testable here: {self.reason}"


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


@dataclass(frozen=True)
class ClaimSpec(Config):
    """A claim declared once: id (e.g. "P1"), statement, the paper's value as printed with its source tag (e.g.
    "Spearman −1 [paper, Table 3]"), source (one of SOURCES: who makes the claim), and the rule that decides it."""

    id: str
    statement: str
    paper: str
    source: str
    rule: Rule

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
        claims). ours: the text to show instead of the estimate (the estimate's interval and n still fill the row)."""
        if estimate is None and not isinstance(self.rule, NotTested):
            return self._row(NOT_TESTABLE, ours or "no runs at this scale", 0, float("nan"), float("nan"),
                             note or "no runs at this scale")
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
        if self.rule.null:
            note = "; ".join(filter(None, [note, _control_note(self.rule, control)]))
        return self._row(verdict, text, n, low, high, note)

    def _row(self, verdict: str, ours: str, n: int, low: float, high: float, note: str) -> ClaimResult:
        return ClaimResult(self.id, self.statement, self.paper, self.source, ours, n, low, high, self.rule.words(),
                           verdict, self.rule.null, note)


def _control_note(rule: Rule, control: Estimate | None) -> str:
    """What a null claim's row says about its positive control: its value, and whether it passed (a failed or
    missing control is why a null claim is inconclusive)."""
    controls = [rule.control] if isinstance(rule, Equivalent) else [r.control for _, r in getattr(rule, "parts", ())
                                                                      if isinstance(r, Equivalent)]
    if not controls:
        return ""
    if control is None:
        return f"no positive control measured ({controls[0].words()} is required)"
    passed = all(c.passes(control) for c in controls)
    return (f"positive control {'passed' if passed else 'FAILED'}: {control.text()} "
            f"({controls[0].words()} is required)")
