"""No silent wrong data: content fingerprints, a decode cache that sees overwritten files, refusal of incomplete
data, errors that name the bad file, torchvision's readers, class-balanced prefixes. Tiny fixtures in tmp_path."""
import gzip
import hashlib
import json
import pickle
import re
import shutil
import time

import numpy as np
import pytest
import torch
from PIL import Image
from test_group_data import write_celeba, write_cub, write_waterbirds
from test_vision_data import write_cifar10_pickles, write_idx

from nhtlib.data import coloured_borders as borders, celeba, cifar, files, mnist, modular, sparse_parity as toy, waterbirds
from nhtlib.paths import results_root

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def write_image_folder(root, per_class=3, fmt="PNG"):
    """cifar10/{train,test}/<class>/NNNN.jpg, 32 x 32 solid images of value 20 * label + i (PNG data by default,
    so every file of a class has the same size)."""
    for split in ("train", "test"):
        for label, cls in enumerate(CLASSES):
            (root / "cifar10" / split / cls).mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                Image.fromarray(np.full((32, 32, 3), 20 * label + i, np.uint8)).save(
                    root / "cifar10" / split / cls / f"{i:04d}.jpg", format=fmt)
    return root / "cifar10"


def write_mnist(root, n_train=20, n_test=10, seed=0):
    folder = root / "mnist"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("t10k", n_test)):
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", np.arange(n) % 10)
    return folder


def overwrite(path, data: bytes):
    """Rewrite a file in place (same inode, like cp), after a pause so that its timestamps surely change."""
    time.sleep(0.05)
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()


def every_task(root):
    """One task of every file-reading kind on the fixtures of `root` (written by write_all)."""
    return {"cifar_pickle": cifar.CIFARTask(n_train=20, n_test=10, data_root=str(root / "pk")),
            "cifar_folder": cifar.CIFARTask(n_train=20, n_test=10, data_root=str(root / "fo")),
            "border": borders.BorderCIFARTask(n_train=20, n_test=10, image_size=16, border_width=2,
                                              data_root=str(root / "fo")),
            "mnist": mnist.MNISTTask(n_train=20, n_test=10, data_root=str(root / "mn")),
            "celeba": celeba.CelebATask(image_size=8, split="official", data_root=str(root / "ce")),
            "waterbirds": waterbirds.WaterbirdsTask(image_size=8, data_root=str(root / "wb")),
            "cub_standin": waterbirds.WaterbirdsTask(source="cub_standin", image_size=16, data_root=str(root / "cu"))}


def write_all(root):
    write_cifar10_pickles(root / "pk")
    write_image_folder(root / "fo")
    write_mnist(root / "mn")
    write_celeba(root / "ce")
    write_waterbirds(root / "wb")
    write_cub(root / "cu")
    # one file of each that a task reads, to overwrite with other bytes
    return {"cifar_pickle": root / "pk/cifar10/cifar-10-batches-py/data_batch_2",
            "cifar_folder": root / "fo/cifar10/train/cat/0000.jpg", "border": root / "fo/cifar10/test/dog/0001.jpg",
            "mnist": root / "mn/mnist/t10k-labels-idx1-ubyte.gz",
            "celeba": root / "ce/celeba/img_align_celeba/000003.jpg",
            "waterbirds": root / "wb/waterbird_complete95_forest2water2/000.Species/img_0.jpg",
            "cub_standin": next((root / "cu/cub/CUB_200_2011/images").glob("*/bird_0.jpg"))}


# ------------------------------------------------------------------------------- 1. the fingerprint of the data

def test_fingerprint_follows_content_not_location(tmp_path):
    """Defect 1: a same-size overwrite changes the fingerprint (and the decoded pixels); a moved copy keeps it."""
    write_cifar10_pickles(tmp_path / "a", str_keys=True)
    task = cifar.CIFARTask(n_train=20, n_test=10, data_root=str(tmp_path / "a"))
    before = task.data_fingerprint()
    assert HEX16.match(before) and task.data_fingerprint() == before
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert task.replace(data_root=str(tmp_path / "b")).data_fingerprint() == before  # moved data: same identity
    old = cifar.load_cifar("cifar10", str(tmp_path / "a"))
    batch = tmp_path / "a/cifar10/cifar-10-batches-py/data_batch_3"
    size = batch.stat().st_size
    write_cifar10_pickles(tmp_path / "a", str_keys=True, seed=1, names=["data_batch_3"])  # other pixels
    assert batch.stat().st_size == size
    assert task.data_fingerprint() != before
    new = cifar.load_cifar("cifar10", str(tmp_path / "a"))  # defect 2: the decode cache sees the new bytes
    assert not torch.equal(new["train"][0][20:30], old["train"][0][20:30])
    assert torch.equal(new["train"][0][:20], old["train"][0][:20])


def test_fingerprint_sees_cp_between_class_folders(tmp_path):
    """Defects 1 + 2: `cp dog/0000.jpg cat/0000.jpg` changes the fingerprint, and the next load decodes the new
    pixels (the old cache was keyed on the folder's mtime, which an overwrite does not change)."""
    root = write_image_folder(tmp_path)
    task = cifar.CIFARTask(n_train=20, n_test=10, data_root=str(tmp_path))
    before = task.data_fingerprint()
    old = cifar.load_cifar("cifar10", str(tmp_path))
    cat, dog = root / "train/cat/0000.jpg", root / "train/dog/0000.jpg"
    assert cat.stat().st_size == dog.stat().st_size
    folder_mtime = (root / "train/cat").stat().st_mtime_ns
    overwrite(cat, dog.read_bytes())
    assert (root / "train/cat").stat().st_mtime_ns == folder_mtime
    assert task.data_fingerprint() != before
    new = cifar.load_cifar("cifar10", str(tmp_path))
    i_cat, i_dog = 3 * 3, 5 * 3  # first image of class 3 (cat) and of class 5 (dog)
    assert int(old["train"][0][i_cat, 0, 0, 0]) == 60 and int(new["train"][0][i_cat, 0, 0, 0]) == 100
    assert torch.equal(new["train"][0][i_cat], new["train"][0][i_dog])


def test_fingerprint_memo_skips_unchanged_files_and_survives_corruption(tmp_path, monkeypatch):
    """Defect 1 (cost): unchanged files are not read again; a changed signature is; a corrupt memo is rebuilt."""
    monkeypatch.setattr(files, "RACY_NS", 0)  # trust even just-written files (they are not rewritten in the tick)
    calls = []
    real_hash = files._hash_file
    monkeypatch.setattr(files, "_hash_file", lambda path, md5: calls.append(path) or real_hash(path, md5))
    write_image_folder(tmp_path)
    task = cifar.CIFARTask(n_train=None, n_test=None, data_root=str(tmp_path))
    first = task.data_fingerprint()
    assert len(calls) == 60
    assert task.data_fingerprint() == first and len(calls) == 60  # memo hit: nothing read
    cat = tmp_path / "cifar10/train/cat/0001.jpg"
    overwrite(cat, cat.read_bytes())  # same bytes, new timestamps: read again, same fingerprint
    assert task.data_fingerprint() == first and calls[60:] == [cat]
    memos = list((results_root() / "data_cache" / "fingerprints").glob("*.json"))
    assert len(memos) == 1
    memos[0].write_bytes(b"{not json")
    assert task.data_fingerprint() == first and len(calls) == 121  # rebuilt from the files
    assert json.loads(memos[0].read_bytes())["version"] == files.MEMO_VERSION
    memos[0].write_text(json.dumps({"version": files.MEMO_VERSION, "files": {"train/cat/0002.jpg": [1, 2]}}))
    assert task.data_fingerprint() == first
    memos[0].unlink()
    assert task.data_fingerprint() == first


def test_fresh_files_are_not_memoised(tmp_path, monkeypatch):
    """A file changed less than RACY_NS before it was hashed is hashed again next time: a same-size rewrite in the
    same timestamp tick keeps its stat signature, so only the content can tell."""
    calls = []
    real_hash = files._hash_file
    monkeypatch.setattr(files, "_hash_file", lambda path, md5: calls.append(path) or real_hash(path, md5))
    path = tmp_path / "blob"
    path.write_bytes(b"a" * 100)
    first = files.fingerprint_files(tmp_path, ["blob"])
    with open(path, "r+b") as fh:  # no pause: possibly the same mtime_ns
        fh.write(b"b" * 100)
    assert files.fingerprint_files(tmp_path, ["blob"]) != first and len(calls) == 2


def test_every_file_task_has_a_fingerprint(tmp_path):
    """Defect 1: every task that reads files fingerprints them (None only for data generated in code); it is the
    one in the Dataset's meta and it changes when one file the task reads is overwritten."""
    changed = write_all(tmp_path)
    tasks = every_task(tmp_path)
    before = {name: task.data_fingerprint() for name, task in tasks.items()}
    assert all(HEX16.match(fp) for fp in before.values()), before
    assert before["border"] == before["cifar_folder"]
    assert len({before[k] for k in before if k != "border"}) == len(before) - 1
    for name in ("cifar_pickle", "mnist", "celeba", "waterbirds"):
        assert tasks[name].build(0).meta["data"]["fingerprint"] == before[name]
    assert toy.SparseParityTask().data_fingerprint() is None and modular.ModularTask().data_fingerprint() is None
    for name, path in changed.items():
        overwrite(path, path.read_bytes()[::-1] if name == "cifar_pickle" else b"\0" + path.read_bytes())
    after = {name: task.data_fingerprint() for name, task in tasks.items()}
    assert all(after[name] != before[name] for name in tasks), (before, after)


def test_fingerprint_raises_the_loaders_error_when_data_are_missing(tmp_path):
    for task in every_task(tmp_path).values():
        with pytest.raises(FileNotFoundError) as built:
            task.build(0)
        with pytest.raises(FileNotFoundError) as fingerprinted:
            task.data_fingerprint()
        assert str(fingerprinted.value) == str(built.value)


# -------------------------------------------------------------------- 2. the decode cache follows the content

def test_decode_cache_sees_overwritten_celeba_image_and_mnist_file(tmp_path):
    folder = write_celeba(tmp_path)
    old = celeba.load_celeba(str(tmp_path), image_size=8)["x"]
    images = folder / "img_align_celeba"
    overwrite(images / "000002.jpg", (images / "000001.jpg").read_bytes())
    new = celeba.load_celeba(str(tmp_path), image_size=8)["x"]
    assert not torch.equal(old[1], old[0]) and torch.equal(new[1], new[0])
    write_mnist(tmp_path)
    before = mnist.load_mnist(str(tmp_path))["train"][0]
    time.sleep(0.05)
    write_idx(tmp_path / "mnist/train-images-idx3-ubyte.gz", np.full((20, 28, 28), 7))
    after = mnist.load_mnist(str(tmp_path))["train"][0]
    assert not torch.equal(before, after) and torch.all(after == 7)


# ------------------------------------------------------------------------- 3. incomplete data are refused

def test_missing_pickles_are_refused(tmp_path):
    """Defect 3: a copy with only data_batch_1 (24 images) built 24 training images without a word."""
    folder = write_cifar10_pickles(tmp_path, n=24, names=["data_batch_1", "test_batch"])
    task = cifar.CIFARTask(n_train=5000, data_root=str(tmp_path))
    for call in (lambda: task.build(0), task.data_fingerprint, lambda: cifar.load_cifar("cifar10", str(tmp_path))):
        with pytest.raises(FileNotFoundError) as err:
            call()
        text = str(err.value)
        assert str(folder) in text and "4 of the 6" in text
        assert all(f"data_batch_{i}" in text for i in (2, 3, 4, 5)) and "data_batch_1," not in text


def test_more_per_class_than_present_is_refused(tmp_path):
    """Defect 3: n_train / n_test beyond the data per class is a ValueError naming requested, found and where."""
    folder = write_cifar10_pickles(tmp_path / "pk", n=10)  # 5 train images per class, 1 test image per class
    with pytest.raises(ValueError) as err:
        cifar.CIFARTask(n_train=5000, n_test=10, data_root=str(tmp_path / "pk")).build(0)
    assert "n_train=5000" in str(err.value) and "500 per class" in str(err.value)
    assert "smallest class (label 0) has 5" in str(err.value) and str(folder) in str(err.value)
    with pytest.raises(ValueError, match=r"n_test=11: .*need 2 of 1 classes and 1 of the others.* has 1"):
        cifar.CIFARTask(n_train=50, n_test=11, data_root=str(tmp_path / "pk")).build(0)
    assert cifar.CIFARTask(n_train=50, n_test=10, data_root=str(tmp_path / "pk")).build(0).splits["train"].size == 50
    root = write_image_folder(tmp_path / "fo")  # 3 per class
    with pytest.raises(ValueError, match=r"n_train=40: .*4 per class.* has 3 in the train split of " + re.escape(
            str(root))):
        cifar.CIFARTask(n_train=40, n_test=10, data_root=str(tmp_path / "fo")).build(0)


def test_missing_class_is_refused(tmp_path):
    """Defect 3: an ImageFolder without a class folder, or labels that miss a class, are not CIFAR-10."""
    root = write_image_folder(tmp_path / "fo")
    shutil.rmtree(root / "test" / "truck")
    with pytest.raises(FileNotFoundError, match=r"test holds 9 class folders, cifar10 has 10: found airplane"):
        cifar.load_cifar("cifar10", str(tmp_path / "fo"))
    (root / "test" / "truck").mkdir()
    with pytest.raises(FileNotFoundError, match=r"test/truck holds no image"):
        cifar.CIFARTask(n_train=10, n_test=10, data_root=str(tmp_path / "fo")).data_fingerprint()
    folder = write_cifar10_pickles(tmp_path / "pk", n=6)  # labels 0-5 only
    with pytest.raises(ValueError, match=r"cover 6 of the 10 cifar10 classes \(missing: 6, 7, 8, 9") as err:
        cifar.load_cifar("cifar10", str(tmp_path / "pk"))
    assert str(folder) in str(err.value)


def test_balanced_subset_never_returns_fewer_than_n():
    y = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    with pytest.raises(ValueError, match=r"n=9\): 9 examples balanced over 3 classes need 3 per class.*has 2"):
        cifar.balanced_subset(y, 9, 3)
    assert len(cifar.balanced_subset(y, 7, 3)) == 7  # 3 + 2 + 2: the extra one from a class that has it
    with pytest.raises(ValueError, match=r"smallest class \(label 3\) has 0"):
        cifar.balanced_subset(y, 4, 4)  # class 3 is absent


def test_mnist_truncated_files_and_short_counts_are_refused(tmp_path):
    """Defects 3 + 4: a truncated IDX file is named; n_train beyond the file's count is an error."""
    folder = write_mnist(tmp_path)
    with pytest.raises(ValueError, match=r"n_train=30 but the MNIST train file .* holds only 20 images"):
        mnist.MNISTTask(n_train=30, n_test=10, data_root=str(tmp_path)).build(0)
    images = folder / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(images.read_bytes())
    with gzip.open(images, "wb") as fh:  # a valid gzip of a cut IDX file
        fh.write(raw[:-100])
    with pytest.raises(files.DataFileError, match=r"train-images-idx3-ubyte.gz: ValueError: the header announces "
                       r"\(20, 28, 28\) = 15,680 bytes of data but 15,580 follow it") as err:
        mnist.load_mnist(str(tmp_path))
    assert err.value.path == images and err.value.__cause__ is not None
    images.write_bytes(gzip.compress(raw)[:-30])  # a cut gzip stream
    with pytest.raises(files.DataFileError, match="train-images-idx3-ubyte.gz: EOFError"):
        mnist.load_mnist(str(tmp_path))
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"1 of the 4 expected files are missing from .*: t10k-labels"):
        mnist.MNISTTask(n_train=20, n_test=10, data_root=str(tmp_path)).data_fingerprint()


def test_mnist_torchvision_raw_layout(tmp_path):
    """Defect 5: torchvision's MNIST/raw/ (uncompressed) files go through torchvision's reader; a cut one is named."""
    gz = write_mnist(tmp_path / "gz")
    raw = tmp_path / "tv" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in gz.iterdir():
        (raw / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
    a, b = mnist.load_mnist(str(tmp_path / "gz")), mnist.load_mnist(str(tmp_path / "tv"))
    assert all(torch.equal(a[s][i], b[s][i]) for s in ("train", "test") for i in (0, 1))
    task = mnist.MNISTTask(n_train=20, n_test=10, data_root=str(tmp_path / "tv"))
    assert task.build(0).meta["data"]["official_md5"] is None
    assert task.replace(data_root=str(tmp_path / "gz")).build(0).meta["data"]["official_md5"] is False
    cut = raw / "t10k-images-idx3-ubyte"
    cut.write_bytes(cut.read_bytes()[:-1])
    with pytest.raises(files.DataFileError, match=r"t10k-images-idx3-ubyte: ValueError: the header announces"):
        mnist.load_mnist(str(tmp_path / "tv"))


def test_waterbirds_missing_listed_images_are_refused(tmp_path):
    folder = write_waterbirds(tmp_path)
    for i in (3, 5, 9):
        (folder / f"{i:03d}.Species" / f"img_{i}.jpg").unlink()
    task = waterbirds.WaterbirdsTask(image_size=8, data_root=str(tmp_path))
    for call in (lambda: task.build(0), task.data_fingerprint):
        with pytest.raises(FileNotFoundError, match=r"3 of the 16 expected files are missing from .*: "
                           r"003.Species/img_3.jpg, 005.Species/img_5.jpg, 009.Species/img_9.jpg"):
            call()
    cub = write_cub(tmp_path)
    next((cub / "CUB_200_2011/images").glob("*/bird_7.jpg")).unlink()
    with pytest.raises(FileNotFoundError, match=r"CUB photos listed in waterbirds_standin.csv: 1 of the 61"):
        waterbirds.WaterbirdsTask(source="cub_standin", image_size=16, data_root=str(tmp_path)).build(0)


# ------------------------------------------------------------------------------- 4. errors that name the file

def test_corrupt_images_name_the_file(tmp_path):
    """Defect 4: a truncated JPEG, a cut PNG, garbage or an empty file raise an error naming the file."""
    root = write_image_folder(tmp_path / "fo", fmt="JPEG")
    bad = root / "train/bird/0001.jpg"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    ce = write_celeba(tmp_path / "ce") / "img_align_celeba" / "000005.jpg"
    ce.write_bytes(ce.read_bytes()[: ce.stat().st_size // 2])
    wb = write_waterbirds(tmp_path / "wb") / "002.Species" / "img_2.jpg"
    wb.write_bytes(b"not an image at all")
    cub = next((write_cub(tmp_path / "cu") / "CUB_200_2011/images").glob("*/bird_4.jpg"))
    cub.write_bytes(b"")
    for path, call in ((bad, lambda: cifar.load_cifar("cifar10", str(tmp_path / "fo"))),
                       (ce, lambda: celeba.load_celeba(str(tmp_path / "ce"), 8)),
                       (wb, lambda: waterbirds.load_waterbirds(str(tmp_path / "wb"), 8)),
                       (cub, lambda: waterbirds.load_cub_photos(str(tmp_path / "cu")))):
        with pytest.raises(files.DataFileError) as err:
            call()
        assert err.value.path == path and str(path) in str(err.value) and err.value.__cause__ is not None


def test_truncated_pickle_names_the_file(tmp_path):
    for str_keys in (True, False):
        folder = write_cifar10_pickles(tmp_path / str(str_keys), str_keys=str_keys)
        bad = folder / "data_batch_3"
        bad.write_bytes(bad.read_bytes()[:1000])
        with pytest.raises(files.DataFileError, match="data_batch_3: UnpicklingError|data_batch_3: EOFError") as err:
            cifar.load_cifar("cifar10", str(tmp_path / str(str_keys)))
        assert err.value.path == bad and err.value.__cause__ is not None
    folder = write_cifar10_pickles(tmp_path / "short", str_keys=True)
    with open(folder / "test_batch", "wb") as fh:
        pickle.dump({"data": np.zeros((10, 3072), np.uint8), "labels": [0] * 9}, fh)
    with pytest.raises(files.DataFileError, match="test_batch: ValueError: 10 images but 9 labels"):
        cifar.load_cifar("cifar10", str(tmp_path / "short"))


# --------------------------------------------------------------------------------- 5. torchvision's readers

def test_pickles_read_to_torchvisions_arrays_and_official_md5_recorded(tmp_path, monkeypatch):
    """Defect 5 (and issue 26's restricted reader): the pickles are read by the package's restricted unpickler, to
    the arrays torchvision's CIFAR10 reader builds (rows of "data" reshaped to (N, 3, 32, 32), labels in file
    order), for str-key (official) and bytes-key (Python 3) batches alike; meta records whether the files are the
    official ones."""
    folder = write_cifar10_pickles(tmp_path / "str", str_keys=True)
    write_cifar10_pickles(tmp_path / "bytes")
    batches = []
    for name in cifar.PICKLE_FILES["cifar10"]["train"]:
        with open(folder / name, "rb") as fh:  # the test's own trusted fixture: plain pickle is fine here
            batches.append(pickle.load(fh, encoding="latin1"))
    expected_x = torch.from_numpy(np.vstack([b["data"] for b in batches]).reshape(-1, 3, 32, 32))
    expected_y = torch.tensor([v for b in batches for v in b["labels"]])
    task = cifar.CIFARTask(n_train=50, n_test=10, data_root=str(tmp_path / "str"))
    data = task.build(0)
    assert data.meta["data"]["official_md5"] is False and data.meta["data"]["layout"] == "pickle"
    sums = {f.name: hashlib.md5(f.read_bytes()).hexdigest() for f in folder.iterdir()}
    monkeypatch.setattr(cifar, "official_md5", lambda name: sums)
    assert cifar.load_cifar_checked("cifar10", str(tmp_path / "str"))[1]["official_md5"] is True
    a, b = cifar.load_cifar("cifar10", str(tmp_path / "str")), cifar.load_cifar("cifar10", str(tmp_path / "bytes"))
    assert torch.equal(a["train"][0], expected_x) and torch.equal(a["train"][1], expected_y)
    assert all(torch.equal(a[s][i], b[s][i]) for s in ("train", "test") for i in (0, 1))
    from torchvision.datasets import CIFAR10, CIFAR100
    assert cifar.PICKLE_FILES["cifar10"]["train"] == [f for f, _ in CIFAR10.train_list]
    assert cifar.PICKLE_FILES["cifar100"] == {"train": [CIFAR100.train_list[0][0]], "test": [CIFAR100.test_list[0][0]]}


def test_read_image_matches_pillow(tmp_path):
    """read_image gives PIL's RGB pixels for JPEG (4:2:0), grey PNG and RGBA PNG (alpha dropped)."""
    rng = np.random.default_rng(0)
    smooth = np.kron(rng.integers(0, 256, (6, 5, 3)), np.ones((8, 8, 1))).astype(np.uint8)
    cases = {"a.jpg": (Image.fromarray(smooth), {"quality": 75}), "g.png": (Image.fromarray(smooth[..., 0]), {}),
             "r.png": (Image.fromarray(np.dstack([smooth, smooth[..., :1]])), {})}
    for name, (im, kw) in cases.items():
        im.save(tmp_path / name, **kw)
        expected = torch.from_numpy(np.array(Image.open(tmp_path / name).convert("RGB"))).permute(2, 0, 1)
        assert torch.equal(files.read_image(tmp_path / name), expected), name


# ------------------------------------------------------------------------ 6. every prefix is class-balanced

def test_balanced_subset_every_prefix_is_balanced():
    """Defect 6: the subset was sorted by class, so a 1,000-image prefix (probe, train_eval_size) held 4 classes."""
    g = torch.Generator().manual_seed(0)
    y = torch.cat([torch.full((300 + 7 * c,), c) for c in range(10)])[torch.randperm(3315, generator=g)]
    idx = cifar.balanced_subset(y, 2000, 10)
    assert len(idx) == 2000 and len(set(idx.tolist())) == 2000
    counts = torch.zeros(10)
    for m, label in enumerate(y[idx].tolist(), start=1):
        counts[label] += 1
        assert counts.max() - counts.min() <= 1 and (counts - m / 10).abs().max() < 1
        if m >= 100:
            assert (counts - m / 10).abs().max() <= 0.1 * m / 10
    for c in range(10):  # the first examples of each class, in file order
        assert sorted(idx[y[idx] == c].tolist()) == torch.nonzero(y == c).flatten()[:200].tolist()
    assert torch.equal(idx, cifar.balanced_subset(y, 2000, 10))  # deterministic
    assert y[idx[:10]].tolist() != list(range(10))  # the class order is shuffled within each round


def test_cifar_task_prefixes_are_balanced(tmp_path):
    write_cifar10_pickles(tmp_path, n=40)  # 20 train images per class
    data = cifar.CIFARTask(n_train=200, n_test=40, data_root=str(tmp_path)).build(0)
    y = data.splits["train"].y
    for m in (10, 20, 50, 100, 200):
        assert torch.bincount(y[:m], minlength=10).tolist() == [m // 10] * 10
    assert torch.bincount(data.splits["test"].y[:20], minlength=10).tolist() == [2] * 10
