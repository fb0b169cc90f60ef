"""Board tops: the SoC with its clock, reset, UART and LEDs on a board's pins. Pin names match
the constraint files in ``constraints/`` (``docs/board.md``).

Each board has a configuration: :data:`BOARDS` gives the board's clock, its constraint file, the
FPGA family and device, and the :class:`~hw.top.soc.SocConfig` built for it.
"""

from dataclasses import dataclass, replace

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..fabric import Ecp5Globals, global_buffer
from .soc import Soc, SocConfig

__all__ = ["Board", "BOARDS", "BoardTop", "board_platform"]


@dataclass(frozen=True)
class Board:
    name: str
    family: str               # "ecp5" or "ice40"
    device: list              # nextpnr's device arguments
    constraints: str          # file in constraints/
    clk_hz: int
    leds: int
    led_active_low: bool
    reset_active_low: bool
    soc: SocConfig
    doc: str
    # Yosys's LUT mapper for this board and nextpnr's router (router1 stalls on the full ULX3S SoC;
    # router2 routed it once and not at every netlist since: docs/board.md)
    mapper: str = "abc9"
    router: str = "router1"
    # placements to try when router2 diverges or router1 stalls (hw.bitstream.RouteWatch),
    # the first with nextpnr seed `seed` (0: nextpnr's own), each further try with the next
    tries: int = 3
    seed: int = 0
    # nextpnr's placer settings beyond its defaults: on the full ULX3S SoC, HeAP with a heavier
    # timing weight (default 10) and a steeper criticality exponent (4, default 2) places and routes
    # faster over the same seeds than with the defaults, and weight 100 faster than 40
    placer: tuple = ()


BOARDS = {
    "ulx3s": Board(
        "ulx3s", "ecp5", ["--85k", "--speed", "6", "--package", "CABGA381"], "ulx3s.lpf",
        25_000_000, 8, False, False,
        SocConfig(mem_bytes=64 * 1024, clk_hz=25_000_000, baud=115_200),
        "ULX3S (ECP5 LFE5U-85F-6): every block, 64 KiB of block RAM, UART on the FTDI chip",
        mapper="abc", router="router2",
        placer=("--placer-heap-timingweight", "100", "--placer-heap-critexp", "4")),
    "icebreaker": Board(
        "icebreaker", "ice40", ["--up5k", "--package", "sg48"], "icebreaker.pcf",
        12_000_000, 2, True, True,
        SocConfig(mem_bytes=4 * 1024, data_width=32, dma=False, sparse=False, lut=True,
                  lut_serial=True, slices=False, bank_mirror=False, clk_hz=12_000_000,
                  baud=115_200),
        "iCEBreaker (iCE40 UP5K): the reduced SoC: the bridge, 4 KiB of memory, the system "
        "registers and the LUT unit with its serial datapath and a one-beat LUT port, on a "
        "32-bit bus without register slices (docs/board.md)",
        # at 96 % full router1's time swings with the placement, from minutes to hours, so the build
        # starts from a seed that has routed and watches router1 for a stall (docs/board.md)
        seed=3),
}


def board(name: str, **soc_changes) -> Board:
    if name not in BOARDS:
        raise ValueError(f"no board named {name!r} (boards: {', '.join(BOARDS)})")
    b = BOARDS[name]
    return replace(b, soc=replace(b.soc, **soc_changes)) if soc_changes else b


def board_platform(b: Board):
    """The platform ``b``'s top is elaborated with: :class:`Ecp5Globals` on the ECP5, none on
    the iCE40 (whose eight global buffers nextpnr fills by itself, resets included)."""
    return Ecp5Globals() if b.family == "ecp5" else None


class BoardTop(wiring.Component):
    """Ports: ``clk`` (the board oscillator), ``btn`` (reset button), ``uart_rx``, ``uart_tx``,
    ``led``. A power-on counter holds the SoC in reset for its first 2^10 cycles, and the button
    resets it at any time; the reset reaches the SoC from a register (on the ECP5 through a
    global buffer).

    LEDs, from bit 0: the bridge is busy, then the interrupt lines (DMA, sparse, LUT unit, LUT
    port), as many as the board has; the last LED toggles every 2^23 cycles to show the clock
    runs."""

    def __init__(self, b: Board):
        self.board = b
        super().__init__({"clk": In(1), "btn": In(1), "uart_rx": In(1, init=1),
                          "uart_tx": Out(1, init=1), "led": Out(b.leds)})

    def elaborate(self, platform):
        b = self.board
        m = Module()
        m.domains.sync = ClockDomain("sync")
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += [ClockSignal("sync").eq(self.clk), ClockSignal("por").eq(self.clk)]
        por = Signal(11)
        with m.If(~por[-1]):
            m.d.por += por.eq(por + 1)
        pressed = ~self.btn if b.reset_active_low else self.btn
        btn_sync = Signal(2)                  # the button, through two flip-flops
        m.d.por += btn_sync.eq((btn_sync << 1) | pressed)
        # the reset comes from a flip-flop, so its path to the SoC's reset inputs starts at a
        # register and not behind a gate; on the ECP5 it goes on a global network
        rst = Signal(init=1)
        m.d.por += rst.eq(~por[-1] | btn_sync[1])
        m.d.comb += ResetSignal("sync").eq(global_buffer(platform, m, rst, "rst"))

        soc = m.submodules.soc = Soc(b.soc)
        m.d.comb += [soc.rx.eq(self.uart_rx), self.uart_tx.eq(soc.tx)]
        # 2^24 cycles: 0.67 s at 25 MHz, 1.4 s at 12 MHz
        blink = Signal(24)
        m.d.sync += blink.eq(blink + 1)
        lights = Signal(b.leds)
        shown = [soc.bridge_busy, *soc.irq][:b.leds - 1]
        for i, s in enumerate(shown):
            m.d.comb += lights[i].eq(s)
        m.d.comb += lights[b.leds - 1].eq(blink[-1])
        m.d.comb += self.led.eq(~lights if b.led_active_low else lights)
        return m
