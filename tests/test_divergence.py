"""Diverged runs are recorded as diverged, never passed off as results or regimes (issue: no silent wrong results).

Before: at lr 1e3 most logged rows had NaN loss and norm but plausible accuracies (NaN logits "predict" class 0),
no warning was given, `summarise_runs` labelled the runs "strong", and they were cached as results.
"""
import warnings

import numpy as np
import pandas as pd
import pytest

import nhtlib as nht
from nhtlib.analysis import grok_times as grokking, vision

TASK = nht.data.sparse_parity.SparseParityTask(n_bits=8, n_train=64, n_test=128)
MODEL = nht.models.config("mlp", hidden=(16,))
SGD = nht.TrainConfig(optimizer="sgd", steps=60, n_logs=6)
FINE_LRS, BAD_LR = (1e-2, 3e-2), 1e3  # SGD at lr 1e3 overflows within a few steps on this task


def train(lrs, cache, **kw):
    configs = nht.grid(nht.RunConfig(TASK, MODEL, SGD), seeds=[0], lrs=list(lrs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = nht.run(configs, cache=cache, progress=False, **kw)
    return table, [str(w.message) for w in caught]


@pytest.fixture
def mixed(tmp_path):
    """One batch: two members that train fine and, between them, one that diverges."""
    return train([FINE_LRS[0], BAD_LR, FINE_LRS[1]], nht.RunCache(tmp_path / "mixed"))


def test_diverged_member_is_recorded_with_its_step_and_no_nan_rows(mixed):
    table, messages = mixed
    bad = table[table.lr == BAD_LR]
    assert bad.diverged_step.notna().all()
    step = bad.diverged_step.iloc[0]
    assert 0 < step < SGD.steps
    assert np.isfinite(bad.norm_sq).all() and np.isfinite(bad.train_loss).all(), "rows after divergence were kept"
    assert bad.step.max() <= step
    assert any("diverged" in m and "1 of 3" in m for m in messages), messages


def test_other_members_are_unaffected_by_a_diverging_one(mixed, tmp_path):
    table, _ = mixed
    alone, messages = train(FINE_LRS, nht.RunCache(tmp_path / "alone"))
    assert not any("diverged" in m for m in messages)
    for lr in FINE_LRS:
        ours = table[table.lr == lr].drop(columns=["run", "wall_s"]).reset_index(drop=True)
        ref = alone[alone.lr == lr].drop(columns=["run", "wall_s"]).reset_index(drop=True)
        assert ours.diverged_step.isna().all()
        pd.testing.assert_frame_equal(ours, ref, rtol=1e-6)


def test_a_cached_diverged_run_stays_diverged(mixed, tmp_path):
    table, _ = mixed
    again, _ = train([FINE_LRS[0], BAD_LR, FINE_LRS[1]], nht.RunCache(tmp_path / "mixed"))
    pd.testing.assert_frame_equal(table, again)
    cache = nht.RunCache(tmp_path / "mixed")
    metas = [cache.meta(p.stem) for p in (tmp_path / "mixed" / "runs").glob("*.json")]
    assert sorted(m["diverged_step"] is not None for m in metas) == [False, False, True]


def test_summaries_label_a_diverged_run_diverged_never_a_regime(mixed):
    table, _ = mixed
    summary = nht.regimes.summarise_runs(table, ["lr"])
    bad = summary.set_index("lr").loc[BAD_LR]
    assert bad.regime == nht.regimes.DIVERGED and np.isfinite(bad.diverged_step)
    assert np.isnan(bad.decay_pct) and np.isnan(bad.V_final)
    assert set(summary.set_index("lr").loc[list(FINE_LRS)].regime) <= set(nht.regimes.REGIMES)
    assert nht.regimes.regime_counts(summary.regime).endswith("(+1 diverged)")
    assert nht.regimes.majority_regime(summary.regime) != nht.regimes.DIVERGED
    assert nht.regimes.majority_regime([nht.regimes.DIVERGED] * 2) == nht.regimes.DIVERGED

    epochs = table.assign(epoch=table.step / 10.0)
    vis = vision.summarise(epochs, ["lr"], head="layers.output", clean="test_acc")
    assert vis.set_index("lr").loc[BAD_LR].regime == nht.regimes.DIVERGED
    assert nht.separation.per_run(table, ["lr"], "train_loss")[BAD_LR] != nht.separation.per_run(
        table, ["lr"], "train_loss")[BAD_LR]  # NaN: a diverged run has no contraction to score


def test_grokking_regimes_leave_diverged_seeds_out(mixed):
    table, _ = mixed
    as_lambdas = table.assign(weight_decay=table.lr.map({FINE_LRS[0]: 0.1, BAD_LR: 1.0, FINE_LRS[1]: 1.0}))
    summary = grokking.grokking_summary(as_lambdas, ["run"])
    assert summary.diverged.tolist() == [False, True, False]
    assert not summary.grokked.iloc[1] and not summary.memorised.iloc[1]
    regimes = grokking.classify_lambdas(summary)
    assert regimes.index.tolist() == [0.1, 1.0] and nht.regimes.DIVERGED not in set(regimes)
    all_bad = summary.assign(weight_decay=[0.1, 2.0, 0.1])
    assert grokking.classify_lambdas(all_bad)[2.0] == nht.regimes.DIVERGED
    assert "(+1 diverged)" in grokking.regime_table(summary).loc[1.0, "grokked"]


def test_every_member_diverging_stops_the_batch_early(tmp_path):
    table, messages = train([BAD_LR, 2 * BAD_LR], nht.RunCache(tmp_path / "all"))
    assert table.diverged_step.notna().all() and table.step.max() < SGD.steps
    assert any("2 of 2" in m for m in messages)
    summary = nht.regimes.summarise_runs(table, ["lr"])
    assert (summary.regime == nht.regimes.DIVERGED).all() and "T_fit" in summary.columns
