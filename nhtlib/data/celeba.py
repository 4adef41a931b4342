"""CelebA with a spurious attribute (NHT's CelebA experiment; shared/papers/nht.md §3.4 and §7.3), from local
files only.

Layout (the official one, as in torchvision's ``celeba/`` folder) under ``<data_root>/celeba/``::

    img_align_celeba/<6-digit id>.jpg   aligned-and-cropped 178 x 218 images (any subset of the 202,599)
    list_attr_celeba.txt                line 1: count, line 2: the 40 attribute names, then "<file> v1 ... v40" (1/-1)
    list_eval_partition.txt             "<file> 0|1|2" (train / val / test)
    identity_CelebA.txt                 "<file> <identity>" (needed only for split="identity")

Only rows whose image file exists are kept, so the loader works on any subset, by design (the book's offline copy
holds 5,732 images of 200 identities, shared/data/README.md); the note in meta says how many are present, and
`CelebATask` refuses an n_train larger than the training split. The bbox / landmark files are not needed. The
annotation files are parsed here with pandas, not with torchvision's ``CelebA`` class, which needs the bbox and
landmark files, checks the official MD5s and indexes all 202,599 images. Every annotation file is checked against
its schema (`read_attributes`, `_read_column`): a header, a value or a file name out of place raises
`files.DataSchemaError` naming the file and the line, rather than shifting a column.

`load_celeba(data_root, image_size)` decodes every present annotated image once (Pillow,
`files.read_image`, which names a corrupt file): centre crop 178 x 178 (the square of side min(width, height) at the
centre), then resize to image_size x image_size with Pillow's "box" filter (an area average, i.e. anti-aliased
down-sampling; `files.resample` reproduces Pillow's output exactly), cached as uint8 under
results_root()/data_cache keyed by the content fingerprint of the decoded images and image_size. The task's data
fingerprint covers the three annotation files and every .jpg present (so it needs no parse of the 26 MB attribute
file). `CelebATask` builds the grouped Dataset of `nhtlib.data.groups`: y = target attribute (default
Smiling), a = spurious attribute (default Blond_Hair), split "train" plus one split per non-empty test group
``test_y{y}a{a}``. Pixels are standardised with mean = std = 0.5 per channel (x in [-1, 1]): a fixed, documented
choice rather than statistics of whichever subset is present.

Two splits, neither depending on the training seed (all seeds see the same data; the seed only changes the
initialisation and the batch order):

* ``split="identity"`` (default): our identity-disjoint split, stratified by group (`identity_split`): whole
  identities go to train or test so that the test split gets about `test_fraction` of every group. Used by default
  because the official test partition of the local subset is tiny (660 images of 22 people, 1 blond man).
* ``split="official"``: the official partition, train = 0, test = 2 (val = 1 unused).

`n_train` keeps a group-stratified subset of the training split (each group keeps its share; deterministic).
Group counts are small on the local subset: accuracies of groups with fewer than 30 test images (e.g. blond men for
Blond_Hair / Male) are not trustworthy, and meta["note"] says which.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from nhtlib.config import ConfigError, check_choice, check_range, not_identity
from nhtlib.data.groups import count_groups, group_split_name
from nhtlib.paths import data_root as resolve_data_root
from nhtlib.data import Dataset, ImageCodec, TaskConfig
from nhtlib.data.files import DataSchemaError, cached_decode, describe, file_digests, fingerprint, read_image, resample
from nhtlib.data.grouped import grouped_dataset, small_groups_text, stratified_subset

# the 40 attribute names of list_attr_celeba.txt, in file order (shared/data/README.md, celeba/)
ATTRIBUTES = (
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips", "Big_Nose",
    "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses",
    "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks",
    "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick",
    "Wearing_Necklace", "Wearing_Necktie", "Young")
IMAGE_DIR = "img_align_celeba"
ATTR_FILE, PARTITION_FILE, IDENTITY_FILE = "list_attr_celeba.txt", "list_eval_partition.txt", "identity_CelebA.txt"
MEAN = STD = (0.5, 0.5, 0.5)  # fixed: x = (pixel/255 - 0.5) / 0.5 in [-1, 1], independent of the subset present
SPLITS = ("identity", "official")
PARTITIONS = (0, 1, 2)  # list_eval_partition.txt: train, val, test


def find_celeba(data_root: str | None = None) -> Path:
    """The folder holding the official CelebA files: <root>/celeba/ (or <root> itself if it holds them)."""
    root = resolve_data_root(data_root)
    for folder in (root / "celeba", root):
        if (folder / IMAGE_DIR).is_dir() and (folder / ATTR_FILE).is_file() and (folder / PARTITION_FILE).is_file():
            return folder
    folder = root / "celeba"
    raise FileNotFoundError(
        f"no CelebA data under data_root={str(root)!r}. Expected the official layout in {folder}/: "
        f"{IMAGE_DIR}/<6-digit id>.jpg, {ATTR_FILE}, {PARTITION_FILE} and (for split='identity') {IDENTITY_FILE}. "
        "Any subset of the images works; nothing is downloaded: put the files at <data_root>/celeba/ or pass "
        "data_root.")


def read_attributes(path: Path) -> pd.DataFrame:
    """list_attr_celeba.txt -> DataFrame (rows: file names, columns: the attribute names) of 0/1 ints (1 = present).

    The file: line 1 the row count, line 2 the 40 names of `ATTRIBUTES` in that order, then "<file> v1 ... v40"
    with values 1 / -1, whitespace separated (CRLF line endings: the \\r is whitespace for sep=r"\\s+"). Each is
    checked (`DataSchemaError` naming the file, the line, what was expected and what was found): a header that is
    not the expected list, a row with another number of fields, a value other than 1 / -1, a file name that is not
    "<6 digits>.jpg" or appears twice, a count that is not the number of rows. 202,599 rows parse in about a
    second."""
    with open(path, encoding="latin1") as fh:
        count, names = fh.readline().strip(), fh.readline().split()
    if tuple(names) != ATTRIBUTES:
        raise DataSchemaError(path, 2, f"the {len(ATTRIBUTES)} CelebA attribute names in order "
                              f"({', '.join(ATTRIBUTES[:3])}, ..., {ATTRIBUTES[-1]})", _header_difference(names))
    table = _read_table(path, ["file", *names], skiprows=2)
    _check_file_names(path, table.index, first_line=3)
    _check_signs(path, table)
    if not count.isdigit() or int(count) != len(table):
        raise DataSchemaError(path, 1, f"the number of rows that follow ({len(table):,})", repr(count))
    return (table > 0).astype(np.int64)


def _header_difference(names: list[str]) -> str:
    """Where a header differs from ATTRIBUTES, in words."""
    if len(names) != len(ATTRIBUTES):
        extra, missing = sorted(set(names) - set(ATTRIBUTES)), sorted(set(ATTRIBUTES) - set(names))
        return (f"{len(names)} names (not expected: {', '.join(extra) or 'none'}; missing: "
                f"{', '.join(missing) or 'none'})")
    i = next(i for i, (a, b) in enumerate(zip(names, ATTRIBUTES)) if a != b)
    return f"name {i + 1} is {names[i]!r} where {ATTRIBUTES[i]!r} belongs"


def _read_table(path: Path, names: list[str], skiprows: int = 0) -> pd.DataFrame:
    """A whitespace-separated annotation file indexed by its first column; a line with too many fields is a
    DataSchemaError (too few give NaN, which the value checks refuse)."""
    try:
        return pd.read_csv(path, sep=r"\s+", skiprows=skiprows, header=None, names=names, index_col=0,
                           encoding="latin1")
    except pd.errors.ParserError as err:
        raise DataSchemaError(path, None, f"{len(names)} fields per line ({', '.join(names[:3])}"
                              f"{', ...' if len(names) > 3 else ''})", str(err)) from err


def _check_file_names(path: Path, index: pd.Index, first_line: int) -> None:
    """DataSchemaError unless every row names a distinct "<6 digits>.jpg" (the id the decoded images keep)."""
    names = index.astype(str)
    bad = np.flatnonzero(~names.str.fullmatch(r"\d{6}\.jpg"))
    if len(bad):
        raise DataSchemaError(path, first_line + int(bad[0]), 'a file name "<6 digits>.jpg"', repr(names[bad[0]]))
    twice = np.flatnonzero(index.duplicated())
    if len(twice):
        raise DataSchemaError(path, first_line + int(twice[0]), "each file listed once",
                              f"{names[twice[0]]} a second time ({len(twice):,} repeated rows)")


def _check_signs(path: Path, table: pd.DataFrame, first_line: int = 3) -> None:
    """DataSchemaError unless every attribute value is 1 or -1 (a missing field reads as NaN, a word as text)."""
    values = table.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isin(values, (-1.0, 1.0))
    if bad.any():
        row, col = (int(v[0]) for v in np.nonzero(bad))
        found = table.iat[row, col]
        raise DataSchemaError(path, first_line + row, f"attribute values 1 or -1 ({table.columns[col]} of "
                              f"{table.index[row]})", "a missing field" if pd.isna(found) else repr(found))


def _read_column(path: Path, name: str, allowed: Sequence[int] | None = None) -> pd.Series:
    """A two-column "<file> <int>" file (partition, identity) as a Series indexed by file name, checked: two fields
    per line, each file once, integer values (in `allowed` when given, else positive)."""
    table = _read_table(path, ["file", name])
    _check_file_names(path, table.index, first_line=1)
    column = table[name]
    numbers = pd.to_numeric(column, errors="coerce")
    ok = numbers.isin(allowed) if allowed is not None else (numbers > 0) & (numbers % 1 == 0)
    if not ok.all():
        row = int(np.flatnonzero(~ok.to_numpy())[0])
        what = f"{name} one of {', '.join(map(str, allowed))}" if allowed is not None else f"a positive integer {name}"
        found = column.iat[row]
        raise DataSchemaError(path, 1 + row, what, "a missing field" if pd.isna(found) else repr(found))
    return numbers.astype(np.int64)


def _lookup(column: pd.Series, files: list[str], path: Path) -> np.ndarray:
    """column's values for `files` (int64 (N,)); DataSchemaError naming the first file `path` does not list."""
    missing = pd.Index(files).difference(column.index)
    if len(missing):
        raise DataSchemaError(path, None, f"a line for every image of {ATTR_FILE}",
                              f"no line for {missing[0]} ({len(missing):,} image(s) unlisted)")
    return column.loc[files].to_numpy(np.int64)


def _decode(folder: Path, files: Sequence[str], image_size: int) -> dict:
    """{"images": (uint8 (N, 3, S, S) centre-square-cropped, box-filtered images, int64 (N,) image ids)}."""
    x = torch.empty((len(files), 3, image_size, image_size), dtype=torch.uint8)
    for i, name in enumerate(files):
        image = read_image(folder / name)
        h, w = image.shape[1:]
        side = min(w, h)  # 178 for the aligned 178 x 218 images
        left, top = (w - side) // 2, (h - side) // 2
        x[i] = resample(image, (image_size, image_size), "box", box=(left, top, left + side, top + side))
    ids = torch.tensor([int(Path(f).stem) for f in files], dtype=torch.int64)
    return {"images": (x, ids)}


def _present_images(image_dir: Path) -> list[str]:
    with os.scandir(image_dir) as entries:
        return sorted(e.name for e in entries if e.name.lower().endswith(".jpg"))


def _annotation_files(folder: Path) -> list[str]:
    return [f for f in (ATTR_FILE, PARTITION_FILE, IDENTITY_FILE) if (folder / f).is_file()]


def celeba_fingerprint(data_root: str | None = None) -> str:
    """Content fingerprint of the annotation files and every .jpg of img_align_celeba/ (see nhtlib.data.files)."""
    folder = find_celeba(data_root)
    rels = _annotation_files(folder) + [f"{IMAGE_DIR}/{f}" for f in _present_images(folder / IMAGE_DIR)]
    return fingerprint(file_digests(folder, rels))


def load_celeba(data_root: str | None = None, image_size: int = 64) -> dict:
    """The CelebA images present under data_root, with their annotations, in file-name order.

    Returns {"x": uint8 tensor (N, 3, S, S) (centre square crop, box-filter resize), "ids": list of N file names,
    "attrs": DataFrame (N, 40) of 0/1 ints indexed by file name, "partition": int64 array (N,) of 0/1/2,
    "identity": int64 array (N,) or None when identity_CelebA.txt is absent, "folder": the celeba folder,
    "data": what meta["data"] records (folder, files, bytes, fingerprint of annotations + present images)}.
    Images without an annotation row are dropped (the official files annotate all 202,599)."""
    folder = find_celeba(data_root)
    image_dir = folder / IMAGE_DIR
    attrs = read_attributes(folder / ATTR_FILE)
    present = _present_images(image_dir)
    files = sorted(set(present) & set(attrs.index))
    if not files:
        raise FileNotFoundError(f"{image_dir} holds no annotated image (<6-digit id>.jpg listed in {ATTR_FILE})")
    images = [f"{IMAGE_DIR}/{f}" for f in present]
    digests = file_digests(folder, _annotation_files(folder) + images)
    decoded = fingerprint({rel: digests[rel] for rel in (f"{IMAGE_DIR}/{f}" for f in files)})
    arrays = cached_decode(f"celeba-{image_size}", decoded, lambda: _decode(image_dir, files, image_size))
    x, ids = arrays["images"]
    files = [f"{int(i):06d}.jpg" for i in ids.tolist()]
    identity = None
    if (folder / IDENTITY_FILE).is_file():
        identity = _lookup(_read_column(folder / IDENTITY_FILE, "identity"), files, folder / IDENTITY_FILE)
    return {"x": x, "ids": files, "attrs": attrs.loc[files], "folder": folder, "data": describe(folder, digests),
            "partition": _lookup(_read_column(folder / PARTITION_FILE, "partition", PARTITIONS), files,
                                 folder / PARTITION_FILE),
            "identity": identity}


def identity_split(identity, groups, fractions: Sequence[float] = (0.75, 0.25), seed: int = 0) -> np.ndarray:
    """Identity-disjoint split stratified by group: the split index (0 .. len(fractions) - 1) of every example.

    identity, groups: int arrays (N,) (any identity ids; groups e.g. g = 2 y + a). fractions: target share of each
    split, e.g. (train, test) or (train, val, test), summing to 1. Whole identities are assigned greedily: identities
    are visited by decreasing largest share of a group they hold (the lumpiest first, like largest-first bin
    packing; ties in a seed-shuffled order), and each goes to the split where it most reduces
    sum_{split, group} ((assigned - target) / group size)^2, i.e. the split furthest below its target for the groups
    that identity has, in units of each group's share. With at most SWAP_REFINE_MAX_IDS identities, pairwise swaps
    of identities between splits then lower that sum further (`_refine_by_swaps`). Deterministic by seed."""
    identity, groups = np.asarray(identity), np.asarray(groups)
    fractions = np.asarray(fractions, dtype=float)
    if identity.shape != groups.shape or identity.ndim != 1:
        raise ValueError(f"identity {identity.shape} and groups {groups.shape} must be 1-d of equal length")
    if len(fractions) < 2 or (fractions <= 0).any() or not np.isclose(fractions.sum(), 1.0):
        raise ValueError(f"fractions={tuple(fractions)} must be >= 2 positive shares summing to 1")
    ids, id_of = np.unique(identity, return_inverse=True)
    group_values, group_of = np.unique(groups, return_inverse=True)
    content = np.zeros((len(ids), len(group_values)))  # (identities, groups): images of each group per identity
    np.add.at(content, (id_of, group_of), 1.0)
    size = content.sum(0)
    scaled = content / size  # share of each group an identity holds
    shuffled = np.random.default_rng(seed).permutation(len(ids))
    order = shuffled[np.argsort(-scaled.max(1)[shuffled], kind="stable")]
    gap = -fractions[:, None] * scaled.sum(0)[None, :]  # (splits, groups): assigned - target, in group shares
    split_of_id = np.empty(len(ids), dtype=np.int64)
    for i in order:
        # increase of sum (gap + c)^2 - gap^2 = sum c^2 + 2 c gap, for each candidate split
        cost = (scaled[i] ** 2 + 2 * scaled[i] * gap).sum(1)
        s = int(np.argmin(cost))
        gap[s] += scaled[i]
        split_of_id[i] = s
    if len(ids) <= SWAP_REFINE_MAX_IDS:
        _refine_by_swaps(scaled, split_of_id, gap)
    return split_of_id[id_of]


SWAP_REFINE_MAX_IDS = 2000  # pair swaps cost O(identities^2) per pass; with more identities greedy is fine-grained


def _refine_by_swaps(scaled: np.ndarray, split_of_id: np.ndarray, gap: np.ndarray, max_passes: int = 200) -> None:
    """Improve a greedy assignment in place: repeatedly apply the single pairwise swap of two identities between two
    splits that most reduces sum gap^2 (the greedy pass leaves errors of about one identity's share; with few
    identities, e.g. 200 of about 30 images, swaps bring every group within a fraction of that)."""
    n_splits = gap.shape[0]
    for _ in range(max_passes):
        best = (-1e-12, None)
        for s in range(n_splits):
            for t in range(s + 1, n_splits):
                i_s, i_t = np.flatnonzero(split_of_id == s), np.flatnonzero(split_of_id == t)
                if len(i_s) == 0 or len(i_t) == 0:
                    continue
                d = scaled[i_s][:, None, :] - scaled[i_t][None, :, :]  # (|s|, |t|, groups): what s loses, t gains
                delta = ((gap[s] - d) ** 2 - gap[s] ** 2 + (gap[t] + d) ** 2 - gap[t] ** 2).sum(-1)
                k = int(np.argmin(delta))
                if delta.flat[k] < best[0]:
                    best = (delta.flat[k], (s, t, i_s[k // len(i_t)], i_t[k % len(i_t)]))
        if best[1] is None:
            return
        s, t, i, j = best[1]
        d = scaled[i] - scaled[j]
        gap[s] -= d
        gap[t] += d
        split_of_id[i], split_of_id[j] = t, s


@dataclass(frozen=True)
class CelebATask(TaskConfig):
    """CelebA, target vs spurious attribute, grouped test splits (see the module docstring).

    target / spurious: attribute names (ATTRIBUTES); y = target, a = spurious. image_size: side after the centre
    crop and resize. split: "identity" (identity-disjoint, group-stratified; test_fraction of every group to test)
    or "official" (partition 0 = train, 2 = test). n_train: group-stratified training subset (None = all).
    split_seed: seeds the identity split and the subset (not the training seed). data_root is not identity."""

    target: str = "Smiling"
    spurious: str = "Blond_Hair"
    image_size: int = 64
    split: str = "identity"
    test_fraction: float = 0.25
    n_train: int | None = None
    split_seed: int = 0
    data_root: str | None = not_identity(default=None)

    def validate(self) -> None:
        check_choice("target", self.target, ATTRIBUTES)
        check_choice("spurious", self.spurious, ATTRIBUTES)
        if self.target == self.spurious:
            raise ConfigError(f"target and spurious are both {self.target!r}; choose two different attributes")
        check_range("image_size", self.image_size, 4, 178, integer=True)
        check_choice("split", self.split, SPLITS)
        check_range("test_fraction", self.test_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        if self.n_train is not None:
            check_range("n_train", self.n_train, 1, None, integer=True)
        check_range("split_seed", self.split_seed, 0, None, integer=True)

    def data_fingerprint(self) -> str:
        return celeba_fingerprint(self.data_root)

    def build(self, seed: int) -> Dataset:
        """The Dataset (seed is unused: the data are the same for every seed)."""
        data = load_celeba(self.data_root, self.image_size)
        y = data["attrs"][self.target].to_numpy()
        a = data["attrs"][self.spurious].to_numpy()
        if self.split == "official":
            train_idx, test_idx = np.flatnonzero(data["partition"] == 0), np.flatnonzero(data["partition"] == 2)
        else:
            if data["identity"] is None:
                raise FileNotFoundError(f"split='identity' needs {data['folder'] / IDENTITY_FILE}; add it or use "
                                        "split='official'")
            which = identity_split(data["identity"], 2 * y + a, (1 - self.test_fraction, self.test_fraction),
                                   self.split_seed)
            train_idx, test_idx = np.flatnonzero(which == 0), np.flatnonzero(which == 1)
        if len(train_idx) == 0 or len(test_idx) == 0:
            raise ValueError(f"split={self.split!r} leaves {len(train_idx)} train and {len(test_idx)} test images of "
                             f"the {len(y)} present; use split='identity' on a subset without test images")
        if self.n_train is not None:
            if self.n_train > len(train_idx):
                raise ValueError(f"n_train={self.n_train} but the training split has only {len(train_idx)} images")
            train_idx = train_idx[stratified_subset(2 * y[train_idx] + a[train_idx], self.n_train, self.split_seed)]
        x = data["x"]

        def images(idx: np.ndarray) -> torch.Tensor:
            # the uint8 images resized at load (Pillow's box filter, at image_size): the codec only divides by 255
            # and standardises them, the very steps of the float tensors built here before
            return x[torch.from_numpy(idx)]

        n_ids = len(np.unique(data["identity"])) if data["identity"] is not None else None
        test_groups = {group_split_name("test", yy, aa): n
                       for (yy, aa), n in count_groups(y[test_idx], a[test_idx]).items() if n > 0}
        split_text = ("identity-disjoint split stratified by group (test_fraction "
                      f"{self.test_fraction}, split_seed {self.split_seed})" if self.split == "identity"
                      else "official partition (train 0, test 2; val unused)")
        note = (f"CelebA subset: {len(y):,} of 202,599 images present"
                + (f" ({n_ids} identities)" if n_ids is not None else "")
                + f"; y = {self.target}, a = {self.spurious}; {split_text}: train {len(train_idx):,} / "
                f"test {len(test_idx):,} images; {small_groups_text(test_groups)}.")
        return grouped_dataset(images(train_idx), y[train_idx], a[train_idx], images(test_idx), y[test_idx],
                               a[test_idx], eval_split="test", target=self.target, spurious=self.spurious,
                               note=note, codec=ImageCodec(MEAN, STD, image_size=self.image_size),
                               n_images=len(y), n_identities=n_ids, split=self.split, data=data["data"])
