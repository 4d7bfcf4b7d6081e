"""ListConfigResources (74; ListClientMetricsResources before KIP-1142): the resources
DescribeConfigs can be asked about.

- v0 lists client metrics resources only, and this broker has none: an empty list.
- v1 lists the types asked for (none asked: every type it knows), in Kafka's order:
  GROUP (32) the groups with dynamic group configs (Kafka lists its group config manager's
  groups, not every group), CLIENT_METRICS (16)
  none, BROKER_LOGGER (8) and BROKER (4) this node, TOPIC (2) every topic and view
  Metadata lists. Any other type asked for is UNSUPPORTED_VERSION with an empty list, as
  Kafka answers.
- DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 74
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_V1 = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def _names(ctx: BrokerContext, resource_type: int) -> list[str]:
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(ctx.config.node_id)]
    if resource_type == TOPIC:
        return [name for name, _ in _cluster_admin.listed_partitions(ctx)]
    if resource_type == GROUP:
        return ctx.groups.configs.groups()
    return []  # CLIENT_METRICS: no client metrics subscriptions


async def handle(ctx: BrokerContext, request: Request):
    cls = response_type(request)
    if not _cluster_admin.may_on_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return make(cls, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, config_resources=())
    if request.api_version == 0:
        wanted: tuple[int, ...] = (CLIENT_METRICS,)
    else:
        wanted = tuple(request.body.resource_types) or SUPPORTED_V1
        if any(t not in SUPPORTED_V1 for t in wanted):
            return make(cls, throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=())
    resources = [dict(resource_name=name, resource_type=t)
                 for t in SUPPORTED_V1 if t in wanted for name in _names(ctx, t)]
    return make(cls, throttle_time=0, error_code=ErrorCode.none, config_resources=resources)
