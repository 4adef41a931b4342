"""Are a chapter's verdicts the same at bf16 as at fp32? The gate of `precision="bf16-if-native"` (cpu scale).

Result (benchmarks/records/bf16_claims.json): per chapter, every claim's verdict and estimate at fp32 and at bf16,
the two wall times and the CPU's fp32 and bf16 matmul rates; a chapter's cpu preset may take bf16 autocast on
CPUs with native bf16 only where this record measured its current design (`Chapter.bf16_design`: the preset's, or
for chapter 6 the runs it reads) with every verdict equal (`design_problems`, held by tests/test_bf16_gate.py).
Hardware: a CPU with native bf16 (AVX512-BF16 or AMX); it refuses to measure elsewhere (bf16 there is emulated).
n: the chapter's own design (its seeds, its λ grid) at the scale asked for, each precision once.

Each chapter runs twice through the chapter runner (`nht-book run CHAPTER -p scale cpu`), with $NHT_NATIVE_BF16=0
(every "bf16-if-native" field becomes fp32) and =1 (bf16), each into a results folder of its own but the book's
run cache, so the twin that the book itself ran is read back, not trained again. It trains, so run it alone.

Usage: ``python benchmarks/bf16_claims.py [--scale cpu] [--seed N] [--record PATH] CHAPTER ...``
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from nhtlib.chapters import CHAPTERS
from nhtlib.engine import native_bf16 as precision
from nhtlib.engine.plan import matmul_rate
from nhtlib.paths import cache_root, repo_root
from nhtlib.report.claims import verdict_changes
from nhtlib.report.provenance import cpu_model

RECORD = Path(__file__).resolve().parent / "records" / "bf16_claims.json"


def read_record(path: Path = RECORD) -> dict:
    """chapter -> scale -> its entry ({} when there is no record)."""
    return json.loads(path.read_text()) if path.exists() else {}


def run_chapter(chapter: str, scale: str, seed: int | None, native: str, results: Path) -> tuple[pd.DataFrame, float]:
    """The chapter's claims table at `scale` with $NHT_NATIVE_BF16=`native`, and the wall time (s)."""
    env = {**os.environ, precision.NATIVE_BF16_ENV: native, "NHT_RESULTS": str(results),
           "NHT_CACHE": str(cache_root())}
    argv = [sys.executable, "-m", "nhtlib", "run", chapter, "-p", "scale", scale]
    if seed is not None:
        argv += ["-p", "seed", str(seed)]
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, cwd=repo_root())
    wall = time.perf_counter() - t0
    return pd.read_csv(results / scale / chapter / "claims.csv"), wall


def compare(fp32: pd.DataFrame, bf16: pd.DataFrame) -> dict:
    """claim id -> {"fp32", "bf16" (verdicts), "ours fp32", "ours bf16" (estimates)} (`claims.verdict_changes`); a
    claim missing from one table has the verdict "missing" there."""
    return {r["id"]: {"fp32": r["verdict a"], "bf16": r["verdict b"], "ours fp32": r["ours a"],
                      "ours bf16": r["ours b"]} for r in verdict_changes(fp32, bf16).to_dict(orient="records")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="+", help="chapter names, e.g. 03_border_cifar")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--seed", type=int, default=None, help="the first seed (default: the chapter's)")
    parser.add_argument("--record", type=Path, default=RECORD)
    args = parser.parse_args(argv)
    if not precision.native_bf16("cpu") or os.environ.get(precision.NATIVE_BF16_ENV) is not None:
        print("this CPU has no native bf16 (AVX512-BF16 / AMX), or $NHT_NATIVE_BF16 is set: nothing measured",
              file=sys.stderr)
        return 2
    rates = {"fp32": matmul_rate() / 1e9, "bf16": matmul_rate(torch.bfloat16) / 1e9}
    print(f"matmul 1024³: fp32 {rates['fp32']:.0f} GFLOP/s, bf16 {rates['bf16']:.0f} GFLOP/s", flush=True)
    record = read_record(args.record)
    differ = 0
    for chapter in args.chapters:
        tables, walls = {}, {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, native in (("fp32", "0"), ("bf16", "1")):
                tables[name], walls[name] = run_chapter(chapter, args.scale, args.seed, native, Path(tmp) / name)
                print(f"{chapter} at {name}: {walls[name]:.0f} s", flush=True)
        verdicts = compare(tables["fp32"], tables["bf16"])
        changed = {cid: v for cid, v in verdicts.items() if v["fp32"] != v["bf16"]}
        differ += len(changed)
        print(f"{chapter}: {len(verdicts)} claims, {len(changed)} with another verdict at bf16"
              + "".join(f"\n  {cid}: {v['fp32']} ({v['ours fp32']}) -> {v['bf16']} ({v['ours bf16']})"
                        for cid, v in changed.items()), flush=True)
        design = CHAPTERS[chapter].bf16_design(args.scale)[1]
        record.setdefault(chapter, {})[args.scale] = {"design": design, "native_bf16": True, "equal": not changed,
                           "first_seed": args.seed, "cpu": cpu_model(),
                           "matmul_gflops": {k: round(v, 1) for k, v in rates.items()},
                           "wall_s": {k: round(v, 1) for k, v in walls.items()},
                           "date": datetime.date.today().isoformat(), "verdicts": verdicts}
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"record: {args.record}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
