"""CreateTopics (19): validated creation, validate_only, per-topic configs; a topic created
with ``rmq.view.*`` configs is a subscription view (adapter/view_configs.py), which also needs
READ on its source (adapter/view_access.py).

Every topic of a request is validated first (yielding to the event loop every YIELD_EVERY
topics), then all of them are created with one metadata write in the store's metadata thread
(MessageStore.create_topics); the response comes once that write is durable. Partitions
count against the controller mutation quota (adapter.mutation_quota): from v6 on, a topic met
with the quota used up gets THROTTLING_QUOTA_EXCEEDED and the response a throttle time;
older versions wait for the quota instead."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from ..codec import Encoded, Request
from ..codec import create_topics_response as response_bytes
from ..context import BrokerContext
from ..errors import InvalidTopicName, error_code_for
from ..mutation_quota import charge, wait_for_quota
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_admin import check_new_topic
from ..topic_configs import DYNAMIC_TOPIC_CONFIG, effective, source_of, specs_for
from ..topic_names import invalid_reason
from ..view_access import CREATE_VIEW_SOURCE_OPERATION
from ..view_configs import SOURCE, is_view_request, view_definition

API_KEY = 19
STRICT_SINCE = 6  # versions that know THROTTLING_QUOTA_EXCEEDED (KIP-599)
YIELD_EVERY = 500  # topics validated between turns of the event loop


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    strict = request.api_version >= STRICT_SINCE
    quota = ctx.mutation_quotas()
    if not strict and not body.validate_only:
        await wait_for_quota(quota)
    throttle_ms = 0
    results = []
    creating: list[tuple[dict, str, int, dict[str, str]]] = []  # (result, name, partitions, configs)
    added = 0  # partitions this request creates before the topic at hand
    described: dict = {}  # (specs, configs) -> the configs list of the results (shared)
    for index, topic in enumerate(body.topics):
        if index and index % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # a request of many topics does not hold up the others
        result = dict(
            name=topic.name,
            topic_id=None,
            error_code=ErrorCode.none,
            error_message=None,
            num_partitions=-1,
            replication_factor=-1,
            configs=None,
        )
        results.append(result)
        if not (ctx.allowed(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                or ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC, topic.name)):
            result["error_code"] = ErrorCode.topic_authorization_failed
            result["error_message"] = "Authorization failed."
            continue
        requested = {c.name: c.value for c in topic.configs}
        if is_view_request(requested):
            _create_view(ctx, topic, requested, body.validate_only, result)
            continue
        try:
            partitions, configs = check_new_topic(
                ctx,
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                [(a.partition_index, list(a.broker_ids)) for a in topic.assignments],
                {c.name: c.value for c in topic.configs},
                added,
            )
        except Exception as exc:
            result["error_code"] = error_code_for(exc)
            result["error_message"] = str(exc) or None
            continue
        if not body.validate_only:
            throttled = charge(quota, partitions, strict, result)
            if throttled:
                throttle_ms = max(throttle_ms, throttled)
                continue
            creating.append((result, topic.name, partitions, configs))
            added += partitions
            continue
        _describe_created(ctx, result, topic.name, partitions, configs, described)
    if creating:
        outcomes = await ctx.store.create_topics([(name, p, c) for _, name, p, c in creating])
        for (result, name, partitions, configs), outcome in zip(creating, outcomes):
            if isinstance(outcome, Exception):
                result["error_code"] = error_code_for(outcome)
                result["error_message"] = str(outcome) or None
            else:
                result["topic_id"] = outcome.topic_id
                _describe_created(ctx, result, name, partitions, configs, described)
    return await _encoded(request.api_version, throttle_ms, results)


async def _encoded(version: int, throttle_ms: int, results: list[dict]) -> Encoded:
    """The response, encoded YIELD_EVERY topics at a time between turns of the event loop."""
    configs_bytes: dict[int, bytes] = {}
    parts: list[bytes] = [response_bytes.head(version, throttle_ms, len(results))]
    for start in range(0, len(results), YIELD_EVERY):
        if start:
            await asyncio.sleep(0)
        parts.append(response_bytes.topics_part(version, results[start:start + YIELD_EVERY], configs_bytes))
    parts.append(response_bytes.tail(version))
    return Encoded(parts)


def _describe_created(ctx: BrokerContext, result: dict, name: str, partitions: int, configs: dict[str, str],
                      described: dict) -> None:
    """The result of a created topic; topics with the same config specs and configs share
    one list in ``described`` (the encoder writes a shared list's bytes once)."""
    result["num_partitions"] = partitions
    result["replication_factor"] = 1
    specs = specs_for(name)
    key = (id(specs), tuple(sorted(configs.items())))
    shared = described.get(key)
    if shared is None:
        shared = described[key] = [
            dict(
                name=config,
                value=effective(config, configs, ctx.config, ctx.storage_config),
                read_only=False,
                config_source=source_of(config, configs, ctx.config, ctx.storage_config, ctx.broker_configs),
                is_sensitive=False,
            )
            for config in specs
        ]
    result["configs"] = shared


def _create_view(ctx: BrokerContext, topic, configs: dict[str, str | None], validate_only: bool, result: dict) -> None:
    source_name = configs.get(SOURCE) or ""
    if source_name and not ctx.allowed(CREATE_VIEW_SOURCE_OPERATION, ResourceType.TOPIC, source_name):
        # before anything says whether the source exists
        result["error_code"] = ErrorCode.topic_authorization_failed
        result["error_message"] = f"a view over {source_name!r} exposes its records: it needs READ on {source_name!r}"
        return
    try:
        reason = invalid_reason(topic.name)
        if reason:
            raise InvalidTopicName(reason)
        source = ctx.store.topics.get(configs.get("rmq.view.source") or "")
        source_name, kind, expression = view_definition(
            configs, topic.num_partitions, topic.replication_factor, source.partitions if source else None
        )
        if validate_only:
            view = ctx.semantics.check_view(topic.name, source_name, kind, expression)
        else:
            view = ctx.semantics.create_view(topic.name, source_name, kind, expression)
            result["topic_id"] = view.view_id
    except Exception as exc:
        result["error_code"] = error_code_for(exc)
        result["error_message"] = str(exc) or None
        return
    result["num_partitions"] = ctx.semantics.partition_count(view)
    result["replication_factor"] = 1
    result["configs"] = [
        dict(name=name, value=value, read_only=True, config_source=DYNAMIC_TOPIC_CONFIG, is_sensitive=False)
        for name, value in configs.items()
    ]
