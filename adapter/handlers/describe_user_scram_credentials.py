"""DescribeUserScramCredentials (50): each user's SCRAM mechanisms and iteration counts,
never a key or salt. Needs DESCRIBE on the cluster. A null or empty ``users`` array means
every user (Kafka's rule; librdkafka and the Java admin send the empty array)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 50


async def handle(ctx: BrokerContext, request: Request):
    answer = response_type(request)
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(answer, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=None, results=())
    users = request.body.users
    results = ctx.security.credentials.describe([u.name for u in users] if users else None)
    return make(answer, throttle_time=0, error_code=ErrorCode.none, error_message=None, results=[
        dict(user=r.user, error_code=r.error, error_message=r.message,
             credential_infos=[dict(mechanism=m, iterations=i) for m, i in r.credentials])
        for r in results
    ])
