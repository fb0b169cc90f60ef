"""Throughput and latency of the LUT unit (``make bench``): 100 000 samples, no stalls.

The integer pipeline runs the fitting tool's sigmoid on samples over [-16, 16) in Q.12; the
FP16 pipeline (``precision="fp16"``) NVDLA's compiler's FP16 sigmoid on FP32 samples over the
same range.

Cycles run from the first cycle a sample is offered to the last output transfer, so the
pipeline's fill is included. Latency is the cycles from the first sample being offered to its
result's output transfer. Every result is also checked against the model. The figures go
to ``bench.json`` in the build directory for ``python -m atomcube.sim.bench`` to tabulate.
"""

import json

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from atomcube.hw.lut.unit import FP_LATENCY, LATENCY
from atomcube.model.nvdla.lut import evaluate

from .test_lut import TB, StreamTransaction, fitted_config

SAMPLES = 100_000
SERIAL_SAMPLES = 5_000            # the serial datapath takes tens of cycles a sample


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def bench_throughput(dut):
    tb = await TB.start(dut, backpressure=False, salt=11)
    fp = tb.precision == "fp16"
    if fp:
        from atomcube.model.nvdla.lut_fit_fp16 import nvdla_baseline_fp16

        cfg = nvdla_baseline_fp16("sigmoid").config
    else:
        cfg = fitted_config(tb.flavor)
    await tb.load(cfg)
    L = tb.lanes
    count = SERIAL_SAMPLES if tb.serial else SAMPLES
    if fp:
        xs = tb.np_rng.uniform(-16, 16, count).astype(np.float32).view(np.uint32)
    else:
        xs = tb.np_rng.integers(-16 << 12, 16 << 12, count)
    await tb.drv.ctrl.write(start=1)
    transfers = [xs[k:k + L] for k in range(0, count, L)]
    for n, chunk in enumerate(transfers):
        tb.source.send_nowait(StreamTransaction(payload=tb.pack(
            list(chunk), (1 << len(chunk)) - 1, n == len(transfers) - 1)))
    cycle, first_in, first_out, last_out = 0, None, None, None
    outs = []
    while last_out is None:
        await RisingEdge(dut.clk)
        cycle += 1
        # from the first cycle a sample is offered: the serial datapath takes a transfer
        # only once it is done with it (the pipeline takes it at once, with no backpressure)
        if first_in is None and dut.i_stream__valid.value:
            first_in = cycle
        if dut.o_stream__valid.value and dut.o_stream__ready.value:
            if first_out is None:
                first_out = cycle
            out, *_ , mask, last = tb.unpack(int(dut.o_stream__payload.value))
            outs += [out[k] for k in range(L) if mask >> k & 1]
            if last:
                last_out = cycle
    if fp:
        want = evaluate(xs.view(np.float32), cfg, tb.flavor).out.view(np.uint32)
        outs = [v & 0xFFFFFFFF for v in outs]
    else:
        want = evaluate(xs, cfg, tb.flavor).out
    assert np.array_equal(np.array(outs), want), "results differ from the model"
    if not tb.serial:
        latency = FP_LATENCY if fp else LATENCY
        assert first_out - first_in == latency, \
            f"latency {first_out - first_in} cycles, the unit documents {latency}"
    cycles = last_out - first_in + 1
    result = {"lanes": L, "flavor": tb.flavor, "serial": tb.serial, "precision": tb.precision,
              "samples": count,
              "cycles": cycles, "samples_per_cycle": count / cycles,
              "latency": first_out - first_in}
    dut._log.info("%s", result)
    with open("bench.json", "w") as f:
        json.dump(result, f)
