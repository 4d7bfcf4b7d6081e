"""A bounds walk over a request's bytes, run before kio parses them.

Why it exists: kio 0.6.5's Rust reader reserves ``Vec::with_capacity(n)`` for an array
whose element count ``n`` comes straight from the wire, before reading any element. A
compact array header claiming 2**32 elements (5 bytes on the wire) asks for 32 GiB; when
that fails, Rust aborts the whole process (SIGABRT, no Python exception), broker and
all. Smaller claims silently reserve gigabytes. Kafka's own parser checks counts against
the bytes left, and so does this walk.

The walk follows the same schema kio compiles (dataclass fields, ``kafka_type``
metadata, tags, kio's own field classification) but only reads lengths: every array must
claim no more elements than the remaining bytes can hold, every string/bytes length must
fit, known tagged fields must be exactly as long as their size prefix says, and a null
array is refused where the schema does not allow it (kio would hand ``None`` to a
handler that iterates a tuple). It returns the offset where the entity ends, so the
caller also learns about trailing bytes before kio builds any object. Values are not
checked (UTF-8, booleans, ...); kio does that.
"""

from __future__ import annotations

import dataclasses
import functools
import struct

from collections.abc import Callable
from types import NoneType
from types import UnionType
from typing import Any
from typing import get_args
from typing import get_origin

from kio.serial._introspect import EntityField
from kio.serial._introspect import EntityTupleField
from kio.serial._introspect import PrimitiveField
from kio.serial._introspect import PrimitiveTupleField
from kio.serial._introspect import classify_field

__all__ = ("BoundsError", "Skipper", "entity_skipper")

Skipper = Callable[[bytes, int], int]
"""``skip(data, offset) -> end offset`` of one value; raises ``BoundsError``."""


class BoundsError(Exception):
    """The bytes cannot hold what their length fields claim (internal to the codec)."""


_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE_TYPES = frozenset({"string", "bytes", "records"})

_read_i8 = struct.Struct(">b").unpack_from
_read_i16 = struct.Struct(">h").unpack_from
_read_i32 = struct.Struct(">i").unpack_from

# Step kinds an entity's walk runs inline; anything else is a nested call. _FIXED_ARRAY: a
# compact, non-nullable array of fixed-size items (ShareAcknowledge's AcknowledgeTypes: one
# per acknowledgement batch, and librdkafka sends a batch per record).
_FIXED, _COMPACT, _LEGACY_STRING, _LEGACY_BYTES, _NESTED, _FIXED_ARRAY = range(6)


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """How to skip one value, and the fewest bytes it can occupy (bounds array counts).

    ``kind``/``arg`` let a parent entity run primitive steps inline instead of calling
    ``skip``: the walk is a few function calls per entity, not one per field.
    """

    skip: Skipper
    min_size: int
    kind: int = _NESTED
    arg: int = 0
    fixed_size: int | None = None


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    try:
        byte = data[pos]
    except IndexError:
        raise BoundsError("truncated varint") from None
    if byte < 0x80:  # nearly every count and tag section fits in one byte
        return byte, pos + 1
    return _read_long_uvarint(data, pos)


def _read_long_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    # Up to 5 bytes, as kio reads them (it refuses a 5th byte with the high bit set).
    # Unrolled: a loop costs more than the rest of a record-carrying partition's walk.
    try:
        result = data[pos] & 0x7F
        byte = data[pos + 1]
        result |= (byte & 0x7F) << 7
        if byte < 0x80:
            return result, pos + 2
        byte = data[pos + 2]
        result |= (byte & 0x7F) << 14
        if byte < 0x80:
            return result, pos + 3
        byte = data[pos + 3]
        result |= (byte & 0x7F) << 21
        if byte < 0x80:
            return result, pos + 4
        byte = data[pos + 4]
        result |= (byte & 0x7F) << 28
        if byte < 0x80:
            return result, pos + 5
    except IndexError:
        raise BoundsError("truncated varint") from None
    raise BoundsError("varint longer than 5 bytes")


def _skip_fixed(size: int) -> Skipper:
    def skip(data: bytes, pos: int) -> int:
        pos += size
        if pos > len(data):
            raise BoundsError("truncated")
        return pos

    return skip


def _skip_compact_bytes(data: bytes, pos: int) -> int:
    length, pos = _read_uvarint(data, pos)
    if length:  # 0 is null, otherwise length + 1
        pos += length - 1
        if pos > len(data):
            raise BoundsError("string or bytes longer than the request")
    return pos


def _skip_legacy_string(data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise BoundsError("truncated string length")
    length = _read_i16(data, pos)[0]
    pos += 2
    if length < -1:
        raise BoundsError(f"negative string length {length}")
    if length > 0:
        pos += length
        if pos > len(data):
            raise BoundsError("string longer than the request")
    return pos


def _skip_legacy_bytes(data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise BoundsError("truncated bytes length")
    length = _read_i32(data, pos)[0]
    pos += 4
    if length < -1:
        raise BoundsError(f"negative bytes length {length}")
    if length > 0:
        pos += length
        if pos > len(data):
            raise BoundsError("bytes longer than the request")
    return pos


_COMPACT_BYTES = _Shape(_skip_compact_bytes, 1, _COMPACT)
_LEGACY_STRING_SHAPE = _Shape(_skip_legacy_string, 2, _LEGACY_STRING)
_LEGACY_BYTES_SHAPE = _Shape(_skip_legacy_bytes, 4, _LEGACY_BYTES)


def _primitive(kafka_type: str, flexible: bool) -> _Shape:
    fixed = _FIXED_SIZES.get(kafka_type)
    if fixed is not None:
        return _Shape(_skip_fixed(fixed), fixed, _FIXED, fixed, fixed)
    if kafka_type not in _VARIABLE_TYPES:
        raise TypeError(f"no bounds rule for kafka_type {kafka_type!r}")
    if flexible:
        return _COMPACT_BYTES
    return _LEGACY_STRING_SHAPE if kafka_type == "string" else _LEGACY_BYTES_SHAPE


def _array(item: _Shape, flexible: bool, nullable: bool) -> _Shape:
    item_skip = item.skip
    item_fixed = item.fixed_size
    # Zero-size items do not occur in Kafka schemas; counting them as one byte keeps
    # the bound (and so kio's reservation) proportional to the request size anyway.
    item_min = max(item.min_size, 1)

    def skip(data: bytes, pos: int) -> int:
        if flexible:
            count, pos = _read_uvarint(data, pos)
            count -= 1  # 0 on the wire is null
        else:
            if pos + 4 > len(data):
                raise BoundsError("truncated array length")
            count = _read_i32(data, pos)[0]
            pos += 4
            if count < -1:
                raise BoundsError(f"negative array length {count}")
        if count == -1:
            if not nullable:
                raise BoundsError("null for a non-nullable array")
            return pos
        if count * item_min > len(data) - pos:
            raise BoundsError(f"array of {count} items longer than the request")
        if item_fixed is not None:
            return pos + count * item_fixed
        for _ in range(count):
            pos = item_skip(data, pos)
        return pos

    if flexible and not nullable and item_fixed is not None:
        return _Shape(skip, 1, _FIXED_ARRAY, item_fixed)
    return _Shape(skip, 1 if flexible else 4)


def _is_nullable(field_type: object) -> bool:
    return get_origin(field_type) is UnionType and NoneType in get_args(field_type)


def _field_shape(entity_type: type, field: dataclasses.Field) -> _Shape:
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    if entity_type.__name__ == "RequestHeader" and field.name == "client_id":
        # Kafka keeps the header's client id a legacy string even in header v2.
        return _LEGACY_STRING_SHAPE
    match classify_field(field):
        case PrimitiveField():
            return _primitive(field.metadata["kafka_type"], flexible)
        case PrimitiveTupleField():
            item = _primitive(field.metadata["kafka_type"], flexible)
            return _array(item, flexible, _is_nullable(field.type))
        case EntityField(nested):
            return _entity_shape(nested, _is_nullable(field.type))
        case EntityTupleField(nested):
            item = _entity_shape(nested, False)
            return _array(item, flexible, _is_nullable(field.type))
    raise TypeError(f"cannot classify field {field.name} of {entity_type.__name__}")


def _tagged_section(tag_skips: dict[int, Skipper]) -> Skipper:
    def skip(data: bytes, pos: int) -> int:
        count, pos = _read_uvarint(data, pos)
        if count * 2 > len(data) - pos:  # every tag takes at least a tag and a size byte
            raise BoundsError(f"{count} tagged fields longer than the request")
        for _ in range(count):
            tag, pos = _read_uvarint(data, pos)
            size, pos = _read_uvarint(data, pos)
            end = pos + size
            if end > len(data):
                raise BoundsError("tagged field longer than the request")
            tag_skip = tag_skips.get(tag)
            if tag_skip is not None and tag_skip(data, pos) != end:
                raise BoundsError(f"tagged field {tag} does not match its size")
            pos = end
        return pos

    return skip


def _fields_walk(steps: list[tuple[int, Any]], tagged: Skipper | None) -> Skipper:
    """One entity's walk: primitive steps inline, nested values by call."""
    steps_tuple = tuple(steps)

    def skip(data: bytes, pos: int) -> int:
        end = len(data)
        for kind, arg in steps_tuple:
            if kind == _FIXED:
                pos += arg
                if pos > end:
                    raise BoundsError("truncated")
            elif kind == _FIXED_ARRAY:  # _array's rules, inline
                if pos >= end:
                    raise BoundsError("truncated varint")
                count = data[pos]
                if count < 0x80:
                    pos += 1
                else:
                    count, pos = _read_long_uvarint(data, pos)
                if not count:  # 0 on the wire is null
                    raise BoundsError("null for a non-nullable array")
                pos += (count - 1) * arg
                if pos > end:
                    raise BoundsError(f"array of {count - 1} items longer than the request")
            elif kind == _COMPACT:
                if pos >= end:
                    raise BoundsError("truncated varint")
                length = data[pos]
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = _read_long_uvarint(data, pos)
                if length:  # 0 is null, otherwise length + 1
                    pos += length - 1
                    if pos > end:
                        raise BoundsError("string or bytes longer than the request")
            elif kind == _LEGACY_BYTES or kind == _LEGACY_STRING:
                if kind == _LEGACY_BYTES:
                    if pos + 4 > end:
                        raise BoundsError("truncated bytes length")
                    length = _read_i32(data, pos)[0]
                    pos += 4
                else:
                    if pos + 2 > end:
                        raise BoundsError("truncated string length")
                    length = _read_i16(data, pos)[0]
                    pos += 2
                if length > 0:
                    pos += length
                    if pos > end:
                        raise BoundsError("string or bytes longer than the request")
                elif length < -1:
                    raise BoundsError(f"negative string or bytes length {length}")
            else:
                pos = arg(data, pos)
        if tagged is not None:
            if pos >= end:
                raise BoundsError("truncated tagged fields")
            if data[pos] == 0:  # the usual empty tagged-field section
                return pos + 1
            return tagged(data, pos)
        return pos

    return skip


@functools.cache
def _entity_shape(entity_type: type, nullable: bool) -> _Shape:
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    steps: list[tuple[int, Any]] = []
    tag_skips: dict[int, Skipper] = {}
    min_size = 0
    all_fixed = True
    for field in dataclasses.fields(entity_type):
        tag = field.metadata.get("tag")
        shape = _field_shape(entity_type, field)
        if tag is not None:
            tag_skips[int(tag)] = shape.skip
            continue
        min_size += shape.min_size
        if shape.kind == _FIXED and steps and steps[-1][0] == _FIXED:
            steps[-1] = (_FIXED, steps[-1][1] + shape.arg)  # merge runs of fixed fields
        elif shape.kind != _NESTED:
            steps.append((shape.kind, shape.arg))
        else:
            steps.append((_NESTED, shape.skip))
        all_fixed = all_fixed and shape.kind == _FIXED
    if flexible:
        min_size += 1
    skip_fields = _fields_walk(steps, _tagged_section(tag_skips) if flexible else None)

    if not nullable:
        fixed_size = min_size if all_fixed and not flexible else None
        return _Shape(skip_fields, min_size, fixed_size=fixed_size)

    def skip_nullable(data: bytes, pos: int) -> int:
        if pos + 1 > len(data):
            raise BoundsError("truncated nullable struct marker")
        if _read_i8(data, pos)[0] == -1:  # as kio: only -1 means null
            return pos + 1
        return skip_fields(data, pos + 1)

    return _Shape(skip_nullable, 1)


def entity_skipper(entity_type: type) -> Skipper:
    """The bounds walk for one kio entity type (a request body or header schema)."""
    return _entity_shape(entity_type, False).skip
