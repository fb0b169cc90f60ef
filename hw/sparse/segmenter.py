"""The decompressor's segmenter: NVDLA's WGS words and mask bits in, the job's segments out,
counted (:class:`~.stages.SegmentCounter`) and ready for the decoder's queue.

A *segment* is the run of mask bits from the current position in the output atom to the end
of the atom or of the kernel group, whichever comes first. The segmenter decides each from the
mask side alone: the next segment's length and whether it ends the group or completes the atom
are registers, worked out as the segment before is taken, so a decision is a few comparisons of
registers (mask bits held, WMB bits left). It also starts each group: its WGS word, kernel count
and size, the size multiplied out ahead. Errors it finds (a WGS total past the weight surface, a
WMB too short) go down the stream as markers behind the segments before them, so the decoder
raises every error in the order the segments come."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.sparse import Error

from ..bus.fifo import SkidBuffer
from .ringbuf import RingBuffer
from .shiftbuf import ShiftBuffer
from .stages import SegmentCounter, queued_layout, segment_layout

__all__ = ["Segmenter", "job_layout"]


def job_layout():
    """A job's counts as the segmenter reads them, latched at its start."""
    return data.StructLayout({"weight_bytes": 32, "wmb_bits": 35, "groups": 24, "kernels": 24,
                              "kernel_elems": 24, "two": 1})


class Segmenter(wiring.Component):
    """Parameters
    ----------
    data_width : int
        Bytes per word of the WGS and WMB streams (the bus's beat).
    atom_elements : int
        Elements per output atom.
    timing : SparseTiming
        The mask ring's ``mask_late_bits`` and ``ring_select_bits``, and the counter's stages.

    WGS words land in a shift buffer (:class:`~.shiftbuf.ShiftBuffer`), the WMB's bits in a
    ring (:class:`~.ringbuf.RingBuffer`) that holds an atom's worth and two beats more.

    Ports: ``wgs`` and ``mask`` (the WGS and WMB streams' words), ``o``
    (:func:`~.stages.queued_layout`), ``job`` (:func:`job_layout`), ``run`` (the job runs:
    decide), ``load`` (begin the job's groups: the cycle before ``run`` first rises),
    ``new_job`` (a job starts), ``flush`` (empties the buffers and stages)."""

    def __init__(self, *, data_width, atom_elements, timing):
        DW, A = data_width, atom_elements
        self.atom_elements = A
        self.timing = timing
        self._wgsbuf = ShiftBuffer(unit=32, in_units=DW // 4, capacity=2 * (DW // 4))
        self._maskbuf = RingBuffer(unit=1, in_units=8 * DW, words=-(-(A + 16 * DW) // (8 * DW)),
                                   out_units=A, late_bits=timing.mask_late_bits,
                                   select_bits=timing.ring_select_bits)
        super().__init__({
            "wgs": In(stream.Signature(8 * DW)),
            "mask": In(stream.Signature(8 * DW)),
            "o": Out(stream.Signature(queued_layout(A, timing.sum_levels))),
            "job": In(job_layout()),
            "run": In(1),
            "load": In(1),
            "new_job": In(1),
            "flush": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        A, t = self.atom_elements, self.timing
        job, run, flush, start = self.job, self.run, self.flush, self.new_job
        kernels, two = job.kernels, job.two
        wgsbuf = m.submodules.wgsbuf = self._wgsbuf
        maskbuf = m.submodules.maskbuf = self._maskbuf
        wiring.connect(m, wiring.flipped(self.wgs), wgsbuf.i)
        wiring.connect(m, wiring.flipped(self.mask), maskbuf.i)
        m.d.comb += [wgsbuf.i_count.eq(wgsbuf.in_units), wgsbuf.flush.eq(flush),
                     maskbuf.flush.eq(flush)]

        # R1: the decided segment (or marker), in a register slice on its way to the counter.
        # Its ready is a register (the slice's second entry is free), so the decision does not
        # wait on the stages after it moving on, and its data registers load whenever the output
        # entry is free: the take reaches the slice's two valid bits, not the segment's
        # hundred-odd data bits. With ``timing.counter_ready_ahead`` the counter tells its ready
        # a cycle ahead, so the output entry's load is a register too: that ready comes from the
        # counter's R3, across the die, and as a LUT it reached every one of the entry's enables.
        segs = m.submodules.segs = SkidBuffer(segment_layout(A, len(maskbuf.data),
                                                             maskbuf.late_bits),
                                              ready_ahead=t.counter_ready_ahead)
        counter = m.submodules.counter = SegmentCounter(atom_elements=A, mask_ring=maskbuf,
                                                        timing=t)
        wiring.connect(m, segs.o, counter.i)
        if t.counter_ready_ahead:
            m.d.comb += segs.ahead.o_ready.eq(counter.ahead.i_ready)
        wiring.connect(m, counter.o, wiring.flipped(self.o))
        r1_in, r1_push, r1_rdy = segs.i.payload, segs.i.valid, segs.i.ready
        m.d.comb += [segs.clear.eq(flush), counter.two.eq(two),
                     counter.clear.eq(flush | self.load)]

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

        kg_ok, kl_next, last_next = self._next_group(m, kern_left, groups_set, next_elems,
                                                     next_ok)
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

        # a job begins from its first group, at the first position of an atom
        with m.If(self.load):
            m.d.sync += [
                s_pos.eq(0), room.eq(A), g_active.eq(0), s_all.eq(0), s_halt.eq(0),
                groups_set.eq(0), kern_left.eq(kernels), kg_ok.eq(0), next_ok.eq(0),
                wgs_room.eq(job.weight_bytes), wmb_left.eq(job.wmb_bits),
                wmb_plenty.eq(job.wmb_bits >= A),
            ]
        return m

    def _next_group(self, m, kern_left, groups_set, next_elems, next_ok):
        """The next group's size (into ``next_elems``, valid with ``next_ok``), worked out
        ahead from the kernels left in the set (``kern_left``) and the groups set up so far.
        Returns (``kg_ok``, which a group's start and the job's load clear, the kernels left
        after the next group, whether it is the job's last)."""
        job = self.job
        groups, kernels, kernel_elems, two = job.groups, job.kernels, job.kernel_elems, job.two
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
        return kg_ok, kl_next, last_next
