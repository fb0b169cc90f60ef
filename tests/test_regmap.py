"""Register declarations, the driver, the bank model and the generated documents."""

import asyncio
import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from atomcube.model.registers import MAPS, SELFTEST
from atomcube.model.regmap import (
    Access,
    AsyncDriver,
    BusError,
    Driver,
    Field,
    Register,
    RegisterBankModel,
    RegisterMap,
    Resp,
    reg,
    regmap,
    strobe_mask,
)

# -- declaration rules: one test per rule ------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(name="Bad"), "field name must be a lower-case identifier"),
    (dict(name="class"), "field name must be a lower-case identifier"),
    (dict(name="wr_stb"), "reserved for the register's strobes"),
    (dict(access="RO"), "access must be one of R, RW, W, RW1C, W1P, RWS, not 'RO'"),
    (dict(width=0), "width must be 1 to 32, not 0"),
    (dict(offset=30, width=4), "bits 30+4 do not fit in a 32-bit register"),
    (dict(offset=-1), "do not fit"),
    (dict(width=4, reset=16), "reset 0x10 does not fit in 4 bits"),
    (dict(access="R", reset=1), "reset must be 0 for R fields"),
    (dict(access="W1P", reset=1), "reset must be 0 for W1P fields"),
    (dict(access="RWS", reset=1), "reset must be 0 for RWS fields"),
])
def test_field_rules(kwargs, message):
    args = dict(name="f", offset=0, width=8, access="RW", reset=0) | kwargs
    with pytest.raises(ValueError, match=message.replace("+", r"\+").replace("(", r"\(")):
        Field(**args)


def test_field_types():
    with pytest.raises(TypeError, match="width must be an int"):
        Field("f", 0, 2.0, "RW")
    with pytest.raises(TypeError, match="access must be an Access"):
        Field("f", 0, 2, 3)


def test_register_rules():
    a = Field("a", 0, 8, "RW")
    with pytest.raises(ValueError, match="offset must be a non-negative multiple of 4, not 6"):
        Register("r", 6, (a,))
    with pytest.raises(ValueError, match="has no fields"):
        Register("r", 0, ())
    with pytest.raises(ValueError, match="field 'a' declared twice"):
        Register("r", 0, (a, Field("a", 8, 8, "RW")))
    with pytest.raises(ValueError, match=r"field b \[11:4\] overlaps field a"):
        Register("r", 0, (a, Field("b", 4, 8, "RW")))
    with pytest.raises(TypeError, match="fields must be Field"):
        Register("r", 0, ("a",))


def test_map_rules():
    r0 = reg("x", 0, "", Field("a", 0, 1, "RW"))
    with pytest.raises(ValueError, match="register 'x' declared twice"):
        regmap("m", [r0, reg("x", 4, "", Field("a", 0, 1, "RW"))])
    with pytest.raises(ValueError, match="registers x and y share offset 0x000"):
        regmap("m", [r0, reg("y", 0, "", Field("a", 0, 1, "RW"))])
    with pytest.raises(ValueError, match="has no registers"):
        regmap("m", [])
    with pytest.raises(KeyError, match="has no register 'nope'"):
        SELFTEST["nope"]


def test_map_geometry():
    assert SELFTEST.size == 0x28
    assert SELFTEST.addr_width == 6
    assert SELFTEST.at(0x05).name == "ctrl"          # any byte of the word
    assert SELFTEST.at(0x18) is None                 # the hole
    assert [r.offset for r in SELFTEST] == sorted(r.offset for r in SELFTEST)


def test_reset_word():
    ctrl = SELFTEST["ctrl"]
    assert ctrl.reset == 1 | (5 << 1) | (0xABC << 6)
    assert SELFTEST["data"].reset == 0                 # W fields read 0
    assert SELFTEST["status"].reset == 0b010 << 1


# -- encode / decode ---------------------------------------------------------------------------

def test_encode_defaults_never_clear_or_pulse():
    st_ = SELFTEST["status"]
    # error resets to 0b010 but is RW1C: a write naming other fields must write 0 there
    assert st_.encode({"done": 1}) == 1
    ctrl = SELFTEST["ctrl"]
    assert ctrl.encode({"mode": 2}) == 1 | (2 << 1) | (0xABC << 6)
    assert SELFTEST["cmd"].encode({}) == 0


def test_encode_errors():
    ctrl = SELFTEST["ctrl"]
    with pytest.raises(ValueError, match=r"field ctrl.busy is read-only \(R\)"):
        ctrl.encode({"busy": 1})
    with pytest.raises(ValueError, match="field ctrl.mode: value 8 does not fit in 3 bits"):
        ctrl.encode({"mode": 8})
    with pytest.raises(ValueError, match="does not fit"):
        ctrl.encode({"mode": -1})
    with pytest.raises(KeyError, match="register ctrl has no field 'speed'"):
        ctrl.encode({"speed": 1})


@st.composite
def registers(draw):
    """A register with random non-overlapping fields of random access types."""
    cuts = sorted(draw(st.sets(st.integers(1, 31), max_size=8)))
    bounds = [0, *cuts, 32]
    fields = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if draw(st.booleans()):
            access = draw(st.sampled_from(list(Access)))
            reset = draw(st.integers(0, (1 << (hi - lo)) - 1)) if access in (
                Access.RW, Access.W, Access.RW1C) else 0
            fields.append(Field(f"f{i}", lo, hi - lo, access, reset))
    if not fields:
        fields.append(Field("only", 0, 32, "RW"))
    return Register("r", 0, tuple(fields))


@given(registers(), st.data())
def test_encode_decode_round_trip(r, data):
    rw = [f for f in r.fields if f.access is Access.RW]
    values = {f.name: data.draw(st.integers(0, (1 << f.width) - 1)) for f in rw}
    decoded = r.decode(r.encode(values))
    assert {k: decoded[k] for k in values} == values


@given(registers(), st.integers(0, 0xFFFF_FFFF), st.integers(0, 15))
def test_model_write_respects_strobes_and_access(r, data, strb):
    m = RegisterBankModel(RegisterMap("m", (r,)))
    before = dict(m.store)
    assert m.bus_write(0, data, strb) == Resp.OKAY
    bm = strobe_mask(strb)
    for f in r.fields:
        key = ("r", f.name)
        fm, fv = (bm & f.mask) >> f.offset, (data & f.mask) >> f.offset
        if f.access in (Access.RW, Access.W, Access.RWS):
            assert m.store[key] == (before[key] & ~fm) | (fv & fm)
        elif f.access is Access.RW1C:
            assert m.store[key] == before[key] & ~(fv & fm)
    pulsed = {p[1]: p[2] for p in m.pulses}
    for f in r.fields:
        if f.access is Access.W1P:
            want = ((data & bm) & f.mask) >> f.offset
            assert pulsed.get(f.name, 0) == want


# -- bank model ----------------------------------------------------------------------------------

def test_model_rules():
    m = RegisterBankModel(SELFTEST)
    assert m.bus_write(0x18, 1) == Resp.SLVERR and m.writes == []
    assert m.bus_read(0x100) == (0, Resp.SLVERR) and m.reads == []
    assert m.bus_write(0x00, 0xFFFF_FFFF) == Resp.OKAY         # all-R register: OKAY, no effect
    assert m.bus_read(0x00) == (0, Resp.OKAY)
    m.set_bits("status", "events", 0xFFFF)                     # only the field's 10 bits
    assert m.value("status", "events") == 0x3FF
    with pytest.raises(ValueError, match="ctrl.enable is RW, not RW1C"):
        m.set_bits("ctrl", "enable", 1)
    assert m.peek(0x0C)[0] == (0x3FF << 7) | (0b010 << 1) and m.reads == ["ident"]


# -- driver --------------------------------------------------------------------------------------

def test_driver_over_model():
    m = RegisterBankModel(SELFTEST)
    drv = Driver(SELFTEST, m)
    drv.ctrl.write(mode=3)
    v = drv.ctrl.read()
    assert (v.enable, v.mode, v.threshold, v.busy) == (1, 3, 0xABC, 0)
    assert int(v) == v.raw and v == v.raw
    drv.ctrl.modify(enable=0)
    assert drv.read("ctrl").fields == {"enable": 0, "mode": 3, "threshold": 0xABC, "busy": 0}
    m.set_bits("status", "done", 1)
    drv.status.modify()                                      # must not clear the event
    assert drv.status.read().done == 1
    drv.cmd.write(start=1, kick=5)
    assert m.pulses == [("cmd", "start", 1), ("cmd", "kick", 5)]
    drv.scratch.write_raw(0x1234)
    assert drv.scratch.read().value == 0x1234
    with pytest.raises(AttributeError, match="has no readable field 'nope'"):
        _ = drv.scratch.read().nope
    with pytest.raises(AttributeError, match="no register 'nope'"):
        _ = drv.nope
    with pytest.raises(ValueError, match="does not fit in 32 bits"):
        drv.write_raw("scratch", 1 << 32)
    assert "ctrl" in dir(drv)


def test_driver_base_address_and_errors():
    class Offset:
        def __init__(self):
            self.ops = []

        def read(self, a):
            self.ops.append(("r", a))
            raise BusError("read", a, Resp.DECERR)

        def write(self, a, v):
            self.ops.append(("w", a, v))

    t = Offset()
    drv = Driver(SELFTEST, t, base=0x4000_0000)
    drv.scratch.write_raw(7)
    assert t.ops == [("w", 0x4000_0020, 7)]
    with pytest.raises(BusError, match="read at 0x40000004 answered DECERR"):
        drv.ctrl.read()
    with pytest.raises(TypeError, match="regmap must be a RegisterMap"):
        Driver({}, t)


def test_async_driver():
    m = RegisterBankModel(SELFTEST)

    class AsyncModel:
        async def read(self, a):
            await asyncio.sleep(0)
            return m.read(a)

        async def write(self, a, v):
            await asyncio.sleep(0)
            m.write(a, v)

    async def go():
        drv = AsyncDriver(SELFTEST, AsyncModel())
        await drv.ctrl.write(mode=6)
        await drv.ctrl.modify(threshold=1)
        return await drv.ctrl.read()

    v = asyncio.run(go())
    assert (v.enable, v.mode, v.threshold) == (1, 6, 1)


# -- generated documents -----------------------------------------------------------------------

def test_markdown_lists_everything():
    md = SELFTEST.markdown()
    for r in SELFTEST:
        assert f"| 0x{r.offset:03x} | [{r.name}](#{r.name}) | 0x{r.reset:08x} |" in md
        for f in r.fields:
            assert f"| {f.bits} | {f.name} | {f.access.value} | 0x{f.reset:x} |" in md


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_c_header_compiles_and_agrees(tmp_path):
    (tmp_path / "selftest.h").write_text(SELFTEST.c_header())
    lines = []
    for r in SELFTEST:
        R = f"ATOMCUBE_SELFTEST_{r.name.upper()}"
        lines.append(f'printf("{r.name} %u %u\\n", {R}_OFFSET, {R}_RESET);')
        for f in r.fields:
            F = f"{R}_{f.name.upper()}"
            lines.append(f'printf("{r.name}.{f.name} %u %u\\n", {F}_SHIFT, {F}_MASK);')
    (tmp_path / "main.c").write_text('#include <stdio.h>\n#include "selftest.h"\nint main(void){\n'
                                     + "\n".join(lines) + "\nreturn 0;}\n")
    subprocess.run(["gcc", "-Wall", "-Werror", "-o", tmp_path / "t", tmp_path / "main.c"],
                   check=True)
    out = subprocess.run([tmp_path / "t"], capture_output=True, text=True, check=True).stdout
    want = []
    for r in SELFTEST:
        want.append(f"{r.name} {r.offset} {r.reset}")
        want += [f"{r.name}.{f.name} {f.offset} {f.mask}" for f in r.fields]
    assert out.split("\n")[:-1] == want


def test_committed_register_docs_are_current():
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs" / "registers"
    for name, m in MAPS.items():
        for suffix, text in ((".md", m.markdown()), (".h", m.c_header())):
            path = docs / f"{name}{suffix}"
            assert path.exists() and path.read_text() == text, \
                f"{path} is out of date with model/registers: run `make regs`"
    from atomcube.model.dma.descriptor import c_header

    path = docs / "dma_descriptor.h"
    assert path.read_text() == c_header(), f"{path} is out of date: run `make regs`"


def test_json_has_every_field():
    j = SELFTEST.to_json()
    assert [r["name"] for r in j["registers"]] == [r.name for r in SELFTEST]
    assert j["registers"][1]["fields"][0] == {"name": "enable", "offset": 0, "width": 1,
                                               "access": "RW", "reset": 1, "doc": "Enable."}
