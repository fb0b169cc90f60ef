"""The DMA's gateware components at the Amaranth level (amaranth.sim), each against the model's
descriptor semantics; the whole engine is checked by the cocotb bench."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.dma.walker import Walker


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


def run_walker(levels, extents, valids, ss, ds, sb, db, seed, walks=2):
    dut = Walker(levels=levels)
    rng = np.random.default_rng(seed)
    got = []

    async def bench(ctx):
        for k in range(levels):
            ctx.set(dut.extent[k], extents[k])
            ctx.set(dut.valid[k], valids[k])
            ctx.set(dut.src_stride[k], ss[k])
            ctx.set(dut.dst_stride[k], ds[k])
        ctx.set(dut.src_base, sb)
        ctx.set(dut.dst_base, db)
        for _ in range(walks):
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            steps = []
            while True:
                ready = int(rng.random() < 0.7)          # random backpressure
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
            await ctx.tick()
            assert not ctx.get(dut.busy)
            got.append(steps)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("seed", range(6))
def test_walker_matches_the_nested_loops(seed):
    rng = np.random.default_rng(seed)
    levels = int(rng.integers(1, 6))
    extents = [int(v) for v in rng.integers(1, 5, levels)]
    valids = [int(rng.integers(0, e + 1)) for e in extents]
    ss = [int(v) for v in rng.integers(0, 1 << 20, levels)]
    ds = [int(v) for v in rng.integers(0, 1 << 20, levels)]
    sb, db = int(rng.integers(0, 1 << 32)), int(rng.integers(0, 1 << 32))   # addresses wrap
    want = walk_model(extents, valids, ss, ds, sb, db)
    for steps in run_walker(levels, extents, valids, ss, ds, sb, db, seed):
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

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_walker_levels_rejected(rejected):
    with rejected(ValueError, "levels must be 1 to 5"):
        Walker(levels=6)
