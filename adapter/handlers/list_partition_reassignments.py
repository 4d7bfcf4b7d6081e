"""ListPartitionReassignments (46, v0): nothing is ever being reassigned on one node, so
the answer lists no topic, whatever was asked (Kafka lists only partitions under
reassignment and leaves out unknown ones). DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED with the partitions asked for echoed, as Kafka's
ListPartitionReassignmentsRequest.getErrorResponse does."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 46


async def handle(ctx: BrokerContext, request: Request):
    cls = response_type(request)
    if not _cluster_admin.may_on_cluster(ctx, AclOperation.DESCRIBE):
        echoed = [dict(name=t.name, partitions=[dict(partition_index=p) for p in t.partition_indexes])
                  for t in request.body.topics or ()]
        return make(cls, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=_cluster_admin.CLUSTER_AUTHORIZATION_FAILED, topics=echoed)
    return make(cls, throttle_time=0, error_code=ErrorCode.none, error_message=None, topics=())
