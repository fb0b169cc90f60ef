"""The SoC's buses: an AXI4-Lite decoder from one manager to several register banks, an adapter
from AXI4-Lite to single-beat AXI4, and an AXI4 arbiter from several managers onto one memory
port."""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4LiteSignature, AXI4Signature, Burst, Resp
from ..bus.fifo import BufferedFIFO, register_slice

__all__ = ["LiteDecoder", "LiteToAxi", "AxiArbiter"]


class LiteDecoder(wiring.Component):
    """One AXI4-Lite manager to the subordinates of ``windows``, a list of ``(name, base,
    size)`` with ``size`` a power of two and ``base`` a multiple of it. Each subordinate port
    ``<name>`` sees the address less ``base``, ``addr_width`` bits (log2 of its size).

    One write and one read are in flight at a time (enough for the UART bridge): the decoder takes
    a write's address and data together, passes them on, and waits for the response. An address
    outside every window is answered DECERR (reads return 0) and goes nowhere.

    ``local_copies`` (default True): each subordinate gets its own registers for the address,
    write data and strobes, loaded only when it is addressed, so each bank's decode starts at a
    register that can sit beside it. The windows' hits of a request's address are then a
    register too, and a request is taken once it has been up for a cycle (AXI holds it steady
    until taken), one cycle later than without: each subordinate's copies load while the
    decoder is idle and that register names them, an enable of two registers, not the
    address's decode behind the handshakes. False: one set of registers for all, some 40
    flip-flops per subordinate fewer (the small iCE40 build)."""

    def __init__(self, windows, *, addr_width=32, local_copies=True):
        self.local_copies = local_copies
        self.windows = []
        for name, base, size in windows:
            if size & (size - 1) or size < 4 or base % size:
                raise ValueError(f"window {name}: size 0x{size:x} must be a power of two and "
                                 f"base 0x{base:x} a multiple of it")
            self.windows.append((name, base, size))
        spans = sorted((b, b + s, n) for n, b, s in self.windows)
        for (_, end, a), (start, _, b) in zip(spans, spans[1:], strict=False):
            if start < end:
                raise ValueError(f"windows {a} and {b} overlap")
        members = {"s_axil": In(AXI4LiteSignature(addr_width=addr_width, data_width=32))}
        for name, _, size in self.windows:
            members[name] = Out(AXI4LiteSignature(addr_width=max(2, (size - 1).bit_length()),
                                                  data_width=32))
        super().__init__(members)

    def _select(self, m, addr):
        hits = Signal(len(self.windows))
        for i, (_, base, size) in enumerate(self.windows):
            m.d.comb += hits[i].eq((addr & ~(size - 1)) == base)
        return hits

    def _take(self, m, name, idle, valid, addr):
        """The hits of a request's address (``addr``) and whether it is taken in this cycle
        (``idle`` and ``valid``); with local copies the hits are a register and a request must
        have been up for a cycle (its flag ``<name>_up``) before it is taken."""
        if not self.local_copies:
            return self._select(m, addr), idle & valid
        hits = Signal(len(self.windows), name=f"{name}_hits")
        m.d.sync += hits.eq(self._select(m, addr))
        up = Signal(name=f"{name}_up")         # up in the cycle before, and not taken then
        take = idle & valid & up
        m.d.sync += up.eq(valid & ~take)
        return hits, take

    def _held(self, m, load, fields, port=None):
        """Registers without reset that take the manager's request fields when ``load``.
        ``fields`` pairs an AXI4-Lite member (``"awaddr"``) with the name of its shared
        register (``"w_addr"``): with ``port`` (an index) the registers are that port's copies,
        ``<port>_<member>`` at its widths; without, the one set all ports share."""
        s = self.s_axil
        if port is None:
            regs = [Signal(len(getattr(s, f)), name=n, reset_less=True) for f, n in fields]
        else:
            name = self.windows[port][0]
            regs = [Signal(len(getattr(getattr(self, name), f)), name=f"{name}_{f}",
                           reset_less=True) for f, _ in fields]
        with m.If(load):
            m.d.sync += [r.eq(getattr(s, f)) for r, (f, _) in zip(regs, fields, strict=True)]
        return regs

    def elaborate(self, platform):
        m = Module()
        s = self.s_axil
        ports = [getattr(self, n) for n, _, _ in self.windows]

        # writes: address and data taken together, then passed on, then the response back
        w_sel = Signal(len(ports))
        w_state = Signal(2)                  # 0 idle, 1 forwarding, 2 response
        awv, wv = Signal(), Signal()
        hits, take_w = self._take(m, "w", w_state == 0, s.awvalid & s.wvalid, s.awaddr)
        m.d.comb += [s.awready.eq(take_w), s.wready.eq(take_w)]
        with m.If(take_w):
            m.d.sync += [w_sel.eq(hits), awv.eq(hits.any()), wv.eq(hits.any()),
                         w_state.eq(Mux(hits.any(), 1, 2))]
        b_valid, b_resp = Signal(), Signal(2)
        # each subordinate has its own copy of the address, data and strobes, loaded only when it is
        # addressed (so Yosys cannot merge the copies): its decode starts from a register the placer
        # can put beside it, not from one shared across the die. They follow the request while the
        # decoder is idle and their hit is set, so they hold the request taken (the hits are
        # registers, steady a cycle before the take), and the hits' decode and the handshakes stay
        # out of their enables.
        w_fields = [("awaddr", "w_addr"), ("wdata", "w_data"), ("wstrb", "w_strb")]
        w_shared = None if self.local_copies else self._held(m, take_w, w_fields)
        for i, p in enumerate(ports):
            on = w_sel[i]
            p_addr, p_data, p_strb = w_shared or self._held(m, (w_state == 0) & hits[i],
                                                            w_fields, i)
            m.d.comb += [p.awaddr.eq(p_addr), p.wdata.eq(p_data), p.wstrb.eq(p_strb),
                         p.awvalid.eq(on & awv), p.wvalid.eq(on & wv),
                         p.bready.eq(on & (w_state == 1) & ~awv & ~wv & s.bready)]
            with m.If(on & (w_state == 1)):
                with m.If(p.awready):
                    m.d.sync += awv.eq(0)
                with m.If(p.wready):
                    m.d.sync += wv.eq(0)
                m.d.comb += [b_valid.eq(p.bvalid & ~awv & ~wv), b_resp.eq(p.bresp)]
        with m.If(w_state == 2):
            m.d.comb += [b_valid.eq(1), b_resp.eq(Resp.DECERR)]
        m.d.comb += [s.bvalid.eq(b_valid & (w_state != 0)), s.bresp.eq(b_resp)]
        with m.If(s.bvalid & s.bready):
            m.d.sync += w_state.eq(0)

        # reads
        r_sel = Signal(len(ports))
        r_state = Signal(2)
        arv = Signal()
        rhits, take_r = self._take(m, "r", r_state == 0, s.arvalid, s.araddr)
        m.d.comb += s.arready.eq(take_r)
        with m.If(take_r):
            m.d.sync += [r_sel.eq(rhits), arv.eq(rhits.any()),
                         r_state.eq(Mux(rhits.any(), 1, 2))]
        r_valid, r_resp, r_data = Signal(), Signal(2), Signal(32)
        r_fields = [("araddr", "r_addr")]
        r_shared = None if self.local_copies else self._held(m, take_r, r_fields)
        for i, p in enumerate(ports):
            on = r_sel[i]
            (p_addr,) = r_shared or self._held(m, (r_state == 0) & rhits[i], r_fields, i)
            m.d.comb += [p.araddr.eq(p_addr), p.arvalid.eq(on & arv),
                         p.rready.eq(on & (r_state == 1) & ~arv & s.rready)]
            with m.If(on & (r_state == 1)):
                with m.If(p.arready):
                    m.d.sync += arv.eq(0)
                m.d.comb += [r_valid.eq(p.rvalid & ~arv), r_resp.eq(p.rresp),
                             r_data.eq(p.rdata)]
        with m.If(r_state == 2):
            m.d.comb += [r_valid.eq(1), r_resp.eq(Resp.DECERR), r_data.eq(0)]
        m.d.comb += [s.rvalid.eq(r_valid & (r_state != 0)), s.rresp.eq(r_resp),
                     s.rdata.eq(r_data)]
        with m.If(s.rvalid & s.rready):
            m.d.sync += r_state.eq(0)
        return m


class LiteToAxi(wiring.Component):
    """AXI4-Lite (32-bit data) to AXI4 single-beat accesses of 4 bytes on a wider bus: the word
    goes out on its lane of ``wdata`` with the matching strobes, and comes back from its lane of
    ``rdata``. One write and one read in flight at a time."""

    def __init__(self, *, addr_width=32, data_width=64, id_width=4):
        self.data_width = data_width
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=addr_width, data_width=32)),
            "m_axi": Out(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)),
        })

    def elaborate(self, platform):
        m = Module()
        s, a = self.s_axil, self.m_axi
        lanes = self.data_width // 32
        lane_bits = (lanes - 1).bit_length()

        # writes: address and data together, then the burst of one beat, then the response
        busy_w = Signal()
        awv, wv = Signal(), Signal()
        take_w = ~busy_w & s.awvalid & s.wvalid
        m.d.comb += [s.awready.eq(take_w), s.wready.eq(take_w)]
        with m.If(take_w):
            lane = s.awaddr[2:2 + lane_bits] if lane_bits else 0
            m.d.sync += [busy_w.eq(1), awv.eq(1), wv.eq(1), a.awaddr.eq(s.awaddr),
                         a.wdata.eq(s.wdata.replicate(lanes)),
                         a.wstrb.eq(s.wstrb << (lane * 4) if lane_bits else s.wstrb)]
        with m.If(awv & a.awready):
            m.d.sync += awv.eq(0)
        with m.If(wv & a.wready):
            m.d.sync += wv.eq(0)
        m.d.comb += [a.awvalid.eq(awv), a.wvalid.eq(wv), a.wlast.eq(1), a.awlen.eq(0),
                     a.awsize.eq(2), a.awburst.eq(Burst.INCR), a.awcache.eq(0b0011),
                     s.bvalid.eq(a.bvalid), s.bresp.eq(a.bresp), a.bready.eq(s.bready)]
        with m.If(a.bvalid & a.bready):
            m.d.sync += busy_w.eq(0)

        busy_r = Signal()
        arv = Signal()
        lane_r = Signal(max(1, lane_bits))
        take_r = ~busy_r & s.arvalid
        m.d.comb += s.arready.eq(take_r)
        with m.If(take_r):
            m.d.sync += [busy_r.eq(1), arv.eq(1), a.araddr.eq(s.araddr)]
            if lane_bits:
                m.d.sync += lane_r.eq(s.araddr[2:2 + lane_bits])
        with m.If(arv & a.arready):
            m.d.sync += arv.eq(0)
        m.d.comb += [a.arvalid.eq(arv), a.arlen.eq(0), a.arsize.eq(2), a.arburst.eq(Burst.INCR),
                     a.arcache.eq(0b0011),
                     s.rvalid.eq(a.rvalid), s.rresp.eq(a.rresp),
                     s.rdata.eq(a.rdata.word_select(lane_r, 32) if lane_bits else a.rdata),
                     a.rready.eq(s.rready)]
        with m.If(a.rvalid & a.rready):
            m.d.sync += busy_r.eq(0)
        return m


class AxiArbiter(wiring.Component):
    """``managers`` AXI4 managers onto one AXI4 port, all of one data width.

    Each manager's IDs are widened with its index in the top bits, and responses go back by
    those bits, so managers may keep several transactions in flight. AR and AW are each granted
    round-robin; once a manager's address is presented it stays until taken. Each manager's
    addresses come in through register slices, and the granted ones go out through another
    (two cycles of latency, three when the grant must first move to the manager; a transfer
    a cycle): no combinational path runs from one manager
    to another's ready, nor from a manager to the port. Write data follows the order in which
    write addresses were granted (a FIFO of ``write_depth`` grants), and may reach the port
    before its address does, as AXI4 allows. ``slices=False`` leaves the address slices out
    (the grant drives the port directly; for small, slow builds).

    ``near_slices=True`` puts a second register slice on each manager's AR and AW, ahead of the
    first: one for the placer to put beside the manager (whose ready then comes from a register
    there) and one beside the grant, so the net across the die runs from register to register. A
    cycle more of latency on each address; still an address a cycle."""

    def __init__(self, managers, *, addr_width=32, data_width=64, id_width=4, write_depth=8,
                 slices=True, near_slices=False):
        # a refused arbiter is not a design left unused: no UnusedElaboratable warning for it
        self._MustUse__silence = True
        if managers < 1:
            raise ValueError(f"managers must be at least 1, not {managers!r}")
        if near_slices and not slices:
            raise ValueError("near_slices: the slices beside the managers come with the "
                             "arbiter's own (slices=True)")
        self._MustUse__silence = False
        self.managers = managers
        self.slices = slices
        self.near_slices = near_slices
        self.sel_bits = max(1, (managers - 1).bit_length())
        self.write_depth = write_depth
        self.in_sig = AXI4Signature(addr_width=addr_width, data_width=data_width,
                                    id_width=id_width)
        self.out_sig = AXI4Signature(addr_width=addr_width, data_width=data_width,
                                     id_width=id_width + self.sel_bits)
        members = {f"s{i}": In(self.in_sig) for i in range(managers)}
        members["m_axi"] = Out(self.out_sig)
        super().__init__(members)

    def _grant(self, m, name, valids, ready):
        """Round-robin choice among ``valids``, as a register: the manager it names is offered while
        its address is valid, and after a transfer (``ready``), or while that manager has none, the
        choice moves to the first valid manager after it in circular order (itself when no other is
        valid). So the managers' readies and the payload's multiplexer hang off a register, not off
        a priority decode of every valid; a manager that was not chosen waits a cycle more when it
        starts asking, and one asking alone is served every cycle."""
        n = self.managers
        sel = Signal(self.sel_bits, name=f"{name}_sel")
        pick = Signal(self.sel_bits, name=f"{name}_pick")
        for off in reversed(range(1, n + 1)):
            for k in range(n):
                with m.If((sel == k) & valids[(k + off) % n]):
                    m.d.comb += pick.eq((k + off) % n)
        go = Signal(name=f"{name}_go")
        m.d.comb += go.eq(valids.bit_select(sel, 1))
        with m.If((~go | ready) & valids.any()):
            m.d.sync += sel.eq(pick)
        return sel, go

    def elaborate(self, platform):
        m = Module()
        n = self.managers
        ins = [getattr(self, f"s{i}") for i in range(n)]
        o = self.m_axi
        sb = self.sel_bits
        chans = {"ar": ("id", "addr", "len", "size", "burst", "lock", "cache", "prot", "qos",
                        "region")}
        chans["aw"] = chans["ar"]

        # W order: the managers whose write addresses went out, oldest first
        order = m.submodules.order = BufferedFIFO(width=sb, depth=self.write_depth)

        for ch in ("ar", "aw"):
            # each manager's address through a register slice of its own, so that its ready is a
            # register and not the grant's choice among every manager's valid
            mv = [Signal(name=f"{ch}{i}_valid") for i in range(n)]
            mr = [Signal(name=f"{ch}{i}_ready") for i in range(n)]
            mf = []
            for i, p in enumerate(ins):
                src = [getattr(p, f"{ch}{f}") for f in chans[ch]]
                mf.append([Signal.like(d, name=f"{ch}{i}_{f}")
                           for f, d in zip(chans[ch], src, strict=True)])
                valid, ready = getattr(p, f"{ch}valid"), getattr(p, f"{ch}ready")
                payload = Cat(src)
                if self.near_slices:
                    near_v = Signal(name=f"{ch}{i}_near_valid")
                    near_r = Signal(name=f"{ch}{i}_near_ready")
                    near_p = Signal(len(payload), name=f"{ch}{i}_near")
                    register_slice(m, f"{ch}{i}_near", valid=valid, ready=ready, payload=payload,
                                   out_valid=near_v, out_ready=near_r, out_payload=near_p)
                    valid, ready, payload = near_v, near_r, near_p
                register_slice(m, f"{ch}{i}", valid=valid, ready=ready, payload=payload,
                               out_valid=mv[i], out_ready=mr[i], out_payload=Cat(mf[i]),
                               bypass=not self.slices)
            valids = Signal(n, name=f"{ch}_valids")
            m.d.comb += valids.eq(Cat(mv))
            # the granted address goes out through a register slice, so that no combinational
            # path runs from a manager through the grant to the memory's ready and back
            g_valid, g_ready = Signal(name=f"{ch}_g_valid"), Signal(name=f"{ch}_g_ready")
            outs = [getattr(o, f"{ch}{f}") for f in chans[ch]]
            g_fields = [Signal.like(d, name=f"{ch}_g_{f}")
                        for f, d in zip(chans[ch], outs, strict=True)]
            gate = order.w_rdy if ch == "aw" else 1
            sel, go = self._grant(m, ch, valids, g_ready & gate)
            m.d.comb += g_valid.eq(go & gate)
            for i in range(n):
                with m.If(sel == i):
                    for f, dst, src in zip(chans[ch], g_fields, mf[i], strict=True):
                        m.d.comb += dst.eq(Cat(src, Const(i, sb)) if f == "id" else src)
                    m.d.comb += mr[i].eq(g_ready & gate)
            register_slice(m, ch, valid=g_valid, ready=g_ready, payload=Cat(g_fields),
                           out_valid=getattr(o, f"{ch}valid"), out_ready=getattr(o, f"{ch}ready"),
                           out_payload=Cat(outs), bypass=not self.slices)
            if ch == "aw":
                m.d.comb += [order.w_en.eq(g_valid & g_ready), order.w_data.eq(sel)]

        # W: from the manager at the head of the order
        w_sel = order.r_data
        for i, p in enumerate(ins):
            with m.If(order.r_rdy & (w_sel == i)):
                m.d.comb += [o.wdata.eq(p.wdata), o.wstrb.eq(p.wstrb), o.wlast.eq(p.wlast),
                             o.wvalid.eq(p.wvalid), p.wready.eq(o.wready)]
        m.d.comb += order.r_en.eq(o.wvalid & o.wready & o.wlast)

        # R and B: back to the manager named by the top bits of the ID
        iw = self.in_sig.id_width
        for i, p in enumerate(ins):
            mine_r = o.rid[iw:] == i
            mine_b = o.bid[iw:] == i
            m.d.comb += [p.rid.eq(o.rid[:iw]), p.rdata.eq(o.rdata), p.rresp.eq(o.rresp),
                         p.rlast.eq(o.rlast), p.rvalid.eq(o.rvalid & mine_r),
                         p.bid.eq(o.bid[:iw]), p.bresp.eq(o.bresp), p.bvalid.eq(o.bvalid & mine_b)]
            with m.If(mine_r):
                m.d.comb += o.rready.eq(p.rready)
            with m.If(mine_b):
                m.d.comb += o.bready.eq(p.bready)
        return m
