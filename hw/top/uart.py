"""A UART: 8 data bits, no parity, one stop bit, least significant bit first, idle high.

``divisor`` is the clock cycles per bit (``clk_hz // baud``), fixed when the design is built.
"""

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx", "check_divisor"]


def check_divisor(divisor):
    if not isinstance(divisor, int) or divisor < 4:
        raise ValueError(f"divisor (clock cycles per bit) must be an integer of at least 4, "
                         f"not {divisor!r}")


class _UartPart(wiring.Component):
    def __init__(self, divisor):
        check_divisor(divisor)
        self.divisor = divisor
        super().__init__()


class UartRx(_UartPart):
    """Receiver. ``rx`` is the line (synchronised here). Each byte received shows on ``data``
    with ``valid`` high for one cycle; there is no backpressure. A byte whose stop bit is low is
    dropped and pulses ``frame_error`` instead.

    The start bit's falling edge starts a byte; each bit is sampled in its middle."""

    rx: In(1, init=1)
    valid: Out(1)
    data: Out(8)
    frame_error: Out(1)

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        sync1 = Signal(init=1)
        line = Signal(init=1)
        m.d.sync += [sync1.eq(self.rx), line.eq(sync1)]

        timer = Signal(range(d + d // 2 + 1))
        bits = Signal(4)                       # data bits taken so far (8: the stop bit is next)
        shift = Signal(8)
        m.d.sync += [self.valid.eq(0), self.frame_error.eq(0)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    # first sample in the middle of data bit 0: a bit and a half from here
                    m.d.sync += [timer.eq(d + d // 2 - 1), bits.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(bits == 8):
                    with m.If(line):
                        m.d.sync += [self.valid.eq(1), self.data.eq(shift)]
                    with m.Else():
                        m.d.sync += self.frame_error.eq(1)
                    m.next = "STOP"
                with m.Else():
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), bits.eq(bits + 1),
                                 timer.eq(d - 1)]
            with m.State("STOP"):
                # a broken frame (stop bit low) waits for the line to go idle again
                with m.If(line):
                    m.next = "IDLE"
        return m


class UartTx(_UartPart):
    """Transmitter. A byte is taken from ``data`` when ``valid`` and ``ready`` are both high;
    ``ready`` is high while the line is idle."""

    tx: Out(1, init=1)
    valid: In(1)
    ready: Out(1)
    data: In(8)

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        frame = Signal(10, init=0x3FF)         # start, 8 data, stop; shifted out from bit 0
        left = Signal(4)                       # bits still to send
        m.d.comb += [self.ready.eq(left == 0), self.tx.eq(frame[0])]
        with m.If(self.valid & self.ready):
            m.d.sync += [frame.eq(Cat(0, self.data, 1)), left.eq(10),
                         timer.eq(self.divisor - 1)]
        with m.Elif(left != 0):
            with m.If(timer != 0):
                m.d.sync += timer.eq(timer - 1)
            with m.Else():
                m.d.sync += [frame.eq(Cat(frame[1:], 1)), left.eq(left - 1),
                             timer.eq(self.divisor - 1)]
        return m
