"""The SoC's own registers (``hw/top/``): the system block (identity, build, interrupts,
scratch) and the LUT port, which streams samples from memory through the LUT unit and writes the
results back. ``SOC_MAP`` is the address map the UART bridge sees."""

from __future__ import annotations

import enum
from typing import NamedTuple

from atomcube.model.regmap import Field, job_registers, reg, regmap

__all__ = ["SYSCTL", "LUT_PORT", "LutPortError", "SOC_ID", "SOC_MAP", "IRQ_BITS", "Window",
           "lut_port_program"]

SOC_ID = 0x4143_4231                 # "ACB1" in ASCII, high byte first

#: interrupt lines, bit by bit in ``sysctl.irq`` (a block absent from a build reads 0)
IRQ_BITS = ("dma", "sparse", "lut", "lut_port")

SYSCTL = regmap("sysctl", [
    reg("id", 0x000, "Identifies an atomcube SoC.",
        Field("value", 0, 32, "R", doc="0x41434231 (\"ACB1\").")),
    reg("config", 0x004, "How the SoC was built.",
        Field("mem_kib", 0, 12, "R", doc="On-chip memory at address 0, KiB."),
        Field("data_bytes", 12, 7, "R", doc="Memory bus bytes per beat."),
        Field("dma", 20, 1, "R", doc="The DMA layout engine is present."),
        Field("sparse", 21, 1, "R", doc="The sparse weight decompressor is present."),
        Field("lut", 22, 1, "R", doc="The LUT unit (SDP flavour) and its port are present."),
        Field("lut_lanes", 24, 5, "R", doc="The LUT unit's lanes.")),
    reg("clock", 0x008, "The clock the SoC was built for.",
        Field("khz", 0, 32, "R", doc="kHz.")),
    reg("irq", 0x00C, "Interrupt lines, live (each block clears its own).",
        Field("lines", 0, 4, "R", doc="Bit 0 DMA, 1 sparse, 2 LUT unit, 3 LUT port.")),
    reg("scratch", 0x010, "Scratch word for link checks.",
        Field("value", 0, 32, "RW", doc="Anything.")),
], doc="The SoC's system registers.")


class LutPortError(enum.IntEnum):
    """``lut_port.error.code`` values."""

    NONE = 0
    ALIGN = 1       #: src_addr or dst_addr is not a multiple of the bus width
    SIZE = 2        #: beats is 0, or a region passes the end of the address space
    LUT_IDLE = 3    #: the LUT unit had no run in progress at start (start it first)
    READ_ERROR = 4  #: a read answered SLVERR or DECERR (the run completes; results are not valid)
    WRITE_ERROR = 5  #: a write answered SLVERR or DECERR


LUT_PORT = regmap("lut_port", [
    reg("ctrl", 0x000, "Run control.",
        Field("start", 0, 1, "W1P", doc="Stream the samples at src_addr through the LUT unit.")),
    *job_registers(),
    reg("error", 0x00C, "Why the last job stopped.",
        Field("code", 0, 3, "R", doc="0 none, 1 alignment, 2 size, 3 LUT unit idle, "
                                     "4 read error, 5 write error.")),
    reg("hwinfo", 0x010, "How the port was built.",
        Field("data_bytes", 0, 7, "R", doc="Bus bytes per beat (samples per beat x 4)."),
        Field("lanes", 8, 5, "R", doc="Samples per beat, the LUT unit's lanes.")),
    reg("src_addr", 0x020, "Samples: int32, little-endian (bus-width aligned).",
        Field("value", 0, 32, "RW", doc="Byte address.")),
    reg("dst_addr", 0x024, "Results: int32, little-endian, one per sample (bus-width aligned).",
        Field("value", 0, 32, "RW", doc="Byte address.")),
    reg("beats", 0x028, "Bus beats to stream (lanes samples each).",
        Field("value", 0, 24, "RW", doc="Beats, at least 1.")),
    reg("cycles", 0x030, "Cycles the last job took, from start to done.",
        Field("value", 0, 32, "R", doc="Cycles (saturating).")),
], doc="The LUT port: memory to the LUT unit's sample stream, its result stream to memory. "
       "The LUT unit's run (its ctrl.start) must be started first; the port marks the last "
       "beat, which ends that run.")


def lut_port_program(src: int, dst: int, beats: int) -> list[tuple[str, dict]]:
    return [("src_addr", {"value": src}), ("dst_addr", {"value": dst}),
            ("beats", {"value": beats}), ("ctrl", {"start": 1})]


class Window(NamedTuple):
    """One region of :data:`SOC_MAP`."""

    name: str
    base: int
    size: int


#: what the bridge's bus decodes; memory is at 0, its size set by the build (sysctl.config)
SOC_MAP = (
    Window("sysctl", 0x1000_0000, 0x1000),
    Window("dma", 0x1000_1000, 0x100),
    Window("sparse", 0x1000_2000, 0x1000),
    Window("lut", 0x1000_3000, 0x1000),
    Window("lut_port", 0x1000_4000, 0x1000),
)
