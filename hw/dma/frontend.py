"""The DMA's front end: the register bank, the descriptor source, the checks and the job's
sequence.

A job runs the descriptor held in the registers (``ctrl.start``) or a chain in memory
(``ctrl.start_chain``), whose 128-byte descriptors the back end fetches one burst at a time.
Built with ``chains=False`` it has no fetch (nor its ports): a chain's start ends the job
with ``NO_CHAIN``.
Each descriptor is checked against the model's rules (:class:`model.dma.descriptor.Error`, in
the same order, one dimension at a time) before the mid end starts on it. A descriptor ends
when the mid end is done and the back end idle (its last write answered), so the next one sees
its results; a chain's next descriptor is fetched and checked meanwhile, and offered at that
end (an error in it is reported then). An error response *halts* the back end (it stops itself: see
:mod:`hw.dma.backend`): the front end waits until what was issued has drained, then ends the
job with the error code and the failing descriptor's index. ``dp_reset`` clears the mid and
back end between descriptors; it is also set while the engine is reset, and is their only reset.

Ports: ``s_axil`` (registers), ``irq``; ``desc``, the checked descriptor offered to the mid end
(:func:`~hw.dma.midend.request_layout`, held until taken), which answers ``busy``,
``read_bytes``, ``written_bytes``; ``fetch_addr``, ``fetch_go``,
``fetch_beat``, ``read_err``, ``write_err``, ``idle``, ``drained`` with the back end.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES, MAX_DIMS, Error
from atomcube.model.registers.dma import DMA

from ..bus.axi import AXI4LiteSignature
from ..bus.regbank import RegisterBank
from ..fabric import register_copies
from .midend import request_layout


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


class _State(enum.Enum, shape=4):
    """Where the descriptor being prepared is (the job that runs meanwhile is followed apart:
    ``running``, ``draining``)."""
    IDLE = 0         # no job
    FETCH = 1        # reading a chain descriptor
    CHECK = 2        # one dimension at a time
    VERDICT = 3
    OFFER = 4        # checked: offered to the mid end once no job runs, until taken
    WAIT = 5         # the job's last descriptor is taken: nothing more to prepare
    FAILED = 6       # a descriptor broke a rule, or its fetch failed: the error ends the job
    #                  once the descriptor before it has ended
    SUMS = 7         # the checks' sums, registered for the verdict
    COMPARE = 8      # the verdict's range and overlap tests, registered
    LOAD = 9         # the descriptor's fields load (from the registers; a chain one's
    #                  were written as its beats came), `cur` takes dimension 0's


class FrontEnd(wiring.Component):
    def __init__(self, *, data_width=64, addr_width=32, bank_mirror=False, chains=True):
        self.data_width = data_width
        self.addr_width = addr_width
        self.chains = chains
        self.regmap = DMA
        self._bank = RegisterBank(DMA, addr_width=8, mirror=bank_mirror)
        aw = addr_width
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=8, data_width=32)),
            "irq": Out(1),
            # the mid end
            "desc": Out(stream.Signature(request_layout(aw))),
            "busy": In(1), "read_bytes": In(35), "written_bytes": In(35),
            # the back end
            **({"fetch_addr": Out(aw), "fetch_go": Out(1),
                "fetch_beat": In(stream.Signature(data_width + 1, always_ready=True))}
               if chains else {}),
            "dp_reset": Out(1),
            "read_err": In(1), "write_err": In(1), "idle": In(1), "drained": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        BB = W // 8
        aw = self.addr_width
        fetch_beats = DESCRIPTOR_BYTES // BB

        bank = m.submodules.bank = self._bank
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        regs = bank.regs

        state = Signal(_State)
        chain = Signal()                      # the job is a chain
        index = Signal(24)                    # descriptor of the job being worked on
        error_code = Signal(4)
        m.d.comb += [regs.status.busy.r_data.eq(state != _State.IDLE),
                     regs.hwinfo.data_bytes.r_data.eq(BB),
                     regs.hwinfo.max_dims.r_data.eq(MAX_DIMS),
                     regs.hwinfo.addr_width.r_data.eq(aw),
                     regs.hwinfo.chains.r_data.eq(int(self.chains)),
                     regs.error.code.r_data.eq(error_code),
                     regs.error.index.r_data.eq(index)]

        # -- the active descriptor ----------------------------------------------------------------
        src = Signal(64)
        dst = Signal(64)
        nxt = Signal(64)
        pad = Signal(64)
        elog = Signal(2)
        ndims = Signal(3)
        last_desc = Signal()
        want_irq = Signal()
        ext = [Signal(32, name=f"ext{k}") for k in range(MAX_DIMS)]
        val = [Signal(32, name=f"val{k}") for k in range(MAX_DIMS)]
        sst = [Signal(32, name=f"sst{k}") for k in range(MAX_DIMS)]
        dstr = [Signal(32, name=f"dstr{k}") for k in range(MAX_DIMS)]
        eb = Signal(4)                        # element bytes, loaded with elog
        d = SimpleNamespace(src=src, dst=dst, nxt=nxt, pad=pad, elog=elog, ndims=ndims,
                            last_desc=last_desc, want_irq=want_irq, ext=ext, val=val, sst=sst,
                            dstr=dstr, eb=eb)

        start_regs = regs.ctrl.start.pulse[0] & (state == _State.IDLE)
        start_chain = regs.ctrl.start_chain.pulse[0] & (state == _State.IDLE) & \
            ~regs.ctrl.start.pulse[0]
        fetch_addr = Signal(64)
        # the chain address's tests, as registers loaded with it
        fetch_misaligned = Signal()
        fetch_over = Signal()
        if self.chains:
            m.d.comb += self.fetch_addr.eq(fetch_addr[:aw])

        def set_fetch_addr(value):
            m.d.sync += [fetch_addr.eq(value), fetch_misaligned.eq(value[:7] != 0),
                         fetch_over.eq(value[aw:] != 0)]

        # the descriptor offered to the mid end is the one held here: the front end keeps it
        # until the job ends, so it is still while offered
        offer = self.desc.payload
        m.d.comb += [offer.src.eq(src[:aw]), offer.dst.eq(dst[:aw]), offer.elog.eq(elog),
                     offer.pad.eq(pad), offer.ndims.eq(ndims)]
        for k in range(MAX_DIMS):
            m.d.comb += [offer.ext[k].eq(ext[k]), offer.val[k].eq(val[k]),
                         offer.sst[k].eq(sst[k]), offer.dstr[k].eq(dstr[k])]

        # -- the checks: one dimension at a time, then the verdict (the states CHECK to VERDICT)
        c = self._check_datapath(m, platform, d, state)

        dp_reset = Signal()
        # the mid and back end are reset a cycle after the front end decides it, from a
        # register: a descriptor's checks are not on the path into their reset inputs. The
        # engine's own reset sets it, so it is their only reset: one flip-flop drives their
        # reset inputs, with no gate after it to OR in the engine's reset
        dp_reset_q = Signal(init=1)
        m.d.sync += dp_reset_q.eq(dp_reset)
        m.d.comb += self.dp_reset.eq(dp_reset_q)

        bytes_read, bytes_written, cycles, ndone = self._counters(m, regs, state)

        # -- the sequencer --------------------------------------------------------------------
        # Two things go on at once: the descriptor that runs (taken by the mid end, until its
        # last write is answered: `running`) and the preparation of the next one (`state`:
        # fetched, checked, then offered). A chain's next descriptor is fetched and checked
        # while the one before it runs, and offered once that one has ended, so it still sees
        # the results before it. An error found in it ends the job only then: descriptors end,
        # raise their interrupts and report errors in chain order.
        #
        # the mid end done and the back end idle, a cycle ago: a register, so the wide OR of
        # their busy flags is not in front of the sequencer's registers. It still shows the
        # cycle of the take in the cycle after it, so the end is looked for from the second
        # cycle after the take (`armed`); draining does the same with the back end's drained flag
        quiet = Signal()
        armed = Signal()
        m.d.sync += quiet.eq(~self.busy & self.idle)
        drained_q = Signal()
        m.d.sync += drained_q.eq(self.drained)
        running = Signal()                    # a taken descriptor has not ended
        draining = Signal()                   # ... and stopped at an error response
        run_last = Signal()                   # the running descriptor is the job's last
        run_irq = Signal()                    # ... and raises the interrupt as it ends
        fail_code = Signal(4)                 # the error of the descriptor in FAILED
        done_set = Signal()
        err_set = Signal()
        irq_set = Signal()
        fetch_count = Signal(range(fetch_beats + 1))
        fetch_err = Signal()
        # a fetch may be in flight: the back end is not reset under it, so a descriptor ends
        # only once the fetch of the next one is in
        fetching = (state == _State.FETCH) if self.chains else Const(0)

        def finish(code):
            m.d.sync += [error_code.eq(code), state.eq(_State.IDLE), want_fetch.eq(0),
                         running.eq(0), draining.eq(0)]
            m.d.comb += [done_set.eq(1), err_set.eq(code != 0), dp_reset.eq(1)]

        def fail(code):
            """The descriptor being prepared breaks a rule: the job ends with ``code`` once the
            descriptor that runs (if one does) has ended."""
            with m.If(running):
                m.d.sync += [state.eq(_State.FAILED), fail_code.eq(code)]
            with m.Else():
                finish(code)

        def fetch(addr):
            m.d.sync += [state.eq(_State.FETCH), fetch_err.eq(0), want_fetch.eq(1)]
            m.d.comb += fetch_count_next.eq(0)
            set_fetch_addr(addr)

        # A chain descriptor's beats pass a register, then each writes the fields it holds
        # straight into the descriptor's registers (the mid end has its own copy of the one
        # that runs). A descriptor from the register bank loads in a state of
        # its own (LOAD), enabled by `load_now` and `load_regs`, set the cycle before: the
        # decision to load (a start pulse) is not on the path into the ~900 registers' enables
        load_now = Signal()
        load_regs = Signal()                  # LOAD takes the register bank's descriptor
        m.d.sync += load_now.eq(0)
        # load_now & load_regs at the next clock edge, and fetch_count (below) there: each of
        # the descriptor's registers loads on copies of its own of the two decisions (bank
        # load, its beat come in), taken from them
        bank_next = Signal()
        fetch_count_next = Signal.like(fetch_count)
        m.d.comb += fetch_count_next.eq(fetch_count)
        m.d.sync += fetch_count.eq(fetch_count_next)

        def to_load(from_regs):
            m.d.sync += [state.eq(_State.LOAD), load_now.eq(1), load_regs.eq(from_regs),
                         c.sums_clear.eq(1)]
            m.d.comb += bank_next.eq(from_regs)

        self._load_fields(m, platform, regs, d, c.cur, (load_now, load_regs, bank_next),
                          (fetch_count, fetch_count_next, fetch_err))

        want_fetch = Signal()
        if self.chains:
            go = want_fetch & ~dp_reset_q & ~fetch_misaligned & ~fetch_over
            m.d.sync += self.fetch_go.eq(go)
            with m.If(go):
                m.d.sync += want_fetch.eq(0)

        # offered while checked and no descriptor runs; held until taken, as neither changes
        # before the take
        m.d.comb += self.desc.valid.eq((state == _State.OFFER) & ~running)
        self._sums(m, c, d)
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start_regs | start_chain):
                    m.d.sync += [index.eq(0), error_code.eq(0), chain.eq(start_chain),
                                 bytes_read.eq(0), bytes_written.eq(0), cycles.eq(0),
                                 ndone.eq(0)]
                    with m.If(start_regs):
                        to_load(1)
                    with m.Else():
                        if self.chains:
                            fetch(regs.chain_addr.value.data)
                        else:
                            finish(Error.NO_CHAIN)
            if self.chains:
                with m.Case(_State.FETCH):
                    with m.If(fetch_misaligned):
                        fail(Error.ALIGN)
                    with m.Elif(fetch_over):
                        fail(Error.RANGE)
                    with m.Else():
                        with m.If(fetch_count == fetch_beats):
                            with m.If(fetch_err):
                                fail(Error.FETCH_ERROR)
                            with m.Else():
                                to_load(0)
            with m.Case(_State.LOAD):
                # the fields load this cycle (`load_now`); the checks start on them next
                m.d.sync += [state.eq(_State.CHECK), c.phase.eq(0), c.no_src.eq(0),
                             c.first_dim_err.eq(0), c.nest_err.eq(0)]
                m.d.comb += c.k_next.eq(0)
            self._check_cases(m, c, d, state)
            with m.Case(_State.VERDICT):
                with m.If(c.early_code != 0):
                    fail(c.early_code)
                with m.Elif(~c.no_src & c.s_over):
                    fail(Error.RANGE)
                with m.Elif(c.d_over):
                    fail(Error.RANGE)
                with m.Elif(~c.no_src & c.overlap):
                    fail(Error.OVERLAP)
                with m.Else():
                    m.d.sync += state.eq(_State.OFFER)
            with m.Case(_State.OFFER):
                # taken: it runs from its own copy in the mid end, and the next descriptor of
                # a chain is fetched now
                with m.If(self.desc.valid & self.desc.ready):
                    m.d.sync += [running.eq(1), armed.eq(1), run_last.eq(last_desc),
                                 run_irq.eq(want_irq)]
                    if self.chains:
                        with m.If(chain & ~last_desc):
                            fetch(nxt)
                        with m.Else():
                            m.d.sync += state.eq(_State.WAIT)
                    else:
                        m.d.sync += state.eq(_State.WAIT)
            with m.Case(_State.FAILED):
                with m.If(~running):
                    finish(fail_code)

        # the running descriptor's end (after the preparation's cases: an end by an error
        # response stops the preparation too)
        with m.If(draining):
            # the back end halted itself as it raised the error, a cycle before it was seen
            # here: the issued bursts finish, reads in flight come back (and are dropped).
            # `drained_q` is the back end's drained flag a cycle ago, so it is looked at from
            # the second cycle of draining: by then it was taken two cycles into the halt, and
            # nothing is issued after that
            m.d.sync += armed.eq(1)
            with m.If(armed & drained_q & ~fetching):
                finish(Mux(self.read_err, Error.READ_ERROR, Error.WRITE_ERROR))
        with m.Elif(running & (self.read_err | self.write_err)):
            m.d.sync += [draining.eq(1), armed.eq(0)]
        with m.Elif(running & armed & quiet & ~fetching):
            m.d.sync += [running.eq(0), armed.eq(0), ndone.eq(ndone + 1)]
            m.d.comb += [dp_reset.eq(1), irq_set.eq(run_irq)]
            with m.If(~chain | run_last):
                m.d.sync += [state.eq(_State.IDLE), error_code.eq(0)]
                m.d.comb += done_set.eq(1)
            with m.Else():
                m.d.sync += index.eq(index + 1)

        m.d.comb += [regs.status.done.set.eq(done_set), regs.status.error.set.eq(err_set),
                     regs.status.desc_irq.set.eq(irq_set),
                     self.irq.eq((regs.status.done.data[0] & regs.irq_enable.done.data[0]) |
                                 (regs.status.error.data[0] & regs.irq_enable.error.data[0]) |
                                 (regs.status.desc_irq.data[0] &
                                  regs.irq_enable.desc_irq.data[0]))]
        return m

    def _check_datapath(self, m, platform, d, state):
        """The checks' registers and their products, stepped by :meth:`_check_cases`; returns
        them by name."""
        src, dst, ndims, eb = d.src, d.dst, d.ndims, d.eb
        ext, val, sst, dstr = d.ext, d.val, d.sst, d.dstr
        # the addresses for the checks' sums and compares, copies a cycle behind `src` and `dst`
        # (which the mid end reads too, and which the placer may put by it): the descriptor loads at
        # least two cycles before SUMS, and the copies let the overlap compare start from registers
        # beside it
        chk_src = Signal(64)
        chk_dst = Signal(64)
        m.d.sync += [chk_src.eq(src), chk_dst.eq(dst)]
        # the alignment tests of the strides and addresses, in a register every cycle (the
        # descriptor is held still for the checks' cycles before SUMS reads it)
        mis_parts = Signal(MAX_DIMS + 1)
        m.d.sync += mis_parts.eq(Cat(
            *((k < ndims) & (((sst[k] | dstr[k]) & (eb - 1)) != 0) for k in range(MAX_DIMS)),
            ((src | dst) & (eb - 1)) != 0))
        k_chk = Signal(range(MAX_DIMS + 1))
        span = Signal(70)                     # bytes the destination's inner dimensions reach
        src_top = Signal(70)
        no_src = Signal()                     # some valid is 0: nothing is read
        first_dim_err = Signal(4)             # zero extent / valid > extent, first dimension
        nest_err = Signal()
        misaligned = Signal()                 # the verdict's inputs, from SUMS
        s_end = Signal(72)
        d_end = Signal(72)
        s_over = Signal()                     # the source ends past the address space
        d_over = Signal()                     # the destination does
        overlap = Signal()                    # the two ranges overlap
        early_code = Signal(4)                # the verdict from the checks before COMPARE's
        cur_e = Signal(32)
        cur_v = Signal(32)
        cur_s = Signal(32)
        cur_d = Signal(32)
        # the dimension being checked, as registers: selected by k_chk a cycle ahead (k_chk steps in
        # a dimension's phase 1, at least two cycles before the next one's phase 0), and dimension
        # 0's loaded with the descriptor in LOAD. So the check's first phase starts from registers,
        # not from a selection by k_chk. Each of the four fields selects by copies of k_chk of its
        # own, made from its next value (k_next), so no one net reaches all 128 multiplexers
        cur = (cur_e, cur_v, cur_s, cur_d)
        k_next = Signal.like(k_chk)
        m.d.comb += k_next.eq(k_chk)
        m.d.sync += k_chk.eq(k_next)
        k_bits = [register_copies(platform, m, k_next[i], len(cur), f"k_chk{i}_f")
                  for i in range(len(k_chk))]
        for f, (r, field) in enumerate(zip(cur, (ext, val, sst, dstr), strict=True)):
            with m.Switch(Cat(bits[f] for bits in k_bits)):
                for k in range(MAX_DIMS):
                    with m.Case(k):
                        m.d.sync += r.eq(field[k])
                with m.Default():
                    m.d.sync += r.eq(0)
        # each dimension's two products, (extent - 1) x destination stride and (valid - 1) x
        # source stride, by shifts and adds in LUTs, two multiplier bits a step. The counts
        # (extent - 1, valid - 1) are the multipliers, so a product takes a step per two bits
        # of its count (three for a count below 64), and a dimension two cycles more than its
        # longer product (the operands; the sums). No DSP slices: on the ECP5 the eight that
        # 16-bit partial products took sat in one row of the die and drew the routing of the
        # front end to them
        phase = Signal(range(4))
        # phase 3 (a one-cycle flag, `summing`) adds the dimension's products into the sums, and
        # LOAD (`sums_clear`) clears them: the sums' ~140 flip-flops are enabled by a register and a
        # test, not by a decode of the state, the phase and the products' done flags
        summing = Signal()
        sums_clear = Signal()
        prods = [_SerialProduct("p_dst"), _SerialProduct("p_src")]
        e_zero, v_over, e_many, v_zero, nests = (Signal(name=n) for n in (
            "e_zero", "v_over", "e_many", "v_zero", "nests"))
        reg_e = Signal(32)
        reg_v = Signal(32)
        # span + element bytes and src_top + element bytes, as they were a cycle ago (for the
        # nesting test in phase 1, and after the last dimension for the verdict's range ends)
        span_eb = Signal(71)
        src_eb = Signal(71)
        dim_left = Signal()                   # k_chk names a dimension of the descriptor
        m.d.sync += dim_left.eq((k_chk < ndims) & (k_chk < MAX_DIMS))
        # the products load in each phase 0 of CHECK: set a cycle ahead (from LOAD, or a
        # dimension's phase 3), in two copies per product
        p_dst, p_src = prods
        load_next = (state == _State.LOAD) | summing
        loads = register_copies(platform, m, load_next, 4, "prod_load")
        p_dst.run(m, loads[0:2], cur_d, cur_e - 1)
        # (a valid of 0 reads nothing: its product is not used)
        p_src.run(m, loads[2:4], cur_s, Mux(cur_v == 0, 0, cur_v - 1))
        return SimpleNamespace(**{k: v for k, v in locals().items()
                                  if k not in ("self", "m", "platform", "d", "state")})

    def _sums(self, m, c, d):
        """The checks' sums, and the registers that follow their sources every cycle."""
        eb = d.eb
        # the dimension's extent and valid, and the sums plus the element bytes, follow their
        # sources in every cycle, with no enable: read in phase 1 (and the sums in SUMS) they hold
        # what phase 0 saw, as nothing they follow changes between
        m.d.sync += [c.reg_e.eq(c.cur_e), c.reg_v.eq(c.cur_v), c.span_eb.eq(c.span + eb),
                     c.src_eb.eq(c.src_top + eb)]
        m.d.sync += [c.summing.eq(0), c.sums_clear.eq(0)]
        with m.If(c.sums_clear):
            m.d.sync += [c.span.eq(0), c.src_top.eq(0)]
        with m.Else():
            with m.If(c.summing & c.e_many):
                m.d.sync += c.span.eq(c.span + c.p_dst.acc)
            with m.If(c.summing & ~c.v_zero):
                m.d.sync += c.src_top.eq(c.src_top + c.p_src.acc)

    def _check_cases(self, m, c, d, state):
        """The sequencer's CHECK, SUMS and COMPARE states (inside its ``m.Switch``)."""
        ndims, aw = d.ndims, self.addr_width
        with m.Case(_State.CHECK):
            # phase 0 loads the dimension's operands whether or not there is one, while
            # `dim_left` (a register) settles; phase 1 looks at it
            with m.If(c.phase == 0):                 # the products load (`loads`)
                m.d.sync += c.phase.eq(1)
            with m.Elif(c.phase == 1):
                with m.If(~c.dim_left):
                    m.d.sync += [c.phase.eq(0), state.eq(_State.SUMS)]
                with m.Else():
                    # the dimension's comparisons on its registered extent and valid, and
                    # the nesting test on the destination stride before its first shift.
                    # The stride against a 71-bit sum: its high bits decide alone when
                    # any is set, so the compare is 32 bits wide
                    m.d.sync += [c.e_zero.eq(c.reg_e == 0), c.v_over.eq(c.reg_v > c.reg_e),
                                 c.e_many.eq(c.reg_e > 1), c.v_zero.eq(c.reg_v == 0),
                                 c.nests.eq((c.span_eb[32:] != 0) |
                                          (c.p_dst.a[:32] < c.span_eb[:32])),
                                 c.phase.eq(2)]
                    # the next dimension, now: `cur` follows it a cycle later, before
                    # the next phase 0 (`dim_left` too, read in the next phase 1)
                    m.d.comb += c.k_next.eq(c.k_chk + 1)
            with m.Elif(c.phase == 2):
                with m.If(c.p_dst.done & c.p_src.done):   # else the products step (`run`)
                    m.d.sync += [c.phase.eq(3), c.summing.eq(1)]
            with m.Else():                         # phase 3: into the sums (above)
                m.d.sync += c.phase.eq(0)
                with m.If(c.first_dim_err == 0):
                    with m.If(c.e_zero):
                        m.d.sync += c.first_dim_err.eq(Error.ZERO_EXTENT)
                    with m.Elif(c.v_over):
                        m.d.sync += c.first_dim_err.eq(Error.DIMS)
                with m.If(c.e_many & c.nests):
                    m.d.sync += c.nest_err.eq(1)
                with m.If(c.v_zero):
                    m.d.sync += c.no_src.eq(1)
        with m.Case(_State.SUMS):
            m.d.sync += [c.misaligned.eq(c.mis_parts.any()), c.s_end.eq(c.chk_src + c.src_eb),
                         c.d_end.eq(c.chk_dst + c.span_eb), state.eq(_State.COMPARE)]
        with m.Case(_State.COMPARE):
            top = 1 << aw
            m.d.sync += [c.s_over.eq(c.s_end > top), c.d_over.eq(c.d_end > top),
                         c.overlap.eq((c.chk_src < c.d_end) & (c.chk_dst < c.s_end)),
                         state.eq(_State.VERDICT)]
            # the verdict's first four rules, whose inputs are ready here, as one code
            with m.If((ndims == 0) | (ndims > MAX_DIMS)):
                m.d.sync += c.early_code.eq(Error.DIMS)
            with m.Elif(c.first_dim_err != 0):
                m.d.sync += c.early_code.eq(c.first_dim_err)
            with m.Elif(c.nest_err):
                m.d.sync += c.early_code.eq(Error.DIMS)
            with m.Elif(c.misaligned):
                m.d.sync += c.early_code.eq(Error.ALIGN)
            with m.Else():
                m.d.sync += c.early_code.eq(0)

    def _counters(self, m, regs, state):
        """The job's counters, as the registers show them: bytes read and written, cycles,
        descriptors done."""
        bytes_read = Signal(32)
        bytes_written = Signal(32)
        cycles = Signal(32)
        ndone = Signal(24)
        # the paths' byte counts are registered before they are added: they come out of the
        # paths' control logic late in the cycle
        written_q = Signal.like(self.written_bytes)
        read_q = Signal.like(self.read_bytes)
        m.d.sync += [written_q.eq(self.written_bytes), read_q.eq(self.read_bytes),
                     bytes_written.eq(bytes_written + written_q),
                     bytes_read.eq(bytes_read + read_q)]
        with m.If((state != _State.IDLE) & (cycles != 0xFFFFFFFF)):
            m.d.sync += cycles.eq(cycles + 1)
        m.d.comb += [regs.bytes_read.value.r_data.eq(bytes_read),
                     regs.bytes_written.value.r_data.eq(bytes_written),
                     regs.cycles.value.r_data.eq(cycles),
                     regs.descriptors.value.r_data.eq(ndone)]
        return bytes_read, bytes_written, cycles, ndone

    def _load_fields(self, m, platform, regs, d, cur, load, fetch):
        """The descriptor's registers load from the register bank, or beat by beat from a
        fetch: ``load`` is (load_now, load_regs, bank_next), ``fetch`` (fetch_count, its next
        value, fetch_err)."""
        W = self.data_width
        load_now, load_regs, bank_next = load
        fetch_count, fetch_count_next, fetch_err = fetch
        src, dst, nxt, pad, elog, eb, ndims = d.src, d.dst, d.nxt, d.pad, d.elog, d.eb, d.ndims
        last_desc, want_irq = d.last_desc, d.want_irq
        ext, val, sst, dstr = d.ext, d.val, d.sst, d.dstr
        dims = [(ext[k], val[k], sst[k], dstr[k]) for k in range(MAX_DIMS)]
        # each register with where its bits lie in the descriptor's memory form (bit offset,
        # width) and how its value is made from them
        layout = [(src, 0, 64, None), (dst, 64, 64, None), (nxt, 128, 64, None),
                  (pad, 192, 64, None), (elog, 256, 2, None),
                  (eb, 256, 2, lambda c: Const(1, 4) << c), (ndims, 258, 3, None),
                  (last_desc, 264, 1, None), (want_irq, 265, 1, None),
                  *((r, 320 + 128 * k + 32 * i, 32, None)
                    for k in range(MAX_DIMS) for i, r in enumerate(dims[k]))]
        bank_elog = regs.control.element.data
        from_bank = [regs.src_addr.value.data, regs.dst_addr.value.data, 0,
                     Cat(regs.pad_lo.value.data, regs.pad_hi.value.data), bank_elog,
                     Const(1, 4) << bank_elog, regs.control.dims.data, 1, regs.control.irq.data,
                     *(getattr(regs, f"dim{k}_{n}").value.data for k in range(MAX_DIMS)
                       for n in ("extent", "valid", "src_stride", "dst_stride"))]
        with m.If(load_now):
            # dimension 0's fields, for the check's first phase (see `cur` above)
            with m.If(load_regs):
                m.d.sync += [r.eq(v) for r, v in zip(cur, from_bank[-4 * MAX_DIMS:][:4],
                                                     strict=True)]
            with m.Else():
                m.d.sync += [r.eq(v) for r, v in zip(cur, dims[0], strict=True)]

        # Each register loads from the bank (load_now & load_regs) or from its beat of a fetched
        # descriptor (beat_valid & fetch_count == n), each decision a copy of its own
        # (hw.fabric.register_copies) made from the next values: one set of the four registers and
        # their decode would drive all ~900 flip-flops' enables, across the die in the SoC.
        bank_c = register_copies(platform, m, bank_next, len(layout), "desc_bank")
        if not self.chains:
            for (t, _, _, _), v_bank, by_bank in zip(layout, from_bank, bank_c, strict=True):
                with m.If(by_bank):
                    m.d.sync += t.eq(v_bank)
            return
        beat = Signal.like(self.fetch_beat.payload)
        beat_valid = Signal()
        m.d.sync += [beat.eq(self.fetch_beat.payload), beat_valid.eq(self.fetch_beat.valid)]
        with m.If(beat_valid):
            m.d.comb += fetch_count_next.eq(fetch_count + 1)
            with m.If(beat[W]):
                m.d.sync += fetch_err.eq(1)
        beats = [lo // W for _, lo, _, _ in layout]
        hit_c = {n: iter(register_copies(
                     platform, m, self.fetch_beat.valid & (fetch_count_next == n),
                     beats.count(n), f"desc_beat{n}_"))
                 for n in sorted(set(beats))}
        for (t, lo, width, make), v_bank, by_bank in zip(layout, from_bank, bank_c, strict=True):
            n = lo // W
            assert (lo + width - 1) // W == n, "a field across two beats"
            v = beat[lo - n * W:lo - n * W + width]
            with m.If(by_bank):
                m.d.sync += t.eq(v_bank)
            with m.Elif(next(hit_c[n])):
                m.d.sync += t.eq(make(v) if make else v)
        # the descriptor's read is asked for once, from FETCH's first cycle after the back end's
        # reset, and only at a good address: `want_fetch` is set as FETCH is entered The back end
        # sees the request a cycle later, from a register that the placer can put beside its AR
        # registers
