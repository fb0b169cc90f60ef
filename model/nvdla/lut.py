"""NVDLA's two-table hybrid lookup table, bit for bit.

This is the arithmetic that docs/lut.md ("The arithmetic") states, NVDLA's RTL behaviour, for
both flavours:

- ``"sdp"``: int32 input, 35-bit fraction, int32 output.
- ``"cdp"``: 38-bit signed input, 16-bit fraction, int16 result per table.

and the floating-point pipelines (``LutConfig(precision="fp16")``, docs/lut.md, "The FP16
pipeline"): FP32 input, START/END as FP32, FP16 table entries and slope scales, the
interpolation in NVDLA's 17-bit float (:mod:`.nvfloat`); SDP's output FP32, CDP's FP17
(returned widened to FP32), each as NVDLA computes it.

Everything is vectorised over numpy int64 arrays. Every intermediate is bounded so that int64
holds it exactly: the SDP interpolation sum stays below 2^51, the out-of-range product below 2^48
(SDP) or 2^54 (CDP), and before a left-shifting slope the product is clamped to +-2^40. That
clamp is exact, because any product that large saturates the result either way.

Example
-------
>>> cfg = LutConfig(le_table=le, lo_table=lo, le_function=1, lo_index_select=9, lo_start=-1 << 17)
>>> res = evaluate(np.array([0, 4096]), cfg, "sdp")
>>> res.out, res.chosen, res.counters
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace

import numpy as np

from . import nvfloat
from .nvfloat import FP16, FP17, FP32

__all__ = ["LE_ENTRIES", "LO_ENTRIES", "LE", "LO", "HIT", "UFLOW", "OFLOW", "FLAVORS",
           "PRECISIONS", "LutConfig", "LutResult", "evaluate", "LutAccess", "round_shift",
           "COUNTERS"]

LE_ENTRIES = 65
LO_ENTRIES = 257
LE, LO = 0, 1                     # table ids (also LUT_ACCESS_CFG.TABLE_ID and the priorities)
HIT, UFLOW, OFLOW = 0, 1, 2       # per-table state
FLAVORS = ("sdp", "cdp")
PRECISIONS = ("int", "fp16")

INPUT_BITS = {"sdp": 32, "cdp": 38}
FRAC_BITS = {"sdp": 35, "cdp": 16}
CDP_FP_FRAC_BITS = 16             # the fraction's bits in CDP's FP16 pipeline
COUNTER_MAX = (1 << 32) - 1
# Names of the statistics counters, per flavour (docs/lut.md, "The arithmetic").
COUNTERS = {
    "sdp": ("uflow", "oflow", "hybrid", "le_hit", "lo_hit"),
    "cdp": ("uflow", "oflow", "le_hit", "lo_hit", "priority"),
}


class LeFunction(enum.IntEnum):
    EXPONENTIAL = 0
    LINEAR = 1


def _signed_range(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


@dataclass(frozen=True)
class LutConfig:
    """Tables and registers of one LUT, named as NVDLA's registers are.

    Values are the registers' meanings as signed integers (``le_index_select=-2``, not 0xFE), so a
    register dump plugs in after sign extension. Table entries are int16.

    With ``precision="fp16"`` the tables and slope scales hold FP16 numbers and
    START/END FP32 numbers: give them as floats (rounded to nearest by numpy: FP16 for table
    entries and scales, FP32 for START/END) or as their bit patterns (ints; 16-bit patterns as
    int16 or uint16, 32-bit ones as int32 or uint32). They are kept as bit patterns, signed as
    the integer path's are. The SHIFT fields are not used there.

    Parameters
    ----------
    le_table, lo_table : array-like of int
        65 and 257 entries, each in [-32768, 32767].
    le_function : int
        0 = exponential, 1 = linear (``LUT_LE_FUNCTION``).
    le_index_offset : int
        Signed 8 bits: exponent of LE entry 0 in exponential mode.
    le_index_select, lo_index_select : int
        Signed 8 bits: log2 of the step in linear mode.
    le_start, le_end, lo_start, lo_end : int
        Coverage, in the input's encoding: signed 32 bits (SDP) or 38 bits (CDP).
    le_uflow_scale, le_oflow_scale, lo_uflow_scale, lo_oflow_scale : int
        Signed 16 bits: out-of-range slope.
    le_uflow_shift, le_oflow_shift, lo_uflow_shift, lo_oflow_shift : int
        5 bits: 0..15 rounded right shift; 16..31 left shift by 32 - value (saturating).
    uflow_priority, oflow_priority, hybrid_priority : int
        0 = take LE, 1 = take LO.
    precision : {"int", "fp16"}
        The pipeline: integer (SDP's int32, CDP's 38-bit) or SDP's floating-point one.
    """

    le_table: np.ndarray = field(default_factory=lambda: np.zeros(LE_ENTRIES, np.int64))
    lo_table: np.ndarray = field(default_factory=lambda: np.zeros(LO_ENTRIES, np.int64))
    le_function: int = LeFunction.LINEAR
    le_index_offset: int = 0
    le_index_select: int = 0
    lo_index_select: int = 0
    le_start: int = 0
    le_end: int = 0
    lo_start: int = 0
    lo_end: int = 0
    le_uflow_scale: int = 0
    le_uflow_shift: int = 0
    le_oflow_scale: int = 0
    le_oflow_shift: int = 0
    lo_uflow_scale: int = 0
    lo_uflow_shift: int = 0
    lo_oflow_scale: int = 0
    lo_oflow_shift: int = 0
    uflow_priority: int = 0
    oflow_priority: int = 0
    hybrid_priority: int = 0
    precision: str = "int"

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not "
                             f"{self.precision!r}")
        fp = self.precision == "fp16"
        for name, n in (("le_table", LE_ENTRIES), ("lo_table", LO_ENTRIES)):
            t = np.asarray(getattr(self, name))
            if t.shape != (n,):
                raise ValueError(f"{name} must have {n} entries, not shape {t.shape}")
            if fp:
                t = _fp_bits(t, name, FP16)
            if not np.issubdtype(t.dtype, np.integer):
                if not np.all(np.isfinite(t)) or np.any(t != np.round(t)):
                    raise ValueError(f"{name} entries must be integers")
            t = t.astype(np.int64)
            if t.min() < -32768 or t.max() > 32767:
                bad = int(np.flatnonzero((t < -32768) | (t > 32767))[0])
                raise ValueError(f"{name}[{bad}] = {int(t[bad])} does not fit in int16")
            t.setflags(write=False)
            object.__setattr__(self, name, t)
        checks = {
            "le_function": (0, 1),
            "le_index_offset": _signed_range(8), "le_index_select": _signed_range(8),
            "lo_index_select": _signed_range(8),
            "uflow_priority": (0, 1), "oflow_priority": (0, 1), "hybrid_priority": (0, 1),
        }
        for t in ("le", "lo"):
            for d in ("uflow", "oflow"):
                checks[f"{t}_{d}_scale"] = _signed_range(16)
                checks[f"{t}_{d}_shift"] = (0, 31)
                if fp:
                    name = f"{t}_{d}_scale"
                    object.__setattr__(self, name, _fp_bits(getattr(self, name), name, FP16))
        if fp:
            for name in ("le_start", "le_end", "lo_start", "lo_end"):
                object.__setattr__(self, name, _fp_bits(getattr(self, name), name, FP32))
        for name, (lo, hi) in checks.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must be an int, not {v!r}")
            if not lo <= v <= hi:
                raise ValueError(f"{name} must be in [{lo}, {hi}], not {v}")
            object.__setattr__(self, name, int(v))
        for name in ("le_start", "le_end", "lo_start", "lo_end"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must be an int, not {v!r}")
            object.__setattr__(self, name, int(v))

    def check(self, flavor: str) -> None:
        """Raise ValueError if a field does not fit ``flavor``'s registers."""
        _check_flavor(flavor)
        lo, hi = _signed_range(INPUT_BITS[flavor])
        for name in ("le_start", "le_end", "lo_start", "lo_end"):
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise ValueError(f"{name} must fit in signed {INPUT_BITS[flavor]} bits for "
                                 f"{flavor.upper()}, not {v}")
        top = INPUT_BITS[flavor] - 1
        # (an FP32 difference reaches 2^127: every offset can be hit in the FP16 pipeline)
        if (self.precision == "int" and self.le_function == LeFunction.EXPONENTIAL and
                self.le_index_offset > top):
            raise ValueError(f"le_index_offset must be at most {top} in exponential mode for "
                             f"{flavor.upper()}, not {self.le_index_offset}: the LE table could "
                             f"never be hit")

    def replace(self, **changes) -> LutConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain data (tables as lists), for JSON."""
        d = {}
        for f in fields(self):
            v = getattr(self, f.name)
            d[f.name] = [int(x) for x in v] if isinstance(v, np.ndarray) else v
        return d

    @classmethod
    def from_dict(cls, d: dict) -> LutConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown LUT configuration fields: {', '.join(sorted(unknown))}")
        return cls(**d)


def _fp_bits(v, name: str, f: nvfloat.Format):
    """A field of an FP16 configuration as its bit pattern, a signed integer of ``f``'s width
    (floats are rounded to ``f``; ints are bit patterns, signed or unsigned)."""
    a = np.asarray(v)
    width = f.bits
    if a.dtype.kind == "f":
        bits = nvfloat.bits_of(a, f)
    elif a.dtype.kind in "iu" and not isinstance(v, bool):
        bits = a.astype(np.int64)
        if bits.size and (bits.min() < -(1 << (width - 1)) or bits.max() >= 1 << width):
            bad = int(bits.ravel()[np.flatnonzero((bits.ravel() < -(1 << (width - 1))) |
                                                  (bits.ravel() >= 1 << width))[0]])
            raise ValueError(f"{name}: {bad} is not a {width}-bit pattern of {f.name.upper()}")
        bits = bits & ((1 << width) - 1)
    else:
        raise TypeError(f"{name} must be {f.name.upper()} numbers (floats) or their bit "
                        f"patterns (ints), not {v!r}")
    signed = np.where(bits >= 1 << (width - 1), bits - (1 << width), bits)
    return int(signed) if signed.ndim == 0 else signed


@dataclass
class LutResult:
    """What the LUT produced for a run of samples.

    Attributes
    ----------
    out : ndarray of int64, or of float32 for the FP16 pipeline
        The output: int32 range (SDP) or int16 range (CDP); FP32 for the FP16 pipeline.
    chosen : ndarray of int8
        The table whose result was taken: 0 = LE, 1 = LO.
    le_state, lo_state : ndarray of int8
        Each table's own state: 0 = hit, 1 = underflow, 2 = overflow.
    counters : dict
        The run's statistics counters (:data:`COUNTERS`), saturating at 2^32 - 1.
    """

    out: np.ndarray
    chosen: np.ndarray
    le_state: np.ndarray
    lo_state: np.ndarray
    counters: dict

    @property
    def state(self) -> np.ndarray:
        """The chosen table's state."""
        return np.where(self.chosen == LE, self.le_state, self.lo_state)

    @property
    def hit(self):
        return self.state == HIT

    @property
    def underflow(self):
        return self.state == UFLOW

    @property
    def overflow(self):
        return self.state == OFLOW


def _check_flavor(flavor):
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")


def round_shift(v, s):
    """``v / 2^s`` rounded half away from zero, elementwise, for s >= 0 (int64 arrays)."""
    v = np.asarray(v, np.int64)
    s = np.asarray(s, np.int64)
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    mag = (np.abs(v) + half) >> s
    return np.where(v < 0, -mag, mag)


def _sat(v, bits):
    lo, hi = _signed_range(bits)
    return np.clip(v, lo, hi)


def _ilog2(d):
    """floor(log2 d) for 1 <= d < 2^53, exactly (float64 holds such integers exactly)."""
    _, e = np.frexp(d.astype(np.float64))
    return e.astype(np.int64) - 1


def _index(x, table, cfg: LutConfig, flavor):
    """Index, fraction and state of one table for every sample."""
    fb = FRAC_BITS[flavor]
    n = LE_ENTRIES - 1 if table == LE else LO_ENTRIES - 1
    start = cfg.le_start if table == LE else cfg.lo_start
    under = x <= start
    d = np.where(under, 1, x - start)                         # >= 1 where it matters
    if table == LE and cfg.le_function == LeFunction.EXPONENTIAL:
        e = _ilog2(d)
        under |= e < cfg.le_index_offset
        index = e - cfg.le_index_offset
        rem = d - np.left_shift(np.int64(1), e)
        frac = np.where(e <= fb, rem << np.maximum(fb - e, 0), rem >> np.maximum(e - fb, 0))
    else:
        s = cfg.le_index_select if table == LE else cfg.lo_index_select
        if s >= 0:
            index = d >> min(s, 63)
            low = d & ((1 << min(s, 63)) - 1)
            frac = low << (fb - s) if s <= fb else low >> min(s - fb, 63)
        else:
            index = np.left_shift(d, min(-s, 10))             # saturates below anyway
            frac = np.zeros_like(d)
    index = np.minimum(index, 511)
    over = ~under & (index >= n)
    state = np.where(under, UFLOW, np.where(over, OFLOW, HIT)).astype(np.int8)
    index = np.where(state == HIT, index, 0)
    frac = np.where(state == HIT, frac, 0)
    return index, frac, state


def _slope(p, shift):
    """The out-of-range term: ``p`` (x - ref, times SCALE) shifted by a 5-bit SHIFT field."""
    left = shift >= 16
    amount = np.where(left, 32 - shift, 0)
    pl = np.clip(p, -(1 << 40), 1 << 40) << amount
    return np.where(left, pl, round_shift(p, np.where(left, 0, shift)))


def _table_out(x, table, cfg, flavor, index, frac, state):
    t = cfg.le_table if table == LE else cfg.lo_table
    n = len(t) - 1
    name = "le" if table == LE else "lo"
    y0 = t[index]
    y1 = t[np.minimum(index + 1, n)]
    fb = FRAC_BITS[flavor]
    if flavor == "sdp":
        hit = _sat(round_shift(y0 * ((1 << fb) - frac) + y1 * frac, fb), 32)
    else:
        hit = _sat(y0 + round_shift((y1 - y0) * frac, fb), 16)

    under = state == UFLOW
    edge = np.where(under, t[0], t[n])
    bias = 0
    if table == LE and cfg.le_function == LeFunction.EXPONENTIAL and cfg.le_index_offset >= 0:
        bias = 1 << cfg.le_index_offset
    start = getattr(cfg, f"{name}_start")
    ref = np.where(under, start + bias, getattr(cfg, f"{name}_end"))
    side = {k: np.where(under, getattr(cfg, f"{name}_uflow_{k}"), getattr(cfg, f"{name}_oflow_{k}"))
            for k in ("scale", "shift")}
    scale, shift = side["scale"], side["shift"]
    term = _slope((x - ref) * scale, shift)
    if flavor == "sdp":
        oor = _sat(edge + _sat(term, 32), 32)
    else:
        oor = _sat(edge + term, 16)
    return np.where(state == HIT, hit, oor)


def _fp_difference(x, table, cfg: LutConfig):
    """What both FP16 pipelines' index steps start from: the table's last entry's index,
    ``d = x - START`` in FP32, its exponent and mantissa fields, and whether it underflows
    (zero, negative or NaN)."""
    start = (cfg.le_start if table == LE else cfg.lo_start) & 0xFFFFFFFF
    d = nvfloat.sub(x, start, FP32)
    sign, expo, mant = nvfloat.fields(d, FP32)
    under = (sign == 1) | ((expo == 0) & (mant == 0)) | ((expo == 0xFF) & (mant != 0))
    return (LE_ENTRIES if table == LE else LO_ENTRIES) - 1, d, expo, mant, under


def _index_fp(x, table, cfg: LutConfig):
    """Index, fraction and state of one table in the FP16 pipeline: from ``x - START`` in
    FP32; zero, negative and NaN differences are underflows."""
    n, d, expo, mant, under = _fp_difference(x, table, cfg)
    if table == LE and cfg.le_function == LeFunction.EXPONENTIAL:
        # one entry per octave: the difference's exponent less the offset, and its mantissa
        # as the fraction
        index = expo - FP32.bias - cfg.le_index_offset
        under |= index < 0
        frac = mant << (FRAC_BITS["sdp"] - FP32.mant)
    else:
        s = cfg.le_index_select if table == LE else cfg.lo_index_select
        index, frac = nvfloat.to_index(d, s, 9, FRAC_BITS["sdp"])
    over = ~under & (index >= n)
    state = np.where(under, UFLOW, np.where(over, OFLOW, HIT)).astype(np.int8)
    return np.where(state == HIT, index, 0), np.where(state == HIT, frac, 0), state


def _table_out_fp(x, table, cfg, index, frac, state):
    """One table's FP32 result bits in the FP16 pipeline: a hit interpolates its two entries
    with weights (1 - fraction) and fraction, each rounded to FP17, in FP17; a miss adds
    ``(x - reference) * SCALE`` to the edge entry, the difference in FP32 and the rest in
    FP17."""
    t = (cfg.le_table if table == LE else cfg.lo_table) & 0xFFFF
    n = len(t) - 1
    fb = FRAC_BITS["sdp"]
    one = FP17.bias << FP17.mant                               # 1.0 in FP17
    w0 = np.where(frac == 0, one, nvfloat.from_fraction((1 << fb) - frac, fb, FP17))
    w1 = nvfloat.from_fraction(frac, fb, FP17)
    y0 = nvfloat.convert(t[index], FP16, FP17)
    y1 = nvfloat.convert(t[np.minimum(index + 1, n)], FP16, FP17)
    hit = nvfloat.add(nvfloat.mul(w0, y0, FP17), nvfloat.mul(w1, y1, FP17), FP17)

    edge, slope = _fp_miss_terms(x, table, cfg, state, "sdp")
    oor = nvfloat.add(edge, slope, FP17)
    return nvfloat.convert(np.where(state == HIT, hit, oor), FP17, FP32)


def _fp_miss_terms(x, table, cfg, state, flavor):
    """What a miss adds in the FP16 pipelines, both FP17: the edge entry (entry 0 below the
    table, N above) and ``(x - ref) * SCALE``, the difference in FP32. ``ref`` is END above
    the table and START below it, plus 2^offset below an exponential table (its entry 0's x),
    which CDP takes as 0 for offsets of -127 and below."""
    t = (cfg.le_table if table == LE else cfg.lo_table) & 0xFFFF
    name = "le" if table == LE else "lo"
    under = state == UFLOW
    edge = nvfloat.convert(np.where(under, t[0], t[-1]), FP16, FP17)
    ref = np.where(under, getattr(cfg, f"{name}_start"), getattr(cfg, f"{name}_end"))
    ref = ref & 0xFFFFFFFF
    if table == LE and cfg.le_function == LeFunction.EXPONENTIAL:
        off = cfg.le_index_offset
        bias = 0 if flavor == "cdp" and off <= -127 else int(nvfloat.bits_of(2.0 ** off, FP32))
        ref = np.where(under, nvfloat.add(ref, bias, FP32), ref)
    scale = np.where(under, getattr(cfg, f"{name}_uflow_scale"),
                     getattr(cfg, f"{name}_oflow_scale")) & 0xFFFF
    run = nvfloat.convert(nvfloat.sub(x, ref, FP32), FP32, FP17)
    return edge, nvfloat.mul(run, nvfloat.convert(scale, FP16, FP17), FP17)


def _index_fp_cdp(x, table, cfg: LutConfig):
    """Index, 16-bit fraction and state of one table in CDP's FP16 pipeline: from ``x -
    START`` in FP32 (zero, negative and NaN differences underflow). Linear: the difference
    over ``2^select``, its integer part the index and the 16 bits below it the fraction,
    exactly (an infinite difference overflows). Exponential (LE): the exponent less the
    offset, and the mantissa's top 16 bits."""
    n, d, expo, mant, under = _fp_difference(x, table, cfg)
    if table == LE and cfg.le_function == LeFunction.EXPONENTIAL:
        index = expo - FP32.bias - cfg.le_index_offset
        under |= index < 0
        over = ~under & (index >= n)
        frac = mant >> (FP32.mant - CDP_FP_FRAC_BITS)
    else:
        s = cfg.le_index_select if table == LE else cfg.lo_index_select
        # the difference's IEEE value (denormals as denormals, the all-ones exponent as
        # infinity) over 2^select: exact in float64 (underflows, NaNs among them, read as 0)
        v = np.where(under, 0, d).astype(np.uint32).view(np.float32).astype(np.float64)
        v = v * 2.0 ** -s
        over = ~under & (v >= n)
        v = np.where(under | over, 0, v)
        index = np.floor(v).astype(np.int64)
        frac = np.floor((v - index) * (1 << CDP_FP_FRAC_BITS)).astype(np.int64)
    state = np.where(under, UFLOW, np.where(over, OFLOW, HIT)).astype(np.int8)
    return np.where(state == HIT, index, 0), np.where(state == HIT, frac, 0), state


def _table_out_fp_cdp(x, table, cfg, index, frac, state):
    """One table's FP17 result in CDP's FP16 pipeline, widened to FP32: a hit is
    ``(T[i+1] - T[i]) * frac + T[i]``, the difference in FP32 (the entries widened) then FP17,
    the fraction, product and sum in FP17; a miss is ``(x - ref) * SCALE + edge``, the
    difference in FP32, the rest in FP17 (below an exponential table ``ref = START + 2^offset``,
    with 2^offset taken as 0 for offsets of -127 and below)."""
    t = (cfg.le_table if table == LE else cfg.lo_table) & 0xFFFF
    n = len(t) - 1
    y0, y1 = t[index], t[np.minimum(index + 1, n)]
    step = nvfloat.sub(nvfloat.convert(y1, FP16, FP32), nvfloat.convert(y0, FP16, FP32), FP32)
    hit = nvfloat.add(nvfloat.mul(nvfloat.convert(step, FP32, FP17),
                                  nvfloat.from_fraction(frac, CDP_FP_FRAC_BITS, FP17), FP17),
                      nvfloat.convert(y0, FP16, FP17), FP17)
    edge, slope = _fp_miss_terms(x, table, cfg, state, "cdp")
    oor = nvfloat.add(slope, edge, FP17)                      # (the product first)
    return nvfloat.convert(np.where(state == HIT, hit, oor), FP17, FP32)


def _as_fp_input(x):
    """Samples of the FP16 pipeline (FP32 or FP16 numbers) as FP32 bit patterns."""
    a = np.asarray(x)
    if a.dtype == np.float16:
        return nvfloat.bits_of(a.astype(np.float32), FP32)
    if a.dtype != np.float32:
        raise TypeError(f"x must be float32 or float16 for the FP16 pipeline, not {a.dtype} "
                        f"(FP32 bit patterns: pass bits.view(np.float32))")
    return a.view(np.uint32).astype(np.int64)


def _as_input(x, flavor):
    """Samples as int64, checked against the flavour's input width."""
    a = np.asarray(x)
    bits = INPUT_BITS[flavor]
    lo, hi = _signed_range(bits)
    if a.dtype == object:           # Python ints beyond int64
        raise ValueError(f"x must fit in signed {bits} bits for {flavor.upper()}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"x must be an integer array (the LUT input's fixed-point encoding), "
                        f"not {a.dtype}")
    if a.size and a.dtype.kind == "u" and int(a.max()) > hi:
        raise ValueError(f"x must fit in signed {bits} bits for {flavor.upper()}, "
                         f"found {int(a.max())}")
    a = a.astype(np.int64)
    if a.size and (a.min() < lo or a.max() > hi):
        bad = int(a.ravel()[np.flatnonzero((a.ravel() < lo) | (a.ravel() > hi))[0]])
        raise ValueError(f"x must fit in signed {bits} bits for {flavor.upper()}, found {bad}")
    return a


def evaluate(x, cfg: LutConfig, flavor: str = "sdp") -> LutResult:
    """Run samples through the LUT.

    Parameters
    ----------
    x : array-like of int, or of float32 / float16
        Input samples in the pipeline's encoding: int32 for SDP, signed 38-bit for CDP; FP32
        numbers (or FP16, widened exactly) for the FP16 pipeline (``cfg.precision``).
    cfg : LutConfig
    flavor : {"sdp", "cdp"}

    Returns
    -------
    LutResult
        Per sample: output, chosen table, each table's state; and the run's counters.

    Raises
    ------
    ValueError
        For an input that does not fit the flavour, or a configuration that does not.
    """
    _check_flavor(flavor)
    cfg.check(flavor)
    fp = cfg.precision == "fp16"
    x = _as_fp_input(x) if fp else _as_input(x, flavor)
    shape = x.shape
    x = x.ravel()
    outs, states = [], []
    for table in (LE, LO):
        if fp and flavor == "cdp":
            index, frac, state = _index_fp_cdp(x, table, cfg)
            outs.append(_table_out_fp_cdp(x, table, cfg, index, frac, state))
        elif fp:
            index, frac, state = _index_fp(x, table, cfg)
            outs.append(_table_out_fp(x, table, cfg, index, frac, state))
        else:
            index, frac, state = _index(x, table, cfg, flavor)
            outs.append(_table_out(x, table, cfg, flavor, index, frac, state))
        states.append(state)
    le_s, lo_s = states
    le_hit, lo_hit = le_s == HIT, lo_s == HIT
    both_under = (le_s == UFLOW) & (lo_s == UFLOW)
    both_over = (le_s == OFLOW) & (lo_s == OFLOW)
    chosen = np.where(le_hit & ~lo_hit, LE,
             np.where(lo_hit & ~le_hit, LO,
             np.where(both_under, cfg.uflow_priority,
             np.where(both_over, cfg.oflow_priority, cfg.hybrid_priority)))).astype(np.int8)
    out = np.where(chosen == LE, outs[0], outs[1])
    if fp:
        out = out.astype(np.uint32).view(np.float32)
    counters = _counters(flavor, chosen, le_s, lo_s)
    return LutResult(out.reshape(shape), chosen.reshape(shape), le_s.reshape(shape),
                     lo_s.reshape(shape), counters)


def _counters(flavor, chosen, le_s, lo_s):
    le_hit, lo_hit = le_s == HIT, lo_s == HIT
    if flavor == "sdp":
        state = np.where(chosen == LE, le_s, lo_s)
        raw = {"uflow": state == UFLOW, "oflow": state == OFLOW, "hybrid": state == HIT,
               "le_hit": le_hit, "lo_hit": lo_hit}
    else:
        raw = {"uflow": (le_s == UFLOW) & (lo_s == UFLOW),
               "oflow": (le_s == OFLOW) & (lo_s == OFLOW),
               "le_hit": le_hit & ~lo_hit, "lo_hit": lo_hit & ~le_hit}
        raw["priority"] = ~(raw["uflow"] | raw["oflow"] | raw["le_hit"] | raw["lo_hit"])
    return {k: min(int(np.count_nonzero(v)), COUNTER_MAX) for k, v in raw.items()}


def add_counters(a: dict, b: dict) -> dict:
    """Counters of two runs' worth of samples, saturating as the hardware's do."""
    return {k: min(a[k] + b[k], COUNTER_MAX) for k in a}


class LutAccess:
    """The table programming interface: ``LUT_ACCESS_CFG`` and ``LUT_ACCESS_DATA``.

    Each read or write of DATA moves the address on by one, wrapping at 10 bits; an access past
    the selected table's last entry changes nothing and reads 0. A DATA write changes the table
    only while ``ACCESS_TYPE`` is 1 (write); a DATA read returns the entry whatever
    ``ACCESS_TYPE`` says. While :attr:`active` (a run is in progress) a DATA write is refused: it
    sets :attr:`error` and changes nothing else, the address included.
    """

    def __init__(self, cfg: LutConfig | None = None):
        cfg = cfg or LutConfig()
        self.tables = [np.array(cfg.le_table, np.int64), np.array(cfg.lo_table, np.int64)]
        self.addr = 0
        self.table_id = LE
        self.access_type = 0
        self.active = False
        self.error = False

    def write_cfg(self, addr: int, table_id: int, access_type: int) -> None:
        if not 0 <= addr < 1024:
            raise ValueError(f"addr must be in [0, 1023], not {addr}")
        if table_id not in (LE, LO) or access_type not in (0, 1):
            raise ValueError("table_id and access_type must be 0 or 1")
        self.addr, self.table_id, self.access_type = addr, table_id, access_type

    def write_data(self, value: int) -> bool:
        """Write one entry (the low 16 bits, as int16); False when refused."""
        if self.active:
            self.error = True
            return False
        t = self.tables[self.table_id]
        if self.access_type == 1 and self.addr < len(t):
            v = value & 0xFFFF
            t[self.addr] = v - 0x10000 if v & 0x8000 else v
        self.addr = (self.addr + 1) % 1024
        return True

    def read_data(self) -> int:
        """Read one entry as int16 (0 past the table's end)."""
        t = self.tables[self.table_id]
        v = int(t[self.addr]) if self.addr < len(t) else 0
        self.addr = (self.addr + 1) % 1024
        return v

    def apply(self, cfg: LutConfig) -> LutConfig:
        """``cfg`` with the tables as programmed here."""
        return cfg.replace(le_table=self.tables[LE].copy(), lo_table=self.tables[LO].copy())
