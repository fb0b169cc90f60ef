"""NVDLA's floating-point operations as Amaranth logic, for the LUT's FP16 pipeline.

Each function builds the logic of one operation of :mod:`model.nvdla.nvfloat` (the model, whose
docstring and docs/lut.md state the rules: round to nearest even, denormal operands read as
normal numbers, tiny results flushed to signed zero, no infinity, NaNs passed through) on bit
patterns, and returns its result as a Value.

Pipelining
----------
The deeper operations take a ``stage`` callable, called at each of their cut points with the
values live there, which returns them as the next step should see them. The default passes
them through, so the operation is one block of combinational logic (as
tests/test_lut_fparith.py checks it against the results recorded from NVDLA's own C model);
the FP datapath (:mod:`hw.lut.fppipeline`) passes one that registers them, so the same code is
the pipelined operation. :func:`fp_mul` also takes ``multiply``, which makes the mantissas'
product and stands for two cut points (the operands' and the product's registers, which the
datapath puts in a multiplier block).
"""

from amaranth import Cat, Const, Mux, Value

from ...model.nvdla.nvfloat import FP16, FP17, FP32, Format

__all__ = ["fp_add", "fp_sub", "fp_mul", "fp_convert", "fp_from_fraction", "fp_to_index",
           "leading_zeros"]


def _same(*values):
    """The default ``stage``: no registers, the values as they are."""
    return values


def _split(v, f: Format):
    v = Value.cast(v)
    return v[f.bits - 1], v[f.mant:f.mant + f.expo], v[:f.mant]


def _fit(v, width: int):
    """``v`` cut or zero-extended to ``width`` bits."""
    v = Const(v, width) if isinstance(v, int) else Value.cast(v)
    return v[:width] if len(v) >= width else Cat(v, Const(0, width - len(v)))


def _join(sign, expo, mant, f: Format):
    return Cat(_fit(mant, f.mant), _fit(expo, f.expo), _fit(sign, 1))


def _largest(sign, f: Format):
    """What NVDLA writes for an infinite result: the largest finite value of the sign."""
    return Cat(Const((1 << f.mant) - 1, f.mant), Const(f.expo_max - 1, f.expo), sign)


def _is_nan(expo, mant, f: Format):
    return (expo == f.expo_max) & (mant != 0)


def _nan_first(a, b, f: Format):
    """Whether ``a`` or ``b`` is a NaN, and the one an operation returns then (``a`` first)."""
    _, ea, ma = _split(a, f)
    _, eb, mb = _split(b, f)
    return _is_nan(ea, ma, f) | _is_nan(eb, mb, f), Mux(_is_nan(ea, ma, f), a, b)


def leading_zeros(v, width: int):
    """The count of zeros above ``v``'s highest one in ``width`` bits (``width`` for 0): the
    upper half's count, or its width plus the lower half's, as a tree of log2(width) levels."""
    v = _fit(v, width)
    if width == 1:
        return ~v[0]
    high = width // 2
    upper, lower = v[width - high:], v[:width - high]
    return Mux(upper == 0, high + leading_zeros(lower, width - high),
               leading_zeros(upper, high))


def _round(v, width: int, keep: int):
    """The top ``keep`` of ``width`` bits of ``v``, rounded to nearest even on the bits below:
    (the kept bits, whether rounding carried out of them)."""
    cut = width - keep
    kept = v[cut:width]
    carry = v[cut - 1] & (v[:cut - 1].any() | kept[0])
    return (kept + carry)[:keep], carry & kept.all()


def fp_add(a, b, f: Format, stage=_same):
    """``a + b`` in format ``f`` (NVDLA's adder). Cut points: after the operands are put in
    order, after each of the alignment's two shifts, after the sum, after its leading zeros
    are counted, after it is normalised and after it is rounded."""
    a, b = Value.cast(a), Value.cast(b)
    M, more = f.mant, f.mant + 2
    width = more + M + 1                          # the aligned mantissas' width
    sa, ea, ma = _split(a, f)
    sb, eb, mb = _split(b, f)
    pa = Cat(ma, (ea != 0) | (ma != 0))
    pb = Cat(mb, (eb != 0) | (mb != 0))
    a_big = (ea > eb) | ((ea == eb) & (ma >= mb))
    nan, nan_value = _nan_first(a, b, f)
    expo, sign, big, small, diff, same, nan, nan_value = stage(
        Mux(a_big, ea, eb), Mux(a_big, sa, sb), Mux(a_big, pa, pb), Mux(a_big, pb, pa),
        Mux(a_big, ea - eb, eb - ea)[:f.expo], sa == sb, nan, nan_value)
    # the alignment in two shifts: by the difference's multiples of 8, then the rest
    big, small, diff, expo, sign, same, nan, nan_value = stage(
        big << more, (small << more) >> Cat(Const(0, 3), diff[3:]), diff[:3], expo, sign, same,
        nan, nan_value)
    big, small, expo, sign, same, nan, nan_value = stage(
        big, small >> diff, expo, sign, same, nan, nan_value)
    total, expo, sign, nan, nan_value = stage(
        Mux(same, big + small, big - small)[:width + 1], expo, sign, nan, nan_value)
    carry = total[width]
    total, zeros, empty, carry, expo, sign, nan, nan_value = stage(
        total, leading_zeros(total[:width], width), total[:width] == 0, carry, expo, sign, nan,
        nan_value)
    # a carry drops the lowest bit; otherwise the sum is normalised, or is zero if its
    # exponent would reach zero
    tiny = ~carry & ((expo <= zeros) | empty)
    mant, expo, carry, sign, nan, nan_value = stage(
        Mux(carry, total[1:], Mux(tiny, 0, (total[:width] << zeros)[:width])),
        Mux(carry, expo + 1, Mux(tiny, 0, expo - zeros)), carry, sign, nan, nan_value)
    kept, over, expo, carry, sign, nan, nan_value = stage(
        *_round(mant, width, M + 1), expo, carry, sign, nan, nan_value)
    inf = (carry & (expo >= f.expo_max)) | (over & (expo >= f.expo_max - 1))
    out = Mux(inf, _largest(sign, f), _join(sign, expo + over, kept, f))
    return Mux(nan, nan_value, out)


def fp_sub(a, b, f: Format, stage=_same):
    """``a - b``: ``a`` plus ``b`` with its sign bit flipped."""
    b = Value.cast(b)
    return fp_add(a, Cat(b[:f.bits - 1], ~b[f.bits - 1]), f, stage)


def fp_mul(a, b, f: Format, stage=_same, multiply=None):
    """``a * b`` in format ``f`` (NVDLA's multiplier). ``multiply(x, y)``, if given, returns
    the unsigned mantissas' product two steps later (two cut points); without it the product
    is combinational. Two more follow the product's normalisation and its rounding."""
    a, b = Value.cast(a), Value.cast(b)
    M = f.mant
    sa, ea, ma = _split(a, f)
    sb, eb, mb = _split(b, f)
    za = (ea == 0) & (ma == 0)
    zb = (eb == 0) & (mb == 0)
    nan, nan_value = _nan_first(a, b, f)
    side = (sa ^ sb, ea + eb, za | zb, nan, nan_value)
    if multiply is None:
        product = Cat(ma, ~za) * Cat(mb, ~zb)
    else:
        product = multiply(Cat(ma, ~za), Cat(mb, ~zb))
        side = stage(*stage(*side))
    sign, esum, zero, nan, nan_value = side
    product = Value.cast(product)[:2 * M + 2]
    zero = zero | (esum < f.bias)
    top = product[2 * M + 1]
    expo = esum - f.bias + top
    inf = ~zero & ((esum >= f.expo_max + f.bias) | (top & (esum - f.bias >= f.expo_max - 1)))
    # the product with its leading one at bit 2M+1, to be rounded to M+1 bits
    product, expo, inf, zero, sign, nan, nan_value = stage(
        Mux(top, product, product << 1)[:2 * M + 2], expo, inf, zero, sign, nan, nan_value)
    kept, over, expo, inf, zero, sign, nan, nan_value = stage(
        *_round(product, 2 * M + 2, M + 1), expo, inf, zero, sign, nan, nan_value)
    expo = expo + over
    inf = inf | (~zero & over & (expo == f.expo_max))
    zero = zero | (~inf & (expo[:f.expo + 2] == 0))
    out = Mux(zero, _join(sign, 0, 0, f),
              Mux(inf, _largest(sign, f), _join(sign, expo, kept, f)))
    return Mux(nan, nan_value, out)


def _widen(v, src: Format, dst: Format, denormals: bool):
    sign, expo, mant = _split(v, src)
    zero = (expo == 0) & (mant == 0)
    nan = _is_nan(expo, mant, src)
    shift = dst.mant - src.mant
    wide_mant = mant << shift
    out_expo = expo + (dst.bias - src.bias)
    if denormals:
        denormal = (expo == 0) & (mant != 0)
        z = leading_zeros(mant, src.mant)
        out_expo = Mux(denormal, (dst.bias - src.bias) - z, out_expo)
        wide_mant = Mux(denormal, (mant << (z + 1))[:src.mant] << shift, wide_mant)
    out = _join(sign, out_expo, wide_mant, dst)
    out = Mux(zero, _join(sign, 0, 0, dst), out)
    out = Mux((expo == src.expo_max) & (mant == 0), _largest(sign, dst), out)
    return Mux(nan, _join(sign, dst.expo_max, mant, dst), out)


def _narrow(v, src: Format, dst: Format, stage):
    """``src`` to the narrower ``dst``, with no denormals in ``dst`` (FP32 to FP17). Cut
    points: after the value is classed, and after its shifts and roundings."""
    sign, expo, mant = _split(v, src)
    delta = src.bias - dst.bias
    cut = src.mant - dst.mant
    inf = expo >= dst.expo_max + delta
    zero = ~inf & (expo < delta - dst.mant)
    in_sub = ~inf & ~zero & (expo <= delta)
    sign, expo, mant, inf, zero, in_sub, shift = stage(
        sign, expo, mant, inf, zero, in_sub, (delta + 1 - expo)[:5])
    full = Cat(mant, Const(1, 1))
    # below the smallest normal: the mantissa shifted right, rounded; only a carry into the
    # leading place keeps it (as the smallest normal)
    shifted = full >> shift
    kept_sub = shifted[cut:cut + dst.mant + 1]
    guard = shifted[cut - 1]
    sticky = (full & ((Const(1, src.mant + 1 + 32) << (shift + (cut - 1)))[:src.mant + 1 + 32]
                      - 1)) != 0
    kept, over = _round(full, src.mant + 1, dst.mant + 1)
    sign, expo, mant, inf, zero, in_sub, kept_sub, guard, sticky, kept, over = stage(
        sign, expo, mant, inf, zero, in_sub, kept_sub, guard, sticky, kept, over)
    carried = (kept_sub + (guard & (sticky | kept_sub[0])))[dst.mant]
    zero = zero | (in_sub & ~carried)
    norm_expo = (expo - delta + over)[:dst.expo + 1]
    inf = inf | (~in_sub & ~zero & (norm_expo == dst.expo_max))
    out = Mux(in_sub, _join(sign, 1, 0, dst), _join(sign, norm_expo, kept, dst))
    out = Mux(inf, _largest(sign, dst), Mux(zero, _join(sign, 0, 0, dst), out))
    return Mux(_is_nan(expo, mant, src), _join(sign, dst.expo_max, mant, dst), out)


def fp_convert(v, src: Format, dst: Format, stage=_same):
    """``v`` from ``src`` to ``dst``: FP16 to FP17, FP17 to FP32 (no cut points), FP32 to FP17
    (two)."""
    if (src, dst) == (FP16, FP17):
        return _widen(v, src, dst, denormals=True)
    if (src, dst) == (FP17, FP32):
        return _widen(v, src, dst, denormals=False)
    if (src, dst) == (FP32, FP17):
        return _narrow(v, src, dst, stage)
    raise ValueError(f"no NVDLA conversion from {src.name} to {dst.name} in the LUT")


def fp_from_fraction(frac, frac_bits: int, f: Format, stage=_same):
    """The ``frac_bits``-bit fraction as a positive float of ``f`` (zero for 0 and below the
    smallest normal, unless rounding reaches it). Cut points: after its leading zeros are
    counted, and after it is shifted to them."""
    frac = Value.cast(frac)[:frac_bits]
    frac, z, empty = stage(frac, leading_zeros(frac, frac_bits), frac == 0)
    aligned, z, empty = stage((frac << (z + 1))[:frac_bits + 1], z, empty)
    kept, over = _round(aligned, frac_bits + 1, f.mant + 1)
    zero = empty | (~over & (z + 1 >= f.bias))
    expo = Mux(over, f.bias - z, f.bias - 1 - z)
    return Mux(zero, 0, _join(0, expo, Mux(over, 0, kept), f))


def fp_to_index(v, select, index_bits: int, frac_bits: int, stage=_same):
    """An FP32 value over ``2^select`` (``select`` signed, 8 bits) as an integer part
    saturating at ``2^index_bits - 1`` and a ``frac_bits``-bit fraction; the exponent read as
    a signed 8-bit number; a NaN gives 0 and 0. Returns (integer part, fraction). Cut points:
    after the shift is worked out, and after the shifts."""
    _, expo, mant = _split(v, FP32)
    e = (expo - FP32.bias)[:8].as_signed()
    shift = e - Value.cast(select).as_signed() - FP32.mant              # -278 .. 232
    mant, shift, nan = stage(mant, shift, _is_nan(expo, mant, FP32))
    full = Cat(mant, Const(1, 1))                                       # 24 bits
    top = (1 << index_bits) - 1
    big = shift >= index_bits - FP32.mant
    right = (-shift)[:9]
    fs = shift + frac_bits
    shifted, up, down, big, left, fs_up, nan = stage(
        (full >> right)[:index_bits], (full << fs[:6])[:frac_bits], (full >> (-fs)[:9])[:frac_bits],
        big, shift >= 0, fs >= 0, nan)
    integer = Mux(big, top, shifted)
    frac = Mux(left, 0, Mux(fs_up, up, down))
    return Mux(nan, 0, integer), Mux(nan, 0, frac)
