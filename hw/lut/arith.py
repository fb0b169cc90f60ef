"""What the LUT unit's pipelined and serial datapaths share: the flavours' widths, the stream
layouts, the configuration port (and what it derives from the registers) and the table banks'
read ports, the codes of a table lookup's
outcome, the choice between the tables' results, and signed saturation."""

from amaranth import Array, Const, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["IN_BITS", "FRAC_BITS", "OUT_BITS", "in_layout", "out_layout", "config_layout",
           "config_values", "derive_config", "bank_signatures", "counted_layout", "HIT", "UFLOW",
           "OFLOW", "choose_lo", "saturate"]

#: by flavour: the input's bits, the fraction's bits of a table index, the output's bits
IN_BITS = {"sdp": 32, "cdp": 38}
FRAC_BITS = {"sdp": 35, "cdp": 16}
OUT_BITS = {"sdp": 32, "cdp": 16}

#: a lookup's outcome, as both datapaths and the statistics counters code it
HIT, UFLOW, OFLOW = 0, 1, 2

#: what a datapath hands the statistics counters for a lane it writes: the two tables' states,
#: the table chosen, and whether the lane holds a sample
counted_layout = data.StructLayout({"le": 2, "lo": 2, "chosen": 1, "present": 1})


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


def config_layout(cfg):
    """The layout of a datapath's configuration port: ``cfg`` (``{table: {name: value}}``, as
    the unit works it out from its registers) with its Python constants left out."""
    return data.StructLayout({t: data.StructLayout({k: v.shape() for k, v in c.items()
                                                   if not isinstance(v, int)})
                              for t, c in cfg.items()})


def config_values(port, entries):
    """The configuration port's fields as ``{table: {name: value}}``, with each table's entries
    less one (``entries``, ``{"le": 64, "lo": 256}``) as ``n``."""
    return {t: {**{k: getattr(port, t)[k] for k in port.shape()[t].shape.members}, "n": n}
            for t, n in entries.items()}


def derive_config(m, c, t, flavor):
    """What table ``t``'s configuration ``c`` implies, worked out ahead in one to three steps
    of registers, once for every lane and for both datapaths: the registers only change while
    the unit is idle (docs/lut.md), and a sample reaches the stage that uses them at least four
    cycles after the last register write (the start's own write, the input register, P1), so
    these copies are always current in a run. Returns ``c`` with them added."""
    W, FB = IN_BITS[flavor], FRAC_BITS[flavor]
    def derived(value, label, shape):
        r = Signal(shape, name=f"{label}_{t}")
        m.d.sync += r.eq(value)
        return r

    sel = c["select"]
    # exponential underflow reference: START + 2^offset for offset >= 0 (RTL rule); offsets
    # the model rejects (> W - 1) never hit the table, and the bias is then cut to 0. The
    # bias and the sum are registered in turn (two cycles after a write: a run's start is
    # always further away than that)
    bias = derived(Mux(c["exp"] & (c["offset"] >= 0) & (c["offset"] < W),
                       (Const(1, W + 1) << c["offset"][:6])[:W + 1], 0), "bias", W + 1)
    sel_neg = derived(sel < 0, "selneg", 1)
    sel_pos = derived(Mux(sel > W + FB, W + FB, sel[:7].as_unsigned()), "shr",
                      range(W + FB + 1))
    shl = derived(Mux(sel < -10, 10, (-sel)[:4]), "shl", 4)
    # the smallest distance whose linear index passes 511: 512 << shr, or 512 >> shl
    # rounded up (a distance of W bits never reaches 2^(W + 1)); in three steps of registers
    sat_exp = derived(Mux(sel_pos + 9 > W + 1, W + 1, sel_pos + 9), "satexp",
                      range(W + 2))
    sat_neg = derived(Array(Const(((512 + (1 << s) - 1) >> s) & 1023, 10)
                            for s in range(1 << len(shl)))[shl], "satneg", 10)
    sat = derived(Mux(sel_neg, sat_neg, Const(1, W + 2) << sat_exp), "idxsat", W + 2)
    # the index offset less one, for the even bank's address (index + 1 = e - (offset - 1))
    offset_m1 = derived(c["offset"] - 1, "offm1", signed(9))
    return {**c, "sel_neg": sel_neg, "sel_pos": sel_pos, "shl": shl, "idx_sat": sat,
            "offset_m1": offset_m1,
            "no_frac": derived(~c["exp"] & (sel < 0), "nofrac", 1),
            "ref_under": derived(c["start"] + bias.as_signed(), "refu", signed(W + 2))}



def bank_signatures(entries):
    """``{"le_even": signature, ...}``: a read port on each table's even and odd bank, from the
    datapath's side: an address and an enable out, the entry a cycle later in. ``entries`` as
    for :func:`config_values`."""
    banks = {}
    for t, n in entries.items():
        for parity, bank in ((0, "even"), (1, "odd")):
            depth = (n + 2 - parity) // 2
            banks[f"{t}_{bank}"] = wiring.Signature({
                "addr": Out(range(depth)), "en": Out(1), "data": In(signed(16))})
    return banks


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
