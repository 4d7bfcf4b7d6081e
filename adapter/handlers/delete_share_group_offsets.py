"""DeleteShareGroupOffsets (92), v0: forget a share group's share-partitions of some topics
(durably); the next fetch starts them where ``share.auto.offset.reset`` says.

DELETE on the group (else GROUP_AUTHORIZATION_FAILED for the request); only an empty group
(NON_EMPTY_GROUP, as Kafka requires). Per topic READ on the topic (else
TOPIC_AUTHORIZATION_FAILED), an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
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

API_KEY = 92
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    cls = response_type(request)
    shares = _share.manager(ctx)
    refusal = _share.offsets_refusal(ctx, body.group_id, AclOperation.DELETE)
    if refusal is not None:
        return make(cls, throttle_time=0, error_code=refusal[0], error_message=refusal[1], responses=())
    responses = []
    for topic in body.topics:
        meta, code = _share.named_topic(ctx, topic.topic_name, AclOperation.READ)
        if code is ErrorCode.none:
            try:
                shares.delete_topic_state(body.group_id, meta.name)
            except Exception as exc:
                code = error_code_for(exc)
        responses.append(dict(topic_name=topic.topic_name,
                              topic_id=ZERO_UUID if meta is None else ctx.semantics.id_of(meta),
                              error_code=code))
    return make(cls, throttle_time=0, error_code=ErrorCode.none, responses=responses)
