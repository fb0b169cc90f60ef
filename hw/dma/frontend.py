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
when its last write is answered (the back end's ``job_done``; the job's last once the mid end is
done and the back end idle). A chain's next descriptor is fetched and checked meanwhile, and
offered at once if it reads something and nothing the running one writes (so two may run, the
newer one's writes held back until the older has ended: ``defer``), else at that end (an error
in it is reported once the descriptors before it have ended). An error response *halts* the back
end (it stops itself: see :mod:`hw.dma.backend`): the front end waits until what was issued has
drained, then ends the job with the error code and the failing descriptor's index.
``dp_reset`` clears the mid and back end as a job ends; it is also set while the engine is
reset, and is their only reset.

Ports: ``s_axil`` (registers), ``irq``; ``desc``, the checked descriptor offered to the mid end
(:func:`~hw.dma.midend.request_layout`, held until taken), which answers ``busy``,
``read_bytes``, ``written_bytes``; ``fetch_addr``, ``fetch_go``,
``fetch_beat``, ``read_err``, ``read_old``, ``write_err``, ``idle``, ``drained``, ``job_done``
and ``defer`` with the back end.
"""

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from atomcube.model.dma.descriptor import FIELD_WIDTH_MAX, MAX_DIMS, Error
from atomcube.model.registers.dma import DMA

from ..bus.axi import AXI4LiteSignature
from ..bus.regbank import RegisterBank
from .convert import decode_conversion
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
    def __init__(self, *, data_width=64, addr_width=32, bank_mirror=False, chains=True,
                 convert=False):
        self.data_width = data_width
        self.addr_width = addr_width
        self.chains = chains
        self.convert = convert
        self.regmap = DMA
        self._bank = RegisterBank(DMA, addr_width=8, mirror=bank_mirror)
        self._store = DescriptorStore(data_width=data_width, chains=chains, convert=convert)
        self._checker = DescriptorChecker(addr_width=addr_width)
        aw = addr_width
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=8, data_width=32)),
            "irq": Out(1),
            # the mid end
            "desc": Out(stream.Signature(request_layout(aw + convert))),
            "busy": In(1), "read_bytes": In(35), "written_bytes": In(35),
            # the back end
            **({"fetch_addr": Out(aw), "fetch_go": Out(1),
                "fetch_beat": In(stream.Signature(data_width + 1, always_ready=True))}
               if chains else {}),
            "dp_reset": Out(1),
            "read_err": In(1), "write_err": In(1), "idle": In(1), "drained": In(1),
            "read_old": In(1), "job_done": In(1), "defer": Out(1),
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
        # a conversion: its rule, and the size of the elements it writes
        how = decode_conversion(m, d.cvt_code)
        converts = d.cvt_code != 0
        # a bit field lies inside its word and is 1 to 16 bits wide; other sources have none
        bad_field = Mux(how.field,
                        (d.cvt_width == 0) | (d.cvt_width > FIELD_WIDTH_MAX) |
                        (d.cvt_bit + d.cvt_width > 32),
                        (d.cvt_bit != 0) | (d.cvt_width != 0))
        m.d.comb += [checker.desc.eq(d), checker.eb.eq(store.eb),
                     checker.eb_dst.eq(Mux(converts, Mux(how.narrow | how.bytes, 1, 2), store.eb)),
                     checker.cvt_bad.eq(converts & (Const(int(not self.convert)) | ~how.known |
                                                    (d.elog != how.elog) | bad_field))]
        if self.chains:
            wiring.connect(m, wiring.flipped(self.fetch_beat), store.beat)

        state = Signal(_State)
        chain = Signal()                      # the job is a chain
        index = Signal(24)                    # descriptor of the job being worked on
        error_code = Signal(4)

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
        # (the dimensions a field at a time: the offer's may be wider than the store's 32 bits)
        m.d.comb += [offer.src.eq(d.src[:aw]), offer.elog.eq(d.elog),
                     offer.pad.eq(d.pad), offer.ndims.eq(d.ndims),
                     *(getattr(offer, f)[k].eq(getattr(d, f)[k])
                       for f in ("ext", "val", "sst") for k in range(MAX_DIMS)),
                     offer.cvt.code.eq(d.cvt_code), offer.cvt.shift.eq(d.cvt_shift),
                     offer.cvt.offset.eq(d.cvt_offset), offer.cvt.scale.eq(d.cvt_scale),
                     offer.cvt.bit.eq(d.cvt_bit), offer.cvt.width.eq(d.cvt_width)]
        # a converting descriptor runs through the mid end as a copy of source-sized elements
        # into a virtual destination, its addresses scaled by the source element's size over
        # the destination's (hw.dma.convert); the stage turns them back
        for virtual, real in ((offer.dst, d.dst[:aw]),
                              *((offer.dstr[k], d.dstr[k]) for k in range(MAX_DIMS))):
            if self.convert:
                real = Mux(how.widen, real >> 1, Mux(how.up, real << 1, real))
            m.d.comb += virtual.eq(real)

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
        # Two things go on at once: the descriptors that run (taken by the mid end, until the
        # last write of each is answered: `running`, and `second` when a second one was taken
        # before the first ended) and the preparation of the next one (`state`: fetched,
        # checked, then offered). A chain's next descriptor is fetched and checked while the one
        # before it runs, and offered at once if it reads nothing the running one writes (else
        # once that one has ended, so it sees the results). Descriptors end, raise their
        # interrupts and report errors in chain order: the back end holds the newer one's writes
        # until the older has ended (`defer`), and an error found in a descriptor being
        # prepared ends the job only once those before it have ended.
        #
        # A descriptor followed by another ends as the back end answers its last write
        # (`job_done`, kept in `ended` until it is used), with no reset between the two. The
        # job's last ends once the mid end is done and the back end idle, a cycle ago (`quiet`:
        # a register, so the wide OR of their busy flags is not in front of the sequencer's
        # registers), and the mid and back end are reset. `quiet` still shows the cycle of the
        # take in the cycle after it, so the end is looked for from the second cycle after the
        # take (`armed`); draining does the same with the back end's drained flag
        quiet = Signal()
        armed = Signal()
        m.d.sync += quiet.eq(~self.busy & self.idle)
        drained_q = Signal()
        m.d.sync += drained_q.eq(self.drained)
        running = Signal()                    # a taken descriptor has not ended
        second = Signal()                     # ... and a second one was taken after it
        draining = Signal()                   # ... and stopped at an error response
        ended = Signal()                      # the back end answered the oldest's last write
        run_last = Signal()                   # the oldest running descriptor is the job's last
        run_irq = Signal()                    # ... and raises the interrupt as it ends
        next_last = Signal()                  # the same of the second
        next_irq = Signal()
        fail_code = Signal(4)                 # the error of the descriptor in FAILED
        done_set = Signal()
        err_set = Signal()
        irq_set = Signal()
        want_fetch = Signal()
        # a fetch may be in flight: the back end is not reset under it, so a job ends (and
        # resets the mid and back end) only once no fetch is in flight
        fetching = (state == _State.FETCH) if self.chains else Const(0)
        m.d.comb += self.defer.eq(second)
        # the destination of the descriptor taken last, and whether the one being offered may
        # start before it ends: it reads something and reads nothing it writes
        ranges = checker.ranges
        run_dst = Signal.like(ranges.dst)
        run_dst_end = Signal.like(ranges.dst_end)
        may_follow = Signal()

        def finish(code):
            m.d.sync += [error_code.eq(code), state.eq(_State.IDLE), want_fetch.eq(0),
                         running.eq(0), second.eq(0), draining.eq(0), ended.eq(0)]
            m.d.comb += [done_set.eq(1), err_set.eq(code != 0), dp_reset.eq(1)]

        def fail(code):
            """The descriptor being prepared breaks a rule: the job ends with ``code`` once the
            descriptors that run (if any do) have ended and the mid and back end are quiet."""
            m.d.sync += [state.eq(_State.FAILED), fail_code.eq(code)]

        def fetch():
            m.d.sync += [state.eq(_State.FETCH), want_fetch.eq(1)]
            m.d.comb += store.fetch.eq(1)

        # The descriptor's read is asked for once, from FETCH's first cycle after the back end's
        # reset, and only at a good address. The back end sees the request from a register
        # that the placer can put beside its AR registers.
        if self.chains:
            # The address a fetch would read, loaded in every cycle of the two states that may
            # start one (IDLE: the chain's first, from the register; OFFER: the next, from the
            # descriptor held), so that its enable is a decode of `state` alone and not the
            # take's handshake, which reaches all 64 of its flip-flops. It holds from the
            # fetch's start until the fetch has ended (FETCH, then LOAD).
            nxt = Mux(state == _State.IDLE, regs.chain_addr.value.data, d.nxt)
            with m.If((state == _State.IDLE) | (state == _State.OFFER)):
                m.d.sync += [fetch_addr.eq(nxt), fetch_misaligned.eq(nxt[:7] != 0),
                             fetch_over.eq(nxt[aw:] != 0)]
            go = want_fetch & ~dp_reset_q & ~fetch_misaligned & ~fetch_over
            m.d.sync += self.fetch_go.eq(go)
            with m.If(go):
                m.d.sync += want_fetch.eq(0)
            m.d.comb += self.fetch_addr.eq(fetch_addr[:aw])

        # offered while checked, if no descriptor runs or one runs that it may follow; held
        # until taken, as none of these changes before the take (`running` only falls)
        take = self.desc.valid & self.desc.ready
        m.d.comb += [self.desc.valid.eq((state == _State.OFFER) &
                                        (~running | (may_follow & ~second))),
                     checker.start.eq(state == _State.LOAD)]
        # the oldest running descriptor ends now (with no error response in this cycle)
        err = self.write_err | (self.read_err & (~second | self.read_old))
        retire = Signal()
        m.d.comb += retire.eq(running & ~draining & ~err &
                              Mux(run_last, armed & quiet & ~fetching & ~take, ended))
        with m.If(self.job_done & running):
            m.d.sync += ended.eq(1)
        q = SimpleNamespace(
            state=state, chain=chain, index=index, error_code=error_code, ndone=ndone,
            running=running, second=second, draining=draining, ended=ended, armed=armed,
            drained_q=drained_q, fetching=fetching, run_last=run_last, run_irq=run_irq,
            next_last=next_last, next_irq=next_irq, err=err, retire=retire,
            done_set=done_set, err_set=err_set, irq_set=irq_set, dp_reset=dp_reset,
            drain_code=Signal(4, name="drain_code"))
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(start_regs | start_chain):
                    m.d.sync += [index.eq(0), error_code.eq(0), chain.eq(start_chain),
                                 bytes_read.eq(0), bytes_written.eq(0), cycles.eq(0),
                                 ndone.eq(0), ended.eq(0)]
                    with m.If(start_regs):
                        # the fields load in LOAD, from a register set now: the decision to
                        # load (a start pulse) is not on the path into their enables
                        m.d.sync += state.eq(_State.LOAD)
                        m.d.comb += store.load_bank.eq(1)
                    with m.Else():
                        if self.chains:
                            fetch()
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
                        m.d.sync += [state.eq(_State.OFFER),
                                     may_follow.eq(ranges.reads &
                                                   ((ranges.src_end <= run_dst) |
                                                    (run_dst_end <= ranges.src)))]
            with m.Case(_State.OFFER):
                # taken: it runs from its own copy in the mid end, and the next descriptor of
                # a chain is fetched now
                with m.If(take):
                    m.d.sync += [armed.eq(1), state.eq(_State.WAIT),
                                 run_dst.eq(ranges.dst), run_dst_end.eq(ranges.dst_end)]
                    with m.If(running & ~retire):
                        m.d.sync += [second.eq(1), next_last.eq(d.last), next_irq.eq(d.irq)]
                    with m.Else():
                        m.d.sync += [running.eq(1), run_last.eq(d.last), run_irq.eq(d.irq)]
                    if self.chains:
                        with m.If(chain & ~d.last):
                            fetch()
            with m.Case(_State.FAILED):
                with m.If(~running & quiet & ~fetching):
                    finish(fail_code)

        self._ends(m, q, take, finish)
        self._status(m, regs, state, error_code, index, q)
        return m

    def _ends(self, m, q, take, finish):
        """The running descriptors' ends, in order (``q``: the sequencer's signals). Called after
        the preparation's cases: an end by an error response stops the preparation too, and a
        descriptor taken in the cycle of an end is the only one left running."""
        with m.If(q.draining):
            # the back end halted itself as it raised the error, a cycle before it was seen
            # here: the issued bursts finish, reads in flight come back (and are dropped).
            # `drained_q` is the back end's drained flag a cycle ago, so it is looked at from
            # the second cycle of draining: by then it was taken two cycles into the halt, and
            # nothing is issued after that
            m.d.sync += q.armed.eq(1)
            with m.If(q.armed & q.drained_q & ~q.fetching):
                finish(q.drain_code)
        with m.Elif(q.running & q.err):
            # an error response of the oldest descriptor (a write's, or a read's before the
            # second descriptor's first; the second's read error waits until the oldest ends,
            # and is not this descriptor's if a write error of its own comes first)
            m.d.sync += [q.draining.eq(1), q.armed.eq(0),
                         q.drain_code.eq(Mux(self.read_err & (~q.second | self.read_old),
                                             Error.READ_ERROR, Error.WRITE_ERROR))]
        with m.Elif(q.retire):
            m.d.sync += [q.ended.eq(0), q.ndone.eq(q.ndone + 1)]
            m.d.comb += q.irq_set.eq(q.run_irq)
            with m.If(q.second):
                m.d.sync += [q.second.eq(0), q.run_last.eq(q.next_last),
                             q.run_irq.eq(q.next_irq)]
            with m.Elif(~take):
                m.d.sync += q.running.eq(0)
            with m.If(~q.chain | q.run_last):
                m.d.sync += [q.state.eq(_State.IDLE), q.error_code.eq(0), q.running.eq(0),
                             q.armed.eq(0)]
                m.d.comb += [q.done_set.eq(1), q.dp_reset.eq(1)]
            with m.Else():
                m.d.sync += q.index.eq(q.index + 1)

    def _status(self, m, regs, state, error_code, index, q):
        """The registers the sequencer feeds: status, hardware information, error, and the
        interrupt."""
        m.d.comb += [regs.status.busy.r_data.eq(state != _State.IDLE),
                     regs.hwinfo.data_bytes.r_data.eq(self.data_width // 8),
                     regs.hwinfo.max_dims.r_data.eq(MAX_DIMS),
                     regs.hwinfo.addr_width.r_data.eq(self.addr_width),
                     regs.hwinfo.chains.r_data.eq(int(self.chains)),
                     regs.hwinfo.convert.r_data.eq(int(self.convert)),
                     regs.error.code.r_data.eq(error_code),
                     regs.error.index.r_data.eq(index),
                     regs.status.done.set.eq(q.done_set), regs.status.error.set.eq(q.err_set),
                     regs.status.desc_irq.set.eq(q.irq_set),
                     self.irq.eq((regs.status.done.data[0] & regs.irq_enable.done.data[0]) |
                                 (regs.status.error.data[0] & regs.irq_enable.error.data[0]) |
                                 (regs.status.desc_irq.data[0] &
                                  regs.irq_enable.desc_irq.data[0]))]

    @staticmethod
    def _bank_descriptor(m, regs, bank):
        """The register bank's descriptor, as the store takes it: a single descriptor (no next,
        the chain's last)."""
        m.d.comb += [bank.src.eq(regs.src_addr.value.data), bank.dst.eq(regs.dst_addr.value.data),
                     bank.pad.eq(Cat(regs.pad_lo.value.data, regs.pad_hi.value.data)),
                     bank.elog.eq(regs.control.element.data), bank.ndims.eq(regs.control.dims.data),
                     bank.last.eq(1), bank.irq.eq(regs.control.irq.data),
                     bank.cvt_code.eq(regs.convert.code.data),
                     bank.cvt_shift.eq(regs.convert.shift.data),
                     bank.cvt_bit.eq(regs.convert.bit.data),
                     bank.cvt_width.eq(regs.convert.width.data),
                     bank.cvt_offset.eq(regs.convert_scale.offset.data),
                     bank.cvt_scale.eq(regs.convert_scale.scale.data)]
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
