"""DescribeConfigs (32): topic configs (overrides and defaults) and the broker's own settings.

The system topics SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer also answer a read-only
``rmq.scheduler.status``: the delay scheduler's state as JSON (``rmqk delays`` reads it).
RMQ_SYS_TRANS_HALF_TOPIC answers ``rmq.transaction.half.status`` (counters, the pending count
and the oldest 100 pending half messages) and, asked by name only,
``rmq.transaction.half.<group>/<UNIQ_KEY>``: one pending half message, or null
(``rmqk transactions half list|describe`` read them).

A subscription view answers its definition instead of topic configs (adapter/view_configs.py):
``rmq.view.source`` and ``rmq.view.tags`` | ``rmq.view.sql`` as DYNAMIC_TOPIC_CONFIG, the
derived ``rmq.view.filter`` as DEFAULT_CONFIG, all read-only. That is how admin tools tell a
view from a topic.
"""

from __future__ import annotations

import json

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.half_records import HALF_TOPIC
from rmqkafka.rmqsemantics.scheduler import SYSTEM_TOPICS

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    effective,
    source_of,
    specs_for,
    synonyms_of,
)
from ..view_configs import view_configs

API_KEY = 32
STATUS = "rmq.scheduler.status"
_STATUS_DOC = (
    "Read-only, on the system topics SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer: the delay "
    "scheduler's state as JSON (per level: delay, depth, next due time; timers pending per due "
    "hour; delivery counters). What `rmqk delays` shows."
)
HALF_STATUS = "rmq.transaction.half.status"
HALF_ONE = "rmq.transaction.half."  # + group/UNIQ_KEY
_HALF_DOC = (
    "Read-only, on RMQ_SYS_TRANS_HALF_TOPIC: RocketMQ transaction messages as JSON (counters, "
    "pending count, the oldest 100 pending half messages with age and checks); "
    "rmq.transaction.half.<group>/<UNIQ_KEY>, asked by name, is one pending half message or null."
)
TOPIC = 2
BROKER = 4
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7}


def _entry(
    name: str,
    value: str,
    source: int,
    kind: str,
    doc: str | None,
    read_only: bool,
    synonyms: list[tuple[str, str, int]],
) -> dict:
    return dict(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=source == DEFAULT_CONFIG,
        is_sensitive=False,  # no topic or broker setting here is a secret
        synonyms=[dict(name=n, value=v, source=src) for n, v, src in synonyms],
        config_type=CONFIG_TYPES[kind],
        documentation=doc,
    )


def broker_configs(ctx: BrokerContext) -> list[tuple[str, str, str, str]]:
    """(name, value, type, documentation) of the broker's settings, in server.properties names."""
    a, s = ctx.config, ctx.storage_config
    advertised = f"PLAINTEXT://{ctx.advertised_host}:{ctx.advertised_port}"
    return [
        ("node.id", str(a.node_id), "INT", "This broker's id."),
        ("listeners", f"PLAINTEXT://{a.host}:{a.port}", "LIST", "Where the broker listens."),
        ("advertised.listeners", advertised, "LIST", "What clients are told to connect to."),
        ("log.dirs", str(s.data_dir), "LIST", "The data directory."),
        ("num.partitions", str(a.num_partitions), "INT", "Partitions of auto-created topics."),
        ("auto.create.topics.enable", str(a.auto_create_topics).lower(), "BOOLEAN", "Metadata requests create missing topics."),
        ("message.max.bytes", str(a.message_max_bytes), "INT", "Largest record batch accepted."),
        ("compression.type", a.compression_type, "STRING", "Default codec of stored batches (topic config compression.type)."),
        ("socket.request.max.bytes", str(a.socket_request_max_bytes), "INT", "Largest request frame accepted."),
        ("log.segment.bytes", str(s.segment_bytes), "INT", "Commitlog segment size."),
        ("log.retention.ms", str(-1 if s.retention_ms is None else s.retention_ms), "LONG", "Segments older than this are deleted."),
        ("log.retention.bytes", str(-1 if s.retention_bytes is None else s.retention_bytes), "LONG", "Oldest segments are deleted above this size."),
        ("log.retention.check.interval.ms", str(s.retention_check_interval_ms), "LONG", "How often retention runs."),
        ("flush.policy", s.flush, "STRING", "async: periodic fsync; sync: acks wait for fsync (group commit)."),
        ("log.flush.interval.ms", str(s.flush_interval_ms), "LONG", "Period of the async fsync and of checkpoints."),
    ]


def _refusal(ctx: BrokerContext, resource) -> tuple[ErrorCode, str] | None:
    """DESCRIBE_CONFIGS on the topic, or on the cluster for a broker (Kafka's rule)."""
    if resource.resource_type == TOPIC:
        if not ctx.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, resource.resource_name):
            return ErrorCode.topic_authorization_failed, "Topic authorization failed."
    elif resource.resource_type == BROKER:
        if not ctx.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    synonyms = getattr(body, "include_synonyms", False)
    docs = getattr(body, "include_documentation", False)
    results = []
    for resource in body.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        result = dict(
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        results.append(result)
        refusal = _refusal(ctx, resource)
        if refusal is not None:
            result["error_code"], result["error_message"] = refusal
            continue
        if resource.resource_type == TOPIC:
            meta = ctx.store.topics.get(resource.resource_name)
            view = ctx.semantics.views.get(resource.resource_name) if meta is None else None
            if view is not None:
                result["configs"] = []
                for name, value, derived, doc in view_configs(view):
                    if keys is not None and name not in keys:
                        continue
                    source = DEFAULT_CONFIG if derived else DYNAMIC_TOPIC_CONFIG
                    result["configs"].append(
                        _entry(name, value, source, "STRING", doc if docs else None, True,
                               [(name, value, source)] if synonyms else [])
                    )
                continue
            if meta is None:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
                result["error_message"] = f"topic {resource.resource_name!r} does not exist"
                continue
            a, s, overrides = ctx.config, ctx.storage_config, meta.configs
            result["configs"] = [
                _entry(
                    name,
                    effective(name, overrides, a, s),
                    source_of(name, overrides, a, s),
                    spec.kind,
                    spec.doc if docs else None,
                    False,
                    synonyms_of(name, overrides, a, s) if synonyms else [],
                )
                for name, spec in specs_for(meta.name).items()
                if keys is None or name in keys
            ]
            if meta.name in SYSTEM_TOPICS and (keys is None or STATUS in keys):
                value = json.dumps(ctx.semantics.scheduler.status(), sort_keys=True)
                result["configs"].append(_read_only(STATUS, value, _STATUS_DOC, docs, synonyms))
            if meta.name == HALF_TOPIC:
                halves = ctx.semantics.scheduler.halves
                if keys is None or HALF_STATUS in keys:
                    value = json.dumps(halves.status(), sort_keys=True)
                    result["configs"].append(_read_only(HALF_STATUS, value, _HALF_DOC, docs, synonyms))
                for key in keys or ():
                    if key.startswith(HALF_ONE) and key != HALF_STATUS and "/" in key:
                        group, uniq_key = key[len(HALF_ONE):].split("/", 1)
                        value = json.dumps(halves.find(group, uniq_key), sort_keys=True)
                        result["configs"].append(_read_only(key, value, _HALF_DOC, docs, synonyms))
        elif resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(ctx.config.node_id)):
                result["error_code"] = ErrorCode.invalid_request
                result["error_message"] = f"unknown broker {resource.resource_name!r}"
                continue
            result["configs"] = [
                _entry(
                    name,
                    value,
                    STATIC_BROKER_CONFIG,
                    kind,
                    doc if docs else None,
                    True,
                    [(name, value, STATIC_BROKER_CONFIG)] if synonyms else [],
                )
                for name, value, kind, doc in broker_configs(ctx)
                if keys is None or name in keys
            ]
        else:
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = f"resource type {resource.resource_type} is not supported"
    return make(response_type(request), throttle_time=0, results=results)


def _read_only(name: str, value: str, doc: str, docs: bool, synonyms: bool) -> dict:
    return _entry(name, value, DEFAULT_CONFIG, "STRING", doc if docs else None, True,
                  [(name, value, DEFAULT_CONFIG)] if synonyms else [])
