"""``atomcube dma compile``: the chain it writes decodes to the compiler's descriptors, runs the
conversion on the reference executor, and is listed readably; bad input is refused on one line
with nothing written."""

import numpy as np
import pytest
from test_cli_errors import files, refused, run

from atomcube.model.dma import compile as comp
from atomcube.model.dma.descriptor import DESCRIPTOR_BYTES, Program, read_chain
from atomcube.model.dma.executor import execute
from atomcube.model.dmp.layout import DmpLayout
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.weights import WeightSpec
from atomcube.model.sophgo.local import LocalMemory, LocalTensor

DENSE, IMAGE, CHAIN = 0x1000, 0x20000, 0x80000
MEM = 0x100000

CASES = {
    "nhwc": (["--shape", "2,3,4,5", "--dtype", "fp16"],
             lambda unpack: comp.dense_transpose((2, 3, 4, 5), 2, DENSE, IMAGE, unpack)),
    "nvdla-feature": (["--shape", "1,40,3,5", "--precision", "int16", "--fill", "7"],
                      lambda unpack: comp.nvdla_feature(
                          FeatureFormat("int16", (1, 40, 3, 5), fill=7), DENSE, IMAGE, unpack)),
    "sophgo": (["--shape", "2,70,4,4", "--dtype", "int8", "--npus", "8", "--npu-bytes", "4096",
                "--address", "256", "--mode", "4N"],
               lambda unpack: comp.sophgo_local(
                   LocalTensor(LocalMemory(8, 4096), 256, (2, 70, 4, 4), "int8", "aligned",
                               None, "4N"), DENSE, IMAGE, unpack)),
    "dmp": (["--shape", "1,20,4,3", "--transpose"],
            lambda unpack: comp.dmp(DmpLayout((1, 20, 4, 3), True), DENSE, IMAGE, unpack)),
    "nvdla-weights": (["--shape", "40,70,3,3"],
                      lambda unpack: comp.nvdla_weights(WeightSpec("dc", "int8", (40, 70, 3, 3)),
                                                        DENSE, IMAGE, unpack)),
}


@pytest.mark.parametrize("unpack", [False, True], ids=["pack", "unpack"])
@pytest.mark.parametrize("fmt", CASES)
def test_chain_is_the_compilers(tmp_path, fmt, unpack):
    """The .bin, loaded at --chain, is the compiler's program as a chain: it decodes to the same
    descriptors and, run on the executor, moves the same bytes; the listing has a block per
    descriptor and the header says how to run it."""
    extra, compiled = CASES[fmt]
    rc, out, err = run("dma", "compile", "--format", fmt, *extra, "--dense", hex(DENSE),
                       "--image", hex(IMAGE), "--chain", hex(CHAIN), *(["--unpack"] * unpack),
                       "-o", tmp_path / "c.bin")
    assert rc == 0, err
    prog = compiled(unpack)
    raw = (tmp_path / "c.bin").read_bytes()
    assert raw == prog.chain(CHAIN) and len(raw) == len(prog) * DESCRIPTOR_BYTES
    background = np.random.default_rng(3).integers(0, 256, MEM, dtype=np.uint8)
    mem = background.copy()
    mem[CHAIN:CHAIN + len(raw)] = np.frombuffer(raw, np.uint8)
    got = Program(read_chain(mem, CHAIN))
    assert [(d.src, d.dst, d.element_bytes, d.dims, d.pad) for d in got] == \
           [(d.src, d.dst, d.element_bytes, d.dims, d.pad) for d in prog]
    want = background.copy()
    execute(prog, want)
    execute(got, mem)
    assert (mem[:CHAIN] == want[:CHAIN]).all()
    listing = (tmp_path / "c.txt").read_text()
    assert f"run: write 0x{CHAIN:x} to chain_addr, then set ctrl.start_chain" in listing
    for i in range(len(prog)):
        assert f"descriptor {i} at 0x{CHAIN + i * DESCRIPTOR_BYTES:08x}: " \
               f"src 0x{prog.descriptors[i].src:08x}" in listing
    assert f"wrote {tmp_path / 'c.bin'} ({len(prog)} descriptor" in out


@pytest.mark.parametrize("argv, match", [
    (["--chain", "0x80010"], "--chain: 0x80010 is not 128-byte aligned"),
    (["--chain", "0x1000"], "--chain: the chain at 0x1000..0x1080 overlaps what descriptor 0 "
                            "reads"),
    (["--chain", "0x20000"], "overlaps what descriptor 0 writes (0x20000..0x20078)"),
    (["--dense", "0xFFFFFFC0"], "descriptor 0: src: reads up to 0x100000037"),
    (["--addr-width", "16"], "descriptor 0: dst: writes up to"),
    (["--dtype", "bf16"], "--dtype: one of int8, uint8"),
    (["--shape", "2,3,4"], "shape: (N, C, H, W) or (C, H, W)"),   # leading N optional: 3 given
    (["--shape", "2,x,4,5"], "--shape: expected N,C,H,W (integers)"),
    (["--shape", "100000,1000,1000,100"], "--shape: the tensor would be"),
])
def test_refused(tmp_path, argv, match):
    """One line naming the field, exit status 2, nothing written."""
    base = {"--format": "nhwc", "--shape": "2,3,4,5", "--dense": "0x1000", "--image": "0x20000",
            "--chain": "0x80000"}
    for k, v in zip(argv[::2], argv[1::2], strict=True):
        base[k] = v
    if match.startswith("shape:"):
        base["--shape"] = "2,3"
        match = "shape: (N, C, H, W) or (C, H, W)"
    refused("dma", "compile", *[x for kv in base.items() for x in kv], "-o", tmp_path / "c.bin",
            match=match)
    assert files(tmp_path) == {}


def test_weights_over_the_limit_refused_before_allocating(tmp_path):
    refused("dma", "compile", "--format", "nvdla-weights", "--shape", "40000,70000,3,3",
            "--dense", "0", "--image", "0x100000", "--chain", "0x80000", "-o", tmp_path / "w.bin",
            match="--shape: the weight image would be 25,200,000,000 bytes")
    assert files(tmp_path) == {}
