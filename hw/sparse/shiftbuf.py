"""A shift buffer: words of ``in_units`` units enter at the fill level, and the consumer takes
any number of units from the bottom each cycle. The decompressor uses one for WGS words (a
few units: the shifters are small). It costs a barrel shifter as wide as the buffer on each
side, so its mask bits and packed bytes, where the buffers are wide and whole words enter, go
through a ring instead (:class:`~.ringbuf.RingBuffer`), and where the steps are fixed (atoms
into bus beats) a simpler structure does (:class:`~.gearbox.AtomGearbox`).

Ports
-----
``i`` (a stream of ``unit * in_units`` bits) and ``i_count``: a word of ``in_units`` units, of which
the low ``i_count`` are valid (the buffer masks the rest off). ``i.ready`` is a register, set as the
level changes: whether a word fits (``level + in_units <= capacity``), exact every cycle. So no
combinational path runs from the consumer to the producer, nor from the level's compare into the
producer's handshake.

``data``: the ``capacity`` units held, unit 0 the oldest; units at and above ``level`` are 0.
``level``: units held. ``take``: how many units the consumer would remove (at most ``level``
when ``take_en`` is set); ``take_en``: remove them this cycle. ``flush``: empties the buffer (a
word accepted in the same cycle is dropped too).

Timing
------
The buffer works out both next states, with ``take`` units removed and with none, and
``take_en`` only chooses between them at the end. So a consumer that knows *how much* it would
take from registers (a registered segment length, a queued byte count) and decides *whether* late
in the cycle keeps its decision off the shifters: the decision drives one two-way multiplexer
in front of the buffer's registers, not the shift amounts.
"""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


class ShiftBuffer(wiring.Component):
    def __init__(self, *, unit: int, in_units: int, capacity: int):
        if capacity < in_units:
            raise ValueError(f"capacity {capacity} is below one input word ({in_units} units)")
        self.unit = unit
        self.in_units = in_units
        self.capacity = capacity
        super().__init__({
            "i": In(stream.Signature(unit * in_units)),
            "i_count": In(range(in_units + 1)),
            "data": Out(unit * capacity), "level": Out(range(capacity + 1)),
            "take": In(range(capacity + 1)), "take_en": In(1), "flush": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        u, cap = self.unit, self.capacity
        buf = Signal(u * cap)
        level = Signal(range(cap + 1))
        ready = Signal(init=1)                  # empty at reset: a word fits
        m.d.comb += [self.data.eq(buf), self.level.eq(level), self.i.ready.eq(ready)]

        accept = self.i.valid & self.i.ready
        valid_mask = Signal(u * self.in_units)
        m.d.comb += valid_mask.eq((Const(1, u * self.in_units + 1) << (self.i_count * u)) - 1)
        word = Signal(u * self.in_units)
        m.d.comb += word.eq(self.i.payload & valid_mask)
        count = Mux(accept, self.i_count, 0)
        # whether a word enters is known late too (the producer's valid): it gates the placed
        # word after its shifter, not before
        acc = Signal(u * cap)
        m.d.comb += acc.eq(accept.replicate(u * cap))

        # with ``take`` units removed: the rest shifted down, the word placed above it
        kept = Signal(range(cap + 1))
        m.d.comb += kept.eq(level - self.take)
        taken = Signal(u * cap)
        m.d.comb += taken.eq((buf >> (self.take * u)) | ((word << (kept * u)) & acc))
        # with none removed: the word placed at the level
        held = Signal(u * cap)
        m.d.comb += held.eq(buf | ((word << (level * u)) & acc))

        # the choice as AND-OR, not a multiplexer: Yosys merges the operands of a multiplexer's
        # two inputs when they are the same kind of cell (here the ORs, then the two shifts of
        # the word), which would put ``take_en`` in front of a shifter
        en = Signal(u * cap)
        m.d.comb += en.eq(self.take_en.replicate(u * cap))
        # whether a word fits at the next level, worked out for both choices of ``take_en``
        # (as the level is), so the late decision again only chooses
        fits = cap - self.in_units
        with m.If(self.flush):
            m.d.sync += [buf.eq(0), level.eq(0), ready.eq(1)]
        with m.Else():
            m.d.sync += [buf.eq((taken & en) | (held & ~en)),
                         level.eq(Mux(self.take_en, kept, level) + count),
                         ready.eq(Mux(self.take_en, kept + count <= fits,
                                      level + count <= fits))]
        return m
