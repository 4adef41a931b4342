"""Notebooks are committed without outputs, use the python3 kernel and declare the common parameters."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
COMMON = ("scale", "device", "seed", "data_root")


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = json.loads(path.read_text())
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: code cells {dirty} have outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kernel_and_parameters_cell(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    source = "".join(tagged[0]["source"])
    for name in COMMON:
        assert f"{name}:" in source, f"{path.name}: the parameters cell does not declare {name!r}"
    assert 'os.environ.get("NHT_SCALE", "cpu")' in source, f"{path.name}: scale must default to $NHT_SCALE or 'cpu'"
