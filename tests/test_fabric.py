"""hw.fabric's requests without a board: the plain-logic form in Amaranth's simulator, the ECP5
form's cells and parameters, and the rules on what fits one multiplier block. (The ECP5 forms'
behaviour is simulated in the ``-ecp5`` cocotb cases, against sim/models/ecp5.v.)"""

import random
import re

import numpy as np
import pytest
from amaranth import Elaboratable, Module, Signal, signed
from amaranth.back import rtlil
from amaranth.sim import Simulator

from atomcube.hw.fabric import Checked, Ecp5Copies, Ecp5Globals, registered_copy, registered_product


class Product(Elaboratable):
    """A registered product of two operands of the given shapes, with an enable."""

    def __init__(self, a_shape, b_shape, width, platform=None):
        self.a, self.b = Signal(a_shape), Signal(b_shape)
        self.en = Signal()
        self.width, self.platform = width, platform

    def elaborate(self, platform):
        m = Module()
        # the refusal tests' modules end in a ValueError, unused: that is intended
        m._MustUse__silence = True
        self.p = registered_product(self.platform, m, self.a, self.b, self.en, "prod",
                                    self.width)
        return m


@pytest.mark.parametrize("a_shape, b_shape, width", [
    (signed(17), 18, 36), (signed(16), signed(18), 34), (signed(16), 17, 34), (8, 8, 17)])
def test_plain_product_is_two_cycles_late_and_holds_while_disabled(a_shape, b_shape, width):
    """With no platform: the product of the operands presented two enabled cycles before,
    unchanged while the enable is low (random enables, random operands, seed printed)."""
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    dut = Product(a_shape, b_shape, width)
    m = Module()
    m.submodules.dut = dut

    def draw(sig):
        lo, hi = (-(1 << (len(sig) - 1)), 1 << (len(sig) - 1)) if sig.shape().signed \
            else (0, 1 << len(sig))
        return rng.randrange(lo, hi)

    async def bench(ctx):
        taken = []                # operands the operand registers took, in order
        for _ in range(400):
            a, b, en = draw(dut.a), draw(dut.b), rng.random() < 0.6
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            ctx.set(dut.en, en)
            await ctx.tick()
            if en:
                taken.append(a * b)
            # the product register holds the product of the operands taken before the last
            want = taken[-2] if len(taken) >= 2 else 0
            assert ctx.get(dut.p) == want, (seed, a, b)

    sim = Simulator(Checked(m))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_ecp5_product_is_one_multiplier_block_with_its_registers():
    """On the ECP5 platforms: one MULT18X18D, its input and output registers on CLK0 with
    the enable on CE0 and the reset on RST0, the pipeline register off, each operand's
    signedness on SIGNEDA/SIGNEDB; no flip-flops of its own."""
    for platform in (Ecp5Copies(), Ecp5Globals()):
        m = Module()
        m.submodules.dut = dut = Product(signed(17), 18, 36, platform)
        text = rtlil.convert(m, ports=[dut.a, dut.b, dut.en])
        cells = re.findall(r"cell \\MULT18X18D \\(\S+)", text)
        assert [c.rsplit(".", 1)[-1] for c in cells] == ["prod_mult"]
        body = text[text.index("cell \\MULT18X18D"):]
        body = body[:body.index("\n  end")]
        for reg in ("INPUTA", "INPUTB", "OUTPUT"):
            assert f'parameter \\REG_{reg}_CLK "CLK0"' in body
            assert f'parameter \\REG_{reg}_CE "CE0"' in body
            assert f'parameter \\REG_{reg}_RST "RST0"' in body
        assert 'parameter \\REG_PIPELINE_CLK "NONE"' in body
        assert re.search(r"connect \\SIGNEDA 1'1", body)
        assert re.search(r"connect \\SIGNEDB 1'0", body)
        assert "$dff" not in text and "$adff" not in text


def test_ecp5_product_refuses_an_operand_wider_than_the_block():
    m = Module()
    m.submodules.dut = dut = Product(signed(19), 8, 27, Ecp5Copies())
    with pytest.raises(ValueError, match=r"operand A has 19 bits; one MULT18X18D takes 18"):
        rtlil.convert(m, ports=[dut.a, dut.b, dut.en])
    m = Module()
    m.submodules.dut = dut = Product(signed(18), 18, 37, Ecp5Copies())
    with pytest.raises(ValueError, match=r"37-bit product is wider than the block's 36 bits"):
        rtlil.convert(m, ports=[dut.a, dut.b, dut.en])


class Copy(Elaboratable):
    """A registered copy of a 5-bit value, loaded every cycle or (``enabled``) under ``en``."""

    def __init__(self, platform=None, enabled=False):
        self.v = Signal(5)
        self.en = Signal()
        self.platform, self.enabled = platform, enabled

    def elaborate(self, platform):
        m = Module()
        self.q = registered_copy(self.platform, m, self.v, "cp",
                                 enable=self.en if self.enabled else None)
        return m


def test_registered_copy_is_the_value_a_cycle_late():
    dut = Copy()
    rng = random.Random(7)
    values = [rng.randrange(32) for _ in range(40)]
    seen = []

    async def bench(ctx):
        for v in values:
            ctx.set(dut.v, v)
            seen.append(ctx.get(dut.q))       # still the value before
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [0] + values[:-1]


def test_ecp5_registered_copy_is_a_flip_flop_per_bit():
    m = Module()
    m.submodules.dut = dut = Copy(Ecp5Copies())
    text = rtlil.convert(m, ports=[dut.v])
    cells = re.findall(r"cell \\TRELLIS_FF \\(\S+)", text)
    assert sorted(c.rsplit(".", 1)[-1] for c in cells) == [f"cp{b}_c0_ff" for b in range(5)]


def test_registered_copy_with_an_enable_holds_while_it_is_low():
    dut = Copy(enabled=True)
    rng = random.Random(8)
    steps = [(rng.randrange(32), rng.random() < 0.5) for _ in range(60)]
    seen, want, held = [], [], 0

    async def bench(ctx):
        for v, en in steps:
            ctx.set(dut.v, v)
            ctx.set(dut.en, en)
            seen.append(ctx.get(dut.q))
            await ctx.tick()

    for v, en in steps:
        want.append(held)
        held = v if en else held
    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == want and len(set(seen)) > 5


@pytest.mark.parametrize("enabled", [False, True], ids=["always", "enabled"])
def test_ecp5_registered_copy_takes_its_enable_on_the_flip_flops(enabled):
    m = Module()
    m.submodules.dut = dut = Copy(Ecp5Copies(), enabled=enabled)
    text = rtlil.convert(m, ports=[dut.v, dut.en])
    cemux = re.findall(r'parameter \\CEMUX "(\w+)"', text)
    assert cemux == ["CE" if enabled else "1"] * 5, cemux


@pytest.mark.parametrize("width", [1, 5, 18, 32, 35, 38])
@pytest.mark.parametrize("highest", [True, False])
def test_first_one_tree(width, highest):
    """hw.bits.first_one against int.bit_length (the highest set bit) and the count of
    trailing zeros (the lowest), at the widths the LUT unit and the DMA's conversion lanes use
    and odd ones: padding to a power of two must not move the answer."""
    from atomcube.hw.bits import first_one

    m = Module()
    v, any_, pos = Signal(width), Signal(), Signal(8)
    found, where = first_one(v, highest=highest)
    m.d.comb += [any_.eq(found), pos.eq(where)]
    rng = np.random.default_rng(width)
    values = [0, 1, (1 << width) - 1] + [1 << b for b in range(width)] + \
        [int(rng.integers(0, 1 << min(n, 62))) << max(0, n - 62)
         for n in rng.integers(1, width + 1, 300)]

    async def bench(ctx):
        for x in values:
            ctx.set(v, x)
            want = max(x.bit_length() - 1, 0) if highest else \
                ((x & -x).bit_length() - 1 if x else 0)
            assert (ctx.get(any_), ctx.get(pos)) == (int(x != 0), want), hex(x)

    sim = Simulator(Checked(m))
    sim.add_testbench(bench)
    sim.run()
