"""The LUT unit's pipelined integer datapath: ``lanes`` samples a cycle through thirteen stages.

:class:`LutPipeline` is the integer datapath of :class:`~hw.lut.unit.LutUnit`
(``serial=False``); the unit owns the registers, the tables and the counters around it and
reaches the tables through the pipeline's read ports. :class:`PipelineBase` is what it shares
with the FP16 datapath (:mod:`hw.lut.fppipeline`): the ports, the stall control, the valid
bits beside the data and the output register.

Timing
------
One transfer per cycle in and out (initiation interval 1) for every lane count; a result leaves
:data:`LATENCY` = 15 cycles after its sample was accepted when the output is not stalled: the
input register, :data:`STAGES` stages (P1 to P13, each about one subtract, shift, multiply or add
deep, for the clock rate), and the output register, which chooses the table. Every stage
advances together when the output register is empty or being taken, so backpressure stalls the
whole pipeline and nothing is dropped. On a platform with global buffers (the ECP5 board tops:
:mod:`hw.fabric`) that one enable reaches the stages on a global network.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..bits import first_one
from ..fabric import global_buffer, registered_copy, registered_product
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

__all__ = ["PipelineBase", "LutPipeline", "STAGES", "LATENCY"]

#: pipeline stages between the input register and the output register (P1 to P13)
STAGES = 13
#: cycles from a sample's acceptance to its result's leaving, the output not stalled
LATENCY = STAGES + 2



def _round_shift(v, sh):
    """v / 2^sh rounded half away from zero (sh: an unsigned Value or an int)."""
    if isinstance(sh, int):
        if sh == 0:
            return v
        half = 1 << (sh - 1)
        return (v + Mux(v < 0, half - 1, half)) >> sh
    half = (Const(1, 32) << sh) >> 1
    adj = Mux(v < 0, half - (sh != 0), half)
    return (v + adj.as_signed()) >> sh



class PipelineBase(wiring.Component):
    """What the pipelined datapaths (this integer one, and the FP16 one of
    :mod:`hw.lut.fppipeline`) share: their ports, the one enable of every stage, the valid,
    mask and last bits beside the data, and the output register, which chooses each lane's
    table. A datapath gives ``stages`` (its stages between the input and output registers) and
    ``_table_lane``, one table's stages for one lane.

    Parameters: ``lanes`` and ``flavor`` as the unit's; ``cfg_layout``, the layout of the
    configuration the unit works out from its registers (:func:`~.arith.config_layout`);
    ``entries``, each table's entries less one (``{"le": 64, "lo": 256}``).

    Ports
    -----
    ``i``, ``o``: the unit's input and output streams. ``run``: transfers may be taken (the unit
    is running and has not taken its last). ``took_last``: the run's last transfer is taken this
    cycle. ``cfg``: the configuration, steady while the unit runs (a sample reaches the stages
    that read it at least four cycles after the last register write); ``prio``: the (underflow,
    hybrid, overflow) priority bits. ``le_even``, ``le_odd``, ``lo_even``, ``lo_odd``: per lane,
    a read port on each table bank (address, enable, and the entry a cycle later).
    ``counted`` (:data:`~.arith.counted_layout`, per lane) and ``written``: what the output register
    takes for the statistics, and whether it takes a transfer this cycle.
    """

    stages: int

    def __init__(self, *, lanes, flavor, cfg_layout, entries):
        self.lanes = lanes
        self.flavor = flavor
        self.entries = entries
        super().__init__({
            "i": In(stream.Signature(in_layout(lanes, flavor))),
            "o": Out(stream.Signature(out_layout(lanes, flavor))),
            "run": In(1), "took_last": Out(1),
            "cfg": In(cfg_layout), "prio": In(3),
            **{name: Out(sig).array(lanes) for name, sig in bank_signatures(entries).items()},
            "counted": Out(counted_layout).array(lanes),
            "written": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lanes, stages = self.lanes, self.stages
        cfg = config_values(self.cfg, self.entries)
        prio = (self.prio[0], self.prio[1], self.prio[2])
        i, o = self.i, self.o
        go = Signal()
        m.d.comb += go.eq(~o.valid | o.ready)
        # every stage register's enable: on a platform with global buffers (a board top on the
        # ECP5: hw.fabric) it reaches them on a global network (on the full ULX3S SoC, as one
        # net of general routing, it took 14 ns to spread over the unit)
        advance = global_buffer(platform, m, go, "lut_advance")
        accept = Signal()
        m.d.comb += [i.ready.eq(go & self.run), accept.eq(i.valid & i.ready),
                     self.took_last.eq(accept & i.payload.last)]

        # valid/mask/last beside the data: index 0 is the input register, the rest the ends of
        # the stages; the output register follows
        v = [Signal(name=f"v{k}") for k in range(stages + 1)]
        mask = [Signal(lanes, name=f"mask{k}") for k in range(stages + 1)]
        last = [Signal(name=f"last{k}") for k in range(stages + 1)]
        with m.If(advance):
            m.d.sync += [v[0].eq(accept), mask[0].eq(i.payload.mask), last[0].eq(i.payload.last)]
            for k in range(1, stages + 1):
                m.d.sync += [v[k].eq(v[k - 1]), mask[k].eq(mask[k - 1]),
                             last[k].eq(last[k - 1])]

        out_data, out_chosen, out_state = [], [], []
        for lane in range(lanes):
            results = {}
            for t in ("le", "lo"):
                # the input register, a copy per table (kept apart on the ECP5 board tops), so that
                # each sits by its table's first stage: one register for both would sit between
                # them, a long route from either table's range compare
                x0 = registered_copy(platform, m, i.payload.data[lane], f"x0_{t}{lane}_",
                                     enable=advance)
                results[t] = self._table_lane(m, advance, cfg[t], t, lane, x0, platform)
            # which table, registered into the output
            (le_out, le_st), (lo_out, lo_st) = results["le"], results["lo"]
            chosen = Signal(name=f"chosen_{lane}")
            m.d.comb += chosen.eq(choose_lo(le_st, lo_st, prio))
            out_data.append(Mux(chosen, lo_out, le_out))
            out_chosen.append(chosen)
            out_state.append(Mux(chosen, lo_st, le_st))
            m.d.comb += self.counted[lane].eq(Cat(le_st, lo_st, chosen, mask[stages][lane]))

        with m.If(advance):
            m.d.sync += [
                o.valid.eq(v[stages]), o.payload.mask.eq(mask[stages]),
                o.payload.last.eq(last[stages]),
                o.payload.chosen.eq(Cat(*out_chosen)),
            ]
            for lane in range(lanes):
                m.d.sync += [o.payload.data[lane].eq(out_data[lane]),
                             o.payload.state[lane].eq(out_state[lane])]
        m.d.comb += self.written.eq(advance & v[stages])
        return m



class LutPipeline(PipelineBase):
    """The integer datapath (the pipelines of SDP's int32 and CDP's 38-bit inputs): thirteen
    stages, P1 to P13."""

    stages = STAGES

    def _table_lane(self, m, advance, c, t, lane, x0, platform):
        """Stages P1 to P13 of one table for one lane (see :data:`STAGES`); returns (result,
        state) as registered at the end of P13."""
        W, FB, OW = IN_BITS[self.flavor], FRAC_BITS[self.flavor], OUT_BITS[self.flavor]
        x0 = x0.as_signed()
        name = f"{t}{lane}"
        n = c["n"]

        def reg(value, label, shape=None):
            """``value`` registered at the end of this stage (held while stalled)."""
            r = Signal(shape if shape is not None else value.shape(), name=f"{label}_{name}")
            with m.If(advance):
                m.d.sync += r.eq(value)
            return r

        # P1: distance from the table's start
        d1 = reg((x0 - c["start"])[:W], "d1", W)
        ua1 = reg(x0 <= c["start"], "ua1", 1)
        x1 = reg(x0, "x1")

        # P2: leading one (exponential index), linear index, mantissa
        e = Signal(range(W), name=f"e_{name}")       # position of d's leading one
        m.d.comb += e.eq(first_one(d1)[1])
        sel_neg, sel_pos, neg = c["sel_neg"], c["sel_pos"], c["shl"]
        no_frac, ref_under = c["no_frac"], c["ref_under"]

        # the linear index: its low 9 bits from the shift, its saturation from a comparison
        # with a configuration-derived threshold (in parallel, not after the shift)
        raw = Mux(sel_neg, d1 << neg, d1 >> sel_pos)[:9]
        idxl2 = reg(Mux(d1 >= c["idx_sat"], 511, raw), "idxl2", 9)
        e2 = reg(e, "e2")
        # the exponential fraction is the bits below the leading one: shifted down by its
        # position below, the leading one itself lands at bit FB and falls outside the
        # fraction's FB bits, so the distance needs no clearing (no decode of e in this stage)
        num2 = reg(d1, "num2", W)
        shr2 = reg(Mux(c["exp"], e, sel_pos), "shr2", range(W + FB + 1))
        ua2 = reg(ua1, "ua2", 1)
        x2 = reg(x1, "x2")

        # P3: fraction (the variable shift's multiples of 8 here, the rest in P4), state, index
        frac = ((num2 << FB) >> Cat(Const(0, 3), shr2[3:]))[:FB + 7]
        idx_exp = Signal(signed(11), name=f"idxe_{name}")
        m.d.comb += idx_exp.eq(e2 - c["offset"])
        under = Signal(name=f"under_{name}")
        over = Signal(name=f"over_{name}")
        index = Signal(9, name=f"index_{name}")
        m.d.comb += [
            under.eq(ua2 | (c["exp"] & (idx_exp < 0))),
            over.eq(~under & Mux(c["exp"], idx_exp >= n, idxl2 >= n)),
            index.eq(Mux(under, 0, Mux(over, n, Mux(c["exp"], idx_exp[:9], idxl2)))),
        ]
        # the even bank's address, (index + 1) / 2, made here beside the index from sums of its own
        # (index + 1 for each choice), so the table read in P4 is addressed from registers alone,
        # with no add between the index and the LE table's LUT RAM
        idx_exp1 = Signal(signed(11), name=f"idxe1_{name}")
        m.d.comb += idx_exp1.eq(e2 - c["offset_m1"])
        ev_a = reg(Mux(under, 0, Mux(over, (n + 1) >> 1,
                                     Mux(c["exp"], idx_exp1[1:9], (idxl2 + 1)[1:10]))),
                   "evaddr", 9)
        state_a = reg(Mux(under, UFLOW, Mux(over, OFLOW, HIT)), "sta", 2)
        frac_a = reg(frac, "fraca", FB + 7)
        fsh_a = reg(shr2[:3], "fsha", 3)
        index_a = reg(index, "indexa", 9)
        x_a = reg(x2, "xa")

        # P4: the table read, addressed from registers (its output is registered: P5 sees it).
        # Out of range the fraction is left as it is: only the hit result uses it, and P13
        # takes the out-of-range result then
        ev = getattr(self, f"{t}_even")[lane]
        od = getattr(self, f"{t}_odd")[lane]
        m.d.comb += [ev.addr.eq(ev_a), od.addr.eq(index_a >> 1),
                     ev.en.eq(advance), od.en.eq(advance)]
        state3 = reg(state_a, "st3", 2)
        frac3 = reg(Mux(no_frac, 0, (frac_a >> fsh_a)[:FB]), "frac3", FB)
        odd3 = reg(index_a[0], "odd3", 1)
        x3 = reg(x_a, "x3")

        # P5: the two entries in order, straight from the block RAM's outputs; the distance
        # from the out-of-range reference
        under3 = state3 == UFLOW
        ref = Mux(under3, ref_under, c["end"])
        y0_r = reg(Mux(odd3, od.data, ev.data), "y0r", signed(16))
        y1_r = reg(Mux(odd3, ev.data, od.data), "y1r", signed(16))
        xr_r = reg(x3 - ref, "xrr", signed(W + 3))
        scale_r = reg(Mux(under3, c["uscale"], c["oscale"]), "scaler", signed(16))
        sh_r = reg(Mux(under3, c["ushift"], c["oshift"]), "shr", 5)
        frac_r, state_r = reg(frac3, "fracr", FB), reg(state3, "str", 2)

        # P6: the entries' difference
        dy4 = reg(y1_r - y0_r, "dy4", signed(17))
        y0_4 = reg(y0_r, "y0_4", signed(16))
        frac4 = reg(frac_r, "frac4", FB)
        xr4 = reg(xr_r, "xr4", signed(W + 3))
        scale4 = reg(scale_r, "scale4", signed(16))
        sh4 = reg(sh_r, "sh4", 5)
        state4 = reg(state_r, "st4", 2)

        # P7 and P8: one product per multiplier block, from registered copies of its operands
        # (hw.fabric.registered_product; on the ECP5 board tops, the block's own input and output
        # registers). Registers of their own, with the block as their only load, so the placer can
        # put them beside it: one operand register feeding several blocks leaves each block far
        # from its registers. In fabric flip-flops, the block's delay and the routing to and from
        # it would put most of the unit's paths over a 10 ns cycle.
        K = 17
        fsl = [(0, frac4[:K])] + ([(K, frac4[K:])] if FB > K else [])
        fp5 = [(lo, registered_product(platform, m, dy4, piece, advance, f"fp{lo}_5_{name}",
                                       17 + len(piece) + 1))
               for lo, piece in fsl]
        # the distance in 17-bit slices, the top one signed, so that every product fits one 18 x 18
        # multiplier (SDP's 35 bits: two; CDP's 41: three). A wider slice is split by the tools into
        # two multipliers and an add, in one stage.
        xq5 = []
        for lo in range(0, W + 3, K):
            top = lo + K >= W + 3 - 1
            piece = xr4[lo:].as_signed() if top else xr4[lo:lo + K]
            xq5.append((lo, registered_product(platform, m, scale4, piece, advance,
                                               f"q{lo}_5_{name}",
                                               16 + len(piece) + (0 if top else 1))))
            if top:
                break
        y0_o, sh_o, state_o = reg(y0_4, "y0_o"), reg(sh4, "sh_o"), reg(state4, "st_o")
        y0_5, sh5, state5 = reg(y0_o, "y0_5"), reg(sh_o, "sh5"), reg(state_o, "st5")

        # P9: the products' sums
        prod = sum(q << lo for lo, q in fp5)
        hitp6 = reg((y0_5 << FB) + prod if self.flavor == "sdp" else prod, "hitp6",
                    signed(FB + 18))
        p6 = reg(sum(q << lo for lo, q in xq5), "p6", signed(W + 3 + 16))
        y0_6, sh6, state6 = reg(y0_5, "y0_6"), reg(sh5, "sh6"), reg(state5, "st6")
        # the rounding constants depend on the shift alone: worked out here, a stage early
        half = (Const(1, 16) << sh5[:4]) >> 1
        half6 = reg(half, "half6", 15)
        half6m = reg(half - (sh5[:4] != 0), "half6m", 15)

        # P10: rounding: the hit result's constant shift, the out-of-range term's rounding add
        # (or its clamp, for a left shift)
        hitr7 = reg(_round_shift(hitp6, FB), "hitr7", signed(19))
        rnd7 = reg(p6 + Mux(p6[-1], half6m, half6), "rnd7", signed(W + 3 + 17))
        # the clamp to +-2^40 tested on p6's bits, not by two compares: above 2^40 is a clear sign
        # and a bit set from bit 41 up, or bit 40 with any bit below it; below -2^40 a set sign and
        # a clear bit from bit 40 up. OR trees of LUTs, where the compares were two 51-bit carry
        # chains (SDP) whose results then steered all 42 bits
        sign6 = p6[-1]
        over6 = ~sign6 & (p6[41:-1].any() | (p6[40] & p6[:40].any()))
        under6 = sign6 & ~p6[40:-1].all()
        clamped7 = reg(Mux(over6, 1 << 40, Mux(under6, -(1 << 40), p6)), "clamp7", signed(42))
        left7 = reg(sh6 >= 16, "left7", 1)
        # the left shift's amount, a stage early, so that its subtraction is not in front of the
        # shifter
        lamt7 = reg((32 - sh6)[:5], "lamt7", 5)
        sh7, y0_7, state7 = reg(sh6, "sh7"), reg(y0_6, "y0_7"), reg(state6, "st7")

        # P11: the variable shift; the hit result saturated
        if self.flavor == "sdp":
            hit8 = reg(saturate(hitr7, 32), "hit8", signed(OW))
        else:
            hit8 = reg(saturate(y0_7 + hitr7, 16), "hit8", signed(OW))
        lsh = Signal(signed(41 + 17), name=f"lsh_{name}")
        m.d.comb += lsh.eq(clamped7 << lamt7)
        term8 = reg(Mux(left7, lsh, rnd7 >> sh7[:4]), "term8", signed(41 + 17))
        y0_8, state8 = reg(y0_7, "y0_8"), reg(state7, "st8")

        # P12: the term saturated: to 32 bits (SDP, as NVDLA does before adding the entry), or
        # to 18 (CDP: any term beyond 18 bits saturates the 16-bit sum the same way)
        tsat9 = reg(saturate(term8, 32 if self.flavor == "sdp" else 18), "tsat9",
                    signed(32 if self.flavor == "sdp" else 18))
        y0_9, hit9, state9 = reg(y0_8, "y0_9"), reg(hit8, "hit9"), reg(state8, "st9")

        # P13: add the entry, saturate, choose the hit or out-of-range result
        oor = saturate(y0_9 + tsat9, OW)
        out9 = reg(Mux(state9 == HIT, hit9, oor), "out12", signed(OW))
        state9 = reg(state9, "st12", 2)
        return out9, state9
