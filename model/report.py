"""Plain-text tables for the command line, the regression summary and the benchmarks."""

import time
from collections.abc import Sequence


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a rule under the header, no trailing spaces."""
    cells = [[str(c) for c in head], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(cells[0]), line(["-" * w for w in widths]), *map(line, cells[1:])])


def best_time(fn, runs: int):
    """(fastest of ``runs`` calls of ``fn`` in seconds, the last call's result)."""
    best, out = float("inf"), None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
