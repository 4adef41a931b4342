"""nhtlib.data.inventory: what a task reads, what is there (counts, never pixels) and the guards that refuse absent
or partial data. Tiny fixtures in tmp_path (images are a few bytes or empty files: the inventory never decodes)."""
import gzip
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from nhtlib.data import TaskConfig
from nhtlib.data.coloured_borders import BorderCIFARTask
from nhtlib.data.celeba import CelebATask
from nhtlib.data.cifar import CIFARTask
from nhtlib.data.inventory import BY_TASK, FULL_SIZES, DataInventory, IncompleteDataError, all_inventories, dataset_inventory, inventory, require_complete, require_present
from nhtlib.data.mnist import MNISTTask
from nhtlib.data.modular import ModularTask
from nhtlib.data.sparse_parity import SparseParityTask
from nhtlib.data.waterbirds import WaterbirdsTask
from nhtlib.paths import repo_root

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PAPER = "scale='paper' trains on the full data set"


# ------------------------------------------------------------------------------------------------ fixtures

def write_image_folder(root, per_class=(3, 2)):
    """<root>/cifar10/{train,test}/<class>/: per_class[0] train and per_class[1] test images per class, real
    32 x 32 JPEG and PNG files alternately, plus a text file that is not an image."""
    for split, n in zip(("train", "test"), per_class):
        for label, cls in enumerate(CLASSES):
            folder = root / "cifar10" / split / cls
            folder.mkdir(parents=True)
            for i in range(n):
                fmt, suffix = ("JPEG", "jpg") if i % 2 == 0 else ("PNG", "png")
                Image.fromarray(np.full((32, 32, 3), 20 * label + i, np.uint8)).save(folder / f"{i:04d}.{suffix}",
                                                                                     format=fmt)
            (folder / "README.txt").write_text("not an image")
    return root / "cifar10"


def write_pickles(root, n=4, names=None, str_keys=False, protocol=None):
    """<root>/cifar10/cifar-10-batches-py/ with n labels per batch (the pixel array is a stand-in: the inventory
    counts labels only)."""
    folder = root / "cifar10" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": np.zeros((1, 3072), np.uint8), "labels": [i % 10 for i in range(n)]}
        batch = batch if str_keys else {k.encode(): v for k, v in batch.items()}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))
    return folder


def write_idx(path, shape, payload=None):
    """A gzipped IDX file of unsigned bytes with dims `shape` (payload: that many data bytes, default complete)."""
    header = bytes([0, 0, 8, len(shape)]) + b"".join(int(s).to_bytes(4, "big") for s in shape)
    size = int(np.prod(shape)) if payload is None else payload
    with gzip.open(path, "wb") as fh:
        fh.write(header + bytes(size))


def write_mnist(root, n_train=20, n_test=10):
    folder = root / "mnist"
    folder.mkdir(parents=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", (n, 28, 28))
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", (n,))
    return folder


def write_celeba(root, n_rows=12, present=range(1, 9), identity=True):
    """Official layout; partition: ids 1-6 train, 7-9 val, 10-12 test; image files (empty) only for `present`."""
    folder = root / "celeba"
    (folder / "img_align_celeba").mkdir(parents=True)
    for k in present:
        (folder / "img_align_celeba" / f"{k:06d}.jpg").write_bytes(b"")
    (folder / "list_attr_celeba.txt").write_text(f"{n_rows}\r\nSmiling\r\n")  # not read by the inventory
    part = [0 if k <= 6 else (1 if k <= 9 else 2) for k in range(1, n_rows + 1)]
    (folder / "list_eval_partition.txt").write_bytes(
        "".join(f"{k:06d}.jpg {p}\r\n" for k, p in zip(range(1, n_rows + 1), part)).encode())
    if identity:
        (folder / "identity_CelebA.txt").write_bytes(
            "".join(f"{k:06d}.jpg {k // 3}\r\n" for k in range(1, n_rows + 1)).encode())
    return folder


def write_waterbirds(root, splits=(0, 0, 0, 1, 2, 2)):
    folder = root / "waterbird_complete95_forest2water2"
    rows = ["img_id,img_filename,y,split,place,place_filename"]
    for i, split in enumerate(splits):
        name = f"{i:03d}.Species/img_{i}.jpg"
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"")
        rows.append(f"{i + 1},{name},{i % 2},{split},{i % 2},/x/y.jpg")
    (folder / "metadata.csv").write_text("\n".join(rows) + "\n")
    return folder


def write_cub(root, train=(1, 1, 0), test=(0, 1)):
    folder = root / "cub"
    rows = ["img_id,img_filename,y,cub_is_training_image"]
    for i, is_train in enumerate((*train, *test)):
        name = f"{1 + i % 2:03d}.Species/bird_{i}.jpg"
        path = folder / "CUB_200_2011" / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        rows.append(f"{i + 1},{name},{i % 2},{1 if i < len(train) else 0}")
    (folder / "waterbirds_standin.csv").write_text("\n".join(rows) + "\n")
    return folder


def raised(guard, *args) -> str:
    with pytest.raises(IncompleteDataError) as info:
        guard(*args)
    assert isinstance(info.value, FileNotFoundError)
    assert isinstance(info.value.inventory, DataInventory)
    return str(info.value)


# --------------------------------------------------------------------------------------------------- CIFAR

def test_image_folder_subset_counts_and_guard(tmp_path):
    folder = write_image_folder(tmp_path)
    task = CIFARTask(n_train=20, n_test=10, data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.dataset, inv.where, inv.layout) == ("cifar10", folder, "folder")
    assert inv.found == {"train": 30, "test": 20} and inv.full == {"train": 50_000, "test": 10_000}
    assert inv.present and not inv.complete and inv.missing() == {"train": 49_970, "test": 9_980}
    assert inv.describe() == f"cifar10 at {folder}: train 30 of 50,000, test 20 of 10,000 (a subset)"
    assert "train/ holds 10 class folders of 3 images each" in inv.notes
    assert require_present(task) == inv  # something is there: the planner may go on
    message = raised(require_complete, task, PAPER)
    assert message.startswith(f"{PAPER}, but cifar10 at {folder} is a subset: found train 30 of 50,000, test 20 of "
                              "10,000; missing 49,970 of the 50,000 train images, 9,980 of the 10,000 test images")
    assert (f"Put torchvision's cifar-10-batches-py/ (data_batch_1, data_batch_2, data_batch_3, data_batch_4, "
            "data_batch_5, test_batch) or an ImageFolder train/<class>/, test/<class>/ tree with all 50,000 training "
            f"and 10,000 test images (10 class folders) in {tmp_path / 'cifar10'}, or pass data_root.") in message
    # the border task reads its image task's data
    assert inventory(BorderCIFARTask(n_train=20, n_test=10, data_root=str(tmp_path))) == inv


def test_image_folder_with_a_class_missing_is_a_problem(tmp_path):
    folder = write_image_folder(tmp_path)
    for f in (folder / "train" / "truck").iterdir():
        f.unlink()
    (folder / "train" / "truck").rmdir()
    inv = inventory(CIFARTask(data_root=str(tmp_path)))
    assert inv.found == {"train": 27, "test": 20} and not inv.complete
    assert "holds 9 class folders, cifar10 has 10" in inv.problems[0]


def test_pickles_count_labels_and_name_missing_batches(tmp_path):
    folder = write_pickles(tmp_path, n=4)
    task = CIFARTask(n_train=20, n_test=4, data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.where, inv.layout, inv.found) == (folder, "pickle", {"train": 20, "test": 4})
    assert not inv.complete
    (folder / "data_batch_3").unlink()
    inv = inventory(task)
    assert inv.found == {"train": 16, "test": 4} and inv.problems == ("data_batch_3 is missing",)
    assert "; data_batch_3 is missing." in raised(require_complete, task, PAPER)


@pytest.mark.parametrize("str_keys, protocol", [(False, None), (True, 2), (False, 2)])
def test_full_size_pickles_are_complete(tmp_path, str_keys, protocol):
    """Official-size label lists (10,000 per batch) are complete: the guard passes and returns the inventory."""
    write_pickles(tmp_path, n=10_000, str_keys=str_keys, protocol=protocol)
    task = CIFARTask(data_root=str(tmp_path))
    inv = require_complete(task, PAPER)
    assert inv.complete and inv.found == {"train": 50_000, "test": 10_000}
    assert inv.describe().endswith("train 50,000 of 50,000, test 10,000 of 10,000 (complete)")


def test_unreadable_pickle_is_named(tmp_path):
    folder = write_pickles(tmp_path)
    (folder / "test_batch").write_bytes(b"not a pickle")
    inv = inventory(CIFARTask(data_root=str(tmp_path)))
    assert inv.found["test"] == 0 and inv.problems[0].startswith("test_batch cannot be read")


def test_missing_folder(tmp_path):
    task = CIFARTask(data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.where, inv.found, inv.present, inv.complete) == (tmp_path / "cifar10", {}, False, False)
    assert inv.describe() == (f"cifar10 expected at {tmp_path / 'cifar10'}: nothing there (absent; full: "
                              "train 50,000, test 10,000)")
    message = raised(require_present, task)
    assert message.startswith(f"no cifar10 data: nothing at {tmp_path / 'cifar10'} (the full data set: train 50,000, "
                              "test 10,000). Put torchvision's cifar-10-batches-py/")
    assert raised(require_complete, task, PAPER).startswith(f"{PAPER}, but no cifar10 data: nothing at ")
    c100 = raised(require_present, CIFARTask(dataset="cifar100", data_root=str(tmp_path)))
    assert "Put torchvision's cifar-100-python/ (train, test) or an ImageFolder" in c100
    assert f"(100 class folders) in {tmp_path / 'cifar100'}, or pass data_root." in c100
    gone = tmp_path / "no-such-root"
    message = raised(require_present, CIFARTask(data_root=str(gone)))
    assert f"nothing at {gone / 'cifar10'}" in message and f"the data root {gone} does not exist" in message


# --------------------------------------------------------------------------------------------------- MNIST

def test_mnist_counts_from_headers(tmp_path):
    folder = write_mnist(tmp_path)
    task = MNISTTask(n_train=20, n_test=10, shortcut="patch", data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.dataset, inv.where, inv.layout) == ("mnist", folder, "idx")
    assert inv.found == {"train": 20, "test": 10} and inv.full == FULL_SIZES["mnist"] and not inv.complete
    message = raised(require_complete, task, PAPER)
    assert "found train 20 of 60,000, test 10 of 10,000; missing 59,980 of the 60,000 train images" in message
    assert (f"t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (60,000 training and 10,000 test images; or "
            f"uncompressed, or torchvision's MNIST/raw/) in {tmp_path / 'mnist'}, or pass data_root.") in message
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    inv = inventory(task)
    assert inv.found == {"train": 20, "test": 0} and inv.problems == ("t10k-labels-idx1-ubyte.gz is missing",)


def test_mnist_full_headers_complete_and_truncation_seen(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for split, n in (("train", 60_000), ("t10k", 10_000)):
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", (n, 28, 28))
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", (n,))
    task = MNISTTask(data_root=str(tmp_path))
    assert require_complete(task, PAPER).found == {"train": 60_000, "test": 10_000}
    write_idx(folder / "train-images-idx3-ubyte.gz", (60_000, 28, 28), payload=1000)  # cut short
    inv = inventory(task)
    assert inv.found["train"] == 0 and not inv.complete
    assert inv.problems[0].startswith("train-images-idx3-ubyte.gz cannot be read (ValueError: the header announces "
                                      "60,000 examples")


# -------------------------------------------------------------------------------------------------- CelebA

def test_celeba_subset_and_identity_file(tmp_path):
    folder = write_celeba(tmp_path)
    task = CelebATask(data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.dataset, inv.where) == ("celeba", folder)
    assert inv.found == {"images": 8, "train": 6, "val": 2, "test": 0} and not inv.complete
    assert inv.describe() == (f"celeba at {folder}: images 8 of 202,599, train 6 of 162,770, val 2 of 19,867, "
                              "test 0 of 19,962 (a subset)")
    message = raised(require_complete, task, PAPER)
    assert "missing 202,591 of the 202,599 images, 162,764 of the 162,770 train images" in message
    assert ("Put all 202,599 aligned images img_align_celeba/<6-digit id>.jpg with list_attr_celeba.txt, "
            "list_eval_partition.txt and identity_CelebA.txt (the official layout) in "
            f"{tmp_path / 'celeba'}") in message
    (folder / "identity_CelebA.txt").unlink()
    assert inventory(task).problems == ("identity_CelebA.txt is missing (split='identity' needs it)",)
    official = inventory(task.replace(split="official"))
    assert official.problems == ()
    assert official.notes == ("identity_CelebA.txt is missing (split='identity' needs it)",)
    raised(require_present, CelebATask(data_root=str(tmp_path / "empty")))


# ---------------------------------------------------------------------------------------------- Waterbirds

def test_waterbirds_real_layout_counts_listed_images(tmp_path):
    folder = write_waterbirds(tmp_path)
    task = WaterbirdsTask(data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.dataset, inv.where, inv.layout) == ("waterbirds", folder, "csv")
    assert inv.found == {"images": 6, "train": 3, "val": 1, "test": 2} and not inv.complete
    (folder / "004.Species/img_4.jpg").unlink()
    inv = inventory(task)
    assert inv.found == {"images": 5, "train": 3, "val": 1, "test": 1}
    assert inv.problems == ("1 of the 6 images metadata.csv lists are missing",)


def test_waterbirds_absent_says_where(tmp_path):
    message = raised(require_present, WaterbirdsTask(data_root=str(tmp_path)))
    where = tmp_path / "waterbird_complete95_forest2water2"
    assert message.startswith(f"no waterbirds data: nothing at {where} (the full data set: images 11,788, "
                              "train 4,795, val 1,199, test 5,794)")
    assert (f"its folder waterbird_complete95_forest2water2/ with metadata.csv and all 11,788 images it lists, in "
            f"{where} (or {tmp_path / 'waterbirds'}), or pass data_root.") in message


def test_cub_standin_is_never_complete(tmp_path):
    folder = write_cub(tmp_path)
    task = WaterbirdsTask(source="cub_standin", data_root=str(tmp_path))
    inv = inventory(task)
    assert (inv.dataset, inv.where, inv.stand_in) == ("cub_standin", folder, True)
    assert inv.found == {"images": 5, "train": 3, "val": 0, "test": 2}
    assert inv.full == FULL_SIZES["waterbirds"] and inv.present and not inv.complete
    assert inv.describe().endswith("(a CUB stand-in for Waterbirds, never complete)")
    assert require_present(task) == inv
    message = raised(require_complete, task, PAPER)
    assert f"{PAPER}, but cub_standin at {folder} is a CUB stand-in for Waterbirds, never complete" in message
    assert "use WaterbirdsTask(source='waterbirds') with the real data set" in message
    # even a stand-in with more photos than Waterbirds has is not Waterbirds
    big = DataInventory("cub_standin", folder, {s: 10 ** 6 for s in inv.full}, inv.full, stand_in=True)
    assert big.present and not big.complete


# ----------------------------------------------------------------------------------------- dispatch, cost

def test_generated_tasks_have_no_inventory():
    for task in (SparseParityTask(), ModularTask()):
        assert inventory(task) is None
        assert require_present(task) is None and require_complete(task, PAPER) is None


@dataclass(frozen=True)
class _FileTask(TaskConfig):
    def data_fingerprint(self) -> str:
        return "0" * 16


@dataclass(frozen=True)
class _OwnInventoryTask(_FileTask):
    def data_inventory(self) -> DataInventory:
        return DataInventory("mine", Path("/x"), {"train": 1}, {"train": 1})


def test_unknown_file_task_is_refused_and_own_inventory_used():
    with pytest.raises(TypeError, match="_FileTask reads files but nhtlib.data.inventory has no inventory"):
        inventory(_FileTask())
    assert require_complete(_OwnInventoryTask(), PAPER).complete


def all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from all_subclasses(sub)


def test_every_file_reading_task_of_nhtlib_has_an_inventory():
    """A new TaskConfig in nhtlib that reads files (overrides data_fingerprint) must be in BY_TASK."""
    tasks = [c for c in all_subclasses(TaskConfig) if c.__module__.startswith("nhtlib.")]
    assert {c.__name__ for c in tasks} >= {"CIFARTask", "BorderCIFARTask", "MNISTTask", "CelebATask",
                                           "WaterbirdsTask", "SparseParityTask", "ModularTask"}
    for cls in tasks:
        reads_files = cls.data_fingerprint is not TaskConfig.data_fingerprint
        assert reads_files == any(issubclass(cls, kind) for kind, _ in BY_TASK), cls.__name__


def test_dataset_inventory_by_name(tmp_path):
    write_mnist(tmp_path)
    assert dataset_inventory("mnist", str(tmp_path)).found == {"train": 20, "test": 10}
    assert [i.dataset for i in all_inventories(str(tmp_path))] == ["cifar10", "cifar100", "mnist", "celeba",
                                                                  "waterbirds", "cub_standin"]
    with pytest.raises(ValueError, match="dataset='svhn'"):
        dataset_inventory("svhn")


SHARED = repo_root().parent / "shared" / "data" if repo_root() is not None else None


@pytest.mark.skipif(SHARED is None or "Offline data for the book" not in (
    (SHARED / "README.md").read_text() if SHARED and (SHARED / "README.md").is_file() else ""),
    reason="the book's offline data (shared/data) are not on this machine")
def test_the_books_offline_data():
    root = str(SHARED)
    started = time.perf_counter()
    inv = {i.dataset: i for i in all_inventories(root)}
    assert time.perf_counter() - started < 5.0  # well under a second when the machine is not busy
    cifar = inventory(CIFARTask(data_root=root))
    assert cifar == inv["cifar10"] and cifar.layout == "folder"
    assert cifar.found == {"train": 30_000, "test": 10_000} and not cifar.complete
    assert "train 30,000 of 50,000" in cifar.describe()
    assert inventory(MNISTTask(data_root=root)).complete
    celeba = inventory(CelebATask(data_root=root))
    assert celeba.found == {"images": 5_732, "train": 4_292, "val": 780, "test": 660} and not celeba.complete
    assert "images 5,732 of 202,599" in celeba.describe()
    cub = inventory(WaterbirdsTask(source="cub_standin", data_root=root))
    assert cub.found == {"images": 1_675, "train": 909, "val": 0, "test": 766} and not cub.complete
    assert not inv["cifar100"].present and not inv["waterbirds"].present
