"""Data readers run no planted code, check every input against its schema and use only public APIs (issue 26 items
1, 3, 4, 5; issue 25 item 6). Each defect's test plants the real fault and checks the refusal, by name."""
import ast
import gzip
import pickle
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from test_data_identity import write_image_folder, write_mnist
from test_group_data import write_celeba, write_cub, write_waterbirds
from test_vision_data import write_cifar10_pickles

import nhtlib as nht
from nhtlib.config import ConfigError
from nhtlib.data import celeba, cifar, files, mnist, waterbirds
from nhtlib.data.inventory import dataset_inventory
from nhtlib.paths import repo_root

PACKAGE = Path(nht.__file__).parent

SHARED = repo_root().parent / "shared" / "data" if repo_root() is not None else None


# ------------------------------------------------------------------------- 1. no code runs from a data pickle

class Payload:
    """Unpickling it calls `target(*args)`: what a planted pickle does."""

    def __init__(self, target, *args):
        self.target, self.args = target, args

    def __reduce__(self):
        return self.target, self.args


def planted(sentinel: Path) -> dict:
    """The ways a payload can name code: builtins.exec, os.system (posix.system), a class of another module."""
    return {"builtins.exec": Payload(exec, f"open({str(sentinel)!r}, 'w').write('ran')"),
            "posix.system": Payload(__import__("os").system, f"touch {sentinel}"),
            "pathlib.Path": Payload(Path, str(sentinel))}


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("kind", ["builtins.exec", "posix.system", "pathlib.Path"])
def test_a_planted_cifar_pickle_is_refused_by_name_and_never_runs(tmp_path, kind, protocol):
    sentinel = tmp_path / "ran.txt"
    folder = write_cifar10_pickles(tmp_path / "data", str_keys=True)
    batch = {"data": np.zeros((10, 3072), np.uint8), "labels": [i % 10 for i in range(10)],
             "extra": planted(sentinel)[kind]}
    (folder / "data_batch_2").write_bytes(pickle.dumps(batch, protocol=protocol))
    named = kind.replace("builtins.", "(builtins|__builtin__).")  # protocol 2 writes Python 2's module name
    with pytest.raises(files.DataFileError, match=f"refusing {named} in .*data_batch_2") as err:
        cifar.load_cifar("cifar10", str(tmp_path / "data"))
    assert err.value.path == folder / "data_batch_2"
    assert not sentinel.exists()
    problems = " ".join(dataset_inventory("cifar10", str(tmp_path / "data")).problems)  # the inventory's reader too
    assert re.search(f"refusing {named} in .*data_batch_2", problems)
    assert not sentinel.exists()


def test_the_restricted_unpickler_admits_what_cifar_batches_hold_at_every_protocol(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, (4, 3072), dtype=np.uint8)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        for keys in (str, lambda k: k.encode()):
            batch = {keys("data"): data, keys("labels"): [1, 2, 3, 4], keys("batch_label"): "training batch 1 of 5"}
            path = tmp_path / f"p{protocol}"
            path.write_bytes(pickle.dumps(batch, protocol=protocol))
            back = files.load_pickle(path)
            assert np.array_equal(back[keys("data")], data) and back[keys("labels")] == [1, 2, 3, 4]
    with pytest.raises(pickle.UnpicklingError, match="refusing _codecs.encode"):  # only the latin1 bytes form
        path.write_bytes(pickle.dumps(Payload(__import__("codecs").encode, "x", "rot13"), protocol=2))
        files.load_pickle(path)


def test_no_unrestricted_unpickling_in_the_data_package():
    """The only unpickler of nhtlib.data is files.RestrictedUnpickler; nothing asks numpy for allow_pickle."""
    for path in (PACKAGE / "data").glob("*.py"):
        text = path.read_text()
        assert "allow_pickle=True" not in text, path
        assert "pickle.load(" not in text and "pickle.loads(" not in text and "weights_only=False" not in text, path


# ------------------------------------------------------------------------- 3. the decode cache: a miss, named

def decode_cache_files():
    return sorted((Path(nht.paths.results_root()) / "data_cache").glob("cifar10-folder-*.pt"))


@pytest.mark.parametrize("fault", ["truncated", "not tensors", "planted code"])
def test_an_unparsable_decode_cache_is_a_named_miss_and_decoded_again(tmp_path, fault):
    write_image_folder(tmp_path, per_class=1)
    first = cifar.load_cifar("cifar10", str(tmp_path))
    (cache,) = decode_cache_files()
    sentinel = tmp_path / "ran.txt"
    if fault == "truncated":
        cache.write_bytes(cache.read_bytes()[:200])
    elif fault == "not tensors":
        torch.save(["not", "a", "decode"], cache)
    else:
        torch.save({"train": (Payload(exec, f"open({str(sentinel)!r}, 'w')"),)}, cache)
    with pytest.warns(files.DecodeCacheWarning, match=f"{cache.name}.*removed and the data are decoded again"):
        again = cifar.load_cifar("cifar10", str(tmp_path))
    assert not sentinel.exists()
    assert all(torch.equal(first[s][i], again[s][i]) for s in ("train", "test") for i in (0, 1))
    assert torch.load(cache, weights_only=True)["train"][1].tolist() == list(range(10))  # rewritten, readable
    with warnings.catch_warnings():
        warnings.simplefilter("error", files.DecodeCacheWarning)
        cifar.load_cifar("cifar10", str(tmp_path))  # a hit now: no warning


# --------------------------------------------------------------------------------------- 4. device strings

@pytest.mark.parametrize("device", ["cpu:<img src=x onerror=alert(1)>", "cuda:-1", "cuda:0x", " cpu", "cpu ",
                                    "CPU", "cpu:0", "cuda:01", "mps:0", "tpu", "", None, 0])
def test_only_auto_cpu_cuda_cuda_n_and_mps_are_devices(device):
    allowed = "choose one of 'auto', 'cpu', 'cuda', 'cuda:N'"
    with pytest.raises(ConfigError, match=allowed) as err:
        nht.resolve_device(device)
    assert repr(device) in str(err.value)  # quoted as a value (plain text), never passed on as markup
    with pytest.raises(ConfigError, match=allowed):
        nht.ChapterParams(device=device)


def test_the_allowed_devices_still_resolve():
    assert nht.resolve_device("cpu") == "cpu" and nht.resolve_device("auto") in ("cpu", "cuda")
    for device in ("cuda", "cuda:0", "cuda:12", "mps"):
        nht.ChapterParams(device=device)  # the format is valid (whether the machine has it is resolve_device's)


# ------------------------------------------------------------------------- 5. every input against its schema

def schema_error(call, path: Path, line, *needles):
    with pytest.raises(files.DataSchemaError) as err:
        call()
    message = str(err.value)
    assert err.value.path == path and err.value.line == line and str(path) in message, message
    for needle in needles:
        assert needle in message, message
    return message


def rewrite_line(path: Path, line: int, change) -> None:
    lines = path.read_bytes().decode().split("\r\n")
    lines[line - 1] = change(lines[line - 1])
    path.write_bytes("\r\n".join(lines).encode())


def test_celeba_attribute_header_out_of_order_or_short_is_refused(tmp_path):
    folder = write_celeba(tmp_path)
    attr = folder / celeba.ATTR_FILE
    rewrite_line(attr, 2, lambda s: s.replace("Blond_Hair Blurry", "Blurry Blond_Hair"))  # a shift of two columns
    load = lambda: celeba.load_celeba(str(tmp_path), image_size=8)  # noqa: E731
    schema_error(load, attr, 2, "'Blurry' where 'Blond_Hair' belongs")
    rewrite_line(attr, 2, lambda s: s.replace("Blurry Blond_Hair ", ""))  # two names missing: 38 names
    schema_error(load, attr, 2, "38 names", "missing: Blond_Hair, Blurry")


@pytest.mark.parametrize("value, found", [("0", "0"), ("2", "2"), ("x", "'x'")])
def test_celeba_attribute_values_other_than_plus_minus_one_are_refused(tmp_path, value, found):
    folder = write_celeba(tmp_path)
    attr = folder / celeba.ATTR_FILE
    rewrite_line(attr, 7, lambda s: s[:-2] + value.rjust(2))  # image 5's last attribute (Young)
    schema_error(lambda: celeba.load_celeba(str(tmp_path), image_size=8), attr, 7, "Young of 000005.jpg", found)


def test_celeba_short_rows_wrong_count_and_names_are_refused(tmp_path):
    folder = write_celeba(tmp_path)
    attr = folder / celeba.ATTR_FILE
    original = attr.read_bytes()
    load = lambda: celeba.load_celeba(str(tmp_path), image_size=8)  # noqa: E731
    rewrite_line(attr, 4, lambda s: s.rsplit(" ", 1)[0])  # one value missing on line 4
    schema_error(load, attr, 4, "a missing field")
    attr.write_bytes(original)
    rewrite_line(attr, 1, lambda s: "41")
    schema_error(load, attr, 1, "the number of rows that follow (40)", "'41'")
    attr.write_bytes(original)
    rewrite_line(attr, 5, lambda s: s.replace("000003.jpg", "000002.jpg"))
    schema_error(load, attr, 5, "each file listed once", "000002.jpg")


@pytest.mark.parametrize("value", ["3", "-1", "train"])
def test_celeba_partition_values_other_than_0_1_2_are_refused(tmp_path, value):
    folder = write_celeba(tmp_path)
    partition = folder / celeba.PARTITION_FILE
    rewrite_line(partition, 3, lambda s: s.split()[0] + " " + value)
    schema_error(lambda: celeba.load_celeba(str(tmp_path), image_size=8), partition, 3, "partition one of 0, 1, 2",
                 repr(int(value)) if value.lstrip("-").isdigit() else repr(value))


def edit_csv(path: Path, row: int, column: str, value) -> None:
    table = pd.read_csv(path)
    table[column] = table[column].astype(object)
    table.loc[row, column] = value
    table.to_csv(path, index=False)


@pytest.mark.parametrize("column, value", [("split", 3), ("y", 2), ("place", -1), ("split", "train")])
def test_waterbirds_split_label_and_place_values_are_checked(tmp_path, column, value):
    folder = write_waterbirds(tmp_path)
    edit_csv(folder / "metadata.csv", 5, column, value)
    task = waterbirds.WaterbirdsTask(image_size=8, data_root=str(tmp_path))
    schema_error(lambda: task.build(0), folder / "metadata.csv", 7, f"{column} one of", repr(value))


def test_cub_standin_label_and_split_values_are_checked(tmp_path):
    folder = write_cub(tmp_path)
    csv = folder / waterbirds.STANDIN_CSV
    edit_csv(csv, 0, "cub_is_training_image", 2)
    task = waterbirds.WaterbirdsTask(source="cub_standin", image_size=8, data_root=str(tmp_path))
    schema_error(lambda: task.build(0), csv, 2, "cub_is_training_image one of 0, 1", "2")
    edit_csv(csv, 0, "cub_is_training_image", 1)
    edit_csv(csv, 3, "y", None)
    schema_error(lambda: task.build(0), csv, 5, "a value in column y", "an empty cell")


def test_a_stray_cifar_class_folder_is_refused_not_shifted(tmp_path):
    folder = write_image_folder(tmp_path, per_class=1)
    for split in ("train", "test"):  # "cat" renamed "cats": not a class of CIFAR-10
        (folder / split / "cat").rename(folder / split / "cats")
    schema_error(lambda: cifar.load_cifar("cifar10", str(tmp_path)), folder / "train", None, "cats",
                 "exactly the 10 cifar10 classes")
    for split in ("train", "test"):
        (folder / split / "cats").rename(folder / split / "cat")
        (folder / split / "aardvark").mkdir()  # an 11th folder sorted first would shift every label by one
    schema_error(lambda: cifar.load_cifar("cifar10", str(tmp_path)), folder / "train", None, "aardvark")
    assert "aardvark" in " ".join(dataset_inventory("cifar10", str(tmp_path)).problems)


def test_numbered_cifar100_folders_are_labelled_by_number(tmp_path):
    """c0 .. c99 sort as c0, c1, c10, c11, ...: labelled by position, c10's images were class 2."""
    for split in ("train", "test"):
        for k in range(100):
            (tmp_path / "cifar100" / split / f"c{k}").mkdir(parents=True)
            Image.fromarray(np.full((32, 32, 3), k, np.uint8)).save(tmp_path / "cifar100" / split / f"c{k}" / "0.png")
    x, y = cifar.load_cifar("cifar100", str(tmp_path))["train"]
    assert torch.equal(x[:, 0, 0, 0].long(), y)  # every image's value is its folder's number
    assert y.tolist() == list(range(100))
    (tmp_path / "cifar100" / "train" / "c07").mkdir()  # "c07" and "c7" both claim class 7
    schema_error(lambda: cifar.load_cifar("cifar100", str(tmp_path)), tmp_path / "cifar100" / "train", None, "c07")


@pytest.mark.parametrize("label", [1.5, 10, -1, True])
def test_cifar_pickle_labels_must_be_integers_in_range(tmp_path, label):
    folder = write_cifar10_pickles(tmp_path, str_keys=True)
    batch = {"data": np.zeros((10, 3072), np.uint8), "labels": [*range(9), label]}
    (folder / "test_batch").write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(files.DataFileError, match=r"test_batch: ValueError: labels\[9\] is " + repr(label)):
        cifar.load_cifar("cifar10", str(tmp_path))


def test_mnist_magic_numbers_are_checked(tmp_path):
    folder = write_mnist(tmp_path)
    images, labels = folder / "train-images-idx3-ubyte.gz", folder / "train-labels-idx1-ubyte.gz"
    swapped = images.read_bytes()
    images.write_bytes(labels.read_bytes())
    labels.write_bytes(swapped)
    schema_error(lambda: mnist.load_mnist(str(tmp_path)), images, None, "magic number 00000803", "00000801")
    with gzip.open(images, "wb") as fh:
        fh.write(bytes([0, 0, 8, 3]) + b"".join(int(s).to_bytes(4, "big") for s in (20, 28, 28)) + bytes(20 * 784))
    schema_error(lambda: mnist.load_mnist(str(tmp_path)), labels, None, "magic number 00000801", "00000803")


def test_mnist_labels_outside_0_to_9_are_refused(tmp_path):
    folder = write_mnist(tmp_path)
    path = folder / "t10k-labels-idx1-ubyte.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big") + bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 12]))
    schema_error(lambda: mnist.load_mnist(str(tmp_path)), path, None, "labels 0..9", "label 12 at example 9")


# ------------------------------------------------------------------------- 6. no private or deprecated API

def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_no_private_torch_or_torchvision_module_and_no_private_overrides():
    sources = [*sorted((PACKAGE / "data").glob("*.py")), PACKAGE / "engine" / "memory.py"]
    for path in sources:
        private = [m for m in imported_modules(path) if m.split(".")[0] in ("torch", "torchvision")
                   and any(part.startswith("_") for part in m.split("."))]
        assert not private, (path, private)
    text = (PACKAGE / "data" / "cifar.py").read_text()
    assert "_check_integrity" not in text and "_load_meta" not in text  # torchvision's private hooks


def test_read_image_uses_no_deprecated_decoder(tmp_path, monkeypatch):
    import torchvision.io

    for name in ("decode_image", "decode_jpeg", "decode_png", "read_image"):
        monkeypatch.setattr(torchvision.io, name, lambda *a, **k: pytest.fail("a deprecated decoder was called"),
                            raising=False)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.jpg")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DeprecationWarning raised, and none silenced in the reader either
        assert files.read_image(tmp_path / "a.jpg").shape == (3, 8, 8)
    assert "filterwarnings" not in (PACKAGE / "data" / "files.py").read_text()


def image_cases(tmp_path) -> list[Path]:
    """A JPEG (4:2:0), an RGB, grey, 16-bit grey, palette, grey+alpha and RGBA PNG."""
    rng = np.random.default_rng(0)
    smooth = np.kron(rng.integers(0, 256, (6, 5, 3)), np.ones((8, 8, 1))).astype(np.uint8)
    cases = {"a.jpg": Image.fromarray(smooth), "rgb.png": Image.fromarray(smooth),
             "g.png": Image.fromarray(smooth[..., 0]),
             "g16.png": Image.fromarray((np.arange(48 * 40, dtype=np.uint32).reshape(48, 40) * 31).astype(np.uint16)),
             "p.png": Image.fromarray(smooth).convert("P"), "la.png": Image.fromarray(smooth[..., :2], "LA"),
             "rgba.png": Image.fromarray(np.dstack([smooth, smooth[..., :1]]))}
    for name, im in cases.items():
        im.save(tmp_path / name, **({"quality": 75} if name.endswith(".jpg") else {}))
    return [tmp_path / name for name in cases]


def test_pillow_decoding_gives_the_former_torchvision_pixels(tmp_path):
    """The reader moved from torchvision.io.decode_image (deprecated in 0.29) to Pillow: same pixels, bit for bit."""
    import torchvision.io

    decode = getattr(torchvision.io, "decode_image", None)
    if decode is None:
        pytest.skip("torchvision no longer has decode_image: nothing to compare with")
    for path in image_cases(tmp_path):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the reference only, in this test
            old = decode(torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8),
                         mode=torchvision.io.ImageReadMode.RGB)
        if old.dtype != torch.uint8:  # 16-bit PNG, scaled as the former reader did
            old = ((old.to(torch.int64) * 255 + 32767) // 65535).to(torch.uint8)
        assert torch.equal(files.read_image(path), old), path.name


def test_step_operations_counts_the_autograd_graph():
    """y = sum(w * x + b): Mul, Add, Sum forward and backward (2 x 3) and two gradient accumulations: 8."""
    from nhtlib.engine import memory  # here: at 102c415 the module was nhtlib.plan

    w, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.zeros(3))
    loss = (w * torch.arange(3.0) + b).sum()
    assert memory.step_operations(loss) == 8
    shared = w * 2.0
    assert memory.step_operations((shared + shared).sum()) == 2 * 3 + 1  # a node reached twice counts once


# ------------------------------------------------------------------------------- the book's real data still load

@pytest.mark.skipif(SHARED is None or not (SHARED / "celeba").is_dir(), reason="the book's offline data are absent")
def test_the_books_real_files_pass_their_schemas():
    root = str(SHARED)
    attrs = celeba.read_attributes(SHARED / "celeba" / celeba.ATTR_FILE)
    assert attrs.shape == (202_599, 40) and list(attrs.columns) == list(celeba.ATTRIBUTES)
    partition = celeba._read_column(SHARED / "celeba" / celeba.PARTITION_FILE, "partition", celeba.PARTITIONS)
    assert partition.value_counts().to_dict() == {0: 162_770, 1: 19_867, 2: 19_962}
    assert celeba._read_column(SHARED / "celeba" / celeba.IDENTITY_FILE, "identity").nunique() == 10_177
    table = waterbirds.read_checked_csv(SHARED / "cub" / waterbirds.STANDIN_CSV, waterbirds.STANDIN_SCHEMA)
    assert len(table) == 1_675
    labels = cifar.class_labels(SHARED / "cifar10" / "train", "cifar10")
    assert labels == {name: i for i, name in enumerate(cifar.CLASS_NAMES["cifar10"])}
    arrays = mnist.load_mnist(root)
    assert arrays["train"][0].shape == (60_000, 28, 28) and arrays["test"][1].max() == 9
