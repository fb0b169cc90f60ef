"""NVDLA feature data: W x H x C cubes (and batches of them) in memory, both directions.

NVDLA data format guide's "Feature Data Format" section: channels are padded to a whole atom
(any fill but NaN for fp16); the cube is cut into 1x1xatom atoms stored C' -> W -> H -> C
(surfaces), with the atoms of a line packed, and lines and surfaces starting on atom boundaries
at the line stride and surface stride. With the strides at their minimum (``W*atom`` and
``H*line_stride``) the data is *packed*, otherwise *unpacked*. A batch of cubes follows at the
cube stride. The atom is the configuration's memory atom: 32 bytes on nv_full and nv_large (the
guide's figure), 16 on nv_medium_512, 8 on nv_small (``model.nvdla.config``).

    fmt = FeatureFormat("int8", (2, 40, 3, 5))          # (N, C, H, W): strides packed
    small = FeatureFormat("int8", (1, 40, 3, 5), config="nv_small")   # 8-byte atoms
    image = fmt.pack(tensor)                             # uint8, fmt.size bytes
    back = fmt.unpack(image)                             # == tensor
    fmt.address(n, c, h, w)                              # byte offset of one element

Tensors are NCHW (or CHW for one cube), of the precision's element type. Bytes the layout does
not define (gaps between lines, surfaces and cubes) are written as ``gap`` (default 0); channel
padding is written as ``fill``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, check_shape
from ..parallel import run
from .config import NvdlaConfig
from .config import config as _config
from .weights import PRECISIONS, _convert

BLOCK_BYTES = 1 << 18   #: source bytes per copy task (measured best of 64 KiB to 2 MiB)


@dataclass(frozen=True)
class FeatureFormat:
    """A feature data cube (or batch) in memory.

    precision       "int8", "int16" or "fp16".
    shape           (N, C, H, W), or (C, H, W) for one cube (N = 1).
    line_stride     bytes from one line to the next (default W * atom: packed).
    surface_stride  bytes from one atom-deep channel surface to the next (default H *
                    line_stride).
    cube_stride     bytes from one cube of the batch to the next (default surfaces *
                    surface_stride).
    fill            value written in the padding channels (default 0; never NaN for fp16).
    config          the NVDLA configuration (a name or an ``NvdlaConfig``; default nv_full):
                    its memory atom, its precisions, and whether it has batch mode (N > 1).
    """

    precision: str
    shape: tuple
    line_stride: int | None = None
    surface_stride: int | None = None
    cube_stride: int | None = None
    fill: float = 0
    config: NvdlaConfig | str | None = None

    def __post_init__(self):
        cfg = _config(self.config)
        object.__setattr__(self, "config", cfg)
        if self.precision not in PRECISIONS:
            raise FormatError("precision", f"must be one of {', '.join(PRECISIONS)}, not "
                                           f"{self.precision!r}")
        cfg.check_precision(self.precision)
        shape = check_shape(self.shape, "NCHW", leading_optional=True)
        object.__setattr__(self, "shape", shape)
        n, c, h, w = shape
        if n > 1:
            cfg.require("batch", "shape.N")
        atom = self.atom
        line = self.line_stride if self.line_stride is not None else w * atom
        surf = self.surface_stride if self.surface_stride is not None else h * line
        cube = self.cube_stride if self.cube_stride is not None else self.surfaces * surf
        for name, v, least in (("line_stride", line, w * atom),
                               ("surface_stride", surf, (h - 1) * line + w * atom),
                               ("cube_stride", cube, (self.surfaces - 1) * surf +
                                (h - 1) * line + w * atom)):
            if v % atom:
                raise FormatError(name, f"{v} is not a multiple of {atom} bytes (feature data "
                                        f"strides align to {cfg.name}'s {atom}-byte atom)")
            if v < least:
                raise FormatError(name, f"{v} bytes is below the {least} the data before it "
                                        f"needs, so atoms would overlap")
        object.__setattr__(self, "line_stride", line)
        object.__setattr__(self, "surface_stride", surf)
        object.__setattr__(self, "cube_stride", cube)
        if self.precision == "fp16":
            if np.isnan(np.float16(self.fill)):
                raise FormatError("fill", "fp16 channel padding may be any value except NaN")
        else:
            info = np.iinfo(self.dtype)
            if int(self.fill) != self.fill or not info.min <= self.fill <= info.max:
                raise FormatError("fill", f"{self.fill} is not an {self.precision} value")

    # geometry -------------------------------------------------------------------------------

    @property
    def atom(self) -> int:
        """Bytes per atom: the configuration's memory atom, and the strides' alignment."""
        return self.config.memory_atom

    @property
    def dtype(self) -> np.dtype:
        return PRECISIONS[self.precision][0]

    @property
    def element_bytes(self) -> int:
        return PRECISIONS[self.precision][1]

    @property
    def channels_per_atom(self) -> int:
        return self.config.channels_per_atom(self.precision)

    @property
    def surfaces(self) -> int:
        return -(-self.shape[1] // self.channels_per_atom)

    @property
    def packed(self) -> bool:
        n, c, h, w = self.shape
        return (self.line_stride == w * self.atom and self.surface_stride == h * self.line_stride
                and self.cube_stride == self.surfaces * self.surface_stride)

    @property
    def size(self) -> int:
        """Bytes from the first atom to the end of the last."""
        n, c, h, w = self.shape
        return ((n - 1) * self.cube_stride + (self.surfaces - 1) * self.surface_stride +
                (h - 1) * self.line_stride + w * self.atom)

    def address(self, n, c, h, w):
        """Byte offset of element (n, c, h, w) from the start (numpy arrays broadcast)."""
        cpa = self.channels_per_atom
        return (np.asarray(n) * self.cube_stride + np.asarray(c) // cpa * self.surface_stride +
                np.asarray(h) * self.line_stride + np.asarray(w) * self.atom +
                np.asarray(c) % cpa * self.element_bytes)

    def surface_packed_view(self) -> FeatureFormat:
        """A surface-packed 1x1xC cube is the same memory as a (C/atom) x 1 x atom cube;
        NVDLA may read it that way to save bandwidth (seed). Returns that W x 1 x C' format."""
        n, c, h, w = self.shape
        if (h, w) != (1, 1) or self.surface_stride != self.atom:
            raise FormatError("shape", f"only a 1x1xC cube with a {self.atom}-byte (one atom) "
                                       f"surface stride is surface packed")
        return FeatureFormat(self.precision, (n, self.channels_per_atom, 1, self.surfaces),
                             cube_stride=self.cube_stride, fill=self.fill, config=self.config)

    def to_dict(self) -> dict:
        return {"format": "nvdla-feature", "precision": self.precision,
                "shape": list(self.shape), "line_stride": self.line_stride,
                "surface_stride": self.surface_stride, "cube_stride": self.cube_stride,
                "fill": self.fill, "config": self.config.to_json()}

    @classmethod
    def from_dict(cls, d: dict) -> FeatureFormat:
        return cls(d["precision"], tuple(d["shape"]), d.get("line_stride"),
                   d.get("surface_stride"), d.get("cube_stride"), d.get("fill", 0),
                   d.get("config"))

    # the two directions -----------------------------------------------------------------------

    def _atoms(self, buf: np.ndarray) -> np.ndarray:
        """(N, surfaces, H, W, channels per atom) element view of a byte buffer."""
        n, c, h, w = self.shape
        eb = self.element_bytes
        return np.lib.stride_tricks.as_strided(
            buf.view(self.dtype) if eb == 1 else buf[:buf.size - buf.size % eb].view(self.dtype),
            shape=(n, self.surfaces, h, w, self.channels_per_atom),
            strides=(self.cube_stride, self.surface_stride, self.line_stride, self.atom, eb),
            writeable=True)

    def _blocks(self):
        """Copy tasks: (cube, first surface, surfaces, first line, lines). A task's source is
        a few lines of one surface's channels (about 64 KiB), so the transpose stays in cache."""
        n, c, h, w = self.shape
        per_line = self.atom * w
        lines = max(1, min(h, BLOCK_BYTES // per_line))
        return [(n0, s0, l0, min(l0 + lines, h)) for n0 in range(n)
                for s0 in range(self.surfaces) for l0 in range(0, h, lines)]

    def pack(self, tensor, gap: int = 0) -> np.ndarray:
        """The memory image (uint8, ``size`` bytes) of an NCHW (or CHW) tensor."""
        a = np.asarray(tensor)
        if a.ndim == 3:
            a = a[None]
        if a.shape != self.shape:
            raise FormatError("tensor", f"shape {np.asarray(tensor).shape} differs from the "
                                        f"format's (N, C, H, W) = {self.shape}")
        # (fp16 feature data may hold NaN and infinities: the FP16 rules say what each
        # sub-module makes of them; packing keeps their bits)
        a = _convert(a, self.precision, "tensor", error=FormatError, what="feature data",
                     finite=False)
        n, c, h, w = self.shape
        buf = np.full(self.size, gap, dtype=np.uint8) if not self.packed or gap else \
            np.empty(self.size, dtype=np.uint8)
        cpa = self.channels_per_atom
        atoms = self._atoms(buf)

        def copy(n0, s0, l0, l1):
            c0, c1 = s0 * cpa, min(s0 * cpa + cpa, c)
            dst = atoms[n0, s0, l0:l1]                       # (lines, W, cpa)
            # a channel at a time: numpy's inner loop then runs along a line (contiguous
            # reads, one element every atom written), faster than one transposed
            # assignment, whose inner loop is the atom's few channels, a plane apart
            for k in range(c1 - c0):
                dst[..., k] = a[n0, c0 + k, l0:l1]
            if c1 - c0 < cpa:
                dst[..., c1 - c0:] = self.fill

        run(copy, self._blocks())
        return buf

    def unpack(self, image) -> np.ndarray:
        """The NCHW tensor from a memory image (at least ``size`` bytes)."""
        buf = np.frombuffer(image, dtype=np.uint8) if isinstance(image, (bytes, bytearray)) \
            else np.asarray(image).view(np.uint8).ravel()
        if buf.size < self.size:
            raise FormatError("image", f"{buf.size} bytes, the format spans {self.size}")
        n, c, h, w = self.shape
        cpa = self.channels_per_atom
        atoms = self._atoms(buf)
        out = np.empty(self.shape, dtype=self.dtype)

        def copy(n0, s0, l0, l1):
            # one transposed assignment: its reads are runs of an atom's channels, where a
            # channel at a time (as pack writes) would read one element every atom, slower
            c0, c1 = s0 * cpa, min(s0 * cpa + cpa, c)
            out[n0, c0:c1, l0:l1] = atoms[n0, s0, l0:l1, :, :c1 - c0].transpose(2, 0, 1)

        run(copy, self._blocks())
        return out
