"""NVDLA pixel formats: pitch-linear ROI images (one or two planes) <-> channel samples.

NVDLA's data format guide lists 36 formats, T_R8 through T_Y16___V16U16_N444, with their plane
count, channel count, valid input precision and valid X offset range. What that guide leaves out,
and where the project's rule comes from (NVDLA's CDMA pixel-format parser,
``NV_NVDLA_CDMA_IMG_ctrl``):

- **Names** list a plane's pixel word from its most significant field down, and the word is
  little-endian in memory: T_A8B8G8R8 is the bytes R, G, B, A; T_A2B10G10R10 has R in bits 9:0
  and A in bits 31:30; in T_Y8___U8V8_N444 the second plane's word has V in its low byte.
- **Channel order** of the decoded cube is R, G, B, A (Y, U, V, A for YUV; X takes A's place):
  the parser gives T_A8B8G8R8 the identity order and reorders every other layout to it.
- **T_R10 and T_R12** are decoded exactly like T_R16 (the parser puts them in one case): the
  sample is the whole 16-bit word, wherever the 10 or 12 bits sit; so are the 10- and 12-bit
  two-plane formats. Only the four ``*10*10*10*2`` formats have bit fields.
- **Unsigned to signed**: with ``sign="unsigned"`` (PIXEL_SIGN_OVERRIDE = UNSIGNED_INT, the
  reset value) a field is zero-extended, with ``"signed"`` it is sign-extended from its own
  width; either way the sample then fits the DMA's 17-bit signed path. T_R16_I has a precision
  code of its own in the parser: it is always read as signed. The ``_F`` formats hold fp16
  samples, returned as float16.
- **X offset** (PIXEL_X_OFFSET) counts pixels from the 32-byte aligned start of each line to
  the first ROI pixel; its range is 32 / bytes-per-pixel of the first plane, minus one. The
  second plane uses ``x_offset mod (32 / its bytes per pixel)``, as the parser masks it.
- Start addresses and line strides are 32-byte aligned (the guide's mandatory rule).

Samples are ``(C, H, W)`` arrays like the rest of the model: int32 for integer formats, float16
for the ``_F`` ones. The guide's conversion to int8/int16/fp16 is :func:`model.nvdla.precision.
convert`, with a per-channel offset of shape ``(C, 1, 1)`` for the four MEAN registers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, check_shape

ALIGN = 32
#: canonical channel of each component letter
_CHANNEL = {"R": 0, "Y": 0, "G": 1, "U": 1, "B": 2, "V": 2, "A": 3, "X": 3}

#: (name, input precision) in the order of the PIXEL_FORMAT register codes 0x00 - 0x23
_TABLE = (
    ("T_R8", "int8"), ("T_R10", "int16"), ("T_R12", "int16"), ("T_R16", "int16"),
    ("T_R16_I", "int16"), ("T_R16_F", "int16"),
    ("T_A16B16G16R16", "int16"), ("T_X16B16G16R16", "int16"), ("T_A16B16G16R16_F", "fp16"),
    ("T_A16Y16U16V16", "int16"), ("T_V16U16Y16A16", "int16"), ("T_A16Y16U16V16_F", "fp16"),
    ("T_A8B8G8R8", "int8"), ("T_A8R8G8B8", "int8"), ("T_B8G8R8A8", "int8"),
    ("T_R8G8B8A8", "int8"), ("T_X8B8G8R8", "int8"), ("T_X8R8G8B8", "int8"),
    ("T_B8G8R8X8", "int8"), ("T_R8G8B8X8", "int8"),
    ("T_A2B10G10R10", "int16"), ("T_A2R10G10B10", "int16"), ("T_B10G10R10A2", "int16"),
    ("T_R10G10B10A2", "int16"), ("T_A2Y10U10V10", "int16"), ("T_V10U10Y10A2", "int16"),
    ("T_A8Y8U8V8", "int8"), ("T_V8U8Y8A8", "int8"),
    ("T_Y8___U8V8_N444", "int8"), ("T_Y8___V8U8_N444", "int8"),
    ("T_Y10___U10V10_N444", "int16"), ("T_Y10___V10U10_N444", "int16"),
    ("T_Y12___U12V12_N444", "int16"), ("T_Y12___V12U12_N444", "int16"),
    ("T_Y16___U16V16_N444", "int16"), ("T_Y16___V16U16_N444", "int16"),
)


@dataclass(frozen=True)
class PixelFormat:
    """One row of the guide's pixel format table. ``fields[c]`` is ``(plane, bit offset, width)`` of
    channel ``c`` inside its plane's little-endian pixel word; ``plane_bytes[p]`` the bytes per
    pixel of plane ``p``."""

    name: str
    code: int
    precision: str
    plane_bytes: tuple[int, ...]
    fields: tuple[tuple[int, int, int], ...]
    kind: str                   # "uint" (sign per PIXEL_SIGN_OVERRIDE), "int" or "float"

    @property
    def planes(self) -> int:
        return len(self.plane_bytes)

    @property
    def channels(self) -> int:
        return len(self.fields)

    @property
    def x_offset_max(self) -> int:
        return ALIGN // self.plane_bytes[0] - 1

    @classmethod
    def parse(cls, name: str, code: int, precision: str) -> PixelFormat:
        body = re.sub(r"_(F|I|N444)$", "", name[2:])
        kind = {"_F": "float", "_I": "int"}.get(name[-2:], "uint")
        fields: dict[int, tuple[int, int, int]] = {}
        plane_bytes = []
        for p, plane in enumerate(body.split("___")):
            parts = [(letter, int(w)) for letter, w in re.findall(r"([RGBAXYUV])(\d+)", plane)]
            packed = any(w == 2 for _, w in parts)      # the 10:10:10:2 words have bit fields
            bits = 0
            for letter, width in reversed(parts):       # named from the top field down
                # elsewhere a 10- or 12-bit sample is read as its whole 16-bit container
                size = width if packed else (8 if width <= 8 else 16)
                fields[_CHANNEL[letter]] = (p, bits, size)
                bits += size
            plane_bytes.append(bits // 8)
        order = tuple(fields[c] for c in sorted(fields))
        return cls(name, code, precision, tuple(plane_bytes), order, kind)


FORMATS: dict[str, PixelFormat] = {
    name: PixelFormat.parse(name, code, prec) for code, (name, prec) in enumerate(_TABLE)}


def pixel_format(name: str | int) -> PixelFormat:
    """The format called ``name`` (with or without ``T_``), or with register code ``name``."""
    if isinstance(name, (int, np.integer)):
        if not 0 <= name < len(_TABLE):
            raise FormatError("pixel_format", f"register code 0x{int(name):x} is not a pixel "
                                              f"format (0x00 - 0x{len(_TABLE) - 1:02x})")
        return FORMATS[_TABLE[name][0]]
    key = name if name.startswith("T_") else f"T_{name}"
    if key not in FORMATS:
        raise FormatError("pixel_format", f"{name!r} is not in the pixel format table of "
                                          f"NVDLA's data format guide")
    return FORMATS[key]


_WORD = {1: np.uint8, 2: "<u2", 4: "<u4", 8: "<u8"}


@dataclass(frozen=True)
class PixelImage:
    """A W x H region of interest in a pitch-linear image of format ``format``.

    x_offset      pixels between the 32-byte aligned line start and the ROI (PIXEL_X_OFFSET).
    line_stride   bytes per line of plane 0 (default: the ROI line rounded up to 32).
    uv_line_stride  bytes per line of plane 1 (two-plane formats; default likewise).
    sign          "unsigned" or "signed" (PIXEL_SIGN_OVERRIDE).
    precision     the IN_PRECISION setting; must be the one the guide's table allows.
    fill          byte written outside the ROI by :meth:`pack`.
    """

    format: PixelFormat | str
    width: int
    height: int
    x_offset: int = 0
    line_stride: int | None = None
    uv_line_stride: int | None = None
    sign: str = "unsigned"
    precision: str | None = None
    fill: int = 0

    def __post_init__(self):
        fmt = self.format if isinstance(self.format, PixelFormat) else pixel_format(self.format)
        object.__setattr__(self, "format", fmt)
        check_shape((self.height, self.width), "HW")
        if self.sign not in ("unsigned", "signed"):
            raise FormatError("sign", f"must be 'unsigned' or 'signed', not {self.sign!r}")
        if self.precision is not None and self.precision != fmt.precision:
            raise FormatError("precision", f"{fmt.name} takes {fmt.precision} input, not "
                                           f"{self.precision} (the pixel format table of "
                                           f"NVDLA's data format guide)")
        if not 0 <= self.x_offset <= fmt.x_offset_max:
            raise FormatError("x_offset", f"{fmt.name} allows 0 to {fmt.x_offset_max} pixels, "
                                          f"not {self.x_offset}")
        if not 0 <= self.fill <= 255:
            raise FormatError("fill", f"is a byte, 0 to 255, not {self.fill}")
        strides = []
        for p, given in enumerate((self.line_stride, self.uv_line_stride)[:fmt.planes]):
            need = (self.plane_x_offset(p) + self.width) * fmt.plane_bytes[p]
            name = ("line_stride", "uv_line_stride")[p]
            if given is None:
                given = -(-need // ALIGN) * ALIGN
            elif given % ALIGN:
                raise FormatError(name, f"must be a multiple of {ALIGN} bytes, not {given}")
            elif given < need:
                raise FormatError(name, f"{given} bytes cannot hold x_offset + width = "
                                        f"{need} bytes of plane {p}")
            strides.append(given)
        if fmt.planes == 1 and self.uv_line_stride is not None:
            raise FormatError("uv_line_stride", f"{fmt.name} has one plane")
        object.__setattr__(self, "line_stride", strides[0])
        object.__setattr__(self, "uv_line_stride", strides[1] if fmt.planes == 2 else None)

    # -- geometry -----------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.format.channels, self.height, self.width)

    def plane_x_offset(self, plane: int) -> int:
        return self.x_offset % (ALIGN // self.format.plane_bytes[plane])

    def plane_stride(self, plane: int) -> int:
        return (self.line_stride, self.uv_line_stride)[plane]

    def plane_size(self, plane: int) -> int:
        return self.plane_stride(plane) * self.height

    @property
    def plane_offsets(self) -> tuple[int, ...]:
        """Where each plane starts in :meth:`pack`'s image (plane 1 right after plane 0)."""
        return (0, self.plane_size(0))[:self.format.planes]

    @property
    def size(self) -> int:
        return sum(self.plane_size(p) for p in range(self.format.planes))

    # -- decode / encode ----------------------------------------------------------------------

    def _words(self, buf: np.ndarray, plane: int) -> np.ndarray:
        """(H, W) pixel words of one plane: a strided view of the ROI bytes, then one copy."""
        bpp, stride = self.format.plane_bytes[plane], self.plane_stride(plane)
        start = self.plane_x_offset(plane) * bpp
        rows = np.lib.stride_tricks.as_strided(
            buf[start:], shape=(self.height, self.width * bpp), strides=(stride, 1),
            writeable=False)
        return np.ascontiguousarray(rows).view(_WORD[bpp])

    def decode(self, *planes) -> np.ndarray:
        """Samples ``(C, H, W)`` from the planes' bytes (each from its line 0, 32-aligned)."""
        fmt = self.format
        if len(planes) != fmt.planes:
            raise FormatError("planes", f"{fmt.name} has {fmt.planes} plane"
                                        f"{'s' if fmt.planes > 1 else ''}, not {len(planes)}")
        words = []
        for p, buf in enumerate(planes):
            b = np.asarray(buf)
            if b.dtype != np.uint8 or b.ndim != 1:
                raise FormatError(f"planes[{p}]", f"must be a 1-D uint8 array, not {b.dtype} "
                                                  f"of rank {b.ndim}")
            need = (self.plane_stride(p) * (self.height - 1)
                    + (self.plane_x_offset(p) + self.width) * fmt.plane_bytes[p])
            if b.size < need:
                raise FormatError(f"planes[{p}]", f"{b.size} bytes, the ROI needs {need}")
            words.append(self._words(b, p))
        out = np.empty(self.shape, dtype=np.float16 if fmt.kind == "float" else np.int32)
        for c, (p, off, width) in enumerate(fmt.fields):
            w = words[p]
            v = (w >> w.dtype.type(off)) & w.dtype.type((1 << width) - 1)
            if fmt.kind == "float":
                out[c] = v.astype(np.uint16).view(np.float16)
                continue
            v = v.astype(np.int32)
            if fmt.kind == "int" or self.sign == "signed":
                v -= (v >> (width - 1) & 1) << width
            out[c] = v
        return out

    def encode(self, samples) -> tuple[np.ndarray, ...]:
        """The planes' bytes for samples ``(C, H, W)``; bytes outside the ROI are ``fill``."""
        fmt = self.format
        s = np.asarray(samples)
        if s.shape != self.shape:
            raise FormatError("samples", f"{fmt.name} needs shape {self.shape} (C, H, W), not "
                                         f"{s.shape}")
        if fmt.kind == "float":
            if s.dtype != np.float16:
                raise FormatError("samples", f"{fmt.name} samples are float16, not {s.dtype}")
        elif s.dtype.kind not in "iu":
            raise FormatError("samples", f"{fmt.name} samples are integers, not {s.dtype}")
        signed = fmt.kind == "int" or self.sign == "signed"
        words = [np.zeros((self.height, self.width), dtype=_WORD[b]) for b in fmt.plane_bytes]
        for c, (p, off, width) in enumerate(fmt.fields):
            w = words[p]
            if fmt.kind == "float":
                bits = s[c].view(np.uint16).astype(w.dtype)
            else:
                v = s[c].astype(np.int64)
                lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed \
                    else (0, (1 << width) - 1)
                bad = (v < lo) | (v > hi)
                if bad.any():
                    y, x = np.argwhere(bad)[0]
                    raise FormatError(f"samples[{c}]", f"{'signed' if signed else 'unsigned'} "
                                      f"{width}-bit field holds {lo} to {hi}, not "
                                      f"{int(v[y, x])} (at y {y}, x {x})")
                bits = (v & ((1 << width) - 1)).astype(w.dtype)
            w |= bits << w.dtype.type(off) if off else bits
        out = []
        for p, w in enumerate(words):
            buf = np.full(self.plane_size(p), self.fill, dtype=np.uint8)
            bpp, stride = fmt.plane_bytes[p], self.plane_stride(p)
            start = self.plane_x_offset(p) * bpp
            rows = buf.reshape(self.height, stride)
            rows[:, start:start + self.width * bpp] = w.view(np.uint8).reshape(self.height, -1)
            out.append(buf)
        return tuple(out)

    # -- one-buffer form, for the CLI and the DMA model ---------------------------------------

    def pack(self, samples) -> np.ndarray:
        """:meth:`encode` with the planes concatenated (plane 1 at ``plane_offsets[1]``)."""
        return np.concatenate(self.encode(samples))

    def unpack(self, image) -> np.ndarray:
        b = np.asarray(image)
        if b.dtype != np.uint8 or b.ndim != 1 or b.size != self.size:
            raise FormatError("image", f"must be {self.size} uint8 bytes (the planes at "
                                       f"{self.plane_offsets}), not {b.dtype} {b.shape}")
        ends = [*self.plane_offsets[1:], None]
        return self.decode(*(b[o:e] for o, e in zip(self.plane_offsets, ends, strict=True)))

    def to_dict(self) -> dict:
        return {"format": "nvdla-pixel", "pixel_format": self.format.name,
                "width": self.width, "height": self.height, "x_offset": self.x_offset,
                "line_stride": self.line_stride, "uv_line_stride": self.uv_line_stride,
                "sign": self.sign, "fill": self.fill, "plane_offsets": list(self.plane_offsets)}

    @classmethod
    def from_dict(cls, d: dict) -> PixelImage:
        return cls(d["pixel_format"], d["width"], d["height"], d["x_offset"], d["line_stride"],
                   d["uv_line_stride"], d["sign"], None, d["fill"])
