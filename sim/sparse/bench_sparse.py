"""Throughput of the sparse weight decompressor (``make bench``): a density sweep.

A direct-convolution kernel (K = 128, C = 256, 3x3: 295 k weights) is compressed at densities
from 100 % down to 5 %, for int8 and int16. Each job runs from memory with a read latency of 20
cycles, without stalls, to the atom stream (always ready). ``cycles`` is the decompressor's own
count from start to done.

The bound is the lower of one atom per cycle and what the bus can deliver: bus bytes per cycle
times dense bytes over the compressed bytes that must be read (packed weights, the WMB bits in
use, WGS). Goal: at least 90 % of the bound at every point. Every job's stream is also checked
against the model. The rows go to ``bench.json`` for ``python -m atomcube.sim.bench`` to tabulate.
"""

import json

import cocotb
import numpy as np

from atomcube.model.nvdla.weights import WeightSpec, compress

from .test_sparse import TB

SHAPE = (128, 256, 3, 3)
DENSITIES = (1.0, 0.75, 0.5, 0.25, 0.1, 0.05)
LATENCY = 20


@cocotb.test(timeout_time=2000, timeout_unit="ms")
async def bench_density_sweep(dut):
    tb = await TB.start(dut, salt=21, stalls=False, latency=LATENCY)
    rows = []
    for precision in ("int8", "int16"):
        spec = WeightSpec("dc", precision, SHAPE)
        for density in DENSITIES:
            w = tb.kernels(spec, density)
            image = spec.layout(w)
            packed = compress(image)
            job, code, got, cycles, _ = await tb.run(packed, write=False)
            assert code == 0, f"{precision} {density}: error {code}"
            assert got == image.data.tobytes(), f"{precision} {density}: stream differs"
            dense = spec.image_bytes
            read = (int(packed.group_sizes.sum()) + -(-spec.elements // 8) +
                    4 * spec.groups)
            atom = tb.atom * spec.element_bytes
            bound = min(atom, tb.dw * dense / read)
            rate = dense / cycles
            rows.append({"precision": precision, "density": float(packed.stats().overall_density),
                         "dense_bytes": dense, "read_bytes": read, "cycles": cycles,
                         "bytes_per_cycle": rate, "bound": bound, "of_bound": rate / bound,
                         "atom_bytes": atom, "bus_bytes": tb.dw, "latency": LATENCY})
            dut._log.info("%s", rows[-1])
    with open("bench.json", "w") as f:
        json.dump(rows, f)
    assert np.isfinite([r["of_bound"] for r in rows]).all()
