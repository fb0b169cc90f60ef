"""``atomcube layout convert`` and ``explain``, and the layout benchmark's quick mode."""

import json

import numpy as np
import pytest

from atomcube.model import cli, layout_bench
from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.nvdla.feature import FeatureFormat


@pytest.fixture
def tensor(tmp_path):
    t = np.random.default_rng(0).integers(-100, 100, (2, 20, 3, 5)).astype(np.int8)
    np.save(tmp_path / "t.npy", t)
    return tmp_path / "t.npy", t


@pytest.mark.parametrize("fmt, extra", [
    ("T_A2R10G10B10", ["--x-offset", "5", "--sign", "signed"]),
    ("T_Y8___U8V8_N444", ["--x-offset", "20", "--line-stride", "64", "--uv-line-stride", "96"]),
])
def test_convert_pixel_image(tmp_path, capsys, fmt, extra):
    from atomcube.model.nvdla.pixel import PixelImage

    img = PixelImage(fmt, 9, 4, sign="signed" if "signed" in extra else "unsigned")
    t = np.random.default_rng(2).integers(-2, 2, img.shape) if "signed" in extra else \
        np.random.default_rng(2).integers(0, 256, img.shape)
    np.save(tmp_path / "px.npy", t)
    out = tmp_path / "px.bin"
    assert cli.main(["layout", "convert", str(tmp_path / "px.npy"), "--to", "nvdla-pixel",
                     "--pixel-format", fmt, *extra, "-o", str(out)]) == 0
    side = json.loads((tmp_path / "px.json").read_text())
    assert side["pixel_format"] == fmt and out.stat().st_size == PixelImage.from_dict(side).size
    assert cli.main(["layout", "convert", str(out), "-o", str(tmp_path / "back.npy")]) == 0
    assert (np.load(tmp_path / "back.npy") == t).all()
    capsys.readouterr()
    assert cli.main(["layout", "convert", str(tmp_path / "px.npy"), "--to", "nvdla-pixel",
                     "-o", str(out)]) == 2
    assert "--pixel-format" in capsys.readouterr().err
    assert cli.main(["layout", "convert", str(tmp_path / "px.npy"), "--to", "nvdla-pixel",
                     "--pixel-format", fmt, "--x-offset", "40", "-o", str(out)]) == 2
    assert "x_offset" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [
    ["--to", "nvdla-feature", "--precision", "int8", "--line-stride", "256"],
    ["--to", "nvdla-feature", "--precision", "fp16", "--fill", "1"],
    ["--to", "sophgo", "--npus", "4", "--npu-bytes", "4096", "--dtype", "int8", "--mode", "4N",
     "--address", "0x1080"],
    ["--to", "sophgo", "--npus", "8", "--npu-bytes", "2048", "--dtype", "int16", "--layout",
     "compact"],
    ["--to", "dmp", "--transpose"],
])
def test_convert_round_trip(tmp_path, tensor, capsys, extra):
    path, t = tensor
    out = tmp_path / "img.bin"
    assert cli.main(["layout", "convert", str(path), *extra, "-o", str(out)]) == 0
    side = json.loads((tmp_path / "img.json").read_text())
    assert side["shape"] == list(t.shape)
    assert cli.main(["layout", "convert", str(out), "-o", str(tmp_path / "back.npy")]) == 0
    back = np.load(tmp_path / "back.npy")
    assert (back.astype(np.float32) == t.astype(np.float32)).all()
    assert "wrote" in capsys.readouterr().out


def test_convert_keeps_fp16_nan_and_infinity(tmp_path):
    """fp16 activations with NaN (payloads too) and infinities go to NVDLA feature data and
    back with every bit kept."""
    bits = np.arange(0x7BF0, 0x7BF0 + 2 * 20 * 3 * 5, dtype=np.uint16).reshape(2, 20, 3, 5)
    bits.flat[:4] = [0x7C00, 0xFC00, 0x7E01, 0xFD55]
    np.save(tmp_path / "a.npy", bits.view(np.float16))
    assert cli.main(["layout", "convert", str(tmp_path / "a.npy"), "--to", "nvdla-feature",
                     "--precision", "fp16", "-o", str(tmp_path / "a.bin")]) == 0
    assert cli.main(["layout", "convert", str(tmp_path / "a.bin"), "-o",
                     str(tmp_path / "back.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "back.npy").view(np.uint16), bits)


def test_convert_writes_the_models_bytes(tmp_path, tensor):
    path, t = tensor
    out = tmp_path / "img.bin"
    assert cli.main(["layout", "convert", str(path), "--to", "nvdla-feature", "-o",
                     str(out)]) == 0
    assert out.read_bytes() == FeatureFormat("int8", t.shape).pack(t).tobytes()
    assert cli.main(["layout", "convert", str(path), "--to", "dmp", "-o", str(out)]) == 0
    assert out.read_bytes() == DmpLayout(t.shape).pack(t).tobytes()


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "nvdla-feature", "--line-stride", "40"], "line_stride: 40 is not a multiple"),
    (["--to", "sophgo", "--dtype", "fp32", "--mode", "4N"], "mode: 4N stores"),
    (["--to", "sophgo", "--npus", "4", "--npu-bytes", "128"], "shape: the tensor needs"),
    ([], "--to: say which format"),
])
def test_convert_errors(tmp_path, tensor, capsys, args, message):
    path, _ = tensor
    assert cli.main(["layout", "convert", str(path), *args, "-o", str(tmp_path / "x.bin")]) == 2
    assert message in capsys.readouterr().err


def test_convert_bin_needs_its_sidecar(tmp_path, capsys):
    (tmp_path / "a.bin").write_bytes(b"\0" * 64)
    assert cli.main(["layout", "convert", str(tmp_path / "a.bin"), "-o",
                     str(tmp_path / "a.npy")]) == 2
    assert "missing; give the image's sidecar" in capsys.readouterr().err


def test_explain_nvdla(capsys):
    assert cli.main(["layout", "explain", "--format", "nvdla-feature", "--shape", "1,40,2,3",
                     "--limit", "7"]) == 0
    out = capsys.readouterr().out
    assert "0x000000  32     N 0, C 0-31, H 0, W 0" in out
    assert "0x0000c0  8      N 0, C 32-39, H 0, W 0" in out
    assert "more elements" in out


def test_explain_sophgo_and_dmp(capsys):
    assert cli.main(["layout", "explain", "--format", "sophgo", "--npus", "4", "--npu-bytes",
                     "1024", "--shape", "2,5,3,4", "--limit", "200"]) == 0
    out = capsys.readouterr().out
    assert "NPU 0 +128  16     N 0, C 4, H 0, W 0-3" in out
    assert "more elements" not in out
    assert cli.main(["layout", "explain", "--format", "dmp", "--shape", "1,20,2,3"]) == 0
    assert "D 0, C 16-19, H 0, W 0" in capsys.readouterr().out


def test_explain_bad_shape(capsys):
    assert cli.main(["layout", "explain", "--format", "dmp", "--shape", "1,x"]) == 2
    assert cli.main(["layout", "explain", "--format", "dmp", "--shape", "1,2"]) == 2
    assert "shape: " in capsys.readouterr().err


def test_layout_benchmark_quick(capsys):
    assert layout_bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for name in ("NVDLA feature data", "Sophgo aligned local memory", "DMP DWHC"):
        assert name in out
    assert "WRONG" not in out
