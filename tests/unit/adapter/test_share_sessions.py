"""Share sessions (adapter.share.sessions): Kafka's ShareSessionCache rules."""

from __future__ import annotations

import uuid

import pytest

from rmqkafka.adapter.share.sessions import (
    MAX_EPOCH,
    InvalidSessionEpoch,
    InvalidSessionRequest,
    SessionLimitReached,
    SessionNotFound,
    ShareSessionCache,
    next_epoch,
)

T = uuid.UUID(int=7)
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def test_epoch_zero_opens_and_replaces_a_session():
    cache = ShareSessionCache(10)
    ctx = cache.fetch_context("g", "m", 0, [P0, P1], [], False)
    assert ctx.full and not ctx.final and ctx.partitions == (P0, P1)
    assert cache.get("g", "m").epoch == 1
    cache.fetch_context("g", "m", 1, [], [], False)
    again = cache.fetch_context("g", "m", 0, [P2], [], False)
    assert again.partitions == (P2,) and cache.get("g", "m").epoch == 1 and len(cache) == 1


def test_acknowledgements_on_epoch_zero_are_an_invalid_request():
    with pytest.raises(InvalidSessionRequest):
        ShareSessionCache(10).fetch_context("g", "m", 0, [P0], [], True)


def test_incremental_fetches_add_and_forget_partitions_and_move_the_epoch():
    cache = ShareSessionCache(10)
    cache.fetch_context("g", "m", 0, [P0], [], False)
    ctx = cache.fetch_context("g", "m", 1, [P1], [], True)
    assert not ctx.full and ctx.partitions == (P0, P1)
    ctx = cache.fetch_context("g", "m", 2, [], [P0], False)
    assert ctx.partitions == (P1,) and cache.get("g", "m").epoch == 3


def test_a_wrong_epoch_or_no_session_is_refused():
    cache = ShareSessionCache(10)
    with pytest.raises(SessionNotFound):
        cache.fetch_context("g", "m", 1, [], [], False)
    with pytest.raises(SessionNotFound):
        cache.fetch_context("g", "m", -1, [], [], False)
    cache.fetch_context("g", "m", 0, [P0], [], False)
    with pytest.raises(InvalidSessionEpoch):
        cache.fetch_context("g", "m", 2, [], [], False)
    assert cache.get("g", "m").epoch == 1, "a refused request does not move the epoch"
    with pytest.raises(SessionNotFound):
        cache.fetch_context("other", "m", 1, [], [], False)


def test_the_final_epoch_closes_after_its_acknowledgements():
    cache = ShareSessionCache(10)
    cache.fetch_context("g", "m", 0, [P0], [], False)
    ctx = cache.fetch_context("g", "m", -1, [P0], [], True)
    assert ctx.final and ctx.partitions == (P0,)
    assert cache.get("g", "m") is not None, "the handler closes it once the acknowledgements are applied"


def test_the_cache_is_bounded():
    cache = ShareSessionCache(2)
    cache.fetch_context("g", "a", 0, [P0], [], False)
    cache.fetch_context("g", "b", 0, [P0], [], False)
    with pytest.raises(SessionLimitReached):
        cache.fetch_context("g", "c", 0, [P0], [], False)
    cache.fetch_context("g", "a", 0, [P1], [], False)  # replacing needs no room
    assert cache.close("g", "b") and not cache.close("g", "b")
    cache.fetch_context("g", "c", 0, [P0], [], False)
    assert cache.drop_group("g") == 2 and len(cache) == 0


def test_share_acknowledge_epochs():
    cache = ShareSessionCache(10)
    with pytest.raises(InvalidSessionEpoch):
        cache.acknowledge_update("g", "m", 0)
    with pytest.raises(SessionNotFound):
        cache.acknowledge_update("g", "m", 1)
    with pytest.raises(SessionNotFound):
        cache.acknowledge_update("g", "m", -1)
    cache.fetch_context("g", "m", 0, [P0], [], False)
    with pytest.raises(InvalidSessionEpoch):
        cache.acknowledge_update("g", "m", 0)
    with pytest.raises(InvalidSessionEpoch):
        cache.acknowledge_update("g", "m", 4)
    assert cache.acknowledge_update("g", "m", 1) is False
    assert cache.get("g", "m").epoch == 2
    assert cache.acknowledge_update("g", "m", -1) is True


def test_epochs_wrap_to_one():
    assert next_epoch(MAX_EPOCH) == 1 and next_epoch(1) == 2
    cache = ShareSessionCache(1)
    cache.fetch_context("g", "m", 0, [], [], False)
    cache.get("g", "m").epoch = MAX_EPOCH
    cache.fetch_context("g", "m", MAX_EPOCH, [], [], False)
    assert cache.get("g", "m").epoch == 1


def test_a_session_holds_a_bounded_number_of_partitions():
    from rmqkafka.adapter.share.sessions import MAX_SESSION_PARTITIONS

    cache = ShareSessionCache(1)
    many = [(T, p) for p in range(MAX_SESSION_PARTITIONS + 1)]
    with pytest.raises(InvalidSessionRequest):
        cache.fetch_context("g", "m", 0, many, [], False)
    cache.fetch_context("g", "m", 0, many[:-1], [], False)
    with pytest.raises(InvalidSessionRequest):
        cache.fetch_context("g", "m", 1, many[-1:], [], False)
    assert cache.get("g", "m").epoch == 1 and len(cache.get("g", "m").partitions) == MAX_SESSION_PARTITIONS
    cache.fetch_context("g", "m", 1, many[-1:], many[:1], False)
    assert len(cache.get("g", "m").partitions) == MAX_SESSION_PARTITIONS

