"""Idempotent and transactional-id producers, byte by byte (rawkafka), against a real broker.

Kafka's rules: InitProducerId hands out a producer id; within an epoch a producer's batches
carry consecutive sequence numbers from 0; a batch equal to one of the last five
acknowledged is a retry and gets its original offset back without being appended again; a
gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch after a bump is INVALID_PRODUCER_EPOCH.
The state derives from the commitlog, so it must survive a clean restart and a kill -9.
"""

from __future__ import annotations

import pytest
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC = "idem"
# ``broker`` is tests/conftest.py's: a fresh EmbeddedBroker per test on tmp_path.


def connect(broker) -> KafkaRaw:
    return KafkaRaw(broker.host, broker.port)


def init_pid(conn: KafkaRaw, **kw) -> tuple[int, int]:
    response = conn.init_producer_id(**kw)
    assert response.error_code == ErrorCode.none, response
    return response.producer_id, response.producer_epoch


def batch(pid: int, epoch: int, seq: int, n: int, tag: str = "v") -> bytes:
    return make_batch(
        [f"{tag}-{seq + i}".encode() for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def values(conn: KafkaRaw, partition: int = 0) -> list[bytes]:
    records = conn.fetch_all(TOPIC, partition)
    assert [r.offset for r in records] == list(range(len(records)))
    return [r.value for r in records]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_gives_fresh_ids(broker, version):
    with connect(broker) as conn:
        first = init_pid(conn, version=version)
        second = init_pid(conn, version=version)
    assert first[0] >= 0 and second[0] >= 0
    assert first[0] != second[0]
    assert first[1] == second[1] == 0


def test_sequences_and_retries(broker):
    with connect(broker) as conn:
        conn.create_topic(TOPIC, partitions=2)
        pid, epoch = init_pid(conn)
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 3)) == 0
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 3, 2)) == 3
        assert conn.high_watermark(TOPIC) == 5

        # Retry of the newest batch: same base offset, nothing appended.
        again = conn.produce(TOPIC, 0, batch(pid, epoch, 3, 2))
        assert again.error_code == ErrorCode.none
        assert again.base_offset == 3
        assert conn.high_watermark(TOPIC) == 5

        # Retry of an older batch still among the last five.
        again = conn.produce(TOPIC, 0, batch(pid, epoch, 0, 3))
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        assert conn.high_watermark(TOPIC) == 5

        # The sequence continues after the retries.
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 5, 1)) == 5
        assert values(conn) == [b"v-%d" % i for i in range(6)]

        # Sequences are per partition: partition 1 starts at 0 for the same producer.
        assert conn.produce_ok(TOPIC, 1, batch(pid, epoch, 0, 2)) == 0


def test_retry_of_a_multi_batch_record_set(broker):
    """One produce carrying two batches, retried as a whole: same base offset, no growth."""
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        records = batch(pid, epoch, 0, 2) + batch(pid, epoch, 2, 3)
        assert conn.produce_ok(TOPIC, 0, records) == 0
        assert conn.high_watermark(TOPIC) == 5
        again = conn.produce(TOPIC, 0, records)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        assert conn.high_watermark(TOPIC) == 5
        assert values(conn) == [b"v-%d" % i for i in range(5)]


def test_retry_older_than_the_last_five_is_not_appended(broker):
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        for i in range(7):
            assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, i, 1)) == i
        old = conn.produce(TOPIC, 0, batch(pid, epoch, 0, 1))
        assert old.error_code in (
            ErrorCode.out_of_order_sequence_number,
            ErrorCode.duplicate_sequence_number,
        )
        assert conn.high_watermark(TOPIC) == 7
        recent = conn.produce(TOPIC, 0, batch(pid, epoch, 4, 1))
        assert (recent.error_code, recent.base_offset) == (ErrorCode.none, 4)
        assert conn.high_watermark(TOPIC) == 7


def test_sequence_gap_is_out_of_order(broker):
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 3)) == 0
        gap = conn.produce(TOPIC, 0, batch(pid, epoch, 5, 1))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        assert conn.high_watermark(TOPIC) == 3
        # An overlapping batch that is not a retry is out of order too.
        overlap = conn.produce(TOPIC, 0, batch(pid, epoch, 1, 3))
        assert overlap.error_code == ErrorCode.out_of_order_sequence_number
        assert conn.high_watermark(TOPIC) == 3
        # The producer can still continue at the right sequence.
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 3, 1)) == 3


def test_epoch_bump_fences_the_older_epoch(broker):
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 2)) == 0

        # KIP-360: InitProducerId v3+ with the current id and epoch bumps the epoch.
        bumped_pid, bumped = init_pid(conn, producer_id=pid, producer_epoch=epoch, version=3)
        assert bumped_pid == pid
        assert bumped == epoch + 1

        # The new epoch starts at sequence 0.
        late_start = conn.produce(TOPIC, 0, batch(pid, bumped, 2, 1))
        assert late_start.error_code == ErrorCode.out_of_order_sequence_number
        assert conn.produce_ok(TOPIC, 0, batch(pid, bumped, 0, 1, tag="new")) == 2

        # The old epoch is fenced, whatever its sequence.
        for seq in (2, 0):
            fenced = conn.produce(TOPIC, 0, batch(pid, epoch, seq, 1, tag="old"))
            assert fenced.error_code == ErrorCode.invalid_producer_epoch
        assert conn.high_watermark(TOPIC) == 3

        # Bumping again via v5 works the same way. As in Kafka, a partition learns of the
        # new epoch from the first batch carrying it (idempotent producers have no markers).
        again_pid, again = init_pid(conn, producer_id=pid, producer_epoch=bumped, version=5)
        assert (again_pid, again) == (pid, bumped + 1)
        assert conn.produce_ok(TOPIC, 0, batch(pid, again, 0, 1, tag="newer")) == 3
        fenced = conn.produce(TOPIC, 0, batch(pid, bumped, 1, 1))
        assert fenced.error_code == ErrorCode.invalid_producer_epoch
        assert values(conn) == [b"v-0", b"v-1", b"new-0", b"newer-0"]


def _produce_some(conn: KafkaRaw, pid: int, epoch: int) -> None:
    """Three batches: offsets 0-2, 3-4, 5-8."""
    assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 3)) == 0
    assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 3, 2)) == 3
    assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 5, 4)) == 5


def _check_state_survived(conn: KafkaRaw, pid: int, epoch: int) -> None:
    assert conn.high_watermark(TOPIC) == 9
    for seq, n, base in ((5, 4, 5), (3, 2, 3), (0, 3, 0)):
        again = conn.produce(TOPIC, 0, batch(pid, epoch, seq, n))
        assert (again.error_code, again.base_offset) == (ErrorCode.none, base), (seq, again)
    assert conn.high_watermark(TOPIC) == 9
    gap = conn.produce(TOPIC, 0, batch(pid, epoch, 11, 1))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    if epoch > 0:
        fenced = conn.produce(TOPIC, 0, batch(pid, epoch - 1, 9, 1))
        assert fenced.error_code == ErrorCode.invalid_producer_epoch
    assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 9, 1)) == 9
    assert values(conn) == [b"v-%d" % i for i in range(10)]


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_duplicate_detection_survives_restart(broker, how):
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, _ = init_pid(conn)
        pid, epoch = init_pid(conn, producer_id=pid, producer_epoch=0, version=4)  # epoch 1
        _produce_some(conn, pid, epoch)
    if how == "kill":
        broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_state_survived(conn, pid, epoch)


def test_duplicate_detection_survives_kill_after_a_checkpoint(broker):
    """Part of the state comes from the checkpoint snapshot, the rest from re-dispatch."""
    import time

    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 0, 3)) == 0
        time.sleep(2.5)  # at least one checkpoint (log.flush.interval.ms defaults to 1 s)
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 3, 2)) == 3
        assert conn.produce_ok(TOPIC, 0, batch(pid, epoch, 5, 4)) == 5
    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_state_survived(conn, pid, epoch)


def test_duplicate_detection_survives_two_kills_in_a_row(broker):
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
        pid, epoch = init_pid(conn)
        _produce_some(conn, pid, epoch)
    broker.kill()
    broker.restart()
    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_state_survived(conn, pid, epoch)


def test_new_producer_ids_after_restart_are_not_reused(broker):
    with connect(broker) as conn:
        before = {init_pid(conn)[0] for _ in range(3)}
    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        after = {init_pid(conn)[0] for _ in range(3)}
    assert not before & after


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001, 2_147_483_647])
def test_transaction_timeout_outside_the_broker_limit_is_refused(broker, version, timeout_ms):
    """Kafka checks 0 < transaction.timeout.ms <= transaction.max.timeout.ms (900000) first
    (librdkafka's test 0103 sends 2147483647 and expects INVALID_TRANSACTION_TIMEOUT)."""
    with connect(broker) as conn:
        response = conn.init_producer_id(transactional_id="tx", version=version, transaction_timeout_ms=timeout_ms)
    assert response.error_code == ErrorCode.invalid_transaction_timeout
    assert (response.producer_id, response.producer_epoch) == (-1, -1)


def test_an_idempotent_producer_ignores_the_transaction_timeout(broker):
    with connect(broker) as conn:
        assert init_pid(conn, transaction_timeout_ms=2_147_483_647)[0] >= 0
        assert init_pid(conn, transaction_timeout_ms=-1)[0] >= 0


def test_transaction_max_timeout_is_a_broker_setting(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("transaction.max.timeout.ms=1000\n")
    with connect(broker_factory(config_file=config)) as conn:
        response = conn.init_producer_id(transactional_id="tx", transaction_timeout_ms=1001)
        assert response.error_code == ErrorCode.invalid_transaction_timeout


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_transactional_init_producer_id_bumps_the_epoch(broker, version):
    """A transactional id keeps its producer id; each InitProducerId bumps its epoch (which
    fences the previous producer). An empty id is INVALID_REQUEST."""
    with connect(broker) as conn:
        first = init_pid(conn, transactional_id="tx-a", version=version)
        second = init_pid(conn, transactional_id="tx-a", version=version)
        assert first == (first[0], 0)
        assert second == (first[0], 1)
        assert init_pid(conn, transactional_id="tx-b", version=version)[0] != first[0]
        empty = conn.init_producer_id(transactional_id="", version=version)
        assert empty.error_code == ErrorCode.invalid_request
        assert init_pid(conn, version=version)[0] >= 0  # idempotent producers are unaffected


def test_confluent_transactional_producer_timeout_is_checked(broker):
    """librdkafka retries every InitProducerId error but the authorization, fencing and timeout
    ones until init_transactions' own timeout, then raises with the broker's error."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    bootstrap = f"{broker.host}:{broker.port}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-confluent",
                         "transaction.timeout.ms": 2_147_483_647})
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(5)
    assert caught.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT, caught.value
