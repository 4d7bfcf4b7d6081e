"""ListOffsets (v1 and the newest version) against a real broker: earliest, latest, max
timestamp, by timestamp with non-monotonic CreateTime timestamps inside and across batches,
past the last record, empty partitions, read_committed.

Kafka's by-timestamp answer is the smallest offset whose record timestamp is >= the target
(with that record's timestamp), or offset -1 / timestamp -1 when there is none. Max
timestamp (-3, v7+) is the first record carrying the largest timestamp.
"""

from __future__ import annotations

import time

import pytest
from rawkafka import (
    EARLIEST,
    GZIP,
    LATEST,
    LZ4,
    MAX_TIMESTAMP,
    ZSTD,
    ErrorCode,
    KafkaRaw,
    make_batch,
    start_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BASE = 1_700_000_000_000
TOPIC = "lo"
EMPTY = "lo-empty"
TIES = "lo-ties"
READ_COMMITTED = 1
NEWEST = 10
EARLIEST_LOCAL = -4

# Offsets 0..10 in four batches; timestamps (seconds after BASE) go up and down inside
# batches and the batches' maxima go down from the 2nd to the 3rd batch.
BATCHES = [
    ([100, 300, 200], 0),
    ([150, 500, 400], GZIP),
    ([250, 350], ZSTD),
    ([600, 50, 450], LZ4),
]
TIMESTAMPS = [BASE + s * 1000 for batch, _ in BATCHES for s in batch]


def expected_for(timestamps: list[int], target: int) -> tuple[int, int]:
    for offset, ts in enumerate(timestamps):
        if ts >= target:
            return offset, ts
    return -1, -1


def expected_max(timestamps: list[int]) -> tuple[int, int]:
    top = max(timestamps)
    return timestamps.index(top), top


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("lo") / "data") as b:
        with KafkaRaw(b.host, b.port) as conn:
            conn.create_topic(TOPIC, partitions=1)
            conn.create_topic(EMPTY, partitions=3)
            conn.create_topic(TIES, partitions=1)
            offset = 0
            for seconds, codec in BATCHES:
                ts = [BASE + s * 1000 for s in seconds]
                vals = [b"r%d" % (offset + i) for i in range(len(ts))]
                assert (
                    conn.produce_ok(TOPIC, 0, make_batch(vals, timestamps=ts, compression=codec))
                    == offset
                )
                offset += len(ts)
            # Ties: the max timestamp appears at offsets 1, 3 and 5 (two batches).
            conn.produce_ok(TIES, 0, make_batch(3, timestamps=[BASE, BASE + 9000, BASE + 2000]))
            conn.produce_ok(
                TIES, 0, make_batch(3, timestamps=[BASE + 9000, BASE + 1000, BASE + 9000])
            )
        yield b


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


def lookup(
    conn: KafkaRaw, topic: str, ts: int, version: int, partition: int = 0, isolation: int = 0
) -> tuple[int, int]:
    entry = conn.list_offsets(topic, partition, ts, version=version, isolation_level=isolation)
    assert entry.error_code == ErrorCode.none, entry
    return entry.offset, entry.timestamp


VERSIONS = [1, NEWEST]


@pytest.mark.parametrize("version", VERSIONS)
def test_earliest_and_latest(conn, version):
    assert lookup(conn, TOPIC, EARLIEST, version) == (0, -1)
    assert lookup(conn, TOPIC, LATEST, version) == (len(TIMESTAMPS), -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_by_timestamp_non_monotonic(conn, version):
    targets = sorted({t + d for t in TIMESTAMPS for d in (-1, 0, 1)} | {0, BASE - 10**6})
    for target in targets:
        assert lookup(conn, TOPIC, target, version) == expected_for(TIMESTAMPS, target), target


@pytest.mark.parametrize("version", VERSIONS)
def test_timestamp_after_all_records(conn, version):
    assert lookup(conn, TOPIC, max(TIMESTAMPS) + 1, version) == (-1, -1)
    assert lookup(conn, TOPIC, BASE + 10**9, version) == (-1, -1)


@pytest.mark.parametrize("version", [7, NEWEST])
def test_max_timestamp(conn, version):
    assert lookup(conn, TOPIC, MAX_TIMESTAMP, version) == expected_max(TIMESTAMPS)


@pytest.mark.parametrize("version", [7, NEWEST])
def test_max_timestamp_with_ties_is_the_first(conn, version):
    assert lookup(conn, TIES, MAX_TIMESTAMP, version) == (1, BASE + 9000)
    assert lookup(conn, TIES, BASE + 9000, version) == (1, BASE + 9000)
    assert lookup(conn, TIES, BASE + 2500, version) == (1, BASE + 9000)
    assert lookup(conn, TIES, BASE + 1500, version) == (1, BASE + 9000)
    assert lookup(conn, TIES, BASE + 500, version) == (1, BASE + 9000)
    assert lookup(conn, TIES, BASE, version) == (0, BASE)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_partition(conn, version):
    for p in range(3):
        assert lookup(conn, EMPTY, EARLIEST, version, partition=p) == (0, -1)
        assert lookup(conn, EMPTY, LATEST, version, partition=p) == (0, -1)
        assert lookup(conn, EMPTY, 0, version, partition=p) == (-1, -1)
        assert lookup(conn, EMPTY, BASE, version, partition=p) == (-1, -1)
        if version >= 7:
            assert lookup(conn, EMPTY, MAX_TIMESTAMP, version, partition=p) == (-1, -1)


def test_earliest_local(conn):
    assert lookup(conn, TOPIC, EARLIEST_LOCAL, NEWEST) == (0, -1)


@pytest.mark.parametrize("version", [2, 5, NEWEST])
def test_read_committed_last_stable_offset_is_the_high_watermark(conn, version):
    hw = len(TIMESTAMPS)
    assert lookup(conn, TOPIC, LATEST, version, isolation=READ_COMMITTED) == (hw, -1)
    assert lookup(conn, TOPIC, EARLIEST, version, isolation=READ_COMMITTED) == (0, -1)
    target = BASE + 320 * 1000
    assert lookup(conn, TOPIC, target, version, isolation=READ_COMMITTED) == expected_for(
        TIMESTAMPS, target
    )
    fetched = conn.fetch(TOPIC, 0, 0, isolation_level=READ_COMMITTED)
    assert fetched.error_code == ErrorCode.none
    assert fetched.last_stable_offset == fetched.high_watermark == hw


def test_several_partitions_and_topics_in_one_request(conn):
    response = conn.request(
        2,
        NEWEST,
        replica_id=-1,
        isolation_level=0,
        timeout=5000,
        topics=[
            dict(
                name=TOPIC,
                partitions=[
                    dict(partition_index=0, current_leader_epoch=-1, timestamp=EARLIEST),
                    dict(partition_index=0, current_leader_epoch=-1, timestamp=BASE + 250_000),
                ],
            ),
            dict(
                name=EMPTY,
                partitions=[
                    dict(partition_index=p, current_leader_epoch=-1, timestamp=LATEST)
                    for p in range(3)
                ],
            ),
            dict(
                name="lo-missing",
                partitions=[dict(partition_index=0, current_leader_epoch=-1, timestamp=LATEST)],
            ),
        ],
    )
    by_topic = {t.name: t.partitions for t in response.topics}
    assert [(p.offset, p.timestamp) for p in by_topic[TOPIC]] == [
        (0, -1),
        expected_for(TIMESTAMPS, BASE + 250_000),
    ]
    assert [(p.partition_index, p.offset) for p in by_topic[EMPTY]] == [(0, 0), (1, 0), (2, 0)]
    assert by_topic["lo-missing"][0].error_code == ErrorCode.unknown_topic_or_partition


def test_log_append_time_topic_uses_the_append_time(conn):
    conn.create_topic("lo-append", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000) - 1
    conn.produce_ok("lo-append", 0, make_batch(3, timestamps=[1000, 5000, 3000]))
    after = int(time.time() * 1000) + 1
    offset, ts = lookup(conn, "lo-append", 2000, NEWEST)
    assert offset == 0 and before <= ts <= after
    assert lookup(conn, "lo-append", after + 10_000, NEWEST) == (-1, -1)
    offset, ts = lookup(conn, "lo-append", MAX_TIMESTAMP, NEWEST)
    assert 0 <= offset <= 2 and before <= ts <= after


def test_answers_survive_restart_and_kill(tmp_path):
    """The time index is persisted (clean restart) and rebuilt (kill -9)."""
    with start_broker(tmp_path / "data") as b:
        with KafkaRaw(b.host, b.port) as c:
            c.create_topic(TOPIC)
            for seconds, codec in BATCHES:
                c.produce_ok(
                    TOPIC,
                    0,
                    make_batch(
                        len(seconds),
                        timestamps=[BASE + s * 1000 for s in seconds],
                        compression=codec,
                    ),
                )
        targets = [BASE + s * 1000 for s in range(0, 700, 25)]

        def answers() -> list:
            with KafkaRaw(b.host, b.port) as c:
                return [
                    lookup(c, TOPIC, t, NEWEST) for t in [*targets, MAX_TIMESTAMP, LATEST, EARLIEST]
                ]

        expected = [expected_for(TIMESTAMPS, t) for t in targets] + [
            expected_max(TIMESTAMPS),
            (11, -1),
            (0, -1),
        ]
        assert answers() == expected
        b.restart()
        assert answers() == expected
        b.kill()
        b.restart()
        assert answers() == expected
