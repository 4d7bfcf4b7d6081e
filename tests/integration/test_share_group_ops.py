"""Issue 23: a share group's per share-partition figures (the console API, /metrics, ``rmqk
groups describe``) and ``rmqk groups reset-offsets`` / ``delete-offsets`` of a share group
(AlterShareGroupOffsets, DeleteShareGroupOffsets), against a broker process driven by
confluent-kafka's ShareConsumer and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from rawkafka import ErrorCode, KafkaRaw, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WAIT = 90.0
CONFIG = ("group.share.heartbeat.interval.ms=1000\n"
          "group.share.min.heartbeat.interval.ms=1000\n")


@pytest.fixture
def broker(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text(CONFIG)
    return broker_factory(config_file=config, args=["--metrics-port", "0"])


def rmqk(bootstrap: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqkafka", "groups", *args, "-b", bootstrap],
                          capture_output=True, text=True, timeout=90, check=check)


def described(bootstrap: str, group: str) -> dict:
    (doc,) = json.loads(rmqk(bootstrap, "describe", group, "--json").stdout)
    return doc


def share_rows(metrics_url: str, group: str) -> list[dict]:
    with urllib.request.urlopen(metrics_url + "/api/groups", timeout=30) as response:
        return {g["group"]: g for g in json.loads(response.read())["groups"]}[group]["share_partitions"]


def scrape(url: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        body = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def setup(bootstrap: str, topic: str, group: str, count: int) -> None:
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(topic, 1)
        response = raw.request(44, 1, validate_only=False, resources=[dict(
            resource_type=32, resource_name=group,
            configs=[dict(name="share.auto.offset.reset", config_operation=0, value="earliest")])])
        assert response.responses[0].error_code == ErrorCode.none
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"r%03d" % i, partition=0)
    assert producer.flush(30) == 0


def test_share_partition_figures_reset_and_delete_offsets(broker):
    bootstrap, metrics_url = broker.bootstrap_servers, broker.metrics_url
    topic, group = f"ops-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    setup(bootstrap, topic, group, 10)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "ops",
                       "share.acknowledgement.mode": "explicit"})
    closed = False
    try:
        c.subscribe([topic])
        got: list = []
        deadline = time.monotonic() + WAIT
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m for m in c.poll(0.5) if m.error() is None]
        assert len(got) == 10
        by_offset = {m.offset(): m for m in got}
        for offset in range(4):  # 0-3 accepted, 4 rejected, 5-9 still acquired
            c.acknowledge(by_offset[offset], AcknowledgeType.ACCEPT)
        c.acknowledge(by_offset[4], AcknowledgeType.REJECT)
        c.commit_sync()

        def figures() -> dict:
            rows = share_rows(metrics_url, group)
            return rows[0] if rows else {}

        wait_until(lambda: figures().get("start") == 5, timeout=WAIT, message="SPSO past the done records")
        row = figures()
        assert (row["topic"], row["partition"], len(row["members"])) == (topic, 0, 1)
        assert (row["start"], row["end"], row["in_flight"], row["acquired"]) == (5, 10, 5, 5)
        assert (row["acknowledged"], row["archived"], row["waiting"], row["lag"]) == (0, 0, 0, 5)
        assert row["dead_letters"] == 1
        metrics = scrape(metrics_url)
        labels = frozenset({("sharegroup", group), ("topic", topic), ("partition", "0")})
        assert metrics[("rmqk_share_partition_start_offset", labels)] == 5
        assert metrics[("rmqk_share_partition_acquired_records", labels)] == 5
        assert metrics[("rmqk_share_partition_lag", labels)] == 5
        assert metrics[("rmqk_share_partition_dead_letters", labels)] == 1
        assert metrics[("rmqk_share_partitions_omitted", frozenset())] == 0
        doc = described(bootstrap, group)
        assert [(p["topic"], p["partition"], p["current_offset"], p["log_end_offset"], p["lag"], p["client_id"])
                for p in doc["partitions"]] == [(topic, 0, 5, 10, 5, "ops")]
        assert doc["total_lag"] == 5
        refused = rmqk(bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", check=False)
        assert refused.returncode != 0 and "active member" in refused.stderr
        c.close()
        closed = True
    finally:
        if not closed:
            c.close()

    wait_until(lambda: described(bootstrap, group)["state"] == "Empty", timeout=WAIT, message="the consumer left")
    dry = json.loads(rmqk(bootstrap, "reset-offsets", group, "--topic", topic, "--to-offset", "2", "--json").stdout)
    assert dry == {"group": group, "executed": False,
                   "partitions": [{"topic": topic, "partition": 0, "current_offset": 5, "new_offset": 2}]}
    assert described(bootstrap, group)["partitions"][0]["current_offset"] == 5, "a dry run changes nothing"
    shift = rmqk(bootstrap, "reset-offsets", group, "--all-topics", "--shift-by", "1", check=False)
    assert shift.returncode != 0 and "--shift-by" in shift.stderr
    rmqk(bootstrap, "reset-offsets", group, "--all-topics", "--to-offset", "2", "--execute")
    row = described(bootstrap, group)["partitions"][0]
    assert (row["current_offset"], row["lag"]) == (2, 8), "the in-flight state went with the reset"
    rmqk(bootstrap, "reset-offsets", group, "--topic", f"{topic}:0", "--to-latest", "--execute")
    assert described(bootstrap, group)["partitions"][0]["current_offset"] == 10
    since = rmqk(bootstrap, "reset-offsets", group, "--topic", topic, "--to-datetime", "0", "--execute", "--json")
    assert json.loads(since.stdout)["partitions"][0]["new_offset"] == 0

    deleted = rmqk(bootstrap, "delete-offsets", group, "--topic", topic)
    assert f"deleted the offsets of share group {group} for topic {topic}" in deleted.stdout
    assert described(bootstrap, group)["partitions"] == []
    missing = rmqk(bootstrap, "delete-offsets", group, "--topic", "no-such-topic", check=False)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    classic = rmqk(bootstrap, "delete-offsets", "not-a-share-group", "--topic", topic, check=False)
    assert classic.returncode != 0 and "not a share group" in classic.stderr



def _consume(bootstrap: str, group: str, topic: str, count: int, reject: set[int]) -> None:
    """One ShareConsumer acknowledges ``count`` records, REJECT for the offsets in ``reject``."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "dl",
                       "share.acknowledgement.mode": "explicit"})
    try:
        c.subscribe([topic])
        got: dict[int, object] = {}
        deadline = time.monotonic() + WAIT
        while len(got) < count and time.monotonic() < deadline:
            for m in c.poll(0.5):
                if m.error() is None:
                    got[m.offset()] = m
                    c.acknowledge(m, AcknowledgeType.REJECT if m.offset() in reject else AcknowledgeType.ACCEPT)
        assert len(got) == count
        c.commit_sync()
    finally:
        c.close()


def _member_until(bootstrap: str, group: str, topic: str, done) -> None:
    """A member of ``group`` reading only ``topic`` polls until ``done()``: membership is not
    kept across restarts, so the group is listed again once a member joins, while the
    share-partitions of the group's other topics stay unloaded (figures from their state)."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "watch"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            c.poll(0.5)
            if done():
                return
        raise AssertionError(f"not seen in {WAIT} s")
    finally:
        c.close()


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "kill-9"])
def test_the_dead_letter_count_survives_a_restart(broker, crash):
    """A share-partition's ``dead_letters`` (console, /metrics) is durable: after a restart,
    clean or kill -9, it is what it was, before a fetch loads the share-partition and after,
    and counting goes on from there."""
    bootstrap = broker.bootstrap_servers
    topic, group = f"dl-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    other = topic + "-other"
    setup(bootstrap, topic, group, 10)
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(other, 1)
    _consume(bootstrap, group, topic, 10, reject={1, 4, 7})
    labels = frozenset({("sharegroup", group), ("topic", topic), ("partition", "0")})
    seen: list = []

    def counts() -> tuple:
        try:
            rows = [r for r in share_rows(broker.metrics_url, group) if r["topic"] == topic]
        except KeyError:  # the group is not listed (yet)
            rows = []
        got = (rows[0]["dead_letters"] if rows else None,
               scrape(broker.metrics_url).get(("rmqk_share_partition_dead_letters", labels)))
        seen.append(got)
        return got

    wait_until(lambda: counts() == (3, 3), timeout=WAIT, message=f"3 dead letters counted: {seen[-3:]}")

    def restart() -> None:
        if crash:
            broker.kill()
        broker.restart()
        seen.clear()

    restart()
    _member_until(broker.bootstrap_servers, group, other, lambda: counts() == (3, 3))
    assert all(c in ((None, None), (3, 3)) for c in seen), seen  # never 0, never anything else
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10, 12):
        producer.produce(topic, b"r%03d" % i, partition=0)
    assert producer.flush(30) == 0
    _consume(broker.bootstrap_servers, group, topic, 2, reject={11})
    wait_until(lambda: counts() == (4, 4), timeout=WAIT, message=f"counting on from 3: {seen[-3:]}")
    restart()
    _member_until(broker.bootstrap_servers, group, other, lambda: counts() == (4, 4))
    assert all(c in ((None, None), (4, 4)) for c in seen), seen


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "kill-9"])
def test_a_share_group_with_state_is_listed_after_a_restart_before_any_member_joins(broker, crash):
    """As Kafka (which keeps share groups in __consumer_offsets), a share group whose
    share-partitions have state is still a group after a restart: ListGroups lists it as an
    Empty share group, and the console shows its share-partitions, with no member back."""
    bootstrap = broker.bootstrap_servers
    topic, group = f"relist-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    setup(bootstrap, topic, group, 6)
    _consume(bootstrap, group, topic, 6, reject={2})

    def listed() -> list:
        with KafkaRaw.connect(broker.bootstrap_servers) as raw:
            response = raw.request(16, 5, states_filter=[], types_filter=[])
        assert response.error_code == ErrorCode.none
        return [(g.group_type, g.group_state, g.protocol_type) for g in response.groups if g.group_id == group]

    wait_until(lambda: listed() == [("share", "Empty", "share")], timeout=WAIT,
               message=f"the share group listed as Empty before the restart: {listed()}")
    if crash:
        broker.kill()
    broker.restart()
    assert listed() == [("share", "Empty", "share")]
    rows = share_rows(broker.metrics_url, group)
    assert [(r["topic"], r["dead_letters"]) for r in rows] == [(topic, 1)]
