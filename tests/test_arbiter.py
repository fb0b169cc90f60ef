"""hw.top.interconnect.AxiArbiter on its own: every manager's addresses reach the port once and
in its order, write data follows the grants, responses go back by ID, no manager starves, and
a lone manager's addresses pass one a cycle. Random stalls on every channel of every manager
and of the port, under a printed seed."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from atomcube.hw.fabric import Checked
from atomcube.hw.top.interconnect import AxiArbiter

ID_BITS = 4


def run_arbiter(n, seed, *, per=10, stall=0.3, active=None, limit=6000, near=False):
    """``n`` managers, each with ``per`` write bursts and ``per`` read bursts (of 1 to 4 beats),
    through the arbiter to a port that answers them. ``stall``: how often a manager or the port
    holds back a valid or a ready; ``active``: the managers that issue anything (default all);
    ``near``: the arbiter's ``near_slices``. Returns what the port saw and what each manager got
    back."""
    rng = np.random.default_rng(seed)
    print(f"arbiter: {n} managers, seed {seed}, near_slices {near}")
    dut = AxiArbiter(n, addr_width=32, data_width=32, id_width=ID_BITS, write_depth=4,
                     near_slices=near)
    active = range(n) if active is None else active
    ms = [getattr(dut, f"s{i}") for i in range(n)]
    o = dut.m_axi

    def bursts(i, read):
        if i not in active:
            return []
        return [(i << 24 | k << 8 | read << 7, int(rng.integers(0, 4)), k % (1 << ID_BITS))
                for k in range(per)]

    aw = [bursts(i, 0) for i in range(n)]
    ar = [bursts(i, 1) for i in range(n)]
    # the write data each manager sends, beat by beat: (data, last)
    w = [[((i << 24) | (k << 8) | b, b == ln) for k, (_, ln, _) in enumerate(aw[i])
          for b in range(ln + 1)] for i in range(n)]
    port = {"aw": [], "ar": [], "w": [], "ar_at": []}
    got = {"r": [[] for _ in range(n)], "b": [[] for _ in range(n)]}
    nxt = {"aw": [0] * n, "ar": [0] * n, "w": [0] * n}
    r_due = []           # (rid, data, last) beats the port owes, in the order of its reads
    b_due = []           # bids the port owes
    w_done, b_owed = [0], [0]          # write bursts whose last beat passed; responses queued

    def want():
        return int(rng.random() >= stall)

    async def bench(ctx):
        cycle = 0
        done = False
        while not done:
            cycle += 1
            assert cycle < limit, f"the arbiter hangs or starves a manager (seed {seed})"
            # managers: a valid, once up, stays up until taken (AXI4)
            for i, p in enumerate(ms):
                for ch, todo in (("aw", aw[i]), ("ar", ar[i])):
                    k = nxt[ch][i]
                    up = ctx.get(getattr(p, f"{ch}valid"))
                    if k < len(todo) and (up or want()):
                        addr, ln, ident = todo[k]
                        ctx.set(getattr(p, f"{ch}valid"), 1)
                        ctx.set(getattr(p, f"{ch}addr"), addr)
                        ctx.set(getattr(p, f"{ch}len"), ln)
                        ctx.set(getattr(p, f"{ch}id"), ident)
                        ctx.set(getattr(p, f"{ch}size"), 2)
                        ctx.set(getattr(p, f"{ch}burst"), 1)
                    else:
                        ctx.set(getattr(p, f"{ch}valid"), 0)
                k = nxt["w"][i]
                if k < len(w[i]) and (ctx.get(p.wvalid) or want()):
                    ctx.set(p.wvalid, 1)
                    ctx.set(p.wdata, w[i][k][0])
                    ctx.set(p.wlast, int(w[i][k][1]))
                    ctx.set(p.wstrb, 0xF)
                else:
                    ctx.set(p.wvalid, 0)
                ctx.set(p.rready, want())
                ctx.set(p.bready, want())
            # the port
            ctx.set(o.awready, want())
            ctx.set(o.arready, want())
            ctx.set(o.wready, want())
            r_up = bool(r_due) and want()
            ctx.set(o.rvalid, int(r_up))
            if r_up:
                rid, data, last = r_due[0]
                ctx.set(o.rid, rid)
                ctx.set(o.rdata, data)
                ctx.set(o.rlast, int(last))
                ctx.set(o.rresp, 0)
            b_up = bool(b_due) and want()
            ctx.set(o.bvalid, int(b_up))
            if b_up:
                ctx.set(o.bid, b_due[0])
                ctx.set(o.bresp, 0)
            await ctx.delay(1e-9)
            # what crosses this cycle
            for i, p in enumerate(ms):
                for ch in ("aw", "ar"):
                    if ctx.get(getattr(p, f"{ch}valid")) and ctx.get(getattr(p, f"{ch}ready")):
                        nxt[ch][i] += 1
                if ctx.get(p.wvalid) and ctx.get(p.wready):
                    nxt["w"][i] += 1
                if ctx.get(p.rvalid) and ctx.get(p.rready):
                    got["r"][i].append((ctx.get(p.rid), ctx.get(p.rdata), ctx.get(p.rlast)))
                if ctx.get(p.bvalid) and ctx.get(p.bready):
                    got["b"][i].append(ctx.get(p.bid))
            if ctx.get(o.awvalid) and ctx.get(o.awready):
                port["aw"].append((ctx.get(o.awaddr), ctx.get(o.awlen), ctx.get(o.awid)))
            if ctx.get(o.arvalid) and ctx.get(o.arready):
                a, ln, ident = ctx.get(o.araddr), ctx.get(o.arlen), ctx.get(o.arid)
                port["ar"].append((a, ln, ident))
                port["ar_at"].append(cycle)
                r_due.extend((ident, a + b, b == ln) for b in range(ln + 1))
            if ctx.get(o.wvalid) and ctx.get(o.wready):
                port["w"].append((ctx.get(o.wdata), ctx.get(o.wlast)))
                w_done[0] += ctx.get(o.wlast)
            if r_up and ctx.get(o.rready):
                r_due.pop(0)
            if b_up and ctx.get(o.bready):
                b_due.pop(0)
            # a burst's write response, once its address and its last beat are both through:
            # the port sees the bursts' data in the order of their addresses
            while b_owed[0] < min(w_done[0], len(port["aw"])):
                b_due.append(port["aw"][b_owed[0]][2])
                b_owed[0] += 1
            await ctx.tick()
            done = all(len(got["r"][i]) == sum(ln + 1 for _, ln, _ in ar[i]) and
                       len(got["b"][i]) == len(aw[i]) for i in range(n))

    sim = Simulator(Checked(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return aw, ar, w, port, got


@pytest.mark.parametrize("n,seed,near", [(1, 0, False), (2, 1, False), (3, 2, False),
                                         (4, 3, False), (3, 4, False), (1, 7, True),
                                         (4, 8, True), (3, 9, True)])
def test_arbiter_passes_everything_once_and_in_order(n, seed, near):
    aw, ar, w, port, got = run_arbiter(n, seed, near=near)
    sb = max(1, (n - 1).bit_length())
    for ch, todo in (("aw", aw), ("ar", ar)):
        assert len(port[ch]) == sum(len(t) for t in todo)
        for i in range(n):
            # the manager's index in the ID's top bits, its own ID below, its order kept
            mine = [(a, ln, ident & ((1 << ID_BITS) - 1)) for a, ln, ident in port[ch]
                    if ident >> ID_BITS == i]
            assert mine == todo[i], (ch, i)
        assert all(ident >> ID_BITS < (1 << sb) for _, _, ident in port[ch])
    # write data: the bursts on the port in the order of the write addresses on the port
    want_w = []
    for a, ln, ident in port["aw"]:
        i, k = ident >> ID_BITS, (a >> 8) & 0xFFFF
        want_w += [((i << 24) | (k << 8) | b, int(b == ln)) for b in range(ln + 1)]
    assert port["w"] == want_w
    # responses back to their managers, with the manager's own IDs, in order
    for i in range(n):
        want_r = [(ident, a + b, int(b == ln)) for a, ln, ident in ar[i] for b in range(ln + 1)]
        assert got["r"][i] == want_r, i
        assert got["b"][i] == [ident for _, _, ident in aw[i]], i


@pytest.mark.parametrize("near", [False, True])
def test_arbiter_serves_a_lone_manager_an_address_a_cycle(near):
    """With no stalls and one manager of three issuing single-beat reads, the port sees an
    address in every cycle once the first is through: the grant (and the slices beside the
    managers) add latency, not gaps."""
    _, _, _, port, _ = run_arbiter(3, 5, per=16, stall=0.0, active=[1], near=near)
    at = port["ar_at"]
    assert len(at) == 16 and at[-1] - at[0] == 15, at


def test_arbiter_near_slices_add_a_cycle_of_latency():
    """The slices beside the managers are there: the first address reaches the port a cycle
    later with them than without."""
    first = [run_arbiter(3, 5, per=4, stall=0.0, active=[2], near=near)[3]["ar_at"][0]
             for near in (False, True)]
    assert first[1] == first[0] + 1, first


def test_arbiter_near_slices_need_the_arbiters_own():
    with pytest.raises(ValueError, match="near_slices"):
        AxiArbiter(2, slices=False, near_slices=True)


def test_arbiter_alternates_between_busy_managers():
    """With every manager always asking and the port always ready, the grants go round: no
    manager gets two addresses while another waits."""
    _, ar, _, port, _ = run_arbiter(3, 6, per=12, stall=0.0)
    order = [ident >> ID_BITS for _, _, ident in port["ar"]]
    # while all three still have reads left, each run of three grants names each once
    for k in range(0, 30, 3):
        assert sorted(order[k:k + 3]) == [0, 1, 2], order
