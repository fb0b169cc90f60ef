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
``desc``: a stream of checked descriptors (:func:`request_layout`: the N-D transfer as the front
end holds it). The mid end takes one when it has nothing left of the one before (``busy`` low),
or when the one before runs on the tile path and its walk is over (the tile path's
``walk_free``), in two cycles: in the first it sees the descriptor offered and decodes the
dimensions it uses, in the second it takes it (``ready``) and loads its own copy, from which
its configuration pipeline works out the path and the tile path's shape. The chosen path starts
once that pipeline has settled and the path before is done, or at once if both jobs are tile
jobs; ``busy`` stays high from the take until the path is done. The first read request of each
job carries ``first`` (:func:`~hw.dma.backend.job_request_layout`). ``path`` tells
which path runs (0 elements, 1 rows, 2 tiles). Streams ``req`` (runs of beats to read:
:func:`~hw.dma.tile.request_layout`), ``rdata`` (those beats, in order) and ``wr`` (pieces:
``addr``, ``data``, ``strb``, ``last``) go to the back end; ``read_bytes`` and
``written_bytes`` feed the job's counters.
"""

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import MAX_DIMS

from ..bus.fifo import registered, stream_slice
from ..fabric import register_copies, registered_copy
from .backend import job_request_layout
from .convert import conversion_layout
from .elements import ElementPath
from .rows import RowCopier
from .tile import TileTransposer, count_width, path_ports
from .timing import DmaTiming

# cycles from the descriptor's take until the configuration pipeline below holds its values;
# a path's own configuration registers, if it has any, are the path's to wait for
SETTLE = 11

#: the ports of a path that carry the descriptor and its start (the mid end takes a request instead)
DESCRIPTOR_PORTS = ("src", "dst", "elog", "pad", "ext", "val", "sst", "dstr", "start")


def request_layout(addr_width):
    """An N-D transfer request, the descriptor as the front end checked it: base addresses of
    ``addr_width`` bits, the element size (log2 of its bytes), the pad value, the dimensions in
    use and five dimensions of extent, valid count, source and destination stride (32 bits, or
    ``addr_width`` if more; unused dimensions included, as the front end holds them), and the
    conversion (:func:`~hw.dma.convert.conversion_layout`: the mid end does not read it, the
    conversion stage does)."""
    dims = data.ArrayLayout(max(32, addr_width), MAX_DIMS)
    return data.StructLayout({"src": addr_width, "dst": addr_width, "elog": 2, "pad": 64,
                              "ndims": 3, "ext": dims, "val": dims, "sst": dims,
                              "dstr": dims, "cvt": conversion_layout()})


def one_bit_set(v):
    """Whether exactly one bit of ``v`` is set (a power of two), as a tree of (any, several) pairs:
    no carry chain. ``(v & (v - 1)) == 0``, a 32-bit subtraction and a zero test, is too slow a path
    in front of the registers it feeds."""
    flags = [(v[i], Const(0)) for i in range(len(v))]
    while len(flags) > 1:
        pairs = [(a | b, s | t | (a & b))
                 for (a, s), (b, t) in zip(flags[0::2], flags[1::2], strict=False)]
        flags = pairs + flags[len(pairs) * 2:]         # an odd one out goes up as it is
    some, several = flags[0]
    return some & ~several


class Path(enum.Enum, shape=2):
    ELEMENTS = 0
    ROWS = 1
    TILES = 2


#: the paths a mid end can be built with; the element path takes any descriptor and is always
#: there
PATHS = ("rows", "tile", "elements")


def check_paths(paths) -> frozenset:
    """``paths`` as a set, checked: names from :data:`PATHS`, the element path among them."""
    paths = frozenset(paths)
    unknown = sorted(paths - set(PATHS))
    if unknown:
        raise ValueError(f"paths: unknown path {unknown[0]!r}; the paths are "
                         f"{', '.join(PATHS)}")
    if "elements" not in paths:
        raise ValueError("paths must include 'elements': the element path takes every "
                         "descriptor the others do not")
    return paths


class MidEnd(wiring.Component):
    """Parameters: ``data_width``, ``addr_width``, ``tile_beats`` (beats per tile row),
    ``queue`` (requests the paths may have waiting for data: at least the beats the back end
    can have in flight), ``paths`` (the paths built, :data:`PATHS`: a descriptor whose path is
    left out takes the element path, at an element per cycle), ``timing``
    (:class:`~.timing.DmaTiming`)."""

    def __init__(self, *, data_width=64, addr_width=32, tile_beats=8, queue=96, paths=PATHS,
                 timing=DmaTiming()):
        self.data_width = data_width
        self.addr_width = addr_width
        self.paths = check_paths(paths)
        aw = addr_width
        self._elements = ElementPath(data_width=data_width, addr_width=aw, queue=queue)
        self._rows = (RowCopier(data_width=data_width, addr_width=aw, run_queue=queue,
                                timing=timing)
                      if "rows" in self.paths else None)
        self._tile = (TileTransposer(data_width=data_width, addr_width=aw,
                                     tile_beats=tile_beats, row_queue=queue, timing=timing)
                      if "tile" in self.paths else None)
        super().__init__({
            "desc": In(stream.Signature(request_layout(aw))),
            **{name: port for name, port in
               path_ports(data_width=data_width, addr_width=aw, dims=MAX_DIMS).items()
               if name not in DESCRIPTOR_PORTS},
            "req": Out(stream.Signature(job_request_layout(aw, data_width))),
            "path": Out(Path),
        })

    def elaborate(self, platform):
        m = Module()
        BB = self.data_width // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        elements = m.submodules.elements = self._elements
        units = {Path.ELEMENTS: elements}
        if self._rows is not None:
            units[Path.ROWS] = m.submodules.rows = self._rows
        if self._tile is not None:
            units[Path.TILES] = m.submodules.tile = self._tile
        # The descriptor is offered on `desc` and taken in the cycle after the mid end sees it
        # (when nothing of the job before is left): `taking`, a register, is its ready, and its
        # copies load the mid end's copy of the descriptor (stage 1 below), so the decision to
        # take is not on the path into those ~1,000 flip-flops' enables. The path and the tile
        # path's configuration are worked out from that copy through a pipeline of registers
        # that runs all the time: SETTLE cycles after the take every stage holds this
        # descriptor's values and the path starts. None of this logic lies on the data path's
        # timing.
        desc = self.desc.payload
        # A tile job's walk may be over while its last tiles still fill and drain: the next
        # descriptor is taken then (`walk_free`), and starts once the pipeline has settled (on
        # the tile path at once, on another once the tile path is done)
        tile = self._tile
        early = Signal()
        takes = register_copies(platform, m, self.desc.valid & ~self.desc.ready &
                                (~self.busy | early), 6 + len(units), "take")
        taking = takes[0]
        m.d.comb += self.desc.ready.eq(taking)

        def reg(value, name):
            return registered(m, value, name)

        def held(value, name, take):
            """A register of the mid end's copy of the descriptor: loads as it is taken."""
            r = Signal.like(value, name=name, reset_less=True)
            with m.If(take):
                m.d.sync += r.eq(value)
            return r

        # stage 0: whether each dimension is used, in registered copies (one per field): the
        # offered ndims decoded straight into stage 1's ~600 flip-flops (their LSR) would be two
        # long nets across the die. They are registers of the descriptor as it is offered, which
        # holds still until it is taken, so they hold its values in the cycle it is
        used = [register_copies(platform, m, k < desc.ndims, 4, f"dim{k}_used")
                for k in range(MAX_DIMS)]
        # stage 1: the descriptor as the paths see it (unused dimensions count once)
        ndims = held(desc.ndims, "r_ndims", takes[1])
        elog = held(desc.elog, "r_elog", takes[1])
        src_low = held(desc.src[:LB], "r_src_low", takes[1])
        n_ext = [held(Mux(used[k][0], desc.ext[k], 1), f"n_ext{k}", takes[2])
                 for k in range(MAX_DIMS)]
        n_val = [held(Mux(used[k][1], desc.val[k], 1), f"n_val{k}", takes[3])
                 for k in range(MAX_DIMS)]
        n_sst = [held(Mux(used[k][2], desc.sst[k][:aw], 0), f"n_sst{k}", takes[4])
                 for k in range(MAX_DIMS)]
        n_dst = [held(Mux(used[k][3], desc.dstr[k][:aw], 0), f"n_dst{k}", takes[5])
                 for k in range(MAX_DIMS)]
        # each path's own copy of the descriptor's addresses, element size and pad value (kept
        # apart on the ECP5 board tops), loaded with the mid end's copy. One register for all
        # three paths would sit by the front end, and its `elog` would cross the die into the
        # element path's pad and strobes on one net
        for (p, u), take in zip(units.items(), takes[6:], strict=True):
            u_desc = Cat(u.src, u.dst, u.elog, u.pad)
            m.d.comb += u_desc.eq(registered_copy(
                platform, m, Cat(desc.src, desc.dst, desc.elog, desc.pad),
                f"desc_{p.name[0].lower()}", enable=take))
        for u in (u for p, u in units.items() if p != Path.TILES):
            for k in range(MAX_DIMS):
                m.d.comb += [u.ext[k].eq(n_ext[k]), u.val[k].eq(n_val[k]),
                             u.sst[k].eq(n_sst[k]), u.dstr[k].eq(n_dst[k])]

        # stage 1b: the tests' own copies of the dimensions. The paths' walkers read the stage 1
        # registers too, and a register shared with them sat across the die from the tests below; a
        # copy of its own can sit next to them, the distance moved to a register-to-register hop
        n_ext = [reg(v, f"c_ext{k}") for k, v in enumerate(n_ext)]
        n_val = [reg(v, f"c_val{k}") for k, v in enumerate(n_val)]
        n_sst = [reg(v, f"c_sst{k}") for k, v in enumerate(n_sst)]
        n_dst = [reg(v, f"c_dst{k}") for k, v in enumerate(n_dst)]
        ndims = reg(ndims, "c_ndims")
        elog = reg(elog, "c_elog")
        src_low = reg(src_low, "c_src_low")

        eb = Signal(4)
        m.d.comb += eb.eq(1 << elog)
        # (a path left out never fits)
        row_fits = (reg((n_sst[0] == eb) & (n_dst[0] == eb), "row_fits")
                    if Path.ROWS in units else Const(0))
        tile_fits = (self._tile_setup(m, platform, units[Path.TILES], reg, {
                         "ndims": ndims, "elog": elog, "eb": eb, "src_low": src_low,
                         "ext": n_ext, "val": n_val, "sst": n_sst, "dst": n_dst})
                     if Path.TILES in units else Const(0))
        chosen = Mux(row_fits, Path.ROWS, Mux(tile_fits, Path.TILES, Path.ELEMENTS))
        path_next = reg(chosen, "path_next")
        # and a register of its own for each path, saying it is the chosen one: the streams'
        # valid and ready signals pass a gate on it instead of a decode of `path`, whose fanout
        # they would share
        on_next = {u: reg(chosen == p, f"on_next_{p.name.lower()}") for p, u in units.items()}

        # the chosen path starts once every stage holds the new descriptor's values and the
        # path before is done, or is the tile path taking the next tile job: the path and its
        # flags (`path`, `on`) follow the descriptor's as it starts, so the job before keeps the
        # streams until then
        settle = Signal(range(SETTLE + 1))
        go = Signal()
        path = Signal(Path, name="path")
        on = {u: Signal(name=f"on_{p.name.lower()}") for p, u in units.items()}
        m.d.comb += self.path.eq(path)
        done_before = ~Cat(u.busy for u in units.values()).any()
        if tile is not None:
            # a tile job follows a tile job once the walk is over and its runs have left (the
            # next request is then the new job's first)
            done_before |= (on[tile] & on_next[tile] & tile.walk_free & ~tile.req.valid)
            m.d.comb += early.eq(on[tile] & tile.walk_free & (settle == 0) & ~taking &
                                 ~Cat(*(u.start for u in units.values())).any())
        with m.If(taking):
            m.d.sync += settle.eq(SETTLE)
        with m.Elif((settle != 0) & ((settle != 2) | go)):
            m.d.sync += settle.eq(settle - 1)
        # each path's start is a register, set from settle == 2 so that it is high in the cycle
        # settle is 1 (path_next holds this descriptor's path from nine cycles after the take
        # on, a cycle before)
        m.d.comb += go.eq((settle == 2) & done_before)
        starts = {u: Signal(name=f"start_{p.name.lower()}") for p, u in units.items()}
        with m.If(go):
            m.d.sync += path.eq(path_next)
            m.d.sync += [on[u].eq(on_next[u]) for u in units.values()]
        for u in units.values():
            m.d.sync += starts[u].eq(go & on_next[u])
            m.d.comb += u.start.eq(starts[u])

        # the running path has the streams: its handshakes through a gate on its own register, its
        # payloads through a multiplexer on `path` The read data reaches each path through a
        # register slice of its own, next to it: a path's decision to take a beat (its ready, from
        # the beat's valid) then stays within the path, where a slice shared by the three paths,
        # which the tools place apart, had it cross the die and back
        rdata_in = {}
        for p, u in units.items():
            rdata_in[u] = stream.Signature(self.rdata.payload.shape()).create(
                path=(f"rdata_{p.name.lower()}",))
            m.d.comb += rdata_in[u].payload.eq(self.rdata.payload)
            stream_slice(m, f"rdata_{p.name.lower()}", rdata_in[u], u.rdata,
                         global_load="dma_rdata_rows_load" if p == Path.ROWS else None)
        # the read requests leave through a register slice of the mid end's own, which the placer
        # can put by the paths: the engine's request slice sits by the back end, and its ready
        # reached the row path's request slice across the die
        req = stream.Signature(self.req.payload.shape()).create()
        req_slice = stream_slice(m, "req_near", req, wiring.flipped(self.req))
        for u in units.values():
            m.d.comb += [u.req.ready.eq(req.ready & on[u]),
                         rdata_in[u].valid.eq(self.rdata.valid & on[u]),
                         u.wr.ready.eq(self.wr.ready & on[u])]

        def running(signal):
            return Cat(*(signal(u) & on[u] for u in units.values())).any()

        # the read data's ready is every path's slice ready, not only the running path's: the others
        # get no beats (their valid is gated), so their slices stay empty and ready, and the path
        # select is not in front of the engine's read-data slice
        m.d.comb += [req.valid.eq(running(lambda u: u.req.valid)),
                     self.rdata.ready.eq(Cat(*(rdata_in[u].ready
                                               for u in units.values())).all()),
                     self.wr.valid.eq(running(lambda u: u.wr.valid))]
        # a job's first request says so, for the back end to tell the jobs' reads apart
        first = Signal()
        with m.If(go):
            m.d.sync += first.eq(1)
        with m.Elif(req.valid & req.ready):
            m.d.sync += first.eq(0)
        m.d.comb += req.payload.first.eq(first)
        with m.Switch(path):
            for p, u in units.items():
                with m.Case(p):
                    m.d.comb += [req.payload.beat.eq(u.req.payload.beat),
                                 req.payload.n.eq(u.req.payload.n),
                                 self.wr.payload.eq(u.wr.payload),
                                 self.read_bytes.eq(u.read_bytes),
                                 self.written_bytes.eq(u.written_bytes)]
        m.d.comb += self.busy.eq(taking | (settle != 0) |
                                 Cat(u.busy for u in units.values()).any() | req_slice.o.valid)
        return m

    def _tile_setup(self, m, platform, tile, reg, d):
        """The tile path's configuration, worked out from the descriptor as the paths see it
        (``d``: ``ndims``, ``elog``, ``eb`` (element bytes), ``src_low``, and each dimension's
        ``ext``, ``val``, ``sst``, ``dst``) in stages of registers into ``tile``'s ports.
        Returns whether the descriptor fits the tile path."""
        BB = self.data_width // 8
        LB = (BB - 1).bit_length()
        aw = self.addr_width
        ndims, elog, src_low = d["ndims"], d["elog"], d["src_low"]
        n_ext, n_val, n_sst, n_dst = d["ext"], d["val"], d["sst"], d["dst"]
        # the tile path: the column dimension (the lowest of 1 to 3 contiguous in the source
        # with every index valid); grouped rows: dimension 0 a power of two under a beat and
        # dimension 1 continuing it in the destination; grouped columns: the column dimension a
        # power of two under a tile row and another continuing it in the source; at most two
        # other dimensions
        eb = d["eb"]
        L = Signal(LB + 1)
        T = Signal(LB + 8)
        m.d.comb += [L.eq(Const(BB, LB + 1) >> elog),
                     T.eq(Const(tile.tile_beats * BB, LB + 8) >> elog)]

        # stage 2: each dimension's properties
        col_ok = [reg((k < ndims) & (n_sst[k] == eb) & (n_val[k] == n_ext[k]) & (n_ext[k] > 1),
                      f"col_ok{k}") for k in range(4)]
        whole = [reg(n_val[k] == n_ext[k], f"whole{k}") for k in range(MAX_DIMS)]
        src_aligned = [reg((n_sst[k] & (BB - 1)) == 0, f"src_aligned{k}")
                       for k in range(MAX_DIMS)]
        ext0_small = reg(one_bit_set(n_ext[0]) & (n_ext[0] < L), "ext0_small")
        # (a compare with each of the four shifted extents, then the choice: no shifter in
        # front of the compare)
        d1_follows = reg(Array(n_dst[1] == (n_ext[0] << e) for e in range(4))[elog],
                         "d1_follows")
        d0_fits = reg((ndims >= 2) & (n_dst[0] == eb) & (n_ext[0] > 1) & (elog < LB), "d0_fits")
        # each source stride in elements (and whether it is a whole number of them), for the
        # test of stage 4 without a shift in front of its compare
        sst_el = [reg(n_sst[k] >> elog, f"sst_el{k}") for k in range(MAX_DIMS)]
        sst_whole = [reg((n_sst[k] & (eb - 1)) == 0, f"sst_whole{k}") for k in range(MAX_DIMS)]
        # stage 3: the column dimension
        col_c = Signal(3)
        for k in (3, 2, 1):
            with m.If(col_ok[k]):
                m.d.comb += col_c.eq(k)
        col_ext_c = Signal(count_width(aw))
        with m.Switch(col_c):
            for k in (1, 2, 3):
                with m.Case(k):
                    m.d.comb += col_ext_c.eq(n_ext[k])
        col = reg(col_c, "col")
        col_ext = reg(col_ext_c, "col_ext")
        g_rows = reg((col_c >= 2) & (ndims >= 3) & ext0_small & d1_follows, "g_rows")
        # stage 4: the columns' second dimension (0 for none), over two stages: which
        # dimensions continue the columns in the source (a stride of col_ext elements: wide
        # compares), then the first of them that is free
        cont = [reg(sst_whole[k] & (sst_el[k] == col_ext) & whole[k], f"cont{k}")
                for k in range(1, MAX_DIMS)]
        c_hi_c = Signal(3)
        for k in (4, 3, 2, 1):
            with m.If((k < ndims) & (col != k) & ~(g_rows & (k == 1)) & cont[k - 1]):
                m.d.comb += c_hi_c.eq(k)
        c_hi = reg(c_hi_c, "c_hi")
        col_small = reg(one_bit_set(col_ext), "col_small")
        col_under_t = reg(col_ext < T, "col_under_t")
        col_under_l = reg(col_ext < L, "col_under_l")
        s0_packed = reg(sst_whole[0] & (sst_el[0] == col_ext), "s0_packed")
        # stage 5: grouped columns, then the other dimensions, in order
        g_cols_c = (c_hi != 0) & col_small & col_under_t
        free_c = [Const(0)] + [(k < ndims) & (col != k) & ~(g_rows & (k == 1)) &
                               ~(g_cols_c & (c_hi == k)) for k in range(1, MAX_DIMS)]
        g_cols = reg(g_cols_c, "g_cols")
        free = [reg(f, f"free{k}") for k, f in enumerate(free_c)]
        # stage 6: the first two free dimensions; packed rows: rows shorter than a beat, one
        # after the other in the source, each beat of them starting on a beat boundary (the base
        # and the other dimensions' strides)
        o1_c = Signal(3)
        o2_c = Signal(3)
        for k in reversed(range(1, MAX_DIMS)):
            with m.If(free[k]):
                m.d.comb += o1_c.eq(k)
        for k in reversed(range(2, MAX_DIMS)):
            with m.If(free[k] & (k > o1_c)):
                m.d.comb += o2_c.eq(k)
        o1, o2 = reg(o1_c, "o1"), reg(o2_c, "o2")
        n_free = reg(sum(free[k] for k in range(1, MAX_DIMS)), "n_free")
        beat_aligned = src_low == 0
        for k in range(1, MAX_DIMS):
            beat_aligned = beat_aligned & (~free[k] | src_aligned[k])
        pack = reg(~g_rows & ~g_cols & col_small & col_under_l & s0_packed & beat_aligned,
                   "pack")
        r_hi = Mux(g_rows, Const(1, 3), 0)
        cols_hi = Mux(g_cols, c_hi, 0)
        # stage 7: the tile path's dimensions (registers without reset, like the stages
        # before: they follow the descriptor all the time), and the path
        t_dims = {}
        for f in ("ext", "val", "sst", "dstr"):
            t_dims[f] = [Signal.like(p, name=f"t_{f}{k}", reset_less=True)
                         for k, p in enumerate(getattr(tile, f))]
            m.d.comb += [p.eq(r) for p, r in zip(getattr(tile, f), t_dims[f], strict=True)]
        t_ext, t_val, t_sst, t_dst = (t_dims[f] for f in ("ext", "val", "sst", "dstr"))
        m.d.sync += [t_ext[0].eq(n_ext[0]), t_val[0].eq(n_val[0]), t_sst[0].eq(n_sst[0]),
                     t_dst[0].eq(n_dst[0])]
        # the dimension selects of the first three slots, in a copy per field
        # (hw.fabric.register_copies): one register's net would reach all 128 multiplexers of a slot
        def field_selects(value, name):
            bits = [register_copies(platform, m, value[b], 4, f"{name}{b}_f")
                    for b in range(len(value))]
            return [Cat(*(bits[b][f] for b in range(len(value)))) for f in range(4)]

        copied = {1: field_selects(col_c, "col"), 2: field_selects(o1_c, "o1"),
                  3: field_selects(o2_c, "o2")}
        fields = ((t_ext, n_ext, 1), (t_val, n_val, 1), (t_sst, n_sst, 0), (t_dst, n_dst, 0))
        for t_k, sel in enumerate([col, o1, o2, r_hi, cols_hi], start=1):
            for f, (t, n, unused) in enumerate(fields):
                with m.Switch(copied[t_k][f] if t_k in copied else sel):
                    with m.Case(0):             # slot unused: extent 1
                        m.d.sync += t[t_k].eq(unused)
                    for k in range(1, MAX_DIMS):
                        with m.Case(k):
                            m.d.sync += t[t_k].eq(n[k])
        m.d.sync += [tile.group_rows.eq(g_rows), tile.group_cols.eq(g_cols),
                     tile.pack_rows.eq(pack)]
        return d0_fits & (col != 0) & (n_free <= 2)
