"""The distribution as a user installs it: one `atomcube` namespace, nothing generic at the top.

The source folders keep the project's layout (hw/, model/, sim/), and pyproject.toml maps them to
``atomcube.hw``, ``atomcube.model`` and ``atomcube.sim``. These tests check that the mapping lists
every package, and (heavy) that a plain, non-editable ``pip install`` into a new virtual
environment outside the clone gives a working CLI and Python API that neither shadows nor is
shadowed by a user's own ``model.py``, and writes nothing into site-packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_installed():
    found = {"atomcube." + str(p.parent.relative_to(ROOT)).replace(os.sep, ".")
             for top in ("hw", "model", "sim") for p in (ROOT / top).rglob("__init__.py")}
    listed = set(CONFIG["packages"])
    assert found - listed == set(), "package folders missing from pyproject.toml's packages"
    for pkg in listed - found:           # data-only packages: each must map to a real folder
        assert pkg in CONFIG["package-data"], f"{pkg}: listed, but neither code nor data"


def test_no_generic_top_level_names():
    assert set(CONFIG["package-dir"]) == {"atomcube.hw", "atomcube.model", "atomcube.sim",
                                          "atomcube.constraints"}
    assert all(p.startswith("atomcube.") for p in CONFIG["packages"])


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if "__pycache__" not in p.parts}


@pytest.mark.heavy
def test_plain_install_outside_the_clone(tmp_path):
    """`pip install .` into a new venv; then, from a folder holding the user's own model.py and
    hw.py, the CLI and the API work and the outputs land in the current folder."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(ROOT)], check=True,
                   timeout=900)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    before = _files(site)
    work = tmp_path / "work"
    work.mkdir()
    (work / "model.py").write_text("MINE = True\n")
    (work / "hw.py").write_text("MINE = True\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*argv):
        return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)

    r = run(str(venv / "bin" / "atomcube"), "--help")
    assert r.returncode == 0 and "layout" in r.stdout, r.stderr
    r = run(str(py), "-c", "import model, hw; assert model.MINE and hw.MINE\n"
            "from atomcube.model.nvdla.weights import WeightSpec\n"
            "import atomcube.model, pathlib, sys\n"
            "assert 'site-packages' in atomcube.model.__file__, atomcube.model.__file__\n"
            "print(WeightSpec('dc', 'int8', (4, 3, 1, 1)).image_bytes)")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) > 0
    r = run(str(py), "-m", "atomcube.hw.catalog", "--block", "lut_sdp_l4")
    assert r.returncode == 0, r.stderr
    assert (work / "build" / "verilog" / "atomcube_lut_sdp_l4.v").exists()
    r = run(str(venv / "bin" / "atomcube"), "regs", "dma", "--out", "regs")
    assert r.returncode == 0, r.stderr
    assert (work / "regs" / "dma.h").exists()
    assert _files(site) - before == set(), "a command wrote into site-packages"
