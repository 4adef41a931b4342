"""How stored images become the model's float input, batch by batch, on whatever device the batch is on.

Image tasks keep their pixels resident as uint8 (N, C, H, W): a quarter of float32, and one copy serves every
member of a batch (`nhtlib.data.stack_members`). An `ImageCodec` says how a batch of them is decoded when it is
used (`ImageCodec.decode`), in this order:

1. pixels / 255 (floating-point pixels are taken as already on the [0, 1] scale and used as they are);
2. area down-sampling to ``image_size`` x ``image_size`` when the stored side differs;
3. optionally a frame of ``border_width`` pixels along the four edges in a palette colour, one palette index per
   image (the coloured-border shortcut, `nhtlib.data.coloured_borders`);
4. per-channel standardisation (x - mean) / std.

These are the steps, in the order, of the float tensors the image tasks built on the CPU before (whole splits at
once), so the decoded floats are those tensors (up to float32 rounding). `standardise` is the one standardisation
of the book (its inverse shows images on the page).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def border_mask(size: int, width: int, device=None) -> torch.Tensor:
    """(size, size) bool mask of the frame of `width` pixels along the four edges."""
    idx = torch.arange(size, device=device)
    edge = (idx < width) | (idx >= size - width)
    return edge[:, None] | edge[None, :]


def draw_border(images: torch.Tensor, colours: torch.Tensor, width: int) -> torch.Tensor:
    """images (N, 3, H, W) in [0, 1], colours (N, 3) -> a copy with the frame pixels set to each image's colour."""
    mask = border_mask(images.shape[-1], width, images.device)
    return torch.where(mask, colours[:, :, None, None].to(images.dtype), images)


def standardise(images: torch.Tensor, mean, std, inverse: bool = False) -> torch.Tensor:
    """(x - mean) / std per channel of images (N, C, H, W); inverse=True maps standardised images back to [0, 1]
    (for display). mean, std: per-channel sequences or tensors on the [0, 1] pixel scale."""
    m = _float32(mean).to(images.device, images.dtype).view(1, -1, 1, 1)
    s = _float32(std).to(images.device, images.dtype).view(1, -1, 1, 1)
    return images * s + m if inverse else (images - m) / s


def _float32(values) -> torch.Tensor:
    return values.to(torch.float32) if isinstance(values, torch.Tensor) else torch.tensor(values, dtype=torch.float32)


@dataclass(frozen=True, eq=False)  # eq=False: tensor fields have no truth value; compare with `matches`
class ImageCodec:
    """Decoding of stored images (N, C, H, W) into standardised float32 model inputs.

    mean, std: per-channel statistics (C,) on the [0, 1] pixel scale (sequences are turned into float32 tensors).
    image_size: side S of the decoded images (area down-sampling when the stored side differs; None: as stored).
    palette: (n_colours, C) border colours in [0, 1] and border_width: the frame's width in pixels of the decoded
    image, used for the images that come with a palette index (`decode`'s ``border``); None / 0: no borders.
    """

    mean: torch.Tensor
    std: torch.Tensor
    image_size: int | None = None
    palette: torch.Tensor | None = None
    border_width: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _float32(self.mean))
        object.__setattr__(self, "std", _float32(self.std))
        if self.palette is not None:
            object.__setattr__(self, "palette", _float32(self.palette))
        if self.mean.shape != self.std.shape or self.mean.dim() != 1:
            raise ValueError(f"mean and std need one value per channel; got {tuple(self.mean.shape)} and "
                             f"{tuple(self.std.shape)}")
        if (self.palette is None) != (self.border_width == 0):
            raise ValueError(f"a border needs both a palette and a border_width > 0; got palette "
                             f"{'None' if self.palette is None else tuple(self.palette.shape)}, "
                             f"border_width={self.border_width}")
        if self.palette is not None and (self.palette.dim() != 2 or self.palette.shape[1] != len(self.mean)):
            raise ValueError(f"palette must be (n_colours, {len(self.mean)}); got {tuple(self.palette.shape)}")

    @property
    def channels(self) -> int:
        return len(self.mean)

    @property
    def draws_borders(self) -> bool:
        return self.palette is not None

    def tensors(self) -> list[torch.Tensor]:
        """The tensors the codec holds (for moving and counting resident bytes)."""
        return [t for t in (self.mean, self.std, self.palette) if t is not None]

    def to(self, device) -> "ImageCodec":
        """The same codec with its tensors on `device`."""
        return ImageCodec(self.mean.to(device), self.std.to(device), self.image_size,
                          None if self.palette is None else self.palette.to(device), self.border_width)

    def matches(self, other: "ImageCodec | None") -> bool:
        """Whether `other` decodes exactly like this codec (same sizes and statistics, compared on the CPU)."""
        if not isinstance(other, ImageCodec):
            return False
        if (self.image_size, self.border_width) != (other.image_size, other.border_width):
            return False
        pairs = [(self.mean, other.mean), (self.std, other.std)]
        if (self.palette is None) != (other.palette is None):
            return False
        if self.palette is not None:
            pairs.append((self.palette, other.palette))
        return all(a.shape == b.shape and torch.equal(a.cpu(), b.cpu()) for a, b in pairs)

    def output_shape(self, stored: tuple[int, ...]) -> tuple[int, int, int]:
        """The decoded shape (C, S, S) of one stored image of shape (C, H, W)."""
        c, h, w = stored[-3:]
        return (c, h, w) if self.image_size is None else (c, self.image_size, self.image_size)

    def decode(self, pixels: torch.Tensor, border: torch.Tensor | None = None) -> torch.Tensor:
        """Model inputs from stored images, on the images' device.

        pixels: uint8 (..., C, H, W) (0..255), or floating point on the [0, 1] scale; any leading shape (a batch
        (B,), per member (K, B)). border: integer (...) palette index of each image's frame, with pixels' leading
        shape (None: no frame). Returns float32 (..., C, S, S), standardised.
        """
        if pixels.dim() < 3 or pixels.shape[-3] != self.channels:
            raise ValueError(f"pixels must be (..., {self.channels}, H, W); got {tuple(pixels.shape)}")
        lead = pixels.shape[:-3]
        out = pixels.reshape(-1, *pixels.shape[-3:])
        out = out if out.is_floating_point() else out.float() / 255.0
        if self.image_size is not None and self.image_size != out.shape[-1]:
            out = torch.nn.functional.interpolate(out, size=(self.image_size, self.image_size), mode="area")
        if border is not None:
            if not self.draws_borders:
                raise ValueError("border indices given to a codec without a palette")
            if border.shape != lead:
                raise ValueError(f"border indices {tuple(border.shape)} do not match the images' {tuple(lead)}")
            colours = self.palette.to(out.device)[border.reshape(-1).to(out.device, torch.int64)]
            out = draw_border(out, colours, self.border_width)
        out = standardise(out, self.mean, self.std)
        return out.reshape(*lead, *out.shape[1:])
