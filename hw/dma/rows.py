"""The DMA's row path: descriptors whose innermost dimension is contiguous on both sides move
a beat per cycle, whatever the element size and however source and destination sit in their
beats.

Each index of the outer dimensions (1 to 4) is a *run*: ``extent[0] * element bytes``
contiguous bytes in the destination, the first ``valid[0] * element bytes`` of them contiguous
in the source (the rest, and whole runs outside an outer ``valid``, are pad). A
:class:`~hw.dma.walker.Walker` steps through the runs; the *beat generator* asks for each run's
source beats (one request for the run) and queues the run; the *realigner* turns source beats
into destination beats: a funnel shift over the previous and the current beat by the difference
of the two offsets in their beats, pad bytes past the source, byte strobes on the run's first
and last beat.

Ports are those of :class:`~hw.dma.tile.TileTransposer` (``req``, ``rdata``, ``wr``,
``read_bytes``, ``written_bytes``, ``start``, ``busy``) with five dimensions, dimension 0 being
the run.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring

from ..bus.fifo import RegisteredQueue, SkidBuffer
from ..fabric import register_copies
from .tile import (
    byte_bits,
    count_width,
    low_bytes,
    pad_pattern,
    path_ports,
    piece_layout,
)
from .timing import DmaTiming
from .walker import Walker

DIMS = 5


def _shares(steps, bits):
    """``steps`` (pairs of a register and its next value) in consecutive shares of about
    ``bits`` flip-flops, whole registers each (a wider register is a share of its own)."""
    shares, held = [[]], 0
    for reg, value in steps:
        if shares[-1] and held + len(reg) > bits:
            shares.append([])
            held = 0
        shares[-1].append((reg, value))
        held += len(reg)
    return shares


class _BeatMath:
    """The row path's beat arithmetic on a bus of ``BB`` bytes (log2 ``LB``), adding its logic
    to ``m``: byte counts clamped to a beat and the realigner's tests, each without the
    subtract a direct form would put in front of its compare."""

    def __init__(self, m, BB):
        self.m = m
        self.BB = BB
        self.LB = (BB - 1).bit_length()

    def clamp(self, x):
        """x (signed, or unsigned when ``x.shape()`` says so) limited to 0..BB: the bytes
        of a beat below it."""
        out = Signal(range(self.BB + 1))
        neg = x[-1] if x.shape().signed else 0
        top = x[self.LB:-1] if x.shape().signed else x[self.LB:]
        self.m.d.comb += out.eq(Mux(neg, 0, Mux(top.any(), self.BB, x[:self.LB])))
        return out

    def magnitude(self, x):
        """x's sign (0 for an unsigned x) and its other bits."""
        return (x[-1], x[:-1]) if x.shape().signed else (Const(0, 1), x)

    def clamp_flags(self, under, over, x):
        """clamp(x - BB) from its two tests (x < BB, x >= 2 BB): the bytes below BB, x's low
        bits, stay as they are."""
        return Mux(under, 0, Mux(over, self.BB, x[:self.LB]))

    def clamp_after(self, x):
        """clamp(x - BB), without the subtract."""
        out = Signal(range(self.BB + 1))
        neg, mag = self.magnitude(x)
        under = neg | (mag[self.LB:] == 0)            # x < BB
        over = ~neg & (mag[self.LB + 1:] != 0)        # x >= 2 BB
        self.m.d.comb += out.eq(self.clamp_flags(under, over, x))
        return out

    def takes_after(self, u, lead):
        """takes_source(u - 1, lead), without the subtract."""
        neg, mag = self.magnitude(u)
        ge1 = ~neg & (mag != 0)
        ge3 = ~neg & ((mag[2:] != 0) | (mag[:2] == 3))
        return ge1 & (ge3 | (~u[0] & ~lead))

    def low(self, n):
        """The bytes of a beat below byte ``n``, as a mask."""
        return low_bytes(self.m, n, self.BB)

    def takes_source(self, u, lead):
        """Whether an output beat takes a source beat: ``u`` (source beats from this output
        beat on, signed or not) is more than ``lead``."""
        neg = u[-1] if u.shape().signed else 0
        top = u[1:-1] if u.shape().signed else u[1:]
        return ~neg & (top.any() | (u[0] & ~lead))


class RowCopier(wiring.Component):
    """The row path. Parameters: ``data_width``, ``addr_width``, ``run_queue`` (runs waiting
    for their data, at least 2), ``timing`` (:class:`~.timing.DmaTiming`: its
    ``bits_per_ready``)."""

    def __init__(self, *, data_width=64, addr_width=32, run_queue=64, timing=DmaTiming()):
        if run_queue < 2:
            raise ValueError(f"run_queue must be at least 2, not {run_queue!r}")
        timing.check()
        self.timing = timing
        self.data_width = data_width
        self.addr_width = addr_width
        self.run_queue = run_queue
        aw = addr_width
        self._walker = Walker(levels=DIMS - 1, addr_width=aw, count_width=count_width(aw),
                              ready_ahead=True)
        super().__init__(path_ports(data_width=data_width, addr_width=aw, dims=DIMS))

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        BB = W // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        walker = m.submodules.walker = self._walker
        for k in range(1, DIMS):
            m.d.comb += [walker.extent[k - 1].eq(self.ext[k]), walker.valid[k - 1].eq(self.val[k]),
                         walker.src_stride[k - 1].eq(self.sst[k]),
                         walker.dst_stride[k - 1].eq(self.dstr[k])]
        m.d.comb += [walker.src_base.eq(self.src), walker.dst_base.eq(self.dst),
                     walker.start.eq(self.start)]

        bm = _BeatMath(m, BB)
        clamp, clamp_after = bm.clamp, bm.clamp_after
        takes_after, takes_source, low = bm.takes_after, bm.takes_source, bm.low

        # -- beat generator ---------------------------------------------------------------------
        # the job's run lengths in bytes, constant while it runs (registered: the walker's first
        # step leaves a cycle after start at the earliest)
        total = Signal(35)                    # bytes of every run
        vfull = Signal(35)                    # bytes of a run that has a source
        vzero = Signal()                      # valid[0] is 0: every run is pad
        m.d.sync += [total.eq(self.ext[0] << self.elog), vfull.eq(self.val[0] << self.elog),
                     vzero.eq(self.val[0] == 0)]
        run = walker.o.payload
        sourced = run.has_src & ~vzero
        s_off = run.src[:LB]
        d_off = run.dst[:LB]
        nbeats = Signal(33)
        m.d.comb += nbeats.eq(Mux(sourced, (s_off + vfull + BB - 1) >> LB, 0))
        # byte 0 of the run's first destination beat is byte -d_off of the run: the source and the
        # run end d_off bytes later in that count.
        src_end = Signal(36)
        run_end = Signal(36)
        m.d.comb += [src_end.eq(Mux(sourced, vfull + d_off, d_off)), run_end.eq(total + d_off)]
        delta = Signal(signed(LB + 2))
        m.d.comb += delta.eq(s_off - d_off)
        lead = delta > 0                      # output k needs source beats k and k + 1
        shift = Signal(LB + 1)                # funnel shift in bytes, 1 to BB
        m.d.comb += shift.eq(Mux(lead, delta, delta + BB))
        # the run's sums go through a register slice; the tests of its first output beat are
        # worked out from them on the other side, so no sum and test lie in one cycle
        summed = data.StructLayout({"lead": 1, "shift": LB + 1, "d_beat": aw - LB, "d_off": LB,
                                    "s_beat": aw - LB, "nbeats": 33, "src_end": 36,
                                    "run_end": 36, "sourced": 1, "last": 1})
        sums = stream.Signature(summed).create()
        m.d.comb += [sums.valid.eq(walker.o.valid), walker.o.ready.eq(sums.ready),
                     sums.payload.lead.eq(lead), sums.payload.shift.eq(shift),
                     sums.payload.d_beat.eq(run.dst[LB:]), sums.payload.d_off.eq(d_off),
                     sums.payload.s_beat.eq(run.src[LB:]), sums.payload.nbeats.eq(nbeats),
                     sums.payload.src_end.eq(src_end), sums.payload.run_end.eq(run_end),
                     sums.payload.sourced.eq(sourced), sums.payload.last.eq(run.last)]
        sums_slice = m.submodules.sums_slice = SkidBuffer(summed)
        wiring.connect(m, sums, sums_slice.i)
        r = sums_slice.o
        m.d.comb += walker.ready_next.eq(sums_slice.ahead.i_ready)
        run = r.payload
        nout = (run.run_end + BB - 1) >> LB
        # a queued run: what the realigner needs of it, worked out here, with the tests of its
        # first and second output beats (the realigner keeps them in registers for the beats
        # after that)
        entry = data.StructLayout({"lead": 1, "shift": LB + 1, "d_beat": aw - LB,
                                   "nbeats": 33, "nout": 33, "src_end": 36, "run_end": 36,
                                   "sourced": 1, "last": 1,
                                   "takes": 1, "one": 1, "src_mask": BB, "strb": BB,
                                   "takes2": 1, "one2": 1, "src_mask2": BB, "strb2": BB})
        # the queue's head loads on the realigner's last beat of a run, a late decision that reaches
        # all ~250 bits of the entry: on a global network where there is one
        runs = m.submodules.runs = RegisteredQueue(entry, depth=self.run_queue,
                                                   global_load="dma_runs_load")
        # a run with a source asks for its beats through a register slice, so queueing the run
        # does not wait on the read requests' ready
        gen = m.submodules.gen_slice = SkidBuffer(self.req.payload.shape())
        gen_in = gen.i
        wiring.connect(m, gen.o, wiring.flipped(self.req))
        take = r.valid & runs.i.ready & gen_in.ready
        m.d.comb += [gen_in.valid.eq(take & run.sourced), gen_in.payload.beat.eq(run.s_beat),
                     # (a run lies inside the address space: its count fits the request's)
                     gen_in.payload.n.eq(run.nbeats[:len(gen_in.payload.n)])]
        queued = runs.i.payload
        m.d.comb += [queued.takes.eq(takes_source(run.nbeats, run.lead)),
                     queued.one.eq(nout == 1),
                     queued.src_mask.eq(low(clamp(run.src_end))),
                     queued.strb.eq(low(clamp(run.run_end)) & ~low(run.d_off)),
                     queued.takes2.eq(takes_after(run.nbeats, run.lead)),
                     queued.one2.eq(nout == 2),
                     queued.src_mask2.eq(low(clamp_after(run.src_end))),
                     queued.strb2.eq(low(clamp_after(run.run_end)))]
        m.d.comb += [r.ready.eq(take), runs.i.valid.eq(take),
                     queued.lead.eq(run.lead), queued.shift.eq(run.shift),
                     queued.d_beat.eq(run.d_beat), queued.nbeats.eq(run.nbeats),
                     queued.nout.eq(nout), queued.src_end.eq(run.src_end),
                     queued.run_end.eq(run.run_end), queued.sourced.eq(run.sourced),
                     queued.last.eq(run.last)]

        ran, counting, wr_slice = self._realigner(m, platform, bm, runs, vfull, total)
        m.d.comb += self.busy.eq(walker.busy | sums_slice.o.valid | gen.o.valid |
                                 runs.nonempty | ran | counting |
                                 wr_slice.o.valid)
        return m

    def _realigner(self, m, platform, bm, runs, vfull, total):
        """The realigner: source beats in from ``rdata``, destination beats out to ``wr``, a
        run at a time from the head of ``runs``; a run's byte counts from ``vfull`` and ``total``
        (:meth:`elaborate`'s run lengths). Returns the registers that keep the job busy after
        its last beat (``ran``, ``counting``) and the output slice."""
        W = self.data_width
        BB = W // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        clamp_flags, low = bm.clamp_flags, bm.low
        # the queue's head (a register: see hw.bus.fifo)
        fields = runs.o.payload
        # per-beat state as counters from the head's values, so that no beat does arithmetic on
        # the beat index: while `first` (no beat of the run sent yet) the head's values apply,
        # after that the counters, each a step further per beat sent. The tests a beat needs
        # (does it take a source beat, is it the run's last, its masks) are registers too, worked
        # out as the counters step: the decision to send a beat is a few gates from registers.
        first = Signal(init=1)
        primed = Signal()                     # a source beat of the run taken
        u_reg = Signal(signed(34))            # source beats from this output beat on
        v_reg = Signal(33)                    # output beats left
        sr_reg = Signal(signed(37))           # source bytes from byte 0 of this output beat
        er_reg = Signal(signed(37))           # run bytes from byte 0 of this output beat
        a_reg = Signal(aw - LB)               # the output beat's address, in beats
        takes_reg = Signal()                  # the beat takes a source beat
        one_reg = Signal()                    # the beat is the run's last
        src_mask_reg = Signal(BB)             # its bytes from the source
        strb_reg = Signal(BB)                 # its bytes in the run
        # each register's value from the head, in the register's shape (`*_head`); the beat's
        # own values (the head's while `first`, then the registers) for what it sends
        head_of = {}
        for head, reg in (("nbeats", u_reg), ("nout", v_reg), ("src_end", sr_reg),
                          ("run_end", er_reg), ("d_beat", a_reg), ("takes", takes_reg),
                          ("one", one_reg), ("src_mask", src_mask_reg), ("strb", strb_reg)):
            head_of[reg.name] = Signal.like(reg, name=f"{reg.name[:-4]}_head")
            m.d.comb += head_of[reg.name].eq(fields[head])
        a, takes, one, src_mask, strb = (
            Signal.like(reg, name=reg.name[:-4]) for reg in
            (a_reg, takes_reg, one_reg, src_mask_reg, strb_reg))
        for now, reg in ((a, a_reg), (takes, takes_reg), (one, one_reg),
                         (src_mask, src_mask_reg), (strb, strb_reg)):
            m.d.comb += now.eq(Mux(first, head_of[reg.name], reg))

        def chosen_after(f, reg):
            """``f`` of the head's value or of the register, chosen by `first` after ``f``."""
            return Mux(first, f(head_of[reg.name]), f(reg))

        lead = fields["lead"]
        priming = lead & ~primed & fields["sourced"]
        prev = Signal(W)
        window = (Cat(prev, self.rdata.payload) >> (fields["shift"] * 8))[:W]
        pad_elem = pad_pattern(m, self.pad, self.elog, BB)
        byte_mask = byte_bits(src_mask)
        out_data = (window & byte_mask) | (pad_elem & ~byte_mask)

        # the realigner's beats leave through a register slice: nothing from here reaches the
        # mid end's path select or the engine's write slice in the same cycle
        wr_slice = m.submodules.wr_slice = SkidBuffer(piece_layout(aw, W))
        wiring.connect(m, wr_slice.o, wiring.flipped(self.wr))
        out = wr_slice.i
        # the slice's ready is a register, but it sits by the slice, which the placer puts toward
        # the engine's write side, and a beat sent steps ~260 flip-flops here: one net across the
        # die, then `sent` to all their enables, then the queue's read, is too long a path. So the
        # realigner takes the ready from copies of that register (hw.fabric.register_copies, below),
        # one per share of its state, each share stepping on its own copy; copy 0 makes the run's
        # decisions and drives the handshakes

        def beat_decisions(ready):
            """(a source beat taken, a beat offered, a beat sent) with ``ready`` the slice's."""
            take_beat, send = Signal(), Signal()
            with m.If(runs.o.valid):
                with m.If(priming):
                    m.d.comb += take_beat.eq(self.rdata.valid)
                with m.Elif(takes):
                    m.d.comb += [take_beat.eq(self.rdata.valid & ready),
                                 send.eq(self.rdata.valid)]
                with m.Else():
                    m.d.comb += send.eq(1)
            return take_beat, send, send & ready

        # the wide tests that the beat after next needs of the counters (see below), worked
        # out at each step from the values before it, so they are registers when that beat's
        # tests are: for u' = u - 1, u' >= 3 and u' == 2 (takes_after); v' == 2; and for
        # sr' = sr - BB (er likewise), sr' < BB and sr' >= 2 BB (clamp_after)
        u_ge3, u_eq2, v_eq2 = Signal(), Signal(), Signal()
        sr_under, sr_over, er_under, er_over = Signal(), Signal(), Signal(), Signal()
        # the next beat's tests are taken from the registers' values before the step (so no subtract
        # lies in front of them) and their wide tests made at the step before, or after the run's
        # first beat from its entry. Every step is worked out on the head's value and on the
        # register apart, and `first` selects between the results, not between their operands:
        # `first` is a register far from some of its ~150 loads, too far to also sit in front of the
        # steps' carry chains
        steps = [(u_reg, chosen_after(lambda x: x - 1, u_reg)),
                 (v_reg, chosen_after(lambda x: x - 1, v_reg)),
                 (sr_reg, chosen_after(lambda x: x - BB, sr_reg)),
                 (er_reg, chosen_after(lambda x: x - BB, er_reg)),
                 (a_reg, chosen_after(lambda x: x + 1, a_reg)),
                 (takes_reg, Mux(first, fields["takes2"], u_ge3 | (u_eq2 & ~lead))),
                 (one_reg, Mux(first, fields["one2"], v_eq2)),
                 (src_mask_reg, Mux(first, fields["src_mask2"],
                                    low(clamp_flags(sr_under, sr_over, sr_reg)))),
                 (strb_reg, Mux(first, fields["strb2"],
                                low(clamp_flags(er_under, er_over, er_reg)))),
                 (u_ge3, chosen_after(lambda x: x >= 4, u_reg)),
                 (u_eq2, chosen_after(lambda x: x == 3, u_reg)),
                 (v_eq2, chosen_after(lambda x: x == 3, v_reg)),
                 (sr_under, chosen_after(lambda x: x < 2 * BB, sr_reg)),
                 (sr_over, chosen_after(lambda x: x >= 3 * BB, sr_reg)),
                 (er_under, chosen_after(lambda x: x < 2 * BB, er_reg)),
                 (er_over, chosen_after(lambda x: x >= 3 * BB, er_reg))]
        shares = _shares(steps, self.timing.bits_per_ready)
        prev_shares = range(0, W, self.timing.bits_per_ready)
        ready = register_copies(platform, m, wr_slice.ahead.i_ready,
                                1 + len(shares) + len(prev_shares), "wr_rdy", 1)
        take_beat, send, sent = beat_decisions(ready[0])
        m.d.comb += self.rdata.ready.eq(take_beat)
        run_done = sent & one
        m.d.comb += [out.valid.eq(send),
                     out.payload.addr.eq(Cat(Const(0, LB), a)),
                     out.payload.data.eq(out_data),
                     out.payload.strb.eq(strb),
                     out.payload.last.eq(fields["last"] & run_done),
                     runs.o.ready.eq(run_done)]
        # a run's byte counts, two cycles after its last beat (the job stays busy until then): the
        # run's end is a register first, so the counts' clears (the flip-flops' LSR) come from it
        # and not from the send decision
        ran = Signal()                        # a run ended last cycle
        ran_src = Signal()                    # ... one with a source
        counting = Signal()
        m.d.sync += [ran.eq(run_done), ran_src.eq(run_done & fields["sourced"]),
                     counting.eq(ran),
                     self.read_bytes.eq(Mux(ran_src, vfull, 0)),
                     self.written_bytes.eq(Mux(ran, total, 0))]
        # each share of the state steps on its own copy of the ready
        for share, copy in zip(shares, ready[1:1 + len(shares)], strict=True):
            with m.If(beat_decisions(copy)[2]):
                m.d.sync += [reg.eq(value) for reg, value in share]
        for lo, copy in zip(prev_shares, ready[1 + len(shares):], strict=True):
            hi = min(lo + self.timing.bits_per_ready, W)
            with m.If(beat_decisions(copy)[0]):
                m.d.sync += prev[lo:hi].eq(self.rdata.payload[lo:hi])
        with m.If(take_beat):
            m.d.sync += primed.eq(1)
        with m.If(sent):
            m.d.sync += first.eq(0)
        with m.If(run_done):
            m.d.sync += [first.eq(1), primed.eq(0)]

        return ran, counting, wr_slice
