"""``atomcube weights pack`` / ``unpack``: files, manifest, round trips and error messages, and
the weights benchmark's quick mode."""

import json

import numpy as np
import pytest

from atomcube.model import cli
from atomcube.model.nvdla import weights_bench
from atomcube.model.nvdla.weights import DecompressJob, WeightSpec, compress


@pytest.fixture
def kernel(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.integers(-9, 9, (40, 70, 3, 3)).astype(np.int8)
    w[rng.random(w.shape) < 0.6] = 0
    path = tmp_path / "k.npy"
    np.save(path, w)
    return path, w


@pytest.mark.parametrize("extra", [
    ["--precision", "int8"],
    ["--precision", "int8", "--compress"],
    ["--precision", "int16", "--compress", "--mode", "deconv", "--stride", "2,3"],
    ["--precision", "fp16", "--compress", "--mode", "image", "--pixel-channels", "72"],
])
def test_pack_unpack_round_trip(tmp_path, kernel, capsys, extra):
    path, w = kernel
    out = tmp_path / "packed"
    assert cli.main(["weights", "pack", str(path), *extra, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "dense image" in text and f"to {out}/" in text
    m = json.loads((out / "manifest.json").read_text())
    compressed = "--compress" in extra
    assert m["compressed"] is compressed
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", "weight.bin"] + (["wgs.bin", "wmb.bin"] if compressed else []))
    for name, size in m["files"].items():
        assert (out / name).stat().st_size == size and size % 128 == 0
    if compressed:
        assert "compression ratio" in text and "WMB" in text
        job = DecompressJob(**m["job"])
        assert job.groups == m["groups"] == len(m["wgs"])
        assert sum(m["wgs"]) <= m["files"]["weight.bin"]
    assert cli.main(["weights", "unpack", str(out), "-o", str(tmp_path / "back.npy")]) == 0
    back = np.load(tmp_path / "back.npy")
    dtype = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}[m["precision"]]
    assert back.dtype == dtype and (back == w.astype(dtype)).all()


def test_pack_writes_the_models_bytes(tmp_path, kernel):
    path, w = kernel
    out = tmp_path / "p"
    assert cli.main(["weights", "pack", str(path), "--precision", "int8", "--compress",
                     "-o", str(out)]) == 0
    spec = WeightSpec("dc", "int8", w.shape)
    packed = compress(spec.layout(w))
    assert (out / "weight.bin").read_bytes() == packed.weight.tobytes()
    assert (out / "wmb.bin").read_bytes() == packed.wmb.tobytes()
    assert (out / "wgs.bin").read_bytes() == packed.wgs.tobytes()


def test_winograd_unpack_gives_transformed_kernels(tmp_path, capsys):
    w = np.ones((2, 3, 3, 3), np.int8)
    np.save(tmp_path / "k.npy", w)
    out = tmp_path / "p"
    assert cli.main(["weights", "pack", str(tmp_path / "k.npy"), "--mode", "winograd",
                     "--precision", "int8", "-o", str(out)]) == 0
    assert cli.main(["weights", "unpack", str(out), "-o", str(tmp_path / "t.npy")]) == 0
    assert "transformed kernels" in capsys.readouterr().out
    t = np.load(tmp_path / "t.npy")
    assert t.shape == (2, 32, 4, 4) and t[0, 0, 1, 1] == 2      # 9 * 0.25 = 2.25 -> 2


def test_npz_needs_a_key_when_it_holds_several(tmp_path, kernel, capsys):
    _, w = kernel
    np.savez(tmp_path / "k.npz", a=w, b=w)
    args = ["weights", "pack", str(tmp_path / "k.npz"), "--precision", "int8", "-o",
            str(tmp_path / "o")]
    assert cli.main(args) == 2
    assert "holds 2 arrays (a, b); choose one with --key" in capsys.readouterr().err
    assert cli.main([*args, "--key", "c"]) == 2
    assert "--key: " in capsys.readouterr().err
    assert cli.main([*args, "--key", "b"]) == 0


@pytest.mark.parametrize(("array", "extra", "message"), [
    (np.zeros((4, 3, 3), np.int8), [], "rank 4"),
    (np.zeros((4, 3, 3, 3), np.float32), [], "not an integer type"),
    (np.zeros((4, 3, 5, 5), np.int8), ["--mode", "winograd"], "does not qualify for Winograd"),
    (np.zeros((4, 3, 3, 3), np.int8), ["--mode", "image", "--post-extension", "4",
                                       "--pixel-channels", "8"], "C' <= 16"),
])
def test_pack_errors_name_the_rule(tmp_path, capsys, array, extra, message):
    np.save(tmp_path / "k.npy", array)
    rc = cli.main(["weights", "pack", str(tmp_path / "k.npy"), "--precision", "int8", *extra,
                   "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("atomcube weights pack: ") and message in err
    assert not (tmp_path / "o").exists()


def test_pack_rejects_missing_and_foreign_files(tmp_path, capsys):
    assert cli.main(["weights", "pack", str(tmp_path / "none.npy"), "--precision", "int8",
                     "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "k.txt").write_text("1 2 3")
    assert cli.main(["weights", "pack", str(tmp_path / "k.txt"), "--precision", "int8",
                     "-o", str(tmp_path / "o")]) == 2
    assert ".npy or .npz" in capsys.readouterr().err


def test_unpack_detects_truncated_and_corrupt_files(tmp_path, kernel, capsys):
    path, _ = kernel
    out = tmp_path / "p"
    assert cli.main(["weights", "pack", str(path), "--precision", "int8", "--compress",
                     "-o", str(out)]) == 0
    wmb = bytearray((out / "wmb.bin").read_bytes())
    wmb[3] ^= 0x01
    (out / "wmb.bin").write_bytes(bytes(wmb))
    assert cli.main(["weights", "unpack", str(out), "-o", str(tmp_path / "b.npy")]) == 2
    assert "wgs[0]: group 0 has" in capsys.readouterr().err
    (out / "wgs.bin").write_bytes(b"\0" * 64)
    assert cli.main(["weights", "unpack", str(out), "-o", str(tmp_path / "b.npy")]) == 2
    assert "64 bytes; the size the manifest gives is 128" in capsys.readouterr().err
    assert cli.main(["weights", "unpack", str(tmp_path), "-o", str(tmp_path / "b.npy")]) == 2
    assert "manifest.json: missing" in capsys.readouterr().err


def test_bad_stride_argument(tmp_path, kernel, capsys):
    path, _ = kernel
    with pytest.raises(SystemExit):
        cli.main(["weights", "pack", str(path), "--precision", "int8", "--stride", "2",
                  "-o", str(tmp_path / "o")])
    assert "expected SX,SY" in capsys.readouterr().err


def test_benchmark_quick_mode(capsys):
    assert weights_bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for step in ("layout", "compress", "decompress", "unlayout"):
        assert step in out
    assert "round trip exact" in out
