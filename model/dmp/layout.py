"""DMP dv-sdk I/O buffers: DWHC / DHWC with 8-channel chunks (dv-sdk's network input/output layout
document), both directions.

The convolution block stores a (D, C, H, W) tensor (D = depth, N of an NCHW array) as DWHC, or
DHWC when the network was converted with ``transpose_weight``. Channels come in chunks of at
most 8; chunk k starts at ``k * W * H * 8`` elements and holds ``C_`` channels (8, or ``C mod 8``
for the last). dv-sdk's offset, in elements::

    DWHC: chunk * (W*H*8) + x * (H*C_) + y * C_ + n_
    DHWC: chunk * (W*H*8) + y * (W*C_) + x * C_ + n_

With C <= 8 this is dv-sdk's plain DWHC/DHWC formula. The document gives depth only for the plain
case (``d * W*H*C`` in front); the project keeps that term for chunked buffers too, so each depth
slice is chunked on its own. Network inputs are fp16; the network output is float32 DWHC
(``DmpLayout.network_output``), which the document describes without chunks. Fully connected blocks
read and write flat 1-D buffers, which is the 1x1xC case of the same formula.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, check_shape
from ..parallel import run

CHUNK = 8
DTYPES = {"fp16": np.dtype("<f2"), "fp32": np.dtype("<f4")}


@dataclass(frozen=True)
class DmpLayout:
    """shape (D, C, H, W) (or (C, H, W)); transpose=True for DHWC; dtype fp16 or fp32;
    chunked=False for the plain layout whatever C is (the network output)."""

    shape: tuple
    transpose: bool = False
    dtype: str = "fp16"
    chunked: bool = True

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape, "DCHW",
                                                      leading_optional=True))
        if self.dtype not in DTYPES:
            raise FormatError("dtype", f"must be fp16 or fp32, not {self.dtype!r}")
        for name in ("transpose", "chunked"):
            if not isinstance(getattr(self, name), bool):
                raise FormatError(name, f"must be true or false, not {getattr(self, name)!r}")

    @classmethod
    def network_output(cls, shape) -> DmpLayout:
        return cls(shape, False, "fp32", chunked=False)

    @property
    def element_bytes(self) -> int:
        return DTYPES[self.dtype].itemsize

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) * self.element_bytes

    def _chunks(self):
        c = self.shape[1]
        step = CHUNK if self.chunked else c
        return [(c0, min(c0 + step, c)) for c0 in range(0, c, step)]

    def offset(self, d, c, h, w):
        """Byte offset of element (d, c, h, w): dv-sdk's formula (numpy arrays broadcast)."""
        D, C, H, W = self.shape
        d, c, h, w = (np.asarray(v) for v in (d, c, h, w))
        step = CHUNK if self.chunked else C
        chunk, c_ = c // step, c % step
        c_size = np.where(chunk < C // step, step, C % step)
        inner = np.where(self.transpose, h * (W * c_size) + w * c_size,
                         w * (H * c_size) + h * c_size)
        return (d * (W * H * C) + chunk * (W * H * step) + inner + c_) * self.element_bytes

    def to_dict(self) -> dict:
        return {"format": "dmp", "shape": list(self.shape), "transpose": self.transpose,
                "dtype": self.dtype, "chunked": self.chunked}

    @classmethod
    def from_dict(cls, d: dict) -> DmpLayout:
        return cls(tuple(d["shape"]), d.get("transpose", False), d.get("dtype", "fp16"),
                   d.get("chunked", True))

    def _check(self, tensor):
        """The tensor as (D, C, H, W), and a function converting one (H, W) plane of it to the
        layout's element type."""
        a = np.asarray(tensor)
        if a.ndim == 3:
            a = a[None]
        if a.shape != self.shape:
            raise FormatError("tensor", f"shape {np.asarray(tensor).shape} differs from "
                                        f"(D, C, H, W) = {self.shape}")
        if a.dtype.kind not in "fiu":
            raise FormatError("tensor", f"dtype {a.dtype} is not numeric")
        want = DTYPES[self.dtype]
        if a.dtype == want:
            return a, np.ascontiguousarray
        with np.errstate(over="ignore", invalid="ignore"):
            if want == np.float16 and a.dtype.itemsize >= 2 and \
                    np.abs(a[np.isfinite(a)]).max(initial=0) > 65504:
                raise FormatError("tensor", f"values beyond {self.dtype}'s range")
        if a.dtype.kind in "iu" and a.dtype.itemsize <= 2:
            return a, _lookup(a.dtype, want, self.shape[3])
        return a, lambda plane: plane.astype(want)

    def _tasks(self):
        D = self.shape[0]
        return [(d, c0, c1) for d in range(D) for c0, c1 in self._chunks()]

    def _blocks(self, buf, d, c0, c1):
        """Chunk (d, c0:c1) of a flat buffer as (H, W, n) for DHWC, (W, H, n) for DWHC."""
        D, C, H, W = self.shape
        start = d * W * H * C + c0 * W * H
        blk = buf[start:start + W * H * (c1 - c0)]
        return blk.reshape((H, W, c1 - c0) if self.transpose else (W, H, c1 - c0))

    def pack(self, tensor) -> np.ndarray:
        a, convert = self._check(tensor)
        D, C, H, W = self.shape
        out = np.empty(D * C * H * W, dtype=DTYPES[self.dtype])

        def copy(d, c0, c1):
            dst = self._blocks(out, d, c0, c1)
            # channels are interleaved one (H, W) plane at a time: long contiguous reads and a
            # write at the chunk's stride beat a 3-D transpose whose inner loop is 8 channels.
            # DWHC then swaps H and W with whole chunk pixels (2n-byte records) as the unit.
            hwn = dst if self.transpose else np.empty((H, W, c1 - c0), dtype=out.dtype)
            for k in range(c1 - c0):
                hwn[..., k] = convert(a[d, c0 + k])
            if not self.transpose:
                _records(dst)[...] = _records(hwn).T

        run(copy, self._tasks())
        return out.view(np.uint8)

    def unpack(self, image) -> np.ndarray:
        buf = np.frombuffer(image, dtype=np.uint8) if isinstance(image, (bytes, bytearray)) \
            else np.asarray(image).view(np.uint8).ravel()
        if buf.size < self.size:
            raise FormatError("image", f"{buf.size} bytes, the layout needs {self.size}")
        src = buf[:self.size].view(DTYPES[self.dtype])
        D, C, H, W = self.shape
        out = np.empty(self.shape, dtype=DTYPES[self.dtype])

        def copy(d, c0, c1):
            blk = self._blocks(src, d, c0, c1)
            if not self.transpose:                  # the reverse of pack's record transpose
                hwn = np.empty((H, W, c1 - c0), dtype=src.dtype)
                _records(hwn)[...] = _records(blk).T
                blk = hwn
            for k in range(c1 - c0):
                out[d, c0 + k] = blk[..., k]

        run(copy, self._tasks())
        return out


def _records(a: np.ndarray) -> np.ndarray:
    """A C-contiguous (X, Y, n) array as an (X, Y) array of n-element records."""
    return a.view(np.dtype((np.void, a.shape[2] * a.itemsize))).reshape(a.shape[:2])


def _lookup(src: np.dtype, want: np.dtype, width: int):
    """Conversion of small integers to ``want`` by table lookup, one (H, W) plane at a time.

    numpy's integer -> fp16 cast is a software loop; a table in cache is several times faster,
    and faster still typed as raw unsigned bits (numpy's take is slower on float16). Indexing
    by the value's unsigned view needs no index arithmetic. For 1-byte values and an even
    width, a 65,536-entry table converts two neighbours per lookup (measured 3x faster than
    one fp16 lookup per element)."""
    unsigned = np.dtype(f"u{src.itemsize}")
    bits = np.dtype(f"u{want.itemsize}")
    with np.errstate(over="ignore"):        # uint16 beyond 65504: refused before any lookup
        table = np.arange(1 << (8 * src.itemsize), dtype=np.uint32).astype(unsigned).view(src) \
            .astype(want).view(bits)
    if src.itemsize == 1 and width % 2 == 0 and want.itemsize <= 2:
        pair = np.dtype(f"u{2 * want.itemsize}")
        idx = np.arange(1 << 16)
        shift = 8 * want.itemsize
        table = table[idx & 0xFF].astype(pair) | (table[idx >> 8].astype(pair) << shift)
        unsigned = np.dtype("<u2")

    def convert(plane):
        return np.take(table, np.ascontiguousarray(plane).view(unsigned)).view(want)
    return convert
