"""What the broker holds right now, read on demand: one place for /metrics and the console API.

Both the Prometheus collector (adapter.metrics) and the console's JSON API (adapter.console_api)
show the same offsets, lags and RocketMQ queues; reading them here keeps the two from
disagreeing. Everything is read at the moment it is asked for, on the event loop thread,
from the objects that own the state (store, group and transaction coordinators, scheduler):
nothing is copied or kept up to date on the hot paths.

Partitions a topic has but that were never used are not opened to be shown (the store builds
a PartitionLog on first use, and a topic may have thousands): they are empty, offsets 0.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass

from rmqkafka.rmqsemantics.scheduler import DLQ_PREFIX, RETRY_PREFIX
from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS
from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.partition_log import PartitionLog

from .context import BrokerContext

# Kafka transaction states in which a transaction is open (not yet completed or aborted).
OPEN_TXN_STATES = frozenset(("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"))


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    topic: str
    partition: int
    start: int  # log start offset (oldest)
    end: int  # next offset (high watermark)
    log: PartitionLog | None  # None: never used, empty


@dataclass(frozen=True, slots=True)
class GroupOffset:
    group: str
    topic: str  # a topic or a view
    partition: int
    committed: int
    end: int | None  # the partition's high watermark; None when the topic is gone
    lag: int | None


def topic_partitions(ctx: BrokerContext, include_system: bool = False) -> list[PartitionOffsets]:
    """Every partition of every topic, by topic name (views have none of their own)."""
    built = ctx.store.partitions()
    out = []
    for meta in sorted(ctx.store.topics.all(), key=lambda m: m.name):
        if meta.name in SYSTEM_TOPICS and not include_system:
            continue
        for p in range(meta.partitions):
            plog = built.get((meta.name, p))
            start, end = (plog.log_start_offset, plog.next_offset) if plog is not None else (0, 0)
            out.append(PartitionOffsets(meta.name, p, start, end, plog))
    return out


def high_watermark(ctx: BrokerContext, name: str, partition: int,
                   built: dict[tuple[str, int], PartitionLog] | None = None) -> int | None:
    """The end offset of a topic's or view's partition (a view's is its source's); None when
    there is no such partition any more. ``built``: the store's partition table, when the
    caller has it; else the one partition is looked up (``store.partitions()`` would copy the
    whole table)."""
    entity = ctx.semantics.resolve(name)
    if entity is None:
        return None
    source = ctx.store.topics.get(entity.source) if isinstance(entity, View) else entity
    if source is None or not 0 <= partition < source.partitions:
        return None
    plog = ctx.store.built_partition(source.name, partition) if built is None else built.get((source.name, partition))
    return plog.next_offset if plog is not None else 0


def group_offsets(ctx: BrokerContext) -> list[GroupOffset]:
    """Every committed offset of every group, with its lag (high watermark - committed)."""
    out = []
    built = ctx.store.partitions()  # once: a copy per committed offset made this quadratic
    for group in ctx.groups.known_group_ids():
        for (topic, partition), committed in sorted(ctx.groups.all_committed(group).items()):
            end = high_watermark(ctx, topic, partition, built)
            lag = None if end is None else max(0, end - committed.offset)
            out.append(GroupOffset(group, topic, partition, committed.offset, end, lag))
    return out


def group_members(ctx: BrokerContext, group: str) -> list[dict]:
    """The group's members with the partitions assigned to them: a classic group's decoded
    from its "consumer" protocol assignments, a consumer-protocol (KIP-848) group's with
    each member's epoch and target assignment besides (``member_epoch`` None: classic), a
    share group's (KIP-932) with its epoch and subscription (its target is its assignment)."""
    share_group = ctx.groups.share.groups.get(group)
    if share_group is not None:
        return [
            {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
             "group_instance_id": None, "member_epoch": m.epoch, "subscribed_topics": list(m.subscribed_names),
             "assignment": _named(ctx, m.assigned), "target_assignment": _named(ctx, m.assigned)}
            for m in share_group.members.values()
        ]
    consumer_group = ctx.groups.consumer.groups.get(group)
    if consumer_group is not None:
        return [
            {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
             "group_instance_id": m.instance_id, "member_epoch": m.epoch,
             "assignment": _named(ctx, m.assigned),
             "target_assignment": _named(ctx, consumer_group.target.get(m.member_id, {}))}
            for m in consumer_group.members.values()
        ]
    state = ctx.groups.groups.get(group)
    if state is None:
        return []
    return [
        {"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
         "group_instance_id": m.group_instance_id, "member_epoch": None,
         "assignment": decode_assignment(m.assignment) if state.protocol_type == "consumer" else []}
        for m in state.members.values()
    ]


def share_partitions(ctx: BrokerContext, group: str) -> list[dict]:
    """A share group's share-partitions (assigned to a member, or with a share state on this
    broker), each with the ids of the members reading it and its figures.

    Figures (None when the share-partition has no state yet, or its topic is gone): ``start``
    (SPSO), ``end`` (the high watermark), ``in_flight`` (records from SPSO to the window's
    end), ``acquired``, ``acknowledged``, ``archived``, ``waiting`` (available but waiting out
    a redelivery backoff), ``lag`` (KIP-1226: from SPSO to the high watermark, less what is
    acknowledged or archived) and ``dead_letters`` (records archived by REJECT or the delivery
    limit since the share-partition's state began: durable, so kept across restarts, and
    started afresh when its offsets are altered or deleted). A row costs one pass over its
    window (bounded by ``group.share.partition.max.record.locks``), never one over the topic; a
    share-partition with a state but not loaded shows its start, lag and dead letters only."""
    share_group = ctx.groups.share.groups.get(group)
    readers: dict[tuple[str, int], list[str]] = {}
    if share_group is not None:
        for member in share_group.members.values():
            for entry in _named(ctx, member.assigned):
                for p in entry["partitions"]:
                    readers.setdefault((entry["topic"], p), []).append(member.member_id)
    shares = ctx.shares
    if shares is not None:
        for _, topic, p in shares.partitions_of(group):
            readers.setdefault((topic, p), [])
    elif share_group is None:
        return []
    return [{"topic": topic, "partition": p, "members": sorted(ids), **_share_figures(ctx, group, topic, p)}
            for (topic, p), ids in sorted(readers.items())]


_NO_FIGURES = dict.fromkeys(("start", "end", "in_flight", "acquired", "acknowledged", "archived", "waiting",
                             "lag", "dead_letters"))


def _share_figures(ctx: BrokerContext, group: str, topic: str, partition: int) -> dict:
    shares = ctx.shares
    meta = ctx.semantics.resolve(topic)
    if shares is None or meta is None or not 0 <= partition < ctx.semantics.partition_count(meta):
        return dict(_NO_FIGURES)
    key = (group, topic, partition)
    start, lag = shares.start_and_lag(key, meta)
    if start < 0:
        return dict(_NO_FIGURES)
    figures = {**_NO_FIGURES, "start": start, "end": high_watermark(ctx, topic, partition), "lag": lag,
               "dead_letters": shares.dead_letters(key)}
    sp = shares.get(key)
    if sp is not None:
        counts = sp.counts()
        figures.update(in_flight=counts.in_flight, acquired=counts.acquired, acknowledged=counts.acknowledged,
                       archived=counts.archived, waiting=counts.waiting)
    return figures


def _named(ctx: BrokerContext, partitions: dict) -> list[dict]:
    """A consumer-protocol assignment (topic id -> partitions) by topic name; a topic deleted
    meanwhile is left out (it leaves the assignment at the members' next heartbeats)."""
    out = []
    for topic_id, numbers in partitions.items():
        name = ctx.groups.consumer.topic_name(topic_id)
        if name is not None and numbers:
            out.append({"topic": name, "partitions": sorted(numbers)})
    return sorted(out, key=lambda entry: entry["topic"])


def decode_assignment(data: bytes) -> list[dict]:
    """Topics and partitions of a ConsumerProtocolAssignment (any version: the fields this
    reads come first in all of them); [] for anything else."""
    try:
        pos = 2  # int16 version
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(max(topics, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            name = bytes(data[pos:pos + length]).decode()
            pos += length
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            partitions = list(struct.unpack_from(f">{max(count, 0)}i", data, pos))
            pos += 4 * max(count, 0)
            out.append({"topic": name, "partitions": partitions})
        return out
    except (struct.error, UnicodeDecodeError):
        return []


def suffixed_topics(ctx: BrokerContext, prefix: str) -> dict[str, tuple[int, int]]:
    """Group -> (records held, records ever appended) of its ``rmq_retry.`` / ``rmq_dlq.`` topic."""
    built = ctx.store.partitions()
    out = {}
    for meta in ctx.store.topics.all():
        if meta.name.startswith(prefix):
            held = appended = 0
            for p in range(meta.partitions):
                plog = built.get((meta.name, p))
                if plog is not None:
                    held += plog.next_offset - plog.log_start_offset
                    appended += plog.next_offset
            out[meta.name[len(prefix):]] = (held, appended)
    return out


def retry_counts(ctx: BrokerContext) -> dict[str, tuple[int, int]]:
    return suffixed_topics(ctx, RETRY_PREFIX)


def dlq_counts(ctx: BrokerContext) -> dict[str, tuple[int, int]]:
    return suffixed_topics(ctx, DLQ_PREFIX)


def kafka_transactions_by_state(ctx: BrokerContext) -> Counter[str]:
    """How many transactional ids are in each Kafka transaction state."""
    return Counter(entry.state for entry in ctx.transactions.coordinator.list().transactions)
