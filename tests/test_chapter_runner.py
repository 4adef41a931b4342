"""The chapter runner stages a run and swaps it in only on success (defect 5: a failed run replaced the last good
executed chapter; a run with another seed replaced the book's claims without recording its seed)."""
import json
import os

import nbformat
import pytest

from nhtlib.cli import runner as chapters
from nhtlib.report.verdicts import ClaimResult
from nhtlib.report import claims
from nhtlib import paths

CHAPTER = "tiny"


@pytest.fixture
def notebooks(tmp_path):
    """A throw-away chapter: parameters scale/seed/value/fail, claims saved, then a failure when fail=True, and
    a check that the chapter reads back its own fresh claims (not the last run's) while it is staged. The defaults
    of value and fail come from $TINY_VALUE / $TINY_FAIL: a run with those is still the book's own run (its
    parameters are the defaults), while `-p value x` is another variant with a folder of its own."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('import os\nscale = "smoke"\nseed: int = 0\n'
                                       'value = os.environ.get("TINY_VALUE", "first")\n'
                                       'fail = bool(int(os.environ.get("TINY_FAIL", "0")))')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "import nhtlib\n"
            f"c = nhtlib.Claims({CHAPTER!r}, scale)\n"
            "from nhtlib.analysis.statistics import interval\n"
            "from nhtlib.report.verdicts import AtLeast, ClaimSpec\n"
            "spec = ClaimSpec('C1', 'a statement', 'paper', 'book', AtLeast('a value', 0.0))\n"
            "c.record(spec.judge(interval([1.0, 1.0, 1.0]), ours=f'{value} seed={seed}'))\n"
            "c.save()"),
        nbformat.v4.new_code_cell("if fail:\n    raise RuntimeError('failing on purpose')"),
        nbformat.v4.new_code_cell(
            "seen = list(nhtlib.report.claims.load_claims(scale).ours)\n"
            "assert seen == ([f'{value} seed={seed}'] if seed == 0 else seen), seen"),
    ]
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nbformat.write(nb, str(folder / f"{CHAPTER}.ipynb"))
    return folder


def run(notebooks, **parameters):
    return chapters.run_chapter(CHAPTER, {"scale": "smoke", **parameters}, notebook_dir=notebooks, progress=False)


def run_as_book(notebooks, monkeypatch, value=None, fail=False):
    """The book's own run (default parameters) with the notebook's defaults for value / fail set by environment."""
    monkeypatch.setenv("TINY_FAIL", "1" if fail else "0")
    if value is None:
        monkeypatch.delenv("TINY_VALUE", raising=False)
    else:
        monkeypatch.setenv("TINY_VALUE", value)
    return run(notebooks)


def results():
    return paths.results_root() / "smoke" / CHAPTER


def test_success_writes_claims_and_run_json(notebooks, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TINY_VALUE", "second")
    out = tmp_path / "copy" / "executed.ipynb"
    out.parent.mkdir()
    assert chapters.main(["run", CHAPTER, "--notebooks", str(notebooks), "-p", "scale", "smoke",
                          "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    folder = results()
    assert sorted(p.name for p in folder.iterdir()) == ["claims.csv", "executed.ipynb", "run.json"]
    assert out.read_bytes() == (folder / "executed.ipynb").read_bytes()  # --out: a copy there too
    record = json.loads((folder / "run.json").read_text())
    assert record["seed"] == 0 and record["scale"] == "smoke" and record["chapter"] == CHAPTER
    assert record["parameters"] == {"scale": "smoke"} and record["variant"] == {}
    assert record["defaults"]["seed"] == "0" and "TINY_FAIL" in record["defaults"]["fail"]
    for field in ("git_commit", "nhtlib_source_hash", "started_at", "finished_at"):
        assert record[field]
    assert record["wall_time_s"] > 0
    assert claims.load_claims("smoke").ours.tolist() == ["second seed=0"]
    assert not list((paths.results_root() / ".staging").iterdir())  # nothing left behind


def test_failed_run_keeps_the_last_good_results(notebooks, monkeypatch):
    good = run_as_book(notebooks, monkeypatch)
    before = {name: (results() / name).read_bytes() for name in ("executed.ipynb", "claims.csv", "run.json")}
    with pytest.raises(chapters.ChapterError, match="RuntimeError: failing on purpose") as info:
        run_as_book(notebooks, monkeypatch, value="broken", fail=True)
    failed = results() / "failed.ipynb"
    assert str(failed) in str(info.value) and failed.exists()
    assert "failing on purpose" in failed.read_text()
    assert {name: (results() / name).read_bytes() for name in before} == before  # byte-identical
    assert claims.load_claims("smoke").ours.tolist() == ["first seed=0"]
    run_as_book(notebooks, monkeypatch, value="again")  # the next success replaces everything, the failure included
    assert good.exists() and not failed.exists()
    assert claims.load_claims("smoke").ours.tolist() == ["again seed=0"]


def test_other_settings_go_to_their_own_folder(notebooks):
    # Catches: `nhtlib run -p value x` (a non-default setting, not the book's page) replacing the book's results.
    run(notebooks)
    book = {name: (results() / name).read_bytes() for name in ("claims.csv", "executed.ipynb", "run.json")}
    out = run(notebooks, value="other")
    variant = out.parent
    assert variant.parent.name.startswith(paths.VARIANT_PREFIX) and variant.name == CHAPTER
    assert json.loads((variant / "run.json").read_text())["variant"] == {"value": "other"}
    assert run(notebooks, value="other") == out  # the same settings: the same folder
    assert run(notebooks, value="third") != out
    assert {name: (results() / name).read_bytes() for name in book} == book
    assert claims.load_claims("smoke").ours.tolist() == ["first seed=0"]  # the Scoreboard: the book's own run only
    # where and how it runs is not another page: device and data folder keep the book's folder; a threshold does not
    declared = chapters.notebook_parameters(chapters.notebook_path("03_border_cifar"))
    assert chapters.results_variant({"scale": "cpu", "seed": 0, "device": "cuda", "data_root": "/d"}, declared) == {}
    assert chapters.results_variant({"scale": "cpu", "clean_threshold": 0.3}, declared) == {"clean_threshold": 0.3}
    assert chapters.results_variant({"scale": "cpu", "clean_threshold": 0.25}, declared) == {}  # the default


def test_other_seed_goes_to_its_own_folder(notebooks):
    run(notebooks)
    book_claims = (results() / "claims.csv").read_bytes()
    out = run(notebooks, seed=3)
    seed_folder = paths.results_root() / "smoke" / "seed-3" / CHAPTER
    assert out == seed_folder / "executed.ipynb" and (seed_folder / "claims.csv").exists()
    assert json.loads((seed_folder / "run.json").read_text())["seed"] == 3
    assert (results() / "claims.csv").read_bytes() == book_claims
    assert claims.load_claims("smoke").ours.tolist() == ["first seed=0"]  # the Scoreboard: the book's seed only


def test_chapter_dir_follows_the_staging_folder_of_its_chapter_only(tmp_path, monkeypatch):
    staged = tmp_path / "stage" / "smoke" / CHAPTER
    monkeypatch.setenv(paths.CHAPTER_OUT_ENV, str(staged))
    assert paths.chapter_dir(CHAPTER, "smoke") == staged
    assert paths.chapter_dir("other", "smoke") == paths.results_root() / "smoke" / "other"
    assert paths.chapter_dir(CHAPTER, "cpu") == paths.results_root() / "cpu" / CHAPTER
    monkeypatch.delenv(paths.CHAPTER_OUT_ENV)
    assert paths.chapter_dir(CHAPTER, "smoke") == paths.results_root() / "smoke" / CHAPTER


def test_load_claims_reads_the_default_folders_only():
    for folder, ours in [(paths.final_chapter_dir("a", "smoke"), "book"),
                         (paths.final_chapter_dir("a", "smoke", seed=5), "seed 5")]:
        c = claims.Claims("a", "smoke")
        c.record(ClaimResult("C1", "s", "p", "book", ours, 3, 0.0, 1.0, "a rule", "partly", False))
        folder.mkdir(parents=True)
        (folder / "claims.csv").write_text(c.frame().to_csv(index=False))
    assert claims.load_claims("smoke").ours.tolist() == ["book"]


def test_swap_puts_the_old_folder_back_when_the_new_one_cannot_move_in(monkeypatch):
    final = paths.results_root() / "smoke" / CHAPTER
    final.mkdir(parents=True)
    (final / "claims.csv").write_text("old")
    staging = chapters.open_staging(CHAPTER, "smoke", final)
    (staging.staged / "claims.csv").write_text("new")
    real_replace = os.replace

    def replace(src, dst):
        if str(src) == str(staging.staged):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(chapters.os, "replace", replace)
    with pytest.raises(OSError, match="No space"):
        chapters.swap_in(staging)
    assert (final / "claims.csv").read_text() == "old"
    monkeypatch.setattr(chapters.os, "replace", real_replace)
    chapters.swap_in(staging)
    assert (final / "claims.csv").read_text() == "new"
    chapters.discard(staging)
    assert not staging.scratch.exists()


# provenance: the box on top of every executed chapter, and the page identity the book builder compares --------

def test_run_records_provenance_and_opens_with_the_box(notebooks):
    executed = run(notebooks)
    record = json.loads((results() / "run.json").read_text())
    assert record["identity"] and record["runs"] == 0 and record["runs_trained"] == 0  # no declared sweeps
    assert record["device"].startswith("cpu") and record["torch_version"]
    cells = nbformat.read(str(executed), as_version=4).cells
    box = cells[1]
    assert "nht-provenance" in box.metadata["tags"] and "How this page was made" in box.source
    injected = [c for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert all("remove-cell" in c.metadata["tags"] for c in injected)  # papermill's cell stays off the page
    assert record["nhtlib_source_hash"] in box.source and "scale** `smoke`" in box.source
    assert "{download}`download this notebook <tiny.ipynb>`" in box.source
    assert f"python -m nhtlib run {CHAPTER} -p scale smoke" in box.source
    assert "**Verdicts at a glance** (1 claims): **1** reproduced" in box.source and "| C1 |" in box.source
    run(notebooks)  # a re-run replaces its box, never stacks a second one
    cells = nbformat.read(str(results() / "executed.ipynb"), as_version=4).cells
    assert sum("nht-provenance" in c.metadata.get("tags", []) for c in cells) == 1


def test_page_identity_tracks_cells_parameters_and_library(notebooks, monkeypatch):
    from nhtlib.cli import build

    base = chapters.chapter_runs(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks).identity
    assert chapters.chapter_runs(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks).identity == base
    assert chapters.chapter_runs(CHAPTER, {"scale": "smoke", "value": "x"}, notebook_dir=notebooks).identity != base
    assert not build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]  # never run
    run(notebooks)
    assert build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
    # outputs and execution counts are not what a page is made of; its cells are
    path = notebooks / f"{CHAPTER}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello")]
    nb.cells[1].execution_count = 7
    nbformat.write(nb, str(path))
    assert build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
    # an edit of the library (its source hash) makes the page stale ...
    monkeypatch.setattr(chapters, "source_hash", lambda: "0123456789abcdef")
    assert not build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
    monkeypatch.undo()
    # ... and so does an edit of one of its cells
    nb.cells[2].source += "\n# edited"
    nbformat.write(nb, str(path))
    assert not build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
