"""Registers, register slices and queues whose outputs are registers.

A block RAM's read data reaches the fabric late: on the ECP5 a DP16KD without its output register
takes more than half of a 100 MHz cycle from the clock to its data. So a queue kept in block RAM
should feed registers only. :class:`RegisteredQueue` is ``SyncFIFOBuffered`` with a register slice
on its output: the same ports, a cycle more latency, still a transfer a cycle. Both keep their
entries in :class:`BufferedFIFO`, which is ``SyncFIFOBuffered`` with a note to Yosys that its reads
never meet a write of their address.
"""

from types import SimpleNamespace

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.hdl import DomainRenamer, ResetInserter
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..fabric import global_buffer, look_ahead, register_copies, shared_select, shares

__all__ = ["registered", "register_slice", "block_ram_output", "BufferedFIFO", "LookAheadSignature",
           "RegisteredQueue", "SkidBuffer"]


def registered(m, value, name, shape=None):
    """A register named ``name`` that takes ``value`` every cycle (for values held still while
    a job runs, worked out a cycle ahead). Its shape is ``shape``, else ``value``'s own.

    It has no reset: it holds its input's value a cycle later whatever happened, so a reset (the
    DMA's ``dp_reset`` between descriptors, a net that reaches most of the engine) need not reach
    it. With a reset, Yosys folds the reset and any choice of a constant in ``value`` into the
    flip-flops' LSR, and the reset's long wire then ran through that choice's logic."""
    if shape is None:
        r = Signal.like(value, name=name, reset_less=True)
    else:
        r = Signal(shape, name=name, reset_less=True)
    m.d.sync += r.eq(value)
    return r


def chosen_sum(m, name, choose, chosen, otherwise):
    """``Mux(choose, chosen, otherwise)`` with both values kept as wires of their own (named
    ``name_1`` and ``name_0``): for two sums worked out from registers, so a late decision only
    picks one and Yosys cannot move it in front of a shared adder."""
    a = Signal.like(chosen, name=f"{name}_1", attrs={"keep": 1})
    b = Signal.like(otherwise, name=f"{name}_0", attrs={"keep": 1})
    m.d.comb += [a.eq(chosen), b.eq(otherwise)]
    return Mux(choose, a, b)


def registered_room(m, name, *fifos, held=0):
    """A register that says whether each of ``fifos`` (with ``level`` and ``depth``) had two
    free entries a cycle ago: room for a write decided now, even if the write decided in the
    cycle before lands first (a FIFO takes at most one entry a cycle). A writer that waits on
    it does not wait on the levels' compares; each FIFO then fills to ``depth - 1`` at most.
    ``held``: entries on their way into each FIFO (a write register in front of it), counted
    as already in."""
    room = Signal(name=name)
    m.d.sync += room.eq(room_next(*fifos, held=held))
    return room


def room_next(*fifos, held=0):
    """The value :func:`registered_room` takes at the next clock edge."""
    return Cat(*(f.level + held < f.depth - 2 for f in fifos)).all()


class CountedLevel:
    """``fifo.level`` (a FIFO with the ports of ``SyncFIFOBuffered``) as a register of its own,
    stepped by the FIFO's handshakes, with its ``depth`` and handshakes: for the tests above
    (:func:`registered_room`, :func:`holds_entries`) where ``level`` is a sum of the FIFO's
    parts, so that no adder lies in front of their compares."""

    def __init__(self, m, name, fifo):
        self.depth = fifo.depth
        self.level = Signal.like(fifo.level, name=name)
        self.w_en, self.w_rdy, self.r_en, self.r_rdy = fifo.w_en, fifo.w_rdy, fifo.r_en, fifo.r_rdy
        m.d.sync += self.level.eq(self.level + (fifo.w_en & fifo.w_rdy)
                                  - (fifo.r_en & fifo.r_rdy))


def holds_entries(m, name, fifo):
    """A register that says whether ``fifo`` (with the ports of ``SyncFIFOBuffered``) holds an
    entry, exact in every cycle: worked out from its level and this cycle's handshakes. For
    busy and idle flags, where ``level != 0`` would put the level's adder in front of them.

    The handshakes come late in a cycle, so they meet the level's tests (made in parallel) in
    the last gate: an entry is held after a write, or with two or more now, or with one now
    and no read (a read needs an entry, so a write and a read leave at least one)."""
    held = Signal(name=name)
    wrote = fifo.w_en & fifo.w_rdy
    read = fifo.r_en & fifo.r_rdy
    m.d.sync += held.eq(wrote | (fifo.level >= 2) | ((fifo.level != 0) & ~read))
    return held


def register_slice(m, name, *, valid, ready, payload, out_valid, out_ready, out_payload,
                   reset=None, domain=None, bypass=False, global_load=None, select_bits=None,
                   load_bits=None, ready_next=None):
    """A register slice from one valid/ready channel (``valid``, ``ready``, ``payload``) to
    another (``out_*``): a :class:`SkidBuffer`, whose output and whose ready are registers. It
    cuts every combinational path between the two sides and still passes a transfer per
    cycle, one cycle later. ``reset`` (a signal) empties it; ``domain`` names the clock domain
    it runs in (``sync`` by default). Returns the buffer, whose ``level`` tells whether it is
    empty and whose ``ahead`` what its ports carry in the next cycle.

    ``payload``'s shape is the stream's: a :class:`~amaranth.lib.data.View` keeps its layout
    (the buffer's ``ahead.o_payload`` is then a view of it too).

    ``bypass=True`` connects the two sides with wires instead and returns None: for builds
    where the slice's flip-flops cost more than the clock rate it buys (a small iCE40).
    ``global_load``, ``select_bits`` and ``load_bits`` are the :class:`SkidBuffer`'s, and
    ``ready_next`` (``out_ready``'s value in the next cycle) drives its ``ahead.o_ready``,
    which makes the output entry's load a register."""
    if bypass:
        m.d.comb += [out_valid.eq(valid), out_payload.eq(payload), ready.eq(out_ready)]
        return None
    shape = payload.shape() if isinstance(payload, data.View) else len(Value.cast(payload))
    buf = SkidBuffer(shape, global_load=global_load, select_bits=select_bits,
                     load_bits=load_bits, ready_ahead=ready_next is not None)
    if reset is not None:
        m.d.comb += buf.clear.eq(reset)
    if ready_next is not None:
        m.d.comb += buf.ahead.o_ready.eq(ready_next)
    m.submodules[f"{name}_slice"] = buf if domain is None else DomainRenamer(domain)(buf)
    m.d.comb += [buf.i.valid.eq(valid), buf.i.payload.eq(payload), ready.eq(buf.i.ready),
                 out_valid.eq(buf.o.valid), out_payload.eq(buf.o.payload),
                 buf.o.ready.eq(out_ready)]
    return buf


def stream_slice(m, name, source, sink, *, domain=None, bypass=False, **options):
    """A register slice (:class:`SkidBuffer`, submodule ``<name>_slice``) between two streams,
    joined with ``wiring.connect``: ``source`` is a producer's stream port, ``sink`` a
    consumer's. ``domain``, ``bypass`` and ``options`` (``global_load``, ``select_bits``,
    ``load_bits``) are as for :func:`register_slice`. Returns the buffer (None with
    ``bypass``)."""
    if bypass:
        wiring.connect(m, source, sink)
        return None
    buf = SkidBuffer(source.signature.members["payload"].shape, **options)
    m.submodules[f"{name}_slice"] = buf if domain is None else DomainRenamer(domain)(buf)
    wiring.connect(m, source, buf.i)
    wiring.connect(m, buf.o, sink)
    return buf


class LookAheadSignature(wiring.Signature):
    """What a queue's stream ports will carry in the next cycle, for a neighbour that works
    out its own decisions a cycle ahead (and keeps them in registers beside the logic they
    drive, :func:`hw.fabric.register_copies`). From the queue's side:

    * ``i_ready``: the input's ``ready`` in the next cycle;
    * ``o_valid``, ``o_payload`` (with ``shape``): the output's ``valid`` and ``payload``;
    * ``o_ready`` (an input, with ``ready=True``): the output's ``ready`` in the next cycle,
      as the consumer tells it.

    A queue's ``clear`` aside: after a clear the queue is empty whatever these said."""

    def __init__(self, shape=None, *, ready=False):
        members = {"i_ready": Out(1)}
        if shape is not None:
            members.update(o_valid=Out(1), o_payload=Out(shape))
        if ready:
            members["o_ready"] = In(1)
        super().__init__(members)


class SkidBuffer(wiring.Component):
    """Two entries between two streams of ``shape``: the output entry, and a second that
    catches the transfer taken in a cycle the output was not read. ``o.payload``, ``o.valid``
    and ``i.ready`` (the second entry is empty) are registers, so neither side's handshake
    passes through the other's logic; a write and a read a cycle pass one entry a cycle
    through. ``level`` counts the entries held, ``clear`` empties the buffer (a synchronous
    reset of its flags), and ``ahead`` (:class:`LookAheadSignature`) says what the ports will
    carry in the next cycle.

    The output entry loads when it is free (``~o.valid | o.ready``): the reader's handshake,
    late in a cycle, reaches every one of its flip-flops. With ``global_load`` (a name) that
    load enable goes through :func:`hw.fabric.global_buffer`, so on a platform with global
    networks (the ECP5 board tops) it reaches a wide entry with no general routing; elsewhere
    nothing changes. The valid flags keep the enable from general routing: they are few.

    The output entry loads from the second entry or from the input, as the second entry's
    valid flag says: on a wide buffer that one flag selects hundreds of bits. ``select_bits``
    gives each share of that many bits its own copy of the flag (:func:`hw.fabric.register_copies`,
    which the placer can put beside its share).

    The output entry's load is made from a register of its own that holds ``~o.valid``, not
    from the flags' ``free``: the load's LUT goes where the entry's data are, and flags made
    from it went there and back. ``load_bits`` gives each share of that many bits its own copy
    of that register, and so its own load LUT (``copy | o.ready``) beside its share: the late
    ``o.ready`` then crosses the die once, into the shares' LUTs, and not once into one LUT
    and again from it to every share (on a platform without copies they are one register and
    one LUT, as without ``load_bits``). Not with ``global_load``.

    Where the reader works out its handshake a cycle ahead, ``ready_ahead=True`` adds
    ``ahead.o_ready``, which it drives with what ``o.ready`` will be in the next cycle: the
    load itself is then a register, ``~o.valid | o.ready`` worked out a cycle early, and no
    LUT stands between it and the entry's clock enables. With ``load_bits`` each share has
    its own copy of that register; with ``global_load`` the register feeds the global
    network.

    The copies (of the select, of the load) are one flip-flop each on the ECP5 board tops,
    outside the reach of a reset inserted around the buffer: ``clear`` clears them too, so
    empty a buffer with ``clear``, not with an inserted reset."""

    def __init__(self, shape, *, global_load=None, select_bits=None, load_bits=None,
                 ready_ahead=False):
        for name, bits in (("select_bits", select_bits), ("load_bits", load_bits)):
            if bits is not None and bits < 1:
                self._MustUse__silence = True     # never elaborated: no warning about it
                raise ValueError(f"{name} must be at least 1, not {bits!r}")
        if global_load is not None and load_bits is not None:
            self._MustUse__silence = True
            raise ValueError("load_bits and global_load are two ways to spread the load: "
                             "choose one")
        self.global_load = global_load
        self.select_bits = select_bits
        self.load_bits = load_bits
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "level": Out(range(3)),
            "clear": In(1),
            "ahead": Out(LookAheadSignature(shape, ready=ready_ahead)),
        })
        self.width = len(Value.cast(self.i.payload))

    def elaborate(self, platform):
        m = Module()
        i, o, ahead, clear = self.i, self.o, self.ahead, self.clear
        w_data = Value.cast(i.payload)
        skid_v = Signal()
        # the two entries' data have no reset: only the valid flags say what they hold, so a
        # reset need not reach the data's flip-flops (docs/board.md: the reset nets' fan-out)
        skid_d = Signal(self.width, reset_less=True)
        out_d = Signal(self.width, reset_less=True)
        take = i.valid & ~skid_v
        free = ~o.valid | o.ready                 # the output entry is free this cycle
        # the second entry holds a word next cycle if the output entry is not free now (so
        # nothing moves up) and it holds one now or takes one
        skid_nx = ~free & (skid_v | take)
        r_rdy_nx = Mux(free, skid_v | take, 1)
        m.d.comb += [i.ready.eq(~skid_v), self.level.eq(o.valid + skid_v),
                     o.payload.eq(out_d), ahead.i_ready.eq(~skid_nx),
                     ahead.o_valid.eq(r_rdy_nx)]
        m.d.sync += [o.valid.eq(r_rdy_nx), skid_v.eq(skid_nx)]
        # the output entry's load is the same condition, made from a register of its own that
        # holds ``~o.valid`` (Yosys merges no flip-flop with its complement): a wide entry pulls
        # its load's LUT among its data, and the flags made from that LUT went there and back.
        # Copies (of the load, or of ``~o.valid``) are cleared by ``clear`` with the flags (the
        # entry is empty after it)
        n_loads = 1 if self.load_bits is None else -(-self.width // self.load_bits)
        empty_nx = ~r_rdy_nx | clear
        if "o_ready" in ahead.signature.members:
            # the loads as registers: the entry is empty or read in the next cycle
            o_ready_next = look_ahead(platform, m, "o_ready", ahead.o_ready, o.ready)
            loads = register_copies(platform, m, empty_nx | o_ready_next, n_loads, "load_c", 1)
        elif self.load_bits is None:
            empty = Signal(init=1, name="out_empty")
            m.d.sync += empty.eq(~r_rdy_nx)
            loads = [empty | o.ready]
        else:
            # copies, each with its share's load LUT
            loads = [e | o.ready
                     for e in register_copies(platform, m, empty_nx, n_loads, "out_empty", 1)]
        # the output entry's data: from the second entry if it holds one, else from the input
        if self.select_bits is None:
            sel = [skid_v]
        else:
            n = -(-self.width // self.select_bits)
            sel = register_copies(platform, m, skid_nx & ~clear, n, "skid_sel")
        if self.global_load is not None:
            load = Signal(name="load")
            m.d.comb += load.eq(loads[0])
            loads = [global_buffer(platform, m, load, self.global_load)]
        loaded = shared_select(sel, skid_d, w_data)
        # each share keeps its value unless its load says otherwise (Yosys makes the choice
        # its flip-flops' clock enable)
        m.d.comb += Value.cast(ahead.o_payload).eq(shared_select(loads, loaded, out_d))
        m.d.sync += out_d.eq(Value.cast(ahead.o_payload))
        # the second entry follows the input while it is empty, so its enable is a register and not
        # the writer's valid (it counts only once skid_v is set, in the same cycle). With
        # ``select_bits`` each share's enable is the share's copy of skid_v (the copies of the
        # select): one net from skid_v alone to every enable of a wide entry would cross the die
        for copy, part in shares(self.width, sel):
            with m.If(~copy):
                m.d.sync += skid_d[part].eq(w_data[part])
        # ``clear`` empties the buffer: its flags (and every register above that has a reset)
        # take their reset values
        return ResetInserter(clear)(m)


class BufferedFIFO(SyncFIFOBuffered):
    """``SyncFIFOBuffered`` whose storage is marked ``no_rw_check`` for Yosys: a read of an
    entry written in the same cycle may return anything. This FIFO never makes one: it reads
    only while its registered level says an entry is held, and writes only while it says one
    is free, and its two pointers meet only when it is empty or full. Yosys cannot see that,
    and where the storage is block RAM (whose read port returns undefined data at such a
    collision on the ECP5) it keeps the old data with a copy of every write a cycle late and a
    compare of the addresses in front of the read data: on a 64-bit, 512-deep queue, 139 of
    its 363 flip-flops and 73 of its 187 LUT4."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        # Amaranth 0.5 names the memory ``storage`` (there is none at depth 0 or 1);
        # tests/test_bus.py checks that the mark reaches the netlist
        try:
            storage = m.submodules.storage
        except AttributeError:
            return m
        storage.attrs["no_rw_check"] = 1
        return m


class RegisteredQueue(wiring.Component):
    """A synchronous FIFO of ``depth`` entries (in block RAM when large) followed by a register
    slice, between two streams of ``shape``. ``level`` counts the entries held (the slice's
    included) and ``nonempty``, a register, says whether there are any. ``o.payload`` and
    ``o.valid`` come from registers, and so does ``i.ready`` when ``depth`` is 4 or more: it
    says whether two entries were free a cycle ago (a write a cycle takes at most one), so a
    writer's decision does not wait on the level's compare; the queue then holds at most
    ``depth - 1`` entries besides its output slice, and ``ahead.i_ready``
    (:class:`LookAheadSignature`) says what ``i.ready`` will be in the next cycle, for a
    writer that keeps copies of it. ``global_load`` (a name) puts the output slice's load
    enable on a global network where the platform has them (:class:`SkidBuffer`).

    From ``pipe_depth`` on (block RAM), a write passes a register before the RAM, and the
    RAM's read data a register before the output slice: two entries and two cycles of latency
    more, so that the RAM's fixed site meets registers on both sides. The default, 32, is where
    Yosys starts to put a queue in block RAM on the ECP5 and iCE40."""

    #: the default ``pipe_depth``
    PIPE_DEPTH = 32

    def __init__(self, shape, *, depth, global_load=None, pipe_depth=PIPE_DEPTH):
        if depth < 2:
            self._MustUse__silence = True     # never elaborated: no warning about it
            raise ValueError(f"depth must be at least 2, not {depth!r}")
        if pipe_depth < 2:
            self._MustUse__silence = True
            raise ValueError(f"pipe_depth must be at least 2, not {pipe_depth!r}")
        self.depth = depth
        self.pipe_depth = pipe_depth
        self.global_load = global_load
        members = {
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
            "level": Out(range(depth + 4)),
            "nonempty": Out(1),
        }
        if depth >= 4 or depth >= pipe_depth:          # i.ready is a register
            members["ahead"] = Out(LookAheadSignature())
        super().__init__(members)
        self.width = len(Value.cast(self.i.payload))

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        w_data = Value.cast(i.payload)
        q = m.submodules.queue = BufferedFIFO(width=self.width, depth=self.depth)
        # the queue's entries and the FIFO's, counted in registers of their own for the tests of
        # `nonempty` and of the room: `level` and the FIFO's are sums of their parts' levels, and
        # those adders and a compare in front of `held` would be too long a path for one cycle
        ports = SimpleNamespace(depth=self.depth, level=self.level, w_en=i.valid, w_rdy=i.ready,
                                r_en=o.ready, r_rdy=o.valid)
        m.d.comb += self.nonempty.eq(holds_entries(m, "held", CountedLevel(m, "count", ports)))
        if self.depth < self.pipe_depth:
            m.d.comb += [q.w_data.eq(w_data), q.w_en.eq(i.valid & i.ready)]
            if self.depth >= 4:
                q_count = CountedLevel(m, "q_count", q)
                room = registered_room(m, "room", q_count)
                m.d.comb += [i.ready.eq(room), self.ahead.i_ready.eq(room_next(q_count))]
            else:
                m.d.comb += i.ready.eq(q.w_rdy)
            out = register_slice(m, "out", valid=q.r_rdy, ready=q.r_en, payload=q.r_data,
                                 out_valid=o.valid, out_ready=o.ready,
                                 out_payload=o.payload, global_load=self.global_load)
            m.d.comb += self.level.eq(q.level + out.level)
            return m
        # block RAM: a write goes into a register first, and from there into the RAM a cycle later,
        # so the RAM's data input (a fixed site, often far from the writer) is fed from a register
        # and not from the writer's logic. The room register counts the entry in that register:
        # three entries free a cycle ago, as for the queue alone, leave room for it too (at most two
        # land between)
        wq_valid = Signal(name="wq_valid")
        wq_data = Signal(self.width, name="wq_data", reset_less=True)
        m.d.sync += [wq_valid.eq(i.valid & i.ready), wq_data.eq(w_data)]
        m.d.comb += [q.w_en.eq(wq_valid), q.w_data.eq(wq_data)]
        q_count = CountedLevel(m, "q_count", q)
        room = registered_room(m, "room", q_count, held=wq_valid)
        m.d.comb += [i.ready.eq(room), self.ahead.i_ready.eq(room_next(q_count, held=wq_valid))]
        slice_rdy = Signal()
        p_valid, p_data = block_ram_output(m, "p", q, slice_rdy)
        out = register_slice(m, "out", valid=p_valid, ready=slice_rdy, payload=p_data,
                             out_valid=o.valid, out_ready=o.ready, out_payload=o.payload,
                             global_load=self.global_load)
        m.d.comb += self.level.eq(wq_valid + q.level + p_valid + out.level)
        return m


def block_ram_output(m, name, fifo, ready):
    """The read side of ``fifo`` (a ``SyncFIFOBuffered`` kept in block RAM) through a register of
    its own, with nothing in front of its data input: block RAM's read data comes late, so it should
    meet no logic before a register. Returns that register's ``(valid, data)``; ``ready`` takes it.
    A transfer a cycle still passes, a cycle later; the register is one entry more besides the
    FIFO's ``depth``. Drives ``fifo.r_en``."""
    valid = Signal(name=f"{name}_valid")
    data = Signal(fifo.width, name=f"{name}_data", reset_less=True)     # valid says if it holds
    free = ~valid | ready
    m.d.comb += fifo.r_en.eq(free)
    with m.If(free):
        m.d.sync += [valid.eq(fifo.r_rdy), data.eq(fifo.r_data)]
    return valid, data
