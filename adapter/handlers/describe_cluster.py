"""DescribeCluster (60, v0-1): this broker, the cluster id and the "controller".

Choices
-------
- The one broker is its own controller (Kafka brokers in KRaft mode also answer with an
  alive broker id, never a real controller, unless asked for controllers); rack is null.
- Endpoint types (v1, KIP-919): 1 = brokers is answered; 2 = controllers gets
  MISMATCHED_ENDPOINT_TYPE (this is a broker endpoint, as a Kafka broker says) and an unknown
  type UNSUPPORTED_ENDPOINT_TYPE; v0 requests cannot ask for anything but brokers. Kafka's
  AuthHelper.computeDescribeClusterResponse answers these errors with empty other fields.
- ``cluster_authorized_operations``: when asked for, the cluster operations the caller may
  do (adapter/acl_operations.py); otherwise -2**31. Like Kafka, describing the cluster
  needs no ACL.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, ResourceType

API_KEY = 60
BROKERS = 1
CONTROLLERS = 2


async def handle(ctx: BrokerContext, request: Request):
    endpoint_type = getattr(request.body, "endpoint_type", BROKERS)
    cls = response_type(request)
    if endpoint_type != BROKERS:
        known = endpoint_type == CONTROLLERS
        return make(
            cls,
            throttle_time=0,
            error_code=ErrorCode.mismatched_endpoint_type if known else ErrorCode.unsupported_endpoint_type,
            error_message=(
                "this is a broker endpoint; it does not describe controllers"
                if known
                else f"unsupported endpoint type {endpoint_type}"
            ),
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=acl_operations.NOT_PROVIDED,
        )
    return make(
        cls,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=ctx.store.cluster_id,
        controller_id=ctx.config.node_id,
        brokers=[
            dict(
                broker_id=ctx.config.node_id,
                host=ctx.advertised_host,
                port=ctx.advertised_port,
                rack=None,
            )
        ],
        cluster_authorized_operations=acl_operations.authorized(
            ctx, request.body.include_cluster_authorized_operations, ResourceType.CLUSTER, CLUSTER_NAME
        ),
    )
