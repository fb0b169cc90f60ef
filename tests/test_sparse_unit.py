"""The sparse weight decompressor at the Amaranth level: parameters, ports, register map and the
register program. Its behaviour is checked by the cocotb bench (sim/sparse/test_sparse.py)
against the weights model."""

import numpy as np
import pytest
from amaranth.back import verilog

from hw.sparse.decompressor import SparseDecompressor, atom_layout
from hw.sparse.engines import StreamReader
from model.nvdla.weights import WeightSpec, compress, plan_job
from model.registers.sparse import SPARSE, Error, program


@pytest.mark.parametrize("kw, msg", [
    (dict(data_width=32), "data_width must be 64, 128, 256 or 512, not 32"),
    (dict(atom_elements=16), "atom_elements must be 32 or 64, not 16"),
    (dict(max_burst=12), "max_burst must be a power of two up to 256, not 12"),
    (dict(max_burst=32, fifo_depth=16), "fifo_depth 16 must hold a burst of 32 beats"),
])
def test_parameters_rejected(rejected, kw, msg):
    with rejected(ValueError, msg):
        SparseDecompressor(**kw)


def test_reader_needs_id_bits(rejected):
    with rejected(ValueError, "3 streams need more than 1 ID bits"):
        StreamReader(streams=3, data_width=64, id_width=1)


def test_ports_in_verilog():
    text = verilog.convert(SparseDecompressor(data_width=64, atom_elements=32), name="sparse",
                           emit_src=False)
    for port in ("s_axil__awaddr", "m_axi__arid", "m_axi__rdata", "m_axi__awlen",
                 "m_axi__wstrb", "m_axi__bresp", "o_atoms__payload", "o_atoms__ready", "irq"):
        assert f" {port}" in text, port
    assert "[63:0] m_axi__rdata" in text
    assert f"[{atom_layout(32).size - 1}:0] o_atoms__payload" in text


def test_error_codes_are_documented():
    doc = SPARSE["error"].field("code").doc
    for e in Error:
        if e:
            assert f"{e.value} " in doc, e


def test_program_runs_the_job():
    spec = WeightSpec("deconv", "int16", (20, 7, 3, 3), (2, 2))
    w = np.ones(spec.shape, np.int16)
    job = plan_job(compress(spec.layout(w)), base=0x4000, dst=True)
    writes = program(job)
    values = {name: fields for name, fields in writes[:-1]}
    assert values["groups"]["value"] == 8 and values["kernels"]["value"] == 20
    assert values["bytes_per_kernel"]["value"] == 7 * 2 * 2 * 2
    assert values["precision"]["two_byte"] == 1
    assert values["dst_addr"]["value"] == job.dst_addr
    assert writes[-1] == ("ctrl", {"start": 1, "stream_enable": 1, "write_enable": 1})
    for name, fields in writes:
        SPARSE[name].encode(fields)         # every value fits its field
    assert program(plan_job(compress(spec.layout(w))), stream=False)[-1][1] == \
        {"start": 1, "stream_enable": 0, "write_enable": 0}
