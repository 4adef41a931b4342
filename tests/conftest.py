import os

import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def isolated_results(tmp_path, monkeypatch):
    """Every test writes results and caches into its own temporary folder, never into the real results/."""
    monkeypatch.setenv("NHT_RESULTS", str(tmp_path / "results"))
    yield
