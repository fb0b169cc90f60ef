"""Speed benchmark of the weight tools.

``python -m atomcube.model.nvdla.weights_bench`` (part of ``make bench-model``) lays out a
direct-convolution int8 kernel of K = 2048, C = 1024, 3x3 (18.9 M weights, half of them zero),
compresses it, decompresses it and maps it back to OIHW, and prints seconds and MB/s per step
(MB of dense weights, 10^6 bytes), the best of several runs. Goals: layout >= 1000 MB/s,
compression and decompression >= 300 MB/s. The same kernel is then laid out (and compressed,
where the configuration has compression) in each of NVDLA's configurations against the same
goals, and ``atomcube net`` runs on the pretrained ppocr-det (docs/net.md), timed whole. Exit
status 1 if a goal is missed; ``--quick`` runs a 16x smaller tensor (for tests) and reports
without judging. """

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..report import best_time, table
from .config import CONFIGS
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


def per_config(shape=SHAPE, runs: int = 3, seed: int = 1):
    """[(config, layout MB/s, unlayout MB/s, compress MB/s or None, exact)] for each
    configuration (the same half-zero int8 kernel)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 128, shape, dtype=np.int8)
    w[rng.random(shape) < 0.5] = 0
    mb = w.nbytes / 1e6
    rows = []
    for name, cfg in CONFIGS.items():
        spec = WeightSpec("dc", "int8", shape, config=cfg)
        t_lay, image = best_time(lambda spec=spec: spec.layout(w), runs)
        t_un, back = best_time(lambda spec=spec, image=image: spec.unlayout(image.data), runs)
        rate = None
        if cfg.compression:
            t_cmp, _ = best_time(lambda image=image: compress(image), runs)
            rate = mb / t_cmp
        rows.append((name, mb / t_lay, mb / t_un, rate, bool((back == w).all())))
    return rows


def net_flow_seconds(runs: int = 3):
    """Seconds for ``atomcube net ppocr-det`` (read, quantise, lay out, compress, plan, write
    the four files), best of ``runs``; None where the example network is not installed."""
    import tempfile

    from ..cli import main as cli

    try:
        from ..net.graph import example
        example("ppocr-det")
    except (ImportError, ValueError):
        return None
    import contextlib
    import io

    def once():
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            assert cli(["net", "ppocr-det", "-o", f"{tmp}/det"]) == 0

    return best_time(once, runs)[0]


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
    print("per NVDLA configuration, the same kernel, best of 3 ...", flush=True)
    body = []
    for name, lay, un, cmp_, exact in per_config(shape):
        met = lay >= GOALS["layout"] and (cmp_ is None or cmp_ >= GOALS["compress"])
        good &= met
        ok &= exact
        body.append((name, f"{lay:,.0f} MB/s", f"{un:,.0f} MB/s",
                     "-" if cmp_ is None else f"{cmp_:,.0f} MB/s",
                     "exact" if exact else "WRONG",
                     "-" if args.quick else ("met" if met else "MISSED")))
    print(table(("config", "layout", "unlayout", "compress", "round trip",
                 f"goal (layout >= {GOALS['layout']:,.0f}, compress >= "
                 f"{GOALS['compress']:,.0f} MB/s)"), body))
    seconds = net_flow_seconds(1 if args.quick else 3)
    if seconds is None:
        print("atomcube net ppocr-det: the example network is not installed (make setup)")
    else:
        print(f"atomcube net ppocr-det (64 layers, 1.16 M weights, nv_full int8, the four files "
              f"written): {seconds:.2f} s")
    if not ok:
        return 1
    return 0 if good or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
