"""Bit-position helpers shared by the blocks' datapaths."""

from amaranth import Cat, Const, Mux

__all__ = ["first_one"]


def first_one(v, highest: bool = True):
    """(whether any bit of ``v`` is set, the position of its highest set bit, or with
    ``highest=False`` its lowest: the count of trailing zeros; 0 when none is set), as a tree
    of halves: each level chooses between the two halves' positions by whether the half that
    wins has a bit set, so the depth grows with log2 of the width, where a chain of one test a
    bit grows with the width. ``v`` is padded with zeros above to a power of two."""
    n = len(v)
    width = 1 << max(n - 1, 0).bit_length()
    v = Cat(v, Const(0, width - n)) if width > n else v

    def tree(x, w):
        if w == 1:
            return x[0], Const(0, 0)
        lo_any, lo_pos = tree(x[:w // 2], w // 2)
        hi_any, hi_pos = tree(x[w // 2:], w // 2)
        if highest:
            pos = Mux(hi_any, Cat(hi_pos, Const(1, 1)), Cat(lo_pos, Const(0, 1)))
        else:
            pos = Mux(lo_any | ~hi_any, Cat(lo_pos, Const(0, 1)), Cat(hi_pos, Const(1, 1)))
        return lo_any | hi_any, pos

    return tree(v, width)
