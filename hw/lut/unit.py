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
    Payload ``data`` (``lanes`` signed results: 32 bits for SDP, 16 for CDP; FP32 bit patterns
    in and out for the FP16 pipeline), ``chosen`` (per lane,
    1 = LO), ``state`` (per lane, the chosen table's 0 hit / 1 underflow / 2 overflow), ``mask``
    and ``last`` as they came in.
``irq``
    High while ``status & irq_enable`` has a bit set.
``busy``
    A run is in progress (``status.busy``): samples are accepted.

Timing
------
The pipelined datapaths (the integer one, :class:`~hw.lut.pipeline.LutPipeline`, and the FP16
one, :class:`~hw.lut.fppipeline.FpLutPipeline`) take one transfer per cycle in and out for
every lane count; a result leaves ``LATENCY`` = 15 cycles (FP16: ``FP_LATENCY`` = 39) after its
sample was accepted when the output is not stalled, and backpressure stalls the whole pipeline,
so nothing is dropped. ``serial=True`` trades this for size (:mod:`hw.lut.serial`).

Precision
---------
``precision`` chooses the datapaths built in: ``"int"`` (the integer pipeline), ``"fp16"``
(SDP's FP16 pipeline) or ``"both"``, where ``data_format.proc_precision`` chooses between them
for the next runs (the two share the tables' read ports and the output). A ``data_format``
write while busy, or naming a pipeline not built in (or the reserved code 3), is refused:
the choice keeps its value and ``status.precision_refused`` is set.

A run starts with ``ctrl.start`` (counters cleared, ``status.busy`` set). Samples are accepted
only while busy; once the transfer marked ``last`` is accepted, input stops until it has left the
output, then ``busy`` clears and ``status.done`` is set. A ``LUT_ACCESS_DATA`` write while busy is
refused: the table and the access address keep their values and ``status.table_write_refused`` is
set. Configuration registers are read live: change them only while idle.

Tables live in ``amaranth.lib.memory`` memories split into even and odd entries, so that every
lane reads entries i and i+1 in one cycle; each lane has its own read ports (memories replicate
per port on FPGAs), and one more pair serves register read-back.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomcube.model.nvdla.lut import COUNTERS, FLAVORS, LE_ENTRIES, LO_ENTRIES
from atomcube.model.registers.lut import PRECISION_CODES, PRECISION_RESERVED, lut_regmap

from ..bus.axi import AXI4LiteSignature
from ..bus.regbank import RegisterBank
from .arith import HIT, OFLOW, UFLOW, config_layout, derive_config, in_layout, out_layout
from .fppipeline import FP_LATENCY, FpLutPipeline, derive_fp_config
from .pipeline import LATENCY, LutPipeline
from .serial import SerialDatapath

__all__ = ["LutUnit", "LATENCY", "FP_LATENCY", "LANES", "PRECISIONS", "in_layout", "out_layout"]

LANES = (1, 2, 4, 8, 16)
#: the datapaths a unit can be built with
PRECISIONS = ("int", "fp16", "both")


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
    precision : {"int", "fp16", "both"}
        The datapaths built in (see "Precision" above); FP16 is SDP's and pipelined only.
        Default ``"int"``.
    """

    def __init__(self, *, lanes=1, flavor="sdp", addr_width=12, serial=False, bank_mirror=False,
                 precision="int"):
        if lanes not in LANES:
            raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not {lanes!r}")
        if flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
        if not isinstance(serial, bool):
            raise ValueError(f"serial must be True or False, not {serial!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not "
                             f"{precision!r}")
        if precision != "int" and flavor != "sdp":
            raise ValueError(f"precision {precision} needs flavor sdp: the FP16 pipeline is "
                             f"SDP's")
        if precision != "int" and serial:
            raise ValueError(f"precision {precision} needs serial=False: the serial datapath "
                             f"computes the integer pipelines only")
        self.precision = precision
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
            regs.hwinfo.int_pipeline.r_data.eq(int(self.precision != "fp16")),
            regs.hwinfo.fp16_pipeline.r_data.eq(int(self.precision != "int")),
            self.irq.eq(((regs.status.done.data & regs.irq_enable.done.data) |
                         (regs.status.table_write_refused.data &
                          regs.irq_enable.table_write_refused.data) |
                         (regs.status.precision_refused.data &
                          regs.irq_enable.precision_refused.data)).any()),
        ]
        with m.If(regs.ctrl.start.pulse[0]):
            m.d.sync += [busy.eq(1), closing.eq(0)]
        with m.Elif(run_end):
            m.d.sync += busy.eq(0)

        # -- the pipeline chosen: data_format.proc_precision, taken only while idle ---------------
        fp_chosen = self._precision(m, regs, busy)

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
        fp_cfg = {t: derive_fp_config(m, {**c, "start": c["start"].as_unsigned(),
                                          "end": c["end"].as_unsigned()}, t)
                  for t, c in cfg.items()} if self.precision != "int" else None
        cfg = {t: derive_config(m, c, t, flavor) for t, c in cfg.items()}
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
        counted, count = self._datapath(m, busy, closing, cfg, fp_cfg, fp_chosen, prio, mems)
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
            for c in counted:
                le_st, lo_st, chosen, present = c.le, c.lo, c.chosen, c.present
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

    def _precision(self, m, regs, busy):
        """``data_format.proc_precision``: the code last written, taken while idle and for a
        pipeline built in, else refused. Returns the bit choosing the FP16 pipeline."""
        field = regs.data_format.proc_precision
        has_int, has_fp = self.precision != "fp16", self.precision != "int"
        code = Signal(2, init=PRECISION_CODES["int8"] if has_int else PRECISION_CODES["fp16"])
        wanted = field.w_data
        built = Mux(wanted == PRECISION_CODES["fp16"], has_fp,
                    (wanted != PRECISION_RESERVED) & has_int)
        write = regs.data_format.wr_stb
        with m.If(write & ~busy & built):
            m.d.sync += code.eq(wanted)
        m.d.comb += [field.r_data.eq(code),
                     regs.status.precision_refused.set.eq(write & (busy | ~built))]
        return code == PRECISION_CODES["fp16"]

    def _datapath(self, m, busy, closing, cfg, fp_cfg, fp_chosen, prio, mems):
        """The datapaths (:class:`~.pipeline.LutPipeline`, :class:`~.fppipeline.FpLutPipeline`,
        or with ``serial`` :class:`~.serial.SerialDatapath`) on the unit's streams,
        configuration and tables. With both pipelines, ``fp_chosen`` steers the streams, the
        table reads and the counters' inputs to one of them. Returns the counters' inputs (per
        lane, :data:`~.arith.counted_layout`) and when they count."""
        entries = {t: c["n"] for t, c in cfg.items()}
        if self.serial:
            built = [("serial", SerialDatapath, cfg, Const(1))]
        elif self.precision == "both":
            built = [("pipeline", LutPipeline, cfg, ~fp_chosen),
                     ("fp_pipeline", FpLutPipeline, fp_cfg, fp_chosen)]
        elif self.precision == "fp16":
            built = [("fp_pipeline", FpLutPipeline, fp_cfg, Const(1))]
        else:
            built = [("pipeline", LutPipeline, cfg, Const(1))]
        dps = []
        for name, kind, c_all, chosen in built:
            dp = kind(lanes=self.lanes, flavor=self.flavor, cfg_layout=config_layout(c_all),
                      entries=entries)
            m.submodules[name] = dp
            m.d.comb += [dp.run.eq(busy & ~closing & chosen), dp.prio.eq(Cat(*prio))]
            for t, c in c_all.items():
                m.d.comb += [getattr(dp.cfg, t)[k].eq(v) for k, v in c.items()
                             if not isinstance(v, int)]
            dps.append((dp, chosen))
        i, o = self.i_stream, self.o_stream
        if len(dps) == 1:
            dp = dps[0][0]
            wiring.connect(m, wiring.flipped(i), dp.i)
            wiring.connect(m, dp.o, wiring.flipped(o))
        else:
            # the chosen pipeline's streams: the other's input is never valid, its output
            # never taken (and empty: a run ends only once its last result has left)
            for dp, chosen in dps:
                m.d.comb += [dp.i.payload.eq(i.payload), dp.i.valid.eq(i.valid & chosen),
                             dp.o.ready.eq(o.ready & chosen)]
                with m.If(chosen):
                    m.d.comb += [i.ready.eq(dp.i.ready), o.valid.eq(dp.o.valid),
                                 o.payload.eq(dp.o.payload)]
        # a read port of each table bank per lane of the pipeline (shared by the two pipelines,
        # addressed by the chosen one), one for the serial datapath
        for (t, parity), mem in mems.items():
            bank = f"{t}_{'odd' if parity else 'even'}"
            for lane in range(1 if self.serial else self.lanes):
                ports = [getattr(dp, bank) if self.serial else getattr(dp, bank)[lane]
                         for dp, _ in dps]
                rp = mem.read_port(domain="sync")
                for port, (_, chosen) in zip(ports, dps, strict=True):
                    m.d.comb += port.data.eq(rp.data)
                    with m.If(chosen):
                        m.d.comb += [rp.addr.eq(port.addr), rp.en.eq(port.en)]
        with m.If(Cat(dp.took_last for dp, _ in dps).any()):
            m.d.sync += closing.eq(1)
        # (the serial datapath counts one lane at a time, the lane it writes)
        counted = [Signal.like(c) for c in (dps[0][0].counted if not self.serial
                                              else [dps[0][0].counted])]
        written = Signal()
        for dp, chosen in dps:
            with m.If(chosen):
                m.d.comb += written.eq(dp.written)
                m.d.comb += [c.eq(d) for c, d in zip(
                    counted, dp.counted if not self.serial else [dp.counted], strict=True)]
        return counted, written
