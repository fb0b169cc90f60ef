"""What every LUT unit bench checks at the end of a run, whatever drives its ports (the
component's own stream, sim/lut; the standalone core's AXI4-Stream, sim/ip)."""

import numpy as np

from atomcube.model.nvdla.lut import COUNTERS, evaluate


async def end_run(drv):
    """Wait for ``status.done`` with ``busy`` clear (the run's last result has left), then
    clear it."""
    for _ in range(100):
        st = await drv.status.read()
        if st.done and not st.busy:
            break
    else:
        raise AssertionError("the run did not end (status.done never rose)")
    await drv.status.write(done=1)


async def check_run(drv, cfg, flavor, sent, got, what):
    """The results ``got`` ((out, chosen, state) per sample, in order) and the statistics
    counters equal the model's for the samples ``sent``. For an FP16 configuration samples
    and results are FP32 bit patterns, compared as unsigned 32-bit words."""
    if cfg.precision == "fp16":
        want = evaluate(np.array(sent, dtype=np.uint32).view(np.float32), cfg, flavor)
        out = want.out.view(np.uint32)
        got = [(g[0] & 0xFFFFFFFF, *g[1:]) for g in got]
    else:
        want = evaluate(np.array(sent, dtype=np.int64), cfg, flavor)
        out = want.out
    assert len(got) == len(sent), f"{what}: {len(got)} results for {len(sent)} samples"
    for k, g in enumerate(got):
        w = (int(out[k]), int(want.chosen[k]), int(want.state[k]))
        assert tuple(g) == w, (f"{what}: sample {k} x={sent[k]}: unit (out, chosen, state) = "
                               f"{tuple(g)}, model {w}")
    for name in COUNTERS[flavor]:
        v = (await drv.read(f"cnt_{name}")).value
        assert v == want.counters[name], f"{what}: counter {name} {v}, model " \
                                         f"{want.counters[name]}"
