"""The DMA layout engine's registers and the register programs that run descriptors.

- 0x000 to 0x018: run control, status, interrupt enables, error code and descriptor index,
  build info, chain address.
- 0x020 to 0x08c: one descriptor (the register form of :class:`model.dma.descriptor.Descriptor`):
  addresses, control word, conversion, pad value, five dimensions.
- 0x0a0 on: what the last job did: bytes read and written, cycles, descriptors completed.

A job runs either the descriptor in the registers (``ctrl.start``) or a chain in memory from
``chain_addr`` (``ctrl.start_chain``). Error codes are :class:`model.dma.descriptor.Error`.
"""

from __future__ import annotations

from atomcube.model.dma.descriptor import CONVERSIONS, MAX_DIMS, Descriptor, Error
from atomcube.model.regmap import Field, reg, regmap

__all__ = ["DMA", "Error", "program", "program_chain"]

_CODES = ", ".join(f"{e.value} {e.name.lower().replace('_', ' ')}" for e in Error)


def _dim_registers():
    regs = []
    for k in range(MAX_DIMS):
        base = 0x040 + 16 * k
        what = "the innermost dimension" if k == 0 else f"dimension {k}"
        regs += [
            reg(f"dim{k}_extent", base, f"Elements of {what} written to the destination.",
                Field("value", 0, 32, "RW", reset=1, doc="Count, at least 1.")),
            reg(f"dim{k}_valid", base + 4, f"Elements of {what} that have a source (the "
                                           f"rest are written with the pad value).",
                Field("value", 0, 32, "RW", reset=1, doc="Count, at most the extent.")),
            reg(f"dim{k}_src_stride", base + 8, f"Source bytes between elements of {what}.",
                Field("value", 0, 32, "RW", doc="Bytes, a multiple of the element size.")),
            reg(f"dim{k}_dst_stride", base + 12, f"Destination bytes between elements of the "
                                                 f"{what}.",
                Field("value", 0, 32, "RW", doc="Bytes, a multiple of the element size.")),
        ]
    return regs


DMA = regmap("dma", [
    reg("ctrl", 0x000, "Run control.",
        Field("start", 0, 1, "W1P", doc="Run the descriptor held in the registers."),
        Field("start_chain", 1, 1, "W1P", doc="Run the chain of descriptors at chain_addr.")),
    reg("status", 0x004, "Job status.",
        Field("busy", 0, 1, "R", doc="A job is running (starts are ignored meanwhile)."),
        Field("done", 1, 1, "RW1C", doc="A job has ended, with or without an error."),
        Field("error", 2, 1, "RW1C", doc="A job has ended with an error (see error)."),
        Field("desc_irq", 3, 1, "RW1C", doc="A descriptor with its irq bit set has completed.")),
    reg("irq_enable", 0x008, "Interrupt enables (irq = status & enables).",
        Field("done", 1, 1, "RW", doc="Interrupt when a job ends."),
        Field("error", 2, 1, "RW", doc="Interrupt when a job ends with an error."),
        Field("desc_irq", 3, 1, "RW", doc="Interrupt when a descriptor asks for one.")),
    reg("error", 0x00C, "Why the last job stopped.",
        Field("code", 0, 4, "R", doc=f"{_CODES}."),
        Field("index", 8, 24, "R", doc="The descriptor (0 = first of the job) that failed.")),
    reg("hwinfo", 0x010, "How the block was built.",
        Field("data_bytes", 0, 7, "R", doc="Memory bus bytes per beat."),
        Field("max_dims", 8, 3, "R", doc="Dimensions per descriptor (5)."),
        Field("addr_width", 16, 7, "R", doc="Address bits the engine reaches (12 to 32): "
              "a job that reads, writes or fetches at or above 2**addr_width ends with RANGE "
              "(16 in a SoC with 64 KiB of memory)."),
        Field("chains", 24, 1, "R", doc="1: the engine runs chains from memory; 0: it was "
              "built without them, and ctrl.start_chain ends the job with NO_CHAIN."),
        Field("convert", 25, 1, "R", doc="1: the engine has the element conversion stage; "
              "0: it was built without it, and a descriptor that converts ends the job with "
              "CONVERT.")),
    reg("chain_addr", 0x018, "Address of the first descriptor of a chain (128-byte aligned).",
        Field("value", 0, 32, "RW", doc="Byte address.")),
    reg("src_addr", 0x020, "Descriptor: source address.",
        Field("value", 0, 32, "RW", doc="Byte address, a multiple of the element size.")),
    reg("dst_addr", 0x024, "Descriptor: destination address.",
        Field("value", 0, 32, "RW", doc="Byte address, a multiple of the element size.")),
    reg("control", 0x028, "Descriptor: element size, dimensions, interrupt (the memory "
                          "form's control word).",
        Field("element", 0, 2, "RW", doc="log2 of the element size: 0 = 1 byte ... 3 = 8."),
        Field("dims", 2, 3, "RW", reset=1, doc="Dimensions used, 1 to 5."),
        Field("irq", 9, 1, "RW", doc="Set status.desc_irq when the descriptor completes.")),
    reg("convert", 0x02C, "Descriptor: the element conversion (the memory form's convert "
                          "word).",
        Field("code", 0, 5, "RW", doc="The conversion, source -> destination type: 0 none, "
              + ", ".join(f"{c} {a} -> {b}" for c, (a, b) in CONVERSIONS.items()) + "."),
        Field("shift", 8, 5, "RW", doc="The scale factor is scale / 2**shift."),
        Field("bit", 16, 5, "RW", doc="A bit field source (ufield, sfield): its lowest bit "
              "in its 32-bit word."),
        Field("width", 24, 5, "RW", doc="A bit field source: its width, 1 to 16 (0 for other "
              "sources).")),
    reg("convert_scale", 0x038, "Descriptor: the conversion's offset and scale (the memory "
                                "form's convert_scale word).",
        Field("offset", 0, 16, "RW", doc="Subtracted from each source element (signed)."),
        Field("scale", 16, 16, "RW", reset=1, doc="Multiplies the difference (signed).")),
    reg("pad_lo", 0x030, "Descriptor: pad value, low word (element bytes used, "
                         "little-endian).",
        Field("value", 0, 32, "RW", doc="Bits 31:0.")),
    reg("pad_hi", 0x034, "Descriptor: pad value, high word (8-byte elements).",
        Field("value", 0, 32, "RW", doc="Bits 63:32.")),
    *_dim_registers(),
    reg("bytes_read", 0x0A0, "Useful bytes the last job read.",
        Field("value", 0, 32, "R", doc="Bytes (saturating).")),
    reg("bytes_written", 0x0A4, "Bytes the last job wrote.",
        Field("value", 0, 32, "R", doc="Bytes (saturating).")),
    reg("cycles", 0x0A8, "Cycles the last job took, from start to done.",
        Field("value", 0, 32, "R", doc="Cycles (saturating).")),
    reg("descriptors", 0x0AC, "Descriptors the last job completed.",
        Field("value", 0, 24, "R", doc="Count.")),
], doc="DMA layout engine: one descriptor in registers or a chain in memory (N-dimensional "
       "strided copies with padding), run control, errors and the last job's counters.")


def program(d: Descriptor) -> list[tuple[str, dict]]:
    """The register writes that run one descriptor, ending with the start pulse. Unused
    dimensions are written as extent 1 so that a previous job's values cannot leak in."""
    dims = [(x.extent, x.valid, x.src_stride, x.dst_stride) for x in d.dims]
    dims += [(1, 1, 0, 0)] * (MAX_DIMS - len(dims))
    writes = [("src_addr", {"value": d.src}), ("dst_addr", {"value": d.dst}),
              ("control", {"element": d.element_bytes.bit_length() - 1, "dims": len(d.dims),
                           "irq": int(d.irq)}),
              ("pad_lo", {"value": d.pad & 0xFFFFFFFF}), ("pad_hi", {"value": d.pad >> 32})]
    c = d.convert
    writes += [("convert", {"code": c.code, "shift": c.shift, "bit": c.bit, "width": c.width}),
               ("convert_scale", {"offset": c.offset & 0xFFFF, "scale": c.scale & 0xFFFF})]
    for k, (e, v, s, t) in enumerate(dims):
        writes += [(f"dim{k}_extent", {"value": e}), (f"dim{k}_valid", {"value": v}),
                   (f"dim{k}_src_stride", {"value": s}), (f"dim{k}_dst_stride", {"value": t})]
    return [*writes, ("ctrl", {"start": 1})]


def program_chain(base: int) -> list[tuple[str, dict]]:
    """The register writes that run the chain at ``base`` (see ``Program.chain``)."""
    return [("chain_addr", {"value": base}), ("ctrl", {"start_chain": 1})]
