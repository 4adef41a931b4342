"""CIFAR with coloured-border shortcuts (NHT §5.1; shared/papers/nht.md §3.2 and the book's defaults in §7.2).

Every class c has its own border colour (`PALETTE[c]`, the ten "tab10" colours with black for tab10's gray). In the training split the border of
an image of class y has y's colour with probability rho, otherwise the colour of a uniformly random *other* class;
every image has a border (a frame `border_width` pixels wide, drawn on the [0, 1] image after down-sampling, then the
image is standardised with the CIFAR channel mean/std). Three test splits:

* ``coloured``: test images with borders drawn by the same rho rule (the training distribution);
* ``clean``: the same test images without a border;
* ``shortcut``: content-free images — a uniform gray image (every pixel 0.5 in every channel before
  standardisation) with a class-c border — labelled c, so its accuracy *is* the shortcut reliance (the fraction of
  gray images classified as their border's class). The gray images are identical within a class, so
  `shortcut_per_class` copies give exactly the accuracy of one; more copies only cost evaluation time.

The border draw (which colour each image gets) depends on the run's seed, so every seed has its own training set;
the test images themselves, the clean and the shortcut splits do not. Deterministic by seed. The splits hold the
uint8 images and each image's border colour (a palette index, `Split.border`); the border is drawn when a batch is
decoded (`nhtlib.data.codec`), on whatever device the batch is on, so the seeds of a batch share one copy of the
images and only their colour indices differ (`nhtlib.data.stack_members`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from nhtlib.config import ConfigError, check_choice, check_range, not_identity
from nhtlib.data import Dataset, ImageCodec, Split, TaskConfig
from nhtlib.data.cifar import MEAN, N_CLASSES, STD, CIFARTask
from nhtlib.data.codec import border_mask, draw_border, standardise  # noqa: F401  (their home was this module; importable here)

# matplotlib's "tab10" colours (RGB in [0, 1]) with its gray (index 7) replaced by black, since a gray border would
# be invisible on the shortcut split's gray images; class c gets PALETTE[c]
PALETTE = torch.tensor([
    (0.122, 0.467, 0.706), (1.000, 0.498, 0.055), (0.173, 0.627, 0.173), (0.839, 0.153, 0.157),
    (0.580, 0.404, 0.741), (0.549, 0.337, 0.294), (0.890, 0.467, 0.761), (0.000, 0.000, 0.000),
    (0.737, 0.741, 0.133), (0.090, 0.745, 0.812)])
GRAY = 0.5
BORDER_SEED_OFFSET = 104_729  # the border draw of seed s uses generator seed s + offset (apart from init/data order)


def border_classes(labels: torch.Tensor, rho: float, n_classes: int, generator: torch.Generator) -> torch.Tensor:
    """The class whose colour each image's border gets: its own with probability rho, else a uniformly random other
    class ((y + U{1..C-1}) mod C)."""
    n = labels.shape[0]
    keep = torch.rand(n, generator=generator) < rho
    other = (labels + torch.randint(1, n_classes, (n,), generator=generator)) % n_classes
    return torch.where(keep, labels, other)


def border_splits(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor, *,
                  rho: float, width: int, n_classes: int, seed: int, shortcut_per_class: int = 1,
                  palette: torch.Tensor = PALETTE, mean=MEAN["cifar10"], std=STD["cifar10"],
                  image_size: int | None = None) -> dict[str, Split]:
    """The four splits (train, coloured, clean, shortcut) from images (N, 3, H, W), uint8 or in [0, 1], and labels.

    The splits keep the images as given (``coloured`` and ``clean`` the same test tensor) with one `ImageCodec`:
    area down-sampling to image_size (None: as given), the border of palette index `Split.border` drawn on the
    [0, 1] image, then standardisation, done when a batch is decoded. The shortcut split's gray images are float
    (N, 3, S, S) at the decoded side S (0.5 is no uint8 value).
    """
    g = torch.Generator().manual_seed(int(seed) + BORDER_SEED_OFFSET)
    train_b = border_classes(train_y, rho, n_classes, g).to(train_x.device)
    test_b = border_classes(test_y, rho, n_classes, g).to(test_x.device)
    size = image_size or train_x.shape[-1]
    codec = ImageCodec(mean, std, image_size=size, palette=palette.to(train_x.device), border_width=width)
    gray_y = torch.arange(n_classes).repeat_interleave(shortcut_per_class).to(train_x.device)
    gray_dtype = train_x.dtype if train_x.is_floating_point() else torch.float32
    gray = torch.full((len(gray_y), 3, size, size), GRAY, dtype=gray_dtype, device=train_x.device)
    return {
        "train": Split(train_x, train_y, codec=codec, border=train_b),
        "coloured": Split(test_x, test_y, codec=codec, border=test_b),
        "clean": Split(test_x, test_y, codec=codec),
        "shortcut": Split(gray, gray_y, codec=codec, border=gray_y),
    }


def _kept(split: Split, classes: tuple[int, ...], n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of the images of `classes` in `split` (their order kept), labels relabelled to their position in
    `classes`; the first `n` (None: all)."""
    relabel = torch.full((int(split.y.max()) + 1,), -1, dtype=torch.long)
    relabel[torch.tensor(classes)] = torch.arange(len(classes))
    keep = torch.nonzero(relabel[split.y] >= 0).flatten()[:n]
    return split.x[keep], relabel[split.y[keep]]


@dataclass(frozen=True)
class BorderCIFARTask(TaskConfig):
    """CIFAR-10 with a class-coloured border (the NHT shortcut task).

    rho: probability that a training (and `coloured` test) image has its own class's border colour.
    border_width: frame width in pixels of the (down-sampled) image; the book's default is 3 at 32 x 32.
    n_train / n_test: class-balanced subset sizes (None = all); image_size: side after area down-sampling.
    shortcut_per_class: gray images per class in the `shortcut` split (identical copies; 1 is exact).
    classes: the CIFAR-10 classes kept (None: all ten), relabelled 0, 1, ... in the order given (class k of the task
    gets PALETTE[k]); n_train / n_test then count images of the kept classes, balanced over them. Fewer classes is a
    cpu-scale lever: content the model can learn within a short budget (the paper's protocol keeps all ten).
    data_root does not enter the run's identity.
    """

    dataset: str = "cifar10"
    rho: float = 0.95
    border_width: int = 3
    n_train: int | None = 5000
    n_test: int | None = 1000
    image_size: int = 32
    shortcut_per_class: int = 1
    classes: tuple[int, ...] | None = None
    data_root: str | None = not_identity(default=None)

    def validate(self) -> None:
        check_choice("dataset", self.dataset, ("cifar10",))
        if self.classes is not None:
            kept = tuple(self.classes)
            if len(kept) < 2 or len(set(kept)) != len(kept) or not all(0 <= c < N_CLASSES[self.dataset] for c in kept):
                raise ConfigError(f"classes={self.classes!r} must be at least 2 distinct CIFAR-10 classes (0-9)")
        check_range("rho", self.rho, 0.0, 1.0)
        check_range("image_size", self.image_size, 4, 32, integer=True)
        check_range("border_width", self.border_width, 1, (self.image_size - 1) // 2, integer=True)
        for name in ("n_train", "n_test"):
            if getattr(self, name) is not None:
                check_range(name, getattr(self, name), 1, None, integer=True)
        check_range("shortcut_per_class", self.shortcut_per_class, 1, None, integer=True)

    def _all_classes(self, n: int | None) -> int | None:
        """Images of all ten classes, class-balanced, that hold `n` of the kept classes (balanced over them)."""
        if n is None or self.classes is None:
            return n
        return -(-n // len(self.classes)) * N_CLASSES[self.dataset]

    def image_task(self) -> CIFARTask:
        """The CIFARTask whose images get the borders (same image size and data; with `classes`, enough images of
        all ten for the kept ones)."""
        return CIFARTask(dataset=self.dataset, n_train=self._all_classes(self.n_train),
                         n_test=self._all_classes(self.n_test), image_size=self.image_size, data_root=self.data_root)

    def data_fingerprint(self) -> str:
        return self.image_task().data_fingerprint()

    def build(self, seed: int) -> Dataset:
        """The Dataset: the image task's uint8 images, shared by every seed, and this seed's border colours (a
        palette index per image), drawn when a batch is decoded (`border_splits`)."""
        images = self.image_task().build(seed)
        train, test = images.splits["train"], images.splits["test"]
        n_classes = images.n_classes
        if self.classes is not None:  # keep the chosen classes (class-interleaved order kept), relabelled 0, 1, ...
            (train_x, train_y), (test_x, test_y) = (_kept(split, self.classes, n) for split, n in
                                                    ((train, self.n_train), (test, self.n_test)))
            n_classes = len(self.classes)
        else:
            train_x, train_y, test_x, test_y = train.x, train.y, test.x, test.y
        splits = border_splits(train_x, train_y, test_x, test_y, rho=self.rho, width=self.border_width,
                               n_classes=n_classes, seed=seed, shortcut_per_class=self.shortcut_per_class,
                               mean=MEAN[self.dataset], std=STD[self.dataset], image_size=self.image_size)
        return Dataset(splits, n_classes=n_classes, meta={"chance": 1.0 / n_classes,
                                                                 "dataset": self.dataset, "rho": self.rho,
                                                                 "palette": PALETTE.tolist(), "gray": GRAY,
                                                                 "data": images.meta["data"]})
