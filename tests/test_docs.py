"""Docs and comments describe the product as it is: the work-history scan that `make lint` runs
finds nothing in hw/, model/, sim/, docs/ or README.md, and it does find each kind of marker."""

from __future__ import annotations

from pathlib import Path

import history_scan as history
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_no_work_history_in_source_or_docs():
    found = history.scan(ROOT)
    assert found == [], "\n".join(f"{p}:{n}: {what}: {line}" for p, n, what, line in found)


@pytest.mark.parametrize(("line", "source"), [
    ("# registered: this was the critical path at 8214c14", True),
    ("# the sum moved a stage earlier (`a6b99fb`)", True),
    ("# over 10 ns on the SoC at 7e82682.", True),       # a hash that reads like 7e82682
    ("Thirty-eighth session: the SoC at 100 MHz", False),
    ("met at --seed 3 only", False),
    ("measured on 2026-11-27", False),
    ("two cuts tried and reverted", False),
    ("the rules are shared/spec/lut.md's", False),
    ("# 5.8 ns on one net", True),
])
def test_markers_are_found(line, source):
    assert history.scan_text(line, source), line


@pytest.mark.parametrize("line", [
    "# registered: this enable reaches 240 flip-flops",
    "INF = 3.40282e38",
    "0xdeadbeef is a word; 32'hcafe0123 too",
    "cocotb's random seed, printed with every result (SEED=n)",
    "the 100 MHz goal on ECP5",
])
def test_plain_lines_pass(line):
    assert not history.scan_text(line, True), line


def test_readme_is_a_guide():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    for needed in ("make sim", "make test", "pip install", "## Results"):
        assert needed in text
