"""A failing fsync in a real broker process under ``--flush sync`` (issue: EIO was swallowed
and 100 acknowledged records were lost in each of two runs).

The failure is injected into the broker process only: a ``sitecustomize`` module on the
child's PYTHONPATH wraps ``os.fdatasync`` so that it raises EIO while a trigger file exists.
Nothing acknowledged may be lost: the broker acknowledges nothing the failed fsync covered,
refuses writes, exits with status 74 without a clean-shutdown marker, and after a restart
every acknowledged record is there.
"""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(120)]

SITECUSTOMIZE = '''
import errno
import os

_real_fdatasync = os.fdatasync
_trigger = os.environ["RMQK_TEST_FSYNC_FAILS_WHILE"]


def _fdatasync(fd):
    if os.path.exists(_trigger):
        raise OSError(errno.EIO, "Input/output error (injected by the test)")
    return _real_fdatasync(fd)


os.fdatasync = _fdatasync
'''


def test_acknowledged_records_survive_a_failing_fsync(broker_factory, tmp_path):
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    trigger = tmp_path / "fail-fsync"
    broker = broker_factory(flush="sync", env={"PYTHONPATH": str(site), "RMQK_TEST_FSYNC_FAILS_WHILE": str(trigger)})
    acked: list[bytes] = []
    failed: list[str] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 4000, "log_level": 0})

    def report(err, msg):
        if err is None:
            acked.append(msg.value())
        else:
            failed.append(err.name())

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce("durable", b"%d" % i, partition=0, on_delivery=report)
        producer.flush(15)

    send(0, 200)
    assert len(acked) == 200 and not failed
    trigger.touch()
    send(200, 200)
    assert len(acked) < 400 and failed, "records were acknowledged although fsync failed"
    deadline = time.monotonic() + 15
    while broker.running:
        assert time.monotonic() < deadline, "the broker kept running after its fsync failed"
        time.sleep(0.1)
    assert broker.returncode == 74
    assert "fsync failed" in broker.stderr and "CRITICAL" in broker.stderr
    assert not (broker.data_dir / "clean_shutdown").exists()

    trigger.unlink()
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"check-{uuid.uuid4()}",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition("durable", 0, 0)])
    stored: list[bytes] = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end of partition"
        if msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF
            break
        stored.append(msg.value())
    consumer.close()
    missing = [v for v in acked if v not in set(stored)]
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
    assert len(stored) == len(set(stored))


def test_a_produce_waiting_for_a_failing_fsync_is_answered_kafka_storage_error(broker_factory, tmp_path):
    """The produce that waits for the fsync that fails gets KAFKA_STORAGE_ERROR (56) on its
    own connection, not a closed connection and a handler traceback in the log."""
    from kio.schema.errors import ErrorCode

    from tests.integration.rawkafka import KafkaRaw, make_batch

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    trigger = tmp_path / "fail-fsync"
    broker = broker_factory(flush="sync", env={"PYTHONPATH": str(site), "RMQK_TEST_FSYNC_FAILS_WHILE": str(trigger)})
    with KafkaRaw.connect(broker.bootstrap_servers) as client:
        client.create_topic("durable", partitions=2)
        assert client.produce_ok("durable", 0, make_batch(3)) == 0
        trigger.touch()
        response = client.produce_request({("durable", 0): make_batch(2), ("durable", 1): make_batch(1)},
                                          timeout=15)
        answers = [p for t in response.responses for p in t.partition_responses]
        assert [p.error_code for p in answers] == [ErrorCode.kafka_storage_error] * 2
        assert all(p.base_offset == -1 for p in answers)
        assert all("fsync failed" in (p.error_message or "") for p in answers)
    deadline = time.monotonic() + 15
    while broker.running:
        assert time.monotonic() < deadline, "the broker kept running after its fsync failed"
        time.sleep(0.1)
    assert broker.returncode == 74
    assert "handler for api 0" not in broker.stderr and "Traceback" not in broker.stderr.split("CRITICAL", 1)[0]
