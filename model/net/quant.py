"""Quantisation and magnitude pruning of weight layers.

- **int8 / int16**: symmetric, one scale per kernel (output channel): ``scale = max|w| / Q``
  with Q = 127 or 32767, ``q = round(w / scale)`` to nearest even; an all-zero kernel gets
  scale 1. A quantised model's own integers and scales are kept (widened exactly for int16;
  an int16 model asked for int8 is refused rather than requantised).
- **fp16**: the float weights rounded to nearest fp16; a weight beyond ±65504 is refused.
- **Auxiliary operands** (bias, batch-norm multiplier and addend, PReLU slopes) are 2-byte
  components: int16 with one symmetric scale per operand and layer for int8/int16, fp16 for
  fp16. Combining them with the weight and activation scales into SDP's shifts needs the
  activations' ranges (calibration), which is the runtime's part: the scales are written out.
- **Pruning** zeroes the weights of least magnitude before quantisation: a fraction of each
  layer (``per_layer``), or of all weights together (``global``: one magnitude threshold,
  so layers with small weights lose more).
"""

from __future__ import annotations

import numpy as np

from ..nvdla.weights import PRECISIONS
from .graph import Layer, NetError

QMAX = {"int8": 127, "int16": 32767}


def quantise(layer: Layer, precision: str, weight: np.ndarray | None = None):
    """(element array, per-kernel scales or None for fp16) of ``weight`` (default the layer's
    own) in ``precision``."""
    w = layer.weight if weight is None else weight
    if precision == "fp16":
        f = w.astype(np.float32) * (layer.scales[:, None, None, None] if layer.scales is not None
                                    else np.float32(1))
        if not np.isfinite(f).all():
            raise NetError(layer.name, "weights hold NaN or infinity")
        with np.errstate(over="ignore"):
            h = f.astype(np.float16)
        if np.isinf(h).any():
            raise NetError(layer.name, "weights beyond fp16's ±65504")
        return h, None
    qmax, dtype = QMAX[precision], PRECISIONS[precision][0]
    if layer.scales is not None:
        info = np.iinfo(dtype)
        if w.min(initial=0) < info.min or w.max(initial=0) > info.max:
            raise NetError(layer.name, f"the model's quantised weights ({w.dtype}) do not fit "
                                       f"{precision}")
        return w.astype(dtype), layer.scales
    f = w.astype(np.float32)
    if not np.isfinite(f).all():
        raise NetError(layer.name, "weights hold NaN or infinity")
    peak = np.abs(f).reshape(f.shape[0], -1).max(axis=1)
    scales = np.where(peak > 0, peak / np.float32(qmax), np.float32(1)).astype(np.float32)
    q = np.rint(f / scales[:, None, None, None])
    q = np.clip(q, -qmax, qmax).astype(dtype)
    return q, scales


def dequantise(q: np.ndarray, scales: np.ndarray | None) -> np.ndarray:
    """float32 weights of quantised elements (fp16 elements as they are)."""
    f = q.astype(np.float32)
    return f if scales is None else f * scales[:, None, None, None]


def quantise_aux(v: np.ndarray, precision: str):
    """(2-byte components, scale or None) of one auxiliary operand."""
    v = np.asarray(v, np.float32)
    if precision == "fp16":
        with np.errstate(over="ignore"):
            h = v.astype(np.float16)
        return h, None
    peak = float(np.abs(v).max(initial=0))
    scale = peak / 32767 if peak > 0 else 1.0
    return np.clip(np.rint(v / np.float32(scale)), -32767, 32767).astype(np.int16), scale


def prune_masks(weights: list[np.ndarray], fraction: float, scope: str) -> list[np.ndarray]:
    """Keep-masks (bool, one per layer) zeroing exactly ``fraction`` of the weights, those of
    least magnitude (ties broken by position), in each layer or over all of them (``scope``
    "layer" or "global")."""
    if not 0 <= fraction < 1:
        raise NetError("--prune", f"a fraction in [0, 1), not {fraction}")
    if scope not in ("layer", "global"):
        raise NetError("--prune-scope", f"layer or global, not {scope!r}")

    def masks(mags: np.ndarray) -> np.ndarray:
        keep = np.ones(mags.size, bool)
        n = int(fraction * mags.size)
        if n:
            keep[np.argpartition(mags, n - 1)[:n]] = False
        return keep

    mags = [np.abs(w.astype(np.float32)).ravel() for w in weights]
    if scope == "layer":
        return [masks(m).reshape(w.shape) for m, w in zip(mags, weights, strict=True)]
    keep = masks(np.concatenate(mags))
    ends = np.cumsum([m.size for m in mags])
    return [k.reshape(w.shape) for k, w in zip(np.split(keep, ends[:-1]), weights, strict=True)]


def relative_error(reference: np.ndarray, approx: np.ndarray) -> float:
    """||reference - approx|| / ||reference|| (0 for an all-zero reference)."""
    r = reference.astype(np.float64)
    norm = np.linalg.norm(r)
    return float(np.linalg.norm(r - approx.astype(np.float64)) / norm) if norm else 0.0
