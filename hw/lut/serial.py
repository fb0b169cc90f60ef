"""The LUT unit's serial datapath (``LutUnit(serial=True)``): one sample at a time through one
index unit, one 16 x 16 multiplier and one shifting accumulator, for FPGAs too small for the
pipeline (the iCE40 UP5K has eight multipliers and 5,280 logic cells; the pipeline needs twelve
multipliers a lane there).

The arithmetic is the pipeline's, rule for rule (docs/lut.md), done in steps on shared hardware:

``acc``
    One register, ``ACC`` bits, that every step of a sample goes through: it holds the table
    distance shifted into index and fraction, then the products as they add up, then the result
    shifted into place. Each cycle it holds, loads, shifts by 1 or 8 (right) or 1 (left), or adds
    a product (``acc << 15`` or ``acc`` plus or minus a product, or zero plus a product).
``b``
    The multiplier's second operand, left-aligned: the fraction (hit) or the distance from the
    out-of-range reference (miss), consumed 15 bits a step from the top.

A sample, per lane whose mask bit is set:

1. ``LOAD`` then ``SHIFT`` then ``EVAL`` for the LE table: ``acc = (x - START) << FB``, then
   shifted right by the index select (or the leading one's position in exponential mode), or
   left for a negative select: ``acc`` then holds the index above bit FB and the fraction below.
   The same for the LO table. With both states known the table is chosen; if it is LE, LE's
   index is worked out again (the fraction is not kept for both). The chosen table's ``EVAL``
   issues the block-RAM read of its two entries and loads ``b``.
2. ``MUL``: hit: for each 15-bit limb of the fraction from the top, ``acc = (acc << 15) + y1 *
   limb`` then ``acc -= y0 * limb`` (so ``acc = (y1 - y0) * frac``; the SDP flavour adds ``y0
   << FB`` in the top step as ``y0 * (2^(FB - 30) - limb)``); miss: ``acc = (acc << 15) + SCALE
   * limb`` over the distance's limbs (the top one signed).
3. ``OUT``: shift into place (hit: right by FB; miss: right by SHIFT, or left by 32 - SHIFT
   for SHIFT >= 16), keeping the last bit shifted out and whether any other was set;
   ``ROUND`` adds the rounding carry (half away from zero); ``DONE`` saturates, adds the entry
   where the rule says so, saturates again, and writes the lane's result.

A sample takes between 13 and about 60 cycles, depending on the configuration (the index
select's size, how often LE wins and has to be redone, the miss shift). Work on a transfer
starts when the output register is empty, on the input's payload in place (the stream holds
it); the transfer is taken when its last lane is done, in the cycle the output register is
loaded, so no input register is needed. The output register fills lane by lane.
"""

from amaranth import Cat, Const, Mux, Signal, signed
from amaranth.lib.enum import Enum

from .unit import HIT, OFLOW, UFLOW, _sat

__all__ = ["serial_datapath", "acc_bits"]

LIMB = 15                      # unsigned limb of the multiplier's 16-bit signed operand
LIMBS = 3                      # limbs of the wider operand: 45 bits cover 35 (SDP) and 41 (CDP)


class Step(Enum, shape=4):
    IDLE = 0
    LOAD = 1
    SHIFT = 2
    EVAL = 3
    MUL = 4
    OUT = 5
    ROUND = 6
    DONE = 7
    NEXT = 8


def acc_bits(W, FB):
    """The accumulator's width: the distance moved up by FB and left by up to 10 (a negative
    index select), signed; and the miss product ((W + 3) x 16 bits) moved left by up to 16."""
    return max(W + FB + 11, W + 3 + 16 + 16 + 1)


def serial_datapath(unit, m, busy, closing, cfg, prio, mems, W, FB, OW):
    """Build the serial datapath for ``unit`` (a :class:`hw.lut.unit.LutUnit`) into ``m``.
    Returns the counters' inputs (one entry: LE state, LO state, chosen, 1) and when they
    count (a lane's result written)."""
    lanes, sdp = unit.lanes, unit.flavor == "sdp"
    i, o = unit.i_stream, unit.o_stream
    ACC = acc_bits(W, FB)
    BW = LIMB * LIMBS
    T = 32 if sdp else 18                 # the miss term's saturation before the entry is added

    step = Signal(Step)
    lane = Signal(range(max(lanes, 2)))
    xs = i.payload.data.as_value()        # the transfer is held, not taken, until it is done
    mask = i.payload.mask
    tsel = Signal()                       # the table being indexed: 0 = LE, 1 = LO
    final = Signal()                      # this index pass is the chosen table's
    st_le = Signal(2)
    st_lo = Signal(2)
    chosen = Signal()

    acc = Signal(signed(ACC))
    b = Signal(BW)
    cnt = Signal(range(W + FB + 1))       # shift steps left to take
    left = Signal()                       # the shift goes left
    guard = Signal()                      # the last bit shifted out to the right
    sticky = Signal()                     # any bit below the guard was set
    ua = Signal()                         # x <= START
    e = Signal(range(W))                  # leading one of x - START
    state = Signal(2)                     # the chosen table's state
    odd = Signal()
    scale = Signal(signed(16))
    shift = Signal(5)
    limb_k = Signal(range(LIMBS))
    phase_b = Signal()                    # hit: the y0 product of this limb

    # -- input: worked on in place while idle and the output register is empty, and taken once
    # its last lane is done (the stream holds a transfer until it is taken)
    with m.If(o.valid & o.ready):
        m.d.sync += o.valid.eq(0)
    with m.If((step == Step.IDLE) & i.valid & busy & ~closing & ~o.valid):
        m.d.sync += [lane.eq(0), tsel.eq(0), final.eq(0), step.eq(Step.LOAD)]

    # -- the chosen table's configuration ----------------------------------------------------------
    def pick(key):
        return Mux(tsel, cfg["lo"][key], cfg["le"][key])

    # LO has no exponential mode, so its underflow reference is its START
    start, end = pick("start"), pick("end")
    ref_under = Mux(tsel, cfg["lo"]["start"], cfg["le"]["ref_under"])
    exp = Mux(tsel, 0, cfg["le"]["exp"])
    offset = cfg["le"]["offset"]
    n = Mux(tsel, cfg["lo"]["n"], cfg["le"]["n"])

    x = Signal(signed(W))
    m.d.comb += x.eq(xs.word_select(lane, W).as_signed() if lanes > 1 else xs.as_signed())

    # one subtractor: x - START while loading, x - (the miss reference) when evaluating
    acc_top = acc[FB:]
    idx_exp = Signal(signed(11))
    m.d.comb += idx_exp.eq(e - offset)
    under = Signal()
    over = Signal()
    m.d.comb += [
        under.eq(ua | (exp & (idx_exp < 0))),
        over.eq(~under & Mux(exp, idx_exp >= n, acc_top >= n)),
    ]
    ref = Mux(step == Step.LOAD, start, Mux(under, ref_under, end))
    diff = Signal(signed(W + 3))
    m.d.comb += diff.eq(x - ref)
    index = Signal(9)
    m.d.comb += index.eq(Mux(under, 0, Mux(over, n, Mux(exp, idx_exp[:9], acc_top[:9]))))
    st_now = Signal(2)
    m.d.comb += st_now.eq(Mux(under, UFLOW, Mux(over, OFLOW, HIT)))

    lead = Signal(range(W))
    d = diff[:W]
    for bit in range(W):
        with m.If(d[bit]):
            m.d.comb += lead.eq(bit)

    # -- the table read: one port pair per table, addressed from the chosen table's index ----------
    ports = {}
    for t in ("le", "lo"):
        ev = mems[(t, 0)].read_port(domain="sync")
        od = mems[(t, 1)].read_port(domain="sync")
        issue = (step == Step.EVAL) & final & (tsel == (t == "lo"))
        m.d.comb += [ev.addr.eq((index + 1) >> 1), od.addr.eq(index >> 1),
                     ev.en.eq(issue), od.en.eq(issue)]
        ports[t] = (ev, od)
    ev_d = Mux(tsel, ports["lo"][0].data, ports["le"][0].data)
    od_d = Mux(tsel, ports["lo"][1].data, ports["le"][1].data)
    y0 = Mux(odd, od_d, ev_d).as_signed()
    y1 = Mux(odd, ev_d, od_d).as_signed()

    # -- the multiplier and the accumulator's adder ------------------------------------------------
    hit = state == HIT
    top = limb_k == LIMBS - 1
    limb = b[BW - LIMB:]
    fold = sdp & hit & phase_b & top      # the SDP hit's y0 << FB, folded into the top limb
    op_b = Signal(signed(16))
    folded = (1 << (FB - LIMB * (LIMBS - 1))) - limb if sdp else 0
    m.d.comb += op_b.eq(Mux(fold, folded,
                            Cat(limb, ~hit & top & limb[-1]).as_signed()))
    op_a = Signal(signed(16))
    m.d.comb += op_a.eq(Mux(hit, Mux(phase_b, y0, y1), scale))
    prod = Signal(signed(32))
    m.d.comb += prod.eq(op_a * op_b)

    sub = hit & phase_b & ~fold
    rounding = step == Step.ROUND
    base = Mux(rounding | phase_b, acc, Mux(top, 0, acc << LIMB)[:ACC])
    addend = Signal(signed(ACC))          # the product, sign-extended (inverted to subtract)
    m.d.comb += addend.eq(Mux(rounding, 0, prod ^ Mux(sub, -1, 0)))
    inc = guard & (~acc[-1] | sticky)
    carry_in = Mux(rounding, inc, sub)
    # base + addend + carry_in as one adder: the carry enters below bit 0
    total = Signal(ACC)
    m.d.comb += total.eq((Cat(carry_in, base[:ACC]) + Cat(Const(1, 1), addend))[1:ACC + 1])

    def start_shift(count, to_left):
        m.d.sync += [cnt.eq(count), left.eq(to_left), guard.eq(0), sticky.eq(0)]

    # -- the steps ---------------------------------------------------------------------------------
    written = Signal()
    with m.Switch(step):
        with m.Case(Step.LOAD):
            with m.If(~mask.bit_select(lane, 1)):
                m.d.sync += step.eq(Step.NEXT)
            with m.Else():
                sel_neg, sel_pos, shl = pick("sel_neg"), pick("sel_pos"), pick("shl")
                below = diff <= 0
                m.d.sync += [acc.eq(Cat(Const(0, FB), d)), ua.eq(below),
                             e.eq(lead), step.eq(Step.SHIFT)]
                start_shift(Mux(below, 0, Mux(exp, lead, Mux(sel_neg, shl, sel_pos))),
                            ~exp & sel_neg)

        with m.Case(Step.SHIFT, Step.OUT):
            with m.If(cnt == 0):
                m.d.sync += step.eq(Mux(step == Step.SHIFT, Step.EVAL, Step.ROUND))
            with m.Elif(left):
                m.d.sync += [acc.eq(acc << 1), cnt.eq(cnt - 1)]
            with m.Elif(cnt >= 8):
                m.d.sync += [acc.eq(acc >> 8), cnt.eq(cnt - 8), guard.eq(acc[7]),
                             sticky.eq(sticky | guard | acc[:7].any())]
            with m.Else():
                m.d.sync += [acc.eq(acc >> 1), cnt.eq(cnt - 1), guard.eq(acc[0]),
                             sticky.eq(sticky | guard)]

        with m.Case(Step.EVAL):
            with m.If(~final):
                with m.If(~tsel):
                    m.d.sync += [st_le.eq(st_now), tsel.eq(1), step.eq(Step.LOAD)]
                with m.Else():
                    pick_lo = unit._choose(st_le, st_now, prio)
                    m.d.sync += [st_lo.eq(st_now), chosen.eq(pick_lo), final.eq(1)]
                    # LO chosen: its index is in acc now, so this pass becomes the final one
                    with m.If(pick_lo):
                        m.d.sync += step.eq(Step.EVAL)
                    with m.Else():
                        m.d.sync += [tsel.eq(0), step.eq(Step.LOAD)]
            with m.Else():
                # the read is issued (above); b takes the fraction or the miss distance
                frac = Mux(st_now == HIT, acc[:FB], 0)
                sc = Mux(under, pick("uscale"), pick("oscale"))
                sh = Mux(under, pick("ushift"), pick("oshift"))
                m.d.sync += [state.eq(st_now), odd.eq(index[0]), scale.eq(sc), shift.eq(sh),
                             b.eq(Mux(st_now == HIT, frac, diff)),
                             limb_k.eq(LIMBS - 1), phase_b.eq(0), step.eq(Step.MUL)]

        with m.Case(Step.MUL):
            m.d.sync += acc.eq(total)
            with m.If(hit & ~phase_b):
                m.d.sync += phase_b.eq(1)
            with m.Else():
                m.d.sync += [phase_b.eq(0), b.eq(b << LIMB), limb_k.eq(limb_k - 1)]
                with m.If(limb_k == 0):
                    m.d.sync += step.eq(Step.OUT)
                    with m.If(hit):
                        start_shift(FB, 0)
                    with m.Elif(shift >= 16):
                        start_shift(32 - shift, 1)
                    with m.Else():
                        start_shift(shift, 0)

        with m.Case(Step.ROUND):
            m.d.sync += [acc.eq(total), step.eq(Step.DONE)]

        with m.Case(Step.DONE):
            # SDP hit: sat32 of the rounded sum; otherwise the entry plus the saturated term
            term = _sat(acc, T)
            with_entry = Mux(sdp & hit, 0, y0) + term
            res = _sat(with_entry, OW)
            for k in range(lanes):
                with m.If(lane == k):
                    m.d.sync += [o.payload.data[k].eq(res), o.payload.state[k].eq(state),
                                 o.payload.chosen[k].eq(chosen)]
            m.d.comb += written.eq(1)
            m.d.sync += step.eq(Step.NEXT)

        with m.Case(Step.NEXT):
            with m.If(lane == lanes - 1):
                m.d.comb += i.ready.eq(1)
                m.d.sync += [o.valid.eq(1), o.payload.mask.eq(mask),
                             o.payload.last.eq(i.payload.last), step.eq(Step.IDLE)]
                with m.If(i.payload.last):
                    m.d.sync += closing.eq(1)
            with m.Else():
                m.d.sync += [lane.eq(lane + 1), tsel.eq(0), final.eq(0), step.eq(Step.LOAD)]

    return [(st_le, st_lo, chosen, Const(1, 1))], written
