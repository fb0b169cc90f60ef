"""The DMA layout engine: descriptors from registers or a chain in memory, checked, then moved
through an AXI4 master by one of three paths.

Front end (:class:`~hw.dma.frontend.FrontEnd`): the register bank
(``model/registers/dma.py``) and the descriptor source: the registers (``ctrl.start``), or a
chain fetched from memory one 128-byte descriptor at a time (``ctrl.start_chain``). Each
descriptor is checked against the model's rules (:class:`model.dma.descriptor.Error`, in the
same order; :mod:`hw.dma.descriptor`) before anything moves.

Mid end (:class:`~hw.dma.midend.MidEnd`): the descriptor's shape picks the path.

- *Row path* (:class:`~hw.dma.rows.RowCopier`): dimension 0 contiguous on both sides. Runs
  of dimension 0 move a beat per cycle through a funnel-shift realigner.
- *Tile path* (:class:`~hw.dma.tile.TileTransposer`): dimension 0 contiguous in the
  destination and another dimension contiguous in the source, at most four dimensions. Tiles
  go through a double-buffered skewed-bank buffer: a row beat in and a column beat out per
  cycle.
- *Element path* (:class:`~hw.dma.elements.ElementPath`): anything else, one
  element per cycle.

Each path asks for source beats in runs (a request per run of consecutive beats) and hands
back pieces of destination beats (address, data, byte strobes).

Conversion stage (:class:`~hw.dma.convert.ElementConverter`, with ``convert=True``): between
the mid end and the back end, it converts each element of the pieces of a descriptor that
changes the element type; the mid end moves such a descriptor as a copy of source-sized
elements into a virtual destination (see that module).

Back end (:class:`~hw.dma.backend.BackEnd`): the runs are taken apart a beat a cycle and the
*read planner* merges the beats into INCR bursts (at most ``max_burst`` beats, never across 4
KiB) and issues a burst only when the read FIFO has room for it, so several reads are in flight
and R never waits. The *write combiner* gathers pieces that fall in one beat (with byte
strobes) and consecutive beats into bursts, and issues a burst's address once all its beats are
buffered.

A descriptor ends when its last write is answered. A chain's next descriptor that reads nothing
the running one writes starts before that end: its reads and a transpose's first tiles overlap
the running one's last writes, and its own writes wait until the running one has ended. One
that reads what the running one writes starts after that end, so it sees the results. Errors
end the job: no new address is issued, bursts already issued complete (their data was read
before the error), reads in flight are drained, and the engine takes the next job.
"""

from amaranth import Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Module, ResetSignal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES
from atomcube.model.registers.dma import DMA

from ..bus.axi import AXI4LiteSignature, AXI4Signature
from ..bus.fifo import stream_slice
from ..fabric import global_buffer
from .backend import BackEnd
from .convert import ElementConverter
from .frontend import FrontEnd
from .midend import PATHS, MidEnd
from .timing import DmaTiming


class DmaEngine(wiring.Component):
    """Parameters: ``data_width`` 64, 128 or 256; ``addr_width``, the address bits the engine
    reaches, 12 to 32 (registers hold 32-bit addresses): a descriptor that reads or writes at
    or above ``2**addr_width`` ends with ``RANGE``, and so does a chain address there; every
    address register and adder inside is ``addr_width`` bits wide (the SoC's choice:
    :attr:`hw.top.soc.SocConfig.dma_addr_width`), and ``m_axi`` carries 32
    address bits whatever it is, those above ``addr_width`` 0; ``id_width``;
    ``max_burst`` beats (power of two, 2 to 256);
    ``read_fifo`` beats of read data buffered (bounds the reads in flight); ``tile_beats``
    (beats per row of a transpose tile; default 128 bytes' worth); ``bank_mirror`` (the register
    bank reads the configuration back from a copy in a memory:
    :class:`~hw.bus.regbank.RegisterBank`); ``paths``, the mid end's paths to build (of
    ``"rows"``, ``"tile"``, ``"elements"``; all by default): a build without the row or tile
    path moves their descriptors on the element path, an element per cycle, for less area
    (docs/area.md); ``chains``, whether the engine runs chains from memory (without them it has
    no descriptor fetch, ``hwinfo.chains`` reads 0 and ``ctrl.start_chain`` ends the job with
    ``NO_CHAIN``); ``convert``, whether to build the element conversion stage
    (:class:`~hw.dma.convert.ElementConverter`: without it ``hwinfo.convert`` reads 0 and a
    descriptor that converts ends the job with ``CONVERT``).

    Ports: ``s_axil`` (registers), ``m_axi`` (memory, full AXI4 signal set), ``irq``."""

    def __init__(self, *, data_width=64, addr_width=32, id_width=4, max_burst=16,
                 read_fifo=64, tile_beats=None, bank_mirror=False, paths=PATHS,
                 chains=True, convert=False, timing=DmaTiming()):
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
        timing.check()
        self.timing = timing
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.max_burst = max_burst
        self.read_fifo = read_fifo
        # tile rows of 128 bytes by default: long enough for reads that do not start on a beat
        # to lose little (one beat in K + 1), short enough that a tile fills quickly
        self.tile_beats = tile_beats if tile_beats is not None else 1024 // data_width
        self.regmap = DMA
        # (the mid end first: it checks ``paths`` before anything else is built)
        # requests waiting for their data: every beat the read FIFO can have in flight plus an
        # open burst, or the queue, not the bus, would limit a copy
        self.convert = bool(convert)
        # a converting engine's mid end reaches one address bit more: a narrowing
        # conversion's virtual destination is the real one's addresses doubled
        self._mid = MidEnd(data_width=data_width, addr_width=addr_width + self.convert,
                           tile_beats=self.tile_beats, queue=read_fifo + 2 * max_burst,
                           paths=paths, timing=timing)
        self.paths = self._mid.paths
        self.chains = bool(chains)
        self._front = FrontEnd(data_width=data_width, addr_width=addr_width,
                               bank_mirror=bank_mirror, chains=self.chains,
                               convert=self.convert)
        self._convert = (ElementConverter(data_width=data_width, addr_width=addr_width)
                         if self.convert else None)
        self._back = BackEnd(data_width=data_width, addr_width=addr_width, id_width=id_width,
                             max_burst=max_burst, read_fifo=read_fifo, fetch=self.chains,
                             timing=timing)
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=8, data_width=32)),
            "m_axi": Out(AXI4Signature(addr_width=32, data_width=data_width,
                                       id_width=id_width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        front = m.submodules.front = self._front
        # the mid end, the back end and the slices between them run in a domain of their own
        # on the same clock, whose reset is the front end's dp_reset alone (a register that the
        # engine's reset also sets): their thousands of reset inputs hang off one flip-flop,
        # not off a gate that ORs two resets; on a platform with global buffers (a board top
        # on the ECP5: hw.fabric) it reaches them on a global network
        m.domains.dp = ClockDomain("dp", local=True)
        m.d.comb += [ClockSignal("dp").eq(ClockSignal("sync")),
                     ResetSignal("dp").eq(global_buffer(platform, m, front.dp_reset,
                                                        "dp_reset"))]
        mid = m.submodules.mid = DomainRenamer("dp")(self._mid)
        back = m.submodules.back = DomainRenamer("dp")(self._back)
        wiring.connect(m, wiring.flipped(self.s_axil), front.s_axil)
        wiring.connect(m, back.m_axi, wiring.flipped(self.m_axi))
        m.d.comb += self.irq.eq(front.irq)
        # the descriptor
        m.d.comb += [front.busy.eq(mid.busy), front.read_bytes.eq(mid.read_bytes)]
        if self._convert is None:
            wiring.connect(m, front.desc, mid.desc)
            m.d.comb += front.written_bytes.eq(mid.written_bytes)
            paths = (("req", mid.req, back.req), ("rdata", back.rdata, mid.rdata),
                     ("wr", mid.wr, back.wr))
            converting = Const(0)
        else:
            conv = m.submodules.convert = DomainRenamer("dp")(self._convert)
            paths = self._converting(m, front, mid, back, conv)
            converting = conv.busy
        # the data, through register slices: no combinational path crosses between the mid
        # end and the back end (valid, payload and ready are all registered on each side)
        slices = [stream_slice(m, name, source, sink, domain="dp")
                  for name, source, sink in paths]
        # the job is over when the slices (and the conversion stage) are empty too: a write
        # may still sit in one
        empty = [f.level == 0 for f in slices]
        # the job
        if self.chains:
            wiring.connect(m, back.fetch_beat, front.fetch_beat)
            m.d.comb += [back.fetch_addr.eq(front.fetch_addr),
                         back.fetch_go.eq(front.fetch_go)]
        m.d.comb += [front.read_err.eq(back.read_err),
                     front.write_err.eq(back.write_err),
                     front.read_old.eq(back.read_old),
                     front.job_done.eq(back.job_done),
                     back.defer.eq(front.defer),
                     front.idle.eq(back.idle & Cat(*empty).all() & ~converting),
                     front.drained.eq(back.drained)]
        return m

    def _converting(self, m, front, mid, back, conv):
        """The conversion stage's joins: each descriptor's conversion queued as the mid end
        takes it (a descriptor is offered to the mid end only while the queue has room), the
        mid end's read requests narrowed to the back end's addresses (its extra bit is the
        virtual destination's), and its pieces through the stage. Returns the streams the
        engine puts register slices on, as (name, source, sink)."""
        room = conv.job.ready
        m.d.comb += [mid.desc.payload.eq(front.desc.payload),
                     mid.desc.valid.eq(front.desc.valid & room),
                     front.desc.ready.eq(mid.desc.ready),
                     conv.job.payload.eq(front.desc.payload.cvt),
                     conv.job.valid.eq(front.desc.valid & mid.desc.ready),
                     front.written_bytes.eq(conv.written_bytes)]
        req = stream.Signature(back.req.payload.shape()).create(path=("req_narrow",))
        m.d.comb += [req.valid.eq(mid.req.valid), mid.req.ready.eq(req.ready),
                     req.payload.beat.eq(mid.req.payload.beat),
                     req.payload.n.eq(mid.req.payload.n),
                     req.payload.first.eq(mid.req.payload.first)]
        return (("req", req, back.req), ("rdata", back.rdata, mid.rdata),
                ("wr", mid.wr, conv.i), ("wr_out", conv.o, back.wr))
