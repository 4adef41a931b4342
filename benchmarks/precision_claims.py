"""Does bf16 autocast change what a chapter concludes? Smoke-scale runs at fp32 and at bf16, side by side.

For chapter 1 (the toy grid), chapter 2 (the stand-in sweep, SGD and NSDL's Transformer) and chapter 3 (the border
sweeps) at smoke scale it trains every run twice, at fp32 and at bf16 (fp32 weights and optimiser state), each in a
fresh run cache, and prints per run the regime (chapter 2: the grokking outcome), then every claim's verdict and
estimate at both precisions. Exit status 1 when a regime or a verdict differs. The paper presets take bf16 where
this check found no difference (chapter 3's and the other convolutional runs) and keep fp32 where it found one
(chapter 2: 2 of 21 runs at the edge of the smoke budget change their outcome).

Usage: ``python benchmarks/precision_claims.py [toy] [grokking] [borders]`` (all three by default; minutes on two
CPU cores; it trains, so run it alone).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import pandas as pd
import torch

from nhtlib.chapters import grokking, toy_norm_hierarchy as toy
from nhtlib.engine.plan import matmul_rate
from nhtlib.engine.sweep import run


def _toy(precision: str) -> tuple[pd.Series, dict]:
    preset = toy.PRESETS["smoke"].replace(precision=precision)
    runs = run(toy.configs(preset), progress=False)
    _, summary = toy.analyse(runs, preset, transition_threshold=0.95, fit_threshold=0.99)
    regimes = pd.Series({f"α={r.alpha:g} λ={r.lam:g} seed {r.seed}": r.regime for r in summary.itertuples()})
    return regimes, {r.id: (r.verdict, r.ours) for r in toy.CHAPTER.judge(summary)}


def _grokking(precision: str) -> tuple[pd.Series, dict]:
    smoke = grokking.PRESETS["smoke"]
    preset = smoke.replace(stand_in=smoke.stand_in.replace(precision=precision),
                           nsdl=smoke.nsdl.replace(precision=precision))
    runs = grokking.run(preset, progress=False)
    rows = {f"stand-in λ={r.weight_decay:g} seed {r.seed}": r.regime for r in runs.summary.itertuples()}
    nsdl = runs.nsdl_summary.assign(outcome=grokking.seed_regimes(runs.nsdl_summary))
    rows.update({f"NSDL λ={r.weight_decay:g} seed {r.seed}": r.outcome for r in nsdl.itertuples()})
    return pd.Series(rows), {r.id: (r.verdict, r.ours) for r in grokking.CHAPTER.judge(grokking.analyse(runs, preset))}


def _borders(precision: str) -> tuple[pd.Series, dict]:
    from nhtlib.chapters import border_cifar as borders
    from nhtlib.paths import data_root

    preset = borders.PRESETS["smoke"].replace(precision=precision)
    runs = borders.run(preset, str(data_root(None, need="cifar10")), progress=False)
    rows = {f"λ={r.lam:g} seed {r.seed}": r.regime for r in runs.sum_a.itertuples()}
    rows.update({f"ρ={r.rho:g} seed {r.seed}": r.regime for r in runs.sum_b.itertuples()})
    return pd.Series(rows), {r.id: (r.verdict, r.ours) for r in borders.CHAPTER.judge(runs)}


CHAPTERS = {"toy": ("chapter 1 (toy, smoke)", _toy), "grokking": ("chapter 2 (grokking, smoke)", _grokking),
            "borders": ("chapter 3 (borders, smoke)", _borders)}


def main(argv: list[str] | None = None) -> int:
    chosen = (argv if argv is not None else sys.argv[1:]) or list(CHAPTERS)
    print(f"fp32 matmul 1024³: {matmul_rate() / 1e9:.0f} GFLOP/s; bf16: {matmul_rate(torch.bfloat16) / 1e9:.0f} GFLOP/s",
          flush=True)
    differ = 0
    for name, fn in (CHAPTERS[c] for c in chosen):
        results = {}
        for precision in ("fp32", "bf16"):
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as fresh:
                os.environ["NHT_RESULTS"] = fresh  # a fresh run cache (under the results folder) per precision
                results[precision] = fn(precision)
            print(f"{name} at {precision}: {time.perf_counter() - t0:.0f} s", flush=True)
        (r32, v32), (r16, v16) = results["fp32"], results["bf16"]
        regimes = pd.DataFrame({"fp32": r32, "bf16": r16})
        changed = regimes[regimes.fp32.astype(str) != regimes.bf16.astype(str)]
        print(f"{name}: {len(regimes)} runs, {len(changed)} with another regime/outcome at bf16")
        if len(changed):
            print(changed.to_string())
        rows = [{"claim": cid, "fp32": v32[cid][0], "bf16": v16.get(cid, ("—", ""))[0], "ours fp32": v32[cid][1],
                 "ours bf16": v16.get(cid, ("—", ""))[1]} for cid in v32]
        table = pd.DataFrame(rows)
        with pd.option_context("display.width", 220, "display.max_colwidth", 60):
            print(table.to_string(index=False))
        differ += len(changed) + int((table.fp32 != table.bf16).sum())
    print("same regimes and verdicts at bf16" if not differ else f"{differ} differences at bf16")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
