"""NVDLA auxiliary data for SDP: bias, PReLU, batch-norm and element-wise operands.

NVDLA data format guide's rule: these formats do not use the feature data atom but
``BytesPerAtom = ElementPerAtom * ComponentsPerElement * BytesPerComponent``, where
ElementPerAtom is the configuration's atomic K for an INT8 processing precision and half of it for
INT16/FP16 (32 and 16 on nv_full, 8 on nv_small); components are 1
(bias, PReLU, element-wise with ALU or MUL), or 2 (batch-norm: the addend and the multiplier,
always packed together; element-wise with both ALU and MUL); BytesPerComponent is the DATA_SIZE,
1 or 2 bytes (fp16 always 2).

- Per layer: a register, nothing in memory (:meth:`AuxFormat.memory` is None).
- Per channel: a 1x1xC run of elements from the start address, channels padded to a whole
  atom (the project pads with zeros so the DMA reads whole atoms).
- Per element (bias, element-wise): a W x H x C cube of such atoms, scanned like feature data
  (atom -> W -> H -> channel surface), with line and surface strides aligned to the
  configuration's memory atom (32 bytes on nv_full).

Element-wise operands exist only in configurations with SDP's element-wise unit (not nv_small).

Tensors: per channel (C,) or (C, k) for k components; per element (C, H, W) or (C, H, W, k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FormatError
from .config import NvdlaConfig
from .config import config as _config
from .weights import PRECISIONS

USES = {"bias": 1, "prelu": 1, "batchnorm": 2, "eltwise": 1, "eltwise_both": 2}
SCOPES = {"bias": ("layer", "channel", "element"), "prelu": ("channel",),
          "batchnorm": ("layer", "channel"), "eltwise": ("element",),
          "eltwise_both": ("element",)}


@dataclass(frozen=True)
class AuxFormat:
    """use         bias, prelu, batchnorm, eltwise or eltwise_both.
    scope       layer, channel or element.
    proc        SDP processing precision: int8, int16 or fp16.
    data_bytes  bytes per component (DATA_SIZE): 1 or 2; fp16 is always 2.
    shape       (C,) per channel, (C, H, W) per element.
    line_stride, surface_stride: per element only (default packed).
    config      the NVDLA configuration (a name or an ``NvdlaConfig``; default nv_full)."""

    use: str
    scope: str
    proc: str
    data_bytes: int
    shape: tuple
    line_stride: int | None = None
    surface_stride: int | None = None
    config: NvdlaConfig | str | None = None

    def __post_init__(self):
        cfg = _config(self.config)
        object.__setattr__(self, "config", cfg)
        if self.use not in USES:
            raise FormatError("use", f"must be one of {', '.join(USES)}, not {self.use!r}")
        if self.scope not in SCOPES[self.use]:
            raise FormatError("scope", f"{self.use} data is per {' or per '.join(SCOPES[self.use])}"
                                       f", not per {self.scope}")
        if self.proc not in PRECISIONS:
            raise FormatError("proc", f"must be int8, int16 or fp16, not {self.proc!r}")
        cfg.check_precision(self.proc, "proc")
        if self.use.startswith("eltwise"):
            cfg.require("sdp_eltwise", "use")
        if self.data_bytes not in (1, 2):
            raise FormatError("data_bytes", f"must be 1 or 2, not {self.data_bytes}")
        if self.proc == "fp16" and self.data_bytes != 2:
            raise FormatError("data_bytes", "fp16 components are 2 bytes")
        shape = tuple(int(v) for v in self.shape)
        want = {"layer": 1, "channel": 1, "element": 3}[self.scope]
        if len(shape) != want:
            raise FormatError("shape", f"per {self.scope} data has shape "
                                       f"{'(C,)' if want == 1 else '(C, H, W)'}, not {shape}")
        if min(shape) < 1:
            raise FormatError("shape", f"sizes must be at least 1: {shape}")
        object.__setattr__(self, "shape", shape)
        if self.scope == "element":
            c, h, w = shape
            # packed lines, rounded up to the stride alignment (atoms smaller than the memory
            # atom exist: INT16 processing with 1-byte components)
            align = cfg.memory_atom
            line = self.line_stride if self.line_stride is not None else \
                -(-w * self.atom_bytes // align) * align
            surf = self.surface_stride if self.surface_stride is not None else h * line
            for name, v, least in (("line_stride", line, w * self.atom_bytes),
                                   ("surface_stride", surf, (h - 1) * line + w * self.atom_bytes)):
                if v % align:
                    raise FormatError(name, f"{v} is not a multiple of {cfg.name}'s {align}-byte "
                                            f"memory atom")
                if v < least:
                    raise FormatError(name, f"{v} bytes is below the {least} needed")
            object.__setattr__(self, "line_stride", line)
            object.__setattr__(self, "surface_stride", surf)
        elif self.line_stride is not None or self.surface_stride is not None:
            raise FormatError("line_stride", f"per {self.scope} data has no strides")

    @property
    def components(self) -> int:
        return USES[self.use]

    @property
    def elements_per_atom(self) -> int:
        return self.config.kernels_per_group(self.proc)

    @property
    def atom_bytes(self) -> int:
        """BytesPerAtom = ElementPerAtom x ComponentsPerElement x BytesPerComponent."""
        return self.elements_per_atom * self.components * self.data_bytes

    @property
    def dtype(self) -> np.dtype:
        if self.proc == "fp16":
            return np.dtype("<f2")
        return np.dtype("<i1") if self.data_bytes == 1 else np.dtype("<i2")

    @property
    def surfaces(self) -> int:
        return -(-self.shape[0] // self.elements_per_atom)

    @property
    def size(self) -> int:
        if self.scope == "layer":
            return 0
        if self.scope == "channel":
            return self.surfaces * self.atom_bytes
        c, h, w = self.shape
        return (self.surfaces - 1) * self.surface_stride + (h - 1) * self.line_stride + \
            w * self.atom_bytes

    def address(self, c, h=0, w=0, k=0):
        """Byte offset of component k of element (c[, h, w])."""
        epa, unit = self.elements_per_atom, self.components * self.data_bytes
        c, h, w, k = (np.asarray(v) for v in (c, h, w, k))
        base = c // epa * (self.surface_stride if self.scope == "element" else self.atom_bytes)
        if self.scope == "element":
            base = base + h * self.line_stride + w * self.atom_bytes
        return base + c % epa * unit + k * self.data_bytes

    def _values(self, tensor) -> np.ndarray:
        a = np.asarray(tensor)
        k = self.components
        full = self.shape + ((k,) if k > 1 else ())
        if a.shape != full:
            raise FormatError("tensor", f"shape {a.shape}, the format needs {full}")
        if self.proc == "fp16":
            if a.dtype.kind not in "fiu":
                raise FormatError("tensor", f"dtype {a.dtype} is not numeric")
            return a.astype(self.dtype)
        if a.dtype.kind not in "iu":
            raise FormatError("tensor", f"dtype {a.dtype} is not an integer type")
        info = np.iinfo(self.dtype)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise FormatError("tensor", f"values {a.min()} .. {a.max()} do not fit "
                                        f"{self.data_bytes}-byte components")
        return a.astype(self.dtype)

    def _view(self, buf):
        """(surfaces, H, W, elements per atom, components) view of a byte buffer."""
        epa, k, db = self.elements_per_atom, self.components, self.data_bytes
        if self.scope == "channel":
            shape, strides = (self.surfaces, 1, 1, epa, k), (self.atom_bytes, 0, 0, k * db, db)
        else:
            c, h, w = self.shape
            shape = (self.surfaces, h, w, epa, k)
            strides = (self.surface_stride, self.line_stride, self.atom_bytes, k * db, db)
        return np.lib.stride_tricks.as_strided(buf.view(self.dtype) if db == 1 else
                                               buf[:buf.size - buf.size % 2].view(self.dtype),
                                               shape=shape, strides=strides, writeable=True)

    def pack(self, tensor) -> np.ndarray | None:
        """The memory image (uint8), or None for per-layer data (it lives in a register)."""
        v = self._values(tensor)
        if self.scope == "layer":
            return None
        k, epa = self.components, self.elements_per_atom
        c = self.shape[0]
        grid = np.zeros((self.surfaces * epa,) + self.shape[1:] + (k,), dtype=self.dtype)
        grid[:c] = v.reshape((c,) + self.shape[1:] + (k,))
        if self.scope == "channel":
            grid = grid.reshape(self.surfaces, epa, 1, 1, k)
        else:
            grid = grid.reshape((self.surfaces, epa) + self.shape[1:] + (k,))
        buf = np.zeros(self.size, dtype=np.uint8)
        self._view(buf)[...] = grid.transpose(0, 2, 3, 1, 4)
        return buf

    def unpack(self, image) -> np.ndarray:
        if self.scope == "layer":
            raise FormatError("scope", "per-layer data is a register value, not memory")
        buf = np.asarray(image, dtype=np.uint8).ravel() if not isinstance(
            image, (bytes, bytearray)) else np.frombuffer(image, np.uint8)
        if buf.size < self.size:
            raise FormatError("image", f"{buf.size} bytes, the format spans {self.size}")
        k, epa, c = self.components, self.elements_per_atom, self.shape[0]
        atoms = self._view(buf).transpose(0, 3, 1, 2, 4)       # (S, epa, H, W, k)
        out = atoms.reshape((self.surfaces * epa,) + atoms.shape[2:])[:c]
        if self.scope == "channel":
            out = out.reshape(c, k)
        return np.ascontiguousarray(out if k > 1 else out[..., 0])
