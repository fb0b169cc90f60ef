"""Layout conversions compiled into DMA descriptors.

Each conversion is first written as *pieces*: lists of dimensions ``(extent, valid,
dense_stride, image_stride)`` (innermost first, strides in bytes) with a dense and an image
offset. A piece is one regular block of the conversion: full channel surfaces, the partial
last surface, one row of NPUs, the last partial group of batches. Packing copies dense -> image
and pads ``valid <= i < extent`` with the format's fill; unpacking copies image -> dense over
the valid elements only. :func:`emit` then merges dimensions that run on from each other,
widens the element where both sides are contiguous, and splits anything left with more than
five dimensions, so programs stay short.

    prog = nvdla_feature(FeatureFormat("int8", (1, 40, 8, 8)), dense=0x1000, image=0x8000)
    prog = sophgo_local(tensor, dense=0, local=0x100000)        # the (X, S) image at `local`
    prog = dmp(DmpLayout((1, 20, 4, 4)), dense=0, image=0x4000)
    prog = nvdla_weights(WeightSpec("dc", "int8", (40, 70, 3, 3)), dense=0, image=0x10000)
    prog = dense_transpose((2, 3, 4, 5), 1, dense=0, image=0x1000)   # NCHW -> NHWC
    prog = nvdla_pixel(PixelImage("T_B8G8R8A8", 32, 16), image=0, dense=0x4000,
                       dense_type="int8", offset=(124, 117, 104, 0))   # pixels -> channels

Every function takes ``unpack=True`` for the reverse direction. ``nvdla_feature`` and ``dmp``
take ``dense_type`` (with ``offset``, ``scale``, ``shift``): a dense tensor of another type than
the format's, converted by the engine in the same pass (:class:`~.descriptor.Conversion`):

    prog = dmp(DmpLayout((1, 3, 224, 224)), dense=0, image=0x40000, dense_type="uint8",
               offset=128, shift=7)                    # uint8 pixels -> fp16 (x - 128) / 128
"""

from __future__ import annotations

import numpy as np

from ..dmp.layout import DTYPES as DMP_DTYPES
from ..dmp.layout import DmpLayout
from ..errors import FormatError
from ..nvdla.feature import FeatureFormat
from ..nvdla.pixel import PixelImage
from ..nvdla.weights import WeightSpec
from ..sophgo.local import LocalTensor
from .descriptor import MAX_DIMS, NO_CONVERSION, TYPES, Conversion, Descriptor, Dim, Program

Piece = tuple[list[tuple[int, int, int, int]], int, int]     # dims, dense offset, image offset


def _simplify(dims: list[Dim], eb: int, src: int, dst: int, pad: int, widen: bool = True):
    """Drop unit dimensions, merge dimensions that continue each other, widen the element while
    the innermost dimension is contiguous on both sides (with ``widen``: not for a conversion,
    whose element is its source type). Returns (dims, element bytes, pad)."""
    dims = [d for d in dims if d.extent > 1 or d.valid < d.extent] or [Dim(1, eb, eb)]
    merged = [dims[0]]
    for d in dims[1:]:
        a = merged[-1]
        if (a.valid == a.extent and d.src_stride == a.src_stride * a.extent
                and d.dst_stride == a.dst_stride * a.extent):
            merged[-1] = Dim(a.extent * d.extent, a.src_stride, a.dst_stride, a.valid * d.valid)
        else:
            merged.append(d)
    dims = merged
    while widen and eb < 8:
        w = 2 * eb
        a = dims[0]
        rest = dims[1:]
        if not (a.src_stride == a.dst_stride == eb and a.extent % 2 == 0 and a.valid % 2 == 0
                and src % w == 0 and dst % w == 0
                and all(d.src_stride % w == 0 and d.dst_stride % w == 0 for d in rest)):
            break
        pad |= (pad & ((1 << (8 * eb)) - 1)) << (8 * eb)
        eb = w
        dims = [Dim(a.extent // 2, w, w, a.valid // 2), *rest]
        if dims[0].extent == 1 and len(dims) > 1:
            dims = dims[1:]
    return dims, eb, pad


def emit(prog: Program, src: int, dst: int, eb: int, dims, pad: int = 0,
         convert: Conversion = NO_CONVERSION) -> None:
    """Append the descriptors of one block copy: ``dims`` as (extent, valid, src_stride,
    dst_stride), innermost first; each descriptor converts with ``convert``."""
    ds = [Dim(e, s, d, v) for e, v, s, d in dims]
    if any(d.extent == 0 for d in ds):
        return
    # the engine wants the destination's dimensions innermost first (they must nest in order)
    ds.sort(key=lambda d: d.dst_stride)
    ds, eb, pad = _simplify(ds, eb, src, dst, pad, widen=not convert.code)
    # more than five dimensions: one descriptor per index of the outer ones
    outer = ds[MAX_DIMS:]
    inner = ds[:MAX_DIMS]
    for idx in np.ndindex(*[d.extent for d in outer][::-1]):
        idx = idx[::-1]
        s_off = sum(i * d.src_stride for i, d in zip(idx, outer, strict=True))
        d_off = sum(i * d.dst_stride for i, d in zip(idx, outer, strict=True))
        if any(i >= d.valid for i, d in zip(idx, outer, strict=True)):
            # no source for this whole block: pad only
            prog.descriptors.append(Descriptor(src, dst + d_off, eb, tuple(
                Dim(d.extent, d.src_stride, d.dst_stride, 0 if k == 0 else d.valid)
                for k, d in enumerate(inner)), pad, convert=convert))
            continue
        prog.descriptors.append(Descriptor(src + s_off, dst + d_off, eb, tuple(inner), pad,
                                           convert=convert))


def _run(pieces: list[Piece], eb: int, dense: int, image: int, unpack: bool, pad: int,
         dst_size: int, convert: Conversion = NO_CONVERSION) -> Program:
    """The program of ``pieces``; ``eb`` is the bytes of an element read (the conversion's
    source type, if it converts)."""
    prog = Program(dst_size=dst_size)
    for dims, d_off, i_off in pieces:
        if unpack:
            if any(v == 0 for _, v, _, _ in dims):
                continue
            emit(prog, image + i_off, dense + d_off, eb,
                 [(v, v, i_s, d_s) for _, v, d_s, i_s in dims], convert=convert)
        else:
            emit(prog, dense + d_off, image + i_off, eb,
                 [(e, v, d_s, i_s) for e, v, d_s, i_s in dims], pad, convert=convert)
    return prog


def conversion(dense_type: str | None, image_type: str, image_bytes: int, unpack: bool,
               offset: int = 0, scale: int = 1, shift: int = 0) -> tuple[Conversion, int]:
    """The conversion a program between a dense tensor of ``dense_type`` and an image of
    ``image_type`` (``image_bytes`` an element) makes on the way (none when the types match or
    ``dense_type`` is None), and the bytes of a dense element. Packing converts dense -> image,
    unpacking image -> dense; raises FormatError naming ``dense_type`` for a pair the engine
    does not convert."""
    if dense_type is None or dense_type == image_type:
        return NO_CONVERSION, image_bytes
    if dense_type not in TYPES:
        raise FormatError("dense_type", f"one of {', '.join(TYPES)}, not {dense_type!r}")
    pair = (image_type, dense_type) if unpack else (dense_type, image_type)
    return _checked(*pair, offset, scale, shift), np.dtype(TYPES[dense_type]).itemsize


def _checked(source: str, destination: str, offset: int, scale: int, shift: int,
             what: str = "", **field) -> Conversion:
    """The conversion from ``source`` to ``destination``, checked: a pair the engine does not
    convert is refused naming ``dense_type`` (``what`` before the rule), a field out of range
    naming the field."""
    try:
        cvt = Conversion.between(source, destination, offset, scale, shift, **field)
    except FormatError as e:
        raise FormatError("dense_type", what + e.rule) from None
    problem = cvt.problem(np.dtype(TYPES[source]).itemsize)
    if problem is not None:
        raise FormatError(*problem)
    return cvt


def _bits(value, dtype) -> int:
    return int(np.array(value, dtype=dtype).view(f"u{np.dtype(dtype).itemsize}"))


def dense_transpose(shape, element_bytes: int, dense: int, image: int,
                    unpack: bool = False) -> Program:
    """Dense NCHW at ``dense`` <-> dense NHWC at ``image``."""
    n, c, h, w = shape
    eb = element_bytes
    dims = [(c, c, h * w * eb, eb), (w, w, eb, c * eb), (h, h, w * eb, w * c * eb),
            (n, n, c * h * w * eb, h * w * c * eb)]
    return _run([(dims, 0, 0)], eb, dense, image, unpack, 0, n * c * h * w * eb)


def nvdla_feature(fmt: FeatureFormat, dense: int, image: int, unpack: bool = False,
                  dense_type: str | None = None, offset: int = 0, scale: int = 1,
                  shift: int = 0) -> Program:
    """Dense NCHW at ``dense`` <-> NVDLA feature data at ``image`` (the configuration's atoms,
    the format's line, surface and cube strides; channel padding written with ``fmt.fill``).
    Bytes between lines, surfaces and cubes are not written. A ``dense_type`` other than the
    format's precision converts in the same pass (:func:`conversion`); the channel padding is
    then ``fmt.fill`` read as the dense type and converted."""
    n, c, h, w = fmt.shape
    eb, cpa = fmt.element_bytes, fmt.channels_per_atom
    convert, db = conversion(dense_type, fmt.precision, eb, unpack, offset, scale, shift)
    full, rem = divmod(c, cpa)
    hw = h * w * db

    def dims(surfaces, valid):
        return [(cpa, valid, hw, eb), (w, w, db, fmt.atom), (h, h, w * db, fmt.line_stride),
                (surfaces, surfaces, cpa * hw, fmt.surface_stride),
                (n, n, c * hw, fmt.cube_stride)]
    pieces: list[Piece] = []
    if full:
        pieces.append((dims(full, cpa), 0, 0))
    if rem:
        pieces.append((dims(1, rem), full * cpa * hw, full * fmt.surface_stride))
    fill = _bits(fmt.fill, fmt.dtype if convert is NO_CONVERSION else TYPES[dense_type])
    return _run(pieces, eb if unpack else db, dense, image, unpack, fill, fmt.size, convert)


def sophgo_local(t: LocalTensor, dense: int, local: int, unpack: bool = False) -> Program:
    """Dense NCHW at ``dense`` <-> a tensor in Sophgo local memory, whose (X, S) image starts
    at ``local`` (NPU q at ``local + q*S``). 4N/2N/2IC modes group batches (or input channels)
    side by side and write the dummy elements of a partial group as zero."""
    lm = t.memory
    X, S = lm.npus, lm.npu_bytes
    n, c, h, w = t.shape
    k, eb, sb = t.group, t.element_bytes, t.storage_bytes
    ns, cs, hs, ws = t.strides
    hw = h * w * eb
    q = t.start_npu
    pieces: list[Piece] = []
    for row in range(t.channels_per_npu):
        c0, c1 = max(0, row * X - q), min(c, (row + 1) * X - q)
        if c1 <= c0:
            continue
        npu0 = (q + c0) % X
        base = npu0 * S + t.offset + row * cs * sb
        for g0, groups, valid in ((0, n // k, k), (n // k, 1 if n % k else 0, n % k)):
            if groups == 0:
                continue
            dims = [(k, valid, c * hw, eb), (w, w, eb, ws * sb), (h, h, w * eb, hs * sb),
                    (c1 - c0, c1 - c0, hw, S), (groups, groups, k * c * hw, ns * sb)]
            pieces.append((dims, (g0 * k * c + c0) * hw, base + g0 * ns * sb))
    return _run(pieces, eb, dense, local, unpack, 0, lm.size)


def dmp(lay: DmpLayout, dense: int, image: int, unpack: bool = False,
        dense_type: str | None = None, offset: int = 0, scale: int = 1,
        shift: int = 0) -> Program:
    """Dense (D, C, H, W) at ``dense`` <-> the DMP buffer at ``image``. The dense tensor is in
    the layout's element type, or in ``dense_type``, converted in the same pass
    (:func:`conversion`: ``(x - offset) * scale / 2**shift``), e.g. a uint8 image straight into
    a network's fp16 input."""
    d, c, h, w = lay.shape
    eb = DMP_DTYPES[lay.dtype].itemsize
    convert, db = conversion(dense_type, lay.dtype, eb, unpack, offset, scale, shift)
    hw = h * w * db
    step = 8 if lay.chunked else c
    full, rem = divmod(c, step)
    pieces: list[Piece] = []
    for c0, chunks, cc in ((0, full, step), (full * step, 1 if rem else 0, rem)):
        if chunks == 0:
            continue
        inner = ([(w, w, db, cc * eb), (h, h, w * db, w * cc * eb)] if lay.transpose
                 else [(h, h, w * db, cc * eb), (w, w, db, h * cc * eb)])
        dims = [(cc, cc, hw, eb), *inner, (chunks, chunks, step * hw, w * h * step * eb),
                (d, d, c * hw, w * h * c * eb)]
        pieces.append((dims, c0 * hw, c0 * h * w * eb))
    return _run(pieces, eb if unpack else db, dense, image, unpack, 0, lay.size, convert)


def nvdla_weights(spec: WeightSpec, dense: int, image: int, unpack: bool = False) -> Program:
    """Dense OIHW kernels at ``dense`` (in the spec's element type) <-> an NVDLA
    direct-convolution weight image at ``image``, zero-padded to 128 bytes. The ordering rule
    is the model's own (:meth:`WeightSpec._pieces`): each pair of views becomes a block."""
    if spec.mode != "dc":
        raise FormatError("mode", f"the DMA compiles direct-convolution weights, not "
                                  f"{spec.mode!r} (their layout transforms the values)")
    eb = spec.element_bytes
    kernels = np.empty(spec.shape, dtype=spec.dtype)
    flat = np.empty(spec.image_bytes // eb, dtype=spec.dtype)
    k_base = kernels.__array_interface__["data"][0]
    f_base = flat.__array_interface__["data"][0]
    pieces: list[Piece] = []
    for kv, iv in spec._pieces(kernels, flat):
        dims = [(e, e, ks, fs) for e, ks, fs in zip(kv.shape, kv.strides, iv.strides,
                                                     strict=True)][::-1]
        pieces.append((dims, kv.__array_interface__["data"][0] - k_base,
                       iv.__array_interface__["data"][0] - f_base))
    tail = spec.image_bytes - spec.dense_bytes
    if tail:
        pieces.append(([(tail // eb, 0, eb, eb)], 0, spec.dense_bytes))
    return _run(pieces, eb, dense, image, unpack, 0,
                spec.dense_bytes if unpack else spec.image_bytes)


def nvdla_pixel(img: PixelImage, image: int, dense: int, dense_type: str, offset=0,
                scale: int = 1, shift: int = 0) -> Program:
    """An NVDLA pixel image at ``image`` (laid out as :meth:`PixelImage.pack` lays it: plane 1
    right after plane 0) -> its samples as a dense (C, H, W) tensor of ``dense_type`` at
    ``dense``, converted as NVDLA's image input converts them: ``(sample - offset[c]) * scale /
    2**shift``, truncated and saturated to int8/int16 or rounded to fp16 (:class:`Conversion`).
    ``offset`` is one mean for every channel or one per channel (NVDLA's four MEAN registers).
    One descriptor per channel picks that channel's field out of the pixel words and holds its
    mean. A sample is its field read as uint8/int8 or uint16/int16 (``img.sign``; T_R16_I is
    signed), or fp16 for the ``_F`` formats, which convert to int8/int16 or copy to fp16
    unchanged. The 10:10:10:2 formats' samples are bit fields of their 32-bit word
    (``ufield``/``sfield``), which convert to int16 or fp16."""
    fmt = img.format
    C, H, W = img.shape
    means = [offset] * C if np.ndim(offset) == 0 else [int(m) for m in offset]
    if len(means) != C:
        raise FormatError("offset", f"give one mean, or one for each of {fmt.name}'s {C} "
                                    f"channels, not {len(means)}")
    if dense_type not in ("int8", "int16", "fp16"):
        raise FormatError("dense_type", f"NVDLA's image input converts to int8, int16 or fp16, "
                                        f"not {dense_type!r}")
    ed = np.dtype(TYPES[dense_type]).itemsize
    prog = Program(dst_size=C * H * W * ed)
    for c, (p, bit, width) in enumerate(fmt.fields):
        signed = fmt.kind == "int" or img.sign == "signed"
        bpp = fmt.plane_bytes[p]
        field = {}
        if fmt.kind == "float":
            source = "fp16"
        elif width in (8, 16) and bit % 8 == 0:
            source = ("" if signed else "u") + f"int{width}"
        else:                                       # a bit field of the pixel word
            source = "sfield" if signed else "ufield"
            field = {"bit": bit, "width": width}
        size = bpp if field else width // 8
        if source == dense_type == "fp16":
            if (means[c], scale, shift) != (0, 1, 0):
                raise FormatError("offset", f"{fmt.name}'s fp16 samples copy to fp16 "
                                            f"unchanged: offset 0, scale 1, shift 0")
            convert = NO_CONVERSION
        else:
            convert = _checked(source, dense_type, means[c], scale, shift, f"{fmt.name}: ",
                               **field)
        src = (image + img.plane_offsets[p] + img.plane_x_offset(p) * bpp
               + (0 if field else bit // 8))
        emit(prog, src, dense + c * H * W * ed, size,
             [(W, W, bpp, ed), (H, H, img.plane_stride(p), W * ed)], convert=convert)
    return prog
