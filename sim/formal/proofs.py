"""The proofs: one harness per design and parameter set, each checked in the modes it lists.

Each :class:`Proof` builds its design, drives every input from the harness's free ports, states
the rules the design may rely on as assumptions (the other side of each handshake keeps the
protocol) and what the design promises as assertions. The bound of a ``bmc`` or ``cover`` run is
its ``depth`` in cycles from reset; ``prove`` (k-induction) holds for traces of any length.

docs/formal.md lists what each proof states, in words.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from amaranth import Cat, Elaboratable, Module, Mux, Signal, Value, signed
from amaranth.hdl import Assert, Assume, ResetSignal
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from atomcube.hw.bus.axi import Resp
from atomcube.hw.bus.fifo import RegisteredQueue, SkidBuffer
from atomcube.hw.bus.regbank import RegisterBank
from atomcube.hw.dma.backend import DATA_ID, FETCH_ID, BackEnd
from atomcube.hw.dma.timing import DmaTiming
from atomcube.hw.fabric import Checked, check_look_ahead, registered_operation
from atomcube.hw.lut.arith import IN_BITS, config_layout, derive_config
from atomcube.hw.lut.pipeline import LATENCY, LutPipeline
from atomcube.hw.sparse.engines import BeatReader, BeatWriter, StreamReader, StreamWriter
from atomcube.hw.sparse.gearbox import AtomGearbox
from atomcube.hw.sparse.ringbuf import RingBuffer
from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES
from atomcube.model.nvdla.lut import LE_ENTRIES, LO_ENTRIES
from atomcube.model.registers.selftest import SELFTEST

from .props import (
    AxiManagerChecks,
    Scoreboard,
    cover,
    free_constant,
    held_until_ready,
    past,
    stall_bound,
)

#: width of the unit counters: traces of up to 2**COUNT_BITS - 64 units (the bounds here move
#: fewer than 100); narrow, as every bit widens the solver's arithmetic
COUNT_BITS = 8


@dataclass(frozen=True)
class Proof:
    name: str
    #: one line: the design and what is proved of it
    title: str
    #: returns (harness, free input ports)
    build: Callable[[], tuple[Module, list]]
    depth: int
    modes: tuple[str, ...] = ("bmc", "cover")


def _harness(body) -> tuple[Module, list]:
    """A harness: a module filled by ``body(m)``, which returns the free input ports."""
    m = Module()
    ports = body(m)
    return m, ports


def _free_inputs(dut) -> list:
    """Every input of a component, left free."""
    values = (Value.cast(v) for path, member, v in dut.signature.flatten(dut)
              if member.flow == In)
    return [v for v in values if isinstance(v, Signal)]     # (an always-ready is a constant)


def _chosen(m: Module) -> Signal:
    k = Signal(COUNT_BITS, name="chosen")
    free_constant(m, k, "chosen")
    return k


def _lookahead(m: Module, name: str, ahead, value, *, unless=None):
    """``ahead`` (a design's look-ahead output) equals, in every cycle, what ``value`` is in the
    next (a reset, or ``unless``, in between aside)."""
    check_look_ahead(m, name, ahead, value, unless=unless, src_loc_at=2)


# -- stream primitives -------------------------------------------------------------------------

def _fifo_checks(m, name, *, w_en, w_rdy, w_data, r_rdy, r_en, r_data, level, capacity,
                 latency, clear=None, chosen):
    """What every queue promises: the ideal queue's order, output held until read, its level
    exact and bounded, its output valid within ``latency`` cycles of holding an entry, and room
    within ``latency`` cycles of being empty."""
    sb = Scoreboard(m, name, unit=len(Value.cast(w_data)), chosen=chosen,
                    count_bits=COUNT_BITS, clear=clear)
    sb.enter(w_en & w_rdy, w_data, 1, 1)
    sb.leave(r_rdy & r_en, r_data, 1, 1)
    held_until_ready(m, f"{name}_out", r_rdy, r_en, r_data, reset=clear)
    gone = clear if clear is not None else 0
    m.d.comb += [
        Assert(level == sb.held, f"{name}: level counts the entries held"),
        Assert(sb.held <= capacity, f"{name}: at most {capacity} entries held"),
    ]
    stall_bound(m, f"{name}_valid", (sb.held != 0) & ~r_rdy & ~gone, latency)
    stall_bound(m, f"{name}_room", (sb.held == 0) & ~w_rdy & ~gone, latency)
    cover(m, (sb.held == capacity) & r_rdy & r_en & w_en, f"{name}: full, read and written")
    return sb


def _skid_proof(width=3, clear=False, **options):
    def body(m):
        kwargs = dict(options)
        k = _chosen(m)
        w_en, w_data, r_en = Signal(name="w_en"), Signal(width, name="w_data"), Signal(name="r_en")
        ports = [k, w_en, w_data]
        flush = Signal(name="flush") if clear else None
        if flush is not None:
            ports.append(flush)
        announced = kwargs.pop("announced", False)
        if announced:
            # the reader's contract with ready_next: r_en is, each cycle, what it announced (or,
            # for the mutant "broken", the opposite)
            ann = Signal(name="ready_next")
            ports.append(ann)
            kwargs["ready_ahead"] = True
            was = past(m, ann, "r_en_was_announced")
            m.d.comb += r_en.eq(~was if announced == "broken" else was)
        else:
            ports.append(r_en)
        buf = SkidBuffer(width, **kwargs)
        # with the look-ahead taken from the reader, the buffer's own check of it
        # (hw.fabric.look_ahead) is one more assertion to prove
        m.submodules.dut = Checked(buf) if kwargs.get("ready_ahead") else buf
        if kwargs.get("ready_ahead"):
            m.d.comb += buf.ahead.o_ready.eq(ann)
        if flush is not None:
            m.d.comb += buf.clear.eq(flush)
        i, o = buf.i, buf.o
        m.d.comb += [i.valid.eq(w_en), i.payload.eq(w_data), o.ready.eq(r_en)]
        sb = _fifo_checks(m, "skid", w_en=w_en, w_rdy=i.ready, w_data=w_data, r_rdy=o.valid,
                          r_en=r_en, r_data=o.payload, level=buf.level, capacity=2, latency=0,
                          clear=flush, chosen=k)
        m.d.comb += [Assert(o.valid == (sb.held != 0), "skid: valid whenever it holds one"),
                     Assert(i.ready == (sb.held < 2), "skid: ready whenever it has room")]
        _lookahead(m, "i_ready_ahead", buf.ahead.i_ready, i.ready, unless=flush)
        _lookahead(m, "o_valid_ahead", buf.ahead.o_valid, o.valid, unless=flush)
        _lookahead(m, "o_payload_ahead", buf.ahead.o_payload, o.payload, unless=flush)
        return ports

    return lambda: _harness(body)


def _queue_proof(width=2, depth=4, mutant=None, **kwargs):
    """``mutant``: show the checks a queue that misbehaves, to prove they can fail: "drop"
    (the checks see a word taken that the queue refused) or "corrupt" (they see a bit of the
    output flipped while two entries are held)."""
    def body(m):
        k = _chosen(m)
        w_en, w_data, r_en = Signal(name="w_en"), Signal(width, name="w_data"), Signal(name="r_en")
        q = m.submodules.dut = RegisteredQueue(width, depth=depth, **kwargs)
        m.d.comb += [q.i.valid.eq(w_en), q.i.payload.eq(w_data), q.o.ready.eq(r_en)]
        w_rdy, r_data = q.i.ready, q.o.payload
        if mutant == "drop":
            w_rdy = q.i.ready | (q.level == 1)
        elif mutant == "corrupt":
            r_data = q.o.payload ^ (q.level == 2)
        elif mutant is not None:
            raise ValueError(f"mutant must be 'drop' or 'corrupt', not {mutant!r}")
        piped = depth >= q.pipe_depth
        # with its ready from the registered room (depth 4 or more) the FIFO fills to depth - 1;
        # besides it, the output slice's two entries, and with the block-RAM pipeline its write
        # register and read register
        capacity = (depth if depth < 4 and not piped else depth - 1) + 2 + (1 if piped else 0)
        sb = _fifo_checks(m, "queue", w_en=w_en, w_rdy=w_rdy, w_data=w_data, r_rdy=q.o.valid,
                          r_en=r_en, r_data=r_data, level=q.level, capacity=capacity,
                          latency=5 if piped else 3, chosen=k)
        m.d.comb += Assert(q.nonempty == (sb.held != 0), "queue: nonempty is exact")
        if "ahead" in q.signature.members:
            _lookahead(m, "i_ready_ahead", q.ahead.i_ready, q.i.ready)
        return [k, w_en, w_data, r_en]

    return lambda: _harness(body)


def _ring_proof(*, unit=2, in_units=2, words=3, out_units=3, late_bits=0, take_ahead=False):
    def body(m):
        k = _chosen(m)
        ring = m.submodules.dut = RingBuffer(unit=unit, in_units=in_units, words=words,
                                             out_units=out_units, late_bits=late_bits,
                                             take_ahead=take_ahead)
        i_valid, i_data = Signal(name="i_valid"), Signal(unit * in_units, name="i_data")
        take_en, flush = Signal(name="take_en"), Signal(name="flush")
        take = Signal(range(out_units + 1), name="take")
        ports = [k, i_valid, i_data, take_en, flush]
        m.d.comb += [ring.i.valid.eq(i_valid), ring.i.payload.eq(i_data),
                     ring.take_en.eq(take_en), ring.flush.eq(flush)]
        ports.append(take)
        if take_ahead:
            m.d.comb += ring.take_next.eq(take)
            take = ring.take
        else:
            m.d.comb += ring.take.eq(take)
        # the consumer's rules: it takes at most what is held and at most out_units
        m.d.comb += [Assume(~take_en | (take <= ring.level)), Assume(take <= out_units)]
        if take_ahead:
            m.d.comb += Assume(ring.take_next <= out_units)
        accept = i_valid & ring.i.ready
        data = ring.data
        if late_bits:
            # the consumer finishes the rotation a cycle later from its registers: check then,
            # with the whole book-keeping a cycle late
            d_q = past(m, ring.data, "data_q")
            o_q = past(m, ring.offset, "offset_q")
            data = ring.finish(m, d_q, o_q)
            accept, i_data_c = past(m, accept, "accept_q"), past(m, i_data, "i_data_q")
            take_en_c, take_c = past(m, take_en, "take_en_q"), past(m, take, "take_q")
            flush_c = past(m, flush, "flush_q")
        else:
            i_data_c, take_en_c, take_c, flush_c = i_data, take_en, take, flush
        sb = Scoreboard(m, "ring", unit=unit, chosen=k, count_bits=COUNT_BITS, clear=flush_c)
        sb.enter(accept, i_data_c, in_units, in_units)
        sb.leave(take_en_c, data, take_c, out_units)
        if not late_bits:
            cap = in_units * words
            m.d.comb += [
                Assert(ring.level == sb.held, "ring: level counts the units held"),
                Assert(ring.i.ready == (sb.held + in_units <= cap), "ring: ready iff a word fits"),
                Assert(ring.deep == (sb.held >= out_units), "ring: deep is exact"),
                Assert(ring.enough == (sb.held >= take), "ring: enough is exact"),
            ]
            _lookahead(m, "deep_next", ring.deep_next, ring.deep)
            cover(m, (sb.held == cap) & take_en & (take == out_units), "ring: full and drained")
        return ports

    return lambda: _harness(body)


def _gearbox_proof(*, atom_elements, beat_bytes):
    def body(m):
        k = _chosen(m)
        gb = m.submodules.dut = AtomGearbox(atom_elements=atom_elements, beat_bytes=beat_bytes)
        ins = [Signal(name="two"), Signal(name="i_valid"),
               Signal(16 * atom_elements, name="i_data"), Signal(name="o_ready"),
               Signal(name="flush")]
        two, i_valid, i_data, o_ready, flush = ins
        m.d.comb += [gb.two.eq(two), gb.i.valid.eq(i_valid), gb.i.payload.eq(i_data),
                     gb.o.ready.eq(o_ready), gb.flush.eq(flush)]
        # the element size holds while anything is held (an atom taken in a cycle the gearbox
        # was empty is held from the next)
        was_empty = past(m, (gb.empty & ~(i_valid & gb.i.ready)) | flush, "was_empty", init=1)
        m.d.comb += Assume(was_empty | (two == past(m, two, "two_q")))
        A = atom_elements
        sb = Scoreboard(m, "gearbox", unit=8, chosen=k, count_bits=COUNT_BITS, clear=flush)
        sb.enter(i_valid & gb.i.ready, i_data, Mux(two, 2 * A, A), 2 * A)
        sb.leave(gb.o.valid & o_ready, gb.o.payload, beat_bytes, beat_bytes)
        held_until_ready(m, "gearbox_out", gb.o.valid, o_ready, gb.o.payload, reset=flush)
        m.d.comb += Assert(gb.empty == (sb.held == 0), "gearbox: empty is exact")
        # a whole beat held leaves within a few cycles
        stall_bound(m, "gearbox_valid", (sb.held >= beat_bytes) & ~gb.o.valid & ~flush, 3)
        cover(m, ~two & (sb.held >= 2 * beat_bytes) & gb.o.valid & o_ready,
              "gearbox: one-byte elements flowing")
        cover(m, two & (sb.held >= 2 * beat_bytes) & gb.o.valid & o_ready,
              "gearbox: two-byte elements flowing")
        return ins + [k]

    return lambda: _harness(body)


# -- the register bank as an AXI4-Lite subordinate ---------------------------------------------

def _regbank_proof(**kwargs):
    def body(m):
        bank = m.submodules.dut = RegisterBank(SELFTEST, **kwargs)
        bus = bank.s_axil
        ports = _free_inputs(bank)
        k = _chosen(m)
        rst = ResetSignal()
        # the manager's rules: each request held, unchanged, until taken
        held_until_ready(m, "aw", bus.awvalid, bus.awready, Cat(bus.awaddr, bus.awprot),
                         check=Assume, reset=rst)
        held_until_ready(m, "w", bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb),
                         check=Assume, reset=rst)
        held_until_ready(m, "ar", bus.arvalid, bus.arready, Cat(bus.araddr, bus.arprot),
                         check=Assume, reset=rst)
        # the bank's: each response held, unchanged, until taken
        held_until_ready(m, "b", bus.bvalid, bus.bready, bus.bresp, reset=rst)
        held_until_ready(m, "r", bus.rvalid, bus.rready, Cat(bus.rdata, bus.rresp), reset=rst)

        def count(name, valid, ready):
            c = Signal(COUNT_BITS, name=name)
            with m.If(valid & ready):
                m.d.sync += c.eq(c + 1)
            m.d.comb += Assume(c < (1 << COUNT_BITS) - 2)
            return c

        aw = count("aw_taken", bus.awvalid, bus.awready)
        w = count("w_taken", bus.wvalid, bus.wready)
        b = count("b_given", bus.bvalid, bus.bready)
        ar = count("ar_taken", bus.arvalid, bus.arready)
        r = count("r_given", bus.rvalid, bus.rready)
        words = {reg.offset >> 2 for reg in SELFTEST}
        # writes the bank holds at once: with capture, one taken, one committed awaiting its
        # response's slot, one answered; without, the one answered
        writes = 3 if bank.capture else 1

        def decodes(addr):
            return Cat(*(addr[2:] == word for word in sorted(words))).any()

        def in_order(name, req_hs, req_n, addr, resp_valid, resp_n, resp):
            """The chosen (k-th) request's response is the k-th, and says whether its address
            holds a register."""
            ok = Signal(name=f"{name}_chosen_ok")
            with m.If(req_hs & (req_n == k)):
                m.d.sync += ok.eq(decodes(addr))
            expect = Mux(ok, Resp.OKAY, Resp.SLVERR)
            m.d.comb += Assert(~(resp_valid & (resp_n == k)) | (req_n > k) & (resp == expect),
                               f"{name}: the k-th response answers the k-th request")

        in_order("write", bus.awvalid & bus.awready, aw, bus.awaddr, bus.bvalid, b, bus.bresp)
        in_order("read", bus.arvalid & bus.arready, ar, bus.araddr, bus.rvalid, r, bus.rresp)
        m.d.comb += [
            Assert(~bus.bvalid | ((b < aw) & (b < w)), "no write response without a request"),
            Assert(~bus.rvalid | (r < ar), "no read response without a request"),
            Assert((aw - b <= writes) & (w - b <= writes) & (ar - r <= 1),
                   "outstanding requests bounded"),
        ]
        after_reset = past(m, rst, "after_reset", init=1)
        m.d.comb += Assert(~after_reset | ~bus.bvalid & ~bus.rvalid,
                           "no response in the cycle after a reset")
        # every request answered: within a few cycles of the manager offering all it needs and
        # taking responses as they come
        stall_bound(m, "write_answered", (aw > b) & (w > b) & ~bus.bvalid, 3)
        stall_bound(m, "read_answered", (ar > r) & ~bus.rvalid, 3)
        cover(m, bus.bvalid & (bus.bresp == Resp.SLVERR), "a write answered SLVERR")
        cover(m, bus.rvalid & (bus.rresp == Resp.SLVERR), "a read answered SLVERR")
        cover(m, (b == 3) & (r == 2), "three writes and two reads answered")
        return ports + [k]

    return lambda: _harness(body)


# -- AXI4 managers ---------------------------------------------------------------------------

def _aligned(value, bits: int):
    return value[:bits] == 0 if bits else 1


def _stream_reader_proof(*, beat_reader=False):
    def body(m):
        k = _chosen(m)
        if beat_reader:
            dut = BeatReader(data_width=32)
            room, max_burst = 1, 1
        else:
            dut = StreamReader(streams=2, data_width=32, max_burst=4,
                               fifo_depth=(4, 6))
            room, max_burst = 10, 4
        m.submodules.dut = dut
        ports = _free_inputs(dut)
        # the owner's contract: regions start on a beat; a flush only while idle
        m.d.comb += [Assume(_aligned(a, 2)) for a in dut.addr]
        # (the decompressor flushes in its FINISH state, with stop held: no burst is granted
        # in the flush's cycle)
        m.d.comb += [Assume(~dut.flush | (dut.idle & dut.stop)),
                     Assume(~dut.load.any() | dut.idle)]
        AxiManagerChecks(m, dut.axi, max_burst=max_burst, chosen=k, read_room=room,
                         read_ids=tuple(range(dut.streams)), ids=tuple(range(dut.streams)))
        cover(m, dut.axi.arvalid & dut.axi.arready & (dut.axi.arlen == max_burst - 1),
              "a full-length read burst")
        cover(m, Cat(*(o.valid for o in dut.o)).all(), "beats delivered")
        _lookahead(m, "error_next", dut.error_next, dut.error)
        return ports + [k]

    return lambda: _harness(body)


def _stream_writer_proof(*, beat_writer=False):
    def body(m):
        k = _chosen(m)
        if beat_writer:
            dut = BeatWriter(data_width=32)
            max_burst = 1
        else:
            dut = StreamWriter(data_width=32, max_burst=4)
            max_burst = 4
        m.submodules.dut = dut
        ports = _free_inputs(dut)
        m.d.comb += [Assume(_aligned(dut.addr, 2)), Assume(~dut.flush | (dut.idle & dut.stop)),
                     Assume(~dut.load | dut.idle)]
        chk = AxiManagerChecks(m, dut.axi, max_burst=max_burst, chosen=k)
        cover(m, (chk.b_taken == 2) & (chk.w_bursts == 2), "two bursts written and answered")
        cover(m, dut.axi.awvalid & (dut.axi.awlen == max_burst - 1), "a full-length write burst")
        _lookahead(m, "error_next", dut.error_next, dut.error)
        _lookahead(m, "range_error_next", dut.range_error_next, dut.range_error)
        return ports + [k]

    return lambda: _harness(body)


def _dma_backend_proof(late_credit=True):
    def body(m):
        k = _chosen(m)
        dut = m.submodules.dut = BackEnd(data_width=32, addr_width=16, max_burst=4, read_fifo=8,
                                         timing=DmaTiming(late_credit=late_credit))
        ports = _free_inputs(dut)
        # the mid and front ends' contract: runs of at least one beat; a descriptor fetch (128
        # bytes, 128-byte aligned) at any time, but one at a time, its address held until its
        # last beat is in
        axi = dut.m_axi
        fetching = Signal()                   # from fetch_go until its last beat is in
        fetch_sent = Signal()                 # ... and its address was taken
        held_addr = Signal.like(dut.fetch_addr)
        m.d.sync += held_addr.eq(dut.fetch_addr)
        m.d.comb += [Assume(dut.req.payload.n != 0),
                     Assume(_aligned(dut.wr.payload.addr, 2)),
                     Assume(_aligned(dut.fetch_addr, 7)),
                     Assume(~dut.fetch_go | ~fetching),
                     Assume(~fetching | (dut.fetch_addr == held_addr))]
        fetch = DESCRIPTOR_BYTES // 4
        chk = AxiManagerChecks(m, dut.m_axi, max_burst={DATA_ID: 4, FETCH_ID: fetch}, chosen=k,
                               read_room=8,
                               read_ids=(DATA_ID,), ids=(DATA_ID, FETCH_ID))
        with m.If(dut.fetch_go):
            m.d.sync += [fetching.eq(1), fetch_sent.eq(0)]
        with m.Elif(axi.arvalid & axi.arready & (axi.arid == FETCH_ID)):
            m.d.sync += fetch_sent.eq(1)
        with m.Elif(fetch_sent & (chk.owed[FETCH_ID] == 0)):
            m.d.sync += [fetching.eq(0), fetch_sent.eq(0)]
        cover(m, axi.arvalid & (axi.arid == DATA_ID) & (axi.arlen == 3), "a 4-beat data read")
        cover(m, axi.arvalid & (axi.arid == FETCH_ID), "a descriptor fetch")
        cover(m, axi.arvalid & (axi.arid == FETCH_ID) & (chk.owed[DATA_ID] != 0),
              "a descriptor fetch while data reads are in flight")
        cover(m, (chk.b_taken == 1) & axi.wvalid & axi.wready, "writes after a response")
        cover(m, dut.job_done, "a job's end burst answered")
        return ports + [k]

    return lambda: _harness(body)


# -- the LUT unit's pipeline -------------------------------------------------------------------

class _SumsForProducts:
    """A platform on which each of a design's multiplier blocks (:func:`hw.fabric.
    registered_product`) is an adder of the same operands in the same registers. A product of
    two free 17-bit operands is more than the solver can compare between two copies of a
    pipeline within the proofs' time; which operands meet, and when, is what a stall could get
    wrong, and an adder shows it as well (the arithmetic is checked against the model in
    cocotb)."""

    @staticmethod
    def registered_product(m, a, b, enable, name, width):
        return registered_operation(m, a, b, enable, name, width, operator.add)


class _On(Elaboratable):
    """``design`` elaborated on ``platform`` (a harness is converted with none)."""

    def __init__(self, design, platform):
        self.design, self.platform = design, platform
        design._MustUse__silence = True       # elaborated here, not by Amaranth's walk

    def elaborate(self, platform):
        return self.design.elaborate(self.platform)


def _lut_pipeline_proof(*, flavor="sdp", lanes=1, mutant=None):
    """The pipeline under backpressure against a copy of itself that is never stalled: its
    k-th result (data, table, state, mask, last) and the statistics taken with it are the
    copy's k-th, whatever the stalls. Both run with adders for multipliers
    (:class:`_SumsForProducts`). The configuration port holds any value from reset on; the
    tables any,
    written only while nothing is in flight (the unit's rules). ``mutant="stall"``: the pipeline
    is not told when its output is held, to prove the checks can fail."""
    def body(m):
        k = _chosen(m)
        W = IN_BITS[flavor]
        ports = [k]
        # the configuration port's layout, from the unit's derivation of it (whose registers are
        # left unused): the port itself is driven with any values, held from reset, a superset
        # of what the unit's registers can derive
        raw = {t: dict(start=Signal(signed(W)), end=Signal(signed(W)), select=Signal(signed(8)),
                       offset=Signal(signed(8)), exp=Signal(), uscale=Signal(signed(16)),
                       oscale=Signal(signed(16)), ushift=Signal(5), oshift=Signal(5), n=n)
               for t, n in (("le", LE_ENTRIES - 1), ("lo", LO_ENTRIES - 1))}
        layout = config_layout({t: derive_config(m, c, t, flavor) for t, c in raw.items()})
        entries = {t: c["n"] for t, c in raw.items()}
        cfg = Signal(layout, name="cfg")
        prio = Signal(3, name="prio")
        ports += [free_constant(m, cfg.as_value(), "cfg"), free_constant(m, prio, "prio")]

        def pipeline(name):
            p = LutPipeline(lanes=lanes, flavor=flavor, cfg_layout=layout, entries=entries)
            m.submodules[name] = _On(p, _SumsForProducts())
            m.d.comb += [p.prio.eq(prio), p.cfg.eq(cfg)]
            return p

        dut, ref = pipeline("dut"), pipeline("ref")
        i_valid, run, o_ready = Signal(name="i_valid"), Signal(name="run"), Signal(name="o_ready")
        i_payload = Signal(dut.i.payload.shape(), name="i_payload")
        ports += [i_valid, run, o_ready, i_payload.as_value()]
        took = dut.i.valid & dut.i.ready
        m.d.comb += [dut.i.valid.eq(i_valid), dut.i.payload.eq(i_payload), dut.run.eq(run),
                     # (the mutant: a pipeline told its output is always taken, which then moves
                     # on under a held output)
                     dut.o.ready.eq(1 if mutant == "stall" else o_ready),
                     # the copy takes what the pipeline takes, when it takes it, and is never
                     # stalled
                     ref.i.valid.eq(took), ref.i.payload.eq(i_payload), ref.run.eq(run),
                     ref.o.ready.eq(1)]
        taken = dut.o.valid & o_ready
        held_until_ready(m, "i", i_valid, dut.i.ready, i_payload, check=Assume,
                         reset=ResetSignal())

        counts = {}
        for name, event in (("dut_out", taken), ("ref_out", ref.o.valid),
                            ("dut_in", took), ("dut_written", dut.written),
                            ("ref_written", ref.written)):
            c = Signal(COUNT_BITS, name=name)
            with m.If(event):
                m.d.sync += c.eq(c + 1)
            m.d.comb += Assume(c < (1 << COUNT_BITS) - 2)
            counts[name] = c
        in_flight = counts["dut_in"] != counts["dut_out"]

        # the tables, one memory per bank shared by the two pipelines: written (any entry, any
        # value) only while nothing is in flight and nothing is taken
        for t, n in entries.items():
            for parity, bank in ((0, "even"), (1, "odd")):
                depth = (n + 2 - parity) // 2
                mem = m.submodules[f"{t}_{bank}"] = Memory(shape=signed(16), depth=depth, init=[])
                wp = mem.write_port()
                w_en, w_addr = Signal(name=f"{t}_{bank}_w_en"), Signal(range(depth),
                                                                       name=f"{t}_{bank}_w_addr")
                w_data = Signal(signed(16), name=f"{t}_{bank}_w_data")
                ports += [w_en, w_addr, w_data]
                m.d.comb += [wp.en.eq(w_en), wp.addr.eq(w_addr), wp.data.eq(w_data),
                             Assume(~w_en | ~in_flight & ~i_valid)]
                for p in (dut, ref):
                    for port in getattr(p, f"{t}_{bank}"):
                        rp = mem.read_port(domain="sync")
                        m.d.comb += [rp.addr.eq(port.addr), rp.en.eq(port.en),
                                     port.data.eq(rp.data)]

        def same_kth(name, ref_event, ref_n, ref_value, dut_event, dut_n, dut_value):
            """The pipeline's k-th ``dut_value`` (at ``dut_event``) is the copy's k-th."""
            ref_value, dut_value = Value.cast(ref_value), Value.cast(dut_value)
            seen = Signal(name=f"{name}_seen")
            kept = Signal(len(ref_value), name=f"{name}_kept")
            now = ref_event & (ref_n == k)
            with m.If(now):
                m.d.sync += [seen.eq(1), kept.eq(ref_value)]
            # (unstalled, the two come out together)
            m.d.comb += Assert(~(dut_event & (dut_n == k)) |
                               (seen | now) & (dut_value == Mux(seen, kept, ref_value)),
                               f"{name}: the k-th is the unstalled copy's k-th")

        same_kth("result", ref.o.valid, counts["ref_out"], ref.o.payload,
                 taken, counts["dut_out"], dut.o.payload)
        same_kth("counted", ref.written, counts["ref_written"], Cat(*ref.counted),
                 dut.written, counts["dut_written"], Cat(*dut.counted))
        held_until_ready(m, "o", dut.o.valid, o_ready, dut.o.payload, reset=ResetSignal())
        m.d.comb += [Assert(~took | ref.i.ready, "the copy takes every sample the pipeline takes"),
                     Assert(counts["dut_out"] <= counts["ref_out"], "no result before the copy's"),
                     Assert(dut.took_last == (took & i_payload.last), "took_last: a last taken")]
        # nothing lost: a result in flight reaches the output within the latency once the output
        # is free to move
        stall_bound(m, "result_out", in_flight & ~dut.o.valid, LATENCY)
        stalled = past(m, dut.o.valid & ~o_ready, "o_stalled")
        cover(m, stalled & taken & (counts["dut_out"] == 0),
              "the first result taken after a stall")
        return ports

    return lambda: _harness(body)


PROOFS: list[Proof] = [
    Proof("skid", "SkidBuffer: an ideal two-entry queue, look-aheads exact",
          _skid_proof(), depth=16),
    Proof("skid_flush", "SkidBuffer emptied by a flush (copied flags cleared with it)",
          _skid_proof(clear=True, select_bits=1, load_bits=1), depth=16),
    Proof("skid_announced", "SkidBuffer with the load worked out a cycle ahead (ready_next)",
          _skid_proof(announced=True, load_bits=2), depth=16),
    Proof("queue_d2", "RegisteredQueue, depth 2: an ideal queue behind a register slice",
          _queue_proof(depth=2), depth=20),
    Proof("queue_d5", "RegisteredQueue, depth 5: its ready from the registered room",
          _queue_proof(depth=5), depth=14),
    Proof("queue_piped", "RegisteredQueue with the block-RAM pipeline on both sides",
          _queue_proof(depth=4, pipe_depth=4), depth=14),
    Proof("ring", "RingBuffer: whole words in, any count of units out, in order",
          _ring_proof(), depth=12),
    Proof("ring_ahead", "RingBuffer with the take given a cycle ahead",
          _ring_proof(take_ahead=True), depth=12),
    Proof("ring_late", "RingBuffer with the rotation's last stage left to the consumer",
          _ring_proof(words=2, out_units=3, late_bits=1), depth=16),
    Proof("gearbox", "AtomGearbox: atoms in, beats out, in order",
          _gearbox_proof(atom_elements=2, beat_bytes=2), depth=10),
    Proof("gearbox_half", "AtomGearbox with half-beat atoms (two go out together)",
          _gearbox_proof(atom_elements=1, beat_bytes=2), depth=10),
    Proof("stream_reader", "StreamReader (decompressor): a legal AXI4 read manager",
          _stream_reader_proof(), depth=16),
    Proof("beat_reader", "BeatReader (serial LUT): a legal AXI4 read manager",
          _stream_reader_proof(beat_reader=True), depth=14),
    Proof("stream_writer", "StreamWriter (decompressor): a legal AXI4 write manager",
          _stream_writer_proof(), depth=16),
    Proof("beat_writer", "BeatWriter (serial LUT): a legal AXI4 write manager",
          _stream_writer_proof(beat_writer=True), depth=14),
    Proof("dma_backend", "DMA back end: a legal AXI4 manager for reads, writes and fetches",
          _dma_backend_proof(), depth=14),
    Proof("dma_backend_prompt_credit", "DMA back end built with timing.late_credit=False",
          _dma_backend_proof(late_credit=False), depth=14),
    Proof("lut_pipeline", "LUT pipeline (SDP, one lane): every result as if never stalled",
          _lut_pipeline_proof(), depth=17),
    Proof("regbank", "RegisterBank as an AXI4-Lite subordinate (write capture)",
          _regbank_proof(), depth=16),
    Proof("regbank_direct", "RegisterBank as an AXI4-Lite subordinate (no capture)",
          _regbank_proof(capture=False), depth=16),
    Proof("regbank_mirror", "RegisterBank as an AXI4-Lite subordinate (mirrored reads)",
          _regbank_proof(mirror=True), depth=16),
]


#: harnesses whose design is made to misbehave: each must fail its bmc run (tests/test_formal.py)
MUTANTS: list[Proof] = [
    Proof("queue_drops", "RegisteredQueue seen to take a word it refused",
          _queue_proof(depth=2, mutant="drop"), depth=12, modes=("bmc",)),
    Proof("queue_corrupts", "RegisteredQueue seen to alter a word",
          _queue_proof(depth=2, mutant="corrupt"), depth=12, modes=("bmc",)),
    Proof("lut_pipeline_slips", "LUT pipeline seen to move on under a held output",
          _lut_pipeline_proof(mutant="stall"), depth=17, modes=("bmc",)),
    Proof("skid_promise_broken", "SkidBuffer told a ready_next its reader does not keep",
          _skid_proof(announced="broken", load_bits=2), depth=8, modes=("bmc",)),
]


def find(name: str) -> Proof:
    for p in PROOFS + MUTANTS:
        if p.name == name:
            return p
    raise KeyError(f"no proof named {name!r}: one of {', '.join(p.name for p in PROOFS)}")
