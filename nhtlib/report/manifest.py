"""What ties a chapter's results files to the run that made them: the manifest in its run.json.

A successful run (`nhtlib.cli.runner.finish_run`) lists every file of the chapter's folder with its sha256 in the
folder's ``run.json`` (`write_manifest`), beside the run's identity (seed, parameters, commit, page identity). The
builder and the Scoreboard then ask `check_folder` what a folder holds:

- ``current``: every listed file is there with its bytes, nothing else is, and the page identity is the one the
  chapter's page would have now;
- ``stale``: the files are the run's own, but the run made another page (other cells, parameters, library or runs)
  or its run.json predates manifests;
- ``foreign``: a listed file is gone or changed, or a results file is there that the run did not write (something
  other than the run of run.json wrote into the folder, e.g. a notebook executed outside the runner);
- ``not executed``: the folder has no run.json; ``missing``: there is no folder.

Pure functions of the folder's bytes: no command-line code is imported here (report must not import cli).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from nhtlib.paths import RUN_RECORD, atomic_write_bytes

STATES = ("current", "stale", "foreign", "missing", "not executed")
FAILED_NOTEBOOK = "failed.ipynb"  # a failed run's notebook, kept beside the last good results on purpose
NOT_RESULTS = frozenset({RUN_RECORD, FAILED_NOTEBOOK})  # files of the folder that are no run's results


@dataclasses.dataclass(frozen=True)
class FolderStatus:
    """What a chapter folder holds (`check_folder`): `state` (one of STATES) and `reasons`, one per offending file
    or fact, in words (empty when current)."""

    state: str
    reasons: tuple[str, ...] = ()

    @property
    def current(self) -> bool:
        return self.state == "current"

    def describe(self) -> str:
        """'current', or e.g. 'foreign: claims.csv changed after its run'."""
        return self.state + (": " + "; ".join(self.reasons) if self.reasons else "")


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def results_files(folder: Path) -> list[str]:
    """The results files of a chapter folder, as sorted POSIX paths relative to it, recursively: every file except
    run.json, a failed run's notebook and hidden files (an atomic write's temporary)."""
    out = []
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and rel.as_posix() not in NOT_RESULTS and not any(p.startswith(".") for p in rel.parts):
            out.append(rel.as_posix())
    return out


def manifest(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every results file of `folder` (`results_files`)."""
    return {rel: _sha256(Path(folder) / rel) for rel in results_files(folder)}


def write_manifest(folder: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """Write ``folder/run.json``: the run's record `identity` (seed, parameters, commit, page identity ...) with
    ``files``, the manifest of the folder as it is now; returns what was written. Call it last, once every results
    file is in place."""
    record = {**identity, "files": manifest(folder)}
    atomic_write_bytes(Path(folder) / RUN_RECORD, json.dumps(record, indent=1, default=str).encode())
    return record


def read_run_record(folder: Path) -> dict[str, Any] | None:
    """The folder's run.json as a dict; None when there is none. Raises ValueError when it cannot be read."""
    path = Path(folder) / RUN_RECORD
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} cannot be read ({err})") from err
    if not isinstance(record, dict):
        raise ValueError(f"{path} holds no run record (a JSON object)")
    return record


def check_folder(folder: Path, expected_identity: str | None = None) -> FolderStatus:
    """What the chapter folder `folder` holds (see the module docstring). `expected_identity`: the identity the
    chapter's page would have now (`nhtlib.cli.runner.chapter_runs(...).identity`); None checks the files only."""
    folder = Path(folder)
    if not folder.is_dir():
        return FolderStatus("missing", (f"no folder {folder}",))
    try:
        record = read_run_record(folder)
    except ValueError as err:
        return FolderStatus("foreign", (str(err),))
    if record is None:
        return FolderStatus("not executed", (f"no {RUN_RECORD} in {folder}",))
    listed = record.get("files")
    if not isinstance(listed, dict):
        return FolderStatus("stale", (f"{RUN_RECORD} lists no files (written before results were checked)",))
    foreign = _foreign_files(folder, listed)
    if foreign:
        return FolderStatus("foreign", tuple(foreign))
    if expected_identity is not None and record.get("identity") != expected_identity:
        return FolderStatus("stale", (f"made by another page (identity {str(record.get('identity'))[:12]}, the page "
                                      f"now is {expected_identity[:12]}): other cells, parameters, library or runs",))
    return FolderStatus("current")


def _foreign_files(folder: Path, listed: dict[str, str]) -> list[str]:
    """One reason per file that is not as the run left it: gone, changed, or not written by it."""
    reasons = []
    present = set(results_files(folder))
    for rel, sha in sorted(listed.items()):
        if rel not in present:
            reasons.append(f"{rel} is gone")
        elif _sha256(folder / rel) != sha:
            reasons.append(f"{rel} changed after its run")
    reasons += [f"{rel} was not written by its run" for rel in sorted(present - set(listed))]
    return reasons
