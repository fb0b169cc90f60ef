"""Nested loops over a descriptor's dimensions, one step per cycle, no multipliers and no wide
comparisons.

The DMA's mid end walks descriptors with this: each step is one index of the walked
dimensions, with its source and destination address and whether it has a source (every index
below its dimension's ``valid``). Level 0 is the innermost.

Each level keeps the addresses at the start of its current index and two down counters: the
indices left after this one, and the indices with a source from this one on; whether each is
at its end is a register of its own. A step advances the lowest level that has not reached its
last index; the levels below it restart from that level's new addresses. So the address
arithmetic is additions only, whatever the strides, and a new step leaves every cycle.

Ports
-----
Configuration (set it by the cycle of ``start`` and hold it while ``busy``): ``extent[k]``,
``valid[k]``, ``src_stride[k]``, ``dst_stride[k]``, ``src_base``, ``dst_base``. Extents must be
at least 1 (the front end checks).
``start`` (pulse, ignored while busy) begins a walk. Steps leave on ``o`` (valid/ready): ``src``,
``dst``, ``has_src``, ``first`` (index 0 at every level), ``last`` (final step).
``busy`` is high from ``start`` until the last step is taken. ``stop`` abandons a walk.

With ``ready_ahead=True`` the walker has an input ``ready_next`` more: what ``o.ready`` will be
in the next cycle (a register slice's ``ahead.i_ready``, when the output goes into one). Each
group of each level's registers (:attr:`Walker.GROUPS`) then loads on copies of its own of
that ready and of the walker's two state flags (:func:`hw.fabric.register_copies`), so no one
net of them reaches every level, nor one enable all of a level's registers.
"""

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fabric import look_ahead, register_copies


def step_layout(addr_width: int) -> data.StructLayout:
    return data.StructLayout({"src": addr_width, "dst": addr_width, "has_src": 1, "first": 1,
                              "last": 1})


class Walker(wiring.Component):
    #: the groups of a level's registers that load under enables of their own (from copies of
    #: their own with ``ready_ahead``): the source address, the destination address, the
    #: remaining count and its flags, the source count and its flags
    GROUPS = 4

    def __init__(self, *, levels: int, addr_width: int = 32, count_width: int = 32,
                 ready_ahead: bool = False):
        if not 1 <= levels <= 5:
            raise ValueError(f"levels must be 1 to 5, not {levels!r}")
        self.levels = levels
        self.addr_width = addr_width
        self.ready_ahead = ready_ahead
        super().__init__({
            **({"ready_next": In(1)} if ready_ahead else {}),
            "extent": In(count_width).array(levels), "valid": In(count_width).array(levels),
            "src_stride": In(addr_width).array(levels), "dst_stride": In(addr_width).array(levels),
            "src_base": In(addr_width), "dst_base": In(addr_width),
            "start": In(1), "stop": In(1), "busy": Out(1),
            "o": Out(stream.Signature(step_layout(addr_width))),
        })

    def elaborate(self, platform):
        m = Module()
        n, aw = self.levels, self.addr_width
        cw = len(self.extent[0])
        # per level: the indices left after this one, and the indices with a source from this
        # one on, as down counters with their flags held in registers, so that a step compares
        # nothing wide
        rem = [_held(cw, f"rem{k}") for k in range(n)]
        vleft = [_held(cw, f"vleft{k}") for k in range(n)]
        wrap = [_held(f"wrap{k}") for k in range(n)]       # rem == 0: the last index
        ok = [_held(f"ok{k}") for k in range(n)]           # vleft != 0: has a source
        # restart values, worked out before start
        em1 = [_held(cw, f"em1_{k}") for k in range(n)]
        one = [_held(f"one{k}") for k in range(n)]
        any_valid = [_held(f"any_valid{k}") for k in range(n)]
        sa = [_held(aw, f"sa{k}") for k in range(n)]
        da = [_held(aw, f"da{k}") for k in range(n)]
        busy = Signal()
        # prime: the cycle after start, in which the levels load their first index and cnt
        # its first value (no step leaves in it)
        prime = Signal()
        # busy's and prime's next values (set with them below), for their copies
        busy_next, prime_next = Signal(), Signal()
        # With ready_ahead each level takes ready, busy and prime from copies of its own (its loads
        # below, and its restart values' and strides' loads while idle), so no one net reaches every
        # level's enables. Each level's loads go further, to GROUPS groups of its registers, each
        # with copies of its own (ready_c[j][g]): one load net would reach a level's ~130
        # flip-flops.
        G = self.GROUPS
        if self.ready_ahead:
            # (a copy of ready is 0 after a reset, whatever the ready: busy's copies are too)
            def per_level(value, name):
                flat = register_copies(platform, m, value, n * G, name)
                return [flat[j * G:(j + 1) * G] for j in range(n)]
            # (the promise counts while a step is offered: the walker takes no step without)
            ready_c = per_level(look_ahead(platform, m, "o_ready", self.ready_next, self.o.ready,
                                           when=self.o.valid),
                                "o_ready_c")
            busy_c = per_level(busy_next, "busy_c")
            prime_c = per_level(prime_next, "prime_c")
        else:
            ready_c, busy_c, prime_c = ([[v] * G for _ in range(n)]
                                        for v in (self.o.ready, busy, prime))
        first = _held("first")
        m.d.comb += self.busy.eq(busy)
        m.d.comb += [
            self.o.payload.src.eq(sa[0]), self.o.payload.dst.eq(da[0]),
            self.o.payload.has_src.eq(_all(ok)), self.o.payload.first.eq(first),
            self.o.payload.last.eq(_all(wrap)),
        ]

        # the strides, copied into registers beside the walker's adders (they come from the
        # descriptor's registers, which may sit far away on the die): a copy taken in every cycle
        # the walker is idle, so it holds the value set by the cycle of start, before the first
        # step.
        sst = [_held(self.addr_width, f"sst{k}") for k in range(n)]
        dst = [_held(self.addr_width, f"dst{k}") for k in range(n)]
        for k in range(n):
            with m.If(~busy_c[k][0]):
                m.d.sync += sst[k].eq(self.src_stride[k])
            with m.If(~busy_c[k][1]):
                m.d.sync += dst[k].eq(self.dst_stride[k])
        # (named signals kept as wires, so Yosys does not share one adder between the levels
        # with the choice of level in front of it)
        up_s = [Signal(aw, name=f"up_s{k}", attrs={"keep": 1}) for k in range(n)]
        up_d = [Signal(aw, name=f"up_d{k}", attrs={"keep": 1}) for k in range(n)]
        m.d.comb += [*(up_s[k].eq(sa[k] + sst[k]) for k in range(n)),
                     *(up_d[k].eq(da[k] + dst[k]) for k in range(n))]
        # cnt[j]: level j is the one the next step counts up (the levels below it wrap, it does
        # not); one-hot, or none on the last step. A register, set as the wraps are: the
        # levels below it restart at its next addresses, an AND-OR over the levels above,
        # and no decode of the wraps lies between them and the address registers. The wrap
        # and the source flag a level takes when it counts (rem == 1, and ok & vleft != 1)
        # are registers too, worked out from the counters before the step.
        cnt = [_held(f"cnt{k}") for k in range(n)]
        wrap_after = [_held(f"wrap_after{k}") for k in range(n)]
        ok_after = [_held(f"ok_after{k}") for k in range(n)]
        two = [_held(f"two{k}") for k in range(n)]            # extent == 2
        ok_two = [_held(f"ok_two{k}") for k in range(n)]      # valid >= 2
        m.d.comb += self.o.valid.eq(busy & ~prime)

        def first_count(wraps):
            return [_all(wraps[:k]) & ~wraps[k] for k in range(n)]

        step = Signal()
        m.d.comb += step.eq(busy & ~prime & self.o.ready)
        # the restart values follow the configuration while idle (so their enable is one
        # register), and hold from start on
        for k in range(n):
            e, v = self.extent[k], self.valid[k]
            with m.If(~busy_c[k][2]):
                m.d.sync += [em1[k].eq(e - 1), one[k].eq(e == 1), two[k].eq(e == 2)]
            with m.If(~busy_c[k][3]):
                m.d.sync += [any_valid[k].eq(v != 0), ok_two[k].eq(v > 1)]
        # sel[j]: the next step loads level j (it counts, or a level above it does), a register set
        # with cnt: the lowest level that does not wrap is j or above, so every level below j wraps
        # and not every level does
        sel = [_held(f"sel{k}") for k in range(n)]

        def set_cnt(wraps):
            counts = first_count(wraps)
            return [*(c.eq(f) for c, f in zip(cnt, counts, strict=True)),
                    *(s.eq(_all(wraps[:k]) & ~_all(wraps)) for k, s in enumerate(sel))]

        m.d.comb += [busy_next.eq(busy), prime_next.eq(prime)]
        m.d.sync += [busy.eq(busy_next), prime.eq(prime_next)]
        with m.If(self.stop):
            m.d.comb += [busy_next.eq(0), prime_next.eq(0)]
        with m.Elif(~busy):
            # no level counts in the prime cycle: its addresses are the bases alone
            m.d.sync += [c.eq(0) for c in cnt]
            with m.If(self.start):
                m.d.comb += [busy_next.eq(1), prime_next.eq(1)]
                m.d.sync += first.eq(1)
        with m.Elif(prime):
            # every level starts as it restarts, so the wraps are the restart values'
            m.d.comb += prime_next.eq(0)
            m.d.sync += set_cnt(one)
        with m.Elif(step):
            m.d.sync += first.eq(0)
            with m.If(_all(wrap)):
                m.d.comb += busy_next.eq(0)
            # the wraps after this step, and the level the next step counts: level j restarts
            # when a level above it counts (sel[j + 1]), counts (cnt[j]), or else holds
            # (~sel[j]: the counting level is below it, or none is)
            restarts = [*sel[1:], 0]
            wrap_next = [(restarts[j] & one[j]) | (cnt[j] & wrap_after[j]) | (~sel[j] & wrap[j])
                         for j in range(n)]
            m.d.sync += set_cnt(wrap_next)
        # each level's counters, flags and addresses load in the prime cycle (the first index, from
        # the restart values and the bases) or on a step that counts or restarts the level, under
        # enables of their own, one per group: the addresses sa and da, the remaining count with its
        # wrap flags, the source count with its flags. So `start`, a late decision of the mid end,
        # reaches the three flags above and none of these, and the output's ready reaches each
        # group's ~33 flip-flops through one LUT of registers.
        for j in range(n):
            load, restart = [], []
            for g in range(G):
                ld, rs = Signal(name=f"load{j}_{g}"), Signal(name=f"restart{j}_{g}")
                m.d.comb += [ld.eq(prime_c[j][g] | (busy_c[j][g] & ready_c[j][g] & sel[j])),
                             rs.eq(prime_c[j][g] | ~cnt[j])]    # restarts (or starts)
                load.append(ld)
                restart.append(rs)
            # the next address, one AND-OR over registers' selects: the base in the prime cycle (cnt
            # is all 0 then), else the counting level's next address (level j's own, or the one
            # above it that it restarts at). Two LUTs after the adder; as nested choices (restart or
            # count, then prime or not, then which level) it would be four
            for g, base, up, addr in ((0, self.src_base, up_s, sa), (1, self.dst_base, up_d, da)):
                with m.If(load[g]):
                    m.d.sync += addr[j].eq(_any([base & prime_c[j][g].replicate(aw),
                                                 *(up[i] & cnt[i].replicate(aw)
                                                   for i in range(j, n))]))
            with m.If(load[2]):
                with m.If(restart[2]):
                    m.d.sync += [rem[j].eq(em1[j]), wrap[j].eq(one[j]),
                                 wrap_after[j].eq(two[j])]
                with m.Else():                              # counts up
                    m.d.sync += [rem[j].eq(rem[j] - 1), wrap[j].eq(wrap_after[j]),
                                 wrap_after[j].eq(rem[j] == 2)]
            with m.If(load[3]):
                with m.If(restart[3]):
                    m.d.sync += [vleft[j].eq(self.valid[j]), ok[j].eq(any_valid[j]),
                                 ok_after[j].eq(ok_two[j])]
                with m.Else():
                    m.d.sync += [vleft[j].eq(vleft[j] - ok[j]), ok[j].eq(ok_after[j]),
                                 ok_after[j].eq(ok_after[j] & Mux(ok[j], vleft[j] != 2,
                                                                  vleft[j] != 1))]
        return m


def _held(shape, name=None):
    """A walker register without reset (``_held(name)`` for one bit). All but ``busy`` and
    ``prime`` are loaded before they are read (at start, in the prime cycle, or while idle), so
    the engine's reset need reach two flip-flops of a walker, not a thousand."""
    if name is None:
        shape, name = 1, shape
    return Signal(shape, name=name, reset_less=True)


def _any(values):
    out = 0
    for v in values:
        out = out | v
    return out


def _all(sigs):
    out = 1
    for s in sigs:
        out = out & s
    return out
