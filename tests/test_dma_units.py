"""The DMA's gateware components at the Amaranth level (amaranth.sim), each against the model's
descriptor semantics; the whole engine is checked by the cocotb bench."""

import math
from dataclasses import replace

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from atomcube.hw.dma.backend import BackEnd
from atomcube.hw.dma.convert import ElementConverter
from atomcube.hw.dma.elements import ElementPath
from atomcube.hw.dma.frontend import FrontEnd
from atomcube.hw.dma.midend import one_bit_set
from atomcube.hw.dma.rows import RowCopier
from atomcube.hw.dma.tile import TileTransposer
from atomcube.hw.dma.timing import DmaTiming
from atomcube.hw.dma.walker import Walker
from atomcube.hw.fabric import Checked
from atomcube.model.dma.descriptor import (
    CONVERSIONS,
    DESCRIPTOR_BYTES,
    FIELDS,
    MAX_DIMS,
    TYPES,
    Conversion,
    Descriptor,
    Dim,
    Error,
    Program,
)
from atomcube.model.dma.executor import execute
from atomcube.model.registers.dma import DMA, program, program_chain
from atomcube.sim.amaranth_axil import axil_read, axil_write


def simulate(dut, bench, *background):
    """Run the testbench ``bench`` against ``dut`` on a 100 MHz clock until it returns, with
    the testbenches ``background`` beside it."""
    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    for other in background:
        sim.add_testbench(other, background=True)
    sim.run()


def walk_model(extents, valids, ss, ds, sb, db):
    """Every step of the nested loops, level 0 innermost: (src, dst, has_src, first, last)."""
    steps = []
    total = int(np.prod(extents))
    for flat, idx in enumerate(np.ndindex(*extents[::-1])):
        idx = idx[::-1]
        src = (sb + sum(i * s for i, s in zip(idx, ss, strict=True))) % (1 << 32)
        dst = (db + sum(i * s for i, s in zip(idx, ds, strict=True))) % (1 << 32)
        ok = all(i < v for i, v in zip(idx, valids, strict=True))
        steps.append((src, dst, int(ok), int(flat == 0), int(flat == total - 1)))
    return steps


def run_walker(levels, extents, valids, ss, ds, sb, db, seed, walks=2, scramble=False,
               ready_ahead=False):
    """The walks' steps. ``scramble``: before each walk, other configurations for a few idle
    cycles, and the walk's own set only in the cycle of ``start`` (the latest the walker's
    contract allows). ``ready_ahead``: the walker built so, each cycle's ready drawn a cycle
    before it and given to ``ready_next`` then."""
    dut = Walker(levels=levels, ready_ahead=ready_ahead)
    rng = np.random.default_rng(seed)
    got = []

    def configure(ctx, extents, valids, ss, ds, sb, db):
        for k in range(levels):
            ctx.set(dut.extent[k], extents[k])
            ctx.set(dut.valid[k], valids[k])
            ctx.set(dut.src_stride[k], ss[k])
            ctx.set(dut.dst_stride[k], ds[k])
        ctx.set(dut.src_base, sb)
        ctx.set(dut.dst_base, db)

    async def bench(ctx):
        for _ in range(walks):
            if scramble:
                for _ in range(3):
                    e = [int(v) for v in rng.integers(1, 9, levels)]
                    configure(ctx, e, [int(rng.integers(0, v + 1)) for v in e],
                              *(rng.integers(0, 1 << 20, (2, levels)).tolist()),
                              *(int(v) for v in rng.integers(0, 1 << 32, 2)))
                    await ctx.tick()
            configure(ctx, extents, valids, ss, ds, sb, db)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            steps = []
            ready_next = int(rng.random() < 0.7)
            while True:
                if ready_ahead:
                    ready, ready_next = ready_next, int(rng.random() < 0.7)
                    ctx.set(dut.ready_next, ready_next)
                else:
                    ready = int(rng.random() < 0.7)      # random backpressure
                ctx.set(dut.o.ready, ready)
                await ctx.delay(1e-9)
                if ready and ctx.get(dut.o.valid):
                    p = ctx.get(dut.o.payload)
                    steps.append((p.src, p.dst, p.has_src, p.first, p.last))
                    await ctx.tick()
                    if p.last:
                        break
                else:
                    await ctx.tick()
                assert len(steps) <= np.prod(extents)
            ctx.set(dut.o.ready, 0)
            if ready_ahead:
                ctx.set(dut.ready_next, 0)
            await ctx.tick()
            assert not ctx.get(dut.busy)
            got.append(steps)

    simulate(dut, bench)
    return got


@pytest.mark.parametrize("ready_ahead", [False, True], ids=["ready", "ready_ahead"])
@pytest.mark.parametrize("seed", range(6))
def test_walker_matches_the_nested_loops(seed, ready_ahead):
    rng = np.random.default_rng(seed)
    levels = int(rng.integers(1, 6))
    extents = [int(v) for v in rng.integers(1, 5, levels)]
    valids = [int(rng.integers(0, e + 1)) for e in extents]
    ss = [int(v) for v in rng.integers(0, 1 << 20, levels)]
    ds = [int(v) for v in rng.integers(0, 1 << 20, levels)]
    sb, db = int(rng.integers(0, 1 << 32)), int(rng.integers(0, 1 << 32))   # addresses wrap
    want = walk_model(extents, valids, ss, ds, sb, db)
    for scramble in (False, True):
        for steps in run_walker(levels, extents, valids, ss, ds, sb, db, seed,
                                scramble=scramble, ready_ahead=ready_ahead):
            assert steps == want


def test_walker_single_step_and_stop():
    assert run_walker(1, [1], [0], [4], [8], 100, 200, 0) == [[(100, 200, 0, 1, 1)]] * 2
    dut = Walker(levels=2)

    async def bench(ctx):
        ctx.set(dut.extent[0], 3)
        ctx.set(dut.extent[1], 3)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(2)
        assert ctx.get(dut.busy)
        ctx.set(dut.stop, 1)
        await ctx.tick()
        ctx.set(dut.stop, 0)
        assert not ctx.get(dut.busy) and not ctx.get(dut.o.valid)

    simulate(dut, bench)


@pytest.mark.parametrize("width", [1, 5, 10, 32])
def test_one_bit_set_is_a_power_of_two_test(width):
    """The mid end's carry-free power-of-two test against ``v & (v - 1)``: every value of the
    narrow widths, and at 32 bits each single bit, each pair and random values."""
    v = Signal(width)
    m = Module()
    out = Signal()
    m.d.comb += out.eq(one_bit_set(v))
    rng = np.random.default_rng(width)
    if width <= 10:
        values = range(1 << width)
    else:
        values = ([0, (1 << width) - 1] + [1 << i for i in range(width)] +
                  [(1 << i) | (1 << j) for i in range(width) for j in range(i)] +
                  [int(x) for x in rng.integers(0, 1 << width, 500, dtype=np.uint64)])
    bad = []

    async def bench(ctx):
        for x in values:
            ctx.set(v, x)
            if ctx.get(out) != (x != 0 and x & (x - 1) == 0):
                bad.append(x)

    sim = Simulator(Checked(m))
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"wrong for {bad[:5]}"



def test_walker_levels_rejected(rejected):
    with rejected(ValueError, "levels must be 1 to 5"):
        Walker(levels=6)


# -- the transpose tile buffer ------------------------------------------------------------------

def random_transpose(rng, bb):
    """A descriptor (as the transposer's four dims: rows, columns, two others) that is a
    transpose: rows contiguous in the destination, columns in the source; gaps, pad rows,
    unaligned bases and partial tiles on both edges."""
    elog = int(rng.integers(0, min((bb // 2).bit_length(), 4)))   # narrower than a beat
    eb = 1 << elog
    e0, e1 = int(rng.integers(1, 3 * bb // eb + 2)), int(rng.integers(1, 40))
    e2, e3 = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    v0, v2, v3 = int(rng.integers(0, e0 + 1)), int(rng.integers(1, e2 + 1)), e3
    if rng.random() < 0.3:
        v2 = 0                                                   # whole tiles of pad
    s0 = eb * (e1 + int(rng.integers(0, 5)))
    s2 = s0 * e0 + eb * int(rng.integers(0, 9))
    s3 = s2 * e2 + eb * int(rng.integers(0, 9))
    d1 = eb * (e0 + int(rng.integers(0, 5)))
    d2 = d1 * e1 + eb * int(rng.integers(0, 9))
    d3 = d2 * e2 + eb * int(rng.integers(0, 9))
    src = eb * int(rng.integers(0, 64))
    dst = 0x8000 + eb * int(rng.integers(0, 64))
    dims = [Dim(e0, s0, eb, v0), Dim(e1, eb, d1, e1), Dim(e2, s2, d2, v2), Dim(e3, s3, d3, v3)]
    return Descriptor(src, dst, eb, tuple(dims), pad=int(rng.integers(0, 1 << 64, dtype=np.uint64)))


def transpose_row_steps(desc, bb, tile_beats, rows_per_step=None):
    """The row steps (``row_step``) a transpose takes with nothing wasted: each row of each row
    tile (L rows, the elements in a beat) once for each column tile (``tile_beats`` beats
    of columns) and outer index; with ``rows_per_step`` (packed rows: that many rows a beat,
    one column tile) a row tile's rows take ceil(rows / rows_per_step) steps."""
    d = desc.dims
    L = bb // desc.element_bytes
    outer = math.prod(x.extent for x in d[2:])
    if rows_per_step is None:
        return d[0].extent * -(-d[1].extent // (tile_beats * L)) * outer
    tiles = [min(L, d[0].extent - k) for k in range(0, d[0].extent, L)]
    return sum(-(-n // rows_per_step) for n in tiles) * outer


def check_against_executor(desc, memory, got, counts):
    """``got`` (memory after the unit ran ``desc``, or a list of descriptors in order) equals
    the executor's result on ``memory``, byte for byte, and the unit counted their bytes."""
    descs = desc if isinstance(desc, list) else [desc]
    want = memory.copy()
    execute(descs, want)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{bad.size} bytes differ, first at 0x{bad[0]:x}"
    assert counts["read"] == sum(d.src_bytes for d in descs)
    assert counts["written"] == sum(d.dst_bytes for d in descs)


def run_transposer(desc, bb, tile_beats, seed, memory, timing=DmaTiming()):
    dut = TileTransposer(data_width=8 * bb, addr_width=16, tile_beats=tile_beats, row_queue=8,
                         timing=timing)
    return run_mover(dut, desc, bb, seed, memory)


def run_mover(dut, desc, bb, seed, memory, slots=None, **flags):
    """Run one descriptor through a transposer or row copier with a memory that answers reads
    after a random delay, and random backpressure on every stream; returns the memory
    afterwards and what was counted: beats read, the bytes the unit reported. ``slots``: the
    descriptor's dimension for each of the unit's (default: in order); ``flags``: other
    configuration inputs."""
    return run_jobs(dut, [(desc, slots, flags)], bb, seed, memory)


def run_jobs(dut, jobs, bb, seed, memory, write_ready=0.8):
    """Run ``jobs`` (descriptor, slots, flags: as :func:`run_mover` takes them) through one
    unit, each started as soon as the unit allows: with ``walk_free`` (the transposer) while
    the one before it still moves data, else once it is done. ``write_ready``: how often the
    pieces' ready is high. The counts are summed over the jobs; ``overlapped`` counts the jobs
    started while the one before was busy."""
    rng = np.random.default_rng(seed)
    mem = memory.copy()
    out = {"beats": 0, "read": 0, "written": 0, "row_steps": 0, "overlapped": 0}
    free = getattr(dut, "walk_free", None)

    def configure(ctx, desc, slots, flags):
        ctx.set(dut.src, desc.src)
        ctx.set(dut.dst, desc.dst)
        ctx.set(dut.elog, desc.element_bytes.bit_length() - 1)
        ctx.set(dut.pad, desc.pad)
        for name, value in flags.items():
            ctx.set(getattr(dut, name), value)
        for k in range(len(dut.ext)):
            d = (slots or desc.dims)[k] if k < len(slots or desc.dims) else None
            d = d or Dim(1, 0, 0)
            ctx.set(dut.ext[k], d.extent)
            ctx.set(dut.val[k], d.valid)
            ctx.set(dut.sst[k], d.src_stride)
            ctx.set(dut.dstr[k], d.dst_stride)

    async def bench(ctx):
        configure(ctx, *jobs[0])
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        started, lasts = 1, 0
        pending = []                                             # [cycle due, beat address]
        cycle = 0
        while lasts < len(jobs) or ctx.get(dut.busy):
            cycle += 1
            assert cycle < 20000 * len(jobs), "the unit hangs"
            # the next job, as soon as the unit may take it (a cycle of start, then its
            # inputs held until it is free again)
            ctx.set(dut.start, 0)
            if started < len(jobs):
                busy = ctx.get(dut.busy)
                if ctx.get(free) if free is not None else not busy:
                    configure(ctx, *jobs[started])
                    ctx.set(dut.start, 1)
                    out["overlapped"] += busy
                    started += 1
            ctx.set(dut.req.ready, int(rng.random() < 0.8))
            ctx.set(dut.wr.ready, int(rng.random() < write_ready))
            ready = pending and pending[0][0] <= cycle and rng.random() < 0.8
            ctx.set(dut.rdata.valid, int(bool(ready)))
            if ready:
                a = pending[0][1]
                ctx.set(dut.rdata.payload, int.from_bytes(mem[a:a + bb].tobytes(), "little"))
            await ctx.delay(1e-9)
            if ctx.get(dut.req.valid) and ctx.get(dut.req.ready):
                run = ctx.get(dut.req.payload)          # a run of beats: its first, how many
                assert run.n >= 1
                at = cycle + int(rng.integers(1, 8))
                for i in range(run.n):
                    pending.append([at + i, (run.beat + i) * bb])
                out["beats"] += run.n
            if ready and ctx.get(dut.rdata.ready):
                pending.pop(0)
            if ctx.get(dut.wr.valid) and ctx.get(dut.wr.ready):
                p = ctx.get(dut.wr.payload)
                assert p.addr % bb == 0 and p.strb != 0
                raw = p.data.to_bytes(bb, "little")
                for i in range(bb):
                    if p.strb >> i & 1:
                        mem[p.addr + i] = raw[i]
                assert lasts < started, "a piece after the last job's last"
                lasts += bool(p.last)
            out["read"] += ctx.get(dut.read_bytes)
            out["written"] += ctx.get(dut.written_bytes)
            if hasattr(dut, "row_step"):
                out["row_steps"] += ctx.get(dut.row_step)
            await ctx.tick()
        assert not pending

    simulate(dut, bench)
    return mem, out


@pytest.mark.parametrize("bb,tile_beats,seed", [(8, 2, 0), (8, 4, 1), (8, 1, 2), (16, 2, 3),
                                                (32, 1, 4), (32, 2, 5), (8, 2, 6), (16, 1, 7)])
def test_transposer_matches_the_executor(bb, tile_beats, seed):
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    for _ in range(3):
        desc = random_transpose(rng, bb)
        print(desc)
        got, counts = run_transposer(desc, bb, tile_beats, seed, memory)
        check_against_executor(desc, memory, got, counts)
        assert counts["row_steps"] == transpose_row_steps(desc, bb, tile_beats)


def _meets(a, b):
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("bb,tile_beats,seed", [(8, 2, 20), (16, 1, 21), (32, 2, 22)])
def test_transposer_runs_jobs_back_to_back(bb, tile_beats, seed):
    """Six transposes, each started as soon as ``walk_free`` allows, while the one before
    still fills and drains: the memory afterwards is the executor's for the six in order,
    and at least one job starts before the one before it is done. (No job reads what an
    earlier one writes, or writes what an earlier one reads: the unit does not order them.)"""
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    jobs = []
    while len(jobs) < 6:
        desc = random_transpose(rng, bb)
        src, dst = desc.src_range(), desc.dst_range()
        if dst[1] > 1 << 16 or any(_meets(src, d.dst_range()) or _meets(dst, d.src_range())
                                   for d, _, _ in jobs):
            continue
        jobs.append((desc, None, {}))
    for desc, _, _ in jobs:
        print(desc)
    dut = TileTransposer(data_width=8 * bb, addr_width=16, tile_beats=tile_beats, row_queue=8)
    # (writes slower than reads: a job's walk may end before the one before it has drained,
    # while the drain still holds that job's configuration)
    got, counts = run_jobs(dut, jobs, bb, seed, memory, write_ready=0.3)
    check_against_executor([desc for desc, _, _ in jobs], memory, got, counts)
    assert counts["overlapped"] >= 1


@pytest.mark.parametrize("tile_beats", [1, 2])
def test_transposer_pad_row_tiles_after_the_valid_rows(tile_beats):
    """Rows past dimension 0's valid are pad, and so is every row tile after the one they end
    in: the rows with a source left go below zero there (the clip's sign), for valids from 0
    to past two tiles, over three to five row tiles, the last of one row or several (the
    tiles' tests are worked out two steps ahead)."""
    bb, eb, e1 = 8, 1, 5
    L = bb // eb
    memory = np.random.default_rng(9).integers(0, 256, 1 << 16, dtype=np.uint8)
    for e0, v0 in [(4 * L + 3, v) for v in (0, 1, L - 1, L, L + 1, 2 * L + 1)] + [
            (2 * L + 1, 2 * L + 1), (2 * L + 1, L), (3 * L + 1, 3 * L + 1)]:
        desc = Descriptor(3, 0x8000, eb, (Dim(e0, eb * e1, eb, v0), Dim(e1, eb, eb * e0)),
                          pad=0x0123456789ABCDEF)
        print(desc)
        got, counts = run_transposer(desc, bb, tile_beats, v0, memory)
        check_against_executor(desc, memory, got, counts)
        assert counts["row_steps"] == transpose_row_steps(desc, bb, tile_beats)


@pytest.mark.parametrize("tile_beats", [1, 2])
def test_transposer_takes_a_step_per_row(tile_beats):
    """The walk takes each row of a row tile once per column tile and no step more, also when
    a row tile holds a single row (its one-step test, which no port's data shows: an extra
    step has no rows), over one column tile and several."""
    bb, eb = 8, 1
    L = bb // eb
    memory = np.random.default_rng(11).integers(0, 256, 1 << 16, dtype=np.uint8)
    for e0 in (1, 2, L - 1, L, L + 1, L + 2, 2 * L + 1, 3 * L + 1):
        for e1 in (3, 2 * tile_beats * L + 1):
            desc = Descriptor(0, 0x8000, eb, (Dim(e0, eb * e1, eb), Dim(e1, eb, eb * e0)))
            got, counts = run_transposer(desc, bb, tile_beats, e0, memory)
            check_against_executor(desc, memory, got, counts)
            want = transpose_row_steps(desc, bb, tile_beats)
            assert counts["row_steps"] == want, (
                f"{e0} rows, {e1} columns: {counts['row_steps']} row steps, not {want}")


def random_grouped(rng, bb, tile_beats):
    """A transpose whose rows (dimension 0, a power of two under a beat, and the next
    destination dimension) or columns (the source-contiguous dimension, a power of two, and
    the next source dimension), or both, are grouped. Returns the descriptor, the
    transposer's slots and its flags."""
    elog = int(rng.integers(0, min((bb // 2).bit_length(), 4)))
    eb = 1 << elog
    L = bb // eb
    g_rows, g_cols = bool(rng.random() < 0.7), bool(rng.random() < 0.7)
    if not (g_rows or g_cols):
        g_rows = True
    r0 = 1 << int(rng.integers(0, L.bit_length() - 1)) if g_rows else int(rng.integers(1, 2 * L))
    r1 = int(rng.integers(1, 9)) if g_rows else 1
    c0 = (1 << int(rng.integers(0, (tile_beats * L).bit_length() - 1)) if g_cols
          else int(rng.integers(2, 40)))
    c1 = int(rng.integers(1, 6)) if g_cols else 1
    o = int(rng.integers(1, 3))
    # source: columns innermost (contiguous), then the rows' dimensions, then the outer one
    s_c1 = eb * c0
    s_r0 = eb * c0 * c1 + eb * int(rng.integers(0, 3))
    s_r1 = s_r0 * r0 + eb * int(rng.integers(0, 5))
    s_o = s_r1 * r1 + eb * int(rng.integers(0, 5))
    # destination: rows innermost (contiguous), then the columns' dimensions, then the outer
    d_r1 = eb * r0
    d_c0 = d_r1 * r1 + eb * int(rng.integers(0, 3))
    d_c1 = d_c0 * c0 + eb * int(rng.integers(0, 3))
    if g_cols and rng.random() < 0.5:                 # the columns' second dimension first
        d_c1 = d_r1 * r1 + eb * int(rng.integers(0, 3))
        d_c0 = d_c1 * c1 + eb * int(rng.integers(0, 3))
    d_o = max(d_c0 * c0, d_c1 * c1) + eb * int(rng.integers(0, 5))
    v_r0 = r0 if rng.random() < 0.6 else int(rng.integers(0, r0 + 1))
    v_r1 = r1 if rng.random() < 0.6 else int(rng.integers(0, r1 + 1))
    dims = {"r0": Dim(r0, s_r0, eb, v_r0), "r1": Dim(r1, s_r1, d_r1, v_r1),
            "c0": Dim(c0, eb, d_c0), "c1": Dim(c1, s_c1, d_c1), "o": Dim(o, s_o, d_o)}
    used = ["r0", "c0", "o"] + (["r1"] if g_rows else []) + (["c1"] if g_cols else [])
    order = sorted(used, key=lambda n: dims[n].dst_stride)
    desc = Descriptor(eb * int(rng.integers(0, 64)), 0x8000 + eb * int(rng.integers(0, 64)), eb,
                      tuple(dims[n] for n in order),
                      pad=int(rng.integers(0, 1 << 64, dtype=np.uint64)))
    slots = [dims["r0"], dims["c0"], dims["o"], None, dims["r1"] if g_rows else None,
             dims["c1"] if g_cols else None]
    return desc, slots, {"group_rows": int(g_rows), "group_cols": int(g_cols)}


@pytest.mark.parametrize("bb,tile_beats,seed", [(8, 2, 0), (16, 1, 1), (32, 1, 2), (32, 2, 3),
                                                (8, 4, 4)])
def test_transposer_grouped_rows_and_columns(bb, tile_beats, seed):
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    for _ in range(4):
        desc, slots, flags = random_grouped(rng, bb, tile_beats)
        print(desc, flags)
        dut = TileTransposer(data_width=8 * bb, addr_width=16, tile_beats=tile_beats,
                             row_queue=8)
        got, counts = run_mover(dut, desc, bb, seed, memory, slots, **flags)
        check_against_executor(desc, memory, got, counts)


def random_packed(rng, bb):
    """A transpose whose rows are shorter than a beat and follow each other in the source from
    a beat boundary (a beat holds several rows): pad rows, partial row tiles, pad outer
    indices."""
    elog = int(rng.integers(0, min((bb // 2).bit_length(), 4)))
    eb = 1 << elog
    L = bb // eb
    c = 1 << int(rng.integers(0, L.bit_length() - 1))        # columns: under a beat
    r = int(rng.integers(1, 3 * L + 2))
    o = int(rng.integers(1, 4))
    vr = r if rng.random() < 0.5 else int(rng.integers(0, r + 1))
    vo = o if rng.random() < 0.7 else int(rng.integers(0, o + 1))
    s_o = -(-(r * c * eb) // bb) * bb + bb * int(rng.integers(0, 2))
    d_c = eb * (r + int(rng.integers(0, 3)))
    d_o = d_c * c + eb * int(rng.integers(0, 5))
    desc = Descriptor(bb * int(rng.integers(0, 8)), 0x8000 + eb * int(rng.integers(0, 64)), eb,
                      (Dim(r, c * eb, eb, vr), Dim(c, eb, d_c), Dim(o, s_o, d_o, vo)),
                      pad=int(rng.integers(0, 1 << 64, dtype=np.uint64)))
    return desc


@pytest.mark.parametrize("bb,seed", [(8, 0), (16, 1), (32, 2), (32, 3), (8, 4)])
def test_transposer_packed_rows(bb, seed):
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    for _ in range(4):
        desc = random_packed(rng, bb)
        print(desc)
        dut = TileTransposer(data_width=8 * bb, addr_width=16, tile_beats=2, row_queue=8)
        got, counts = run_mover(dut, desc, bb, seed, memory, pack_rows=1)
        check_against_executor(desc, memory, got, counts)
        rows_per_step = bb // (desc.element_bytes * desc.dims[1].extent)
        assert counts["row_steps"] == transpose_row_steps(desc, bb, 2, rows_per_step)
        # every source beat is read once
        assert counts["beats"] <= -(-desc.dims[0].extent * desc.dims[1].extent
                                    * desc.element_bytes // bb) * desc.dims[2].extent


def test_transposer_reads_each_row_once():
    """An aligned transpose reads every source byte once, in whole beats: 64 x 64 int8 on a
    64-bit bus is 512 beats, no more."""
    d = Descriptor(0, 0x8000, 1, (Dim(64, 64, 1), Dim(64, 1, 64)))
    memory = np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)
    want = memory.copy()
    execute([d], want)
    got, counts = run_transposer(d, 8, 2, 0, memory)
    assert (got == want).all() and counts["beats"] == 64 * 64 // 8


def test_engine_paths_checked(rejected, inspected):
    """A build leaves out the row or tile path, never the element path, which takes every
    descriptor; unknown names are refused."""
    from atomcube.hw.dma.engine import DmaEngine

    for paths, kept in ((("elements",), {"elements"}), (None, {"rows", "tile", "elements"})):
        engine = DmaEngine(**({"paths": paths} if paths else {}))
        inspected(engine)
        assert engine.paths == kept
    with rejected(ValueError, "paths must include 'elements'"):
        DmaEngine(paths=("rows", "tile"))
    with rejected(ValueError, "unknown path 'tiles'"):
        DmaEngine(paths=("tiles", "elements"))


def test_timing_choices_move_no_data():
    """The tile path with three columns in flight (the fewest) and the row path with a ready
    copy per 16 bits move the same bytes as with the defaults (only cycles may differ)."""
    rng = np.random.default_rng(11)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    timing = DmaTiming(bits_per_ready=16, columns_in_flight=3)
    for _ in range(2):
        desc = random_transpose(rng, 8)
        print(desc)
        got, counts = run_transposer(desc, 8, 2, 11, memory, timing=timing)
        check_against_executor(desc, memory, got, counts)
        desc = random_rows(rng, 16)
        print(desc)
        got, counts = run_mover(RowCopier(data_width=128, addr_width=16, run_queue=8,
                                          timing=timing), desc, 16, 11, memory)
        check_against_executor(desc, memory, got, counts)


def test_timing_choices_rejected_and_built(rejected):
    from amaranth.back import verilog

    with rejected(ValueError, "timing.bits_per_ready must be an integer of at least 1, not 0"):
        RowCopier(timing=DmaTiming(bits_per_ready=0))
    with rejected(ValueError, "timing.columns_in_flight must be an integer of at least 3"):
        TileTransposer(timing=DmaTiming(columns_in_flight=2))
    with rejected(ValueError, "timing.late_credit must be True or False, not 1"):
        BackEnd(timing=DmaTiming(late_credit=1))

    def emit(timing):
        return verilog.convert(RowCopier(timing=timing), name="top")

    # a choice is a real one: it changes the netlist
    assert emit(DmaTiming(bits_per_ready=16)) != emit(DmaTiming())
    # (without the fetch: its beat stream's ready is a constant, not a port)
    assert verilog.convert(BackEnd(fetch=False, timing=DmaTiming(late_credit=False)),
                           name="top") != verilog.convert(BackEnd(fetch=False), name="top")


def test_transposer_parameters_rejected(rejected):
    with rejected(ValueError, "tile_beats must be a power of two"):
        TileTransposer(tile_beats=3)
    with rejected(ValueError, "data_width must be 64, 128 or 256"):
        TileTransposer(data_width=32)


# -- the row copier ------------------------------------------------------------------------------

def random_rows(rng, bb):
    """A descriptor whose dim 0 is contiguous on both sides: any element size, source and
    destination at any offsets in their beats, pad at the end of runs and whole pad runs."""
    eb = 1 << int(rng.integers(0, 4))
    e0 = int(rng.integers(1, 6 * bb // eb + 3))
    v0 = e0 if rng.random() < 0.6 else int(rng.integers(0, e0 + 1))
    outer = []
    s_span, d_span = e0 * eb, e0 * eb
    for _ in range(int(rng.integers(0, 4))):
        e = int(rng.integers(1, 4))
        ss = s_span + eb * int(rng.integers(0, 9))
        ds = d_span + eb * int(rng.integers(0, 9))
        v = e if rng.random() < 0.8 else int(rng.integers(0, e + 1))
        outer.append(Dim(e, ss, ds, v))
        s_span, d_span = ss * e, ds * e
    src = eb * int(rng.integers(0, 64))
    dst = 0x8000 + eb * int(rng.integers(0, 64))
    return Descriptor(src, dst, eb, (Dim(e0, eb, eb, v0), *outer),
                      pad=int(rng.integers(0, 1 << 64, dtype=np.uint64)))


@pytest.mark.parametrize("bb,seed", [(8, 0), (8, 1), (16, 2), (32, 3), (32, 4), (8, 5)])
def test_row_copier_matches_the_executor(bb, seed):
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    for _ in range(4):
        desc = random_rows(rng, bb)
        print(desc)
        got, counts = run_mover(RowCopier(data_width=8 * bb, addr_width=16, run_queue=8), desc,
                                bb, seed, memory)
        check_against_executor(desc, memory, got, counts)


def test_row_copier_reads_each_beat_once():
    """A copy of 1000 bytes from offset 3 to offset 6 of a 64-bit bus reads the 126 beats the
    source touches, each once."""
    d = Descriptor(3, 0x8006, 1, (Dim(1000, 1, 1),))
    memory = np.arange(1 << 16, dtype=np.uint32).astype(np.uint8)
    want = memory.copy()
    execute([d], want)
    got, counts = run_mover(RowCopier(data_width=64, addr_width=16), d, 8, 0, memory)
    assert (got == want).all() and counts["beats"] == -(-(3 + 1000) // 8)


# -- the element path ------------------------------------------------------------------------------

def random_gather(rng, bb):
    """Any descriptor: the source lays the dimensions out in a random order with gaps, so
    dimension 0 need not be contiguous on either side; pad anywhere."""
    eb = 1 << int(rng.integers(0, 4))
    n = int(rng.integers(1, 4))
    extents = [int(e) for e in rng.integers(1, 7, n)]
    valids = [int(rng.integers(0, e + 1)) if rng.random() < 0.3 else e for e in extents]

    def strides(order):
        out, span = [0] * n, eb
        for k in order:
            out[k] = span + eb * int(rng.integers(0, 4))
            span = out[k] * extents[k]
        return out

    ss, ds = strides(rng.permutation(n)), strides(range(n))
    dims = tuple(Dim(e, s_, d_, v) for e, s_, d_, v in zip(extents, ss, ds, valids, strict=True))
    return Descriptor(eb * int(rng.integers(0, 64)), 0x8000 + eb * int(rng.integers(0, 64)), eb,
                      dims, pad=int(rng.integers(0, 1 << 64, dtype=np.uint64)))


@pytest.mark.parametrize("bb,seed", [(8, 0), (16, 1), (32, 2)])
def test_element_path_matches_the_executor(bb, seed):
    rng = np.random.default_rng(seed)
    memory = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    for make in (random_gather, random_gather, random_rows, random_transpose):
        desc = make(rng, bb)
        print(desc)
        got, counts = run_mover(ElementPath(data_width=8 * bb, addr_width=16, queue=8), desc,
                                bb, seed, memory)
        check_against_executor(desc, memory, got, counts)


# -- the front end's checks ---------------------------------------------------------------------

def _random_descriptor(rng):
    """Descriptors that break each rule now and then: counts small, a few bits or full width
    (the check's products take a step per two bits of a count), strides and addresses likewise."""
    def number(low=0):
        kind = rng.integers(4)
        if kind == 0:
            return int(rng.integers(max(low, 1), 9))
        if kind == 1:
            return int(rng.integers(low, 1 << int(rng.integers(1, 33))))
        if kind == 2:
            return int(rng.integers(low, 1 << 32))
        return (1 << 32) - 1 - int(rng.integers(0, 4))
    eb = int(rng.choice([1, 2, 4, 8]))
    dims = []
    for _ in range(int(rng.integers(0, MAX_DIMS + 1))):
        e = number()
        v = e if rng.random() < 0.6 else min(number(), (1 << 32) - 1)
        s, d = (number() & ~(eb - 1) if rng.random() < 0.9 else number() for _ in range(2))
        dims.append(Dim(e, s, d, v))
    src, dst = (int(rng.integers(0, 1 << 32)) & ~(eb - 1) if rng.random() < 0.5 else
                int(rng.integers(0, 1 << 20)) * 8 for _ in range(2))
    return Descriptor(src, dst, eb, tuple(dims))


def _edge_descriptor(rng, side, over):
    """A descriptor at the edge of a rule that only the exact products decide: ``side`` "dst"
    ends the destination at the top of the address space (nothing read), "src" puts the
    destination right after the source; ``over`` moves it one element further (RANGE) or back
    (OVERLAP)."""
    eb = int(rng.choice([1, 2, 4, 8]))
    n = int(rng.integers(1, MAX_DIMS + 1))
    top = 1 << 32
    if side == "dst":
        # nesting destination strides, counts of any width up to the address space
        dims, span = [], 0
        for _ in range(n):
            d = min(span + eb * (1 + int(rng.integers(0, 1 << int(rng.integers(0, 12))))),
                    top - eb)
            room = (top - eb - span) // d
            c = int(rng.integers(0, min(room, 1 << int(rng.integers(1, 33))) + 1))
            dims.append(Dim(c + 1, eb, d, c + 1))
            span += c * d
        k = int(rng.integers(len(dims)))
        dims[k] = Dim(dims[k].extent, eb, dims[k].dst_stride, 0)       # nothing is read
        dst = top - span - eb + (eb if over else 0)
        return Descriptor(0, dst % top, eb, tuple(dims))
    # a dense destination of at most 2**20 elements, source strides of any size that fit
    counts = [int(rng.integers(0, 1 << int(rng.integers(1, 20 // n + 1)))) for _ in range(n)]
    dst_bytes = eb * int(np.prod([c + 1 for c in counts]))
    budget = (top - dst_bytes - 2 * eb) // (n * eb)
    dims, d, src_span = [], eb, 0
    for c in counts:
        sst = eb * int(rng.integers(0, budget // max(c, 1) + 1))
        dims.append(Dim(c + 1, sst, d))
        d *= c + 1
        src_span += c * sst
    dst = src_span + eb - (eb if over else 0)
    return Descriptor(0, dst, eb, tuple(dims))


def offered(d, addr_width=32):
    """``d`` as the front end offers it to the mid end: the addresses, log2 of the element
    bytes, the pad value, then each dimension in use as (extent, valid, source stride,
    destination stride)."""
    mask = (1 << addr_width) - 1
    return (d.src & mask, d.dst & mask, d.element_bytes.bit_length() - 1, d.pad,
            *((x.extent, x.valid, x.src_stride % (1 << 32), x.dst_stride % (1 << 32))
              for x in d.dims))


def offer_of(ctx, dut):
    """What the front end ``dut`` offers the mid end now, as :func:`offered` gives a
    descriptor."""
    p = dut.desc.payload
    return (ctx.get(p.src), ctx.get(p.dst), ctx.get(p.elog), ctx.get(p.pad),
            *((ctx.get(p.ext[k]), ctx.get(p.val[k]), ctx.get(p.sst[k]), ctx.get(p.dstr[k]))
              for k in range(ctx.get(p.ndims))))


def run_front_end(descs, seed=0, stalls=True, chains=True):
    """Each descriptor through a front end whose back end is always idle, and whose mid end
    takes what it is offered: the job's error code and cycle count, as software reads them,
    and the descriptors taken (as :func:`offered` gives them). The register bus sees random idle
    cycles before each access and random backpressure on B and R. With ``stalls`` the mid end
    takes a descriptor after a random wait and stays busy for a random time after it; checked
    meanwhile: an offer is held, unchanged, until it is taken. A descriptor of None starts a
    chain at 0x1000 instead (for a front end built without ``chains``)."""
    dut = FrontEnd(data_width=64, addr_width=32, chains=chains)
    bus = dut.s_axil
    rng = np.random.default_rng(seed)
    got, taken = [], []

    async def write(ctx, addr, data):
        await axil_write(ctx, bus, rng, addr, data)

    async def read(ctx, name):
        return DMA[name].decode(await axil_read(ctx, bus, rng, DMA[name].offset))

    async def bench(ctx):
        ctx.set(dut.idle, 1)
        ctx.set(dut.drained, 1)
        for d in descs:
            await write(ctx, DMA["status"].offset, DMA["status"].encode({"done": 1, "error": 1}))
            for name, values in program(d) if d is not None else program_chain(0x1000):
                await write(ctx, DMA[name].offset, DMA[name].encode(values))
            for _ in range(400):
                if (await read(ctx, "status"))["done"]:
                    break
            else:
                raise AssertionError(f"{d}: the job did not end")
            got.append(((await read(ctx, "error"))["code"], (await read(ctx, "cycles"))["value"]))

    async def mid_end(ctx):
        busy, held = 0, None
        while True:
            offer = ctx.get(dut.desc.valid)
            take = offer and busy == 0 and (not stalls or rng.random() < 0.4)
            ctx.set(dut.desc.ready, take)
            ctx.set(dut.busy, busy > 0)
            now = offer_of(ctx, dut) if offer else None
            assert held is None or now == held, "the offer changed or went before it was taken"
            held = None if take or not offer else now
            if take:                          # busy from the cycle of the take on
                taken.append(now)
                ctx.set(dut.busy, 1)
                busy = 1 + int(rng.integers(0, 12)) if stalls else 1
            await ctx.tick()
            busy = max(0, busy - 1)

    simulate(dut, bench, mid_end)
    return got, taken


@pytest.mark.parametrize("seed", range(3))
def test_front_end_checks_match_the_model(seed):
    """Random descriptors, most of them breaking a rule, through the front end's checks: the
    same error code as the model's, for extents, valid counts and strides up to 32 bits."""
    print(f"seed {seed}")
    rng = np.random.default_rng(4000 + seed)
    descs = [_random_descriptor(rng) for _ in range(40)]
    got, taken = run_front_end(descs, seed)
    for d, (code, _) in zip(descs, got, strict=True):
        assert code == d.error(32), f"{d}: code {Error(code).name}, the model says " \
                                    f"{d.error(32).name}"
    # the mid end is offered every descriptor that passes, as it was written, and no other
    assert taken == [offered(d) for d in descs if d.error(32) == Error.NONE]


def run_front_end_chain(descs, bad_fetches=(), seed=0, base=0x1000):
    """``descs`` as a chain in memory at ``base``, through a front end whose back end answers
    each descriptor fetch after a random latency, its beats with random gaps (an error response
    on the fetches of the descriptors listed in ``bad_fetches``), and whose mid end takes each
    offer once its path is free, after a random wait, and stays busy for 30 to 120 cycles (the back
    end then writes for up to 60 more, in order: a descriptor's writes start once the one before
    it has ended, which ``job_done`` tells). Returns the job's error code and descriptor index,
    the descriptors done, the descriptors taken (as :func:`offered` gives them) and, for each
    fetch, whether a descriptor was running when it was asked for. Checked meanwhile: a
    descriptor is offered while another runs only if it reads something and nothing the running
    one writes, never while two run, and the paths and back end are never reset under a
    descriptor or a fetch."""
    dut = FrontEnd(data_width=64, addr_width=32)
    bus = dut.s_axil
    rng = np.random.default_rng(seed)
    raw = Program(list(descs)).chain(base)
    beats_per = DESCRIPTOR_BYTES // 8
    taken, fetches, result = [], [], {}
    state = {"running": False, "fetch_left": 0, "overlaps": 0}

    async def bench(ctx):
        for name, values in program_chain(base):
            await axil_write(ctx, bus, rng, DMA[name].offset, DMA[name].encode(values))
        for _ in range(200):
            status = DMA["status"].decode(await axil_read(ctx, bus, rng, DMA["status"].offset))
            if status["done"]:
                break
        else:
            raise AssertionError("the chain did not end")
        for name in ("error", "descriptors"):
            result[name] = DMA[name].decode(await axil_read(ctx, bus, rng, DMA[name].offset))

    async def back_end(ctx):
        pending = []                          # (cycle it comes, data, error) per fetch beat
        cycle = 0
        while True:
            assert not (ctx.get(dut.dp_reset) and state["fetch_left"]), \
                "the back end is reset while a fetch is in flight"
            if ctx.get(dut.fetch_go):
                addr = ctx.get(dut.fetch_addr)
                i = (addr - base) // DESCRIPTOR_BYTES
                fetches.append(state["running"])
                at = cycle + int(rng.integers(3, 21))
                for b in range(beats_per):
                    at += int(rng.integers(1, 4))
                    word = int.from_bytes(raw[addr - base + 8 * b:addr - base + 8 * b + 8],
                                          "little")
                    pending.append((at, word, int(i in bad_fetches)))
                state["fetch_left"] += beats_per
            due = pending and pending[0][0] <= cycle
            ctx.set(dut.fetch_beat.valid, bool(due))
            if due:
                _, word, err = pending.pop(0)
                ctx.set(dut.fetch_beat.payload, word | err << 64)
                state["fetch_left"] -= 1
            await ctx.tick()
            cycle += 1

    by_offer = {offered(d): d for d in descs}

    async def mid_end(ctx):
        # per running descriptor: [cycles its path is busy, cycles its writes then take, it]
        jobs = []
        ctx.set(dut.drained, 1)
        while True:
            if ctx.get(dut.dp_reset):
                assert not jobs, "the paths are reset while a descriptor runs"
            offer = ctx.get(dut.desc.valid)
            if offer and jobs:
                # a second descriptor only, reading something and nothing the first writes
                d = by_offer[offer_of(ctx, dut)]
                lo, hi = d.src_range()
                w_lo, w_hi = jobs[0][2].dst_range()
                assert len(jobs) == 1, "an offer while two descriptors run"
                assert lo < hi and (hi <= w_lo or w_hi <= lo), \
                    "an offer that reads what the running descriptor writes"
            take = offer and (not jobs or jobs[-1][0] == 0) and rng.random() < 0.4
            ctx.set(dut.desc.ready, take)
            ctx.set(dut.busy, any(j[0] for j in jobs) or take)
            ctx.set(dut.idle, not jobs)
            # the oldest descriptor's last write is answered: it ends
            done = bool(jobs) and jobs[0][0] == 0 and jobs[0][1] == 0
            ctx.set(dut.job_done, done)
            if done:
                jobs.pop(0)
            if take:
                state["overlaps"] += bool(jobs)
                taken.append(offer_of(ctx, dut))
                jobs.append([int(rng.integers(30, 121)), int(rng.integers(0, 61)),
                             by_offer[taken[-1]]])
            state["running"] = bool(jobs)
            defer = ctx.get(dut.defer)
            await ctx.tick()
            for k, j in enumerate(jobs):
                if j[0]:
                    j[0] -= 1
                elif j[1] and k == 0 and (len(jobs) == 2 or not defer):
                    # (the oldest writes; a newer descriptor's writes wait until the front end
                    # has ended the one before it: `defer` low)
                    j[1] -= 1

    simulate(dut, bench, back_end, mid_end)
    return result["error"], result["descriptors"]["value"], taken, fetches, state["overlaps"]


def _chain_expected(descs, bad_fetches):
    """The first descriptor of a chain that fails (its fetch, or its checks) with its code, or
    (NONE, the chain's length)."""
    for i, d in enumerate(descs):
        if i in bad_fetches:
            return Error.FETCH_ERROR, i
        if d.error(32) != Error.NONE:
            return d.error(32), i
    return Error.NONE, len(descs)


@pytest.mark.parametrize("seed", range(3))
def test_front_end_fetches_the_next_descriptor_while_one_runs(seed):
    """Chains of good descriptors with, now and then, one that breaks a rule or whose fetch
    is answered with an error: each descriptor after the first is fetched while the one before
    it runs, the mid end is offered the good ones in order (some while the one before still
    runs) and nothing after a failure, and the job ends with the first failure's code and index
    once every descriptor before it is done."""
    print(f"seed {seed}")
    rng = np.random.default_rng(7000 + seed)
    bad = [d for d in (_random_descriptor(rng) for _ in range(40)) if d.error(32) != Error.NONE]
    started_early = 0
    for case in range(6):
        n = int(rng.integers(2, 6))
        descs = [_edge_descriptor(rng, str(rng.choice(["dst", "src"])), False) for _ in range(n)]
        bad_fetches = ()
        if case % 3 == 1:
            descs[int(rng.integers(1, n))] = bad[int(rng.integers(len(bad)))]
        elif case % 3 == 2:
            bad_fetches = (int(rng.integers(1, n)),)
        code, index = _chain_expected(descs, bad_fetches)
        error, done, taken, fetches, overlaps = run_front_end_chain(descs, bad_fetches,
                                                                    seed * 10 + case)
        started_early += overlaps
        what = f"case {case}: {n} descriptors, {code.name} at {index}"
        assert (error["code"], done) == (code, index), f"{what}: got {error}, {done} done"
        if code != Error.NONE:
            assert error["index"] == index, f"{what}: index {error['index']}"
        assert taken == [offered(d) for d in descs[:index]], what
        fetched = min(index + 1, n)
        assert fetches == [False] + [True] * (fetched - 1), f"{what}: fetches {fetches}"
    assert started_early, "no descriptor was taken while the one before it ran"


def test_front_end_without_chains():
    """Built without chains, the front end runs descriptors from the registers as before, and
    a chain's start ends the job at once with NO_CHAIN, offering nothing."""
    rng = np.random.default_rng(7100)
    descs = [_edge_descriptor(rng, "src", False), None, _random_descriptor(rng), None,
             _edge_descriptor(rng, "dst", False)]
    got, taken = run_front_end(descs, chains=False)
    want = [Error.NO_CHAIN if d is None else d.error(32) for d in descs]
    assert [code for code, _ in got] == want
    assert taken == [offered(d) for d in descs if d is not None and d.error(32) == Error.NONE]


@pytest.mark.parametrize("seed", range(3))
def test_front_end_products_decide_at_the_edge(seed):
    """Destinations that end exactly at the top of the address space or one element past it,
    and that start right after the source or one element inside it: a product off by any
    amount flips the verdict."""
    print(f"seed {seed}")
    rng = np.random.default_rng(5000 + seed)
    cases = [(side, over) for side in ("dst", "src") for over in (False, True)] * 8
    descs = [_edge_descriptor(rng, side, over) for side, over in cases]
    for (side, over), d in zip(cases, descs, strict=True):
        want = (Error.RANGE if side == "dst" else Error.OVERLAP) if over else Error.NONE
        assert d.error(32) == want, f"{d}: the case is not at the edge ({d.error(32).name})"
    for d, (code, _) in zip(descs, run_front_end(descs, seed)[0], strict=True):
        assert code == d.error(32), f"{d}: code {Error(code).name}, the model says " \
                                    f"{d.error(32).name}"


def test_front_end_products_of_64_bits():
    """Products with bit 63 set whose lower 63 bits alone would fit the address space: the
    check keeps every bit of them."""
    big = (1 << 31) + 2                   # (big - 1) x (2**32 - 1) = 2**63 + 2**31 - 1
    cases = [Descriptor(0, 0, 1, (Dim(big, 1, (1 << 32) - 1, 0),)),
             Descriptor(0, 0x7FFF_FFFE, 1, (Dim(big, (1 << 32) - 1, 1, big),))]
    assert [d.error(32) for d in cases] == [Error.RANGE] * 2
    assert [code for code, _ in run_front_end(cases)[0]] == [Error.RANGE] * 2


def test_front_end_check_takes_a_step_per_two_bits_of_a_count():
    """The check's cycles grow with the larger of a dimension's two counts (extent - 1 and
    valid - 1) by one per two bits beyond the first two, and not with the strides."""
    def desc(e, v, stride):
        return Descriptor(0, 0xF000_0000, 1, (Dim(4, 4, 1), Dim(e, stride, 4, v)))

    cases = [desc(1, 1, 4), desc(4, 4, 4), desc(4, 4, 0x4000_0000), desc(5, 5, 4),
             desc(17, 1, 4), desc(1 << 20, 0, 4), desc((1 << 20) + 1, 0, 4),
             desc(2, 2, 1 << 31)]
    got, taken = run_front_end(cases, stalls=False)
    assert [code for code, _ in got] == [Error.NONE] * len(cases)
    assert taken == [offered(d) for d in cases]
    base = got[0][1]
    # the larger counts: 0, 3, 3, 4 (3 bits), 16 (5 bits), 2**20 - 1 (20 bits), 2**20
    # (21 bits; a valid of 0 counts as 0), 1
    assert [c - base for _, c in got] == [0, 0, 0, 1, 2, 9, 10, 0]


def expected_pieces(piece, cvt, bb):
    """The real pieces the conversion stage makes of a virtual ``piece`` (addr, data bytes,
    strobe bits, last), by the model's conversion of each element."""
    addr, data, strb, last = piece
    h = bb // 2
    if cvt.code == 0:
        return [piece]
    source, destination = cvt.types
    es = np.dtype(TYPES[source]).itemsize
    ed = np.dtype(TYPES[destination]).itemsize
    raw = np.frombuffer(bytes(data), np.uint8)
    if es == 1:                                      # a real piece per half
        halves = [k for k in (0, 1) if any(strb[k * h:(k + 1) * h])] or [1]
        out = []
        for n, k in enumerate(halves):
            conv = cvt.apply(raw[k * h:(k + 1) * h].reshape(h, 1)).ravel()
            is_last = last and n == len(halves) - 1
            if ed == 2:                              # widening: the half fills a real beat
                bits = [b for b in strb[k * h:(k + 1) * h] for _ in range(2)]
                out.append((2 * addr + k * bb, conv, bits, is_last))
            else:                                    # a byte to a byte: the half stays put
                data = np.zeros(bb, np.uint8)
                data[k * h:(k + 1) * h] = conv
                bits = [0] * bb
                bits[k * h:(k + 1) * h] = strb[k * h:(k + 1) * h]
                out.append((addr, data, bits, is_last))
        return out
    conv = cvt.apply(raw.reshape(bb // es, es)).ravel()
    if ed == es:
        return [(addr, conv, list(strb), last)]
    # half a real beat: each element's first strobe, for each byte it writes
    hi = (addr // bb) & 1
    data = np.zeros(bb, np.uint8)
    data[hi * h:(hi + 1) * h] = conv
    bits = [0] * bb
    bits[hi * h:(hi + 1) * h] = [b for b in strb[0::es] for _ in range(ed)]
    return [((addr // 2) & ~(bb - 1), data, bits, last)]


@pytest.mark.parametrize("bb", [8, 32])
def test_element_converter_matches_the_model(bb):
    """Jobs of every conversion (and plain copies) through the conversion stage, random pieces
    with random strobes in, the output stalled at random: each real piece as the model makes
    it, in order, with the job's bytes counted."""
    rng = np.random.default_rng(bb)
    cvts = [Conversion()] + [Conversion(code, int(rng.integers(-300, 300)),
                                        int(rng.integers(-900, 900)), int(rng.integers(0, 14)))
                             for code in CONVERSIONS] + \
        [Conversion(code, -32768, 32767, 0) for code in CONVERSIONS] + \
        [Conversion(code, 7, -3, 31) for code in (1, 3)]
    # a bit field's conversions carry its place in the word
    cvts = [replace(c, bit=b, width=w) if c.types and c.types[0] in FIELDS else c
            for c, (b, w) in zip(cvts, ((int(rng.integers(0, 17)), int(rng.integers(1, 17)))
                                         for _ in cvts), strict=False)]
    jobs = []
    for cvt in cvts:
        pieces = []
        for _ in range(int(rng.integers(1, 6))):
            strb = [int(b) for b in rng.random(bb) < 0.7] if rng.random() < 0.7 else \
                [1] * bb
            if rng.random() < 0.15:
                strb = [0] * (bb // 2) + strb[bb // 2:] if rng.random() < 0.5 else \
                    strb[:bb // 2] + [0] * (bb // 2)
            pieces.append((int(rng.integers(0, 1 << 12)) * bb, rng.integers(0, 256, bb,
                                                                             np.uint8),
                           strb, False))
        pieces[-1] = (*pieces[-1][:3], True)
        jobs.append((cvt, pieces))
    want = [p for cvt, pieces in jobs for piece in pieces for p in expected_pieces(piece, cvt,
                                                                                   bb)]
    dut = ElementConverter(data_width=8 * bb, addr_width=20)
    # the stream in: each job's conversion, then its pieces
    feed = []
    for cvt, pieces in jobs:
        feed += [("job", cvt)] + [("piece", p) for p in pieces]
    got = []

    async def bench(ctx):
        written = 0
        for _ in range(30 * len(want) + 100):
            if len(got) == len(want) and not feed:
                break
            kind, item = feed[0] if feed else (None, None)
            offer = kind is not None and rng.random() < 0.8
            ctx.set(dut.job.valid, offer and kind == "job")
            ctx.set(dut.i.valid, offer and kind == "piece")
            if kind == "job":
                ctx.set(dut.job.payload, {"code": item.code, "shift": item.shift,
                                          "offset": item.offset & 0xFFFF,
                                          "scale": item.scale & 0xFFFF, "bit": item.bit,
                                          "width": item.width})
            elif kind == "piece":
                addr, data, strb, last = item
                ctx.set(dut.i.payload, {"addr": addr,
                                        "data": int.from_bytes(bytes(data), "little"),
                                        "strb": sum(b << i for i, b in enumerate(strb)),
                                        "last": last})
            ctx.set(dut.o.ready, int(rng.random() < 0.6))
            await ctx.delay(1e-9)
            if offer and ctx.get(dut.job.ready if kind == "job" else dut.i.ready):
                feed.pop(0)
            if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                p = ctx.get(dut.o.payload)
                got.append((p.addr, p.data, p.strb, p.last))
            written += ctx.get(dut.written_bytes)
            await ctx.tick()
        assert len(got) == len(want), f"{len(got)} of {len(want)} pieces left the stage"
        written += ctx.get(dut.written_bytes)           # (the last piece's, a cycle later)
        assert written == sum(sum(p[2]) for p in want)
        assert not ctx.get(dut.busy)

    simulate(dut, bench)
    for n, ((addr, data, strb, last), (g_addr, g_data, g_strb, g_last)) in enumerate(
            zip(want, got, strict=True)):
        bits = sum(b << i for i, b in enumerate(strb))
        assert (g_addr, g_strb, g_last) == (addr, bits, last), f"piece {n}"
        assert g_data.to_bytes(bb, "little") == bytes(data), f"piece {n}: data " \
            f"{g_data.to_bytes(bb, 'little').hex()} != {bytes(data).hex()}"
