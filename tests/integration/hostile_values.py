"""Hostile requests for any API and version, built from kio's request schemas (a client's
view: nothing here imports the broker).

``extreme_body(schema, rng)``  a schema-valid body whose every field takes an extreme
    value: integers at -1 / 0 / their type's minimum and maximum, timeouts of -1 ms and
    2^31-1 ms, names empty, 249 and 300 characters long or naming internal topics, arrays
    empty, duplicated or thousands of entries long (the thousands bounded in total per
    request, so one body stays a few hundred KB), nullable fields null. Non-nullable
    strings sometimes carry ``NULL_MARK``, which ``frame_with_nulls`` turns into a null
    (-1 / compact 0) on the wire: a value no schema-valid client sends, but kio decodes.
``small_body(schema)``         one entry per array, short names: the base the byte-level
    probes (truncation, length claims) cut and patch.
``truncated`` / ``length_claim`` / ``random_body``  the byte-level probes on a frame.

Every choice comes from the ``random.Random`` passed in, so a seed reproduces a request.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math
import random
import struct
import types
import typing
import uuid
from typing import Any

from rawkafka import encode_request, make_batch

__all__ = (
    "INTERNAL_TOPICS",
    "NULL_MARK",
    "extreme_body",
    "frame_with_nulls",
    "length_claim",
    "random_body",
    "small_body",
    "truncated",
)

NULL_MARK = "\x01null-mark\x01"  # never a real name: becomes a null string on the wire
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")
MANY = 3000  # "thousands of entries"
ELEMENT_BUDGET = 6000  # entries of all arrays of one body together

_INT_EXTREMES = {
    "int8": (-1, 0, 1, -(2**7), 2**7 - 1),
    "int16": (-1, 0, 1, -(2**15), 2**15 - 1),
    "int32": (-1, 0, 1, -(2**31), 2**31 - 1),
    "int64": (-1, 0, 1, -(2**63), 2**63 - 1),
}
_TIMEOUTS_MS = {
    "timedelta_i32": (-1, 0, 2**31 - 1, -(2**31)),
    "timedelta_i64": (-1, 0, 2**31 - 1, 10**16),  # near timedelta.max (Python cannot hold 2^63-1 ms)
}


def _optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


@functools.cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field, Any, bool], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, *_optional(hints[f.name])) for f in dataclasses.fields(cls))


class _Builder:
    def __init__(self, rng: random.Random, names: tuple[str, ...], extreme: bool) -> None:
        self.rng = rng
        self.names = names
        self.extreme = extreme
        self.budget = ELEMENT_BUDGET

    def entity(self, cls: type, depth: int) -> Any:
        kwargs = {}
        for f, hint, nullable in _fields(cls):
            kwargs[f.name] = self.value(f, hint, nullable, depth)
        return cls(**kwargs)

    def value(self, f: dataclasses.Field, hint: Any, nullable: bool, depth: int) -> Any:
        rng = self.rng
        if self.extreme and nullable and rng.random() < 0.2:
            return None
        if typing.get_origin(hint) is tuple:
            (arg, *_) = typing.get_args(hint)
            return self.array(f, arg, depth)
        if dataclasses.is_dataclass(hint):
            return self.entity(hint, depth + 1)
        return self.primitive(f.metadata.get("kafka_type"), hint, nullable)

    def array(self, f: dataclasses.Field, arg: Any, depth: int) -> tuple:
        rng = self.rng
        if not self.extreme:
            count, shape = 1, "one"
        else:
            shape = rng.choice(("empty", "one", "duplicated", "many"))
            count = {"empty": 0, "one": 1, "duplicated": 2, "many": MANY}[shape]
        count = min(count, self.budget)
        self.budget -= count
        if count == 0:
            return ()
        if dataclasses.is_dataclass(arg):
            make = lambda: self.entity(arg, depth + 1)  # noqa: E731
        else:
            make = lambda: self.primitive(f.metadata.get("kafka_type"), arg, False)  # noqa: E731
        if shape == "duplicated":
            one = make()
            return (one, one)
        if shape == "many" and dataclasses.is_dataclass(arg):
            # thousands of distinct small entries: the nested arrays of each stay tiny
            saved, self.extreme = self.extreme, False
            try:
                return tuple(_renamed(make(), i) for i in range(count))
            finally:
                self.extreme = saved
        if shape == "many":
            bound = _INT_EXTREMES.get(f.metadata.get("kafka_type"), (0, 0, 0, 0, 2**31 - 1))[4]
            return tuple(_distinct(make(), i % (bound + 1)) for i in range(count))
        return tuple(make() for _ in range(count))

    def primitive(self, kafka_type: str | None, hint: Any, nullable: bool) -> Any:
        rng = self.rng
        extreme = self.extreme
        if kafka_type in _INT_EXTREMES:
            return rng.choice(_INT_EXTREMES[kafka_type]) if extreme else 1
        if kafka_type in _TIMEOUTS_MS:
            ms = rng.choice(_TIMEOUTS_MS[kafka_type]) if extreme else 100
            return datetime.timedelta(milliseconds=ms)
        if kafka_type == "bool":
            return rng.random() < 0.5 if extreme else False
        if kafka_type == "float64":
            return rng.choice((0.0, -1.0, 1e308, math.inf, math.nan)) if extreme else 1.0
        if kafka_type == "uuid":
            return rng.choice((uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)))) if extreme else uuid.UUID(int=1)
        if kafka_type == "bytes":
            return rng.choice((b"", rng.randbytes(32))) if extreme else b"ab"
        if kafka_type == "records":
            if not extreme:
                return None
            return rng.choice((None, b"", rng.randbytes(61), make_batch(3)))
        if kafka_type == "string":
            if not extreme:
                return "ab"
            if not nullable and rng.random() < 0.04:  # rare: a null closes the whole request
                return NULL_MARK
            return rng.choice(self.names)
        raise AssertionError(f"no hostile values for kafka type {kafka_type!r} ({hint!r})")


def _renamed(entity: Any, i: int) -> Any:
    """``entity`` with its first string field made unique (so "many" are not all duplicates)."""
    for f in dataclasses.fields(entity):
        if f.metadata.get("kafka_type") == "string" and isinstance(getattr(entity, f.name), str):
            return dataclasses.replace(entity, **{f.name: f"n{i}-{getattr(entity, f.name)}"[:249]})
    return entity


def _distinct(value: Any, i: int) -> Any:
    if isinstance(value, str):
        return f"n{i}"
    if isinstance(value, int) and not isinstance(value, bool):
        return i
    return value


def extreme_body(schema: type, rng: random.Random, names: tuple[str, ...]) -> Any:
    return _Builder(rng, names, extreme=True).entity(schema, 0)


def small_body(schema: type) -> Any:
    return _Builder(random.Random(0), ("ab",), extreme=False).entity(schema, 0)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | 0x80 if n else byte)
        if not n:
            return bytes(out)


def frame_with_nulls(api_key: int, version: int, correlation_id: int, body: Any, flexible: bool) -> bytes:
    """The request frame with every ``NULL_MARK`` string written as a null."""
    frame = encode_request(api_key, version, correlation_id, body)
    raw = NULL_MARK.encode()
    if flexible:
        payload = frame[4:].replace(_uvarint(len(raw) + 1) + raw, b"\x00")
    else:
        payload = frame[4:].replace(struct.pack(">h", len(raw)) + raw, b"\xff\xff")
    return struct.pack(">i", len(payload)) + payload


def truncated(frame: bytes, rng: random.Random) -> bytes:
    """A complete frame holding only the first part of the request."""
    payload = frame[4:]
    cut = rng.randrange(8, max(9, len(payload)))
    return struct.pack(">i", cut) + payload[:cut]


def length_claim(frame: bytes, header_size: int, rng: random.Random, flexible: bool) -> bytes:
    """The frame with a length (array count or string size) somewhere in its body claiming
    2^31-1: int32 / int16 / compact varint bytes written over the body at a random place."""
    payload = bytearray(frame[4:])
    claims = [struct.pack(">i", 2**31 - 1), struct.pack(">h", 2**15 - 1)]
    if flexible:
        claims.append(_uvarint(2**31))
    claim = rng.choice(claims)
    start = rng.randrange(header_size, max(header_size + 1, len(payload) - len(claim) + 1))
    payload[start : start + len(claim)] = claim
    return struct.pack(">i", len(payload)) + bytes(payload)


def random_body(header: bytes, rng: random.Random) -> bytes:
    payload = header + rng.randbytes(rng.choice((1, 7, 64, 4096)))
    return struct.pack(">i", len(payload)) + payload
