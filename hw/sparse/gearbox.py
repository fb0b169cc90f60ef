"""The decompressor's gearbox: whole atoms in, bus beats out, in order.

An atom is ``atom_bytes`` bytes (a job constant: ``atom_elements`` or twice that), and the bus
beat ``beat_bytes``. Atoms land in *slots*, registers as wide as the largest atom, filled in
turn. The slot at the read pointer goes out from its low end:

- an atom of one or more beats (``atom_bytes >= beat_bytes``) goes out a beat per cycle: the
  slot moves down by a beat as each one leaves, so the next is always at its low end, and a
  count of the beats sent frees the slot with its last;
- an atom of half a beat (32 one-byte elements on a 512-bit bus, the only such case) goes out
  with the next one: a beat is two slots' low halves, and both slots free together.

Two slots (four for half-beat atoms) let an atom in every cycle while the beats keep pace.
``i.ready`` depends only on the slot under the write pointer, never on ``o.ready``, so no
combinational path runs from the bus back into the decoder. A slot's bits load the input whenever
the slot is empty, move down a beat as one leaves it and hold otherwise, so their enables wait on no
handshake: they are registers, worked out a cycle ahead, one copy per few elements
(:func:`hw.fabric.register_copies`). The beats leave through a register slice of the gearbox's own
(:class:`~hw.bus.fifo.SkidBuffer`), whose ``ahead.i_ready`` tells a cycle ahead whether a beat
leaves; so the beat into the slice is a choice of the slots' low ends by the read pointer, not a
choice among all of a slot's beats by a count.

Ports
-----
``two``: the job's elements are two bytes (``atom_bytes = 2 * atom_elements``); hold it steady
while the gearbox holds data. ``i`` (a stream of ``16 * atom_elements`` bits): an atom, the
low ``atom_bytes`` bytes of its payload. ``o`` (a stream of ``8 * beat_bytes`` bits): a beat,
straight from the output slice's registers. ``empty``: nothing held, in a slot or in the
slice. ``flush``: drops everything held.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.fifo import register_slice
from ..fabric import register_copies

__all__ = ["AtomGearbox"]

#: the default ``elements_per_copy``: elements per copy of a slot's load enable
ELEMENTS_PER_COPY = 4


class AtomGearbox(wiring.Component):
    def __init__(self, *, atom_elements: int, beat_bytes: int,
                 elements_per_copy: int = ELEMENTS_PER_COPY):
        sizes = (atom_elements, 2 * atom_elements)
        for size in sizes:
            if size % beat_bytes and beat_bytes != 2 * size:
                raise ValueError(f"an atom of {size} bytes is neither a whole number of "
                                 f"{beat_bytes}-byte beats nor half a beat")
        if elements_per_copy < 1:
            raise ValueError(f"elements_per_copy must be at least 1, not {elements_per_copy}")
        self.atom_elements = atom_elements
        self.beat_bytes = beat_bytes
        self.elements_per_copy = elements_per_copy
        self.half = 2 * atom_elements == beat_bytes
        self.slots = 4 if self.half else 2
        super().__init__({
            "two": In(1),
            "i": In(stream.Signature(16 * atom_elements)),
            "o": Out(stream.Signature(8 * beat_bytes)),
            "empty": Out(1), "flush": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        A, DB, n = self.atom_elements, self.beat_bytes, self.slots
        slots = [Signal(16 * A, name=f"slot{k}") for k in range(n)]
        full = Signal(n)
        wr = Signal(range(n))
        rd = Signal(range(n))
        sent = Signal(range(max(2 * A // DB, 1)))       # beats of the read slot already out

        # the output slice (emptied by a flush): the beat goes in when the slice has room
        valid = Signal()                     # the beat at the read pointer is held
        beat = Signal(8 * DB)
        room = Signal()
        out = register_slice(m, "out", valid=valid, ready=room, payload=beat,
                             out_valid=self.o.valid, out_ready=self.o.ready,
                             out_payload=self.o.payload, reset=self.flush)

        atom_bytes = Mux(self.two, 2 * A, A)
        whole = (atom_bytes >= DB) if self.half else Const(1)    # the atom is a beat or more
        last = sent == Mux(self.two, 2 * A // DB - 1, max(A // DB, 1) - 1)

        def beat_valid(flags, at):
            """Whether the beat at read pointer ``at`` is held, by ``flags``."""
            if not self.half:
                return flags.bit_select(at, 1)
            both = flags.bit_select(at, 1) & flags.bit_select((at + 1)[:len(at)], 1)
            return Mux(whole, flags.bit_select(at, 1), both)

        m.d.comb += [valid.eq(beat_valid(full, rd)),
                     self.i.ready.eq(~full.bit_select(wr, 1)),
                     self.empty.eq((full == 0) & ~out.o.valid)]
        # the beat: the read slot's low end (a slot's bits above its atom are never sent)
        low = Array(s[:8 * DB] for s in slots)[rd]
        if self.half:
            pair = Array(Cat(slots[k][:4 * DB], slots[(k + 1) % n][:4 * DB]) for k in range(n))
            m.d.comb += beat.eq(Mux(whole, low, pair[rd]))
        else:
            m.d.comb += beat.eq(low)

        take = valid & room
        load = self.i.valid & self.i.ready
        nxt = Signal(range(n))
        m.d.comb += nxt.eq(rd + 1)
        rd_nx = Signal(range(n))
        sent_nx = Signal.like(sent)
        frees = Signal(n)                    # slots freed by this cycle's beat
        m.d.comb += [rd_nx.eq(rd), sent_nx.eq(sent)]
        with m.If(take):
            with m.If(~whole):
                m.d.comb += [frees.eq((Const(1, n) << rd) | (Const(1, n) << nxt)),
                             rd_nx.eq(rd + 2)]
            with m.Elif(last):
                m.d.comb += [frees.eq(Const(1, n) << rd), rd_nx.eq(nxt), sent_nx.eq(0)]
            with m.Else():
                m.d.comb += sent_nx.eq(sent + 1)
        fills = Signal(n)
        with m.If(load):
            m.d.comb += fills.eq(Const(1, n) << wr)
            m.d.sync += wr.eq(wr + 1)
        full_nx = Signal(n)
        m.d.comb += full_nx.eq(Mux(self.flush, 0, (full & ~frees) | fills))
        m.d.sync += full.eq(full_nx)
        with m.If(self.flush):
            m.d.comb += [rd_nx.eq(0), sent_nx.eq(0)]
            m.d.sync += wr.eq(0)
        m.d.sync += [rd.eq(rd_nx), sent.eq(sent_nx)]
        # whether a beat leaves in the next cycle: the slice's room then (a flush aside, but a
        # flush empties every slot, and no beat is then valid) and the beat's flags then
        take_nx = Signal()
        m.d.comb += take_nx.eq(beat_valid(full_nx, rd_nx) & out.ahead.i_ready)
        # An empty slot takes the input every cycle; the handshake that fills it only sets its
        # `full` flag, and from then on it holds but for a move down a beat as one leaves. So a
        # slot's enable is its flag or the take from it, and its choice of input the flag: copies
        # made from their next values, each for ``elements_per_copy`` elements' bits
        copies = max(1, A // self.elements_per_copy)
        for k, s in enumerate(slots):
            empty = register_copies(platform, m, ~full_nx[k], copies, f"slot{k}_empty", 1)
            moves = register_copies(platform, m, ~full_nx[k] | (take_nx & (rd_nx == k)),
                                    copies, f"slot{k}_en", 1)
            down = s >> (8 * DB)
            for g in range(copies):
                lo, hi = g * len(s) // copies, (g + 1) * len(s) // copies
                with m.If(moves[g]):
                    m.d.sync += s[lo:hi].eq(Mux(empty[g], self.i.payload[lo:hi], down[lo:hi]))
        return m
