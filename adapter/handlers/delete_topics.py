"""DeleteTopics (20): by name, or (v6) by topic id."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for

API_KEY = 20
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    store = ctx.store
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        result = dict(name=name, topic_id=topic_id or ZERO_UUID, error_code=ErrorCode.none, error_message=None)
        results.append(result)
        if name is None:
            meta = store.topics.by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            if meta is None:
                result["error_code"] = ErrorCode.unknown_topic_id
                continue
            name = result["name"] = meta.name
        try:
            meta = store.delete_topic(name)
            result["topic_id"] = meta.topic_id
        except Exception as exc:
            result["error_code"] = error_code_for(exc)
            result["error_message"] = str(exc) or None
    return make(response_type(request), throttle_time=0, responses=results)
