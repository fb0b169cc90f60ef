"""Fitting the FP16 pipeline's tables (``model.nvdla.lut_fit_fp16``, ``atomcube lut fit
--precision fp16``): the measure, NVDLA's own tables, and fits against them."""

import json

import numpy as np
import pytest

from atomcube.model import cli
from atomcube.model.nvdla.lut import LO, LutConfig
from atomcube.model.nvdla.lut_fit_fp16 import (
    FP16_MAX,
    finite_fp16,
    fit_fp16,
    measure_fp16,
    nvdla_baseline_fp16,
    ulp16,
)


def test_every_finite_fp16_input():
    x = finite_fp16()
    assert x.size == 63487                        # 2^16 less NaNs and infinities, one zero
    assert x[0] == -FP16_MAX and x[-1] == FP16_MAX and np.all(np.diff(x) > 0)
    assert finite_fp16((0.0, 1.0)).size == 15361  # 0, the denormals, 14 binades and 1.0


def test_ulp_units():
    assert list(ulp16([1.0, 0.75, -3.0, 2.0 ** -14, 1e-6, 0.0, 60000.0])) == [
        2.0 ** -10, 2.0 ** -11, 2.0 ** -9, 2.0 ** -24, 2.0 ** -24, 2.0 ** -24, 32.0]


def test_measure_counts_what_the_model_gives():
    # a table holding f's own FP16 values at its nodes is exact there and nowhere worse than
    # interpolating a line: f(x) = x/2 over [0, 32] is exact in between too
    xs = np.arange(257) / 8.0
    cfg = LutConfig(precision="fp16", lo_table=(xs / 2).astype(np.float16), lo_start=0.0,
                    lo_end=32.0, lo_index_select=-3, le_start=3e38, le_end=3e38,
                    uflow_priority=LO, oflow_priority=LO, hybrid_priority=LO)
    rep = measure_fp16(cfg, lambda x: x / 2, (0.0, 32.0))
    assert rep.max_ulp == 0 and rep.samples == finite_fp16((0.0, 32.0)).size
    # one entry off by one FP16 step shows as that many ULP at its node
    table = (xs / 2).astype(np.float16)
    table[100] = np.nextafter(table[100], np.float16(np.inf))
    rep = measure_fp16(cfg.replace(lo_table=table), lambda x: x / 2, (0.0, 32.0))
    assert rep.max_ulp == 1.0 and 12.375 < rep.worst_x < 12.625     # its two segments


@pytest.mark.parametrize("name, start, select, worst", [("sigmoid", -16.0, -3, 4.706),
                                                        ("tanh", -4.0, -5, 5.000)])
def test_nvdla_tables(name, start, select, worst):
    base = nvdla_baseline_fp16(name)
    cfg = base.config
    assert cfg.lo_index_select == select and cfg.lo_start == int(np.float32(start).view(np.int32))
    f = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}[name]
    nodes = start + np.arange(257) * 2.0 ** select
    assert np.array_equal(cfg.lo_table.astype(np.int16).view(np.float16),
                          f(nodes).astype(np.float16))
    assert base.report.max_ulp == pytest.approx(worst, abs=1e-3)


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_fit_halves_nvdlas_error(name):
    res = fit_fp16(name)
    base = nvdla_baseline_fp16(name)
    assert res.config.precision == "fp16"
    assert res.report.max_ulp <= 0.5 * base.report.max_ulp
    f = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}[name]
    again = measure_fp16(res.config, f)
    assert again.max_ulp == pytest.approx(res.report.max_ulp, rel=1e-9)
    assert again.samples == 63487


def test_cli_fp16_fit_writes_its_configuration(tmp_path, capsys):
    out = tmp_path / "exp.json"
    rc = cli.main(["lut", "fit", "exp", "--precision", "fp16", "--x-min", "-1", "--x-max", "1",
                   "--json", str(out)])
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert "FP16 ULP" in printed.out and "refining" in printed.err
    doc = json.loads(out.read_text())
    cfg = LutConfig.from_dict(doc["config"])
    rep = measure_fp16(cfg, np.exp, (-1.0, 1.0))
    assert doc["precision"] == "fp16" and cfg.precision == "fp16"
    assert doc["report"]["max error (FP16 ULP)"] == round(rep.max_ulp, 3) < 3
    # the register program, FP16 pipeline first; replayed into the register model it gives
    # back the configuration
    from atomcube.model.registers.lut import LUT_SDP, config_from_registers

    assert doc["registers"][0] == {"register": "data_format", "fields": {"proc_precision": 2}}
    words = {}
    for offset, word in doc["writes"]:
        name = next(r.name for r in LUT_SDP if r.offset == offset)
        words.setdefault(name, word)
    back = config_from_registers(words, cfg.le_table, cfg.lo_table, "sdp")
    assert back.to_dict() == cfg.to_dict()
