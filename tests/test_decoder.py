"""hw.top.interconnect.LiteDecoder on its own: each write and read reaches the window it
addresses, with the window's base taken off, and nothing else; its response comes back; an
address outside every window is answered DECERR (reads 0) and reaches no window. Both with and
without the subordinates' local copies, with random stalls on every channel of the manager and
of each subordinate, under a printed seed."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from atomcube.hw.fabric import Checked
from atomcube.hw.top.interconnect import LiteDecoder

WINDOWS = [("regs", 0x0000, 0x40), ("lut", 0x1000, 0x1000), ("mem", 0x100000, 0x10000)]
OKAY, SLVERR, DECERR = 0, 2, 3


def addresses(rng, n):
    """``n`` word addresses: most in a window (some at its first and last word), some in
    none (just past a window's end, or far from all)."""
    out = []
    for _ in range(n):
        kind = rng.random()
        name, base, size = WINDOWS[int(rng.integers(len(WINDOWS)))]
        if kind < 0.1:
            out.append(base + size)                    # the word after the window
        elif kind < 0.15:
            out.append(0x7000_0000 + 4 * int(rng.integers(1 << 20)))
        elif kind < 0.25:
            out.append(base + (size - 4) * int(rng.integers(2)))
        else:
            out.append(base + 4 * int(rng.integers(size // 4)))
    return out


def window_of(addr):
    for name, base, size in WINDOWS:
        if base <= addr < base + size:
            return name, addr - base
    return None, None


def run_decoder(seed, *, local_copies, n=60, stall=0.4, limit=20000):
    """``n`` writes and ``n`` reads, issued side by side. Each subordinate is a memory of words
    (random at the start) that answers SLVERR for its last word. Returns the subordinates'
    memories at the end, what each saw, and the manager's responses."""
    rng = np.random.default_rng(seed)
    print(f"decoder: seed {seed}, local_copies={local_copies}")
    dut = LiteDecoder(WINDOWS, local_copies=local_copies)
    s = dut.s_axil
    mem = {name: {a: int(v) for a, v in enumerate(rng.integers(0, 1 << 32, size // 4))}
           for name, _, size in WINDOWS}
    start = {name: dict(words) for name, words in mem.items()}
    writes = [(a, int(rng.integers(0, 1 << 32)), int(rng.integers(1, 16)))
              for a in addresses(rng, n)]
    reads = addresses(rng, n)
    seen = {name: {"w": [], "r": []} for name, _, _ in WINDOWS}
    got = {"b": [], "r": []}
    nxt = {"aw": 0, "w": 0, "ar": 0}
    # per subordinate: writes' addresses and data taken, not yet answered; reads owed
    pend = {name: {"aw": [], "w": [], "b": [], "r": []} for name, _, _ in WINDOWS}

    def want():
        return int(rng.random() >= stall)

    async def bench(ctx):
        cycle = 0
        while len(got["b"]) < n or len(got["r"]) < n:
            cycle += 1
            assert cycle < limit, f"the decoder hangs (seed {seed})"
            # the manager: a valid, once up, stays up with its payload until taken
            for ch, todo in (("aw", writes), ("w", writes), ("ar", reads)):
                k = nxt[ch]
                if k < len(todo) and (ctx.get(getattr(s, f"{ch}valid")) or want()):
                    ctx.set(getattr(s, f"{ch}valid"), 1)
                    if ch == "aw":
                        ctx.set(s.awaddr, todo[k][0])
                    elif ch == "w":
                        ctx.set(s.wdata, todo[k][1])
                        ctx.set(s.wstrb, todo[k][2])
                    else:
                        ctx.set(s.araddr, todo[k])
                else:
                    ctx.set(getattr(s, f"{ch}valid"), 0)
            ctx.set(s.bready, want())
            ctx.set(s.rready, want())
            # the subordinates
            ups = {}
            for name, _, _ in WINDOWS:
                p, q = getattr(dut, name), pend[name]
                for ch in ("aw", "w", "ar"):
                    ctx.set(getattr(p, f"{ch}ready"), want())
                b_up = bool(q["b"]) and want()
                ctx.set(p.bvalid, int(b_up))
                if b_up:
                    ctx.set(p.bresp, q["b"][0])
                r_up = bool(q["r"]) and want()
                ctx.set(p.rvalid, int(r_up))
                if r_up:
                    ctx.set(p.rdata, q["r"][0][0])
                    ctx.set(p.rresp, q["r"][0][1])
                ups[name] = (b_up, r_up)
            await ctx.delay(1e-9)
            # what crosses this cycle
            for ch in ("aw", "w", "ar"):
                if ctx.get(getattr(s, f"{ch}valid")) and ctx.get(getattr(s, f"{ch}ready")):
                    nxt[ch] += 1
            if ctx.get(s.bvalid) and ctx.get(s.bready):
                got["b"].append(ctx.get(s.bresp))
            if ctx.get(s.rvalid) and ctx.get(s.rready):
                got["r"].append((ctx.get(s.rdata), ctx.get(s.rresp)))
            for name, _, size in WINDOWS:
                p, q = getattr(dut, name), pend[name]
                b_up, r_up = ups[name]
                if ctx.get(p.awvalid) and ctx.get(p.awready):
                    q["aw"].append(ctx.get(p.awaddr))
                if ctx.get(p.wvalid) and ctx.get(p.wready):
                    q["w"].append((ctx.get(p.wdata), ctx.get(p.wstrb)))
                if ctx.get(p.arvalid) and ctx.get(p.arready):
                    a = ctx.get(p.araddr)
                    seen[name]["r"].append(a)
                    q["r"].append((mem[name].get(a // 4, 0), SLVERR if a == size - 4 else OKAY))
                if b_up and ctx.get(p.bready):
                    q["b"].pop(0)
                if r_up and ctx.get(p.rready):
                    q["r"].pop(0)
                while q["aw"] and q["w"]:
                    a, (data, strb) = q["aw"].pop(0), q["w"].pop(0)
                    seen[name]["w"].append((a, data, strb))
                    if a == size - 4:
                        q["b"].append(SLVERR)
                        continue
                    old = mem[name][a // 4]
                    bytes_ = (0xFF << (8 * i) for i in range(4) if strb >> i & 1)
                    mask = sum(bytes_)
                    mem[name][a // 4] = (old & ~mask) | (data & mask)
                    q["b"].append(OKAY)
            await ctx.tick()

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return start, mem, writes, reads, seen, got


@pytest.mark.parametrize("local_copies", [True, False], ids=["local", "shared"])
@pytest.mark.parametrize("seed", range(3))
def test_decoder_routes_each_access_to_its_window(seed, local_copies):
    start, mem, writes, reads, seen, got = run_decoder(seed, local_copies=local_copies)
    # each window saw exactly the accesses addressed to it, in order, less its base
    sizes = {name: size for name, _, size in WINDOWS}
    for name in sizes:
        want_w = [(off, data, strb) for a, data, strb in writes
                  for w, off in [window_of(a)] if w == name]
        assert seen[name]["w"] == want_w, name
        assert seen[name]["r"] == [off for a in reads for w, off in [window_of(a)] if w == name]
    # the responses, in order: DECERR outside every window, else the window's own
    want_b = []
    model = {name: dict(words) for name, words in start.items()}
    for a, data, strb in writes:
        name, off = window_of(a)
        want_b.append(DECERR if name is None else SLVERR if off == sizes[name] - 4 else OKAY)
        if name is not None and off != sizes[name] - 4:
            mask = sum(0xFF << (8 * i) for i in range(4) if strb >> i & 1)
            model[name][off // 4] = (model[name][off // 4] & ~mask) | (data & mask)
    assert got["b"] == want_b
    assert mem == model
    # reads and writes run side by side, so a read's data is checked only where no write of
    # the test lands (the others return whichever value the word held when the read got there)
    written = {window_of(a) for a, _, _ in writes}
    for a, (data, resp) in zip(reads, got["r"], strict=True):
        name, off = window_of(a)
        if name is None:
            assert (data, resp) == (0, DECERR), hex(a)
            continue
        assert resp == (SLVERR if off == sizes[name] - 4 else OKAY), hex(a)
        if (name, off) not in written:
            assert data == start[name][off // 4], hex(a)
