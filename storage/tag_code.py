"""The tag hash code stored in each consume-queue entry.

RocketMQ stores Java's ``String.hashCode`` of the tag, so the same tag gives the same code in
every process and on every restart. Python's ``hash()`` is salted per process and must never
be persisted.
"""

from __future__ import annotations


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode``: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def tag_code(tag: bytes | None) -> int:
    """The consume-queue code of a record's tag header value; 0 means "no tag"."""
    if not tag:
        return 0
    return java_string_hash(tag.decode("utf-8", errors="replace"))
