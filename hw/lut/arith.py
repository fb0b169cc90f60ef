"""What the LUT unit's pipelined and serial datapaths share: the flavours' widths, the stream
layouts, the codes of a table lookup's outcome, the choice between the tables' results, and
signed saturation."""

from amaranth import Mux, signed
from amaranth.lib import data

__all__ = ["IN_BITS", "FRAC_BITS", "OUT_BITS", "in_layout", "out_layout", "HIT", "UFLOW",
           "OFLOW", "choose_lo", "saturate"]

#: by flavour: the input's bits, the fraction's bits of a table index, the output's bits
IN_BITS = {"sdp": 32, "cdp": 38}
FRAC_BITS = {"sdp": 35, "cdp": 16}
OUT_BITS = {"sdp": 32, "cdp": 16}

#: a lookup's outcome, as both datapaths and the statistics counters code it
HIT, UFLOW, OFLOW = 0, 1, 2


def in_layout(lanes, flavor):
    """A transfer into the unit: ``lanes`` samples, the lanes that hold one, the run's last."""
    return data.StructLayout({"data": data.ArrayLayout(signed(IN_BITS[flavor]), lanes),
                              "mask": lanes, "last": 1})


def out_layout(lanes, flavor):
    """A transfer out: the results, which table each came from and its state, the mask and
    last of the transfer they came in with."""
    return data.StructLayout({"data": data.ArrayLayout(signed(OUT_BITS[flavor]), lanes),
                              "chosen": lanes, "state": data.ArrayLayout(2, lanes),
                              "mask": lanes, "last": 1})


def choose_lo(le_st, lo_st, prio):
    """1 when the LO table's result wins over the LE table's (docs/lut.md); ``prio`` is the
    (underflow, hybrid, overflow) priority bits."""
    prio_u, prio_h, prio_o = prio
    le_hit, lo_hit = le_st == HIT, lo_st == HIT
    return Mux(le_hit & ~lo_hit, 0,
           Mux(lo_hit & ~le_hit, 1,
           Mux((le_st == UFLOW) & (lo_st == UFLOW), prio_u,
           Mux((le_st == OFLOW) & (lo_st == OFLOW), prio_o, prio_h))))


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
