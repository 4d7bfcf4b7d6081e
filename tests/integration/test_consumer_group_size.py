"""group.consumer.max.size on the wire (KIP-848): a consumer-protocol group beyond it refuses
a new member with GROUP_MAX_SIZE_REACHED and Kafka's message, as Kafka 4's
GroupMetadataManager.throwIfConsumerGroupIsFull does, while its members go on; and a large
group's joins stay cheap (the work per join is counted in
tests/unit/adapter/test_consumer_group_join_cost.py)."""

from __future__ import annotations

import uuid

import pytest
from rawkafka import ErrorCode, KafkaRaw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69


def heartbeat(conn: KafkaRaw, group: str, member_id: str, epoch: int, topics=("t",)):
    return conn.request(CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member_id, member_epoch=epoch,
                        rebalance_timeout=30_000, subscribed_topic_names=tuple(topics) if epoch == 0 else None,
                        subscribed_topic_regex=None, topic_partitions=() if epoch == 0 else None,
                        instance_id=None, rack_id=None, server_assignor=None, recv_timeout=60)


def test_a_member_beyond_group_consumer_max_size_is_refused(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("group.consumer.max.size=3\n")
    broker = broker_factory(config_file=config)
    with KafkaRaw.connect(broker.bootstrap_servers, timeout=60) as conn:
        conn.create_topic("t", 2)
        members = {}
        for name in ("a", "b", "c"):
            member_id = uuid.uuid4().hex
            answer = heartbeat(conn, "g", member_id, 0)
            assert answer.error_code == ErrorCode.none
            members[name] = (member_id, answer.member_epoch)
        refused = heartbeat(conn, "g", uuid.uuid4().hex, 0)
        assert refused.error_code == ErrorCode.group_max_size_reached
        assert refused.error_message == "The consumer group has reached its maximum capacity of 3 members."
        member_id, epoch = members["a"]
        assert heartbeat(conn, "g", member_id, epoch).error_code == ErrorCode.none
        described = conn.request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=["g"], include_authorized_operations=False)
        assert len(described.groups[0].members) == 3
        # One leaves: the next one gets in.
        member_id, _ = members["b"]
        assert heartbeat(conn, "g", member_id, -1).error_code == ErrorCode.none
        assert heartbeat(conn, "g", uuid.uuid4().hex, 0).error_code == ErrorCode.none


def test_two_thousand_members_join_a_four_partition_group(broker_factory):
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers, timeout=60) as conn:
        conn.create_topic("t", 4)
        answers = [heartbeat(conn, "big", uuid.uuid4().hex, 0) for _ in range(2_000)]
        assert all(a.error_code == ErrorCode.none for a in answers)
        # Every join bumped the group epoch; the first four members hold a partition each.
        assert [a.member_epoch for a in answers] == list(range(1, 2_001))
        holders = [a for a in answers if any(t.partitions for t in a.assignment.topic_partitions)]
        assert len(holders) == 1  # the first member holds all four until it revokes them
        described = conn.request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=["big"], include_authorized_operations=False)
        group = described.groups[0]
        assert group.group_epoch == group.assignment_epoch == 2_000 and len(group.members) == 2_000
