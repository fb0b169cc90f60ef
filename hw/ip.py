"""Standalone IP cores: each block behind a flat port list with the names Vivado's IP packager,
LiteX and FuseSoC users expect, and the files that go with it.

``make ip`` (``python -m atomcube.hw.ip``, or ``atomcube ip``) writes, for each core, into
``build/ip/<core>/``:

- ``atomcube_<core>.v``: Verilog-2001, top module ``atomcube_<core>``;
- ``<map>.h``: the C header of its registers (as ``make regs`` writes it);
- ``dma_descriptor.h`` (the DMA engine): its descriptor as a packed C struct;
- ``atomcube_<core>.json``: the parameters it was built with, its interfaces and ports, its
  register map;
- ``atomcube_<core>.core``: its FuseSoC description, with a lint and a simulation target;
- ``atomcube_<core>.xml``: its IP-XACT (IEEE 1685-2014) component, registers included, and
  ``package_atomcube_<core>.tcl``, which packages it for Vivado's IP catalog
  (:mod:`hw.ipxact`).

Port convention (docs/integration.md):

- ``aclk``; ``aresetn``, the reset, active low and synchronous to ``aclk``.
- ``s_axi_*``: the registers, an AXI4-Lite subordinate. ``m_axi_*``: the memory manager, AXI4
  with IDs (the DMA engine and the sparse decompressor).
- ``s_axis_*`` / ``m_axis_*``: a stream in and a stream out, AXI4-Stream. A stream's payload
  (a ``data.StructLayout``) maps onto the AXI4-Stream signals by one rule: ``data`` is
  ``tdata``, each lane (element of an array) in whole bytes, sign-extended on the way out and
  read from its low bits on the way in; ``mask``, a bit per lane, is ``tkeep``, a lane's bytes
  alike on the way out, and on the way in a lane is present when its first byte's ``tkeep`` is
  set; ``last`` is ``tlast``; every other field goes into ``tuser``, in the layout's order from
  bit 0.
- ``irq``: the interrupt, level, active high. Other one-bit outputs keep their block's name
  (the LUT unit's ``busy``).

Every port carries Vivado's ``X_INTERFACE_INFO`` attribute, and the first port of each
interface its ``X_INTERFACE_PARAMETER``, so that the packager infers the interfaces.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from amaranth import Cat, Module, Value
from amaranth.hdl import ClockDomain
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .catalog import BUILD, dma_engine, lut_unit, sparse_decompressor

__all__ = ["CORES", "Core", "IpCore", "Port", "Interface", "annotate", "build_core",
           "core_verilog", "write_core"]

#: the prefix a block's member gets as a standalone core's interface
_AXI_PREFIX = {"s_axil": "s_axi", "m_axi": "m_axi"}
#: each interface kind's bus definition, (library, name) under vendor xilinx.com, version 1.0:
#: Xilinx's, which Vivado's attributes and IP-XACT tools name
BUS_DEFINITIONS = {"aximm": ("interface", "aximm"), "axis": ("interface", "axis"),
                   "clock": ("signal", "clock"), "reset": ("signal", "reset"),
                   "interrupt": ("signal", "interrupt")}


@dataclass(frozen=True)
class Port:
    """One port of a core: its Verilog name, ``"in"`` or ``"out"``, its width, the interface
    it belongs to (None for a lone signal) and its name in that interface's standard
    (``AWADDR``, ``TDATA``, ``CLK``)."""

    name: str
    direction: str
    width: int
    interface: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class Interface:
    """An interface of a core: its name (the ports' prefix), its kind (``aximm``, ``axis``,
    ``clock``, ``reset``, ``interrupt``), ``"subordinate"`` or ``"manager"``, and its
    parameters as Vivado names them (``PROTOCOL``, ``DATA_WIDTH``, ``TDATA_NUM_BYTES``...)."""

    name: str
    kind: str
    mode: str
    params: dict


class IpCore(wiring.Component):
    """``block`` (a block's component: ``s_axil``, optionally ``m_axi``, at most one stream in
    and one out, one-bit outputs) behind the flat ports of the module docstring. It makes its
    own ``sync`` domain from ``aclk`` and ``aresetn``, so it is elaborated as a top level.

    ``ports`` and ``interfaces`` list what it has (:class:`Port`, :class:`Interface`)."""

    def __init__(self, block: wiring.Component):
        self.block = block
        self.ports = [Port("aclk", "in", 1, "aclk", "CLK"),
                      Port("aresetn", "in", 1, "aresetn", "RST")]
        self.interfaces = []
        self._links = []        # (flat port name, inner value, direction)
        self._streams = []      # how each stream's payload sits on its ports (_stream)
        for name, member in block.signature.members.items():
            if name in _AXI_PREFIX:
                self._axi(name, getattr(block, name))
            elif member.is_signature:
                self._stream(name, member, getattr(block, name))
            elif member.flow == Out and member.shape == 1:
                role = "INTERRUPT" if name == "irq" else None
                self.ports.append(Port(name, "out", 1, name if role else None, role))
                self._links.append((name, getattr(block, name), "out"))
                if role:
                    self.interfaces.append(Interface(name, "interrupt", "manager",
                                                     {"SENSITIVITY": "LEVEL_HIGH",
                                                      "PortWidth": 1}))
            else:
                raise TypeError(f"{type(block).__name__}.{name}: no standard port for it")
        buses = [i.name for i in self.interfaces if i.kind in ("aximm", "axis")]
        self.interfaces[:0] = [
            Interface("aclk", "clock", "subordinate",
                      {"ASSOCIATED_BUSIF": ":".join(buses), "ASSOCIATED_RESET": "aresetn"}),
            Interface("aresetn", "reset", "subordinate", {"POLARITY": "ACTIVE_LOW"})]
        super().__init__({p.name: (In if p.direction == "in" else Out)(p.width)
                          for p in self.ports})

    def attributes(self) -> dict[str, dict[str, str]]:
        """Vivado's attributes of each port: ``X_INTERFACE_INFO`` on every port of an
        interface, ``X_INTERFACE_PARAMETER`` on each interface's first port. (They are written
        into the Verilog by :func:`annotate`, not set on the signals: Yosys would copy a
        signal's attributes onto every internal wire it drives.)"""
        out = {}
        for p in self.ports:
            if p.interface is None:
                continue
            intf = next(i for i in self.interfaces if i.name == p.interface)
            library, name = BUS_DEFINITIONS[intf.kind]
            attrs = out[p.name] = {"X_INTERFACE_INFO": f"xilinx.com:{library}:{name}:1.0 "
                                                       f"{intf.name} {p.role}"}
            if p is next(q for q in self.ports if q.interface == p.interface):
                params = "".join(f", {k} {v}" for k, v in intf.params.items())
                attrs["X_INTERFACE_PARAMETER"] = f"XIL_INTERFACENAME {intf.name}{params}"
        return out

    # -- the port plan ---------------------------------------------------------------------------

    def _axi(self, name, intf):
        prefix = _AXI_PREFIX[name]
        sig = intf.signature.flip() if name == "s_axil" else intf.signature
        lite = name == "s_axil"
        params = {"PROTOCOL": "AXI4LITE" if lite else "AXI4", "DATA_WIDTH": sig.data_width,
                  "ADDR_WIDTH": sig.addr_width}
        if not lite:
            params.update(ID_WIDTH=sig.id_width, READ_WRITE_MODE="READ_WRITE")
            if hasattr(self.block, "max_burst"):
                params["MAX_BURST_LENGTH"] = self.block.max_burst
        self.interfaces.append(Interface(prefix, "aximm", "subordinate" if lite else "manager",
                                         params))
        for (member_name,), member in intf.signature.members.flatten():
            direction = "in" if member.flow == In else "out"
            value = Value.cast(getattr(intf, member_name))
            flat = f"{prefix}_{member_name}"
            self.ports.append(Port(flat, direction, len(value), prefix, member_name.upper()))
            self._links.append((flat, value, direction))

    def _stream(self, name, member, intf):
        direction = "in" if member.flow == In else "out"
        prefix = "s_axis" if direction == "in" else "m_axis"
        if any(s["prefix"] == prefix for s in self._streams):
            raise TypeError(f"{type(self.block).__name__}.{name}: a second stream "
                            f"{direction}; a core has at most one each way")
        layout = data.Layout.cast(intf.payload.shape())
        fields = dict(layout.members) if isinstance(layout, data.StructLayout) else {}
        if "data" not in fields:
            raise TypeError(f"{type(self.block).__name__}.{name}: its payload has no "
                            f"'data' field")
        shape = fields["data"]
        if isinstance(shape, data.ArrayLayout):
            lanes, lane_bits = shape.length, shape.size // shape.length
            signed = shape.elem_shape.signed
        else:
            lanes, lane_bits = 1, Value.cast(intf.payload.data).shape().width
            signed = False
        lane_bytes = (lane_bits + 7) // 8
        user = [f for f in fields if f not in ("data", "mask", "last")]
        user_bits = sum(len(Value.cast(intf.payload[f])) for f in user)
        plan = {"prefix": prefix, "direction": direction, "intf": intf, "lanes": lanes,
                "lane_bits": lane_bits, "lane_bytes": lane_bytes, "signed": signed, "user": user,
                "mask": "mask" in fields, "last": "last" in fields}
        self._streams.append(plan)
        out, inn = ("out", "in") if direction == "out" else ("in", "out")
        roles = [("tdata", "TDATA", out, lanes * lane_bytes * 8)]
        if plan["mask"]:
            roles.append(("tkeep", "TKEEP", out, lanes * lane_bytes))
        if plan["last"]:
            roles.append(("tlast", "TLAST", out, 1))
        if user:
            roles.append(("tuser", "TUSER", out, user_bits))
        roles += [("tvalid", "TVALID", out, 1), ("tready", "TREADY", inn, 1)]
        for sig, role, d, width in roles:
            self.ports.append(Port(f"{prefix}_{sig}", d, width, prefix, role))
        self.interfaces.append(Interface(
            prefix, "axis", "subordinate" if direction == "in" else "manager",
            {"TDATA_NUM_BYTES": lanes * lane_bytes, "TUSER_WIDTH": user_bits,
             "HAS_TKEEP": int(plan["mask"]), "HAS_TLAST": int(plan["last"]), "HAS_TREADY": 1,
             "HAS_TSTRB": 0, "TID_WIDTH": 0, "TDEST_WIDTH": 0}))

    # -- elaboration -----------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = cd = ClockDomain("sync", local=True)
        m.d.comb += [cd.clk.eq(self.aclk), cd.rst.eq(~self.aresetn)]
        m.submodules.block = self.block
        for flat, value, direction in self._links:
            port = getattr(self, flat)
            m.d.comb += value.eq(port) if direction == "in" else port.eq(value)
        for s in self._streams:
            self._connect_stream(m, s)
        return m

    def _connect_stream(self, m, s):
        intf, p = s["intf"], s["prefix"]
        payload = intf.payload
        port = lambda sig: getattr(self, f"{p}_{sig}")   # noqa: E731
        lanes, bits, nbytes = s["lanes"], s["lane_bits"], s["lane_bytes"]
        data_value = Value.cast(payload.data)
        lane = [data_value[i * bits:(i + 1) * bits] for i in range(lanes)]
        tdata = port("tdata")
        slots = [tdata[i * nbytes * 8:(i + 1) * nbytes * 8] for i in range(lanes)]
        signed = s["signed"]
        if s["direction"] == "in":
            m.d.comb += [lane[i].eq(slots[i][:bits]) for i in range(lanes)]
            if s["mask"]:
                m.d.comb += Value.cast(payload.mask).eq(
                    Cat(port("tkeep")[i * nbytes] for i in range(lanes)))
            if s["last"]:
                m.d.comb += Value.cast(payload.last).eq(port("tlast"))
            if s["user"]:
                m.d.comb += Cat(Value.cast(payload[f]) for f in s["user"]).eq(port("tuser"))
            m.d.comb += [intf.valid.eq(port("tvalid")), port("tready").eq(intf.ready)]
        else:
            m.d.comb += [slots[i].eq(lane[i].as_signed() if signed else lane[i])
                         for i in range(lanes)]
            if s["mask"]:
                mask = Value.cast(payload.mask)
                m.d.comb += port("tkeep").eq(Cat(mask[i].replicate(nbytes) for i in range(lanes)))
            if s["last"]:
                m.d.comb += port("tlast").eq(payload.last)
            if s["user"]:
                m.d.comb += port("tuser").eq(Cat(Value.cast(payload[f]) for f in s["user"]))
            m.d.comb += [port("tvalid").eq(intf.valid), intf.ready.eq(port("tready"))]

    def payloads(self) -> dict:
        """How each stream's payload sits on its AXI4-Stream signals, as plain data: lanes, the
        bits and bytes of a lane in ``tdata``, whether lanes are signed, and ``tuser``'s fields
        (name, bits) from bit 0."""
        return {s["prefix"]: {"lanes": s["lanes"], "lane_bits": s["lane_bits"],
                              "lane_bytes": s["lane_bytes"], "signed": s["signed"],
                              "tuser": [[f, len(Value.cast(s["intf"].payload[f]))]
                                        for f in s["user"]]}
                for s in self._streams}


# -- the cores `make ip` writes ----------------------------------------------------------------

@dataclass(frozen=True)
class Core:
    """A standalone core: the block it wraps (a :mod:`hw.catalog` factory), what it is, and
    the parameters it is built with unless told otherwise. Every parameter listed may be set
    (``--set name=value``); the block's own checks refuse a bad value."""

    name: str
    description: str
    factory: object
    params: dict


CORES = {c.name: c for c in (
    Core("dma", "DMA layout engine", dma_engine,
         {"data_width": 64, "addr_width": 32, "id_width": 4, "max_burst": 16, "read_fifo": 64,
          "paths": ("rows", "tile", "elements"), "chains": True}),
    Core("lut_sdp", "LUT unit, SDP flavour (32-bit samples in and out)", lut_unit,
         {"lanes": 4, "flavor": "sdp", "serial": False, "precision": "int"}),
    Core("lut_cdp", "LUT unit, CDP flavour (38-bit samples in, 16-bit results out)", lut_unit,
         {"lanes": 4, "flavor": "cdp", "serial": False}),
    Core("sparse", "sparse weight decompressor", sparse_decompressor,
         {"data_width": 64, "atom_elements": 32, "addr_width": 32, "id_width": 4,
          "max_burst": 16, "fifo_depth": 64}),
)}


def parse_settings(core: Core, settings) -> dict:
    """``core``'s parameters with ``settings`` (``"name=value"`` strings) applied; each value is
    read as its default's type (an integer, ``true``/``false``, a comma-separated list)."""
    params = dict(core.params)
    for text in settings or ():
        name, eq, value = text.partition("=")
        if not eq:
            raise ValueError(f"--set {text!r}: write name=value")
        if name not in params:
            raise ValueError(f"--set {name}: core {core.name} has no such parameter "
                             f"(parameters: {', '.join(core.params)})")
        default = params[name]
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"--set {name}: true or false, not {value!r}")
            params[name] = value.lower() in ("true", "1")
        elif isinstance(default, int):
            try:
                params[name] = int(value, 0)
            except ValueError:
                raise ValueError(f"--set {name}: an integer, not {value!r}") from None
        elif isinstance(default, tuple):
            params[name] = tuple(v for v in value.split(",") if v)
        else:
            params[name] = value
    return params


def build_core(core: Core, params: dict | None = None) -> IpCore:
    """``core`` built with ``params`` (its defaults when None) behind the standard ports; a bad
    parameter raises ValueError naming the core."""
    params = core.params if params is None else params
    try:
        return IpCore(core.factory(**params))
    except (ValueError, TypeError) as e:
        raise ValueError(f"core {core.name}: {e}") from None


def annotate(verilog_text: str, module: str, attributes: dict[str, dict[str, str]]) -> str:
    """``verilog_text`` with ``attributes`` (port -> {name: value}) written before the port
    declarations of ``module``; every port named must be declared there."""
    start = verilog_text.index(f"module {module}(")
    end = verilog_text.index("endmodule", start)
    found = set()

    def mark(match):
        name = match.group(3)
        if name not in attributes:
            return match.group(0)
        found.add(name)
        indent = match.group(1)
        return "".join(f'{indent}(* {k} = "{v}" *)\n' for k, v in attributes[name].items()) \
            + match.group(0)

    body = re.sub(r"^( *)(input|output)\b[^;]*?(\w+);$", mark, verilog_text[start:end],
                  flags=re.MULTILINE)
    missing = set(attributes) - found
    if missing:
        raise RuntimeError(f"{module}: no declaration of port(s) {', '.join(sorted(missing))}")
    return verilog_text[:start] + body + verilog_text[end:]


def _version(dist):
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def core_verilog(core: Core, params: dict, module: str, ip: IpCore | None = None) -> str:
    """The Verilog ``make ip`` writes for ``core`` built with ``params`` (``ip``: that build,
    if made already), its top module named ``module``."""
    from amaranth.back import verilog

    ip = ip or build_core(core, params)
    shown = ", ".join(f"{k}={_show(v)}" for k, v in params.items())
    # the timescale: simulators that take no default of their own (Icarus) run the core in
    # nanoseconds, as every bench of ours does
    return (f"/* {module}: atomcube {core.description}, standalone core ({shown}).\n"
            f"   Written by `make ip`; the ports and parameters are in {module}.json. */\n"
            "`timescale 1ns / 1ps\n"
            + annotate(verilog.convert(ip, name=module, emit_src=False), module,
                       ip.attributes()))


def write_core(core: Core, outdir: Path, params: dict | None = None,
               module: str | None = None) -> list[Path]:
    """Write ``core``'s Verilog, headers and record into ``outdir`` (made if missing); returns
    the files written. ``module``: the top module's name (default ``atomcube_<core>``), for
    two builds of one core in a design."""
    from atomcube.model.dma.descriptor import c_header

    params = dict(core.params if params is None else params)
    module = module or f"atomcube_{core.name}"
    if not module.isidentifier():
        raise ValueError(f"--module {module!r}: not a Verilog identifier")
    ip = build_core(core, params)
    outdir.mkdir(parents=True, exist_ok=True)
    files = {f"{module}.v": core_verilog(core, params, module, ip)}
    regmap = ip.block.regmap
    files[f"{regmap.name}.h"] = regmap.c_header()
    if core.factory is dma_engine:
        files["dma_descriptor.h"] = c_header()
    from .ipxact import component, vivado_tcl

    version = _version("atomcube") or "0.0.0"
    described = f"atomcube {core.description}, standalone core"
    sources = list(files)
    files[f"{module}.core"] = fusesoc_core(core, params, module, sources)
    files[f"{module}.xml"] = component(ip, module, version, described, sources)
    files[f"package_{module}.tcl"] = vivado_tcl(module, version, described, sources)
    record = {
        "core": core.name, "module": module, "description": core.description,
        "parameters": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
        "generator": {"atomcube": _version("atomcube"), "amaranth": _version("amaranth")},
        "clock": "aclk", "reset": {"port": "aresetn", "active": "low", "synchronous": True},
        "interfaces": [dataclasses.asdict(i) for i in ip.interfaces],
        "ports": [dataclasses.asdict(p) for p in ip.ports],
        "stream_payloads": ip.payloads(),
        "registers": regmap.to_json(),
        "files": sorted([*files, f"{module}.json"]),
    }
    files[f"{module}.json"] = json.dumps(record, indent=2) + "\n"
    written = []
    for name, text in files.items():
        (outdir / name).write_text(text)
        written.append(outdir / name)
    return written


def fusesoc_core(core: Core, params: dict, module: str, files) -> str:
    """A FuseSoC CAPI2 description of the core written as ``module`` (``files``: what lies
    beside it): the Verilog, the headers and the record; a ``lint`` target (Verilator, ``-Wall``
    less :data:`hw.catalog.LINT_WAIVED`) and a ``sim`` target (Icarus, running the ``ip``
    cocotb bench, which reads the parameters from the record)."""
    from .catalog import LINT_WAIVED

    version = _version("atomcube") or "0.0.0"
    shown = ", ".join(f"{k}={_show(v)}" for k, v in params.items())
    headers = [f for f in files if f.endswith(".h")]
    waivers = ", ".join(f"-Wno-{w}" for w in LINT_WAIVED)
    return f"""CAPI=2:
# {module}: written by `make ip` beside the core (docs/integration.md). The sim target runs the
# cocotb bench of atomcube's ip cores: it needs the atomcube package with its sim extra.
name: atomcube:ip:{module}:{version}
description: {json.dumps(f"atomcube {core.description}, standalone core ({shown})")}

filesets:
  rtl:
    files:
      - {module}.v
    file_type: verilogSource
  headers:
    files:
{"".join(f"      - {h}: {{is_include_file: true}}{chr(10)}" for h in headers)}    file_type: cSource
  record:
    files:
      - {module}.json: {{copyto: {module}.json}}
    file_type: user

targets:
  default:
    filesets: [rtl, headers]
    toplevel: {module}
  lint:
    filesets: [rtl]
    toplevel: {module}
    flow: lint
    flow_options:
      tool: verilator
      verilator_options: [-Wall, {waivers}]
  sim:
    filesets: [rtl, record]
    toplevel: {module}
    flow: sim
    flow_options:
      tool: icarus
      iverilog_options: [-g2005]
      cocotb_module: atomcube.sim.ip.test_ip
"""


def _show(v):
    return ",".join(v) if isinstance(v, tuple) else str(v).lower() if isinstance(v, bool) else v


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``python -m atomcube.hw.ip`` and ``atomcube ip``."""
    ap.add_argument("--core", action="append", choices=sorted(CORES),
                    help="only this core (repeatable; default: every core)")
    ap.add_argument("--set", action="append", metavar="NAME=VALUE", dest="settings",
                    help="a parameter of the core (repeatable; with one --core only)")
    ap.add_argument("--module", help="the top module's name (default atomcube_<core>; with "
                                     "one --core only)")
    ap.add_argument("--out", type=Path, default=BUILD / "ip",
                    help="folder to write into, a subfolder per core (default build/ip)")


def run(args) -> int:
    """Write the cores ``args`` (from :func:`add_arguments`) name; errors raise ValueError."""
    from atomcube.model.files import check_output

    names = args.core or list(CORES)
    if (args.settings or args.module) and len(names) != 1:
        raise ValueError("--set and --module apply to one core: give one --core")
    check_output(args.out, None, field="--out", folder=True)
    plans = [(CORES[n], parse_settings(CORES[n], args.settings)) for n in names]
    for i, (core, params) in enumerate(plans, 1):
        print(f"[{i}/{len(plans)}] {core.name}: {core.description}", flush=True)
        for path in write_core(core, args.out / core.name, params, args.module):
            print(f"  wrote {path}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.ip",
                                 description=__doc__.split("\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    try:
        return run(args)
    except ValueError as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
