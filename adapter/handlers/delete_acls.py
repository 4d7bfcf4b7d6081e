"""DeleteAcls (31): remove every binding matching each filter; each filter's result lists
what it removed. Needs ALTER on the cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from ._acl_filters import acl_filter, entry_fields, resource_fields
from .create_acls import refusal

API_KEY = 31


async def handle(ctx: BrokerContext, request: Request):
    refused = refusal(ctx, AclOperation.ALTER)
    acls = ctx.security.authorizer.acls
    results: list[dict] = []
    removed = []
    for item in request.body.filters:
        if refused is not None:
            results.append(dict(error_code=refused[0], error_message=refused[1], matching_acls=()))
            continue
        wanted = acl_filter(item)
        try:
            wanted.validate()
        except ValueError as exc:
            results.append(dict(error_code=ErrorCode.invalid_request, error_message=str(exc), matching_acls=()))
            continue
        matching = acls.find(wanted)
        removed.extend(matching)
        results.append(dict(
            error_code=ErrorCode.none, error_message=None,
            matching_acls=[dict(error_code=ErrorCode.none, error_message=None, **resource_fields(b),
                                **entry_fields(b)) for b in matching],
        ))
    if removed:
        try:
            acls.remove(removed)
        except OSError as exc:  # nothing was removed: every filter that matched fails
            message = f"ACLs could not be stored: {exc}"
            results = [dict(r, error_code=ErrorCode.unknown_server_error, error_message=message, matching_acls=())
                       if r["error_code"] == ErrorCode.none and r["matching_acls"] else r for r in results]
    return make(response_type(request), throttle_time=0, filter_results=results)
