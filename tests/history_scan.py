"""``python tests/history_scan.py [PATH ...]``: find work history in source and docs.

Comments and docs describe the design as it is; how it got there belongs in git log. This scan
(part of ``make lint``, and of the test suite through ``tests/test_docs.py``) lists every line
under ``hw/``, ``model/``, ``sim/``, ``docs/`` and README.md that reads as a work log (the
patterns below), and exits with status 1 when it finds any. It lives beside the tests, outside
the folders it scans, so that its own patterns are not read as a log.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: (what it is, pattern); each is matched line by line, case-insensitively
MARKERS = [
    ("commit hash", re.compile(
        r"(?<![0-9a-z_'.])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![0-9a-z_])",
        re.I)),
    ("work session", re.compile(r"\b(?:[a-z]+-)?[a-z]+(?:st|nd|rd|th) session\b|"
                                r"\b(?:this|that|each|every|a|the|one|later|earlier) "
                                r"session\b", re.I)),
    ("date of work", re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")),
    ("build's critical path", re.compile(r"critical path (?:at|was|of the)\b|"
                                         r"\bwas (?:the |its |their )?[\w' -]{0,40}critical "
                                         r"path\b", re.I)),
    ("placement seed", re.compile(r"(?:placement|nextpnr's|at|with) seed [0-9]|"
                                  r"--seed [0-9]", re.I)),
    ("reverted attempt", re.compile(r"\breverted\b|\btried and\b|\bsince removed\b", re.I)),
    ("note outside the repository", re.compile(r"shared/spec|\bthe seed's\b|\bseed 00[0-9]\b",
                                               re.I)),
]
#: in source files only: a measured figure (a decimal MHz or ns) belongs in a results table
SOURCE_MARKERS = [
    ("build figure in a comment", re.compile(r"\b[0-9]+\.[0-9]+ (?:MHz|ns)\b")),
]
#: what is scanned, from the repository's top
SCANNED = ("hw", "model", "sim", "docs", "examples", "README.md")
SUFFIXES = {".py", ".md", ".h", ".v"}


def scan_text(text: str, source: bool = False) -> list[tuple[int, str, str]]:
    """(line number, what, line) for every marker in ``text``; ``source``: a source file, where
    measured figures count too."""
    found = []
    markers = MARKERS + (SOURCE_MARKERS if source else [])
    for n, line in enumerate(text.splitlines(), 1):
        for what, pattern in markers:
            if pattern.search(line):
                found.append((n, what, line.strip()))
                break
    return found


def scan(root: Path, paths=SCANNED) -> list[tuple[Path, int, str, str]]:
    """Every marker in the scanned files under ``root``."""
    found = []
    for p in paths:
        p = root / p
        files = [p] if p.is_file() else sorted(
            f for f in p.rglob("*") if f.suffix in SUFFIXES and "__pycache__" not in f.parts)
        for f in files:
            for n, what, line in scan_text(f.read_text(errors="replace"), f.suffix == ".py"):
                found.append((f.relative_to(root), n, what, line))
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    found = scan(Path(__file__).resolve().parent.parent, argv or SCANNED)
    for path, n, what, line in found:
        print(f"{path}:{n}: {what}: {line[:120]}")
    if found:
        print(f"{len(found)} lines read as work history; say why the design is as it is, and "
              f"leave the story to git log", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
