"""AXI signatures and the register bank at the Amaranth level (no Verilog simulator needed)."""

import random
import re

import pytest
from amaranth import Module, Shape, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import Flow
from amaranth.sim import Simulator

from atomcube.hw.bus.axi import AXI4LiteSignature, AXI4Signature, Burst, Resp
from atomcube.hw.bus.regbank import RegisterBank
from atomcube.hw.fabric import Checked
from atomcube.hw.top.memory import AxiRam
from atomcube.model.registers import SELFTEST
from atomcube.model.regmap import Field, reg, regmap


def inspected(component):
    """A component built only to look at, never elaborated: tell Amaranth that is intended."""
    component._MustUse__silence = True
    return component


def test_axi4_lite_directions():
    sig = AXI4LiteSignature(addr_width=12)
    m = sig.members
    assert m["awaddr"].flow is Flow.Out and Shape.cast(m["awaddr"].shape).width == 12
    assert m["awready"].flow is Flow.In and m["rdata"].flow is Flow.In
    sub = sig.flip().members
    assert sub["awvalid"].flow is Flow.In and sub["bresp"].flow is Flow.Out
    assert sig == AXI4LiteSignature(addr_width=12) and sig != AXI4LiteSignature()


def test_axi4_full_signal_set():
    sig = AXI4Signature(addr_width=64, data_width=256, id_width=6)
    names = set(sig.members.keys())
    for ch in ("aw", "ar"):
        for s in ("id", "addr", "len", "size", "burst", "lock", "cache", "prot", "qos", "region",
                  "valid", "ready"):
            assert f"{ch}{s}" in names
    assert {"wdata", "wstrb", "wlast", "bid", "bresp", "rid", "rdata", "rresp", "rlast"} <= names
    assert Shape.cast(sig.members["wstrb"].shape).width == 32
    assert sig.members["bid"].flow is Flow.In and Shape.cast(sig.members["arid"].shape).width == 6
    assert sig.bytes_per_beat == 32 and sig.size_code == 5


@pytest.mark.parametrize("kwargs, message", [
    (dict(data_width=48), "data_width must be one of 32, 64, 128, 256, 512, not 48"),
    (dict(data_width=1024), "data_width must be one of"),
    (dict(addr_width=40), "addr_width must be one of 32, 64, not 40"),
    (dict(id_width=0), "id_width must be an integer from 1 to 16, not 0"),
])
def test_axi4_rejects(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AXI4Signature(**kwargs)


def test_axi4_lite_rejects():
    with pytest.raises(ValueError, match="data_width must be one of 32, 64, not 128"):
        AXI4LiteSignature(data_width=128)
    with pytest.raises(ValueError, match="addr_width must be an integer from 2 to 64, not 1"):
        AXI4LiteSignature(addr_width=1)


def test_regbank_rejects(rejected):
    with rejected(TypeError, "regmap must be a RegisterMap"):
        RegisterBank({})
    with rejected(ValueError, r"addr_width must be an integer from 6 \(to reach offset "
                              r"0x24\) to 64, not 5"):
        RegisterBank(SELFTEST, addr_width=5)


def test_regbank_ports_in_verilog():
    text = verilog.convert(RegisterBank(SELFTEST), name="bank", emit_src=False)
    for port in ("s_axil__awaddr", "s_axil__rresp", "regs__ctrl__enable__data",
                 "regs__status__events__set", "regs__cmd__kick__pulse",
                 "regs__window__word__r_data", "regs__window__word__w_data",
                 "regs__window__rd_stb", "regs__scratch__wr_stb"):
        assert f" {port}" in text, port
    sig = inspected(RegisterBank(SELFTEST)).signature
    assert sig.members["regs"].signature.members["ident"].signature.members["value"] \
        .signature.members["r_data"].flow is Flow.In


def test_regbank_single_register_map():
    # the smallest map: one register at offset 0; the bank still decodes every address bit
    m = regmap("one", [reg("only", 0, "", Field("v", 0, 8, "RW", reset=3))])
    bank = RegisterBank(m)
    assert bank.addr_width == 3
    verilog.convert(bank, name="one", emit_src=False)


def _bank_run(dut, writes, reads):
    """Drive ``dut``'s AXI4-Lite port in the Amaranth simulator with bready and rready high:
    ``writes`` ((address, data, strobes)) one per cycle, address and data together, then three
    idle cycles, then a read of each of ``reads`` in turn. Returns whether each write was
    taken in its cycle, the scratch register's value after the writes, and each read's
    (rdata, rresp) by address."""
    bus = dut.s_axil
    seen = {}

    async def bench(ctx):
        ctx.set(bus.bready, 1)
        ctx.set(bus.rready, 1)
        accepted = []
        for addr, data, strb in writes:
            ctx.set(bus.awvalid, 1)
            ctx.set(bus.wvalid, 1)
            ctx.set(bus.awaddr, addr)
            ctx.set(bus.wdata, data)
            ctx.set(bus.wstrb, strb)
            await ctx.tick()
            accepted.append(ctx.get(bus.awready) and ctx.get(bus.wready))
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        await ctx.tick().repeat(3)
        seen["accepted"] = accepted
        seen["scratch"] = ctx.get(dut.regs.scratch.value.data)
        for addr in reads:
            ctx.set(bus.araddr, addr)
            ctx.set(bus.arvalid, 1)
            await ctx.tick().until(bus.arready)
            ctx.set(bus.arvalid, 0)
            await ctx.tick().until(bus.rvalid)
            seen[addr] = (ctx.get(bus.rdata), ctx.get(bus.rresp))
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_regbank_amaranth_sim():
    """Back-to-back writes, one per cycle with bready high, then reads and an unmapped access."""
    # four writes on consecutive cycles, then read ctrl, then the hole
    seen = _bank_run(RegisterBank(SELFTEST), [(0x20, v, 0xF) for v in (0x11, 0x22, 0x33, 0x44)],
                     (0x04, 0x18))
    assert seen["accepted"] == [1, 1, 1, 1], "the bank did not take one write per cycle"
    assert seen["scratch"] == 0x44
    assert seen[0x04] == (SELFTEST["ctrl"].reset, 0)     # OKAY
    assert seen[0x18] == (0, 2)                          # SLVERR, reads 0


@pytest.mark.parametrize("capture", [True, False])
def test_regbank_mirror_keeps_back_to_back_partial_writes(capture):
    """A mirrored register never written since reset takes two writes on consecutive cycles,
    one byte each: the read gives both bytes and the reset value's other two. (The first write
    since reset stores every byte, the unstrobed ones from the reset value; the second must
    not, though the first has not yet marked the register written when the second is
    decided.) A directed case: writes on consecutive cycles need bready high; the cocotb
    regbank bench covers the mirror under random backpressure."""
    seen = _bank_run(RegisterBank(SELFTEST, mirror=True, capture=capture),
                     [(0x20, 0x0000_0011, 0b0001), (0x20, 0x0000_2200, 0b0010)], (0x20,))
    assert seen["accepted"] == [1, 1], "the writes were not taken on consecutive cycles"
    assert seen[0x20] == (0xDEAD_2211, 0), f"read 0x{seen[0x20][0]:08x}"


def test_regs_signature_is_flippable():
    # a block instantiating the bank connects to its regs port from the other side
    flipped = wiring.flipped(inspected(RegisterBank(SELFTEST)).regs)
    assert flipped.ctrl.enable.data is not None


def _fifo_order_rate_and_level(q, seed):
    """Random pushes and pops through ``q`` (streams ``i`` and ``o``, ``level``, and
    ``nonempty`` where it has one) keep the order, the level and the nonempty flag; what
    ``ahead`` says is what the ports carry a cycle later; then, with both sides always
    willing, ``q`` passes a word every cycle."""
    rng = random.Random(seed)
    sent = list(range(1, 601))
    seen = {"out": [], "level_errors": 0, "idle_pops": 0, "next_errors": 0,
            "data_next_errors": 0}
    members = q.signature.members
    told = "ahead" in members          # the skid buffer (and a queue) say their next i.ready
    told_data = told and "o_payload" in members["ahead"].signature.members   # the skid buffer

    async def bench(ctx):
        queue = []                     # words pushed and not yet popped
        i = 0
        said = said_data = None
        for cycle in range(1000):
            steady = cycle >= 400      # both sides always willing from here on
            push = i < len(sent) and (steady or rng.random() < 0.6)
            pop = steady or rng.random() < 0.5
            ctx.set(q.i.valid, push)
            ctx.set(q.i.payload, sent[i] if push else 0)
            ctx.set(q.o.ready, pop)
            await ctx.delay(1e-9)
            seen["level_errors"] += ctx.get(q.level) != len(queue)
            if "nonempty" in members:
                seen["level_errors"] += ctx.get(q.nonempty) != (len(queue) != 0)
            w, r = ctx.get(q.i.ready), ctx.get(q.o.valid)
            if told:
                seen["next_errors"] += said is not None and w != said
                said = ctx.get(q.ahead.i_ready)
            if told_data:
                now = (r, ctx.get(q.o.payload))
                seen["data_next_errors"] += said_data is not None and now != said_data
                said_data = (ctx.get(q.ahead.o_valid), ctx.get(q.ahead.o_payload))
            if r and pop:
                seen["out"].append(ctx.get(q.o.payload))
                queue.pop(0)
            elif cycle >= 420 and i < len(sent):
                seen["idle_pops"] += 1
            if w and push:
                queue.append(sent[i])
                i += 1
            await ctx.tick()

    sim = Simulator(Checked(q))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["out"] == sent
    assert seen["level_errors"] == 0
    assert seen["next_errors"] == 0, "ahead.i_ready did not foretell i.ready"
    assert seen["data_next_errors"] == 0, "ahead.o_valid/o_payload did not foretell o"
    assert seen["idle_pops"] == 0, "it did not pass a word a cycle"


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("depth", [8, 40])
@pytest.mark.parametrize("global_load", [None, "q_load"])
def test_registered_queue_order_rate_and_level(seed, depth, global_load):
    """Both forms: the slice behind the FIFO, and (block RAM depths, ``PIPE_DEPTH`` on) a
    register between them; each with its output slice's load as it is and as written for a
    global network (the same logic with no platform)."""
    from atomcube.hw.bus.fifo import RegisteredQueue

    assert (depth >= RegisteredQueue.PIPE_DEPTH) == (depth == 40)
    _fifo_order_rate_and_level(RegisteredQueue(16, depth=depth, global_load=global_load), seed)
    with pytest.raises(ValueError, match="depth must be at least 2, not 1"):
        RegisteredQueue(8, depth=1)


@pytest.mark.parametrize("depth, cycles", [(8, 3), (40, 5)])
def test_registered_queue_latency(depth, cycles):
    """A word written into an empty queue is offered ``cycles`` clock edges later: the FIFO
    and the output slice; at block RAM depths also the write register in front of the RAM and
    the register after it."""
    from atomcube.hw.bus.fifo import RegisteredQueue

    q = RegisteredQueue(8, depth=depth)
    took = []

    async def bench(ctx):
        await ctx.tick()
        ctx.set(q.i.valid, 1)
        ctx.set(q.i.payload, 0x5A)
        assert ctx.get(q.i.ready)
        await ctx.tick()
        ctx.set(q.i.valid, 0)
        n = 1
        while not ctx.get(q.o.valid) and n < 20:
            await ctx.tick()
            n += 1
        took.append((n, ctx.get(q.o.payload)))

    sim = Simulator(Checked(q))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert took == [(cycles, 0x5A)]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("load", ["one", "global", "shares"])
def test_skid_buffer_order_rate_and_level(seed, load):
    """The register slices' buffer: two entries, ready from a register; its output entry's
    load as it is, as written for a global network, or in shares of 5 bits (``load_bits``)."""
    from atomcube.hw.bus.fifo import SkidBuffer

    _fifo_order_rate_and_level(SkidBuffer(16, global_load="load" if load == "global" else None,
                                          load_bits=5 if load == "shares" else None), seed)


@pytest.mark.parametrize("form", ["one", "shares", "global", "late"])
def test_skid_buffer_loads_from_a_ready_worked_out_ahead(form):
    """With ``ready_ahead`` (the reader tells ``ahead.o_ready``, its handshake of the next
    cycle) the output entry loads on registers, one, one per share (``load_bits``) or through
    the global network's stand-in, under random ``clear``s: the words come out in order. Told
    the handshake of the same cycle instead (``late``), it loads a cycle late and gives wrong
    words (so the loads do come from ``ahead.o_ready``), and under :class:`Checked` its
    look-ahead check stops the run at the first broken promise."""

    if form == "late":
        with pytest.raises(AssertionError, match="o_ready: the look-ahead"):
            _skid_buffer_ahead(form, checked=True)
    seen = _skid_buffer_ahead(form, checked=form != "late")
    assert seen["out"] > 800 and seen["flushes"] > 30, seen
    assert (seen["wrong"] == 0) == (form != "late"), seen


def _skid_buffer_ahead(form, *, checked):
    """The run of :func:`test_skid_buffer_loads_from_a_ready_worked_out_ahead` for ``form``:
    words out, words wrong, clears."""
    from atomcube.hw.bus.fifo import SkidBuffer

    rng = random.Random(7)
    flush, ready_next = Signal(), Signal()
    buf = SkidBuffer(16, load_bits=5 if form in ("shares", "late") else None,
                     global_load="load" if form == "global" else None, ready_ahead=True)
    m = Module()
    m.submodules.buf = buf
    m.d.comb += [buf.clear.eq(flush), buf.ahead.o_ready.eq(ready_next)]
    seen = {"wrong": 0, "out": 0, "flushes": 0}

    async def bench(ctx):
        queue, word = [], 1
        pops = [rng.random() < 0.5 for _ in range(3001)]
        for t in range(3000):
            push, fl = rng.random() < 0.7, rng.random() < 0.03
            ctx.set(buf.i.valid, push)
            ctx.set(buf.i.payload, word)
            ctx.set(buf.o.ready, pops[t])
            ctx.set(ready_next, pops[t] if form == "late" else pops[t + 1])
            ctx.set(flush, fl)
            await ctx.delay(1e-9)
            if ctx.get(buf.o.valid) and pops[t]:
                seen["wrong"] += ctx.get(buf.o.payload) != queue.pop(0)
                seen["out"] += 1
            if ctx.get(buf.i.ready) and push:
                queue.append(word)
                word = word * 5 % 0xFFF1 + 1
            if fl:
                queue.clear()
                seen["flushes"] += 1
            await ctx.tick()

    sim = Simulator(Checked(m) if checked else m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


class _CopiesApart:
    """A platform whose ``register_copies`` keep their flip-flops out of any reset inserted
    around the module that asks for them, as the ECP5 board tops' TRELLIS_FF instances are:
    they run in a domain of their own on the same clock."""

    def register_copies(self, m, value, count, name, reset, enable):
        assert enable is None
        copies = [Signal(name=f"{name}{k}", init=reset) for k in range(count)]
        m.d.copies += [q.eq(value) for q in copies]
        return copies


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("form", ["plain", "told", "untold", "told-loads", "untold-loads"])
def test_skid_buffer_select_copies_clear_with_a_flush(seed, form):
    """A slice emptied under random flushes: words come out in order, none after a flush that
    went before it. With its select in copies that a reset inserted around the buffer does not
    reach (``select_bits``), as on the ECP5 board tops, it is right when emptied by ``clear``
    (the ``told`` forms); emptied by such an inserted reset instead (``untold``), a copy left
    set after a flush picks the second entry's stale word. Likewise with its load in copies
    (``load_bits``, the ``-loads`` forms): emptied by an inserted reset, a copy left clear after
    a flush does not load the next word."""
    from amaranth.hdl import ClockDomain, Fragment, ResetInserter

    from atomcube.hw.bus.fifo import SkidBuffer

    rng = random.Random(seed)
    flush = Signal()
    loads = form.endswith("-loads")
    buf = SkidBuffer(16, select_bits=None if form == "plain" or loads else 5,
                     load_bits=4 if loads else None)
    m = Module()
    m.domains.copies = ClockDomain("copies")
    if form.startswith("untold"):
        m.submodules.buf = ResetInserter(flush)(buf)
    else:
        m.submodules.buf = buf
        m.d.comb += buf.clear.eq(flush)
    platform = _CopiesApart()
    seen = {"wrong": 0, "flushes": 0, "out": 0}

    async def bench(ctx):
        queue, word = [], 1
        for _ in range(3000):
            push, pop, fl = rng.random() < 0.7, rng.random() < 0.4, rng.random() < 0.05
            ctx.set(buf.i.valid, push)
            ctx.set(buf.i.payload, word)
            ctx.set(buf.o.ready, pop)
            ctx.set(flush, fl)
            await ctx.delay(1e-9)
            if ctx.get(buf.o.valid) and pop:
                seen["wrong"] += ctx.get(buf.o.payload) != queue.pop(0)
                seen["out"] += 1
            if ctx.get(buf.i.ready) and push:
                queue.append(word)
                word = word % 0xFFFF + 1
            if fl:                 # the inserted reset empties both entries at the edge
                queue.clear()
                seen["flushes"] += 1
            await ctx.tick()

    sim = Simulator(Fragment.get(m, platform))
    sim.add_clock(1e-8)
    sim.add_clock(1e-8, domain="copies")     # in phase with sync: a second clock, not a wire
    sim.add_testbench(bench)
    sim.run()
    assert seen["out"] > 500 and seen["flushes"] > 50
    if not form.startswith("untold"):
        assert seen["wrong"] == 0
    else:
        assert seen["wrong"] > 0, "the test would not see a stale copy"


def test_skid_buffer_rejects_select_bits(rejected):
    from atomcube.hw.bus.fifo import SkidBuffer

    with rejected(ValueError, "select_bits must be at least 1, not 0"):
        SkidBuffer(8, select_bits=0)
    with rejected(ValueError, "load_bits must be at least 1, not -2"):
        SkidBuffer(8, load_bits=-2)
    with rejected(ValueError, "load_bits and global_load are two ways to spread the load"):
        SkidBuffer(8, load_bits=4, global_load="load")


def test_block_ram_users_leave_read_write_collisions_undefined():
    """The on-chip memory and the queues in block RAM tell Yosys (``no_rw_check``) that a read
    of a word written in the same cycle need not return the old bytes: without it Yosys adds
    a delayed copy of every write and a compare of the addresses in front of the read data.
    (The queues never make such a read; the memory leaves it undefined, as its docstring
    says.)"""
    from amaranth.back import rtlil

    from atomcube.hw.bus.fifo import BufferedFIFO, RegisteredQueue

    def marked(design, name, width, depth):
        ports = None
        if isinstance(design, BufferedFIFO):
            ports = [design.w_data, design.w_en, design.w_rdy, design.r_data, design.r_en,
                     design.r_rdy]
        text = rtlil.convert(design, name="top", ports=ports)
        return re.search(rf"attribute \\no_rw_check 1\n\s*memory width {width} size {depth} "
                         rf"\\{name}\n", text) is not None

    # the memory's block RAM: one array per byte lane with the slices (the ECP5 builds), one
    # array without
    assert all(marked(AxiRam(size=4096, data_width=64), f"mem{k}", 8, 512) for k in range(8))
    assert marked(AxiRam(size=4096, data_width=64, slices=False), "mem", 64, 512)
    assert marked(BufferedFIFO(width=64, depth=512), "storage", 64, 511)
    # so is a RegisteredQueue's (its FIFO is a BufferedFIFO)
    assert marked(RegisteredQueue(64, depth=512), "storage", 64, 511)
    # a FIFO of one entry has no storage to mark, and still elaborates
    assert not marked(BufferedFIFO(width=8, depth=1), "storage", 8, 0)


@pytest.mark.parametrize("size", [4096, 65536])
def test_axi_ram_burst_check(size):
    """The on-chip memory's response to a burst (hw.top.memory.AxiRam._split and _span, then
    _check)
    against the rule it documents: DECERR when the burst reaches past ``size``, SLVERR for WRAP
    or a beat wider than the bus, on random bursts and on those that end exactly at, or a byte
    past, the end."""
    ram = inspected(AxiRam(size=size, data_width=64, addr_width=32))
    m = Module()
    addr, length, bsize, burst = Signal(32), Signal(8), Signal(3), Signal(2)
    resp = Signal(2)
    m.d.comb += resp.eq(ram._check(*ram._split(addr), *ram._span(length, bsize, burst)))

    def expect(a, n, s, b):
        if b == Burst.WRAP.value or s > 3:
            return Resp.SLVERR.value
        span = (1 if b == Burst.FIXED.value else n + 1) << s
        return Resp.DECERR.value if a + span > size else Resp.OKAY.value

    rng = random.Random(size)
    cases = []
    for _ in range(400):
        s, n, b = rng.randrange(8), rng.randrange(256), rng.choice([0, 1, 2])
        span = (1 if b == Burst.FIXED.value else n + 1) << s
        a = rng.choice([rng.randrange(1 << 32), rng.randrange(size),
                        size - span, size - span + 1, size, (1 << 32) - span])
        cases.append((a % (1 << 32), n, s, b))
    sim = Simulator(Checked(m))

    async def bench(ctx):
        for a, n, s, b in cases:
            ctx.set(addr, a)
            ctx.set(length, n)
            ctx.set(bsize, s)
            ctx.set(burst, b)
            got = ctx.get(resp)
            assert got == expect(a, n, s, b), (hex(a), n, s, b, got)

    sim.add_testbench(bench)
    sim.run()


def _ram_bursts(rng, size, lo, hi, count, write):
    """``count`` random bursts in [lo, hi) of a ``size``-byte, 64-bit memory: INCR and FIXED,
    beats of 2, 4 or 8 bytes at addresses aligned to them; one in ten reaches past the end of
    the memory instead (answered DECERR). Each is (addr, len, size, burst, beats), a write's
    beats (data, strobes), a read's None."""
    out = []
    for _ in range(count):
        bsize = rng.choice([1, 2, 3, 3, 3])
        length = rng.randrange(16)
        burst = rng.choice([Burst.INCR, Burst.INCR, Burst.INCR, Burst.FIXED])
        span = (1 if burst == Burst.FIXED else length + 1) << bsize
        if rng.random() < 0.1:
            addr = size - span + (1 << bsize) * rng.randrange(1, 4)
        else:
            addr = rng.randrange(lo, hi - span + 1) >> bsize << bsize
        beats = [(rng.getrandbits(64), rng.getrandbits(8)) for _ in range(length + 1)] \
            if write else None
        out.append((addr, length, bsize, burst, beats))
    return out


def _ram_apply(mem, size, burst):
    """A write burst into ``mem`` (a bytearray), as the memory does it: nothing past the end."""
    addr, length, bsize, kind, beats = burst
    span = (1 if kind == Burst.FIXED else length + 1) << bsize
    if addr + span > size:
        return Resp.DECERR
    for b, (data, strb) in enumerate(beats):
        word = (addr if kind == Burst.FIXED else addr + (b << bsize)) >> 3 << 3
        for i in range(8):
            if strb >> i & 1:
                mem[word + i] = data >> (8 * i) & 0xFF
    return Resp.OKAY


def _ram_read(mem, size, burst):
    """What a read burst returns: (data, resp, last) per beat; zeros and DECERR past the end."""
    addr, length, bsize, kind, _ = burst
    span = (1 if kind == Burst.FIXED else length + 1) << bsize
    if addr + span > size:
        return [(0, Resp.DECERR, b == length) for b in range(length + 1)]
    out = []
    for b in range(length + 1):
        word = (addr if kind == Burst.FIXED else addr + (b << bsize)) >> 3 << 3
        out.append((int.from_bytes(mem[word:word + 8], "little"), Resp.OKAY, b == length))
    return out


@pytest.mark.parametrize("slices", [True, False])
@pytest.mark.parametrize("stalls", [0, 0xACE1])
@pytest.mark.parametrize("seed", [1, 2])
def test_axi_ram_reads_what_was_written(slices, stalls, seed):
    """The on-chip memory as a manager sees it, with random stalls on every channel (and, with
    ``stalls``, the memory's own): random write bursts (byte strobes, INCR and FIXED, narrow
    beats, some past the end) over the whole memory, then reads of its lower half alongside
    writes to its upper half, then reads of the upper half. With ``slices`` the memory is an
    array per byte lane, each with its own copies of the addresses: a copy a cycle off shows up
    as a wrong word."""
    size = 4096
    rng = random.Random(seed)
    print(f"axi ram: slices {slices}, stalls {stalls:#x}, seed {seed}")
    dut = AxiRam(size=size, data_width=64, addr_width=32, id_width=4, stalls=stalls,
                 slices=slices)
    a = dut.s_axi
    mem = bytearray(size)
    phases = [
        (_ram_bursts(rng, size, 0, size, 40, True), []),
        (_ram_bursts(rng, size, size // 2, size, 20, True),
         _ram_bursts(rng, size, 0, size // 2, 20, False)),
        ([], _ram_bursts(rng, size, size // 2, size, 20, False)),
    ]
    got = {"b": [], "r": []}
    want = {"b": [], "r": []}

    def maybe():
        return rng.random() < 0.7

    async def bench(ctx):
        cycle = 0
        for writes, reads in phases:
            # each phase reads what the phases before it wrote; its writes and reads touch
            # different halves, so their order between each other does not matter
            want["r"].extend(beat for r in reads for beat in _ram_read(mem, size, r))
            want["b"].extend(_ram_apply(mem, size, w) for w in writes)
            beats = [beat for w in writes for beat in
                     ((d, s, k == len(w[4]) - 1) for k, (d, s) in enumerate(w[4]))]
            n_aw = n_ar = n_w = n_b = n_r = 0
            n_beats = sum(r[1] + 1 for r in reads)
            while n_b < len(writes) or n_r < n_beats:
                cycle += 1
                assert cycle < 20_000, "the memory hangs"
                for ch, todo, k in (("aw", writes, n_aw), ("ar", reads, n_ar)):
                    up = ctx.get(getattr(a, f"{ch}valid"))
                    if k < len(todo) and (up or maybe()):
                        addr, length, bsize, kind, _ = todo[k]
                        ctx.set(getattr(a, f"{ch}valid"), 1)
                        ctx.set(getattr(a, f"{ch}addr"), addr)
                        ctx.set(getattr(a, f"{ch}len"), length)
                        ctx.set(getattr(a, f"{ch}size"), bsize)
                        ctx.set(getattr(a, f"{ch}burst"), kind)
                        ctx.set(getattr(a, f"{ch}id"), k % 16)
                    else:
                        ctx.set(getattr(a, f"{ch}valid"), 0)
                if n_w < len(beats) and (ctx.get(a.wvalid) or maybe()):
                    data, strb, last = beats[n_w]
                    ctx.set(a.wvalid, 1)
                    ctx.set(a.wdata, data)
                    ctx.set(a.wstrb, strb)
                    ctx.set(a.wlast, last)
                else:
                    ctx.set(a.wvalid, 0)
                ctx.set(a.bready, maybe())
                ctx.set(a.rready, maybe())
                await ctx.delay(1e-9)
                if ctx.get(a.awvalid) and ctx.get(a.awready):
                    n_aw += 1
                if ctx.get(a.arvalid) and ctx.get(a.arready):
                    n_ar += 1
                if ctx.get(a.wvalid) and ctx.get(a.wready):
                    n_w += 1
                if ctx.get(a.bvalid) and ctx.get(a.bready):
                    got["b"].append(Resp(ctx.get(a.bresp)))
                    n_b += 1
                if ctx.get(a.rvalid) and ctx.get(a.rready):
                    got["r"].append((ctx.get(a.rdata), Resp(ctx.get(a.rresp)),
                                     bool(ctx.get(a.rlast))))
                    n_r += 1
                await ctx.tick()
            for ch in ("awvalid", "arvalid", "wvalid"):
                ctx.set(getattr(a, ch), 0)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got["b"] == want["b"]
    assert len(got["r"]) == len(want["r"])
    for k, (g, w) in enumerate(zip(got["r"], want["r"], strict=True)):
        assert g == w, f"read beat {k}: {g[0]:#018x} {g[1]} {g[2]}, want {w[0]:#018x} " \
                       f"{w[1]} {w[2]}"
    assert Resp.DECERR in got["b"] and Resp.OKAY in got["b"]


def test_axi_ram_lane_addresses_are_kept_apart_on_the_ecp5():
    """On an ECP5 board top each byte lane's block RAM array takes its read and write word
    addresses from flip-flops of its own (``ra<lane>_<bit>_c0``, ``wa...``), which Yosys does
    not merge; without the slices there is one array and no copies."""
    from amaranth.back import rtlil

    from atomcube.hw.fabric import Ecp5Copies

    class Top(wiring.Component):
        def __init__(self, slices):
            self.ram = AxiRam(size=4096, data_width=64, slices=slices)
            super().__init__({"s_axi": wiring.In(self.ram.sig)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.ram = self.ram
            wiring.connect(m, wiring.flipped(self.s_axi), self.ram.s_axi)
            return m

    for slices, expect in ((True, sorted(f"{ch}{k}_{b}_c0_ff" for ch in ("ra", "wa")
                                          for k in range(8) for b in range(9))),
                           (False, [])):
        text = rtlil.convert(Top(slices), platform=Ecp5Copies())
        cells = re.findall(r"cell \\TRELLIS_FF \\(\S+)", text)
        assert sorted(c.rsplit(".", 1)[-1] for c in cells) == expect


@pytest.mark.parametrize("slices", [True, False])
def test_axi_ram_reads_a_beat_every_cycle(slices):
    """A 256-beat read burst that R takes as it comes leaves the memory at a beat a cycle,
    after a few cycles of latency: the block RAM must fetch the next word in the cycle R takes
    a beat, not wait for its output to empty. With R ready at random (seed printed), the beats
    still all arrive, in order."""
    size = 4096
    dut = AxiRam(size=size, data_width=64, addr_width=32, id_width=4, slices=slices)
    a = dut.s_axi
    mem = bytes(random.Random(3).randrange(256) for _ in range(size))
    seed = random.randrange(1 << 16)
    print(f"R's ready under random.Random({seed})")
    rng = random.Random(seed)
    want = [int.from_bytes(mem[8 * k:8 * k + 8], "little") for k in range(256)]
    seen = {}

    async def bench(ctx):
        for k in range(0, size, 8):            # fill it through the write port
            ctx.set(a.awvalid, 1)
            ctx.set(a.awaddr, k)
            ctx.set(a.awsize, 3)
            ctx.set(a.awburst, Burst.INCR)
            await ctx.tick().until(a.awready)
            ctx.set(a.awvalid, 0)
            ctx.set(a.wvalid, 1)
            ctx.set(a.wdata, int.from_bytes(mem[k:k + 8], "little"))
            ctx.set(a.wstrb, 0xFF)
            ctx.set(a.wlast, 1)
            await ctx.tick().until(a.wready)
            ctx.set(a.wvalid, 0)
            ctx.set(a.bready, 1)
            await ctx.tick().until(a.bvalid)
        for stall, name in ((False, "free"), (True, "stalled")):
            ctx.set(a.arvalid, 1)
            ctx.set(a.araddr, 0)
            ctx.set(a.arlen, 255)
            ctx.set(a.arsize, 3)
            ctx.set(a.arburst, Burst.INCR)
            await ctx.tick().until(a.arready)
            ctx.set(a.arvalid, 0)
            got, cycles = [], 0
            while len(got) < 256:
                ready = not stall or rng.random() < 0.5
                ctx.set(a.rready, ready)
                await ctx.delay(1e-9)
                if ready and ctx.get(a.rvalid):
                    got.append(ctx.get(a.rdata))
                    assert ctx.get(a.rlast) == (len(got) == 256)
                await ctx.tick()
                cycles += 1
                assert cycles < 2000, "the memory hangs"
            seen[name] = (got, cycles)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    print({k: c for k, (_, c) in seen.items()})
    assert seen["free"][0] == want and seen["stalled"][0] == want
    assert seen["free"][1] <= 256 + 6, f"{seen['free'][1]} cycles for 256 beats"
