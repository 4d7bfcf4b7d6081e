"""The transaction coordinator: every transactional id of this broker and its transaction.

Behaviour follows Kafka 3.x's TransactionCoordinator with clients that do not use KIP-890
part 2 (an epoch per producer session, not per transaction):

- InitProducerId: a new transactional id gets a new producer id at epoch 0; a known one gets
  its epoch bumped, which fences the previous producer (its next request gets
  PRODUCER_FENCED). When the epoch is exhausted (>= 32766) the id moves to a new producer id
  at epoch 0. KIP-360: a request naming its current producer id and epoch is checked
  against them (a retry of a bump that succeeded gets the same answer again). An Ongoing
  transaction is first aborted with an epoch fence (epoch + 1, ABORT markers), and the
  answer is CONCURRENT_TRANSACTIONS: the client retries and gets the next epoch.
- AddPartitionsToTxn / AddOffsetsToTxn: the first one moves the id to Ongoing and starts the
  transaction's clock; its timeout runs from there.
- TxnOffsetCommit: offsets are staged with the transaction (and persisted with it); a commit
  applies them, an abort drops them.
- EndTxn: Ongoing -> PrepareCommit/PrepareAbort (persisted: the decision), markers to every
  partition, staged offsets applied on commit, then CompleteCommit/CompleteAbort
  (persisted). A retry of the same outcome after completion succeeds, the opposite one is
  INVALID_TXN_STATE. The epoch must match exactly, so an EndTxn from an older epoch never
  touches the transaction of a newer one.
- A transaction Ongoing for longer than its timeout is aborted with an epoch fence.
- An Empty or Complete* id unused for transactional.id.expiration.ms is removed (Dead).

Sans-IO: the clock, the producer id allocator, the state log's append, the marker writer and
the offset applier are injected, and every call runs to its end synchronously, so Kafka's
"pending transition" (CONCURRENT_TRANSACTIONS while a log append is in flight) has no window
here. A transaction stays in Prepare* only when writing its markers (or its Complete* record)
failed, or after a restart; ``complete_prepared`` (and ``load``) finish it.

Errors are ``TxnError`` carrying Kafka's error code; the handlers turn them into responses.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kio.schema.errors import ErrorCode
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.offset_store import CommittedOffset

from ..re2j_patterns import PatternError, compile_pattern
from . import state_log
from .state_log import TopicPartition, TxnMetadata, TxnState

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767

# The first request version whose answer may be PRODUCER_FENCED (KIP-588); older versions
# get INVALID_PRODUCER_EPOCH instead, as Kafka's KafkaApis maps it. Key: API key.
PRODUCER_FENCED_SINCE = {
    22: 4,  # InitProducerId
    24: 2,  # AddPartitionsToTxn
    25: 2,  # AddOffsetsToTxn
    26: 2,  # EndTxn
}

_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_EXPIRABLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def legacy_epoch_error(api_key: int, version: int) -> bool:
    """Whether a fenced request of this API version must get INVALID_PRODUCER_EPOCH."""
    since = PRODUCER_FENCED_SINCE.get(api_key)
    return since is not None and version < since


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps one epoch in reserve for fencing: 32766 is the last one handed out."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnSettings:
    """Kafka's transaction.* broker settings, in milliseconds."""

    max_timeout_ms: int = 900_000                  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms


class TxnError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    producer_epoch: int


class MarkerWriter(Protocol):
    def __call__(self, producer_id: int, producer_epoch: int, commit: bool,
                 partitions: Sequence[TopicPartition]) -> None:
        """Append a COMMIT or ABORT control batch for the producer to every partition, and
        return once they are appended. Called again for the same transaction after a failure
        or a restart, so a partition must accept a repeated marker (Kafka's do). A partition
        that no longer exists should be skipped, as Kafka drops its marker."""


# Apply a committed transaction's offsets to a group (e.g. ``store.offsets.commit``).
OffsetApplier = Callable[[str, dict[TopicPartition, CommittedOffset]], None]


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """A transaction ``expire`` aborted; ``producer_epoch`` is the fencing epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """One entry of a DescribeTransactions response."""

    transactional_id: str
    error_code: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class TxnListEntry:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TxnListing:
    """A ListTransactions response's data."""

    transactions: tuple[TxnListEntry, ...]
    unknown_state_filters: tuple[str, ...] = ()


class TransactionCoordinator:
    def __init__(
        self,
        clock: Clock,
        allocate_producer_id: Callable[[], int],
        append: Callable[[bytes, bytes], None],
        write_markers: MarkerWriter,
        apply_offsets: OffsetApplier,
        settings: TxnSettings = TxnSettings(),
    ) -> None:
        self._clock = clock
        self._allocate = allocate_producer_id
        self._append = append
        self._write_markers = write_markers
        self._apply_offsets = apply_offsets
        self.settings = settings
        self._txns: dict[str, TxnMetadata] = {}
        self._by_producer_id: dict[int, str] = {}

    # -- state -----------------------------------------------------------------------------
    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        return sorted(self._txns)

    def load(self, records: Iterable[tuple[bytes, bytes]]) -> list[str]:
        """Rebuild the state from ``__transaction_state``'s records, in order, after a restart.
        A transaction found decided (Prepare*) is completed now: markers written again, offsets
        applied on commit, Complete* persisted; Ongoing ones stay Ongoing until they commit,
        abort or time out. Returns the ids completed."""
        self._txns = state_log.replay(records)
        self._by_producer_id = {meta.producer_id: txn_id for txn_id, meta in self._txns.items()}
        return self.complete_prepared()

    def _persist(self, meta: TxnMetadata) -> None:
        """Write the new state to the log, then make it current. A failed append changes
        nothing and is COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka answers most log
        append failures of the coordinator so)."""
        key, value = state_log.encode(meta)
        try:
            self._append(key, value)
        except Exception as exc:
            log.exception("transactional id %s: could not append its %s state to %s",
                          meta.transactional_id, meta.state.value, state_log.TOPIC)
            raise TxnError(ErrorCode.coordinator_not_available) from exc
        old = self._txns.get(meta.transactional_id)
        if old is not None and self._by_producer_id.get(old.producer_id) == meta.transactional_id:
            del self._by_producer_id[old.producer_id]
        if meta.state is TxnState.DEAD:
            self._txns.pop(meta.transactional_id, None)
        else:
            self._txns[meta.transactional_id] = meta
            self._by_producer_id[meta.producer_id] = meta.transactional_id

    def _now(self) -> int:
        return self._clock.now_ms()

    # -- InitProducerId --------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = NO_PRODUCER_ID,
        expected_epoch: int = NO_PRODUCER_EPOCH,
        *,
        legacy_epoch_error: bool = False,
    ) -> ProducerIdAndEpoch:
        """InitProducerId with a transactional id (a null id is the handler's business).
        ``expected_*``: the KIP-360 fields (v3+), -1 when absent."""
        if (expected_producer_id == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            raise TxnError(ErrorCode.invalid_request)  # KafkaApis: only one of them given
        if not transactional_id:
            raise TxnError(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            raise TxnError(ErrorCode.invalid_transaction_timeout)
        expected = (None if expected_producer_id == NO_PRODUCER_ID
                    else ProducerIdAndEpoch(expected_producer_id, expected_epoch))
        now = self._now()
        meta = self._txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self._allocate(), timeout_ms=timeout_ms,
                               last_update_ms=now)
        if expected is not None and not _valid_expected_producer(meta, expected):
            raise TxnError(_fenced(legacy_epoch_error))
        state = meta.state
        if state in _PREPARED:
            raise TxnError(ErrorCode.concurrent_transactions)
        if state is TxnState.ONGOING:
            # Abort it first, with an epoch the client never sees; its retry bumps again (and
            # moves to a new producer id if this fence used the last epoch).
            log.info("transactional id %s: InitProducerId aborts its ongoing transaction",
                     transactional_id)
            self._fence_and_abort(meta)
            raise TxnError(ErrorCode.concurrent_transactions)
        if state not in (TxnState.EMPTY, *_COMPLETE):
            raise RuntimeError(f"transactional id {transactional_id} is in state {state.value}")
        if is_epoch_exhausted(meta.producer_epoch) and (
                expected is None or expected.producer_epoch == meta.producer_epoch):
            new_id = self._allocate()
            log.info("transactional id %s: epoch %d exhausted, producer id %d -> %d",
                     transactional_id, meta.producer_epoch, meta.producer_id, new_id)
            epoch, last_epoch = 0, (meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH)
            producer_id = new_id
        else:
            producer_id = meta.producer_id
            epoch, last_epoch = _next_epoch(meta, expected, legacy_epoch_error)
        new = dataclasses.replace(
            meta, producer_id=producer_id, producer_epoch=epoch, last_producer_id=meta.producer_id,
            last_producer_epoch=last_epoch, timeout_ms=timeout_ms, state=TxnState.EMPTY,
            partitions=frozenset(), groups=frozenset(), offsets={}, start_ms=-1, last_update_ms=now,
        )
        self._persist(new)
        log.info("transactional id %s: producer id %d epoch %d", transactional_id, producer_id, epoch)
        return ProducerIdAndEpoch(producer_id, epoch)

    # -- Produce ---------------------------------------------------------------------------
    def verify_produce(self, producer_id: int, producer_epoch: int, partition: TopicPartition,
                       transactional_id: str | None = None) -> ErrorCode:
        """Whether a transactional batch of this producer may be appended to ``partition``
        (Kafka 3.6+ verifies it with the coordinator, KIP-890 part 1): the producer id must
        be the one of the request's transactional id (INVALID_PRODUCER_ID_MAPPING otherwise:
        a client may not write into another transactional id's transaction, whose id it was
        authorized for), its epoch the current one (INVALID_PRODUCER_EPOCH otherwise: an
        older producer, or a transaction aborted by a timeout's fence) and the partition in
        its Ongoing transaction (INVALID_TXN_STATE otherwise)."""
        txn_id = self._by_producer_id.get(producer_id)
        meta = self._txns.get(txn_id) if txn_id is not None else None
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_txn_state
        if transactional_id is not None and txn_id != transactional_id:
            return ErrorCode.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if meta.state is not TxnState.ONGOING or partition not in meta.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        legacy_epoch_error: bool = False,
    ) -> None:
        added = frozenset(partitions)
        meta = self._begin(transactional_id, producer_id, producer_epoch, legacy_epoch_error)
        if meta.state is TxnState.ONGOING and added <= meta.partitions:
            return  # Kafka's shortcut: nothing to persist
        self._persist(self._ongoing(meta, partitions=meta.partitions | added))

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        *,
        legacy_epoch_error: bool = False,
    ) -> None:
        """AddOffsetsToTxn: Kafka adds the group's ``__consumer_offsets`` partition to the
        transaction; here the group itself is recorded (its offsets need no marker)."""
        meta = self._begin(transactional_id, producer_id, producer_epoch, legacy_epoch_error)
        if meta.state is TxnState.ONGOING and group_id in meta.groups:
            return
        self._persist(self._ongoing(meta, groups=meta.groups | {group_id}))

    def _begin(self, transactional_id: str, producer_id: int, producer_epoch: int,
               legacy_epoch_error: bool) -> TxnMetadata:
        meta = self._producer(transactional_id, producer_id, producer_epoch, legacy_epoch_error)
        if meta.state in _PREPARED:
            raise TxnError(ErrorCode.concurrent_transactions)
        return meta

    def _ongoing(self, meta: TxnMetadata, **changes) -> TxnMetadata:
        """The transaction with ``changes``; from Empty or Complete* (their partitions, groups
        and offsets are empty) a new one starts now."""
        now = self._now()
        starting = meta.state is not TxnState.ONGOING
        return dataclasses.replace(
            meta, state=TxnState.ONGOING, start_ms=now if starting else meta.start_ms,
            last_update_ms=now, **changes,
        )

    # -- TxnOffsetCommit -------------------------------------------------------------------
    def txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> None:
        """Stage a TxnOffsetCommit's offsets with the transaction (persisted), to be applied
        if it commits. The group's generation and member id (KIP-447) are the caller's to
        check against the group. The transaction must be Ongoing with the group added by
        AddOffsetsToTxn (Kafka 3.6+ verifies that too)."""
        meta = self._txns.get(transactional_id) if transactional_id else None
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            # No TxnOffsetCommit version has PRODUCER_FENCED: Kafka's log layer answers so.
            raise TxnError(ErrorCode.invalid_producer_epoch)
        if meta.state is not TxnState.ONGOING or group_id not in meta.groups:
            raise TxnError(ErrorCode.invalid_txn_state)
        staged = {**meta.offsets.get(group_id, {}), **offsets}
        self._persist(dataclasses.replace(
            meta, offsets={**meta.offsets, group_id: staged}, last_update_ms=self._now(),
        ))

    def pending_offsets(self, transactional_id: str) -> dict[str, dict[TopicPartition, CommittedOffset]]:
        """The offsets staged by the id's open transaction, per group."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            return {}
        return {group: dict(offsets) for group, offsets in meta.offsets.items()}

    def has_pending_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether an undecided transaction staged an offset of this group and partition
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT then, KIP-447)."""
        return any((topic, partition) in meta.offsets.get(group_id, ())
                   for meta in self._txns.values())

    # -- EndTxn ----------------------------------------------------------------------------
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        *,
        legacy_epoch_error: bool = False,
    ) -> bool:
        """EndTxn. Returns True when the transaction is complete, False when it is decided
        (Prepare* persisted) but its markers could not be written yet: the answer is success
        either way, as Kafka answers once the decision is in the log; ``complete_prepared``
        finishes it, and until then the producer's next transaction gets
        CONCURRENT_TRANSACTIONS."""
        meta = self._producer(transactional_id, producer_id, producer_epoch, legacy_epoch_error)
        state = meta.state
        if state is TxnState.ONGOING:
            prepared = dataclasses.replace(
                meta, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                last_update_ms=self._now(),
            )
            self._persist(prepared)
            log.info("transactional id %s: %s (producer id %d epoch %d, %d partitions)",
                     transactional_id, prepared.state.value, producer_id, producer_epoch,
                     len(prepared.partitions))
            return self._complete(prepared).state in _COMPLETE
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        pending = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state is done:
            return True  # a retry of what already happened
        if state is pending:
            raise TxnError(ErrorCode.concurrent_transactions)
        if state in (TxnState.EMPTY, *_PREPARED, *_COMPLETE):
            raise TxnError(ErrorCode.invalid_txn_state)
        raise RuntimeError(f"transactional id {transactional_id} is in state {state.value}")

    def _producer(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  legacy_epoch_error: bool) -> TxnMetadata:
        if not transactional_id:
            raise TxnError(ErrorCode.invalid_request)
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise TxnError(ErrorCode.invalid_producer_id_mapping)
        if meta.producer_epoch != producer_epoch:
            raise TxnError(_fenced(legacy_epoch_error))
        return meta

    def _fence_and_abort(self, meta: TxnMetadata) -> TxnMetadata:
        """Kafka's epoch fence: abort the Ongoing transaction under epoch + 1, so that the
        producer of the old epoch is fenced at the coordinator and at every partition."""
        if meta.producer_epoch >= MAX_EPOCH:
            raise RuntimeError(f"transactional id {meta.transactional_id}: cannot fence epoch {MAX_EPOCH}")
        prepared = dataclasses.replace(
            meta, state=TxnState.PREPARE_ABORT, producer_epoch=meta.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH, last_update_ms=self._now(),
        )
        self._persist(prepared)
        return self._complete(prepared)

    def _complete(self, meta: TxnMetadata) -> TxnMetadata:
        """Markers, then offsets (on commit), then Complete*. A failure leaves the transaction
        in Prepare* for ``complete_prepared`` (everything here may be repeated)."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        try:
            if meta.partitions:
                self._write_markers(meta.producer_id, meta.producer_epoch, commit, sorted(meta.partitions))
            if commit:
                for group, offsets in sorted(meta.offsets.items()):
                    if offsets:
                        self._apply_offsets(group, dict(offsets))
        except Exception:
            log.exception("transactional id %s: completing %s failed; it stays %s",
                          meta.transactional_id, "commit" if commit else "abort", meta.state.value)
            return meta
        done = dataclasses.replace(
            meta, state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            partitions=frozenset(), groups=frozenset(), offsets={}, last_update_ms=self._now(),
        )
        try:
            self._persist(done)
        except TxnError:
            return meta
        log.info("transactional id %s: %s", meta.transactional_id, done.state.value)
        return done

    def complete_prepared(self) -> list[str]:
        """Finish every decided transaction (Prepare*) whose markers or Complete* record are
        missing; returns the ids completed."""
        completed = []
        for meta in list(self._txns.values()):
            if meta.state in _PREPARED and self._complete(meta).state in _COMPLETE:
                completed.append(meta.transactional_id)
        return completed

    # -- timeouts --------------------------------------------------------------------------
    def expire(self, now_ms: int | None = None) -> list[AbortedTxn]:
        """Abort every transaction Ongoing for longer than its timeout, with an epoch fence
        (Kafka: start + timeout < now). Returns what it aborted (or began to abort: one whose
        markers failed stays PrepareAbort)."""
        now = self._now() if now_ms is None else now_ms
        aborted = []
        for meta in list(self._txns.values()):
            if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now:
                log.info("transactional id %s: transaction timed out after %d ms, aborting",
                         meta.transactional_id, meta.timeout_ms)
                try:
                    done = self._fence_and_abort(meta)
                except TxnError:
                    continue  # logged; the next call tries again
                aborted.append(AbortedTxn(meta.transactional_id, done.producer_id, done.producer_epoch))
        return aborted

    def next_deadline_ms(self) -> int | None:
        """The wall-clock ms after which ``expire`` has something to do, if any."""
        deadlines = [m.start_ms + m.timeout_ms for m in self._txns.values() if m.state is TxnState.ONGOING]
        return min(deadlines) + 1 if deadlines else None

    def expire_transactional_ids(self, now_ms: int | None = None) -> list[str]:
        """Remove ids Empty or Complete* and unused for transactional.id.expiration.ms (a
        Dead record in the log). Returns the ids removed."""
        now = self._now() if now_ms is None else now_ms
        limit = now - self.settings.transactional_id_expiration_ms
        expired = []
        for meta in list(self._txns.values()):
            if meta.state in _EXPIRABLE and meta.last_update_ms <= limit:
                try:
                    self._persist(dataclasses.replace(meta, state=TxnState.DEAD, last_update_ms=now))
                except TxnError:
                    continue
                expired.append(meta.transactional_id)
        return expired

    # -- administration --------------------------------------------------------------------
    def describe(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        """DescribeTransactions: one entry per id, in the request's order."""
        out = []
        for txn_id in transactional_ids:
            meta = self._txns.get(txn_id) if txn_id else None
            if not txn_id:
                out.append(TxnDescription(txn_id, ErrorCode.invalid_request))
            elif meta is None:
                out.append(TxnDescription(txn_id, ErrorCode.transactional_id_not_found))
            else:
                topics: dict[str, list[int]] = {}
                for topic, partition in sorted(meta.partitions):
                    topics.setdefault(topic, []).append(partition)
                out.append(TxnDescription(
                    txn_id, ErrorCode.none, meta.state.value, meta.timeout_ms, meta.start_ms,
                    meta.producer_id, meta.producer_epoch,
                    tuple((topic, tuple(ps)) for topic, ps in topics.items()),
                ))
        return out

    def list(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> TxnListing:
        """ListTransactions (v0 filters; duration: v1, KIP-994; id pattern: v2, KIP-1152).
        An empty filter matches everything; an unknown state name is reported back and
        matches nothing."""
        state_names = list(states)
        known = {s.value for s in TxnState}
        unknown = tuple(name for name in state_names if name not in known)
        wanted_states = {name for name in state_names if name in known}
        wanted_ids = set(producer_ids)
        pattern = None
        if transactional_id_pattern:
            try:  # RE2J, as Kafka (KIP-1152): linear-time matching whatever the pattern
                pattern = compile_pattern(transactional_id_pattern)
            except PatternError as exc:
                raise TxnError(ErrorCode.invalid_regular_expression) from exc
        now = self._now()
        found = []
        for txn_id, meta in sorted(self._txns.items()):
            if state_names and meta.state.value not in wanted_states:
                continue
            if wanted_ids and meta.producer_id not in wanted_ids:
                continue
            if duration_filter_ms >= 0 and now - meta.start_ms <= duration_filter_ms:
                continue
            if pattern is not None and not pattern.fullmatch(txn_id):
                continue
            found.append(TxnListEntry(txn_id, meta.producer_id, meta.state.value))
        return TxnListing(tuple(found), unknown)


def _fenced(legacy_epoch_error: bool) -> ErrorCode:
    return ErrorCode.invalid_producer_epoch if legacy_epoch_error else ErrorCode.producer_fenced


def _valid_expected_producer(meta: TxnMetadata, expected: ProducerIdAndEpoch) -> bool:
    """KIP-360: an InitProducerId naming a producer id and epoch is fenced unless the id has
    no epoch yet, or names the current producer id (its epoch is checked next), or names the
    previous producer id with an exhausted epoch (a retry of the rotation to a new id)."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or expected.producer_id == meta.producer_id
        or (expected.producer_id == meta.last_producer_id and is_epoch_exhausted(expected.producer_epoch))
    )


def _next_epoch(meta: TxnMetadata, expected: ProducerIdAndEpoch | None,
                legacy_epoch_error: bool) -> tuple[int, int]:
    """(epoch, last epoch) of an InitProducerId that keeps the producer id (Kafka's
    prepareIncrementProducerEpoch)."""
    bumped = meta.producer_epoch + 1
    if expected is None:
        return bumped, NO_PRODUCER_EPOCH  # a new producer instance: no retry to recognise
    if meta.producer_epoch == NO_PRODUCER_EPOCH or expected.producer_epoch == meta.producer_epoch:
        return bumped, meta.producer_epoch  # the producer recovers from an error: bump
    if expected.producer_epoch == meta.last_producer_epoch:
        return meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump that succeeded
    raise TxnError(_fenced(legacy_epoch_error))
