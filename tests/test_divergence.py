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


# A finite blow-up (issue 26 item 8). Before: a loss that rose 10,000-fold stayed finite, so the run was kept and
# summarised as a result.

def falling_curve(n: int = 40, start: float = 0.69, end: float = 1e-4) -> list[float]:
    """A noisy learning curve: geometric fall from `start` to `end`, every other point 1.3x up or down."""
    return [v * (1.3 if i % 2 == 0 else 1 / 1.3) for i, v in enumerate(np.geomspace(start, end, n))]


def test_blow_up_rule_on_series_with_known_answers():
    blow_up_index = nht.divergence.blow_up_index
    learnt = falling_curve()
    # falls 7,000-fold, then rises past its first loss (0.897): flagged at 3.0, not at 0.5 (still below the start)
    assert blow_up_index(learnt + [0.5, 3.0, 40.0, 900.0]) == len(learnt) + 1
    # a 10x spike over the running minimum, then learning goes on
    spiky = learnt[:20] + [10 * min(learnt[:20])] + learnt[20:]
    assert blow_up_index(spiky) is None
    # grokking's slingshot: from 1e-6 up 10,000-fold (far above the running minimum) but below the first loss
    assert blow_up_index(falling_curve(end=1e-6) + [1e-2, 1e-4, 1e-6]) is None
    # a run that learns nothing: never 1000x its minimum
    assert blow_up_index([0.69, 0.7, 0.71, 0.69, 0.72] * 5) is None
    # after the warm-up (two logged points), a 1e6-fold jump is one
    assert blow_up_index([0.7, 1e6]) is None and blow_up_index([0.7, 0.6, 1e6]) == 2


def test_blow_up_rule_is_elementwise_over_members():
    import torch

    flagged = nht.divergence.blew_up(torch.tensor([5.0, 0.5, 5.0]), torch.tensor([1e-4, 1e-4, 0.1]),
                                     torch.tensor([0.7, 0.7, 0.7]), 3)
    assert flagged.tolist() == [True, False, False]  # above the start but only 50x its minimum: not a blow-up


def test_a_finite_blow_up_in_training_marks_the_member_diverged(tmp_path, monkeypatch):
    """Plant a blow-up: from the 4th log (step 30) on, the evaluated training loss of member 1 is 1e4x the real
    one. That member is recorded as diverged at step 30, its rows stop at step 20; member 0 is unaffected."""
    real_evaluate = nht.train.evaluate
    train_logs = []

    def evaluate(model, split, k_members, batch_size, precision="fp32"):
        loss, acc = real_evaluate(model, split, k_members, batch_size, precision)
        if split.size == TASK.n_train:  # the training split (no train_eval_size: evaluated whole)
            train_logs.append(len(train_logs))
            if len(train_logs) > 3:
                loss = loss.clone()
                loss[1] *= 1e4
        return loss, acc

    monkeypatch.setattr(nht.train, "evaluate", evaluate)
    table, messages = train(FINE_LRS, nht.RunCache(tmp_path / "blown"))
    monkeypatch.undo()
    blown, fine = table[table.lr == FINE_LRS[1]], table[table.lr == FINE_LRS[0]]
    assert (blown.diverged_step == 30).all() and blown.step.max() == 20
    assert any("diverged" in m and "1 of 2" in m and "at step 30" in m for m in messages), messages
    alone, _ = train(FINE_LRS[:1], nht.RunCache(tmp_path / "alone"))
    assert fine.diverged_step.isna().all()
    pd.testing.assert_frame_equal(fine.drop(columns=["run", "wall_s"]).reset_index(drop=True),
                                  alone.drop(columns=["run", "wall_s"]).reset_index(drop=True), rtol=1e-6,
                                  check_like=True)
