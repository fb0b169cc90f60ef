"""The decompressor's gearbox: whole atoms in, bus beats out, in order.

An atom is ``atom_bytes`` bytes (a job constant: ``atom_elements`` or twice that), and the bus
beat ``beat_bytes``. Atoms land in *slots*, registers as wide as the largest atom, filled in
turn. The slot at the read pointer goes out from its low end:

- an atom of one or more beats (``atom_bytes >= beat_bytes``) goes out a beat per cycle, the
  beat chosen by a count of the beats sent, and frees its slot with its last beat;
- an atom of half a beat (32 one-byte elements on a 512-bit bus, the only such case) goes out
  with the next one: a beat is two slots' low halves, and both slots free together.

Two slots (four for half-beat atoms) let an atom in every cycle while the beats keep pace.
``i_ready`` depends only on the slot under the write pointer, never on ``o_ready``, so no
combinational path runs from the bus back into the decoder. A slot's bits load the input
whenever the slot is empty and hold while it is full, so their enables wait on no handshake:
they are registers, worked out a cycle ahead, one copy per few elements
(:func:`hw.fabric.register_copies`). The beat out is chosen from the slots by the read pointer
and the count of beats sent, both registers.

Ports
-----
``two``: the job's elements are two bytes (``atom_bytes = 2 * atom_elements``); hold it steady
while the gearbox holds data. ``i_valid``/``i_ready``/``i_data``: an atom (the low
``atom_bytes`` bytes of ``i_data``). ``o_valid``/``o_ready``/``o_data``: a beat.
``empty``: no atom held. ``flush``: drops everything held.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..fabric import register_copies

__all__ = ["AtomGearbox"]

#: elements per copy of a slot's load enable (the decompressor's stage enables use it too)
ELEMENTS_PER_COPY = 4


class AtomGearbox(wiring.Component):
    def __init__(self, *, atom_elements: int, beat_bytes: int):
        sizes = (atom_elements, 2 * atom_elements)
        for size in sizes:
            if size % beat_bytes and beat_bytes != 2 * size:
                raise ValueError(f"an atom of {size} bytes is neither a whole number of "
                                 f"{beat_bytes}-byte beats nor half a beat")
        self.atom_elements = atom_elements
        self.beat_bytes = beat_bytes
        self.half = 2 * atom_elements == beat_bytes
        self.slots = 4 if self.half else 2
        super().__init__({
            "two": In(1),
            "i_valid": In(1), "i_ready": Out(1), "i_data": In(16 * atom_elements),
            "o_valid": Out(1), "o_ready": In(1), "o_data": Out(8 * beat_bytes),
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

        atom_bytes = Mux(self.two, 2 * A, A)
        whole = (atom_bytes >= DB) if self.half else Const(1)    # the atom is a beat or more
        last = sent == Mux(self.two, 2 * A // DB - 1, max(A // DB, 1) - 1)
        nxt = Signal(range(n))
        m.d.comb += nxt.eq(rd + 1)

        m.d.comb += [self.i_ready.eq(~full.bit_select(wr, 1)), self.empty.eq(full == 0)]
        if self.half:
            pair = [Cat(slots[k][:4 * DB], slots[(k + 1) % n][:4 * DB]) for k in range(n)]
            both = Signal()
            m.d.comb += both.eq(full.bit_select(rd, 1) & full.bit_select(nxt, 1))
            m.d.comb += self.o_valid.eq(Mux(whole, full.bit_select(rd, 1), both))
        else:
            m.d.comb += self.o_valid.eq(full.bit_select(rd, 1))
        # the beat ``sent`` of the read slot (a slot's bits above its atom are never chosen)
        beats = max(2 * A // DB, 1)
        chosen = Array(Array(s[8 * DB * j:8 * DB * (j + 1)] for j in range(beats))
                       for s in slots)[rd][sent]
        if self.half:
            m.d.comb += self.o_data.eq(Mux(whole, chosen, Array(pair)[rd]))
        else:
            m.d.comb += self.o_data.eq(chosen)

        take = self.o_valid & self.o_ready
        load = self.i_valid & self.i_ready
        frees = Signal(n)                    # slots freed by this cycle's beat
        with m.If(take):
            with m.If(~whole):
                m.d.comb += frees.eq((Const(1, n) << rd) | (Const(1, n) << nxt))
                m.d.sync += rd.eq(rd + 2)
            with m.Elif(last):
                m.d.comb += frees.eq(Const(1, n) << rd)
                m.d.sync += [rd.eq(nxt), sent.eq(0)]
            with m.Else():
                m.d.sync += sent.eq(sent + 1)
        fills = Signal(n)
        with m.If(load):
            m.d.comb += fills.eq(Const(1, n) << wr)
            m.d.sync += wr.eq(wr + 1)
        full_nx = Signal(n)
        m.d.comb += full_nx.eq(Mux(self.flush, 0, (full & ~frees) | fills))
        m.d.sync += full.eq(full_nx)
        # An empty slot takes the input every cycle; the handshake that fills it only sets its
        # `full` flag, and from then on it holds. So a slot's enable is its flag (on the full
        # ULX3S SoC the input's valid, crossing the die from the decompressor's control into a
        # slot's ~1,000 enables, was the critical path), in copies made from the flag's next
        # value, each for ELEMENTS_PER_COPY elements' bits
        copies = max(1, A // ELEMENTS_PER_COPY)
        for k, s in enumerate(slots):
            empty = register_copies(platform, m, ~full_nx[k], copies, f"slot{k}_empty", 1)
            for g in range(copies):
                lo, hi = g * len(s) // copies, (g + 1) * len(s) // copies
                with m.If(empty[g]):
                    m.d.sync += s[lo:hi].eq(self.i_data[lo:hi])
        with m.If(self.flush):
            m.d.sync += [wr.eq(0), rd.eq(0), sent.eq(0)]
        return m

