"""Two atomcube blocks inside a design of your own, in Amaranth.

``Accelerator`` below is a user's component: it instantiates the DMA engine and the LUT unit from
the installed ``atomcube`` package, gives the DMA engine an on-chip memory, and exposes the
blocks' registers and the LUT unit's streams as its own ports. Everything is joined with
``wiring.connect``: a block's port meets a port of the enclosing design through
``wiring.flipped`` (the design's ``In`` port is, seen from inside, a source), and a manager meets
a subordinate of the same signature directly.

The testbench runs in Amaranth's simulator. It programs the blocks through their registers as
software would (the register driver of ``atomcube.model.regmap`` over an AXI4-Lite testbench
helper), has the DMA engine lay an NCHW tensor out as NHWC, streams samples through a sigmoid,
and checks both against the golden model.

Run it from a clone or with atomcube installed (``pip install atomcube``)::

    python examples/amaranth_reuse.py
"""

import numpy as np
from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from atomcube.hw.bus.axi import AXI4LiteSignature
from atomcube.hw.dma.engine import DmaEngine
from atomcube.hw.lut.arith import in_layout, out_layout
from atomcube.hw.lut.unit import LutUnit
from atomcube.hw.top.memory import AxiRam
from atomcube.model.board.driver import sigmoid_config
from atomcube.model.dma.compile import dense_transpose
from atomcube.model.nvdla.lut import evaluate
from atomcube.model.registers.dma import program as dma_program
from atomcube.model.registers.lut import program as lut_program
from atomcube.sim.amaranth_axil import driver

LANES = 2
SHAPE = (1, 8, 4, 4)         # N, C, H, W of the tensor the DMA engine transposes
SRC, DST = 0x000, 0x400      # where it lies in the memory, and where its NHWC copy goes


class Accelerator(wiring.Component):
    """A user's design: the DMA engine with 4 KiB of on-chip memory, and the LUT unit."""

    def __init__(self):
        self.dma = DmaEngine(data_width=64)
        self.ram = AxiRam(size=4096, data_width=64, id_width=4)
        self.lut = LutUnit(lanes=LANES, flavor="sdp")
        super().__init__({
            "dma_regs": In(AXI4LiteSignature(addr_width=8)),
            "lut_regs": In(AXI4LiteSignature(addr_width=12)),
            "samples": In(stream.Signature(in_layout(LANES, "sdp"))),
            "results": Out(stream.Signature(out_layout(LANES, "sdp"))),
            "irq": Out(2),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = self.dma
        m.submodules.ram = self.ram
        m.submodules.lut = self.lut
        wiring.connect(m, self.dma.m_axi, self.ram.s_axi)
        wiring.connect(m, wiring.flipped(self.dma_regs), self.dma.s_axil)
        wiring.connect(m, wiring.flipped(self.lut_regs), self.lut.s_axil)
        wiring.connect(m, wiring.flipped(self.samples), self.lut.i_stream)
        wiring.connect(m, self.lut.o_stream, wiring.flipped(self.results))
        m.d.comb += self.irq.eq(self.dma.irq | self.lut.irq << 1)
        return m


async def wait_done(drv):
    for _ in range(1000):
        status = await drv.status.read()
        if status.done:
            await drv.status.write(done=1)
            return status
    raise AssertionError("the job did not end")


def main():
    dut = Accelerator()
    rng = np.random.default_rng(1)
    tensor = rng.integers(-128, 128, SHAPE, dtype=np.int8)
    samples = list(range(-8 << 12, 8 << 12, 1 << 11))
    report = []

    async def dma_bench(ctx):
        dut.ram.sim_write(ctx, SRC, tensor.tobytes())
        drv = driver(ctx, dut.dma_regs, dut.dma.regmap, rng)
        for descriptor in dense_transpose(SHAPE, 1, SRC, DST):
            for name, fields in dma_program(descriptor):
                await drv.write(name, **fields)
            assert not (await wait_done(drv)).error
        got = dut.ram.sim_read(ctx, DST, tensor.size)
        want = tensor.transpose(0, 2, 3, 1).tobytes()
        assert got == want, "the NHWC copy differs from numpy's"
        report.append(f"DMA engine: NCHW {SHAPE} -> NHWC, {len(got)} bytes equal numpy's")

    async def lut_bench(ctx):
        cfg = sigmoid_config("sdp")
        drv = driver(ctx, dut.lut_regs, dut.lut.regmap, rng)
        for name, fields in lut_program(cfg, "sdp"):
            await drv.write(name, **fields)
        await drv.ctrl.write(start=1)
        chunks = [samples[i:i + LANES] for i in range(0, len(samples), LANES)]
        for n, chunk in enumerate(chunks):          # a stream source, as in Amaranth's docs
            ctx.set(dut.samples.payload, {"data": chunk, "mask": (1 << len(chunk)) - 1,
                                          "last": n == len(chunks) - 1})
            ctx.set(dut.samples.valid, 1)
            await ctx.tick().until(dut.samples.ready)
        ctx.set(dut.samples.valid, 0)

    async def lut_sink(ctx):
        got = []
        ctx.set(dut.results.ready, 1)
        while len(got) < len(samples):
            payload, = await ctx.tick().sample(dut.results.payload).until(dut.results.valid)
            got += [payload.data[k] for k in range(LANES) if payload.mask >> k & 1]
        want = evaluate(np.array(samples), sigmoid_config("sdp"), "sdp").out
        assert got == list(want), "the LUT unit's results differ from the model's"
        report.append(f"LUT unit: sigmoid of {len(got)} samples equals the model's")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(dma_bench)
    sim.add_testbench(lut_bench)
    sim.add_testbench(lut_sink)
    sim.run()
    print("\n".join(report))


if __name__ == "__main__":
    main()
