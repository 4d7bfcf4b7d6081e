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
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


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
        # Groups: v0 of the classic group APIs, OffsetCommit 2 and OffsetFetch 1 must stay in
        # range, librdkafka < 2.11.1 enables its balanced consumer only when they are.
        ApiKey.OFFSET_COMMIT: VersionRange(2, 9),
        ApiKey.OFFSET_FETCH: VersionRange(1, 9),
        ApiKey.FIND_COORDINATOR: VersionRange(0, 6),
        ApiKey.JOIN_GROUP: VersionRange(0, 9),
        ApiKey.HEARTBEAT: VersionRange(0, 4),
        ApiKey.LEAVE_GROUP: VersionRange(0, 5),
        ApiKey.SYNC_GROUP: VersionRange(0, 5),
        ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),
        ApiKey.LIST_GROUPS: VersionRange(0, 5),
        ApiKey.DELETE_GROUPS: VersionRange(0, 2),
        ApiKey.OFFSET_DELETE: VersionRange(0, 0),
        # KIP-848: librdkafka 2.16 uses it with OffsetCommit >= 9 and OffsetFetch >= 9.
        ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
        # KIP-932: v0 was Kafka 4.0's early access, removed in 4.1; librdkafka 2.16 sends v1.
        ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
        ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        ApiKey.CREATE_TOPICS: VersionRange(2, 7),
        ApiKey.DELETE_TOPICS: VersionRange(1, 6),
        # v0 must stay: librdkafka < 2.11.1 enables idempotence only if it is advertised.
        ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),
        # Transactions V1 only: no transaction.version feature is finalized, so clients
        # never use AddPartitionsToTxn v4+ (broker to broker), EndTxn v5 or TxnOffsetCommit
        # v5 (KIP-890 part 2); AddOffsetsToTxn v4 is the same request as v3.
        ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 4),
        ApiKey.END_TXN: VersionRange(0, 4),
        ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 4),
        ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),
        ApiKey.LIST_TRANSACTIONS: VersionRange(0, 2),
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
        ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),
        ApiKey.DELETE_RECORDS: VersionRange(0, 2),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(2, 4),
        ApiKey.ALTER_CONFIGS: VersionRange(0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
        ApiKey.DESCRIBE_LOG_DIRS: VersionRange(1, 4),
        ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 1),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),
        ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),
        ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),
        # v0 was removed in Kafka 4.0 (KIP-896)
        ApiKey.DESCRIBE_ACLS: VersionRange(1, 3),
        ApiKey.CREATE_ACLS: VersionRange(1, 3),
        ApiKey.DELETE_ACLS: VersionRange(1, 3),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: VersionRange(0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: VersionRange(0, 1),
        # What a one-node KRaft cluster of Kafka 4.1 answers (the controller's APIs too,
        # which its broker forwards). v0 of WriteTxnMarkers and AlterReplicaLogDirs was
        # removed in Kafka 4.0 (KIP-896).
        ApiKey.WRITE_TXN_MARKERS: VersionRange(1, 2),
        ApiKey.ALTER_REPLICA_LOG_DIRS: VersionRange(1, 2),
        ApiKey.ELECT_LEADERS: VersionRange(0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 1),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),
        ApiKey.DESCRIBE_QUORUM: VersionRange(0, 2),
        ApiKey.UPDATE_FEATURES: VersionRange(0, 2),
        ApiKey.LIST_CONFIG_RESOURCES: VersionRange(0, 1),
        # KIP-932 share groups: v0 was 4.0's early access, removed in 4.1; librdkafka 2.16
        # sends v1 (and a header of version -1 if v1 is not advertised), Kafka 4.2 serves 1-2.
        ApiKey.SHARE_FETCH: VersionRange(1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 2),
        # Kafka 4.2's share offsets admin (v1 of Describe adds the lag, KIP-1226)
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),
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
