"""AXI4 and AXI4-Lite interfaces as ``wiring.Signature``s.

Direction convention: every signature here is written from the **manager's** side. A component
that issues transactions has ``m_axi: Out(AXI4Signature(...))``; a component that answers them has
``s_axil: In(AXI4LiteSignature(...))``. ``In`` flips every member, so ``awvalid`` becomes an input
of the subordinate and ``awready`` an output, as the AXI specification has it.

Port names: Amaranth joins a member path with ``__``, so ``s_axil.awaddr`` reaches Verilog as
``s_axil__awaddr``. cocotbext-axi finds them with ``bus_separator="__"``::

    AxiLiteBus.from_prefix(dut, "s_axil", bus_separator="__")

The AXI4 signature carries the full signal set, IDs included (cocotbext-axi requires ``*id``).
User signals are left out; ``awregion``/``arregion`` are included and may be tied to 0.

Every member is a plain unsigned value, ``awburst``/``arburst`` and ``bresp``/``rresp``
included: a design's own bus of plain signals connects member by member in either direction
(:func:`connect_members`), and :class:`Burst` and :class:`Resp` name the values
(``m_axi.awburst.eq(Burst.INCR)``, ``m_axi.rresp == Resp.OKAY``).
"""

from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Resp", "Burst", "AXI4LiteSignature", "AXI4Signature", "connect_members"]


class Resp(enum.Enum, shape=2):
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class Burst(enum.Enum, shape=2):
    FIXED = 0
    INCR = 1
    WRAP = 2


def connect_members(m, manager, subordinate, names=None):
    """Wire the ``names`` members (default: all) of a manager-side interface to a subordinate
    one, member by member, each in its direction. Unlike ``wiring.connect`` it takes part of a
    bus, or two buses of different address widths (the address is cut or zero-extended)."""
    members = manager.signature.members
    for n in names if names is not None else members.keys():
        a, b = getattr(manager, n), getattr(subordinate, n)
        if members[n].flow == wiring.Out:
            m.d.comb += b.eq(a)
        else:
            m.d.comb += a.eq(b)


def _check_widths(addr_width, data_width, data_widths, addr_widths=None):
    if not isinstance(data_width, int) or data_width not in data_widths:
        raise ValueError(f"data_width must be one of {', '.join(map(str, data_widths))}, "
                         f"not {data_width!r}")
    if addr_widths is None:
        if not isinstance(addr_width, int) or not 2 <= addr_width <= 64:
            raise ValueError(f"addr_width must be an integer from 2 to 64, not {addr_width!r}")
    elif addr_width not in addr_widths:
        raise ValueError(f"addr_width must be one of {', '.join(map(str, addr_widths))}, "
                         f"not {addr_width!r}")


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite, manager side.

    Parameters
    ----------
    addr_width : int
        2 to 64. Register banks take only the bits they decode; an interconnect strips the rest.
    data_width : int
        32 or 64.
    """

    def __init__(self, *, addr_width=32, data_width=32):
        _check_widths(addr_width, data_width, (32, 64))
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8),
            "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return (isinstance(other, AXI4LiteSignature) and self.addr_width == other.addr_width
                and self.data_width == other.data_width)

    def __repr__(self):
        return f"AXI4LiteSignature(addr_width={self.addr_width}, data_width={self.data_width})"


class AXI4Signature(wiring.Signature):
    """AXI4 (full signal set, with IDs), manager side.

    Parameters
    ----------
    addr_width : int
        32 or 64.
    data_width : int
        32, 64, 128, 256 or 512.
    id_width : int
        1 to 16.
    """

    def __init__(self, *, addr_width=32, data_width=64, id_width=4):
        _check_widths(addr_width, data_width, (32, 64, 128, 256, 512), (32, 64))
        if not isinstance(id_width, int) or not 1 <= id_width <= 16:
            raise ValueError(f"id_width must be an integer from 1 to 16, not {id_width!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.id_width = id_width
        members = {}
        for ch in ("aw", "ar"):
            members.update({
                f"{ch}id": Out(id_width), f"{ch}addr": Out(addr_width), f"{ch}len": Out(8),
                f"{ch}size": Out(3), f"{ch}burst": Out(2), f"{ch}lock": Out(1),
                f"{ch}cache": Out(4), f"{ch}prot": Out(3), f"{ch}qos": Out(4),
                f"{ch}region": Out(4), f"{ch}valid": Out(1), f"{ch}ready": In(1),
            })
        members.update({
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })
        super().__init__(members)

    @property
    def bytes_per_beat(self):
        return self.data_width // 8

    @property
    def size_code(self):
        """``AxSIZE`` for full-width beats."""
        return (self.bytes_per_beat - 1).bit_length()

    def __eq__(self, other):
        return (isinstance(other, AXI4Signature) and self.addr_width == other.addr_width
                and self.data_width == other.data_width and self.id_width == other.id_width)

    def __repr__(self):
        return (f"AXI4Signature(addr_width={self.addr_width}, data_width={self.data_width}, "
                f"id_width={self.id_width})")
