"""Fault and bad-input trials of the run cache, the data loaders and the chapter runner: one line per trial.

    python benchmarks/fault_trials.py [--markdown]

Every trial builds its own small fixture in a temporary folder (fake CIFAR pickles, a JPEG ImageFolder, a
throw-away notebook), does what a user might do by mistake or what a machine might do to a run (a partial data
copy, a flipped bit, a full file table, a killed or diverged run), and prints what the library did. It uses only
the public API that has existed since the first version, so the same script can be run against an older checkout
(`PYTHONPATH=/path/to/old/checkout python benchmarks/fault_trials.py`) to show the behaviour before a fix.
The tests in tests/ hold the behaviour; this script is the record (`issues` closing notes quote its table).
Tiny trainings only: the whole script takes about a minute on 2 cores.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import pickle
import shutil
import tempfile
import textwrap
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import torch

WORK = Path(tempfile.mkdtemp(prefix="nht-trials-"))
os.environ["NHT_RESULTS"] = str(WORK / "results")  # before nhtlib is imported: nothing touches the real results/

import nhtlib as nht  # noqa: E402

torch.set_num_threads(1)
TRIALS = []


def trial(command: str):
    """Register a trial: `command` is what the user (or the machine) did, the function returns what happened."""
    def wrap(fn):
        TRIALS.append((command, fn))
        return fn
    return wrap


def short_error(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".replace("\n", " ")
    return text if len(text) <= 180 else text[:177] + "..."


def warned(caught) -> str:
    messages = [str(w.message).replace("\n", " ") for w in caught]
    return "; warned: " + " | ".join(m[:120] for m in messages) if messages else "; no warning"


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


TOY = nht.RunConfig(nht.data.sparse_parity.SparseParityTask(n_bits=6, n_train=32, n_test=32),
                    nht.models.config("mlp", hidden=(8,)), nht.TrainConfig(steps=20, n_logs=4))


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
    key = nht.cache.run_key(cfg.to_dict())
    batch_key = nht.config.stable_hash(sorted([key]), length=24)
    # the new run key also holds the data fingerprint (None for the toy); try both layouts of the batch key
    keys = {batch_key}
    try:
        keys.add(nht.config.stable_hash(sorted([nht.cache.run_key({**cfg.to_dict(), "data": None})]), length=24))
    except Exception:  # noqa: BLE001
        pass
    for k in keys:
        cache.checkpoint_path(k).write_bytes(b"\x00garbage" * 100)
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


NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "execution_count": None, "outputs": [],
         "source": "scale = 'smoke'\nseed = 0\n"},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": textwrap.dedent("""
            import nhtlib as nht
            if seed < 0:
                raise ValueError(f"seed={seed} must be >= 0")
            claims = nht.Claims("99_trial", scale)
            claims.add("T1", "a trial claim", "paper", f"seed {seed}", "reproduced")
            claims.save()
            """)},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@trial("run a chapter (seed 0), then re-run it with seed=-1 (fails) and with seed=3")
def failed_chapter_run():
    from nhtlib.cli import runner as chapters

    folder = WORK / "notebooks"
    folder.mkdir()
    (folder / "99_trial.ipynb").write_text(json.dumps(NOTEBOOK))
    good = chapters.run_chapter("99_trial", {"scale": "smoke", "seed": 0}, notebook_dir=folder, progress=False)
    claims_path = nht.paths.results_root() / "smoke" / "99_trial" / "claims.csv"
    size_good, claims_good = good.stat().st_size, claims_path.read_text()
    try:
        chapters.run_chapter("99_trial", {"scale": "smoke", "seed": -1}, notebook_dir=folder, progress=False)
    except Exception:  # noqa: BLE001
        pass
    kept = good.exists() and good.stat().st_size == size_good
    chapters.run_chapter("99_trial", {"scale": "smoke", "seed": 3}, notebook_dir=folder, progress=False)
    seed3_overwrote = claims_path.read_text() != claims_good
    recorded = any(p.name in ("run.json", "params.json") for p in claims_path.parent.iterdir())
    return (f"failed run {'kept' if kept else 'replaced'} the good executed notebook; seed 3 "
            f"{'overwrote' if seed3_overwrote else 'left alone'} the seed-0 claims.csv; parameters "
            f"{'recorded' if recorded else 'not recorded'} beside claims.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    print(f"# nhtlib {nht.__version__} from {Path(nht.__file__).parent}, torch {torch.__version__}")
    rows = []
    for command, fn in TRIALS:
        t0 = time.perf_counter()
        try:
            outcome = fn()
        except Exception as err:  # noqa: BLE001 - a trial that crashes is itself an outcome
            outcome = f"trial crashed: {short_error(err)} [{traceback.extract_tb(err.__traceback__)[-1].name}]"
        rows.append((fn.__name__, command, outcome, time.perf_counter() - t0))
    for name, command, outcome, wall in rows:
        if args.markdown:
            print(f"| {name} | {command} | {outcome} |")
        else:
            print(f"{name} ({wall:.1f} s)\n  did:  {command}\n  got:  {outcome}")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
