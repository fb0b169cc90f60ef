"""The deepest register-to-register paths of a Yosys-mapped ECP5 netlist, in a minute rather
than a routed build's ten: a guide to what to pipeline next, not a timing figure.

``python -m atomcube.hw.paths build/synth/ecp5/dma_d64/atomcube_dma_d64.json`` reads the JSON
netlist a ``hw.synth`` build leaves (Yosys's, before nextpnr) and lists the endpoints with the
latest estimated arrival, one per destination register group, with the register each path starts
from; ``--verbose`` prints every net on each path.

The estimate is a sum of guesses: a LUT4 costs its logic delay plus one routed hop, a PFUMX or
L6MUX21 fed from its own slice costs only its logic, a carry chain's ripple is cheap and its
entry and exit cost a hop, a net of fanout ``f`` adds ``0.15 * log2(f)`` ns, and block RAM
and multiplier outputs start late. On the DMA engine its figures ran about a fifth above
nextpnr's, and nextpnr's worst path was among its first 13 in four of five builds; a
decision that loads hundreds of registers it ranks too low (docs/fpga.md).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

HOP = 0.9                   # ns: a guess at one routed connection

#: cell type -> (input port, output port) -> ns through the cell (routing to it included)
_THROUGH = {
    "LUT4": lambda i, o: 0.4 + HOP,
    "PFUMX": lambda i, o: 0.25 + (HOP if i == "C0" else 0.0),
    "L6MUX21": lambda i, o: 0.25 + (HOP if i == "SD" else 0.0),
    "CCU2C": lambda i, o: ((0.05 if o == "COUT" else 0.3) if i == "CIN" else
                           (0.6 if o == "COUT" else 0.9) + HOP),
}
#: cell types whose outputs start a path, with their clock-to-output guess in ns
_STARTS = {"TRELLIS_FF": 0.5, "TRELLIS_DPR16X4": 1.5, "DP16KD": 3.5, "MULT18X18D": 4.0}
_CLOCKS = {"CLK", "WCK", "CLKA", "CLKB"}


@dataclass
class TimingPath:
    arrival: float          # ns, estimated
    start: str              # the register (cell) the path starts from
    end: str                # the endpoint: cell type and port
    group: str              # the endpoint's register group (its net name without indices)
    nets: list[str]         # the path's nets, from start to end
    cells: int              # cells on the path


def _top(netlist: dict) -> dict:
    for mod in netlist["modules"].values():
        if mod.get("attributes", {}).get("top"):
            return mod
    raise ValueError("the netlist has no module marked top")


def _net_names(mod: dict) -> dict[int, str]:
    """The most readable name of each net bit: fewest '$', then shortest."""
    names: dict[int, str] = {}
    for name, net in mod["netnames"].items():
        for bit in net["bits"]:
            if isinstance(bit, int):
                old = names.get(bit)
                if old is None or (name.count("$"), len(name)) < (old.count("$"), len(old)):
                    names[bit] = name
    return names


def _group(name: str) -> str:
    name = re.sub(r"_(TRELLIS|LUT4|PFUMX|L6MUX|CCU2C|DI|CE|LSR).*", "", name)
    return re.sub(r"[\[.]?\d+\]?$", "", name).rstrip("0123456789")


def deepest(netlist: dict, count: int = 30) -> list[TimingPath]:
    """The ``count`` endpoint groups with the latest estimated arrival, latest first."""
    mod = _top(netlist)
    cells = mod["cells"]
    names = _net_names(mod)
    driver: dict[int, tuple[str, str]] = {}
    fanout: dict[int, int] = defaultdict(int)
    for cname, cell in cells.items():
        for port, bits in cell["connections"].items():
            output = cell["port_directions"].get(port) == "output"
            for bit in bits:
                if isinstance(bit, int):
                    if output:
                        driver[bit] = (cname, port)
                    else:
                        fanout[bit] += 1
    arrival: dict[int, float] = {}
    via: dict[int, int | None] = {}

    def arrive(bit: int) -> float:
        # iterative depth-first walk (netlists are deep enough to exhaust Python's stack)
        stack = [bit]
        while stack:
            b = stack[-1]
            if b in arrival:
                stack.pop()
                continue
            if b not in driver:
                arrival[b], via[b] = 0.0, None
                stack.pop()
                continue
            cname, out = driver[b]
            cell = cells[cname]
            kind = cell["type"]
            if kind in _STARTS or kind not in _THROUGH:
                arrival[b], via[b] = _STARTS.get(kind, 0.0), None
                stack.pop()
                continue
            inputs = [(port, i) for port, bits in cell["connections"].items()
                      if cell["port_directions"].get(port) == "input"
                      for i in bits if isinstance(i, int)]
            pending = [i for _, i in inputs if i not in arrival]
            if pending:
                stack.extend(pending)
                continue
            best, best_in = 0.0, None
            for port, i in inputs:
                t = (arrival[i] + _THROUGH[kind](port, out) +
                     0.15 * math.log2(max(fanout[i], 1)))
                if t > best:
                    best, best_in = t, i
            arrival[b], via[b] = best, best_in
            stack.pop()
        return arrival[bit]

    ends = []
    for cname, cell in cells.items():
        if cell["type"] not in _STARTS:
            continue
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) != "input" or port in _CLOCKS:
                continue
            for bit in bits:
                if isinstance(bit, int):
                    ends.append((arrive(bit), cname, port, bit))
    ends.sort(key=lambda e: -e[0])
    out: list[TimingPath] = []
    seen = set()
    for t, cname, port, bit in ends:
        group = _group(names.get(bit, cname))
        if group in seen:
            continue
        seen.add(group)
        nets = []
        b: int | None = bit
        while b is not None:
            nets.append(b)
            b = via.get(b)
        first = driver.get(nets[-1], ("(input)", ""))[0]
        out.append(TimingPath(t, re.sub(r"_TRELLIS.*|_LUT4.*", "", first),
                         f"{cells[cname]['type']}.{port}", group,
                         [names.get(n, "?") for n in reversed(nets)], len(nets) - 1))
        if len(out) == count:
            break
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.hw.paths",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("netlist", type=Path, help="a Yosys JSON netlist mapped for ECP5")
    ap.add_argument("-n", "--count", type=int, default=30, help="endpoint groups to list")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each path's nets")
    args = ap.parse_args(argv)
    try:
        netlist = json.loads(args.netlist.read_text())
        paths = deepest(netlist, args.count)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {args.netlist}: {e}", file=sys.stderr)
        return 2
    print("estimate  cells  from  ->  endpoint (register group)")
    for p in paths:
        print(f"{p.arrival:5.1f} ns  {p.cells:5d}  {p.start}  ->  {p.end} ({p.group})")
        if args.verbose:
            for net in p.nets:
                print(f"            {net}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
