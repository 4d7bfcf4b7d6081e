"""Fetch (1): whole batches from the consume queue, with long polling.

A requested offset inside a batch returns that whole batch (the client drops the leading
records). ``max_bytes`` (capped by the broker's ``fetch.max.bytes``, as in Kafka) and
``partition_max_bytes`` are honoured, except that the first
batch of the first partition with data is always returned (KIP-74) so no consumer gets stuck
on a large batch. When less than ``min_bytes`` is available the request waits until an
append to one of its partitions wakes it or ``max_wait`` passes; nothing sleep-polls.

A view (a topic name or id that the semantics layer resolves to a subscription view) is read
through ``Semantics.read``: its source partition's batches, filtered, with the source's
offsets, log start and high watermark. Only batches carrying records count toward
``min_bytes`` (``record_bytes``), so a view's consumer waits for matching records, not for
gaps; a wait on a view is woken only by an append holding a record of the view (the source
partition's waiter with the view's test, see long_poll); at ``max_wait`` the answer covers
whatever gap the source has grown meanwhile, so the consumer's position keeps up with it.

Transactions: every answer carries the partition's last stable offset (LSO). With
isolation_level read_committed (1) nothing at or past the LSO is returned (for a view too:
its source's LSO), and ``aborted_transactions`` lists the aborted transactions with records
in [fetch offset, end of the last batch returned], which the client drops; a read_committed
fetch that finds nothing below the LSO waits like any other, and the end marker's append
wakes it.

Authorization: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions (before
anything says whether the topic exists). A fetch that claims to come from a follower
(replica id >= 0) reads nothing: this broker has no followers, so it gets
NOT_LEADER_OR_FOLLOWER (TOPIC_AUTHORIZATION_FAILED without CLUSTER_ACTION, as in Kafka).

Client quotas (adapter.client_quotas, Kafka's): with a ``consumer_byte_rate`` quota, a
fetch carries at most what the quota lets through in one window; the response's bytes count
against it, and a response that takes the client over its quota (or over its
``request_percentage``) is not sent: the answer is an empty response with the throttle time,
the bytes are taken back, and the connection is muted for that time.

Fetch sessions (KIP-227, adapter.fetch_sessions): a request with epoch 0 is answered in full
and opens a session of its partitions when the cache has room (its id in the answer); an
incremental request (epoch > 0) names only what changed, every partition of its session is
read (READ checked on each, listed or not) in the session's order, and only partitions with
records, an error, or a high watermark or log start offset the client has not been told are
answered. The session remembers an answer only when it is sent: a throttled answer leaves it
as it was, as in Kafka. Epoch -1 is answered in full with no session.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from rmqkafka.storage import record_batch
from rmqkafka.storage.errors import OffsetOutOfRangeError

from ..client_quotas import CHARGE
from ..codec import Encoded, Request, encode_fetch_response
from ..context import SESSION, BrokerContext
from ..errors import error_code_for
from ..fetch_sessions import Answered
from ..long_poll import WaitKey
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 1
READ_COMMITTED = 1
NO_LIMIT = 1 << 31
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    version = request.api_version
    context = ctx.fetch_sessions.new_context(
        version, getattr(body, "session_id", 0), getattr(body, "session_epoch", -1), SESSION.get().principal,
        _wanted(body, version), _forgotten(body, version))
    if context.error != ErrorCode.none:
        return Encoded(encode_fetch_response(version, context.error, 0, ()))
    max_wait = body.max_wait.total_seconds()
    deadline = ctx.clock.monotonic() + max_wait
    charge = CHARGE.get()
    quota_bytes = ctx.client_quotas.fetch_limit(charge)
    # Kafka's: no more than a quota lets through in one window (and min_bytes within that)
    max_bytes = NO_LIMIT if quota_bytes is None else int(min(quota_bytes, NO_LIMIT))
    min_bytes = min(body.min_bytes, max_bytes)
    while True:
        answered, total, keys, failed = _read(ctx, request, context.partitions, max_bytes)
        remaining = deadline - ctx.clock.monotonic()
        if total >= min_bytes or failed or remaining <= 0 or not keys:
            break
        if not await ctx.waiters.wait(keys, remaining):
            answered, total, keys, failed = _read(ctx, request, context.partitions, max_bytes)
            break
    if charge is not None:
        # Kafka's order: the size of what would be sent is charged before the session
        # remembers anything, and a throttled answer leaves the session as it was
        size = _size(encode_fetch_response(version, ErrorCode.none, 0, _by_topic(context.select(answered), version)))
        throttle_ms = ctx.client_quotas.charge_fetch(charge, size)
        if throttle_ms:  # Kafka's throttled fetch: nothing, the time to wait
            error, session_id = context.throttled()
            return Encoded(encode_fetch_response(version, error, session_id, (), throttle_ms))
    error, session_id, chosen = context.commit(answered)
    # The batches go out as they were read: no join, no copy (see codec.fast_responses).
    return Encoded(encode_fetch_response(version, error, session_id, _by_topic(chosen, version)))


def _size(parts) -> int:
    return sum(memoryview(p).nbytes for p in parts)


def _topic_key(topic, by_id: bool):
    return topic.topic_id if by_id else topic.topic


def _wanted(body, version: int) -> list[tuple]:
    """The request's partitions in its order, each as (topic name or id, its entry)."""
    by_id = version >= 13
    return [(_topic_key(topic, by_id), req) for topic in body.topics for req in topic.partitions]


def _forgotten(body, version: int) -> list[tuple]:
    by_id = version >= 13
    return [(_topic_key(topic, by_id), partition)
            for topic in getattr(body, "forgotten_topics_data", ()) for partition in topic.partitions]


def _by_topic(answered: list[Answered], version: int) -> list[dict]:
    """Response topics: consecutive partitions of one topic share an entry (Kafka's
    FetchResponse.of; a session's fairness order may name a topic more than once)."""
    by_id = version >= 13
    responses: list[dict] = []
    last = None
    for a in answered:
        if last is None or a.topic != last[0]:
            partitions: list[dict] = []
            name = "" if by_id else a.topic
            responses.append(dict(topic=name, topic_id=a.topic if by_id else ZERO_UUID, partitions=partitions))
            last = (a.topic, partitions)
        last[1].append(a.entry)
    return responses


def _replica_id(body) -> int:
    """The fetching replica's id: -1 for consumers (v15+ moved it into replica_state)."""
    state = getattr(body, "replica_state", None)
    return state.replica_id if state is not None else getattr(body, "replica_id", -1)


def _read(ctx: BrokerContext, request: Request, wanted, max_bytes: int
          ) -> tuple[list[Answered], int, list[WaitKey], bool]:
    """One pass over ``wanted`` ((topic, partition entry) pairs, in reading order): (the
    partitions answered, bytes toward min_bytes, partitions to wait on, any error met reading a partition
    that ends the wait at once, as in Kafka). A read
    that stopped on its work limit counts as satisfying min_bytes: there is more to read at
    once. READ is checked on every topic at every pass: a session's partitions too."""
    body = request.body
    semantics = ctx.semantics
    by_id = request.api_version >= 13
    budget = min(getattr(body, "max_bytes", NO_LIMIT), ctx.config.fetch_max_bytes, max_bytes)
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    aborted = () if committed else None
    total = 0  # bytes toward min_bytes
    sent = 0
    failed = False
    keys: list[WaitKey] = []
    answered: list[Answered] = []
    follower = _replica_id(body) >= 0
    topics: dict = {}  # topic name or id -> (metadata, refusal), once per pass
    for topic, req in wanted:
        known = topics.get(topic)
        if known is None:
            if by_id:
                meta = semantics.resolve_id(topic)
                name = meta.name if meta else None
            else:
                name = topic
                meta = semantics.resolve(name)
            refusal = None
            if follower:
                refusal = (ErrorCode.not_leader_or_follower
                           if ctx.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
                           else ErrorCode.topic_authorization_failed)
            elif name is not None and not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, name):
                refusal = ErrorCode.topic_authorization_failed
            known = topics[topic] = (meta, refusal)
        meta, refusal = known
        entry = dict(
            partition_index=req.partition,
            error_code=ErrorCode.none,
            high_watermark=-1,
            last_stable_offset=-1,
            log_start_offset=-1,
            aborted_transactions=aborted,
            preferred_read_replica=-1,
            records=(),
        )
        answered.append(Answered(req, topic, entry))
        # Kafka answers a refused or unknown partition as erroneous without reading it, and
        # only errors met reading the log end the wait: the others do not stop a long poll.
        if refusal is not None:
            entry["error_code"] = refusal
            failed = failed or follower
            continue
        if meta is None or not 0 <= req.partition < semantics.partition_count(meta):
            entry["error_code"] = (
                ErrorCode.unknown_topic_id if by_id and meta is None else ErrorCode.unknown_topic_or_partition
            )
            continue
        if getattr(req, "current_leader_epoch", -1) > 0:
            entry["error_code"] = ErrorCode.unknown_leader_epoch
            failed = True
            continue
        limit = max(0, min(req.partition_max_bytes, budget))
        try:
            key = semantics.arrivals(meta, req.partition)
            plog = semantics.source_partition(meta, req.partition)
            stable = plog.last_stable_offset
            if committed and stable < plog.next_offset:
                key = (key[0], key[1], None)  # a view's wait: the end marker must wake it too
            keys.append(key)
            result = semantics.read(meta, req.partition, req.fetch_offset, limit, min_one=sent == 0,
                                    max_offset=stable if committed else None)
        except OffsetOutOfRangeError as exc:
            entry["error_code"] = ErrorCode.offset_out_of_range
            entry["high_watermark"] = entry["last_stable_offset"] = exc.log_end_offset
            entry["log_start_offset"] = exc.log_start_offset
            failed = True
            continue
        except Exception as exc:
            entry["error_code"] = error_code_for(exc)
            failed = True
            continue
        entry["high_watermark"] = result.high_watermark
        entry["last_stable_offset"] = stable
        entry["log_start_offset"] = result.log_start_offset
        if result.batches:
            entry["records"] = result.batches
            budget -= result.size
            sent += result.size  # KIP-74: only the response's first batch may exceed limits
            if committed:
                upper = record_batch.next_offset_of(result.batches[-1])
                entry["aborted_transactions"] = [
                    dict(producer_id=pid, first_offset=first)
                    for pid, first in plog.aborted_transactions(req.fetch_offset, upper)
                ]
        # gaps of a view do not count toward min_bytes; a read cut short by its work
        # limit answers at once (its gap already moves the consumer on)
        total += body.min_bytes if result.more else result.record_bytes
    return answered, total, keys, failed
