"""The DMA's mid end: a checked descriptor in, beat requests and pieces of destination beats
out, through whichever of three paths suits the descriptor's shape.

- *Row path* (:class:`~hw.dma.rows.RowCopier`): dimension 0 contiguous on both sides. Runs
  of dimension 0 move a beat per cycle through a funnel-shift realigner.
- *Tile path* (:class:`~hw.dma.tile.TileTransposer`): dimension 0 contiguous in the
  destination and another dimension (the lowest of 1 to 3 with every index valid) contiguous
  in the source, at most two dimensions besides these and the grouped ones, elements narrower
  than a beat. A double-buffered skewed-bank buffer takes a row beat in and gives a column
  beat out per cycle. Dimensions shorter than a beat are grouped with their neighbours, or
  packed several rows to a beat, when the strides allow (see the tile module).
- *Element path* (:class:`~hw.dma.elements.ElementPath`): anything else, one element per
  cycle.

Ports
-----
The descriptor (hold while ``busy``): ``src``, ``dst``, ``elog``, ``pad``, ``ndims`` and five
dimensions ``ext``, ``val``, ``sst``, ``dstr`` as the front end checked them. ``start`` picks
the path and begins; ``path`` tells which one runs (0 elements, 1 rows, 2 tiles). Streams
``req`` (beat addresses to read), ``rdata`` (those beats, in order) and ``wr`` (pieces:
``addr``, ``data``, ``strb``, ``last``) go to the back end; ``read_bytes`` and
``written_bytes`` feed the job's counters.
"""

from amaranth import Const, Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from model.dma.descriptor import MAX_DIMS

from .elements import ElementPath
from .rows import RowCopier
from .tile import TileTransposer, path_ports


class Path(enum.Enum, shape=2):
    ELEMENTS = 0
    ROWS = 1
    TILES = 2


class MidEnd(wiring.Component):
    """Parameters: ``data_width``, ``addr_width``, ``tile_beats`` (beats per tile row),
    ``queue`` (requests the paths may have waiting for data: at least the beats the back end
    can have in flight)."""

    def __init__(self, *, data_width=64, addr_width=32, tile_beats=8, queue=96):
        self.data_width = data_width
        self.addr_width = addr_width
        aw = addr_width
        self._elements = ElementPath(data_width=data_width, addr_width=aw, queue=queue)
        self._rows = RowCopier(data_width=data_width, addr_width=aw, run_queue=queue)
        self._tile = TileTransposer(data_width=data_width, addr_width=aw,
                                    tile_beats=tile_beats, row_queue=queue)
        super().__init__({
            **path_ports(data_width=data_width, addr_width=aw, dims=MAX_DIMS),
            # as the front end holds them: strides of 32 bits, unused dimensions included
            "sst": In(32).array(MAX_DIMS), "dstr": In(32).array(MAX_DIMS),
            "ndims": In(3), "path": Out(Path),
        })

    def elaborate(self, platform):
        m = Module()
        BB = self.data_width // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        elements = m.submodules.elements = self._elements
        rows = m.submodules.rows = self._rows
        tile = m.submodules.tile = self._tile
        units = {Path.ELEMENTS: elements, Path.ROWS: rows, Path.TILES: tile}
        ndims, ext, val, sst, dstr = self.ndims, self.ext, self.val, self.sst, self.dstr
        eb = Signal(4)
        m.d.comb += eb.eq(1 << self.elog)

        # unused dimensions count once
        n_ext = [Signal(32, name=f"n_ext{k}") for k in range(MAX_DIMS)]
        n_val = [Signal(32, name=f"n_val{k}") for k in range(MAX_DIMS)]
        n_sst = [Signal(aw, name=f"n_sst{k}") for k in range(MAX_DIMS)]
        n_dst = [Signal(aw, name=f"n_dst{k}") for k in range(MAX_DIMS)]
        for k in range(MAX_DIMS):
            used = k < ndims
            m.d.comb += [n_ext[k].eq(Mux(used, ext[k], 1)), n_val[k].eq(Mux(used, val[k], 1)),
                         n_sst[k].eq(Mux(used, sst[k], 0)), n_dst[k].eq(Mux(used, dstr[k], 0))]
        for u in (elements, rows, tile):
            m.d.comb += [u.src.eq(self.src), u.dst.eq(self.dst), u.elog.eq(self.elog),
                         u.pad.eq(self.pad)]
        for u in (elements, rows):
            for k in range(MAX_DIMS):
                m.d.comb += [u.ext[k].eq(n_ext[k]), u.val[k].eq(n_val[k]),
                             u.sst[k].eq(n_sst[k]), u.dstr[k].eq(n_dst[k])]

        # the tile path: the column dimension (the lowest of 1 to 3 contiguous in the source
        # with every index valid); grouped rows: dimension 0 a power of two under a beat and
        # dimension 1 continuing it in the destination; grouped columns: the column dimension a
        # power of two under a tile row and another continuing it in the source; at most two
        # other dimensions
        L = Signal(LB + 1)
        T = Signal(LB + 8)
        m.d.comb += [L.eq(Const(BB, LB + 1) >> self.elog),
                     T.eq(Const(self._tile.tile_beats * BB, LB + 8) >> self.elog)]

        def pow2(v):
            return (v != 0) & ((v & (v - 1)) == 0)

        col = Signal(3)
        col_ok = [(k < ndims) & (sst[k] == eb) & (val[k] == ext[k]) & (ext[k] > 1)
                  for k in range(4)]
        for k in (3, 2, 1):
            with m.If(col_ok[k]):
                m.d.comb += col.eq(k)
        col_ext = Signal(32)
        with m.Switch(col):
            for k in (1, 2, 3):
                with m.Case(k):
                    m.d.comb += col_ext.eq(ext[k])
        g_rows = Signal()
        m.d.comb += g_rows.eq((col >= 2) & (ndims >= 3) & pow2(ext[0]) & (ext[0] < L) &
                              (dstr[1] == (ext[0] << self.elog)))
        c_hi = Signal(3)                      # the columns' second dimension, 0 for none
        for k in (4, 3, 2, 1):
            with m.If((k < ndims) & (col != k) & ~(g_rows & (k == 1)) &
                      (sst[k] == (col_ext << self.elog)) & (val[k] == ext[k])):
                m.d.comb += c_hi.eq(k)
        g_cols = Signal()
        m.d.comb += g_cols.eq((c_hi != 0) & pow2(col_ext) & (col_ext < T))
        # the others, in order
        free = [Signal(name=f"free{k}") for k in range(MAX_DIMS)]
        for k in range(1, MAX_DIMS):
            m.d.comb += free[k].eq((k < ndims) & (col != k) & ~(g_rows & (k == 1)) &
                                   ~(g_cols & (c_hi == k)))
        o1 = Signal(3)                        # the first free dimension
        o2 = Signal(3)
        for k in reversed(range(1, MAX_DIMS)):
            with m.If(free[k]):
                m.d.comb += o1.eq(k)
        # the second: the lowest free one above the first
        for k in reversed(range(2, MAX_DIMS)):
            with m.If(free[k] & (k > o1)):
                m.d.comb += o2.eq(k)
        n_free = sum(free[k] for k in range(1, MAX_DIMS))
        r_hi = Signal(3)
        cols_hi = Signal(3)
        m.d.comb += [r_hi.eq(Mux(g_rows, 1, 0)), cols_hi.eq(Mux(g_cols, c_hi, 0))]
        # the tile path's configuration is worked out here when a descriptor starts and held in
        # registers while it runs, so that none of this logic lies on the data path's timing
        def staged(port, name):
            nxt = Signal.like(port, name=f"{name}_next")
            held = Signal.like(port, name=f"{name}_held")
            with m.If(self.start):
                m.d.sync += held.eq(nxt)
            m.d.comb += port.eq(held)
            return nxt

        t_ext, t_val, t_sst, t_dst = ([staged(getattr(tile, f)[k], f"t_{f}{k}")
                                       for k in range(len(tile.ext))]
                                      for f in ("ext", "val", "sst", "dstr"))
        m.d.comb += [t_ext[0].eq(n_ext[0]), t_val[0].eq(n_val[0]),
                     t_sst[0].eq(n_sst[0]), t_dst[0].eq(n_dst[0])]
        for t_k, sel in enumerate([col, o1, o2, r_hi, cols_hi], start=1):
            with m.Switch(sel):
                with m.Case(0):                 # slot unused: extent 1
                    m.d.comb += [t_ext[t_k].eq(1), t_val[t_k].eq(1)]
                for k in range(1, MAX_DIMS):
                    with m.Case(k):
                        m.d.comb += [t_ext[t_k].eq(n_ext[k]), t_val[t_k].eq(n_val[k]),
                                     t_sst[t_k].eq(n_sst[k]), t_dst[t_k].eq(n_dst[k])]
        # packed rows: rows shorter than a beat, one after the other in the source, each beat of
        # them starting on a beat boundary (the base and the other dimensions' strides)
        beat_aligned = ((self.src & (BB - 1)) == 0)
        for k in range(1, MAX_DIMS):
            beat_aligned = beat_aligned & (~free[k] | ((sst[k] & (BB - 1)) == 0))
        pack = Signal()
        m.d.comb += pack.eq(~g_rows & ~g_cols & pow2(col_ext) & (col_ext < L) &
                            (sst[0] == (col_ext << self.elog)) & beat_aligned)
        m.d.comb += [staged(tile.group_rows, "t_group_rows").eq(g_rows),
                     staged(tile.group_cols, "t_group_cols").eq(g_cols),
                     staged(tile.pack_rows, "t_pack_rows").eq(pack)]
        row_fits = (sst[0] == eb) & (dstr[0] == eb)
        tile_fits = ((ndims >= 2) & (dstr[0] == eb) & (ext[0] > 1) & (col != 0) &
                     (self.elog < LB) & (n_free <= 2))

        # the path is chosen at start and started a cycle later, with its configuration held
        path = Signal(Path)
        go = Signal()
        m.d.comb += self.path.eq(path)
        m.d.sync += go.eq(self.start)
        with m.If(self.start):
            m.d.sync += path.eq(Mux(row_fits, Path.ROWS,
                                    Mux(tile_fits, Path.TILES, Path.ELEMENTS)))
        with m.If(go):
            m.d.comb += [rows.start.eq(path == Path.ROWS), tile.start.eq(path == Path.TILES),
                         elements.start.eq(path == Path.ELEMENTS)]

        # the running path has the streams
        with m.Switch(path):
            for p, u in units.items():
                with m.Case(p):
                    m.d.comb += [self.req.valid.eq(u.req.valid),
                                 self.req.payload.eq(u.req.payload),
                                 u.req.ready.eq(self.req.ready),
                                 u.rdata.valid.eq(self.rdata.valid),
                                 self.rdata.ready.eq(u.rdata.ready),
                                 self.wr.valid.eq(u.wr.valid),
                                 self.wr.payload.eq(u.wr.payload),
                                 u.wr.ready.eq(self.wr.ready),
                                 self.read_bytes.eq(u.read_bytes),
                                 self.written_bytes.eq(u.written_bytes)]
        for u in units.values():
            m.d.comb += u.rdata.payload.eq(self.rdata.payload)
        m.d.comb += self.busy.eq(go | elements.busy | rows.busy | tile.busy)
        return m
