"""The DMA's element conversion stage: pieces of destination beats in, each element converted
(:class:`model.dma.descriptor.Conversion`), pieces of the real destination's beats out.

A converting descriptor runs through the mid end as a plain copy of *source-sized* elements
into a *virtual* destination: the real destination's addresses scaled by the source element's
size over the destination element's (halved when the conversion widens 1 byte to 2, doubled
when it narrows 2 to 1; the front end scales them as it offers the descriptor, and the mid end
has one address bit more for the doubled ones). So the row, tile and element paths move
converting descriptors as they move any other, and this stage, between the mid end and the
back end, turns each virtual piece into real ones:

- *widening* (1-byte source, 2-byte destination): a virtual beat holds twice the elements a
  real beat holds, so it becomes up to two real pieces, one per half that has strobes, one a
  cycle: the write side runs a beat a cycle while the mid end reads at half rate;
- *same size* (2 to 2): a piece becomes a piece;
- *narrowing* (2 to 1): a virtual beat becomes half a real beat; the back end's write combiner
  joins the halves, so the read side runs a beat a cycle and the write side at half rate.

Every piece passes through the same pipeline of ``data_width / 16`` lanes, one element each
(a plain copy's piece rides along untouched), so pieces leave in the order they came, however
the jobs' conversions differ. Each job's conversion is queued (``job``) as the mid end takes
its descriptor and leaves the queue with the job's last piece.

The pipeline never stalls: a piece enters only when the output queue has room for it and for
every piece already in the pipeline (``used``), so the stage's one enable is its entry.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import CONVERSIONS

from .tile import piece_layout

__all__ = ["ElementConverter", "conversion_layout", "decode_conversion", "CONVERT_STAGES"]

#: pipeline registers from a piece's entry to its place in the output queue
CONVERT_STAGES = 9
#: the destination kinds, as the pipeline carries them
_NONE, _INT8, _INT16, _FP16 = range(4)


def conversion_layout():
    """A job's conversion as the memory form holds it (:class:`model.dma.descriptor.Conversion`):
    the code (0: none), the shift, and the signed offset and scale."""
    return data.StructLayout({"code": 4, "shift": 5, "offset": 16, "scale": 16})


def decode_conversion(m, code):
    """What the code says, as combinational signals read off
    :data:`~model.dma.descriptor.CONVERSIONS`: whether it is a conversion the table lists
    (``known``), whether its source is 2 bytes wide (``wide``) and signed (``signed``), and its
    destination's kind (``kind``: none, int8, int16 or fp16; none for code 0 or an unknown
    one)."""
    known, wide, signed_, kind = Signal(), Signal(), Signal(), Signal(2)
    kinds = {"int8": _INT8, "int16": _INT16, "fp16": _FP16}
    with m.Switch(code):
        for c, (source, destination) in CONVERSIONS.items():
            with m.Case(c):
                m.d.comb += [known.eq(1), wide.eq(source.endswith("16")),
                             signed_.eq(source[0] == "i"), kind.eq(kinds[destination])]
    return SimpleNamespace(known=known, wide=wide, signed=signed_, kind=kind,
                           widen=~wide & (kind != _NONE), narrow=wide & (kind == _INT8))


def _leading_one(bits):
    """(any bit set, index of the highest set bit) of ``bits`` (a power-of-two width), as a
    tree of halves: log2 levels of multiplexers, not a chain of priorities."""
    if len(bits) == 1:
        return bits[0], Const(0, 0)
    half = len(bits) // 2
    lo_any, lo_idx = _leading_one(bits[:half])
    hi_any, hi_idx = _leading_one(bits[half:])
    return lo_any | hi_any, Mux(hi_any, Cat(hi_idx, Const(1, 1)), Cat(lo_idx, Const(0, 1)))


class _Pipe:
    """Registers without reset, one stage each: the pipeline moves every cycle."""

    def __init__(self, m, prefix):
        self.m, self.prefix = m, prefix

    def reg(self, value, name, shape=None):
        r = Signal(shape if shape is not None else value.shape(), name=f"{self.prefix}{name}",
                   reset_less=True)
        self.m.d.sync += r.eq(value)
        return r

    def delay(self, value, name, stages):
        for s in range(stages):
            value = self.reg(value, f"{name}_d{s}")
        return value


def _lane(m, name, x, cfg):
    """One element's conversion: ``x`` (17-bit signed: the source element, sign- or
    zero-extended) and ``cfg[s]``, the entry's conversion as it stands at stage ``s``. Returns
    the 16-bit result (int8 in the low byte), registered at stage 7."""
    p = _Pipe(m, f"{name}_")
    # s1: the difference; s2: the product (an 18 x 16 multiplier); s3: its sign and magnitude,
    # under 2**32 (|x - offset| < 98304, |scale| <= 32768)
    d = p.reg(x - cfg[0].offset.as_signed(), "d", signed(18))
    v = p.reg(d * cfg[1].scale.as_signed(), "v", signed(34))
    neg3 = p.reg(v < 0, "neg")
    a3 = p.reg(Mux(v < 0, -v, v)[:32], "a", 32)
    # s4: the highest set bit, and the integer result's magnitude (truncated toward zero)
    nz, top = _leading_one(a3)
    shift4 = cfg[3].shift
    top4 = p.reg(top, "top", 5)
    nz4 = p.reg(nz, "nz")
    t4 = p.reg(a3 >> shift4, "t", 32)
    a4, neg4 = p.reg(a3, "a4"), p.reg(neg3, "neg4")
    # s5: the integer result, saturated; for fp16 the exponent E (the value is below
    # 2**(E + 1)) and the bits k the magnitude is shifted right by (left for k < 0) to leave
    # the 11 significant bits (or fewer, for a denormal: its unit is 2**-24)
    kind4 = cfg[4].kind
    limit = Mux(kind4 == _INT8, 127, 32767)
    mag = Mux(t4 > limit + neg4, limit + neg4, t4)[:16]
    int5 = p.reg(Mux(neg4, -mag, mag)[:16], "int", 16)
    shift = cfg[4].shift
    k_norm = top4 - 10
    k_sub = shift - 24
    E5 = p.reg(top4 - shift, "E", signed(7))
    k5 = p.reg(Mux(k_norm.as_signed() > k_sub.as_signed(), k_norm, k_sub), "k", signed(7))
    a5, neg5, nz5 = p.reg(a4, "a5"), p.reg(neg4, "neg5"), p.reg(nz4, "nz5")
    # s6: the significant bits with a guard bit below (q), and whether any bit below the guard
    # is set (sticky)
    right = (Cat(Const(0, 1), a5) >> k5.as_unsigned()[:5])[:12]
    left = (Cat(Const(0, 1), a5[:11]) << (-k5).as_unsigned()[:4])[:12]
    q6 = p.reg(Mux(k5 > 0, right, left), "q", 12)
    below = ~(Const(0xFFFFFFFF, 32) << (k5 - 1).as_unsigned()[:5])[:32]
    sticky6 = p.reg((k5 > 1) & (a5 & below).any(), "sticky")
    E6, neg6, nz6 = p.reg(E5, "E6"), p.reg(neg5, "neg6"), p.reg(nz5, "nz6")
    int6 = p.reg(int5, "int6")
    # s7: round to nearest, ties to even; the exponent field (0 for a denormal) plus the
    # significand with its leading one, whose carry moves the exponent on; saturate at 65504
    mant = q6[1:] + (q6[0] & (sticky6 | q6[1]))
    field = Mux(E6 > -14, E6 + 14, 0)[:6]
    enc = (Cat(Const(0, 10), field) + mant)[:16]
    sat = (E6 > 15) | (enc >= 0x7C00)
    fp = Mux(nz6, Cat(Mux(sat, 0x7BFF, enc)[:15], neg6), 0)
    return p.reg(Mux(cfg[6].kind == _FP16, fp, int6), "out", 16)


class ElementConverter(wiring.Component):
    """Ports: ``job`` (each job's conversion, :func:`conversion_layout`, as the mid end takes
    its descriptor), ``i`` (the mid end's pieces: addresses of ``addr_width + 1`` bits, the
    virtual destination), ``o`` (the real destination's pieces), ``written_bytes`` (bytes a
    cycle's output writes, for the job's counter), ``busy`` (a piece is in the pipeline or the
    output queue). Parameters: ``data_width``, ``addr_width``,
    ``jobs`` (conversions queued: at least the jobs whose pieces can be between the mid end's
    take and this stage's output), ``depth`` (the output queue's pieces)."""

    def __init__(self, *, data_width=64, addr_width=32, jobs=16, depth=16):
        if depth < CONVERT_STAGES + 2:
            raise ValueError(f"depth must be at least {CONVERT_STAGES + 2}, not {depth}")
        self.data_width = data_width
        self.addr_width = addr_width
        self.jobs = jobs
        self.depth = depth
        super().__init__({
            "job": In(stream.Signature(conversion_layout())),
            "i": In(stream.Signature(piece_layout(addr_width + 1, data_width))),
            "o": Out(stream.Signature(piece_layout(addr_width, data_width))),
            "written_bytes": Out(35),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, aw = self.data_width, self.addr_width
        BB = W // 8
        LB = (BB - 1).bit_length()
        H = BB // 2                                   # lanes: elements of 2 bytes in a beat
        jobs = m.submodules.jobs = SyncFIFOBuffered(width=len(self.job.payload.as_value()),
                                                   depth=self.jobs)
        m.d.comb += [jobs.w_data.eq(self.job.payload), jobs.w_en.eq(self.job.valid),
                     self.job.ready.eq(jobs.w_rdy)]
        cfg = conversion_layout()(jobs.r_data)
        how = decode_conversion(m, cfg.code)
        wide, src_signed, kind, widen, narrow = how.wide, how.signed, how.kind, how.widen, \
            how.narrow

        # -- entry: the piece, or one half of it, into stage 0 --------------------------------
        piece = self.i.payload
        half = Signal()                               # a widening piece's low half has left
        lo_any, hi_any = piece.strb[:H].any(), piece.strb[H:].any()
        both = widen & ~half & lo_any & hi_any        # two halves: this is the first
        h = Mux(widen, half | ~lo_any, 0)             # the half that leaves now (widening)
        used = Signal(range(self.depth + 1))          # pieces in the pipeline and the queue
        enter = self.i.valid & jobs.r_rdy & (used < self.depth)
        take = enter & ~both
        m.d.comb += [self.i.ready.eq(take), jobs.r_en.eq(take & piece.last)]
        with m.If(enter):
            m.d.sync += half.eq(both)

        # the lanes' inputs: a 1-byte source's elements from the half that leaves, a 2-byte
        # source's from the whole beat; sign- or zero-extended
        xs = []
        for i in range(H):
            byte = Mux(h, piece.data.word_select(H + i, 8), piece.data.word_select(i, 8))
            word = piece.data.word_select(i, 16)
            ext8 = Cat(byte, Mux(src_signed, byte[7].replicate(9), 0))
            ext16 = Cat(word, Mux(src_signed, word[15], 0))
            xs.append(Mux(wide, ext16, ext8))
        # the real piece's address and strobes
        addr = Signal(aw)
        strb = Signal(BB)
        with m.If(widen):
            m.d.comb += [addr.eq(Cat(Const(0, LB), h, piece.addr[LB:])),
                         strb.eq(Cat(*(Cat(b, b) for b in Mux(h, piece.strb[H:],
                                                                piece.strb[:H]))))]
        with m.Elif(narrow):
            m.d.comb += [addr.eq(Cat(Const(0, LB), piece.addr[LB + 1:])),
                         strb.eq(Mux(piece.addr[LB],
                                     Cat(Const(0, H), piece.strb[0::2]),
                                     Cat(piece.strb[0::2], Const(0, H))))]
        with m.Else():
            m.d.comb += [addr.eq(piece.addr), strb.eq(piece.strb)]

        p = _Pipe(m, "s0_")
        valid0 = Signal(name="s0_valid")
        m.d.sync += valid0.eq(enter)
        x0 = [p.reg(x, f"x{i}", signed(17)) for i, x in enumerate(xs)]
        entry = data.StructLayout({"offset": 16, "scale": 16, "shift": 5, "kind": 2})
        cfg0 = Signal(entry, name="s0_cfg", reset_less=True)
        m.d.sync += [cfg0.offset.eq(cfg.offset), cfg0.scale.eq(cfg.scale),
                     cfg0.shift.eq(cfg.shift), cfg0.kind.eq(kind)]
        side = data.StructLayout({"addr": aw, "strb": BB, "last": 1, "hi": 1, "kind": 2,
                                  "raw": W})
        side0 = Signal(side, name="s0_side", reset_less=True)
        m.d.sync += [side0.addr.eq(addr), side0.strb.eq(strb),
                     side0.last.eq(piece.last & ~both), side0.hi.eq(piece.addr[LB]),
                     side0.kind.eq(kind), side0.raw.eq(piece.data)]

        # -- the lanes ------------------------------------------------------------------------
        q = _Pipe(m, "cfg_")
        cfgs = [cfg0]
        for s in range(1, 7):
            cfgs.append(q.reg(cfgs[-1], f"s{s}", entry))
        outs = [_lane(m, f"lane{i}", x, cfgs) for i, x in enumerate(x0)]
        side7 = q.delay(side0, "side", 7)
        valid7 = q.delay(valid0, "valid", 7)

        # -- stage 8: the real beat, into the output queue ------------------------------------
        beat = Signal(W)
        with m.Switch(side7.kind):
            with m.Case(_NONE):
                m.d.comb += beat.eq(side7.raw)
            with m.Case(_INT8):
                low = Cat(*(o[:8] for o in outs))
                m.d.comb += beat.eq(Mux(side7.hi, Cat(Const(0, W // 2), low),
                                        Cat(low, Const(0, W // 2))))
            with m.Default():
                m.d.comb += beat.eq(Cat(*outs))
        out_layout = piece_layout(aw, W)
        out8 = Signal(out_layout, name="s8_piece", reset_less=True)
        valid8 = Signal(name="s8_valid")
        m.d.sync += [out8.addr.eq(side7.addr), out8.data.eq(beat), out8.strb.eq(side7.strb),
                     out8.last.eq(side7.last), valid8.eq(valid7)]
        queue = m.submodules.queue = SyncFIFOBuffered(width=len(out8.as_value()),
                                                    depth=self.depth)
        m.d.comb += [queue.w_data.eq(out8), queue.w_en.eq(valid8),
                     self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data),
                     queue.r_en.eq(self.o.ready)]
        leave = self.o.valid & self.o.ready
        m.d.sync += used.eq(used + enter - leave)
        m.d.comb += self.busy.eq(used != 0)
        # the bytes written, a cycle after the piece leaves
        ones = Signal(range(BB + 1))
        m.d.comb += ones.eq(sum(self.o.payload.strb[b] for b in range(BB)))
        m.d.sync += self.written_bytes.eq(Mux(leave, ones, 0))
        return m
