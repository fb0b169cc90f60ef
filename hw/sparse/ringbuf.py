"""A ring buffer of whole words in and any number of units out: the decompressor's mask bit and
packed byte buffers.

Words of ``in_units`` units go to the next of ``words`` word slots, in order; the consumer sees
the ``out_units`` oldest units and removes any number of them (up to ``out_units``) each cycle.

Ports
-----
``i`` (a stream of ``unit * in_units`` bits): a whole word. ``i.ready`` is a register, set as the
level changes: whether a word fits (``level + in_units <= capacity``). So no combinational path runs
from the consumer to the producer, and the producer's handshake starts from registers.

``data``: the ``out_units`` oldest units, unit 0 the oldest. Units at and above ``level`` are
whatever the slots held before (not zeros): a consumer masks them off by its own count.

With ``late_bits=k``, the rotation's last ``k`` stages are left to the consumer, to run a cycle
later from its own registers of ``data`` and ``offset`` (loaded as it takes): ``data`` is then
``out_units + 2**k - 1`` units, rotated by the read pointer less its low ``k`` bits, ``offset`` is
those bits, and :meth:`finish` does the rest.

``level``: units held. ``deep``: a register, ``level >= out_units`` (any take the consumer can
make is there), exact every cycle, for a consumer whose own take decision cannot wait on a compare
of ``level``; ``deep_next`` is its value in the next cycle. ``take``: how many units the consumer
would remove (at most ``level`` when ``take_en`` is set); ``take_en``: remove them this cycle.
``enough``: ``level >= take``. ``flush``: empties the buffer (a word accepted in the same cycle is
dropped too).

With ``take_ahead=True`` the consumer gives ``take`` a cycle ahead: ``take_next`` is the value
``take`` (then an output, a register of ``take_next``) will have in the next cycle. ``enough`` is
then a register too, exact every cycle, and ``deep_next`` comes from registers through multiplexers
alone, with no compare of the take.

Timing
------
A shift buffer (:class:`~.shiftbuf.ShiftBuffer`) moves its contents down by the amount taken
and places a new word at the level left, ``level - take``: a subtraction, then a barrel shifter
as wide as the buffer, then the buffer's registers. Here nothing moves. A word is written to one
slot, chosen by a register (the write pointer); a take only adds to the read pointer; and the
read side is a rotation of the slots by the read pointer, a register, down to the ``out_units``
the consumer looks at. The rotation's delay lands on the consumer's path from ``data`` (in the
decompressor, into registers), and ``take_en`` drives only the multiplexers in front of the read
pointer and the level. It costs fewer cells too: one rotation, narrowing stage by stage to
``out_units``, in place of two shifters as wide as the buffer.
"""

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..fabric import register_copies, shared_select

#: the default ``select_bits``: multiplexer bits a copy of a read-pointer bit selects for
SELECT_BITS = 64


class RingBuffer(wiring.Component):
    def __init__(self, *, unit: int, in_units: int, words: int, out_units: int,
                 late_bits: int = 0, take_ahead: bool = False, select_bits: int = SELECT_BITS):
        self._MustUse__silence = True         # until the checks pass: a refused one is not used
        if words < 2:
            raise ValueError(f"words must be at least 2 (one filling while one drains), "
                             f"not {words}")
        if not 1 <= out_units <= in_units * words:
            raise ValueError(f"out_units must be 1 to the capacity ({in_units * words} units), "
                             f"not {out_units}")
        self.unit = unit
        self.in_units = in_units
        self.words = words
        self.out_units = out_units
        self.capacity = in_units * words
        if not 0 <= late_bits < (self.capacity - 1).bit_length():
            raise ValueError(f"late_bits must be 0 to {(self.capacity - 1).bit_length() - 1} "
                             f"(the read pointer's bits less one), not {late_bits}")
        if select_bits < 1:
            raise ValueError(f"select_bits must be at least 1, not {select_bits}")
        self.late_bits = late_bits
        self.take_ahead = take_ahead
        self.select_bits = select_bits
        self._MustUse__silence = False
        ports = {
            "i": In(stream.Signature(unit * in_units)),
            "data": Out(unit * (out_units + (1 << late_bits) - 1)),
            "level": Out(range(self.capacity + 1)), "deep": Out(1), "deep_next": Out(1),
            "enough": Out(1),
            # with take_ahead the take is the ring's register of take_next
            "take": (Out if take_ahead else In)(range(out_units + 1)),
            "take_en": In(1), "flush": In(1),
        }
        if take_ahead:
            ports["take_next"] = In(range(out_units + 1))
        if late_bits:
            ports["offset"] = Out(late_bits)
        super().__init__(ports)

    def finish(self, m, data, offset):
        """The rotation's last ``late_bits`` stages on ``data`` and ``offset`` (the consumer's
        registers of this buffer's ``data`` and ``offset``): the ``out_units`` oldest units."""
        return _rotate(m, data, offset, self.unit, self.out_units, range(self.late_bits),
                       "fin")

    def elaborate(self, platform):
        m = Module()
        u, n, cap = self.unit, self.in_units, self.capacity
        slots = [Signal(u * n, name=f"slot{w}") for w in range(self.words)]
        wr = Signal(range(self.words))          # the slot the next word goes to
        rd = Signal(range(cap))                 # the oldest unit's place in the ring
        level = Signal(range(cap + 1))
        if self.late_bits:
            m.d.comb += self.offset.eq(rd[:self.late_bits])
        room = Signal(init=1)
        m.d.comb += [self.level.eq(level), self.i.ready.eq(room)]
        accept = self.i.valid & self.i.ready
        if self.take_ahead:
            # the take is a register here, loaded from the consumer's next value of it
            take = Cat(*(register_copies(platform, m, self.take_next[b], 1, f"take{b}_c")[0]
                         for b in range(len(self.take_next))))
            m.d.comb += self.take.eq(take)
        else:
            take = self.take
        # ``i.ready``, ``deep`` and ``enough`` are tests of the level: of the next level,
        # ``level`` or ``level - take`` (as the consumer takes) plus ``n`` or not (as a word
        # enters), for the first two, which are registers exact every cycle. Each test is a
        # sign: of the level plus a constant (the test's bound, moved over) or of the level
        # less the take plus that constant. Each such sum has a register of its own, kept in
        # step with the level (``lvl``); the level less the take is worked out from it
        # (``kept``), or with ``take_ahead`` it is a register too, kept in step with both from
        # the take's next value. The handshakes then only choose among signs, with no carry
        # chain between a register and the choice.
        shadows = {}

        def shadow(offset):
            """(``level + offset``, ``level - take + offset``), each a signed value."""
            if offset in shadows:
                return shadows[offset]
            width = len(level) + 2
            tag = f"{offset}".replace("-", "m")
            lvl = Signal(signed(width), init=offset, name=f"level_{tag}")
            kept = Signal(signed(width), name=f"kept_{tag}", init=offset)
            base = Mux(self.take_en, kept, lvl)
            lvl_nx = Signal(signed(width), name=f"level_{tag}_nx")
            m.d.comb += lvl_nx.eq(Mux(self.flush, offset, base + Mux(accept, n, 0)))
            m.d.sync += lvl.eq(lvl_nx)
            if self.take_ahead:
                # the next level less the next take: the take, late (the queue's next head), meets
                # one subtraction from the level's next value, worked out beside it from registers
                m.d.sync += kept.eq(lvl_nx - self.take_next)
            else:
                m.d.comb += kept.eq(lvl - take)
            shadows[offset] = lvl, kept
            return lvl, kept

        def next_test(offset, sign):
            """The next level's test ``level' + offset`` negative (``sign`` 1) or not, a word
            entering or not (as ``accept``), taken or not (as ``take_en``)."""
            tests = []
            for a in range(2):
                lvl, kept = shadow(offset + a * n)
                negative = Mux(self.take_en, kept[-1], lvl[-1])
                tests.append(negative if sign else ~negative)
            return Mux(accept, tests[1], tests[0])

        # a word fits: level' + n <= cap, so level' + n - cap - 1 < 0
        room_next = next_test(n - cap - 1, 1)
        # level' >= out_units
        deep = Signal()
        m.d.comb += [self.deep.eq(deep), self.enough.eq(~shadow(0)[1][-1]),
                     self.deep_next.eq(~self.flush & next_test(-self.out_units, 0))]
        m.d.sync += [room.eq(self.flush | room_next), deep.eq(self.deep_next)]
        m.d.comb += level.eq(shadow(0)[0])

        # a take moves the read pointer round the ring; worked out from registers (``take`` is
        # the consumer's register), ``take_en`` only picks the result
        stepped = Signal(range(2 * cap))
        m.d.comb += stepped.eq(rd + take)
        moved = Signal.like(rd)
        m.d.comb += moved.eq(Mux(stepped >= cap, stepped - cap, stepped))
        rd_next = Signal.like(rd)
        m.d.comb += rd_next.eq(Mux(self.flush, 0, Mux(self.take_en, moved, rd)))
        m.d.sync += rd.eq(rd_next)
        with m.If(self.flush):
            m.d.sync += wr.eq(0)
        with m.Elif(accept):
            m.d.sync += wr.eq(Mux(wr == self.words - 1, 0, wr + 1))

        # the consumer's view: the ring rotated down by ``rd``, one stage per bit of ``rd`` from the
        # highest (the last ``late_bits`` of them left to :meth:`finish`). Each stage's select bit
        # reaches hundreds of multiplexers, so it comes from copies of that bit of ``rd``, one per
        # ``select_bits`` of the stage (on the ECP5 board tops; elsewhere one register), not from
        # one long net from ``rd`` alone
        ring = Cat(*slots)
        cur = Cat(ring, ring, ring)[:u * (self.out_units + (1 << len(rd)) - 1)]  # rd < cap
        selects = {}
        for b in range(self.late_bits, len(rd)):
            width = u * (self.out_units + (1 << b) - 1)
            selects[b] = register_copies(platform, m, rd_next[b],
                                         max(1, -(-width // self.select_bits)), f"rd{b}_c")
        m.d.comb += self.data.eq(_rotate(m, cur, selects, u, self.out_units,
                                         range(self.late_bits, len(rd)), "rot"))
        for w, slot in enumerate(slots):
            with m.If(accept & (wr == w)):
                m.d.sync += slot.eq(self.i.payload)
        return m


def _rotate(m, cur, amount, unit, out_units, bits, name):
    """``cur`` shifted down by ``unit`` times the bits ``bits`` of ``amount``, from the highest:
    each stage as wide as what the stages after it (the bits below) can still reach, and a
    signal of its own (as nested expressions every stage would copy the one before twice, and
    Verilator would compile 2 ** stages copies). ``amount`` is a value, or {bit: copies of
    it}, the copies selecting for ``select_bits`` of the stage each. Returns the last stage."""
    for b in reversed(bits):
        sh = 1 << b
        width = unit * (out_units + sh - 1)
        nxt = Signal(width, name=f"{name}{b}")
        sel = amount[b] if isinstance(amount, dict) else [amount[b]]
        m.d.comb += nxt.eq(shared_select(sel, cur[unit * sh:unit * sh + width], cur[:width]))
        cur = nxt
    return cur
