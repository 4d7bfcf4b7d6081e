"""Kafka's rules for legal topic names."""

from __future__ import annotations

import re

MAX_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def invalid_reason(name: str | None) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_LENGTH:
        return f"topic name is longer than {MAX_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
    return None
