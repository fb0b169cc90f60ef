"""Choose tables and registers for SDP's FP16 LUT pipeline, and measure them.

The FP16 pipeline (``LutConfig(precision="fp16")``, docs/lut.md) takes FP32 samples and gives
FP32 results; its tables hold FP16 entries. A fit is judged over every finite FP16 input in the
function's domain (FP16 data widens to FP32 exactly), in two terms:

- **FP16 ULP**: the error over the spacing of FP16 numbers at the true value (2^-24 below
  FP16's smallest normal, 2^-14), the unit that matters once the result is stored as FP16;
- **relative**: the error over the true value's magnitude, at least 2^-14 (below it, FP16 has
  no relative precision to speak of).

Results and true values are clipped to FP16's range (+-65504), as SDP's output conversion
saturates.

The search tries, for the raw table, linear coverings of the function's active range (where it
is not within a quarter ULP of its far values) at the finest steps that cover it; then a
density table, either nested inside the raw one (around the raw table's worst errors, or
around 0, where an input's distance from a far START would lose its low bits) or beside it
(each table covering part of the range at its own step, the second reaching the range's end
or stopping a step short of it); or, for functions over a range of many octaves
(``exp_raw``), an exponential LE table from the domain's start with a linear LO table where
it is worst. Entries are each segment's chord shifted by half its signed deviation from f
(minimax), rounded to FP16. The four best arrangements are then tried at eight node phases,
each edge's slope flat or f's derivative, and every entry moved by up to two FP16 steps where
that lowers the worst error of the inputs reading it. Every candidate is measured through the
bit-exact model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .lut import LE, LE_ENTRIES, LO, LO_ENTRIES, LutConfig, evaluate
from .lut_fit import (
    choose_slopes,
    layout_priorities,
    mode_registers,
    pyplot_and_function,
    resolve_function,
)

__all__ = ["FP16_MAX", "FpErrorReport", "FpGeom", "FpFitResult", "finite_fp16", "defined_fp16",
           "ulp16", "measure_fp16", "fit_fp16", "nvdla_baseline_fp16", "NVDLA_FP16_TABLES",
           "plot_fp16"]

FP16_MAX = 65504.0
SMALLEST_NORMAL = 2.0 ** -14
# START/END of a table that is never hit: every finite input is below it
PARKED = float(np.finfo(np.float32).max)

# NVDLA's compiler's FP16 tables: one 257-entry LO table (min, index select), f sampled at its
# nodes, flat outside, LE unused
NVDLA_FP16_TABLES = {"sigmoid": (-16.0, -3), "tanh": (-4.0, -5)}


def finite_fp16(domain=(-math.inf, math.inf)) -> np.ndarray:
    """Every finite FP16 number in ``domain`` (both ends included), ascending, as float32."""
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = np.unique(every[np.isfinite(every)].astype(np.float32))     # one zero
    return x[(x >= domain[0]) & (x <= domain[1])]


def defined_fp16(f, domain) -> np.ndarray:
    """The finite FP16 inputs in ``domain`` where f is finite (rsqrt leaves out 0)."""
    x = finite_fp16(domain)
    with np.errstate(all="ignore"):
        y = np.asarray(f(x.astype(np.float64)), np.float64)
    return x[np.isfinite(y)]


def ulp16(y) -> np.ndarray:
    """The spacing of FP16 numbers at ``y``'s magnitude (2^-24 below the smallest normal)."""
    a = np.abs(np.asarray(y, np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.maximum(a, SMALLEST_NORMAL)))
    return 2.0 ** (np.minimum(e, 15) - 10)


@dataclass
class FpErrorReport:
    """Errors of a configuration against f over every finite FP16 input in its domain."""

    max_ulp: float
    mean_ulp: float
    max_rel: float
    mean_rel: float
    worst_x: float          # the input where the error in ULP is largest
    samples: int

    def row(self) -> dict:
        return {"max error (FP16 ULP)": round(self.max_ulp, 3),
                "mean error (FP16 ULP)": round(self.mean_ulp, 4),
                "max relative error": self.max_rel, "mean relative error": self.mean_rel,
                "worst x": self.worst_x, "samples": self.samples}

    def key(self):
        return (self.max_ulp, self.mean_ulp)


def _target(f, x, domain) -> np.ndarray:
    xr = np.clip(np.asarray(x, np.float64), domain[0], domain[1])
    with np.errstate(all="ignore"):
        y = np.asarray(f(xr), np.float64)
    return np.clip(np.nan_to_num(y, nan=0.0, posinf=FP16_MAX, neginf=-FP16_MAX), -FP16_MAX,
                   FP16_MAX)


def measure_fp16(cfg: LutConfig, f, domain=(-math.inf, math.inf), x=None) -> FpErrorReport:
    """Run every finite FP16 input in ``domain`` where f is finite (or ``x``) through ``cfg``
    and compare with f."""
    x = defined_fp16(f, domain) if x is None else x
    out = evaluate(x, cfg).out.astype(np.float64)
    want = _target(f, x, domain)
    err = np.abs(np.clip(out, -FP16_MAX, FP16_MAX) - want)
    err[~np.isfinite(err)] = np.inf
    in_ulp = err / ulp16(want)
    rel = err / np.maximum(np.abs(want), SMALLEST_NORMAL)
    i = int(np.argmax(in_ulp))
    return FpErrorReport(float(in_ulp[i]), float(np.mean(in_ulp)), float(np.max(rel)),
                         float(np.mean(rel)), float(x[i]), int(x.size))


@dataclass(frozen=True)
class FpGeom:
    """Where one table's nodes are, in input units: ``"linear"``, ``start + i * 2^select``;
    ``"exp"``, ``start + 2^(offset + i)``; ``"parked"``, never hit."""

    mode: str
    start: float = PARKED
    select: int = 0
    offset: int = 0

    def nodes(self, n: int) -> np.ndarray:
        i = np.arange(n, dtype=np.float64)
        if self.mode == "exp":
            return self.start + 2.0 ** (self.offset + i)
        return self.start + i * 2.0 ** self.select

    def end(self, n: int) -> float:
        if self.mode == "parked":
            return PARKED
        return float(min(self.nodes(n)[-1], PARKED))

    def __str__(self):
        if self.mode == "parked":
            return "unused"
        if self.mode == "exp":
            return f"exp from {self.start:g}, octaves 2^{self.offset}..2^{self.offset + 64}"
        return f"linear from {self.start:g}, step 2^{self.select}"


def _entries(f, nodes, domain, per_segment: int = 64) -> np.ndarray:
    """Minimax entries for ``nodes``, as FP16."""
    v = _target(f, nodes, domain)
    t = np.linspace(0.0, 1.0, per_segment)
    x0, x1 = nodes[:-1, None], nodes[1:, None]
    g = _target(f, x0 + (x1 - x0) * t, domain) - (v[:-1, None] + (v[1:, None] - v[:-1, None]) * t)
    shift_seg = (g.max(axis=1) + g.min(axis=1)) / 2
    shift = np.zeros_like(v)
    shift[:-1] += shift_seg
    shift[1:] += shift_seg
    shift[1:-1] /= 2
    return np.clip(v + shift, -FP16_MAX, FP16_MAX).astype(np.float16)


def _derivative(f, x, domain) -> float:
    h = max(abs(x) * 1e-6, 1e-9)
    a, b = _target(f, np.array([x - h, x + h]), domain)
    k = (b - a) / (2 * h)
    return float(np.clip(k, -FP16_MAX, FP16_MAX)) if math.isfinite(k) else 0.0


def build_fp16(f, le: FpGeom, lo: FpGeom, priorities: dict, domain,
               slopes: dict | None = None) -> LutConfig:
    """A configuration for given geometries; ``slopes`` maps "le_uflow" etc. to True (f's
    derivative at that edge) or False (flat, the default)."""
    if lo.mode == "exp":
        raise ValueError("the LO table has linear mode only")
    slopes = slopes or {}
    regs: dict = {"precision": "fp16"}
    for name, g, n in (("le", le, LE_ENTRIES), ("lo", lo, LO_ENTRIES)):
        if g.mode == "parked":
            regs[f"{name}_table"] = np.zeros(n, np.float16)
            regs[f"{name}_start"] = regs[f"{name}_end"] = PARKED
            regs[f"{name}_uflow_scale"] = regs[f"{name}_oflow_scale"] = 0.0
            continue
        nodes = g.nodes(n)
        regs[f"{name}_table"] = _entries(f, nodes, domain)
        regs[f"{name}_start"], regs[f"{name}_end"] = float(g.start), g.end(n)
        for side, xe in (("uflow", nodes[0]), ("oflow", nodes[-1])):
            regs[f"{name}_{side}_scale"] = (_derivative(f, float(xe), domain)
                                            if slopes.get(f"{name}_{side}") else 0.0)
    return LutConfig(**regs, **mode_registers(le, lo, priorities))


@dataclass
class FpFitResult:
    config: LutConfig
    layout: str
    le: FpGeom
    lo: FpGeom
    report: FpErrorReport
    domain: tuple


def _active_range(f, x, domain) -> tuple[float, float]:
    """The inputs outside of which f stays within a quarter ULP of its value at the far ends."""
    y = _target(f, x, domain)
    u = ulp16(y) / 4
    active = (np.abs(y - y[0]) > u) & (np.abs(y - y[-1]) > u)
    if not active.any():
        return float(x[0]), float(x[-1])
    i = np.flatnonzero(active)
    return float(x[max(i[0] - 1, 0)]), float(x[min(i[-1] + 1, len(x) - 1)])


def _aligned(v: float, select: int) -> float:
    """``v`` rounded down to a multiple of 2^select (an FP32 number for the ranges used)."""
    step = 2.0 ** select
    return math.floor(v / step) * step


def _coarse(x: np.ndarray, count: int = 12000) -> np.ndarray:
    """A subset of the inputs for the search: every one near the active range's ends and
    around 0 (where FP16 is densest) stays, the rest thinned out evenly."""
    if x.size <= count:
        return x
    keep = np.zeros(x.size, bool)
    keep[np.linspace(0, x.size - 1, count).astype(int)] = True
    keep[np.abs(x) < 2.0 ** -6] = True
    return x[keep]


def fit_fp16(f, *, domain=None, exp_raw: bool = False,
             progress: Callable[[str], None] | None = None) -> FpFitResult:
    """Fit the FP16 pipeline's tables to ``f``.

    Parameters
    ----------
    f : str or callable
        ``sigmoid``, ``tanh``, ``exp``, ``rsqrt``, ``lrn`` (its default parameters), or a
        numpy-vectorised callable.
    domain : (float, float), optional
        Where f is defined and the error is measured (default: the function's own, else every
        finite FP16 number).
    exp_raw : bool
        The raw table is an exponential LE table from the domain's start (for a function over
        many octaves, such as rsqrt or LRN); needs a domain bounded below.
    progress : callable, optional
        Called with a line of text as the search advances.
    """
    say = progress or (lambda s: None)
    if isinstance(f, str):
        f, dmin, dmax = resolve_function(f)
        domain = domain or (dmin, dmax)
    domain = tuple(domain or (-math.inf, math.inf))
    x_all = defined_fp16(f, domain)
    if x_all.size < 2:
        raise ValueError(f"the domain {domain} holds fewer than two FP16 numbers")
    if exp_raw and not math.isfinite(domain[0]):
        raise ValueError("an exponential raw table needs a domain bounded below: its octaves "
                         "count from START")
    a, b = _active_range(f, x_all, domain)
    say(f"active range [{a:.6g}, {b:.6g}] over {x_all.size:,} FP16 inputs")
    x = _coarse(x_all)
    best: list = []

    def consider(layout, le, lo, prio):
        cfg = build_fp16(f, le, lo, prio, domain)
        best.append((layout, le, lo, prio, measure_fp16(cfg, f, domain, x)))

    def ranked():
        """The arrangements tried so far, the best last (of equals, the one tried last)."""
        return sorted(best, key=lambda c: c[4].key(), reverse=True)

    raw_prio = layout_priorities(LO, "raw")
    span = max(b - a, 2.0 ** -24)
    finest = math.ceil(math.log2(span / (LO_ENTRIES - 1)))
    if exp_raw:
        for off in range(-30, 12):
            consider("raw", FpGeom("exp", domain[0], offset=off), FpGeom("parked"),
                     layout_priorities(LE, "raw"))
    else:
        for sel in range(finest, finest + 3):
            cover = (LO_ENTRIES - 1) * 2.0 ** sel
            for start in {_aligned(a, sel), _aligned((a + b - cover) / 2, sel),
                          _aligned(b - cover, sel) + 2.0 ** sel}:
                consider("raw", FpGeom("parked"), FpGeom("linear", max(start, domain[0]), sel),
                         raw_prio)
    _, raw_le, raw_lo, prio, rep = ranked()[-1]
    raw = raw_le if exp_raw else raw_lo
    say(f"raw table: {raw}: max error {rep.max_ulp:.3f} ULP")

    # nested: a density table where the raw one is worst, or around 0
    cfg = build_fp16(f, raw_le, raw_lo, prio, domain)
    out = evaluate(x, cfg).out.astype(np.float64)
    want = _target(f, x, domain)
    err = np.abs(out - want) / ulp16(want)
    peaks = [float(x[i]) for i in np.argsort(-err)[:40]]
    centres = sorted({0.0, *peaks[:1], *peaks[::8]})
    if exp_raw:
        nest = layout_priorities(LE, "nested")
        for sel in range(finest - 12, finest + 2):
            half = (LO_ENTRIES - 1) / 2 * 2.0 ** sel
            for c in centres:
                start = max(_aligned(c - half, sel), domain[0])
                consider("nested", raw_le, FpGeom("linear", start, sel), nest)
    else:
        nest = layout_priorities(LO, "nested")
        for sel in range(raw.select - 14, raw.select):
            half = (LE_ENTRIES - 1) / 2 * 2.0 ** sel
            for c in centres:
                start = max(_aligned(c - half, sel), domain[0])
                consider("nested", FpGeom("linear", start, sel), raw_lo, nest)
        # side by side: one table from near the start of the active range at its own step,
        # the other from its end on, reaching the active range's end or falling a step short
        # of it (where a flat tail costs less than a coarser step)
        for first, second in ((LO, LE), (LE, LO)):
            n_first = LO_ENTRIES if first == LO else LE_ENTRIES
            n_second = LE_ENTRIES if first == LO else LO_ENTRIES
            prio = layout_priorities(second, "split", first=first)
            for s1 in range(finest - 3, finest + 3):
                for late in range(4):
                    start = _aligned(a, s1) + late * (n_first - 1) / 16 * 2.0 ** s1
                    g1 = FpGeom("linear", max(start, domain[0]), s1)
                    join = g1.end(n_first)
                    if join >= b:
                        continue
                    s2 = math.ceil(math.log2((b - join) / (n_second - 1)))
                    for s in (s2 - 1, s2, s2 + 1):
                        g2 = FpGeom("linear", join, s)
                        le, lo = (g1, g2) if first == LE else (g2, g1)
                        consider("split", le, lo, prio)
    layout, le, lo, prio, rep = ranked()[-1]
    say(f"{layout}: LE {le}, LO {lo}: max error {rep.max_ulp:.3f} ULP")

    # The four best arrangements go on. Where the nodes fall against FP16's binades moves
    # the worst error, so each is tried shifted by eighths of its finer step, with every
    # edge's slope flat or f's derivative (whichever measures better) and its entries refined
    # once over every input; the best is refined further.
    tried = []
    finalists = ranked()[-4:]
    say(f"refining the {len(finalists)} best over all {x_all.size:,} inputs, at 8 node "
        f"phases each ...")
    for layout, le, lo, prio, _ in finalists:
        slopes, _, _ = choose_slopes(
            lambda s, le=le, lo=lo, prio=prio: build_fp16(f, le, lo, prio, domain, s),
            lambda c: measure_fp16(c, f, domain, x).key())
        if le.mode == "exp":
            phases = [0.0]
        else:
            finer = min(g.select for g in (le, lo) if g.mode == "linear")
            phases = [-k * 2.0 ** (finer - 3) for k in range(8)]
        for shift in phases:
            moved = [FpGeom(g.mode, g.start + shift if g.mode == "linear" else g.start,
                            g.select, g.offset) for g in (le, lo)]
            c = _refine(build_fp16(f, *moved, prio, domain, slopes), f, domain, x_all,
                        rounds=1)
            tried.append((measure_fp16(c, f, domain, x_all).key(), layout, c, moved))
    (_, layout, cfg, (le, lo)) = min(tried, key=lambda t: t[0])
    cfg = _refine(cfg, f, domain, x_all, rounds=2)
    rep = measure_fp16(cfg, f, domain, x_all)
    say(f"final: max error {rep.max_ulp:.3f} ULP over {rep.samples:,} FP16 inputs")
    return FpFitResult(cfg, layout, le, lo, rep, domain)


def _nudged(t: np.ndarray, steps: int) -> np.ndarray:
    """FP16 values ``steps`` representable numbers up (negative: down) from ``t``."""
    t = t.copy()
    toward = np.float16(np.inf if steps > 0 else -np.inf)
    with np.errstate(over="ignore"):
        for _ in range(abs(steps)):
            t = np.nextafter(t, toward)
    return np.clip(t, -FP16_MAX, FP16_MAX).astype(np.float16)


def _refine(cfg: LutConfig, f, domain, x, rounds: int = 3, reach: int = 2) -> LutConfig:
    """Move each entry by up to ``reach`` FP16 steps where that lowers the worst error (in
    ULP) of the inputs that read it, measured through the bit-exact model. Entries of one
    parity move together: an input reads two neighbouring entries, of different parities, so
    their choices do not interact."""
    from .lut import HIT, OFLOW, UFLOW, _index_fp

    want = _target(f, x, domain)
    unit = ulp16(want)
    base = evaluate(x, cfg)
    readers = {}
    for table, name, n in ((LE, "le", LE_ENTRIES), (LO, "lo", LO_ENTRIES)):
        if getattr(cfg, f"{name}_start") == int(np.float32(PARKED).view(np.int32)):
            continue
        mine = base.chosen == table
        index, _, state = _index_fp(x.view(np.uint32).astype(np.int64), table, cfg)
        first = np.where(state == UFLOW, 0, np.where(state == OFLOW, n - 1, index))
        second = np.where(state == HIT, index + 1, first)
        readers[name] = (mine, first, second, n)
    for _ in range(rounds):
        for name, (mine, first, second, n) in readers.items():
            for parity in (0, 1):
                table = getattr(cfg, f"{name}_table").astype(np.int16).view(np.float16)
                moving = np.arange(n) % 2 == parity
                # the entry of the moving parity each input reads (one of its two)
                node = np.where(first % 2 == parity, first, second)
                worst = []
                trials = list(range(-reach, reach + 1))
                for s in trials:
                    t = np.where(moving, _nudged(table, s), table).astype(np.float16)
                    out = evaluate(x, cfg.replace(**{f"{name}_table": t})).out
                    err = np.abs(np.clip(out.astype(np.float64), -FP16_MAX, FP16_MAX) - want)
                    err = err / unit
                    # every input's worst as the entry moves; other inputs do not change
                    per_node = np.zeros(n)
                    np.maximum.at(per_node, node[mine], err[mine])
                    worst.append(per_node)
                choice = np.array(trials)[np.argmin(np.stack(worst), axis=0)]
                t = table.copy()
                for s in set(choice.tolist()) - {0}:
                    pick = moving & (choice == s)
                    t[pick] = _nudged(table, s)[pick]
                cfg = cfg.replace(**{f"{name}_table": t})
    return cfg


def nvdla_baseline_fp16(name: str) -> FpFitResult:
    """NVDLA's compiler's FP16 table for ``name`` (sigmoid or tanh), measured the same way."""
    if name not in NVDLA_FP16_TABLES:
        raise ValueError(f"no NVDLA FP16 table for {name!r} (have: "
                         f"{', '.join(NVDLA_FP16_TABLES)})")
    f, dmin, dmax = resolve_function(name)
    start, sel = NVDLA_FP16_TABLES[name]
    lo = FpGeom("linear", start, sel)
    nodes = lo.nodes(LO_ENTRIES)
    cfg = LutConfig(precision="fp16", lo_table=_target(f, nodes, (dmin, dmax)).astype(np.float16),
                    lo_start=start, lo_end=float(nodes[-1]), lo_index_select=sel,
                    le_start=PARKED, le_end=PARKED, uflow_priority=LO, oflow_priority=LO,
                    hybrid_priority=LO)
    rep = measure_fp16(cfg, f, (dmin, dmax))
    return FpFitResult(cfg, "nvdla", FpGeom("parked"), lo, rep, (dmin, dmax))


def plot_fp16(result: FpFitResult, f, path, baseline: FpFitResult | None = None) -> None:
    """f, the LUT's output and the error in FP16 ULP over every FP16 input where a table is,
    with each table's coverage, to a PNG."""
    plt, f = pyplot_and_function(f)
    spans = [(g.start, g.end(n), name) for g, n, name in (
        (result.le, LE_ENTRIES, "LE"), (result.lo, LO_ENTRIES, "LO")) if g.mode != "parked"]
    lo = min(s[0] for s in spans)
    hi = max(min(s[1], FP16_MAX) for s in spans)
    margin = 0.1 * (hi - lo)
    x = defined_fp16(f, (max(lo - margin, result.domain[0]), min(hi + margin,
                                                                   result.domain[1])))
    want = _target(f, x, result.domain)
    out = evaluate(x, result.config).out.astype(np.float64)
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(9, 9), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 3, 1]})
    a1.plot(x, want, label="f", lw=2, color="0.6")
    a1.plot(x, out, label="LUT", lw=1, color="C0")
    a1.set_ylabel("output")
    a1.legend()
    a2.plot(x, (out - want) / ulp16(want), lw=0.6,
            label=f"atomcube ({result.report.max_ulp:.2f} ULP max)")
    if baseline is not None:
        b = evaluate(x, baseline.config).out.astype(np.float64)
        a2.plot(x, (b - want) / ulp16(want), lw=0.6, color="C3", alpha=0.7,
                label=f"NVDLA's table ({baseline.report.max_ulp:.2f} ULP max)")
    a2.set_ylabel("error (FP16 ULP)")
    a2.legend()
    for row, (s, e, name) in enumerate(spans):
        a3.barh(row, min(e, FP16_MAX) - s, left=s, color=f"C{row + 1}", height=0.6)
        a3.text(s, row, f" {name}", va="center", fontsize=8)
    a3.set_yticks(range(len(spans)), [s[2] for s in spans])
    a3.set_xlabel("input")
    if hi > 1000 * max(abs(lo), 1e-3):
        a3.set_xscale("symlog", linthresh=1e-3)
    fig.suptitle(f"{result.layout} LUT for the FP16 pipeline")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
