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

1. ``LOAD`` then ``PREP`` then ``SHIFT`` then ``EVAL`` for the LE table: ``acc = (x - START)
   << FB`` (LOAD), then (from PREP, which finds the leading one and sets the shift) shifted
   right by the index select (or the leading one's position in exponential mode), or left for
   a negative select: ``acc`` then holds the index above bit FB and the fraction below. The
   index and the state are registered every cycle, so EVAL reads the ones worked out in the
   cycle before it. The same for the LO table. With both states known the table is chosen; if
   it is LE, LE's index is worked out again (the fraction is not kept for both). The chosen
   table's ``EVAL`` issues the block-RAM read of its two entries and loads ``b``; ``READ``
   registers the entries.
2. ``MUL``: hit: for each 15-bit limb of the fraction from the top, ``acc = (acc << 15) + y1 *
   limb`` then ``acc -= y0 * limb`` (so ``acc = (y1 - y0) * frac``; the SDP flavour adds ``y0
   << FB`` in the top step as ``y0 * (2^(FB - 30) - limb)``); miss: ``acc = (acc << 15) + SCALE
   * limb`` over the distance's limbs (the top one signed). A product a cycle, through three
   overlapped stages (operands, product, accumulate); ``DRAIN`` waits two cycles for the last.
3. ``OUT``: shift into place (hit: right by FB; miss: right by SHIFT, or left by 32 - SHIFT
   for SHIFT >= 16), keeping the last bit shifted out and whether any other was set;
   ``ROUND`` adds the rounding carry (half away from zero); ``SAT`` saturates; ``DONE`` adds
   the entry where the rule says so, saturates again, and writes the lane's result.

   Every cycle's work is short enough for 100 MHz on an ECP5-85F-6. A sample takes between about 20
   and 70 cycles, depending on the configuration (the index select's size, how often LE wins and has
   to be redone, the miss shift). Work on a transfer starts when the output register is empty, on
   the input's payload in place (the stream holds it); the transfer is taken when its last lane is
   done, in the cycle the output register is loaded, so no input register is needed. The output
   register fills lane by lane.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.enum import Enum
from amaranth.lib.wiring import In, Out

from .arith import (
    FRAC_BITS,
    HIT,
    IN_BITS,
    OFLOW,
    OUT_BITS,
    UFLOW,
    bank_signatures,
    choose_lo,
    config_values,
    counted_layout,
    in_layout,
    out_layout,
    saturate,
)

__all__ = ["SerialDatapath", "acc_bits"]

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
    READ = 9                   # the entries from block RAM into registers
    DRAIN = 10                 # the last products through the multiplier's pipeline
    PREP = 11                  # the index shift's amount, from LOAD's registers
    SAT = 12                   # the term saturated before the entry is added


def acc_bits(W, FB):
    """The accumulator's width: the distance moved up by FB and left by up to 10 (a negative
    index select), signed; and the miss product ((W + 3) x 16 bits) moved left by up to 16."""
    return max(W + FB + 11, W + 3 + 16 + 16 + 1)


class ProductPipe(wiring.Component):
    """The serial datapath's 16 x 16 signed multiplier, in two register stages: the operands
    (``pending``: they hold a product to make), then the product, which leaves on ``o`` a cycle
    later with the tag (``sub``, ``top``, ``keep``: what the accumulator is to do with it) that
    came in beside its operands. It takes operands every cycle (``i.valid`` says whether they
    count); nothing waits on it.

    The operand and product registers have no reset, so that Yosys can take them into an
    iCE40's SB_MAC16 as its input and output registers (it has no synchronous reset); the valid
    flags say when they count."""

    TAG = {"sub": 1, "top": 1, "keep": 1}

    def __init__(self):
        super().__init__({
            "i": In(stream.Signature(data.StructLayout(
                {"a": signed(16), "b": signed(16), **self.TAG}), always_ready=True)),
            "o": Out(stream.Signature(data.StructLayout(
                {"product": signed(32), **self.TAG}), always_ready=True)),
            "pending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        i, o = self.i.payload, self.o.payload
        op_a = Signal(signed(16), reset_less=True)
        op_b = Signal(signed(16), reset_less=True)
        prod = Signal(signed(32), reset_less=True)
        ops_valid = Signal()
        prod_valid = Signal()
        ops_tag = Signal(data.StructLayout(self.TAG))
        prod_tag = Signal.like(ops_tag)
        m.d.sync += [op_a.eq(i.a), op_b.eq(i.b), ops_valid.eq(self.i.valid),
                     ops_tag.eq(Cat(i.sub, i.top, i.keep)),
                     prod.eq(op_a * op_b), prod_valid.eq(ops_valid), prod_tag.eq(ops_tag)]
        m.d.comb += [self.pending.eq(ops_valid), self.o.valid.eq(prod_valid),
                     o.product.eq(prod), Cat(o.sub, o.top, o.keep).eq(prod_tag)]
        return m


class SerialDatapath(wiring.Component):
    """The serial datapath as a component of the LUT unit (:class:`hw.lut.unit.LutUnit` with
    ``serial=True``), which owns the registers, tables and counters around it.

    Parameters: ``lanes`` and ``flavor`` as the unit's; ``cfg_layout``, the layout of the
    configuration the unit works out from its registers (:func:`~.arith.config_layout`);
    ``entries``, each table's entries less one (``{"le": 64, "lo": 256}``).

    Ports
    -----
    ``i``, ``o``: the unit's input and output streams. A transfer is worked on in place and
    taken when its last lane is done (the stream holds it meanwhile); the output register fills
    lane by lane. ``run``: a transfer may start (the unit is running and has not taken its
    last). ``took_last``: the run's last transfer is taken this cycle. ``cfg``: the
    configuration, steady while the unit runs; ``prio``: the (underflow, hybrid, overflow)
    priority bits. ``le_even``, ``le_odd``, ``lo_even``, ``lo_odd``: a read port on each table
    bank (address, enable, and the data a cycle later). ``counted``
    (:data:`~.arith.counted_layout`): the last lane's LE and LO states and the table chosen, for
    the statistics; ``written``: a lane's result was written.
    """

    def __init__(self, *, lanes, flavor, cfg_layout, entries):
        self.lanes = lanes
        self.flavor = flavor
        self.entries = entries
        super().__init__({
            "i": In(stream.Signature(in_layout(lanes, flavor))),
            "o": Out(stream.Signature(out_layout(lanes, flavor))),
            "run": In(1), "took_last": Out(1),
            "cfg": In(cfg_layout), "prio": In(3),
            **{name: Out(sig) for name, sig in bank_signatures(entries).items()},
            "counted": Out(counted_layout),
            "written": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, sdp = self.lanes, self.flavor == "sdp"
        W, FB, OW = IN_BITS[self.flavor], FRAC_BITS[self.flavor], OUT_BITS[self.flavor]
        i, o = self.i, self.o
        cfg = config_values(self.cfg, self.entries)
        prio = (self.prio[0], self.prio[1], self.prio[2])
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
        d_neg = Signal()                      # LOAD's x - START: negative
        d_hi0 = Signal()                      # LOAD's x - START: no bit set above the W in acc
        e = Signal(range(W))                  # leading one of x - START
        state = Signal(2)                     # the chosen table's state
        odd = Signal()
        scale = Signal(signed(16))
        shift = Signal(5)
        limb_k = Signal(range(LIMBS))
        phase_b = Signal()                    # hit: the y0 product of this limb
        # the registers the parts of the datapath below share
        r = SimpleNamespace(step=step, lane=lane, tsel=tsel, final=final, acc=acc, b=b,
                            guard=guard, sticky=sticky, ua=ua, e=e, state=state, odd=odd,
                            scale=scale, limb_k=limb_k, phase_b=phase_b)

        # -- input: worked on in place while idle and the output register is empty, and taken once
        # its last lane is done (the stream holds a transfer until it is taken)
        with m.If(o.valid & o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If((step == Step.IDLE) & i.valid & self.run & ~o.valid):
            m.d.sync += [lane.eq(0), tsel.eq(0), final.eq(0), step.eq(Step.LOAD)]

        # -- the chosen table's configuration ------------------------------------------------------
        def pick(key):
            return Mux(tsel, cfg["lo"][key], cfg["le"][key])

        # LO has no exponential mode, so its underflow reference is its START
        start, end = pick("start"), pick("end")
        ref_under = Mux(tsel, cfg["lo"]["start"], cfg["le"]["ref_under"])
        exp = Mux(tsel, 0, cfg["le"]["exp"])
        offset = cfg["le"]["offset"]
        n = Mux(tsel, cfg["lo"]["n"], cfg["le"]["n"])

        ix = self._index_unit(m, r, xs=xs, W=W, FB=FB, exp=exp, offset=offset, n=n,
                              refs=(start, end, ref_under))
        under, index, st_now, diff, d, held, lead = (
            ix.under, ix.index, ix.st_now, ix.diff, ix.d, ix.held, ix.lead)

        y0, y1 = self._table_read(m, r, index)

        # the entries, registered a cycle after the read (READ): a block RAM's output arrives late
        # in its cycle
        y0_r = Signal(signed(16))
        y1_r = Signal(signed(16))
        with m.If(step == Step.READ):
            m.d.sync += [y0_r.eq(y0), y1_r.eq(y1)]

        hit, issue, mul, rounding, total = self._accumulator(m, r, y0_r=y0_r, y1_r=y1_r,
                                                             FB=FB, ACC=ACC, BW=BW)

        def start_shift(count, to_left):
            m.d.sync += [cnt.eq(count), left.eq(to_left), guard.eq(0), sticky.eq(0)]

        # -- the steps -----------------------------------------------------------------------------
        written = Signal()
        with m.Switch(step):
            with m.Case(Step.LOAD):
                with m.If(~mask.bit_select(lane, 1)):
                    m.d.sync += step.eq(Step.NEXT)
                with m.Else():
                    m.d.sync += [acc.eq(Cat(Const(0, FB), d)), d_neg.eq(diff[-1]),
                                 d_hi0.eq(diff[W:] == 0), step.eq(Step.PREP)]

            with m.Case(Step.PREP):
                # the leading one, x <= START and the shift, from LOAD's registers: after the
                # subtraction in one cycle they were the longest paths
                sel_neg, sel_pos, shl = pick("sel_neg"), pick("sel_pos"), pick("shl")
                below = d_neg | (d_hi0 & (held == 0))
                m.d.sync += [e.eq(lead), ua.eq(below), step.eq(Step.SHIFT)]
                start_shift(Mux(below, 0, Mux(exp, lead, Mux(sel_neg, shl, sel_pos))),
                            ~exp & sel_neg)

            with m.Case(Step.SHIFT, Step.OUT):
                with m.If(cnt == 0):
                    m.d.sync += [step.eq(Mux(step == Step.SHIFT, Step.EVAL, Step.ROUND)),
                                 rounding.eq(step == Step.OUT)]
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
                        pick_lo = choose_lo(st_le, st_now, prio)
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
                                 limb_k.eq(LIMBS - 1), phase_b.eq(0), step.eq(Step.READ)]

            with m.Case(Step.READ):
                m.d.sync += step.eq(Step.MUL)

            with m.Case(Step.MUL):
                m.d.comb += issue.eq(1)
                with m.If(hit & ~phase_b):
                    m.d.sync += phase_b.eq(1)
                with m.Else():
                    m.d.sync += [phase_b.eq(0), b.eq(b << LIMB), limb_k.eq(limb_k - 1)]
                    with m.If(limb_k == 0):
                        m.d.sync += step.eq(Step.DRAIN)

            with m.Case(Step.DRAIN):
                # the last product is in the multiplier's stage: the accumulator takes it now
                with m.If(~mul.pending):
                    m.d.sync += step.eq(Step.OUT)
                    with m.If(hit):
                        start_shift(FB, 0)
                    with m.Elif(shift >= 16):
                        start_shift(32 - shift, 1)
                    with m.Else():
                        start_shift(shift, 0)

            with m.Case(Step.ROUND):
                m.d.sync += [acc.eq(total), step.eq(Step.SAT)]

            with m.Case(Step.SAT):
                # the term saturated, in a cycle of its own: with the entry's add and the second
                # saturation it would be too long a path for one cycle
                m.d.sync += [acc.eq(saturate(acc, T)), step.eq(Step.DONE)]

            with m.Case(Step.DONE):
                # SDP hit: sat32 of the rounded sum; otherwise the entry plus the saturated term
                term = acc[:T].as_signed()
                with_entry = Mux(sdp & hit, 0, y0_r) + term
                res = saturate(with_entry, OW)
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
                        m.d.comb += self.took_last.eq(1)
                with m.Else():
                    m.d.sync += [lane.eq(lane + 1), tsel.eq(0), final.eq(0), step.eq(Step.LOAD)]

        with m.If(mul.o.valid):
            m.d.sync += acc.eq(total)

        m.d.comb += [self.counted.le.eq(st_le), self.counted.lo.eq(st_lo),
                     self.counted.chosen.eq(chosen), self.counted.present.eq(1),
                     self.written.eq(written)]
        return m

    def _index_unit(self, m, r, *, xs, W, FB, exp, offset, n, refs):
        """The table index of the lane's sample ``x`` (of the input data ``xs``) in the table
        being indexed: one subtractor (``x - START`` while loading, ``x`` less the miss
        reference when evaluating), the index and the state registered every cycle, and the
        leading one of ``x - START``. ``exp``, ``offset``, ``n`` and ``refs`` (START, END, the
        underflow reference) are the indexed table's. Returns ``under``, ``index``, ``st_now``,
        ``diff``, ``d`` (its low W bits), ``held`` (LOAD's register of it) and ``lead``."""
        start, end, ref_under = refs
        step, acc, ua, e = r.step, r.acc, r.ua, r.e
        x = Signal(signed(W))
        m.d.comb += x.eq(xs.word_select(r.lane, W).as_signed() if self.lanes > 1
                         else xs.as_signed())

        # one subtractor: x - START while loading, x - (the miss reference) when evaluating (the
        # reference's choice from the registered underflow flag)
        acc_top = acc[FB:]
        idx_exp = Signal(signed(11))
        m.d.comb += idx_exp.eq(e - offset)
        # the index and the state, registered every cycle: EVAL reads them a cycle after SHIFT's
        # last (the cycle it finds no shift left, when acc, e and ua are final), or after the
        # EVAL before it, which changed none of them
        under_c = ua | (exp & (idx_exp < 0))
        over_c = ~under_c & Mux(exp, idx_exp >= n, acc_top >= n)
        under = Signal()
        index = Signal(9)
        st_now = Signal(2)
        m.d.sync += [under.eq(under_c),
                     index.eq(Mux(under_c, 0, Mux(over_c, n, Mux(exp, idx_exp[:9], acc_top[:9])))),
                     st_now.eq(Mux(under_c, UFLOW, Mux(over_c, OFLOW, HIT)))]
        ref = Mux(step == Step.LOAD, start, Mux(under, ref_under, end))
        diff = Signal(signed(W + 3))
        m.d.comb += diff.eq(x - ref)

        # the leading one of x - START, found in PREP from acc (LOAD's register of it)
        lead = Signal(range(W))
        d = diff[:W]
        held = acc[FB:FB + W]
        for bit in range(W):
            with m.If(held[bit]):
                m.d.comb += lead.eq(bit)
        return SimpleNamespace(under=under, index=index, st_now=st_now, diff=diff, d=d,
                               held=held, lead=lead)

    def _table_read(self, m, r, index):
        """One port pair per table, addressed from the chosen table's ``index`` in the chosen
        table's EVAL. Returns the two entries (``y0``, ``y1``) as they arrive a cycle later."""
        step, final, tsel, odd = r.step, r.final, r.tsel, r.odd
        ports = {}
        for t in ("le", "lo"):
            ev, od = getattr(self, f"{t}_even"), getattr(self, f"{t}_odd")
            issue = (step == Step.EVAL) & final & (tsel == (t == "lo"))
            m.d.comb += [ev.addr.eq((index + 1) >> 1), od.addr.eq(index >> 1),
                         ev.en.eq(issue), od.en.eq(issue)]
            ports[t] = (ev, od)
        ev_d = Mux(tsel, ports["lo"][0].data, ports["le"][0].data)
        od_d = Mux(tsel, ports["lo"][1].data, ports["le"][1].data)
        y0 = Mux(odd, od_d, ev_d).as_signed()
        y1 = Mux(odd, ev_d, od_d).as_signed()
        return y0, y1

    def _accumulator(self, m, r, *, y0_r, y1_r, FB, ACC, BW):
        """The multiplier and the accumulator's adder. Returns ``hit`` (the sample hit its
        table), ``issue`` (MUL issues a product), the multiplier, ``rounding`` and ``total``
        (the adder's sum)."""
        sdp = self.flavor == "sdp"
        state, limb_k, b, phase_b, scale = r.state, r.limb_k, r.b, r.phase_b, r.scale
        acc, guard, sticky = r.acc, r.guard, r.sticky
        # three stages, overlapped: MUL issues a product's operands into registers (with what the
        # accumulator is to do with it), the multiplier's output is registered, and the
        # accumulator adds it two cycles after the issue. DRAIN waits for the last two.
        hit = state == HIT
        top = limb_k == LIMBS - 1
        limb = b[BW - LIMB:]
        fold = sdp & hit & phase_b & top      # the SDP hit's y0 << FB, folded into the top limb
        folded = (1 << (FB - LIMB * (LIMBS - 1))) - limb if sdp else 0
        mul = m.submodules.mul = ProductPipe()
        issue = mul.i.valid
        # what the accumulator does with the product: subtract it, start from zero (the top
        # limb's first product), add to the accumulator as it is (the hit's second product)
        m.d.comb += [mul.i.payload.b.eq(Mux(fold, folded,
                                            Cat(limb, ~hit & top & limb[-1]).as_signed())),
                     mul.i.payload.a.eq(Mux(hit, Mux(phase_b, y0_r, y1_r), scale)),
                     mul.i.payload.sub.eq(hit & phase_b & ~fold), mul.i.payload.top.eq(top),
                     mul.i.payload.keep.eq(phase_b)]
        prod, ctl_m = mul.o.payload.product, mul.o.payload

        rounding = Signal()                   # step is ROUND: a register, not the step's decode,
        m.d.sync += rounding.eq(0)            # in front of the adder's 70-bit carry chain
        base = Mux(rounding | ctl_m.keep, acc, Mux(ctl_m.top, 0, acc << LIMB)[:ACC])
        addend = Signal(signed(ACC))          # the product, sign-extended (inverted to subtract)
        m.d.comb += addend.eq(Mux(rounding, 0, prod ^ Mux(ctl_m.sub, -1, 0)))
        inc = guard & (~acc[-1] | sticky)
        carry_in = Mux(rounding, inc, ctl_m.sub)
        # base + addend + carry_in as one adder: the carry enters below bit 0
        total = Signal(ACC)
        m.d.comb += total.eq((Cat(carry_in, base[:ACC]) + Cat(Const(1, 1), addend))[1:ACC + 1])
        return hit, issue, mul, rounding, total
