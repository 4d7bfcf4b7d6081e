"""Incremental fetch sessions (adapter.fetch_sessions): Kafka's FetchSession.scala rules,
with an injected clock."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.fetch_sessions import (
    INVALID_SESSION_ID,
    MAX_EPOCH,
    Answered,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    next_epoch,
)
from rmqkafka.adapter.security.principal import Principal
from rmqkafka.storage.clock import ManualClock

ALICE = Principal("User", "alice")
BOB = Principal("User", "bob")


def req(partition: int, offset: int = 0, max_bytes: int = 1 << 20):
    return SimpleNamespace(partition=partition, fetch_offset=offset, log_start_offset=-1,
                           partition_max_bytes=max_bytes, current_leader_epoch=-1)


def entry(partition: int, hw: int = 0, log_start: int = 0, records=(), error=ErrorCode.none) -> dict:
    return dict(partition_index=partition, error_code=error, high_watermark=hw, last_stable_offset=hw,
                log_start_offset=log_start, aborted_transactions=None, preferred_read_replica=-1,
                records=records)


def answer(context, entries: dict[tuple, dict]) -> list[Answered]:
    """What the handler's read builds: one Answered per partition of the context, in order."""
    return [Answered(part, topic, entries.get((topic, part.partition), entry(part.partition)))
            for topic, part in context.partitions]


def open_session(cache, partitions=(("t", 0), ("t", 1)), principal=ALICE, version=12, hw=0):
    wanted = [(topic, req(p)) for topic, p in partitions]
    context = cache.new_context(version, 0, 0, principal, wanted, [])
    assert isinstance(context, FullFetchContext)
    error, session_id, chosen = context.commit(answer(context, {k: entry(k[1], hw) for k in partitions}))
    assert error == ErrorCode.none and len(chosen) == len(partitions)
    return session_id


def cache_of(slots=10, eviction_ms=1000, clock=None, max_partitions=10_000):
    clock = clock or ManualClock()
    return FetchSessionCache(slots, eviction_ms, clock.now_ms, max_partitions), clock


def test_next_epoch_wraps_like_kafkas():
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(-1) == -1


def test_an_initial_fetch_opens_a_session_at_epoch_one_with_a_random_id():
    cache, _ = cache_of()
    ids = {open_session(cache) for _ in range(5)}
    assert len(ids) == 5 and all(0 < i <= MAX_EPOCH for i in ids)
    assert all(cache.get(i).epoch == 1 for i in ids)
    assert [p.key for p in cache.get(ids.pop()).partitions.values()] == [("t", 0), ("t", 1)]


def test_a_final_fetch_is_sessionless_and_closes_the_session_it_names():
    cache, _ = cache_of()
    sid = open_session(cache)
    context = cache.new_context(12, sid, -1, ALICE, [("t", req(0))], [])
    assert type(context).__name__ == "FetchContext"
    assert context.commit(answer(context, {}))[1] == INVALID_SESSION_ID
    assert cache.get(sid) is None and len(cache) == 0


def test_an_initial_fetch_closes_the_session_it_names_and_opens_another():
    cache, _ = cache_of()
    sid = open_session(cache)
    context = cache.new_context(12, sid, 0, ALICE, [("t", req(0))], [])
    assert cache.get(sid) is None
    new = context.commit(answer(context, {}))[1]
    assert new not in (sid, 0) and len(cache) == 1


def test_an_unknown_id_and_a_wrong_epoch_are_session_errors_that_change_nothing():
    cache, _ = cache_of()
    sid = open_session(cache)
    unknown = cache.new_context(12, sid + 1 if sid < MAX_EPOCH else 1, 1, ALICE, [], [])
    assert isinstance(unknown, SessionErrorContext) and unknown.error == ErrorCode.fetch_session_id_not_found
    wrong = cache.new_context(12, sid, 2, ALICE, [], [])
    assert wrong.error == ErrorCode.invalid_fetch_session_epoch
    assert wrong.commit([]) == (ErrorCode.invalid_fetch_session_epoch, 0, [])
    assert cache.get(sid).epoch == 1


def test_a_session_uses_topic_ids_or_names_as_the_version_that_opened_it():
    cache, _ = cache_of()
    tid = uuid.uuid4()
    sid = open_session(cache, ((tid, 0),), version=13)
    assert cache.new_context(12, sid, 1, ALICE, [], []).error == ErrorCode.fetch_session_topic_id_error
    assert isinstance(cache.new_context(13, sid, 1, ALICE, [], []), IncrementalFetchContext)


def test_another_principal_cannot_use_or_close_a_session():
    cache, _ = cache_of()
    sid = open_session(cache)
    assert cache.new_context(12, sid, 1, BOB, [], []).error == ErrorCode.fetch_session_id_not_found
    cache.new_context(12, sid, 0, BOB, [], [])  # a full fetch naming it does not close it
    cache.new_context(12, sid, -1, BOB, [], [])
    assert cache.get(sid).epoch == 1
    assert isinstance(cache.new_context(12, sid, 1, ALICE, [], []), IncrementalFetchContext)


def test_epochs_advance_on_every_incremental_fetch_and_wrap():
    cache, _ = cache_of()
    sid = open_session(cache)
    for epoch in range(1, 5):
        assert isinstance(cache.new_context(12, sid, epoch, ALICE, [], []), IncrementalFetchContext)
    assert cache.get(sid).epoch == 5
    cache.get(sid).epoch = MAX_EPOCH
    cache.new_context(12, sid, MAX_EPOCH, ALICE, [], [])
    assert cache.get(sid).epoch == 1


def test_incremental_requests_add_update_and_forget_partitions():
    cache, _ = cache_of()
    sid = open_session(cache)
    context = cache.new_context(12, sid, 1, ALICE, [("t", req(1, offset=7, max_bytes=99)), ("u", req(0))],
                                [("t", 0)])
    parts = cache.get(sid).partitions
    assert list(parts) == [("t", 1), ("u", 0)]
    assert (parts[("t", 1)].fetch_offset, parts[("t", 1)].partition_max_bytes) == (7, 99)
    assert [p.key for _, p in context.partitions] == [("t", 1), ("u", 0)]


def test_forgetting_every_partition_closes_the_session_and_answers_sessionless():
    cache, _ = cache_of()
    sid = open_session(cache)
    context = cache.new_context(12, sid, 1, ALICE, [], [("t", 0), ("t", 1)])
    assert type(context).__name__ == "FetchContext" and cache.get(sid) is None


def test_only_partitions_with_news_are_answered_and_records_move_to_the_end():
    cache, _ = cache_of()
    sid = open_session(cache, (("t", 0), ("t", 1), ("t", 2), ("t", 3)), hw=5)
    context = cache.new_context(12, sid, 1, ALICE, [], [])
    news = {("t", 0): entry(0, 6, records=[b"batch"]),  # records
            ("t", 1): entry(1, 5),  # nothing new
            ("t", 2): entry(2, 5, log_start=3),  # the log start moved
            ("t", 3): entry(3, -1, error=ErrorCode.unknown_topic_or_partition)}
    answered = answer(context, news)
    assert [a.part.partition for a in context.select(answered)] == [0, 2, 3]
    assert cache.get(sid).partitions[("t", 0)].high_watermark == 5, "select changes nothing"
    error, session_id, chosen = context.commit(answered)
    assert (error, session_id, [a.part.partition for a in chosen]) == (ErrorCode.none, sid, [0, 2, 3])
    parts = cache.get(sid).partitions
    assert list(parts) == [("t", 1), ("t", 2), ("t", 3), ("t", 0)], "only a partition with records moves"
    assert parts[("t", 0)].high_watermark == 6 and parts[("t", 2)].local_log_start_offset == 3
    # the same answer again: only the error is news (its cached high watermark is -1 now,
    # so the partition is answered again once the error is gone)
    context = cache.new_context(12, sid, 2, ALICE, [], [])
    same = {**news, ("t", 0): entry(0, 6)}
    assert [a.part.partition for a in context.commit(answer(context, same))[2]] == [3]
    context = cache.new_context(12, sid, 3, ALICE, [], [])
    assert [a.part.partition for a in context.commit(answer(context, {**same, ("t", 3): entry(3, 5)}))[2]] == [3]


def test_the_last_stable_offset_alone_is_not_news_as_in_kafka():
    cache, _ = cache_of()
    sid = open_session(cache, (("t", 0),), hw=5)
    context = cache.new_context(12, sid, 1, ALICE, [], [])
    moved = entry(0, 5)
    moved["last_stable_offset"] = 4
    assert context.commit(answer(context, {("t", 0): moved}))[2] == []


def test_a_throttled_answer_and_a_stale_epoch_leave_the_session_as_it_was():
    cache, _ = cache_of()
    sid = open_session(cache, (("t", 0),), hw=5)
    context = cache.new_context(12, sid, 1, ALICE, [], [])
    assert context.throttled() == (ErrorCode.none, sid)
    assert cache.get(sid).partitions[("t", 0)].high_watermark == 5
    # a second request moved the session on while the first waited
    cache.new_context(12, sid, 2, ALICE, [], [])
    assert context.throttled() == (ErrorCode.invalid_fetch_session_epoch, sid)
    assert context.commit(answer(context, {("t", 0): entry(0, 9)})) == (ErrorCode.invalid_fetch_session_epoch, sid, [])
    full = cache.new_context(12, 0, 0, ALICE, [("t", req(0))], [])
    assert full.throttled() == (ErrorCode.none, 0) and len(cache) == 1, "a throttled full fetch opens nothing"


def test_no_slots_or_too_many_partitions_open_no_session():
    cache, _ = cache_of(slots=0)
    assert open_session(cache) == INVALID_SESSION_ID
    cache, _ = cache_of(max_partitions=1)
    assert open_session(cache) == INVALID_SESSION_ID
    sid = open_session(cache, (("t", 0),))
    assert cache.new_context(12, sid, 1, ALICE, [("t", req(1))], []).error == ErrorCode.fetch_session_id_not_found
    assert cache.get(sid) is None, "a session grown past the limit is closed"


def test_a_full_cache_evicts_the_least_recently_used_session_once_it_is_stale():
    cache, clock = cache_of(slots=2, eviction_ms=1000)
    first = open_session(cache)
    clock.advance(10)
    second = open_session(cache)
    clock.advance(10)
    cache.new_context(12, first, 1, ALICE, [], [])  # first is used again: second is now the oldest
    assert open_session(cache) == INVALID_SESSION_ID and cache.evictions == 0
    clock.advance(1000)  # second was last used 1010 ms ago, first 1000 ms ago: not > 1000
    third = open_session(cache)
    assert third != 0 and cache.get(second) is None and cache.get(first) is not None
    assert cache.evictions == 1


def test_a_bigger_session_evicts_the_smallest_one_created_long_enough_ago():
    cache, clock = cache_of(slots=2, eviction_ms=1000)
    small = open_session(cache, (("t", 0),))
    big = open_session(cache, (("t", 0), ("t", 1), ("t", 2)))
    clock.advance(600)
    # created 600 ms ago: not evictable yet, even by a bigger session
    assert open_session(cache, [("t", p) for p in range(5)]) == INVALID_SESSION_ID
    clock.advance(500)
    # both touched now, 1100 ms after creation: evictable, the smallest first
    cache.new_context(12, small, 1, ALICE, [], [])
    cache.new_context(12, big, 1, ALICE, [], [])
    assert open_session(cache, (("t", 0),)) == INVALID_SESSION_ID, "not bigger than the smallest"
    newcomer = open_session(cache, (("t", 0), ("t", 1)))
    assert newcomer != 0 and cache.get(small) is None and cache.get(big) is not None
    assert cache.evictions == 1


# -- a model: an incremental consumer sees what a sessionless one would -----------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=30))
def test_incremental_answers_bring_the_client_what_full_answers_would(appends):
    """A log of 4 partitions grows by ``appends`` (partition, count); a session client that
    keeps the last answer of each partition and fetches from its position sees the same
    records and high watermarks as a client answered in full every time."""
    cache, _ = cache_of()
    logs = {p: 0 for p in range(4)}  # partition -> high watermark (one record an offset)
    keys = [("t", p) for p in range(4)]
    position = {p: 0 for p in range(4)}
    known_hw = {p: 0 for p in range(4)}
    full_seen: list[tuple[int, int]] = []
    session_seen: list[tuple[int, int]] = []

    def read(part) -> dict:
        offsets = list(range(part.fetch_offset, logs[part.partition]))[:2]  # at most 2 a fetch
        return entry(part.partition, logs[part.partition], records=offsets)

    context = cache.new_context(12, 0, 0, ALICE, [(t, req(p)) for t, p in keys], [])
    sid = context.commit([Answered(part, t, read(part)) for t, part in context.partitions])[1]
    epoch = 1
    for partition, count in appends:
        logs[partition] += count
        # the model: every partition's records from the model's positions, in full
        for p in range(4):
            got = list(range(len([o for o in full_seen if o[0] == p]), logs[p]))[:2]
            full_seen.extend((p, o) for o in got)
        # the session client: lists partitions whose position changed (as clients do)
        changed = [(t, req(p, position[p])) for t, p in keys]
        context = cache.new_context(12, sid, epoch, ALICE, changed, [])
        epoch = next_epoch(epoch)
        _, _, chosen = context.commit([Answered(part, t, read(part)) for t, part in context.partitions])
        for a in chosen:
            p = a.part.partition
            known_hw[p] = a.entry["high_watermark"]
            session_seen.extend((p, o) for o in a.entry["records"])
            if a.entry["records"]:
                position[p] = a.entry["records"][-1] + 1
    assert sorted(session_seen) == sorted(full_seen)
    assert known_hw == logs


def test_the_partitions_of_all_sessions_together_are_bounded():
    """What one client can make the cache hold is bounded before it is paid: sessions of
    10,000 partitions each cost 2.4-4.8 MB (measured), and 1000 slots of them would be GBs.
    Past ``max_total_partitions`` a full fetch opens no session (answered in full, session id
    0, as KIP-227 allows) and an incremental one growing a session past it closes it
    (FETCH_SESSION_ID_NOT_FOUND: the client starts over)."""
    clock = ManualClock()
    cache = FetchSessionCache(10, 1000, clock.now_ms, 10_000, max_total_partitions=5)
    first = open_session(cache, partitions=[("t", p) for p in range(3)])
    assert first != INVALID_SESSION_ID and cache.total_partitions() == 3
    wanted = [("u", req(p)) for p in range(3)]
    context = cache.new_context(12, 0, 0, BOB, wanted, [])
    assert context.commit(answer(context, {}))[1] == INVALID_SESSION_ID
    assert len(cache) == 1
    context = cache.new_context(12, first, 1, ALICE, [("t", req(p)) for p in range(3, 6)], [])
    assert context.error == ErrorCode.fetch_session_id_not_found
    assert len(cache) == 0 and cache.total_partitions() == 0
    # a stale session makes room, as it makes room for a slot (Kafka's eviction rules)
    first = open_session(cache, partitions=[("t", p) for p in range(3)])
    clock.advance(2)
    context = cache.new_context(12, 0, 0, BOB, wanted, [])
    assert context.commit(answer(context, {}))[1] == INVALID_SESSION_ID
    clock.advance(1001)
    context = cache.new_context(12, 0, 0, BOB, wanted, [])
    assert context.commit(answer(context, {}))[1] != INVALID_SESSION_ID
    assert cache.get(first) is None and cache.total_partitions() == 3


def test_a_topic_name_no_topic_can_have_opens_or_grows_no_session():
    """A name longer than Kafka's longest topic name (249) names no topic: it is answered
    (UNKNOWN_TOPIC_OR_PARTITION) but not kept, so a session's names cost at most 249 bytes
    each, not the 32 KB a request may carry."""
    cache, _ = cache_of()
    long_name = "x" * 250
    context = cache.new_context(12, 0, 0, ALICE, [(long_name, req(0)), ("t", req(0))], [])
    error, session_id, chosen = context.commit(answer(context, {}))
    assert session_id == INVALID_SESSION_ID and len(chosen) == 2 and len(cache) == 0
    session_id = open_session(cache)
    context = cache.new_context(12, session_id, 1, ALICE, [(long_name, req(0))], [])
    assert context.error == ErrorCode.fetch_session_id_not_found and len(cache) == 0


def test_room_for_partitions_is_made_by_idle_sessions_only():
    """A session in use, however long ago it was created, is not pushed out to make room
    for partitions: only a slot is contested by Kafka's size rule."""
    clock = ManualClock()
    cache = FetchSessionCache(10, 1000, clock.now_ms, 10_000, max_total_partitions=4)
    small = [open_session(cache, partitions=[("t", p)]) for p in range(2)]
    clock.advance(1001)
    for session_id in small:  # in use, and created long enough ago to be evictable by size
        assert isinstance(cache.new_context(12, session_id, 1, ALICE, [], []), IncrementalFetchContext)
    wanted = [("u", req(p)) for p in range(3)]
    context = cache.new_context(12, 0, 0, BOB, wanted, [])
    assert context.commit(answer(context, {}))[1] == INVALID_SESSION_ID
    assert all(cache.get(session_id) is not None for session_id in small)
