"""Grouped tasks (CelebA, Waterbirds, the CUB stand-in) on tiny fake copies of their layouts, and group metrics."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from nhtlib.config import ConfigError
from nhtlib.data import celeba, grouped, waterbirds
from nhtlib.data import groups as naming
from nhtlib.analysis import groups

# ------------------------------------------------------------------------------------------------------------ CelebA

MIDDLE = [(10 * i, 200 - 5 * i, 7 * i) for i in range(24)]  # colour of the centre square of image i (000001 = 0)


def celeba_row(k: int) -> list[int]:
    """Attribute values (1/-1) of image k (1-based): identity (k-1)//3; Blond = odd identity; Smiling = odd k;
    Male = identity < 4; image 17 has the distinctive row [1 if j % 3 == 0 else -1] (which keeps its identity's
    Blond_Hair = 1, Male = 0)."""
    if k == 17:
        return [1 if j % 3 == 0 else -1 for j in range(40)]
    ident = (k - 1) // 3
    values = {"Blond_Hair": ident % 2, "Smiling": k % 2, "Male": int(ident < 4)}
    return [1 if values.get(name, 0) else -1 for name in celeba.ATTRIBUTES]


def write_celeba(root, n_images=24, n_rows=40):
    """Official layout: attr / partition / identity files for n_rows images (CRLF), images only for the first
    n_images (178 x 218 PNG data under .jpg names: a 20-px red band top and bottom, a solid centre)."""
    folder = root / "celeba"
    (folder / "img_align_celeba").mkdir(parents=True)
    for k in range(1, n_images + 1):
        arr = np.zeros((218, 178, 3), np.uint8)
        arr[:] = MIDDLE[k - 1]
        arr[:20] = arr[-20:] = (255, 0, 0)
        Image.fromarray(arr).save(folder / "img_align_celeba" / f"{k:06d}.jpg", format="PNG")
    lines = [str(n_rows), " ".join(celeba.ATTRIBUTES) + " "]
    lines += [f"{k:06d}.jpg " + " ".join(f"{v:2d}" for v in celeba_row(k)) for k in range(1, n_rows + 1)]
    (folder / "list_attr_celeba.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    # identities 0-3 (images 1-12) train, 4-5 val, 6-7 test; the rows without images are train
    part = [0 if k <= 12 or k > 24 else (1 if k <= 18 else 2) for k in range(1, n_rows + 1)]
    (folder / "list_eval_partition.txt").write_bytes(
        "".join(f"{k:06d}.jpg {p}\r\n" for k, p in zip(range(1, n_rows + 1), part)).encode())
    (folder / "identity_CelebA.txt").write_bytes(
        "".join(f"{k:06d}.jpg {1000 + (k - 1) // 3}\r\n" for k in range(1, n_rows + 1)).encode())
    return folder


def test_load_celeba_subset_attributes_and_crop(tmp_path):
    write_celeba(tmp_path)
    data = celeba.load_celeba(str(tmp_path), image_size=8)
    assert data["x"].shape == (24, 3, 8, 8) and data["x"].dtype == torch.uint8
    assert data["ids"] == [f"{k:06d}.jpg" for k in range(1, 25)]  # only the rows whose image exists
    assert list(data["attrs"].columns) == list(celeba.ATTRIBUTES) and len(data["attrs"]) == 24
    assert data["attrs"].loc["000017.jpg"].tolist() == [1 if j % 3 == 0 else 0 for j in range(40)]
    assert data["attrs"].loc["000004.jpg", "Blond_Hair"] == 1 and data["attrs"].loc["000004.jpg", "Smiling"] == 0
    # the centre 178 x 178 square excludes the red bands: every pixel is the centre colour
    for i in (0, 7, 23):
        assert torch.equal(data["x"][i], torch.tensor(MIDDLE[i], dtype=torch.uint8).view(3, 1, 1).expand(3, 8, 8))
    assert data["partition"].tolist() == [0] * 12 + [1] * 6 + [2] * 6
    assert data["identity"].tolist() == [1000 + i // 3 for i in range(24)]
    again = celeba.load_celeba(str(tmp_path), image_size=8)  # from the cache
    assert torch.equal(again["x"], data["x"])


def test_celeba_official_split_and_groups(tmp_path):
    folder = write_celeba(tmp_path)
    (folder / "identity_CelebA.txt").unlink()  # not needed for the official split
    task = celeba.CelebATask(image_size=8, split="official", data_root=str(tmp_path))
    data = task.build(0)
    attrs = celeba.load_celeba(str(tmp_path), 8)["attrs"]
    y, a = attrs["Smiling"].to_numpy(), attrs["Blond_Hair"].to_numpy()
    assert data.splits["train"].size == 12 and data.splits["train"].y.tolist() == y[:12].tolist()
    expected = {f"test_y{yy}a{aa}": int(((y[18:] == yy) & (a[18:] == aa)).sum()) for yy in (0, 1) for aa in (0, 1)}
    assert data.meta["groups"] == {k: v for k, v in expected.items() if v}
    assert sorted(data.meta["omitted_groups"]) == sorted(k for k, v in expected.items() if not v)
    assert set(data.splits) == {"train", *data.meta["groups"]}
    for name, n in data.meta["groups"].items():
        assert data.splits[name].size == n and data.splits[name].y.tolist() == [int(name[-3])] * n
    assert data.meta["chance"] == 0.5 and data.meta["target"] == "Smiling" and data.meta["spurious"] == "Blond_Hair"
    assert sum(data.meta["train_groups"].values()) == 12 and "24 of 202,599" in data.meta["note"]
    x = data.splits["train"].inputs()
    assert x.dtype == torch.float32 and x.shape == (12, 3, 8, 8)
    expected_x = ((torch.tensor(MIDDLE[0]).float() / 255 - 0.5) / 0.5).view(3, 1, 1).expand(3, 8, 8)
    assert torch.allclose(x[0], expected_x)
    with pytest.raises(FileNotFoundError, match="identity_CelebA.txt"):
        task.replace(split="identity").build(0)
    assert task.digest() == task.replace(data_root="/elsewhere").digest()


def test_celeba_identity_split_task_and_subset(tmp_path):
    write_celeba(tmp_path)
    task = celeba.CelebATask(image_size=4, target="Blond_Hair", spurious="Male", test_fraction=0.5,
                             data_root=str(tmp_path))
    data = task.build(0)
    # Blond and Male are per identity: four groups of two identities each, one of each goes to test
    assert data.meta["groups"] == {f"test_y{y}a{a}": 3 for y in (0, 1) for a in (0, 1)}
    assert data.meta["train_groups"] == {f"y{y}a{a}": 3 for y in (0, 1) for a in (0, 1)}
    # the seed does not change data
    assert torch.equal(task.build(1).splits["train"].inputs(), data.splits["train"].inputs())
    sub = task.replace(n_train=4).build(0)
    assert sub.splits["train"].size == 4 and sub.meta["train_groups"] == {f"y{y}a{a}": 1 for y in (0, 1)
                                                                          for a in (0, 1)}
    with pytest.raises(ValueError, match="n_train=100"):
        task.replace(n_train=100).build(0)


def test_identity_split_disjoint_stratified_deterministic():
    rng = np.random.default_rng(3)
    identity = np.repeat(np.arange(80), 12)
    rare = rng.random(80) < 0.3  # per-identity attribute (like hair colour), per-image target
    groups = 2 * (rng.random(len(identity)) < 0.4) + rare[identity]
    for fractions in ((0.75, 0.25), (0.6, 0.2, 0.2)):
        which = celeba.identity_split(identity, groups, fractions, seed=0)
        assert all(len(set(which[identity == i])) == 1 for i in range(80))  # no identity in two splits
        for g in range(4):
            shares = np.bincount(which[groups == g], minlength=len(fractions)) / (groups == g).sum()
            assert np.abs(shares - fractions).max() < 0.03, (fractions, g, shares)
        assert np.array_equal(which, celeba.identity_split(identity, groups, fractions, seed=0))
    assert not np.array_equal(celeba.identity_split(identity, groups, seed=0),
                              celeba.identity_split(identity, groups, seed=1))
    with pytest.raises(ValueError, match="fractions"):
        celeba.identity_split(identity, groups, (0.5, 0.6))


def test_stratified_subset_keeps_shares():
    g = np.array([0] * 60 + [1] * 30 + [3] * 10)
    idx = grouped.stratified_subset(g, 10, seed=0)
    assert np.bincount(g[idx], minlength=4).tolist() == [6, 3, 0, 1] and np.all(np.diff(idx) > 0)
    assert np.array_equal(idx, grouped.stratified_subset(g, 10, seed=0))


def test_celeba_errors(tmp_path):
    with pytest.raises(ConfigError, match="Smiley"):
        celeba.CelebATask(target="Smiley")
    with pytest.raises(ConfigError, match="Blond_Hair"):  # the message lists the allowed names
        celeba.CelebATask(spurious="blond")
    with pytest.raises(ConfigError, match="different"):
        celeba.CelebATask(target="Male", spurious="Male")
    with pytest.raises(ConfigError, match="split"):
        celeba.CelebATask(split="random")
    with pytest.raises(FileNotFoundError, match="celeba"):
        celeba.load_celeba(str(tmp_path))


# ------------------------------------------------------------------------------------------ Waterbirds (real layout)

def write_waterbirds(root, name="waterbird_complete95_forest2water2"):
    """16 images 40 x 20 (w x h): 5-px red / blue side bands, green centre; splits 8 / 4 / 4."""
    folder = root / name
    rows = []
    for i in range(16):
        split = 0 if i < 8 else (1 if i < 12 else 2)
        y, place = i % 2, (i // 2) % 2
        arr = np.zeros((20, 40, 3), np.uint8)
        arr[:] = (0, 255, 0)
        arr[:, :5] = (255, 0, 0)
        arr[:, 35:] = (0, 0, 255)
        path = folder / f"{i:03d}.Species" / f"img_{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(arr).save(path, format="PNG")
        rows.append({"img_id": i + 1, "img_filename": f"{i:03d}.Species/img_{i}.jpg", "y": y, "split": split,
                     "place": place, "place_filename": "/x/y.jpg"})
    pd.DataFrame(rows).to_csv(folder / "metadata.csv", index=False)
    return folder


def test_waterbirds_standard_layout(tmp_path):
    write_waterbirds(tmp_path)
    task = waterbirds.WaterbirdsTask(image_size=8, data_root=str(tmp_path))
    data = task.build(0)
    assert data.splits["train"].size == 8 and data.meta["train_groups"] == {f"y{y}a{a}": 2 for y in (0, 1)
                                                                            for a in (0, 1)}
    assert data.meta["groups"] == {f"test_y{y}a{a}": 1 for y in (0, 1) for a in (0, 1)}
    # shorter side to 8 (image 16 x 8), centre crop keeps the green middle only
    green = torch.tensor([-1.0, 1.0, -1.0]).view(3, 1, 1).expand(3, 8, 8)
    assert torch.allclose(data.splits["test_y1a0"].inputs()[0], green)
    val = task.replace(eval_split="val").build(0)
    assert set(val.meta["groups"]) == {f"val_y{y}a{a}" for y in (0, 1) for a in (0, 1)}
    assert set(val.splits) == {"train", *val.meta["groups"]}
    assert waterbirds.load_waterbirds(str(tmp_path), 8)["place"].tolist() == [(i // 2) % 2 for i in range(16)]


def test_waterbirds_missing_names_both_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="waterbird_complete95_forest2water2") as err:
        waterbirds.WaterbirdsTask(data_root=str(tmp_path)).build(0)
    assert "waterbirds/metadata.csv" in str(err.value) and "cub_standin" in str(err.value)
    with pytest.raises(ConfigError, match="eval_split"):
        waterbirds.WaterbirdsTask(source="cub_standin", eval_split="val")
    with pytest.raises(FileNotFoundError, match="waterbirds_standin.csv"):
        waterbirds.WaterbirdsTask(source="cub_standin", data_root=str(tmp_path)).build(0)


# ------------------------------------------------------------------------------------------------ CUB stand-in

BLUE, GREEN, RED = (0, 0, 255), (0, 255, 0), (255, 0, 0)


def write_cub(root, n=((20, 20), (11, 10))):
    """Fake cub/: 64 x 48 photos, water-bird photos blue, land-bird photos green, the bird box (20, 12, 24, 24) red.
    n = ((train land, train water), (test land, test water))."""
    folder = root / "cub"
    rows = []
    for is_train, (n_land, n_water) in zip((1, 0), n):
        for y, count in ((0, n_land), (1, n_water)):
            for _ in range(count):
                i = len(rows)
                arr = np.zeros((48, 64, 3), np.uint8)
                arr[:] = BLUE if y else GREEN
                arr[12:36, 20:44] = RED
                name = f"{1 + y:03d}.Species/bird_{i}.jpg"
                path = folder / "CUB_200_2011" / "images" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(arr).save(path, format="PNG")
                rows.append({"img_id": i + 1, "img_filename": name, "y": y, "label_name": "x", "class_id": 1 + y,
                             "class_name": name.split("/")[0], "cub_is_training_image": is_train,
                             "orig_width": 128, "orig_height": 96, "width": 64, "height": 48, "bbox_x": 20.0,
                             "bbox_y": 12.0, "bbox_width": 24.0, "bbox_height": 24.0})
    pd.DataFrame(rows).to_csv(folder / "waterbirds_standin.csv", index=False)
    return folder


def test_composite_centres_and_scales_bird():
    background = torch.zeros(3, 20, 20)
    bird = torch.ones(3, 10, 5)
    out = waterbirds.composite(bird, background, bird_scale=0.5)
    assert out.shape == (3, 20, 20) and torch.equal(background, torch.zeros(3, 20, 20))
    assert int(out[0].sum()) == 10 * 5  # longer side 0.5 x 20 = 10 rows, aspect kept: 5 columns
    assert torch.equal(out[0, 5:15, 7:12], torch.ones(10, 5))


def test_background_box_avoids_bird():
    (x0, y0, x1, y1), short = waterbirds.background_box((20, 12, 24, 24), (48, 64))
    grown = waterbirds.bird_box((20, 12, 24, 24), (48, 64))
    assert grown == (17, 9, 47, 39)
    assert x1 <= grown[0] or x0 >= grown[2] or y1 <= grown[1] or y0 >= grown[3]
    assert short >= 8 and max(x1 - x0, y1 - y0) <= 2 * short


def test_cub_standin_construction(tmp_path):
    write_cub(tmp_path)
    out = waterbirds.build_standin(str(tmp_path), image_size=16, correlation=0.9, bird_scale=0.5, seed=0)
    y, a, train, donor, x = out["y"], out["a"], out["train"], out["donor"], out["x"]
    count = {(t, yy, aa): int(((train == t) & (y == yy) & (a == aa)).sum()) for t in (True, False)
             for yy in (0, 1) for aa in (0, 1)}
    # train: exactly round(0.9 x 20) = 18 aligned per class; test: floor(n / 2) aligned per class
    assert [count[(True, yy, aa)] for yy in (0, 1) for aa in (0, 1)] == [18, 2, 2, 18]
    assert [count[(False, yy, aa)] for yy in (0, 1) for aa in (0, 1)] == [5, 6, 5, 5]
    assert np.all(y[donor] == a) and np.all(train[donor] == train) and np.all(donor != np.arange(len(y)))
    colour = {0: torch.tensor(GREEN) / 255.0, 1: torch.tensor(BLUE) / 255.0}
    for i in range(len(y)):
        assert torch.allclose(x[i, :, 0, 0], colour[int(a[i])], atol=1e-3)  # corner: background of type a
        assert torch.allclose(x[i, :, 8, 8], torch.tensor(RED) / 255.0, atol=1e-3)  # centre: the bird
    again = waterbirds.build_standin(str(tmp_path), image_size=16, correlation=0.9, bird_scale=0.5, seed=0)
    assert torch.equal(again["x"], x) and np.array_equal(again["donor"], donor)
    other = waterbirds.build_standin(str(tmp_path), image_size=16, correlation=0.9, bird_scale=0.5, seed=1)
    assert not np.array_equal(other["a"], a)


def test_cub_standin_task(tmp_path):
    write_cub(tmp_path)
    task = waterbirds.WaterbirdsTask(source="cub_standin", image_size=16, correlation=0.9, data_root=str(tmp_path))
    data = task.build(0)
    assert data.meta["train_groups"] == {"y0a0": 18, "y0a1": 2, "y1a0": 2, "y1a1": 18}
    assert data.meta["groups"] == {"test_y0a0": 5, "test_y0a1": 6, "test_y1a0": 5, "test_y1a1": 5}
    assert data.meta["majority_pairing"] == {0: 0, 1: 1}
    assert data.meta["note"].startswith("CUB stand-in for Waterbirds") and "36/40" in data.meta["note"]
    assert data.splits["train"].inputs().shape == (40, 3, 16, 16) and data.input_shape == (3, 16, 16)
    assert data.splits["train"].inputs().min() >= -1 and data.splits["train"].inputs().max() <= 1
    assert data.splits["test_y0a1"].y.tolist() == [0] * 6
    other = task.replace(construction_seed=1).build(0)
    assert not torch.equal(other.splits["train"].inputs(), data.splits["train"].inputs())


# ----------------------------------------------------------------------------------------------------- metrics

def group_log():
    return pd.DataFrame({"step": [0, 10], "test_y0a0_acc": [0.9, 1.0], "test_y0a1_acc": [0.5, 0.8],
                         "test_y1a0_acc": [0.2, 0.6], "test_y1a1_acc": [1.0, 1.0], "train_acc": [0.7, 0.9]})


COUNTS = {"test_y0a0": 50, "test_y0a1": 10, "test_y1a0": 20, "test_y1a1": 20, "val_y0a0": 3}


def test_add_group_metrics_known_numbers():
    table = group_log()
    out = groups.add_group_metrics(table, COUNTS, "test", majority_pairing={0: 0, 1: 1})
    assert "test_acc" not in table.columns  # a copy
    row = out.iloc[0]
    assert row["test_acc"] == pytest.approx((0.9 * 50 + 0.5 * 10 + 0.2 * 20 + 1.0 * 20) / 100)
    assert row["test_mean_group_acc"] == pytest.approx(0.65) and row["test_worst_group_acc"] == pytest.approx(0.2)
    aligned, conflicting = (0.9 * 50 + 1.0 * 20) / 70, (0.5 * 10 + 0.2 * 20) / 30
    assert row["test_aligned_acc"] == pytest.approx(aligned)
    assert row["test_conflicting_acc"] == pytest.approx(conflicting)
    assert row["test_spurious_reliance"] == pytest.approx(1 - conflicting / aligned)
    assert out.iloc[1]["test_worst_group_acc"] == pytest.approx(0.6)
    # JSON-style string keys work the same
    same = groups.add_group_metrics(table, COUNTS, majority_pairing={"0": 0, "1": 1})
    assert np.allclose(same["test_spurious_reliance"], out["test_spurious_reliance"])
    assert "test_aligned_acc" not in groups.add_group_metrics(table, COUNTS).columns


def test_add_group_metrics_missing_groups():
    table = group_log().drop(columns="test_y0a1_acc")
    counts = {"test_y0a0": 50, "test_y1a0": 20, "test_y1a1": 20}  # test_y0a1 omitted (no images)
    out = groups.add_group_metrics(table, counts, majority_pairing={0: 0, 1: 1})
    row = out.iloc[0]
    assert row["test_acc"] == pytest.approx((45 + 4 + 20) / 90)
    assert row["test_mean_group_acc"] == pytest.approx(0.7) and row["test_worst_group_acc"] == pytest.approx(0.2)
    assert row["test_conflicting_acc"] == pytest.approx(0.2)
    only_aligned = groups.add_group_metrics(table, {"test_y0a0": 50, "test_y1a1": 20, "test_y1a0": 0},
                                            majority_pairing={0: 0, 1: 1})
    assert math.isnan(only_aligned.iloc[0]["test_conflicting_acc"])
    assert math.isnan(only_aligned.iloc[0]["test_spurious_reliance"])
    zero = groups.add_group_metrics(pd.DataFrame({"test_y0a0_acc": [0.0], "test_y0a1_acc": [0.5]}),
                                    {"test_y0a0": 1, "test_y0a1": 1}, majority_pairing={0: 0})
    assert math.isnan(zero.iloc[0]["test_spurious_reliance"])  # aligned accuracy 0
    with pytest.raises(KeyError, match="test_y0a1_acc"):
        groups.add_group_metrics(table, COUNTS)
    with pytest.raises(ValueError, match="no group"):
        groups.add_group_metrics(table, COUNTS, split="holdout")


def test_group_helpers():
    assert naming.group_split_name("test", 1, 0) == "test_y1a0"
    assert naming.GROUP_PATTERN.match("test_y1a0")["split"] == "test"
    assert naming.parse_group_name("val_y0a1") == ("val", 0, 1) and naming.parse_group_name("y1a1") == (None, 1, 1)
    assert naming.parse_group_name("train") is None
    accs = {"test_y0a0": 0.9, "test_y1a1": 0.4}
    assert groups.worst_group_accuracy(accs) == 0.4
    assert math.isnan(groups.worst_group_accuracy({"a": 0.5, "b": float("nan")}))
    assert groups.average_accuracy(accs, COUNTS) == pytest.approx((0.9 * 50 + 0.4 * 20) / 70)
    assert groups.average_accuracy({"test_y0a0_acc": 0.9}, COUNTS) == pytest.approx(0.9)
    table = groups.group_table({"test_y0a0": 30, "test_y1a1": 10, "val_y0a0": 5})
    assert table[["split", "y", "a", "count"]].values.tolist() == [["test", 0, 0, 30], ["test", 1, 1, 10],
                                                                    ["val", 0, 0, 5]]
    assert table["share"].tolist() == [0.75, 0.25, 1.0]
    assert list(groups.group_table({"y0a1": 1, "y0a0": 3}).columns) == ["y", "a", "count", "share"]
    assert naming.majority_pairing([0, 0, 0, 1, 1], [1, 1, 0, 0, 1]) == {0: 1, 1: 1}  # tie -> a = y
    assert naming.count_groups([0, 1, 1], [0, 1, 1]) == {(0, 0): 1, (0, 1): 0, (1, 0): 0, (1, 1): 2}
