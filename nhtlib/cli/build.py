"""Build the book: every chapter through the chapter runner with live progress, then the site from what ran.

Command line (``make book`` runs the first)::

    python -m nhtlib build                      # scale $NHT_SCALE, else cpu; every chapter, then the site
    python -m nhtlib build --scale smoke --chapters 01_toy_norm_hierarchy --no-site

1. **Chapters, one at a time** ("chapter i of N"). A chapter whose page identity (`nhtlib.cli.runner.chapter_runs`:
   its cells, parameters, nhtlib's source hash and the cache keys of its runs, which hold their data fingerprints)
   equals the one in the ``run.json`` of its last successful run, and whose results files are all as that run left
   them (`nhtlib.report.manifest.check_folder`: "current", not "stale" or "foreign"), is up to date and skipped.
   Otherwise each of its
   declared sweeps (`nhtlib.chapters.CHAPTERS`) is trained here, in this process, so that the terminal shows the sweep, its
   runs trained against found in the cache and a progress bar with an ETA per batched group; then the runner
   executes the notebook (papermill), which reads every run from the cache, and swaps its results in with the
   provenance box on top.
2. **A table of wall time per chapter** (training, notebook, runs trained and cached) and the state of every
   chapter's results (current, stale, foreign, not executed, and why).
3. **The site**: a source tree ``_build/site-src/`` holding the book's pages, each chapter's executed notebook and
   the files its provenance box links (``notebooks/<chapter>_files/``: claims.csv, run tables, figures; the
   Scoreboard's zip of every claim beside it in ``book/``), built by jupyter-book without executing the chapters
   again (only the Scoreboard and the plan page, which read the chapters' results, are executed). A chapter whose
   results are not current (``--chapters`` builds leave the others as they are) is published with a warning on top
   that says why. Files are rewritten only when their bytes change, so Sphinx re-reads exactly the pages whose
   content changed.

A failure names the chapter, the cell and the error (one line; also for a dead kernel, a full disk) and stops the
build before the site; every run that finished is in the run cache and every chapter that finished has its
results, so the next build resumes from them (a swap a kill interrupted is finished first, `recover_staging`).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from nhtlib.config import ConfigError, resolve_scale
from nhtlib.paths import final_chapter_dir, repo_root, source_hash

SITE_SOURCE = Path("_build") / "site-src"  # relative to the checkout
EXECUTED_PAGES = ("book/scoreboard.md", "book/plan.md")  # pages with code cells: executed by the site build
CHAPTERS_MARK = "{{ chapters }}"  # intro.md's placeholder for the table of chapters (made from the registry)
STATUS_MARK = "{{ verdicts:"  # intro.md's placeholder for a chapter's verdict counts: {{ verdicts:<chapter> }}


@dataclasses.dataclass
class ChapterReport:
    """What the build did with one chapter (times in seconds)."""

    chapter: str
    status: str  # 'up to date', 'built' or 'FAILED'
    runs: int = 0
    trained: int = 0
    train_s: float = 0.0
    notebook_s: float = 0.0
    error: str = ""
    state: str = ""  # its results folder's state after the build (`nhtlib.report.manifest.STATES`)

    @property
    def wall_s(self) -> float:
        return self.train_s + self.notebook_s


def _say(text: str) -> None:
    print(text, flush=True)


def chapter_state(chapter: str, parameters: dict[str, Any], *,
                  notebook_dir: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """(what the chapter's results folder holds against the page these parameters would make now, as
    `nhtlib.report.manifest.check_folder`'s FolderStatus; its runs as `nhtlib.cli.runner.chapter_runs`);
    parameters must name the scale."""
    from nhtlib.cli.runner import chapter_runs
    from nhtlib.report.manifest import check_folder

    runs = chapter_runs(chapter, parameters, notebook_dir=notebook_dir)
    return check_folder(final_chapter_dir(chapter, parameters["scale"]), runs.identity), runs


def is_up_to_date(chapter: str, parameters: dict[str, Any], *,
                  notebook_dir: str | os.PathLike | None = None) -> tuple[bool, Any]:
    """(whether the chapter's results folder is "current": made by the page these parameters would make now,
    every file as its run left it, `chapter_state`; its runs as `nhtlib.cli.runner.chapter_runs`)."""
    status, runs = chapter_state(chapter, parameters, notebook_dir=notebook_dir)
    return status.current, runs


def build_chapter(chapter: str, parameters: dict[str, Any], *, device: str = "auto",
                  force: bool = False) -> ChapterReport:
    """Bring one chapter's results up to date (see the module docstring); raises ChapterError on a failure."""
    from nhtlib.cli.runner import cache_snapshot, run_chapter, sweeps_of, trained_since
    from nhtlib.engine.cache import RunCache
    from nhtlib.engine.source import run_source_hash
    from nhtlib.report.provenance import read_record

    source_hash.cache_clear()  # the library may have been edited since the last chapter: key runs on what is there
    run_source_hash.cache_clear()
    status, runs = chapter_state(chapter, parameters)
    if status.current and not force:
        _say(f"  up to date: its page was made from these {len(runs.keys)} runs, cells, parameters and library "
             f"(identity {runs.identity[:12]}); not executed")
        return ChapterReport(chapter, "up to date", runs=len(runs.keys), state=status.state)
    if not force:
        _say(f"  results {status.describe()}")
    cache = RunCache()
    trained, t0 = set(), time.perf_counter()
    for sweep in sweeps_of(chapter, parameters["scale"], parameters.get("data_root")) or []:
        total, cached = sweep.cached(cache)
        _say(f"  sweep {sweep.name!r}: {total} runs, {cached} found in the cache, {total - cached} to train")
        if cached < total:
            before = cache_snapshot(sweep.member_keys())
            sweep.run(device=device, progress=True, cache=cache)
            trained |= trained_since(before)
    train_s = time.perf_counter() - t0
    before = len(cache.keys())
    _say("  executing the notebook (its runs come from the cache)")
    t1 = time.perf_counter()
    run_chapter(chapter, parameters, trained_keys=trained, train_time_s=train_s, progress=True)
    notebook_s = time.perf_counter() - t1
    extra = len(cache.keys()) - before
    if extra:
        _say(f"  note: the notebook trained {extra} runs that its declared sweeps (nhtlib.chapters.CHAPTERS) do not list")
    record = read_record(final_chapter_dir(chapter, parameters["scale"])) or {}
    return ChapterReport(chapter, "built", runs=len(runs.keys), trained=int(record.get("runs_trained", 0)) + extra,
                         train_s=train_s, notebook_s=notebook_s, state="current")


def build_chapters(chapters: list[str], scale: str, *, data_root: str | None = None, device: str = "auto",
                   force: bool = False, keep_going: bool = False) -> list[ChapterReport]:
    """Every chapter in order; stops at the first failure (its report has status 'FAILED' and the error), or with
    `keep_going` goes on with the next chapters (whose runs and records do not depend on the failed one's page)."""
    from nhtlib.cli.runner import ChapterError, failure_line
    from nhtlib.config import ConfigError

    parameters = {"scale": scale, **({"data_root": data_root} if data_root else {}),
                  **({"device": device} if device != "auto" else {})}
    reports = []
    for i, chapter in enumerate(chapters, 1):
        _say(f"[chapter {i} of {len(chapters)}] {chapter} (scale {scale})")
        try:
            report = build_chapter(chapter, parameters, device=device, force=force)
        except (ChapterError, ConfigError, OSError) as err:  # one line each; the build goes on or stops
            report = ChapterReport(chapter, "FAILED", error=str(err) if not isinstance(err, OSError)
                                   else failure_line(err))
            reports.append(report)
            _say(f"  FAILED: {report.error}")
            if keep_going:
                continue
            break
        if report.status == "up to date":
            reports.append(report)
            continue
        _say(f"  {report.status}: {report.wall_s:,.0f} s (training {report.train_s:,.0f} s, notebook "
             f"{report.notebook_s:,.0f} s); {report.trained} of {report.runs} runs trained")
        reports.append(report)
    return reports


def wall_time_table(reports: list[ChapterReport]) -> str:
    """The build's closing table: per chapter its status, runs, runs trained, training, notebook and wall time."""
    header = f"{'chapter':<26} {'status':<11} {'runs':>6} {'trained':>8} {'training s':>11} {'notebook s':>11} " \
             f"{'wall s':>8}"
    lines = [header, "-" * len(header)]
    for r in reports:
        lines.append(f"{r.chapter:<26} {r.status:<11} {r.runs:>6} {r.trained:>8} {r.train_s:>11.0f} "
                     f"{r.notebook_s:>11.0f} {r.wall_s:>8.0f}")
    lines.append(f"{'total':<26} {'':<11} {sum(r.runs for r in reports):>6} {sum(r.trained for r in reports):>8} "
                 f"{sum(r.train_s for r in reports):>11.0f} {sum(r.notebook_s for r in reports):>11.0f} "
                 f"{sum(r.wall_s for r in reports):>8.0f}")
    return "\n".join(lines)


# The site ---------------------------------------------------------------------------------------------------

def _sync_bytes(data: bytes, target: Path) -> bool:
    """Write `data` to `target` only when its bytes differ (an unchanged file keeps its mtime); True if written."""
    if target.exists() and target.read_bytes() == data:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return True


def verdict_counts_text(chapter: str, scale: str) -> str:
    """'5 reproduced · 1 partly · 2 inconclusive' from the chapter's claims.csv ('not run' without one)."""
    import pandas as pd

    path = final_chapter_dir(chapter, scale) / "claims.csv"
    if not path.exists():
        return "not run at this scale"
    from nhtlib.report.provenance import verdict_tally

    return verdict_tally(pd.read_csv(path).verdict) or "no claims"


def chapters_table(scale: str) -> str:
    """The introduction's table of chapters, made from the registry (`nhtlib.chapters.CHAPTERS`): each chapter's
    title (a link to its page), its summary and its verdict counts at `scale`."""
    from nhtlib.chapters import CHAPTERS

    rows = ["| Chapter | What it reproduces | Verdicts (this build) |", "|---|---|---|"]
    for chapter in CHAPTERS.values():
        rows.append(f"| {{doc}}`{chapter.title} <../notebooks/{chapter.name}>` | {chapter.summary or '—'} | "
                    f"{verdict_counts_text(chapter.name, scale)} |")
    return "\n".join(rows)


def _render_intro(text: str, scale: str) -> str:
    """intro.md with ``{{ chapters }}`` replaced by the table of chapters (`chapters_table`) and each
    ``{{ verdicts:<chapter> }}`` placeholder by the chapter's verdict counts."""
    text = text.replace(CHAPTERS_MARK, chapters_table(scale)) if CHAPTERS_MARK in text else text
    out, start = [], 0
    while (i := text.find(STATUS_MARK, start)) >= 0:
        j = text.index("}}", i)
        out += [text[start:i], verdict_counts_text(text[i + len(STATUS_MARK):j].strip(), scale)]
        start = j + 2
    return "".join(out + [text[start:]])


def site_config(root: Path) -> bytes:
    """The site's _config.yml: the book's, with the chapter notebooks shown as executed (never executed again)."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    execute = config.setdefault("execute", {})
    execute["execute_notebooks"] = "force"  # the pages with code cells (scoreboard, plan) run when they are read
    execute["exclude_patterns"] = ["notebooks/*"]  # the chapters arrive executed, by the runner
    return ("# generated by nhtlib.cli.build from the book's _config.yml: do not edit\n"
            + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)).encode()


def stage_site(chapters: list[str], scale: str, root: Path, source: Path, *, rebuilt: bool,
               states: dict[str, Any] | None = None) -> list[str]:
    """Fill the site source tree `source` from the checkout `root` and the chapters' executed notebooks; returns
    the files whose bytes changed. `rebuilt`: some chapter was executed or the library changed, so the pages that
    read the chapters' results are re-read even where their own text did not change. `states`: chapter -> its
    folder's FolderStatus (`chapter_state`; default: `check_folder` of its files alone). A chapter that is not
    "current" is published with a warning box on top saying why (its page is part of the book's table of contents,
    so leaving it out would break the site; a reader sees it is not this build's)."""
    from nhtlib.report.manifest import check_folder

    changed = []
    source.mkdir(parents=True, exist_ok=True)
    if _sync_bytes(site_config(root), source / "_config.yml"):
        changed.append("_config.yml")
    if _sync_bytes((root / "_toc.yml").read_bytes(), source / "_toc.yml"):
        changed.append("_toc.yml")
    for path in sorted((root / "book").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(root)
            data = path.read_bytes()
            if rel.as_posix() == "book/intro.md":
                data = _render_intro(data.decode(), scale).encode()
            if _sync_bytes(data, source / rel):
                changed.append(rel.as_posix())
            elif rebuilt and rel.as_posix() in EXECUTED_PAGES:
                os.utime(source / rel)  # re-read (and so re-executed) by the site build
                changed.append(rel.as_posix())
    for chapter in chapters:
        folder = final_chapter_dir(chapter, scale)
        executed = folder / "executed.ipynb"
        if not executed.exists():
            raise FileNotFoundError(f"chapter {chapter} has no executed notebook at {executed}; build it first")
        status = (states or {}).get(chapter) or check_folder(folder)
        data = executed.read_bytes() if status.current else _with_warning(executed.read_bytes(), chapter, status)
        if _sync_bytes(data, source / "notebooks" / f"{chapter}.ipynb"):
            changed.append(f"notebooks/{chapter}.ipynb")
        changed += stage_takeaways(chapter, folder, source)
    changed += _stage_claims_zip(scale, source)
    modules = source / "node_modules"
    if not modules.exists() and (root / "node_modules").exists():
        modules.symlink_to(root / "node_modules", target_is_directory=True)
    return changed


def stage_takeaways(chapter: str, folder: Path, source: Path) -> list[str]:
    """Copy the files the chapter's provenance box links (`nhtlib.report.provenance.linked_files`: claims.csv, its
    run tables, its figures) from its results folder to ``<source>/notebooks/<chapter>_files/`` beside its page
    (`provenance.files_folder`), where the box's {download} links find them (Sphinx copies each into the html's
    _downloads/); files its run no longer has are removed. Returns the changed files."""
    from nhtlib.report.provenance import files_folder, linked_files

    rel_target = f"notebooks/{files_folder(chapter)}"
    target = source / rel_target
    wanted = linked_files(folder)
    changed = [f"{rel_target}/{rel}" for rel in wanted if _sync_bytes((folder / rel).read_bytes(), target / rel)]
    for old in sorted(target.rglob("*")) if target.is_dir() else []:
        if old.is_file() and old.relative_to(target).as_posix() not in wanted:
            old.unlink()
            changed.append(f"{rel_target}/{old.relative_to(target).as_posix()}")
    return changed


def _stage_claims_zip(scale: str, source: Path) -> list[str]:
    """The zip of every chapter's claims (`nhtlib.report.exports.claims_zip_bytes`) beside the Scoreboard page,
    ``book/<exports.claims_zip_name(scale)>``, where its {download} link finds it."""
    from nhtlib.report import exports

    rel = f"book/{exports.claims_zip_name(scale)}"
    return [rel] if _sync_bytes(exports.claims_zip_bytes(scale), source / rel) else []


def _with_warning(notebook: bytes, chapter: str, status: Any) -> bytes:
    """The executed notebook with a warning box under its title: its results are stale or foreign, and why."""
    import nbformat

    from nhtlib.report.claims import markdown_code

    nb = nbformat.reads(notebook.decode(), as_version=4)
    reasons = "\n".join(f"- {markdown_code(r)}" for r in status.reasons)
    text = (f":::{{warning}}\nThe results on this page are **{status.state}**: they are not what this build's "
            f"page of {markdown_code(chapter)} would show.\n\n{reasons}\n\n"
            f"Re-run it: {markdown_code('python -m nhtlib build --chapters ' + chapter)}.\n:::")
    cell = nbformat.v4.new_markdown_cell(text, metadata={"tags": ["nht-stale"]})
    if (nb.nbformat, nb.nbformat_minor) >= (4, 5):
        cell["id"] = "nht-results-warning"  # a fixed id: the same warning gives the same bytes (no re-read)
    else:
        cell.pop("id", None)
    nb.cells.insert(1 if nb.cells else 0, cell)
    return nbformat.writes(nb).encode()


def build_site(chapters: list[str], scale: str, *, root: Path, output: Path, flags: list[str],
               rebuilt: bool, states: dict[str, Any] | None = None) -> int:
    """Stage the site source and run jupyter-book on it (html in ``<output>/_build/html``); its exit status."""
    source = output / SITE_SOURCE
    marker = source / ".nht-site.json"
    previous = json.loads(marker.read_text()) if marker.exists() else {}
    rebuilt = rebuilt or previous.get("source_hash") != source_hash() or previous.get("scale") != scale
    changed = stage_site(chapters, scale, root, source, rebuilt=rebuilt, states=states)
    _say(f"[site] {len(changed)} changed source files: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}")
    jb = Path(sys.executable).with_name("jupyter-book")
    command = [str(jb) if jb.exists() else "jupyter-book", "build", str(source), "--path-output", str(output), *flags]
    env = dict(os.environ, NHT_SCALE=scale)
    returncode = subprocess.run(command, env=env).returncode
    if returncode == 0:
        marker.write_text(json.dumps({"source_hash": source_hash(), "scale": scale}))
    return returncode


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    from nhtlib.cli.program import program_name

    parser = argparse.ArgumentParser(prog=f"{program_name()} build", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=None, help="smoke, cpu or paper (default: $NHT_SCALE, else cpu)")
    parser.add_argument("--chapters", default=None, help="comma-separated chapter names (default: every chapter)")
    parser.add_argument("--data-root", default=None, help="the data folder (default: $NHT_DATA_ROOT or ../shared/data)")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--force", action="store_true", help="execute every chapter even when it is up to date")
    parser.add_argument("--keep-going", action="store_true", help="after a failed chapter, go on with the next")
    parser.add_argument("--no-site", action="store_true", help="bring the chapters up to date, build no site")
    parser.add_argument("--path-output", default=None, help="where _build/ goes (default: the checkout)")
    parser.add_argument("--sphinx-flags", default="-n -W --keep-going",
                        help="flags passed to jupyter-book build (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """`python -m nhtlib build`: its exit status; every failure is one line (what, the file, the fix)."""
    from nhtlib.cli.runner import failure_line

    try:
        return _main(_parse_args(argv))
    except Exception as err:  # outside a notebook cell (those are ChapterErrors, reported per chapter)
        print(f"error: {failure_line(err)}", file=sys.stderr)
        return 1


def chapter_states(chapters: list[str], parameters: dict[str, Any]) -> dict[str, Any]:
    """chapter -> its results folder's FolderStatus against the page it would have now (`chapter_state`)."""
    return {chapter: chapter_state(chapter, parameters)[0] for chapter in chapters}


def states_text(states: dict[str, Any]) -> str:
    """The build's closing list of results: one line per chapter, its state and, unless current, why."""
    return "\n".join(f"  {chapter:<26} {status.describe()}" for chapter, status in states.items())


def _main(args: argparse.Namespace) -> int:
    from nhtlib.cli.runner import list_chapters, recover_staging

    root = repo_root()
    if root is None:
        print("error: nhtlib must be installed from a checkout of the book (pip install -e .)", file=sys.stderr)
        return 2
    try:
        scale = resolve_scale(args.scale)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    everything = list_chapters()
    chapters = args.chapters.split(",") if args.chapters else everything
    unknown = sorted(set(chapters) - set(everything))
    if unknown:
        print(f"error: unknown chapters {', '.join(unknown)}; available: {', '.join(everything)}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    recover_staging()  # a run or build killed mid-swap: finish its swap, clean its staging area
    _say(f"nht-book: {len(chapters)} chapters at scale {scale} (nhtlib source {source_hash()})")
    reports = build_chapters(chapters, scale, data_root=args.data_root, device=args.device, force=args.force,
                             keep_going=args.keep_going)
    _say("\n" + wall_time_table(reports))
    parameters = {"scale": scale, **({"data_root": args.data_root} if args.data_root else {}),
                  **({"device": args.device} if args.device != "auto" else {})}
    states = chapter_states(everything, parameters)
    _say("\nresults at scale " + scale + ":\n" + states_text(states))
    failed = [r for r in reports if r.status == "FAILED"]
    if failed:
        for report in failed:
            _say(f"\nchapter {report.chapter} FAILED: {report.error}")
        _say("runs that finished are cached and finished chapters keep their results: `make book` resumes from them")
        return 1
    if args.no_site:
        return 0
    missing = [c for c, status in states.items() if status.state in ("missing", "not executed")
               or not (final_chapter_dir(c, scale) / "executed.ipynb").exists()]
    if missing:
        _say(f"[site] not built: chapters {', '.join(missing)} have never been executed at scale {scale}")
        return 1
    unchecked = [c for c, status in states.items() if not status.current]
    if unchecked:
        _say(f"[site] warning: {', '.join(unchecked)} published with a warning on top: their results are not "
             "this build's (see above)")
    output = Path(args.path_output) if args.path_output else root
    code = build_site(everything, scale, root=root, output=output, flags=args.sphinx_flags.split(),
                      rebuilt=any(r.status == "built" for r in reports), states=states)
    _say(f"[site] {'built' if code == 0 else 'FAILED'} in {time.perf_counter() - started:,.0f} s in all: "
         f"open {output / '_build' / 'html' / 'index.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
