"""The ``atomcube`` command.

    atomcube regs [MAP ...] [--format md|c|json] [--out DIR]
    atomcube lut fit FUNCTION --in-frac N --out-frac N [--plot PNG] [--json FILE] ...

Later subcommands (``weights``, ``layout``) hang off the same parser.
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
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
