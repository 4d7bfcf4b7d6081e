"""Reading the topics out of a "consumer" protocol member's subscription metadata.

The broker treats member metadata as opaque, except that OffsetDelete must refuse to delete
offsets of a topic an active consumer group is subscribed to. Every version of
ConsumerProtocolSubscription (v0-3) starts with ``version: int16`` and ``topics:
[string]`` (non-flexible encoding), which is all this reads.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topic names in a consumer subscription; empty if the bytes are not one."""
    try:
        pos = _I16.size
        (count,) = _I32.unpack_from(metadata, pos)
        pos += _I32.size
        topics = set()
        for _ in range(max(count, 0)):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += _I16.size
            if length < 0 or pos + length > len(metadata):
                return set()
            topics.add(metadata[pos : pos + length].decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()
