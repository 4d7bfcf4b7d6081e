"""DescribeAcls (29): the ACL bindings matching a filter, grouped by resource pattern. Needs
DESCRIBE on the cluster; SECURITY_DISABLED without an authorizer; a filter with an unknown
field is INVALID_REQUEST."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from ._acl_filters import acl_filter, entry_fields, resource_fields
from .create_acls import refusal

API_KEY = 29


async def handle(ctx: BrokerContext, request: Request):
    answer = response_type(request)
    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return make(answer, throttle_time=0, error_code=refused[0], error_message=refused[1], resources=())
    wanted = acl_filter(request.body)
    try:
        wanted.validate()
    except ValueError as exc:
        return make(answer, throttle_time=0, error_code=ErrorCode.invalid_request, error_message=str(exc),
                    resources=())
    by_resource: dict[tuple, list] = {}
    for binding in ctx.security.authorizer.acls.find(wanted):
        key = tuple(resource_fields(binding).items())
        by_resource.setdefault(key, []).append(entry_fields(binding))
    resources = [dict(**dict(key), acls=acls) for key, acls in by_resource.items()]
    return make(answer, throttle_time=0, error_code=ErrorCode.none, error_message=None, resources=resources)
