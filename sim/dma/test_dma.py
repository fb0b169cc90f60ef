"""cocotb bench for the DMA layout engine (hw/dma/engine.py) against model.dma.

Every conversion the compiler knows runs on random shapes, from the register form of each
descriptor or as a chain in memory, under read latency and random stalls on all five AXI
channels and the register bus. The destination must equal both the format function's image and
the reference executor's result, byte for byte, and no byte outside the destination may be
written. Random descriptors check the engine against the executor directly. Every error code
ends the job with that code and the failing descriptor's index, nothing is written after it,
and the next job runs.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from atomcube.model.dma.compile import (
    dense_transpose,
    dmp,
    nvdla_feature,
    nvdla_weights,
    sophgo_local,
)
from atomcube.model.dma.descriptor import (
    CONVERSIONS,
    DESCRIPTOR_BYTES,
    DIM_BYTES,
    DIMS_OFFSET,
    MAX_DIMS,
    TYPES,
    Conversion,
    Descriptor,
    Dim,
    Error,
    Program,
)
from atomcube.model.dma.executor import execute
from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.weights import WeightSpec
from atomcube.model.registers.dma import DMA, program, program_chain
from atomcube.model.sophgo.local import LocalMemory, LocalTensor
from atomcube.sim.axi_mem import AxiMemory
from atomcube.sim.harness import (
    axil_driver,
    axil_master,
    reset,
    rng,
    set_axil_pauses,
    start_clock,
    wait_job_done,
)
from atomcube.sim.runner import params

#: the address bits the engine is built with; below 20 the bench's memory is the engine's
#: whole address space, with the same tests in a smaller plan
AW = params().get("addr_width", 32)
#: whether the engine has the element conversion stage
CONVERT = params().get("convert", False)
#: whether the engine runs chains; built without, the bench runs a chain's descriptors from the
#: registers one job at a time, and checks that a chain's start ends with NO_CHAIN
CHAINS = params().get("chains", True)
TOP = 1 << AW
SMALL = AW < 20
MEM_SIZE = TOP if SMALL else 1 << 20
GUARD = 0xA5
DENSE = 0x1000
IMAGE = 0x6000 if SMALL else 0x40000
CHAIN = 0xF000 if SMALL else 0xF0000
#: a Sophgo NPU's local memory (its 8 NPUs' image lies at IMAGE)
NPU_BYTES = 1024 if SMALL else 8192


class TB:
    def __init__(self, dut, salt=0, latency=None, size=MEM_SIZE):
        self.dut = dut
        self.bb = params().get("data_width", 64) // 8
        self.rng = rng(salt)
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        start_clock(dut)
        self.master = axil_master(dut)
        self.drv = axil_driver(self.master, DMA)
        self.mem = AxiMemory(dut, "m_axi", size,
                             latency=latency if latency is not None else self.rng.randint(1, 30))

    def stalls(self, on=True, p=0.3):
        set_axil_pauses(self.master, self.rng if on else None)
        self.mem.set_pauses(self.rng if on else None, p)

    @classmethod
    async def start(cls, dut, salt=0, stalls=True, latency=None, size=MEM_SIZE):
        tb = cls(dut, salt, latency, size)
        tb.stalls(stalls)
        await reset(dut)
        await tb.drv.irq_enable.write(done=1)
        return tb

    async def wait_done(self, max_cycles=4_000_000):
        return await wait_job_done(self.dut, self.drv, {"done": 1, "error": 1, "desc_irq": 1},
                                   max_cycles)

    async def run(self, descs, chain, garble=None, max_cycles=4_000_000, chain_at=CHAIN):
        """Run descriptors; returns (error code, failing index, cycles) of the last job. With
        ``garble`` (a random.Random), the unused dimensions' fields get random words, in
        memory or in the registers, where the engine must ignore them. A job that has not
        ended after ``max_cycles`` fails the test. A chain goes at ``chain_at``; on an engine
        without chains its descriptors run from the registers instead."""
        if chain and CHAINS:
            raw = bytearray(Program(list(descs)).chain(chain_at))
            if garble is not None:
                for i, d in enumerate(descs):
                    at = i * DESCRIPTOR_BYTES + DIMS_OFFSET
                    raw[at + DIM_BYTES * len(d.dims):at + DIM_BYTES * MAX_DIMS] = \
                        garble.randbytes(DIM_BYTES * (MAX_DIMS - len(d.dims)))
            self.mem.load(chain_at, bytes(raw))
            self.mem.written[:] = False
            for name, fields in program_chain(chain_at):
                await self.drv.write(name, **fields)
            await self.wait_done(max_cycles)
            err = await self.drv.error.read()
            return err.code, err.index, (await self.drv.cycles.read()).value
        cycles = 0
        for i, d in enumerate(descs):
            for name, fields in program(d):
                unused = name.startswith("dim") and int(name[3]) >= len(d.dims)
                if garble is not None and unused:
                    fields = {"value": garble.getrandbits(32)}
                await self.drv.write(name, **fields)
            await self.wait_done(max_cycles)
            err = await self.drv.error.read()
            cycles += (await self.drv.cycles.read()).value
            if err.code:
                return err.code, i, cycles
        return 0, 0, cycles

    async def convert(self, what, prog, src_bytes, want, dst_at, chain, gap=None):
        """Load ``src_bytes`` at DENSE (or IMAGE for unpacking), run ``prog``, compare."""
        self.mem.fill(GUARD)
        src_at = DENSE if dst_at == IMAGE else IMAGE
        self.mem.load(src_at, src_bytes)
        model = self.mem.mem.copy()
        execute(prog, model)
        self.mem.written[:] = False
        code, _, cycles = await self.run(prog, chain)
        assert code == 0, f"{what}: error code {Error(code).name}"
        got = self.mem.mem[dst_at:dst_at + len(want)]
        assert (model[dst_at:dst_at + len(want)] == want).all(), f"{what}: executor differs " \
                                                                  f"from the format function"
        if not (got == want).all():
            bad = int(np.flatnonzero(got != want)[0])
            raise AssertionError(f"{what}: byte {bad} of {len(want)} is 0x{got[bad]:02x}, the "
                                 f"model has 0x{want[bad]:02x}")
        assert (self.mem.mem[:CHAIN] == model[:CHAIN]).all(), \
            f"{what}: memory differs from the executor"       # (the chain lives at CHAIN)
        self.assert_writes_within(dst_at, len(want), what)
        read, written = prog.bytes_moved()
        if chain and CHAINS:
            assert (await self.drv.bytes_written.read()).value == written
            assert (await self.drv.bytes_read.read()).value == read
            assert (await self.drv.descriptors.read()).value == len(prog)
        self.dut._log.info("%s: %d descriptors, %d bytes, %d cycles", what, len(prog),
                           len(want), cycles)

    def assert_writes_within(self, lo, size, what):
        touched = np.flatnonzero(self.mem.written)
        if touched.size:
            assert touched[0] >= lo and touched[-1] < lo + size, \
                f"{what}: wrote 0x{touched[0]:x}..0x{touched[-1]:x} outside the destination " \
                f"0x{lo:x}+{size}"

    def tensor(self, shape, dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            return self.np_rng.standard_normal(shape).astype(dtype)
        info = np.iinfo(dtype)
        return self.np_rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _bytes(a):
    return np.ascontiguousarray(a).view(np.uint8).ravel()


# -- conversions ----------------------------------------------------------------------------------

async def _feature(tb, precision, shape, chain, strides=False):
    fmt = FeatureFormat(precision, shape)
    if strides:
        fmt = FeatureFormat(precision, shape, fmt.line_stride + 32,
                            (shape[2]) * (fmt.line_stride + 32) + 64, None,
                            fill=1 if precision != "fp16" else -0.5)
    t = tb.tensor(shape, {"int8": np.int8, "int16": np.int16, "fp16": np.float16}[precision])
    what = f"NVDLA {precision} {shape}{' unpacked' if strides else ''}"
    await tb.convert(f"{what} pack", nvdla_feature(fmt, DENSE, IMAGE), _bytes(t),
                     fmt.pack(t, gap=GUARD), IMAGE, chain)
    await tb.convert(f"{what} unpack", nvdla_feature(fmt, DENSE, IMAGE, unpack=True),
                     fmt.pack(t, gap=GUARD), _bytes(t), DENSE, chain)


async def _sophgo(tb, start, shape, dtype, layout, mode, chain):
    lm = LocalMemory(8, NPU_BYTES)
    t = LocalTensor(lm, start * NPU_BYTES + 256, shape, dtype, layout, None, mode)
    x = tb.tensor(shape, {"int8": "i1", "int16": "<i2", "fp16": "<f2", "fp32": "<f4"}[dtype])
    image = lm.empty(GUARD)
    t.store(image, x)
    what = f"Sophgo {dtype} {layout} {mode or ''} NPU {start} {shape}"
    await tb.convert(f"{what} store", sophgo_local(t, DENSE, IMAGE), _bytes(x),
                     image.ravel(), IMAGE, chain)
    await tb.convert(f"{what} load", sophgo_local(t, DENSE, IMAGE, unpack=True), image.ravel(),
                     _bytes(x), DENSE, chain)


async def _dmp(tb, shape, transpose, chain):
    lay = DmpLayout(shape, transpose)
    x = tb.tensor(shape, np.float16)
    what = f"DMP {'DHWC' if transpose else 'DWHC'} {shape}"
    await tb.convert(f"{what} pack", dmp(lay, DENSE, IMAGE), _bytes(x), lay.pack(x), IMAGE,
                     chain)
    await tb.convert(f"{what} unpack", dmp(lay, DENSE, IMAGE, unpack=True), lay.pack(x),
                     _bytes(x), DENSE, chain)


async def _weights(tb, precision, shape, chain):
    spec = WeightSpec("dc", precision, shape)
    k = tb.tensor(shape, spec.dtype)
    what = f"NVDLA DC weights {precision} {shape}"
    await tb.convert(f"{what} layout", nvdla_weights(spec, DENSE, IMAGE), _bytes(k),
                     spec.layout(k).data, IMAGE, chain)


@cocotb.test()
async def test_nvdla_feature(dut):
    """Packed and unpacked strides, odd channel counts, all three precisions, both ways."""
    tb = await TB.start(dut, salt=1)
    await _feature(tb, "int8", (1, 40, 3, 5), chain=True)
    await _feature(tb, "int16", (2, 19, 2, 3), chain=False)
    await _feature(tb, "fp16", (1, 7, 3, 3), chain=True, strides=True)
    await _feature(tb, "int8", (2, 33, 1, 7), chain=True, strides=True)


@cocotb.test()
async def test_real_activation(dut):
    """A real network's activation: the first layer of PP-OCR's pretrained text detector on a
    generated page (sim/realnet.py), 16 x 32 x 32 int8, to NVDLA feature data and back, in
    nv_full's 32-byte atoms and nv_small's 8-byte ones."""
    from atomcube.sim.realnet import first_activation

    tb = await TB.start(dut, salt=11)
    t = first_activation()
    for config, back in (("nv_full", True), ("nv_small", False)):
        fmt = FeatureFormat("int8", t.shape, config=config)
        what = f"ppocr-det first activation {t.shape}, {config}"
        await tb.convert(f"{what} pack", nvdla_feature(fmt, DENSE, IMAGE), _bytes(t),
                         fmt.pack(t), IMAGE, chain=True)
        if back:
            await tb.convert(f"{what} unpack", nvdla_feature(fmt, DENSE, IMAGE, unpack=True),
                             fmt.pack(t), _bytes(t), DENSE, chain=True)


@cocotb.test()
async def test_sophgo(dut):
    """Start NPUs 0 to 7, aligned and compact, 4N and 2N with N not a multiple of the group."""
    tb = await TB.start(dut, salt=2)
    await _sophgo(tb, 0, (2, 5, 3, 4), "fp32", "aligned", None, True)
    await _sophgo(tb, 3, (3, 11, 2, 3), "int8", "aligned", "4N", True)
    await _sophgo(tb, 7, (3, 6, 2, 5), "int16", "compact", "2N", False)
    await _sophgo(tb, 5, (1, 9, 1, 7), "fp16", "compact", None, True)


@cocotb.test()
async def test_dmp(dut):
    """DWHC and DHWC, C not a multiple of 8, both ways."""
    tb = await TB.start(dut, salt=3)
    await _dmp(tb, (1, 20, 3, 4), False, True)
    await _dmp(tb, (2, 5, 2, 3), True, False)
    await _dmp(tb, (1, 17, 4, 2), True, True)


@cocotb.test()
async def test_weights_and_nhwc(dut):
    """NVDLA direct-convolution weights (partial groups and chunks) and NCHW <-> NHWC."""
    tb = await TB.start(dut, salt=4)
    await _weights(tb, "int8", (40, 70, 1, 3), True)
    await _weights(tb, "int16", (17, 9, 2, 2), True)
    for shape, eb, chain in (((2, 3, 4, 5), 1, True), ((1, 9, 3, 7), 2, False)):
        x = tb.tensor(shape, {1: np.int8, 2: np.int16}[eb])
        await tb.convert(f"NCHW->NHWC {shape}", dense_transpose(shape, eb, DENSE, IMAGE),
                         _bytes(x), _bytes(x.transpose(0, 2, 3, 1)), IMAGE, chain)
        await tb.convert(f"NHWC->NCHW {shape}",
                         dense_transpose(shape, eb, DENSE, IMAGE, unpack=True),
                         _bytes(x.transpose(0, 2, 3, 1)), _bytes(x), DENSE, chain)


def random_descriptor(r, bb):
    """A random descriptor that reads below IMAGE and writes between IMAGE and CHAIN. Some
    dimensions of extent 1 get strides of any 32 bits (a multiple of the element): the engine
    must not use them, nor (narrower than 32 bits) be misled by their low bits."""
    while True:
        eb = r.choice([1, 2, 4, 8])
        dims, span = [], 0
        for _ in range(r.randint(1, 5)):
            extent = r.randint(1, 6)
            if extent == 1 and r.random() < 0.3:
                dims.append(Dim(1, r.getrandbits(32) & -eb, r.getrandbits(32) & -eb))
                continue
            dst_stride = span + eb * r.randint(1, 3)
            dims.append(Dim(extent, eb * r.randint(0, 40), dst_stride, r.randint(0, extent)
                            if r.random() < 0.3 else extent))
            span = dst_stride * extent
        d = Descriptor(DENSE + eb * r.randint(0, 64), IMAGE + eb * r.randint(0, 64), eb,
                       tuple(dims), pad=r.getrandbits(64))
        if d.src_range()[1] <= IMAGE and d.dst_range()[1] <= CHAIN:
            return d


@cocotb.test()
async def test_random_descriptors(dut):
    """Random descriptors (element sizes, strides, padding) against the executor, with random
    words in the unused dimensions' fields."""
    tb = await TB.start(dut, salt=5)
    seed = tb.rng.getrandbits(32)
    dut._log.info("random descriptors: seed %d", seed)
    rr = random.Random(seed)
    for i in range(12):
        d = random_descriptor(rr, tb.bb)
        src = np.frombuffer(rr.randbytes(1 << 14), np.uint8)
        tb.mem.fill(GUARD)
        tb.mem.load(DENSE, src)
        model = tb.mem.mem.copy()
        execute([d], model)
        code, _, _ = await tb.run([d], chain=bool(i % 2), garble=rr)
        assert code == 0, f"random descriptor {i}: error {Error(code).name}: {d}"
        if not (tb.mem.mem[:CHAIN] == model[:CHAIN]).all():
            bad = int(np.flatnonzero(tb.mem.mem[:CHAIN] != model[:CHAIN])[0])
            raise AssertionError(f"random descriptor {i} differs at 0x{bad:x}: {d}")
        lo, hi = d.dst_range()
        tb.assert_writes_within(lo, hi - lo, f"random descriptor {i}")


@cocotb.test()
async def test_paths_and_long_bursts(dut):
    """Each of the engine's three paths on long runs at odd offsets: a copy (row path) and a
    transpose with long rows (tile path) across several 4 KiB pages, and a gather with a
    stride in both dimension 0s (element path). Reads and writes reach the engine's longest
    burst (and none passes it, or a 4 KiB boundary: the bench's memory checks). Then
    rows of pad only on the row path."""
    tb = await TB.start(dut, salt=10)
    max_burst = params().get("max_burst", 16)
    n = 4 * max_burst * tb.bb + 37                         # several longest bursts
    rows, cols = 8, max(600, 2 * max_burst * tb.bb + 5)
    cases = [
        # source and destination part way into a page, so bursts meet 4 KiB boundaries
        ("copy", Descriptor(DENSE + 0xFA3, IMAGE + 0xFD5, 1, (Dim(n, 1, 1),))),
        ("copy of fp16 with pad", Descriptor(DENSE + 2, IMAGE + 6, 2,
                                             (Dim(n // 2, 2, 2, n // 2 - 9),), pad=0x1234)),
        ("transpose", Descriptor(DENSE + 1, IMAGE + 3, 1,
                                 (Dim(rows, cols + 3, 1, rows - 2), Dim(cols, 1, rows)),
                                 pad=0x5A)),
        ("gather", Descriptor(DENSE, IMAGE, 2, (Dim(300, 6, 2), Dim(7, 2000, 600)))),
        # every run pad (valid 0 in dimension 0), the source ahead of the destination in its
        # beat: the row path must not wait for source beats it never asked for
        ("rows of pad", Descriptor(DENSE + 6, IMAGE + 2, 2, (Dim(22, 2, 2, 0), Dim(3, 52, 46)),
                                   pad=0x7E81)),
    ]
    src_bytes = min(1 << 15, IMAGE - DENSE)
    src = np.frombuffer(random.Random(tb.rng.getrandbits(32)).randbytes(src_bytes), np.uint8)
    for what, d in cases:
        tb.mem.fill(GUARD)
        tb.mem.load(DENSE, src)
        model = tb.mem.mem.copy()
        execute([d], model)
        tb.mem.written[:] = False
        code, _, cycles = await tb.run([d], chain=False)
        assert code == 0, f"{what}: error {Error(code).name}"
        if not (tb.mem.mem[:CHAIN] == model[:CHAIN]).all():
            bad = int(np.flatnonzero(tb.mem.mem[:CHAIN] != model[:CHAIN])[0])
            raise AssertionError(f"{what} differs at 0x{bad:x}: {d}")
        lo, hi = d.dst_range()
        tb.assert_writes_within(lo, hi - lo, what)
        dut._log.info("%s: %d bytes in %d cycles", what, d.dst_bytes, cycles)
    assert tb.mem.longest_read == max_burst, (tb.mem.longest_read, max_burst)
    assert tb.mem.longest_write == max_burst, (tb.mem.longest_write, max_burst)


# -- errors -------------------------------------------------------------------------------------

GOOD = Descriptor(DENSE, IMAGE, 1, (Dim(40, 1, 1),))


async def _expect_error(tb, descs, code, index, chain, what, read_errors=(), write_errors=()):
    tb.mem.fill(GUARD)
    tb.mem.load(DENSE, np.arange(4096, dtype=np.uint16).astype(np.uint8))
    tb.mem.read_errors = list(read_errors)
    tb.mem.write_errors = list(write_errors)
    got, idx, _ = await tb.run(descs, chain)
    tb.mem.read_errors, tb.mem.write_errors = [], []
    assert got == code, f"{what}: code {got}, expected {code.name}"
    assert idx == index, f"{what}: failing descriptor {idx}, expected {index}"
    # nothing written by the failing descriptor beyond what it had right before the error
    if code in (Error.DIMS, Error.ZERO_EXTENT, Error.ALIGN, Error.RANGE, Error.OVERLAP):
        before = Program(list(descs[:index]))
        model = np.full(MEM_SIZE, GUARD, np.uint8)
        model[DENSE:DENSE + 4096] = np.arange(4096, dtype=np.uint16).astype(np.uint8)
        execute(before, model)
        assert (tb.mem.mem[:CHAIN] == model[:CHAIN]).all(), f"{what}: wrote something"
    # the engine takes the next job
    await tb.convert(f"after {what}", Program([GOOD]), np.arange(40, dtype=np.uint8),
                     np.arange(40, dtype=np.uint8), IMAGE, chain=False)


@cocotb.test()
async def test_errors(dut):
    """Every error code, from registers and from a chain (with its index), then a good job."""
    tb = await TB.start(dut, salt=6)
    bad = [
        ("no dimensions", Descriptor(DENSE, IMAGE, 1, ()), Error.DIMS),
        ("valid beyond extent", Descriptor(DENSE, IMAGE, 1, (Dim(4, 1, 1, 5),)), Error.DIMS),
        ("destination dims out of order",
         Descriptor(DENSE, IMAGE, 1, (Dim(2, 1, 8), Dim(8, 2, 1))), Error.DIMS),
        ("zero extent", Descriptor(DENSE, IMAGE, 1, (Dim(4, 1, 1), Dim(0, 4, 4))),
         Error.ZERO_EXTENT),
        ("misaligned source", Descriptor(DENSE + 1, IMAGE, 2, (Dim(4, 2, 2),)), Error.ALIGN),
        ("misaligned stride", Descriptor(DENSE, IMAGE, 4, (Dim(4, 6, 4),)), Error.ALIGN),
        ("source past the top", Descriptor(0xFFFFFF00, IMAGE, 1, (Dim(512, 1, 1),)),
         Error.RANGE),
        ("destination past the top", Descriptor(DENSE, 0xFFFFFFF0, 1, (Dim(32, 1, 1),)),
         Error.RANGE),
        ("stride overflow", Descriptor(DENSE, IMAGE, 1, (Dim(2, 1, 1), Dim(3, 0x80000000, 4))),
         Error.RANGE),
        ("overlap", Descriptor(DENSE, DENSE + 16, 1, (Dim(64, 1, 1),)), Error.OVERLAP),
    ]
    if AW < 32:
        # the engine's own top, below the registers' 32 bits: its address bits above AW are
        # not there to carry an address past it
        bad += [
            ("source at the top", Descriptor(TOP, IMAGE, 1, (Dim(16, 1, 1),)), Error.RANGE),
            ("source past the top", Descriptor(TOP - 0x100, IMAGE, 1, (Dim(512, 1, 1),)),
             Error.RANGE),
            ("destination past the top", Descriptor(DENSE, TOP - 8, 1, (Dim(9, 1, 1),)),
             Error.RANGE),
            ("destination far past the top", Descriptor(DENSE, TOP + IMAGE, 1,
                                                        (Dim(16, 1, 1),)), Error.RANGE),
            ("stride past the top", Descriptor(DENSE, IMAGE, 1, (Dim(2, TOP, 1),)),
             Error.RANGE),
        ]
    # a conversion: refused by an engine without the stage, whatever it is
    cvt = Conversion.between("int8", "fp16")
    bad += [("unknown conversion", Descriptor(DENSE, IMAGE, 1, (Dim(8, 1, 2),),
                                              convert=Conversion(max(CONVERSIONS) + 1)),
             Error.CONVERT),
            ("conversion of the wrong element size",
             Descriptor(DENSE, IMAGE, 2, (Dim(8, 2, 2),), convert=cvt), Error.CONVERT),
            ("int8 -> fp16 into an odd address",
             Descriptor(DENSE, IMAGE + 1, 1, (Dim(8, 1, 2),), convert=cvt),
             Error.ALIGN if CONVERT else Error.CONVERT),
            ("int8 -> fp16 whose destination elements overlap",
             Descriptor(DENSE, IMAGE, 1, (Dim(8, 1, 1),), convert=cvt),
             Error.DIMS if CONVERT else Error.CONVERT)]
    for what, d, code in bad:
        assert d.error(AW, CONVERT) == code, what              # the model agrees
        await _expect_error(tb, [d], code, 0, False, what)
        await _expect_error(tb, [GOOD, d], code, 1, True, f"{what} (chain)")
    # bus errors
    big = Descriptor(DENSE, IMAGE, 1, (Dim(2048, 1, 1),))
    await _expect_error(tb, [big], Error.READ_ERROR, 0, False, "read error",
                        read_errors=[(DENSE + 1024, DENSE + 1040)])
    await _expect_error(tb, [GOOD, big], Error.WRITE_ERROR, 1, True, "write error",
                        write_errors=[(IMAGE + 512, IMAGE + 520)])
    if CHAINS:
        await _expect_error(tb, [GOOD, big], Error.FETCH_ERROR, 1, True, "fetch error",
                            read_errors=[(CHAIN + 128, CHAIN + 256)])
    # the next chain descriptor is fetched and checked while the one before it runs: an error
    # response in the running one is still the job's error, whatever the next one holds
    overlap = Descriptor(DENSE, DENSE + 16, 1, (Dim(64, 1, 1),))
    await _expect_error(tb, [big, overlap], Error.WRITE_ERROR, 0, True,
                        "write error before a failing descriptor",
                        write_errors=[(IMAGE + 1536, IMAGE + 1544)])
    await _expect_error(tb, [big, big], Error.READ_ERROR, 0, True,
                        "read error before a failed fetch",
                        read_errors=[(DENSE + 1024, DENSE + 1040), (CHAIN + 128, CHAIN + 256)])
    # a misaligned chain address, and one at the engine's top; without chains, any chain's
    # start ends the job, which reads and writes nothing
    tb.mem.fill(GUARD)
    tb.mem.load(CHAIN, Program([GOOD]).chain(CHAIN))
    tb.mem.written[:] = False
    starts = ((CHAIN + 8, Error.ALIGN), *(((TOP, Error.RANGE),) if AW < 32 else ())) \
        if CHAINS else ((CHAIN, Error.NO_CHAIN),)
    for at, code in starts:
        await tb.drv.write("chain_addr", value=at)
        await tb.drv.write("ctrl", start_chain=1)
        await tb.wait_done()
        err = await tb.drv.error.read()
        assert (err.code, err.index) == (code, 0), f"0x{at:x}: {err}"
        assert (await tb.drv.descriptors.read()).value == 0
    assert not tb.mem.written.any(), "a chain that failed to start wrote"


#: three tensors of 4 KiB for the tests of descriptors that run at once, their NCHW at DENSE +
#: k * LAYER and their NHWC at IMAGE + k * LAYER
LAYER_SHAPE = (1, 16, 16, 16)
LAYER = 4096


async def _run_layers(tb, descs, what, read_errors=(), write_errors=()):
    """Two 4 KiB tensors in NCHW at DENSE and DENSE + LAYER, ``descs`` run as a chain: returns
    its error code and index, and memory as the executor leaves it after the descriptors before
    the failing one."""
    tb.mem.fill(GUARD)
    for k in range(2):
        tb.mem.load(DENSE + k * LAYER, _bytes(tb.tensor(LAYER_SHAPE, np.int8)))
    model = tb.mem.mem.copy()
    tb.mem.read_errors, tb.mem.write_errors = list(read_errors), list(write_errors)
    code, index, _ = await tb.run(descs, True)
    tb.mem.read_errors, tb.mem.write_errors = [], []
    execute(Program(list(descs[:index] if code else descs)), model)
    tb.dut._log.info("%s: code %d at %d", what, code, index)
    return code, index, model


def _layer(k, unpack=False, to=None):
    """Tensor k's NCHW -> NHWC transpose (or back, to tensor ``to``'s NCHW place): one tile
    job."""
    (d,) = dense_transpose(LAYER_SHAPE, 1, DENSE + (k if to is None else to) * LAYER,
                           IMAGE + k * LAYER, unpack=unpack).descriptors
    return d


@cocotb.test(skip=not CHAINS)
async def test_next_descriptor_starts_before_the_one_before_ends(dut):
    """A chain of transposes. The second reads nothing the first writes: its first read goes
    out before the first's last write. The third reads what the second writes: its first read
    goes out only after the second's last write. Memory ends as the executor leaves it."""
    tb = await TB.start(dut, salt=41)
    descs = [_layer(0), _layer(1), _layer(1, unpack=True, to=2)]
    code, _, model = await _run_layers(tb, descs, "three transposes")
    assert code == 0, f"error {Error(code).name}"
    assert (tb.mem.mem[:CHAIN] == model[:CHAIN]).all(), "memory differs from the executor"
    assert (await tb.drv.descriptors.read()).value == 3
    mem = tb.mem
    second_read = mem.first_read(DENSE + LAYER, DENSE + 2 * LAYER)
    first_write = mem.last_write(IMAGE, IMAGE + LAYER)
    assert second_read < first_write, f"the second started at cycle {second_read}, after the " \
                                      f"first's last write at {first_write}"
    third_read = mem.first_read(IMAGE + LAYER, IMAGE + 2 * LAYER)
    second_write = mem.last_write(IMAGE + LAYER, IMAGE + 2 * LAYER)
    assert third_read > second_write, f"the third read at cycle {third_read} what the second " \
                                      f"wrote until {second_write}"


@cocotb.test(skip=not CHAINS)
async def test_errors_of_two_running_descriptors(dut):
    """Two transposes running at once. A read error of the second's, while the first still
    writes, ends the job with the second's index once the first is complete; a write error of
    the first's ends it with the first's index, and the second writes nothing, also when the
    second's read error came first."""
    tb = await TB.start(dut, salt=42)
    descs = [_layer(0), _layer(1)]
    second_src = (DENSE + LAYER, DENSE + LAYER + 8)
    code, index, model = await _run_layers(tb, descs, "read error", read_errors=[second_src])
    assert (code, index) == (Error.READ_ERROR, 1), f"{Error(code).name} at {index}"
    assert (await tb.drv.descriptors.read()).value == 1
    assert (tb.mem.mem[IMAGE:IMAGE + LAYER] == model[IMAGE:IMAGE + LAYER]).all(), \
        "the first descriptor is not complete"
    assert not tb.mem.written[IMAGE + LAYER:].any(), "the second descriptor wrote"
    assert tb.mem.first_read(*second_src) < tb.mem.last_write(IMAGE, IMAGE + LAYER), \
        "the second descriptor's read failed only after the first's last write"
    # the first descriptor's last beat, as a run without errors writes it (the pieces' order
    # does not depend on the stalls, so it is the last in every run): an error there comes
    # once the second has started
    code, _, _ = await _run_layers(tb, descs, "no error")
    assert code == 0, f"error {Error(code).name}"
    _, at, beats = max(e for e in tb.mem.aw_log if IMAGE <= e[1] < IMAGE + LAYER)
    last_beat = at + (beats - 1) * tb.bb
    code, index, _ = await _run_layers(tb, descs, "write error",
                                       write_errors=[(last_beat, last_beat + tb.bb)])
    assert (code, index) == (Error.WRITE_ERROR, 0), f"{Error(code).name} at {index}"
    assert not tb.mem.written[IMAGE + LAYER:].any(), "the second descriptor wrote"
    assert tb.mem.first_read(DENSE + LAYER, DENSE + 2 * LAYER) < \
        tb.mem.last_write(IMAGE, IMAGE + LAYER), "the second descriptor had not started"
    # both: the first's write error is the job's, though the second's read error came first
    code, index, _ = await _run_layers(tb, descs, "both errors", read_errors=[second_src],
                                       write_errors=[(last_beat, last_beat + tb.bb)])
    assert (code, index) == (Error.WRITE_ERROR, 0), f"{Error(code).name} at {index}"


@cocotb.test()
async def test_read_error_writes_only_good_data(dut):
    """After a read error, every byte written is the right byte, and none after the error's
    element."""
    tb = await TB.start(dut, salt=7)
    d = Descriptor(DENSE, IMAGE, 1, (Dim(4096, 1, 1),))
    src = np.random.default_rng(1).integers(0, 256, 4096).astype(np.uint8)
    tb.mem.fill(GUARD)
    tb.mem.load(DENSE, src)
    tb.mem.read_errors = [(DENSE + 2048, DENSE + 2056)]
    code, _, _ = await tb.run([d], False)
    tb.mem.read_errors = []
    assert code == Error.READ_ERROR
    touched = np.flatnonzero(tb.mem.written)
    assert touched.size == 0 or touched[-1] < IMAGE + 2048, "wrote past the failed read"
    assert (tb.mem.mem[touched] == src[touched - IMAGE]).all(), "wrote wrong data"


@cocotb.test()
async def test_start_while_busy_and_hwinfo(dut):
    tb = await TB.start(dut, salt=8, latency=20)
    info = await tb.drv.hwinfo.read()
    assert (info.data_bytes, info.max_dims, info.addr_width, info.chains, info.convert) == \
        (tb.bb, 5, AW, int(CHAINS), int(CONVERT))
    d = Descriptor(DENSE, IMAGE, 1, (Dim(3000, 1, 1),))
    tb.mem.fill(GUARD)
    src = np.arange(3000, dtype=np.uint16).astype(np.uint8)
    tb.mem.load(DENSE, src)
    for name, fields in program(d):
        await tb.drv.write(name, **fields)
    st = await tb.drv.status.read()
    assert st.busy
    await tb.drv.write("dst_addr", value=IMAGE + 0x4000)      # a second start: ignored
    await tb.drv.write("ctrl", start=1)
    await tb.wait_done()
    assert (tb.mem.mem[IMAGE:IMAGE + 3000] == src).all()
    assert not tb.mem.written[IMAGE + 0x4000:].any()


async def _irq(tb, limit=20_000):
    """Wait until the interrupt line rises, or ``limit`` cycles have passed."""
    for _ in range(limit // 100):
        if tb.dut.irq.value:
            return
        await ClockCycles(tb.dut.clk, 100)


@cocotb.test()
async def test_descriptor_interrupt_and_counters(dut):
    """A chain whose middle descriptor asks for an interrupt: status.desc_irq rises (and, when
    enabled, irq); the counters match the program. Then that descriptor alone, from the
    registers, with only desc_irq enabled (the only part on an engine without chains)."""
    tb = await TB.start(dut, salt=9)
    await tb.drv.irq_enable.write(done=1, desc_irq=0)
    src = np.arange(256, dtype=np.uint8)
    irq = tb.dut.irq
    descs = [Descriptor(DENSE, IMAGE, 1, (Dim(64, 1, 1),)),
             Descriptor(DENSE + 64, IMAGE + 64, 2, (Dim(32, 2, 2, 20),), pad=0xBEEF, irq=True),
             Descriptor(DENSE + 128, IMAGE + 128, 8, (Dim(16, 8, 8),))]
    if CHAINS:
        tb.mem.fill(GUARD)
        tb.mem.load(DENSE, src)
        model = tb.mem.mem.copy()
        execute(descs, model)
        tb.mem.load(CHAIN, Program(descs).chain(CHAIN))
        for name, fields in program_chain(CHAIN):
            await tb.drv.write(name, **fields)
        await _irq(tb)
        st = await tb.drv.status.read()
        assert st.done and st.desc_irq and not st.error, st
        assert (tb.mem.mem[:CHAIN] == model[:CHAIN]).all()
        read, written = Program(descs).bytes_moved()
        assert (await tb.drv.bytes_read.read()).value == read
        assert (await tb.drv.bytes_written.read()).value == written
        assert (await tb.drv.descriptors.read()).value == 3
        await tb.drv.status.write(done=1, desc_irq=1)
        st = await tb.drv.status.read()
        assert not st.done and not st.desc_irq
    # with only desc_irq enabled, the interrupt line follows it
    await tb.drv.irq_enable.write(done=0, desc_irq=1)
    for name, fields in program(descs[1]):
        await tb.drv.write(name, **fields)
    await _irq(tb)
    st = await tb.drv.status.read()
    assert irq.value and st.desc_irq and st.done, st
    await tb.drv.status.write(done=1, desc_irq=1)
    await ClockCycles(tb.dut.clk, 2)
    assert not irq.value


@cocotb.test(skip=not SMALL)
async def test_top_of_the_address_space(dut):
    """A narrow engine's memory is its whole address space: jobs that read or write up to its
    last byte complete on every path, from the registers and from a chain in its last 128
    bytes (which the chain's jobs read), and write nothing else."""
    tb = await TB.start(dut, salt=11)
    r = random.Random(tb.rng.getrandbits(32))
    last = TOP - DESCRIPTOR_BYTES                     # where a chain's one descriptor goes
    cases = [
        ("copy to the top", Descriptor(DENSE + 3, TOP - 1003, 1, (Dim(1003, 1, 1),)), False),
        ("copy from the top", Descriptor(TOP - 1234, IMAGE + 6, 2, (Dim(617, 2, 2),)), True),
        ("transpose to the top", Descriptor(DENSE, TOP - 420, 1,
                                            (Dim(6, 70, 1), Dim(70, 1, 6))), False),
        ("gather from the top", Descriptor(TOP - 2376, IMAGE, 8,
                                           (Dim(100, 24, 8, 99), Dim(3, 8, 800)),
                                           pad=r.getrandbits(64)), True),
        # every byte of the space, pad: an extent of 2**AW, one more than AW bits hold (one
        # run of the row path; a walker's outer level on the row path, its only level on the
        # element path)
        ("pad over the whole space, one run", Descriptor(0, 0, 1, (Dim(TOP, 1, 1, 0),),
                                                         pad=r.getrandbits(64)), False),
        ("pad over the whole space, rows", Descriptor(0, 0, 1, (Dim(1, 1, 1),
                                                                Dim(TOP, 0, 1, 0)),
                                                      pad=r.getrandbits(64)), False),
        ("pad over the whole space, elements", Descriptor(0, 0, 1, (Dim(TOP, 0, 1, 0),),
                                                          pad=r.getrandbits(64)), False),
    ]
    for what, d, chain in cases:
        assert d.error(AW) == Error.NONE, what
        tb.mem.fill(GUARD)
        lo, hi = d.src_range()
        tb.mem.load(lo, np.frombuffer(r.randbytes(hi - lo), np.uint8))
        if chain:                      # in memory before the model runs: a source reads it
            tb.mem.load(last, Program([d]).chain(last))
        model = tb.mem.mem.copy()
        execute([d], model)
        # (the longest, 64 K elements one a cycle, takes about 70,000 cycles)
        code, _, _ = await tb.run([d], chain, max_cycles=200_000, chain_at=last)
        assert code == 0, f"{what}: error {Error(code).name}"
        if not (tb.mem.mem == model).all():
            bad = int(np.flatnonzero(tb.mem.mem != model)[0])
            raise AssertionError(f"{what} differs at 0x{bad:x}: {d}")
        dlo, dhi = d.dst_range()
        tb.assert_writes_within(dlo, dhi - dlo, what)
        dut._log.info("%s: %d bytes up to 0x%x", what, d.dst_bytes, max(hi, dhi))
    # and every address on the port stayed below the top (m_axi's bits above AW are 0)
    assert tb.mem.highest == TOP, hex(tb.mem.highest)


# -- element conversions ------------------------------------------------------------------------

#: each type's extremes and the values next to them, put among the random source elements
_EDGES = {"int8": (-128, -127, -1, 0, 1, 126, 127), "uint8": (0, 1, 127, 128, 254, 255),
          "int16": (-32768, -32767, -129, -128, -1, 0, 1, 127, 128, 2049, 2051, 32767),
          "uint16": (0, 1, 255, 256, 2049, 2051, 4097, 32768, 65534, 65535),
          # fp16 as bits: +-0, the smallest denormal, +-1, +-0.5, the largest finite values,
          # +-infinity and NaNs
          "fp16": (0x0000, 0x8000, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x3800, 0xB800, 0x7BFF,
                   0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFD01),
          # a bit field's words: all ones, all zeros, one bit set at each end
          "ufield": (0, 0xFFFFFFFF, 1, 0x80000000, 0x55555555, 0xAAAAAAAA),
          "sfield": (0, 0xFFFFFFFF, 1, 0x80000000, 0x55555555, 0xAAAAAAAA)}


def _conversions(r, source, destination):
    """Offsets, scales and shifts for one conversion: the plain one, the extremes (saturation
    at both ends, fp16's largest values, its denormals and values too small for it), and one at
    random."""
    out = [(0, 1, 0), (-32768, 32767, 0), (32767, -32768, 3), (0, 1, 31), (5, -3, 20),
           (r.randint(-300, 300), r.randint(-600, 600), r.randint(0, 12))]
    if destination == "int8":
        out.append((0, 1, 8))                      # int16 >> 8: the top byte, truncated
    fields = [{}] * len(out)
    if source in ("ufield", "sfield"):             # 10:10:10:2's fields, and others at random
        fields = [{"bit": b, "width": w} for b, w in
                  ((0, 10), (10, 10), (20, 10), (30, 2), (16, 16), (31, 1))][:len(out) - 1]
        fields.append({"width": (w := r.randint(1, 16)), "bit": r.randint(0, 32 - w)})
    return [Conversion.between(source, destination, o, s, k, **f)
            for (o, s, k), f in zip(out, fields, strict=True)]


def _converting_descriptors(r, cvt, bb):
    """A descriptor per path for ``cvt``: a padded copy of rows (row path), a transpose (tile
    path) and a gather (element path), at odd element offsets."""
    source, destination = cvt.types
    es, ed = np.dtype(TYPES[source]).itemsize, np.dtype(TYPES[destination]).itemsize
    src, dst = DENSE + es * r.randint(0, 40), IMAGE + ed * r.randint(0, 40)
    n = r.randint(3, 6) * bb // es + r.randint(0, 7)
    rows = r.randint(2, 4)
    c, hw = r.randint(3, 11), r.randint(2 * bb // es, 3 * bb // es)
    pad = r.getrandbits(64)
    return [
        ("rows", Descriptor(src, dst, es, (Dim(n + 5, es, ed, n),
                                           Dim(rows, es * (n + 3), ed * (n + 9))), pad,
                            convert=cvt)),
        ("transpose", Descriptor(src, dst, es, (Dim(c, hw * es, ed), Dim(hw, es, c * ed)),
                                 convert=cvt)),
        ("gather", Descriptor(src, dst, es, (Dim(r.randint(5, 40), 3 * es, 2 * ed),
                                             Dim(3, 200 * es, 90 * ed)), pad, convert=cvt)),
    ]


@cocotb.test(skip=not CONVERT)
async def test_conversions(dut):
    """Every conversion on each path, with the offsets, scales and shifts that reach its
    saturation, fp16's largest values, denormals and underflow, and the types' extreme
    elements, from the registers and as chains, against the executor."""
    tb = await TB.start(dut, salt=12)
    seed = tb.rng.getrandbits(32)
    dut._log.info("conversions: seed %d", seed)
    r = random.Random(seed)
    for source, destination in CONVERSIONS.values():
        dtype = np.dtype(TYPES[source])
        for k, cvt in enumerate(_conversions(r, source, destination)):
            for path, d in _converting_descriptors(r, cvt, tb.bb):
                what = f"{source} -> {destination} {cvt} on the {path} path"
                # (fp16 as its bits: every pattern, with the edges above)
                bits = np.dtype("<u2") if source == "fp16" else dtype
                info = np.iinfo(bits)
                x = np.array([r.choice(_EDGES[source]) if r.random() < 0.3
                              else r.randint(info.min, info.max) for _ in range(6000)], bits)
                tb.mem.fill(GUARD)
                tb.mem.load(DENSE, x.view(np.uint8)[:IMAGE - DENSE])
                model = tb.mem.mem.copy()
                execute([d], model)
                tb.mem.written[:] = False
                code_, _, _ = await tb.run([d], chain=bool(k % 2))
                assert code_ == 0, f"{what}: error {Error(code_).name}"
                if not (tb.mem.mem[:CHAIN] == model[:CHAIN]).all():
                    bad = int(np.flatnonzero(tb.mem.mem[:CHAIN] != model[:CHAIN])[0])
                    raise AssertionError(f"{what}: byte 0x{bad:x} is 0x{tb.mem.mem[bad]:02x}, "
                                         f"the model has 0x{model[bad]:02x}: {d}")
                lo, hi = d.dst_range()
                tb.assert_writes_within(lo, hi - lo, what)
                if k % 2 and CHAINS:
                    assert (await tb.drv.bytes_written.read()).value == d.dst_bytes, what
                    assert (await tb.drv.bytes_read.read()).value == d.src_bytes, what


@cocotb.test(skip=not CONVERT)
async def test_one_pass_programs(dut):
    """The compiler's one-pass programs: a uint8 image straight into DMP's fp16 DWHC and DHWC
    input (mean 128, scale 1/128) and the fp16 output back to int8 (x 16, truncated and
    saturated); int16 activations into NVDLA int8 feature data (/ 8) and int8 feature data
    back to fp16 (x 3 / 16)."""
    tb = await TB.start(dut, salt=13)
    for shape, transpose in (((1, 11, 5, 6), False), ((2, 3, 4, 9), True)):
        lay = DmpLayout(shape, transpose)
        x = tb.tensor(shape, np.uint8)
        want = lay.pack(((x.astype(np.float64) - 128) / 128).astype(np.float16))
        await tb.convert(f"uint8 -> DMP fp16 {shape}",
                         dmp(lay, DENSE, IMAGE, dense_type="uint8", offset=128, shift=7),
                         _bytes(x), _bytes(want), IMAGE, chain=True)
        y = (tb.np_rng.standard_normal(shape) * 6).astype(np.float16)
        q = np.clip(np.trunc(y.astype(np.float64) * 16), -128, 127).astype(np.int8)
        await tb.convert(f"DMP fp16 -> int8 {shape}",
                         dmp(lay, DENSE, IMAGE, unpack=True, dense_type="int8", scale=16),
                         _bytes(lay.pack(y)), _bytes(q), DENSE, chain=False)
    fmt = FeatureFormat("int8", (1, 35, 3, 4))
    x16 = tb.tensor(fmt.shape, np.int16)
    q = np.clip(np.trunc(x16 / 8), -128, 127).astype(np.int8)
    await tb.convert("int16 -> NVDLA int8", nvdla_feature(fmt, DENSE, IMAGE, dense_type="int16",
                                                          shift=3),
                     _bytes(x16), fmt.pack(q), IMAGE, chain=True)
    await tb.convert("NVDLA int8 -> fp16", nvdla_feature(fmt, DENSE, IMAGE, unpack=True,
                                                         dense_type="fp16", scale=3, shift=4),
                     fmt.pack(q), _bytes((q.astype(np.float64) * 3 / 16).astype(np.float16)),
                     DENSE, chain=True)



@cocotb.test(skip=not CONVERT)
async def test_pixels(dut):
    """NVDLA pixel images to channels in one pass (``nvdla_pixel``): 8-bit packed formats in
    two channel orders with a mean per channel, a one-channel image, a two-plane YUV image,
    16-bit and signed samples, fp16 samples, all at an X offset; against the model's pixel
    decoder and conversion."""
    from atomcube.model.dma.compile import nvdla_pixel
    from atomcube.model.nvdla.pixel import PixelImage
    from atomcube.model.nvdla.precision import convert

    tb = await TB.start(dut, salt=14)
    cases = [("T_A8B8G8R8", "int8", "unsigned", (124, 117, 104, 0), 1, 0),
             ("T_A2B10G10R10", "int16", "unsigned", (512, 500, 490, 1), 60, 2),
             ("T_V10U10Y10A2", "fp16", "signed", (0, 3, -3, 0), 1, 9),
             ("T_B8G8R8A8", "fp16", "unsigned", (124, 117, 104, 0), 1, 7),
             ("T_R8", "int16", "signed", (-3,), 5, 1),
             ("T_Y8___U8V8_N444", "int8", "unsigned", (16, 128, 128), 3, 2),
             ("T_A16B16G16R16", "fp16", "unsigned", (1000, 0, -1000, 7), 1, 8),
             ("T_R16_I", "int8", "unsigned", (0,), 1, 6),
             ("T_A16B16G16R16_F", "int16", "unsigned", (1, 0, -2, 0), 100, 3)]
    for name, dense_type, sign, means, scale, shift in cases:
        img = PixelImage(name, 21, 5, x_offset=1, sign=sign)
        fmt = img.format
        if fmt.kind == "float":
            samples = (tb.np_rng.standard_normal(img.shape) * 50).astype(np.float16)
        else:
            signed = fmt.kind == "int" or sign == "signed"
            samples = np.stack([tb.np_rng.integers(*((-(1 << (w - 1)), 1 << (w - 1)) if signed
                                                     else (0, 1 << w)), img.shape[1:])
                                for _, _, w in fmt.fields])
        raw = img.pack(samples)
        decoded = img.unpack(raw)
        if fmt.kind == "float":
            want = np.stack([Conversion.between("fp16", dense_type, m, scale, shift).apply(
                decoded[c].view(np.uint8).reshape(*decoded[c].shape, 2))
                for c, m in enumerate(means)]).view(TYPES[dense_type])[..., 0]
        else:
            want = convert(decoded, np.array(means)[:, None, None], scale / (1 << shift),
                           dense_type)
        await tb.convert(f"{name} -> {dense_type}",
                         nvdla_pixel(img, IMAGE, DENSE, dense_type, means, scale, shift),
                         raw, _bytes(want), DENSE, chain=True)
