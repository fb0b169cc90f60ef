"""The ``atomcube`` command.

    atomcube regs [MAP ...] [--format md|c|json] [--out DIR]

Later subcommands (``lut``, ``weights``, ``layout``) hang off the same parser.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


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
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
