"""Group accuracies for spurious-correlation tasks (CelebA, Waterbirds; shared/papers/nht.md §3.4, §3.5, §7.3), read
from the group splits a grouped task names itself (`nhtlib.data.groups`: ``test_y1a0`` is target 1 on spurious
attribute 0; ``meta["groups"]`` holds their counts, ``meta["majority_pairing"]`` the aligned attribute of each y).

`add_group_metrics(table, counts, ...)` turns a training table into one with the usual summaries: overall accuracy
(recomputed from the group accuracies weighted by their counts), mean-over-groups accuracy, worst-group accuracy,
and (given the majority pairing) aligned / conflicting accuracy and the spurious reliance
1 - conflicting / aligned. Accuracies are fractions in [0, 1], as logged by `nhtlib.engine.train`.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from nhtlib.data.groups import group_index, group_split_name, parse_group_name


def _normalise_pairing(pairing: Mapping) -> dict[int, int]:
    # a pairing that went through JSON (a chapter's saved meta) has string keys: accept "0" as well as 0
    return {int(k): int(v) for k, v in pairing.items()}


def _groups_of(counts: Mapping[str, int], split: str) -> list[tuple[str, int, int, int]]:
    """[(name, y, a, count)] for the non-empty groups of `split` in `counts`, in group-index order."""
    rows = []
    for name, n in counts.items():
        parsed = parse_group_name(name)
        if parsed is not None and parsed[0] == split and int(n) > 0:
            rows.append((name, parsed[1], parsed[2], int(n)))
    return sorted(rows, key=lambda r: group_index(r[1], r[2]))


def add_group_metrics(table: pd.DataFrame, counts: Mapping[str, int], split: str = "test",
                      majority_pairing: Mapping | None = None) -> pd.DataFrame:
    """A copy of a training table with group summaries of evaluation set `split` added as columns.

    table: one row per log step with columns ``<split>_y{y}a{a}_acc`` (fractions in [0, 1]) for the groups in counts.
    counts: {group split name: number of images} (a task's ``meta["groups"]``); names of other splits are ignored
    and groups with count 0 (omitted from the Dataset) do not take part.
    majority_pairing: {y: a} (``meta["majority_pairing"]``; str keys accepted) to add aligned / conflicting columns.

    Added columns (NaN where undefined):
    ``{split}_acc``: overall accuracy, the count-weighted mean of the group accuracies (= accuracy on all images);
    ``{split}_mean_group_acc``: unweighted mean over the present groups; ``{split}_worst_group_acc``: their minimum;
    with majority_pairing, ``{split}_aligned_acc`` / ``{split}_conflicting_acc``: count-weighted accuracy over the
    groups with a == majority_pairing[y] / a != majority_pairing[y], and
    ``{split}_spurious_reliance`` = 1 - conflicting / aligned (0: no reliance on a; NaN when aligned is 0).
    """
    groups = _groups_of(counts, split)
    if not groups:
        raise ValueError(f"no group of split {split!r} in counts {dict(counts)}; expected names like "
                         f"{group_split_name(split, 0, 0)!r}")
    columns = [f"{name}_acc" for name, *_ in groups]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise KeyError(f"the table has no column(s) {missing}; was it trained on the Dataset these counts describe?")
    out = table.copy()
    accs = out[columns].to_numpy(dtype=float)  # (rows, groups)
    weights = np.array([n for *_, n in groups], dtype=float)

    def weighted(mask: np.ndarray) -> np.ndarray:
        if not mask.any():
            return np.full(len(out), np.nan)
        return accs[:, mask] @ weights[mask] / weights[mask].sum()

    out[f"{split}_acc"] = weighted(np.ones(len(groups), bool))
    out[f"{split}_mean_group_acc"] = accs.mean(axis=1)
    out[f"{split}_worst_group_acc"] = accs.min(axis=1)
    if majority_pairing is not None:
        pairing = _normalise_pairing(majority_pairing)
        aligned_mask = np.array([pairing.get(y) == a for _, y, a, _ in groups])
        conflicting_mask = np.array([y in pairing and pairing[y] != a for _, y, a, _ in groups])
        aligned, conflicting = weighted(aligned_mask), weighted(conflicting_mask)
        out[f"{split}_aligned_acc"] = aligned
        out[f"{split}_conflicting_acc"] = conflicting
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"{split}_spurious_reliance"] = np.where(aligned > 0, 1.0 - conflicting / aligned, np.nan)
    return out


def worst_group_accuracy(accs: Mapping[str, float]) -> float:
    """Minimum of {group: accuracy} (NaN if any accuracy is NaN: an unmeasured group must not hide)."""
    if not accs:
        raise ValueError("worst_group_accuracy needs at least one group")
    values = [float(v) for v in accs.values()]
    return math.nan if any(math.isnan(v) for v in values) else min(values)


def average_accuracy(accs: Mapping[str, float], counts: Mapping[str, int]) -> float:
    """Accuracy on all images: sum_g n_g acc_g / sum_g n_g over the groups of accs (keys must be in counts).

    Keys may be split names ("test_y0a1") or the matching "<name>_acc" column names."""
    total, weight = 0.0, 0
    for key, acc in accs.items():
        name = key[:-4] if key.endswith("_acc") and key not in counts else key
        if name not in counts:
            raise KeyError(f"no count for group {key!r}; counts has {sorted(counts)}")
        total += float(acc) * int(counts[name])
        weight += int(counts[name])
    if weight == 0:
        raise ValueError("average_accuracy: the groups have no images")
    return total / weight


def group_table(counts: Mapping[str, int]) -> pd.DataFrame:
    """Small display table of group sizes: columns [split,] y, a, count, share (share of its split's images).

    counts: {"test_y0a1": n, ...} (meta["groups"]) or {"y0a1": n, ...} (meta["train_groups"]); the split column is
    present only when the names carry one."""
    rows = []
    for name, n in counts.items():
        parsed = parse_group_name(name)
        if parsed is None:
            raise ValueError(f"{name!r} is not a group name like 'test_y0a1' or 'y0a1'")
        rows.append({"split": parsed[0], "y": parsed[1], "a": parsed[2], "count": int(n)})
    table = pd.DataFrame(rows, columns=["split", "y", "a", "count"])
    table["share"] = table["count"] / table.groupby("split", dropna=False)["count"].transform("sum")
    if table["split"].isna().all():
        table = table.drop(columns="split")
        return table.sort_values(["y", "a"]).reset_index(drop=True)
    return table.sort_values(["split", "y", "a"]).reset_index(drop=True)
