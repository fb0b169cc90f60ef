"""The expansion of the sparse decompressor: packed elements spread over the set bits of a
mask, as stages of two-way multiplexers whose control comes from prefix sums of the mask's
clear bits. Each function adds its logic to a module ``m`` and returns signals, so that a
stage component can place a part of the expansion between its own registers."""

from amaranth import Cat, Const, Mux, Signal

__all__ = ["add_tree", "clear_sums", "expand", "expand_dist_from", "expand_lanes",
           "expand_moves_from", "popcount", "prefix_levels"]


def popcount(m, bits):
    """The number of set bits of ``bits``, as a balanced tree of adders."""
    return add_tree(m, [bits[i] for i in range(len(bits))], "pop")


def add_tree(m, terms, name):
    """The sum of ``terms``, as a balanced tree of adders (signals ``<name><level>_<k>``)."""
    level = 0
    while len(terms) > 1:
        level += 1
        pairs = []
        for k in range(0, len(terms) - 1, 2):
            t = Signal(max(len(terms[k]), len(terms[k + 1])) + 1, name=f"{name}{level}_{k // 2}")
            m.d.comb += t.eq(terms[k] + terms[k + 1])
            pairs.append(t)
        terms = pairs + terms[len(terms) - len(terms) % 2:]
    return terms[0]


def expand(m, mask, lanes):
    """Spread ``lanes`` over the set bits of ``mask``: the k-th set bit's position gets
    ``lanes[k]`` (positions whose bit is clear get don't-care values). This is the inverse of
    compressing the set positions down, built as log2(n) stages of two-way multiplexers: the
    control (:func:`expand_moves`, from the mask alone) and the data (:func:`expand_lanes`),
    which the decompressor runs in consecutive pipeline stages.

    (Hacker's Delight computes the same masks with prefix XORs; Yosys's ABC took hours on those
    for 64 positions, where multiplexers and carry chains map in seconds.)"""
    return expand_lanes(m, expand_moves(m, mask), lanes)


def expand_moves(m, mask):
    """The expansion's control: for each stage i, which positions take the lane 2^i below them
    (:func:`expand_dist`, then :func:`expand_moves_from`)."""
    return expand_moves_from(m, mask, expand_dist(m, mask))


def expand_dist(m, mask):
    """For each position, the number of clear bits below it (its low log2(n) bits): how far
    compressing the set positions down would move the element there."""
    return expand_dist_from(m, clear_sums(m, mask, 0), 0)


def clear_sums(m, mask, levels):
    """The first ``levels`` levels of the prefix sums of ``mask``'s clear bits (each position's
    sum then fits ``levels + 1`` bits), which :func:`expand_dist_from` finishes: the levels
    can be split over pipeline registers."""
    n = len(mask)
    clear = Signal(n, name="exp_clear")
    m.d.comb += clear.eq(~mask)
    return [v[:levels + 1] for v in prefix_levels(m, [clear[i] for i in range(n)], 0, levels)]


def expand_dist_from(m, partial, done):
    """ :func:`expand_dist` from the prefix sums' first ``done`` levels (:func:`clear_sums`)."""
    n = len(partial)
    stages = (n - 1).bit_length()
    below = prefix_levels(m, partial, done, stages)   # below[p]: clear bits at positions <= p
    return [Const(0, stages)] + [below[p - 1][:stages] for p in range(1, n)]


def expand_moves_from(m, mask, dist):
    """The move masks from the distances of :func:`expand_dist`.

    Compressing moves each set position's element down by ``d``, the number of clear bits below
    it, in stages: by 1 if bit 0 of ``d`` is set, then by 2 if bit 1 is, and so on; no two
    elements ever meet. This runs that compression on the elements' ``d`` values and notes,
    before each stage i, which positions hold an element about to move (``moves[i]``)."""
    n = len(mask)
    stages = (n - 1).bit_length()
    valid = [mask[p] for p in range(n)]
    moves = []
    for i in range(stages):
        mv = Signal(n, name=f"exp_moves{i}")
        m.d.comb += mv.eq(Cat(valid[q] & dist[q][i] for q in range(n)))
        moves.append(mv)
        if i == stages - 1:
            break
        s = 1 << i
        nvalid = [Signal(name=f"exp_valid{i + 1}_{q}") for q in range(n)]
        ndist = [Signal(stages, name=f"exp_dist{i + 1}_{q}") for q in range(n)]
        for q in range(n):
            stay = valid[q] & ~dist[q][i]
            if q + s < n:
                come = mv[q + s]
                m.d.comb += [nvalid[q].eq(come | stay),
                             ndist[q].eq(Mux(come, dist[q + s], dist[q]))]
            else:
                m.d.comb += [nvalid[q].eq(stay), ndist[q].eq(dist[q])]
        valid, dist = nvalid, ndist
    return moves


def expand_lanes(m, moves, lanes, low=0):
    """The expansion's data: the compression's stages run backwards, moving up: in stage i,
    position q takes the lane 2^i below it when ``moves[i - low][q]`` is set (``low``: the
    first stage ``moves`` holds, when the stages are split over pipeline registers)."""
    n = len(lanes)
    x = list(lanes)
    for j in reversed(range(len(moves))):
        i = j + low
        s = 1 << i
        y = [Signal(len(x[q]), name=f"exp_lane{i}_{q}") if q >= s else x[q] for q in range(n)]
        for q in range(s, n):
            m.d.comb += y[q].eq(Mux(moves[j][q], x[q - s], x[q]))
        x = y
    return x


def prefix_levels(m, values, first, stop):
    """Levels ``first`` to ``stop - 1`` of inclusive prefix sums (Kogge-Stone: level k adds the
    sum 2^k positions below) over ``values``, the sums after the first ``first`` levels."""
    n = len(values)
    width = n.bit_length()
    cur = [Signal(width, name=f"ps{first}_{i}") for i in range(n)]
    for i in range(n):
        m.d.comb += cur[i].eq(values[i])
    for level in range(first, stop):
        d = 1 << level
        nxt = [Signal(width, name=f"ps{level + 1}_{i}") for i in range(n)]
        for i in range(n):
            m.d.comb += nxt[i].eq(cur[i] + cur[i - d] if i >= d else cur[i])
        cur = nxt
    return cur
