"""The LUT unit at the Amaranth level: parameters, ports, register map, and the statistics
counters' timing against ``status.done``. The behaviour is checked by the cocotb bench
(sim/lut/test_lut.py) against the model."""

import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from atomcube.hw.fabric import Checked
from atomcube.hw.lut.unit import LutUnit, in_layout, out_layout
from atomcube.model.nvdla.lut import COUNTERS, LutConfig, evaluate
from atomcube.model.registers.lut import lut_regmap, program
from atomcube.sim.amaranth_axil import axil_read, axil_write


@pytest.mark.parametrize("kw, msg", [
    (dict(lanes=3), "lanes must be one of 1, 2, 4, 8, 16, not 3"),
    (dict(lanes=32), "lanes must be one of"),
    (dict(flavor="fp16"), "flavor must be one of sdp, cdp, not 'fp16'"),
    (dict(serial=1), "serial must be True or False, not 1"),
])
def test_parameters_rejected(rejected, kw, msg):
    with rejected(ValueError, msg):
        LutUnit(**kw)


@pytest.mark.parametrize("flavor, w, ow", [("sdp", 32, 32), ("cdp", 38, 16)])
def test_payload_layouts(flavor, w, ow):
    assert in_layout(4, flavor).size == 4 * w + 4 + 1
    assert out_layout(4, flavor).size == 4 * ow + 4 + 8 + 4 + 1


def test_ports_in_verilog():
    text = verilog.convert(LutUnit(lanes=2, flavor="cdp"), name="lut", emit_src=False)
    for port in ("s_axil__awaddr", "i_stream__payload", "i_stream__ready", "o_stream__valid",
                 "irq"):
        assert f" {port}" in text, port
    assert "[78:0] i_stream__payload" in text          # 2 x 38 data, 2 mask bits, last


def test_register_map_has_control_and_counters():
    for flavor, counters in (("sdp", "hybrid"), ("cdp", "priority")):
        m = lut_regmap(flavor)
        names = {r.name for r in m}
        assert {"ctrl", "status", "irq_enable", "hwinfo", "lut_access_data",
                f"cnt_{counters}"} <= names
        assert m["lut_access_data"].field("data").access.value == "RWS"


def test_serial_datapath_in_verilog():
    """The serial build has one multiplier, 16 x 16 (the pipeline has four a table a lane),
    and an accumulator wide enough for every step (hw/lut/serial.py)."""
    from atomcube.hw.lut.serial import acc_bits

    assert acc_bits(32, 35) == 78 and acc_bits(38, 16) == 74
    text = verilog.convert(LutUnit(lanes=2, flavor="sdp", serial=True), name="lut",
                           emit_src=False)
    assert re.findall(r"\$signed\((\w+)\) \* \$signed\((\w+)\)", text) == [("op_a", "op_b")]
    pipelined = verilog.convert(LutUnit(lanes=2, flavor="sdp"), name="lut", emit_src=False)
    assert len(re.findall(r"\$signed\((\w+)\) \* ", pipelined)) == 2 * 2 * 4


@pytest.mark.parametrize("flavor, lanes, serial", [("sdp", 2, False), ("cdp", 4, False),
                                                   ("sdp", 2, True)])
def test_counters_are_complete_when_done_rises(flavor, lanes, serial):
    """The statistics counters hold the whole run's counts in the cycle ``status.done`` is set,
    not a cycle or two later (they add what the output register took a cycle before): three
    runs, under random input gaps and output backpressure and one with the output always
    ready (where the last sample leaves soonest), each against the model's counters. With
    the counters a cycle later, the pipelined cases fail (the serial datapath's last sample
    leaves later than that)."""
    seed = 700 + 10 * lanes + serial
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    # bounds that give every state: under, inside one table or both, over
    cfg = LutConfig(le_start=-1000, le_end=1000, le_index_select=5, lo_start=-500, lo_end=3000,
                    lo_index_select=4, uflow_priority=1, hybrid_priority=1)
    dut = LutUnit(lanes=lanes, flavor=flavor, serial=serial)
    rmap, regs = dut.regmap, dut._bank.regs
    bus, i, o = dut.s_axil, dut.i_stream, dut.o_stream
    ready_odds = (0.5, 1.0, 0.5)
    runs = []
    for _ in ready_odds:
        n = int(rng.integers(3, 9))
        x = rng.integers(-4000, 4000, (n, lanes))
        mask = rng.random((n, lanes)) < 0.8
        mask[:, 0] = True
        runs.append((x, mask))
    seen = {"at_done": [], "read": []}
    state = {"run": None}

    async def driver(ctx):
        for name, fields in program(cfg, flavor):
            if not name.startswith("lut_access"):
                await axil_write(ctx, bus, rng, rmap[name].offset, rmap[name].encode(fields))
        for r, (x, mask) in enumerate(runs):
            state["run"] = r
            await axil_write(ctx, bus, rng, rmap["ctrl"].offset,
                             rmap["ctrl"].encode({"start": 1, "perf_enable": 1}))
            for t in range(len(x)):
                for _ in range(int(rng.integers(0, 3))):
                    await ctx.tick()
                for k in range(lanes):
                    ctx.set(i.payload.data[k], int(x[t, k]))
                ctx.set(i.payload.mask, int(sum(int(b) << k for k, b in enumerate(mask[t]))))
                ctx.set(i.payload.last, t == len(x) - 1)
                ctx.set(i.valid, 1)
                await ctx.tick().until(i.ready)
                ctx.set(i.valid, 0)
            for _ in range(400):
                if rmap["status"].decode(await axil_read(ctx, bus, rng,
                                                         rmap["status"].offset))["done"]:
                    break
            else:
                raise AssertionError(f"run {r} did not end")
            seen["read"].append({c: await axil_read(ctx, bus, rng, rmap[f"cnt_{c}"].offset)
                                 for c in COUNTERS[flavor]})
            await axil_write(ctx, bus, rng, rmap["status"].offset,
                             rmap["status"].encode({"done": 1}))

    async def sink(ctx):
        while True:
            r = state["run"]
            odds = ready_odds[r] if r is not None else 0.5
            ctx.set(o.ready, int(rng.random() < odds))
            await ctx.tick()

    async def monitor(ctx):
        was = 0
        while len(seen["at_done"]) < len(runs):
            await ctx.tick()
            done = ctx.get(regs.status.done.data)
            if done and not was:
                seen["at_done"].append({c: ctx.get(getattr(regs, f"cnt_{c}").value.r_data)
                                        for c in COUNTERS[flavor]})
            was = done

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(monitor)
    sim.run()
    for r, (x, mask) in enumerate(runs):
        want = evaluate(x[mask], cfg, flavor).counters
        assert seen["read"][r] == want, f"run {r}: counters read back"
        assert seen["at_done"][r] == want, f"run {r}: counters as done rose"


@pytest.mark.parametrize("serial", [False, True])
def test_table_writes_are_refused_exactly_while_busy(serial):
    """A ``lut_access_data`` write is refused in every cycle ``status.busy`` is high and in no
    other, the first cycle of a run and the first after it included: table writes arrive back
    to back, one per cycle (the bank's fastest), from the start's own write until after the
    run has ended, and every write strobe is checked against ``busy`` in its cycle. The run's
    inputs come with idle cycles and its results are taken under random backpressure. (A
    refusal taken from a copy of ``busy`` a cycle late fails this.)"""
    seed = 900 + serial
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    lanes = 2
    dut = LutUnit(lanes=lanes, flavor="sdp", serial=serial)
    rmap, regs = dut.regmap, dut._bank.regs
    bus, i, o = dut.s_axil, dut.i_stream, dut.o_stream
    access = rmap["lut_access_cfg"].encode({"addr": 0, "table_id": 0, "access_type": 1})
    start = rmap["ctrl"].encode({"start": 1})
    # (the serial datapath takes a few cycles per lane, so its run lasts longer)
    writes = [(rmap["ctrl"].offset, start)] + [(rmap["lut_access_data"].offset, k)
                                               for k in range(300 if serial else 90)]
    seen = {"refused": 0, "taken": 0, "first_busy": 0, "first_idle": 0, "ended": False}

    async def driver(ctx):
        await axil_write(ctx, bus, rng, rmap["lut_access_cfg"].offset, access)
        # every write offered with its address, B always taken: one write a cycle
        for addr, data in writes:
            await axil_write(ctx, bus, rng, addr, data, limit=20, back_to_back=True)
        await ctx.tick().repeat(4)

    async def source(ctx):
        # a short run, once the unit is busy, with idle cycles before each input
        await ctx.tick().until(regs.status.busy.r_data)
        for t in range(4):
            ctx.set(i.valid, 0)
            for _ in range(int(rng.integers(0, 3))):
                await ctx.tick()
            for k in range(lanes):
                ctx.set(i.payload.data[k], int(rng.integers(-2000, 2000)))
            ctx.set(i.payload.mask, (1 << lanes) - 1)
            ctx.set(i.payload.last, t == 3)
            ctx.set(i.valid, 1)
            await ctx.tick().until(i.ready)
        ctx.set(i.valid, 0)

    async def sink(ctx):
        # the results are taken in random cycles
        for _ in range(len(writes) + 40):
            ctx.set(o.ready, int(rng.random() < 0.5))
            await ctx.tick()

    async def monitor(ctx):
        was_busy = 0
        for _ in range(len(writes) + 40):
            busy = ctx.get(regs.status.busy.r_data)
            stb = ctx.get(regs.lut_access_data.wr_stb)
            refused = ctx.get(regs.status.table_write_refused.set)
            assert refused == (stb & busy), f"write strobe {stb}, busy {busy}, refused {refused}"
            if stb:
                seen["refused" if busy else "taken"] += 1
                seen["first_busy"] += busy & ~was_busy
                seen["first_idle"] += ~busy & was_busy & 1
            seen["ended"] |= was_busy and not busy
            was_busy = busy
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(driver)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.add_testbench(monitor)
    sim.run()
    assert seen["ended"], "the run did not end within the writes"
    assert seen["first_busy"] == 1 and seen["first_idle"] == 1, seen
    assert seen["refused"] and seen["taken"], seen

