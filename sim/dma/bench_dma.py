"""Bus utilisation of the DMA layout engine (``make bench``).

Each conversion runs as a chain from memory with a read latency of 20 cycles and no stalls, at
three tensor sizes (64 KiB, 256 KiB, 1 MiB; only the first with ``BENCH_QUICK=1``, which
``python -m atomcube.sim.bench --quick`` sets), and as four jobs of 64 KiB in one chain (four
tensors, each converted to a place of its own: a chain's next descriptor is fetched and checked
while the one before it runs). ``cycles`` is the engine's own count from start to done
(descriptor fetches included). Utilisation on each side is useful bytes over bus bytes per
cycle times cycles: bytes read / (bus bytes x cycles), bytes written likewise. Goals (issue 8):
a plain copy at least 98 %, every layout conversion at least 90 % on the busier side. An engine
built with the conversion stage runs the copy and the conversions that change the element type
on the way (the write side is the busier for a widening one, the read side for a narrowing
one), with the same goal. Every result is also checked against the model. The rows go to
``bench.json``.
"""

import json
import os

import cocotb
import numpy as np

from atomcube.model.dma.compile import (
    dense_transpose,
    dmp,
    emit,
    nvdla_feature,
    nvdla_pixel,
    nvdla_weights,
    sophgo_local,
)
from atomcube.model.dma.descriptor import TYPES, Conversion, Program
from atomcube.model.dma.executor import execute
from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.pixel import PixelImage
from atomcube.model.nvdla.weights import WeightSpec
from atomcube.model.sophgo.local import LocalMemory, LocalTensor

from .test_dma import CHAIN, CONVERT, TB

LATENCY = 20
SIZE = 1 << 23
DENSE, IMAGE, CHAIN_AT = 0x10000, 0x300000, CHAIN + 0x600000
#: label: (H = W for C = 64 int8 channels, jobs in the chain)
SIZES = {"64 KiB": (32, 1), "256 KiB": (64, 1), "1 MiB": (128, 1), "4 x 64 KiB": (32, 4)}
if os.environ.get("BENCH_QUICK", "0") not in ("", "0"):
    SIZES = {"64 KiB": (32, 1)}
#: the distance between two jobs' tensors, on either side
JOB_STEP = 0x40000


def conversions(hw):
    """(name, program at (dense, image) addresses, source bytes, whether the source is at the
    image address, is it a copy)."""
    n, c = 1, 64
    rng = np.random.default_rng(hw)
    t8 = rng.integers(-128, 128, (n, c, hw, hw)).astype(np.int8)
    t16 = rng.standard_normal((n, c // 2, hw, hw)).astype(np.float16)

    def copy(dense, image):
        prog = Program()
        emit(prog, dense, image, 1, [(t8.size, t8.size, 1, 1)])
        return prog

    fmt = FeatureFormat("int8", t8.shape)
    lm = LocalMemory(64, -(-(t8.size // 64) // 128) * 128 + 128)
    so = LocalTensor(lm, 0, t8.shape, "int8", "aligned")
    lay = DmpLayout(t16.shape)
    spec = WeightSpec("dc", "int8", (c, c, hw // 8, hw // 8))
    k8 = rng.integers(-128, 128, spec.shape).astype(np.int8)
    raw8 = t8.view(np.uint8).ravel()
    rows = [
        ("copy", copy, raw8, False, True),
        ("NCHW -> NVDLA feature", lambda s, d: nvdla_feature(fmt, s, d), raw8, False, False),
        ("NVDLA feature -> NCHW", lambda s, d: nvdla_feature(fmt, s, d, unpack=True),
         fmt.pack(t8), True, False),
        ("NCHW -> Sophgo aligned", lambda s, d: sophgo_local(so, s, d), raw8, False, False),
        ("NCHW -> DMP DWHC (fp16)", lambda s, d: dmp(lay, s, d), t16.view(np.uint8).ravel(),
         False, False),
        ("DMP DWHC -> NCHW (fp16)", lambda s, d: dmp(lay, s, d, unpack=True),
         lay.pack(t16), True, False),
        ("NCHW -> NHWC", lambda s, d: dense_transpose(t8.shape, 1, s, d), raw8, False, False),
        ("OIHW -> NVDLA DC weights", lambda s, d: nvdla_weights(spec, s, d),
         k8.view(np.uint8).ravel(), False, False),
    ]
    if CONVERT:
        rows = rows[:1] + converting(rng, t8, fmt, hw)
    return rows


def converting(rng, t8, fmt, hw):
    """The rows of an engine with the conversion stage: a layout and a precision in one pass,
    widening (the write side busier) and narrowing (the read side busier); then two shapes
    whose path limits them: a 3-channel image (3-element rows on the tile path) and a pixel
    image with a mean per channel (a descriptor per channel, on the element path)."""
    raw8 = t8.view(np.uint8).ravel()
    t16 = rng.integers(-4000, 4000, t8.shape).astype(np.int16)
    lay = DmpLayout(t8.shape)
    y16 = rng.standard_normal(t8.shape).astype(np.float16)
    image = rng.integers(0, 256, (1, 3, 2 * hw, 2 * hw)).astype(np.uint8)
    rgb = DmpLayout(image.shape)
    pix = PixelImage("T_A8B8G8R8", 2 * hw, hw)
    samples = rng.integers(0, 256, pix.shape)

    def copy(source, destination):
        cvt = Conversion.between(source, destination, shift=3 if destination == "int8" else 0)
        es = np.dtype(TYPES[source]).itemsize
        ed = np.dtype(TYPES[destination]).itemsize

        def make(dense, image):
            prog = Program()
            emit(prog, dense, image, es, [(t8.size, t8.size, es, ed)], convert=cvt)
            return prog
        return make

    return [
        ("copy int8 -> fp16", copy("int8", "fp16"), raw8, False, False),
        ("copy int16 -> int8", copy("int16", "int8"), t16.view(np.uint8).ravel(), False,
         False),
        ("NCHW int8 -> DMP DWHC fp16", lambda s, d: dmp(lay, s, d, dense_type="int8",
                                                        shift=4), raw8, False, False),
        ("DMP DWHC fp16 -> NCHW int8", lambda s, d: dmp(lay, s, d, unpack=True,
                                                        dense_type="int8", scale=16),
         lay.pack(y16).view(np.uint8).ravel(), True, False),
        ("NCHW int16 -> NVDLA int8", lambda s, d: nvdla_feature(fmt, s, d, dense_type="int16",
                                                                shift=5),
         t16.view(np.uint8).ravel(), False, False),
        ("NVDLA int8 -> NCHW fp16", lambda s, d: nvdla_feature(fmt, s, d, unpack=True,
                                                               dense_type="fp16", shift=4),
         fmt.pack(t8), True, False),
        ("3-channel uint8 -> DMP fp16", lambda s, d: dmp(rgb, s, d, dense_type="uint8",
                                                         offset=128, shift=7),
         image.ravel(), False, False),
        ("T_A8B8G8R8 -> int8 planes", lambda s, d: nvdla_pixel(pix, d, s, "int8",
                                                               (124, 117, 104, 0)),
         pix.pack(samples), True, False),
    ]


@cocotb.test(timeout_time=4000, timeout_unit="ms")
async def bench_utilisation(dut):
    tb = await TB.start(dut, salt=31, stalls=False, latency=LATENCY, size=SIZE)
    rows = []
    for label, (hw, jobs) in SIZES.items():
        for name, make, src, src_image, is_copy in conversions(hw):
            tb.mem.fill(0)
            prog = Program()
            for k in range(jobs):
                at = k * JOB_STEP
                prog.descriptors += make(DENSE + at, IMAGE + at).descriptors
                tb.mem.load((IMAGE if src_image else DENSE) + at, src)
            model = tb.mem.mem.copy()
            execute(prog, model)
            raw = prog.chain(CHAIN_AT)
            tb.mem.load(CHAIN_AT, raw)
            await tb.drv.write("chain_addr", value=CHAIN_AT)
            await tb.drv.write("ctrl", start_chain=1)
            await tb.wait_done(max_cycles=200_000_000)
            code = (await tb.drv.error.read()).code
            assert code == 0, f"{name} {label}: error {code}"
            assert (tb.mem.mem[:CHAIN_AT] == model[:CHAIN_AT]).all(), f"{name} {label}: wrong"
            cycles = (await tb.drv.cycles.read()).value
            read = (await tb.drv.bytes_read.read()).value
            written = (await tb.drv.bytes_written.read()).value
            r_util = read / (tb.bb * cycles)
            w_util = written / (tb.bb * cycles)
            rows.append({"conversion": name, "size": label, "bytes": jobs * int(src.size),
                         "descriptors": len(prog), "cycles": cycles, "read": read,
                         "written": written, "read_util": r_util, "write_util": w_util,
                         "busier": max(r_util, w_util), "copy": is_copy, "bus_bytes": tb.bb,
                         "latency": LATENCY})
            dut._log.info("%s", rows[-1])
    with open("bench.json", "w") as f:
        json.dump(rows, f)
