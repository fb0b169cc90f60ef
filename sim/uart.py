"""A simulated serial line for the SoC bench: the host end of a UART (8N1) on the DUT's ``rx``
and ``tx`` pins, with the blocking ``write(bytes)`` / ``read(n)`` of a pyserial port, so that the
real host driver (:mod:`model.board.driver`) runs against the simulated SoC.

The driver runs in a thread started with ``cocotb.task.bridge``; ``write`` and ``read`` hand
control back to the simulator (``cocotb.task.resume``) while the bits go over the line. Between
bytes the host leaves random idle bit times (``gaps``), as a real USB serial adapter does.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.task import resume
from cocotb.triggers import Edge, FallingEdge, First, Timer

from .runner import CLOCK_PERIOD_NS

__all__ = ["SimSerial"]


class SimSerial:
    """``divisor``: clock cycles per bit. ``timeout_bits``: how long ``read`` waits for the
    next byte before returning what it has (pyserial's timeout)."""

    def __init__(self, dut, divisor: int, *, rng: random.Random | None = None,
                 timeout_bits: int = 2000):
        self.dut = dut
        self.divisor = divisor
        self.rng = rng
        self.timeout_bits = timeout_bits
        self.received: deque[int] = deque()
        self.frame_errors = 0
        self.bytes_sent = 0
        dut.rx.value = 1
        self._listener = cocotb.start_soon(self._listen())
        self._arrived = None

    def _time(self, bits: float) -> Timer:
        # one timer per wait, not one wake-up per clock edge: the line costs the simulation
        # almost nothing
        return Timer(round(bits * self.divisor) * CLOCK_PERIOD_NS, "ns")

    async def _bits(self, n: int):
        await self._time(n)

    async def send(self, data: bytes, *, stop_bit: int = 1) -> None:
        for b in data:
            if self.rng is not None and self.rng.random() < 0.3:
                await self._bits(self.rng.randint(1, 12))
            for bit in [0, *((b >> i) & 1 for i in range(8)), stop_bit]:
                self.dut.rx.value = bit
                await self._bits(1)
            self.dut.rx.value = 1
            self.bytes_sent += 1

    async def _listen(self):
        tx = self.dut.tx
        while True:
            await FallingEdge(tx)
            await self._time(1.5)
            value = 0
            for i in range(8):
                value |= int(tx.value) << i
                await self._bits(1)
            if int(tx.value):
                self.received.append(value)
            else:
                self.frame_errors += 1

    async def recv(self, n: int, timeout_bits: int | None = None) -> bytes:
        """Up to ``n`` bytes: waits while bytes keep coming within ``timeout_bits``."""
        limit = self.timeout_bits if timeout_bits is None else timeout_bits
        waited = 0
        while len(self.received) < n and waited < limit:
            before = len(self.received)
            await First(self._time(16), Edge(self.dut.tx))
            waited = 0 if len(self.received) != before else waited + 16
        out = bytes(self.received.popleft() for _ in range(min(n, len(self.received))))
        return out

    # the pyserial side, for a bridge thread
    def write(self, data: bytes) -> int:
        resume(self.send)(bytes(data))
        return len(data)

    def read(self, n: int) -> bytes:
        return resume(self.recv)(n)

    def idle(self, bits: int = 64) -> None:
        """Let the simulation run ``bits`` bit times (the driver's poll between status reads)."""
        resume(self._bits)(bits)
