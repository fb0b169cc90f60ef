"""NVDLA pixel formats (model/nvdla/pixel.py): the seed's table, the field layouts checked one
sample at a time against hand-written bytes, the channel reordering of NVDLA's CDMA parser,
sign extension, X offsets on both planes, hypothesis round trips and the invalid inputs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atomcube.model.errors import FormatError
from atomcube.model.nvdla.pixel import FORMATS, PixelImage, pixel_format
from atomcube.model.nvdla.precision import convert

#: the seed's table: name -> (planes, channels, input precision, largest X offset)
SEED = {
    "T_R8": (1, 1, "int8", 31), "T_R10": (1, 1, "int16", 15), "T_R12": (1, 1, "int16", 15),
    "T_R16": (1, 1, "int16", 15), "T_R16_I": (1, 1, "int16", 15),
    "T_R16_F": (1, 1, "int16", 15),
    **{n: (1, 4, "int16", 3) for n in ("T_A16B16G16R16", "T_X16B16G16R16", "T_A16Y16U16V16",
                                       "T_V16U16Y16A16")},
    "T_A16B16G16R16_F": (1, 4, "fp16", 3), "T_A16Y16U16V16_F": (1, 4, "fp16", 3),
    **{n: (1, 4, "int8", 7) for n in ("T_A8B8G8R8", "T_A8R8G8B8", "T_B8G8R8A8", "T_R8G8B8A8",
                                      "T_X8B8G8R8", "T_X8R8G8B8", "T_B8G8R8X8", "T_R8G8B8X8",
                                      "T_A8Y8U8V8", "T_V8U8Y8A8")},
    **{n: (1, 4, "int16", 7) for n in ("T_A2B10G10R10", "T_A2R10G10B10", "T_B10G10R10A2",
                                       "T_R10G10B10A2", "T_A2Y10U10V10", "T_V10U10Y10A2")},
    "T_Y8___U8V8_N444": (2, 3, "int8", 31), "T_Y8___V8U8_N444": (2, 3, "int8", 31),
    **{f"T_Y{b}___{a}{b}{c}{b}_N444": (2, 3, "int16", 15)
       for b in (10, 12, 16) for a, c in (("U", "V"), ("V", "U"))},
}

#: NVDLA's CDMA pixel-format parser sorts the formats into reorder classes (its pixel_order
#: one-hot); the identity class is the first. Formats of one class must share one memory-to-
#: channel permutation, and the identity class must need none.
ORDER_CLASSES = [
    ["T_R8", "T_R10", "T_R12", "T_R16", "T_R16_I", "T_R16_F", "T_A16B16G16R16",
     "T_X16B16G16R16", "T_A16B16G16R16_F", "T_A8B8G8R8", "T_X8B8G8R8", "T_A2B10G10R10",
     "T_Y8___V8U8_N444", "T_Y10___V10U10_N444", "T_Y12___V12U12_N444", "T_Y16___V16U16_N444"],
    ["T_A8R8G8B8", "T_X8R8G8B8", "T_A8Y8U8V8"],
    ["T_A16Y16U16V16", "T_A16Y16U16V16_F"],
    ["T_B8G8R8A8", "T_B8G8R8X8", "T_V8U8Y8A8"],
    ["T_V16U16Y16A16"],
    ["T_R8G8B8A8", "T_R8G8B8X8"],
    ["T_A2R10G10B10", "T_A2Y10U10V10"],
    ["T_B10G10R10A2", "T_V10U10Y10A2"],
    ["T_R10G10B10A2"],
    ["T_Y8___U8V8_N444"],
    ["T_Y10___U10V10_N444", "T_Y12___U12V12_N444", "T_Y16___U16V16_N444"],
]


def memory_order(fmt):
    """Channels in the order their fields appear in memory (plane, then bit offset)."""
    return tuple(c for _, c in sorted(((p, off), c) for c, (p, off, _) in enumerate(fmt.fields)))


def random_samples(rng, img):
    fmt = img.format
    out = np.empty(img.shape, dtype=np.float16 if fmt.kind == "float" else np.int64)
    for c, (_, _, width) in enumerate(fmt.fields):
        if fmt.kind == "float":
            out[c] = rng.standard_normal(img.shape[1:]).astype(np.float16)
        elif fmt.kind == "int" or img.sign == "signed":
            out[c] = rng.integers(-(1 << (width - 1)), 1 << (width - 1), img.shape[1:])
        else:
            out[c] = rng.integers(0, 1 << width, img.shape[1:])
    return out


def test_table_matches_the_seed():
    assert sorted(FORMATS) == sorted(SEED)
    for code, (name, fmt) in enumerate(FORMATS.items()):
        planes, channels, precision, x_max = SEED[name]
        assert (fmt.code, fmt.planes, fmt.channels, fmt.precision, fmt.x_offset_max) == \
            (code, planes, channels, precision, x_max), name
        assert pixel_format(code) is fmt and pixel_format(name[2:]) is fmt


def test_channel_order_agrees_with_the_cdma_reorder_classes():
    assert sorted(n for cls in ORDER_CLASSES for n in cls) == sorted(FORMATS)
    perms = []
    for i, cls in enumerate(ORDER_CLASSES):
        if i == 0:
            assert all(memory_order(FORMATS[n]) == tuple(range(FORMATS[n].channels)) for n in cls)
            continue
        orders = {memory_order(FORMATS[n]) for n in cls}
        assert len(orders) == 1, cls
        assert orders != {tuple(range(FORMATS[cls[0]].channels))}, cls
        fmt = FORMATS[cls[0]]
        perms.append((orders.pop(), fmt.plane_bytes, tuple(w for _, _, w in fmt.fields)))
    # classes of the same field layout differ in their permutation
    assert len(set(perms)) == len(perms)


def test_field_layouts_by_hand():
    # T_A8R8G8B8: word 0xAARRGGBB little-endian -> bytes B, G, R, A; channels R, G, B, A
    img = PixelImage("A8R8G8B8", 1, 1)
    assert img.decode(np.array([0x33, 0x22, 0x11, 0x44] + [0] * 28, np.uint8)).ravel().tolist() \
        == [0x11, 0x22, 0x33, 0x44]
    # T_A2B10G10R10: R bits 9:0, G 19:10, B 29:20, A 31:30
    word = (2 << 30) | (0x155 << 20) | (0x2AA << 10) | 0x3FF
    img = PixelImage("A2B10G10R10", 1, 1)
    buf = np.zeros(32, np.uint8)
    buf[:4] = np.frombuffer(np.uint32(word).tobytes(), np.uint8)
    assert img.decode(buf).ravel().tolist() == [0x3FF, 0x2AA, 0x155, 2]
    # T_R10G10B10A2: A bits 1:0, B 11:2, G 21:12, R 31:22
    word = (0x123 << 22) | (0x0F0 << 12) | (0x30F << 2) | 1
    buf[:4] = np.frombuffer(np.uint32(word).tobytes(), np.uint8)
    assert PixelImage("R10G10B10A2", 1, 1).decode(buf).ravel().tolist() == \
        [0x123, 0x0F0, 0x30F, 1]
    # T_Y8___U8V8_N444: plane 1 words have V in the low byte
    y = np.zeros(32, np.uint8)
    y[0] = 9
    uv = np.zeros(32, np.uint8)
    uv[:2] = [0x56, 0x78]
    assert PixelImage("Y8___U8V8_N444", 1, 1).decode(y, uv).ravel().tolist() == [9, 0x78, 0x56]
    assert PixelImage("Y8___V8U8_N444", 1, 1).decode(y, uv).ravel().tolist() == [9, 0x56, 0x78]
    # T_R12: the whole 16-bit container is the sample
    r = np.zeros(32, np.uint8)
    r[:2] = [0x34, 0xF2]
    assert PixelImage("R12", 1, 1).decode(r).item() == 0xF234


def test_sign_override():
    buf = np.zeros(32, np.uint8)
    buf[0] = 0x87
    assert PixelImage("R8", 1, 1).decode(buf).item() == 0x87
    assert PixelImage("R8", 1, 1, sign="signed").decode(buf).item() == 0x87 - 0x100
    buf[:4] = np.frombuffer(np.uint32(0x200 | (3 << 30)).tobytes(), np.uint8)
    s = PixelImage("A2B10G10R10", 1, 1, sign="signed").decode(buf).ravel()
    assert s.tolist() == [-512, 0, 0, -1]
    buf[:2] = [0x00, 0x80]
    assert PixelImage("R16_I", 1, 1).decode(buf).item() == -32768   # always signed
    assert PixelImage("R16", 1, 1).decode(buf).item() == 32768


def test_fp16_formats_hold_float16():
    img = PixelImage("A16B16G16R16_F", 2, 1)
    v = np.array([1.5, -2.0, 65504, np.float16(6e-8)], np.float16)
    buf = np.zeros(32, np.uint8)
    buf[8:16] = np.frombuffer(v.tobytes(), np.uint8)
    got = img.decode(buf)
    assert got.dtype == np.float16 and got[:, 0, 1].tolist() == v.tolist()


@pytest.mark.parametrize("name", ["T_R8", "T_A8B8G8R8", "T_A16B16G16R16", "T_Y8___U8V8_N444",
                                  "T_Y16___V16U16_N444"])
def test_x_offset_and_strides_place_each_pixel(name):
    fmt = FORMATS[name]
    img = PixelImage(fmt, 5, 3, x_offset=fmt.x_offset_max, line_stride=96 * fmt.plane_bytes[0],
                     uv_line_stride=96 * fmt.plane_bytes[-1] if fmt.planes == 2 else None,
                     fill=0xEE)
    rng = np.random.default_rng(1)
    samples = random_samples(rng, img)
    planes = img.encode(samples)
    for p, buf in enumerate(planes):
        bpp, stride = fmt.plane_bytes[p], img.plane_stride(p)
        x0 = img.plane_x_offset(p)
        if p == 1:
            assert x0 == fmt.x_offset_max % (32 // bpp)
        used = np.zeros(buf.size, bool)
        for y in range(3):
            for x in range(5):
                a = y * stride + (x0 + x) * bpp
                word = int.from_bytes(buf[a:a + bpp].tobytes(), "little")
                for c, (pp, off, width) in enumerate(fmt.fields):
                    if pp == p:
                        assert (word >> off) & ((1 << width) - 1) == samples[c, y, x]
                used[a:a + bpp] = True
        assert (buf[~used] == 0xEE).all()
    np.testing.assert_array_equal(img.decode(*planes), samples)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.integers(1, 40), st.integers(1, 5),
       st.integers(0, 31), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from(["unsigned", "signed"]), st.integers(0, 2**32 - 1))
def test_round_trip(name, w, h, x_off, extra, extra_uv, sign, seed):
    fmt = FORMATS[name]
    x_off %= fmt.x_offset_max + 1
    base = PixelImage(fmt, w, h, x_off, sign=sign)
    img = PixelImage(fmt, w, h, x_off, base.line_stride + 32 * extra,
                     base.uv_line_stride + 32 * extra_uv if fmt.planes == 2 else None, sign)
    samples = random_samples(np.random.default_rng(seed), img)
    image = img.pack(samples)
    assert image.size == img.size
    got = img.unpack(image)
    if fmt.kind == "float":
        np.testing.assert_array_equal(got.view(np.uint16), samples.view(np.uint16))
    else:
        np.testing.assert_array_equal(got, samples)
    assert PixelImage.from_dict(img.to_dict()) == img


def test_conversion_with_per_channel_means():
    img = PixelImage("A8B8G8R8", 4, 2)
    samples = random_samples(np.random.default_rng(3), img)
    means = np.array([10, 20, 30, 0]).reshape(4, 1, 1)
    out = convert(img.decode(img.pack(samples)[: img.size]), means, 0.5, "int8")
    np.testing.assert_array_equal(out, np.clip(np.trunc((samples - means) * 0.5), -128, 127))


@pytest.mark.parametrize("kw, field", [
    ({"format": "T_R9"}, "pixel_format"),
    ({"format": 0x24}, "pixel_format"),
    ({"width": 0}, "shape.W"),
    ({"x_offset": 8}, "x_offset"),
    ({"x_offset": -1}, "x_offset"),
    ({"line_stride": 48}, "line_stride"),
    ({"line_stride": 32}, "line_stride"),
    ({"uv_line_stride": 64}, "uv_line_stride"),
    ({"sign": "maybe"}, "sign"),
    ({"precision": "int16"}, "precision"),
    ({"fill": 256}, "fill"),
])
def test_rejects(kw, field):
    args = {"format": "T_A8B8G8R8", "width": 20, "height": 2, **kw}
    with pytest.raises(FormatError) as e:
        PixelImage(**args)
    assert e.value.field == field


def test_rejects_bad_data():
    img = PixelImage("Y8___U8V8_N444", 8, 2, x_offset=3)
    planes = img.encode(np.zeros(img.shape, np.int32))
    with pytest.raises(FormatError, match="planes"):
        img.decode(planes[0])
    with pytest.raises(FormatError, match=r"planes\[1\]"):
        img.decode(planes[0], planes[1][:40])
    with pytest.raises(FormatError, match="samples"):
        img.encode(np.zeros((4, 2, 8), np.int32))
    bad = np.zeros(img.shape, np.int32)
    bad[1, 1, 5] = 256
    with pytest.raises(FormatError, match=r"samples\[1\].*255, not 256 \(at y 1, x 5\)"):
        img.encode(bad)
    with pytest.raises(FormatError, match=r"signed 8-bit.*-128 to 127, not 128"):
        PixelImage("R8", 2, 1, sign="signed").encode(np.full((1, 1, 2), 128))
    with pytest.raises(FormatError, match="float16"):
        PixelImage("R16_F", 2, 2).encode(np.zeros((1, 2, 2), np.float32))
    with pytest.raises(FormatError, match="integers"):
        img.encode(np.zeros(img.shape, np.float32))
    with pytest.raises(FormatError, match="image"):
        img.unpack(np.zeros(img.size + 1, np.uint8))
