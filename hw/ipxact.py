"""A standalone core (:mod:`hw.ip`) described in IP-XACT (IEEE 1685-2014), and the Tcl that
packages it into Vivado's IP catalog.

The IP-XACT component names the core (VLNV ``atomcube:ip:<module>:<version>``), its bus
interfaces with their port maps (Xilinx's ``aximm``, ``axis``, ``clock``, ``reset`` and
``interrupt`` bus definitions, as the Verilog's ``X_INTERFACE_INFO`` attributes name them), the
AXI managers' address spaces, the register map of ``s_axi`` (read off the block's register
declaration: every register and field with its offset, width, reset, access and description),
its ports and its files. ``tests/test_ip.py`` validates it against the IEEE 1685-2014 schema.

Vivado packages the core from the Verilog itself (``ipx::package_project`` reads the
attributes); the script sets what the attributes cannot say (names, description, version) and
saves the IP into ``vivado/`` beside it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from atomcube.model.regmap import Access

from .ip import BUS_DEFINITIONS

NS = "http://www.accellera.org/XMLSchema/IPXACT/1685-2014"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
#: a field's access -> (IP-XACT access, volatile, modifiedWriteValue, readAction)
ACCESS = {
    Access.R: ("read-only", True, None, None),
    Access.RW: ("read-write", False, None, None),
    Access.W: ("write-only", False, None, None),
    Access.RW1C: ("read-write", True, "oneToClear", None),
    Access.W1P: ("write-only", True, None, None),
    Access.RWS: ("read-write", True, None, "modify"),
}


def _add(parent, tag, text=None, **attrs):
    e = ET.SubElement(parent, f"{{{NS}}}{tag}", {k: str(v) for k, v in attrs.items()})
    if text is not None:
        e.text = str(text)
    return e


def _vlnv(parent, tag, kind, version="1.0"):
    library, name = BUS_DEFINITIONS[kind]
    return _add(parent, tag, vendor="xilinx.com", library=library, name=name, version=version)


def component(ip, module: str, version: str, description: str, files: list[str]) -> str:
    """The IP-XACT component of ``ip`` (an :class:`hw.ip.IpCore`) written as ``module``, with
    ``files`` (the Verilog first) as its file set."""
    ET.register_namespace("ipxact", NS)
    ET.register_namespace("xsi", XSI)
    root = ET.Element(f"{{{NS}}}component",
                      {f"{{{XSI}}}schemaLocation": f"{NS} {NS}/index.xsd"})
    for tag, text in (("vendor", "atomcube"), ("library", "ip"), ("name", module),
                      ("version", version)):
        _add(root, tag, text)
    regmap = ip.block.regmap
    buses = _add(root, "busInterfaces")
    managers = []
    for intf in ip.interfaces:
        bus = _add(buses, "busInterface")
        _add(bus, "name", intf.name)
        _vlnv(bus, "busType", intf.kind)
        abstraction = _add(_add(bus, "abstractionTypes"), "abstractionType")
        library, name = BUS_DEFINITIONS[intf.kind]
        _add(abstraction, "abstractionRef", vendor="xilinx.com", library=library,
             name=f"{name}_rtl", version="1.0")
        maps = _add(abstraction, "portMaps")
        for p in ip.ports:
            if p.interface == intf.name:
                pm = _add(maps, "portMap")
                _add(_add(pm, "logicalPort"), "name", p.role)
                _add(_add(pm, "physicalPort"), "name", p.name)
        if intf.kind == "aximm" and intf.mode == "subordinate":
            _add(_add(bus, "slave"), "memoryMapRef", memoryMapRef=f"{intf.name}_registers")
        elif intf.mode == "manager":
            master = _add(bus, "master")
            if intf.kind == "aximm":
                _add(master, "addressSpaceRef", addressSpaceRef=intf.name)
                managers.append(intf)
        else:
            _add(bus, "slave")
        params = _add(bus, "parameters")
        for k, v in intf.params.items():
            param = _add(params, "parameter", parameterId=f"{intf.name}_{k}", resolve="immediate")
            _add(param, "name", k)
            _add(param, "value", f'"{v}"' if isinstance(v, str) else v)
    if managers:
        spaces = _add(root, "addressSpaces")
        for intf in managers:
            space = _add(spaces, "addressSpace")
            _add(space, "name", intf.name)
            _add(space, "range", 1 << intf.params["ADDR_WIDTH"])
            _add(space, "width", intf.params["DATA_WIDTH"])
    _memory_map(_add(root, "memoryMaps"), regmap, "s_axi_registers")
    model = _add(root, "model")
    view = _add(_add(model, "views"), "view")
    _add(view, "name", "rtl")
    _add(view, "componentInstantiationRef", "verilog")
    inst = _add(_add(model, "instantiations"), "componentInstantiation")
    _add(inst, "name", "verilog")
    _add(inst, "language", "verilog")
    _add(inst, "moduleName", module)
    _add(_add(inst, "fileSetRef"), "localName", "rtl")
    ports = _add(model, "ports")
    for p in ip.ports:
        port = _add(ports, "port")
        _add(port, "name", p.name)
        wire = _add(port, "wire")
        _add(wire, "direction", p.direction)
        if p.width > 1:
            vector = _add(_add(wire, "vectors"), "vector")
            _add(vector, "left", p.width - 1)
            _add(vector, "right", 0)
    fileset = _add(_add(root, "fileSets"), "fileSet")
    _add(fileset, "name", "rtl")
    for f in files:
        file = _add(fileset, "file")
        _add(file, "name", f)
        _add(file, "fileType", "verilogSource" if f.endswith(".v") else "cSource")
        if f.endswith(".h"):
            _add(file, "isIncludeFile", "true")
    _add(root, "description", description)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _memory_map(parent, regmap, name):
    """``regmap`` as an IP-XACT memory map of one address block."""
    mm = _add(parent, "memoryMap")
    _add(mm, "name", name)
    _add(mm, "description", regmap.doc or regmap.name)
    block = _add(mm, "addressBlock")
    _add(block, "name", regmap.name)
    _add(block, "baseAddress", 0)
    _add(block, "range", regmap.size)
    _add(block, "width", 32)
    for r in regmap.registers:
        reg = _add(block, "register")
        _add(reg, "name", r.name)
        if r.doc:
            _add(reg, "description", r.doc)
        _add(reg, "addressOffset", r.offset)
        _add(reg, "size", 32)
        for f in r.fields:
            access, volatile, modified, read_action = ACCESS[f.access]
            field = _add(reg, "field")
            _add(field, "name", f.name)
            if f.doc:
                _add(field, "description", f.doc)
            _add(field, "bitOffset", f.offset)
            _add(_add(_add(field, "resets"), "reset"), "value", f.reset)
            _add(field, "bitWidth", f.width)
            _add(field, "volatile", str(volatile).lower())
            _add(field, "access", access)
            if modified:
                _add(field, "modifiedWriteValue", modified)
            if read_action:
                _add(field, "readAction", read_action)


def vivado_tcl(module: str, version: str, description: str, files: list[str]) -> str:
    """A Tcl script that packages the core in its folder into Vivado's IP catalog format, in
    ``vivado/`` beside it: ``vivado -mode batch -source package_<module>.tcl``."""
    sources = " ".join(f"[file join $here {f}]" for f in files if f.endswith(".v"))
    return f"""# Package {module} for Vivado's IP catalog:
#     vivado -mode batch -source package_{module}.tcl
# Written by `make ip` (docs/integration.md). Vivado reads the interfaces from the Verilog's
# X_INTERFACE_INFO and X_INTERFACE_PARAMETER attributes; this sets the names and the version,
# and writes the IP into vivado/ beside this script. Add that folder to the IP catalog's
# repositories (Settings > IP > Repository) to place the core in a block design.
set here [file dirname [file normalize [info script]]]
# (a project needs a part; the IP is not tied to it: supported_families below says where it goes)
create_project -in_memory -part xc7a35ticsg324-1L
add_files -norecurse [list {sources}]
set_property top {module} [current_fileset]
update_compile_order -fileset sources_1
ipx::package_project -root_dir [file join $here vivado] -vendor atomcube -library ip \\
    -taxonomy /atomcube -import_files -force
set core [ipx::current_core]
set_property name {module} $core
set_property version {version} $core
set_property display_name {{{module}}} $core
set_property description {{{description}}} $core
set_property supported_families {{artix7 Production kintex7 Production virtex7 Production \\
    zynq Production artixuplus Production kintexu Production kintexuplus Production \\
    virtexuplus Production zynquplus Production}} $core
ipx::create_xgui_files $core
ipx::update_checksums $core
ipx::check_integrity $core
ipx::save_core $core
close_project
"""
