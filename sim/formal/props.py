"""Building blocks for the proofs' harnesses: past values, free constants, stream rules and an
ideal queue to hold a design's output against.

A harness is an ``Elaboratable`` whose free inputs are its ports: the solver may drive a port to
any value in any cycle. Amaranth 0.5 has no ``Past``, so a past value is a register of its own
(:func:`past`). Every register here has its reset, so the free ``rst`` port resets the checker's
book-keeping together with the design: a property must hold across resets too.

The ideal-queue check (:class:`Scoreboard`) follows one element picked by the solver: the
``k``-th unit to enter, for a ``k`` it holds constant. The property says that the ``k``-th unit
to leave equals it, for every ``k`` the solver can pick within the bound; so no unit is lost,
duplicated, altered or moved out of order. Units leave in groups of a variable count (a ring
buffer's take, a gearbox's beat), so the check works on units, not on transfers.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.hdl import Assert, Assume, Cover

from atomcube.hw.bus.axi import Burst

__all__ = ["past", "free_constant", "held_until_ready", "Scoreboard", "stall_bound", "cover",
           "AxiManagerChecks"]


def past(m: Module, value, name: str, *, init: int = 0) -> Signal:
    """``value`` as it was a cycle ago (``init`` in the first cycle and after a reset)."""
    value = Value.cast(value)
    r = Signal(len(value), name=name, init=init)
    m.d.sync += r.eq(value)
    return r


def free_constant(m: Module, port: Signal, name: str) -> Signal:
    """``port`` (a free input) assumed to hold one value for the whole trace: the solver picks
    it, once. Unaffected by resets."""
    held = Signal.like(port, name=f"{name}_held", reset_less=True)
    started = Signal(name=f"{name}_started", reset_less=True)
    m.d.sync += [held.eq(port), started.eq(1)]
    m.d.comb += Assume(~started | (port == held))
    return port


def held_until_ready(m: Module, name: str, valid, ready, payload, *, check=Assert, reset=None):
    """The stream rule on one channel: once ``valid`` is up and the transfer has not happened,
    ``valid`` stays up and ``payload`` stays the same in the next cycle. ``check=Assume`` makes
    it a rule on the harness's free inputs instead of a property of the design. ``reset`` (a
    signal): the rule does not carry across a cycle in which it was set, which empties the
    channel."""
    payload = Value.cast(payload)
    waiting = Signal(name=f"{name}_waiting")
    last = Signal(len(payload), name=f"{name}_last", reset_less=True)
    carry = valid & ~ready
    if reset is not None:
        carry = carry & ~reset
    m.d.sync += [waiting.eq(carry), last.eq(payload)]
    m.d.comb += check(~waiting | (valid & (payload == last)),
                      f"{name}: valid held, payload stable until ready", src_loc_at=1)


class Scoreboard:
    """An ideal queue of units, in count only, against which a design's output is held.

    ``m``: the harness module. ``unit``: bits a unit. ``chosen``: a free constant, the index of
    the unit followed (:func:`free_constant`). ``count_bits``: width of the unit counters (the
    bound: a trace of N cycles moves fewer than 2**count_bits units). ``clear``: a signal that
    empties the queue (a flush), or None.

    :meth:`enter` records ``n`` units entering (``data``, unit 0 first) when ``en``;
    :meth:`leave` checks ``n`` units leaving. Call each once.
    """

    def __init__(self, m: Module, name: str, *, unit: int, chosen, count_bits: int,
                 clear=None):
        self.m = m
        self.name = name
        self.unit = unit
        self.chosen = chosen
        self.clear = clear
        self.entered = Signal(count_bits, name=f"{name}_entered")
        self.left = Signal(count_bits, name=f"{name}_left")
        self.seen = Signal(name=f"{name}_seen")
        self.value = Signal(unit, name=f"{name}_value")
        # the counters must not wrap within the bound: a trace that would is cut by assumption
        top = (1 << count_bits) - 1
        m.d.comb += Assume(self.entered < top - 64)

    def _unit_at(self, data, index, count):
        data = Value.cast(data)
        return data.word_select(index, self.unit) if count > 1 else data

    def enter(self, en, data, n: int | Value, max_n: int):
        """``n`` units (at most ``max_n``) of ``data`` enter when ``en``."""
        m, k = self.m, self.chosen
        offset = (k - self.entered)[:len(self.entered)]
        hit = en & (k >= self.entered) & (offset < n)
        with m.If(hit):
            m.d.sync += [self.seen.eq(1),
                         self.value.eq(self._unit_at(data, offset[:max(max_n - 1, 1).bit_length()],
                                                     max_n))]
        with m.If(en):
            m.d.sync += self.entered.eq(self.entered + n)
        self._clear()

    def leave(self, en, data, n: int | Value, max_n: int):
        """``n`` units (at most ``max_n``) of ``data`` leave when ``en``: nothing can leave that
        did not enter, and the chosen unit leaves as it entered."""
        m, k = self.m, self.chosen
        offset = (k - self.left)[:len(self.left)]
        hit = en & (k >= self.left) & (offset < n)
        got = self._unit_at(data, offset[:max(max_n - 1, 1).bit_length()], max_n)
        m.d.comb += [
            Assert(~en | (self.left + n <= self.entered),
                   f"{self.name}: nothing leaves that did not enter", src_loc_at=1),
            Assert(~hit | (self.seen & (got == self.value)),
                   f"{self.name}: the chosen unit leaves as it entered", src_loc_at=1),
        ]
        with m.If(en):
            m.d.sync += self.left.eq(self.left + n)
        self._clear()

    def _clear(self):
        if self.clear is not None:
            with self.m.If(self.clear):
                self.m.d.sync += [self.entered.eq(0), self.left.eq(0), self.seen.eq(0)]

    @property
    def held(self) -> Value:
        """Units entered and not yet left."""
        return (self.entered - self.left)[:len(self.entered)]


def stall_bound(m: Module, name: str, waiting, limit: int):
    """Assert that ``waiting`` is never true for more than ``limit`` cycles in a row (a bounded
    form of "eventually": the design answers within ``limit`` cycles)."""
    run = Signal(range(limit + 2), name=f"{name}_run")
    m.d.sync += run.eq(Mux(waiting, Mux(run > limit, run, run + 1), 0))
    m.d.comb += Assert(run <= limit, f"{name}: answered within {limit} cycles", src_loc_at=1)


def cover(m: Module, condition, name: str):
    """A cover: the solver must show a trace in which ``condition`` holds."""
    m.d.comb += Cover(condition, name, src_loc_at=1)



class AxiManagerChecks:
    """The rules an AXI4 manager (``axi``: its port, an ``AXI4Signature`` interface) keeps, as
    assertions, and the rules of a legal subordinate answering it, as assumptions.

    Asserted, on AR and AW: valid held and the request unchanged until ready; INCR bursts of
    full-width beats (``size`` the bus's), on a beat boundary, at most ``max_burst`` beats (or
    ``max_burst[id]`` for each ID, a dict), never across a 4 KiB boundary. On W: valid held and
    the beat unchanged until ready; the beats of the ``chosen``-th burst number its AW's length
    and only its last has WLAST; a burst's W beats never run ahead of its AW's valid. On R: at
    most ``read_room`` beats of ``read_ids`` requested and not yet returned (what the manager
    has room to take).

    Assumed of the subordinate: an R beat only of an ID in ``ids`` with beats outstanding (RLAST is
    left free: the managers checked count beats and ignore it); a B response only for a burst
    whose address and last W beat were taken; R and B held until taken.
    """

    def __init__(self, m: Module, axi, *, max_burst: int, chosen, read_room=None,
                 read_ids=(0,), ids=(0,), count_bits: int = 8):
        self.m = m
        size = (len(axi.wdata) // 8 - 1).bit_length()
        top = (1 << count_bits) - 2
        for prefix in ("ar", "aw"):
            valid, ready = getattr(axi, f"{prefix}valid"), getattr(axi, f"{prefix}ready")
            addr, length = getattr(axi, f"{prefix}addr"), getattr(axi, f"{prefix}len")
            burst = getattr(axi, f"{prefix}burst")
            held_until_ready(m, prefix, valid, ready,
                             Cat(addr, length, getattr(axi, f"{prefix}size"), burst,
                                 getattr(axi, f"{prefix}id")))
            end = addr[:12] + ((length + 1) << size)
            if isinstance(max_burst, dict):
                ident = getattr(axi, f"{prefix}id")
                short = Cat(*((ident == i) & (length < n) for i, n in max_burst.items())).any()
            else:
                short = length < max_burst
            m.d.comb += Assert(
                ~valid | ((burst == Burst.INCR) &
                          (getattr(axi, f"{prefix}size") == size) &
                          (addr[:size] == 0 if size else 1) &
                          short & (end <= 4096)),
                f"{prefix}: INCR, full beats, aligned, at most max_burst beats, within 4 KiB")
        held_until_ready(m, "w", axi.wvalid, axi.wready, Cat(axi.wdata, axi.wstrb, axi.wlast))

        def count(name, en, step=1):
            c = Signal(count_bits, name=name)
            with m.If(en):
                m.d.sync += c.eq(c + step)
            m.d.comb += Assume(c < top - 16)
            return c

        aw_hs = axi.awvalid & axi.awready
        w_hs = axi.wvalid & axi.wready
        aw_n = count("aw_taken", aw_hs)
        w_bursts = count("w_bursts", w_hs & axi.wlast)
        b_n = count("b_taken", axi.bvalid & axi.bready)
        # W: the chosen burst's beats against its AW's length, recorded while its AW is offered
        chosen_len = Signal(8, name="w_chosen_len")
        chosen_seen = Signal(name="w_chosen_seen")
        with m.If(axi.awvalid & (aw_n == chosen)):
            m.d.sync += [chosen_len.eq(axi.awlen), chosen_seen.eq(1)]
        beats = Signal(9, name="w_beats")             # beats of the current W burst so far
        with m.If(w_hs):
            m.d.sync += beats.eq(Mux(axi.wlast, 0, beats + 1))
        offered = aw_n + axi.awvalid
        # (the chosen AW may be offered in the cycle its first W beat goes)
        now = axi.awvalid & (aw_n == chosen)
        known = chosen_seen | now
        length = Mux(chosen_seen, chosen_len, axi.awlen)
        m.d.comb += [
            Assert(~axi.wvalid | (w_bursts < offered),
                   "w: no beat before its burst's address is offered"),
            Assert(~(w_hs & (w_bursts == chosen)) | (known & (axi.wlast == (beats == length))),
                   "w: a burst's beats number its AW's length, WLAST on the last"),
        ]
        # B: only for a burst whose address and last beat were taken
        m.d.comb += Assume(~axi.bvalid | ((b_n < aw_n) & (b_n < w_bursts)))
        held_until_ready(m, "b", axi.bvalid, axi.bready, Cat(axi.bresp, axi.bid), check=Assume)
        # R: beats outstanding per ID, from the AR lengths; the subordinate answers only those
        ar_hs = axi.arvalid & axi.arready
        r_hs = axi.rvalid & axi.rready
        held_until_ready(m, "r", axi.rvalid, axi.rready,
                         Cat(axi.rdata, axi.rresp, axi.rid, axi.rlast), check=Assume)
        owed = {}
        for i in ids:
            o = Signal(count_bits, name=f"r_owed{i}")
            this_ar = ar_hs & (axi.arid == i)
            this_r = r_hs & (axi.rid == i)
            m.d.sync += o.eq(o + Mux(this_ar, axi.arlen + 1, 0) - this_r)
            owed[i] = o
            m.d.comb += Assume(~(axi.rvalid & (axi.rid == i)) | (o != 0))
        m.d.comb += Assume(~axi.rvalid | Cat(*(axi.rid == i for i in ids)).any())
        if read_room is not None:
            total = sum(owed[i] for i in read_ids)
            m.d.comb += Assert(total <= read_room,
                               f"r: at most {read_room} beats requested and not taken",
                               src_loc_at=1)
        self.aw_taken, self.b_taken, self.w_bursts = aw_n, b_n, w_bursts
        self.owed = owed
