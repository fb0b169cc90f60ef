"""NVDLA precision rules (format seed, "Precision Type" and "FP16 Supporting").

- The four validity tables (convolution, SDP, LRN, pooling) as data, and :func:`check`, which
  raises :class:`model.errors.FormatError` on an invalid combination and otherwise returns what
  the table says (the real pipeline precision, and the weight precision for convolution).
- The conversions: pixel -> int8/int16/fp16 and int8 <-> int16, ``(d - offset) * SF`` then
  truncate (toward zero, then saturate to the type: the project's reading of "truncate2int8")
  or int-to-fp16 (round to nearest, saturating at 65504).
- FP16 handling: infinity on input becomes each sub-module's large value; results saturate at
  the largest representable value instead of overflowing; NaN propagates or, with the flush
  register set, reads as zero; NaNs are counted on the way in and out; denormals are kept;
  rounding is to nearest.
"""

from __future__ import annotations

import numpy as np

from ..errors import FormatError

INVALID = None
PRECISIONS = ("int8", "int16", "fp16")

#: convolution: (input format, output precision) -> (pipeline precision, weight precision).
#: Input formats: "image" (uint8/int16/uint16 pixels), "image_fp16", and feature data.
CONV = {
    ("image", "int8"): ("int8", "int8"), ("image", "int16"): ("int16", "int16"),
    ("image", "fp16"): ("fp16", "fp16"),
    ("image_fp16", "int8"): INVALID, ("image_fp16", "int16"): INVALID,
    ("image_fp16", "fp16"): ("fp16", "fp16"),
    ("int8", "int8"): ("int8", "int8"), ("int8", "int16"): INVALID, ("int8", "fp16"): INVALID,
    ("int16", "int8"): INVALID, ("int16", "int16"): ("int16", "int16"),
    ("int16", "fp16"): INVALID,
    ("fp16", "int8"): INVALID, ("fp16", "int16"): INVALID, ("fp16", "fp16"): ("fp16", "fp16"),
}
#: SDP (offline mode): (input, output) -> pipeline precision
SDP = {
    ("int8", "int8"): "int32", ("int8", "int16"): "int32", ("int8", "fp16"): INVALID,
    ("int16", "int8"): "int32", ("int16", "int16"): "int32", ("int16", "fp16"): "int32",
    ("fp16", "int8"): INVALID, ("fp16", "int16"): "fp32", ("fp16", "fp16"): "fp32",
}
#: LRN (CDP) and pooling (PDP): no conversion at all
LRN = {(i, o): (i if i == o else INVALID) for i in PRECISIONS for o in PRECISIONS}
POOLING = dict(LRN)
TABLES = {"conv": CONV, "sdp": SDP, "lrn": LRN, "pooling": POOLING}

#: what an fp16 infinity becomes inside each sub-module (NVDLA's data format guide)
INF_VALUE = {"conv": 65536.0, "conv_winograd": 65504.0, "sdp": 3.40282e38,
             "cdp": 4292870144.0, "pdp_average": 4292870144.0, "pdp_maxmin": np.inf}
FP16_MAX = 65504.0
SATURATE = {"int8": (-128, 127), "int16": (-32768, 32767), "fp16": (-FP16_MAX, FP16_MAX)}


def check(unit: str, input_format: str, output: str):
    """What the table gives for ``unit`` (conv, sdp, lrn, pooling); raises on an invalid
    combination, naming the table."""
    if unit not in TABLES:
        raise FormatError("unit", f"must be one of {', '.join(TABLES)}, not {unit!r}")
    table = TABLES[unit]
    inputs = sorted({i for i, _ in table})
    if input_format not in inputs:
        raise FormatError("input", f"{unit} takes {', '.join(inputs)}, not {input_format!r}")
    if output not in PRECISIONS:
        raise FormatError("output", f"must be one of {', '.join(PRECISIONS)}, not {output!r}")
    got = table[(input_format, output)]
    if got is INVALID:
        raise FormatError("output", f"{unit}: {input_format} input to {output} output is an "
                                    f"invalid case in the precision table of NVDLA's data "
                                    f"format guide")
    return got


def _saturate_int(v: np.ndarray, precision: str) -> np.ndarray:
    lo, hi = SATURATE[precision]
    return np.clip(np.trunc(v), lo, hi).astype(np.int8 if precision == "int8" else np.int16)


def to_fp16(v) -> np.ndarray:
    """Round to nearest fp16, saturating at +-65504 (NVDLA never writes infinity); NaN stays
    NaN; denormals are kept (IEEE 754)."""
    v = np.asarray(v, dtype=np.float64)
    out = np.clip(v, -FP16_MAX, FP16_MAX).astype(np.float16)
    return np.where(np.isnan(v), np.float16(np.nan), out)


def convert(d, offset: float, scale: float, precision: str) -> np.ndarray:
    """NVDLA's pixel and int8 <-> int16 conversions: ``(d - offset) * SF``, then truncate
    to int8/int16 (toward zero, saturating) or convert to fp16."""
    if precision not in PRECISIONS:
        raise FormatError("precision", f"must be one of {', '.join(PRECISIONS)}, not "
                                       f"{precision!r}")
    # (+ 0.0: a zero difference times a negative scale is the integer 0, +0 in fp16, where
    # float arithmetic would give -0)
    v = (np.asarray(d, dtype=np.float64) - offset) * scale + 0.0
    return to_fp16(v) if precision == "fp16" else _saturate_int(v, precision)


def fp16_input(x, unit: str, flush_nan: bool = False):
    """fp16 data entering a sub-module: returns (float64 values with infinities replaced by the
    sub-module's value, and NaNs flushed to zero when ``flush_nan``; the input NaN count)."""
    if unit not in INF_VALUE:
        raise FormatError("unit", f"must be one of {', '.join(INF_VALUE)}, not {unit!r}")
    a = np.asarray(x)
    if a.dtype != np.float16:
        raise FormatError("x", f"fp16 input must be float16, not {a.dtype}")
    v = a.astype(np.float64)
    nans = int(np.isnan(v).sum())
    big = INF_VALUE[unit]
    v = np.where(np.isposinf(v), big, np.where(np.isneginf(v), -big, v))
    if flush_nan:
        v = np.where(np.isnan(v), 0.0, v)
    return v, nans


def fp16_output(v):
    """Results leaving a sub-module as fp16: (values, output NaN count)."""
    out = to_fp16(v)
    return out, int(np.isnan(out).sum())
