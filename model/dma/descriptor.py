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
- ``CONVERT`` (checked first): the conversion (:class:`Conversion`) is one of
  :data:`CONVERSIONS`, its element size is the source type's, and its offset, scale and shift
  fit their fields.

A descriptor may convert each element on the way (:class:`Conversion`): it then reads
elements of the source type and writes elements of the destination type, and every rule above
that concerns the destination (its alignment, nesting and range) uses the destination type's
size. Padded elements are the pad value read as the source type, converted like the rest.

In memory a descriptor is 128 bytes, little-endian, 128-byte aligned (one burst, never across
4 KiB); chains link through ``next`` and end at a descriptor with ``last`` set.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import FormatError
from ..nvdla.precision import convert

MAX_DIMS = 5
ELEMENT_BYTES = (1, 2, 4, 8)
DESCRIPTOR_BYTES = 128
_U32 = (1 << 32) - 1

#: the 128-byte memory form, little-endian: these fields in order (name, bytes, what it holds),
#: then :data:`MAX_DIMS` dimensions of :data:`DIM_FIELDS`, then :data:`TAIL_FIELDS` up to 128.
#: :meth:`Descriptor.encode`, :meth:`Descriptor.decode` and the C header
#: (:func:`c_header`) are all read off these tables.
HEAD_FIELDS = (
    ("src", 8, "source address"),
    ("dst", 8, "destination address"),
    ("next", 8, "next descriptor of the chain (128-byte aligned); read unless control.last"),
    ("pad", 8, "pad value: its low element-size bytes fill what has no source"),
    ("control", 4, "element size, dimension count, last, irq (the CONTROL_ masks)"),
    ("convert", 4, "conversion: code bits 4:0 (0: none), shift 12:8, bit field 20:16, 28:24"),
)
#: one dimension, innermost first
DIM_FIELDS = (
    ("extent", 4, "elements written along this dimension, at least 1"),
    ("valid", 4, "elements that have a source (the rest are padded), at most extent"),
    ("src_stride", 4, "source bytes between neighbouring elements"),
    ("dst_stride", 4, "destination bytes between neighbouring elements"),
)
#: after the dimensions, up to the 128th byte
TAIL_FIELDS = (
    ("convert_scale", 4, "conversion: offset bits 15:0 and scale bits 31:16, both signed"),
    ("reserved", 4, "written 0, ignored"),
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
_TAIL = struct.Struct("<" + "".join(_CODES[n] for _, n, _ in TAIL_FIELDS))
DIMS_OFFSET = _HEAD.size      #: where dimension 0 starts in the memory form
DIM_BYTES = _DIM.size         #: bytes per dimension in the memory form
TAIL_OFFSET = DESCRIPTOR_BYTES - _TAIL.size   #: where the tail fields start
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
    CONVERT = 10        #: a conversion that is not in the table, whose element size is not
    #:                     its source type's, or with a field out of range; or any conversion
    #:                     on an engine built without the conversion stage


class DescriptorError(FormatError):
    """A descriptor breaks a rule; ``code`` is the hardware's error code for it."""

    def __init__(self, field: str, rule: str, code: Error):
        super().__init__(field, rule)
        self.code = code


#: the element types a conversion reads or writes: name -> numpy type. ``ufield`` and
#: ``sfield`` are a bit field of a 32-bit little-endian word (the conversion's ``bit`` and
#: ``width``), unsigned or signed: NVDLA's 10:10:10:2 pixels
TYPES = {"int8": "i1", "uint8": "u1", "int16": "<i2", "uint16": "<u2", "fp16": "<f2",
         "ufield": "<u4", "sfield": "<u4"}
FIELDS = ("ufield", "sfield")
#: the conversions: code -> (source type, destination type). The code is the memory form's
#: ``convert`` bits 4:0; 0 is no conversion, and codes not listed are refused (``CONVERT``)
CONVERSIONS = {
    1: ("int8", "fp16"), 2: ("uint8", "fp16"), 3: ("int16", "fp16"), 4: ("uint16", "fp16"),
    5: ("int8", "int16"), 6: ("uint8", "int16"), 7: ("int16", "int8"), 8: ("uint16", "int8"),
    9: ("fp16", "int8"), 10: ("fp16", "int16"), 11: ("int8", "int8"), 12: ("uint8", "int8"),
    13: ("int16", "int16"), 14: ("uint16", "int16"), 15: ("ufield", "int16"),
    16: ("ufield", "fp16"), 17: ("sfield", "int16"), 18: ("sfield", "fp16"),
}
#: the ``convert`` word's fields: name -> (mask, what it holds)
CONVERT_FIELDS = {
    "code": (0x1F, "bits 4:0: the conversion's code (0: none)"),
    "shift": (0x1F00, "bits 12:8: the scale factor is scale / 2**shift"),
    "bit": (0x1F0000, "bits 20:16: a bit field's lowest bit in its 32-bit word"),
    "width": (0x1F000000, "bits 28:24: a bit field's width, 1 to 16 (0 for other sources)"),
}
SHIFT_MAX = 31
FIELD_WIDTH_MAX = 16


def conversion_code(source: str, destination: str) -> int:
    """The code of the conversion from ``source`` to ``destination`` (type names)."""
    for code, pair in CONVERSIONS.items():
        if pair == (source, destination):
            return code
    pairs = ", ".join(f"{a} -> {b}" for a, b in CONVERSIONS.values())
    raise FormatError("convert", f"the DMA does not convert {source} to {destination}; it "
                                 f"converts {pairs}")


@dataclass(frozen=True)
class Conversion:
    """What a descriptor does to each element on the way (NVDLA's precision conversion,
    "Precision Conversion" in its data format guide, with the scale factor as
    ``scale / 2**shift``): the source element ``d``, read as the source type, becomes

        v = (d - offset) * scale / 2**shift

    computed exactly, then written as the destination type: int8 and int16 truncate ``v``
    toward zero and saturate to the type's range; fp16 rounds it to the nearest value (ties to
    even), keeps denormals and saturates at +-65504 (never infinity). An fp16 source's infinity
    counts as +-65536 (the value NVDLA's convolution pipeline gives it, so it saturates as any
    large value does) and its NaN converts to 0 (an integer has no NaN). ``offset`` and
    ``scale`` are signed 16-bit, ``shift`` 0 to 31. A bit field source (``ufield``,
    ``sfield``) is bits ``bit`` to ``bit + width - 1`` of a 32-bit word, zero- or
    sign-extended; ``width`` is 1 to 16 and the field lies inside the word (both 0 for other
    sources). ``code`` 0 is a plain copy (the other fields 0)."""

    code: int = 0
    offset: int = 0
    scale: int = 1
    shift: int = 0
    bit: int = 0
    width: int = 0

    @classmethod
    def between(cls, source: str, destination: str, offset: int = 0, scale: int = 1,
                shift: int = 0, bit: int = 0, width: int = 0) -> Conversion:
        return cls(conversion_code(source, destination), offset, scale, shift, bit, width)

    @property
    def types(self) -> tuple[str, str] | None:
        return CONVERSIONS.get(self.code)

    @property
    def words(self) -> tuple[int, int]:
        """The memory form's ``convert`` and ``convert_scale`` words (0, 0 for none)."""
        if self.code == 0:
            return 0, 0
        return (self.code | self.shift << 8 | self.bit << 16 | self.width << 24,
                (self.offset & 0xFFFF) | (self.scale & 0xFFFF) << 16)

    @classmethod
    def from_words(cls, convert: int, convert_scale: int) -> Conversion:
        f = {name: (convert & mask) >> ((mask & -mask).bit_length() - 1)
             for name, (mask, _) in CONVERT_FIELDS.items()}
        if f["code"] == 0:
            return cls()

        def signed16(v):
            return v - (1 << 16) if v & 0x8000 else v
        return cls(f["code"], signed16(convert_scale & 0xFFFF), signed16(convert_scale >> 16),
                   f["shift"], f["bit"], f["width"])

    def problem(self, element_bytes: int):
        """(field, rule) of the first rule this conversion breaks with ``element_bytes``-byte
        source elements, or None."""
        if self.code == 0:
            return None
        if self.types is None:
            codes = ", ".join(f"{c} {a} -> {b}" for c, (a, b) in CONVERSIONS.items())
            return "convert.code", f"{self.code} is not a conversion; the codes are {codes}"
        source = self.types[0]
        size = np.dtype(TYPES[source]).itemsize
        if element_bytes != size:
            return ("element_bytes", f"a {source} -> {self.types[1]} conversion reads "
                                     f"{size}-byte elements, not {element_bytes}")
        for name, lo, hi in (("offset", -1 << 15, (1 << 15) - 1),
                             ("scale", -1 << 15, (1 << 15) - 1), ("shift", 0, SHIFT_MAX)):
            v = getattr(self, name)
            if not lo <= v <= hi:
                return f"convert.{name}", f"{v} is outside {lo} to {hi}"
        if source in FIELDS:
            if not 1 <= self.width <= FIELD_WIDTH_MAX:
                return "convert.width", (f"a bit field is 1 to {FIELD_WIDTH_MAX} bits wide, "
                                         f"not {self.width}")
            if not 0 <= self.bit <= 32 - self.width:
                return "convert.bit", (f"a {self.width}-bit field starts at bit 0 to "
                                       f"{32 - self.width} of its word, not {self.bit}")
        elif (self.bit, self.width) != (0, 0):
            return "convert.width", f"{source} is not a bit field: bit and width are 0"
        return None

    def destination_bytes(self, element_bytes: int) -> int:
        """Bytes of a written element, for ``element_bytes``-byte source elements."""
        if self.types is None:
            return element_bytes
        return np.dtype(TYPES[self.types[1]]).itemsize

    def apply(self, raw: np.ndarray) -> np.ndarray:
        """Convert source elements given as their bytes (uint8, last axis the element's bytes)
        into the destination type's bytes (same shape but the last axis)."""
        source, destination = self.types
        d = np.ascontiguousarray(raw).view(TYPES[source])[..., 0]
        if source in FIELDS:
            d = ((d >> np.uint32(self.bit)) & np.uint32((1 << self.width) - 1)).astype(np.int32)
            if source == "sfield":
                d -= (d >> (self.width - 1) & 1) << self.width
        if source == "fp16":
            v = self._from_fp16(d, destination)
        else:
            v = convert(d, self.offset, self.scale / (1 << self.shift), destination)
        out = np.ascontiguousarray(v.astype(TYPES[destination]))
        return out.view(np.uint8).reshape(*d.shape, out.dtype.itemsize)


    def _from_fp16(self, d: np.ndarray, destination: str) -> np.ndarray:
        """fp16 -> int8/int16 in integers: ``d * 2**24`` is a whole number below 2**41, so
        ``(d - offset) * scale`` in units of 2**-24 fits int64 exactly (float64 would round)."""
        x = d.astype(np.float64)
        nan = np.isnan(x)
        x = np.where(nan, 0.0, np.clip(x, -65536.0, 65536.0))
        units = (x * (1 << 24)).astype(np.int64) - (self.offset << 24)
        t = units * self.scale
        k = 24 + self.shift
        whole = np.where(t < 0, -((-t) >> k), t >> k)
        lo, hi = (-128, 127) if destination == "int8" else (-32768, 32767)
        return np.where(nan, 0, np.clip(whole, lo, hi)).astype(TYPES[destination])


NO_CONVERSION = Conversion()


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
    convert: Conversion = NO_CONVERSION

    @property
    def dst_element_bytes(self) -> int:
        """Bytes of a written element: the element size, or the conversion's destination
        type's."""
        return self.convert.destination_bytes(self.element_bytes)

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
        return self.elements * self.dst_element_bytes

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
        return self.dst, self.dst + top + self.dst_element_bytes

    # -- rules --------------------------------------------------------------------------------

    def _problem(self, addr_width: int, converts: bool = True):
        eb = self.element_bytes
        p = self.convert.problem(eb)
        if p is None and self.convert.code and not converts:
            p = "convert", "the engine was built without the conversion stage (hwinfo.convert)"
        if p is not None:
            return (*p, Error.CONVERT)
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
        db = self.dst_element_bytes
        span = 0
        for k, d in enumerate(self.dims):
            if d.extent == 1:
                continue
            if d.dst_stride < span + db:
                return (f"dims[{k}].dst_stride", f"{d.dst_stride} bytes overlaps the "
                        f"{span + db} bytes the inner dimensions write", Error.DIMS)
            span += (d.extent - 1) * d.dst_stride
        for name, v, size in (("src", self.src, eb), ("dst", self.dst, db),
                              *((f"dims[{k}].src_stride", d.src_stride, eb)
                                for k, d in enumerate(self.dims)),
                              *((f"dims[{k}].dst_stride", d.dst_stride, db)
                                for k, d in enumerate(self.dims))):
            if v % size:
                return name, f"{v} is not a multiple of the element size {size}", Error.ALIGN
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

    def error(self, addr_width: int = 32, converts: bool = True) -> Error:
        """The first rule broken, as the engine reports it (``converts``: the engine has the
        conversion stage)."""
        p = self._problem(addr_width, converts)
        return Error.NONE if p is None else p[2]

    def check(self, addr_width: int = 32, converts: bool = True) -> Descriptor:
        p = self._problem(addr_width, converts)
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
        convert, convert_scale = self.convert.words
        raw = _HEAD.pack(self.src, self.dst, self.next, self.pad, self.control(), convert) + \
            b"".join(_DIM.pack(*d) for d in dims)
        return raw + bytes(TAIL_OFFSET - len(raw)) + _TAIL.pack(convert_scale, 0)

    @classmethod
    def decode(cls, raw: bytes) -> Descriptor:
        if len(raw) < DESCRIPTOR_BYTES:
            raise FormatError("descriptor", f"{len(raw)} bytes, a descriptor is "
                                            f"{DESCRIPTOR_BYTES}")
        src, dst, nxt, pad, control, convert = _HEAD.unpack_from(raw)
        convert_scale, _ = _TAIL.unpack_from(raw, TAIL_OFFSET)
        n = (control & CONTROL_DIMS) >> 2
        dims = tuple(Dim(e, s, d, v) for e, v, s, d in
                     (_DIM.unpack_from(raw, DIMS_OFFSET + DIM_BYTES * k) for k in range(n)))
        return cls(src, dst, 1 << (control & CONTROL_ELEMENT), dims, pad,
                   bool(control & CONTROL_IRQ), nxt, bool(control & CONTROL_LAST),
                   Conversion.from_words(convert, convert_scale))


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
            out.append(replace(d, next=nxt, last=i + 1 == n).encode())
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
                    + (f", converts {c.types[0]} -> {c.types[1]} (offset {c.offset}, scale "
                       f"{c.scale}, shift {c.shift}"
                       + (f", bits {c.bit} to {c.bit + c.width - 1}" if c.width else "") + ")"
                       if (c := d.convert).code else "")
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
    gap = TAIL_OFFSET - DIMS_OFFSET - MAX_DIMS * DIM_BYTES
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
    lines += ["", "/* the convert word: the conversion's code (source -> destination type), "
              "shift and bit field */"]
    for name, (mask, doc) in CONVERT_FIELDS.items():
        shift = (mask & -mask).bit_length() - 1
        lines += [f"#define ATOMCUBE_DMA_CONVERT_{name.upper()} 0x{mask:08x}u /* {doc} */",
                  f"#define ATOMCUBE_DMA_CONVERT_{name.upper()}_SHIFT {shift}u"]
    lines += [f"#define ATOMCUBE_DMA_CONVERT_{a.upper()}_{b.upper()} {code}u"
              for code, (a, b) in CONVERSIONS.items()]
    lines += ["", "/* error.code after a job (status.error set) */"]
    lines += [f"#define ATOMCUBE_DMA_ERROR_{e.name} {e.value}u" for e in Error]
    lines += ["", "typedef struct ATOMCUBE_DMA_PACKED {"]
    lines += [f"    {ctype[n]} {name}; /* {doc} */" for name, n, doc in HEAD_FIELDS]
    lines += ["    struct ATOMCUBE_DMA_PACKED {"]
    lines += [f"        {ctype[n]} {name}; /* {doc} */" for name, n, doc in DIM_FIELDS]
    lines += ["    } dims[ATOMCUBE_DMA_MAX_DIMS]; /* innermost first; unused ones: extent = valid"
              " = 1, strides 0 */",
              *([f"    uint8_t reserved_gap[{gap}];"] if gap else []),
              *(f"    {ctype[n]} {name}; /* {doc} */" for name, n, doc in TAIL_FIELDS),
              "} atomcube_dma_desc_t;", "",
              "/* the struct is exactly the memory form (fails to compile otherwise) */",
              "typedef char atomcube_dma_desc_size_check"
              "[sizeof(atomcube_dma_desc_t) == ATOMCUBE_DMA_DESC_BYTES ? 1 : -1];", "",
              f"#endif /* {guard} */"]
    return "\n".join(lines) + "\n"
