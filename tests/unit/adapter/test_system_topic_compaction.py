"""The broker's own topics that hold records are never compacted: a cleanup.policy naming
"compact" is refused on them (CreateTopics and both AlterConfigs share the check), and one
an older broker stored is dropped at start, so their retention applies again."""

from __future__ import annotations

import logging

import pytest
from rmqkafka.adapter.topic_compaction import drop_compaction_of_system_topics
from rmqkafka.adapter.topic_configs import NEVER_COMPACTED, InvalidConfig, validate_topic_configs
from rmqkafka.storage.topics import TopicRegistry


@pytest.mark.parametrize("topic", sorted(NEVER_COMPACTED))
@pytest.mark.parametrize("policy", ["compact", "delete,compact", " compact , delete"])
def test_compact_is_refused_on_a_system_topic(topic, policy):
    with pytest.raises(InvalidConfig, match=f"cleanup.policy: topic {topic} is a system topic"):
        validate_topic_configs({"cleanup.policy": policy}, topic)


@pytest.mark.parametrize("topic", ["orders", "__consumer_offsets"])
def test_compact_is_accepted_elsewhere(topic):
    assert validate_topic_configs({"cleanup.policy": "compact"}, topic) == {"cleanup.policy": "compact"}


def test_a_stored_compact_policy_of_a_system_topic_is_dropped_at_start(tmp_path, caplog):
    path = tmp_path / "topics.json"
    topics = TopicRegistry(path)
    topics.create("SCHEDULE_TOPIC_XXXX", 2, {"cleanup.policy": "compact", "retention.ms": "5"})
    topics.create("__share_group_state", 1, {"cleanup.policy": "delete"})
    topics.create("orders", 1, {"cleanup.policy": "compact"})
    with caplog.at_level(logging.WARNING):
        drop_compaction_of_system_topics(topics)
    assert topics.get("SCHEDULE_TOPIC_XXXX").configs == {"retention.ms": "5"}
    assert topics.get("__share_group_state").configs == {"cleanup.policy": "delete"}
    assert topics.get("orders").configs == {"cleanup.policy": "compact"}
    [warning] = [r for r in caplog.records if "SCHEDULE_TOPIC_XXXX" in r.getMessage()]
    assert "cleanup.policy=compact" in warning.getMessage()
    assert TopicRegistry(path).get("SCHEDULE_TOPIC_XXXX").configs == {"retention.ms": "5"}  # durable
    caplog.clear()
    drop_compaction_of_system_topics(topics)  # nothing left to do: nothing said
    assert not caplog.records
