"""The DMA's element path: any descriptor, one element per cycle.

A :class:`~hw.dma.walker.Walker` steps through the elements in order. Each element with a
source asks for its beat unless the previous element's beat is the same one; the element
waits in the *entry* queue for that beat, and the *extractor* takes its bytes out (or the pad
value) and sends them on as a piece of a destination beat, with its byte strobes. Addresses are
multiples of the element size, so one byte rotation of the source beat (by the difference of
the two offsets in their beats, worked out as the element is queued) puts the element where
the destination wants it; the strobes mark its bytes.

Ports are those of :class:`~hw.dma.tile.TileTransposer` with five dimensions (unused ones as
extent 1).
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring

from ..bus.fifo import RegisteredQueue, SkidBuffer
from .tile import (
    count_width,
    low_bytes,
    pad_pattern,
    path_ports,
    piece_layout,
    rotate_right_bytes,
)
from .walker import Walker

DIMS = 5


class ElementPath(wiring.Component):
    def __init__(self, *, data_width=64, addr_width=32, queue=96):
        if queue < 2:
            raise ValueError(f"queue must be at least 2, not {queue!r}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.queue = queue
        aw = addr_width
        self._walker = Walker(levels=DIMS, addr_width=aw, count_width=count_width(aw),
                              ready_ahead=True)
        super().__init__(path_ports(data_width=data_width, addr_width=aw, dims=DIMS))

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        BB = W // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        walker = m.submodules.walker = self._walker
        for k in range(DIMS):
            m.d.comb += [walker.extent[k].eq(self.ext[k]), walker.valid[k].eq(self.val[k]),
                         walker.src_stride[k].eq(self.sst[k]),
                         walker.dst_stride[k].eq(self.dstr[k])]
        m.d.comb += [walker.src_base.eq(self.src), walker.dst_base.eq(self.dst),
                     walker.start.eq(self.start)]
        eb = Signal(4)
        m.d.comb += eb.eq(1 << self.elog)

        # elements waiting for their beat: as many as the beats the engine can have in flight
        entry = data.StructLayout({"dst": aw, "rot": LB, "has_src": 1, "new_beat": 1, "last": 1})
        entries = m.submodules.entries = RegisteredQueue(entry, depth=self.queue)
        # whether an element needs a new beat (it has a source, in another beat than the last
        # element with a source) is worked out as it enters a register slice, so the compare
        # does not lie in front of the take below: the elements leave the slice in the order
        # they entered it, so the last with a source before it is the beat asked for last
        ahead = data.StructLayout({"beat": aw - LB, "dst": aw, "rot": LB, "has_src": 1,
                                   "new_beat": 1, "last": 1})
        w_step = walker.o.payload
        w_beat = w_step.src[LB:]
        seen = Signal()                       # `seen_beat` holds the last source's beat
        seen_beat = Signal(aw - LB)
        pre = stream.Signature(ahead).create()
        m.d.comb += [pre.valid.eq(walker.o.valid), walker.o.ready.eq(pre.ready),
                     pre.payload.beat.eq(w_beat), pre.payload.dst.eq(w_step.dst),
                     pre.payload.rot.eq(w_step.src[:LB] - w_step.dst[:LB]),
                     pre.payload.has_src.eq(w_step.has_src),
                     pre.payload.new_beat.eq(w_step.has_src & ~(seen & (w_beat == seen_beat))),
                     pre.payload.last.eq(w_step.last)]
        with m.If(walker.o.valid & pre.ready & w_step.has_src):
            m.d.sync += [seen.eq(1), seen_beat.eq(w_beat)]
        pre_slice = m.submodules.ahead_slice = SkidBuffer(ahead)
        wiring.connect(m, pre, pre_slice.i)
        o = pre_slice.o
        m.d.comb += walker.ready_next.eq(pre_slice.ahead.i_ready)
        step = o.payload
        new_beat = step.new_beat
        m.d.comb += [self.req.valid.eq(o.valid & new_beat & entries.i.ready),
                     self.req.payload.beat.eq(step.beat), self.req.payload.n.eq(1)]
        take = o.valid & entries.i.ready & (~new_beat | self.req.ready)
        queued = entries.i.payload
        m.d.comb += [o.ready.eq(take), entries.i.valid.eq(take),
                     queued.dst.eq(step.dst), queued.rot.eq(step.rot),
                     queued.has_src.eq(step.has_src), queued.new_beat.eq(new_beat),
                     queued.last.eq(step.last)]

        # extractor: entries in order; a new beat is taken when the entry asked for one
        head = entries.o.payload
        e_dst, e_rot, e_has, e_new, e_last = (head.dst, head.rot, head.has_src, head.new_beat,
                                              head.last)
        cur = Signal(W)
        beat = Mux(e_new, self.rdata.payload, cur)
        emask = low_bytes(m, eb, 8)
        d_off = e_dst[:LB]
        # the pieces leave through a register slice: nothing here reaches the mid end's path
        # select or the engine's write slice in the same cycle
        wr_slice = m.submodules.wr_slice = SkidBuffer(piece_layout(aw, W))
        wiring.connect(m, wr_slice.o, wiring.flipped(self.wr))
        out = wr_slice.i
        m.d.comb += [out.valid.eq(entries.o.valid & (~e_new | self.rdata.valid)),
                     out.payload.addr.eq(Cat(Const(0, LB), e_dst[LB:])),
                     out.payload.data.eq(Mux(e_has, rotate_right_bytes(beat, e_rot, BB),
                                             pad_pattern(m, self.pad, self.elog, BB))),
                     out.payload.strb.eq(emask << d_off),
                     out.payload.last.eq(e_last)]
        go = out.valid & out.ready
        m.d.comb += [entries.o.ready.eq(go), self.rdata.ready.eq(go & e_new),
                     self.written_bytes.eq(Mux(go, eb, 0)),
                     self.read_bytes.eq(Mux(go & e_has, eb, 0))]
        with m.If(go & e_new):
            m.d.sync += cur.eq(self.rdata.payload)

        m.d.comb += self.busy.eq(walker.busy | pre_slice.o.valid | entries.nonempty |
                                 wr_slice.o.valid)
        return m
