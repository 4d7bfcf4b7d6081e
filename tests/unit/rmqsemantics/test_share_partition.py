"""The share-partition state machine (KIP-932 rules), with an injected clock."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.share.config import AutoOffsetReset, ShareGroupSettings, parse_iso_duration_ms
from rmqkafka.rmqsemantics.share.errors import InvalidRecordState, InvalidShareConfig, InvalidShareRequest
from rmqkafka.rmqsemantics.share.partition import (
    AckBatch,
    AcquiredRange,
    RecordState,
    SharePartition,
    StateBatch,
    StateUpdate,
    initial_start_offset,
)
from rmqkafka.storage.clock import ManualClock

ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


def make(start=0, **kw):
    clock = ManualClock()
    updates: list[StateUpdate] = []
    dead: list[tuple[int, int, str]] = []
    sp = SharePartition(ShareGroupSettings(**kw), clock, start, persist=updates.append,
                        dead_letter=lambda *a: dead.append(a))
    return sp, clock, updates, dead


def ack(sp, member, first, last, *types):
    sp.acknowledge(member, [AckBatch(first, last, tuple(types))])


def test_acquire_hands_out_ranges_with_delivery_counts_and_bounds():
    sp, _, _, _ = make()
    assert sp.acquire("a", 10, 4) == [AcquiredRange(0, 3, 1)]
    assert sp.acquire("b", 10, 100, batch_size=4) == [AcquiredRange(4, 7, 1), AcquiredRange(8, 9, 1)]
    assert sp.acquire("c", 10, 100) == []
    assert (sp.start_offset, sp.end_offset) == (0, 10)


def test_lock_expiry_frees_only_records_still_held_under_that_acquisition():
    # one acquisition is one lock entry: records of it acknowledged, or released and taken
    # again by another member later, must not expire with it
    sp, clock, _, _ = make(record_lock_duration_ms=1000)
    assert sp.acquire("a", 10, 10) == [AcquiredRange(0, 9, 1)]
    ack(sp, "a", 0, 4, ACCEPT)
    ack(sp, "a", 5, 6, RELEASE)
    clock.advance(1)
    assert sp.acquire("b", 10, 2) == [AcquiredRange(5, 6, 2)]
    clock.advance(999)
    assert sp.expire_locks() == 3  # 7..9 of a's acquisition
    assert [sp.record(o).state for o in (5, 6, 7, 8, 9)] == [RecordState.ACQUIRED] * 2 + [RecordState.AVAILABLE] * 3
    clock.advance(1)
    assert sp.expire_locks() == 2  # b's
    assert sp.acquire("c", 10, 100) == [AcquiredRange(5, 6, 3), AcquiredRange(7, 9, 2)]


def test_window_never_exceeds_max_record_locks():
    sp, _, _, _ = make(max_record_locks=100)
    assert sp.acquire("a", 1000, 500) == [AcquiredRange(0, 99, 1)]
    assert sp.acquire("a", 1000, 500) == []
    ack(sp, "a", 0, 9, ACCEPT)
    assert sp.start_offset == 10
    assert sp.acquire("a", 1000, 500) == [AcquiredRange(100, 109, 1)]
    assert sp.in_flight_count() == 100


def test_accept_advances_spso_only_over_a_done_prefix():
    sp, _, updates, _ = make()
    sp.acquire("a", 5, 5)
    ack(sp, "a", 1, 2, ACCEPT)
    assert sp.start_offset == 0
    ack(sp, "a", 0, 0, ACCEPT)
    assert sp.start_offset == 3
    assert updates[-1].start_offset == 3
    ack(sp, "a", 3, 4, REJECT, GAP)
    assert sp.start_offset == 5 and sp.in_flight_count() == 0


def test_release_redelivers_with_a_raised_delivery_count():
    sp, _, _, _ = make()
    sp.acquire("a", 3, 3)
    ack(sp, "a", 0, 2, ACCEPT, RELEASE, ACCEPT)
    assert sp.acquire("b", 3, 10) == [AcquiredRange(1, 1, 2)]


def test_delivery_limit_archives_and_reports_exhausted():
    sp, _, _, dead = make(delivery_count_limit=3)
    for n in (1, 2, 3):
        assert sp.acquire("a", 1, 1) == [AcquiredRange(0, 0, n)]
        ack(sp, "a", 0, 0, RELEASE)
    assert sp.acquire("a", 1, 1) == []
    assert dead == [(0, 3, "exhausted")]
    assert sp.start_offset == 1


def test_reject_archives_and_reports_rejected_gap_does_not():
    sp, _, _, dead = make()
    sp.acquire("a", 2, 2)
    ack(sp, "a", 0, 1, REJECT, GAP)
    assert dead == [(0, 1, "rejected")]
    assert sp.start_offset == 2


def test_ack_errors_are_kafkas():
    sp, _, _, _ = make()
    sp.acquire("a", 5, 3)  # 0..2 acquired by a, window end 3
    with pytest.raises(InvalidRecordState, match="^Member is not the owner of offset$"):
        ack(sp, "b", 0, 0, ACCEPT)
    with pytest.raises(InvalidShareRequest, match="first offset in request is past acquired records"):
        ack(sp, "a", 3, 4, ACCEPT)
    with pytest.raises(InvalidShareRequest, match="last offset in request is past acquired records"):
        ack(sp, "a", 2, 4, ACCEPT)
    with pytest.raises(InvalidShareRequest, match="Invalid acknowledge type: 5"):
        ack(sp, "a", 0, 0, 5)
    with pytest.raises(InvalidShareRequest):
        ack(sp, "a", 0, 2, ACCEPT, ACCEPT)  # two types for three offsets
    ack(sp, "a", 0, 0, ACCEPT)
    ack(sp, "a", 2, 2, RELEASE)
    with pytest.raises(InvalidRecordState, match="not found in the cache"):
        ack(sp, "a", 0, 0, ACCEPT)  # below SPSO, nothing there
    with pytest.raises(InvalidRecordState, match="^The batch cannot be acknowledged. The offset is not acquired.$"):
        ack(sp, "a", 2, 2, ACCEPT)  # released: available, not acquired


def test_an_ack_request_applies_all_or_nothing():
    sp, _, updates, _ = make()
    sp.acquire("a", 4, 4)
    before = len(updates)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", [AckBatch(0, 1, (ACCEPT,)), AckBatch(1, 1, (ACCEPT,))])  # 1 twice
    assert len(updates) == before
    assert sp.record(0).state == RecordState.ACQUIRED and sp.start_offset == 0


def test_a_failed_persist_undoes_the_change():
    sp, _, _, _ = make()
    sp.acquire("a", 4, 4)

    def broken(update):
        raise OSError("disk full")

    sp._persist = broken
    with pytest.raises(OSError):
        ack(sp, "a", 0, 3, ACCEPT)
    assert sp.start_offset == 0 and all(sp.record(o).state == RecordState.ACQUIRED for o in range(4))


def test_lock_expiry_makes_records_available_keeping_the_delivery_count():
    sp, clock, _, _ = make(record_lock_duration_ms=1000)
    sp.acquire("a", 2, 2)
    clock.advance(999)
    assert sp.acquire("b", 2, 2) == []
    clock.advance(1)
    assert sp.acquire("b", 2, 2) == [AcquiredRange(0, 1, 2)]
    with pytest.raises(InvalidRecordState):
        ack(sp, "a", 0, 0, ACCEPT)


def test_member_leave_releases_only_its_records_at_once():
    sp, _, _, _ = make(redelivery_backoff="levels")
    sp.acquire("a", 2, 1)
    sp.acquire("b", 2, 1)
    assert sp.release_member("a") == 1
    assert sp.acquire("c", 2, 5) == [AcquiredRange(0, 0, 2)]
    assert sp.record(1).member_id == "b"


def test_read_committed_stops_at_the_lso_and_never_delivers_aborted_or_control_records():
    sp, _, updates, _ = make(isolation_level="read_committed")
    got = sp.acquire("a", 10, 100, last_stable_offset=8, aborted=[(2, 3)], control=[(4, 4)])
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(5, 7, 1)]
    assert updates[-1].batches and all(b.state == RecordState.ARCHIVED for b in updates[-1].batches)
    ack(sp, "a", 0, 1, RELEASE)
    assert sp.acquire("a", 10, 100, last_stable_offset=8) == [AcquiredRange(0, 1, 2)]


def test_read_uncommitted_delivers_aborted_records_but_skips_control_records():
    sp, _, _, _ = make()
    got = sp.acquire("a", 6, 100, last_stable_offset=2, aborted=[(2, 3)], control=[(4, 4)])
    assert got == [AcquiredRange(0, 3, 1), AcquiredRange(5, 5, 1)]


def test_batch_optimized_acquisition_runs_to_the_batch_end_past_control_records_too():
    """Kafka's soft MaxRecords: new records to the end of the batch holding the last one
    counted, with control records archived unseen on the way; strict without batch ends."""
    sp, _, _, _ = make()
    # batches [0, 4), [4, 5) (a control batch), [5, 12)
    got = sp.acquire("a", 12, 2, control=[(4, 4)], batch_ends=[4, 5, 12])
    assert got == [AcquiredRange(0, 3, 1)], "2 asked, the batch holding them taken whole"
    got = sp.acquire("b", 12, 2, control=[(4, 4)], batch_ends=[4, 5, 12])
    assert got == [AcquiredRange(5, 11, 1)] and sp.record(4).state == RecordState.ARCHIVED
    sp2, _, _, _ = make()
    assert sp2.acquire("a", 12, 2, control=[(4, 4)]) == [AcquiredRange(0, 1, 1)], "record_limit: strict"
    ack(sp, "a", 0, 3, RELEASE)  # four available records in the window's first batch
    assert sp.acquire("c", 12, 1, batch_ends=[4, 5, 12]) == [AcquiredRange(0, 3, 2)], \
        "one asked, every available record of its batch taken (Kafka's acquireSubsetBatchRecords)"
    sp3, _, _, _ = make(max_record_locks=100)
    assert sp3.acquire("a", 500, 10, batch_ends=[300, 500]) == [AcquiredRange(0, 299, 1)], \
        "past the window's bound (100) to the batch's end"
    assert sp3.acquire("b", 500, 10, batch_ends=[300, 500]) == [], "then the window is full"


def test_accepting_a_batch_a_part_at_a_time_keeps_it_in_runs_and_persists_the_same_state():
    """A consumer acknowledging a batch of 1,000 a poll at a time: each accepted range is cut
    off as a run (no entry per record), SPSO passes the accepted prefix, the state written
    names the ranges, and the lock of the rest still expires."""
    sp, clock, updates, _ = make(record_lock_duration_ms=1000)
    assert sp.acquire("a", 1000, 1000, batch_ends=[1000]) == [AcquiredRange(0, 999, 1)]
    ack(sp, "a", 0, 499, ACCEPT)
    assert sp.start_offset == 500 and updates[-1] == StateUpdate(500, (StateBatch(0, 499, RecordState.ACKNOWLEDGED, 1),))
    ack(sp, "a", 700, 799, ACCEPT)
    assert sp.start_offset == 500 and sp.record(750).state == RecordState.ACKNOWLEDGED
    assert updates[-1] == StateUpdate(500, (StateBatch(700, 799, RecordState.ACKNOWLEDGED, 1),))
    assert not sp._records, "no entry per record: runs only"
    with pytest.raises(InvalidRecordState):
        ack(sp, "a", 790, 810, ACCEPT)  # 790-799 are done: all or nothing, as Kafka
    assert sp.record(805).state == RecordState.ACQUIRED
    ack(sp, "a", 500, 509, RELEASE)  # a release looks at its records one by one
    assert sp.acquire("b", 1000, 5) == [AcquiredRange(500, 504, 2)]
    clock.advance(1000)
    assert sp.expire_locks() == 390 + 5, "a's 390 left, split or not, and b's 5 (locked the same ms) expire"
    assert sp.record(999).state == RecordState.AVAILABLE and sp.record(799).state == RecordState.ACKNOWLEDGED
    restored = SharePartition(ShareGroupSettings(), clock, sp.start_offset, restored=sp.snapshot().batches)
    assert restored.record(750).state == RecordState.ACKNOWLEDGED and restored.record(820).state == RecordState.AVAILABLE


def test_retention_moves_spso_past_removed_records():
    sp, _, _, _ = make()
    sp.acquire("a", 10, 5)
    sp.advance_log_start(3)
    assert sp.start_offset == 3
    assert sp.acquire("b", 10, 100) == [AcquiredRange(5, 9, 1)]
    ack(sp, "a", 3, 4, ACCEPT)
    assert sp.start_offset == 5


# -- RocketMQ: rmq.redelivery.backoff=levels, rmq.max.reconsume.times --------------------------
LEVELS = (1000, 5000, 10_000, 30_000, 60_000)


def test_backoff_follows_rocketmqs_levels_from_level_3():
    sp, clock, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, max_reconsume_times=16)
    expected = [10_000, 30_000, 60_000, 60_000]  # level 3, 4, 5, then the last level
    for attempt, delay in enumerate(expected, start=1):
        assert sp.acquire("a", 1, 1) == [AcquiredRange(0, 0, attempt)]
        ack(sp, "a", 0, 0, RELEASE)
        clock.advance(delay - 1)
        assert sp.acquire("a", 1, 1) == []
        clock.advance(1)
    assert sp.acquire("a", 1, 1) == [AcquiredRange(0, 0, 5)]


def test_expired_lock_waits_out_the_backoff_too():
    sp, clock, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, record_lock_duration_ms=1000)
    sp.acquire("a", 1, 1)
    clock.advance(1000)
    assert sp.acquire("a", 1, 1) == []
    clock.advance(10_000)
    assert sp.acquire("a", 1, 1) == [AcquiredRange(0, 0, 2)]


def test_max_reconsume_times_is_the_retry_limit():
    sp, clock, _, dead = make(redelivery_backoff="levels", delay_levels_ms=(1, 1, 1), max_reconsume_times=16)
    for n in range(1, 18):
        assert sp.acquire("a", 1, 1) == [AcquiredRange(0, 0, n)]
        ack(sp, "a", 0, 0, RELEASE)
        clock.advance(1)
    assert dead == [(0, 17, "exhausted")]
    assert ShareGroupSettings(max_reconsume_times=16).delivery_limit == 17


def test_max_reconsume_times_zero_dead_letters_on_the_first_failure():
    sp, _, _, dead = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, max_reconsume_times=0)
    assert sp.acquire("a", 2, 2) == [AcquiredRange(0, 1, 1)]
    ack(sp, "a", 0, 1, RELEASE, ACCEPT)
    assert dead == [(0, 1, "exhausted")] and sp.start_offset == 2
    assert sp.acquire("a", 2, 2) == []


def test_waiting_records_leave_the_window_and_later_records_flow():
    sp, clock, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, max_record_locks=100)
    sp.acquire("a", 1000, 10)
    ack(sp, "a", 0, 9, RELEASE, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT, ACCEPT)
    assert sp.start_offset == 10 and sp.retry_count() == 1
    assert sp.acquire("a", 1000, 500) == [AcquiredRange(10, 109, 1)]
    clock.advance(10_000)
    ack(sp, "a", 10, 109, ACCEPT)
    assert sp.acquire("a", 1000, 3) == [AcquiredRange(0, 0, 2), AcquiredRange(110, 111, 1)]
    ack(sp, "a", 0, 0, ACCEPT)
    assert sp.retry_count() == 0 and sp.record(0) is None


def test_a_full_retry_schedule_keeps_waiting_records_in_the_window():
    sp, _, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, max_retry_records=2)
    sp.acquire("a", 10, 4)
    ack(sp, "a", 0, 3, RELEASE)
    assert sp.retry_count() == 2 and sp.start_offset == 2
    assert sp.record(2).state == RecordState.AVAILABLE and sp.record(2).due_ms > 0


def test_poison_record_among_100000_good_ones_keeps_memory_bounded():
    sp, clock, _, dead = make(redelivery_backoff="levels", delay_levels_ms=(1000, 1000, 1000), max_reconsume_times=16)
    total, accepted, poison_deliveries, peak = 100_001, 0, 0, 0
    while accepted < total - 1 or not dead:
        for r in sp.acquire("a", total, 500):
            for offset in range(r.first_offset, r.last_offset + 1):
                if offset == 0:
                    poison_deliveries += 1
                    ack(sp, "a", 0, 0, RELEASE)
                else:
                    ack(sp, "a", offset, offset, ACCEPT)
                    accepted += 1
        peak = max(peak, len(sp._records), (sp._locked + len(sp._retries)) // 2)
        clock.advance(100)
    assert accepted == total - 1 and poison_deliveries == 17 and dead == [(0, 17, "exhausted")]
    assert sp.start_offset == total
    assert peak <= sp.settings.max_record_locks + 64


# -- configs and the first SPSO ----------------------------------------------------------------------
def test_config_ranges_and_messages_are_kafkas():
    with pytest.raises(InvalidShareConfig, match=r"Invalid value 1 for configuration share.delivery.count.limit: "
                                                 r"Value must be in the range \[2, 10\]"):
        ShareGroupSettings(delivery_count_limit=1)
    with pytest.raises(InvalidShareConfig):
        ShareGroupSettings(record_lock_duration_ms=999)
    with pytest.raises(InvalidShareConfig):
        ShareGroupSettings(isolation_level="read_dirty")
    assert ShareGroupSettings().delivery_limit == 5


def test_auto_offset_reset():
    assert parse_iso_duration_ms("PT1H30M") == 5_400_000
    assert parse_iso_duration_ms("P1DT0.5S") == 86_400_500
    for bad in ("1H", "PT", "P", "by", "P" + "9" * 5000 + "D", "P999999999999999999D"):
        with pytest.raises(InvalidShareConfig):
            parse_iso_duration_ms(bad)
    with pytest.raises(InvalidShareConfig):
        AutoOffsetReset.parse("by_duration:-PT1S")
    with pytest.raises(InvalidShareConfig):
        AutoOffsetReset.parse("none")
    lookups = []

    def offset_for(ts):
        lookups.append(ts)
        return 42

    def start(text):
        return initial_start_offset(ShareGroupSettings(auto_offset_reset=AutoOffsetReset.parse(text)), 10, 100,
                                    offset_for, 1_000_000)

    assert start("latest") == 100 and start("earliest") == 10
    assert start("by_duration:PT10S") == 42 and lookups == [990_000]
    assert initial_start_offset(ShareGroupSettings(auto_offset_reset=AutoOffsetReset.parse("by_duration:PT1S")),
                                10, 100, lambda ts: None, 0) == 100


def test_a_record_acquired_three_times_in_one_ms_expires_once():
    sp, clock, _, dead = make(record_lock_duration_ms=1000, delivery_count_limit=3)
    for _ in range(2):
        sp.acquire("a", 1, 1)
        sp.release_member("a")
    sp.acquire("a", 1, 1)
    clock.advance(1000)
    assert sp.expire_locks() == 1
    assert dead == [(0, 3, "exhausted")]


def test_an_ack_range_from_offset_zero_costs_only_the_window():
    sp, _, _, _ = make(start=10**12)
    sp.acquire("a", 10**12 + 3, 3)
    ack(sp, "a", 0, 10**12 + 2, ACCEPT)  # the offsets below SPSO are done: skipped, not walked
    assert sp.start_offset == 10**12 + 3
    with pytest.raises(InvalidRecordState, match="not found in the cache"):
        ack(sp, "a", 0, 10**12, ACCEPT)


def test_next_wakeup_is_the_next_lock_expiry_or_due_retry():
    sp, clock, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, record_lock_duration_ms=5000)
    assert sp.next_wakeup_ms() is None
    sp.acquire("a", 2, 2)
    t0 = clock.now_ms()
    assert sp.next_wakeup_ms() == t0 + 5000
    ack(sp, "a", 0, 1, RELEASE, ACCEPT)
    assert sp.next_wakeup_ms() == t0 + 10_000


def test_a_normal_session_close_does_not_count_the_undelivered_records():
    sp, _, _, _ = make()
    sp.acquire("a", 2, 2)
    ack(sp, "a", 0, 0, RELEASE)
    assert sp.acquire("a", 2, 2) == [AcquiredRange(0, 0, 2)]
    assert sp.release_member("a", undelivered=True) == 2
    assert sp.acquire("b", 2, 2) == [AcquiredRange(0, 0, 2), AcquiredRange(1, 1, 1)]  # 2 again, not 3


# -- read-only figures (broker_state, the console, /metrics) ------------------------------------


def test_counts_by_state_over_the_window():
    sp, clock, _, _ = make(redelivery_backoff="levels", delay_levels_ms=LEVELS, max_reconsume_times=16)
    sp.acquire("a", 10, 10)
    ack(sp, "a", 1, 4, ACCEPT, REJECT, RELEASE, GAP)
    counts = sp.counts()
    # 0 acquired, 1 accepted, 2 rejected, 3 released (backoff), 4 gap, 5-9 acquired
    assert (counts.in_flight, counts.acquired, counts.acknowledged, counts.archived) == (10, 6, 1, 2)
    assert (counts.available, counts.waiting) == (1, 1)
    assert sp.dead_letters == 1
    ack(sp, "a", 0, 0, ACCEPT)
    after = sp.counts()
    # SPSO moved past 0-4: 3, waiting out its backoff, into the retry schedule
    assert (after.in_flight, after.acknowledged, after.archived, after.retrying) == (5, 0, 0, 1)
    clock.advance(3_600_000)  # past every backoff level (the locks expired too)
    assert sp.counts().waiting == 0


RENEW = 4


def test_renew_restarts_the_lock_keeping_state_and_count_and_persists_nothing():
    # KIP-1222 (Kafka's SharePartition, KAFKA-19843): the lock is cancelled and started
    # again for the record lock duration; the record stays acquired by its member
    sp, clock, updates, _ = make(record_lock_duration_ms=1000)
    assert sp.acquire("a", 4, 4) == [AcquiredRange(0, 3, 1)]
    clock.advance(900)
    before = len(updates)
    ack(sp, "a", 0, 1, RENEW)
    assert len(updates) == before, "a renewal writes no state"
    clock.advance(100)  # the first lock's end: only 2 and 3 expire
    assert sp.expire_locks() == 2
    assert [sp.record(o).state for o in range(4)] == [RecordState.ACQUIRED] * 2 + [RecordState.AVAILABLE] * 2
    assert sp.record(0).delivery_count == 1 and sp.record(0).member_id == "a"
    assert sp.next_wakeup_ms() == clock.now_ms() + 900  # renewed at 900: 1000 ms from there
    clock.advance(899)
    assert sp.expire_locks() == 0
    ack(sp, "a", 0, 0, ACCEPT)  # still the member's: it may accept it after the renewal
    clock.advance(1)
    assert sp.expire_locks() == 1  # 1, renewed once, expires at the renewed deadline
    assert sp.acquire("b", 4, 10) == [AcquiredRange(1, 3, 2)]


def test_renew_mixed_with_other_types_and_its_refusals():
    sp, clock, updates, _ = make(record_lock_duration_ms=1000)
    sp.acquire("a", 3, 3)
    sp.acknowledge("a", [AckBatch(0, 2, (RENEW, ACCEPT, RELEASE))])
    assert [sp.record(o).state for o in range(3)] == [RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
                                                      RecordState.AVAILABLE]
    with pytest.raises(InvalidRecordState):  # another member's record
        ack(sp, "b", 0, 0, RENEW)
    with pytest.raises(InvalidRecordState):  # not acquired
        ack(sp, "a", 2, 2, RENEW)
    # a failed write of the other types renews nothing either (all or none)
    sp._persist = lambda update: (_ for _ in ()).throw(OSError("disk full"))
    deadline = sp.record(0).deadline_ms
    sp.acquire("a", 3, 3)
    clock.advance(10)
    with pytest.raises(OSError):
        sp.acknowledge("a", [AckBatch(0, 0, (RENEW,)), AckBatch(2, 2, (ACCEPT,))])
    assert sp.record(0).deadline_ms == deadline


def test_renew_disabled_by_the_group_config_is_invalid_record_state():
    sp, _, _, _ = make(renew_acknowledge_enable=False)
    sp.acquire("a", 2, 2)
    with pytest.raises(InvalidRecordState, match="renew"):
        sp.acknowledge("a", [AckBatch(0, 0, (RENEW,)), AckBatch(1, 1, (ACCEPT,))])
    assert sp.record(1).state == RecordState.ACQUIRED, "the whole request is refused"


def test_a_batch_is_one_entry_until_an_acknowledgement_splits_it():
    # Kafka's InFlightBatch: acquiring 500 new records, accepting them whole, and SPSO moving
    # over them keep no entry per record; a release of one record splits its batch
    sp, _, updates, _ = make()
    assert sp.acquire("a", 2000, 500) == [AcquiredRange(0, 499, 1)]
    assert sp.acquire("b", 2000, 500) == [AcquiredRange(500, 999, 1)]
    assert len(sp._records) == 0 and len(sp._runs) == 2 and sp._locked == 1000
    ack(sp, "b", 500, 999, ACCEPT)  # out of order: SPSO stays, b's batch is one accepted entry
    assert updates[-1] == StateUpdate(0, (StateBatch(500, 999, RecordState.ACKNOWLEDGED, 1),))
    assert sp.start_offset == 0 and len(sp._records) == 0
    ack(sp, "a", 0, 499, ACCEPT)
    assert updates[-1] == StateUpdate(1000, (StateBatch(0, 999, RecordState.ACKNOWLEDGED, 1),))
    assert sp.start_offset == 1000 and not sp._records and not sp._runs
    assert sp.acquire("a", 2000, 500) == [AcquiredRange(1000, 1499, 1)]
    ack(sp, "a", 1200, 1200, RELEASE)  # part of a batch: that part one by one, the rest stays runs
    assert list(sp._records) == [1200] and sorted(sp._runs) == [1000, 1201]
    assert sp.record(1200).state == RecordState.AVAILABLE and sp.record(1201).state == RecordState.ACQUIRED
    assert sp.acquire("b", 2000, 1) == [AcquiredRange(1200, 1200, 2)]


def test_accepting_the_records_between_released_ones_keeps_them_runs():
    # a consumer releasing every 10th record acknowledges the 9 between as one batch each
    # (ShareFetch's ack batches, joined): each becomes one accepted run, not 9 entries, so
    # only the released records are held one by one, written and passed by SPSO per record
    sp, _, updates, _ = make()
    assert sp.acquire("a", 2000, 500) == [AcquiredRange(0, 499, 1)]
    batches = [b for first in range(0, 500, 10)
               for b in (AckBatch(first, first, (RELEASE,)), AckBatch(first + 1, first + 9, (ACCEPT,)))]
    sp.acknowledge("a", batches)
    assert sorted(sp._records) == list(range(0, 500, 10))
    assert len(sp._runs) == 50 and all(r.state == RecordState.ACKNOWLEDGED for r in sp._runs.values())
    assert updates[-1].batches[:2] == (StateBatch(0, 0, RecordState.AVAILABLE, 1),
                                       StateBatch(1, 9, RecordState.ACKNOWLEDGED, 1))
    assert sp.acquire("b", 500, 500) == [AcquiredRange(o, o, 2) for o in range(0, 500, 10)]
    sp.acknowledge("b", [AckBatch(o, o, (ACCEPT,)) for o in range(0, 500, 10)])  # SPSO passes the runs between
    assert sp.start_offset == 500 and not sp._records and not sp._runs
    # a part accepted in a request that fails to be written is acquired again, the rest too
    sp.acquire("a", 2000, 100)
    sp._persist = lambda update: (_ for _ in ()).throw(OSError("disk full"))
    with pytest.raises(OSError):
        sp.acknowledge("a", [AckBatch(500, 500, (RELEASE,)), AckBatch(501, 509, (ACCEPT,))])
    assert {sp.record(o).state for o in range(500, 600)} == {RecordState.ACQUIRED}
    sp._persist = updates.append
    ack(sp, "a", 520, 529, ACCEPT)
    ack(sp, "a", 500, 519, ACCEPT)
    assert sp.start_offset == 530


def test_the_parts_of_a_split_batch_expire_with_its_lock():
    sp, clock, _, _ = make(record_lock_duration_ms=1000)
    sp.acquire("a", 100, 100)
    ack(sp, "a", 10, 19, ACCEPT)
    clock.advance(10)
    ack(sp, "a", 50, 50, 4)  # renewed: 50 keeps its lock 10 ms longer
    sp.acknowledge("a", [AckBatch(60, 61, (RELEASE, ACCEPT))])
    clock.advance(990)
    assert sp.expire_locks() == 100 - 10 - 1 - 2  # all but the accepted, the renewed, 60 and 61
    assert sp.record(50).state == RecordState.ACQUIRED
    assert sp.acquire("b", 100, 200) == [AcquiredRange(0, 9, 2), AcquiredRange(20, 49, 2),
                                         AcquiredRange(51, 60, 2), AcquiredRange(62, 99, 2)]


def test_a_batch_accepted_out_of_order_is_durable():
    # the accepted batch lies above SPSO: only its written state keeps it from a second delivery
    sp, clock, updates, _ = make()
    sp.acquire("a", 20, 10)
    sp.acquire("b", 20, 10)
    ack(sp, "b", 10, 19, ACCEPT)
    from rmqkafka.rmqsemantics.share.state_log import ReplayedState

    replayed = ReplayedState(0)
    for update in updates:
        replayed.apply(update)
    restored = replayed.as_update()
    again = SharePartition(ShareGroupSettings(), clock, restored.start_offset, restored=restored.batches)
    assert again.acquire("c", 20, 100) == [AcquiredRange(0, 9, 1)]
    assert again.record(15).state == RecordState.ACKNOWLEDGED


def test_a_failed_write_undoes_a_whole_batch_accept_and_the_spso_move():
    sp, _, updates, _ = make()
    sp.acquire("a", 20, 10)
    sp.acquire("b", 20, 10)
    ack(sp, "b", 10, 19, ACCEPT)
    sp._persist = lambda update: (_ for _ in ()).throw(OSError("disk full"))
    with pytest.raises(OSError):
        ack(sp, "a", 0, 9, ACCEPT)
    assert sp.start_offset == 0 and sp.record(0).state == RecordState.ACQUIRED
    assert sp.record(10).state == RecordState.ACKNOWLEDGED
    sp._persist = updates.append
    ack(sp, "a", 0, 9, ACCEPT)
    assert sp.start_offset == 20 and not sp._runs
