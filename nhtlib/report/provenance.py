"""Provenance: what made a chapter's page, and the box that says so at the top of it.

A chapter page depends on four things: the notebook's own cells, its parameters, the library's source and the runs
it reads (each run's cache key already holds its config, nhtlib's source hash and the fingerprint of its data,
`nhtlib.engine.sweep.member_key`). `chapter_identity` hashes them; the book builder (`nhtlib.cli.build`) re-executes a chapter
exactly when its identity differs from the one in its ``run.json``, so a page never shows numbers of an older
library, other parameters or other data, and an unchanged chapter is not executed again.

`box_markdown` writes the provenance box that opens every executed chapter: scale, where the runs were trained (device
and versions of each environment, from the run cache: `nhtlib.report.exports.run_environments`) and where the notebook
was executed, git commit, nhtlib source hash, seeds, the parameters that differ from the notebook's defaults, runs
trained for the page and read from the cache, wall time, date, links to the chapter's files (claims.csv, its run
tables, its figures), the verdicts at a glance, a download link and the command that re-runs the chapter with its
parameters (`rerun_command`). Every value in it is escaped (`nhtlib.report.claims.markdown_text` and friends).
`insert_box` puts it into the executed notebook after its title. `chapter_table` is the Scoreboard's table of where
each chapter's claims come from, with the state of its results folder (`nhtlib.report.manifest.check_folder`).

In the site, the page notebooks/<chapter>.html links its files as notebooks/<chapter>_files/<path> (`files_folder`,
`linked_files`: the book builder copies them there), through Sphinx {download} roles.
"""
from __future__ import annotations

import hashlib
import os
import platform
import re
import shlex
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from nhtlib.config import stable_hash
from nhtlib.report.claims import markdown_code, markdown_role, markdown_text, verdict_tally  # noqa: F401 (re-exported)

BOX_TAG = "nht-provenance"  # the tag of the inserted cell (a re-run replaces it, never stacks a second one)


def notebook_digest(path: str | os.PathLike) -> str:
    """sha256 (16 hex digits) of a notebook's cell types and sources: what the page is made of, without outputs,
    execution counts or metadata, so executing a notebook does not change it."""
    import nbformat

    nb = nbformat.read(str(path), as_version=4)
    digest = hashlib.sha256()
    for cell in nb.cells:
        digest.update(cell.cell_type.encode() + b"\0" + cell.source.encode() + b"\0")
    return digest.hexdigest()[:16]


def chapter_identity(notebook: str | os.PathLike, parameters: dict[str, Any], run_keys: list[str],
                     source: str, seed_blocks: Mapping | None = None) -> str:
    """What a chapter page depends on, as one hash: the notebook's cells, the parameters passed, nhtlib's source
    hash, the cache keys of the runs it reads (which hold their configs and data fingerprints) and, where there is
    one, the chapter's seed-block record entry (the page says which verdicts moved with the seeds: `Claims.moved`)."""
    parts = {"notebook": notebook_digest(notebook), "parameters": parameters, "source": source,
             "runs": list(run_keys)}
    if seed_blocks is not None:  # a chapter without a record keeps the identity it had before records existed
        parts["seed_blocks"] = seed_blocks
    return stable_hash(parts, length=24)


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """This machine's CPU in words, e.g. 'AMD EPYC 7B13': `cpuinfo`'s model name where there is one, else what
    `platform` knows."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_description(device: str) -> str:
    """The device in words: 'cpu (AMD EPYC 7B13, 2 threads)' or 'cuda (NVIDIA H200)'."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({cpu_model()}, {torch.get_num_threads()} threads)"


def _seed_text(seeds: list[int]) -> str:
    if not seeds:
        return "—"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return ", ".join(map(str, seeds)) + f" ({len(seeds)})"


def parameter_text(value: Any) -> str:
    """A parameter's value as the runner's ``-p NAME VALUE`` reads it back (`nhtlib.cli.runner.parse_value`, like
    papermill's -p): True / False / None, an int, a float by its repr (which round-trips), else the string itself."""
    return repr(value) if isinstance(value, float) else str(value)


def rerun_command(chapter: str, scale: str, *, parameters: Mapping[str, Any] | None = None,
                  data_root: str | None = None, device: str | None = None, reads_data: bool = True) -> str:
    """The command that re-runs `chapter` at `scale`, as the README installs it (`.venv/bin/python`), for a POSIX
    shell: every one of `parameters` (the page's non-default ones) as ``-p name value`` after the scale, in name
    order, each word quoted with `shlex.quote`, so `shlex.split` and the runner's parse_value give back the same
    parameters (a string that reads as a number, "3", comes back as one: the runner's -p has no raw form, like
    papermill's). With ``-p device cpu`` when the page was made on a CPU and no device is among `parameters`
    (`device`, the record's description, starts with "cpu": the chapter's default "auto" would take a GPU where one
    exists), and `data_root` only where the chapter reads data (`reads_data`: `nhtlib.chapters.base.Chapter.data`,
    given by the runner)."""
    chosen = {name: value for name, value in (parameters or {}).items() if name != "scale"}
    if data_root and reads_data:
        chosen.setdefault("data_root", data_root)
    if device and str(device).startswith("cpu"):
        chosen.setdefault("device", "cpu")
    words = [".venv/bin/python", "-m", "nhtlib", "run", chapter, "-p", "scale", parameter_text(scale)]
    for name in sorted(chosen):
        words += ["-p", name, parameter_text(chosen[name])]
    return " ".join(shlex.quote(word) for word in words)


def claim_sections(notebook: str | os.PathLike) -> dict[str, tuple[int, str]]:
    """claim id -> (cell index, heading line) of the section (## or ###) whose cell shows the claim's verdict: the
    first section with a Markdown output that opens a paragraph with ``**<id>**`` (`nhtlib.report.claims.verdict_markdown`)."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    section, found = (-1, ""), {}
    unescape = re.compile(r"\\(.)")  # the id as `markdown_text` escaped it -> the id
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith(("## ", "### ")):
                    section = (i, line)
        elif cell.cell_type == "code" and section[0] >= 0:
            for output in cell.get("outputs", []):
                text = output.get("data", {}).get("text/markdown", "")
                for match in re.finditer(r"(?m)^\*\*([^*\s]+)\*\*", "".join(text)):
                    found.setdefault(unescape.sub(r"\1", match.group(1)), section)
    return found


def label_sections(notebook: str | os.PathLike, chapter: str) -> dict[str, str]:
    """Put a MyST target before each heading whose section shows a claim's verdict (in the executed notebook,
    rewritten in place) and return claim id -> its target name (``<chapter>-claims-<n>``: unique in the book)."""
    import nbformat

    sections = claim_sections(notebook)
    nb = nbformat.read(str(notebook), as_version=4)
    labels: dict[tuple[int, str], str] = {}
    for place in dict.fromkeys(sections.values()):
        index, heading = place
        lines = nb.cells[index].source.split("\n")
        at = lines.index(heading)
        if at > 0 and re.fullmatch(r"\(.+\)=", lines[at - 1]):
            label = lines[at - 1][1:-2]  # a target stands there already (a re-run): keep it
        else:
            label = f"{chapter}-claims-{len(labels) + 1}"
            lines.insert(at, f"({label})=")
        nb.cells[index].source = "\n".join(lines)
        labels[place] = label
    nbformat.write(nb, str(notebook))
    return {claim: labels[place] for claim, place in sections.items()}


def section_anchors(notebook: str | os.PathLike) -> dict[str, str]:
    """claim id -> the MyST target (``(label)=``) standing above the section that shows its verdict, as
    `label_sections` put it into an executed notebook; claims whose section has no target are left out."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    out = {}
    for claim, (index, heading) in claim_sections(notebook).items():
        lines = nb.cells[index].source.split("\n")
        at = lines.index(heading) if heading in lines else 0
        if at > 0 and re.fullmatch(r"\(.+\)=", lines[at - 1]):
            out[claim] = lines[at - 1][1:-2]
    return out


def verdict_glance(claims: pd.DataFrame | None, sections: dict[str, str] | None = None) -> str:
    """Markdown: the tally of verdicts and one row per claim (id, verdict, statement), or '' without claims; with
    `sections` (claim id -> target name, `label_sections`) each id links to the section that shows its verdict.
    Every value is escaped (`markdown_text`; an id that cannot be a safe link is shown without one)."""
    if claims is None or claims.empty:
        return ""
    sections = sections or {}
    tally = verdict_tally(claims.verdict, bold=True)
    lines = [f"**Verdicts at a glance** ({len(claims)} claims): {tally}", "",
             "| claim | verdict | statement |", "|---|---|---|"]
    for row in claims.itertuples():
        claim = markdown_role("ref", row.id, sections[row.id]) if row.id in sections else markdown_text(row.id)
        lines.append(f"| {claim} | **{markdown_text(row.verdict)}** | {markdown_text(row.statement)} |")
    return "\n".join(lines)


# The files a page links: the chapter folder's claims, run tables and figures (paths relative to the folder)
LINKED_FILES = ("claims.csv", "tables/runs_summary.csv", "tables/runs.parquet")
FIGURE_FILES = ("figures/*.svg", "figures/*.png")


def files_folder(chapter: str) -> str:
    """The folder beside a chapter's page in the site (notebooks/<chapter>.html) that holds the files its box links:
    ``<chapter>_files`` (the builder copies `linked_files` of the chapter folder there, keeping their paths)."""
    return f"{chapter}_files"


def linked_files(folder: str | os.PathLike) -> list[str]:
    """The files of the chapter folder `folder` that its provenance box links, as POSIX paths relative to it, in the
    order the box shows them: ``claims.csv``, ``tables/runs_summary.csv``, ``tables/runs.parquet``, the figures
    (``figures/<name>.svg`` and ``.png``, by name); only those that exist."""
    folder = Path(folder)
    found = [rel for rel in LINKED_FILES if (folder / rel).is_file()]
    figures = sorted({p.relative_to(folder).as_posix() for pattern in FIGURE_FILES for p in folder.glob(pattern)
                      if p.is_file()})
    return found + figures


def _file_links(chapter: str, files: Iterable[str]) -> str:
    """The box's links to `files`: "{download}`claims.csv <…>` · … · figures: lambda-sweep ({download}`svg <…>`,
    {download}`png <…>`) …"."""
    files = list(files)
    links = [markdown_role("download", rel.rsplit("/", 1)[-1], f"{files_folder(chapter)}/{rel}")
             for rel in files if not rel.startswith("figures/")]
    figures: dict[str, list[str]] = {}
    for rel in (f for f in files if f.startswith("figures/")):
        stem, _, suffix = rel[len("figures/"):].rpartition(".")
        figures.setdefault(stem, []).append(markdown_role("download", suffix, f"{files_folder(chapter)}/{rel}"))
    if figures:
        links.append("figures: " + ", ".join(f"{markdown_text(stem)} ({', '.join(formats)})"
                                             for stem, formats in figures.items()))
    return " · ".join(links)


def environment_text(environment: Mapping[str, Any]) -> str:
    """One environment of `nhtlib.report.exports.run_environments` in words (not escaped): 'device cpu (AMD EPYC
    7B13), torch 2.4.1, Python 3.11.7, numpy 2.1.0, CUDA —, cuDNN — (30 runs)'; '—' for none (no CUDA on a CPU),
    'unknown' where the run's cache entry predates the record of it."""
    def shown(name: str) -> str:
        value = environment.get(name)
        return "—" if value is None else str(value)

    device, name = shown("device"), environment.get("device_name")
    if name not in (None, "unknown", device):
        device += f" ({name})"
    runs = environment.get("runs")
    return (f"device {device}, torch {shown('torch')}, Python {shown('python')}, numpy {shown('numpy')}, "
            f"CUDA {shown('cuda')}, cuDNN {shown('cudnn')}" + (f" ({runs:,} runs)" if runs is not None else ""))


def non_default_parameters(record: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of a page that differ from its notebook's defaults: the record's ``non_default_parameters``
    (the runner's), else, for a run.json written before it, the parameters passed; without the scale (every
    re-run command names it)."""
    chosen = record.get("non_default_parameters")
    if not isinstance(chosen, Mapping):
        chosen = record.get("parameters") or {}
    return {name: value for name, value in chosen.items() if name != "scale"}


def box_markdown(record: dict[str, Any], claims: pd.DataFrame | None = None, *, download: str | None = None,
                 sections: dict[str, str] | None = None, reads_data: bool = True,
                 files: Iterable[str] | None = None) -> str:
    """The provenance box of a chapter page (a MyST admonition) from its `run.json` record: the environments its
    runs were trained in (``run_environments``) and the one the notebook was executed in (``device``,
    ``torch_version``), the parameters that differ from the notebook's defaults (`non_default_parameters`) and the
    command that re-runs them (`rerun_command`), runs trained and from the cache (``runs_trained``,
    ``runs_cached``), links to the chapter's `files` (paths relative to its folder, `linked_files`; default the
    record's ``files`` manifest, filtered the same way); `claims` (the chapter's claims.csv) adds the verdicts at a
    glance, linked to their `sections`; `download` the notebook file the download link offers; `reads_data`
    whether the chapter reads data files (its papers'-scale command names a data folder only then). Every value
    from the record or the claims is escaped for where it lands."""
    commit = str(record.get("git_commit", "unknown"))
    short = commit[:10] + ("+dirty" if commit.endswith("+dirty") else "")
    runs, trained = int(record.get("runs", 0)), int(record.get("runs_trained", 0))
    cached = int(record.get("runs_cached", runs - trained))
    chapter, scale = str(record.get("chapter", "")), str(record.get("scale", "cpu"))
    environments = record.get("run_environments")
    trained_on = ("; ".join(environment_text(e) for e in environments) or "no runs") if isinstance(
        environments, list) else "not recorded (the page's run.json predates it)"
    parameters = non_default_parameters(record)
    facts = [f"**scale** {markdown_code(scale)}", f"**runs trained on** {markdown_text(trained_on)}",
             f"**notebook executed on** device {markdown_text(record.get('device', 'unknown'))}, torch "
             f"{markdown_text(record.get('torch_version', '?'))}",
             f"**commit** {markdown_code(short)}",
             f"**nhtlib source** {markdown_code(record.get('nhtlib_source_hash'))}",
             f"**seeds** {markdown_text(_seed_text(list(record.get('seeds', []))))}",
             "**parameters** " + (markdown_text(", ".join(f"{name} = {parameter_text(value)}"  # as -p takes it
                                                         for name, value in sorted(parameters.items())))
                                  or "the notebook's defaults"),
             f"**runs** {runs:,} ({trained:,} trained for this page, {cached:,} from the cache)",
             f"**wall time** {float(record.get('wall_time_s', 0)):,.0f} s "
             f"(training {float(record.get('train_time_s', 0)):,.0f} s)",
             f"**built** {markdown_text(record.get('finished_at', '?'))}"]
    if files is None:
        listed = record.get("files") if isinstance(record.get("files"), Mapping) else {}
        files = [rel for rel in listed if rel in LINKED_FILES or any(Path(rel).match(p) for p in FIGURE_FILES)]
    take = []
    if download:
        take.append(markdown_role("download", "download this notebook", download))
    rerun = rerun_command(chapter, scale, parameters=parameters, device=record.get("device"))
    take.append(f"re-run it: {markdown_code(rerun)}")
    if scale != "paper":
        paper = rerun_command(chapter, "paper", data_root="/path/to/data", reads_data=reads_data)
        take.append(f"at the papers' scale: {markdown_code(paper)}")
    body = [" · ".join(facts), ""]
    links = _file_links(chapter, files)
    if links:
        body += [f"**files** {links}", ""]
    body.append(" · ".join(take))
    glance = verdict_glance(claims, sections)
    if glance:
        body += ["", glance]
    title = f"How this page was made: scale {markdown_text(scale)}, {runs:,} runs" + (
        f" · {verdict_tally(claims.verdict)}" if claims is not None and not claims.empty else "")
    # a dropdown (sphinx-design), folded: the page opens with its abstract and key figure, the facts one tap away
    return "\n".join([f":::{{dropdown}} {title}", ":class-container: nht-provenance", *body, ":::"])


def insert_box(notebook: str | os.PathLike, markdown: str) -> None:
    """Put `markdown` as a cell tagged BOX_TAG right under the notebook's first cell (its title and abstract),
    replacing an earlier box, and keep papermill's injected-parameters cell off the page (the box states the
    parameters and the command that re-runs them); the file is rewritten in place."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    nb.cells = [c for c in nb.cells if BOX_TAG not in c.get("metadata", {}).get("tags", [])]
    for c in nb.cells:
        tags = c.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            c.metadata["tags"] = [*tags, "remove-cell"]
    cell = nbformat.v4.new_markdown_cell(markdown, metadata={"tags": [BOX_TAG]})
    nb.cells.insert(1 if nb.cells else 0, cell)
    nbformat.write(nb, str(notebook))


def read_record(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A chapter folder's ``run.json`` (`nhtlib.report.manifest.read_run_record`), or None when there is none or it
    cannot be read (the folder's state, `check_folder`, says why)."""
    from nhtlib.report.manifest import read_run_record

    try:
        return read_run_record(Path(folder))
    except ValueError:
        return None


def chapter_table(scale: str, chapters: list[str],
                  expected_identity: Callable[[str, dict[str, Any]], str] | None = None) -> pd.DataFrame:
    """The Scoreboard's provenance table, one row per chapter: the state of its results folder
    (`nhtlib.report.manifest.check_folder`: current, stale, foreign, not executed or missing) with the reasons, and
    the commit, nhtlib source hash, date, runs (trained, from the cache) and wall time of the run its claims come from.
    `expected_identity`: fn(chapter, parameters) -> the identity the chapter's page would have now with the
    parameters its run.json records (`nhtlib.cli.runner.chapter_runs(chapter, parameters).identity`, passed in by
    the page: report does not import cli); without it only the folder's files are checked against its manifest."""
    from nhtlib.paths import final_chapter_dir
    from nhtlib.report.manifest import check_folder

    rows = []
    for chapter in chapters:
        folder = final_chapter_dir(chapter, scale)
        record = read_record(folder)
        expected = None
        if record is not None and expected_identity is not None:
            expected = expected_identity(chapter, {"scale": scale, **dict(record.get("parameters") or {})})
        status = check_folder(folder, expected)
        reasons = list(status.reasons[:3]) + ([f"{len(status.reasons) - 3} more"] if len(status.reasons) > 3 else [])
        said = status.state in ("current", "missing", "not executed")  # the state says it all (and no long path)
        row = {"chapter": chapter, "state": status.state, "why": "—" if said else "; ".join(reasons)}
        if record is None:
            row.update({"built": "—", "commit": "—", "nhtlib source": "—", "runs (trained, cached)": "—",
                        "wall time": "—"})
        else:
            runs, trained = record.get("runs", 0), record.get("runs_trained", 0)
            cached = record.get("runs_cached", runs - trained)
            row.update({"built": str(record.get("finished_at", "?"))[:16].replace("T", " "),
                        "commit": str(record.get("git_commit", "unknown"))[:10],
                        "nhtlib source": str(record.get("nhtlib_source_hash", "?")),
                        "runs (trained, cached)": f"{runs:,} ({trained:,}, {cached:,})",
                        "wall time": f"{record.get('wall_time_s', 0):,.0f} s"})
        rows.append(row)
    # shown with pandas' HTML, which escapes every cell (a path or a reason never reaches the page as HTML)
    return pd.DataFrame(rows).set_index("chapter")
