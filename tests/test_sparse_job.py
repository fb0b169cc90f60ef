"""The whole sparse weight decompressor in Amaranth's simulator, under ``hw.fabric.Checked``:
small jobs from the weights model, with random stalls on every AXI channel, the register bus
and the atom stream. The atom stream and the dense image written to memory must equal the
model's, and every look-ahead a stage takes from its neighbour (``hw.fabric.look_ahead``: the
decoder's ``run_next``, ``bus_error_next`` and its output's ready) must equal that neighbour's
signal a cycle later, which the checked design asserts in every cycle. The cocotb bench runs the
same block's Verilog on far more jobs; this run is what exercises those assertions."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from atomcube.hw.fabric import Checked
from atomcube.hw.sparse.decompressor import SparseDecompressor, SparseTiming
from atomcube.model.nvdla.weights import WeightSpec, compress, plan_job
from atomcube.model.registers.sparse import SPARSE, Error, program
from atomcube.sim.amaranth_axil import axil_read, axil_write

DEFAULT_TIMING = SparseTiming()
GUARD = 0xA5                  # what memory holds where nothing was loaded


def run_job(spec, density, seed, *, data_width=64, atom_elements=16, stall=0.3, latency=None,
            limit=100_000, timing=DEFAULT_TIMING):
    """One job through the decompressor (random weights of ``density``, read latency
    ``latency`` or a random one, each channel and the stream stalled with probability
    ``stall``): returns (error code, the stream's bytes, whether the last atom was marked, the
    destination's bytes, whether anything was written outside it, the model's image)."""
    rng = np.random.default_rng(seed)
    latency = latency if latency is not None else int(rng.integers(1, 21))
    print(f"{spec}: density {density}, seed {seed}, read latency {latency}")
    info = np.iinfo(spec.dtype)
    w = rng.integers(info.min, info.max + 1, spec.shape).astype(spec.dtype)
    w[rng.random(spec.shape) >= density] = 0
    image = spec.layout(w)
    packed = compress(image)
    job = plan_job(packed, base=0x1000, dst=True)
    want = image.data.tobytes()
    mem = bytearray([GUARD]) * (job.dst_addr + len(want) + 0x1000)
    for name in ("wgs", "wmb", "weight"):
        at = getattr(job, f"{name}_addr")
        raw = np.asarray(getattr(packed, name), np.uint8).tobytes()
        mem[at:at + len(raw)] = raw
    written = bytearray(len(mem))
    dut = SparseDecompressor(data_width=data_width, atom_elements=atom_elements, timing=timing)
    axi, bus = dut.m_axi, dut.s_axil
    BB = data_width // 8
    atom_bytes = atom_elements * spec.element_bytes
    out = {"atoms": bytearray(), "last": False, "code": None}

    async def registers(ctx):
        for name, fields in program(job, stream=True):
            await axil_write(ctx, bus, rng, SPARSE[name].offset, SPARSE[name].encode(fields))
        for _ in range(limit // 40):
            status = SPARSE["status"].decode(await axil_read(ctx, bus, rng,
                                                             SPARSE["status"].offset))
            if status["done"]:
                break
        else:
            raise AssertionError(f"{spec}: the job did not end")
        out["code"] = SPARSE["error"].decode(await axil_read(ctx, bus, rng,
                                                            SPARSE["error"].offset))["code"]

    async def memory(ctx):
        """An AXI4 memory: reads answered after ``latency`` cycles, in order, writes applied
        with their strobes, every channel stalled at random."""
        beats, writes, owed_b = [], [], 0
        cycle = 0
        while True:
            ctx.set(axi.arready, int(rng.random() >= stall))
            ctx.set(axi.awready, int(rng.random() >= stall))
            ctx.set(axi.wready, int(rng.random() >= stall))
            b_now = owed_b > 0 and rng.random() >= stall
            ctx.set(axi.bvalid, int(b_now))
            ctx.set(axi.bresp, 0)
            due = bool(beats) and beats[0][0] <= cycle and rng.random() >= stall
            ctx.set(axi.rvalid, int(due))
            if due:
                _, data, rid, last = beats[0]
                ctx.set(axi.rdata, data)
                ctx.set(axi.rid, rid)
                ctx.set(axi.rlast, last)
                ctx.set(axi.rresp, 0)
            await ctx.delay(1e-9)
            if ctx.get(axi.arvalid) and ctx.get(axi.arready):
                addr, n, rid = ctx.get(axi.araddr), ctx.get(axi.arlen) + 1, ctx.get(axi.arid)
                for k in range(n):
                    a = addr + k * BB
                    beats.append((cycle + latency, int.from_bytes(mem[a:a + BB], "little"),
                                  rid, int(k == n - 1)))
            if due and ctx.get(axi.rready):
                beats.pop(0)
            if ctx.get(axi.awvalid) and ctx.get(axi.awready):
                writes.append([ctx.get(axi.awaddr), ctx.get(axi.awlen) + 1])
            if ctx.get(axi.wvalid) and ctx.get(axi.wready):
                assert writes, "a W beat before its address"
                a = writes[0][0]
                data, strb = ctx.get(axi.wdata), ctx.get(axi.wstrb)
                for i in range(BB):
                    if strb >> i & 1:
                        mem[a + i] = data >> (8 * i) & 0xFF
                        written[a + i] = 1
                writes[0][0] += BB
                writes[0][1] -= 1
                assert bool(ctx.get(axi.wlast)) == (writes[0][1] == 0), "WLAST off its beat"
                if writes[0][1] == 0:
                    writes.pop(0)
                    owed_b += 1
            if b_now and ctx.get(axi.bready):
                owed_b -= 1
            await ctx.tick()
            cycle += 1

    async def sink(ctx):
        o = dut.o_atoms
        while True:
            ctx.set(o.ready, int(rng.random() >= stall))
            await ctx.delay(1e-9)
            if ctx.get(o.valid) and ctx.get(o.ready):
                assert not out["last"], "an atom after the one marked last"
                v = ctx.get(o.payload)
                out["atoms"] += (v.data & ((1 << (8 * atom_bytes)) - 1)).to_bytes(atom_bytes,
                                                                                 "little")
                out["last"] = bool(v.last)
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(registers)
    sim.add_testbench(memory, background=True)
    sim.add_testbench(sink, background=True)
    import os
    if os.environ.get("SPARSE_VCD"):
        with sim.write_vcd(os.environ["SPARSE_VCD"]):
            sim.run()
    else:
        sim.run()
    region = bytes(mem[job.dst_addr:job.dst_addr + len(want)])
    outside = any(written[:job.dst_addr]) or any(written[job.dst_addr + len(want):])
    return out["code"], bytes(out["atoms"]), out["last"], region, outside, want


JOBS = [
    (WeightSpec("dc", "int8", (40, 20, 1, 3)), 0.5),          # a partial group of 8
    (WeightSpec("dc", "int16", (20, 9, 3, 1)), 0.3),          # groups of 16 + 4
    (WeightSpec("dc", "int8", (70, 1, 1, 1)), 0.5),           # kernels shorter than an atom
    (WeightSpec("deconv", "int8", (12, 5, 4, 4), (2, 2)), 0.4),
    (WeightSpec("dc", "int8", (16, 64, 1, 1)), 0.05),         # nearly empty
]


@pytest.mark.parametrize("case", range(len(JOBS)))
def test_decompressor_job_keeps_its_look_aheads(case):
    """A job under random stalls everywhere: the model's image on the stream and in memory,
    nothing written elsewhere, and no look-ahead broken (the checked design asserts it)."""
    spec, density = JOBS[case]
    code, atoms, last, region, outside, want = run_job(spec, density, 9000 + case)
    assert code == Error.NONE, f"error code {Error(code).name}"
    assert last, "no atom marked last"
    assert atoms == want, "the atom stream differs from the model"
    assert region == want, "the image written differs from the model"
    assert not outside, "a byte written outside the destination"


def test_a_job_with_the_counters_ready_from_a_lut():
    """The segment counter's ready as a LUT on its stage in front (``counter_ready_ahead``
    off) moves the same image."""
    spec, density = JOBS[1]
    code, atoms, _, region, outside, want = run_job(
        spec, density, 9100, timing=SparseTiming(counter_ready_ahead=False))
    assert code == Error.NONE and atoms == want and region == want and not outside


def test_the_job_elaborates_with_the_decoders_checks(monkeypatch):
    """The run above is checked where it matters: elaborated under ``Checked``, the decoder
    takes its three look-aheads through the helper that asserts them."""
    from amaranth.hdl import Fragment

    from atomcube.hw import fabric

    names = []
    real = fabric.check_look_ahead

    def record(m, name, *args, **kwargs):
        names.append(name)
        return real(m, name, *args, **kwargs)

    monkeypatch.setattr(fabric, "check_look_ahead", record)
    Fragment.get(Checked(SparseDecompressor(data_width=64, atom_elements=16)), None)
    assert {"run", "bus_error", "x_ready", "r2_free"} <= set(names), names
