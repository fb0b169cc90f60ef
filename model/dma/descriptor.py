"""DMA descriptors: one N-dimensional strided copy with padding, its rules, its memory form.

A descriptor copies elements of 1, 2, 4 or 8 bytes. Its dimensions are listed innermost
first; each has an ``extent`` (elements written to the destination), a ``valid`` count
(elements of that dimension that have a source; the rest, ``valid <= i < extent``, are written
with the pad value) and a source and destination stride in bytes. The element at index
``(i0, ..., in)`` goes from ``src + sum(i_k * src_stride_k)`` to
``dst + sum(i_k * dst_stride_k)``; if any ``i_k >= valid_k`` it has no source and the
destination gets ``pad`` (the low ``element_bytes`` bytes of it, little-endian).

The rules (:meth:`Descriptor.error` gives the first one broken, :meth:`Descriptor.check`
raises naming it); the hardware checks the same and reports the same code:

- ``DIMS``: 1 to 5 dimensions, element size 1/2/4/8, ``valid <= extent``; and the
  destination's dimensions nest in order (each dimension's stride clears everything the inner
  ones span; dimensions of extent 1 do not count), so no destination byte is written twice.
- ``ZERO_EXTENT``: every extent is at least 1.
- ``ALIGN``: addresses and strides are multiples of the element size.
- ``RANGE``: the last byte read and the last byte written lie below ``2**addr_width``.
- ``OVERLAP``: the bytes read and the bytes written (their address ranges) do not overlap.

In memory a descriptor is 128 bytes, little-endian, 128-byte aligned (one burst, never across
4 KiB); chains link through ``next`` and end at a descriptor with ``last`` set.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from ..errors import FormatError

MAX_DIMS = 5
ELEMENT_BYTES = (1, 2, 4, 8)
DESCRIPTOR_BYTES = 128
_U32 = (1 << 32) - 1

#: the 128-byte memory form, little-endian: these fields in order (name, bytes, what it holds),
#: then :data:`MAX_DIMS` dimensions of :data:`DIM_FIELDS`, then reserved bytes up to 128.
#: :meth:`Descriptor.encode`, :meth:`Descriptor.decode` and the C header
#: (:func:`c_header`) are all read off these two tables.
HEAD_FIELDS = (
    ("src", 8, "source address"),
    ("dst", 8, "destination address"),
    ("next", 8, "next descriptor of the chain (128-byte aligned); read unless control.last"),
    ("pad", 8, "pad value: its low element-size bytes fill what has no source"),
    ("control", 4, "element size, dimension count, last, irq (the CONTROL_ masks)"),
    ("reserved", 4, "written 0, ignored"),
)
#: one dimension, innermost first
DIM_FIELDS = (
    ("extent", 4, "elements written along this dimension, at least 1"),
    ("valid", 4, "elements that have a source (the rest are padded), at most extent"),
    ("src_stride", 4, "source bytes between neighbouring elements"),
    ("dst_stride", 4, "destination bytes between neighbouring elements"),
)
#: the control word's fields: name -> (mask, what it holds)
CONTROL_FIELDS = {
    "element": (0x3, "bits 1:0: log2 of the element size (1, 2, 4 or 8 bytes)"),
    "dims": (0x1C, "bits 4:2: number of dimensions, 1 to 5"),
    "last": (0x100, "bit 8: last descriptor of a chain"),
    "irq": (0x200, "bit 9: raise the interrupt when this descriptor completes"),
}
_CODES = {4: "I", 8: "Q"}
_HEAD = struct.Struct("<" + "".join(_CODES[n] for _, n, _ in HEAD_FIELDS))
_DIM = struct.Struct("<" + "".join(_CODES[n] for _, n, _ in DIM_FIELDS))
DIMS_OFFSET = _HEAD.size      #: where dimension 0 starts in the memory form
DIM_BYTES = _DIM.size         #: bytes per dimension in the memory form
CONTROL_ELEMENT = CONTROL_FIELDS["element"][0]
CONTROL_DIMS = CONTROL_FIELDS["dims"][0]
CONTROL_LAST = CONTROL_FIELDS["last"][0]
CONTROL_IRQ = CONTROL_FIELDS["irq"][0]


class Error(enum.IntEnum):
    """The DMA's error codes (``error.code``), shared by the model's checks and the engine."""

    NONE = 0
    DIMS = 1            #: dimension count, element size, valid > extent, or a non-nesting
    #:                     destination
    ZERO_EXTENT = 2     #: an extent of zero
    ALIGN = 3           #: an address or stride that is not a multiple of the element size, or
    #:                     a chain address that is not 128-byte aligned
    RANGE = 4           #: the copy reads or writes past the top of the address space
    OVERLAP = 5         #: the source and destination ranges overlap
    READ_ERROR = 6      #: a data read answered SLVERR or DECERR
    WRITE_ERROR = 7     #: a write answered SLVERR or DECERR
    FETCH_ERROR = 8     #: a descriptor fetch answered SLVERR or DECERR
    NO_CHAIN = 9        #: ``ctrl.start_chain`` on an engine built without chains


class DescriptorError(FormatError):
    """A descriptor breaks a rule; ``code`` is the hardware's error code for it."""

    def __init__(self, field: str, rule: str, code: Error):
        super().__init__(field, rule)
        self.code = code


@dataclass(frozen=True)
class Dim:
    extent: int
    src_stride: int
    dst_stride: int
    valid: int | None = None          #: default: the whole extent has a source

    def __post_init__(self):
        if self.valid is None:
            object.__setattr__(self, "valid", self.extent)


@dataclass(frozen=True)
class Descriptor:
    src: int
    dst: int
    element_bytes: int
    dims: tuple[Dim, ...]
    pad: int = 0
    irq: bool = False
    next: int = 0
    last: bool = True

    # -- geometry -----------------------------------------------------------------------------

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.extent
        return n

    @property
    def dst_bytes(self) -> int:
        """Bytes written."""
        return self.elements * self.element_bytes

    @property
    def src_bytes(self) -> int:
        """Bytes read (elements with a source)."""
        n = 1
        for d in self.dims:
            n *= d.valid
        return n * self.element_bytes

    def src_range(self) -> tuple[int, int]:
        """[first, last + 1) byte address read; empty (src, src) when nothing is read."""
        if self.src_bytes == 0:
            return self.src, self.src
        top = sum((d.valid - 1) * d.src_stride for d in self.dims)
        return self.src, self.src + top + self.element_bytes

    def dst_range(self) -> tuple[int, int]:
        top = sum((d.extent - 1) * d.dst_stride for d in self.dims)
        return self.dst, self.dst + top + self.element_bytes

    # -- rules --------------------------------------------------------------------------------

    def _problem(self, addr_width: int):
        eb = self.element_bytes
        if eb not in ELEMENT_BYTES:
            return "element_bytes", f"must be 1, 2, 4 or 8, not {eb}", Error.DIMS
        if not 1 <= len(self.dims) <= MAX_DIMS:
            return "dims", f"1 to {MAX_DIMS} dimensions, not {len(self.dims)}", Error.DIMS
        for k, d in enumerate(self.dims):
            if d.extent < 1:
                return f"dims[{k}].extent", "must be at least 1", Error.ZERO_EXTENT
            if not 0 <= d.valid <= d.extent:
                return (f"dims[{k}].valid", f"{d.valid} is outside 0 to the extent {d.extent}",
                        Error.DIMS)
            for name in ("extent", "valid", "src_stride", "dst_stride"):
                v = getattr(d, name)
                if not 0 <= v <= _U32:
                    return f"dims[{k}].{name}", f"{v} does not fit 32 bits", Error.DIMS
        if not 0 <= self.pad < 1 << 64:
            return "pad", "must fit 64 bits", Error.DIMS
        span = 0
        for k, d in enumerate(self.dims):
            if d.extent == 1:
                continue
            if d.dst_stride < span + eb:
                return (f"dims[{k}].dst_stride", f"{d.dst_stride} bytes overlaps the "
                        f"{span + eb} bytes the inner dimensions write", Error.DIMS)
            span += (d.extent - 1) * d.dst_stride
        for name, v in (("src", self.src), ("dst", self.dst),
                        *((f"dims[{k}].src_stride", d.src_stride)
                          for k, d in enumerate(self.dims)),
                        *((f"dims[{k}].dst_stride", d.dst_stride)
                          for k, d in enumerate(self.dims))):
            if v % eb:
                return name, f"{v} is not a multiple of the element size {eb}", Error.ALIGN
        top = 1 << addr_width
        lo, hi = self.src_range()
        if lo < 0 or hi > top:
            return "src", (f"reads up to 0x{hi - 1:x}, past the {addr_width}-bit address "
                           f"space"), Error.RANGE
        dlo, dhi = self.dst_range()
        if dlo < 0 or dhi > top:
            return "dst", (f"writes up to 0x{dhi - 1:x}, past the {addr_width}-bit address "
                           f"space"), Error.RANGE
        if hi > lo and lo < dhi and dlo < hi:
            return "dst", (f"[0x{dlo:x}, 0x{dhi:x}) overlaps the source [0x{lo:x}, 0x{hi:x})"
                           ), Error.OVERLAP
        return None

    def error(self, addr_width: int = 32) -> Error:
        p = self._problem(addr_width)
        return Error.NONE if p is None else p[2]

    def check(self, addr_width: int = 32) -> Descriptor:
        p = self._problem(addr_width)
        if p is not None:
            raise DescriptorError(*p)
        return self

    # -- memory form --------------------------------------------------------------------------

    def control(self) -> int:
        return ((self.element_bytes.bit_length() - 1) | len(self.dims) << 2
                | (CONTROL_LAST if self.last else 0) | (CONTROL_IRQ if self.irq else 0))

    def encode(self) -> bytes:
        dims = [(d.extent, d.valid, d.src_stride, d.dst_stride) for d in self.dims]
        dims += [(1, 1, 0, 0)] * (MAX_DIMS - len(dims))
        raw = _HEAD.pack(self.src, self.dst, self.next, self.pad, self.control(), 0) + \
            b"".join(_DIM.pack(*d) for d in dims)
        return raw + bytes(DESCRIPTOR_BYTES - len(raw))

    @classmethod
    def decode(cls, raw: bytes) -> Descriptor:
        if len(raw) < DESCRIPTOR_BYTES:
            raise FormatError("descriptor", f"{len(raw)} bytes, a descriptor is "
                                            f"{DESCRIPTOR_BYTES}")
        src, dst, nxt, pad, control, _ = _HEAD.unpack_from(raw)
        n = (control & CONTROL_DIMS) >> 2
        dims = tuple(Dim(e, s, d, v) for e, v, s, d in
                     (_DIM.unpack_from(raw, DIMS_OFFSET + DIM_BYTES * k) for k in range(n)))
        return cls(src, dst, 1 << (control & CONTROL_ELEMENT), dims, pad,
                   bool(control & CONTROL_IRQ), nxt, bool(control & CONTROL_LAST))


@dataclass
class Program:
    """A list of descriptors and what they convert: ``src``/``dst`` are the conversion's base
    addresses, ``dst_size`` the bytes the destination spans."""

    descriptors: list[Descriptor] = field(default_factory=list)
    dst_size: int = 0

    def __len__(self) -> int:
        return len(self.descriptors)

    def __iter__(self):
        return iter(self.descriptors)

    def bytes_moved(self) -> tuple[int, int]:
        """(bytes read, bytes written) by the whole program."""
        return (sum(d.src_bytes for d in self.descriptors),
                sum(d.dst_bytes for d in self.descriptors))

    def chain(self, base: int) -> bytes:
        """The descriptors as a chain in memory at ``base`` (128-byte aligned): each ``next``
        points at the following one, the last has ``last`` set."""
        if base % DESCRIPTOR_BYTES:
            raise DescriptorError("base", f"0x{base:x} is not {DESCRIPTOR_BYTES}-byte aligned",
                                  Error.ALIGN)
        n = len(self.descriptors)
        out = []
        for i, d in enumerate(self.descriptors):
            nxt = base + (i + 1) * DESCRIPTOR_BYTES if i + 1 < n else 0
            out.append(Descriptor(d.src, d.dst, d.element_bytes, d.dims, d.pad, d.irq, nxt,
                                  i + 1 == n).encode())
        return b"".join(out)

    def listing(self, base: int) -> str:
        """The chain :meth:`chain` lays out at ``base``, descriptor by descriptor, as text: its
        address, source, destination, element size, pad, flags and dimensions."""
        from ..report import table

        blocks = []
        n = len(self.descriptors)
        for i, d in enumerate(self.descriptors):
            at = base + i * DESCRIPTOR_BYTES
            flags = ", ".join(f for f, on in (("last", i + 1 == n), ("irq", d.irq)) if on)
            head = (f"descriptor {i} at 0x{at:08x}: src 0x{d.src:08x}, dst 0x{d.dst:08x}, "
                    f"{d.element_bytes}-byte elements, pad 0x{d.pad:x}"
                    + (f", next 0x{at + DESCRIPTOR_BYTES:08x}" if i + 1 < n else "")
                    + (f" ({flags})" if flags else ""))
            rows = [(k, x.extent, x.valid, x.src_stride, x.dst_stride)
                    for k, x in enumerate(d.dims)]
            dims = table(("dim", "extent", "valid", "src_stride", "dst_stride"), rows)
            blocks.append(head + "\n" + "\n".join("  " + line for line in dims.split("\n")))
        return "\n\n".join(blocks) + "\n"


def read_chain(memory, base: int, limit: int = 1 << 16) -> list[Descriptor]:
    """Follow a chain in ``memory`` (bytes-like, indexed by address) from ``base``."""
    out, addr = [], base
    while True:
        if addr % DESCRIPTOR_BYTES:
            raise DescriptorError("next", f"0x{addr:x} is not {DESCRIPTOR_BYTES}-byte aligned",
                                  Error.ALIGN)
        d = Descriptor.decode(bytes(memory[addr:addr + DESCRIPTOR_BYTES]))
        out.append(d)
        if d.last:
            return out
        if len(out) >= limit:
            raise FormatError("next", f"no last descriptor within {limit}")
        addr = d.next


def c_header() -> str:
    """A C header with the descriptor's memory form as a packed struct, its size, alignment and
    control word, and the engine's error codes; read off :data:`HEAD_FIELDS`,
    :data:`DIM_FIELDS`, :data:`CONTROL_FIELDS` and :class:`Error`. ``atomcube regs --out`` and
    ``make ip`` write it as ``dma_descriptor.h``."""
    ctype = {4: "uint32_t", 8: "uint64_t"}
    tail = DESCRIPTOR_BYTES - DIMS_OFFSET - MAX_DIMS * DIM_BYTES
    guard = "ATOMCUBE_DMA_DESCRIPTOR_H"
    lines = [
        "/* The DMA engine's descriptor in memory (little-endian). Generated by `atomcube regs`;",
        " * do not edit. A chain is descriptors at 128-byte aligned addresses, each naming the",
        " * next, ending at one with ATOMCUBE_DMA_CONTROL_LAST set. */",
        f"#ifndef {guard}", f"#define {guard}", "", "#include <stdint.h>", "",
        "#if defined(__GNUC__) || defined(__clang__)",
        "#define ATOMCUBE_DMA_PACKED __attribute__((packed))",
        "#else",
        "#define ATOMCUBE_DMA_PACKED",
        "#endif", "",
        f"#define ATOMCUBE_DMA_DESC_BYTES {DESCRIPTOR_BYTES}u",
        f"#define ATOMCUBE_DMA_DESC_ALIGN {DESCRIPTOR_BYTES}u /* a descriptor's address */",
        f"#define ATOMCUBE_DMA_MAX_DIMS {MAX_DIMS}u", "",
    ]
    for name, (mask, doc) in CONTROL_FIELDS.items():
        shift = (mask & -mask).bit_length() - 1
        lines += [f"#define ATOMCUBE_DMA_CONTROL_{name.upper()} 0x{mask:03x}u /* {doc} */",
                  f"#define ATOMCUBE_DMA_CONTROL_{name.upper()}_SHIFT {shift}u"]
    lines += ["", "/* error.code after a job (status.error set) */"]
    lines += [f"#define ATOMCUBE_DMA_ERROR_{e.name} {e.value}u" for e in Error]
    lines += ["", "typedef struct ATOMCUBE_DMA_PACKED {"]
    lines += [f"    {ctype[n]} {name}; /* {doc} */" for name, n, doc in HEAD_FIELDS]
    lines += ["    struct ATOMCUBE_DMA_PACKED {"]
    lines += [f"        {ctype[n]} {name}; /* {doc} */" for name, n, doc in DIM_FIELDS]
    lines += ["    } dims[ATOMCUBE_DMA_MAX_DIMS]; /* innermost first; unused ones: extent = valid"
              " = 1, strides 0 */",
              f"    uint8_t reserved_tail[{tail}];",
              "} atomcube_dma_desc_t;", "",
              "/* the struct is exactly the memory form (fails to compile otherwise) */",
              "typedef char atomcube_dma_desc_size_check"
              "[sizeof(atomcube_dma_desc_t) == ATOMCUBE_DMA_DESC_BYTES ? 1 : -1];", "",
              f"#endif /* {guard} */"]
    return "\n".join(lines) + "\n"
