"""Issue 12, "start even when the disk is full", against a real broker process on a real
file system that fills up (a small tmpfs; the test skips, saying why, where it cannot be
mounted).

A ``--flush sync`` broker acknowledges records once the commitlog holds them on disk; the
index entries of those records reach the disk with the next checkpoint. After a power loss
between the two, on a full disk, recovery must write the index entries again and had no
room: the broker did not start until someone freed space. With the disk reserve it starts,
serves every acknowledged record, answers produces with KAFKA_STORAGE_ERROR while the disk
is full, and takes them again once there is room.
"""

from __future__ import annotations

import time

import pytest
from rawkafka import ErrorCode, KafkaRaw, make_batch

from bench.small_filesystem import lose_unsynced_index_entries

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(120)]


def test_a_power_loss_on_a_full_disk_still_starts(broker_factory, small_fs):
    config = small_fs.path / "server.properties"
    config.write_text("log.dir.reserve.bytes=2097152\nlog.flush.interval.ms=600000\n")
    broker = broker_factory(data_dir=small_fs.path / "data", flush="sync", config_file=config)
    expected = {0: [], 1: []}
    with KafkaRaw(broker.host, broker.port) as k:
        k.create_topic("full", 2)
        for i in range(200):  # 10,000 offsets: 200 KB of index entries no checkpoint covers
            values = [b"r%d-%d" % (i, n) for n in range(50)]
            k.produce_ok("full", i % 2, make_batch(values))
            expected[i % 2].extend(values)
    broker.kill()
    lose_unsynced_index_entries(broker.data_dir)
    small_fs.fill()

    broker.start()
    assert "released the 2097152-byte disk reserve" in broker.stderr
    with KafkaRaw(broker.host, broker.port) as k:
        for p in (0, 1):
            assert [r.value for r in k.fetch_all("full", p)] == expected[p]
        refused = k.produce("full", 0, make_batch([b"refused"]))
        assert refused.error_code == ErrorCode.kafka_storage_error
        small_fs.free()
        deadline = time.monotonic() + 10
        while (entry := k.produce("full", 0, make_batch([b"after"]))).error_code != ErrorCode.none:
            assert entry.error_code == ErrorCode.kafka_storage_error
            assert time.monotonic() < deadline, "produces were not taken again once there was room"
            time.sleep(0.2)
        assert entry.base_offset == len(expected[0])
    broker.stop()
    broker.start()
    with KafkaRaw(broker.host, broker.port) as k:
        assert [r.value for r in k.fetch_all("full", 0)] == [*expected[0], b"after"]
