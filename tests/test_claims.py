import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.config import ConfigError


def test_claims_roundtrip_and_scoreboard():
    claims = nht.Claims("01_toy", "smoke")
    claims.add("C1", "norm decays", "yes", "yes", "reproduced")
    claims.add("C2", "law holds", "R²=0.97", "R²=0.5", "not reproduced")
    path = claims.save()
    assert path.name == "claims.csv" and path.parent.name == "01_toy"
    saved = pd.read_csv(path)
    assert list(saved.id) == ["C1", "C2"] and set(saved.verdict) == {"reproduced", "not reproduced"}
    other = nht.Claims("02_other", "smoke")
    other.add("G1", "x", "y", "z", "partly")
    other.save()
    board = nht.claims.scoreboard("smoke", chapters=["01_toy", "02_other", "03_missing"])
    assert list(board.chapter) == ["01_toy", "01_toy", "02_other", "03_missing"]
    assert "not executed" in board[board.chapter == "03_missing"].statement.iloc[0]
    counts = nht.claims.verdict_counts(board)
    assert counts.loc["01_toy", "reproduced"] == 1
    assert "<table" in claims.table().to_html()


def test_bad_claims_rejected():
    claims = nht.Claims("x", "smoke")
    with pytest.raises(ConfigError, match="verdict='confirmed' is not allowed"):
        claims.add("A", "s", "p", "o", "confirmed")
    claims.add("A", "s", "p", "o", "partly")
    with pytest.raises(ConfigError, match="recorded twice"):
        claims.add("A", "s", "p", "o", "partly")
    with pytest.raises(ConfigError, match="must be a non-empty string"):
        claims.add("B", "", "p", "o", "partly")
