"""The transaction APIs byte by byte (rawkafka) against a real broker: what a read_committed
Fetch and ListOffsets answer, which transactional produces are refused, views over
transactional topics, OffsetFetch require_stable, DescribeTransactions / ListTransactions."""

from __future__ import annotations

import pytest
from rawkafka import ErrorCode, KafkaRaw, decode_records, make_batch
from rmqkafka.storage.batch_builder import marker_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 8, 9, 61, 65, 66
LATEST = -1


class Txn:
    def __init__(self, conn: KafkaRaw, txn_id: str) -> None:
        self.conn = conn
        self.txn_id = txn_id
        response = conn.init_producer_id(transactional_id=txn_id)
        assert response.error_code == ErrorCode.none, response
        self.pid, self.epoch = response.producer_id, response.producer_epoch
        self.seq: dict[tuple[str, int], int] = {}

    def add(self, topic: str, partition: int = 0) -> ErrorCode:
        response = self.conn.request(
            ADD_PARTITIONS, 3, v3_and_below_transactional_id=self.txn_id,
            v3_and_below_producer_id=self.pid, v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[dict(name=topic, partitions=[partition])],
        )
        return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code

    def produce(self, topic: str, values: list[bytes], partition: int = 0, epoch: int | None = None,
                headers=None) -> object:
        seq = self.seq.get((topic, partition), 0)
        batch = make_batch(values, producer_id=self.pid, producer_epoch=self.epoch if epoch is None else epoch,
                           base_sequence=seq, transactional=True, headers=headers)
        entry = self.conn.produce(topic, partition, batch, transactional_id=self.txn_id)
        if entry.error_code == ErrorCode.none:
            self.seq[(topic, partition)] = seq + len(values)
        return entry

    def end(self, commit: bool) -> ErrorCode:
        return self.conn.request(END_TXN, 3, transactional_id=self.txn_id, producer_id=self.pid,
                                 producer_epoch=self.epoch, committed=commit).error_code


def test_read_committed_fetch_and_list_offsets(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=1)
        txn = Txn(conn, "raw")
        assert txn.add("t") == ErrorCode.none
        assert txn.produce("t", [b"a0", b"a1", b"a2"]).error_code == ErrorCode.none
        committed = conn.fetch("t", 0, 0, isolation_level=1)
        assert (committed.high_watermark, committed.last_stable_offset) == (3, 0)
        assert not committed.records
        uncommitted = conn.fetch("t", 0, 0)
        assert uncommitted.last_stable_offset == 0
        assert [r.value for r in decode_records(uncommitted.records)] == [b"a0", b"a1", b"a2"]
        assert conn.list_offsets("t", 0, LATEST, isolation_level=1).offset == 0
        assert conn.list_offsets("t", 0, LATEST, isolation_level=0).offset == 3
        # by timestamp: only offsets below the LSO (the open transaction's records are not)
        assert conn.list_offsets("t", 0, 0, isolation_level=1).offset == -1
        assert conn.list_offsets("t", 0, 0, isolation_level=0).offset == 0

        assert txn.end(commit=False) == ErrorCode.none  # ABORT marker at 3
        after = conn.fetch("t", 0, 0, isolation_level=1)
        assert (after.high_watermark, after.last_stable_offset) == (4, 4)
        assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions] == [(txn.pid, 0)]
        assert conn.fetch("t", 0, 0).aborted_transactions is None  # read_uncommitted: null

        assert txn.add("t") == ErrorCode.none
        assert txn.produce("t", [b"b0", b"b1"]).base_offset == 4
        assert txn.end(commit=True) == ErrorCode.none  # COMMIT marker at 6
        assert txn.end(commit=True) == ErrorCode.none  # a retry: same answer
        assert txn.end(commit=False) == ErrorCode.invalid_txn_state
        later = conn.fetch("t", 0, 4, isolation_level=1)
        assert later.last_stable_offset == 7
        assert list(later.aborted_transactions) == []
        values = [r.value for r in decode_records(later.records) if r.value is not None and r.offset >= 4]
        assert b"b0" in values and b"b1" in values
        assert conn.list_offsets("t", 0, LATEST, isolation_level=1).offset == 7


def test_transactional_batches_need_their_own_transactional_id(broker):
    # CVE-2018-17196's class: transactional records in a request without a transactional id,
    # or under another transactional id than the one their producer id belongs to
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("own", partitions=1)
        owner, other = Txn(conn, "owner"), Txn(conn, "other")
        assert owner.add("own") == ErrorCode.none and other.add("own") == ErrorCode.none
        batch = make_batch([b"x"], producer_id=owner.pid, producer_epoch=owner.epoch, base_sequence=0,
                           transactional=True)
        assert conn.produce("own", 0, batch).error_code == ErrorCode.transactional_id_authorization_failed
        assert conn.produce("own", 0, batch, transactional_id="other").error_code == (
            ErrorCode.invalid_producer_id_mapping)
        assert conn.produce("own", 0, batch, transactional_id="owner").error_code == ErrorCode.none
        assert conn.list_offsets("own", 0, LATEST).offset == 1


def test_refused_produces(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("r", partitions=2)
        txn = Txn(conn, "refused")
        assert txn.add("r", 0) == ErrorCode.none
        # not added to the transaction
        assert txn.produce("r", [b"x"], partition=1).error_code == ErrorCode.invalid_txn_state
        # a control batch from a client
        entry = conn.produce("r", 0, marker_batch(txn.pid, txn.epoch, True, 0), transactional_id="refused")
        assert entry.error_code == ErrorCode.invalid_record
        # the state log is the broker's
        assert conn.produce("__transaction_state", 0, make_batch(1)).error_code != ErrorCode.none
        assert txn.add("nope", 0) == ErrorCode.unknown_topic_or_partition
        assert txn.produce("r", [b"ok"], partition=0).error_code == ErrorCode.none
        # a new producer instance fences the old epoch (and aborts its transaction)
        bumped = conn.init_producer_id(transactional_id="refused")
        while bumped.error_code == ErrorCode.concurrent_transactions:
            bumped = conn.init_producer_id(transactional_id="refused")
        assert bumped.error_code == ErrorCode.none
        assert bumped.producer_epoch > txn.epoch
        assert txn.produce("r", [b"stale"], partition=0).error_code == ErrorCode.invalid_producer_epoch
        assert txn.add("r", 0) == ErrorCode.producer_fenced
        assert txn.end(commit=True) == ErrorCode.producer_fenced
        listed = {t.name: t for t in conn.metadata(None).topics}
        assert listed["__transaction_state"].is_internal  # listed once in use, as Kafka lists it


def test_view_reads_stop_at_the_lso(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("src", partitions=1)
        conn.create_topic("src.red", -1, {"rmq.view.source": "src", "rmq.view.tags": "red"})
        txn = Txn(conn, "view")
        assert txn.add("src") == ErrorCode.none
        red = [("TAGS", b"red")]
        assert txn.produce("src", [b"r0", b"b0"], headers=[red, [("TAGS", b"blue")]]).error_code == ErrorCode.none
        assert not conn.fetch("src.red", 0, 0, isolation_level=1).records
        assert [r.value for r in decode_records(conn.fetch("src.red", 0, 0).records)] == [b"r0"]
        assert txn.end(commit=False) == ErrorCode.none
        entry = conn.fetch("src.red", 0, 0, isolation_level=1)
        assert entry.last_stable_offset == 3
        assert [(a.producer_id, a.first_offset) for a in entry.aborted_transactions] == [(txn.pid, 0)]
        assert [r.value for r in decode_records(entry.records) if r.value not in (None,)] [:1] == [b"r0"]


def test_txn_offsets_describe_and_list(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("o", partitions=1)
        txn = Txn(conn, "offsets")
        commit = dict(transactional_id="offsets", group_id="g", producer_id=txn.pid,
                      producer_epoch=txn.epoch, generation_id=-1, member_id="", group_instance_id=None,
                      topics=[dict(name="o", partitions=[dict(partition_index=0, committed_offset=5,
                                                              committed_leader_epoch=-1,
                                                              committed_metadata="")])])
        # AddOffsetsToTxn first
        early = conn.request(TXN_OFFSET_COMMIT, 3, **commit)
        assert early.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
        added = conn.request(ADD_OFFSETS, 3, transactional_id="offsets", producer_id=txn.pid,
                             producer_epoch=txn.epoch, group_id="g")
        assert added.error_code == ErrorCode.none
        staged = conn.request(TXN_OFFSET_COMMIT, 3, **commit)
        assert staged.topics[0].partitions[0].error_code == ErrorCode.none
        fetch = dict(group_id="g", topics=[dict(name="o", partition_indexes=[0])])
        stable = conn.request(OFFSET_FETCH, 7, require_stable=True, **fetch)
        assert stable.topics[0].partitions[0].error_code == ErrorCode.unstable_offset_commit
        plain = conn.request(OFFSET_FETCH, 7, require_stable=False, **fetch)
        assert plain.topics[0].partitions[0].committed_offset == -1

        described = conn.request(DESCRIBE_TXNS, 0, transactional_ids=["offsets", "missing"])
        first, missing = described.transaction_states
        assert (first.error_code, first.transaction_state, first.producer_id) == (ErrorCode.none, "Ongoing", txn.pid)
        assert missing.error_code == ErrorCode.transactional_id_not_found
        listed = conn.request(LIST_TXNS, 1, state_filters=["Ongoing"], producer_id_filters=[], duration_filter=-1)
        assert [t.transactional_id for t in listed.transaction_states] == ["offsets"]

        assert txn.end(commit=True) == ErrorCode.none
        after = conn.request(OFFSET_FETCH, 7, require_stable=True, **fetch)
        assert after.topics[0].partitions[0].error_code == ErrorCode.none
        assert after.topics[0].partitions[0].committed_offset == 5
        listed = conn.request(LIST_TXNS, 2, state_filters=[], producer_id_filters=[], duration_filter=-1,
                              transactional_id_pattern="off.*")
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            ("offsets", "CompleteCommit")]


def test_txn_offset_commit_of_a_zombie_is_fenced(broker):
    """KIP-447: a TxnOffsetCommit naming a generation or member of a group this broker does
    not know (its membership is not persisted, so a restart forgets it) is UNKNOWN_MEMBER_ID,
    as for Kafka's empty group; OffsetCommit gets ILLEGAL_GENERATION."""
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("z", partitions=1)
        txn = Txn(conn, "zombie")
        assert conn.request(ADD_OFFSETS, 3, transactional_id="zombie", producer_id=txn.pid,
                            producer_epoch=txn.epoch, group_id="forgotten").error_code == ErrorCode.none
        topics = [dict(name="z", partitions=[dict(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                  committed_metadata="")])]

        def txn_commit(generation: int, member: str) -> ErrorCode:
            response = conn.request(TXN_OFFSET_COMMIT, 3, transactional_id="zombie", group_id="forgotten",
                                    producer_id=txn.pid, producer_epoch=txn.epoch, generation_id=generation,
                                    member_id=member, group_instance_id=None, topics=topics)
            return response.topics[0].partitions[0].error_code

        assert txn_commit(5, "zombie-member") == ErrorCode.unknown_member_id
        assert txn_commit(5, "") == ErrorCode.unknown_member_id
        response = conn.request(OFFSET_COMMIT, 8, group_id="forgotten", generation_id_or_member_epoch=5,
                                member_id="zombie-member", group_instance_id=None, topics=[
                                    dict(name="z", partitions=[dict(partition_index=0, committed_offset=5,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata="")])])
        assert response.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
        assert txn_commit(-1, "") == ErrorCode.none  # no group management: accepted
        assert txn.end(commit=True) == ErrorCode.none


def test_describe_producers(broker):
    """DescribeProducers (61) as kafka-transactions.sh describe-producers / find-hanging ask:
    every producer of the partition, its open transaction's first offset, and after the
    coordinator's abort, the bumped epoch and the coordinator epoch of the marker."""
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=2)

        def described(partitions=(0,), topic="t"):
            response = conn.request(DESCRIBE_PRODUCERS, 0, topics=[dict(name=topic, partition_indexes=list(partitions))])
            return {p.partition_index: (p.error_code, {s.producer_id: s for s in p.active_producers})
                    for p in response.topics[0].partitions}

        assert described((0, 1)) == {0: (ErrorCode.none, {}), 1: (ErrorCode.none, {})}
        idempotent = conn.init_producer_id()
        conn.produce("t", 0, make_batch([b"x", b"y"], producer_id=idempotent.producer_id, producer_epoch=0,
                                        base_sequence=0))
        txn = Txn(conn, "described")
        assert txn.add("t") == ErrorCode.none
        assert txn.produce("t", [b"a", b"b", b"c"]).base_offset == 2
        error, producers = described()[0]
        assert error == ErrorCode.none and set(producers) == {idempotent.producer_id, txn.pid}
        plain = producers[idempotent.producer_id]
        assert (plain.producer_epoch, plain.last_sequence, plain.coordinator_epoch,
                plain.current_txn_start_offset) == (0, 1, -1, -1)
        assert plain.last_timestamp > 0
        open_txn = producers[txn.pid]
        assert (open_txn.producer_epoch, open_txn.last_sequence, open_txn.current_txn_start_offset) == (txn.epoch, 2, 2)

        assert txn.end(commit=False) == ErrorCode.none
        ended = described()[0][1][txn.pid]
        assert (ended.producer_epoch, ended.last_sequence, ended.coordinator_epoch,
                ended.current_txn_start_offset) == (txn.epoch, 2, 0, -1)

        # an unknown topic or partition, as Kafka answers
        assert described((5,))[5][0] == ErrorCode.unknown_topic_or_partition
        assert described((0,), topic="nope")[0][0] == ErrorCode.unknown_topic_or_partition
