"""Domain errors of the storage layer; the adapter maps them to Kafka error codes."""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every error the store raises on purpose."""


class StorageFailedError(StorageError):
    """An fsync failed: what it covered may not be on disk, and a later fsync could report
    success for pages the kernel has already dropped (PostgreSQL's "fsyncgate"). The store
    refuses every write from then on; only a restart, whose recovery reads what is really
    on disk, makes it writable again."""


class SyncFailedError(OSError):
    """An fsync or fdatasync inside a write failed (a commitlog segment roll): unlike a full
    disk, it is not retried (a retry could report success for dropped pages); whoever gets it
    fails the store (StorageFailedError)."""


class CorruptIndexError(StorageError):
    """A consume-queue entry does not point at a batch of its partition holding its offset
    (the index file was damaged): the read is refused, and the indexes are rebuilt from the
    commitlog at the next start."""


class CorruptRecordError(StorageError):
    """A record batch failed its CRC32C, or its framing contradicts itself."""


class InvalidRecordError(StorageError):
    """A record batch is well-formed but not acceptable (magic, record count, ...)."""


class RecordTooLargeError(StorageError):
    """A single batch exceeds the configured maximum message size."""


class InvalidTimestampError(StorageError):
    """Records carry timestamps outside the range the caller allows.

    ``record_errors`` holds (index of the record in its batch, why) for each such record.
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class KeylessRecordError(InvalidRecordError):
    """Records without a key for a partition that requires keys (a compacted topic).

    ``record_errors`` holds (index of the record in its batch, why) for each such record.
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class RecordListTooLargeError(StorageError):
    """The batches for one partition in one request exceed what a segment can hold."""


class OffsetOutOfRangeError(StorageError):
    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} outside [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnknownTopicError(StorageError):
    pass


class UnknownPartitionError(StorageError):
    pass


class TopicExistsError(StorageError):
    pass


class InvalidPartitionCountError(StorageError):
    pass


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer skipped or reordered a sequence number."""


class InvalidProducerEpochError(StorageError):
    """A batch carries an epoch older than the producer's current one (a fenced producer)."""


class CoordinatorFencedError(StorageError):
    """An end marker carries a coordinator epoch older than the last one the partition saw
    for its producer (a marker from a zombie transaction coordinator)."""
