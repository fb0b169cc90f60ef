"""Speed benchmark of the activation format tools (issue 7's goal).

``python -m atomcube.model.layout_bench`` (part of ``make bench-model``) packs and unpacks a 64 MiB
int8 tensor (N = 4, C = 256, H = W = 256) into each format and back, and prints MB/s per direction
(MB of the tensor, 10^6 bytes, best of 3). The formats are NVDLA feature data (packed), Sophgo local
memory (128-byte aligned, 64 NPUs x 1 MiB) and DMP DWHC (8-channel chunks; the int8 tensor becomes
fp16 on the way, as the FPGA wants it). Goal: at least 500 MB/s each way. Exit status 1 if a goal is
missed; ``--quick`` runs a 16x smaller tensor without a verdict. """

from __future__ import annotations

import argparse
import sys

import numpy as np

from .dmp.layout import DmpLayout
from .nvdla.feature import FeatureFormat
from .report import best_time, table
from .sophgo.local import LocalMemory, LocalTensor

GOAL = 500.0


def run(shape=(4, 256, 256, 256), runs=3):
    rng = np.random.default_rng(1)
    t = rng.integers(-128, 128, shape, dtype=np.int8)
    mb = t.nbytes / 1e6
    rows = []
    nv = FeatureFormat("int8", shape)
    tp, img = best_time(lambda: nv.pack(t), runs)
    tu, back = best_time(lambda: nv.unpack(img), runs)
    rows.append(("NVDLA feature data", mb / tp, mb / tu, bool((back == t).all())))

    n, c, h, w = shape
    npu_bytes = -(-(n * (-(-c // 64)) * h * w) // 128) * 128
    lm = LocalMemory(64, npu_bytes)
    so = LocalTensor(lm, 0, shape, "int8", "aligned")
    local = lm.empty()
    tp, _ = best_time(lambda: so.store(local, t), runs)
    tu, back = best_time(lambda: so.load(local), runs)
    rows.append(("Sophgo aligned local memory", mb / tp, mb / tu, bool((back == t).all())))

    dm = DmpLayout(shape)
    tp, img = best_time(lambda: dm.pack(t), runs)
    tu, back = best_time(lambda: dm.unpack(img), runs)
    rows.append(("DMP DWHC (fp16)", mb / tp, mb / tu,
                 bool((back == t.astype(np.float16)).all())))
    return rows, t.nbytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.model.layout_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 16x smaller tensor, no verdict")
    args = ap.parse_args(argv)
    shape = (1, 64, 256, 256) if args.quick else (4, 256, 256, 256)
    print(f"layouts: int8 tensor {'x'.join(map(str, shape))} "
          f"({np.prod(shape) / 2 ** 20:.0f} MiB), best of 3 ...", flush=True)
    rows, _ = run(shape)
    ok = True
    body = []
    for name, pack, unpack, exact in rows:
        good = pack >= GOAL and unpack >= GOAL and exact
        ok &= good or args.quick
        ok &= exact
        body.append((name, f"{pack:,.0f} MB/s", f"{unpack:,.0f} MB/s",
                     "exact" if exact else "WRONG",
                     "-" if args.quick else ("met" if good else "MISSED")))
    print(table(("format", "pack", "unpack", "round trip", f"goal (>= {GOAL:.0f} MB/s)"),
                body))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
