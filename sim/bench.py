"""Performance benches: ``python -m atomcube.sim.bench`` (what ``make bench`` runs).

Runs every bench in :data:`sim.benches.PERF` on Verilator and prints its figures as a table per
block, with the goal each is held to. Exit status 1 if a goal is missed or a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from atomcube.model.report import table

from . import benches, runner

# LUT unit: at least 0.99 x lanes samples per cycle over 100 000 samples without backpressure.
LUT_GOAL = 0.99
# Sparse decompressor: at least 90 % of the bound (an atom per cycle, or what the bus delivers)
SPARSE_GOAL = 0.90


def _lut_rows(results):
    head = ("flavor", "lanes", "samples", "cycles", "samples/cycle", "per lane", "latency",
            "goal (>= 0.99 x lanes)")
    rows, ok = [], True
    for r in results:
        spc = r["samples_per_cycle"]
        if r.get("serial"):
            # the serial datapath has no rate goal: it trades rate for size
            goal = f"serial: {1 / spc:.1f} cycles a sample"
        else:
            good = spc >= LUT_GOAL * r["lanes"]
            ok &= good
            goal = "met" if good else "MISSED"
        rows.append((r["flavor"] + (" serial" if r.get("serial") else "") +
                     (" fp16" if r.get("precision") == "fp16" else ""), str(r["lanes"]),
                     f"{r['samples']:,}", f"{r['cycles']:,}", f"{spc:.4f}",
                     f"{spc / r['lanes']:.4f}", f"{r['latency']} cycles", goal))
    return head, rows, ok


def _sparse_rows(results):
    head = ("bus", "atom", "precision", "density", "dense bytes", "read bytes", "cycles",
            "bytes/cycle", "bound", "of bound", "goal (>= 90 %)")
    rows, ok = [], True
    for case in results:
        for r in case:
            good = r["of_bound"] >= SPARSE_GOAL
            ok &= good
            rows.append((f"{8 * r['bus_bytes']}-bit", f"{r['atom_bytes']} B", r["precision"],
                         f"{r['density']:.0%}", f"{r['dense_bytes']:,}", f"{r['read_bytes']:,}",
                         f"{r['cycles']:,}", f"{r['bytes_per_cycle']:.2f}", f"{r['bound']:.2f}",
                         f"{r['of_bound']:.1%}", "met" if good else "MISSED"))
    return head, rows, ok


# DMA engine: a plain copy at least 98 % of the bus, layout conversions at least 90 % on the
# busier side (issue 8)
DMA_COPY_GOAL = 0.98
DMA_GOAL = 0.90


def _dma_rows(results):
    head = ("bus", "conversion", "size", "descriptors", "cycles", "read", "write", "busier",
            "goal")
    rows, ok = [], True
    for case in results:
        for r in case:
            goal = DMA_COPY_GOAL if r["copy"] else DMA_GOAL
            good = r["busier"] >= goal
            ok &= good
            rows.append((f"{8 * r['bus_bytes']}-bit", r["conversion"], r["size"],
                         str(r["descriptors"]), f"{r['cycles']:,}", f"{r['read_util']:.1%}",
                         f"{r['write_util']:.1%}", f"{r['busier']:.1%}",
                         f">= {goal:.0%}: {'met' if good else 'MISSED'}"))
    return head, rows, ok


TABLES = {
    "lut-perf": (_lut_rows, "throughput without backpressure, latency of the first sample"),
    "sparse-perf": (_sparse_rows, "dense bytes per cycle against the bound, read latency 20 "
                                  "cycles, stream output"),
    "dma-perf": (_dma_rows, "bus utilisation per side (useful bytes / bus bytes x cycles), "
                            "read latency 20 cycles, chains from memory"),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.sim.bench",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", help="only this case (e.g. sdp-l4; repeatable)")
    ap.add_argument("--quick", action="store_true",
                    help="the smallest size of each bench only (a check of the figures in "
                         "minutes, not the full table)")
    args = ap.parse_args(argv)
    if args.quick:
        os.environ["BENCH_QUICK"] = "1"
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
            rows_of, title = TABLES[bench.name]
            head, rows, good = rows_of(results)
            ok &= good
            print(f"\n{bench.name}: {title}")
            print(table(head, rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
