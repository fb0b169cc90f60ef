"""A network build's report: JSON (net.json, also the manifest of weights.bin), Markdown and
a plot of density and compression per layer."""

from __future__ import annotations

from pathlib import Path

from ..report import md_table, table
from .flow import break_even


def _num(v, digits=6):
    return None if v is None else round(float(v), digits)


def layer_summary(b) -> dict:
    """One layer's figures: the report's row, and what a loader needs."""
    layer, s0 = b.layer, b.surfaces[0].spec
    comp = b.compressed_bytes
    return {
        "name": layer.name, "op": layer.op, "mode": b.mode,
        "shape": list(layer.weight.shape), "group": layer.group,
        "stride": list(layer.stride), "dilation": list(layer.dilation),
        "folded": layer.folded, "input": layer.input, "output": layer.output,
        "elements": b.elements, "zeros": b.zeros, "density": _num(b.density),
        "dense_bytes": b.dense_bytes, "compressed_bytes": comp,
        "ratio": _num(b.dense_bytes / comp) if comp else None,
        "compressed": b.compressed, "stored_bytes": b.stored_bytes,
        "prune_error": _num(b.prune_error), "total_error": _num(b.total_error),
        "scales": None if b.scales is None else [float(v) for v in b.scales],
        "winograd_scale": _num(b.winograd_scale, 9),
        "surfaces": len(b.surfaces), "kernels_per_group": s0.kernels_per_group,
        "aux": {k: {"scales": v} for k, v in b.aux_scales.items()},
        "warnings": b.warnings,
    }


def summary(build) -> dict:
    """net.json: the options, every layer, the plan of both buffers, and the totals."""
    o = build.options
    layers = [layer_summary(b) for b in build.layers]
    dense = sum(b.dense_bytes for b in build.layers)
    stored = sum(b.stored_bytes for b in build.layers)
    comp = [b.compressed_bytes for b in build.layers]
    return {
        "format": "atomcube-net", "version": 1, "model": build.network.path,
        "inputs": {k: list(v) for k, v in build.network.inputs.items()},
        "config": o.config.to_json(), "precision": o.precision, "compress": o.compress,
        "prune": o.prune, "prune_scope": o.prune_scope, "winograd": o.winograd,
        "totals": {
            "layers": len(layers), "parameters": build.network.parameters,
            "zeros": sum(b.zeros for b in build.layers),
            "dense_bytes": dense,
            "compressed_bytes": None if None in comp else sum(comp),
            "stored_bytes": stored,
            "weight_buffer": int(build.weight_buffer.size),
            "activation_buffer": max((r.offset + r.size for r in build.activation_regions),
                                     default=0),
        },
        "layers": layers,
        "weights": [vars(r) for r in build.weight_regions],
        "activations": [vars(r) for r in build.activation_regions],
    }


def _cells(r: dict) -> dict:
    """A layer's figures as the tables print them."""
    return {
        "layer": r["name"], "mode": r["mode"],
        "surfaces": r["mode"] + (f" x{r['surfaces']}" if r["surfaces"] > 1 else ""),
        "K x C x R x S": "x".join(map(str, r["shape"])), "density": f"{r['density']:.1%}",
        "dense bytes": f"{r['dense_bytes']:,}",
        "compressed bytes": "-" if r["compressed_bytes"] is None else
        f"{r['compressed_bytes']:,}",
        "ratio": "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
        "stored compressed": "yes" if r["compressed"] else "no",
        "pruning error": f"{r['prune_error']:.4f}", "total error": f"{r['total_error']:.4f}",
    }


def markdown(build) -> str:
    """The report as Markdown: what was built, a row per layer, the totals, the warnings."""
    s = build.summary
    t = s["totals"]
    o = build.options
    lines = [f"# {Path(build.network.path).name}", "",
             f"NVDLA {o.config.name}, {o.precision}; compression {o.compress}"
             f"{'' if o.config.compression else f' (not in {o.config.name})'}; "
             f"pruning {o.prune:.0%} ({o.prune_scope}); {t['layers']} weight layers, "
             f"{t['parameters']:,} parameters.", ""]
    keys = ("layer", "surfaces", "K x C x R x S", "density", "dense bytes", "compressed bytes",
            "ratio", "stored compressed", "pruning error", "total error")
    rows = [[_cells(r)[k] for k in keys] for r in s["layers"]]
    lines += [md_table(("layer", "mode", *keys[2:]), rows), ""]
    comp = "-" if t["compressed_bytes"] is None else f"{t['compressed_bytes']:,}"
    lines += [f"Totals: {t['zeros']:,} zeros of {t['parameters']:,} weights "
              f"({t['zeros'] / max(t['parameters'], 1):.1%}); dense {t['dense_bytes']:,} bytes, "
              f"compressed {comp}, stored {t['stored_bytes']:,}; weight buffer "
              f"{t['weight_buffer']:,} bytes, activation buffer {t['activation_buffer']:,} "
              f"bytes.", ""]
    warn = [f"- {r['name']}: {w}" for r in s["layers"] for w in r["warnings"]]
    if warn:
        lines += ["Warnings:", "", *warn, ""]
    lines += ["Density counts non-zero elements after pruning and quantisation. Errors are "
              "relative (‖w − w'‖ / ‖w‖): pruning alone, and pruning with quantisation "
              "(the weights the surfaces hold, dequantised). `net.json` holds every figure, "
              "the scales and the plan of both buffers.", ""]
    return "\n".join(lines)


def text(build) -> str:
    """What the command prints: a row per layer, then the totals."""
    s = build.summary
    t = s["totals"]
    keys = ("layer", "mode", "density", "dense bytes", "compressed bytes", "stored compressed",
            "total error")
    rows = [[_cells(r)[k] for k in keys] for r in s["layers"]]
    for row in rows:
        row[0] = row[0][:28]
    comp = "no compression" if t["compressed_bytes"] is None else \
        f"compressed {t['compressed_bytes']:,}"
    return "\n".join([
        table(("layer", "mode", "density", "dense", "compressed", "stored compressed", "error"),
              rows),
        f"{t['layers']} layers, {t['parameters']:,} weights, {t['zeros']:,} zeros "
        f"({t['zeros'] / max(t['parameters'], 1):.1%}); dense {t['dense_bytes']:,} bytes, "
        f"{comp}, stored {t['stored_bytes']:,}"])


def plot(build, path) -> None:
    """Density and compression ratio per layer, with the break-even density, as a PNG."""
    from ..nvdla.lut_fit import pyplot_and_function

    plt, _ = pyplot_and_function(None)
    s = build.summary
    names = [r["name"] for r in s["layers"]]
    x = range(len(names))
    fig, (a, b) = plt.subplots(2, 1, figsize=(max(6.0, 0.18 * len(names) + 2), 6), sharex=True)
    a.bar(x, [r["density"] for r in s["layers"]], color="tab:blue")
    a.axhline(1 - break_even(build.options.precision), color="tab:red", lw=1,
              label="break-even density")
    a.set_ylabel("density")
    a.set_ylim(0, 1.05)
    a.legend(loc="lower right", fontsize=8)
    ratios = [r["ratio"] or 0 for r in s["layers"]]
    b.bar(x, ratios, color=["tab:green" if v > 1 else "tab:gray" for v in ratios])
    b.axhline(1, color="tab:red", lw=1)
    b.set_ylabel("dense / compressed")
    if not build.options.config.compression:
        b.text(0.5, 0.5, f"{build.options.config.name} has no weight compression",
               transform=b.transAxes, ha="center")
    b.set_xticks(list(x))
    b.set_xticklabels(names, rotation=90, fontsize=6)
    a.set_title(f"{Path(build.network.path).name}: {build.options.config.name}, "
                f"{build.options.precision}",
                fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
