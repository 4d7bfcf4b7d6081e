"""AlterConfigs (33, v0-2): replace a topic's or a broker's whole set of config overrides.

Shared with IncrementalAlterConfigs (44), which imports ``alter_resources`` and the
resource kinds (``ALTERERS``) from here.

Choices
-------
- Kafka semantics: the request's configs *are* the topic's new overrides; every override
  not named is removed (back to its default). A null value means "no override". Names and
  values are checked by adapter/topic_configs.py: an unknown name or a bad value is
  INVALID_CONFIG and nothing of that resource changes. A name given twice is
  INVALID_REQUEST, as in Kafka. ``validate_only`` validates and changes nothing.
- Changes are persisted (topics.json, fsynced) before the answer and take effect at once:
  Produce reads the topic's configs per request (see produce.py for those it applies).
- Unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; an illegal topic name ->
  INVALID_TOPIC_EXCEPTION; a resource named twice in one request -> INVALID_REQUEST.
- Subscription views are immutable: any alteration of a view (validate_only too, an empty
  change list too) is INVALID_REQUEST with a message saying to delete and re-create it --
  the same code as for the static broker settings below, for the same reason (the request
  is understood; the resource cannot change at run time). A view's definition is its
  identity: consumers' committed offsets on it would mean something else under a new
  expression.
- Broker resources (name "" for the cluster-wide defaults, or this node's id): dynamic broker
  configs (adapter/broker_configs.py: which keys, Kafka's refusals and messages, persistence).
  The request's configs become the resource's whole set of overrides, as for a topic; a null
  value is INVALID_REQUEST ("Null value not supported for : NAME"), as in Kafka.
- Group resources (32): the group's configs (adapter/group_configs.py: Kafka's names, ranges
  and messages, INVALID_CONFIG; durable before the answer); ALTER_CONFIGS on the group, else
  GROUP_AUTHORIZATION_FAILED. A group need not exist, as in Kafka.
- Other resource types (broker loggers, client metrics) -> INVALID_REQUEST. A type is
  one entry of ``ALTERERS`` (how to read its current overrides, check and store new ones).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from ..broker_configs import ConfigRefused, check_resource_name, is_list
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..group_configs import validate_group_configs
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_configs import SPECS, effective, validate_topic_configs
from ..topic_names import invalid_reason

NewConfigs = Callable[[BrokerContext, object, dict[str, str], "ResourceKind"], dict[str, str | None]]

API_KEY = 33
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP = 32


class ResourceKind:
    """How one resource type's configs are read, checked and stored by either API."""

    def alter(self, ctx: BrokerContext, resource, new_configs: NewConfigs, validate_only: bool) -> None:
        configs = new_configs(ctx, resource, self.current(ctx, resource.resource_name), self)
        self.store(ctx, resource.resource_name, configs, validate_only)

    def current(self, ctx: BrokerContext, name: str) -> dict[str, str]:
        raise NotImplementedError

    def list_value(self, ctx: BrokerContext, name: str, configs: dict[str, str]) -> str | None:
        """The value of LIST config ``name`` under ``configs`` (APPEND / SUBTRACT start from
        it); None when ``name`` is not a LIST config."""
        raise NotImplementedError

    def store(self, ctx: BrokerContext, name: str, configs: dict[str, str | None], validate_only: bool) -> None:
        raise NotImplementedError


def alter_resources(ctx: BrokerContext, request: Request, new_configs: NewConfigs,
                    kinds: dict[int, ResourceKind] | None = None) -> object:
    """Apply ``new_configs(ctx, resource, current overrides, kind) -> new overrides`` (which
    raises InvalidConfig or ConfigRefused) to every resource and store them with its
    ALTERERS entry; the response for either API."""
    body = request.body
    seen = Counter((r.resource_type, r.resource_name) for r in body.resources)
    responses = []
    for resource in body.resources:
        result = dict(
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        responses.append(result)
        try:
            _check_unique(resource, seen)
            authorize_config_access(ctx, AclOperation.ALTER_CONFIGS, resource)
            kind = (ALTERERS if kinds is None else kinds).get(resource.resource_type)
            if kind is None:
                raise ConfigRefused(
                    ErrorCode.invalid_request, f"resource type {resource.resource_type} cannot be altered"
                )
            kind.alter(ctx, resource, new_configs, body.validate_only)
        except ConfigRefused as exc:
            result["error_code"], result["error_message"] = exc.code, str(exc)
        except Exception as exc:
            result["error_code"], result["error_message"] = error_code_for(exc), str(exc) or None
    return make(response_type(request), throttle_time=0, responses=responses)


def authorize_config_access(ctx: BrokerContext, operation: AclOperation, resource) -> None:
    """ALTER_CONFIGS / DESCRIBE_CONFIGS on the topic or the group, or on the cluster for a
    broker or its loggers (Kafka's KafkaApis)."""
    if resource.resource_type == TOPIC:
        if not ctx.allowed(operation, ResourceType.TOPIC, resource.resource_name):
            raise ConfigRefused(ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    elif resource.resource_type == GROUP:
        if not ctx.allowed(operation, ResourceType.GROUP, resource.resource_name):
            raise ConfigRefused(ErrorCode.group_authorization_failed, "Group authorization failed.")
    elif resource.resource_type in (BROKER, BROKER_LOGGER) and not ctx.allowed(
            operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise ConfigRefused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")


def _check_unique(resource, seen: Counter) -> None:
    if seen[(resource.resource_type, resource.resource_name)] > 1:
        raise ConfigRefused(ErrorCode.invalid_request, "each resource may appear only once per request")
    duplicates = sorted(n for n, c in Counter(c.name for c in resource.configs).items() if c > 1)
    if duplicates:
        raise ConfigRefused(ErrorCode.invalid_request, f"duplicate config keys: {', '.join(duplicates)}")


class _Topics(ResourceKind):
    def current(self, ctx: BrokerContext, name: str) -> dict[str, str]:
        meta = ctx.store.topics.get(name)
        if meta is not None:
            return dict(meta.configs)
        view = ctx.semantics.views.get(name)
        if view is not None:
            over = f" over topic {view.source!r}" if ctx.may_see_source(view) else ""
            raise ConfigRefused(
                ErrorCode.invalid_request,
                f"{name!r} is a view{over}: views are immutable; "
                "delete and create it again",
            )
        if invalid_reason(name):
            raise ConfigRefused(ErrorCode.invalid_topic_exception, invalid_reason(name))
        raise ConfigRefused(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")

    def list_value(self, ctx: BrokerContext, name: str, configs: dict[str, str]) -> str | None:
        spec = SPECS.get(name)
        if spec is None or spec.kind != "LIST":
            return None
        return effective(name, configs, ctx.config, ctx.storage_config)

    def store(self, ctx: BrokerContext, name: str, configs: dict[str, str | None], validate_only: bool) -> None:
        valid = validate_topic_configs(configs, name)
        if not validate_only and valid != ctx.store.topics.get(name).configs:
            ctx.store.topics.set_configs(name, valid)


class _Broker(ResourceKind):
    def current(self, ctx: BrokerContext, name: str) -> dict[str, str]:
        check_resource_name(name, ctx.config.node_id)
        return ctx.broker_configs.overrides(name)

    def list_value(self, ctx: BrokerContext, name: str, configs: dict[str, str]) -> str | None:
        if not is_list(name):
            return None
        if name in configs:
            return configs[name]
        described = {d.name: d.value for d in ctx.broker_configs.describe(str(ctx.config.node_id), {})}
        return described.get(name) or ""

    def store(self, ctx: BrokerContext, name: str, configs: dict[str, str | None], validate_only: bool) -> None:
        nulls = [k for k, v in configs.items() if v is None]
        if nulls:
            raise ConfigRefused(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
        ctx.broker_configs.alter(name, configs, validate_only)  # type: ignore[arg-type]


class _Groups(ResourceKind):
    def current(self, ctx: BrokerContext, name: str) -> dict[str, str]:
        return ctx.groups.configs.get(name)

    def list_value(self, ctx: BrokerContext, name: str, configs: dict[str, str]) -> str | None:
        return None  # no group config is a LIST

    def store(self, ctx: BrokerContext, name: str, configs: dict[str, str | None], validate_only: bool) -> None:
        valid = validate_group_configs(configs, ctx.config)
        if not validate_only:
            ctx.groups.configs.set(name, valid)


ALTERERS: dict[int, ResourceKind] = {TOPIC: _Topics(), BROKER: _Broker(), GROUP: _Groups()}


def _replace(ctx: BrokerContext, resource, current: dict[str, str], kind: ResourceKind) -> dict[str, str | None]:
    return {c.name: c.value for c in resource.configs}


async def handle(ctx: BrokerContext, request: Request):
    return alter_resources(ctx, request, _replace)
