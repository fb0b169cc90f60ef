"""The ``atomcube`` command.

    atomcube regs [MAP ...] [--format md|c|json] [--out DIR]
    atomcube lut fit FUNCTION --in-frac N --out-frac N [--plot PNG] [--json FILE] ...
    atomcube lut fit FUNCTION --precision fp16 [--plot PNG] [--json FILE] ...
    atomcube weights pack KERNEL.npy --mode M --precision P [--compress] -o DIR
    atomcube weights unpack DIR -o KERNEL.npy
    atomcube layout convert TENSOR.npy --to nvdla-feature|nvdla-pixel|sophgo|dmp [...] -o IMAGE.bin
    atomcube layout convert IMAGE.bin -o TENSOR.npy          (reads IMAGE.json)
    atomcube layout explain --format F --shape N,C,H,W [options]
    atomcube board info|check|peek|poke|load|dump --port DEV [--baud N] ...   (pyserial)

Every command checks its arguments and input files before it computes or writes anything. Bad
input ends in one line on standard error naming the argument or the file and field, and exit
status 2, with nothing written (:mod:`atomcube.model.files` holds the checks). A board that does
not answer as the bridge protocol says ends in exit status 1.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from .errors import FormatError
from .files import (
    MAX_BYTES,
    check_output,
    check_size,
    from_record,
    load_array,
    load_bytes,
    read_json,
    same_json,
    write_file,
    write_if_changed,
)
from .report import table


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line: ``atomcube layout convert: argument --to: ...``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# -- argument types: each refuses what the command could not use --------------------------------

def _int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None


def _at_least(low: int, high: int | None = None):
    def parse(text: str) -> int:
        v = _int(text)
        if v < low or (high is not None and v > high):
            rng = f"at least {low:,}" if high is None else f"{low:,} to {high:,}"
            raise argparse.ArgumentTypeError(f"must be {rng}, not {v:,}")
        return v
    return parse


def _offsets(text: str) -> tuple[int, ...]:
    """One or more comma-separated signed 16-bit offsets."""
    parse = _at_least(-32768, 32767)
    parts = text.split(",")
    if len(parts) > 4:
        raise argparse.ArgumentTypeError(f"at most 4 offsets (a pixel's channels), not "
                                         f"{len(parts)}")
    return tuple(parse(p) for p in parts)


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a fraction in [0, 1), not {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"a fraction in [0, 1), not {text}")
    return v


def _finite(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return v


def _u32(text: str) -> int:
    return _at_least(0, (1 << 32) - 1)(text)


def _word_address(text: str) -> int:
    v = _u32(text)
    if v % 4:
        raise argparse.ArgumentTypeError(f"0x{v:x} is not a multiple of 4 (a word address)")
    return v


def _pair(text: str) -> tuple[int, int]:
    try:
        sx, sy = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SX,SY (two integers), not {text!r}") from None
    return sx, sy


# -- atomcube regs --------------------------------------------------------------------------------

def _configs(args) -> int:
    from .nvdla.config import CONFIGS, FEATURES

    if args.json:
        print(json.dumps({n: c.describe() for n, c in CONFIGS.items()}, indent=1))
        return 0
    rows = []
    for c in CONFIGS.values():
        kpg = "/".join(str(c.kernels_per_group(p)) for p in ("int8", "int16")
                       if p in c.precisions)
        rows.append((c.name, ", ".join(c.precisions), c.atomic_c, c.atomic_k, kpg,
                     c.memory_atom, c.weight_align, c.memif_bits,
                     ", ".join(f for f in FEATURES if getattr(c, f)) or "-"))
    print(table(("config", "precisions", "atomic C", "atomic K", "kernels/group",
                 "atom bytes", "weight pad", "memif bits", "features"), rows))
    return 0


def _regs(args) -> int:
    from .registers import MAPS

    names = args.maps or list(MAPS)
    for n in names:
        if n not in MAPS:
            raise FormatError("MAP", f"no register map named {n!r} (maps: {', '.join(MAPS)})")
    if args.out:
        check_output(args.out, None, field="--out", folder=True)
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
                _write_changed(args.out / f"{n}{suffix}", text)
            else:
                sys.stdout.write(text)
    if args.out and "dma" in names and "c" in formats:
        # the DMA's second header: its descriptor in memory, beside its registers
        from .dma.descriptor import c_header

        _write_changed(args.out / "dma_descriptor.h", c_header())
    return 0


def _write_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds that already, and say so."""
    if write_if_changed(path, text):
        print(f"wrote {path}")


def _ip(args) -> int:
    from atomcube.hw.ip import run

    return run(args)


# -- atomcube lut fit -----------------------------------------------------------------------------

def _lut_fit(args) -> int:
    from .nvdla.lut_fit import NVDLA_TABLES, Formats, fit, lrn, nvdla_baseline, plot
    from .registers.lut import lut_regmap, program

    if args.plot:
        check_output(args.plot, ".png", field="--plot")
    if args.json:
        check_output(args.json, ".json", field="--json")
    if args.x_min is not None and args.x_max is not None and not args.x_min < args.x_max:
        raise FormatError("--x-min/--x-max", f"the domain must have x_min < x_max, not "
                                             f"[{args.x_min:g}, {args.x_max:g}]")
    if args.precision == "fp16":
        return _lut_fit_fp16(args)
    for option, value in (("--in-frac", args.in_frac), ("--out-frac", args.out_frac)):
        if value is None:
            raise FormatError(option, "the integer pipeline needs the input's and output's "
                                      "fraction bits (--in-frac and --out-frac)")
    fmt = Formats(args.in_frac, args.out_frac, args.flavor)
    if args.function == "lrn":
        func, dom = lrn(*args.lrn), (0.0, float("inf"))
    else:
        func, dom = args.function, None
    if args.x_min is not None or args.x_max is not None:
        dom = (args.x_min if args.x_min is not None else -float("inf"),
               args.x_max if args.x_max is not None else float("inf"))
    # the long-tailed LRN wants octaves: an exponential raw LE table (docs/lut.md, fitting)
    tails = args.function == "lrn"
    raw = args.raw if args.raw != "auto" else ("le" if tails else "lo")
    le_mode = args.le_mode if args.le_mode != "auto" else ("exp" if tails else "linear")
    progress = (lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    print(f"fitting {args.function} ({args.layout}, raw table {raw.upper()}, LE {le_mode}) ...",
          file=sys.stderr, flush=True)
    res = fit(func, fmt, layout=args.layout, raw=raw, le_mode=le_mode, domain=dom,
              progress=progress)
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
    if isinstance(func, str) and func in NVDLA_TABLES and fmt.flavor == "sdp" and dom is None:
        base = nvdla_baseline(func, fmt)
        line += (f"\nNVDLA's own table: max {base.report.max_lsb:.3f} LSB "
                 f"(ours is {r.max_lsb / base.report.max_lsb:.0%} of it)")
    print(line)
    if args.json:
        doc = {"function": args.function, "flavor": fmt.flavor, "in_frac": fmt.in_frac,
               "out_frac": fmt.out_frac, "layout": res.layout, "report": r.row(),
               "config": cfg.to_dict(), **_register_program(m, writes)}
        write_file(args.json, (json.dumps(doc, indent=1) + "\n").encode())
        print(f"wrote {args.json} ({len(doc['writes'])} register writes)")
    if args.plot:
        plot(res, func if not isinstance(func, str) else args.function, args.plot, base)
        print(f"wrote {args.plot}")
    return 0


def _lut_fit_fp16(args) -> int:
    """``atomcube lut fit --precision fp16``: tables for SDP's FP16 pipeline."""
    from .nvdla.lut_fit import lrn
    from .nvdla.lut_fit_fp16 import NVDLA_FP16_TABLES, fit_fp16, nvdla_baseline_fp16, plot_fp16
    from .nvdla.nvfloat import FP16, FP32, value_of
    from .registers.lut import lut_regmap, program

    for option, value in (("--in-frac", args.in_frac), ("--out-frac", args.out_frac)):
        if value is not None:
            raise FormatError(option, "the FP16 pipeline has no fixed-point formats: leave "
                                      "out --in-frac and --out-frac")
    if args.flavor != "sdp":
        raise FormatError("--flavor", "the FP16 pipeline is SDP's (--flavor sdp)")
    for option, value in (("--layout", args.layout), ("--raw", args.raw),
                          ("--le-mode", args.le_mode)):
        if value != "auto":
            raise FormatError(option, "the FP16 fit chooses its own arrangement: leave it at "
                                      "auto")
    func = lrn(*args.lrn) if args.function == "lrn" else args.function
    dom = (0.0, float("inf")) if args.function == "lrn" else None
    if args.x_min is not None or args.x_max is not None:
        dom = (args.x_min if args.x_min is not None else -float("inf"),
               args.x_max if args.x_max is not None else float("inf"))
    # functions over many octaves want an exponential raw table (docs/lut.md, fitting)
    exp_raw = args.function in ("rsqrt", "lrn")
    print(f"fitting {args.function} for the FP16 pipeline ...", file=sys.stderr, flush=True)
    res = fit_fp16(func, domain=dom, exp_raw=exp_raw,
                   progress=lambda s: print(f"  {s}", file=sys.stderr, flush=True))
    cfg = res.config

    def f32(bits):
        return f"0x{bits & 0xFFFFFFFF:08x} ({float(value_of(bits & 0xFFFFFFFF, FP32)):.9g})"

    def f16(bits):
        return f"0x{bits & 0xFFFF:04x} ({float(value_of(bits & 0xFFFF, FP16)):.6g})"

    rows = [(name, f32(getattr(cfg, name))) for name in ("le_start", "le_end", "lo_start",
                                                          "lo_end")]
    rows += [(f"{t}_{side}_scale", f16(getattr(cfg, f"{t}_{side}_scale")))
             for t in ("le", "lo") for side in ("uflow", "oflow")]
    rows += [(name, str(getattr(cfg, name))) for name in (
        "le_function", "le_index_offset", "le_index_select", "lo_index_select",
        "uflow_priority", "oflow_priority", "hybrid_priority")]
    print(table(("field", "value"), rows))
    for name in ("le_table", "lo_table"):
        t = value_of(getattr(cfg, name) & 0xFFFF, FP16)
        print(f"{name[:2].upper()} table: {len(t)} FP16 entries, {t.min():.6g} .. {t.max():.6g}")
    r = res.report
    line = (f"max error {r.max_ulp:.3f} FP16 ULP at x = {r.worst_x:.6g} (relative "
            f"{r.max_rel:.3g} at most); mean {r.mean_ulp:.4f} ULP over {r.samples:,} FP16 "
            f"inputs")
    base = None
    if args.function in NVDLA_FP16_TABLES and dom is None:
        base = nvdla_baseline_fp16(args.function)
        line += (f"\nNVDLA's own FP16 table: max {base.report.max_ulp:.3f} ULP "
                 f"(ours is {r.max_ulp / base.report.max_ulp:.0%} of it)")
    print(line)
    if args.json:
        doc = {"function": args.function, "precision": "fp16", "flavor": "sdp",
               "layout": res.layout, "report": r.row(), "config": cfg.to_dict(),
               **_register_program(lut_regmap("sdp"), program(cfg, "sdp"))}
        write_file(args.json, (json.dumps(doc, indent=1) + "\n").encode())
        print(f"wrote {args.json} ({len(doc['writes'])} register writes)")
    if args.plot:
        plot_fp16(res, func, args.plot, base)
        print(f"wrote {args.plot}")
    return 0


def _register_program(m, writes) -> dict:
    """A register program (:func:`model.registers.lut.program`'s ``writes``, on the map
    ``m``) as the fitting tool's JSON gives it."""
    # what firmware replays: (byte offset, 32-bit word), in order; then the same writes by
    # register and field, for reading
    return {"writes": [[m[n].offset, m[n].encode(f)] for n, f in writes],
            "registers": [{"register": n, "fields": f} for n, f in writes]}


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


# -- atomcube weights -----------------------------------------------------------------------------

MANIFEST = {"format": "atomcube-nvdla-weights", "version": 1}


def _derived(spec) -> dict:
    """The manifest fields that follow from a weight spec: written by pack, checked by unpack."""
    from .nvdla.weights import ADDRESS_ALIGN

    return {"laid_shape": list(spec.laid_shape), "groups": spec.groups,
            "kernels_per_group": spec.kernels_per_group, "sets": spec.sets,
            "element_bytes": spec.element_bytes, "bytes_per_kernel": spec.bytes_per_kernel,
            "dense_bytes": spec.dense_bytes, "image_bytes": spec.image_bytes,
            "alignment": {"address": ADDRESS_ALIGN, "size": spec.config.weight_align}}


def _weights_pack(args) -> int:
    import time

    from .nvdla.weights import WeightError, WeightSpec, compress, plan_job

    def step(msg):
        print(msg, file=sys.stderr, flush=True)

    check_output(args.out, None, [args.kernel], folder=True)
    kernels = load_array(args.kernel, args.key)
    if kernels.ndim != 4:
        raise WeightError("kernels", f"must be OIHW (K, C, R, S), rank 4; {args.kernel} holds "
                                     f"rank {kernels.ndim}, shape {kernels.shape}")
    spec = WeightSpec(args.mode, args.precision, kernels.shape, args.stride or (1, 1),
                      args.pixel_channels, args.post_extension, args.scale, args.config)
    if args.compress:
        spec.config.require("compression", "--compress")
    check_size(spec.image_bytes, str(args.kernel), "the weight image")
    kernels = spec.prepare(kernels)       # dtype and range errors before any progress line
    t0 = time.perf_counter()
    step(f"laying out {kernels.size:,} weights ({args.mode}, {args.precision}, "
         f"{spec.config.name}) ...")
    image = spec.layout(kernels)
    packed = None
    if args.compress:
        step(f"  {time.perf_counter() - t0:.2f} s; compressing ...")
        packed = compress(image)
        job = plan_job(packed, base=args.base, dst=True)
    step(f"  {time.perf_counter() - t0:.2f} s; writing {args.out}/")
    files = {}
    if packed is None:
        files["weight.bin"] = image.data
    else:
        files.update({"weight.bin": packed.weight, "wmb.bin": packed.wmb, "wgs.bin": packed.wgs})
    manifest = {**MANIFEST, **spec.to_dict(), **_derived(spec), "compressed": packed is not None,
                "files": {n: d.size for n, d in files.items()}}
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
    args.out.mkdir(exist_ok=True)
    for name, data in files.items():
        write_file(args.out / name, data)
    write_file(args.out / "manifest.json", (json.dumps(manifest, indent=1) + "\n").encode())
    print(table(("surface", "bytes", "of dense", "file"), rows))
    k, c, r, s = spec.laid_shape
    line = (f"{spec.groups} groups of up to {spec.kernels_per_group} kernels, "
            f"{spec.bytes_per_kernel:,} bytes per kernel ({c} x {r} x {s} laid out"
            f"{f', {spec.sets} sets' if spec.sets > 1 else ''})")
    if packed is not None:
        line += (f"; density {st_.overall_density:.1%}, compression ratio {st_.ratio:.2f}, "
                 f"{st_.bytes_saved:,} bytes saved")
        if st_.ratio < 1:
            line += (" (the mask costs a bit per element: compression pays only above "
                     f"{100 / (8 * spec.element_bytes):.2f} % zeros)")
    print(line)
    print(f"wrote {', '.join(files)} and manifest.json to {args.out}/")
    return 0


def _weights_unpack(args) -> int:
    from .nvdla.weights import WeightSpec, decompress

    check_output(args.out, ".npy", [args.folder])
    mpath = args.folder / "manifest.json"
    if not args.folder.is_dir():
        raise FormatError(str(args.folder), "is not a folder (give a 'weights pack' folder)")
    if not mpath.exists():
        raise FormatError(str(mpath), f"missing (is {args.folder} a 'weights pack' folder?)")
    manifest = read_json(mpath, "an atomcube weights manifest")
    for k, v in MANIFEST.items():
        if not same_json(manifest.get(k), v):
            raise FormatError(f"{mpath}: {k}", f"must be {json.dumps(v)}, not "
                                               f"{json.dumps(manifest.get(k))}")
    keys = list(WeightSpec("dc", "int8", (1, 1, 1, 1)).to_dict())      # config among them
    spec = from_record(WeightSpec, {k: manifest[k] for k in keys if k in manifest}, str(mpath))
    for k, v in _derived(spec).items():
        if not same_json(manifest.get(k), v):
            raise FormatError(f"{mpath}: {k}", f"is {json.dumps(manifest.get(k))}, but the "
                                               f"spec makes it {json.dumps(v)}")
    compressed = manifest.get("compressed")
    if not isinstance(compressed, bool):
        raise FormatError(f"{mpath}: compressed", f"must be true or false, not "
                                                  f"{json.dumps(compressed)}")
    names = ["weight.bin", "wmb.bin", "wgs.bin"] if compressed else ["weight.bin"]
    sizes = manifest.get("files")
    if not isinstance(sizes, dict) or sorted(sizes) != sorted(names) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in sizes.values()):
        raise FormatError(f"{mpath}: files", f"must map {', '.join(names)} to their sizes")
    if not compressed and sizes["weight.bin"] != spec.image_bytes:
        raise FormatError(f"{mpath}: files", f"weight.bin is {spec.image_bytes:,} bytes for "
                                             f"this spec, not {sizes['weight.bin']:,}")
    blobs = {n: load_bytes(args.folder / n, sizes[n], "the size the manifest gives")
             for n in names}
    if compressed:
        dense = decompress(blobs["weight.bin"], blobs["wmb.bin"], blobs["wgs.bin"], spec)
    else:
        dense = blobs["weight.bin"]
    kernels = spec.unlayout(dense)
    write_file(args.out, kernels)
    note = (" (Winograd: the 4x4 transformed kernels; G g G^T and its cast do not invert)"
            if spec.mode == "winograd" else "")
    print(f"wrote {args.out}: {kernels.dtype} {tuple(kernels.shape)}{note}")
    return 0


# -- atomcube layout ------------------------------------------------------------------------------

#: numpy element types by the names the formats use
_ELEMENTS = {"int8": np.dtype("i1"), "uint8": np.dtype("u1"), "int16": np.dtype("<i2"),
             "uint16": np.dtype("<u2"), "int32": np.dtype("<i4"), "uint32": np.dtype("<u4"),
             "fp16": np.dtype("<f2"), "fp32": np.dtype("<f4"), "int64": np.dtype("<i8"),
             "uint64": np.dtype("<u8"), "fp64": np.dtype("<f8")}
#: the element types each target stores, and the option that chooses one
_TARGET_TYPES = {"nvdla-feature": ("--precision", ("int8", "int16", "fp16")),
                 "sophgo": ("--dtype", ("int8", "uint8", "int16", "uint16", "int32", "uint32",
                                        "fp16", "fp32")),
                 "dmp": ("--dtype", ("fp16", "fp32"))}
#: ``layout explain`` lists every element; past this many it asks for a smaller shape
EXPLAIN_MAX_ELEMENTS = 1 << 21


def _element_type(args, dtype: np.dtype) -> str:
    """The element type a target stores the tensor as: the one its option names; else the
    tensor's own when the target has it; else the widest of the same kind (integer or float);
    else the target's first (DMP's fp16). :func:`cast_exact` then refuses any value the choice
    would change."""
    option, allowed = _TARGET_TYPES[args.to]
    given = args.precision if option == "--precision" else args.dtype
    if given is not None:
        if given not in allowed:
            raise FormatError(option, f"{args.to} stores {', '.join(allowed)}, not {given!r}")
        return given
    if dtype.kind not in "biuf":
        raise FormatError("tensor", f"{dtype} is not a numeric element type")
    for name in allowed:
        if _ELEMENTS[name] == dtype.newbyteorder("<"):
            return name
    kind = "f" if dtype.kind == "f" else "iu"
    same = [n for n in allowed if _ELEMENTS[n].kind in kind]
    return max(same, key=lambda n: _ELEMENTS[n].itemsize) if same else allowed[0]


def cast_exact(a: np.ndarray, name: str, lossy: bool, option: str = "--dtype") -> np.ndarray:
    """``a`` as element type ``name``. Values must come through unchanged unless ``lossy``
    (then floats round to nearest even and integers from floats round to nearest); values out
    of the type's range, and NaN or infinity into an integer type, are refused either way."""
    want = _ELEMENTS[name]
    if a.dtype == want:
        return a
    if a.dtype.kind not in "biuf":
        raise FormatError("tensor", f"{a.dtype} is not a numeric element type")
    if want.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            b = a.astype(want)
        over = np.isinf(b) & ~np.isinf(a) if a.dtype.kind == "f" else np.isinf(b)
        if over.any():
            i = int(np.flatnonzero(over.ravel())[0])
            raise FormatError("tensor", f"{a.ravel()[i]} is beyond {name}'s range (largest "
                                        f"{float(np.finfo(want).max):g})")
    else:
        r = a
        if a.dtype.kind == "f":
            bad = ~np.isfinite(a)
            if bad.any():
                raise FormatError("tensor", f"holds NaN or infinity, which {name} cannot hold")
            r = np.rint(a) if lossy else a
        info = np.iinfo(want)
        if r.size and (r.min() < info.min or r.max() > info.max):
            raise FormatError("tensor", f"values {r.min()} .. {r.max()} do not fit {name} "
                                        f"({info.min} .. {info.max})")
        b = r.astype(want)
    if not lossy:
        with np.errstate(invalid="ignore"):
            back = b.astype(a.dtype)
        diff = ~((back == a) | (np.isnan(back) & np.isnan(a)) if a.dtype.kind == "f"
                 else back == a)
        if diff.any():
            i = int(np.flatnonzero(diff.ravel())[0])
            raise FormatError("tensor", f"{a.dtype} {a.ravel()[i]} becomes {b.ravel()[i]} in "
                                        f"{name}: choose another type with {option}, or pass "
                                        f"--lossy to round")
    return b


def _layout_format(args, shape, element: str | None = None):
    """The format object the layout options describe, for a tensor of ``shape``."""
    if args.format == "nvdla-feature":
        from .nvdla.feature import FeatureFormat

        return FeatureFormat(element or args.precision or "int8", shape, args.line_stride,
                             args.surface_stride, args.cube_stride, args.fill, args.config)
    if args.format == "nvdla-pixel":
        from .nvdla.pixel import PixelImage

        if args.pixel_format is None:
            raise FormatError("--pixel-format", "say which pixel format (e.g. T_A8B8G8R8)")
        if len(shape) == 4 and shape[0] != 1:
            raise FormatError("tensor", f"a pixel image is one (C, H, W) tensor, not a batch of "
                                        f"{shape[0]}")
        if args.fill != int(args.fill):
            raise FormatError("--fill", f"a pixel image's fill is a byte, not {args.fill:g}")
        return PixelImage(args.pixel_format, shape[-1], shape[-2], args.x_offset,
                          args.line_stride, args.uv_line_stride, args.sign, None, int(args.fill))
    if args.format == "sophgo":
        from .sophgo.local import LocalMemory, LocalTensor

        return LocalTensor(LocalMemory(args.npus, args.npu_bytes), args.address, shape,
                           element or args.dtype or "fp32", args.layout, None, args.mode)
    from .dmp.layout import DmpLayout

    return DmpLayout(shape, args.transpose, element or args.dtype or "fp16", not args.no_chunks)


def _image_bytes(fmt) -> int:
    """Bytes of the image a format object describes (a whole local memory for Sophgo)."""
    memory = getattr(fmt, "memory", None)
    return memory.size if memory is not None else fmt.size


#: sidecar ``format`` -> the class that reads it
def _sidecar_class(kind):
    if kind == "nvdla-feature":
        from .nvdla.feature import FeatureFormat as cls
    elif kind == "nvdla-pixel":
        from .nvdla.pixel import PixelImage as cls
    elif kind == "sophgo-local":
        from .sophgo.local import LocalTensor as cls
    elif kind == "dmp":
        from .dmp.layout import DmpLayout as cls
    else:
        return None
    return cls


def _layout_convert(args) -> int:
    if args.input.suffix == ".bin":
        return _layout_read_back(args)
    if args.input.suffix not in (".npy", ".npz"):
        raise FormatError(str(args.input), "expected a .npy/.npz tensor or a .bin image")
    if args.to is None:
        raise FormatError("--to", "say which format to convert the tensor to")
    out = check_output(args.out, ".bin", [args.input])
    side = check_output(out.with_suffix(".json"), ".json", [args.input], field="-o's sidecar")
    tensor = load_array(args.input, args.key)
    if tensor.ndim == 3:
        tensor = tensor[None]
    if tensor.ndim != 4:
        raise FormatError(str(args.input), f"tensors are NCHW (rank 4) or CHW (rank 3), not "
                                           f"rank {tensor.ndim}")
    args.format = args.to
    element = None
    if args.to != "nvdla-pixel":
        element = _element_type(args, tensor.dtype)
        tensor = cast_exact(tensor, element, args.lossy, _TARGET_TYPES[args.to][0])
    fmt = _layout_format(args, tensor.shape, element)
    check_size(_image_bytes(fmt), "--to", "the memory image")
    if args.to == "nvdla-pixel":
        image = fmt.pack(tensor[0])
    elif args.to == "sophgo":
        image = fmt.memory.empty()
        fmt.store(image, tensor)
        image = image.reshape(-1)
    else:
        image = fmt.pack(tensor)
    write_file(out, image)
    write_file(side, (json.dumps(fmt.to_dict(), indent=1) + "\n").encode())
    print(f"wrote {out} ({image.size:,} bytes) and {side}")
    return 0


def _layout_read_back(args) -> int:
    side = args.sidecar or args.input.with_suffix(".json")
    out = check_output(args.out, ".npy", [args.input, side])
    if not side.exists():
        raise FormatError(str(side), "missing; give the image's sidecar with --sidecar")
    d = read_json(side, "an atomcube layout sidecar")
    cls = _sidecar_class(d.get("format"))
    if cls is None:
        raise FormatError(f"{side}: format", f"must be nvdla-feature, nvdla-pixel, "
                                             f"sophgo-local or dmp, not "
                                             f"{json.dumps(d.get('format'))}")
    fmt = from_record(cls, d, str(side))
    nbytes = _image_bytes(fmt)
    check_size(nbytes, str(side), "the image it describes")
    data = load_bytes(args.input, nbytes, f"the image {side} describes")
    if d["format"] == "sophgo-local":
        tensor = fmt.load(data.reshape(fmt.memory.npus, fmt.memory.npu_bytes))
    else:
        tensor = fmt.unpack(data)
    write_file(out, tensor)
    print(f"wrote {out}: {tensor.dtype} {tuple(tensor.shape)}")
    return 0


def _runs(key: np.ndarray, coords: list[np.ndarray], eb: int, limit: int):
    """The first ``limit`` runs of elements in address order: (first, last) positions in
    ``key``'s sort order, where a run is consecutive addresses along one coordinate counting up
    by one. Vectorised but for the ``limit`` runs themselves."""
    order = np.argsort(key, kind="stable")
    steps = np.stack([np.diff(c[order]) for c in coords])
    # pair i (elements i, i+1) may join a run when its addresses touch and one coordinate
    # steps by one; a run goes on while the coordinate that steps stays the same
    ok = (np.diff(key[order]) == eb) & (np.abs(steps).sum(axis=0) == 1) & (steps.max(axis=0)
                                                                             == 1)
    axis = steps.argmax(axis=0)
    change = np.flatnonzero(~ok | np.r_[True, axis[1:] != axis[:-1]])
    runs, i = [], 0
    while i < order.size and len(runs) < limit:
        if i < ok.size and ok[i]:
            k = change[np.searchsorted(change, i, side="right")] if change.size and \
                change[-1] > i else ok.size
            runs.append((order[i], order[k]))
            i = k + 1
        else:
            runs.append((order[i], order[i]))
            i += 1
    return runs, order.size - i


def _layout_explain(args) -> int:
    shape = _shape(args.shape, "--shape")
    fmt = _layout_format(args, shape)
    full = fmt.shape if len(fmt.shape) == 4 else (1, *fmt.shape)
    count = math.prod(full)
    if count > EXPLAIN_MAX_ELEMENTS:
        raise FormatError("--shape", f"{count:,} elements; explain lists at most "
                                     f"{EXPLAIN_MAX_ELEMENTS:,} (a smaller tensor shows the "
                                     f"same pattern)")
    flat = [i.ravel() for i in np.meshgrid(*[np.arange(v) for v in full], indexing="ij")]
    sophgo = args.format == "sophgo"
    eb = fmt.element_bytes
    if sophgo:
        npu, off = fmt.locate(*flat)
        key = npu.astype(np.int64) * fmt.memory.npu_bytes + off
    elif args.format == "nvdla-feature":
        key = fmt.address(*flat)
    else:
        key = fmt.offset(*flat)
    runs, left = _runs(np.asarray(key, np.int64), flat, eb, args.limit)
    names = "DCHW" if args.format == "dmp" else "NCHW"
    rows = []
    for first, last in runs:
        where = ", ".join(
            f"{n} {flat[k][first]}" + (f"-{flat[k][last]}" if flat[k][last] != flat[k][first]
                                       else "")
            for k, n in enumerate(names))
        addr = int(key[first])
        loc = (f"NPU {addr // fmt.memory.npu_bytes} +{addr % fmt.memory.npu_bytes}" if sophgo
               else f"0x{addr:06x}")
        size = sum(int(flat[k][last]) - int(flat[k][first]) for k in range(4)) + 1
        rows.append((loc, f"{size * eb}", where))
    d = fmt.to_dict()
    print(", ".join(f"{k} {v}" for k, v in d.items() if k != "format") + f"; {count:,} "
          f"elements of {eb} byte{'s' if eb > 1 else ''}")
    print(table(("address", "bytes", "elements"), rows))
    if left:
        print(f"... ({left:,} more elements; --limit N shows more runs)")
    return 0


def _config_option(p):
    from .nvdla.config import CONFIGS, DEFAULT

    p.add_argument("--config", choices=tuple(CONFIGS), default=DEFAULT,
                   help=f"NVDLA configuration whose atoms and groups the layout uses (default "
                        f"{DEFAULT}; 'atomcube configs' lists them)")


def _layout_options(p):
    _config_option(p)
    p.add_argument("--precision", help="NVDLA feature data element type: int8, int16 or fp16 "
                                       "(default: the tensor's own)")
    p.add_argument("--line-stride", type=_at_least(1), help="NVDLA: bytes per line "
                                                            "(default packed)")
    p.add_argument("--surface-stride", type=_at_least(1), help="NVDLA: bytes per surface")
    p.add_argument("--cube-stride", type=_at_least(1), help="NVDLA: bytes per cube of the batch")
    p.add_argument("--fill", type=_finite, default=0,
                   help="NVDLA: channel padding value (feature data), byte outside the ROI "
                        "(pixel)")
    p.add_argument("--pixel-format", help="NVDLA pixel format, T_R8 ... T_Y16___V16U16_N444")
    p.add_argument("--x-offset", type=_at_least(0), default=0,
                   help="NVDLA pixel: pixels from the 32-byte aligned line start (default 0)")
    p.add_argument("--uv-line-stride", type=_at_least(1),
                   help="NVDLA pixel: bytes per plane-1 line")
    p.add_argument("--sign", choices=("unsigned", "signed"), default="unsigned",
                   help="NVDLA pixel: PIXEL_SIGN_OVERRIDE (default unsigned)")
    p.add_argument("--npus", type=_at_least(1, 4096), default=64,
                   help="Sophgo: NPUs (default 64)")
    p.add_argument("--npu-bytes", type=_at_least(128, MAX_BYTES), default=256 * 1024,
                   help="Sophgo: local memory bytes per NPU (default 262144)")
    p.add_argument("--address", type=_at_least(0), default=0,
                   help="Sophgo: local memory address of the tensor (default 0)")
    p.add_argument("--layout", choices=("aligned", "compact"), default="aligned",
                   help="Sophgo layout (default aligned)")
    p.add_argument("--mode", choices=("4N", "2N", "2IC"), help="Sophgo storage mode")
    p.add_argument("--dtype", help="Sophgo element type (int8, uint8, int16, uint16, int32, "
                                   "uint32, fp16, fp32) or DMP's (fp16, fp32); default: the "
                                   "tensor's own")
    p.add_argument("--transpose", action="store_true", help="DMP: DHWC (transpose_weight)")
    p.add_argument("--no-chunks", action="store_true",
                   help="DMP: plain DWHC whatever C is (network output)")


# -- atomcube dma compile: a conversion as a descriptor chain -------------------------------------

#: --format -> what the dense NCHW tensor (OIHW kernels for nvdla-weights) is converted into
DMA_FORMATS = ("nhwc", "nvdla-feature", "nvdla-pixel", "sophgo", "dmp", "nvdla-weights")
#: the element types of --format nhwc, by their bytes (the copy moves bytes; it does not convert)
NHWC_ELEMENT_BYTES = {name: dt.itemsize for name, dt in _ELEMENTS.items()}
#: --dense-type: the element types the engine's conversions read or write
DMA_TYPES = ("int8", "uint8", "int16", "uint16", "fp16")


def _shape(text: str, field: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise FormatError(field, f"expected N,C,H,W (integers), not {text!r}") from None


def _net(args) -> int:
    from .errors import check_shape
    from .files import MAX_BYTES
    from .net.flow import Options, break_even, build_network
    from .net.graph import EXAMPLES, example, read_onnx
    from .net.report import text
    from .report import Progress

    if args.model.name in EXAMPLES and not args.model.exists():
        args.model, shape = example(args.model.name)
    else:
        shape = None
    check_output(args.out, None, [args.model], folder=True)
    if args.input_shape is not None:
        try:
            shape = check_shape(_shape(args.input_shape, "--input-shape"), "NCHW")
        except FormatError as e:
            raise FormatError("--input-shape", e.rule) from None
    opts = Options(args.config, args.precision, args.compress, args.prune, args.prune_scope,
                   not args.no_winograd)
    if args.model.is_file() and args.model.stat().st_size > MAX_BYTES:
        raise FormatError(str(args.model), f"{args.model.stat().st_size:,} bytes, over the "
                                           f"command's limit of {MAX_BYTES:,} (1 GiB)")
    net = read_onnx(args.model, shape)
    build = build_network(net, opts, Progress("laying out"))
    check_size(int(build.weight_buffer.size), str(args.model), "the weight buffer")
    names = build.write(args.out)
    print(text(build))
    under = [b for b in build.layers if b.below_break_even]
    if under:
        fate = "compressed anyway" if opts.compress == "always" else "left dense"
        print(f"warning: {len(under)} of {len(build.layers)} layers have fewer zeros than the "
              f"{100 * break_even(opts.precision):.2f} % break-even ({fate}; report.md lists "
              f"them; --prune raises the zeros)", file=sys.stderr)
    for b in build.layers:
        # (the break-even warning, the first of a layer's when it has one, is counted above)
        for w in b.warnings[1 if b.below_break_even else 0:]:
            print(f"warning: {b.layer.name}: {w}", file=sys.stderr)
    print(f"wrote {', '.join(names)} to {args.out}/")
    return 0


def _dma_compile(args) -> int:
    from .dma import compile as comp
    from .dma.descriptor import DESCRIPTOR_BYTES, DescriptorError
    from .errors import check_shape

    out = check_output(args.out, ".bin")
    listing = check_output(out.with_suffix(".txt"), ".txt", field="-o's listing")
    if args.chain % DESCRIPTOR_BYTES:
        raise FormatError("--chain", f"0x{args.chain:x} is not {DESCRIPTOR_BYTES}-byte aligned")
    what = "OIHW kernels" if args.format == "nvdla-weights" else "NCHW tensor"
    shape = check_shape(_shape(args.shape, "--shape"),
                        "KCRS" if args.format == "nvdla-weights" else "NCHW",
                        leading_optional=args.format != "nvdla-weights")
    if args.dense_type is not None and args.format not in ("nvdla-feature", "nvdla-pixel", "dmp"):
        raise FormatError("--dense-type", f"converts nvdla-feature, nvdla-pixel and dmp "
                                          f"tensors, not {args.format}")
    if len(args.offset) > 1 and args.format != "nvdla-pixel":
        raise FormatError("--offset", "one offset (a mean per channel is for nvdla-pixel)")
    if args.format == "nvdla-pixel" and not args.unpack:
        raise FormatError("--unpack", "a pixel image converts to channels (--unpack), not back")
    if args.format == "nhwc":
        eb = NHWC_ELEMENT_BYTES.get(args.dtype or "int8")
        if eb is None:
            raise FormatError("--dtype", f"one of {', '.join(NHWC_ELEMENT_BYTES)}, not "
                                         f"{args.dtype!r}")
        check_size(math.prod(shape) * eb, "--shape", "the tensor")
        prog = comp.dense_transpose(shape, eb, args.dense, args.image, args.unpack)
    elif args.format == "nvdla-weights":
        from .nvdla.weights import WeightSpec

        spec = WeightSpec("dc", args.precision or "int8", shape, config=args.config)
        check_size(spec.image_bytes, "--shape", "the weight image")
        prog = comp.nvdla_weights(spec, args.dense, args.image, args.unpack)
    else:
        fmt = _layout_format(args, shape)
        check_size(_image_bytes(fmt), "--shape", "the memory image")
        try:
            if args.format == "nvdla-pixel":
                prog = comp.nvdla_pixel(fmt, args.image, args.dense,
                                        args.dense_type or fmt.format.precision,
                                        args.offset if len(args.offset) > 1 else args.offset[0],
                                        args.scale, args.shift)
            else:
                build = {"nvdla-feature": comp.nvdla_feature, "sophgo": comp.sophgo_local,
                         "dmp": comp.dmp}[args.format]
                convert = {}
                if args.dense_type is not None:
                    convert = {"dense_type": args.dense_type, "offset": args.offset[0],
                               "scale": args.scale, "shift": args.shift}
                prog = build(fmt, args.dense, args.image, args.unpack, **convert)
        except FormatError as e:
            flag = {"dense_type": "--dense-type", "offset": "--offset",
                    "pixel_format": "--pixel-format"}.get(e.field)
            if flag is None:
                raise
            raise FormatError(flag, e.rule) from None
    chain = (args.chain, args.chain + len(prog) * DESCRIPTOR_BYTES)
    check_size(chain[1] - chain[0], "--shape", "the chain")
    for i, d in enumerate(prog):
        try:
            d.check(args.addr_width)
        except DescriptorError as e:
            raise FormatError(f"descriptor {i}", f"{e} (code {e.code.name})") from None
        for side, (lo, hi) in (("reads", d.src_range()), ("writes", d.dst_range())):
            if lo < chain[1] and chain[0] < hi:
                raise FormatError("--chain", f"the chain at 0x{chain[0]:x}..0x{chain[1]:x} "
                                             f"overlaps what descriptor {i} {side} "
                                             f"(0x{lo:x}..0x{hi:x})")
    if chain[1] > 1 << args.addr_width:
        raise FormatError("--chain", f"the chain ends at 0x{chain[1]:x}, past the "
                                     f"{args.addr_width}-bit address space")
    raw = prog.chain(args.chain)
    read, written = prog.bytes_moved()
    direction = f"{args.format} -> {what}" if args.unpack else f"{what} -> {args.format}"
    head = (f"# atomcube dma compile: {direction}, shape {','.join(map(str, shape))}; dense at "
            f"0x{args.dense:x}, image at 0x{args.image:x}\n"
            f"# {len(prog)} descriptors, {read:,} bytes read, {written:,} written; run: write "
            f"0x{args.chain:x} to chain_addr, then set ctrl.start_chain\n\n")
    write_file(out, np.frombuffer(raw, np.uint8))
    write_file(listing, (head + prog.listing(args.chain)).encode())
    print(f"wrote {out} ({len(prog)} descriptor{'s' if len(prog) > 1 else ''}, {len(raw)} "
          f"bytes at 0x{args.chain:x}) and "
          f"{listing}; {read:,} bytes read, {written:,} written")
    return 0


# -- atomcube board: a board running the SoC, through its UART bridge ----------------------------

#: the most words or bytes one peek or dump reads (the SoC's memory is far smaller)
BOARD_MAX_BYTES = 64 << 20


def _board_open(args):
    from .board.driver import Board, Link, open_serial

    return Board(Link(open_serial(args.port, args.baud, args.timeout)))


def _board(args) -> int:
    from .board.driver import check
    from .board.protocol import BridgeError, ProtocolError

    # every argument and file is checked before the port is opened
    if args.board_command == "dump":
        check_output(args.file, None, field="FILE")
    data = None
    if args.board_command == "load":
        if not args.file.is_file():
            raise FormatError("FILE", f"{args.file}: no such file")
        if args.file.stat().st_size > BOARD_MAX_BYTES:
            raise FormatError("FILE", f"{args.file}: over {BOARD_MAX_BYTES:,} bytes")
        data = args.file.read_bytes()
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
            b.write_bytes(args.address, data)
            print(f"wrote {len(data)} bytes at 0x{args.address:x}")
        elif args.board_command == "dump":
            write_file(args.file, b.read_bytes(args.address, args.nbytes))
            print(f"wrote {args.file} ({args.nbytes} bytes from 0x{args.address:x})")
    except (BridgeError, ProtocolError, RuntimeError, TimeoutError) as e:
        print(f"atomcube board: {e}", file=sys.stderr)
        return 1
    return 0


def _board_parser(sub) -> None:
    brd = sub.add_parser("board", help="a board running the atomcube SoC, over its UART",
                         description="Talk to the SoC's UART bridge (docs/board.md): read and "
                                     "write words and memory, run each block on random data "
                                     "and compare with the model. Needs pyserial. Exit status "
                                     "1: the board did not answer as the protocol says.")
    bsub = brd.add_subparsers(dest="board_command", required=True)

    def command(name, help_):
        p = bsub.add_parser(name, help=help_, description=help_)
        p.add_argument("--port", required=True, help="serial device, e.g. /dev/ttyUSB0")
        p.add_argument("--baud", type=_at_least(1), default=115_200,
                       help="baud rate (default 115200, as the board builds use)")
        p.add_argument("--timeout", type=_finite, default=2.0,
                       help="seconds to wait for a reply byte (default 2)")
        p.set_defaults(func=_board, prog=p.prog)
        return p

    words = BOARD_MAX_BYTES // 4
    command("info", "print what the SoC was built with")
    p = command("check", "run each block's job on random data and compare with the model")
    p.add_argument("--seed", type=_at_least(0), default=0)
    p = command("peek", "read words")
    p.add_argument("address", type=_word_address)
    p.add_argument("count", type=_at_least(1, words), nargs="?", default=1,
                   help="words to read (default 1)")
    p = command("poke", "write words")
    p.add_argument("address", type=_word_address)
    p.add_argument("words", type=_u32, nargs="+", help="32-bit words, 0 to 0xffffffff")
    p = command("load", "write a file into board memory")
    p.add_argument("file", type=Path, metavar="FILE")
    p.add_argument("address", type=_word_address)
    p = command("dump", "read board memory into a file")
    p.add_argument("address", type=_word_address)
    p.add_argument("nbytes", type=_at_least(1, BOARD_MAX_BYTES))
    p.add_argument("file", type=Path, metavar="FILE")


# -- the parser -----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="atomcube", description="atomcube: NVDLA-style memory formats, LUTs and "
                                              "the FPGA blocks' registers. Bad input: one "
                                              "line on stderr and exit status 2, nothing "
                                              "written.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("net", help="an ONNX network's weights as NVDLA memory, with a report",
                       description="Read an ONNX model's Conv, ConvTranspose and fully "
                                   "connected layers, quantise (per-kernel symmetric int8 or "
                                   "int16, or fp16; a quantised model keeps its own scales), "
                                   "optionally prune, lay each out in its NVDLA weight mode, "
                                   "compress where it saves bytes, and write into the folder -o: "
                                   "weights.bin (every surface and auxiliary operand), net.json "
                                   "(the figures, scales and memory plan), report.md and "
                                   "report.png (density and compression per layer). "
                                   "docs/net.md has the details.")
    p.add_argument("model", type=Path,
                   help="the .onnx file, or an example network the setup installs: "
                        "ppocr-cls (PP-OCR's text direction classifier) or ppocr-det (its "
                        "text detector)")
    p.add_argument("--precision", choices=("int8", "int16", "fp16"), default="int8",
                   help="element type of weights and feature data (default int8)")
    p.add_argument("--input-shape", metavar="N,C,H,W",
                   help="the first input's shape, where the model leaves dimensions free")
    p.add_argument("--compress", choices=("auto", "always", "never"), default="auto",
                   help="compress each layer where it saves bytes (auto, the default), always, "
                        "or never; only configurations with compression (nv_full)")
    p.add_argument("--prune", type=_fraction, default=0.0, metavar="FRACTION",
                   help="zero this fraction of the weights, those of least magnitude, before "
                        "quantising (default 0)")
    p.add_argument("--prune-scope", choices=("layer", "global"), default="layer",
                   help="prune that fraction of each layer (default), or of all weights "
                        "together")
    p.add_argument("--no-winograd", action="store_true",
                   help="lay out 3x3 stride-1 convolutions for direct convolution even where "
                        "the configuration has Winograd")
    p.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    _config_option(p)
    p.set_defaults(func=_net, prog=p.prog)

    p = sub.add_parser("configs", help="the NVDLA configurations the formats follow",
                       description="List NVDLA's configurations (nv_small ... nv_full) with the "
                                   "parameters that shape the memory formats: atomic C (weight "
                                   "chunk channels), atomic K (kernels per int8 group; "
                                   "int16/fp16 groups hold half), the memory atom (feature data "
                                   "atom bytes), the weight surface padding, and the optional "
                                   "features each has.")
    p.add_argument("--json", action="store_true", help="every parameter as JSON")
    p.set_defaults(func=_configs, prog=p.prog)

    p = sub.add_parser("regs", help="print or write register maps (Markdown, C header, JSON)",
                       description="Print a register map, or write every format to --out.")
    p.add_argument("maps", nargs="*", metavar="MAP", help="map names (default: all)")
    p.add_argument("--format", choices=("md", "c", "json"),
                   help="output format (default: md; with --out, both md and c)")
    p.add_argument("--out", type=Path, help="write files into this folder instead of printing")
    p.set_defaults(func=_regs, prog=p.prog)

    from atomcube.hw.ip import add_arguments as ip_arguments

    p = sub.add_parser("ip", help="standalone IP cores: Verilog with AXI port names, C headers, "
                                  "a JSON record (docs/integration.md)",
                       description="Write each block as a standalone core: aclk, aresetn, "
                                   "s_axi_*, m_axi_*, s_axis_*, m_axis_*, with Vivado's "
                                   "interface attributes, its C headers and a JSON record.")
    ip_arguments(p)
    p.set_defaults(func=_ip, prog=p.prog)

    lut = sub.add_parser("lut", help="NVDLA hybrid LUT tools").add_subparsers(
        dest="lut_command", required=True)
    p = lut.add_parser("fit", help="choose LUT tables and registers for a function",
                       description="Fit LE and LO tables, modes, coverage, slopes and priorities "
                                   "to a function; print the registers and the error. Refused "
                                   "when the function saturates the output or the int16 table "
                                   "entries in the formats given.")
    p.add_argument("function", choices=("sigmoid", "tanh", "exp", "rsqrt", "lrn"))
    p.add_argument("--precision", choices=("int", "fp16"), default="int",
                   help="the pipeline: int (fixed point, --in-frac and --out-frac) or fp16 "
                        "(SDP's floating-point one; errors in FP16 ULP over every FP16 input)")
    p.add_argument("--in-frac", type=_int, help="fraction bits of the input (int)")
    p.add_argument("--out-frac", type=_int, help="fraction bits of the output (int)")
    p.add_argument("--flavor", choices=("sdp", "cdp"), default="sdp")
    p.add_argument("--layout", choices=("auto", "nested", "split"), default="auto",
                   help="density table inside the raw one, beside it, or whichever measures "
                        "better (default auto: both are fitted)")
    p.add_argument("--raw", choices=("auto", "lo", "le"), default="auto",
                   help="which table is the raw (wide) one (default auto: LE for lrn, LO "
                        "otherwise)")
    p.add_argument("--le-mode", choices=("auto", "linear", "exp"), default="auto",
                   help="the LE table's index mode (default auto: exp for lrn, linear "
                        "otherwise)")
    p.add_argument("--x-min", type=_finite, help="lower end of the input domain (real units)")
    p.add_argument("--x-max", type=_finite, help="upper end of the input domain (real units)")
    p.add_argument("--lrn", type=_finite, nargs=3, metavar=("K", "ALPHA", "BETA"),
                   default=(1.0, 1e-4, 0.75), help="LRN parameters (default 1 1e-4 0.75)")
    p.add_argument("--plot", type=Path, help="write a PNG of f, the LUT, the error and coverage")
    p.add_argument("--json", type=Path, help="write the configuration and register writes "
                                             "(writes: [offset, word] pairs in order)")
    p.set_defaults(func=_lut_fit, prog=p.prog)

    wts = sub.add_parser("weights", help="NVDLA weight images and sparse compression")
    wsub = wts.add_subparsers(dest="weights_command", required=True)
    p = wsub.add_parser("pack", help="lay out (and compress) an OIHW kernel tensor",
                        description="Lay out an OIHW (K, C, R, S) kernel tensor as NVDLA weight "
                                    "memory; with --compress, also WMB and WGS. Writes "
                                    "weight.bin (the dense image, or the packed non-zeros), "
                                    "wmb.bin, wgs.bin and manifest.json into the folder -o.")
    p.add_argument("kernel", type=Path, help=".npy file, or .npz with --key")
    p.add_argument("--key", help="array name inside a .npz holding several")
    p.add_argument("--mode", choices=("dc", "image", "winograd", "deconv"), default="dc",
                   help="direct convolution (default), image input, Winograd, deconvolution")
    p.add_argument("--precision", choices=("int8", "int16", "fp16"), required=True)
    p.add_argument("--stride", type=_pair, metavar="SX,SY",
                   help="Winograd channel extension / deconvolution set split (default 1,1)")
    p.add_argument("--pixel-channels", type=_at_least(1), metavar="N",
                   help="image mode: pad C to the pixel format's channel count (e.g. 4)")
    p.add_argument("--post-extension", type=int, default=1, choices=(1, 2, 4),
                   help="image mode: channel post-extension factor (default 1: none)")
    p.add_argument("--scale", type=_finite, help="Winograd: scale G g G^T before the cast")
    p.add_argument("--compress", action="store_true", help="sparse-compress (WMB, WGS)")
    _config_option(p)
    p.add_argument("--base", type=_u32, default=0, metavar="ADDR",
                   help="with --compress: where the surfaces start in the manifest's "
                        "decompressor job (default 0; rounded up to 256)")
    p.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    p.set_defaults(func=_weights_pack, prog=p.prog)
    p = wsub.add_parser("unpack", help="reverse 'weights pack': back to an OIHW .npy",
                        description="Read a 'weights pack' folder, decompress if needed, and "
                                    "write the kernels as .npy (Winograd: the transformed "
                                    "4x4 kernels).")
    p.add_argument("folder", type=Path)
    p.add_argument("-o", "--out", type=Path, required=True, help="output .npy file")
    p.set_defaults(func=_weights_unpack, prog=p.prog)

    lay = sub.add_parser("layout", help="activation memory formats (NVDLA, Sophgo, DMP)")
    lsub = lay.add_subparsers(dest="layout_command", required=True)
    p = lsub.add_parser("convert", help="tensor (.npy) to memory image (.bin + .json), or back",
                        description="Convert an NCHW tensor to a memory image, writing the "
                                    "image (-o, a .bin) and a JSON sidecar beside it (format, "
                                    "shape, strides, padding); or, given a .bin, read its "
                                    "sidecar and write the tensor back (-o, a .npy). The "
                                    "element type is the tensor's own unless --precision or "
                                    "--dtype names another; values must convert exactly "
                                    "unless --lossy is given.")
    p.add_argument("input", type=Path, help=".npy/.npz tensor, or a .bin image")
    p.add_argument("--to", choices=("nvdla-feature", "nvdla-pixel", "sophgo", "dmp"),
                   help="target format (tensor input)")
    p.add_argument("--key", help="array name inside a .npz")
    p.add_argument("--sidecar", type=Path, help="the .json of a .bin input (default: beside it)")
    p.add_argument("--lossy", action="store_true",
                   help="allow a conversion that changes values: to a float type, rounding to "
                        "nearest even; from a float to an integer type, rounding to nearest. "
                        "Values out of range, and NaN or infinity into an integer type, are "
                        "refused all the same")
    p.add_argument("-o", "--out", type=Path, required=True,
                   help="the image (.bin; its sidecar .json is written beside it) or, reading "
                        "an image back, the tensor (.npy)")
    _layout_options(p)
    p.set_defaults(func=_layout_convert, prog=p.prog)
    p = lsub.add_parser("explain", help="print the address map of a shape in a format",
                        description="Print where each run of elements of a tensor lies in "
                                    "memory, in address order (tensors of up to "
                                    f"{EXPLAIN_MAX_ELEMENTS:,} elements).")
    p.add_argument("--format", choices=("nvdla-feature", "sophgo", "dmp"), required=True)
    p.add_argument("--shape", required=True, metavar="N,C,H,W")
    p.add_argument("--limit", type=_at_least(1), default=48, help="rows to print (default 48)")
    _layout_options(p)
    p.set_defaults(func=_layout_explain, prog=p.prog)
    dma = sub.add_parser("dma", help="DMA engine tools").add_subparsers(
        dest="dma_command", required=True)
    p = dma.add_parser("compile", help="a layout conversion as a descriptor chain (binary and "
                                       "listing)",
                       description="Compile the conversion of a dense NCHW tensor (OIHW "
                                   "kernels for nvdla-weights) at --dense into a format at "
                                   "--image, or back with --unpack, into the DMA engine's "
                                   "descriptors, laid out as a chain at --chain: -o (a .bin, "
                                   "128 bytes a descriptor, as dma_descriptor.h's struct) and a "
                                   "readable listing beside it (.txt). Firmware loads the "
                                   ".bin at --chain and starts the chain.")
    p.add_argument("--format", choices=DMA_FORMATS, required=True,
                   help="the layout: nhwc (dense), nvdla-feature, nvdla-pixel (a pixel image "
                        "to its channels: with --unpack), sophgo (local memory image of every "
                        "NPU), dmp, nvdla-weights (direct convolution)")
    p.add_argument("--shape", required=True, metavar="N,C,H,W",
                   help="the tensor's shape (K,C,R,S for nvdla-weights)")
    p.add_argument("--dense", type=_u32, required=True, help="address of the dense tensor")
    p.add_argument("--image", type=_u32, required=True, help="address of the layout's image")
    p.add_argument("--chain", type=_u32, required=True,
                   help="address the chain is loaded at (128-byte aligned)")
    p.add_argument("--unpack", action="store_true", help="image -> dense instead")
    p.add_argument("--addr-width", type=_at_least(12, 32), default=32,
                   help="the engine's address bits (default 32): every byte read or written "
                        "must lie below 2**addr_width")
    p.add_argument("-o", "--out", type=Path, required=True,
                   help="the chain (.bin); its listing (.txt) is written beside it")
    p.add_argument("--dense-type", choices=tuple(DMA_TYPES),
                   help="nvdla-feature, nvdla-pixel, dmp: the dense tensor's element type, when "
                        "it is not the format's: the engine converts each element in the same "
                        "pass, (x - offset) * scale / 2**shift (docs/dma.md lists the pairs)")
    p.add_argument("--offset", type=_offsets, default=(0,),
                   help="the conversion's offset, subtracted first (default 0); for "
                        "nvdla-pixel one or a mean per channel, comma-separated")
    p.add_argument("--scale", type=_at_least(-32768, 32767), default=1,
                   help="the conversion's scale (default 1)")
    p.add_argument("--shift", type=_at_least(0, 31), default=0,
                   help="the conversion divides by 2**shift (default 0)")
    _layout_options(p)
    p.set_defaults(func=_dma_compile, prog=p.prog)
    _board_parser(sub)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError, MemoryError) as e:
        # ValueError: every model check (FormatError, WeightError, ...) and numpy's own;
        # OSError: a file that cannot be read or written; MemoryError: a machine smaller than
        # the 1 GiB the checks allow
        if isinstance(e, OSError) and e.filename is not None:
            text = f"{e.filename}: {e.strerror or e}"
        elif isinstance(e, MemoryError):
            text = "out of memory"
        else:
            text = str(e)
        print(f"{args.prog}: {' '.join(text.split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
