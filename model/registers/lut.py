"""The LUT unit's registers and the register program that loads a
:class:`model.nvdla.lut.LutConfig`.

- 0x000 to 0x00c: run control, status, interrupt enables, and what the unit was built with.
- 0x010: the pipeline's precision (NVDLA's ``D_DATA_FORMAT.PROC_PRECISION``).
- 0x020 to 0x05c: NVDLA's ``S_LUT_*`` configuration group and the table access window. SDP has
  32-bit START/END registers; CDP splits its 38-bit values into ``*_low`` (bits 31:0) and
  ``*_high`` (bits 37:32).
- 0x060 on: the run's statistics counters (saturating), named per flavour
  (:data:`model.nvdla.lut.COUNTERS`).
"""

from __future__ import annotations

import numpy as np

from atomcube.model.nvdla.lut import COUNTERS, FLAVORS, LE, LO, LutConfig
from atomcube.model.regmap import Field, RegisterMap, reg

__all__ = ["lut_regmap", "program", "config_from_registers", "LUT_SDP", "LUT_CDP",
           "PRECISION_CODES", "PRECISION_RESERVED"]

_BOUNDS = ("le_start", "le_end", "lo_start", "lo_end")


def _control_registers(flavor: str):
    return [
        reg("ctrl", 0x000, "Run control.",
            Field("start", 0, 1, "W1P", doc="Start a run: clear the counters, accept samples "
                                            "until one marked last has left the output."),
            Field("perf_enable", 4, 1, "RW", reset=1, doc="Count statistics during runs.")),
        reg("status", 0x004, "Run status.",
            Field("busy", 0, 1, "R", doc="A run is in progress."),
            Field("done", 1, 1, "RW1C", doc="A run has ended (its last sample left)."),
            Field("table_write_refused", 2, 1, "RW1C",
                  doc="A table write came while a run was in progress; it was ignored."),
            Field("precision_refused", 3, 1, "RW1C",
                  doc="A data_format write came while a run was in progress, or named a "
                      "pipeline the unit was not built with; it was ignored.")),
        reg("irq_enable", 0x008, "Interrupt enables (irq = status & enables).",
            Field("done", 1, 1, "RW", doc="Interrupt when done."),
            Field("table_write_refused", 2, 1, "RW", doc="Interrupt on a refused table write."),
            Field("precision_refused", 3, 1, "RW",
                  doc="Interrupt on a refused data_format write.")),
        reg("hwinfo", 0x00C, "How the unit was built.",
            Field("lanes", 0, 5, "R", doc="Samples per transfer."),
            Field("flavor", 8, 1, "R", doc="0 = SDP, 1 = CDP."),
            Field("serial", 9, 1, "R", doc="1 = the serial datapath (one sample at a time, one "
                  "multiplier); 0 = the pipeline (`lanes` samples a cycle)."),
            Field("int_pipeline", 10, 1, "R", doc="1 = the integer pipeline is built in."),
            Field("fp16_pipeline", 11, 1, "R", doc="1 = the FP16 pipeline is built in.")),
    ]


def _counter_registers(flavor: str):
    return [reg(f"cnt_{name}", 0x060 + 4 * i, f"Statistics: {name} (saturating).",
                Field("value", 0, 32, "R", doc=f"Samples counted as {name} in the last run."))
            for i, name in enumerate(COUNTERS[flavor])]


#: ``data_format.proc_precision``'s codes (NVDLA's): 0 and 1 (int8, int16) choose the integer
#: pipeline, 2 the FP16 one; :data:`PRECISION_RESERVED` is refused
PRECISION_CODES = {"int8": 0, "int16": 1, "fp16": 2}
PRECISION_RESERVED = 3


def _config_registers(flavor: str):
    regs = [
        reg("data_format", 0x010, "The pipeline the next runs take (changed only while idle).",
            Field("proc_precision", 0, 2, "RWS",
                  doc="0 = int8, 1 = int16: the integer pipeline; 2 = fp16: the FP16 pipeline "
                      "(SDP); 3 reserved. Refused while busy, or for a pipeline not built in "
                      "(status.precision_refused); reads the pipeline chosen.")),
        reg("lut_access_cfg", 0x020, "Table access: address, table and direction.",
            Field("addr", 0, 10, "RW", doc="Entry address; each DATA access adds one (wraps "
                                           "at 1024)."),
            Field("table_id", 16, 1, "RW", doc="0 = LE table, 1 = LO table."),
            Field("access_type", 17, 1, "RW", doc="1 = DATA writes go to the table.")),
        reg("lut_access_data", 0x024, "Table data at the access address (int16).",
            Field("data", 0, 16, "RWS", doc="Entry; reads past the table's end return 0.")),
        reg("lut_cfg", 0x028, "Modes and priorities.",
            Field("le_function", 0, 1, "RW", doc="LE mode: 0 = exponential, 1 = linear."),
            Field("uflow_priority", 4, 1, "RW", doc="Both underflow: 0 = LE, 1 = LO."),
            Field("oflow_priority", 5, 1, "RW", doc="Both overflow: 0 = LE, 1 = LO."),
            Field("hybrid_priority", 6, 1, "RW", doc="Both hit or cross miss: 0 = LE, 1 = LO.")),
        reg("lut_info", 0x02C, "Index offset and selects (signed 8-bit each).",
            Field("le_index_offset", 0, 8, "RW", doc="LE exponential mode: exponent of entry 0."),
            Field("le_index_select", 8, 8, "RW", doc="LE linear mode: log2 of the step."),
            Field("lo_index_select", 16, 8, "RW", doc="LO: log2 of the step.")),
    ]
    off = 0x030
    for name in _BOUNDS:
        what = name.replace("_", " ").replace("le ", "LE ").replace("lo ", "LO ")
        if flavor == "sdp":
            regs.append(reg(name, off, f"{what} (signed 32-bit).",
                            Field("value", 0, 32, "RW", doc=f"{what}.")))
        else:
            regs.append(reg(f"{name}_low", off, f"{what}, bits 31:0.",
                            Field("value", 0, 32, "RW", doc=f"{what} [31:0].")))
            regs.append(reg(f"{name}_high", off + 4, f"{what}, bits 37:32.",
                            Field("value", 0, 6, "RW", doc=f"{what} [37:32].")))
        off += 8
    for t in ("le", "lo"):
        T = t.upper()
        regs.append(reg(f"{t}_slope_scale", off, f"{T} out-of-range slope scales (signed 16).",
                        Field("uflow_scale", 0, 16, "RW", doc="Underflow scale."),
                        Field("oflow_scale", 16, 16, "RW", doc="Overflow scale.")))
        regs.append(reg(f"{t}_slope_shift", off + 4, f"{T} out-of-range slope shifts.",
                        Field("uflow_shift", 0, 5, "RW", doc="0..15 right, 16..31 left by 32-n."),
                        Field("oflow_shift", 5, 5, "RW", doc="0..15 right, 16..31 left by 32-n.")))
        off += 8
    return regs


def lut_regmap(flavor: str) -> RegisterMap:
    if flavor not in FLAVORS:
        raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
    regs = _control_registers(flavor) + _config_registers(flavor) + _counter_registers(flavor)
    return RegisterMap(f"lut_{flavor}", tuple(regs),
                       doc=f"LUT unit, {flavor.upper()} flavour: run control, NVDLA's S_LUT_* "
                           "configuration registers, the table access window and the "
                           "statistics counters.")


LUT_SDP = lut_regmap("sdp")
LUT_CDP = lut_regmap("cdp")


def _u(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def _s(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def program(cfg: LutConfig, flavor: str) -> list[tuple[str, dict]]:
    """The register writes that load ``cfg``: configuration, then each table from entry 0.

    Each item is ``(register, {field: unsigned value})``, ready for
    ``Driver.write(register, **fields)``. The first chooses the pipeline: ``data_format`` with
    int8's code for the integer pipeline, fp16's for the FP16 one.
    """
    cfg.check(flavor)
    code = PRECISION_CODES["fp16" if cfg.precision == "fp16" else "int8"]
    w: list[tuple[str, dict]] = [
        ("data_format", {"proc_precision": code}),
        ("lut_cfg", {"le_function": cfg.le_function, "uflow_priority": cfg.uflow_priority,
                     "oflow_priority": cfg.oflow_priority,
                     "hybrid_priority": cfg.hybrid_priority}),
        ("lut_info", {"le_index_offset": _u(cfg.le_index_offset, 8),
                      "le_index_select": _u(cfg.le_index_select, 8),
                      "lo_index_select": _u(cfg.lo_index_select, 8)}),
    ]
    for name in _BOUNDS:
        v = getattr(cfg, name)
        if flavor == "sdp":
            w.append((name, {"value": _u(v, 32)}))
        else:
            w.append((f"{name}_low", {"value": _u(v, 32)}))
            w.append((f"{name}_high", {"value": _u(v >> 32, 6)}))
    for t in ("le", "lo"):
        w.append((f"{t}_slope_scale", {"uflow_scale": _u(getattr(cfg, f"{t}_uflow_scale"), 16),
                                       "oflow_scale": _u(getattr(cfg, f"{t}_oflow_scale"), 16)}))
        w.append((f"{t}_slope_shift", {"uflow_shift": getattr(cfg, f"{t}_uflow_shift"),
                                       "oflow_shift": getattr(cfg, f"{t}_oflow_shift")}))
    for table_id, table in ((LE, cfg.le_table), (LO, cfg.lo_table)):
        w.append(("lut_access_cfg", {"addr": 0, "table_id": table_id, "access_type": 1}))
        w += [("lut_access_data", {"data": _u(int(v), 16)}) for v in table]
    return w


def config_from_registers(words: dict, le_table, lo_table, flavor: str) -> LutConfig:
    """A configuration from raw register words (a register dump), keyed by register name.

    Signed fields are sign-extended as the hardware reads them; tables are int16 entries.
    """
    m = lut_regmap(flavor)
    names = {r.name for r in _config_registers(flavor)} - {"lut_access_cfg", "lut_access_data"}
    missing = [r.name for r in m if r.name in names and r.name not in words]
    if missing:
        raise ValueError(f"register dump lacks {', '.join(missing)}")
    f = {name: m[name].decode(words[name]) for name in words if name in names}
    code = f["data_format"]["proc_precision"]
    if code == PRECISION_RESERVED:
        raise ValueError(f"data_format.proc_precision: {PRECISION_RESERVED} is reserved (0 or "
                         f"1: the integer pipeline, 2: FP16)")
    kw = dict(
        precision="fp16" if code == PRECISION_CODES["fp16"] else "int",
        le_table=np.asarray(le_table), lo_table=np.asarray(lo_table),
        le_function=f["lut_cfg"]["le_function"],
        uflow_priority=f["lut_cfg"]["uflow_priority"],
        oflow_priority=f["lut_cfg"]["oflow_priority"],
        hybrid_priority=f["lut_cfg"]["hybrid_priority"],
        le_index_offset=_s(f["lut_info"]["le_index_offset"], 8),
        le_index_select=_s(f["lut_info"]["le_index_select"], 8),
        lo_index_select=_s(f["lut_info"]["lo_index_select"], 8),
    )
    for name in _BOUNDS:
        if flavor == "sdp":
            kw[name] = _s(f[name]["value"], 32)
        else:
            kw[name] = _s(f[f"{name}_low"]["value"] | f[f"{name}_high"]["value"] << 32, 38)
    for t in ("le", "lo"):
        for side in ("uflow", "oflow"):
            kw[f"{t}_{side}_scale"] = _s(f[f"{t}_slope_scale"][f"{side}_scale"], 16)
            kw[f"{t}_{side}_shift"] = f[f"{t}_slope_shift"][f"{side}_shift"]
    return LutConfig(**kw)
