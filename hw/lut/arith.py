"""What the LUT unit's pipelined and serial datapaths share: the hit/underflow/overflow codes of a
table lookup and signed saturation."""

from amaranth import Mux

__all__ = ["HIT", "UFLOW", "OFLOW", "saturate"]

#: a lookup's outcome, as both datapaths and the statistics counters code it
HIT, UFLOW, OFLOW = 0, 1, 2


def saturate(v, bits):
    """Signed ``v`` saturated to ``bits`` bits. It fits when its bits from ``bits - 1`` up are
    all equal: a test of bits, not a comparison, so no carry chain lies on the path."""
    v = v.as_value() if hasattr(v, "as_value") else v
    if len(v) <= bits:
        return v
    top = v[bits - 1:]
    fits = (top == 0) | (top == (1 << len(top)) - 1)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return Mux(fits, v[:bits].as_signed(), Mux(v[-1], lo, hi))
