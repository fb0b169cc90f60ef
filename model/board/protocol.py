"""The UART bridge's framing protocol (``docs/board.md``): word reads and writes on the SoC's
32-bit bus, up to 256 words a frame, each frame checked by an 8-bit checksum.

Request, host to board::

    0xA5  command  address (4 bytes, little-endian)  count-1  [count words, little-endian]  sum

Reply, board to host::

    0x5A  status  index  [count words, little-endian: a read that succeeded]  sum

``command`` is 1 (read) or 2 (write); ``address`` is a byte address, a multiple of 4; words go
to or come from consecutive addresses. ``sum`` makes the bytes after the sync byte, the sum
byte included, add up to 0 modulo 256. ``index`` is ``count - 1`` when every word went through,
else the word at which the bus answered an error (words before it went through; none after it
was attempted). A frame with a bad checksum, an unknown command or a misaligned address changes
nothing. A request that stops arriving for longer than the timeout is answered ``TIMEOUT`` and
dropped.
"""

from __future__ import annotations

import enum

__all__ = ["REQUEST_SYNC", "REPLY_SYNC", "MAX_WORDS", "Command", "Status", "checksum",
           "encode_request", "reply_length", "decode_reply", "ProtocolError", "BridgeError"]

REQUEST_SYNC = 0xA5
REPLY_SYNC = 0x5A
MAX_WORDS = 256


class Command(enum.IntEnum):
    READ = 1
    WRITE = 2


class Status(enum.IntEnum):
    OK = 0
    CHECKSUM = 1      #: the request's bytes did not add up to 0
    COMMAND = 2       #: unknown command
    ALIGN = 3         #: address not a multiple of 4
    SLVERR = 4        #: the bus answered SLVERR at word ``index``
    DECERR = 5        #: the bus answered DECERR at word ``index`` (no register or memory there)
    TIMEOUT = 6       #: the request stopped arriving part way


class ProtocolError(Exception):
    """The reply was malformed: wrong sync byte, bad checksum, or too short."""


class BridgeError(Exception):
    """The bridge answered with an error status."""

    def __init__(self, status: Status, address: int, index: int):
        self.status, self.address, self.index = status, address, index
        where = f" at 0x{address + 4 * index:08x} (word {index})" \
            if status in (Status.SLVERR, Status.DECERR) else ""
        super().__init__(f"bridge answered {status.name}{where}")


def checksum(data: bytes) -> int:
    """The byte that makes ``data`` plus itself add up to 0 modulo 256."""
    return -sum(data) & 0xFF


def encode_request(command: Command, address: int, words=None, count: int | None = None) -> bytes:
    """One request frame. A read gives ``count``; a write gives ``words`` (ints of 32 bits)."""
    if not 0 <= address <= 0xFFFF_FFFF:
        raise ValueError(f"address 0x{address:x}: must fit in 32 bits")
    if address % 4:
        raise ValueError(f"address 0x{address:x}: must be a multiple of 4")
    if command == Command.WRITE:
        words = list(words)
        count = len(words)
    if count is None or not 1 <= count <= MAX_WORDS:
        raise ValueError(f"count {count}: a frame carries 1 to {MAX_WORDS} words")
    if address + 4 * count > 1 << 32:
        raise ValueError(f"address 0x{address:x} + {count} words: passes the end of the "
                         f"32-bit address space")
    body = bytearray([int(command)]) + address.to_bytes(4, "little") + bytes([count - 1])
    if command == Command.WRITE:
        for w in words:
            if not 0 <= int(w) <= 0xFFFF_FFFF:
                raise ValueError(f"word 0x{int(w):x}: must fit in 32 bits")
            body += int(w).to_bytes(4, "little")
    return bytes([REQUEST_SYNC]) + bytes(body) + bytes([checksum(body)])


def reply_length(command: Command, count: int, status: Status | None = None) -> int:
    """Bytes in a reply: 4, plus the words of a successful read."""
    data = 4 * count if command == Command.READ and status in (None, Status.OK) else 0
    return 4 + data


def decode_reply(frame: bytes) -> tuple[Status, int, list[int]]:
    """(status, index, words) of one reply frame."""
    if len(frame) < 4:
        raise ProtocolError(f"reply of {len(frame)} bytes: at least 4 expected")
    if frame[0] != REPLY_SYNC:
        raise ProtocolError(f"reply starts with 0x{frame[0]:02x}, not 0x{REPLY_SYNC:02x}")
    if sum(frame[1:]) & 0xFF:
        raise ProtocolError(f"reply checksum: bytes add up to 0x{sum(frame[1:]) & 0xFF:02x}, "
                            f"not 0")
    try:
        status = Status(frame[1])
    except ValueError:
        raise ProtocolError(f"reply status {frame[1]} is not a known status") from None
    data = frame[3:-1]
    if len(data) % 4:
        raise ProtocolError(f"reply carries {len(data)} data bytes, not whole words")
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
    return status, frame[2], words
