"""Plain-text tables for the command line, the regression summary and the benchmarks."""

import sys
import time
from collections.abc import Sequence


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a rule under the header, no trailing spaces."""
    cells = [[str(c) for c in head], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def line(r):
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(cells[0]), line(["-" * w for w in widths]), *map(line, cells[1:])])


def md_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table: a header, its rule, a line per row."""
    return "\n".join(["| " + " | ".join(map(str, head)) + " |", "|" + "---|" * len(head),
                      *("| " + " | ".join(map(str, r)) + " |" for r in rows)])


class Progress:
    """``progress(i, total, label)`` as a line on stderr: a bar redrawn in place on a terminal,
    elsewhere (logs, CI) a line at each tenth of the way."""

    def __init__(self, what: str, stream=None):
        self.what, self.stream = what, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.shown = -1

    def __call__(self, i: int, total: int, label: str = "") -> None:
        tenth = 10 * i // max(total, 1)
        if self.tty:
            bar = "#" * (20 * i // max(total, 1))
            end = "\n" if i >= total else ""
            print(f"\r{self.what} [{bar:<20}] {i}/{total} {label[:40]:<40}", end=end,
                  file=self.stream, flush=True)
        elif tenth > self.shown or i >= total:
            self.shown = tenth
            print(f"{self.what}: {i}/{total}{f' {label}' if label else ''}", file=self.stream,
                  flush=True)


def best_time(fn, runs: int):
    """(fastest of ``runs`` calls of ``fn`` in seconds, the last call's result)."""
    best, out = float("inf"), None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
