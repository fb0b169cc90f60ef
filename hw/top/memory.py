"""On-chip memory as an AXI4 subordinate: block RAM of ``size`` bytes at address 0.

INCR and FIXED bursts of up to 256 beats of any size up to the bus width are served, one beat a
cycle on each of reads and writes, which proceed independently (a read port and a write port on
one memory). A read of a word in the cycle a write to it lands (with ``slices``, the cycle
after the write's beat) is undefined on the FPGA (simulation returns the old bytes): AXI4 puts
no order between a read and a write, no block reads a word it is writing, and keeping the old
bytes costs the block RAM a copy of every write, a cycle late, and a compare of the addresses
in front of its read data (below). Byte strobes apply. A burst that reaches past ``size`` is
answered DECERR and a WRAP burst SLVERR; neither writes anything, and their reads return
zeros.

``stalls`` (a non-zero seed) makes the memory refuse addresses and write data and hold back read
data on about one cycle in four, from a 16-bit LFSR: testbenches use it to put backpressure on
the managers behind the arbiter. Builds for boards leave it at 0.

``slices`` (default True) puts a register and a register slice after the block RAM's read data, for
the clock rate; ``slices=False`` (small, slow builds) drives the R channel from the block RAM's
output directly. With ``slices`` the memory is also built as one block RAM array per byte lane, each
addressed from copies of its own of the read and write addresses (:func:`hw.fabric.registered_copy`,
kept apart on the ECP5 board tops): the full ULX3S SoC's 64 KiB are 32 block RAMs, which the placer
spreads over the die, too far apart for one address register to drive them all. Each array also
takes its writes from registers of its own, a cycle after the beat.

A testbench in Amaranth's simulator reads and writes the contents directly with
:meth:`AxiRam.sim_read` and :meth:`AxiRam.sim_write` (examples/amaranth_reuse.py)."""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In

from ..bus.axi import AXI4Signature, Burst, Resp
from ..bus.fifo import register_slice
from ..fabric import registered_copy

__all__ = ["AxiRam"]


class AxiRam(wiring.Component):
    def __init__(self, *, size, data_width=64, addr_width=32, id_width=6, stalls=0, slices=True):
        bpb = data_width // 8
        if size & (size - 1) or size < 4 * bpb:
            raise ValueError(f"size {size} must be a power of two of at least 4 bus beats")
        if not isinstance(stalls, int) or not 0 <= stalls < 1 << 16:
            raise ValueError(f"stalls must be 0 (none) or a 16-bit LFSR seed, not {stalls!r}")
        self.size = size
        #: the address bits below ``size``: all that the burst registers keep
        self.addr_bits = size.bit_length() - 1
        self.stalls = stalls
        self.slices = slices
        self.data_width = data_width
        self.sig = AXI4Signature(addr_width=addr_width, data_width=data_width, id_width=id_width)
        #: the contents, one array per byte lane with ``slices`` (else one): see sim_read
        self.lanes = [MemoryData(shape=data_width // (bpb if slices else 1), depth=size // bpb,
                                 init=[]) for _ in range(bpb if slices else 1)]
        super().__init__({"s_axi": In(self.sig)})

    def _places(self, address, length):
        """(array, word, bit) of each byte from ``address`` on, checked against ``size``."""
        if not 0 <= address <= address + length <= self.size:
            raise ValueError(f"bytes 0x{address:x}+{length} lie outside the memory's "
                             f"{self.size} bytes")
        bpb, lane_bytes = self.data_width // 8, self.data_width // 8 // len(self.lanes)
        for a in range(address, address + length):
            word, byte = divmod(a, bpb)
            yield self.lanes[byte // lane_bytes], word, 8 * (byte % lane_bytes)

    def sim_read(self, ctx, address: int, length: int) -> bytes:
        """In a simulation testbench (``ctx``): the ``length`` bytes from ``address``."""
        return bytes(ctx.get(data[word]) >> bit & 0xFF
                     for data, word, bit in self._places(address, length))

    def sim_write(self, ctx, address: int, data: bytes) -> None:
        """In a simulation testbench (``ctx``): store ``data`` at ``address``, as if written
        before the testbench's current cycle."""
        for (lane, word, bit), byte in zip(self._places(address, len(data)), bytes(data),
                                           strict=True):
            ctx.set(lane[word], ctx.get(lane[word]) & ~(0xFF << bit) | byte << bit)

    def _span(self, length, size, burst):
        """A burst's bytes (17 bits), and whether it is refused outright (WRAP, or a beat wider
        than the bus): taken into registers with the address, from the channel's fields."""
        return (Mux(burst == Burst.FIXED, 1, length + 1) << size)[:17], \
            (burst == Burst.WRAP) | (size > self.sig.size_code)

    def _split(self, addr):
        """An address as the burst registers keep it: its bits below ``size`` (all the memory
        needs) and whether any bit at or above ``size`` is set (such a burst is refused)."""
        return addr[:self.addr_bits], addr[self.addr_bits:] != 0

    def _check(self, low, far, span, bad):
        """The response a burst gets, from its registered address (``_split``), span and
        refusal: OKAY, DECERR past the end, SLVERR for WRAP or a beat wider than the bus."""
        # addr + span > size, with size a power of two: a bit at or above size set, or the
        # bits below size plus the span past it
        past = far | (low + span > self.size)
        return Mux(bad, Resp.SLVERR, Mux(past, Resp.DECERR, Resp.OKAY))

    @staticmethod
    def _lane_addresses(platform, m, lanes, word, word_nx, name):
        """The word address each of ``lanes`` block RAM arrays takes: ``word`` itself for one
        array, else a copy of its own per array, loaded from ``word``'s next value ``word_nx``
        and so always equal to ``word`` (``<name><lane>_<bit>_c0``)."""
        if lanes == 1:
            return [word]
        return [registered_copy(platform, m, word_nx, f"{name}{k}_") for k in range(lanes)]

    def elaborate(self, platform):
        m = Module()
        a = self.s_axi
        bpb = self.data_width // 8
        shift = self.sig.size_code
        # no_rw_check: the ECP5's block RAM reads undefined data where its other port writes the
        # same address in the same cycle, and Yosys would keep the old bytes by writing a cycle late
        # from registers and forwarding them to a read of their address
        lanes = bpb if self.slices else 1
        lane_bits = self.data_width // lanes
        mems = [Memory(data, attrs={"no_rw_check": 1}) for data in self.lanes]
        for k, mem in enumerate(mems):
            m.submodules["mem" if lanes == 1 else f"mem{k}"] = mem
        wps = [mem.write_port(granularity=8) for mem in mems]
        rps = [mem.read_port() for mem in mems]

        go = Signal(init=1)
        if self.stalls:
            lfsr = Signal(16, init=self.stalls)
            m.d.sync += lfsr.eq(Cat(lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10], lfsr[:15]))
            m.d.comb += go.eq(lfsr[0] | lfsr[7])

        def increment(size, burst):
            # a beat's step in bytes, taken into a register with the burst's address, so the step's
            # adder starts from registers, with no shift of 1 by the size in front of it
            return Mux(burst == Burst.FIXED, 0, 1 << size)

        def step(addr, inc):
            # within the address's bits below size: a burst that reaches past them is
            # refused, so no beat uses a stepped address that wrapped
            return (addr + inc)[:len(addr)]

        # A burst's address is taken into registers first, with its span in bytes worked out on
        # the way in, and checked in the next cycle (CHECK) from those registers: the span's
        # adder and shift, and the check's adder and compare, each have a cycle of their own.
        # Its beats start after that. Only the address's bits below size are kept, with a flag
        # for any bit above (`_split`): the adders and registers are those of the memory's
        # size, not of the bus's addresses (with them the iCEBreaker SoC went from 5,082 to
        # 5,002 of the UP5K's 5,280 logic cells, for its 4 KiB memory).

        # writes: one burst at a time, its response after the last beat
        w_check, w_active, w_resp_pending = Signal(), Signal(), Signal()
        w_addr, w_far = Signal(self.addr_bits), Signal()
        w_addr_nx = Signal(self.addr_bits)        # w_addr's next value
        w_inc = Signal(8)                         # bytes a beat steps the address by
        w_resp = Signal(2)
        m.d.comb += [a.awready.eq(~w_check & ~w_active & ~w_resp_pending & go),
                     a.wready.eq(w_active & go)]
        w_span, w_bad = Signal(17), Signal()
        m.d.comb += w_addr_nx.eq(w_addr)
        with m.If(a.awvalid & a.awready):
            span, bad = self._span(a.awlen, a.awsize, a.awburst)
            low, far = self._split(a.awaddr)
            m.d.comb += w_addr_nx.eq(low)
            m.d.sync += [w_check.eq(1), w_far.eq(far),
                         w_inc.eq(increment(a.awsize, a.awburst)),
                         a.bid.eq(a.awid), w_span.eq(span),
                         w_bad.eq(bad)]
        with m.If(w_check):
            m.d.sync += [w_check.eq(0), w_active.eq(1),
                         w_resp.eq(self._check(w_addr, w_far, w_span, w_bad))]
        beat_w = a.wvalid & a.wready
        strobes = Mux(beat_w & (w_resp == Resp.OKAY), a.wstrb, 0)
        m.d.sync += w_addr.eq(w_addr_nx)
        per = lane_bits // 8
        if self.slices:
            # a write reaches the block RAM a cycle after its beat, from registers of each lane's
            # own (its data, byte enables and a copy of the word address), which the placer can put
            # beside that lane's block RAMs: the arbiter's W channel drove the write enables of all
            # 32 directly, a 5 ns net across 44 rows of the ULX3S SoC. A manager that waits for the
            # response cannot read the word before it lands: the response leaves a cycle after the
            # last beat, and a read takes two cycles from its address to the block RAM.
            words = [registered_copy(platform, m, w_addr[shift:], f"wa{k}_")
                     for k in range(lanes)]
            for k, (wp, word) in enumerate(zip(wps, words, strict=True)):
                data = Signal(lane_bits, name=f"wd{k}")
                en = Signal(per, name=f"we{k}")
                m.d.sync += [data.eq(a.wdata[k * lane_bits:(k + 1) * lane_bits]),
                             en.eq(strobes[k * per:(k + 1) * per])]
                m.d.comb += [wp.addr.eq(word), wp.data.eq(data), wp.en.eq(en)]
        else:
            for wp in wps:
                m.d.comb += [wp.addr.eq(w_addr[shift:]), wp.data.eq(a.wdata),
                             wp.en.eq(strobes)]
        with m.If(beat_w):
            m.d.comb += w_addr_nx.eq(step(w_addr, w_inc))
            with m.If(a.wlast):
                m.d.sync += [w_active.eq(0), w_resp_pending.eq(1)]
        m.d.comb += [a.bvalid.eq(w_resp_pending), a.bresp.eq(w_resp)]
        with m.If(a.bvalid & a.bready):
            m.d.sync += w_resp_pending.eq(0)

        # reads: the port reads a beat whenever its output is free or moving on. The block RAM's
        # read data is late (no output register), so it goes straight into a register (stage
        # `held`), with no logic between; the beats then leave through a register slice (with
        # `slices`: without, the read port's output is the R channel)
        r_check, r_active = Signal(), Signal()
        r_addr, r_far = Signal(self.addr_bits), Signal()
        r_addr_nx = Signal(self.addr_bits)        # r_addr's next value
        r_len = Signal(8)
        r_left = Signal(9)
        r_inc = Signal(8)
        r_resp = Signal(2)
        rvalid, rlast, rready = Signal(), Signal(), Signal()     # the read port's output
        r_id = Signal.like(a.arid)
        m.d.comb += a.arready.eq(~r_check & ~r_active & ~rvalid & go)
        r_span, r_bad = Signal(17), Signal()
        m.d.comb += r_addr_nx.eq(r_addr)
        m.d.sync += r_addr.eq(r_addr_nx)
        with m.If(a.arvalid & a.arready):
            span, bad = self._span(a.arlen, a.arsize, a.arburst)
            low, far = self._split(a.araddr)
            m.d.comb += r_addr_nx.eq(low)
            m.d.sync += [r_check.eq(1), r_far.eq(far),
                         r_len.eq(a.arlen),
                         r_inc.eq(increment(a.arsize, a.arburst)), r_id.eq(a.arid),
                         r_span.eq(span), r_bad.eq(bad)]
        with m.If(r_check):
            m.d.sync += [r_check.eq(0), r_active.eq(1), r_left.eq(r_len + 1),
                         r_resp.eq(self._check(r_addr, r_far, r_span, r_bad))]
        advance = ~rvalid | rready
        fetch = r_active & advance & go
        words = self._lane_addresses(platform, m, lanes, r_addr[shift:], r_addr_nx[shift:], "ra")
        for rp, word in zip(rps, words, strict=True):
            m.d.comb += [rp.addr.eq(word), rp.en.eq(fetch)]
        read_data = Cat(rp.data for rp in rps)
        with m.If(fetch):
            m.d.comb += r_addr_nx.eq(step(r_addr, r_inc))
            m.d.sync += [r_left.eq(r_left - 1),
                         rvalid.eq(1), rlast.eq(r_left == 1)]
            with m.If(r_left == 1):
                m.d.sync += r_active.eq(0)
        with m.Elif(rready):
            m.d.sync += rvalid.eq(0)
        if not self.slices:
            # no stages: the read port's output is the R channel (it holds while R stalls:
            # the port reads only when its output moves on, and no new burst starts meanwhile)
            m.d.comb += [rready.eq(a.rready), a.rvalid.eq(rvalid),
                         a.rdata.eq(Mux(r_resp == Resp.OKAY, read_data, 0)),
                         a.rresp.eq(r_resp), a.rlast.eq(rlast), a.rid.eq(r_id)]
            return m
        held_valid, held_ready = Signal(), Signal()
        held_data = Signal.like(read_data)
        held_tag = Signal(len(r_resp) + 1 + len(r_id))      # response, last, ID
        m.d.comb += rready.eq(~held_valid | held_ready)
        with m.If(rready):
            m.d.sync += [held_valid.eq(rvalid), held_data.eq(read_data),
                         held_tag.eq(Cat(r_resp, rlast, r_id))]
        held_resp = held_tag[:len(r_resp)]
        beat = Cat(Mux(held_resp == Resp.OKAY, held_data, 0), held_tag)
        register_slice(m, "r", valid=held_valid, ready=held_ready, payload=beat,
                       out_valid=a.rvalid, out_ready=a.rready,
                       out_payload=Cat(a.rdata, a.rresp, a.rlast, a.rid))
        return m
