"""Build kio response entities from plain values, whatever the API version.

kio generates one class per API version, each with only the fields that version has. Handlers
describe a response once, with every field any version may carry, and ``make`` keeps the
fields the requested version's class knows, building nested entities from dicts. An entity
with an error and an ``error_message`` field gets Kafka's default message for the code when
the handler gives none (codec.error_messages). A message always fits its field: in versions
before the flexible ones it is an int16-length string, and a message repeating what the
client sent (a 32,000-character name) is cut to 32767 bytes rather than failing the whole
response (Kafka's serializer throws there, and the client gets no answer at all).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from typing import Any

from kio.schema.errors import ErrorCode

from .error_messages import default_message

_ZERO = datetime.timedelta(0)
_LEGACY_STRING_MAX = 32767  # UTF-8 bytes an int16-length string holds


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    names: frozenset[str]
    nested: dict[str, tuple[type, bool]]  # field -> (entity class, is a tuple of them)
    timedeltas: frozenset[str]
    error_codes: frozenset[str]
    has_error_message: bool  # an error_code and an error_message field side by side


@functools.cache
def _shape(cls: type) -> _Shape:
    hints = typing.get_type_hints(cls)
    names: set[str] = set()
    nested: dict[str, tuple[type, bool]] = {}
    timedeltas: set[str] = set()
    error_codes: set[str] = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        hint = _strip_optional(hints[f.name])
        kafka_type = f.metadata.get("kafka_type", "")
        if kafka_type.startswith("timedelta"):
            timedeltas.add(f.name)
        elif kafka_type == "error_code":
            error_codes.add(f.name)
        if typing.get_origin(hint) is tuple:
            arg = typing.get_args(hint)[0]
            if dataclasses.is_dataclass(arg):
                nested[f.name] = (arg, True)
            continue
        candidates = [hint, *typing.get_args(hint)]
        for candidate in candidates:
            if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
                nested[f.name] = (candidate, False)
                break
    has_error_message = "error_code" in error_codes and "error_message" in names
    return _Shape(frozenset(names), nested, frozenset(timedeltas), frozenset(error_codes), has_error_message)


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def make(cls: type, /, **values: Any) -> Any:
    """``cls(**values)`` keeping only ``cls``'s fields; dicts become nested entities,
    integer milliseconds timedeltas and integer error codes ErrorCode where the schema
    wants one; Kafka's default message where an error has none."""
    shape = _shape(cls)
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in shape.names:
            continue
        spec = shape.nested.get(key)
        if spec is not None and value is not None:
            entity_cls, many = spec
            if many:
                value = tuple(v if not isinstance(v, dict) else make(entity_cls, **v) for v in value)
            elif isinstance(value, dict):
                value = make(entity_cls, **value)
        elif key in shape.timedeltas and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        elif key in shape.error_codes and not isinstance(value, ErrorCode):
            value = ErrorCode(value)
        kwargs[key] = value
    for key in shape.timedeltas - kwargs.keys():
        kwargs[key] = _ZERO
    if shape.has_error_message and kwargs.get("error_message") is None and kwargs.get("error_code"):
        kwargs["error_message"] = default_message(kwargs["error_code"])
    message = kwargs.get("error_message")
    if isinstance(message, str) and len(message) > _LEGACY_STRING_MAX // 4 and not cls.__flexible__:
        kwargs["error_message"] = _legacy_string(message)
    return cls(**kwargs)


def _legacy_string(text: str) -> str:
    """``text`` cut to what an int16-length string holds (whole characters only)."""
    raw = text.encode()
    if len(raw) <= _LEGACY_STRING_MAX:
        return text
    return raw[:_LEGACY_STRING_MAX].decode(errors="ignore")


def nested_class(cls: type, field_name: str) -> type | None:
    spec = _shape(cls).nested.get(field_name)
    return spec[0] if spec else None
