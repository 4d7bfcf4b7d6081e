"""A hand-written encoder of the CreateTopics response (v2-v7), without kio.

From v5 on every created topic carries its configs (37 entries here): kio walked 148,000
config entities to answer one request of 4,000 topics, 5 s of the event loop (issue 20).
Topics created with the same configs share one config list (the handler reuses the list
object), so its bytes are encoded once per response and copied for the others; everything
else is a few ``struct`` packs per topic. The bytes are exactly kio's for the same response
(tests/unit/adapter/test_create_topics_response.py holds them to it, version by version).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from .error_messages import default_message
from .fast_responses import Encoded, _uvarint

VERSIONS = range(2, 8)
_FLEXIBLE = 5
_WITH_TOPIC_ID = 7

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITIONS_AND_FACTOR = struct.Struct(">ih")
_CONFIG_TAIL = struct.Struct(">?b?")  # read_only, config_source, is_sensitive
_ZERO_UUID = bytes(16)
_NO_TAGS = b"\x00"


def encode_create_topics_response(version: int, throttle_ms: int, topics: Sequence[dict]) -> Encoded:
    """``topics``: the result dicts the handler builds (``entities.make``'s shape)."""
    configs_bytes: dict[int, bytes] = {}
    return Encoded([head(version, throttle_ms, len(topics)), topics_part(version, topics, configs_bytes),
                    tail(version)])


def head(version: int, throttle_ms: int, count: int) -> bytes:
    """The bytes before the first topic of a response of ``count`` topics."""
    flexible = version >= _FLEXIBLE
    return _I32.pack(throttle_ms) + (_uvarint(count + 1) if flexible else _I32.pack(count))


def tail(version: int) -> bytes:
    return _NO_TAGS if version >= _FLEXIBLE else b""


def topics_part(version: int, topics: Sequence[dict], configs_bytes: dict[int, bytes]) -> bytes:
    """The bytes of consecutive topics of a response (a caller may encode a long response
    in slices); ``configs_bytes`` (id of a config list -> its bytes) is shared by the
    slices of one response, whose results must stay alive meanwhile."""
    flexible = version >= _FLEXIBLE
    out = bytearray()
    for topic in topics:
        message = topic["error_message"]
        if message is None and topic["error_code"]:
            message = default_message(topic["error_code"])  # as codec.entities.make does
        if not flexible:
            out += _string(topic["name"])
            out += _I16.pack(int(topic["error_code"]))
            out += _nullable_string(message)
            continue
        out += _compact_string(topic["name"])
        if version >= _WITH_TOPIC_ID:
            topic_id = topic["topic_id"]
            out += _ZERO_UUID if topic_id is None else uuid.UUID(str(topic_id)).bytes
        out += _I16.pack(int(topic["error_code"]))
        out += _compact_nullable_string(message)
        out += _PARTITIONS_AND_FACTOR.pack(topic["num_partitions"], topic["replication_factor"])
        configs = topic["configs"]
        if configs is None:
            out += b"\x00"
        else:
            encoded = configs_bytes.get(id(configs))
            if encoded is None:
                encoded = configs_bytes[id(configs)] = _configs(configs)
            out += encoded
        out += _NO_TAGS  # topic_config_error_code (tag 0) is never set
    return bytes(out)


def _configs(configs: Sequence[dict]) -> bytes:
    out = bytearray(_uvarint(len(configs) + 1))
    for config in configs:
        out += _compact_string(config["name"])
        out += _compact_nullable_string(config["value"])
        out += _CONFIG_TAIL.pack(config["read_only"], config["config_source"], config["is_sensitive"])
        out += _NO_TAGS
    return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _I16.pack(len(data)) + data


def _nullable_string(text: str | None) -> bytes:
    return _I16.pack(-1) if text is None else _string(text)


def _compact_string(text: str) -> bytes:
    data = text.encode("utf-8")
    return _uvarint(len(data) + 1) + data


def _compact_nullable_string(text: str | None) -> bytes:
    return b"\x00" if text is None else _compact_string(text)
