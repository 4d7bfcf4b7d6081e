"""Several listeners: each connection is told the advertised address of the listener it used
(how compose serves clients inside the container network and on the host at once)."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from rmqkafka.adapter.embedded import EmbeddedBroker

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def two_listener_broker(tmp_path):
    external = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        "listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:%d\n"
        "advertised.listeners=EXTERNAL://localhost:%d\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n" % (external, external)
    )
    with EmbeddedBroker(data_dir=tmp_path / "data", config_file=config) as broker:
        yield broker, external


def brokers_seen(bootstrap: str) -> set[tuple[str, int]]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {(b.host, b.port) for b in metadata.brokers.values()}


def test_each_listener_advertises_its_own_address(two_listener_broker):
    broker, external = two_listener_broker
    assert brokers_seen(broker.bootstrap_servers) == {("127.0.0.1", broker.port)}
    assert brokers_seen(f"127.0.0.1:{external}") == {("localhost", external)}


def test_clients_of_the_second_listener_produce_consume_and_join_groups(two_listener_broker):
    broker, external = two_listener_broker
    bootstrap = f"localhost:{external}"
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("via-external", str(i).encode())
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ext", "auto.offset.reset": "earliest"})
    consumer.subscribe(["via-external"])  # the group coordinator is found through this listener
    values = []
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
            if len(values) == 10:
                break
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("via-external", 0)], timeout=10)
    finally:
        consumer.close()
    assert values == [str(i).encode() for i in range(10)]
    assert committed[0].offset == 10
