"""The DMA front end's descriptor: the registers that hold it (:class:`DescriptorStore`) and the
checks of the model's rules on it (:class:`DescriptorChecker`).

The store loads a descriptor from the register bank or, beat by beat, from a chain fetch; the
checker then works through the rules of :class:`model.dma.descriptor.Error` on the held fields,
in the model's order, and gives one verdict. The front end (:mod:`hw.dma.frontend`) sequences
the two and offers a descriptor that passes to the mid end.
"""

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES, MAX_DIMS, Error

from ..fabric import register_copies


def descriptor_layout():
    """A descriptor as the front end holds it: addresses and pad value of 64 bits, log2 of the
    element bytes, the dimensions in use, the chain's next address and flags (``last``: no
    descriptor follows; ``irq``: raise the interrupt as it ends), the conversion's code, shift,
    offset, scale and bit field, and five dimensions of 32-bit extent, valid count, source and
    destination stride."""
    dims = data.ArrayLayout(32, MAX_DIMS)
    return data.StructLayout({"src": 64, "dst": 64, "nxt": 64, "pad": 64, "elog": 2, "ndims": 3,
                              "last": 1, "irq": 1, "cvt_code": 5, "cvt_shift": 5,
                              "cvt_bit": 5, "cvt_width": 5, "cvt_offset": 16, "cvt_scale": 16,
                              "ext": dims, "val": dims, "sst": dims, "dstr": dims})


#: each field's bits in the descriptor's memory form (:meth:`model.dma.descriptor.Descriptor.pack`):
#: (bit offset, width); dimension ``k``'s four fields follow at 320 + 128 * k
_FIXED_FIELDS = {"src": (0, 64), "dst": (64, 64), "nxt": (128, 64), "pad": (192, 64),
                 "elog": (256, 2), "ndims": (258, 3), "last": (264, 1), "irq": (265, 1),
                 "cvt_code": (288, 5), "cvt_shift": (296, 5), "cvt_bit": (304, 5),
                 "cvt_width": (312, 5), "cvt_offset": (960, 16), "cvt_scale": (976, 16)}
_DIM_FIELDS = ("ext", "val", "sst", "dstr")
#: the conversion's fields besides its code: held only by an engine that converts
_CONVERSION_VALUES = ("cvt_shift", "cvt_bit", "cvt_width", "cvt_offset", "cvt_scale")


class DescriptorStore(wiring.Component):
    """The descriptor's registers. ``fields`` (:func:`descriptor_layout`) and ``eb`` (the element
    bytes, a register loaded with ``elog``) hold the last descriptor loaded:

    - from ``bank_desc`` (the register bank's descriptor) at the end of the cycle after the one
      ``load_bank`` is set in;
    - or from the beats of a fetch (``beat``: the data bus's width and an error flag above it),
      each field as the beat that holds it comes in. ``fetch`` starts a fetch: its beats count
      from the next one on, and ``fetched`` is set once all of them are in (``fetch_err``: one of
      them had an error response).

    Parameters: ``data_width``, ``chains`` (without it there is no fetch: ``fetch``, ``beat``,
    ``fetched`` and ``fetch_err`` are left out), ``convert`` (whether the engine converts:
    without it only the conversion's code is held, which the checks refuse unless it is 0, and
    the other conversion fields read 0)."""

    def __init__(self, *, data_width=64, chains=True, convert=True):
        self.data_width = data_width
        self.chains = chains
        self.convert = convert
        super().__init__({
            "fields": Out(descriptor_layout()), "eb": Out(4),
            "bank_desc": In(descriptor_layout()), "load_bank": In(1),
            **({"fetch": In(1), "beat": In(stream.Signature(data_width + 1, always_ready=True)),
                "fetched": Out(1), "fetch_err": Out(1)} if chains else {}),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        f, bank = self.fields, self.bank_desc
        # each register with its place in the memory form (bit offset, width), its value from the
        # bank and how its value is made from its bits
        layout = [(getattr(f, name), lo, width, getattr(bank, name), None)
                  for name, (lo, width) in _FIXED_FIELDS.items()
                  if self.convert or name not in _CONVERSION_VALUES]
        layout.append((self.eb, *_FIXED_FIELDS["elog"], Const(1, 4) << bank.elog,
                       lambda c: Const(1, 4) << c))
        layout += [(getattr(f, name)[k], 320 + 128 * k + 32 * i, 32, getattr(bank, name)[k], None)
                   for k in range(MAX_DIMS) for i, name in enumerate(_DIM_FIELDS)]

        # Each register loads from the bank or from its beat of a fetched descriptor, each
        # decision a copy of its own (hw.fabric.register_copies) made from the next values: one
        # set of the decision registers and their decode would drive all ~900 flip-flops' enables,
        # across the die in the SoC.
        bank_c = register_copies(platform, m, self.load_bank, len(layout), "desc_bank")
        if not self.chains:
            for (t, _, _, v_bank, _), by_bank in zip(layout, bank_c, strict=True):
                with m.If(by_bank):
                    m.d.sync += t.eq(v_bank)
            return m

        fetch_beats = DESCRIPTOR_BYTES // (W // 8)
        count = Signal(range(fetch_beats + 1))
        count_next = Signal.like(count)
        m.d.comb += self.fetched.eq(count == fetch_beats)
        # a beat passes a register before it is written into the fields
        beat = Signal.like(self.beat.payload)
        beat_valid = Signal()
        m.d.sync += [beat.eq(self.beat.payload), beat_valid.eq(self.beat.valid),
                     count.eq(count_next)]
        m.d.comb += count_next.eq(count)
        with m.If(self.fetch):
            m.d.comb += count_next.eq(0)
            m.d.sync += self.fetch_err.eq(0)
        with m.Elif(beat_valid):
            m.d.comb += count_next.eq(count + 1)
            with m.If(beat[W]):
                m.d.sync += self.fetch_err.eq(1)
        beats = [lo // W for _, lo, _, _, _ in layout]
        hit_c = {n: iter(register_copies(
                     platform, m, self.beat.valid & (count_next == n),
                     beats.count(n), f"desc_beat{n}_"))
                 for n in sorted(set(beats))}
        for (t, lo, width, v_bank, make), by_bank in zip(layout, bank_c, strict=True):
            n = lo // W
            assert (lo + width - 1) // W == n, "a field across two beats"
            v = beat[lo - n * W:lo - n * W + width]
            with m.If(by_bank):
                m.d.sync += t.eq(v_bank)
            with m.Elif(next(hit_c[n])):
                m.d.sync += t.eq(make(v) if make else v)
        return m


class _SerialProduct:
    """A 32 x 32-bit product by shift and add, two bits of the multiplier a step: ``acc`` is
    the product once ``done`` (a register) is set, after one step per two bits of the
    multiplier's highest set bit (one step for a multiplier of 0).

    It steps in every cycle it does not load (a product whose ``b`` is 0 keeps its ``acc``),
    so its ~220 flip-flops' only choice is the load, a register (:meth:`run`)."""

    def __init__(self, name):
        self.a = Signal(64, name=f"{name}_a")       # the multiplicand, two bits up a step
        self.a3 = Signal(64, name=f"{name}_a3")     # three times it
        self.b = Signal(32, name=f"{name}_b")       # the multiplier's bits not yet taken
        self.acc = Signal(64, name=f"{name}_acc")
        self.done = Signal(name=f"{name}_done")     # no set bit left in ``b``

    def run(self, m, loads, a, b):
        """Load ``a`` and ``b`` in the cycles ``loads`` (two copies of one flag: the
        multiplicand's registers follow the first, the rest the second) is set, else step."""
        a_r, a3, b_r = self.a, self.a3, self.b
        # the multiple of the shifted multiplicand the two bits ask for: 0, 1, 2 or 3 times
        digit = Mux(b_r[1], Mux(b_r[0], a3, a_r << 1), Mux(b_r[0], a_r, 0))
        with m.If(loads[0]):
            m.d.sync += [a_r.eq(a), a3.eq(a + (a << 1))]
        with m.Else():
            m.d.sync += [a_r.eq(a_r << 2), a3.eq(a3 << 2)]
        with m.If(loads[1]):
            m.d.sync += [b_r.eq(b), self.acc.eq(0), self.done.eq(0)]
        with m.Else():
            m.d.sync += [self.acc.eq(self.acc + digit[:64]), b_r.eq(b_r >> 2),
                         self.done.eq(b_r[2:] == 0)]


class _Step(enum.Enum, shape=3):
    IDLE = 0
    SETTLE = 1       # the fields have loaded; the dimension registers take dimension 0
    CHECK = 2        # one dimension at a time, in four phases
    SUMS = 3         # the sums' ends and the alignment test, registered
    COMPARE = 4      # the range and overlap tests, registered
    VERDICT = 5


def range_layout(addr_width):
    """The bytes a descriptor that passed its checks reads and writes: ``src`` up to (not
    including) ``src_end``, ``dst`` up to ``dst_end``, and ``reads`` (some valid count is 0:
    nothing is read, and the source's range means nothing). Every end is at most the address
    space's top, so ``addr_width`` + 1 bits hold it."""
    return data.StructLayout({"src": addr_width + 1, "src_end": addr_width + 1,
                              "dst": addr_width + 1, "dst_end": addr_width + 1, "reads": 1})


class DescriptorChecker(wiring.Component):
    """The model's rules on a held descriptor: ``desc`` (:func:`descriptor_layout`), ``eb`` (its
    element bytes), ``eb_dst`` (its written elements' bytes: ``eb`` unless it converts) and
    ``cvt_bad`` (its conversion breaks the ``CONVERT`` rule) must hold still from the cycle after
    ``start`` until the verdict.
    ``verdict`` gives, for one cycle, the error code (:class:`~model.dma.descriptor.Error`; 0
    when the descriptor passes). ``ranges`` (:func:`range_layout`) holds the bytes it reads and
    writes from the verdict of a descriptor that passes until the next ``start`` (its
    addresses for as long as ``desc`` holds it). A ``start`` begins the checks afresh whatever
    they were doing.

    The rules are checked one dimension at a time: about five cycles a dimension for counts
    below 64 and up to twenty for 32-bit ones (the products, below), then four cycles more.
    Parameter: ``addr_width`` (the address space the ranges must fit)."""

    def __init__(self, *, addr_width=32):
        self.addr_width = addr_width
        super().__init__({
            "desc": In(descriptor_layout()), "eb": In(4), "eb_dst": In(4), "cvt_bad": In(1),
            "start": In(1),
            "verdict": Out(stream.Signature(4, always_ready=True)),
            "ranges": Out(range_layout(addr_width)),
        })

    def elaborate(self, platform):
        m = Module()
        d, eb, eb_dst = self.desc, self.eb, self.eb_dst
        ndims, ext, val, sst, dstr = d.ndims, d.ext, d.val, d.sst, d.dstr
        step = Signal(_Step)
        # the addresses for the sums and compares, copies a cycle behind the fields (which the
        # mid end reads too, and which the placer may put by it): the compares start from
        # registers beside them
        chk_src = Signal(64)
        chk_dst = Signal(64)
        m.d.sync += [chk_src.eq(d.src), chk_dst.eq(d.dst)]
        # the alignment tests of the strides and addresses, in a register every cycle
        mis_parts = Signal(MAX_DIMS + 1)
        m.d.sync += mis_parts.eq(Cat(
            *((k < ndims) & (((sst[k] & (eb - 1)) | (dstr[k] & (eb_dst - 1))) != 0)
              for k in range(MAX_DIMS)),
            ((d.src & (eb - 1)) | (d.dst & (eb_dst - 1))) != 0))

        # The dimension being checked, as registers (`cur`): selected by `k` a cycle ahead (`k`
        # steps in a dimension's phase 1, at least two cycles before the next one's phase 0, and
        # rests at 0 between checks, so that `cur` holds dimension 0 of fields loaded in the start's
        # cycle from the cycle after SETTLE, the first phase 0). Each of the four fields selects by
        # copies of `k` of its own, made from its next value, so no one net reaches all 128
        # multiplexers.
        k = Signal(range(MAX_DIMS + 1))
        k_next = Signal.like(k)
        m.d.comb += k_next.eq(k)
        m.d.sync += k.eq(k_next)
        cur_e, cur_v, cur_s, cur_d = cur = [Signal(32, name=f"cur_{n}") for n in "evsd"]
        k_bits = [register_copies(platform, m, k_next[i], len(cur), f"k_chk{i}_f")
                  for i in range(len(k))]
        for i, (r, field) in enumerate(zip(cur, (ext, val, sst, dstr), strict=True)):
            with m.Switch(Cat(bits[i] for bits in k_bits)):
                for n in range(MAX_DIMS):
                    with m.Case(n):
                        m.d.sync += r.eq(field[n])
                with m.Default():
                    m.d.sync += r.eq(0)
        dim_left = Signal()                   # k names a dimension of the descriptor
        m.d.sync += dim_left.eq((k < ndims) & (k < MAX_DIMS))

        # Each dimension's two products, (extent - 1) x destination stride and (valid - 1) x
        # source stride, by shifts and adds in LUTs, two multiplier bits a step. The counts are
        # the multipliers, so a product takes a step per two bits of its count (three for a count
        # below 64), and a dimension two cycles more than its longer product (the operands; the
        # sums). No DSP slices: on the ECP5 the eight that 16-bit partial products took sat in
        # one row of the die and drew the routing of the front end to them. They load in each
        # phase 0, from a flag set a cycle ahead (in SETTLE, or a dimension's phase 3), in two
        # copies per product.
        phase = Signal(range(4))
        summing = Signal()                    # phase 3: the products go into the sums
        p_dst, p_src = _SerialProduct("p_dst"), _SerialProduct("p_src")
        loads = register_copies(platform, m, (step == _Step.SETTLE) | summing, 4, "prod_load")
        p_dst.run(m, loads[0:2], cur_d, cur_e - 1)
        # (a valid of 0 reads nothing: its product is not used)
        p_src.run(m, loads[2:4], cur_s, Mux(cur_v == 0, 0, cur_v - 1))

        # the sums: bytes the destination's inner dimensions reach, and the source's; each plus
        # the element bytes follows it a cycle later with no enable (read in phase 1 and in SUMS,
        # when nothing it follows has changed since). Cleared by a one-cycle flag set at the
        # start, added to in phase 3, so that their ~140 flip-flops are enabled by a register and
        # a test, not by a decode of the step, the phase and the products' done flags.
        span = Signal(70)
        src_top = Signal(70)
        span_eb = Signal(71)
        src_eb = Signal(71)
        sums_clear = Signal()
        e_zero, v_over, e_many, v_zero, nests = (Signal(name=n) for n in (
            "e_zero", "v_over", "e_many", "v_zero", "nests"))
        reg_e = Signal(32)                    # the dimension's extent and valid, a cycle behind
        reg_v = Signal(32)
        m.d.sync += [reg_e.eq(cur_e), reg_v.eq(cur_v), span_eb.eq(span + eb_dst),
                     src_eb.eq(src_top + eb), summing.eq(0), sums_clear.eq(0)]
        with m.If(sums_clear):
            m.d.sync += [span.eq(0), src_top.eq(0)]
        with m.Else():
            with m.If(summing & e_many):
                m.d.sync += span.eq(span + p_dst.acc)
            with m.If(summing & ~v_zero):
                m.d.sync += src_top.eq(src_top + p_src.acc)

        no_src = Signal()                     # some valid is 0: nothing is read
        first_dim_err = Signal(4)             # zero extent / valid > extent, first dimension
        nest_err = Signal()
        misaligned = Signal()
        s_end = Signal(72)
        d_end = Signal(72)
        s_over = Signal()                     # the source ends past the address space
        d_over = Signal()                     # the destination does
        overlap = Signal()                    # the two ranges overlap
        early_code = Signal(4)                # the code from the rules before the ranges'
        top = 1 << self.addr_width
        with m.Switch(step):
            with m.Case(_Step.SETTLE):
                m.d.sync += [step.eq(_Step.CHECK), phase.eq(0)]
            with m.Case(_Step.CHECK):
                # phase 0 loads the dimension's operands whether or not there is one, while
                # `dim_left` (a register) settles; phase 1 looks at it
                with m.If(phase == 0):
                    m.d.sync += phase.eq(1)
                with m.Elif(phase == 1):
                    with m.If(~dim_left):
                        m.d.sync += [phase.eq(0), step.eq(_Step.SUMS)]
                        m.d.comb += k_next.eq(0)
                    with m.Else():
                        # the dimension's comparisons on its registered extent and valid, and
                        # the nesting test on the destination stride before its first shift.
                        # The stride against a 71-bit sum: its high bits decide alone when any
                        # is set, so the compare is 32 bits wide
                        m.d.sync += [e_zero.eq(reg_e == 0), v_over.eq(reg_v > reg_e),
                                     e_many.eq(reg_e > 1), v_zero.eq(reg_v == 0),
                                     nests.eq((span_eb[32:] != 0) |
                                              (p_dst.a[:32] < span_eb[:32])),
                                     phase.eq(2)]
                        # the next dimension, now: `cur` follows it a cycle later, before the
                        # next phase 0 (`dim_left` too, read in the next phase 1)
                        m.d.comb += k_next.eq(k + 1)
                with m.Elif(phase == 2):
                    with m.If(p_dst.done & p_src.done):       # else the products step (`run`)
                        m.d.sync += [phase.eq(3), summing.eq(1)]
                with m.Else():                                 # phase 3: into the sums
                    m.d.sync += phase.eq(0)
                    with m.If(first_dim_err == 0):
                        with m.If(e_zero):
                            m.d.sync += first_dim_err.eq(Error.ZERO_EXTENT)
                        with m.Elif(v_over):
                            m.d.sync += first_dim_err.eq(Error.DIMS)
                    with m.If(e_many & nests):
                        m.d.sync += nest_err.eq(1)
                    with m.If(v_zero):
                        m.d.sync += no_src.eq(1)
            with m.Case(_Step.SUMS):
                m.d.sync += [misaligned.eq(mis_parts.any()), s_end.eq(chk_src + src_eb),
                             d_end.eq(chk_dst + span_eb), step.eq(_Step.COMPARE)]
            with m.Case(_Step.COMPARE):
                m.d.sync += [s_over.eq(s_end > top), d_over.eq(d_end > top),
                             overlap.eq((chk_src < d_end) & (chk_dst < s_end)),
                             step.eq(_Step.VERDICT)]
                # the first four rules, whose inputs are ready here, as one code
                with m.If(self.cvt_bad):
                    m.d.sync += early_code.eq(Error.CONVERT)
                with m.Elif((ndims == 0) | (ndims > MAX_DIMS)):
                    m.d.sync += early_code.eq(Error.DIMS)
                with m.Elif(first_dim_err != 0):
                    m.d.sync += early_code.eq(first_dim_err)
                with m.Elif(nest_err):
                    m.d.sync += early_code.eq(Error.DIMS)
                with m.Elif(misaligned):
                    m.d.sync += early_code.eq(Error.ALIGN)
                with m.Else():
                    m.d.sync += early_code.eq(0)
            with m.Case(_Step.VERDICT):
                m.d.sync += step.eq(_Step.IDLE)
                m.d.comb += self.verdict.valid.eq(1)
        # a start begins afresh, whatever the step (after the cases: it wins)
        with m.If(self.start):
            m.d.sync += [step.eq(_Step.SETTLE), sums_clear.eq(1), no_src.eq(0),
                         first_dim_err.eq(0), nest_err.eq(0)]
            m.d.comb += k_next.eq(0)

        m.d.comb += [self.ranges.src.eq(chk_src), self.ranges.src_end.eq(s_end),
                     self.ranges.dst.eq(chk_dst), self.ranges.dst_end.eq(d_end),
                     self.ranges.reads.eq(~no_src)]

        # the code, in the model's order
        code = self.verdict.payload
        with m.If(early_code != 0):
            m.d.comb += code.eq(early_code)
        with m.Elif(~no_src & s_over):
            m.d.comb += code.eq(Error.RANGE)
        with m.Elif(d_over):
            m.d.comb += code.eq(Error.RANGE)
        with m.Elif(~no_src & overlap):
            m.d.comb += code.eq(Error.OVERLAP)
        return m
