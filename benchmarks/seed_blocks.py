"""Do the book's verdicts survive another block of seeds? Two runs of every chapter, side by side.

Result (benchmarks/records/seed_blocks.json): per chapter, the claims whose verdict differs between the book's
seeds (first seed 0: results/<scale>/<chapter>/) and another block (first seed S: results/<scale>/seed-S/<chapter>/,
what ``nht-book run CHAPTER -p scale cpu -p seed S`` writes), and the flips between "reproduced" and "not
reproduced" (a defect of the design or of the rule: the issue's bar is none, and <= 5 % of verdicts differing).
The Scoreboard shows the record (`nhtlib.report.stability`, which also makes each entry: `block_entry`).
The two blocks must share no seed (`shared_seeds`): a chapter with more seeds somewhere than the block's offset
needs a later block (``--seed 20``).
Hardware: none of its own; it reads claims tables (``--run`` trains the missing block through the chapter runner
first: run it alone). n: each block's own design.

Usage: ``python benchmarks/seed_blocks.py [--scale cpu] [--seed 10] [--run] [CHAPTER ...]`` (every chapter with
claims tables at both blocks by default).
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from nhtlib.engine.native_bf16 import native_bf16
from nhtlib.paths import final_chapter_dir, repo_root
from nhtlib.report.provenance import cpu_model
from nhtlib.report.stability import RECORD_NAME, block_entry, read_record

RECORD = Path(__file__).resolve().parent / "records" / RECORD_NAME


def claims_table(scale: str, chapter: str, seed: int = 0) -> pd.DataFrame | None:
    """The claims table of `chapter` at `scale` from the block of seeds starting at `seed` (None: not run): where the
    runner puts that block's results (`paths.final_chapter_dir`)."""
    path = final_chapter_dir(chapter, scale, seed) / "claims.csv"
    return pd.read_csv(path) if path.exists() else None


def shared_seeds(chapter: str, scale: str, seed: int) -> list[int]:
    """The seeds that the book's block (first seed 0) and the block starting at `seed` both train in `chapter` at
    `scale`: empty, or the two blocks are not independent replications (a design with 16 seeds at some λ shares
    seeds 10-15 with block 10)."""
    from nhtlib.chapters import CHAPTERS

    def seeds(first: int) -> set[int]:
        return {c.seed for sweep in CHAPTERS[chapter].sweeps(scale, first_seed=first) for c in sweep.configs}

    return sorted(seeds(0) & seeds(seed))


def main(argv: list[str] | None = None) -> int:
    from nhtlib.chapters import CHAPTERS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*")
    parser.add_argument("--scale", default="cpu")
    parser.add_argument("--seed", type=int, default=10, help="the other block's first seed")
    parser.add_argument("--run", action="store_true", help="run the chapters missing at that block first")
    parser.add_argument("--record", type=Path, default=RECORD)
    args = parser.parse_args(argv)
    chapters = args.chapters or [c for c in CHAPTERS if CHAPTERS[c].claims]
    record = read_record(args.record)
    flips = 0
    for chapter in chapters:
        shared = shared_seeds(chapter, args.scale, args.seed)
        if shared:
            parser.error(f"{chapter}: blocks 0 and {args.seed} share seeds {shared}: start the other block later")
        if args.run and claims_table(args.scale, chapter, args.seed) is None:
            subprocess.run([sys.executable, "-m", "nhtlib", "run", chapter, "-p", "scale", args.scale,
                            "-p", "seed", str(args.seed)], check=True, cwd=repo_root())
        a, b = claims_table(args.scale, chapter), claims_table(args.scale, chapter, args.seed)
        if a is None or b is None:
            print(f"{chapter}: no claims table at seed {'0' if a is None else args.seed}: skipped")
            continue
        # the design both blocks ran or read (`Chapter.bf16_design`): a record of another design is stale; and what
        # they trained at here: a design asking for bf16-if-native ran bf16 on a CPU that has it
        uses, design = CHAPTERS[chapter].bf16_design(args.scale)
        # this machine's CPU, which trained the blocks when they ran here: fp32 verdicts move between CPU models too
        entry = block_entry(a, b, scale=args.scale, seed=args.seed, design=design,
                            bf16=uses and native_bf16("cpu"), cpu=cpu_model(), date=datetime.date.today().isoformat())
        diff, n_flips = pd.DataFrame(entry["differ"]), sum(d["flip"] for d in entry["differ"])
        flips += n_flips
        (d0, n0), (ds, ns) = entry["decided"]
        print(f"{chapter}: {len(diff)} of {len(a)} verdicts differ ({n_flips} flips); decided {d0}/{n0} at seed 0, "
              f"{ds}/{ns} at seed {args.seed}")
        if len(diff):
            with pd.option_context("display.width", 220, "display.max_colwidth", 50):
                print(diff.to_string(index=False))
        record[chapter] = entry
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str) + "\n")
    return 1 if flips else 0


if __name__ == "__main__":
    sys.exit(main())
