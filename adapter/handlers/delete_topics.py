"""DeleteTopics (20): by name, or (v6) by topic id; topics and subscription views alike.

Choices
-------
- Deleting a view deletes the view and the offsets groups committed on its name, never
  anything of its source topic (rmqsemantics.Semantics.delete_view).
- A topic that views read from is refused with POLICY_VIOLATION and a message naming the
  views the caller may describe (they must be deleted first; no cascade: deleting a topic
  should never silently take other people's subscriptions with it). See adapter/errors.py
  for why that code.
- Within one request, views are deleted before topics, so deleting a source together with
  all its views (``kafka-topics --delete --topic 'orders.*'``) succeeds whatever the order of
  the names; the response keeps the request's order.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.views import SourceInUseError, View

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..mutation_quota import charge, wait_for_quota
from ..security.acls import AclOperation, ResourceType

API_KEY = 20
STRICT_SINCE = 5  # versions that know THROTTLING_QUOTA_EXCEEDED (KIP-599)
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    semantics = ctx.semantics
    if request.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    to_delete: list[tuple[bool, str, dict]] = []  # (is a topic, name, result): views sort first
    for name, topic_id in wanted:
        result = dict(name=name, topic_id=topic_id or ZERO_UUID, error_code=ErrorCode.none, error_message=None)
        results.append(result)
        if name is None:
            entity = semantics.resolve_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            if entity is None:
                result["error_code"] = ErrorCode.unknown_topic_id
                continue
            name = result["name"] = entity.name
        else:
            entity = semantics.resolve(name)
        if not ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, name):
            result["error_code"] = ErrorCode.topic_authorization_failed
            continue
        to_delete.append((not isinstance(entity, View), name, result))
    ordered = sorted(to_delete, key=lambda item: item[0])
    strict = request.api_version >= STRICT_SINCE
    quota = ctx.mutation_quotas()
    if not strict and ordered:
        await wait_for_quota(quota)
    throttle_ms = 0
    deleting = []
    for is_topic, name, result in ordered:
        meta = ctx.store.topics.get(name) if is_topic else None
        partitions = meta.partitions if meta is not None else 0
        throttled = charge(quota, partitions, strict, result) if partitions else 0
        if throttled:
            throttle_ms = max(throttle_ms, throttled)
            continue
        deleting.append((name, result))
    outcomes = await semantics.delete_many([name for name, _ in deleting])
    for (name, result), outcome in zip(deleting, outcomes):
        if isinstance(outcome, SourceInUseError):
            result["error_code"] = error_code_for(outcome)
            result["error_message"] = _in_use(ctx, name, outcome.views)
        elif isinstance(outcome, Exception):
            result["error_code"] = error_code_for(outcome)
            result["error_message"] = str(outcome) or None
        else:
            result["topic_id"] = semantics.id_of(outcome)
            if ctx.shares is not None:  # share groups' state of it goes too, as in Kafka
                ctx.shares.topic_deleted(name)
    return make(response_type(request), throttle_time=throttle_ms, responses=results)


def _in_use(ctx: BrokerContext, name: str, views: tuple[str, ...]) -> str:
    """Why ``name`` cannot be deleted, naming only the views the caller may describe."""
    shown = [view for view in views if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, view)]
    hidden = len(views) - len(shown)
    if not shown:
        return f"topic {name!r} is the source of {hidden} view(s) you may not describe; they must be deleted first"
    others = f" and {hidden} other(s)" if hidden else ""
    return f"topic {name!r} is the source of view(s) {', '.join(shown)}{others}; delete them first"
