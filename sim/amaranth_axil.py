"""An AXI4-Lite manager for Amaranth simulation testbenches: one register access at a time, with
random idle cycles before it and random backpressure on B and R, drawn from the test's ``numpy``
generator so a seed replays the run. :func:`driver` puts the named-register driver
(:class:`model.regmap.AsyncDriver`) on top, so a testbench programs a block as software does
(examples/amaranth_reuse.py)."""

from __future__ import annotations


async def _idle(ctx, rng):
    await ctx.tick().repeat(int(rng.integers(0, 3)) + 1)


async def axil_write(ctx, bus, rng, addr: int, data: int, limit: int = 40, *,
                     back_to_back: bool = False):
    """Write ``data`` at ``addr`` through ``bus`` (a subordinate's ``s_axil``), address and data
    offered together; raises AssertionError if no response comes within ``limit`` cycles.
    With ``back_to_back`` there is no idle before it, B is always taken (``bready`` held high)
    and it returns once address and data are taken, so the next write is offered in the
    following cycle and writes can land one a cycle."""
    if not back_to_back:
        await _idle(ctx, rng)
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, data)
    ctx.set(bus.wstrb, 0xF)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    aw = w = b = False
    for _ in range(limit):
        ready = 1 if back_to_back else int(rng.random() < 0.5)
        ctx.set(bus.bready, ready)
        aw_now, w_now = ctx.get(bus.awready), ctx.get(bus.wready)
        b_now = ready and ctx.get(bus.bvalid)
        await ctx.tick()
        if aw_now:
            aw = True
            ctx.set(bus.awvalid, 0)
        if w_now:
            w = True
            ctx.set(bus.wvalid, 0)
        b = b or b_now
        if aw and w and back_to_back:
            return
        if aw and w and b:
            ctx.set(bus.bready, 0)
            return
    raise AssertionError(f"the register write at 0x{addr:02x} was not answered")


async def axil_read(ctx, bus, rng, addr: int, limit: int = 40) -> int:
    """The word read at ``addr`` through ``bus``; raises AssertionError if none comes."""
    await _idle(ctx, rng)
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    for _ in range(20):
        taken = ctx.get(bus.arready)
        await ctx.tick()
        if taken:
            break
    ctx.set(bus.arvalid, 0)
    for _ in range(limit):
        ready = int(rng.random() < 0.5)
        ctx.set(bus.rready, ready)
        if ready and ctx.get(bus.rvalid):
            word = ctx.get(bus.rdata)
            await ctx.tick()
            ctx.set(bus.rready, 0)
            return word
        await ctx.tick()
    raise AssertionError(f"no read data from 0x{addr:02x}")


class Transport:
    """Word reads and writes through ``bus`` in a testbench (``ctx``), for
    :class:`model.regmap.AsyncDriver`."""

    def __init__(self, ctx, bus, rng):
        self.ctx, self.bus, self.rng = ctx, bus, rng

    async def read(self, address: int) -> int:
        return await axil_read(self.ctx, self.bus, self.rng, address)

    async def write(self, address: int, value: int) -> None:
        await axil_write(self.ctx, self.bus, self.rng, address, value)


def driver(ctx, bus, regmap, rng):
    """The named-register driver of ``regmap`` over ``bus`` (a block's ``s_axil``, or a port
    connected to one) in a testbench."""
    from atomcube.model.regmap import AsyncDriver

    return AsyncDriver(regmap, Transport(ctx, bus, rng))
