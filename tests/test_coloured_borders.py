"""The coloured-border shortcut data (nhtlib.data.coloured_borders) on small synthetic images."""
import math

import numpy as np
import pytest
import torch

import nhtlib as nht
from nhtlib.config import ConfigError
from nhtlib.data import coloured_borders as borders

C = 10


def synthetic(n, size=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, size, size, generator=g), torch.arange(n) % C


def unstandardise(x):
    return borders.standardise(x, nht.data.cifar.MEAN["cifar10"], nht.data.cifar.STD["cifar10"], inverse=True)


def make(rho=0.9, n_train=200, n_test=50, width=2, seed=0, size=8):
    tx, ty = synthetic(n_train, size, 1)
    vx, vy = synthetic(n_test, size, 2)
    return borders.border_splits(tx, ty, vx, vy, rho=rho, width=width, n_classes=C, seed=seed), (tx, ty, vx, vy)


def test_border_mask_frame():
    mask = borders.border_mask(6, 2)
    assert mask.sum() == 36 - 4 and not mask[2:4, 2:4].any() and mask[0].all() and mask[:, -1].all()


def test_colours_on_border_pixels_and_nowhere_else():
    splits, (tx, ty, _, _) = make(rho=1.0)
    x = unstandardise(splits["train"].inputs())
    mask = borders.border_mask(8, 2)
    colours = borders.PALETTE[ty]  # rho = 1: every border has its class's colour
    assert torch.allclose(x[:, :, mask], colours[:, :, None].expand(-1, -1, int(mask.sum())), atol=1e-5)
    assert torch.allclose(x[:, :, ~mask], tx[:, :, ~mask], atol=1e-5)  # the interior is untouched


def test_palette_distinct():
    d = torch.cdist(borders.PALETTE, borders.PALETTE) + torch.eye(C)
    assert d.min() > 0.1
    assert torch.cdist(borders.PALETTE, torch.full((1, 3), borders.GRAY)).min() > 0.2  # visible on the gray images


def border_class_of(split_x, width=2):
    """The class whose palette colour is closest to each image's corner pixel."""
    corner = unstandardise(split_x)[:, :, 0, 0]
    return torch.cdist(corner, borders.PALETTE).argmin(1)


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.95])
def test_rho_frequency_within_sampling_error(rho):
    n = 4000
    splits, (_, ty, _, _) = make(rho=rho, n_train=n)
    b = border_class_of(splits["train"].inputs())
    freq = (b == ty).float().mean().item()
    assert abs(freq - rho) < 4 * math.sqrt(rho * (1 - rho) / n)
    wrong = b[b != ty] - ty[b != ty]
    assert (wrong % C != 0).all()  # a non-matching border is another class's colour
    counts = np.bincount(((b - ty) % C)[b != ty].numpy(), minlength=C)[1:]
    assert counts.min() > 0.5 * counts.mean()  # spread over the other classes


def test_three_test_sets():
    splits, (_, _, vx, vy) = make(rho=0.8, n_test=50)
    assert set(splits) == {"train", "coloured", "clean", "shortcut"}
    clean = unstandardise(splits["clean"].inputs())
    assert torch.allclose(clean, vx, atol=1e-5) and torch.equal(splits["clean"].y, vy)  # no border at all
    assert torch.equal(splits["coloured"].y, vy)
    coloured = unstandardise(splits["coloured"].inputs())
    mask = borders.border_mask(8, 2)
    assert torch.allclose(coloured[:, :, ~mask], vx[:, :, ~mask], atol=1e-5)  # same images, with borders
    short = unstandardise(splits["shortcut"].inputs())
    assert torch.equal(splits["shortcut"].y, torch.arange(C))  # labelled by the border's class
    assert torch.allclose(short[:, :, ~mask], torch.full_like(short[:, :, ~mask], borders.GRAY))
    assert torch.equal(border_class_of(splits["shortcut"].inputs()), torch.arange(C))


def test_deterministic_by_seed():
    a, _ = make(seed=3)
    b, _ = make(seed=3)
    c, _ = make(seed=4)
    for name in a:
        assert torch.equal(a[name].inputs(), b[name].inputs())
    assert not torch.equal(a["train"].inputs(), c["train"].inputs())  # another seed draws other borders
    for name in ("clean", "shortcut"):
        assert torch.equal(a[name].inputs(), c[name].inputs())


def test_task_on_fake_image_folder(tmp_path):
    from PIL import Image

    for split in ("train", "test"):
        for label in range(C):
            (tmp_path / "cifar10" / split / f"c{label}").mkdir(parents=True)
            for i in range(3):
                Image.fromarray(np.full((32, 32, 3), 20 * label + i, np.uint8)).save(
                    tmp_path / "cifar10" / split / f"c{label}" / f"{i:04d}.png")
    task = borders.BorderCIFARTask(n_train=20, n_test=10, image_size=16, border_width=2, rho=1.0,
                                   data_root=str(tmp_path))
    data = nht.data.stack_members([task.build(0), task.build(1)])
    assert data.splits["train"].inputs().shape == (20, 3, 16, 16)  # rho = 1: both seeds draw the same borders
    assert data.splits["shortcut"].inputs().shape == (10, 3, 16, 16)
    assert data.n_classes == 10
    mixed = nht.data.stack_members([task.replace(rho=0.5).build(s) for s in (0, 1)])
    assert mixed.splits["train"].per_member and not mixed.splits["clean"].per_member
    with pytest.raises(ConfigError, match="rho"):
        borders.BorderCIFARTask(rho=1.5)
    with pytest.raises(ConfigError, match="border_width"):
        borders.BorderCIFARTask(image_size=8, border_width=4)


def test_kept_classes_are_relabelled_in_the_order_given():
    from nhtlib.data import Split

    x, y = synthetic(100)
    kept_x, kept_y = borders._kept(Split(x, y), (7, 2, 5), 12)
    assert kept_y.tolist() == [1, 2, 0] * 4  # classes 2, 5, 7 of y = 0..9 repeated, labelled by their place in (7, 2, 5)
    picked = torch.tensor([2, 5, 7] * 4) + 10 * torch.arange(12).div(3, rounding_mode="floor")
    assert torch.equal(kept_x, x[picked])


def test_kept_classes_build_a_smaller_task(monkeypatch):
    """A 3-class task reads enough images of all ten (balanced) to keep n_train of its own, balanced, with one
    border colour and one gray image per kept class, and chance 1/3."""
    task = borders.BorderCIFARTask(classes=(3, 8, 0), n_train=30, n_test=9, image_size=8, border_width=1)
    assert (task.image_task().n_train, task.image_task().n_test) == (100, 30)
    images = borders.CIFARTask(n_train=100, n_test=30, image_size=8)
    x, y = synthetic(100)
    vx, vy = synthetic(30, seed=3)
    fake = nht.data.Dataset({"train": nht.data.Split(x, y), "test": nht.data.Split(vx, vy)}, n_classes=10,
                            meta={"data": "synthetic"})
    monkeypatch.setattr(borders.CIFARTask, "build", lambda self, seed: fake)
    data = task.build(0)
    assert data.n_classes == 3 and data.meta["chance"] == pytest.approx(1 / 3)
    assert torch.bincount(data.splits["train"].y).tolist() == [10, 10, 10]
    assert torch.bincount(data.splits["clean"].y).tolist() == [3, 3, 3]
    assert data.splits["shortcut"].y.tolist() == [0, 1, 2] and int(data.splits["train"].border.max()) <= 2
    assert images.n_train == 100


@pytest.mark.parametrize("classes", [(3,), (1, 1), (0, 10), (-1, 2)])
def test_kept_classes_are_checked(classes):
    with pytest.raises(ConfigError):
        borders.BorderCIFARTask(classes=classes)
