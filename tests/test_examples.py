"""Every code example in README.md and docs/ runs as written, and so does every script in
examples/.

Each file's examples run in order in one fresh folder, sharing one Python namespace, as a reader
would type them: ```python blocks are executed; in ```sh blocks every ``atomcube`` and
``python -m atomcube...`` line is run and must exit 0. Other shell lines (make, pip,
openFPGALoader) are the build and install steps that CI itself and tests/test_packaging.py run.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def examples(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(page.read_text())]


def test_examples_are_found():
    found = {p.name: [k for k, _ in examples(p)] for p in PAGES}
    assert "python" in found["README.md"] and "sh" in found["README.md"]
    # every block says what it is: python and sh run; text and the rest are shown only
    for name, kinds in found.items():
        assert "" not in kinds, f"{name}: a code block without a language"


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p)], ids=lambda p: p.name)
def test_page_examples_run(page, tmp_path):
    namespace: dict = {"__name__": "__example__"}
    with contextlib.chdir(tmp_path):
        for kind, code in examples(page):
            if kind == "python":
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"{page.name} example", "exec"), namespace)
            elif kind == "sh":
                for line in code.replace("\\\n", " ").splitlines():
                    line = line.split(" #")[0].strip()
                    if not line.startswith(("atomcube ", "python -m atomcube")):
                        continue
                    argv = shlex.split(line)
                    if argv[0] == "atomcube":
                        argv = [sys.executable, "-m", "atomcube.model.cli", *argv[1:]]
                    else:
                        argv[0] = sys.executable
                    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
                    assert r.returncode == 0, f"{page.name}: {line}\n{r.stderr}"


#: scripts with a test of their own, which runs them and checks what they build
OWN_TESTS = {"litex_ulx3s.py": "tests/test_litex.py"}


@pytest.mark.parametrize("script", [p for p in sorted((ROOT / "examples").glob("*.py"))
                                    if p.name not in OWN_TESTS], ids=lambda p: p.name)
def test_example_scripts_run(script, tmp_path):
    """Every script in examples/ (but those of :data:`OWN_TESTS`) runs from a folder of its own
    (so it imports the installed package, not the clone's files) and exits 0."""
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"{script.name}:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip(), f"{script.name} printed nothing"
