"""The API versions this broker advertises in ApiVersions, and the few it refuses anyway.

``ADVERTISED_VERSIONS`` is the one table: api key -> inclusive ``(min, max)``. Adding an
API later means one ``ApiKey`` member, one row here and a handler; the codec derives
everything else (which versions decode, what the ApiVersions fallback lists) from it.

Some versions are advertised only because old clients look for them: librdkafka before
2.11.1 enables the v2 message format only if Produce v3 *and* lower versions are inside
the range, so Kafka 4.0 advertises Produce 0-12 while answering v0-2 with
UNSUPPORTED_VERSION (KAFKA-18659). ``REJECTED_VERSIONS`` lists such versions; they are
advertised, never decoded, and answered with that error.
"""

from __future__ import annotations

import enum

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

__all__ = (
    "ApiKey",
    "VersionRange",
    "ADVERTISED_VERSIONS",
    "REJECTED_VERSIONS",
    "advertised_range",
    "is_advertised",
    "is_rejected",
    "is_supported",
    "supported_versions",
)


class ApiKey(enum.IntEnum):
    """Kafka api keys this broker serves (numbers from the Kafka protocol)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37


class VersionRange(NamedTuple):
    """Inclusive version range of one API, as ApiVersions reports it."""

    min: int
    max: int


ADVERTISED_VERSIONS: Mapping[int, VersionRange] = MappingProxyType(
    {
        ApiKey.PRODUCE: VersionRange(0, 11),
        # Java clients stay at Fetch <= 12 unless Metadata returns topic ids.
        ApiKey.FETCH: VersionRange(4, 17),
        ApiKey.LIST_OFFSETS: VersionRange(1, 10),
        ApiKey.METADATA: VersionRange(0, 13),
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        ApiKey.CREATE_TOPICS: VersionRange(2, 7),
        ApiKey.DELETE_TOPICS: VersionRange(1, 6),
        # v0 must stay: librdkafka < 2.11.1 enables idempotence only if it is advertised.
        ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
        ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
    }
)

REJECTED_VERSIONS: Mapping[int, frozenset[int]] = MappingProxyType(
    {
        # Advertised for librdkafka < 2.11.1, refused like Kafka 4.0 does (KAFKA-18659).
        ApiKey.PRODUCE: frozenset({0, 1, 2}),
    }
)


def advertised_range(api_key: int) -> VersionRange | None:
    """The advertised range of ``api_key``, or ``None`` if the key is not served."""
    return ADVERTISED_VERSIONS.get(api_key)


def is_advertised(api_key: int, api_version: int) -> bool:
    """Whether ApiVersions lists this version (it may still be refused)."""
    window = ADVERTISED_VERSIONS.get(api_key)
    return window is not None and window.min <= api_version <= window.max


def is_rejected(api_key: int, api_version: int) -> bool:
    """Whether this version is advertised but answered with UNSUPPORTED_VERSION."""
    return api_version in REJECTED_VERSIONS.get(api_key, ())


def is_supported(api_key: int, api_version: int) -> bool:
    """Whether requests of this version are decoded and handled."""
    return is_advertised(api_key, api_version) and not is_rejected(api_key, api_version)


def supported_versions(api_key: int) -> tuple[int, ...]:
    """Every version of ``api_key`` that is decoded and handled, ascending."""
    window = ADVERTISED_VERSIONS.get(api_key)
    if window is None:
        return ()
    return tuple(v for v in range(window.min, window.max + 1) if not is_rejected(api_key, v))
