"""The DMA's front end: the register bank, the descriptor source, the checks and the job's
sequence.

A job runs the descriptor held in the registers (``ctrl.start``) or a chain in memory
(``ctrl.start_chain``), whose 128-byte descriptors the back end fetches one burst at a time.
Built with ``chains=False`` it has no fetch (nor its ports): a chain's start ends the job
with ``NO_CHAIN``.
The descriptor's registers (:class:`~hw.dma.descriptor.DescriptorStore`) load from the register
bank or from a fetch's beats; :class:`~hw.dma.descriptor.DescriptorChecker` checks it against the
model's rules (:class:`model.dma.descriptor.Error`, in the same order, one dimension at a time)
before the mid end is offered it. A descriptor ends
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

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import MAX_DIMS, Error
from atomcube.model.registers.dma import DMA

from ..bus.axi import AXI4LiteSignature
from ..bus.regbank import RegisterBank
from .descriptor import DescriptorChecker, DescriptorStore
from .midend import request_layout


class _State(enum.Enum, shape=3):
    """Where the descriptor being prepared is (the job that runs meanwhile is followed apart:
    ``running``, ``draining``)."""
    IDLE = 0         # no job
    FETCH = 1        # reading a chain descriptor: its fields load as its beats come
    LOAD = 2         # the fields load from the register bank, or have loaded from a fetch
    CHECK = 3        # the checker works through the rules
    OFFER = 4        # checked: offered to the mid end once no job runs, until taken
    WAIT = 5         # the job's last descriptor is taken: nothing more to prepare
    FAILED = 6       # a descriptor broke a rule, or its fetch failed: the error ends the job
    #                  once the descriptor before it has ended


class FrontEnd(wiring.Component):
    def __init__(self, *, data_width=64, addr_width=32, bank_mirror=False, chains=True):
        self.data_width = data_width
        self.addr_width = addr_width
        self.chains = chains
        self.regmap = DMA
        self._bank = RegisterBank(DMA, addr_width=8, mirror=bank_mirror)
        self._store = DescriptorStore(data_width=data_width, chains=chains)
        self._checker = DescriptorChecker(addr_width=addr_width)
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
        aw = self.addr_width

        bank = m.submodules.bank = self._bank
        wiring.connect(m, wiring.flipped(self.s_axil), bank.s_axil)
        regs = bank.regs
        store = m.submodules.store = self._store
        checker = m.submodules.checker = self._checker
        d = store.fields
        self._bank_descriptor(m, regs, store.bank_desc)
        m.d.comb += [checker.desc.eq(d), checker.eb.eq(store.eb)]
        if self.chains:
            wiring.connect(m, wiring.flipped(self.fetch_beat), store.beat)

        state = Signal(_State)
        chain = Signal()                      # the job is a chain
        index = Signal(24)                    # descriptor of the job being worked on
        error_code = Signal(4)
        m.d.comb += [regs.status.busy.r_data.eq(state != _State.IDLE),
                     regs.hwinfo.data_bytes.r_data.eq(self.data_width // 8),
                     regs.hwinfo.max_dims.r_data.eq(MAX_DIMS),
                     regs.hwinfo.addr_width.r_data.eq(aw),
                     regs.hwinfo.chains.r_data.eq(int(self.chains)),
                     regs.error.code.r_data.eq(error_code),
                     regs.error.index.r_data.eq(index)]

        start_regs = regs.ctrl.start.pulse[0] & (state == _State.IDLE)
        start_chain = regs.ctrl.start_chain.pulse[0] & (state == _State.IDLE) & \
            ~regs.ctrl.start.pulse[0]
        fetch_addr = Signal(64)
        # the chain address's tests, as registers loaded with it
        fetch_misaligned = Signal()
        fetch_over = Signal()

        # the descriptor offered to the mid end is the one held here: the front end keeps it
        # until the job ends, so it is still while offered
        offer = self.desc.payload
        m.d.comb += [offer.src.eq(d.src[:aw]), offer.dst.eq(d.dst[:aw]), offer.elog.eq(d.elog),
                     offer.pad.eq(d.pad), offer.ndims.eq(d.ndims), offer.ext.eq(d.ext),
                     offer.val.eq(d.val), offer.sst.eq(d.sst), offer.dstr.eq(d.dstr)]

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
        want_fetch = Signal()
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
            m.d.sync += [state.eq(_State.FETCH), want_fetch.eq(1), fetch_addr.eq(addr),
                         fetch_misaligned.eq(addr[:7] != 0), fetch_over.eq(addr[aw:] != 0)]
            m.d.comb += store.fetch.eq(1)

        # The descriptor's read is asked for once, from FETCH's first cycle after the back end's
        # reset, and only at a good address. The back end sees the request from a register
        # that the placer can put beside its AR registers.
        if self.chains:
            go = want_fetch & ~dp_reset_q & ~fetch_misaligned & ~fetch_over
            m.d.sync += self.fetch_go.eq(go)
            with m.If(go):
                m.d.sync += want_fetch.eq(0)
            m.d.comb += self.fetch_addr.eq(fetch_addr[:aw])

        # offered while checked and no descriptor runs; held until taken, as neither changes
        # before the take
        m.d.comb += [self.desc.valid.eq((state == _State.OFFER) & ~running),
                     checker.start.eq(state == _State.LOAD)]
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start_regs | start_chain):
                    m.d.sync += [index.eq(0), error_code.eq(0), chain.eq(start_chain),
                                 bytes_read.eq(0), bytes_written.eq(0), cycles.eq(0),
                                 ndone.eq(0)]
                    with m.If(start_regs):
                        # the fields load in LOAD, from a register set now: the decision to
                        # load (a start pulse) is not on the path into their enables
                        m.d.sync += state.eq(_State.LOAD)
                        m.d.comb += store.load_bank.eq(1)
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
                    with m.Elif(store.fetched):
                        with m.If(store.fetch_err):
                            fail(Error.FETCH_ERROR)
                        with m.Else():
                            m.d.sync += state.eq(_State.LOAD)
            with m.Case(_State.LOAD):
                # the checks start on the fields, which hold the descriptor from the next cycle on
                m.d.sync += state.eq(_State.CHECK)
            with m.Case(_State.CHECK):
                with m.If(checker.verdict.valid):
                    with m.If(checker.verdict.payload != 0):
                        fail(checker.verdict.payload)
                    with m.Else():
                        m.d.sync += state.eq(_State.OFFER)
            with m.Case(_State.OFFER):
                # taken: it runs from its own copy in the mid end, and the next descriptor of
                # a chain is fetched now
                with m.If(self.desc.valid & self.desc.ready):
                    m.d.sync += [running.eq(1), armed.eq(1), run_last.eq(d.last),
                                 run_irq.eq(d.irq), state.eq(_State.WAIT)]
                    if self.chains:
                        with m.If(chain & ~d.last):
                            fetch(d.nxt)
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

    @staticmethod
    def _bank_descriptor(m, regs, bank):
        """The register bank's descriptor, as the store takes it: a single descriptor (no next,
        the chain's last)."""
        m.d.comb += [bank.src.eq(regs.src_addr.value.data), bank.dst.eq(regs.dst_addr.value.data),
                     bank.pad.eq(Cat(regs.pad_lo.value.data, regs.pad_hi.value.data)),
                     bank.elog.eq(regs.control.element.data), bank.ndims.eq(regs.control.dims.data),
                     bank.last.eq(1), bank.irq.eq(regs.control.irq.data)]
        for k in range(MAX_DIMS):
            m.d.comb += [bank.ext[k].eq(getattr(regs, f"dim{k}_extent").value.data),
                         bank.val[k].eq(getattr(regs, f"dim{k}_valid").value.data),
                         bank.sst[k].eq(getattr(regs, f"dim{k}_src_stride").value.data),
                         bank.dstr[k].eq(getattr(regs, f"dim{k}_dst_stride").value.data)]

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
