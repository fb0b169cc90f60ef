"""The sparse weight decompressor's registers, its error codes, and the register program that
runs a :class:`model.nvdla.weights.DecompressJob`.

- 0x000 to 0x014: run control, status, interrupt enables, error code and group, build info.
- 0x020 to 0x04c: the job: surface addresses and sizes, destination, groups, kernels, bytes per
  kernel, precision.
- 0x060 on: what the last job did: dense bytes produced, cycles, cycles stalled on input.
"""

from __future__ import annotations

import enum

from atomcube.model.regmap import Field, job_registers, reg, regmap

__all__ = ["SPARSE", "Error", "program"]


class Error(enum.IntEnum):
    """``error.code`` values. The job stops at the first; ``error.group`` names the group."""

    NONE = 0
    ALIGN = 1          #: a surface or destination address is not 256-byte aligned
    SIZE = 2           #: a size is not a multiple of 128, a count is zero or inconsistent, or a
    #:                    surface runs past the top of the address space
    WMB_SHORT = 3      #: the WMB surface ended before the last group's mask bits
    WGS_MISMATCH = 4   #: a group's mask popcount disagrees with its WGS
    WGS_OVERFLOW = 5   #: the WGS values total more than the weight surface holds
    READ_ERROR = 6     #: a read answered SLVERR or DECERR
    WRITE_ERROR = 7    #: a write answered SLVERR or DECERR
    DST_RANGE = 8      #: the dense image would pass the end of the address space


#: the three source surfaces: register name prefix, what it holds, what its size must be
_SURFACES = (("weight", "Packed weight", "a multiple of 128, may be 0"),
             ("wmb", "WMB", "a positive multiple of 128"),
             ("wgs", "WGS", "a positive multiple of 128, >= 4 x groups"))


def _surface_registers():
    """<surface>_addr and <surface>_bytes for each source surface, from 0x020 on."""
    regs = []
    for i, (name, what, size_rule) in enumerate(_SURFACES):
        regs.append(reg(f"{name}_addr", 0x020 + 8 * i, f"{what} surface address (256-byte "
                                                       f"aligned).",
                        Field("value", 0, 32, "RW", doc="Byte address.")))
        regs.append(reg(f"{name}_bytes", 0x024 + 8 * i, f"{what} surface size ({size_rule}).",
                        Field("value", 0, 32, "RW", doc="Bytes.")))
    return regs


SPARSE = regmap("sparse", [
    reg("ctrl", 0x000, "Run control.",
        Field("start", 0, 1, "W1P", doc="Start the job the registers describe."),
        Field("stream_enable", 4, 1, "RW", reset=1,
              doc="Send the dense atoms out on the atom stream (clear it when nothing is "
                  "connected there, or the job waits for it)."),
        Field("write_enable", 5, 1, "RW",
              doc="Also write the dense image to memory at dst_addr.")),
    *job_registers(),
    reg("error", 0x00C, "Why the last job stopped.",
        Field("code", 0, 4, "R", doc="0 none, 1 alignment, 2 size, 3 WMB short, "
                                     "4 WGS mismatch, 5 WGS overflow, 6 read error, "
                                     "7 write error, 8 destination range."),
        Field("group", 8, 24, "R", doc="The group being decoded when it stopped.")),
    reg("hwinfo", 0x010, "How the block was built.",
        Field("data_bytes", 0, 7, "R", doc="Memory bus bytes per beat."),
        Field("atom_elements", 8, 7, "R", doc="Elements per output atom (16, 32 or 64).")),
    *_surface_registers(),
    reg("dst_addr", 0x038, "Where the dense image goes when ctrl.write_enable is set "
                           "(256-byte aligned).",
        Field("value", 0, 32, "RW", doc="Byte address.")),
    reg("groups", 0x040, "Kernel groups in the image (all sets).",
        Field("value", 0, 24, "RW", doc="Count, at least 1.")),
    reg("kernels", 0x044, "Kernels per set (deconvolution images hold several sets, each "
                          "ending in its own partial group).",
        Field("value", 0, 24, "RW", doc="Count, at least 1.")),
    reg("bytes_per_kernel", 0x048, "Dense bytes of one kernel.",
        Field("value", 0, 24, "RW", doc="Bytes, a whole number of elements.")),
    reg("precision", 0x04C, "Element size.",
        Field("two_byte", 0, 1, "RW", doc="0 = int8 (1 byte, 32 kernels per group), "
                                          "1 = int16/fp16 (2 bytes, 16 kernels per group).")),
    reg("dense_bytes", 0x060, "Dense bytes the last job produced (128-byte padding included).",
        Field("value", 0, 32, "R", doc="Bytes.")),
    reg("cycles", 0x064, "Cycles the last job took, from start to done.",
        Field("value", 0, 32, "R", doc="Cycles (saturating).")),
    reg("stall_cycles", 0x068, "Cycles the decoder waited for mask or weight bytes.",
        Field("value", 0, 32, "R", doc="Cycles (saturating).")),
], doc="Sparse weight decompressor: job registers (NVDLA's compressed weight surfaces in, dense "
       "weight atoms out), run control and the last job's counters.")


def program(job, *, stream: bool = True) -> list[tuple[str, dict]]:
    """The register writes that run ``job`` (a DecompressJob), ending with the start pulse."""
    write = job.dst_addr is not None
    surfaces = [(f"{name}_{part}", {"value": getattr(job, f"{name}_{part}")})
                for name, _, _ in _SURFACES for part in ("addr", "bytes")]
    return [
        *surfaces,
        ("dst_addr", {"value": job.dst_addr if write else 0}),
        ("groups", {"value": job.groups}), ("kernels", {"value": job.kernels}),
        ("bytes_per_kernel", {"value": job.bytes_per_kernel}),
        ("precision", {"two_byte": int(job.element_bytes == 2)}),
        ("ctrl", {"stream_enable": int(stream), "write_enable": int(write)}),
        ("ctrl", {"start": 1, "stream_enable": int(stream), "write_enable": int(write)}),
    ]
