"""The DMA's mid end: a checked descriptor in, beat requests and pieces of destination beats
out, through whichever of three paths suits the descriptor's shape.

- *Row path* (:class:`~hw.dma.rows.RowCopier`): dimension 0 contiguous on both sides. Runs
  of dimension 0 move a beat per cycle through a funnel-shift realigner.
- *Tile path* (:class:`~hw.dma.tile.TileTransposer`): dimension 0 contiguous in the
  destination and another dimension (the lowest of 1 to 3 with every index valid) contiguous
  in the source, at most four dimensions, elements narrower than a beat. A double-buffered
  skewed-bank buffer takes a row beat in and gives a column beat out per cycle.
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

from amaranth import Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from model.dma.descriptor import MAX_DIMS

from .elements import ElementPath
from .rows import RowCopier
from .tile import TileTransposer, piece_layout


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
            "src": In(aw), "dst": In(aw), "elog": In(2), "pad": In(64), "ndims": In(3),
            "ext": In(32).array(MAX_DIMS), "val": In(32).array(MAX_DIMS),
            "sst": In(32).array(MAX_DIMS), "dstr": In(32).array(MAX_DIMS),
            "start": In(1), "busy": Out(1), "path": Out(Path),
            "req": Out(stream.Signature(aw)),
            "rdata": In(stream.Signature(data_width)),
            "wr": Out(stream.Signature(piece_layout(aw, data_width))),
            "read_bytes": Out(35),
            "written_bytes": Out(35),
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

        # the tile path's column dimension, and its other two
        col = Signal(2)
        col_ok = [(k < ndims) & (sst[k] == eb) & (val[k] == ext[k]) & (ext[k] > 1)
                  for k in range(4)]
        with m.If(col_ok[1]):
            m.d.comb += col.eq(1)
        with m.Elif(col_ok[2]):
            m.d.comb += col.eq(2)
        with m.Elif(col_ok[3]):
            m.d.comb += col.eq(3)
        with m.Switch(col):
            for c, (p, q) in {1: (2, 3), 2: (1, 3), 3: (1, 2)}.items():
                with m.Case(c):
                    for t_k, k in enumerate((0, c, p, q)):
                        m.d.comb += [tile.ext[t_k].eq(n_ext[k]), tile.val[t_k].eq(n_val[k]),
                                     tile.sst[t_k].eq(n_sst[k]), tile.dstr[t_k].eq(n_dst[k])]
        row_fits = (sst[0] == eb) & (dstr[0] == eb)
        tile_fits = ((ndims >= 2) & (ndims <= 4) & (dstr[0] == eb) & (ext[0] > 1) &
                     (col != 0) & (self.elog < LB))

        path = Signal(Path)
        m.d.comb += self.path.eq(path)
        with m.If(self.start):
            with m.If(row_fits):
                m.d.comb += rows.start.eq(1)
                m.d.sync += path.eq(Path.ROWS)
            with m.Elif(tile_fits):
                m.d.comb += tile.start.eq(1)
                m.d.sync += path.eq(Path.TILES)
            with m.Else():
                m.d.comb += elements.start.eq(1)
                m.d.sync += path.eq(Path.ELEMENTS)

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
        m.d.comb += self.busy.eq(elements.busy | rows.busy | tile.busy)
        return m
