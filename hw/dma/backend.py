"""The DMA's back end: the AXI4 transport for the mid end's read requests and pieces, and the
front end's descriptor fetches.

Reads
    The mid end asks for runs of consecutive beats (:func:`~hw.dma.tile.request_layout`); a
    :class:`BeatGenerator` takes each apart, a beat a cycle, for the *read planner*, which keeps
    one burst open. A beat that follows the open burst's last beat joins it (up to ``max_burst``
    beats, never across 4 KiB); any other beat sends the open burst and opens the next. The open
    burst also goes when no request comes. A burst is issued only when the read FIFO has room
    for all its beats (a credit count), so several reads are in flight and R never waits. A
    descriptor fetch (``fetch_go``) is one burst of 128 bytes with its own ID, issued in the
    first cycle AR has free, between data bursts; its beats leave on ``fetch_beat`` instead of
    the read FIFO. ``fetch_addr`` holds still until they are in, and the next ``fetch_go`` comes
    after them. Built with ``fetch=False`` (an engine without chains) it has neither the fetch
    nor its ports.
Writes
    The *write combiner* merges pieces that fall in the open beat (byte strobes OR'ed) and
    collects consecutive beats into a burst (up to ``max_burst``, never across 4 KiB). A
    burst's address is queued once all its beats are in the W FIFO, so W never waits. Its two
    tests (a piece in the same beat as the one before it; a beat that continues the open burst)
    are worked out a cycle ahead, as a piece enters the intake register and as a beat opens,
    so the push into the W FIFO is decided from registers.
Errors
    A read or write error response raises ``read_err`` / ``write_err`` and *halts* the back
    end from the next cycle until the front end's ``dp_reset``: no new address is issued and
    nothing new is accepted; bursts already issued complete and reads in flight drain
    (``drained``). The halt is the back end's own register, beside the logic it stops (the
    front end, which learns of the error a cycle later, is placed apart).

Jobs
    The mid end marks the first request of each job (``first``), and its paths mark each
    job's last piece (``last``). The write combiner closes the burst that holds a last piece
    before it takes the next job's first piece, and queues it as the job's *end burst*: once
    that burst is answered, every write of the job is, and ``job_done`` pulses. No address is
    issued after an end burst until its response has come and ``defer`` is low (the front end
    raises it while the job before still runs): the next job's writes wait for the job before
    it to end, so an error response always belongs to the oldest job that runs. The read
    planner counts the beats in flight when a job's first request goes out (they are the job
    before it's): a read error on one of them is the job before's (``read_old``). A read error
    of the newer job while ``defer`` is high stops the reads at once but lets the writes of the
    job before it finish; the halt follows once ``defer`` falls.

``idle``: no read or write in flight or buffered (the end of a descriptor).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES

from ..bus.axi import AXI4Signature, Burst, Resp
from ..bus.fifo import BufferedFIFO, chosen_sum, holds_entries, register_slice, registered_room
from .tile import byte_bits, piece_layout, request_layout
from .timing import DmaTiming

DATA_ID = 0
FETCH_ID = 1


def job_request_layout(addr_width: int, data_width: int) -> data.StructLayout:
    """A read request as the mid end hands it to the back end: a path's run of beats
    (:func:`~hw.dma.tile.request_layout`) and whether it is its job's first."""
    run = request_layout(addr_width, data_width)
    return data.StructLayout({**{name: field.shape for name, field in run}, "first": 1})


class BeatGenerator(wiring.Component):
    """Runs of beats in (``runs``: :func:`job_request_layout`), each of their beats out
    (``beats``: its address, and ``first`` on the first beat of a job's first run), one a
    cycle: a run is taken as the last beat of the one before it leaves. ``busy``: a run is
    being taken apart. Parameters: ``addr_width``, ``data_width``."""

    def __init__(self, *, addr_width, data_width):
        self.bus_bytes = data_width // 8
        beat = data.StructLayout({"addr": addr_width, "first": 1})
        super().__init__({"runs": In(stream.Signature(job_request_layout(addr_width,
                                                                         data_width))),
                          "beats": Out(stream.Signature(beat)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        LB = (self.bus_bytes - 1).bit_length()
        runs, beats = self.runs, self.beats
        beat = Signal.like(runs.payload.beat)
        left = Signal.like(runs.payload.n)
        # left == 1, as a register set as `left` loads and steps: the wide compare is not on
        # the path from the beats' ready into the runs' ready
        one_left = Signal()
        first = Signal()
        m.d.comb += [beats.payload.addr.eq(Cat(Const(0, LB), beat)),
                     beats.payload.first.eq(first), self.busy.eq(beats.valid),
                     runs.ready.eq(~beats.valid | (beats.ready & one_left))]
        with m.If(beats.valid & beats.ready):
            m.d.sync += [beat.eq(beat + 1), left.eq(left - 1), one_left.eq(left == 2),
                         first.eq(0)]
            with m.If(one_left):
                m.d.sync += beats.valid.eq(0)
        with m.If(runs.valid & runs.ready):
            m.d.sync += [beats.valid.eq(1), beat.eq(runs.payload.beat), left.eq(runs.payload.n),
                         one_left.eq(runs.payload.n == 1), first.eq(runs.payload.first)]
        return m


class BackEnd(wiring.Component):
    """Parameters: ``data_width``, ``addr_width``, ``id_width`` (AXI IDs), ``max_burst`` (beats
    of the longest burst), ``read_fifo`` (beats of read data buffered: bounds the reads in
    flight), ``fetch`` (the descriptor fetch and its ports), ``timing``
    (:class:`~.timing.DmaTiming`: its ``late_credit``)."""

    def __init__(self, *, data_width=64, addr_width=32, id_width=4, max_burst=16,
                 read_fifo=64, fetch=True, timing=DmaTiming()):
        timing.check()
        self.fetch = fetch
        self.timing = timing
        self.data_width = data_width
        self.addr_width = addr_width
        self.max_burst = max_burst
        self.read_fifo = read_fifo
        aw = addr_width
        super().__init__({
            # (32 address bits on the bus whatever `addr_width`: the bits above it are 0)
            "m_axi": Out(AXI4Signature(addr_width=32, data_width=data_width,
                                       id_width=id_width)),
            "req": In(stream.Signature(job_request_layout(aw, data_width))),
            "rdata": Out(stream.Signature(data_width)),
            "wr": In(stream.Signature(piece_layout(aw, data_width))),
            **({"fetch_addr": In(aw), "fetch_go": In(1),
                "fetch_beat": Out(stream.Signature(data_width + 1, always_ready=True))}
               if fetch else {}),
            "read_err": Out(1), "write_err": Out(1), "idle": Out(1), "drained": Out(1),
            "read_old": Out(1), "job_done": Out(1), "defer": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        BB = W // 8
        aw = self.addr_width
        # an error response was seen: issue and accept nothing new (set with read_err or
        # write_err; the front end's dp_reset clears all three)
        halt = Signal()
        # halt | read_err, as a register of its own: what stops the reads (see the planner)
        stop = Signal()
        mb = self.max_burst

        rfifo = m.submodules.rfifo = BufferedFIFO(width=W, depth=self.read_fifo)
        wfifo = m.submodules.wfifo = BufferedFIFO(width=W + BB, depth=2 * mb)
        # each burst's address, length - 1 and whether it is its job's end burst
        awfifo = m.submodules.awfifo = BufferedFIFO(width=aw + 10, depth=8)
        # each burst's length - 1, and whether that is 0 (its first beat is its last)
        wlens = m.submodules.wlens = BufferedFIFO(width=10, depth=8)

        reads_idle, reads_quiet = self._read_planner(m, halt, stop, rfifo)
        writes_idle, writes_quiet = self._write_combiner(m, halt, stop, wfifo, awfifo, wlens)
        m.d.comb += [self.idle.eq(writes_idle & reads_idle),
                     self.drained.eq(reads_quiet & writes_quiet)]
        return m

    def _sizes(self):
        """(bus bits, bus bytes, log2 of them, address bits, longest burst)"""
        BB = self.data_width // 8
        return (self.data_width, BB, (BB - 1).bit_length(), self.addr_width, self.max_burst)

    def _read_planner(self, m, halt, stop, rfifo):
        """The reads (see the module's docstring): requests into bursts on AR, R into the read
        FIFO or, for a descriptor fetch, out on ``fetch_beat``. Returns (no read in flight or
        waiting, no read in flight)."""
        W, BB, LB, aw, mb = self._sizes()
        axi = self.m_axi
        # -- read planner -----------------------------------------------------------------------
        open_ = Signal()
        b_start = Signal(aw)                  # address of the burst's first beat
        b_len = Signal(range(mb + 1))
        b_room = Signal()                     # b_len < max_burst
        credit = Signal(range(self.read_fifo + 1), init=self.read_fifo)
        inflight = Signal(range(self.read_fifo + 1))
        arvalid = Signal()
        ar_free = ~arvalid | axi.arready
        # a request first waits in the intake register, which knows whether it follows the
        # request before it (every request joins the open burst or opens the next, so the one
        # before it is the open burst's last beat) and whether it starts a 4 KiB page: the
        # tests the planner makes on it are registers
        i_valid = Signal()
        beat = Signal(aw)
        i_first = Signal()                    # the beat is its job's first
        i_next = Signal(aw)                   # the beat after the request before it
        i_follows = Signal()
        i_page = Signal()                     # the beat starts a 4 KiB page
        take = Signal()                       # the planner takes the intake's request
        gen = m.submodules.beats = BeatGenerator(addr_width=aw, data_width=W)
        wiring.connect(m, wiring.flipped(self.req), gen.runs)
        req = gen.beats
        m.d.comb += req.ready.eq(~i_valid | take)
        with m.If(req.valid & req.ready):
            addr = req.payload.addr
            # (a job's first beat never follows: it opens a burst of its own, so the job
            # before's beats are all in flight as it goes)
            m.d.sync += [i_valid.eq(1), beat.eq(addr), i_next.eq(addr + BB),
                         i_first.eq(req.payload.first),
                         i_follows.eq((addr == i_next) & ~req.payload.first),
                         i_page.eq(addr[:12] == 0)]
        with m.Elif(take):
            m.d.sync += i_valid.eq(0)
        # the tests on the open burst are registers too, set as it grows
        cont = open_ & i_follows & b_room & ~i_page
        # whether the read FIFO has room for the open burst (credit >= b_len) is a register,
        # set from this cycle's registers for the burst the next cycle holds: it grows by one
        # (credit > b_len), goes out as the next opens (credit - b_len >= 1: the same test),
        # opens with none out (credit >= 1) or stays (credit >= b_len). This cycle's pop is
        # left out, so the flag is late by a cycle after a pop but never set without room
        covers = Signal()
        # a read error stops the reads at once, even one whose halt is deferred (see `defer`):
        # nothing more is asked for or taken into the read FIFO. The beats already in it still
        # go out until the halt (those of the job before, then the newer job's, whose writes
        # are held back)
        can_issue = ar_free & covers & ~stop
        m.d.comb += take.eq(i_valid & ~stop & (~open_ | cont | can_issue))
        m.d.sync += covers.eq(Mux(take, Mux(open_, credit > b_len, credit != 0),
                                  credit >= b_len))
        issue = Signal()                      # the open burst (b_start, b_len) goes out
        with m.If(take):
            with m.If(cont):
                m.d.sync += [b_len.eq(b_len + 1), b_room.eq(b_len < mb - 1)]
            with m.Else():
                m.d.comb += issue.eq(open_)
                m.d.sync += [open_.eq(1), b_start.eq(beat), b_len.eq(1), b_room.eq(mb > 1)]
        with m.Elif(open_ & ~i_valid & can_issue):
            m.d.comb += issue.eq(1)
            m.d.sync += open_.eq(0)

        fetch_beats = DESCRIPTOR_BYTES // BB
        m.d.comb += [axi.arvalid.eq(arvalid), axi.arsize.eq(LB), axi.arburst.eq(Burst.INCR),
                     axi.arcache.eq(0b0011), axi.rready.eq(1)]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += arvalid.eq(0)
        # a descriptor fetch waits for a cycle in which AR is free and no data burst goes out
        # (data reads come first: a burst goes out at most once per beat it holds, so the
        # fetch is never kept waiting long). It is not stopped by a halt: the front end waits
        # for its beats, and a reset never comes while it is in flight
        with m.If(issue):
            m.d.sync += [arvalid.eq(1), axi.arid.eq(DATA_ID), axi.araddr.eq(b_start),
                         axi.arlen.eq(b_len - 1)]
        r_beat = axi.rvalid & axi.rready
        r_data = r_beat & (axi.rid == DATA_ID)
        if self.fetch:
            fetch_wait = Signal()
            with m.If(self.fetch_go):
                m.d.sync += fetch_wait.eq(1)
            with m.Elif(~issue & fetch_wait & ar_free):
                m.d.sync += [arvalid.eq(1), axi.arid.eq(FETCH_ID),
                             axi.araddr.eq(self.fetch_addr), axi.arlen.eq(fetch_beats - 1),
                             fetch_wait.eq(0)]
            m.d.comb += [self.fetch_beat.valid.eq(r_beat & (axi.rid == FETCH_ID)),
                         self.fetch_beat.payload.eq(Cat(axi.rdata, axi.rresp != Resp.OKAY))]
        m.d.comb += [rfifo.w_en.eq(r_data & ~stop), rfifo.w_data.eq(axi.rdata),
                     self.rdata.valid.eq(rfifo.r_rdy & ~halt),
                     self.rdata.payload.eq(rfifo.r_data),
                     rfifo.r_en.eq(self.rdata.ready & ~halt)]
        popped = rfifo.r_en & rfifo.r_rdy
        if self.timing.late_credit:
            popped_q = Signal()
            m.d.sync += popped_q.eq(popped)
            popped = popped_q
        # the counts with and without the open burst going out, both from registers (kept
        # apart, so `issue` chooses between finished sums instead of feeding an adder)
        inflight_next = chosen_sum(m, "inflight_out", issue,
                                   (inflight + b_len - r_data)[:len(inflight)],
                                   (inflight - r_data)[:len(inflight)])
        m.d.sync += [
            credit.eq(chosen_sum(m, "credit_out", issue, (credit - b_len + popped)[:len(credit)],
                                 (credit + popped)[:len(credit)])),
            inflight.eq(inflight_next)]
        # the beats still to come back from the job before the newest one: those in flight as
        # the newest job's first beat was taken (its open burst goes out with it)
        old_left = Signal.like(inflight)
        with m.If(take & i_first):
            m.d.sync += old_left.eq(inflight_next)
        with m.Elif(r_data & (old_left != 0)):
            m.d.sync += old_left.eq(old_left - 1)
        # a read error halts everything at once, unless it is the newer job's and the job before
        # still runs (`defer`): then that job's writes go on, and the halt waits until it has
        # ended (only new reads stop: `stop`)
        with m.If(r_data & (axi.rresp != Resp.OKAY) & ~self.read_err):
            m.d.sync += [self.read_err.eq(1), self.read_old.eq(old_left != 0), stop.eq(1)]
            with m.If((old_left != 0) | ~self.defer):
                m.d.sync += halt.eq(1)
        with m.If(self.read_err & ~self.defer):
            m.d.sync += halt.eq(1)
        quiet = (inflight == 0) & ~arvalid
        return quiet & ~gen.busy & ~open_ & ~i_valid, quiet

    def _write_combiner(self, m, halt, stop, wfifo, awfifo, wlens):
        """The writes (see the module's docstring): pieces into beats and bursts, AW and W from
        their FIFOs, B counted. Returns (no write in flight or waiting, no burst in flight)."""
        W, BB, LB, aw, mb = self._sizes()
        axi = self.m_axi
        # -- write combiner: one open beat, one open burst (its beats go to the W FIFO) -------
        # A piece first waits in the intake register, which knows whether it falls in the same
        # beat as the piece before it; the open beat knows whether it continues the open burst.
        # Both tests are worked out as their registers load, so the decision to push a beat
        # into the W FIFO comes from registers alone.
        piece = self.wr.payload
        s_valid = Signal()
        # the intake keeps the last piece it took (``last`` set at first: there was none), so
        # the next piece is compared with it
        s = Signal.like(piece, name="s_piece", init={"last": 1})
        s_same = Signal()                     # same beat as the piece before it in the stream

        w_open = Signal()
        w_addr = Signal(aw)                   # the open beat's address
        w_succ = Signal(aw)                   # ... and the beat's after it
        w_data = Signal(W)
        w_strb = Signal(BB)
        w_cont = Signal()                     # the open beat, pushed, extends the open burst
        wb_open = Signal()
        wb_start = Signal(aw)
        wb_len = Signal(range(mb + 1))
        wb_next = Signal(aw)                  # the address after the open burst's last beat
        data_mask = Signal(W)
        m.d.comb += data_mask.eq(byte_bits(s.strb))
        # room in the three FIFOs as one register: each had two free entries a cycle ago,
        # besides the one a write decided then takes (a FIFO takes at most one entry a cycle,
        # and the writes reach them through registers, a cycle after they are decided), so the
        # decision to push or close does not wait on their levels. Pushing a beat waits for
        # room in all three, not only in the W FIFO, whether or not it closes a burst: the
        # decision is then a few gates from registers (the burst FIFOs fill first only when
        # bursts are a beat or two long, and then nearly every push closes one anyway)
        can_push = can_close = registered_room(m, "fifo_room", awfifo, wlens, wfifo)
        flush = Signal()                      # the last piece is in: push and close what is open
        # a job's first piece waits until the job before's last burst is closed: that burst is
        # then the job's end burst, and holds nothing of the next job. The intake takes nothing
        # from a job's last piece on until the flush is over (`hold`), so the decision to take
        # the intake's piece needs no test of the flush
        hold = Signal()
        load = Signal()                       # the open beat takes the intake's piece
        go = Signal()                         # ... and nothing halts it
        m.d.comb += [load.eq(s_valid & (s_same | ~w_open | can_push)),
                     go.eq(load & ~halt),
                     self.wr.ready.eq((~s_valid | go) & ~halt & ~hold)]
        with m.If(self.wr.valid & self.wr.ready):
            m.d.sync += [s_valid.eq(1), s.eq(piece), hold.eq(piece.last),
                         s_same.eq(~s.last & (piece.addr == s.addr))]
        with m.Elif(go):
            m.d.sync += s_valid.eq(0)

        push = Signal()
        close = Signal()
        push_r = Signal()
        close_r = Signal()
        m.d.sync += [push_r.eq(push), close_r.eq(close)]
        # the FIFOs' inputs follow the open beat and burst in every cycle, with no enable: a push or
        # close reaches its FIFO a cycle later (push_r, close_r), with what the beat and burst held
        # when it was decided.
        wb_len_m1 = Signal(9)
        end_close = Signal()                  # the burst closed is its job's end burst
        m.d.comb += wb_len_m1.eq(wb_len - 1)
        m.d.sync += [wfifo.w_data.eq(Cat(w_data, w_strb)),
                     awfifo.w_data.eq(Cat(wb_start, wb_len_m1, end_close)),
                     wlens.w_data.eq(Cat(wb_len_m1, wb_len == 1))]
        m.d.comb += [wfifo.w_en.eq(push_r), awfifo.w_en.eq(close_r), wlens.w_en.eq(close_r)]

        def push_open_beat():
            """The open beat goes to the W FIFO: it extends the open burst, or closes it and
            starts the next."""
            m.d.comb += push.eq(1)
            m.d.sync += wb_next.eq(w_succ)
            with m.If(w_cont):
                m.d.sync += wb_len.eq(wb_len + 1)
            with m.Else():
                m.d.comb += close.eq(wb_open)
                m.d.sync += [wb_open.eq(1), wb_start.eq(w_addr), wb_len.eq(1)]

        # the open beat's data, strobes and address load as ``go`` less its ``~halt``: a few gates
        # of registers in front of their ~170 clock enables. Once halted they may change, but
        # nothing issued reads them: no burst is closed or addressed after the halt
        with m.If(load):
            with m.If(s_same):
                m.d.sync += [w_data.eq((w_data & ~data_mask) | (s.data & data_mask)),
                             w_strb.eq(w_strb | s.strb)]
            with m.Else():
                # the burst as it stands once the open beat has been pushed (if there is one)
                burst_open = w_open | wb_open
                burst_next = Mux(w_open, w_succ, wb_next)
                room = Mux(w_open, Mux(w_cont, wb_len < mb - 1, mb > 1), wb_len < mb)
                m.d.sync += [w_addr.eq(s.addr), w_succ.eq(s.addr + BB),
                             w_cont.eq(burst_open & (s.addr == burst_next) & room &
                                       (s.addr[:12] != 0)),
                             w_data.eq(s.data & data_mask), w_strb.eq(s.strb)]
        with m.If(go):
            with m.If(~s_same):
                with m.If(w_open):
                    push_open_beat()
                m.d.sync += w_open.eq(1)
            with m.If(s.last):
                m.d.sync += flush.eq(1)
        with m.Elif(flush):
            with m.If(w_open & can_push):
                push_open_beat()
                m.d.sync += w_open.eq(0)
            with m.Elif(~w_open & wb_open & can_close):
                # (the open beat, pushed above, held the last piece: this burst holds it now)
                m.d.comb += [close.eq(1), end_close.eq(1)]
                m.d.sync += [wb_open.eq(0), flush.eq(0), hold.eq(0)]
            with m.Elif(~w_open & ~wb_open):
                m.d.sync += [flush.eq(0), hold.eq(0)]

        # AW from the burst FIFO (nothing new once halted); W only for bursts whose address
        # has been issued
        awvalid = Signal()
        # an end burst issued holds back the next address until it is answered and the job
        # before has ended (`defer` low), with no read error waiting to halt
        aw_hold = Signal()
        end_out = Signal()                    # an end burst issued, not yet answered
        aw_go = awfifo.r_rdy & ~halt & (~awvalid | axi.awready) & ~aw_hold
        m.d.comb += [axi.awvalid.eq(awvalid), axi.awsize.eq(LB), axi.awburst.eq(Burst.INCR),
                     axi.awcache.eq(0b0011), axi.bready.eq(1), awfifo.r_en.eq(aw_go)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += awvalid.eq(0)
        issued_bursts = Signal(range(64))     # bursts with AW issued and W not finished
        with m.If(aw_go):
            m.d.sync += [awvalid.eq(1), axi.awid.eq(DATA_ID), axi.awaddr.eq(awfifo.r_data[:aw]),
                         axi.awlen.eq(awfifo.r_data[aw:aw + 8])]
            with m.If(awfifo.r_data[aw + 9]):
                m.d.sync += [aw_hold.eq(1), end_out.eq(1)]
        # W: whether a beat is its burst's last, and whether any burst has its address issued,
        # are registers (the first beat's test comes with its length), so W's handshake does
        # not wait on compares
        w_count = Signal(9)
        w_first = Signal(init=1)              # the next beat is its burst's first
        w_last_reg = Signal()                 # (after the first) the next beat is the last
        bursts_issued = Signal()              # issued_bursts != 0
        w_go = wlens.r_rdy & wfifo.r_rdy & bursts_issued
        w_lastbeat = Mux(w_first, wlens.r_data[9], w_last_reg)
        # W leaves through a register slice, so the bus's WREADY (late, from the arbiter's W order)
        # does not reach the W FIFO's output register and its read, which would make one long path
        # across the SoC. A beat in the slice belongs to a burst whose address is out and whose
        # response has not come, so `idle` and `drained` (pending_b) still cover it.
        w_rdy = Signal()
        w_sent = w_go & w_rdy
        register_slice(m, "w", valid=w_go, ready=w_rdy, payload=Cat(wfifo.r_data, w_lastbeat),
                       out_valid=axi.wvalid, out_ready=axi.wready,
                       out_payload=Cat(axi.wdata, axi.wstrb, axi.wlast))
        m.d.comb += [wfifo.r_en.eq(w_sent), wlens.r_en.eq(w_sent & w_lastbeat)]
        with m.If(w_sent):
            m.d.sync += [w_count.eq(Mux(w_lastbeat, 0, w_count + 1)), w_first.eq(w_lastbeat),
                         w_last_reg.eq(w_count + 1 == wlens.r_data[:9])]
        # bursts_issued's next value from compares of the count itself, with the late handshakes
        # (AWREADY into aw_go, WREADY into w_sent) only selecting among them: the count's add and a
        # zero test after them would be too long a path, the longer behind the arbiter's grant
        inc = aw_go
        dec = w_sent & w_lastbeat
        m.d.sync += [issued_bursts.eq(issued_bursts + inc - dec),
                     bursts_issued.eq(Mux(inc & ~dec, 1,
                                          Mux(~inc & dec, issued_bursts != 1, bursts_issued)))]
        pending_b = Signal(range(256))
        b_beat = axi.bvalid & axi.bready
        m.d.sync += [pending_b.eq(pending_b + aw_go - b_beat), self.job_done.eq(0)]
        # no address goes out behind an end burst, so it is answered once nothing is pending
        with m.If(end_out & (pending_b == 0)):
            m.d.sync += [end_out.eq(0), self.job_done.eq(1)]
        with m.Elif(aw_hold & ~end_out & ~self.defer & ~self.read_err):
            m.d.sync += aw_hold.eq(0)
        with m.If(b_beat & (axi.bresp != Resp.OKAY)):
            m.d.sync += [self.write_err.eq(1), halt.eq(1), stop.eq(1)]
        quiet = (issued_bursts == 0) & (pending_b == 0) & ~awvalid
        writes_idle = (~s_valid & ~w_open & ~wb_open & ~flush & ~push_r & ~close_r &
                       ~holds_entries(m, "aw_held", awfifo) & quiet &
                       ~holds_entries(m, "w_held", wfifo))
        return writes_idle, quiet
