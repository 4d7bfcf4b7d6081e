"""The admin APIs the Java client and Spark need besides the data path (issue #3):
OffsetForLeaderEpoch (23), DescribeCluster (60), DescribeTopicPartitions (75), AlterConfigs
(33), IncrementalAlterConfigs (44), DeleteRecords (21) and DescribeLogDirs (35), through
confluent-kafka's and kafka-python's admin clients and, at every advertised version and for
every error path, the raw kio client.

librdkafka 2.16 implements describe_cluster and describe_topics with Metadata (v13), so the
DescribeCluster / DescribeTopicPartitions wire paths are driven through kafka-python and raw.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    OffsetSpec,
)
from rawkafka import EARLIEST, LATEST, ErrorCode, KafkaRaw, make_batch, start_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS = 23, 60, 75
ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DELETE_RECORDS, DESCRIBE_LOG_DIRS = 33, 44, 21, 35
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

EPOCH_TOPIC = "epochs"  # 1 partition, 10 records in 5 batches
SIZED = "sized"  # 2 partitions with known batch sizes
PAGED = ["paged-a", "paged-b", "paged-c"]  # 3, 1 and 4 partitions


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("admin") / "data") as b:
        with KafkaRaw(b.host, b.port) as conn:
            conn.create_topic(EPOCH_TOPIC, partitions=1)
            for _ in range(5):
                conn.produce_ok(EPOCH_TOPIC, 0, make_batch(2))
            conn.create_topic(SIZED, partitions=2)
            for name, count in zip(PAGED, (3, 1, 4)):
                conn.create_topic(name, partitions=count)
        yield b


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def fresh_topic(conn: KafkaRaw, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    conn.create_topic(name, partitions=partitions)
    return name


def kafka_error(future) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(10)
    return info.value.args[0].code()


def topic_configs(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(10)


def overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    return {
        name: entry.value
        for name, entry in topic_configs(admin, topic).items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


# --- OffsetForLeaderEpoch ---------------------------------------------------------------


def leader_epochs(
    conn: KafkaRaw, version: int, topic: str, parts: list[tuple[int, int, int]], **kw
):
    """[(partition, current_leader_epoch, leader_epoch)] -> [(error, epoch, end offset)]."""
    response = conn.request(
        OFFSET_FOR_LEADER_EPOCH,
        version,
        topics=[
            dict(
                topic=topic,
                partitions=[
                    dict(partition=p, current_leader_epoch=c, leader_epoch=e) for p, c, e in parts
                ],
            )
        ],
        **kw,
    )
    (result,) = response.topics
    assert result.topic == topic
    assert [p.partition for p in result.partitions] == [p for p, _, _ in parts]
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in result.partitions]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(conn, version):
    hw = conn.high_watermark(EPOCH_TOPIC)
    assert hw == 10
    got = leader_epochs(
        conn,
        version,
        EPOCH_TOPIC,
        [
            (0, 0, 0),  # the Java consumer after a fetch: epoch 0 ends at the high watermark
            (0, -1, 0),  # current epoch not given
            (0, 0, -1),  # undefined epoch
            (0, 0, 1),  # an epoch above ours: unknown history
            (0, 0, 7),
            (0, 0, -5),  # below every epoch: Kafka answers the first epoch's start offset
            (0, 1, 0),  # the client knows a newer leader than we are
            (0, -3, 0),  # older than ours
            (1, 0, 0),  # no such partition
        ],
        replica_id=-1,
    )
    assert got == [
        (ErrorCode.none, 0, hw),
        (ErrorCode.none, 0, hw),
        (ErrorCode.none, -1, -1),
        (ErrorCode.none, -1, -1),
        (ErrorCode.none, -1, -1),
        (ErrorCode.none, -5, 0),
        (ErrorCode.unknown_leader_epoch, -1, -1),
        (ErrorCode.fenced_leader_epoch, -1, -1),
        (ErrorCode.unknown_topic_or_partition, -1, -1),
    ]
    assert leader_epochs(conn, version, "no-such-topic", [(0, 0, 0)]) == [
        (ErrorCode.unknown_topic_or_partition, -1, -1)
    ]


@pytest.mark.parametrize("replica_id", [-1, -2, 0, 5])
def test_offset_for_leader_epoch_replica_ids(conn, replica_id):
    got = leader_epochs(conn, 4, EPOCH_TOPIC, [(0, 0, 0)], replica_id=replica_id)
    assert got == [(ErrorCode.none, 0, conn.high_watermark(EPOCH_TOPIC))]


def test_offset_for_leader_epoch_follows_the_log(conn):
    topic = fresh_topic(conn)
    assert leader_epochs(conn, 4, topic, [(0, 0, 0)]) == [(ErrorCode.none, 0, 0)]  # empty
    for _ in range(3):
        conn.produce_ok(topic, 0, make_batch(3))
    assert leader_epochs(conn, 4, topic, [(0, 0, 0)]) == [(ErrorCode.none, 0, 9)]
    delete_records(conn, topic, [(0, 4)])
    assert leader_epochs(conn, 4, topic, [(0, 0, 0), (0, 0, -2)]) == [
        (ErrorCode.none, 0, 9),
        (ErrorCode.none, -2, 4),
    ]


def test_stored_batches_carry_leader_epoch_zero(conn):
    """What the Java consumer validates with: the epoch of the batches it fetched."""
    entry = conn.fetch(EPOCH_TOPIC, 0, 0)
    data = bytes(entry.records)
    assert data and int.from_bytes(data[12:16], "big", signed=True) == 0


# --- authorized operations -------------------------------------------------------------------
# Without an authorizer Kafka grants every operation a resource type supports
# (AclEntry.supportedOperations): bit n = AclOperation code n; -2**31 when not asked for.
NOT_PROVIDED = -(2**31)
OPS = dict(READ=3, WRITE=4, CREATE=5, DELETE=6, ALTER=7, DESCRIBE=8, CLUSTER_ACTION=9,
           DESCRIBE_CONFIGS=10, ALTER_CONFIGS=11, IDEMPOTENT_WRITE=12)
TOPIC_OPS = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
               "DESCRIBE"}
METADATA, DESCRIBE_GROUPS = 3, 15


def bits(operations: set[str]) -> int:
    return sum(1 << OPS[op] for op in operations)


@pytest.mark.parametrize("version", [8, 9, 10, 11, 12])
@pytest.mark.parametrize("include", [True, False])
def test_metadata_authorized_operations(conn, version, include):
    fields = dict(include_topic_authorized_operations=include)
    if version <= 10:
        fields["include_cluster_authorized_operations"] = include
    topic = dict(name=PAGED[0], topic_id=uuid.UUID(int=0)) if version >= 10 else dict(name=PAGED[0])
    response = conn.request(METADATA, version, topics=[topic], allow_auto_topic_creation=False, **fields)
    (topic,) = response.topics
    assert topic.topic_authorized_operations == (bits(TOPIC_OPS) if include else NOT_PROVIDED)
    if version <= 10:
        assert response.cluster_authorized_operations == (bits(CLUSTER_OPS) if include else NOT_PROVIDED)


def test_authorized_operations_through_admin_clients(conn, admin):
    from confluent_kafka import TopicCollection

    def names(ops) -> set[str]:
        return {op.name for op in ops}

    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert names(cluster.authorized_operations) == CLUSTER_OPS
    (topic,) = admin.describe_topics(TopicCollection([PAGED[0]]), include_authorized_operations=True).values()
    assert names(topic.result(10).authorized_operations) == TOPIC_OPS
    (group,) = admin.describe_consumer_groups(["ops-group"], include_authorized_operations=True).values()
    assert names(group.result(10).authorized_operations) == GROUP_OPS
    assert admin.describe_cluster().result(10).authorized_operations is None


@pytest.mark.parametrize("version", [3, 4, 5])
def test_describe_groups_authorized_operations(conn, version):
    for include, expected in ((True, bits(GROUP_OPS)), (False, NOT_PROVIDED)):
        response = conn.request(DESCRIBE_GROUPS, version, groups=["no-such-group"], include_authorized_operations=include)
        assert [g.authorized_operations for g in response.groups] == [expected]


# --- DescribeCluster ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_raw(broker, conn, version):
    response = conn.request(
        DESCRIBE_CLUSTER, version, include_cluster_authorized_operations=True, endpoint_type=1
    )
    assert response.error_code == ErrorCode.none and response.error_message is None
    assert response.controller_id == 0
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (0, broker.host, broker.port, None)
    ]
    assert response.cluster_authorized_operations == bits(CLUSTER_OPS)
    assert response.cluster_id == conn.metadata([], version=12).cluster_id
    if version >= 1:
        assert response.endpoint_type == 1


@pytest.mark.parametrize(
    "endpoint_type, code",
    [
        (2, ErrorCode.mismatched_endpoint_type),
        (0, ErrorCode.unsupported_endpoint_type),
        (9, ErrorCode.unsupported_endpoint_type),
    ],
)
def test_describe_cluster_other_endpoint_types(conn, endpoint_type, code):
    response = conn.request(
        DESCRIBE_CLUSTER,
        1,
        include_cluster_authorized_operations=False,
        endpoint_type=endpoint_type,
    )
    assert response.error_code == code and response.error_message
    assert response.brokers == ()
    assert response.cluster_authorized_operations == NOT_PROVIDED


def test_describe_cluster_clients(broker, conn, admin):
    from kafka import KafkaAdminClient

    plain = conn.request(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False)
    assert plain.cluster_authorized_operations == NOT_PROVIDED
    cluster_id = plain.cluster_id
    result = admin.describe_cluster().result(10)  # librdkafka: Metadata under the hood
    assert result.cluster_id == cluster_id
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(0, broker.host, broker.port)]
    assert result.controller.id == 0
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)  # DescribeCluster v1
    try:
        described = client.describe_cluster()
    finally:
        client.close()
    assert described["cluster_id"] == cluster_id
    assert described["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [
        (0, broker.host, broker.port)
    ]


# --- DescribeTopicPartitions ------------------------------------------------------------------


def describe_partitions(conn: KafkaRaw, topics, limit=2000, cursor=None):
    response = conn.request(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[dict(name=t) for t in topics],
        response_partition_limit=limit,
        cursor=cursor,
    )
    next_cursor = response.next_cursor
    return response.topics, None if next_cursor is None else (
        next_cursor.topic_name,
        next_cursor.partition_index,
    )


def test_describe_topic_partitions_fields(conn):
    topic_ids = {t.name: t.topic_id for t in conn.metadata(PAGED).topics}
    topics, cursor = describe_partitions(conn, PAGED)
    assert cursor is None
    assert [(t.name, t.error_code, t.topic_id, t.is_internal) for t in topics] == [
        (name, ErrorCode.none, topic_ids[name], False) for name in PAGED
    ]
    part = topics[2].partitions[3]
    assert (part.error_code, part.partition_index, part.leader_id, part.leader_epoch) == (
        ErrorCode.none,
        3,
        0,
        0,
    )
    assert (part.replica_nodes, part.isr_nodes, part.offline_replicas) == ((0,), (0,), ())
    assert (part.eligible_leader_replicas, part.last_known_elr) == ((), ())
    assert topics[0].topic_authorized_operations == bits(TOPIC_OPS)
    (missing,), _ = describe_partitions(conn, ["no-such-topic"])
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    assert missing.topic_authorized_operations == NOT_PROVIDED


def walk(conn: KafkaRaw, topics, limit):
    pages, cursor = [], None
    while True:
        got, next_cursor = describe_partitions(
            conn,
            topics,
            limit,
            None if cursor is None else dict(topic_name=cursor[0], partition_index=cursor[1]),
        )
        pages.append([(t.name, [p.partition_index for p in t.partitions]) for t in got])
        if next_cursor is None:
            return pages
        assert len(pages) < 200, "pagination does not end"  # __consumer_offsets alone is 25 pages of 2
        cursor = next_cursor


def test_describe_topic_partitions_pagination(conn):
    assert walk(conn, PAGED, 2) == [
        [("paged-a", [0, 1])],
        [("paged-a", [2]), ("paged-b", [0])],
        [("paged-c", [0, 1])],
        [("paged-c", [2, 3])],
    ]
    assert walk(conn, list(reversed(PAGED)), 4) == [
        [("paged-a", [0, 1, 2]), ("paged-b", [0])],
        [("paged-c", [0, 1, 2, 3])],
    ]
    assert walk(conn, PAGED, 3) == [
        [("paged-a", [0, 1, 2])],
        [("paged-b", [0]), ("paged-c", [0, 1])],
        [("paged-c", [2, 3])],
    ]
    # Limits of 0 or below are clamped to 1, so a pager always progresses.
    assert walk(conn, ["paged-b", "paged-c"], 0) == [
        [("paged-b", [0])],
        [("paged-c", [0])],
        [("paged-c", [1])],
        [("paged-c", [2])],
        [("paged-c", [3])],
    ]


def test_describe_topic_partitions_cursor_mid_topic(conn):
    topics, cursor = describe_partitions(
        conn, PAGED, 3, dict(topic_name="paged-c", partition_index=2)
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in topics] == [
        ("paged-c", [2, 3])
    ]
    assert cursor is None


def test_describe_topic_partitions_all_topics(conn):
    topics, _ = describe_partitions(conn, [])
    names = [t.name for t in topics]
    assert names == sorted(names) and set(PAGED) | {EPOCH_TOPIC, SIZED} <= set(names)
    assert all(t.error_code == ErrorCode.none for t in topics)
    # Every topic from the cursor's on, at most 2 partitions per page.
    pages = walk(conn, [], 2)
    flat = [(name, p) for page in pages for name, parts in page for p in parts]
    assert [name for name, _ in flat] == sorted(name for name, _ in flat)
    assert [p for name, p in flat if name == "paged-c"] == [0, 1, 2, 3]
    assert all(sum(len(parts) for _, parts in page) <= 2 for page in pages)


def test_describe_topic_partitions_errors(conn):
    topics, _ = describe_partitions(conn, ["paged-b", "no-such-topic", "bad/name"])
    # kio decodes the zero topic id as None
    assert [(t.name, t.error_code, t.topic_id, t.partitions) for t in topics] == [
        ("bad/name", ErrorCode.invalid_topic_exception, None, ()),
        ("no-such-topic", ErrorCode.unknown_topic_or_partition, None, ()),
        ("paged-b", ErrorCode.none, topics[2].topic_id, topics[2].partitions),
    ]
    # The cursor's topic must be among the requested ones; its partition must be >= 0.
    for cursor in (
        dict(topic_name="paged-c", partition_index=0),
        dict(topic_name="paged-a", partition_index=-1),
    ):
        topics, next_cursor = describe_partitions(conn, ["paged-a", "paged-b"], cursor=cursor)
        assert [(t.name, t.error_code) for t in topics] == [
            ("paged-a", ErrorCode.invalid_request),
            ("paged-b", ErrorCode.invalid_request),
        ]
        assert next_cursor is None


def test_describe_topic_partitions_kafka_python(broker):
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        first = client.describe_topic_partitions(PAGED, response_partition_limit=3)
        assert first["next_cursor"] == {"topic_name": "paged-b", "partition_index": 0}
        second = client.describe_topic_partitions(
            PAGED, response_partition_limit=3, cursor=first["next_cursor"]
        )
    finally:
        client.close()
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in second["topics"]
    ] == [
        ("paged-b", [0]),
        ("paged-c", [0, 1]),
    ]
    assert second["next_cursor"] == {"topic_name": "paged-c", "partition_index": 2}


def test_describe_topics_confluent(conn, admin):
    topic_id = conn.metadata(["paged-c"]).topics[0].topic_id
    described = admin.describe_topics(TopicCollection(["paged-c"]))["paged-c"].result(10)
    tid = described.topic_id
    msb, lsb = tid.get_most_significant_bits(), tid.get_least_significant_bits()
    assert described.name == "paged-c" and (msb % (1 << 64), lsb % (1 << 64)) == divmod(
        topic_id.int, 1 << 64
    )
    assert [
        (p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
        for p in described.partitions
    ] == [(i, 0, [0], [0]) for i in range(4)]
    assert kafka_error(
        admin.describe_topics(TopicCollection(["no-such-topic"]))["no-such-topic"]
    ) == (KafkaError.UNKNOWN_TOPIC_OR_PART)


# --- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------------


def alter(
    conn: KafkaRaw, resources, *, incremental: bool, version: int | None = None, validate_only=False
):
    api = INCREMENTAL_ALTER_CONFIGS if incremental else ALTER_CONFIGS
    response = conn.request(
        api,
        (1 if incremental else 2) if version is None else version,
        resources=[
            dict(resource_type=kind, resource_name=name, configs=[dict(c) for c in configs])
            for kind, name, configs in resources
        ],
        validate_only=validate_only,
    )
    return [
        (r.resource_type, r.resource_name, r.error_code, r.error_message)
        for r in response.responses
    ]


def ops(*items):
    """(name, op, value) -> IncrementalAlterConfigs entries."""
    return [dict(name=n, config_operation=o, value=v) for n, o, v in items]


def sets(**configs):
    return [dict(name=n.replace("_", "."), value=v) for n, v in configs.items()]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_all_overrides(conn, admin, version):
    topic = fresh_topic(conn)
    assert alter(
        conn,
        [(TOPIC_RESOURCE, topic, sets(retention_ms="1000", max_message_bytes="2000"))],
        incremental=False,
        version=version,
    ) == [(TOPIC_RESOURCE, topic, ErrorCode.none, None)]
    assert overrides(admin, topic) == {"retention.ms": "1000", "max.message.bytes": "2000"}
    # Kafka semantics: what is not named goes back to its default.
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, sets(retention_ms="3000"))],
            incremental=False,
            version=version,
        )[0][2]
        == ErrorCode.none
    )
    assert overrides(admin, topic) == {"retention.ms": "3000"}
    assert (
        topic_configs(admin, topic)["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    )
    # A null value means no override.
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, [dict(name="retention.ms", value=None)])],
            incremental=False,
            version=version,
        )[0][2]
        == ErrorCode.none
    )
    assert overrides(admin, topic) == {}


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_operations(conn, admin, version):
    topic = fresh_topic(conn)
    ok = [(TOPIC_RESOURCE, topic, ErrorCode.none, None)]
    assert (
        alter(
            conn,
            [
                (
                    TOPIC_RESOURCE,
                    topic,
                    ops(("retention.ms", SET, "1000"), ("max.message.bytes", SET, "5000")),
                )
            ],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("retention.ms", SET, "2000")))],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert overrides(admin, topic) == {"retention.ms": "2000", "max.message.bytes": "5000"}
    assert (
        alter(
            conn,
            [
                (
                    TOPIC_RESOURCE,
                    topic,
                    ops(("max.message.bytes", DELETE, None), ("segment.bytes", DELETE, None)),
                )
            ],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert overrides(admin, topic) == {"retention.ms": "2000"}
    # Deleting what has no override (even a name this broker does not know) changes nothing.
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("no.such.config", DELETE, None)))],
            incremental=True,
            version=version,
        )
        == ok
    )
    # APPEND / SUBTRACT on the LIST-typed cleanup.policy (default "delete"): no duplicates.
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("cleanup.policy", APPEND, "delete")))],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert overrides(admin, topic) == {"retention.ms": "2000", "cleanup.policy": "delete"}
    # APPEND compact as Kafka does ...
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("cleanup.policy", APPEND, "compact")))],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert overrides(admin, topic)["cleanup.policy"] == "delete,compact"
    # ... subtracting both leaves an empty list, which Kafka accepts too ...
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("cleanup.policy", SUBTRACT, "compact,delete")))],
            incremental=True,
            version=version,
        )
        == ok
    )
    assert overrides(admin, topic)["cleanup.policy"] == ""
    # ... but a policy that does not exist is refused.
    (result,) = alter(
        conn,
        [(TOPIC_RESOURCE, topic, ops(("cleanup.policy", APPEND, "shred")))],
        incremental=True,
        version=version,
    )
    assert result[2] == ErrorCode.invalid_config
    assert result[3] == (
        "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"
    )
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("cleanup.policy", APPEND, "delete")))],
            incremental=True,
            version=version,
        )
        == ok
    )
    for op in (APPEND, SUBTRACT):
        (result,) = alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("retention.ms", op, "5")))],
            incremental=True,
            version=version,
        )
        assert result[2] == ErrorCode.invalid_config and "not LIST" in result[3]
    assert overrides(admin, topic) == {"retention.ms": "2000", "cleanup.policy": "delete"}


@pytest.mark.parametrize("incremental", [False, True])
def test_alter_configs_validate_only(conn, admin, incremental):
    topic = fresh_topic(conn)
    configs = ops(("retention.ms", SET, "1234")) if incremental else sets(retention_ms="1234")
    assert (
        alter(
            conn, [(TOPIC_RESOURCE, topic, configs)], incremental=incremental, validate_only=True
        )[0][2]
        == ErrorCode.none
    )
    assert overrides(admin, topic) == {}
    bad = ops(("retention.ms", SET, "soon")) if incremental else sets(retention_ms="soon")
    assert (
        alter(conn, [(TOPIC_RESOURCE, topic, bad)], incremental=incremental, validate_only=True)[0][
            2
        ]
        == ErrorCode.invalid_config
    )


@pytest.mark.parametrize("incremental", [False, True])
def test_alter_configs_errors(conn, admin, incremental):
    topic = fresh_topic(conn)

    def one(kind, name, configs):
        (result,) = alter(conn, [(kind, name, configs)], incremental=incremental)
        assert result[3], "an error has a message"
        return result[2]

    def cfg(name, value):
        return ops((name, SET, value)) if incremental else [dict(name=name, value=value)]

    assert (
        one(TOPIC_RESOURCE, "no-such-topic", cfg("retention.ms", "1"))
        == ErrorCode.unknown_topic_or_partition
    )
    assert (
        one(TOPIC_RESOURCE, "bad/name", cfg("retention.ms", "1"))
        == ErrorCode.invalid_topic_exception
    )
    assert one(TOPIC_RESOURCE, topic, cfg("no.such.config", "1")) == ErrorCode.invalid_config
    assert one(TOPIC_RESOURCE, topic, cfg("retention.ms", "-7")) == ErrorCode.invalid_config
    assert (
        one(TOPIC_RESOURCE, topic, cfg("message.timestamp.type", "Whenever"))
        == ErrorCode.invalid_config
    )
    assert (
        one(TOPIC_RESOURCE, topic, cfg("retention.ms", "1") + cfg("retention.ms", "2"))
        == ErrorCode.invalid_request
    )
    # broker configs: a read-only key, a bad value, another broker's id (test_broker_configs.py
    # has the rest)
    assert one(BROKER_RESOURCE, "", cfg("log.dirs", "/x")) == ErrorCode.invalid_request
    assert one(BROKER_RESOURCE, "0", cfg("message.max.bytes", "many")) == ErrorCode.invalid_request
    assert one(BROKER_RESOURCE, "7", cfg("message.max.bytes", "1")) == ErrorCode.invalid_request
    # broker loggers: IncrementalAlterConfigs only, and only loggers the broker has
    assert one(BROKER_LOGGER_RESOURCE, "0", cfg("kafka", "DEBUG")) == (
        ErrorCode.invalid_config if incremental else ErrorCode.invalid_request)
    if incremental:
        assert (
            one(TOPIC_RESOURCE, topic, ops(("retention.ms", 9, "1"))) == ErrorCode.invalid_request
        )
        assert (
            one(TOPIC_RESOURCE, topic, ops(("retention.ms", SET, None)))
            == ErrorCode.invalid_request
        )
    # A failed resource changes nothing, and a good one next to it still succeeds.
    results = alter(
        conn,
        [
            (TOPIC_RESOURCE, topic, cfg("retention.ms", "5") + cfg("bogus", "1")),
            (TOPIC_RESOURCE, "no-such-topic", cfg("retention.ms", "1")),
        ],
        incremental=incremental,
    )
    assert [r[2] for r in results] == [
        ErrorCode.invalid_config,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert overrides(admin, topic) == {}
    # The same resource twice in one request is refused.
    results = alter(
        conn, [(TOPIC_RESOURCE, topic, cfg("retention.ms", "5"))] * 2, incremental=incremental
    )
    assert [r[2] for r in results] == [ErrorCode.invalid_request] * 2
    # An empty change list of a broker with no dynamic configs is a no-op.
    (result,) = alter(conn, [(BROKER_RESOURCE, "0", [])], incremental=incremental)
    assert result[2] == ErrorCode.none


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_confluent(conn, admin):
    topic = fresh_topic(conn)
    incremental = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert admin.incremental_alter_configs([incremental])[incremental].result(10) is None
    assert overrides(admin, topic) == {"retention.ms": "60000", "max.message.bytes": "100000"}
    remove = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    assert admin.incremental_alter_configs([remove])[remove].result(10) is None
    assert overrides(admin, topic) == {"max.message.bytes": "100000"}
    legacy = ConfigResource("topic", topic, set_config={"segment.bytes": "1048576"})
    assert admin.alter_configs([legacy])[legacy].result(10) is None
    assert overrides(admin, topic) == {"segment.bytes": "1048576"}
    bad = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    assert kafka_error(admin.incremental_alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG
    broker = ConfigResource(
        "broker",
        "0",
        incremental_configs=[
            ConfigEntry("log.segment.bytes", "5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert (  # read-only (test_broker_configs.py has the dynamic ones)
        kafka_error(admin.incremental_alter_configs([broker])[broker]) == KafkaError.INVALID_REQUEST
    )
    missing = ConfigResource("topic", "no-such-topic", set_config={"retention.ms": "1"})
    assert kafka_error(admin.alter_configs([missing])[missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_kafka_python(broker, conn):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    topic = fresh_topic(conn)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        resource = KpResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7000"})
        client.alter_configs([resource])  # IncrementalAlterConfigs
        client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "9000"})]
        )
        values = values_of(client, topic)
        assert values["retention.ms"] == "7000" and values["max.message.bytes"] == "9000"
        # AlterConfigs: kafka-python re-sends the other modified keys itself (the request
        # replaces the whole override set), so max.message.bytes survives ...
        client.alter_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "8000"})],
            incremental=False,
        )
        after_set = values_of(client, topic)
        # ... and a reset through AlterConfigs sends every override except the one reset.
        client.reset_configs(
            [KpResource(ConfigResourceType.TOPIC, topic, configs=["max.message.bytes"])],
            incremental=False,
        )
        after_reset = values_of(client, topic)
    finally:
        client.close()
    assert after_set["retention.ms"] == "8000" and after_set["max.message.bytes"] == "9000"
    assert after_reset["retention.ms"] == "8000"
    assert after_reset.get("max.message.bytes", "1048588") == "1048588"  # back to the default


def values_of(client, topic: str) -> dict[str, str]:
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    described = client.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])
    return {k: v["value"] for k, v in described["topic"][topic].items()}


def test_altered_configs_take_effect_for_produce(conn):
    topic = fresh_topic(conn)
    big = make_batch([b"x" * 3000])
    conn.produce_ok(topic, 0, big)
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, ops(("max.message.bytes", SET, "1000")))],
            incremental=True,
        )[0][2]
        == ErrorCode.none
    )
    assert conn.produce(topic, 0, big).error_code == ErrorCode.message_too_large
    entry = conn.produce(topic, 0, make_batch(1))
    assert entry.error_code == ErrorCode.none and entry.log_append_time is None
    assert (
        alter(
            conn,
            [(TOPIC_RESOURCE, topic, sets(message_timestamp_type="LogAppendTime"))],
            incremental=False,
        )[0][2]
        == ErrorCode.none
    )
    entry = conn.produce(topic, 0, big)  # the legacy alter dropped max.message.bytes again
    assert entry.error_code == ErrorCode.none and entry.log_append_time is not None


def test_altered_configs_survive_restart(broker_factory):
    b = broker_factory()
    with KafkaRaw(b.host, b.port) as c:
        c.create_topic("kept", partitions=1)
        assert (
            alter(
                c, [(TOPIC_RESOURCE, "kept", ops(("retention.ms", SET, "4321")))], incremental=True
            )[0][2]
            == ErrorCode.none
        )
    b.kill()
    b.restart()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    assert overrides(admin, "kept") == {"retention.ms": "4321"}


# --- DeleteRecords --------------------------------------------------------------------------


def delete_records(conn: KafkaRaw, topic: str, parts: list[tuple[int, int]], version: int = 2):
    response = conn.request(
        DELETE_RECORDS,
        version,
        topics=[dict(name=topic, partitions=[dict(partition_index=p, offset=o) for p, o in parts])],
        timeout=10_000,
    )
    (result,) = response.topics
    return [(p.partition_index, p.error_code, p.low_watermark) for p in result.partitions]


def earliest(conn: KafkaRaw, topic: str, p: int = 0) -> int:
    entry = conn.list_offsets(topic, p, EARLIEST)
    assert entry.error_code == ErrorCode.none
    return entry.offset


def filled_topic(conn: KafkaRaw, batches: int = 4, per_batch: int = 3, partitions: int = 1) -> str:
    topic = fresh_topic(conn, partitions)
    for p in range(partitions):
        for _ in range(batches):
            conn.produce_ok(topic, p, make_batch(per_batch))
    return topic


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records(conn, version):
    topic = filled_topic(conn)  # offsets 0..11, batches at 0, 3, 6, 9
    assert delete_records(conn, topic, [(0, 4)], version) == [(0, ErrorCode.none, 4)]
    assert earliest(conn, topic) == 4
    assert conn.fetch(topic, 0, 3).error_code == ErrorCode.offset_out_of_range
    entry = conn.fetch(topic, 0, 4)
    assert entry.error_code == ErrorCode.none and entry.log_start_offset == 4
    assert [r.offset for r in conn.fetch_all(topic, 0, 4)] == list(range(4, 12))
    # At or below the current start: nothing changes, not an error.
    assert delete_records(conn, topic, [(0, 2)], version) == [(0, ErrorCode.none, 4)]
    assert delete_records(conn, topic, [(0, 4)], version) == [(0, ErrorCode.none, 4)]
    # -1 is the high watermark: everything goes.
    assert delete_records(conn, topic, [(0, -1)], version) == [(0, ErrorCode.none, 12)]
    assert earliest(conn, topic) == 12 == conn.high_watermark(topic)
    assert conn.fetch(topic, 0, 11).error_code == ErrorCode.offset_out_of_range
    assert conn.produce_ok(topic, 0, make_batch(1)) == 12
    assert [r.offset for r in conn.fetch_all(topic, 0, 12)] == [12]


def test_delete_records_errors(conn):
    topic = filled_topic(conn, partitions=2)
    assert delete_records(conn, topic, [(0, 13), (1, -2), (1, -100), (2, 1), (0, 12)]) == [
        (0, ErrorCode.offset_out_of_range, -1),
        (1, ErrorCode.offset_out_of_range, -1),
        (1, ErrorCode.offset_out_of_range, -1),
        (2, ErrorCode.unknown_topic_or_partition, -1),
        (0, ErrorCode.none, 12),  # exactly the high watermark is fine
    ]
    assert earliest(conn, topic, 1) == 0
    assert delete_records(conn, "no-such-topic", [(0, 0)]) == [
        (0, ErrorCode.unknown_topic_or_partition, -1)
    ]


def test_delete_records_clients(broker, conn, admin):
    topic = filled_topic(conn, partitions=2)
    futures = admin.delete_records([TopicPartition(topic, 0, 5), TopicPartition(topic, 1, -1)])
    results = {tp.partition: f.result(10).low_watermark for tp, f in futures.items()}
    assert results == {0: 5, 1: 12}
    for spec, expected in (
        (OffsetSpec.earliest(), {0: 5, 1: 12}),
        (OffsetSpec.latest(), {0: 12, 1: 12}),
    ):
        listed = admin.list_offsets(
            {TopicPartition(topic, 0): spec, TopicPartition(topic, 1): spec}
        )
        assert {tp.partition: f.result(10).offset for tp, f in listed.items()} == expected
    (bad,) = admin.delete_records([TopicPartition(topic, 0, 99)]).values()
    assert kafka_error(bad) == KafkaError.OFFSET_OUT_OF_RANGE

    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka import TopicPartition as KpPartition

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        got = client.delete_records({KpPartition(topic, 0): 7})
    finally:
        client.close()
    assert got[KpPartition(topic, 0)]["low_watermark"] == 7
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        tp = KpPartition(topic, 0)
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp])[tp] == 7
        consumer.seek_to_beginning(tp)
        records = []
        while len(records) < 5:
            batch = consumer.poll(timeout_ms=5000)
            assert batch, "no records"
            records += [r.offset for r in batch.get(tp, [])]
    finally:
        consumer.close()
    assert records == [7, 8, 9, 10, 11]


@pytest.mark.crash
@pytest.mark.parametrize("how", ["restart", "kill"])
def test_delete_records_survives(broker_factory, how):
    b = broker_factory()
    with KafkaRaw(b.host, b.port) as c:
        topic = filled_topic(c, partitions=2)
        assert delete_records(c, topic, [(0, 7), (1, -1)]) == [
            (0, ErrorCode.none, 7),
            (1, ErrorCode.none, 12),
        ]
    if how == "kill":
        b.kill()  # SIGKILL right after the answer: the checkpoint before it must hold
        b.restart()
    else:
        b.restart()  # SIGTERM, clean shutdown
    with KafkaRaw(b.host, b.port) as c:
        assert earliest(c, topic, 0) == 7 and earliest(c, topic, 1) == 12
        assert c.high_watermark(topic) == 12
        assert c.fetch(topic, 0, 6).error_code == ErrorCode.offset_out_of_range
        assert [r.offset for r in c.fetch_all(topic, 0, 7)] == list(range(7, 12))
        assert c.fetch(topic, 1, 11).error_code == ErrorCode.offset_out_of_range
        assert c.produce_ok(topic, 1, make_batch(1)) == 12
        assert delete_records(c, topic, [(0, 3)]) == [(0, ErrorCode.none, 7)]


# --- DescribeLogDirs ------------------------------------------------------------------------


def log_dirs(conn: KafkaRaw, version: int, topics=None):
    response = conn.request(
        DESCRIBE_LOG_DIRS,
        version,
        topics=None
        if topics is None
        else [dict(topic=t, partitions=ps) for t, ps in topics.items()],
    )
    if version >= 3:
        assert response.error_code == ErrorCode.none
    (result,) = response.results
    assert result.error_code == ErrorCode.none
    return result


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs(broker, conn, version):
    topic = fresh_topic(conn, partitions=3)
    sizes = [0, 0, 0]
    for p, counts in ((0, [1, 5, 2]), (1, [10])):
        for n in counts:
            batch = make_batch([b"v" * (7 * n + p)] * n)
            conn.produce_ok(topic, p, batch)
            sizes[p] += len(batch)
    result = log_dirs(conn, version, {topic: [0, 1, 2, 7], "no-such-topic": [0]})
    assert result.log_dir == str(broker.data_dir.resolve())
    assert [t.name for t in result.topics] == [topic]
    assert [
        (p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
        for p in result.topics[0].partitions
    ] == [
        (0, sizes[0], 0, False),
        (1, sizes[1], 0, False),
        (2, 0, 0, False),
    ]
    if version >= 4:
        assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes
    # null topics: every partition of every topic.
    everything = log_dirs(conn, version)
    names = {t.name: len(t.partitions) for t in everything.topics}
    assert names[topic] == 3 and names["paged-c"] == 4
    # After DeleteRecords only the batches from the one holding the new start count.
    first = len(make_batch([b"v" * 7]))
    delete_records(conn, topic, [(0, 1)])
    result = log_dirs(conn, version, {topic: [0]})
    assert result.topics[0].partitions[0].partition_size == sizes[0] - first
    assert log_dirs(conn, version, {"no-such-topic": [0]}).topics == ()


def test_describe_log_dirs_kafka_python(broker, conn):
    from kafka import KafkaAdminClient

    topic = fresh_topic(conn)
    batch = make_batch(4)
    conn.produce_ok(topic, 0, batch)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (answer,) = client.describe_log_dirs({topic: [0]})
    finally:
        client.close()
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    (described,) = log_dir["topics"]
    assert described["name"] == topic
    assert described["partitions"][0]["partition_size"] == len(batch)


def test_list_offsets_after_delete_confluent(conn, admin):
    topic = filled_topic(conn)
    delete_records(conn, topic, [(0, 9)])
    tp = TopicPartition(topic, 0)
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset == 9
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset == 12
    assert conn.list_offsets(topic, 0, LATEST).offset == 12
