"""Build the book: every chapter through the chapter runner with live progress, then the site from what ran.

Command line (``make book`` runs the first)::

    python -m nhtlib build                      # scale $NHT_SCALE, else cpu; every chapter, then the site
    python -m nhtlib build --scale smoke --chapters 01_toy_norm_hierarchy --no-site

1. **Chapters, one at a time** ("chapter i of N"). A chapter whose page identity (`nhtlib.cli.runner.chapter_runs`:
   its cells, parameters, nhtlib's source hash and the cache keys of its runs, which hold their data fingerprints)
   equals the one in the ``run.json`` of its last successful run is up to date and skipped. Otherwise each of its
   declared sweeps (`nhtlib.chapters.CHAPTERS`) is trained here, in this process, so that the terminal shows the sweep, its
   runs trained against found in the cache and a progress bar with an ETA per batched group; then the runner
   executes the notebook (papermill), which reads every run from the cache, and swaps its results in with the
   provenance box on top.
2. **A table of wall time per chapter** (training, notebook, runs trained and cached).
3. **The site**: a source tree ``_build/site-src/`` holding the book's pages and each chapter's executed notebook,
   built by jupyter-book without executing the chapters again (only the Scoreboard and the plan page, which read
   the chapters' results, are executed). Files are rewritten only when their bytes change, so Sphinx re-reads
   exactly the pages whose content changed.

A failure names the chapter, the cell and the error and stops the build before the site; every run that finished
is in the run cache and every chapter that finished has its results, so the next build resumes from them.
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

    @property
    def wall_s(self) -> float:
        return self.train_s + self.notebook_s


def _say(text: str) -> None:
    print(text, flush=True)


def is_up_to_date(chapter: str, parameters: dict[str, Any], *,
                  notebook_dir: str | os.PathLike | None = None) -> tuple[bool, Any]:
    """(whether the chapter's last successful run made the page these parameters would make now, its runs as
    `nhtlib.cli.runner.chapter_runs`); parameters must name the scale."""
    from nhtlib.cli.runner import chapter_runs
    from nhtlib.report.provenance import read_record

    runs = chapter_runs(chapter, parameters, notebook_dir=notebook_dir)
    record = read_record(final_chapter_dir(chapter, parameters["scale"]))
    fresh = (record is not None and record.get("identity") == runs.identity
             and (final_chapter_dir(chapter, parameters["scale"]) / "executed.ipynb").exists())
    return fresh, runs


def build_chapter(chapter: str, parameters: dict[str, Any], *, device: str = "auto",
                  force: bool = False) -> ChapterReport:
    """Bring one chapter's results up to date (see the module docstring); raises ChapterError on a failure."""
    from nhtlib.engine.cache import RunCache
    from nhtlib.cli.runner import run_chapter
    from nhtlib.cli.runner import sweeps_of

    from nhtlib.engine.source import run_source_hash

    source_hash.cache_clear()  # the library may have been edited since the last chapter: key runs on what is there
    run_source_hash.cache_clear()
    fresh, runs = is_up_to_date(chapter, parameters)
    if fresh and not force:
        _say(f"  up to date: its page was made from these {len(runs.keys)} runs, cells, parameters and library "
             f"(identity {runs.identity[:12]}); not executed")
        return ChapterReport(chapter, "up to date", runs=len(runs.keys))
    cache = RunCache()
    trained, t0 = 0, time.perf_counter()
    for sweep in sweeps_of(chapter, parameters["scale"], parameters.get("data_root")) or []:
        total, cached = sweep.cached(cache)
        _say(f"  sweep {sweep.name!r}: {total} runs, {cached} found in the cache, {total - cached} to train")
        if cached < total:
            sweep.run(device=device, progress=True, cache=cache)
            trained += total - cached
    train_s = time.perf_counter() - t0
    before = len(cache.keys())
    _say("  executing the notebook (its runs come from the cache)")
    t1 = time.perf_counter()
    run_chapter(chapter, parameters, trained_before=trained, train_time_s=train_s, progress=True)
    notebook_s = time.perf_counter() - t1
    extra = len(cache.keys()) - before
    if extra:
        _say(f"  note: the notebook trained {extra} runs that its declared sweeps (nhtlib.chapters.CHAPTERS) do not list")
    return ChapterReport(chapter, "built", runs=len(runs.keys), trained=trained + extra, train_s=train_s,
                         notebook_s=notebook_s)


def build_chapters(chapters: list[str], scale: str, *, data_root: str | None = None, device: str = "auto",
                   force: bool = False, keep_going: bool = False) -> list[ChapterReport]:
    """Every chapter in order; stops at the first failure (its report has status 'FAILED' and the error), or with
    `keep_going` goes on with the next chapters (whose runs and records do not depend on the failed one's page)."""
    from nhtlib.cli.runner import ChapterError

    parameters = {"scale": scale, **({"data_root": data_root} if data_root else {}),
                  **({"device": device} if device != "auto" else {})}
    reports = []
    for i, chapter in enumerate(chapters, 1):
        _say(f"[chapter {i} of {len(chapters)}] {chapter} (scale {scale})")
        try:
            report = build_chapter(chapter, parameters, device=device, force=force)
        except ChapterError as err:
            report = ChapterReport(chapter, "FAILED", error=str(err))
            reports.append(report)
            _say(f"  FAILED: {err}")
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


def stage_site(chapters: list[str], scale: str, root: Path, source: Path, *, rebuilt: bool) -> list[str]:
    """Fill the site source tree `source` from the checkout `root` and the chapters' executed notebooks; returns
    the files whose bytes changed. `rebuilt`: some chapter was executed or the library changed, so the pages that
    read the chapters' results are re-read even where their own text did not change."""
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
        executed = final_chapter_dir(chapter, scale) / "executed.ipynb"
        if not executed.exists():
            raise FileNotFoundError(f"chapter {chapter} has no executed notebook at {executed}; build it first")
        if _sync_bytes(executed.read_bytes(), source / "notebooks" / f"{chapter}.ipynb"):
            changed.append(f"notebooks/{chapter}.ipynb")
    modules = source / "node_modules"
    if not modules.exists() and (root / "node_modules").exists():
        modules.symlink_to(root / "node_modules", target_is_directory=True)
    return changed


def build_site(chapters: list[str], scale: str, *, root: Path, output: Path, flags: list[str],
               rebuilt: bool) -> int:
    """Stage the site source and run jupyter-book on it (html in ``<output>/_build/html``); its exit status."""
    source = output / SITE_SOURCE
    marker = source / ".nht-site.json"
    previous = json.loads(marker.read_text()) if marker.exists() else {}
    rebuilt = rebuilt or previous.get("source_hash") != source_hash() or previous.get("scale") != scale
    changed = stage_site(chapters, scale, root, source, rebuilt=rebuilt)
    _say(f"[site] {len(changed)} changed source files: {', '.join(changed[:8])}{' ...' if len(changed) > 8 else ''}")
    jb = Path(sys.executable).with_name("jupyter-book")
    command = [str(jb) if jb.exists() else "jupyter-book", "build", str(source), "--path-output", str(output), *flags]
    env = dict(os.environ, NHT_SCALE=scale)
    returncode = subprocess.run(command, env=env).returncode
    if returncode == 0:
        marker.write_text(json.dumps({"source_hash": source_hash(), "scale": scale}))
    return returncode


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m nhtlib build", description=__doc__.split("\n\n")[0])
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
    from nhtlib.cli.runner import list_chapters

    args = _parse_args(argv)
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
    _say(f"nht-book: {len(chapters)} chapters at scale {scale} (nhtlib source {source_hash()})")
    reports = build_chapters(chapters, scale, data_root=args.data_root, device=args.device, force=args.force,
                             keep_going=args.keep_going)
    _say("\n" + wall_time_table(reports))
    failed = [r for r in reports if r.status == "FAILED"]
    if failed:
        for report in failed:
            _say(f"\nchapter {report.chapter} FAILED: {report.error}")
        _say("runs that finished are cached and finished chapters keep their results: `make book` resumes from them")
        return 1
    if args.no_site:
        return 0
    if len(chapters) != len(everything):
        missing = [c for c in everything if c not in chapters and
                   not (final_chapter_dir(c, scale) / "executed.ipynb").exists()]
        if missing:
            _say(f"[site] not built: chapters {', '.join(missing)} have never been executed at scale {scale}")
            return 1
    output = Path(args.path_output) if args.path_output else root
    code = build_site(everything, scale, root=root, output=output, flags=args.sphinx_flags.split(),
                      rebuilt=any(r.status == "built" for r in reports))
    _say(f"[site] {'built' if code == 0 else 'FAILED'} in {time.perf_counter() - started:,.0f} s in all: "
         f"open {output / '_build' / 'html' / 'index.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
