"""An in-process broker for the semantics tests: a real MessageStore in tmp_path with
Semantics on top, driven by a ManualClock, so nothing sleeps.

A "broker" is a MessageStore + Semantics built in-process (Semantics before
``store.open()``, so the scheduler is registered as derived state) and started (so
``await store.checkpoint()`` works; its own loops are set to never fire). Records go in
through ``Semantics.append`` as a produce request would put them; delivery is driven by
``scheduler.deliver_due``. A crash is a broker dropped without ``close``: its file
descriptors are closed (that writes nothing) and the clean-shutdown marker is not written;
what was written stays, as the page cache survives a killed process.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from pathlib import Path

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.parked_records import PARKED_AT
from rmqkafka.rmqsemantics.scheduler import SCHEDULE_TOPIC, TIMER_TOPIC, Scheduler
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import AppendResult, MessageStore

T0 = 1_700_000_000_000  # ManualClock's start: a multiple of every precision used here
HOUR = 3_600_000
BIG = 1 << 30
LEVELS = (1000, 2000, 3000)
PRECISION = 100
SLOTS = 50  # a 5 s wheel window: timers further ahead roll
SMALL = SemanticsConfig(delay_levels_ms=LEVELS, timer_precision_ms=PRECISION, timer_wheel_slots=SLOTS)
# 18 short levels (level n = n * 100 ms), for the retry rounds (levels 3 .. 18)
RETRY_LEVELS = tuple(100 * n for n in range(1, 19))
RETRY = SemanticsConfig(delay_levels_ms=RETRY_LEVELS, timer_precision_ms=PRECISION, timer_wheel_slots=SLOTS)


# -- records and batches ------------------------------------------------------------------------


def rec(value: bytes, *headers: tuple[str, bytes], key: bytes | None = None, ts: int | None = None) -> tuple:
    """One record for ``batch``: (key, value, headers, timestamp or None)."""
    return key, value, list(headers), ts


def delay(level: int) -> tuple[str, bytes]:
    return "DELAY", str(level).encode()


def timer_ms(ms: int) -> tuple[str, bytes]:
    return "TIMER_DELAY_MS", str(ms).encode()


def timer_sec(sec: int) -> tuple[str, bytes]:
    return "TIMER_DELAY_SEC", str(sec).encode()


def deliver_at(epoch_ms: int) -> tuple[str, bytes]:
    return "TIMER_DELIVER_MS", str(epoch_ms).encode()


def tag(name: str) -> tuple[str, bytes]:
    return "TAGS", name.encode()


def batch(*records: tuple, pid: int = -1, epoch: int = -1, seq: int = -1, codec: int = 0,
          transactional: bool = False) -> bytes:
    """A v2 batch as a producer sends it (aiokafka's builder); record i is stamped
    ``T0 - 1000 + i`` unless it says otherwise."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=int(transactional), producer_id=pid,
        producer_epoch=epoch, base_sequence=seq, batch_size=BIG,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        stamp = T0 - 1000 + i if ts is None else ts
        assert builder.append(i, timestamp=stamp, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def hdr(headers: list, name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


# -- a broker in-process ----------------------------------------------------------------------


class Broker:
    """MessageStore + Semantics on ``data_dir`` (see the module docstring)."""

    def __init__(self, data_dir: Path, clock: ManualClock, config: SemanticsConfig,
                 deliveries: list | None = None) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.store = MessageStore(
            StorageConfig(data_dir=data_dir, flush_interval_ms=HOUR, retention_check_interval_ms=HOUR), clock
        )
        self.semantics = Semantics(config, self.store, data_dir, clock)
        self.store.open()
        # every delivery seen, as (clock ms, topic, partition, value): shared by the brokers of a World
        self.deliveries: list[tuple[int, str, int, bytes | None]] = [] if deliveries is None else deliveries
        self.store.add_append_listener(self._seen)

    def _seen(self, name: str, p: int, appended) -> None:
        for records in appended.records:
            for r in records:
                if hdr(list(r.headers), PARKED_AT) is not None and name not in (SCHEDULE_TOPIC, TIMER_TOPIC):
                    self.deliveries.append((self.clock.now_ms(), name, p, r.value))

    @property
    def scheduler(self) -> Scheduler:
        return self.semantics.scheduler

    def topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        if self.store.topics.get(name) is None:
            self.store.create_topic(name, partitions, configs or {})

    def produce(self, name: str, partition: int, *batches: bytes) -> AppendResult:
        meta = self.store.topics.get(name)
        assert meta is not None, name
        return self.semantics.append(meta, partition, b"".join(batches), max_batch_bytes=1 << 20)

    def deliver(self) -> int | None:
        return self.scheduler.deliver_due(self.clock.now_ms())

    def run_until(self, until_ms: int, step_ms: int = PRECISION) -> None:
        """Advance the clock to ``until_ms`` in steps, delivering at each one."""
        self.deliver()
        while self.clock.now_ms() < until_ms:
            self.clock.advance(min(step_ms, until_ms - self.clock.now_ms()))
            self.deliver()

    def next_offset(self, name: str, partition: int = 0) -> int:
        return self.store.partition(name, partition).next_offset


def drain(store: MessageStore, name: str, partition: int = 0, offset: int = 0) -> list[tuple[int, bytes | None, list]]:
    """(offset, value, headers) of every data record of a partition from ``offset`` on
    (covering and other control batches skipped)."""
    plog = store.partition(name, partition)
    out = []
    for b in plog.read(max(offset, plog.log_start_offset), BIG, True).batches:
        if b[22] & record_batch.CONTROL_BIT:
            continue
        out.extend((r.offset, r.value, list(r.headers)) for r in record_batch.read_records(b)
                   if r.offset >= offset)
    return out


def values(store: MessageStore, name: str, partition: int = 0) -> list[bytes | None]:
    return [v for _, v, _ in drain(store, name, partition)]


def all_values(store: MessageStore, name: str) -> Counter:
    """How often each value is in any partition of topic ``name``."""
    meta = store.topics.get(name)
    assert meta is not None
    return Counter(v for p in range(meta.partitions) for v in values(store, name, p))


def parked(store: MessageStore, name: str, partition: int) -> list[tuple[int, int, bytes | None, list]]:
    """(offset, consume-queue code, value, headers) of a system partition's records."""
    plog = store.partition(name, partition)
    codes = {o: plog.consume_queue.entry(o)[2] for o in range(plog.log_start_offset, plog.next_offset)}
    return [(o, codes[o], v, h) for o, v, h in drain(store, name, partition)]


def coverage(batches: list[bytes]) -> list[tuple[int, int]]:
    return [(record_batch.base_offset_of(b), record_batch.next_offset_of(b)) for b in batches]


def assert_contiguous(batches: list[bytes], start: int, end: int) -> None:
    spans = coverage(batches)
    assert spans[0][0] == start and spans[-1][1] == end, spans
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), spans


class World:
    """Brokers opened one after the other on one data directory; crash() drops one."""

    def __init__(self, data_dir: Path, clock: ManualClock) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.open_brokers: list[Broker] = []
        self.deliveries: list[tuple[int, str, int, bytes | None]] = []

    async def open(self, config: SemanticsConfig = SMALL, data_dir: Path | None = None) -> Broker:
        broker = Broker(data_dir or self.data_dir, self.clock, config, self.deliveries)
        await broker.store.start()
        self.open_brokers.append(broker)
        return broker

    async def crash(self, broker: Broker) -> None:
        """A killed process: no flush, no checkpoint, no clean-shutdown marker."""
        self.open_brokers.remove(broker)
        store = broker.store
        tasks, store._tasks = store._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for plog in store.partitions().values():
            plog.close()
        store.commitlog.close()
        store.offsets.close()
        broker.scheduler.close()

    async def close(self, broker: Broker) -> None:
        """The broker's clean shutdown (adapter.broker.Broker.stop's order)."""
        self.open_brokers.remove(broker)
        await broker.semantics.stop()
        await broker.store.close()
        broker.scheduler.close()

    async def crash_all(self) -> None:
        for broker in list(self.open_brokers):
            await self.crash(broker)


def fail_writes_to(b: Broker, monkeypatch, name: str) -> None:
    """Make every commitlog append for topic ``name`` raise OSError (the disk is full)."""
    commitlog = b.store.commitlog
    topic_id = b.store.topics.get(name).topic_id
    real_append = commitlog.append

    def append(tid, partition, parts):
        if tid == topic_id:
            raise OSError(28, "No space left on device")
        return real_append(tid, partition, parts)

    monkeypatch.setattr(commitlog, "append", append)
