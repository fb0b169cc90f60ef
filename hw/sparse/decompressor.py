"""The sparse weight decompressor: NVDLA's compressed weight surfaces (WGS, WMB, packed
non-zeros; docs/weights.md) in, the dense weight image out as a stream of atoms and,
optionally, in memory.

Data path
---------
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

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.sparse import SPARSE, Error

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.fifo import SkidBuffer, register_slice
from ..bus.regbank import RegisterBank
from ..fabric import register_copies, shared_select
from .engines import StreamReader, StreamWriter, mount
from .gearbox import ELEMENTS_PER_COPY, AtomGearbox
from .ringbuf import SELECT_BITS as RING_SELECT_BITS
from .ringbuf import RingBuffer
from .shiftbuf import ShiftBuffer

__all__ = ["SparseDecompressor", "SparseTiming"]

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
    """

    byte_late_bits: int = 3
    mask_late_bits: int = 2
    sum_levels: int = 4
    early_sum_levels: int | None = None
    select_bits: int = 64
    load_bits: int = 64
    ring_select_bits: int = RING_SELECT_BITS
    elements_per_copy: int = ELEMENTS_PER_COPY

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


def atom_layout(atom_elements):
    return data.StructLayout({"data": 16 * atom_elements, "last": 1})


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
        sum_levels = t.sum_levels
        DW = self.data_width // 8
        dw_log2 = (DW - 1).bit_length()
        aw = self.addr_width

        regs, reader, writer = mount(m, bank=self._bank, reader=self._reader,
                                     writer=self._writer, s_axil=self.s_axil, m_axi=self.m_axi)

        wgsbuf = m.submodules.wgsbuf = ShiftBuffer(unit=32, in_units=DW // 4,
                                                   capacity=2 * (DW // 4))
        # the mask and byte buffers hold an atom's worth (A bits, 2A bytes) and two beats more
        maskbuf = m.submodules.maskbuf = RingBuffer(unit=1, in_units=8 * DW,
                                                    words=-(-(A + 16 * DW) // (8 * DW)),
                                                    out_units=A, late_bits=t.mask_late_bits,
                                                    select_bits=t.ring_select_bits)
        databuf = m.submodules.databuf = RingBuffer(unit=8, in_units=DW, words=2 * A // DW + 2,
                                                    out_units=2 * A, late_bits=t.byte_late_bits,
                                                    take_ahead=True, select_bits=t.ring_select_bits)
        gearbox = m.submodules.gearbox = AtomGearbox(atom_elements=A, beat_bytes=DW,
                                                     elements_per_copy=t.elements_per_copy)
        # each stream reaches its buffer through a register slice, so the buffers' readies do not
        # reach the reader's FIFOs
        flush = Signal()
        for s, buf in ((WGS_STREAM, wgsbuf), (WMB_STREAM, maskbuf), (WEIGHT_STREAM, databuf)):
            in_slice = m.submodules[f"in{s}_slice"] = SkidBuffer(self.data_width)
            m.d.comb += in_slice.clear.eq(flush)
            wiring.connect(m, reader.o[s], in_slice.i)
            wiring.connect(m, in_slice.o, buf.i)
        m.d.comb += wgsbuf.i_count.eq(wgsbuf.in_units)

        # -- job registers, latched at start ------------------------------------------------------
        state = Signal(_State)
        state_nx = Signal(_State)              # the state in the next cycle
        check_pass = Signal()                  # CHECK passes: RUN is next
        weight_bytes = Signal(32)
        wmb_bits = Signal(35)
        groups = Signal(24)
        kernels = Signal(24)
        kernel_elems = Signal(24)
        two = Signal()
        stream_en = Signal()
        write_en = Signal()
        start = regs.ctrl.start.pulse[0] & (state == _State.IDLE)
        with m.If(start):
            m.d.sync += [
                weight_bytes.eq(regs.weight_bytes.value.data),
                wmb_bits.eq(regs.wmb_bytes.value.data << 3),
                groups.eq(regs.groups.value.data), kernels.eq(regs.kernels.value.data),
                kernel_elems.eq(Mux(regs.precision.two_byte.data[0],
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

        # -- state shared by the decoder's stages -------------------------------------------------
        slots = Signal(data.ArrayLayout(16, A))
        emitted = Signal(32)                   # dense bytes sent out
        atom_bytes = Mux(two, 2 * A, A)

        # the output queue: finished atoms wait in a register slice, whose ready depends on its
        # fill level alone, so the expansion's stages (and through them the decoder's step) never
        # wait on the stream's or the gearbox's ready in the same cycle. Its head is owed to the
        # stream and/or the writer (as the job enables them) and leaves once both have it.
        # (it holds the 16-bit slots; one-byte elements are packed down at its output, a
        # multiplexer off the expansion's path)
        aq_layout = data.StructLayout({"slots": data.ArrayLayout(16, A), "last": 1})
        aq_in = Signal(aq_layout)
        aq_push = Signal()
        can_emit = Signal()
        out = Signal(aq_layout)
        out_valid = Signal()
        out_pop = Signal()
        atomq = register_slice(m, "atomq", valid=aq_push, ready=can_emit, payload=aq_in,
                               out_valid=out_valid, out_ready=out_pop, out_payload=out,
                               reset=flush, load_bits=t.load_bits)
        out_pending = atomq.level != 0         # an atom not yet delivered (head or behind it)
        out_atom = Signal(16 * A)
        # the packing's choice comes from copies of ``two``, one per ``elements_per_copy`` elements:
        # from ``two`` alone, it was one net to 16 x A multiplexers across the die. A copy follows
        # ``two`` a cycle late, long before the job's first atom leaves the queue (its reads come
        # first)
        n_two = max(1, A // t.elements_per_copy)
        two_c = register_copies(platform, m, two, n_two, "two_c")
        packed = Cat(*(out.slots[i][:8] for i in range(A)), Const(0, 8 * A))
        m.d.comb += out_atom.eq(shared_select(two_c, out.slots.as_value(), packed))
        sent_stream = Signal()
        sent_write = Signal()
        owe_stream = stream_en & ~sent_stream
        owe_write = write_en & ~sent_write
        o = self.o_atoms
        m.d.comb += [o.valid.eq(out_valid & owe_stream), o.payload.data.eq(out_atom),
                     o.payload.last.eq(out.last)]
        to_stream = o.valid & o.ready
        to_gear = Signal()
        m.d.comb += [gearbox.two.eq(two), gearbox.i.valid.eq(out_valid & owe_write),
                     gearbox.i.payload.eq(out_atom), to_gear.eq(gearbox.i.valid & gearbox.i.ready),
                     out_pop.eq(out_valid & (~owe_stream | to_stream) & (~owe_write | to_gear))]
        with m.If(out_pop):
            m.d.sync += [sent_stream.eq(0), sent_write.eq(0)]
        with m.Else():
            with m.If(to_stream):
                m.d.sync += sent_stream.eq(1)
            with m.If(to_gear):
                m.d.sync += sent_write.eq(1)

        # gearbox -> writer, one beat per cycle: the gearbox's beats leave through a register slice
        # of its own
        wiring.connect(m, gearbox.o, writer.i)

        # state == RUN, as a register of its own (set from the next state), so the decisions that
        # read it take a flip-flop, not a decode of the state: from ``state`` through four LUTs (the
        # decode, the setup decision and its overflow test) into ``kern_left`` would be too long a
        # path
        run = Signal()
        m.d.sync += run.eq(state_nx == _State.RUN)
        bus_error = reader.error | writer.error | writer.range_error

        # -- the segmenter: decides segments from the mask side alone ------------------------------
        # The next segment's length and its tests are registers, worked out as the segment before
        # is taken, so a decision is a few comparisons of registers. Errors it finds go down the
        # queue as markers, behind the segments before them, and the decoder raises them in turn.
        s_pos = Signal(range(A))               # the next segment's first position in the atom
        room = Signal(range(A + 1), init=A)    # A - s_pos
        rest = Signal(32)                      # the group's elements after this segment
        seg = Signal(range(A + 1))             # the group's elements left, at most room
        s_ends = Signal()                      # the segment ends the group (rest is not used)
        s_completes = Signal()                 # seg == room: it completes the atom
        g_active = Signal()                    # a group's WGS word and size are loaded
        g_first = Signal()                     # the group's first segment is next
        g_wgs = Signal(32)                     # the group's WGS word
        g_last = Signal()                      # the group is the job's last
        s_all = Signal()                       # the last group has been set up
        s_halt = Signal()                      # an error marker has gone: decide nothing more
        kern_left = Signal(24)                 # kernels left in the current set
        groups_set = Signal(24)
        wgs_room = Signal(32)                  # weight bytes not yet claimed by a group's WGS
        wmb_left = Signal(35)                  # mask bits the WMB still holds
        wmb_plenty = Signal()                  # wmb_left >= A: no segment can run short
        next_elems = Signal(32)                # the next group's elements, from kern_left
        next_ok = Signal()                     # next_elems is up to date

        seg_layout = data.StructLayout({
            "err": 4, "raw": len(maskbuf.data), "off": t.mask_late_bits, "pos": range(A),
            "end": range(A + 1), "keep": A, "ends": 1,
            "completes": 1, "first": 1, "wgs": 32, "last_group": 1})
        # R1: the decided segment (or marker), in a register slice. Its ready is a register
        # (the slice's second entry is free), so the decision does not wait on the stages after
        # it moving on, and its data registers load whenever the output entry is free: the
        # take reaches the slice's two valid bits, not the segment's hundred-odd data bits.
        r1_in = Signal(seg_layout)
        r1_push = Signal()
        r1_rdy = Signal()
        r1 = Signal(seg_layout)
        r1_valid = Signal()
        r1_free = Signal()
        register_slice(m, "segs", valid=r1_push, ready=r1_rdy, payload=r1_in,
                       out_valid=r1_valid, out_ready=r1_free, out_payload=r1, reset=flush)

        kpg = Mux(two, 16, 32)
        # the next group's kernels, then its size: two registers, so the multiplier's input is
        # a register (its compare in front took the rest of the cycle); next_ok comes two
        # cycles after the kernels left change
        kg = Signal(6)
        kg_part = Signal()                     # the next group is a set's partial one
        kg_ok = Signal()
        # the kernels left after the next group and whether it is the job's last, registered
        # from the same registers (steady by the time next_ok is set), so a group's start
        # loads registers and its compare and subtract stay off the start's path
        kl_next = Signal(24)
        last_next = Signal()
        # a group's elements take two values in a job: kpg kernels' (a shift), or a set's partial
        # group's, kernels mod kpg (the only kern_left below kpg). The second's multiply runs
        # between registers that load every cycle from the job's registers: ke_r and km_r at start +
        # 2, the two 12-bit halves' products (a multiplier block each) at start + 3, their sum at
        # start + 4. next_elems follows it every cycle, and the first group's start waits for the
        # first WGS word, read from memory once RUN has begun (start + 3): start + 7 at the
        # earliest. (A sum a cycle later still passes the bench, as this predicts; nothing sooner
        # reads it.)
        ke_r = Signal.like(kernel_elems)
        km_r = Signal(5)
        part_lo = Signal(17)
        part_hi = Signal(17)
        part_elems = Signal(32)
        full_elems = Signal(32)
        m.d.sync += [ke_r.eq(kernel_elems), km_r.eq(kernels[:5] & Mux(two, 15, 31)),
                     part_lo.eq(km_r * ke_r[:12]), part_hi.eq(km_r * ke_r[12:]),
                     part_elems.eq(part_lo + (part_hi << 12)),
                     full_elems.eq(Mux(two, kernel_elems << 4, kernel_elems << 5))]
        partial = kern_left < kpg
        m.d.sync += [kg.eq(Mux(partial, kern_left, kpg)), kg_part.eq(partial), kg_ok.eq(1),
                     next_elems.eq(Mux(kg_part, part_elems, full_elems)), next_ok.eq(kg_ok),
                     kl_next.eq(Mux(kern_left == kg, kernels, kern_left - kg)),
                     last_next.eq(groups_set + 1 == groups)]
        wgs_word = wgsbuf.data[:32]
        s_run = run & ~s_halt & r1_rdy
        # the WGS total's check against the weight surface, worked out a cycle ahead into a
        # register: ``wgs_ok`` says the head word was there and untaken in the cycle before, so the
        # check saw the same word and the same room (which only a group's start changes). The room
        # left, not the running total, so the check is one compare, not an add and a compare
        setup_overflow = Signal()
        wgs_ok = Signal()
        m.d.sync += [setup_overflow.eq(wgs_word > wgs_room),
                     wgs_ok.eq(run & (wgsbuf.level != 0) & ~wgsbuf.take_en & ~flush)]
        setup = Signal()
        m.d.comb += setup.eq(s_run & ~g_active & ~s_all & wgs_ok & next_ok)
        decide = s_run & g_active
        # whether the WMB holds the segment's bits: certainly while A bits or more are left
        # (wmb_plenty); below that, wmb_left fits seg's width, and a short compare of the two,
        # registered a cycle before, holds while no take or setup has changed them (near_ok,
        # as for have_bits below): near the stream's end a segment waits a cycle for it
        near_ok = Signal()
        wmb_fits = Signal()
        m.d.sync += wmb_fits.eq(seg <= wmb_left[:len(seg)])
        wmb_enough = wmb_plenty | (near_ok & wmb_fits)
        wmb_short = ~wmb_plenty & near_ok & ~wmb_fits
        # whether at least A bits are left after this segment (seg <= A): certainly if 2A or
        # more are left now (a zero test of the high bits), else a short compare; not a
        # 35-bit subtraction and compare
        lw = (2 * A - 1).bit_length()
        plenty_after = (wmb_left[lw:] != 0) | (wmb_left[:lw] >= seg + A)
        # whether the mask buffer holds the segment's bits, from registers alone: the buffer's
        # ``deep`` (A bits or more, so any segment), or else ``level >= seg`` registered a cycle
        # before, trusted only if nothing has taken bits or changed seg since (a word arriving
        # meanwhile only adds bits: at worst the segment waits a cycle, and only when fewer than A
        # bits are held, near the stream's end)
        near_bits = Signal()
        have_bits = maskbuf.deep | (near_bits & near_ok)
        take_seg = Signal()
        m.d.sync += [near_bits.eq(maskbuf.enough),
                     near_ok.eq(~(take_seg | setup | flush | start))]
        m.d.comb += [take_seg.eq(decide & wmb_enough & have_bits),
                     maskbuf.take.eq(seg), maskbuf.take_en.eq(take_seg),
                     wgsbuf.take.eq(1)]

        # the next segment's registers, for a group's start and after a segment taken: both worked
        # out every cycle and chosen by AND-OR (as a multiplexer's two inputs, Yosys would merge the
        # two sets of comparisons and put the decision in front of them) A 32-bit count against room
        # (at most A) is a zero test of its high bits and a compare of its low ones: a full-width
        # compare maps to a long chain of LUTs. After a segment taken the group goes on only if that
        # segment filled its atom, so the next one has the whole atom (A) and is min(rest, A), and
        # the one after that starts from rest - A: both from the register rest, so seg is not in its
        # own loop.
        ls = len(seg)

        def segment(count, rm):
            small = count[ls:] == 0              # count < 2**ls, and then it is its low bits
            lo = count[:ls]
            v = Signal(len(seg) + 2)
            m.d.comb += v.eq(Cat(Mux(small & (lo < rm), lo, rm), small & (lo <= rm),
                                 ~small | (rm <= lo)))
            return v

        room_after = Signal(range(A + 1))
        m.d.comb += room_after.eq(Mux(s_completes, A, room - seg))
        at_setup = segment(next_elems, room)
        after_take = segment(rest, Const(A, len(room)))
        # rest at a group's start is next_elems - room when the segment leaves any (rest is
        # only read when it does), and after a take rest - A for the same reason
        m.d.sync += rest.eq(
            ((next_elems - room)[:32] & setup.replicate(32)) |
            ((rest - A)[:32] & take_seg.replicate(32)) |
            (rest & (~(setup | take_seg)).replicate(32)))
        seg_regs = Cat(seg, s_ends, s_completes)
        m.d.sync += seg_regs.eq(
            (at_setup & setup.replicate(len(seg_regs))) |
            (after_take & take_seg.replicate(len(seg_regs))) |
            (seg_regs & (~(setup | take_seg)).replicate(len(seg_regs))))

        # R1's entry: a marker (the WGS total's overflow at a group's setup, the WMB short at a
        # decision) or the segment; its fields from registers and the mask buffer's view, the
        # decision only pushing it
        m.d.comb += [
            r1_push.eq((setup & setup_overflow) | (decide & wmb_short) | take_seg),
            r1_in.err.eq(Mux(~g_active, Error.WGS_OVERFLOW, Mux(wmb_short, Error.WMB_SHORT, 0))),
            r1_in.raw.eq(maskbuf.data), r1_in.off.eq(maskbuf.offset),
            # the segment's bits, as a compare of seg with each constant position (a few
            # gates each; ``(1 << seg) - 1`` maps to a shifter and a carry chain)
            r1_in.keep.eq(Cat(seg > k for k in range(A))),
            # the segment's end (pos + seg <= A: a segment stays in its atom) made from registers
            # here, so R2's compares with each position read a register
            r1_in.pos.eq(s_pos), r1_in.end.eq(s_pos + seg),
            r1_in.ends.eq(s_ends),
            r1_in.completes.eq(s_completes), r1_in.first.eq(g_first), r1_in.wgs.eq(g_wgs),
            r1_in.last_group.eq(g_last)]
        # the WGS word a group's setup reads leaves the buffer a cycle later (wgs_take): the setup
        # decision then reaches one flip-flop, not the enables of the buffer's shift. No setup comes
        # in that cycle (g_active is set) or the next (wgs_ok is clear after a take), so none reads
        # the old word again. (Today next_ok alone keeps the next setup off for two cycles after
        # one, past the take: it is cleared with the setup and follows kg_ok, cleared too. So
        # wgs_ok's ~take_en changes nothing now, and no test can fail without it; it keeps the
        # take's rule here if the kernel group's registers get quicker.)
        wgs_take = Signal()
        m.d.sync += wgs_take.eq(0)
        m.d.comb += wgsbuf.take_en.eq(wgs_take)
        # A group's setup loads its registers whether or not its WGS word overflows the weight
        # surface: an overflow halts the segmenter (its marker goes into R1 this cycle), and
        # no decision reads them again before the next job's start. So the overflow test
        # reaches s_halt alone, not the hundred-odd flip-flops a setup loads.
        with m.If(setup):
            m.d.sync += wgs_take.eq(1)
            m.d.sync += [g_active.eq(1), g_first.eq(1), g_wgs.eq(wgs_word), g_last.eq(last_next),
                         s_all.eq(last_next), groups_set.eq(groups_set + 1),
                         wgs_room.eq(wgs_room - wgs_word),
                         kern_left.eq(kl_next), kg_ok.eq(0), next_ok.eq(0)]
            with m.If(setup_overflow):
                m.d.sync += s_halt.eq(1)
        with m.Elif(decide & wmb_short):
            m.d.sync += s_halt.eq(1)
        with m.Elif(take_seg):
            m.d.sync += [
                wmb_left.eq(wmb_left - seg), wmb_plenty.eq(plenty_after),
                g_first.eq(0),
                s_pos.eq(Mux(s_completes, 0, s_pos + seg)), room.eq(room_after),
            ]
            with m.If(s_ends):
                m.d.sync += g_active.eq(0)

        # -- the segment's counts and positions, then the queue -----------------------------------
        # R2, from R1's registers: the segment's bits at their atom positions, the positions it
        # covers and its popcount in parts (a byte of mask bits each). The queue's entry adds the
        # parts up (the packed bytes the segment uses) into R3; a register slice (ready from its
        # fill level) queues them for the decoder. A whole popcount in one cycle, into the queue's
        # storage, is too long a path.
        mask = Signal(A)
        m.d.comb += mask.eq(maskbuf.finish(m, r1.raw, r1.off) & r1.keep)
        parts = [mask[i:i + 8] for i in range(0, A, 8)]
        r2_layout = data.StructLayout({
            "err": 4, "placed": A, "in_seg": A, "parts": data.ArrayLayout(4, len(parts)),
            "ends": 1, "completes": 1, "first": 1, "wgs": 32, "last_group": 1})
        r2 = Signal(r2_layout)
        r2_valid = Signal()
        r2_free = Signal()
        with m.If(r2_free):
            m.d.sync += [
                r2_valid.eq(r1_valid), r2.err.eq(r1.err), r2.placed.eq(mask << r1.pos),
                *(r2.parts[j].eq(_popcount(m, part)) for j, part in enumerate(parts)),
                r2.ends.eq(r1.ends), r2.completes.eq(r1.completes), r2.first.eq(r1.first),
                r2.wgs.eq(r1.wgs), r2.last_group.eq(r1.last_group)]
            for k in range(A):
                at_or_after = (r1.pos <= k) if k < A - 1 else Const(1)   # pos <= A - 1 always
                m.d.sync += r2.in_seg[k].eq(at_or_after & (k < r1.end))

        # R3, a register slice, holds R2's fields with the segment's count summed: the queue's head
        # (and the byte ring's copy of its ``need``, below) then load from registers, not through
        # the sum's adders. Its ready is a register, so R2's and R1's enables stop at it: as a plain
        # stage whose free followed the queue's, R3 would make that chain of enables one longer
        early = t.early(A)
        r3_layout = data.StructLayout({
            "err": 4, "placed": A, "in_seg": A, "need": range(2 * A + 1), "ends": 1,
            "completes": 1, "first": 1, "wgs": 32, "wgs_big": 1, "last_group": 1,
            # the prefix sums' first levels, which go no further than the queue's input
            **({"sums": data.ArrayLayout(early + 1, A)} if early else {})})
        r3_in = Signal(r3_layout)
        nz = _add_tree(m, [r2.parts[j] for j in range(len(parts))], "nz")
        m.d.comb += [
            r3_in.err.eq(r2.err), r3_in.placed.eq(r2.placed), r3_in.in_seg.eq(r2.in_seg),
            r3_in.need.eq(Mux(two, nz << 1, nz)), r3_in.ends.eq(r2.ends),
            r3_in.completes.eq(r2.completes), r3_in.first.eq(r2.first), r3_in.wgs.eq(r2.wgs),
            r3_in.wgs_big.eq(r2.wgs[len(r3_in.need):] != 0),
            r3_in.last_group.eq(r2.last_group),
            *((r3_in.sums[i].eq(v) for i, v in enumerate(_clear_sums(m, r2.placed, early)))
              if early else ()),
        ]
        r3 = Signal(r3_layout)
        r3_valid = Signal()
        r3_rdy = Signal()
        q_in_ready = Signal()
        register_slice(m, "r3", valid=r2_valid, ready=r3_rdy, payload=r3_in,
                       out_valid=r3_valid, out_ready=q_in_ready, out_payload=r3, reset=flush)
        m.d.comb += [
            r2_free.eq(~r2_valid | r3_rdy),
            r1_free.eq(~r1_valid | r2_free),
        ]
        # the queue's entry carries the first sum_levels levels of the prefix sums of the clear
        # bits the expansion needs (finished from the queue's head into X's registers): R3's
        # first levels, if it has any, and the levels after them made here
        seg_fields = [name for name, _ in r3_layout if name != "sums"]
        q_layout = data.StructLayout({
            **{name: r3_layout[name].shape for name in seg_fields},
            "sums": data.ArrayLayout(sum_levels + 1, A)})
        q_in = Signal(q_layout)
        q_sums = (_prefix_levels(m, [r3.sums[i] for i in range(A)], early, sum_levels) if early
                  else _clear_sums(m, r3.placed, sum_levels))
        m.d.comb += [
            *(q_in[name].eq(r3[name]) for name in seg_fields),
            *(q_in.sums[i].eq(v[:sum_levels + 1]) for i, v in enumerate(q_sums)),
        ]
        head = Signal(q_layout)
        h_valid = Signal()
        h_take = Signal()
        # . The take is worked out a cycle ahead (``step``, below), and so the head's load is a
        # register too, one copy per share of the head on the ECP5 board tops
        step_nx = Signal()
        # its select (second entry or input) in copies, as X's: one flag's net would cross ~240 bits
        # on the way through the queue's next `need` into the byte ring's kept sums
        segq = register_slice(m, "segq", valid=r3_valid, ready=q_in_ready, payload=q_in,
                              out_valid=h_valid, out_ready=h_take, out_payload=head, reset=flush,
                              load_bits=t.load_bits, ready_next=step_nx, select_bits=t.select_bits)
        # the byte ring takes the head's ``need`` a cycle ahead, from the queue's next output, into
        # a copy of its own (``take``), which the placer can put beside the ring's pointer, level
        # and tests: the head's register sits with the rest of the head, across the die from the
        # ring's room test. With the next value the ring also keeps its level less the take in
        # registers, and its tests are signs, so no compare of the copy lies on the early step's
        # path
        head_next = segq.ahead.o_payload
        m.d.comb += databuf.take_next.eq(head_next.need)

        # -- the decoder: the queue's head checked against the group's WGS and the bytes held -----
        grp_bytes = Signal(32)                 # WGS bytes left in the group
        d_open = Signal()                      # the atom in the slots has had a segment
        d_all = Signal()                       # the last group's last segment has been decoded
        group_idx = Signal(24)
        # the queue's head failed the WGS check a cycle ago: the check registered every cycle (so
        # the step reaches one register, not the check's logic), and a flag that holds it once seen.
        # A head fails it whether or not it was stepped: a head with more mask bits than its group's
        # WGS may want bytes past the end of the weight surface, and waits for them forever
        chk_r = Signal()
        mis_seen = Signal()
        mis_r = Signal()
        mis_group = Signal.like(group_idx)     # the group of the queue's head a cycle ago
        m.d.comb += mis_r.eq(chk_r | mis_seen)
        grp_big = Signal()                     # grp_bytes is beyond any segment's need
        avail = Signal(32)
        m.d.comb += avail.eq(Mux(head.first, head.wgs, grp_bytes))
        # the WGS checks as a flag for the bytes left's high bits and a compare of their low
        # ones (as wide as a segment's need), not a 32-bit compare
        nw = len(head.need)
        avail_big = Mux(head.first, head.wgs_big, grp_big)
        avail_lo = avail[:nw]
        marker = h_valid & (head.err != 0)
        mismatch = h_valid & (head.err == 0) & \
            ((~avail_big & (head.need > avail_lo)) |
             (head.ends & (avail_big | (head.need != avail_lo))))
        # whether the byte buffer holds the head's bytes, from registers, as the segmenter's
        # have_bits: the buffer's ``deep`` (2A bytes or more, any segment's need), or else the
        # compare registered a cycle before, trusted if no step has taken bytes or changed the
        # head since (nor the head arrived since: ``h_valid`` a cycle before)
        near_bytes = Signal()
        near_bytes_ok = Signal()
        have_bytes = databuf.deep | (near_bytes & near_bytes_ok)
        stalled_in = run & ~d_all & (~h_valid | ~have_bytes)
        # the expansion runs over three stages after the decoder's: the decoder registers the
        # segment with the prefix sums of its clear bits (X), X works out the move masks from them
        # (P), P spreads the window's elements by the wide moves and Q by the short ones and updates
        # the atom's slots (and hands the atom to the output queue when the segment completes it).
        # Each stage hands on when the next is free, and takes a new segment in the same cycle. X
        # holds the window's bytes as the byte buffer hands them over, rotated to all but the low
        # ``byte_late_bits`` bits of its read pointer (and those bits): the rotation's last stages
        # run on X's registers, into P's lanes P runs the expansion's first (widest) moves and Q the
        # rest with the slot merge, so the moves and the merge into the output queue are not one
        # cycle's path X is the output of a register slice (a skid buffer): the decoder steps a
        # segment in when the slice's second entry is free, a register, so the step does not wait on
        # the stages after X moving on. A segment that failed the WGS check (``bad``, the check made
        # as it was stepped) stops in P (``p_bad``): X hands it on as any other, so the check's
        # compare reaches X's data and not X's load
        common = {"valid": 1, "placed": A, "in_seg": A, "completes": 1, "last": 1}
        xs_layout = data.StructLayout({
            **{f: w for f, w in common.items() if f != "valid"}, "bad": 1,
            "raw": len(databuf.data), "off": databuf.late_bits,
            "dist": data.ArrayLayout((A - 1).bit_length(), A)})
        x_in = Signal(xs_layout)
        x = Signal(xs_layout)
        x_valid = Signal()
        x_push = Signal()
        xs_rdy = Signal()
        p = Signal(data.StructLayout({**common, "lanes": data.ArrayLayout(16, A)}))
        q = Signal(data.StructLayout({**common, "lanes": data.ArrayLayout(16, A)}))
        q_done = Signal()
        m.d.comb += q_done.eq(q.valid & (~q.completes | can_emit))
        q_free = ~q.valid | q_done
        p_done = Signal()
        p_bad = Signal()
        m.d.comb += p_done.eq(p.valid & q_free & ~p_bad)
        p_free = ~p.valid | p_done
        x_done = Signal()
        m.d.comb += x_done.eq(x_valid & p_free)
        # X is hundreds of bits wide: its select (second entry or input) in copies, one per
        # ``select_bits``, and its load, the late x_done, on a global network where the platform has
        # one. X's load is a register: X hands on (``x_done``) worked out a cycle ahead, from the
        # next values of its own valid and bad flags and of P's and Q's (``x_done_nx``, set below),
        # not from P's valid through two LUTs and the load's LUT
        x_done_nx = Signal()
        xs = register_slice(m, "xs", valid=x_push, ready=xs_rdy, payload=x_in,
                            out_valid=x_valid, out_ready=x_done, out_payload=x, reset=flush,
                            select_bits=t.select_bits, global_load="sparse_x_load",
                            ready_next=x_done_nx)
        # The decoder steps when it runs, the queue's head is a segment (not an error marker) whose
        # bytes the byte buffer holds, X has room, no WGS check has failed and the bus has answered
        # no error. The WGS check does not hold the step back: a segment that fails it is stepped
        # like the others, and the failure (registered with its group) is raised in the next cycle,
        # before anything of that segment reaches the writer (it stops in P), and stops the steps
        # after it. Every one of those tests is a register, and the step is one too: worked out a
        # cycle ahead from the values the tests' registers load (``*_nx``), so it equals the tests
        # of this cycle (``step_ref``, kept for the tests) with no logic between the step and the
        # hundreds of flip-flops it enables: the queue's head, the byte ring's pointer, the group's
        # counts.
        step = Signal()
        h_valid_nx = ~flush & segq.ahead.o_valid
        marker_nx = h_valid_nx & (head_next.err != 0)
        mis_seen_nx = Mux(check_pass, 0, mis_r)
        near_bytes_nx = databuf.enough
        near_bytes_ok_nx = h_valid & ~step & ~flush
        have_bytes_nx = databuf.deep_next | (near_bytes_nx & near_bytes_ok_nx)
        xs_rdy_nx = flush | xs.ahead.i_ready
        bus_error_nx = reader.error_next | writer.error_next | writer.range_error_next
        m.d.comb += step_nx.eq((state_nx == _State.RUN) & h_valid_nx & ~marker_nx &
                               ~(mismatch | mis_seen_nx) & have_bytes_nx & xs_rdy_nx &
                               ~bus_error_nx)
        m.d.sync += [step.eq(step_nx), near_bytes.eq(near_bytes_nx),
                     near_bytes_ok.eq(near_bytes_ok_nx), chk_r.eq(mismatch),
                     mis_seen.eq(mis_seen_nx)]
        step_ref = Signal()
        m.d.comb += [step_ref.eq(run & h_valid & ~marker & ~mis_r & have_bytes & xs_rdy &
                                 ~bus_error),
                     h_take.eq(step), databuf.take_en.eq(step)]

        # the segment's elements, the window's first, from X's registers
        window = databuf.finish(m, x.raw, x.off)
        lanes = Signal(data.ArrayLayout(16, A))
        for k in range(A):
            m.d.comb += lanes[k].eq(Mux(two, window[16 * k:16 * k + 16],
                                        window[8 * k:8 * k + 8]))

        # the tail: the last partial atom, then zero atoms to a multiple of 128 bytes
        tail_step = run & d_all & (d_open | (emitted[:7] != 0)) & xs_rdy & ~bus_error
        finished = run & d_all & ~d_open & (emitted[:7] == 0) & ~x_valid & ~p.valid & ~q.valid
        ends_image = (emitted + atom_bytes)[:7] == 0

        # the expansion's control in two halves: the distances (prefix sums) from the head's
        # placed bits into X's registers, the move masks from X's registers into P's
        dist = _expand_dist_from(m, [head.sums[i] for i in range(A)], sum_levels)
        x_dist = [x.dist[q] for q in range(A)]
        moves = _expand_moves_from(m, x.placed, x_dist)
        p_moves = [Signal(A, name=f"p_moves{i}") for i in range(len(moves))]

        m.d.sync += mis_group.eq(group_idx)
        # X's entry, from the head or the tail (as d_all says); the stages after it load their
        # registers whenever they are free and only their valid bits wait on the stage
        # before: the step, late in the cycle, reaches a few registers, not the hundreds a
        # segment's data fills
        m.d.comb += [x_push.eq(step | tail_step),
                     *(x_in.dist[q].eq(d) for q, d in enumerate(dist)),
                     x_in.placed.eq(head.placed & ~d_all.replicate(A)),
                     x_in.raw.eq(databuf.data), x_in.off.eq(databuf.offset),
                     x_in.in_seg.eq(head.in_seg & ~d_all.replicate(A)),
                     x_in.completes.eq(head.completes | d_all),
                     x_in.last.eq(ends_image & (d_all | (head.ends & head.last_group))),
                     x_in.bad.eq(mismatch & ~d_all)]
        with m.If(step):
            left = avail - head.need
            m.d.sync += [grp_bytes.eq(left), grp_big.eq(left[nw:] != 0),
                         d_open.eq(~head.completes)]
            with m.If(head.completes):
                m.d.sync += emitted.eq(emitted + atom_bytes)
            with m.If(head.ends):
                m.d.sync += group_idx.eq(group_idx + 1)
                with m.If(head.last_group):
                    m.d.sync += d_all.eq(1)
        with m.Elif(tail_step):
            m.d.sync += [emitted.eq(emitted + atom_bytes), d_open.eq(0)]

        # P's and Q's enables (each stage is free) and the slots' (Q hands on) each reach
        # about 20 flip-flops per element, spread over the die: from one signal, that net alone
        # would take most of a cycle to spread. So each is worked out a cycle ahead, from
        # the flags' next values, into a register per ``elements_per_copy`` elements (~90
        # flip-flops), which the placer can put beside its group (on the ECP5 board tops;
        # elsewhere they are one register). The flags themselves follow the same next values.
        pq_clear = Signal()                 # the control empties P and Q (set below)
        p_valid_nx = Signal()
        p_bad_nx = Signal()
        q_valid_nx = Signal()
        q_comp_nx = Signal()
        m.d.comb += [p_valid_nx.eq(~pq_clear & Mux(p_free, x_done, p.valid)),
                     p_bad_nx.eq(~pq_clear & Mux(p_free, x.bad, p_bad)),
                     q_valid_nx.eq(~pq_clear & Mux(q_free, p_done, q.valid)),
                     q_comp_nx.eq(Mux(q_free, p.completes, q.completes))]
        m.d.sync += [p.valid.eq(p_valid_nx), p_bad.eq(p_bad_nx), q.valid.eq(q_valid_nx)]
        # the output queue's ready next cycle: a flush empties it
        emit_nx = flush | atomq.ahead.i_ready
        q_free_nx = ~q_valid_nx | ~q_comp_nx | emit_nx
        # X hands on in the next cycle: it will hold a segment and P will be free (empty, or
        # holding a segment that passed the WGS check with Q free to take it)
        p_free_nx = ~p_valid_nx | (q_free_nx & ~p_bad_nx)
        m.d.comb += x_done_nx.eq(~flush & xs.ahead.o_valid & p_free_nx)
        # (the cocotb bench compares ``x_done_r``, x_done_nx a cycle on, with ``x_done``, and
        # ``step`` with ``step_ref``, by name; nothing else reads them, so synthesis drops them)
        x_done_r = Signal()
        m.d.sync += x_done_r.eq(x_done_nx)
        n_copies = max(1, A // t.elements_per_copy)
        p_en = register_copies(platform, m, p_free_nx, n_copies, "p_free_r", 1)
        q_en = register_copies(platform, m, q_free_nx, n_copies, "q_free_r", 1)
        q_done_en = register_copies(platform, m, q_valid_nx & (~q_comp_nx | emit_nx), n_copies,
                                    "q_done_r", 0)

        def hand_on(dst, src, enables, lane_values, moves_dst, moves_src):
            """Stage ``dst`` loads ``src``'s fields (its own lanes from ``lane_values``, its move
            masks from ``moves_src``) whenever it is free: ``enables``, one per group of
            elements (the valid flag is set above)."""
            with m.If(enables[0]):
                m.d.sync += [dst.completes.eq(src.completes), dst.last.eq(src.last)]
            for k in range(A):
                with m.If(enables[k * n_copies // A]):
                    m.d.sync += [dst.placed[k].eq(src.placed[k]), dst.in_seg[k].eq(src.in_seg[k]),
                                 dst.lanes[k].eq(lane_values[k]),
                                 *(d[k].eq(v[k]) for d, v in zip(moves_dst, moves_src,
                                                                strict=True))]

        hand_on(p, x, p_en, [lanes[k] for k in range(A)], p_moves, moves)

        # the new atom values for the segment's positions: the window's first elements, spread
        # over the positions whose bits are set (the data half of the expansion: its control
        # was worked out in the two stages before), the moves by 2^QS and more in P, the
        # shorter ones in Q
        qs = min(len(p_moves), 2)
        half = _expand_lanes(m, p_moves[qs:], [p.lanes[k] for k in range(A)], low=qs)
        q_moves = [Signal(A, name=f"q_moves{i}") for i in range(qs)]
        hand_on(q, p, q_en, half, q_moves, p_moves[:qs])
        spread = _expand_lanes(m, q_moves, [q.lanes[k] for k in range(A)])
        new_slots = Signal(data.ArrayLayout(16, A))
        for i in range(A):
            m.d.comb += new_slots[i].eq(Mux(q.in_seg[i], Mux(q.placed[i], spread[i], 0),
                                            slots[i]))

        m.d.comb += [aq_push.eq(q_done & q.completes),
                     aq_in.slots.eq(new_slots), aq_in.last.eq(q.last)]
        # the slots start each job empty: they clear in CHECK's first cycle, when nothing flows (P
        # and Q are empty from the last FINISH), from copies of a flag set by the start, so that the
        # checks' verdict need not spread to every slot bit. (A safeguard: a completing atom clears
        # them too, and in the benches no stopped job left them holding elements, so no test fails
        # without this clear.)
        slots_clear = register_copies(platform, m, start, n_copies, "slots_clear", 0)
        for k in range(A):
            with m.If(slots_clear[k * n_copies // A]):
                m.d.sync += slots[k].eq(0)
            with m.Elif(q_done_en[k * n_copies // A]):
                m.d.sync += slots[k].eq(Mux(q.completes, 0, new_slots[k]))

        # -- errors, in the order the checks apply -----------------------------------------------
        check_align = Signal()
        check_size = Signal()
        r = regs
        m.d.comb += [
            check_align.eq((r.weight_addr.value.data[:8] != 0) | (r.wmb_addr.value.data[:8] != 0) |
                           (r.wgs_addr.value.data[:8] != 0) |
                           (write_en & (r.dst_addr.value.data[:8] != 0))),
            check_size.eq((r.weight_bytes.value.data[:7] != 0) |
                          (r.wmb_bytes.value.data[:7] != 0) | (r.wmb_bytes.value.data == 0) |
                          (r.wgs_bytes.value.data[:7] != 0) | (r.wgs_bytes.value.data == 0) |
                          (groups == 0) | (kernels == 0) | (kernel_elems == 0) |
                          (two & r.bytes_per_kernel.value.data[0]) |
                          (r.wgs_bytes.value.data < (groups << 2)) |
                          # a surface that runs past the top of the address space
                          ((r.weight_addr.value.data + r.weight_bytes.value.data) >> aw != 0) |
                          ((r.wmb_addr.value.data + r.wmb_bytes.value.data) >> aw != 0) |
                          ((r.wgs_addr.value.data + r.wgs_bytes.value.data) >> aw != 0)),
        ]
        # the checks' adders and compares registered: the verdict is read a cycle into CHECK
        check_wait = Signal()
        align_bad = Signal()
        size_bad = Signal()
        m.d.sync += [align_bad.eq(check_align), size_bad.eq(check_size)]
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
            with m.Elif(mis_r):                      # the head a cycle ago, stepped or not
                m.d.comb += raise_error.eq(Error.WGS_MISMATCH)
            with m.Elif(marker):                     # WGS_OVERFLOW or WMB_SHORT
                m.d.comb += raise_error.eq(head.err)

        # -- counters ----------------------------------------------------------------------------
        cycles = Signal(32)
        stalls = Signal(32)
        m.d.comb += [regs.dense_bytes.value.r_data.eq(emitted),
                     regs.cycles.value.r_data.eq(cycles),
                     regs.stall_cycles.value.r_data.eq(stalls)]
        with m.If(start):
            m.d.sync += [cycles.eq(1), stalls.eq(0)]
        with m.Elif(state != _State.IDLE):
            m.d.sync += cycles.eq(Mux(cycles == 0xFFFF_FFFF, cycles, cycles + 1))
            with m.If(stalled_in & (stalls != 0xFFFF_FFFF)):
                m.d.sync += stalls.eq(stalls + 1)

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
        wgs_beats = ((groups << 2) + (DW - 1)) >> dw_log2
        m.d.sync += reader_load.eq(0)
        m.d.comb += [
            reader.load.eq(reader_load.replicate(3)),
            reader.addr[WGS_STREAM].eq(r.wgs_addr.value.data),
            reader.beats[WGS_STREAM].eq(wgs_beats),
            reader.addr[WMB_STREAM].eq(r.wmb_addr.value.data),
            reader.beats[WMB_STREAM].eq(r.wmb_bytes.value.data >> dw_log2),
            reader.addr[WEIGHT_STREAM].eq(r.weight_addr.value.data),
            reader.beats[WEIGHT_STREAM].eq(weight_bytes >> dw_log2),
        ]
        m.d.comb += [
            reader.stop.eq(reads_stop),
            writer.stop.eq(state != _State.RUN),
            writer.finish.eq(finished & ~out_pending & gearbox.empty),
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
        parts = (wgsbuf, maskbuf, databuf, gearbox, reader, writer)
        for b, copy in zip(parts, register_copies(platform, m, finishing, len(parts), "flush_c"),
                           strict=True):
            m.d.comb += b.flush.eq(copy)

        with m.If(raise_error != 0):
            m.d.sync += [error_code.eq(raise_error),
                         error_group.eq(Mux(raise_error == Error.WGS_MISMATCH, mis_group,
                                            group_idx))]

        # the next state is a signal of its own: the decoder works out its step a cycle ahead
        # from it (above)
        m.d.comb += state_nx.eq(state)
        m.d.sync += state.eq(state_nx)
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start):
                    m.d.comb += state_nx.eq(_State.CHECK)
                    m.d.sync += [error_code.eq(0), error_group.eq(0),
                                 emitted.eq(0), check_wait.eq(1)]
            with m.Case(_State.CHECK):
                with m.If(check_wait):
                    m.d.sync += check_wait.eq(0)
                with m.Elif(check_bad):
                    m.d.comb += state_nx.eq(_State.FINISH)
                with m.Else():
                    m.d.comb += [writer.load.eq(1), writer.addr.eq(r.dst_addr.value.data),
                                 check_pass.eq(1), state_nx.eq(_State.RUN)]
                    m.d.sync += [
                        reader_load.eq(1), s_pos.eq(0), room.eq(A),
                        g_active.eq(0),
                        s_all.eq(0), s_halt.eq(0), groups_set.eq(0), kern_left.eq(kernels),
                        kg_ok.eq(0), next_ok.eq(0), wgs_room.eq(weight_bytes),
                        wmb_left.eq(wmb_bits),
                        wmb_plenty.eq(wmb_bits >= A), r2_valid.eq(0),
                        d_open.eq(0), d_all.eq(0), group_idx.eq(0),
                    ]
                    m.d.comb += pq_clear.eq(1)
            with m.Case(_State.RUN):
                with m.If(raise_error != 0):
                    m.d.comb += state_nx.eq(_State.ABORT)
                with m.Elif(finished & ~out_pending & (~write_en | writer.done)):
                    m.d.comb += state_nx.eq(_State.ABORT)     # drain reads, then finish
            with m.Case(_State.ABORT):
                with m.If(reader.idle & writer.idle):
                    m.d.comb += state_nx.eq(_State.FINISH)
            with m.Case(_State.FINISH):
                m.d.comb += [done_set.eq(1), err_set.eq(error_code != 0),
                             pq_clear.eq(1), state_nx.eq(_State.IDLE)]
                m.d.sync += [sent_stream.eq(0), sent_write.eq(0), r2_valid.eq(0)]
        return m


def _popcount(m, bits):
    """The number of set bits of ``bits``, as a balanced tree of adders."""
    return _add_tree(m, [bits[i] for i in range(len(bits))], "pop")


def _add_tree(m, terms, name):
    """The sum of ``terms``, as a balanced tree of adders (signals ``<name><level>_<k>``)."""
    level = 0
    while len(terms) > 1:
        level += 1
        pairs = []
        for k in range(0, len(terms) - 1, 2):
            t = Signal(max(len(terms[k]), len(terms[k + 1])) + 1, name=f"{name}{level}_{k // 2}")
            m.d.comb += t.eq(terms[k] + terms[k + 1])
            pairs.append(t)
        terms = pairs + terms[len(terms) - len(terms) % 2:]
    return terms[0]


def _expand(m, mask, lanes):
    """Spread ``lanes`` over the set bits of ``mask``: the k-th set bit's position gets
    ``lanes[k]`` (positions whose bit is clear get don't-care values). This is the inverse of
    compressing the set positions down, built as log2(n) stages of two-way multiplexers: the
    control (:func:`_expand_moves`, from the mask alone) and the data (:func:`_expand_lanes`),
    which the decompressor runs in consecutive pipeline stages.

    (Hacker's Delight computes the same masks with prefix XORs; Yosys's ABC took hours on those
    for 64 positions, where multiplexers and carry chains map in seconds.)"""
    return _expand_lanes(m, _expand_moves(m, mask), lanes)


def _expand_moves(m, mask):
    """The expansion's control: for each stage i, which positions take the lane 2^i below them
    (:func:`_expand_dist`, then :func:`_expand_moves_from`)."""
    return _expand_moves_from(m, mask, _expand_dist(m, mask))


def _expand_dist(m, mask):
    """For each position, the number of clear bits below it (its low log2(n) bits): how far
    compressing the set positions down would move the element there."""
    return _expand_dist_from(m, _clear_sums(m, mask, 0), 0)


def _clear_sums(m, mask, levels):
    """The first ``levels`` levels of the prefix sums of ``mask``'s clear bits (each position's
    sum then fits ``levels + 1`` bits), which :func:`_expand_dist_from` finishes: the levels
    can be split over pipeline registers."""
    n = len(mask)
    clear = Signal(n, name="exp_clear")
    m.d.comb += clear.eq(~mask)
    return [v[:levels + 1] for v in _prefix_levels(m, [clear[i] for i in range(n)], 0, levels)]


def _expand_dist_from(m, partial, done):
    """ :func:`_expand_dist` from the prefix sums' first ``done`` levels (:func:`_clear_sums`)."""
    n = len(partial)
    stages = (n - 1).bit_length()
    below = _prefix_levels(m, partial, done, stages)   # below[p]: clear bits at positions <= p
    return [Const(0, stages)] + [below[p - 1][:stages] for p in range(1, n)]


def _expand_moves_from(m, mask, dist):
    """The move masks from the distances of :func:`_expand_dist`.

    Compressing moves each set position's element down by ``d``, the number of clear bits below
    it, in stages: by 1 if bit 0 of ``d`` is set, then by 2 if bit 1 is, and so on; no two
    elements ever meet. This runs that compression on the elements' ``d`` values and notes,
    before each stage i, which positions hold an element about to move (``moves[i]``)."""
    n = len(mask)
    stages = (n - 1).bit_length()
    valid = [mask[p] for p in range(n)]
    moves = []
    for i in range(stages):
        mv = Signal(n, name=f"exp_moves{i}")
        m.d.comb += mv.eq(Cat(valid[q] & dist[q][i] for q in range(n)))
        moves.append(mv)
        if i == stages - 1:
            break
        s = 1 << i
        nvalid = [Signal(name=f"exp_valid{i + 1}_{q}") for q in range(n)]
        ndist = [Signal(stages, name=f"exp_dist{i + 1}_{q}") for q in range(n)]
        for q in range(n):
            stay = valid[q] & ~dist[q][i]
            if q + s < n:
                come = mv[q + s]
                m.d.comb += [nvalid[q].eq(come | stay),
                             ndist[q].eq(Mux(come, dist[q + s], dist[q]))]
            else:
                m.d.comb += [nvalid[q].eq(stay), ndist[q].eq(dist[q])]
        valid, dist = nvalid, ndist
    return moves


def _expand_lanes(m, moves, lanes, low=0):
    """The expansion's data: the compression's stages run backwards, moving up: in stage i,
    position q takes the lane 2^i below it when ``moves[i - low][q]`` is set (``low``: the
    first stage ``moves`` holds, when the stages are split over pipeline registers)."""
    n = len(lanes)
    x = list(lanes)
    for j in reversed(range(len(moves))):
        i = j + low
        s = 1 << i
        y = [Signal(len(x[q]), name=f"exp_lane{i}_{q}") if q >= s else x[q] for q in range(n)]
        for q in range(s, n):
            m.d.comb += y[q].eq(Mux(moves[j][q], x[q - s], x[q]))
        x = y
    return x


def _prefix_levels(m, values, first, stop):
    """Levels ``first`` to ``stop - 1`` of inclusive prefix sums (Kogge-Stone: level k adds the
    sum 2^k positions below) over ``values``, the sums after the first ``first`` levels."""
    n = len(values)
    width = n.bit_length()
    cur = [Signal(width, name=f"ps{first}_{i}") for i in range(n)]
    for i in range(n):
        m.d.comb += cur[i].eq(values[i])
    for level in range(first, stop):
        d = 1 << level
        nxt = [Signal(width, name=f"ps{level + 1}_{i}") for i in range(n)]
        for i in range(n):
            m.d.comb += nxt[i].eq(cur[i] + cur[i - d] if i >= d else cur[i])
        cur = nxt
    return cur
