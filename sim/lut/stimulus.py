"""What the LUT unit's cocotb bench (sim/lut/test_lut.py) sends to its FP16 pipeline: random
configurations with the FP16 corner
cases in their tables, bounds and scales, and samples around every edge a configuration has.
All values are bit patterns (unsigned), as :class:`~model.nvdla.lut.LutConfig` takes them."""

import numpy as np

from atomcube.model.nvdla.lut import LE_ENTRIES, LO_ENTRIES, LutConfig
from atomcube.model.nvdla.nvfloat import FP16, FP32, bits_of, value_of

__all__ = ["FP16_SPECIALS", "FP32_SPECIALS", "random_fp16_config", "fp16_samples"]

#: FP16 patterns a table entry or scale may hold beyond ordinary numbers: signed zeros,
#: infinities, NaNs (quiet, signalling, with payloads), denormals, the largest finite
FP16_SPECIALS = (0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE55, 0x0001, 0x83FF,
                 0x7BFF, 0xFBFF, 0x0400)
#: FP32 samples every run includes: signed zeros, infinities, NaNs, denormals, the extremes
FP32_SPECIALS = (0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                 0xFFC12345, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
                 0x3F800000, 0xBF800000)


def _fp16_entries(rng, n):
    """``n`` FP16 patterns: mostly numbers in [-8, 8], some specials."""
    v = bits_of((rng.random(n) * 16 - 8).astype(np.float32), FP16)
    special = rng.random(n) < 0.04
    v[special] = rng.choice(FP16_SPECIALS, int(special.sum()))
    return v


def _fp32(value):
    return int(bits_of(np.float32(value), FP32))


def random_fp16_config(rng) -> LutConfig:
    """A configuration of the FP16 pipeline with random registers and tables: both LE
    modes, selects and offsets from small to extreme, bounds that are numbers or now and
    then infinities or NaN, random FP16 scales."""
    def bound():
        r = rng.random()
        if r < 0.06:
            return int(rng.choice([0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001]))
        return _fp32(rng.choice([rng.uniform(-20, 20), rng.uniform(-1e4, 1e4)]))

    def small_or_any(lo, hi, a, b):
        return int(rng.integers(a, b + 1) if rng.random() < 0.8 else rng.integers(lo, hi + 1))

    exp = rng.random() < 0.4
    return LutConfig(
        precision="fp16",
        le_table=_fp16_entries(rng, LE_ENTRIES), lo_table=_fp16_entries(rng, LO_ENTRIES),
        le_function=0 if exp else 1,
        le_index_offset=small_or_any(-128, 127, -6, 4),
        le_index_select=small_or_any(-128, 127, -8, 4),
        lo_index_select=small_or_any(-128, 127, -8, 4),
        le_start=bound(), le_end=bound(), lo_start=bound(), lo_end=bound(),
        **{f"{t}_{s}_scale": (int(rng.choice(FP16_SPECIALS)) if rng.random() < 0.1 else
                              int(bits_of(np.float32(rng.uniform(-4, 4)), FP16)))
           for t in ("le", "lo") for s in ("uflow", "oflow")},
        uflow_priority=int(rng.integers(0, 2)), oflow_priority=int(rng.integers(0, 2)),
        hybrid_priority=int(rng.integers(0, 2)))


def fp16_samples(rng, cfg: LutConfig, count: int) -> np.ndarray:
    """FP32 samples (uint32 patterns) for ``cfg``: the specials, each bound and its
    neighbours, entries' positions of both tables (first, second, last, past the last), the
    octaves of an exponential table, and ``count`` random ones (numbers and patterns)."""
    xs = list(FP32_SPECIALS)
    f32 = lambda bits: float(value_of(bits & 0xFFFFFFFF, FP32))
    for name in ("le_start", "le_end", "lo_start", "lo_end"):
        b = getattr(cfg, name) & 0xFFFFFFFF
        xs += [b, (b + 1) & 0xFFFFFFFF, (b - 1) & 0xFFFFFFFF]
    for t, n in (("le", LE_ENTRIES - 1), ("lo", LO_ENTRIES - 1)):
        start = f32(getattr(cfg, f"{t}_start"))
        step = 2.0 ** max(min(getattr(cfg, f"{t}_index_select"), 100), -100)
        for k in (0.5, 1, 1.5, n - 1, n - 0.5, n, n + 1):
            xs.append(_fp32(np.clip(start + k * step, -3e38, 3e38)))
    if cfg.le_function == 0:
        start = f32(cfg.le_start)
        for e in range(cfg.le_index_offset - 1, min(cfg.le_index_offset + 66, 128)):
            xs.append(_fp32(np.clip(start + 2.0 ** e * 1.5, -3e38, 3e38)))
    numbers = rng.uniform(-30, 30, count // 2).astype(np.float32).view(np.uint32)
    patterns = rng.integers(0, 1 << 32, count - count // 2, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([np.array(xs, np.uint32), numbers, patterns])
