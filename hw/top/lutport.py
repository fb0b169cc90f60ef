"""The LUT port: streams int32 samples from memory into the LUT unit and its results back to
memory, a bus beat (``lanes`` samples) per cycle each way (registers: ``LUT_PORT`` of
:mod:`model.registers.soc`).

A job reads ``beats`` beats from ``src_addr`` and writes as many from ``dst_addr``. The LUT
unit's run must already be started (its ``busy`` output is checked at start, so a forgotten
start is an error, not a hang); the port marks the last beat, which ends the run. Each result
word is the LUT's 32-bit output; its flags (hit, underflow, overflow, LO chosen) are not
written, and the LUT unit's statistics counters count them. The start's checks, addresses and
length go into registers with ``ctrl.start``, into the check's own copies the cycle after; the
sums are checked the cycle after that and the job starts (or is refused) the one after that
(``status.busy`` is high from the cycle after the start on).

A read or write error response does not stop the job: it runs to its end, inside the
destination, so the LUT unit's run ends too, and then reports the error.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.soc import LUT_PORT, LutPortError

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.regbank import RegisterBank
from ..lut.unit import in_layout, out_layout
from ..sparse.engines import BeatReader, BeatWriter, StreamReader, StreamWriter, mount

__all__ = ["LutPort"]


class LutPort(wiring.Component):
    """Parameters: ``data_width`` (32, 64, 128 or 256 bits: 1, 2, 4 or 8 lanes of 32-bit
    samples), ``addr_width``, ``id_width``, ``max_burst``, ``lean`` (one beat at a time
    each way, through :class:`~hw.sparse.engines.BeatReader` and ``BeatWriter``, in place of
    the burst engines: for small FPGAs, beside the serial LUT unit).

    Ports: ``s_axil`` (registers), ``m_axi``, ``o_samples`` (to the LUT unit's ``i_stream``),
    ``i_results`` (from its ``o_stream``), ``lut_busy`` (its ``busy``), ``irq``."""

    def __init__(self, *, data_width=64, addr_width=32, id_width=4, max_burst=16, lean=False):
        if data_width not in (32, 64, 128, 256):
            raise ValueError(f"data_width must be 32, 64, 128 or 256, not {data_width!r}")
        self.data_width = data_width
        self.lanes = data_width // 32
        self.addr_width = addr_width
        self._bank = RegisterBank(LUT_PORT, addr_width=12, capture=not lean)
        if lean:
            self._reader = BeatReader(data_width=data_width, addr_width=addr_width,
                                      id_width=id_width)
            self._writer = BeatWriter(data_width=data_width, addr_width=addr_width,
                                      id_width=id_width)
        else:
            self._reader = StreamReader(streams=1, data_width=data_width,
                                        addr_width=addr_width, id_width=id_width,
                                        max_burst=max_burst, fifo_depth=2 * max_burst)
            self._writer = StreamWriter(data_width=data_width, addr_width=addr_width,
                                        id_width=id_width, max_burst=max_burst)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=12, data_width=32)),
            "m_axi": Out(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)),
            "o_samples": Out(stream.Signature(in_layout(self.lanes, "sdp"))),
            "i_results": In(stream.Signature(out_layout(self.lanes, "sdp"))),
            "lut_busy": In(1),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        regs, reader, writer = mount(m, bank=self._bank, reader=self._reader,
                                     writer=self._writer, s_axil=self.s_axil, m_axi=self.m_axi)
        DB = self.data_width // 8
        beat_log2 = (DB - 1).bit_length()
        aw = self.addr_width

        src, dst = regs.src_addr.value.data, regs.dst_addr.value.data
        beats = regs.beats.value.data
        running = Signal()
        copying = Signal()                   # the cycle after a start: the check's copies load
        checking = Signal()                  # the cycle after that: the sums are checked
        pending = Signal()                   # a start being acted on (three cycles after it)
        in_left = Signal(24)
        out_left = Signal(24)
        in_more, in_last, out_more = Signal(), Signal(), Signal()
        code = Signal(3)
        fail_now = Signal()                  # a start refused by the checks
        finished = Signal()                  # a job that ran has ended; `code` holds its outcome
        cycles = Signal(32)
        m.d.comb += [
            regs.status.busy.r_data.eq(running | pending | checking | copying),
            regs.error.code.r_data.eq(code),
            regs.hwinfo.data_bytes.r_data.eq(DB),
            regs.hwinfo.lanes.r_data.eq(self.lanes),
            regs.cycles.value.r_data.eq(cycles),
            regs.status.done.set.eq(fail_now | finished),
            regs.status.error.set.eq(fail_now | (finished & (code != LutPortError.NONE))),
            self.irq.eq(((regs.status.done.data & regs.irq_enable.done.data) |
                         (regs.status.error.data & regs.irq_enable.error.data)).any()),
        ]

        # start: every check before the first access, over three cycles. The start's cycle takes the
        # job's addresses and length into registers, with the checks that need no arithmetic
        # (alignment, a zero length, the LUT unit's run); the cycle after copies them into registers
        # of the check's own; the one after that adds the length to the addresses from those copies
        # and records the outcome; the next acts on it. So no path runs from the bank's registers
        # (far off, by the bus) through an add and the checks, nor from an add into the reader's and
        # writer's loads, nor from the job's registers, which sit by the reader and the writer,
        # across the die into the sums
        start = regs.ctrl.start.pulse[0] & ~running & ~pending & ~checking & ~copying
        job_src = Signal.like(src)
        job_dst = Signal.like(dst)
        job_beats = Signal.like(beats)
        misaligned, empty, idle = Signal(), Signal(), Signal()
        with m.If(start):
            m.d.sync += [copying.eq(1), job_src.eq(src), job_dst.eq(dst), job_beats.eq(beats),
                         misaligned.eq((src[:beat_log2] != 0) | (dst[:beat_log2] != 0)),
                         empty.eq(beats == 0), idle.eq(~self.lut_busy)]
        # the check's copies, a cycle behind the job's registers (Yosys would merge copies
        # loaded alongside them)
        chk_src, chk_dst, chk_beats = Signal.like(src), Signal.like(dst), Signal.like(beats)
        m.d.sync += [chk_src.eq(job_src), chk_dst.eq(job_dst), chk_beats.eq(job_beats)]
        with m.If(copying):
            m.d.sync += [copying.eq(0), checking.eq(1)]
        span = chk_beats << beat_log2
        past_end = (chk_src + span > (1 << aw)) | (chk_dst + span > (1 << aw))
        checked = Signal(3)
        with m.If(checking):
            m.d.sync += [checking.eq(0), pending.eq(1),
                         checked.eq(Mux(misaligned, LutPortError.ALIGN,
                                        Mux(empty | past_end, LutPortError.SIZE,
                                            Mux(idle, LutPortError.LUT_IDLE,
                                                LutPortError.NONE))))]
        m.d.comb += [reader.addr[0].eq(job_src), reader.beats[0].eq(job_beats),
                     writer.addr.eq(job_dst)]
        with m.If(pending):
            m.d.sync += [pending.eq(0), code.eq(checked), cycles.eq(0)]
            with m.If(checked == LutPortError.NONE):
                m.d.sync += [running.eq(1), in_left.eq(job_beats), out_left.eq(job_beats),
                             in_more.eq(1), in_last.eq(job_beats == 1), out_more.eq(1)]
                m.d.comb += [reader.load[0].eq(1), writer.load.eq(1)]
            with m.Else():
                m.d.comb += fail_now.eq(1)
        with m.If(running & (cycles != 0xFFFF_FFFF)):
            m.d.sync += cycles.eq(cycles + 1)

        # samples out: a beat is `lanes` int32 samples. Whether beats are left, and whether this
        # is the last, are flags updated with the count (a start's check refuses 0 beats), so
        # no comparison of the count lies on the handshakes' paths
        o = self.o_samples
        m.d.comb += [o.valid.eq(reader.o[0].valid & in_more),
                     reader.o[0].ready.eq(o.ready & in_more),
                     o.payload.mask.eq(-1), o.payload.last.eq(in_last)]
        for k in range(self.lanes):
            m.d.comb += o.payload.data[k].eq(reader.o[0].payload.word_select(k, 32))
        with m.If(o.valid & o.ready):
            m.d.sync += [in_left.eq(in_left - 1), in_more.eq(in_left != 1),
                         in_last.eq(in_left == 2)]

        # results in: each lane's int32 result, in sample order
        i = self.i_results
        m.d.comb += [writer.i.valid.eq(i.valid & out_more),
                     i.ready.eq(writer.i.ready & out_more),
                     writer.i.payload.eq(Cat(i.payload.data[k].as_unsigned()
                                          for k in range(self.lanes))),
                     writer.finish.eq(running & ~out_more)]
        with m.If(i.valid & i.ready):
            m.d.sync += [out_left.eq(out_left - 1), out_more.eq(out_left != 1)]

        # the end: every result written and answered, every read answered. Seen a cycle late,
        # from a register (once true it stays true: every result is in, so nothing more is
        # read or written), so that no path runs from the results' handshake through the
        # writer's state into the end of the job
        quiet = Signal()
        m.d.sync += quiet.eq(writer.done & reader.idle)
        with m.If(running & quiet):
            m.d.sync += [running.eq(0),
                         code.eq(Mux(reader.error, LutPortError.READ_ERROR,
                                     Mux(writer.error, LutPortError.WRITE_ERROR,
                                         LutPortError.NONE)))]
        # `done` is raised the cycle after, once `code` holds the outcome; the reader and the writer
        # are flushed then too, from that register: flushing in the ending cycle itself ran a path
        # from the writer's FIFO through its `done` into the FIFO's own reset. Nothing moves in
        # between (the job has ended), and a new job loads three cycles after its start at the
        # earliest
        m.d.sync += finished.eq(running & quiet)
        m.d.comb += [reader.flush.eq(finished), writer.flush.eq(finished)]
        return m
