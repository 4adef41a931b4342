"""nhtlib.report.stability: the seed-block comparison and the Scoreboard's reading of its record, on claims tables
whose answers are known, and the committed record's own consistency."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from nhtlib.chapters import CHAPTERS
from nhtlib.report import stability
from nhtlib.report.verdicts import INCONCLUSIVE, NOT_REPRODUCED, NOT_TESTABLE, PARTLY, REPRODUCED


def table(**verdicts: str) -> pd.DataFrame:
    """A claims table: claim id -> verdict, its estimate naming both, and a rule in words per claim."""
    return pd.DataFrame({"id": list(verdicts), "verdict": list(verdicts.values()),
                         "ours": [f"{cid}: {v}" for cid, v in verdicts.items()],
                         "rule": [f"reproduced if {cid} lies above 0.5" for cid in verdicts]})


BLOCK_0 = table(A=REPRODUCED, B=REPRODUCED, C=INCONCLUSIVE, D=PARTLY, E=NOT_TESTABLE, F=NOT_REPRODUCED)
BLOCK_10 = table(A=REPRODUCED, B=NOT_REPRODUCED, C=REPRODUCED, D=PARTLY, E=NOT_TESTABLE, F=INCONCLUSIVE)


def test_decided_share_counts_decisions_among_the_claims_with_runs():
    assert stability.decided_share(BLOCK_0) == (4, 5)  # A B D F of A B C D F; E is not testable here
    assert stability.decided_share(BLOCK_10) == (4, 5)  # A B C D
    assert stability.decided_share(table(A=INCONCLUSIVE, B=NOT_TESTABLE)) == (0, 1)


def test_block_differences_names_each_changed_verdict_and_only_a_decision_reversed_flips():
    diff = stability.block_differences(BLOCK_0, BLOCK_10)
    assert list(diff.id) == ["B", "C", "F"]
    assert list(diff.flip) == [True, False, False]
    row = diff.set_index("id").loc["C"]
    assert (row["block 0"], row["block S"], row["ours 0"], row["ours S"]) == (
        INCONCLUSIVE, REPRODUCED, "C: inconclusive", "C: reproduced")
    assert stability.block_differences(BLOCK_0, BLOCK_0).empty


def test_a_claim_in_one_block_only_differs():
    diff = stability.block_differences(table(A=REPRODUCED), table(A=REPRODUCED, G=INCONCLUSIVE))
    assert list(diff.id) == ["G"] and diff.iloc[0]["block 0"] == "missing"


def entry(design="abc", differ_from=BLOCK_10, **about):
    return stability.block_entry(BLOCK_0, differ_from, scale="cpu", seed=10, design=design, **about)


def test_block_entry_holds_what_the_scoreboard_reads():
    e = entry(cpu="Some CPU", date="2026-12-06")
    assert e["seeds"] == [0, 10] and e["claims"] == 6 and e["decided"] == [[4, 5], [4, 5]]
    assert [d["id"] for d in e["differ"]] == ["B", "C", "F"] and e["cpu"] == "Some CPU"
    json.dumps(e)  # the record is JSON: no numpy scalars left in it


def test_stability_table_counts_per_chapter_and_for_the_book_and_says_whose_design_it_measured():
    record = {"ch1": entry(design="abc"), "ch2": entry(design="old", differ_from=BLOCK_0),
              "ch3": entry(design=None), "other scale": {**entry(), "scale": "paper"}}
    t = stability.stability_table(record, "cpu", ["ch2", "ch1", "ch3", "other scale", "never run"],
                                  current_design=lambda c: "abc" if c == "ch1" else "new")
    assert list(t.chapter) == ["ch2", "ch1", "ch3", "book"]
    by = t.set_index("chapter")
    assert list(by["differ"]) == [0, 3, 3, 6] and list(by["flips"]) == [0, 1, 1, 2]
    assert list(by["claims"]) == [6, 6, 6, 18] and list(by["with runs"]) == [5, 5, 5, 15]
    assert list(by["design"][:3]) == [stability.EARLIER, stability.CURRENT, stability.NOT_RECORDED]
    assert by.loc["ch1", "decided, block 0"] == "4/5" and by.loc["ch1", "blocks"] == "0 vs 10"


def test_share_line_holds_the_bar():
    outside = stability.stability_table({"c": entry()}, "cpu")
    assert "3 of the 5 verdicts of claims with runs (60%) differ" in stability.share_line(outside)
    assert "all 6 claims, the not testable included, that is 50%" in stability.share_line(outside)
    assert "outside the book's bar" in stability.share_line(outside)
    quiet = stability.stability_table({"c": stability.block_entry(BLOCK_0, BLOCK_0, scale="cpu", seed=10,
                                                                  design="x")}, "cpu")
    assert "0 of the 5" in stability.share_line(quiet) and "within the book's bar" in stability.share_line(quiet)
    assert "none flips" in stability.share_line(quiet)
    # 1 of 20 differing is within 5 %, but a flip is outside whatever the share
    flipped = table(**{f"k{i}": REPRODUCED for i in range(20)})
    reversed_ = flipped.copy()
    reversed_.loc[0, "verdict"] = NOT_REPRODUCED
    t = stability.stability_table({"c": stability.block_entry(flipped, reversed_, scale="cpu", seed=10,
                                                              design="x")}, "cpu")
    line = stability.share_line(t)
    assert "1 of the 20 verdicts of claims with runs (5%)" in line and "outside" in line
    # rows not testable here never move: they do not dilute the share (1 of 2 with runs, not 1 of 20)
    diluted_0 = table(**{"a": REPRODUCED, "b": REPRODUCED, **{f"u{i}": NOT_TESTABLE for i in range(18)}})
    diluted_s = diluted_0.copy()
    diluted_s.loc[0, "verdict"] = INCONCLUSIVE
    line = stability.share_line(stability.stability_table(
        {"c": stability.block_entry(diluted_0, diluted_s, scale="cpu", seed=10, design="x")}, "cpu"))
    assert "1 of the 2 verdicts of claims with runs (50%)" in line and "outside" in line and "that is 5%" in line
    assert stability.share_line(stability.stability_table({}, "cpu")).startswith("No chapter")


def test_differences_markdown_lists_each_change_escaped_with_flips_marked():
    hostile = table(**{"X": REPRODUCED})
    hostile.loc[0, "ours"] = "<b>0.5 [0, 1]</b>"
    other = table(X=INCONCLUSIVE)
    record = {"ch": stability.block_entry(hostile, other, scale="cpu", seed=10, design="d"), "ch0": entry()}
    text = stability.differences_markdown(record, "cpu", {"ch": "A *title*"}, {})
    assert "<b>" not in text and "\\<b\\>" in text and "A \\*title\\*" in text
    assert "at seeds 10–…" in text and "1 of 1" in text
    assert text.count("(**a flip**)") == 1  # ch0's B
    assert stability.differences_markdown({"c": stability.block_entry(BLOCK_0, BLOCK_0, scale="cpu", seed=10,
                                                                      design="d")}, "cpu", {}) \
        == "No verdict differs between the blocks."


def test_read_record_of_a_missing_file_is_empty(tmp_path):
    assert stability.read_record(tmp_path / "absent.json") == {}


def test_the_committed_record_is_consistent():
    record = stability.read_record()
    assert record, "benchmarks/records/seed_blocks.json is missing"
    for chapter, e in record.items():
        assert chapter in CHAPTERS, chapter
        assert e.get("design") and e.get("rules"), f"{chapter}: the entry names no design or no rules"
        first, other = e["seeds"]
        assert first == 0 and other > 0
        assert len(e["differ"]) <= e["claims"]
        for (decided, tested) in e["decided"]:
            assert 0 <= decided <= tested <= e["claims"]
        for d in e["differ"]:
            assert d["block 0"] != d["block S"]
            assert d["flip"] == ({d["block 0"], d["block S"]} == {REPRODUCED, NOT_REPRODUCED})


@pytest.mark.parametrize("chapter", sorted(stability.read_record()))
def test_the_scoreboard_can_read_each_chapters_design(chapter):
    # the Scoreboard asks every chapter with an entry for its current design's digest
    assert isinstance(CHAPTERS[chapter].bf16_design("cpu")[1], str)


def test_rules_digest_follows_the_rules_not_the_verdicts_nor_the_row_order():
    assert stability.rules_digest(BLOCK_0) == stability.rules_digest(BLOCK_10)  # same rules, other verdicts
    assert stability.rules_digest(BLOCK_0) == stability.rules_digest(BLOCK_0.iloc[::-1])
    edited = BLOCK_0.copy()
    edited.loc[0, "rule"] = "reproduced if A lies above 0.6"
    assert stability.rules_digest(edited) != stability.rules_digest(BLOCK_0)


def test_an_entry_judged_by_other_rules_is_not_current():
    record = {"same": entry(design="abc"), "old rules": stability.block_entry(
        BLOCK_0.assign(rule="an older rule"), BLOCK_10, scale="cpu", seed=10, design="abc"),
        "before rules were recorded": {k: v for k, v in entry(design="abc").items() if k != "rules"}}
    shown = pd.concat([BLOCK_0.assign(chapter=c) for c in record])  # every chapter's claims shown now: BLOCK_0's
    t = stability.stability_table(record, "cpu", current_design=lambda c: "abc", shown=shown).set_index("chapter")
    assert t.loc["same", "design"] == stability.CURRENT
    assert t.loc["old rules", "design"] == stability.EARLIER_RULES
    assert t.loc["before rules were recorded", "design"] == stability.NOT_RECORDED
    # a chapter whose claims are not shown now is not compared on its rules; an earlier design says so first
    assert stability.design_state(record["old rules"], "abc", None) == stability.CURRENT
    elsewhere = stability.stability_table(record, "cpu", current_design=lambda c: "abc",
                                          shown=shown[shown.chapter == "same"]).set_index("chapter")
    assert elsewhere.loc["old rules", "design"] == stability.CURRENT
    assert stability.design_state(record["old rules"], "new", stability.rules_digest(BLOCK_0)) == stability.EARLIER


# ------------------------------------------------------------------ the chapter page: which verdicts moved


def test_other_block_names_the_moved_claims_for_a_page_of_either_block_and_only_for_its_design_and_rules():
    e = entry(design="abc")  # B, C and F differ between seeds 0-… and 10-…
    moved = stability.other_block(e, 0, "abc", BLOCK_0)
    assert set(moved) == {"B", "C", "F"}
    assert moved["C"] == "at seeds 10–… it is reproduced (C: reproduced)"  # block 0's page names block 10
    assert stability.other_block(e, 10, "abc", BLOCK_10)["C"] == (
        "at seeds 0–… it is inconclusive (C: inconclusive)")  # block 10's page names block 0
    # nothing to say: a page of another block, design, rules or scale, or no record at all
    assert stability.other_block(e, 20, "abc", BLOCK_0) == {}
    assert stability.other_block(e, 0, "another design", BLOCK_0) == {}
    assert stability.other_block(e, 0, None, BLOCK_0) == {}
    other_rules = BLOCK_0.assign(rule=BLOCK_0.rule + " (changed)")
    assert stability.other_block(e, 0, "abc", other_rules) == {}
    assert stability.entry_at("ch", "cpu", {"ch": e}) is e and stability.entry_at("ch", "paper", {"ch": e}) is None
    assert stability.other_block(None, 0, "abc", BLOCK_0) == {}


def _page(seed_blocks, seed=0, design="abc"):
    """A chapter page's claims book with BLOCK_0's six claims recorded (their rules as `table` writes them)."""
    from nhtlib.report.claims import Claims
    from nhtlib.report.verdicts import ClaimResult

    book = Claims("ch", "cpu", moved_of=lambda frame: stability.other_block(seed_blocks, seed, design, frame))
    for row in BLOCK_0.itertuples():
        book.record(ClaimResult(id=row.id, statement=f"claim {row.id}", paper="p", source="NHT", ours=row.ours,
                                n=None, low=None, high=None, rule=row.rule, verdict=row.verdict, null=False))
    return book


def test_a_page_says_which_of_its_verdicts_moved_with_the_seeds_in_its_paragraphs_and_its_table():
    from nhtlib.report.claims import MOVED

    page = _page(entry(design="abc"))
    assert set(page.moved()) == {"B", "C", "F"}
    shown = page.show("A", "C").data
    assert shown.count(MOVED) == 1 and "at seeds 10–… it is reproduced" in shown  # C moved, A did not
    html = page.table().to_html()
    assert html.count(MOVED) == 3 and "at seeds 10–… it is not reproduced" in html  # B
    # a record of another design says nothing on the page
    assert _page(entry(design="old")).moved() == {} and MOVED not in _page(entry(design="old")).table().to_html()
    assert MOVED not in _page(None).show("C").data


def test_a_moved_verdicts_text_reaches_the_page_escaped():
    from nhtlib.report.claims import style_claims, verdict_markdown
    from nhtlib.report.verdicts import ClaimResult

    hostile = table(X=REPRODUCED)
    other = table(X=INCONCLUSIVE)
    other.loc[0, "ours"] = "<script>alert(1)</script> 0.5 [0, 1]"
    e = stability.block_entry(hostile, other, scale="cpu", seed=10, design="d")
    moved = stability.other_block(e, 0, "d", hostile)
    assert "<script>" in moved["X"]  # the record holds the text as measured ...
    row = ClaimResult(id="X", statement="s", paper="p", source="NHT", ours="o", n=None, low=None, high=None,
                      rule=hostile.rule[0], verdict=REPRODUCED, null=False)
    assert "<script>" not in verdict_markdown(row, moved=moved)  # ... and the page escapes it
    frame = pd.DataFrame([{"id": "X", "verdict": REPRODUCED, "rule": "r", "other_block": moved["X"]}])
    assert "<script>" not in style_claims(frame).to_html()


def test_page_claims_read_the_chapters_record_at_the_pages_design_and_seeds(monkeypatch):
    from nhtlib.report.verdicts import ClaimResult

    for name, chapter in CHAPTERS.items():
        record = {name: entry(design=chapter.bf16_design("cpu")[1])}  # measured this very design: B, C, F moved
        monkeypatch.setattr(stability, "read_record", lambda: record)
        # both blocks' pages say which moved; a page of another block, or of a scale the record did not measure, not
        for scale, seed, moved in (("cpu", 0, {"B", "C", "F"}), ("cpu", 10, {"B", "C", "F"}), ("cpu", 20, set()),
                                   ("smoke", 0, set())):
            book = chapter.page_claims(scale, seed)
            for row in BLOCK_0.itertuples():
                book.record(ClaimResult(id=row.id, statement="s", paper="p", source="NHT", ours=row.ours, n=None,
                                        low=None, high=None, rule=row.rule, verdict=row.verdict, null=False))
            assert set(book.moved()) == moved, (name, scale, seed)
