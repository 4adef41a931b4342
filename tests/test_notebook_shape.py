"""Chapters read like the paper (issue: verdicts a reader can trust): no function is defined in a notebook, no
verdict is decided in one, code cells stay short, and a chapter has no more code lines than prose lines.
Every chapter of the registry (`nhtlib.chapters.CHAPTERS`) is held to this."""
import ast
import json
from pathlib import Path

import pytest

from nhtlib.chapters import CHAPTERS

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ON_THE_LIBRARY = list(CHAPTERS)  # every registered chapter: presets, claims and analysis live in nhtlib.chapters
MAX_CELL_LINES = 25
VERDICT_WORDS = ("reproduced", "not testable", "inconclusive", "partly")


def cells(name):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


@pytest.mark.parametrize("name", ON_THE_LIBRARY)
def test_no_function_and_no_verdict_in_the_notebook(name):
    for kind, source in cells(name):
        if kind != "code":
            continue
        tree = ast.parse(source)
        defined = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ClassDef))
                   and hasattr(n, "name")]
        assert not defined, f"{name} defines {defined}: move it into nhtlib.chapters"
        literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        decided = [s for s in literals if s.strip() in VERDICT_WORDS or s.strip() == "not reproduced"]
        assert not decided, f"{name} decides a verdict in a cell ({decided}): declare a rule in nhtlib.chapters"


@pytest.mark.parametrize("name", ON_THE_LIBRARY)
def test_short_cells_and_more_prose_than_code(name):
    code = [len(s.splitlines()) for kind, s in cells(name) if kind == "code"]
    prose = sum(len(s.splitlines()) for kind, s in cells(name) if kind == "markdown")
    assert max(code) <= MAX_CELL_LINES, f"{name}: a code cell has {max(code)} lines (at most {MAX_CELL_LINES})"
    assert sum(code) <= prose, f"{name}: {sum(code)} code lines against {prose} lines of prose"
