"""Only the book's own run writes the book's results, and the book can tell (issue 26 items 2, 7, 8): a notebook run
outside the runner writes to results/<scale>/unstaged/; every results file is tied to its run.json by a manifest
(`nhtlib.report.manifest`), so a changed, added or removed file makes the folder "foreign" and the builder re-runs
it; the swap survives a kill -9 between any two of its steps; staging areas never leak; runs are counted trained or
cached from what happened; failures outside a notebook cell are one clear line, never a traceback."""
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import nbformat
import pytest

from nhtlib import paths
from nhtlib.cli import build
from nhtlib.cli import runner as chapters
from nhtlib.report import claims, manifest

from test_chapter_runner import CHAPTER, notebooks, results, run  # noqa: F401  (notebooks: the fixture)


def staging_areas():
    root = paths.results_root() / chapters.STAGING
    return sorted(root.iterdir()) if root.is_dir() else []


# 2. only the book's own run writes the book's results --------------------------------------------------------

def test_a_papermill_run_outside_the_runner_never_writes_the_books_results(notebooks):
    import papermill as pm

    run(notebooks)
    book = {name: (results() / name).read_bytes() for name in ("claims.csv", "executed.ipynb", "run.json")}
    assert os.environ.get(paths.CHAPTER_OUT_ENV) is None
    # the README's re-run with other parameters, by hand: plain papermill, no runner
    pm.execute_notebook(str(notebooks / f"{CHAPTER}.ipynb"), str(notebooks.parent / "out.ipynb"),
                        parameters={"scale": "smoke", "seed": 3, "value": "by hand"}, kernel_name="python3",
                        progress_bar=False)
    assert {name: (results() / name).read_bytes() for name in book} == book
    unstaged = paths.results_root() / "smoke" / paths.UNSTAGED / CHAPTER / "claims.csv"
    assert "by hand seed=3" in unstaged.read_text()  # it went to its own folder ...
    assert claims.load_claims("smoke").ours.tolist() == ["first seed=0"]  # ... which the Scoreboard never reads
    assert manifest.check_folder(results()).state == "current"
    assert build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]


def test_every_results_file_is_tied_to_its_run(notebooks):
    folder = run(notebooks, value="second").parent  # another variant: its own folder, tied to its run all the same
    record = json.loads((folder / "run.json").read_text())
    assert set(record["files"]) == set(manifest.results_files(folder)) >= {"claims.csv", "executed.ipynb"}
    assert record["seed"] == 0 and record["parameters"]["value"] == "second" and record["identity"]
    assert record["git_commit"] and record["non_default_parameters"] == {"value": "second"}
    assert manifest.check_folder(folder, record["identity"]) == manifest.FolderStatus("current")


@pytest.mark.parametrize("tamper, reason", [
    (lambda f: (f / "claims.csv").write_text("chapter,id,verdict\ntiny,C1,reproduced\n"), "claims.csv changed"),
    (lambda f: (f / "separation-toy.csv").write_text("S\n1\n"), "separation-toy.csv was not written by its run"),
    (lambda f: (f / "claims.csv").unlink(), "claims.csv is gone"),
])
def test_a_file_the_run_did_not_leave_makes_the_folder_foreign_and_the_builder_rerun_it(notebooks, tamper, reason):
    run(notebooks)
    assert build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
    tamper(results())
    status = manifest.check_folder(results())
    assert status.state == "foreign" and any(reason in r for r in status.reasons), status
    assert not build.is_up_to_date(CHAPTER, {"scale": "smoke"}, notebook_dir=notebooks)[0]
    run(notebooks)  # the next run puts the book's results back
    assert manifest.check_folder(results()).state == "current"


def test_another_page_or_an_old_record_is_stale_and_no_record_is_not_executed(notebooks, tmp_path):
    run(notebooks)
    assert manifest.check_folder(results(), "another identity").state == "stale"
    record = json.loads((results() / "run.json").read_text())
    del record["files"]  # a run.json from before manifests
    (results() / "run.json").write_text(json.dumps(record))
    assert manifest.check_folder(results()).state == "stale"
    (results() / "run.json").write_text("{ truncated")
    assert manifest.check_folder(results()).describe().startswith("foreign: ")
    (results() / "run.json").unlink()
    assert manifest.check_folder(results()).state == "not executed"
    assert manifest.check_folder(tmp_path / "nothing").state == "missing"


def test_a_stray_chapter_folder_is_not_read(notebooks):
    run(notebooks)
    stray = paths.results_root() / "smoke" / "07_renamed_away"
    stray.mkdir()
    (stray / "claims.csv").write_bytes((results() / "claims.csv").read_bytes().replace(b"tiny", b"07_renamed_away"))
    record = json.loads((results() / "run.json").read_text())
    (stray / "run.json").write_text(json.dumps({**record, "chapter": stray.name,
                                                "notebook": str(notebooks / "07_renamed_away.ipynb")}))
    assert paths.is_stray_folder(stray) and not paths.is_stray_folder(results())
    assert set(claims.load_claims("smoke").chapter) == {CHAPTER}
    (notebooks / "07_renamed_away.ipynb").write_bytes((notebooks / f"{CHAPTER}.ipynb").read_bytes())
    assert set(claims.load_claims("smoke").chapter) == {CHAPTER, stray.name}  # its notebook is back: read again


# the swap survives a crash; .staging is cleaned ---------------------------------------------------------------

KILL_SCRIPT = textwrap.dedent("""
    import os, shutil, signal, sys
    from pathlib import Path
    from nhtlib.cli import runner

    kill_at, final = int(sys.argv[1]), Path(sys.argv[2])
    staging = runner.open_staging("tiny", "smoke", final)
    (staging.staged / "claims.csv").write_text("new")
    (staging.staged / "executed.ipynb").write_text("new notebook")
    events = [0]

    def step(real):
        def wrapped(*args, **kwargs):
            events[0] += 1
            if events[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # no handler, no finally: a crash
            return real(*args, **kwargs)
        return wrapped

    folders = {str(staging.staged), str(final)}
    real_replace = os.replace
    step_replace = step(real_replace)
    runner.os.replace = lambda src, dst: (step_replace if str(src) in folders else real_replace)(src, dst)
    runner._write_journal = step(runner._write_journal)
    runner.shutil.rmtree = step(shutil.rmtree)
    runner.swap_in(staging)
    runner.discard(staging)
""")
SWAP_STEPS = ["journal 'swapping'", "old folder aside", "new folder in", "journal 'done'", "clean-up"]


@pytest.mark.parametrize("kill_at", range(1, len(SWAP_STEPS) + 2), ids=[*SWAP_STEPS, "no kill"])
def test_a_kill_between_any_two_steps_of_the_swap_leaves_old_or_new_and_the_next_run_finishes(kill_at):
    final = results()
    final.mkdir(parents=True)
    (final / "claims.csv").write_text("old")
    (final / "executed.ipynb").write_text("old notebook")
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(kill_at), str(final)], capture_output=True,
                          text=True, timeout=120)
    killed = kill_at <= len(SWAP_STEPS)
    assert proc.returncode == (-signal.SIGKILL if killed else 0), proc.stderr
    chapters.recover_staging()  # what the next run or build does first
    contents = {p.name: p.read_text() for p in final.iterdir()}
    expected = "old" if kill_at == 1 else "new"  # killed before the journal said "swapping": the run never finished
    assert contents == {"claims.csv": expected, "executed.ipynb": f"{expected} notebook"}
    assert staging_areas() == []


def test_recovery_leaves_live_runs_alone_and_moves_nothing_outside_results(tmp_path):
    live = chapters.open_staging(CHAPTER, "smoke", results())  # this process: alive
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    planted = paths.results_root() / chapters.STAGING / "planted"
    (planted / "smoke" / CHAPTER).mkdir(parents=True)
    (planted / chapters.JOURNAL).write_text(json.dumps({"state": "swapping", "staged": str(planted / "smoke" / CHAPTER),
                                                        "final": str(outside), "pid": 2**22 + 1, "host": "x"}))
    chapters.recover_staging()
    assert live.scratch.exists() and planted.exists()  # another host: it may be alive
    journal = json.loads((planted / chapters.JOURNAL).read_text())
    import socket

    (planted / chapters.JOURNAL).write_text(json.dumps({**journal, "host": socket.gethostname()}))
    chapters.recover_staging()
    assert not planted.exists() and (outside / "keep.txt").read_text() == "mine"  # removed; nothing moved
    assert live.scratch.exists()
    chapters.discard(live)


def test_old_staging_folders_are_cleaned_and_a_pre_notebook_error_leaves_none(notebooks, monkeypatch):
    leaked = paths.results_root() / chapters.STAGING / "tiny-abc123"  # what an older runner leaked
    (leaked / "smoke" / CHAPTER).mkdir(parents=True)
    old = time.time() - 2 * chapters.STALE_STAGING_S
    os.utime(leaked, (old, old))

    def broken(*args, **kwargs):
        raise ValueError("the run cache is damaged")

    monkeypatch.setattr(chapters, "chapter_runs", broken)
    with pytest.raises(ValueError, match="damaged"):
        run(notebooks)
    assert staging_areas() == []


# 7. runs counted trained or cached from what happened ---------------------------------------------------------

def test_a_retrained_run_counts_as_trained_not_cached(notebooks, tmp_path):
    import pandas as pd

    from nhtlib.engine.cache import RunCache

    cache, table = RunCache(), pd.DataFrame({"step": [0, 1]})
    for key in ("k-one", "k-two"):
        cache.save(key, table, {"seed": 0}, device="cpu", wall_time_s=1.0)
    runs = chapters.ChapterRuns("identity", ("k-one", "k-two", "k-three"), (0,), cached=2)
    before = chapters.cache_snapshot(runs.keys)
    cache.save("k-one", table, {"seed": 0}, device="cpu", wall_time_s=2.0)  # retrained while the notebook ran
    assert chapters.trained_since(before) == {"k-one"}
    folder = tmp_path / "staged"
    folder.mkdir()
    executed = folder / "executed.ipynb"
    executed.write_bytes((notebooks / f"{CHAPTER}.ipynb").read_bytes())
    record = chapters.finish_run(notebooks / f"{CHAPTER}.ipynb", executed, {"scale": "smoke"}, runs, time.time(),
                                 1.0, trained=chapters.trained_since(before))
    assert (record["runs"], record["runs_trained"], record["runs_cached"]) == (3, 1, 1)  # k-three: never made
    assert json.loads((folder / "run.json").read_text())["runs_trained"] == 1


# 8. clear messages instead of tracebacks -----------------------------------------------------------------------

def _main(notebooks, *extra):
    return chapters.main(["run", CHAPTER, "--notebooks", str(notebooks), "-p", "scale", "smoke", *extra])


@pytest.mark.parametrize("error, words", [
    ("dead kernel", ["the kernel died", "DeadKernelError"]),
    ("full disk", ["No space left on device", "free disk space", "executed.ipynb"]),
    ("no kernel", ["NoSuchKernel", "ipykernel install"]),
])
def test_a_failure_outside_the_cells_is_one_line_and_keeps_the_results(notebooks, monkeypatch, capsys, error, words):
    import papermill as pm
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import DeadKernelError

    run(notebooks)
    before = {p.name: p.read_bytes() for p in results().iterdir()}
    raised = {"dead kernel": DeadKernelError("Kernel died"),
              "full disk": OSError(errno.ENOSPC, "No space left on device", "/results/x/executed.ipynb"),
              "no kernel": NoSuchKernel("python3")}[error]

    def execute(*args, **kwargs):
        raise raised

    monkeypatch.setattr(pm, "execute_notebook", execute)
    assert _main(notebooks) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err
    assert {p.name: p.read_bytes() for p in results().iterdir()} == before and staging_areas() == []


@pytest.mark.parametrize("where", ["missing folder", "a folder", "unwritable folder"])
def test_a_bad_out_is_refused_before_anything_runs(notebooks, monkeypatch, capsys, tmp_path, where):
    import papermill as pm

    if where == "unwritable folder" and not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux's /proc (a folder no one can create files in, root included)")
    out = {"missing folder": tmp_path / "nowhere" / "x.ipynb", "a folder": tmp_path,
           "unwritable folder": "/proc/x.ipynb"}[where]

    def execute(*args, **kwargs):
        raise AssertionError("the notebook ran despite a bad --out")

    monkeypatch.setattr(pm, "execute_notebook", execute)
    assert _main(notebooks, "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(out) in err and "Traceback" not in err, err
    assert staging_areas() == [] and not results().exists()


def test_a_build_that_meets_a_full_disk_says_so_in_one_line(monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "/results/cache/runs/k.parquet")

    monkeypatch.setattr(build, "build_chapter", full)
    monkeypatch.setattr(build, "chapter_states", lambda chapters, parameters: {})
    assert build.main(["--scale", "smoke", "--chapters", "01_toy_norm_hierarchy", "--no-site"]) == 1
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if "FAILED:" in line]
    assert failed and "No space left on device: /results/cache/runs/k.parquet" in failed[0]
    assert "free disk space" in failed[0] and "Traceback" not in out
    monkeypatch.setattr(build, "build_chapters", full)
    assert build.main(["--scale", "smoke", "--no-site"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: OSError: No space left on device") and len(err.strip().splitlines()) == 1
