"""The group convention of every grouped task (CelebA, Waterbirds; shared/papers/nht.md §3.4, §3.5, §7.3): a data
set names its groups itself, and the group metrics (`nhtlib.analysis.groups`) read those names.

* a binary target y in {0, 1} and a binary spurious attribute a in {0, 1}; the group index is g = 2 y + a;
* the evaluation set is stored as one split per non-empty group, named ``f"{split}_y{y}a{a}"`` (e.g. ``test_y1a0``),
  so the training loop logs ``test_y1a0_acc`` etc.; there is no separate ungrouped ``test`` split (every image would
  be evaluated twice);
* a task's ``Dataset.meta["groups"]`` maps those split names to their image counts and ``meta["majority_pairing"]``
  maps each y to the a that goes with it most often in training (the "aligned" background / hair colour).
"""
from __future__ import annotations

import re

import numpy as np

# "<split>_y<y>a<a>" (a group split of an evaluation set) or plain "y<y>a<a>" (e.g. meta["train_groups"] keys)
GROUP_PATTERN = re.compile(r"^(?:(?P<split>.+)_)?y(?P<y>[01])a(?P<a>[01])$")


def group_split_name(split: str, y: int, a: int) -> str:
    """Name of the split holding group (y, a) of evaluation set `split`: ("test", 1, 0) -> "test_y1a0"."""
    return f"{split}_y{int(y)}a{int(a)}"


def parse_group_name(name: str) -> tuple[str | None, int, int] | None:
    """("test", 1, 0) for "test_y1a0", (None, 1, 0) for "y1a0", None for any other name (e.g. "train")."""
    match = GROUP_PATTERN.match(name)
    if match is None:
        return None
    return match["split"], int(match["y"]), int(match["a"])


def group_index(y, a):
    """g = 2 y + a (works on ints, numpy arrays and tensors alike)."""
    return 2 * y + a


def count_groups(y, a) -> dict[tuple[int, int], int]:
    """{(y, a): number of examples} for the four groups (zeros included) from two 0/1 arrays of equal length."""
    g = np.asarray(group_index(np.asarray(y, dtype=np.int64), np.asarray(a, dtype=np.int64)))
    counts = np.bincount(g.ravel(), minlength=4)
    return {(gi // 2, gi % 2): int(counts[gi]) for gi in range(4)}


def majority_pairing(y, a) -> dict[int, int]:
    """{y: the a most frequent with it} from training labels (ties -> a = y, the "aligned" reading of a tie).

    Classes without any example are left out."""
    counts = count_groups(y, a)
    out = {}
    for yy in (0, 1):
        n0, n1 = counts[(yy, 0)], counts[(yy, 1)]
        if n0 + n1 > 0:
            out[yy] = yy if n0 == n1 else int(n1 > n0)
    return out
