"""What a crash replay learns about parked records from the commitlog alone.

The store replays every commitlog entry after the last checkpoint (storage DerivedState).
Two facts about parked records can only be learnt there:

* **Parks whose batch never reached the commitlog.** The store writes the park entries of a
  produced batch just before the batch itself (storage.store.Diverter), nothing in between.
  Each parked record names, in ``PARKED_FROM``, the partition and offset it keeps in that
  batch. A run of park entries is confirmed by the entry that follows it only if that entry
  is the batch they came from: the same partition, a sparse batch (a batch with parked
  records holds fewer records than offsets; a delivered or other produced batch is dense
  unless it parked records itself, and then its own parks came first) whose offsets include
  every placed offset. Anything else - another entry, a park placing an offset again (the
  producer's retry after a failed write), the end of the log - leaves the run orphaned: its
  producer was never answered, so the records are cancelled, never delivered.
* **Deliveries.** A delivered record names the parked record it came from in ``PARKED_AT``;
  a timer re-parked from the wheel's last slot names its previous copy the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rmqkafka.storage import record_batch

from .parked_records import (
    PARKED_AT,
    PARKED_AT_NEEDLE,
    header,
    parked_from,
    parse_marker,
)

Where = tuple[str, int, int]  # (system topic, partition, offset)


@dataclass(slots=True)
class _Run:
    """Park entries replayed and not yet matched with the batch they came from."""

    source: tuple[str, int] | None = None
    placed: set[int] = field(default_factory=set)
    parks: list[tuple[str, int, list[int]]] = field(default_factory=list)


class ParkReplay:
    """Fed the replayed entries in commitlog order; calls ``cancel(where)`` for each parked
    record found orphaned and ``delivered(where, topic, partition)`` for each ``PARKED_AT``
    met in a batch of ``topic``-``partition`` (the caller decides whether it proves a
    delivery)."""

    def __init__(self, cancel: Callable[[Where], None],
                 delivered: Callable[[Where, str, int], None]) -> None:
        self._cancel = cancel
        self._delivered = delivered
        self._run = _Run()

    def park(self, topic: str, partition: int, records: list) -> None:
        """A park entry: ``records`` of system topic ``topic`` at their offsets."""
        wheres = [parked_from(record) for record in records]
        if any(where is None for where in wheres) or len({where[:2] for where in wheres}) != 1:  # type: ignore[index]
            self.orphaned()
            for record in records:  # unreadable: cannot be matched with a batch
                self._cancel((topic, partition, record.offset))
            return
        source = wheres[0][:2]  # type: ignore[index]
        placed = {where[2] for where in wheres}  # type: ignore[index]
        run = self._run
        if run.parks and (source != run.source or placed & run.placed):
            self.orphaned()
            run = self._run
        run.source = source
        run.placed |= placed
        run.parks.append((topic, partition, [record.offset for record in records]))

    def entry(self, topic: str, partition: int, batch: bytes) -> None:
        """Any other entry: a produced, delivered or re-parked batch."""
        run = self._run
        if run.parks:
            if (topic, partition) == run.source and _holds_placed(batch, run.placed):
                self._run = _Run()
            else:
                self.orphaned()
        view = memoryview(batch)
        if view[22] & record_batch.COMPRESSION_MASK == 0 and PARKED_AT_NEEDLE in batch:
            for record in record_batch.read_records(batch):
                value = header(record, PARKED_AT)
                where = parse_marker(value) if value is not None else None
                if where is not None:
                    self._delivered(where, topic, partition)

    def orphaned(self) -> None:
        """The pending run will never be confirmed (also at the end of the replay)."""
        for topic, partition, offsets in self._run.parks:
            for offset in offsets:
                self._cancel((topic, partition, offset))
        self._run = _Run()


def _holds_placed(batch: bytes, placed: set[int]) -> bool:
    """Whether ``batch`` is a sparse batch whose offset range includes ``placed``."""
    info = record_batch.read_info(batch)
    base = record_batch.base_offset_of(batch)
    span = info.last_offset_delta + 1
    return info.records_count < span and all(base <= offset < base + span for offset in placed)
