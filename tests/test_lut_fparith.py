"""The FP16 pipeline's operations as gateware (``hw.lut.fparith``) against the results recorded
from NVDLA's own C model (tests/data/nvdla_lut_fp16.npz, tests/nvdla_ref/), in simulation."""

from pathlib import Path

import numpy as np
import pytest
from amaranth import Module, Signal
from amaranth.sim import Simulator

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
