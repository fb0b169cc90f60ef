"""cocotb bench for the LUT unit (hw/lut/unit.py) against model.nvdla.lut.

Every output sample (value, chosen table, state) and every statistics counter is compared with
the model. Tables and registers are loaded with the register driver from the same register
program the fitting tool writes; streams run with and without random idle cycles on the input
and backpressure on the output. The integer pipeline's tests run on units that have it, the
FP16 pipeline's on units that have that (the case's ``precision``).
"""


import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi.stream import define_stream

from atomcube.model.nvdla.lut import LE, LO, LutConfig
from atomcube.model.registers.lut import lut_regmap, program
from atomcube.sim.harness import (
    axil_driver,
    axil_master,
    pauses,
    quiet,
    reset,
    rng,
    set_axil_pauses,
    start_clock,
)
from atomcube.sim.lut.checks import check_run, end_run
from atomcube.sim.lut.stimulus import fp16_samples, random_fp16_config
from atomcube.sim.runner import params

StreamBus, StreamTransaction, StreamSource, StreamSink, _ = define_stream(
    "LutStream", signals=["payload", "valid", "ready"])

BITS = {"sdp": 32, "cdp": 38}
OUT_BITS = {"sdp": 32, "cdp": 16}
BACKPRESSURE = [False, True]
TIMEOUT = dict(timeout_time=20, timeout_unit="ms")
#: the pipelines the case's unit has
PRECISION = params().get("precision", "int")
NO_INT = cocotb.skipif(PRECISION == "fp16", reason="the unit has no integer pipeline")
NO_FP16 = cocotb.skipif(PRECISION == "int", reason="the unit has no FP16 pipeline")


def signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class TB:
    def __init__(self, dut, backpressure=False, salt=0):
        self.dut = dut
        p = params()
        self.lanes = p.get("lanes", 1)
        self.flavor = p.get("flavor", "sdp")
        self.serial = p.get("serial", False)
        self.precision = p.get("precision", "int")
        self.rng = rng(salt)
        self.np_rng = np.random.default_rng(self.rng.getrandbits(32))
        self.map = lut_regmap(self.flavor)
        start_clock(dut)
        self.master = axil_master(dut)
        self.drv = axil_driver(self.master, self.map)
        self.source = StreamSource(StreamBus.from_prefix(dut, "i_stream", bus_separator="__"),
                                   dut.clk, dut.rst)
        self.sink = StreamSink(StreamBus.from_prefix(dut, "o_stream", bus_separator="__"),
                               dut.clk, dut.rst)
        quiet(self.source.log, self.sink.log)
        self.set_backpressure(backpressure)

    def set_backpressure(self, on):
        """Random idle cycles on the input, backpressure on the output, and stalls on all five
        AXI4-Lite channels; or none."""
        set_axil_pauses(self.master, self.rng if on else None)
        if on:
            self.source.set_pause_generator(pauses(self.rng, 0.3))
            self.sink.set_pause_generator(pauses(self.rng, 0.3))
        else:
            self.source.clear_pause_generator()
            self.sink.clear_pause_generator()

    @classmethod
    async def start(cls, dut, backpressure=False, salt=0):
        tb = cls(dut, backpressure, salt)
        await reset(dut)
        return tb

    # -- programming ---------------------------------------------------------------------------

    async def load(self, cfg: LutConfig):
        for reg, fields in program(cfg, self.flavor):
            await self.drv.write(reg, **fields)

    async def read_table(self, table_id, first, count):
        await self.drv.write("lut_access_cfg", addr=first, table_id=table_id, access_type=0)
        return [signed((await self.drv.read("lut_access_data")).data, 16) for _ in range(count)]

    # -- streams -------------------------------------------------------------------------------

    def pack(self, xs, mask, last):
        W, L = BITS[self.flavor], self.lanes
        v = 0
        for k, x in enumerate(xs):
            v |= (int(x) & ((1 << W) - 1)) << (k * W)
        v |= mask << (L * W)
        v |= int(last) << (L * W + L)
        return v

    def unpack(self, v):
        OW, L = OUT_BITS[self.flavor], self.lanes
        out = [signed(v >> (k * OW), OW) for k in range(L)]
        pos = L * OW
        chosen = [(v >> (pos + k)) & 1 for k in range(L)]
        pos += L
        state = [(v >> (pos + 2 * k)) & 3 for k in range(L)]
        pos += 2 * L
        mask = (v >> pos) & ((1 << L) - 1)
        last = (v >> (pos + L)) & 1
        return out, chosen, state, mask, last

    async def run(self, xs, holes=0.0):
        """One run: start, stream ``xs`` (some lanes left empty with probability ``holes``),
        collect the results. Returns the samples sent, the results, and the cycles taken."""
        await self.drv.ctrl.write(start=1)
        L = self.lanes
        sent, transfers = [], []
        i = 0
        while i < len(xs):
            lane_x = [0] * L
            mask = 0
            for k in range(L):
                if i < len(xs) and not (holes and self.rng.random() < holes):
                    lane_x[k] = xs[i]
                    mask |= 1 << k
                    sent.append(xs[i])
                    i += 1
            transfers.append((lane_x, mask))
        if not transfers:
            transfers.append(([0] * L, 0))
        for n, (lane_x, mask) in enumerate(transfers):
            await self.source.send(StreamTransaction(payload=self.pack(
                lane_x, mask, n == len(transfers) - 1)))
        got = []
        while True:
            t = await self.sink.recv()
            out, chosen, state, mask, last = self.unpack(int(t.payload))
            got += [(out[k], chosen[k], state[k]) for k in range(L) if mask >> k & 1]
            if last:
                break
        await end_run(self.drv)
        return sent, got

    async def check(self, cfg, xs, holes=0.0, what=""):
        sent, got = await self.run(xs, holes)
        await check_run(self.drv, cfg, self.flavor, sent, got, what)
        self.dut._log.info("%s: %d samples match the model", what, len(sent))

    # -- stimulus -------------------------------------------------------------------------------

    def boundary_inputs(self, cfg, count=200):
        W = BITS[self.flavor]
        lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
        xs = [lo, hi, 0, -1, 1]
        for start, s, n in ((cfg.le_start, cfg.le_index_select, 64),
                            (cfg.lo_start, cfg.lo_index_select, 256)):
            step = 1 << max(min(s, 40), 0)
            for k in (0, 1, n - 1, n, n + 1):
                xs += [start + k * step + d for d in (-1, 0, 1)]
        if cfg.le_function == 0:
            for e in range(max(cfg.le_index_offset, 0), min(cfg.le_index_offset + 65, W - 1)):
                xs.append(cfg.le_start + (1 << e))
        xs += [self.rng.randint(lo, hi) for _ in range(count)]
        xs += [self.rng.randint(-70000, 70000) for _ in range(count)]
        return [min(max(x, lo), hi) for x in xs]

    def random_config(self):
        r, W = self.rng, BITS[self.flavor]
        lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
        bound = lambda: r.choice([r.randint(lo, hi), r.randint(-5000, 5000)])
        exp = r.random() < 0.4
        return LutConfig(
            le_table=self.np_rng.integers(-32768, 32768, 65),
            lo_table=self.np_rng.integers(-32768, 32768, 257),
            le_function=0 if exp else 1,
            le_index_offset=r.choice([r.randint(-128, W - 1), r.randint(-3, 8)]),
            le_index_select=r.choice([r.randint(-128, 127), r.randint(-3, 40)]),
            lo_index_select=r.choice([r.randint(-128, 127), r.randint(-3, 40)]),
            le_start=bound(), le_end=bound(), lo_start=bound(), lo_end=bound(),
            **{f"{t}_{s}_scale": r.randint(-32768, 32767) for t in ("le", "lo")
               for s in ("uflow", "oflow")},
            **{f"{t}_{s}_shift": r.randint(0, 31) for t in ("le", "lo")
               for s in ("uflow", "oflow")},
            uflow_priority=r.randint(0, 1), oflow_priority=r.randint(0, 1),
            hybrid_priority=r.randint(0, 1))


def fitted_config(flavor):
    """The fitting tool's sigmoid (split layout, as `atomcube lut fit` chooses it)."""
    from atomcube.model.board.driver import sigmoid_config

    return sigmoid_config(flavor)


@NO_INT
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_fitted_sigmoid(dut, backpressure):
    """Tables from the fitting tool, loaded with the driver; a dense ramp and random inputs."""
    tb = await TB.start(dut, backpressure, salt=1)
    cfg = fitted_config(tb.flavor)
    await tb.load(cfg)
    xs = list(range(-13 << 12, 13 << 12, 397)) + tb.boundary_inputs(cfg, 50)
    await tb.check(cfg, xs, what="fitted sigmoid")


@NO_INT
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_random_tables(dut, backpressure):
    """Random registers and tables (both LE modes, any selects, offsets and slopes), random and
    boundary inputs, some lanes left empty."""
    tb = await TB.start(dut, backpressure, salt=2)
    dut._log.info("seed %d", cocotb.RANDOM_SEED)
    for n in range(4):
        cfg = tb.random_config()
        await tb.load(cfg)
        await tb.check(cfg, tb.boundary_inputs(cfg, 60), holes=0.2 * (n % 2),
                       what=f"random config {n}")


@NO_INT
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_directed_boundaries(dut, backpressure):
    """The spec's boundary cases: x == START, the last entry, negative and wide selects,
    exponential offsets with the bias, slope shifts 0/15/16/31, every priority combination."""
    tb = await TB.start(dut, backpressure, salt=3)
    W = BITS[tb.flavor]
    top = (1 << (W - 1)) - 1
    ramp = np.arange(257) * 100
    cases = [
        ("linear edges", LutConfig(lo_table=ramp, lo_start=1000, lo_index_select=4,
                                   lo_end=1000 + 4096, le_start=top, uflow_priority=LO,
                                   oflow_priority=LO, hybrid_priority=LO)),
        ("negative select", LutConfig(lo_table=ramp, lo_start=0, lo_index_select=-2,
                                      le_start=top, uflow_priority=LO, oflow_priority=LO,
                                      hybrid_priority=LO)),
        ("select 40", LutConfig(lo_table=ramp, lo_start=-top - 1, lo_index_select=40,
                                le_start=top, uflow_priority=LO, oflow_priority=LO,
                                hybrid_priority=LO)),
    ]
    for off in (-5, 0, 3):
        cases.append((f"exp offset {off}", LutConfig(
            le_table=np.arange(65) * 10 - 300, le_function=0, le_index_offset=off, le_start=100,
            le_end=top, le_uflow_scale=3, le_uflow_shift=1, lo_start=top)))
    for sh in (0, 15, 16, 31):
        for scale in (32767, -32768, 5):
            cases.append((f"shift {sh} scale {scale}", LutConfig(
                lo_table=ramp, lo_start=0, lo_index_select=0, lo_end=256, le_start=top,
                lo_uflow_scale=scale, lo_uflow_shift=sh, lo_oflow_scale=scale,
                lo_oflow_shift=sh, uflow_priority=LO, oflow_priority=LO, hybrid_priority=LO)))
    for u in (0, 1):
        for o in (0, 1):
            for h in (0, 1):
                cases.append((f"priorities {u}{o}{h}", LutConfig(
                    le_table=np.full(65, 11), lo_table=np.full(257, 22), le_start=0,
                    le_index_select=0, le_end=64, lo_start=32, lo_index_select=1, lo_end=544,
                    uflow_priority=u, oflow_priority=o, hybrid_priority=h)))
    for what, cfg in cases:
        await tb.load(cfg)
        await tb.check(cfg, tb.boundary_inputs(cfg, 8), what=what)


@NO_INT
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_table_readback(dut, backpressure):
    """Entries read back through LUT_ACCESS_DATA from any entry; past a table's end reads 0;
    the 10-bit address wraps."""
    tb = await TB.start(dut, backpressure, salt=4)
    cfg = tb.random_config()
    await tb.load(cfg)
    assert await tb.read_table(LE, 0, 65) == cfg.le_table.tolist()
    assert await tb.read_table(LO, 0, 257) == cfg.lo_table.tolist()
    assert await tb.read_table(LE, 60, 8) == cfg.le_table[60:].tolist() + [0, 0, 0]
    assert await tb.read_table(LO, 1022, 4) == [0, 0] + cfg.lo_table[:2].tolist()
    # writes past the end change nothing; the address still moves on
    await tb.drv.write("lut_access_cfg", addr=64, table_id=LE, access_type=1)
    for v in (1, 2, 3):
        await tb.drv.write("lut_access_data", data=v)
    assert await tb.read_table(LE, 63, 3) == [int(cfg.le_table[63]), 1, 0]


@NO_INT
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_table_write_while_busy(dut, backpressure):
    """A table write during a run is refused: the table and address keep their values, the
    status bit and the interrupt rise; the run itself is unaffected."""
    tb = await TB.start(dut, backpressure, salt=5)
    cfg = fitted_config(tb.flavor)
    await tb.load(cfg)
    await tb.drv.irq_enable.write(table_write_refused=1, done=0)
    await tb.drv.ctrl.write(start=1)
    assert (await tb.drv.status.read()).busy == 1
    await tb.drv.write("lut_access_cfg", addr=5, table_id=LO, access_type=1)
    await tb.drv.write("lut_access_data", data=0x1234)
    st = await tb.drv.status.read()
    assert st.table_write_refused == 1 and st.busy == 1
    await RisingEdge(dut.clk)
    assert int(dut.irq.value) == 1
    # finish the run with one transfer marked last
    await tb.source.send(StreamTransaction(payload=tb.pack([0] * tb.lanes, 1, True)))
    await tb.sink.recv()
    await ClockCycles(dut.clk, 4)
    st = await tb.drv.status.read()
    assert st.done == 1 and st.busy == 0
    await tb.drv.status.write(table_write_refused=1, done=1)
    await RisingEdge(dut.clk)
    assert int(dut.irq.value) == 0
    assert await tb.read_table(LO, 5, 1) == [int(cfg.lo_table[5])]
    # idle again: the same write goes through, at address 5 (it did not move when refused)
    await tb.drv.write("lut_access_cfg", addr=5, table_id=LO, access_type=1)
    await tb.drv.write("lut_access_data", data=0x1234)
    assert await tb.read_table(LO, 5, 1) == [0x1234]


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_hwinfo_and_idle_input(dut, backpressure):
    """hwinfo reports the build; without a run the input is not accepted."""
    tb = await TB.start(dut, backpressure, salt=6)
    info = await tb.drv.hwinfo.read()
    assert (info.lanes, info.flavor, info.serial) == (tb.lanes, int(tb.flavor == "cdp"),
                                                      int(tb.serial))
    assert (info.int_pipeline, info.fp16_pipeline) == (int(tb.precision != "fp16"),
                                                       int(tb.precision != "int"))
    await ClockCycles(dut.clk, 3)
    dut.i_stream__valid.value = 1
    await ClockCycles(dut.clk, 5)
    assert int(dut.i_stream__ready.value) == 0
    dut.i_stream__valid.value = 0


# -- the FP16 pipeline ---------------------------------------------------------------------------

def fp16_ramp(lo, hi, count):
    """``count`` FP32 samples (bit patterns) spread evenly over [lo, hi]."""
    return np.linspace(lo, hi, count, dtype=np.float32).view(np.uint32).tolist()


@NO_FP16
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_fp16_nvdla_sigmoid(dut, backpressure):
    """NVDLA's compiler's FP16 sigmoid table, loaded with the driver: a dense ramp over the
    table and past both ends, and the FP32 specials (NaN, infinities, denormals)."""
    from atomcube.model.nvdla.lut_fit_fp16 import nvdla_baseline_fp16

    tb = await TB.start(dut, backpressure, salt=21)
    cfg = nvdla_baseline_fp16("sigmoid").config
    await tb.load(cfg)
    xs = fp16_ramp(-20, 20, 700) + fp16_samples(tb.np_rng, cfg, 40).tolist()
    await tb.check(cfg, xs, what="NVDLA's FP16 sigmoid")


@NO_FP16
@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_fp16_random_tables(dut, backpressure):
    """Random FP16 configurations (both LE modes, selects and offsets small to extreme,
    NaN, infinities and denormals in the tables, bounds and scales), the samples at their
    edges and the FP32 specials, some lanes left empty."""
    tb = await TB.start(dut, backpressure, salt=22)
    dut._log.info("seed %d", cocotb.RANDOM_SEED)
    for n in range(8):
        cfg = random_fp16_config(tb.np_rng)
        await tb.load(cfg)
        await tb.check(cfg, fp16_samples(tb.np_rng, cfg, 60).tolist(), holes=0.2 * (n % 2),
                       what=f"random FP16 config {n}")


@NO_FP16
@cocotb.test(**TIMEOUT)
async def test_precision_register(dut):
    """``data_format.proc_precision`` is taken only while idle and for a pipeline the unit
    has: a write during a run, of a pipeline not built in, or of the reserved code is refused
    (status bit and interrupt), the choice keeping its value; with both pipelines, runs of
    each in turn all match the model."""
    tb = await TB.start(dut, backpressure=True, salt=23)
    fp_code, int_code = 2, (0 if tb.precision == "both" else None)
    await tb.drv.irq_enable.write(precision_refused=1, done=0, table_write_refused=0)
    first = (await tb.drv.data_format.read()).proc_precision
    assert first == (0 if tb.precision == "both" else fp_code)

    async def refused(code, what):
        await tb.drv.data_format.write(proc_precision=code)
        st = await tb.drv.status.read()
        assert st.precision_refused == 1, f"{what}: not refused"
        await RisingEdge(dut.clk)
        assert int(dut.irq.value) == 1, f"{what}: no interrupt"
        await tb.drv.status.write(precision_refused=1)
        await RisingEdge(dut.clk)
        assert int(dut.irq.value) == 0

    before = (await tb.drv.data_format.read()).proc_precision
    await refused(3, "reserved code 3")
    if int_code is None:
        await refused(0, "int8 on an FP16-only unit")
        await refused(1, "int16 on an FP16-only unit")
    assert (await tb.drv.data_format.read()).proc_precision == before
    # during a run: refused, the run unaffected
    fp = random_fp16_config(tb.np_rng)
    await tb.load(fp)
    await tb.drv.ctrl.write(start=1)
    await refused(int_code if int_code is not None else fp_code, "a write while busy")
    await tb.source.send(StreamTransaction(payload=tb.pack([0x3F800000] * tb.lanes, 1, True)))
    await tb.sink.recv()
    await end_run(tb.drv)
    assert (await tb.drv.data_format.read()).proc_precision == fp_code
    await tb.check(fp, fp16_samples(tb.np_rng, fp, 30).tolist(), what="FP16 after refusals")
    if int_code is not None:
        # both pipelines: int, FP16, int again, each chosen by its program's first write
        cfg = tb.random_config()
        await tb.load(cfg)
        assert (await tb.drv.data_format.read()).proc_precision == int_code
        await tb.check(cfg, tb.boundary_inputs(cfg, 30), what="integer after FP16")
        await tb.load(fp)
        await tb.check(fp, fp16_samples(tb.np_rng, fp, 30).tolist(), what="FP16 again")
        await tb.load(cfg)
        await tb.check(cfg, tb.boundary_inputs(cfg, 30), what="integer again")
