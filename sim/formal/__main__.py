"""``python -m atomcube.sim.formal`` (what ``make formal`` runs): every proof in every mode it
lists, a line as each finishes, then a table. Exit status 1 if any failed.

    python -m atomcube.sim.formal                  # all of them
    python -m atomcube.sim.formal skid regbank     # by name
    python -m atomcube.sim.formal --list
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from atomcube.model.report import table

from . import proofs, runner


def _check(name: str, mode: str) -> runner.Outcome:
    p = proofs.find(name)
    try:
        harness, ports = p.build()
        return runner.run(name, harness, ports, mode, p.depth)
    except Exception as e:            # a harness that does not build fails, and says why
        return runner.Outcome(name, mode, p.depth, False, 0.0,
                              [f"{type(e).__name__}: {e}"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.sim.formal",
                                 description="Formal proofs of the blocks' handshakes (sby).")
    ap.add_argument("names", nargs="*", help="proofs to run (default: all)")
    ap.add_argument("--list", action="store_true", help="list the proofs and stop")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="proofs run at once (default: one per core)")
    args = ap.parse_args(argv)
    if args.list:
        print(table(("proof", "modes", "depth", "what"),
                    [(p.name, ", ".join(p.modes), str(p.depth), p.title) for p in proofs.PROOFS]))
        return 0
    try:
        chosen = [proofs.find(n) for n in args.names] if args.names else proofs.PROOFS
    except KeyError as e:
        ap.error(e.args[0])
    try:
        runner._tool_dir()
    except runner.ToolsMissing as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 2
    start = time.monotonic()
    outcomes = []
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(_check, p.name, mode) for p in chosen for mode in p.modes]
        for f in as_completed(futures):
            o = f.result()
            outcomes.append(o)
            print(f"{'PASS' if o.passed else 'FAIL'}  {o.proof} {o.mode} "
                  f"({o.seconds:.1f} s)", flush=True)
            for line in o.problems if not o.passed else []:
                print(f"      {line}", flush=True)
    order = {(p.name, mode): i for i, p in enumerate(chosen) for i2, mode in enumerate(p.modes)}
    outcomes.sort(key=lambda o: (order[o.proof, o.mode], o.mode))
    print()
    print(table(("proof", "mode", "bound", "result", "time"),
                [(o.proof, o.mode, "any" if o.mode == "prove" else f"{o.depth} cycles",
                  "PASS" if o.passed else "FAIL", f"{o.seconds:.1f} s") for o in outcomes]))
    failed = [o for o in outcomes if not o.passed]
    print(f"\n{len(outcomes) - len(failed)}/{len(outcomes)} passed in "
          f"{time.monotonic() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
