"""Sophgo TPU (OKKernel) local memory: tensors scattered over NPUs, both directions.

The local memory of X NPUs holds S bytes per NPU; an address A in [0, X*S) means NPU
``Q = A div S`` at offset ``R = A mod S``. Channel c of a tensor that starts at NPU Q lives in NPU
``(Q + c) mod X``, in row ``(Q + c) div X`` of that NPU's channels; a tensor has
``ceil((Q + C) / X)`` channels per NPU. Strides count elements (of the storage type): N stride
from n to n+1, C stride from c to c+X, H stride, W stride.

    lm = LocalMemory(npus=4, npu_bytes=1024)
    t = LocalTensor(lm, address=2 * 1024 + 128, shape=(2, 3, 4, 5), dtype="fp32",
                    layout="aligned")
    image = lm.empty()                    # (X, S) bytes
    t.store(image, tensor)                # scatter an NCHW tensor
    t.load(image)                         # and gather it back

Layouts: "aligned" (128-byte aligned: C stride rounded up to 128 bytes of elements, address
divisible by 128), "compact" (C stride H*W, address divisible by 4), or explicit strides.
Storage modes: "4N" (int8/uint8: four batch elements side by side, a 32-bit element), "2N"
(int16/uint16, two), "2IC" (fp32 weights [I, O, H, W]: two input channels, a 64-bit element);
N (or I) is padded with dummy elements. :func:`matrix_tensor` places an N-by-M matrix as
(N, ceil(M/W), 1, W) in the aligned layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, check_shape

DTYPES = {"int8": "<i1", "uint8": "<u1", "int16": "<i2", "uint16": "<u2", "fp16": "<f2",
          "int32": "<i4", "uint32": "<u4", "fp32": "<f4"}
#: storage mode -> (element types it applies to, elements grouped)
MODES = {"4N": (("int8", "uint8"), 4), "2N": (("int16", "uint16"), 2), "2IC": (("fp32",), 2)}
ALIGN = 128


@dataclass(frozen=True)
class LocalMemory:
    """X NPUs of S bytes each."""

    npus: int = 64
    npu_bytes: int = 256 * 1024

    def __post_init__(self):
        if self.npus < 1:
            raise FormatError("npus", f"must be at least 1, not {self.npus}")
        if self.npu_bytes < 1 or self.npu_bytes % ALIGN:
            raise FormatError("npu_bytes", f"must be a positive multiple of {ALIGN}, not "
                                           f"{self.npu_bytes}")

    @property
    def size(self) -> int:
        return self.npus * self.npu_bytes

    def locate(self, address: int) -> tuple[int, int]:
        """(NPU, offset) of an address: A = Q*S + R."""
        if not 0 <= address < self.size:
            raise FormatError("address", f"{address} is outside [0, {self.size - 1}] "
                                         f"({self.npus} NPUs x {self.npu_bytes} bytes)")
        return divmod(address, self.npu_bytes)

    def address(self, npu: int, offset: int) -> int:
        if not 0 <= npu < self.npus:
            raise FormatError("npu", f"{npu} is outside [0, {self.npus - 1}]")
        if not 0 <= offset < self.npu_bytes:
            raise FormatError("offset", f"{offset} is outside [0, {self.npu_bytes - 1}]")
        return npu * self.npu_bytes + offset

    def channels_per_npu(self, start_npu: int, channels: int) -> int:
        """ceil((Q + C) / X) (okk_channle_num_per_npu)."""
        return -(-(start_npu + channels) // self.npus)

    def empty(self, fill: int = 0) -> np.ndarray:
        """A local memory image: (X, S) bytes."""
        return np.full((self.npus, self.npu_bytes), fill, dtype=np.uint8)


def continuous_strides(shape) -> tuple:
    """System-memory continuous layout: (C*H*W, H*W, W, 1) (okk_continuous_stride)."""
    n, c, h, w = shape
    return (c * h * w, h * w, w, 1)


@dataclass(frozen=True)
class LocalTensor:
    """An NCHW tensor in local memory.

    address  where it starts (NPU address * S + offset).
    shape    (N, C, H, W) of the original elements.
    dtype    one of :data:`DTYPES`.
    layout   "aligned", "compact", or "strided" with ``strides`` (N, C, H, W) given.
    mode     None, "4N", "2N" or "2IC": strides then count storage elements of the grouped
             type and the storage shape has N -> ceil(N / k).
    """

    memory: LocalMemory
    address: int
    shape: tuple
    dtype: str
    layout: str = "aligned"
    strides: tuple | None = None
    mode: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", check_shape(self.shape, "NCHW"))
        if self.dtype not in DTYPES:
            raise FormatError("dtype", f"must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.mode is not None:
            if self.mode not in MODES:
                raise FormatError("mode", f"must be one of {', '.join(MODES)} or None, not "
                                          f"{self.mode!r}")
            kinds, _ = MODES[self.mode]
            if self.dtype not in kinds:
                raise FormatError("mode", f"{self.mode} stores {' or '.join(kinds)}, not "
                                          f"{self.dtype}")
        q, r = self.memory.locate(self.address)
        n, c, h, w = self.storage_shape
        if self.layout == "aligned":
            if self.address % ALIGN:
                raise FormatError("address", f"{self.address} is not divisible by {ALIGN} "
                                             f"(128-byte aligned layout)")
            per = ALIGN // self.storage_bytes
            cs = -(-(h * w) // per) * per
            strides = (cs * self.channels_per_npu, cs, w, 1)
        elif self.layout == "compact":
            if self.address % 4:
                raise FormatError("address", f"{self.address} is not divisible by 4 (compact "
                                             f"layout)")
            strides = (h * w * self.channels_per_npu, h * w, w, 1)
        elif self.layout == "strided":
            if self.strides is None or len(self.strides) != 4:
                raise FormatError("strides", "the strided layout needs (N, C, H, W) strides")
            strides = tuple(int(v) for v in self.strides)
            if min(strides) < 0:
                raise FormatError("strides", f"must not be negative: {strides}")
        else:
            raise FormatError("layout", f"must be aligned, compact or strided, not "
                                        f"{self.layout!r}")
        if self.layout != "strided" and self.strides is not None and \
                tuple(self.strides) != strides:
            raise FormatError("strides", f"{tuple(self.strides)} are not the {self.layout} "
                                         f"layout's {strides}")
        object.__setattr__(self, "strides", strides)
        end = r + self.footprint
        if end > self.memory.npu_bytes:
            raise FormatError("shape", f"the tensor needs {self.footprint} bytes per NPU from "
                                       f"offset {r}; an NPU holds {self.memory.npu_bytes}")

    # geometry -------------------------------------------------------------------------------

    @property
    def element_bytes(self) -> int:
        return np.dtype(DTYPES[self.dtype]).itemsize

    @property
    def group(self) -> int:
        return MODES[self.mode][1] if self.mode else 1

    @property
    def storage_bytes(self) -> int:
        """Bytes of one storage element (4 for int8x4, int16x2; 8 for fp32x2)."""
        return self.element_bytes * self.group

    @property
    def storage_shape(self) -> tuple:
        n, c, h, w = self.shape
        return (-(-n // self.group), c, h, w)

    @property
    def start_npu(self) -> int:
        return self.memory.locate(self.address)[0]

    @property
    def offset(self) -> int:
        return self.memory.locate(self.address)[1]

    @property
    def channels_per_npu(self) -> int:
        return self.memory.channels_per_npu(self.start_npu, self.shape[1])

    @property
    def footprint(self) -> int:
        """Bytes the tensor spans in one NPU, from its offset to its last element's end."""
        n, c, h, w = self.storage_shape
        ns, cs, hs, ws = self.strides
        return ((n - 1) * ns + (self.channels_per_npu - 1) * cs + (h - 1) * hs +
                (w - 1) * ws + 1) * self.storage_bytes

    def locate(self, n, c, h, w):
        """(NPU, byte offset) of element (n, c, h, w) of the original shape; numpy arrays
        broadcast. In a storage mode the offset is of the element's own bytes."""
        n, c, h, w = (np.asarray(v) for v in (n, c, h, w))
        ns, cs, hs, ws = self.strides
        k = self.group
        q = self.start_npu + c
        npu = q % self.memory.npus
        off = (self.offset + ((n // k) * ns + (q // self.memory.npus) * cs + h * hs + w * ws) *
               self.storage_bytes + (n % k) * self.element_bytes)
        return npu, off

    def to_dict(self) -> dict:
        return {"format": "sophgo-local", "npus": self.memory.npus,
                "npu_bytes": self.memory.npu_bytes, "address": self.address,
                "shape": list(self.shape), "dtype": self.dtype, "layout": self.layout,
                "strides": list(self.strides), "mode": self.mode}

    @classmethod
    def from_dict(cls, d: dict) -> LocalTensor:
        return cls(LocalMemory(d["npus"], d["npu_bytes"]), d["address"], tuple(d["shape"]),
                   d["dtype"], d.get("layout", "aligned"),
                   tuple(d["strides"]) if d.get("layout") == "strided" else None, d.get("mode"))

    # the two directions -----------------------------------------------------------------------

    def _views(self, image: np.ndarray):
        """For each NPU row j of channels: (view into the image, channel slice). Each view is
        (storage N, channels in that row, H, W, group) elements of the element type."""
        if image.shape != (self.memory.npus, self.memory.npu_bytes) or image.dtype != np.uint8:
            raise FormatError("image", f"must be uint8 of shape ({self.memory.npus}, "
                                       f"{self.memory.npu_bytes}), not {image.dtype} "
                                       f"{image.shape}")
        X = self.memory.npus
        q = self.start_npu
        n, c, h, w = self.storage_shape
        ns, cs, hs, ws = self.strides
        sb, eb = self.storage_bytes, self.element_bytes
        flat = image.reshape(-1)
        out = []
        for row in range(self.channels_per_npu):
            c0 = max(0, row * X - q)
            c1 = min(c, (row + 1) * X - q)
            if c1 <= c0:
                continue
            npu0 = (q + c0) % X
            base = npu0 * self.memory.npu_bytes + self.offset + row * cs * sb
            view = np.lib.stride_tricks.as_strided(
                flat[base:].view(np.uint8), shape=(n, c1 - c0, h, w, self.group * eb),
                strides=(ns * sb, self.memory.npu_bytes, hs * sb, ws * sb, 1), writeable=True)
            out.append((view, slice(c0, c1)))
        return out

    def _storage(self, tensor: np.ndarray) -> np.ndarray:
        """(storage N, C, H, W, group * element bytes) bytes of a tensor, dummies zero."""
        n, c, h, w = self.shape
        k = self.group
        m = -(-n // k)
        grouped = np.zeros((m * k, c, h, w), dtype=DTYPES[self.dtype])
        grouped[:n] = tensor
        # (M, k, C, H, W) -> (M, C, H, W, k) then bytes
        g = grouped.reshape(m, k, c, h, w).transpose(0, 2, 3, 4, 1)
        return np.ascontiguousarray(g).view(np.uint8).reshape(m, c, h, w, k * self.element_bytes)

    def store(self, image: np.ndarray, tensor) -> None:
        """Scatter an NCHW tensor into a local memory image (in place)."""
        a = np.asarray(tensor)
        if a.shape != self.shape:
            raise FormatError("tensor", f"shape {a.shape} differs from {self.shape}")
        want = np.dtype(DTYPES[self.dtype])
        if a.dtype != want:
            if not np.can_cast(a.dtype, want, "same_kind") or (
                    want.kind in "iu" and a.size and
                    (a.min() < np.iinfo(want).min or a.max() > np.iinfo(want).max)):
                raise FormatError("tensor", f"dtype {a.dtype} does not fit {self.dtype}")
            a = a.astype(want)
        data = self._storage(a)
        for view, cs_ in self._views(image):
            view[...] = data[:, cs_]

    def load(self, image: np.ndarray) -> np.ndarray:
        """Gather the tensor back from a local memory image."""
        n, c, h, w = self.shape
        m = self.storage_shape[0]
        k, eb = self.group, self.element_bytes
        data = np.empty((m, c, h, w, k * eb), dtype=np.uint8)
        for view, cs_ in self._views(image):
            data[:, cs_] = view
        g = data.view(DTYPES[self.dtype]).reshape(m, c, h, w, k).transpose(0, 4, 1, 2, 3)
        return np.ascontiguousarray(g.reshape(m * k, c, h, w)[:n])


def matrix_tensor(memory: LocalMemory, address: int, rows: int, cols: int, width: int,
                  dtype: str) -> LocalTensor:
    """An N-by-M matrix in the matrix layout: the (N, ceil(M/W), 1, W) tensor in the 128-byte
    aligned layout; the last channel holds only M - W*floor(M/W) columns when W does not
    divide M. Store and load it with :func:`matrix_store` / :func:`matrix_load`."""
    if not 1 <= width <= cols:
        raise FormatError("width", f"W must be in [1, M = {cols}], not {width}")
    return LocalTensor(memory, address, (rows, -(-cols // width), 1, width), dtype, "aligned")


def matrix_store(t: LocalTensor, image: np.ndarray, matrix) -> None:
    """Store an N-by-M matrix in the tensor :func:`matrix_tensor` made (columns past M in the
    last channel are written as 0)."""
    a = np.asarray(matrix)
    n, c, _, w = t.shape
    if a.ndim != 2 or a.shape[0] != n or not (c - 1) * w < a.shape[1] <= c * w:
        raise FormatError("matrix", f"shape {a.shape} does not fit the layout's {n} x "
                                    f"{(c - 1) * w + 1}..{c * w}")
    full = np.zeros((n, c * w), dtype=DTYPES[t.dtype])
    full[:, :a.shape[1]] = a
    t.store(image, full.reshape(n, c, 1, w))


def matrix_load(t: LocalTensor, image: np.ndarray, cols: int) -> np.ndarray:
    n, c, _, w = t.shape
    return t.load(image).reshape(n, c * w)[:, :cols]
