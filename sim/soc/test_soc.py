"""cocotb bench for the SoC (hw/top/soc.py) through its UART, end to end.

The host side is the real host driver (:mod:`model.board.driver`), run in a bridge thread and
talking over a simulated serial line (:class:`sim.uart.SimSerial`) with random idle gaps between
bytes; the memory behind the arbiter stalls at random (``ram_stalls``), so every manager sees
backpressure. Each block's job result is compared byte for byte with the golden model.
"""

import cocotb
import numpy as np
from cocotb.task import bridge

from atomcube.hw.top.soc import SocConfig
from atomcube.model.board.driver import Board, Link
from atomcube.model.board.protocol import (
    REQUEST_SYNC,
    Command,
    Status,
    checksum,
    decode_reply,
    encode_request,
)
from atomcube.model.registers.soc import SOC_ID, LutPortError
from atomcube.sim.harness import reset, rng, start_clock
from atomcube.sim.runner import params
from atomcube.sim.uart import SimSerial

TIMEOUT = dict(timeout_time=400, timeout_unit="ms")
SYSCTL = 0x1000_0000


def divisor():
    p = params()
    return round(p.get("clk_hz", 25_000_000) / p.get("baud", 115_200))


async def start(dut, salt=0):
    start_clock(dut)
    r = rng(salt)
    line = SimSerial(dut, divisor(), rng=r)
    await reset(dut)
    return line, r


def board(line):
    """The host driver over the simulated line (call inside a bridge thread)."""
    return Board(Link(line), poll=lambda: line.idle(64))


async def exchange(line, frame: bytes, reply_bytes: int):
    await line.send(frame)
    return decode_reply(await line.recv(reply_bytes))


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def test_identity_and_memory(dut):
    """sysctl identifies the SoC; words written through the bridge read back, across frames
    (more than 256 words) and at the last word of memory."""
    line, r = await start(dut, 1)
    size = params().get("mem_bytes", 65536)

    @bridge
    def host():
        b = board(line)
        assert b.mem_bytes == size, f"config.mem_kib says {b.mem_bytes}, built with {size}"
        b.sysctl.scratch.write(value=0x1234_5678)
        assert b.sysctl.scratch.read().value == 0x1234_5678
        data = bytes(r.getrandbits(8) for _ in range(4 * 300 + 8))
        at = 8 * r.randrange(size // 16)
        b.write_bytes(at, data)
        assert b.read_bytes(at, len(data)) == data, "memory read back differs"
        b.write_bytes(size - 4, b"\x01\x02\x03\x04")
        assert b.read_bytes(size - 8, 8)[4:] == b"\x01\x02\x03\x04"
        return b.info()

    info = await host()
    dut._log.info("board: %s; %d bytes over the line", info, line.bytes_sent)
    assert line.frame_errors == 0


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def test_protocol_errors(dut):
    """Every error the protocol names: a bad checksum, an unknown command and a misaligned
    address change nothing; DECERR and SLVERR name the failing word, with the words before it
    done; a request cut short is answered TIMEOUT; a byte with a broken stop bit is dropped."""
    line, r = await start(dut, 2)
    size = params().get("mem_bytes", 65536)
    link_words = [r.getrandbits(32) for _ in range(4)]
    ok = encode_request(Command.WRITE, 0x100, link_words)

    # bad checksum: nothing written (an earlier test may have left data at 0x100, so the
    # words are compared with what was there before, not with zero)
    before = await exchange(line, encode_request(Command.READ, 0x100, count=4), 20)
    assert before[:2] == (Status.OK, 3), before
    bad = ok[:-1] + bytes([(ok[-1] + 1) & 0xFF])
    assert await exchange(line, bad, 4) == (Status.CHECKSUM, 0, [])
    assert await exchange(line, encode_request(Command.READ, 0x100, count=4), 20) == before
    # unknown command, misaligned address
    body = bytes([7]) + (0x100).to_bytes(4, "little") + b"\x00"
    assert (await exchange(line, bytes([REQUEST_SYNC]) + body + bytes([checksum(body)]), 4))[0] \
        == Status.COMMAND
    body = bytes([Command.READ]) + (0x102).to_bytes(4, "little") + b"\x00"
    assert (await exchange(line, bytes([REQUEST_SYNC]) + body + bytes([checksum(body)]), 4))[0] \
        == Status.ALIGN
    # a write running off the end of memory: DECERR at the first word past it
    top = size - 8
    st = await exchange(line, encode_request(Command.WRITE, top, link_words), 4)
    assert st == (Status.DECERR, 2, []), st
    assert await exchange(line, encode_request(Command.READ, top, count=2), 12) == \
        (Status.OK, 1, link_words[:2])
    # nothing mapped there; a hole in the sysctl map answers SLVERR
    assert (await exchange(line, encode_request(Command.READ, 0x2000_0000, count=1), 4)) == \
        (Status.DECERR, 0, [])
    assert (await exchange(line, encode_request(Command.READ, SYSCTL + 0x10, count=2), 4)) == \
        (Status.SLVERR, 1, [])
    # a request that stops arriving
    await line.send(ok[:5])
    assert decode_reply(await line.recv(4, timeout_bits=2000)) == (Status.TIMEOUT, 0, [])
    # a byte with a low stop bit is dropped: the frame that follows still works
    await line.send(b"\xa5", stop_bit=0)
    await line.send(b"\xff")
    assert await exchange(line, encode_request(Command.READ, SYSCTL, count=1), 8) == \
        (Status.OK, 0, [SOC_ID])
    assert line.frame_errors == 0


def _needs(*blocks):
    p = params()
    return not all(p.get(b, True) for b in blocks)


@cocotb.test(skip=_needs("dma"), **TIMEOUT)
async def test_layout_conversion(dut):
    """NCHW to NVDLA feature data and back (int8, odd channel count), as the DMA engine's
    chain from memory; each result equals the format model's image byte for byte."""
    from atomcube.model.dma.compile import nvdla_feature
    from atomcube.model.nvdla.feature import FeatureFormat

    line, r = await start(dut, 3)
    nr = np.random.default_rng(r.getrandbits(32))
    shape = (1, 19, 5, 6)
    fmt = FeatureFormat("int8", shape)
    t = nr.integers(-128, 128, shape).astype(np.int8)
    dense, image, chain = 0x0000, 0x4000, 0xF000

    @bridge
    def host():
        b = board(line)
        image_bytes = fmt.pack(t).tobytes()
        b.write_bytes(image, bytes(len(image_bytes)))
        packed = b.convert(nvdla_feature(fmt, dense, image), dense, t.tobytes(), image,
                           image_bytes, chain, "NCHW -> NVDLA feature")
        b.write_bytes(dense, bytes(t.size))
        unpacked = b.convert(nvdla_feature(fmt, dense, image, unpack=True), image, image_bytes,
                             dense, t.tobytes(), chain + 0x800, "NVDLA feature -> NCHW")
        return packed, unpacked

    for res in await host():
        assert res.match, f"{res.what}: byte {res.first_diff} differs from the model"
        dut._log.info("%s: %d bytes, %d cycles", res.what, res.nbytes, res.cycles)


@cocotb.test(skip=_needs("dma", "sparse", "lut"), **TIMEOUT)
async def test_host_check(dut):
    """What `atomcube board check` runs (model.board.driver.check): a layout conversion, a
    layout and precision conversion in one pass (the SoC's DMA has the conversion stage), a
    decompression and the sigmoid, each equal to the model."""
    from atomcube.model.board.driver import check

    line, r = await start(dut, 4)

    @bridge
    def host():
        return check(board(line), seed=r.getrandbits(16))

    results = await host()
    assert any("one pass" in res.what for res in results) == SocConfig(**params()).dma_convert
    for res in results:
        assert res.match, f"{res.what}: byte {res.first_diff} differs from the model"
        dut._log.info("%s: %d bytes, %d cycles", res.what, res.nbytes, res.cycles)


@cocotb.test(skip=_needs("lut"), **TIMEOUT)
async def test_lut(dut):
    """The fitted sigmoid on random samples and on the table edges, through the LUT port; and
    the port's errors (the LUT unit not started, a misaligned address, no beats, a source past
    the end of the address space) end in error codes."""
    from atomcube.sim.lut.test_lut import fitted_config

    line, r = await start(dut, 5)
    cfg = fitted_config("sdp")
    nr = np.random.default_rng(r.getrandbits(32))
    x = np.concatenate([nr.integers(-(1 << 20), 1 << 20, 96),
                        [cfg.le_start, cfg.le_end, cfg.lo_start, cfg.lo_end,
                         -(1 << 31), (1 << 31) - 1, 0, 1]]).astype(np.int32)

    fill = bytes(r.getrandbits(8) for _ in range(64))
    # samples, results and the refused jobs' destination in each quarter of memory (the
    # smallest SoC has 4 KiB)
    q = min(params().get("mem_bytes", 65536) // 4, 0x1000)
    src, dst, refused = q, 2 * q, 3 * q

    @bridge
    def host():
        b = board(line)
        res = b.lut(cfg, x, src, dst, "sigmoid")
        # the refused jobs' destination, filled first: an earlier test may have left data there
        b.write_bytes(refused, fill)
        # not started: the port refuses rather than waiting for ever
        for name, fields in (("src_addr", {"value": src}), ("dst_addr", {"value": refused}),
                             ("beats", {"value": 4}), ("ctrl", {"start": 1})):
            b.lut_port.write(name, **fields)
        st = b.wait(b.lut_port, "idle LUT")
        idle = (st.error, b.lut_port.error.read().code)
        b.lut_unit.ctrl.write(start=1)
        b.lut_port.src_addr.write(value=src + (4 if b.lut_lanes > 1 else 2))
        b.lut_port.ctrl.write(start=1)
        st = b.wait(b.lut_port, "misaligned")
        align = (st.error, b.lut_port.error.read().code)
        # no beats, then a source that runs past the end of the address space
        sizes = []
        for addr, beats in ((src, 0), ((1 << 32) - 8, 4)):
            b.lut_port.src_addr.write(value=addr)
            b.lut_port.beats.write(value=beats)
            b.lut_port.ctrl.write(start=1)
            st = b.wait(b.lut_port, "oversize")
            sizes.append((st.error, b.lut_port.error.read().code))
        untouched = b.read_bytes(refused, 64)
        return res, idle, align, sizes, untouched

    res, idle, align, sizes, untouched = await host()
    assert res.match, f"{res.what}: byte {res.first_diff} differs from the model"
    assert idle == (1, LutPortError.LUT_IDLE), idle
    assert align == (1, LutPortError.ALIGN), align
    assert sizes == [(1, LutPortError.SIZE)] * 2, sizes
    assert untouched == fill, "a refused job wrote to its destination"
    dut._log.info("%s: %d samples, %d cycles", res.what, x.size, res.cycles)


@cocotb.test(skip=_needs("dma", "sparse", "lut"), **TIMEOUT)
async def test_all_blocks_at_once(dut):
    """The DMA engine, the decompressor and the LUT port run at the same time, all three on the
    one memory port: each result still equals the model's. A DMA read outside memory ends in
    the engine's read error, through the arbiter, where the engine reaches past the memory;
    where it reaches no further (``SocConfig.dma_addr_width``), in its own range check."""
    from atomcube.model.dma.compile import dense_transpose
    from atomcube.model.dma.descriptor import Descriptor, Dim, Error
    from atomcube.model.dma.executor import execute
    from atomcube.model.nvdla.lut import evaluate
    from atomcube.model.nvdla.weights import WeightSpec, compress, decompress, plan_job
    from atomcube.model.registers.dma import program_chain
    from atomcube.model.registers.lut import program as lut_program
    from atomcube.model.registers.soc import lut_port_program
    from atomcube.model.registers.sparse import program as sparse_program
    from atomcube.sim.lut.test_lut import fitted_config

    line, r = await start(dut, 6)
    nr = np.random.default_rng(r.getrandbits(32))
    t = nr.integers(0, 256, (1, 24, 5, 8)).astype(np.uint8)
    prog = dense_transpose(t.shape, 1, 0x0000, 0x1000)
    mem = np.zeros(0x2000, np.uint8)
    mem[:t.size] = t.ravel()
    execute(prog, mem)
    spec = WeightSpec("dc", "int8", (32, 16, 1, 1))
    w = nr.integers(-128, 128, spec.shape).astype(np.int8)
    w[nr.random(spec.shape) < 0.3] = 0
    packed = compress(spec.layout(w))
    job = plan_job(packed, base=0x4000, dst=True)
    dense = decompress(packed.weight, packed.wmb, packed.wgs, spec).tobytes()
    cfg = fitted_config("sdp")
    x = nr.integers(-(1 << 20), 1 << 20, 256).astype(np.int32)
    want_lut = evaluate(x.astype(np.int64), cfg, "sdp").out.astype("<i4").tobytes()

    @bridge
    def host():
        b = board(line)
        b.write_bytes(0, t.tobytes())
        b.write_bytes(0x8000, prog.chain(0x8000))
        for name in ("wgs", "wmb", "weight"):
            b.write_bytes(getattr(job, f"{name}_addr"), getattr(packed, name).tobytes())
        b.write_bytes(0xA000, x.tobytes())
        for name, fields in lut_program(cfg, "sdp"):
            b.lut_unit.write(name, **fields)
        b.lut_unit.ctrl.write(start=1)
        # the three starts, back to back
        for name, fields in sparse_program(job, stream=False):
            b.sparse.write(name, **fields)
        for name, fields in lut_port_program(0xA000, 0xB000, x.size // b.lut_lanes):
            b.lut_port.write(name, **fields)
        for name, fields in program_chain(0x8000):
            b.dma.write(name, **fields)
        st = [b.wait(d, n) for d, n in ((b.dma, "dma"), (b.sparse, "sparse"),
                                         (b.lut_port, "lut port"))]
        out = (b.read_bytes(0x1000, t.size), b.read_bytes(job.dst_addr, len(dense)),
               b.read_bytes(0xB000, len(want_lut)), [s.error for s in st])
        # a DMA read past the end of memory
        bad = Descriptor(b.mem_bytes - 64, 0x1000, 1, (Dim(128, 1, 1),))
        b.write_bytes(0x8000, type(prog)([bad]).chain(0x8000))
        for name, fields in program_chain(0x8000):
            b.dma.write(name, **fields)
        b.wait(b.dma, "dma read error")
        reach = 1 << b.dma.hwinfo.read().addr_width
        return out, b.dma.error.read().code, Error.READ_ERROR if reach > b.mem_bytes \
            else Error.RANGE

    (got_t, got_dense, got_lut, errors), code, want = await host()
    assert errors == [0, 0, 0], errors
    assert got_t == bytes(mem[0x1000:0x1000 + t.size]), "transpose differs from the executor"
    assert got_dense == dense, "dense weights differ from the model"
    assert got_lut == want_lut, "LUT results differ from the model"
    assert code == want, f"DMA error code {code}, expected {want.name}"
