"""AlterUserScramCredentials (51): add, replace or delete SCRAM credentials (a salted password
travels, never the password). Needs ALTER on the cluster. Each user's changes apply
together or not at all; the errors are Kafka's (UNACCEPTABLE_CREDENTIAL for iterations
outside 4096..16384 or an empty name, RESOURCE_NOT_FOUND for deleting what does not exist,
DUPLICATE_RESOURCE for one mechanism twice, UNSUPPORTED_SASL_MECHANISM)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.credentials import Deletion, Upsertion

API_KEY = 51


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return make(response_type(request), throttle_time=0, results=[
            dict(user=name, error_code=ErrorCode.cluster_authorization_failed, error_message=None) for name in users
        ])
    try:
        results = [dict(user=r.user, error_code=r.error, error_message=r.message)
                   for r in ctx.security.credentials.alter(
                       [Deletion(d.name, d.mechanism) for d in body.deletions],
                       [Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                        for u in body.upsertions])]
    except OSError as exc:  # nothing changed
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        results = [dict(user=name, error_code=ErrorCode.unknown_server_error,
                        error_message=f"SCRAM credentials could not be stored: {exc}") for name in users]
    return make(response_type(request), throttle_time=0, results=results)
