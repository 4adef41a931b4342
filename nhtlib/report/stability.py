"""Do the book's verdicts survive another block of seeds? The seed-block record, compared and read for the Scoreboard.

`benchmarks/seed_blocks.py` runs a chapter at a second block of seeds (first seed S, sharing no seed with the book's
block, first seed 0) and records, per chapter, the claims whose verdict differs between the two blocks
(benchmarks/records/seed_blocks.json, `RECORD_NAME`). A verdict that moves between a decision (reproduced, partly,
not reproduced) and "inconclusive" sits near its rule's bound: another block of seeds may decide it the other way, and
a reader should hold it loosely. One that flips between reproduced and not reproduced is a defect of the design or of
the rule (issue 27's bar: no flip, and at most 5 % of the verdicts differing).

A record entry says which design its blocks ran (`Chapter.bf16_design`'s digest) and by which rules they were judged
(`rules_digest`: each claim's rule in words), on which CPU and when; an entry of another design, or of other rules,
than the chapter's current ones is shown as such, not as today's stability.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from nhtlib.config import stable_hash
from nhtlib.paths import repo_root
from nhtlib.report.claims import claim_link, markdown_text, verdict_changes
from nhtlib.report.verdicts import NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED

RECORD_NAME = "seed_blocks.json"  # in benchmarks/records/, next to the other measured records
DECIDED = (REPRODUCED, PARTLY, NOT_REPRODUCED)
BAR_SHARE = 0.05  # issue 27: at most 5 % of the verdicts may differ between the blocks, and none may flip

# a record entry's design and rules against the chapter's current ones
CURRENT, EARLIER, EARLIER_RULES, NOT_RECORDED = "current", "an earlier design", "earlier rules", "not recorded"


def record_path() -> Path | None:
    """benchmarks/records/seed_blocks.json of the book's checkout (None when nhtlib runs outside one)."""
    root = repo_root()
    return None if root is None else root / "benchmarks" / "records" / RECORD_NAME


def read_record(path: Path | None = None) -> dict:
    """chapter -> its entry (`block_entry`'s keys); {} when there is no record."""
    path = path or record_path()
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


def decided_share(table: pd.DataFrame) -> tuple[int, int]:
    """(decided, with runs) of one claims table: the claims reproduced / partly / not reproduced, and those not "not
    testable here"."""
    tested = table[table.verdict != NOT_TESTABLE]
    return int(tested.verdict.isin(DECIDED).sum()), len(tested)


def block_differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict differs between block 0's claims table `a` and block S's `b`: id, "block 0", "ours
    0", "block S", "ours S", flip (`claims.verdict_changes`, the differing rows only)."""
    changes = verdict_changes(a, b)
    return changes[changes.differs].drop(columns="differs").rename(
        columns={"verdict a": "block 0", "ours a": "ours 0", "verdict b": "block S", "ours b": "ours S"}) \
        .reset_index(drop=True)


def rules_digest(table: pd.DataFrame) -> str:
    """A digest of the rules a claims table was judged by: each claim's id and its rule in words (the rule's text
    does not depend on the runs, so both blocks of a chapter give the same digest)."""
    rules = table["rule"] if "rule" in table else pd.Series("", index=table.index)
    return stable_hash(sorted([str(cid), str(rule)] for cid, rule in zip(table["id"], rules)))


def block_entry(a: pd.DataFrame, b: pd.DataFrame, *, scale: str, seed: int, design: str | None, **about) -> dict:
    """One chapter's record entry from its claims tables at block 0 (`a`) and block `seed` (`b`): the claims
    compared, those that differ (with both verdicts and estimates), the decided share at each block and the rules
    they were judged by (`rules_digest` of `a`); `about` adds what the blocks ran on (bf16, cpu, date)."""
    diff = block_differences(a, b)
    (d0, n0), (ds, ns) = decided_share(a), decided_share(b)
    return {"scale": scale, "design": design, "rules": rules_digest(a), **about, "seeds": [0, seed],
            "claims": len(a), "differ": diff.to_dict(orient="records"), "decided": [[d0, n0], [ds, ns]]}


def design_state(entry: Mapping, current: str | None, current_rules: str | None = None) -> str:
    """Whether a record entry measured the chapter's `current` design digest (`Chapter.bf16_design`) and judged it
    by its `current_rules` (`rules_digest` of the claims shown now; None: not compared)."""
    if not entry.get("design") or current is None:
        return NOT_RECORDED
    if entry["design"] != current:
        return EARLIER
    if current_rules is not None and entry.get("rules") != current_rules:
        return EARLIER_RULES if entry.get("rules") else NOT_RECORDED
    return CURRENT


def entry_at(chapter: str, scale: str, record: Mapping | None = None) -> Mapping | None:
    """The chapter's entry in the seed-block record (`record`, else `read_record()`) when it was measured at `scale`;
    None otherwise. A chapter page's identity holds it (`nhtlib.cli.runner`), and the page reads it (`other_block`)."""
    entry = (read_record() if record is None else record).get(chapter)
    return entry if entry and entry.get("scale") == scale else None


def other_block(entry: Mapping | None, seed: int, design: str | None, table: pd.DataFrame) -> dict[str, str]:
    """What a chapter page at first seed `seed` says of its claims that moved with the seeds: claim id -> "at seeds
    S–… it is <verdict> (<ours>)", the record's other block, for every claim whose verdict differs between the two
    blocks of `entry` (the chapter's seed-block record entry at the page's scale, `entry_at`). Only when the entry
    ran this design (`design`, `Chapter.bf16_design`'s digest), judged by these rules (`rules_digest` of `table`,
    the page's claims) and the page shows one of its two blocks; {} otherwise (no record, or one of another design
    or rules)."""
    if (not entry or design is None or entry.get("design") != design
            or entry.get("rules") != rules_digest(table) or seed not in entry["seeds"]):
        return {}
    first, other = entry["seeds"]
    at = other if seed == first else first
    side = ("block S", "ours S") if seed == first else ("block 0", "ours 0")
    return {d["id"]: f"at seeds {at}–… it is {d[side[0]]} ({d[side[1]]})" for d in entry["differ"]}


def stability_table(record: Mapping, scale: str, chapters: list[str] | None = None,
                    current_design: Callable[[str], str | None] | None = None,
                    shown: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per chapter with an entry at `scale` (in `chapters`' order when given): the two blocks' first seeds,
    the claims compared and those of them with runs (block 0's; a claim not testable here cannot move), how many
    differ and flip, the decided share at each block, the record's design and rules against the chapter's current
    ones (`current_design`: chapter -> digest; `shown`: the claims shown now, e.g. the Scoreboard's frame, whose rows
    of the chapter give its current `rules_digest`; a chapter without rows there is not compared on its rules), its
    CPU and date; then a total row."""

    def current_rules(chapter: str) -> str | None:
        rows = shown[shown.chapter == chapter] if shown is not None else ()
        return rules_digest(rows) if len(rows) else None

    rows = []
    for chapter in chapters if chapters is not None else list(record):
        entry = record.get(chapter)
        if not entry or entry.get("scale") != scale:
            continue
        first, other = entry["seeds"]
        (d0, n0), (ds, ns) = entry["decided"]
        differ = entry["differ"]
        rows.append({"chapter": chapter, "blocks": f"{first} vs {other}", "claims": entry["claims"],
                     "with runs": n0, "differ": len(differ), "flips": sum(bool(d.get("flip")) for d in differ),
                     "decided, block 0": f"{d0}/{n0}", "decided, other block": f"{ds}/{ns}",
                     "design": design_state(entry, current_design(chapter) if current_design else None,
                                            current_rules(chapter)),
                     "cpu": entry.get("cpu", "not recorded"), "date": entry.get("date", "")})
    table = pd.DataFrame(rows, columns=["chapter", "blocks", "claims", "with runs", "differ", "flips",
                                        "decided, block 0", "decided, other block", "design", "cpu", "date"])
    if rows:
        table.loc[len(table)] = {"chapter": "book", "blocks": "", "claims": int(table.claims.sum()),
                                 "with runs": int(table["with runs"].sum()), "differ": int(table["differ"].sum()),
                                 "flips": int(table.flips.sum()), "decided, block 0": "",
                                 "decided, other block": "", "design": "", "cpu": "", "date": ""}
    return table


def share_line(table: pd.DataFrame) -> str:
    """The book's sentence on a `stability_table`: how many verdicts differ and flip, against the bar. The share is
    of the claims with runs: a claim not testable here has the same row at every block, so counting it would only
    dilute the share (the count over every claim follows in brackets)."""
    if table.empty:
        return "No chapter has a seed-block record at this scale."
    total = table.iloc[-1]
    tested = total["with runs"]
    share = total["differ"] / tested if tested else float("nan")
    bar = "within" if share <= BAR_SHARE and total["flips"] == 0 else "outside"
    flips = "none flips" if not total["flips"] else f"{total['flips']} flip"
    return (f"**{total['differ']} of the {tested} verdicts of claims with runs ({share:.0%}) differ between the two "
            f"blocks of seeds; {flips} between reproduced and not reproduced** — {bar} the book's bar (at most "
            f"{BAR_SHARE:.0%} differing, no flip). Counted over all {total['claims']} claims, the not testable "
            f"included, that is {total['differ'] / total['claims']:.0%}.")


def differences_markdown(record: Mapping, scale: str, titles: Mapping[str, str],
                         anchors: Mapping[str, Mapping[str, str]] | None = None,
                         chapters: list[str] | None = None) -> str:
    """Per chapter, each claim whose verdict differs between the blocks (linked as `claims.claim_link` does), with
    its verdict and estimate at both; every value escaped."""
    out = []
    for chapter in chapters if chapters is not None else list(record):
        entry = record.get(chapter)
        if not entry or entry.get("scale") != scale or not entry["differ"]:
            continue
        first, other = entry["seeds"]
        out += [f"**{markdown_text(titles.get(chapter, chapter))}** — {len(entry['differ'])} of {entry['claims']}:",
                ""]
        for d in entry["differ"]:
            flip = " (**a flip**)" if d.get("flip") else ""
            out.append(f"- {claim_link(chapter, d['id'], anchors or {})}{flip}: {markdown_text(d['block 0'])} at "
                       f"seeds {first}–… ({markdown_text(d['ours 0'])}); {markdown_text(d['block S'])} at seeds "
                       f"{other}–… ({markdown_text(d['ours S'])})")
        out.append("")
    return "\n".join(out).rstrip() or "No verdict differs between the blocks."
