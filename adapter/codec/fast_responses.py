"""Hand-written encoders for the two hot responses, Produce and Fetch, without kio.

kio's generic writer walks dataclasses field by field (150-220 µs per Produce or Fetch
response), and for Fetch it needs the record batches joined into one bytes object that it
then copies again into a BytesIO. Here each partition costs one or two ``struct`` packs
into a bytearray, and a Fetch response is returned as a list of parts in which the
batches read from the commitlog appear as-is: the records length prefix is computed from
their total length and nothing copies them until the transport does.

The encoders take the plain dicts the handlers build (the same shapes ``entities.make``
turns into kio entities) and write exactly the bytes kio would for the same response; the
unit tests hold them to that byte for byte, version by version, with kio as the oracle.
Tagged fields are always written empty: this broker never sets the optional ones
(diverging epoch, current leader, snapshot id, node endpoints).

A handler returns ``Encoded(parts)``; ``frame_parts`` adds the size prefix and the
response header, and the connection hands the result to ``transport.writelines``.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import uuid

from collections.abc import Sequence
from typing import Any

from .error_messages import default_message
from .messages import Request
from .messages import encode_response
from .messages import response_header

__all__ = (
    "Encoded",
    "encode_fetch_response",
    "encode_produce_response",
    "frame_parts",
    "response_parts",
)

Buffer = bytes | bytearray | memoryview

PRODUCE_VERSIONS = range(3, 12)
FETCH_VERSIONS = range(4, 18)
_PRODUCE_FLEXIBLE = 9
_FETCH_FLEXIBLE = 12

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_QQ = struct.Struct(">qq")
_HI = struct.Struct(">hi")
# Produce partition heads: index, error code, base offset, log append time [, log start].
_PRODUCE_HEAD_V3 = struct.Struct(">ihqq")
_PRODUCE_HEAD_V5 = struct.Struct(">ihqqq")
# Fetch partition heads: index, error code, high watermark, last stable [, log start].
_FETCH_HEAD_V4 = struct.Struct(">ihqq")
_FETCH_HEAD_V5 = struct.Struct(">ihqqq")
# Preferred read replica and the legacy records length, packed together for v11.
_REPLICA_AND_SIZE = struct.Struct(">ii")

_EMPTY_TAGS = b"\x00"
_LEGACY_NULL_ARRAY = _I32.pack(-1)
_COMPACT_NULL = b"\x00"  # null compact array, string or bytes
_LEGACY_NULL_STRING = _I16.pack(-1)
_LEGACY_NULL_BYTES = _I32.pack(-1)
_ZERO_UUID = bytes(16)
_SMALL_UVARINTS = [bytes((n,)) for n in range(128)]


@dataclasses.dataclass(frozen=True, slots=True)
class Encoded:
    """A response body already encoded for its request's version, as a list of parts.

    Returned by handlers instead of a kio entity; the parts go to the socket as they are.
    """

    parts: list[Buffer]


def _uvarint(value: int) -> bytes:
    if value < 128:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array_length(count: int, flexible: bool) -> bytes:
    return _uvarint(count + 1) if flexible else _I32.pack(count)


@functools.lru_cache(maxsize=4096)
def _string(value: str, flexible: bool) -> bytes:
    """A non-nullable string with its length prefix (topic names repeat: cached)."""
    data = value.encode()
    if flexible:
        return _uvarint(len(data) + 1) + data
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def _nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return _COMPACT_NULL if flexible else _LEGACY_NULL_STRING
    data = value.encode()
    if flexible:
        return _uvarint(len(data) + 1) + data
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def _millis(value: datetime.datetime | int | None) -> int:
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return round(value.timestamp() * 1000)  # as kio does


def _check_version(api: str, version: int, supported: range) -> None:
    if version not in supported:
        raise ValueError(f"{api} v{version} is outside v{supported.start}-{supported.stop - 1}")


def encode_produce_response(version: int, responses: Sequence[dict[str, Any]], throttle_ms: int = 0) -> list[bytes]:
    """The body of a Produce v3-11 response, as a list of parts.

    ``responses`` are dicts ``name, partition_responses``; each partition a dict ``index,
    error_code, base_offset, log_append_time`` (datetime, int ms or None for -1),
    ``log_start_offset, record_errors`` (dicts ``batch_index,
    batch_index_error_message``) and ``error_message`` (Kafka's default message for an error
    given none); fields the version lacks are ignored.
    """
    _check_version("Produce", version, PRODUCE_VERSIONS)
    flexible = version >= _PRODUCE_FLEXIBLE
    with_log_start = version >= 5
    with_record_errors = version >= 8
    head = _PRODUCE_HEAD_V5 if with_log_start else _PRODUCE_HEAD_V3
    out = bytearray(_array_length(len(responses), flexible))
    for topic in responses:
        partitions = topic["partition_responses"]
        out += _string(topic["name"], flexible)
        out += _array_length(len(partitions), flexible)
        for p in partitions:
            if with_log_start:
                out += head.pack(
                    p["index"],
                    p["error_code"],
                    p["base_offset"],
                    _millis(p.get("log_append_time")),
                    p.get("log_start_offset", -1),
                )
            else:
                out += head.pack(p["index"], p["error_code"], p["base_offset"], _millis(p.get("log_append_time")))
            if with_record_errors:
                record_errors = p.get("record_errors") or ()
                out += _array_length(len(record_errors), flexible)
                for record_error in record_errors:
                    out += _I32.pack(record_error["batch_index"])
                    out += _nullable_string(record_error.get("batch_index_error_message"), flexible)
                    if flexible:
                        out += _EMPTY_TAGS
                message = p.get("error_message")
                if message is None and p["error_code"]:
                    message = default_message(p["error_code"])  # as codec.entities.make does
                out += _nullable_string(message, flexible)
            if flexible:
                out += _EMPTY_TAGS
        if flexible:
            out += _EMPTY_TAGS
    out += _I32.pack(throttle_ms)
    if flexible:
        out += _EMPTY_TAGS
    return [bytes(out)]


def encode_fetch_response(
    version: int, error_code: int, session_id: int, responses: Sequence[dict[str, Any]], throttle_ms: int = 0
) -> list[Buffer]:
    """The body of a Fetch v4-17 response, as a list of parts.

    ``responses`` are dicts ``topic`` (v4-12) or ``topic_id`` (v13+, a UUID; None for
    zeros) and ``partitions``; each partition a dict ``partition_index, error_code,
    high_watermark, last_stable_offset, log_start_offset, aborted_transactions`` (None,
    or dicts ``producer_id, first_offset``), ``preferred_read_replica`` and ``records``:
    None, or a list of record batches (one bytes-like object is taken as a list of one).
    The batches are parts of the result themselves, never copied.
    """
    _check_version("Fetch", version, FETCH_VERSIONS)
    flexible = version >= _FETCH_FLEXIBLE
    by_id = version >= 13
    with_log_start = version >= 5
    with_replica = version >= 11
    head = _FETCH_HEAD_V5 if with_log_start else _FETCH_HEAD_V4
    null_array = _COMPACT_NULL if flexible else _LEGACY_NULL_ARRAY
    null_records = _COMPACT_NULL if flexible else _LEGACY_NULL_BYTES
    parts: list[Buffer] = []
    out = bytearray(_I32.pack(throttle_ms))
    if version >= 7:
        out += _HI.pack(error_code, session_id)
    out += _array_length(len(responses), flexible)
    for topic in responses:
        if by_id:
            topic_id: uuid.UUID | None = topic.get("topic_id")
            out += _ZERO_UUID if topic_id is None else topic_id.bytes
        else:
            out += _string(topic["topic"], flexible)
        partitions = topic["partitions"]
        out += _array_length(len(partitions), flexible)
        for p in partitions:
            if with_log_start:
                out += head.pack(
                    p["partition_index"],
                    p["error_code"],
                    p["high_watermark"],
                    p.get("last_stable_offset", -1),
                    p.get("log_start_offset", -1),
                )
            else:
                out += head.pack(
                    p["partition_index"], p["error_code"], p["high_watermark"], p.get("last_stable_offset", -1)
                )
            aborted = p["aborted_transactions"]
            if aborted is None:
                out += null_array
            else:
                out += _array_length(len(aborted), flexible)
                for transaction in aborted:
                    out += _QQ.pack(transaction["producer_id"], transaction["first_offset"])
                    if flexible:
                        out += _EMPTY_TAGS
            records = p["records"]
            if records is None:
                if with_replica:
                    out += _I32.pack(p.get("preferred_read_replica", -1))
                out += null_records
            else:
                if isinstance(records, (bytes, bytearray, memoryview)):
                    records = (records,)
                size = 0
                for batch in records:
                    size += len(batch)
                if flexible:
                    out += _I32.pack(p.get("preferred_read_replica", -1))
                    out += _uvarint(size + 1)
                elif with_replica:
                    out += _REPLICA_AND_SIZE.pack(p.get("preferred_read_replica", -1), size)
                else:
                    out += _I32.pack(size)
                if size:
                    parts.append(bytes(out))
                    parts.extend(records)
                    out = bytearray()
            if flexible:
                out += _EMPTY_TAGS
        if flexible:
            out += _EMPTY_TAGS
    if flexible:
        out += _EMPTY_TAGS
    parts.append(bytes(out))
    return parts


def frame_parts(request: Request, parts: Sequence[Buffer]) -> list[Buffer]:
    """A complete response frame for ``request`` around an encoded body: the int32 size
    and the response header (v0, or v1 for flexible responses except ApiVersions) as one
    leading part, then ``parts`` unchanged; ready for ``transport.writelines``."""
    header = response_header(request)
    size = len(header)
    for part in parts:
        size += len(part)
    return [_I32.pack(size) + header, *parts]


def response_parts(request: Request, body: Any) -> list[Buffer]:
    """The frame for a handler's answer: ``Encoded`` bodies framed as they are, kio
    entities through ``encode_response``."""
    if isinstance(body, Encoded):
        return frame_parts(request, body.parts)
    return [encode_response(request, body)]
