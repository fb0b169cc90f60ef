"""`atomcube net`: ONNX layers read and folded, quantised, pruned, laid out per mode, compressed
where it pays, the memory plan, and the report's figures against an independent computation on
a small hand-made network and on a real pretrained one (PP-OCR's classifier)."""

import json
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from atomcube.model.cli import main
from atomcube.model.net.flow import Options, build_network
from atomcube.model.net.graph import NetError, example, read_onnx
from atomcube.model.net.quant import prune_masks
from atomcube.model.nvdla.auxdata import AuxFormat
from atomcube.model.nvdla.feature import FeatureFormat
from atomcube.model.nvdla.weights import WeightSpec, decompress

RNG = np.random.default_rng(7)
W0 = RNG.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)
B0 = RNG.normal(0, 0.1, 8).astype(np.float32)
BN = [RNG.uniform(0.5, 1.5, 8), RNG.normal(0, 0.1, 8), RNG.normal(0, 0.1, 8),
      RNG.uniform(0.5, 2, 8)]
SLOPE = RNG.uniform(0, 0.3, 8).astype(np.float32)
W1 = RNG.normal(0, 0.2, (16, 8, 3, 3)).astype(np.float32)
ADD1 = RNG.normal(0, 0.1, 16).astype(np.float32)
W2 = RNG.normal(0, 0.2, (16, 1, 3, 3)).astype(np.float32)
W3 = RNG.normal(0, 0.2, (16, 4, 2, 2)).astype(np.float32)        # ConvTranspose: (C in, K out)
W4 = RNG.normal(0, 0.2, (10, 4)).astype(np.float32)
B4 = RNG.normal(0, 0.1, 10).astype(np.float32)


def tiny_model(path, quantised=False, free=False):
    """conv(3->8, bias) -> BN -> PRelu -> conv 3x3 (+ per-channel Add) -> Relu -> depthwise
    conv, stride 2 -> ConvTranspose 2x2 stride 2 -> global pool -> flatten -> Gemm."""
    init = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("w0", W0), ("b0", B0), ("bn_s", BN[0]), ("bn_b", BN[1]), ("bn_m", BN[2]),
        ("bn_v", BN[3]), ("slope", SLOPE.reshape(8, 1, 1)), ("add1", ADD1.reshape(1, 16, 1, 1)),
        ("w2", W2), ("w3", W3), ("w4", W4), ("b4", B4))]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["t0"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["t0", "bn_s", "bn_b", "bn_m", "bn_v"],
                              ["t1"], epsilon=1e-5),
             helper.make_node("PRelu", ["t1", "slope"], ["t2"])]
    if quantised:
        q = np.clip(np.rint(W1 / 0.01), -127, 127).astype(np.int8)
        init += [numpy_helper.from_array(q, "w1q"),
                 numpy_helper.from_array(np.full(16, 0.01, np.float32), "w1s"),
                 numpy_helper.from_array(np.zeros(16, np.int8), "w1z"),
                 numpy_helper.from_array(np.arange(16, dtype=np.int32) * 100, "b1q"),
                 numpy_helper.from_array(np.float32(0.001), "b1s")]
        nodes += [helper.make_node("DequantizeLinear", ["w1q", "w1s", "w1z"], ["w1"], axis=0),
                  helper.make_node("DequantizeLinear", ["b1q", "b1s"], ["b1"])]
    else:
        init.append(numpy_helper.from_array(W1, "w1"))
    conv1 = ["t2", "w1", "b1"] if quantised else ["t2", "w1"]
    nodes += [helper.make_node("Conv", conv1, ["t3"], pads=[1, 1, 1, 1]),
              helper.make_node("Add", ["t3", "add1"], ["t4"]),
              helper.make_node("Relu", ["t4"], ["t5"]),
              helper.make_node("Conv", ["t5", "w2"], ["t6"], pads=[1, 1, 1, 1], group=16,
                               strides=[2, 2]),
              helper.make_node("ConvTranspose", ["t6", "w3"], ["t7"], strides=[2, 2]),
              helper.make_node("GlobalAveragePool", ["t7"], ["t8"]),
              helper.make_node("Flatten", ["t8"], ["t9"]),
              helper.make_node("Gemm", ["t9", "w4", "b4"], ["y"], transB=1)]
    dims = ["n", 3, "h", "w"] if free else [1, 3, 16, 16]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def quantise_ref(w, qmax=127):
    """Per-kernel symmetric quantisation written out again, independently of the flow, in the
    float32 arithmetic docs/net.md states."""
    w = w.astype(np.float32)
    peak = np.abs(w.reshape(len(w), -1)).max(axis=1)
    s = np.where(peak > 0, peak / np.float32(qmax), np.float32(1)).astype(np.float32)
    return np.clip(np.rint(w / s[:, None, None, None]), -qmax, qmax).astype(
        np.int8 if qmax == 127 else np.int16)


def stored_dense(buf, regions, name, compressed, spec):
    """The dense image of one surface from weights.bin (decompressed if stored compressed)."""
    blob = {k: buf[regions[f"{name}/{k}"].offset:][:regions[f"{name}/{k}"].size]
            for k in (("weight", "wmb", "wgs") if compressed else ("weight",))}
    if not compressed:
        assert f"{name}/wmb" not in regions
        return blob["weight"]
    return decompress(blob["weight"], blob["wmb"], blob["wgs"], spec)


def test_read_and_fold(tmp_path):
    net = read_onnx(tiny_model(tmp_path / "t.onnx"))
    ops = [(la.op, la.weight.shape, la.group, la.folded) for la in net.layers]
    assert ops == [("conv", (8, 3, 3, 3), 1, ["BatchNormalization", "PRelu"]),
                   ("conv", (16, 8, 3, 3), 1, ["Add"]),
                   ("conv", (16, 1, 3, 3), 16, []),
                   ("deconv", (4, 16, 2, 2), 1, []),
                   ("fc", (10, 4, 1, 1), 1, [])]
    c0, c1, dw, de, fc = net.layers
    assert c0.from_pixels and not c1.from_pixels
    assert (c0.input_shape, c0.output_shape) == ((1, 3, 16, 16), (1, 8, 16, 16))
    mul = BN[0] / np.sqrt(BN[3] + 1e-5)
    assert np.allclose(c0.bn_mul, mul) and np.allclose(c0.bn_add, BN[1] - BN[2] * mul)
    assert np.allclose(c0.bias, B0) and np.allclose(c0.prelu, SLOPE)
    assert np.allclose(c1.bias, ADD1) and c1.output == "t4"          # Relu is not folded
    assert dw.stride == (2, 2) and dw.output_shape == (1, 16, 8, 8)
    assert np.array_equal(de.weight, W3.transpose(1, 0, 2, 3)) and de.output_shape == (1, 4, 16,
                                                                                        16)
    assert np.array_equal(fc.weight[:, :, 0, 0], W4) and np.allclose(fc.bias, B4)
    assert fc.input_shape == (1, 4, 1, 1) and fc.output_shape == (1, 10, 1, 1)


@pytest.mark.parametrize("config, precision", [("nv_full", "int8"), ("nv_full", "fp16"),
                                               ("nv_full", "int16"), ("nv_small", "int8"),
                                               ("nv_large", "int8")])
def test_surfaces_match_the_formats(tmp_path, config, precision):
    """Every weight region of weights.bin is the layout of the independently quantised kernels
    in the mode the layer takes; auxiliary operands and the activation plan likewise."""
    net = read_onnx(tiny_model(tmp_path / "t.onnx"))
    build = build_network(net, Options(config, precision))
    modes = [b.mode for b in build.layers]
    wg = "winograd" if config == "nv_full" else "dc"
    assert modes == ["image", wg, "dc", "deconv", "dc"]
    regions = {r.name: r for r in build.weight_regions}
    buf = build.weight_buffer
    for b in build.layers:
        w = b.layer.weight
        q = w.astype(np.float16) if precision == "fp16" else \
            quantise_ref(w, 127 if precision == "int8" else 32767)
        kw = {"deconv": {"stride": (2, 2)}, "image": {"pixel_channels": 4},
              "winograd": {"scale": b.winograd_scale}}.get(b.mode, {})
        parts = np.split(q, b.layer.group) if b.layer.group > 1 else [q]
        for g, part in enumerate(parts):
            spec = WeightSpec(b.mode, precision, part.shape, config=config, **kw)
            name = f"{b.layer.name}.g{g}" if b.layer.group > 1 else b.layer.name
            r = regions[f"{name}/weight"]
            assert r.offset % 256 == 0 and r.format == spec.to_dict()
            assert np.array_equal(stored_dense(buf, regions, name, b.compressed, spec),
                                  spec.layout(part).data)
    bias = regions[f"{build.layers[0].layer.name}/bias"]
    fmt = AuxFormat("bias", "channel", precision, 2, (8,), config=config)
    got = fmt.unpack(buf[bias.offset:bias.offset + bias.size]).astype(np.float64)
    scale = 1.0 if precision == "fp16" else np.abs(B0).max() / 32767
    assert np.allclose(got * scale, B0, atol=scale if precision != "fp16" else 1e-3)
    plan = build.activation_regions
    assert plan[0].format["format"] == "nvdla-pixel" and plan[0].size >= 16 * 16 * 4
    for r in plan[1:]:
        f = FeatureFormat.from_dict(r.format)
        assert r.size == f.size and f.config.name == config
    ends = [(r.offset, r.offset + r.size) for r in plan]
    assert all(a % 256 == 0 for a, _ in ends)
    assert all(e0 <= a1 for (_, e0), (a1, _) in zip(ends, ends[1:], strict=False))
    # every layer's input and output once: the Relu between t4 and t5 and the pooling between
    # t7 and t9 run elsewhere
    assert [r.name for r in plan] == ["x", "t2", "t4", "t5", "t6", "t7", "t9", "y"]


def test_compression_where_it_pays(tmp_path):
    """Pruned hard, the bigger layers compress; the stored surfaces decompress to the layout."""
    net = read_onnx(tiny_model(tmp_path / "t.onnx"))
    build = build_network(net, Options("nv_full", "int8", prune=0.9, winograd=False))
    regions = {r.name: r for r in build.weight_regions}
    buf = build.weight_buffer
    for b in build.layers:
        assert b.compressed == (b.compressed_bytes < b.dense_bytes)
        for g, s in enumerate(b.surfaces):
            name = f"{b.layer.name}.g{g}" if len(b.surfaces) > 1 else b.layer.name
            assert np.array_equal(stored_dense(buf, regions, name, b.compressed, s.spec), s.data)
    assert any(b.compressed for b in build.layers)
    always = build_network(net, Options("nv_full", "int8", compress="always"))
    assert all(b.compressed for b in always.layers)
    assert any("break-even" in w for b in always.layers for w in b.warnings)
    never = build_network(net, Options("nv_full", "int8", compress="never"))
    assert not any(b.compressed for b in never.layers)


def test_prune_masks():
    ws = [RNG.normal(0, s, n) for s, n in ((1, 1000), (0.1, 500), (3, 37))]
    for m, w in zip(prune_masks(ws, 0.4, "layer"), ws, strict=True):
        assert (~m).sum() == int(0.4 * w.size)
        assert np.abs(w[~m]).max() <= np.abs(w[m]).min()
    g = prune_masks(ws, 0.4, "global")
    assert sum((~m).sum() for m in g) == int(0.4 * 1537)
    kept = np.concatenate([np.abs(w[m]) for m, w in zip(g, ws, strict=True)])
    cut = np.concatenate([np.abs(w[~m]) for m, w in zip(g, ws, strict=True)])
    assert cut.max() <= kept.min()
    assert (~g[1]).mean() > (~g[0]).mean()          # small weights lose more globally


def test_errors_per_layer(tmp_path):
    net = read_onnx(tiny_model(tmp_path / "t.onnx"))
    build = build_network(net, Options("nv_full", "int8", prune=0.5))
    for b in build.layers:
        w = b.layer.weight.astype(np.float64)
        kept = np.abs(w).ravel() >= np.sort(np.abs(w).ravel())[int(0.5 * w.size)]
        pruned = np.where(kept.reshape(w.shape), w, 0)
        assert b.prune_error == pytest.approx(np.linalg.norm(w - pruned) / np.linalg.norm(w),
                                              rel=1e-6)
        assert b.total_error >= b.prune_error * 0.999


def test_quantised_model_keeps_its_scales(tmp_path):
    net = read_onnx(tiny_model(tmp_path / "q.onnx", quantised=True))
    layer = net.layers[1]
    assert layer.weight.dtype == np.int8 and np.allclose(layer.scales, 0.01)
    # its int32 bias dequantised, then the per-channel Add folded onto it
    assert np.allclose(layer.bias, np.arange(16) * 0.1 + ADD1)
    build = build_network(net, Options("nv_small", "int8"))
    b = build.layers[1]
    assert np.allclose(b.scales, 0.01)
    spec = b.surfaces[0].spec
    assert np.array_equal(spec.unlayout(b.surfaces[0].data), layer.weight)


def test_refusals(tmp_path, capsys):
    model = tiny_model(tmp_path / "t.onnx")
    free = tiny_model(tmp_path / "f.onnx", free=True)
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    cases = [
        (["net", str(free), "-o", str(tmp_path / "o")],
         "--input-shape: the model's input x has free dimensions; give its N,C,H,W"),
        (["net", str(tmp_path / "bad.onnx"), "-o", str(tmp_path / "o")],
         "is not an ONNX model"),
        (["net", str(model), "--config", "nv_small", "--precision", "fp16", "-o",
          str(tmp_path / "o")], "--precision: nv_small computes in int8 only, not fp16"),
        (["net", str(model), "--config", "nv_large", "--compress", "always", "-o",
          str(tmp_path / "o")], "--compress: nv_large has no weight compression"),
        (["net", str(free), "--input-shape", "1,3,16", "-o", str(tmp_path / "o")],
         "--input-shape: (N, C, H, W), not (1, 3, 16)"),
        (["net", str(free), "--input-shape", "1,5,16,16", "-o", str(tmp_path / "o")],
         "--input-shape: dimension 1 of the input x is fixed at 3, not 5"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert not (tmp_path / "o").exists()
    assert main(["net", str(free), "--input-shape", "1,3,32,32", "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "net.json").read_text())
    assert s["layers"][0]["mode"] == "image" and s["inputs"] == {"x": [1, 3, 32, 32]}


def test_real_network_report(tmp_path):
    """PP-OCR's pretrained text direction classifier, from the wheel the setup installs: the
    report's figures against a computation straight from the ONNX file."""
    path, shape = example("ppocr-cls")
    t0 = time.perf_counter()
    assert main(["net", "ppocr-cls", "--prune", "0.5", "-o", str(tmp_path / "cls")]) == 0
    took = time.perf_counter() - t0
    s = json.loads((tmp_path / "cls" / "net.json").read_text())
    g = onnx.load(str(path)).graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inits.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in g.node
                  if n.op_type == "Constant"})          # this exporter's weights are Constants
    weights = [(n, inits[n.input[1]]) for n in g.node
               if n.op_type in ("Conv", "MatMul") and n.input[1] in inits]
    assert len(s["layers"]) == len(weights) == 54
    assert s["totals"]["parameters"] == sum(w.size for _, w in weights) == 124072
    zeros = dense = compressed = 0
    for (n, w), row in zip(weights, s["layers"], strict=True):
        if n.op_type == "MatMul":
            w = w.T[:, :, None, None]
        group = next((a.i for a in n.attribute if a.name == "group"), 1)
        flat = np.abs(w.astype(np.float64)).ravel()
        keep = np.ones(flat.size, bool)
        keep[np.argsort(flat, kind="stable")[:int(0.5 * flat.size)]] = False
        q = quantise_ref(np.where(keep.reshape(w.shape), w, 0))
        z = int((q == 0).sum())
        assert row["zeros"] == z, row["name"]
        k, c, r, s_ = w.shape
        per = (4 if row["mode"] == "image" else c) * r * s_          # image: C padded to 4
        kg = k // group
        layer_dense = layer_comp = 0
        for part in np.split(q, group):
            elems = kg * per
            nz = int(np.count_nonzero(part))
            layer_dense += -(-elems // 128) * 128
            wmb, wgs = -(-elems // 8), 4 * -(-kg // 32)
            layer_comp += sum(-(-v // 128) * 128 for v in (nz, wmb, wgs))
        assert (row["dense_bytes"], row["compressed_bytes"]) == (layer_dense, layer_comp)
        assert row["compressed"] == (layer_comp < layer_dense)
        zeros, dense, compressed = zeros + z, dense + layer_dense, compressed + layer_comp
    t = s["totals"]
    assert (t["zeros"], t["dense_bytes"], t["compressed_bytes"]) == (zeros, dense, compressed)
    md = (tmp_path / "cls" / "report.md").read_text()
    assert f"dense {dense:,} bytes, compressed {compressed:,}" in md
    assert (tmp_path / "cls" / "report.png").stat().st_size > 10_000
    assert (tmp_path / "cls" / "weights.bin").stat().st_size == t["weight_buffer"]
    assert took < 20, f"the flow took {took:.1f} s"


def test_missing_file():
    with pytest.raises(NetError):
        read_onnx("no-such.onnx")
