"""Waterbirds (NHT's Waterbirds experiment; shared/papers/nht.md §3.5 and §7.3): the real data set, or a clearly
labelled CUB stand-in.

Both sources give the grouped Dataset of `nhtlib.data.groups`: y = 1 waterbird / 0 landbird, a = 1 water /
0 land background, split "train" plus one split per non-empty evaluation group ``{eval_split}_y{y}a{a}``. Pixels
are standardised with mean = std = 0.5 per channel (x in [-1, 1]), a fixed documented choice. Nothing depends on
the training seed (every seed sees the same images; the seed only changes the initialisation and batch order).

``source="waterbirds"``: the real data set of Sagawa et al. (2020) (group DRO; also WILDS), to be provided by the
user through data_root: ``<data_root>/waterbirds/`` or ``<data_root>/waterbird_complete95_forest2water2/`` holding
``metadata.csv`` (columns img_id, img_filename, y, split, place; split 0 train / 1 val / 2 test; y 1 = waterbird;
place 1 = water) and the images at ``<folder>/<img_filename>``; every listed image must be there (the error
names how many are missing and the first few). Every image is resized so that its shorter side is image_size
(Pillow's bilinear filter, anti-aliased when shrinking), then centre-cropped to image_size x image_size. (The
group-DRO code instead squashes to (256/224) S x (256/224) S and centre-crops S; ours keeps the aspect ratio and the
whole shorter side.) a = place; train = split 0, the evaluation set = split 2 ("test") or 1 ("val").

``source="cub_standin"`` (the book's offline default, since real Waterbirds is not on this machine): a *stand-in*
built in code from real CUB-200-2011 photos in ``<data_root>/cub/`` (``waterbirds_standin.csv`` + ``CUB_200_2011/
images/``: 1,675 photos of species 001-050, shared/data/README.md "cub/"). Construction, deterministic by
``construction_seed`` (part of the config, independent of the training seed):

* split: train = CUB's training images (cub_is_training_image = 1), test = CUB's test images (no val split);
* background a: in train, within each class exactly round(correlation x n_class) images get a = y (aligned) and
  the others a = 1 - y; in test, within each class floor(n/2) images get a = y and the rest a = 1 - y (balanced);
  which images is a seeded random permutation;
* background image: a crop of a *different* photo of the same split whose bird is of type a (waterbird photos
  supply "water" backgrounds, landbird photos "land" backgrounds), drawn uniformly with the seed among photos with a
  usable background: the largest strip of that photo outside its bird's bounding box (expanded by BIRD_MARGIN),
  i.e. left / right / above / below the box, cut to an aspect ratio of at most 2:1 around its centre, resized
  (stretched) to S x S;
* foreground: the example's own bird = its bounding box expanded by BIRD_MARGIN of the box size on every side
  (clipped to the photo), resized keeping its aspect ratio so that its longer side is bird_scale x S, pasted at the
  centre of the background (`composite`). There is no segmentation mask, so the bird keeps its own natural
  background inside its box: the background signal is the surround, and the box interior still carries the natural
  (correlated) CUB background;
* everything is done in float at the final resolution S from photos decoded once (longer side 128 px for S <= 64,
  else 256 px, zero-padded to a square; cached with `cached_decode`), then standardised.

Reading, for both sources: metadata.csv / waterbirds_standin.csv with pandas (torchvision has no Waterbirds reader;
WILDS has one but is not a dependency), checked against their schemas (`WATERBIRDS_SCHEMA`, `STANDIN_SCHEMA`: split
0 / 1 / 2, y and place 0 / 1, cub_is_training_image 0 / 1, no empty cell, each image once; a mismatch raises
`files.DataSchemaError` naming the file and the line), images with Pillow (`files.read_image`, which names
a corrupt file) and resized by `files.resample`, which reproduces Pillow's filters exactly. The decoded photos are
cached keyed by the content fingerprint of the csv and the listed images; the same fingerprint is the task's
`data_fingerprint`.

How it differs from real Waterbirds: backgrounds are other CUB photos' surroundings (sky, sea, shore, branches,
grass...), not Places365 scenes (ocean / lake vs bamboo / broadleaf forest); no masks, so the bird box keeps its
own background; only species 001-050 (14 water species, no gulls, terns, ducks except Gadwall...); CUB's
train / test split (909 / 766 photos here) instead of Waterbirds' 4,795 / 1,199 / 5,794; the "water" label of a
background is the donor bird's type, so some "water" backgrounds are sky or rock and some "land" ones are water.
Numbers on it are not Waterbirds numbers and must be labelled as the stand-in's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from nhtlib.config import ConfigError, check_choice, check_range, not_identity
from nhtlib.data.groups import count_groups
from nhtlib.paths import data_root as resolve_data_root
from nhtlib.data import Dataset, ImageCodec, TaskConfig
from nhtlib.data.files import DataSchemaError, cached_decode, check_values, describe, file_digests, fingerprint, read_image, resample
from nhtlib.data.grouped import grouped_dataset, stratified_subset

SOURCES = ("waterbirds", "cub_standin")
STANDARD_DIRS = ("waterbirds", "waterbird_complete95_forest2water2")
EVAL_SPLITS = {"val": 1, "test": 2}  # metadata.csv split codes; train is 0
MEAN = STD = (0.5, 0.5, 0.5)  # fixed: x = (pixel/255 - 0.5) / 0.5 in [-1, 1]
CUB_DIR, STANDIN_CSV, CUB_IMAGES = "cub", "waterbirds_standin.csv", Path("CUB_200_2011") / "images"
BIRD_MARGIN = 0.1  # the bird crop is its bounding box grown by 10 % of the box size per side (boxes are tight)
MIN_BACKGROUND_SIDE = 8  # a donor photo's background strip must be >= 8 px (decoded scale) on its short side
MAX_BACKGROUND_ASPECT = 2.0  # strips are cut to at most 2:1 before being stretched to the square canvas
# the csv columns read, with their allowed values (None: any non-empty value); a value outside refuses the file
WATERBIRDS_SCHEMA = {"img_filename": None, "y": (0, 1), "split": (0, 1, 2), "place": (0, 1)}
STANDIN_SCHEMA = {"img_filename": None, "y": (0, 1), "cub_is_training_image": (0, 1), "width": None, "height": None,
                  "bbox_x": None, "bbox_y": None, "bbox_width": None, "bbox_height": None}


# ---------------------------------------------------------------------------------------------------------------
# the real data set (standard layout)

def find_waterbirds(data_root: str | None = None) -> Path:
    """The folder with metadata.csv: <root>/waterbirds/ or <root>/waterbird_complete95_forest2water2/."""
    root = resolve_data_root(data_root)
    for name in STANDARD_DIRS:
        if (root / name / "metadata.csv").is_file():
            return root / name
    expected = " or ".join(str(root / name / "metadata.csv") for name in STANDARD_DIRS)
    raise FileNotFoundError(
        f"no Waterbirds data under data_root={str(root)!r}: expected {expected} (Sagawa et al. 2020; columns "
        "img_id, img_filename, y, split, place) with the images beside it. The real data set is not shipped: the "
        "user must provide it through data_root. On this machine WaterbirdsTask(source='cub_standin') builds a "
        "labelled stand-in from the CUB photos in <data_root>/cub/.")


def _resize_centre_crop(image: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 (3, h, w) -> (3, size, size): shorter side resized to size (bilinear, anti-aliased), then centre crop."""
    h, w = image.shape[1:]
    scale = size / min(w, h)
    nw, nh = max(size, round(w * scale)), max(size, round(h * scale))
    image = resample(image, (nh, nw), "bilinear")
    left, top = (nw - size) // 2, (nh - size) // 2
    return image[:, top:top + size, left:left + size]


def _decode_standard(folder: Path, files: list[str], size: int) -> dict:
    x = torch.empty((len(files), 3, size, size), dtype=torch.uint8)
    for i, name in enumerate(files):
        x[i] = _resize_centre_crop(read_image(folder / name), size)
    return {"images": (x,)}


def _listed_digests(folder: Path, csv_name: str, image_dir: Path, files: list[str], what: str) -> dict:
    """Digests of the csv and of every image it lists (relative to folder); FileNotFoundError naming how many
    listed images are missing, and the first few."""
    hint = (f"Every image {csv_name} lists must be under {folder / image_dir}; put the complete data set there (a "
            "data set with missing images is not the one the csv describes).")
    images = file_digests(folder, [str(image_dir / f) for f in files], what=f"the {what} listed in {csv_name}",
                          hint=hint)
    return {**file_digests(folder, [csv_name]), **images}


def _read_waterbirds_csv(folder: Path) -> pd.DataFrame:
    return read_checked_csv(folder / "metadata.csv", WATERBIRDS_SCHEMA)


def read_checked_csv(path: Path, schema: dict[str, tuple | None]) -> pd.DataFrame:
    """A csv whose columns follow `schema` ({column: allowed values, or None for any non-empty value}); extra
    columns are kept. DataSchemaError naming the file, the line (the header is line 1), what was expected and what
    was found for a missing column, an empty cell or a value outside its set; image file names must be unique."""
    table = pd.read_csv(path)
    missing = [c for c in schema if c not in table.columns]
    if missing:
        raise DataSchemaError(path, 1, f"the columns {', '.join(schema)}", f"{list(table.columns)} (missing: "
                              f"{', '.join(missing)})")
    for column, allowed in schema.items():
        empty = np.flatnonzero(table[column].isna().to_numpy() | (table[column].astype(str).str.strip() == ""))
        if len(empty):
            raise DataSchemaError(path, 2 + int(empty[0]), f"a value in column {column}", "an empty cell")
        if allowed is not None:  # one word in a column makes pandas read it all as text: compare numbers
            numbers = pd.to_numeric(table[column], errors="coerce")
            check_values(path, [v if pd.isna(n) else n for v, n in zip(table[column], numbers)], allowed, column,
                         first_line=2)
            table[column] = numbers.astype(np.int64)
    twice = np.flatnonzero(table["img_filename"].duplicated().to_numpy())
    if len(twice):
        raise DataSchemaError(path, 2 + int(twice[0]), "each img_filename listed once",
                              f"{table['img_filename'].iat[twice[0]]} a second time")
    return table


def _waterbirds_source(data_root: str | None) -> tuple[Path, pd.DataFrame, dict]:
    """(folder, metadata.csv, digests of the csv and every image it lists): what the fingerprint and the loader
    both read."""
    folder = find_waterbirds(data_root)
    meta = _read_waterbirds_csv(folder)
    files = meta["img_filename"].tolist()
    return folder, meta, _listed_digests(folder, "metadata.csv", Path(), files, "Waterbirds images")


def waterbirds_fingerprint(data_root: str | None = None) -> str:
    """Content fingerprint of metadata.csv and the images it lists (see nhtlib.data.files)."""
    return fingerprint(_waterbirds_source(data_root)[2])


def load_waterbirds(data_root: str | None = None, image_size: int = 64) -> dict:
    """Real Waterbirds: {"x": uint8 (N, 3, S, S), "y", "place", "split": int64 arrays (N,), "folder", "data"
    (what meta["data"] records)}, in the order of metadata.csv (decoded once, cached under
    results_root()/data_cache)."""
    folder, meta, digests = _waterbirds_source(data_root)
    files = meta["img_filename"].tolist()
    info = describe(folder, digests)
    arrays = cached_decode(f"waterbirds-{image_size}", info["fingerprint"],
                           lambda: _decode_standard(folder, files, image_size))
    return {"x": arrays["images"][0], "folder": folder, "data": info,
            **{c: meta[c].to_numpy(np.int64) for c in ("y", "place", "split")}}


# ---------------------------------------------------------------------------------------------------------------
# the CUB stand-in

def find_cub(data_root: str | None = None) -> Path:
    root = resolve_data_root(data_root)
    folder = root / CUB_DIR
    if (folder / STANDIN_CSV).is_file() and (folder / CUB_IMAGES).is_dir():
        return folder
    raise FileNotFoundError(
        f"no CUB stand-in data under data_root={str(root)!r}: expected {folder / STANDIN_CSV} and "
        f"{folder / CUB_IMAGES}/<NNN.Species>/<file>.jpg (see the book's data README, section cub/).")


def _decode_photos(folder: Path, files: list[str], side: int) -> dict:
    """Each photo resized so its longer side is `side` (bilinear, aspect kept), zero-padded at the bottom / right
    to side x side. Returns {"photos": (uint8 (N, 3, side, side), int64 (N, 2) decoded (height, width))}."""
    x = torch.zeros((len(files), 3, side, side), dtype=torch.uint8)
    hw = torch.zeros((len(files), 2), dtype=torch.int64)
    for i, name in enumerate(files):
        image = read_image(folder / name)
        h, w = image.shape[1:]
        scale = side / max(w, h)
        nw, nh = max(1, min(side, round(w * scale))), max(1, min(side, round(h * scale)))
        x[i, :, :nh, :nw] = resample(image, (nh, nw), "bilinear")
        hw[i] = torch.tensor((nh, nw))
    return {"photos": (x, hw)}


def _cub_source(data_root: str | None) -> tuple[Path, pd.DataFrame, dict]:
    """(folder, waterbirds_standin.csv, digests of the csv and every photo it lists): what the fingerprint and the
    loader both read."""
    folder = find_cub(data_root)
    table = read_checked_csv(folder / STANDIN_CSV, STANDIN_SCHEMA)
    files = table["img_filename"].tolist()
    return folder, table, _listed_digests(folder, STANDIN_CSV, CUB_IMAGES, files, "CUB photos")


def cub_fingerprint(data_root: str | None = None) -> str:
    """Content fingerprint of waterbirds_standin.csv and the CUB photos it lists (see nhtlib.data.files)."""
    return fingerprint(_cub_source(data_root)[2])


def load_cub_photos(data_root: str | None = None, side: int = 128) -> dict:
    """The stand-in's photos: {"photos": uint8 (N, 3, side, side) zero-padded, "hw": int64 (N, 2) (height, width)
    of each decoded photo, "boxes": float64 (N, 4) bird box (x, y, width, height) in decoded pixels, "y", "train":
    int64 / bool arrays (N,), "table": the csv, "data": what meta["data"] records}. Decoded once per side, cached."""
    folder, table, digests = _cub_source(data_root)
    files = table["img_filename"].tolist()
    info = describe(folder, digests)
    arrays = cached_decode(f"cub-standin-{side}", info["fingerprint"],
                           lambda: _decode_photos(folder / CUB_IMAGES, files, side))
    photos, hw = arrays["photos"]
    hw = hw.numpy()
    # csv boxes are in stored-image pixels (width x height columns); rescale to the decoded size
    sx, sy = hw[:, 1] / table["width"].to_numpy(float), hw[:, 0] / table["height"].to_numpy(float)
    boxes = np.stack([table["bbox_x"] * sx, table["bbox_y"] * sy, table["bbox_width"] * sx,
                      table["bbox_height"] * sy], 1).astype(np.float64)
    return {"photos": photos, "hw": hw, "boxes": boxes, "y": table["y"].to_numpy(np.int64),
            "train": table["cub_is_training_image"].to_numpy() == 1, "table": table, "data": info}


def bird_box(box, hw, margin: float = BIRD_MARGIN) -> tuple[int, int, int, int]:
    """Integer (x0, y0, x1, y1) of box (x, y, w, h) grown by margin x (w, h) per side, clipped to the photo hw."""
    x, y, w, h = (float(v) for v in box)
    height, width = int(hw[0]), int(hw[1])
    x0, y0 = max(0, int(np.floor(x - margin * w))), max(0, int(np.floor(y - margin * h)))
    x1, y1 = min(width, int(np.ceil(x + w + margin * w))), min(height, int(np.ceil(y + h + margin * h)))
    return x0, y0, max(x1, x0 + 1), max(y1, y0 + 1)


def background_box(box, hw, margin: float = BIRD_MARGIN,
                   max_aspect: float = MAX_BACKGROUND_ASPECT) -> tuple[tuple[int, int, int, int], int]:
    """The largest strip of a photo outside its (grown) bird box, cut to aspect <= max_aspect around its centre.

    Returns ((x0, y0, x1, y1), short side in pixels); the short side is 0 when the box fills the photo."""
    bx0, by0, bx1, by1 = bird_box(box, hw, margin)
    height, width = int(hw[0]), int(hw[1])
    strips = [(0, 0, bx0, height), (bx1, 0, width, height), (0, 0, width, by0), (0, by1, width, height)]
    best, best_area, best_side = (0, 0, 1, 1), -1, 0
    for x0, y0, x1, y1 in strips:
        w, h = x1 - x0, y1 - y0
        if w <= 0 or h <= 0:
            continue
        if w > max_aspect * h:  # too wide: keep the centred max_aspect x h part
            cut = int(max_aspect * h)
            x0, x1 = x0 + (w - cut) // 2, x0 + (w - cut) // 2 + cut
        elif h > max_aspect * w:
            cut = int(max_aspect * w)
            y0, y1 = y0 + (h - cut) // 2, y0 + (h - cut) // 2 + cut
        area = (x1 - x0) * (y1 - y0)
        if area > best_area:
            best, best_area, best_side = (x0, y0, x1, y1), area, min(x1 - x0, y1 - y0)
    return best, best_side


def _resize(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """(3, h, w) float -> (3, *size), bilinear with anti-aliasing (an area-like average when shrinking)."""
    return F.interpolate(image[None], size=size, mode="bilinear", antialias=True, align_corners=False)[0]


def composite(bird: torch.Tensor, background: torch.Tensor, bird_scale: float = 0.6) -> torch.Tensor:
    """Paste a bird crop at the centre of a background.

    bird: float (3, h, w) at any resolution; background: float (3, S, S). The bird is resized keeping its aspect
    ratio so that its longer side is round(bird_scale x S) pixels (at least 1), and replaces the background pixels
    it covers (no mask: the whole rectangle). Returns a new float (3, S, S) tensor."""
    height, width = background.shape[-2:]
    longer = max(1, round(bird_scale * min(height, width)))
    h, w = bird.shape[-2:]
    nh, nw = max(1, round(h * longer / max(h, w))), max(1, round(w * longer / max(h, w)))
    out = background.clone()
    top, left = (height - nh) // 2, (width - nw) // 2
    out[:, top:top + nh, left:left + nw] = _resize(bird, (nh, nw))
    return out


def assign_backgrounds(y, train, correlation: float, seed: int) -> np.ndarray:
    """The background type a (0 land, 1 water) of every example (see the module docstring).

    y: 0/1 (N,); train: bool (N,). Train: within each class exactly round(correlation x n) get a = y; test: within
    each class floor(n / 2) get a = y, the rest a = 1 - y. Which ones: a seeded random permutation."""
    y, train = np.asarray(y, np.int64), np.asarray(train, bool)
    rng = np.random.default_rng([seed, 1])
    a = 1 - y
    for is_train in (True, False):
        for c in (0, 1):
            idx = np.flatnonzero((train == is_train) & (y == c))
            n_aligned = int(round(correlation * len(idx))) if is_train else len(idx) // 2
            a[rng.permutation(idx)[:n_aligned]] = c
    return a


def choose_donors(y, train, a, usable, seed: int) -> np.ndarray:
    """For every example i, the index of another photo j of the same split with y[j] == a[i] and usable[j]
    (drawn uniformly with the seed); ValueError when a pool is empty."""
    y, train, a, usable = (np.asarray(v) for v in (y, train, a, usable))
    rng = np.random.default_rng([seed, 2])
    donors = np.empty(len(y), np.int64)
    for i in range(len(y)):
        pool = np.flatnonzero((train == train[i]) & (y == a[i]) & usable)
        pool = pool[pool != i]
        if len(pool) == 0:
            kind = "water" if a[i] else "land"
            raise ValueError(f"no {kind}-bird photo with a usable background in the {'train' if train[i] else 'test'}"
                             f" split to give example {i} a {kind} background")
        donors[i] = pool[rng.integers(len(pool))]
    return donors


def build_standin(data_root: str | None = None, image_size: int = 64, correlation: float = 0.95,
                  bird_scale: float = 0.6, seed: int = 0) -> dict:
    """The stand-in's images before standardisation: {"x": float32 (N, 3, S, S) in [0, 1], "y", "a", "donor":
    int64 (N,), "train": bool (N,), "table": the csv, "data": the photos' meta["data"]} (photo order of
    waterbirds_standin.csv)."""
    side = 128 if image_size <= 64 else 256
    cub = load_cub_photos(data_root, side)
    photos, hw, boxes, y, train = cub["photos"], cub["hw"], cub["boxes"], cub["y"], cub["train"]
    regions = [background_box(b, s) for b, s in zip(boxes, hw)]
    usable = np.array([short >= MIN_BACKGROUND_SIDE for _, short in regions])
    a = assign_backgrounds(y, train, correlation, seed)
    donors = choose_donors(y, train, a, usable, seed)
    x = torch.empty((len(y), 3, image_size, image_size), dtype=torch.float32)
    for i in range(len(y)):
        bx0, by0, bx1, by1 = bird_box(boxes[i], hw[i])
        bird = photos[i, :, by0:by1, bx0:bx1].float() / 255.0
        (gx0, gy0, gx1, gy1), _ = regions[donors[i]]
        background = _resize(photos[donors[i], :, gy0:gy1, gx0:gx1].float() / 255.0, (image_size, image_size))
        x[i] = composite(bird, background, bird_scale).clamp_(0.0, 1.0)
    return {"x": x, "y": y, "a": a, "donor": donors, "train": train, "table": cub["table"], "data": cub["data"]}


@dataclass(frozen=True)
class WaterbirdsTask(TaskConfig):
    """Waterbirds groups: y = waterbird, a = water background (see the module docstring).

    source: "waterbirds" (the real data under data_root) or "cub_standin" (the CUB stand-in). image_size: side S.
    eval_split: "test" or "val" (real data only) for the grouped evaluation splits. n_train: a group-stratified
    training subset (None = all; drawn with construction_seed). correlation, bird_scale, construction_seed: the
    stand-in's construction (ignored for the real data). data_root is not identity."""

    source: str = "waterbirds"
    image_size: int = 64
    eval_split: str = "test"
    n_train: int | None = None
    correlation: float = 0.95
    bird_scale: float = 0.6
    construction_seed: int = 0
    data_root: str | None = not_identity(default=None)

    def validate(self) -> None:
        check_choice("source", self.source, SOURCES)
        check_range("image_size", self.image_size, 4, 512, integer=True)
        check_choice("eval_split", self.eval_split, tuple(EVAL_SPLITS))
        if self.source == "cub_standin" and self.eval_split != "test":
            raise ConfigError(f"eval_split={self.eval_split!r}: the CUB stand-in has only CUB's train and test "
                              "splits; use eval_split='test'")
        if self.n_train is not None:
            check_range("n_train", self.n_train, 1, None, integer=True)
        check_range("correlation", self.correlation, 0.0, 1.0)
        check_range("bird_scale", self.bird_scale, 0.0, 1.0, low_inclusive=False)
        check_range("construction_seed", self.construction_seed, 0, None, integer=True)

    def data_fingerprint(self) -> str:
        if self.source == "waterbirds":
            return waterbirds_fingerprint(self.data_root)
        return cub_fingerprint(self.data_root)

    def build(self, seed: int) -> Dataset:
        """The Dataset (seed is unused: the data are the same for every seed)."""
        if self.source == "waterbirds":
            data = load_waterbirds(self.data_root, self.image_size)
            y, a = data["y"], data["place"]
            train_idx = np.flatnonzero(data["split"] == 0)
            eval_idx = np.flatnonzero(data["split"] == EVAL_SPLITS[self.eval_split])
            x = data["x"]
            # the uint8 images resized and cropped at load: the codec divides by 255 and standardises batch by
            # batch, the very steps of the float tensors built here before
            note = (f"Waterbirds (Sagawa et al. 2020) from {data['folder'].name}/: {len(y):,} images; train "
                    f"{len(train_idx):,}, {self.eval_split} {len(eval_idx):,}; a = place (1 water).")
        else:
            data = build_standin(self.data_root, self.image_size, self.correlation, self.bird_scale,
                                 self.construction_seed)
            y, a = data["y"], data["a"]
            train_idx, eval_idx = np.flatnonzero(data["train"]), np.flatnonzero(~data["train"])
            x = data["x"]
            # kept as float pixels in [0, 1] (the codec standardises them batch by batch): the stand-in is
            # composited in float at image_size (resized birds pasted on resized backgrounds, clamped), so uint8
            # storage would round its pixels (up to 1/510) and change the data a cached run was trained on while
            # its identity stays the same
            tg = count_groups(y[train_idx], a[train_idx])
            aligned = tg[(0, 0)] + tg[(1, 1)]
            note = (f"CUB stand-in for Waterbirds (not the Waterbirds data set): {len(y):,} real CUB-200-2011 photos "
                    f"(species 001-050; {int(y.sum())} waterbird, {int((1 - y).sum())} landbird); each bird's box "
                    f"crop (own natural background inside the box, no mask) pasted at {self.bird_scale:.0%} of the "
                    "canvas side onto the surround of another photo of the same split whose bird is of type a "
                    f"(water-bird photos = water, land-bird photos = land); train = CUB train ({len(train_idx)}), "
                    f"a = y for {aligned}/{len(train_idx)} ({aligned / max(1, len(train_idx)):.1%}); test = CUB "
                    f"test ({len(eval_idx)}), backgrounds balanced within each class; construction_seed "
                    f"{self.construction_seed}.")
        if self.n_train is not None:
            if self.n_train > len(train_idx):
                raise ValueError(f"n_train={self.n_train} but the training split has only {len(train_idx)} images")
            train_idx = train_idx[stratified_subset(2 * y[train_idx] + a[train_idx], self.n_train,
                                                    self.construction_seed)]
        def stored(idx):
            return x[torch.from_numpy(idx)]

        return grouped_dataset(stored(train_idx), y[train_idx], a[train_idx], stored(eval_idx), y[eval_idx],
                               a[eval_idx], eval_split=self.eval_split, target="waterbird",
                               spurious="water background", note=note,
                               codec=ImageCodec(MEAN, STD, image_size=self.image_size), source=self.source,
                               data=data["data"])
