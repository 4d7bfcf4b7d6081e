"""DescribeUserScramCredentials (50): each user's SCRAM mechanisms and iteration counts,
never a key or salt. Needs DESCRIBE on the cluster. A null or empty ``users`` array means
every user (Kafka's rule; librdkafka and the Java admin send the empty array).

Refused, each user asked for gets CLUSTER_AUTHORIZATION_FAILED with Kafka's message, and a
request for all users gets an empty list (as Metadata lists only what the caller may
describe). Kafka also sets the error at the top level; confluent-kafka 2.16 aborts the
process on any top-level error of this response (with or without a message), so it is left
out here.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 50


async def handle(ctx: BrokerContext, request: Request):
    answer = response_type(request)
    users = request.body.users
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        refused = ErrorCode.cluster_authorization_failed
        return make(answer, throttle_time=0, error_code=ErrorCode.none, error_message=None, results=[
            dict(user=u.name, error_code=refused, error_message=None, credential_infos=()) for u in users or ()
        ])
    results = ctx.security.credentials.describe([u.name for u in users] if users else None)
    return make(answer, throttle_time=0, error_code=ErrorCode.none, error_message=None, results=[
        dict(user=r.user, error_code=r.error, error_message=r.message,
             credential_infos=[dict(mechanism=m, iterations=i) for m, i in r.credentials])
        for r in results
    ])
