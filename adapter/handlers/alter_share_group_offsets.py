"""AlterShareGroupOffsets (91), v0: set share-partitions' start offsets (SPSO), as
kafka-share-groups.sh --reset-offsets does. Their in-flight state is dropped: the share-partition
starts afresh at the new offset, durably (``__share_group_state``).

READ on the group (else GROUP_AUTHORIZATION_FAILED for the request); only an empty group may be
altered (NON_EMPTY_GROUP, as Kafka requires). Per topic READ on the topic (else
TOPIC_AUTHORIZATION_FAILED), unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION, a negative
offset INVALID_REQUEST.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..security.acls import AclOperation
from . import _share

API_KEY = 91
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    cls = response_type(request)
    shares = _share.manager(ctx)
    refusal = _share.offsets_refusal(ctx, body.group_id, AclOperation.READ)
    if refusal is not None:
        return make(cls, throttle_time=0, error_code=refusal[0], error_message=refusal[1], responses=())
    responses = []
    for topic in body.topics:
        meta, code = _share.named_topic(ctx, topic.topic_name, AclOperation.READ)
        rows = []
        for p in topic.partitions:
            row = code
            if row is ErrorCode.none and not 0 <= p.partition_index < ctx.semantics.partition_count(meta):
                row = ErrorCode.unknown_topic_or_partition
            elif row is ErrorCode.none and p.start_offset < 0:
                row = ErrorCode.invalid_request
            elif row is ErrorCode.none:
                try:
                    shares.alter_start((body.group_id, meta.name, p.partition_index), p.start_offset)
                except Exception as exc:
                    row = error_code_for(exc)
            rows.append(dict(partition_index=p.partition_index, error_code=row))
        responses.append(dict(topic_name=topic.topic_name,
                              topic_id=ctx.semantics.id_of(meta) if code is ErrorCode.none else ZERO_UUID, partitions=rows))
    return make(cls, throttle_time=0, error_code=ErrorCode.none, responses=responses)
