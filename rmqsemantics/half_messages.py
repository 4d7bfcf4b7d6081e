"""RocketMQ transaction messages: half messages, their ends, op records and back-checks.

A produced record with ``TRAN_MSG=true`` (half_records.py has the header protocol) is taken
out of its batch like a delayed record (the batch keeps its offsets) and parked in
``RMQ_SYS_TRANS_HALF_TOPIC``: no consumer, view or ListOffsets of its topic sees it. Its
producer ends it with an end record (``TRAN_END``) naming its group and ``UNIQ_KEY``:

* COMMIT appends the message to its real partition (or parks it for its ``DELAY`` /
  ``TIMER_*``), then an op record; ROLLBACK appends only the op record. An end for a half
  message that is not pending (unknown, or already ended) refuses the whole request with
  INVALID_RECORD and changes nothing: a message is made visible at most once.
* The check service (``check_pass``, every ``transactionCheckInterval``) sends each pending
  half message older than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``)
  a check request on ``rmq_trans_check.<group>``, once per pass; a half message already
  checked ``transactionCheckMax`` times is rolled back instead (op record ``TRAN_END_BY=
  CHECK_MAX``, logged and counted).

State and crash behaviour. The pending table (half offset -> group, key, partition, stored
time, checks) is derived from the commitlog (the scheduler's DerivedState carries it): a
snapshot in each checkpoint, and after a crash a replay of the entries after it, where a
half park adds an entry (cancelled if the batch it was taken from never followed: the
producer got no answer), a committed message naming its half message in ``PARKED_AT`` or an
op record removes it, and a check request sets its check count. A commit writes the
message before its op record, so a crash between the two still leaves it committed once.
Ends and checks change the table in the same synchronous step as their appends.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterator

from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.errors import InvalidRecordError
from rmqkafka.storage.store import MessageStore

from .config import SemanticsConfig
from .half_records import (
    BY_CHECK_MAX,
    BY_PRODUCER,
    CHECK_PARTITIONS,
    CHECK_PREFIX,
    CHECK_TIMES,
    COMMIT,
    HALF_STORED_MS,
    HALF_TOPIC,
    OP_TOPIC,
    PGROUP,
    ROLLBACK,
    TRAN_HALF,
    UNIQ_KEY,
    HalfHeaderError,
    Intent,
    check_batch,
    check_topic,
    committed_headers,
    half_batch,
    half_offset_of,
    header_of,
    immunity_ms,
    int_header,
    intent_of,
    op_batch,
)
from .park_replay import ParkReplay, Where
from .pending_halves import Pending, PendingHalves
from .parked_reader import ParkedReader
from .parked_records import PARKED_FROM, header, real_partition

log = logging.getLogger(__name__)

SYSTEM_TOPICS = frozenset((HALF_TOPIC, OP_TOPIC))
ENDED_REMEMBERED = 100_000  # recent ends kept to say "already committed" rather than "unknown"
CHECK_BATCH_RECORDS = 1000
CHECK_STEP = 5000  # half messages a check step handles before the service yields
# pending half messages a status lists: its JSON stays below the 32767 bytes a DescribeConfigs
# value may have in the versions before v4 (a legacy string)
STATUS_LIMIT = 100
# What the snapshot's "pending" holds while any half message is pending. A broker of the
# previous format read only "pending", as a list of rows, and would start without every
# pending half message packed in "table"; unpacking this string as rows fails, so such a
# broker refuses to start instead (docs/design/storage-format.md: what to do then).
PACKED_ELSEWHERE = "packed in 'table' by a newer broker: see docs/design/storage-format.md"

# deliver([(record, headers)], real topic, real qid): append committed messages (or park them)
Deliver = Callable[[list[tuple[object, list]], str, int], None]


class HalfMessages:
    """See the module docstring. The scheduler calls it as part of its Diverter and
    DerivedState roles (one parking path, one replay)."""

    def __init__(self, config: SemanticsConfig, store: MessageStore, clock: Clock, deliver: Deliver,
                 delay_topics: frozenset[str]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._deliver = deliver
        self._delay_topics = delay_topics  # the scheduler's: where a committed message may wait
        self.pending = PendingHalves()  # half offset -> entry, in offset order
        # recent ends by hash((group, key)) -> "committed" ...: only a refusal's message reads
        # it, and an int is the smallest key (a collision words a refusal wrongly, no more)
        self._ended: dict[int, str] = {}
        self._claimed: set[tuple[str, str]] = set()  # keys a request being appended names
        self._last_parked: list[int] = []
        self._ends: list[Intent] = []
        self._parked = ParkedReader()
        self._replay = ParkReplay(self._cancel, self._replayed_delivery)
        self._snapshot_cache: tuple[int, object] | None = None
        self._version = 0
        self.counters = {"committed": 0, "rolled_back": 0, "rolled_back_unchecked": 0, "checks_sent": 0,
                         "cancelled": 0}

    # -- selecting (before anything of a request is written) ---------------------------------
    def begin(self) -> None:
        self._claimed.clear()

    def classify(self, topic: str, records: list, transactional: bool) -> dict[int, Intent]:
        """The half messages and end records among ``records`` (index -> Intent), checked
        against the pending table and the request's earlier records; raises
        InvalidRecordError to refuse the request."""
        found: dict[int, Intent] = {}
        for i, record in enumerate(records):
            headers = record.headers
            if not headers:
                continue
            try:
                intent = intent_of(headers)
            except HalfHeaderError as exc:
                raise InvalidRecordError(str(exc)) from None
            if intent is None:
                continue
            if transactional:
                raise InvalidRecordError(
                    "half messages and end records (TRAN_MSG, TRAN_END) are not accepted in Kafka transactions")
            ident = (intent.group, intent.key)
            if ident in self._claimed:
                raise InvalidRecordError(f"UNIQ_KEY {intent.key} of group {intent.group} appears twice in the request")
            offset = self.pending.offset_of(intent.group, intent.key)
            if intent.end is None:
                if offset is not None:
                    raise InvalidRecordError(
                        f"half message UNIQ_KEY {intent.key} of group {intent.group} is already pending")
            else:
                if offset is None:
                    ended = self._ended.get(hash(ident))
                    state = f"was already {ended}" if ended else "is not pending (unknown, or already ended)"
                    raise InvalidRecordError(f"half message UNIQ_KEY {intent.key} of group {intent.group} {state}")
                pending_topic = self.pending.topic_of(offset)
                if pending_topic != topic:
                    raise InvalidRecordError(
                        f"half message UNIQ_KEY {intent.key} of group {intent.group} is for topic "
                        f"{pending_topic!r}: its end record must be produced there")
            self._claimed.add(ident)
            found[i] = intent
        return found

    # -- parking and ending (just before the produced batch is written) ----------------------
    def park(self, topic: str, partition: int, halves: list[tuple[int, object]], intents: list[Intent]) -> None:
        """Park the half messages taken from a batch of ``topic``-``partition`` (with the
        Intent ``classify`` found for each)."""
        self._last_parked = []
        if not halves:
            return
        now = self.clock.now_ms()
        records = [record for _, record in halves]
        batch, rows = half_batch(records, topic, partition, (topic, partition), [offset for offset, _ in halves], now)
        base = self.store.append_built(HALF_TOPIC, 0, batch, records=records).base_offset
        # its end usually follows soon: the commit then finds the record without a parse
        self._parked.remember(self.store.partition(HALF_TOPIC, 0), base, len(batch), rows, (topic, partition))
        timeout = self.config.transaction_timeout_ms
        self.pending.add_run(base, [(intent.group, intent.key) for intent in intents], topic, partition, now,
                             [now + max(timeout, intent.immunity_ms) for intent in intents])
        self._last_parked = list(range(base, base + len(intents)))
        self._version += 1

    def defer_ends(self, ends: list[Intent]) -> None:
        """The end records of the batch being written (checked by ``classify``): carried out
        by ``written`` once the batch is in the commitlog, dropped by ``abandon``. (A crash
        in between leaves the half message pending: the producer's retry is a duplicate
        batch and changes nothing, and the next back-check decides it.)"""
        self._ends = ends

    def written(self) -> None:
        ends, self._ends = self._ends, []
        offsets = [(self.pending.offset_of(i.group, i.key), i.end or COMMIT) for i in ends]
        decisions = [(offset, end, BY_PRODUCER) for offset, end in offsets if offset is not None]
        if decisions:
            self._decide(decisions, self.clock.now_ms())

    def abandon(self) -> None:
        """The batch the last ``park`` came from could not be written: its halves are void
        and its ends never happened."""
        self._ends = []
        for offset in self._last_parked:
            self._cancel((HALF_TOPIC, 0, offset))
        self._last_parked = []

    def _decide(self, decisions: list[tuple[int, str, str]], now: int) -> None:
        """Carry out (half offset, COMMIT or ROLLBACK, by whom) decisions in a few appends:
        the committed messages of each partition in one batch, then one batch of op records
        for all. A committed message ends its half message once it is written, whatever
        happens to the op records (a replay finds it committed by its PARKED_AT); a rollback
        happens only with its op record."""
        entries = {offset: self.pending[offset] for offset, _, _ in decisions}
        plog = self.store.partition(HALF_TOPIC, 0)
        commits: dict[tuple[str, int], list[tuple[int, object]]] = {}
        for offset, decision, _ in decisions:
            if decision == COMMIT:
                entry = entries[offset]
                found = self._parked.record(plog, offset)
                if found is None:
                    raise InvalidRecordError(f"half message {entry.key} of group {entry.group}: its record is gone")
                commits.setdefault((entry.topic, entry.partition), []).append((offset, found[0]))
        for (topic, partition), items in commits.items():
            self._deliver([(record, committed_headers(record, offset)) for offset, record in items], topic, partition)
            for offset, _ in items:
                self._remove(offset, "committed")
                self.counters["committed"] += 1
        ops = op_batch([(offset, entries[offset].group, entries[offset].key, decision, by)
                        for offset, decision, by in decisions], now)
        try:
            self.store.append_built(OP_TOPIC, 0, ops)
        except Exception:
            if all(decision == COMMIT for _, decision, _ in decisions):
                log.exception("%d half message(s) committed, but their op records could not be written", len(decisions))
                return
            raise  # the rollbacks did not happen; a later end or check decides them
        for offset, decision, by in decisions:
            if decision == COMMIT:
                continue
            entry = entries[offset]
            self._remove(offset, "rolled back")
            if by == BY_CHECK_MAX:
                self.counters["rolled_back_unchecked"] += 1
                log.warning("half message UNIQ_KEY %s of group %s (%s-%d) rolled back: no answer after %d checks",
                            entry.key, entry.group, entry.topic, entry.partition, entry.checks)
            else:
                self.counters["rolled_back"] += 1

    # -- the table -------------------------------------------------------------------------
    def _add(self, offset: int, headers: list, topic: str, partition: int, stored_ms: int) -> None:
        group = (header_of(headers, PGROUP) or b"").decode("utf-8", "replace")
        key = (header_of(headers, UNIQ_KEY) or b"").decode("utf-8", "replace")
        first_check = stored_ms + max(self.config.transaction_timeout_ms, immunity_ms(headers))
        self.pending.add(offset, group, key, topic, partition, stored_ms, first_check)
        self._version += 1

    def _remove(self, offset: int, how: str) -> bool:
        named = self.pending.discard(offset)
        if named is None:
            return False
        ident = hash(named)
        self._ended.pop(ident, None)  # to the newest end
        self._ended[ident] = how
        if len(self._ended) > ENDED_REMEMBERED:
            del self._ended[next(iter(self._ended))]
        self._version += 1
        return True

    def _cancel(self, where: Where) -> None:
        if self._remove(where[2], "cancelled"):
            log.warning("%s-0@%d: half message cancelled: the batch it was taken from was not written "
                        "(its producer got an error or no answer)", HALF_TOPIC, where[2])
            self.counters["cancelled"] += 1

    # -- back-checks -----------------------------------------------------------------------
    def check_pass(self, now_ms: int | None = None) -> int:
        """One pass of the check service: a check request for each pending half message due
        for one, a rollback for those out of checks. Returns the requests sent."""
        return sum(self.check_steps(self.clock.now_ms() if now_ms is None else now_ms))

    def check_steps(self, now: int, budget: int = CHECK_STEP) -> Iterator[int]:
        """``check_pass`` in steps of at most ``budget`` half messages, yielding the requests
        each sent, so the caller can let other work run in between (a pass over 100,000
        pending messages takes over a second). A message ended between steps is skipped."""
        due = self.pending.due(now)
        for start in range(0, len(due), budget):
            yield self._check(due[start:start + budget], now)

    def _check(self, offsets: list[int], now: int) -> int:
        plog = self.store.partition(HALF_TOPIC, 0)
        by_group: dict[str, list[tuple[object, int, int, str]]] = {}
        out_of_checks: list[tuple[int, str, str]] = []
        for offset in offsets:
            entry = self.pending.get(offset)
            if entry is None:  # ended since the pass began
                continue
            if entry.checks >= self.config.transaction_check_max:
                out_of_checks.append((offset, ROLLBACK, BY_CHECK_MAX))
                continue
            found = self._parked.record(plog, offset) if plog.log_start_offset <= offset < plog.next_offset else None
            if found is None:
                log.error("%s-0@%d: half message gone (retention?); rolled back", HALF_TOPIC, offset)
                out_of_checks.append((offset, ROLLBACK, BY_CHECK_MAX))
                continue
            by_group.setdefault(entry.group, []).append((found[0], offset, entry.checks + 1, entry.key))
        if out_of_checks:
            self._decide(out_of_checks, now)
        return sum(self._send_checks(group, checks) for group, checks in by_group.items())

    def _send_checks(self, group: str, checks: list[tuple[object, int, int, str]]) -> int:
        """Check requests for (half record, its offset, check number, its key)."""
        topic = check_topic(group)
        if self.store.topics.get(topic) is None:
            self.store.create_topic(topic, CHECK_PARTITIONS, {})
        partitions = self.store.topics.get(topic).partitions
        by_partition: dict[int, list[tuple[object, int, int]]] = {}
        for record, offset, times, key in checks:
            by_partition.setdefault(zlib.crc32(key.encode()) % partitions, []).append((record, offset, times))
        sent = 0
        for partition, items in sorted(by_partition.items()):
            for start in range(0, len(items), CHECK_BATCH_RECORDS):
                chunk = items[start:start + CHECK_BATCH_RECORDS]
                try:
                    self.store.append_built(topic, partition, check_batch(chunk))
                except Exception:  # the next pass tries again
                    log.exception("sending %d check request(s) to %s-%d failed", len(chunk), topic, partition)
                    return sent
                for _, offset, times in chunk:
                    self.pending.set_checks(offset, times)
                self._version += 1
                sent += len(chunk)
                self.counters["checks_sent"] += len(chunk)
        return sent

    # -- DerivedState (through the scheduler) ------------------------------------------------
    def snapshot(self) -> object:
        cached = self._snapshot_cache
        if cached is None or cached[0] != self._version:
            state = {"table": self.pending.snapshot(), "pending": PACKED_ELSEWHERE if len(self.pending) else []}
            self._snapshot_cache = cached = (self._version, state)
        return cached[1]

    def restore(self, state: object | None) -> None:
        state = state if isinstance(state, dict) else {}
        rows = state.get("pending")  # an older broker's rows, or PACKED_ELSEWHERE
        self.pending.restore(state.get("table"), None if rows == PACKED_ELSEWHERE else rows)
        self._replay = ParkReplay(self._cancel, self._replayed_delivery)
        self._version += 1

    def replay(self, topic: str, partition: int, batch: bytes) -> None:
        if topic == HALF_TOPIC:
            records = record_batch.read_records(batch)
            if records and header(records[0], PARKED_FROM) is not None:
                self._replay.park(topic, partition, records)
                for record in records:
                    real = real_partition(record)
                    if real is not None:
                        self._add(record.offset, record.headers, real[0], real[1], int_header(record, HALF_STORED_MS))
                return
        if topic in self._delay_topics and _is_park(batch):
            return  # the scheduler's parks of the same produced batch: they neither confirm nor orphan a run
        self._replay.entry(topic, partition, batch)
        if topic == OP_TOPIC:
            for record in record_batch.read_records(batch):
                offset = half_offset_of(header(record, TRAN_HALF))
                if offset is not None:
                    self._remove(offset, "ended")
        elif topic.startswith(CHECK_PREFIX):
            for record in record_batch.read_records(batch):
                offset = half_offset_of(header(record, TRAN_HALF))
                if offset is not None:
                    self.pending.raise_checks(offset, int_header(record, CHECK_TIMES))
                    self._version += 1  # the cached snapshot is stale

    def _replayed_delivery(self, where: Where, topic: str, partition: int) -> None:
        """A ``PARKED_AT`` naming a half message in a replayed batch of ``topic``: its
        commit, if that is the message's topic (or a delay topic holding it)."""
        if where[:2] != (HALF_TOPIC, 0):
            return
        entry = self.pending.get(where[2])
        if entry is not None and (topic == entry.topic or topic in self._delay_topics):
            self._remove(where[2], "committed")

    def recovered(self) -> None:
        self._replay.orphaned()
        for name in (HALF_TOPIC, OP_TOPIC):
            if self.store.topics.get(name) is None:
                self.store.create_topic(name, 1, {})

    # -- status ----------------------------------------------------------------------------
    def describe(self, offset: int, entry: Pending, now: int) -> dict:
        return {"uniq_key": entry.key, "group": entry.group, "topic": entry.topic, "partition": entry.partition,
                "half_offset": offset, "stored_ms": entry.stored_ms, "age_ms": max(0, now - entry.stored_ms),
                "checks": entry.checks, "first_check_ms": entry.first_check_ms}

    def status(self, limit: int = STATUS_LIMIT, group: str | None = None) -> dict:
        """Counters, pending count and the oldest ``limit`` pending half messages."""
        now = self.clock.now_ms()
        shown = []
        for offset, entry in self.pending.items():
            if len(shown) >= limit:
                break
            if group is None or entry.group == group:
                shown.append(self.describe(offset, entry, now))
        return {"pending": len(self.pending), "oldest": shown, **self.counters,
                "transaction_check_interval_ms": self.config.transaction_check_interval_ms,
                "transaction_timeout_ms": self.config.transaction_timeout_ms,
                "transaction_check_max": self.config.transaction_check_max}

    def find(self, group: str, key: str) -> dict | None:
        offset = self.pending.offset_of(group, key)
        return None if offset is None else self.describe(offset, self.pending[offset], self.clock.now_ms())


def _is_park(batch: bytes) -> bool:
    """Whether a batch of a delay topic is a park of produced records (they name where they
    came from), not a copy the broker moved there itself."""
    records = record_batch.read_records(batch)
    return bool(records) and header(records[0], PARKED_FROM) is not None
