"""How much of the training fit is memorised rather than explained by the rule."""
from __future__ import annotations

import numpy as np


def memorisation_score(train_acc, test_acc, chance: float):
    """(train_acc - test_acc) / (1 - chance), clipped to [0, 1].

    1: the training set is fitted while test predictions are at chance (a lookup table, the memorising shortcut);
    0: test accuracy matches the training fit (the rule is used). Works on scalars, arrays and pandas Series.
    """
    if not 0 <= chance < 1:
        raise ValueError(f"chance={chance} must be in [0, 1)")
    return np.clip((np.asarray(train_acc, float) - np.asarray(test_acc, float)) / (1 - chance), 0.0, 1.0)
