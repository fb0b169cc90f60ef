"""The decompressor's stages after the segmenter's decision, as components on typed streams:

- :class:`SegmentCounter`: a decided segment (:func:`segment_layout`) in, the same segment out
  with its bits placed in the atom, its packed bytes counted and the prefix sums' first levels
  made (:func:`queued_layout`), over two registered stages;
- :class:`Expander`: a stepped segment with the byte window it uses (:func:`window_layout`) in,
  finished atoms (:func:`slots_layout`) out: the window's elements spread over the segment's
  positions over three stages (X, P, Q), merged into the atom being built, and queued;
- :class:`AtomEmitter`: finished atoms in, each delivered to the atom stream and/or the writer's
  gearbox as the job enables them, one-byte elements packed down.

Their clocking follows :class:`~.decompressor.SparseTiming`; the module docstring of
:mod:`.decompressor` tells how the stages fit together and why each cut is where it is."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.fifo import LookAheadSignature, SkidBuffer
from ..fabric import look_ahead, register_copies, shared_select
from .expand import add_tree, clear_sums, expand_lanes, expand_moves_from, popcount, prefix_levels

__all__ = ["AtomEmitter", "Expander", "SegmentCounter", "atom_layout", "queued_layout",
           "segment_layout", "slots_layout", "window_layout"]


def atom_layout(atom_elements):
    """The atom stream's payload: the atom's bytes in memory order and the image's end."""
    return data.StructLayout({"data": 16 * atom_elements, "last": 1})


def slots_layout(atom_elements):
    """A finished atom as the expansion leaves it: 16-bit slots (one-byte elements in their
    low bytes) and the image's end."""
    return data.StructLayout({"slots": data.ArrayLayout(16, atom_elements), "last": 1})


def segment_layout(atom_elements, raw_bits, off_bits):
    """A decided segment, or an error marker (``err`` not zero): the mask ring's view
    (``raw``, rotated but for its ``off`` low pointer bits), the segment's first position and
    end in the atom, its bits (``keep``), whether it ends its group and completes its atom,
    whether it is its group's first, the group's WGS word and whether the group is the last."""
    A = atom_elements
    return data.StructLayout({
        "err": 4, "raw": raw_bits, "off": off_bits, "pos": range(A), "end": range(A + 1),
        "keep": A, "ends": 1, "completes": 1, "first": 1, "wgs": 32, "last_group": 1})


def _counted_fields(atom_elements):
    A = atom_elements
    return {"err": 4, "placed": A, "in_seg": A, "need": range(2 * A + 1), "ends": 1,
            "completes": 1, "first": 1, "wgs": 32, "wgs_big": 1, "last_group": 1}


def queued_layout(atom_elements, sum_levels):
    """A counted segment, as the decoder's queue holds it: its bits at their atom positions
    (``placed``), the positions it covers (``in_seg``), the packed bytes it uses (``need``),
    the flags and WGS word it came with (``wgs_big``: the word exceeds any ``need``), and the
    first ``sum_levels`` levels of the prefix sums of its clear bits."""
    return data.StructLayout({**_counted_fields(atom_elements),
                              "sums": data.ArrayLayout(sum_levels + 1, atom_elements)})


def window_layout(atom_elements, raw_bits, off_bits):
    """A stepped segment entering the expansion: its positions, whether it completes its atom
    and ends the image, whether it failed the WGS check (``bad``), the byte ring's view of its
    window (``raw``, rotated but for ``off``) and each position's distance (the clear bits
    below it)."""
    A = atom_elements
    return data.StructLayout({
        "placed": A, "in_seg": A, "completes": 1, "last": 1, "bad": 1, "raw": raw_bits,
        "off": off_bits, "dist": data.ArrayLayout((A - 1).bit_length(), A)})


class SegmentCounter(wiring.Component):
    """Counts a decided segment, over two stages.

    R2, from the input's registers: the segment's mask bits (the mask ring's rotation
    finished, :meth:`~.ringbuf.RingBuffer.finish`, and cut to the segment) placed at their
    atom positions, the positions it covers, and its popcount in parts of eight bits. R3, a
    :class:`~..bus.fifo.SkidBuffer`: the parts summed into the packed bytes it uses (doubled
    for two-byte elements), and the prefix sums' first ``timing.early(A)`` levels. The output
    adds the levels up to ``timing.sum_levels``. A whole popcount in one cycle, into the queue
    behind, is too long a path; and R3's ready is a register, so the enables of R2 and of the
    stage in front stop at it.

    R2 takes a segment when it is empty or R3 takes its own (``r2_free``). With
    ``timing.counter_ready_ahead`` that test is a register, worked out a cycle ahead from R3's
    look-ahead, and so is the input's ready, which is the same test; ``ahead.i_ready`` tells
    it a cycle early, so the stage in front can make the load of its output entry a register
    too (:class:`~..bus.fifo.SkidBuffer` ``ready_ahead``). Without it the test is a LUT on
    R3's ready, and from there a net reaches R2's hundreds of clock enables and the ones of
    the entry in front.

    Ports: ``i`` (:func:`segment_layout`), ``ahead`` (``i_ready``: the input's ready in the
    next cycle), ``o`` (:func:`queued_layout`), ``two`` (two-byte elements), ``clear``
    (empties both stages)."""

    def __init__(self, *, atom_elements, mask_ring, timing):
        self.atom_elements = atom_elements
        self.timing = timing
        self._ring = mask_ring
        super().__init__({
            "i": In(stream.Signature(segment_layout(atom_elements, len(mask_ring.data),
                                                    mask_ring.late_bits))),
            "ahead": Out(LookAheadSignature()),
            "o": Out(stream.Signature(queued_layout(atom_elements, timing.sum_levels))),
            "two": In(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        A, t = self.atom_elements, self.timing
        r1, r1_valid = self.i.payload, self.i.valid
        mask = Signal(A)
        m.d.comb += mask.eq(self._ring.finish(m, r1.raw, r1.off) & r1.keep)
        parts = [mask[i:i + 8] for i in range(0, A, 8)]
        r2 = Signal(data.StructLayout({
            "err": 4, "placed": A, "in_seg": A, "parts": data.ArrayLayout(4, len(parts)),
            "ends": 1, "completes": 1, "first": 1, "wgs": 32, "last_group": 1}))
        r2_valid = Signal()
        r2_free = Signal(init=1)
        with m.If(r2_free):
            m.d.sync += [
                r2_valid.eq(r1_valid), r2.err.eq(r1.err), r2.placed.eq(mask << r1.pos),
                *(r2.parts[j].eq(popcount(m, part)) for j, part in enumerate(parts)),
                r2.ends.eq(r1.ends), r2.completes.eq(r1.completes), r2.first.eq(r1.first),
                r2.wgs.eq(r1.wgs), r2.last_group.eq(r1.last_group)]
            for k in range(A):
                at_or_after = (r1.pos <= k) if k < A - 1 else Const(1)   # pos <= A - 1 always
                m.d.sync += r2.in_seg[k].eq(at_or_after & (k < r1.end))
        with m.If(self.clear):
            m.d.sync += r2_valid.eq(0)

        early = t.early(A)
        r3_layout = data.StructLayout({
            **_counted_fields(A),
            # the prefix sums' first levels, which go no further than the output
            **({"sums": data.ArrayLayout(early + 1, A)} if early else {})})
        r3 = m.submodules.r3 = SkidBuffer(r3_layout)
        nz = add_tree(m, [r2.parts[j] for j in range(len(parts))], "nz")
        r3_in = r3.i.payload
        m.d.comb += [
            r3.clear.eq(self.clear), r3.i.valid.eq(r2_valid),
            r3_in.err.eq(r2.err), r3_in.placed.eq(r2.placed), r3_in.in_seg.eq(r2.in_seg),
            r3_in.need.eq(Mux(self.two, nz << 1, nz)), r3_in.ends.eq(r2.ends),
            r3_in.completes.eq(r2.completes), r3_in.first.eq(r2.first), r3_in.wgs.eq(r2.wgs),
            r3_in.wgs_big.eq(r2.wgs[len(r3_in.need):] != 0),
            r3_in.last_group.eq(r2.last_group),
            *((r3_in.sums[i].eq(v) for i, v in enumerate(clear_sums(m, r2.placed, early)))
              if early else ()),
            # R2 takes whatever the input holds when free, so the input's ready is that test
            # alone (with no valid, the ready is read by nobody)
            self.i.ready.eq(r2_free),
        ]
        # the test a cycle ahead: R2 will be empty, or R3 will have room (a clear empties both)
        r2_valid_next = ~self.clear & Mux(r2_free, r1_valid, r2_valid)
        r2_free_next = ~r2_valid_next | r3.ahead.i_ready
        m.d.comb += self.ahead.i_ready.eq(r2_free_next)
        reference = ~r2_valid | r3.i.ready
        if t.counter_ready_ahead:
            m.d.sync += r2_free.eq(look_ahead(platform, m, "r2_free", r2_free_next, reference))
        else:
            m.d.comb += r2_free.eq(reference)

        # the output: R3's fields, and the prefix sums' levels after R3's own
        o = self.o
        r3_out = r3.o.payload
        sum_levels = t.sum_levels
        sums = (prefix_levels(m, [r3_out.sums[i] for i in range(A)], early, sum_levels)
                if early else clear_sums(m, r3_out.placed, sum_levels))
        m.d.comb += [
            o.valid.eq(r3.o.valid), r3.o.ready.eq(o.ready),
            *(o.payload[name].eq(r3_out[name]) for name in _counted_fields(A)),
            *(o.payload.sums[i].eq(v[:sum_levels + 1]) for i, v in enumerate(sums)),
        ]
        return m


class Expander(wiring.Component):
    """Spreads each stepped segment's packed elements over its positions, merges them into
    the atom being built, and queues each finished atom.

    The expansion runs over three stages. X (a :class:`~..bus.fifo.SkidBuffer`, the input)
    holds the segment with each position's distance and the byte ring's window, rotated but
    for its last ``late_bits`` stages, which run on X's registers. X works out the move masks
    (:func:`~.expand.expand_moves_from`) into P; P runs the widest moves and Q the rest with
    the merge into the atom's slots, so that the moves and the merge are not one cycle's path.
    Each stage hands on when the next is free and takes a new segment in the same cycle. A
    segment that failed the WGS check (``bad``) stops in P: X hands it on as any other, so the
    check's compare reaches X's data and not X's load. Finished atoms wait in a register slice
    whose ready depends on its fill level alone, so the stages never wait on the consumer's
    ready in the same cycle.

    X, P and Q are hundreds of bits wide, and their loads would each be one net across the
    die: each stage's enable is worked out a cycle ahead, from the next values of the stages'
    flags, into a register per ``timing.elements_per_copy`` elements
    (:func:`~..fabric.register_copies`), which the placer can put beside its share. X's load is
    such a register too, on a global network where the platform has one. (The cocotb bench
    checks that ``x_done_r``, the look-ahead registered, equals ``x_done``, by name.)

    Ports: ``i`` (:func:`window_layout`), with ``ahead.i_ready`` its ready in the next cycle;
    ``o`` (:func:`slots_layout`); ``two`` (two-byte elements); ``clear`` (empties the stages and
    the queue); ``new_job`` (empties the atom's slots a cycle later); ``busy`` (a stage holds a
    segment); ``pending`` (an atom waits in the queue)."""

    def __init__(self, *, atom_elements, byte_ring, timing):
        self.atom_elements = atom_elements
        self.timing = timing
        self._ring = byte_ring
        A = atom_elements
        super().__init__({
            "i": In(stream.Signature(window_layout(A, len(byte_ring.data), byte_ring.late_bits))),
            "ahead": Out(LookAheadSignature()),
            "o": Out(stream.Signature(slots_layout(A))),
            "two": In(1),
            "clear": In(1),
            "new_job": In(1),
            "busy": Out(1),
            "pending": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        A, t = self.atom_elements, self.timing
        n_copies = max(1, A // t.elements_per_copy)
        clear = self.clear

        xs = m.submodules.xs = SkidBuffer(self.i.payload.shape(), select_bits=t.select_bits,
                                          global_load="sparse_x_load", ready_ahead=True)
        atomq = m.submodules.atomq = SkidBuffer(slots_layout(A), load_bits=t.load_bits)
        wiring.connect(m, wiring.flipped(self.i), xs.i)
        wiring.connect(m, atomq.o, wiring.flipped(self.o))
        m.d.comb += [xs.clear.eq(clear), atomq.clear.eq(clear),
                     self.ahead.i_ready.eq(xs.ahead.i_ready),
                     self.pending.eq(atomq.level != 0)]

        common = {"valid": 1, "placed": A, "in_seg": A, "completes": 1, "last": 1}
        lanes_layout = data.StructLayout({**common, "lanes": data.ArrayLayout(16, A)})
        x, x_valid = xs.o.payload, xs.o.valid
        p = Signal(lanes_layout)
        q = Signal(lanes_layout)
        q_done = Signal()
        m.d.comb += q_done.eq(q.valid & (~q.completes | atomq.i.ready))
        q_free = ~q.valid | q_done
        p_done = Signal()
        p_bad = Signal()
        m.d.comb += p_done.eq(p.valid & q_free & ~p_bad)
        p_free = ~p.valid | p_done
        x_done = Signal()
        m.d.comb += [x_done.eq(x_valid & p_free), xs.o.ready.eq(x_done),
                     self.busy.eq(x_valid | p.valid | q.valid)]

        # the segment's elements, the window's first, from X's registers
        window = self._ring.finish(m, x.raw, x.off)
        lanes = Signal(data.ArrayLayout(16, A))
        for k in range(A):
            m.d.comb += lanes[k].eq(Mux(self.two, window[16 * k:16 * k + 16],
                                        window[8 * k:8 * k + 8]))
        moves = expand_moves_from(m, x.placed, [x.dist[k] for k in range(A)])
        p_moves = [Signal(A, name=f"p_moves{i}") for i in range(len(moves))]

        # the stages' enables, a cycle ahead, from the flags' next values; the flags follow the
        # same next values
        p_valid_nx = Signal()
        p_bad_nx = Signal()
        q_valid_nx = Signal()
        q_comp_nx = Signal()
        m.d.comb += [p_valid_nx.eq(~clear & Mux(p_free, x_done, p.valid)),
                     p_bad_nx.eq(~clear & Mux(p_free, x.bad, p_bad)),
                     q_valid_nx.eq(~clear & Mux(q_free, p_done, q.valid)),
                     q_comp_nx.eq(Mux(q_free, p.completes, q.completes))]
        m.d.sync += [p.valid.eq(p_valid_nx), p_bad.eq(p_bad_nx), q.valid.eq(q_valid_nx)]
        emit_nx = clear | atomq.ahead.i_ready        # the queue's ready next cycle
        q_free_nx = ~q_valid_nx | ~q_comp_nx | emit_nx
        # X hands on in the next cycle: it will hold a segment and P will be free (empty, or
        # holding a segment that passed the WGS check with Q free to take it)
        p_free_nx = ~p_valid_nx | (q_free_nx & ~p_bad_nx)
        x_done_nx = Signal()
        m.d.comb += [x_done_nx.eq(~clear & xs.ahead.o_valid & p_free_nx),
                     xs.ahead.o_ready.eq(x_done_nx)]
        x_done_r = Signal()                  # for the bench only: synthesis drops it
        m.d.sync += x_done_r.eq(x_done_nx)
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
        # the moves by 2^qs and more in P, the shorter ones in Q
        qs = min(len(p_moves), 2)
        half = expand_lanes(m, p_moves[qs:], [p.lanes[k] for k in range(A)], low=qs)
        q_moves = [Signal(A, name=f"q_moves{i}") for i in range(qs)]
        hand_on(q, p, q_en, half, q_moves, p_moves[:qs])
        spread = expand_lanes(m, q_moves, [q.lanes[k] for k in range(A)])

        # the atom being built: the segment's positions take the spread elements (a clear bit
        # gives zero), the others keep their slots
        slots = Signal(data.ArrayLayout(16, A))
        new_slots = Signal(data.ArrayLayout(16, A))
        for k in range(A):
            m.d.comb += new_slots[k].eq(Mux(q.in_seg[k], Mux(q.placed[k], spread[k], 0),
                                            slots[k]))
        m.d.comb += [atomq.i.valid.eq(q_done & q.completes),
                     atomq.i.payload.slots.eq(new_slots), atomq.i.payload.last.eq(q.last)]
        # the slots start each job empty: they clear the cycle after ``new_job``, when nothing
        # flows, from copies of a register, so that whatever decides a job's start need not
        # spread to every slot bit. (A safeguard: a completing atom clears them too, and no job
        # stopped in the benches left them holding elements.)
        slots_clear = register_copies(platform, m, self.new_job, n_copies, "slots_clear", 0)
        for k in range(A):
            with m.If(slots_clear[k * n_copies // A]):
                m.d.sync += slots[k].eq(0)
            with m.Elif(q_done_en[k * n_copies // A]):
                m.d.sync += slots[k].eq(Mux(q.completes, 0, new_slots[k]))
        return m


class AtomEmitter(wiring.Component):
    """Delivers each finished atom to the atom stream ``o_atoms`` and/or the writer's side
    ``o_write`` (as ``stream_en`` and ``write_en`` say), and takes the next once both that are
    owed have it. One-byte elements are packed down to the atom's low half here, a multiplexer
    off the expansion's path; its choice comes from copies of ``two``, one per
    ``elements_per_copy`` elements: from ``two`` alone it was one net to 16 x A multiplexers
    across the die. (A copy follows ``two`` a cycle late, long before a job's first atom.)

    Ports: ``i`` (:func:`slots_layout`), ``o_atoms`` (:func:`atom_layout`), ``o_write`` (the
    atom's bytes), ``two``, ``stream_en``, ``write_en``, ``clear`` (forgets a partial
    delivery)."""

    def __init__(self, *, atom_elements, elements_per_copy):
        self.atom_elements = atom_elements
        self.elements_per_copy = elements_per_copy
        super().__init__({
            "i": In(stream.Signature(slots_layout(atom_elements))),
            "o_atoms": Out(stream.Signature(atom_layout(atom_elements))),
            "o_write": Out(stream.Signature(16 * atom_elements)),
            "two": In(1),
            "stream_en": In(1),
            "write_en": In(1),
            "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        A = self.atom_elements
        out, out_valid = self.i.payload, self.i.valid
        two_c = register_copies(platform, m, self.two, max(1, A // self.elements_per_copy),
                                "two_c")
        packed = Cat(*(out.slots[k][:8] for k in range(A)), Const(0, 8 * A))
        out_atom = Signal(16 * A)
        m.d.comb += out_atom.eq(shared_select(two_c, out.slots.as_value(), packed))

        sent_stream = Signal()
        sent_write = Signal()
        owe_stream = self.stream_en & ~sent_stream
        owe_write = self.write_en & ~sent_write
        o, w = self.o_atoms, self.o_write
        m.d.comb += [o.valid.eq(out_valid & owe_stream), o.payload.data.eq(out_atom),
                     o.payload.last.eq(out.last),
                     w.valid.eq(out_valid & owe_write), w.payload.eq(out_atom)]
        to_stream = o.valid & o.ready
        to_write = w.valid & w.ready
        pop = Signal()
        m.d.comb += [pop.eq(out_valid & (~owe_stream | to_stream) & (~owe_write | to_write)),
                     self.i.ready.eq(pop)]
        with m.If(pop | self.clear):
            m.d.sync += [sent_stream.eq(0), sent_write.eq(0)]
        with m.Else():
            with m.If(to_stream):
                m.d.sync += sent_stream.eq(1)
            with m.If(to_write):
                m.d.sync += sent_write.eq(1)
        return m
