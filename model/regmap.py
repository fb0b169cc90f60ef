"""Register maps declared once, as data.

A block declares its registers here (name, offset, fields with access type, reset value, one-line
doc). Everything else is derived from that one declaration:

- the Amaranth AXI4-Lite register bank (:class:`hw.bus.regbank.RegisterBank`),
- a C header (:meth:`RegisterMap.c_header`),
- a Markdown register map (:meth:`RegisterMap.markdown`),
- a Python driver (:class:`Driver` for blocking transports, :class:`AsyncDriver` for cocotb),
- a behavioural model of the bank (:class:`RegisterBankModel`) that the cocotb bench checks the
  gateware against.

This module is pure Python: no Amaranth or cocotb imports.

Access types
------------
=======  ==================================================================================
``R``     read-only; the block's logic drives the value. Writes are ignored.
``RW``    read/write; the value is stored in the bank and visible to the logic.
``W``     write-only; stored and visible to the logic, reads return 0.
``RW1C``  status bits: the logic sets them, software clears a bit by writing 1 to it.
          A set and a clear in the same cycle leave the bit set.
``W1P``   write-1-pulse: writing 1 to a bit raises that bit of the field's pulse output for
          exactly one cycle; reads return 0.
``RWS``   read/write with side effects, for windows onto memories or FIFOs: the logic supplies
          the read value and sees every write (value and strobe); nothing is stored for reads.
=======  ==================================================================================

Bus rules (identical in the gateware and in :class:`RegisterBankModel`): registers are 32 bits
wide at 4-byte aligned offsets; byte strobes apply bit-for-bit to every writable field; an access
to an address where no register is declared answers SLVERR (reads return 0) and changes nothing;
a write to a register whose fields are all read-only answers OKAY and changes nothing.
"""

from __future__ import annotations

import enum
import keyword
import re
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Access", "Field", "Register", "RegisterMap", "RegValue",
    "BusError", "Resp", "Driver", "AsyncDriver", "RegisterBankModel",
]

REG_BYTES = 4
REG_BITS = 32
# Per-register strobe outputs of the bank; no field may take these names.
RESERVED_FIELD_NAMES = frozenset({"rd_stb", "wr_stb"})
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class Access(enum.Enum):
    """How software and the block's logic share a field (see module docstring)."""

    R = "R"
    RW = "RW"
    W = "W"
    RW1C = "RW1C"
    W1P = "W1P"
    RWS = "RWS"

    @property
    def readable(self) -> bool:
        """Reads return the field's value (otherwise they return 0)."""
        return self in (Access.R, Access.RW, Access.RW1C, Access.RWS)

    @property
    def writable(self) -> bool:
        """Writes have an effect (otherwise they are ignored)."""
        return self is not Access.R

    @property
    def stored(self) -> bool:
        """The bank holds the value in a register of its own."""
        return self in (Access.RW, Access.W, Access.RW1C, Access.RWS)


class Resp(enum.IntEnum):
    """AXI response codes."""

    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class BusError(Exception):
    """A register access answered with an error response."""

    def __init__(self, op: str, address: int, resp: int, register: str | None = None):
        self.op = op
        self.address = address
        self.resp = Resp(resp)
        self.register = register
        where = f" ({register})" if register else ""
        super().__init__(f"{op} at 0x{address:08x}{where} answered {self.resp.name}")


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name) or keyword.iskeyword(name):
        raise ValueError(f"{kind} name must be a lower-case identifier (a-z, 0-9, _), not {name!r}")


@dataclass(frozen=True)
class Field:
    """One field of a register.

    Parameters
    ----------
    name : str
        Lower-case identifier, unique within the register.
    offset : int
        Position of the least significant bit, 0 to 31.
    width : int
        Number of bits, 1 to 32; ``offset + width`` must not exceed 32.
    access : Access or str
        One of ``R``, ``RW``, ``W``, ``RW1C``, ``W1P``, ``RWS``.
    reset : int
        Value after reset; must be 0 for ``R``, ``W1P`` and ``RWS`` fields, which the bank does
        not store.
    doc : str
        One line for the register map.
    """

    name: str
    offset: int
    width: int
    access: Access
    reset: int = 0
    doc: str = ""

    def __post_init__(self):
        _check_name("field", self.name)
        if self.name in RESERVED_FIELD_NAMES:
            raise ValueError(f"field name {self.name!r} is reserved for the register's strobes")
        if isinstance(self.access, str):
            try:
                object.__setattr__(self, "access", Access(self.access))
            except ValueError:
                choices = ", ".join(a.value for a in Access)
                raise ValueError(f"field {self.name}: access must be one of {choices}, "
                                 f"not {self.access!r}") from None
        if not isinstance(self.access, Access):
            raise TypeError(f"field {self.name}: access must be an Access, not {self.access!r}")
        for attr in ("offset", "width", "reset"):
            if not isinstance(getattr(self, attr), int) or isinstance(getattr(self, attr), bool):
                raise TypeError(f"field {self.name}: {attr} must be an int, "
                                f"not {getattr(self, attr)!r}")
        if not 1 <= self.width <= REG_BITS:
            raise ValueError(f"field {self.name}: width must be 1 to {REG_BITS}, not {self.width}")
        if not 0 <= self.offset or self.offset + self.width > REG_BITS:
            raise ValueError(f"field {self.name}: bits {self.offset}+{self.width} do not fit "
                             f"in a {REG_BITS}-bit register")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"field {self.name}: reset 0x{self.reset:x} does not fit "
                             f"in {self.width} bits")
        if self.reset and self.access in (Access.R, Access.W1P, Access.RWS):
            raise ValueError(f"field {self.name}: reset must be 0 for {self.access.value} "
                             f"fields, which the bank does not hold")

    @property
    def mask(self) -> int:
        """Mask of the field's bits in the register word."""
        return ((1 << self.width) - 1) << self.offset

    @property
    def bits(self) -> str:
        """Bit range as the register map prints it, e.g. ``[7:4]`` or ``[0]``."""
        hi = self.offset + self.width - 1
        return f"[{hi}:{self.offset}]" if self.width > 1 else f"[{self.offset}]"


@dataclass(frozen=True)
class Register:
    """One 32-bit register: a name, a byte offset and its fields."""

    name: str
    offset: int
    fields: tuple[Field, ...]
    doc: str = ""

    def __post_init__(self):
        _check_name("register", self.name)
        object.__setattr__(self, "fields", tuple(self.fields))
        if not isinstance(self.offset, int) or self.offset < 0 or self.offset % REG_BYTES:
            raise ValueError(f"register {self.name}: offset must be a non-negative multiple of "
                             f"{REG_BYTES}, not {self.offset!r}")
        if not self.fields:
            raise ValueError(f"register {self.name}: has no fields")
        seen: dict[str, Field] = {}
        used = 0
        for f in self.fields:
            if not isinstance(f, Field):
                raise TypeError(f"register {self.name}: fields must be Field, not {f!r}")
            if f.name in seen:
                raise ValueError(f"register {self.name}: field {f.name!r} declared twice")
            if used & f.mask:
                other = next(o.name for o in self.fields if o.mask & f.mask and o is not f)
                raise ValueError(f"register {self.name}: field {f.name} {f.bits} overlaps "
                                 f"field {other}")
            seen[f.name] = f
            used |= f.mask

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        known = ", ".join(f.name for f in self.fields)
        raise KeyError(f"register {self.name} has no field {name!r} (fields: {known})")

    @property
    def reset(self) -> int:
        """The word a read returns right after reset, with all R/RWS inputs at 0."""
        return sum(f.reset << f.offset for f in self.fields if f.access.readable)

    @property
    def read_mask(self) -> int:
        return sum(f.mask for f in self.fields if f.access.readable)

    def encode(self, values: Mapping[str, int], *, base: int | None = None) -> int:
        """The word that writes ``values`` into their fields.

        Fields not named take their value from ``base`` when given; otherwise RW and W fields take
        their reset value and all other fields 0, so that RW1C bits are not cleared and W1P bits
        not pulsed by accident. Naming a read-only field or a value that does not fit raises
        ``ValueError``.
        """
        if base is None:
            base = sum(f.reset << f.offset for f in self.fields
                       if f.access in (Access.RW, Access.W))
        word = base
        for name, value in values.items():
            f = self.field(name)
            if not f.access.writable:
                raise ValueError(f"field {self.name}.{name} is read-only (R)")
            if isinstance(value, bool):
                value = int(value)
            if not isinstance(value, int) or not 0 <= value < (1 << f.width):
                raise ValueError(f"field {self.name}.{name}: value {value!r} does not fit "
                                 f"in {f.width} bits")
            word = (word & ~f.mask) | (value << f.offset)
        return word & 0xFFFF_FFFF

    def decode(self, word: int) -> dict[str, int]:
        """Readable fields of a word read from this register."""
        return {f.name: (word & f.mask) >> f.offset for f in self.fields if f.access.readable}

    @property
    def modify_keep_mask(self) -> int:
        """Bits a read-modify-write may write back unchanged: RW and W fields.

        RW1C and W1P bits must be written as 0 (writing back a 1 would clear a status or fire a
        pulse), and RWS writes have side effects.
        """
        return sum(f.mask for f in self.fields if f.access in (Access.RW, Access.W))


@dataclass(frozen=True)
class RegisterMap:
    """The registers of one block.

    Parameters
    ----------
    name : str
        Block name, used for the C prefix (``ATOMCUBE_<NAME>_``) and the document title.
    registers : iterable of Register
        Unique names and offsets.
    doc : str
        A paragraph for the top of the register map.
    """

    name: str
    registers: tuple[Register, ...]
    doc: str = ""
    _by_name: dict = field(init=False, repr=False, compare=False)
    _by_offset: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        _check_name("register map", self.name)
        regs = tuple(sorted(self.registers, key=lambda r: r.offset))
        object.__setattr__(self, "registers", regs)
        if not regs:
            raise ValueError(f"register map {self.name}: has no registers")
        by_name: dict[str, Register] = {}
        by_offset: dict[int, Register] = {}
        for r in regs:
            if r.name in by_name:
                raise ValueError(f"register map {self.name}: register {r.name!r} declared twice")
            if r.offset in by_offset:
                raise ValueError(f"register map {self.name}: registers {by_offset[r.offset].name} "
                                 f"and {r.name} share offset 0x{r.offset:03x}")
            by_name[r.name] = r
            by_offset[r.offset] = r
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_offset", by_offset)

    def __getitem__(self, name: str) -> Register:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"register map {self.name} has no register {name!r}") from None

    def __iter__(self):
        return iter(self.registers)

    def __len__(self):
        return len(self.registers)

    def at(self, address: int) -> Register | None:
        """The register a byte address falls in, or None where none is declared."""
        return self._by_offset.get(address - address % REG_BYTES)

    @property
    def size(self) -> int:
        """Bytes from offset 0 to the end of the last register."""
        return self.registers[-1].offset + REG_BYTES

    @property
    def addr_width(self) -> int:
        """Fewest address bits that reach every register (at least 2)."""
        return max(2, (self.size - 1).bit_length())

    # -- generated documents -------------------------------------------------------------------

    def c_header(self) -> str:
        """A C header with offsets, field shifts, masks and reset values."""
        p = f"ATOMCUBE_{self.name.upper()}"
        guard = f"{p}_REGS_H"
        lines = [
            f"/* {self.name}: register map. Generated by `atomcube regs`; do not edit. */",
            f"#ifndef {guard}", f"#define {guard}", "",
            f"#define {p}_REG_SIZE 0x{self.size:x}u", "",
        ]
        for r in self.registers:
            R = f"{p}_{r.name.upper()}"
            lines.append(f"/* {r.name}: {r.doc} */" if r.doc else f"/* {r.name} */")
            lines.append(f"#define {R}_OFFSET 0x{r.offset:03x}u")
            lines.append(f"#define {R}_RESET 0x{r.reset:08x}u")
            for f in r.fields:
                F = f"{R}_{f.name.upper()}"
                doc = f" {f.doc}" if f.doc else ""
                lines.append(f"#define {F}_SHIFT {f.offset}u /* {f.access.value} {f.bits}{doc} */")
                lines.append(f"#define {F}_MASK 0x{f.mask:08x}u")
            lines.append("")
        lines.append(f"#endif /* {guard} */")
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        """A Markdown register map: a summary table, then one field table per register."""
        out = [f"# {self.name} registers", "",
               "<!-- Generated from model/ by `atomcube regs`; do not edit. -->", ""]
        if self.doc:
            out += [self.doc, ""]
        out += ["Registers are 32 bits wide. Access types: R read-only, RW read/write, "
                "W write-only (reads 0), RW1C write 1 to clear, W1P write 1 to pulse (reads 0), "
                "RWS read/write with side effects. Unmapped addresses answer SLVERR; "
                "writes to read-only fields are ignored.", "",
                "| offset | register | reset | description |", "|---|---|---|---|"]
        for r in self.registers:
            out.append(f"| 0x{r.offset:03x} | [{r.name}](#{r.name}) | 0x{r.reset:08x} | {r.doc} |")
        for r in self.registers:
            out += ["", f"## {r.name}", "", f"Offset 0x{r.offset:03x}. {r.doc}".rstrip(), "",
                    "| bits | field | access | reset | description |", "|---|---|---|---|---|"]
            for f in sorted(r.fields, key=lambda f: -f.offset):
                out.append(f"| {f.bits} | {f.name} | {f.access.value} | 0x{f.reset:x} | {f.doc} |")
        return "\n".join(out) + "\n"

    def to_json(self) -> dict:
        """The map as plain data (for tools in other languages)."""
        return {"name": self.name, "doc": self.doc, "size": self.size, "registers": [
            {"name": r.name, "offset": r.offset, "doc": r.doc, "reset": r.reset, "fields": [
                {"name": f.name, "offset": f.offset, "width": f.width, "access": f.access.value,
                 "reset": f.reset, "doc": f.doc} for f in r.fields]} for r in self.registers]}


# -- driver ------------------------------------------------------------------------------------

class RegValue:
    """A register word as read, with its readable fields as attributes."""

    __slots__ = ("register", "raw", "fields")

    def __init__(self, register: Register, raw: int):
        self.register = register
        self.raw = raw
        self.fields = register.decode(raw)

    def __getattr__(self, name):
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"register {self.register.name} has no readable field "
                                 f"{name!r}") from None

    def __int__(self):
        return self.raw

    def __eq__(self, other):
        if isinstance(other, RegValue):
            return self.register == other.register and self.raw == other.raw
        if isinstance(other, int):
            return self.raw == other
        return NotImplemented

    def __repr__(self):
        inner = ", ".join(f"{k}={v:#x}" for k, v in self.fields.items())
        return f"<{self.register.name} 0x{self.raw:08x}: {inner}>"


# A bus operation is ("read", address) -> int, or ("write", address, value) -> None.
_Op = tuple
_Program = Generator[_Op, Any, Any]


class _DriverBase:
    """Register operations written once, as generators of bus operations.

    :class:`Driver` runs them against a blocking transport, :class:`AsyncDriver` against one whose
    methods are coroutines (cocotb). A transport has ``read(address) -> int`` and
    ``write(address, value)``; it raises :class:`BusError` on an error response.
    """

    def __init__(self, regmap: RegisterMap, transport, *, base: int = 0):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        self.regmap = regmap
        self.transport = transport
        self.base = base

    def _addr(self, reg: str) -> tuple[Register, int]:
        r = self.regmap[reg]
        return r, self.base + r.offset

    def _read(self, reg: str) -> _Program:
        r, addr = self._addr(reg)
        raw = yield ("read", addr)
        return RegValue(r, raw)

    def _write(self, reg: str, fields: Mapping[str, int]) -> _Program:
        r, addr = self._addr(reg)
        yield ("write", addr, r.encode(fields))

    def _write_raw(self, reg: str, value: int) -> _Program:
        r, addr = self._addr(reg)
        if not 0 <= value <= 0xFFFF_FFFF:
            raise ValueError(f"register {reg}: value 0x{value:x} does not fit in 32 bits")
        yield ("write", addr, value)

    def _modify(self, reg: str, fields: Mapping[str, int]) -> _Program:
        r, addr = self._addr(reg)
        word = yield ("read", addr)
        yield ("write", addr, r.encode(fields, base=word & r.modify_keep_mask))

    def __getattr__(self, name):
        if name.startswith("_") or "regmap" not in self.__dict__:
            raise AttributeError(name)
        try:
            self.regmap[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None
        return _RegisterHandle(self, name)

    def __dir__(self):
        return [*super().__dir__(), *(r.name for r in self.regmap)]


class _RegisterHandle:
    """``driver.<register>``: the operations on one register by name."""

    def __init__(self, driver, name):
        self._d, self._name = driver, name

    def read(self):
        return self._d.read(self._name)

    def write(self, **fields):
        return self._d.write(self._name, **fields)

    def write_raw(self, value):
        return self._d.write_raw(self._name, value)

    def modify(self, **fields):
        return self._d.modify(self._name, **fields)


class Driver(_DriverBase):
    """Named register access over a blocking transport.

    Examples
    --------
    >>> drv = Driver(regmap, transport)
    >>> drv.ctrl.write(enable=1)          # other fields take their reset values
    >>> drv.ctrl.modify(mode=2)           # read-modify-write; RW1C/W1P bits written as 0
    >>> drv.status.read().done
    """

    def _run(self, program: _Program):
        result = None
        try:
            while True:
                op = program.send(result)
                result = (self.transport.read(op[1]) if op[0] == "read"
                          else self.transport.write(op[1], op[2]))
        except StopIteration as stop:
            return stop.value

    def read(self, reg: str) -> RegValue:
        return self._run(self._read(reg))

    def write(self, reg: str, **fields) -> None:
        return self._run(self._write(reg, fields))

    def write_raw(self, reg: str, value: int) -> None:
        return self._run(self._write_raw(reg, value))

    def modify(self, reg: str, **fields) -> None:
        return self._run(self._modify(reg, fields))


class AsyncDriver(_DriverBase):
    """Named register access over a transport whose ``read`` and ``write`` are coroutines."""

    async def _run(self, program: _Program):
        result = None
        try:
            while True:
                op = program.send(result)
                result = await (self.transport.read(op[1]) if op[0] == "read"
                                else self.transport.write(op[1], op[2]))
        except StopIteration as stop:
            return stop.value

    async def read(self, reg: str) -> RegValue:
        return await self._run(self._read(reg))

    async def write(self, reg: str, **fields) -> None:
        return await self._run(self._write(reg, fields))

    async def write_raw(self, reg: str, value: int) -> None:
        return await self._run(self._write_raw(reg, value))

    async def modify(self, reg: str, **fields) -> None:
        return await self._run(self._modify(reg, fields))


# -- behavioural model of the bank -------------------------------------------------------------

def strobe_mask(strb: int) -> int:
    """Bit mask of the bytes enabled by a 4-bit write strobe."""
    return sum(0xFF << (8 * i) for i in range(REG_BYTES) if strb >> i & 1)


class RegisterBankModel:
    """What the register bank does, access by access.

    The logic side is represented by :attr:`inputs` (values of R and RWS fields, keyed
    ``(register, field)``) and :meth:`set_bits` (RW1C set inputs). Outputs are :meth:`value` (RW,
    W and RW1C storage) and the lists :attr:`pulses` and :attr:`writes`, which record every W1P
    pulse and every register write strobe, in order. It can also serve as a transport for
    :class:`Driver`.
    """

    def __init__(self, regmap: RegisterMap):
        self.regmap = regmap
        self.store = {(r.name, f.name): f.reset for r in regmap for f in r.fields
                      if f.access.stored}
        self.inputs = {(r.name, f.name): 0 for r in regmap for f in r.fields
                       if f.access in (Access.R, Access.RWS)}
        self.pulses: list[tuple[str, str, int]] = []
        self.writes: list[tuple[str, int, int]] = []
        self.reads: list[str] = []

    def value(self, reg: str, fld: str) -> int:
        """The value the bank presents to the logic for a stored field."""
        return self.store[(reg, fld)]

    def set_bits(self, reg: str, fld: str, bits: int) -> None:
        """The logic raises RW1C bits."""
        f = self.regmap[reg].field(fld)
        if f.access is not Access.RW1C:
            raise ValueError(f"{reg}.{fld} is {f.access.value}, not RW1C")
        self.store[(reg, fld)] |= bits & ((1 << f.width) - 1)

    def bus_write(self, address: int, data: int, strb: int = 0xF) -> Resp:
        r = self.regmap.at(address)
        if r is None:
            return Resp.SLVERR
        bm = strobe_mask(strb)
        self.writes.append((r.name, data, strb))
        for f in r.fields:
            fm = (bm & f.mask) >> f.offset
            fv = (data & f.mask) >> f.offset
            key = (r.name, f.name)
            if f.access in (Access.RW, Access.W, Access.RWS):
                self.store[key] = (self.store[key] & ~fm) | (fv & fm)
            elif f.access is Access.RW1C:
                self.store[key] &= ~(fv & fm)
            elif f.access is Access.W1P and fv & fm:
                self.pulses.append((r.name, f.name, fv & fm))
        return Resp.OKAY

    def bus_read(self, address: int) -> tuple[int, Resp]:
        """A read over the bus: the word and response, recorded in :attr:`reads`."""
        word, resp = self.peek(address)
        if resp == Resp.OKAY:
            self.reads.append(self.regmap.at(address).name)
        return word, resp

    def peek(self, address: int) -> tuple[int, Resp]:
        """What a read would return, without recording it (no read strobe)."""
        r = self.regmap.at(address)
        if r is None:
            return 0, Resp.SLVERR
        word = 0
        for f in r.fields:
            key = (r.name, f.name)
            if f.access in (Access.R, Access.RWS):
                word |= (self.inputs[key] & ((1 << f.width) - 1)) << f.offset
            elif f.access in (Access.RW, Access.RW1C):
                word |= self.store[key] << f.offset
        return word, Resp.OKAY

    # transport interface, so that Driver(regmap, RegisterBankModel(regmap)) works
    def read(self, address: int) -> int:
        word, resp = self.bus_read(address)
        if resp != Resp.OKAY:
            raise BusError("read", address, resp)
        return word

    def write(self, address: int, value: int) -> None:
        resp = self.bus_write(address, value)
        if resp != Resp.OKAY:
            raise BusError("write", address, resp)


def regmap(name: str, registers: Iterable[Register], doc: str = "") -> RegisterMap:
    """Shorthand for :class:`RegisterMap`."""
    return RegisterMap(name, tuple(registers), doc)


def reg(name: str, offset: int, doc: str, *fields: Field) -> Register:
    """Shorthand: ``reg("ctrl", 0x00, "Control.", Field(...), ...)``."""
    return Register(name, offset, fields, doc)


def job_registers() -> list:
    """``status`` (0x004: busy, done, error) and ``irq_enable`` (0x008: done, error), as every
    block that runs jobs has them."""
    return [
        reg("status", 0x004, "Job status.",
            Field("busy", 0, 1, "R", doc="A job is running (starts are ignored meanwhile)."),
            Field("done", 1, 1, "RW1C", doc="A job has ended, with or without an error."),
            Field("error", 2, 1, "RW1C", doc="A job has ended with an error (see error).")),
        reg("irq_enable", 0x008, "Interrupt enables (irq = status & enables).",
            Field("done", 1, 1, "RW", doc="Interrupt when a job ends."),
            Field("error", 2, 1, "RW", doc="Interrupt when a job ends with an error.")),
    ]
