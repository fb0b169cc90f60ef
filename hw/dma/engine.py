"""The DMA layout engine: descriptors from registers or a chain in memory, checked, then moved
through an AXI4 master by one of three paths.

Front end: the register bank (``model/registers/dma.py``) and the descriptor source: the
registers (``ctrl.start``), or a chain fetched from memory one 128-byte descriptor at a time
(``ctrl.start_chain``). Each descriptor is checked against the model's rules
(:class:`model.dma.descriptor.Error`, in the same order) before anything moves.

Mid end: the descriptor's shape picks the path.

- *Row path* (:class:`~hw.dma.rows.RowCopier`): dimension 0 contiguous on both sides. Runs
  of dimension 0 move a beat per cycle through a funnel-shift realigner.
- *Tile path* (:class:`~hw.dma.tile.TileTransposer`): dimension 0 contiguous in the
  destination and another dimension contiguous in the source, at most four dimensions. Tiles
  go through a double-buffered skewed-bank buffer: a row beat in and a column beat out per
  cycle.
- *Element path* (:class:`~hw.dma.walker.Walker` and the extractor): anything else, one
  element per cycle.

The row and tile paths ask for beats and hand back pieces of beats (address, data, strobes);
the element path asks for elements, which the extractor takes out of their beats.

Back end: the *read planner* merges the beats asked for into INCR bursts (at most
``max_burst`` beats, never across 4 KiB) and issues a burst only when the read FIFO has room
for it, so several reads are in flight and R never waits. The *write combiner* gathers pieces
that fall in one beat (with byte strobes) and consecutive beats into bursts, and issues a
burst's address once all its beats are buffered.

A descriptor ends when its last write is answered, so the next one sees its results. Errors end
the job: no new address is issued, bursts already issued complete (their data was read before
the error), reads in flight are drained, and the engine takes the next job.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.hdl import ResetInserter
from amaranth.lib import enum, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from model.dma.descriptor import DESCRIPTOR_BYTES, MAX_DIMS, Error
from model.registers.dma import DMA

from ..bus.axi import AXI4LiteSignature, AXI4Signature, Burst, Resp
from ..bus.regbank import RegisterBank
from .rows import RowCopier
from .tile import TileTransposer
from .walker import Walker

DATA_ID = 0
FETCH_ID = 1


class _State(enum.Enum, shape=4):
    IDLE = 0
    FETCH = 1        # reading a chain descriptor
    CHECK = 2        # one dimension per cycle
    VERDICT = 3
    RUN = 4
    DRAIN = 5        # walk done (or stopped): wait for reads and writes to finish
    NEXT = 6


class DmaEngine(wiring.Component):
    """Parameters: ``data_width`` 64, 128 or 256; ``addr_width`` (at most 32: registers hold
    32-bit addresses); ``id_width``; ``max_burst`` beats (power of two, 2 to 256);
    ``read_fifo`` beats of read data buffered (bounds the reads in flight).

    Ports: ``s_axil`` (registers), ``m_axi`` (memory, full AXI4 signal set), ``irq``."""

    def __init__(self, *, data_width=64, addr_width=32, id_width=4, max_burst=16,
                 read_fifo=64, tile_beats=None):
        if data_width not in (64, 128, 256):
            raise ValueError(f"data_width must be 64, 128 or 256, not {data_width!r}")
        if not 12 <= addr_width <= 32:
            raise ValueError(f"addr_width must be 12 to 32, not {addr_width!r}")
        if max_burst not in (2, 4, 8, 16, 32, 64, 128, 256):
            raise ValueError(f"max_burst must be a power of two from 2 to 256, not "
                             f"{max_burst!r}")
        if read_fifo < max_burst or read_fifo < DESCRIPTOR_BYTES * 8 // data_width:
            raise ValueError(f"read_fifo {read_fifo} must hold a burst of {max_burst} beats")
        if id_width < 1:
            raise ValueError(f"id_width must be at least 1, not {id_width!r}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.max_burst = max_burst
        self.read_fifo = read_fifo
        self.regmap = DMA
        self._bank = RegisterBank(DMA, addr_width=8)
        self._walker = Walker(levels=MAX_DIMS, addr_width=addr_width)
        # tile rows of 128 bytes by default: long enough for reads that do not start on a beat
        # to lose little (one beat in K + 1), short enough that a tile fills quickly
        self.tile_beats = tile_beats if tile_beats is not None else 1024 // data_width
        self._tile = TileTransposer(data_width=data_width, addr_width=addr_width,
                                    tile_beats=self.tile_beats, row_queue=read_fifo)
        self._rows = RowCopier(data_width=data_width, addr_width=addr_width,
                               run_queue=read_fifo)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=8, data_width=32)),
            "m_axi": Out(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        BB = self.data_width // 8
        L = (BB - 1).bit_length()
        aw = self.addr_width
        axi = self.m_axi

        bank = m.submodules.bank = self._bank
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        regs = bank.regs
        walker = m.submodules.walker = self._walker

        state = Signal(_State)
        chain = Signal()                      # the job is a chain
        index = Signal(24)                    # descriptor of the job being worked on
        error_code = Signal(4)
        m.d.comb += [regs.status.busy.r_data.eq(state != _State.IDLE),
                     regs.hwinfo.data_bytes.r_data.eq(BB),
                     regs.hwinfo.max_dims.r_data.eq(MAX_DIMS),
                     regs.hwinfo.addr_width.r_data.eq(aw),
                     regs.error.code.r_data.eq(error_code),
                     regs.error.index.r_data.eq(index)]

        # -- the active descriptor ----------------------------------------------------------------
        src = Signal(64)
        dst = Signal(64)
        nxt = Signal(64)
        pad = Signal(64)
        elog = Signal(2)
        ndims = Signal(3)
        last_desc = Signal()
        want_irq = Signal()
        ext = [Signal(32, name=f"ext{k}") for k in range(MAX_DIMS)]
        val = [Signal(32, name=f"val{k}") for k in range(MAX_DIMS)]
        sst = [Signal(32, name=f"sst{k}") for k in range(MAX_DIMS)]
        dstr = [Signal(32, name=f"dstr{k}") for k in range(MAX_DIMS)]
        eb = Signal(4)
        m.d.comb += eb.eq(1 << elog)

        start_regs = regs.ctrl.start.pulse[0] & (state == _State.IDLE)
        start_chain = regs.ctrl.start_chain.pulse[0] & (state == _State.IDLE) & \
            ~regs.ctrl.start.pulse[0]
        fetch_addr = Signal(64)

        # -- the checks: one dimension per cycle, then the verdict ------------------------------
        k_chk = Signal(range(MAX_DIMS + 1))
        span = Signal(70)                     # bytes the destination's inner dimensions reach
        src_top = Signal(70)
        no_src = Signal()                     # some valid is 0: nothing is read
        first_dim_err = Signal(4)             # zero extent / valid > extent, first dimension
        nest_err = Signal()
        cur_e = Signal(32)
        cur_v = Signal(32)
        cur_s = Signal(32)
        cur_d = Signal(32)
        for k in range(MAX_DIMS):
            with m.If(k_chk == k):
                m.d.comb += [cur_e.eq(ext[k]), cur_v.eq(val[k]), cur_s.eq(sst[k]),
                             cur_d.eq(dstr[k])]
        p_dst = Signal(64)
        p_src = Signal(64)
        m.d.comb += [p_dst.eq((cur_e - 1)[:32] * cur_d), p_src.eq((cur_v - 1)[:32] * cur_s)]

        # -- the datapath (reset between descriptors and after errors) --------------------------
        dp_reset = Signal()
        halt = Signal()                       # an error: issue nothing new
        # elements waiting for their read data: enough for every beat the read FIFO can have
        # in flight plus an open burst, or the entries, not the bus, would limit a copy
        entries = m.submodules.entries = ResetInserter(dp_reset)(
            SyncFIFOBuffered(width=aw + L + 3, depth=self.read_fifo + 2 * self.max_burst))
        rfifo = m.submodules.rfifo = ResetInserter(dp_reset)(
            SyncFIFOBuffered(width=self.data_width, depth=self.read_fifo))
        wfifo = m.submodules.wfifo = ResetInserter(dp_reset)(
            SyncFIFOBuffered(width=self.data_width + BB, depth=2 * self.max_burst))
        awfifo = m.submodules.awfifo = ResetInserter(dp_reset)(
            SyncFIFOBuffered(width=aw + 9, depth=8))
        wlens = m.submodules.wlens = ResetInserter(dp_reset)(
            SyncFIFOBuffered(width=9, depth=8))

        # walker configuration: unused dimensions count once
        n_ext = [Signal(32, name=f"n_ext{k}") for k in range(MAX_DIMS)]
        n_val = [Signal(32, name=f"n_val{k}") for k in range(MAX_DIMS)]
        n_sst = [Signal(aw, name=f"n_sst{k}") for k in range(MAX_DIMS)]
        n_dst = [Signal(aw, name=f"n_dst{k}") for k in range(MAX_DIMS)]
        for k in range(MAX_DIMS):
            used = k < ndims
            m.d.comb += [n_ext[k].eq(Mux(used, ext[k], 1)), n_val[k].eq(Mux(used, val[k], 1)),
                         n_sst[k].eq(Mux(used, sst[k], 0)), n_dst[k].eq(Mux(used, dstr[k], 0))]
            m.d.comb += [walker.extent[k].eq(n_ext[k]), walker.valid[k].eq(n_val[k]),
                         walker.src_stride[k].eq(n_sst[k]), walker.dst_stride[k].eq(n_dst[k])]
        m.d.comb += [walker.src_base.eq(src[:aw]), walker.dst_base.eq(dst[:aw])]
        step = walker.o.payload

        # the transpose path: dim 0 contiguous in the destination and a column dimension (the
        # lowest of 1 to 3 with every index valid) contiguous in the source, at most 4
        # dimensions, elements narrower than a beat
        tile = m.submodules.tile = ResetInserter(dp_reset)(self._tile)
        tile_mode = Signal()                  # the running descriptor uses it
        col = Signal(2)
        col_ok = [(k < ndims) & (sst[k] == eb) & (val[k] == ext[k]) & (ext[k] > 1)
                  for k in range(4)]
        with m.If(col_ok[1]):
            m.d.comb += col.eq(1)
        with m.Elif(col_ok[2]):
            m.d.comb += col.eq(2)
        with m.Elif(col_ok[3]):
            m.d.comb += col.eq(3)
        tile_fits = ((ndims >= 2) & (ndims <= 4) & (dstr[0] == eb) & (ext[0] > 1) &
                     (col != 0) & (elog < L))
        others = {1: (2, 3), 2: (1, 3), 3: (1, 2)}
        m.d.comb += [tile.src.eq(src[:aw]), tile.dst.eq(dst[:aw]), tile.elog.eq(elog),
                     tile.pad.eq(pad)]
        with m.Switch(col):
            for c, (p, q) in others.items():
                with m.Case(c):
                    for t_k, k in enumerate((0, c, p, q)):
                        m.d.comb += [tile.ext[t_k].eq(n_ext[k]), tile.val[t_k].eq(n_val[k]),
                                     tile.sst[t_k].eq(n_sst[k]), tile.dstr[t_k].eq(n_dst[k])]

        # the row path: dim 0 contiguous on both sides
        rows = m.submodules.rows = ResetInserter(dp_reset)(self._rows)
        row_mode = Signal()
        row_fits = (ndims >= 1) & (ndims <= MAX_DIMS) & (sst[0] == eb) & (dstr[0] == eb)
        m.d.comb += [rows.src.eq(src[:aw]), rows.dst.eq(dst[:aw]), rows.elog.eq(elog),
                     rows.pad.eq(pad)]
        for k in range(MAX_DIMS):
            m.d.comb += [rows.ext[k].eq(n_ext[k]), rows.val[k].eq(n_val[k]),
                         rows.sst[k].eq(n_sst[k]), rows.dstr[k].eq(n_dst[k])]

        # the two move a beat at a time through the same ports: `beats` is the one in use
        beat_mode = tile_mode | row_mode

        def beats(field):
            return Mux(row_mode, field(rows), field(tile))

        # read planner: one burst open at a time; it is issued when the next element needs a
        # beat that does not continue it, when it is full, at the end of the walk, or when the
        # entry FIFO is full (so the extractor can go on)
        open_ = Signal()
        b_start = Signal(aw)                  # address of the burst's first beat
        b_len = Signal(range(self.max_burst + 1))
        b_last = Signal(aw)                   # address of its last beat
        credit = Signal(range(self.read_fifo + 1), init=self.read_fifo)
        inflight = Signal(range(self.read_fifo + 1))
        arvalid = Signal()
        ar_free = ~arvalid | axi.arready
        # its requests: the walker's elements, or the transposer's beats
        beat_of = step.src & ~Const(BB - 1, aw)
        p_valid = Mux(beat_mode, beats(lambda u: u.req.valid), walker.o.valid)
        p_beat = Mux(beat_mode, beats(lambda u: u.req.payload), beat_of)
        p_has = beat_mode | step.has_src
        p_room = beat_mode | entries.w_rdy
        same = open_ & (p_beat == b_last) & ~beat_mode
        cont = (open_ & (p_beat == b_last + BB) & (b_len < self.max_burst) &
                (p_beat[:12] != 0))
        can_issue = ar_free & (credit >= b_len) & ~halt
        need_close = open_ & ~same & ~cont
        st_has = step.has_src
        # an element with a source either shares the open beat, continues the burst, or needs
        # the open burst issued first
        step_ok = p_valid & p_room & (~p_has | same | cont | ~open_ | (need_close & can_issue))
        take_step = step_ok & (state == _State.RUN) & ~halt
        m.d.comb += [walker.o.ready.eq(take_step & ~beat_mode),
                     tile.req.ready.eq(take_step & tile_mode),
                     rows.req.ready.eq(take_step & row_mode)]
        new_beat = st_has & ~same
        m.d.comb += [entries.w_en.eq(take_step & ~beat_mode),
                     entries.w_data.eq(Cat(step.dst, step.src[:L], st_has, new_beat,
                                           step.last))]
        issue = Signal()                      # the open burst (b_start, b_len) goes out
        # no next step (the walk has ended): the open burst goes
        force = open_ & ~p_valid & can_issue & (state == _State.RUN)
        stuck = open_ & p_valid & ~p_room & can_issue
        with m.If(take_step & p_has):
            with m.If(same):
                pass
            with m.Elif(cont):
                m.d.sync += [b_len.eq(b_len + 1), b_last.eq(p_beat)]
            with m.Else():
                m.d.comb += issue.eq(open_)
                m.d.sync += [open_.eq(1), b_start.eq(p_beat), b_last.eq(p_beat), b_len.eq(1)]
        with m.Elif(force | stuck):
            m.d.comb += issue.eq(1)
            m.d.sync += open_.eq(0)

        # the fetch of a chain descriptor uses the AR channel while the datapath is idle
        fetch_go = Signal()
        fetch_beats = DESCRIPTOR_BYTES // BB
        m.d.comb += [axi.arvalid.eq(arvalid), axi.arsize.eq(L), axi.arburst.eq(Burst.INCR),
                     axi.arcache.eq(0b0011), axi.rready.eq(1)]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += arvalid.eq(0)
        with m.If(issue):
            m.d.sync += [arvalid.eq(1), axi.arid.eq(DATA_ID), axi.araddr.eq(b_start),
                         axi.arlen.eq(b_len - 1)]
        with m.Elif(fetch_go):
            m.d.sync += [arvalid.eq(1), axi.arid.eq(FETCH_ID), axi.araddr.eq(fetch_addr[:aw]),
                         axi.arlen.eq(fetch_beats - 1)]
        r_beat = axi.rvalid & axi.rready
        r_data = r_beat & (axi.rid == DATA_ID)
        m.d.comb += [rfifo.w_en.eq(r_data & ~halt), rfifo.w_data.eq(axi.rdata)]
        popped = rfifo.r_en & rfifo.r_rdy
        m.d.sync += [credit.eq(credit - Mux(issue, b_len, 0) + popped),
                     inflight.eq(inflight + Mux(issue, b_len, 0) - r_data)]
        read_err = Signal()
        with m.If(r_data & (axi.rresp != Resp.OKAY)):
            m.d.sync += read_err.eq(1)

        # extractor: entries in order; a new beat is taken from the read FIFO when needed
        e_dst = entries.r_data[:aw]
        e_off = entries.r_data[aw:aw + L]
        e_has = entries.r_data[aw + L]
        e_new = entries.r_data[aw + L + 1]
        e_last = entries.r_data[aw + L + 2]
        cur = Signal(self.data_width)
        beat = Mux(e_new, rfifo.r_data, cur)
        e_ready = entries.r_rdy & (~e_new | rfifo.r_rdy)
        elem = Signal(64)
        m.d.comb += elem.eq(Mux(e_has, (beat >> (e_off << 3))[:64], pad))

        # write combiner: one open beat, one open burst (its beats go to the W FIFO). Its input
        # (c_*) is a piece of a beat: the extractor's element, or the transposer's column
        w_open = Signal()
        w_addr = Signal(aw)                   # the open beat's address
        w_data = Signal(self.data_width)
        w_strb = Signal(BB)
        wb_open = Signal()
        wb_start = Signal(aw)
        wb_len = Signal(range(self.max_burst + 1))
        d_beat = e_dst & ~Const(BB - 1, aw)
        d_off = e_dst[:L]
        emask = Signal(8)
        m.d.comb += emask.eq((Const(1, 9) << eb) - 1)
        sh_data = Signal(self.data_width)
        sh_strb = Signal(BB)
        m.d.comb += [sh_data.eq(elem << (d_off << 3)),
                     sh_strb.eq(emask << d_off)]
        c_valid = Mux(beat_mode, beats(lambda u: u.wr.valid), e_ready)
        c_beat = Mux(beat_mode, beats(lambda u: u.wr.payload.addr), d_beat)
        c_data = Mux(beat_mode, beats(lambda u: u.wr.payload.data), sh_data)
        c_strb = Mux(beat_mode, beats(lambda u: u.wr.payload.strb), sh_strb)
        c_last = Mux(beat_mode, beats(lambda u: u.wr.payload.last), e_last)
        data_mask = Signal(self.data_width)
        m.d.comb += data_mask.eq(Cat(*[c_strb[i].replicate(8) for i in range(BB)]))
        same_w = w_open & (c_beat == w_addr)
        # pushing the open beat: into the open burst if it continues, else the burst is closed
        next_in_burst = wb_open & (w_addr == wb_start + (wb_len << L)) & \
            (wb_len < self.max_burst) & (w_addr[:12] != 0)
        can_close = awfifo.w_rdy & wlens.w_rdy
        can_push = wfifo.w_rdy & (next_in_burst | ~wb_open | can_close)
        c_go = c_valid & (same_w | ~w_open | can_push) & ~halt & (state == _State.RUN)
        e_go = c_go & ~beat_mode
        m.d.comb += [entries.r_en.eq(e_go), tile.wr.ready.eq(c_go & tile_mode),
                     rows.wr.ready.eq(c_go & row_mode),
                     rfifo.r_en.eq(Mux(beat_mode, beats(lambda u: u.rdata.ready),
                                       e_go & e_new)),
                     tile.rdata.valid.eq(rfifo.r_rdy & tile_mode & ~halt),
                     rows.rdata.valid.eq(rfifo.r_rdy & row_mode & ~halt),
                     tile.rdata.payload.eq(rfifo.r_data), rows.rdata.payload.eq(rfifo.r_data)]
        with m.If(e_go & e_new):
            m.d.sync += cur.eq(rfifo.r_data)

        push = Signal()
        close = Signal()
        m.d.comb += [wfifo.w_data.eq(Cat(w_data, w_strb)), wfifo.w_en.eq(push),
                     awfifo.w_data.eq(Cat(wb_start, wb_len - 1)), awfifo.w_en.eq(close),
                     wlens.w_data.eq(wb_len), wlens.w_en.eq(close)]
        flush_w = Signal()                    # the walk has ended: push and close what is open

        def push_open_beat():
            """The open beat goes to the W FIFO: it extends the open burst, or closes it and
            starts the next."""
            m.d.comb += push.eq(1)
            with m.If(next_in_burst):
                m.d.sync += wb_len.eq(wb_len + 1)
            with m.Else():
                m.d.comb += close.eq(wb_open)
                m.d.sync += [wb_open.eq(1), wb_start.eq(w_addr), wb_len.eq(1)]

        with m.If(c_go):
            with m.If(same_w):
                m.d.sync += [w_data.eq((w_data & ~data_mask) | (c_data & data_mask)),
                             w_strb.eq(w_strb | c_strb)]
            with m.Else():
                with m.If(w_open):
                    push_open_beat()
                m.d.sync += [w_open.eq(1), w_addr.eq(c_beat), w_data.eq(c_data & data_mask),
                             w_strb.eq(c_strb)]
            with m.If(c_last):
                m.d.sync += flush_w.eq(1)
        with m.Elif(flush_w):
            with m.If(w_open & can_push):
                push_open_beat()
                m.d.sync += w_open.eq(0)
            with m.Elif(~w_open & wb_open & can_close):
                m.d.comb += close.eq(1)
                m.d.sync += [wb_open.eq(0), flush_w.eq(0)]
            with m.Elif(~w_open & ~wb_open):
                m.d.sync += flush_w.eq(0)

        # AW from the burst FIFO (nothing new once halted); W only for bursts whose address
        # has been issued
        awvalid = Signal()
        aw_go = awfifo.r_rdy & ~halt & (~awvalid | axi.awready)
        m.d.comb += [axi.awvalid.eq(awvalid), axi.awsize.eq(L), axi.awburst.eq(Burst.INCR),
                     axi.awcache.eq(0b0011), axi.bready.eq(1), awfifo.r_en.eq(aw_go)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += awvalid.eq(0)
        issued_bursts = Signal(range(64))     # bursts with AW issued and W not finished
        with m.If(aw_go):
            m.d.sync += [awvalid.eq(1), axi.awid.eq(DATA_ID), axi.awaddr.eq(awfifo.r_data[:aw]),
                         axi.awlen.eq(awfifo.r_data[aw:])]
        w_count = Signal(9)
        w_go = wlens.r_rdy & wfifo.r_rdy & (issued_bursts != 0)
        w_lastbeat = w_count == wlens.r_data - 1
        w_sent = w_go & axi.wready
        m.d.comb += [axi.wvalid.eq(w_go), axi.wdata.eq(wfifo.r_data[:self.data_width]),
                     axi.wstrb.eq(wfifo.r_data[self.data_width:]), axi.wlast.eq(w_lastbeat),
                     wfifo.r_en.eq(w_sent), wlens.r_en.eq(w_sent & w_lastbeat)]
        with m.If(w_sent):
            m.d.sync += w_count.eq(Mux(w_lastbeat, 0, w_count + 1))
        m.d.sync += issued_bursts.eq(issued_bursts + aw_go - (w_sent & w_lastbeat))
        pending_b = Signal(range(256))
        b_beat = axi.bvalid & axi.bready
        m.d.sync += pending_b.eq(pending_b + aw_go - b_beat)
        write_err = Signal()
        with m.If(b_beat & (axi.bresp != Resp.OKAY)):
            m.d.sync += write_err.eq(1)

        # counters
        bytes_read = Signal(32)
        bytes_written = Signal(32)
        cycles = Signal(32)
        ndone = Signal(24)
        with m.If(beat_mode):
            m.d.sync += [bytes_written.eq(bytes_written + beats(lambda u: u.written_bytes)),
                         bytes_read.eq(bytes_read + beats(lambda u: u.read_bytes))]
        with m.Elif(e_go):
            m.d.sync += bytes_written.eq(bytes_written + eb)
            with m.If(e_has):
                m.d.sync += bytes_read.eq(bytes_read + eb)
        with m.If((state != _State.IDLE) & (cycles != 0xFFFFFFFF)):
            m.d.sync += cycles.eq(cycles + 1)
        m.d.comb += [regs.bytes_read.value.r_data.eq(bytes_read),
                     regs.bytes_written.value.r_data.eq(bytes_written),
                     regs.cycles.value.r_data.eq(cycles),
                     regs.descriptors.value.r_data.eq(ndone)]

        # -- the sequencer --------------------------------------------------------------------
        done_set = Signal()
        err_set = Signal()
        irq_set = Signal()
        fetched = Signal(DESCRIPTOR_BYTES * 8)
        fetch_count = Signal(range(fetch_beats + 1))
        fetch_err = Signal()
        wrote_all = (~w_open & ~wb_open & ~flush_w & (awfifo.level == 0) &
                     (issued_bursts == 0) & (pending_b == 0) & ~awvalid & (wfifo.level == 0))
        reads_idle = (inflight == 0) & ~arvalid & ~open_

        def finish(code):
            m.d.sync += [error_code.eq(code), state.eq(_State.IDLE)]
            m.d.comb += [done_set.eq(1), err_set.eq(code != 0), dp_reset.eq(1)]

        def load_fields(words):
            """Latch a descriptor from (src, dst, next, pad, control, dims...) values."""
            s_, d_, n_, p_, c_, dims = words
            m.d.sync += [src.eq(s_), dst.eq(d_), nxt.eq(n_), pad.eq(p_), elog.eq(c_[0:2]),
                         ndims.eq(c_[2:5]), last_desc.eq(c_[8]), want_irq.eq(c_[9])]
            for k in range(MAX_DIMS):
                e_, v_, ss_, ds_ = dims[k]
                m.d.sync += [ext[k].eq(e_), val[k].eq(v_), sst[k].eq(ss_), dstr[k].eq(ds_)]

        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start_regs | start_chain):
                    m.d.sync += [index.eq(0), error_code.eq(0), chain.eq(start_chain),
                                 bytes_read.eq(0), bytes_written.eq(0), cycles.eq(0),
                                 ndone.eq(0), read_err.eq(0), write_err.eq(0), halt.eq(0),
                                 fetch_addr.eq(regs.chain_addr.value.data)]
                    with m.If(start_regs):
                        load_fields((
                            regs.src_addr.value.data, regs.dst_addr.value.data, 0,
                            Cat(regs.pad_lo.value.data, regs.pad_hi.value.data),
                            Cat(regs.control.element.data, regs.control.dims.data,
                                Const(0, 3), Const(1, 1), regs.control.irq.data),
                            [(getattr(regs, f"dim{k}_extent").value.data,
                              getattr(regs, f"dim{k}_valid").value.data,
                              getattr(regs, f"dim{k}_src_stride").value.data,
                              getattr(regs, f"dim{k}_dst_stride").value.data)
                             for k in range(MAX_DIMS)]))
                        m.d.sync += [state.eq(_State.CHECK), k_chk.eq(0), span.eq(0),
                                     src_top.eq(0), no_src.eq(0), first_dim_err.eq(0),
                                     nest_err.eq(0)]
                    with m.Else():
                        m.d.sync += [state.eq(_State.FETCH), fetch_count.eq(0),
                                     fetch_err.eq(0)]
            with m.Case(_State.FETCH):
                with m.If(fetch_addr[:7] != 0):
                    finish(Error.ALIGN)
                with m.Elif(fetch_addr[aw:] != 0):
                    finish(Error.RANGE)
                with m.Else():
                    started = Signal()
                    with m.If(~started & ~arvalid):
                        m.d.comb += fetch_go.eq(1)
                        m.d.sync += started.eq(1)
                    with m.If(r_beat & (axi.rid == FETCH_ID)):
                        m.d.sync += [fetched.eq(Cat(fetched[self.data_width:], axi.rdata)),
                                     fetch_count.eq(fetch_count + 1)]
                        with m.If(axi.rresp != Resp.OKAY):
                            m.d.sync += fetch_err.eq(1)
                    with m.If(fetch_count == fetch_beats):
                        m.d.sync += started.eq(0)
                        with m.If(fetch_err):
                            finish(Error.FETCH_ERROR)
                        with m.Else():
                            f = fetched
                            dims = [(f[320 + 128 * k:352 + 128 * k], f[352 + 128 * k:384 + 128 * k],
                                     f[384 + 128 * k:416 + 128 * k],
                                     f[416 + 128 * k:448 + 128 * k]) for k in range(MAX_DIMS)]
                            load_fields((f[0:64], f[64:128], f[128:192], f[192:256],
                                         f[256:288], dims))
                            m.d.sync += [state.eq(_State.CHECK), k_chk.eq(0), span.eq(0),
                                         src_top.eq(0), no_src.eq(0), first_dim_err.eq(0),
                                         nest_err.eq(0)]
            with m.Case(_State.CHECK):
                with m.If((k_chk < ndims) & (k_chk < MAX_DIMS)):
                    with m.If(first_dim_err == 0):
                        with m.If(cur_e == 0):
                            m.d.sync += first_dim_err.eq(Error.ZERO_EXTENT)
                        with m.Elif(cur_v > cur_e):
                            m.d.sync += first_dim_err.eq(Error.DIMS)
                    with m.If((cur_e > 1) & (cur_d < span + eb)):
                        m.d.sync += nest_err.eq(1)
                    with m.If(cur_e > 1):
                        m.d.sync += span.eq(span + p_dst)
                    with m.If(cur_v == 0):
                        m.d.sync += no_src.eq(1)
                    with m.Else():
                        m.d.sync += src_top.eq(src_top + p_src)
                    m.d.sync += k_chk.eq(k_chk + 1)
                with m.Else():
                    m.d.sync += state.eq(_State.VERDICT)
            with m.Case(_State.VERDICT):
                misaligned = Signal()
                for k in range(MAX_DIMS):
                    with m.If((k < ndims) & (((sst[k] | dstr[k]) & (eb - 1)) != 0)):
                        m.d.comb += misaligned.eq(1)
                with m.If(((src | dst) & (eb - 1)) != 0):
                    m.d.comb += misaligned.eq(1)
                s_end = Signal(72)
                d_end = Signal(72)
                m.d.comb += [s_end.eq(src + src_top + eb), d_end.eq(dst + span + eb)]
                top = 1 << aw
                with m.If((ndims == 0) | (ndims > MAX_DIMS)):
                    finish(Error.DIMS)
                with m.Elif(first_dim_err != 0):
                    finish(first_dim_err)
                with m.Elif(nest_err):
                    finish(Error.DIMS)
                with m.Elif(misaligned):
                    finish(Error.ALIGN)
                with m.Elif(~no_src & (s_end > top)):
                    finish(Error.RANGE)
                with m.Elif(d_end > top):
                    finish(Error.RANGE)
                with m.Elif(~no_src & (src < d_end) & (dst < s_end)):
                    finish(Error.OVERLAP)
                with m.Elif(row_fits):
                    m.d.comb += rows.start.eq(1)
                    m.d.sync += [state.eq(_State.RUN), row_mode.eq(1), tile_mode.eq(0)]
                with m.Elif(tile_fits):
                    m.d.comb += tile.start.eq(1)
                    m.d.sync += [state.eq(_State.RUN), row_mode.eq(0), tile_mode.eq(1)]
                with m.Else():
                    m.d.comb += walker.start.eq(1)
                    m.d.sync += [state.eq(_State.RUN), row_mode.eq(0), tile_mode.eq(0)]
            with m.Case(_State.RUN):
                with m.If(read_err | write_err):
                    m.d.sync += [halt.eq(1), state.eq(_State.DRAIN)]
                    m.d.comb += walker.stop.eq(1)
                with m.Elif(~walker.busy & ~tile.busy & ~rows.busy & (entries.level == 0) &
                            reads_idle & wrote_all):
                    m.d.sync += state.eq(_State.NEXT)
            with m.Case(_State.DRAIN):
                # halted: the issued bursts finish, reads in flight come back (and are dropped)
                with m.If((inflight == 0) & ~arvalid & (issued_bursts == 0) &
                          (pending_b == 0) & ~awvalid):
                    finish(Mux(read_err, Error.READ_ERROR, Error.WRITE_ERROR))
            with m.Case(_State.NEXT):
                m.d.sync += ndone.eq(ndone + 1)
                m.d.comb += [dp_reset.eq(1), irq_set.eq(want_irq)]
                with m.If(~chain | last_desc):
                    m.d.sync += [state.eq(_State.IDLE), error_code.eq(0)]
                    m.d.comb += done_set.eq(1)
                with m.Else():
                    m.d.sync += [index.eq(index + 1), fetch_addr.eq(nxt), state.eq(_State.FETCH),
                                 fetch_count.eq(0), fetch_err.eq(0)]
        with m.If(dp_reset):
            m.d.sync += [open_.eq(0), b_len.eq(0), credit.eq(self.read_fifo), inflight.eq(0),
                         w_open.eq(0), wb_open.eq(0), wb_len.eq(0),
                         flush_w.eq(0), w_count.eq(0), issued_bursts.eq(0), pending_b.eq(0),
                         halt.eq(0)]

        m.d.comb += [regs.status.done.set.eq(done_set), regs.status.error.set.eq(err_set),
                     regs.status.desc_irq.set.eq(irq_set),
                     self.irq.eq((regs.status.done.data[0] & regs.irq_enable.done.data[0]) |
                                 (regs.status.error.data[0] & regs.irq_enable.error.data[0]) |
                                 (regs.status.desc_irq.data[0] &
                                  regs.irq_enable.desc_irq.data[0]))]
        return m
