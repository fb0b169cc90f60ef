"""The decompressor's decoder: counted segments (:func:`~.stages.queued_layout`) and the packed
weight bytes in, each segment stepped with its window of bytes into the expansion
(:func:`~.stages.window_layout`), and after the last group the tail: the last partial atom, then
zero atoms to a multiple of 128 bytes.

The decoder checks each segment against its group's WGS bytes left, and takes its packed bytes
from the bottom of the byte ring (:class:`~.ringbuf.RingBuffer`) once they are there. Its state
(next packed element, the group's bytes left) runs on across atoms and groups, as NVDLA's does.
The WGS check does not hold a step back: a failing segment is stepped like the others and stops
in the expander (``bad``), and the failure is raised a cycle later with its group."""

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.sparse import Error

from ..bus.fifo import LookAheadSignature, SkidBuffer
from ..fabric import look_ahead
from .expand import expand_dist_from
from .ringbuf import RingBuffer
from .stages import queued_layout, window_layout

__all__ = ["Decoder"]


class Decoder(wiring.Component):
    """Parameters
    ----------
    data_width : int
        Bytes per word of the weight stream (the bus's beat).
    atom_elements : int
        Elements per output atom.
    timing : SparseTiming
        The byte ring's ``byte_late_bits`` and ``ring_select_bits``, the queue's ``load_bits``
        and ``select_bits``, and ``sum_levels`` (the prefix sums' levels made before the queue).

    ``byte_ring`` is the ring that holds an atom's worth of packed bytes (2A) and two beats
    more; the expander finishes its rotation on X's registers (:meth:`~.ringbuf.RingBuffer.finish`).

    Ports: ``i`` (counted segments), ``bytes`` (the weight stream's words), ``o`` (X's entry),
    ``o_ahead`` (X's ready in the next cycle), ``two``, ``run`` and ``run_next`` (the job runs
    now, and in the next cycle), ``load`` (begin the job: the cycle before ``run`` first rises),
    ``new_job`` (a job starts: the byte count clears), ``flush``, ``bus_error`` and
    ``bus_error_next`` (the bus answered an error: step no more), ``drained`` (the expansion
    holds nothing); out: ``finished`` (every atom, tail included, has left the expansion),
    ``stalled`` (running, waiting on the queue or the bytes), ``emitted`` (dense bytes
    decoded), ``error`` (the first of a WGS mismatch or a marker's code; 0: none), ``group``
    (the group being decoded) and ``error_group`` (the mismatching segment's group)."""

    def __init__(self, *, data_width, atom_elements, timing):
        DW, A = data_width, atom_elements
        self.atom_elements = A
        self.timing = timing
        self.byte_ring = RingBuffer(unit=8, in_units=DW, words=2 * A // DW + 2, out_units=2 * A,
                                    late_bits=timing.byte_late_bits, take_ahead=True,
                                    select_bits=timing.ring_select_bits)
        super().__init__({
            "i": In(stream.Signature(queued_layout(A, timing.sum_levels))),
            "bytes": In(stream.Signature(8 * DW)),
            "o": Out(stream.Signature(window_layout(A, len(self.byte_ring.data),
                                                    self.byte_ring.late_bits))),
            "o_ahead": In(LookAheadSignature()),
            "two": In(1), "run": In(1), "run_next": In(1), "load": In(1), "new_job": In(1),
            "flush": In(1), "bus_error": In(1), "bus_error_next": In(1), "drained": In(1),
            "finished": Out(1), "stalled": Out(1), "emitted": Out(32), "error": Out(4),
            "group": Out(24), "error_group": Out(24),
        })

    def elaborate(self, platform):
        m = Module()
        A, t = self.atom_elements, self.timing
        run, flush = self.run, self.flush
        databuf = m.submodules.databuf = self.byte_ring
        wiring.connect(m, wiring.flipped(self.bytes), databuf.i)
        m.d.comb += databuf.flush.eq(flush)
        emitted = self.emitted
        atom_bytes = Mux(self.two, 2 * A, A)

        # -- the decoder's queue: counted segments wait for the decoder ---------------------------
        # Its head's take is worked out a cycle ahead (``step``, below), and so the head's load
        # is a register too, one copy per ``load_bits`` of the head on the ECP5 board tops; its
        # select (second entry or input) in copies, as X's: one flag's net would cross ~240 bits
        # on the way through the queue's next ``need`` into the byte ring's kept sums
        segq = m.submodules.segq = SkidBuffer(self.i.payload.shape(), load_bits=t.load_bits,
                                              select_bits=t.select_bits, ready_ahead=True)
        wiring.connect(m, wiring.flipped(self.i), segq.i)
        head, h_valid, h_take = segq.o.payload, segq.o.valid, segq.o.ready
        step_nx = Signal()
        m.d.comb += [segq.clear.eq(flush), segq.ahead.o_ready.eq(step_nx)]
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
        # X, the expander's input (.stages.Expander), takes the stepped segment with the prefix
        # sums of its clear bits finished into distances, and the byte ring's view of its window
        x_in, x_push, xs_rdy = self.o.payload, self.o.valid, self.o.ready
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
        mis_seen_nx = Mux(self.load, 0, mis_r)
        near_bytes_nx = databuf.enough
        near_bytes_ok_nx = h_valid & ~step & ~flush
        have_bytes_nx = databuf.deep_next | (near_bytes_nx & near_bytes_ok_nx)
        xs_rdy_nx = flush | look_ahead(platform, m, "x_ready", self.o_ahead.i_ready, xs_rdy)
        run_next = look_ahead(platform, m, "run", self.run_next, self.run)
        bus_error_next = look_ahead(platform, m, "bus_error", self.bus_error_next,
                                    self.bus_error)
        m.d.comb += step_nx.eq(run_next & h_valid_nx & ~marker_nx &
                               ~(mismatch | mis_seen_nx) & have_bytes_nx & xs_rdy_nx &
                               ~bus_error_next)
        m.d.sync += [step.eq(step_nx), near_bytes.eq(near_bytes_nx),
                     near_bytes_ok.eq(near_bytes_ok_nx), chk_r.eq(mismatch),
                     mis_seen.eq(mis_seen_nx)]
        step_ref = Signal()
        m.d.comb += [step_ref.eq(run & h_valid & ~marker & ~mis_r & have_bytes & xs_rdy &
                                 ~self.bus_error),
                     h_take.eq(step), databuf.take_en.eq(step)]

        # the tail: the last partial atom, then zero atoms to a multiple of 128 bytes
        tail_step = run & d_all & (d_open | (emitted[:7] != 0)) & xs_rdy & ~self.bus_error
        finished = run & d_all & ~d_open & (emitted[:7] == 0) & self.drained
        ends_image = (emitted + atom_bytes)[:7] == 0

        # the expansion's control in two halves: the distances (prefix sums) from the head's
        # placed bits into X's registers, the move masks from X's registers into P's (there)
        dist = expand_dist_from(m, [head.sums[i] for i in range(A)], t.sum_levels)

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

        m.d.comb += [self.finished.eq(finished), self.stalled.eq(stalled_in),
                     self.error.eq(Mux(mis_r, Error.WGS_MISMATCH, Mux(marker, head.err, 0))),
                     self.group.eq(group_idx), self.error_group.eq(mis_group)]
        with m.If(self.new_job):
            m.d.sync += emitted.eq(0)
        # a job begins with no atom open, at its first group
        with m.If(self.load):
            m.d.sync += [d_open.eq(0), d_all.eq(0), group_idx.eq(0)]
        return m
