"""NVDLA weight images and their sparse compression: the oracle of the sparse weight decompressor.

The rules are those docs/weights.md states (NVDLA's data format guide, with every ordering and
corner case its lost figures showed pinned down); section names below follow it. Everything is
vectorised numpy. The guide's figures are nv_full's; a spec's ``config`` (``model.nvdla.config``)
scales them: chunks of atomic C channels, groups of atomic K kernels (half for int16/fp16),
the dense surface padded to the configuration's weight alignment. Compression and Winograd
exist only where the configuration has them.

A kernel tensor is OIHW: (K, C, R, S), K kernels of C channels, R rows, S columns.

    spec = WeightSpec("dc", "int8", (64, 70, 3, 3))
    image = spec.layout(kernels)            # WeightImage: bytes padded to 128, group geometry
    packed = compress(image)                # CompressedWeights: weight, wmb, wgs surfaces
    dense = decompress(packed.weight, packed.wmb, packed.wgs, spec)   # == image.data
    kernels_again = spec.unlayout(dense)    # OIHW again (Winograd: the 4x4 transformed kernels)

Every layout is a set of *pieces*: pairs of same-shaped numpy views, one into the kernel tensor
and one into the flat image. Laying out copies kernel -> image through them, and unlaying copies
image -> kernel, so each ordering rule is written once and used in both directions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import FormatError, check_shape
from ..parallel import run as _parallel
from .config import ConfigError, NvdlaConfig
from .config import config as _config

# --- constants from NVDLA's data format guide --------------------------------------------------

#: precision name -> (element dtype, bytes per element)
PRECISIONS = {"int8": (np.dtype("<i1"), 1), "int16": (np.dtype("<i2"), 2),
              "fp16": (np.dtype("<f2"), 2)}
MODES = ("dc", "image", "winograd", "deconv")
WINOGRAD_CUBE = 4            #: 4x4x4 element cubes
SIZE_ALIGN = 128             #: compressed surfaces (weight, WMB, WGS) pad to 128 bytes
ADDRESS_ALIGN = 256          #: weight, WMB and WGS surfaces start on 256-byte boundaries
WGS_BYTES = 4                #: one little-endian uint32 per kernel group

#: Winograd weight transform matrix G (seed, "Matrix for weight transfer for Winograd").
WINOGRAD_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]],
                      dtype=np.float32)


class WeightError(FormatError):
    """Bad input to the weight tools. The message names the field and the rule it breaks."""


#: kernels per group by element size in the configurations with compression (nv_full): the
#: sparse weight decompressor's groups
KERNELS_PER_GROUP = {1: 32, 2: 16}


def pad_to(n: int, align: int) -> int:
    return -(-n // align) * align


# --- the description of a layout ------------------------------------------------------------

@dataclass(frozen=True)
class WeightSpec:
    """Which weight image to make from an OIHW tensor of ``shape``.

    mode            "dc" (direct convolution), "image" (image input: pixel channel padding and
                    channel pre-extension), "winograd" or "deconv".
    precision       "int8", "int16" or "fp16".
    shape           (K, C, R, S) of the original kernels.
    stride          (sx, sy): Winograd channel extension, deconvolution set split.
    pixel_channels  image mode: the pixel format's channel count C is padded to (default C).
    post_extension  image mode: channel post-extension factor 1, 2 or 4.
    scale           Winograd: factor applied to G g G^T (float32) before the cast.
    config          the NVDLA configuration (a name or an ``NvdlaConfig``; default nv_full).
    """

    mode: str
    precision: str
    shape: tuple
    stride: tuple = (1, 1)
    pixel_channels: int | None = None
    post_extension: int = 1
    scale: float | None = None
    config: NvdlaConfig | str | None = None

    def __post_init__(self):
        cfg = _config(self.config)
        object.__setattr__(self, "config", cfg)
        if self.mode not in MODES:
            raise WeightError("mode", f"must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode == "winograd":
            cfg.require("winograd", "mode")
        if self.precision not in PRECISIONS:
            raise WeightError("precision", f"must be one of {', '.join(PRECISIONS)}, "
                              f"not {self.precision!r}")
        cfg.check_precision(self.precision)
        shape = check_shape(self.shape, "KCRS", error=WeightError)
        object.__setattr__(self, "shape", shape)
        stride = tuple(int(v) for v in self.stride)
        if len(stride) != 2 or min(stride) < 1:
            raise WeightError("stride", f"two positive integers (sx, sy), not {self.stride}")
        object.__setattr__(self, "stride", stride)
        k, c, r, s = shape
        sx, sy = stride
        if self.mode in ("dc", "image") and stride != (1, 1):
            raise WeightError("stride", f"only Winograd and deconvolution weights depend on the "
                                        f"stride; {self.mode} takes none")
        if self.pixel_channels is not None:
            if self.mode != "image":
                raise WeightError("pixel_channels", "applies to image input weights only")
            if self.pixel_channels < c:
                raise WeightError("pixel_channels", f"the pixel format's channel count "
                                  f"{self.pixel_channels} is below the kernel's C = {c}")
        p = self.post_extension
        if p not in (1, 2, 4):
            raise WeightError("post_extension", f"factor must be 1, 2 or 4, not {p}")
        if p > 1:
            if self.mode != "image":
                raise WeightError("post_extension", "is available for image input weights only "
                                  "(NVDLA's data format guide: not supported for DC, Winograd, "
                                  "deconvolution)")
            limit = cfg.atomic_c // p
            if self.pre_channels > limit:
                raise WeightError("post_extension", f"factor {p} needs C' <= {limit} after "
                                  f"pre-extension (p x C' within {cfg.name}'s {cfg.atomic_c}-"
                                  f"channel chunk); C' = {self.pre_channels}")
        if self.scale is not None:
            if self.mode != "winograd":
                raise WeightError("scale", "applies to Winograd weights only")
            if not math.isfinite(self.scale) or self.scale == 0:
                raise WeightError("scale", f"must be finite and non-zero, not {self.scale}")
        if self.mode == "winograd" and (-(-r // sy) != 3 or -(-s // sx) != 3):
            raise WeightError("shape", f"a {r}x{s} kernel at stride {sx},{sy} does not qualify "
                              f"for Winograd: ceil(R/sy) and ceil(S/sx) must both be 3")

    # geometry ---------------------------------------------------------------------------------

    @property
    def element_bytes(self) -> int:
        return PRECISIONS[self.precision][1]

    @property
    def dtype(self) -> np.dtype:
        return PRECISIONS[self.precision][0]

    @property
    def kernels_per_group(self) -> int:
        return self.config.kernels_per_group(self.precision)

    @property
    def chunk_elements(self) -> int:
        """Channels per 1x1xC' small cube: the configuration's atomic C."""
        return self.config.atomic_c

    @property
    def sets(self) -> int:
        """Deconvolution kernel sets (sx * sy); 1 for every other mode."""
        return self.stride[0] * self.stride[1] if self.mode == "deconv" else 1

    @property
    def pre_channels(self) -> int:
        """Image input: C' = pixel channels * S after pre-extension."""
        return (self.pixel_channels or self.shape[1]) * self.shape[3]

    @property
    def laid_shape(self) -> tuple:
        """(K, C, R, S) of the kernels the ordering rule scans (per set for deconvolution).
        Post-extended image weights report R = ceil(R/p) rows of p*C' channels, the last row
        holding only (R mod p)*C' of them."""
        k, c, r, s = self.shape
        sx, sy = self.stride
        if self.mode == "image":
            p = self.post_extension
            return (k, self.pre_channels * p, -(-r // p), 1)
        if self.mode == "winograd":
            cpad = pad_to(c, self.config.channels_per_atom(self.precision))
            return (k, cpad * sx * sy, WINOGRAD_CUBE, WINOGRAD_CUBE)
        if self.mode == "deconv":
            return (k, c, -(-r // sy), -(-s // sx))
        return self.shape

    @property
    def kernel_elements(self) -> int:
        """Elements of one laid-out kernel (one set's kernel for deconvolution)."""
        if self.mode == "image":
            return self.pre_channels * self.shape[2]
        k, c, r, s = self.laid_shape
        return c * r * s

    @property
    def bytes_per_kernel(self) -> int:
        return self.kernel_elements * self.element_bytes

    @property
    def groups_per_set(self) -> int:
        return -(-self.shape[0] // self.kernels_per_group)

    @property
    def groups(self) -> int:
        return self.groups_per_set * self.sets

    def group_kernels(self) -> np.ndarray:
        """Kernels in each group, in image order (the last group of each set may be partial)."""
        kpg, k = self.kernels_per_group, self.shape[0]
        one = np.full(self.groups_per_set, kpg, dtype=np.int64)
        one[-1] = k - kpg * (self.groups_per_set - 1)
        return np.tile(one, self.sets)

    def group_elements(self) -> np.ndarray:
        return self.group_kernels() * self.kernel_elements

    @property
    def elements(self) -> int:
        """Elements of the image before the padding to the weight alignment."""
        return self.shape[0] * self.kernel_elements * self.sets

    @property
    def dense_bytes(self) -> int:
        return self.elements * self.element_bytes

    @property
    def image_bytes(self) -> int:
        """Size of the dense weight surface: dense bytes padded to the configuration's weight
        alignment (128 bytes on nv_full)."""
        return pad_to(self.dense_bytes, self.config.weight_align)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "precision": self.precision, "shape": list(self.shape),
                "stride": list(self.stride), "pixel_channels": self.pixel_channels,
                "post_extension": self.post_extension, "scale": self.scale,
                "config": self.config.to_json()}

    @classmethod
    def from_dict(cls, d: dict) -> WeightSpec:
        return cls(d["mode"], d["precision"], tuple(d["shape"]), tuple(d.get("stride", (1, 1))),
                   d.get("pixel_channels"), d.get("post_extension", 1), d.get("scale"),
                   d.get("config"))

    # the two directions -----------------------------------------------------------------------

    def prepare(self, kernels) -> np.ndarray:
        """Check an OIHW tensor against this spec and convert it to the element type."""
        a = np.asarray(kernels)
        if a.ndim != 4:
            raise WeightError("kernels", f"must be OIHW (K, C, R, S), rank 4, not rank {a.ndim}")
        if a.shape != self.shape:
            raise WeightError("kernels", f"shape {a.shape} differs from the spec's {self.shape}")
        return _convert(a, self.precision, "kernels")

    def layout(self, kernels) -> WeightImage:
        """Lay OIHW kernels out as NVDLA weight memory (dense, padded to the weight alignment)."""
        w = self.prepare(kernels)
        src = self._scan_kernels(w)
        flat = np.empty(self.image_bytes // self.element_bytes, dtype=self.dtype)
        flat[self.elements:] = 0
        _copy_pieces(self._pieces(src, flat), to_image=True)
        return WeightImage(self, flat.view(np.uint8))

    def unlayout(self, image) -> np.ndarray:
        """The kernels back from a dense image: OIHW in the element type. Winograd images give
        the (K, C', 4, 4) transformed kernels: the cast after G g G^T loses information."""
        data = _as_bytes(image, "image")
        if data.size < self.dense_bytes:
            raise WeightError("image", f"{data.size} bytes, the layout needs {self.dense_bytes}")
        flat = data[:self.dense_bytes].view(self.dtype)
        k, c, r, s = self.laid_shape
        if self.mode == "image" and self.post_extension > 1:
            scan = np.empty((k, self.pre_channels, self.shape[2], 1), dtype=self.dtype)
        elif self.mode == "deconv":
            scan = np.empty((self.sets, k, c, r, s), dtype=self.dtype)
        else:
            scan = np.empty((k, c, r, s), dtype=self.dtype)
        _copy_pieces(self._pieces(scan, flat), to_image=False)
        return self._unscan_kernels(scan)

    # mode-specific steps ----------------------------------------------------------------------

    def _scan_kernels(self, w: np.ndarray) -> np.ndarray:
        """The tensor whose elements the ordering rule scans: after channel padding and
        pre-extension (image), extension and transform (Winograd) or set split (deconv)."""
        k, c, r, s = self.shape
        if self.mode == "image":
            pc = self.pixel_channels or c
            if pc != c:
                w = np.concatenate([w, np.zeros((k, pc - c, r, s), w.dtype)], axis=1)
            # channel c' = s * C + c holds weight (r, s, c): (K, S, C, R) -> (K, S*C, R, 1)
            return w.transpose(0, 3, 1, 2).reshape(k, s * pc, r, 1)
        if self.mode == "winograd":
            return winograd_transform(
                winograd_extend(w, self.stride, self.element_bytes, self.config.memory_atom),
                self.precision, self.scale)
        if self.mode == "deconv":
            return deconv_split(w, self.stride)
        return w

    def _unscan_kernels(self, scan: np.ndarray) -> np.ndarray:
        k, c, r, s = self.shape
        if self.mode == "image":
            pc = self.pixel_channels or c
            w = scan.reshape(k, s, pc, r).transpose(0, 2, 3, 1)
            return np.ascontiguousarray(w[:, :c])
        if self.mode == "deconv":
            return deconv_merge(scan, self.shape, self.stride)
        return scan

    def _pieces(self, scan: np.ndarray, flat: np.ndarray):
        """(kernel view, image view) pairs covering the dense image."""
        kpg, chunk = self.kernels_per_group, self.chunk_elements
        if self.mode == "winograd":
            return _winograd_pieces(scan, flat, kpg)
        if self.mode == "image" and self.post_extension > 1:
            return _post_extension_pieces(scan, flat, kpg, self.post_extension)
        if self.mode == "deconv":
            pieces, per_set = [], self.shape[0] * self.kernel_elements
            for i in range(self.sets):
                pieces += _dc_pieces(scan[i, :, :, ::-1, ::-1],
                                     flat[i * per_set:(i + 1) * per_set], kpg, chunk)
            return pieces
        return _dc_pieces(scan, flat, kpg, chunk)


@dataclass(frozen=True)
class WeightImage:
    """A dense weight image: ``data`` is the weight surface (uint8, padded to the
    configuration's weight alignment)."""

    spec: WeightSpec
    data: np.ndarray

    def elements(self) -> np.ndarray:
        """The image's elements before padding, as unsigned integers of the element width
        (so that "zero" means all bits zero: fp16 -0.0 is not zero)."""
        return self.data[:self.spec.dense_bytes].view(_bits_dtype(self.spec.element_bytes))


# --- conversion and the mode-specific transforms ---------------------------------------------

def _bits_dtype(element_bytes: int) -> np.dtype:
    return np.dtype("<u1") if element_bytes == 1 else np.dtype("<u2")


def _convert(a: np.ndarray, precision: str, field: str, *, error=WeightError,
             what: str = "weights", finite: bool = True) -> np.ndarray:
    """``a`` as the precision's element type, refusing what the type cannot hold with ``error``
    naming ``field`` (``what``: the data, for the messages). With ``finite`` (weights) fp16
    NaN and infinities are refused; without (feature data) they are kept, bit for bit when
    already float16."""
    dt, _ = PRECISIONS[precision]
    if precision == "fp16":
        if a.dtype.kind not in "fiu":
            raise error(field, f"dtype {a.dtype} cannot become fp16 (need numbers)")
        if finite and a.dtype.kind == "f" and not np.isfinite(a).all():
            raise error(field, f"holds NaN or infinity; {what} must be finite")
        if a.dtype == dt:
            return a                       # fp16 already: nothing to convert, bits kept
        with np.errstate(over="ignore", invalid="ignore"):
            out = a.astype(dt)
        grew = np.isinf(out) & (np.isfinite(a) if a.dtype.kind == "f" else True)
        if grew.any():
            raise error(field, f"has values beyond fp16's range (|x| > 65504), which would "
                               f"become infinity in the {what}")
        return out
    if a.dtype.kind not in "iu" and a.dtype != np.bool_:
        raise error(field, f"dtype {a.dtype} is not an integer type; quantise to "
                           f"{precision} first")
    if np.can_cast(a.dtype, dt):
        return a.astype(dt, copy=False)
    info = np.iinfo(dt)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise error(field, f"values {a.min()} .. {a.max()} do not fit {precision} "
                           f"({info.min} .. {info.max})")
    return a.astype(dt)


def _as_bytes(a, field: str) -> np.ndarray:
    if isinstance(a, (bytes, bytearray, memoryview)):
        return np.frombuffer(a, dtype=np.uint8)
    a = np.asarray(a)
    if a.ndim != 1:
        raise WeightError(field, f"must be a flat byte array, not rank {a.ndim}")
    return a.view(np.uint8) if a.dtype != np.uint8 else a


def winograd_extend(w: np.ndarray, stride, element_bytes: int, atom: int = 32) -> np.ndarray:
    """Pad channels to a whole ``atom`` bytes (the memory atom), then (stride > 1) fold the
    kernel into a 3x3 one with C * sx * sy channels: weight (r, s, c) goes to row r div sy,
    column s div sx, channel ((r mod sy) * sx + (s mod sx)) * C + c (the project's order;
    weights.md leaves it open).
    Rows and columns beyond R and S are zero."""
    k, c, r, s = w.shape
    sx, sy = stride
    cp = pad_to(c, atom // element_bytes)
    out = np.zeros((k, cp, 3 * sy, 3 * sx), dtype=w.dtype)
    out[:, :c, :r, :s] = w
    return out.reshape(k, cp, 3, sy, 3, sx).transpose(0, 3, 5, 1, 2, 4).reshape(k, sy * sx * cp,
                                                                                3, 3)


def _g_apply(x: np.ndarray, axis: int) -> np.ndarray:
    """G applied along one axis of length 3, in float32, terms summed in index order."""
    g0, g1, g2 = (np.take(x, i, axis=axis) for i in range(3))
    h = np.float32(0.5)
    return np.stack([g0, h * g0 + h * g1 + h * g2, h * g0 - h * g1 + h * g2, g2], axis=axis)


def winograd_transform(w3: np.ndarray, precision: str, scale: float | None = None) -> np.ndarray:
    """(K, C, 3, 3) -> (K, C, 4, 4): G g G^T in float32, times ``scale`` if given, then cast
    (integers truncate toward zero; fp16 rounds to nearest). A result outside the element
    type's range raises; a scale below 1 brings it back."""
    f = w3.astype(np.float32)
    t = _g_apply(_g_apply(f, 2), 3)
    if scale is not None:
        t = t * np.float32(scale)
    dt = PRECISIONS[precision][0]
    if precision == "fp16":
        with np.errstate(over="ignore"):
            out = t.astype(dt)
        if not np.isfinite(out).all():
            raise WeightError("kernels", "G g G^T exceeds fp16's range; give a scale below 1")
        return out
    t = np.trunc(t)
    info = np.iinfo(dt)
    lo, hi = t.min(), t.max()
    if lo < info.min or hi > info.max:
        raise WeightError("kernels", f"G g G^T spans {lo:g} .. {hi:g}, beyond {precision} "
                                     f"({info.min} .. {info.max}); give a scale below 1")
    return t.astype(dt)


def deconv_split(w: np.ndarray, stride) -> np.ndarray:
    """(K, C, R, S) -> (sx*sy, K, C, ceil(R/sy), ceil(S/sx)): set y*sx + x holds the weights at
    rows y, y+sy, ... and columns x, x+sx, ...; positions past the kernel are zero."""
    k, c, r, s = w.shape
    sx, sy = stride
    rr, ss = -(-r // sy), -(-s // sx)
    pad = np.zeros((k, c, rr * sy, ss * sx), dtype=w.dtype)
    pad[:, :, :r, :s] = w
    return np.ascontiguousarray(pad.reshape(k, c, rr, sy, ss, sx).transpose(3, 5, 0, 1, 2, 4)
                                .reshape(sy * sx, k, c, rr, ss))


def deconv_merge(sets: np.ndarray, shape, stride) -> np.ndarray:
    """Inverse of :func:`deconv_split`."""
    k, c, r, s = shape
    sx, sy = stride
    n, _, _, rr, ss = sets.shape
    full = sets.reshape(sy, sx, k, c, rr, ss).transpose(2, 3, 4, 0, 5, 1).reshape(k, c, rr * sy,
                                                                                ss * sx)
    return np.ascontiguousarray(full[:, :, :r, :s])


# --- ordering rules as pieces -----------------------------------------------------------------

def _split_view(a: np.ndarray, shape) -> np.ndarray:
    """``a.reshape(shape)`` that must not copy (the pieces write through these views)."""
    v = a.reshape(shape)
    if v.size and not np.shares_memory(v, a):
        raise AssertionError("layout view would copy")
    return v


def _kernel_blocks(scan: np.ndarray, kpg: int):
    """Split the kernel axis into the run of full groups and the partial last group:
    yields (first kernel, groups, kernels per group)."""
    k = scan.shape[0]
    full = k // kpg
    if full:
        yield 0, full, kpg
    if k % kpg:
        yield full * kpg, 1, k % kpg


def _dc_pieces(scan: np.ndarray, flat: np.ndarray, kpg: int, chunk: int):
    """Direct convolution: group, channel chunk, R, S, kernel in group, element in chunk.
    Chunks are ``chunk`` (atomic C) elements; the last holds C mod chunk and is not padded."""
    k, c, r, s = scan.shape
    full_chunks, rem = divmod(c, chunk)
    pieces, pos = [], 0
    for k0, g, kg in _kernel_blocks(scan, kpg):
        ker = _split_view(scan[k0:k0 + g * kg], (g, kg, c, r, s))
        per_group = kg * c * r * s
        img = _split_view(flat[pos:pos + g * per_group], (g, per_group))
        col = 0
        if full_chunks:
            n = full_chunks * chunk * r * s * kg
            kv = ker[:, :, :full_chunks * chunk]
            kv = _split_view(kv, (g, kg, full_chunks, chunk, r, s))
            kv = kv.transpose(0, 2, 4, 5, 1, 3)
            iv = _split_view(img[:, col:col + n], (g, full_chunks, r, s, kg, chunk))
            pieces.append((kv, iv))
            col += n
        if rem:
            n = rem * r * s * kg
            kv = ker[:, :, full_chunks * chunk:].transpose(0, 3, 4, 1, 2)
            iv = _split_view(img[:, col:col + n], (g, r, s, kg, rem))
            pieces.append((kv, iv))
        pos += g * per_group
    return pieces


def _post_extension_pieces(scan: np.ndarray, flat: np.ndarray, kpg: int, p: int):
    """Image weights with channel post-extension p: row r of the pre-extended kernel becomes
    row r div p, channel (r mod p) * C' + c'. C'' = p*C' fits one chunk, so the order is
    group, folded row, kernel, channel; the last row holds (R mod p) * C' channels."""
    k, cp, r, _ = scan.shape
    full_rows, rem = divmod(r, p)
    pieces, pos = [], 0
    for k0, g, kg in _kernel_blocks(scan, kpg):
        ker = _split_view(scan[k0:k0 + g * kg, :, :, 0], (g, kg, cp, r))
        per_group = kg * cp * r
        img = _split_view(flat[pos:pos + g * per_group], (g, per_group))
        col = 0
        if full_rows:
            n = full_rows * kg * p * cp
            # (g, kg, C', rows, p) -> (g, rows, kg, p, C')
            kv = _split_view(ker[:, :, :, :full_rows * p], (g, kg, cp, full_rows, p))
            kv = kv.transpose(0, 3, 1, 4, 2)
            pieces.append((kv, _split_view(img[:, col:col + n], (g, full_rows, kg, p, cp))))
            col += n
        if rem:
            n = kg * rem * cp
            kv = ker[:, :, :, full_rows * p:].transpose(0, 1, 3, 2)     # (g, kg, rem, C')
            pieces.append((kv, _split_view(img[:, col:col + n], (g, kg, rem, cp))))
        pos += g * per_group
    return pieces


def _winograd_pieces(scan: np.ndarray, flat: np.ndarray, kpg: int):
    """Winograd: group, channel group of 4, kernel in group, cube row, cube column, channel."""
    k, c, _, _ = scan.shape
    q = WINOGRAD_CUBE
    pieces, pos = [], 0
    for k0, g, kg in _kernel_blocks(scan, kpg):
        kv = _split_view(scan[k0:k0 + g * kg], (g, kg, c // q, q, q, q))
        kv = kv.transpose(0, 2, 1, 4, 5, 3)
        per_group = kg * c * q * q
        iv = _split_view(flat[pos:pos + g * per_group], (g, c // q, kg, q, q, q))
        pieces.append((kv, iv))
        pos += g * per_group
    return pieces


def _copy_pieces(pieces, to_image: bool):
    """Copy through every piece; large pieces are cut along their group axis into four tasks
    so that both cores copy (more, smaller tasks measured slower: the copy is memory bound)."""
    tasks = []
    for kv, iv in pieces:
        src, dst = (kv, iv) if to_image else (iv, kv)
        cuts = min(src.shape[0], 4 if src.size >= 4 * _CHUNK else 1)
        bounds = np.linspace(0, src.shape[0], cuts + 1).astype(int)
        tasks += [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def copy(dst, src):
        dst[...] = src

    _parallel(copy, tasks)


# --- sparse compression ----------------------------------------------------------------------

@dataclass(frozen=True)
class CompressionStats:
    groups: int
    density: np.ndarray            #: non-zero elements over elements, per group
    dense_bytes: int               #: the dense weight surface (padded to 128)
    weight_bytes: int              #: packed non-zeros surface (padded)
    wmb_bytes: int
    wgs_bytes: int

    @property
    def compressed_bytes(self) -> int:
        return self.weight_bytes + self.wmb_bytes + self.wgs_bytes

    @property
    def bytes_saved(self) -> int:
        return self.dense_bytes - self.compressed_bytes

    @property
    def ratio(self) -> float:
        """Dense surface bytes over the three compressed surfaces' bytes."""
        return self.dense_bytes / self.compressed_bytes

    @property
    def overall_density(self) -> float:
        return float(self.density.mean()) if self.density.size else 0.0


@dataclass(frozen=True)
class CompressedWeights:
    """The three surfaces, each uint8 and padded to 128 bytes, and the image's description."""

    spec: WeightSpec
    weight: np.ndarray
    wmb: np.ndarray
    wgs: np.ndarray

    @property
    def group_sizes(self) -> np.ndarray:
        """The WGS values: compressed bytes of each group."""
        return self.wgs[:self.spec.groups * WGS_BYTES].view("<u4")

    @property
    def nonzero(self) -> np.ndarray:
        """Non-zero elements per group (WGS over the element size)."""
        return self.group_sizes.astype(np.int64) // self.spec.element_bytes

    def stats(self) -> CompressionStats:
        return CompressionStats(self.spec.groups, self.nonzero / self.spec.group_elements(),
                                self.spec.image_bytes, self.weight.size, self.wmb.size,
                                self.wgs.size)


_CHUNK = 1 << 20      #: elements per task of the bulk loops (measured best on 2 cores)


def _ranges(n: int) -> list[tuple[int, int]]:
    """Element ranges the bulk loops (compress, scatter) run over, one task each."""
    return [(a, min(a + _CHUNK, n)) for a in range(0, n, _CHUNK)] or [(0, 0)]


def _group_counts(mask: np.ndarray, spec: WeightSpec) -> np.ndarray:
    """Set mask bits per group (one vectorised count per group)."""
    ends = np.cumsum(spec.group_elements())
    return np.array([np.count_nonzero(mask[a:b]) for a, b in zip(ends - spec.group_elements(),
                                                                  ends, strict=True)],
                    dtype=np.int64)


def _pad_bytes(a: np.ndarray) -> np.ndarray:
    a = a.view(np.uint8)
    out = np.zeros(pad_to(a.size, SIZE_ALIGN), dtype=np.uint8)
    out[:a.size] = a
    return out


def compress(image: WeightImage) -> CompressedWeights:
    """WMB (one bit per element, 1 = non-zero, little-endian bit string over all groups),
    packed non-zero elements, WGS (compressed bytes per group); each padded to 128 bytes."""
    spec = image.spec
    spec.config.require("compression")
    elems = image.elements()
    mask = elems != 0
    packed = np.concatenate(_parallel(lambda a, b: np.extract(mask[a:b], elems[a:b]),
                                      _ranges(elems.size)))
    wgs = (_group_counts(mask, spec) * spec.element_bytes).astype("<u4")
    return CompressedWeights(spec, _pad_bytes(packed),
                             _pad_bytes(np.packbits(mask, bitorder="little")), _pad_bytes(wgs))


def decompress(weight, wmb, wgs, spec: WeightSpec) -> np.ndarray:
    """The dense weight surface (padded to 128 bytes) from the three compressed surfaces.
    Raises WeightError on any inconsistency the hardware also reports: a group whose mask
    popcount disagrees with its WGS, WGS totals beyond the weight surface, a surface too short."""
    spec.config.require("compression")
    weight = _as_bytes(weight, "weight")
    wmb = _as_bytes(wmb, "wmb")
    wgs = _as_bytes(wgs, "wgs")
    n, eb = spec.elements, spec.element_bytes
    if wgs.size < spec.groups * WGS_BYTES:
        raise WeightError("wgs", f"{wgs.size} bytes hold fewer than the {spec.groups} groups' "
                                 f"{spec.groups * WGS_BYTES}")
    if wmb.size * 8 < n:
        raise WeightError("wmb", f"{wmb.size} bytes hold {wmb.size * 8} mask bits; the image "
                                 f"has {n} elements")
    sizes = wgs[:spec.groups * WGS_BYTES].view("<u4").astype(np.int64)
    total = int(sizes.sum())
    if total > weight.size:
        raise WeightError("wgs", f"group sizes total {total} bytes, beyond the {weight.size}-byte "
                                 f"weight surface")
    mask = np.unpackbits(wmb[:-(-n // 8)], count=n, bitorder="little").view(bool)
    nonzero = _group_counts(mask, spec)
    bad = np.flatnonzero(nonzero * eb != sizes)
    if bad.size:
        g = int(bad[0])
        raise WeightError(f"wgs[{g}]", f"group {g} has {nonzero[g]} mask bits set "
                                       f"({nonzero[g] * eb} bytes) but WGS says {sizes[g]}")
    values = weight[:total].view(_bits_dtype(eb))
    dense = np.zeros(spec.image_bytes // eb, dtype=_bits_dtype(eb))
    ranges = _ranges(n)
    first = np.cumsum([0] + [np.count_nonzero(mask[a:b]) for a, b in ranges[:-1]])

    def scatter(a, b, v):
        idx = np.flatnonzero(mask[a:b])
        dense[a:b][idx] = values[v:v + idx.size]

    _parallel(scatter, [(a, b, v) for (a, b), v in zip(ranges, first, strict=True)])
    return dense.view(np.uint8)


# --- the decompressor's job ------------------------------------------------------------------

@dataclass(frozen=True)
class DecompressJob:
    """What the sparse weight decompressor needs to expand one compressed image.

    Addresses are byte addresses; sizes are the surfaces' byte sizes (multiples of 128).
    ``kernels`` counts the kernels of one set (deconvolution images hold ``sets`` sets, each
    with its own partial last group); ``bytes_per_kernel`` is one kernel's dense bytes.
    ``dst_addr`` is where the dense image goes, or None for stream output only."""

    weight_addr: int
    weight_bytes: int
    wmb_addr: int
    wmb_bytes: int
    wgs_addr: int
    wgs_bytes: int
    groups: int
    kernels: int
    bytes_per_kernel: int
    element_bytes: int
    dst_addr: int | None = None
    sets: int = 1
    address_bits: int = 32

    def __post_init__(self):
        self.validate()

    @property
    def kernels_per_group(self) -> int:
        return KERNELS_PER_GROUP[self.element_bytes]

    @property
    def dense_bytes(self) -> int:
        return self.kernels * self.bytes_per_kernel * self.sets

    def validate(self):
        lim = 1 << self.address_bits
        if self.element_bytes not in (1, 2):
            raise WeightError("element_bytes", f"must be 1 (int8) or 2 (int16/fp16), not "
                                               f"{self.element_bytes}")
        for name in ("weight", "wmb", "wgs"):
            addr, size = getattr(self, f"{name}_addr"), getattr(self, f"{name}_bytes")
            if addr % ADDRESS_ALIGN:
                raise WeightError(f"{name}_addr", f"0x{addr:x} is not {ADDRESS_ALIGN}-byte "
                                                  f"aligned")
            # an all-zero image has an empty weight surface; WMB and WGS are never empty
            if size < (0 if name == "weight" else 1) or size % SIZE_ALIGN:
                raise WeightError(f"{name}_bytes", f"{size} is not a "
                                  f"{'' if name == 'weight' else 'positive '}multiple of "
                                  f"{SIZE_ALIGN}")
            if addr < 0 or addr + size > lim:
                raise WeightError(f"{name}_addr", f"surface 0x{addr:x} + {size} passes the "
                                                  f"{self.address_bits}-bit address space")
        for name in ("kernels", "bytes_per_kernel", "sets"):
            if getattr(self, name) < 1:
                raise WeightError(name, f"must be at least 1, not {getattr(self, name)}")
        if self.bytes_per_kernel % self.element_bytes:
            raise WeightError("bytes_per_kernel", f"{self.bytes_per_kernel} is not a whole "
                                                  f"number of {self.element_bytes}-byte elements")
        want = -(-self.kernels // self.kernels_per_group) * self.sets
        if self.groups != want:
            raise WeightError("groups", f"{self.kernels} kernels x {self.sets} sets in groups of "
                                        f"{self.kernels_per_group} make {want} groups, not "
                                        f"{self.groups}")
        if self.wgs_bytes < self.groups * WGS_BYTES:
            raise WeightError("wgs_bytes", f"{self.wgs_bytes} bytes hold fewer than "
                                           f"{self.groups} group sizes")
        bits = self.dense_bytes // self.element_bytes
        if self.wmb_bytes * 8 < bits:
            raise WeightError("wmb_bytes", f"{self.wmb_bytes} bytes hold fewer than the "
                                           f"{bits} mask bits")
        if self.dst_addr is not None:
            if self.dst_addr % ADDRESS_ALIGN:
                raise WeightError("dst_addr", f"0x{self.dst_addr:x} is not {ADDRESS_ALIGN}-byte "
                                              f"aligned")
            if self.dst_addr + pad_to(self.dense_bytes, SIZE_ALIGN) > lim:
                raise WeightError("dst_addr", f"the {self.dense_bytes}-byte image passes the "
                                              f"{self.address_bits}-bit address space")
            src = [(getattr(self, f"{n}_addr"), getattr(self, f"{n}_bytes"))
                   for n in ("weight", "wmb", "wgs")]
            d0, d1 = self.dst_addr, self.dst_addr + pad_to(self.dense_bytes, SIZE_ALIGN)
            for (a, size), n in zip(src, ("weight", "wmb", "wgs"), strict=True):
                if a < d1 and d0 < a + size:
                    raise WeightError("dst_addr", f"the dense image overlaps the {n} surface")

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def plan_job(packed: CompressedWeights, base: int = 0, dst: bool | int = False,
             address_bits: int = 32) -> DecompressJob:
    """Place WGS, WMB and weight surfaces one after another from ``base`` (256-byte aligned)
    and describe the job; ``dst=True`` puts the dense image after them, an int places it."""
    if not 0 <= base < 1 << address_bits:
        raise WeightError("base", f"must be an address in [0, 2^{address_bits}), not {base}")
    spec = packed.spec
    if spec.kernels_per_group != KERNELS_PER_GROUP[spec.element_bytes]:
        raise ConfigError("config", f"the sparse weight decompressor expands nv_full's groups "
                                    f"({KERNELS_PER_GROUP[spec.element_bytes]} kernels), not "
                                    f"{spec.config.name}'s {spec.kernels_per_group}")
    addr = pad_to(base, ADDRESS_ALIGN)
    where = {}
    for name in ("wgs", "wmb", "weight"):
        where[name] = addr
        addr = pad_to(addr + getattr(packed, name).size, ADDRESS_ALIGN)
    dst_addr = addr if dst is True else (None if dst is False else int(dst))
    return DecompressJob(where["weight"], packed.weight.size, where["wmb"], packed.wmb.size,
                         where["wgs"], packed.wgs.size, spec.groups, spec.shape[0],
                         spec.bytes_per_kernel, spec.element_bytes, dst_addr, spec.sets,
                         address_bits)
