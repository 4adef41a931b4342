"""Provenance: what made a chapter's page, and the box that says so at the top of it.

A chapter page depends on four things: the notebook's own cells, its parameters, the library's source and the runs
it reads (each run's cache key already holds its config, nhtlib's source hash and the fingerprint of its data,
`nhtlib.engine.sweep.member_key`). `chapter_identity` hashes them; the book builder (`nhtlib.cli.build`) re-executes a chapter
exactly when its identity differs from the one in its ``run.json``, so a page never shows numbers of an older
library, other parameters or other data, and an unchanged chapter is not executed again.

`box_markdown` writes the provenance box that opens every executed chapter (scale, device, torch, git commit, nhtlib
source hash, seeds, runs trained and read from the cache, wall time, date, the verdicts at a glance, a download
link and the command that re-runs the chapter); `insert_box` puts it into the executed notebook after its title.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import pandas as pd

from nhtlib.config import stable_hash

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
                     source: str) -> str:
    """What a chapter page depends on, as one hash: the notebook's cells, the parameters passed, nhtlib's source
    hash and the cache keys of the runs it reads (which hold their configs and data fingerprints)."""
    return stable_hash({"notebook": notebook_digest(notebook), "parameters": parameters, "source": source,
                        "runs": list(run_keys)}, length=24)


def device_description(device: str) -> str:
    """The device in words: 'cpu (AMD EPYC 7B13, 2 threads)' or 'cuda (NVIDIA H200)'."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu ({model}, {torch.get_num_threads()} threads)"


def _seed_text(seeds: list[int]) -> str:
    if not seeds:
        return "—"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]} ({len(seeds)})"
    return ", ".join(map(str, seeds)) + f" ({len(seeds)})"


def rerun_command(chapter: str, scale: str, *, data_root: str | None = None, device: str | None = None,
                  reads_data: bool = True) -> str:
    """The command that re-runs `chapter` at `scale`, as the README installs it (`.venv/bin/python`): with
    ``-p device cpu`` when the page was made on a CPU (`device`, the record's description, starts with "cpu"; the
    chapter's own default "auto" would take a GPU where one exists), and the data folder only where the chapter
    reads one (`reads_data`: `nhtlib.chapters.base.Chapter.data`, given by the runner)."""
    command = f".venv/bin/python -m nhtlib run {chapter} -p scale {scale}"
    if device and str(device).startswith("cpu"):
        command += " -p device cpu"
    return command + (f" -p data_root {data_root}" if data_root and reads_data else "")


def verdict_tally(verdicts: pd.Series, *, bold: bool = False) -> str:
    """'4 reproduced · 1 partly · 2 inconclusive': the count of each verdict, in the book's order of verdicts."""
    from nhtlib.report.verdicts import VERDICTS

    counts = verdicts.value_counts()
    order = [v for v in VERDICTS if v in counts] + [v for v in counts.index if v not in VERDICTS]
    return " · ".join(f"**{counts[v]}** {v}" if bold else f"{counts[v]} {v}" for v in order)


def claim_sections(notebook: str | os.PathLike) -> dict[str, tuple[int, str]]:
    """claim id -> (cell index, heading line) of the section (## or ###) whose cell shows the claim's verdict: the
    first section with a Markdown output that opens a paragraph with ``**<id>**`` (`nhtlib.report.claims.verdict_markdown`)."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    section, found = (-1, ""), {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith(("## ", "### ")):
                    section = (i, line)
        elif cell.cell_type == "code" and section[0] >= 0:
            for output in cell.get("outputs", []):
                text = output.get("data", {}).get("text/markdown", "")
                for match in re.finditer(r"(?m)^\*\*([^*\s]+)\*\*", "".join(text)):
                    found.setdefault(match.group(1), section)
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
    `sections` (claim id -> target name, `label_sections`) each id links to the section that shows its verdict."""
    if claims is None or claims.empty:
        return ""
    sections = sections or {}
    tally = verdict_tally(claims.verdict, bold=True)
    lines = [f"**Verdicts at a glance** ({len(claims)} claims): {tally}", "",
             "| claim | verdict | statement |", "|---|---|---|"]
    for row in claims.itertuples():
        statement = str(row.statement).replace("|", "\\|").replace("\n", " ")
        claim = f"{{ref}}`{row.id} <{sections[row.id]}>`" if row.id in sections else row.id
        lines.append(f"| {claim} | **{row.verdict}** | {statement} |")
    return "\n".join(lines)


def box_markdown(record: dict[str, Any], claims: pd.DataFrame | None = None, *, download: str | None = None,
                 sections: dict[str, str] | None = None, reads_data: bool = True) -> str:
    """The provenance box of a chapter page (a MyST admonition) from its `run.json` record; `claims` (the chapter's
    claims.csv) adds the verdicts at a glance, linked to their `sections`; `download` the notebook file the
    download link offers; `reads_data` whether the chapter reads data files (its re-run command names a data
    folder only then)."""
    commit = str(record.get("git_commit", "unknown"))
    short = commit[:10] + ("+dirty" if commit.endswith("+dirty") else "")
    runs, trained = record.get("runs", 0), record.get("runs_trained", 0)
    facts = [f"**scale** `{record.get('scale')}`", f"**device** {record.get('device', 'unknown')}",
             f"**torch** {record.get('torch_version', '?')}", f"**commit** `{short}`",
             f"**nhtlib source** `{record.get('nhtlib_source_hash')}`",
             f"**seeds** {_seed_text(list(record.get('seeds', [])))}",
             f"**runs** {runs:,} ({trained:,} trained for this page, {runs - trained:,} from the cache)",
             f"**wall time** {record.get('wall_time_s', 0):,.0f} s (training {record.get('train_time_s', 0):,.0f} s)",
             f"**built** {record.get('finished_at', '?')}"]
    chapter, scale = record.get("chapter", ""), record.get("scale", "cpu")
    take = []
    if download:
        take.append(f"{{download}}`download this notebook <{download}>`")
    take.append(f"re-run it: `{rerun_command(chapter, scale, device=record.get('device'))}`")
    if scale != "paper":
        take.append(f"at the papers' scale: "
                    f"`{rerun_command(chapter, 'paper', data_root='/path/to/data', reads_data=reads_data)}`")
    body = [" · ".join(facts), "", " · ".join(take)]
    glance = verdict_glance(claims, sections)
    if glance:
        body += ["", glance]
    title = f"How this page was made: scale {scale}, {runs:,} runs" + (
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
    """A chapter folder's ``run.json``, or None when there is none (or it is not JSON)."""
    path = Path(folder) / "run.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def chapter_table(scale: str, chapters: list[str], page_source=None) -> pd.DataFrame:
    """The Scoreboard's provenance table: per chapter the scale, commit, nhtlib source hash, date, runs (trained)
    and wall time of the run its claims come from, and whether that run used the current library (a chapter whose
    claims are older than the library is flagged: re-run it)."""
    from nhtlib.paths import final_chapter_dir, source_hash

    # page_source: fn(chapter) -> the hash of the code its page executes now (`nhtlib.cli.runner.page_source_hash`);
    # without it the whole library's source is the reference

    rows = []
    for chapter in chapters:
        record = read_record(final_chapter_dir(chapter, scale))
        if record is None:
            rows.append({"chapter": chapter, "scale": scale, "built": "not run", "commit": "—", "nhtlib source": "—",
                         "runs (trained)": "—", "wall time": "—", "library": "—"})
            continue
        current = (record.get("page_source_hash") == page_source(chapter) if page_source is not None
                   else record.get("nhtlib_source_hash") == source_hash())
        rows.append({"chapter": chapter, "scale": record.get("scale", scale),
                     "built": str(record.get("finished_at", "?"))[:16].replace("T", " "),
                     "commit": str(record.get("git_commit", "unknown"))[:10],
                     "nhtlib source": record.get("nhtlib_source_hash", "?"),
                     "runs (trained)": f"{record.get('runs', 0):,} ({record.get('runs_trained', 0):,})",
                     "wall time": f"{record.get('wall_time_s', 0):,.0f} s",
                     "library": "current" if current else "OLDER than the library: re-run"})
    return pd.DataFrame(rows).set_index("chapter")
