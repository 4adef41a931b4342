"""How the book's commands were called, for their usage texts: ``nht-book`` (the console script, also in the process
it re-executed as ``python -m nhtlib`` inside a checkout) or ``python -m nhtlib``. Its own module, so that the entry
point (`nhtlib.cli.main`) and the commands it dispatches to (`nhtlib.cli.runner`, `nhtlib.cli.build`) all read it
without importing each other in a circle."""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Set on the re-executed process: the checkout whose nhtlib it runs (and a guard against re-executing twice).
CHECKOUT_ENV = "NHT_BOOK_CHECKOUT"


def program_name() -> str:
    """The console script's name when we were called as ``nht-book`` (or re-executed from it), else the module form."""
    called_as_script = Path(sys.argv[0]).name == "nht-book" or CHECKOUT_ENV in os.environ
    return "nht-book" if called_as_script else "python -m nhtlib"
