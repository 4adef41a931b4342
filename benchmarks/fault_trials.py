"""Fault and bad-input trials of the run cache, the data loaders and the chapter runner: one line per trial.

    python benchmarks/fault_trials.py [--markdown] [--only NAME,NAME]
    python benchmarks/fault_trials.py --compare /path/to/old/checkout      # one table: trial | before | after

Every trial builds its own small fixture in a temporary folder (fake CIFAR pickles, a JPEG ImageFolder, a
throw-away notebook, a planted pickle), does what a user might do by mistake, what a machine might do to a run (a
partial data copy, a flipped bit, a full file table, a killed or diverged run, a held lock) or what an attacker might
plant (a pickle that runs code, HTML in a parameter), and prints what the library did. It uses only the public API
that has existed since the first version (where a module moved, both of its homes are tried), so the same script
runs against an older checkout (`PYTHONPATH=/path/to/old/checkout python benchmarks/fault_trials.py`) to show the
behaviour before a fix; `--compare OLD` runs it once against OLD and once against this tree, each in a subprocess,
and prints both outcomes side by side. A trial that crashes is itself an outcome: its row says so.
The tests in tests/ hold the behaviour; this script is the record (`issues` closing notes quote its table).
Tiny trainings only (32 examples, 20-60 steps): the whole script takes about a minute and a half on 2 cores (three
minutes against 102c415, whose kernels import the whole library); --compare runs it twice.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import importlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

WORK = Path(tempfile.mkdtemp(prefix="nht-trials-"))
# before nhtlib is imported: nothing touches the real results/ or a shared cache ($NHT_CACHE, read by newer nhtlib)
os.environ["NHT_RESULTS"] = str(WORK / "results")
os.environ["NHT_CACHE"] = str(WORK / "results" / "cache")
os.environ.pop("NHT_CHAPTER_OUT", None)  # a trial run from inside a chapter run must not write into its staging

import nhtlib as nht  # noqa: E402

torch.set_num_threads(1)
TRIALS = []
JSON_MARK = "FAULT-TRIALS-JSON "  # the line that carries the rows in --json mode (what --compare reads)
HOSTILE = "<img src=x onerror=alert(1)>"  # stored HTML injection: what must never reach a page as a tag
NOBODY = 65534  # uid and gid of 'nobody': a second user of a shared cache


def trial(command: str):
    """Register a trial: `command` is what the user (or the machine) did, the function returns what happened."""
    def wrap(fn):
        TRIALS.append((command, fn))
        return fn
    return wrap


def shorter(text: str) -> str:
    """`text` on one line, with this run's temporary folder written $TMP (shorter rows, the same on every run)."""
    return str(text).replace("\n", " ").replace(str(WORK), "$TMP")


def short_error(err: BaseException) -> str:
    text = shorter(f"{type(err).__name__}: {err}")
    return text if len(text) <= 180 else text[:177] + "..."


def warned(caught) -> str:
    # a ResourceWarning is about a handle left open (by a payload that ran, say), not about what the library did
    messages = [shorter(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]
    return "; warned: " + " | ".join(m[:120] for m in messages) if messages else "; no warning"


def names(text: str, path: Path) -> str:
    """Whether a message names the file `path` (its full path or its name)."""
    return "names the file" if str(path) in text or path.name in text else "does not name the file"


# the tested library: modules that moved between versions --------------------------------------------------------

LIBRARY = Path(nht.__file__).resolve().parent


def library_module(*candidates: str):
    """The first of `candidates` (dotted names under nhtlib) that the tested checkout holds, imported. Checked by
    file before importing: an editable install of another checkout could otherwise resolve a module this one lacks."""
    for name in candidates:
        relative = Path(*name.split(".")[1:])
        if (LIBRARY / relative).with_suffix(".py").is_file() or (LIBRARY / relative / "__init__.py").is_file():
            return importlib.import_module(name)
    raise ImportError(f"none of {candidates} in {LIBRARY}")


def runner():
    """The chapter runner: nhtlib.cli.runner (nhtlib.chapters before the library was layered)."""
    return library_module("nhtlib.cli.runner", "nhtlib.chapters")


def claim_result(**values):
    """A ClaimResult with the given fields (the fields it has in the tested version; the rest empty)."""
    cls = nht.verdicts.ClaimResult
    defaults = {"id": "T1", "statement": "a trial claim", "paper": "paper", "source": "book", "ours": "ours",
                "n": None, "low": None, "high": None, "rule": "", "verdict": "reproduced", "null": False}
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in {**defaults, **values}.items() if k in fields})


def claims_frame(rows: list[dict]) -> pd.DataFrame:
    """A claims.csv-shaped frame (every column of `claims.COLUMNS`, empty unless given)."""
    return pd.DataFrame([{**dict.fromkeys(nht.claims.COLUMNS, ""), **row} for row in rows], columns=nht.claims.COLUMNS)


@contextlib.contextmanager
def own_results(name: str):
    """Point NHT_RESULTS and NHT_CACHE at WORK/<name>/results for one trial (its runner runs, staging and cache meet
    no other trial's); yields WORK/<name>."""
    root = WORK / name
    saved = {k: os.environ.get(k) for k in ("NHT_RESULTS", "NHT_CACHE")}
    os.environ["NHT_RESULTS"], os.environ["NHT_CACHE"] = str(root / "results"), str(root / "results" / "cache")
    try:
        yield root
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def environ(**values: str):
    """Set these environment variables for the block (a kernel or a child started inside inherits them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def child_env(**extra: str) -> dict:
    """The environment of a subprocess: this one's, importing the same nhtlib (PYTHONPATH first)."""
    path = [str(LIBRARY.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), **extra}


class Payload:
    """What an attacker plants in a pickle: unpickling it calls open(marker, 'w'), i.e. runs code (a harmless one
    that leaves the marker file behind as evidence)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def ran(marker: Path) -> str:
    return "the payload RAN (marker file written)" if marker.exists() else "the payload did not run"


def tag_state(text: str) -> str:
    """Where HOSTILE landed in rendered Markdown/HTML `text`: as a raw tag (an injection), escaped (HTML entities or
    a Markdown backslash before its '<'), only inside inline code (inert), or not at all."""
    tag = HOSTILE[:-1]  # '<img src=x onerror=alert(1)' (a renderer may drop the '>')
    kinds = set()
    for i in (i for i in range(len(text)) if text.startswith(tag, i)):
        line_before = text[text.rfind("\n", 0, i) + 1:i]
        kinds.add("escaped" if line_before.endswith("\\") else "code" if line_before.count("`") % 2 else "raw")
    if "&lt;img" in text:
        kinds.add("escaped")
    if "raw" in kinds:
        return "RAW <img onerror> tag"
    if "escaped" in kinds:
        return "escaped" + (" (and inside inline code)" if "code" in kinds else "")
    return "only inside inline code" if kinds else "not shown"


def rendered(shown) -> str:
    """The HTML or Markdown text of what a notebook cell displays (a pandas Styler, an IPython display object)."""
    for attr in ("to_html", "_repr_html_", "_repr_markdown_"):
        if hasattr(shown, attr):
            return str(getattr(shown, attr)())
    return str(getattr(shown, "data", shown))


def call_cli(module, argv: list[str]) -> str:
    """Run a command line's main(argv) in this process: its exit status and its one-line message, or the raw
    exception a user would see as a traceback."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = module.main(argv)
    except SystemExit as exit_:
        status = exit_.code
    except Exception as raw:  # noqa: BLE001 - what a user would see as a traceback
        return f"raw traceback ({short_error(raw)})"
    lines = [shorter(line) for line in err.getvalue().splitlines() if line.startswith(("error", "Error"))]
    return f"exit {status}" + (f": {lines[-1][:150]}" if lines else "")


# fixtures ----------------------------------------------------------------------------------------------------

def cifar_pickles(root: Path, per_batch: int = 40, batches=(1, 2, 3, 4, 5), seed: int = 0) -> Path:
    """A CIFAR-10 pickle layout with `per_batch` random images per batch (labels cycle through the 10 classes)."""
    folder = root / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = [f"data_batch_{i}" for i in batches] + ["test_batch"]
    for name in names:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = [int(i % 10) for i in range(per_batch)]
        with open(folder / name, "wb") as fh:
            pickle.dump({b"data": data, b"labels": labels}, fh)
    return folder


def image_folder(root: Path, per_class: int = 2) -> Path:
    from PIL import Image

    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    for split in ("train", "test"):
        for label, cls in enumerate(classes):
            (root / "cifar10" / split / cls).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                Image.fromarray(np.full((32, 32, 3), 20 * label + i, np.uint8)).save(
                    root / "cifar10" / split / cls / f"{i:04d}.jpg", quality=95)
    return root / "cifar10"


def cifar_config(root: Path, n_train: int = 100) -> "nht.RunConfig":
    task = nht.data.cifar.CIFARTask(n_train=n_train, n_test=40, image_size=8, data_root=str(root))
    return nht.RunConfig(task, nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=2))


SPARSE_PARITY = library_module("nhtlib.data.sparse_parity", "nhtlib.data.toy").SparseParityTask
TOY = nht.RunConfig(SPARSE_PARITY(n_bits=6, n_train=32, n_test=32),
                    nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=4))


def checkpoint_path_of(cache, cfg) -> Path:
    """Where a run of the one config `cfg` resumes from, computed as the sweep computes it: the batch key is the
    hash of the batch's sorted member keys (sweep `_train_batch`), the file `RunCache.checkpoint_path(batch_key)`."""
    keys = nht.sweep.member_keys([cfg])
    return cache.checkpoint_path(nht.config.stable_hash(sorted(keys), length=24))


def spy_checkpoint_paths(cache) -> list[Path]:
    """Record every checkpoint path the run asks `cache` for (to check that a planted file lies where it looks)."""
    asked, real = [], cache.checkpoint_path

    def spy(batch_key):
        path = real(batch_key)
        asked.append(Path(path))
        return path
    cache.checkpoint_path = spy
    return asked


TRIAL_CHAPTER = "99_trial"
# the throw-away chapter: a parameters cell, then claims written through nht.Claims (so through paths.chapter_dir,
# as every chapter writes them); with $NHT_TRIAL_LOG set it notes each execution's seed there
TRIAL_CELL = textwrap.dedent("""
    import dataclasses, os
    import nhtlib as nht
    if os.environ.get("NHT_TRIAL_LOG"):
        with open(os.environ["NHT_TRIAL_LOG"], "a") as log:
            log.write(f"{seed}\\n")
    if die:
        os._exit(1)  # the kernel dies (an out-of-memory kill, a segfault)
    if seed < 0:
        raise ValueError(f"seed={seed} must be >= 0")
    row = {"id": "T1", "statement": "a trial claim", "paper": "paper", "source": "book", "ours": f"seed {seed}",
           "n": None, "low": None, "high": None, "rule": "", "verdict": "reproduced", "null": False}
    fields = {f.name for f in dataclasses.fields(nht.verdicts.ClaimResult)}
    claims = nht.Claims(CHAPTER, scale)
    claims.record(nht.verdicts.ClaimResult(**{k: v for k, v in row.items() if k in fields}))
    claims.save()
    """)


def trial_notebook(chapter: str = TRIAL_CHAPTER) -> dict:
    cells = [("parameters", "scale = 'smoke'\nseed = 0\ndie = False\n"),
             ("claims", TRIAL_CELL.replace("CHAPTER", repr(chapter)))]
    return {
        "cells": [{"cell_type": "code", "id": name, "metadata": {"tags": ["parameters"]} if name == "parameters"
                   else {}, "execution_count": None, "outputs": [], "source": source} for name, source in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }


def trial_notebooks(root: Path, chapter: str = TRIAL_CHAPTER) -> Path:
    """root/notebooks/ holding the throw-away chapter as <chapter>.ipynb (the runner takes it as notebook_dir)."""
    folder = root / "notebooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chapter}.ipynb").write_text(json.dumps(trial_notebook(chapter)))
    return folder


def book_folder(scale: str = "smoke", chapter: str = TRIAL_CHAPTER) -> Path:
    """The chapter's results folder as the book reads it: results/<scale>/<chapter>/."""
    return Path(os.environ["NHT_RESULTS"]) / scale / chapter


def run_trial_chapter(folder: Path, seed: int = 0) -> Path:
    return runner().run_chapter(TRIAL_CHAPTER, {"scale": "smoke", "seed": seed}, notebook_dir=folder, progress=False)


def staging_entries() -> set[str]:
    staging = Path(os.environ["NHT_RESULTS"]) / ".staging"
    return {p.name for p in staging.iterdir()} if staging.is_dir() else set()


def celeba_attributes(path: Path, header: list[str], values: np.ndarray) -> Path:
    """A list_attr_celeba.txt: the row count, the `header` line, then '<file> v1 ... v40' rows of 1 / -1."""
    lines = [str(len(values)), " ".join(header)]
    lines += [f"{i + 1:06d}.jpg " + " ".join(f"{v:2d}" for v in row) for i, row in enumerate(values)]
    path.write_text("\n".join(lines) + "\n")
    return path


# trials ------------------------------------------------------------------------------------------------------

@trial("train a CIFAR task on a copy with 4 of 5 training pickles missing, then run the same config on the full copy")
def cache_ignores_data():
    broken, full = WORK / "broken", WORK / "full"
    cifar_pickles(full)
    cifar_pickles(broken, batches=(1,), seed=1)
    cache = nht.RunCache(WORK / "cache-data")
    try:
        nht.run([cifar_config(broken, n_train=30)], cache=cache, progress=False)
        first = "the broken copy trained"
    except Exception as err:  # noqa: BLE001
        first = f"the broken copy was refused ({short_error(err)})"
    t0 = time.perf_counter()
    nht.run([cifar_config(full, n_train=30)], cache=cache, progress=False)
    wall = time.perf_counter() - t0
    entries = len(list((WORK / "cache-data" / "runs").glob("*.json")))
    return f"{first}; full copy then took {wall:.2f} s, cache holds {entries} entr{'y' if entries == 1 else 'ies'}" \
           + (" (the broken copy's result was served for the full data)" if entries == 1 and "trained" in first
              else "")


@trial("train a CIFAR task on one complete copy, then the same config on another complete copy with other pixels")
def cache_two_copies():
    first, second = WORK / "copy-a", WORK / "copy-b"
    cifar_pickles(first, seed=2)
    cifar_pickles(second, seed=3)
    cache = nht.RunCache(WORK / "cache-copies")
    a = nht.run([cifar_config(first, n_train=30)], cache=cache, progress=False)
    t0 = time.perf_counter()
    b = nht.run([cifar_config(second, n_train=30)], cache=cache, progress=False)
    wall = time.perf_counter() - t0
    same = a.drop(columns="wall_s").equals(b.drop(columns="wall_s"))
    entries = len(list((WORK / "cache-copies" / "runs").glob("*.json")))
    return (f"second copy took {wall:.2f} s; {entries} cache entr{'y' if entries == 1 else 'ies'}; "
            f"{'identical tables: the first copy result was served' if same else 'its own result'}")


@trial("CIFARTask(n_train=200) on a copy with only data_batch_1 (40 images) present")
def missing_batches():
    root = WORK / "partial"
    cifar_pickles(root, batches=(1,))
    try:
        data = nht.data.cifar.CIFARTask(n_train=200, n_test=20, data_root=str(root)).build(0)
        return f"built {data.splits['train'].size} training images without a word"
    except Exception as err:  # noqa: BLE001
        return f"refused: {short_error(err)}"


@trial("train with SGD at lr 1e3 (diverges), summarise the runs")
def diverged_run():
    cfg = TOY.replace(train=TOY.train.replace(optimizer="sgd", lr=1e3, steps=60, n_logs=6))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = nht.run([cfg], cache=nht.RunCache(WORK / "cache-diverge"), progress=False)
    nan_rows = int(table.norm_sq.isna().sum() + np.isinf(table.norm_sq).sum())
    regime = nht.regimes.summarise_runs(table, ["run"]).regime.iloc[0]
    return f"{nan_rows} of {len(table)} rows non-finite, regime {regime!r}" + warned(caught)


@trial("load 4 valid cache entries while the process is out of file handles (EMFILE)")
def emfile():
    cache = nht.RunCache(WORK / "cache-emfile")
    configs = nht.grid(TOY, seeds=range(4))
    nht.run(configs, cache=cache, progress=False)
    keys = [p.stem for p in (WORK / "cache-emfile" / "runs").glob("*.json")]
    real_open, real_read_bytes, real_read_text = open, Path.read_bytes, Path.read_text

    def no_handles(*a, **k):
        raise OSError(errno.EMFILE, "Too many open files")
    import builtins
    builtins.open, Path.read_bytes, Path.read_text = no_handles, no_handles, no_handles
    outcome = []
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            for key in keys:
                try:
                    outcome.append("miss" if cache.load(key) is None else "hit")
                except OSError:
                    outcome.append("raised")
    finally:
        builtins.open, Path.read_bytes, Path.read_text = real_open, real_read_bytes, real_read_text
    left = len(list((WORK / "cache-emfile" / "runs").glob("*.json")))
    return f"loads: {', '.join(outcome)}; {left} of {len(keys)} entries left on disk"


@trial("overwrite one JPEG of an ImageFolder copy with another class's image, load again")
def stale_decode_cache():
    root = WORK / "jpegs"
    folder = image_folder(root)
    before = nht.data.cifar.load_cifar("cifar10", str(root))["train"][0][6 * 2].float().mean().item()
    shutil.copy(folder / "train" / "airplane" / "0000.jpg", folder / "train" / "frog" / "0000.jpg")
    after = nht.data.cifar.load_cifar("cifar10", str(root))["train"][0][6 * 2].float().mean().item()
    return f"frog/0000 mean pixel {before:.0f} -> {after:.0f} ({'new pixels' if abs(after - before) > 1 else 'old pixels served'})"


@trial("a batch's checkpoint file is garbage (a crash while writing it, a bad disk), run the config again")
def corrupt_checkpoint():
    cache = nht.RunCache(WORK / "cache-ckpt")
    cfg = TOY.replace(train=TOY.train.replace(checkpoint_every=5))
    checkpoint_path_of(cache, cfg).write_bytes(b"\x00garbage" * 100)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = nht.run([cfg], cache=cache, progress=False)
        return f"trained {len(table)} rows" + warned(caught)
    except Exception as err:  # noqa: BLE001
        return f"blocked: {short_error(err)}"


@trial("flip one bit in a cached parquet table, run the config again")
def flipped_bit():
    cache = nht.RunCache(WORK / "cache-bit")
    first = nht.run([TOY], cache=cache, progress=False)
    path = next((WORK / "cache-bit" / "runs").glob("*.parquet"))
    data = bytearray(path.read_bytes())
    import pyarrow.parquet as pq
    # flip the top exponent bit of a float64 value in the first data page (found by value)
    value = np.float64(first.norm_sq.iloc[1]).tobytes()
    at = bytes(data).find(value)
    if at < 0:
        return "could not locate a value to flip (plain encoding not used)"
    data[at + 7] ^= 0x40
    path.write_bytes(bytes(data))
    try:
        pq.read_table(path)
    except Exception:  # noqa: BLE001
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = nht.run([TOY], cache=cache, progress=False)
    changed = float(np.nanmax(np.abs(second.norm_sq.to_numpy() - first.norm_sq.to_numpy())))
    return f"largest change of a served norm value: {changed:.3g}" + warned(caught)


@trial("train 20,000 steps into a cache whose runs/ folder cannot be written (a regular file stands in its place)")
def unwritable_cache():
    root = WORK / "cache-unwritable"
    root.mkdir()
    (root / "runs").write_text("a file, not a folder")  # as root, chmod would not stop a write; this does
    cfg = TOY.replace(train=TOY.train.replace(steps=20_000, n_logs=4))
    t0 = time.perf_counter()
    try:
        nht.run([cfg], cache=nht.RunCache(root), progress=False)
        return "no error"
    except Exception as err:  # noqa: BLE001
        return f"failed after {time.perf_counter() - t0:.2f} s: {short_error(err)}"


@trial("NHT_RESULTS points below a regular file, ask for the results folder")
def unwritable_results():
    blocker = WORK / "blocker2"
    blocker.write_text("a file")
    old = os.environ["NHT_RESULTS"]
    os.environ["NHT_RESULTS"] = str(blocker / "results")
    try:
        nht.paths.results_root()
        return "no error"
    except Exception as err:  # noqa: BLE001
        names = "names NHT_RESULTS" if "NHT_RESULTS" in str(err) else "does not name NHT_RESULTS"
        return f"{names}: {short_error(err)}"
    finally:
        os.environ["NHT_RESULTS"] = old


@trial("decode an ImageFolder copy in which one JPEG is truncated")
def truncated_jpeg():
    root = WORK / "jpegs-bad"
    folder = image_folder(root)
    bad = folder / "train" / "cat" / "0001.jpg"
    bad.write_bytes(bad.read_bytes()[:40])
    try:
        nht.data.cifar.load_cifar("cifar10", str(root))
        return "decoded without an error"
    except Exception as err:  # noqa: BLE001
        return ("names the file: " if str(bad) in str(err) else "does not name the file: ") + short_error(err)


@trial("load a pickle layout in which data_batch_3 is truncated")
def truncated_pickle():
    root = WORK / "pickles-bad"
    folder = cifar_pickles(root)
    bad = folder / "data_batch_3"
    bad.write_bytes(bad.read_bytes()[:500])
    try:
        nht.data.cifar.load_cifar("cifar10", str(root))
        return "loaded without an error"
    except Exception as err:  # noqa: BLE001
        return ("names the file: " if str(bad) in str(err) else "does not name the file: ") + short_error(err)


@trial("ask for device='mps' on a machine without Apple's MPS")
def mps():
    if hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        return "skipped: this machine has MPS"
    try:
        return f"accepted: resolve_device -> {nht.resolve_device('mps')!r}"
    except Exception as err:  # noqa: BLE001
        return f"refused: {short_error(err)}"


@trial("run a chapter (seed 0), then re-run it with seed=-1 (fails) and with seed=3")
def failed_chapter_run():
    with own_results("runner-failed") as root:
        folder = trial_notebooks(root)
        good = run_trial_chapter(folder, seed=0)
        claims_path = book_folder() / "claims.csv"
        size_good, claims_good = good.stat().st_size, claims_path.read_text()
        try:
            run_trial_chapter(folder, seed=-1)
        except Exception:  # noqa: BLE001
            pass
        kept = good.exists() and good.stat().st_size == size_good
        run_trial_chapter(folder, seed=3)
        seed3_overwrote = claims_path.read_text() != claims_good
        recorded = any(p.name in ("run.json", "params.json") for p in claims_path.parent.iterdir())
    return (f"failed run {'kept' if kept else 'replaced'} the good executed notebook; seed 3 "
            f"{'overwrote' if seed3_overwrote else 'left alone'} the seed-0 claims.csv; parameters "
            f"{'recorded' if recorded else 'not recorded'} beside claims.csv")


# issue 26: one trial per defect ----------------------------------------------------------------------------------

@trial("plant a checkpoint (a pickle whose __reduce__ runs code) at the path a tiny run resumes from, run it")
def planted_checkpoint():
    cache = nht.RunCache(WORK / "cache-planted")
    cfg = TOY.replace(train=TOY.train.replace(checkpoint_every=5))
    path, marker = checkpoint_path_of(cache, cfg), WORK / "checkpoint-payload-ran"
    torch.save({"payload": Payload(marker)}, path)
    asked = spy_checkpoint_paths(cache)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = nht.run([cfg], cache=cache, progress=False)
        outcome, messages = f"the run trained {len(table)} rows", " ".join(str(w.message) for w in caught)
    except Exception as err:  # noqa: BLE001
        outcome, messages, caught = f"the run failed: {short_error(err)}", str(err), []
    placed = "" if path in asked else f" (the run asked for {[p.name for p in asked]}, not {path.name})"
    refused = "refus" in messages.lower() and path.name in messages
    return (f"{ran(marker)}; {outcome}; " + ("refused by name" if refused else "not refused by name") + placed
            + warned(caught))


@trial("plant a CIFAR pickle (data_batch_1 with a payload beside its data and labels) in a data folder, load it")
def planted_cifar_pickle():
    root, marker = WORK / "planted-cifar", WORK / "cifar-payload-ran"
    folder = cifar_pickles(root)
    with open(folder / "data_batch_1", "rb") as fh:
        batch = pickle.load(fh)  # our own fixture, written just above
    batch[b"batch_label"] = Payload(marker)
    with open(folder / "data_batch_1", "wb") as fh:
        pickle.dump(batch, fh)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            arrays = nht.data.cifar.load_cifar("cifar10", str(root))
        return f"{ran(marker)}; loaded {len(arrays['train'][1])} training images" + warned(caught)
    except Exception as err:  # noqa: BLE001
        return f"{ran(marker)}; refused, {names(str(err), folder / 'data_batch_1')}: {short_error(err)}"


@trial("run a chapter with the runner (seed 0), then `papermill <chapter>.ipynb out.ipynb -p seed 3` directly")
def papermill_direct():
    with own_results("papermill") as root:
        folder = trial_notebooks(root)
        run_trial_chapter(folder, seed=0)
        book_claims = book_folder() / "claims.csv"
        before = book_claims.read_bytes()
        command = [sys.executable, "-m", "papermill", str(folder / f"{TRIAL_CHAPTER}.ipynb"), str(root / "out.ipynb"),
                   "-p", "seed", "3", "--cwd", str(folder), "--no-progress-bar"]
        done = subprocess.run(command, env=child_env(), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return f"papermill failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1][:150]}"
        after = book_claims.read_bytes() if book_claims.exists() else b""
        seed3 = sorted(str(p.relative_to(root / "results")) for p in (root / "results").rglob("claims.csv")
                       if "seed 3" in p.read_text())
    where = ", ".join(seed3) or "nowhere"
    return (f"the book's claims.csv {'was OVERWRITTEN with seed 3' if after != before else 'kept seed 0'}; "
            f"seed 3's claims in: {where}")


@trial("truncate one cache/runs/<key>.json (a crash mid-write), then read its metadata and ask for a chapter's runs")
def truncated_metadata():
    with own_results("truncated-meta"):
        module = runner()
        chapter = "01_toy_norm_hierarchy"
        keys = module.chapter_runs(chapter, {"scale": "smoke"}).keys
        cache = nht.RunCache()
        meta_path = cache.runs / f"{keys[0]}.json"
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        meta_path.write_text('{"key": "' + keys[0][:10])  # what a crash mid-write (or a full disk) leaves
        outcomes = []
        for what, call in (("RunCache().meta", lambda: cache.meta(keys[0])),
                           ("chapter_runs", lambda: module.chapter_runs(chapter, {"scale": "smoke"}))):
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    call()
                said = " ".join(str(w.message) for w in caught)
                warning = f"a warning that {names(said, meta_path)}" if caught else "no warning"
                outcomes.append(f"{what}: no error, {warning} ({shorter(said.replace(str(meta_path), '<file>'))[:90]})")
            except Exception as err:  # noqa: BLE001
                outcomes.append(f"{what}: CRASHED, {names(str(err), meta_path)} ({short_error(err)[:90]})")
    return "; ".join(outcomes)


# runs the throw-away chapter and dies (os._exit: no except, no finally) at the rename that moves the new results
# in, after the old ones were moved aside: a kill -9 between the two renames of the swap. argv: final folder, notebooks
CRASH_SCRIPT = textwrap.dedent("""
    import os, sys
    import importlib
    import nhtlib
    final, notebooks = os.path.abspath(sys.argv[1]), sys.argv[2]
    layered = os.path.isfile(os.path.join(os.path.dirname(nhtlib.__file__), "cli", "runner.py"))
    runner = importlib.import_module("nhtlib.cli.runner" if layered else "nhtlib.chapters")
    moved_aside = []
    def crashing(real):
        def rename(src, dst, *args, **kwargs):
            if os.path.abspath(src) == final:
                moved_aside.append(dst)
            elif os.path.abspath(dst) == final and moved_aside:
                os._exit(137)
            return real(src, dst, *args, **kwargs)
        return rename
    os.replace, os.rename = crashing(os.replace), crashing(os.rename)
    runner.run_chapter("99_trial", {"scale": "smoke", "seed": 0}, notebook_dir=notebooks, progress=False)
    print("finished without reaching the crash point", flush=True)
""")


@trial("a crash (kill -9) between the two renames of the results swap, then the next run (seed -1: it fails)")
def crash_in_swap():
    with own_results("swap-crash") as root:
        folder = trial_notebooks(root)
        run_trial_chapter(folder, seed=0)
        final = book_folder()
        old_record = (final / "run.json").read_bytes()
        died = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(final), str(folder)],
                              env=child_env(), capture_output=True, text=True, timeout=300)
        if died.returncode != 137:
            return f"no crash: the child exited {died.returncode} ({(died.stdout + died.stderr).strip()[-150:]})"
        present = "present" if (final / "claims.csv").exists() else "MISSING"
        left = len(staging_entries())
        call_cli(runner(), ["run", TRIAL_CHAPTER, "--notebooks", str(folder), "-p", "scale", "smoke",
                            "-p", "seed", "-1"])
        if (final / "claims.csv").exists():
            record = (final / "run.json").read_bytes() if (final / "run.json").exists() else b""
            restored = ("restored (the old results)" if record == old_record else
                        "restored (the new results)" if record else "back without its run.json")
        else:
            restored = "NOT restored (no claims.csv" + (", only failed.ipynb)" if final.exists() else ")")
    return (f"after the crash the results folder is {present} ({left} staging folder(s)); after the next run it is "
            f"{restored}, {len(staging_entries())} staging folder(s) left")


@trial("ask for device='cpu:<img src=x onerror=alert(1)>'")
def hostile_device():
    try:
        return f"ACCEPTED: resolve_device -> {nht.resolve_device('cpu:' + HOSTILE)!r}"
    except Exception as err:  # noqa: BLE001
        return f"refused: {short_error(err)}"


@trial("a claim statement and a parameter value '<img src=x onerror=alert(1)>': render the box and claims tables")
def hostile_page_text():
    provenance = nht.provenance
    record = {"chapter": TRIAL_CHAPTER, "scale": "smoke", "seed": 0, "device": HOSTILE,
              "parameters": {"scale": "smoke", "label": HOSTILE}, "non_default_parameters": {"label": HOSTILE},
              "defaults": {"scale": "smoke", "label": "plain"}, "seeds": [0], "runs": 1, "runs_trained": 1,
              "runs_cached": 0, "git_commit": "0" * 40, "nhtlib_source_hash": "0" * 16,
              "torch_version": torch.__version__, "wall_time_s": 1.0, "train_time_s": 0.0,
              "finished_at": "2026-01-01T00:00:00"}
    frame = claims_frame([{"chapter": TRIAL_CHAPTER, "id": "T1", "statement": HOSTILE, "paper": "p", "ours": HOSTILE,
                           "verdict": "reproduced", "scale": "smoke", "source": "book"}])
    shown = []
    for what, render in (
            ("provenance box", lambda: provenance.box_markdown(record, frame)),
            ("claims table", lambda: rendered(_claims_table(HOSTILE))),
            ("Scoreboard", lambda: _scoreboard_text(frame))):
        try:
            shown.append(f"{what}: {tag_state(render())}")
        except AttributeError as err:
            shown.append(f"{what}: not in this version ({str(err)[:60]})")
        except Exception as err:  # noqa: BLE001
            shown.append(f"{what}: render failed ({short_error(err)[:80]})")
    return "; ".join(shown)


def _scoreboard_text(frame: pd.DataFrame) -> str:
    """The Scoreboard's claims as the tested version renders them: its per-chapter sections
    (`claims.chapter_sections_markdown`), or before those existed the styled table of every claim (`style_claims`)."""
    if hasattr(nht.claims, "chapter_sections_markdown"):
        return nht.claims.chapter_sections_markdown(frame, {}, {})
    return rendered(nht.claims.style_claims(frame[["chapter", "id", "statement", "paper", "ours", "verdict"]]))


def _claims_table(text: str):
    """A chapter's closing claims table (`Claims.table`) with `text` as statement and ours."""
    claims = nht.Claims(TRIAL_CHAPTER, "smoke")
    claims.record(claim_result(statement=text, ours=text))
    return claims.table()


@trial("run two chapters with the runner, then remove one's notebook (a chapter renamed or dropped): its results "
       "folder stays in results/smoke/; gather the Scoreboard's claims")
def stray_chapter_folder():
    with own_results("stray") as root:
        kept, removed = "01_toy_norm_hierarchy", "07_removed_chapter"
        for chapter in (kept, removed):
            folder = trial_notebooks(root / chapter, chapter=chapter)
            runner().run_chapter(chapter, {"scale": "smoke"}, notebook_dir=folder, progress=False)
        (root / removed / "notebooks" / f"{removed}.ipynb").unlink()
        counted = [p.parent.name for p in nht.paths.chapter_files("smoke", "claims.csv")]
        chapters = sorted(set(nht.claims.load_claims("smoke").chapter))
    stray = "COUNTED" if removed in counted else "skipped"
    return f"the removed chapter's folder is {stray} by chapter_files; the Scoreboard's claims come from {chapters}"


@trial("a claims.csv whose 7 claims include 2 unknown verdicts ('reproducd', 'REPRODUCED'): count the verdicts")
def unknown_verdict():
    verdicts = ["reproduced"] * 3 + ["partly"] * 2 + ["reproducd", "REPRODUCED"]
    frame = claims_frame([{"chapter": "01_toy_norm_hierarchy", "id": f"C{i}", "statement": "s", "paper": "p",
                           "ours": "o", "verdict": v, "scale": "smoke", "source": "book"}
                          for i, v in enumerate(verdicts)])
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counts = nht.claims.verdict_counts(frame)
    except Exception as err:  # noqa: BLE001
        return f"refused: {short_error(err)}"
    total = int(counts.loc["total"].sum())
    columns = ", ".join(map(str, counts.columns))
    return (f"{total} of {len(frame)} claims counted" + (" (2 DROPPED)" if total < len(frame) else "")
            + f"; columns: {columns}" + warned(caught))


def as_other_user(work, timeout_s: float = 120.0) -> str:
    """The text `work()` returns in a forked child running as uid and gid 'nobody' with umask 0o002: a second user
    of a shared cache. Forked, not exec'd: the interpreter may lie where that user cannot reach (e.g. under /root)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into the caller's code, never run its atexit or finally blocks
        text = "the child wrote nothing"
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.umask(0o002)
            text = work()
        except BaseException as err:  # noqa: BLE001 - everything goes back to the parent as text
            text = f"failed: {short_error(err)}"
        finally:
            os.write(write_end, text.encode()[:4000])
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + timeout_s
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read_end)
            return f"the second user's read did not finish within {timeout_s:.0f} s"
        time.sleep(0.05)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


@trial("train into a cache under umask 0o002, make runs/.lock read-only, read the entry as another user (nobody)")
def shared_cache():
    root = WORK / "shared"
    previous = os.umask(0o002)
    try:
        root.mkdir(mode=0o775)
        cache = nht.RunCache(root / "cache")
        nht.run([TOY], cache=cache, progress=False)
    finally:
        os.umask(previous)
    key = cache.keys()[0]
    files = {"entry": cache.runs / f"{key}.json", "table": cache.table_file(key), "lock": cache.runs / ".lock"}
    modes = ", ".join(f"{what} {oct(p.stat().st_mode & 0o777)}" for what, p in files.items() if p and p.exists())
    files["lock"].chmod(0o444)
    if os.geteuid() != 0:
        return f"modes {modes}; not root: no second user to read as"
    WORK.chmod(0o755)  # mkdtemp made it 0700: let the second user reach the cache

    def read_entry() -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                said = "read the entry" if nht.RunCache(root / "cache").load(key) is not None else "a miss (None)"
            except Exception as err:  # noqa: BLE001
                said = f"FAILED: {short_error(err)[:150]}"
        return said + (warned(caught)[:150] if caught else "")
    return f"modes {modes}; as nobody with the lock 0o444: {as_other_user(read_entry)}"


# holds runs/.lock exclusively (a bare flock, as any process of any version would) until killed. argv: lock file
HOLD_SCRIPT = "import fcntl, sys, time\nfh = open(sys.argv[1], 'a+b')\nfcntl.flock(fh, fcntl.LOCK_EX)\n" \
              "print('held', flush=True)\ntime.sleep(600)\n"
LOCK_WAIT_S = 5.0  # how long the trial lets a reader wait before it calls it a hang


@trial("another process holds the cache's runs/.lock exclusively; read an entry (NHT_LOCK_TIMEOUT=2)")
def held_lock():
    cache = nht.RunCache(WORK / "cache-held")
    nht.run([TOY], cache=cache, progress=False)
    key = cache.keys()[0]
    holder = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, str(cache.runs / ".lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "held":
            return "the holder process could not take the lock"
        result = {}

        def read():
            try:
                result["got"] = "read the entry" if cache.load(key) is not None else "a miss"
            except Exception as err:  # noqa: BLE001
                result["error"] = err
        with environ(NHT_LOCK_TIMEOUT="2"):
            reader = threading.Thread(target=read, daemon=True)
            t0 = time.perf_counter()
            reader.start()
            reader.join(LOCK_WAIT_S)
            waited = time.perf_counter() - t0
        if reader.is_alive():
            holder.kill()  # let the reader go
            reader.join(60)
            return f"the reader HANGS (> {LOCK_WAIT_S:.0f} s, released only when the holder was killed)"
    finally:
        holder.kill()
        holder.wait()
    if "error" in result:
        err = result["error"]
        holder_named = "names the holder's pid" if str(holder.pid) in str(err) else "does not name the holder's pid"
        return f"gave up after {waited:.1f} s, {holder_named}: {short_error(err)}"
    return f"{result['got']} after {waited:.1f} s"


@trial("CelebA's list_attr_celeba.txt with 'Young' missing from its header, or 'Male' renamed 'Gender'")
def celeba_header():
    celeba = nht.data.celeba
    attributes = list(celeba.ATTRIBUTES)
    values = np.where(np.random.default_rng(0).random((8, len(attributes))) < 0.5, -1, 1)
    folder = WORK / "celeba-header"
    folder.mkdir()
    outcomes = []
    for what, header in (("without 'Young'", [a for a in attributes if a != "Young"]),
                         ("'Male' renamed", [("Gender" if a == "Male" else a) for a in attributes])):
        path = celeba_attributes(folder / f"list_attr_celeba-{len(outcomes)}.txt", header, values)
        try:
            table = celeba.read_attributes(path)
        except Exception as err:  # noqa: BLE001
            outcomes.append(f"{what}: refused, {names(str(err), path)} ({short_error(err)[:100]})")
            continue
        named = [a for a in attributes if a in table.columns]
        truth = {a: (values[:, attributes.index(a)] > 0).tolist() for a in named}
        wrong = [a for a in named if (table[a].to_numpy() > 0).tolist() != truth[a]]
        outcomes.append(f"{what}: read without a word, {len(wrong)} of {len(named)} attribute columns hold another "
                        "column's labels" + (", 'Male' among them" if "Male" in wrong else "")
                        + ("" if "Male" in table.columns else ", no 'Male' column (a KeyError later)"))
    return "; ".join(outcomes)


@trial("train with SGD at lr 20 (the loss climbs from 0.77 to ~1e15 and stays finite), summarise the run")
def finite_blow_up():
    cfg = TOY.replace(train=TOY.train.replace(optimizer="sgd", lr=20.0, steps=40, n_logs=40))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = nht.run([cfg], cache=nht.RunCache(WORK / "cache-blow-up"), progress=False)
    loss = table.train_loss.to_numpy()
    step = table.diverged_step.iloc[0] if "diverged_step" in table else float("nan")
    regime = nht.regimes.summarise_runs(table, ["run"]).regime.iloc[0]
    flagged = f"flagged diverged at step {step:.0f}" if np.isfinite(step) else "NOT flagged diverged"
    return (f"loss {loss[0]:.2g} -> max {np.nanmax(loss):.2g} (all finite: {bool(np.isfinite(loss).all())}); "
            f"{flagged}, regime {regime!r}" + warned(caught)[:140])


@trial("a run that fails outside a notebook cell: unknown parameter `-p sede 3`, `--out` below a regular file, a "
       "truncated cache entry of the chapter's runs, a kernel that dies (os._exit in a cell)")
def staging_leak():
    with own_results("staging") as root:
        folder = trial_notebooks(root)
        module = runner()
        # the same notebook under a registered chapter's name, so that the runner reads that chapter's cache entries
        registered = "01_toy_norm_hierarchy"
        other = trial_notebooks(root / "registered", chapter=registered)
        key = module.chapter_runs(registered, {"scale": "smoke"}, notebook_dir=other).keys[0]
        log, blocker = root / "executions.log", root / "a-file"
        blocker.write_text("not a folder")
        outcomes = []
        for what, chapter, notebooks, extra in (
                ("unknown parameter", TRIAL_CHAPTER, folder, ["-p", "sede", "3"]),
                ("bad --out", TRIAL_CHAPTER, folder, ["--out", str(blocker / "out.ipynb")]),
                ("truncated entry", registered, other, []),
                ("dead kernel", TRIAL_CHAPTER, folder, ["-p", "die", "True"])):
            if what == "truncated entry":
                meta = nht.RunCache().runs / f"{key}.json"
                meta.parent.mkdir(parents=True, exist_ok=True)
                meta.write_text('{"key": "' + key[:10])
            before = staging_entries()
            log.write_text("")
            with environ(NHT_TRIAL_LOG=str(log)), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                said = call_cli(module, ["run", chapter, "--notebooks", str(notebooks), "-p", "scale", "smoke", *extra])
            executed = "the notebook ran" if log.read_text() else "nothing ran"
            left = len(staging_entries() - before)
            outcomes.append(f"{what}: {said[:110]}; {executed}; {left} staging folder(s) LEFT" if left else
                            f"{what}: {said[:110]}; {executed}; no staging folder left")
    return "; ".join(outcomes)


# running and comparing ----------------------------------------------------------------------------------------

def run_trials(only: set[str] | None = None) -> list[dict]:
    rows = []
    for command, fn in TRIALS:
        if only and fn.__name__ not in only:
            continue
        t0 = time.perf_counter()
        try:
            outcome = fn()
        except Exception as err:  # noqa: BLE001 - a trial that crashes is itself an outcome
            outcome = f"trial crashed: {short_error(err)} [{traceback.extract_tb(err.__traceback__)[-1].name}]"
        rows.append({"trial": fn.__name__, "command": command, "outcome": outcome,
                     "wall_s": round(time.perf_counter() - t0, 1)})
        print(f"{fn.__name__} done ({rows[-1]['wall_s']} s)", file=sys.stderr, flush=True)
    return rows


def cell(text: str) -> str:
    """Text for a Markdown table cell: no line break, no bare '|', no raw HTML (the outcomes quote hostile values)."""
    return str(text).replace("\n", " ").replace("|", "\\|").replace("<", "&lt;")


def run_checkout(pythonpath: Path, only: str | None) -> dict:
    """This script's --json result in a subprocess that imports nhtlib from `pythonpath` (a checkout's root)."""
    command = [sys.executable, __file__, "--json"] + (["--only", only] if only else [])
    env = {k: v for k, v in os.environ.items() if k not in ("NHT_RESULTS", "NHT_CACHE")}
    done = subprocess.run(command, env={**env, "PYTHONPATH": str(pythonpath)}, capture_output=True, text=True,
                          timeout=1800)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(JSON_MARK):
            return json.loads(line[len(JSON_MARK):])
    tail = (done.stdout + done.stderr).strip()[-600:]
    raise SystemExit(f"the trials against {pythonpath} produced no result (exit {done.returncode}):\n{tail}")


def compare_table(before: dict, after: dict) -> str:
    """One Markdown table: trial | before | after, rows in the order of `after` then trials only `before` has."""
    old = {r["trial"]: r for r in before["rows"]}
    new = {r["trial"]: r for r in after["rows"]}
    order = list(new) + [t for t in old if t not in new]
    lines = [f"| trial | before ({before['commit']}) | after ({after['commit']}) |", "|---|---|---|"]
    for name in order:
        command = (new.get(name) or old[name])["command"]
        lines.append(f"| **{name}**: {cell(command)} | {cell(old.get(name, {}).get('outcome', '(no such trial)'))} "
                     f"| {cell(new.get(name, {}).get('outcome', '(no such trial)'))} |")
    return "\n".join(lines)


def identity() -> dict:
    commit = nht.paths.git_commit()
    return {"nhtlib": nht.__version__, "library": str(LIBRARY), "commit": commit[:7] + commit[40:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON line (what --compare reads)")
    parser.add_argument("--compare", metavar="OLD_PATH", help="run against the checkout OLD_PATH and against this "
                        "tree, each in a subprocess; print one table: trial | before | after")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated trial names (default: every trial)")
    args = parser.parse_args()
    try:
        if args.compare:
            before = run_checkout(Path(args.compare).resolve(), args.only)
            after = run_checkout(Path(__file__).resolve().parents[1], args.only)
            print(compare_table(before, after))
            return
        rows = run_trials(set(args.only.split(",")) if args.only else None)
        if args.json:
            print(JSON_MARK + json.dumps({**identity(), "rows": rows}))
            return
        print(f"# nhtlib {nht.__version__} from {LIBRARY}, torch {torch.__version__}")
        for row in rows:
            if args.markdown:
                print(f"| {row['trial']} | {cell(row['command'])} | {cell(row['outcome'])} |")
            else:
                print(f"{row['trial']} ({row['wall_s']:.1f} s)\n  did:  {row['command']}\n  got:  {row['outcome']}")
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
