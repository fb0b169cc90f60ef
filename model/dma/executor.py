"""The reference executor: runs descriptors on a numpy byte array, as the engine must.

Each descriptor becomes two strided views of the memory (numpy's ``as_strided``): the source
over its valid elements and the destination over all of them; the copy is one assignment, and
each padded region one more. A descriptor that converts (:class:`~.descriptor.Conversion`)
converts the source view, and the pad value, on the way. Descriptors run in order, so a later
one sees what an earlier one wrote.
"""

from __future__ import annotations

import numpy as np

from ..errors import FormatError
from .descriptor import Descriptor, Program


def _view(mem: np.ndarray, base: int, shape, strides, eb: int) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(mem[base:], shape=(*shape, eb),
                                           strides=(*strides, 1), writeable=True)


def execute(program: Program | list[Descriptor], memory: np.ndarray,
            addr_width: int = 64) -> None:
    """Run the descriptors on ``memory`` (1-D uint8, indexed by address), in place. Raises
    :class:`~model.dma.descriptor.DescriptorError` for a descriptor that breaks a rule, and
    FormatError if it reaches past the end of ``memory``."""
    mem = memory
    if mem.dtype != np.uint8 or mem.ndim != 1:
        raise FormatError("memory", f"must be a 1-D uint8 array, not {mem.dtype} {mem.shape}")
    for i, d in enumerate(program):
        d.check(addr_width)
        for name, (_, hi) in (("src", d.src_range()), ("dst", d.dst_range())):
            if hi > mem.size:
                raise FormatError(f"descriptors[{i}].{name}", f"reaches 0x{hi - 1:x}, past "
                                                              f"the {mem.size:#x}-byte memory")
        dims = d.dims[::-1]                                   # outermost first, as numpy has it
        eb, db = d.element_bytes, d.dst_element_bytes
        conv = d.convert.apply if d.convert.code else (lambda raw: raw)
        dst = _view(mem, d.dst, [x.extent for x in dims], [x.dst_stride for x in dims], db)
        if d.src_bytes:
            src = _view(mem, d.src, [x.valid for x in dims], [x.src_stride for x in dims], eb)
            dst[tuple(slice(0, x.valid) for x in dims)] = conv(src)
        pad = conv(np.frombuffer(d.pad.to_bytes(8, "little")[:eb], dtype=np.uint8)[None])[0]
        for k, x in enumerate(dims):
            if x.valid < x.extent:
                where = [slice(None)] * len(dims)
                where[k] = slice(x.valid, None)
                dst[tuple(where)] = pad
