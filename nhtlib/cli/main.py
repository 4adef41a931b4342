"""``python -m nhtlib <command>``: the book's commands, one entry point.

    python -m nhtlib build [--scale cpu] [--chapters ...] [--no-site]     # the book (nhtlib.cli.build)
    python -m nhtlib run 01_toy_norm_hierarchy -p scale cpu -p seed 1     # one chapter (nhtlib.cli.runner)
    python -m nhtlib list                                                 # the chapters and their parameters
    python -m nhtlib plan all -p scale cpu [--device h200]                # what a chapter costs; trains nothing
"""
from __future__ import annotations

import sys

COMMANDS = {"build": "make the book: every chapter that is out of date, then the site",
            "run": "execute one chapter with papermill", "list": "the chapters and their parameters",
            "plan": "what a chapter will cost, and whether it fits (trains nothing)"}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        listed = "\n".join(f"  {name:<6} {what}" for name, what in COMMANDS.items())
        print(f"usage: python -m nhtlib <command> [options]\n\ncommands:\n{listed}\n\n"
              "`python -m nhtlib <command> --help` tells each command's options.",
              file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] == "build":
        from nhtlib.cli import build

        return build.main(argv[1:])
    from nhtlib.cli import runner

    return runner.main(argv)
