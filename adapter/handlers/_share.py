"""What the share group handlers share: ShareFetch (78) and ShareAcknowledge (79)'s
authorization, topic id lookup, acknowledgement batches and the Kafka codes of the share
layer's errors; the share offsets APIs' (90-92) group and topic checks."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from rmqkafka.rmqsemantics.share.errors import InvalidRecordState, InvalidShareRequest
from rmqkafka.rmqsemantics.share.partition import MAX_BATCH_OVERSHOOT, AckBatch, AckType

from ..context import BrokerContext
from ..errors import error_code_for
from ..security.acls import AclOperation, ResourceType
from ..share.partitions import Entity, SharePartitionManager, UnknownSharePartition
from ..share.sessions import (
    InvalidSessionEpoch,
    InvalidSessionRequest,
    SessionLimitReached,
    SessionNotFound,
    ShareSessionError,
)

RENEW_SINCE = 2  # KIP-1222: the RENEW type (4) exists in ShareFetch/ShareAcknowledge v2+
_ACK_TYPES = frozenset(int(t) for t in AckType)  # GAP, ACCEPT, RELEASE, REJECT, RENEW
NO_LEADER = dict(leader_id=-1, leader_epoch=-1)
# A request names at most this many acknowledgement batches per partition: each costs a
# check of its range against the in-flight window, which SharePartition bounds. A member may
# hold a whole window (share.partition.max.record.locks, at most 10,000) plus the rest of the
# batch a batch-optimized acquisition began, and acknowledge each record in a batch of its own
# (librdkafka's explicit mode with mixed types).
MAX_ACK_BATCHES = 10_000 + MAX_BATCH_OVERSHOOT

SESSION_CODES: dict[type[ShareSessionError], ErrorCode] = {
    SessionNotFound: ErrorCode.share_session_not_found,
    InvalidSessionEpoch: ErrorCode.invalid_share_session_epoch,
    SessionLimitReached: ErrorCode.share_session_limit_reached,
    InvalidSessionRequest: ErrorCode.invalid_request,
}


def manager(ctx: BrokerContext) -> SharePartitionManager:
    assert ctx.shares is not None, "share groups are served once the broker has started"
    return ctx.shares


def session_code(exc: ShareSessionError) -> ErrorCode:
    return SESSION_CODES[type(exc)]


def topic_refusal(ctx: BrokerContext, topic_id: uuid.UUID | None) -> tuple[Entity | None, ErrorCode]:
    """The topic or view an id names and whether the caller may read it: UNKNOWN_TOPIC_ID for
    an id the broker does not know, TOPIC_AUTHORIZATION_FAILED without READ (on a view, READ
    on its source too: ctx.allowed)."""
    meta = ctx.semantics.resolve_id(topic_id) if topic_id is not None else None
    if meta is None:
        return None, ErrorCode.unknown_topic_id
    if not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, meta.name):
        return None, ErrorCode.topic_authorization_failed
    return meta, ErrorCode.none


def partition_exists(ctx: BrokerContext, meta: Entity, partition: int) -> bool:
    return 0 <= partition < ctx.semantics.partition_count(meta)


def ack_batches(raw) -> list[AckBatch]:
    """The request's batches, adjacent one-type batches of one type joined into one range
    (librdkafka's explicit mode sends a batch per record): the same acknowledgement, checked
    once per range. Anything else (a malformed batch, an overlap) is passed on as sent, for
    SharePartition to refuse."""
    out: list[AckBatch] = []
    run: list[int] | None = None  # [first, last, type] of the run being joined

    def flush() -> None:
        if run is not None:
            out.append(AckBatch(run[0], run[1], (run[2],)))

    for b in raw:
        types = b.acknowledge_types
        if len(types) == 1 and 0 <= b.first_offset <= b.last_offset and types[0] in _ACK_TYPES:
            if run is not None and run[2] == types[0] and run[1] + 1 == b.first_offset:
                run[1] = b.last_offset
                continue
            flush()
            run = [b.first_offset, b.last_offset, types[0]]
            continue
        flush()
        run = None
        out.append(AckBatch(b.first_offset, b.last_offset, tuple(types)))
    flush()
    return out


def acknowledge(ctx: BrokerContext, group_id: str, member_id: str, meta: Entity, partition: int,
                raw_batches, api_version: int, renew_ack: bool = False) -> tuple[ErrorCode, str | None]:
    """Apply one partition's acknowledgements; (Kafka code, message).

    RENEW (type 4) as Kafka's KafkaApis.validateAcknowledgementBatches takes it: a type only
    from v2 on (in v1 the highest type is REJECT, 3) and only in a request with IsRenewAck
    (``renew_ack``). Otherwise the partition's acknowledgements are refused whole with
    INVALID_REQUEST (ShareAcknowledgeResponse.partitionResponse: the code only; the codec adds
    the default message), while the request (top-level NONE) and its other partitions go on;
    ShareFetch still fetches the partition. Checked, as in Kafka, before the partition's
    existence."""
    if len(raw_batches) > MAX_ACK_BATCHES:
        return ErrorCode.invalid_request, f"More than {MAX_ACK_BATCHES} acknowledgement batches"
    batches = ack_batches(raw_batches)
    if not (renew_ack and api_version >= RENEW_SINCE) and any(AckType.RENEW in b.types for b in batches):
        return ErrorCode.invalid_request, None
    if not partition_exists(ctx, meta, partition):
        return ErrorCode.unknown_topic_or_partition, None
    try:
        manager(ctx).acknowledge(group_id, member_id, meta, partition, batches)
    except InvalidRecordState as exc:
        return ErrorCode.invalid_record_state, str(exc)
    except InvalidShareRequest as exc:
        return ErrorCode.invalid_request, str(exc)
    except UnknownSharePartition:
        return ErrorCode.unknown_topic_or_partition, None
    except Exception as exc:
        return error_code_for(exc), None
    return ErrorCode.none, None


async def durable(ctx: BrokerContext) -> None:
    """With flush.policy=sync, answer acknowledgements only once their state records are
    fsynced, as a produce is answered (async: the page cache, as for every write)."""
    if ctx.store.config.flush == "sync":
        await ctx.store.wait_durable(ctx.store.commitlog.end_position)


def offsets_refusal(ctx: BrokerContext, group_id: str, operation: AclOperation) -> tuple[ErrorCode, str | None] | None:
    """Alter/DeleteShareGroupOffsets' whole-request checks, in Kafka's order: ``operation`` on
    the group, then an empty group (NON_EMPTY_GROUP); None when both pass."""
    if not ctx.allowed(operation, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    if not group_is_empty(ctx, group_id):
        return ErrorCode.non_empty_group, "The group is not empty."
    return None


def named_topic(ctx: BrokerContext, name: str, operation: AclOperation) -> tuple[Entity | None, ErrorCode]:
    """A topic or view named in a share offsets request (None unless the code is none), and
    its code: TOPIC_AUTHORIZATION_FAILED without ``operation`` on it (checked first: neither
    its existence nor its id is shown), else UNKNOWN_TOPIC_OR_PARTITION when there is none."""
    if not ctx.allowed(operation, ResourceType.TOPIC, name):
        return None, ErrorCode.topic_authorization_failed
    meta = ctx.semantics.resolve(name)
    if meta is None:
        return None, ErrorCode.unknown_topic_or_partition
    return meta, ErrorCode.none


def group_is_empty(ctx: BrokerContext, group_id: str) -> bool:
    """Whether the share group has no members (AlterShareGroupOffsets and
    DeleteShareGroupOffsets need it empty)."""
    return manager(ctx).group_is_empty(group_id)


def request_refusal(ctx: BrokerContext, group_id: str | None, member_id: str | None) -> tuple[ErrorCode, str | None]:
    """A whole request's refusal: no group or member id (INVALID_REQUEST), no READ on the
    group (GROUP_AUTHORIZATION_FAILED)."""
    if not group_id:
        return ErrorCode.invalid_request, "The group id must not be empty"
    if not member_id:
        return ErrorCode.invalid_request, "The member id must not be empty"
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    return ErrorCode.none, None
