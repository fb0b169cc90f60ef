"""The DMA's row path: descriptors whose innermost dimension is contiguous on both sides move
a beat per cycle, whatever the element size and however source and destination sit in their
beats.

Each index of the outer dimensions (1 to 4) is a *run*: ``extent[0] * element bytes``
contiguous bytes in the destination, the first ``valid[0] * element bytes`` of them contiguous
in the source (the rest, and whole runs outside an outer ``valid``, are pad). A
:class:`~hw.dma.walker.Walker` steps through the runs; the *beat generator* asks for each run's
source beats and queues the run; the *realigner* turns source beats into destination beats: a
funnel shift over the previous and the current beat by the difference of the two offsets in
their beats, pad bytes past the source, byte strobes on the run's first and last beat.

Ports are those of :class:`~hw.dma.tile.TileTransposer` (``req``, ``rdata``, ``wr``,
``read_bytes``, ``written_bytes``, ``start``, ``busy``) with five dimensions, dimension 0 being
the run.
"""

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered

from .tile import pad_pattern, path_ports
from .walker import Walker

DIMS = 5


class RowCopier(wiring.Component):
    def __init__(self, *, data_width=64, addr_width=32, run_queue=64):
        if run_queue < 2:
            raise ValueError(f"run_queue must be at least 2, not {run_queue!r}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.run_queue = run_queue
        aw = addr_width
        self._walker = Walker(levels=DIMS - 1, addr_width=aw)
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

        # -- beat generator ---------------------------------------------------------------------
        run = walker.o.payload
        total = Signal(35)                    # bytes of every run
        m.d.comb += total.eq(self.ext[0] << self.elog)
        vbytes = Signal(35)                   # bytes of this run with a source
        m.d.comb += vbytes.eq(Mux(run.has_src, self.val[0] << self.elog, 0))
        s_off = run.src[:LB]
        d_off = run.dst[:LB]
        nbeats = Signal(33)
        m.d.comb += nbeats.eq(Mux(vbytes == 0, 0, (s_off + vbytes + BB - 1) >> LB))
        nout = (d_off + total + BB - 1) >> LB
        runs = m.submodules.runs = SyncFIFOBuffered(
            width=LB + LB + (aw - LB) + 33 + 33 + 35 + 1, depth=self.run_queue)
        g_active = Signal()
        g_addr = Signal(aw)
        g_left = Signal(33)
        m.d.comb += [self.req.valid.eq(g_active), self.req.payload.eq(g_addr)]
        g_free = ~g_active | (self.req.ready & (g_left == 1))
        take = walker.o.valid & runs.w_rdy & g_free
        m.d.comb += [walker.o.ready.eq(take), runs.w_en.eq(take),
                     runs.w_data.eq(Cat(s_off, d_off, run.dst[LB:], nbeats, nout[:33], vbytes,
                                        run.last))]
        with m.If(self.req.valid & self.req.ready):
            m.d.sync += [g_addr.eq(g_addr + BB), g_left.eq(g_left - 1)]
            with m.If(g_left == 1):
                m.d.sync += g_active.eq(0)
        with m.If(take & (nbeats != 0)):
            m.d.sync += [g_active.eq(1), g_addr.eq(Cat(Const(0, LB), run.src[LB:])),
                         g_left.eq(nbeats)]

        # -- realigner --------------------------------------------------------------------------
        f = runs.r_data
        fields = {}
        pos = 0
        for name, width in (("s_off", LB), ("d_off", LB), ("d_beat", aw - LB), ("nbeats", 33),
                            ("nout", 33), ("vbytes", 35), ("last", 1)):
            fields[name] = f[pos:pos + width]
            pos += width
        delta = Signal(signed(LB + 2))
        m.d.comb += delta.eq(fields["s_off"] - fields["d_off"])
        lead = delta > 0                      # output k needs source beats k and k + 1
        shift = Signal(LB + 1)                # funnel shift in bytes, 1 to BB
        m.d.comb += shift.eq(Mux(lead, delta, delta + BB))
        j = Signal(33)                        # source beats taken
        k = Signal(33)                        # destination beats sent
        base = Signal(signed(37))             # the run's byte at byte 0 of beat k
        m.d.comb += base.eq((k << LB) - fields["d_off"])
        prev = Signal(W)
        # the source beat that output k takes, if any: k + lead
        need = k + lead
        takes = need < fields["nbeats"]
        priming = lead & (j == 0) & (fields["nbeats"] != 0)
        window = (Cat(prev, self.rdata.payload) >> (shift * 8))[:W]

        def clamp(v):
            """v limited to 0..BB, unsigned."""
            out = Signal(range(BB + 1))
            m.d.comb += out.eq(Mux(v < 0, 0, Mux(v > BB, BB, v)))
            return out

        def low_bytes(n):
            mask = Signal(BB + 1)
            m.d.comb += mask.eq((Const(1, BB + 1) << n) - 1)
            return mask[:BB]

        src_mask = low_bytes(clamp(fields["vbytes"] - base))
        end_mask = low_bytes(clamp(total - base))
        start_mask = low_bytes(clamp(-base))
        strb = end_mask & ~start_mask
        pad_elem = pad_pattern(m, self.pad, self.elog, BB)
        byte_mask = Cat(*[src_mask[i].replicate(8) for i in range(BB)])
        out_data = (window & byte_mask) | (pad_elem & ~byte_mask)

        active = runs.r_rdy
        send = Signal()
        take_beat = Signal()
        with m.If(active):
            with m.If(priming):
                m.d.comb += take_beat.eq(self.rdata.valid)
            with m.Elif(takes):
                m.d.comb += [take_beat.eq(self.rdata.valid & self.wr.ready),
                             send.eq(self.rdata.valid)]
            with m.Else():
                m.d.comb += send.eq(1)
        m.d.comb += self.rdata.ready.eq(take_beat)
        sent = send & self.wr.ready
        run_done = sent & (k + 1 == fields["nout"])
        m.d.comb += [self.wr.valid.eq(send),
                     self.wr.payload.addr.eq(Cat(Const(0, LB), fields["d_beat"] + k)),
                     self.wr.payload.data.eq(out_data),
                     self.wr.payload.strb.eq(strb),
                     self.wr.payload.last.eq(fields["last"] & run_done),
                     runs.r_en.eq(run_done),
                     self.read_bytes.eq(Mux(run_done, fields["vbytes"], 0)),
                     self.written_bytes.eq(Mux(run_done, total, 0))]
        with m.If(take_beat):
            m.d.sync += [prev.eq(self.rdata.payload), j.eq(j + 1)]
        with m.If(sent):
            m.d.sync += k.eq(k + 1)
        with m.If(run_done):
            m.d.sync += [j.eq(0), k.eq(0)]

        m.d.comb += self.busy.eq(walker.busy | g_active | runs.r_rdy | (runs.level != 0))
        return m
