"""CreateAcls (30): add ACL bindings. Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED);
without an authorizer every creation is SECURITY_DISABLED, as in Kafka. An invalid binding
gets INVALID_REQUEST with the reason; the valid ones of the request are all stored."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ._acl_filters import acl_binding

API_KEY = 30


def refusal(ctx: BrokerContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """Why an ACL request cannot be served at all, if it cannot."""
    if not ctx.security.authorizer.enabled:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    if not ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return None


async def handle(ctx: BrokerContext, request: Request):
    creations = request.body.creations
    refused = refusal(ctx, AclOperation.ALTER)
    results: list[dict] = []
    valid = []
    for item in creations:
        if refused is not None:
            results.append(dict(error_code=refused[0], error_message=refused[1]))
            continue
        binding = acl_binding(item)
        try:
            binding.validate()
        except ValueError as exc:
            results.append(dict(error_code=ErrorCode.invalid_request, error_message=str(exc)))
            continue
        valid.append(binding)
        results.append(dict(error_code=ErrorCode.none, error_message=None))
    if valid:
        try:
            ctx.security.authorizer.acls.add(valid)
        except OSError as exc:  # nothing was added: every accepted creation fails
            failed = dict(error_code=ErrorCode.unknown_server_error, error_message=f"ACLs could not be stored: {exc}")
            results = [failed if r["error_code"] == ErrorCode.none else r for r in results]
    return make(response_type(request), throttle_time=0, results=results)
