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
- *same size* (2 to 2): a piece becomes a piece; 1 to 1: each half of the piece with strobes
  goes through the lanes in a cycle of its own, so both sides run at half rate;
- *narrowing* (2 to 1, or a bit field of a 4-byte word to 2): a virtual beat becomes half a
  real beat; the back end's write combiner joins the halves, so the read side runs a beat a
  cycle and the write side at half rate.

Every piece passes through the same pipeline of ``data_width / 16`` lanes, one element each (a
plain copy's piece as sixteen-bit words converted int16 -> int16 unchanged), so pieces leave
in the order they came, however the jobs' conversions differ. Each job's conversion is queued
(``job``) as the mid end takes its descriptor and leaves the queue with the job's last piece.

The pipeline never stalls: a piece enters only when the output queue has room for it and for
every piece already in the pipeline (``used``), so the stage's one enable is its entry.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.hdl import Assert
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import CONVERSIONS, FIELDS

from ..bits import first_one
from ..bus.fifo import SkidBuffer
from .tile import piece_layout

__all__ = ["ElementConverter", "conversion_layout", "decode_conversion", "CONVERT_STAGES"]

#: pipeline registers from a piece's entry to its place in the output queue
CONVERT_STAGES = 13
#: the destination kinds, as the pipeline carries them
_NONE, _INT8, _INT16, _FP16 = range(4)


def conversion_layout():
    """A job's conversion as the memory form holds it (:class:`model.dma.descriptor.Conversion`):
    the code (0: none), the shift, the signed offset and scale, and a bit field's lowest bit and
    width."""
    return data.StructLayout({"code": 5, "shift": 5, "offset": 16, "scale": 16, "bit": 5,
                              "width": 5})


def decode_conversion(m, code):
    """What the code says, as combinational signals read off
    :data:`~model.dma.descriptor.CONVERSIONS`: whether it is a conversion the table lists
    (``known``), whether its source is 2 bytes wide (``wide``) and signed (``signed``), and its
    destination's kind (``kind``: none, int8, int16 or fp16; none for code 0 or an unknown
    one), whether the source is fp16 (``fp``) or a bit field of a 32-bit word (``field``, to a
    2-byte destination), and whether the conversion widens 1 byte to 2 (``widen``), narrows 2
    to 1 (``narrow``), takes a byte to a byte (``bytes``) or halves the element size another
    way (``up``: narrowing or a field; its virtual destination's addresses are the real ones
    doubled). ``elog``: log2 of the source element's bytes."""
    known, wide, signed_, fp, field = Signal(), Signal(), Signal(), Signal(), Signal()
    kind = Signal(2)
    kinds = {"int8": _INT8, "int16": _INT16, "fp16": _FP16}
    with m.Switch(code):
        for c, (source, destination) in CONVERSIONS.items():
            with m.Case(c):
                m.d.comb += [known.eq(1), wide.eq(source.endswith("16")),
                             signed_.eq(source[0] in "is"), fp.eq(source == "fp16"),
                             field.eq(source in FIELDS), kind.eq(kinds[destination])]
    narrow = wide & (kind == _INT8)
    return SimpleNamespace(known=known, wide=wide, signed=signed_, fp=fp, field=field,
                           kind=kind, widen=~wide & ~field & ((kind == _INT16) | (kind == _FP16)),
                           narrow=narrow, bytes=~wide & ~field & (kind == _INT8),
                           up=narrow | field, elog=Mux(field, 2, wide))


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


#: the lane's registers from its element to its result: the result is registered at stage 10
LANE_STAGES = 10


def _lane(m, name, x, cfg):
    """One element's conversion: ``x`` (17 bits: the source element, sign- or zero-extended, or
    a bit field's value; an fp16 element's bits) and ``cfg[s]``, the entry's conversion as it
    stands at stage ``s`` (with ``fp``, an fp16 source; ``q``, offset x scale for one; ``tzs``,
    the scale's trailing zeros). Returns the 16-bit result (int8 in the low byte), registered
    at stage :data:`LANE_STAGES`.

    Every element goes the same way: the product ``d x scale``, scaled by ``2**e``, less ``q``,
    gives ``D = (x - offset) * scale`` exactly in whole units, ``sticky`` saying whether a
    fraction was dropped (an integer source: ``d = x - offset``, ``e = 0``, ``q = 0``; an fp16
    source ``(-1)**s * m * 2**e``: ``d = +-m``). Then an integer result is ``D / 2**shift``
    truncated toward zero and saturated, and an fp16 one ``D / 2**shift`` rounded. Whether
    bits below a point are all zero comes from the product's trailing zeros (the sum of its
    factors'), a small compare, rather than a mask and a wide OR; saturation from OR trees over
    the magnitude's high bits, rather than a compare; and no stage has two carry chains in a
    row."""
    p = _Pipe(m, f"{name}_")
    # s1: an fp16 source's significand with its sign, and its exponent (infinity as 2**16,
    # the convolution pipeline's value for it; NaN gives 0), or an integer's difference
    fp0 = cfg[0].fp
    exp, frac, sign = x[10:15], x[:10], x[15]
    mant = Mux(exp == 0, frac, Cat(frac, Const(1, 1)))
    d1 = p.reg(Mux(fp0, Mux(sign, -mant, mant), x.as_signed() - cfg[0].offset.as_signed()),
               "d", signed(18))
    e1 = p.reg(Mux(fp0, Mux(exp == 0, -24, exp - 25), 0), "e", signed(6))
    nan1 = p.reg(fp0 & (exp == 31) & (frac != 0), "nan")
    # s2: the product (an 18 x 16 multiplier), and its trailing zeros
    v2 = p.reg(d1 * cfg[1].scale.as_signed(), "v", signed(34))
    d_nz, d_tz = first_one(d1.as_unsigned(), highest=False)
    tz2 = p.reg(d_tz + cfg[1].tzs, "tz", 6)
    nz2 = p.reg(d_nz & (cfg[1].scale != 0), "nz")
    e2, nan2 = p.reg(e1, "e2"), p.reg(nan1, "nan2")
    # s3: scaled by 2**e: whole units (floor) and whether a fraction was dropped
    right = (-e2).as_unsigned()[:5]
    a3 = p.reg(Mux(e2 < 0, v2 >> right, v2 << e2.as_unsigned()[:3]), "a", signed(35))
    sticky3 = p.reg((e2 < 0) & nz2 & (tz2 < right), "sticky")
    nan3, tz3 = p.reg(nan2, "nan3"), p.reg(tz2, "tz3")
    # s4: less offset x scale
    D4 = p.reg(a3 - cfg[3].q.as_signed(), "D", signed(36))
    sticky4, nan4, tz4 = p.reg(sticky3, "sticky4"), p.reg(nan3, "nan4"), p.reg(tz3, "tz4")
    # s5: sign and magnitude; truncating a negative value with a dropped fraction toward zero
    # is truncating its magnitude less one
    neg5 = p.reg(D4 < 0, "neg")
    a5 = p.reg(Mux(D4 < 0, -D4 - sticky4, D4)[:35], "a5", 35)
    nan5, tz5 = p.reg(nan4, "nan5"), p.reg(tz4, "tz5")
    # s6: the highest set bit, and the integer result's magnitude (truncated toward zero)
    nz, top = first_one(a5)
    top6 = p.reg(top, "top", 6)
    nz6 = p.reg(nz, "nz6")
    t6 = p.reg(a5 >> cfg[5].shift, "t", 35)
    a6, neg6, nan6, tz6 = p.reg(a5, "a6"), p.reg(neg5, "neg6"), p.reg(nan5, "nan6"), \
        p.reg(tz5, "tz6")
    # s7: whether the integer result saturates (past 127 or 32767, or 128 or 32768 below
    # zero: OR trees over the high bits), its magnitude; for fp16 the exponent E (the value is
    # below 2**(E + 1)) and the bits k the magnitude is shifted right by (left for k < 0) to
    # leave the 11 significant bits (or fewer, for a denormal: its unit is 2**-24)
    int8_6 = cfg[6].kind == _INT8
    over8 = Mux(neg6, t6[8:].any() | (t6[7] & t6[:7].any()), t6[7:].any())
    over16 = Mux(neg6, t6[16:].any() | (t6[15] & t6[:15].any()), t6[15:].any())
    over7 = p.reg(Mux(int8_6, over8, over16), "over")
    mag7 = p.reg(t6[:16], "mag", 16)
    shift = cfg[6].shift
    k_norm = top6 - 10
    k_sub = shift - 24
    E7 = p.reg(top6 - shift, "E", signed(8))
    k7 = p.reg(Mux(k_norm.as_signed() > k_sub.as_signed(), k_norm, k_sub), "k", signed(8))
    a7, neg7, nz7, nan7, tz7 = (p.reg(a6, "a7"), p.reg(neg6, "neg7"), p.reg(nz6, "nz7"),
                                p.reg(nan6, "nan7"), p.reg(tz6, "tz7"))
    # s8: the integer result (0 for NaN); for fp16 the significant bits with a guard bit below
    # (q), whether any bit below the guard is set (sticky: the magnitude is the product's, an
    # fp16 result coming from an integer source), the exponent field (0 for a denormal) and
    # whether the exponent is past fp16's. k is at most 21 (the magnitude is below 2**32)
    limit = Mux(cfg[7].kind == _INT8, 127, 32767)
    int8 = p.reg(Mux(nan7, 0, Mux(over7, Mux(neg7, -limit - 1, limit),
                                  Mux(neg7, -mag7, mag7)))[:16], "int", 16)
    right = (Cat(Const(0, 1), a7) >> k7.as_unsigned()[:5])[:12]
    left = (Cat(Const(0, 1), a7[:11]) << (-k7).as_unsigned()[:4])[:12]
    q8 = p.reg(Mux(k7 > 0, right, left), "q", 12)
    round_sticky8 = p.reg((k7 > 1) & (tz7 < k7 - 1), "round_sticky")
    field8 = p.reg(Mux(E7 > -14, E7 + 14, 0)[:6], "field", 6)
    sat_e8 = p.reg(E7 > 15, "sat_e")
    neg8, nz8 = p.reg(neg7, "neg8"), p.reg(nz7, "nz8")
    # s9: round to nearest, ties to even
    mant9 = p.reg(q8[1:] + (q8[0] & (round_sticky8 | q8[1])), "mant", 12)
    field9, sat_e9, neg9, nz9 = (p.reg(field8, "field9"), p.reg(sat_e8, "sat_e9"),
                                 p.reg(neg8, "neg9"), p.reg(nz8, "nz9"))
    int9 = p.reg(int8, "int9")
    # s10: the exponent field plus the significand with its leading one, whose carry moves the
    # exponent on; saturate at 65504
    enc = (Cat(Const(0, 10), field9) + mant9)[:16]
    sat = sat_e9 | (enc >= 0x7C00)
    fp = Mux(nz9, Cat(Mux(sat, 0x7BFF, enc)[:15], neg9), 0)
    return p.reg(Mux(cfg[9].kind == _FP16, fp, int9), "out", 16)


class ElementConverter(wiring.Component):
    """Ports: ``job`` (each job's conversion, :func:`conversion_layout`, as the mid end takes
    its descriptor), ``i`` (the mid end's pieces: addresses of ``addr_width + 1`` bits, the
    virtual destination), ``o`` (the real destination's pieces), ``written_bytes`` (bytes a
    cycle's output writes, for the job's counter), ``busy`` (a piece is in the stage).
    Parameters: ``data_width``, ``addr_width``, ``jobs`` (conversions queued: at least the jobs
    whose pieces can be between the mid end's take and this stage's output), ``depth`` (the
    pieces the pipeline and the output queue hold together: a piece's credit comes back about
    sixteen cycles after it enters, so 24 keep a piece a cycle going)."""

    def __init__(self, *, data_width=64, addr_width=32, jobs=16, depth=24):
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
        # each job's conversion is queued decoded (the flags of decode_conversion), so the
        # decisions at the entry start from the queue's registers
        flags = ("wide", "signed", "fp", "field", "widen", "narrow", "bytes", "up")
        queued = data.StructLayout({"cfg": conversion_layout(), "kind": 2,
                                    **{f: 1 for f in flags}})
        jobs = m.submodules.jobs = SyncFIFOBuffered(width=queued.size, depth=self.jobs)
        decoded = decode_conversion(m, self.job.payload.code)
        m.d.comb += [jobs.w_data.eq(Cat(self.job.payload, decoded.kind,
                                        *(getattr(decoded, f) for f in flags))),
                     jobs.w_en.eq(self.job.valid), self.job.ready.eq(jobs.w_rdy)]
        how = queued(jobs.r_data)
        cfg = how.cfg
        widen, halves = how.widen, how.widen | how.bytes
        # a plain copy goes through the lanes too, as int16 -> int16 with offset 0, scale 1 and
        # shift 0: every 16-bit pattern comes out as it went in, and no copy of the data rides
        # beside the lanes
        plain = how.kind == _NONE
        wide, src_signed = how.wide | plain, how.signed | plain
        kind = Mux(plain, _INT16, how.kind)

        # -- entry: the piece, or one half of it, into stage 0 --------------------------------
        # The pieces come through a register slice of the stage's own, whose ready is a
        # register worked out a cycle ahead (its ``ready_ahead``): no decision made in the cycle
        # reaches the slice's wide entry, and every register of stage 0 loads each cycle from
        # multiplexers whose selects are registers. A 1-byte source's piece holds twice the
        # lanes' elements: when both its halves have strobes the low half enters as the piece is
        # taken and the high half in the next cycle, from the piece kept here (``held``), the
        # slice not ready meanwhile. A job's conversion leaves its queue a cycle after its last
        # piece enters, from a register, and the slice is not ready in that cycle either (one
        # cycle a job), so the next piece meets its own job's conversion.
        near = m.submodules.entry = SkidBuffer(self.i.payload.shape(), ready_ahead=True)
        wiring.connect(m, wiring.flipped(self.i), near.i)
        piece = near.o.payload
        ready = Signal()                              # the slice's ready, a register
        second = Signal()                             # the high half of ``held`` enters now
        pop = Signal()                                # the job's last piece entered
        held = Signal.like(piece, name="held", reset_less=True)
        used = Signal(range(self.depth + 1))          # pieces in the pipeline and the queue
        take = near.o.valid & ready
        lo_any, hi_any = piece.strb[:H].any(), piece.strb[H:].any()
        both = halves & lo_any & hi_any               # two halves: the low one enters now
        enter = take | second
        cur = Signal.like(piece, name="cur")          # the piece that enters now
        h = Signal()                                  # ... and the half of it
        m.d.comb += [cur.eq(Mux(second, held, piece)),
                     h.eq(second | (halves & ~lo_any))]
        last = Mux(second, held.last, piece.last & ~both)
        leave = Signal()
        used_next = used + enter - leave
        ready_next = ~(take & both) & ~(enter & last) & (used_next < self.depth - 1)
        m.d.sync += [used.eq(used_next), second.eq(take & both), pop.eq(enter & last),
                     ready.eq(ready_next), held.eq(Mux(second, held, piece))]
        m.d.comb += [near.o.ready.eq(ready), near.ahead.o_ready.eq(ready_next),
                     jobs.r_en.eq(pop)]
        if getattr(platform, "checks", False):
            # a job is queued as the mid end takes its descriptor, long before its pieces
            m.d.comb += Assert(~take | jobs.r_rdy, "a piece without its job's conversion")

        # the real piece's address and strobes
        addr = Signal(aw)
        strb = Signal(BB)
        with m.If(widen):
            m.d.comb += [addr.eq(Cat(Const(0, LB), h, cur.addr[LB:])),
                         strb.eq(Cat(*(Cat(b, b) for b in Mux(h, cur.strb[H:],
                                                                cur.strb[:H]))))]
        with m.Elif(how.up):
            # half a real beat: a 2-byte element's first strobe for a byte, a word's for two
            # bytes
            taken = Mux(how.field, Cat(*(Cat(b, b) for b in cur.strb[0::4])), cur.strb[0::2])
            m.d.comb += [addr.eq(Cat(Const(0, LB), cur.addr[LB + 1:])),
                         strb.eq(Mux(cur.addr[LB], Cat(Const(0, H), taken),
                                     Cat(taken, Const(0, H))))]
        with m.Elif(how.bytes):
            m.d.comb += [addr.eq(cur.addr),
                         strb.eq(Mux(h, Cat(Const(0, H), cur.strb[H:]),
                                     Cat(cur.strb[:H], Const(0, H))))]
        with m.Else():
            m.d.comb += [addr.eq(cur.addr), strb.eq(cur.strb)]

        p = _Pipe(m, "s0_")
        valid0 = Signal(name="s0_valid")
        m.d.sync += valid0.eq(enter)
        # the beat and the half that leaves; the lanes' inputs are picked out of them in a
        # stage of their own
        data0 = p.reg(cur.data, "data", W)
        h0 = p.reg(h, "h")
        entry = data.StructLayout({"offset": 16, "scale": 16, "shift": 5, "kind": 2, "fp": 1,
                                   "q": 32, "tzs": 4, "wide": 1, "field": 1, "signed": 1,
                                   "bit": 5, "mask": 16, "msb": 5})
        cfg0 = Signal(entry, name="s0_cfg", reset_less=True)
        m.d.sync += [cfg0.offset.eq(Mux(plain, 0, cfg.offset)),
                     cfg0.scale.eq(Mux(plain, 1, cfg.scale)),
                     cfg0.shift.eq(Mux(plain, 0, cfg.shift)), cfg0.kind.eq(kind),
                     cfg0.fp.eq(how.fp), cfg0.field.eq(how.field), cfg0.signed.eq(src_signed),
                     cfg0.wide.eq(wide),
                     cfg0.bit.eq(cfg.bit), cfg0.mask.eq(~(Const(0xFFFF, 16) << cfg.width)[:16]),
                     cfg0.msb.eq(cfg.bit + cfg.width - 1)]
        side = data.StructLayout({"addr": aw, "strb": BB, "last": 1, "hi": 1, "kind": 2,
                                  "field": 1})
        side0 = Signal(side, name="s0_side", reset_less=True)
        m.d.sync += [side0.addr.eq(addr), side0.strb.eq(strb),
                     side0.last.eq(last),
                     side0.hi.eq(Mux(how.bytes, h, cur.addr[LB])),
                     side0.kind.eq(kind), side0.field.eq(how.field)]

        # -- the lanes ------------------------------------------------------------------------
        # the entry's conversion beside it, stage by stage: the scale's trailing zeros, and an
        # fp16 source's offset x scale, which its lanes subtract, from one multiplier (0
        # otherwise: an integer's offset goes before its product)
        q = _Pipe(m, "cfg_")
        cfgs = [cfg0]
        for s in range(1, LANE_STAGES + 1):
            nxt = Signal(entry, name=f"cfg_s{s}", reset_less=True)
            m.d.sync += nxt.eq(cfgs[-1])
            if s == 1:
                m.d.sync += nxt.tzs.eq(first_one(cfgs[0].scale, highest=False)[1])
            if s == 2:
                m.d.sync += nxt.q.eq(Mux(cfgs[1].fp, cfgs[1].offset.as_signed() *
                                         cfgs[1].scale.as_signed(), 0))
            cfgs.append(nxt)
        # stage 1: each lane's element, sign- or zero-extended: a 1-byte source's from the half
        # that leaves, a 2-byte source's from the whole beat, a bit field's value from its
        # 32-bit word (a 4-byte source: half as many elements as lanes; its mask and its top
        # bit's place worked out from the width as the entry took it)
        c0 = cfgs[0]
        x1 = []
        for i in range(H):
            byte = Mux(h0, data0.word_select(H + i, 8), data0.word_select(i, 8))
            word = data0.word_select(i, 16)
            x = Mux(c0.wide, Cat(word, c0.signed & word[15]),
                    Cat(byte, Mux(c0.signed, byte[7].replicate(9), 0)))
            if i < H // 2:
                w = data0.word_select(i, 32)
                f = (w >> c0.bit)[:16] & c0.mask
                neg = c0.signed & w.bit_select(c0.msb, 1)
                x = Mux(c0.field, Cat(f | Mux(neg, ~c0.mask, 0), neg), x)
            x1.append(p.reg(x, f"x{i}_1", signed(17)))
        outs = [_lane(m, f"lane{i}", x, cfgs[1:]) for i, x in enumerate(x1)]
        side_out = q.delay(side0, "side", LANE_STAGES + 1)
        valid_out = q.delay(valid0, "valid", LANE_STAGES + 1)

        # -- the last stage: the real beat, into the output queue -----------------------------
        # int8 results, and a bit field's 2-byte ones, fill half a beat
        beat = Signal(W)
        low = Mux(side_out.field, Cat(*outs[:H // 2]), Cat(*(o[:8] for o in outs)))
        m.d.comb += beat.eq(Mux((side_out.kind == _INT8) | side_out.field,
                                Mux(side_out.hi, Cat(Const(0, W // 2), low),
                                    Cat(low, Const(0, W // 2))),
                                Cat(*outs)))
        out_layout = piece_layout(aw, W)
        out_piece = Signal(out_layout, name="out_piece", reset_less=True)
        out_piece_valid = Signal(name="out_valid")
        m.d.sync += [out_piece.addr.eq(side_out.addr), out_piece.data.eq(beat),
                     out_piece.strb.eq(side_out.strb), out_piece.last.eq(side_out.last),
                     out_piece_valid.eq(valid_out)]
        queue = m.submodules.queue = SyncFIFOBuffered(width=len(out_piece.as_value()),
                                                    depth=self.depth)
        m.d.comb += [queue.w_data.eq(out_piece), queue.w_en.eq(out_piece_valid),
                     self.o.valid.eq(queue.r_rdy), self.o.payload.eq(queue.r_data),
                     queue.r_en.eq(self.o.ready)]
        m.d.comb += leave.eq(self.o.valid & self.o.ready)
        m.d.comb += self.busy.eq((used != 0) | (near.level != 0))
        # the bytes written, a cycle after the piece leaves
        ones = Signal(range(BB + 1))
        m.d.comb += ones.eq(sum(self.o.payload.strb[b] for b in range(BB)))
        m.d.sync += self.written_bytes.eq(Mux(leave, ones, 0))
        return m
