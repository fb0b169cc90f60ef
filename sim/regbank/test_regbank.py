"""cocotb bench for the AXI4-Lite register bank (hw/bus/regbank.py) on the selftest map.

Every access is checked against :class:`model.regmap.RegisterBankModel`: read data and response,
write response, the stored values the bank presents to the logic, every W1P pulse and every
read/write strobe. Each test runs without and with random stalls on all five AXI4-Lite channels.
"""

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiResp

from atomcube.model.registers import SELFTEST
from atomcube.model.regmap import Access, BusError, RegisterBankModel
from atomcube.sim.harness import axil_driver, axil_master, reset, rng, set_axil_pauses, start_clock
from atomcube.sim.runner import CLOCK_PERIOD_NS, params

BACKPRESSURE = [False, True]
TIMEOUT = dict(timeout_time=2, timeout_unit="ms")


def cycle_now() -> int:
    """The clock cycle in progress (cycle k runs from rising edge k to rising edge k+1)."""
    return int(get_sim_time("ns") // CLOCK_PERIOD_NS)


class TB:
    def __init__(self, dut, backpressure: bool, salt: int = 0):
        self.dut = dut
        self.map = SELFTEST
        self.addr_width = params().get("addr_width", max(3, SELFTEST.addr_width))
        self.rng = rng(salt)
        self.model = RegisterBankModel(SELFTEST)
        self.master = axil_master(dut)
        set_axil_pauses(self.master, self.rng if backpressure else None)
        self.drv = axil_driver(self.master, SELFTEST)
        self.pulses = []          # (register, field, bits) as seen on the pulse outputs
        self.wr_strobes = []      # register names, in order
        self.rd_strobes = []
        self.wr_cycles = []       # (register, cycle) of every write strobe
        self.window = None        # a memory behind the RWS field, when a test wants one
        start_clock(dut)
        for r, f in self._fields(Access.R, Access.RWS):
            self.port(r, f, "r_data").value = 0
        for r, f in self._fields(Access.RW1C):
            self.port(r, f, "set").value = 0

    def _fields(self, *accesses):
        return [(r, f) for r in self.map for f in r.fields if f.access in accesses]

    def port(self, r, f, member):
        return getattr(self.dut, f"regs__{r.name}__{f.name}__{member}")

    @classmethod
    async def start(cls, dut, backpressure: bool, salt: int = 0) -> "TB":
        """A bench out of reset, with its monitor running."""
        tb = cls(dut, backpressure, salt)
        await reset(dut)
        cocotb.start_soon(tb._monitor())
        return tb

    async def finish(self):
        """Let the last pulses and strobes land, then compare them all with the model."""
        await ClockCycles(self.dut.clk, 2)
        self.check_logs()

    async def _monitor(self):
        """Record pulses and strobes, and play the memory behind ``window`` if there is one."""
        pulse_fields = self._fields(Access.W1P)
        win_reg = self.map["window"]
        win_field = win_reg.field("word")
        last_addr = 0
        while True:
            await FallingEdge(self.dut.clk)
            for r in self.map:
                if self.port_reg(r, "wr_stb"):
                    self.wr_strobes.append(r.name)
                    self.wr_cycles.append((r.name, cycle_now()))
                if self.port_reg(r, "rd_stb"):
                    self.rd_strobes.append(r.name)
            for r, f in pulse_fields:
                bits = int(self.port(r, f, "pulse").value)
                if bits:
                    self.pulses.append((r.name, f.name, bits))
            if self.window is not None:
                # A synchronous memory: the word presented in this cycle is the one at the address
                # the logic held in the previous cycle; reads and writes advance the address.
                mem = self.window
                self.port(win_reg, win_field, "r_data").value = mem["data"][last_addr % 64]
                last_addr = mem["addr"]
                if self.port_reg(win_reg, "wr_stb"):
                    written = int(self.port(win_reg, win_field, "w_data").value)
                    mem["data"][mem["addr"] % 64] = written
                    mem["addr"] += 1
                if self.port_reg(win_reg, "rd_stb"):
                    mem["addr"] += 1

    def port_reg(self, r, member):
        return int(getattr(self.dut, f"regs__{r.name}__{member}").value)

    def randomise_inputs(self):
        """New values on every R (and RWS) input, mirrored into the model."""
        for r, f in self._fields(Access.R, Access.RWS):
            if r.name == "window" and self.window is not None:
                continue
            v = self.rng.getrandbits(f.width)
            self.port(r, f, "r_data").value = v
            self.model.inputs[(r.name, f.name)] = v

    async def raise_events(self, r, f, bits):
        """Pulse an RW1C field's set input for one cycle."""
        await FallingEdge(self.dut.clk)
        self.port(r, f, "set").value = bits
        await FallingEdge(self.dut.clk)
        self.port(r, f, "set").value = 0
        self.model.set_bits(r.name, f.name, bits)

    def check_outputs(self, where=""):
        for r, f in self._fields(Access.RW, Access.W, Access.RW1C, Access.RWS):
            member = "w_data" if f.access is Access.RWS else "data"
            got = int(self.port(r, f, member).value)
            want = self.model.value(r.name, f.name)
            assert got == want, f"{where}: {r.name}.{f.name} presents 0x{got:x}, model 0x{want:x}"

    async def write(self, address, data: bytes):
        """A write of 1 to 4 bytes inside one word, checked against the model."""
        off = address % 4
        word = int.from_bytes(data, "little") << (8 * off)
        strb = ((1 << len(data)) - 1) << off
        want = self.model.bus_write(address - off, word, strb)
        resp = await self.master.write(address, data)
        assert resp.resp == AxiResp(int(want)), \
            f"write 0x{address:x} strb {strb:04b}: resp {resp.resp.name}, model {want.name}"

    async def read(self, address):
        want, want_resp = self.model.bus_read(address)
        resp = await self.master.read(address, 4)
        got = int.from_bytes(resp.data, "little")
        assert resp.resp == AxiResp(int(want_resp)), \
            f"read 0x{address:x}: resp {resp.resp.name}, model {want_resp.name}"
        assert got == want, f"read 0x{address:x}: 0x{got:08x}, model 0x{want:08x}"
        return got

    def unmapped_addresses(self):
        top = 1 << self.addr_width
        cands = [0x18, 0x1C, self.map.size, top - 4]
        if self.addr_width > 8:
            cands += [0x100 + r.offset for r in self.map] + [top - 0x100 + 0x04]
        return [a for a in cands if a < top and self.map.at(a) is None]

    def check_logs(self):
        want_pulses = [p for p in self.model.pulses]
        assert self.pulses == want_pulses, f"pulses {self.pulses} != model {want_pulses}"
        want_w = [w[0] for w in self.model.writes]
        assert self.wr_strobes == want_w, f"write strobes {self.wr_strobes} != model {want_w}"
        assert self.rd_strobes == self.model.reads, \
            f"read strobes {self.rd_strobes} != model {self.model.reads}"


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_reset_values(dut, backpressure):
    """After reset every field holds its declared reset value; R fields read the logic."""
    tb = await TB.start(dut, backpressure)
    tb.check_outputs("after reset")
    for r in SELFTEST:
        assert tb.model.peek(r.offset)[0] == r.reset
        await tb.read(r.offset)
    tb.randomise_inputs()
    for r in SELFTEST:
        await tb.read(r.offset)
    tb.check_logs()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_access_types(dut, backpressure):
    """Directed: each access type's rule, one at a time."""
    tb = await TB.start(dut, backpressure, salt=1)
    m = SELFTEST
    # RW keeps what is written; writes to the R field beside it are ignored.
    await tb.write(m["ctrl"].offset, (0xFFFF_FFFF).to_bytes(4, "little"))
    tb.check_outputs("ctrl all ones")
    assert (await tb.read(m["ctrl"].offset)) == 0x0003_FFCF  # busy (R) still 0
    # R: a write to an all-R register answers OKAY and changes nothing.
    dut.regs__ident__value__r_data.value = 0xCAFE_F00D
    tb.model.inputs[("ident", "value")] = 0xCAFE_F00D
    await tb.write(m["ident"].offset, b"\x00\x00\x00\x00")
    assert (await tb.read(m["ident"].offset)) == 0xCAFE_F00D
    # W: stored and presented, reads return 0.
    await tb.write(m["data"].offset, (0xA5A5_5A5A).to_bytes(4, "little"))
    tb.check_outputs("data written")
    assert (await tb.read(m["data"].offset)) == 0
    # RW1C: logic sets, writing 1 clears, writing 0 leaves.
    st = m["status"]
    await tb.raise_events(st, st.field("events"), 0x3FF)
    await tb.raise_events(st, st.field("done"), 1)
    assert (await tb.read(st.offset)) == 0x1 | (0b010 << 1) | (0x3FF << 7)
    await tb.write(st.offset, (0x0000_0000).to_bytes(4, "little"))
    await tb.write(st.offset, ((0x155 << 7) | 1).to_bytes(4, "little"))
    assert (await tb.read(st.offset)) == (0b010 << 1) | (0x2AA << 7)
    # W1P: one pulse per written 1, nothing for 0, reads return 0.
    await tb.write(m["cmd"].offset, ((0xABC << 12) | 0b11).to_bytes(4, "little"))
    await tb.write(m["cmd"].offset, (0).to_bytes(4, "little"))
    assert (await tb.read(m["cmd"].offset)) == 0
    await ClockCycles(dut.clk, 2)
    want = [("cmd", "start", 1), ("cmd", "abort", 1), ("cmd", "kick", 0xABC)]
    assert tb.pulses == want, tb.pulses
    tb.check_outputs("end")
    tb.check_logs()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_byte_strobes(dut, backpressure):
    """Every byte lane alone, every pair, and three-byte writes, on fields that span lanes."""
    tb = await TB.start(dut, backpressure, salt=2)
    patterns = [(o, n) for n in (1, 2, 3) for o in range(4 - n + 1)]
    for name in ("ctrl", "data", "scratch", "limits", "status", "cmd", "window"):
        r = SELFTEST[name]
        for off, n in patterns:
            if name == "status":
                await tb.raise_events(r, r.field("events"), tb.rng.getrandbits(10))
            data = bytes(tb.rng.getrandbits(8) for _ in range(n))
            await tb.write(r.offset + off, data)
            tb.check_outputs(f"{name} +{off} len {n}")
            await tb.read(r.offset)
    await tb.finish()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_unmapped(dut, backpressure):
    """Holes and addresses past the map answer SLVERR, read 0 and change nothing."""
    tb = await TB.start(dut, backpressure, salt=3)
    tb.randomise_inputs()
    addrs = tb.unmapped_addresses()
    assert addrs, "no unmapped address to test"
    for a in addrs:
        await tb.write(a, (0xFFFF_FFFF).to_bytes(4, "little"))
        await tb.read(a)
        tb.check_outputs(f"after SLVERR at 0x{a:x}")
    # The driver turns the error response into an exception naming the address.
    try:
        await tb.drv.transport.read(addrs[0])
    except BusError as e:
        assert e.resp.name == "SLVERR" and e.address == addrs[0], e
    else:
        raise AssertionError("a read of an unmapped address did not raise BusError")
    for r in SELFTEST:
        await tb.read(r.offset)
    await tb.finish()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_random_accesses(dut, backpressure):
    """Random reads, partial writes, events and input changes, all against the model."""
    tb = await TB.start(dut, backpressure, salt=4)
    dut._log.info("random accesses, seed %d", cocotb.RANDOM_SEED)
    addrs = [r.offset for r in SELFTEST] + tb.unmapped_addresses()
    rw1c = tb._fields(Access.RW1C)
    for i in range(300):
        op = tb.rng.random()
        if op < 0.4:
            n = tb.rng.choice((1, 2, 3, 4, 4, 4))
            off = tb.rng.randint(0, 4 - n)
            data = bytes(tb.rng.getrandbits(8) for _ in range(n))
            await tb.write(tb.rng.choice(addrs) + off, data)
        elif op < 0.8:
            await tb.read(tb.rng.choice(addrs))
        elif op < 0.9:
            r, f = tb.rng.choice(rw1c)
            await tb.raise_events(r, f, tb.rng.getrandbits(f.width))
        else:
            tb.randomise_inputs()
        tb.check_outputs(f"step {i}")
    await tb.finish()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_back_to_back(dut, backpressure):
    """Queued writes, then queued reads, issued as fast as the bank takes them."""
    tb = await TB.start(dut, backpressure, salt=5)
    regs = [SELFTEST[n] for n in ("scratch", "limits", "ctrl", "data", "window")]
    writes = [(tb.rng.choice(regs), tb.rng.getrandbits(32)) for _ in range(64)]
    tasks = [cocotb.start_soon(tb.master.write(r.offset, v.to_bytes(4, "little")))
             for r, v in writes]
    for (r, v), t in zip(writes, tasks, strict=True):
        resp = await t
        assert resp.resp == AxiResp.OKAY
        tb.model.bus_write(r.offset, v)
    reads = [tb.rng.choice(regs) for _ in range(64)]
    tasks = [cocotb.start_soon(tb.master.read(r.offset, 4)) for r in reads]
    for r, t in zip(reads, tasks, strict=True):
        resp = await t
        want, _ = tb.model.bus_read(r.offset)
        assert int.from_bytes(resp.data, "little") == want, f"{r.name}: 0x{want:08x} expected"
    tb.check_outputs("after back-to-back")
    await tb.finish()


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_simultaneous_read_write(dut, backpressure):
    """A read and a write issued in the same cycle: to the same register the read sees either
    the old or the new value (without stalls, always the old one), to different registers both
    are exact."""
    tb = await TB.start(dut, backpressure, salt=6)
    scratch, ctrl = SELFTEST["scratch"], SELFTEST["ctrl"]
    for _ in range(40):
        old = tb.model.peek(scratch.offset)[0]
        new = tb.rng.getrandbits(32)
        await RisingEdge(dut.clk)
        wt = cocotb.start_soon(tb.master.write(scratch.offset, new.to_bytes(4, "little")))
        rt = cocotb.start_soon(tb.master.read(scratch.offset, 4))
        got = int.from_bytes((await rt).data, "little")
        assert (await wt).resp == AxiResp.OKAY
        tb.model.bus_write(scratch.offset, new)
        tb.model.reads.append("scratch")
        if backpressure:
            assert got in (old, new), f"read 0x{got:08x}, neither old 0x{old:08x} nor new"
        else:
            assert got == old, f"read 0x{got:08x} in the write's cycle, old value 0x{old:08x}"
        # different registers at once
        v = tb.rng.getrandbits(32)
        wt = cocotb.start_soon(tb.master.write(scratch.offset, v.to_bytes(4, "little")))
        want_ctrl, _ = tb.model.bus_read(ctrl.offset)
        rt = cocotb.start_soon(tb.master.read(ctrl.offset, 4))
        assert tb.model.reads[-1] == "ctrl"
        assert int.from_bytes((await rt).data, "little") == want_ctrl
        assert (await wt).resp == AxiResp.OKAY
        tb.model.bus_write(scratch.offset, v)
    tb.check_outputs("end")
    await ClockCycles(dut.clk, 2)
    assert sorted(tb.wr_strobes) == sorted(w[0] for w in tb.model.writes)
    assert sorted(tb.rd_strobes) == sorted(tb.model.reads)


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_response_after_store(dut, backpressure):
    """In every cycle bvalid is high, the write it answers has landed: the stored value is
    already the new one (with capture the store comes a cycle after the commit, and the
    response waits for it), so a manager that reads after the response reads the new value."""
    tb = await TB.start(dut, backpressure, salt=10)
    scratch = SELFTEST["scratch"]
    value = scratch.field("value")
    written = [scratch.reset]
    seen = [0]

    async def watch():
        while True:
            await FallingEdge(dut.clk)
            if int(dut.s_axil__bvalid.value):
                got = int(tb.port(scratch, value, "data").value)
                assert got == written[0], (f"bvalid with 0x{got:08x} stored, the write was "
                                           f"0x{written[0]:08x}")
                seen[0] += 1

    watcher = cocotb.start_soon(watch())
    for _ in range(30):
        v = tb.rng.getrandbits(32)
        written[0] = v              # the previous write's response has been taken by now
        assert (await tb.master.write(scratch.offset, v.to_bytes(4, "little"))).resp == \
            AxiResp.OKAY
        tb.model.bus_write(scratch.offset, v)
    watcher.kill()
    assert seen[0] >= 30, f"bvalid seen in {seen[0]} cycles for 30 writes"
    tb.check_outputs("end")


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_rw1c_set_wins(dut, backpressure):
    """A one-cycle set swept across a clearing write: the bit ends up set exactly when the set
    comes in or after the cycle that commits the clear (the same cycle included: set wins)."""
    tb = await TB.start(dut, backpressure, salt=7)
    st = SELFTEST["status"]
    done = st.field("done")
    same_cycle = 0
    rounds = 0
    # Sweep the set's delay until it has met the clear's cycle twice: without stalls that takes
    # one pass of 8; with random stalls the commit cycle moves, so keep going (bounded).
    while (same_cycle < 2 or rounds < 8) and rounds < 400:
        delay = rounds % 8
        rounds += 1
        write = cocotb.start_soon(tb.master.write(st.offset, (1).to_bytes(4, "little")))
        for _ in range(delay + 1):
            await FallingEdge(dut.clk)
        set_cycle = cycle_now()
        tb.port(st, done, "set").value = 1
        await FallingEdge(dut.clk)
        tb.port(st, done, "set").value = 0
        await write
        await ClockCycles(dut.clk, 2)
        commit = tb.wr_cycles[-1][1] - 1          # wr_stb is high the cycle after the commit
        want = int(set_cycle >= commit)
        got = int(tb.port(st, done, "data").value)
        assert got == want, (f"set in cycle {set_cycle}, clear committed in cycle {commit}: "
                             f"bit is {got}, expected {want}")
        same_cycle += set_cycle == commit
        await tb.master.write(st.offset, (1).to_bytes(4, "little"))   # clear for the next round
        await ClockCycles(dut.clk, 2)
        assert int(tb.port(st, done, "data").value) == 0
    assert same_cycle >= 2, f"{rounds} rounds never put the set in the clear's cycle twice"


@cocotb.test(**TIMEOUT)
@cocotb.parametrize(backpressure=BACKPRESSURE)
async def test_window_side_effects(dut, backpressure):
    """An RWS field in front of a synchronous memory with auto-increment: back-to-back writes
    then back-to-back reads return the words written, in order (the read timing promise)."""
    tb = await TB.start(dut, backpressure, salt=8)
    tb.window = {"data": [0] * 64, "addr": 0}
    win = SELFTEST["window"]
    words = [tb.rng.getrandbits(32) for _ in range(24)]
    tasks = [cocotb.start_soon(tb.drv.window.write(word=w)) for w in words]
    for t in tasks:
        await t
    await ClockCycles(dut.clk, 3)
    assert tb.window["data"][:24] == words
    tb.window["addr"] = 0                      # as a block's address register would be written
    await ClockCycles(dut.clk, 3)
    tasks = [cocotb.start_soon(tb.master.read(win.offset, 4)) for _ in words]
    got = [int.from_bytes((await t).data, "little") for t in tasks]
    assert got == words, "window reads out of step with the memory behind it"
    assert tb.rd_strobes.count("window") == len(words)
    assert tb.wr_strobes.count("window") == len(words)


@cocotb.test(**TIMEOUT)
async def test_driver(dut):
    """The named-register driver over AXI4-Lite: write, modify, read, errors."""
    tb = await TB.start(dut, backpressure=True, salt=9)
    drv = tb.drv
    await drv.ctrl.write(mode=3, threshold=0x123)           # enable takes its reset value, 1
    v = await drv.ctrl.read()
    assert (v.enable, v.mode, v.threshold, v.busy) == (1, 3, 0x123, 0), v
    await drv.ctrl.modify(enable=0)
    v = await drv.ctrl.read()
    assert (v.enable, v.mode, v.threshold) == (0, 3, 0x123), v
    # modify() on a register with RW1C bits must not clear them
    st = SELFTEST["status"]
    await tb.raise_events(st, st.field("events"), 0x0F0)
    await drv.write("status", done=1)       # unnamed RW1C fields are written as 0: kept
    after = await drv.status.read()
    assert (after.events, after.error) == (0x0F0, 0b010), after
    await drv.write_raw("scratch", 0x0BAD_CAFE)
    assert (await drv.scratch.read()).value == 0x0BAD_CAFE
    try:
        await drv.write("ctrl", busy=1)
    except ValueError as e:
        assert "read-only" in str(e)
    else:
        raise AssertionError("writing an R field through the driver did not raise")
