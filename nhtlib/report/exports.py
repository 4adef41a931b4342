"""The numbers, given away: a chapter's runs as tables, every claim of the book in one zip, and where the runs ran.

`write_tables(folder, keys)` writes, from the run cache (`nhtlib.engine.cache.RunCache`, read only), the chapter's

- ``tables/runs.parquet``: the long table, every logged row of every run, with the run's cache ``key`` and its
  config flattened into ``config.<field>`` columns (``config.train.lr``, ``config.seed`` ...);
- ``tables/runs_summary.csv``: one row per run: key, its config, ``cached`` (False for a run the cache lacks),
  ``rows`` (the number of logged rows), ``wall_time_s`` and ``last.<column>``, the last logged (non-missing) value of
  every numeric column.

`run_environments(keys)` says where those runs were trained (device, Python, numpy, torch, CUDA, cuDNN: the
``environment`` of each cache entry's metadata, "unknown" for what an older entry did not record), each distinct
environment with its number of runs; the provenance box shows them. `claims_zip(scale, target)` zips every chapter's
claims.csv; the Scoreboard links it (`claims_zip_link`).

Every file is deterministic: the same cache gives the same bytes (keys sorted, no index, fixed zip timestamps), so
a re-executed page with unchanged runs changes no file.
"""
from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from nhtlib.config import flatten
from nhtlib.paths import atomic_write_bytes, chapter_files
from nhtlib.report.claims import markdown_role

TABLES = "tables"
RUNS_TABLE = f"{TABLES}/runs.parquet"
SUMMARY_TABLE = f"{TABLES}/runs_summary.csv"
CONFIG_PREFIX = "config."
LAST_PREFIX = "last."
UNKNOWN = "unknown"  # an environment field a cache entry did not record
ENVIRONMENT_FIELDS = ("device", "device_name", "python", "numpy", "torch", "cuda", "cudnn")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold: every archive of the same files is equal


# Run tables --------------------------------------------------------------------------------------------------------

def flat_config(config: Mapping[str, Any], prefix: str = CONFIG_PREFIX) -> dict[str, Any]:
    """A run's config (`RunConfig.to_dict`: nested dicts) on one level (`nhtlib.config.flatten`) under `prefix`
    ("config.train.lr"); a list, or any other value that is no scalar, as its JSON text (a cell holds a scalar)."""
    return {name: value if value is None or isinstance(value, (bool, int, float, str))
            else json.dumps(value, sort_keys=True, default=str)
            for name, value in flatten(dict(config), prefix).items()}


def _one_type(column: pd.Series) -> pd.Series:
    """A config column whose runs hold values of different kinds (a number in one, a string in another) as text,
    so parquet can store it; ints and floats together stay numbers."""
    kinds = {type(v) for v in column if not pd.isna(v)}
    if len(kinds) > 1 and not kinds <= {int, float}:
        return column.map(lambda v: None if pd.isna(v) else str(v)).astype(object)
    return column


def _last_values(table: pd.DataFrame) -> dict[str, Any]:
    """`last.<column>`: the last non-missing value of every numeric column of a run's logged table."""
    out = {}
    for column in table.columns:
        if pd.api.types.is_numeric_dtype(table[column]):
            present = table[column].dropna()
            value = present.iloc[-1] if len(present) else None
            out[f"{LAST_PREFIX}{column}"] = value.item() if hasattr(value, "item") else value  # a Python scalar
    return out


def _frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a frame whose integer columns stay integers (nullable Int64) where some record lacks the value:
    a seed or a step count reads "3", not "3.0"."""
    frame = pd.DataFrame(records)
    for column in frame.columns:
        values = [r[column] for r in records if r.get(column) is not None]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[column] = frame[column].astype("Int64")
    return frame


def _encoded_parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_tables(folder: Path, keys: Sequence[str], cache) -> list[Path]:
    """Write ``folder/tables/runs.parquet`` and ``folder/tables/runs_summary.csv`` (see the module docstring) for
    the runs `keys` (cache keys; duplicates and order do not matter: sorted), read from `cache` (a
    `nhtlib.engine.cache.RunCache`, passed in: the report layer never imports the engine); returns the absolute paths
    written. Without keys nothing is written and earlier tables in
    `folder` are removed (a page that reads no runs gives none away). Raises ValueError when a logged column is
    named like one the tables add (``key``)."""
    folder = Path(folder)
    keys = sorted(set(keys))
    targets = [folder / RUNS_TABLE, folder / SUMMARY_TABLE]
    if not keys:
        for path in targets:
            path.unlink(missing_ok=True)
        return []
    logged, configs, summary = [], [], []
    for key in keys:
        meta, table = cache.meta(key), cache.load(key)
        config = flat_config(meta.get("config", {})) if meta else {}
        configs.append({"key": key, **config})
        if table is None or meta is None:
            summary.append({"key": key, **config, "cached": False, "rows": 0})
            continue
        if "key" in table.columns:
            raise ValueError(f"run {key}: its logged table has a column 'key', which {RUNS_TABLE} uses for the run")
        logged.append(table.assign(key=key))
        summary.append({"key": key, **config, "cached": True, "rows": len(table),
                        "wall_time_s": meta.get("wall_time_s"), **_last_values(table)})
    config_frame = _frame(configs)
    config_columns = sorted(c for c in config_frame.columns if c != "key")
    config_frame = config_frame.apply(_one_type)
    long = pd.concat(logged, ignore_index=True) if logged else pd.DataFrame({"key": pd.Series([], dtype=object)})
    long = long.merge(config_frame, on="key", how="left")
    logged_columns = [c for c in long.columns if c != "key" and c not in config_columns]
    long = long[["key", *config_columns, *logged_columns]]
    summary_frame = _frame(summary)
    last = [c for c in summary_frame.columns if c.startswith(LAST_PREFIX)]
    summary_frame = summary_frame.reindex(columns=["key", *config_columns, "cached", "rows", "wall_time_s", *last])
    atomic_write_bytes(targets[0], _encoded_parquet(long))
    atomic_write_bytes(targets[1], summary_frame.to_csv(index=False, lineterminator="\n").encode())
    return [path.resolve() for path in targets]


# Where the runs were trained ---------------------------------------------------------------------------------------

def entry_environment(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """The environment one cache entry's run was trained in, as `ENVIRONMENT_FIELDS` -> value (None where there
    is none, e.g. no CUDA on a CPU): the entry's ``environment``; for an entry written before it, its ``device`` and
    ``torch_version`` and "unknown" for the rest; all "unknown" without an entry."""
    if not meta:
        return dict.fromkeys(ENVIRONMENT_FIELDS, UNKNOWN)
    recorded = meta.get("environment")
    if isinstance(recorded, Mapping):
        return {field: recorded.get(field, UNKNOWN) for field in ENVIRONMENT_FIELDS}
    return {**dict.fromkeys(ENVIRONMENT_FIELDS, UNKNOWN), "device": meta.get("device", UNKNOWN),
            "torch": meta.get("torch_version", UNKNOWN)}


def run_environments(keys: Sequence[str], cache) -> list[dict[str, Any]]:
    """The distinct environments the runs `keys` were trained in (`entry_environment` of each cache entry), each a
    dict of `ENVIRONMENT_FIELDS` plus ``runs`` (how many of the runs; the counts add up to the number of distinct
    keys), the most common first, read from `cache` (a `nhtlib.engine.cache.RunCache`). JSON-able: the runner
    stores it in run.json as ``run_environments``."""

    def meta(key: str) -> dict[str, Any] | None:
        try:
            return cache.meta(key)
        except ValueError:  # metadata that is no JSON: the run's environment is unknown (the cache reports it)
            return None

    counts = Counter(tuple(entry_environment(meta(key)).items()) for key in sorted(set(keys)))
    ordered = sorted(counts.items(), key=lambda item: (-item[1], [str(v) for _, v in item[0]]))
    return [{**dict(environment), "runs": n} for environment, n in ordered]


# Every claim in one zip --------------------------------------------------------------------------------------------

def claims_zip_name(scale: str) -> str:
    """The zip's file name, beside the Scoreboard page in the site (book/claims-<scale>.zip)."""
    return f"claims-{scale}.zip"


def claims_zip_bytes(scale: str) -> bytes:
    """A zip of every chapter's claims.csv at `scale` (the book's folders only, `nhtlib.paths.chapter_files`), as
    ``claims-<scale>/<chapter>/claims.csv`` entries in chapter order, with fixed timestamps and modes: the same
    claims give the same bytes (so the builder's copy into the site changes nothing when they did not change)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(chapter_files(scale, "claims.csv"), key=lambda p: p.parent.name):
            entry = zipfile.ZipInfo(f"claims-{scale}/{path.parent.name}/claims.csv", date_time=ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16  # -rw-r--r--, whoever's umask wrote the file
            archive.writestr(entry, path.read_bytes(), compresslevel=9)
    return buffer.getvalue()


def claims_zip(scale: str, target: Path) -> Path:
    """Write `claims_zip_bytes` of `scale` to `target` (atomically); returns `target`."""
    target = Path(target)
    atomic_write_bytes(target, claims_zip_bytes(scale))
    return target


def claims_zip_link(scale: str) -> str:
    """MyST for the Scoreboard: a download link to `claims_zip_name` beside the page (the book builder writes it
    there with `claims_zip`)."""
    return markdown_role("download", f"every claim at scale {scale}, one claims.csv per chapter (zip)",
                         claims_zip_name(scale))
