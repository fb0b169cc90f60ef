"""cocotb bench for the sparse weight decompressor (hw/sparse/decompressor.py) against
model.nvdla.weights.

Each job's surfaces come from the weights model's compressor. They are loaded into an AXI4
memory with read latency and random stalls on all five channels, and the job is programmed with
the register program (model.registers.sparse.program) over AXI4-Lite. The atom stream (under
random backpressure) and the dense image written to memory must equal the model's image byte for
byte. No byte outside the destination may be written. Error jobs must stop with the right code,
write nothing past the verified atoms, and leave the block ready for the next job.
"""

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi.stream import define_stream

from atomcube.model.board.driver import first_diff
from atomcube.model.nvdla.weights import WeightSpec, compress, plan_job
from atomcube.model.registers.sparse import SPARSE, Error, program
from atomcube.sim.axi_mem import AxiMemory
from atomcube.sim.harness import (
    axil_driver,
    axil_master,
    pauses,
    quiet,
    reset,
    rng,
    set_axil_pauses,
    start_clock,
    wait_job_done,
)
from atomcube.sim.runner import params

AtomBus, AtomTransaction, AtomSource, AtomSink, _ = define_stream(
    "Atoms", signals=["payload", "valid", "ready"])

MEM_SIZE = 1 << 21
GUARD = 0xA5
BASE = 0x1000


class TB:
    def __init__(self, dut, salt=0, latency=None):
        self.dut = dut
        p = params()
        self.atom = p.get("atom_elements", 64)
        self.dw = p.get("data_width", 128) // 8
        self.rng = rng(salt)
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        start_clock(dut)
        self.master = axil_master(dut)
        self.drv = axil_driver(self.master, SPARSE)
        self.mem = AxiMemory(dut, "m_axi", MEM_SIZE,
                             latency=latency if latency is not None else self.rng.randint(1, 30))
        self.sink = AtomSink(AtomBus.from_prefix(dut, "o_atoms", bus_separator="__"),
                             dut.clk, dut.rst)
        quiet(self.sink.log)
        self.steps = 0
        self.step_mismatch = None
        cocotb.start_soon(self.watch_step())

    async def watch_step(self):
        """Two decisions are registers worked out a cycle ahead: the decoder's step
        (hw/sparse/decoder.py) and X's hand-on, its load (hw/sparse/stages.py, the expander).
        In every cycle each must equal the same decision made from that cycle's registers
        (``step_ref``, ``x_done``). Notes the first cycle where one differs, and counts the
        steps."""
        dut = self.dut
        d, x = dut.decoder, dut.expander
        pairs = [("step", d.step, d.step_ref), ("X's hand-on", x.x_done_r, x.x_done)]
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            for name, early, ref in pairs:
                now, want = int(early.value), int(ref.value)
                if now != want and self.step_mismatch is None:
                    self.step_mismatch = (cycle, name, now, want)
            self.steps += int(d.step.value)

    def stalls(self, on=True, p=0.3):
        set_axil_pauses(self.master, self.rng if on else None)
        self.mem.set_pauses(self.rng if on else None, p)
        if on:
            self.sink.set_pause_generator(pauses(self.rng, p))
        else:
            self.sink.clear_pause_generator()

    @classmethod
    async def start(cls, dut, salt=0, stalls=True, latency=None):
        tb = cls(dut, salt, latency)
        tb.stalls(stalls)
        await reset(dut)
        await tb.drv.irq_enable.write(done=1)
        return tb

    # -- jobs -----------------------------------------------------------------------------------

    def kernels(self, spec, density):
        shape = spec.shape
        if spec.precision == "fp16":
            w = self.np_rng.standard_normal(shape).astype(np.float16)
        else:
            info = np.iinfo(spec.dtype)
            w = self.np_rng.integers(info.min, info.max + 1, shape).astype(spec.dtype)
            if spec.mode == "winograd":
                w = (w // 16).astype(spec.dtype)
        w[self.np_rng.random(shape) >= density] = 0
        return w

    async def wait_done(self, max_cycles=2_000_000):
        await wait_job_done(self.dut, self.drv, {"done": 1, "error": 1}, max_cycles)

    async def run(self, packed, *, write=True, stream=True, base=BASE, corrupt=None):
        """Load a compressed image, run it, and return (job, error code, stream bytes, cycles).
        ``corrupt(job, mem)`` may damage memory or the job before it starts."""
        self.mem.fill(GUARD)
        job = plan_job(packed, base=base, dst=True if write else False)
        for name in ("wgs", "wmb", "weight"):
            self.mem.load(getattr(job, f"{name}_addr"), getattr(packed, name))
        if corrupt is not None:
            job = corrupt(job, self.mem) or job
        self.mem.written[:] = False
        while not self.sink.empty():
            self.sink.recv_nowait()
        for name, fields in program(job, stream=stream):
            await self.drv.write(name, **fields)
        steps = self.steps
        await self.wait_done()
        if self.step_mismatch is not None:
            cycle, name, now, want = self.step_mismatch
            raise AssertionError(f"cycle {cycle}: the register of the decoder's {name} is "
                                 f"{now}, its tests from this cycle's registers say {want}")
        self.job_steps = self.steps - steps
        code = (await self.drv.error.read()).code
        cycles = (await self.drv.cycles.read()).value
        got = bytearray()
        ab = self.atom * packed.spec.element_bytes
        last_seen = False
        while not self.sink.empty():
            t = self.sink.recv_nowait()
            v = int(t.payload)
            got += (v & ((1 << (8 * ab)) - 1)).to_bytes(ab, "little")
            assert not last_seen, "atoms after the one marked last"
            last_seen = bool(v >> (16 * self.atom) & 1)
        return job, code, bytes(got), cycles, last_seen

    async def check(self, spec, w, what, *, write=True, stream=True):
        image = spec.layout(w)
        packed = compress(image)
        job, code, got, cycles, last = await self.run(packed, write=write, stream=stream)
        assert code == Error.NONE, f"{what}: error code {Error(code).name}"
        assert self.job_steps > 0, f"{what}: the decoder never stepped"
        want = image.data.tobytes()
        if stream:
            assert last, f"{what}: no atom marked last"
            assert got == want, f"{what}: stream differs from the model at byte " \
                                f"{first_diff(got, want)} of {len(want)}"
        else:
            assert got == b"", f"{what}: atoms on a disabled stream"
        dense = (await self.drv.dense_bytes.read()).value
        assert dense == len(want), f"{what}: dense_bytes {dense}, model {len(want)}"
        if write:
            region = self.mem.mem[job.dst_addr:job.dst_addr + len(want)].tobytes()
            assert region == want, f"{what}: memory image differs at byte " \
                                   f"{first_diff(region, want)}"
        self.assert_writes_within(job.dst_addr if write else None, len(want) if write else 0,
                                  what)
        s = packed.stats()
        self.dut._log.info("%s: %d dense bytes, density %.1f %%, %d cycles (%.2f bytes/cycle)",
                           what, len(want), 100 * s.overall_density, cycles,
                           len(want) / max(cycles, 1))
        return cycles

    def assert_writes_within(self, lo, size, what):
        touched = np.flatnonzero(self.mem.written)
        if touched.size:
            assert lo is not None, f"{what}: wrote 0x{touched[0]:x} with writes disabled"
            assert touched[0] >= lo and touched[-1] < lo + size, \
                f"{what}: wrote bytes 0x{touched[0]:x}..0x{touched[-1]:x} outside the " \
                f"destination 0x{lo:x}+{size}"


# -- directed corner cases from the spec ------------------------------------------------------

CORNERS = [
    ("int8 K=40 (partial group of 8), C=70 (chunk 64 + 6)",
     WeightSpec("dc", "int8", (40, 70, 3, 3)), 0.5),
    ("int16 K=20 (groups 16 + 4)", WeightSpec("dc", "int16", (20, 37, 3, 3)), 0.5),
    ("fp16 fully dense", WeightSpec("dc", "fp16", (16, 64, 1, 3)), 1.0),
    ("int8 90 % sparse", WeightSpec("dc", "int8", (64, 64, 3, 3)), 0.1),
    ("int8 deconvolution 2x2 sets", WeightSpec("deconv", "int8", (36, 9, 4, 4), (2, 2)), 0.5),
    ("int16 deconvolution 3x1", WeightSpec("deconv", "int16", (10, 5, 3, 5), (1, 3)), 0.4),
    ("int8 image, post-extension 2", WeightSpec("image", "int8", (33, 4, 7, 8),
                                                post_extension=2), 0.6),
    ("int16 Winograd", WeightSpec("winograd", "int16", (17, 5, 3, 3)), 0.5),
    ("int8 tiny kernels (groups shorter than an atom)", WeightSpec("dc", "int8", (70, 1, 1, 1)),
     0.5),
    # a partial group's size is worked out in two 12-bit halves of the kernel's elements: a
    # kernel of 6,147 (bits 12, 11, 1 and 0) takes both halves and the low half's top bit
    ("int8 K=3 (one partial group) of 6,147-element kernels",
     WeightSpec("dc", "int8", (3, 683, 3, 3)), 0.3),
]


@cocotb.test()
async def test_corner_cases(dut):
    """Every corner case in the spec, stream and memory image, under stalls."""
    tb = await TB.start(dut, salt=1)
    for what, spec, density in CORNERS:
        await tb.check(spec, tb.kernels(spec, density), what)


@cocotb.test()
async def test_real_layer(dut):
    """A layer of a pretrained network (PP-OCR's text detector, sim/realnet.py), pruned by half
    and quantised to int8 by atomcube net's flow: its compressed surfaces expand to the model's
    dense image, on the stream and in memory."""
    from atomcube.sim.realnet import layer_surface

    tb = await TB.start(dut, salt=9)
    surface, what = layer_surface()
    await tb.check(surface.spec, surface.spec.unlayout(surface.data), what)


@cocotb.test()
async def test_all_zero_group(dut):
    """A group with WGS = 0 between two with data; and an image with no non-zero at all."""
    tb = await TB.start(dut, salt=2)
    spec = WeightSpec("dc", "int8", (96, 20, 3, 3))
    w = tb.kernels(spec, 0.5)
    w[32:64] = 0
    await tb.check(spec, w, "middle group all zero")
    await tb.check(spec, np.zeros(spec.shape, np.int8), "all zero (empty weight surface)")


@cocotb.test()
async def test_stream_only_and_memory_only(dut):
    tb = await TB.start(dut, salt=3)
    spec = WeightSpec("dc", "int16", (24, 40, 3, 3))
    w = tb.kernels(spec, 0.3)
    await tb.check(spec, w, "stream only", write=False)
    await tb.check(spec, w, "memory only", stream=False)


@cocotb.test()
async def test_random_jobs(dut):
    """Random shapes, modes, precisions and densities, back to back, under a printed seed."""
    tb = await TB.start(dut, salt=4)
    r = tb.rng
    for n in range(params().get("random_jobs", 12)):
        mode = r.choice(["dc", "dc", "deconv", "image"])
        prec = r.choice(["int8", "int16", "fp16"])
        k, c = r.randint(1, 48), r.randint(1, 80 if mode != "image" else 4)
        rr, ss = r.randint(1, 4), r.randint(1, 4)
        stride = (r.randint(1, 2), r.randint(1, 2)) if mode == "deconv" else (1, 1)
        spec = WeightSpec(mode, prec, (k, c, rr, ss), stride)
        density = r.choice([0.0, 0.05, 0.3, 0.5, 0.9, 1.0])
        await tb.check(spec, tb.kernels(spec, density),
                       f"random job {n}: {mode} {prec} {spec.shape} stride {stride} "
                       f"density {density}")


# -- errors -----------------------------------------------------------------------------------

async def _expect_error(tb, packed, corrupt, code, what, group=None):
    job, got_code, got, _, _ = await tb.run(packed, corrupt=corrupt)
    assert got_code == code, f"{what}: error code {Error(got_code).name}, expected {code.name}"
    if group is not None:
        got_group = (await tb.drv.error.read()).group
        assert got_group == group, f"{what}: error in group {got_group}, expected {group}"
    st = await tb.drv.status.read()
    assert not st.busy
    dense = (await tb.drv.dense_bytes.read()).value
    # the atoms that went out are the expansion of what memory held, in order
    image = _expand(tb.mem, job, packed.spec)
    assert got == image[:len(got)], f"{what}: atoms before the error differ from the expansion"
    assert len(got) <= dense
    if code == Error.WGS_MISMATCH:
        # the failing segment is the group's last (the cases change one mask bit, so the
        # group's sum is off only at its end), and it completes the group's last atom (an int8
        # group, 32 kernels, ends on an atom): nothing of it may reach the stream
        end = (group + 1) * 32 * job.bytes_per_kernel
        assert len(got) < end, (f"{what}: {len(got)} bytes out, up to the failing group's end "
                                f"({end}): the segment that failed the WGS check went out")
    tb.assert_writes_within(job.dst_addr % MEM_SIZE, dense, what)
    lo = job.dst_addr % MEM_SIZE
    n = min(dense, MEM_SIZE - lo)                  # the top-of-memory case stops at the end
    written, mask = tb.mem.mem[lo:lo + n], tb.mem.written[lo:lo + n]
    assert (written[mask] == np.frombuffer(image[:n], np.uint8)[mask]).all(), \
        f"{what}: a written byte differs from the stream"
    tb.dut._log.info("%s: stopped with %s after %d dense bytes", what, Error(code).name, dense)


@cocotb.test()
async def test_errors(dut):
    """Each error: the code, no write outside what was verified, and the next job runs."""
    tb = await TB.start(dut, salt=5)
    spec = WeightSpec("dc", "int8", (64, 16, 3, 3))      # two groups, 9 KiB: quick on Icarus
    after = WeightSpec("dc", "int16", (20, 7, 1, 3))
    packed = compress(spec.layout(tb.kernels(spec, 0.5)))
    full = compress(spec.layout(_fill_weight_surface(tb.kernels(spec, 0.5))))
    cases = [
        ("misaligned WMB address", lambda job, mem: _Raw(job, wmb_addr=job.wmb_addr + 0x80),
         Error.ALIGN),
        ("misaligned destination", lambda job, mem: _Raw(job, dst_addr=job.dst_addr + 0x40),
         Error.ALIGN),
        ("weight size not a multiple of 128",
         lambda job, mem: _Raw(job, weight_bytes=job.weight_bytes - 4), Error.SIZE),
        ("zero groups", lambda job, mem: _Raw(job, groups=0), Error.SIZE),
        ("WGS surface too small", lambda job, mem: _Raw(job, groups=40, wgs_bytes=128),
         Error.SIZE),
        ("weight surface past the address space",
         lambda job, mem: _Raw(job, weight_addr=0xFFFF_FF00), Error.SIZE),
        ("popcount above WGS (a mask bit set)", _flip_mask_bit(1, set_bit=True),
         Error.WGS_MISMATCH, 1),
        ("popcount below WGS (a mask bit cleared)", _flip_mask_bit(0, set_bit=False),
         Error.WGS_MISMATCH, 0),
        # the extra bit asks for a byte past the weight surface, which has no padding to
        # supply it: the check must not wait for that byte (it hung so, seed 1795745239)
        ("popcount above WGS in the last group of an unpadded weight surface",
         _flip_mask_bit(1, set_bit=True), Error.WGS_MISMATCH, 1, full),
        ("WGS total beyond the weight surface", _inflate_wgs, Error.WGS_OVERFLOW),
        ("WMB surface too short", lambda job, mem: _Raw(job, wmb_bytes=128), Error.WMB_SHORT),
        ("read error on the packed weights", _read_error, Error.READ_ERROR),
        ("write error on the destination", _write_error, Error.WRITE_ERROR),
        ("destination past the address space",
         lambda job, mem: _Raw(job, dst_addr=0xFFFF_F000), Error.DST_RANGE),
    ]
    for what, corrupt, code, *rest in cases:   # the group, where the test knows it; the image
        group = rest[0] if rest else None
        image = rest[1] if len(rest) > 1 else packed
        tb.mem.read_errors, tb.mem.write_errors = [], []
        await _expect_error(tb, image, corrupt, code, what, group)
        tb.mem.read_errors, tb.mem.write_errors = [], []
        await tb.check(after, tb.kernels(after, 0.4), f"job after '{what}'")


def _expand(mem, job, spec):
    """The dense image the surfaces in memory decode to, WGS ignored (numpy, not the model: the
    model refuses inconsistent surfaces)."""
    n, eb = spec.elements, spec.element_bytes
    wmb = mem.mem[job.wmb_addr % MEM_SIZE:][:-(-n // 8)]
    mask = np.unpackbits(wmb, count=n, bitorder="little").astype(bool)
    bits = np.uint8 if eb == 1 else np.uint16
    values = mem.mem[job.weight_addr % MEM_SIZE:][:job.weight_bytes].view(bits)
    dense = np.zeros(spec.image_bytes // eb, bits)
    idx = np.flatnonzero(mask)[:values.size]
    dense[idx] = values[:idx.size]
    return dense.view(np.uint8).tobytes()


def _fill_weight_surface(w):
    """``w`` with its first non-zeros (all in group 0) cleared until the packed non-zeros fill
    whole 128-byte lines: a weight surface with no padding after its last byte (int8)."""
    flat = w.reshape(-1)                            # kernel-major: the first kernel first
    flat[np.flatnonzero(flat)[:np.count_nonzero(w) % 128]] = 0
    assert np.count_nonzero(w) % 128 == 0
    return w


class _Raw(dict):
    """A job with fields changed past what DecompressJob accepts (the hardware must refuse)."""

    def __init__(self, job, **changes):
        super().__init__({**job.to_dict(), **changes})

    def __getattr__(self, k):
        return self[k]


def _flip_mask_bit(group, set_bit):
    """Set a clear mask bit, or clear a set one, inside ``group`` (int8, 32 kernels a group)."""
    def corrupt(job, mem):
        first = job.bytes_per_kernel * 32 * group
        for e in range(first, first + job.bytes_per_kernel * 32):
            b, bit = job.wmb_addr + e // 8, e % 8
            if bool(mem.mem[b] >> bit & 1) != set_bit:
                mem.mem[b] ^= 1 << bit
                return
        raise AssertionError("no mask bit to flip")
    return corrupt


def _inflate_wgs(job, mem):
    a = job.wgs_addr + 4                           # group 1's size
    v = int.from_bytes(mem.mem[a:a + 4].tobytes(), "little") + job.weight_bytes
    mem.mem[a:a + 4] = np.frombuffer(v.to_bytes(4, "little"), np.uint8)


def _read_error(job, mem):
    mem.read_errors = [(job.weight_addr + 256, job.weight_addr + 512)]


def _write_error(job, mem):
    mem.write_errors = [(job.dst_addr + 1024, job.dst_addr + 1088)]


@cocotb.test()
async def test_start_while_busy_is_ignored(dut):
    tb = await TB.start(dut, salt=6, latency=20)
    spec = WeightSpec("dc", "int8", (64, 40, 3, 3))
    image = spec.layout(tb.kernels(spec, 0.5))
    packed = compress(image)
    tb.mem.fill(GUARD)
    job = plan_job(packed, base=BASE, dst=True)
    for name in ("wgs", "wmb", "weight"):
        tb.mem.load(getattr(job, f"{name}_addr"), getattr(packed, name))
    for name, fields in program(job):
        await tb.drv.write(name, **fields)
    await tb.drv.ctrl.write(start=1, write_enable=1, stream_enable=1)     # while busy
    await tb.wait_done()
    assert (await tb.drv.error.read()).code == 0
    await ClockCycles(dut.clk, 50)
    assert not (await tb.drv.status.read()).done, "a second job ran"
    assert tb.mem.mem[job.dst_addr:job.dst_addr + image.data.size].tobytes() == \
        image.data.tobytes()


@cocotb.test()
async def test_hwinfo(dut):
    tb = await TB.start(dut, salt=7)
    info = await tb.drv.hwinfo.read()
    assert (info.data_bytes, info.atom_elements) == (tb.dw, tb.atom)
