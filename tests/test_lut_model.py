"""The bit-exact LUT model against an independent scalar transcription of docs/lut.md's arithmetic.

The reference below uses Python's unbounded integers and the spec's own words for rounding (a
right shift that adds the guard bit, except for a negative value with nothing below the guard
bit). It shares no code with model/nvdla/lut.py, so agreement over random configurations checks
the vectorised model's int64 bounds, its clamp before left shifts and its rounding.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atomcube.model.nvdla.lut import (
    COUNTERS,
    HIT,
    LE,
    LO,
    OFLOW,
    UFLOW,
    LutAccess,
    LutConfig,
    add_counters,
    evaluate,
    round_shift,
)

BITS = {"sdp": 32, "cdp": 38}
FB = {"sdp": 35, "cdp": 16}


# -- the reference -----------------------------------------------------------------------------

def rtl_round(v: int, k: int) -> int:
    """v / 2^k the way the spec describes the RTL's rounding shift."""
    if k == 0:
        return v
    q = v >> k
    guard = (v >> (k - 1)) & 1
    below = v & ((1 << (k - 1)) - 1)
    return q + (1 if guard and not (v < 0 and below == 0) else 0)


def sat(v, bits):
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def ref_table(x, cfg, table, flavor):
    t = [int(v) for v in (cfg.le_table if table == LE else cfg.lo_table)]
    n = len(t) - 1
    nm = "le" if table == LE else "lo"
    start, end = getattr(cfg, f"{nm}_start"), getattr(cfg, f"{nm}_end")
    fb = FB[flavor]
    exp = table == LE and cfg.le_function == 0
    state, index, frac = None, 0, 0
    if x <= start:
        state = UFLOW
    else:
        d = x - start
        if exp:
            e = d.bit_length() - 1
            if e < cfg.le_index_offset:
                state = UFLOW
            else:
                index = e - cfg.le_index_offset
                frac = ((d - (1 << e)) << fb) >> e
        else:
            s = cfg.le_index_select if table == LE else cfg.lo_index_select
            if s >= 0:
                index = d >> s
                frac = ((d << fb) >> s) % (1 << fb)
            else:
                index = d << -s
            index = min(index, 511)
        if state is None:
            state = OFLOW if index >= n else HIT
    if state == HIT:
        y0, y1 = t[index], t[index + 1]
        if flavor == "sdp":
            return sat(rtl_round(y0 * ((1 << fb) - frac) + y1 * frac, fb), 32), state
        return sat(y0 + rtl_round((y1 - y0) * frac, fb), 16), state
    under = state == UFLOW
    edge = t[0] if under else t[n]
    bias = (1 << cfg.le_index_offset) if (exp and under and cfg.le_index_offset >= 0) else 0
    ref = start + bias if under else end
    side = "uflow" if under else "oflow"
    scale, shift = getattr(cfg, f"{nm}_{side}_scale"), getattr(cfg, f"{nm}_{side}_shift")
    p = (x - ref) * scale
    term = rtl_round(p, shift) if shift < 16 else p << (32 - shift)
    if flavor == "sdp":
        return sat(edge + sat(term, 32), 32), state
    return sat(edge + term, 16), state


def ref_eval(x, cfg, flavor):
    (le_out, le_s), (lo_out, lo_s) = ref_table(x, cfg, LE, flavor), ref_table(x, cfg, LO, flavor)
    if le_s == HIT and lo_s != HIT:
        chosen = LE
    elif lo_s == HIT and le_s != HIT:
        chosen = LO
    elif le_s == lo_s == UFLOW:
        chosen = cfg.uflow_priority
    elif le_s == lo_s == OFLOW:
        chosen = cfg.oflow_priority
    else:
        chosen = cfg.hybrid_priority
    return (le_out if chosen == LE else lo_out), chosen, le_s, lo_s


def check_against_reference(xs, cfg, flavor):
    res = evaluate(np.array(xs, dtype=np.int64), cfg, flavor)
    for i, x in enumerate(xs):
        want = ref_eval(int(x), cfg, flavor)
        got = (int(res.out[i]), int(res.chosen[i]), int(res.le_state[i]), int(res.lo_state[i]))
        assert got == want, f"x={x}: model {got}, reference {want}\n{cfg}"
    return res


# -- random configurations ---------------------------------------------------------------------

def configs(flavor):
    lo, hi = -(1 << (BITS[flavor] - 1)), (1 << (BITS[flavor] - 1)) - 1
    i16 = st.integers(-32768, 32767)
    bound = st.one_of(st.integers(lo, hi), st.integers(-5000, 5000))
    return st.builds(
        LutConfig,
        le_table=st.lists(i16, min_size=65, max_size=65),
        lo_table=st.lists(i16, min_size=257, max_size=257),
        le_function=st.integers(0, 1),
        le_index_offset=st.one_of(st.integers(-128, BITS[flavor] - 1), st.integers(-3, 8)),
        le_index_select=st.one_of(st.integers(-128, 127), st.integers(-3, 40)),
        lo_index_select=st.one_of(st.integers(-128, 127), st.integers(-3, 40)),
        le_start=bound, le_end=bound, lo_start=bound, lo_end=bound,
        le_uflow_scale=i16, le_oflow_scale=i16, lo_uflow_scale=i16, lo_oflow_scale=i16,
        le_uflow_shift=st.integers(0, 31), le_oflow_shift=st.integers(0, 31),
        lo_uflow_shift=st.integers(0, 31), lo_oflow_shift=st.integers(0, 31),
        uflow_priority=st.integers(0, 1), oflow_priority=st.integers(0, 1),
        hybrid_priority=st.integers(0, 1),
    )


def inputs_near(cfg, flavor, data):
    """Extremes, random values, and the boundaries of both tables."""
    lo, hi = -(1 << (BITS[flavor] - 1)), (1 << (BITS[flavor] - 1)) - 1
    xs = [lo, hi, 0, -1, 1]
    for start, s, n in ((cfg.le_start, cfg.le_index_select, 64),
                        (cfg.lo_start, cfg.lo_index_select, 256)):
        step = 1 << max(min(s, 40), 0)
        for k in (0, 1, n - 1, n, n + 1):
            for dx in (-1, 0, 1):
                xs.append(start + k * step + dx)
        if cfg.le_function == 0:
            for e in (cfg.le_index_offset, cfg.le_index_offset + 1, cfg.le_index_offset + 63,
                      cfg.le_index_offset + 64):
                if 0 <= e < BITS[flavor]:
                    xs += [cfg.le_start + (1 << e) + dx for dx in (-1, 0, 1)]
    xs += data.draw(st.lists(st.integers(lo, hi), min_size=20, max_size=20))
    xs += data.draw(st.lists(st.integers(-70000, 70000), min_size=20, max_size=20))
    return [min(max(x, lo), hi) for x in xs]


@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_model_matches_reference(flavor, data):
    cfg = data.draw(configs(flavor))
    check_against_reference(inputs_near(cfg, flavor, data), cfg, flavor)


# -- directed cases at the spec's boundaries ---------------------------------------------------

def lo_only(flavor="sdp", **kw):
    """LO table hits decide; LE parked above every input so it always underflows."""
    top = (1 << (BITS[flavor] - 1)) - 1
    base = dict(lo_table=np.arange(257) * 100, le_start=top, uflow_priority=LO,
                oflow_priority=LO, hybrid_priority=LO)
    base.update(kw)
    return LutConfig(**base)


@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
def test_linear_index_boundaries(flavor):
    cfg = lo_only(flavor, lo_start=1000, lo_index_select=4, lo_end=1000 + 256 * 16)
    x = [1000, 1001, 1016, 1000 + 256 * 16 - 1, 1000 + 256 * 16]
    r = check_against_reference(x, cfg, flavor)
    assert r.lo_state.tolist() == [UFLOW, HIT, HIT, HIT, OFLOW]      # x == START underflows
    assert r.out.tolist()[:3] == [0, 6, 100]                         # 1/16 of 100 rounds to 6


def test_negative_select_has_no_fraction_and_saturates():
    cfg = lo_only(lo_start=0, lo_index_select=-2)
    r = check_against_reference([1, 2, 63, 64, 1 << 20], cfg, "sdp")
    assert r.out.tolist()[:3] == [400, 800, 25200]                   # index = d << 2
    assert r.lo_state.tolist()[3:] == [OFLOW, OFLOW]                 # index 256, then 511 cap


@pytest.mark.parametrize("s", [35, 36, 40, 100])
def test_select_beyond_fraction(s):
    # s > 35: index 0 for every 32-bit d and the fraction keeps only the top bits
    cfg = lo_only(lo_start=-(1 << 31), lo_index_select=s)
    xs = [-(1 << 31) + 1, 0, (1 << 31) - 1]
    r = check_against_reference(xs, cfg, "sdp")
    assert (r.lo_state == HIT).all()


@pytest.mark.parametrize("offset", [-5, 0, 3])
@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
def test_exponential_offsets_and_bias(offset, flavor):
    le = np.arange(65) * 10 - 300
    top = (1 << (BITS[flavor] - 1)) - 1
    cfg = LutConfig(le_table=le, le_function=0, le_index_offset=offset, le_start=100,
                    le_end=top, le_uflow_scale=3, le_uflow_shift=1, lo_start=top,
                    uflow_priority=LE, oflow_priority=LE, hybrid_priority=LE)
    xs = [100, 101, 102, 100 + (1 << max(offset, 0)) - 1, 100 + (1 << max(offset, 0)),
          100 + (1 << (max(offset, 0) + 1)) + 1, 50, -1000]
    r = check_against_reference(xs, cfg, flavor)
    if offset > 0:
        # x = START + 2^offset - 1 still underflows (e < offset), extrapolated from the bias point
        assert r.le_state[3] == UFLOW and r.le_state[4] == HIT
        assert r.out[3] == le[0] + round_shift(np.int64(-1 * 3), 1)
    else:
        assert r.le_state[1] == HIT


@pytest.mark.parametrize("shift", [0, 15, 16, 31])
@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
def test_slope_shifts_saturate(shift, flavor):
    lo, hi = -(1 << (BITS[flavor] - 1)), (1 << (BITS[flavor] - 1)) - 1
    for scale in (32767, -32768, 5, -5):
        cfg = lo_only(flavor, lo_start=0, lo_index_select=0, lo_end=256,
                      lo_uflow_scale=scale, lo_uflow_shift=shift,
                      lo_oflow_scale=scale, lo_oflow_shift=shift)
        r = check_against_reference([lo, -7, -1, 257, 300, hi], cfg, flavor)
        limit = (1 << 31) - 1 if flavor == "sdp" else 32767
        if shift == 16 and abs(scale) > 5:   # left by 16 of a huge product: saturated
            assert abs(int(r.out[0])) >= limit
        assert (np.abs(r.out) <= limit + 1).all()


@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
@pytest.mark.parametrize("uflow_p, oflow_p, hybrid_p",
                         [(u, o, h) for u in (0, 1) for o in (0, 1) for h in (0, 1)])
def test_every_priority_combination(flavor, uflow_p, oflow_p, hybrid_p):
    # LE covers (0, 64], LO covers (32, 32 + 256*2]: both hit, each alone, both under,
    # both over, and a cross miss (LE over, LO under is impossible here; LE over + LO hit ...).
    cfg = LutConfig(le_table=np.full(65, 11), lo_table=np.full(257, 22), le_start=0,
                    le_index_select=0, le_end=64, lo_start=32, lo_index_select=1, lo_end=544,
                    uflow_priority=uflow_p, oflow_priority=oflow_p, hybrid_priority=hybrid_p)
    xs = [-5, 10, 40, 100, 1000]
    r = check_against_reference(xs, cfg, flavor)
    pick = lambda p: 11 if p == LE else 22
    assert int(r.out[0]) == pick(uflow_p)                        # both under
    assert int(r.out[1]) == 11                                   # LE only
    assert int(r.out[2]) == pick(hybrid_p)                       # both hit
    assert int(r.out[3]) == 22                                   # LO only
    assert int(r.out[4]) == pick(oflow_p)                        # both over
    # a cross miss: LE overflows, LO underflows
    cross = cfg.replace(lo_start=500)
    r = check_against_reference([100], cross, flavor)
    assert (r.le_state[0], r.lo_state[0]) == (OFLOW, UFLOW)
    assert int(r.chosen[0]) == hybrid_p


def test_counters_sdp_and_cdp():
    cfg = LutConfig(le_table=np.zeros(65), lo_table=np.zeros(257), le_start=0, le_index_select=0,
                    le_end=64, lo_start=32, lo_index_select=1, lo_end=544, uflow_priority=LE,
                    oflow_priority=LO, hybrid_priority=LO)
    xs = np.array([-5, -4, 10, 40, 41, 100, 1000, 2000, 3000])
    sdp = evaluate(xs, cfg, "sdp").counters
    # chosen states: under x2, LE hit x1, both hit x2 (LO chosen), LO hit x1, over x3
    assert sdp == {"uflow": 2, "oflow": 3, "hybrid": 4, "le_hit": 3, "lo_hit": 3}
    cdp = evaluate(xs, cfg, "cdp").counters
    assert cdp == {"uflow": 2, "oflow": 3, "le_hit": 1, "lo_hit": 1, "priority": 2}
    assert sum(cdp.values()) == len(xs)
    assert set(sdp) == set(COUNTERS["sdp"]) and set(cdp) == set(COUNTERS["cdp"])
    big = {k: (1 << 32) - 2 for k in sdp}
    assert add_counters(big, sdp)["oflow"] == (1 << 32) - 1             # saturates, no wrap


# -- properties --------------------------------------------------------------------------------

@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.integers(0, 250), min_size=256, max_size=256),
       first=st.integers(-32768, -32768 + 1000), s=st.integers(-2, 12),
       start=st.integers(-100000, 100000))
def test_monotone_table_monotone_output(flavor, steps, first, s, start):
    table = np.clip(np.concatenate([[first], first + np.cumsum(steps)]), -32768, 32767)
    cfg = lo_only(flavor, lo_table=table, lo_start=start, lo_index_select=s)
    cover = 256 << s if s >= 0 else 256 >> -s
    x = np.unique(np.linspace(start + 1, start + max(cover, 1), 4000).round().astype(np.int64))
    r = evaluate(x, cfg, flavor)
    inside = r.lo_state == HIT
    assert (np.diff(r.out[inside]) >= 0).all()


@pytest.mark.parametrize("flavor", ["sdp", "cdp"])
@settings(max_examples=60, deadline=None)
@given(table=st.lists(st.integers(-32768, 32767), min_size=257, max_size=257),
       s=st.integers(0, 10), start=st.integers(-10000, 10000))
def test_interpolation_between_neighbours(flavor, table, s, start):
    cfg = lo_only(flavor, lo_table=table, lo_start=start, lo_index_select=s)
    x = np.arange(start + 1, start + (256 << s), max(1, (256 << s) // 3000), dtype=np.int64)
    r = evaluate(x, cfg, flavor)
    idx = (x - start) >> s
    t = np.array(table)
    lo_n = np.minimum(t[idx], t[idx + 1])
    hi_n = np.maximum(t[idx], t[idx + 1])
    assert ((r.out >= lo_n) & (r.out <= hi_n)).all()


# -- invalid configurations and inputs ---------------------------------------------------------

@pytest.mark.parametrize("kw, exc, msg", [
    (dict(le_table=np.zeros(64)), ValueError, "le_table must have 65 entries"),
    (dict(lo_table=np.full(257, 40000)), ValueError, r"lo_table\[0\] = 40000 does not fit"),
    (dict(lo_table=np.full(257, 0.5)), ValueError, "lo_table entries must be integers"),
    (dict(le_function=2), ValueError, r"le_function must be in \[0, 1\], not 2"),
    (dict(le_index_select=128), ValueError, r"le_index_select must be in \[-128, 127\]"),
    (dict(lo_index_select=-129), ValueError, "lo_index_select must be in"),
    (dict(le_uflow_scale=32768), ValueError, r"le_uflow_scale must be in \[-32768, 32767\]"),
    (dict(lo_oflow_shift=32), ValueError, r"lo_oflow_shift must be in \[0, 31\]"),
    (dict(hybrid_priority=2), ValueError, "hybrid_priority must be in"),
    (dict(le_start=1.5), TypeError, "le_start must be an int"),
    (dict(uflow_priority=True), TypeError, "uflow_priority must be an int"),
])
def test_invalid_config(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        LutConfig(**kw)


def test_flavour_limits():
    with pytest.raises(ValueError, match="le_start must fit in signed 32 bits for SDP"):
        evaluate([0], LutConfig(le_start=1 << 31), "sdp")
    evaluate([0], LutConfig(le_start=1 << 31), "cdp")           # 38 bits: fine
    with pytest.raises(ValueError, match="le_index_offset must be at most 31 in exponential"):
        evaluate([0], LutConfig(le_function=0, le_index_offset=32), "sdp")
    with pytest.raises(ValueError, match="x must fit in signed 32 bits for SDP, found 2147483648"):
        evaluate([1 << 31], LutConfig(), "sdp")
    with pytest.raises(TypeError, match="x must be an integer array"):
        evaluate([0.5], LutConfig(), "sdp")
    with pytest.raises(ValueError, match="flavor must be one of sdp, cdp, not 'fp16'"):
        evaluate([0], LutConfig(), "fp16")
    with pytest.raises(ValueError, match="unknown LUT configuration fields: bogus"):
        LutConfig.from_dict({"bogus": 1})


def test_config_round_trips_through_dict():
    cfg = LutConfig(le_table=np.arange(65), lo_index_select=-3, lo_start=-77)
    assert LutConfig.from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()


# -- the access registers ----------------------------------------------------------------------

def test_access_protocol():
    a = LutAccess()
    a.write_cfg(0, LE, 1)
    for v in range(70):                      # 5 past the LE table's end: ignored
        assert a.write_data(v - 3)
    assert a.addr == 70
    assert a.tables[LE].tolist() == list(range(-3, 62))
    a.write_cfg(63, LE, 0)
    assert [a.read_data() for _ in range(4)] == [60, 61, 0, 0]  # past the end reads 0
    a.write_cfg(1023, LO, 1)
    a.write_data(0xFFFF)                     # address 1023: past LO's end, then wraps to 0
    assert a.addr == 0
    a.write_data(0x8000)                     # 16-bit data is int16
    assert a.tables[LO][0] == -32768
    a.write_cfg(5, LO, 0)
    a.write_data(7)                          # access type read: the table keeps its value
    assert a.tables[LO][5] == 0 and a.addr == 6


def test_access_refused_while_active():
    a = LutAccess()
    a.write_cfg(3, LO, 1)
    a.active = True
    assert not a.write_data(99)
    assert a.error and a.addr == 3 and a.tables[LO][3] == 0   # nothing else changed
    a.active = False
    assert a.write_data(99) and a.tables[LO][3] == 99
