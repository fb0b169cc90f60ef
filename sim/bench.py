"""Performance benches: ``python -m sim.bench`` (what ``make bench`` runs).

Runs every bench in :data:`sim.benches.PERF` on Verilator and prints its figures as a table per
block, with the goal each is held to. Exit status 1 if a goal is missed or a run fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from model.report import table

from . import benches, runner

# LUT unit: at least 0.99 x lanes samples per cycle over 100 000 samples without backpressure.
LUT_GOAL = 0.99


def _lut_rows(results):
    head = ("flavor", "lanes", "samples", "cycles", "samples/cycle", "per lane", "latency",
            "goal (>= 0.99 x lanes)")
    rows, ok = [], True
    for r in results:
        spc = r["samples_per_cycle"]
        good = spc >= LUT_GOAL * r["lanes"]
        ok &= good
        rows.append((r["flavor"], str(r["lanes"]), f"{r['samples']:,}", f"{r['cycles']:,}",
                     f"{spc:.4f}", f"{spc / r['lanes']:.4f}", f"{r['latency']} cycles",
                     "met" if good else "MISSED"))
    return head, rows, ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", help="only this case (e.g. sdp-l4; repeatable)")
    args = ap.parse_args(argv)
    try:
        runner.simulator_env("verilator")
    except runner.SimulatorMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    ok = True
    for bench in benches.PERF:
        results = []
        for case in bench.cases:
            if args.case and case.name not in args.case:
                continue
            t0 = time.monotonic()
            print(f"{bench.name}/{case.name} ...", end=" ", flush=True)
            r = runner.run(bench, case, "verilator")
            out = runner.BUILD / "sim" / bench.name / case.name / "verilator" / "bench.json"
            if not r.passed or not out.exists():
                print("FAILED")
                print(r.describe_failure(), file=sys.stderr)
                ok = False
                continue
            results.append(json.loads(out.read_text()))
            print(f"{time.monotonic() - t0:.1f} s")
        if results:
            head, rows, good = _lut_rows(results)
            ok &= good
            print(f"\n{bench.name}: throughput without backpressure, latency of the first sample")
            print(table(head, rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
