"""Grouped data sets for spurious-correlation tasks (CelebA, Waterbirds): the Dataset layout of
`nhtlib.data.groups` — a "train" split plus one evaluation split per (target y, spurious attribute a) group —
and the group-stratified subset both tasks use to shrink their training sets.
"""
from __future__ import annotations

import numpy as np
import torch

from nhtlib.data.groups import count_groups, group_split_name, majority_pairing
from nhtlib.data import Dataset, ImageCodec, Split

SMALL_GROUP = 30  # test groups with fewer images give accuracies too noisy to compare (binomial sd > 9 points)


def stratified_subset(groups, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of n examples keeping every group's share (largest remainder rounding), drawn at random within
    each group with numpy seed `seed`. n >= len(groups) returns all indices."""
    groups = np.asarray(groups)
    if n >= len(groups):
        return np.arange(len(groups))
    values, counts = np.unique(groups, return_counts=True)
    quota = counts * n / len(groups)
    take = np.floor(quota).astype(int)
    extra = np.argsort(-(quota - take), kind="stable")[: n - take.sum()]
    take[extra] += 1
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(groups == v))[:k] for v, k in zip(values, take)]
    return np.sort(np.concatenate(chosen))


def grouped_dataset(train_x: torch.Tensor, train_y, train_a, eval_x: torch.Tensor, eval_y, eval_a, *,
                    eval_split: str = "test", target: str, spurious: str, note: str,
                    codec: ImageCodec | None = None, **meta) -> Dataset:
    """The grouped Dataset of nhtlib.data.groups from images and 0/1 labels (shared with waterbirds).

    train_x / eval_x: float32 (N, 3, S, S), already standardised, or with `codec` stored images (uint8) that the
    codec decodes batch by batch; train_y / eval_y: target, train_a / eval_a: spurious attribute (0/1 arrays).
    Splits: "train" (y only) and one split f"{eval_split}_y{y}a{a}" per non-empty evaluation group; empty groups
    are listed in meta["omitted_groups"]. Extra keyword arguments go into meta."""
    train_y, train_a = np.asarray(train_y, np.int64), np.asarray(train_a, np.int64)
    eval_y, eval_a = np.asarray(eval_y, np.int64), np.asarray(eval_a, np.int64)
    splits = {"train": Split(train_x, torch.from_numpy(train_y), codec=codec)}
    groups, omitted = {}, []
    for (y, a), n in count_groups(eval_y, eval_a).items():
        name = group_split_name(eval_split, y, a)
        if n == 0:
            omitted.append(name)
            continue
        idx = torch.from_numpy(np.flatnonzero((eval_y == y) & (eval_a == a)))
        splits[name] = Split(eval_x[idx], torch.full((n,), y, dtype=torch.int64), codec=codec)
        groups[name] = n
    train_groups = {f"y{y}a{a}": n for (y, a), n in count_groups(train_y, train_a).items()}
    return Dataset(splits, n_classes=2, meta={
        "chance": 0.5, "groups": groups, "train_groups": train_groups, "omitted_groups": omitted,
        "target": target, "spurious": spurious, "majority_pairing": majority_pairing(train_y, train_a),
        "eval_split": eval_split, "note": note, **meta})


def small_groups_text(groups: dict[str, int], limit: int = SMALL_GROUP) -> str:
    small = [f"{name} ({n})" for name, n in groups.items() if n < limit]
    if not small:
        return f"every test group has >= {limit} images"
    return f"groups with < {limit} test images are not trustworthy: {', '.join(small)}"
