"""The admin APIs a one-node KRaft cluster answers (issue 21): ElectLeaders (43),
AlterPartitionReassignments (45) / ListPartitionReassignments (46), AlterReplicaLogDirs (34),
DescribeQuorum (55), ListConfigResources (74), ApiVersions' features and UpdateFeatures
(57), WriteTxnMarkers (27). Each through raw frames at every advertised version (error
paths included), through the client that found it missing (kafka-python 3's admin client,
confluent-kafka's elect_leaders), and refused with ACLs on to a user without the cluster
operation Kafka requires.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResourceType
from kafka.admin._transactions import AbortTransactionSpec
from kafka.errors import (
    ClusterAuthorizationFailedError,
    InvalidReplicationAssignmentError,
    InvalidUpdateVersionError,
    UnknownTopicOrPartitionError,
)
from rawkafka import LATEST, ErrorCode, KafkaRaw, make_batch, start_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WRITE_TXN_MARKERS, ALTER_REPLICA_LOG_DIRS, ELECT_LEADERS = 27, 34, 43
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS, DESCRIBE_QUORUM = 45, 46, 55
UPDATE_FEATURES, LIST_CONFIG_RESOURCES, API_VERSIONS, DESCRIBE_CLUSTER = 57, 74, 18, 60
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
TOPIC = "two"  # 2 partitions
NOT_NEEDED = "Leader election not needed for topic partition."


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("one-node") / "data") as b:
        with KafkaRaw(b.host, b.port) as conn:
            conn.create_topic(TOPIC, partitions=2)
        yield b


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


@pytest.fixture
def kp_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    yield admin
    admin.close()


def api_versions(conn: KafkaRaw, version: int):
    return conn.request(API_VERSIONS, version, client_software_name="t", client_software_version="1")


def features(response) -> tuple[dict, dict, int]:
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    return supported, finalized, response.finalized_features_epoch


# --- the advertised versions ------------------------------------------------------------------


def test_advertised_as_kafka_4_1_one_node(conn):
    table = {k.api_key: (k.min_version, k.max_version) for k in conn.api_versions(3).api_keys}
    assert {key: table.get(key) for key in (27, 34, 43, 45, 46, 55, 57, 74)} == {
        27: (1, 2), 34: (1, 2), 43: (0, 2), 45: (0, 1), 46: (0, 0), 55: (0, 2), 57: (0, 2), 74: (0, 1),
    }


# --- ElectLeaders ---------------------------------------------------------------------------------


def elect(conn: KafkaRaw, version: int, topic_partitions, election_type: int = 0):
    return conn.request(ELECT_LEADERS, version, election_type=election_type, topic_partitions=topic_partitions,
                        timeout=10_000)


def election_results(response) -> dict:
    return {(r.topic, p.partition_id): (p.error_code, p.error_message)
            for r in response.replica_election_results for p in r.partition_result}


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("election_type", [0, 1])
def test_elect_leaders_named_partitions(conn, version, election_type):
    response = elect(conn, version, [dict(topic=TOPIC, partitions=[0, 1, 2]), dict(topic="nope", partitions=[0])],
                     election_type)
    assert getattr(response, "error_code", ErrorCode.none) == ErrorCode.none
    assert election_results(response) == {
        (TOPIC, 0): (ErrorCode.election_not_needed, NOT_NEEDED),
        (TOPIC, 1): (ErrorCode.election_not_needed, NOT_NEEDED),
        (TOPIC, 2): (ErrorCode.unknown_topic_or_partition, f"No such partition as {TOPIC}-2"),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
    }


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_of_every_partition_lists_topics_without_partitions(conn, version):
    """Kafka leaves out the partitions whose election was not needed: every one here."""
    response = elect(conn, version, None)
    topics = {r.topic: r.partition_result for r in response.replica_election_results}
    assert TOPIC in topics and all(results == () for results in topics.values())
    assert "__transaction_state" not in topics  # what Metadata lists, no system topic


@pytest.mark.parametrize("version", [1, 2])
def test_elect_leaders_unknown_election_type(conn, version):
    response = elect(conn, version, [dict(topic=TOPIC, partitions=[0])], election_type=7)
    assert response.error_code == ErrorCode.invalid_request
    assert election_results(response) == {(TOPIC, 0): (ErrorCode.invalid_request, "Unknown election type 7")}


def test_elect_leaders_through_clients(broker, kp_admin):
    response = kp_admin.elect_leaders(0, {TOPIC: [0, 1]})  # ELECTION_NOT_NEEDED is not an error
    assert {p.error_code for r in response.replica_election_results for p in r.partition_result} == {84}
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.elect_leaders(1, {"nope": [0]})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    result = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(TOPIC, 0)]).result(10)
    assert result[CTopicPartition(TOPIC, 0)].code() == 84  # KafkaError ELECTION_NOT_NEEDED
    assert admin.elect_leaders(ElectionType.UNCLEAN, None).result(10) == {}


# --- partition reassignments ----------------------------------------------------------------------


def reassign(conn: KafkaRaw, version: int, topics: dict[str, list[tuple[int, list[int] | None]]]):
    return conn.request(ALTER_REASSIGNMENTS, version, timeout=10_000, allow_replication_factor_change=True, topics=[
        dict(name=name, partitions=[dict(partition_index=p, replicas=r) for p, r in parts])
        for name, parts in topics.items()
    ])


@pytest.mark.parametrize("version", [0, 1])
def test_alter_partition_reassignments(conn, version):
    response = reassign(conn, version, {
        TOPIC: [(0, [0]), (1, [5]), (0, []), (1, [0, 0]), (0, [0, 7, 3]), (1, None), (9, [0])],
        "nope": [(0, [0])],
    })
    assert (response.error_code, response.error_message) == (ErrorCode.none, None)
    got = [(t.name, p.partition_index, p.error_code, p.error_message) for t in response.responses for p in t.partitions]
    assert got == [
        (TOPIC, 0, ErrorCode.none, None),  # [this broker] is the current assignment: nothing to do
        (TOPIC, 1, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes broker 5, but no such broker is registered."),
        (TOPIC, 0, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes an empty replica list."),
        (TOPIC, 1, ErrorCode.invalid_replica_assignment,
         "The manual partition assignment includes the broker 0 more than once."),
        (TOPIC, 0, ErrorCode.invalid_replica_assignment,  # the lowest unknown broker is named
         "The manual partition assignment includes broker 3, but no such broker is registered."),
        (TOPIC, 1, ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."),
        (TOPIC, 9, ErrorCode.unknown_topic_or_partition, f"Unable to find partition {TOPIC}:9."),
        ("nope", 0, ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."),
    ]


@pytest.mark.parametrize("topics", [None, [dict(name=TOPIC, partition_indexes=[0, 1]),
                                          dict(name="nope", partition_indexes=[0])]])
def test_list_partition_reassignments_lists_nothing(conn, topics):
    response = conn.request(LIST_REASSIGNMENTS, 0, timeout=10_000, topics=topics)
    assert (response.error_code, response.error_message, response.topics) == (ErrorCode.none, None, ())


def test_partition_reassignments_through_kafka_python(kp_admin):
    assert kp_admin.alter_partition_reassignments({TopicPartition(TOPIC, 0): [0], TopicPartition(TOPIC, 1): [1]}) == {
        TopicPartition(TOPIC, 0): None, TopicPartition(TOPIC, 1): InvalidReplicationAssignmentError}
    assert not kp_admin.list_partition_reassignments()


# --- AlterReplicaLogDirs --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs(broker, conn, version):
    log_dir = conn.request(35, 4, topics=None).results[0].log_dir  # as DescribeLogDirs names it
    assert log_dir == os.path.abspath(broker.data_dir)
    response = conn.request(ALTER_REPLICA_LOG_DIRS, version, dirs=[
        dict(path=log_dir, topics=[dict(name=TOPIC, partitions=[0, 1, 5]), dict(name="nope", partitions=[0]),
                                   dict(name="x" * 220, partitions=[0])]),
        dict(path="/elsewhere", topics=[dict(name="other", partitions=[0])]),
    ])
    got = {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}
    assert got == {
        (TOPIC, 0): ErrorCode.none, (TOPIC, 1): ErrorCode.none,
        (TOPIC, 5): ErrorCode.unknown_topic_or_partition, ("nope", 0): ErrorCode.unknown_topic_or_partition,
        ("x" * 220, 0): ErrorCode.invalid_topic_exception,  # no room for Kafka's future directory name
        ("other", 0): ErrorCode.log_dir_not_found,
    }


def test_alter_replica_log_dirs_through_kafka_python(broker, kp_admin):
    log_dir = os.path.abspath(broker.data_dir)
    result = kp_admin.alter_replica_log_dirs({(TOPIC, 0, 0): log_dir, (TOPIC, 1, 0): "/nowhere"})
    assert {tpr.partition: error.__name__ for tpr, error in result.items()} == {
        0: "NoError", 1: "LogDirNotFoundError"}


# --- DescribeQuorum -------------------------------------------------------------------------------


def describe_quorum(conn: KafkaRaw, version: int, topics):
    return conn.request(DESCRIBE_QUORUM, version, topics=[
        dict(topic_name=name, partitions=[dict(partition_index=p) for p in parts]) for name, parts in topics])


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_this_node_is_the_voter_and_leader(broker, conn, version):
    before = int(time.time() * 1000)
    response = describe_quorum(conn, version, [("__cluster_metadata", [0])])
    assert response.error_code == ErrorCode.none
    ((topic, (partition,)),) = [(t.topic_name, t.partitions) for t in response.topics]
    assert topic == "__cluster_metadata"
    epoch = api_versions(conn, 4).finalized_features_epoch
    assert (partition.partition_index, partition.error_code, partition.leader_id, partition.leader_epoch,
            partition.high_watermark, partition.observers) == (0, ErrorCode.none, 0, 1, epoch + 1, ())
    (voter,) = partition.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (0, epoch + 1)
    if version >= 1:
        assert before - 5000 <= voter.last_fetch_timestamp <= int(time.time() * 1000) + 5000
        assert voter.last_caught_up_timestamp == voter.last_fetch_timestamp
    if version >= 2:
        cluster = conn.request(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=1)
        ((node_id, (listener,)),) = [(n.node_id, n.listeners) for n in response.nodes]
        (described,) = cluster.brokers
        assert node_id == cluster.controller_id == described.broker_id == 0
        assert (listener.name, listener.host, listener.port) == ("PLAINTEXT", described.host, described.port)


@pytest.mark.parametrize("topics", [[("__cluster_metadata", [1])], [("other", [0])],
                                    [("__cluster_metadata", [0, 1])], [("__cluster_metadata", [0]), ("x", [0])]])
def test_describe_quorum_of_anything_else(conn, topics):
    response = describe_quorum(conn, 2, topics)
    assert response.error_code == ErrorCode.none
    assert [(t.topic_name, p.partition_index, p.error_code, p.leader_id, p.high_watermark, p.current_voters)
            for t in response.topics for p in t.partitions] == [
        (name, p, ErrorCode.unknown_topic_or_partition, 0, 0, ()) for name, parts in topics for p in parts]


def test_describe_quorum_through_kafka_python(kp_admin):
    quorum = kp_admin.describe_metadata_quorum()
    (partition,) = quorum["topics"][0]["partitions"]
    assert (partition["leader_id"], partition["error"]) == (0, None)
    assert [v["replica_id"] for v in partition["current_voters"]] == [0]


# --- ListConfigResources --------------------------------------------------------------------------


def test_list_config_resources(broker, conn):
    assert conn.request(LIST_CONFIG_RESOURCES, 0).config_resources == ()  # v0: client metrics, none here
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    consumer.commit(offsets=[CTopicPartition(TOPIC, 0, 0)], asynchronous=False)
    consumer.close()
    everything = conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[])
    listed = [(r.resource_type, r.resource_name) for r in everything.config_resources]
    topics = [name for t, name in listed if t == 2]
    # Kafka's order; a group is listed only with group configs (tests/integration/test_group_configs.py)
    assert listed == [(8, "0"), (4, "0"), *((2, name) for name in topics)]
    assert TOPIC in topics and "__transaction_state" not in topics
    only_topics = conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[2])
    assert [(r.resource_type, r.resource_name) for r in only_topics.config_resources] == [(2, n) for n in topics]
    assert conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[32, 16]).config_resources == ()
    refused = conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[2, 3])
    assert (refused.error_code, refused.config_resources) == (ErrorCode.unsupported_version, ())


def test_list_config_resources_through_kafka_python(kp_admin):
    listed = kp_admin.list_config_resources()
    assert TOPIC in listed["topic"] and listed["broker"] == ["0"] and listed["broker_logger"] == ["0"]
    assert kp_admin.list_config_resources([ConfigResourceType.TOPIC]).keys() == {"topic"}


# --- features -------------------------------------------------------------------------------------


def test_api_versions_reports_the_features_of_a_new_one_node_cluster(broker_factory):
    broker = broker_factory()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert api_versions(conn, 2).error_code == ErrorCode.none  # no features before v3
        supported, finalized, epoch = features(api_versions(conn, 4))
        # not advertised, as Kafka leaves out a feature supported only at level 0: kraft.version
        # (static quorum), share.version, streams.version
        assert supported == {
            "metadata.version": (7, 27), "transaction.version": (0, 1), "eligible.leader.replicas.version": (0, 1),
            "group.version": (0, 1),
        }
        # a finalized level 0 is left out: transaction.version never appears on a new cluster
        assert finalized == {"metadata.version": (27, 27), "eligible.leader.replicas.version": (1, 1),
                             "group.version": (1, 1)}
        assert epoch == 0
        # v3 cannot carry a supported minimum of 0: those features are left out (KAFKA-17492)
        old_supported, old_finalized, _ = features(api_versions(conn, 3))
        assert old_supported == {"metadata.version": (7, 27)}
        assert old_finalized == finalized


def update(conn: KafkaRaw, version: int, updates: list[tuple[str, int, int]], validate_only: bool = False):
    return conn.request(UPDATE_FEATURES, version, timeout=10_000, validate_only=validate_only, feature_updates=[
        dict(feature=name, max_version_level=level, upgrade_type=kind, allow_downgrade=kind != UPGRADE)
        for name, level, kind in updates])


def invalid(level: int, name: str, reason: str) -> tuple:
    return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {name}. {reason}"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_update_features_refusals(broker_factory, version):
    broker = broker_factory()
    with KafkaRaw(broker.host, broker.port) as conn:
        refusals = [
            ([("no.such.feature", 1, UPGRADE)], invalid(1, "no.such.feature", "Local controller 0 does not support this feature.")),
            ([("streams.version", 1, UPGRADE)], invalid(1, "streams.version", "Local controller 0 does not support this feature.")),
            ([("group.version", 2, UPGRADE)], invalid(2, "group.version", "Local controller 0 only supports versions 0-1")),
            ([("transaction.version", 2, UPGRADE)], invalid(2, "transaction.version", "Local controller 0 only supports versions 0-1")),
            ([("metadata.version", 28, UPGRADE)], invalid(28, "metadata.version", "Local controller 0 only supports versions 7-27")),
            ([("transaction.version", -1, UPGRADE)], invalid(-1, "transaction.version", "A feature version cannot be less than 0.")),
            ([("metadata.version", 26, UPGRADE)], invalid(26, "metadata.version", "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")),
            ([("metadata.version", 22, SAFE_DOWNGRADE)], (ErrorCode.invalid_update_version, "Unsupported metadata.version downgrade from 27 to 22. Refusing to perform the requested downgrade because it might delete metadata information.")),
            # all or nothing: the valid first update is not applied either
            ([("transaction.version", 1, UPGRADE), ("no.such.feature", 0, UPGRADE)], invalid(0, "no.such.feature", "Feature no.such.feature not found.")),
        ]
        if version >= 1:  # v0 has no upgrade type: allow_downgrade is a safe downgrade
            refusals += [
                ([("transaction.version", 1, SAFE_DOWNGRADE)], invalid(1, "transaction.version", "Can't downgrade to a newer version.")),
                ([("transaction.version", 1, 9)], invalid(1, "transaction.version", "The controller does not support the given upgrade type.")),
                ([("metadata.version", 22, UNSAFE_DOWNGRADE)], (ErrorCode.invalid_update_version, "Unsupported metadata.version downgrade from 27 to 22. Unsafe metadata downgrade is not supported in this version.")),
            ]
        for updates, expected in refusals:
            response = update(conn, version, updates)
            assert (response.error_code, response.error_message) == expected, updates
            if version < 2:
                assert [(r.feature, r.error_code, r.error_message) for r in response.results] == [
                    (name, *expected) for name, _, _ in updates]
        assert features(api_versions(conn, 4))[1:] == (
            {"metadata.version": (27, 27), "eligible.leader.replicas.version": (1, 1), "group.version": (1, 1)}, 0)


def test_update_features_persists_and_counts_its_epoch(broker_factory):
    broker = broker_factory()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert update(conn, 1, [("transaction.version", 1, UPGRADE)], validate_only=True).error_code == ErrorCode.none
        assert features(api_versions(conn, 4))[2] == 0  # validate_only changes nothing
        response = update(conn, 2, [("transaction.version", 1, UPGRADE), ("metadata.version", 24, SAFE_DOWNGRADE)])
        assert (response.error_code, response.error_message) == (ErrorCode.none, None)
        assert update(conn, 2, [("transaction.version", 1, UPGRADE)]).error_code == ErrorCode.none  # no change
        _, finalized, epoch = features(api_versions(conn, 4))
        assert (finalized["transaction.version"], finalized["metadata.version"], epoch) == ((1, 1), (24, 24), 1)
    broker.kill()
    broker.restart()
    with KafkaRaw(broker.host, broker.port) as conn:
        _, finalized, epoch = features(api_versions(conn, 4))
        assert (finalized["transaction.version"], finalized["metadata.version"], epoch) == ((1, 1), (24, 24), 1)
        # level 0 removes a finalized feature; the quorum's offset follows the epoch
        assert update(conn, 1, [("eligible.leader.replicas.version", 0, SAFE_DOWNGRADE)]).error_code == ErrorCode.none
        _, finalized, epoch = features(api_versions(conn, 4))
        assert "eligible.leader.replicas.version" not in finalized and epoch == 2
        partition = describe_quorum(conn, 2, [("__cluster_metadata", [0])]).topics[0].partitions[0]
        assert partition.high_watermark == 3


def test_group_version_gates_the_consumer_protocol(broker_factory):
    """group.version 1 (a new cluster's level) serves KIP-848; at level 0 ConsumerGroupHeartbeat
    and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as Kafka's isConsumerGroupProtocolEnabled."""
    broker = broker_factory()

    def join(conn):
        return conn.request(68, 1, group_id="gv", member_id=uuid.uuid4().hex, member_epoch=0,
                            rebalance_timeout=30_000, subscribed_topic_names=("gv-topic",),
                            subscribed_topic_regex=None, topic_partitions=())

    with KafkaRaw(broker.host, broker.port) as conn:
        assert join(conn).error_code == ErrorCode.none
        assert update(conn, 2, [("group.version", 0, SAFE_DOWNGRADE)]).error_code == ErrorCode.none
        assert "group.version" not in features(api_versions(conn, 4))[1]
        assert join(conn).error_code == ErrorCode.unsupported_version
        described = conn.request(69, 0, group_ids=["gv"], include_authorized_operations=False)
        assert [g.error_code for g in described.groups] == [ErrorCode.unsupported_version]
    broker.restart()  # the level is durable
    with KafkaRaw(broker.host, broker.port) as conn:
        assert join(conn).error_code == ErrorCode.unsupported_version
        assert update(conn, 2, [("group.version", 1, UPGRADE)]).error_code == ErrorCode.none
        assert join(conn).error_code == ErrorCode.none


def test_features_through_kafka_python(broker_factory):
    broker = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        described = admin.describe_features()
        assert described["metadata.version"] == {"supported": (7, 27), "finalized": (27, 27), "finalized_epoch": 0}
        assert "finalized" not in described["transaction.version"]
        assert admin.update_features({"transaction.version": 1}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (1, 1)
        with pytest.raises(InvalidUpdateVersionError, match="Local controller 0 does not support this feature"):
            admin.update_features({"streams.version": 1})
    finally:
        admin.close()


# --- WriteTxnMarkers ------------------------------------------------------------------------------


def markers(conn: KafkaRaw, version: int, *specs) -> list:
    """specs: (producer id, epoch, commit, coordinator epoch, {topic: [partitions]})."""
    response = conn.request(WRITE_TXN_MARKERS, version, markers=[
        dict(producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator,
             topics=[dict(name=t, partition_indexes=ps) for t, ps in topics.items()])
        for pid, epoch, commit, coordinator, topics in specs])
    return [(m.producer_id, t.name, p.partition_index, p.error_code)
            for m in response.markers for t in m.topics for p in t.partitions]


@pytest.mark.parametrize("version", [1, 2])
def test_write_txn_markers_error_paths(conn, version):
    topic = f"m-{uuid.uuid4().hex[:8]}"
    conn.create_topic(topic, partitions=1)
    pid = 777_000 + version
    conn.produce_ok(topic, 0, make_batch(2, producer_id=pid, producer_epoch=3, base_sequence=0))
    assert markers(conn, version, (pid, 2, False, 0, {topic: [0, 4], "nope": [0], "__transaction_state": [0]})) == [
        (pid, topic, 0, ErrorCode.invalid_producer_epoch),  # older than the partition's epoch 3
        (pid, topic, 4, ErrorCode.unknown_topic_or_partition),
        (pid, "nope", 0, ErrorCode.unknown_topic_or_partition),
        (pid, "__transaction_state", 0, ErrorCode.unknown_topic_or_partition),  # only the broker writes there
    ]
    assert markers(conn, version, (pid, 3, True, 5, {topic: [0, 0, 0]})) == [(pid, topic, 0, ErrorCode.none)]
    assert markers(conn, version, (pid, 3, False, 4, {topic: [0]})) == [
        (pid, topic, 0, ErrorCode.transaction_coordinator_fenced)]
    assert conn.high_watermark(topic) == 3  # 2 records and one marker; the refused ones wrote nothing


HANGING_PRODUCER = """
import sys, time
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                     "transaction.timeout.ms": 600000, "linger.ms": 0})
producer.init_transactions(30)
producer.begin_transaction()
for i in range(3):
    producer.produce(sys.argv[3], b"in-doubt-%d" % i, partition=0)
producer.flush(30)
print("produced", flush=True)
time.sleep(600)
"""


def lso_and_end(conn: KafkaRaw, topic: str) -> tuple[int, int]:
    return (conn.list_offsets(topic, 0, LATEST, isolation_level=1).offset,
            conn.list_offsets(topic, 0, LATEST).offset)


def read_committed(broker, topic: str, count: int, timeout: float = 20) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([CTopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_an_admin_abort_ends_a_hanging_transaction(broker_factory):
    """A transactional producer dies in the middle of its transaction: the LSO stays at its
    first record (the coordinator would abort it only after transaction.timeout.ms, 10 min
    here). Kafka's answer, kafka-transactions.sh abort: DescribeProducers, then
    WriteTxnMarkers ABORT for that producer; kafka-python's abort_transaction sends it."""
    broker = broker_factory()
    topic = "hanging"
    creator = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    creator.create_topics([NewTopic(topic, 1)])[topic].result(10)
    child = subprocess.Popen([sys.executable, "-c", HANGING_PRODUCER, broker.bootstrap_servers, "tx-hang", topic],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "produced"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.produce_ok(topic, 0, make_batch([b"after"]))
        assert lso_and_end(conn, topic) == (0, 4)  # stuck below the open transaction
        assert read_committed(broker, topic, 1, timeout=3) == []
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
        try:
            tp = TopicPartition(topic, 0)
            (producer,) = admin.describe_producers([tp])[tp].active_producers
            assert producer.current_transaction_start_offset == 0
            admin.abort_transaction(AbortTransactionSpec(tp, producer.producer_id, producer.producer_epoch,
                                                         max(producer.coordinator_epoch, 0)))
        finally:
            admin.close()
        lso, end = lso_and_end(conn, topic)
        assert lso == end == 5  # the ABORT marker is in, nothing is open any more
    assert read_committed(broker, topic, 1) == [b"after"]  # the aborted records are dropped


# --- with ACLs: each API needs its cluster operation ----------------------------------------------

USERS = 'user_admin="admin-secret" user_bob="bob-secret" user_carol="carol-secret"'
SECURED = ("listeners=SASL_PLAINTEXT://127.0.0.1:9092\n"
           f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {USERS};\n"
           "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n")


def sasl_raw(broker, user: str, password: str) -> KafkaRaw:
    conn = KafkaRaw(broker.host, broker.port)
    assert conn.request(17, 1, mechanism="PLAIN").error_code == ErrorCode.none
    answer = conn.request(36, 2, auth_bytes=b"\0" + user.encode() + b"\0" + password.encode())
    assert answer.error_code == ErrorCode.none
    return conn


def test_each_api_refused_without_its_cluster_operation(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(SECURED)
    broker = broker_factory(config_file=config)
    sasl = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN"}
    admin = AdminClient({**sasl, "sasl.username": "admin", "sasl.password": "admin-secret"})
    admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].result(10)
    denied = ErrorCode.cluster_authorization_failed
    message = "Cluster authorization failed."
    with sasl_raw(broker, "bob", "bob-secret") as bob:
        response = elect(bob, 2, [dict(topic=TOPIC, partitions=[0])])
        assert response.error_code == denied
        assert election_results(response) == {(TOPIC, 0): (denied, message)}
        response = reassign(bob, 1, {TOPIC: [(0, [0])]})
        assert (response.error_code, response.error_message) == (denied, message)
        assert [p.error_code for t in response.responses for p in t.partitions] == [denied]
        response = bob.request(LIST_REASSIGNMENTS, 0, timeout=1000, topics=[dict(name=TOPIC, partition_indexes=[1])])
        assert (response.error_code, [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]) == (
            denied, [(TOPIC, [1])])
        response = bob.request(ALTER_REPLICA_LOG_DIRS, 2, dirs=[
            dict(path=os.path.abspath(broker.data_dir), topics=[dict(name=TOPIC, partitions=[0])])])
        assert [p.error_code for t in response.results for p in t.partitions] == [denied]
        response = describe_quorum(bob, 2, [("__cluster_metadata", [0])])
        assert (response.error_code, response.error_message, response.topics) == (denied, message, ())
        assert bob.request(LIST_CONFIG_RESOURCES, 1, resource_types=[]).error_code == denied
        response = update(bob, 2, [("transaction.version", 1, UPGRADE)])
        assert (response.error_code, response.error_message) == (denied, message)
        assert markers(bob, 1, (1, 0, False, 0, {TOPIC: [0]})) == [(1, TOPIC, 0, denied)]
        assert features(api_versions(bob, 4))[1].get("transaction.version") is None  # nothing changed

        # each with exactly the operation Kafka asks for
        def grant(operation: AclOperation) -> None:
            binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:bob", "*",
                                 operation, AclPermissionType.ALLOW)
            admin.create_acls([binding])[binding].result(10)

        grant(AclOperation.DESCRIBE)
        assert describe_quorum(bob, 2, [("__cluster_metadata", [0])]).error_code == ErrorCode.none
        assert bob.request(LIST_REASSIGNMENTS, 0, timeout=1000, topics=None).error_code == ErrorCode.none
        assert elect(bob, 2, [dict(topic=TOPIC, partitions=[0])]).error_code == denied  # ALTER, not DESCRIBE
        assert bob.request(LIST_CONFIG_RESOURCES, 1, resource_types=[]).error_code == denied
        grant(AclOperation.ALTER)
        assert election_results(elect(bob, 2, [dict(topic=TOPIC, partitions=[0])])) == {
            (TOPIC, 0): (ErrorCode.election_not_needed, NOT_NEEDED)}
        assert reassign(bob, 1, {TOPIC: [(0, [0])]}).responses[0].partitions[0].error_code == ErrorCode.none
        assert update(bob, 2, [("transaction.version", 1, UPGRADE)]).error_code == ErrorCode.none
        assert markers(bob, 1, (1, 0, False, 0, {TOPIC: [0]})) == [(1, TOPIC, 0, denied)]  # CLUSTER_ACTION
        grant(AclOperation.CLUSTER_ACTION)
        assert markers(bob, 1, (1, 0, False, 0, {TOPIC: [0]})) == [(1, TOPIC, 0, ErrorCode.none)]
        grant(AclOperation.DESCRIBE_CONFIGS)
        assert bob.request(LIST_CONFIG_RESOURCES, 1, resource_types=[]).error_code == ErrorCode.none
    # the clients that send them, as a user with no ACL
    carol = AdminClient({**sasl, "sasl.username": "carol", "sasl.password": "carol-secret"})
    with pytest.raises(KafkaException) as refused:
        carol.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(TOPIC, 0)]).result(10)
    assert refused.value.args[0].code() == 31  # CLUSTER_AUTHORIZATION_FAILED
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username="carol", sasl_plain_password="carol-secret",
                          request_timeout_ms=10000)
    try:
        for call in (lambda: kp.elect_leaders(0, {TOPIC: [0]}), kp.describe_metadata_quorum,
                     lambda: kp.update_features({"transaction.version": 1}), kp.list_partition_reassignments):
            with pytest.raises(ClusterAuthorizationFailedError):
                call()
    finally:
        kp.close()
