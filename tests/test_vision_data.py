"""CIFAR / MNIST loaders on tiny fake copies of the standard layouts (the real data are not needed)."""
import gzip
import pickle

import numpy as np
import pytest
import torch

from nhtlib.data import cifar, mnist


def write_cifar10_pickles(root, n=10, seed=0, str_keys=False, names=None):
    """A CIFAR-10 pickle layout: n random images per batch, labels cycling through the 10 classes. Keys are bytes
    (as a Python 3 script writes them) or, with str_keys, str (as the official Python 2 files read)."""
    folder = root / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name in names or [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), "labels": [int(i % 10) for i in range(n)]}
        with open(folder / name, "wb") as fh:
            pickle.dump(batch if str_keys else {k.encode(): v for k, v in batch.items()}, fh)
    return folder


def test_cifar10_pickles_and_cache(tmp_path):
    write_cifar10_pickles(tmp_path)
    arrays = cifar.load_cifar("cifar10", str(tmp_path))
    assert arrays["train"][0].shape == (50, 3, 32, 32) and arrays["train"][0].dtype == torch.uint8
    assert arrays["test"][1].tolist() == list(range(10))
    again = cifar.load_cifar("cifar10", str(tmp_path))  # from the cache
    assert torch.equal(again["train"][0], arrays["train"][0])


def test_cifar100_pickles_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    for name, n in (("train", 200), ("test", 100)):  # every one of the 100 classes (a missing class is refused)
        with open(folder / name, "wb") as fh:
            pickle.dump({b"data": np.zeros((n, 3072), np.uint8), b"fine_labels": [i % 100 for i in range(n)],
                         b"coarse_labels": [0] * n}, fh)
    arrays = cifar.load_cifar("cifar100", str(tmp_path))
    assert arrays["train"][1].tolist() == [i % 100 for i in range(200)]


def test_image_folder_and_task(tmp_path):
    from PIL import Image

    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    for split in ("train", "test"):
        for label, cls in enumerate(classes):
            (tmp_path / "cifar10" / split / cls).mkdir(parents=True)
            for i in range(3):
                Image.fromarray(np.full((32, 32, 3), 20 * label + i, np.uint8)).save(
                    tmp_path / "cifar10" / split / cls / f"{i:04d}.png")
    arrays = cifar.load_cifar("cifar10", str(tmp_path))
    assert arrays["train"][0].shape == (30, 3, 32, 32)
    assert arrays["train"][1].tolist() == [c for c in range(10) for _ in range(3)]
    assert int(arrays["train"][0][4, 0, 0, 0]) == 21
    assert cifar.load_cifar("cifar10", str(tmp_path), max_per_class=2)["test"][0].shape == (20, 3, 32, 32)
    task = cifar.CIFARTask(n_train=20, n_test=10, image_size=16, data_root=str(tmp_path))
    data = task.build(0)
    assert data.splits["train"].inputs().shape == (20, 3, 16, 16) and data.input_shape == (3, 16, 16)
    assert data.splits["test"].inputs().shape == (10, 3, 16, 16)
    assert data.splits["train"].x.dtype == torch.uint8 and data.splits["train"].x.shape == (20, 3, 32, 32)
    assert sorted(data.splits["train"].y.tolist()) == [c for c in range(10) for _ in range(2)]
    shuffled = task.replace(shuffle_labels=True).build(0)
    assert torch.equal(shuffled.splits["train"].inputs(), data.splits["train"].inputs())
    assert not torch.equal(shuffled.splits["train"].y, data.splits["train"].y)
    assert task.digest() == task.replace(data_root="/elsewhere").digest()  # data_root is not identity


def test_missing_cifar_names_expected_layouts(tmp_path):
    with pytest.raises(FileNotFoundError, match="cifar-100-python"):
        cifar.load_cifar("cifar100", str(tmp_path))


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_mnist_idx_and_shortcut_patch(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for split, n in (("train", 20), ("t10k", 10)):
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", np.zeros((n, 28, 28)))
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    arrays = mnist.load_mnist(str(tmp_path))
    assert arrays["train"][0].shape == (20, 28, 28) and arrays["test"][1].tolist() == list(range(10))
    data = mnist.MNISTTask(n_train=20, n_test=10, shortcut="patch", data_root=str(tmp_path)).build(0)
    assert set(data.splits) == {"train", "test", "test_clean"}
    x, y = data.splits["train"].inputs(), data.splits["train"].y
    bright = x.max()
    for i in range(10):
        r, c = mnist.patch_positions(28, 4)[int(y[i])]
        assert torch.all(x[i, 0, r:r + 4, c:c + 4] == bright)
        assert int((x[i] == bright).sum()) == 16
    assert torch.all(data.splits["test_clean"].inputs() == data.splits["test_clean"].inputs().min())


def test_missing_mnist(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        mnist.load_mnist(str(tmp_path))


def test_balanced_subset():
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    idx = cifar.balanced_subset(y, 6, 3)
    assert sorted(y[idx].tolist()) == [0, 0, 1, 1, 2, 2]
