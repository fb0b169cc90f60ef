"""Activation-side formats: NVDLA feature data, Sophgo local memory, DMP I/O buffers. The seeds'
worked examples, element-by-element address checks, hypothesis round trips, and one test per
invalid-input rule."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.errors import FormatError
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.sophgo.local import (
    LocalMemory,
    LocalTensor,
    continuous_strides,
    matrix_load,
    matrix_store,
    matrix_tensor,
)

DT = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}


def grid(shape):
    return np.meshgrid(*[np.arange(v) for v in shape], indexing="ij")


def rand(rng, shape, precision):
    if precision == "fp16":
        return rng.standard_normal(shape).astype(np.float16)
    info = np.iinfo(DT[precision])
    return rng.integers(info.min, info.max + 1, shape).astype(DT[precision])


# --- NVDLA feature data ----------------------------------------------------------------------

@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
@pytest.mark.parametrize("strides", [{}, {"line_stride": 256, "surface_stride": 2048,
                                          "cube_stride": 8192}])
def test_feature_addresses(precision, strides):
    """Every element sits at C'(32 bytes) -> W -> H -> C(surface) -> N, at the strides."""
    rng = np.random.default_rng(1)
    fmt = FeatureFormat(precision, (2, 37, 3, 5), **strides)
    t = rand(rng, fmt.shape, precision)
    img = fmt.pack(t, gap=0xEE)
    eb = fmt.element_bytes
    n, c, h, w = grid(fmt.shape)
    addr = fmt.address(n, c, h, w)
    words = np.stack([img[addr + k] for k in range(eb)], axis=-1)
    assert (words.view(DT[precision])[..., 0] == t).all()
    cpa = 32 // eb
    assert fmt.address(0, cpa, 0, 0) == fmt.surface_stride
    assert fmt.address(0, 0, 1, 0) == fmt.line_stride
    assert fmt.address(1, 0, 0, 0) == fmt.cube_stride
    # channel padding of the last surface is the fill, gaps are the gap byte
    pad = fmt.address(0, 37, 0, 0)
    assert not img[pad:pad + (fmt.surfaces * cpa - 37) * eb].any()
    assert fmt.packed == (not strides)
    if strides:
        assert img[5 * 32] == 0xEE          # between the end of line 0 and line 1
    assert (fmt.unpack(img) == t).all()


def test_feature_packed_sizes():
    fmt = FeatureFormat("int16", (1, 40, 4, 6))
    assert fmt.surfaces == 3 and fmt.line_stride == 192 and fmt.surface_stride == 768
    assert fmt.size == 3 * 768


def test_feature_fill_value():
    fmt = FeatureFormat("fp16", (1, 3, 1, 2), fill=-2.0)
    img = fmt.pack(np.ones((1, 3, 1, 2), np.float16)).view(np.float16)
    assert list(img[:16]) == [1, 1, 1] + [-2] * 13


def test_surface_packed_1x1xc_is_a_wide_cube():
    """Seed: a surface-packed 1x1xC cube may be read as a (C/32) x 1 x 32 cube."""
    rng = np.random.default_rng(2)
    fmt = FeatureFormat("int8", (1, 96, 1, 1))
    assert fmt.surface_stride == 32
    t = rand(rng, fmt.shape, "int8")
    wide = fmt.surface_packed_view()
    assert wide.shape == (1, 32, 1, 3)
    img = fmt.pack(t)
    assert (img == wide.pack(t.reshape(3, 32).T.reshape(1, 32, 1, 3))).all()
    with pytest.raises(FormatError, match="surface packed"):
        FeatureFormat("int8", (1, 96, 2, 1)).surface_packed_view()


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["int8", "int16", "fp16"]), st.integers(1, 3), st.integers(1, 70),
       st.integers(1, 5), st.integers(1, 6), st.integers(0, 3), st.integers(0, 3),
       st.integers(0, 2), st.integers(0, 2 ** 32 - 1))
def test_feature_round_trip(precision, n, c, h, w, extra_line, extra_surf, extra_cube, seed):
    line = (w + extra_line) * 32
    surf = h * line + extra_surf * 32
    cpa = 32 // (1 if precision == "int8" else 2)
    cube = -(-c // cpa) * surf + extra_cube * 32
    fmt = FeatureFormat(precision, (n, c, h, w), line, surf, cube)
    t = rand(np.random.default_rng(seed), fmt.shape, precision)
    back = fmt.unpack(fmt.pack(t))
    assert (back.view(np.uint8) == t.view(np.uint8)).all()
    assert FeatureFormat.from_dict(fmt.to_dict()) == fmt


@pytest.mark.parametrize(("kw", "field"), [
    ({"precision": "int4"}, "precision"),
    ({"shape": (1, 2)}, "shape"),
    ({"shape": (1, 0, 2, 2)}, "shape.C"),
    ({"line_stride": 48}, "line_stride"),
    ({"line_stride": 32}, "line_stride"),
    ({"surface_stride": 96}, "surface_stride"),
    ({"cube_stride": 100}, "cube_stride"),
    ({"fill": 300}, "fill"),
    ({"precision": "fp16", "fill": float("nan")}, "fill"),
])
def test_feature_rejects(kw, field):
    base = {"precision": "int8", "shape": (1, 40, 3, 2)}
    with pytest.raises(FormatError, match=f"^{field}: "):
        FeatureFormat(**{**base, **kw})


def test_feature_rejects_bad_tensors():
    fmt = FeatureFormat("int8", (1, 4, 2, 2))
    with pytest.raises(FormatError, match="differs"):
        fmt.pack(np.zeros((1, 4, 2, 3), np.int8))
    with pytest.raises(FormatError, match="not an integer type"):
        fmt.pack(np.zeros((1, 4, 2, 2), np.float32))
    with pytest.raises(FormatError, match="^image: "):
        fmt.unpack(np.zeros(10, np.uint8))


# --- Sophgo local memory: the seed's worked examples -----------------------------------------

LM = LocalMemory(npus=4, npu_bytes=1024)


def test_sophgo_addresses():
    """A = 340, B = 1472, C = 2300, D = 3088 with X = 4, S = 1024."""
    assert [LM.locate(a) for a in (340, 1472, 2300, 3088)] == \
        [(0, 340), (1, 448), (2, 252), (3, 16)]
    assert LM.address(2, 252) == 2300


@pytest.mark.parametrize(("start", "channels", "per_npu"), [
    (0, 3, 1),     # C = X - 1 from NPU 0
    (1, 3, 1),     # C = X - 1 from NPU 1
    (0, 6, 2),     # C = X + 2 from NPU 0
    (3, 6, 3),     # C = X + 2 from NPU X - 1: three rows
])
def test_sophgo_channels_per_npu(start, channels, per_npu):
    assert LM.channels_per_npu(start, channels) == per_npu
    t = LocalTensor(LM, start * 1024, (2, channels, 1, 1), "fp32", "compact")
    npu, _ = t.locate(0, np.arange(channels), 0, 0)
    assert list(npu) == [(start + c) % 4 for c in range(channels)]


def test_sophgo_stride_example():
    """(2, 5, 3, 4) fp32 from NPU 0 with W 2, H 16, C 56, N 120 element strides."""
    t = LocalTensor(LM, 0, (2, 5, 3, 4), "fp32", "strided", (120, 56, 16, 2))
    assert t.locate(1, 4, 2, 3) == (0, (120 + 56 + 32 + 6) * 4)
    assert t.locate(0, 5 - 1, 0, 0)[0] == 0 and t.locate(0, 1, 0, 0) == (1, 0)
    img = LM.empty()
    x = np.arange(120, dtype=np.float32).reshape(2, 5, 3, 4)
    t.store(img, x)
    assert (t.load(img) == x).all()
    assert img.view(np.float32)[0, 120 + 56 + 32 + 6] == x[1, 4, 2, 3]


@pytest.mark.parametrize(("start", "n_stride"), [(0, 32), (2, 64)])
def test_sophgo_aligned_examples(start, n_stride):
    """(2, 3, 4, 5) fp32: C stride ceil(20/32)*32 = 32; N stride 32 x channels per NPU."""
    t = LocalTensor(LM, start * 1024, (2, 3, 4, 5), "fp32", "aligned")
    assert t.strides == (n_stride, 32, 5, 1)


@pytest.mark.parametrize(("start", "n_stride"), [(0, 20), (2, 40)])
def test_sophgo_compact_examples(start, n_stride):
    t = LocalTensor(LM, start * 1024, (2, 3, 4, 5), "fp32", "compact")
    assert t.strides == (n_stride, 20, 5, 1)


@pytest.mark.parametrize("dtype, c_stride", [("fp32", 32), ("fp16", 64), ("int8", 128)])
def test_sophgo_aligned_c_stride_by_type(dtype, c_stride):
    assert LocalTensor(LM, 0, (1, 1, 4, 5), dtype, "aligned").strides[1] == c_stride


@pytest.mark.parametrize(("width", "channels", "blocks"), [
    (40, 1, 64), (20, 2, 32), (10, 4, 32), (8, 5, 64), (15, 3, 32), (6, 7, 64)])
def test_sophgo_matrix_examples(width, channels, blocks):
    """2-by-40 fp32 matrix: the 4-byte blocks one row takes in each NPU, per W."""
    t = matrix_tensor(LM, 0, 2, 40, width, "fp32")
    assert t.shape == (2, channels, 1, width)
    assert t.strides[0] == blocks
    img = LM.empty()
    m = np.arange(80, dtype=np.float32).reshape(2, 40)
    matrix_store(t, img, m)
    assert (matrix_load(t, img, 40) == m).all()
    if width == 15:                      # the last channel holds 40 - 30 = 10 columns
        npu, off = t.locate(0, 2, 0, 9)
        assert npu == 2 and img.view(np.float32)[2, off // 4] == 39


def test_sophgo_4n_example():
    """(6, 5, 4, 5) int8 in 4N mode: storage (2, 5, 4, 5) of int8x4, two dummy elements."""
    t = LocalTensor(LM, 0, (6, 5, 4, 5), "int8", "aligned", mode="4N")
    assert t.storage_shape == (2, 5, 4, 5) and t.storage_bytes == 4
    img = LM.empty(0xFF)
    x = np.arange(600).reshape(6, 5, 4, 5).astype(np.int8)
    t.store(img, x)
    assert (t.load(img) == x).all()
    npu, off = t.locate(4, 0, 0, 0)
    assert list(img[npu, off:off + 4].view(np.int8)) == [x[4, 0, 0, 0], x[5, 0, 0, 0], 0, 0]
    n0, o0 = t.locate(0, 0, 0, 0)
    assert list(img[n0, o0:o0 + 4].view(np.int8)) == list(x[0:4, 0, 0, 0])


def test_sophgo_2n_example():
    t = LocalTensor(LM, 0, (3, 5, 4, 5), "int16", "aligned", mode="2N")
    assert t.storage_shape == (2, 5, 4, 5)
    img = LM.empty(0xFF)
    x = np.arange(300).reshape(3, 5, 4, 5).astype(np.int16)
    t.store(img, x)
    npu, off = t.locate(2, 0, 0, 0)
    assert list(img[npu, off:off + 4].view(np.int16)) == [x[2, 0, 0, 0], 0]
    assert (t.load(img) == x).all()


def test_sophgo_2ic_mode():
    t = LocalTensor(LM, 128, (3, 2, 3, 3), "fp32", "aligned", mode="2IC")
    assert t.storage_shape == (2, 2, 3, 3) and t.storage_bytes == 8
    img = LM.empty()
    x = np.arange(54, dtype=np.float32).reshape(3, 2, 3, 3)
    t.store(img, x)
    assert (t.load(img) == x).all()


def test_sophgo_continuous_strides():
    assert continuous_strides((2, 3, 4, 5)) == (60, 20, 5, 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 7), st.integers(1, 3), st.integers(1, 20), st.integers(1, 4),
       st.integers(1, 6), st.sampled_from(["aligned", "compact"]),
       st.sampled_from([("int8", None), ("int16", None), ("fp32", None), ("int8", "4N"),
                        ("uint16", "2N"), ("fp32", "2IC"), ("fp16", None)]),
       st.integers(0, 2 ** 32 - 1))
def test_sophgo_round_trip(start, n, c, h, w, layout, dtype_mode, seed):
    lm = LocalMemory(8, 4096)
    dtype, mode = dtype_mode
    t = LocalTensor(lm, start * 4096 + 256, (n, c, h, w), dtype, layout, mode=mode)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, h, w)) * 100).astype(np.dtype(
        {"int8": "i1", "int16": "i2", "uint16": "u2", "fp32": "f4", "fp16": "f2"}[dtype]))
    img = lm.empty(0xAB)
    t.store(img, x)
    assert (t.load(img).view(np.uint8) == x.view(np.uint8)).all()
    # nothing outside the tensor's footprint in each NPU changed
    lo, hi = t.offset, t.offset + t.footprint
    assert (img[:, :lo] == 0xAB).all() and (img[:, hi:] == 0xAB).all()
    assert LocalTensor.from_dict(t.to_dict()) == t


@pytest.mark.parametrize(("kw", "field"), [
    ({"address": 4096}, "address"),
    ({"address": 64}, "address"),                        # aligned needs 128
    ({"layout": "compact", "address": 2}, "address"),
    ({"dtype": "bf16"}, "dtype"),
    ({"mode": "4N"}, "mode"),                            # fp32 is not 4N
    ({"mode": "8N"}, "mode"),
    ({"layout": "tiled"}, "layout"),
    ({"layout": "strided"}, "strides"),
    ({"strides": (1, 1, 1, 1)}, "strides"),
    ({"shape": (1, 1, 40, 40)}, "shape"),                # does not fit one NPU
    ({"shape": (1, 0, 1, 1)}, "shape.C"),
])
def test_sophgo_rejects(kw, field):
    base = {"memory": LM, "address": 0, "shape": (1, 3, 2, 2), "dtype": "fp32",
            "layout": "aligned"}
    with pytest.raises(FormatError, match=f"^{field}: "):
        LocalTensor(**{**base, **kw})


def test_sophgo_memory_rules():
    with pytest.raises(FormatError, match="^npus: "):
        LocalMemory(0, 1024)
    with pytest.raises(FormatError, match="^npu_bytes: "):
        LocalMemory(4, 1000)
    with pytest.raises(FormatError, match="^npu: "):
        LM.address(4, 0)
    with pytest.raises(FormatError, match="^offset: "):
        LM.address(0, 1024)
    t = LocalTensor(LM, 0, (1, 3, 2, 2), "int8", "aligned")
    with pytest.raises(FormatError, match="^image: "):
        t.store(np.zeros((4, 10), np.uint8), np.zeros((1, 3, 2, 2), np.int8))
    with pytest.raises(FormatError, match="does not fit int8"):
        t.store(LM.empty(), np.full((1, 3, 2, 2), 300))
    with pytest.raises(FormatError, match="^width: "):
        matrix_tensor(LM, 0, 2, 40, 41, "fp32")


# --- DMP -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("shape", "transpose"), [((1, 6, 4, 7), False), ((1, 6, 4, 7), True),
                                                  ((2, 20, 3, 5), False),
                                                  ((2, 20, 3, 5), True), ((1, 16, 2, 3), False)])
def test_dmp_offsets_follow_the_seed(shape, transpose):
    lay = DmpLayout(shape, transpose)
    D, C, H, W = shape
    t = np.random.default_rng(3).standard_normal(shape).astype(np.float16)
    img = lay.pack(t).view(np.float16)
    for d, c, h, w in [(0, 0, 0, 0), (D - 1, C - 1, H - 1, W - 1), (0, C // 2, 1, 2)]:
        chunk, n_ = c // 8, c % 8
        c_ = 8 if chunk < C // 8 else C % 8
        if not transpose:
            off = chunk * (W * H * 8) + w * (H * c_) + h * c_ + n_
        else:
            off = chunk * (W * H * 8) + h * (W * c_) + w * c_ + n_
        off += d * W * H * C
        assert img[off] == t[d, c, h, w]
        assert lay.offset(d, c, h, w) == off * 2
    assert (lay.unpack(lay.pack(t)) == t).all()


def test_dmp_seed_example_20_channels():
    """20 channels: chunks of 8, 8 and 4; the third starts at 2 * W*H*8 elements."""
    lay = DmpLayout((1, 20, 2, 3))
    assert lay.offset(0, 16, 0, 0) == 2 * 2 * 3 * 8 * 2
    assert lay.offset(0, 17, 0, 0) == (2 * 2 * 3 * 8 + 1) * 2
    assert lay.offset(0, 16, 1, 0) == (2 * 2 * 3 * 8 + 4) * 2     # y * C_ with C_ = 4


def test_dmp_network_output_is_plain_float32_dwhc():
    lay = DmpLayout.network_output((1, 20, 2, 3))
    assert lay.dtype == "fp32" and lay.offset(0, 19, 1, 2) == ((2 * 2 + 1) * 20 + 19) * 4


def test_dmp_fully_connected_is_flat():
    lay = DmpLayout((1, 100, 1, 1))
    v = np.arange(100).astype(np.float16).reshape(1, 100, 1, 1)
    assert (lay.pack(v).view(np.float16) == v.ravel()).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 30), st.integers(1, 5), st.integers(1, 5),
       st.booleans(), st.sampled_from(["fp16", "fp32"]), st.booleans())
def test_dmp_round_trip(d, c, h, w, transpose, dtype, chunked):
    lay = DmpLayout((d, c, h, w), transpose, dtype, chunked)
    t = np.random.default_rng(d * 1000 + c).standard_normal(lay.shape).astype(dtype.replace(
        "fp", "float"))
    img = lay.pack(t)
    assert img.size == lay.size
    assert (lay.unpack(img) == t).all()
    dd, cc, hh, ww = grid(lay.shape)
    offs = lay.offset(dd, cc, hh, ww)
    assert np.unique(offs).size == t.size and offs.max() < lay.size
    assert DmpLayout.from_dict(lay.to_dict()) == lay


@pytest.mark.parametrize("src", ["int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("w", [6, 7])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_dmp_integer_tensors_convert_like_a_cast(src, w, transpose, dtype):
    # integers go through lookup tables (two neighbours per lookup for bytes and even W)
    info = np.iinfo(src)
    t = np.random.default_rng(w).integers(info.min, info.max + 1, (2, 11, 3, w)).astype(src)
    top = 65504 if dtype == "fp16" and src == "uint16" else info.max
    t = np.minimum(t, top)
    t.flat[:4] = [info.min, top, 0, 1]
    lay = DmpLayout(t.shape, transpose, dtype)
    if top < info.max:
        with pytest.raises(FormatError, match="beyond fp16's range"):
            lay.pack(np.full(t.shape, 65505, np.uint16))
    want = t.astype(np.float64).astype(dtype.replace("fp", "float"))
    assert (lay.pack(t) == lay.pack(want)).all()
    assert (lay.pack(t[:, :, :, ::-1]) == lay.pack(want[:, :, :, ::-1])).all()   # strided


@pytest.mark.parametrize(("kw", "field"), [({"shape": (2, 2)}, "shape"),
                                           ({"shape": (1, 0, 1, 1)}, "shape.C"),
                                           ({"dtype": "int8"}, "dtype")])
def test_dmp_rejects(kw, field):
    with pytest.raises(FormatError, match=f"^{field}: "):
        DmpLayout(**{"shape": (1, 4, 2, 2), **kw})


def test_dmp_rejects_bad_tensors():
    lay = DmpLayout((1, 4, 2, 2))
    with pytest.raises(FormatError, match="differs"):
        lay.pack(np.zeros((1, 4, 2, 3)))
    with pytest.raises(FormatError, match="beyond fp16"):
        lay.pack(np.full((1, 4, 2, 2), 1e6))
    with pytest.raises(FormatError, match="^image: "):
        lay.unpack(np.zeros(3, np.uint8))


# --- NVDLA auxiliary data --------------------------------------------------------------------

from atomcube.model.nvdla.auxdata import AuxFormat  # noqa: E402


@pytest.mark.parametrize(("use", "proc", "data_bytes", "atom"), [
    ("bias", "int8", 1, 32), ("bias", "int8", 2, 64), ("bias", "int16", 2, 32),
    ("prelu", "fp16", 2, 32), ("batchnorm", "int8", 1, 64), ("batchnorm", "int16", 2, 64),
    ("eltwise", "int8", 2, 64), ("eltwise_both", "int8", 2, 128),
    ("eltwise_both", "fp16", 2, 64)])
def test_aux_bytes_per_atom(use, proc, data_bytes, atom):
    """BytesPerAtom = ElementPerAtom x ComponentsPerElement x BytesPerComponent (seed)."""
    scope = "element" if use.startswith("eltwise") else "channel"
    shape = (20, 2, 3) if scope == "element" else (20,)
    assert AuxFormat(use, scope, proc, data_bytes, shape).atom_bytes == atom


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([("bias", "channel"), ("bias", "element"), ("prelu", "channel"),
                        ("batchnorm", "channel"), ("eltwise", "element"),
                        ("eltwise_both", "element")]),
       st.sampled_from([("int8", 1), ("int8", 2), ("int16", 1), ("int16", 2), ("fp16", 2)]),
       st.integers(1, 70), st.integers(1, 3), st.integers(1, 4), st.integers(0, 2))
def test_aux_round_trip_and_addresses(use_scope, proc_size, c, h, w, extra_line):
    use, scope = use_scope
    proc, db = proc_size
    shape = (c, h, w) if scope == "element" else (c,)
    kw = {}
    if scope == "element":
        atom = {"int8": 32, "int16": 16, "fp16": 16}[proc] * (2 if use in ("batchnorm",
                                                                          "eltwise_both")
                                                               else 1) * db
        kw = {"line_stride": -(-w * atom // 32) * 32 + 32 * extra_line}
    f = AuxFormat(use, scope, proc, db, shape, **kw)
    full = shape + ((f.components,) if f.components > 1 else ())
    rng = np.random.default_rng(c * 100 + h)
    t = (rng.standard_normal(full) * 50).astype(f.dtype)
    img = f.pack(t)
    assert img.size == f.size and (f.unpack(img) == t).all()
    idx = list(np.meshgrid(*[np.arange(v) for v in full], indexing="ij"))
    k = idx.pop() if f.components > 1 else 0
    addr = f.address(*idx, k=k)
    words = np.stack([img[addr + j] for j in range(db)], axis=-1).view(f.dtype)[..., 0]
    assert (words == t).all()


def test_aux_per_layer_is_a_register():
    f = AuxFormat("batchnorm", "layer", "int16", 2, (1,))
    assert f.size == 0 and f.pack(np.array([[3, 4]], np.int16)) is None
    with pytest.raises(FormatError, match="^scope: "):
        f.unpack(b"")


@pytest.mark.parametrize(("args", "field"), [
    (("conv", "channel", "int8", 1, (4,)), "use"),
    (("prelu", "element", "int8", 1, (4, 1, 1)), "scope"),
    (("bias", "channel", "int4", 1, (4,)), "proc"),
    (("bias", "channel", "int8", 4, (4,)), "data_bytes"),
    (("bias", "channel", "fp16", 1, (4,)), "data_bytes"),
    (("bias", "element", "int8", 1, (4,)), "shape"),
    (("bias", "channel", "int8", 1, (0,)), "shape"),
])
def test_aux_rejects(args, field):
    with pytest.raises(FormatError, match=f"^{field}: "):
        AuxFormat(*args)


def test_aux_rejects_strides_and_values():
    with pytest.raises(FormatError, match="^line_stride: .*multiple"):
        AuxFormat("bias", "element", "int8", 1, (4, 2, 2), line_stride=80)
    with pytest.raises(FormatError, match="^line_stride: .*no strides"):
        AuxFormat("bias", "channel", "int8", 1, (4,), line_stride=64)
    f = AuxFormat("bias", "channel", "int8", 1, (4,))
    with pytest.raises(FormatError, match="do not fit"):
        f.pack(np.array([1, 2, 3, 400]))
    with pytest.raises(FormatError, match="shape"):
        f.pack(np.array([1, 2, 3]))


# --- precision rules -------------------------------------------------------------------------

from atomcube.model.nvdla import precision as P  # noqa: E402


def test_precision_tables_match_the_seed():
    assert P.check("conv", "image", "int16") == ("int16", "int16")
    assert P.check("conv", "image_fp16", "fp16") == ("fp16", "fp16")
    assert P.check("sdp", "int16", "fp16") == "int32"
    assert P.check("sdp", "fp16", "int16") == "fp32"
    assert P.check("lrn", "int8", "int8") == "int8"
    assert P.check("pooling", "fp16", "fp16") == "fp16"
    invalid = {("conv", "image_fp16", "int8"), ("conv", "int8", "int16"), ("conv", "fp16", "int8"),
               ("sdp", "int8", "fp16"), ("sdp", "fp16", "int8"), ("lrn", "int8", "int16"),
               ("pooling", "int16", "fp16")}
    for unit, i, o in invalid:
        with pytest.raises(FormatError, match="invalid case"):
            P.check(unit, i, o)
    # counts per table: conv has 7 valid cases, SDP 7, LRN and pooling 3 each
    assert sum(v is not None for v in P.CONV.values()) == 7
    assert sum(v is not None for v in P.SDP.values()) == 7
    assert sum(v is not None for v in P.LRN.values()) == 3


def test_precision_check_names_the_field():
    with pytest.raises(FormatError, match="^unit: "):
        P.check("cdma", "int8", "int8")
    with pytest.raises(FormatError, match="^input: "):
        P.check("sdp", "image", "int8")
    with pytest.raises(FormatError, match="^output: "):
        P.check("sdp", "int8", "int4")


def test_pixel_conversion_truncates_and_saturates():
    d = np.array([0, 100, 128, 255])
    assert list(P.convert(d, 128, 1.0, "int8")) == [-128, -28, 0, 127]
    assert list(P.convert(d, 0, 0.5, "int8")) == [0, 50, 64, 127]
    assert list(P.convert(np.array([-3, 3]), 0, 0.5, "int16")) == [-1, 1]   # toward zero
    assert list(P.convert(np.array([1000]), 0, 100.0, "fp16")) == [65504]   # saturates
    assert P.convert(np.array([300]), 44, 1.0, "int16").dtype == np.int16
    with pytest.raises(FormatError, match="^precision: "):
        P.convert(d, 0, 1, "int4")


# The FP16 section of NVDLA's data format guide, a test per rule.

@pytest.mark.parametrize("unit, big", [("conv", 65536.0), ("conv_winograd", 65504.0),
                                       ("sdp", 3.40282e38), ("cdp", 4292870144.0),
                                       ("pdp_average", 4292870144.0), ("pdp_maxmin", np.inf)])
def test_fp16_infinity_becomes_each_sub_modules_value(unit, big):
    x = np.array([np.inf, -np.inf, 1.0], dtype=np.float16)
    v, nans = P.fp16_input(x, unit)
    assert list(v) == [big, -big, 1.0] and nans == 0


def test_fp16_results_saturate_and_are_never_infinite():
    out, nans = P.fp16_output(np.array([1e9, -1e9, np.inf, -np.inf, 65519.0, 65520.0, 3.4e38]))
    assert list(out) == [65504, -65504, 65504, -65504, 65504, 65504, 65504] and nans == 0
    assert out.dtype == np.float16 and not np.isinf(out).any()
    # the integer types saturate at their own ends
    assert list(P.convert(np.array([1e6, -1e6]), 0, 1.0, "int16")) == [32767, -32768]
    assert list(P.convert(np.array([1e6, -1e6]), 0, 1.0, "int8")) == [127, -128]


def test_fp16_nan_propagates_or_is_flushed_and_is_counted():
    x = np.array([np.nan, 2.0, -np.nan, np.inf], dtype=np.float16)
    v, nans = P.fp16_input(x, "sdp")
    assert nans == 2 and np.isnan(v[[0, 2]]).all() and v[1] == 2.0
    out, out_nans = P.fp16_output(v * 3)                   # a result of a NaN is NaN
    assert out_nans == 2 and np.isnan(out[[0, 2]]).all()
    flushed, nans = P.fp16_input(x, "sdp", flush_nan=True)
    assert nans == 2 and list(flushed[:3]) == [0.0, 2.0, 0.0]   # counted, then read as zero
    assert P.fp16_output(flushed)[1] == 0                  # no NaN leaves


def test_fp16_denormals_are_kept_in_and_out():
    tiny = np.float16(2.0 ** -24)                          # the smallest fp16 denormal
    v, _ = P.fp16_input(np.array([tiny, -tiny * 3], dtype=np.float16), "conv")
    assert list(v) == [2.0 ** -24, -3 * 2.0 ** -24]
    out, _ = P.fp16_output(np.array([2.0 ** -24, 5 * 2.0 ** -24, 2.0 ** -26, 2.0 ** -15]))
    assert [float(x) for x in out] == [2.0 ** -24, 5 * 2.0 ** -24, 0.0, 2.0 ** -15]


def test_fp16_rounds_to_nearest_even():
    ulp = 2.0 ** -10                                       # fp16's step in [1, 2)
    out, _ = P.fp16_output(np.array([1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2 ** -20,
                                     2049.0, 2051.0, 1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24]))
    assert [float(x) for x in out] == [1.0, 1 + 2 * ulp, 1 + ulp, 2048.0, 2052.0,
                                       2.0 ** -23, 2.0 ** -23]


def test_fp16_rules_refuse_unknown_units_and_types():
    with pytest.raises(FormatError, match="^unit: "):
        P.fp16_input(np.ones(2, dtype=np.float16), "gpu")
    with pytest.raises(FormatError, match="^x: "):
        P.fp16_input(np.ones(2), "sdp")


# fp16 feature data may hold NaN and infinities (only the channel padding may not be NaN)

_SPECIALS = np.array([0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x7FFF, 0x8000, 0x0001, 0x3C00],
                     dtype=np.uint16)       # +inf, -inf, quiet, signalling and negative NaNs
#                                             with payloads, -0, the smallest denormal, 1.0


@pytest.mark.parametrize("shape, strides", [((1, 19, 3, 5), {}),
                                            ((2, 40, 2, 3), {"line_stride": 128,
                                                             "cube_stride": 4096})])
def test_fp16_feature_data_keeps_nan_and_infinity_bits(shape, strides):
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    bits.flat[:_SPECIALS.size] = _SPECIALS
    tensor = bits.view(np.float16)
    fmt = FeatureFormat("fp16", shape, fill=-2.5, **strides)
    image = fmt.pack(tensor)
    assert np.array_equal(fmt.unpack(image).view(np.uint16), bits)
    # the channel padding is the fill, not NaN, whatever the data hold
    n, c, h, w = shape
    pad = image.view(np.float16)[fmt.address(0, np.arange(c, 16 * fmt.surfaces), 0, 0) // 2]
    assert (pad == np.float16(-2.5)).all()


def test_fp16_feature_data_from_wider_floats():
    fmt = FeatureFormat("fp16", (1, 4, 1, 1))
    back = fmt.unpack(fmt.pack(np.array([np.nan, np.inf, -np.inf, 65519.0],
                                        dtype=np.float32).reshape(1, 4, 1, 1)))
    assert np.isnan(back[0, 0]) and list(back.ravel()[1:]) == [np.inf, -np.inf, 65504]
    with pytest.raises(FormatError, match="^tensor: has values beyond fp16's range .* in "
                                          "the feature data$") as e:
        fmt.pack(np.array([1.0, 2.0, 70000.0, 3.0]).reshape(1, 4, 1, 1))
    assert type(e.value) is FormatError                    # not the weight tools' error
    with pytest.raises(FormatError, match="^fill: .*except NaN"):
        FeatureFormat("fp16", (1, 4, 1, 1), fill=float("nan"))


def test_feature_data_errors_name_the_tensor_not_weights():
    with pytest.raises(FormatError) as e:
        FeatureFormat("int8", (1, 4, 1, 1)).pack(np.ones((1, 4, 1, 1)) * 0.5)
    assert type(e.value) is FormatError and str(e.value).startswith("tensor: ")
    assert "weight" not in str(e.value)
    with pytest.raises(FormatError, match="^tensor: values 0 .. 300 do not fit int8"):
        FeatureFormat("int8", (1, 2, 1, 1)).pack(np.array([0, 300]).reshape(1, 2, 1, 1))
