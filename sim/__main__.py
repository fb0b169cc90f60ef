"""The cocotb regression: ``python -m atomcube.sim`` (what ``make sim`` runs).

Runs every bench of :mod:`sim.benches` on one simulator, a line of progress per finished case,
then a summary table. Exit status 1 if any case failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from atomcube.model.report import table

from . import benches, runner


def _run(bench_name, case_name, simulator, seed):
    bench = benches.find(bench_name)
    # a case name may appear once per simulator (sparse/d64-a32: all tests on Verilator, fewer
    # on Icarus): take the one this simulator runs
    case = next(c for c in bench.cases if c.name == case_name and simulator in c.simulators)
    return runner.run(bench, case, simulator, seed=seed, testcase=case.tests)


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"


def summary(results) -> str:
    head = ("bench", "case", "parameters", "simulator", "result", "tests", "cycles", "wall", "seed")
    return table(head, [(r.bench, r.case, _fmt_params(r.params), r.simulator,
                         "PASS" if r.passed else "FAIL", f"{r.tests - r.failures}/{r.tests}",
                         f"{r.cycles:,}", f"{r.wall_s:.1f} s", str(r.seed or "-"))
                        for r in results])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.sim", description=__doc__.split("\n")[0])
    ap.add_argument("--simulator", default=os.environ.get("SIM") or "verilator",
                    choices=runner.SIMULATORS, help="default: $SIM, else verilator")
    ap.add_argument("--bench", action="append", help="only this bench (repeatable)")
    ap.add_argument("--seed", type=int, help="cocotb random seed (default: a new one per case)")
    ap.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)

    try:
        runner.simulator_env(args.simulator)
    except runner.SimulatorMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    nodes = [(b, c) for b, c, s in benches.nodes((args.simulator,))
             if not args.bench or b.name in args.bench]
    if not nodes:
        print("no bench matches", file=sys.stderr)
        return 2
    print(f"cocotb regression on {args.simulator}: {len(nodes)} cases, {args.jobs} at a time")
    t0 = time.monotonic()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_run, b.name, c.name, args.simulator, args.seed) for b, c in nodes]
        for i, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            results.append(r)
            print(f"[{i}/{len(nodes)}] {r.bench}/{r.case} {'PASS' if r.passed else 'FAIL'} "
                  f"({r.wall_s:.1f} s)", flush=True)
    order = {(b.name, c.name): i for i, (b, c) in enumerate(nodes)}
    results.sort(key=lambda r: order[(r.bench, r.case)])
    print()
    print(summary(results))
    failed = [r for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed "
          f"in {time.monotonic() - t0:.1f} s")
    for r in failed:
        print("\n" + r.describe_failure(), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
