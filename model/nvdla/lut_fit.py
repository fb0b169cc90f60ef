"""Choose LUT contents and registers for a function, and measure how well they do.

Formats: the input is fixed point with ``in_frac`` fractional bits (SDP: int32; CDP: 38 bits), the
output with ``out_frac`` (``out = f(x) * 2^out_frac``; entries are int16).

In both table modes the interpolation is linear *in x* between consecutive nodes: linear mode has
nodes at ``START + i * 2^select``, exponential mode at ``START + 2^(offset + i)`` (within an octave
the fraction is ``(d - 2^e) / 2^e``). So one fitter serves every mode. Entries are fitted minimax:
each segment's chord is shifted by half its signed deviation from f (that halves the
interpolation error of sampling f at the nodes), a node shared by two segments takes the mean of
their shifts, and the result is rounded to int16. Out-of-range slopes are flat or match f's
derivative at the edge, whichever measures better. Every candidate is scored by running the
bit-exact model (:func:`model.nvdla.lut.evaluate`) over a sweep of the input range, so the numbers
reported are what the hardware produces.

Layouts (the coverage cases of NVDLA's LUT programming guide; which table is which is a parameter):

- ``nested``: a raw table over the whole active range, a density table inside it where the raw
  table's error is worst (both hit: the density table wins). LE may be linear or exponential.
- ``split``: the two tables side by side, touching: the density table over the start of the range,
  the raw table from its end on.
- any geometry (including disjoint tables with a gap) through :func:`fit_geometry`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .lut import (
    FLAVORS,
    INPUT_BITS,
    LE,
    LE_ENTRIES,
    LO,
    LO_ENTRIES,
    LeFunction,
    LutConfig,
    evaluate,
)

__all__ = ["FUNCTIONS", "Formats", "TableGeom", "FitResult", "ErrorReport", "fit", "fit_geometry",
           "lrn", "nvdla_baseline", "measure", "sweep", "encode_slope", "resolve_function"]


# -- functions ---------------------------------------------------------------------------------

def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


FUNCTIONS: dict[str, tuple[Callable, float, float]] = {
    # name: (f, domain min, domain max) in real input units
    "sigmoid": (_sigmoid, -math.inf, math.inf),
    "tanh": (np.tanh, -math.inf, math.inf),
    "exp": (np.exp, -math.inf, math.inf),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), 0.0, math.inf),
}


def lrn(k: float = 1.0, alpha: float = 1e-4, beta: float = 0.75) -> Callable:
    """LRN's power term ``(k + alpha * x)^-beta`` (x is the sum of squares, x >= 0)."""
    if k <= 0 or alpha <= 0:
        raise ValueError(f"lrn needs k > 0 and alpha > 0, not k={k}, alpha={alpha}")
    return lambda x: (k + alpha * x) ** (-beta)


def resolve_function(name: str, lrn_params=None) -> tuple[Callable, float, float]:
    if name == "lrn":
        return lrn(*(lrn_params or ())), 0.0, math.inf
    try:
        return FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown function {name!r}: choose one of "
                         f"{', '.join([*FUNCTIONS, 'lrn'])}, or pass a callable") from None


@dataclass(frozen=True)
class Formats:
    """Fixed-point formats around the LUT."""

    in_frac: int
    out_frac: int
    flavor: str = "sdp"

    def __post_init__(self):
        if self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {self.flavor!r}")
        bits = INPUT_BITS[self.flavor]
        if not 0 <= self.in_frac < bits:
            raise ValueError(f"in_frac must be in [0, {bits - 1}] for {self.flavor.upper()}, "
                             f"not {self.in_frac}")
        if not 0 <= self.out_frac <= 30:
            raise ValueError(f"out_frac must be in [0, 30], not {self.out_frac}")

    @property
    def x_lo(self) -> int:
        return -(1 << (INPUT_BITS[self.flavor] - 1))

    @property
    def x_hi(self) -> int:
        return (1 << (INPUT_BITS[self.flavor] - 1)) - 1

    @property
    def out_lo(self) -> int:
        return -(1 << 31) if self.flavor == "sdp" else -32768

    @property
    def out_hi(self) -> int:
        return (1 << 31) - 1 if self.flavor == "sdp" else 32767


@dataclass(frozen=True)
class TableGeom:
    """Where one table's nodes are: ``mode`` "linear" (``start + i * 2^select``) or "exp"
    (``start + 2^(offset + i)``), in raw input units."""

    mode: str
    start: int
    select: int = 0
    offset: int = 0

    def nodes(self, n: int) -> np.ndarray:
        i = np.arange(n, dtype=np.float64)
        if self.mode == "linear":
            return self.start + i * 2.0 ** self.select
        if self.mode == "exp":
            return self.start + 2.0 ** (self.offset + i)
        raise ValueError(f"table mode must be 'linear' or 'exp', not {self.mode!r}")

    def end(self, n: int) -> int:
        """The END register: the last node, as an integer (clamped by the caller)."""
        return int(round(self.nodes(n)[-1])) if self.mode == "linear" else int(
            min(self.start + 2.0 ** (self.offset + n - 1), 2.0 ** 62))


# -- measuring ---------------------------------------------------------------------------------

def sweep(fmt: Formats, domain=(-math.inf, math.inf), extra_ranges=(), dense_bits: int = 20,
          log_points: int = 1 << 19) -> np.ndarray:
    """Inputs for measuring: every integer in [-2^dense_bits, 2^dense_bits), log-spaced points
    out to both ends of the input range, the extremes, and dense points over each range in
    ``extra_ranges`` (the tables' coverage), all clipped to ``domain`` (real units)."""
    parts = [np.arange(-(1 << dense_bits), 1 << dense_bits, dtype=np.int64)]
    top = INPUT_BITS[fmt.flavor] - 1
    mags = np.unique(np.round(np.logspace(dense_bits, top, log_points, base=2.0))).astype(np.int64)
    mags = mags[mags <= fmt.x_hi]
    parts += [mags, -mags, np.array([fmt.x_lo, fmt.x_hi], np.int64)]
    for lo, hi in extra_ranges:
        lo, hi = max(int(lo) - 4, fmt.x_lo), min(int(hi) + 4, fmt.x_hi)
        if hi > lo:
            parts.append(np.unique(np.linspace(lo, hi, 1 << 17).round().astype(np.int64)))
    x = np.unique(np.concatenate(parts))
    lo = domain[0] * 2.0 ** fmt.in_frac
    hi = domain[1] * 2.0 ** fmt.in_frac
    return x[(x >= lo) & (x <= hi)]


@dataclass
class ErrorReport:
    """Errors of a configuration against f over a sweep, in output LSBs and real units."""

    max_lsb: float
    mean_lsb: float
    max_abs: float
    worst_x: float          # real input where the error is largest
    samples: int

    def row(self) -> dict:
        return {"max error (LSB)": round(self.max_lsb, 3), "mean error (LSB)": round(
            self.mean_lsb, 4), "max abs error": self.max_abs, "worst x": self.worst_x,
            "samples": self.samples}


def target(f, fmt: Formats, x_raw: np.ndarray, domain) -> np.ndarray:
    """f in output units at raw inputs (inputs clamped into the domain)."""
    xr = np.clip(x_raw / 2.0 ** fmt.in_frac, domain[0], domain[1])
    with np.errstate(all="ignore"):
        y = np.asarray(f(xr), dtype=np.float64) * 2.0 ** fmt.out_frac
    return y


def measure(cfg: LutConfig, f, fmt: Formats, x: np.ndarray, domain=(-math.inf, math.inf),
            ) -> ErrorReport:
    out = evaluate(x, cfg, fmt.flavor).out.astype(np.float64)
    want = np.clip(target(f, fmt, x, domain), fmt.out_lo, fmt.out_hi)
    err = np.abs(out - want)
    err[~np.isfinite(err)] = np.inf
    i = int(np.argmax(err))
    return ErrorReport(max_lsb=float(err[i]), mean_lsb=float(np.mean(err)),
                       max_abs=float(err[i] / 2.0 ** fmt.out_frac),
                       worst_x=float(x[i] / 2.0 ** fmt.in_frac), samples=int(x.size))


# -- building a configuration from a geometry -------------------------------------------------

def minimax_entries(f, fmt: Formats, nodes: np.ndarray, domain, per_segment: int = 64):
    """Entries for ``nodes`` that minimise the worst interpolation error, as int16."""
    v = target(f, fmt, nodes, domain)
    t = np.linspace(0.0, 1.0, per_segment)
    x0, x1 = nodes[:-1, None], nodes[1:, None]
    xs = x0 + (x1 - x0) * t
    g = target(f, fmt, xs, domain) - (v[:-1, None] + (v[1:, None] - v[:-1, None]) * t)
    g[~np.isfinite(g)] = 0.0
    shift_seg = (g.max(axis=1) + g.min(axis=1)) / 2
    shift = np.zeros_like(v)
    shift[:-1] += shift_seg
    shift[1:] += shift_seg
    shift[1:-1] /= 2
    vals = v + shift
    vals[~np.isfinite(vals)] = np.where(vals[~np.isfinite(vals)] > 0, 32767, -32768)
    return np.clip(np.round(vals), -32768, 32767).astype(np.int64)


def encode_slope(k: float) -> tuple[int, int]:
    """(SCALE, SHIFT field) closest to ``k`` output units per input unit."""
    if not math.isfinite(k) or k == 0:
        return 0, 0
    best = (0, 0, abs(k))
    for r in range(16):                                   # SCALE / 2^r
        s = round(k * 2 ** r)
        if abs(s) <= 32767 and abs(s / 2 ** r - k) < best[2]:
            best = (s, r, abs(s / 2 ** r - k))
    for sh in range(1, 17):                               # SCALE * 2^sh, field 32 - sh
        s = round(k / 2 ** sh)
        if abs(s) <= 32767 and abs(s * 2 ** sh - k) < best[2]:
            best = (s, 32 - sh, abs(s * 2 ** sh - k))
    return best[0], best[1]


def _derivative(f, fmt, x_raw, domain):
    h = max(abs(x_raw) * 1e-6, 1.0)
    a, b = target(f, fmt, np.array([x_raw - h, x_raw + h]), domain)
    return (b - a) / (2 * h)


def _clamp_reg(v, fmt):
    return int(min(max(v, fmt.x_lo), fmt.x_hi))


def build_config(f, fmt: Formats, le: TableGeom, lo: TableGeom, priorities: dict,
                 domain=(-math.inf, math.inf), slopes: dict | None = None) -> LutConfig:
    """A configuration for given geometries; ``slopes`` maps "le_uflow" etc. to True (match f's
    derivative at that edge) or False (flat); default all flat."""
    if lo.mode != "linear":
        raise ValueError("the LO table has linear mode only")
    slopes = slopes or {}
    regs: dict = {}
    for name, g, n in (("le", le, LE_ENTRIES), ("lo", lo, LO_ENTRIES)):
        nodes = g.nodes(n)
        regs[f"{name}_table"] = minimax_entries(f, fmt, nodes, domain)
        regs[f"{name}_start"] = _clamp_reg(g.start, fmt)
        regs[f"{name}_end"] = _clamp_reg(g.end(n), fmt)
        edges = {"uflow": nodes[0], "oflow": nodes[-1]}
        for side, xe in edges.items():
            k = _derivative(f, fmt, float(xe), domain) if slopes.get(f"{name}_{side}") else 0.0
            scale, shift = encode_slope(k)
            regs[f"{name}_{side}_scale"], regs[f"{name}_{side}_shift"] = scale, shift
    return LutConfig(**regs, **mode_registers(le, lo, priorities))


def mode_registers(le, lo, priorities: dict) -> dict:
    """The LE function, index selects and offset of two table geometries (anything with
    ``mode``, ``select`` and ``offset``), and the priorities."""
    return {"le_function": LeFunction.EXPONENTIAL if le.mode == "exp" else LeFunction.LINEAR,
            "le_index_select": le.select if le.mode == "linear" else 0,
            "le_index_offset": le.offset if le.mode == "exp" else 0,
            "lo_index_select": lo.select, **priorities}


# -- fitting -----------------------------------------------------------------------------------

@dataclass
class FitResult:
    config: LutConfig
    formats: Formats
    layout: str
    le: TableGeom
    lo: TableGeom
    report: ErrorReport
    domain: tuple


def layout_priorities(raw: int, layout: str, first: int | None = None) -> dict:
    """The priorities of a layout: ``raw`` alone (the other table never hit), the density
    table ``nested`` in the raw one, or the two side by side (``split``, ``first`` covering
    the low end)."""
    density = LO if raw == LE else LE
    if layout == "raw":
        return {"hybrid_priority": raw, "uflow_priority": raw, "oflow_priority": raw}
    if layout == "nested":
        return {"hybrid_priority": density, "uflow_priority": raw, "oflow_priority": raw}
    # split: `first` covers the low end, the other the high end
    other = LO if first == LE else LE
    return {"hybrid_priority": other, "uflow_priority": first, "oflow_priority": other}


def choose_slopes(build, score):
    """Turn on each edge's derivative-matched slope in turn where it lowers the score (a
    comparable: worst error, then mean). ``build(slopes)`` makes a configuration, ``score(cfg)``
    measures it. Returns (slopes, configuration, its score)."""
    slopes: dict = {}
    cfg = build(slopes)
    best = score(cfg)
    for edge in ("le_uflow", "le_oflow", "lo_uflow", "lo_oflow"):
        trial = dict(slopes, **{edge: True})
        c = build(trial)
        r = score(c)
        if r < best:
            slopes, cfg, best = trial, c, r
    return slopes, cfg, best


def _active_range(f, fmt, domain, tol_lsb=0.25):
    """The real interval outside of which f is within ``tol_lsb`` of its value at the ends of
    the (domain-clipped) input range: where a table is needed at all."""
    lo = max(fmt.x_lo / 2.0 ** fmt.in_frac, domain[0])
    hi = min(fmt.x_hi / 2.0 ** fmt.in_frac, domain[1])
    # log-spaced probe on both sides of 0 (or of the domain start when it is > 0)
    probe_raw = np.unique(np.concatenate([
        -np.logspace(-fmt.in_frac, 40, 4000, base=2.0), [0.0],
        np.logspace(-fmt.in_frac, 40, 4000, base=2.0)]))
    probe = probe_raw[(probe_raw >= lo) & (probe_raw <= hi)]
    if domain[0] > -math.inf:
        probe = np.unique(np.concatenate([probe, domain[0] + np.logspace(
            -fmt.in_frac, 40, 4000, base=2.0)]))
        probe = probe[(probe >= lo) & (probe <= hi)]
    with np.errstate(all="ignore"):
        y = np.asarray(f(probe), float) * 2.0 ** fmt.out_frac
    y = np.clip(y, fmt.out_lo, fmt.out_hi)
    ok = np.isfinite(y)
    probe, y = probe[ok], y[ok]
    lo_far, hi_far = y[0], y[-1]
    active = (np.abs(y - lo_far) > tol_lsb) & (np.abs(y - hi_far) > tol_lsb)
    if not active.any():
        return probe[0], probe[-1]
    idx = np.flatnonzero(active)
    a = probe[max(idx[0] - 1, 0)]
    b = probe[min(idx[-1] + 1, len(probe) - 1)]
    return a, b


def _coarse_sweep(fmt, domain, ranges):
    return sweep(fmt, domain, ranges, dense_bits=min(16, fmt.in_frac + 6), log_points=1 << 13)


def fit(f, fmt: Formats, *, layout: str = "auto", raw: str = "lo", le_mode: str = "linear",
        domain=None, progress: Callable[[str], None] | None = None) -> FitResult:
    """Fit a LUT to ``f``.

    Parameters
    ----------
    f : str or callable
        A name from :data:`FUNCTIONS` (or ``"lrn"``), or a numpy-vectorised callable on real
        inputs.
    fmt : Formats
    layout : {"auto", "nested", "split"}
        ``auto`` fits both and keeps the one with the smaller worst error.
    raw : {"lo", "le"}
        Which table is the raw (wide) one; the other is the density table.
    le_mode : {"linear", "exp"}
        The LE table's mode. Exponential mode needs a domain bounded below (the octaves count
        from START).
    domain : (float, float), optional
        Real input interval where f is defined and the error is measured (default: the function's
        own, else the whole input range).
    progress : callable, optional
        Called with a line of text as the search advances.
    """
    if isinstance(f, str):
        f, dmin, dmax = resolve_function(f)
        domain = domain or (dmin, dmax)
    domain = _check_domain(domain, fmt)
    if layout == "auto":
        say = progress or (lambda s: None)
        results = []
        for lay in ("nested", "split"):
            say(f"layout {lay}:")
            try:
                results.append(fit(f, fmt, layout=lay, raw=raw, le_mode=le_mode, domain=domain,
                                   progress=progress))
            except _NoFit as e:
                say(f"  {e}")
        if not results:
            raise ValueError("neither layout fits this function and format")
        best = min(results, key=lambda r: (r.report.max_lsb, r.report.mean_lsb))
        say(f"chose {best.layout}: max error {best.report.max_lsb:.3f} LSB")
        return best
    if layout not in ("nested", "split"):
        raise ValueError(f"layout must be 'auto', 'nested' or 'split', not {layout!r}")
    if raw not in ("lo", "le"):
        raise ValueError(f"raw must be 'lo' or 'le', not {raw!r}")
    if le_mode not in ("linear", "exp"):
        raise ValueError(f"le_mode must be 'linear' or 'exp', not {le_mode!r}")
    say = progress or (lambda s: None)
    lo_r = max(domain[0], fmt.x_lo / 2.0 ** fmt.in_frac)
    if le_mode == "exp" and not math.isfinite(domain[0]):
        raise ValueError("le_mode 'exp' needs a domain bounded below: the octaves count from "
                         "START (give domain=(x_min, x_max))")
    _check_saturation(f, fmt, domain)
    a, b = _active_range(f, fmt, domain)
    say(f"active range [{a:.6g}, {b:.6g}]")
    _check_entry_range(f, fmt, domain, a, b)
    scale = 2.0 ** fmt.in_frac
    raw_id = LE if raw == "le" else LO
    raw_n = LE_ENTRIES if raw_id == LE else LO_ENTRIES
    den_n = LO_ENTRIES if raw_id == LE else LE_ENTRIES
    raw_mode = le_mode if raw_id == LE else "linear"
    den_mode = le_mode if raw_id == LO else "linear"
    x_search = _coarse_sweep(fmt, domain, [(a * scale, b * scale)])

    def evaluate_pair(le_g, lo_g, prio):
        cfg = build_config(f, fmt, le_g, lo_g, prio, domain)
        return cfg, measure(cfg, f, fmt, x_search, domain)

    # The unused table while searching for the raw one: never hit, never chosen.
    parked = TableGeom("linear", fmt.x_hi)

    def raw_candidates():
        if raw_mode == "exp":
            start = int(math.floor(lo_r * scale)) - 1
            for off in range(-4, INPUT_BITS[fmt.flavor] - 6):
                yield TableGeom("exp", start, offset=off)
            return
        span = (b - a) * scale
        for sel in range(-4, INPUT_BITS[fmt.flavor]):
            cover = (raw_n - 1) * 2.0 ** sel
            if cover < span / 8 or cover > 4 * (fmt.x_hi - fmt.x_lo):
                continue
            centres = {(a + b) / 2 * scale, a * scale + cover / 2, b * scale - cover / 2}
            if domain[0] > -math.inf:
                centres.add(domain[0] * scale + cover / 2)
            for c in centres:
                start = int(math.floor(max(c - cover / 2, lo_r * scale - 1)))
                yield TableGeom("linear", start, select=sel)

    best = None
    for g in raw_candidates():
        le_g, lo_g = (g, parked) if raw_id == LE else (parked, g)
        prio = layout_priorities(raw_id, "raw")
        cfg, rep = evaluate_pair(le_g, lo_g, prio)
        if best is None or (rep.max_lsb, rep.mean_lsb) < (best[2].max_lsb, best[2].mean_lsb):
            best = (g, cfg, rep)
    raw_g, cfg_raw, raw_rep = best
    say(f"raw table ({raw.upper()}, {raw_mode}): {raw_g}, max error {raw_rep.max_lsb:.3f} LSB")

    # Density table: finer steps, placed around where the raw table alone is worst.
    best_pair = None
    den_id = LO if raw_id == LE else LE
    if layout == "nested":
        out = evaluate(x_search, cfg_raw, fmt.flavor).out
        err = np.abs(out - np.clip(target(f, fmt, x_search, domain), fmt.out_lo, fmt.out_hi))
        order = np.argsort(-err)
        prio = layout_priorities(raw_id, "nested")
        sel0 = raw_g.select if raw_mode == "linear" else int(math.log2(max(
            (b - a) * scale, 1) / (raw_n - 1)))
        # Beside a linear raw table, steps a little finer than its own; beside an exponential
        # one, whose octaves grow without bound, any step.
        sels = (range(sel0 - 1, sel0 - 8, -1) if raw_mode == "linear"
                else range(INPUT_BITS[fmt.flavor] - 8, -5, -1))
        if den_mode == "exp":
            # An exponential density table resolves octaves just above its START and overflows
            # at START + 2^(offset + 64): search START and the top octave.
            starts = [int(math.floor(lo_r * scale)) - 1] + [int(p) - 1 for p in _peaks(
                x_search, order, scale, 6)]
            geoms = [TableGeom("exp", s, offset=top - (den_n - 1)) for s in starts
                     for top in range(2, INPUT_BITS[fmt.flavor])]
        else:
            geoms = []
            for sel in sels:
                cover = (den_n - 1) * 2.0 ** sel
                for c in _peaks(x_search, order, cover / 4, 8) + [(a + b) / 2 * scale]:
                    start = int(math.floor(max(c - cover / 2, lo_r * scale - 1)))
                    geoms.append(TableGeom("linear", start, select=sel))
        for g in geoms:
            le_g, lo_g = (raw_g, g) if raw_id == LE else (g, raw_g)
            cfg, rep = evaluate_pair(le_g, lo_g, prio)
            if best_pair is None or (rep.max_lsb, rep.mean_lsb) < (
                    best_pair[3].max_lsb, best_pair[3].mean_lsb):
                best_pair = (le_g, lo_g, prio, rep)
    else:
        # split: density table from the domain's (or active range's) start; raw from its end.
        base = max(lo_r, a) * scale
        for sel in range(-4, INPUT_BITS[fmt.flavor] - 8):
            cover = (den_n - 1) * 2.0 ** sel
            if cover > (b - a) * scale:
                break
            d_g = TableGeom("linear", int(math.floor(base)) - 1, select=sel)
            d_end = d_g.start + int(cover)
            for r_g in _split_raw(raw_mode, raw_n, d_end, b * scale, fmt):
                le_g, lo_g = (r_g, d_g) if raw_id == LE else (d_g, r_g)
                prio = layout_priorities(raw_id, "split", first=den_id)
                cfg, rep = evaluate_pair(le_g, lo_g, prio)
                if best_pair is None or (rep.max_lsb, rep.mean_lsb) < (
                        best_pair[3].max_lsb, best_pair[3].mean_lsb):
                    best_pair = (le_g, lo_g, prio, rep)
    if best_pair is None:
        raise _NoFit(f"no {layout} arrangement fits this function and format")
    le_g, lo_g, prio, rep = best_pair
    say(f"with density table: LE {le_g}, LO {lo_g}, max error {rep.max_lsb:.3f} LSB")
    return fit_geometry(f, fmt, le_g, lo_g, prio, domain=domain, layout=layout, progress=say)


class _NoFit(ValueError):
    pass


def _check_domain(domain, fmt: Formats) -> tuple[float, float]:
    """``domain`` as a (low, high) pair that holds at least two inputs of the format."""
    lo, hi = (-math.inf, math.inf) if domain is None else (float(v) for v in domain)
    if math.isnan(lo) or math.isnan(hi) or lo == math.inf or hi == -math.inf:
        raise ValueError(f"domain: [{lo:g}, {hi:g}] holds no input")
    step = 2.0 ** -fmt.in_frac
    first = max(lo, fmt.x_lo * step)
    last = min(hi, fmt.x_hi * step)
    if math.floor(last / step) - math.ceil(first / step) < 1:
        raise ValueError(f"domain: [{lo:g}, {hi:g}] holds fewer than two inputs of "
                         f"Q.{fmt.in_frac} in the {fmt.flavor.upper()} input range "
                         f"[{fmt.x_lo * step:g}, {fmt.x_hi * step:g}]")
    return lo, hi


def _check_saturation(f, fmt: Formats, domain) -> None:
    """Refuse formats in which ``f`` leaves the output range anywhere in the domain: the unit
    would clamp there, and the fit would hide it as a small error against a clamped target."""
    lo = max(fmt.x_lo / 2.0 ** fmt.in_frac, domain[0])
    hi = min(fmt.x_hi / 2.0 ** fmt.in_frac, domain[1])
    span = np.logspace(-fmt.in_frac, 40, 2000, base=2.0)
    probe = np.concatenate([np.linspace(lo, hi, 4001), -span, span, domain[0] + span])
    probe = probe[(probe >= lo) & (probe <= hi)]
    with np.errstate(all="ignore"):
        y = np.asarray(f(probe), float) * 2.0 ** fmt.out_frac
    ok = np.isfinite(y)
    probe, y = probe[ok], y[ok]
    over = (y > fmt.out_hi + 1) | (y < fmt.out_lo - 1)
    if not over.any():
        return
    i = int(np.argmax(np.abs(y) * over))
    peak = abs(float(y[i]))
    limit = fmt.out_hi if y[i] > 0 else -fmt.out_lo
    fits = fmt.out_frac - math.ceil(math.log2(peak / (limit + 1)))
    advice = (f"use out_frac {fits} or less, or narrow the domain" if fits >= 0 else
              "narrow the domain (--x-min, --x-max)")
    raise ValueError(f"f saturates: it reaches {y[i]:.6g} output units at x = {probe[i]:.6g}, "
                     f"beyond the {fmt.flavor.upper()} output's {fmt.out_lo} .. {fmt.out_hi} "
                     f"(out_frac {fmt.out_frac}): {advice}")


def _check_entry_range(f, fmt, domain, a, b):
    """Refuse formats whose outputs over the active range do not fit int16 table entries (a
    hair over, like sigmoid's 1.0 in Q0.15, is allowed: the entries saturate by one LSB)."""
    xs = np.concatenate([np.linspace(a, b, 4097), np.clip(np.geomspace(
        max(abs(a), 2.0 ** -fmt.in_frac), max(abs(b), 2.0 ** -fmt.in_frac), 2048) * np.sign(
        b), a, b)])
    with np.errstate(all="ignore"):
        y = np.asarray(f(np.clip(xs, domain[0], domain[1])), float) * 2.0 ** fmt.out_frac
    peak = float(np.nanmax(np.abs(y[np.isfinite(y)]))) if np.isfinite(y).any() else 0.0
    if peak > 32768 * 1.001:
        fits = fmt.out_frac - math.ceil(math.log2(peak / 32768))
        advice = (f"use out_frac {fits} or less, or narrow the domain" if fits >= 0 else
                  "narrow the domain (--x-min, --x-max)")
        raise ValueError(f"f reaches {peak:.0f} output units (out_frac {fmt.out_frac}) over "
                         f"[{a:.4g}, {b:.4g}], beyond the int16 table entries: {advice}")


def _peaks(x, order, spacing, count):
    """Up to ``count`` inputs of largest error (``order``: indices by falling error) that lie at
    least ``spacing`` apart: distinct places where a density table could go."""
    chosen: list[float] = []
    for i in order[:4096]:
        xi = float(x[i])
        if all(abs(xi - c) >= spacing for c in chosen):
            chosen.append(xi)
            if len(chosen) == count:
                break
    return chosen


def _split_raw(mode, n, start, far, fmt):
    """Raw-table candidates that start where the density table ends and reach ``far``."""
    if mode == "exp":
        for off in range(-2, 12):
            yield TableGeom("exp", start - 1, offset=off)
        return
    span = max(far - start, 1.0)
    sel = max(int(math.ceil(math.log2(span / (n - 1)))), -4)
    for s in (sel - 1, sel, sel + 1):
        yield TableGeom("linear", start - 1, select=s)


def fit_geometry(f, fmt: Formats, le: TableGeom, lo: TableGeom, priorities: dict, *,
                 domain=None, layout: str = "custom", progress=None) -> FitResult:
    """Fill given geometries (any arrangement NVDLA's LUT programming guide describes): minimax
    entries, the better of flat and derivative-matched slopes at each edge, measured over the full
    sweep."""
    if isinstance(f, str):
        f, dmin, dmax = resolve_function(f)
        domain = domain or (dmin, dmax)
    domain = tuple(domain or (-math.inf, math.inf))
    say = progress or (lambda s: None)
    ranges = [(g.start, g.end(n)) for g, n in ((le, LE_ENTRIES), (lo, LO_ENTRIES))
              if g.start < fmt.x_hi]
    # Slopes are chosen on a coarse sweep; the report comes from the full one.
    xc = _coarse_sweep(fmt, domain, ranges)
    def score(c):
        r = measure(c, f, fmt, xc, domain)
        return (r.max_lsb, r.mean_lsb)

    _, cfg, _ = choose_slopes(lambda s: build_config(f, fmt, le, lo, priorities, domain, s),
                              score)
    rep = measure(cfg, f, fmt, sweep(fmt, domain, ranges), domain)
    say(f"final: max error {rep.max_lsb:.3f} LSB over {rep.samples:,} inputs")
    return FitResult(cfg, fmt, layout, le, lo, rep, domain)


# -- NVDLA's own arrangement, for comparison -----------------------------------------------------

NVDLA_TABLES = {
    # name: (min, step) of the single 257-entry LO table NVDLA's compiler writes
    "sigmoid": (-16.0, 1 / 8),
    "tanh": (-4.0, 1 / 32),
}


def nvdla_baseline(name: str, fmt: Formats) -> FitResult:
    """NVDLA's compiler arrangement: one 257-entry LO table sampling f at its nodes, flat
    outside, LE unused."""
    if name not in NVDLA_TABLES:
        raise ValueError(f"no NVDLA arrangement for {name!r} (have: {', '.join(NVDLA_TABLES)})")
    f, dmin, dmax = resolve_function(name)
    xmin, step = NVDLA_TABLES[name]
    sel = int(round(math.log2(step * 2 ** fmt.in_frac)))
    lo = TableGeom("linear", int(round(xmin * 2 ** fmt.in_frac)), select=sel)
    nodes = lo.nodes(LO_ENTRIES)
    table = np.clip(np.round(target(f, fmt, nodes, (dmin, dmax))), -32768, 32767).astype(np.int64)
    cfg = LutConfig(lo_table=table, lo_index_select=sel, lo_start=lo.start,
                    lo_end=lo.end(LO_ENTRIES), le_start=fmt.x_hi, le_function=LeFunction.LINEAR,
                    uflow_priority=LO, oflow_priority=LO, hybrid_priority=LO)
    x = sweep(fmt, (dmin, dmax), [(lo.start, lo.end(LO_ENTRIES))])
    rep = measure(cfg, f, fmt, x, (dmin, dmax))
    return FitResult(cfg, fmt, "nvdla", TableGeom("linear", fmt.x_hi), lo, rep, (dmin, dmax))


# -- report --------------------------------------------------------------------------------------

def pyplot_and_function(f):
    """matplotlib's pyplot (drawing to files), and ``f`` resolved if it is a name."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("plotting needs matplotlib: pip install matplotlib") from None
    return plt, resolve_function(f)[0] if isinstance(f, str) else f


def plot(result: FitResult, f, path, baseline: FitResult | None = None) -> None:
    """Function, approximation, error and each table's coverage, to a PNG."""
    plt, f = pyplot_and_function(f)
    fmt, cfg = result.formats, result.config
    scale = 2.0 ** fmt.in_frac
    spans = []
    for g, n in ((result.le, LE_ENTRIES), (result.lo, LO_ENTRIES)):
        if g.start < fmt.x_hi:
            spans.append((g.start / scale, min(g.end(n), fmt.x_hi) / scale))
    lo = min(s[0] for s in spans)
    hi = max(s[1] for s in spans)
    margin = 0.1 * (hi - lo)
    lo, hi = max(lo - margin, result.domain[0]), min(hi + margin, result.domain[1])
    # a table in exponential mode, or a span too wide for 20,000 even samples to resolve (LRN's
    # inputs reach 1e11), is drawn on a symmetric log axis sampled geometrically
    log_axis = (hi - lo) * scale > 1 << 20 or any(
        g.mode == "exp" and g.start < fmt.x_hi for g in (result.le, result.lo))
    x = np.linspace(lo * scale, hi * scale, 20001)
    if log_axis:
        ends = np.geomspace(1, max(abs(lo), abs(hi)) * scale + 1, 10000)
        x = np.concatenate([x, ends, -ends, [0.0]])
    x = np.unique(x.round().astype(np.int64))
    x = x[(x >= max(fmt.x_lo, lo * scale)) & (x <= min(fmt.x_hi, hi * scale))]
    res = evaluate(x, cfg, fmt.flavor)
    want = np.clip(target(f, fmt, x, result.domain), fmt.out_lo, fmt.out_hi)
    xr = x / scale
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(9, 9), sharex=True,
                                     gridspec_kw={"height_ratios": [3, 3, 1]})
    a1.plot(xr, want / 2.0 ** fmt.out_frac, label="f", lw=2, color="0.6")
    a1.plot(xr, res.out / 2.0 ** fmt.out_frac, label="LUT", lw=1, color="C0")
    a1.set_ylabel("output")
    a1.legend()
    a2.plot(xr, res.out - want, lw=0.8, label=f"atomcube ({result.report.max_lsb:.2f} LSB max)")
    if baseline is not None:
        b = evaluate(x, baseline.config, fmt.flavor).out
        a2.plot(xr, b - want, lw=0.8, color="C3", alpha=0.7,
                label=f"NVDLA tables ({baseline.report.max_lsb:.2f} LSB max)")
    a2.set_ylabel("error (output LSB)")
    a2.legend()
    for row, (name, g, n, colour) in enumerate((("LE", result.le, LE_ENTRIES, "C1"),
                                                ("LO", result.lo, LO_ENTRIES, "C2"))):
        if g.start < fmt.x_hi:
            s, e = g.start / scale, min(g.end(n), fmt.x_hi) / scale
            a3.barh(row, e - s, left=s, color=colour, height=0.6)
            mode = "exp" if g.mode == "exp" else f"step 2^{g.select - fmt.in_frac}"
            a3.text(s, row, f" {name} ({mode})", va="center", fontsize=8)
    a3.set_yticks([0, 1], ["LE", "LO"])
    a3.set_xlabel("input" + (" (symmetric log scale)" if log_axis else ""))
    if log_axis:
        a3.set_xscale("symlog", linthresh=max(1.0, 2.0 ** -fmt.in_frac))
    a3.set_xlim(lo, hi)
    fig.suptitle(f"{result.layout} LUT, input Q.{fmt.in_frac}, output Q.{fmt.out_frac} "
                 f"({fmt.flavor.upper()})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
