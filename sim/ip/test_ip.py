"""cocotb bench of the standalone cores (hw/ip.py) through their standard ports.

The Verilog simulated is the file ``make ip`` writes. cocotbext-axi's own models drive every
port by its conventional name, with the reset active low: ``AxiLiteMaster`` on ``s_axi_*``,
``AxiRam`` on ``m_axi_*``, ``AxiStreamSource`` on ``s_axis_*`` and ``AxiStreamSink`` on
``m_axis_*``, each channel with random stalls (idle cycles on what the bench sends,
backpressure on what it takes). Results are compared with the model: the DMA's whole memory with
the reference executor's (so a write outside the destination fails too), the decompressor's atom
stream and dense image with the weights model's, the LUT unit's results and counters with
``model.nvdla.lut``. One module serves every core: each test runs only on its own core's cases
(the case's ``core`` parameter).
"""

import json
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (
    AxiBus,
    AxiRam,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)

from atomcube.hw.ip import CORES, build_core
from atomcube.model.board.driver import first_diff, sigmoid_config
from atomcube.sim.benches import ip_case
from atomcube.sim.harness import (
    axil_driver,
    axil_master,
    pauses,
    quiet,
    rng,
    set_axil_pauses,
    wait_job_done,
)
from atomcube.sim.runner import CLOCK_PERIOD_NS, params


def _case():
    """The case under test: the runner's parameters (``make sim``, ``make test``), or, run by
    FuseSoC's sim target, the record ``make ip`` wrote beside the core, which FuseSoC copies
    into the simulation's folder."""
    if params():
        return params()
    record = Path(f"{cocotb.top._name}.json")
    if not record.exists():
        return {}
    rec = json.loads(record.read_text())
    return {"core": rec["core"], **{k: tuple(v) if isinstance(v, list) else v
                                    for k, v in rec["parameters"].items()}}


CASE = _case()
CORE = CASE.get("core", "")
#: the parameters the core under test was built with
BUILT = ip_case(CASE)[1] if CORE else {}
MEM_SIZE = 1 << 20


class TB:
    """Clock, active-low reset, the register driver on ``s_axi_*`` under stalls, and (for a
    core with a memory port) an AxiRam on ``m_axi_*`` whose five channels stall at random."""

    def __init__(self, dut, salt):
        self.dut = dut
        self.rng = rng(salt)
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        dut._log.info("seed %d", cocotb.RANDOM_SEED)
        Clock(dut.aclk, CLOCK_PERIOD_NS, unit="ns").start()
        self.clocking = dict(clock=dut.aclk, reset=dut.aresetn, reset_active_level=False)
        self.master = axil_master(dut, "s_axi", separator="_", **self.clocking)
        set_axil_pauses(self.master, self.rng)
        self.regmap = build_core(CORES[CORE], BUILT).block.regmap
        self.drv = axil_driver(self.master, self.regmap)
        self.ram = None
        if hasattr(dut, "m_axi_awvalid"):
            self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), size=MEM_SIZE, **self.clocking)
            quiet(self.ram.write_if.log, self.ram.read_if.log)
            for ch in (self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                       self.ram.write_if.b_channel, self.ram.read_if.ar_channel,
                       self.ram.read_if.r_channel):
                ch.set_pause_generator(pauses(self.rng))

    async def reset(self):
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.aclk, 4)
        self.dut.aresetn.value = 1
        await RisingEdge(self.dut.aclk)

    def stream(self, kind, prefix):
        """An AxiStreamSource or AxiStreamSink on ``<prefix>_t*``, stalling at random."""
        s = kind(AxiStreamBus.from_prefix(self.dut, prefix), **self.clocking)
        quiet(s.log)
        s.set_pause_generator(pauses(self.rng))
        return s

    async def wait_done(self, clear):
        return await wait_job_done(self.dut, self.drv, clear, 4_000_000, clock=self.dut.aclk)


# -- the DMA engine -------------------------------------------------------------------------------

@cocotb.test(skip=CORE != "dma")
async def test_dma_conversions(dut):
    """NCHW -> NHWC from the registers, then NVDLA feature data and back as chains in memory;
    the whole memory must equal the executor's."""
    from atomcube.model.dma.compile import dense_transpose, nvdla_feature
    from atomcube.model.dma.executor import execute
    from atomcube.model.nvdla.feature import FeatureFormat
    from atomcube.model.registers.dma import program, program_chain

    tb = TB(dut, salt=1)
    await tb.reset()
    await tb.drv.irq_enable.write(done=1)
    dense, image, chain = 0x1000, 0x40000, 0xF0000
    background = tb.np_rng.integers(0, 256, MEM_SIZE, dtype=np.uint8)
    tb.ram.write(0, background.tobytes())
    want = background.copy()
    fmt = FeatureFormat("int8", (1, 37, 3, 5))
    jobs = [("NCHW -> NHWC", dense_transpose((2, 5, 3, 7), 2, dense, image), False),
            ("NCHW -> NVDLA int8", nvdla_feature(fmt, dense, image), True),
            ("NVDLA int8 -> NCHW", nvdla_feature(fmt, dense, image, unpack=True), True)]
    for what, prog, as_chain in jobs:
        execute(prog, want)
        if as_chain:
            raw = prog.chain(chain)
            tb.ram.write(chain, raw)
            want[chain:chain + len(raw)] = np.frombuffer(raw, np.uint8)
            writes = program_chain(chain)
            for name, fields in writes:
                await tb.drv.write(name, **fields)
            st = await tb.wait_done({"done": 1, "error": 1, "desc_irq": 1})
            assert not st.error, f"{what}: error {(await tb.drv.error.read())}"
        else:
            for d in prog:
                for name, fields in program(d):
                    await tb.drv.write(name, **fields)
                st = await tb.wait_done({"done": 1, "error": 1, "desc_irq": 1})
                assert not st.error, f"{what}: error {(await tb.drv.error.read())}"
        got = tb.ram.read(0, MEM_SIZE)
        assert got == want.tobytes(), \
            f"{what}: memory differs from the executor's at byte {first_diff(got, want.tobytes())}"
        dut._log.info("%s: %d descriptors, memory equals the executor's", what, len(prog))


# -- the sparse weight decompressor ---------------------------------------------------------------

@cocotb.test(skip=CORE != "sparse")
async def test_sparse_stream_and_image(dut):
    """Random kernels of two precisions: the atoms on ``m_axis`` and the dense image in memory
    equal the model's, ``tlast`` on the last atom only; nothing else in memory changes."""
    from atomcube.model.nvdla.weights import WeightSpec, compress, plan_job
    from atomcube.model.registers.sparse import Error, program

    tb = TB(dut, salt=2)
    sink = tb.stream(AxiStreamSink, "m_axis")
    await tb.reset()
    await tb.drv.irq_enable.write(done=1)
    # one image of each element size: int8 atoms fill half of tdata, int16 all of it
    for what, spec, density in (("int8 K=20, C=30", WeightSpec("dc", "int8", (20, 30, 1, 3)), 0.5),
                                ("int16 K=10", WeightSpec("dc", "int16", (10, 21, 1, 3)), 0.3)):
        info = np.iinfo(spec.dtype)
        w = tb.np_rng.integers(info.min, info.max + 1, spec.shape).astype(spec.dtype)
        w[tb.np_rng.random(spec.shape) >= density] = 0
        image = spec.layout(w)
        packed = compress(image)
        job = plan_job(packed, base=0x1000, dst=True)
        background = tb.np_rng.integers(0, 256, MEM_SIZE, dtype=np.uint8)
        for name in ("wgs", "wmb", "weight"):
            at, raw = getattr(job, f"{name}_addr"), getattr(packed, name)
            background[at:at + raw.size] = raw
        tb.ram.write(0, background.tobytes())
        for name, fields in program(job, stream=True):
            await tb.drv.write(name, **fields)
        await tb.wait_done({"done": 1, "error": 1})
        code = (await tb.drv.error.read()).code
        assert code == Error.NONE, f"{what}: error {Error(code).name}"
        dense = image.data.tobytes()
        frame = await sink.recv(compact=False)
        assert sink.empty(), f"{what}: more than one frame (tlast before the last atom)"
        # an atom of one-byte elements fills the low half of tdata
        beat, used = 2 * BUILT["atom_elements"], BUILT["atom_elements"] * spec.element_bytes
        got = b"".join(bytes(frame.tdata[k:k + used]) for k in range(0, len(frame.tdata), beat))
        assert got == dense, \
            f"{what}: atom stream differs from the model at byte {first_diff(got, dense)}"
        want = background.copy()
        want[job.dst_addr:job.dst_addr + len(dense)] = np.frombuffer(dense, np.uint8)
        mem = tb.ram.read(0, MEM_SIZE)
        assert mem == want.tobytes(), \
            f"{what}: memory differs from the model's at byte {first_diff(mem, want.tobytes())}"
        dut._log.info("%s: %d dense bytes on the stream and in memory", what, len(dense))


# -- the LUT unit --------------------------------------------------------------------------------

def _signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@cocotb.test(skip=not CORE.startswith("lut"))
async def test_lut_samples(dut):
    """The fitting tool's sigmoid on random and ramp samples, some lanes empty (their bytes'
    ``tkeep`` low): every result, its table and state (``tuser``) and every counter equal the
    model's."""
    from atomcube.model.registers.lut import program
    from atomcube.sim.lut.checks import check_run, end_run

    tb = TB(dut, salt=3)
    source = tb.stream(AxiStreamSource, "s_axis")
    sink = tb.stream(AxiStreamSink, "m_axis")
    await tb.reset()
    flavor, lanes = BUILT["flavor"], BUILT["lanes"]
    in_bits, out_bits = {"sdp": (32, 32), "cdp": (38, 16)}[flavor]
    in_bytes, out_bytes = (in_bits + 7) // 8, out_bits // 8
    cfg = sigmoid_config(flavor)
    for reg, fields in program(cfg, flavor):
        await tb.drv.write(reg, **fields)
    for run in range(2):
        xs = [tb.rng.randint(-(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1)
              for _ in range(40)] + list(range(-9 << 12, 9 << 12, 1531))
        data, keep, sent = bytearray(), [], []
        for x in xs:
            # a lane with a sample, or (one in five) an empty lane before it
            if tb.rng.random() < 0.2:
                data += bytes(in_bytes)
                keep += [0] * in_bytes
            data += (x & ((1 << (8 * in_bytes)) - 1)).to_bytes(in_bytes, "little")
            keep += [1] * in_bytes
            sent.append(x)
        while len(keep) % (lanes * in_bytes):
            data += bytes(in_bytes)
            keep += [0] * in_bytes
        await tb.drv.ctrl.write(start=1)
        await source.send(AxiStreamFrame(bytes(data), tkeep=keep))
        frame = await sink.recv(compact=False)
        beat = lanes * out_bytes
        got = []
        for k in range(0, len(frame.tdata), out_bytes):
            if frame.tkeep[k]:
                user = frame.tuser[k - k % beat]
                lane = (k % beat) // out_bytes
                value = _signed(int.from_bytes(bytes(frame.tdata[k:k + out_bytes]), "little"),
                                out_bits)
                got.append((value, user >> lane & 1, user >> (lanes + 2 * lane) & 3))
        await end_run(tb.drv)
        await check_run(tb.drv, cfg, flavor, sent, got, f"run {run}")
        dut._log.info("run %d: %d samples match the model", run, len(sent))
