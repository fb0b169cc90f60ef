"""AXI4 transport for blocks that read and write sequential byte streams.

:class:`StreamReader` fetches several sequential regions ("streams") over one AXI4 read port,
each into its own beat FIFO. :class:`StreamWriter` writes one sequential region from a beat
stream. Both issue INCR bursts of full-width beats, up to ``max_burst`` beats, never crossing a
4 KiB boundary. Regions start on a beat boundary and are whole beats long (the decompressor's
surfaces are 256-byte aligned and multiples of 128 bytes, and buses are at most 64 bytes wide).

Each component drives only its half of an :class:`hw.bus.axi.AXI4Signature` (``axi``); the
block that owns both connects the halves to one port (:func:`connect_read`, :func:`connect_write`).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4Signature, Burst, Resp, connect_members
from ..bus.fifo import BufferedFIFO, RegisteredQueue, block_ram_output, chosen_sum, register_slice

READ_MEMBERS = ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot",
                "arqos", "arregion", "arvalid", "arready", "rid", "rdata", "rresp", "rlast",
                "rvalid", "rready")
WRITE_MEMBERS = ("awid", "awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot",
                 "awqos", "awregion", "awvalid", "awready", "wdata", "wstrb", "wlast", "wvalid",
                 "wready", "bid", "bresp", "bvalid", "bready")


def connect_read(m, engine_axi, port):
    """Wire an engine's AR and R members to ``port`` (an Out(AXI4Signature) of the owner)."""
    connect_members(m, engine_axi, port, READ_MEMBERS)


def connect_write(m, engine_axi, port):
    connect_members(m, engine_axi, port, WRITE_MEMBERS)


def mount(m, *, bank, reader, writer, s_axil, m_axi):
    """Add a block's register ``bank``, stream ``reader`` and stream ``writer`` to ``m`` and
    wire them to the block's ``s_axil`` and ``m_axi`` ports (its own, as the block sees them);
    returns ``(regs, reader, writer)``."""
    m.submodules.bank = bank
    wiring.connect(m, wiring.flipped(s_axil), bank.s_axil)
    m.submodules.reader = reader
    m.submodules.writer = writer
    connect_read(m, reader.axi, m_axi)
    connect_write(m, writer.axi, m_axi)
    return bank.regs, reader, writer


def _page_room(addr, max_burst, beat_log2):
    """Beats a burst from ``addr`` (on a beat boundary) may have: max_burst, or fewer before
    the next 4 KiB boundary.

    Whether the boundary is the nearer is a compare of the address with a constant (fewer than
    ``max_burst`` beats to it: the page offset above ``4096 - max_burst`` beats), made beside the
    subtraction that counts the beats to it, not after it: the subtraction, its compare with
    ``max_burst`` and the choice in series would be too long a path for one cycle."""
    offset = addr[:12]
    to_4k = (4096 - offset) >> beat_log2
    bound = 4096 - (max_burst << beat_log2)
    near = Const(1) if bound < 0 else offset > bound
    return Mux(near, to_4k, max_burst)


class StreamReader(wiring.Component):
    """Sequential reads of ``streams`` regions into per-stream FIFOs of ``fifo_depth`` beats
    (one depth for all, or one per stream). A stream keeps as many beats in flight as its FIFO
    has room for, so a depth of latency + 2 bursts keeps the bus busy.

    Per stream ``s``: ``load[s]`` (pulse) with ``addr[s]`` and ``beats[s]`` starts a region;
    the stream ``o[s]`` delivers its beats in order. A burst is issued
    only when its stream's FIFO has room for all of it, so the R channel never waits (``rready``
    is always high) and streams never block each other. Stream ``s`` uses ARID ``s``; responses
    may arrive interleaved between IDs. Lower-numbered streams win the AR channel.

    A FIFO of ``RegisteredQueue.PIPE_DEPTH`` beats or more is taken to be block RAM, and its
    beats leave through a register of their own (a cycle more latency, still a beat a cycle), so
    ``o[s].payload`` comes from a register whatever the depth's storage.

    ``stop`` halts new bursts. ``idle``: nothing requested or in flight. ``error``: a read
    answered SLVERR/DECERR since the last ``flush`` (``error_next``: its value in the next
    cycle). ``flush`` (only when idle, with ``stop`` high: ``idle`` does not see a
    burst granted in the same cycle) empties the FIFOs and clears ``error``. ``load`` only
    when idle.
    """

    def __init__(self, *, streams, data_width, addr_width=32, id_width=4, max_burst=16,
                 fifo_depth=32):
        depths = tuple(fifo_depth) if isinstance(fifo_depth, (tuple, list)) else \
            (fifo_depth,) * streams
        if len(depths) != streams:
            raise ValueError(f"fifo_depth gives {len(depths)} depths for {streams} streams")
        for d in depths:
            if d < max_burst:
                raise ValueError(f"fifo_depth {d} must hold a burst of {max_burst} beats")
        if streams > (1 << id_width):
            raise ValueError(f"{streams} streams need more than {id_width} ID bits")
        self.streams = streams
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.max_burst = max_burst
        self.depths = depths
        self.axi_sig = AXI4Signature(addr_width=addr_width, data_width=data_width,
                                     id_width=id_width)
        n = streams
        super().__init__({
            "axi": Out(self.axi_sig),
            "load": In(n), "addr": In(addr_width).array(n), "beats": In(addr_width).array(n),
            "o": Out(stream.Signature(data_width)).array(n),
            "stop": In(1), "flush": In(1), "idle": Out(1), "error": Out(1),
            "error_next": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        n = self.streams
        beat_log2 = self.axi_sig.size_code
        fifos = []
        popped = []
        for s in range(n):
            f = ResetInserter(self.flush)(BufferedFIFO(width=self.data_width,
                                                       depth=self.depths[s]))
            m.submodules[f"fifo{s}"] = f
            fifos.append(f)
            if self.depths[s] >= RegisteredQueue.PIPE_DEPTH:
                # block RAM: its read data goes into a register before the consumer sees it.
                # A beat leaves the FIFO when it moves into that register, so the credit below
                # counts from then (the register is an entry more, never needed)
                valid, data = block_ram_output(m, f"out{s}", f, self.o[s].ready)
                with m.If(self.flush):
                    m.d.sync += valid.eq(0)
            else:
                valid, data = f.r_rdy, f.r_data
                m.d.comb += f.r_en.eq(self.o[s].ready)
            m.d.comb += [self.o[s].valid.eq(valid), self.o[s].payload.eq(data)]
            # a beat's credit comes back a cycle after it leaves, from a register: the FIFO's output
            # handshake sits with the consumer, across the die from the credit's adders. A flush
            # restores the credit whole, so the pop in its cycle is not counted again
            pop = Signal(name=f"popped{s}")
            m.d.sync += pop.eq(f.r_en & f.r_rdy & ~self.flush)
            popped.append(pop)

        addr = [Signal(self.addr_width, name=f"addr{s}") for s in range(n)]
        left = [Signal(self.addr_width, name=f"left{s}") for s in range(n)]
        credit = [Signal(range(d + 1), init=d, name=f"credit{s}")
                  for s, d in enumerate(self.depths)]
        # each stream's next burst length, worked out ahead in registers, as the writer's: first the
        # beats its address allows before the next 4 KiB boundary, then the fewer of those and the
        # beats left, then whether the burst is due (``ok``: a length, and the credit for it). They
        # are stale for three cycles after the stream's address moves, and no burst is issued then;
        # after that ``ok`` lags the credit by a cycle, which only delays a burst (the credit of a
        # stream not granted can only grow). So the grant is a priority over registers, and a stream
        # issues a burst every fourth cycle at most, far more than R needs
        rooms = [Signal(range(self.max_burst + 1), name=f"room{s}") for s in range(n)]
        lens = [Signal(range(self.max_burst + 1), name=f"len{s}") for s in range(n)]
        ok = [Signal(name=f"ok{s}") for s in range(n)]
        stale = [Signal(3, init=0b111, name=f"stale{s}") for s in range(n)]
        want = [Signal(name=f"want{s}") for s in range(n)]
        for s in range(n):
            m.d.sync += [rooms[s].eq(_page_room(addr[s], self.max_burst, beat_log2)),
                         lens[s].eq(Mux(left[s] < rooms[s], left[s], rooms[s])),
                         ok[s].eq((lens[s] != 0) & (credit[s] >= lens[s]))]
            m.d.comb += want[s].eq((stale[s] == 0) & ok[s] & ~self.stop)

        # AR: a registered request; the next one is chosen when the channel is free
        arvalid = Signal()
        m.d.comb += [
            axi.arvalid.eq(arvalid), axi.arsize.eq(beat_log2), axi.arburst.eq(Burst.INCR),
            axi.arcache.eq(0b0011), axi.rready.eq(1),
        ]
        free = ~arvalid | axi.arready
        # beats requested and not yet answered; a granted burst's length is added a cycle
        # later from a register (its first beat comes two cycles after the grant at the
        # earliest), so the grant does not run into this adder
        inflight = Signal(range(sum(self.depths) + 1))
        issued = Signal(range(self.max_burst + 1))
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += arvalid.eq(0)
        chosen = Signal(range(n + 1), init=n)
        for s in reversed(range(n)):
            with m.If(want[s]):
                m.d.comb += chosen.eq(s)
        m.d.comb += issued.eq(0)
        for s in range(n):
            grant = free & (chosen == s)
            with m.If(grant):
                m.d.comb += issued.eq(lens[s])
                m.d.sync += [
                    arvalid.eq(1), axi.arid.eq(s), axi.araddr.eq(addr[s]),
                    axi.arlen.eq(lens[s] - 1),
                    addr[s].eq(addr[s] + (lens[s] << beat_log2)), left[s].eq(left[s] - lens[s]),
                ]
            # the credit after a pop, with and without this cycle's grant: both sums worked out
            # from registers (kept apart, so the grant chooses between them and does not sit
            # in front of one adder)
            w = len(credit[s])
            m.d.sync += [credit[s].eq(chosen_sum(m, f"credit{s}_grant", grant,
                                                 (credit[s] - lens[s] + popped[s])[:w],
                                                 (credit[s] + popped[s])[:w])),
                         stale[s].eq(Cat(grant | self.load[s], stale[s][:2]))]
            with m.If(self.load[s]):
                m.d.sync += [addr[s].eq(self.addr[s]), left[s].eq(self.beats[s])]
            with m.If(self.flush):
                m.d.sync += credit[s].eq(self.depths[s])

        # R: every beat has room reserved in its stream's FIFO
        beat = axi.rvalid & axi.rready
        for s in range(n):
            m.d.comb += [fifos[s].w_en.eq(beat & (axi.rid == s)),
                         fifos[s].w_data.eq(axi.rdata)]
        issued_r = Signal.like(issued)
        m.d.sync += [issued_r.eq(issued), inflight.eq(inflight + issued_r - beat)]
        error = Signal()
        m.d.comb += self.error_next.eq(~self.flush & (error | (beat & (axi.rresp != Resp.OKAY))))
        m.d.sync += error.eq(self.error_next)
        # (while issued_r holds a grant's length, arvalid is set: idle is low either way)
        m.d.comb += [self.error.eq(error), self.idle.eq((inflight == 0) & ~arvalid)]
        return m


class StreamWriter(wiring.Component):
    """Writes a beat stream to consecutive addresses from ``addr`` (``load`` pulse).

    Beats enter through the stream ``i`` into a FIFO of ``2 * max_burst``
    beats. A full burst is issued once its beats are all in the FIFO, so W never waits for data;
    after ``finish`` (held high once the last beat has entered) the remainder goes out in shorter
    bursts. ``stop`` halts new bursts (those issued complete). ``done``: finished and every
    burst answered. ``error``: a write answered SLVERR/DECERR; ``range_error``: the next burst
    would pass the top of the address space (it is not issued); ``error_next`` and
    ``range_error_next`` are their values in the next cycle. ``flush`` (when
    idle, with ``stop`` high) empties the FIFO and clears both errors. ``load`` only when idle.
    """

    def __init__(self, *, data_width, addr_width=32, id_width=4, max_burst=16):
        self.data_width = data_width
        self.addr_width = addr_width
        self.max_burst = max_burst
        self.axi_sig = AXI4Signature(addr_width=addr_width, data_width=data_width,
                                     id_width=id_width)
        super().__init__({
            "axi": Out(self.axi_sig),
            "load": In(1), "addr": In(addr_width),
            "i": In(stream.Signature(data_width)),
            "finish": In(1), "stop": In(1), "flush": In(1),
            "done": Out(1), "idle": Out(1), "error": Out(1), "range_error": Out(1),
            "error_next": Out(1), "range_error_next": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        beat_log2 = self.axi_sig.size_code
        depth = 2 * self.max_burst
        fifo = m.submodules.fifo = ResetInserter(self.flush)(
            BufferedFIFO(width=self.data_width, depth=depth))
        lens = m.submodules.lens = ResetInserter(self.flush)(
            BufferedFIFO(width=9, depth=4))
        m.d.comb += [fifo.w_en.eq(self.i.valid), fifo.w_data.eq(self.i.payload),
                     self.i.ready.eq(fifo.w_rdy)]

        addr = Signal(self.addr_width + 1)          # one bit more: reaching the top is sticky
        # beats in the FIFO not yet owed to an issued burst
        spare = Signal(range(depth + 1))
        pushed = fifo.w_en & fifo.w_rdy
        # the next burst, worked out two cycles ahead in registers: the beats its address allows
        # (``room``: the longest burst, or fewer before the next 4 KiB boundary), then its
        # length and whether the FIFO holds it all. Between two cycles the spare beats only
        # grow, unless a burst is issued or the address loaded: for two cycles after those
        # the registers are stale and nothing is issued
        room = Signal(range(self.max_burst + 1))
        burst = Signal(range(self.max_burst + 1))
        enough = Signal()
        m.d.sync += [room.eq(_page_room(addr, self.max_burst, beat_log2)),
                     burst.eq(Mux(self.finish & (spare < room), spare, room)),
                     enough.eq(self.finish | (spare >= room))]
        stale = Signal(2, init=0b11)
        # bursts end at or before a 4 KiB boundary, so only one that starts at the top of the
        # address space passes it
        over = addr[self.addr_width]
        awvalid = Signal()
        range_error = Signal()
        ready_to_issue = ((stale == 0) & (burst != 0) & enough & ~self.stop & lens.w_rdy &
                          (~awvalid | axi.awready))
        m.d.comb += [axi.awvalid.eq(awvalid), axi.awsize.eq(beat_log2),
                     axi.awburst.eq(Burst.INCR), axi.awcache.eq(0b0011), axi.bready.eq(1),
                     axi.wstrb.eq(-1)]
        issue = Signal()
        m.d.comb += issue.eq(ready_to_issue & ~over & ~range_error)
        m.d.sync += spare.eq(spare + pushed - Mux(issue, burst, 0))
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += awvalid.eq(0)
        with m.If(issue):
            m.d.sync += [awvalid.eq(1), axi.awaddr.eq(addr[:self.addr_width]),
                         axi.awlen.eq(burst - 1), addr.eq(addr + (burst << beat_log2))]
        m.d.comb += self.range_error_next.eq(~self.flush & (range_error | (ready_to_issue & over)))
        m.d.sync += range_error.eq(self.range_error_next)
        with m.If(self.load):
            m.d.sync += addr.eq(self.addr)
        m.d.sync += stale.eq(Cat(issue | self.load | self.flush, stale[0]))
        m.d.comb += [lens.w_en.eq(issue), lens.w_data.eq(burst)]

        # W: the beats of the oldest issued burst, through a register slice, so the bus's WREADY
        # (late, from the arbiter's grant) does not reach the FIFO's output register. A burst's
        # response comes after its last beat has left the slice, so `idle` and `done` still mean
        # every beat is out.
        count = Signal(9)
        w_go = lens.r_rdy & fifo.r_rdy
        w_rdy = Signal()
        w_take = w_go & w_rdy
        last = count == lens.r_data - 1
        register_slice(m, "w", valid=w_go, ready=w_rdy, payload=Cat(fifo.r_data, last),
                       out_valid=axi.wvalid, out_ready=axi.wready,
                       out_payload=Cat(axi.wdata, axi.wlast), reset=self.flush)
        m.d.comb += [fifo.r_en.eq(w_take), lens.r_en.eq(w_take & last)]
        with m.If(w_take):
            m.d.sync += count.eq(Mux(last, 0, count + 1))
        with m.If(self.flush):
            m.d.sync += [spare.eq(0), count.eq(0)]

        # B: bursts awaiting their response
        pending = Signal(8)
        m.d.sync += pending.eq(pending + issue - (axi.bvalid & axi.bready))
        error = Signal()
        m.d.comb += self.error_next.eq(~self.flush &
                                       (error | (axi.bvalid & (axi.bresp != Resp.OKAY))))
        m.d.sync += error.eq(self.error_next)
        idle = (pending == 0) & ~awvalid & ~lens.r_rdy
        m.d.comb += [self.error.eq(error), self.range_error.eq(range_error), self.idle.eq(idle),
                     self.done.eq(self.finish & idle & (fifo.level == 0))]
        return m


class BeatReader(StreamReader):
    """ :class:`StreamReader`'s ports for one stream, one beat at a time: a single-beat read is
    issued when the output register is empty and nothing is in flight. A few hundred logic cells
    where the burst engine and its FIFO take about a thousand, at a beat every four cycles or
    so plus the read latency: for small FPGAs and consumers slower than that (the serial LUT
    unit). It is a :class:`StreamReader` of one stream with its own logic; ``stop``, ``idle``,
    ``error`` and ``flush`` mean what they mean there."""

    def __init__(self, *, data_width, addr_width=32, id_width=4):
        super().__init__(streams=1, data_width=data_width, addr_width=addr_width,
                         id_width=id_width, max_burst=1, fifo_depth=1)

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        step = self.data_width // 8
        addr = Signal(self.addr_width)
        left = Signal(self.addr_width)
        arvalid = Signal()
        inflight = Signal()
        error = Signal()
        o = self.o[0]
        m.d.comb += [axi.arvalid.eq(arvalid), axi.araddr.eq(addr), axi.arlen.eq(0),
                     axi.arsize.eq(self.axi_sig.size_code), axi.arburst.eq(Burst.INCR),
                     axi.arcache.eq(0b0011), axi.rready.eq(1),
                     self.error.eq(error), self.idle.eq(~arvalid & ~inflight)]
        with m.If(self.load):
            m.d.sync += [addr.eq(self.addr[0]), left.eq(self.beats[0])]
        with m.Elif(~arvalid & ~inflight & ~o.valid & (left != 0) & ~self.stop):
            m.d.sync += arvalid.eq(1)
        with m.If(arvalid & axi.arready):
            m.d.sync += [arvalid.eq(0), inflight.eq(1), addr.eq(addr + step),
                         left.eq(left - 1)]
        with m.If(o.valid & o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(axi.rvalid & inflight):
            m.d.sync += [inflight.eq(0), o.valid.eq(1), o.payload.eq(axi.rdata)]
        with m.If(self.flush):
            m.d.sync += o.valid.eq(0)
        m.d.comb += self.error_next.eq(~self.flush &
                                       (error | (axi.rvalid & (axi.rresp != Resp.OKAY))))
        m.d.sync += error.eq(self.error_next)
        return m


class BeatWriter(StreamWriter):
    """ :class:`StreamWriter`'s ports, one beat at a time: a beat taken from ``i`` goes out as
    a single-beat write (address and data together), and the next is taken once its response
    is back. ``done``: ``finish`` and nothing in flight. ``error``: a write answered
    SLVERR/DECERR since the last ``flush``. Never a range error: the beats are those the
    owner checked. It is a :class:`StreamWriter` with its own logic."""

    def __init__(self, *, data_width, addr_width=32, id_width=4):
        super().__init__(data_width=data_width, addr_width=addr_width, id_width=id_width,
                         max_burst=1)

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        step = self.data_width // 8
        addr = Signal(self.addr_width)
        awvalid, wvalid, pending, error = Signal(), Signal(), Signal(), Signal()
        busy = awvalid | wvalid | pending
        m.d.comb += [axi.awvalid.eq(awvalid), axi.awlen.eq(0),
                     axi.awsize.eq(self.axi_sig.size_code), axi.awburst.eq(Burst.INCR),
                     axi.awcache.eq(0b0011), axi.wvalid.eq(wvalid), axi.wlast.eq(1),
                     axi.wstrb.eq(-1), axi.bready.eq(1),
                     self.i.ready.eq(~busy & ~self.stop), self.idle.eq(~busy),
                     self.done.eq(self.finish & ~busy), self.error.eq(error)]
        with m.If(self.load):
            m.d.sync += addr.eq(self.addr)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [awvalid.eq(1), wvalid.eq(1), pending.eq(1), axi.awaddr.eq(addr),
                         axi.wdata.eq(self.i.payload), addr.eq(addr + step)]
        with m.If(awvalid & axi.awready):
            m.d.sync += awvalid.eq(0)
        with m.If(wvalid & axi.wready):
            m.d.sync += wvalid.eq(0)
        with m.If(axi.bvalid & pending):
            m.d.sync += pending.eq(0)
        m.d.comb += self.error_next.eq(~self.flush &
                                       (error | (axi.bvalid & (axi.bresp != Resp.OKAY))))
        m.d.sync += error.eq(self.error_next)
        return m
