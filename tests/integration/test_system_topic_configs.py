"""The broker's own system topics (the scheduler's, the share-group state, RocketMQ's half
topics) are never compacted by the log cleaner, so a cleanup.policy with "compact" there
would only stop their retention and let them grow without bound. A real confluent-kafka
AdminClient setting it (IncrementalAlterConfigs SET or APPEND, AlterConfigs, CreateTopics)
is refused with INVALID_CONFIG and a message naming the topic and the key; the policy
stays delete, and the topics' other configs can still be changed.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from rawkafka import start_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WAIT = 20.0
# every system topic that holds records, all created at start (so CreateTopics can only
# answer TOPIC_ALREADY_EXISTS for them; it shares the check below all the same)
SYSTEM_TOPICS = ["SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "__share_group_state", "__transaction_state",
                 "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"]


@pytest.fixture(scope="module")
def admin(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("system-topic-configs") / "data") as broker:
        yield AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _refused(future, topic: str) -> None:
    with pytest.raises(KafkaException) as info:
        future.result(WAIT)
    error = info.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG, error
    assert topic in error.str() and "cleanup.policy" in error.str(), error


def _policy(admin: AdminClient, topic: str) -> str:
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(WAIT)["cleanup.policy"].value


def _incremental(topic: str, name: str, value: str | None, op: AlterConfigOpType) -> ConfigResource:
    return ConfigResource("topic", topic, incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
@pytest.mark.parametrize("value", ["compact", "compact,delete"])
def test_incremental_alter_configs_cannot_make_a_system_topic_compacted(admin, topic, value):
    for op in (AlterConfigOpType.SET, AlterConfigOpType.APPEND):
        resource = _incremental(topic, "cleanup.policy", value, op)
        _refused(admin.incremental_alter_configs([resource])[resource], topic)
    assert _policy(admin, topic) == "delete"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
def test_alter_configs_cannot_make_a_system_topic_compacted(admin, topic):
    resource = ConfigResource("topic", topic, set_config={"cleanup.policy": "compact", "retention.ms": "1000"})
    _refused(admin.alter_configs([resource])[resource], topic)
    assert _policy(admin, topic) == "delete"


def test_consumer_offsets_may_be_compacted_as_in_kafka(admin):
    """Presented only (offsets live in the offset store, its partitions stay empty), and
    compacted as Kafka creates it: not refused."""
    try:
        admin.create_topics([NewTopic("__consumer_offsets", 1, 1)])["__consumer_offsets"].result(WAIT)
    except KafkaException:
        pass  # made by a coordinator lookup already
    resource = _incremental("__consumer_offsets", "cleanup.policy", "compact", AlterConfigOpType.SET)
    assert admin.incremental_alter_configs([resource])[resource].result(WAIT) is None
    assert _policy(admin, "__consumer_offsets") == "compact"


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
def test_a_system_topics_retention_can_still_be_changed(admin, topic):
    resource = _incremental(topic, "retention.ms", "3600000", AlterConfigOpType.SET)
    assert admin.incremental_alter_configs([resource])[resource].result(WAIT) is None
    resource = ConfigResource("topic", topic)
    assert admin.describe_configs([resource])[resource].result(WAIT)["retention.ms"].value == "3600000"
    resource = _incremental(topic, "retention.ms", None, AlterConfigOpType.DELETE)
    assert admin.incremental_alter_configs([resource])[resource].result(WAIT) is None
    resource = _incremental(topic, "cleanup.policy", "delete", AlterConfigOpType.SET)  # no compact: fine
    assert admin.incremental_alter_configs([resource])[resource].result(WAIT) is None
