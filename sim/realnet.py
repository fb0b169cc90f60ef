"""A real network's data for the benches: PP-OCR's pretrained text detector (``ppocr-det``,
installed by the setup), through the model's own flow (docs/net.md).

- :func:`layer_surface`: one of its layers, pruned by half, quantised to int8 and laid out and
  compressed as ``atomcube net`` does;
- :func:`first_activation`: its first layer's output (the convolution and its batch-norm, the
  network's own weights) on a generated page of dark strokes, quantised to int8."""

from __future__ import annotations

import numpy as np

from atomcube.model.net.flow import Options, build_network
from atomcube.model.net.graph import Network, example, read_onnx

LAYER = "p2o.Conv.10"        #: 96 kernels of 96 channels: three full groups, a 64 + 32 chunk
INPUT = (1, 3, 64, 64)


def _network() -> Network:
    path, _ = example("ppocr-det")
    return read_onnx(path, INPUT)


def layer_surface(prune: float = 0.5):
    """(weight surface, layer name): :data:`LAYER` as the flow lays it out, compressed."""
    net = _network()
    layer = next(la for la in net.layers if la.name == LAYER)
    one = Network(net.path, [layer], net.inputs)
    build = build_network(one, Options("nv_full", "int8", compress="always", prune=prune))
    return build.layers[0].surfaces[0], f"{LAYER} of ppocr-det, {prune:.0%} pruned, int8"


def page(shape=INPUT, seed: int = 3) -> np.ndarray:
    """A generated input: light paper with dark horizontal and vertical strokes, in [0, 1]."""
    n, c, h, w = shape
    rng = np.random.default_rng(seed)
    img = np.full((h, w), 0.9, np.float32)
    for _ in range(24):
        y, x = rng.integers(0, h), rng.integers(0, w)
        long_, thick = rng.integers(4, w // 2), rng.integers(1, 3)
        if rng.random() < 0.5:
            img[y:y + thick, x:x + long_] = 0.1
        else:
            img[y:y + long_, x:x + thick] = 0.1
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    return np.broadcast_to(img, (n, c, h, w)).copy()


def first_activation() -> np.ndarray:
    """The first layer's int8 output (N, C, H, W) on :func:`page`: convolution, bias and
    batch-norm in float32, then one symmetric scale for the tensor."""
    layer = _network().layers[0]
    x = page()
    top, left, bottom, right = layer.pads
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    k, c, r, s = layer.weight.shape
    sx, sy = layer.stride
    win = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(2, 3))[:, :, ::sy, ::sx]
    y = np.einsum("nchwrs,kcrs->nkhw", win, layer.weight.astype(np.float32))
    if layer.bias is not None:
        y += layer.bias[None, :, None, None]
    if layer.bn_mul is not None:
        y = y * layer.bn_mul[None, :, None, None] + layer.bn_add[None, :, None, None]
    assert y.shape == layer.output_shape, (y.shape, layer.output_shape)
    scale = float(np.abs(y).max()) / 127
    return np.clip(np.rint(y / scale), -127, 127).astype(np.int8)
