"""The book builder's pieces (nhtlib.cli.build, nhtlib.report.provenance) on small fixtures: the site source is rewritten only
where bytes change, the intro's verdict counts, the closing table, the page identity's inputs. The whole builder at
smoke scale (a second build trains and executes nothing) is tested end to end in test_book.py."""
import os

import nbformat
import pandas as pd

from nhtlib.cli import build
from nhtlib import paths
from nhtlib.report import provenance
from nhtlib.cli.build import ChapterReport


def _notebook(path, source="x = 1"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell(source)]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _book(root):
    (root / "book" / "_ext").mkdir(parents=True)
    (root / "_config.yml").write_text("title: t\nexecute:\n  execute_notebooks: force\n")
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/intro\n")
    (root / "book" / "intro.md").write_text("# Intro\n\n| 1 | {{ verdicts:01_a }} |\n| 2 | {{ verdicts:02_b }} |\n")
    (root / "book" / "scoreboard.md").write_text("# Scoreboard\n")
    (root / "book" / "_ext" / "ext.py").write_text("def setup(app):\n    return {}\n")
    return root


def test_site_source_is_rewritten_only_where_bytes_change(tmp_path):
    root, source = _book(tmp_path / "root"), tmp_path / "site"
    executed = _notebook(paths.final_chapter_dir("01_a", "smoke") / "executed.ipynb")
    first = build.stage_site(["01_a"], "smoke", root, source, rebuilt=False)
    assert {"_config.yml", "_toc.yml", "book/intro.md", "book/scoreboard.md", "book/_ext/ext.py",
            "notebooks/01_a.ipynb"} <= set(first)
    config = (source / "_config.yml").read_text()
    assert "exclude_patterns:\n  - notebooks/*" in config  # the chapters arrive executed
    assert build.stage_site(["01_a"], "smoke", root, source, rebuilt=False) == []  # nothing changed: nothing re-read
    _notebook(executed, "x = 2")
    assert build.stage_site(["01_a"], "smoke", root, source, rebuilt=False) == ["notebooks/01_a.ipynb"]
    # after a rebuild the pages that read the chapters' results are re-read (touched), their text unchanged
    before = (source / "book" / "scoreboard.md").stat().st_mtime_ns
    os.utime(source / "book" / "scoreboard.md", ns=(before - 10**9, before - 10**9))
    assert build.stage_site(["01_a"], "smoke", root, source, rebuilt=True) == ["book/scoreboard.md"]
    assert (source / "book" / "scoreboard.md").stat().st_mtime_ns > before - 10**9


def test_intro_shows_each_chapters_verdict_counts(tmp_path):
    folder = paths.final_chapter_dir("01_a", "smoke")
    folder.mkdir(parents=True)
    pd.DataFrame({"id": ["P1", "P2", "P3"], "verdict": ["reproduced", "reproduced", "inconclusive"]}).to_csv(
        folder / "claims.csv", index=False)
    text = build._render_intro((_book(tmp_path / "root") / "book" / "intro.md").read_text(), "smoke")
    assert "| 1 | 2 reproduced · 1 inconclusive |" in text
    assert "| 2 | not run at this scale |" in text and "{{" not in text


def test_wall_time_table_totals_the_chapters():
    table = build.wall_time_table([ChapterReport("01_a", "built", runs=10, trained=4, train_s=30, notebook_s=12),
                                   ChapterReport("02_b", "up to date", runs=5)])
    lines = table.splitlines()
    assert lines[0].split() == ["chapter", "status", "runs", "trained", "training", "s", "notebook", "s", "wall", "s"]
    assert lines[2].split() == ["01_a", "built", "10", "4", "30", "12", "42"]
    assert lines[-1].split() == ["total", "15", "4", "30", "12", "42"]


def test_page_identity_holds_the_runs_it_reads(tmp_path):
    nb = _notebook(tmp_path / "n.ipynb")
    one = provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-b"], "src")
    assert one == provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-b"], "src")
    # a run's key holds its config, the library and its data's fingerprint: another key is another page
    assert one != provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-c"], "src")
    assert one != provenance.chapter_identity(nb, {"scale": "paper"}, ["key-a", "key-b"], "src")
    assert one != provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-b"], "other source")
    # the page says which verdicts moved between the seed-block record's blocks: another record is another page, and
    # a chapter without one keeps the identity it had
    assert one == provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-b"], "src", None)
    with_record = provenance.chapter_identity(nb, {"scale": "cpu"}, ["key-a", "key-b"], "src", {"differ": []})
    assert with_record != one and with_record != provenance.chapter_identity(
        nb, {"scale": "cpu"}, ["key-a", "key-b"], "src", {"differ": [{"id": "P1"}]})


def test_sweep_counts_what_the_cache_holds():
    from nhtlib.chapters import toy_norm_hierarchy as toy
    from nhtlib.engine.cache import RunCache

    sweep = toy.sweeps(toy.PRESETS["smoke"])[0]
    keys = sweep.member_keys()
    assert len(keys) == len(set(keys)) == len({c.to_dict().__repr__() for c in sweep.configs})
    assert sweep.cached() == (len(keys), 0)
    cache = RunCache()
    cache.save(keys[0], pd.DataFrame({"step": [0]}), sweep.configs[0].to_dict(), device="cpu", wall_time_s=0.0)
    assert sweep.cached(cache) == (len(keys), 1)
    # the D_LR probe is part of the key: the same configs without it are other runs
    from nhtlib.engine.sweep import member_keys

    assert set(member_keys(sweep.configs)).isdisjoint(keys)


def test_box_markdown_counts_runs_and_offers_the_notebook():
    record = {"chapter": "01_a", "scale": "cpu", "device": "cpu (X, 2 threads)", "torch_version": "2.0",
              "git_commit": "0123456789abcdef+dirty", "nhtlib_source_hash": "feed", "seeds": [0, 1, 2], "runs": 30,
              "runs_trained": 12, "wall_time_s": 61.2, "train_time_s": 50.0, "finished_at": "2026-12-01T18:00"}
    box = provenance.box_markdown(record, pd.DataFrame({"id": ["P1"], "verdict": ["partly"], "statement": ["a | b"]}),
                                  download="01_a.ipynb")
    assert box.startswith(":::{dropdown} How this page was made: scale cpu, 30 runs · 1 partly") and box.endswith(":::")
    assert ":class-container: nht-provenance" in box  # folded under the abstract, one tap away
    assert "**seeds** 0–2 (3)" in box and "**runs** 30 (12 trained for this page, 18 from the cache)" in box
    assert "`0123456789+dirty`" in box and "**wall time** 61 s (training 50 s)" in box
    assert "{download}`download this notebook <01_a.ipynb>`" in box
    assert "-p scale paper -p data_root /path/to/data" in box
    # the README's interpreter, the device the page was made on, and a data root only where a chapter reads data
    assert "re-run it: `.venv/bin/python -m nhtlib run 01_a -p scale cpu -p device cpu`" in box
    toy = provenance.rerun_command("01_toy_norm_hierarchy", "paper", data_root="/d", reads_data=False)
    assert toy == ".venv/bin/python -m nhtlib run 01_toy_norm_hierarchy -p scale paper"
    assert provenance.rerun_command("03_border_cifar", "paper", data_root="/d").endswith("-p data_root /d")
    from nhtlib.cli.runner import _reads_data

    assert not _reads_data("01_toy_norm_hierarchy") and not _reads_data("02_grokking")
    assert _reads_data("03_border_cifar") and _reads_data("05_dlr_batchnorm") and _reads_data("06_synthesis")
    assert "-p device" not in provenance.rerun_command("03_border_cifar", "cpu", device="cuda (H200)")
    assert "| P1 | **partly** | a \\| b |" in box  # a statement's "|" does not break the table


def test_claims_link_to_the_section_that_shows_their_verdict(tmp_path):
    nb = nbformat.v4.new_notebook()
    shown = nbformat.v4.new_code_cell("display(...)")
    shown.outputs = [nbformat.v4.new_output("display_data", data={
        "text/markdown": "Measured: 3.\n\n**P2** — three regimes: **reproduced**.\n\n**T2-4** — x: **partly**."})]
    later = nbformat.v4.new_code_cell("display(...)")
    later.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": "**P2** — again\n\n**P6** — y"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# 1. Title\n\n## 1.3 Three regimes"), shown,
                nbformat.v4.new_markdown_cell("## 1.4 The law $T$"), later]
    path = tmp_path / "c.ipynb"
    nbformat.write(nb, str(path))
    assert provenance.claim_sections(path) == {"P2": (0, "## 1.3 Three regimes"), "T2-4": (0, "## 1.3 Three regimes"),
                                               "P6": (2, "## 1.4 The law $T$")}  # the first place it is shown
    labels = provenance.label_sections(path, "01_a")
    assert labels == {"P2": "01_a-claims-1", "T2-4": "01_a-claims-1", "P6": "01_a-claims-2"}
    cells = nbformat.read(str(path), as_version=4).cells
    assert cells[0].source == "# 1. Title\n\n(01_a-claims-1)=\n## 1.3 Three regimes"
    assert cells[2].source == "(01_a-claims-2)=\n## 1.4 The law $T$"
    assert provenance.label_sections(path, "01_a") == labels  # a second pass keeps the targets, adds none
    assert nbformat.read(str(path), as_version=4).cells[0].source.count("claims-1)=") == 1
    glance = provenance.verdict_glance(pd.DataFrame({"id": ["P2", "X"], "verdict": ["reproduced"] * 2,
                                                     "statement": ["s"] * 2}), labels)
    assert "| {ref}`P2 <01_a-claims-1>` | **reproduced** |" in glance and "| X | **reproduced** |" in glance


def test_a_page_is_keyed_on_the_code_it_executes():
    """A chapter page's identity holds its own module, the report and analysis layers and the engine it runs; not the
    other chapters' modules (chapter 6, which reads chapters 1-4, holds theirs) and never a command."""
    from nhtlib.cli.runner import page_source_files
    from nhtlib.paths import PACKAGE_DIR

    def files(chapter):
        return {p.relative_to(PACKAGE_DIR).as_posix() for p in page_source_files(chapter)}

    toy = files("01_toy_norm_hierarchy")
    assert {"chapters/toy_norm_hierarchy.py", "report/plots.py", "report/claims.py", "analysis/regimes.py",
            "engine/train.py"} <= toy
    assert not {"chapters/border_cifar.py", "chapters/synthesis.py", "chapters/registry.py"} & toy
    assert not any(f.startswith("cli/") for f in toy)
    assert {"chapters/toy_norm_hierarchy.py", "chapters/border_cifar.py", "chapters/synthesis.py"} <= files("06_synthesis")
    assert page_source_files("not_a_chapter") is None


def test_the_introduction_lists_the_registered_chapters(tmp_path, monkeypatch):
    """The table of chapters is made from the registry: a chapter added there is listed, with its summary."""
    from nhtlib.chapters import CHAPTERS

    monkeypatch.setenv("NHT_RESULTS", str(tmp_path))
    text = build._render_intro("# Intro\n\n{{ chapters }}\n", "smoke")
    rows = [line for line in text.splitlines() if line.startswith("| {doc}")]
    assert len(rows) == len(CHAPTERS)
    for row, chapter in zip(rows, CHAPTERS.values()):
        assert f"<../notebooks/{chapter.name}>" in row and chapter.title in row
        assert chapter.summary and chapter.summary in row and row.endswith("| not run at this scale |")


def _executed_chapter(chapter, root, scale="smoke"):
    """A chapter folder as a run of `root`/notebooks/<chapter>.ipynb leaves it: executed notebook, claims.csv, a
    figure and run.json with its manifest."""
    from nhtlib.report import manifest

    notebook = _notebook(root / "notebooks" / f"{chapter}.ipynb")

    folder = paths.final_chapter_dir(chapter, scale)
    _notebook(folder / "executed.ipynb")
    pd.DataFrame({"chapter": [chapter], "id": ["P1"], "verdict": ["reproduced"]}).to_csv(folder / "claims.csv",
                                                                                         index=False)
    (folder / "figures").mkdir()
    (folder / "figures" / "lambda-sweep.svg").write_text("<svg/>")
    manifest.write_manifest(folder, {"chapter": chapter, "notebook": str(notebook), "identity": "id-1"})
    return folder


def test_the_site_publishes_a_chapter_whose_results_are_not_its_runs_only_with_a_warning(tmp_path):
    from nhtlib.report import manifest

    root, source = _book(tmp_path / "root"), tmp_path / "site"
    folder = _executed_chapter("01_a", root)
    build.stage_site(["01_a"], "smoke", root, source, rebuilt=False)
    page = (source / "notebooks" / "01_a.ipynb").read_bytes()
    assert page == (folder / "executed.ipynb").read_bytes()  # current: published as it is
    (folder / "claims.csv").write_text("chapter,id,verdict\n01_a,P1,not reproduced\n")  # written after its run
    assert "notebooks/01_a.ipynb" in build.stage_site(["01_a"], "smoke", root, source, rebuilt=False)
    cells = nbformat.read(str(source / "notebooks" / "01_a.ipynb"), as_version=4).cells
    assert "nht-stale" in cells[1].metadata["tags"] and cells[1].source.startswith(":::{warning}")
    assert "**foreign**" in cells[1].source and "- `claims.csv changed after its run`" in cells[1].source
    # with the builder's states (the page it would make now), a stale page says so too
    stale = {"01_a": manifest.FolderStatus("stale", ("made by another page",))}
    build.stage_site(["01_a"], "smoke", root, source, rebuilt=False, states=stale)
    assert "**stale**" in nbformat.read(str(source / "notebooks" / "01_a.ipynb"), as_version=4).cells[1].source


def test_the_site_holds_each_chapters_linked_files_and_the_claims_zip(tmp_path):
    import zipfile

    from nhtlib.report import exports

    root, source = _book(tmp_path / "root"), tmp_path / "site"
    folder = _executed_chapter("01_a", root)
    changed = build.stage_site(["01_a"], "smoke", root, source, rebuilt=False)
    files = source / "notebooks" / "01_a_files"  # beside notebooks/01_a.ipynb: the box's {download} links
    assert (files / "claims.csv").read_bytes() == (folder / "claims.csv").read_bytes()
    assert (files / "figures" / "lambda-sweep.svg").read_text() == "<svg/>"
    assert {"notebooks/01_a_files/claims.csv", "notebooks/01_a_files/figures/lambda-sweep.svg"} <= set(changed)
    zipped = source / "book" / exports.claims_zip_name("smoke")  # beside the Scoreboard page
    assert zipfile.ZipFile(zipped).namelist() == ["claims-smoke/01_a/claims.csv"]
    assert build.stage_site(["01_a"], "smoke", root, source, rebuilt=False) == []  # unchanged bytes: untouched
    (folder / "figures" / "lambda-sweep.svg").unlink()  # a figure its run made is gone: from the site too
    assert build.stage_site(["01_a"], "smoke", root, source, rebuilt=False) == [
        "notebooks/01_a.ipynb", "notebooks/01_a_files/figures/lambda-sweep.svg"]  # the page warns: foreign now
    assert not (files / "figures" / "lambda-sweep.svg").exists()


def test_the_build_lists_each_chapters_state():
    from nhtlib.report import manifest

    text = build.states_text({"01_a": manifest.FolderStatus("current"),
                              "02_b": manifest.FolderStatus("foreign", ("claims.csv changed after its run",))})
    assert text.splitlines() == ["  01_a                       current",
                                 "  02_b                       foreign: claims.csv changed after its run"]
