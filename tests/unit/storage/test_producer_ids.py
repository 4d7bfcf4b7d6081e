from __future__ import annotations

import json

from rmqkafka.storage.producer_ids import BLOCK_SIZE, MAX_EPOCH, ProducerIds


def test_ids_unique_and_block_recorded_before_use(tmp_path):
    path = tmp_path / "producer_ids.json"
    ids = ProducerIds(path)
    assert not path.exists()
    first = [ids.allocate() for _ in range(5)]
    assert first == [0, 1, 2, 3, 4]
    assert json.loads(path.read_text())["next_block"] == BLOCK_SIZE


def test_restart_never_reuses_ids(tmp_path):
    path = tmp_path / "producer_ids.json"
    ids = ProducerIds(path)
    seen = {ids.allocate() for _ in range(BLOCK_SIZE + 3)}  # crosses a block
    assert json.loads(path.read_text())["next_block"] == 2 * BLOCK_SIZE
    # A crash at any point: a new instance starts at the recorded next block.
    again = ProducerIds(path)
    more = {again.allocate() for _ in range(10)}
    assert not seen & more
    assert min(more) == 2 * BLOCK_SIZE


def test_transactional_ids_keep_their_producer_id_and_bump_the_epoch(tmp_path):
    path = tmp_path / "producer_ids.json"
    ids = ProducerIds(path)
    pid, epoch = ids.for_transactional_id("tx-a")
    assert epoch == 0
    assert ids.for_transactional_id("tx-a") == (pid, 1)
    other, _ = ids.for_transactional_id("tx-b")
    assert other != pid
    plain = ids.allocate()
    assert plain not in (pid, other)
    reopened = ProducerIds(path)
    assert reopened.for_transactional_id("tx-a") == (pid, 2)
    assert reopened.allocate() not in (pid, other, plain)


def test_exhausted_epoch_gets_a_new_producer_id(tmp_path):
    ids = ProducerIds(tmp_path / "producer_ids.json")
    pid, _ = ids.for_transactional_id("tx")
    ids._transactional["tx"] = [pid, MAX_EPOCH]
    new_pid, epoch = ids.for_transactional_id("tx")
    assert new_pid != pid and epoch == 0
