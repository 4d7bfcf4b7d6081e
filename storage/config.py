"""The storage layer's one configuration object, built once at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FlushPolicy = Literal["async", "sync"]


@dataclass(frozen=True, slots=True)
class StorageConfig:
    """Everything the store needs to know; nothing about Kafka requests or RocketMQ topics.

    flush="async": appends reach the OS page cache at once (so a killed *process* loses
    nothing) and are fsynced every ``flush_interval_ms``; an OS crash or power loss can lose
    at most that window. flush="sync": a caller that awaits ``wait_durable`` is released only
    after an fsync that covers its append; concurrent waiters share one fsync (group commit).
    """

    data_dir: Path
    segment_bytes: int = 1 << 30
    flush: FlushPolicy = "async"
    flush_interval_ms: int = 1000
    retention_ms: int | None = 168 * 3600 * 1000
    retention_bytes: int | None = None
    retention_check_interval_ms: int = 300_000
    # storage.retention: the live batches of the oldest segments are moved to the head (and
    # the segments deleted) when they are at most this fraction of those segments' bytes;
    # each byte moved reclaims at least (1 - ratio) / ratio bytes. 0 never moves.
    retention_move_ratio: float = 0.5
    consume_queue_entries_per_file: int = 300_000
    # Kafka's offsets.retention.minutes (default 10080): committed offsets of a group without
    # live members expire this long after their commit. The group coordinator drives expiry.
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    # The record header whose value's Java String.hashCode goes into the consume queue.
    tag_header: str = "TAGS"
    # Partitions one topic may have, and all topics together (system topics included): each
    # partition keeps files open and memory, so one request asking for 2^31-1 of them must
    # be refused (INVALID_PARTITIONS), not exhaust file handles for everyone.
    max_partitions_per_topic: int = 1000
    max_partitions: int = 10_000
    # MessageStore.append_async: a request with a batch that may expand to at least this
    # much (records count x 7 bytes, or a compressed batch this big) is decompressed and
    # checked in a worker thread instead of on the event loop.
    inflate_in_thread_bytes: int = 16 * 1024
    # storage.disk_reserve: space kept so that a recovery can write index entries on a full
    # disk; appends are accepted only while it exists. 0 turns it off.
    disk_reserve_bytes: int = 8 << 20
    # storage.index_repair: commitlog entries (or queue entries) a repair of damaged
    # consume-queue entries handles between two turns of the event loop.
    index_repair_slice_entries: int = 4096
    # storage.compaction_cleaner (Kafka's log.cleaner.*): whether compacted topics are
    # cleaned, the pause between the cleaner's passes, and the memory its key map may use.
    cleaner_enable: bool = True
    cleaner_backoff_ms: int = 15_000
    cleaner_dedupe_buffer_bytes: int = 128 << 20
