"""Every cocotb bench in the regression, with its parameter sets and simulators.

``make sim`` (``python -m atomcube.sim``) and the pytest launcher (``tests/test_cocotb.py``) both
read this list, so adding a bench here adds it to both. To add a block's bench:

1. write ``sim/<block>/test_<block>.py`` (cocotb tests; read parameters with
   :func:`sim.runner.params`),
2. give a function that builds the toplevel component from a case's parameters,
3. append a :class:`Bench` below with its cases; restrict a case to Verilator with
   ``simulators=("verilator",)`` when Icarus would be too slow for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from atomcube.hw.catalog import dma_engine, lut_unit, regbank_selftest, soc, sparse_decompressor
from atomcube.hw.ip import CORES, build_core, core_verilog

from .runner import SIMULATORS


def _board_soc(name):
    """A board's SoC configuration, as :func:`hw.catalog.soc`'s parameters."""
    from dataclasses import asdict

    from atomcube.hw.top.board import BOARDS

    return asdict(BOARDS[name].soc)


@dataclass(frozen=True)
class Case:
    """One parameter set of a bench. ``regression=False`` keeps a case out of ``make test``
    (the pytest launcher, which CI runs within its 30 minutes); ``make sim`` runs it. A tuple
    of simulators keeps it in ``make test`` on those alone.

    Icarus, the second simulator, is there to catch Verilog that two simulators read
    differently, not to repeat Verilator's coverage, and it runs the benches 3 to 10 times
    slower: each bench runs on it in one or two cases (``simulators``), and the sparse bench
    without its long data tests (``tests``), so that CI stays within its 30 minutes."""

    name: str
    params: dict = field(default_factory=dict)
    simulators: tuple[str, ...] = SIMULATORS
    regression: bool | tuple[str, ...] = True
    #: the cocotb tests to run (their names, comma-separated); all when None
    tests: str | None = None
    #: the platform the toplevel is elaborated with (:func:`sim.runner.sim_platform`): None for
    #: plain logic, as the other cases; "ecp5" as the ECP5 board tops build it, its vendor cells
    #: (global buffers, kept register copies, multiplier blocks with their own registers)
    #: simulated from sim/models/ecp5.v
    platform: str | None = None


def ip_case(params):
    """A case of the ``ip`` bench: its core (:data:`hw.ip.CORES`) and the parameters it is
    built with (the core's defaults, then the case's own but ``core``)."""
    core = CORES[params["core"]]
    return core, {**core.params, **{k: v for k, v in params.items() if k != "core"}}


def _ip_core(**params):
    return build_core(*ip_case(params))


def _ip_verilog(params, module):
    """The Verilog ``make ip`` writes for a case of the ``ip`` bench."""
    return core_verilog(*ip_case(params), module)


@dataclass(frozen=True)
class Bench:
    name: str
    module: str                   # the cocotb test module, importable
    toplevel: Callable            # (**params) -> amaranth Component
    cases: tuple[Case, ...]
    #: (params, module name) -> the Verilog to simulate, where the toplevel's own conversion is
    #: not what users get (the standalone cores: `make ip`'s file, attributes and all)
    verilog: Callable | None = None

    @property
    def toplevel_name(self) -> str:
        return "atomcube_" + self.name.replace("-", "_")


BENCHES: tuple[Bench, ...] = (
    Bench("regbank", "atomcube.sim.regbank.test_regbank", regbank_selftest, (
        # (Icarus runs each case in about 2 s, Verilator's build takes 10: CI runs the two ends,
        # aw6 and aw6-direct-mirror, on both, the others on Icarus; `make sim` all on both)
        Case("aw6"),
        Case("aw32", {"addr_width": 32}, regression=("icarus",)),
        # writes committed straight from the bus (the small builds' banks)
        Case("aw6-direct", {"capture": False}, regression=("icarus",)),
        # reads of the all-RW registers from a block-RAM copy (the SoC's banks), with each
        # write path
        Case("aw6-mirror", {"mirror": True}, regression=("icarus",)),
        Case("aw6-direct-mirror", {"capture": False, "mirror": True}),
    )),
    Bench("lut", "atomcube.sim.lut.test_lut", lut_unit, (
        # CI's one-lane SDP unit is the ECP5 case's below, and its Icarus runs are the serial
        # CDP case's and the standalone LUT cores' (tests/test_ip.py, through FuseSoC): `make
        # sim` runs these two too
        Case("sdp-l1", {"lanes": 1, "flavor": "sdp"}, ("verilator",), regression=False),
        Case("sdp-l4", {"lanes": 4, "flavor": "sdp"}, regression=("verilator",)),
        Case("sdp-l16", {"lanes": 16, "flavor": "sdp"}, ("verilator",), regression=False),
        # (as sdp-l1: CI's one-lane CDP unit is the ECP5 case's)
        Case("cdp-l1", {"lanes": 1, "flavor": "cdp"}, ("verilator",), regression=False),
        # CI's four-lane CDP unit is the standalone core's (tests/test_ip.py, on Icarus through
        # FuseSoC); `make sim` runs this one too
        Case("cdp-l4", {"lanes": 4, "flavor": "cdp"}, ("verilator",), regression=False),
        # the 12-stage pipeline makes 16-lane builds slow to compile (5 to 8 minutes each on
        # 2 cores): CI runs 1 and 4 lanes of SDP, 1 of CDP (the ECP5 cases); `make sim` runs
        # 16 lanes too
        Case("cdp-l16", {"lanes": 16, "flavor": "cdp"}, ("verilator",), regression=False),
        # the serial datapath (one multiplier, a sample at a time): two lanes, as a 64-bit LUT
        # port feeds it, and one, as the UP5K SoC's 32-bit port does (also in `soc/up5k`)
        Case("sdp-l2-serial", {"lanes": 2, "flavor": "sdp", "serial": True}, ("verilator",)),
        # (CI: on Icarus, which runs it as fast as Verilator's build takes)
        Case("cdp-l1-serial", {"lanes": 1, "flavor": "cdp", "serial": True},
             regression=("icarus",)),
        # as the ULX3S builds it: the stages' enable through a DCCA, each product in a
        # MULT18X18D with its own operand and product registers (sim/models/ecp5.v)
        Case("sdp-l1-ecp5", {"lanes": 1, "flavor": "sdp"}, ("verilator",), platform="ecp5"),
        # the FP16 pipeline alone, on both simulators, and beside the integer one (the
        # precision register switching between them)
        Case("sdp-l1-fp16", {"lanes": 1, "flavor": "sdp", "precision": "fp16"}),
        Case("sdp-l2-both", {"lanes": 2, "flavor": "sdp", "precision": "both"}, ("verilator",)),
        Case("cdp-l1-ecp5", {"lanes": 1, "flavor": "cdp"}, ("verilator",), platform="ecp5"),
    )),
    Bench("sparse", "atomcube.sim.sparse.test_sparse", sparse_decompressor, (
        # the narrowest bus on both simulators; the widest on Verilator in `make sim` only
        # (128 and 256 bits run in the benchmark): keeps the CI run under its 30 minutes
        Case("d64-a32", {"data_width": 64, "atom_elements": 32}, ("verilator",)),
        # on Icarus: the empty groups, the stream-only and memory-only jobs and the build's
        # identity, not the corner and random shapes, the errors or the busy start (3.5 of its
        # 4.5 minutes; Verilator runs them, and `make sim` runs them all on Icarus too)
        Case("d64-a32", {"data_width": 64, "atom_elements": 32}, ("icarus",),
             tests="test_all_zero_group,test_stream_only_and_memory_only,test_hwinfo"),
        Case("d64-a32-all", {"data_width": 64, "atom_elements": 32}, ("icarus",),
             regression=False),
        Case("d512-a64", {"data_width": 512, "atom_elements": 64}, ("verilator",),
             regression=False),
        # as the ULX3S builds it: 16-element atoms, the control registers' copies as
        # TRELLIS_FF cells
        Case("d64-a16-ecp5", {"data_width": 64, "atom_elements": 16}, ("verilator",),
             platform="ecp5"),
    )),
    Bench("dma", "atomcube.sim.dma.test_dma", dma_engine, (
        # (CI: on Icarus; on Verilator the next cases build it at 64 bits with the ECP5 cells)
        Case("d64", {"data_width": 64}, regression=("icarus",)),
        # CI's wide bus is the next case's 128 bits; `make sim` runs 256 too
        Case("d256", {"data_width": 256}, ("verilator",), regression=False),
        # AXI4's longest bursts: 256 beats of 16 bytes, a whole 4 KiB page
        Case("d128-b256", {"data_width": 128, "max_burst": 256, "read_fifo": 256},
             ("verilator",)),
        # as the ULX3S builds it: the datapath reset and the run queue's and read slice's loads
        # through DCCAs, the registers' copies as TRELLIS_FF cells
        # (`make sim` only: CI runs the ECP5 cells in the next case)
        Case("d64-ecp5", {"data_width": 64}, ("verilator",), platform="ecp5", regression=False),
        # and with 16 address bits, as the ULX3S SoC builds it with dma_addr_width=16 (its
        # default is 32; the bench's memory is then the engine's whole address space)
        Case("d64-aw16-ecp5", {"data_width": 64, "addr_width": 16}, ("verilator",),
             platform="ecp5"),
        # with the element conversion stage, on both simulators: its own tests, and every
        # other test with their descriptors passing through it as plain copies; at 256 bits
        # in `make sim`
        Case("d64-convert", {"data_width": 64, "convert": True}),
        Case("d256-convert", {"data_width": 256, "convert": True}, ("verilator",),
             regression=False),
        # the smallest build: the element path alone, which takes every descriptor, and no
        # chains (the bench runs its chains' descriptors from the registers instead)
        Case("d64-small", {"data_width": 64, "paths": ("elements",), "chains": False},
             ("verilator",)),
    )),
    # the standalone cores (`make ip`) through their standard ports with cocotbext-axi's own
    # models, on Verilator; the same bench runs on Icarus through each core's FuseSoC sim
    # target, with the cores' default parameters (tests/test_ip.py). Small builds here (two
    # LUT lanes, 16-element atoms) keep CI's time: what is tested is the ports, which every
    # parameter set shares, and the blocks' own benches above test the datapaths at every width
    Bench("ip", "atomcube.sim.ip.test_ip", _ip_core, (
        Case("dma", {"core": "dma"}, ("verilator",)),
        Case("sparse", {"core": "sparse", "atom_elements": 16}, ("verilator",)),
        Case("lut_sdp", {"core": "lut_sdp", "lanes": 2}, ("verilator",)),
        # 38-bit samples, each in 5 bytes of tdata: `make sim` only (CI runs the CDP core on
        # Icarus through FuseSoC)
        Case("lut_cdp", {"core": "lut_cdp", "lanes": 1}, ("verilator",), regression=False),
    ), verilog=_ip_verilog),
    # the SoC through its UART: the line at 8 clock cycles a bit, the memory stalling at random.
    # The full SoC simulates at about 10 000 cycles a second and its tests run 40 million
    # cycles (7 minutes, 3 more to compile): `make sim` runs it, the CI suite the LUT-only SoC
    Bench("soc", "atomcube.sim.soc.test_soc", soc, (
        Case("bridge", {"dma": False, "sparse": False, "lut": False, "mem_bytes": 4096,
                        "baud": 3_125_000, "ram_stalls": 0xACE1}),
        Case("lut", {"dma": False, "sparse": False, "mem_bytes": 65536, "baud": 3_125_000,
                     "ram_stalls": 0xACE1}, ("verilator",)),
        Case("full", {"mem_bytes": 65536, "baud": 3_125_000, "ram_stalls": 0xACE1},
             ("verilator",), regression=False),
        # the iCEBreaker's reduced SoC as its board builds it (the serial LUT unit, the one-beat
        # LUT port, a 32-bit bus, no register slices), its UART at the simulation's rate
        Case("up5k", {**_board_soc("icebreaker"), "clk_hz": 25_000_000, "baud": 3_125_000,
                      "ram_stalls": 0xACE1}, ("verilator",)),
    )),
)


# Performance benches (`make bench`, `python -m atomcube.sim.bench`): each writes bench.json in
# its build directory. Verilator only: they run long.
PERF: tuple[Bench, ...] = (
    Bench("lut-perf", "atomcube.sim.lut.bench_lut", lut_unit, tuple(
        Case(f"{flavor}-l{lanes}", {"lanes": lanes, "flavor": flavor}, ("verilator",))
        for flavor in ("sdp", "cdp") for lanes in (1, 2, 4, 8, 16)) + tuple(
        Case(f"{flavor}-l{lanes}-serial", {"lanes": lanes, "flavor": flavor, "serial": True},
             ("verilator",)) for flavor, lanes in (("sdp", 1), ("sdp", 2), ("cdp", 1))) + tuple(
        Case(f"sdp-l{lanes}-fp16", {"lanes": lanes, "flavor": "sdp", "precision": "fp16"},
             ("verilator",)) for lanes in (1, 4, 16))),
    Bench("sparse-perf", "atomcube.sim.sparse.bench_sparse", sparse_decompressor, (
        Case("d64-a16", {"data_width": 64, "atom_elements": 16}, ("verilator",)),
        Case("d64-a32", {"data_width": 64, "atom_elements": 32}, ("verilator",)),
        Case("d256-a64", {"data_width": 256, "atom_elements": 64}, ("verilator",)),
    )),
    Bench("dma-perf", "atomcube.sim.dma.bench_dma", dma_engine, (
        Case("d64", {"data_width": 64}, ("verilator",)),
        Case("d256", {"data_width": 256}, ("verilator",)),
        Case("d64-convert", {"data_width": 64, "convert": True}, ("verilator",)),
        Case("d256-convert", {"data_width": 256, "convert": True}, ("verilator",)),
    )),
)


def nodes(simulators=SIMULATORS, regression_only: bool = False):
    """Every (bench, case, simulator) to run, in order (``regression_only``: the cases
    ``make test`` runs)."""
    return [(b, c, s) for b in BENCHES for c in b.cases for s in simulators
            if s in c.simulators and (not regression_only or c.regression is True
                                      or s in (c.regression or ()))]


def find(name: str) -> Bench:
    for b in BENCHES:
        if b.name == name:
            return b
    raise KeyError(f"no bench named {name!r} (benches: {', '.join(b.name for b in BENCHES)})")
