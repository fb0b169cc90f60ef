"""The LUT unit's FP16 datapath: SDP's floating-point pipeline, ``lanes`` samples a cycle.

:class:`FpLutPipeline` has the ports of the integer datapath (:class:`~.pipeline.LutPipeline`,
whose base class it shares) and computes what :func:`model.nvdla.lut.evaluate` computes for a
configuration of precision ``fp16`` (docs/lut.md, "The FP16 pipeline"): FP32 samples in, FP32
results out, the tables' FP16 entries, the interpolation in NVDLA's 17-bit float. Its operations
are those of :mod:`hw.lut.fparith`, with a register at each of their cut points.

Each table, for each lane, in order (the cycles are :data:`SCHEDULE`'s):

1. ``x - START`` in FP32. A negative, zero or NaN difference is an underflow.
2. The index and fraction: the difference's exponent and mantissa (the LE table's
   exponential mode), or the difference over 2^select (linear).
3. The state, the entry index (0 below the table, the last entry above it) and the banks'
   addresses.
4. The table read; beside it, ``x - reference`` in FP32 (``START + 2^offset`` below an
   exponential table, START below a linear one, END above), narrowed to FP17, and the weights
   ``1 - fraction`` and ``fraction`` in FP17.
5. Two FP17 products and their FP17 sum. A hit multiplies the entries (widened to FP17) by the
   weights; a miss multiplies the edge entry by one and ``x - reference`` by the slope's
   scale, so one pair of multipliers and one adder serve both.
6. The sum widened to FP32.

Timing
------
One transfer per cycle in and out, for every lane count; a result leaves :data:`FP_LATENCY`
cycles after its sample was accepted when the output is not stalled, and backpressure stalls
the whole pipeline, as in the integer datapath.
"""

from amaranth import Cat, Const, Mux, Signal, Value

from ...model.nvdla.nvfloat import FP16, FP17, FP32
from ..fabric import registered_product
from . import fparith
from .arith import FRAC_BITS, HIT, OFLOW, UFLOW
from .pipeline import PipelineBase

__all__ = ["FpLutPipeline", "FP_STAGES", "FP_LATENCY", "SCHEDULE", "LATENCIES", "Stages",
           "derive_fp_config"]

#: the fraction's bits (SDP's)
FB = FRAC_BITS["sdp"]
#: 1.0 in FP17
ONE17 = FP17.bias << FP17.mant


class Stages:
    """The registers at an operation's cut points (its ``stage`` callable, :mod:`.fparith`):
    each call registers the values given (held while ``enable`` is low; ``enable=None``:
    every cycle) and counts a stage in :attr:`depth`."""

    def __init__(self, m, enable, name):
        self.m, self.enable, self.name, self.depth = m, enable, name, 0

    def __call__(self, *values):
        self.depth += 1
        out = []
        for k, v in enumerate(values):
            if isinstance(v, int):
                out.append(v)
                continue
            v = Value.cast(v)
            r = Signal(v.shape(), name=f"{self.name}{self.depth}_{k}")
            if self.enable is None:
                self.m.d.sync += r.eq(v)
            else:
                with self.m.If(self.enable):
                    self.m.d.sync += r.eq(v)
            out.append(r)
        return tuple(out)


def _cuts(op, *args, **kw):
    """How many cut points ``op`` has (its result one register after the last)."""
    count = 0

    def stage(*values):
        nonlocal count
        count += 1
        return values

    op(*args, stage=stage, **kw)
    return count


def _latencies():
    """Each operation's cycles, from its operands to its registered result: its cut points
    plus the register on its result."""
    s32, s17 = Signal(32), Signal(17)
    return {
        "sub32": _cuts(fparith.fp_sub, s32, s32, FP32) + 1,
        "index": _cuts(fparith.fp_to_index, s32, Signal(8), 9, FB) + 1,
        "narrow": _cuts(fparith.fp_convert, s32, FP32, FP17) + 1,
        "weight": _cuts(fparith.fp_from_fraction, Signal(FB), FB, FP17) + 1,
        "mul": _cuts(fparith.fp_mul, s17, s17, FP17, multiply=lambda a, b: a * b) + 1,
        "add17": _cuts(fparith.fp_add, s17, s17, FP17) + 1,
    }


#: each operation's cycles, its operands to its registered result
LATENCIES = _latencies()
#: from the addresses' registers: the table read (the memory's register, the entries in
#: order, widened to FP17) and the weights (the complement, then the conversion)
READ, WEIGHTS = 3, 1 + LATENCIES["weight"]


def _schedule():
    """The cycle, counted from the input register, at which each step's inputs are
    registered."""
    lat = LATENCIES
    at = {"difference": lat["sub32"]}
    at["state"] = at["difference"] + lat["index"]
    at["address"] = at["state"] + 1
    # the run x - reference, narrowed, is the longest branch from the addresses: the table
    # read and the weights are delayed to meet it
    at["operands"] = at["address"] + max(lat["sub32"] + lat["narrow"], READ, WEIGHTS)
    at["sum"] = at["operands"] + lat["mul"]
    at["widen"] = at["sum"] + lat["add17"]
    at["end"] = at["widen"] + 1
    return at


#: the cycle (after the input register) at which each step's inputs are ready, by step
SCHEDULE = _schedule()
#: stages between the input register and the output register
FP_STAGES = SCHEDULE["end"]
#: cycles from a sample's acceptance to its result's leaving, the output not stalled
FP_LATENCY = FP_STAGES + 2
#: cycles from a register write until :func:`derive_fp_config`'s values follow it
CONFIG_DELAY = LATENCIES["sub32"] + 2
# a run's first sample reaches the addresses' step at least this long after the last register
# write before the run's start (which is a write of its own)
assert CONFIG_DELAY <= SCHEDULE["address"], "the derived configuration would come too late"


def _pow2_fp32(e):
    """2^e as an FP32 bit pattern, for a signed 8-bit ``e`` (2^-127 and 2^-128 denormal)."""
    return Mux(e >= -126, Cat(Const(0, FP32.mant), (e + FP32.bias)[:8], Const(0, 1)),
               Mux(e == -127, 1 << 22, 1 << 21))


def derive_fp_config(m, c, t):
    """What table ``t``'s FP16 configuration implies, worked out once for every lane: the
    underflow reference (``START + 2^offset`` in FP32 for an exponential table, through the
    adder's registers, ready :data:`CONFIG_DELAY` cycles after a register write) and the
    slope scales in FP17. The registers only change while the unit is idle, and a sample
    reaches the step that reads these (:data:`SCHEDULE`'s ``address``) only after that: the
    write of ``ctrl.start``, the input register, then the stages before it. Returns ``c`` with
    them added."""
    stages = Stages(m, None, f"refu_{t}_")
    # the adder's operands registered first: the power of two is an add and a choice deep
    start, bias = stages(c["start"], _pow2_fp32(c["offset"]))
    biased = fparith.fp_add(start, bias, FP32, stage=stages)
    ref_under = Signal(32, name=f"fp_refu_{t}")
    m.d.sync += ref_under.eq(Mux(c["exp"], biased, start))
    scales = {}
    for side in ("uscale", "oscale"):
        r = Signal(17, name=f"fp_{side}_{t}")
        m.d.sync += r.eq(fparith.fp_convert(c[side], FP16, FP17))
        scales[side] = r
    return {**c, "ref_under": ref_under, "uscale17": scales["uscale"],
            "oscale17": scales["oscale"]}


class FpLutPipeline(PipelineBase):
    """The FP16 datapath (SDP's floating-point pipeline); ports and parameters as
    :class:`~.pipeline.PipelineBase`'s. The configuration's fields for each table: ``start``,
    ``end`` (FP32 bit patterns), ``select``, ``offset``, ``exp``, and from
    :func:`derive_fp_config` ``ref_under``, ``uscale17`` and ``oscale17``."""

    stages = FP_STAGES

    def __init__(self, *, lanes, flavor, cfg_layout, entries):
        if flavor != "sdp":
            raise ValueError(f"the FP16 pipeline is SDP's, not {flavor.upper()}'s")
        super().__init__(lanes=lanes, flavor=flavor, cfg_layout=cfg_layout, entries=entries)

    def _table_lane(self, m, advance, c, t, lane, x0, platform):
        """One table's steps for one lane (the module's docstring); returns (the FP32 result,
        the state), registered at :data:`FP_STAGES`."""
        name = f"{t}{lane}"
        at = SCHEDULE
        n = c["n"]

        def op(label, fn, *args, **kw):
            """``fn`` with registers at its cut points and on its result."""
            stages = Stages(m, advance, f"{label}_{name}_")
            result = fn(*args, stage=stages, **kw)
            return stages(*result) if isinstance(result, tuple) else stages(result)[0]

        def delay(value, cycles, label):
            for k in range(cycles):
                r = Signal(Value.cast(value).shape(), name=f"{label}_{name}_d{k}")
                with m.If(advance):
                    m.d.sync += r.eq(value)
                value = r
            return value

        def multiply(label):
            def product(a, b):
                return registered_product(platform, m, a, b, advance, f"{label}_{name}",
                                          len(a) + len(b))
            return product

        # 1. the difference from START
        d = op("dif", fparith.fp_sub, x0, c["start"], FP32)
        x1 = delay(x0, at["difference"], "x")

        # 2. index and fraction: exponential (LE) and linear, side by side
        sign, expo, mant = d[31], d[23:31], d[:23]
        under1 = sign | (d[:31] == 0) | ((expo == 0xFF) & (mant != 0))
        lin_index, lin_frac = op("idx", fparith.fp_to_index, d, c["select"], 9, FB)
        ahead = at["state"] - at["difference"]
        under2 = delay(under1, ahead, "ua")
        exp_index = delay(expo - FP32.bias - c["offset"], ahead, "ie")
        exp_frac = delay(mant, ahead, "fe")
        x2 = delay(x1, ahead, "x2")

        # 3. state, entry index (0 below, n above), the banks' addresses
        exp = c["exp"]
        under = under2 | (exp & (exp_index < 0))
        index = Mux(exp, exp_index, lin_index)
        over = ~under & (index >= n)
        entry = Signal(9, name=f"entry_{name}")
        m.d.comb += entry.eq(Mux(under, 0, Mux(over, n, index[:9])))
        frac = Mux(exp, Cat(Const(0, FB - FP32.mant), exp_frac), lin_frac)
        (ev_a, od_a, odd_a, state_a, frac_a, x_a) = Stages(m, advance, f"adr_{name}_")(
            (entry + 1)[1:10], entry[1:], entry[0],
            Mux(under, UFLOW, Mux(over, OFLOW, HIT)), frac, x2)
        under_a = state_a == UFLOW

        # 4a. the table read: the memory's register, then the entries in order, widened
        ev = getattr(self, f"{t}_even")[lane]
        od = getattr(self, f"{t}_odd")[lane]
        m.d.comb += [ev.addr.eq(ev_a), od.addr.eq(od_a), ev.en.eq(advance), od.en.eq(advance)]
        odd_r = delay(odd_a, 1, "odd")
        y0, y1 = Stages(m, advance, f"ent_{name}_")(Mux(odd_r, od.data, ev.data),
                                                    Mux(odd_r, ev.data, od.data))
        y0w, y1w = Stages(m, advance, f"wid_{name}_")(fparith.fp_convert(y0, FP16, FP17),
                                                      fparith.fp_convert(y1, FP16, FP17))
        # 4b. the run from the reference, narrowed to FP17
        ref = Mux(under_a, c["ref_under"], c["end"])
        run = op("run", fparith.fp_sub, x_a, ref, FP32)
        run17 = op("nar", fparith.fp_convert, run, FP32, FP17)
        # 4c. the weights 1 - fraction and fraction (1 - 0 is one: no fraction of FB bits)
        comp, zero_frac, frac_c = Stages(m, advance, f"cmp_{name}_")(
            ((1 << FB) - frac_a)[:FB], frac_a == 0, frac_a)
        w0 = op("w0", fparith.fp_from_fraction, comp, FB, FP17)
        w1 = op("w1", fparith.fp_from_fraction, frac_c, FB, FP17)
        zero_w = delay(zero_frac, LATENCIES["weight"], "zw")
        wait = at["operands"] - at["address"]
        w0 = delay(Mux(zero_w, ONE17, w0), wait - WEIGHTS, "w0")
        w1 = delay(w1, wait - WEIGHTS, "w1")
        y0w = delay(y0w, wait - READ, "y0")
        y1w = delay(y1w, wait - READ, "y1")
        run17 = delay(run17, wait - LATENCIES["sub32"] - LATENCIES["narrow"], "run")
        hit = delay(state_a == HIT, wait, "hit")
        state_o = delay(state_a, wait, "st")
        scale = delay(Mux(under_a, c["uscale17"], c["oscale17"]), wait, "sc")

        # 5. two products and their sum: a hit's weighted entries, or a miss's edge entry
        # (entry 0 or n: the one read) and slope term
        p0 = op("p0", fparith.fp_mul, Mux(hit, w0, ONE17), y0w, FP17,
                multiply=multiply("m0"))
        p1 = op("p1", fparith.fp_mul, Mux(hit, w1, run17), Mux(hit, y1w, scale), FP17,
                multiply=multiply("m1"))
        state_s = delay(state_o, at["sum"] - at["operands"], "sts")
        total = op("sum", fparith.fp_add, p0, p1, FP17)
        state_w = delay(state_s, at["widen"] - at["sum"], "stw")

        # 6. to FP32
        out, state = Stages(m, advance, f"out_{name}_")(
            fparith.fp_convert(total, FP17, FP32), state_w)
        return out, state
