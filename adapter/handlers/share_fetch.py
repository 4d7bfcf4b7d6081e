"""ShareFetch (78), v1-v2: a share group member's acknowledgements and its next records
(KIP-932; Kafka's KafkaApis.handleShareFetchRequest).

Order, as Kafka: the request as a whole (group and member id, READ on the group), then the
share session (adapter.share.sessions: epoch 0 opens, -1 closes, others must match), then the
piggybacked acknowledgements (each partition's outcome in AcknowledgeErrorCode), then, unless
the epoch is final, an acquisition over every partition of the session.

Acquisition (adapter.share.partitions): MaxRecords across the request, BatchSize splitting the
acquired ranges, MaxBytes capped by ``fetch.max.bytes`` with the first batch always allowed
(KIP-74), whole batches holding acquired records. When nothing is acquired the request waits
like Fetch (adapter.long_poll) until an append, a release or an expired lock on one of its
partitions, or MaxWaitMs. MinBytes, as Kafka's DelayedShareFetch: before acquiring, the bytes
of log past each partition's next fetch offset are summed (a partition with a RocketMQ retry
due, or one that may get no state, counts as enough), and while they are below MinBytes the request waits
(woken like the empty wait) without acquiring anything, so no lock runs down while it waits;
once they suffice, or at MaxWaitMs, it acquires what there is and answers as soon as that is
anything. (On a view the source's bytes are counted, filtered or not.) MaxRecords is Kafka's soft limit by default (ShareAcquireMode 0,
batch_optimized, and every v1 request): new records are acquired to the end of the batch holding
the last one counted, so a fetch returns whole batches acquired whole (KIP-1206's "current
behaviour"); v2's record_limit (1) never exceeds it. v2's IsRenewAck (KIP-1222): such a request
acknowledges only, and any non-zero MaxWaitMs, MinBytes, MaxBytes or MaxRecords is
INVALID_REQUEST. The RENEW type (4, v2 on) restarts the acquisition lock of records the
member holds (SharePartition.acknowledge); with the group config
``share.renew.acknowledge.enable=false`` it is INVALID_RECORD_STATE, as in Kafka. In a v1
request, or one without IsRenewAck, it is the partition's AcknowledgeErrorCode
INVALID_REQUEST (its acknowledgements refused whole, the fetch goes on: _share.acknowledge).

Partitions in the answer: all the session's on the request opening it, else those with
records, an error or acknowledgements. A partition whose share-partition has no state and that
the group's coordinator assigns to no member gets UNKNOWN_TOPIC_OR_PARTITION (Kafka: state is
initialized only for assigned partitions, and reading an uninitialized one fails so). Per-topic errors: UNKNOWN_TOPIC_ID,
TOPIC_AUTHORIZATION_FAILED (READ on the topic).

Client quotas (adapter.client_quotas): MaxBytes is bounded by what ``consumer_byte_rate``
lets through in one quota window, and the answer's bytes and time are charged as a Fetch's;
the answer keeps its acquired records and carries the throttle time (KIP-219 muting follows).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..client_quotas import CHARGE
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..long_poll import WaitKey
from ..share.partitions import UnknownSharePartition
from ..share.sessions import ShareSessionError
from . import _share

API_KEY = 78
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (KIP-1206, v2)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    cls = response_type(request)
    refusal, message = _share.request_refusal(ctx, body.group_id, body.member_id)
    if refusal is not ErrorCode.none:
        return _whole(cls, refusal, message)
    renew = getattr(body, "is_renew_ack", False)
    if renew and (body.max_bytes or body.min_bytes or body.max_records or body.max_wait.total_seconds()):
        # KIP-1222: a renew-ack fetch carries acknowledgements only, with every limit 0
        return _whole(cls, ErrorCode.invalid_request, "A renew acknowledgement fetch must not fetch records")
    shares = _share.manager(ctx)
    group_id, member_id = body.group_id, body.member_id
    acks = {(t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in body.topics for p in t.partitions if p.acknowledgement_batches}
    wanted = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
    try:
        context = shares.sessions.fetch_context(group_id, member_id, body.share_session_epoch, wanted,
                                                forgotten, bool(acks))
    except ShareSessionError as exc:
        return _whole(cls, _share.session_code(exc), str(exc))
    settings = shares.settings_for(group_id)
    charge = CHARGE.get()
    entries: dict[tuple, dict] = {}

    def entry(topic_id, partition: int) -> dict:
        key = (topic_id, partition)
        if key not in entries:
            entries[key] = dict(partition_index=partition, error_code=ErrorCode.none, acknowledge_error_code=0,
                                current_leader=_share.NO_LEADER, records=b"", acquired_records=[])
        return entries[key]

    for (topic_id, partition), raw in acks.items():
        meta, code = _share.topic_refusal(ctx, topic_id)
        message = None
        if meta is not None:
            code, message = _share.acknowledge(ctx, group_id, member_id, meta, partition, raw,
                                                request.api_version, renew)
        e = entry(topic_id, partition)
        e["acknowledge_error_code"], e["acknowledge_error_message"] = int(code), message
    if acks:
        await _share.durable(ctx)
    if context.final:
        shares.session_closed(group_id, member_id)
    elif not renew:
        targets = [] if body.max_records <= 0 else _targets(ctx, context.partitions, entry)
        if len(targets) > 1:  # each fetch starts at another partition, so MaxRecords starves none
            turn = body.share_session_epoch % len(targets)
            targets = targets[turn:] + targets[:turn]
        if context.full:
            for topic_id, partition in context.partitions:
                entry(topic_id, partition)
        if targets:
            await _acquire(ctx, body, group_id, member_id, targets, entry, ctx.client_quotas.fetch_limit(charge))
    throttle_ms = 0
    if charge is not None:  # consumer_byte_rate and request_percentage, as a Fetch
        throttle_ms = ctx.client_quotas.charge_share_fetch(charge, sum(len(e["records"]) for e in entries.values()))
    return make(cls, throttle_time=throttle_ms, error_code=ErrorCode.none,
                acquisition_lock_timeout=settings.record_lock_duration_ms,
                responses=_by_topic(entries), node_endpoints=())


def _targets(ctx: BrokerContext, partitions, entry) -> list:
    """The session's partitions to acquire from: (topic id, meta, partition); the others
    get their error."""
    out = []
    for topic_id, partition in partitions:
        meta, code = _share.topic_refusal(ctx, topic_id)
        if meta is not None and not _share.partition_exists(ctx, meta, partition):
            code = ErrorCode.unknown_topic_or_partition
        if code is not ErrorCode.none:
            entry(topic_id, partition)["error_code"] = code
            continue
        out.append((topic_id, meta, partition))
    return out


async def _acquire(ctx: BrokerContext, body, group_id: str, member_id: str, targets: list, entry,
                   quota_bytes: float | None) -> None:
    """Acquire across the targets, waiting as the docstring above says. ``quota_bytes``: what
    the client's consumer_byte_rate lets through in one quota window (None: no quota), a
    bound on MaxBytes as for Fetch."""
    shares = _share.manager(ctx)
    strict = getattr(body, "share_acquire_mode", BATCH_OPTIMIZED) == RECORD_LIMIT  # v2 on
    deadline = ctx.clock.monotonic() + body.max_wait.total_seconds()
    keys: list[WaitKey] = [ctx.semantics.arrivals(meta, p) for _, meta, p in targets]
    while True:
        remaining = deadline - ctx.clock.monotonic()
        if body.min_bytes > 1 and remaining > 0 and _available(ctx, group_id, targets, body.min_bytes) < body.min_bytes:
            await ctx.waiters.wait(keys, remaining)
            if deadline - ctx.clock.monotonic() > 0:
                continue  # woken: count again
        budget = min(body.max_bytes, ctx.config.fetch_max_bytes)
        if quota_bytes is not None:
            budget = int(min(budget, quota_bytes))
        records_left = body.max_records
        got = False
        for topic_id, meta, partition in targets:
            if records_left <= 0:
                break
            try:
                fetched = shares.acquire(group_id, member_id, meta, partition, records_left, body.batch_size,
                                         max(budget, 0), min_one=not got, strict=strict)
            except UnknownSharePartition:  # no state, and no member is assigned it
                entry(topic_id, partition)["error_code"] = ErrorCode.unknown_topic_or_partition
                got = True
                continue
            except Exception as exc:
                entry(topic_id, partition)["error_code"] = error_code_for(exc)
                got = True  # answer the error at once
                continue
            if not fetched.acquired:
                continue
            got = True
            records_left -= sum(r.last_offset - r.first_offset + 1 for r in fetched.acquired)
            budget -= fetched.size
            e = entry(topic_id, partition)
            e["records"] = b"".join(fetched.batches)
            e["acquired_records"] = [dict(first_offset=r.first_offset, last_offset=r.last_offset,
                                          delivery_count=r.delivery_count) for r in fetched.acquired]
        remaining = deadline - ctx.clock.monotonic()
        if got or remaining <= 0:
            return
        await ctx.waiters.wait(keys, remaining)  # on a timeout, one more look, then the answer


def _available(ctx: BrokerContext, group_id: str, targets: list, min_bytes: int) -> int:
    """Bytes acquirable across the targets, counted up to ``min_bytes``."""
    shares = _share.manager(ctx)
    total = 0
    for _, meta, partition in targets:
        try:
            found = shares.bytes_available(group_id, meta, partition, min_bytes - total)
        except Exception:  # the acquisition meets the same error and answers it
            return min_bytes
        if found is None:
            return min_bytes
        total += found
        if total >= min_bytes:
            break
    return total


def _whole(cls, code: ErrorCode, message: str | None):
    return make(cls, throttle_time=0, error_code=code, error_message=message, acquisition_lock_timeout=0,
                responses=(), node_endpoints=())


def _by_topic(entries: dict[tuple, dict]) -> list[dict]:
    topics: dict = {}
    for (topic_id, _), e in entries.items():
        topics.setdefault(topic_id, []).append(e)
    return [dict(topic_id=topic_id, partitions=parts) for topic_id, parts in topics.items()]
