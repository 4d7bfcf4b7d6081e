"""AlterConfigs (33, v0-2): replace a topic's whole set of config overrides.

Shared with IncrementalAlterConfigs (44), which imports ``alter_resources`` from here.

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
- Broker resources (name "" or this node's id): every broker setting here is static
  (command line / config file, read at start), so a change is refused with INVALID_REQUEST
  and a message saying so. That is the code a Kafka broker gives for broker configs that are
  not dynamically updatable ("Cannot update these configs dynamically", an
  InvalidRequestException in ConfigAdminManager); POLICY_VIOLATION would claim an
  operator-configured alter policy, and INVALID_CONFIG a bad value, neither of which is the
  case. An empty change list is a no-op and succeeds. Other resource types (broker loggers,
  groups, client metrics) -> INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_configs import validate_topic_configs
from ..topic_names import invalid_reason

API_KEY = 33
TOPIC = 2
BROKER = 4


class ConfigRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


NewConfigs = Callable[[BrokerContext, object, dict[str, str]], dict[str, str]]


def alter_resources(ctx: BrokerContext, request: Request, new_configs: NewConfigs) -> object:
    """Apply ``new_configs(ctx, resource, current overrides) -> new overrides`` (which raises
    InvalidConfig or ConfigRefused) to every topic resource; the response for either API."""
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
            _authorize(ctx, AclOperation.ALTER_CONFIGS, resource)
            if resource.resource_type == TOPIC:
                _alter_topic(ctx, resource, body.validate_only, new_configs)
            elif resource.resource_type == BROKER:
                _refuse_broker(ctx, resource)
            else:
                raise ConfigRefused(
                    ErrorCode.invalid_request, f"resource type {resource.resource_type} cannot be altered"
                )
        except ConfigRefused as exc:
            result["error_code"], result["error_message"] = exc.code, str(exc)
        except Exception as exc:
            result["error_code"], result["error_message"] = error_code_for(exc), str(exc) or None
    return make(response_type(request), throttle_time=0, responses=responses)


def _authorize(ctx: BrokerContext, operation: AclOperation, resource) -> None:
    """ALTER_CONFIGS / DESCRIBE_CONFIGS on the topic, or on the cluster for a broker."""
    if resource.resource_type == TOPIC:
        if not ctx.allowed(operation, ResourceType.TOPIC, resource.resource_name):
            raise ConfigRefused(ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    elif resource.resource_type == BROKER and not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise ConfigRefused(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")


def _check_unique(resource, seen: Counter) -> None:
    if seen[(resource.resource_type, resource.resource_name)] > 1:
        raise ConfigRefused(ErrorCode.invalid_request, "each resource may appear only once per request")
    duplicates = sorted(n for n, c in Counter(c.name for c in resource.configs).items() if c > 1)
    if duplicates:
        raise ConfigRefused(ErrorCode.invalid_request, f"duplicate config keys: {', '.join(duplicates)}")


def _alter_topic(ctx: BrokerContext, resource, validate_only: bool, new_configs: NewConfigs) -> None:
    name = resource.resource_name
    meta = ctx.store.topics.get(name)
    if meta is None:
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
    configs = new_configs(ctx, resource, dict(meta.configs))
    if not validate_only and configs != meta.configs:
        ctx.store.topics.set_configs(name, configs)


def _refuse_broker(ctx: BrokerContext, resource) -> None:
    if resource.resource_name not in ("", str(ctx.config.node_id)):
        raise ConfigRefused(
            ErrorCode.invalid_request,
            f"unknown broker {resource.resource_name!r}: this is node {ctx.config.node_id}",
        )
    if resource.configs:
        names = ", ".join(sorted(c.name for c in resource.configs))
        raise ConfigRefused(
            ErrorCode.invalid_request,
            f"cannot update broker configs dynamically ({names}): this broker's settings are "
            "static; change them on the rmqk command line or in its config file and restart",
        )


def _replace(ctx: BrokerContext, resource, current: dict[str, str]) -> dict[str, str]:
    return validate_topic_configs({c.name: c.value for c in resource.configs}, resource.resource_name)


async def handle(ctx: BrokerContext, request: Request):
    return alter_resources(ctx, request, _replace)
