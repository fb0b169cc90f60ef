"""The cocotb benches, launched from pytest: one node per bench, parameter set and simulator.

Nodes come from sim/benches.py (the list `make sim` runs, less the cases marked
``regression=False``: the widest builds, and the variants another case covers, which only `make
sim` runs, so that CI stays under its 30 minutes); add a bench there, not here.
Icarus nodes skip, with the one-line reason, where Icarus is not installed. Select with -k, e.g.
``pytest tests/test_cocotb.py -k "regbank and icarus"``.
"""

import pytest

from atomcube.sim import benches, runner

# the list's last benches (the SoC, the DMA engine) are its longest runs: they go first, so that
# the two workers of `make test` end on short ones (tests/conftest.py)
NODES = benches.nodes(regression_only=True)[::-1]


@pytest.mark.heavy
@pytest.mark.parametrize("bench, case, simulator", NODES,
                         ids=[f"{b.name}-{c.name}-{s}" for b, c, s in NODES])
def test_cocotb(bench, case, simulator):
    try:
        result = runner.run(bench, case, simulator, testcase=case.tests)
    except runner.SimulatorMissing as e:
        if simulator == "icarus":
            pytest.skip(str(e))
        raise
    print(f"{bench.name}/{case.name}/{simulator}: {result.tests} tests, {result.cycles} cycles, "
          f"seed {result.seed}, {result.wall_s:.1f} s")
    assert result.passed, result.describe_failure()
