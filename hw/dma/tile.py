"""The DMA's transpose path: a double-buffered tile buffer with skewed banks.

A descriptor whose innermost dimension (dim 0) is contiguous in the destination and one of
whose other dimensions (the *column* dimension) is contiguous in the source is a transpose:
walking it element by element reads one element per beat. This unit moves it a beat at a time
on both sides instead.

Tiles
    A tile is ``L`` rows (indices of dim 0, ``L = bus bytes / element bytes``) by ``T = K * L``
    columns (indices of the column dimension, ``K = tile_beats``). Each row is a contiguous run
    of ``T`` elements in the source: ``K`` beats, or ``K + 1`` when it does not start on a beat.
    Each column is a contiguous run of ``L`` elements in the destination: one beat, or two
    partial ones when it does not start on a beat. Tiles at the edges are smaller.

Skewed banks
    The buffer is ``bus bytes`` memories one byte wide, each read at its own address, so that a
    whole row beat goes in and a whole column beat comes out in one cycle. Element ``(a, b)``
    (row ``a``, column ``b = kb * L + i``) is held in element bank ``(a + i) mod L`` at address
    ``a * K + kb``: a row beat is rotated by ``a`` elements and written to every bank at one
    address; column ``b`` reads bank ``e`` at row ``(e - i) mod L`` and rotates the result
    back by ``i`` elements. Two halves, filled and drained alternately, let the reads of one
    tile overlap the writes of the previous one.

Small dimensions
    Three variants keep both sides at a beat per cycle when a dimension is shorter than a beat.

    - *Grouped rows* (``group_rows``): dimension 0 is a power of two under ``L`` and the next
      destination dimension (``ROWS_HI``) continues it, as the 8 channels and the lines of a
      DMP chunk do. Row ``a`` of a tile is index ``a mod E0`` of dimension 0 and
      ``a div E0`` of the next, so a column is still one destination beat.
    - *Grouped columns* (``group_cols``): the column dimension is a power of two under ``T``
      and another dimension (``COLS_HI``) continues it in the source. Column ``b`` is index
      ``b mod E1`` of the column dimension and ``b div E1`` of the other, so a row is still one
      contiguous run of the source.
    - *Packed rows* (``pack_rows``): rows of ``2**c`` elements, shorter than a beat, follow
      each other in the source from a beat boundary, so a beat holds ``P`` rows. The beat is
      written in one cycle with the skew ``f(a) = (a >> log2 P) + (a mod P) * 2**c`` in place
      of ``a`` (the beat's rows land in disjoint banks); a column reads bank ``e`` at row
      ``f^-1((e - i) mod L)`` and puts element ``a`` in place with a fixed permutation.

Stages
    The *row walker* steps through rows (row within tile, column tile, row tile, then the two
    remaining dimensions), additions only. The *beat generator* turns each row into a
    request for its run of source beats, and queues the row for the *fill* stage, which
    realigns the returning beats (a funnel shift by the row's offset in its first beat) or
    makes pad beats (rows past ``valid`` of their dimension) and writes them into the buffer.
    A full half is handed to the *drain* stage, which reads one column per cycle and sends it
    to the engine's write combiner as one or two pieces (beat address, data, byte strobes).

Ports
-----
Configuration (held from ``start`` until ``walk_free``): ``src``, ``dst``, ``elog`` (element bytes =
2**elog, less than the bus width), ``pad``, the flags above, and six dimensions in ``ext``, ``val``,
``sst``, ``dstr``: ``ROWS`` (destination stride = element bytes), ``COLS`` (source stride = element
bytes, ``val == ext``), ``OUTER1`` and ``OUTER2`` (the others), ``ROWS_HI`` and ``COLS_HI`` (the
grouped ones); unused ones as extent 1. ``start`` begins a walk, ``busy`` stays high until the last
piece has left.

Jobs run back to back: ``walk_free`` rises once the walk has taken its last row and the fill
and the drain have taken their copies of the job's configuration. From then on the
configuration inputs may change and ``start`` may begin the next job while this one's last
tiles still fill and drain; its reads begin at once, its first tile fills in the half the
last one's drain frees, and its pieces follow this job's in order (the last of each job
marked ``last``).

Streams: ``req`` (runs of beats to read, :func:`request_layout`, in order), ``rdata`` (the read
beats, in the same order), ``wr`` (pieces: ``addr`` of a beat, ``data``, ``strb``, ``last`` on
the job's final piece). ``read_bytes`` and ``written_bytes`` give the bytes a cycle's progress
adds to the job's counters. ``row_step`` is high in each cycle the walk takes a row (one row of
a row tile, or with ``pack_rows`` one beat of rows, for one column tile): what the tests count
to see that the walk takes no step the tensor does not need; nothing in the engine reads it.
"""

from amaranth import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.memory import Memory, ReadPort, WritePort
from amaranth.lib.wiring import In, Out

from ..bus.fifo import BufferedFIFO, RegisteredQueue, SkidBuffer, registered
from ..fabric import look_ahead, register_copies, registered_copy
from .timing import DmaTiming

DIMS = 6
ROWS, COLS, OUTER1, OUTER2, ROWS_HI, COLS_HI = range(DIMS)


def piece_layout(addr_width: int, data_width: int) -> data.StructLayout:
    return data.StructLayout({"addr": addr_width, "data": data_width,
                              "strb": data_width // 8, "last": 1})


def count_width(addr_width: int) -> int:
    """The bits of an extent or valid count that passed the front end's checks, with
    ``addr_width`` address bits: it is at most ``2**addr_width``, as a dimension of extent 2 or
    more strides its destination by an element at least and the destination lies below
    ``2**addr_width`` (and valid is at most the extent). At 32 bits, the registers' 32."""
    return min(32, addr_width + 1)


def path_ports(*, data_width, addr_width, dims):
    """The ports every mid-end path has (see the module's docstring): the descriptor, start
    and busy, the three beat streams and the byte counts. Checks ``data_width``."""
    if data_width not in (64, 128, 256):
        raise ValueError(f"data_width must be 64, 128 or 256, not {data_width!r}")
    aw = addr_width
    cw = count_width(aw)
    return {
        "src": In(aw), "dst": In(aw), "elog": In(2), "pad": In(64),
        "ext": In(cw).array(dims), "val": In(cw).array(dims),
        "sst": In(aw).array(dims), "dstr": In(aw).array(dims),
        "start": In(1), "busy": Out(1),
        "req": Out(stream.Signature(request_layout(aw, data_width))),
        "rdata": In(stream.Signature(data_width)),
        "wr": Out(stream.Signature(piece_layout(aw, data_width))),
        "read_bytes": Out(35),
        "written_bytes": Out(35),
    }


def pad_pattern(m, pad, elog, nbytes):
    """A beat of pad elements: byte ``i`` is byte ``i mod element bytes`` of ``pad``."""
    out = Signal(8 * nbytes)
    with m.Switch(elog):
        for e in range(4):
            with m.Case(e):
                m.d.comb += out.eq(Cat(*[(pad >> (8 * (i % (1 << e))))[:8]
                                         for i in range(nbytes)]))
    return out


def low_bytes(m, n, nbytes):
    """A mask of ``nbytes`` bits, the low ``n`` (0 to ``nbytes``) set: a beat's bytes below
    byte ``n``."""
    # a table on n's low bits (n at or over nbytes: all set), not (1 << n) - 1, whose
    # subtract Yosys builds as a carry chain
    n = Value.cast(n)
    w = min(nbytes.bit_length(), len(n))
    table = Signal(nbytes)
    with m.Switch(n[:w]):
        for v in range(1 << w):
            with m.Case(v):
                m.d.comb += table.eq((1 << min(v, nbytes)) - 1)
    if len(n) <= w:
        return table
    mask = Signal(nbytes)
    m.d.comb += mask.eq(Mux(n[w:].any(), (1 << nbytes) - 1, table))
    return mask


def byte_bits(mask):
    """A byte mask widened to the bits of those bytes."""
    return Cat(*[bit.replicate(8) for bit in mask])


def rotate_right_bytes(value, amount, nbytes):
    """``value`` (``nbytes`` bytes) rotated right by ``amount`` bytes (0 <= amount < nbytes)."""
    return (Cat(value, value) >> (amount * 8))[:nbytes * 8]


def request_layout(addr_width: int, data_width: int) -> data.StructLayout:
    """A read request, as every path hands it to the back end: a run of consecutive beats (the
    first beat's address in beats, and how many, at least 1). A run lies inside the address
    space, so its count needs the beat address's bits and one more."""
    beat_bits = addr_width - (data_width // 8 - 1).bit_length()
    return run_layout(addr_width, data_width // 8, beat_bits + 1)


def tile_layout(addr_width: int, bus_bytes: int, tile_beats: int) -> data.StructLayout:
    """A filled tile, as the fill hands it to the drain: its half of the buffer, its first
    column's destination, its columns and rows, and whether it is the job's last."""
    LB = (bus_bytes - 1).bit_length()
    KB = (tile_beats - 1).bit_length()
    return data.StructLayout({"half": 1, "dst": addr_width, "ncols": LB + KB + 1, "one_col": 1,
                              "nrows": LB + 1, "last": 1})


def drain_config_layout(addr_width: int, bus_bytes: int, tile_beats: int) -> data.StructLayout:
    """What the drain reads of the job's configuration (:class:`TileTransposer`'s registers):
    elements per beat ``L`` and log2 of it, log2 of the packed rows per beat and of the columns'
    first dimension, the packed and grouped-columns flags, the element size (the tile's register
    and the descriptor's), the columns' extent, destination stride and grouped wrap."""
    LB = (bus_bytes - 1).bit_length()
    KB = (tile_beats - 1).bit_length()
    return data.StructLayout({
        "L": LB + 1, "lgl": range(LB + 1), "lgp": range(LB + 1), "lgc": range(LB + KB + 1),
        "pack": 1, "g_cols": 1, "elog": 2, "desc_elog": 2, "cols_ext": count_width(addr_width),
        "col_stride": addr_width, "col_wrap": addr_width})


def row_layout(addr_width: int, bus_bytes: int, tile_beats: int) -> data.StructLayout:
    """A walked row, as the walker queues it for the fill: its offset in its first source
    beat (and whether that is zero), the beats it reads and writes (and whether that is one),
    its row in the tile, whether it has a source (else it is pad), whether it is its tile's and
    the job's last, its tile's destination, columns and rows, and (packed) its beat's rows
    with a source."""
    LB = (bus_bytes - 1).bit_length()
    KB = (tile_beats - 1).bit_length()
    return data.StructLayout({
        "offset": LB, "aligned": 1, "nbeats": KB + 2, "nout": KB + 2, "one": 1, "a": LB,
        "has": 1, "tile_last": 1, "job_last": 1, "dst": addr_width, "ncols": LB + KB + 1,
        "nrows": LB + 1, "nsrc": LB + 1})


def fill_config_layout(bus_bytes: int, tile_beats: int) -> data.StructLayout:
    """What the fill reads of the job's configuration: elements per beat ``L``, log2 of the
    packed rows per beat, of the columns' first dimension and of a packed row's bytes, the
    packed flag, the element size and the pad element."""
    LB = (bus_bytes - 1).bit_length()
    KB = (tile_beats - 1).bit_length()
    return data.StructLayout({
        "L": LB + 1, "lgp": range(LB + 1), "lgc": range(LB + KB + 1),
        "lgce": range(LB + KB + 4), "pack": 1, "elog": 2, "pad": 64})


def unpack_column(m, column, out, sel, lgp_width, nbytes):
    """Packed rows: drive ``out`` with ``column`` (a drained column, rotated back) with each
    element ``a`` taken from its place ``f(a)`` in the packed skew (see the module's docstring).
    ``sel`` is log2 of the rows a beat holds, with the element size's log2 above its
    ``lgp_width`` bits; a value of none of the cases (0 when not packed) leaves ``out`` as the
    caller drove it."""
    with m.Switch(sel):
        for e in range(4):
            n_el = nbytes >> e
            lg_n = n_el.bit_length() - 1
            for p_ in range(1, lg_n + 1):
                with m.Case(p_ | (e << lgp_width)):
                    order = []
                    for a_ in range(n_el):
                        f_a = (a_ >> p_) + ((a_ & ((1 << p_) - 1)) << (lg_n - p_))
                        order += [column.word_select(f_a * (1 << e) + j, 8)
                                  for j in range(1 << e)]
                    m.d.comb += out.eq(Cat(*order))


def bank_addr_width(bus_bytes: int, tile_beats: int) -> int:
    """A byte bank's address bits: half, row in the tile, beat in the row."""
    return (tile_beats - 1).bit_length() + (bus_bytes - 1).bit_length() + 1


class TilePart(wiring.Component):
    """What the tile path and its parts share: ``data_width``, ``addr_width`` and
    ``tile_beats`` (checked by :class:`TileTransposer`), and :attr:`sizes` from them."""

    def __init__(self, members, *, data_width, addr_width, tile_beats):
        self.data_width = data_width
        self.addr_width = addr_width
        self.tile_beats = tile_beats
        super().__init__(members)

    @property
    def sizes(self):
        """(bus bits ``W``, bus bytes ``BB``, log2 of them ``LB``, ``tile_beats`` ``K``, log2
        of it ``KB``)"""
        BB = self.data_width // 8
        K = self.tile_beats
        return self.data_width, BB, (BB - 1).bit_length(), K, (K - 1).bit_length()


class TileFill(TilePart):
    """The transpose path's fill: takes the walked rows and the read beats, realigns each row's
    beats (a funnel shift by its offset in its first beat) or makes pad beats (a row without a
    source), and writes each beat, rotated by the row's skew, into every byte bank of the half
    being filled. A half whose last row is written goes to the drain as a tile.

    Ports: ``config`` (a stream of :func:`fill_config_layout`: each job's, taken once the job
    before it has written its last row, and kept until this job's last row is loaded), ``rows``
    (:func:`row_layout`), ``rdata`` (the read beats, in the rows' order), ``full`` (the halves
    holding a tile not yet drained: the fill waits for its half to be free), ``banks`` (a write
    port per byte bank), ``tiles`` (filled tiles, :func:`tile_layout`; the queue behind holds
    both halves, so the fill does not read its ready), ``read_bytes`` (the bytes of a finished
    row), ``busy``."""

    def __init__(self, *, data_width, addr_width, tile_beats):
        BB = data_width // 8
        super().__init__({
            "config": In(stream.Signature(fill_config_layout(BB, tile_beats))),
            "rows": In(stream.Signature(row_layout(addr_width, BB, tile_beats))),
            "rdata": In(stream.Signature(data_width)),
            "full": In(2),
            "banks": In(WritePort.Signature(addr_width=bank_addr_width(BB, tile_beats),
                                            shape=8)).array(BB),
            "tiles": Out(stream.Signature(tile_layout(addr_width, BB, tile_beats))),
            "read_bytes": Out(35),
            "busy": Out(1),
        }, data_width=data_width, addr_width=addr_width, tile_beats=tile_beats)

    def elaborate(self, platform):
        m = Module()
        W, BB, LB, K, KB = self.sizes
        # the job's configuration, a copy of its own: the walk may have moved on to the next
        # job while this one's rows are still filled. `cfg_live`: the copy is this job's and
        # its last row is not loaded yet
        cfg = Signal(self.config.payload.shape())
        cfg_live = Signal()
        L, lgp, lgc, lgce, pack, elog = cfg.L, cfg.lgp, cfg.lgc, cfg.lgce, cfg.pack, cfg.elog
        full = self.full

        h_fill = Signal()
        # the row being filled: the queue's head, copied into registers as the row before it
        # ends, with what the fill derives from it (the packed beat's bytes with a source, the
        # bytes the row reads, its rotation into the banks and each bank's place in a packed
        # beat), so none of that arithmetic lies in front of the fill's decisions
        rows = self.rows
        head = rows.payload
        fields = Signal(rows.payload.shape())
        f_v = Signal()
        f_keep = Signal(BB)
        f_read = Signal(LB + KB + 5)
        f_rot = Signal(LB)                    # the rotation of the row's beats into the banks
        f_place = [Signal(LB, name=f"f_place{k}") for k in range(BB)]
        row_done = Signal()
        load = rows.valid & cfg_live & (~f_v | row_done)
        w_valid = Signal()
        # the next job's configuration is taken once the last row is written (nothing in flight
        # reads the copy then)
        m.d.comb += self.config.ready.eq(~cfg_live & ~f_v & ~w_valid)
        with m.If(self.config.valid & self.config.ready):
            m.d.sync += [cfg.eq(self.config.payload), cfg_live.eq(1)]
        with m.If(load & head.job_last):
            m.d.sync += cfg_live.eq(0)
        keep_n = Signal(LB + KB + 5)
        skew = Signal(LB)                     # the row's skew in the banks
        m.d.comb += skew.eq(Mux(pack, head.a >> lgp, head.a))
        m.d.comb += [rows.ready.eq(load), keep_n.eq(head.nsrc << lgce)]
        with m.If(load):
            m.d.sync += [f_v.eq(1), fields.eq(head), f_keep.eq(low_bytes(m, keep_n, BB)),
                         f_read.eq(Mux(pack, keep_n, Mux(head.has, head.ncols << elog, 0))),
                         f_rot.eq((BB - (skew << elog))[:LB])]
            # packed: each bank's element's place in the beat, before the rotation
            m.d.sync += [f_place[k].eq(((Const(k, LB) >> elog) - skew) & (L - 1))
                         for k in range(BB)]
        with m.Elif(row_done):
            m.d.sync += f_v.eq(0)
        # the counters' tests are registers, set as the counters step (the row's first values
        # from its entry), so the decision to write is a few gates from registers
        j = Signal(KB + 2)                    # beats of the row taken
        kb = Signal(KB + 2)                   # beats of the row written
        kb_zero = Signal(init=1)              # kb == 0
        kb_end = Signal()                     # kb + 1 == nout (once kb > 0)
        kb_last = Mux(kb_zero, fields["one"], kb_end)
        prev = Signal(W)
        can_fill = f_v & ~full.bit_select(h_fill, 1)
        # the row's bytes from its offset on; after its last beat, what follows `prev` lies
        # past the row's end (columns that are never drained)
        funnel = (Cat(prev, self.rdata.payload) >> (fields["offset"] * 8))[:W]
        pad_elem = pad_pattern(m, cfg.pad, elog, BB)
        fill_data = Signal(W)
        write = Signal()
        take_beat = Signal()
        # what the next fill step does, as registers set as the row loads and as it takes a
        # beat (so the decision to take and write is a few gates from registers): a row with
        # a source whose beats land whole (packed or aligned) writes each beat it takes; an
        # unaligned one takes its first beat without writing, writes on each beat after that
        # and, after its last beat, writes the funnel's tail without a beat; a row without a
        # source writes pad
        whole = Signal()                      # the row's beats land whole (pack or aligned)
        on_beat = Signal()                    # take a beat and write
        first_beat = Signal()                 # take a beat, write nothing
        no_beat = Signal()                    # write without a beat
        with m.If(can_fill):
            with m.If(on_beat):
                m.d.comb += [write.eq(self.rdata.valid), take_beat.eq(self.rdata.valid)]
            with m.If(first_beat):
                m.d.comb += take_beat.eq(self.rdata.valid)
            with m.If(no_beat):
                m.d.comb += write.eq(1)
        # rows past a packed beat's last with a source are pad (``keep_bits``, applied as the
        # beat is registered for the write)
        m.d.comb += fill_data.eq(Mux(~fields["has"], pad_elem,
                                     Mux(whole, self.rdata.payload, funnel)))
        m.d.comb += self.rdata.ready.eq(take_beat)
        more = Signal()                       # j + 1 < nbeats: a beat follows this one
        with m.If(take_beat):
            m.d.sync += [prev.eq(self.rdata.payload), j.eq(j + 1),
                         on_beat.eq(whole | more), first_beat.eq(0),
                         no_beat.eq(~whole & ~more), more.eq(j + 2 < fields["nbeats"])]
        with m.If(load):
            whole_head = pack | head.aligned
            m.d.sync += [whole.eq(whole_head), on_beat.eq(head.has & whole_head),
                         first_beat.eq(head.has & ~whole_head), no_beat.eq(~head.has),
                         more.eq(head.nbeats > 1)]
        m.d.comb += row_done.eq(write & kb_last)
        with m.If(write):
            m.d.sync += [kb.eq(kb + 1), kb_zero.eq(0), kb_end.eq(kb + 2 == fields["nout"])]
        # a finished tile goes to the drain with its last write (below), a cycle later. (The
        # tiles' queue holds both halves, so it always has room: its ready is not read)
        tile_v = self.tiles.valid
        tile_d = self.tiles.payload
        m.d.sync += [tile_v.eq(row_done & fields["tile_last"]), tile_d.half.eq(h_fill),
                     tile_d.dst.eq(fields["dst"]), tile_d.ncols.eq(fields["ncols"]),
                     tile_d.one_col.eq(fields["ncols"] == 1),
                     tile_d.nrows.eq(fields["nrows"]), tile_d.last.eq(fields["job_last"])]
        # the bytes a row read, counted a cycle after it is done (the job is busy until its
        # write has left stage w)
        read_r = Signal.like(f_read)
        m.d.sync += read_r.eq(Mux(row_done, f_read, 0))
        m.d.comb += self.read_bytes.eq(read_r)
        with m.If(row_done):
            m.d.sync += [j.eq(0), kb.eq(0), kb_zero.eq(1)]
            with m.If(fields["tile_last"]):
                m.d.sync += h_fill.eq(~h_fill)
        # the buffer write, a stage later: the rotation and the banks' write ports are fed
        # from registers; the row's rotation and each bank's place in a packed beat were
        # worked out as the row was loaded
        keep_bits = Mux(pack & fields["has"], byte_bits(f_keep), Const(-1, W))
        w_data = Signal(W)
        w_rot = Signal(LB)
        m.d.sync += [w_valid.eq(write),
                     w_data.eq((fill_data & keep_bits) | (pad_elem & ~keep_bits)),
                     w_rot.eq(f_rot)]
        rotated = rotate_right_bytes(w_data, w_rot, BB)
        for k, wp in enumerate(self.banks):
            # packed: the bank's element came from row a + (its place in the beat) >> lgc
            w_row = Signal(LB, name=f"w_row{k}")
            m.d.comb += w_row.eq(Mux(pack, fields["a"] + (f_place[k] >> lgc), fields["a"]))
            w_addr = Signal(len(wp.addr), name=f"w_addr{k}")
            m.d.sync += w_addr.eq(Cat(kb[:KB], w_row, h_fill) if K > 1 else Cat(w_row, h_fill))
            m.d.comb += [wp.addr.eq(w_addr), wp.en.eq(w_valid),
                         wp.data.eq(rotated[8 * k:8 * k + 8])]
        m.d.comb += self.busy.eq(f_v | w_valid | tile_v)
        return m


class TileDrain(TilePart):
    """The transpose path's drain: reads a filled tile from the skewed banks one column per
    cycle and sends each column to the write side as one or two pieces (a column that does not
    start on a beat spans two).

    Ports: ``config`` (a stream of :func:`drain_config_layout`: each job's, taken once the job
    before it has issued its last column, and in use ``CFG_SETTLE`` cycles later), ``tiles``
    (filled tiles, :func:`tile_layout`: the head is the tile being drained, taken as its last
    column is read, which frees its half), ``banks`` (a read port per byte bank, the buffer's
    address: half, row, beat), ``wr`` (pieces, :func:`piece_layout`), ``written_bytes`` (the
    bytes a cycle's pieces complete), ``busy`` (a column is in flight). ``columns_in_flight``:
    columns read and not yet sent, at most (:class:`~.timing.DmaTiming`)."""

    #: cycles from taking a configuration to the first column issued with it: the bank rows of
    #: column 0 are worked out from it in two stages of registers, and the read address is a
    #: register loaded from them
    CFG_SETTLE = 3

    def __init__(self, *, data_width, addr_width, tile_beats, columns_in_flight):
        BB = data_width // 8
        self.columns_in_flight = columns_in_flight
        super().__init__({
            "config": In(stream.Signature(drain_config_layout(addr_width, BB, tile_beats))),
            "tiles": In(stream.Signature(tile_layout(addr_width, BB, tile_beats))),
            "banks": In(ReadPort.Signature(addr_width=bank_addr_width(BB, tile_beats),
                                           shape=8)).array(BB),
            "wr": Out(stream.Signature(piece_layout(addr_width, data_width))),
            "written_bytes": Out(35),
            "busy": Out(1),
        }, data_width=data_width, addr_width=addr_width, tile_beats=tile_beats)

    def elaborate(self, platform):
        m = Module()
        W, BB, LB, K, KB = self.sizes
        aw = self.addr_width
        # the job's configuration, a copy of its own (the walk and the fill may have moved on
        # to the next job). `cfg_live`: the copy is this job's and its last column is not issued
        # yet; `cfg_ok`, a register: besides, the stages worked out from it have settled
        cfg = Signal(self.config.payload.shape())
        cfg_live = Signal()
        cfg_wait = Signal(range(self.CFG_SETTLE + 1))
        cfg_ok = Signal()
        L, lgl, lgp, lgc, pack, g_cols, elog = (cfg.L, cfg.lgl, cfg.lgp, cfg.lgc, cfg.pack,
                                                 cfg.g_cols, cfg.elog)

        def reg(value, name, shape=None):
            return registered(m, value, name, shape)

        t = self.tiles.payload
        t_half, t_dst, t_ncols, t_nrows, t_last = t.half, t.dst, t.ncols, t.nrows, t.last
        b = Signal(LB + KB + 1)               # column being read
        col_dst = Signal(aw)
        s_v = Signal()                        # a column is out of the banks
        s_rot = Signal(LB)
        s_dst = Signal(aw)
        s_bytes = Signal(LB + 1)
        s_last = Signal()
        bmod = b & (L - 1)
        # a second stage, q: the banks' read data is registered before the rotations (a block
        # RAM's clock-to-out leaves too little of the cycle for them), and so are the strobes
        # and the two pieces' addresses, worked out from stage s. q puts the column in row
        # order into a small queue, whose head is sent as one or two pieces.
        #
        # Stages s and q never wait: a column is issued only while the queue is sure to have
        # room for it (a count of the columns issued and not yet sent, against the queue's
        # depth, as a register). So the decision to issue a column is a register and the
        # tiles' handshake, and nothing from the pieces' ready reaches the many registers the
        # issue loads.
        q_v = Signal()
        q_raw = Signal(W)
        q_rot = Signal(LB)
        q_od = Signal(LB)
        q_beat = Signal(aw - LB)              # the first piece's beat
        q_beat_hi = Signal(aw - LB)           # the second's
        q_strb = Signal(2 * BB)               # the two pieces' strobes
        q_two = Signal()                      # the column spans two beats
        q_bytes = Signal(LB + 1)
        q_last = Signal()
        col_rot = Signal(W)
        m.d.comb += col_rot.eq(rotate_right_bytes(q_raw, q_rot, BB))
        # packed: element a of the column is at f(a) after the rotation. The choice is a
        # configuration register of its own (zero when not packed, a case of none), beside these
        # multiplexers, so that the descriptor's elog does not cross the die into the column queue
        col_out = Signal(W)
        m.d.comb += col_out.eq(col_rot)
        pack_sel = reg(Mux(pack, Cat(lgp, cfg.desc_elog), 0), "pack_sel", len(lgp) + 2)
        unpack_column(m, col_rot, col_out, pack_sel, len(lgp), BB)
        column = data.StructLayout({"col": W, "od": LB, "beat": aw - LB, "beat_hi": aw - LB,
                                    "strb": 2 * BB, "two": 1, "bytes": LB + 1, "last": 1})
        # issue to the head's first piece is about five cycles (s, q, the queue's two)
        COLS_IN_FLIGHT = self.columns_in_flight
        cols = m.submodules.cols = BufferedFIFO(width=column.size, depth=COLS_IN_FLIGHT)
        queued_col = data.View(column, cols.w_data)
        m.d.comb += [cols.w_en.eq(q_v), queued_col.col.eq(col_out), queued_col.od.eq(q_od),
                     queued_col.beat.eq(q_beat), queued_col.beat_hi.eq(q_beat_hi),
                     queued_col.strb.eq(q_strb), queued_col.two.eq(q_two),
                     queued_col.bytes.eq(q_bytes), queued_col.last.eq(q_last)]
        head_col = data.View(column, cols.r_data)
        p_hi = Signal()                       # sending the second piece of the head's column
        p_final = p_hi | ~head_col.two        # the piece offered is the column's last
        # the pieces leave through a register slice: nothing here reaches the mid end's path
        # select or the engine's write slice in the same cycle
        out_slice = m.submodules.wr_slice = SkidBuffer(piece_layout(aw, W))
        wiring.connect(m, out_slice.o, wiring.flipped(self.wr))
        out = out_slice.i
        # the column goes to destination bytes od onwards: the first piece holds its low
        # BB - od bytes, the second the rest, so both carry the column rotated left by od bytes
        # (the strobes say which bytes count)
        sent_piece = cols.r_rdy & out.ready
        p_done = sent_piece & p_final         # the head's column is sent
        m.d.comb += [out.valid.eq(cols.r_rdy),
                     out.payload.addr.eq(Cat(Const(0, LB),
                                             Mux(p_hi, head_col.beat_hi, head_col.beat))),
                     out.payload.data.eq(rotate_right_bytes(head_col.col,
                                                            (BB - head_col.od)[:LB], BB)),
                     out.payload.strb.eq(Mux(p_hi, head_col.strb[BB:], head_col.strb[:BB])),
                     out.payload.last.eq(head_col.last & p_final),
                     self.written_bytes.eq(Mux(p_done, head_col.bytes, 0)),
                     cols.r_en.eq(p_done)]
        with m.If(sent_piece):
            m.d.sync += p_hi.eq(~p_final)
        # columns issued and not yet sent, and whether another may be issued (a register)
        in_flight = Signal(range(COLS_IN_FLIGHT + 1))
        room = Signal()
        issue = Signal()
        flight_next = Signal(range(COLS_IN_FLIGHT + 2))
        m.d.comb += flight_next.eq(in_flight + issue - p_done)
        m.d.sync += [in_flight.eq(flight_next), room.eq(flight_next < COLS_IN_FLIGHT)]
        m.d.comb += issue.eq(room & self.tiles.valid & cfg_ok)
        strb = low_bytes(m, s_bytes, BB)
        wide_strb = Signal(2 * BB)
        m.d.comb += wide_strb.eq(Cat(strb, Const(0, BB)) << s_dst[:LB])
        m.d.sync += [q_v.eq(s_v), q_raw.eq(Cat(*[rp.data for rp in self.banks])),
                     q_rot.eq(s_rot), q_od.eq(s_dst[:LB]), q_beat.eq(s_dst[LB:]),
                     q_beat_hi.eq(s_dst[LB:] + 1), q_strb.eq(wide_strb),
                     q_two.eq(wide_strb[BB:] != 0), q_bytes.eq(s_bytes),
                     q_last.eq(s_last)]
        # whether b is the tile's last column, from registers: b == 0 and b + 1 == ncols
        # (for b > 0) are set as b steps, and a tile of one column says so in its entry
        b_zero = Signal(init=1)
        b_end = Signal()
        col_last = Mux(b_zero, t.one_col, b_end)

        def skews(col):
            """For column ``col``, each bank's (bank - skew) mod L."""
            return [((Const(k, LB) >> elog) - (col & (L - 1))) & (L - 1) for k in range(BB)]

        def bank_row(x):
            """The row a bank reads for its (bank - skew) mod L: that, or packed the row whose
            f is that."""
            return Mux(pack, ((x & (cfg.cols_ext - 1)) << lgp) | (x >> lgc), x)[:LB]

        def regs(name, n, width):
            return [Signal(width, name=f"{name}{k}") for k in range(n)]

        # The banks' read addresses are registers that follow b. Column c reads byte bank k at
        # row T((k >> elog) - c mod L), T being bank_row (a fixed permutation for the job), so
        # column c + 1's rows are column c's moved up one element's banks: a rotation by a
        # fixed amount per element size, with no arithmetic. Column 0's rows are configuration
        # registers, set while b is 0 and after a tile's last column. Beside them, the beat in
        # the row for the column after b, also a register. So no address arithmetic lies between
        # b and the block RAMs or behind the decision to step.
        rows_r = regs("row", BB, LB)
        bdiv_r = Signal(max(KB, 1))
        bdiv_next = Signal(max(KB, 1))
        rows_0 = regs("row_first", BB, LB)
        # (column 0's skews, then their rows: two configuration stages, as the skews take
        # L - 1 and the rows two shifts)
        skews_0 = regs("skew_first", BB, LB)
        bdiv_0, bdiv_1 = Signal(max(KB, 1)), Signal(max(KB, 1))
        m.d.sync += [*(s.eq(x) for s, x in zip(skews_0, skews(Const(0, LB)), strict=True)),
                     *(r.eq(bank_row(x)) for r, x in zip(rows_0, skews_0, strict=True)),
                     bdiv_0.eq(0), bdiv_1.eq(Const(1, 2) >> lgl)]
        rows_step = regs("row_step", BB, LB)
        with m.Switch(elog):
            for e in range(4):
                with m.Case(e):
                    if (1 << e) < BB:
                        m.d.comb += [r.eq(rows_r[(k - (1 << e)) % BB])
                                     for k, r in enumerate(rows_step)]
        with m.If(issue):
            m.d.sync += [*(r.eq(Mux(col_last, r0, rn))
                           for r, r0, rn in zip(rows_r, rows_0, rows_step, strict=True)),
                         bdiv_r.eq(Mux(col_last, bdiv_0, bdiv_next)),
                         bdiv_next.eq(Mux(col_last, bdiv_1, (b + 2) >> lgl))]
        with m.Elif(b_zero):
            m.d.sync += [*(r.eq(r0) for r, r0 in zip(rows_r, rows_0, strict=True)),
                         bdiv_r.eq(bdiv_0), bdiv_next.eq(bdiv_1)]
        for row_k, rp in zip(rows_r, self.banks, strict=True):
            r_addr = Cat(bdiv_r[:KB], row_k, t_half) if K > 1 else Cat(row_k, t_half)
            m.d.comb += rp.addr.eq(r_addr)
        c_mask = reg(cfg.cols_ext - 1, "c_mask", LB + KB)
        # the next column's destination, both ways (past the grouped columns' wrap or not) summed
        # apart and chosen by b's test after, so the test does not lie in front of the adder
        col_base = Mux(b_zero, t_dst, col_dst)
        col_wraps = g_cols & ((b & c_mask) == c_mask)
        m.d.sync += s_v.eq(issue)
        with m.If(issue):
            m.d.sync += [s_rot.eq(bmod << elog), s_dst.eq(col_base),
                         s_bytes.eq(t_nrows << elog), s_last.eq(t_last & col_last),
                         col_dst.eq(Mux(col_wraps, col_base + cfg.col_wrap,
                                        col_base + cfg.col_stride))]
            with m.If(col_last):
                m.d.sync += [b.eq(0), b_zero.eq(1)]
            with m.Else():
                m.d.sync += [b.eq(b + 1), b_zero.eq(0), b_end.eq(b + 2 == t_ncols)]
        # the next job's configuration is taken once the last column of the job before it has
        # left stages s and q (which read the copy)
        m.d.comb += self.config.ready.eq(~cfg_live & ~s_v & ~q_v)
        with m.If(self.config.valid & self.config.ready):
            m.d.sync += [cfg.eq(self.config.payload), cfg_live.eq(1),
                         cfg_wait.eq(self.CFG_SETTLE)]
        with m.Elif(cfg_wait != 0):
            m.d.sync += cfg_wait.eq(cfg_wait - 1)
            with m.If(cfg_wait == 1):
                m.d.sync += cfg_ok.eq(1)
        with m.If(issue & col_last & t_last):
            m.d.sync += [cfg_live.eq(0), cfg_ok.eq(0)]
        # the tile leaves (its half is free) as its last column is issued
        m.d.comb += [self.tiles.ready.eq(room & col_last & cfg_ok),
                     self.busy.eq((in_flight != 0) | out_slice.o.valid)]
        return m


# a walker counter's choice each row: keep, step, or set to its first value
_KEEP, _STEP, _INIT = 0, 1, 2


def walk_counter(m, reg, name, shape, step, init, tests, firsts=None):
    """The row walker's counters (in module ``m``, its configuration registers made by
    ``reg``): a counter kept with ``tests`` ({name: (function of a value, shape)}), whose
    registers are returned with the counter and its choice (``_KEEP``, ``_STEP`` or ``_INIT``), and
    under ``"next"`` the values they take at the next clock edge. A test
    given as (function of a value, function of the value *before* a step, shape) takes
    the second on a step, so no subtract lies in front of its comparison. ``firsts``
    ({name: register}) gives a test's first value worked out by the caller, whose
    function of a value is then None; ``"stepped"`` and ``"first"`` hold the tests of
    the stepped and the first value. A test given as (function of a value, function
    of the value before a step, function of the value before two steps, shape) keeps
    its stepped test as a register too, worked out at each step from the value before
    it (or at the start from ``init``), so that test reaches the walker's choices from
    a flip-flop and not from a compare."""
    value = Signal(shape, name=name)
    choice = Signal(2, init=_KEEP, name=f"{name}_choice")
    held = {t: Signal(spec[-1], name=f"{name}_{t}") for t, spec in tests.items()}
    # each test's next value, for registers that follow it; the tests of the first
    # value are configuration registers (``init`` is held while the job runs), so the
    # choice selects between registers and the stepped tests: no operator of one test
    # is shared between the two and put behind the choice
    nxt = {t: Signal(spec[-1], name=f"{name}_{t}_next") for t, spec in tests.items()}
    held["stepped"], held["first"] = {}, {}
    for t, spec in tests.items():
        stepped = Signal(spec[-1], name=f"{name}_{t}_stepped")
        if len(spec) == 4:
            ahead = reg(spec[1](init), f"{name}_{t}_stepped_first", spec[-1])
            with m.If(choice == _STEP):
                m.d.sync += stepped.eq(spec[2](value))
            with m.If(choice == _INIT):
                m.d.sync += stepped.eq(ahead)
        else:
            m.d.comb += stepped.eq(spec[1](value) if len(spec) == 3 else
                                   spec[0](step(value)))
        if firsts and t in firsts:
            first = firsts[t]
        else:
            first = reg(spec[0](init), f"{name}_{t}_first", spec[-1])
        held["stepped"][t], held["first"][t] = stepped, first
        m.d.comb += nxt[t].eq(held[t])
        with m.If(choice == _STEP):
            m.d.comb += nxt[t].eq(stepped)
        with m.If(choice == _INIT):
            m.d.comb += nxt[t].eq(first)
        m.d.sync += held[t].eq(nxt[t])
    held["next"] = nxt
    with m.If(choice == _STEP):
        m.d.sync += value.eq(step(value))
    with m.If(choice == _INIT):
        m.d.sync += value.eq(init)
    return value, held, choice


def walk_config_layout(addr_width: int, bus_bytes: int, tile_beats: int) -> data.StructLayout:
    """What the row walker reads of the job's configuration (:class:`TileTransposer`'s
    registers): elements per beat ``L`` and columns per tile ``T``, log2 of ``L``, of the
    rows' and of the columns' first dimension, the grouped rows' shift and index mask, the rows
    and columns in all and the rows with a source, the valid rows of a tile's first dimension,
    the grouped rows' source wrap, the row step (1, or packed the rows of a beat) and twice
    it, ``L`` plus it, and the three flags."""
    LB = (bus_bytes - 1).bit_length()
    KB = (tile_beats - 1).bit_length()
    return data.StructLayout({
        "L": LB + 1, "T": LB + KB + 1, "lgl": range(LB + 1), "lg0": range(LB + 1),
        "lgc": range(LB + KB + 1), "sh0": range(LB + 1), "lo_mask": LB, "rows_total": 38,
        "cols_total": 43, "vrem_init": count_width(addr_width), "v_lo": LB + 1,
        "row_wrap": addr_width, "a_step": LB + 1, "a_step2": LB + 2, "L_a_step": LB + 3,
        "pack": 1, "g_rows": 1, "g_cols": 1})


def run_layout(addr_width: int, bus_bytes: int, count_width: int) -> data.StructLayout:
    """A run of beats to read: the first beat's address in beats, and how many."""
    return data.StructLayout({"beat": addr_width - (bus_bytes - 1).bit_length(),
                              "n": count_width})


class RowWalker(TilePart):
    """The transpose path's row walker: steps through the rows of a job (row within tile,
    column tile, row tile, then the two remaining dimensions) with additions only, and for each
    row queues its entry for the fill and, if it has a source, its run of beats for the beat
    generator.

    Parameters: ``data_width``, ``addr_width`` and ``tile_beats`` as the path's;
    ``room_ahead``: ``rows_room_next`` says the row queue's room a cycle ahead (a queue of 4
    entries or more has it), else its ``ready`` is used as it is.

    Ports: the descriptor (``src``, ``dst``, ``elog``, ``ext``, ``val``, ``sst``, ``dstr``,
    held while busy), ``config`` (:func:`walk_config_layout`), ``start``, ``rows``
    (:func:`row_layout`), ``runs`` (:func:`run_layout`), ``rows_room_next`` and
    ``runs_room_next`` (the row queue's and the runs' slice's ready in the next cycle),
    ``busy`` (walking), ``row_step`` (a row taken)."""

    def __init__(self, *, data_width, addr_width, tile_beats, room_ahead):
        self.room_ahead = room_ahead
        BB = data_width // 8
        aw, cw = addr_width, count_width(addr_width)
        KB = (tile_beats - 1).bit_length()
        super().__init__({
            "src": In(aw), "dst": In(aw), "elog": In(2),
            "ext": In(cw).array(DIMS), "val": In(cw).array(DIMS),
            "sst": In(aw).array(DIMS), "dstr": In(aw).array(DIMS),
            "config": In(walk_config_layout(aw, BB, tile_beats)),
            "start": In(1),
            "rows": Out(stream.Signature(row_layout(aw, BB, tile_beats))),
            "runs": Out(stream.Signature(run_layout(aw, BB, KB + 2))),
            "rows_room_next": In(1), "runs_room_next": In(1),
            "busy": Out(1), "row_step": Out(1),
        }, data_width=data_width, addr_width=addr_width, tile_beats=tile_beats)

    def elaborate(self, platform):
        m = Module()
        _, BB, LB, K, KB = self.sizes
        aw = self.addr_width
        sst, dstr = self.sst, self.dstr
        rows = self.rows
        c = self.config
        (lgl, lg0, lgc, sh0, lo_mask, v_lo, row_wrap, a_step, a_step2, pack, g_rows, g_cols) = (
            c.lgl, c.lg0, c.lgc, c.sh0, c.lo_mask, c.v_lo, c.row_wrap, c.a_step, c.a_step2,
            c.pack, c.g_rows, c.g_cols)

        def reg(value, name, shape=None):
            return registered(m, value, name, shape)

        # The walker's counters are registers, each with the tests the walk makes on it: a row
        # keeps a counter, steps it or sets it to its first value, and the tests of the stepped
        # and of the first value are worked out beside the choice, from registers. So the
        # choice (below) only selects; no test lies between it and the next row's registers.
        walking = Signal()
        a = Signal(LB)                        # row within the tile
        # A row is taken while the walk runs and the row queue and the runs' slice have room: three
        # registers, whose AND enables some 600 flip-flops of the walker, too many for one net from
        # each. So each group of the walker's registers takes its rows from copies of its own of the
        # three (hw.fabric.register_copies, made from their next values): the walk's decisions, the
        # source and destination addresses in two groups each, and each counter.
        TAKES = ("walk", "s_lo", "s_hi", "d_lo", "d_hi", "rem0", "vrem0", "rem1", "c2", "c3")
        walking_next = Signal()
        m.d.sync += walking.eq(walking_next)
        walk_c = register_copies(platform, m, walking_next, len(TAKES), "walking_c")
        # (a queue under 4 entries has no registered room: its ready is used as it is)
        room_c = ([rows.ready] * len(TAKES) if not self.room_ahead else
                  register_copies(platform, m,
                                  look_ahead(platform, m, "rows_room", self.rows_room_next,
                                             rows.ready),
                                  len(TAKES), "rows_room_c"))
        runs_c = register_copies(platform, m,
                                 look_ahead(platform, m, "runs_room", self.runs_room_next,
                                            self.runs.ready),
                                 len(TAKES), "runs_rdy_c", reset=1)
        take, init = {}, {}
        for g, w, room, ready in zip(TAKES, walk_c, room_c, runs_c, strict=True):
            take[g], init[g] = Signal(name=f"row_take_{g}"), Signal(name=f"init_all_{g}")
            m.d.comb += [take[g].eq(w & room & ready), init[g].eq(self.start & ~w)]
        row_take, init_all = take["walk"], init["walk"]
        m.d.comb += self.row_step.eq(row_take)

        counters = self._counters(m, reg)
        (t0, rem0_do), (tv, vrem0_do), (t1, rem1_do), (t2, c2_do), (t3, c3_do) = (
            counters[n] for n in ("rem0", "vrem0", "rem1", "c2", "c3"))
        s_row, s1, s0, s2, s3 = (Signal(aw, name=n) for n in ("s_row", "s1", "s0", "s2", "s3"))
        d1, d0, d2, d3 = (Signal(aw, name=n) for n in ("d1", "d0", "d2", "d3"))
        nrows, ncols, vclip = t0["n"], t1["n"], tv["clip"]
        # rows of the tile from row a on, and whether row a is the tile's last (a_left <=
        # a_step): registers, so the walker's first test is not a sum and a compare
        a_left = Signal(LB + 1)
        wrap_a = Signal()
        wrap_t1, wrap_t0, wrap_2, wrap_3 = t1["wrap"], t0["wrap"], t2["wrap"], t3["wrap"]
        row_last = wrap_a & wrap_t1 & wrap_t0 & wrap_2 & wrap_3
        row_has = ((a >> sh0) < vclip) & ((a & lo_mask) < v_lo) & t2["has"] & t3["has"]
        col_step_src = K * BB                               # source bytes per column tile
        col_step_dst = Signal(aw)
        row_step_src = Signal(aw)
        # shifts: columns per tile over the columns' first dimension, rows over the rows'
        tiles_c = reg(lgl + KB - lgc, "tiles_c", range(LB + KB + 1))
        tiles_r = reg(lgl - lg0, "tiles_r", range(LB + 1))
        m.d.sync += [col_step_dst.eq(Mux(g_cols, dstr[COLS_HI] << tiles_c,
                                         dstr[COLS] << (lgl + KB))),
                     row_step_src.eq(Mux(g_rows, sst[ROWS_HI] << tiles_r, sst[ROWS] << lgl))]
        # the source step from row a to the next row of the tile, as a register set as a steps
        # (from a's next value) or restarts (a configuration register for row 0), so the row
        # address's adder starts from registers: BB for packed rows, the grouped rows' wrap
        # after the last index of dimension 0, else dimension 0's stride
        def row_advance(at_end):
            return Mux(pack, BB, Mux(g_rows & at_end, row_wrap, sst[ROWS]))

        row_adv = Signal(aw)
        adv_first = reg(row_advance(lo_mask == 0), "row_adv_first", aw)


        # Which level the next row steps, one register each (go_a: the next row of the tile;
        # go_t1: the next column tile; go_t0: the next row tile; go_2, go_3: the outer
        # dimensions; none: the job's last row). The counters' choices are then a row taken and
        # one register, not a priority decode of the tests behind the take.
        go_a, go_t1, go_t0, go_2, go_3 = gos = [Signal(name=n) for n in (
            "go_a", "go_t1", "go_t0", "go_2", "go_3")]
        for g, do, steps, inits in (("rem1", rem1_do, go_t1, go_t0 | go_2 | go_3),
                                    ("rem0", rem0_do, go_t0, go_2 | go_3),
                                    ("vrem0", vrem0_do, go_t0, go_2 | go_3),
                                    ("c2", c2_do, go_2, go_3), ("c3", c3_do, go_3, 0)):
            m.d.comb += do.eq(Cat(take[g] & steps, init[g] | (take[g] & inits)))
        # The wrap tests after each thing a row can do (step a level, or start the walk), as
        # (wrap_a, rem1's, rem0's, c2's, c3's): held, stepped and first values, all worked out
        # from registers whatever is taken. wrap_a says the tile's row after this one is its
        # last (a_left - a_step <= a_step is a_left <= 2 a_step; a new row tile's test is one
        # of rem0's). The next go_ and wrap_a then select among finished values by the row
        # taken, an AND-OR, so the take does not run through the choices' multiplexers.
        st0, fi0, st1, fi1 = t0["stepped"], t0["first"], t1["stepped"], t1["first"]
        after = (
            (row_take & go_a, (a_left <= a_step2, wrap_t1, wrap_t0, wrap_2, wrap_3)),
            (row_take & go_t1, (t0["one_step"], st1["wrap"], wrap_t0, wrap_2, wrap_3)),
            (row_take & go_t0, (st0["one_step"], fi1["wrap"], st0["wrap"], wrap_2, wrap_3)),
            (row_take & go_2, (fi0["one_step"], fi1["wrap"], fi0["wrap"], t2["stepped"]["wrap"],
                               wrap_3)),
            (row_take & go_3, (fi0["one_step"], fi1["wrap"], fi0["wrap"], t2["first"]["wrap"],
                               t3["stepped"]["wrap"])),
            (init_all, (fi0["one_step"], fi1["wrap"], fi0["wrap"], t2["first"]["wrap"],
                        t3["first"]["wrap"])))
        keep = ~(row_take | init_all)
        wrap_a_terms = [keep & wrap_a]
        go_terms = [[keep & g] for g in gos]
        for k, (event, nw) in enumerate(after):
            cand = Signal(6, name=f"walk_after{k}")   # wrap_a and the five go_ after it
            m.d.comb += cand.eq(Cat(nw[0], ~nw[0],
                                    *(Cat(*nw[:i]).all() & ~nw[i] for i in range(1, 5))))
            wrap_a_terms.append(event & cand[0])
            for i in range(5):
                go_terms[i].append(event & cand[i + 1])
        m.d.sync += [wrap_a.eq(Cat(*wrap_a_terms).any()),
                     *(g.eq(Cat(*terms).any()) for g, terms in zip(gos, go_terms, strict=True))]
        with m.If(row_take & go_a):
            m.d.sync += a_left.eq(a_left - a_step)
        with m.Elif(row_take | init_all):
            m.d.sync += a_left.eq(t0["next"]["n"])
        # a's next value kept beside it (a + a_step), so the row advance's end test is not behind an
        # adder
        a_next = Signal(LB)
        # and the rows of the tile from row a on (nrows - a) and those with a source (vclip - a),
        # kept as a steps (nrows and vclip hold then) or restarts at 0 (they take their next
        # values), so the row's source count below is compares of registers, not two subtracts and
        # compares in series
        left_n = Signal(signed(LB + 2))
        left_v = Signal(signed(LB + 2))
        with m.If(row_take & go_a):
            m.d.sync += [a_next.eq(a_next + a_step),
                         row_adv.eq(row_advance((a_next & lo_mask) == lo_mask)),
                         left_n.eq(nrows - a_next), left_v.eq(vclip - a_next)]
        with m.Elif(row_take | init_all):
            m.d.sync += [a_next.eq(a_step), row_adv.eq(adv_first),
                         left_n.eq(t0["next"]["n"]), left_v.eq(tv["next"]["clip"])]
        # the walk ends after a row that steps no level
        m.d.comb += walking_next.eq(Mux(init_all, 1,
                                        Mux(row_take & ~Cat(*gos).any(), 0, walking)))
        # the row and the addresses, by their groups' takes: each register with its value at
        # the start and after a row that steps go_a, go_t1, go_t0, go_2 or go_3 (None: it holds)
        n_s1, n_s0, n_s2, n_s3 = s1 + col_step_src, s0 + row_step_src, s2 + sst[2], s3 + sst[3]
        n_d1, n_d0, n_d2, n_d3 = d1 + col_step_dst, d0 + BB, d2 + dstr[2], d3 + dstr[3]
        stepped = {
            "walk": [(a, 0, (a_next, 0, 0, 0, 0))],
            "s_lo": [(s_row, self.src, (s_row + row_adv, n_s1, n_s0, n_s2, n_s3)),
                     (s1, self.src, (None, n_s1, n_s0, n_s2, n_s3)),
                     (s0, self.src, (None, None, n_s0, n_s2, n_s3))],
            "s_hi": [(s2, self.src, (None, None, None, n_s2, n_s3)),
                     (s3, self.src, (None, None, None, None, n_s3))],
            "d_lo": [(d1, self.dst, (None, n_d1, n_d0, n_d2, n_d3)),
                     (d0, self.dst, (None, None, n_d0, n_d2, n_d3))],
            "d_hi": [(d2, self.dst, (None, None, None, n_d2, n_d3)),
                     (d3, self.dst, (None, None, None, None, n_d3))]}
        for g, regs in stepped.items():
            with m.If(init[g]):
                m.d.sync += [r.eq(first) for r, first, _ in regs]
            with m.Elif(take[g]):
                for i, go in enumerate(gos):
                    with (m.Elif if i else m.If)(go):
                        m.d.sync += [r.eq(nx[i]) for r, _, nx in regs if nx[i] is not None]

        # -- beat generator ---------------------------------------------------------------------
        # the row's byte count shifts by a copy of the element size of its own (the descriptor's a
        # cycle late, as `elog` is): `lgl` sits with its many other users, too far from this sum and
        # the row queue
        elog_g = registered_copy(platform, m, self.elog, "elog_g")
        row_bytes = Signal(LB + KB + 1)
        m.d.comb += row_bytes.eq(ncols << elog_g)
        offset = s_row[:LB]
        nout = (row_bytes + BB - 1) >> LB
        nbeats = (offset + row_bytes + BB - 1) >> LB
        # packed rows: how many of the beat's rows have a source
        # real = min(nrows - a, a_step), and nsrc the least of that and vclip - a: three
        # compares side by side, then the choices
        n_under = left_n < a_step
        v_under = Mux(n_under, left_v < left_n, left_v < a_step)
        nsrc = Signal(LB + 1)
        m.d.comb += nsrc.eq(Mux(~row_has, 0, Mux(v_under, left_v, Mux(n_under, left_n, a_step))))
        runs_in = self.runs
        m.d.comb += [runs_in.valid.eq(row_take & row_has), runs_in.payload.beat.eq(s_row[LB:]),
                     runs_in.payload.n.eq(nbeats)]
        queued = rows.payload
        m.d.comb += [rows.valid.eq(row_take),
                     queued.offset.eq(offset), queued.aligned.eq(offset == 0),
                     queued.nbeats.eq(nbeats), queued.nout.eq(nout), queued.one.eq(nout == 1),
                     queued.a.eq(a), queued.has.eq(row_has), queued.tile_last.eq(wrap_a),
                     queued.job_last.eq(row_last), queued.dst.eq(d1), queued.ncols.eq(ncols),
                     queued.nrows.eq(nrows), queued.nsrc.eq(nsrc)]
        m.d.comb += self.busy.eq(walking)
        return m


    def _counters(self, m, reg):
        """The walker's five counters (:func:`walk_counter`), with the configuration registers
        their tests need: rows and columns left from this row and column tile on (``rem0``,
        ``rem1``), rows with a source from this row tile on (``vrem0``), and the outer
        dimensions' indices (``c2``, ``c3``). Returns ``{name: (tests, choice)}``."""
        _, BB, LB, K, KB = self.sizes
        cw = count_width(self.addr_width)
        ext, val, c = self.ext, self.val, self.config
        L, T, sh0, a_step, L_a_step = c.L, c.T, c.sh0, c.a_step, c.L_a_step
        rows_total, cols_total, vrem_init = c.rows_total, c.cols_total, c.vrem_init

        def counter(*args, **kwargs):
            return walk_counter(m, reg, *args, **kwargs)

        # A row tile or column tile steps only while more than a tile is left (v > L, v > T),
        # so after the step v - L is positive: v - L <= L is v <= 2L, v - L < L is v < 2L.
        L2 = reg(L << 1, "L2", LB + 2)
        T2 = reg(T << 1, "T2", LB + KB + 2)
        # grouped rows step vrem0 by Ls = L >> sh0: v - Ls < 0 is v < Ls, v - Ls > L is
        # v > L + Ls
        Ls = reg(L >> sh0, "Ls", LB + 1)
        LpLs = reg(L + (L >> sh0), "LpLs", LB + 2)
        # and two steps, for the stepped clip kept as a register: v - 2Ls < 0 is v < 2Ls,
        # v - 2Ls > L is v > L + 2Ls
        Ls2 = reg((L >> sh0) << 1, "Ls2", LB + 2)
        LpLs2 = reg(L + ((L >> sh0) << 1), "LpLs2", LB + 3)
        # rows from this row tile on: rows in it, and whether it is the last
        # (and whether a row tile's rows fit one step of a: n <= a_step)
        # the tests of the counters' first values (configuration registers) over two stages:
        # the wide compares with L or T, then the choices and the short compares
        def split(v, bound, width, name):
            """v < bound, v <= bound and v's low bits, as registers (``bound`` < 2^width: a
            zero test of v's high bits and short compares, so the bound, which reaches far,
            meets only the short ones)."""
            small = v[width:] == 0
            lo = v[:width]
            return (reg(small & (lo < bound), f"{name}_lt"),
                    reg(small & (lo <= bound), f"{name}_le"), reg(lo, f"{name}_low", width))

        r0_lt, r0_le, r0_low = split(rows_total, L, LB + 1, "rows_total")
        r1_lt, r1_le, r1_low = split(cols_total, T, LB + KB + 1, "cols_total")
        # (v < L + 1 is v <= L)
        _, vr_lt, vr_low = split(vrem_init, L, LB + 1, "vrem_init")
        rem0_firsts = {
            "n": reg(Mux(r0_lt, r0_low, L), "rem0_n_first", LB + 1),
            "wrap": reg(r0_le, "rem0_wrap_first"),
            "one_step": reg(Mux(r0_lt, r0_low <= a_step, L <= a_step), "rem0_one_step_first")}
        rem1_firsts = {"n": reg(Mux(r1_lt, r1_low, T), "rem1_n_first", LB + KB + 1),
                       "wrap": reg(r1_le, "rem1_wrap_first")}
        vrem0_firsts = {"clip": reg(Mux(vr_lt, vr_low, L), "vrem0_clip_first", LB + 1)}
        # The row and column tiles' stepped tests are registers too, worked out a step ahead (on v -
        # L: v - L < 2L is v < 3L, v - L <= L + a_step is v <= 2L + a_step; columns likewise with
        # T): as compares of the counts behind the choice they would be the block's longest paths
        L3 = reg((L << 1) + L, "L3", LB + 3)
        L2_a_step = reg((L << 1) + a_step, "L2_a_step", LB + 3)
        T3 = reg((T << 1) + T, "T3", LB + KB + 3)
        rem0, t0, rem0_do = counter("rem0", 38, lambda v: v - L, rows_total, firsts=rem0_firsts,
                                    tests={
            "n": (None, lambda v: Mux(v < L2, v - L, L), lambda v: Mux(v < L3, v - L2, L),
                  LB + 1),
            "wrap": (None, lambda v: v <= L2, lambda v: v <= L3, 1),
            "one_step": (None, lambda v: Mux(v < L2, v <= L_a_step, L <= a_step),
                         lambda v: Mux(v < L3, v <= L2_a_step, L <= a_step), 1)})
        # rows (grouped: groups) with a source from this row tile on, limited to 0..L. The stepped
        # clip is a register, worked out a step ahead (from the value before two steps): a compare
        # of the 38-bit count behind the choice would be too long a path. v is signed and the bounds
        # are not: compared as the sign and unsigned compares of the magnitude bits, each one carry
        # chain whose only carry out is its last
        def clip(v, lo, hi):
            neg, mag = v[-1], v[:-1]
            return Mux(neg | (mag < lo), 0, Mux(mag > hi, L, mag - lo))

        vrem0, tv, vrem0_do = counter(
            "vrem0", signed(38), lambda v: v - Ls, vrem_init, firsts=vrem0_firsts, tests={
                "clip": (None, lambda v: clip(v, Ls, LpLs), lambda v: clip(v, Ls2, LpLs2),
                         LB + 1)})
        # columns from this column tile on
        rem1, t1, rem1_do = counter("rem1", 43, lambda v: v - T, cols_total, firsts=rem1_firsts,
                                    tests={
            "n": (None, lambda v: Mux(v < T2, v - T, T), lambda v: Mux(v < T3, v - T2, T),
                  LB + KB + 1),
            "wrap": (None, lambda v: v <= T2, lambda v: v <= T3, 1)})
        # the outer dimensions' indices: a stepped index v + 1 wraps when v + 2 >= extent and has a
        # source when v + 1 < valid, compared as v >= extent - 2 and v < valid - 1 with both bounds
        # configuration registers, so no add lies in front of the compares (an index steps only
        # while v + 1 < extent, so extent - 2 does not wrap when it counts; a valid of 0 gives a
        # bound of 0, which nothing is under) The stepped wrap test is a register as well: after a
        # step from v it tests v + 1 >= extent - 2, that is v >= extent - 3, a bound kept at 0 for
        # an extent under 3 (an index of such a dimension steps at most from 0 to 1, and its test
        # after that is never read).
        def outer(k):
            ext_m2 = reg(ext[k] - 2, f"ext{k}_m2", cw)
            ext_m3 = reg(Mux(ext[k] < 3, 0, ext[k] - 3), f"ext{k}_m3", cw)
            val_m1 = reg(Mux(val[k] == 0, 0, val[k] - 1), f"val{k}_m1", cw)
            return counter(f"c{k}", cw, lambda v: v + 1, 0, {
                "wrap": (lambda v: v + 1 >= ext[k], lambda v: v >= ext_m2,
                         lambda v: v >= ext_m3, 1),
                "has": (lambda v: v < val[k], lambda v: v < val_m1, 1)})
        c2, t2, c2_do = outer(2)
        c3, t3, c3_do = outer(3)
        return {"rem0": (t0, rem0_do), "vrem0": (tv, vrem0_do), "rem1": (t1, rem1_do),
                "c2": (t2, c2_do), "c3": (t3, c3_do)}


class TileTransposer(TilePart):
    """The tile path. Parameters: ``data_width``, ``addr_width``, ``tile_beats`` (beats per
    tile row), ``row_queue`` (rows waiting for their data, at least 2), ``timing``
    (:class:`~.timing.DmaTiming`: its ``columns_in_flight``)."""

    #: cycles from the descriptor's inputs to the configuration registers worked out from them:
    #: the walk begins that long after ``start`` (the inputs are held from ``start`` on)
    CONFIG_STAGES = 4

    def __init__(self, *, data_width=64, addr_width=32, tile_beats=8, row_queue=64,
                 timing=DmaTiming()):
        if tile_beats not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"tile_beats must be a power of two from 1 to 32, not "
                             f"{tile_beats!r}")
        if row_queue < 2:
            raise ValueError(f"row_queue must be at least 2, not {row_queue!r}")
        timing.check()
        self.row_queue = row_queue
        self.timing = timing
        super().__init__({
            **path_ports(data_width=data_width, addr_width=addr_width, dims=DIMS),
            "group_rows": In(1), "group_cols": In(1), "pack_rows": In(1),
            "row_step": Out(1), "walk_free": Out(1),
        }, data_width=data_width, addr_width=addr_width, tile_beats=tile_beats)

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        BB = W // 8
        LB = (BB - 1).bit_length()            # log2 of the bus bytes
        K = self.tile_beats
        KB = (K - 1).bit_length()
        aw = self.addr_width
        elog = self.elog
        ext, val, sst, dstr = self.ext, self.val, self.sst, self.dstr

        # The job's configuration below is worked out in CONFIG_STAGES stages of registers
        # from the descriptor (held from start until the job is done), so none of it lies in
        # front of the walker's arithmetic; the walk begins once they have settled, with start
        # passed down a register per stage.
        def reg(value, name, shape=None):
            return registered(m, value, name, shape)

        starting = Signal(self.CONFIG_STAGES)
        m.d.sync += starting.eq(Cat(self.start, starting[:-1]))

        L = reg(Const(BB, LB + 1) >> elog, "L", LB + 1)            # elements per beat: rows
        T = reg(Const(K * BB, LB + KB + 1) >> elog, "T", LB + KB + 1)  # columns per tile
        lgl = reg(LB - elog, "lgl", range(LB + 1))                  # log2 L
        # the walk's datapath takes the element size from the tile's own register (lgl), not from
        # the descriptor's elog, which comes from the front end across the die: from there through
        # the row's byte count into the runs slice is too long a path. The configuration registers
        # below still take the descriptor's value, a cycle earlier. (A register of elog here would
        # be the mid end's r_elog: Yosys merges flip-flops with the same input.)
        elog = Signal(2, name="elog_t")
        m.d.comb += elog.eq(LB - lgl)

        # grouped rows: dimension 0 (a power of two, less than L) with its next dimension make
        # the rows; grouped columns likewise. In a tile, row a is (a mod E0, a div E0) and
        # column b is (b mod E1, b div E1): tiles start at index 0 of both dimensions.
        g_rows, g_cols = self.group_rows, self.group_cols
        lg0_c = Signal(range(LB + 1))
        lgc_c = Signal(range(LB + KB + 1))
        for i in range(LB + 1):
            with m.If(ext[ROWS][i]):
                m.d.comb += lg0_c.eq(i)
        for i in range(LB + KB + 1):
            with m.If(ext[COLS][i]):
                m.d.comb += lgc_c.eq(i)
        lg0 = reg(lg0_c, "lg0")               # log2 of the rows' first dimension
        lgc = reg(lgc_c, "lgc")               # log2 of the columns' first dimension
        # the wide sums and shifts below by copies of their own of both
        lg0_w = registered_copy(platform, m, lg0_c, "lg0_w")
        lgc_w = registered_copy(platform, m, lgc_c, "lgc_w")
        sh0 = reg(Mux(g_rows, lg0, 0), "sh0", range(LB + 1))
        # row a's index in dimension 0 is a & lo_mask
        lo_mask = reg(Mux(g_rows, ext[ROWS] - 1, (1 << LB) - 1), "lo_mask", LB)
        rows_total = reg(Mux(g_rows, ext[ROWS_HI] << lg0_w, ext[ROWS]), "rows_total", 38)
        cols_total = reg(Mux(g_cols, ext[COLS_HI] << lgc_w, ext[COLS]), "cols_total", 43)
        cw = count_width(aw)
        vrem_init = reg(Mux(g_rows, val[ROWS_HI], val[ROWS]), "vrem_init", cw)
        # (at most L: it is compared with a row's index in dimension 0, which is under L)
        v_lo_full = reg(Mux(g_rows, val[ROWS], L), "v_lo_full", cw)
        v_lo = reg(Mux(v_lo_full > L, L, v_lo_full), "v_lo", LB + 1)
        # source step after the last index of dimension 0 in a grouped row
        row_wrap = reg(sst[ROWS_HI] - (sst[ROWS] << lg0_w) + sst[ROWS], "row_wrap", aw)
        # destination step after the last index of the columns' first dimension
        col_wrap = reg(dstr[COLS_HI] - (dstr[COLS] << lgc_w) + dstr[COLS], "col_wrap", aw)

        # packed rows: rows of 2**lgc elements, shorter than a beat, one after the other in the
        # source from a beat boundary on: a beat holds P = 2**lgp of them and is written to the
        # buffer in one cycle. Row a then lives in element bank (i + f(a)) mod L, with
        # f(a) = (a >> lgp) + (a mod P) * 2**lgc, so the P rows of a beat take disjoint banks.
        pack = self.pack_rows
        lgp = reg(lgl - lgc, "lgp", range(LB + 1))
        lgce = reg(lgc + self.elog, "lgce", range(LB + KB + 4))     # log2 of a packed row's bytes
        # (from lgl and lgc, not lgp: a stage earlier, for the tests on it below)
        lgp_early = (lgl - lgc)[:len(lgl)]
        a_step = reg(Mux(pack, Const(1, LB + 1) << lgp_early, 1), "a_step", LB + 1)
        a_step2 = reg(Mux(pack, Const(2, LB + 2) << lgp_early, 2), "a_step2", LB + 2)
        L_a_step = reg(L + a_step, "L_a_step", LB + 3)

        # a queued row, and a filled tile handed to the drain
        row_entry = row_layout(aw, BB, K)
        rows = m.submodules.rows = RegisteredQueue(row_entry, depth=self.row_queue)
        # a row with a source sends its run of beats to the back end through a register slice,
        # so the walker's step does not wait on the read requests' ready
        runs_slice = m.submodules.runs_slice = SkidBuffer(run_layout(aw, BB, KB + 2))
        runs_in = runs_slice.i
        m.d.comb += [self.req.valid.eq(runs_slice.o.valid),
                     self.req.payload.beat.eq(runs_slice.o.payload.beat),
                     self.req.payload.n.eq(runs_slice.o.payload.n),
                     runs_slice.o.ready.eq(self.req.ready)]

        # -- row walker (RowWalker) --------------------------------------------------------------
        walker = m.submodules.walker = RowWalker(data_width=W, addr_width=aw, tile_beats=K,
                                                 room_ahead="ahead" in rows.signature.members)
        wc = walker.config
        m.d.comb += [wc.L.eq(L), wc.T.eq(T), wc.lgl.eq(lgl), wc.lg0.eq(lg0), wc.lgc.eq(lgc),
                     wc.sh0.eq(sh0), wc.lo_mask.eq(lo_mask), wc.rows_total.eq(rows_total),
                     wc.cols_total.eq(cols_total), wc.vrem_init.eq(vrem_init), wc.v_lo.eq(v_lo),
                     wc.row_wrap.eq(row_wrap), wc.a_step.eq(a_step), wc.a_step2.eq(a_step2),
                     wc.L_a_step.eq(L_a_step), wc.pack.eq(pack), wc.g_rows.eq(g_rows),
                     wc.g_cols.eq(g_cols),
                     walker.src.eq(self.src), walker.dst.eq(self.dst), walker.elog.eq(self.elog),
                     walker.start.eq(starting[-1]), self.row_step.eq(walker.row_step),
                     walker.runs_room_next.eq(runs_slice.ahead.i_ready)]
        for k in range(DIMS):
            m.d.comb += [walker.ext[k].eq(ext[k]), walker.val[k].eq(val[k]),
                         walker.sst[k].eq(sst[k]), walker.dstr[k].eq(dstr[k])]
        if walker.room_ahead:
            m.d.comb += walker.rows_room_next.eq(rows.ahead.i_ready)
        wiring.connect(m, walker.rows, rows.i)
        wiring.connect(m, walker.runs, runs_in)
        tile_entry = tile_layout(aw, BB, K)

        # -- the buffer -------------------------------------------------------------------------
        depth = 2 * BB * K
        write_ports, read_ports = [], []
        for k in range(BB):
            # the fill and the drain never use one half at once (the full flags), so a read
            # never meets a write of its address: no_rw_check tells Yosys not to add logic
            # that would forward such a write to the read
            mem = Memory(shape=8, depth=depth, init=[], attrs={"no_rw_check": 1})
            m.submodules[f"bank{k}"] = mem
            write_ports.append(mem.write_port())
            read_ports.append(mem.read_port(domain="sync"))
        full = Signal(2)

        # -- fill (TileFill) ---------------------------------------------------------------------
        fill = m.submodules.fill = TileFill(data_width=W, addr_width=aw, tile_beats=K)
        fc = fill.config.payload
        m.d.comb += [fc.L.eq(L), fc.lgp.eq(lgp), fc.lgc.eq(lgc), fc.lgce.eq(lgce),
                     fc.pack.eq(pack), fc.elog.eq(elog), fc.pad.eq(self.pad), fill.full.eq(full),
                     self.read_bytes.eq(fill.read_bytes)]
        for k, wp in enumerate(write_ports):
            wiring.connect(m, fill.banks[k], wp)
        wiring.connect(m, rows.o, fill.rows)
        wiring.connect(m, wiring.flipped(self.rdata), fill.rdata)
        tiles = m.submodules.tiles = SyncFIFO(width=tile_entry.size, depth=2)
        wiring.connect(m, fill.tiles, tiles.w_stream)

        # -- drain (TileDrain) -------------------------------------------------------------------
        drain = m.submodules.drain = TileDrain(
            data_width=W, addr_width=aw, tile_beats=K,
            columns_in_flight=self.timing.columns_in_flight)
        dc = drain.config.payload
        m.d.comb += [dc.L.eq(L), dc.lgl.eq(lgl), dc.lgp.eq(lgp), dc.lgc.eq(lgc), dc.pack.eq(pack),
                     dc.g_cols.eq(g_cols), dc.elog.eq(elog), dc.desc_elog.eq(self.elog),
                     dc.cols_ext.eq(ext[COLS]), dc.col_stride.eq(dstr[COLS]),
                     dc.col_wrap.eq(col_wrap)]
        for k, rp in enumerate(read_ports):
            wiring.connect(m, drain.banks[k], rp)
        wiring.connect(m, tiles.r_stream, drain.tiles)
        wiring.connect(m, drain.wr, wiring.flipped(self.wr))
        m.d.comb += self.written_bytes.eq(drain.written_bytes)
        with m.If(fill.tiles.valid):
            m.d.sync += full.bit_select(fill.tiles.payload.half, 1).eq(1)
        with m.If(drain.tiles.valid & drain.tiles.ready):
            m.d.sync += full.bit_select(drain.tiles.payload.half, 1).eq(0)

        # the fill and the drain each take the job's configuration as the walk begins, or once
        # they are done with the job before it: it is offered from then until taken (the
        # registers above hold it until the next start)
        offers = []
        for name, unit in (("fill", fill), ("drain", drain)):
            offered = Signal(name=f"{name}_offered")
            m.d.comb += unit.config.valid.eq(starting[-1] | offered)
            with m.If(unit.config.ready):
                m.d.sync += offered.eq(0)
            with m.Elif(starting[-1]):
                m.d.sync += offered.eq(1)
            offers.append(offered)

        m.d.comb += [
            self.busy.eq(starting.any() | walker.busy | runs_slice.o.valid | rows.nonempty |
                         fill.busy | (full != 0) | drain.busy | Cat(*offers).any()),
            self.walk_free.eq(~starting.any() & ~walker.busy & ~Cat(*offers).any())]
        return m

