"""The LUT unit at the Amaranth level: parameters, ports, register map. The behaviour is checked
by the cocotb bench (sim/lut/test_lut.py) against the model."""

import re

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from hw.lut.unit import LutUnit, in_layout, out_layout
from model.registers.lut import lut_regmap


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
    from hw.lut.serial import acc_bits

    assert acc_bits(32, 35) == 78 and acc_bits(38, 16) == 74
    text = verilog.convert(LutUnit(lanes=2, flavor="sdp", serial=True), name="lut",
                           emit_src=False)
    assert re.findall(r"\$signed\((\w+)\) \* \$signed\((\w+)\)", text) == [("op_a", "op_b")]
    pipelined = verilog.convert(LutUnit(lanes=2, flavor="sdp"), name="lut", emit_src=False)
    assert len(re.findall(r"\$signed\((\w+)\) \* ", pipelined)) == 2 * 2 * 4


@pytest.mark.parametrize("width", [5, 32, 38])
def test_leading_one_tree(width):
    """The pipeline's leading-one tree against int.bit_length, at the SDP and CDP input widths
    and an odd small one (padding to a power of two must not move the answer)."""
    from amaranth import Module, Signal

    from hw.lut.unit import _leading_one

    m = Module()
    v, e = Signal(width), Signal(8)
    m.d.comb += e.eq(_leading_one(v))
    rng = np.random.default_rng(width)
    values = [0, 1, (1 << width) - 1] + [1 << b for b in range(width)] + \
        [int(rng.integers(0, 1 << min(n, 62))) << max(0, n - 62)
         for n in rng.integers(1, width + 1, 300)]

    async def bench(ctx):
        for x in values:
            ctx.set(v, x)
            assert ctx.get(e) == max(x.bit_length() - 1, 0), hex(x)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
