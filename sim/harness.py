"""Pieces every cocotb bench shares: clock and reset, seeded randomness, pause generators for
backpressure and idle cycles, and the AXI4-Lite transport the register driver runs over."""

from __future__ import annotations

import itertools
import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Edge, First, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from atomcube.model.regmap import AsyncDriver, BusError

from .runner import CLOCK_PERIOD_NS

__all__ = ["rng", "start_clock", "reset", "pauses", "no_pauses", "AxiLiteTransport",
           "axil_master", "set_axil_pauses"]


def rng(salt: int = 0) -> random.Random:
    """A generator seeded from cocotb's seed (printed at the start of every run) and ``salt``."""
    return random.Random(cocotb.RANDOM_SEED * 1_000_003 + salt)


def start_clock(dut) -> None:
    Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start()


async def reset(dut, cycles: int = 4) -> None:
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def pauses(r: random.Random, p: float = 0.3, max_run: int = 6):
    """Endless pause pattern: runs of pause cycles (up to ``max_run``) with probability ``p``.

    A source paused does not assert valid (idle cycles); a sink paused does not assert ready
    (backpressure).
    """
    while True:
        if r.random() < p:
            yield from itertools.repeat(True, r.randint(1, max_run))
        else:
            yield False


def no_pauses():
    return itertools.repeat(False)


def axil_master(dut, prefix: str = "s_axil", *, separator: str = "__", clock=None, reset=None,
                reset_active_level: bool = True) -> AxiLiteMaster:
    """An AxiLiteMaster on the ports ``<prefix><separator>*`` of an Amaranth component (clock
    and reset: ``dut.clk`` and ``dut.rst``, active high, unless given).

    Its per-transaction INFO lines are turned down to warnings; failures still show."""
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, prefix, bus_separator=separator),
                           dut.clk if clock is None else clock,
                           dut.rst if reset is None else reset,
                           reset_active_level=reset_active_level)
    quiet(master.write_if.log, master.read_if.log)
    return master


def quiet(*loggers):
    for log in loggers:
        log.setLevel(logging.WARNING)


def set_axil_pauses(master: AxiLiteMaster, r: random.Random | None, p: float = 0.3) -> None:
    """Random stalls on all five AXI4-Lite channels (``r=None``: none)."""
    channels = (master.write_if.aw_channel, master.write_if.w_channel, master.write_if.b_channel,
                master.read_if.ar_channel, master.read_if.r_channel)
    for ch in channels:
        ch.set_pause_generator(no_pauses() if r is None else pauses(random.Random(r.random()), p))


class AxiLiteTransport:
    """Word reads and writes over an AxiLiteMaster, for :class:`model.regmap.AsyncDriver`.

    Error responses raise :class:`model.regmap.BusError`.
    """

    def __init__(self, master: AxiLiteMaster, regmap=None):
        self.master = master
        self.regmap = regmap

    def _name(self, address):
        r = self.regmap.at(address) if self.regmap is not None else None
        return r.name if r is not None else None

    async def read(self, address: int) -> int:
        resp = await self.master.read(address, 4)
        if resp.resp != AxiResp.OKAY:
            raise BusError("read", address, int(resp.resp), self._name(address))
        return int.from_bytes(resp.data, "little")

    async def write(self, address: int, value: int) -> None:
        resp = await self.master.write(address, value.to_bytes(4, "little"))
        if resp.resp != AxiResp.OKAY:
            raise BusError("write", address, int(resp.resp), self._name(address))


def axil_driver(master: AxiLiteMaster, regmap, base: int = 0) -> AsyncDriver:
    """The named-register driver over an AxiLiteMaster."""
    return AsyncDriver(regmap, AxiLiteTransport(master, regmap), base=base)


async def wait_job_done(dut, drv, clear: dict, max_cycles: int, clock=None):
    """Wait for a block's job to end: ``irq`` high (checked every 1000 cycles of ``clock``,
    default ``dut.clk``, or on its edge), then ``status.done`` set and ``busy`` clear; clears
    ``clear`` (status fields) and returns the status read."""
    irq = dut.irq
    clock = dut.clk if clock is None else clock
    for _ in range(max_cycles // 1000):
        if irq.value:
            break
        await First(Edge(irq), ClockCycles(clock, 1000))
    assert irq.value, "the job did not end (no interrupt)"
    st = await drv.status.read()
    assert st.done and not st.busy, f"irq without done: {st}"
    await drv.status.write(**clear)
    return st
