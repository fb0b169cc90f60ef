"""The command under careless use: every mistake ends in one line on stderr naming the argument
or the file and field, exit status 2, nothing written, in bounded time and memory.

The directed tests each reproduce one mistake a user made; the property test at the end feeds
every command random arguments and random, truncated and edited files.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import signal
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from atomcube.model import cli
from atomcube.model.files import MAX_BYTES


def run(*argv, cwd: Path | None = None) -> tuple[int, str, str]:
    """``atomcube argv`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            contextlib.chdir(cwd or Path.cwd()):
        try:
            rc = cli.main([str(a) for a in argv])
        except SystemExit as e:           # argparse's own errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def refused(*argv, match: str, cwd: Path | None = None) -> str:
    """Run, and require a refusal: status 2, one line on stderr holding ``match``."""
    rc, _, err = run(*argv, cwd=cwd)
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert lines and match in lines[-1], err
    assert "Traceback" not in err
    assert len([x for x in lines if x.startswith("atomcube")]) == 1, err
    return lines[-1]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.fixture
def work(tmp_path):
    """A folder with a small int8 tensor, an int16 one, a float64 one and a kernel."""
    rng = np.random.default_rng(7)
    np.save(tmp_path / "h.npy", rng.integers(-128, 128, (2, 3, 4, 5), dtype=np.int8))
    np.save(tmp_path / "i16.npy", (np.arange(120) * 300 - 9000).astype(np.int16).reshape(
        2, 3, 4, 5))
    np.save(tmp_path / "f64.npy", rng.standard_normal((1, 3, 4, 5)))
    np.save(tmp_path / "k.npy", rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8))
    return tmp_path


# -- sizes are checked before anything is allocated ----------------------------------------------

@pytest.mark.parametrize(("fmt", "match"), [
    ("nvdla-feature", "--shape: 100,000,000 elements"), ("dmp", "--shape: 100,000,000 elements"),
    ("sophgo", "shape: the tensor needs")])
def test_explain_refuses_huge_shapes_at_once(fmt, match):
    t0 = time.perf_counter()
    refused("layout", "explain", "--format", fmt, "--shape", "1,100000000,1,1", "--limit", "3",
            match=match)
    assert time.perf_counter() - t0 < 2


def test_explain_honours_limit():
    rc, out, _ = run("layout", "explain", "--format", "nvdla-feature", "--shape", "1,64,64,64",
                     "--limit", "3")
    assert rc == 0
    table_rows = [x for x in out.splitlines() if x.startswith("0x")]
    assert len(table_rows) == 3
    assert "more elements" in out


@pytest.mark.parametrize("extra", [["--npus", "100000000"], ["--npu-bytes", "4000000000"],
                                   ["--npus", "4096", "--npu-bytes", "1048576"]])
def test_sophgo_local_memory_over_the_limit(work, extra):
    line = refused("layout", "convert", work / "h.npy", "--to", "sophgo", *extra, "-o",
                   work / "s.bin", match="")
    assert "--npu" in line or "1 GiB" in line
    assert not (work / "s.bin").exists()


def test_weights_pack_checks_the_npy_header_before_reading(work):
    path = work / "big.npy"
    with path.open("wb") as f:      # a header promising 8 GiB, and 16 bytes of data
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<i1", "fortran_order": False, "shape": (1 << 15, 1 << 15, 8, 1)})
        f.write(b"\0" * 16)
    refused("weights", "pack", path, "--precision", "int8", "-o", work / "w",
            match="over the command's limit")
    assert not (work / "w").exists()


# -- outputs: the path printed is the path written, never an input, never a partial file ------

def test_convert_never_overwrites_its_input(work):
    before = (work / "h.npy").read_bytes()
    refused("layout", "convert", work / "h.npy", "--to", "nvdla-feature", "-o", work / "h.npy",
            match="-o:")
    assert (work / "h.npy").read_bytes() == before


def test_read_back_never_overwrites_the_image_or_sidecar(work):
    assert run("layout", "convert", work / "h.npy", "--to", "dmp", "-o", work / "g.bin")[0] == 0
    refused("layout", "convert", work / "g.bin", "-o", work / "g.bin", match="-o:")
    refused("layout", "convert", work / "g.bin", "-o", work / "g.json", match="-o:")


def test_output_suffix_is_required(work):
    refused("layout", "convert", work / "h.npy", "--to", "dmp", "-o", work / "back_noext",
            match="must end in .bin")
    assert run("layout", "convert", work / "h.npy", "--to", "dmp", "-o", work / "g.bin")[0] == 0
    refused("layout", "convert", work / "g.bin", "-o", work / "t.bin", match="must end in .npy")
    assert not (work / "back_noext").exists() and not (work / "back_noext.npy").exists()


def test_written_path_is_the_printed_path(work):
    rc, out, _ = run("layout", "convert", work / "h.npy", "--to", "dmp", "-o", work / "g.bin")
    assert rc == 0 and f"wrote {work / 'g.bin'}" in out
    rc, out, _ = run("layout", "convert", work / "g.bin", "-o", work / "back.npy")
    assert rc == 0 and f"wrote {work / 'back.npy'}" in out
    assert (np.load(work / "back.npy") == np.load(work / "h.npy")).all()


@pytest.mark.parametrize("argv", [
    ["layout", "convert", "{w}/h.npy", "--to", "nvdla-feature", "-o", "{w}/nope/x.bin"],
    ["weights", "unpack", "{w}/wp", "-o", "{w}/nope/k.npy"],
    ["lut", "fit", "sigmoid", "--in-frac", "12", "--out-frac", "15", "--plot",
     "{w}/nope/s.png"],
    ["lut", "fit", "sigmoid", "--in-frac", "12", "--out-frac", "15", "--json",
     "{w}/nope/s.json"],
    ["board", "dump", "--port", "/dev/null-atomcube", "0", "16", "{w}/nope/d.bin"],
])
def test_output_into_a_missing_folder(work, argv):
    assert run("weights", "pack", work / "k.npy", "--precision", "int8", "-o", work / "wp")[0] == 0
    t0 = time.perf_counter()
    refused(*[a.format(w=work) for a in argv], match="folder")
    assert time.perf_counter() - t0 < 2          # checked before the 17 s of fitting
    assert not (work / "nope").exists()


def test_weights_pack_onto_a_file(work):
    (work / "taken").write_text("mine")
    refused("weights", "pack", work / "k.npy", "--precision", "int8", "-o", work / "taken",
            match="is a file")
    assert (work / "taken").read_text() == "mine"


# -- no silent loss ------------------------------------------------------------------------------

def test_int16_into_dmp_needs_lossy(work):
    refused("layout", "convert", work / "i16.npy", "--to", "dmp", "-o", work / "d.bin",
            match="pass --lossy")
    assert not (work / "d.bin").exists()
    assert run("layout", "convert", work / "i16.npy", "--to", "dmp", "--dtype", "fp32", "-o",
               work / "d.bin")[0] == 0
    assert run("layout", "convert", work / "d.bin", "-o", work / "d.npy")[0] == 0
    assert (np.load(work / "d.npy") == np.load(work / "i16.npy")).all()
    assert run("layout", "convert", work / "i16.npy", "--to", "dmp", "--lossy", "-o",
               work / "e.bin")[0] == 0


def test_float64_into_sophgo_needs_lossy(work):
    refused("layout", "convert", work / "f64.npy", "--to", "sophgo", "-o", work / "s.bin",
            match="float64")
    assert run("layout", "convert", work / "f64.npy", "--to", "sophgo", "--lossy", "-o",
               work / "s.bin")[0] == 0
    assert json.loads((work / "s.json").read_text())["dtype"] == "fp32"


def test_int8_into_sophgo_stays_int8(work):
    assert run("layout", "convert", work / "h.npy", "--to", "sophgo", "-o", work / "s.bin")[0] == 0
    assert json.loads((work / "s.json").read_text())["dtype"] == "int8"
    assert run("layout", "convert", work / "s.bin", "-o", work / "b.npy")[0] == 0
    back = np.load(work / "b.npy")
    assert back.dtype == np.int8 and (back == np.load(work / "h.npy")).all()


def test_nan_into_an_integer_type(work):
    t = np.zeros((1, 2, 2, 2))
    t[0, 1, 1, 1] = np.nan
    np.save(work / "n.npy", t)
    for dtype in ("int8", "fp32"):
        argv = ["layout", "convert", work / "n.npy", "--to", "sophgo", "--dtype", dtype,
                "--lossy", "-o", work / f"n{dtype}.bin"]
        if dtype == "int8":
            refused(*argv, match="NaN or infinity")
        else:                           # a float type holds NaN: it comes back unchanged
            assert run(*argv)[0] == 0


# -- strict reads --------------------------------------------------------------------------------

def _image(work, to, *extra):
    assert run("layout", "convert", work / "h.npy", "--to", to, *extra, "-o",
               work / "img.bin")[0] == 0
    return json.loads((work / "img.json").read_text())


def _edit(work, side, **change):
    side.update(change)
    (work / "img.json").write_text(json.dumps(side))


@pytest.mark.parametrize(("to", "extra", "change", "match"), [
    ("dmp", [], {"transpose": "yes"}, "transpose: must be true or false"),
    ("sophgo", [], {"strides": [1, 2, 3, 4]}, "strides: is [1, 2, 3, 4], but the other fields"),
    ("nvdla-feature", [], {"shape": [2, 3, 4, 5.0]}, "sizes must be integers"),
    ("nvdla-feature", [], {"surprise": 1}, "unknown field 'surprise'"),
    ("dmp", [], {"format": "tiff"}, "format: must be nvdla-feature"),
])
def test_edited_sidecars_are_refused(work, to, extra, change, match):
    _edit(work, _image(work, to, *extra), **change)
    refused("layout", "convert", work / "img.bin", "-o", work / "b.npy", match=match)
    assert not (work / "b.npy").exists()


def test_edited_pixel_plane_offsets_are_refused(work):
    np.save(work / "p.npy", np.zeros((1, 3, 4, 8), np.uint8))
    assert run("layout", "convert", work / "p.npy", "--to", "nvdla-pixel", "--pixel-format",
               "T_Y8___U8V8_N444", "-o", work / "img.bin")[0] == 0
    side = json.loads((work / "img.json").read_text())
    side["plane_offsets"] = [0, 96]
    (work / "img.json").write_text(json.dumps(side))
    refused("layout", "convert", work / "img.bin", "-o", work / "b.npy",
            match="plane_offsets: is [0, 96]")


def test_sidecar_without_shape_list_and_truncated(work):
    side = _image(work, "dmp")
    del side["shape"]
    (work / "img.json").write_text(json.dumps(side))
    refused("layout", "convert", work / "img.bin", "-o", work / "b.npy",
            match="missing field 'shape'")
    (work / "img.json").write_text("[1, 2]")
    refused("layout", "convert", work / "img.bin", "-o", work / "b.npy",
            match="holds a JSON list")
    (work / "img.json").write_text('{"format": "dmp", "sha')
    line = refused("layout", "convert", work / "img.bin", "-o", work / "b.npy",
                   match="not valid JSON")
    assert str(work / "img.json") in line


def test_trailing_bytes_after_an_image(work):
    _image(work, "nvdla-feature")
    with (work / "img.bin").open("ab") as f:
        f.write(b"\0")
    refused("layout", "convert", work / "img.bin", "-o", work / "b.npy", match="bytes;")


def test_manifest_version_and_base(work):
    assert run("weights", "pack", work / "k.npy", "--precision", "int8", "-o", work / "w")[0] == 0
    m = json.loads((work / "w" / "manifest.json").read_text())
    m["version"] = 2
    (work / "w" / "manifest.json").write_text(json.dumps(m))
    refused("weights", "unpack", work / "w", "-o", work / "k2.npy", match="version: must be 1")
    m["version"], m["groups"] = 1, 7
    (work / "w" / "manifest.json").write_text(json.dumps(m))
    refused("weights", "unpack", work / "w", "-o", work / "k2.npy", match="groups: is 7")
    refused("weights", "pack", work / "k.npy", "--precision", "int8", "--compress", "--base",
            "-5", "-o", work / "w2", match="--base")


# -- board arguments are checked before a port is opened ------------------------------------------

@pytest.mark.parametrize(("argv", "match"), [
    (["peek", "0x0", "0"], "count: must be 1 to"),
    (["peek", "0x0", "-5"], "count: must be 1 to"),
    (["peek", "0x2"], "not a multiple of 4"),
    (["poke", "0x0", "-1"], "words: must be 0 to"),
    (["poke", "0x0", "0x100000000"], "words: must be 0 to"),
    (["dump", "0x0", "-4", "out.bin"], "nbytes: must be 1 to"),
    (["load", "missing.bin", "0x0"], "FILE: missing.bin: no such file"),
])
def test_board_arguments(tmp_path, argv, match):
    cmd, *rest = argv
    refused("board", cmd, "--port", "/dev/null-atomcube", *rest, match=match, cwd=tmp_path)
    assert files(tmp_path) == {}


# -- lut fit -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("extra", "match"), [
    (["--x-min", "5", "--x-max", "-5"], "x_min < x_max"),
    (["--x-min", "0", "--x-max", "0"], "x_min < x_max"),
    (["--x-min", "inf"], "must be a finite number"),
    (["--x-min", "nan"], "must be a finite number"),
    (["--x-min", "1e-9", "--x-max", "2e-9"], "fewer than two inputs"),
    (["--flavor", "cdp", "--out-frac", "16"], "saturates"),
    (["--out-frac", "16"], "beyond the int16 table entries: use out_frac 15 or less"),
])
def test_lut_fit_bad_requests(extra, match):
    argv = ["lut", "fit", "sigmoid", "--in-frac", "12", "--out-frac", "15", *extra]
    refused(*argv, match=match)


@pytest.mark.parametrize(("extra", "match"), [
    (["--in-frac", "12"], "--in-frac: the FP16 pipeline has no fixed-point formats"),
    (["--flavor", "cdp"], "--flavor: the FP16 pipeline is SDP's"),
    (["--layout", "nested"], "--layout: the FP16 fit chooses its own arrangement"),
    (["--x-min", "1e-9", "--x-max", "2e-9"], "holds fewer than two FP16 numbers"),
])
def test_lut_fit_fp16_bad_requests(tmp_path, extra, match):
    refused("lut", "fit", "tanh", "--precision", "fp16", "--json", tmp_path / "t.json", *extra,
            match=match)
    assert files(tmp_path) == {}


def test_lut_fit_int_needs_its_formats():
    refused("lut", "fit", "tanh", "--out-frac", "14", match="--in-frac: the integer pipeline "
                                                             "needs")


def test_lut_fit_advice_is_never_impossible():
    line = refused("lut", "fit", "exp", "--in-frac", "12", "--out-frac", "0", "--x-max", "30",
                   match="")
    assert "out_frac -" not in line


def test_lut_fit_lrn_searches_octaves_by_default(tmp_path):
    rc, out, err = run("lut", "fit", "lrn", "--flavor", "cdp", "--in-frac", "0", "--out-frac",
                       "14", "--json", tmp_path / "lrn.json")
    assert rc == 0, err
    assert "raw table LE, LE exp" in err
    assert json.loads((tmp_path / "lrn.json").read_text())["report"]["max error (LSB)"] < 20


# -- the property: random arguments and files, a clean answer every time -------------------------

def _make_inputs(folder: Path) -> None:
    """Valid files of every kind, for the strategies below to break."""
    rng = np.random.default_rng(1)
    np.save(folder / "t.npy", rng.integers(-128, 128, (1, 3, 4, 5), dtype=np.int8))
    np.savez(folder / "t.npz", a=np.ones((3, 4, 5), np.float16), b=np.zeros(3))
    np.save(folder / "k.npy", rng.integers(-3, 3, (4, 3, 3, 3), dtype=np.int8))
    for to in ("nvdla-feature", "sophgo", "dmp"):
        extra = ["--npus", "4", "--npu-bytes", "1024"] if to == "sophgo" else []
        assert run("layout", "convert", folder / "t.npy", "--to", to, *extra, "-o",
                   folder / f"{to}.bin")[0] == 0
    assert run("weights", "pack", folder / "k.npy", "--precision", "int8", "--compress", "-o",
               folder / "w")[0] == 0
    from onnx import TensorProto, helper, numpy_helper, save

    w = [numpy_helper.from_array(rng.normal(0, 1, s).astype(np.float32), n)
         for n, s in (("w0", (4, 3, 3, 3)), ("w1", (5, 4)))]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w0"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["c"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "w1"], ["y"], transB=1)], "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], w)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
         str(folder / "m.onnx"))


_VALUES = st.one_of(
    st.integers(-2**40, 2**40).map(str), st.sampled_from(["0", "-1", "1", "0x100", "nan", "inf",
                                                          "1e300", "", "3,4", "1,2,3,4",
                                                          "1,0,1,1", "int8", "fp16", "T_R8"]),
    st.text(max_size=8))
_FILES = st.sampled_from(["t.npy", "t.npz", "k.npy", "nvdla-feature.bin", "sophgo.bin",
                          "dmp.bin", "w", "missing.npy", "nvdla-feature.json", ".", "m.onnx"])
_OUTS = st.sampled_from(["o.bin", "o.npy", "o", "t.npy", "nope/o.bin", "o.json", "w",
                         "dmp.bin", "nvdla-feature.json"])
_OPTIONS = ["--to", "--precision", "--dtype", "--line-stride", "--surface-stride",
            "--cube-stride", "--fill", "--npus", "--npu-bytes", "--address", "--mode",
            "--pixel-format", "--x-offset", "--layout", "--key", "--limit", "--shape",
            "--format", "--mode", "--stride", "--pixel-channels", "--post-extension",
            "--scale", "--base", "--sidecar", "--config", "--input-shape", "--prune",
            "--prune-scope"]
_FLAGS = ["--lossy", "--transpose", "--no-chunks", "--compress", "--no-winograd"]


@st.composite
def _argv(draw):
    command = draw(st.sampled_from([
        ["layout", "convert"], ["layout", "explain"], ["weights", "pack"], ["weights", "unpack"],
        ["regs"], ["board", "peek", "--port", "/dev/null-atomcube"], ["net"], ["configs"]]))
    argv = list(command)
    working = draw(st.booleans())
    right = {"convert": "t.npy", "pack": "k.npy", "unpack": "w", "net": "m.onnx"}.get(
        command[-1])
    if command[0] not in ("regs", "configs") and command[-1] != "explain":
        argv.append(right if working and right else draw(_FILES))
    if working:                      # half the time, the arguments a working call needs
        argv += {"convert": ["--to", draw(st.sampled_from(["nvdla-feature", "sophgo", "dmp"])),
                             "-o", "o.bin"],
                 "unpack": ["-o", "o.npy"], "peek": ["0x0"],
                 "explain": ["--format", draw(st.sampled_from(["nvdla-feature", "sophgo",
                                                               "dmp"])),
                             "--shape", draw(st.sampled_from(["1,3,4,5", "2,40,3,3"]))],
                 "pack": ["--precision", "int8", "-o", "wout"],
                 "net": ["--input-shape", draw(st.sampled_from(["1,3,8,8", "1,3,5,40"])),
                         "-o", "netout"]}.get(command[-1], [])
    for _ in range(draw(st.integers(0, 2 if working else 5))):
        argv += [draw(st.sampled_from(_OPTIONS)), draw(_VALUES)]
    argv += draw(st.lists(st.sampled_from(_FLAGS), max_size=2))
    if not working and draw(st.booleans()):
        argv += ["-o", draw(_OUTS)]
    return argv


@st.composite
def _damage(draw):
    """(file, how): a file to break before the run, and how."""
    return (draw(_FILES.filter(lambda f: f not in ("w", "missing.npy", "."))),
            draw(st.sampled_from(["truncate", "flip", "append", "json", "none"])),
            draw(st.integers(0, 4096)))


def _break(folder: Path, name: str, how: str, at: int) -> None:
    path = folder / name
    if how == "none" or not path.is_file():
        return
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[:at % (len(data) + 1)]
    elif how == "flip" and data:
        data[at % len(data)] ^= 0x5A
    elif how == "append":
        data += b"\x93NUMPY" * (at % 5 + 1)
    elif how == "json":
        side = path.with_suffix(".json")
        if side.exists():
            d = json.loads(side.read_text())
            keys = sorted(d)
            key = keys[at % len(keys)]
            d[key] = [None, "x", -1, 1.5, True, {}, [1]][at % 7]
            side.write_text(json.dumps(d))
        return
    path.write_bytes(bytes(data))


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    _make_inputs(folder)
    return folder


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(argv=_argv(), damage=_damage())
def test_every_command_answers_cleanly(inputs, argv, damage):
    """Exit status 0 or 2; on 2, one line naming the command and nothing written; within 20 s,
    and within the 1 GiB an output may reach plus 64 MiB of Python and numpy allocations (a
    Sophgo image of 2,046 NPUs is 511.5 MiB by itself). (`board` has no port here, so it can
    only refuse.)"""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copytree(inputs, folder, dirs_exist_ok=True)
        _break(folder, *damage)
        before = files(folder)
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(20)
        tracemalloc.start()
        try:
            rc, _, err = run(*argv, cwd=folder)
            peak = tracemalloc.get_traced_memory()[1]
        except _Timeout:
            pytest.fail(f"atomcube {' '.join(argv)}: over 20 s")
        finally:
            tracemalloc.stop()
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        assert peak < MAX_BYTES + (64 << 20), f"atomcube {' '.join(argv)}: {peak:,} bytes"
        event(f"{' '.join(argv[:2])}: {rc}")
        assert rc in (0, 2), err
        assert "Traceback" not in err
        if rc == 2:
            lines = [x for x in err.splitlines() if x.startswith("atomcube")]
            assert len(lines) == 1, err
            assert files(folder) == before, f"atomcube {' '.join(argv)} wrote on failure"


def test_write_if_changed_keeps_an_unchanged_file(tmp_path):
    """Generated files (headers, the simulators' Verilog) are rewritten only when their text
    changes, so what rebuilds on a newer file does not run again."""
    import os

    from atomcube.model.files import write_if_changed

    path = tmp_path / "new" / "x.h"
    assert write_if_changed(path, "a\n") and path.read_text() == "a\n"
    os.utime(path, (1, 1))
    assert not write_if_changed(path, "a\n") and path.stat().st_mtime == 1
    assert write_if_changed(path, "b\n") and path.read_text() == "b\n"
    assert path.stat().st_mtime > 1 and list(path.parent.iterdir()) == [path]
