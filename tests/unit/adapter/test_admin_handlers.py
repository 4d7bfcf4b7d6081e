"""Logic of the admin handlers that deserves more cases than a broker round trip affords:
the leader-epoch table, incremental config operations, DescribeTopicPartitions paging over
arbitrary topic layouts, and DescribeLogDirs partition sizes (exact and estimated).

Handlers run against a real MessageStore on tmp_path with a minimal context.
"""

from __future__ import annotations

import asyncio
import types

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from rmqkafka.adapter.codec import Request
from rmqkafka.adapter.config import AdapterConfig
from rmqkafka.adapter.handlers import describe_log_dirs, describe_topic_partitions
from rmqkafka.adapter.handlers.alter_configs import ALTERERS, ConfigRefused
from rmqkafka.adapter.handlers.incremental_alter_configs import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    apply_operations,
)
from rmqkafka.adapter.handlers.offset_for_leader_epoch import end_offset_for, fencing_error
from rmqkafka.adapter.topic_configs import InvalidConfig, validate_topic_configs
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore


def batch(count: int, value_size: int = 10) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i in range(count):
        builder.append(
            i, timestamp=1_700_000_000_000, key=None, value=b"v" * value_size, headers=[]
        )
    return bytes(builder.build())


@pytest.fixture
def store(tmp_path):
    s = MessageStore(StorageConfig(data_dir=tmp_path, consume_queue_entries_per_file=64))
    s.open()
    yield s
    s.close_sync()


def context(store: MessageStore):
    return types.SimpleNamespace(
        config=AdapterConfig(),
        storage_config=store.config,
        store=store,
        semantics=Semantics(SemanticsConfig(), store, store.config.data_dir),
        advertised_host="127.0.0.1",
        advertised_port=9092,
        allowed=lambda operation, resource_type, name: True,  # no authorizer, as by default
    )


# --- OffsetForLeaderEpoch -------------------------------------------------------------------


@pytest.mark.parametrize(
    "epoch, expected",
    [(0, (0, 50)), (-1, (-1, -1)), (1, (-1, -1)), (99, (-1, -1)), (-2, (-2, 7)), (-99, (-99, 7))],
)
def test_end_offset_for(epoch, expected):
    assert end_offset_for(epoch, log_start=7, log_end=50) == expected


@pytest.mark.parametrize(
    "current, code",
    [
        (-1, ErrorCode.none),
        (0, ErrorCode.none),
        (1, ErrorCode.unknown_leader_epoch),
        (-2, ErrorCode.fenced_leader_epoch),
    ],
)
def test_fencing_error(current, code):
    assert fencing_error(current) == code


# --- IncrementalAlterConfigs operations -------------------------------------------------------


def run_ops(store, current: dict[str, str], *items):
    resource = types.SimpleNamespace(
        resource_name="t",
        configs=[types.SimpleNamespace(name=n, config_operation=o, value=v) for n, o, v in items],
    )
    # the operations, then the topic's validation, as IncrementalAlterConfigs does before storing
    return validate_topic_configs(apply_operations(context(store), resource, current, ALTERERS[2]), "t")


def test_operations_apply_in_order(store):
    assert run_ops(
        store,
        {"retention.ms": "1"},
        ("retention.ms", SET, "2"),
        ("segment.bytes", SET, "1048576"),
        ("retention.ms", DELETE, None),
        ("never.set", DELETE, None),
    ) == {"segment.bytes": "1048576"}


def test_append_and_subtract_use_the_default_list(store):
    assert run_ops(store, {}, ("cleanup.policy", APPEND, "delete,delete")) == {
        "cleanup.policy": "delete"
    }
    # An empty list is a valid cleanup.policy in Kafka (ValidList.in accepts it).
    assert run_ops(store, {}, ("cleanup.policy", SUBTRACT, "delete")) == {"cleanup.policy": ""}
    assert run_ops(store, {}, ("cleanup.policy", APPEND, "compact")) == {
        "cleanup.policy": "delete,compact"
    }
    with pytest.raises(InvalidConfig, match="String must be one of: compact, delete"):
        run_ops(store, {}, ("cleanup.policy", APPEND, "shred"))
    # Subtracting what is not there leaves the list alone.
    assert run_ops(store, {}, ("cleanup.policy", SUBTRACT, "compact")) == {
        "cleanup.policy": "delete"
    }


@pytest.mark.parametrize("op", [APPEND, SUBTRACT])
def test_append_and_subtract_only_for_lists(store, op):
    with pytest.raises(InvalidConfig, match="not LIST"):
        run_ops(store, {}, ("retention.ms", op, "5"))
    with pytest.raises(InvalidConfig, match="not LIST"):
        run_ops(store, {}, ("no.such.config", op, "5"))


def test_bad_operations(store):
    with pytest.raises(ConfigRefused) as info:
        run_ops(store, {}, ("retention.ms", 4, "1"))
    assert info.value.code == ErrorCode.invalid_request
    with pytest.raises(ConfigRefused) as info:
        run_ops(store, {}, ("retention.ms", SET, None))
    assert info.value.code == ErrorCode.invalid_request
    with pytest.raises(InvalidConfig):
        run_ops(store, {}, ("no.such.config", SET, "1"))



def test_describing_every_partition_builds_none_and_lets_the_loop_run(store):
    """A cluster-wide describe costs what the partitions hold, not what was declared: before,
    it built a PartitionLog for each of them (kept for good: a topics.json of 100,000 unused
    partitions then held them all in memory), in one turn of the event loop."""
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

    store.create_topic("wide", 3 * describe_log_dirs.YIELD_EVERY, {})
    fill(store, "written", [5])
    ctx = context(store)  # the semantics layer builds its system topics' partitions
    built = len(store.partitions())
    turns = 0

    async def scenario():
        nonlocal turns
        done = asyncio.Event()

        async def other_client():
            nonlocal turns
            while not done.is_set():
                turns += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(other_client())
        await asyncio.sleep(0)
        try:
            return await describe_log_dirs.handle(ctx, Request(35, 4, 1, "test", DescribeLogDirsRequest(topics=None), True))
        finally:
            done.set()
            await ticker

    response = asyncio.run(scenario())
    assert len(store.partitions()) == built
    topics = {t.name: t.partitions for t in response.results[0].topics}
    assert len(topics["wide"]) == 3 * describe_log_dirs.YIELD_EVERY
    assert {p.partition_size for p in topics["wide"]} == {0}
    assert topics["written"][0].partition_size > 0
    assert turns >= 3  # the describe gave the loop up between slices of partitions

# --- DescribeTopicPartitions paging -----------------------------------------------------------


def describe(store, names, limit, cursor):
    body = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=n) for n in names),
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else Cursor(topic_name=cursor[0], partition_index=i32(cursor[1])),
    )
    request = Request(75, 0, 1, "test", body, True)
    return asyncio.run(describe_topic_partitions.handle(context(store), request))


layouts = st.dictionaries(
    st.text("abcde", min_size=1, max_size=3), st.integers(1, 6), min_size=0, max_size=6
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=layouts, data=st.data())
def test_paging_returns_every_partition_once(store, layout, data):
    for meta in store.topics.all():
        store.delete_topic(meta.name)
    for name, count in layout.items():
        store.create_topic(name, count, {})
    unknown = data.draw(st.lists(st.text("xyz", min_size=1, max_size=2), max_size=2, unique=True))
    named = data.draw(st.lists(st.sampled_from(sorted(layout)), unique=True)) if layout else []
    requested = named + unknown
    limit = data.draw(st.integers(-1, 8))
    expected_names = sorted(requested) if requested else sorted(layout)
    expected = [(n, p) for n in expected_names if n in layout for p in range(layout[n])]
    seen, errors, cursor = [], [], None
    for _ in range(100):
        response = describe(store, requested, limit, cursor)
        assert sum(len(t.partitions) for t in response.topics) <= max(limit, 1)
        for t in response.topics:
            if t.error_code == ErrorCode.none:
                seen += [(t.name, p.partition_index) for p in t.partitions]
            else:
                errors.append((t.name, t.error_code))
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    else:
        pytest.fail("paging did not end")
    assert seen == expected
    assert errors == [(n, ErrorCode.unknown_topic_or_partition) for n in sorted(unknown)]


# --- DescribeLogDirs sizes ----------------------------------------------------------------------


def fill(store, topic: str, counts: list[int], value_size=lambda i: 10) -> list[int]:
    store.create_topic(topic, 1, {})
    sizes = []
    for i, n in enumerate(counts):
        data = batch(n, value_size(i))
        store.append(topic, 0, data, max_batch_bytes=1 << 30)
        sizes.append(len(data))
    return sizes


def test_exact_size_counts_each_batch_once_across_queue_files(store):
    # 64 entries per consume-queue file: batches of 50 records straddle file boundaries.
    sizes = fill(store, "t", [50, 1, 50, 30, 100, 7])
    plog = store.partition("t", 0)
    ctx = context(store)
    assert describe_log_dirs.partition_size(ctx, plog) == sum(sizes)
    plog.advance_log_start(60)  # inside the 3rd batch (offsets 51..100): it counts whole
    assert describe_log_dirs.partition_size(ctx, plog) == sum(sizes[2:])
    plog.advance_log_start(plog.next_offset)
    assert describe_log_dirs.partition_size(ctx, plog) == 0


def test_estimated_size(store, monkeypatch):
    sizes = fill(store, "same", [10] * 40)
    uneven = fill(
        store, "uneven", [1, 5, 20, 3, 40, 2] * 10, value_size=lambda i: 5 + (i * 37) % 90
    )
    ctx = context(store)
    exact_same = describe_log_dirs.partition_size(ctx, store.partition("same", 0))
    exact_uneven = describe_log_dirs.partition_size(ctx, store.partition("uneven", 0))
    assert (exact_same, exact_uneven) == (sum(sizes), sum(uneven))
    monkeypatch.setattr(describe_log_dirs, "EXACT_LIMIT", 16)
    assert describe_log_dirs.partition_size(ctx, store.partition("same", 0)) == exact_same
    estimate = describe_log_dirs.partition_size(ctx, store.partition("uneven", 0))
    assert abs(estimate - exact_uneven) <= 0.1 * exact_uneven
