"""A network's weight layers as NVDLA memory: quantised, laid out, compressed where it pays,
with their auxiliary data and a memory plan.

    net = read_onnx("model.onnx", input_shape=(1, 3, 48, 192))
    build = build_network(net, Options(config="nv_full", precision="int8", prune=0.3))
    build.write("out/")          # weights.bin, net.json, report.md, report.png

Each layer becomes one or more weight surfaces (a grouped convolution runs as one convolution
per group, so each group is a surface of its own):

- the mode: ``image`` for a convolution reading the network's input (pixels), ``deconv`` for a
  ConvTranspose, ``winograd`` for a 3x3 stride-1 convolution where the configuration has
  Winograd (the integer transform scaled to fit the element type, the factor written out),
  ``dc`` otherwise (fully connected layers included);
- compression, only in configurations that have it: per layer, kept where the three compressed
  surfaces are smaller than the dense one (``compress="auto"``), or always, or never. A layer
  with fewer zeros than the break-even (12.5 % for int8, 6.25 % for int16/fp16: the mask costs
  a bit per element) is reported with a warning.

The memory plan places every weight surface and auxiliary operand in one weight buffer, and
every feature data tensor a layer reads or writes in one activation buffer, each region on a
256-byte boundary and in layer order; regions are not shared between tensors whose lifetimes do
not overlap (a runtime may do so). A tensor whose shape ONNX's shape inference cannot tell is
left out of the plan with a warning on its layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import FormatError
from ..nvdla.auxdata import AuxFormat
from ..nvdla.config import NvdlaConfig
from ..nvdla.config import config as _config
from ..nvdla.feature import FeatureFormat
from ..nvdla.pixel import PixelImage
from ..nvdla.weights import WINOGRAD_G, CompressionStats, WeightSpec, compress, pad_to
from .graph import Layer, NetError, Network
from .quant import QMAX, dequantise, prune_masks, quantise, quantise_aux, relative_error

REGION_ALIGN = 256          #: every region of the plan starts on a 256-byte boundary
COMPRESS = ("auto", "always", "never")
#: the pixel format a convolution reading the network's input takes, by precision and channel
#: count (other inputs are read as feature data)
PIXEL_FORMATS = {"int8": {1: "T_R8", 3: "T_A8B8G8R8", 4: "T_A8B8G8R8"},
                 "int16": {1: "T_R8", 3: "T_A8B8G8R8", 4: "T_A8B8G8R8"},
                 "fp16": {3: "T_A16B16G16R16_F", 4: "T_A16B16G16R16_F"}}


@dataclass
class Options:
    """config       the NVDLA configuration (name or NvdlaConfig).
    precision       int8, int16 or fp16.
    compress        auto (where it saves bytes), always, or never.
    prune           fraction of weights to zero by magnitude before quantising (0: none).
    prune_scope     layer (that fraction of each layer) or global (of all weights).
    winograd        lay out eligible layers for Winograd where the configuration has it."""

    config: NvdlaConfig | str | None = None
    precision: str = "int8"
    compress: str = "auto"
    prune: float = 0.0
    prune_scope: str = "layer"
    winograd: bool = True

    def __post_init__(self):
        self.config = _config(self.config)
        self.config.check_precision(self.precision, "--precision")
        if self.compress not in COMPRESS:
            raise NetError("--compress", f"one of {', '.join(COMPRESS)}, not {self.compress!r}")
        if self.compress == "always":
            self.config.require("compression", "--compress")


def break_even(precision: str) -> float:
    """The fraction of zeros above which compression saves bytes: the mask's bit per element
    over the element's bits (1/8 for int8, 1/16 for int16 and fp16)."""
    return 1 / (8 * (1 if precision == "int8" else 2))


@dataclass
class Surface:
    """One weight surface: its spec and dense image, and its compressed form where the
    configuration has compression."""

    spec: WeightSpec
    data: np.ndarray
    packed: object = None

    @cached_property
    def stats(self) -> CompressionStats | None:
        return self.packed.stats() if self.packed is not None else None


@dataclass
class Region:
    """A placed piece of a buffer: ``offset`` and ``size`` in bytes, and what it holds."""

    name: str
    offset: int
    size: int
    what: str
    format: dict = field(default_factory=dict)


@dataclass
class LayerBuild:
    layer: Layer
    mode: str
    surfaces: list
    scales: np.ndarray | None
    winograd_scale: float | None
    zeros: int
    elements: int
    prune_error: float
    total_error: float
    compressed: bool
    aux: dict
    aux_scales: dict
    warnings: list

    @property
    def dense_bytes(self) -> int:
        return sum(s.spec.image_bytes for s in self.surfaces)

    @property
    def compressed_bytes(self) -> int | None:
        if self.surfaces[0].packed is None:
            return None
        return sum(s.stats.compressed_bytes for s in self.surfaces)

    @property
    def stored_bytes(self) -> int:
        return self.compressed_bytes if self.compressed else self.dense_bytes

    @property
    def density(self) -> float:
        return 1 - self.zeros / self.elements if self.elements else 0.0

    @property
    def below_break_even(self) -> bool:
        """Compressible, but with fewer zeros than compression needs to save bytes."""
        return (self.compressed_bytes is not None and
                self.zeros / self.elements < break_even(self.surfaces[0].spec.precision))


@dataclass
class NetBuild:
    network: Network
    options: Options
    layers: list
    weight_regions: list
    activation_regions: list
    weight_buffer: np.ndarray

    @cached_property
    def summary(self) -> dict:
        """net.json's content (:func:`.report.summary`), worked out once."""
        from .report import summary

        return summary(self)

    def write(self, folder) -> list:
        """weights.bin, net.json, report.md and report.png into ``folder``; the names."""
        from ..files import write_file
        from .report import markdown, plot

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_file(folder / "weights.bin", self.weight_buffer)
        write_file(folder / "net.json", (json.dumps(self.summary, indent=1) + "\n").encode())
        write_file(folder / "report.md", markdown(self).encode())
        plot(self, folder / "report.png")
        return ["weights.bin", "net.json", "report.md", "report.png"]


# --- per layer ----------------------------------------------------------------------------

def _mode(layer: Layer, opts: Options) -> tuple[str, dict]:
    """The weight mode and WeightSpec keywords for a layer."""
    k, c, r, s = layer.weight.shape
    if layer.op == "deconv":
        if layer.dilation != (1, 1):
            raise NetError(layer.name, "a dilated deconvolution has no NVDLA weight layout")
        return "deconv", {"stride": layer.stride}
    if (layer.op == "conv" and layer.group == 1 and layer.from_pixels
            and c in PIXEL_FORMATS[opts.precision]):
        return "image", {"pixel_channels": 4 if c == 3 else c}
    if (layer.op == "conv" and opts.winograd and opts.config.winograd and layer.group == 1
            and (r, s) == (3, 3) and layer.stride == (1, 1) and layer.dilation == (1, 1)
            and not layer.from_pixels):
        return "winograd", {}
    return "dc", {}


def _winograd_scale(q: np.ndarray, precision: str) -> float | None:
    """The factor that brings G g G^T of 3x3 integer kernels within the element type (None
    when it fits already, and for fp16)."""
    if precision == "fp16":
        return None
    t = np.einsum("ij,kcjl,ml->kcim", WINOGRAD_G, q.astype(np.float32), WINOGRAD_G)
    peak = float(np.abs(t).max(initial=0))
    qmax = QMAX[precision]
    return None if peak <= qmax else qmax / peak


def _groups(w: np.ndarray, group: int) -> list[np.ndarray]:
    kg = w.shape[0] // group
    return [w[i * kg:(i + 1) * kg] for i in range(group)]


def _layer(layer: Layer, mask, opts: Options) -> LayerBuild:
    cfg, precision = opts.config, opts.precision
    reference = layer.weight.astype(np.float32) if layer.scales is None else \
        dequantise(layer.weight, layer.scales)
    pruned = layer.weight if mask is None else np.where(mask, layer.weight, 0).astype(
        layer.weight.dtype)
    q, scales = quantise(layer, precision, pruned)
    prune_error = relative_error(reference, np.where(mask, reference, 0)) if mask is not None \
        else 0.0
    total_error = relative_error(reference, dequantise(q, scales) if scales is not None
                                 else q.astype(np.float32))
    mode, kw = _mode(layer, opts)
    if layer.group > 1 and layer.weight.shape[0] % layer.group:
        raise NetError(layer.name, f"{layer.weight.shape[0]} kernels do not split into "
                                   f"{layer.group} groups")
    wg_scale = _winograd_scale(q, precision) if mode == "winograd" else None
    surfaces = []
    for part in _groups(q, layer.group):
        spec = WeightSpec(mode, precision, part.shape, config=cfg, scale=wg_scale, **kw)
        image = spec.layout(part)
        packed = compress(image) if cfg.compression and opts.compress != "never" else None
        surfaces.append(Surface(spec, image.data, packed))
    zeros = int(q.size - np.count_nonzero(q.view(np.uint16 if q.itemsize == 2 else np.uint8)))
    build = LayerBuild(layer, mode, surfaces, scales, wg_scale, zeros, int(q.size), prune_error,
                       total_error, False, {}, {}, [])
    if build.compressed_bytes is not None:
        build.compressed = opts.compress == "always" or build.compressed_bytes < build.dense_bytes
    if build.below_break_even:
        build.warnings.append(f"{zeros / q.size:.1%} zeros, below the "
                              f"{100 * break_even(precision):.2f} % break-even"
                              + (": compressed anyway, larger" if build.compressed else ""))
    _aux(build, opts)
    return build


def _aux(build: LayerBuild, opts: Options) -> None:
    """The layer's SDP operands as NVDLA auxiliary data: bias, batch-norm (addend then
    multiplier: NVDLA adds before it multiplies, so the addend is ``add / mul``), PReLU."""
    layer, precision, cfg = build.layer, opts.precision, opts.config
    k = layer.kernels
    operands = []
    if layer.bias is not None:
        operands.append(("bias", "bias", [layer.bias]))
    if layer.bn_mul is not None:
        mul, add = layer.bn_mul, layer.bn_add
        lost = int(np.count_nonzero((mul == 0) & (add != 0)))
        if lost:
            build.warnings.append(f"{lost} channels with a batch-norm multiplier of 0 lose their "
                                  f"addend (NVDLA adds before it multiplies)")
        with np.errstate(divide="ignore", invalid="ignore"):
            addend = np.where(mul != 0, add / mul, 0).astype(np.float32)
        operands.append(("batchnorm", "batchnorm", [addend, mul]))
    if layer.prelu is not None:
        operands.append(("prelu", "prelu", [layer.prelu]))
    for name, use, parts in operands:
        fmt = AuxFormat(use, "channel", precision, 2, (k,), config=cfg)
        values, scales = zip(*(quantise_aux(p, precision) for p in parts), strict=True)
        tensor = values[0] if len(values) == 1 else np.stack(values, axis=1)
        build.aux[name] = (fmt, fmt.pack(tensor))
        build.aux_scales[name] = list(scales) if precision != "fp16" else None


# --- the network --------------------------------------------------------------------------

def build_network(net: Network, opts: Options, progress=None) -> NetBuild:
    """Every layer of ``net`` built with ``opts``; ``progress(i, total, name)`` is called as
    each layer starts."""
    floats = [layer.weight.astype(np.float32) if layer.scales is None
              else dequantise(layer.weight, layer.scales) for layer in net.layers]
    masks = prune_masks(floats, opts.prune, opts.prune_scope) if opts.prune else \
        [None] * len(floats)
    layers = []
    for i, (layer, mask) in enumerate(zip(net.layers, masks, strict=True)):
        if progress is not None:
            progress(i, len(net.layers), layer.name)
        try:
            layers.append(_layer(layer, mask, opts))
        except NetError:
            raise
        except FormatError as e:
            raise NetError(f"{layer.name}: {e.field}", e.rule) from None
    if progress is not None:
        progress(len(net.layers), len(net.layers), "")
    weights, buffer = _weight_plan(layers)
    return NetBuild(net, opts, layers, weights, _activation_plan(layers, opts), buffer)


def _weight_plan(layers) -> tuple[list, np.ndarray]:
    regions, blobs = [], []

    def place(name, kind, data, fmt):
        at = pad_to(regions[-1].offset + regions[-1].size, REGION_ALIGN) if regions else 0
        regions.append(Region(name, at, data.size, kind, fmt))
        blobs.append((at, data))

    for b in layers:
        name = b.layer.name
        for g, s in enumerate(b.surfaces):
            tag = f"{name}.g{g}" if len(b.surfaces) > 1 else name
            pieces = ([("weight", s.packed.weight), ("wmb", s.packed.wmb), ("wgs", s.packed.wgs)]
                      if b.compressed else [("weight", s.data)])
            for kind, data in pieces:
                place(f"{tag}/{kind}", kind, data, s.spec.to_dict())
        for kind, (fmt, data) in b.aux.items():
            place(f"{name}/{kind}", kind, data, {"use": fmt.use, "proc": fmt.proc,
                                                 "channels": fmt.shape[0],
                                                 "atom_bytes": fmt.atom_bytes})
    end = regions[-1].offset + regions[-1].size if regions else 0
    buffer = np.zeros(pad_to(end, REGION_ALIGN), np.uint8)
    for offset, data in blobs:
        buffer[offset:offset + data.size] = data
    return regions, buffer


def _activation_plan(layers, opts: Options) -> list:
    regions, at, seen = [], 0, set()
    for b in layers:
        layer = b.layer
        for tensor, shape, side in ((layer.input, layer.input_shape, "input"),
                                    (layer.output, layer.output_shape, "output")):
            if tensor in seen:
                continue
            seen.add(tensor)
            if shape is None:
                b.warnings.append(f"{side} {tensor!r} is not in the activation plan: ONNX "
                                  f"shape inference could not tell its shape")
                continue
            if side == "input" and b.mode == "image":
                n, c, h, w = shape
                name = PIXEL_FORMATS[opts.precision][c]
                img = PixelImage(name, w, h)
                fmt = {"format": "nvdla-pixel", "pixel_format": name, "width": w, "height": h,
                       "line_stride": img.line_stride}
                size = img.size
            else:
                try:
                    f = FeatureFormat(opts.precision, shape, config=opts.config)
                except FormatError as e:
                    raise NetError(f"{layer.name}: {side} {e.field}", e.rule) from None
                fmt, size = f.to_dict(), f.size
            regions.append(Region(tensor, at, size, side, fmt))
            at = pad_to(at + size, REGION_ALIGN)
    return regions
