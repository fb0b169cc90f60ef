"""Speed benchmark of the activation format tools, as a ratio to numpy's own floor.

``python -m atomcube.model.layout_bench`` (part of ``make bench-model``) packs and unpacks a
64 MiB int8 tensor (N = 4, C = 256, H = W = 256) into each format and back: NVDLA feature data
(packed, nv_full), Sophgo local memory (128-byte aligned, 64 NPUs) and DMP DWHC (8-channel
chunks; the int8 tensor becomes fp16 on the way, as the FPGA wants it). For each direction it
prints the model's MB/s (MB of the tensor, 10^6 bytes, best of 3) and numpy's *floor* for the
same work, measured in the same run: one bare ``astype`` of the source elements to the
destination's element type, plus one copy of the destination's bytes into a fresh array. No
layout can be done in less, so the ratio (floor time over model time) says how close to the
machine the model is, whatever the machine: goal >= 0.8 for every format, both directions.
Exit status 1 if a goal is missed; ``--quick`` runs a 16x smaller tensor without a verdict."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .dmp.layout import DmpLayout
from .nvdla.feature import FeatureFormat
from .report import best_time, table
from .sophgo.local import LocalMemory, LocalTensor

GOAL = 0.8


def floor_seconds(source: np.ndarray, dtype, out_bytes: int, runs: int) -> float:
    """numpy's least time for a conversion: ``source.astype(dtype)`` plus a copy of
    ``out_bytes`` bytes into a fresh array (each the best of ``runs``)."""
    t_cast, cast = best_time(lambda: source.astype(dtype), runs)
    flat = cast.view(np.uint8).ravel()
    reps = -(-out_bytes // max(flat.size, 1))
    src = flat if reps == 1 else np.tile(flat, reps)
    src = src[:out_bytes]

    def copy():
        out = np.empty(out_bytes, np.uint8)
        out[...] = src
        return out

    t_copy, _ = best_time(copy, runs)
    return t_cast + t_copy


def run(shape=(4, 256, 256, 256), runs=3):
    """[(format, pack s, unpack s, pack floor s, unpack floor s, exact)] and the tensor's
    bytes."""
    rng = np.random.default_rng(1)
    t = rng.integers(-128, 128, shape, dtype=np.int8)
    rows = []

    def measure(name, pack, unpack, image_dtype, want):
        tp, img = best_time(pack, runs)
        tu, back = best_time(lambda: unpack(img), runs)
        image = np.asarray(img).reshape(-1)
        fp = floor_seconds(t, image_dtype, image.nbytes, runs)
        fu = floor_seconds(image.view(image_dtype), back.dtype, back.nbytes, runs)
        rows.append((name, tp, tu, fp, fu, bool((back == want).all())))

    nv = FeatureFormat("int8", shape)
    measure("NVDLA feature data", lambda: nv.pack(t), nv.unpack, np.int8, t)

    n, c, h, w = shape
    npu_bytes = -(-(n * (-(-c // 64)) * h * w) // 128) * 128
    lm = LocalMemory(64, npu_bytes)
    so = LocalTensor(lm, 0, shape, "int8", "aligned")
    local = lm.empty()

    def store():
        so.store(local, t)
        return local

    measure("Sophgo aligned local memory", store, so.load, np.int8, t)

    dm = DmpLayout(shape)
    measure("DMP DWHC (fp16)", lambda: dm.pack(t), dm.unpack, np.float16,
            t.astype(np.float16))
    return rows, t.nbytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.model.layout_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 16x smaller tensor, no verdict")
    args = ap.parse_args(argv)
    shape = (1, 64, 256, 256) if args.quick else (4, 256, 256, 256)
    print(f"layouts: int8 tensor {'x'.join(map(str, shape))} "
          f"({np.prod(shape) / 2 ** 20:.0f} MiB), best of 3, against numpy's floor "
          f"(astype + one copy of the output) ...", flush=True)
    rows, nbytes = run(shape)
    mb = nbytes / 1e6
    ok = True
    body = []
    for name, tp, tu, fp, fu, exact in rows:
        ratios = (fp / tp, fu / tu)
        good = min(ratios) >= GOAL and exact
        ok &= exact and (good or args.quick)
        body.append((name, f"{mb / tp:,.0f} MB/s", f"{mb / fp:,.0f} MB/s", f"{ratios[0]:.2f}",
                     f"{mb / tu:,.0f} MB/s", f"{mb / fu:,.0f} MB/s", f"{ratios[1]:.2f}",
                     "exact" if exact else "WRONG",
                     "-" if args.quick else ("met" if good else "MISSED")))
    print(table(("format", "pack", "floor", "ratio", "unpack", "floor", "ratio", "round trip",
                 f"goal (ratio >= {GOAL})"), body))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
