"""SDP's FP16 LUT pipeline: ``model.nvdla.nvfloat`` and ``evaluate`` with ``precision="fp16"``
against results recorded from NVDLA's own C model (tests/nvdla_ref/make_vectors.py), and the
rules docs/lut.md states, one test each."""

from pathlib import Path

import numpy as np
import pytest

from atomcube.model.nvdla import lut, nvfloat
from atomcube.model.nvdla.lut import HIT, LE, LO, OFLOW, UFLOW, LutConfig, evaluate
from atomcube.model.nvdla.nvfloat import FP16, FP17, FP32

VECTORS = np.load(Path(__file__).parent / "data" / "nvdla_lut_fp16.npz")
ONE17 = 31 << 10                                     # 1.0 in FP17


def f32(v):
    return int(nvfloat.bits_of(v, FP32))


def f17(v):
    """FP17 bits of a value FP17 holds exactly (through FP32)."""
    return int(nvfloat.convert(nvfloat.bits_of(v, FP32), FP32, FP17))


OPERATIONS = {
    "add32": lambda a, b: nvfloat.add(a, b, FP32),
    "sub32": lambda a, b: nvfloat.sub(a, b, FP32),
    "add17": lambda a, b: nvfloat.add(a, b, FP17),
    "mul17": lambda a, b: nvfloat.mul(a, b, FP17),
    "fp32_fp17": lambda a, b: nvfloat.convert(a, FP32, FP17),
    "fp16_fp17": lambda a, b: nvfloat.convert(a, FP16, FP17),
    "fp17_fp32": lambda a, b: nvfloat.convert(a, FP17, FP32),
    "fraction": lambda a, b: nvfloat.from_fraction(a, 35, FP17),
}


@pytest.mark.parametrize("op", [*OPERATIONS, "index"])
def test_operation_matches_nvdla(op):
    a, b, ref, ref2 = VECTORS[f"op_{op}"]
    if op == "index":
        got, got2 = nvfloat.to_index(a, np.where(b >= 128, b - 256, b), 9, 35)
    else:
        got, got2 = OPERATIONS[op](a, b), ref2
    bad = np.flatnonzero((got != ref) | (got2 != ref2))
    assert bad.size == 0, (f"{op}: {bad.size} of {a.size} differ, first "
                           f"{a[bad[0]]:#x}, {b[bad[0]]:#x}: {got[bad[0]]:#x} != {ref[bad[0]]:#x}")


def _recorded_config(k, flavor="sdp"):
    """The k-th configuration recorded for ``flavor`` (SDP's carry the priorities too)."""
    prefix = "lut" if flavor == "sdp" else "cdp"
    params, bounds, scales = (VECTORS[f"{prefix}_{n}"][k] for n in ("params", "bounds", "scales"))
    le_fn, off, le_sel, lo_sel, *prio = (int(v) for v in params)
    names = ("uflow_priority", "oflow_priority", "hybrid_priority")[:len(prio)]
    priorities = dict(zip(names, prio, strict=True))
    return LutConfig(precision="fp16", le_function=le_fn, le_index_offset=off,
                     le_index_select=le_sel, lo_index_select=lo_sel,
                     le_start=int(bounds[0]), le_end=int(bounds[1]), lo_start=int(bounds[2]),
                     lo_end=int(bounds[3]), le_uflow_scale=int(scales[0]),
                     le_oflow_scale=int(scales[1]), lo_uflow_scale=int(scales[2]),
                     lo_oflow_scale=int(scales[3]), le_table=VECTORS[f"{prefix}_le"][k],
                     lo_table=VECTORS[f"{prefix}_lo"][k], **priorities)


@pytest.mark.parametrize("k", range(len(VECTORS["lut_params"])))
def test_lut_matches_nvdla(k):
    cfg = _recorded_config(k)
    x = VECTORS["lut_x"][k]
    sel, addr, under, over, le_hit, lo_hit, frac, out = VECTORS["lut_result"][k].T
    res = evaluate(x.astype(np.uint32).view(np.float32), cfg)
    got = res.out.view(np.uint32).astype(np.int64)
    assert np.array_equal(res.chosen, sel)
    assert np.array_equal(res.underflow, under == 1)
    assert np.array_equal(res.overflow, over == 1)
    assert np.array_equal(res.le_state == HIT, le_hit == 1)
    assert np.array_equal(res.lo_state == HIT, lo_hit == 1)
    bad = np.flatnonzero(got != out)
    assert bad.size == 0, (f"{bad.size} of {x.size} differ, first x={x[bad[0]]:#010x}: "
                           f"{got[bad[0]]:#010x} != {out[bad[0]]:#010x}")
    # the chosen table's entry and fraction, as NVDLA's index stage gives them
    for table in (LE, LO):
        mine = sel == table
        index, fraction, state = lut._index_fp(x[mine], table, cfg)
        edge = np.where(state == OFLOW, (lut.LE_ENTRIES if table == LE else lut.LO_ENTRIES) - 1,
                        index)
        assert np.array_equal(edge, addr[mine])
        assert np.array_equal(fraction, frac[mine])


@pytest.mark.parametrize("k", range(len(VECTORS["cdp_params"])))
def test_cdp_lut_matches_nvdla(k):
    """CDP's FP16 LUT, each table on its own (its flags and FP17 result, here widened to
    FP32), against NVDLA's C model's lookup; the choice between them and the counters are
    the integer CDP's."""
    cfg = _recorded_config(k, "cdp")
    x = VECTORS["cdp_x"][k]
    rec = VECTORS["cdp_result"][k]
    res = evaluate(x.astype(np.uint32).view(np.float32), cfg, "cdp")
    for table, cols in ((LE, rec[:, :4]), (LO, rec[:, 4:])):
        under, over, hit, out17 = cols.T
        state = res.le_state if table == LE else res.lo_state
        assert np.array_equal(state == UFLOW, under == 1), f"table {table}: underflows"
        assert np.array_equal(state == OFLOW, over == 1), f"table {table}: overflows"
        assert np.array_equal(state == HIT, hit == 1), f"table {table}: hits"
        index, frac, st = lut._index_fp_cdp(x, table, cfg)
        got = nvfloat.convert(lut._table_out_fp_cdp(x, table, cfg, index, frac, st), FP32,
                              FP17)
        bad = np.flatnonzero(got != out17)
        assert bad.size == 0, (f"table {table}: {bad.size} of {x.size} differ, first "
                               f"x={x[bad[0]]:#010x}: {got[bad[0]]:#07x} != "
                               f"{out17[bad[0]]:#07x}")


# -- the rules, one by one --------------------------------------------------------------------

def test_rounding_is_to_nearest_even():
    one = f32(1.0)
    assert nvfloat.add(one, f32(2.0 ** -24), FP32) == one                      # tie: even
    assert nvfloat.add(f32(1.0 + 2.0 ** -23), f32(2.0 ** -24), FP32) == f32(1.0 + 2.0 ** -22)
    assert nvfloat.add(one, f32(2.0 ** -24 + 2.0 ** -47), FP32) == one + 1     # past the tie
    a, b = f17(1.0 + 2.0 ** -10), f17(1.0 + 2.0 ** -9)
    assert nvfloat.mul(a, b, FP17) == f17((1.0 + 2.0 ** -10) * (1.0 + 2.0 ** -9))


def test_denormal_operands_count_as_normal_numbers():
    # FP32's smallest denormal is read as 2^-127 * (1 + 2^-23): twice it carries into
    # exponent 1; alone (plus zero) it is below the smallest normal, so zero
    assert nvfloat.add(1, 1, FP32) == 0x00800001
    assert nvfloat.add(1, 0, FP32) == 0


def test_overflow_gives_the_largest_value_not_infinity():
    big = f32(3e38)
    assert nvfloat.add(big, big, FP32) == 0x7F7FFFFF
    assert nvfloat.add(big | 1 << 31, big | 1 << 31, FP32) == 0xFF7FFFFF
    assert nvfloat.mul(f17(2.0 ** 15), f17(2.0 ** 15), FP17) == f17(2.0 ** 30)
    assert nvfloat.mul(f17(2.0 ** 16), f17(-(2.0 ** 16)), FP17) == 0x1FBFF
    # FP17 -> FP32 and FP16 -> FP17 turn infinity into the largest value too
    assert nvfloat.convert(0x0FC00, FP17, FP32) == 0x7F7FFFFF
    assert nvfloat.convert(0x7C00, FP16, FP17) == 0x0FBFF


def test_infinity_minus_infinity_is_zero():
    inf = 0x7F800000
    assert nvfloat.sub(inf, inf, FP32) == 0


def test_nan_passes_through_and_the_first_wins():
    nan_a, nan_b = 0x7FC00001, 0xFFC00002
    assert nvfloat.add(nan_a, f32(1.0), FP32) == nan_a
    assert nvfloat.add(f32(1.0), nan_b, FP32) == nan_b
    assert nvfloat.add(nan_a, nan_b, FP32) == nan_a
    # narrowing keeps the mantissa's low bits: a NaN without them becomes the largest value
    assert nvfloat.convert(0x7FC00000, FP32, FP17) == 0x0FC00
    assert nvfloat.convert(0x0FC00, FP17, FP32) == 0x7F7FFFFF


def test_results_below_the_smallest_normal_are_signed_zeros():
    smallest = f17(2.0 ** -14) - (16 << 10)                   # 2^-30, FP17's smallest normal
    half = nvfloat.from_fraction(1 << 34, 35, FP17)
    assert nvfloat.mul(smallest, half, FP17) == 0
    assert nvfloat.mul(smallest | 1 << 16, half, FP17) == 1 << 16
    assert nvfloat.convert(f32(2.0 ** -40), FP32, FP17) == 0
    assert nvfloat.convert(f32(-(2.0 ** -40)), FP32, FP17) == 1 << 16


def test_fp16_denormals_widen_exactly():
    for bits in (1, 0x3FF, 0x8155):
        value = float(nvfloat.value_of(bits, FP16))
        wide = nvfloat.convert(nvfloat.convert(bits, FP16, FP17), FP17, FP32)
        assert float(nvfloat.value_of(wide, FP32)) == value


def test_cancelling_sum_takes_the_first_operands_sign():
    one = f32(1.0)
    assert nvfloat.add(one, one | 1 << 31, FP32) == 0
    assert nvfloat.add(one | 1 << 31, one, FP32) == 1 << 31


def test_fraction_weights():
    assert nvfloat.from_fraction(0, 35, FP17) == 0
    assert nvfloat.from_fraction(1 << 34, 35, FP17) == f17(0.5)
    # 2^-31 is below FP17's smallest normal: zero
    assert nvfloat.from_fraction(1 << 4, 35, FP17) == 0
    assert nvfloat.from_fraction(1 << 5, 35, FP17) == f17(2.0 ** -14) - (16 << 10)


def _sigmoid_cfg():
    """NVDLA's compiler's FP16 sigmoid layout: one LO table of 257 entries from -16 in steps
    of 1/8, the LE table never hit."""
    xs = -16 + np.arange(257) / 8
    return LutConfig(precision="fp16", lo_table=(1 / (1 + np.exp(-xs))).astype(np.float16),
                     lo_index_select=-3, lo_start=-16.0, lo_end=16.0, le_start=1e30,
                     le_end=2e30, le_index_select=100, uflow_priority=LO, oflow_priority=LO,
                     hybrid_priority=LO, lo_uflow_scale=0.0, lo_oflow_scale=0.0)


def test_sigmoid_table_interpolates():
    x = np.linspace(-15.9, 15.9, 1001).astype(np.float32)
    res = evaluate(x, _sigmoid_cfg())
    assert res.out.dtype == np.float32
    assert np.all(res.chosen == LO) and np.all(res.hit)
    assert np.max(np.abs(res.out - 1 / (1 + np.exp(-x.astype(np.float64))))) < 2e-3
    # entries hit exactly come back exactly (weight 1 on y0, 0 on y1)
    on = np.array([-16, -1, 0, 0.125, 15.875], np.float32)
    want = (1 / (1 + np.exp(-on.astype(np.float64)))).astype(np.float16).astype(np.float32)
    assert np.array_equal(evaluate(on, _sigmoid_cfg()).out, want)


def test_index_rules_at_the_edges():
    cfg = _sigmoid_cfg()
    x = np.array([-16.0, -17.0, 16.0, 100.0, np.nan, np.inf, -np.inf], np.float32)
    res = evaluate(x, cfg)
    # START itself is an underflow (x - START is zero); the entry before the last is the last
    # hit; NaN differences underflow; +inf has exponent 255, read as 2^-128: entry 0, a hit
    assert list(res.lo_state) == [UFLOW, UFLOW, OFLOW, OFLOW, UFLOW, HIT, UFLOW]
    assert res.counters["uflow"] == 4 and res.counters["oflow"] == 2
    assert res.counters["hybrid"] == 1 and res.counters["lo_hit"] == 1


def test_slopes_use_fp16_scales_and_end_as_reference():
    # entry 0 (FP16 of sigmoid(-16), about 1.1e-7) + (-20 - -16) * 0.5: -2.0 once rounded
    # to FP17's 11 bits; the last entry (1.0) + (20 - 16) * -0.125 = 0.5, from END
    cfg = _sigmoid_cfg().replace(lo_uflow_scale=0.5, lo_oflow_scale=-0.125)
    res = evaluate(np.array([-20.0, 20.0], np.float32), cfg)
    assert list(res.out) == [-2.0, 0.5]
    assert list(evaluate(np.array([20.0], np.float32), cfg.replace(lo_end=18.0)).out) == [0.75]


def test_exponential_table_fp16():
    # LE exponential from START 0: entry k covers [2^(k+offset), 2^(k+offset+1))
    le = (np.arange(65) * 2.0).astype(np.float16)
    cfg = LutConfig(precision="fp16", le_function=0, le_index_offset=-4, le_table=le,
                    le_start=0.0, le_end=2.0 ** 60, lo_start=1e30, lo_end=2e30,
                    lo_index_select=100, le_uflow_scale=1.0)
    res = evaluate(np.array([2.0 ** -4, 1.5 * 2.0 ** -4, 1.0, 2.0 ** -6], np.float32), cfg)
    assert list(res.le_state) == [HIT, HIT, HIT, UFLOW]
    assert list(res.out[:3]) == [0.0, 1.0, 8.0]
    # below the table the reference is START + 2^offset: 2^-6 - 2^-4 from entry 0
    assert res.out[3] == np.float32(2.0 ** -6 - 2.0 ** -4)


def test_fp16_configuration_fields():
    cfg = LutConfig(precision="fp16", le_start=-16.0, lo_end=0xC1800000, le_uflow_scale=0.5,
                    lo_oflow_scale=0xB800, lo_table=np.full(257, 0xFC00))
    assert cfg.le_start == cfg.lo_end == f32(-16.0) - (1 << 32)
    assert cfg.le_uflow_scale == 0x3800 and cfg.lo_oflow_scale == 0xB800 - (1 << 16)
    assert cfg.lo_table[0] == 0xFC00 - (1 << 16)
    assert LutConfig.from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()
    # from FP16 arrays, exactly
    t = np.linspace(-1, 1, 65).astype(np.float16)
    cfg = LutConfig(precision="fp16", le_table=t)
    assert np.array_equal(cfg.le_table.astype(np.int16).view(np.float16), t)


@pytest.mark.parametrize("kw, error, match", [
    ({"precision": "fp32"}, ValueError, "precision must be one of int, fp16"),
    ({"precision": "fp16", "le_start": 1 << 32}, ValueError,
     "le_start: 4294967296 is not a 32-bit pattern of FP32"),
    ({"precision": "fp16", "lo_uflow_scale": 70000}, ValueError,
     "lo_uflow_scale: 70000 is not a 16-bit pattern of FP16"),
    ({"precision": "fp16", "le_end": "1.0"}, TypeError, "le_end must be FP32 numbers"),
])
def test_fp16_configuration_errors(kw, error, match):
    with pytest.raises(error, match=match):
        LutConfig(**kw)


def test_fp16_input_errors():
    cfg = LutConfig(precision="fp16")
    with pytest.raises(TypeError, match="x must be float32 or float16 for the FP16 pipeline"):
        evaluate(np.array([1.0]), cfg)
    # FP16 samples widen exactly
    x = np.array([0.5, -3.25, 6e-8], np.float16)
    assert np.array_equal(evaluate(x, cfg).out, evaluate(x.astype(np.float32), cfg).out)


def test_docs_example_gives_what_it_says():
    text = (Path(__file__).parents[1] / "docs" / "lut.md").read_text()
    section = text[text.index("## The FP16 pipeline"):]
    start = section.index("```python") + len("```python")
    code = section[start:section.index("```\n", start)]
    scope = {}
    exec(code, scope)
    assert np.array_equal(scope["res"].out, np.array([0.26904297, 0.57421875, 1.0], np.float32))


def test_register_program_chooses_the_pipeline_and_round_trips():
    """``program`` starts with ``data_format``: fp16's code for an FP16 configuration,
    int8's for an integer one; decoding the words written gives the configuration back, bit
    patterns and all. The reserved code is refused when decoding a dump."""
    from atomcube.model.registers.lut import LUT_SDP, config_from_registers, program

    for cfg, code in ((_sigmoid_cfg(), 2), (LutConfig(le_start=-5, lo_end=7), 0)):
        writes = program(cfg, "sdp")
        assert writes[0] == ("data_format", {"proc_precision": code})
        words = {n: LUT_SDP[n].encode(f) for n, f in writes if not n.startswith("lut_access")}
        back = config_from_registers(words, cfg.le_table, cfg.lo_table, "sdp")
        assert back.to_dict() == cfg.to_dict()
    words["data_format"] = 3
    with pytest.raises(ValueError, match="proc_precision: 3 is reserved"):
        config_from_registers(words, cfg.le_table, cfg.lo_table, "sdp")


def test_exponential_offsets_beyond_32_bits_are_hit():
    """An FP32 difference reaches 2^127, so the FP16 pipeline takes exponential offsets the
    integer pipeline refuses: with offset 61, 2^61 above START is entry 0."""
    cfg = LutConfig(precision="fp16", le_function=0, le_index_offset=61, le_start=0.0,
                    le_end=1e30, le_table=np.arange(65).astype(np.float16),
                    lo_start=3e38, lo_end=3e38)
    res = evaluate(np.array([2.0 ** 61, 2.0 ** 62 * 1.5, 2.0 ** 60], np.float32), cfg)
    assert res.le_state.tolist() == [HIT, HIT, UFLOW]
    assert res.out[:2].tolist() == [0.0, 1.5]
    with pytest.raises(ValueError, match="le_index_offset must be at most 31"):
        cfg.replace(precision="int", le_start=0, le_end=0, lo_start=0, lo_end=0,
                    le_table=np.zeros(65, int), lo_table=np.zeros(257, int),
                    le_uflow_scale=0, le_oflow_scale=0, lo_uflow_scale=0,
                    lo_oflow_scale=0).check("sdp")
