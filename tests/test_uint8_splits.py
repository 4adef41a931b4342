"""Image splits stored as uint8 and decoded batch by batch (nhtlib.data.codec, Split.take / head / inputs) give the
float inputs the tasks built before, keep one copy of images the members share, and count their resident bytes.

The reference implementations below are copies of the float construction the image tasks used before the uint8
splits (cifar.to_float, borders.border_splits, BorderCIFARTask.build, train.select / first_examples)."""
import numpy as np
import pandas as pd
import pytest
import torch

import nhtlib as nht
from nhtlib.data import Dataset, ImageCodec, Split, coloured_borders as borders, cifar, stack_members
from nhtlib.data.coloured_borders import BORDER_SEED_OFFSET, GRAY, PALETTE, border_classes

MEAN, STD = cifar.MEAN["cifar10"], cifar.STD["cifar10"]
C = 10


# ----------------------------------------------------------------------- references: the former float construction

def reference_to_float(x, image_size, mean=MEAN, std=STD):
    out = x.float() / 255.0
    if image_size != out.shape[-1]:
        out = torch.nn.functional.interpolate(out, size=(image_size, image_size), mode="area")
    return (out - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)


def reference_standardise(images, inverse=False):
    m = torch.tensor(MEAN, dtype=images.dtype).view(1, -1, 1, 1)
    s = torch.tensor(STD, dtype=images.dtype).view(1, -1, 1, 1)
    return images * s + m if inverse else (images - m) / s


def reference_draw_border(images, colours, width):
    idx = torch.arange(images.shape[-1])
    edge = (idx < width) | (idx >= images.shape[-1] - width)
    return torch.where(edge[:, None] | edge[None, :], colours[:, :, None, None].to(images.dtype), images)


def reference_border_splits(train_x, train_y, test_x, test_y, *, rho, width, n_classes, seed, shortcut_per_class=1):
    """The float splits {name: (x, y)} from [0, 1] images, as borders.border_splits built them."""
    g = torch.Generator().manual_seed(int(seed) + BORDER_SEED_OFFSET)
    train_b = border_classes(train_y, rho, n_classes, g)
    test_b = border_classes(test_y, rho, n_classes, g)
    size = train_x.shape[-1]
    gray_y = torch.arange(n_classes).repeat_interleave(shortcut_per_class)
    gray = torch.full((len(gray_y), 3, size, size), GRAY, dtype=train_x.dtype)
    return {"train": (reference_standardise(reference_draw_border(train_x, PALETTE[train_b], width)), train_y),
            "coloured": (reference_standardise(reference_draw_border(test_x, PALETTE[test_b], width)), test_y),
            "clean": (reference_standardise(test_x), test_y),
            "shortcut": (reference_standardise(reference_draw_border(gray, PALETTE[gray_y], width)), gray_y)}


def reference_border_task(train_u8, train_y, test_u8, test_y, image_size, **kw):
    """BorderCIFARTask.build as it was: CIFARTask's floats, back to [0, 1], then the border splits."""
    raw_train = reference_standardise(reference_to_float(train_u8, image_size), inverse=True)
    raw_test = reference_standardise(reference_to_float(test_u8, image_size), inverse=True)
    return reference_border_splits(raw_train, train_y, raw_test, test_y, **kw)


def reference_select(x, y, per_member, idx, k_members):
    if idx is None:
        if per_member:
            return x, y
        return x.unsqueeze(0).expand(k_members, *x.shape), y.unsqueeze(0).expand(k_members, *y.shape)
    if per_member:
        gather_x = idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand(*idx.shape, *x.shape[2:])
        return torch.gather(x, 1, gather_x), torch.gather(y, 1, idx)
    return x[idx], y[idx]


def reference_first_examples(x, y, per_member, n):
    return (x[:, :n], y[:, :n]) if per_member else (x[:n], y[:n])


def close(a, b):
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def random_images(n, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=g), torch.arange(n) % C


# --------------------------------------------------------------------------------------------------- decoding

@pytest.mark.parametrize("image_size", [16, 32])
def test_codec_decodes_like_to_float(image_size):
    x, _ = random_images(64)
    codec = ImageCodec(MEAN, STD, image_size=image_size)
    want = reference_to_float(x, image_size)
    assert close(codec.decode(x), want)
    assert close(codec.decode(x.view(4, 16, 3, 32, 32)), want.view(4, 16, *want.shape[1:]))  # any leading shape
    assert codec.output_shape((3, 32, 32)) == (3, image_size, image_size)


@pytest.mark.parametrize("image_size", [16, 32])
def test_border_splits_decode_like_the_float_construction(image_size):
    tx, ty = random_images(300, seed=1)
    vx, vy = random_images(80, seed=2)
    kw = dict(rho=0.8, width=2, n_classes=C, seed=5, shortcut_per_class=2)
    new = borders.border_splits(tx, ty, vx, vy, image_size=image_size, **kw)
    ref = reference_border_task(tx, ty, vx, vy, image_size, **kw)
    assert set(new) == set(ref)
    for name, (x, y) in ref.items():
        assert close(new[name].inputs(), x), name
        assert torch.equal(new[name].y, y), name
        idx = torch.randint(0, len(y), (3, 7), generator=torch.Generator().manual_seed(0))
        bx, by = new[name].take(idx, 3)  # a batch decodes like the same rows of the whole split
        assert close(bx, x[idx]) and torch.equal(by, y[idx]), name
    assert new["train"].x.dtype == torch.uint8 and new["train"].x.shape == (300, 3, 32, 32)
    assert new["coloured"].x is new["clean"].x  # one copy of the test images for both test splits
    assert new["train"].input_shape == (3, image_size, image_size)


def test_border_splits_on_float_images_unchanged():
    """[0, 1] float images (the old input of border_splits) decode bit for bit like before."""
    g = torch.Generator().manual_seed(0)
    tx, vx = torch.rand(50, 3, 8, 8, generator=g), torch.rand(20, 3, 8, 8, generator=g)
    ty, vy = torch.arange(50) % C, torch.arange(20) % C
    kw = dict(rho=0.7, width=2, n_classes=C, seed=1)
    new, ref = borders.border_splits(tx, ty, vx, vy, **kw), reference_border_splits(tx, ty, vx, vy, **kw)
    for name, (x, _) in ref.items():
        assert torch.equal(new[name].inputs(), x), name


def write_random_folder(root, per_class=4, seed=0):
    """cifar10/{train,test}/c<label>/NNNN.png with random 32 x 32 pixels (PNG: lossless)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split in ("train", "test"):
        for label in range(C):
            (root / "cifar10" / split / f"c{label}").mkdir(parents=True)
            for i in range(per_class):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                    root / "cifar10" / split / f"c{label}" / f"{i:04d}.png")
    return str(root)


def reference_cifar_subsets(root, n_train, n_test):
    arrays = cifar.load_cifar("cifar10", root)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x, y = arrays[split]
        idx = cifar.class_interleaved_order(y, C)[:n]
        out[split] = x[idx], y[idx]
    return out


@pytest.mark.parametrize("image_size", [16, 32])
def test_cifar_and_border_tasks_decode_like_before(tmp_path, image_size):
    root = write_random_folder(tmp_path)
    ref = reference_cifar_subsets(root, 30, 20)
    data = cifar.CIFARTask(n_train=30, n_test=20, image_size=image_size, data_root=root).build(0)
    for split in ("train", "test"):
        assert close(data.splits[split].inputs(), reference_to_float(ref[split][0], image_size))
        assert torch.equal(data.splits[split].y, ref[split][1])
    assert data.input_shape == (3, image_size, image_size)
    task = borders.BorderCIFARTask(n_train=30, n_test=20, image_size=image_size, border_width=2, rho=0.6,
                                   data_root=root)
    for seed in (0, 3):
        built = task.build(seed)
        expected = reference_border_task(*ref["train"], *ref["test"], image_size, rho=0.6, width=2, n_classes=C,
                                         seed=seed)
        for name, (x, y) in expected.items():
            assert close(built.splits[name].inputs(), x) and torch.equal(built.splits[name].y, y), (seed, name)


def test_per_member_borders_decode_per_seed(tmp_path):
    root = write_random_folder(tmp_path)
    task = borders.BorderCIFARTask(n_train=30, n_test=20, image_size=16, border_width=2, rho=0.5, data_root=root)
    seeds = (0, 1, 2)
    alone = [task.build(s) for s in seeds]
    data = stack_members(alone)
    train = data.splits["train"]
    assert train.per_member and train.shared_x and train.x.shape == (30, 3, 32, 32) and train.border.shape == (3, 30)
    assert data.splits["coloured"].per_member and data.splits["coloured"].shared_x
    assert not data.splits["clean"].per_member and not data.splits["shortcut"].per_member
    assert data.input_shape == (3, 16, 16)
    for name in ("train", "coloured"):
        whole = data.splits[name].inputs()
        assert whole.shape == (3, data.splits[name].size, 3, 16, 16)
        for k in range(3):
            assert close(whole[k], alone[k].splits[name].inputs())
        idx = torch.randint(0, data.splits[name].size, (3, 5), generator=torch.Generator().manual_seed(1))
        x, y = data.splits[name].take(idx, 3)
        for k in range(3):
            assert close(x[k], alone[k].splits[name].inputs()[idx[k]])
            assert torch.equal(y[k], alone[k].splits[name].y[idx[k]])



def test_grouped_tasks_store_uint8_and_decode_like_before(tmp_path):
    """CelebA and Waterbirds resize at load: their uint8 images only need /255 and standardisation, as before."""
    from test_group_data import write_celeba, write_waterbirds

    from nhtlib.data import celeba, waterbirds

    write_celeba(tmp_path / "ce")
    write_waterbirds(tmp_path / "wb")
    half = (0.5, 0.5, 0.5)
    data = celeba.CelebATask(image_size=8, split="official", data_root=str(tmp_path / "ce")).build(0)
    loaded = celeba.load_celeba(str(tmp_path / "ce"), 8)
    want = reference_to_float(loaded["x"][torch.from_numpy(np.flatnonzero(loaded["partition"] == 0))], 8, half, half)
    assert data.splits["train"].x.dtype == torch.uint8 and close(data.splits["train"].inputs(), want)
    data = waterbirds.WaterbirdsTask(image_size=8, data_root=str(tmp_path / "wb")).build(0)
    loaded = waterbirds.load_waterbirds(str(tmp_path / "wb"), 8)
    want = reference_to_float(loaded["x"][torch.from_numpy(np.flatnonzero(loaded["split"] == 0))], 8, half, half)
    assert data.splits["train"].x.dtype == torch.uint8 and close(data.splits["train"].inputs(), want)
    for name in data.meta["groups"]:
        assert data.splits[name].x.dtype == torch.uint8 and data.splits[name].input_shape == (3, 8, 8)


# ------------------------------------------------------------------------- take / head = the old select / first

def float_splits():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 3, 4, 4, generator=g), torch.randint(0, 3, (12,), generator=g)
    xs, ys = torch.randn(2, 12, 5, generator=g), torch.randint(0, 3, (2, 12), generator=g)
    return {"shared": (x, y, False), "per_member": (xs, ys, True)}


@pytest.mark.parametrize("kind", ["shared", "per_member"])
def test_take_and_head_match_select_and_first_examples_on_float_splits(kind):
    x, y, per_member = float_splits()[kind]
    split = Split(x, y, per_member)
    g = torch.Generator().manual_seed(2)
    indices = [None, torch.randint(0, 12, (2, 5), generator=g)] + ([] if per_member else [torch.arange(3, 9)])
    for idx in indices:
        for got, want in zip(split.take(idx, 2), reference_select(x, y, per_member, idx, 2)):
            assert torch.equal(got, want)
        for got, want in zip(nht.train.select(split, idx, 2), reference_select(x, y, per_member, idx, 2)):
            assert torch.equal(got, want)
    for n in (4, 50):
        head = split.head(n)
        want_x, want_y = reference_first_examples(x, y, per_member, n)
        assert torch.equal(head.x, want_x) and torch.equal(head.y, want_y) and head.per_member == per_member
        assert torch.equal(nht.train.first_examples(split, n).x, want_x)
    assert split.input_shape == tuple(x.shape[2:] if per_member else x.shape[1:])
    assert split.inputs() is x and split.decoded() is split


def test_take_and_head_on_image_splits_match_the_decoded_split():
    tx, ty = random_images(40, seed=3)
    vx, vy = random_images(10, seed=4)
    parts = [borders.border_splits(tx, ty, vx, vy, rho=0.5, width=2, n_classes=C, seed=s, image_size=16)
             for s in range(2)]
    stacked = stack_members([Dataset(p, C) for p in parts])
    for split in (parts[0]["train"], stacked.splits["train"], stacked.splits["clean"]):
        plain = split.decoded()
        assert plain.codec is None and plain.x.dtype == torch.float32
        g = torch.Generator().manual_seed(0)
        indices = [None, torch.randint(0, split.size, (2, 6), generator=g)]
        if not split.per_member:
            indices.append(torch.arange(5))
        for idx in indices:
            for got, want in zip(split.take(idx, 2), reference_select(plain.x, plain.y, plain.per_member, idx, 2)):
                assert close(got, want) if got.is_floating_point() else torch.equal(got, want)
        head = split.head(7)
        assert head.codec is split.codec and head.x.dtype == torch.uint8
        want_x, want_y = reference_first_examples(plain.x, plain.y, plain.per_member, 7)
        assert close(head.inputs(), want_x) and torch.equal(head.y, want_y)


# ------------------------------------------------------------------------------------------- sharing and bytes

def test_stack_members_shares_the_images_of_a_k4_border_stack():
    n, size, k = 500, 32, 4
    tx, ty = random_images(n, size, seed=5)
    vx, vy = random_images(100, size, seed=6)
    per_seed = [Dataset(borders.border_splits(tx.clone(), ty, vx.clone(), vy, rho=0.9, width=3, n_classes=C,
                                              seed=s), C) for s in range(k)]  # each seed its own copy, as built
    data = stack_members(per_seed)
    train = data.splits["train"]
    assert train.shared_x and train.x.shape == (n, 3, size, size) and train.x.dtype == torch.uint8
    assert train.y.shape == (k, n) and train.border.shape == (k, n)
    assert data.splits["coloured"].x is data.splits["clean"].x
    one_uint8_copy = n * 3 * size * size
    float_copies = k * n * 3 * size * size * 4  # what K per-member float training sets held
    assert train.nbytes == one_uint8_copy + 2 * k * n * 8 + (3 + 3 + 3 * C) * 4  # images, labels, borders, codec
    assert train.nbytes < float_copies / 10
    # every byte accounted for: one copy of the training and of the test images (coloured and clean share it),
    # labels and border indices (per member where they differ), the float gray images, one codec
    test_images, gray = 100 * 3 * size * size, C * 3 * size * size * 4
    per_member_ints = 2 * k * n * 8 + 2 * k * 100 * 8
    shared_ints = 100 * 8 + C * 8
    codec = (3 + 3 + 3 * C) * 4
    assert data.nbytes == one_uint8_copy + test_images + per_member_ints + shared_ints + gray + codec


def test_stack_members_identical_image_splits_stay_shared():
    tx, ty = random_images(20, seed=7)
    codec = ImageCodec(MEAN, STD, image_size=16)
    data = stack_members([Dataset({"train": Split(tx.clone(), ty.clone(), codec=codec)}, C) for _ in range(3)])
    assert not data.splits["train"].per_member and data.splits["train"].x.dtype == torch.uint8
    shuffled = [Dataset({"train": Split(tx, ty[torch.randperm(20, generator=torch.Generator().manual_seed(s))],
                                        codec=codec)}, C) for s in range(3)]
    stacked = stack_members(shuffled).splits["train"]
    assert stacked.per_member and stacked.shared_x and stacked.border is None and stacked.y.shape == (3, 20)
    x, y = stacked.take(torch.zeros(3, 2, dtype=torch.int64), 3)
    assert x.shape == (3, 2, 3, 16, 16) and torch.equal(x[0], x[1])
    with pytest.raises(ValueError, match="codecs differ"):
        stack_members([Dataset({"train": Split(tx, ty, codec=ImageCodec(MEAN, STD, image_size=s))}, C)
                       for s in (8, 16)])


def test_nbytes_counts_each_storage_once():
    x, y = random_images(10)
    split = Split(x, y, codec=ImageCodec(MEAN, STD))
    assert split.nbytes == x.numel() + 8 * 10 + 2 * 3 * 4
    data = Dataset({"train": split, "again": Split(x, y, codec=split.codec), "head": split.head(4)}, C)
    assert data.nbytes == split.nbytes  # the same tensors and views of them cost nothing more
    plain = Split(x.float(), y)
    assert plain.nbytes == 4 * x.numel() + 8 * 10


def test_split_checks_its_layout():
    x, y = random_images(6)
    codec = ImageCodec(MEAN, STD, palette=PALETTE, border_width=1)
    with pytest.raises(ValueError, match="codec"):
        Split(x, y, border=y)
    with pytest.raises(ValueError, match="border indices"):
        Split(x, y, codec=codec, border=y[:3])
    with pytest.raises(ValueError, match="shared_x"):
        Split(x, y, codec=codec, shared_x=True)
    with pytest.raises(ValueError, match="palette"):
        ImageCodec(MEAN, STD, border_width=2)
    assert Split(x, y.repeat(2, 1), per_member=True, codec=codec, border=y.repeat(2, 1), shared_x=True).size == 6


def test_to_cpu_round_trip_keeps_uint8_and_sharing():
    tx, ty = random_images(30, seed=8)
    vx, vy = random_images(10, seed=9)
    data = stack_members([Dataset(borders.border_splits(tx, ty, vx, vy, rho=0.5, width=2, n_classes=C, seed=s,
                                                        image_size=16), C) for s in range(2)])
    moved = data.to("cpu")
    assert moved.splits["coloured"].x is moved.splits["clean"].x and moved.splits["train"].x.dtype == torch.uint8
    assert moved.nbytes == data.nbytes and moved.input_shape == (3, 16, 16)
    for name, split in data.splits.items():
        assert torch.equal(moved.splits[name].inputs(), split.inputs())


def test_training_on_uint8_border_data_matches_the_float_data():
    """The training loop gives the same tables on the uint8 border data as on the former per-member floats."""
    tx, ty = random_images(40, 16, seed=10)
    vx, vy = random_images(20, 16, seed=11)
    seeds = [0, 1]
    kw = dict(rho=0.6, width=2, n_classes=C, shortcut_per_class=1)
    new = stack_members([Dataset(borders.border_splits(tx, ty, vx, vy, seed=s, image_size=8, **kw), C)
                         for s in seeds])
    refs = [reference_border_task(tx, ty, vx, vy, 8, seed=s, **kw) for s in seeds]
    old = Dataset({name: Split(torch.stack([r[name][0] for r in refs]), torch.stack([r[name][1] for r in refs]),
                               per_member=True) for name in refs[0]}, C)
    cfg = nht.TrainConfig(steps=6, n_logs=3, batch_size=8, lr=1e-2)
    model = nht.models.config("mlp", hidden=(16,))
    tables_new = nht.train.train(model.build(new.input_shape, C, seeds), new, cfg, seeds=seeds, progress=False)
    tables_old = nht.train.train(model.build(old.input_shape, C, seeds), old, cfg, seeds=seeds, progress=False)
    for a, b in zip(tables_new, tables_old):
        cols = [c for c in a.columns if c.endswith(("_loss", "_acc")) or c.startswith("norm_sq")]
        np.testing.assert_allclose(a[cols].to_numpy(), b[cols].to_numpy(), rtol=1e-5, atol=1e-6)


def test_decoding_a_small_data_set_up_front_changes_no_result():
    """A batch of the decoded split is the decoded batch: training on data decoded once gives the very tables of
    decoding every batch; data over the budget stay encoded."""
    tx, ty = random_images(40, 16, seed=14)
    vx, vy = random_images(20, 16, seed=15)
    seeds = [0, 1]
    data = stack_members([Dataset(borders.border_splits(tx, ty, vx, vy, rho=0.6, width=2, n_classes=C, seed=s,
                                                        image_size=8), C) for s in seeds])
    decoded = data.decoded_if_small(10 ** 9)
    assert all(split.codec is None for split in decoded.splits.values())
    assert decoded.splits["train"].inputs().shape == (2, 40, 3, 8, 8)  # per-member borders: one copy per member
    assert data.splits["train"].decoded_nbytes == 4 * 2 * 40 * 3 * 8 * 8
    assert data.decoded_if_small(data.splits["train"].decoded_nbytes - 1) is data
    cfg = nht.TrainConfig(steps=6, n_logs=3, batch_size=8, lr=1e-2)
    model = nht.models.config("mlp", hidden=(16,))
    tables = [nht.train.train(model.build(d.input_shape, C, seeds), d, cfg, seeds=seeds, progress=False)
              for d in (data, decoded)]
    for a, b in zip(*tables):
        pd.testing.assert_frame_equal(a.drop(columns="wall_s"), b.drop(columns="wall_s"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_decoding_on_cuda_matches_the_cpu():
    tx, ty = random_images(64, seed=12)
    vx, vy = random_images(16, seed=13)
    data = stack_members([Dataset(borders.border_splits(tx, ty, vx, vy, rho=0.5, width=2, n_classes=C, seed=s,
                                                        image_size=16), C) for s in range(3)])
    gpu = data.to("cuda")
    assert gpu.splits["coloured"].x is gpu.splits["clean"].x and gpu.nbytes == data.nbytes
    assert gpu.splits["train"].x.is_cuda and gpu.splits["train"].codec.mean.is_cuda
    idx = torch.randint(0, 64, (3, 10), generator=torch.Generator().manual_seed(0))
    x, y = gpu.splits["train"].take(idx, 3)
    assert x.is_cuda and x.dtype == torch.float32
    want_x, want_y = data.splits["train"].take(idx, 3)
    assert torch.allclose(x.cpu(), want_x, atol=1e-5) and torch.equal(y.cpu(), want_y)
    for name, split in data.splits.items():
        assert torch.allclose(gpu.splits[name].inputs().cpu(), split.inputs(), atol=1e-5), name
