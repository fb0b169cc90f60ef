"""DMP dv-sdk I/O buffers: DWHC / DHWC with 8-channel chunks (seed 004), both directions.

The convolution block stores a (D, C, H, W) tensor (D = depth, N of an NCHW array) as DWHC, or
DHWC when the network was converted with ``transpose_weight``. Channels come in chunks of at
most 8; chunk k starts at ``k * W * H * 8`` elements and holds ``C_`` channels (8, or ``C mod 8``
for the last). The seed's offset, in elements::

    DWHC: chunk * (W*H*8) + x * (H*C_) + y * C_ + n_
    DHWC: chunk * (W*H*8) + y * (W*C_) + x * C_ + n_

With C <= 8 this is the seed's plain DWHC/DHWC formula. The seed gives depth only for the plain
case (``d * W*H*C`` in front); the project keeps that term for chunked buffers too, so each depth
slice is chunked on its own. Network inputs are fp16; the network output is float32 DWHC
(``DmpLayout.network_output``), which the seed describes without chunks. Fully connected blocks
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
        """Byte offset of element (d, c, h, w): the seed's formula (numpy arrays broadcast)."""
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
        if a.dtype.kind in "iu" and a.dtype.itemsize <= 2:
            # small integers: look the value up, one plane at a time (numpy's integer -> fp16
            # cast is a software loop; a table in cache is several times faster)
            # the table is indexed by the raw bits (the value's unsigned view), so no index
            # arithmetic is needed
            unsigned = np.dtype(f"u{a.dtype.itemsize}")
            table = np.arange(1 << (8 * a.dtype.itemsize), dtype=np.uint32).astype(unsigned) \
                .view(a.dtype).astype(want)

            def convert(plane):
                return np.take(table, plane.view(unsigned))
            return a, convert
        with np.errstate(over="ignore", invalid="ignore"):
            if want == np.float16 and np.abs(a[np.isfinite(a)]).max(initial=0) > 65504:
                raise FormatError("tensor", f"values beyond {self.dtype}'s range")
        return a, lambda plane: plane.astype(want)

    def _tasks(self):
        D = self.shape[0]
        return [(d, c0, c1) for d in range(D) for c0, c1 in self._chunks()]

    def pack(self, tensor) -> np.ndarray:
        a, convert = self._check(tensor)
        D, C, H, W = self.shape
        out = np.empty(D * C * H * W, dtype=DTYPES[self.dtype])

        def copy(d, c0, c1):
            start = d * W * H * C + c0 * W * H
            dst = out[start:start + W * H * (c1 - c0)]
            dst = dst.reshape((H, W, c1 - c0) if self.transpose else (W, H, c1 - c0))
            # one channel plane at a time: long inner loops beat a 3-D transpose whose inner
            # loop is the chunk's 8 channels (measured 4x). DWHC converts the transposed
            # plane, so the result comes out W-major and contiguous and the strided write is
            # the only strided access.
            for k in range(c1 - c0):
                dst[..., k] = convert(a[d, c0 + k] if self.transpose else a[d, c0 + k].T)

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
            start = d * W * H * C + c0 * W * H
            blk = src[start:start + W * H * (c1 - c0)]
            blk = blk.reshape((H, W, c1 - c0) if self.transpose else (W, H, c1 - c0))
            for k in range(c1 - c0):
                plane = np.ascontiguousarray(blk[..., k])      # the one strided access
                out[d, c0 + k] = plane if self.transpose else plane.T

        run(copy, self._tasks())
        return out
