"""The DMA's software side: descriptor rules and memory form, the reference executor against an
element-by-element loop, and three-way agreement of every conversion (the format function,
the executor running the compiled descriptors, and, in sim/dma, the hardware)."""

import math
import shutil
import subprocess
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from atomcube.model.dma.compile import (
    dense_transpose,
    dmp,
    emit,
    nvdla_feature,
    nvdla_pixel,
    nvdla_weights,
    sophgo_local,
)
from atomcube.model.dma.descriptor import (
    CONVERSIONS,
    DESCRIPTOR_BYTES,
    FIELDS,
    NO_CONVERSION,
    TYPES,
    Conversion,
    Descriptor,
    DescriptorError,
    Dim,
    Error,
    Program,
    c_header,
    conversion_code,
    read_chain,
)
from atomcube.model.dma.executor import execute
from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.errors import FormatError
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.pixel import FORMATS as PIXEL_FORMATS
from atomcube.model.nvdla.pixel import PixelImage
from atomcube.model.nvdla.precision import convert
from atomcube.model.nvdla.weights import WeightSpec
from atomcube.model.sophgo.local import LocalMemory, LocalTensor


def loop_execute(descs, mem):
    """The descriptor semantics, one element at a time."""
    for d in descs:
        eb = d.element_bytes
        pad = d.pad.to_bytes(8, "little")[:eb]
        for idx in np.ndindex(*[x.extent for x in d.dims]):
            dst = d.dst + sum(i * x.dst_stride for i, x in zip(idx, d.dims, strict=True))
            if all(i < x.valid for i, x in zip(idx, d.dims, strict=True)):
                src = d.src + sum(i * x.src_stride for i, x in zip(idx, d.dims, strict=True))
                mem[dst:dst + eb] = mem[src:src + eb]
            else:
                mem[dst:dst + eb] = np.frombuffer(pad, np.uint8)


def run_program(prog, src_bytes, src_addr, dst_addr, size, background=0):
    mem = np.full(size, background, np.uint8)
    mem[src_addr:src_addr + src_bytes.size] = src_bytes
    execute(prog, mem)
    return mem


# --- descriptors ------------------------------------------------------------------------------

def test_memory_form_round_trip():
    d = Descriptor(0x1000, 0x80000, 2, (Dim(16, 2, 64, 10), Dim(3, 32, 1024)), pad=0xABCD,
                   irq=True)
    raw = d.encode()
    assert len(raw) == DESCRIPTOR_BYTES
    back = Descriptor.decode(raw)
    assert back == d
    prog = Program([d, Descriptor(0, 0x100, 8, (Dim(4, 8, 8),))])
    chain = prog.chain(0x200)
    mem = np.zeros(0x400, np.uint8)
    mem[0x200:0x200 + len(chain)] = np.frombuffer(chain, np.uint8)
    got = read_chain(mem, 0x200)
    assert [g.src for g in got] == [0x1000, 0] and got[0].next == 0x280 and got[1].last
    assert not got[0].last and got[0].dims == d.dims
    with pytest.raises(DescriptorError) as e:
        prog.chain(0x210)
    assert e.value.code == Error.ALIGN


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_c_header_writes_the_memory_form(tmp_path):
    """A C program that fills ``atomcube_dma_desc_t`` from the header's names writes the same
    128 bytes as :meth:`Descriptor.encode`, and the header compiles warning-free as C99 and
    as C++."""
    d = Descriptor(0x1000, 0x80000, 4, (Dim(16, 4, 64, 10), Dim(3, 64, 1024)), pad=0xDEADBEEF,
                   irq=True, next=0x4080, last=False)
    (tmp_path / "dma_descriptor.h").write_text(c_header())
    dims = "\n".join(
        f"  t.dims[{k}].extent = {x.extent}u; t.dims[{k}].valid = {x.valid}u; "
        f"t.dims[{k}].src_stride = {x.src_stride}u; t.dims[{k}].dst_stride = {x.dst_stride}u;"
        for k, x in enumerate(d.dims + (Dim(1, 0, 0),) * (5 - len(d.dims))))
    (tmp_path / "main.c").write_text(f"""#include <stdio.h>
#include <string.h>
#include "dma_descriptor.h"
int main(void) {{
  atomcube_dma_desc_t t;
  memset(&t, 0, sizeof t);
  t.src = 0x{d.src:x}u; t.dst = 0x{d.dst:x}u; t.next = 0x{d.next:x}u; t.pad = 0x{d.pad:x}u;
  t.control = (2u << ATOMCUBE_DMA_CONTROL_ELEMENT_SHIFT) | (2u << ATOMCUBE_DMA_CONTROL_DIMS_SHIFT)
            | ATOMCUBE_DMA_CONTROL_IRQ;
{dims}
  fwrite(&t, 1, sizeof t, stdout);
  return ATOMCUBE_DMA_ERROR_OVERLAP == 5u ? 0 : 1;
}}
""")
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-o", exe,
                    tmp_path / "main.c"], check=True)
    assert subprocess.run([exe], capture_output=True, check=True).stdout == d.encode()
    if shutil.which("g++"):
        subprocess.run(["g++", "-x", "c++", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                        tmp_path / "main.c"], check=True)


@pytest.mark.parametrize("kw, code, field", [
    ({"element_bytes": 3}, Error.DIMS, "element_bytes"),
    ({"dims": ()}, Error.DIMS, "dims"),
    ({"dims": (Dim(2, 1, 1),) * 6}, Error.DIMS, "dims"),
    ({"dims": (Dim(0, 1, 1),)}, Error.ZERO_EXTENT, "dims[0].extent"),
    ({"dims": (Dim(4, 1, 1, 5),)}, Error.DIMS, "dims[0].valid"),
    ({"dims": (Dim(4, 1, 1), Dim(2, 4, 3))}, Error.DIMS, "dims[1].dst_stride"),
    ({"dims": (Dim(4, 1, 0),)}, Error.DIMS, "dims[0].dst_stride"),
    ({"dims": (Dim(2, 1, 8), Dim(8, 2, 1))}, Error.DIMS, "dims[1].dst_stride"),   # not in order
    ({"dims": (Dim(4, 1, 1 << 32),)}, Error.DIMS, "dims[0].dst_stride"),
    ({"src": 0x1001, "element_bytes": 2, "dims": (Dim(4, 2, 2),)}, Error.ALIGN, "src"),
    ({"element_bytes": 4, "dims": (Dim(4, 6, 4),)}, Error.ALIGN, "dims[0].src_stride"),
    ({"src": 0xFFFFFFF0, "dims": (Dim(32, 1, 1),)}, Error.RANGE, "src"),
    ({"dst": 0xFFFFFFF0, "dims": (Dim(32, 1, 1),)}, Error.RANGE, "dst"),
    ({"dst": 0x1010, "dims": (Dim(32, 1, 1),)}, Error.OVERLAP, "dst"),
])
def test_descriptor_rules(kw, code, field):
    args = {"src": 0x1000, "dst": 0x2000, "element_bytes": 1, "dims": (Dim(16, 1, 1),), **kw}
    d = Descriptor(**args)
    assert d.error(32) == code
    with pytest.raises(DescriptorError) as e:
        d.check(32)
    assert (e.value.code, e.value.field) == (code, field)


def test_descriptor_rules_accept():
    # a pad-only descriptor reads nothing, so it cannot overlap its source address
    assert Descriptor(0x1000, 0x1000, 1, (Dim(16, 1, 1, 0),)).error() == Error.NONE
    # the same range is fine with a wider address space
    assert Descriptor(0xFFFFFFF0, 0x0, 1, (Dim(32, 1, 1),)).error(33) == Error.NONE


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 4), st.data())
def test_executor_matches_the_element_loop(eb, ndims, data):
    # random nesting destination, random source strides (may repeat elements), random pads
    dims, span = [], 0
    for _ in range(ndims):
        extent = data.draw(st.integers(1, 5))
        dst_stride = span + eb * data.draw(st.integers(1, 3))
        src_stride = eb * data.draw(st.integers(0, 9))
        valid = data.draw(st.integers(0, extent))
        dims.append(Dim(extent, src_stride, dst_stride, valid))
        span = dst_stride * extent
    d = Descriptor(eb * data.draw(st.integers(0, 8)), 4096 + eb * data.draw(st.integers(0, 8)),
                   eb, tuple(dims), pad=data.draw(st.integers(0, (1 << 64) - 1)))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    mem = rng.integers(0, 256, 16384).astype(np.uint8)
    want = mem.copy()
    loop_execute([d], want)
    execute([d], mem)
    assert (mem == want).all()


def test_executor_refuses_memory_overruns():
    with pytest.raises(FormatError, match="past the"):
        execute([Descriptor(0, 0x100, 1, (Dim(32, 1, 1),))], np.zeros(0x110, np.uint8))
    with pytest.raises(DescriptorError):
        execute([Descriptor(0, 0x10, 1, (Dim(32, 1, 1),))], np.zeros(0x100, np.uint8))


def test_emit_merges_widens_and_splits():
    prog = Program()
    # a contiguous 3-D copy becomes one dimension of 8-byte elements
    emit(prog, 0, 0x1000, 1, [(8, 8, 1, 1), (4, 4, 8, 8), (2, 2, 32, 32)])
    assert prog.descriptors[0].element_bytes == 8 and len(prog.descriptors[0].dims) == 1
    # an inner dimension with padding must not merge into the next one
    dims = [(4, 2, 1, 1), (3, 3, 4, 4)]
    prog = Program()
    emit(prog, 0, 0x100, 1, dims, pad=9)
    mem = np.arange(0x200, dtype=np.uint16).astype(np.uint8)
    want = mem.copy()
    loop_execute([Descriptor(0, 0x100, 1, tuple(Dim(e, s, d, v) for e, v, s, d in dims), 9)],
                 want)
    execute(prog, mem)
    assert (mem == want).all()
    # seven dimensions that cannot merge: split over the outer two (2 x 3 descriptors)
    prog = Program()
    dims = [(2, 2, 3 ** k, 2 ** k) for k in range(5)] + [(2, 2, 1000, 64), (3, 2, 3000, 128)]
    emit(prog, 0, 0x10000, 1, dims, pad=7)
    assert len(prog) == 6
    mem = np.random.default_rng(0).integers(0, 256, 0x20000).astype(np.uint8)
    want = mem.copy()
    loop_execute([Descriptor(0, 0x10000, 1, tuple(Dim(e, s, d, v) for e, v, s, d in dims[:5]),
                             7)], want)
    # the element loop cannot take 7 dims; check the first block and the padded last row
    execute(prog, mem)
    assert (mem[0x10000:0x10000 + 64] == want[0x10000:0x10000 + 64]).all()
    assert (mem[0x10000 + 2 * 128:0x10000 + 2 * 128 + 32] == 7).all()


# --- three-way agreement: format function vs compiled descriptors ----------------------------

DT = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}


def rand(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["int8", "int16", "fp16"]), st.integers(1, 3), st.integers(1, 70),
       st.integers(1, 4), st.integers(1, 6), st.integers(0, 2), st.integers(0, 2),
       st.integers(0, 1), st.integers(0, 2**31))
def test_nvdla_feature_three_way(precision, n, c, h, w, xl, xs, xc, seed):
    base = FeatureFormat(precision, (n, c, h, w))
    fmt = FeatureFormat(precision, (n, c, h, w), base.line_stride + 32 * xl,
                        None if xs == 0 else (h - 1) * (base.line_stride + 32 * xl)
                        + w * 32 + 32 * xs,
                        None, fill=1 if precision != "fp16" else -2.5)
    if xc:
        fmt = FeatureFormat(precision, fmt.shape, fmt.line_stride, fmt.surface_stride,
                            fmt.cube_stride + 64, fmt.fill)
    t = rand(np.random.default_rng(seed), fmt.shape, DT[precision])
    image_at = -(-t.nbytes // 256) * 256 + 256
    prog = nvdla_feature(fmt, 0, image_at)
    assert len(prog) <= 2
    mem = run_program(prog, t.view(np.uint8).ravel(), 0, image_at, image_at + fmt.size, 0xA5)
    want = fmt.pack(t, gap=0xA5)
    assert (mem[image_at:] == want).all()
    # and back, into a clean dense buffer
    back = nvdla_feature(fmt, 0, image_at, unpack=True)
    mem[:t.nbytes] = 0
    execute(back, mem)
    assert (mem[:t.nbytes] == t.view(np.uint8).ravel()).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 7), st.integers(1, 9), st.integers(1, 20), st.integers(1, 3),
       st.integers(1, 4), st.sampled_from(["aligned", "compact"]),
       st.sampled_from([("int8", None), ("int8", "4N"), ("int16", "2N"), ("fp32", None),
                        ("fp16", None)]), st.integers(0, 2**31))
def test_sophgo_three_way(start, n, c, h, w, layout, dtype_mode, seed):
    dtype, mode = dtype_mode
    lm = LocalMemory(8, 4096)
    try:
        t = LocalTensor(lm, start * 4096 + 128, (n, c, h, w), dtype, layout, None, mode)
    except FormatError as e:
        assume(e.field != "shape")       # a tensor too large for the NPU's memory: draw again
        raise
    tensor = rand(np.random.default_rng(seed), t.shape, np.dtype(
        {"fp32": "<f4", "fp16": "<f2", "int8": "i1", "int16": "<i2"}[dtype]))
    local_at = 0x10000
    prog = sophgo_local(t, 0, local_at)
    mem = run_program(prog, tensor.view(np.uint8).ravel(), 0, local_at, local_at + lm.size,
                      0x5A)          # also after the tensor: dummies must not be read from there
    image = lm.empty(0x5A)
    t.store(image, tensor)
    assert (mem[local_at:] == image.ravel()).all()
    mem[:tensor.nbytes] = 0
    execute(sophgo_local(t, 0, local_at, unpack=True), mem)
    assert (mem[:tensor.nbytes] == tensor.view(np.uint8).ravel()).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 30), st.integers(1, 5), st.integers(1, 5),
       st.booleans(), st.sampled_from(["fp16", "fp32"]), st.booleans(), st.integers(0, 2**31))
def test_dmp_three_way(d, c, h, w, transpose, dtype, chunked, seed):
    lay = DmpLayout((d, c, h, w), transpose, dtype, chunked)
    t = rand(np.random.default_rng(seed), lay.shape, dtype.replace("fp", "float"))
    image_at = -(-t.nbytes // 64) * 64 + 64
    prog = dmp(lay, 0, image_at)
    assert len(prog) <= 2
    mem = run_program(prog, t.view(np.uint8).ravel(), 0, image_at, image_at + lay.size)
    assert (mem[image_at:] == lay.pack(t)).all()
    mem[:t.nbytes] = 0
    execute(dmp(lay, 0, image_at, unpack=True), mem)
    assert (mem[:t.nbytes] == t.view(np.uint8).ravel()).all()


@pytest.mark.parametrize("precision, shape", [
    ("int8", (40, 70, 3, 3)), ("int8", (32, 64, 1, 1)), ("int16", (20, 130, 2, 3)),
    ("fp16", (17, 5, 5, 5)), ("int8", (1, 1, 1, 1))])
def test_nvdla_weights_three_way(precision, shape):
    spec = WeightSpec("dc", precision, shape)
    k = rand(np.random.default_rng(sum(shape)), shape, DT[precision])
    image_at = -(-k.nbytes // 256) * 256 + 256
    prog = nvdla_weights(spec, 0, image_at)
    mem = run_program(prog, k.view(np.uint8).ravel(), 0, image_at, image_at + spec.image_bytes,
                      0xEE)
    assert (mem[image_at:] == spec.layout(k).data).all()
    mem[:k.nbytes] = 0
    execute(nvdla_weights(spec, 0, image_at, unpack=True), mem)
    assert (mem[:k.nbytes] == k.view(np.uint8).ravel()).all()
    with pytest.raises(FormatError, match="mode"):
        nvdla_weights(WeightSpec("winograd", "int8", (4, 4, 3, 3)), 0, 0x1000)


@pytest.mark.parametrize("shape, eb", [((2, 3, 4, 5), 1), ((1, 33, 7, 9), 2), ((3, 1, 1, 8), 4)])
def test_nchw_nhwc_three_way(shape, eb):
    t = rand(np.random.default_rng(eb), shape, {1: np.int8, 2: np.int16, 4: np.float32}[eb])
    image_at = 0x10000
    mem = run_program(dense_transpose(shape, eb, 0, image_at), t.view(np.uint8).ravel(), 0,
                      image_at, image_at + t.nbytes)
    assert (mem[image_at:] == np.ascontiguousarray(t.transpose(0, 2, 3, 1)).view(np.uint8)
            .ravel()).all()
    mem[:t.nbytes] = 0
    execute(dense_transpose(shape, eb, 0, image_at, unpack=True), mem)
    assert (mem[:t.nbytes] == t.view(np.uint8).ravel()).all()


def test_register_program_holds_the_descriptor():
    from atomcube.model.registers.dma import DMA, program, program_chain

    d = Descriptor(0x1000, 0x80000, 4, (Dim(16, 4, 64, 12), Dim(3, 32, 1024)),
                   pad=0x1122334455667788, irq=True)
    writes = program(d)
    assert writes[-1] == ("ctrl", {"start": 1})
    regs = {name: DMA[name].encode(fields) for name, fields in writes[:-1]}
    control = regs["control"]
    assert control == d.control() & ~0x100            # the same control word, without "last"
    dims = tuple(Dim(regs[f"dim{k}_extent"], regs[f"dim{k}_src_stride"],
                     regs[f"dim{k}_dst_stride"], regs[f"dim{k}_valid"])
                 for k in range((control >> 2) & 7))
    back = Descriptor(regs["src_addr"], regs["dst_addr"], 1 << (control & 3), dims,
                      regs["pad_lo"] | regs["pad_hi"] << 32, bool(control & 0x200))
    assert back == d
    assert regs["dim4_extent"] == 1 and regs["dim4_valid"] == 1
    assert program_chain(0x400) == [("chain_addr", {"value": 0x400}),
                                    ("ctrl", {"start_chain": 1})]


# --- element conversions ------------------------------------------------------------------------

def fp16_bits(v: Fraction) -> int:
    """``v`` rounded to fp16 (nearest, ties to even; denormals kept; saturating at 65504), from
    its exact value, in integers: written from the rule, not from numpy's rounding."""
    sign = 0x8000 if v < 0 else 0
    mag = abs(v)
    if mag == 0:
        return 0                                  # the integer 0: +0
    e = max(math.floor(math.log2(mag)), -14)
    while Fraction(2) ** e > mag and e > -14:     # (log2 of a fraction can be a hair off)
        e -= 1
    while Fraction(2) ** (e + 1) <= mag:
        e += 1
    q = mag / Fraction(2) ** (e - 10)             # the significand in units of its last bit
    m = math.floor(q)
    rest = q - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m % 2):
        m += 1
    if m == 2048:
        e, m = e + 1, 1024
    if e > 15:
        return sign | 0x7BFF
    if m < 1024:                                  # a denormal (e is -14)
        return sign | m
    return sign | (e + 15) << 10 | (m - 1024)


def convert_loop(cvt, values):
    """The conversion of each value, element by element, from the rule."""
    source, destination = cvt.types
    out = []
    for x in values:
        if source == "fp16":
            if np.isnan(x):
                out.append(0)
                continue
            x = Fraction(min(max(float(x), -65536.0), 65536.0))   # (infinity: +-65536)
        elif source in FIELDS:
            x = (int(x) >> cvt.bit) & ((1 << cvt.width) - 1)
            if source == "sfield" and x >> (cvt.width - 1):
                x -= 1 << cvt.width
        else:
            x = int(x)
        v = Fraction((x - cvt.offset) * cvt.scale, 1 << cvt.shift)
        if destination == "fp16":
            out.append(fp16_bits(v))
        else:
            lo, hi = (-128, 127) if destination == "int8" else (-32768, 32767)
            out.append(min(max(math.trunc(v), lo), hi) & (0xFF if destination == "int8"
                                                             else 0xFFFF))
    return out


CONVERSION_CASES = [(code, offset, scale, shift)
                    for code in CONVERSIONS
                    for offset, scale, shift in ((0, 1, 0), (-32768, 32767, 0), (32767, -32768, 0),
                                                 (17, -3, 5), (0, 1, 24), (0, 1, 31),
                                                 (-5, 1000, 14), (128, 1, 7), (3, 0, 0))]


@pytest.mark.parametrize("code, offset, scale, shift", CONVERSION_CASES)
def test_conversion_matches_the_rule(code, offset, scale, shift):
    if CONVERSIONS[code][0] in FIELDS:
        for bit, width in ((0, 10), (10, 10), (20, 10), (30, 2), (16, 16), (31, 1), (5, 7)):
            _conversion_matches_the_rule(Conversion(code, offset, scale, shift, bit, width))
    else:
        _conversion_matches_the_rule(Conversion(code, offset, scale, shift))


def _conversion_matches_the_rule(cvt):
    """Every source value (all of them for 8-bit types and fp16, edges and random ones for
    16-bit integers) converted by the model as the rule, computed exactly, says."""
    source, destination = cvt.types
    dtype = np.dtype(TYPES[source])
    rng = np.random.default_rng(cvt.code * 131 + cvt.shift + cvt.bit)
    if source in FIELDS:                 # random words, and each field value at the edges
        edges = np.array([0, 1, (1 << cvt.width) - 1, 1 << (cvt.width - 1),
                          (1 << (cvt.width - 1)) - 1], np.uint32) << np.uint32(cvt.bit)
        x = np.concatenate([edges, rng.integers(0, 1 << 32, 5000, dtype=np.uint32)])
    elif source == "fp16":                 # every fp16 (a seventh of them), NaNs included
        step = 1 if cvt.shift in (0, 31) else 7
        x = np.arange(0, 1 << 16, step, dtype=np.uint16).view(np.float16)
    elif dtype.itemsize == 1:
        info = np.iinfo(dtype)
        x = np.arange(info.min, info.max + 1).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = np.concatenate([np.arange(info.min, info.min + 300),
                                 np.arange(info.max - 300, info.max + 1), np.arange(-300, 300),
                                 rng.integers(info.min, info.max + 1, 20000)])
        x = values[(values >= info.min) & (values <= info.max)].astype(dtype)
    raw = x.view(np.uint8).reshape(-1, dtype.itemsize)
    got = cvt.apply(raw)
    width = got.shape[-1]
    got_words = got.view("<u2" if width == 2 else "u1")[..., 0]
    assert list(got_words) == convert_loop(cvt, x)


def test_conversion_corner_values():
    """fp16's ties, its largest value and where saturation starts, denormals, underflow to
    zero with the sign kept, and +0 for an exact zero."""
    def one(code, x, offset=0, scale=1, shift=0):
        cvt = Conversion(code, offset, scale, shift)
        dtype = np.dtype(TYPES[cvt.types[0]])
        raw = np.array([x], dtype).view(np.uint8).reshape(1, -1)
        return int(cvt.apply(raw).view("<u2" if cvt.types[1] != "int8" else "u1")[0, 0])

    u16_fp16, i16_fp16, i16_i8 = (conversion_code("uint16", "fp16"),
                                  conversion_code("int16", "fp16"),
                                  conversion_code("int16", "int8"))
    assert one(u16_fp16, 2049) == 0x6800                     # 2048: the tie goes to even
    assert one(u16_fp16, 2051) == 0x6802                     # 2052
    assert one(u16_fp16, 65504) == 0x7BFF                    # the largest fp16
    assert one(u16_fp16, 65519) == 0x7BFF                    # rounds down to it
    assert one(u16_fp16, 65520) == 0x7BFF                    # would round up to inf: saturates
    assert one(i16_fp16, -32768, scale=32767) == 0xFBFF      # -65504
    assert one(u16_fp16, 1, shift=24) == 0x0001              # the smallest denormal
    assert one(u16_fp16, 1, shift=25) == 0x0000              # half of it: ties to even (0)
    assert one(u16_fp16, 3, shift=25) == 0x0002              # 1.5 of it: ties to even (2)
    assert one(i16_fp16, -1, shift=31) == 0x8000             # underflow keeps the sign
    assert one(i16_fp16, 5, offset=5, scale=-7) == 0x0000    # an exact zero is +0
    assert one(i16_i8, -32768) == 0x80 and one(i16_i8, 200) == 0x7F
    assert one(i16_i8, -255, shift=1) == 0x81                # -127.5 truncates to -127
    fp_i8, fp_i16 = conversion_code("fp16", "int8"), conversion_code("fp16", "int16")
    assert one(fp_i8, np.float16(np.inf)) == 0x7F and one(fp_i8, np.float16(-np.inf)) == 0x80
    assert one(fp_i8, np.float16(np.nan)) == 0                # an integer has no NaN
    assert one(fp_i16, np.float16(np.inf), scale=-1) == 0x8000   # -65536 saturates
    assert one(fp_i16, np.float16(-0.75)) == 0                # truncation toward zero
    assert one(fp_i16, np.float16(-1.5), offset=1) == 0xFFFE  # -2.5 -> -2
    assert one(fp_i16, np.float16(6e-8), scale=32767, shift=0) == 0   # a denormal, scaled
    assert one(fp_i16, np.float16(65504), scale=2) == 0x7FFF


def test_conversion_rules():
    """Codes, sizes and field ranges are refused with CONVERT, naming the field; the
    destination's rules use the destination element's size; an engine without the stage
    refuses any conversion."""
    to_fp16 = Conversion.between("int8", "fp16")
    ok = Descriptor(0x1000, 0x2000, 1, (Dim(8, 1, 2),), convert=to_fp16)
    assert ok.error() == Error.NONE and ok.dst_bytes == 16 and ok.dst_range() == (0x2000, 0x2010)
    assert ok.error(converts=False) == Error.CONVERT
    for d, field in ((replace(ok, convert=Conversion(max(CONVERSIONS) + 1)), "convert.code"),
                     (replace(ok, convert=Conversion(0x1F)), "convert.code"),
                     (replace(ok, convert=replace(to_fp16, width=10)), "convert.width"),
                     (replace(ok, element_bytes=4, dims=(Dim(8, 4, 2),),
                              convert=Conversion.between("ufield", "fp16", bit=23, width=10)),
                      "convert.bit"),
                     (replace(ok, element_bytes=4, dims=(Dim(8, 4, 2),),
                              convert=Conversion.between("sfield", "int16", width=17)),
                      "convert.width"),
                     (replace(ok, element_bytes=2, dims=(Dim(8, 2, 2),)), "element_bytes"),
                     (replace(ok, convert=replace(to_fp16, scale=1 << 15)), "convert.scale"),
                     (replace(ok, convert=replace(to_fp16, offset=-(1 << 15) - 1)),
                      "convert.offset"),
                     (replace(ok, convert=replace(to_fp16, shift=32)), "convert.shift")):
        with pytest.raises(DescriptorError) as e:
            d.check()
        assert e.value.code == Error.CONVERT and e.value.field == field
    assert replace(ok, dst=0x2001).error() == Error.ALIGN                  # fp16: 2-byte aligned
    assert replace(ok, dims=(Dim(8, 1, 1),)).error() == Error.DIMS         # fp16s would overlap
    narrow = Descriptor(0x1000, 0x2001, 2, (Dim(8, 2, 1),),
                        convert=Conversion.between("int16", "int8"))
    assert narrow.error() == Error.NONE and narrow.dst_bytes == 8
    with pytest.raises(FormatError, match="does not convert fp16 to uint8"):
        conversion_code("fp16", "uint8")


def test_conversion_memory_form_and_header():
    """The conversion round-trips through the memory form (signed offset and scale), a
    descriptor without one writes zeros there, and the C header names the fields and codes."""
    cvt = Conversion.between("uint8", "int16", offset=-200, scale=-3, shift=9)
    d = Descriptor(0x1000, 0x8000, 1, (Dim(40, 1, 2),), convert=cvt)
    raw = d.encode()
    assert Descriptor.decode(raw) == d
    assert raw[0x24:0x28] == (cvt.code | 9 << 8).to_bytes(4, "little")
    assert raw[0x78:0x7C] == ((-200 & 0xFFFF) | (-3 & 0xFFFF) << 16).to_bytes(4, "little")
    plain = replace(d, convert=NO_CONVERSION, dims=(Dim(40, 1, 1),)).encode()
    assert plain[0x24:0x28] == bytes(4) and plain[0x78:] == bytes(8)
    header = c_header()
    assert "uint32_t convert;" in header and "uint32_t convert_scale;" in header
    assert f"#define ATOMCUBE_DMA_CONVERT_UINT8_INT16 {cvt.code}u" in header
    assert f"#define ATOMCUBE_DMA_ERROR_CONVERT {Error.CONVERT.value}u" in header


def test_executor_converts_like_the_loop():
    """A converting descriptor with padding (the pad value read as the source type and
    converted) and strides in both element sizes, against the element loop."""
    rng = np.random.default_rng(3)
    for code, (source, _) in CONVERSIONS.items():
        field = (int(rng.integers(0, 16)), int(rng.integers(1, 17))) if source in FIELDS \
            else (0, 0)
        cvt = Conversion(code, int(rng.integers(-50, 50)), int(rng.integers(-400, 400)),
                         int(rng.integers(0, 10)), *field)
        es = np.dtype(TYPES[cvt.types[0]]).itemsize
        ed = np.dtype(TYPES[cvt.types[1]]).itemsize
        d = Descriptor(0x100, 0x4000 + ed, es, (Dim(7, 3 * es, ed, 5), Dim(4, 40 * es, 9 * ed)),
                       pad=int(rng.integers(0, 1 << 63)), convert=cvt)
        mem = rng.integers(0, 256, 0x8000).astype(np.uint8)
        want = mem.copy()
        execute([d], mem)
        pad = np.frombuffer(d.pad.to_bytes(8, "little")[:es], np.uint8)
        pad_value = cvt.apply(pad[None])[0]
        for idx in np.ndindex(7, 4):
            at = d.dst + idx[0] * ed + idx[1] * 9 * ed
            if idx[0] < 5:
                src = d.src + idx[0] * 3 * es + idx[1] * 40 * es
                want[at:at + ed] = cvt.apply(want[src:src + es][None])[0]
            else:
                want[at:at + ed] = pad_value
        assert (mem == want).all(), cvt


@pytest.mark.parametrize("unpack", [False, True])
def test_one_pass_programs(unpack):
    """nvdla_feature and dmp with a dense type of their own: the one-pass program gives the
    format function's image of the converted tensor (and the converted tensor back)."""
    rng = np.random.default_rng(int(unpack))
    shape = (2, 19, 3, 5)
    if not unpack:
        x = rng.integers(0, 256, shape).astype(np.uint8)
        lay = DmpLayout(shape)
        mem = run_program(dmp(lay, 0, 0x8000, dense_type="uint8", offset=128, shift=7),
                          x.ravel(), 0, 0x8000, 0x10000)
        want = lay.pack(((x.astype(np.float64) - 128) / 128).astype(np.float16))
        assert (mem[0x8000:0x8000 + lay.size] == want.view(np.uint8).ravel()).all()
        fmt = FeatureFormat("int8", shape)
        x16 = rng.integers(-4000, 4000, shape).astype(np.int16)
        mem = run_program(nvdla_feature(fmt, 0, 0x8000, dense_type="int16", shift=5),
                          x16.view(np.uint8).ravel(), 0, 0x8000, 0x10000)
        q = np.clip(np.trunc(x16 / 32), -128, 127).astype(np.int8)
        assert (mem[0x8000:0x8000 + fmt.size] == fmt.pack(q)).all()
    else:
        fmt = FeatureFormat("int8", shape)
        x = rng.integers(-128, 128, shape).astype(np.int8)
        mem = run_program(nvdla_feature(fmt, 0, 0x8000, unpack=True, dense_type="fp16",
                                        scale=3, shift=4), fmt.pack(x), 0x8000, 0, 0x10000)
        got = mem[:x.size * 2].view(np.float16).reshape(shape)
        assert (got == (x.astype(np.float64) * 3 / 16).astype(np.float16)).all()
        # a network's fp16 output straight back to int8 (x 32, truncated, saturated)
        lay = DmpLayout(shape)
        y = (rng.standard_normal(shape) * 3).astype(np.float16)
        mem = run_program(dmp(lay, 0, 0x8000, unpack=True, dense_type="int8", scale=32),
                          lay.pack(y).view(np.uint8).ravel(), 0x8000, 0, 0x10000)
        q = np.clip(np.trunc(y.astype(np.float64) * 32), -128, 127).astype(np.int8)
        assert (mem[:y.size].view(np.int8).reshape(shape) == q).all()
        with pytest.raises(FormatError, match="dense_type: the DMA does not convert fp16"):
            dmp(DmpLayout(shape), 0, 0x8000, unpack=True, dense_type="uint8")


@pytest.mark.parametrize("name", sorted(PIXEL_FORMATS))
def test_nvdla_pixel_program(name):
    """Every pixel format at an X offset, to int16 (and int8 where the samples allow), with a
    mean per channel: the executor on nvdla_pixel's program gives the model's decoded samples,
    converted; the 10:10:10:2 formats' bit fields are refused for int8, naming dense_type."""
    fmt = PIXEL_FORMATS[name]
    rng = np.random.default_rng(len(name))
    img = PixelImage(name, 13, 5, x_offset=min(3, fmt.x_offset_max))
    if fmt.kind == "float":
        samples = rng.standard_normal(img.shape).astype(np.float16)
    else:
        samples = np.stack([rng.integers(*((-(1 << (w - 1)), 1 << (w - 1)) if fmt.kind == "int"
                                           else (0, 1 << w)), img.shape[1:])
                            for _, _, w in fmt.fields])
    raw = img.pack(samples)
    decoded = img.unpack(raw)
    means = [int(rng.integers(-100, 100)) for _ in fmt.fields]
    for dense_type in ("int16", "int8"):
        if dense_type == "int8" and any(w not in (8, 16) for _, _, w in fmt.fields):
            with pytest.raises(FormatError, match="dense_type: .* does not convert"):
                nvdla_pixel(img, 0x100, 0x10000, dense_type, means, 3, 2)
            continue
        prog = nvdla_pixel(img, 0x100, 0x10000, dense_type, means, 3, 2)
        mem = run_program(prog, raw, 0x100, 0x10000, 0x20000)
        if fmt.kind == "float":
            want = np.stack([Conversion.between("fp16", dense_type, m, 3, 2).apply(
                d.view(np.uint8).reshape(*d.shape, 2)) for d, m in zip(decoded, means,
                                                                        strict=True)])
            want = want.view(TYPES[dense_type])[..., 0]
        else:
            want = convert(decoded, np.array(means)[:, None, None], 3 / 4, dense_type)
        got = mem[0x10000:0x10000 + want.nbytes].view(want.dtype).reshape(want.shape)
        assert (got == want).all(), dense_type
