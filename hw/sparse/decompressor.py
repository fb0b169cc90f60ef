"""The sparse weight decompressor: NVDLA's compressed weight surfaces (WGS, WMB, packed
non-zeros; docs/weights.md) in, the dense weight image out as a stream of atoms and,
optionally, in memory.

Data path
---------
The stages are components on typed streams: :class:`~.segmenter.Segmenter` (with
:class:`~.stages.SegmentCounter`), :class:`~.decoder.Decoder`, :class:`~.stages.Expander`,
:class:`~.stages.AtomEmitter`, joined here, where the job's registers, checks, error priority
and state machine stay.

One AXI4 read port carries three sequential streams (:class:`~.engines.StreamReader`): the WGS
surface first (it is small and has read priority), then the WMB and the packed weights as their
buffers drain. WGS words land in a shift buffer (:class:`~.shiftbuf.ShiftBuffer`), the WMB's
bits and the packed weight bytes in ring buffers (:class:`~.ringbuf.RingBuffer`): a word goes
to the next slot, a take moves the read pointer, and the decoder sees the ring rotated to it.

The decoder works on *segments*: the run of mask bits from the current position in the output
atom to the end of the atom or of the kernel group, whichever comes first. It runs in three
parts, so that no decision waits on a wide shift or a popcount made in the same cycle:

- the *segmenter* takes each segment's mask bits from the bottom of the mask buffer. The next
  segment's length and whether it ends the group or completes the atom are registers, worked
  out as the segment before is taken, so its decision is a few comparisons of registers (mask
  bits held, WMB bits left). It also starts each group (its WGS word, kernel count and size, the
  size multiplied out a cycle ahead);
- from a register of that segment, its popcount (the packed bytes it uses), its bits placed at
  their positions in the atom and the positions it covers are worked out and queued (a register
  slice: its ready depends only on its fill level);
- the *decoder* checks the queue's head against the group's WGS bytes left and takes its packed
  bytes from the bottom of the byte buffer once they are there. The spreading of those bytes
  over the set positions (:func:`_expand`: six stages of two-way multiplexers for 64 elements;
  a clear bit gives zero) runs over the next stages: the distances (prefix sums of the clear
  bits, their first levels made as a segment enters the queue), the move masks, then the
  multiplexers over two stages.

Errors the segmenter finds (a WGS total past the weight surface, a WMB too short) go down the
queue as markers behind the segments before them, so the decoder raises every error in the
order the segments come. A decision to take from a buffer only chooses between two values
worked out from registers (the read pointer moved or not; the shift buffer's contents with and
without the amount taken), so no decision feeds a wide shifter.
The decoder's state (next mask bit, next packed element) runs on across atoms and groups, as
NVDLA's does. An atom inside a group is one segment, so the decoder makes one atom per cycle
whenever the buffers hold the bytes it needs. An atom that straddles a group boundary takes one
extra cycle per boundary. A group costs one cycle more to start (its WGS word and kernel count).

Atoms are ``atom_elements`` elements of 1 or 2 bytes (``precision.two_byte``). The image ends
with zero atoms up to a multiple of 128 bytes, as the layout pads it. The atom stream
``o_atoms`` carries each atom's bytes in memory order (the low ``atom_elements`` bytes for int8)
and marks the image's last atom. With ``ctrl.write_enable`` the same bytes are cut into bus beats
(:class:`~.gearbox.AtomGearbox`) and written from ``dst_addr`` (:class:`~.engines.StreamWriter`).

Checks
------
At start: addresses 256-byte aligned, sizes multiples of 128, non-zero counts, a WGS surface that
holds every group, no surface running past the top of the address space. While decoding, before
an atom goes out: the group's popcount so far must not exceed its WGS; at a group's end, it must
equal it; the running WGS total must stay within the weight surface; the WMB must hold every
mask bit the groups need; the bus must have answered OKAY. The first failure stops the job with
``error.code`` and ``error.group``. The atom in which it was found is not sent or written, and no
write burst is issued after it, although bursts already issued complete. The block then flushes
its buffers and takes the next job.

A group's count can only be confirmed at its last element. So when a corrupt mask makes a group
disagree with its WGS, the atoms of that group before the point of detection have already gone
out, decoded from the corrupt mask. They land inside the destination, never outside it.
Verifying a group before decoding it would mean holding the whole group's mask (up to 36 KiB
for a 3x3x1024 int8 group) or reading the WMB twice.
"""

from dataclasses import dataclass

from amaranth import Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.sparse import SPARSE, Error

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.fifo import SkidBuffer
from ..bus.regbank import RegisterBank
from ..fabric import register_copies
from .decoder import Decoder
from .engines import StreamReader, StreamWriter, mount
from .gearbox import ELEMENTS_PER_COPY, AtomGearbox
from .ringbuf import SELECT_BITS as RING_SELECT_BITS
from .segmenter import Segmenter, job_layout
from .stages import AtomEmitter, Expander, atom_layout

__all__ = ["SparseDecompressor", "SparseTiming", "atom_layout"]

WGS_STREAM, WMB_STREAM, WEIGHT_STREAM = 0, 1, 2

@dataclass(frozen=True)
class SparseTiming:
    """The decompressor's pipeline choices: where its long paths are cut. The defaults are those
    its ECP5 builds at 100 MHz use (``make report``); a slower target (an iCE40, or simulation)
    builds with them too, and may trade some for cells.

    byte_late_bits
        The byte buffer's rotation stages run on the expansion's X registers, a cycle late
        (:class:`~.ringbuf.RingBuffer` ``late_bits``), so that its read pointer does not reach
        through every stage into X.
    mask_late_bits
        Likewise for the mask ring, on R1's registers: its read pointer's rotation into R1.
    sum_levels
        Levels of the expansion's prefix sums made as a segment enters the decoder's queue (the
        rest run from the queue's head into X's registers): with fewer, the levels after the
        head are too long a path for one cycle at 128 bits. At most log2 of the atom's elements.
    early_sum_levels
        Of those, the levels made a stage earlier, from R2's placed bits into R3 (beside the
        segment's popcount); None: by atom size, 2 for 16- and 32-element atoms and 0 for 64.
        With all levels in one cycle from R3 into the queue's second entry the path is long for
        16- and 32-element atoms, while 64-element atoms need a wider R3 that places worse.
    select_bits
        Bits of the X slice's and the segment queue's output entries per copy of their select
        (:class:`~..bus.fifo.SkidBuffer`).
    load_bits
        Bits of the segment queue's and the output queue's output entries per load LUT.
    ring_select_bits
        Multiplexer bits of the mask and byte rings' rotations per copy of a read-pointer bit
        (:class:`~.ringbuf.RingBuffer` ``select_bits``).
    elements_per_copy
        Elements per copy of the gearbox slots' load enables and of the decoder's stage enables
        and packing choice made from copies (:class:`~.gearbox.AtomGearbox`).
    counter_ready_ahead
        The segment counter's R2 takes on a register worked out a cycle ahead, and R1's output
        entry loads on one (:class:`~.stages.SegmentCounter`): as LUTs on R3's ready, the
        handshake crossed the die into both stages' clock enables.
    """

    byte_late_bits: int = 3
    mask_late_bits: int = 2
    sum_levels: int = 4
    early_sum_levels: int | None = None
    select_bits: int = 64
    load_bits: int = 64
    ring_select_bits: int = RING_SELECT_BITS
    elements_per_copy: int = ELEMENTS_PER_COPY
    counter_ready_ahead: bool = True

    #: ``early_sum_levels`` by atom elements when it is None
    EARLY_BY_ATOM = {16: 2, 32: 2, 64: 0}

    def early(self, atom_elements: int) -> int:
        if self.early_sum_levels is None:
            return self.EARLY_BY_ATOM[atom_elements]
        return self.early_sum_levels

    def check(self, atom_elements: int):
        most = (atom_elements - 1).bit_length()
        if not 1 <= self.sum_levels <= most:
            raise ValueError(f"timing.sum_levels must be 1 to {most} for {atom_elements}-element "
                             f"atoms, not {self.sum_levels!r}")
        if not 0 <= self.early(atom_elements) <= self.sum_levels:
            raise ValueError(f"timing.early_sum_levels must be 0 to sum_levels "
                             f"({self.sum_levels}), not {self.early_sum_levels!r}")
        for name in ("select_bits", "load_bits", "ring_select_bits", "elements_per_copy"):
            if getattr(self, name) < 1:
                raise ValueError(f"timing.{name} must be at least 1, not "
                                 f"{getattr(self, name)!r}")


class _State(enum.Enum):
    IDLE = 0
    CHECK = 1
    RUN = 2
    ABORT = 3
    FINISH = 4


class SparseDecompressor(wiring.Component):
    """Parameters
    ----------
    data_width : int
        Memory bus width in bits: 64, 128, 256 or 512.
    atom_elements : int
        Elements per output atom: 16, 32 or 64 (64 x 2 bytes is NVDLA's 128-byte atom). The
        compressed format does not depend on it: a smaller atom only narrows the stream and
        the expansion (16 elements: about 12,000 ECP5 LUT4 at 64 bits, against 20,000 at 32).
    addr_width, id_width, max_burst, fifo_depth
        AXI4 address and ID widths, the longest burst in beats, and the WMB and weight streams'
        FIFOs in beats (the WGS stream gets two bursts). A stream keeps up to its FIFO's depth in
        flight, so the default 64 covers a read latency of 20 cycles plus two 16-beat bursts.
    timing : SparseTiming
        The pipeline choices (:class:`SparseTiming`); the defaults meet 100 MHz on the ECP5.

    Ports: ``s_axil`` (registers, :data:`model.registers.sparse.SPARSE`), ``m_axi`` (AXI4
    manager), ``o_atoms`` (stream of :func:`atom_layout`), ``irq``.
    """

    def __init__(self, *, data_width=128, atom_elements=64, addr_width=32, id_width=4,
                 max_burst=16, fifo_depth=64, bank_mirror=False, timing=SparseTiming()):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {data_width!r}")
        if atom_elements not in (16, 32, 64):
            raise ValueError(f"atom_elements must be 16, 32 or 64, not {atom_elements!r}")
        if max_burst not in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            raise ValueError(f"max_burst must be a power of two up to 256, not {max_burst!r}")
        if not isinstance(timing, SparseTiming):
            raise TypeError(f"timing must be a SparseTiming, not {timing!r}")
        timing.check(atom_elements)
        self.timing = timing
        self.data_width = data_width
        self.atom_elements = atom_elements
        self.addr_width = addr_width
        self.id_width = id_width
        self.max_burst = max_burst
        self.fifo_depth = fifo_depth
        self.regmap = SPARSE
        self._bank = RegisterBank(SPARSE, addr_width=12, mirror=bank_mirror)
        # built here so that their own checks (fifo_depth holds a burst) refuse bad parameters
        self._reader = StreamReader(streams=3, data_width=data_width, addr_width=addr_width,
                                    id_width=id_width, max_burst=max_burst,
                                    fifo_depth=(2 * max_burst, fifo_depth, fifo_depth))
        self._writer = StreamWriter(data_width=data_width, addr_width=addr_width,
                                    id_width=id_width, max_burst=max_burst)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=12, data_width=32)),
            "m_axi": Out(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)),
            "o_atoms": Out(stream.Signature(atom_layout(atom_elements))),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.atom_elements
        t = self.timing
        DW = self.data_width // 8
        dw_log2 = (DW - 1).bit_length()

        regs, reader, writer = mount(m, bank=self._bank, reader=self._reader,
                                     writer=self._writer, s_axil=self.s_axil, m_axi=self.m_axi)

        segmenter = m.submodules.segmenter = Segmenter(data_width=DW, atom_elements=A, timing=t)
        decoder = m.submodules.decoder = Decoder(data_width=DW, atom_elements=A, timing=t)
        gearbox = m.submodules.gearbox = AtomGearbox(atom_elements=A, beat_bytes=DW,
                                                     elements_per_copy=t.elements_per_copy)
        # each stream reaches its buffer through a register slice, so the buffers' readies do not
        # reach the reader's FIFOs
        flush = Signal()
        for s, words in ((WGS_STREAM, segmenter.wgs), (WMB_STREAM, segmenter.mask),
                         (WEIGHT_STREAM, decoder.bytes)):
            in_slice = m.submodules[f"in{s}_slice"] = SkidBuffer(self.data_width)
            m.d.comb += in_slice.clear.eq(flush)
            wiring.connect(m, reader.o[s], in_slice.i)
            wiring.connect(m, in_slice.o, words)

        # -- job registers, latched at start ------------------------------------------------------
        state = Signal(_State)
        state_nx = Signal(_State)              # the state in the next cycle
        check_pass = Signal()                  # CHECK passes: RUN is next
        job = Signal(job_layout())
        two = job.two
        stream_en = Signal()
        write_en = Signal()
        start = regs.ctrl.start.pulse[0] & (state == _State.IDLE)
        with m.If(start):
            m.d.sync += [
                job.weight_bytes.eq(regs.weight_bytes.value.data),
                job.wmb_bits.eq(regs.wmb_bytes.value.data << 3),
                job.groups.eq(regs.groups.value.data), job.kernels.eq(regs.kernels.value.data),
                job.kernel_elems.eq(Mux(regs.precision.two_byte.data[0],
                                        regs.bytes_per_kernel.value.data >> 1,
                                        regs.bytes_per_kernel.value.data)),
                two.eq(regs.precision.two_byte.data[0]),
                stream_en.eq(regs.ctrl.stream_enable.data[0]),
                write_en.eq(regs.ctrl.write_enable.data[0]),
            ]
        m.d.comb += [
            regs.status.busy.r_data.eq(state != _State.IDLE),
            regs.hwinfo.data_bytes.r_data.eq(DW),
            regs.hwinfo.atom_elements.r_data.eq(A),
        ]

        error_code = Signal(4)
        error_group = Signal(24)
        m.d.comb += [regs.error.code.r_data.eq(error_code),
                     regs.error.group.r_data.eq(error_group)]
        raise_error = Signal(4)            # this cycle's first error (0: none)

        # -- the expansion and the delivery (.stages) ----------------------------------------------
        # they empty at a job's end (FINISH's flush) and as CHECK passes (when nothing flows)
        expander = m.submodules.expander = Expander(atom_elements=A, byte_ring=decoder.byte_ring,
                                                    timing=t)
        emitter = m.submodules.emitter = AtomEmitter(atom_elements=A,
                                                     elements_per_copy=t.elements_per_copy)
        stages_clear = flush | check_pass
        for stage in (expander, emitter):
            m.d.comb += [stage.two.eq(two), stage.clear.eq(stages_clear)]
        m.d.comb += [expander.new_job.eq(start), emitter.stream_en.eq(stream_en),
                     emitter.write_en.eq(write_en), gearbox.two.eq(two)]
        # finished atoms to the stream and the gearbox; the gearbox's beats to the writer
        wiring.connect(m, decoder.o, expander.i)
        wiring.connect(m, expander.ahead, decoder.o_ahead)
        wiring.connect(m, expander.o, emitter.i)
        wiring.connect(m, emitter.o_atoms, wiring.flipped(self.o_atoms))
        wiring.connect(m, emitter.o_write, gearbox.i)
        wiring.connect(m, gearbox.o, writer.i)

        # state == RUN, as a register of its own (set from the next state), so the decisions that
        # read it take a flip-flop, not a decode of the state: from ``state`` through four LUTs (the
        # decode, the setup decision and its overflow test) into the segmenter's ``kern_left``
        # would be too long a path
        run = Signal()
        m.d.sync += run.eq(state_nx == _State.RUN)

        # -- the segmenter (.segmenter): segments decided and counted from the mask side ---------
        m.d.comb += [segmenter.job.eq(job), segmenter.run.eq(run), segmenter.load.eq(check_pass),
                     segmenter.new_job.eq(start)]

        # -- the decoder (.decoder): segments checked against their WGS and stepped with their bytes
        wiring.connect(m, segmenter.o, decoder.i)
        m.d.comb += [decoder.two.eq(two), decoder.run.eq(run),
                     decoder.run_next.eq(state_nx == _State.RUN), decoder.load.eq(check_pass),
                     decoder.new_job.eq(start), decoder.drained.eq(~expander.busy),
                     decoder.bus_error.eq(reader.error | writer.error | writer.range_error),
                     decoder.bus_error_next.eq(reader.error_next | writer.error_next |
                                               writer.range_error_next)]
        finished = decoder.finished

        # -- errors, in the order the checks apply -----------------------------------------------
        check_wait = Signal()                  # CHECK's first cycle: the checks' flags load
        align_bad, size_bad = self._start_checks(m, regs, job, write_en)
        r = regs
        # CHECK's move on tests these flags, not raise_error: through raise_error's priority
        # chain it would wait on RUN's checks too (the decoder's WGS compare), a long path into
        # every register CHECK loads
        check_bad = Signal()
        m.d.comb += check_bad.eq(align_bad | size_bad)
        with m.If((state == _State.CHECK) & ~check_wait):
            m.d.comb += raise_error.eq(Mux(align_bad, Error.ALIGN,
                                           Mux(size_bad, Error.SIZE, 0)))
        with m.Elif(state == _State.RUN):
            with m.If(reader.error):
                m.d.comb += raise_error.eq(Error.READ_ERROR)
            with m.Elif(writer.error):
                m.d.comb += raise_error.eq(Error.WRITE_ERROR)
            with m.Elif(writer.range_error):
                m.d.comb += raise_error.eq(Error.DST_RANGE)
            with m.Else():                           # WGS_MISMATCH or a segmenter's marker
                m.d.comb += raise_error.eq(decoder.error)

        m.d.comb += regs.dense_bytes.value.r_data.eq(decoder.emitted)
        self._counters(m, regs, start, state != _State.IDLE, decoder.stalled)

        # -- job control -------------------------------------------------------------------------
        # the reads stop a cycle after an error or the end (a read issued in that cycle is drained
        # in ABORT like the others); so do the writes, as the state leaves RUN: a burst issued in
        # the error's cycle carries atoms decoded before it (a failing segment never leaves X, and
        # the writer refuses a burst past the address space itself), and the error's checks stay off
        # the writer's issue logic. The reader's stop is a register: high unless the last cycle was
        # in RUN without an error and not finished. That equals the state's decode OR a registered
        # "reads done" flag but for RUN's first cycle, when the streams' just-loaded lengths are
        # stale and no burst can go anyway; and the state's decode is no longer in front of the
        # reader's grant
        reads_stop = Signal(init=1)
        m.d.sync += reads_stop.eq(~((state == _State.RUN) & (raise_error == 0) & ~finished))
        # the streams' addresses and lengths load in RUN's first cycle, from a register set as
        # CHECK passes (the reads are stopped in that cycle, above): the state's decode and the
        # checks' flags stay off the enables of the reader's address and length registers
        reader_load = Signal()
        wgs_beats = ((job.groups << 2) + (DW - 1)) >> dw_log2
        m.d.sync += reader_load.eq(0)
        m.d.comb += [
            reader.load.eq(reader_load.replicate(3)),
            reader.addr[WGS_STREAM].eq(r.wgs_addr.value.data),
            reader.beats[WGS_STREAM].eq(wgs_beats),
            reader.addr[WMB_STREAM].eq(r.wmb_addr.value.data),
            reader.beats[WMB_STREAM].eq(r.wmb_bytes.value.data >> dw_log2),
            reader.addr[WEIGHT_STREAM].eq(r.weight_addr.value.data),
            reader.beats[WEIGHT_STREAM].eq(job.weight_bytes >> dw_log2),
        ]
        m.d.comb += [
            reader.stop.eq(reads_stop),
            writer.stop.eq(state != _State.RUN),
            writer.finish.eq(finished & ~expander.pending & gearbox.empty),
        ]
        done_set = Signal()
        err_set = Signal()
        m.d.comb += [regs.status.done.set.eq(done_set), regs.status.error.set.eq(err_set),
                     self.irq.eq((regs.status.done.data[0] & regs.irq_enable.done.data[0]) |
                                 (regs.status.error.data[0] & regs.irq_enable.error.data[0]))]
        # the flush is FINISH's cycle, as a register set from the next state (not a decode of the
        # state), and each buffer and engine it empties has a copy of its own, which the placer can
        # put beside it: one net from the decode would reach the gearbox's registers' resets across
        # the die
        finishing = state_nx == _State.FINISH
        m.d.sync += flush.eq(finishing)
        parts = (segmenter, decoder, gearbox, reader, writer)
        for b, copy in zip(parts, register_copies(platform, m, finishing, len(parts), "flush_c"),
                           strict=True):
            m.d.comb += b.flush.eq(copy)

        with m.If(raise_error != 0):
            m.d.sync += [error_code.eq(raise_error),
                         error_group.eq(Mux(raise_error == Error.WGS_MISMATCH, decoder.error_group,
                                            decoder.group))]

        # the next state is a signal of its own: the decoder works out its step a cycle ahead
        # from it (above)
        m.d.comb += state_nx.eq(state)
        m.d.sync += state.eq(state_nx)
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start):
                    m.d.comb += state_nx.eq(_State.CHECK)
                    m.d.sync += [error_code.eq(0), error_group.eq(0), check_wait.eq(1)]
            with m.Case(_State.CHECK):
                with m.If(check_wait):
                    m.d.sync += check_wait.eq(0)
                with m.Elif(check_bad):
                    m.d.comb += state_nx.eq(_State.FINISH)
                with m.Else():
                    m.d.comb += [writer.load.eq(1), writer.addr.eq(r.dst_addr.value.data),
                                 check_pass.eq(1), state_nx.eq(_State.RUN)]
                    m.d.sync += reader_load.eq(1)
            with m.Case(_State.RUN):
                with m.If(raise_error != 0):
                    m.d.comb += state_nx.eq(_State.ABORT)
                with m.Elif(finished & ~expander.pending & (~write_en | writer.done)):
                    m.d.comb += state_nx.eq(_State.ABORT)     # drain reads, then finish
            with m.Case(_State.ABORT):
                with m.If(reader.idle & writer.idle):
                    m.d.comb += state_nx.eq(_State.FINISH)
            with m.Case(_State.FINISH):
                m.d.comb += [done_set.eq(1), err_set.eq(error_code != 0),
                             state_nx.eq(_State.IDLE)]
        return m

    def _counters(self, m, regs, start, busy, stalled):
        """The job's cycle and stall counters (registers ``cycles``, ``stall_cycles``): from
        ``start``, every cycle while ``busy``, and those the decoder was ``stalled`` on its
        input; each stops at its top value."""
        cycles = Signal(32)
        stalls = Signal(32)
        m.d.comb += [regs.cycles.value.r_data.eq(cycles),
                     regs.stall_cycles.value.r_data.eq(stalls)]
        with m.If(start):
            m.d.sync += [cycles.eq(1), stalls.eq(0)]
        with m.Elif(busy):
            m.d.sync += cycles.eq(Mux(cycles == 0xFFFF_FFFF, cycles, cycles + 1))
            with m.If(stalled & (stalls != 0xFFFF_FFFF)):
                m.d.sync += stalls.eq(stalls + 1)

    def _start_checks(self, m, r, job, write_en):
        """The checks a job's registers pass before anything moves, registered: the adders and
        compares run in the start's cycle and the verdict is read a cycle into CHECK. Returns
        the flags (alignment, sizes and counts)."""
        aw = self.addr_width
        align = Signal()
        size = Signal()
        m.d.sync += [
            align.eq((r.weight_addr.value.data[:8] != 0) | (r.wmb_addr.value.data[:8] != 0) |
                     (r.wgs_addr.value.data[:8] != 0) |
                     (write_en & (r.dst_addr.value.data[:8] != 0))),
            size.eq((r.weight_bytes.value.data[:7] != 0) |
                    (r.wmb_bytes.value.data[:7] != 0) | (r.wmb_bytes.value.data == 0) |
                    (r.wgs_bytes.value.data[:7] != 0) | (r.wgs_bytes.value.data == 0) |
                    (job.groups == 0) | (job.kernels == 0) | (job.kernel_elems == 0) |
                    (job.two & r.bytes_per_kernel.value.data[0]) |
                    (r.wgs_bytes.value.data < (job.groups << 2)) |
                    # a surface that runs past the top of the address space
                    ((r.weight_addr.value.data + r.weight_bytes.value.data) >> aw != 0) |
                    ((r.wmb_addr.value.data + r.wmb_bytes.value.data) >> aw != 0) |
                    ((r.wgs_addr.value.data + r.wgs_bytes.value.data) >> aw != 0)),
        ]
        return align, size
