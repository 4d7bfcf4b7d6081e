"""The semantics layer's one entry point for the Kafka handlers: names, appends and reads.

The handlers resolve every topic name here, append through :meth:`Semantics.append` and read
through :meth:`Semantics.read`, so RocketMQ's rules apply whatever Kafka API carries the
records: a name may be a topic (stored in the commitlog) or a subscription view (a filtered,
read-only window on a topic, :mod:`.views`). ``storage`` below knows neither views nor tags;
it appends and reads batches.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from rmqkafka.storage.clock import Clock
from rmqkafka.storage.errors import UnknownTopicError
from rmqkafka.storage.partition_log import PartitionLog
from rmqkafka.storage.record_batch import Buffer
from rmqkafka.storage.store import AppendResult, MessageStore
from rmqkafka.storage.topics import TopicMeta

from .config import SemanticsConfig
from .filters import FilterKind
from .half_messages import SYSTEM_TOPICS as HALF_TOPICS
from .scheduler import Scheduler
from .scheduler import SYSTEM_TOPICS as SCHEDULER_TOPICS
from .share.state_log import TOPIC as SHARE_STATE_TOPIC

TRANSACTION_STATE_TOPIC = "__transaction_state"  # adapter.transactions.state_log.TOPIC
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's internal topics: listings show them once they are in use (Kafka creates them on a
# group's or a transactional id's first use), and only the broker writes them.
INTERNAL_TOPICS = frozenset({TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC})
# Topics only the broker writes: the scheduler's, the half and op topics of RocketMQ
# transaction messages, and the internal ones. Listings leave out all but the internal ones.
SYSTEM_TOPICS = SCHEDULER_TOPICS | HALF_TOPICS | INTERNAL_TOPICS | {SHARE_STATE_TOPIC}
from .view_arrivals import ArrivalTest, arrival_test
from .view_reader import ReadResult, ViewReadCounts, first_match_at_or_after, read_view
from .views import SourceInUseError, View, ViewError, ViewExistsError, ViewRegistry


class ViewReadOnlyError(ViewError):
    """An append to a view: views have no records of their own."""


class SystemTopicError(Exception):
    """A client write to, or deletion of, a system topic (the schedule and timer topics)."""


class Semantics:
    """Constructed before the store is opened: the scheduler's state is derived from the
    commitlog (``store.add_derived_state``) and recovered with it."""

    def __init__(self, config: SemanticsConfig, store: MessageStore, data_dir: Path,
                 clock: Clock | None = None,
                 delivery_options: Callable[[dict[str, str]], dict] | None = None) -> None:
        self.config = config
        self.store = store
        self.views = ViewRegistry(data_dir)
        self.view_reads: dict[str, ViewReadCounts] = {}  # view name -> what reads through it passed
        self.scheduler = Scheduler(config, store, data_dir, clock or store.clock, delivery_options)
        store.add_derived_state(self.scheduler)

    def start(self) -> None:
        self.scheduler.start()

    def reconfigure(self, config: SemanticsConfig) -> None:
        """Swap in new settings (dynamic broker configs: the RocketMQ keys that may change
        live; the delay levels and the timing wheel's geometry never differ)."""
        self.config = config
        self.scheduler.reconfigure(config)

    async def stop(self) -> None:
        await self.scheduler.stop()

    # -- appending -------------------------------------------------------------------------
    def append(self, meta: TopicMeta, partition: int, records: Buffer, **options) -> AppendResult:
        """Append a produce request's records for one partition of topic ``meta`` (the
        store's checks and ``options``); records with a scheduling header, and every record
        produced to a retry topic, are parked by the scheduler instead (their batch keeps
        its offsets). Raises what store.append raises, and InvalidRecordError for a bad
        scheduling header."""
        return self.store.append(meta.name, partition, records, diverter=self._diverter(), **options)

    async def append_async(self, meta: TopicMeta, partition: int, records: Buffer, **options) -> AppendResult:
        """``append`` for the produce path: a large compressed batch is decompressed and
        checked in the store's worker threads (store.append_async), so other clients are
        served meanwhile; the scheduler still sees the records on the event loop."""
        return await self.store.append_async(meta.name, partition, records,
                                             diverter=self._diverter(), **options)

    def _diverter(self) -> Scheduler:
        """The scheduler, readied for a new request. It sees every batch once the store has
        parsed it, and looks no further into one whose records carry no header (one pass in
        C, see Scheduler.select): searching the request's bytes for the header names first
        cost more than that (0.4 us a 100-byte record, 3.5 us a 1-KiB one)."""
        self.scheduler.begin()
        return self.scheduler

    # -- names -----------------------------------------------------------------------------
    def resolve(self, name: str) -> TopicMeta | View | None:
        return self.store.topics.get(name) or self.views.get(name)

    def source_of(self, view: View) -> TopicMeta:
        meta = self.store.topics.get(view.source)
        if meta is None:  # deleting a source with views is refused, so only a bug gets here
            raise ViewError(f"the source topic {view.source!r} of view {view.name!r} does not exist")
        return meta

    def partition_count(self, entity: TopicMeta | View) -> int:
        return entity.partitions if isinstance(entity, TopicMeta) else self.source_of(entity).partitions

    def resolve_id(self, topic_id: uuid.UUID) -> TopicMeta | View | None:
        """The topic or view with this id (Metadata v10+, DeleteTopics v6, Fetch v13+)."""
        return self.store.topics.by_id(topic_id) or self.views.by_id(topic_id)

    @staticmethod
    def id_of(entity: TopicMeta | View) -> uuid.UUID:
        return entity.topic_id if isinstance(entity, TopicMeta) else entity.view_id

    def listed(self) -> list[TopicMeta | View]:
        """Every topic and view, by name: what Metadata answers when all topics are asked for.
        System topics are left out (they answer when asked for by name), except the internal
        ones in use."""
        entities: list[TopicMeta | View] = [
            *(meta for meta in self.store.topics.all()
              if meta.name not in SYSTEM_TOPICS or self._internal_in_use(meta)),
            *self.views.all(),
        ]
        return sorted(entities, key=lambda e: e.name)

    def _internal_in_use(self, meta: TopicMeta) -> bool:
        """``__consumer_offsets`` exists once a group has looked for its coordinator; the
        transaction log always exists here, and is in use once it holds a record."""
        if meta.name == TRANSACTION_STATE_TOPIC:
            return self.store.partition(meta.name, 0).next_offset > 0
        return meta.name in INTERNAL_TOPICS

    def topic_for_append(self, name: str) -> TopicMeta | None:
        """The topic records for ``name`` are appended to (None: no such topic); raises
        ViewReadOnlyError when ``name`` is a view."""
        if name in SYSTEM_TOPICS:
            raise SystemTopicError(f"{name!r} is a system topic; only the broker writes to it")
        meta = self.store.topics.get(name)
        if meta is None:
            view = self.views.get(name)
            if view is not None:
                raise ViewReadOnlyError(
                    f"{name!r} is a view (read-only) over topic {view.source!r}; produce to {view.source!r}"
                )
        return meta

    # -- reading ---------------------------------------------------------------------------
    def read(self, name_or_entity: str | TopicMeta | View, partition: int, offset: int,
             max_bytes: int, min_one: bool, max_offset: int | None = None) -> ReadResult:
        """What a Fetch returns for one partition: a topic's batches as stored, a view's
        filtered from its source partition (view_reader); offsets, log start and high
        watermark are the source's. Raises UnknownTopicError / UnknownPartitionError and
        OffsetOutOfRangeError as storage does. ``max_offset`` (read_committed: the source
        partition's LSO): nothing at or past it is returned, for topics and views alike."""
        entity = self._entity(name_or_entity)
        if isinstance(entity, TopicMeta):
            result = self.store.partition(entity.name, partition).read(offset, max_bytes, min_one, max_offset)
            return ReadResult(result.batches, result.size, result.log_start_offset,
                              result.high_watermark, result.size)
        plog = self.store.partition(self.source_of(entity).name, partition)
        result = read_view(plog, entity.filter, offset, max_bytes, min_one, max_offset=max_offset)
        counts = self.view_reads.get(entity.name)
        if counts is None:
            counts = self.view_reads[entity.name] = ViewReadCounts()
        counts.add(offset, result.batches)
        return result

    def source_partition(self, name_or_entity: str | TopicMeta | View, partition: int) -> PartitionLog:
        """The stored partition a topic's or view's partition reads (log start, end,
        timestamps: a view's are its source's)."""
        entity = self._entity(name_or_entity)
        name = entity.name if isinstance(entity, TopicMeta) else self.source_of(entity).name
        return self.store.partition(name, partition)

    def offset_for_timestamp(self, name_or_entity: str | TopicMeta | View, partition: int,
                             timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped >= ``timestamp_ms``; for a view,
        the first record of the view (ListOffsets by timestamp)."""
        entity = self._entity(name_or_entity)
        plog = self.source_partition(entity, partition)
        if isinstance(entity, TopicMeta):
            return plog.offset_for_timestamp(timestamp_ms)
        return first_match_at_or_after(plog, entity.filter, timestamp_ms)

    def arrivals(self, name_or_entity: str | TopicMeta | View, partition: int) -> tuple[str, int, ArrivalTest | None]:
        """What a fetch waiting on this partition waits for: (stored topic, partition, test
        of an append, None = any append). A view waits on its source, for a matching record."""
        entity = self._entity(name_or_entity)
        if isinstance(entity, TopicMeta):
            return entity.name, partition, None
        return self.source_of(entity).name, partition, arrival_test(entity.filter)

    def _entity(self, name_or_entity: str | TopicMeta | View) -> TopicMeta | View:
        if not isinstance(name_or_entity, str):
            return name_or_entity
        entity = self.resolve(name_or_entity)
        if entity is None:
            raise UnknownTopicError(name_or_entity)
        return entity

    # -- views -----------------------------------------------------------------------------
    def create_view(self, name: str, source: str, kind: FilterKind, expression: str) -> View:
        """Register a view; raises what :meth:`check_view` raises."""
        view = self.check_view(name, source, kind, expression)
        self.views.add(view)
        return view

    def check_view(self, name: str, source: str, kind: FilterKind, expression: str) -> View:
        """The view these arguments define, not registered. Raises ExpressionError (bad
        expression) or ViewError (name taken, no such source, a view as source, SQL off)."""
        if self.store.topics.taken(name):  # served, or being created or deleted
            raise ViewExistsError(f"a topic named {name!r} already exists")
        meta = self.store.topics.get(source)
        if meta is None:
            if self.views.get(source) is not None:
                raise ViewError(f"the source {source!r} is a view; a view's source must be a topic")
            raise ViewError(f"the source topic {source!r} does not exist")
        if kind == "sql" and not self.config.enable_property_filter:
            raise ViewError("SQL92 views are disabled on this broker (enablePropertyFilter=false); use a tag view")
        return self.views.new(name, source, kind, expression)

    def check_topic_deletable(self, name: str) -> None:
        """Raise SourceInUseError (a ViewError) naming the views that read from topic ``name``
        (they must be deleted first: no cascade)."""
        dependents = [v.name for v in self.views.of_source(name)]
        if dependents:
            raise SourceInUseError(
                f"topic {name!r} is the source of view(s) {', '.join(dependents)}; delete them first",
                tuple(dependents),
            )

    def delete_view(self, name: str) -> View:
        """Delete view ``name`` and the offsets groups committed on it; its source is not
        touched. Offsets go first, durably, as for a topic (storage's delete_topic): a crash
        in between leaves the view without committed offsets, never a view re-created under
        the same name with stale ones."""
        if self.views.get(name) is None:
            raise ViewError(f"no view named {name!r}")
        self.store.offsets.delete_topic(name)
        self.store.offsets.flush()
        return self.views.delete(name)

    def delete(self, name: str) -> TopicMeta | View:
        """DeleteTopics for any name: a view is deleted alone; a topic only when no view reads
        it (SourceInUseError); UnknownTopicError when neither exists."""
        if self.views.get(name) is not None:
            return self.delete_view(name)
        self._check_deletable(name)
        return self.store.delete_topic(name)

    async def delete_many(self, names: list[str]) -> list[TopicMeta | View | Exception]:
        """``delete`` for each name, in order (views first if they come first), the topics
        with one metadata write (MessageStore.delete_topics): each gets what was deleted or
        its error."""
        outcomes: list[TopicMeta | View | Exception | None] = [None] * len(names)
        topics: list[int] = []
        for i, name in enumerate(names):
            try:
                if self.views.get(name) is not None:
                    outcomes[i] = self.delete_view(name)
                    continue
                self._check_deletable(name)
            except Exception as exc:  # noqa: BLE001  # the caller maps it to the name's error code
                outcomes[i] = exc
                continue
            topics.append(i)
        for i, outcome in zip(topics, await self.store.delete_topics([names[i] for i in topics])):
            outcomes[i] = outcome
        return outcomes  # type: ignore[return-value]

    def _check_deletable(self, name: str) -> None:
        if name in SYSTEM_TOPICS:
            raise SystemTopicError(f"{name!r} is a system topic and cannot be deleted")
        if self.store.topics.get(name) is not None:
            self.check_topic_deletable(name)
