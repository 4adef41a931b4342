"""The Scoreboard counts like with like: every claim declared across the chapters, read as the Scoreboard reads them.

* each NHT Table 3 cell (domain × P1–P6) is owned by exactly one declared claim, so no mark is counted twice;
* only claims about the papers' own set-ups carry a paper's source; the rest are the book's;
* every "not testable here" declaration says which of the reasons it is.
"""
from collections import Counter

from nhtlib.chapters.registry import CHAPTERS
from nhtlib.report import predictions, verdicts


def declared():
    return [(chapter.name, claim) for chapter in CHAPTERS.values() for claim in chapter.claims]


def test_every_table3_cell_is_owned_by_exactly_one_claim():
    cells = Counter(claim.spec.cell for _, claim in declared() if claim.spec.cell)
    twice = {cell: n for cell, n in cells.items() if n > 1}
    assert not twice, f"Table 3 cells counted more than once: {twice}"
    expected = {f"{domain}/{pid}" for domain in predictions.TABLE3 for pid in predictions.PREDICTIONS}
    assert set(cells) == expected, f"missing: {sorted(expected - set(cells))}; unknown: {sorted(set(cells) - expected)}"


def test_claim_ids_are_unique_within_a_chapter_and_sources_are_known():
    for chapter in CHAPTERS.values():
        ids = [claim.id for claim in chapter.claims]
        assert len(ids) == len(set(ids)), chapter.name
        for claim in chapter.claims:
            assert claim.spec.source in verdicts.SOURCES


def test_a_cell_is_a_claim_of_nht():
    for _, claim in declared():
        if claim.spec.cell:
            assert claim.spec.source == "NHT", claim.id


def test_every_not_tested_rule_names_its_reason():
    for _, claim in declared():
        if isinstance(claim.spec.rule, verdicts.NotTested):
            assert claim.spec.rule.kind in verdicts.UNTESTED
            assert claim.spec.rule.reason.strip()
