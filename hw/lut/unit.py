"""NVDLA's hybrid LUT as a pipelined block: ``lanes`` samples per cycle, bit-exact with
:func:`model.nvdla.lut.evaluate`.

Ports
-----
``s_axil``
    AXI4-Lite registers (:func:`model.registers.lut.lut_regmap`): run control, the S_LUT_*
    configuration, the table access window, statistics counters.
``i_stream``
    Payload ``data`` (``lanes`` signed samples: 32 bits for SDP, 38 for CDP), ``mask`` (which
    lanes hold a sample; empty lanes flow through and are not counted), ``last`` (the run's final
    transfer).
``o_stream``
    Payload ``data`` (``lanes`` signed results: 32 bits for SDP, 16 for CDP), ``chosen`` (per lane,
    1 = LO), ``state`` (per lane, the chosen table's 0 hit / 1 underflow / 2 overflow), ``mask``
    and ``last`` as they came in.
``irq``
    High while ``status & irq_enable`` has a bit set.
``busy``
    A run is in progress (``status.busy``): samples are accepted.

Timing
------
(The pipelined datapath; ``serial=True`` trades this for size, see :mod:`hw.lut.serial`.)
One transfer per cycle in and out (initiation interval 1) for every lane count; a result leaves
``LATENCY`` = 15 cycles after its sample was accepted when the output is not stalled: the input
register, thirteen stages (P1 to P13, each about one subtract, shift, multiply or add deep, for
the clock rate), and the output register, which chooses the table. Every
stage advances together when the output register is empty or being taken, so backpressure
stalls the whole pipeline and nothing is dropped. On a platform with global buffers (the ECP5
board tops: :mod:`hw.fabric`) that one enable reaches the stages on a global network.

A run starts with ``ctrl.start`` (counters cleared, ``status.busy`` set). Samples are accepted
only while busy; once the transfer marked ``last`` is accepted, input stops until it has left the
output, then ``busy`` clears and ``status.done`` is set. A ``LUT_ACCESS_DATA`` write while busy is
refused: the table and the access address keep their values and ``status.table_write_refused`` is
set. Configuration registers are read live: change them only while idle.

Tables live in ``amaranth.lib.memory`` memories split into even and odd entries, so that every
lane reads entries i and i+1 in one cycle; each lane has its own read ports (memories replicate
per port on FPGAs), and one more pair serves register read-back.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomcube.model.nvdla.lut import COUNTERS, FLAVORS, LE_ENTRIES, LO_ENTRIES
from atomcube.model.registers.lut import lut_regmap

from ..bus.axi import AXI4LiteSignature
from ..bus.regbank import RegisterBank
from ..fabric import global_buffer, registered_copy, registered_product
from .arith import (
    FRAC_BITS,
    HIT,
    IN_BITS,
    OFLOW,
    OUT_BITS,
    UFLOW,
    choose_lo,
    in_layout,
    out_layout,
    saturate,
)
from .serial import SerialDatapath

__all__ = ["LutUnit", "LATENCY", "LANES"]

#: pipeline stages between the input register and the output register (P1 to P13)
STAGES = 13
LATENCY = STAGES + 2
LANES = (1, 2, 4, 8, 16)
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


class LutUnit(wiring.Component):
    """The LUT unit.

    Parameters
    ----------
    lanes : int
        Samples per transfer: 1, 2, 4, 8 or 16.
    flavor : {"sdp", "cdp"}
    addr_width : int
        Width of the AXI4-Lite address (the unit decodes all of it).
    serial : bool
        False (default): the pipelined datapath, ``lanes`` samples a cycle. True: one datapath
        with one 16 x 16 multiplier works through the lanes' samples one at a time, in 13 to
        about 60 cycles a sample (:mod:`hw.lut.serial`); for small FPGAs such as the iCE40
        UP5K. The registers, tables, counters and run control are the same.
    bank_mirror : bool
        The register bank reads the configuration back from a copy in a memory
        (:class:`~hw.bus.regbank.RegisterBank`'s ``mirror``). Default False.
    """

    def __init__(self, *, lanes=1, flavor="sdp", addr_width=12, serial=False, bank_mirror=False):
        if lanes not in LANES:
            raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not {lanes!r}")
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
        if not isinstance(serial, bool):
            raise ValueError(f"serial must be True or False, not {serial!r}")
        self.lanes = lanes
        self.flavor = flavor
        self.serial = serial
        self.regmap = lut_regmap(flavor)
        # the serial build is for small FPGAs: the bank commits writes straight from the bus
        self._bank = RegisterBank(self.regmap, addr_width=addr_width, capture=not serial,
                                  mirror=bank_mirror)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=addr_width, data_width=32)),
            "i_stream": In(stream.Signature(in_layout(lanes, flavor))),
            "o_stream": Out(stream.Signature(out_layout(lanes, flavor))),
            "irq": Out(1),
            "busy": Out(1),
        })

    # -- elaboration -----------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self._bank
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        regs = bank.regs
        lanes, flavor = self.lanes, self.flavor
        W, FB, OW = IN_BITS[flavor], FRAC_BITS[flavor], OUT_BITS[flavor]

        # -- run control -------------------------------------------------------------------------
        busy = Signal()
        closing = Signal()                      # the last transfer is in the pipeline
        run_end = Signal()
        m.d.comb += [
            regs.status.busy.r_data.eq(busy),
            self.busy.eq(busy),
            regs.status.done.set.eq(run_end),
            regs.hwinfo.lanes.r_data.eq(lanes),
            regs.hwinfo.flavor.r_data.eq(int(flavor == "cdp")),
            regs.hwinfo.serial.r_data.eq(int(self.serial)),
            self.irq.eq(((regs.status.done.data & regs.irq_enable.done.data) |
                         (regs.status.table_write_refused.data &
                          regs.irq_enable.table_write_refused.data)).any()),
        ]
        with m.If(regs.ctrl.start.pulse[0]):
            m.d.sync += [busy.eq(1), closing.eq(0)]
        with m.Elif(run_end):
            m.d.sync += busy.eq(0)

        # -- configuration, as the pipeline reads it -----------------------------------------------
        def bound(name):
            if flavor == "sdp":
                return getattr(regs, name).value.data.as_signed()
            return Cat(getattr(regs, f"{name}_low").value.data,
                       getattr(regs, f"{name}_high").value.data).as_signed()

        cfg = {
            "le": dict(start=bound("le_start"), end=bound("le_end"),
                       select=regs.lut_info.le_index_select.data.as_signed(),
                       offset=regs.lut_info.le_index_offset.data.as_signed(),
                       exp=~regs.lut_cfg.le_function.data[0],
                       uscale=regs.le_slope_scale.uflow_scale.data.as_signed(),
                       oscale=regs.le_slope_scale.oflow_scale.data.as_signed(),
                       ushift=regs.le_slope_shift.uflow_shift.data,
                       oshift=regs.le_slope_shift.oflow_shift.data, n=LE_ENTRIES - 1),
            "lo": dict(start=bound("lo_start"), end=bound("lo_end"),
                       select=regs.lut_info.lo_index_select.data.as_signed(),
                       offset=Const(0, signed(8)), exp=Const(0, 1),
                       uscale=regs.lo_slope_scale.uflow_scale.data.as_signed(),
                       oscale=regs.lo_slope_scale.oflow_scale.data.as_signed(),
                       ushift=regs.lo_slope_shift.uflow_shift.data,
                       oshift=regs.lo_slope_shift.oflow_shift.data, n=LO_ENTRIES - 1),
        }
        cfg = {t: self._derived(m, c, t, W, FB) for t, c in cfg.items()}
        prio_u = regs.lut_cfg.uflow_priority.data[0]
        prio_o = regs.lut_cfg.oflow_priority.data[0]
        prio_h = regs.lut_cfg.hybrid_priority.data[0]

        # -- tables: even/odd banks, one read port pair per lane, one for read-back -------------
        acc_addr = Signal(10)
        acc_table = regs.lut_access_cfg.table_id.data[0]
        acc_write = regs.lut_access_cfg.access_type.data[0]
        mems = {}
        for t, n in (("le", LE_ENTRIES), ("lo", LO_ENTRIES)):
            for parity in (0, 1):
                depth = (n + 1 - parity) // 2
                mem = Memory(shape=signed(16), depth=depth, init=[])
                m.submodules[f"{t}_{'odd' if parity else 'even'}"] = mem
                mems[(t, parity)] = mem

        # table writes and read-back through LUT_ACCESS_DATA
        data_w = regs.lut_access_data.wr_stb
        data_r = regs.lut_access_data.rd_stb
        refused = Signal()
        m.d.comb += [refused.eq(data_w & busy),
                     regs.status.table_write_refused.set.eq(refused)]
        # the read-back ports read at the address acc_addr is about to take (from the bank's
        # strobes, which are registers), and their word is registered: a read sees it two
        # cycles after the address moved, which the bank's spacing of reads allows, and no
        # memory output drives the register bank's read multiplexer directly
        acc_next = Signal(10)
        m.d.comb += acc_next.eq(acc_addr)
        with m.If(regs.lut_access_cfg.wr_stb):
            m.d.comb += acc_next.eq(regs.lut_access_cfg.addr.data)
        with m.Elif((data_w & ~busy) | data_r):
            m.d.comb += acc_next.eq(acc_addr + 1)
        m.d.sync += acc_addr.eq(acc_next)
        rb = {}
        for (t, parity), mem in mems.items():
            n = LE_ENTRIES if t == "le" else LO_ENTRIES
            wp = mem.write_port()
            tid = 0 if t == "le" else 1
            m.d.comb += [
                wp.addr.eq(acc_addr >> 1),
                wp.data.eq(regs.lut_access_data.data.w_data.as_signed()),
                wp.en.eq(data_w & ~busy & acc_write & (acc_table == tid) &
                         (acc_addr[0] == parity) & (acc_addr < n)),
            ]
            rp = mem.read_port(domain="sync")
            m.d.comb += rp.addr.eq(acc_next >> 1)
            rb[(t, parity)] = rp
        rb_val = Signal(signed(16))
        for t, tid, n in (("le", 0, LE_ENTRIES), ("lo", 1, LO_ENTRIES)):
            with m.If((acc_table == tid) & (acc_addr < n)):
                m.d.comb += rb_val.eq(Mux(acc_addr[0], rb[(t, 1)].data, rb[(t, 0)].data))
        rb_q = Signal(signed(16))
        m.d.sync += rb_q.eq(rb_val)
        m.d.comb += regs.lut_access_data.data.r_data.eq(rb_q)

        # -- the datapath, which fills the output register --------------------------------------
        o = self.o_stream
        prio = (prio_u, prio_h, prio_o)
        if self.serial:
            counted, count = self._serial(m, busy, closing, cfg, prio, mems)
        else:
            counted, count = self._pipelined(m, regs, busy, closing, cfg, prio, mems, W, FB, OW,
                                             platform)
        m.d.comb += run_end.eq(o.valid & o.ready & o.payload.last & busy)

        # -- statistics ----------------------------------------------------------------------------
        # The counters take what the output register took a cycle before: whether a sample went in
        # (`count`, behind the output's late ready) and, per counter, how many of its lanes count,
        # both registered every cycle (no enable), so neither the ready nor the states' decode and
        # sum reach the counters' 32-bit adds. The run's end comes with the last sample's handshake,
        # a cycle after it went into the output register, so the counts are complete when software
        # sees `done`.
        count_r = Signal()
        m.d.sync += count_r.eq(count & busy & regs.ctrl.perf_enable.data[0])
        for name in COUNTERS[flavor]:
            bits = []
            for le_st, lo_st, chosen, present in counted:
                st = Mux(chosen, lo_st, le_st)
                le_hit, lo_hit = le_st == HIT, lo_st == HIT
                both_u = (le_st == UFLOW) & (lo_st == UFLOW)
                both_o = (le_st == OFLOW) & (lo_st == OFLOW)
                cond = {
                    "uflow": (st == UFLOW) if flavor == "sdp" else both_u,
                    "oflow": (st == OFLOW) if flavor == "sdp" else both_o,
                    "hybrid": st == HIT,
                    "le_hit": le_hit if flavor == "sdp" else le_hit & ~lo_hit,
                    "lo_hit": lo_hit if flavor == "sdp" else lo_hit & ~le_hit,
                    "priority": ~(both_u | both_o | (le_hit ^ lo_hit)),
                }[name]
                bits.append(cond & present)
            cnt = Signal(32, name=f"cnt_{name}")
            m.d.comb += getattr(regs, f"cnt_{name}").value.r_data.eq(cnt)
            inc = Signal(range(len(bits) + 1), name=f"inc_{name}")
            m.d.sync += inc.eq(sum(bits[1:], bits[0].as_unsigned()))
            if len(bits) == 1:
                # one sample at a time: an increment held at all-ones
                step, nxt = count_r & inc[0] & ~cnt.all(), cnt + 1
            else:
                total = Signal(33, name=f"cnt_{name}_next")
                m.d.comb += total.eq(cnt + inc)
                step, nxt = count_r, Mux(total[32], 0xFFFF_FFFF, total[:32])
            with m.If(regs.ctrl.start.pulse[0]):
                m.d.sync += cnt.eq(0)
            with m.Elif(step):
                m.d.sync += cnt.eq(nxt)
        return m

    def _serial(self, m, busy, closing, cfg, prio, mems):
        """The serial datapath (:class:`hw.lut.serial.SerialDatapath`) on the unit's streams,
        configuration and tables. Returns the counters' inputs and when they count, as
        :meth:`_pipelined` does."""
        dp = m.submodules.serial = SerialDatapath(
            lanes=self.lanes, flavor=self.flavor, cfg_layout=SerialDatapath.config_layout(cfg),
            entries={t: c["n"] for t, c in cfg.items()})
        wiring.connect(m, wiring.flipped(self.i_stream), dp.i)
        wiring.connect(m, dp.o, wiring.flipped(self.o_stream))
        m.d.comb += [dp.run.eq(busy & ~closing), dp.prio.eq(Cat(*prio))]
        for t, c in cfg.items():
            m.d.comb += [getattr(dp.cfg, t)[k].eq(v) for k, v in c.items()
                         if not isinstance(v, int)]
        for (t, parity), mem in mems.items():
            rp = mem.read_port(domain="sync")
            port = getattr(dp, f"{t}_{'odd' if parity else 'even'}")
            m.d.comb += [rp.addr.eq(port.addr), rp.en.eq(port.en), port.data.eq(rp.data)]
        with m.If(dp.took_last):
            m.d.sync += closing.eq(1)
        return [(dp.counted.le, dp.counted.lo, dp.counted.chosen, Const(1, 1))], dp.written

    def _pipelined(self, m, regs, busy, closing, cfg, prio, mems, W, FB, OW, platform):
        """The thirteen-stage pipeline, ``lanes`` samples a cycle. Returns the counters' inputs:
        per lane (LE state, LO state, chosen, lane present), and when they count."""
        lanes = self.lanes
        i, o = self.i_stream, self.o_stream
        go = Signal()
        m.d.comb += go.eq(~o.valid | o.ready)
        # every stage register's enable: on a platform with global buffers (a board top on the
        # ECP5: hw.fabric) it reaches them on a global network (on the full ULX3S SoC, as one
        # net of general routing, it took 14 ns to spread over the unit)
        advance = global_buffer(platform, m, go, "lut_advance")
        accept = Signal()
        m.d.comb += [i.ready.eq(go & busy & ~closing), accept.eq(i.valid & i.ready)]
        with m.If(accept & i.payload.last):
            m.d.sync += closing.eq(1)

        # valid/mask/last beside the data: index 0 is the input register, 1 to 13 the ends of
        # stages P1 to P13; the output register follows
        v = [Signal(name=f"v{k}") for k in range(STAGES + 1)]
        mask = [Signal(lanes, name=f"mask{k}") for k in range(STAGES + 1)]
        last = [Signal(name=f"last{k}") for k in range(STAGES + 1)]
        with m.If(advance):
            m.d.sync += [v[0].eq(accept), mask[0].eq(i.payload.mask), last[0].eq(i.payload.last)]
            for k in range(1, STAGES + 1):
                m.d.sync += [v[k].eq(v[k - 1]), mask[k].eq(mask[k - 1]),
                             last[k].eq(last[k - 1])]

        out_data, out_chosen, out_state = [], [], []
        counted = []
        for lane in range(lanes):
            results = {}
            for t in ("le", "lo"):
                # the input register, a copy per table (kept apart on the ECP5 board tops), so that
                # each sits by its table's first stage: one register for both would sit between
                # them, a long route from either table's range compare
                x0 = registered_copy(platform, m, i.payload.data[lane], f"x0_{t}{lane}_",
                                     enable=advance).as_signed()
                results[t] = self._table_lane(m, advance, cfg[t], t, lane, x0, mems, W, FB, OW,
                                              platform)
            # which table, registered into the output
            (le_out, le_st), (lo_out, lo_st) = results["le"], results["lo"]
            chosen = Signal(name=f"chosen_{lane}")
            m.d.comb += chosen.eq(choose_lo(le_st, lo_st, prio))
            out_data.append(Mux(chosen, lo_out, le_out))
            out_chosen.append(chosen)
            out_state.append(Mux(chosen, lo_st, le_st))
            counted.append((le_st, lo_st, chosen, mask[STAGES][lane]))

        with m.If(advance):
            m.d.sync += [
                o.valid.eq(v[STAGES]), o.payload.mask.eq(mask[STAGES]),
                o.payload.last.eq(last[STAGES]),
                o.payload.chosen.eq(Cat(*out_chosen)),
            ]
            for lane in range(lanes):
                m.d.sync += [o.payload.data[lane].eq(out_data[lane]),
                             o.payload.state[lane].eq(out_state[lane])]
        return counted, advance & v[STAGES]

    def _derived(self, m, c, t, W, FB):
        """What one table's configuration implies, worked out ahead in one to three steps of
        registers, once for every lane: the registers only change while the unit is idle
        (docs/lut.md), and a sample reaches the stage that uses them at least four cycles after
        the last register write (the start's own write, the input register, P1), so these
        copies are always current in a run. Returns ``c`` with them added."""
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

    def _table_lane(self, m, advance, c, t, lane, x0, mems, W, FB, OW, platform):
        """Stages P1 to P13 of one table for one lane (see :data:`STAGES`); returns (result,
        state) as registered at the end of P13."""
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
        m.d.comb += e.eq(_leading_one(d1))
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
        ev = mems[(t, 0)].read_port(domain="sync")
        od = mems[(t, 1)].read_port(domain="sync")
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


def _leading_one(v):
    """The position of ``v``'s highest set bit (0 when ``v`` is 0), as a tree: each level
    chooses between the two halves' positions by whether the upper half has a bit set, so its
    depth grows with log2 of the width (a chain of one test per bit grows with the width)."""
    n = len(v)
    width = 1 << (n - 1).bit_length()
    v = Cat(v, Const(0, width - n)) if width > n else v

    def tree(x, w):
        if w == 1:
            return x[0], None
        any_hi, pos_hi = tree(x[w // 2:], w // 2)
        any_lo, pos_lo = tree(x[:w // 2], w // 2)
        pos = any_hi if pos_hi is None else Cat(Mux(any_hi, pos_hi, pos_lo), any_hi)
        return any_hi | any_lo, pos

    return tree(v, width)[1]

