"""AXI4-Lite register bank generated from a :class:`model.regmap.RegisterMap`.

Ports
-----
``s_axil``: ``In(AXI4LiteSignature(addr_width=..., data_width=32))``.

``regs``: one member per register, one sub-member per field, named after the declaration, so the
block's logic writes ``bank.regs.ctrl.enable.data``. What each field offers the logic:

========  =============================================================================
``R``     ``r_data`` (in): the value reads return.
``RW``    ``data`` (out): the stored value.
``W``     ``data`` (out): the stored value (reads return 0).
``RW1C``  ``data`` (out): the stored bits; ``set`` (in): bits to raise this cycle.
``W1P``   ``pulse`` (out): high for one cycle for each bit written as 1.
``RWS``   ``r_data`` (in): the value reads return; ``w_data`` (out): the last value written.
========  =============================================================================

and each register has ``wr_stb`` (out) and ``rd_stb`` (out).

Timing
------
- A write is committed at the clock edge after the bank has both the address and the data (they
  may arrive in either order or together), and takes effect at the next edge (with
  ``capture=False``, at the commit's own edge): in the cycle after that, ``data``/``w_data`` show
  the new value, ``pulse`` and ``wr_stb`` are high, and ``bvalid`` rises. With ``bready`` held
  high the bank takes one write per cycle.
- A read samples ``r_data`` and the stored values in the cycle of the AR handshake. ``rd_stb``
  is high in the next cycle (a register: no logic behind it sees the bus's address decode), so
  logic behind an ``RWS`` field (a memory window with auto-increment) can advance on it;
  ``rvalid`` rises in that cycle too. ``arready`` is low while ``rvalid`` is high and for the
  cycle after, so consecutive reads are at least three cycles apart, which gives a synchronous
  memory read port, addressed from ``rd_stb``, two cycles to present the next word.
- With ``mirror``, a read of a register whose fields are all ``RW`` comes from a memory copy
  and takes a cycle longer: ``rvalid`` rises two cycles after the AR handshake (``rd_stb`` is
  still high in the cycle after it). What it returns is the same.
- Reads and writes proceed independently. A read in the same cycle as a write to the same register
  (or, with ``capture``, the cycle after its commit) returns the value from before the write.
- Byte strobes apply bit for bit: RW/W/RWS bits take the new value only in strobed bytes, RW1C bits
  are cleared and W1P bits pulsed only in strobed bytes.
- Errors: an access to an address with no register answers SLVERR (reads return 0) and changes
  nothing. Writes to ``R`` fields, and writes of 0 to ``RW1C``/``W1P`` bits, are ignored.
- A ``set`` and a software clear of the same RW1C bit in one cycle leave the bit set, so no event
  is lost.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomcube.model.regmap import Access, RegisterMap

from .axi import AXI4LiteSignature, Resp

__all__ = ["RegisterBank", "field_signature", "regs_signature"]


def field_signature(f):
    """The logic-side members of one field (bank's view)."""
    w = f.width
    members = {
        Access.R: {"r_data": In(w)},
        Access.RW: {"data": Out(w, init=f.reset)},
        Access.W: {"data": Out(w, init=f.reset)},
        Access.RW1C: {"data": Out(w, init=f.reset), "set": In(w)},
        Access.W1P: {"pulse": Out(w)},
        Access.RWS: {"r_data": In(w), "w_data": Out(w)},
    }[f.access]
    return wiring.Signature(members)


def regs_signature(regmap):
    """The logic-side members of a whole map (bank's view)."""
    return wiring.Signature({
        r.name: Out(wiring.Signature({
            **{f.name: Out(field_signature(f)) for f in r.fields},
            "wr_stb": Out(1), "rd_stb": Out(1),
        })) for r in regmap
    })


class RegisterBank(wiring.Component):
    """An AXI4-Lite subordinate holding the registers of ``regmap``.

    Parameters
    ----------
    regmap : RegisterMap
        The declaration.
    addr_width : int, optional
        Width of ``s_axil.awaddr``/``araddr``. Every bit is decoded, so addresses above the map
        answer SLVERR rather than aliasing. Defaults to the fewest bits that reach every register.
    capture : bool, optional
        True (default): a write's address and data are taken as they come, each into a
        register, and committed together; the commit's decode is registered and the store
        lands a cycle later, from registers, so no register's enable waits on the bus
        handshake or the address decode. False: the bank waits until both are valid and
        commits them straight from the bus (AXI4-Lite lets a subordinate wait for both), which
        saves those flip-flops (48 for the capture; 36, and one to five a register, for the
        write stage) but puts the bus's address decode in front of every register's
        enable; for small, slow builds behind a manager that holds both (the SoC's decoder).
    mirror : bool, optional
        False (default): every read is a multiplexer over the registers. True: writes to the
        registers whose fields are all ``RW`` (a block's configuration: most of a map's bits)
        are also stored in a memory, and reads of those registers come from it, a cycle
        later; the multiplexer keeps only the others (status, counters). Its inputs are the
        configuration registers, which sit by the logic that reads them, all over the block:
        in the full SoC on the ECP5 the DMA bank's read multiplexer held the most overused
        routing of any one signal (docs/board.md). The copy knows which registers were
        written since reset and returns the reset value for the others, so it needs no
        clearing. Costs the memory (Yosys puts the blocks' maps in distributed RAM on the
        ECP5, in block RAM on the iCE40), a flip-flop a mirrored register and a few for the
        read; it saves LUTs only where many registers are mirrored (docs/board.md).
    """

    def __init__(self, regmap, *, addr_width=None, capture=True, mirror=False):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        if addr_width is None:
            addr_width = max(3, regmap.addr_width)
        if not isinstance(addr_width, int) or not regmap.addr_width <= addr_width <= 64:
            raise ValueError(f"addr_width must be an integer from {regmap.addr_width} (to reach "
                             f"offset 0x{regmap.registers[-1].offset:x}) to 64, not {addr_width!r}")
        self.regmap = regmap
        self.addr_width = addr_width
        self.capture = capture
        self.mirror = mirror
        # the registers a mirror holds: every field RW (nothing the logic drives)
        self._mirrored = [r for r in regmap if mirror and r.fields and
                          all(f.access is Access.RW for f in r.fields)]
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=addr_width, data_width=32)),
            "regs": Out(regs_signature(regmap)),
        })

    def _lane_enables(self, m, hits, strb):
        """The enable of each register's byte lanes that hold stored bits, by (register name,
        lane): its hit and the lane's strobe, a register of its own with the write stage."""
        lanes = {}
        for r, hit in zip(self.regmap, hits, strict=True):
            for lane in sorted({ln for f in r.fields if f.access in _STORED for ln in _lanes(f)}):
                if self.capture:
                    en = Signal(name=f"w_lane_{r.name}_{lane}")
                    m.d.sync += en.eq(hit & strb[lane])
                else:
                    en = hit & strb[lane]
                lanes[r.name, lane] = en
        return lanes

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil

        # -- write: address and data are captured independently, then committed together --------
        commit = Signal()
        commit_room = Signal()               # the write's response will have somewhere to go
        if self.capture:
            aw_full = Signal()
            aw_addr = Signal(self.addr_width)
            w_full = Signal()
            w_data = Signal(32)
            w_strb = Signal(4)
            m.d.comb += [
                commit.eq(aw_full & w_full & commit_room),
                bus.awready.eq(~aw_full | commit),
                bus.wready.eq(~w_full | commit),
            ]
            with m.If(commit):
                m.d.sync += [aw_full.eq(0), w_full.eq(0)]
            with m.If(bus.awvalid & bus.awready):
                m.d.sync += [aw_full.eq(1), aw_addr.eq(bus.awaddr)]
            with m.If(bus.wvalid & bus.wready):
                m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        else:
            # both channels taken in the cycle they are committed, from the bus as it stands
            aw_addr, w_data, w_strb = bus.awaddr, bus.wdata, bus.wstrb
            m.d.comb += [commit.eq(bus.awvalid & bus.wvalid & commit_room),
                         bus.awready.eq(commit), bus.wready.eq(commit)]

        w_word = aw_addr[2:]
        w_any = Signal()
        hits = [Signal(name=f"w_hit_{r.name}") for r in self.regmap]
        for r, hit in zip(self.regmap, hits, strict=True):
            m.d.comb += hit.eq(commit & (w_word == r.offset >> 2))
        m.d.comb += w_any.eq(Cat(*hits).any())
        if self.capture:
            # the write stage: the commit's decode is registered, and the store follows a cycle
            # later from registers (each register's hit, each of its byte lanes' enable, the data
            # and strobes), with the response. A block's configuration registers sit by the logic
            # that reads them, which may be across the die from the bank: their enables now come
            # from a flip-flop and not from the bus handshake through the decode
            apply = [Signal(name=f"w_apply_{r.name}") for r in self.regmap]
            m.d.sync += [a.eq(h) for a, h in zip(apply, hits, strict=True)]
            s_data = Signal(32, name="w_data_q", reset_less=True)
            s_strb = Signal(4, name="w_strb_q", reset_less=True)
            m.d.sync += [s_data.eq(w_data), s_strb.eq(w_strb)]
            lanes = self._lane_enables(m, hits, w_strb)
            hits, w_data, w_strb = apply, s_data, s_strb
        else:
            lanes = self._lane_enables(m, hits, w_strb)

        bit_en = Cat(*(w_strb[i].replicate(8) for i in range(4)))
        for r, hit in zip(self.regmap, hits, strict=True):
            port = getattr(self.regs, r.name)
            m.d.sync += port.wr_stb.eq(hit)
            for f in r.fields:
                fp = getattr(port, f.name)
                sl = slice(f.offset, f.offset + f.width)
                en, val = bit_en[sl], w_data[sl]
                if f.access in _STORED:
                    # a byte lane at a time: its strobe is the flip-flops' enable, so a bit
                    # costs no logic of its own
                    store = fp.w_data if f.access is Access.RWS else fp.data
                    for lane in _lanes(f):
                        lo = max(f.offset, 8 * lane)
                        hi = min(f.offset + f.width, 8 * lane + 8)
                        with m.If(lanes[r.name, lane]):
                            m.d.sync += store[lo - f.offset:hi - f.offset].eq(w_data[lo:hi])
                elif f.access is Access.RW1C:
                    m.d.sync += fp.data.eq((fp.data & ~Mux(hit, val & en, 0)) | fp.set)
                elif f.access is Access.W1P:
                    m.d.sync += fp.pulse.eq(Mux(hit, val & en, 0))

        mirrored = self._mirrored
        if mirrored:
            mirror, written = self._mirror_writes(m, hits, w_data, w_strb)

        # the response: with the write stage it waits a cycle in `held` (the write has then
        # landed when the manager sees it); the commit waits while a held response cannot
        # move on into bvalid
        resp_free = ~bus.bvalid | bus.bready
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        if self.capture:
            held, held_ok = Signal(), Signal()
            m.d.comb += commit_room.eq(~held | resp_free)
            with m.If(held & resp_free):
                m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Mux(held_ok, Resp.OKAY, Resp.SLVERR)),
                             held.eq(0)]
            with m.If(commit):
                m.d.sync += [held.eq(1), held_ok.eq(w_any)]
        else:
            m.d.comb += commit_room.eq(resp_free)
            with m.If(commit):
                m.d.sync += [bus.bvalid.eq(1),
                             bus.bresp.eq(Mux(w_any, Resp.OKAY, Resp.SLVERR))]

        # -- read ------------------------------------------------------------------------------
        ar_hs = Signal()
        gap = Signal()                        # the cycle after a read's R handshake
        m.d.sync += gap.eq(bus.rvalid & bus.rready)
        take = ~bus.rvalid & ~gap
        if mirrored:
            pend = Signal()                   # a mirrored read: its data comes next cycle
            r_mirror = Signal()               # the word read is in the mirror, at `r_slot`
            r_slot = Signal(range(max(2, len(mirrored))))
            take = take & ~pend
        m.d.comb += [bus.arready.eq(take), ar_hs.eq(bus.arvalid & bus.arready)]
        r_word = bus.araddr[2:]
        rd_word = Signal(32)
        rd_hit = Signal()
        for r in self.regmap:                 # strobes fall unless a read hits them below
            m.d.sync += getattr(self.regs, r.name).rd_stb.eq(0)
        with m.Switch(r_word):
            for r in self.regmap:
                port = getattr(self.regs, r.name)
                with m.Case(r.offset >> 2):
                    if r in mirrored:
                        m.d.comb += [r_mirror.eq(1), r_slot.eq(mirrored.index(r)),
                                     rd_hit.eq(1)]
                        m.d.sync += port.rd_stb.eq(ar_hs)
                        continue
                    parts = Const(0, 32)
                    for f in r.fields:
                        fp = getattr(port, f.name)
                        src = {Access.R: "r_data", Access.RWS: "r_data",
                               Access.RW: "data", Access.RW1C: "data"}.get(f.access)
                        if src is not None:
                            parts = parts | (getattr(fp, src).as_unsigned() << f.offset)
                    m.d.comb += [rd_word.eq(parts), rd_hit.eq(1)]
                    m.d.sync += port.rd_stb.eq(ar_hs)

        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(ar_hs & ~r_mirror if mirrored else ar_hs):
            m.d.sync += [bus.rvalid.eq(1), bus.rdata.eq(rd_word),
                         bus.rresp.eq(Mux(rd_hit, Resp.OKAY, Resp.SLVERR))]
        if mirrored:
            self._mirror_reads(m, mirror, written, ar_hs & r_mirror, r_slot, pend)
        return m

    def _mirror_writes(self, m, hits, w_data, w_strb):
        """The memory copy of the all-``RW`` registers, written as they are stored (the same
        hits, data and strobes); returns the memory and the flags of the registers written since
        reset."""
        mirrored = self._mirrored
        width = -(-max(f.offset + f.width for r in mirrored for f in r.fields) // 8) * 8
        mirror = m.submodules.mirror = Memory(shape=width, depth=max(2, len(mirrored)), init=[])
        wp = mirror.write_port(granularity=8)
        hit_of = {r.name: h for r, h in zip(self.regmap, hits, strict=True)}
        m_hits = Cat(*(hit_of[r.name] for r in mirrored))
        written = Signal(len(mirrored))
        # a register's first write since reset stores all its bytes: the unstrobed ones with
        # their reset value (what the register itself keeps)
        first = (m_hits & ~written).any()
        init = Signal(width)
        slot = Signal.like(wp.addr)
        for i, r in enumerate(mirrored):
            with m.If(m_hits[i]):
                m.d.comb += [slot.eq(i), init.eq(r.reset)]
        m.d.comb += [wp.addr.eq(slot),
                     wp.data.eq(Cat(*(Mux(w_strb[j], w_data[8 * j:8 * j + 8],
                                          init[8 * j:8 * j + 8]) for j in range(width // 8)))),
                     wp.en.eq(Cat(*((w_strb[j] | first) & m_hits.any()
                                    for j in range(width // 8))))]
        m.d.sync += written.eq(written | m_hits)
        return mirror, written

    def _mirror_reads(self, m, mirror, written, take, slot, pend):
        """A read of a mirrored register: the memory is read in the AR handshake's cycle
        (``take``), and ``rdata`` is loaded a cycle later from its output, the bits outside the
        register's fields cleared, or from the reset value if it was never written."""
        bus = self.s_axil
        mirrored = self._mirrored
        rp = mirror.read_port(transparent_for=())      # a write in the same cycle: old value
        p_slot = Signal.like(slot)
        p_written = Signal()
        m.d.comb += [rp.addr.eq(slot), rp.en.eq(take)]
        m.d.sync += pend.eq(take)
        with m.If(take):
            m.d.sync += [p_slot.eq(slot), p_written.eq(written.bit_select(slot, 1))]
        mask = Signal(rp.data.shape())
        init = Signal(rp.data.shape())
        with m.Switch(p_slot):
            for i, r in enumerate(mirrored):
                with m.Case(i):
                    m.d.comb += [mask.eq(r.read_mask), init.eq(r.reset)]
        with m.If(pend):
            m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(Resp.OKAY),
                         bus.rdata.eq(Mux(p_written, rp.data & mask, init))]


#: the access types whose bits the bank stores from a write, a byte lane at a time
_STORED = (Access.RW, Access.W, Access.RWS)


def _lanes(f):
    """The byte lanes field ``f`` has bits in."""
    return range(f.offset // 8, (f.offset + f.width - 1) // 8 + 1)
