"""Issue 22: consumer-protocol (KIP-848) groups beside classic ones in ``rmqk groups
list|describe``, the console's /api/groups and /metrics: the group type, members with their
epochs and assignments, and lag.

One broker with a metrics port; a confluent-kafka member with ``group.protocol=consumer``
consumes a 2-partition topic and commits offsets that leave a known lag; a classic group
exists only by its committed offsets.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def rmqk_json(*args: str):
    from rmqkafka.cli import main

    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False, prog_name="rmqk")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rmqk_table(*args: str) -> str:
    from rmqkafka.cli import main

    result = CliRunner().invoke(main, list(args), catch_exceptions=False, prog_name="rmqk")
    assert result.exit_code == 0, result.output
    return result.stdout


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def scrape(url: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        body = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(broker, topic, the consumer group, the classic group), the consumer still a member."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("cg-observed")
    config = root / "server.properties"
    config.write_text("group.consumer.heartbeat.interval.ms=500\ngroup.consumer.min.heartbeat.interval.ms=500\n")
    broker = EmbeddedBroker(data_dir=root / "data", config_file=config, args=["--metrics-port", "0"])
    with broker:
        bootstrap = broker.bootstrap_servers
        topic, group, classic = (f"{p}-{uuid.uuid4().hex[:6]}" for p in ("observed", "kip848", "simple"))
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
        admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            producer.produce(topic, str(i).encode(), partition=i % 2)
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                             "client.id": "observed-member", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 40
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got += 1
        assert got == 10
        # lag: 5 - 5 on partition 0, 5 - 3 on partition 1
        consumer.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 3)], asynchronous=False)
        simple = Consumer({"bootstrap.servers": bootstrap, "group.id": classic})
        simple.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        simple.close()
        try:
            yield broker, topic, group, classic
        finally:
            consumer.close()
        assert "Traceback" not in broker.stderr


def test_rmqk_groups_list_shows_both_types(live):
    broker, _, group, classic = live
    listed = {row["group"]: row for row in rmqk_json("groups", "list", "-b", broker.bootstrap_servers)}
    assert (listed[group]["type"], listed[group]["state"]) == ("consumer", "Stable")
    assert (listed[classic]["type"], listed[classic]["state"]) == ("classic", "Empty")
    lines = {line.split()[0]: line.split() for line in rmqk_table("groups", "list", "-b", broker.bootstrap_servers).splitlines()}
    assert lines["GROUP"][:3] == ["GROUP", "TYPE", "STATE"]
    assert lines[group][:3] == [group, "consumer", "Stable"] and lines[classic][:3] == [classic, "classic", "Empty"]


def test_rmqk_groups_describe_shows_epochs_assignments_and_lag(live):
    broker, topic, group, _ = live
    [doc] = rmqk_json("groups", "describe", group, "-b", broker.bootstrap_servers)
    assert (doc["type"], doc["state"], doc["assignor"], doc["total_lag"]) == ("consumer", "Stable", "uniform", 2)
    assert isinstance(doc["group_epoch"], int) and doc["group_epoch"] >= 1
    [member] = doc["members"]
    both = [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]
    assert member["client_id"] == "observed-member" and member["member_epoch"] == doc["group_epoch"]
    assert member["assignment"] == both and member["target_assignment"] == both
    assert [(p["partition"], p["current_offset"], p["log_end_offset"], p["lag"], p["consumer_id"])
            for p in doc["partitions"]] == [(0, 5, 5, 0, member["consumer_id"]), (1, 3, 5, 2, member["consumer_id"])]
    table = rmqk_table("groups", "describe", group, "-b", broker.bootstrap_servers)
    header, row = table.splitlines()[:2]
    assert header.split()[:6] == ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "ASSIGNOR", "EPOCH"]
    assert row.split()[:6] == [group, "consumer", "Stable", "consumer", "uniform", str(doc["group_epoch"])]
    member_line = next(line for line in table.splitlines() if line.startswith(member["consumer_id"]))
    assert member_line.split()[3] == str(member["member_epoch"])


def test_console_api_and_metrics_show_the_consumer_group(live):
    broker, topic, group, classic = live
    url = broker.metrics_url
    groups = {g["group"]: g for g in get_json(url + "/api/groups")["groups"]}
    mine = groups[group]
    assert (mine["type"], mine["state"], mine["protocol"], mine["lag"]) == ("consumer", "Stable", "uniform", 2)
    [member] = mine["members"]
    assert member["client_id"] == "observed-member" and member["member_epoch"] == mine["generation"] >= 1
    assert member["assignment"] == member["target_assignment"] == [{"topic": topic, "partitions": [0, 1]}]
    assert (groups[classic]["type"], groups[classic]["members"]) == ("classic", [])

    samples = scrape(url)
    assert samples[("kafka_consumergroup_members", frozenset({("consumergroup", group)}))] == 1
    assert samples[("rmqk_consumergroup_epoch", frozenset({("consumergroup", group)}))] == mine["generation"]
    assert samples[("kafka_consumergroup_lag", frozenset({("consumergroup", group), ("topic", topic),
                                                          ("partition", "1")}))] == 2
