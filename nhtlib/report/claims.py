"""Claims: what each chapter tests, the paper's value, ours and a verdict.

A claim is one object, `Claim`: its declaration (`nhtlib.report.verdicts.ClaimSpec`: id, statement, the paper's value
with its source tag, the rule) and the estimate it computes from the chapter's analysed runs. A chapter declares its
claims once (``nhtlib.chapters.<chapter>.CHAPTER.claims``); `Claims.judge(chapter, analysed)` records every row (with
its source, n, the interval and the rule in words), `Claims.show(ids...)` prints the verdicts of one section, and
`overview_markdown` makes the chapter's opening table from the same declarations. `claims.save()` writes them as
results/<scale>/<chapter>/claims.csv (next to the executed chapter; `paths.chapter_dir`, i.e. the runner's staging
folder while `nhtlib.cli.runner` runs the chapter) and `claims.table()` renders the chapter's
closing table. `scoreboard()` gathers every chapter's claims for the book's Scoreboard page (`to_decide_markdown`: what
would decide each inconclusive one); `verdict_counts` counts them, a verdict outside `VERDICTS` as "unknown verdict"
(`unknown_verdicts` names those claims), never dropped.

Text on a page: every value that reaches a page (a claim's statement, the paper's value, ours, a verdict, an id, a
parameter, a path, a device, an error) goes through one function for the context it lands in, all here:
`markdown_text` (Markdown/MyST prose and table cells), `markdown_code` (a code span), `markdown_role` (a MyST link
role, or plain text when the link would not be safe) and `html_text` (raw HTML). The book's own MyST (a claim
declaration's `where` and `test`, a chapter's title) is written by its authors and passed as it is.
"""
from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from nhtlib.config import ConfigError, check_choice
from nhtlib.paths import atomic_write_bytes, chapter_dir, chapter_files
from nhtlib.analysis.statistics import Estimate
from nhtlib.report.verdicts import (INCONCLUSIVE, NOT_AT_THIS_SCALE, NOT_REPRODUCED, NOT_TESTABLE,  # noqa: F401
                                    REPRODUCED, UNTESTED, VERDICTS, ClaimResult, ClaimSpec, NotTested)  # (VERDICTS: re-exported)

COLUMNS = ["chapter", "id", "statement", "paper", "ours", "verdict", "scale", "source", "rule", "n", "low", "high",
           "null", "note", "untested", "cell", "to_decide"]  # (a claims.csv without to_decide loads it as "")


EstimateOf = Callable[[Any], "Estimate | Mapping[str, Estimate] | None"]


# Text on a page --------------------------------------------------------------------------------------------------

# what starts markup anywhere in a line: raw HTML and entities (< > &), code and roles (`), roles and substitutions
# ({ }), links and footnotes ([ ]), math ($), table cells (|), emphasis (* _ ~) and the escape itself (\)
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>&$|~])")
_BLOCK_MARK = re.compile(r"^(\s*)([#+\-=:(])")  # what starts a block at a line's start: heading, list, fence, target
_LIST_NUMBER = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)")  # "1. " / "1)": an ordered list (not "2.5.1")
_ROLE_TARGET = re.compile(r"[\w./\-]+")  # a section label, a page or a file: what a role may link to


def one_line(value: Any) -> str:
    """`value` as text on one line: every line break (\\n, \\r, U+2028 ...: `str.splitlines`) becomes a space, so
    that no value can end a paragraph, a table row or a directive it is put into."""
    return " ".join(str(value).splitlines())


def markdown_text(value: Any) -> str:
    """`value` as literal text in Markdown/MyST prose or a table cell: on one line (`one_line`), every character
    that could start markup backslash-escaped (`_MARKDOWN_SPECIAL`: < > & ` { } [ ] $ | * _ ~ \\) and a block marker at
    its start (# - + = : ( or "1. ") too. It renders as exactly the text of `value`."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(value))
    return _LIST_NUMBER.sub(r"\1\\\2", _BLOCK_MARK.sub(r"\1\\\2", text))


def markdown_code(value: Any) -> str:
    """`value` as a Markdown code span (a command, a hash; not in a table cell, where "|" splits it): shown
    literally, on one line, between fences one backtick longer than its longest run of backticks, so nothing in it
    closes the span early."""
    text = one_line(value)
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""  # CommonMark drops one space each side
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_role(role: str, text: Any, target: Any) -> str:
    """The MyST role `role` linking `text` to `target` (a section, a page or a file) when it is safe: `text` on one
    line without backticks, angle brackets, backslashes or vertical bars, `target` of word characters, '.', '/' and
    '-' only; otherwise `text` as `markdown_text`, so a hostile id or name is shown, linking nowhere, and never breaks
    out of the role."""
    text = str(text)
    if (_ROLE_TARGET.fullmatch(str(target)) and text.strip() and len(text.splitlines()) == 1
            and not re.search(r"[`<>\\|]", text)):
        return f"{{{role}}}`{text} <{target}>`"
    return markdown_text(text)


def html_text(value: Any) -> str:
    """`value` as literal text inside raw HTML (a table cell, an attribute): `html.escape` with quotes."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Claim:
    """One claim of a chapter, declared once: what it says and how the runs decide it.

    spec: the declaration (id, statement, the paper's value with its source tag, who claims it, the rule);
    estimate: fn(analysed) -> the per-seed Estimate (a dict of them for a rule with parts; None when nothing was run
    at this scale), where `analysed` is what the chapter's ``analyse`` returns;
    control / note / ours: optional fn(analysed) -> the positive control's Estimate (null claims), the row's note,
    the text shown instead of the estimate;
    where: the sections and figures that show it (MyST, for the chapter's opening table);
    test: our test in words (the per-seed statistic), for the same table.
    """

    spec: ClaimSpec
    estimate: EstimateOf
    control: Callable[[Any], Estimate | None] | None = None
    note: Callable[[Any], str] | None = None
    ours: Callable[[Any], str | None] | None = None
    where: str = ""
    test: str = ""

    @property
    def id(self) -> str:
        return self.spec.id

    def judge(self, analysed: Any) -> ClaimResult:
        """The claims row for the chapter's analysed runs (the one judge of every claim)."""
        return self.spec.judge(self.estimate(analysed),
                               control=self.control(analysed) if self.control else None,
                               note=self.note(analysed) if self.note else "",
                               ours=self.ours(analysed) if self.ours else None)


def not_tested(claim_id: str, statement: str, paper: str, source: str, reason: str, *,
               kind: str = NOT_AT_THIS_SCALE, where: str = "", test: str = "—") -> Claim:
    """A claim of the papers this book does not test, listed so the Scoreboard shows every claim the notes name:
    always *not testable here*, with its reason (what would test it) and kind (one of `verdicts.UNTESTED`)."""
    return Claim(ClaimSpec(claim_id, statement, paper, source, NotTested(reason, kind)), lambda analysed: None,
                 where=where, test=test)


def overview_markdown(claims: Sequence[Claim]) -> str:
    """The chapter's opening table, made from its claim declarations: id, what is claimed with the paper's value and
    source tag (escaped: `markdown_text`), where the chapter shows it, and our test (the book's own MyST, e.g.
    {ref} links: only kept on one line with its "|" escaped)."""
    rows = ["| claim | the claim, and the paper's value | where | our test (per seed, 95 % interval over seeds) |",
            "|---|---|---|---|"]
    for c in claims:
        authored = [one_line(text or "—").replace("|", "\\|") for text in (c.where, c.test)]  # the book's own MyST
        cells = [f"**{markdown_text(c.id)}**",
                 f"{markdown_text(c.spec.statement)}. *Paper:* {markdown_text(c.spec.paper)}", *authored]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


class Claims:
    """The claims of one chapter at one scale. `moved_of` (the page's claims frame -> claim id -> its verdict at
    another block of seeds; `Chapter.page_claims` passes `nhtlib.report.stability.other_block` on the chapter's
    seed-block record) lets a claim whose verdict moved with the seeds say so where it is shown."""

    def __init__(self, chapter: str, scale: str, *,
                 moved_of: Callable[[pd.DataFrame], Mapping[str, str]] | None = None):
        self.chapter, self.scale = chapter, scale
        self._moved_of = moved_of
        self._claims: list[ClaimResult] = []

    def judge(self, claims: Sequence[Claim], analysed: Any) -> dict[str, ClaimResult]:
        """Judge and record every claim of `claims` (a chapter's, in order) on its analysed runs; {id: row}."""
        return {claim.id: self.record(claim.judge(analysed)) for claim in claims}

    def show(self, *ids: str):
        """The verdicts of the recorded claims `ids` as Markdown paragraphs (`verdict_markdown`), displayed where a
        section discusses them."""
        from IPython.display import Markdown

        rows = {c.id: c for c in self._claims}
        missing = [i for i in ids if i not in rows]
        if missing:
            raise ConfigError(f"claims {missing} are not recorded in chapter {self.chapter!r}")
        return Markdown(verdict_markdown(*(rows[i] for i in ids), moved=self.moved()))

    def moved(self) -> dict[str, str]:
        """Claim id -> its verdict at another block of seeds, for the recorded claims that moved with the seeds
        (`moved_of` on the recorded rows; {} without one)."""
        return dict(self._moved_of(self.frame())) if self._moved_of else {}

    def counts_line(self) -> str:
        """The recorded verdicts in one line, in `VERDICTS` order, e.g. "5 reproduced · 2 inconclusive · 1 not
        testable here" (a chapter's abstract glues it)."""
        verdicts = [c.verdict for c in self._claims]
        return " · ".join(f"{verdicts.count(v)} {v}" for v in VERDICTS if v in verdicts) or "no claims recorded"

    def record(self, result: ClaimResult) -> ClaimResult:
        """Record the row of a declared claim (`ClaimSpec.judge`); returns it (for the chapter's own prose). Refuses a
        second row with the same id and a verdict outside `VERDICTS`."""
        check_choice("verdict", result.verdict, VERDICTS)
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
        """The closing table of the chapter (a pandas Styler, rendered as HTML by the book), in the book's one order:
        id, verdict (second, so a phone shows it without scrolling), statement, the paper's value, ours (estimate
        [interval], n), the rule in words folded into a detail, and for an undecided claim what would decide it
        above the fold (not a column of its own: the table keeps its width)."""
        frame = self.frame()
        moved = self.moved()
        if moved:
            frame = frame.assign(other_block=frame["id"].map(moved).fillna(""))
        shown = ["id", "verdict", "statement", "paper", "ours"] + [
            c for c in ("rule", "to_decide", "other_block") if c in frame and frame[c].astype(bool).any()]
        return style_claims(frame[shown])


def verdict_markdown(*results: ClaimResult, moved: Mapping[str, str] | None = None) -> str:
    """The verdicts of declared claims as Markdown, one paragraph each: id, statement, **verdict**, what the runs
    measured (estimate [95 % interval], n), the paper's value and the rule in words — for a chapter's section; an
    inconclusive claim adds what would decide it (`Rule.to_decide`), and one in `moved` (claim id -> its verdict at
    another block of seeds, `Claims.moved`) says that it moved with the seeds."""
    moved = moved or {}
    out = []
    for r in results:
        null = " (null claim)" if r.null else ""
        text = {name: markdown_text(getattr(r, name)) for name in ("id", "statement", "verdict", "ours", "paper",
                                                                  "rule", "note", "to_decide")}
        out.append(f"**{text['id']}**{null} — {text['statement']}: **{text['verdict']}**. Ours: {text['ours']}. "
                   f"Paper: {text['paper']}. *Rule:* {text['rule']}." + (f" {text['note']}." if r.note else "")
                   + (f" *What would decide it:* {text['to_decide']}." if r.to_decide else "")
                   + (f" *{MOVED}:* {markdown_text(moved[r.id])}." if r.id in moved else ""))
    return "\n\n".join(out)


MOVED = "Moved with the seeds"  # a claim whose verdict differs at the seed-block record's other block

VERDICT_COLOURS = {"reproduced": "#d8f0d8", "partly": "#fff1c9", "not reproduced": "#f8d7d7",
                   INCONCLUSIVE: "#dde7f3", NOT_TESTABLE: "#e6e6e6"}


def style_claims(frame: pd.DataFrame):
    """A claims table for people (a pandas Styler): every text escaped (a claim or parameter never reaches the page
    as HTML: `html_text`), the verdict coloured, a "rule" column folded into a detail the reader opens; a
    "to_decide" column (what would decide it) and an "other_block" one (the verdict at another block of seeds,
    `Claims.moved`) join the rule's cell, shown above the fold (the table keeps its width)."""

    def colour(v: str) -> str:
        return f"background-color: {VERDICT_COLOURS.get(v, 'white')}"

    def folded(rule: str, to_decide: str = "", moved: str = "") -> str:
        cell = f"<details><summary>rule</summary>{html_text(rule)}</details>" if rule else ""
        above = [f"<p><em>{label}:</em> {html_text(text)}</p>"
                 for label, text in (("What would decide it", to_decide), (MOVED, moved)) if text]
        return "".join(above) + cell

    extra = [c for c in ("to_decide", "other_block") if c in frame.columns]
    if extra:
        def column(name: str) -> pd.Series:
            return (frame[name] if name in frame.columns else pd.Series("", index=frame.index)).fillna("").astype(str)

        joined = [folded(*cells) for cells in zip(column("rule"), column("to_decide"), column("other_block"))]
        frame = frame.drop(columns=extra).assign(rule=joined)
        formatters = {c: (str if c == "rule" else html_text) for c in frame.columns}  # the rule cell is escaped
    else:
        formatters = {c: (folded if c == "rule" else html_text) for c in frame.columns}
    styled = frame.style.hide(axis="index").format(formatters)
    if "verdict" in frame.columns:
        styled = styled.map(colour, subset=["verdict"])
    return styled.set_properties(**{"text-align": "left", "white-space": "normal"})


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
                   "source": "—", "untested": "not run at this scale",
                   "note": "no runs at this scale"}
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
    return frame.sort_values(["chapter"], kind="stable").reset_index(drop=True)


UNKNOWN_VERDICT = "unknown verdict"  # how the counts show a verdict outside VERDICTS (a hand-edited claims.csv)
UNKNOWN_REASON = "reason not recorded"


def counted_verdict(frame: pd.DataFrame) -> pd.Series:
    """The verdict as the Scoreboard counts it, one of `COUNTED` for every row: "not testable here" split by its
    reason (`untested`: the paper gives no evidence / not run at this scale / no such measurement in the
    construction; an empty or unknown reason as "reason not recorded"), a verdict outside `VERDICTS` (or none) as
    "unknown verdict", every other verdict as is."""
    verdict = frame.verdict.fillna("").astype(str)
    untested = frame.get("untested", pd.Series("", index=frame.index)).fillna("").astype(str)
    reason = untested.where(untested.isin(UNTESTED), UNKNOWN_REASON)
    counted = verdict.where(verdict != NOT_TESTABLE, "not testable: " + reason)
    return counted.where(verdict.isin(VERDICTS), UNKNOWN_VERDICT)


COUNTED = [v for v in VERDICTS if v != NOT_TESTABLE] + [f"not testable: {kind}" for kind in UNTESTED] + [
    f"not testable: {UNKNOWN_REASON}", UNKNOWN_VERDICT]


def unknown_verdicts(frame: pd.DataFrame) -> list[str]:
    """The claims whose verdict is outside `VERDICTS`, as "<chapter> <id> ('<verdict>')" ("(no verdict)" for none):
    the Scoreboard names them (they are counted as "unknown verdict")."""
    unknown = frame[counted_verdict(frame) == UNKNOWN_VERDICT]
    return [f"{row.chapter} {row.id} ({'no verdict' if pd.isna(row.verdict) else repr(str(row.verdict))})"
            for row in unknown.itertuples()]


def verdict_tally(verdicts: pd.Series, *, bold: bool = False) -> str:
    """'4 reproduced · 1 partly · 2 inconclusive': the count of each verdict, in the book's order of verdicts; a
    verdict outside `VERDICTS` (or none) is counted as "unknown verdict", never left out. Markdown."""
    named = verdicts.fillna("").astype(str)
    counts = named.where(named.isin(VERDICTS), UNKNOWN_VERDICT).value_counts()
    order = [v for v in (*VERDICTS, UNKNOWN_VERDICT) if v in counts]
    return " · ".join(f"**{counts[v]}** {v}" if bold else f"{counts[v]} {v}" for v in order)


SOURCE_NAMES = {"NHT": "NHT (norm-hierarchy transitions)", "NSDL": "NSDL (its grokking companion)",
                "D_LR": "D_LR (Nam et al.)", "book": "the book's own constructions"}


def headline_markdown(frame: pd.DataFrame) -> str:
    """One sentence per source (NHT, NSDL, D_LR, the book, then any other source a claims.csv names), its claims
    counted by verdict: the Scoreboard's opening, e.g. "**NHT** — 57 claims: 6 reproduced · 2 partly · …";
    then the claims with an unknown verdict, named."""
    sources = frame.source.fillna("").astype(str)
    lines = []
    for source in [*(s for s in SOURCE_NAMES if s in set(sources)), *sorted(set(sources) - set(SOURCE_NAMES))]:
        rows = frame[sources == source]
        counts = counted_verdict(rows).value_counts()
        tally = " · ".join(f"{counts[v]} {v}" for v in COUNTED if v in counts)
        name = SOURCE_NAMES.get(source) or markdown_text(source or "source not recorded")
        lines.append(f"- **{name}** — {len(rows)} claims: {tally}.")
    unknown = unknown_verdicts(frame)
    if unknown:
        lines.append(f"- **{len(unknown)} claims with an {UNKNOWN_VERDICT}** (not one of "
                     f"{markdown_text(', '.join(VERDICTS))}; counted apart): {markdown_text('; '.join(unknown))}.")
    return "\n".join(lines)


def chapter_sections_markdown(frame: pd.DataFrame, titles: Mapping[str, str],
                              anchors: Mapping[str, Mapping[str, str]]) -> str:
    """The Scoreboard's claims, one section per chapter (its title linked to the chapter, its subtotal), one row per
    claim in the book's column order: the claim linked to the section of its chapter that shows its verdict
    (`anchors`: chapter -> {claim id: MyST target}; a claim shown in no section links to its chapter page),
    verdict, statement, the paper's value, ours — every value escaped (`markdown_text`, `markdown_role`)."""
    out = []
    for chapter, rows in frame.groupby("chapter", sort=False):
        page = f"../notebooks/{chapter}"
        out += [f"### {markdown_role('doc', titles.get(chapter, chapter), page)}", "",
                f"{len(rows)} claims: {verdict_tally(rows.verdict)}.",
                "", "| claim | verdict | statement | paper | ours |", "|---|---|---|---|---|"]
        for row in rows.itertuples():
            cells = [markdown_text(c) for c in (row.statement, row.paper, row.ours)]
            link = claim_link(chapter, row.id, anchors)
            out.append("| " + " | ".join([link, f"**{markdown_text(row.verdict)}**", *cells]) + " |")
        out.append("")
    return "\n".join(out)


def claim_link(chapter: str, claim_id: str, anchors: Mapping[str, Mapping[str, str]]) -> str:
    """A claim's id linked, from the Scoreboard, to the section of its chapter that shows its verdict (`anchors`:
    chapter -> {claim id: MyST target}), else to its chapter's page; shown unlinked when no link would be safe."""
    target = anchors.get(chapter, {}).get(claim_id)
    return markdown_role("ref", claim_id, target) if target else markdown_role("doc", claim_id,
                                                                               f"../notebooks/{chapter}")


def to_decide_markdown(frame: pd.DataFrame, titles: Mapping[str, str],
                       anchors: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The Scoreboard's undecided claims: every inconclusive claim (linked as `claim_link` does) with what would
    decide it (`Rule.to_decide`: the seeds or runs at the spread measured, "no n", or the control that must pass
    first), one list per chapter, every value escaped. A claims.csv written before the read-out existed says so for
    its rows."""
    undecided = frame[frame.verdict.fillna("").astype(str) == INCONCLUSIVE]
    if undecided.empty:
        return "No claim is inconclusive."
    decide = undecided.get("to_decide", pd.Series("", index=undecided.index)).fillna("").astype(str)
    out = []
    for chapter, rows in undecided.assign(to_decide=decide).groupby("chapter", sort=False):
        out += [f"**{markdown_text(titles.get(chapter, chapter))}** — {len(rows)} inconclusive:", ""]
        out += [f"- {claim_link(chapter, row.id, anchors or {})} ({markdown_text(row.ours)}): "
                f"{markdown_text(row.to_decide or 'not recorded (a claims.csv from before the read-out)')}"
                for row in rows.itertuples()]
        out.append("")
    return "\n".join(out).rstrip()


def verdict_counts(frame: pd.DataFrame, by: str = "chapter") -> pd.DataFrame:
    """`by` (chapter, or source: NHT / NSDL / D_LR / book) x verdicts count table, with a total row; "not
    testable here" is counted apart for each of its reasons and a verdict outside `VERDICTS` as "unknown verdict"
    (`counted_verdict`); a row without a `by` value as "(not recorded)". Every claim is counted: the total is
    len(frame)."""
    group = frame[by].fillna("").astype(str).replace("", "(not recorded)")
    counts = frame.assign(counted=counted_verdict(frame), group=group).groupby(["group", "counted"]).size()
    counts = counts.unstack(fill_value=0).rename_axis(index=by)
    counts = counts.reindex(columns=[v for v in COUNTED if v in counts.columns])
    counts.columns.name = "verdict"
    counts.loc["total"] = counts.sum()
    return counts


def verdict_changes(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Two claims tables (a chapter's claims.csv, e.g. at fp32 and bf16, or at two blocks of seeds) claim by claim:
    id, verdict and estimate in each (verdict "missing" where a table lacks the claim), whether the verdict differs,
    and whether it flips between reproduced and not reproduced (a defect of the design or of the rule)."""
    left, right = a.set_index("id"), b.set_index("id")
    rows = []
    for cid in dict.fromkeys([*left.index, *right.index]):
        va, vb = str(left.verdict.get(cid, "missing")), str(right.verdict.get(cid, "missing"))
        rows.append({"id": str(cid), "verdict a": va, "ours a": str(left.ours.get(cid, "")), "verdict b": vb,
                     "ours b": str(right.ours.get(cid, "")), "differs": va != vb,
                     "flip": {va, vb} == {REPRODUCED, NOT_REPRODUCED}})
    return pd.DataFrame(rows, columns=["id", "verdict a", "ours a", "verdict b", "ours b", "differs", "flip"])
