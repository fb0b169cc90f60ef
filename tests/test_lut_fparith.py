"""The FP16 pipeline's operations as gateware (``hw.lut.fparith``) against the results recorded
from NVDLA's own C model (tests/data/nvdla_lut_fp16.npz, tests/nvdla_ref/), in simulation."""

from operator import mul
from pathlib import Path

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

from atomcube.hw.fabric import registered_operation
from atomcube.hw.lut import fparith
from atomcube.model.nvdla.nvfloat import FP16, FP17, FP32

VECTORS = np.load(Path(__file__).parent / "data" / "nvdla_lut_fp16.npz")

# name: (width of a, width of b, the logic, width of each result)
OPERATIONS = {
    "add32": (32, 32, lambda a, b: (fparith.fp_add(a, b, FP32),), (32,)),
    "sub32": (32, 32, lambda a, b: (fparith.fp_sub(a, b, FP32),), (32,)),
    "add17": (17, 17, lambda a, b: (fparith.fp_add(a, b, FP17),), (17,)),
    "mul17": (17, 17, lambda a, b: (fparith.fp_mul(a, b, FP17),), (17,)),
    "fp32_fp17": (32, 1, lambda a, b: (fparith.fp_convert(a, FP32, FP17),), (17,)),
    "fp16_fp17": (16, 1, lambda a, b: (fparith.fp_convert(a, FP16, FP17),), (17,)),
    "fp17_fp32": (17, 1, lambda a, b: (fparith.fp_convert(a, FP17, FP32),), (32,)),
    "fraction": (35, 1, lambda a, b: (fparith.fp_from_fraction(a, 35, FP17),), (17,)),
    "index": (32, 8, lambda a, b: fparith.fp_to_index(a, b, 9, 35), (9, 35)),
}


@pytest.mark.parametrize("op", OPERATIONS)
def test_operation_matches_nvdla(op):
    a_bits, b_bits, logic, out_bits = OPERATIONS[op]
    a_in, b_in = Signal(a_bits), Signal(b_bits)
    outs = [Signal(w) for w in out_bits]
    m = Module()
    m.d.comb += [o.eq(v) for o, v in zip(outs, logic(a_in, b_in), strict=True)]
    a, b, ref, ref2 = VECTORS[f"op_{op}"]
    got = []

    async def bench(ctx):
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            ctx.set(a_in, x)
            ctx.set(b_in, y if b_bits > 1 else 0)
            got.append([ctx.get(o) for o in outs])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    got = np.array(got, np.int64)
    want = np.stack([ref, ref2], axis=1)[:, :len(outs)]
    bad = np.flatnonzero(np.any(got != want, axis=1))
    assert bad.size == 0, (f"{op}: {bad.size} of {a.size} differ, first {a[bad[0]]:#x}, "
                           f"{b[bad[0]]:#x}: {got[bad[0]]} != {want[bad[0]]}")


def test_leading_zeros():
    v, count = Signal(12), Signal(4)
    m = Module()
    m.d.comb += count.eq(fparith.leading_zeros(v, 12))

    async def bench(ctx):
        for x in [0, 1, 2, 3, 0x7FF, 0x800, 0xFFF, 0x40]:
            ctx.set(v, x)
            assert ctx.get(count) == 12 - x.bit_length()

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


def test_unknown_conversion_refused():
    with pytest.raises(ValueError, match="no NVDLA conversion from fp16 to fp32"):
        fparith.fp_convert(Signal(16), FP16, FP32)


# the operations with registers at their cut points, as the FP datapath builds them
PIPELINED = {
    "add32": lambda a, b, st: (fparith.fp_add(a, b, FP32, stage=st),),
    "sub32": lambda a, b, st: (fparith.fp_sub(a, b, FP32, stage=st),),
    "add17": lambda a, b, st: (fparith.fp_add(a, b, FP17, stage=st),),
    "mul17": lambda a, b, st: (fparith.fp_mul(a, b, FP17, stage=st, multiply=lambda x, y:
                                              registered_operation(st.m, x, y, st.enable, "p",
                                                                   len(x) + len(y), mul)),),
    "fp32_fp17": lambda a, b, st: (fparith.fp_convert(a, FP32, FP17, stage=st),),
    "fraction": lambda a, b, st: (fparith.fp_from_fraction(a, 35, FP17, stage=st),),
    "index": lambda a, b, st: fparith.fp_to_index(a, b, 9, 35, stage=st),
}


@pytest.mark.parametrize("op", PIPELINED)
def test_pipelined_operation_matches_nvdla(op):
    """Each operation with a register at every cut point (:class:`hw.lut.fppipeline.Stages`),
    fed a vector a cycle with the pipeline stalled now and then: the results, as many cycles
    later as it has stages, are NVDLA's. (A value not carried across a cut point mixes one
    vector with the next and fails.)"""
    from atomcube.hw.lut.fppipeline import Stages

    a_bits, b_bits, _, out_bits = OPERATIONS[op]
    a_in, b_in, enable = Signal(a_bits), Signal(b_bits), Signal()
    outs = [Signal(w) for w in out_bits]
    m = Module()
    stages = Stages(m, enable, "s")
    m.d.comb += [o.eq(v) for o, v in zip(outs, PIPELINED[op](a_in, b_in, stages), strict=True)]
    depth = stages.depth
    a, b, ref, ref2 = VECTORS[f"op_{op}"]
    rng = np.random.default_rng(5)
    got = []

    async def bench(ctx):
        fed = 0
        moved = 0
        while len(got) < len(a):
            go = bool(rng.random() < 0.8)
            ctx.set(enable, go)
            if fed < len(a):
                ctx.set(a_in, int(a[fed]))
                ctx.set(b_in, int(b[fed]) if b_bits > 1 else 0)
            if go and moved >= depth:
                got.append([ctx.get(o) for o in outs])
            await ctx.tick()
            if go:
                fed += 1
                moved += 1

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert depth > 0
    got = np.array(got, np.int64)
    want = np.stack([ref, ref2], axis=1)[:, :len(outs)]
    bad = np.flatnonzero(np.any(got != want, axis=1))
    assert bad.size == 0, f"{op}: {bad.size} of {a.size} differ, first at {bad[0]}"
