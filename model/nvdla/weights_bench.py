"""Speed benchmark of the weight tools (issue 5's goals).

``python -m atomcube.model.nvdla.weights_bench`` (part of ``make bench-model``) lays out a
direct-convolution int8 kernel of K = 2048, C = 1024, 3x3 (18.9 M weights, half of them zero),
compresses it, decompresses it and maps it back to OIHW, and prints seconds and MB/s per step (MB of
dense weights, 10^6 bytes), the best of several runs. Goals: layout >= 1000 MB/s, compression and
decompression >= 300 MB/s. NVDLA's own compiler (C++) lays this tensor out at about 730 MB/s on this
kind of machine. Exit status 1 if a goal is missed; ``--quick`` runs a 16x smaller tensor (for
tests) and reports without judging. """

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..report import best_time, table
from .weights import WeightSpec, compress, decompress

SHAPE = (2048, 1024, 3, 3)
GOALS = {"layout": 1000.0, "compress": 300.0, "decompress": 300.0}


def run(shape=SHAPE, runs: int = 5, seed: int = 1):
    """[(step, seconds, MB/s)] and whether every step's output checked out."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, shape, dtype=np.int8)
    w[rng.random(shape) < 0.5] = 0
    spec = WeightSpec("dc", "int8", shape)
    mb = w.nbytes / 1e6
    t_lay, image = best_time(lambda: spec.layout(w), runs)
    t_cmp, packed = best_time(lambda: compress(image), runs)
    t_dec, dense = best_time(lambda: decompress(packed.weight, packed.wmb, packed.wgs, spec), runs)
    t_un, back = best_time(lambda: spec.unlayout(dense), runs)
    ok = bool((dense == image.data).all() and (back == w).all())
    rows = [("layout", t_lay, mb / t_lay), ("compress", t_cmp, mb / t_cmp),
            ("decompress", t_dec, mb / t_dec), ("unlayout", t_un, mb / t_un)]
    return rows, ok, packed.stats()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m atomcube.model.nvdla.weights_bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a 16x smaller tensor, no verdict")
    args = ap.parse_args(argv)
    shape = (512, 256, 3, 3) if args.quick else SHAPE
    n = int(np.prod(shape))
    print(f"weights: direct convolution int8 {'x'.join(map(str, shape))} ({n / 1e6:.1f} M "
          f"weights, 50 % zeros), best of 5 ...", flush=True)
    rows, ok, stats = run(shape)
    good = True
    body = []
    for step, t, rate in rows:
        goal = GOALS.get(step)
        met = goal is None or rate >= goal
        good &= met
        body.append((step, f"{t * 1e3:.1f} ms", f"{rate:,.0f} MB/s",
                     f">= {goal:,.0f} MB/s" if goal else "-",
                     "-" if goal is None or args.quick else ("met" if met else "MISSED")))
    print(table(("step", "time", "throughput", "goal", "result"), body))
    print(f"compressed {stats.dense_bytes:,} -> {stats.compressed_bytes:,} bytes "
          f"(ratio {stats.ratio:.2f}, density {stats.overall_density:.1%}); "
          f"round trip {'exact' if ok else 'WRONG'}")
    if not ok:
        return 1
    return 0 if good or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
