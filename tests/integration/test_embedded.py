"""rmqkafka.adapter.embedded.EmbeddedBroker: lifecycle, real clients against it, crash and restart.

Also measures the time from ``start()`` to the ready line and prints it (shown even when
pytest captures output), since "starts in well under a second" is a design goal.
"""

from __future__ import annotations

import gc
import os
import re
import signal
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from rmqkafka.adapter.embedded import EmbeddedBroker, EmbeddedBrokerError

pytestmark = pytest.mark.integration

MARKER = "clean_shutdown"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_context_manager(capsys, record_property):
    with EmbeddedBroker() as broker:
        assert re.fullmatch(r"127\.0\.0\.1:\d+", broker.bootstrap_servers)
        assert broker.host == "127.0.0.1" and broker.port > 0
        assert broker.running and broker.returncode is None and alive(broker.pid)
        data_dir, pid = broker.data_dir, broker.pid
        assert data_dir.is_dir()
        seconds = broker.startup_seconds
    assert seconds is not None
    record_property("startup_seconds", seconds)
    with capsys.disabled():
        print(f"\nembedded broker: start() to ready in {seconds * 1000:.0f} ms")
    assert broker.returncode == 0
    assert not alive(pid)
    assert not data_dir.exists(), "the temporary data directory is removed on exit"


async def test_aiokafka_metadata(broker: EmbeddedBroker):
    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        await client.bootstrap()
        advertised = {(b.host, b.port) for b in client.cluster.brokers()}
    finally:
        await client.close()
    assert advertised == {(broker.host, broker.port)}


def test_kafka_python_admin(broker: EmbeddedBroker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("embedded-admin", num_partitions=2, replication_factor=1)])
        assert "embedded-admin" in admin.list_topics()
    finally:
        admin.close()


@pytest.mark.crash
def test_kill_then_restart_keeps_data(broker_factory):
    broker = broker_factory()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    try:
        for i in range(3):
            producer.send("embedded-crash", f"v{i}".encode(), partition=0)
        producer.flush(timeout=10)
    finally:
        producer.close()
    old_pid = broker.pid

    assert broker.kill() == -signal.SIGKILL
    assert not broker.running and not alive(old_pid)
    assert not (broker.data_dir / MARKER).exists()

    broker.restart()
    assert broker.running and broker.pid != old_pid
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    try:
        partition = TopicPartition("embedded-crash", 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        values = []
        for record in consumer:  # ends after consumer_timeout_ms without records
            values.append(record.value)
            if len(values) == 3:
                break
    finally:
        consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


@pytest.mark.crash
def test_marker_lifecycle_across_stop_start_kill(broker_factory):
    """The marker exists only between a clean stop and the next start (else a crash after a
    clean restart would be mistaken for a clean shutdown)."""
    broker = broker_factory()
    marker = broker.data_dir / MARKER
    assert broker.stop() == 0
    assert marker.is_file()
    broker.start()
    assert not marker.exists(), "start() must consume the clean-shutdown marker"
    broker.kill()
    assert not marker.exists()
    broker.restart()
    assert broker.running


def test_restart_while_running_and_on_the_same_port(broker_factory):
    broker = broker_factory()
    first_pid = broker.pid
    broker.restart()  # running: stopped cleanly first
    assert broker.running and broker.pid != first_pid and not alive(first_pid)
    port = broker.port
    broker.restart(same_port=True)
    assert broker.port == port and broker.running


def test_given_data_dir_is_kept(tmp_path: Path):
    data_dir = tmp_path / "kept"
    with EmbeddedBroker(data_dir=data_dir, flush="sync") as broker:
        assert broker.data_dir == data_dir
    assert (data_dir / MARKER).is_file()


def test_stderr_is_captured(broker_factory):
    broker = broker_factory(args=["--log-level", "DEBUG"])
    deadline = time.monotonic() + 10
    while "rmqk: starting" not in broker.stderr and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "rmqk: starting" in broker.stderr
    broker.stop()
    assert "stopped cleanly" in broker.stderr


def test_stop_and_kill_are_idempotent(broker_factory):
    broker = broker_factory(start=False)
    assert broker.stop() is None and broker.kill() is None
    broker.start()
    assert broker.stop() == 0
    assert broker.stop() == 0 and broker.kill() == 0


def test_failed_start_reports_stderr_and_cleans_up(tmp_path: Path):
    broker = EmbeddedBroker(args=["--flush", "bogus"])
    with pytest.raises(EmbeddedBrokerError) as info, broker:
        pass
    message = str(info.value)
    assert "exited with status 2 before it was ready" in message
    assert "--flush" in message.split("--- broker stderr (tail) ---", 1)[1]
    assert broker.returncode == 2
    assert not broker.data_dir.exists()


def test_bad_config_file_is_reported(tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=abc\n")
    broker = EmbeddedBroker(data_dir=tmp_path / "d", config_file=config)
    with pytest.raises(EmbeddedBrokerError, match="invalid value 'abc' for num.partitions"):
        broker.start()


def test_startup_timeout_kills_the_process(tmp_path: Path):
    broker = EmbeddedBroker(data_dir=tmp_path / "d", startup_timeout=0.001)
    with pytest.raises(EmbeddedBrokerError, match="did not report ready within"):
        broker.start()
    assert broker.returncode == -signal.SIGKILL
    assert not alive(broker.pid)


def test_unreferenced_broker_is_reaped():
    broker = EmbeddedBroker().start()
    pid, data_dir = broker.pid, broker.data_dir
    del broker
    gc.collect()
    assert not alive(pid), "the finalizer kills and reaps an abandoned broker"
    assert not data_dir.exists()
