"""The SoC: the blocks, on-chip memory and the UART bridge on one bus (``docs/board.md``).

::

    UART -- bridge --(AXI4-Lite)-- decoder --+-- memory window --> Lite-to-AXI4 --+
                                             +-- sysctl, dma, sparse, lut,        |
                                             |   lut_port registers               |
    DMA engine, sparse decompressor, LUT port (AXI4 managers) -------------------+--> arbiter
                                                                                        |
                                                                 on-chip RAM (AXI4) <---+

The address map is :data:`model.registers.soc.SOC_MAP`, with the memory at 0. The LUT unit's
sample stream comes from the LUT port, which reads samples from memory; the decompressor's atom
stream is not connected (its jobs write to memory, ``ctrl.write_enable``). ``irq`` carries each
block's interrupt (the order of :data:`model.registers.soc.IRQ_BITS`); ``sysctl.irq`` shows them
too.
"""

from dataclasses import dataclass

from amaranth import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.registers.soc import IRQ_BITS, SOC_ID, SOC_MAP, SYSCTL

from ..bus.axi import connect_members
from ..bus.fifo import stream_slice
from ..bus.regbank import RegisterBank
from .bridge import UartBridge
from .interconnect import AxiArbiter, LiteDecoder, LiteToAxi
from .lutport import LutPort
from .memory import AxiRam

__all__ = ["SocConfig", "Soc"]


@dataclass(frozen=True)
class SocConfig:
    """What a SoC build holds. ``clk_hz`` and ``baud`` fix the UART's divisor."""

    mem_bytes: int = 64 * 1024
    data_width: int = 64
    dma: bool = True
    sparse: bool = True
    lut: bool = True
    # the decompressor's atom: 16 elements. The SoC writes the dense image back over the same 64-bit
    # bus (8 bytes a cycle), so a 16-element atom a cycle (16 or 32 bytes) is already two to four
    # times what the bus takes; wider atoms only cost area and routing
    sparse_atom_elements: int = 16
    lut_serial: bool = False      # small FPGAs: the LUT unit's serial datapath (one multiplier)
                                  # and a LUT port that moves one beat at a time
    slices: bool = True           # register slices on the long paths and banks that capture
                                  # writes (for the ECP5's clock); False on the UP5K, where
                                  # their flip-flops do not fit
    bank_mirror: bool = True      # the blocks' register banks read their configuration back
                                  # from a memory, not through a multiplexer over registers
                                  # all over the block (hw.bus.regbank; docs/board.md)
    # the DMA engine's address bits (12 to 32, enough for the memory). 16 would cover the
    # ULX3S's 64 KiB with 4,800 LUT4 fewer, but the smaller engine does not make the SoC route
    # faster, so the default is the full 32
    dma_addr_width: int = 32
    # the DMA engine's element conversion stage (hw.dma.convert): one-pass layout and precision
    # conversions, such as a uint8 image into DMP's fp16 input, for about 6,500 LUT4
    dma_convert: bool = True
    clk_hz: int = 25_000_000
    baud: int = 115_200
    ram_stalls: int = 0           # testbenches only: AxiRam's LFSR seed for random stalls

    def __post_init__(self):
        if self.data_width not in (32, 64):
            raise ValueError(f"data_width: the SoC's memory bus is 32 or 64 bits wide, not "
                             f"{self.data_width!r}")
        if self.data_width == 32 and (self.dma or self.sparse):
            raise ValueError("data_width: a 32-bit memory bus is for builds without the DMA "
                             "engine and the sparse decompressor (built and tested at 64 bits)")
        if self.mem_bytes & (self.mem_bytes - 1) or not 1024 <= self.mem_bytes <= 1 << 22:
            raise ValueError(f"mem_bytes {self.mem_bytes}: must be a power of two from 1 KiB "
                             f"to 4 MiB")
        need = max(12, self.mem_bytes.bit_length() - 1)
        if not need <= self.dma_addr_width <= 32:
            raise ValueError(f"dma_addr_width {self.dma_addr_width}: must be {need} (to reach "
                             f"{self.mem_bytes} bytes of memory) to 32")
        if self.clk_hz // self.baud < 4:
            raise ValueError(f"baud {self.baud}: at most clk_hz / 4 = {self.clk_hz // 4}")

    @property
    def divisor(self):
        return round(self.clk_hz / self.baud)

    @property
    def lut_lanes(self):
        return self.data_width // 32


class Soc(wiring.Component):
    """Ports: ``rx``, ``tx`` (UART), ``irq`` (one line per block), ``bridge_busy``."""

    def __init__(self, config: SocConfig = SocConfig()):
        self.config = c = config
        windows = [w for w in SOC_MAP if w.name == "sysctl" or getattr(c, w.name.split("_")[0])]
        self.windows = [("mem", 0, c.mem_bytes), *windows]
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "irq": Out(len(IRQ_BITS)), "bridge_busy": Out(1),
        })

    def elaborate(self, platform):
        from ..dma.engine import DmaEngine
        from ..lut.unit import LutUnit
        from ..sparse.decompressor import SparseDecompressor

        m = Module()
        c = self.config
        bridge = m.submodules.bridge = UartBridge(divisor=c.divisor)
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx),
                     self.bridge_busy.eq(bridge.busy)]
        dec = m.submodules.decoder = LiteDecoder(self.windows, local_copies=c.slices)
        wiring.connect(m, bridge.m_axil, dec.s_axil)

        sysctl = m.submodules.sysctl = RegisterBank(SYSCTL, addr_width=12, capture=c.slices)
        connect_members(m, dec.sysctl, sysctl.s_axil)
        regs = sysctl.regs
        m.d.comb += [regs.id.value.r_data.eq(SOC_ID),
                     regs.config.mem_kib.r_data.eq(c.mem_bytes // 1024),
                     regs.config.data_bytes.r_data.eq(c.data_width // 8),
                     regs.config.dma.r_data.eq(c.dma), regs.config.sparse.r_data.eq(c.sparse),
                     regs.config.lut.r_data.eq(c.lut),
                     regs.config.lut_lanes.r_data.eq(c.lut_lanes if c.lut else 0),
                     regs.clock.khz.r_data.eq(c.clk_hz // 1000),
                     regs.irq.lines.r_data.eq(self.irq)]

        # AXI4 managers: the bridge's memory window first, then each block's
        to_axi = m.submodules.mem_port = LiteToAxi(data_width=c.data_width)
        connect_members(m, dec.mem, to_axi.s_axil)
        managers = [to_axi.m_axi]
        irqs = dict.fromkeys(IRQ_BITS, 0)
        if c.dma:
            dma = m.submodules.dma = DmaEngine(data_width=c.data_width,
                                               addr_width=c.dma_addr_width,
                                               bank_mirror=c.bank_mirror,
                                               convert=c.dma_convert)
            connect_members(m, dec.dma, dma.s_axil)
            managers.append(dma.m_axi)
            irqs["dma"] = dma.irq
        if c.sparse:
            sparse = m.submodules.sparse = SparseDecompressor(
                data_width=c.data_width, atom_elements=c.sparse_atom_elements,
                bank_mirror=c.bank_mirror)
            connect_members(m, dec.sparse, sparse.s_axil)
            m.d.comb += sparse.o_atoms.ready.eq(1)
            managers.append(sparse.m_axi)
            irqs["sparse"] = sparse.irq
        if c.lut:
            lut = m.submodules.lut = LutUnit(lanes=c.lut_lanes, flavor="sdp", serial=c.lut_serial,
                                             bank_mirror=c.bank_mirror)
            # (the port's bank has four configuration registers: too few for a memory copy)
            port = m.submodules.lut_port = LutPort(data_width=c.data_width, lean=c.lut_serial)
            connect_members(m, dec.lut, lut.s_axil)
            connect_members(m, dec.lut_port, port.s_axil)
            # register slices both ways: the port's reader and the unit's pipeline control would
            # otherwise make one combinational path
            for name, source, sink in (("samples", port.o_samples, lut.i_stream),
                                       ("results", lut.o_stream, port.i_results)):
                stream_slice(m, name, source, sink, bypass=not c.slices)
            m.d.comb += port.lut_busy.eq(lut.busy)
            managers.append(port.m_axi)
            irqs["lut"], irqs["lut_port"] = lut.irq, port.irq
        m.d.comb += self.irq.eq(Cat(irqs[k] for k in IRQ_BITS))

        # with `slices`, each block's address channels get a second slice, beside the block: the
        # blocks sit far apart on the ECP5
        arb = m.submodules.arbiter = AxiArbiter(len(managers), data_width=c.data_width,
                                                  slices=c.slices, near_slices=c.slices)
        for i, mgr in enumerate(managers):
            wiring.connect(m, mgr, getattr(arb, f"s{i}"))
        ram = m.submodules.ram = AxiRam(size=c.mem_bytes, data_width=c.data_width,
                                        id_width=arb.out_sig.id_width, stalls=c.ram_stalls,
                                        slices=c.slices)
        wiring.connect(m, arb.m_axi, ram.s_axi)
        return m

