"""Claims: what each chapter tests, the paper's value, ours and a verdict.

A chapter records a claim declared with a rule (`nhtlib.report.verdicts.ClaimSpec`) by `Claims.record(spec.judge(estimate))`:
the row then carries the source, n, the interval and the rule in words. `Claims.add(...)` records a verdict decided
elsewhere (the older chapters' way, kept until every chapter declares its claims). `claims.save()` writes them as
results/<scale>/<chapter>/claims.csv (next to the executed chapter; `paths.chapter_dir`, i.e. the runner's staging
folder while `nhtlib.cli.runner` runs the chapter) and `claims.table()` renders the chapter's
closing table. `scoreboard()` gathers every chapter's claims for the book's Scoreboard page.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd

from nhtlib.config import ConfigError, check_choice
from nhtlib.paths import atomic_write_bytes, chapter_dir, chapter_files
from nhtlib.report.verdicts import INCONCLUSIVE, NOT_TESTABLE, VERDICTS, ClaimResult  # noqa: F401  (VERDICTS: re-exported)

COLUMNS = ["chapter", "id", "statement", "paper", "ours", "verdict", "scale", "source", "rule", "n", "low", "high",
           "null", "note"]
UNASSIGNED = "unassigned"  # the source of a row recorded with `add` (no declared claim behind it)


class Claims:
    """The claims of one chapter at one scale."""

    def __init__(self, chapter: str, scale: str):
        self.chapter, self.scale = chapter, scale
        self._claims: list[ClaimResult] = []

    def add(self, id: str, statement: str, paper: str, ours: str, verdict: str) -> None:  # noqa: A002
        """Record one claim whose verdict (one of VERDICTS) was decided elsewhere: a row without source, rule, n or
        interval (counted as source 'unassigned')."""
        check_choice("verdict", verdict, VERDICTS)
        for name, value in (("id", id), ("statement", statement), ("paper", paper), ("ours", ours)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"claim {name}={value!r} must be a non-empty string")
        self.record(ClaimResult(id, statement, paper, "", ours, None, None, None, "", verdict, False))

    def record(self, result: ClaimResult) -> ClaimResult:
        """Record the row of a declared claim (`ClaimSpec.judge`); returns it (for the chapter's own prose)."""
        if any(c.id == result.id for c in self._claims):
            raise ConfigError(f"claim id {result.id!r} is recorded twice in chapter {self.chapter!r}")
        self._claims.append(result)
        return result

    def frame(self) -> pd.DataFrame:
        rows = [{"chapter": self.chapter, **asdict(c), "scale": self.scale} for c in self._claims]
        frame = pd.DataFrame(rows, columns=COLUMNS)
        return frame.astype({"n": "Int64"})  # a count: "3", not "3.0", also beside rows without one

    @property
    def path(self) -> Path:
        return chapter_dir(self.chapter, self.scale) / "claims.csv"

    def save(self) -> Path:
        atomic_write_bytes(self.path, self.frame().to_csv(index=False).encode())
        return self.path

    def table(self):
        """The closing table of the chapter (a pandas Styler, rendered as HTML by the book): id, statement, paper,
        ours (estimate [interval], n), the rule in words, verdict."""
        frame = self.frame()
        shown = ["id", "statement", "paper", "ours"] + (["rule"] if frame.rule.astype(bool).any() else []) + ["verdict"]
        return style_claims(frame[shown])


def verdict_markdown(*results: ClaimResult) -> str:
    """The verdicts of declared claims as Markdown, one paragraph each: id, statement, **verdict**, what the runs
    measured (estimate [95 % interval], n), the paper's value and the rule in words — for a chapter's section."""
    out = []
    for r in results:
        null = " (null claim)" if r.null else ""
        out.append(f"**{r.id}**{null} — {r.statement}: **{r.verdict}**. Ours: {r.ours}. Paper: {r.paper}. "
                   f"*Rule:* {r.rule}." + (f" {r.note}." if r.note else ""))
    return "\n\n".join(out)


def style_claims(frame: pd.DataFrame):
    colours = {"reproduced": "#d8f0d8", "partly": "#fff1c9", "not reproduced": "#f8d7d7",
               INCONCLUSIVE: "#dde7f3", NOT_TESTABLE: "#e6e6e6"}

    def colour(v: str) -> str:
        return f"background-color: {colours.get(v, 'white')}"

    return (frame.style.hide(axis="index").map(colour, subset=["verdict"])
            .set_properties(**{"text-align": "left", "white-space": "normal"}))


def load_claims(scale: str) -> pd.DataFrame:
    """Every chapter's claims.csv at this scale, in chapter order: the book's runs only (results/<scale>/<chapter>/;
    runs with another seed, in results/<scale>/seed-<s>/, are left out). See paths.chapter_files."""
    files = chapter_files(scale, "claims.csv")
    frames = [pd.read_csv(f, dtype=str, keep_default_na=False).reindex(columns=COLUMNS, fill_value="") for f in files]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def scoreboard(scale: str, chapters: list[str] | None = None) -> pd.DataFrame:
    """All claims at this scale; chapters listed in `chapters` but never run appear as one 'not run' row."""
    frame = load_claims(scale)
    for chapter in chapters or []:
        if chapter not in set(frame["chapter"]):
            row = {**dict.fromkeys(COLUMNS, ""), "chapter": chapter, "id": "-",
                   "statement": f"chapter not executed at scale {scale!r}", "verdict": NOT_TESTABLE, "scale": scale,
                   "note": "no runs at this scale"}
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
    return frame.sort_values(["chapter"], kind="stable").reset_index(drop=True)


def verdict_counts(frame: pd.DataFrame, by: str = "chapter") -> pd.DataFrame:
    """`by` (chapter, or source: NHT / NSDL / D_LR / book, 'unassigned' for rows recorded without a declared claim)
    x verdicts count table, with a total row."""
    keyed = frame.assign(source=frame.get("source", pd.Series("", index=frame.index)).replace("", UNASSIGNED))
    counts = keyed.groupby([by, "verdict"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[v for v in VERDICTS if v in counts.columns])
    counts.loc["total"] = counts.sum()
    return counts
