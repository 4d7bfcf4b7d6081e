"""CreateTopics (19): validated creation, validate_only, per-topic configs; a topic created
with ``rmq.view.*`` configs is a subscription view (adapter/view_configs.py), which also needs
READ on its source (adapter/view_access.py)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import InvalidTopicName, error_code_for
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_admin import check_new_topic
from ..topic_configs import DYNAMIC_TOPIC_CONFIG, effective, source_of, specs_for
from ..topic_names import invalid_reason
from ..view_access import CREATE_VIEW_SOURCE_OPERATION
from ..view_configs import SOURCE, is_view_request, view_definition

API_KEY = 19


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    results = []
    for topic in body.topics:
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
            )
            if not body.validate_only:
                result["topic_id"] = ctx.store.create_topic(topic.name, partitions, configs).topic_id
        except Exception as exc:
            result["error_code"] = error_code_for(exc)
            result["error_message"] = str(exc) or None
            continue
        result["num_partitions"] = partitions
        result["replication_factor"] = 1
        result["configs"] = [
            dict(
                name=name,
                value=effective(name, configs, ctx.config, ctx.storage_config),
                read_only=False,
                config_source=source_of(name, configs, ctx.config, ctx.storage_config, ctx.broker_configs),
                is_sensitive=False,
            )
            for name in specs_for(topic.name)
        ]
    return make(response_type(request), throttle_time=0, topics=results)


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
