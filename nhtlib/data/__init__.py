"""Data sets as tensors: every task builds a `Dataset` of named splits.

A split holds inputs x and integer labels y. They are either *shared* by all K members of a batch
(x: (N, ...), y: (N,)) or *per member* (x: (K, N, ...), y: (K, N)), e.g. when each seed draws its own data.
The split called "train" is the one optimised; every split is evaluated at each log step.

Image splits store their pixels as uint8 (N, C, H, W) with an `ImageCodec` (`nhtlib.data.codec`) that turns a
batch into the model's float input where the batch is (`Split.take`), so a split on the GPU holds a quarter of the
bytes of its floats. Their images can stay shared while the labels and the per-image border colours differ per
member (``shared_x``): `stack_members` keeps one copy of images that all seeds share. Code that needs a whole split as
floats reads `Split.inputs` (or `Split.decoded`); ``split.x`` is what is stored.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from nhtlib.config import Config
from nhtlib.data.codec import ImageCodec


def _rows(t: torch.Tensor, idx: torch.Tensor, member_dim: bool) -> torch.Tensor:
    """Examples idx of t: t (K, N, ...) with member_dim and idx (K, B) -> (K, B, ...) (each member its own rows);
    else t (N, ...) -> t[idx] (idx.shape + ...)."""
    if not member_dim:
        return t[idx]
    return torch.gather(t, 1, idx.view(*idx.shape, *([1] * (t.dim() - 2))).expand(*idx.shape, *t.shape[2:]))


def resident_bytes(tensors) -> int:
    """Bytes held by the storages behind `tensors`, each storage counted once (views and repeats are free)."""
    seen: dict[tuple, int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[(str(t.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


@dataclass
class Split:
    """Inputs and labels of one split (see the module docstring for the layouts).

    x: the stored inputs: float or token ids (N, ...) / (K, N, ...), or, with a codec, images (N, C, H, W) /
    (K, N, C, H, W), uint8 or floating point on the [0, 1] scale. y: int64 labels (N,) or (K, N) with per_member.
    codec: how stored images become model inputs (None: x is the model input as it is). border: int64 palette index
    of each image's frame, (N,) shared or (K, N) per member (needs a codec with a palette; None: no frame).
    shared_x: with per_member, x is one (N, ...) tensor for every member (only the labels / borders differ).
    """

    x: torch.Tensor
    y: torch.Tensor
    per_member: bool = False
    codec: ImageCodec | None = None
    border: torch.Tensor | None = None
    shared_x: bool = False

    def __post_init__(self) -> None:
        n_lead = 2 if self.per_member else 1
        x_lead = self.x.shape[:n_lead] if self.x_per_member else self.x.shape[:1]
        if self.y.dim() != n_lead or x_lead != self.y.shape[-len(x_lead):]:
            raise ValueError(f"split shapes do not match: x {tuple(self.x.shape)}, y {tuple(self.y.shape)}, "
                             f"per_member={self.per_member}, shared_x={self.shared_x}")
        if self.shared_x and not self.per_member:
            raise ValueError("shared_x=True describes per-member splits (per_member=True) whose images are shared")
        if self.codec is not None and self.x.dim() != len(x_lead) + 3:
            raise ValueError(f"images with a codec must be (N, C, H, W) or (K, N, C, H, W); got {tuple(self.x.shape)}")
        if self.border is not None:
            if self.codec is None or not self.codec.draws_borders:
                raise ValueError("border indices need a codec with a palette")
            if self.border.shape not in (self.y.shape[-1:], self.y.shape if self.per_member else None):
                raise ValueError(f"border indices {tuple(self.border.shape)} must be (N,) or, per member, (K, N); "
                                 f"labels are {tuple(self.y.shape)}")

    @property
    def size(self) -> int:
        return self.y.shape[-1]

    @property
    def x_per_member(self) -> bool:
        """Whether x has a leading member dimension (K, N, ...)."""
        return self.per_member and not self.shared_x

    @property
    def border_per_member(self) -> bool:
        return self.border is not None and self.border.dim() == 2

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one example as the model sees it, decoded (C, S, S) for images."""
        stored = tuple(self.x.shape[2:] if self.x_per_member else self.x.shape[1:])
        return stored if self.codec is None else self.codec.output_shape(stored)

    def inputs(self) -> torch.Tensor:
        """The whole split as model inputs: (N, ...) or, per member, (K, N, ...) (images decoded on their device;
        for large image splits prefer `take` on batches)."""
        if self.codec is None:
            return self.x
        if not self.per_member:
            return self.codec.decode(self.x, self.border)
        k = self.y.shape[0]
        if self.shared_x and not self.border_per_member:  # the members see the same images: decode them once
            x = self.codec.decode(self.x, self.border)
            return x.unsqueeze(0).expand(k, *x.shape)
        pixels = self.x if self.x_per_member else self.x.unsqueeze(0).expand(k, *self.x.shape)
        border = self.border
        if border is not None and border.dim() == 1:
            border = border.unsqueeze(0).expand(k, -1)
        return self.codec.decode(pixels, border)

    def decoded(self) -> "Split":
        """The same split with its inputs decoded (`inputs`): a plain split without codec."""
        if self.codec is None:
            return self
        return Split(self.inputs(), self.y, self.per_member)

    @property
    def decoded_nbytes(self) -> int:
        """Bytes `decoded` would hold: float32 inputs, one copy per member unless the members share the images and
        their frames (0 for a split without codec: it is decoded already)."""
        if self.codec is None:
            return 0
        copies = self.y.shape[0] if self.x_per_member or self.border_per_member else 1
        return 4 * copies * self.size * math.prod(self.input_shape)

    def take(self, idx: torch.Tensor | None, k_members: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Model inputs and labels of examples `idx`, decoded on the split's device.

        idx: per-member indices (K, B); for a shared split also any index shape (e.g. (B,): inputs (B, ...), labels
        (B,)); None: the whole split, (K, N, ...) and (K, N) (a shared split's viewed K = k_members times).
        Returns inputs of shape ``idx.shape + input_shape`` and labels of shape ``idx.shape``.
        """
        if idx is None:
            x = self.inputs()
            if self.per_member:
                return x, self.y
            return x.unsqueeze(0).expand(k_members, *x.shape), self.y.unsqueeze(0).expand(k_members, *self.y.shape)
        idx = idx.to(self.x.device)
        x, y = _rows(self.x, idx, self.x_per_member), _rows(self.y, idx, self.per_member)
        if self.codec is None:
            return x, y
        border = None if self.border is None else _rows(self.border, idx, self.border_per_member)
        return self.codec.decode(x, border), y

    def head(self, n: int) -> "Split":
        """The first n examples (all of them if the split has fewer); stored as they are (still encoded)."""
        def first(t: torch.Tensor | None, member_dim: bool) -> torch.Tensor | None:
            return None if t is None else (t[:, :n] if member_dim else t[:n])

        return dataclasses.replace(self, x=first(self.x, self.x_per_member), y=first(self.y, self.per_member),
                                   border=first(self.border, self.border_per_member))

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the split holds (stored inputs, labels, borders, the codec's)."""
        extra = [] if self.codec is None else self.codec.tensors()
        return [t for t in (self.x, self.y, self.border) if t is not None] + extra

    @property
    def nbytes(self) -> int:
        """Resident bytes of the split (shared storages counted once)."""
        return resident_bytes(self.tensors())

    def to(self, device) -> "Split":
        return self._to(device, {})

    def _to(self, device, moved: dict) -> "Split":
        """`to` with a memo {id: (original, moved)}: a tensor or codec several splits share is moved once (the
        original is kept in the memo so its id is not reused while the memo lives)."""
        def move(obj):
            if obj is None:
                return None
            if id(obj) not in moved:
                moved[id(obj)] = (obj, obj.to(device))
            return moved[id(obj)][1]

        return Split(move(self.x), move(self.y), self.per_member, move(self.codec), move(self.border), self.shared_x)


@dataclass
class Dataset:
    splits: dict[str, Split]
    n_classes: int
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if "train" not in self.splits:
            raise ValueError(f"a Dataset needs a 'train' split; got {sorted(self.splits)}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one model input, decoded images as (C, image_size, image_size)."""
        return self.splits["train"].input_shape

    @property
    def nbytes(self) -> int:
        """Resident bytes of all splits, a storage that several splits share (e.g. test images) counted once."""
        return resident_bytes([t for split in self.splits.values() for t in split.tensors()])

    def decoded_if_small(self, max_bytes: int) -> "Dataset":
        """The Dataset with every split decoded up front (`Split.decoded`) when all the floats together take at most
        max_bytes, else itself. Decoding is per image, so a batch of the decoded split equals the decoded batch: the
        results are the same, and small data sets skip the per-step decode (uint8 storage pays off for large ones)."""
        if sum(split.decoded_nbytes for split in self.splits.values()) > max_bytes:
            return self
        return Dataset({k: v.decoded() for k, v in self.splits.items()}, self.n_classes, self.meta)

    def to(self, device) -> "Dataset":
        moved: dict = {}  # shared tensors stay shared on the device
        return Dataset({k: v._to(device, moved) for k, v in self.splits.items()}, self.n_classes, self.meta)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b))


def _same_split(a: Split, b: Split) -> bool:
    same_codec = a.codec is None and b.codec is None or a.codec is not None and a.codec.matches(b.codec)
    return same_codec and _same(a.x, b.x) and _same(a.y, b.y) and _same(a.border, b.border)


def _stack_split(parts: list[Split]) -> Split:
    """One per-member split from K shared ones. Image splits (with a codec) keep images and border indices that
    all members share as one tensor; only what differs is stacked."""
    first = parts[0]
    y = torch.stack([p.y for p in parts])
    if first.codec is None:
        return Split(torch.stack([p.x for p in parts]), y, per_member=True)
    if not all(first.codec.matches(p.codec) for p in parts[1:]):
        raise ValueError("stack_members: the seeds' image splits decode differently (their codecs differ)")
    if (first.border is None) != any(p.border is None for p in parts):
        raise ValueError("stack_members: some seeds' images have borders and others not")
    shared_x = all(_same(p.x, first.x) for p in parts[1:])
    x = first.x if shared_x else torch.stack([p.x for p in parts])
    border = first.border
    if border is not None and not all(_same(p.border, border) for p in parts[1:]):
        border = torch.stack([p.border for p in parts])
    return Split(x, y, per_member=True, codec=first.codec, border=border, shared_x=shared_x)


def stack_members(datasets: list[Dataset]) -> Dataset:
    """One Dataset for K members from K per-seed Datasets (shared splits stay shared when identical).

    A split that differs between seeds becomes per member; for image splits only what differs is stacked (labels,
    border colours), so K members whose images are the same hold one copy of them."""
    first = datasets[0]
    splits = {}
    for name, split in first.splits.items():
        parts = [d.splits[name] for d in datasets]
        if any(p.per_member for p in parts):
            raise ValueError(f"stack_members takes one Dataset per seed; split {name!r} is already per member")
        if len(parts) > 1 and all(_same_split(p, split) for p in parts[1:]):
            splits[name] = split
        else:
            splits[name] = _stack_split(parts)
    return Dataset(splits, first.n_classes, first.meta)


class TaskConfig(Config):
    """A task builds its Dataset from a seed: `build(seed) -> Dataset` (data are generated on the CPU)."""

    def build(self, seed: int) -> Dataset:  # pragma: no cover - interface
        raise NotImplementedError

    def data_fingerprint(self) -> str | None:
        """A hash of the files this task reads (None: the data are generated in code from the config alone).

        It is part of every run's identity in the run cache, so a run trained on one copy of a data set is never
        served for another. Raises the loader's FileNotFoundError when the data are not where the task looks.
        File-reading tasks compute it with `nhtlib.data.files` (content hash, memoised by stat signature)."""
        return None

# one module per data set (grouped: the layout shared by the group-labelled ones)
from nhtlib.data import coloured_borders, celeba, cifar, files, grouped, mnist, modular, sparse_parity, waterbirds  # noqa: E402,F401
