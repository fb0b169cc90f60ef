"""Regenerate tests/data/nvdla_lut_fp16.npz from NVDLA's own C model.

    python tests/nvdla_ref/make_vectors.py --nvdla PATH [--seed N] [--out FILE]

PATH is a checkout of https://github.com/nvdla/hw (its ``cmod/hls`` tree and CDP's HLS
wrapper are what is read). The script copies the headers, the two SDP Y-stage functions, the
float operations of ``cmod/hls/vlibs`` and CDP's table lookup (``HLS_CDP_lookup_lut``, cut
out of ``cmod/hls_wrapper/cdp_hls_wrapper.cpp``) into a temporary folder, makes two edits that
today's g++ needs to compile the old ``ac_int`` headers (casts in template arguments; a
``template`` keyword), builds ``reference.cpp`` beside this script against them, and records:

- ``ops``: NVDLA's float operations (FP32 add and subtract, FP17 add and multiply, the three
  conversions, fraction to FP17, FP32 to index and fraction) on random bit patterns weighted
  towards zeros, denormals, infinities, NaNs and near-cancelling pairs;
- ``lut``: random FP16 LUT configurations, each with samples around and far outside its
  tables and special values, through NVDLA's index and interpolation stages;
- ``cdp``: random configurations of CDP's FP16 LUT (from a generator of their own, seeded
  with the seed plus one), each with such samples, through both of its tables.

The test (tests/test_lut_fp16.py) checks ``model.nvdla.nvfloat`` and ``model.nvdla.lut``
against every recorded result. Needs g++ and numpy; run it only to change the vectors.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "nvdla_lut_fp16.npz"
SOURCES = ["cmod/hls/include/" + n for n in ("ac_int.h", "ac_fixed.h", "ac_channel.h",
                                              "nvdla_common.h", "nvdla_float.h", "nvdla_int.h")]
SOURCES += ["cmod/hls/sdp/" + n for n in ("sdp.h", "sdp_y_idx.cpp", "sdp_y_inp.cpp")]
#: the float operations CDP's lookup calls
VLIBS = ["fp32_add", "fp32_sub", "fp32_to_fp17", "fp16_to_fp17", "fp16_to_fp32", "fp17_mul",
         "fp17_add", "uint16_to_fp17"]
SOURCES += ["cmod/hls/vlibs/vlibs.h"] + [f"cmod/hls/vlibs/{n}.cpp" for n in VLIBS]
CDP_WRAPPER = "cmod/hls_wrapper/cdp_hls_wrapper.cpp"
OPS = ("add32", "sub32", "add17", "mul17", "fp32_fp17", "fp16_fp17", "fp17_fp32", "fraction",
       "index")
OP_SAMPLES = 1000
CONFIGS = 16
LUT_SAMPLES = 600
# (sign, exponent, mantissa) widths of the formats the operations take
FORMATS = {"fp16": (5, 10), "fp17": (6, 10), "fp32": (8, 23)}


def build(nvdla: Path, work: Path) -> Path:
    for name in SOURCES:
        src = nvdla / name
        if not src.is_file():
            sys.exit(f"{src}: not found (--nvdla must be a checkout of nvdla/hw)")
        shutil.copy(src, work / src.name)
    ac_int = work / "ac_int.h"
    # an unsigned expression as a template argument is a narrowing error today
    ac_int.write_text(re.sub(r"iv_extend<([^>]*)>\(r", r"iv_extend<(int)(\1)>(r",
                             ac_int.read_text()))
    ac_fixed = work / "ac_fixed.h"
    ac_fixed.write_text(ac_fixed.read_text().replace(").slc<AC_MAX(I,1)>(0)",
                                                     ").template slc<AC_MAX(I,1)>(0)"))
    # CDP's lookup alone, without the rest of its wrapper (SystemC, the register headers)
    wrapper = (nvdla / CDP_WRAPPER).read_text()
    start = wrapper.index("void HLS_CDP_lookup_lut (")
    body = wrapper[start:wrapper.index("void HLS_CDP_lookup_fp16 (")]
    (work / "cdp_lookup.cpp").write_text('#include "vlibs.h"\n#include <cmath>\n'
                                         "#define cslDebug(x)\n" + body)
    exe = work / "reference"
    subprocess.run(["g++", "-O1", "-std=c++11", "-fpermissive", "-w", f"-I{work}", "-o", exe,
                    HERE / "reference.cpp", work / "sdp_y_idx.cpp", work / "sdp_y_inp.cpp",
                    work / "cdp_lookup.cpp", *(work / f"{n}.cpp" for n in VLIBS)],
                   check=True)
    return exe


def patterns(rng, fmt: str, n: int) -> np.ndarray:
    """Bit patterns: a fifth with an all-zero, all-ones or next-to-all-ones exponent, a fifth
    with an all-zero or all-ones mantissa."""
    e_bits, m_bits = FORMATS[fmt]
    top = (1 << e_bits) - 1
    e = rng.integers(0, top + 1, n)
    pick = rng.random(n)
    e = np.where(pick < 0.1, 0, np.where(pick < 0.2, top, np.where(pick < 0.3, top - 1, e)))
    m = rng.integers(0, 1 << m_bits, n)
    pick = rng.random(n)
    m = np.where(pick < 0.1, 0, np.where(pick < 0.2, (1 << m_bits) - 1, m))
    return (rng.integers(0, 2, n) << (e_bits + m_bits)) | (e << m_bits) | m


def partners(rng, a: np.ndarray, fmt: str) -> np.ndarray:
    """For each pattern, half the time a random one, half the time one within a few
    exponents and mantissa steps of it, of either sign (cancellation, alignment)."""
    e_bits, m_bits = FORMATS[fmt]
    width = 1 + e_bits + m_bits
    n = len(a)
    near = np.clip(a + (rng.integers(-3, 4, n) << m_bits) + rng.integers(-8, 9, n), 0,
                   (1 << width) - 1) ^ (rng.integers(0, 2, n) << (width - 1))
    return np.where(rng.random(n) < 0.5, patterns(rng, fmt, n), near)


def op_operands(rng) -> dict:
    n = OP_SAMPLES
    zeros = np.zeros(n, np.int64)
    a32, a17 = patterns(rng, "fp32", n), patterns(rng, "fp17", n)
    # multiplicands whose exponents sum near the bias: products at the edge of zero
    e = rng.integers(0, 64, n)
    edge = ((rng.integers(0, 2, n) << 16) | (np.clip(31 - e + rng.integers(-2, 3, n), 0, 63) << 10)
            | rng.integers(0, 1024, n))
    fractions = rng.integers(0, 1 << 35, n) >> rng.integers(0, 35, n)
    selects = np.where(rng.random(n) < 0.7, rng.integers(-12, 12, n), rng.integers(-128, 128, n))
    return {
        "add32": (a32, partners(rng, a32, "fp32")),
        "sub32": (a32, partners(rng, a32, "fp32")),
        "add17": (a17, partners(rng, a17, "fp17")),
        "mul17": (a17, np.where(rng.random(n) < 0.5, edge, patterns(rng, "fp17", n))),
        "fp32_fp17": (patterns(rng, "fp32", n), zeros),
        "fp16_fp17": (patterns(rng, "fp16", n), zeros),
        "fp17_fp32": (patterns(rng, "fp17", n), zeros),
        "fraction": (fractions, zeros),
        "index": (patterns(rng, "fp32", n) & 0x7FFFFFFF, selects & 0xFF),
    }


def run_ops(exe: Path, rng) -> dict:
    operands = op_operands(rng)
    text = "".join(f"{op} {int(x):x} {int(y):x}\n" for op in OPS
                   for x, y in zip(*operands[op], strict=True))
    out = subprocess.run([exe, "ops"], input=text, capture_output=True, text=True, check=True)
    res = np.array([int(v, 16) for v in out.stdout.split()], np.int64).reshape(len(OPS), -1, 2)
    data = {}
    for k, op in enumerate(OPS):
        a, b = operands[op]
        data[f"op_{op}"] = np.stack([a, b, res[k, :, 0], res[k, :, 1]]).astype(np.int64)
    return data


def fp16_entries(rng, n: int, special: float = 0.1) -> np.ndarray:
    smooth = (rng.standard_normal(n) * 4).astype(np.float16).view(np.uint16).astype(np.int64)
    return np.where(rng.random(n) < special, rng.integers(0, 1 << 16, n), smooth)


def fp32_bits(v) -> int:
    return int(np.float32(v).view(np.uint32))


def lut_config(rng) -> tuple[np.ndarray, ...]:
    le_fn = int(rng.integers(0, 2))
    off, le_sel, lo_sel = (int(v) for v in rng.integers(-8, 6, 3))
    off = int(rng.integers(-12, 8)) if rng.random() < 0.8 else int(rng.integers(-128, 128))
    if rng.random() < 0.1:
        le_sel = int(rng.integers(-128, 128))
    le_x, lo_x = (float(v) for v in rng.uniform(-20, 5, 2))
    le_end = le_x + (64 * 2.0 ** le_sel if le_fn else 2.0 ** min(off + 64, 100))
    bounds = [fp32_bits(le_x), fp32_bits(min(le_end, 3e38)), fp32_bits(lo_x),
              fp32_bits(lo_x + 256 * 2.0 ** lo_sel)]
    if rng.random() < 0.2:
        bounds[0] = int(rng.integers(0, 1 << 32))
    params = [le_fn, off, le_sel, lo_sel, *(int(v) for v in rng.integers(0, 2, 3))]
    return (np.array(params, np.int64), np.array(bounds, np.int64),
            fp16_entries(rng, 4, 0.3), fp16_entries(rng, 65), fp16_entries(rng, 257))


def lut_samples(rng) -> np.ndarray:
    n = LUT_SAMPLES
    near = rng.uniform(-40, 40, n // 2).astype(np.float32)
    wide = (rng.standard_normal(n // 4) * 2.0 ** rng.integers(-30, 30, n // 4)).astype(np.float32)
    special = np.array([0x7FC00000, 0x7F800000, 0xFF800000, 0x80000000, 0, 1], np.int64)
    return np.concatenate([near.view(np.uint32).astype(np.int64),
                           wide.view(np.uint32).astype(np.int64),
                           rng.integers(0, 1 << 32, n - n // 2 - n // 4 - len(special)),
                           special])


def run_tables(exe: Path, rng, mode: str, config, samples) -> dict:
    """``CONFIGS`` configurations from ``config(rng)``, each with ``samples(rng)``, through the
    reference's ``mode`` (lut: SDP's; cdp: CDP's), keyed ``{mode}_{field}``."""
    fields = ("params", "bounds", "scales", "le", "lo", "x", "result")
    rows = {k: [] for k in fields}
    for _ in range(CONFIGS):
        params, bounds, scales, le, lo = config(rng)
        x = samples(rng)
        text = " ".join(str(int(v)) for v in params) + "\n"
        for values in (bounds, scales, le, lo, x):
            text += " ".join(f"{int(v):x}" for v in values) + "\n"
        out = subprocess.run([exe, mode], input=text, capture_output=True, text=True,
                             check=True)
        result = np.array([[int(t, 16) for t in line.split()] for line in
                           out.stdout.splitlines()], np.int64)
        for k, v in zip(fields, (params, bounds, scales, le, lo, x, result), strict=True):
            rows[k].append(v)
    return {f"{mode}_{k}": np.stack(v) for k, v in rows.items()}


def cdp_config(rng) -> tuple[np.ndarray, ...]:
    """A configuration of CDP's FP16 LUT: the bounds over sums of squares (mostly positive),
    either LE mode, selects and offsets mostly small."""
    le_fn = int(rng.integers(0, 2))
    off = int(rng.integers(-12, 8)) if rng.random() < 0.8 else int(rng.integers(-128, 128))
    le_sel, lo_sel = (int(v) for v in rng.integers(-8, 6, 2))
    if rng.random() < 0.1:
        le_sel = int(rng.integers(-128, 128))
    le_x, lo_x = (float(v) for v in rng.uniform(-2, 10, 2))
    le_end = le_x + (64 * 2.0 ** le_sel if le_fn else 2.0 ** min(off + 64, 100))
    bounds = [fp32_bits(le_x), fp32_bits(min(le_end, 3e38)), fp32_bits(lo_x),
              fp32_bits(lo_x + 256 * 2.0 ** lo_sel)]
    if rng.random() < 0.2:
        bounds[2] = int(rng.integers(0, 1 << 32))
    params = [le_fn, off, le_sel, lo_sel]
    return (np.array(params, np.int64), np.array(bounds, np.int64),
            fp16_entries(rng, 4, 0.3), fp16_entries(rng, 65), fp16_entries(rng, 257))


def cdp_samples(rng) -> np.ndarray:
    """Sums of squares: :func:`lut_samples` with most made positive."""
    x = lut_samples(rng)
    return np.where(rng.random(len(x)) < 0.7, x & 0x7FFFFFFF, x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvdla", type=Path, required=True, help="a checkout of nvdla/hw")
    ap.add_argument("--seed", type=int, default=71)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(args.nvdla, Path(tmp))
        data = {**run_ops(exe, rng), **run_tables(exe, rng, "lut", lut_config, lut_samples),
                **run_tables(exe, np.random.default_rng(args.seed + 1), "cdp", cdp_config,
                             cdp_samples)}
    np.savez_compressed(args.out, seed=args.seed, **data)
    print(f"{args.out}: {len(OPS)} operations x {OP_SAMPLES}, {CONFIGS} SDP and {CONFIGS} CDP "
          f"LUT configurations x {LUT_SAMPLES} samples (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
