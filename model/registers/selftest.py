"""The register map the register bank bench runs on. It belongs to no block; it exercises the
bank: every access type, fields that span byte lanes, non-zero reset values, a register of RW
fields with unused bits (a mirror must read them as 0), and a hole in the map (0x18 to 0x1f)
that must answer SLVERR."""

from atomcube.model.regmap import Field, reg, regmap

SELFTEST = regmap("selftest", [
    reg("ident", 0x00, "Identification, driven by the logic.",
        Field("value", 0, 32, "R", doc="Read-only word from the logic.")),
    reg("ctrl", 0x04, "Control fields of several widths, and a read-only busy flag.",
        Field("enable", 0, 1, "RW", reset=1, doc="Enable."),
        Field("mode", 1, 3, "RW", reset=5, doc="Mode."),
        Field("threshold", 6, 12, "RW", reset=0xABC, doc="Spans bytes 0 to 2."),
        Field("busy", 31, 1, "R", doc="Busy, from the logic.")),
    reg("data", 0x08, "Write-only data word.",
        Field("value", 0, 32, "W", reset=0x1234_5678, doc="Seen by the logic, reads 0.")),
    reg("status", 0x0C, "Sticky events and a live level.",
        Field("done", 0, 1, "RW1C", doc="Done event."),
        Field("error", 1, 3, "RW1C", reset=0b010, doc="Error events."),
        Field("events", 7, 10, "RW1C", doc="Ten events spanning bytes 0 to 2."),
        Field("level", 24, 8, "R", doc="Live level from the logic.")),
    reg("cmd", 0x10, "Commands: one-cycle pulses.",
        Field("start", 0, 1, "W1P", doc="Start."),
        Field("abort", 1, 1, "W1P", doc="Abort."),
        Field("kick", 12, 12, "W1P", doc="Twelve pulses spanning bytes 1 and 2.")),
    reg("window", 0x14, "A window onto a memory: reads and writes have side effects.",
        Field("word", 0, 32, "RWS", doc="The word at the window's address.")),
    reg("scratch", 0x20, "Scratch word.",
        Field("value", 0, 32, "RW", reset=0xDEAD_BEEF, doc="Anything.")),
    reg("limits", 0x24, "Two RW fields with unused bits between and above them.",
        Field("low", 0, 5, "RW", reset=0x15, doc="Bits 0 to 4."),
        Field("high", 13, 9, "RW", reset=0x1A5, doc="Bits 13 to 21, across bytes 1 and 2.")),
], doc="The register bank bench's map.")
