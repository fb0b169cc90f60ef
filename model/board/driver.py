"""The host driver of a board running the atomcube SoC (``docs/board.md``).

:class:`Link` speaks the bridge's protocol over anything with pyserial's ``write(bytes)`` and
``read(n) -> bytes`` (a ``serial.Serial``, or the cocotb bench's simulated line). :class:`Board`
uses it to load memory, program the blocks through their register maps and run them; its
``convert``, ``decompress`` and ``lut`` methods each run one job and compare the result with the
golden model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from atomcube.model.regmap import BusError, Driver, Resp

from ..registers.dma import DMA
from ..registers.dma import program_chain as dma_chain
from ..registers.lut import LUT_SDP
from ..registers.lut import program as lut_program
from ..registers.soc import LUT_PORT, SOC_ID, SOC_MAP, SYSCTL, LutPortError, lut_port_program
from ..registers.sparse import SPARSE
from ..registers.sparse import program as sparse_program
from .protocol import (
    MAX_WORDS,
    BridgeError,
    Command,
    ProtocolError,
    Status,
    decode_reply,
    encode_request,
    reply_length,
)

__all__ = ["Link", "Board", "JobResult", "open_serial", "first_diff", "check", "sigmoid_config"]


class Link:
    """Word reads and writes through the UART bridge. ``port`` has ``write(bytes)`` and
    ``read(n)`` (returning fewer bytes on a timeout)."""

    def __init__(self, port):
        self.port = port

    def _exchange(self, command: Command, address: int, words=None, count=None) -> list[int]:
        frame = encode_request(command, address, words, count)
        count = len(words) if words is not None else count
        self.port.write(frame)
        head = self._read(3)
        if head[0] != 0x5A:
            raise ProtocolError(f"reply starts with 0x{head[0]:02x}, not 0x5a")
        try:
            status = Status(head[1])
        except ValueError:
            raise ProtocolError(f"reply status {head[1]} is not a known status") from None
        rest = self._read(reply_length(command, count, status) - 3)
        status, index, data = decode_reply(head + rest)
        if status != Status.OK:
            raise BridgeError(status, address, index)
        return data

    def _read(self, n: int) -> bytes:
        got = self.port.read(n)
        if len(got) != n:
            raise ProtocolError(f"the board sent {len(got)} of {n} reply bytes before the "
                                f"timeout (is the SoC loaded and the baud rate right?)")
        return bytes(got)

    def read_words(self, address: int, count: int) -> list[int]:
        out = []
        for k in range(0, count, MAX_WORDS):
            out += self._exchange(Command.READ, address + 4 * k, count=min(MAX_WORDS, count - k))
        return out

    def write_words(self, address: int, words) -> None:
        words = [int(w) for w in words]
        for k in range(0, len(words), MAX_WORDS):
            self._exchange(Command.WRITE, address + 4 * k, words[k:k + MAX_WORDS])

    # the transport of model.regmap.Driver: bus errors become BusError
    def read(self, address: int) -> int:
        try:
            return self.read_words(address, 1)[0]
        except BridgeError as e:
            raise _bus_error("read", address, e) from None

    def write(self, address: int, value: int) -> None:
        try:
            self.write_words(address, [value])
        except BridgeError as e:
            raise _bus_error("write", address, e) from None


def _bus_error(op, address, e: BridgeError):
    if e.status == Status.SLVERR:
        return BusError(op, address, Resp.SLVERR)
    if e.status == Status.DECERR:
        return BusError(op, address, Resp.DECERR)
    return e


def open_serial(port: str, baud: int, timeout: float = 2.0):
    """A pyserial port (``pip install pyserial``, in the ``board`` extra): a device such as
    ``/dev/ttyUSB0`` or any URL pyserial knows (``socket://host:port``, ``rfc2217://...``)."""
    try:
        import serial
    except ImportError:
        raise RuntimeError("the board commands need pyserial: pip install -e '.[board]'") \
            from None
    return serial.serial_for_url(port, baudrate=baud, timeout=timeout)


@dataclass
class JobResult:
    """One job on the board: what ran, whether the board's bytes equal the model's, the first
    byte that differs (or None), the job's cycles as the block counted them."""

    what: str
    match: bool
    first_diff: int | None
    nbytes: int
    cycles: int


def first_diff(got: bytes, want: bytes) -> int | None:
    """The first byte at which ``got`` and ``want`` differ (the shorter length if one is a
    prefix of the other), or None when they are equal."""
    if got == want:
        return None
    n = min(len(got), len(want))
    a, b = np.frombuffer(got[:n], np.uint8), np.frombuffer(want[:n], np.uint8)
    bad = np.flatnonzero(a != b)
    return int(bad[0]) if bad.size else n


class Board:
    """The SoC on the far side of ``link``. ``poll`` is called between status polls (the
    simulated line passes; a real one sleeps briefly)."""

    def __init__(self, link: Link, *, poll: Callable[[], None] | None = None,
                 max_polls: int = 10_000):
        self.link = link
        self.poll = poll or (lambda: time.sleep(0.001))
        self.max_polls = max_polls
        bases = {w.name: w.base for w in SOC_MAP}
        self.sysctl = Driver(SYSCTL, link, base=bases["sysctl"])
        ident = self.sysctl.id.read().value
        if ident != SOC_ID:
            raise RuntimeError(f"sysctl.id reads 0x{ident:08x}, not 0x{SOC_ID:08x}: not an "
                               f"atomcube SoC")
        cfg = self.sysctl.config.read()
        self.mem_bytes = cfg.mem_kib * 1024
        self.data_bytes = cfg.data_bytes
        self.blocks = {k for k in ("dma", "sparse", "lut") if getattr(cfg, k)}
        self.lut_lanes = cfg.lut_lanes
        self.clock_khz = self.sysctl.clock.read().khz
        self.dma = Driver(DMA, link, base=bases["dma"])
        self.sparse = Driver(SPARSE, link, base=bases["sparse"])
        self.lut_unit = Driver(LUT_SDP, link, base=bases["lut"])
        self.lut_port = Driver(LUT_PORT, link, base=bases["lut_port"])

    def info(self) -> dict:
        return {"memory": f"{self.mem_bytes // 1024} KiB", "bus": f"{8 * self.data_bytes} bits",
                "clock": f"{self.clock_khz / 1000:g} MHz",
                "blocks": ", ".join(sorted(self.blocks)) or "none",
                "lut lanes": self.lut_lanes}

    # -- memory ----------------------------------------------------------------------------------

    def write_bytes(self, address: int, data: bytes) -> None:
        """Write ``data`` at ``address`` (both multiples of 4 after padding with zeros)."""
        if address % 4:
            raise ValueError(f"address 0x{address:x}: must be a multiple of 4")
        data = bytes(data) + bytes(-len(data) % 4)
        self._check_range(address, len(data))
        self.link.write_words(address, np.frombuffer(data, "<u4").tolist())

    def read_bytes(self, address: int, n: int) -> bytes:
        if address % 4:
            raise ValueError(f"address 0x{address:x}: must be a multiple of 4")
        self._check_range(address, n)
        words = self.link.read_words(address, (n + 3) // 4)
        return np.array(words, "<u4").tobytes()[:n]

    def _check_range(self, address, n):
        if address + n > self.mem_bytes:
            raise ValueError(f"0x{address:x} + {n} bytes: passes the end of the board's "
                             f"{self.mem_bytes}-byte memory")

    def _need(self, block):
        if block not in self.blocks:
            raise RuntimeError(f"this SoC build has no {block} block (it has: "
                               f"{', '.join(sorted(self.blocks)) or 'none'})")

    def wait(self, drv, what) -> object:
        """Poll ``drv.status`` until a job is done, clear done and error, return the status."""
        for _ in range(self.max_polls):
            st = drv.status.read()
            if st.done and not st.busy:
                drv.status.write(done=1, error=1)
                return st
            self.poll()
        raise TimeoutError(f"{what}: no done after {self.max_polls} status polls")

    # -- jobs --------------------------------------------------------------------------------------

    def convert(self, program, src_at: int, src: bytes, dst_at: int, want: bytes,
                chain_at: int, what: str = "layout") -> JobResult:
        """Run a DMA program (a :class:`model.dma.descriptor.Program`) as a chain at
        ``chain_at`` on ``src`` loaded at ``src_at``; compare ``want`` with the bytes at
        ``dst_at``."""
        self._need("dma")
        self.write_bytes(src_at, src)
        self.write_bytes(chain_at, program.chain(chain_at))
        for name, fields in dma_chain(chain_at):
            self.dma.write(name, **fields)
        self.wait(self.dma, what)
        err = self.dma.error.read()
        if err.code:
            raise RuntimeError(f"{what}: the DMA engine stopped with error code {err.code} at "
                               f"descriptor {err.index}")
        got = self.read_bytes(dst_at, len(want))
        return JobResult(what, got == want, first_diff(got, want), len(want),
                         self.dma.cycles.read().value)

    def decompress(self, packed, base: int, what: str = "decompress") -> JobResult:
        """Decompress a :class:`model.nvdla.weights.CompressedWeights` with its surfaces from
        ``base``; compare the dense image with the model's."""
        from ..nvdla.weights import decompress, plan_job

        self._need("sparse")
        job = plan_job(packed, base=base, dst=True)
        self._check_range(job.dst_addr, job.dense_bytes)
        for name in ("wgs", "wmb", "weight"):
            self.write_bytes(getattr(job, f"{name}_addr"), getattr(packed, name).tobytes())
        for name, fields in sparse_program(job, stream=False):
            self.sparse.write(name, **fields)
        st = self.wait(self.sparse, what)
        if st.error:
            raise RuntimeError(f"{what}: the decompressor stopped with error code "
                               f"{self.sparse.error.read().code}")
        want = decompress(packed.weight, packed.wmb, packed.wgs, packed.spec).tobytes()
        got = self.read_bytes(job.dst_addr, len(want))
        return JobResult(what, got == want, first_diff(got, want), len(want),
                         self.sparse.cycles.read().value)

    def lut(self, cfg, samples, src_at: int, dst_at: int, what: str = "lut") -> JobResult:
        """Load a :class:`model.nvdla.lut.LutConfig` into the LUT unit, stream int32
        ``samples`` through it from ``src_at`` to ``dst_at``; compare with the model."""
        from ..nvdla.lut import evaluate

        self._need("lut")
        x = np.asarray(samples, dtype=np.int32)
        per = self.lut_lanes
        if x.size == 0 or x.size % per:
            raise ValueError(f"samples: {x.size} given, must be a positive multiple of the "
                             f"{per} lanes")
        self.write_bytes(src_at, x.astype("<i4").tobytes())
        for name, fields in lut_program(cfg, "sdp"):
            self.lut_unit.write(name, **fields)
        self.lut_unit.ctrl.write(start=1)
        for name, fields in lut_port_program(src_at, dst_at, x.size // per):
            self.lut_port.write(name, **fields)
        st = self.wait(self.lut_port, what)
        if st.error:
            code = LutPortError(self.lut_port.error.read().code)
            raise RuntimeError(f"{what}: the LUT port stopped with {code.name}")
        want = evaluate(x.astype(np.int64), cfg, "sdp").out.astype("<i4").tobytes()
        got = self.read_bytes(dst_at, len(want))
        return JobResult(what, got == want, first_diff(got, want), len(want),
                         self.lut_port.cycles.read().value)


# -- the jobs `atomcube board check` runs ------------------------------------------------------

def sigmoid_config(flavor: str = "sdp"):
    """The LUT fitting tool's sigmoid (split layout, as `atomcube lut fit` chooses it): inputs
    with 12 fraction bits, outputs with 15."""
    import math

    from ..nvdla.lut import LE, LO
    from ..nvdla.lut_fit import Formats, TableGeom, build_config

    fmt = Formats(12, 15, flavor)
    return build_config(lambda x: 0.5 * (1 + np.tanh(x / 2)), fmt,
                        TableGeom("linear", -48474, select=9),
                        TableGeom("linear", -15707, select=8),
                        {"hybrid_priority": LO, "uflow_priority": LE, "oflow_priority": LO},
                        (-math.inf, math.inf))


def check(board: Board, seed: int = 0, progress=lambda what: None) -> list[JobResult]:
    """One job per block the SoC has, each on random data from ``seed``, each compared with the
    model: NCHW int8 to NVDLA feature data (and, when the DMA engine has the conversion stage,
    a uint8 image into DMP's fp16 input in the same pass), a half-sparse int8 weight image
    decompressed, the sigmoid on 256 samples. Memory is laid out for 64 KiB."""
    from ..dma.compile import dmp, nvdla_feature
    from ..dmp.layout import DmpLayout
    from ..nvdla.feature import FeatureFormat
    from ..nvdla.precision import convert
    from ..nvdla.weights import WeightSpec, compress

    rng = np.random.default_rng(seed)
    results = []
    if board.mem_bytes < 64 * 1024:
        raise RuntimeError(f"check needs 64 KiB of board memory, this SoC has "
                           f"{board.mem_bytes // 1024} KiB")
    if "dma" in board.blocks:
        progress("layout: NCHW int8 (1, 19, 5, 6) -> NVDLA feature data")
        fmt = FeatureFormat("int8", (1, 19, 5, 6))
        t = rng.integers(-128, 128, fmt.shape).astype(np.int8)
        want = fmt.pack(t).tobytes()
        board.write_bytes(0x4000, bytes(len(want)))
        results.append(board.convert(nvdla_feature(fmt, 0x0000, 0x4000), 0x0000, t.tobytes(),
                                     0x4000, want, 0xF000, "NCHW -> NVDLA feature, int8"))
        if board.dma.hwinfo.read().convert:
            progress("layout and precision: NCHW uint8 (1, 3, 6, 7) -> DMP fp16, mean 128, / 128")
            lay = DmpLayout((1, 3, 6, 7))
            x = rng.integers(0, 256, lay.shape).astype(np.uint8)
            want = lay.pack(convert(x, 128, 1 / 128, "fp16")).tobytes()
            board.write_bytes(0x4000, bytes(len(want)))
            results.append(board.convert(dmp(lay, 0x0000, 0x4000, dense_type="uint8", offset=128,
                                             shift=7), 0x0000, x.tobytes(), 0x4000, want,
                                         0xF000, "NCHW uint8 -> DMP fp16, one pass"))
    if "sparse" in board.blocks:
        progress("decompress: int8 weights (40, 24, 1, 3), half zeros")
        spec = WeightSpec("dc", "int8", (40, 24, 1, 3))
        w = rng.integers(-128, 128, spec.shape).astype(np.int8)
        w[rng.random(spec.shape) < 0.5] = 0
        results.append(board.decompress(compress(spec.layout(w)), base=0x8000,
                                        what="decompress, int8, 50 % zeros"))
    if "lut" in board.blocks:
        progress("lut: sigmoid on 256 samples")
        x = rng.integers(-(1 << 16), 1 << 16, 256).astype(np.int32)
        results.append(board.lut(sigmoid_config(), x, 0xC000, 0xD000, "LUT sigmoid, 256 samples"))
    return results
