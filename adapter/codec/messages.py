"""Request frames in, response frames out: kio entities on one side, Kafka bytes on the other.

This is the only place (with ``preflight``) that touches kio's serial and index
machinery; handlers see frozen kio dataclasses and build kio response dataclasses.

Decoding reads api key, version and correlation id by hand first, so every error can
still name the request it belongs to. The version is checked against ``versions``, the
bytes are walked by ``preflight`` (kio would otherwise reserve memory for whatever array
count the wire claims), and only then does kio build the header and body. Readers and
writers are compiled once per (api key, version).

Two answers are built without kio because kio has no schema for them: the ApiVersions
v0 fallback for an ApiVersions version we do not know, and the per-partition
UNSUPPORTED_VERSION answer to Produce v0-2.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct

from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema
from kio.index import load_response_from_request
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.serial import entity_writer
from kio.static.primitive import i16
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload

from .errors import MalformedRequest
from .errors import UnknownApiKey
from .errors import UnsupportedVersion
from .framing import frame as _frame
from .preflight import BoundsError
from .preflight import Skipper
from .preflight import entity_skipper
from .versions import ADVERTISED_VERSIONS
from .versions import ApiKey
from .versions import is_rejected
from .versions import is_supported

__all__ = (
    "Request",
    "decode_request",
    "encode_response",
    "response_header",
    "response_type",
    "encode_api_versions_fallback",
    "encode_legacy_produce_rejection",
)

_REQUEST_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_NO_TAGGED_FIELDS = b"\x00"


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: its header fields and its kio body entity.

    ``flexible`` says whether this version uses compact encodings and tagged fields.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: RequestPayload
    flexible: bool


@dataclasses.dataclass(frozen=True, slots=True)
class _VersionCodec:
    """Everything compiled for one (api key, version): readers, bounds walks, writer."""

    skip_header: Skipper
    skip_body: Skipper
    read_header: Callable[[bytes, int], tuple[Any, int]]
    read_body: Callable[[bytes, int], tuple[Any, int]]
    flexible: bool
    response_type: type[ResponsePayload]
    write_response: Callable[[io.BytesIO, Any], None]
    response_header_tagged: bool


@functools.cache
def _version_codec(api_key: int, api_version: int) -> _VersionCodec:
    request_schema = load_request_schema(api_key, api_version)
    header_schema = request_schema.__header_schema__
    response_schema = load_response_from_request(request_schema)
    return _VersionCodec(
        skip_header=entity_skipper(header_schema),
        skip_body=entity_skipper(request_schema),
        read_header=entity_reader(header_schema),
        read_body=entity_reader(request_schema),
        flexible=request_schema.__flexible__,
        response_type=response_schema,
        write_response=entity_writer(response_schema),
        # Response header v1 (with a tagged-field section) for flexible responses,
        # except ApiVersions: clients read its header before they know our versions.
        response_header_tagged=response_schema.__flexible__
        and api_key != ApiKey.API_VERSIONS,
    )


def _partial_ids(frame: bytes) -> dict[str, int | None]:
    size = len(frame)
    return {
        "api_key": _I16.unpack_from(frame, 0)[0] if size >= 2 else None,
        "api_version": _I16.unpack_from(frame, 2)[0] if size >= 4 else None,
        "correlation_id": None,
    }


def decode_request(frame: bytes) -> Request:
    """Decode one frame payload (without its size prefix) into a ``Request``.

    Raises ``UnknownApiKey``, ``UnsupportedVersion`` (with ``body`` set for Produce
    v0-2) or ``MalformedRequest``; never anything else for bad input.
    """
    if not isinstance(frame, bytes):
        # kio's reader refuses writable buffers; a copy is the only safe way in.
        frame = bytes(frame)
    if len(frame) < _REQUEST_HEAD.size:
        raise MalformedRequest(
            f"request of {len(frame)} bytes is shorter than a request header",
            **_partial_ids(frame),
        )
    api_key, api_version, correlation_id = _REQUEST_HEAD.unpack_from(frame)
    ids = {"api_key": api_key, "api_version": api_version, "correlation_id": correlation_id}
    if api_key not in ADVERTISED_VERSIONS:
        raise UnknownApiKey(f"unknown api key {api_key}", **ids)
    if not is_supported(api_key, api_version):
        body = _legacy_body(frame, ids) if is_rejected(api_key, api_version) else None
        raise UnsupportedVersion(
            f"version {api_version} of api key {api_key} is not supported", body=body, **ids
        )

    codec = _version_codec(api_key, api_version)
    try:
        end = codec.skip_body(frame, body_start := codec.skip_header(frame, 0))
    except BoundsError as exc:
        raise MalformedRequest(str(exc), **ids) from None
    if api_key == ApiKey.OFFSET_COMMIT and 2 <= api_version <= 4:
        frame = _retention_time_within_a_timedelta(frame, body_start)
    # Bytes after a fully parsed request are ignored, as Apache Kafka does: librdkafka 2.x
    # sends three stale bytes after an all-topics Metadata v13 body (librdkafka #5049).
    try:
        # kio readers return (value, bytes consumed), not the new offset.
        header, header_size = codec.read_header(frame, 0)
        body, body_size = codec.read_body(frame, header_size)
    except Exception as exc:  # kio raises its own errors, ValueError, KeyError, ...
        raise MalformedRequest(f"undecodable request: {exc!r}", **ids) from exc
    if header_size + body_size != end:
        # The bounds walk and kio disagree about the layout: refuse rather than guess.
        raise MalformedRequest("request layout is ambiguous", **ids)
    return Request(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=header.client_id,
        body=body,
        flexible=codec.flexible,
    )


# kio reads an int64 of milliseconds into a timedelta of microseconds held in an i64: a
# larger magnitude fails the whole request, though the wire (and Kafka) allow any int64.
_TIMEDELTA_I64_MAX_MS = (2**63 - 1) // 1000


def _retention_time_within_a_timedelta(frame: bytes, body_start: int) -> bytes:
    """``frame`` (OffsetCommit v2-4, bounds already walked) with its retention_time cut to
    what kio can read: the broker does not use it (offsets.retention.minutes decides)."""
    at = body_start
    for skip_after in (4, 0):  # group_id, generation id; member_id
        (length,) = _I16.unpack_from(frame, at)
        if length < 0:
            return frame  # a null name: kio refuses it, as it should
        at += 2 + length + skip_after
    (retention_ms,) = _I64.unpack_from(frame, at)
    if -_TIMEDELTA_I64_MAX_MS <= retention_ms <= _TIMEDELTA_I64_MAX_MS:
        return frame
    cut = _TIMEDELTA_I64_MAX_MS if retention_ms > 0 else -_TIMEDELTA_I64_MAX_MS
    return frame[:at] + _I64.pack(cut) + frame[at + _I64.size :]


def _legacy_body(frame: bytes, ids: dict[str, int]) -> bytes:
    # Refused versions are all pre-flexible, so the header is v1: the fixed 8 bytes and
    # a nullable int16-length client id.
    head = _REQUEST_HEAD.size
    if len(frame) < head + 2:
        raise MalformedRequest("truncated client id", **ids)
    length = _I16.unpack_from(frame, head)[0]
    body_start = head + 2 + max(length, 0)
    if length < -1 or body_start > len(frame):
        raise MalformedRequest(f"bad client id length {length}", **ids)
    return frame[body_start:]


def response_type(request: Request) -> type[ResponsePayload]:
    """The kio response class a handler must build for ``request``'s api and version."""
    return _version_codec(request.api_key, request.api_version).response_type


def _response_header(codec: _VersionCodec, correlation_id: int) -> bytes:
    header = _I32.pack(correlation_id)
    return header + _NO_TAGGED_FIELDS if codec.response_header_tagged else header


def response_header(request: Request) -> bytes:
    """The response header for ``request``: its correlation id, plus an empty tagged-field
    section (header v1) when the response is flexible and not ApiVersions."""
    return _response_header(_version_codec(request.api_key, request.api_version), request.correlation_id)


def encode_response(request: Request, body: ResponsePayload) -> bytes:
    """A complete response frame for ``request``: size, response header, ``body``.

    ``body`` must be an instance of ``response_type(request)``; anything else is a
    handler bug and raises ``TypeError`` rather than confusing the client.
    """
    codec = _version_codec(request.api_key, request.api_version)
    if type(body) is not codec.response_type:
        raise TypeError(
            f"{type(body).__module__}.{type(body).__qualname__} does not answer "
            f"api key {request.api_key} v{request.api_version}; "
            f"expected {codec.response_type.__module__}.{codec.response_type.__qualname__}"
        )
    buffer = io.BytesIO()
    buffer.write(_I32.pack(0))  # size, patched below
    buffer.write(_response_header(codec, request.correlation_id))
    codec.write_response(buffer, body)
    with buffer.getbuffer() as view:
        _I32.pack_into(view, 0, len(view) - _I32.size)
    return buffer.getvalue()


@functools.cache
def _api_versions_fallback_body() -> bytes:
    body = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersionV0(api_key=i16(key), min_version=i16(low), max_version=i16(high))
            for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
        ),
    )
    buffer = io.BytesIO()
    entity_writer(ApiVersionsResponseV0)(buffer, body)
    return buffer.getvalue()


def encode_api_versions_fallback(correlation_id: int) -> bytes:
    """The answer to an ApiVersions version we do not know: v0 header and v0 body,
    error UNSUPPORTED_VERSION and our full version table, so the client retries lower.
    """
    return _frame([_I32.pack(correlation_id), _api_versions_fallback_body()])


class _LegacyReader:
    """Cursor over a Produce v0-2 body; every read is bounds-checked."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, size: int) -> int:
        start = self.pos
        if size < 0 or start + size > len(self.data):
            raise ValueError("truncated")
        self.pos = start + size
        return start

    def int16(self) -> int:
        return _I16.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.data, self._take(4))[0]

    def count(self) -> int:
        count = self.int32()
        if count < 0 or count > len(self.data) - self.pos:
            raise ValueError(f"bad array length {count}")
        return count

    def string(self) -> bytes:
        length = self.int16()
        if length < 0:
            raise ValueError(f"bad topic name length {length}")
        start = self._take(length)
        return self.data[start : start + length]

    def skip_nullable_bytes(self) -> None:
        length = self.int32()
        if length < -1:
            raise ValueError(f"bad records length {length}")
        self._take(max(length, 0))


def encode_legacy_produce_rejection(
    api_version: int, correlation_id: int, body: bytes
) -> bytes | None:
    """Answer a Produce v0-2 request: UNSUPPORTED_VERSION for every partition it names.

    ``body`` is the request after its header (``UnsupportedVersion.body``). Returns the
    complete response frame, or ``None`` when the request has acks=0: such a producer
    reads no response, and Kafka signals a failed acks=0 produce by closing the
    connection. Raises ``MalformedRequest`` if the body does not parse.
    """
    if api_version not in (0, 1, 2):
        raise ValueError(f"Produce v{api_version} is not a legacy version")
    ids = {"api_key": ApiKey.PRODUCE, "api_version": api_version, "correlation_id": correlation_id}
    reader = _LegacyReader(bytes(body))
    topics: list[tuple[bytes, list[int]]] = []
    try:
        acks = reader.int16()
        reader.int32()  # timeout
        for _ in range(reader.count()):
            name = reader.string()
            partitions = []
            for _ in range(reader.count()):
                partitions.append(reader.int32())
                reader.skip_nullable_bytes()
            topics.append((name, partitions))
    except (ValueError, struct.error) as exc:
        raise MalformedRequest(f"undecodable Produce v{api_version}: {exc}", **ids) from None
    if reader.pos != len(reader.data):
        raise MalformedRequest(
            f"{len(reader.data) - reader.pos} bytes after Produce v{api_version}", **ids
        )
    if acks == 0:
        return None

    error = _I16.pack(ErrorCode.unsupported_version)
    no_offset = _I64.pack(-1)
    per_partition_tail = error + no_offset + (no_offset if api_version >= 2 else b"")
    parts = [_I32.pack(correlation_id), _I32.pack(len(topics))]
    for name, partitions in topics:
        parts += [_I16.pack(len(name)), name, _I32.pack(len(partitions))]
        parts += [_I32.pack(partition) + per_partition_tail for partition in partitions]
    if api_version >= 1:
        parts.append(_I32.pack(0))  # throttle_time_ms
    return _frame(parts)
