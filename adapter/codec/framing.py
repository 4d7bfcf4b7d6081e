"""Kafka's TCP framing: every request and response is a 4-byte big-endian size + payload.

``FrameDecoder`` turns an arbitrarily chunked byte stream into complete frame payloads.
It is sans-IO: the server feeds it whatever the socket delivered and gets back frames.
A frame's announced size is checked the moment its 4 size bytes are known, before any of
its body is buffered, so a hostile size costs nothing. Body bytes are kept as a list of
chunks and joined once when complete: appending to one growing buffer would copy a big
frame arriving in many small reads over and over, and reserving the announced size up
front would let a client make the broker allocate the maximum frame size with 4 bytes.
"""

from __future__ import annotations

import struct

from collections.abc import Iterable

from .errors import FrameError
from .errors import FrameTooLarge
from .errors import InvalidFrameSize

__all__ = ("SIZE_PREFIX_BYTES", "FrameDecoder", "frame")

SIZE_PREFIX_BYTES = 4
_SIZE = struct.Struct(">i")


def _size_error(size: int, max_frame_size: int, frames: tuple[bytes, ...]) -> FrameError:
    if size <= 0:
        return InvalidFrameSize(size, frames)
    return FrameTooLarge(size, max_frame_size, frames)


class FrameDecoder:
    """Splits one connection's inbound byte stream into frame payloads.

    State: at most 3 bytes of a pending size prefix, or the announced size of the frame
    being received plus the chunks of it received so far. After a size error the
    stream cannot be resynchronised, so every later ``feed`` raises again.
    """

    __slots__ = ("_max_frame_size", "_prefix", "_size", "_chunks", "_received", "_bad_size")

    def __init__(self, max_frame_size: int) -> None:
        if max_frame_size <= 0:
            raise ValueError(f"max_frame_size must be positive, got {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._prefix = b""
        self._size: int | None = None
        self._chunks: list[bytes] = []
        self._received = 0
        self._bad_size: int | None = None

    @property
    def max_frame_size(self) -> int:
        return self._max_frame_size

    @max_frame_size.setter
    def max_frame_size(self, value: int) -> None:
        """Applies from the next size prefix on (a connection's limit rises once it has
        authenticated)."""
        if value <= 0:
            raise ValueError(f"max_frame_size must be positive, got {value}")
        self._max_frame_size = value

    @property
    def buffered(self) -> int:
        """Bytes held for incomplete frames (size prefix included)."""
        if self._size is None:
            return len(self._prefix)
        return SIZE_PREFIX_BYTES + self._received

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Consume ``data`` and return every frame payload it completes, in order.

        Raises ``FrameTooLarge`` or ``InvalidFrameSize`` as soon as a bad size prefix is
        seen; frames completed earlier in the same call travel on the exception.
        """
        if self._bad_size is not None:
            raise _size_error(self._bad_size, self._max_frame_size, ())
        view = memoryview(data).cast("B")
        end = len(view)
        pos = 0
        frames: list[bytes] = []
        while pos < end:
            size = self._size
            if size is None:
                if not self._prefix and end - pos >= SIZE_PREFIX_BYTES:
                    size = _SIZE.unpack_from(view, pos)[0]
                    pos += SIZE_PREFIX_BYTES
                else:
                    take = min(SIZE_PREFIX_BYTES - len(self._prefix), end - pos)
                    self._prefix += view[pos : pos + take].tobytes()
                    pos += take
                    if len(self._prefix) < SIZE_PREFIX_BYTES:
                        break
                    size = _SIZE.unpack(self._prefix)[0]
                    self._prefix = b""
                if size <= 0 or size > self._max_frame_size:
                    self._bad_size = size
                    raise _size_error(size, self._max_frame_size, tuple(frames))
                self._size = size
            missing = size - self._received
            available = end - pos
            if available < missing:
                self._chunks.append(view[pos:end].tobytes())
                self._received += available
                break
            if self._chunks:
                self._chunks.append(view[pos : pos + missing].tobytes())
                frames.append(b"".join(self._chunks))
                self._chunks = []
            else:
                frames.append(view[pos : pos + missing].tobytes())
            pos += missing
            self._size = None
            self._received = 0
        return frames


def frame(payload_parts: Iterable[bytes | bytearray | memoryview]) -> bytes:
    """Join ``payload_parts`` into one frame: 4-byte big-endian size, then the payload."""
    parts = list(payload_parts)
    size = sum(memoryview(part).nbytes for part in parts)
    return b"".join([_SIZE.pack(size), *parts])
