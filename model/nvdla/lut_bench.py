"""Accuracy benchmark: atomcube's fitted LUTs against NVDLA's own compiler tables.

``python -m atomcube.model.nvdla.lut_bench`` (``make bench-model``) fits sigmoid (input Q19.12,
output Q0.15) and tanh (Q19.12 -> Q1.14), evaluates both through the bit-exact model over the same
sweep of the whole int32 input range, and prints the errors side by side with the goals: at most 4
LSB, and at most 60 % of NVDLA's max error. Then the same two for the FP16 pipeline, over every
finite FP16 input, against the FP16 tables NVDLA's compiler writes, with the goal of at most half
their max error in FP16 ULP. Exit status 1 if a goal is missed. """

import sys
import time

from ..report import table
from .lut_fit import Formats, fit, nvdla_baseline
from .lut_fit_fp16 import fit_fp16, nvdla_baseline_fp16

CASES = {"sigmoid": Formats(12, 15), "tanh": Formats(12, 14)}
GOAL_LSB = 4.0
GOAL_RATIO = 0.60
GOAL_RATIO_FP16 = 0.50


def main() -> int:
    rows = []
    for name, fmt in CASES.items():
        t0 = time.monotonic()
        print(f"fitting {name} ...", flush=True)
        base = nvdla_baseline(name, fmt)
        ours = fit(name, fmt)
        rows.append((name, fmt, base.report, ours.report, time.monotonic() - t0))
    head = ("function", "formats", "NVDLA max", "ours max", "ratio", "NVDLA mean", "ours mean",
            "samples", "goal", "fit time")
    body = []
    ok = True
    for name, fmt, b, o, dt in rows:
        ratio = o.max_lsb / b.max_lsb
        good = o.max_lsb <= GOAL_LSB and ratio <= GOAL_RATIO
        ok &= good
        body.append((name, f"Q.{fmt.in_frac} -> Q.{fmt.out_frac}", f"{b.max_lsb:.3f} LSB",
                     f"{o.max_lsb:.3f} LSB", f"{ratio:.0%}", f"{b.mean_lsb:.4f}",
                     f"{o.mean_lsb:.4f}", f"{o.samples:,}", "met" if good else "MISSED",
                     f"{dt:.1f} s"))
    print(table(head, body))
    print(f"\ngoals: max error <= {GOAL_LSB:g} LSB and <= {GOAL_RATIO:.0%} of NVDLA's")
    return 0 if (ok & _fp16()) else 1


def _fp16() -> bool:
    body = []
    ok = True
    for name in CASES:
        t0 = time.monotonic()
        print(f"fitting {name} for the FP16 pipeline ...", flush=True)
        b = nvdla_baseline_fp16(name).report
        o = fit_fp16(name).report
        ratio = o.max_ulp / b.max_ulp
        good = ratio <= GOAL_RATIO_FP16
        ok &= good
        body.append((name, f"{b.max_ulp:.3f} ULP", f"{o.max_ulp:.3f} ULP", f"{ratio:.0%}",
                     f"{b.mean_ulp:.4f}", f"{o.mean_ulp:.4f}", f"{b.max_rel:.2e}",
                     f"{o.max_rel:.2e}", f"{o.samples:,}", "met" if good else "MISSED",
                     f"{time.monotonic() - t0:.1f} s"))
    print(table(("FP16 pipeline", "NVDLA max", "ours max", "ratio", "NVDLA mean (ULP)",
                 "ours mean (ULP)", "NVDLA max rel", "ours max rel", "inputs", "goal",
                 "fit time"), body))
    print(f"\ngoal: max error (FP16 ULP, every finite FP16 input) <= {GOAL_RATIO_FP16:.0%} of "
          f"NVDLA's")
    return ok


if __name__ == "__main__":
    sys.exit(main())
