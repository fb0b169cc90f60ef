"""The UART-to-bus bridge: the framing protocol of :mod:`model.board.protocol` on a UART, as an
AXI4-Lite manager of the SoC's 32-bit bus.

A request is received whole into a 256-word buffer and its checksum checked before the bus is
touched, so a corrupt frame changes nothing. The words then go over the bus one at a time
(each access waits for its response); the first error response stops the frame. The reply goes
out once the bus work is done: a read's words come from the same buffer.

One frame at a time: bytes that arrive while a frame is on the bus or being answered are
dropped. A request that stops arriving for ``timeout`` cycles is answered ``TIMEOUT``.
"""

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from atomcube.model.board.protocol import MAX_WORDS, REPLY_SYNC, REQUEST_SYNC, Command, Status

from ..bus.axi import AXI4LiteSignature, Resp
from .uart import UartRx, UartTx

__all__ = ["UartBridge"]


class UartBridge(wiring.Component):
    """Parameters: ``divisor`` (clock cycles per UART bit), ``timeout`` (cycles of silence that
    end a partial request; default 64 byte times).

    Ports: ``rx``, ``tx`` (the UART lines), ``m_axil`` (AXI4-Lite manager, 32-bit),
    ``busy`` (a frame is being received, executed or answered)."""

    def __init__(self, *, divisor, timeout=None):
        self.divisor = divisor
        self.timeout = timeout if timeout is not None else 640 * divisor
        self._rx = UartRx(divisor)
        self._tx = UartTx(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "m_axil": Out(AXI4LiteSignature(addr_width=32, data_width=32)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rx = m.submodules.rx = self._rx
        tx = m.submodules.tx = self._tx
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]
        bus = self.m_axil

        m.submodules.buf = buf = Memory(shape=32, depth=MAX_WORDS, init=[])
        wp = buf.write_port(granularity=8)
        rp = buf.read_port()

        command = Signal(8)
        addr = Signal(32)
        last = Signal(8)                      # count - 1
        total = Signal(8)                     # running checksum
        status = Signal(8)
        index = Signal(8)                     # the word being received, moved or sent
        nbyte = Signal(2)                     # byte within a word, or of the address
        silent = Signal(range(self.timeout + 1))
        byte = rx.data
        got = rx.valid
        # the buffer's read data is registered before any logic sees it: a block RAM's read data
        # arrives late in the cycle. So `word` shows buffer word `index` two cycles after `index` is
        # set.
        word = Signal(32)
        m.d.comb += rp.addr.eq(index)
        m.d.sync += word.eq(rp.data)

        # reply bytes: sync, status, index, data, sum
        tx_byte = Signal(8)
        m.d.comb += [tx.data.eq(tx_byte)]

        with m.FSM() as fsm:
            with m.State("SYNC"):
                with m.If(got & (byte == REQUEST_SYNC)):
                    m.d.sync += [total.eq(0), nbyte.eq(0), silent.eq(0)]
                    m.next = "COMMAND"

            def receive():
                """Common to every receiving state: the timeout and the running sum."""
                with m.If(got):
                    m.d.sync += [total.eq(total + byte), silent.eq(0)]
                with m.Elif(silent == self.timeout):
                    m.d.sync += [status.eq(Status.TIMEOUT), index.eq(0)]
                    m.next = "REPLY"
                with m.Else():
                    m.d.sync += silent.eq(silent + 1)

            with m.State("COMMAND"):
                receive()
                with m.If(got):
                    m.d.sync += command.eq(byte)
                    m.next = "ADDRESS"
            with m.State("ADDRESS"):
                receive()
                with m.If(got):
                    m.d.sync += [addr.eq(Cat(addr[8:], byte)), nbyte.eq(nbyte + 1)]
                    with m.If(nbyte == 3):
                        m.next = "COUNT"
            with m.State("COUNT"):
                receive()
                with m.If(got):
                    m.d.sync += [last.eq(byte), index.eq(0), nbyte.eq(0)]
                    with m.If(command == Command.WRITE):
                        m.next = "DATA"
                    with m.Else():
                        m.next = "SUM"
            with m.State("DATA"):
                receive()
                m.d.comb += [wp.addr.eq(index), wp.data.eq(byte.replicate(4)),
                             wp.en.eq(Mux(got, 1 << nbyte, 0))]
                with m.If(got):
                    m.d.sync += nbyte.eq(nbyte + 1)
                    with m.If(nbyte == 3):
                        m.d.sync += index.eq(index + 1)
                        with m.If(index == last):
                            m.next = "SUM"
            with m.State("SUM"):
                receive()
                with m.If(got):
                    m.d.sync += index.eq(0)
                    with m.If((total + byte)[:8] != 0):
                        m.d.sync += status.eq(Status.CHECKSUM)
                        m.next = "REPLY"
                    with m.Elif((command != Command.READ) & (command != Command.WRITE)):
                        m.d.sync += status.eq(Status.COMMAND)
                        m.next = "REPLY"
                    with m.Elif(addr[:2] != 0):
                        m.d.sync += status.eq(Status.ALIGN)
                        m.next = "REPLY"
                    with m.Else():
                        m.d.sync += status.eq(Status.OK)
                        m.next = "LOAD"

            # the bus: one word at a time; LOAD and FETCH wait for `word` to show word `index`.
            # The word's address is a register too, so the decoder's window test does not
            # follow this adder in the same cycle: it is ready two cycles after `index` moves
            awvalid, wvalid, arvalid = Signal(), Signal(), Signal()
            word_addr = Signal(32)
            m.d.sync += word_addr.eq(addr + (index << 2))
            m.d.comb += [bus.awaddr.eq(word_addr), bus.araddr.eq(word_addr),
                         bus.awvalid.eq(awvalid), bus.wvalid.eq(wvalid), bus.arvalid.eq(arvalid),
                         bus.wstrb.eq(0xF), bus.bready.eq(1), bus.rready.eq(1)]
            with m.State("LOAD"):
                m.next = "FETCH"
            with m.State("FETCH"):
                m.next = "ISSUE"
            with m.State("ISSUE"):
                with m.If(command == Command.WRITE):
                    m.d.sync += [bus.wdata.eq(word), awvalid.eq(1), wvalid.eq(1)]
                with m.Else():
                    m.d.sync += arvalid.eq(1)
                m.next = "WAIT"
            # the response is taken into registers first (B and R are always ready, and one
            # access is in flight at a time) and acted on in WAIT a cycle later: the decoder's
            # response multiplexers end in these registers, not in the FSM's decisions
            done = Signal()
            resp = Signal(2)
            rdata = Signal(32)
            m.d.sync += [done.eq(Mux(command == Command.WRITE, bus.bvalid, bus.rvalid)),
                         resp.eq(Mux(command == Command.WRITE, bus.bresp, bus.rresp)),
                         rdata.eq(bus.rdata)]
            with m.State("WAIT"):
                with m.If(bus.awready):
                    m.d.sync += awvalid.eq(0)
                with m.If(bus.wready):
                    m.d.sync += wvalid.eq(0)
                with m.If(bus.arready):
                    m.d.sync += arvalid.eq(0)
                m.d.comb += [wp.addr.eq(index), wp.data.eq(rdata),
                             wp.en.eq(Mux(done & (command == Command.READ), 0xF, 0))]
                with m.If(done):
                    with m.If(resp != Resp.OKAY):
                        m.d.sync += status.eq(Mux(resp == Resp.DECERR, Status.DECERR,
                                                  Status.SLVERR))
                        m.next = "REPLY"
                    with m.Elif(index == last):
                        m.d.sync += index.eq(0)
                        m.next = "REPLY"
                    with m.Else():
                        m.d.sync += index.eq(index + 1)
                        m.next = "LOAD"

            # the reply
            step = Signal(range(5))           # 0 sync, 1 status, 2 index, 3 data, 4 sum
            sent = Signal(8)
            with_data = (status == Status.OK) & (command == Command.READ)
            data_byte = word.word_select(nbyte, 8)
            report_index = Mux(status == Status.OK, last, index)
            # the byte to send is registered too. SEND waits for it in SETTLE, FETCH_BYTE and
            # LATCH, which cost nothing: the transmitter is still shifting out the byte before.
            m.d.sync += tx_byte.eq(Mux(step == 0, REPLY_SYNC,
                                   Mux(step == 1, status,
                                   Mux(step == 2, report_index,
                                   Mux(step == 3, data_byte, (-sent)[:8])))))
            with m.State("REPLY"):
                m.d.sync += [step.eq(0), sent.eq(0), nbyte.eq(0)]
                m.next = "SETTLE"
            with m.State("SEND"):
                m.d.comb += tx.valid.eq(1)
                with m.If(tx.ready):
                    m.d.sync += sent.eq(sent + Mux(step == 0, 0, tx_byte))
                    m.next = "SETTLE"
                    with m.Switch(step):
                        with m.Case(2):
                            m.d.sync += [step.eq(Mux(with_data, 3, 4)), index.eq(0)]
                        with m.Case(3):
                            m.d.sync += nbyte.eq(nbyte + 1)
                            with m.If(nbyte == 3):
                                m.d.sync += index.eq(index + 1)
                                with m.If(index == last):
                                    m.d.sync += step.eq(4)
                        with m.Case(4):
                            m.next = "SYNC"
                        with m.Default():
                            m.d.sync += step.eq(step + 1)
            with m.State("SETTLE"):
                # the new step, byte and index are in their registers; the buffer's read port
                # shows word `index` next cycle, and `word` the cycle after
                m.next = "FETCH_BYTE"
            with m.State("FETCH_BYTE"):
                m.next = "LATCH"
            with m.State("LATCH"):
                # `word` shows word `index`; tx_byte takes the byte now
                m.next = "SEND"
            m.d.comb += self.busy.eq(~fsm.ongoing("SYNC"))
        return m
