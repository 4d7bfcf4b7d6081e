"""The console page's JSON API: topics, groups, views, delay queues, half messages, dead letters,
client quotas.

Documents are built when asked for, from adapter.broker_state (the numbers /metrics shows
too), so the page and a Prometheus graph never disagree; partition sizes, which cost disk
reads, come through adapter.console_sizes (bounded in loop time, so a size may lag). Rates
and lag over time come from adapter.console_history: ``sample`` reads the topics' end
offsets, the positions groups reached and their lags every few seconds (WatchPort runs it);
nothing is counted on the produce or fetch path for them.

Resending dead letters runs ``rmqk dlq resend GROUP --json`` against this broker in a child
process: the command line's logic (what was resent is the committed offset of
``rmq_dlq_resend.GROUP``, so a second click resends nothing new) is used as it is, not
written a second time, and the broker's loop only waits for the child. It needs a PLAINTEXT
listener to connect to (the console has no client credentials of its own).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable

from rmqkafka.rmqsemantics.scheduler import DLQ_PREFIX
from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS
from rmqkafka.rmqsemantics.views import View

from .broker_state import (
    OPEN_TXN_STATES,
    dlq_counts,
    group_members,
    group_offsets,
    retry_counts,
    share_partitions,
    topic_partitions,
)
from .console_history import RATE_MIN_SPAN_S, ConsoleHistory, Sample
from .console_sizes import PartitionSizes
from .context import BrokerContext
from .handlers.describe_log_dirs import partition_size

RESEND_GROUP_PREFIX = "rmq_dlq_resend."  # rmqkafka.cli.dlq.RESEND_GROUP_PREFIX
RESEND_TIMEOUT_S = 60.0
RESEND_LIMIT = 10_000  # dead letters per resend: the child's memory and its --json answer grow with them
QUOTAS_SHOWN = 100  # quota entities and throttled clients listed on the page
HALF_MESSAGES_SHOWN = 100


class ConsoleApi:
    """``context`` returns the broker's context while it serves (None otherwise);
    ``bootstrap`` the HOST:PORT of a PLAINTEXT listener, or None."""

    def __init__(self, context: Callable[[], BrokerContext | None], bootstrap: Callable[[], str | None]) -> None:
        self._context = context
        self._bootstrap = bootstrap
        self._resending = False  # a dead-letter resend's child process is running
        self.history = ConsoleHistory()
        self.sizes = PartitionSizes()

    def context(self) -> BrokerContext | None:
        return self._context()

    # -- documents ---------------------------------------------------------------------------
    def topics(self, ctx: BrokerContext) -> dict:
        by_topic: dict[str, list[dict]] = {}
        ends: dict[str, int] = {}
        cleaner = ctx.store.cleaner
        entries = topic_partitions(ctx)
        sizes = self.sizes.sizes(entries, clock=ctx.clock, size_of=lambda entry: partition_size(ctx, entry.log))
        for entry, size in zip(entries, sizes, strict=True):
            doc = {"partition": entry.partition, "start": entry.start, "end": entry.end,
                   "messages": entry.end - entry.start, "size_bytes": size}
            progress = cleaner.progress.get((entry.topic, entry.partition))
            if progress is not None:  # a compacted partition the cleaner has looked at
                doc["cleaner"] = {"cleaned_to": progress.cleaned_end, "dirty_ratio": round(progress.dirty_ratio, 4),
                                  "last_run_ms": progress.last_run_ms, "last_error": progress.last_error}
            by_topic.setdefault(entry.topic, []).append(doc)
            ends[entry.topic] = ends.get(entry.topic, 0) + entry.end
        now = ctx.clock.monotonic()
        topics = []
        for name, partitions in by_topic.items():
            meta = ctx.store.topics.get(name)
            topics.append({
                "name": name, "partitions": partitions,
                "messages": sum(p["messages"] for p in partitions),
                "size_bytes": None if any(p["size_bytes"] is None for p in partitions)
                else sum(p["size_bytes"] for p in partitions),
                "rate_per_s": self.history.rate("produced", name, now, ends[name]),
                "configs": dict(meta.configs) if meta is not None else {},
            })
        return {"topics": topics, "rate_min_span_s": RATE_MIN_SPAN_S, "sizes_stale": self.sizes.stale,
                "cleaner": {"runs": cleaner.runs, "read_bytes": cleaner.bytes_read,
                            "written_bytes": cleaner.bytes_written, "reclaimed_bytes": cleaner.bytes_reclaimed,
                            "failures": cleaner.failures}}

    # -- history -----------------------------------------------------------------------------
    def sample(self, ctx: BrokerContext) -> None:
        """Record one sample of the levels the charts show (adapter.console_history)."""
        self.history.record(ctx.clock.monotonic(), ctx.clock.now_ms(), levels(ctx))

    def history_document(self, ctx: BrokerContext) -> dict:  # noqa: ARG002 - the documents' signature
        return self.history.document()

    def groups(self, ctx: BrokerContext) -> dict:
        offsets: dict[str, list[dict]] = {}
        for entry in group_offsets(ctx):
            offsets.setdefault(entry.group, []).append(
                {"topic": entry.topic, "partition": entry.partition, "committed": entry.committed,
                 "end": entry.end, "lag": entry.lag})
        groups = []
        for group_id in ctx.groups.known_group_ids():
            state = ctx.groups.state_of(group_id)
            live = ctx.groups.groups.get(group_id)
            rows = offsets.get(group_id, [])
            consumer = ctx.groups.consumer.groups.get(group_id)
            share = ctx.groups.share.groups.get(group_id)
            if consumer is not None:  # KIP-848: the broker's assignor, a group epoch
                protocol, generation = consumer.assignor_name or None, consumer.epoch
            elif share is not None:  # KIP-932: the simple assignor, a group epoch
                protocol, generation = ctx.groups.share.assignor_name, share.epoch
            else:
                protocol = live.protocol_name if live is not None else None
                generation = live.generation_id if live is not None else None
            groups.append({
                "group": group_id, "type": ctx.groups.group_type(group_id),
                "state": state.value if state is not None else None,
                "protocol": protocol, "generation": generation,
                "members": group_members(ctx, group_id), "offsets": rows,
                "lag": sum(r["lag"] or 0 for r in rows),
                "share_partitions": share_partitions(ctx, group_id) if ctx.groups.group_type(group_id) == "share" else [],
            })
        return {"groups": groups}

    def views(self, ctx: BrokerContext) -> dict:
        views = []
        for view in ctx.semantics.views.all():
            source = ctx.store.topics.get(view.source)
            views.append({"name": view.name, "source": view.source, "kind": view.kind,
                          "expression": view.expression,
                          "partitions": source.partitions if source is not None else 0})
        return {"views": views}

    def delays(self, ctx: BrokerContext) -> dict:
        status = ctx.semantics.scheduler.status()
        status["timers_by_hour"] = {str(k): v for k, v in status["timers_by_hour"].items()}
        status["now_ms"] = ctx.clock.now_ms()
        status["retry"] = [{"group": g, "messages": held, "appended": appended}
                           for g, (held, appended) in sorted(retry_counts(ctx).items())]
        return status

    def transactions(self, ctx: BrokerContext) -> dict:
        halves = ctx.semantics.scheduler.halves.status(limit=HALF_MESSAGES_SHOWN)
        coordinator = ctx.transactions.coordinator
        listing = coordinator.list().transactions
        open_ids = [entry.transactional_id for entry in listing if entry.state in OPEN_TXN_STATES]
        kafka = [{"transactional_id": d.transactional_id, "state": d.state, "producer_id": d.producer_id,
                  "producer_epoch": d.producer_epoch, "start_ms": d.start_time_ms, "timeout_ms": d.timeout_ms,
                  "partitions": [{"topic": t, "partitions": list(ps)} for t, ps in d.topics]}
                 for d in coordinator.describe(open_ids)]
        return {"half_messages": halves, "kafka_open": kafka, "kafka_ids": len(listing)}

    def quotas(self, ctx: BrokerContext) -> dict:
        """The client quotas in force and the clients throttled so far (what /metrics shows as
        rmqk_client_quota_*), the most throttled first."""
        entities = [{"entity": {kind: name for kind, name in entity}, "quotas": values}
                    for entity, values in ctx.client_quotas.store.describe([], False)]
        throttled = sorted(({"quota": key, "user": user, "client_id": client_id, "responses": n, "throttle_ms": ms}
                            for (key, user, client_id), (n, ms) in ctx.client_quotas.throttled.items()),
                           key=lambda t: -t["throttle_ms"])
        return {"entities": entities[:QUOTAS_SHOWN], "entity_count": len(entities),
                "throttled": throttled[:QUOTAS_SHOWN], "throttled_count": len(throttled)}

    def dlq(self, ctx: BrokerContext) -> dict:
        groups = []
        for group, (held, appended) in sorted(dlq_counts(ctx).items()):
            topic = DLQ_PREFIX + group
            resent = ctx.groups.all_committed(RESEND_GROUP_PREFIX + group)
            meta = ctx.store.topics.get(topic)
            built = ctx.store.partitions()
            waiting = 0
            for p in range(meta.partitions if meta is not None else 0):
                plog = built.get((topic, p))
                if plog is None:
                    continue
                position = resent.get((topic, p))
                waiting += plog.next_offset - max(plog.log_start_offset, position.offset if position else 0)
            groups.append({"group": group, "topic": topic, "messages": held, "appended": appended,
                           "not_resent": waiting})
        return {"groups": groups, "resend_available": self._bootstrap() is not None}

    # -- actions -----------------------------------------------------------------------------
    async def resend(self, group: str) -> tuple[int, dict]:
        """Run ``rmqk dlq resend GROUP --json`` against this broker: (HTTP status, document).
        One at a time: a child process is some 50 MB for up to RESEND_TIMEOUT_S, and how many
        requests come is the clients' choice, so another one meanwhile is answered 429. At
        most RESEND_LIMIT dead letters each: the next resend goes on from the position."""
        bootstrap = self._bootstrap()
        if bootstrap is None:
            return 502, {"error": "resending needs a PLAINTEXT listener; use rmqk dlq resend"}
        if self._resending:
            return 429, {"error": "a resend is already running; try again once it finished"}
        self._resending = True
        try:
            return await self._resend(group, bootstrap)
        finally:
            self._resending = False

    async def _resend(self, group: str, bootstrap: str) -> tuple[int, dict]:
        # "--": the group is the command's GROUP, never one of its options ("--help")
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rmqkafka", "dlq", "resend", "--json", "-b", bootstrap,
            "--limit", str(RESEND_LIMIT), "--", group,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(child.communicate(), RESEND_TIMEOUT_S)
        except TimeoutError:
            child.kill()
            await child.wait()
            return 502, {"error": f"rmqk dlq resend did not finish within {RESEND_TIMEOUT_S:g} s"}
        message = " ".join(err.decode("utf-8", "replace").split())
        try:
            result = json.loads(out) if out.strip() else {}
        except ValueError:
            result = {}
        sent = sum(1 for entry in result.get("resent", ()) if entry.get("sent"))
        document = {"group": group, "status": child.returncode, "resent": sent, "message": message,
                    "result": result}
        return (200 if child.returncode == 0 else 502), document


def levels(ctx: BrokerContext) -> Sample:
    """What the history samples: per topic the sum of its end offsets and of the positions
    groups reached on it (a view's readers count on its source topic), per group its lag.

    A classic or consumer-protocol group's position is its committed offset; a share group's
    is each share-partition's start offset (SPSO), which moves as records are acknowledged.
    One pass over the partitions and committed offsets, as a /metrics scrape makes (the
    produced levels straight from the store's table: partitions never used hold nothing)."""
    produced = {meta.name: 0 for meta in ctx.store.topics.all() if meta.name not in SYSTEM_TOPICS}
    for (topic, _), plog in ctx.store.partitions().items():
        if topic in produced:
            produced[topic] += plog.next_offset
    consumed = dict.fromkeys(produced, 0)  # a group's first commit shows as growth, not a start
    lag: dict[str, int] = {}
    sources: dict[str, str | None] = {}

    def source_of(name: str) -> str | None:
        if name not in sources:
            entity = ctx.semantics.resolve(name)
            sources[name] = None if entity is None else entity.source if isinstance(entity, View) else entity.name
        return sources[name]

    for entry in group_offsets(ctx):
        topic = source_of(entry.topic)
        if topic in produced:
            consumed[topic] = consumed.get(topic, 0) + entry.committed
        lag[entry.group] = lag.get(entry.group, 0) + (entry.lag or 0)
    for group_id in ctx.groups.share.groups:
        for p in share_partitions(ctx, group_id):
            topic = source_of(p["topic"])
            if p["start"] is not None and topic in produced:
                consumed[topic] = consumed.get(topic, 0) + p["start"]
            lag[group_id] = lag.get(group_id, 0) + (p["lag"] or 0)
    return Sample(produced, consumed, lag)
