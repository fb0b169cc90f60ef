"""NVDLA's floating-point arithmetic, bit for bit, as its FP16 LUT pipeline uses it.

NVDLA's SDP works on FP16 data in two internal formats besides FP16 itself: FP32 (1 sign,
8 exponent, 23 mantissa bits) and a 17-bit float, FP17 (1 sign, 6 exponent bits with a bias
of 31, 10 mantissa bits). Its operations are not IEEE 754's, and the LUT's results depend on
every difference, so they are modelled here exactly (docs/lut.md, "The FP16 pipeline", states
each rule in words):

- Rounding is to nearest, ties to even: for normal operands and results an addition or a
  multiplication gives IEEE 754's result. (The adder aligns the smaller operand to
  ``2 * mantissa + 3`` bits and drops what falls below; that never changes a rounded result.)
- An operand with a zero exponent and a non-zero mantissa (a denormal) counts as a normal
  number with exponent field 0 in additions and multiplications: FP32's 0x00000001 plus
  itself is 0x00800001. A result below the smallest normal becomes zero, keeping its sign.
- There is no infinity: a result too large, and an infinite operand where it is carried
  through, becomes the largest finite value of its sign. Infinite operands are otherwise
  ordinary numbers with the all-ones exponent (inf - inf is zero).
- A NaN operand is returned unchanged (the first operand's if both are NaN), and a conversion
  keeps a NaN's exponent all-ones and its mantissa's low bits, so a NaN can come out as the
  largest value.
- Adding two numbers of equal magnitude and opposite sign gives a zero with the first
  operand's sign.

Values are bit patterns in int64 arrays (non-negative, the format's width). Every function is
vectorised and keeps every intermediate below 2^62.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Format", "FP16", "FP17", "FP32", "add", "sub", "mul", "convert", "from_fraction",
           "to_index", "bits_of", "value_of", "fields"]


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: ``expo`` exponent bits, ``mant`` mantissa bits."""

    name: str
    expo: int
    mant: int

    @property
    def bits(self) -> int:
        return 1 + self.expo + self.mant

    @property
    def bias(self) -> int:
        return (1 << (self.expo - 1)) - 1

    @property
    def expo_max(self) -> int:
        return (1 << self.expo) - 1


FP16 = Format("fp16", 5, 10)
FP17 = Format("fp17", 6, 10)
FP32 = Format("fp32", 8, 23)


def fields(v, f: Format):
    """The sign, exponent and mantissa fields of bit patterns of ``f``."""
    v = np.asarray(v, np.int64)
    return (v >> (f.expo + f.mant)) & 1, (v >> f.mant) & f.expo_max, v & ((1 << f.mant) - 1)


def _join(sign, expo, mant, f: Format):
    return (np.asarray(sign, np.int64) << (f.expo + f.mant)) | (np.asarray(expo, np.int64)
                                                                 << f.mant) | mant


def _clz(v, width: int):
    """Leading zeros of ``v`` (0 <= v < 2^width, width <= 52) in ``width`` bits."""
    v = np.asarray(v, np.int64)
    _, e = np.frexp(np.maximum(v, 1).astype(np.float64))
    return np.where(v == 0, width, width - e.astype(np.int64))


def _shift(v, amount):
    """``v * 2^amount``, truncated toward zero, for ``v`` >= 0 and any integer ``amount``
    (the caller keeps left shifts below 2^62)."""
    v = np.asarray(v, np.int64)
    amount = np.asarray(amount, np.int64)
    left = np.left_shift(v, np.clip(amount, 0, 62))
    right = np.right_shift(v, np.clip(-amount, 0, 63))
    return np.where(amount >= 0, left, right)


def _round(v, width: int, keep: int):
    """The top ``keep`` of ``width`` bits of ``v``, rounded to nearest even on the bits below
    them. Returns (the kept bits mod 2^keep, whether rounding carried out of them)."""
    cut = width - keep
    kept = v >> cut
    guard = (v >> (cut - 1)) & 1
    sticky = (v & ((1 << (cut - 1)) - 1)) != 0
    carry = guard & (sticky | (kept & 1))
    over = (carry == 1) & (kept == (1 << keep) - 1)
    return (kept + carry) & ((1 << keep) - 1), over


def _largest(sign, f: Format):
    """What NVDLA writes for an infinite result: the largest finite value of the sign."""
    return _join(sign, f.expo_max - 1, (1 << f.mant) - 1, f)


def _is_nan(expo, mant, f: Format):
    return (expo == f.expo_max) & (mant != 0)


def _nan_first(a, b, result, f: Format):
    _, ea, ma = fields(a, f)
    _, eb, mb = fields(b, f)
    return np.where(_is_nan(ea, ma, f), a, np.where(_is_nan(eb, mb, f), b, result))


def add(a, b, f: Format):
    """``a + b`` in format ``f`` as NVDLA's adder computes it (module docstring)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    M, more = f.mant, f.mant + 2
    width = more + M + 1                          # the aligned mantissas' width
    sa, ea, ma = fields(a, f)
    sb, eb, mb = fields(b, f)
    pa = np.where((ea == 0) & (ma == 0), ma, ma | (1 << M))
    pb = np.where((eb == 0) & (mb == 0), mb, mb | (1 << M))
    a_big = (ea > eb) | ((ea == eb) & (ma >= mb))
    expo = np.where(a_big, ea, eb)
    sign = np.where(a_big, sa, sb)
    big = _shift(np.where(a_big, pa, pb), more)
    small = _shift(np.where(a_big, pb, pa), more - np.abs(ea - eb))
    total = np.where(sa == sb, big + small, big - small)
    carry = (total >> width) & 1
    inf = (carry == 1) & (expo >= f.expo_max - 1)
    # a carry drops the lowest bit; otherwise the sum is normalised, or is zero if its
    # exponent would reach zero
    zeros = _clz(total, width)
    tiny = (carry == 0) & ((expo <= zeros) | (total == 0))
    mant = np.where(carry == 1, total >> 1, (total << np.where(tiny, 0, zeros))
                    & ((1 << width) - 1))
    expo = np.where(carry == 1, expo + 1, np.where(tiny, 0, expo - zeros))
    mant = np.where(tiny, 0, mant)
    kept, over = _round(mant, width, M + 1)
    inf |= over & (expo >= f.expo_max - 1)
    expo = np.where(over, expo + 1, expo)
    out = np.where(inf, _largest(sign, f), _join(sign, expo, kept & ((1 << M) - 1), f))
    return _nan_first(a, b, out, f)


def sub(a, b, f: Format):
    """``a - b``: ``a`` plus ``b`` with its sign bit flipped."""
    return add(a, np.asarray(b, np.int64) ^ (1 << (f.bits - 1)), f)


def mul(a, b, f: Format):
    """``a * b`` in format ``f`` as NVDLA's multiplier computes it (module docstring)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    M = f.mant
    sa, ea, ma = fields(a, f)
    sb, eb, mb = fields(b, f)
    za = (ea == 0) & (ma == 0)
    zb = (eb == 0) & (mb == 0)
    product = np.where(za, ma, ma | (1 << M)) * np.where(zb, mb, mb | (1 << M))
    sign = sa ^ sb
    esum = ea + eb
    zero = za | zb | (esum < f.bias)
    inf = ~zero & (esum >= f.expo_max + f.bias)
    expo = esum - f.bias
    top = (product >> (2 * M + 1)) & 1
    inf |= ~zero & (top == 1) & (expo >= f.expo_max - 1)
    expo = np.where(top == 1, expo + 1, expo)
    # the product, its leading one at bit 2M+1, rounded to M+1 bits
    product = np.where(top == 1, product, product << 1)
    kept, over = _round(product, 2 * M + 2, M + 1)
    expo = np.where(over, expo + 1, expo)
    inf |= ~zero & over & (expo == f.expo_max)
    zero |= ~inf & (expo == 0)
    out = np.where(zero, _join(sign, 0, 0, f),
                   np.where(inf, _largest(sign, f),
                            _join(sign, expo & f.expo_max, kept & ((1 << M) - 1), f)))
    return _nan_first(a, b, out, f)


def _widen(v, src: Format, dst: Format, denormals: bool):
    sign, expo, mant = fields(v, src)
    zero = (expo == 0) & (mant == 0)
    nan = _is_nan(expo, mant, src)
    # a NaN keeps its mantissa in the low bits when only the exponent widens (FP16 to FP17);
    # when the mantissa widens too its payload is not shifted up
    wide_mant = mant << (dst.mant - src.mant)
    out_expo = expo + dst.bias - src.bias
    if denormals:
        denormal = (expo == 0) & (mant != 0)
        z = _clz(mant, src.mant)
        out_expo = np.where(denormal, dst.bias - src.bias - z, out_expo)
        wide_mant = np.where(denormal, ((mant << (z + 1)) & ((1 << src.mant) - 1))
                             << (dst.mant - src.mant), wide_mant)
    out = _join(sign, out_expo, wide_mant, dst)
    out = np.where(zero, _join(sign, 0, 0, dst), out)
    out = np.where((expo == src.expo_max) & (mant == 0), _largest(sign, dst), out)
    return np.where(nan, _join(sign, dst.expo_max, mant, dst), out)


def _narrow(v, src: Format, dst: Format, denormals: bool):
    sign, expo, mant = fields(v, src)
    delta = src.bias - dst.bias
    cut = src.mant - dst.mant
    inf = expo >= dst.expo_max + delta
    zero = ~inf & (expo < delta - dst.mant)
    # a result below the smallest normal: the mantissa with its leading one shifted right
    shift = np.clip(delta - expo + 1, 1, 63)
    full = mant | (1 << src.mant)
    low = (shift + cut) - 1
    guard = (full >> low) & 1
    sticky = (full & ((np.int64(1) << low) - 1)) != 0
    lsb = (full >> (low + 1)) & 1
    sub_mant = ((full >> (shift + cut)) & ((1 << (dst.mant + 1)) - 1)) + (guard & (sticky | lsb))
    sub_over = (sub_mant >> dst.mant) & 1
    in_sub = ~inf & ~zero & (expo <= delta)
    sub_expo = np.where(sub_over == 1, 1, 0)
    if not denormals:
        zero |= in_sub & (sub_over == 0)
    sub_bits = _join(sign, sub_expo, sub_mant & ((1 << dst.mant) - 1), dst)
    kept, over = _round(full, src.mant + 1, dst.mant + 1)
    norm_expo = expo - delta + over
    inf |= ~in_sub & ~zero & (norm_expo == dst.expo_max)
    norm_bits = _join(sign, norm_expo & dst.expo_max, kept & ((1 << dst.mant) - 1), dst)
    out = np.where(in_sub, sub_bits, norm_bits)
    out = np.where(inf, _largest(sign, dst), np.where(zero, _join(sign, 0, 0, dst), out))
    nan = _is_nan(expo, mant, src)
    return np.where(nan, _join(sign, dst.expo_max, mant & ((1 << dst.mant) - 1), dst), out)


#: the conversions the LUT uses: (source, destination) -> whether denormals are kept
_CONVERSIONS = {(FP16, FP17): True, (FP16, FP32): True, (FP17, FP32): False,
                (FP32, FP17): False}


def convert(v, src: Format, dst: Format):
    """``v`` from ``src`` to ``dst``: FP16 to FP17 or FP32 (exact, denormals become normal
    numbers), FP17 to FP32 (exact; an FP17 denormal reads as a normal number with exponent field 0),
    FP32 to FP17 (rounded to nearest even; below FP17's smallest normal, zero, unless rounding
    reaches it)."""
    if (src, dst) not in _CONVERSIONS:
        raise ValueError(f"no NVDLA conversion from {src.name} to {dst.name} in the LUT")
    if src.bits < dst.bits:
        return _widen(v, src, dst, _CONVERSIONS[src, dst])
    return _narrow(v, src, dst, _CONVERSIONS[src, dst])


def from_fraction(frac, frac_bits: int, f: Format):
    """The ``frac_bits``-bit fraction ``frac / 2^frac_bits`` as a positive float of ``f``,
    rounded to nearest even; zero for 0 and for values below ``f``'s smallest normal (unless
    rounding reaches it)."""
    frac = np.asarray(frac, np.int64)
    z = _clz(frac, frac_bits)
    # the fraction with its leading one at bit frac_bits, rounded to mant + 1 bits
    aligned = (frac << (z + 1)) & ((np.int64(1) << (frac_bits + 1)) - 1)
    kept, over = _round(aligned, frac_bits + 1, f.mant + 1)
    expo = np.where(over, f.bias - z, f.bias - z - 1)
    zero = (frac == 0) | (~over & (f.bias <= z + 1))
    out = _join(0, np.where(zero, 0, expo), np.where(zero | over, 0, kept & ((1 << f.mant) - 1)),
                f)
    return out


def to_index(v, select, index_bits: int, frac_bits: int):
    """An FP32 value (positive and finite, as the LUT uses it) divided by ``2^select``, as an
    integer part saturating at ``2^index_bits - 1`` and a ``frac_bits``-bit fraction. The
    exponent is read as a signed 8-bit number: the all-ones exponent (infinity) counts as
    2^-128. A NaN gives 0 and 0."""
    _, expo, mant = fields(v, FP32)
    full = mant | (1 << FP32.mant)
    e = ((expo - FP32.bias + 128) & 0xFF) - 128
    shift = e - np.asarray(select, np.int64) - FP32.mant
    top = (1 << index_bits) - 1
    # the mantissa has its leading one at bit 23: from a shift of -(23 - index_bits) up it
    # is at least 2^index_bits
    big = shift >= index_bits - FP32.mant
    integer = np.where(big, top, _shift(full, np.minimum(shift, 0)))
    fs = frac_bits + shift
    frac = np.where(shift >= 0, 0, np.where(fs >= 0, _shift(full, np.clip(fs, 0, 38))
                                            & ((np.int64(1) << frac_bits) - 1),
                                            _shift(full, fs)))
    nan = _is_nan(expo, mant, FP32)
    return np.where(nan, 0, integer), np.where(nan, 0, frac)


#: numpy's float type and the unsigned type of its bits, for the formats numpy has
_NUMPY = {FP16: (np.float16, np.uint16), FP32: (np.float32, np.uint32)}


def bits_of(x, f: Format):
    """The bit patterns of ``x`` (floats, rounded to ``f`` by numpy; FP16 or FP32)."""
    value, bits = _NUMPY[f]
    return np.asarray(x, value).view(bits).astype(np.int64)


def value_of(v, f: Format):
    """Bit patterns of FP16 or FP32 as numpy floats."""
    value, bits = _NUMPY[f]
    return np.asarray(v, np.int64).astype(bits).view(value)
