"""Claims (nhtlib.report.claims): declared claims judged on a chapter's analysed runs, recorded, shown, saved, loaded
back and counted — on hand-made per-seed statistics (no training)."""
import re
from dataclasses import replace

import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.analysis.statistics import interval
from nhtlib.config import ConfigError
from nhtlib.report.claims import Claim, Claims, overview_markdown
from nhtlib.report.verdicts import (INCONCLUSIVE, NOT_REPRODUCED, PARTLY, REPRODUCED, AtLeast, AtMost, ClaimSpec,
                                    Equivalent, PositiveControl)

CONTROL = PositiveControl("clean accuracy − chance", 0.2)
# what a chapter's `analyse` might return: per-seed statistics by name
ANALYSED = {"rho": [-0.95, -0.97, -1.0], "r2": [0.1, 0.15, 0.2], "gain": [0.005, -0.004, 0.002],
            "alive": [0.60, 0.62, 0.61]}


def claim(id, statement="norm decays", rule=None, key="rho", **kw):
    spec = ClaimSpec(id, statement, "Spearman −1 [paper, Table 3]", kw.pop("source", "NHT"),
                     rule or AtMost("ρ", -0.5))
    return Claim(spec, estimate=lambda a: interval(a[key]), **kw)


def test_claims_roundtrip_and_scoreboard():
    claims = Claims("01_toy", "smoke")
    claims.judge([claim("C1"), claim("C2", "law holds", AtLeast("R²", 0.9), key="r2")], ANALYSED)
    path = claims.save()
    assert path.name == "claims.csv" and path.parent.name == "01_toy"
    saved = pd.read_csv(path)
    assert list(saved.id) == ["C1", "C2"] and set(saved.verdict) == {REPRODUCED, NOT_REPRODUCED}
    other = Claims("02_other", "smoke")
    other.judge([claim("G1", "a null", Equivalent("gain", 0.03, CONTROL), key="gain",
                       control=lambda a: interval(a["alive"]), source="NSDL")], ANALYSED)
    other.save()
    board = nht.claims.scoreboard("smoke", chapters=["01_toy", "02_other", "03_missing"])
    assert list(board.chapter) == ["01_toy", "01_toy", "02_other", "03_missing"]
    assert "not executed" in board[board.chapter == "03_missing"].statement.iloc[0]
    counts = nht.claims.verdict_counts(board)
    assert counts.loc["01_toy", REPRODUCED] == 1 and counts.loc["01_toy", NOT_REPRODUCED] == 1
    assert counts.loc["02_other", REPRODUCED] == 1 and counts.loc["total"].sum() == 4
    by_source = nht.claims.verdict_counts(board.iloc[:3], by="source")  # the claims that were run
    assert list(by_source.index) == ["NHT", "NSDL", "total"]  # counted by the source column as it is
    assert by_source.loc["NHT"].sum() == 2 and by_source.loc["NSDL", REPRODUCED] == 1
    assert "<table" in claims.table().to_html()


def test_bad_claims_rejected():
    claims = Claims("x", "smoke")
    row = claim("A").judge(ANALYSED)
    with pytest.raises(ConfigError, match="verdict='confirmed' is not allowed"):
        claims.record(replace(row, verdict="confirmed"))
    claims.record(row)
    with pytest.raises(ConfigError, match="recorded twice"):
        claims.record(row)
    with pytest.raises(ConfigError, match="recorded twice"):
        claims.judge([claim("B"), claim("A")], ANALYSED)
    with pytest.raises(ConfigError, match="must be a non-empty string"):
        claim("B", statement="")
    assert [c.id for c in claims._claims] == ["A", "B"]  # B was recorded before the second A was refused


def test_claim_judge_passes_control_note_and_ours_through():
    null = claim("N1", "no λ helps", Equivalent("gain", 0.03, CONTROL), key="gain",
                 control=lambda a: interval(a["alive"]), note=lambda a: f"{len(a['gain'])} seeds",
                 ours=lambda a: "gain ≈ 0")
    row = null.judge(ANALYSED)
    assert null.id == "N1" and row.id == "N1" and row.source == "NHT"
    assert row.verdict == REPRODUCED  # the control reached the rule: without it the null claim is inconclusive
    assert row.ours == "gain ≈ 0" and row.n == 3 and row.low == interval(ANALYSED["gain"]).low
    assert row.note.startswith("3 seeds; ") and "positive control passed" in row.note
    assert row == null.spec.judge(interval(ANALYSED["gain"]), control=interval(ANALYSED["alive"]),
                                  note="3 seeds", ours="gain ≈ 0")
    bare = claim("N2", "no λ helps", Equivalent("gain", 0.03, CONTROL), key="gain").judge(ANALYSED)
    assert bare.verdict == INCONCLUSIVE and "no positive control measured" in bare.note
    assert bare.ours == interval(ANALYSED["gain"]).text()
    assert claim("C1").judge(ANALYSED).note == ""


def test_overview_markdown_one_row_per_claim_in_order_and_escapes_pipes():
    claims = [claim("P2", "‖θ‖ | λ falls", where="{ref}`sec-norm`", test="Spearman ρ per seed"), claim("P1")]
    lines = overview_markdown(claims).splitlines()
    assert lines[0].startswith("| claim |") and lines[1] == "|---|---|---|---|"
    assert len(lines) == 2 + len(claims)
    assert lines[2].startswith("| **P2** |") and lines[3].startswith("| **P1** |")
    assert "‖θ‖ \\| λ falls. *Paper:* Spearman −1 \\[paper, Table 3\\]" in lines[2]  # shown as written, no link
    assert "{ref}`sec-norm`" in lines[2] and "Spearman ρ per seed" in lines[2]
    assert lines[3].endswith("| — | — |")  # no `where`, no `test`
    assert all(line.count(" | ") == 3 for line in lines[2:])  # four cells: the | in the statement is escaped


def test_claims_judge_records_in_order_and_returns_rows_by_id():
    claims = Claims("99_test", "smoke")
    declared = [claim("C2", "law holds", AtLeast("R²", 0.9), key="r2"), claim("C1")]
    rows = claims.judge(declared, ANALYSED)
    assert list(rows) == ["C2", "C1"]
    assert rows["C2"].verdict == NOT_REPRODUCED and rows["C1"].verdict == REPRODUCED
    assert rows == {c.id: c.judge(ANALYSED) for c in declared}
    frame = claims.frame()
    assert list(frame.id) == ["C2", "C1"] and list(frame.verdict) == [NOT_REPRODUCED, REPRODUCED]
    assert (frame.chapter == "99_test").all() and (frame.scale == "smoke").all()


def test_claims_show_renders_recorded_verdicts_and_raises_for_unrecorded_ids():
    claims = Claims("99_test", "smoke")
    claims.judge([claim("C1"), claim("C2", "law holds", AtLeast("R²", 0.9), key="r2")], ANALYSED)
    text = claims.show("C2", "C1").data
    assert text.index("**C2**") < text.index("**C1**") and f"**{REPRODUCED}**" in text
    with pytest.raises(ConfigError, match=r"\['C3'\] are not recorded in chapter '99_test'"):
        claims.show("C1", "C3")


def test_verdict_counts_keeps_verdict_order_and_a_total_row():
    frame = pd.DataFrame({"chapter": ["a", "a", "b"], "source": ["NHT", "book", "NHT"],
                          "verdict": [PARTLY, REPRODUCED, INCONCLUSIVE]})
    counts = nht.claims.verdict_counts(frame, by="source")
    assert list(counts.columns) == [REPRODUCED, PARTLY, INCONCLUSIVE]
    assert counts.loc["NHT"].tolist() == [0, 1, 1] and counts.loc["total"].tolist() == [1, 1, 1]


def test_a_verdict_outside_the_known_set_is_counted_and_named():
    # Catches: 7 claims, counts total 5 (verdicts the Scoreboard does not know, or none, dropped out of the counts).
    frame = pd.DataFrame({"chapter": ["a"] * 4 + ["b"] * 3, "id": [f"C{i}" for i in range(7)],
                          "source": ["NHT", "NHT", "book", None, "NHT", "NSDL", "odd"],
                          "verdict": [REPRODUCED, "confirmed", PARTLY, INCONCLUSIVE, None, REPRODUCED,
                                      nht.verdicts.NOT_TESTABLE],
                          "untested": [""] * 6 + ["because"]})
    for by in ("chapter", "source"):
        counts = nht.claims.verdict_counts(frame, by=by)
        assert counts.loc["total"].sum() == len(frame), by
        assert counts.loc["total", "unknown verdict"] == 2
    by_source = nht.claims.verdict_counts(frame, by="source")
    assert by_source.loc["(not recorded)"].sum() == 1 and by_source.loc["odd", "not testable: reason not recorded"] == 1
    assert nht.claims.unknown_verdicts(frame) == ["a C1 ('confirmed')", "b C4 (no verdict)"]
    headline = nht.claims.headline_markdown(frame)
    assert "**2 claims with an unknown verdict**" in headline and "a C1 ('confirmed'); b C4 (no verdict)" in headline
    assert sum(int(line.split(" — ")[1].split(" claims")[0]) for line in headline.splitlines()[:-1]) == len(frame)
    assert nht.claims.verdict_tally(frame.verdict) == (
        "2 reproduced · 1 partly · 1 inconclusive · 1 not testable here · 2 unknown verdict")


HOSTILE = "<img src=x onerror=alert(1)> {ref}`x <y>` $x$ a|b **fake**"


def test_claim_text_is_escaped_wherever_it_reaches_a_page():
    row = replace(claim("P1").judge(ANALYSED), statement=HOSTILE, ours=HOSTILE, note=HOSTILE)
    paragraph = nht.claims.verdict_markdown(row)
    raw = re.compile(r"(?<!\\)<img")  # an "<img" that is not escaped
    assert not raw.search(paragraph) and "\\<img src=x onerror=alert(1)\\>" in paragraph
    assert "\\{ref\\}\\`x \\<y\\>\\`" in paragraph and "\\$x\\$" in paragraph and "\\*\\*fake\\*\\*" in paragraph
    assert paragraph.startswith("**P1** — ")  # the id a section's target is found by (provenance.claim_sections)
    frame = pd.DataFrame({"chapter": ["01_a", "01_a"], "id": ["P1", "P`2"], "verdict": [REPRODUCED, HOSTILE],
                          "statement": [HOSTILE] * 2, "paper": [HOSTILE] * 2, "ours": [HOSTILE] * 2})
    sections = nht.claims.chapter_sections_markdown(frame, {"01_a": "1. A <b>title</b>"}, {"01_a": {"P1": "01_a-c-1"}})
    rows = [line for line in sections.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[0].startswith("| {ref}`P1 <01_a-c-1>` | **reproduced** | \\<img")
    assert rows[1].startswith("| P\\`2 | **\\<img")  # an id that cannot be a safe link is shown, unlinked
    assert all(line.count(" | ") == 4 for line in rows)  # five cells: no "|" of a value splits one
    assert not raw.search(sections) and "### 1\\. A \\<b\\>title\\</b\\>" in sections  # the title: no link either
    html = nht.claims.style_claims(frame[["id", "verdict", "statement"]]).to_html()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_scoreboards_provenance_table_shows_each_folders_state(tmp_path, monkeypatch):
    from nhtlib.paths import final_chapter_dir
    from nhtlib.report import manifest, provenance

    def made(chapter, identity):
        folder = final_chapter_dir(chapter, "smoke")
        folder.mkdir(parents=True)
        (folder / "claims.csv").write_text("id,verdict\nP1,reproduced\n")
        manifest.write_manifest(folder, {"chapter": chapter, "identity": identity, "parameters": {"seed": 0},
                                         "runs": 3, "runs_trained": 1, "runs_cached": 2, "git_commit": "abc",
                                         "finished_at": "2026-01-01T10:00", "wall_time_s": 5})
        return folder

    made("01_toy_norm_hierarchy", "id-now")
    made("02_grokking", "id-before")
    edited = made("03_border_cifar", "id-now")
    (edited / "claims.csv").write_text("id,verdict\nP1,reproduced by hand\n")
    asked = []

    def expected(chapter, parameters):
        asked.append((chapter, parameters))
        return "id-now"

    table = provenance.chapter_table("smoke", ["01_toy_norm_hierarchy", "02_grokking", "03_border_cifar",
                                               "05_dlr_batchnorm"], expected_identity=expected)
    assert list(table.state) == ["current", "stale", "foreign", "missing"]
    assert "claims.csv changed after its run" in table.loc["03_border_cifar", "why"]
    assert table.loc["01_toy_norm_hierarchy", "runs (trained, cached)"] == "3 (1, 2)"
    assert asked[0] == ("01_toy_norm_hierarchy", {"scale": "smoke", "seed": 0})  # the parameters of its run


def test_verdict_changes_claim_by_claim():
    from nhtlib.report.claims import verdict_changes

    a = pd.DataFrame({"id": ["P1", "P2", "P3"], "verdict": ["reproduced", "inconclusive", "reproduced"],
                      "ours": ["0.9", "0.1", "0.8"]})
    b = pd.DataFrame({"id": ["P1", "P3", "P4"], "verdict": ["reproduced", "not reproduced", "partly"],
                      "ours": ["0.8", "0.2", "x"]})
    out = verdict_changes(a, b).set_index("id")
    assert list(out.index) == ["P1", "P2", "P3", "P4"]
    assert out.differs.tolist() == [False, True, True, True]
    assert out.flip.tolist() == [False, False, True, False]  # only reproduced <-> not reproduced is a flip
    assert (out.loc["P2", "verdict b"], out.loc["P4", "verdict a"]) == ("missing", "missing")
