"""DescribeClientQuotas (48): the quotas of the entities a filter matches (adapter.client_quota_store
holds the entity model and Kafka's filter rules). Needs DESCRIBE_CONFIGS on the cluster, else
CLUSTER_AUTHORIZATION_FAILED and no entries; a bad filter is answered with its error and
message (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity or match type) and no
entries, as Kafka does."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..client_quota_store import QuotaRequestError
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 48


async def handle(ctx: BrokerContext, request: Request):
    answer = response_type(request)
    if not ctx.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(answer, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=None, entries=None)
    body = request.body
    try:
        found = ctx.client_quotas.store.describe(
            [(c.entity_type, c.match_type, c.match) for c in body.components], body.strict)
    except QuotaRequestError as exc:
        return make(answer, throttle_time=0, error_code=exc.code, error_message=str(exc), entries=None)
    return make(answer, throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=[
        dict(entity=[dict(entity_type=kind, entity_name=name) for kind, name in entity],
             values=[dict(key=key, value=value) for key, value in sorted(values.items())])
        for entity, values in found
    ])
