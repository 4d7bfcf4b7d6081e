"""Test helpers: plausible kio entities for any schema, and requests framed as clients do.

``build`` fills a kio dataclass generically from its fields (``kafka_type`` metadata,
tags, nullability), so every API version can be round-tripped without hand-written
fixtures. Shared by the codec tests; imports nothing from the codec itself except the
frame decoder used to unwrap client frames.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import itertools
import struct
import uuid

from types import NoneType
from types import UnionType
from typing import Any
from typing import get_args
from typing import get_origin

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.serial import entity_writer
from kio.static.primitive import TZAware
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64Timedelta

from rmqkafka.adapter.codec.framing import FrameDecoder



def _nullable(field_type: object) -> bool:
    return get_origin(field_type) is UnionType and NoneType in get_args(field_type)


def _strip_none(field_type: object) -> object:
    if _nullable(field_type):
        return next(arg for arg in get_args(field_type) if arg is not NoneType)
    return field_type


def _primitive(kafka_type: str, field_type: Any, n: int, full: bool) -> object:
    if kafka_type in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        return field_type(n % 100 + 1)
    match kafka_type:
        case "float64":
            return field_type(n + 0.5)
        case "bool":
            return full
        case "string":
            return f"s{n}-é"
        case "bytes" | "records":
            return bytes([n % 256]) * (n % 7 + 1)
        case "uuid":
            return uuid.UUID(int=n + 1)
        case "error_code":
            return ErrorCode.unsupported_version
        case "timedelta_i32":
            return i32Timedelta.parse(datetime.timedelta(milliseconds=n * 7))
        case "timedelta_i64":
            return i64Timedelta.parse(datetime.timedelta(milliseconds=n * 7))
        case "datetime_i64":
            return TZAware.parse(
                datetime.datetime.fromtimestamp(1_700_000_000 + n, tz=datetime.UTC)
            )
    raise AssertionError(f"no builder for kafka_type {kafka_type}")


def _field_value(field: dataclasses.Field, full: bool, counter: itertools.count) -> object:
    if not full and "tag" in field.metadata and field.default is not dataclasses.MISSING:
        return field.default
    if not full and _nullable(field.type):
        return None
    field_type = _strip_none(field.type)
    if get_origin(field_type) is tuple:
        if not full:
            return ()
        item_type = get_args(field_type)[0]
        return tuple(_single(field, item_type, full, counter) for _ in range(2))
    return _single(field, field_type, full, counter)


def _single(
    field: dataclasses.Field, item_type: Any, full: bool, counter: itertools.count
) -> object:
    if dataclasses.is_dataclass(item_type):
        return build(item_type, full, counter)
    return _primitive(field.metadata["kafka_type"], item_type, next(counter), full)


def build(entity_type: Any, full: bool, counter: itertools.count | None = None) -> Any:
    """An instance of a kio entity: ``full`` sets every optional/tagged field and fills
    arrays, otherwise nullable fields are None, tagged fields default, arrays empty."""
    counter = counter if counter is not None else itertools.count(1)
    return entity_type(
        **{
            field.name: _field_value(field, full, counter)
            for field in dataclasses.fields(entity_type)
        }
    )


# --- how a client frames a request and reads a response --------------------------------


def client_request_frame(
    body: Any, correlation_id: int, client_id: str | None = "test-client"
) -> bytes:
    """Size-prefixed request exactly as a Kafka client writes it, using kio's writers."""
    schema = type(body)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_schema)(
        buffer,
        header_schema(
            request_api_key=schema.__api_key__,
            request_api_version=schema.__version__,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(schema)(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def read_response_frame(data: bytes, schema: Any, tagged_header: bool) -> tuple[int, Any]:
    """(correlation id, body) of a size-prefixed response; asserts nothing is left over."""
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    (correlation_id,) = struct.unpack_from(">i", data, 4)
    offset = 8
    if tagged_header:
        assert data[offset] == 0  # empty tagged-field section
        offset += 1
    body, consumed = entity_reader(schema)(data, offset)
    assert offset + consumed == len(data)
    return correlation_id, body


def unframe(data: bytes) -> bytes:
    frames = FrameDecoder(len(data)).feed(data)
    assert len(frames) == 1
    return frames[0]



def record_batch(value: bytes) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    builder.append(
        0, timestamp=1_700_000_000_000, key=b"k", value=value, headers=[("TAGS", b"TagA")]
    )
    return bytes(builder.build())


