"""The ``atomcube`` command.

    atomcube regs [MAP ...] [--format md|c|json] [--out DIR]
    atomcube lut fit FUNCTION --in-frac N --out-frac N [--plot PNG] [--json FILE] ...
    atomcube weights pack KERNEL.npy --mode M --precision P [--compress] -o DIR
    atomcube weights unpack DIR -o KERNEL.npy
    atomcube layout convert TENSOR.npy --to nvdla-feature|sophgo|dmp [options] -o IMAGE.bin
    atomcube layout convert IMAGE.bin -o TENSOR.npy          (reads IMAGE.json)
    atomcube layout explain --format F --shape N,C,H,W [options]
    atomcube board info|check|peek|poke|load|dump --port DEV [--baud N] ...   (pyserial)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .report import table


def _regs(args) -> int:
    from .registers import MAPS

    names = args.maps or list(MAPS)
    for n in names:
        if n not in MAPS:
            print(f"atomcube regs: no register map named {n!r} (maps: {', '.join(MAPS)})",
                  file=sys.stderr)
            return 2
    render = {
        "md": (".md", lambda m: m.markdown()),
        "c": (".h", lambda m: m.c_header()),
        "json": (".json", lambda m: json.dumps(m.to_json(), indent=2) + "\n"),
    }
    formats = ["md", "c"] if args.format is None and args.out else [args.format or "md"]
    for n in names:
        for fmt in formats:
            suffix, fn = render[fmt]
            text = fn(MAPS[n])
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                path = args.out / f"{n}{suffix}"
                if not path.exists() or path.read_text() != text:
                    path.write_text(text)
                    print(f"wrote {path}")
            else:
                sys.stdout.write(text)
    return 0


def _lut_fit(args) -> int:
    from .nvdla.lut_fit import NVDLA_TABLES, Formats, fit, lrn, nvdla_baseline, plot
    from .registers.lut import lut_regmap, program

    try:
        fmt = Formats(args.in_frac, args.out_frac, args.flavor)
        if args.function == "lrn":
            func, dom = lrn(*args.lrn), (0.0, float("inf"))
        else:
            func, dom = args.function, None
        if args.x_min is not None or args.x_max is not None:
            dom = (args.x_min if args.x_min is not None else -float("inf"),
                   args.x_max if args.x_max is not None else float("inf"))
        progress = (lambda s: print(f"  {s}", file=sys.stderr, flush=True))
        print(f"fitting {args.function} ({args.layout}, raw table {args.raw.upper()}, "
              f"LE {args.le_mode}) ...", file=sys.stderr, flush=True)
        res = fit(func, fmt, layout=args.layout, raw=args.raw, le_mode=args.le_mode,
                  domain=dom, progress=progress)
    except ValueError as e:
        print(f"atomcube lut fit: {e}", file=sys.stderr)
        return 2
    cfg = res.config
    m = lut_regmap(fmt.flavor)
    writes = program(cfg, fmt.flavor)
    rows = []
    seen = set()
    for name, fields in writes:
        if name in ("lut_access_cfg", "lut_access_data") or name in seen:
            continue
        seen.add(name)
        word = m[name].encode(fields)
        rows.append((name, f"0x{m[name].offset:03x}", f"0x{word:08x}",
                     ", ".join(f"{k}={v}" for k, v in _signed_view(cfg, name, fields).items())))
    print(table(("register", "offset", "value", "fields"), rows))
    print(f"LE table: {len(cfg.le_table)} entries, {cfg.le_table.min()} .. {cfg.le_table.max()}; "
          f"LO table: {len(cfg.lo_table)} entries, {cfg.lo_table.min()} .. {cfg.lo_table.max()}")
    r = res.report
    line = (f"max error {r.max_lsb:.3f} LSB ({r.max_abs:.3g}) at x = {r.worst_x:.6g}; "
            f"mean {r.mean_lsb:.4f} LSB over {r.samples:,} inputs")
    base = None
    if isinstance(func, str) and func in NVDLA_TABLES and fmt.flavor == "sdp":
        base = nvdla_baseline(func, fmt)
        line += (f"\nNVDLA's own table: max {base.report.max_lsb:.3f} LSB "
                 f"(ours is {r.max_lsb / base.report.max_lsb:.0%} of it)")
    print(line)
    if args.json:
        doc = {"function": args.function, "flavor": fmt.flavor, "in_frac": fmt.in_frac,
               "out_frac": fmt.out_frac, "layout": res.layout, "report": r.row(),
               "config": cfg.to_dict(),
               "writes": [{"register": n, "fields": f} for n, f in writes]}
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json} ({len(writes)} register writes)")
    if args.plot:
        try:
            plot(res, func if not isinstance(func, str) else args.function, args.plot, base)
        except RuntimeError as e:
            print(f"atomcube lut fit: {e}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}")
    return 0


def _signed_view(cfg, name, fields):
    """Register fields as the configuration means them (signed where signed)."""
    view = dict(fields)
    for k in view:
        full = f"{name.split('_')[0]}_{k}" if name.endswith(("scale", "shift")) else k
        if hasattr(cfg, full) and not full.endswith("table"):
            view[k] = getattr(cfg, full)
    if name.replace("_low", "").replace("_high", "") in ("le_start", "le_end", "lo_start",
                                                           "lo_end"):
        view = {"value": getattr(cfg, name.replace("_low", "").replace("_high", ""))}
    return view


def _load_array(path: Path, key: str | None):
    import numpy as np

    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if path.suffix not in (".npy", ".npz"):
        raise ValueError(f"{path}: expected a .npy or .npz file")
    data = np.load(path, allow_pickle=False)
    if path.suffix == ".npy":
        if key:
            raise ValueError("--key: only .npz files hold named arrays")
        return data
    names = list(data.files)
    if key is None:
        if len(names) != 1:
            raise ValueError(f"{path}: holds {len(names)} arrays ({', '.join(names)}); "
                             f"choose one with --key")
        key = names[0]
    if key not in names:
        raise ValueError(f"--key: {path} has no array {key!r} (it has {', '.join(names)})")
    return data[key]


def _pair(text: str) -> tuple[int, int]:
    try:
        sx, sy = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SX,SY (two integers), not {text!r}") from None
    return sx, sy


def _weights_pack(args) -> int:
    import time

    from .nvdla.weights import WeightError, WeightSpec, compress, plan_job

    def step(msg):
        print(msg, file=sys.stderr, flush=True)

    try:
        kernels = _load_array(args.kernel, args.key)
        if kernels.ndim != 4:
            raise WeightError("kernels", f"must be OIHW (K, C, R, S), rank 4; {args.kernel} "
                                         f"holds rank {kernels.ndim}, shape {kernels.shape}")
        spec = WeightSpec(args.mode, args.precision, kernels.shape, args.stride or (1, 1),
                          args.pixel_channels, args.post_extension, args.scale)
        kernels = spec.prepare(kernels)       # dtype and range errors before any progress line
        t0 = time.perf_counter()
        step(f"laying out {kernels.size:,} weights ({args.mode}, {args.precision}) ...")
        image = spec.layout(kernels)
        packed = None
        if args.compress:
            step(f"  {time.perf_counter() - t0:.2f} s; compressing ...")
            packed = compress(image)
            job = plan_job(packed, base=args.base, dst=True)
        step(f"  {time.perf_counter() - t0:.2f} s; writing {args.out}/")
    except (ValueError, OSError) as e:
        print(f"atomcube weights pack: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    files = {}
    if packed is None:
        files["weight.bin"] = image.data
    else:
        files.update({"weight.bin": packed.weight, "wmb.bin": packed.wmb, "wgs.bin": packed.wgs})
    for name, data in files.items():
        (args.out / name).write_bytes(data.tobytes())
    manifest = {
        "format": "atomcube-nvdla-weights", "version": 1, **spec.to_dict(),
        "laid_shape": list(spec.laid_shape), "compressed": packed is not None,
        "groups": spec.groups, "kernels_per_group": spec.kernels_per_group,
        "sets": spec.sets, "element_bytes": spec.element_bytes,
        "bytes_per_kernel": spec.bytes_per_kernel, "dense_bytes": spec.dense_bytes,
        "image_bytes": spec.image_bytes,
        "alignment": {"address": 256, "size": 128},
        "files": {n: d.size for n, d in files.items()},
    }
    rows = [("dense image", f"{spec.image_bytes:,}", "1.00", "weight.bin" if packed is None
             else "-")]
    if packed is not None:
        st_ = packed.stats()
        manifest["wgs"] = [int(v) for v in packed.group_sizes]
        manifest["stats"] = {"density": round(st_.overall_density, 6),
                             "bytes_saved": st_.bytes_saved, "ratio": round(st_.ratio, 6)}
        manifest["job"] = job.to_dict()
        for label, name in (("packed weights", "weight.bin"), ("WMB", "wmb.bin"),
                            ("WGS", "wgs.bin")):
            size = files[name].size
            rows.append((label, f"{size:,}", f"{size / spec.image_bytes:.2f}", name))
        rows.append(("compressed total", f"{st_.compressed_bytes:,}",
                     f"{st_.compressed_bytes / spec.image_bytes:.2f}", "-"))
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(table(("surface", "bytes", "of dense", "file"), rows))
    k, c, r, s = spec.laid_shape
    line = (f"{spec.groups} groups of up to {spec.kernels_per_group} kernels, "
            f"{spec.bytes_per_kernel:,} bytes per kernel ({c} x {r} x {s} laid out"
            f"{f', {spec.sets} sets' if spec.sets > 1 else ''})")
    if packed is not None:
        line += (f"; density {st_.overall_density:.1%}, compression ratio {st_.ratio:.2f}, "
                 f"{st_.bytes_saved:,} bytes saved")
    print(line)
    print(f"wrote {', '.join(files)} and manifest.json to {args.out}/")
    return 0


def _weights_unpack(args) -> int:
    import numpy as np

    from .nvdla.weights import WeightSpec, decompress

    try:
        mpath = args.folder / "manifest.json"
        if not mpath.exists():
            raise ValueError(f"{mpath}: missing (is {args.folder} a 'weights pack' folder?)")
        manifest = json.loads(mpath.read_text())
        if manifest.get("format") != "atomcube-nvdla-weights":
            raise ValueError(f"{mpath}: not an atomcube weights manifest")
        spec = WeightSpec.from_dict(manifest)
        blobs = {}
        for name, size in manifest["files"].items():
            data = np.fromfile(args.folder / name, dtype=np.uint8)
            if data.size != size:
                raise ValueError(f"{args.folder / name}: {data.size} bytes, the manifest says "
                                 f"{size}")
            blobs[name] = data
        if manifest["compressed"]:
            dense = decompress(blobs["weight.bin"], blobs["wmb.bin"], blobs["wgs.bin"], spec)
        else:
            dense = blobs["weight.bin"]
        kernels = spec.unlayout(dense)
    except (ValueError, KeyError, OSError) as e:
        what = f"manifest has no {e}" if isinstance(e, KeyError) else str(e)
        print(f"atomcube weights unpack: {what}", file=sys.stderr)
        return 2
    np.save(args.out, kernels)
    note = (" (Winograd: the 4x4 transformed kernels; G g G^T and its cast do not invert)"
            if spec.mode == "winograd" else "")
    print(f"wrote {args.out}: {kernels.dtype} {tuple(kernels.shape)}{note}")
    return 0


def _layout_format(args, shape):
    """The format object the layout options describe, for a tensor of ``shape``."""
    if args.format == "nvdla-feature":
        from .nvdla.feature import FeatureFormat

        return FeatureFormat(args.precision or "int8", shape, args.line_stride,
                             args.surface_stride, args.cube_stride, args.fill)
    if args.format == "nvdla-pixel":
        from .nvdla.pixel import PixelImage

        if args.pixel_format is None:
            raise ValueError("--pixel-format: say which pixel format (e.g. T_A8B8G8R8)")
        if len(shape) == 4 and shape[0] != 1:
            raise ValueError(f"a pixel image is one (C, H, W) tensor, not a batch of {shape[0]}")
        return PixelImage(args.pixel_format, shape[-1], shape[-2], args.x_offset,
                          args.line_stride, args.uv_line_stride, args.sign, None, int(args.fill))
    if args.format == "sophgo":
        from .sophgo.local import LocalMemory, LocalTensor

        return LocalTensor(LocalMemory(args.npus, args.npu_bytes), args.address, shape,
                           args.dtype or "fp32", args.layout, None, args.mode)
    from .dmp.layout import DmpLayout

    return DmpLayout(shape, args.transpose, args.dtype or "fp16", not args.no_chunks)


def _from_sidecar(d):
    kind = d.get("format")
    if kind == "nvdla-feature":
        from .nvdla.feature import FeatureFormat

        return FeatureFormat.from_dict(d)
    if kind == "nvdla-pixel":
        from .nvdla.pixel import PixelImage

        return PixelImage.from_dict(d)
    if kind == "sophgo-local":
        from .sophgo.local import LocalTensor

        return LocalTensor.from_dict(d)
    if kind == "dmp":
        from .dmp.layout import DmpLayout

        return DmpLayout.from_dict(d)
    raise ValueError(f"sidecar: unknown format {kind!r}")


def _layout_convert(args) -> int:
    import numpy as np

    try:
        if args.input.suffix == ".bin":
            side = args.sidecar or args.input.with_suffix(".json")
            if not side.exists():
                raise ValueError(f"{side}: missing; give the sidecar with --sidecar")
            fmt = _from_sidecar(json.loads(side.read_text()))
            data = np.fromfile(args.input, dtype=np.uint8)
            if fmt.to_dict()["format"] == "sophgo-local":
                lm = fmt.memory
                if data.size != lm.size:
                    raise ValueError(f"{args.input}: {data.size} bytes, a local memory image "
                                     f"of {lm.npus} NPUs x {lm.npu_bytes} is {lm.size}")
                tensor = fmt.load(data.reshape(lm.npus, lm.npu_bytes))
            else:
                tensor = fmt.unpack(data)
            np.save(args.out, tensor)
            print(f"wrote {args.out}: {tensor.dtype} {tuple(tensor.shape)}")
            return 0
        if args.to is None:
            raise ValueError("--to: say which format to convert the tensor to")
        tensor = _load_array(args.input, args.key)
        if tensor.ndim == 3:
            tensor = tensor[None]
        if tensor.ndim != 4:
            raise ValueError(f"{args.input}: tensors are NCHW (rank 4) or CHW (rank 3), not "
                             f"rank {tensor.ndim}")
        args.format = args.to
        fmt = _layout_format(args, tensor.shape)
        if args.to == "nvdla-pixel":
            image = fmt.pack(tensor[0])
        elif args.to == "sophgo":
            image = fmt.memory.empty()
            fmt.store(image, tensor)
            image = image.reshape(-1)
        else:
            image = fmt.pack(tensor)
    except (ValueError, OSError) as e:
        print(f"atomcube layout convert: {e}", file=sys.stderr)
        return 2
    args.out.write_bytes(image.tobytes())
    side = args.out.with_suffix(".json")
    side.write_text(json.dumps(fmt.to_dict(), indent=1) + "\n")
    print(f"wrote {args.out} ({image.size:,} bytes) and {side}")
    return 0


def _layout_explain(args) -> int:
    import numpy as np

    try:
        shape = tuple(int(v) for v in args.shape.split(","))
        fmt = _layout_format(args, shape)
    except ValueError as e:
        print(f"atomcube layout explain: {e}", file=sys.stderr)
        return 2
    full = fmt.shape if len(fmt.shape) == 4 else (1, *fmt.shape)
    idx = np.meshgrid(*[np.arange(v) for v in full], indexing="ij")
    flat = [i.ravel() for i in idx]
    sophgo = args.format == "sophgo"
    eb = fmt.element_bytes
    if sophgo:
        npu, off = fmt.locate(*flat)
        key = npu.astype(np.int64) * fmt.memory.npu_bytes + off
    elif args.format == "nvdla-feature":
        key = fmt.address(*flat)
    else:
        key = fmt.offset(*flat)
    order = np.argsort(key, kind="stable")
    names = "DCHW" if args.format == "dmp" else "NCHW"
    rows, i = [], 0
    while i < order.size and len(rows) < args.limit:
        j, lead = i, None
        # a run: consecutive addresses, the same one coordinate counting up by one each step
        while j + 1 < order.size:
            a, b = order[j], order[j + 1]
            step = [int(f[b]) - int(f[a]) for f in flat]
            lead = lead or step
            if key[b] - key[a] != eb or sorted(step) != [0, 0, 0, 1] or step != lead:
                break
            j += 1
        first, last = order[i], order[j]
        where = ", ".join(
            f"{n} {flat[k][first]}" + (f"-{flat[k][last]}" if flat[k][last] != flat[k][first]
                                       else "")
            for k, n in enumerate(names))
        addr = int(key[first])
        loc = (f"NPU {addr // fmt.memory.npu_bytes} +{addr % fmt.memory.npu_bytes}" if sophgo
               else f"0x{addr:06x}")
        rows.append((loc, f"{(j - i + 1) * eb}", where))
        i = j + 1
    d = fmt.to_dict()
    print(", ".join(f"{k} {v}" for k, v in d.items() if k != "format") + f"; {order.size:,} "
          f"elements of {eb} byte{'s' if eb > 1 else ''}")
    print(table(("address", "bytes", "elements"), rows))
    if i < order.size:
        print(f"... ({order.size - i:,} more elements; --limit N shows more runs)")
    return 0


def _layout_options(p):
    p.add_argument("--precision", choices=("int8", "int16", "fp16"),
                   help="NVDLA feature data element type (default int8)")
    p.add_argument("--line-stride", type=int, help="NVDLA: bytes per line (default packed)")
    p.add_argument("--surface-stride", type=int, help="NVDLA: bytes per surface")
    p.add_argument("--cube-stride", type=int, help="NVDLA: bytes per cube of the batch")
    p.add_argument("--fill", type=float, default=0,
                   help="NVDLA: channel padding value (feature data), byte outside the ROI "
                        "(pixel)")
    p.add_argument("--pixel-format", help="NVDLA pixel format, T_R8 ... T_Y16___V16U16_N444")
    p.add_argument("--x-offset", type=int, default=0,
                   help="NVDLA pixel: pixels from the 32-byte aligned line start (default 0)")
    p.add_argument("--uv-line-stride", type=int, help="NVDLA pixel: bytes per plane-1 line")
    p.add_argument("--sign", choices=("unsigned", "signed"), default="unsigned",
                   help="NVDLA pixel: PIXEL_SIGN_OVERRIDE (default unsigned)")
    p.add_argument("--npus", type=int, default=64, help="Sophgo: NPUs (default 64)")
    p.add_argument("--npu-bytes", type=int, default=256 * 1024,
                   help="Sophgo: local memory bytes per NPU (default 262144)")
    p.add_argument("--address", type=lambda v: int(v, 0), default=0,
                   help="Sophgo: local memory address of the tensor (default 0)")
    p.add_argument("--layout", choices=("aligned", "compact"), default="aligned",
                   help="Sophgo layout (default aligned)")
    p.add_argument("--mode", choices=("4N", "2N", "2IC"), help="Sophgo storage mode")
    p.add_argument("--dtype", help="Sophgo element type (default fp32) or DMP fp16/fp32")
    p.add_argument("--transpose", action="store_true", help="DMP: DHWC (transpose_weight)")
    p.add_argument("--no-chunks", action="store_true",
                   help="DMP: plain DWHC whatever C is (network output)")


# -- atomcube board: a board running the SoC, through its UART bridge ----------------------------

def _int(text: str) -> int:
    return int(text, 0)


def _board_open(args):
    from .board.driver import Board, Link, open_serial

    return Board(Link(open_serial(args.port, args.baud, args.timeout)))


def _board(args) -> int:
    from .board.driver import check
    from .board.protocol import BridgeError, ProtocolError

    try:
        b = _board_open(args)
        if args.board_command == "info":
            for k, v in b.info().items():
                print(f"{k}: {v}")
        elif args.board_command == "check":
            results = check(b, args.seed, progress=lambda w: print(f"running {w}",
                                                                    file=sys.stderr))
            rows = [(r.what, r.nbytes, r.cycles, "yes" if r.match else
                     f"NO (byte {r.first_diff})") for r in results]
            print(table(("job", "bytes", "cycles", "equals the model"), rows))
            return 0 if all(r.match for r in results) else 1
        elif args.board_command == "peek":
            for k, w in enumerate(b.link.read_words(args.address, args.count)):
                print(f"0x{args.address + 4 * k:08x}: 0x{w:08x}")
        elif args.board_command == "poke":
            b.link.write_words(args.address, args.words)
        elif args.board_command == "load":
            data = args.file.read_bytes()
            b.write_bytes(args.address, data)
            print(f"wrote {len(data)} bytes at 0x{args.address:x}")
        elif args.board_command == "dump":
            args.file.write_bytes(b.read_bytes(args.address, args.nbytes))
            print(f"wrote {args.file} ({args.nbytes} bytes from 0x{args.address:x})")
    except (BridgeError, ProtocolError, RuntimeError, ValueError, TimeoutError, OSError) as e:
        print(f"atomcube board: {e}", file=sys.stderr)
        return 1
    return 0


def _board_parser(sub) -> None:
    brd = sub.add_parser("board", help="a board running the atomcube SoC, over its UART",
                         description="Talk to the SoC's UART bridge (docs/board.md): read and "
                                     "write words and memory, run each block on random data "
                                     "and compare with the model. Needs pyserial.")
    bsub = brd.add_subparsers(dest="board_command", required=True)

    def command(name, help_):
        p = bsub.add_parser(name, help=help_, description=help_)
        p.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyUSB0")
        p.add_argument("--baud", type=int, default=115_200, help="baud rate (default 115200, "
                                                                  "as the board builds use)")
        p.add_argument("--timeout", type=float, default=2.0,
                       help="seconds to wait for a reply byte (default 2)")
        p.set_defaults(func=_board)
        return p

    command("info", "print what the SoC was built with")
    p = command("check", "run each block's job on random data and compare with the model")
    p.add_argument("--seed", type=int, default=0)
    p = command("peek", "read words")
    p.add_argument("address", type=_int)
    p.add_argument("count", type=int, nargs="?", default=1)
    p = command("poke", "write words")
    p.add_argument("address", type=_int)
    p.add_argument("words", type=_int, nargs="+")
    p = command("load", "write a file into board memory")
    p.add_argument("file", type=Path)
    p.add_argument("address", type=_int)
    p = command("dump", "read board memory into a file")
    p.add_argument("address", type=_int)
    p.add_argument("nbytes", type=int)
    p.add_argument("file", type=Path)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="atomcube", description="atomcube tools")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("regs", help="print or write register maps (Markdown, C header, JSON)",
                       description="Print a register map, or write every format to --out.")
    p.add_argument("maps", nargs="*", metavar="MAP", help="map names (default: all)")
    p.add_argument("--format", choices=("md", "c", "json"),
                   help="output format (default: md; with --out, both md and c)")
    p.add_argument("--out", type=Path, help="write files into this folder instead of printing")
    p.set_defaults(func=_regs)

    lut = sub.add_parser("lut", help="NVDLA hybrid LUT tools").add_subparsers(
        dest="lut_command", required=True)
    p = lut.add_parser("fit", help="choose LUT tables and registers for a function",
                       description="Fit LE and LO tables, modes, coverage, slopes and priorities "
                                   "to a function; print the registers and the error.")
    p.add_argument("function", choices=("sigmoid", "tanh", "exp", "rsqrt", "lrn"))
    p.add_argument("--in-frac", type=int, required=True, help="fraction bits of the input")
    p.add_argument("--out-frac", type=int, required=True, help="fraction bits of the output")
    p.add_argument("--flavor", choices=("sdp", "cdp"), default="sdp")
    p.add_argument("--layout", choices=("auto", "nested", "split"), default="auto",
                   help="density table inside the raw one, beside it, or whichever measures "
                        "better (default auto)")
    p.add_argument("--raw", choices=("lo", "le"), default="lo",
                   help="which table is the raw (wide) one (default LO)")
    p.add_argument("--le-mode", choices=("linear", "exp"), default="linear")
    p.add_argument("--x-min", type=float, help="lower end of the input domain (real units)")
    p.add_argument("--x-max", type=float, help="upper end of the input domain (real units)")
    p.add_argument("--lrn", type=float, nargs=3, metavar=("K", "ALPHA", "BETA"),
                   default=(1.0, 1e-4, 0.75), help="LRN parameters (default 1 1e-4 0.75)")
    p.add_argument("--plot", type=Path, help="write a PNG of f, the LUT, the error and coverage")
    p.add_argument("--json", type=Path, help="write the configuration and register writes")
    p.set_defaults(func=_lut_fit)

    wts = sub.add_parser("weights", help="NVDLA weight images and sparse compression")
    wsub = wts.add_subparsers(dest="weights_command", required=True)
    p = wsub.add_parser("pack", help="lay out (and compress) an OIHW kernel tensor",
                        description="Lay out an OIHW (K, C, R, S) kernel tensor as NVDLA weight "
                                    "memory; with --compress, also WMB and WGS. Writes "
                                    "weight.bin (the dense image, or the packed non-zeros), "
                                    "wmb.bin, wgs.bin and manifest.json.")
    p.add_argument("kernel", type=Path, help=".npy file, or .npz with --key")
    p.add_argument("--key", help="array name inside a .npz holding several")
    p.add_argument("--mode", choices=("dc", "image", "winograd", "deconv"), default="dc",
                   help="direct convolution (default), image input, Winograd, deconvolution")
    p.add_argument("--precision", choices=("int8", "int16", "fp16"), required=True)
    p.add_argument("--stride", type=_pair, metavar="SX,SY",
                   help="Winograd channel extension / deconvolution set split (default 1,1)")
    p.add_argument("--pixel-channels", type=int, metavar="N",
                   help="image mode: pad C to the pixel format's channel count (e.g. 4)")
    p.add_argument("--post-extension", type=int, default=1, choices=(1, 2, 4),
                   help="image mode: channel post-extension factor (default 1: none)")
    p.add_argument("--scale", type=float, help="Winograd: scale G g G^T before the cast")
    p.add_argument("--compress", action="store_true", help="sparse-compress (WMB, WGS)")
    p.add_argument("--base", type=lambda v: int(v, 0), default=0, metavar="ADDR",
                   help="with --compress: where the surfaces start in the manifest's "
                        "decompressor job (default 0; rounded up to 256)")
    p.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=_weights_pack)
    p = wsub.add_parser("unpack", help="reverse 'weights pack': back to an OIHW .npy",
                        description="Read a 'weights pack' folder, decompress if needed, and "
                                    "write the kernels as .npy (Winograd: the transformed "
                                    "4x4 kernels).")
    p.add_argument("folder", type=Path)
    p.add_argument("-o", "--out", type=Path, required=True, help="output .npy file")
    p.set_defaults(func=_weights_unpack)

    lay = sub.add_parser("layout", help="activation memory formats (NVDLA, Sophgo, DMP)")
    lsub = lay.add_subparsers(dest="layout_command", required=True)
    p = lsub.add_parser("convert", help="tensor (.npy) to memory image (.bin + .json), or back",
                        description="Convert an NCHW tensor to a memory image, writing the "
                                    "image and a JSON sidecar (format, shape, strides, "
                                    "padding); or, given a .bin, read its sidecar and write "
                                    "the tensor back as .npy.")
    p.add_argument("input", type=Path, help=".npy/.npz tensor, or a .bin image")
    p.add_argument("--to", choices=("nvdla-feature", "nvdla-pixel", "sophgo", "dmp"),
                   help="target format (tensor input)")
    p.add_argument("--key", help="array name inside a .npz")
    p.add_argument("--sidecar", type=Path, help="the .json of a .bin input (default: beside it)")
    p.add_argument("-o", "--out", type=Path, required=True)
    _layout_options(p)
    p.set_defaults(func=_layout_convert)
    p = lsub.add_parser("explain", help="print the address map of a shape in a format",
                        description="Print where each run of elements of a tensor lies in "
                                    "memory, in address order.")
    p.add_argument("--format", choices=("nvdla-feature", "sophgo", "dmp"), required=True)
    p.add_argument("--shape", required=True, metavar="N,C,H,W")
    p.add_argument("--limit", type=int, default=48, help="rows to print (default 48)")
    _layout_options(p)
    p.set_defaults(func=_layout_explain)
    _board_parser(sub)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
