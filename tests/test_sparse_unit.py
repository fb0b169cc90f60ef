"""The sparse weight decompressor at the Amaranth level: parameters, ports, register map and the
register program, and the stream writer's bursts. Its behaviour is checked by the cocotb bench
(sim/sparse/test_sparse.py) against the weights model."""

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from atomcube.hw.bus.fifo import RegisteredQueue
from atomcube.hw.fabric import Checked
from atomcube.hw.sparse.decompressor import SparseDecompressor, SparseTiming, atom_layout
from atomcube.hw.sparse.engines import (
    BeatReader,
    BeatWriter,
    StreamReader,
    StreamWriter,
    _page_room,
)
from atomcube.hw.sparse.gearbox import AtomGearbox
from atomcube.hw.sparse.ringbuf import RingBuffer
from atomcube.hw.sparse.shiftbuf import ShiftBuffer
from atomcube.model.nvdla.weights import WeightSpec, compress, plan_job
from atomcube.model.registers.sparse import SPARSE, Error, program


@pytest.mark.parametrize("kw, msg", [
    (dict(data_width=32), "data_width must be 64, 128, 256 or 512, not 32"),
    (dict(atom_elements=8), "atom_elements must be 16, 32 or 64, not 8"),
    (dict(max_burst=12), "max_burst must be a power of two up to 256, not 12"),
    (dict(max_burst=32, fifo_depth=16), "fifo_depth 16 must hold a burst of 32 beats"),
    (dict(atom_elements=16, timing=SparseTiming(sum_levels=5)),
     "timing.sum_levels must be 1 to 4 for 16-element atoms, not 5"),
    (dict(timing=SparseTiming(sum_levels=2, early_sum_levels=3)),
     r"timing.early_sum_levels must be 0 to sum_levels \(2\), not 3"),
    (dict(timing=SparseTiming(load_bits=0)), "timing.load_bits must be at least 1, not 0"),
    (dict(timing=SparseTiming(elements_per_copy=0)),
     "timing.elements_per_copy must be at least 1, not 0"),
])
def test_parameters_rejected(rejected, kw, msg):
    with rejected(ValueError, msg):
        SparseDecompressor(**kw)


def test_timing_is_a_parameter():
    """A timing choice other than the default builds, and changes the netlist: the parameters
    reach the logic."""
    def emit(timing):
        return verilog.convert(SparseDecompressor(data_width=64, atom_elements=16, timing=timing),
                               name="top")

    default = emit(SparseTiming())
    assert emit(SparseTiming(early_sum_levels=0, byte_late_bits=1, mask_late_bits=1)) != default
    assert emit(SparseTiming(elements_per_copy=8, ring_select_bits=32)) != default
    assert emit(SparseTiming(counter_ready_ahead=False)) != default
    assert emit(SparseTiming(early_sum_levels=2)) == default     # the 16-element default


def test_timing_must_be_sparse_timing(rejected):
    with rejected(TypeError, "timing must be a SparseTiming"):
        SparseDecompressor(timing={"sum_levels": 4})


def test_reader_needs_id_bits(rejected):
    with rejected(ValueError, "3 streams need more than 1 ID bits"):
        StreamReader(streams=3, data_width=64, id_width=1)


def test_ports_in_verilog():
    text = verilog.convert(SparseDecompressor(data_width=64, atom_elements=32), name="sparse",
                           emit_src=False)
    for port in ("s_axil__awaddr", "m_axi__arid", "m_axi__rdata", "m_axi__awlen",
                 "m_axi__wstrb", "m_axi__bresp", "o_atoms__payload", "o_atoms__ready", "irq"):
        assert f" {port}" in text, port
    assert "[63:0] m_axi__rdata" in text
    assert f"[{atom_layout(32).size - 1}:0] o_atoms__payload" in text


def test_error_codes_are_documented():
    doc = SPARSE["error"].field("code").doc
    for e in Error:
        if e:
            assert f"{e.value} " in doc, e


def test_program_runs_the_job():
    spec = WeightSpec("deconv", "int16", (20, 7, 3, 3), (2, 2))
    w = np.ones(spec.shape, np.int16)
    job = plan_job(compress(spec.layout(w)), base=0x4000, dst=True)
    writes = program(job)
    values = {name: fields for name, fields in writes[:-1]}
    assert values["groups"]["value"] == 8 and values["kernels"]["value"] == 20
    assert values["bytes_per_kernel"]["value"] == 7 * 2 * 2 * 2
    assert values["precision"]["two_byte"] == 1
    assert values["dst_addr"]["value"] == job.dst_addr
    assert writes[-1] == ("ctrl", {"start": 1, "stream_enable": 1, "write_enable": 1})
    for name, fields in writes:
        SPARSE[name].encode(fields)         # every value fits its field
    assert program(plan_job(compress(spec.layout(w))), stream=False)[-1][1] == \
        {"start": 1, "stream_enable": 0, "write_enable": 0}


def run_writer(start, beats, seed, *, data_width=512, max_burst=16, cycles=4000, stop_cycles=0,
               rates=None):
    """Drive a StreamWriter with ``beats`` numbered beats from ``start``, with random gaps on
    its input and random stalls on AW, W and B (each at a rate drawn for the run, so the FIFO
    sometimes fills while AW waits; ``rates``: (input, AW, W) instead); ``stop`` is held high
    for the first ``stop_cycles`` cycles. Returns the bursts [(addr, [beats])], whether it
    raised done and whether it raised range_error."""
    dut = StreamWriter(data_width=data_width, max_burst=max_burst)
    rng = np.random.default_rng(seed)
    p_in, p_aw, p_w = rates or (rng.choice([0.5, 1.0]), rng.choice([0.2, 0.8]),
                                rng.choice([0.5, 1.0]))
    axi = dut.axi
    out = {"bursts": [], "done": False, "range_error": False}

    async def bench(ctx):
        ctx.set(dut.addr, start)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)
        sent, owed, data = 0, 0, []
        for cycle in range(cycles):
            ctx.set(dut.stop, int(cycle < stop_cycles))
            ctx.set(dut.i.valid, int(sent < beats and rng.random() < p_in))
            ctx.set(dut.i.payload, sent)
            ctx.set(dut.finish, int(sent == beats))
            ctx.set(axi.awready, int(rng.random() < p_aw))
            ctx.set(axi.wready, int(rng.random() < p_w))
            ctx.set(axi.bvalid, int(owed > 0 and rng.random() < 0.5))
            await ctx.delay(1e-9)
            if ctx.get(dut.i.valid) and ctx.get(dut.i.ready):
                sent += 1
            if ctx.get(axi.awvalid) and ctx.get(axi.awready):
                out["bursts"].append((ctx.get(axi.awaddr), ctx.get(axi.awlen) + 1))
            if ctx.get(axi.wvalid) and ctx.get(axi.wready):
                data.append(ctx.get(axi.wdata))
                if ctx.get(axi.wlast):
                    owed += 1
            if ctx.get(axi.bvalid) and ctx.get(axi.bready):
                owed -= 1
            out["done"] |= bool(ctx.get(dut.done))
            out["range_error"] |= bool(ctx.get(dut.range_error))
            await ctx.tick()
        out["data"] = data

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def check_bursts(out, start, beats):
    """Every burst is 1 to 16 beats of 64 bytes, stays in its 4 KiB page and follows the one
    before; the beats arrive in order; the writer finished without a range error."""
    addr = start
    for a, n in out["bursts"]:
        assert a == addr, (hex(a), hex(addr))
        assert 1 <= n <= 16
        assert (a & 0xFFF) + n * 64 <= 0x1000, f"burst at {a:#x} of {n} beats crosses 4 KiB"
        addr += n * 64
    assert addr == start + beats * 64
    assert out["data"] == list(range(beats))
    assert out["done"] and not out["range_error"]


@pytest.mark.parametrize("seed", range(6))
def test_writer_bursts_keep_the_rules(seed):
    """Random starts part way into a page and random lengths, 64-byte beats: every burst is at
    most max_burst beats, stays in its 4 KiB page, follows the one before, and the beats
    arrive in order. (A burst length worked out from a stale address passes a boundary.)"""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        start = 0x10000 + int(rng.integers(0, 64)) * 64
        beats = int(rng.integers(1, 160))
        check_bursts(run_writer(start, beats, int(rng.integers(1 << 31))), start, beats)


@pytest.mark.parametrize("beat", [40, 44, 47])
def test_writer_waits_out_its_look_ahead(beat):
    """The writer works its next burst out two cycles ahead, so it must not issue for two
    cycles after a burst. Directed at the one case that tells: ``stop`` holds the writer while
    its FIFO fills (32 spare beats), then a full burst goes at once and AW is free again the
    cycle after; the next address lies 8, 4 or 1 beats before a page end. A writer that waited
    only one cycle would send 16 beats there, from the old address's room, across 4 KiB."""
    start = 0x10000 + beat * 64
    out = run_writer(start, 48, 0, stop_cycles=60, rates=(1.0, 1.0, 1.0), cycles=400)
    assert out["bursts"][:2] == [(start, 16), (start + 16 * 64, 64 - beat - 16)]
    check_bursts(out, start, 48)


def test_writer_stops_at_the_top_of_memory():
    """A region that runs past the top of the 32-bit address space: the bursts up to the top go
    out, then range_error, and no burst wraps to address 0."""
    start = (1 << 32) - 5 * 64
    out = run_writer(start, 9, 7)
    assert out["range_error"] and not out["done"]
    assert sum(n for _, n in out["bursts"]) == 5
    assert all(a >= start for a, _ in out["bursts"])


def _reader_bursts(dut, start, beats, cycles=40):
    """The (address, beats) of the bursts a one-stream StreamReader asks for in ``cycles``
    cycles after loading a region of ``beats`` from ``start``, with AR always ready, no
    read data and nothing consumed."""
    bursts = []

    async def bench(ctx):
        ctx.set(dut.addr[0], start)
        ctx.set(dut.beats[0], beats)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)
        ctx.set(dut.axi.arready, 1)
        for _ in range(cycles):
            await ctx.delay(1e-9)
            if ctx.get(dut.axi.arvalid):
                bursts.append((ctx.get(dut.axi.araddr), ctx.get(dut.axi.arlen) + 1))
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return bursts


@pytest.mark.parametrize("max_burst,beat_log2",
                         [(16, 6), (16, 3), (15, 4), (64, 6), (256, 4), (64, 7)])
def test_page_room_over_every_page_offset(max_burst, beat_log2):
    """The room before the 4 KiB boundary (the compare with a constant beside the count of
    beats to it) is the fewer of max_burst and those beats, at every beat of a page: a burst
    length that is not a power of two, and bursts as long as the page or longer (the compare
    is then always true)."""
    addr = Signal(32)
    room = Signal(range(max_burst + 1))
    m = Module()
    m.d.comb += room.eq(_page_room(addr, max_burst, beat_log2))
    got = []

    async def bench(ctx):
        for page in (0, 0x7000):
            for a in range(page, page + 4096, 1 << beat_log2):
                ctx.set(addr, a)
                got.append((a, ctx.get(room)))

    sim = Simulator(Checked(m))
    sim.add_testbench(bench)
    sim.run()
    want = [(a, min(max_burst, (4096 - (a & 0xFFF)) >> beat_log2)) for a, _ in got]
    assert got == want


@pytest.mark.parametrize("beat", [40, 44, 47])
def test_reader_waits_out_its_look_ahead(beat):
    """The reader works its next burst out ahead too (the room before 4 KiB, then the fewer
    of that and the beats left, then whether the credit covers it). With AR always ready and a
    32-beat FIFO, a full burst goes and the channel is free again a cycle later; the next
    address lies 8, 4 or 1 beats before a page end. A reader that waited only one cycle would
    ask for 16 beats there, across 4 KiB."""
    start = 0x10000 + beat * 64
    bursts = _reader_bursts(StreamReader(streams=1, data_width=512, max_burst=16,
                                         fifo_depth=32), start, 48)
    assert bursts[:2] == [(start, 16), (start + 16 * 64, 64 - beat - 16)]
    for a, n in bursts:
        assert (a & 0xFFF) + n * 64 <= 0x1000, f"read burst at {a:#x} of {n} beats crosses 4 KiB"


def run_gearbox(atom_elements, beat_bytes, two, atoms, seed, *, p_in=None, p_out=None):
    """Push ``atoms`` random atoms through an AtomGearbox with random gaps on its input and
    random stalls on its output (rates drawn for the run unless given). Returns the atoms' bytes,
    the beats' bytes, the cycles taken and whether ``i.ready`` ever followed ``o.ready``."""
    dut = AtomGearbox(atom_elements=atom_elements, beat_bytes=beat_bytes)
    rng = np.random.default_rng(seed)
    p_in = rng.choice([0.3, 0.7, 1.0]) if p_in is None else p_in
    p_out = rng.choice([0.3, 0.7, 1.0]) if p_out is None else p_out
    size = atom_elements * (2 if two else 1)
    data = rng.integers(0, 256, (atoms, size), dtype=np.uint8)
    out = {"beats": bytearray(), "cycles": 0, "ready_follows": False}

    async def bench(ctx):
        ctx.set(dut.two, two)
        sent = 0
        while len(out["beats"]) < data.size:
            out["cycles"] += 1
            assert out["cycles"] < 10 * (data.size // beat_bytes + atoms) + 100, \
                "the gearbox stopped"
            word = int.from_bytes(data[sent].tobytes(), "little") if sent < atoms else 0
            ctx.set(dut.i.valid, int(sent < atoms and rng.random() < p_in))
            ctx.set(dut.i.payload, word)
            ctx.set(dut.o.ready, 0)
            await ctx.delay(1e-9)
            ready0 = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, int(rng.random() < p_out))
            await ctx.delay(1e-9)
            out["ready_follows"] |= ctx.get(dut.i.ready) != ready0
            if ctx.get(dut.i.valid) and ctx.get(dut.i.ready):
                sent += 1
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                out["beats"] += ctx.get(dut.o.payload).to_bytes(beat_bytes, "little")
            await ctx.tick()
        assert ctx.get(dut.empty)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return data.tobytes(), bytes(out["beats"]), out["cycles"], out["ready_follows"]


@pytest.mark.parametrize("atom_elements, beat_bytes, two", [
    (64, 8, 0), (64, 8, 1), (32, 16, 1), (64, 64, 0), (64, 64, 1),
    (32, 64, 0), (32, 64, 1),            # half-beat atoms, then one-beat atoms
    (16, 8, 0), (16, 8, 1),              # the ULX3S SoC's: two and four beats an atom
])
@pytest.mark.parametrize("seed", range(3))
def test_gearbox_keeps_the_bytes_in_order(atom_elements, beat_bytes, two, seed):
    """Every byte of every atom leaves in order as beats, under random gaps and stalls (a
    printed seed), and the input's ready never depends on the output's in the same cycle."""
    print(f"seed {seed}")
    sent, got, _, follows = run_gearbox(atom_elements, beat_bytes, two, 24, seed)
    assert got == sent
    assert not follows


@pytest.mark.parametrize("atom_elements, beat_bytes, two", [(32, 8, 1), (64, 64, 0), (32, 64, 0)])
def test_gearbox_flush_drops_what_it_holds(atom_elements, beat_bytes, two):
    """A flush with the slots and the output slice full and a beat of one already sent drops
    them all: the atoms pushed after it come out alone, whole and in order."""
    dut = AtomGearbox(atom_elements=atom_elements, beat_bytes=beat_bytes)
    rng = np.random.default_rng(5)
    size = atom_elements * (2 if two else 1)
    # more old atoms than the slots and the slice hold (at most 8 half-beat atoms)
    old, new = (rng.integers(0, 256, (k, size), dtype=np.uint8) for k in (12, 4))
    got = bytearray()

    async def push(ctx, atoms, o_ready):
        i = 0
        for _ in range(40):
            ctx.set(dut.i.valid, int(i < len(atoms)))
            ctx.set(dut.i.payload, int.from_bytes(atoms[min(i, len(atoms) - 1)].tobytes(),
                                               "little"))
            ctx.set(dut.o.ready, o_ready)
            await ctx.delay(1e-9)
            if ctx.get(dut.i.valid) and ctx.get(dut.i.ready):
                i += 1
            if o_ready and ctx.get(dut.o.valid):
                got.extend(ctx.get(dut.o.payload).to_bytes(beat_bytes, "little"))
            await ctx.tick()
        return i

    async def bench(ctx):
        ctx.set(dut.two, two)
        ctx.set(dut.i.valid, 1)                     # the first atom in
        ctx.set(dut.i.payload, int.from_bytes(old[0].tobytes(), "little"))
        await ctx.tick()
        ctx.set(dut.i.valid, 0)                     # its first beat out (a whole beat)
        ctx.set(dut.o.ready, 1)
        await ctx.tick()
        assert await push(ctx, old[1:], 0) < len(old) - 1  # all fills up; nothing leaves
        assert not ctx.get(dut.i.ready) and ctx.get(dut.o.valid)
        ctx.set(dut.flush, 1)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        await ctx.delay(1e-9)
        assert ctx.get(dut.empty) and ctx.get(dut.i.ready) and not ctx.get(dut.o.valid)
        got.clear()
        assert await push(ctx, new, 1) == len(new)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert bytes(got) == new.tobytes()


@pytest.mark.parametrize("atom_elements, beat_bytes, two, cycles_per_atom", [
    (64, 64, 0, 1), (32, 64, 1, 1), (32, 64, 0, 0.5), (32, 16, 0, 2), (64, 8, 1, 16),
    (16, 8, 0, 2), (16, 8, 1, 4),
])
def test_gearbox_keeps_pace(atom_elements, beat_bytes, two, cycles_per_atom):
    """Free-flowing on both sides, the gearbox takes an atom a cycle while atoms are a beat or
    less, and sends a beat a cycle: 64 atoms in about max(1, beats per atom) x 64 cycles."""
    _, _, cycles, _ = run_gearbox(atom_elements, beat_bytes, two, 64, 0, p_in=1.0, p_out=1.0)
    assert cycles <= max(1, cycles_per_atom) * 64 + 4


@pytest.mark.parametrize("n", [16, 32, 64])
def test_expand_spreads_lanes_over_the_set_bits(n):
    """The decoder's expansion network: the k-th set bit of the mask gets lane k, for all-ones,
    single-bit and random masks and random runs (a segment placed part way into the atom)."""
    from amaranth import Module, Signal

    from atomcube.hw.sparse.expand import expand

    m = Module()
    mask = Signal(n)
    lanes = [Signal(8, name=f"lane{k}") for k in range(n)]
    spread = expand(m, mask, lanes)
    outs = [Signal(8, name=f"out{k}") for k in range(n)]
    m.d.comb += [outs[k].eq(spread[k]) for k in range(n)]
    rng = np.random.default_rng(n)
    masks = [(1 << n) - 1, 1, 1 << (n - 1), 0]
    for _ in range(150):
        bits = int.from_bytes(rng.bytes(n // 8), "little")
        pos, = rng.integers(0, n, 1)
        seg = int(rng.integers(0, n - pos + 1))
        masks += [bits, (bits & ((1 << seg) - 1)) << int(pos)]

    async def bench(ctx):
        for k in range(n):
            ctx.set(lanes[k], k + 1)
        for mk in masks:
            ctx.set(mask, mk)
            want = iter(range(1, n + 1))
            for q in range(n):
                if mk >> q & 1:
                    assert ctx.get(outs[q]) == next(want), (hex(mk), q)

    sim = Simulator(Checked(m))
    sim.add_testbench(bench)
    sim.run()


def test_reader_credit_waits_out_its_look_ahead():
    """Whether a burst is due (its credit) is a register worked out from the burst's length,
    so it waits for the length worked out from the new address. A 16-beat FIFO, nothing
    consumed, a region starting 4 beats before a page end: the first burst takes 4 beats and
    leaves 12 of credit, the next length (16, from the page start) must then wait for ever. A
    reader that judged the credit against the stale length (4) would ask for 16 more."""
    start = 0x11000 - 4 * 8
    bursts = _reader_bursts(StreamReader(streams=1, data_width=64, max_burst=16,
                                         fifo_depth=16), start, 48)
    assert bursts == [(start, 4)]


@pytest.mark.parametrize("depth", [16, 32])       # distributed RAM, and block RAM's register
@pytest.mark.parametrize("seed", range(4))
def test_reader_streams_under_random_stalls(seed, depth):
    """Two streams through one StreamReader, with AR, R and both outputs stalling at random
    (rates drawn for the run, a printed seed) and R answering bursts in order after a random
    delay: every beat of each stream arrives once and in order, every burst keeps to its page
    and follows the one before, the reader never has more beats in flight for a stream than
    its FIFO holds (with the register a block RAM FIFO's beats leave through), and it goes idle
    at the end."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = StreamReader(streams=2, data_width=64, max_burst=16, fifo_depth=depth)
    held = depth + (depth >= RegisteredQueue.PIPE_DEPTH)
    starts = [0x10000 + int(rng.integers(0, 512)) * 8, 0x40000 + int(rng.integers(0, 512)) * 8]
    counts = [int(rng.integers(1, 300)), int(rng.integers(1, 300))]
    p_ar, p_r, p_out = rng.choice([0.3, 1.0]), rng.choice([0.4, 1.0]), rng.choice([0.2, 1.0])
    axi = dut.axi
    got = [[], []]
    issued = [[], []]

    async def bench(ctx):
        for s in range(2):
            ctx.set(dut.addr[s], starts[s])
            ctx.set(dut.beats[s], counts[s])
        ctx.set(dut.load, 0b11)
        await ctx.tick()
        ctx.set(dut.load, 0)
        pending = []                        # [stream, next address, beats left, ready at cycle]
        in_flight = [0, 0]
        for cycle in range(20000):
            ctx.set(axi.arready, int(rng.random() < p_ar))
            head = pending[0] if pending and pending[0][3] <= cycle else None
            ctx.set(axi.rvalid, int(head is not None and rng.random() < p_r))
            if head is not None:
                ctx.set(axi.rid, head[0])
                ctx.set(axi.rdata, head[1])
                ctx.set(axi.rlast, int(head[2] == 1))
            ready = [int(rng.random() < p_out) for _ in range(2)]
            for s in range(2):
                ctx.set(dut.o[s].ready, ready[s])
            await ctx.delay(1e-9)
            if ctx.get(axi.arvalid) and ctx.get(axi.arready):
                s, a, n = ctx.get(axi.arid), ctx.get(axi.araddr), ctx.get(axi.arlen) + 1
                issued[s].append((a, n))
                in_flight[s] += n
                pending.append([s, a, n, cycle + int(rng.integers(1, 20))])
            if ctx.get(axi.rvalid) and ctx.get(axi.rready):
                head[1] += 8
                head[2] -= 1
                if head[2] == 0:
                    pending.pop(0)
            for s in range(2):
                if ctx.get(dut.o[s].valid) and ready[s]:
                    got[s].append(ctx.get(dut.o[s].payload))
                    in_flight[s] -= 1
                assert in_flight[s] <= held, f"stream {s}: {in_flight[s]} beats in flight"
            await ctx.tick()
            if all(len(got[s]) == counts[s] for s in range(2)) and ctx.get(dut.idle):
                break
        assert ctx.get(dut.idle)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for s in range(2):
        assert got[s] == [starts[s] + 8 * k for k in range(counts[s])], f"stream {s}"
        addr = starts[s]
        for a, n in issued[s]:
            assert a == addr and 1 <= n <= 16
            assert (a & 0xFFF) + 8 * n <= 0x1000, f"read burst at {a:#x} of {n} beats"
            addr += 8 * n
        assert addr == starts[s] + 8 * counts[s]


@pytest.mark.parametrize("depth", [16, 32])       # distributed RAM, and block RAM's register
def test_reader_flush_restores_the_credit_exactly(depth):
    """A flush in the cycle a beat leaves (the FIFO full, nothing in flight): the credit comes
    back whole, and the beat's own return (a cycle late, from a register) is not added on top.
    With the consumer then stalled for good, the next job has no more beats in flight than
    the FIFO (and block RAM's output register) holds."""
    # short bursts, so that a spare beat of credit would let the job's last beat go too
    dut = StreamReader(streams=1, data_width=64, max_burst=4, fifo_depth=depth)
    held = depth + (depth >= RegisteredQueue.PIPE_DEPTH)
    axi = dut.axi
    counts = {"in": 0, "out": 0}

    async def run(ctx, cycles, o_ready, pending):
        for _ in range(cycles):
            ctx.set(axi.arready, 1)
            ctx.set(axi.rvalid, int(bool(pending)))
            if pending:
                ctx.set(axi.rlast, int(pending[0][1] == 1))
            ctx.set(dut.o[0].ready, o_ready)
            await ctx.delay(1e-9)
            if ctx.get(axi.arvalid):
                pending.append([ctx.get(axi.araddr), ctx.get(axi.arlen) + 1])
            if pending and ctx.get(axi.rready):
                counts["in"] += 1
                pending[0][1] -= 1
                if pending[0][1] == 0:
                    pending.pop(0)
            if o_ready and ctx.get(dut.o[0].valid):
                counts["out"] += 1
            await ctx.tick()

    async def load(ctx, beats):
        ctx.set(dut.addr[0], 0x10000)
        ctx.set(dut.beats[0], beats)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)

    async def bench(ctx):
        pending = []
        await load(ctx, 200)
        await run(ctx, 100, 0, pending)             # the FIFO fills; nothing leaves
        first = counts["in"]
        assert depth <= first <= held and not pending
        ctx.set(dut.flush, 1)                       # the flush, with a beat leaving
        ctx.set(dut.o[0].ready, 1)
        await ctx.delay(1e-9)
        assert ctx.get(dut.o[0].valid)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        counts["in"] = 0
        await load(ctx, held + 1)                   # one beat more than the credit allows
        await run(ctx, 100, 0, pending)
        assert first <= counts["in"] <= held, f"{counts['in']} beats in flight after the flush"

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("seed", [7, 8, 9, 10])
def test_beat_reader_under_random_stalls(seed):
    """BeatReader (the UP5K's LUT port): AR, R and the output stall at random and R answers
    after a random delay, one response in four an error on some seeds: every beat arrives once
    and in order, from single-beat reads at consecutive addresses, never two in flight; the
    error flag is set exactly when a read was answered in error, and `flush` clears it."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = BeatReader(data_width=32)
    axi = dut.axi
    start, count = 0x2000 + 4 * int(rng.integers(0, 256)), int(rng.integers(1, 60))
    p_ar, p_r, p_out = rng.choice([0.3, 1.0]), rng.choice([0.4, 1.0]), rng.choice([0.3, 1.0])
    p_err = 0.25 if seed % 2 else 0.0
    got, issued, errors = [], [], []

    async def bench(ctx):
        ctx.set(dut.addr[0], start)
        ctx.set(dut.beats[0], count)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)
        pending = []                              # [address, ready at cycle]
        for cycle in range(5000):
            ctx.set(axi.arready, int(rng.random() < p_ar))
            head = pending[0] if pending and pending[0][1] <= cycle else None
            ctx.set(axi.rvalid, int(head is not None and rng.random() < p_r))
            bad = rng.random() < p_err
            if head is not None:
                ctx.set(axi.rdata, head[0])
                ctx.set(axi.rresp, 2 if bad else 0)
                ctx.set(axi.rlast, 1)
            ready = int(rng.random() < p_out)
            ctx.set(dut.o[0].ready, ready)
            await ctx.delay(1e-9)
            if ctx.get(axi.arvalid) and ctx.get(axi.arready):
                assert not pending, "a second read in flight"
                assert ctx.get(axi.arlen) == 0
                issued.append(ctx.get(axi.araddr))
                pending.append([ctx.get(axi.araddr), cycle + int(rng.integers(1, 8))])
            if ctx.get(axi.rvalid) and ctx.get(axi.rready):
                errors.append(bad)
                pending.pop(0)
            if ctx.get(dut.o[0].valid) and ready:
                got.append(ctx.get(dut.o[0].payload))
            await ctx.tick()
            if len(got) == count and ctx.get(dut.idle):
                break
        assert ctx.get(dut.idle)
        assert ctx.get(dut.error) == any(errors)
        ctx.set(dut.flush, 1)
        await ctx.tick()
        ctx.set(dut.flush, 0)
        assert ctx.get(dut.error) == 0

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [start + 4 * k for k in range(count)]
    assert got == want and issued == want


@pytest.mark.parametrize("seed", [7, 8, 9, 10])
def test_beat_writer_under_random_stalls(seed):
    """BeatWriter: beats offered with random gaps, AW, W and B each stalling at random (W may
    be taken before AW), one response in four an error on some seeds: every beat is written
    once, in order, at consecutive addresses, one write at a time; `done` waits for the last
    response; the error flag is set exactly when a write was answered in error."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = BeatWriter(data_width=32)
    axi = dut.axi
    start, count = 0x3000 + 4 * int(rng.integers(0, 256)), int(rng.integers(1, 60))
    data = [int(v) for v in rng.integers(0, 1 << 32, count, dtype=np.uint64)]
    p_in, p_aw, p_w, p_b = (rng.choice([0.3, 1.0]) for _ in range(4))
    p_err = 0.25 if seed % 2 else 0.0
    writes, errors = [], []

    async def bench(ctx):
        ctx.set(dut.addr, start)
        ctx.set(dut.load, 1)
        await ctx.tick()
        ctx.set(dut.load, 0)
        sent, aw, w, owed = 0, None, None, False
        for _ in range(5000):
            offer = sent < count and rng.random() < p_in
            ctx.set(dut.i.valid, int(offer))
            ctx.set(dut.i.payload, data[sent] if sent < count else 0)
            ctx.set(dut.finish, int(sent == count))
            ctx.set(axi.awready, int(rng.random() < p_aw))
            ctx.set(axi.wready, int(rng.random() < p_w))
            answer = owed and aw is not None and w is not None and rng.random() < p_b
            bad = rng.random() < p_err
            ctx.set(axi.bvalid, int(answer))
            ctx.set(axi.bresp, 2 if bad else 0)
            await ctx.delay(1e-9)
            assert not ctx.get(dut.done) or (sent == count and not owed)
            if offer and ctx.get(dut.i.ready):
                sent += 1
            if ctx.get(axi.awvalid) and ctx.get(axi.awready):
                assert aw is None and ctx.get(axi.awlen) == 0
                aw, owed = ctx.get(axi.awaddr), True
            if ctx.get(axi.wvalid) and ctx.get(axi.wready):
                assert w is None and ctx.get(axi.wlast) == 1
                w = ctx.get(axi.wdata)
            if answer:
                writes.append((aw, w))
                errors.append(bad)
                aw, w, owed = None, None, False
            await ctx.tick()
            if sent == count and len(writes) == count and ctx.get(dut.done):
                break
        assert ctx.get(dut.done) and ctx.get(dut.error) == any(errors)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert writes == [(start + 4 * k, data[k]) for k in range(count)]


async def _buffer_cycle(ctx, dut, held, counts, *, en, take, word, in_units, capacity):
    """The end of a buffer test's cycle, its inputs set: ``i.ready`` against the room in the
    model (``held``, the units held), then the model updated as the buffer should be (a flush
    empties it; else ``take`` units leave if enabled and ``word`` enters if accepted)."""
    await ctx.delay(1e-9)
    accept = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
    assert ctx.get(dut.i.ready) == (len(held) + in_units <= capacity)
    if ctx.get(dut.flush):
        held.clear()
    else:
        if en:
            del held[:take]
            counts["taken"] += take
        if accept:
            held.extend(word)
            counts["in"] += len(word)
    await ctx.tick()
    ctx.set(dut.flush, 0)


def run_shiftbuf(unit, in_units, capacity, seed, *, cycles=600):
    """Random words in (random partial counts and gaps) and random takes out of a ShiftBuffer,
    with ``take`` driven every cycle and only sometimes enabled; each cycle its ``data`` and
    ``level`` are compared with a Python list of units."""
    dut = ShiftBuffer(unit=unit, in_units=in_units, capacity=capacity)
    rng = np.random.default_rng(seed)
    mask = (1 << unit) - 1
    held = []                                   # the units held, oldest first
    counts = {"taken": 0, "in": 0}

    async def bench(ctx):
        for cycle in range(cycles):
            assert ctx.get(dut.level) == len(held), f"cycle {cycle}: level"
            want = sum(u << (unit * k) for k, u in enumerate(held))
            assert ctx.get(dut.data) == want, f"cycle {cycle}: data"
            if cycle == cycles // 2:            # a flush mid-run, with a word offered
                ctx.set(dut.flush, 1)
            n = int(rng.integers(0, in_units + 1))
            units = [int(u) for u in rng.integers(0, mask + 1, in_units)]
            ctx.set(dut.i.valid, int(rng.random() < 0.6))
            ctx.set(dut.i_count, n)
            ctx.set(dut.i.payload, sum(u << (unit * k) for k, u in enumerate(units)))
            take = int(rng.integers(0, len(held) + 1))
            ctx.set(dut.take, take if rng.random() < 0.8 else capacity)   # ignored unless enabled
            en = rng.random() < 0.5
            if en:
                ctx.set(dut.take, take)
            ctx.set(dut.take_en, int(en))
            await _buffer_cycle(ctx, dut, held, counts, en=en, take=take, word=units[:n],
                                in_units=in_units, capacity=capacity)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts


@pytest.mark.parametrize("unit, in_units, capacity", [(1, 16, 40), (8, 8, 24), (32, 2, 4)])
@pytest.mark.parametrize("seed", range(3))
def test_shift_buffer_keeps_the_units_in_order(unit, in_units, capacity, seed):
    """The mask, byte and WGS buffers' shapes (small): the units held are always the ones put in
    less the ones taken, in order, whether or not a take is enabled in the cycle a word enters."""
    print(f"seed {seed}")
    counts = run_shiftbuf(unit, in_units, capacity, seed)
    assert counts["taken"] > 100 and counts["in"] > 100


class _RingView(wiring.Component):
    """A RingBuffer with its late stages (``late_bits``) run straight on its outputs, so that
    ``view`` is what a consumer sees once it has finished the rotation."""

    def __init__(self, **params):
        self.ring = RingBuffer(**params)
        sig = {name: member for name, member in self.ring.signature.members.items()
               if name not in ("data", "offset")}
        super().__init__({**sig, "view": Out(params["unit"] * params["out_units"])})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ring = r = self.ring
        for name in self.signature.members:
            if name == "view":
                continue
            port, inner = getattr(self, name), getattr(r, name)
            member = self.signature.members[name]
            if member.is_signature:              # the input stream
                wiring.connect(m, wiring.flipped(port), inner)
            elif member.flow == In:
                m.d.comb += inner.eq(port)
            else:
                m.d.comb += port.eq(inner)
        if r.late_bits:
            m.d.comb += self.view.eq(r.finish(m, r.data, r.offset))
        else:
            m.d.comb += self.view.eq(r.data)
        return m


def run_ringbuf(unit, in_units, words, out_units, seed, *, late_bits=0, take_ahead=False,
                cycles=600):
    """Random whole words in (with gaps) and random takes out of a RingBuffer, ``take`` driven
    every cycle (with ``take_ahead``, as ``take_next`` a cycle before) and only sometimes
    enabled; each cycle its ``level``, ``deep``, ``enough`` and the units of the view (the
    rotation finished, with ``late_bits``) below the level are compared with a Python list of
    units."""
    dut = _RingView(unit=unit, in_units=in_units, words=words, out_units=out_units,
                    late_bits=late_bits, take_ahead=take_ahead)
    rng = np.random.default_rng(seed)
    mask = (1 << unit) - 1
    held = []                                   # the units held, oldest first
    counts = {"taken": 0, "in": 0, "wrapped": 0}
    ahead = 0                                   # take_next, set the cycle before

    async def bench(ctx):
        nonlocal ahead
        for cycle in range(cycles):
            assert ctx.get(dut.level) == len(held), f"cycle {cycle}: level"
            assert ctx.get(dut.deep) == (len(held) >= out_units), f"cycle {cycle}: deep"
            seen = min(len(held), out_units)
            got = ctx.get(dut.view) & ((1 << (unit * seen)) - 1)
            assert got == sum(u << (unit * k) for k, u in enumerate(held[:seen])), \
                f"cycle {cycle}: data"
            if cycle == cycles // 2:            # a flush mid-run, with a word offered
                ctx.set(dut.flush, 1)
            units = [int(u) for u in rng.integers(0, mask + 1, in_units)]
            ctx.set(dut.i.valid, int(rng.random() < 0.6))
            ctx.set(dut.i.payload, sum(u << (unit * k) for k, u in enumerate(units)))
            if take_ahead:
                # the take is what the bench gave a cycle before, anything up to out_units;
                # a take is enabled only when it is held, and the next one is picked at random
                # (often one that is held, so that takes are many)
                take = ahead
                assert ctx.get(dut.take) == take, f"cycle {cycle}: take"
                en = take <= len(held) and rng.random() < 0.6
                ahead = int(rng.integers(0, out_units + 1) if rng.random() < 0.3 else
                            rng.integers(0, min(len(held), out_units) + 1))
                ctx.set(dut.take_next, ahead)
            else:
                take = int(rng.integers(0, min(len(held), out_units) + 1))
                en = rng.random() < 0.5
                ctx.set(dut.take, take if en or rng.random() < 0.5 else out_units)
            ctx.set(dut.take_en, int(en))
            await ctx.delay(1e-9)
            assert ctx.get(dut.enough) == (len(held) >= ctx.get(dut.take)), \
                f"cycle {cycle}: enough"
            await _buffer_cycle(ctx, dut, held, counts, en=en, take=take, word=units,
                                in_units=in_units, capacity=in_units * words)
        counts["wrapped"] = counts["in"] // (in_units * words)

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts


@pytest.mark.parametrize("unit, in_units, words, out_units, late_bits, take_ahead",
                         [(1, 16, 3, 8, 0, False), (1, 16, 3, 48, 0, False),
                          (8, 4, 10, 16, 0, False), (8, 8, 3, 20, 0, False),
                          (8, 4, 10, 16, 3, True), (8, 8, 3, 20, 1, True),
                          (8, 8, 3, 8, 0, True), (1, 16, 3, 16, 0, False)])
@pytest.mark.parametrize("seed", range(3))
def test_ring_buffer_keeps_the_units_in_order(unit, in_units, words, out_units, late_bits,
                                              take_ahead, seed):
    """The mask and byte buffers' shapes (small, a capacity that is not a power of two; the
    byte buffer's with its last stages left to the consumer and its take given a cycle ahead;
    out_units equal to a word's units, where a test's bound is the level itself): the units
    the consumer sees are always the oldest ones held, in order, round the ring many times,
    whether or not a take is enabled in the cycle a word enters."""
    print(f"seed {seed}")
    counts = run_ringbuf(unit, in_units, words, out_units, seed, late_bits=late_bits,
                         take_ahead=take_ahead)
    assert counts["taken"] > 100 and counts["wrapped"] > 5


def test_ring_buffer_refuses_impossible_shapes():
    with pytest.raises(ValueError, match="words must be at least 2"):
        RingBuffer(unit=1, in_units=8, words=1, out_units=4)
    with pytest.raises(ValueError, match=r"out_units must be 1 to the capacity \(24 units\)"):
        RingBuffer(unit=1, in_units=8, words=3, out_units=25)
    with pytest.raises(ValueError, match="late_bits must be 0 to 4 .* not 5"):
        RingBuffer(unit=1, in_units=8, words=3, out_units=8, late_bits=5)
