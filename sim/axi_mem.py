"""An AXI4 memory for benches of blocks with an AXI4 manager port: read latency, random stalls
on all five channels, error responses for chosen address ranges, a log of every byte written
(so a bench can prove nothing was written outside the destination), and the cycle of every
read and write burst's address (so a bench can see what ran before what).

Reads are served by a pipelined model: every AR is accepted at once and stamped. Its beats leave
``latency`` cycles later, in order, one per cycle unless the R channel is paused. So several
reads are in flight whenever the manager issues them, as with a real DRAM controller. Writes use
cocotbext-axi's ``AxiSlaveWrite`` with this object as the target. Addresses wrap modulo the
memory's size (a power of two), as cocotbext-axi's AxiRam does.
"""

from __future__ import annotations

import collections
import random

import cocotb
import numpy as np
from cocotb.triggers import Event, RisingEdge
from cocotbext.axi import AxiBus
from cocotbext.axi.axi_channels import AxiARSink, AxiRSource
from cocotbext.axi.axi_slave import AxiSlaveWrite

from .harness import no_pauses, pauses, quiet

OKAY, SLVERR = 0, 2


class AxiMemory:
    def __init__(self, dut, prefix: str, size: int, *, latency: int = 1):
        bus = AxiBus.from_prefix(dut, prefix, bus_separator="__")
        self.clk = dut.clk
        self.mem = np.zeros(size, dtype=np.uint8)
        self.latency = latency
        self.read_errors: list[tuple[int, int]] = []    # [lo, hi) ranges answering SLVERR
        self.write_errors: list[tuple[int, int]] = []
        self.written = np.zeros(size, dtype=bool)       # every byte a write touched
        self.ar = AxiARSink(bus.read.ar, dut.clk, dut.rst)
        self.r = AxiRSource(bus.read.r, dut.clk, dut.rst)
        self.write_if = AxiSlaveWrite(bus.write, dut.clk, dut.rst, target=self)
        self.byte_lanes = len(bus.read.r.rdata) // 8
        quiet(self.ar.log, self.r.log, self.write_if.log, self.write_if.aw_channel.log,
              self.write_if.w_channel.log, self.write_if.b_channel.log)
        self.cycle = 0
        self.longest_read = 0                           # beats of the longest read burst
        self.longest_write = 0                          # ... and write burst
        #: one past the highest byte any burst addressed, before the wrap: a bench of a
        #: manager narrower than the port checks that the bits above its width stay 0
        self.highest = 0
        #: (cycle, address, beats) of every read and write burst, as its address was taken
        self.ar_log: list[tuple[int, int, int]] = []
        self.aw_log: list[tuple[int, int, int]] = []
        self._aw = bus.write.aw
        self._pending = collections.deque()
        self._arrived = Event()
        cocotb.start_soon(self._count())
        cocotb.start_soon(self._collect())
        cocotb.start_soon(self._serve())
        cocotb.start_soon(self._watch_aw())

    # -- stalls -----------------------------------------------------------------------------

    def set_pauses(self, r: random.Random | None, p: float = 0.3):
        """Random stalls on AR, R, AW, W and B (``r=None``: none)."""
        for ch in (self.ar, self.r, self.write_if.aw_channel, self.write_if.w_channel,
                   self.write_if.b_channel):
            ch.set_pause_generator(no_pauses() if r is None
                                   else pauses(random.Random(r.random()), p))

    # -- contents ---------------------------------------------------------------------------

    def load(self, addr: int, data) -> None:
        b = np.frombuffer(bytes(data), dtype=np.uint8)
        self.mem[addr:addr + b.size] = b

    def fill(self, value: int) -> None:
        """Every byte ``value``; nothing written, no burst logged."""
        self.mem[:] = value
        self.written[:] = False
        self.ar_log.clear()
        self.aw_log.clear()

    def first_read(self, lo: int, hi: int) -> int:
        """The cycle of the first read burst logged that reads a byte of [lo, hi)."""
        return min(c for c, a, n in self.ar_log if a < hi and a + n * self.byte_lanes > lo)

    def last_write(self, lo: int, hi: int) -> int:
        """The cycle of the last write burst logged that writes a byte of [lo, hi)."""
        return max(c for c, a, n in self.aw_log if a < hi and a + n * self.byte_lanes > lo)

    # -- the write target (AxiSlaveWrite calls this) ----------------------------------------

    async def write(self, addr: int, data: bytes) -> None:
        if any(lo <= addr < hi for lo, hi in self.write_errors):
            raise OSError(f"write error injected at 0x{addr:x}")
        n = len(data)
        addr %= self.mem.size
        self.mem[addr:addr + n] = np.frombuffer(data, dtype=np.uint8)
        self.written[addr:addr + n] = True

    async def _watch_aw(self):
        """Every write burst's address, as the AW handshake passes it: full-width INCR beats
        within one 4 KiB page (a breach fails the running test)."""
        aw = self._aw
        while True:
            await RisingEdge(self.clk)
            if not (aw.awvalid.value == 1 and aw.awready.value == 1):
                continue
            addr, beats = int(aw.awaddr.value), int(aw.awlen.value) + 1
            size = 1 << int(aw.awsize.value)
            assert size == self.byte_lanes, f"narrow write burst (awsize {int(aw.awsize.value)})"
            assert (addr & 0xFFF) + beats * size <= 0x1000, \
                f"write burst at 0x{addr:x}, {beats} beats, crosses 4 KiB"
            self.longest_write = max(self.longest_write, beats)
            self.highest = max(self.highest, addr + beats * size)
            self.aw_log.append((self.cycle, addr, beats))

    # -- reads ------------------------------------------------------------------------------

    async def _count(self):
        while True:
            await RisingEdge(self.clk)
            self.cycle += 1

    async def _collect(self):
        while True:
            ar = await self.ar.recv()
            self._pending.append((ar, self.cycle))
            self.ar_log.append((self.cycle, int(ar.araddr), int(ar.arlen) + 1))
            self._arrived.set()

    async def _serve(self):
        while True:
            while not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            ar, stamp = self._pending.popleft()
            while self.cycle < stamp + self.latency:
                await RisingEdge(self.clk)
            addr, beats, size = int(ar.araddr), int(ar.arlen) + 1, 1 << int(ar.arsize)
            assert size == self.byte_lanes, f"narrow read burst (arsize {int(ar.arsize)})"
            assert int(ar.arburst) == 1, "only INCR bursts are expected"
            assert (addr & 0xFFF) + beats * size <= 0x1000, f"burst at 0x{addr:x} crosses 4 KiB"
            self.longest_read = max(self.longest_read, beats)
            self.highest = max(self.highest, addr + beats * size)
            for n in range(beats):
                a = addr + n * size
                r = self.r._transaction_obj()
                r.rid = int(ar.arid)
                r.rlast = n == beats - 1
                bad = any(lo <= a < hi for lo, hi in self.read_errors)
                r.rresp = SLVERR if bad else OKAY
                a %= self.mem.size
                r.rdata = 0 if bad else int.from_bytes(self.mem[a:a + size].tobytes(), "little")
                await self.r.send(r)
