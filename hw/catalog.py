"""Every block that has gateware, with the parameters ``make verilog`` and ``make lint`` build it
with. ``python -m atomcube.hw.catalog [OUTDIR]`` writes one Verilog file per entry (default
``build/verilog``).

A block adds itself here with a function that builds the component and the module name to emit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: where the package's own data lies (``constraints/``, ``sim/models/``): the clone's top folder,
#: or the installed ``atomcube`` folder. Read only: nothing is ever written under it.
ROOT = Path(__file__).resolve().parent.parent
#: outputs go under the current folder unless a command is given a folder of its own
BUILD = Path("build")


def regbank_selftest(**params):
    """The register bank on the selftest map (every access type); ``params`` go to the bank."""
    from atomcube.model.registers import SELFTEST

    from .bus.regbank import RegisterBank

    return RegisterBank(SELFTEST, **params)


def lut_unit(**params):
    """The LUT unit; ``params`` go to :class:`hw.lut.unit.LutUnit`."""
    from .lut.unit import LutUnit

    return LutUnit(**params)


def sparse_decompressor(**params):
    """The sparse weight decompressor; ``params`` go to
    :class:`hw.sparse.decompressor.SparseDecompressor`."""
    from .sparse.decompressor import SparseDecompressor

    return SparseDecompressor(**params)


def dma_engine(**params):
    """The DMA layout engine; ``params`` go to :class:`hw.dma.engine.DmaEngine`."""
    from .dma.engine import DmaEngine

    return DmaEngine(**params)


def convert_stage(**params):
    """The DMA's element conversion stage alone (:class:`hw.dma.convert.ElementConverter`)."""
    from .dma.convert import ElementConverter

    return ElementConverter(**params)


def soc(**params):
    """The SoC (:class:`hw.top.soc.Soc`); ``params`` go to :class:`hw.top.soc.SocConfig`."""
    from .top.soc import Soc, SocConfig

    return Soc(SocConfig(**params))


#: Verilator warnings waived on the Verilog Amaranth writes (``make lint``, the standalone cores'
#: lint), and why each is not a defect there
LINT_WAIVED = {
    "DECLFILENAME": "Amaranth writes every submodule into its top's file, named top.sub",
    "UNUSEDSIGNAL": "bits of ports and struct fields a block leaves unread by design (an "
                    "AXI member it ignores, a payload field consumed elsewhere)",
    "WIDTHEXPAND": "Amaranth's operands are extended to the expression's width by its "
                   "semantics, written without explicit padding",
    "WIDTHTRUNC": "an assignment truncates to its target's width by Amaranth's semantics",
    "CASEINCOMPLETE": "a Switch without a default case: the signal keeps the value assigned "
                      "before it",
    "PROCASSINIT": "Amaranth writes every register's reset value into its declaration",
    "CASEOVERLAP": "a Switch with wildcard cases is first-match, as casez is",
}


# name -> (factory, one-line description); the cocotb benches build from the same factories
BLOCKS = {
    "regbank_selftest": (regbank_selftest,
                         "AXI4-Lite register bank on the selftest map (every access type)"),
    "lut_sdp_l4": (lambda: lut_unit(lanes=4, flavor="sdp"), "LUT unit, SDP flavour, 4 lanes"),
    "lut_cdp_l4": (lambda: lut_unit(lanes=4, flavor="cdp"), "LUT unit, CDP flavour, 4 lanes"),
    "lut_sdp_l1_serial": (lambda: lut_unit(lanes=1, flavor="sdp", serial=True),
                          "LUT unit, SDP flavour, 1 lane, serial datapath (the UP5K's)"),
    "lut_sdp_l1_fp16": (lambda: lut_unit(lanes=1, flavor="sdp", precision="fp16"),
                        "LUT unit, SDP flavour, 1 lane, the FP16 pipeline alone"),
    "sparse_d128_a64": (lambda: sparse_decompressor(data_width=128, atom_elements=64),
                        "sparse weight decompressor, 128-bit bus, 64-element atoms"),
    # the same design at 64 bits: routes in 3 to 6 minutes, the 128-bit build in 18 to 40
    "sparse_d64_a32": (lambda: sparse_decompressor(data_width=64, atom_elements=32),
                       "sparse weight decompressor, 64-bit bus, 32-element atoms"),
    "sparse_d64_a16": (lambda: sparse_decompressor(data_width=64, atom_elements=16),
                       "sparse weight decompressor, 64-bit bus, 16-element atoms (as in the "
                       "ULX3S SoC)"),
    "dma_d64": (lambda: dma_engine(data_width=64), "DMA layout engine, 64-bit bus"),
    "dma_d64_aw16": (lambda: dma_engine(data_width=64, addr_width=16),
                     "DMA layout engine, 64-bit bus, 16-bit addresses (enough for 64 KiB)"),
    "dma_d64_small": (lambda: dma_engine(data_width=64, paths=("elements",), chains=False),
                      "DMA layout engine, 64-bit bus, the smallest build: the element path "
                      "alone (every descriptor at an element per cycle), no chains"),
    "dma_d64_convert": (lambda: dma_engine(data_width=64, convert=True),
                        "DMA layout engine, 64-bit bus, with the element conversion stage"),
    "dma_convert_d64": (lambda: convert_stage(data_width=64),
                        "the DMA's element conversion stage alone, 64-bit bus (4 lanes)"),
    "dma_convert_d256": (lambda: convert_stage(data_width=256),
                         "the DMA's element conversion stage alone, 256-bit bus (16 lanes)"),
    "soc_bridge": (lambda: soc(dma=False, sparse=False, lut=False, mem_bytes=4096),
                   "SoC without blocks: UART bridge, bus, 4 KiB memory, system registers"),
}


def write_verilog(outdir: Path, names=None, platform=None) -> list[Path]:
    """Emit the Verilog of the named blocks (all by default), elaborated with ``platform``
    (:mod:`hw.fabric`; none by default); returns the files written."""
    from amaranth.back import verilog

    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or BLOCKS:
        if name not in BLOCKS:
            raise KeyError(f"no block named {name!r} (blocks: {', '.join(BLOCKS)})")
        factory, _ = BLOCKS[name]
        path = outdir / f"atomcube_{name}.v"
        path.write_text(verilog.convert(factory(), name=f"atomcube_{name}", emit_src=False,
                                         platform=platform))
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.catalog",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", type=Path, default=BUILD / "verilog",
                    help="folder to write into (default build/verilog under the current folder)")
    ap.add_argument("--block", action="append", choices=sorted(BLOCKS),
                    help="only this block (repeatable; default: every block)")
    args = ap.parse_args(argv)
    for path in write_verilog(args.outdir, args.block):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
