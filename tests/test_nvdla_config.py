"""NVDLA configurations: each preset's geometry, nv_small's formats worked by hand, every
configuration's weight order against a loop written from the guide's rule, and the refusals of
what a configuration lacks."""

import json

import numpy as np
import pytest

from atomcube.model.cli import main
from atomcube.model.dma.compile import nvdla_feature, nvdla_weights
from atomcube.model.dma.executor import execute
from atomcube.model.errors import FormatError
from atomcube.model.nvdla.auxdata import AuxFormat
from atomcube.model.nvdla.config import CONFIGS, ConfigError, NvdlaConfig, config
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.weights import WeightImage, WeightSpec, compress, decompress, plan_job

#: (atomic C, atomic K, memory atom, int8 kernels per group, weight padding), from NVDLA's
#: spec/defs files (nv_full from its nvdlav1 branch)
GEOMETRY = {"nv_small": (8, 8, 8, 8, 8), "nv_small_256": (32, 8, 8, 8, 32),
            "nv_medium_512": (32, 16, 16, 16, 32), "nv_large": (64, 32, 32, 32, 64),
            "nv_full": (64, 32, 32, 32, 128)}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_preset_geometry(name):
    c = config(name)
    ac, ak, atom, kpg, pad = GEOMETRY[name]
    assert (c.atomic_c, c.atomic_k, c.memory_atom) == (ac, ak, atom)
    assert c.kernels_per_group("int8") == kpg and c.weight_align == pad
    assert c.channels_per_atom("int8") == atom
    assert c.to_json() == name and config(c.to_json()) is c
    if name == "nv_full":
        assert c.kernels_per_group("fp16") == 16 and c.channels_per_atom("int16") == 16
        assert c.compression and c.winograd and c.precisions == ("int8", "int16", "fp16")
    else:
        assert not c.compression and not c.winograd and c.precisions == ("int8",)
    assert config(None) is CONFIGS["nv_full"]


# --- nv_small, worked by hand -----------------------------------------------------------------

def test_nv_small_feature_by_hand():
    """int8 (1, 10, 2, 3): 8-byte atoms of 8 channels, two surfaces; line 3 x 8 = 24 bytes,
    surface 2 x 24 = 48, the cube 96 bytes. Element (c 9, h 1, w 2) is surface 1, line 1,
    atom 2, byte 1: 48 + 24 + 16 + 1 = 89."""
    f = FeatureFormat("int8", (1, 10, 2, 3), fill=-1, config="nv_small")
    assert (f.atom, f.line_stride, f.surface_stride, f.cube_stride, f.size) == (8, 24, 48, 96, 96)
    assert f.address(0, 9, 1, 2) == 89
    t = np.arange(60, dtype=np.int8).reshape(1, 10, 2, 3)
    img = f.pack(t)
    assert img.view(np.int8)[89] == t[0, 9, 1, 2]
    assert list(img[:8].view(np.int8)) == list(t[0, :8, 0, 0])            # the first atom
    assert list(img[48:56].view(np.int8)) == [t[0, 8, 0, 0], t[0, 9, 0, 0]] + [-1] * 6
    assert (f.unpack(img) == t).all()
    with pytest.raises(FormatError, match="line_stride: 28 is not a multiple of 8 bytes"):
        FeatureFormat("int8", (1, 10, 2, 3), line_stride=28, config="nv_small")
    FeatureFormat("int8", (1, 10, 2, 3), line_stride=32, config="nv_small")   # 8-aligned: fine


def test_nv_small_weights_by_hand():
    """dc int8 (K 10, C 10, R 1, S 2): groups of 8 kernels then 2; chunks of 8 channels then 2.
    In a group: chunk, R, S, kernel, channel. Group 0 is 8 x 10 x 2 = 160 bytes: the full chunk
    at s*64 + k*8 + c, the last two channels at 128 + s*16 + k*2 + (c-8). Group 1 starts at 160:
    s*16 + (k-8)*8 + c, then 192 + s*4 + (k-8)*2 + (c-8). 200 bytes, already 8-aligned."""
    spec = WeightSpec("dc", "int8", (10, 10, 1, 2), config="nv_small")
    assert (spec.groups, spec.kernels_per_group, spec.image_bytes) == (2, 8, 200)
    k = np.random.default_rng(5).integers(-100, 100, (10, 10, 1, 2)).astype(np.int8)
    img = spec.layout(k).data.view(np.int8)

    def at(kk, c, s):
        if kk < 8:
            return s * 64 + kk * 8 + c if c < 8 else 128 + s * 16 + kk * 2 + c - 8
        return 160 + (s * 16 + (kk - 8) * 8 + c if c < 8 else 32 + s * 4 + (kk - 8) * 2 + c - 8)

    want = np.empty(200, np.int8)
    for kk, c, s in np.ndindex(10, 10, 2):
        want[at(kk, c, s)] = k[kk, c, 0, s]
    assert (img == want).all()
    assert (spec.unlayout(spec.layout(k).data) == k).all()


def test_nv_small_aux_by_hand():
    """int8 processing: ElementPerAtom = atomic K = 8; per-channel bias of 2-byte components,
    10 channels: two 16-byte atoms."""
    f = AuxFormat("bias", "channel", "int8", 2, (10,), config="nv_small")
    assert (f.elements_per_atom, f.atom_bytes, f.size) == (8, 16, 32)
    v = np.arange(10, dtype=np.int16) * 300
    img = f.pack(v)
    assert list(img.view(np.int16)) == list(v) + [0] * 6
    assert (f.unpack(img) == v).all()
    e = AuxFormat("bias", "element", "int8", 1, (3, 2, 3), config="nv_small")
    assert (e.line_stride, e.surface_stride) == (24, 48)


# --- every configuration against the rule as a loop -------------------------------------------

def dc_reference(k: np.ndarray, kpg: int, chunk: int) -> np.ndarray:
    """The direct-convolution order as the guide states it, one element at a time: groups of
    kpg kernels; in a group, channel chunks of ``chunk``, then R, S, kernel, channel."""
    kk, c, r, s = k.shape
    out = []
    for g0 in range(0, kk, kpg):
        for c0 in range(0, c, chunk):
            for ri in range(r):
                for si in range(s):
                    for ki in range(g0, min(g0 + kpg, kk)):
                        out.extend(k[ki, c0:c0 + chunk, ri, si])
    return np.array(out, dtype=k.dtype)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("shape", [(19, 70, 3, 2), (8, 8, 1, 1), (33, 5, 2, 3)])
def test_weight_order_every_config(name, shape):
    cfg = config(name)
    for precision in cfg.precisions:
        spec = WeightSpec("dc", precision, shape, config=cfg)
        k = np.random.default_rng(sum(shape)).integers(-99, 99, shape).astype(spec.dtype)
        data = spec.layout(k).data
        ref = dc_reference(k, cfg.kernels_per_group(precision), cfg.atomic_c)
        assert data.size == -(-ref.nbytes // cfg.weight_align) * cfg.weight_align
        assert (data[:ref.nbytes].view(spec.dtype) == ref).all() and not data[ref.nbytes:].any()
        assert (spec.unlayout(data) == k).all()
        d = WeightSpec("deconv", precision, shape, (2, 1), config=cfg)
        assert (d.unlayout(d.layout(k).data) == k).all()
        assert d.groups == 2 * -(-shape[0] // cfg.kernels_per_group(precision))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_feature_and_dma_every_config(name):
    """Feature data in each configuration's atoms, and the DMA program the compiler makes for
    it, run by the descriptor executor, both ways."""
    cfg = config(name)
    for precision in cfg.precisions:
        fmt = FeatureFormat(precision, (1, 37, 3, 5), config=cfg)
        cpa = cfg.channels_per_atom(precision)
        assert fmt.surfaces == -(-37 // cpa) and fmt.line_stride == 5 * cfg.memory_atom
        t = np.random.default_rng(3).integers(-99, 99, fmt.shape).astype(fmt.dtype)
        image_at = 0x1000
        mem = np.zeros(image_at + fmt.size, np.uint8)
        mem[:t.nbytes] = t.view(np.uint8).ravel()
        execute(nvdla_feature(fmt, 0, image_at), mem)
        assert (mem[image_at:] == fmt.pack(t)).all()
        mem[:t.nbytes] = 0
        execute(nvdla_feature(fmt, 0, image_at, unpack=True), mem)
        assert (mem[:t.nbytes] == t.view(np.uint8).ravel()).all()
        spec = WeightSpec("dc", precision, (11, 13, 1, 3), config=cfg)
        k = np.random.default_rng(4).integers(-99, 99, spec.shape).astype(spec.dtype)
        mem = np.zeros(image_at + spec.image_bytes, np.uint8)
        mem[:k.nbytes] = k.view(np.uint8).ravel()
        execute(nvdla_weights(spec, 0, image_at), mem)
        assert (mem[image_at:] == spec.layout(k).data).all()


def test_image_mode_post_extension_scales_with_atomic_c():
    """Post-extension folds p rows into one chunk: p x C' must fit atomic C (64 on nv_full,
    8 on nv_small)."""
    WeightSpec("image", "int8", (4, 4, 3, 1), post_extension=2, config="nv_small")   # 2x4 = 8
    with pytest.raises(FormatError, match="C. <= 4 .*nv_small.s 8-channel chunk"):
        WeightSpec("image", "int8", (4, 4, 3, 2), post_extension=2, config="nv_small")
    spec = WeightSpec("image", "int8", (9, 2, 5, 2), post_extension=2, config="nv_small")
    k = np.random.default_rng(6).integers(-9, 9, spec.shape).astype(np.int8)
    assert (spec.unlayout(spec.layout(k).data) == k).all()


# --- what a configuration lacks ---------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: WeightSpec("winograd", "int8", (4, 4, 3, 3), config="nv_small"),
     "mode: nv_small has no Winograd convolution"),
    (lambda: WeightSpec("dc", "fp16", (4, 4, 3, 3), config="nv_large"),
     "precision: nv_large computes in int8 only, not fp16"),
    (lambda: FeatureFormat("int16", (1, 4, 3, 3), config="nv_small_256"),
     "precision: nv_small_256 computes in int8 only, not int16"),
    (lambda: FeatureFormat("int8", (2, 4, 3, 3), config="nv_medium_512"),
     "shape.N: nv_medium_512 has no batch mode"),
    (lambda: AuxFormat("eltwise", "element", "int8", 1, (4, 2, 2), config="nv_small"),
     "use: nv_small has no SDP element-wise operands"),
    (lambda: compress(WeightSpec("dc", "int8", (8, 8, 1, 1), config="nv_small")
                      .layout(np.ones((8, 8, 1, 1), np.int8))),
     "config: nv_small has no weight compression"),
    (lambda: decompress(b"", b"\0" * 128, b"\0" * 128,
                        WeightSpec("dc", "int8", (8, 8, 1, 1), config="nv_large")),
     "config: nv_large has no weight compression"),
    (lambda: config("nv_tiny"), "config: must be one of nv_small, "),
    (lambda: NvdlaConfig("mine", atomic_c=12, atomic_k=8, memory_atom=8),
     "atomic_c: must be a power of two"),
])
def test_refusals(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_custom_config_round_trips():
    mine = NvdlaConfig("mine", atomic_c=16, atomic_k=4, memory_atom=16,
                       precisions=("int8", "fp16"), compression=True)
    spec = WeightSpec("dc", "fp16", (5, 20, 1, 1), config=mine)
    assert spec.kernels_per_group == 2 and spec.image_bytes == 5 * 20 * 2 + 24   # pad to 32
    back = WeightSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and back.config == mine
    fmt = FeatureFormat("fp16", (1, 9, 2, 2), config=mine)
    assert FeatureFormat.from_dict(json.loads(json.dumps(fmt.to_dict()))) == fmt
    # compression exists, but the decompressor expands nv_full's groups only
    k = np.ones(spec.shape, np.float16)
    packed = compress(spec.layout(k))
    assert (decompress(packed.weight, packed.wmb, packed.wgs, spec)[:spec.dense_bytes] ==
            spec.layout(k).data[:spec.dense_bytes]).all()
    with pytest.raises(ConfigError, match="decompressor expands nv_full's groups"):
        plan_job(packed)
    assert isinstance(spec.layout(k), WeightImage)


def test_records_without_config_are_nv_full(tmp_path, capsys):
    """A sidecar written without a config field reads as nv_full's; the CLI writes the field and
    refuses what the configuration lacks in one line, exit 2, nothing written."""
    t = np.arange(2 * 10 * 2 * 3, dtype=np.int8).reshape(2, 10, 2, 3)
    np.save(tmp_path / "t.npy", t)
    assert main(["layout", "convert", str(tmp_path / "t.npy"), "--to", "nvdla-feature",
                 "-o", str(tmp_path / "t.bin")]) == 0
    side = json.loads((tmp_path / "t.json").read_text())
    assert side["config"] == "nv_full"
    del side["config"]
    (tmp_path / "t.json").write_text(json.dumps(side))
    assert main(["layout", "convert", str(tmp_path / "t.bin"), "-o", str(tmp_path / "b.npy")]) == 0
    assert (np.load(tmp_path / "b.npy") == t).all()
    capsys.readouterr()
    assert main(["layout", "convert", str(tmp_path / "t.npy"), "--to", "nvdla-feature",
                 "--config", "nv_small", "-o", str(tmp_path / "s.bin")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["atomcube layout convert: shape.N: nv_small has no batch mode "
                   "(BATCH_DISABLE)"]
    assert not (tmp_path / "s.bin").exists()
    np.save(tmp_path / "k.npy", np.ones((8, 8, 1, 1), np.int8))
    assert main(["weights", "pack", str(tmp_path / "k.npy"), "--precision", "int8",
                 "--config", "nv_small", "--compress", "-o", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["atomcube weights pack: --compress: nv_small has no weight compression "
                   "(WEIGHT_COMPRESSION_DISABLE)"] and not (tmp_path / "w").exists()
    assert main(["weights", "pack", str(tmp_path / "k.npy"), "--precision", "int8",
                 "--config", "nv_small", "-o", str(tmp_path / "w")]) == 0
    assert json.loads((tmp_path / "w" / "manifest.json").read_text())["kernels_per_group"] == 8
    assert main(["weights", "unpack", str(tmp_path / "w"), "-o", str(tmp_path / "k2.npy")]) == 0


def test_configs_command(capsys):
    assert main(["configs"]) == 0
    out = capsys.readouterr().out
    assert "nv_small " in out and "compression, winograd, batch" in out
    assert main(["configs", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["nv_small"]["kernels_per_group"] == {"int8": 8}
    assert d["nv_full"]["weight_align"] == 128
