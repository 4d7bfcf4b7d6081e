"""Prometheus metrics of one broker: a registry per broker, read from live state at scrape time.

Why a registry per broker and a collector (not module-level Gauges updated as things change):
two brokers in one process (tests do that) must not share numbers, and nothing on the hot
paths should pay for metrics nobody scrapes. The collector below reads the store, the group
and transaction coordinators and the scheduler when /metrics is asked for (adapter.broker_state),
and turns adapter.request_stats' plain counters into histograms.

Names: what Kafka users already graph, with danielqsj/kafka_exporter's names and labels
(``kafka_topic_partition_current_offset{topic,partition}``, ``..._oldest_offset``,
``kafka_consumergroup_current_offset{consumergroup,topic,partition}``, ``..._lag``), and
``rmqk_*`` for the broker itself and for what only this broker has (delay levels, timers,
half messages, retry and dead-letter topics, views). docs: docs/guides/metrics.md.

This module is imported only when a metrics port is configured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from rmqkafka.storage.log_cleaner import LogCleaner

from .broker_state import (
    OPEN_TXN_STATES,
    dlq_counts,
    group_offsets,
    kafka_transactions_by_state,
    retry_counts,
    share_partitions,
    topic_partitions,
)
from .codec.versions import ApiKey
from .context import BrokerContext
from .request_stats import Latencies, RequestStats


def api_name(api_key: int) -> str:
    """Kafka's request name (``Produce``, ``ListOffsets``) for an api key."""
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


# Share-partitions whose rmqk_share_partition_* gauges one scrape shows, at most.
MAX_SHARE_PARTITION_SERIES = 5000
_SHARE_PARTITION_GAUGES = (
    ("start", "start_offset", "Share-partition start offset (SPSO) of a share group"),
    ("end", "end_offset", "High watermark of the partition a share group reads"),
    ("in_flight", "in_flight_records", "Records from SPSO to the end of the share-partition's window"),
    ("acquired", "acquired_records", "Records a share group member holds an acquisition lock on"),
    ("acknowledged", "acknowledged_records", "Acknowledged records still in the share-partition's window"),
    ("archived", "archived_records", "Archived records still in the share-partition's window"),
    ("waiting", "backoff_records", "Available records waiting out a redelivery backoff"),
    ("lag", "lag", "Records from SPSO to the high watermark not yet acknowledged or archived (KIP-1226)"),
    ("dead_letters", "dead_letters", "Records archived by REJECT or the delivery limit since the share-partition's state began (kept across restarts)"),
)


class BrokerCollector:
    """A prometheus_client custom collector over one broker's state (see the module docstring).

    ``context`` returns the broker's context once it serves (None before: only the process and
    request numbers are reported then); ``connections`` the number of open client connections.
    """

    def __init__(self, stats: RequestStats, context: Callable[[], BrokerContext | None],
                 connections: Callable[[], int], ready: Callable[[], bool]) -> None:
        self._stats = stats
        self._context = context
        self._connections = connections
        self._ready = ready

    def describe(self) -> list[Metric]:
        return []  # unchecked collector: its families depend on the state at scrape time

    def collect(self) -> Iterator[Metric]:
        yield from self._broker_metrics()
        ctx = self._context()
        if ctx is None:
            return
        yield from self._kafka_exporter_metrics(ctx)
        yield from self._authentication_metrics(ctx)
        yield from self._storage_metrics(ctx)
        yield from self._rocketmq_metrics(ctx)
        yield from self._client_quota_metrics(ctx)
        yield from self._share_metrics(ctx)
        yield from self._fetch_session_metrics(ctx)

    def _fetch_session_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        """Incremental fetch sessions (KIP-227): Kafka's NumIncrementalFetchSessions,
        NumIncrementalFetchPartitionsCached and IncrementalFetchSessionEvictionsPerSec."""
        cache = ctx.fetch_sessions
        sessions = GaugeMetricFamily("rmqk_fetch_sessions", "Incremental fetch sessions in the cache")
        sessions.add_metric([], len(cache))
        yield sessions
        partitions = GaugeMetricFamily("rmqk_fetch_session_partitions", "Partitions cached by incremental fetch sessions")
        partitions.add_metric([], cache.total_partitions())
        yield partitions
        yield _counter("rmqk_fetch_sessions_evictions", "Fetch sessions evicted to make room for new ones",
                       cache.evictions)

    def _client_quota_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        """Per quota and the (user, client id) it is measured for (Kafka's throttle-time metrics
        of the Produce, Fetch and Request quota types, as totals)."""
        labels = ["quota", "user", "client_id"]
        count = CounterMetricFamily("rmqk_client_quota_throttled_responses",
                                    "Responses that carried a throttle time because of a client quota", labels=labels)
        seconds = CounterMetricFamily("rmqk_client_quota_throttle_seconds",
                                      "Throttle time given to clients (their connection muted for it), by client quota",
                                      labels=labels)
        for (key, user, client_id), (n, ms) in sorted(ctx.client_quotas.throttled.items()):
            count.add_metric([key, user, client_id], n)
            seconds.add_metric([key, user, client_id], ms / 1000)
        yield count
        yield seconds

    # -- the broker process ------------------------------------------------------------------
    def _broker_metrics(self) -> Iterator[Metric]:
        stats = self._stats
        ready = GaugeMetricFamily("rmqk_ready", "1 while the broker serves clients, else 0")
        ready.add_metric([], 1 if self._ready() else 0)
        yield ready
        requests = HistogramMetricFamily(
            "rmqk_request_duration_seconds",
            "Time from a decoded request to its response, per Kafka API (a Fetch's long poll included); "
            "its _count is the request count", labels=["api"])
        for api_key, latencies in sorted(stats.apis.items()):
            requests.add_metric([api_name(api_key)], latencies.cumulative(), latencies.sum)
        yield requests
        received = CounterMetricFamily("rmqk_network_received_bytes", "Bytes read from client connections")
        received.add_metric([], stats.bytes_in)
        yield received
        sent = CounterMetricFamily("rmqk_network_sent_bytes", "Response bytes written to client connections")
        sent.add_metric([], stats.bytes_out)
        yield sent
        open_now = GaugeMetricFamily("rmqk_connections", "Open client connections")
        open_now.add_metric([], self._connections())
        yield open_now
        accepted = CounterMetricFamily("rmqk_connections_accepted", "Client connections accepted")
        accepted.add_metric([], stats.connections_accepted)
        yield accepted
        yield _histogram("rmqk_fsync_duration_seconds",
                         "fdatasync rounds of the store (group commits, checkpoints), thread hand-off included",
                         stats.fsync)

    # -- share groups (KIP-932) ---------------------------------------------------------------
    def _share_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        if ctx.shares is None:
            return
        m = ctx.shares.metrics
        for name, doc, value in (
            ("rmqk_share_acquired_records", "Records acquired by share group members", m.acquisitions),
            ("rmqk_share_redelivered_records", "Acquisitions of records delivered before", m.redeliveries),
            ("rmqk_share_lock_expiries", "Acquisition locks that expired", m.lock_expiries),
            ("rmqk_share_dead_letters", "Records archived by REJECT or the delivery limit", m.dead_letters),
        ):
            yield _counter(name, doc, value)
        acks = CounterMetricFamily("rmqk_share_acknowledged_records", "Records acknowledged, by type",
                                   labels=["type"])
        for kind in ("accept", "release", "reject", "gap"):
            acks.add_metric([kind], m.acks.get(kind, 0))
        yield acks
        sessions = GaugeMetricFamily("rmqk_share_sessions", "Open share sessions")
        sessions.add_metric([], len(ctx.shares.sessions))
        yield sessions
        yield from self._share_partition_metrics(ctx)

    def _share_partition_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        """Per share-partition gauges, labelled like kafka_consumergroup_lag (one series per
        share-partition and figure), for at most MAX_SHARE_PARTITION_SERIES share-partitions a
        scrape: past that the rest are counted in rmqk_share_partitions_omitted, so a broker
        with many groups cannot make a scrape (or the Prometheus server) unbounded."""
        labels = ["sharegroup", "topic", "partition"]
        families = {key: GaugeMetricFamily(f"rmqk_share_partition_{name}", doc, labels=labels)
                    for key, name, doc in _SHARE_PARTITION_GAUGES}
        shown = omitted = 0
        for group_id in sorted(ctx.groups.known_group_ids()):
            if ctx.groups.group_type(group_id) != "share":
                continue
            for row in share_partitions(ctx, group_id):
                if row["start"] is None:
                    continue
                if shown >= MAX_SHARE_PARTITION_SERIES:
                    omitted += 1
                    continue
                shown += 1
                values = [group_id, row["topic"], str(row["partition"])]
                for key, family in families.items():
                    if row[key] is not None:
                        family.add_metric(values, row[key])
        yield from families.values()
        dropped = GaugeMetricFamily("rmqk_share_partitions_omitted",
                                    f"Share-partitions beyond the {MAX_SHARE_PARTITION_SERIES} shown per scrape")
        dropped.add_metric([], omitted)
        yield dropped

    # -- what kafka_exporter shows -----------------------------------------------------------
    def _kafka_exporter_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        brokers = GaugeMetricFamily("kafka_brokers", "Number of brokers in the cluster")
        brokers.add_metric([], 1)
        yield brokers
        partitions = GaugeMetricFamily("kafka_topic_partitions", "Number of partitions of a topic", labels=["topic"])
        current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                    "Current (next) offset of a partition", labels=["topic", "partition"])
        oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                                   "Oldest offset of a partition", labels=["topic", "partition"])
        counts: dict[str, int] = {}
        for entry in topic_partitions(ctx):
            counts[entry.topic] = counts.get(entry.topic, 0) + 1
            labels = [entry.topic, str(entry.partition)]
            current.add_metric(labels, entry.end)
            oldest.add_metric(labels, entry.start)
        for topic, n in counts.items():
            partitions.add_metric([topic], n)
        yield from (partitions, current, oldest)

        group_current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                          "Committed offset of a consumer group in a partition",
                                          labels=["consumergroup", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Current approximate lag of a consumer group in a partition",
                                labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of a consumer group in a topic",
                                    labels=["consumergroup", "topic"])
        sums: dict[tuple[str, str], int] = {}
        for entry in group_offsets(ctx):
            labels = [entry.group, entry.topic, str(entry.partition)]
            group_current.add_metric(labels, entry.committed)
            if entry.lag is not None:
                lag.add_metric(labels, entry.lag)
                sums[(entry.group, entry.topic)] = sums.get((entry.group, entry.topic), 0) + entry.lag
        for (group, topic), total in sums.items():
            lag_sum.add_metric([group, topic], total)
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a consumer group",
                                    labels=["consumergroup"])
        counts = {group_id: len(group.members) for group_id, group in ctx.groups.groups.items()}
        counts.update((group_id, len(group.members)) for group_id, group in ctx.groups.consumer.groups.items())
        epochs = GaugeMetricFamily("rmqk_consumergroup_epoch",
                                   "Group epoch of a consumer-protocol (KIP-848) group",
                                   labels=["consumergroup"])
        for group_id, count in sorted(counts.items()):
            members.add_metric([group_id], count)
        for group_id, group in sorted(ctx.groups.consumer.groups.items()):
            epochs.add_metric([group_id], group.epoch)
        share_members = GaugeMetricFamily("rmqk_sharegroup_members", "Members of a share group (KIP-932)",
                                          labels=["sharegroup"])
        share_epochs = GaugeMetricFamily("rmqk_sharegroup_epoch", "Group epoch of a share group (KIP-932)",
                                         labels=["sharegroup"])
        share_assigned = GaugeMetricFamily("rmqk_sharegroup_partition_members",
                                           "Members of a share group assigned a partition",
                                           labels=["sharegroup", "topic", "partition"])
        for group_id, group in sorted(ctx.groups.share.groups.items()):
            share_members.add_metric([group_id], len(group.members))
            share_epochs.add_metric([group_id], group.epoch)
            for row in share_partitions(ctx, group_id):
                share_assigned.add_metric([group_id, row["topic"], str(row["partition"])], len(row["members"]))
        yield from (group_current, lag, lag_sum, members, epochs, share_members, share_epochs, share_assigned)

    # -- authentication ----------------------------------------------------------------------
    def _authentication_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        """Kafka's Selector sensors (failed-authentication-total, ...), per listener."""
        events = ctx.security.events
        failed = CounterMetricFamily("rmqk_failed_authentication",
                                     "Failed TLS handshakes and SASL logins (re-authentications included)",
                                     labels=["listener", "mechanism", "reason"])
        for labels, n in sorted(events.failed.items()):
            failed.add_metric(list(labels), n)
        yield failed
        for name, counts, help_text in (
                ("rmqk_successful_authentication", events.succeeded, "Successful SASL logins"),
                ("rmqk_successful_reauthentication", events.reauthenticated,
                 "Successful SASL re-authentications (KIP-368)")):
            family = CounterMetricFamily(name, help_text, labels=["listener", "mechanism"])
            for labels, n in sorted(counts.items()):
                family.add_metric(list(labels), n)
            yield family
        expired = CounterMetricFamily("rmqk_expired_sessions_closed",
                                      "Connections closed because their SASL session expired without "
                                      "re-authentication", labels=["listener"])
        for listener, n in sorted(events.expired.items()):
            expired.add_metric([listener], n)
        yield expired

    # -- the store ---------------------------------------------------------------------------
    def _storage_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        store = ctx.store
        size = GaugeMetricFamily("rmqk_commitlog_size_bytes", "Bytes of the commitlog on disk (all topics share it)")
        size.add_metric([], store.commitlog.size_bytes())
        yield size
        segments = GaugeMetricFamily("rmqk_commitlog_segments", "Segment files of the commitlog")
        segments.add_metric([], len(store.commitlog.segments))
        yield segments
        failed = GaugeMetricFamily("rmqk_storage_failed", "1 once an fsync failed (writes are refused until a restart)")
        failed.add_metric([], 0 if store.failure is None else 1)
        yield failed
        reserve = GaugeMetricFamily("rmqk_disk_reserve_ready",
                                    "1 while the disk reserve exists (appends are refused while it is 0)")
        reserve.add_metric([], int(store.reserve.ready))
        yield reserve
        repairs = CounterMetricFamily("rmqk_index_repairs",
                                      "Runs of damaged consume-queue entries rebuilt from the commitlog")
        repairs.add_metric([], store.index_repairs)
        yield repairs
        stats = store.retention.stats
        for name, help_text, value in (
            ("rmqk_retention_runs", "Retention runs (every log.retention.check.interval.ms)", stats.runs),
            ("rmqk_retention_segments_deleted", "Commitlog segments retention deleted", stats.segments_deleted),
            ("rmqk_retention_reclaimed_bytes", "Bytes of commitlog segments retention deleted", stats.bytes_reclaimed),
            ("rmqk_retention_moved_bytes",
             "Bytes of live batches retention moved out of old segments to the commitlog head", stats.bytes_moved),
        ):
            yield _counter(name, help_text, value)
        yield from _cleaner_metrics(store.cleaner)

    # -- RocketMQ semantics ------------------------------------------------------------------
    def _rocketmq_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        scheduler = ctx.semantics.scheduler
        status = scheduler.status()
        depth = GaugeMetricFamily("rmqk_delay_level_depth", "Records waiting in a delay level",
                                  labels=["level", "delay"])
        next_due = GaugeMetricFamily("rmqk_delay_level_next_due_timestamp_seconds",
                                     "When the next record of a delay level is due (levels with records only)",
                                     labels=["level", "delay"])
        for level in status["levels"]:
            labels = [str(level["level"]), _duration(level["delay_ms"])]
            depth.add_metric(labels, level["depth"])
            if level["next_due_ms"] is not None:
                next_due.add_metric(labels, level["next_due_ms"] / 1000)
        yield from (depth, next_due)
        timers = GaugeMetricFamily("rmqk_timers_pending", "Timer records (TIMER_DELIVER_MS / TIMER_DELAY_SEC) waiting")
        timers.add_metric([], status["timers_pending"])
        yield timers
        for key, help_text in (("delivered", "Delayed, timer and retry records delivered"),
                               ("dead_lettered", "Records moved to a dead-letter topic (rmq_dlq.GROUP)"),
                               ("dropped", "Parked records dropped at delivery (their topic was gone)")):
            counter = CounterMetricFamily(f"rmqk_scheduler_{key}", help_text)
            counter.add_metric([], status.get(key, 0))
            yield counter

        for name, counts, what in (("retry", retry_counts(ctx), "retry topic rmq_retry.GROUP"),
                                   ("dlq", dlq_counts(ctx), "dead-letter topic rmq_dlq.GROUP")):
            held = GaugeMetricFamily(f"rmqk_{name}_messages", f"Records held in the {what}",
                                     labels=["consumergroup"])
            total = CounterMetricFamily(f"rmqk_{name}_appended", f"Records ever appended to the {what}",
                                        labels=["consumergroup"])
            for group, (n_held, n_appended) in sorted(counts.items()):
                held.add_metric([group], n_held)
                total.add_metric([group], n_appended)
            yield from (held, total)

        halves = scheduler.halves
        pending = GaugeMetricFamily("rmqk_half_messages_pending",
                                    "RocketMQ transaction (half) messages waiting for commit or rollback")
        pending.add_metric([], len(halves.pending))
        yield pending
        checks_pending = GaugeMetricFamily("rmqk_half_messages_checked_pending",
                                           "Pending half messages whose producer group was asked at least once")
        checks_pending.add_metric([], halves.pending.checked())
        yield checks_pending
        for key, help_text in (("committed", "Half messages committed"),
                               ("rolled_back", "Half messages rolled back (by the producer or after the last check)"),
                               ("checks_sent", "Back-checks sent to producer groups")):
            counter = CounterMetricFamily(f"rmqk_half_messages_{key}", help_text)
            counter.add_metric([], halves.counters.get(key, 0))
            yield counter

        by_state = kafka_transactions_by_state(ctx)
        txns = GaugeMetricFamily("rmqk_kafka_transactions", "Transactional ids by Kafka transaction state",
                                 labels=["state"])
        for state, n in sorted(by_state.items()):
            txns.add_metric([state], n)
        yield txns
        open_txns = GaugeMetricFamily("rmqk_kafka_transactions_open", "Kafka transactions open (not completed)")
        open_txns.add_metric([], sum(n for state, n in by_state.items() if state in OPEN_TXN_STATES))
        yield open_txns

        views = GaugeMetricFamily("rmqk_view_info", "Subscription views (1 each) with their source and filter kind",
                                  labels=["view", "source", "kind"])
        scanned = CounterMetricFamily("rmqk_view_scanned_records",
                                      "Source offsets read through each view since start-up", labels=["view"])
        matched = CounterMetricFamily("rmqk_view_matched_records",
                                      "Records among them the view's filter passed", labels=["view"])
        fraction = GaugeMetricFamily("rmqk_view_filtered_fraction",
                                     "Share of the source records read through each view that its filter passed",
                                     labels=["view"])
        for view in ctx.semantics.views.all():
            views.add_metric([view.name, view.source, view.kind], 1)
            counts = ctx.semantics.view_reads.get(view.name)
            if counts is not None:
                scanned.add_metric([view.name], counts.scanned)
                matched.add_metric([view.name], counts.matched)
                if counts.scanned:
                    fraction.add_metric([view.name], counts.matched / counts.scanned)
        yield views
        yield scanned
        yield matched
        yield fraction


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    """A counter without labels."""
    family = CounterMetricFamily(name, text)
    family.add_metric([], value)
    return family


def _cleaner_metrics(cleaner: LogCleaner) -> Iterator[Metric]:
    """The log cleaner's totals (Kafka's kafka.log:type=LogCleaner metrics, as counters), and
    per compacted partition its dirty ratio and cleaned offset."""
    for name, text, value in (
        ("rmqk_cleaner_runs", "Cleanings of compacted partitions that wrote a new compacted file", cleaner.runs),
        ("rmqk_cleaner_read_bytes", "Bytes of batches the log cleaner read", cleaner.bytes_read),
        ("rmqk_cleaner_written_bytes", "Bytes of batches the log cleaner wrote", cleaner.bytes_written),
        ("rmqk_cleaner_reclaimed_bytes", "Bytes the log cleaner removed (read less written)", cleaner.bytes_reclaimed),
        ("rmqk_cleaner_failures", "Cleanings that failed (tried again later)", cleaner.failures),
        ("rmqk_cleaner_seconds", "Time spent in cleanings that wrote a file", cleaner.seconds),
    ):
        yield _counter(name, text, value)
    ratio = GaugeMetricFamily("rmqk_cleaner_dirty_ratio",
                              "Dirty bytes / all bytes of a compacted partition at the cleaner's last look",
                              labels=["topic", "partition"])
    cleaned = GaugeMetricFamily("rmqk_cleaner_cleaned_offset",
                                "Offsets below it are served cleaned (the compaction store)",
                                labels=["topic", "partition"])
    for (topic, partition), progress in sorted(cleaner.progress.items()):
        ratio.add_metric([topic, str(partition)], progress.dirty_ratio)
        cleaned.add_metric([topic, str(partition)], progress.cleaned_end)
    yield ratio
    yield cleaned


def _histogram(name: str, help_text: str, latencies: Latencies) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, help_text)
    family.add_metric([], latencies.cumulative(), latencies.sum)
    return family


def _duration(ms: int) -> str:
    """A delay level's delay as RocketMQ writes it: 1s, 5m, 2h."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def new_registry(collector: BrokerCollector) -> CollectorRegistry:
    """A registry of its own for one broker: its collector and the process' CPU and memory."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry


def time_fsyncs(store: object, latencies: Latencies) -> bool:
    """Time the store's fsync rounds into ``latencies`` by wrapping its ``_fdatasync`` (every
    group commit and checkpoint fsync goes through it). Storage knows nothing of metrics; if
    the method is not there (storage changed), fsyncs are simply not timed (returns False)."""
    original = getattr(store, "_fdatasync", None)
    if original is None:
        return False

    async def timed(fds: list[int]) -> None:
        began = time.perf_counter()
        try:
            await original(fds)
        finally:
            latencies.observe(time.perf_counter() - began)

    store._fdatasync = timed  # type: ignore[attr-defined]
    return True
