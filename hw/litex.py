"""atomcube's blocks in a LiteX SoC: :func:`add_core` writes a block as a standalone core
(:mod:`hw.ip`) and adds it to the SoC as LiteX adds its own peripherals.

- Its registers (``s_axi``) become a region of the SoC's main bus: an AXI4-Lite subordinate,
  which LiteX converts to the bus's standard (Wishbone by default).
- Its memory manager (``m_axi``, the DMA engine and the sparse decompressor) becomes a master
  of the SoC's DMA bus (``soc.dma_bus`` where the CPU has one, else the main bus), through
  LiteX's AXI converters.
- Its interrupt becomes an event (``EventSourceLevel``) on the SoC's interrupt controller, when
  the SoC has a CPU.
- Its streams (the LUT unit's samples and results, the decompressor's atoms) stay AXI4-Stream
  interfaces of the returned module (``sink``, ``source``), for the design to connect.

It needs LiteX and Migen (``pip install 'atomcube[litex]'``); examples/litex_ulx3s.py builds a
ULX3S SoC with the DMA engine and the LUT unit.
"""

from __future__ import annotations

import json
from pathlib import Path

from .ip import CORES, parse_settings, write_core

__all__ = ["add_core"]

_CHANNELS = ("aw", "ar", "w", "b", "r")


def _member(iface, role):
    """The Migen signal of a LiteX AXI interface for an AXI signal (``AWADDR``, ``WLAST``)."""
    name = role.lower()
    channel = next(c for c in _CHANNELS if name.startswith(c))
    return getattr(getattr(iface, channel), name[len(channel):])


def add_core(soc, name: str, core: str = "dma", settings=(), *, origin: int | None = None,
             out: Path | None = None):
    """Add ``core`` (:data:`hw.ip.CORES`, with ``settings`` as ``--set`` takes them) to
    ``soc`` as ``name``: its registers at ``origin`` (default: ``soc.mem_map[name]`` if the SoC
    lists it, as LiteX's own peripherals do, else a free region), its manager on the DMA bus,
    its interrupt. The core's files go into ``out`` (default: the platform's
    ``output_dir``/atomcube/``name``). Returns the module (a LiteXModule, already a submodule of
    ``soc``)."""
    from litex.gen import LiteXModule
    from litex.soc.integration.soc import SoCRegion
    from litex.soc.interconnect import axi, stream
    from litex.soc.interconnect.csr_eventmanager import EventManager, EventSourceLevel
    from migen import ClockSignal, Instance, ResetSignal, Signal

    spec = CORES[core]
    params = parse_settings(spec, settings)
    module = f"atomcube_{name}"
    out = Path(out or Path(soc.platform.output_dir) / "atomcube" / name)
    written = write_core(spec, out, params, module)
    rec = json.loads(next(p for p in written if p.suffix == ".json").read_text())
    soc.platform.add_source(str(out / f"{module}.v"))

    wrapper = LiteXModule()
    ports = {"i_aclk": ClockSignal("sys"), "i_aresetn": ~ResetSignal("sys")}
    intfs = {i["name"]: i for i in rec["interfaces"]}

    # registers: an AXI4-Lite subordinate on the main bus
    lite = intfs["s_axi"]["params"]
    wrapper.s_axil = s_axil = axi.AXILiteInterface(data_width=32, address_width=32)
    size = max(rec["registers"]["size"], 1 << lite["ADDR_WIDTH"], 0x1000)
    if origin is None:
        origin = soc.mem_map.get(name)
    soc.bus.add_slave(name=name, slave=s_axil,
                      region=SoCRegion(origin=origin, size=size, cached=False))
    # memory: an AXI4 manager on the DMA bus
    m_axi = None
    if "m_axi" in intfs:
        full = intfs["m_axi"]["params"]
        wrapper.m_axi = m_axi = axi.AXIInterface(data_width=full["DATA_WIDTH"],
                                                 address_width=full["ADDR_WIDTH"],
                                                 id_width=full["ID_WIDTH"])
        getattr(soc, "dma_bus", soc.bus).add_master(name=f"{name}_dma", master=m_axi)
    # streams: AXI4-Stream interfaces for the design to connect
    for prefix, attr in (("s_axis", "sink"), ("m_axis", "source")):
        if prefix in intfs:
            p = intfs[prefix]["params"]
            layout = [("data", 8 * p["TDATA_NUM_BYTES"])]
            if p["HAS_TKEEP"]:
                layout.append(("keep", p["TDATA_NUM_BYTES"]))
            if p["TUSER_WIDTH"]:
                layout.append(("user", p["TUSER_WIDTH"]))
            setattr(wrapper, attr, stream.Endpoint(layout))
    irq = Signal()
    for port in rec["ports"]:
        pin = ("i_" if port["direction"] == "in" else "o_") + port["name"]
        intf = port["interface"]
        if intf == "s_axi":
            sig = _member(s_axil, port["role"])
            # the core decodes its own address bits; LiteX's decoder has chosen the region
            ports[pin] = sig[:port["width"]] if port["role"] in ("AWADDR", "ARADDR") else sig
        elif intf == "m_axi":
            ports[pin] = _member(m_axi, port["role"])
        elif intf in ("s_axis", "m_axis"):
            ep = wrapper.sink if intf == "s_axis" else wrapper.source
            field = {"TDATA": "data", "TKEEP": "keep", "TUSER": "user"}.get(port["role"])
            ports[pin] = getattr(ep, field) if field else getattr(ep, port["role"][1:].lower())
        elif port["name"] == "irq":
            ports[pin] = irq
        elif intf is None:
            ports[pin] = Signal(port["width"], name=f"{name}_{port['name']}")
            setattr(wrapper, port["name"], ports[pin])
    wrapper.specials += Instance(module, **ports)
    wrapper.ev = EventManager()
    wrapper.ev.core = EventSourceLevel()   # (EventManager keeps "irq" for its own output)
    wrapper.ev.finalize()
    wrapper.comb += wrapper.ev.core.trigger.eq(irq)
    setattr(soc, name, wrapper)
    if soc.irq.enabled:
        soc.irq.add(name, use_loc_if_exists=True)
    return wrapper
