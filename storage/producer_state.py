"""Idempotent-producer state of one partition: which sequences each producer id has written.

Kafka's rules: within an epoch, a producer's batches carry consecutive sequence numbers; a
batch equal to one of the last five acknowledged ones is a retry and gets its original offset
back; a gap is OUT_OF_ORDER_SEQUENCE; an older epoch is fenced. The state is derived from the
batches in the commitlog (each carries producer id, epoch and base sequence): it is
snapshotted with each checkpoint and rebuilt by re-dispatch after a crash.

Each entry also keeps what DescribeProducers reports: the max timestamp of the producer's
last batch or end marker, and the coordinator epoch of its last end marker (-1 before one).
An end marker with a newer epoch than the entry's (the coordinator bumped it when it
aborted a timed-out or fenced transaction) moves the entry to that epoch with no sequence
written yet, as Kafka's producer state does: batches of the older epoch are fenced from
then on, and the producer's first batch in the new epoch starts at sequence 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import CoordinatorFencedError, InvalidProducerEpochError, OutOfOrderSequenceError
from .record_batch import NO_PRODUCER_ID, NO_SEQUENCE, BatchInfo

RECENT_BATCHES = 5  # as many as a producer may have in flight
_SEQ_MASK = 0x7FFFFFFF


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    last_sequence: int
    # (first sequence, last sequence, base offset) of the newest batches
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def check(self, info: BatchInfo) -> int | None:
        """Validate a batch before append; returns the original base offset of a duplicate."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(pid)
        if entry is None or info.producer_epoch > entry.epoch:
            if info.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {info.producer_epoch} must start at sequence 0, "
                    f"got {info.base_sequence}"
                )
            return None
        if info.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} epoch {info.producer_epoch} is older than {entry.epoch}"
            )
        for first, last, base_offset in entry.recent:
            if first == info.base_sequence and last == info.last_sequence:
                return base_offset
        expected = (entry.last_sequence + 1) & _SEQ_MASK
        if info.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {pid}: expected sequence {expected}, got {info.base_sequence}"
            )
        return None

    def check_all(self, infos: list[BatchInfo], next_offset: int) -> list[int | None]:
        """``check`` for the batches of one request, each seeing the ones before it as if
        appended from ``next_offset`` on; changes nothing, so a rejected request leaves no
        trace. Returns, per batch, the original base offset of a duplicate or None.
        """
        if len(infos) == 1:
            return [self.check(infos[0])]
        scratch = ProducerStateTable()
        for info in infos:
            entry = self._producers.get(info.producer_id)
            if entry is not None and info.producer_id not in scratch._producers:
                scratch._producers[info.producer_id] = ProducerEntry(
                    entry.epoch, entry.last_sequence, deque(entry.recent, maxlen=RECENT_BATCHES)
                )
        results: list[int | None] = []
        for info in infos:
            original = scratch.check(info)
            if original is None:
                scratch.update(info, next_offset)
                next_offset += info.records_count
            results.append(original)
        return results

    def update(self, info: BatchInfo, base_offset: int) -> None:
        """Record an appended batch (also used when re-dispatching the commitlog)."""
        pid = info.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = self._producers.get(pid)
        if entry is None or info.producer_epoch > entry.epoch:
            entry = ProducerEntry(info.producer_epoch, info.last_sequence)
            self._producers[pid] = entry
        entry.last_sequence = info.last_sequence
        entry.recent.append((info.base_sequence, info.last_sequence, base_offset))
        entry.last_timestamp = info.max_timestamp

    def check_end_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate an end marker before it is appended, as Kafka's ProducerAppendInfo does for
        one from the coordinator: an epoch older than the producer's is fenced, and so is a
        coordinator epoch older than the one of the producer's last marker."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {producer_epoch} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise CoordinatorFencedError(
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)")

    def end_transaction(self, info: BatchInfo, coordinator_epoch: int) -> None:
        """Record an end marker (live append or replay): see the module docstring."""
        entry = self._producers.get(info.producer_id)
        if entry is None or info.producer_epoch > entry.epoch:
            entry = ProducerEntry(info.producer_epoch, NO_SEQUENCE)
            self._producers[info.producer_id] = entry
        entry.last_timestamp = info.max_timestamp
        entry.coordinator_epoch = coordinator_epoch

    def entries(self) -> Iterator[tuple[int, ProducerEntry]]:
        """(producer id, entry) of every producer that wrote to the partition."""
        return iter(self._producers.items())

    def snapshot(self) -> dict[str, list]:
        return {
            str(pid): [e.epoch, e.last_sequence, [list(b) for b in e.recent], e.last_timestamp, e.coordinator_epoch]
            for pid, e in self._producers.items()
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, list]) -> ProducerStateTable:
        table = cls()
        for pid, (epoch, last_sequence, recent, *described) in data.items():
            # checkpoints written before DescribeProducers have three fields
            entry = ProducerEntry(epoch, last_sequence, last_timestamp=described[0] if described else -1,
                                  coordinator_epoch=described[1] if described else -1)
            entry.recent.extend(tuple(b) for b in recent)
            table._producers[int(pid)] = entry
        return table

    def __len__(self) -> int:
        return len(self._producers)
