"""DescribeConfigs (32): topic configs (overrides and defaults) and the broker's own settings.

Broker resources (adapter/broker_configs.py, as Kafka's ConfigHelper): this node's id lists
every setting with its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG or DEFAULT_CONFIG), the synonyms in that order, ``read_only`` for what
cannot change at run time, and passwords as sensitive with a null value; the resource ""
lists the cluster-wide dynamic defaults only. A topic's config inherited from a broker setting
shows that setting's source and synonyms. Each resource type is one entry of ``DESCRIBERS``.

The system topics SCHEDULE_TOPIC_XXXX and rmq_sys_wheel_timer also answer a read-only
``rmq.scheduler.status``: the delay scheduler's state as JSON (``rmqk delays`` reads it).
RMQ_SYS_TRANS_HALF_TOPIC answers ``rmq.transaction.half.status`` (counters, the pending count
and the oldest 100 pending half messages) and, asked by name only,
``rmq.transaction.half.<group>/<UNIQ_KEY>``: one pending half message, or null
(``rmqk transactions half list|describe`` read them).

A group (32) lists every group config (adapter/group_configs.py): its override as
DYNAMIC_GROUP_CONFIG (8), else the broker's default as DEFAULT_CONFIG; a group need not exist.
DESCRIBE_CONFIGS on the topic, the group, or on the cluster for a broker (Kafka's rule).

A subscription view answers its definition instead of topic configs (adapter/view_configs.py):
``rmq.view.source`` and ``rmq.view.tags`` | ``rmq.view.sql`` as DYNAMIC_TOPIC_CONFIG, the
derived ``rmq.view.filter`` as DEFAULT_CONFIG, all read-only. That is how admin tools tell a
view from a topic.
"""

from __future__ import annotations

import asyncio
import json

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.half_records import HALF_TOPIC
from rmqkafka.rmqsemantics.scheduler import SYSTEM_TOPICS

from .. import broker_loggers, group_configs
from ..broker_configs import ConfigRefused, check_resource_name
from ..codec import Request, response_type
from ..codec.entities import make, nested_class
from ..context import BrokerContext
from ..security.acls import AclOperation
from ..topic_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    effective,
    source_of,
    specs_for,
    synonyms_of,
)
from ..view_configs import view_configs
from .alter_configs import authorize_config_access

API_KEY = 32
YIELD_EVERY = 8  # distinct resources described per turn of the event loop (a broker's: about 1 ms)
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
BROKER_LOGGER = 8
GROUP = 32
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "PASSWORD": 9}


def _entry(
    name: str,
    value: str | None,
    source: int,
    kind: str,
    doc: str | None,
    read_only: bool,
    synonyms: list[tuple[str, str | None, int]],
    sensitive: bool = False,  # only broker passwords are secrets (their value is null)
) -> dict:
    return dict(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=source == DEFAULT_CONFIG,
        is_sensitive=sensitive,
        synonyms=[dict(name=n, value=v, source=src) for n, v, src in synonyms],
        config_type=CONFIG_TYPES[kind],
        documentation=doc,
    )


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    synonyms = getattr(body, "include_synonyms", False)
    docs = getattr(body, "include_documentation", False)
    results = []
    # A request may name one resource thousands of times (Kafka answers each): each distinct
    # one is described and built once, and the event loop turns between described resources.
    described: dict[tuple, object] = {}
    result_type = nested_class(response_type(request), "results")
    for index, resource in enumerate(body.resources):
        same = (resource.resource_type, resource.resource_name,
                None if resource.configuration_keys is None else tuple(resource.configuration_keys))
        if same in described:
            results.append(described[same])
            continue
        if index and len(described) % YIELD_EVERY == 0:
            await asyncio.sleep(0)  # a request of many resources does not hold up the others
        keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        result = dict(
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=[],
        )
        results.append(result)
        describe = DESCRIBERS.get(resource.resource_type)
        try:
            authorize_config_access(ctx, AclOperation.DESCRIBE_CONFIGS, resource)
            if describe is None:
                raise ConfigRefused(ErrorCode.invalid_request,
                                    f"resource type {resource.resource_type} is not supported")
            result["configs"] = describe(ctx, resource.resource_name, keys, synonyms, docs)
        except ConfigRefused as exc:
            result["error_code"], result["error_message"] = exc.code, str(exc)
        results[-1] = described[same] = make(result_type, **result)
    return make(response_type(request), throttle_time=0, results=results)


def _topic(ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> list[dict]:
    meta = ctx.store.topics.get(name)
    view = ctx.semantics.views.get(name) if meta is None else None
    if view is not None:
        configs = []
        for config, value, derived, doc in view_configs(view):
            if keys is not None and config not in keys:
                continue
            source = DEFAULT_CONFIG if derived else DYNAMIC_TOPIC_CONFIG
            configs.append(_entry(config, value, source, "STRING", doc if docs else None, True,
                                  [(config, value, source)] if synonyms else []))
        return configs
    if meta is None:
        raise ConfigRefused(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    a, s, overrides, broker = ctx.config, ctx.storage_config, meta.configs, ctx.broker_configs
    configs = [
        _entry(
            config,
            effective(config, overrides, a, s),
            source_of(config, overrides, a, s, broker),
            spec.kind,
            spec.doc if docs else None,
            False,
            synonyms_of(config, overrides, a, s, broker) if synonyms else [],
        )
        for config, spec in specs_for(meta.name).items()
        if keys is None or config in keys
    ]
    if meta.name in SYSTEM_TOPICS and (keys is None or STATUS in keys):
        value = json.dumps(ctx.semantics.scheduler.status(), sort_keys=True)
        configs.append(_read_only(STATUS, value, _STATUS_DOC, docs, synonyms))
    if meta.name == HALF_TOPIC:
        halves = ctx.semantics.scheduler.halves
        if keys is None or HALF_STATUS in keys:
            value = json.dumps(halves.status(), sort_keys=True)
            configs.append(_read_only(HALF_STATUS, value, _HALF_DOC, docs, synonyms))
        for key in keys or ():
            if key.startswith(HALF_ONE) and key != HALF_STATUS and "/" in key:
                group, uniq_key = key[len(HALF_ONE):].split("/", 1)
                value = json.dumps(halves.find(group, uniq_key), sort_keys=True)
                configs.append(_read_only(key, value, _HALF_DOC, docs, synonyms))
    return configs


def _broker(ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> list[dict]:
    if name not in ("", str(ctx.config.node_id)):  # Kafka's ConfigHelper
        raise ConfigRefused(ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.config.node_id} "
                            f"or empty string, but received {name}")
    runtime = {"advertised.listeners": f"{ctx.listener_name}://{ctx.advertised_host}:{ctx.advertised_port}"}
    return [
        _entry(d.name, d.value, d.source, d.kind, d.doc if docs else None, d.read_only,
               d.synonyms if synonyms else [], d.sensitive)
        for d in ctx.broker_configs.describe(name, runtime)
        if keys is None or d.name in keys
    ]


def _loggers(ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> list[dict]:
    if name == "":  # this node's id only (Kafka's ConfigHelper)
        raise ConfigRefused(ErrorCode.invalid_request, "Broker id must not be empty")
    check_resource_name(name, ctx.config.node_id)
    source = broker_loggers.DYNAMIC_BROKER_LOGGER_CONFIG
    return [_entry(logger, level, source, "STRING", None, False, [(logger, level, source)] if synonyms else [])
            for logger, level in broker_loggers.loggers().items() if keys is None or logger in keys]


def _group(ctx: BrokerContext, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> list[dict]:
    overrides = ctx.groups.configs.get(name)
    entries = []
    for config, spec in group_configs.SPECS.items():
        if keys is not None and config not in keys:
            continue
        if config in overrides:
            value, source = overrides[config], group_configs.DYNAMIC_GROUP_CONFIG
        else:
            value, source = spec.default(ctx.config), DEFAULT_CONFIG
        entries.append(_entry(config, value, source, spec.kind, spec.doc if docs else None, False,
                              [(config, value, source)] if synonyms else []))
    return entries


DESCRIBERS = {TOPIC: _topic, BROKER: _broker, BROKER_LOGGER: _loggers, GROUP: _group}


def _read_only(name: str, value: str, doc: str, docs: bool, synonyms: bool) -> dict:
    return _entry(name, value, DEFAULT_CONFIG, "STRING", doc if docs else None, True,
                  [(name, value, DEFAULT_CONFIG)] if synonyms else [])
