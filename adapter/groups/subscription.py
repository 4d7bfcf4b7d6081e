"""The "consumer" embedded protocol's bytes (Kafka's ConsumerProtocol): subscriptions and
assignments of classic members.

The broker treats member metadata as opaque, except where Kafka reads it too: OffsetDelete
must refuse to delete offsets of a topic an active group is subscribed to, and online
migration between the classic and the consumer protocol (``migration.py``) turns a classic
member's subscription and assignment into a consumer-protocol member's and back.

Every version of ConsumerProtocolSubscription (v0-3) and ConsumerProtocolAssignment (v0-3)
is non-flexible and starts with ``version: int16``. A subscription then has ``topics:
[string]``, ``user_data: bytes``, from v1 ``owned_partitions: [topic: string, partitions:
[int32]]``, from v2 ``generation_id: int32`` and from v3 ``rack_id: string``; an assignment
has ``assigned_partitions: [topic, partitions]`` and ``user_data``. Decoding never trusts a
length: a count or a string longer than what is left means the bytes are not one.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

PROTOCOL_TYPE = "consumer"
ASSIGNMENT_MAX_VERSION = 3


class MalformedProtocol(ValueError):
    """The bytes are not a ConsumerProtocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    # Partitions the member says it owns (v1+); None for v0, which cannot say.
    owned: frozenset[tuple[str, int]] | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.data):
            raise MalformedProtocol("truncated")
        (value,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return value

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def count(self, smallest_item: int) -> int:
        n = self.i32()
        if n < 0:
            return 0
        if n * smallest_item > len(self.data) - self.pos:
            raise MalformedProtocol("count beyond the end")
        return n

    def string(self) -> str:
        length = self.i16()
        if length < 0 or self.pos + length > len(self.data):
            raise MalformedProtocol("bad string length")
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedProtocol("not UTF-8") from exc

    def skip_bytes(self) -> None:
        length = self.i32()
        if length > len(self.data) - self.pos:
            raise MalformedProtocol("bad bytes length")
        self.pos += max(length, 0)

    def topic_partitions(self) -> set[tuple[str, int]]:
        out = set()
        for _ in range(self.count(_I16.size + _I32.size)):
            topic = self.string()
            for _ in range(self.count(_I32.size)):
                out.add((topic, self.i32()))
        return out


def subscription_version(metadata: bytes) -> int:
    """The version a subscription (and so the member's assignment) is in, within 0-3."""
    if len(metadata) < _I16.size:
        return 0
    return min(max(_I16.unpack_from(metadata)[0], 0), ASSIGNMENT_MAX_VERSION)


def decode_subscription(metadata: bytes) -> Subscription:
    reader = _Reader(metadata)
    version = reader.i16()
    if version < 0:
        raise MalformedProtocol("negative version")
    topics = _topics(reader)
    reader.skip_bytes()
    owned = frozenset(reader.topic_partitions()) if version >= 1 else None
    return Subscription(topics, owned)


def _topics(reader: _Reader) -> tuple[str, ...]:
    return tuple(reader.string() for _ in range(reader.count(_I16.size)))


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topic names in a consumer subscription (only its start is read); empty if the bytes
    are not one."""
    try:
        reader = _Reader(metadata)
        reader.i16()
        return set(_topics(reader))
    except MalformedProtocol:
        return set()


def decode_assignment(data: bytes) -> set[tuple[str, int]]:
    """The partitions of a ConsumerProtocolAssignment; empty bytes are no assignment."""
    if not data:
        return set()
    reader = _Reader(data)
    if reader.i16() < 0:
        raise MalformedProtocol("negative version")
    return reader.topic_partitions()


def encode_assignment(partitions: Mapping[str, frozenset[int] | set[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (every version 0-3 has the same fields), topics and
    partitions sorted."""
    out = bytearray(_I16.pack(version) + _I32.pack(len(partitions)))
    for topic in sorted(partitions):
        raw = topic.encode()
        ps = sorted(partitions[topic])
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps)
    return bytes(out + _I32.pack(-1))
