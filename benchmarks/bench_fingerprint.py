"""Cost of the data fingerprint (`TaskConfig.data_fingerprint`, nhtlib.data.files): cold and warm.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_fingerprint.py [--data-root DIR] [--repeats 3]

(a) a full-size CIFAR-10 pickle layout generated in a temporary folder: data_batch_1..5 of 10,000 random uint8
    images each + test_batch of 10,000, with the official files' keys (str) and sizes (about 31 MB each);
(b) the book's offline CIFAR-10 ImageFolder, <data_root>/cifar10 (40,000 JPEGs, about 38 MB), if present.

"cold" is the first call with an empty memo (every file read and hashed: SHA-256, plus MD5 for the pickles);
"warm" the median of --repeats later calls (memo hit: one stat per file, nothing read). The files of (a) were just
written and (b) may have been read recently, so both colds read from the OS page cache (hashing cost, not disk).
MB/s = bytes the fingerprint covers / seconds. The header gives the machine's fp32 matmul rate (1024^3, GFLOP/s) for
scale. Results and memos go to a temporary NHT_RESULTS folder, never to the real results/.
"""
from __future__ import annotations

import argparse
import os
import pickle
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

WORK = Path(tempfile.mkdtemp(prefix="nht-bench-fp-"))
os.environ["NHT_RESULTS"] = str(WORK / "results")  # before nhtlib is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402

from nhtlib.data import cifar, files  # noqa: E402
from nhtlib.paths import default_data_root  # noqa: E402

IMAGES_PER_BATCH = 10_000


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    """fp32 GFLOP/s of an n x n x n torch matmul (best of `repeats`, after one warm-up)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n ** 3 / best / 1e9


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def write_cifar10_pickles(root: Path) -> Path:
    """<root>/cifar-10-batches-py/ with the official file names and sizes (random pixels, labels cycling 0-9)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for k, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        batch = {"batch_label": f"batch {k + 1} of 6 (random)",
                 "labels": [i % 10 for i in range(IMAGES_PER_BATCH)],
                 "data": rng.integers(0, 256, (IMAGES_PER_BATCH, 3072), dtype=np.uint8),
                 "filenames": [f"random_{k}_{i:05d}.png" for i in range(IMAGES_PER_BATCH)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return folder


def wait_until_settled(paths) -> None:
    """Sleep until every file is older than files.RACY_NS, so the cold call may memoise them (see files.py)."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in paths)
    delay = (newest + files.RACY_NS - time.time_ns()) / 1e9 + 0.1
    if delay > 0:
        time.sleep(delay)


def measure(label: str, task: cifar.CIFARTask, repeats: int) -> dict:
    source = cifar.cifar_source(task.dataset, task.data_root, task._per_class())
    paths = [source.folder / rel for rel in source.rel_paths]
    wait_until_settled(paths)
    size = sum(p.stat().st_size for p in paths)
    cold = timed(task.data_fingerprint)
    warm = statistics.median(timed(task.data_fingerprint) for _ in range(repeats))
    return {"case": label, "files": len(paths), "MB": size / 1e6, "cold": cold, "warm": warm,
            "fingerprint": task.data_fingerprint()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", default=None, help="folder holding cifar10/ (default: the book's data root)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"# data fingerprint cost: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}, fp32 matmul 1024^3: {matmul_gflops():.1f} GFLOP/s")
    rows = []
    write_cifar10_pickles(WORK / "data")
    rows.append(measure("(a) CIFAR-10 pickles, generated", cifar.CIFARTask(n_train=None, n_test=None,
                                                                           data_root=str(WORK / "data")),
                        args.repeats))
    root = Path(args.data_root) if args.data_root else default_data_root()
    if root is not None and (root / "cifar10" / "train").is_dir():
        rows.append(measure(f"(b) {root / 'cifar10'} JPEGs", cifar.CIFARTask(n_train=None, n_test=None,
                                                                              data_root=str(root)), args.repeats))
    else:
        print(f"# (b) skipped: no cifar10/ ImageFolder under {root}")
    print(f"{'case':<44} {'files':>7} {'MB':>8} {'cold s':>8} {'cold MB/s':>10} {'warm s':>8} {'warm MB/s':>10}"
          "  fingerprint")
    for r in rows:
        print(f"{r['case']:<44} {r['files']:>7,} {r['MB']:>8.1f} {r['cold']:>8.4f} {r['MB'] / r['cold']:>10.0f} "
              f"{r['warm']:>8.4f} {r['MB'] / r['warm']:>10.0f}  {r['fingerprint']}")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
