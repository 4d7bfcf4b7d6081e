"""Subscription views, the admin surface (issue #8): everything but reading records.

Against a real broker process: views created through CreateTopics configs (``rmq.view.source``
+ ``rmq.view.tags`` | ``rmq.view.sql``) by confluent-kafka's and kafka-python's admin clients
and the raw kio client; what creation refuses (and with which code and message); how
Metadata, DescribeTopicPartitions and DescribeConfigs show a view; the refusals of
AlterConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords and Produce (aiokafka,
kafka-python, confluent-kafka); DeleteTopics of views and of their sources; committed offsets
on a view's name; ``enablePropertyFilter=false``; persistence across a restart and kill -9.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from rawkafka import ErrorCode, KafkaRaw, make_batch, start_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DELETE_TOPICS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 20, 21, 23
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_CONFIGS, ALTER_CONFIGS = 8, 9, 32, 33
CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE, DESCRIBE_TOPIC_PARTITIONS = 37, 44, 47, 75
TOPIC_RESOURCE = 2
SOURCE, TAGS, SQL, FILTER = "rmq.view.source", "rmq.view.tags", "rmq.view.sql", "rmq.view.filter"
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("views-admin") / "data") as b:
        yield b


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def source_topic(conn: KafkaRaw, partitions: int = 3, batches: int = 0) -> str:
    name = unique("src")
    conn.create_topic(name, partitions=partitions)
    for i in range(batches):
        conn.produce_ok(name, i % partitions, make_batch(2))
    return name


def create_view_raw(conn: KafkaRaw, name: str, configs: dict[str, str], partitions: int = -1,
                    replication: int = -1, validate_only: bool = False, version: int = 7):
    response = conn.request(
        19, version,
        topics=[dict(name=name, num_partitions=partitions, replication_factor=replication, assignments=(),
                     configs=[dict(name=k, value=v) for k, v in configs.items()])],
        timeout=10_000, validate_only=validate_only,
    )
    (topic,) = response.topics
    return topic


def make_view(conn: KafkaRaw, source: str, tags: str | None = "TagA || TagB", sql: str | None = None) -> str:
    name = unique("view")
    configs = {SOURCE: source, **({TAGS: tags} if sql is None else {SQL: sql})}
    result = create_view_raw(conn, name, configs)
    assert result.error_code == ErrorCode.none, result.error_message
    return name


def metadata_topics(conn: KafkaRaw, names=None, version: int = 12, auto_create: bool = False) -> dict:
    response = conn.metadata(names, version=version, allow_auto_topic_creation=auto_create)
    return {t.name: t for t in response.topics}


def delete_topics(conn: KafkaRaw, names=(), ids=(), version: int = 6):
    if version >= 6:
        fields = dict(topics=[dict(name=n, topic_id=None) for n in names] + [dict(name=None, topic_id=i) for i in ids])
    else:
        fields = dict(topic_names=list(names))
    response = conn.request(DELETE_TOPICS, version, timeout=10_000, **fields)
    return [(r.name, r.error_code, getattr(r, "error_message", None)) for r in response.responses]


def view_configs(admin: AdminClient, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    return future.result()


def kafka_code(future) -> str:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=15)
    return caught.value.args[0]


# --- creation --------------------------------------------------------------------------------


def test_confluent_admin_creates_tag_and_sql_views(conn, admin):
    source = source_topic(conn, partitions=3)
    futures = admin.create_topics([
        NewTopic("tagged-" + source, num_partitions=-1, replication_factor=-1,
                 config={SOURCE: source, TAGS: "TagA ||TagB"}),
        NewTopic("sql-" + source, num_partitions=3, replication_factor=1,
                 config={SOURCE: source, SQL: "region = 'eu' AND amount > 100"}),
    ])
    for future in futures.values():
        future.result(timeout=15)
    listed = admin.list_topics(timeout=10).topics
    for name in ("tagged-" + source, "sql-" + source):
        assert listed[name].error is None and len(listed[name].partitions) == 3
    assert view_configs(admin, "tagged-" + source)[TAGS].value == "TagA ||TagB"


def test_kafka_python_admin_creates_a_view(broker, conn):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import InvalidConfigurationError

    source = source_topic(conn, partitions=2)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        response = client.create_topics([KpNewTopic("kp-" + source, -1, -1, topic_configs={SOURCE: source, TAGS: "X"})])
        (result,) = response["topics"]
        assert (result["error_code"], result["num_partitions"]) == (0, 2)
        assert result["configs"][TAGS]["read_only"] is True
        with pytest.raises(InvalidConfigurationError, match="invalid SQL92 expression at column 4"):
            client.create_topics([KpNewTopic("kp-bad-" + source, -1, -1, topic_configs={SOURCE: source, SQL: "a >"})])
        names = client.list_topics()
    finally:
        client.close()
    assert "kp-" + source in names and "kp-bad-" + source not in names
    assert len(metadata_topics(conn, ["kp-" + source])["kp-" + source].partitions) == 2


def test_create_view_response(conn):
    source = source_topic(conn, partitions=4)
    name = unique("view")
    result = create_view_raw(conn, name, {SOURCE: source, SQL: "a IS NOT NULL"})
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (4, 1)
    assert result.topic_id not in (None, ZERO_UUID)
    assert {c.name: c.value for c in result.configs} == {SOURCE: source, SQL: "a IS NOT NULL"}
    assert metadata_topics(conn, [name])[name].topic_id == result.topic_id


@pytest.mark.parametrize(
    "configs, message",
    [
        ({SQL: "a = = 1"}, "invalid SQL92 expression at column 5: expected a property, a literal or '(' but found '='"),
        ({SQL: "region = 'eu"}, "invalid SQL92 expression at column 10: this string is never closed"),
        ({SQL: "a > 1 AND"}, "invalid SQL92 expression at column 10"),
        ({SQL: "a BETWEEN 1"}, "invalid SQL92 expression at column"),
        ({TAGS: "||"}, "invalid tag expression: it names no tag"),
        ({TAGS: "A", SQL: "a > 1"}, "a view needs exactly one of rmq.view.tags and rmq.view.sql"),
        ({}, "a view needs exactly one of rmq.view.tags and rmq.view.sql"),
        ({TAGS: "A", "retention.ms": "1000"}, "a view takes only rmq.view.source, rmq.view.tags, rmq.view.sql configs, not retention.ms"),
    ],
    ids=["sql-operator", "sql-string", "sql-end", "sql-between", "tags-empty", "both", "neither", "other-config"],
)
def test_bad_definitions_are_invalid_config(conn, configs, message):
    source = source_topic(conn)
    name = unique("bad")
    result = create_view_raw(conn, name, {SOURCE: source, **configs})
    assert result.error_code == ErrorCode.invalid_config
    assert result.error_message.startswith(message), result.error_message
    assert name not in metadata_topics(conn)


def test_bad_expression_through_confluent_carries_the_column(conn, admin):
    source = source_topic(conn)
    (future,) = admin.create_topics(
        [NewTopic(unique("bad"), -1, -1, config={SOURCE: source, SQL: "amount >> 3"})]
    ).values()
    error = kafka_code(future)
    assert error.name() == "INVALID_CONFIG"
    assert "invalid SQL92 expression at column" in error.str()


def test_creation_rules(conn):
    source = source_topic(conn, partitions=3)
    view = make_view(conn, source)
    cases = [
        # (name, configs, partitions, replication) -> (code, message start)
        ((unique("v"), {SOURCE: "no-such-topic", TAGS: "A"}, -1, -1),
         (ErrorCode.invalid_config, "the source topic 'no-such-topic' does not exist")),
        ((unique("v"), {TAGS: "A"}, -1, -1), (ErrorCode.invalid_config, "a view needs rmq.view.source")),
        ((unique("v"), {SOURCE: view, TAGS: "A"}, -1, -1),
         (ErrorCode.invalid_config, f"the source {view!r} is a view; a view's source must be a topic")),
        ((source, {SOURCE: source, TAGS: "A"}, -1, -1),
         (ErrorCode.topic_already_exists, f"a topic named {source!r} already exists")),
        ((view, {SOURCE: source, TAGS: "C"}, -1, -1),
         (ErrorCode.topic_already_exists, f"a view named {view!r} already exists")),
        ((unique("v"), {SOURCE: source, TAGS: "A"}, 5, -1),
         (ErrorCode.invalid_partitions, f"a view has the partitions of its source {source!r} (3)")),
        ((unique("v"), {SOURCE: source, TAGS: "A"}, -1, 3),
         (ErrorCode.invalid_replication_factor, "replication factor 3")),
        (("bad name!", {SOURCE: source, TAGS: "A"}, -1, -1), (ErrorCode.invalid_topic_exception, "topic name")),
    ]
    for (name, configs, partitions, replication), (code, message) in cases:
        result = create_view_raw(conn, name, configs, partitions, replication)
        assert (result.error_code, result.error_message[: len(message)]) == (code, message), (name, configs)
    # the partition count may be given when it equals the source's
    assert create_view_raw(conn, unique("v"), {SOURCE: source, TAGS: "A"}, 3, 1).error_code == ErrorCode.none
    # a topic cannot take a view's name either
    created = conn.create_topics({view: 1})
    assert created.topics[0].error_code == ErrorCode.topic_already_exists
    assert f"a view named {view!r} already exists" in created.topics[0].error_message


def test_validate_only_creates_nothing(conn):
    source = source_topic(conn)
    name = unique("dry")
    result = create_view_raw(conn, name, {SOURCE: source, TAGS: "A"}, validate_only=True)
    assert result.error_code == ErrorCode.none and result.num_partitions == 3
    assert name not in metadata_topics(conn)
    bad = create_view_raw(conn, name, {SOURCE: source, SQL: "("}, validate_only=True)
    assert bad.error_code == ErrorCode.invalid_config


# --- Metadata, DescribeTopicPartitions --------------------------------------------------------


def test_metadata_lists_views_like_topics(conn):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    for version in (1, 9, 12):
        every = metadata_topics(conn, None, version=version)
        named = metadata_topics(conn, [view], version=version)
        for listing in (every, named):
            entry = listing[view]
            assert entry.error_code == ErrorCode.none and entry.is_internal is False
            assert [p.partition_index for p in entry.partitions] == [0, 1]
            assert all(p.leader_id == 0 and list(p.replica_nodes) == [0] for p in entry.partitions)
    every = metadata_topics(conn, None)
    assert every[view].topic_id not in (ZERO_UUID, every[source].topic_id)
    # by topic id (v10+)
    response = conn.request(3, 12, topics=[dict(name=None, topic_id=every[view].topic_id)],
                            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    (entry,) = response.topics
    assert (entry.error_code, entry.name, len(entry.partitions)) == (ErrorCode.none, view, 2)


def test_view_id_is_stable(conn):
    view = make_view(conn, source_topic(conn))
    ids = {metadata_topics(conn, [view])[view].topic_id for _ in range(3)}
    assert len(ids) == 1


def test_view_partitions_grow_with_the_source(conn, admin):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    (future,) = admin.create_partitions([NewPartitions(source, 5)]).values()
    future.result(timeout=15)
    assert len(metadata_topics(conn, [view])[view].partitions) == 5
    assert len(admin.list_topics(topic=view, timeout=10).topics[view].partitions) == 5


def test_auto_create_never_shadows_a_view(conn):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    entry = metadata_topics(conn, [view], auto_create=True)[view]
    assert entry.error_code == ErrorCode.none and len(entry.partitions) == 2
    # still a view: DescribeConfigs answers its definition and produce is refused
    configs = conn.request(DESCRIBE_CONFIGS, 4, resources=[dict(resource_type=TOPIC_RESOURCE, resource_name=view, configuration_keys=None)],
                           include_synonyms=False, include_documentation=False)
    assert {c.name for c in configs.results[0].configs} == {SOURCE, TAGS, FILTER}
    assert conn.produce(view, 0, make_batch(1)).error_code == ErrorCode.invalid_topic_exception


def test_describe_topic_partitions_lists_views(conn):
    source = source_topic(conn, partitions=3)
    view = make_view(conn, source)
    ids = {name: t.topic_id for name, t in metadata_topics(conn, None).items()}
    named = conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[dict(name=view)], response_partition_limit=2000, cursor=None)
    (topic,) = named.topics
    assert (topic.error_code, topic.name, topic.topic_id, topic.is_internal) == (ErrorCode.none, view, ids[view], False)
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    # paged through a view: the cursor stops inside it
    paged = conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[dict(name=view)], response_partition_limit=2, cursor=None)
    assert (paged.next_cursor.topic_name, paged.next_cursor.partition_index) == (view, 2)
    every = conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[], response_partition_limit=2000, cursor=dict(topic_name=view, partition_index=0))
    assert every.topics[0].name == view and every.topics[0].topic_id == ids[view]


def test_kafka_python_describe_topics_shows_a_view(broker, conn):
    from kafka.admin import KafkaAdminClient

    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (described,) = client.describe_topics([view])
    finally:
        client.close()
    assert described["error_code"] == 0 and len(described["partitions"]) == 2


def test_confluent_describe_topics_shows_a_view(conn, admin):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    (future,) = admin.describe_topics(TopicCollection([view])).values()
    description = future.result(timeout=15)
    assert len(description.partitions) == 2 and not description.is_internal


# --- DescribeConfigs, AlterConfigs, CreatePartitions, DeleteRecords -----------------------------


def test_describe_configs_shows_the_definition(conn, admin):
    source = source_topic(conn)
    tagged = make_view(conn, source, tags="  TagA||TagB ||TagA")
    sql = make_view(conn, source, sql="region='eu' and NOT (amount between 1 and 5)")
    entries = view_configs(admin, tagged)
    assert {n: e.value for n, e in entries.items()} == {SOURCE: source, TAGS: "  TagA||TagB ||TagA", FILTER: "TagA || TagB"}
    assert entries[SOURCE].source == entries[TAGS].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries[FILTER].source == ConfigSource.DEFAULT_CONFIG.value and entries[FILTER].is_default
    assert all(e.is_read_only for e in entries.values())
    entries = view_configs(admin, sql)
    assert entries[SQL].value == "region='eu' and NOT (amount between 1 and 5)"
    assert entries[FILTER].value == "region = 'eu' AND (NOT (amount BETWEEN 1 AND 5))"
    assert TAGS not in entries
    # only the keys asked for; documentation on request
    response = conn.request(
        DESCRIBE_CONFIGS, 4,
        resources=[dict(resource_type=TOPIC_RESOURCE, resource_name=tagged, configuration_keys=[SOURCE])],
        include_synonyms=True, include_documentation=True,
    )
    (entry,) = response.results[0].configs
    assert (entry.name, entry.value, entry.read_only, entry.config_type) == (SOURCE, source, True, 2)
    assert entry.documentation and [s.name for s in entry.synonyms] == [SOURCE]


def test_kafka_python_describe_configs_of_a_view(broker, conn):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    source = source_topic(conn)
    view = make_view(conn, source, sql="a > 1")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described = client.describe_configs([KpResource(ConfigResourceType.TOPIC, view)])
    finally:
        client.close()
    values = {k: v["value"] for k, v in described["topic"][view].items()}
    # kafka-python leaves out entries that are defaults, so the derived rmq.view.filter too
    assert values == {SOURCE: source, SQL: "a > 1"}


def test_alter_configs_of_a_view_is_refused(conn, admin):
    source = source_topic(conn)
    view = make_view(conn, source)
    message = f"{view!r} is a view over topic {source!r}: views are immutable; delete and create it again"
    for api, version, configs in (
        (ALTER_CONFIGS, 2, [dict(name="retention.ms", value="1000")]),
        (ALTER_CONFIGS, 2, []),
        (INCREMENTAL_ALTER_CONFIGS, 1, [dict(name=TAGS, config_operation=0, value="Z")]),
    ):
        for validate_only in (False, True):
            response = conn.request(
                api, version, validate_only=validate_only,
                resources=[dict(resource_type=TOPIC_RESOURCE, resource_name=view, configs=configs)],
            )
            (result,) = response.responses
            assert (result.error_code, result.error_message) == (ErrorCode.invalid_request, message)
    # through confluent-kafka, both APIs
    resource = ConfigResource(ResourceType.TOPIC, view, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    (future,) = admin.incremental_alter_configs([resource]).values()
    error = kafka_code(future)
    assert error.name() == "INVALID_REQUEST" and "views are immutable" in error.str()
    with warnings.catch_warnings():  # AlterConfigs is deprecated in clients, not gone from brokers
        warnings.simplefilter("ignore", DeprecationWarning)
        (future,) = admin.alter_configs([ConfigResource(ResourceType.TOPIC, view, set_config={"retention.ms": "1"})]).values()
    assert kafka_code(future).name() == "INVALID_REQUEST"
    assert view_configs(admin, view)[TAGS].value == "TagA || TagB"  # unchanged


def test_create_partitions_on_a_view_is_refused(conn, admin):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    response = conn.request(CREATE_PARTITIONS, 3, topics=[dict(name=view, count=4, assignments=None)],
                            timeout=10_000, validate_only=False)
    (result,) = response.results
    assert result.error_code == ErrorCode.invalid_partitions
    assert result.error_message == (f"{view!r} is a view over topic {source!r}: a view has its source's "
                                    f"partitions; grow {source!r} instead")
    (future,) = admin.create_partitions([NewPartitions(view, 4)]).values()
    assert kafka_code(future).name() == "INVALID_PARTITIONS"
    assert len(metadata_topics(conn, [source])[source].partitions) == 2


def test_delete_records_on_a_view_is_refused(conn):
    source = source_topic(conn, partitions=1, batches=3)
    view = make_view(conn, source)
    response = conn.request(DELETE_RECORDS, 2, topics=[dict(name=view, partitions=[dict(partition_index=0, offset=-1)])],
                            timeout=10_000)
    (partition,) = response.topics[0].partitions
    assert (partition.error_code, partition.low_watermark) == (ErrorCode.invalid_topic_exception, -1)
    assert conn.list_offsets(source, 0, -2).offset == 0  # the source's log start did not move


# --- DeleteTopics ------------------------------------------------------------------------------


def test_deleting_a_view_keeps_its_source(conn, admin):
    source = source_topic(conn, partitions=2, batches=6)
    before = [r.value for p in (0, 1) for r in conn.fetch_all(source, p)]
    view = make_view(conn, source)
    (future,) = admin.delete_topics([view]).values()
    future.result(timeout=15)
    assert view not in metadata_topics(conn)
    after = [r.value for p in (0, 1) for r in conn.fetch_all(source, p)]
    assert after == before and len(after) == 12
    assert [conn.high_watermark(source, p) for p in (0, 1)] == [6, 6]
    # the name is free again, for a topic too
    conn.create_topic(view, partitions=1)
    assert conn.produce_ok(view, 0, make_batch(1)) == 0


def test_deleting_a_source_with_views_is_refused(broker, conn, admin):
    from kafka.admin import KafkaAdminClient
    from kafka.errors import PolicyViolationError

    source = source_topic(conn, partitions=1, batches=2)
    first, second = sorted([make_view(conn, source), make_view(conn, source, sql="a > 1")])
    message = f"topic {source!r} is the source of view(s) {first}, {second}; delete them first"
    for version in (5, 6):
        assert delete_topics(conn, [source], version=version) == [(source, ErrorCode.policy_violation, message)]
    assert delete_topics(conn, [source], version=4) == [(source, ErrorCode.policy_violation, None)]
    (future,) = admin.delete_topics([source]).values()
    assert kafka_code(future).name() == "POLICY_VIOLATION"
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with pytest.raises(PolicyViolationError, match="delete them first"):
            client.delete_topics([source])
    finally:
        client.close()
    assert conn.high_watermark(source) == 4 and first in metadata_topics(conn)
    # one view deleted, the other still blocks
    assert delete_topics(conn, [first]) == [(first, ErrorCode.none, None)]
    assert delete_topics(conn, [source])[0][2] == f"topic {source!r} is the source of view(s) {second}; delete them first"


def test_deleting_a_source_and_its_views_in_one_request(conn):
    source = source_topic(conn, partitions=1, batches=1)
    views = [make_view(conn, source), make_view(conn, source)]
    # the source first: views are deleted before topics whatever the order
    assert delete_topics(conn, [source, *views]) == [(n, ErrorCode.none, None) for n in (source, *views)]
    listed = metadata_topics(conn)
    assert not {source, *views} & set(listed)


def test_delete_a_view_by_topic_id(conn):
    source = source_topic(conn)
    view = make_view(conn, source)
    view_id = metadata_topics(conn, [view])[view].topic_id
    response = conn.request(DELETE_TOPICS, 6, topics=[dict(name=None, topic_id=view_id)], timeout=10_000)
    (result,) = response.responses
    assert (result.name, result.topic_id, result.error_code) == (view, view_id, ErrorCode.none)
    assert view not in metadata_topics(conn) and source in metadata_topics(conn)
    again = conn.request(DELETE_TOPICS, 6, topics=[dict(name=None, topic_id=view_id)], timeout=10_000)
    assert again.responses[0].error_code == ErrorCode.unknown_topic_id


# --- Produce -------------------------------------------------------------------------------------


def test_raw_produce_to_a_view_is_refused_per_partition(conn):
    source = source_topic(conn, partitions=2)
    view = make_view(conn, source)
    response = conn.produce_request({(view, 0): make_batch(1), (view, 1): make_batch(1), (view, 7): make_batch(1),
                                     (source, 0): make_batch(1)})
    by_key = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
    message = f"{view!r} is a view (read-only) over topic {source!r}; produce to {source!r}"
    for p in (0, 1, 7):
        assert (by_key[(view, p)].error_code, by_key[(view, p)].error_message) == (ErrorCode.invalid_topic_exception, message)
        assert by_key[(view, p)].base_offset == -1
    assert by_key[(source, 0)].error_code == ErrorCode.none
    assert conn.high_watermark(source, 0) == 1 and conn.high_watermark(source, 1) == 0


def test_acks_0_produce_to_a_view_closes_the_connection(broker, conn):
    source = source_topic(conn)
    view = make_view(conn, source)
    with KafkaRaw(broker.host, broker.port) as other:
        other.produce_request({(view, 0): make_batch(1)}, acks=0)
        assert other.wait_closed()
    assert conn.produce_ok(source, 0, make_batch(1)) == 0  # everyone else is still served


def test_aiokafka_produce_to_a_view(broker, conn):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import InvalidTopicError

    source = source_topic(conn, partitions=1)
    view = make_view(conn, source)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
        await producer.start()
        try:
            with pytest.raises(InvalidTopicError):
                await asyncio.wait_for(producer.send_and_wait(view, b"x"), 15)
            return await producer.send_and_wait(source, b"ok")
        finally:
            await producer.stop()

    assert asyncio.run(run()).offset == 0


def test_kafka_python_produce_to_a_view(broker, conn):
    from kafka import KafkaProducer
    from kafka.errors import InvalidTopicError

    source = source_topic(conn, partitions=1)
    view = make_view(conn, source)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    try:
        with pytest.raises(InvalidTopicError, match=f"is a view \\(read-only\\) over topic '{source}'"):
            producer.send(view, b"x").get(timeout=15)
        assert producer.send(source, b"ok").get(timeout=15).offset == 0
    finally:
        producer.close()


def test_confluent_produce_to_a_view(broker, conn):
    source = source_topic(conn, partitions=1)
    view = make_view(conn, source)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    reports: list = []
    producer.produce(view, b"x", on_delivery=lambda err, msg: reports.append(err))
    producer.produce(view, b"y", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(15) == 0
    assert [e.name() for e in reports] == ["TOPIC_EXCEPTION", "TOPIC_EXCEPTION"]
    assert not any(e.retriable() for e in reports)
    reports.clear()
    producer.produce(source, b"ok", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(15) == 0 and reports == [(None, 0)]


# --- committed offsets ----------------------------------------------------------------------------


def commit(conn: KafkaRaw, group: str, topic: str, offsets: dict[int, int]) -> dict[int, ErrorCode]:
    response = conn.request(
        OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[dict(name=topic, partitions=[dict(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                                  committed_metadata="") for p, o in offsets.items()])],
    )
    return {p.partition_index: p.error_code for t in response.topics for p in t.partitions}


def fetch_committed(conn: KafkaRaw, group: str) -> dict[tuple[str, int], int]:
    response = conn.request(OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False)
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


def test_groups_commit_on_a_view(conn, admin):
    source = source_topic(conn, partitions=2, batches=4)
    view = make_view(conn, source)
    group = unique("g")
    assert commit(conn, group, view, {0: 1, 1: 2, 2: 0}) == {
        0: ErrorCode.none, 1: ErrorCode.none, 2: ErrorCode.unknown_topic_or_partition}
    assert commit(conn, group, source, {0: 2}) == {0: ErrorCode.none}
    assert fetch_committed(conn, group) == {(view, 0): 1, (view, 1): 2, (source, 0): 2}
    # the confluent admin client reads and writes them too
    (future,) = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(view, 0, 2)])]).values()
    assert future.result(timeout=15).topic_partitions[0].error is None
    (future,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    listed = {(tp.topic, tp.partition): tp.offset for tp in future.result(timeout=15).topic_partitions}
    assert listed == {(view, 0): 2, (view, 1): 2, (source, 0): 2}


def test_deleting_a_view_drops_its_committed_offsets(conn):
    source = source_topic(conn, partitions=1, batches=2)
    view = make_view(conn, source)
    group = unique("g")
    assert commit(conn, group, view, {0: 1}) == {0: ErrorCode.none}
    assert commit(conn, group, source, {0: 2}) == {0: ErrorCode.none}
    assert delete_topics(conn, [view]) == [(view, ErrorCode.none, None)]
    assert fetch_committed(conn, group) == {(source, 0): 2}
    assert commit(conn, group, view, {0: 1}) == {0: ErrorCode.unknown_topic_or_partition}
    # re-created under the same name: no stale offsets
    assert create_view_raw(conn, view, {SOURCE: source, TAGS: "A"}).error_code == ErrorCode.none
    assert fetch_committed(conn, group) == {(source, 0): 2}


def test_offset_delete_on_a_view(conn):
    source = source_topic(conn, partitions=1)
    view = make_view(conn, source)
    group = unique("g")
    commit(conn, group, view, {0: 0})
    response = conn.request(OFFSET_DELETE, 0, group_id=group, topics=[dict(name=view, partitions=[dict(partition_index=0)])])
    assert response.error_code == ErrorCode.none
    assert response.topics[0].partitions[0].error_code == ErrorCode.none
    assert fetch_committed(conn, group) == {}


def test_offset_for_leader_epoch_on_a_view_answers_as_its_source(conn):
    source = source_topic(conn, partitions=2, batches=5)
    view = make_view(conn, source)

    def ask(topic):
        response = conn.request(OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[dict(
            topic=topic, partitions=[dict(partition=p, current_leader_epoch=-1, leader_epoch=0) for p in (0, 1, 2)])])
        return [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]

    assert ask(view) == ask(source) == [
        (ErrorCode.none, 0, 6), (ErrorCode.none, 0, 4), (ErrorCode.unknown_topic_or_partition, -1, -1)]


# --- enablePropertyFilter, persistence -------------------------------------------------------------


def test_sql_views_refused_when_property_filter_is_off(broker_factory, tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("enablePropertyFilter=false\n")
    b = broker_factory(config_file=properties)
    with KafkaRaw(b.host, b.port) as c:
        c.create_topic("orders", partitions=2)
        refused = create_view_raw(c, "orders-sql", {SOURCE: "orders", SQL: "a > 1"})
        assert refused.error_code == ErrorCode.invalid_config
        assert "SQL92 views are disabled on this broker (enablePropertyFilter=false)" in refused.error_message
        assert create_view_raw(c, "orders-tag", {SOURCE: "orders", TAGS: "A"}).error_code == ErrorCode.none
        assert "orders-sql" not in metadata_topics(c)


@pytest.mark.parametrize("how", ["restart", "kill-9"])
def test_views_survive_restarts(broker_factory, how):
    b = broker_factory()
    with KafkaRaw(b.host, b.port) as c:
        c.create_topic("orders", partitions=2)
        c.produce_ok("orders", 0, make_batch(3))
        for name, configs in (("orders-tag", {TAGS: "TagA || TagB"}), ("orders-sql", {SQL: "a > 1"}),
                              ("orders-gone", {TAGS: "*"})):
            assert create_view_raw(c, name, {SOURCE: "orders", **configs}).error_code == ErrorCode.none
        assert delete_topics(c, ["orders-gone"]) == [("orders-gone", ErrorCode.none, None)]
        assert commit(c, "g", "orders-tag", {1: 0}) == {1: ErrorCode.none}
        before = {n: t.topic_id for n, t in metadata_topics(c).items()}
    if how == "kill-9":
        b.kill()
    else:
        b.stop()
    b.restart()
    with KafkaRaw(b.host, b.port) as c:
        after = metadata_topics(c)
        assert {n: t.topic_id for n, t in after.items()} == before
        assert set(after) == {"orders", "orders-tag", "orders-sql"}
        assert delete_topics(c, ["orders"])[0][1] == ErrorCode.policy_violation
        assert c.produce("orders-sql", 0, make_batch(1)).error_code == ErrorCode.invalid_topic_exception
        assert fetch_committed(c, "g") == {("orders-tag", 1): 0}
        assert c.high_watermark("orders", 0) == 3
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    assert view_configs(admin, "orders-sql")[SQL].value == "a > 1"
    assert view_configs(admin, "orders-tag")[FILTER].value == "TagA || TagB"


def test_a_broken_views_file_stops_the_broker_with_a_message(broker_factory):
    import json

    b = broker_factory()
    with KafkaRaw(b.host, b.port) as c:
        c.create_topic("orders", partitions=1)
        assert create_view_raw(c, "orders-sql", {SOURCE: "orders", SQL: "a > 1"}).error_code == ErrorCode.none
    b.stop()
    path = b.data_dir / "views.json"
    views = json.loads(path.read_text())
    views["orders-sql"]["expression"] = "a >"
    path.write_text(json.dumps(views))
    with pytest.raises(Exception) as caught:
        b.restart()
    text = str(caught.value) + b.stderr
    assert "view 'orders-sql'" in text and "invalid SQL92 expression" in text
